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

use std::collections::{BTreeMap, VecDeque};
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
#[derive(Debug)]
pub struct VerifiedBatchCache {
    limit: usize,
    state: RwLock<CacheState>,
}

#[derive(Debug, Default)]
struct CacheState {
    /// By (segment id, last offset): the first entry at or above (id, offset) is the one batch
    /// of that segment that can hold `offset`.
    batches: BTreeMap<(u64, i64), Arc<VerifiedBatch>>,
    /// Keys in insertion order, for eviction (a key replaced since is found gone, or newer).
    order: VecDeque<(u64, i64)>,
    bytes: usize,
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
        self.bytes.len() + self.record_starts.len() * 4 + ENTRY_OVERHEAD_BYTES
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
        state.batches.clear();
        state.order.clear();
        state.bytes = 0;
    }

    /// The copy of segment `segment`'s batch holding `offset`, if one is kept.
    pub(crate) fn find(&self, segment: u64, offset: i64) -> Option<Arc<VerifiedBatch>> {
        if self.limit == 0 {
            return None;
        }
        let state = self.state.read();
        let (_, batch) = state
            .batches
            .range((segment, offset)..=(segment, i64::MAX))
            .next()?;
        (batch.base_offset <= offset).then(|| Arc::clone(batch))
    }

    /// Keeps `batch`, a batch of segment `segment`, evicting the oldest copies to make room.
    /// A batch larger than a sixteenth of the limit is not kept: it would push out many.
    pub(crate) fn insert(&self, segment: u64, batch: VerifiedBatch) {
        let cost = batch.cost();
        if cost > self.limit / 16 {
            return;
        }
        let key = (segment, batch.last_offset);
        let mut state = self.state.write();
        while state.bytes + cost > self.limit {
            let Some(oldest) = state.order.pop_front() else {
                break;
            };
            if let Some(evicted) = state.batches.remove(&oldest) {
                state.bytes -= evicted.cost();
            }
        }
        if let Some(replaced) = state.batches.insert(key, Arc::new(batch)) {
            state.bytes -= replaced.cost();
        }
        state.order.push_back(key);
        state.bytes += cost;
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
