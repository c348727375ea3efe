//! [`PositionCache`]: where batches start, learned from the index walks of reads.
//!
//! Kafka's offset index is sparse (one entry per `index.interval.bytes`), so a read of a random
//! offset reads the file from the index entry and walks the batch headers up to the batch that
//! holds the offset. The walk reads the whole interval anyway; this cache keeps the batch
//! boundaries it saw (a *run*: consecutive batches from the entry's batch on), so that the next
//! read of an offset in the same interval reads just its batch, with no index lookup and no walk.
//!
//! - **Bounded.** A segment keeps at most `position_cache_bytes` of runs (4 bytes a batch plus
//!   a fixed cost a run; default [`DEFAULT_POSITION_CACHE_BYTES`], 0 turns the cache off); when
//!   a new run does not fit, the older half of the runs (in the order learned) is dropped, so
//!   that a full cache goes on serving the newer half instead of starting again empty. The
//!   cache lives and dies with the open segment (a closed idle segment frees it), so a log
//!   holds at most 65 of them (64 open sealed segments and the active one): about 130 MiB at
//!   the default in the worst case, reached only by random reads over every batch of every
//!   open segment. A hit allocates nothing; a miss allocates the run it learns.
//! - **Never trusted blindly.** A position from the cache is only a hint: the read checks that
//!   the bytes there are a whole v2 batch of the cached size whose offsets hold the wanted
//!   offset, within the published size, and the CRC as for any returned batch; anything else
//!   falls back to the index walk. Offsets within a segment strictly increase, so the one batch
//!   that holds an offset is the answer the walk would give.
//! - **Cut files forget.** Every truncation of the segment empties the cache after the cut and
//!   bumps its generation; a read that learned a run from bytes read before the cut (its
//!   generation is older) does not insert it.
//! - **Readers never block appends.** Appends never touch the cache; readers take its read lock
//!   to look up, and insert only when its write lock is free.

use crate::sync::atomic::{AtomicU64, Ordering};

use crate::sync::RwLock;

/// The default of the most memory one segment's cache holds: 4 bytes a batch plus
/// [`RUN_OVERHEAD_BYTES`] a run (and 2 bytes of the run's end), so about 340,000 batches of 170
/// bytes (runs of 24 in a 4 KiB index interval, about 146 bytes a run): some 58 MB of them, most
/// of a 64 MiB segment (the 394,000 of a whole one need about 2.4 MB).
pub(crate) const DEFAULT_POSITION_CACHE_BYTES: usize = 2 << 20;

/// What one run costs beyond its batches: the run (32 bytes) and its key and slot in the
/// sorted arrays (12), rounded up.
const RUN_OVERHEAD_BYTES: usize = 48;

/// A batch the cache locates: where it starts and how long it is, and its last offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CachedBatch {
    /// The file position of the batch.
    pub position: u64,
    /// Its size in bytes, including the 12-byte log overhead.
    pub size: u64,
    /// Its last offset.
    pub last_offset: i64,
}

/// Consecutive batches starting at `start_position`, stored in the cache's arena at `at`:
/// `batches` last-offset deltas (increasing; batch `i`'s last offset is
/// `first_last_offset + delta`), then `batches + 1` position deltas (batch `i` starts at
/// `start_position + position[i]` and ends where batch `i + 1` starts).
#[derive(Debug, Clone, Copy)]
struct Run {
    /// The first offset the run covers: its first batch's base offset.
    key: i64,
    first_last_offset: i64,
    start_position: u64,
    at: u32,
    batches: u16,
}

impl Run {
    fn bytes(&self) -> usize {
        RUN_OVERHEAD_BYTES + 2 * (2 * usize::from(self.batches) + 1)
    }

    /// The first batch of the run whose last offset is at or above `offset`.
    fn find(&self, arena: &[u16], offset: i64) -> Option<CachedBatch> {
        let delta = offset.checked_sub(self.first_last_offset)?;
        let delta = u16::try_from(delta.max(0)).ok()?;
        let at = usize::try_from(self.at).ok()?;
        let batches = usize::from(self.batches);
        let lasts = arena.get(at..at + batches)?;
        let positions = arena.get(at + batches..at + 2 * batches + 1)?;
        let index = lasts.partition_point(|&last| last < delta);
        let last = *lasts.get(index)?;
        let from = *positions.get(index)?;
        let to = *positions.get(index + 1)?;
        Some(CachedBatch {
            position: self.start_position + u64::from(from),
            size: u64::from(to.checked_sub(from)?),
            last_offset: self.first_last_offset + i64::from(last),
        })
    }
}

