//! The iteration order of a Java 17 `HashMap<String, _>` (and of a `HashSet<String>`, which is
//! one), whatever its keys: a model of the table, not a formula.
//!
//! Kafka's output depends on that order in three places this crate reproduces: the member order
//! of the sticky assignors' tie-breaks, the topic order of the range assignor's lists, and the
//! topic order of the sticky user data. A formula ("by bucket, then insertion order") is right
//! only for maps filled by `put` whose buckets stay short. The model follows what Java 17's
//! `java.util.HashMap` does with each call:
//!
//! - `put` appends a new key at the tail of its bucket and doubles the table after the insertion
//!   that takes the size past three quarters of it (16 buckets to start with);
//! - `computeIfAbsent` puts a new key at the *head* of its bucket, and doubles the table
//!   *before* its work when the size is already past three quarters, even for a key that is
//!   present: so the table a run of `computeIfAbsent` calls leaves behind depends on whether a
//!   call came after the size crossed the threshold;
//! - a doubling splits each bucket into the two it maps to, keeping the relative order;
//! - a bucket that reaches 8 keys by `computeIfAbsent` (9 by `put`) either doubles the table
//!   (below 64 buckets) or becomes a red-black tree bin. A tree bin is still iterated along its
//!   `next` links, but those change: the tree's root is moved to the front of the bucket, and a
//!   key added to a tree bin is linked right after its parent in the tree. Its keys are ordered
//!   by spread hash (signed) and then `String.compareTo`. A doubling splits a tree bin in link
//!   order; a half of 6 keys or fewer becomes a list again, a bigger one is rebuilt as a tree
//!   (unless the other half is empty, when the tree stays as it was).
//!
//! Keys are never removed: none of the maps modelled here removes one.

use super::fast_hash::FastMap;
use super::java_hash_map::java_string_hash;

const INITIAL_BUCKETS: usize = 16;
/// A bucket of this many keys by `computeIfAbsent` (one more by `put`) becomes a tree bin.
const TREEIFY_THRESHOLD: usize = 8;
/// A tree bin split down to this many keys becomes a list again.
const UNTREEIFY_THRESHOLD: usize = 6;
/// Below this many buckets, a long bucket doubles the table instead of becoming a tree.
const MIN_TREEIFY_CAPACITY: usize = 64;

/// `HashMap.hash`: the high half of `String.hashCode()` folded into the low half.
pub(crate) fn spread_string_hash(key: &str) -> i32 {
    let h = java_string_hash(key);
    h ^ ((h as u32) >> 16) as i32
}

/// The red-black links of a node in a tree bin (Java's `TreeNode`).
#[derive(Debug, Clone, Copy, Default)]
struct TreeLinks {
    parent: Option<usize>,
    left: Option<usize>,
    right: Option<usize>,
    prev: Option<usize>,
    red: bool,
}

#[derive(Debug, Clone)]
struct Node<'k> {
    key: &'k str,
    /// The spread hash, as Java's node stores it.
    hash: i32,
    next: Option<usize>,
    /// Present while the node is in a tree bin.
    tree: Option<TreeLinks>,
}

/// A model of a Java `HashMap<String, _>` created with `new HashMap<>()`: the keys, the buckets
/// and their links, but no values (callers keep those by key). Keys are numbered in the order
/// they were first added; [`iteration_order`](Self::iteration_order) returns those numbers in
/// the order Java's iterator visits the keys.
#[derive(Debug, Clone, Default)]
pub(crate) struct JavaStringMap<'k> {
    /// Each bucket's first node; empty until the first insertion, as Java allocates lazily.
    table: Vec<Option<usize>>,
    /// The size past which the table doubles: three quarters of its length.
    threshold: usize,
    /// Every node, numbered by first insertion.
    nodes: Vec<Node<'k>>,
    index: FastMap<&'k str, usize>,
}

impl<'k> JavaStringMap<'k> {
    pub(crate) fn new() -> Self {
        JavaStringMap::default()
    }

