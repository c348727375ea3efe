//! [`VerifiedBatchCache`]: copies of batches a point read has checked, in the process's own
//! memory, so that the next point read into one of them reads no file and checks no CRC again.
//!
//! Why copies, and not a note that a batch of the file was checked: bytes read again from a
//! file may come from the disk (the page cache drops pages whenever it likes, and a mapping
//! reads them back on its own), and a disk may return other bytes than it was given. A copy in
//! the process's memory is the very bytes that passed the CRC; the file is read, and checked,
//! again once the copy is evicted. A copy belongs to one segment object (its process-unique id)
//! at one truncation sequence: a truncation, a compaction's swap or a reopen makes it unusable,
//! and the FIFO eviction reclaims it.
//!
//! One cache is shared by every log of the process unless a log's config names another
//! ([`LogConfig::verified_batch_cache`](crate::LogConfig::verified_batch_cache)); its bytes
//! never pass its limit (64 MiB by default), however many logs share it.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, OnceLock};

use crate::sync::RwLock;

/// What an entry costs beyond its bytes: the entry, its `Arc`, its key in the map and in the
/// FIFO (an estimate, on the high side).
const ENTRY_OVERHEAD_BYTES: usize = 160;

/// The default limit of the process-wide cache: 64 MiB.
pub(crate) const DEFAULT_VERIFIED_BATCH_CACHE_BYTES: usize = 64 << 20;

/// A bounded cache of record batches a point read ([`Log::read_record`](crate::Log::read_record))
/// has CRC-checked, copied into memory, with where each record starts in a batch of many.
///
/// Shared by every log of the process by default ([`global`](Self::global)); a log given its
/// own ([`LogConfigBuilder::verified_batch_cache`](crate::LogConfigBuilder::verified_batch_cache))
/// uses that one. Its resident bytes, the copies and their bookkeeping, stay at or below its
/// limit: the oldest copies go first. A limit of 0 turns it off.
///
/// ```
/// use std::sync::Arc;
/// use partlog::{Log, LogConfig, NewRecord, ReadOptions, VerifiedBatchCache};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = tempfile::tempdir()?;
/// let cache = VerifiedBatchCache::new(1 << 20);
/// let config = LogConfig::builder().verified_batch_cache(Arc::clone(&cache)).build()?;
/// let log = Log::open(dir.path(), config)?;
/// log.append(&[NewRecord::now(None, Some(b"x"))])?;
/// log.read_record(0, ReadOptions::default())?;
/// assert!(cache.resident_bytes() > 0 && cache.resident_bytes() <= cache.limit_bytes());
/// # Ok(())
/// # }
/// ```
pub struct VerifiedBatchCache {
    limit: usize,
    state: RwLock<CacheState>,
}

impl std::fmt::Debug for VerifiedBatchCache {
    // Its size, not its contents (a `LogConfig` prints it).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerifiedBatchCache")
            .field("limit_bytes", &self.limit)
            .field("resident_bytes", &self.resident_bytes())
            .finish()
    }
}

/// Offsets a bucket of the index covers: `offset >> BUCKET_SHIFT` names it.
const BUCKET_SHIFT: u32 = 4;
/// The most buckets one kept batch may span (4096 offsets): a longer batch is not kept, so
/// that an insert and an eviction touch a bounded number of buckets.
const MAX_BUCKETS_A_BATCH: i64 = 256;
/// What a bucket's entry costs: its slot in the bucket and its share of the map.
const BUCKET_ENTRY_BYTES: usize = 48;

/// A bucket: the kept batches of one segment that hold offsets in one range of
/// `1 << BUCKET_SHIFT` offsets, sorted by base offset.
type Bucket = Vec<(i64, Arc<VerifiedBatch>)>;

#[derive(Debug, Default)]
struct CacheState {
    /// By (segment id, offset >> BUCKET_SHIFT): one hash probe and a short search find the
    /// batch holding an offset (a sorted map over hundreds of thousands of batches costs a
    /// cache miss a level, and every miss of a point read pays for its lookup and its insert).
    buckets: HashMap<(u64, i64), Bucket, BuildHasherDefault<KeyHasher>>,
    /// The kept batches in insertion order, for eviction.
    order: VecDeque<(u64, Arc<VerifiedBatch>)>,
    /// The batches the buckets hold.
    kept: usize,
    bytes: usize,
}

impl CacheState {
    /// The buckets `batch` spans.
    fn buckets_of(batch: &VerifiedBatch) -> std::ops::RangeInclusive<i64> {
        (batch.base_offset >> BUCKET_SHIFT)..=(batch.last_offset >> BUCKET_SHIFT)
    }

