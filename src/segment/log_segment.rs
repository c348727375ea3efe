//! [`Segment`]: one `.log` file of record batches with its [`OffsetIndex`] and [`TimeIndex`].
//!
//! A segment knows nothing of other segments and assigns no offsets: it stores batches whose
//! offsets the log chose, keeps Kafka's sparse indexes over them, and answers reads.
//!
//! Concurrency: one appender and any number of readers share a segment through `&self`. The
//! appender serialises on an internal mutex; readers take it only to rebuild an index they
//! found bad, after letting an append under way finish. A batch becomes readable when
//! `published_size` moves past it, which happens (with `Release`) only after its bytes and its
//! index entries are complete (ARCHITECTURE.md §3, invariant 2).
//!
//! This file holds the types, the accessors, and seal and flush. The rest of `impl Segment`
//! lives beside it, one block a file: `open.rs` (create, open, open for recovery), `append.rs`
//! (the write path and the roll decision), `read.rs` (reads), `lookup.rs` (offset and timestamp
//! lookups, and the index rebuild policy), `scan.rs` (validation, recovery and truncation) and
//! `transactions.rs` (the aborted-transaction index, `.txnindex`).

use crate::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::path::PathBuf;
use std::sync::Arc;

use crate::sync::{Mutex, RwLock};

use super::positions::{DEFAULT_POSITION_CACHE_BYTES, PositionCache};
use super::read::MappingState;
use super::syncs::SegmentSyncs;
use super::txn_index::TransactionIndex;
use super::walker::BatchSummary;
use crate::error::{Corruption, Error, Result};
use crate::index::{OffsetIndex, TimeIndex, TimestampOffset};
use crate::storage::{Storage, StorageFile};

/// The settings a segment needs. The log derives them from its `LogConfig`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentConfig {
    /// `segment.bytes`: the size at which the segment rolls. At most `i32::MAX`.
    /// Default: 1073741824 (1 GiB).
    pub segment_bytes: u32,
    /// `segment.index.bytes`: the largest offset index (and time index) in bytes.
    /// Default: 10485760 (10 MiB).
    pub segment_index_bytes: u32,
    /// `index.interval.bytes`: how many bytes of batches are appended between index entries.
    /// Default: 4096.
    pub index_interval_bytes: u32,
    /// `segment.ms`: the age at which the segment rolls. Default: 604800000 (7 days).
    pub segment_ms: i64,
    /// This segment's roll jitter, drawn by the log from `[0, min(segment.jitter.ms, segment.ms))`.
    /// Default: 0.
    pub roll_jitter_ms: i64,
    /// `preallocate`: create the `.log` at its full `segment_bytes` length (a sparse
    /// `ftruncate`, as Kafka's `RandomAccessFile.setLength`), and trim it to the data at seal.
    /// Default: false.
    pub preallocate: bool,
    /// Serve reads of the segment, once sealed, from a read-only memory mapping of its `.log`
    /// instead of positional reads: the walk from the index entry to the batch costs no system
    /// call and no copy, and only the returned batches are copied. partlog's own setting (see
    /// `LogConfig::map_sealed_segments` for the SIGBUS risk). Default: false.
    pub map_sealed_reads: bool,
    /// Serve reads of the segment while it is active from a read-only mapping of its `.log`
    /// too, mapped once at `segment_bytes` (or the file's length, if larger) and kept when the
    /// segment is sealed. Only bytes below the published end are touched. partlog's own setting
    /// (`LogConfig::map_active_segment`). Default: false.
    pub map_active_reads: bool,
    /// The most memory the segment's cache of batch positions may hold (`positions.rs`: 4
    /// bytes a batch, learned from the index walks of reads); 0 turns it off. partlog's own
    /// setting, from `LogConfig::position_cache_bytes`. Default: 2097152 (2 MiB).
    pub position_cache_bytes: usize,
}

impl Default for SegmentConfig {
    fn default() -> Self {
        SegmentConfig {
            segment_bytes: 1 << 30,
            segment_index_bytes: 10 * 1024 * 1024,
            index_interval_bytes: 4096,
            segment_ms: 7 * 24 * 60 * 60 * 1000,
            roll_jitter_ms: 0,
            preallocate: false,
            map_sealed_reads: false,
            map_active_reads: false,
            position_cache_bytes: DEFAULT_POSITION_CACHE_BYTES,
        }
    }
}

/// Why a segment should roll before the next append, per Kafka's `LogSegment.shouldRoll`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RollReason {
    /// The append would take the segment past `segment.bytes`.
    Size,
    /// The segment is older than `segment.ms` minus its jitter.
    Age,
    /// The offset index has no room for another entry.
    OffsetIndexFull,
    /// The time index has no room left but its reserved final slot.
    TimeIndexFull,
    /// The incoming last offset does not fit the segment's 32-bit relative range.
    OffsetOverflow,
}