    /// The number of keys.
    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    /// `map.put(key, value)`: adds `key` at the tail of its bucket unless present. Returns its
    /// number.
    pub(crate) fn put(&mut self, key: &'k str) -> usize {
        if self.table.is_empty() {
            self.resize();
        }
        if let Some(&id) = self.index.get(key) {
            return id;
        }
        let hash = spread_string_hash(key);
        let bucket = self.bucket_of(hash);
        let id = match self.table[bucket] {
            None => {
                let id = self.new_node(key, hash, None);
                self.table[bucket] = Some(id);
                id
            }
            Some(first) if self.nodes[first].tree.is_some() => self.put_tree_node(first, key, hash),
            Some(first) => {
                let mut tail = first;
                let mut before_tail = 0usize;
                while let Some(next) = self.nodes[tail].next {
                    tail = next;
                    before_tail += 1;
                }
                let id = self.new_node(key, hash, None);
                self.nodes[tail].next = Some(id);
                // Java counts the nodes it stepped over before the old tail: a bucket that
                // held 8 (now 9) is too long.
                if before_tail >= TREEIFY_THRESHOLD - 1 {
                    self.treeify_bin(hash);
                }
                id
            }
        };
        if self.nodes.len() > self.threshold {
            self.resize();
        }
        id
    }

    /// `map.computeIfAbsent(key, f)` with an `f` that returns a value: doubles the table first
    /// if the size is past the threshold, then adds `key` at the head of its bucket unless
    /// present. Returns its number.
    pub(crate) fn compute_if_absent(&mut self, key: &'k str) -> usize {
        if self.nodes.len() > self.threshold || self.table.is_empty() {
            self.resize();
        }
        if let Some(&id) = self.index.get(key) {
            return id;
        }
        let hash = spread_string_hash(key);
        let bucket = self.bucket_of(hash);
        match self.table[bucket] {
            Some(first) if self.nodes[first].tree.is_some() => self.put_tree_node(first, key, hash),
            first => {
                let already = self.chain(first).count();
                let id = self.new_node(key, hash, first);
                self.table[bucket] = Some(id);
                // Java counts the nodes it searched: a bucket that held 7 (now 8) is too long.
                if already >= TREEIFY_THRESHOLD - 1 {
                    self.treeify_bin(hash);
                }
                id
            }
        }
    }

    /// The keys' numbers in the order Java's iterator visits them: bucket by bucket, each along
    /// its links.
    pub(crate) fn iteration_order(&self) -> Vec<usize> {
        self.table
            .iter()
            .flat_map(|&first| self.chain(first))
            .collect()
    }