    /// Takes `batch` (kept for `segment`) out of its buckets; whether it was there.
    fn unlink(&mut self, segment: u64, batch: &Arc<VerifiedBatch>) -> bool {
        let mut found = false;
        for bucket in Self::buckets_of(batch) {
            if let Some(entries) = self.buckets.get_mut(&(segment, bucket)) {
                let before = entries.len();
                entries.retain(|(_, kept)| !Arc::ptr_eq(kept, batch));
                found |= entries.len() != before;
                if entries.is_empty() {
                    self.buckets.remove(&(segment, bucket));
                }
            }
        }
        found
    }
}

/// FxHash's step: the keys are two integers, and a keyed hash would cost more than the probe.
#[derive(Debug, Default, Clone, Copy)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.write_u64(u64::from(byte));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// One checked batch, copied.
#[derive(Debug)]
pub(crate) struct VerifiedBatch {
    /// The whole v2 batch, exactly as it passed its CRC and header checks.
    pub(crate) bytes: Box<[u8]>,
    /// Its `.log` position.
    pub(crate) position: u64,
    pub(crate) base_offset: i64,
    pub(crate) last_offset: i64,
    /// The segment's truncation sequence (even) before the read that checked it.
    pub(crate) truncations: u64,
    /// Where record `offset - base_offset` starts in the records section, for an uncompressed
    /// batch of more than one record with no offset missing; empty otherwise.
    pub(crate) record_starts: Box<[u32]>,
}

impl VerifiedBatch {
    fn cost(&self) -> usize {
        let buckets = CacheState::buckets_of(self).count();
        self.bytes.len()
            + self.record_starts.len() * 4
            + ENTRY_OVERHEAD_BYTES
            + buckets * BUCKET_ENTRY_BYTES
    }
}

impl VerifiedBatchCache {
    /// A cache whose resident bytes never pass `limit_bytes` (0: a cache that keeps nothing).
    pub fn new(limit_bytes: usize) -> Arc<VerifiedBatchCache> {
        Arc::new(VerifiedBatchCache {
            limit: limit_bytes,
            state: RwLock::new(CacheState::default()),
        })
    }

    /// The process-wide cache every log uses unless its config names another:
    /// 64 MiB.
    pub fn global() -> Arc<VerifiedBatchCache> {
        static GLOBAL: OnceLock<Arc<VerifiedBatchCache>> = OnceLock::new();
        Arc::clone(
            GLOBAL.get_or_init(|| VerifiedBatchCache::new(DEFAULT_VERIFIED_BATCH_CACHE_BYTES)),
        )
    }

    /// The most bytes it holds.
    pub fn limit_bytes(&self) -> usize {
        self.limit
    }

    /// The bytes it holds now: the copies, their record tables and an estimate of their
    /// bookkeeping.
    pub fn resident_bytes(&self) -> usize {
        self.state.read().bytes
    }

    /// Drops every copy: the next point read of each batch reads the file and checks it again.
    pub fn clear(&self) {
        let mut state = self.state.write();
        state.buckets.clear();
        state.order.clear();
        state.kept = 0;
        state.bytes = 0;
    }

    /// The copy of segment `segment`'s batch holding `offset`, if one is kept.
    pub(crate) fn find(&self, segment: u64, offset: i64) -> Option<Arc<VerifiedBatch>> {
        if self.limit == 0 {
            return None;
        }
        let state = self.state.read();
        let bucket = state.buckets.get(&(segment, offset >> BUCKET_SHIFT))?;
        // The last batch based at or below `offset`: the only one that can hold it.
        let at = bucket.partition_point(|(base, _)| *base <= offset);
        let (_, batch) = bucket.get(at.checked_sub(1)?)?;
        (offset <= batch.last_offset).then(|| Arc::clone(batch))
    }

    /// Keeps `batch`, a batch of segment `segment`, evicting the oldest copies to make room.
    /// A batch larger than a sixteenth of the limit, or spanning more offsets than a few
    /// thousand, is not kept: it would push out many.
    pub(crate) fn insert(&self, segment: u64, batch: VerifiedBatch) {
        let cost = batch.cost();
        let span = (batch.last_offset >> BUCKET_SHIFT) - (batch.base_offset >> BUCKET_SHIFT);
        if cost > self.limit / 16 || span >= MAX_BUCKETS_A_BATCH {
            return;
        }
        let batch = Arc::new(batch);
        let mut state = self.state.write();
        while state.bytes + cost > self.limit {
            let Some((owner, oldest)) = state.order.pop_front() else {
                break;
            };
            if state.unlink(owner, &oldest) {
                state.bytes -= oldest.cost();
                state.kept -= 1;
            }
        }
        let mut replaced: Vec<Arc<VerifiedBatch>> = Vec::new();
        for bucket in CacheState::buckets_of(&batch) {
            let entries = state.buckets.entry((segment, bucket)).or_default();
            let at = entries.partition_point(|(base, _)| *base < batch.base_offset);
            match entries.get_mut(at) {
                // A copy of the same batch kept by another reader meanwhile, or one of bytes
                // since cut and written again (which no read could use): this one replaces it.
                Some(slot) if slot.0 == batch.base_offset => {
                    let old = std::mem::replace(&mut slot.1, Arc::clone(&batch));
                    if !replaced.iter().any(|seen| Arc::ptr_eq(seen, &old)) {
                        replaced.push(old);
                    }
                }
                _ => entries.insert(at, (batch.base_offset, Arc::clone(&batch))),
            }
        }
        for old in replaced {
            // Out of every bucket now; the FIFO's entry for it then unlinks nothing.
            state.unlink(segment, &old);
            state.bytes -= old.cost();
            state.kept -= 1;
        }
        state.order.push_back((segment, batch));
        state.bytes += cost;
        state.kept += 1;
        if state.order.len() > 2 * state.kept + 1024 {
            // Replaced copies the FIFO still lists: only the FIFO holds them (or a reader).
            state
                .order
                .retain(|(_, batch)| Arc::strong_count(batch) > 1);
        }
    }
}