/// The fewest new runs that wait, apart, before they are merged into the sorted ones.
const PENDING_RUNS: usize = 32;

/// The runs, found by the first offset each covers.
///
/// A run is stored once, in `all`, and found through two sorted key arrays: `sorted`, the
/// bulk, and `pending`, the recent ones, each a binary search over contiguous keys (a B-tree's
/// pointer chase measured three times slower). A new run goes into `pending` (a move of at
/// most its length), and `pending` is merged into `sorted` once it holds about the square root
/// of `sorted`'s length: a merge moves 12 bytes a run, so an insertion costs amortised
/// O(sqrt(runs)), and no read pays for a merge of the whole cache more than once in sqrt(runs)
/// insertions (merging every 32 insertions, with a sort of the whole runs, made one cold read
/// in a hundred 10x slower than the rest). Their deltas live in one arena, not one allocation
/// a run: a lookup touches few cache lines.
#[derive(Debug, Default)]
struct Runs {
    /// Every run, in the order learned; replaced in place when a run's key comes again.
    all: Vec<Run>,
    /// Keys and slots in `all` of the merged runs, sorted by key, no two alike.
    sorted: SortedKeys,
    /// Keys and slots of the runs learned since the last merge, sorted by key; no key of
    /// theirs is in `sorted`.
    pending: SortedKeys,
    arena: Vec<u16>,
    bytes: usize,
}

/// Run keys in increasing order beside the slots of their runs (apart: a binary search
/// touches 8 bytes a run).
#[derive(Debug, Default)]
struct SortedKeys {
    keys: Vec<i64>,
    slots: Vec<u32>,
}

impl SortedKeys {
    fn clear(&mut self) {
        self.keys.clear();
        self.slots.clear();
    }

    /// The greatest key at or below `offset`, with its run's slot.
    fn floor(&self, offset: i64) -> Option<(i64, u32)> {
        let at = self
            .keys
            .partition_point(|&key| key <= offset)
            .checked_sub(1)?;
        Some((*self.keys.get(at)?, *self.slots.get(at)?))
    }

    fn insert(&mut self, key: i64, slot: u32) {
        let at = self.keys.partition_point(|&k| k < key);
        self.keys.insert(at, key);
        self.slots.insert(at, slot);
    }

    /// Both key arrays merged into one (neither shares a key with the other). `other` is the
    /// short one: each of its keys finds its place in `self` by a binary search, and the keys
    /// of `self` between two places move as one slice.
    fn merge(&self, other: &SortedKeys) -> SortedKeys {
        let len = self.keys.len() + other.keys.len();
        let mut merged = SortedKeys {
            keys: Vec::with_capacity(len),
            slots: Vec::with_capacity(len),
        };
        let mut from = 0;
        for (&key, &slot) in other.keys.iter().zip(&other.slots) {
            let rest = self.keys.get(from..).unwrap_or_default();
            let to = from + rest.partition_point(|&k| k < key);
            merged
                .keys
                .extend_from_slice(self.keys.get(from..to).unwrap_or_default());
            merged
                .slots
                .extend_from_slice(self.slots.get(from..to).unwrap_or_default());
            merged.keys.push(key);
            merged.slots.push(slot);
            from = to;
        }
        merged
            .keys
            .extend_from_slice(self.keys.get(from..).unwrap_or_default());
        merged
            .slots
            .extend_from_slice(self.slots.get(from..).unwrap_or_default());
        merged
    }
}

impl Runs {
    fn clear(&mut self) {
        self.all.clear();
        self.sorted.clear();
        self.pending.clear();
        self.arena.clear();
        self.bytes = 0;
    }

    /// The slot in `all` of the run with the greatest key at or below `offset`.
    fn floor(&self, offset: i64) -> Option<usize> {
        let best = match (self.sorted.floor(offset), self.pending.floor(offset)) {
            (Some(a), Some(b)) => Some(if a.0 >= b.0 { a } else { b }),
            (a, b) => a.or(b),
        };
        best.and_then(|(_, slot)| usize::try_from(slot).ok())
    }

    fn get(&self, slot: usize) -> Option<&Run> {
        self.all.get(slot)
    }