/// How [`Segment::open`] opens an existing segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentRole {
    /// The segment will take appends: files open read-write, indexes writable.
    Active,
    /// A sealed segment of a writable log: read-only indexes (mappable), but it may be
    /// truncated, rebuilt or renamed.
    Sealed,
    /// A segment of a read-only log: nothing is ever written.
    ReadOnly,
}

/// What [`Segment::append`] stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    /// The file position of the first appended batch.
    pub position: u64,
    /// The number of batches appended.
    pub batches: usize,
    /// The first offset of the first batch.
    pub first_offset: i64,
    /// The last offset of the last batch.
    pub last_offset: i64,
    /// The largest batch `maxTimestamp` appended.
    pub max_timestamp: i64,
}

/// Where a [`Segment::read`] found its batches; the bytes are in the caller's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentRead {
    /// The file position of the first returned batch.
    pub position: u64,
    /// The number of bytes returned: whole batches only.
    pub len: usize,
    /// The base offset of the first returned batch (for a compressed legacy message: its first
    /// inner offset).
    pub first_offset: i64,
    /// The offset after the last returned batch.
    pub next_offset: i64,
}

/// The first bad bytes found by [`Segment::scan`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidBytes {
    /// Where the first bad batch starts.
    pub position: u64,
    /// What is wrong with it.
    pub what: Corruption,
}

/// What [`Segment::scan`] found. The scan reports; deciding what to truncate is the log's job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanReport {
    /// The end of the last valid batch: everything before it checked out.
    pub valid_bytes: u64,
    /// Where validation started: 0 for a full scan, a trusted index entry's position for
    /// [`Segment::recover_from`].
    pub scanned_from: u64,
    /// The file's length when scanned.
    pub file_bytes: u64,
    /// How many valid batches the scan validated (from `scanned_from` on).
    pub batches: u64,
    /// The offset after the last valid batch (the segment base if there is none).
    pub next_offset: i64,
    /// The largest batch timestamp among the valid batches, if any.
    pub max_timestamp: Option<i64>,
    /// The first invalid batch, or `None` when the whole file is valid.
    pub first_invalid: Option<InvalidBytes>,
}

/// The appender's bookkeeping. Only the appender (and maintenance that excludes it) touches it.
#[derive(Debug)]
pub(super) struct WriterState {
    /// Bytes of complete batches; equals `published_size` between calls.
    pub(super) size: u64,
    /// The offset after the last batch.
    pub(super) next_offset: i64,
    /// Bytes appended since the last index entry (Kafka's `bytesSinceLastIndexEntry`).
    pub(super) bytes_since_last_index_entry: u64,
    /// The largest batch timestamp so far and the last offset of its batch.
    pub(super) max_timestamp_so_far: Option<TimestampOffset>,
    /// The first batch's max timestamp (Kafka's `rollingBasedTimestamp`), loaded lazily.
    pub(super) rolling_based_timestamp: Option<Option<i64>>,
    /// When the segment was created, or last emptied by a truncation (Kafka's `created`):
    /// the age a segment whose first batch has no timestamp rolls on.
    pub(super) created_ms: i64,
    /// Set when a failed write could not be undone: the file may hold bytes past `size`.
    pub(super) broken: bool,
    /// How many more entries the offset index and the time index take before they are full
    /// (the time index keeps its last slot for the seal), so that `should_roll` need not take
    /// both indexes' locks on every append. `None`: unknown, read from the indexes at the next
    /// `should_roll`. Every path that changes an index other than an append without index
    /// entries resets it.
    pub(super) index_room: Option<(usize, usize)>,
}

