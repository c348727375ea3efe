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
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

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
/// uses that one. Its resident bytes, the copies, their bookkeeping and its doorkeeper's bits,
/// stay at or below its limit: the oldest copies go first. Once full, it keeps a batch on its
/// second read only. A limit of 0 turns it off.
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
    /// `state.bytes`, readable without the lock: whether a new copy would evict one.
    resident: AtomicUsize,
    /// The batches first read while the cache was full (see [`admits`](Self::admits)).
    doorkeeper: Doorkeeper,
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
const BUCKET_SHIFT: u32 = 7;
/// The most buckets one kept batch may span (4096 offsets): a longer batch is not kept, so
/// that an insert and an eviction touch a bounded number of buckets.
const MAX_BUCKETS_A_BATCH: i64 = 4096 >> BUCKET_SHIFT;
/// What a bucket's entry costs: its 16-byte slot and that slot's share of the bucket's spare
/// capacity.
const BUCKET_ENTRY_BYTES: usize = 32;
/// What a bucket costs beside its entries: its slot in the map (at the map's 7/8 load) and
/// the smallest allocation of its entries, with the allocator's header. Counted when the bucket
/// is made and until it is removed, so that many-record batches, each alone in a few buckets,
/// are not kept beyond the limit.
const BUCKET_BYTES: usize = 128;

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
                // Sorted by base offset, one entry a base: a search, not a scan of the bucket.
                let at = entries.partition_point(|(base, _)| *base < batch.base_offset);
                if entries
                    .get(at)
                    .is_some_and(|(_, kept)| Arc::ptr_eq(kept, batch))
                {
                    entries.remove(at);
                    found = true;
                }
                if entries.is_empty() {
                    self.buckets.remove(&(segment, bucket));
                    self.bytes -= BUCKET_BYTES;
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
    /// batch of more than one record with no offset missing.
    pub(crate) record_starts: RecordTable,
}

/// Where every fourth record of a kept batch starts in its records section: two bytes an entry when
/// the section is shorter than 64 KiB (every batch of a default 1 MiB `max.message.bytes`
/// whose records are under 650 bytes), else four. Half the table is more batches kept.
#[derive(Debug, Default)]
pub(crate) enum RecordTable {
    /// A batch of one record, compressed, or with offsets missing: found by a walk.
    #[default]
    None,
    Narrow(Box<[u16]>),
    Wide(Box<[u32]>),
}

/// The table keeps every `RECORD_TABLE_STRIDE`-th record's start: a read steps over at most
/// three records after it (adjacent bytes, in lines the CPU fetches ahead), and a quarter of
/// the table is more batches kept in the same memory.
const RECORD_TABLE_STRIDE: usize = 4;

impl RecordTable {
    /// The table of a batch whose records start at `starts`, one a record.
    fn of(starts: Vec<u32>) -> RecordTable {
        if starts.is_empty() {
            return RecordTable::None;
        }
        let sampled = starts.iter().step_by(RECORD_TABLE_STRIDE);
        let narrow: Option<Box<[u16]>> =
            sampled.clone().map(|&at| u16::try_from(at).ok()).collect();
        match narrow {
            Some(narrow) => RecordTable::Narrow(narrow),
            None => RecordTable::Wide(sampled.copied().collect()),
        }
    }

    /// Where the nearest kept record at or below record `index` starts, and its index.
    fn get(&self, index: usize) -> Option<(usize, usize)> {
        let entry = index / RECORD_TABLE_STRIDE;
        let start = match self {
            RecordTable::None => None,
            RecordTable::Narrow(starts) => starts.get(entry).map(|&at| usize::from(at)),
            RecordTable::Wide(starts) => starts.get(entry).map(|&at| at as usize),
        }?;
        Some((start, entry * RECORD_TABLE_STRIDE))
    }

    /// Asks the CPU for the line of the entry of record `index`.
    fn prefetch(&self, index: i64) {
        let Ok(index) = usize::try_from(index) else {
            return;
        };
        let index = index / RECORD_TABLE_STRIDE;
        match self {
            RecordTable::None => {}
            RecordTable::Narrow(starts) => prefetch(starts, index),
            RecordTable::Wide(starts) => prefetch(starts, index),
        }
    }