    fn insert(&mut self, run: Run) {
        let existing = self
            .floor(run.key)
            .filter(|&slot| self.all.get(slot).is_some_and(|found| found.key == run.key));
        if let Some(found) = existing.and_then(|slot| self.all.get_mut(slot)) {
            // The old run's deltas stay in the arena, counted, until the cache is emptied or
            // its older half dropped.
            *found = run;
            return;
        }
        let Ok(slot) = u32::try_from(self.all.len()) else {
            return;
        };
        self.all.push(run);
        self.pending.insert(run.key, slot);
        if self.pending.keys.len() >= PENDING_RUNS.max(self.sorted.keys.len().isqrt()) {
            self.sorted = self.sorted.merge(&self.pending);
            self.pending.clear();
        }
    }

    /// Keeps the newer half of the runs (in the order learned) and only their deltas: a full
    /// cache makes room without turning every read after it into a miss. One pass over the
    /// kept runs, once per half a cache of new runs: amortised O(1) an insertion.
    fn drop_older_half(&mut self) {
        let kept = self.all.get(self.all.len() / 2..).unwrap_or_default();
        let mut all = Vec::with_capacity(kept.len());
        let mut arena = Vec::with_capacity(self.arena.len() / 2);
        let mut bytes = 0;
        for run in kept {
            let from = usize::try_from(run.at).unwrap_or(usize::MAX);
            let len = 2 * usize::from(run.batches) + 1;
            let (Some(deltas), Ok(at)) = (
                from.checked_add(len)
                    .and_then(|to| self.arena.get(from..to)),
                u32::try_from(arena.len()),
            ) else {
                continue;
            };
            arena.extend_from_slice(deltas);
            all.push(Run { at, ..*run });
            bytes += run.bytes();
        }
        let mut keys: Vec<(i64, u32)> = all
            .iter()
            .enumerate()
            .filter_map(|(slot, run)| Some((run.key, u32::try_from(slot).ok()?)))
            .collect();
        keys.sort_unstable_by_key(|&(key, _)| key);
        self.sorted = SortedKeys {
            keys: keys.iter().map(|&(key, _)| key).collect(),
            slots: keys.iter().map(|&(_, slot)| slot).collect(),
        };
        self.pending.clear();
        self.all = all;
        self.arena = arena;
        self.bytes = bytes;
    }
}

/// One segment's cache of batch positions (see the module docs).
#[derive(Debug)]
pub(crate) struct PositionCache {
    /// The most bytes `runs` may account for; 0: the cache never learns.
    limit: usize,
    runs: RwLock<Runs>,
    /// Bumped by [`forget`](Self::forget): runs learned under an older generation are stale.
    generation: AtomicU64,
}

/// The batches a new run has room for before it grows: a 4 KiB index interval and the one
/// after it of the smallest (about 70-byte) batches, so a learned run does not reallocate.
const RUN_CAPACITY: usize = 128;

/// Learns a run: the batches a read saw, in file order.
#[derive(Debug)]
pub(crate) struct RunBuilder {
    start_position: u64,
    first_base_offset: i64,
    first_last_offset: i64,
    positions: Vec<u16>,
    lasts: Vec<u16>,
}

impl RunBuilder {
    /// A run whose first batch, at `position`, holds `[base_offset, last_offset]`.
    pub fn new(position: u64, base_offset: i64, last_offset: i64, size: u64) -> Option<Self> {
        let size = u16::try_from(size).ok()?;
        (base_offset <= last_offset).then(|| RunBuilder {
            start_position: position,
            first_base_offset: base_offset,
            first_last_offset: last_offset,
            positions: {
                let mut positions = Vec::with_capacity(RUN_CAPACITY + 1);
                positions.extend([0, size]);
                positions
            },
            lasts: {
                let mut lasts = Vec::with_capacity(RUN_CAPACITY);
                lasts.push(0);
                lasts
            },
        })
    }

    /// Adds the batch that follows the last one; `false` (and nothing added) when it does not
    /// follow it or does not fit the run's 16-bit deltas: the run ends there.
    pub fn push(&mut self, position: u64, base_offset: i64, last_offset: i64, size: u64) -> bool {
        let end = self.positions.last().copied().unwrap_or(0);
        let follows = position == self.start_position + u64::from(end);
        let previous_last =
            self.first_last_offset + i64::from(self.lasts.last().copied().unwrap_or(0));
        let new_end = u64::from(end)
            .checked_add(size)
            .and_then(|end| u16::try_from(end).ok());
        let last_delta = last_offset
            .checked_sub(self.first_last_offset)
            .and_then(|delta| u16::try_from(delta).ok());
        match (
            follows && base_offset > previous_last && base_offset <= last_offset,
            new_end,
            last_delta,
        ) {
            (true, Some(new_end), Some(last_delta)) => {
                self.positions.push(new_end);
                self.lasts.push(last_delta);
                true
            }
            _ => false,
        }
    }
}