    /// The key numbered `id`.
    pub(crate) fn key(&self, id: usize) -> &'k str {
        self.nodes[id].key
    }

    /// The keys in iteration order.
    pub(crate) fn keys_in_order(&self) -> Vec<&'k str> {
        self.iteration_order()
            .into_iter()
            .map(|id| self.nodes[id].key)
            .collect()
    }

    fn new_node(&mut self, key: &'k str, hash: i32, next: Option<usize>) -> usize {
        let id = self.nodes.len();
        self.nodes.push(Node {
            key,
            hash,
            next,
            tree: None,
        });
        self.index.insert(key, id);
        id
    }

    fn bucket_of(&self, hash: i32) -> usize {
        (hash as u32 as usize) & (self.table.len() - 1)
    }

    /// The nodes linked from `first`, in link order.
    fn chain(&self, first: Option<usize>) -> impl Iterator<Item = usize> + '_ {
        std::iter::successors(first, |&id| self.nodes[id].next)
    }

    /// Doubles the table (or allocates its first 16 buckets) and splits every bucket.
    fn resize(&mut self) {
        let old_len = self.table.len();
        let (new_len, new_threshold) = if old_len == 0 {
            (INITIAL_BUCKETS, INITIAL_BUCKETS / 4 * 3)
        } else {
            (old_len * 2, self.threshold * 2)
        };
        let old = std::mem::replace(&mut self.table, vec![None; new_len]);
        self.threshold = new_threshold;
        for (at, first) in old.into_iter().enumerate() {
            let Some(first) = first else { continue };
            if self.nodes[first].next.is_none() {
                let bucket = self.bucket_of(self.nodes[first].hash);
                self.table[bucket] = Some(first);
            } else if self.nodes[first].tree.is_some() {
                self.split_tree_bin(first, at, old_len);
            } else {
                let (low, high): (Vec<usize>, Vec<usize>) = self
                    .chain(Some(first))
                    .partition(|&id| (self.nodes[id].hash as u32 as usize) & old_len == 0);
                self.table[at] = self.link(&low);
                self.table[at + old_len] = self.link(&high);
            }
        }
    }

    /// Links `ids` in this order (and their `prev` links, for tree nodes); returns the first.
    fn link(&mut self, ids: &[usize]) -> Option<usize> {
        for (i, &id) in ids.iter().enumerate() {
            self.nodes[id].next = ids.get(i + 1).copied();
            let prev = i.checked_sub(1).map(|p| ids[p]);
            if let Some(links) = self.nodes[id].tree.as_mut() {
                links.prev = prev;
            }
        }
        ids.first().copied()
    }

    /// Java's `TreeNode.split`: a tree bin's nodes go to bucket `at` or `at + bit` in link
    /// order; a half of at most 6 becomes a list, a bigger one a new tree unless it is the whole.
    fn split_tree_bin(&mut self, first: usize, at: usize, bit: usize) {
        let (low, high): (Vec<usize>, Vec<usize>) = self
            .chain(Some(first))
            .partition(|&id| (self.nodes[id].hash as u32 as usize) & bit == 0);
        for (half, bucket, other_empty) in [
            (low.as_slice(), at, high.is_empty()),
            (high.as_slice(), at + bit, low.is_empty()),
        ] {
            if half.is_empty() {
                continue;
            }
            self.table[bucket] = self.link(half);
            if half.len() <= UNTREEIFY_THRESHOLD {
                for &id in half {
                    self.nodes[id].tree = None;
                }
            } else if !other_empty {
                self.treeify(half[0]);
            }
        }
    }

    /// Java's `treeifyBin`: doubles a table of fewer than 64 buckets, else turns the bucket of
    /// `hash` into a tree bin.
    fn treeify_bin(&mut self, hash: i32) {
        if self.table.len() < MIN_TREEIFY_CAPACITY {
            self.resize();
            return;
        }
        let bucket = self.bucket_of(hash);
        let ids: Vec<usize> = self.chain(self.table[bucket]).collect();
        for &id in &ids {
            self.nodes[id].tree = Some(TreeLinks::default());
        }
        if let Some(first) = self.link(&ids) {
            self.treeify(first);
        }
    }

    /// Whether the new key `(hash, key)` goes left of node `at` (Java's `dir <= 0`): by spread
    /// hash as a signed number, then by `String.compareTo` (UTF-16 code units).
    fn goes_left(&self, hash: i32, key: &str, at: usize) -> bool {
        let node = &self.nodes[at];
        match node.hash.cmp(&hash) {
            std::cmp::Ordering::Greater => true,
            std::cmp::Ordering::Less => false,
            std::cmp::Ordering::Equal => key.encode_utf16().cmp(node.key.encode_utf16()).is_le(),
        }
    }

    fn links(&self, id: usize) -> TreeLinks {
        self.nodes[id].tree.unwrap_or_default()
    }

    fn links_mut(&mut self, id: usize) -> &mut TreeLinks {
        self.nodes[id].tree.get_or_insert_with(TreeLinks::default)
    }

    fn is_red(&self, id: Option<usize>) -> bool {
        id.is_some_and(|id| self.links(id).red)
    }

    /// Java's `TreeNode.treeify`: inserts the nodes linked from `first` into a new tree in
    /// link order, then moves the root to the front of the bucket.
    fn treeify(&mut self, first: usize) {
        let ids: Vec<usize> = self.chain(Some(first)).collect();
        let mut root: Option<usize> = None;
        for id in ids {
            {
                let links = self.links_mut(id);
                links.left = None;
                links.right = None;
                links.parent = None;
            }
            match root {
                None => {
                    self.links_mut(id).red = false;
                    root = Some(id);
                }
                Some(r) => {
                    let (hash, key) = (self.nodes[id].hash, self.nodes[id].key);
                    let parent = self.descend(r, hash, key);
                    self.attach(parent, id, hash, key);
                    root = Some(self.balance_insertion(r, id));
                }
            }
        }
        if let Some(root) = root {
            self.move_root_to_front(root);
        }
    }

    /// The node under which `(hash, key)` is attached, descending from `root`.
    fn descend(&self, root: usize, hash: i32, key: &str) -> usize {
        let mut at = root;
        loop {
            let links = self.links(at);
            let child = if self.goes_left(hash, key, at) {
                links.left
            } else {
                links.right
            };
            match child {
                Some(child) => at = child,
                None => return at,
            }
        }
    }

    fn attach(&mut self, parent: usize, id: usize, hash: i32, key: &str) {
        let left = self.goes_left(hash, key, parent);
        let parent_links = self.links_mut(parent);
        if left {
            parent_links.left = Some(id);
        } else {
            parent_links.right = Some(id);
        }
        self.links_mut(id).parent = Some(parent);
    }

    /// Java's `TreeNode.putTreeVal` for a new key: attached in the tree, and linked right after
    /// its parent in the bucket's links; then the tree is balanced and its root moved to the
    /// front.
    fn put_tree_node(&mut self, first: usize, key: &'k str, hash: i32) -> usize {
        let mut root = first;
        while let Some(parent) = self.links(root).parent {
            root = parent;
        }
        let parent = self.descend(root, hash, key);
        let after_parent = self.nodes[parent].next;
        let id = self.new_node(key, hash, after_parent);
        self.nodes[id].tree = Some(TreeLinks {
            prev: Some(parent),
            ..TreeLinks::default()
        });
        self.attach(parent, id, hash, key);
        self.nodes[parent].next = Some(id);
        if let Some(after) = after_parent {
            self.links_mut(after).prev = Some(id);
        }
        let root = self.balance_insertion(root, id);
        self.move_root_to_front(root);
        id
    }

    fn rotate_left(&mut self, mut root: usize, p: usize) -> usize {
        let Some(r) = self.links(p).right else {
            return root;
        };
        let r_left = self.links(r).left;
        self.links_mut(p).right = r_left;
        if let Some(rl) = r_left {
            self.links_mut(rl).parent = Some(p);
        }
        let pp = self.links(p).parent;
        self.links_mut(r).parent = pp;
        match pp {
            None => {
                root = r;
                self.links_mut(r).red = false;
            }
            Some(pp) if self.links(pp).left == Some(p) => self.links_mut(pp).left = Some(r),
            Some(pp) => self.links_mut(pp).right = Some(r),
        }
        self.links_mut(r).left = Some(p);
        self.links_mut(p).parent = Some(r);
        root
    }

    fn rotate_right(&mut self, mut root: usize, p: usize) -> usize {
        let Some(l) = self.links(p).left else {
            return root;
        };
        let l_right = self.links(l).right;
        self.links_mut(p).left = l_right;
        if let Some(lr) = l_right {
            self.links_mut(lr).parent = Some(p);
        }
        let pp = self.links(p).parent;
        self.links_mut(l).parent = pp;
        match pp {
            None => {
                root = l;
                self.links_mut(l).red = false;
            }
            Some(pp) if self.links(pp).right == Some(p) => self.links_mut(pp).right = Some(l),
            Some(pp) => self.links_mut(pp).left = Some(l),
        }
        self.links_mut(l).right = Some(p);
        self.links_mut(p).parent = Some(l);
        root
    }

    /// The red-black insertion fix-up of CLR, as Java's `balanceInsertion` runs it; returns the
    /// root.
    fn balance_insertion(&mut self, mut root: usize, mut x: usize) -> usize {
        self.links_mut(x).red = true;
        loop {
            let Some(xp) = self.links(x).parent else {
                self.links_mut(x).red = false;
                return x;
            };
            let Some(xpp) = self.links(xp).parent.filter(|_| self.links(xp).red) else {
                return root;
            };
            let parent_is_left = self.links(xpp).left == Some(xp);
            let uncle = if parent_is_left {
                self.links(xpp).right
            } else {
                self.links(xpp).left
            };
            if let Some(uncle) = uncle.filter(|&u| self.is_red(Some(u))) {
                self.links_mut(uncle).red = false;
                self.links_mut(xp).red = false;
                self.links_mut(xpp).red = true;
                x = xpp;
                continue;
            }
            let (mut xp, mut xpp) = (Some(xp), Some(xpp));
            let inner = if parent_is_left {
                xp.and_then(|p| self.links(p).right) == Some(x)
            } else {
                xp.and_then(|p| self.links(p).left) == Some(x)
            };
            if inner {
                x = xp.unwrap_or(x);
                root = if parent_is_left {
                    self.rotate_left(root, x)
                } else {
                    self.rotate_right(root, x)
                };
                xp = self.links(x).parent;
                xpp = xp.and_then(|p| self.links(p).parent);
            }
            if let Some(xp) = xp {
                self.links_mut(xp).red = false;
                if let Some(xpp) = xpp {
                    self.links_mut(xpp).red = true;
                    root = if parent_is_left {
                        self.rotate_right(root, xpp)
                    } else {
                        self.rotate_left(root, xpp)
                    };
                }
            }
        }
    }

    /// Java's `moveRootToFront`: unlinks the root from where it is and makes it the bucket's
    /// first node.
    fn move_root_to_front(&mut self, root: usize) {
        let bucket = self.bucket_of(self.nodes[root].hash);
        let first = self.table[bucket];
        if first == Some(root) {
            return;
        }
        self.table[bucket] = Some(root);
        let root_prev = self.links(root).prev;
        let root_next = self.nodes[root].next;
        if let Some(next) = root_next {
            self.links_mut(next).prev = root_prev;
        }
        if let Some(prev) = root_prev {
            self.nodes[prev].next = root_next;
        }
        if let Some(first) = first {
            self.links_mut(first).prev = Some(root);
        }
        self.nodes[root].next = first;
        self.links_mut(root).prev = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put_all<'k>(keys: &[&'k str]) -> JavaStringMap<'k> {
        let mut map = JavaStringMap::new();
        for key in keys {
            map.put(key);
        }
        map
    }

    /// Strings made of the blocks "Aa" and "BB" all share one `hashCode`.
    fn same_hash(blocks: usize) -> Vec<String> {
        (0..1usize << blocks)
            .map(|bits| {
                (0..blocks)
                    .map(|b| if bits >> b & 1 == 0 { "Aa" } else { "BB" })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn put_keeps_insertion_order_within_a_bucket_and_compute_if_absent_reverses_it() {
        // "t1" and "t19" share bucket 13 of 16.
        assert_eq!(put_all(&["t1", "t19"]).keys_in_order(), ["t1", "t19"]);
        let mut grouped = JavaStringMap::new();
        grouped.compute_if_absent("t1");
        grouped.compute_if_absent("t19");
        assert_eq!(grouped.keys_in_order(), ["t19", "t1"]);
    }

    #[test]
    fn compute_if_absent_doubles_the_table_only_on_the_call_after_the_threshold() {
        let names: Vec<String> = (0..13).map(|i| format!("topic-{i}")).collect();
        let mut map = JavaStringMap::new();
        for name in &names {
            map.compute_if_absent(name);
        }
        assert_eq!(map.table.len(), 16, "13 keys, no call after the 13th");
        map.compute_if_absent(&names[0]);
        assert_eq!(map.table.len(), 32, "a call for a present key doubles it");
        assert_eq!(
            put_all(&names.iter().map(String::as_str).collect::<Vec<_>>())
                .table
                .len(),
            32
        );
    }

    #[test]
    fn a_long_bucket_doubles_a_small_table_then_becomes_a_tree_with_its_root_first() {
        let names = same_hash(4);
        let mut map = JavaStringMap::new();
        for name in &names {
            map.compute_if_absent(name);
        }
        assert_eq!(map.table.len(), 64);
        let first = map
            .table
            .iter()
            .flatten()
            .next()
            .copied()
            .expect("a bucket");
        let links = map.nodes[first].tree.expect("a tree bin");
        assert!(
            links.parent.is_none() && !links.red,
            "the root leads the bucket"
        );
        let mut order = map.keys_in_order();
        assert_eq!(order.len(), 16);
        order.sort();
        let mut expected: Vec<&str> = names.iter().map(String::as_str).collect();
        expected.sort();
        assert_eq!(order, expected, "every key once");
    }
}