    fn bytes(&self) -> usize {
        match self {
            RecordTable::None => 0,
            RecordTable::Narrow(starts) => starts.len() * 2,
            RecordTable::Wide(starts) => starts.len() * 4,
        }
    }
}

impl VerifiedBatch {
    fn cost(&self) -> usize {
        let buckets = CacheState::buckets_of(self).count();
        self.bytes.len()
            + self.record_starts.bytes()
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
            resident: AtomicUsize::new(0),
            doorkeeper: Doorkeeper::for_limit(limit_bytes),
        })
    }

    /// The process-wide cache every log uses unless its config names another:
    /// 64 MiB.
    pub fn global() -> Arc<VerifiedBatchCache> {
        // Under shuttle its lock is shuttle's, valid only inside the model-checked execution
        // that made it: a process-wide one would carry it into other executions and other
        // tests running at the same time, so each call makes its own.
        #[cfg(shuttle)]
        return VerifiedBatchCache::new(DEFAULT_VERIFIED_BATCH_CACHE_BYTES);
        #[cfg(not(shuttle))]
        {
            static GLOBAL: std::sync::OnceLock<Arc<VerifiedBatchCache>> =
                std::sync::OnceLock::new();
            Arc::clone(
                GLOBAL.get_or_init(|| VerifiedBatchCache::new(DEFAULT_VERIFIED_BATCH_CACHE_BYTES)),
            )
        }
    }

    /// The most bytes it holds.
    pub fn limit_bytes(&self) -> usize {
        self.limit
    }

    /// The bytes it holds now: the copies, their record tables, an estimate of their
    /// bookkeeping, and the doorkeeper's bits.
    pub fn resident_bytes(&self) -> usize {
        self.state.read().bytes + self.doorkeeper.bytes()
    }

    /// What the copies may take: the limit less the doorkeeper's fixed bits.
    fn copies_limit(&self) -> usize {
        self.limit.saturating_sub(self.doorkeeper.bytes())
    }

    /// Whether a point read that has just checked segment `segment`'s batch based at
    /// `base_offset`, `len` bytes, should keep a copy. Always while the cache has room (more
    /// than 1/64 of it free). Once it is full, only on the batch's second read within the
    /// doorkeeper's window (TinyLFU's doorkeeper): a batch read once and never again, the
    /// whole of a cold log's random reads, then costs no copy, no record table and no
    /// eviction of a copy that may be read again.
    pub(crate) fn admits(&self, segment: u64, base_offset: i64, len: usize) -> bool {
        if self.limit == 0 {
            return false;
        }
        // Evictions keep a full cache just under its limit: full is within 1/64 of it.
        let room = self.copies_limit() - self.copies_limit() / 64;
        let fits = self.resident.load(Ordering::Relaxed) + len + ENTRY_OVERHEAD_BYTES <= room;
        fits || self.doorkeeper.seen_before(segment, base_offset)
    }

    /// Drops every copy: the next point read of each batch reads the file and checks it again.
    pub fn clear(&self) {
        let mut state = self.state.write();
        state.buckets.clear();
        state.order.clear();
        state.kept = 0;
        state.bytes = 0;
        self.resident.store(0, Ordering::Relaxed);
        self.doorkeeper.clear();
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
        if offset > batch.last_offset {
            return None;
        }
        // The header and the record's table entry are read next, each a likely miss of the
        // CPU caches in a cache of many megabytes: asked for together, they overlap.
        prefetch(&batch.bytes, 0);
        batch.record_starts.prefetch(offset - batch.base_offset);
        Some(Arc::clone(batch))
    }

    /// Keeps `batch`, a batch of segment `segment`, evicting the oldest copies to make room.
    /// A batch larger than a sixteenth of the limit, or spanning more offsets than a few
    /// thousand, is not kept: it would push out many.
    pub(crate) fn insert(&self, segment: u64, batch: VerifiedBatch) -> Option<Arc<VerifiedBatch>> {
        let cost = batch.cost();
        let span = (batch.last_offset >> BUCKET_SHIFT) - (batch.base_offset >> BUCKET_SHIFT);
        let limit = self.copies_limit();
        if cost > limit / 16 || span >= MAX_BUCKETS_A_BATCH {
            return None;
        }
        let batch = Arc::new(batch);
        let mut state = self.state.write();
        // Room for the copy and for every bucket it may have to make.
        let room = cost + CacheState::buckets_of(&batch).count() * BUCKET_BYTES;
        while state.bytes + room > limit {
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
            let made = !state.buckets.contains_key(&(segment, bucket));
            if made {
                state.bytes += BUCKET_BYTES;
            }
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
        state.order.push_back((segment, Arc::clone(&batch)));
        state.bytes += cost;
        state.kept += 1;
        self.resident.store(state.bytes, Ordering::Relaxed);
        if state.order.len() > 2 * state.kept + 1024 {
            // Replaced copies the FIFO still lists: only the FIFO holds them (or a reader).
            state
                .order
                .retain(|(_, batch)| Arc::strong_count(batch) > 1);
        }
        Some(batch)
    }
}