impl Default for PositionCache {
    fn default() -> Self {
        PositionCache::new(DEFAULT_POSITION_CACHE_BYTES)
    }
}

impl PositionCache {
    /// An empty cache that holds at most `limit` bytes of runs (0: it never learns).
    pub fn new(limit: usize) -> PositionCache {
        PositionCache {
            limit,
            runs: RwLock::default(),
            generation: AtomicU64::new(0),
        }
    }

    /// The current generation, to hand back to [`learn`](Self::learn) with a run learned from
    /// bytes read after this call.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The cached batch holding `offset`, or the first one after it in a run that covers it.
    pub fn find(&self, offset: i64) -> Option<CachedBatch> {
        let runs = self.runs.read();
        let slot = runs.floor(offset)?;
        runs.get(slot)?.find(&runs.arena, offset)
    }

    /// Keeps a learned run unless the cache was emptied since `generation` (the bytes may be
    /// gone) or another thread holds the cache. A run that does not fit drops the older half of
    /// the runs first.
    pub fn learn(&self, run: RunBuilder, generation: u64) {
        let Ok(batches) = u16::try_from(run.lasts.len()) else {
            return;
        };
        let Some(mut runs) = self.runs.try_write() else {
            return;
        };
        if self.generation.load(Ordering::Acquire) != generation {
            return;
        }
        let mut stored = Run {
            key: run.first_base_offset,
            first_last_offset: run.first_last_offset,
            start_position: run.start_position,
            at: 0,
            batches,
        };
        let bytes = stored.bytes();
        if bytes > self.limit {
            return;
        }
        if runs.bytes + bytes > self.limit {
            runs.drop_older_half();
            if runs.bytes + bytes > self.limit {
                runs.clear();
            }
        }
        let Ok(at) = u32::try_from(runs.arena.len()) else {
            return;
        };
        stored.at = at;
        runs.arena.extend_from_slice(&run.lasts);
        runs.arena.extend_from_slice(&run.positions);
        runs.bytes += bytes;
        runs.insert(stored);
    }

    /// Empties the cache and bumps its generation. Call after the file was cut.
    pub fn forget(&self) {
        let mut runs = self.runs.write();
        self.generation.fetch_add(1, Ordering::AcqRel);
        runs.clear();
    }

    /// The bytes the cache accounts for now.
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.runs.read().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_of(batches: &[(u64, i64, i64, u64)]) -> RunBuilder {
        let (position, base, last, size) = batches[0];
        let mut run = RunBuilder::new(position, base, last, size).unwrap();
        for &(position, base, last, size) in &batches[1..] {
            assert!(run.push(position, base, last, size));
        }
        run
    }

    #[test]
    fn finds_the_batch_holding_an_offset_or_the_next_after_a_gap() {
        let cache = PositionCache::default();
        // Batches [10, 12] at 100 (50 bytes), [13, 13] at 150 (30), a gap, [20, 25] at 180 (70).
        let run = run_of(&[(100, 10, 12, 50), (150, 13, 13, 30), (180, 20, 25, 70)]);
        cache.learn(run, cache.generation());
        let at = |offset| {
            cache
                .find(offset)
                .map(|b| (b.position, b.size, b.last_offset))
        };
        assert_eq!(at(9), None, "below the run");
        assert_eq!(at(10), Some((100, 50, 12)));
        assert_eq!(at(12), Some((100, 50, 12)));
        assert_eq!(at(13), Some((150, 30, 13)));
        assert_eq!(at(17), Some((180, 70, 25)), "a gap: the next batch");
        assert_eq!(at(25), Some((180, 70, 25)));
        assert_eq!(at(26), None, "past the run");
    }

