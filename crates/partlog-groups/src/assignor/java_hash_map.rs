//! Java's hash codes, and the iteration order of the Java `HashMap`s and `HashSet`s Kafka's
//! assignors depend on for tie-breaks.
//!
//! Maps keyed by strings (member ids, topic names) are modelled whole by
//! [`JavaStringMap`](super::java_string_map::JavaStringMap). The sets of topic-partitions the
//! sticky assignor's movement records use are [`JavaHashSet`]: a set filled by `add` starts with
//! 16 buckets and doubles them whenever it holds more than three quarters as many entries; entry
//! `k` goes to bucket `(h ^ (h >>> 16)) & (buckets - 1)` with `h = k.hashCode()`, and iteration
//! walks the buckets in order, each bucket's entries in insertion order (a resize keeps their
//! relative order). Kafka's `String` and `TopicPartition` keys hash as [`java_string_hash`] and
//! [`topic_partition_hash`] say.
//!
//! Not emulated in [`JavaHashSet`]: a bucket of more than eight colliding topic-partitions,
//! which doubles a table of fewer than 64 buckets and otherwise becomes a tree ordered, for keys
//! that are not `Comparable` as `TopicPartition` is not, by identity hash codes: an order no
//! other process can reproduce.

use super::fast_hash::FastMap;
use super::java_string_map::JavaStringMap;
use std::hash::Hash;

use super::{MapOrder, TopicPartition};

/// Java's `String.hashCode()`: `h = 31 * h + c` over the UTF-16 code units, wrapping.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// Kafka's `TopicPartition.hashCode()`: `31 * (31 + partition) + topic.hashCode()`, wrapping.
pub fn topic_partition_hash(tp: &TopicPartition) -> i32 {
    31i32
        .wrapping_mul(31i32.wrapping_add(tp.partition))
        .wrapping_add(java_string_hash(&tp.topic))
}

/// `HashMap.hash`: the high half folded into the low half.
fn spread(hash: i32) -> u32 {
    let h = hash as u32;
    h ^ (h >> 16)
}

/// The bucket count of a `HashMap` (or `HashSet`) that has held at most `entries` entries.
fn capacity_for(entries: usize) -> usize {
    let mut capacity = 16usize;
    while entries > capacity / 4 * 3 {
        capacity *= 2;
    }
    capacity
}

/// The order in which Kafka iterates a map keyed by these member ids, filled by `put` in this
/// order: indices into `ids`. The ids must be distinct.
pub(crate) fn member_iteration_order(ids: &[&str], order: MapOrder) -> Vec<usize> {
    match order {
        MapOrder::JavaHashMap => {
            let mut map = JavaStringMap::new();
            for id in ids {
                map.put(id);
            }
            map.iteration_order()
        }
        MapOrder::Sorted => {
            let mut indices: Vec<usize> = (0..ids.len()).collect();
            indices.sort_by(|&a, &b| ids[a].cmp(ids[b]).then(a.cmp(&b)));
            indices
        }
    }
}

/// A set whose [`first`](JavaHashSet::first) element is the one a Java `HashSet`'s iterator
/// returns first (or the smallest, with [`MapOrder::Sorted`]).
#[derive(Debug, Clone)]
pub(crate) struct JavaHashSet<T: Hash + Eq + Ord + Clone> {
    order: MapOrder,
    /// The most entries the set has held: Java's table grows and never shrinks.
    high_water: usize,
    next_insertion: u64,
    /// Each element's hash code and insertion sequence number.
    entries: FastMap<T, (i32, u64)>,
}

impl<T: Hash + Eq + Ord + Clone> JavaHashSet<T> {
    pub(crate) fn new(order: MapOrder) -> Self {
        JavaHashSet {
            order,
            high_water: 0,
            next_insertion: 0,
            entries: FastMap::default(),
        }
    }

    /// Adds `value` (hash code `hash`) unless present; a present element keeps its place.
    pub(crate) fn insert(&mut self, value: T, hash: i32) {
        if self.entries.contains_key(&value) {
            return;
        }
        self.entries.insert(value, (hash, self.next_insertion));
        self.next_insertion += 1;
        self.high_water = self.high_water.max(self.entries.len());
    }

    pub(crate) fn remove(&mut self, value: &T) {
        self.entries.remove(value);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Feeds the set's iteration order and table size into `state`.
    pub(crate) fn fingerprint(&self, state: &mut impl std::hash::Hasher) {
        let mask = capacity_for(self.high_water) - 1;
        let mut ordered: Vec<(usize, u64, &T)> = self
            .entries
            .iter()
            .map(|(value, (hash, seq))| ((spread(*hash) as usize) & mask, *seq, value))
            .collect();
        ordered.sort_by_key(|&(bucket, seq, _)| (bucket, seq));
        mask.hash(state);
        for (_, _, value) in ordered {
            value.hash(state);
        }
    }

    /// The element Java's iterator would return first.
    pub(crate) fn first(&self) -> Option<&T> {
        match self.order {
            MapOrder::Sorted => self.entries.keys().min(),
            MapOrder::JavaHashMap => {
                let mask = capacity_for(self.high_water) - 1;
                self.entries
                    .iter()
                    .min_by_key(|(_, (hash, seq))| ((spread(*hash) as usize) & mask, *seq))
                    .map(|(value, _)| value)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_string_hash_matches_java_for_known_strings() {
        // Values from Java: "".hashCode(), "a".hashCode(), "consumer1".hashCode(), and a string
        // long enough to wrap.
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("abc"), 96354);
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
    }

    #[test]
    fn hash_map_capacity_doubles_past_three_quarters() {
        assert_eq!(capacity_for(12), 16);
        assert_eq!(capacity_for(13), 32);
        assert_eq!(capacity_for(24), 32);
        assert_eq!(capacity_for(25), 64);
    }

    #[test]
    fn member_iteration_is_by_bucket_then_insertion() {
        // "t1" and "t19" share bucket 13 of 16, "t0" is in bucket 12.
        let ids = ["t19", "t1", "t0"];
        assert_eq!(
            member_iteration_order(&ids, MapOrder::JavaHashMap),
            vec![2, 0, 1]
        );
        assert_eq!(
            member_iteration_order(&ids, MapOrder::Sorted),
            vec![2, 1, 0]
        );
    }

    #[test]
    fn hash_set_first_follows_buckets_and_keeps_growth() {
        let mut set = JavaHashSet::new(MapOrder::JavaHashMap);
        set.insert(5u32, 5);
        set.insert(3u32, 3);
        assert_eq!(set.first(), Some(&3));
        set.remove(&3);
        assert_eq!(set.first(), Some(&5));
    }
}