/// A bitset of batches read once while the cache was full, hashed from (segment id, base
/// offset): a batch whose bit is set when it is read again is kept. Half its bits set, it
/// starts empty again, so that what it remembers is recent. A false positive keeps a copy read
/// once, as without it. One bit per 64 bytes of the cache's limit, at most 128 KiB, counted in
/// the cache's resident bytes; none below a 4 KiB limit (every copy is kept there).
#[derive(Debug)]
struct Doorkeeper {
    words: Box<[AtomicU64]>,
    /// Bits set since it was last emptied.
    set: AtomicUsize,
}

/// The doorkeeper's most bits: 128 KiB.
const DOORKEEPER_MAX_BITS: usize = 1 << 20;

impl Doorkeeper {
    fn for_limit(limit: usize) -> Doorkeeper {
        let bits = match limit / 64 {
            0..64 => 0,
            wanted => (1usize << wanted.ilog2()).min(DOORKEEPER_MAX_BITS),
        };
        Doorkeeper {
            words: (0..bits / 64).map(|_| AtomicU64::new(0)).collect(),
            set: AtomicUsize::new(0),
        }
    }

    fn bytes(&self) -> usize {
        self.words.len() * 8
    }

    /// Whether the bit of `(segment, base_offset)` was set; sets it.
    fn seen_before(&self, segment: u64, base_offset: i64) -> bool {
        let words = self.words.len();
        if words == 0 {
            return true;
        }
        let mut hasher = KeyHasher::default();
        hasher.write_u64(segment);
        hasher.write_u64(base_offset as u64);
        // The product's high bits are its well-mixed ones.
        let bit = (hasher.finish() >> 32) as usize % (words * 64);
        let (word, mask) = (bit / 64, 1u64 << (bit % 64));
        let Some(slot) = self.words.get(word) else {
            return true;
        };
        if slot.fetch_or(mask, Ordering::Relaxed) & mask != 0 {
            return true;
        }
        if self.set.fetch_add(1, Ordering::Relaxed) + 1 >= words * 32 {
            self.clear();
        }
        false
    }

    fn clear(&self) {
        for word in self.words.iter() {
            word.store(0, Ordering::Relaxed);
        }
        self.set.store(0, Ordering::Relaxed);
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
            record_starts: RecordTable::of(record_starts),
        })
    }

    /// Where a record at or below `offset`, at most three before it, starts in the records
    /// section, and its index, when the batch has a record table. Asks the CPU for that
    /// record's first line: the caller parses the header meanwhile.
    pub(crate) fn record_start(&self, offset: i64) -> Option<(usize, i32)> {
        let index = usize::try_from(offset.checked_sub(self.base_offset)?).ok()?;
        let (start, index) = self.record_starts.get(index)?;
        prefetch(&self.bytes, crate::format::RECORD_BATCH_OVERHEAD + start);
        Some((start, i32::try_from(index).ok()?))
    }
}