/// A `.log` file, its two sparse indexes and its aborted-transaction index. One appender and any
/// number of readers share it through `&self`; a batch becomes readable only once its bytes and
/// index entries are complete.
#[derive(Debug)]
pub struct Segment {
    /// This segment object's id, unique in the process (never reused, unlike its address).
    pub(super) id: u64,
    pub(super) storage: Arc<dyn Storage>,
    pub(super) base_offset: i64,
    /// The `.log` path: fixed for the segment's life (renames make new segments).
    pub(super) log_path: PathBuf,
    pub(super) log: Arc<dyn StorageFile>,
    pub(super) offset_index: OffsetIndex,
    pub(super) time_index: TimeIndex,
    /// The `.txnindex`, whose file exists only once the segment holds an aborted transaction.
    pub(super) txn_index: TransactionIndex,
    pub(super) config: SegmentConfig,
    pub(super) role: RwLock<SegmentRole>,
    pub(super) published_size: AtomicU64,
    pub(super) published_next_offset: AtomicI64,
    pub(super) sealed: AtomicBool,
    /// The truncation sequence: every truncation makes it odd before it changes an index or
    /// cuts the file, and even again once the segment is published at its new end. A reader
    /// takes it before the size it reads to ([`Segment::read_in_place`]): an odd value, or a
    /// different one later, means the bytes it read may have been cut under it.
    pub(super) truncation_seq: AtomicU64,
    /// The end (next offset) that the latest truncation left, or is leaving: what a reader it
    /// overtook is told in [`Error::Truncated`]. Stored before `truncation_seq` turns odd.
    pub(super) truncated_to: AtomicI64,
    /// The read-only mapping of a sealed `.log` (`SegmentConfig::map_sealed_reads`), made at the
    /// first read after the seal. Readers hold the read lock while they touch the mapped bytes;
    /// every truncation and unseal takes the write lock and drops the mapping before the file can
    /// shrink, so partlog never cuts a file under a reader's feet (which would raise SIGBUS).
    pub(super) mapping: RwLock<MappingState>,
    /// Batch positions learned from reads' index walks (bounded; see `positions.rs`).
    pub(super) positions: PositionCache,
    pub(super) writer: Mutex<WriterState>,
    /// The segment's syncs, one at a time, and none after a failed one (fsyncgate).
    pub(super) syncs: SegmentSyncs,
    /// Bytes after the last valid batch of a read-only sealed segment, which its open found and
    /// left out of the published end: a read that reaches that end reports them.
    pub(super) damage: std::sync::OnceLock<InvalidBytes>,
}

impl Segment {
    pub(super) fn time_index_max(&self) -> Result<Option<TimestampOffset>> {
        let last = self.time_index.last_entry()?;
        Ok((self.time_index.entries() > 0).then_some(last))
    }

    pub(super) fn publish(&self, writer: &WriterState) {
        self.published_next_offset
            .store(writer.next_offset, Ordering::Relaxed);
        self.published_size.store(writer.size, Ordering::Release);
    }