impl VerifiedBatch {
    /// A copy of `bytes`, one whole v2 batch a read has just checked in full at `position`
    /// under truncation sequence `truncations`, with its record table when it has many
    /// records; `None` for anything else (a legacy message is not kept).
    pub(crate) fn copy_of(bytes: &[u8], position: u64, truncations: u64) -> Option<VerifiedBatch> {
        use crate::format::{BatchHeader, BatchView, Compression};
        let header = BatchHeader::parse(bytes).ok()?;
        if header.total_size() != bytes.len() {
            return None;
        }
        let contiguous =
            i64::from(header.records_count) == header.last_offset() - header.base_offset + 1;
        let record_starts = match header.compression() {
            Ok(Compression::None) if header.records_count > 1 && contiguous => {
                let view = BatchView::read_checked(bytes, header);
                let mut no_scratch = Vec::new();
                view.into_records(&mut no_scratch)
                    .ok()
                    .and_then(|records| records.record_starts())
                    .unwrap_or_default()
            }
            _ => Vec::new(),
        };
        Some(VerifiedBatch {
            bytes: bytes.into(),
            position,
            base_offset: header.base_offset,
            last_offset: header.last_offset(),
            truncations,
            record_starts: record_starts.into_boxed_slice(),
        })
    }

    /// Where the record at `offset` starts in the records section, and its index, when the
    /// batch has a record table.
    pub(crate) fn record_start(&self, offset: i64) -> Option<(usize, i32)> {
        let index = usize::try_from(offset.checked_sub(self.base_offset)?).ok()?;
        let start = *self.record_starts.get(index)?;
        Some((start as usize, i32::try_from(index).ok()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(base: i64, last: i64, size: usize) -> VerifiedBatch {
        VerifiedBatch {
            bytes: vec![0; size].into(),
            position: 0,
            base_offset: base,
            last_offset: last,
            truncations: 0,
            record_starts: Box::new([]),
        }
    }

    #[test]
    fn finds_the_batch_holding_an_offset_and_nothing_in_a_gap() {
        let cache = VerifiedBatchCache::new(1 << 20);
        cache.insert(1, batch(0, 99, 100));
        cache.insert(1, batch(120, 120, 10));
        cache.insert(2, batch(0, 5, 10));
        for offset in [0, 15, 16, 99] {
            assert_eq!(cache.find(1, offset).map(|b| b.base_offset), Some(0));
        }
        assert!(cache.find(1, 100).is_none() && cache.find(1, 119).is_none());
        assert_eq!(cache.find(1, 120).map(|b| b.last_offset), Some(120));
        assert!(cache.find(1, 121).is_none());
        assert_eq!(cache.find(2, 5).map(|b| b.last_offset), Some(5));
        assert!(cache.find(3, 0).is_none());
    }

    #[test]
    fn resident_bytes_stay_under_the_limit_and_replacements_are_counted_once() {
        let cache = VerifiedBatchCache::new(64 << 10);
        for round in 0..3 {
            for n in 0..2000 {
                cache.insert(round % 2, batch(n * 10, n * 10 + 9, 200));
                assert!(cache.resident_bytes() <= cache.limit_bytes());
            }
        }
        // The newest batches are kept, the oldest gone.
        assert!(cache.find(0, 19_995).is_some());
        assert!(cache.find(0, 0).is_none());
        // The same batch kept again replaces its copy: the bytes do not grow (the room made
        // for it first may evict one more of the oldest).
        let before = cache.resident_bytes();
        for _ in 0..5000 {
            cache.insert(0, batch(19_990, 19_999, 200));
        }
        assert!(cache.resident_bytes() <= before);
        assert!(cache.resident_bytes() + 1000 > before);
        assert!(cache.find(0, 19_995).is_some());
        assert!(
            cache.state.read().order.len() < 5000,
            "the FIFO drops replaced copies"
        );
        cache.clear();
        assert_eq!(cache.resident_bytes(), 0);
        // A batch of more than a sixteenth of the limit is not kept.
        cache.insert(0, batch(0, 0, 8 << 10));
        assert!(cache.find(0, 0).is_none());
    }
}