/// Asks the CPU to bring the cache line of `items[index]` closer, without waiting for it:
/// a hint, with no effect on what any read returns.
#[inline]
pub(super) fn prefetch<T>(items: &[T], index: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(item) = items.get(index) {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: SSE, which `_mm_prefetch` needs, is part of every x86-64 CPU; a prefetch
        // reads nothing the program sees and cannot fault, and the pointer is in bounds anyway.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(item).cast::<i8>()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (items, index);
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
            record_starts: RecordTable::None,
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
        assert_eq!(recount(&cache), cache.state.read().bytes);
        cache.clear();
        assert_eq!(cache.resident_bytes(), cache.doorkeeper.bytes());
        // A batch of more than a sixteenth of the limit is not kept.
        cache.insert(0, batch(0, 0, 8 << 10));
        assert!(cache.find(0, 0).is_none());
    }

    /// What the kept copies and their buckets cost, counted from the state itself.
    fn recount(cache: &VerifiedBatchCache) -> usize {
        let state = cache.state.read();
        let mut kept: Vec<&Arc<VerifiedBatch>> = Vec::new();
        for entries in state.buckets.values() {
            for (_, batch) in entries {
                if !kept.iter().any(|seen| Arc::ptr_eq(seen, batch)) {
                    kept.push(batch);
                }
            }
        }
        assert_eq!(kept.len(), state.kept);
        kept.iter().map(|batch| batch.cost()).sum::<usize>() + state.buckets.len() * BUCKET_BYTES
    }

    #[test]
    fn many_record_batches_count_their_buckets_and_stay_under_the_limit() {
        let cache = VerifiedBatchCache::new(256 << 10);
        // 100 offsets a batch: each alone in one or two buckets, sharing the edge ones.
        for n in 0..2000 {
            cache.insert(7, batch(n * 100, n * 100 + 99, 1000));
            assert!(cache.resident_bytes() <= cache.limit_bytes());
        }
        assert_eq!(recount(&cache), cache.state.read().bytes);
        assert!(cache.find(7, 1999 * 100 + 50).is_some());
        assert!(cache.find(7, 50).is_none());
    }

    #[test]
    fn a_full_cache_keeps_a_batch_on_its_second_read_only() {
        let cache = VerifiedBatchCache::new(64 << 10);
        // With room, every batch is kept at its first read.
        assert!(cache.admits(1, 0, 200));
        let mut n = 0;
        while cache.resident_bytes() + 1024 < cache.limit_bytes() {
            cache.insert(1, batch(n, n, 200));
            n += 1;
        }
        // Full: a batch never read is refused once, then admitted.
        assert!(!cache.admits(2, 40, 200), "first read of a batch");
        assert!(cache.admits(2, 40, 200), "second read of the same batch");
        // Another segment's batch at the same offset is another batch.
        assert!(!cache.admits(3, 40, 200));
        // The doorkeeper forgets once half its bits are set, and stays within its bytes.
        let bits = cache.doorkeeper.bytes() * 8;
        let admitted = (0..bits as i64 * 4)
            .filter(|&base| cache.admits(9, base, 200))
            .count();
        assert!(admitted < bits * 4, "not everything passes");
        assert!(cache.doorkeeper.set.load(Ordering::Relaxed) < bits / 2);
        // A cache too small for a doorkeeper keeps what fits, as before.
        let tiny = VerifiedBatchCache::new(2048);
        assert_eq!(tiny.doorkeeper.bytes(), 0);
        assert!(tiny.admits(1, 0, 100));
        assert!(!VerifiedBatchCache::new(0).admits(1, 0, 1));
    }

    #[test]
    fn record_tables_take_two_bytes_an_entry_below_64_kib() {
        let narrow = RecordTable::of((0..9).map(|n| n * 70).collect());
        assert!(matches!(narrow, RecordTable::Narrow(_)));
        // Every fourth start is kept: records 0, 4 and 8.
        assert_eq!(narrow.bytes(), 6);
        assert_eq!(narrow.get(3), Some((0, 0)));
        assert_eq!(narrow.get(6), Some((280, 4)));
        assert_eq!(narrow.get(8), Some((560, 8)));
        assert_eq!(narrow.get(12), None);
        let wide = RecordTable::of(vec![0, 10, 20, 30, 70_000]);
        assert!(matches!(wide, RecordTable::Wide(_)));
        assert_eq!((wide.get(4), wide.bytes()), (Some((70_000, 4)), 8));
        assert!(matches!(RecordTable::of(Vec::new()), RecordTable::None));
    }
}