    /// This segment object's id, unique in the process: what caches of its bytes are keyed by.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The segment's base offset: no offset in it is smaller.
    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }

    /// The bytes of complete batches that readers may see.
    pub fn size(&self) -> u64 {
        self.published_size.load(Ordering::Acquire)
    }

    /// The offset after the last published batch (the base offset when empty).
    pub fn next_offset(&self) -> i64 {
        self.published_next_offset.load(Ordering::Acquire)
    }

    /// The length of the `.log` file now, through the segment's own descriptor: for a live
    /// read-only log, a file shorter than [`size`](Self::size) means the writer truncated it.
    pub fn file_len(&self) -> Result<u64> {
        self.log.len()
    }

    /// Which file the open `.log` is (see [`FileId`](crate::storage::FileId)); `None` if the
    /// storage cannot tell.
    pub fn log_file_id(&self) -> Result<Option<crate::storage::FileId>> {
        self.log.file_id()
    }

    /// The path of the `.log` file.
    pub fn log_path(&self) -> PathBuf {
        self.log_path.clone()
    }

    /// Marks the segment deleted (its files renamed `.deleted`, kept for its last reader): its
    /// indexes write no pending entries when it drops.
    pub(crate) fn retire(&self) {
        self.offset_index.retire();
        self.time_index.retire();
    }

    /// The offset index.
    pub fn offset_index(&self) -> &OffsetIndex {
        &self.offset_index
    }

    /// The time index.
    pub fn time_index(&self) -> &TimeIndex {
        &self.time_index
    }

    /// The largest batch timestamp in the segment and the last offset of its batch, if any
    /// batch has a timestamp (Kafka's `maxTimestampSoFar`; retention reads it).
    pub fn max_timestamp(&self) -> Option<TimestampOffset> {
        self.writer.lock().max_timestamp_so_far
    }

    /// Whether the segment has been sealed (it takes no more appends).
    pub fn is_sealed(&self) -> bool {
        self.sealed.load(Ordering::Acquire)
    }

    pub(super) fn corrupt(&self, position: u64, what: Corruption) -> Error {
        Error::Corrupt {
            file: self.log_path(),
            position,
            what,
        }
    }

    /// The number of times this segment's file was cut back ([`truncate_to`](Self::truncate_to),
    /// [`truncate_tail`](Self::truncate_tail)). A reader that sends file bytes it checked
    /// earlier compares it before and after: bytes below the published size change only
    /// through a truncation followed by new appends.
    pub fn truncations(&self) -> u64 {
        self.truncation_seq.load(Ordering::Acquire).div_ceil(2)
    }

    /// The truncation sequence: odd while a truncation is under way, and moved by each one. A
    /// reader that sends file bytes it checked takes it before its read: the file still holds
    /// those bytes if the value was even and is unchanged.
    pub(crate) fn truncation_sequence(&self) -> u64 {
        self.truncation_seq.load(Ordering::Acquire)
    }

    /// The `.log` file, for zero-copy transfers of bytes a read has checked.
    pub(crate) fn log_file(&self) -> &Arc<dyn StorageFile> {
        &self.log
    }

    /// Gives a format error about a batch the file position it was found at.
    pub(super) fn relocate(&self, error: Error, position: u64) -> Error {
        match error {
            Error::InvalidBatch { what } => self.corrupt(position, what),
            other => other,
        }
    }

    /// Seals the segment at roll or close: writes the time index's final entry (into its reserved
    /// slot) and makes both indexes read-only. Durability is separate: see [`flush`](Self::flush).
    pub fn seal(&self) -> Result<()> {
        // The trim below shrinks the file: the mapping goes first (invariant 17), before the
        // writer lock, which a mapped reader may take while it holds the mapping's read lock.
        let _no_readers =
            (self.config.preallocate && !self.is_sealed()).then(|| self.drop_mapping());
        let mut writer = self.writer.lock();
        writer.index_room = None;
        if self.sealed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        if let Some(max) = writer.max_timestamp_so_far {
            self.time_index
                .maybe_append(max.timestamp, max.offset, true)?;
        }
        if self.config.preallocate && self.log.len()? > writer.size {
            // Kafka's trim at roll and close: a sealed file ends at its last batch.
            self.log.set_len(writer.size)?;
        }
        self.offset_index.seal()?;
        self.time_index.seal()?;
        *self.role.write() = SegmentRole::Sealed;
        Ok(())
    }

    /// Makes a sealed segment take appends again (after the log truncates into it).
    pub fn unseal(&self) -> Result<()> {
        let _no_readers = self.drop_mapping();
        let mut writer = self.writer.lock();
        writer.index_room = None;
        if *self.role.read() == SegmentRole::ReadOnly {
            return Err(Error::InvalidArgument {
                why: "a read-only segment cannot become active".into(),
            });
        }
        self.offset_index.make_writable()?;
        self.time_index.make_writable()?;
        *self.role.write() = SegmentRole::Active;
        self.sealed.store(false, Ordering::Release);
        Ok(())
    }

    /// Makes the `.log` data durable (`fdatasync`), and the indexes with it.
    pub fn flush(&self) -> Result<()> {
        self.sync_with_indexes(false)
    }

    /// Makes a sealed segment durable with its metadata: `fsync` of the `.log`, not `fdatasync`,
    /// because its mtime (set at roll: the append time that time retention reads) is inode
    /// metadata that `fdatasync` may skip; then the indexes.
    pub fn flush_sealed(&self) -> Result<()> {
        self.sync_with_indexes(true)
    }

    /// The `.log` (with its metadata when `with_metadata`), then the indexes, as one of the
    /// segment's serialized syncs.
    fn sync_with_indexes(&self, with_metadata: bool) -> Result<()> {
        self.syncs.run(|| {
            if with_metadata {
                self.log.sync_all()?;
            } else {
                self.log.sync_data()?;
            }
            self.offset_index.sync()?;
            self.time_index.sync()?;
            self.txn_index.flush()
        })
    }

    /// Makes only the `.log` data durable: the acknowledgement path needs nothing else, since
    /// the indexes are derived data that recovery rebuilds.
    pub fn flush_log(&self) -> Result<()> {
        self.syncs.run(|| self.log.sync_data())
    }

    /// Whether a failed write could not be undone, so the file may hold bytes past the last
    /// complete batch: the log must poison itself.
    pub fn append_is_broken(&self) -> bool {
        self.writer.lock().broken
    }

    /// The paths of the segment's `.log`, `.index` and `.timeindex` files, and of its
    /// `.txnindex` when that file exists.
    pub fn file_paths(&self) -> Vec<PathBuf> {
        let mut paths = vec![
            self.log_path(),
            self.offset_index.path(),
            self.time_index.path(),
        ];
        if self.txn_index.file_exists() {
            paths.push(self.txn_index.path());
        }
        paths
    }

    /// The storage this segment lives on.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }
}

pub(super) fn note_max_timestamp(max_so_far: &mut Option<TimestampOffset>, batch: &BatchSummary) {
    if max_so_far.is_none_or(|max| batch.max_timestamp > max.timestamp) {
        *max_so_far = Some(TimestampOffset {
            timestamp: batch.max_timestamp,
            offset: batch.last_offset,
        });
    }
}