    #[test]
    fn runs_learned_in_any_order_are_all_found_across_merges() {
        let cache = PositionCache::new(64 << 20);
        // Far more runs than one merge takes, their keys in a scrambled order (7919 is prime,
        // so it visits every key below 5,000 once).
        let runs = 5_000i64;
        for i in 0..runs {
            let k = (i * 7919) % runs;
            let position = u64::try_from(k).unwrap() * 100;
            cache.learn(
                run_of(&[(position, k * 10, k * 10 + 9, 100)]),
                cache.generation(),
            );
        }
        for k in 0..runs {
            assert_eq!(
                cache.find(k * 10 + 5),
                Some(CachedBatch {
                    position: u64::try_from(k).unwrap() * 100,
                    size: 100,
                    last_offset: k * 10 + 9
                }),
                "run {k}"
            );
        }
        assert_eq!(cache.find(-1), None, "below every run");
    }

    #[test]
    fn a_full_cache_keeps_the_newer_half_of_its_runs() {
        // Runs of 20 batches of 10 bytes cost 48 + 2 * 41 = 130 bytes: room for 10.
        let cache = PositionCache::new(1_300);
        let run_at = |k: i64| {
            let position = u64::try_from(k).unwrap() * 1_000;
            let batches: Vec<_> = (0..20i64)
                .map(|i| (position + 10 * i as u64, k * 100 + i, k * 100 + i, 10))
                .collect();
            run_of(&batches)
        };
        for k in 0..11 {
            cache.learn(run_at(k), cache.generation());
            assert!(cache.bytes() <= 1_300);
        }
        // The eleventh did not fit: the five oldest went, the rest stayed.
        for k in 0..5 {
            assert_eq!(cache.find(k * 100 + 3), None, "run {k} dropped");
        }
        for k in 5..11 {
            assert_eq!(
                cache.find(k * 100 + 3).map(|b| b.position),
                Some(u64::try_from(k).unwrap() * 1_000 + 30),
                "run {k} kept"
            );
        }
        assert_eq!(cache.bytes(), 6 * 130);
    }

    #[test]
    fn a_run_ends_at_a_batch_that_does_not_follow() {
        let mut run = RunBuilder::new(0, 0, 0, 100).unwrap();
        assert!(!run.push(101, 1, 1, 10), "not adjacent");
        assert!(!run.push(100, 0, 0, 10), "offsets do not increase");
        assert!(
            !run.push(100, 1, 70_000, 10),
            "last offset delta overflows 16 bits"
        );
        assert!(!run.push(100, 1, 1, 70_000), "position overflows 16 bits");
        assert!(run.push(100, 1, 1, 10));
    }

    #[test]
    fn forget_empties_and_stale_runs_are_refused() {
        let cache = PositionCache::default();
        let generation = cache.generation();
        cache.forget();
        cache.learn(run_of(&[(0, 0, 0, 10)]), generation);
        assert_eq!(cache.find(0), None, "learned before the cut");
        cache.learn(run_of(&[(0, 0, 0, 10)]), cache.generation());
        assert!(cache.find(0).is_some());
        cache.forget();
        assert_eq!(cache.find(0), None);
        assert_eq!(cache.bytes(), 0);
    }

    #[test]
    fn memory_stays_within_the_bound() {
        let cache = PositionCache::default();
        let mut offset = 0i64;
        for run_index in 0..(DEFAULT_POSITION_CACHE_BYTES / RUN_OVERHEAD_BYTES) as u64 * 2 {
            let position = run_index * 1_000;
            let mut run = RunBuilder::new(position, offset, offset, 10).unwrap();
            for batch in 1..20u64 {
                assert!(run.push(
                    position + batch * 10,
                    offset + batch as i64,
                    offset + batch as i64,
                    10
                ));
            }
            offset += 20;
            cache.learn(run, cache.generation());
            assert!(cache.bytes() <= DEFAULT_POSITION_CACHE_BYTES);
        }
        assert!(cache.find(offset - 1).is_some(), "the newest run is kept");
    }

    #[test]
    fn a_cache_of_no_bytes_never_learns() {
        let cache = PositionCache::new(0);
        cache.learn(
            run_of(&[(0, 0, 0, 100), (100, 1, 1, 100)]),
            cache.generation(),
        );
        assert_eq!(cache.bytes(), 0);
        assert_eq!(cache.find(0), None);
        let cache = PositionCache::new(1 << 10);
        cache.learn(
            run_of(&[(0, 0, 0, 100), (100, 1, 1, 100)]),
            cache.generation(),
        );
        assert_eq!(
            cache.find(1),
            Some(CachedBatch {
                position: 100,
                size: 100,
                last_offset: 1
            })
        );
    }
}
