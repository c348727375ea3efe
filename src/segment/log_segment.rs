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
//! This file holds the types, the segment's construction and opening, its accessors, and seal
//! and flush. The rest of `impl Segment` lives beside it, one block a file: `append.rs` (the
//! write path and the roll decision), `read.rs` (reads), `lookup.rs` (offset and timestamp
//! lookups, and the index rebuild policy), `scan.rs` (validation, recovery and truncation) and
//! `transactions.rs` (the aborted-transaction index, `.txnindex`).

use crate::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::sync::{Mutex, RwLock};

use super::files::{SegmentFileKind, segment_file_path};
use super::positions::{DEFAULT_POSITION_CACHE_BYTES, PositionCache};
use super::read::MappingState;
use super::syncs::SegmentSyncs;
use super::txn_index::TransactionIndex;
use super::walker::{BatchSummary, BatchWalker, Step};
use crate::error::{Corruption, Error, Result};
use crate::index::{OffsetIndex, TimeIndex, TimestampOffset};
use crate::storage::{OpenMode, Storage, StorageFile};

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
    /// Creates a new, empty segment at `base_offset` in `dir`: its `.log`, `.index` and
    /// `.timeindex` files (the `.txnindex` comes with the first aborted transaction; a stale one
    /// left at that name belongs to a segment that is gone, and is removed). All or nothing: if
    /// any file cannot be created, the ones already created are removed and the error is
    /// returned. Directory durability is the log's job.
    pub fn create(
        storage: &Arc<dyn Storage>,
        dir: &Path,
        base_offset: i64,
        config: SegmentConfig,
        now_ms: i64,
    ) -> Result<Segment> {
        validate_config(&config)?;
        if base_offset < 0 {
            return Err(Error::InvalidArgument {
                why: format!("segment base offset {base_offset} is negative"),
            });
        }
        let log_path = segment_file_path(dir, base_offset, SegmentFileKind::Log);
        let index_path = segment_file_path(dir, base_offset, SegmentFileKind::OffsetIndex);
        let time_path = segment_file_path(dir, base_offset, SegmentFileKind::TimeIndex);
        let txn_path = segment_file_path(dir, base_offset, SegmentFileKind::TxnIndex);
        let mut created: Vec<&Path> = Vec::new();
        let result = (|| {
            let log = storage.open(&log_path, OpenMode::CreateNew)?;
            created.push(&log_path);
            if config.preallocate {
                log.set_len(u64::from(config.segment_bytes))?;
            }
            let offset_index = OffsetIndex::create(
                storage,
                &index_path,
                base_offset,
                config.segment_index_bytes,
            )?;
            created.push(&index_path);
            let time_index =
                TimeIndex::create(storage, &time_path, base_offset, config.segment_index_bytes)?;
            created.push(&time_path);
            if storage.exists(&txn_path)? {
                storage.remove(&txn_path)?;
                log::warn!(
                    "removed the stale {} of a segment that no longer exists",
                    txn_path.display()
                );
            }
            let txn_index = TransactionIndex::new_empty(storage, &txn_path, base_offset);
            Ok((log, offset_index, time_index, txn_index))
        })();
        let (log, offset_index, time_index, txn_index) = match result {
            Ok(files) => files,
            Err(error) => {
                for path in created {
                    if let Err(cleanup) = storage.remove(path) {
                        log::warn!(
                            "could not remove {} after a failed create: {cleanup}",
                            path.display()
                        );
                    }
                }
                return Err(error);
            }
        };
        Ok(Segment::assemble(
            storage,
            base_offset,
            log_path,
            log,
            offset_index,
            time_index,
            txn_index,
            config,
            SegmentRole::Active,
            now_ms,
        ))
    }

    /// Opens an existing segment, trusting its contents up to the file's length (the log calls
    /// [`scan`](Self::scan) when it does not).
    ///
    /// The work is O(1) plus a walk of the batches after the last offset-index entry (at most
    /// about `index.interval.bytes`), which finds the next offset. Each index gets Kafka's O(1)
    /// check; an index that is missing or fails it is rebuilt from the log, never trusted. For a
    /// [`SegmentRole::ReadOnly`] segment a bad index is an error instead, since nothing may be written.
    pub fn open(
        storage: &Arc<dyn Storage>,
        dir: &Path,
        base_offset: i64,
        config: SegmentConfig,
        role: SegmentRole,
        now_ms: i64,
    ) -> Result<Segment> {
        validate_config(&config)?;
        let log_path = segment_file_path(dir, base_offset, SegmentFileKind::Log);
        let index_path = segment_file_path(dir, base_offset, SegmentFileKind::OffsetIndex);
        let time_path = segment_file_path(dir, base_offset, SegmentFileKind::TimeIndex);
        let (mode, writable_indexes) = match role {
            SegmentRole::Active => (OpenMode::ReadWrite, true),
            SegmentRole::Sealed => (OpenMode::ReadWrite, false),
            SegmentRole::ReadOnly => (OpenMode::Read, false),
        };
        let log = storage.open(&log_path, mode)?;
        let size = log.len()?;
        if size > i32::MAX as u64 {
            return Err(Error::Corrupt {
                file: log_path,
                position: i32::MAX as u64,
                what: Corruption::Truncated {
                    needed: i32::MAX as u64,
                    available: size,
                },
            });
        }
        let (offset_index, time_index, created) = open_indexes(
            storage,
            [&index_path, &time_path],
            base_offset,
            config.segment_index_bytes,
            role,
            writable_indexes,
        )?;
        let txn_index = TransactionIndex::open(
            storage,
            &segment_file_path(dir, base_offset, SegmentFileKind::TxnIndex),
            base_offset,
            role != SegmentRole::ReadOnly,
        )?;
        let offset_index_ok = offset_index.quick_check(size).is_ok();
        let time_index_ok = time_index.quick_check().is_ok();
        let rebuild = created || !offset_index_ok || !time_index_ok;
        let segment = Segment::assemble(
            storage,
            base_offset,
            log_path,
            log,
            offset_index,
            time_index,
            txn_index,
            config,
            role,
            now_ms,
        );
        // Loaded lazily from the first batch when a roll check needs it.
        segment.writer.lock().rolling_based_timestamp = None;
        // The tail is found from the last index entry: if what lies there is no valid batch,
        // the entry may be what is wrong, and a full scan (which rebuilds the indexes) tells.
        let rebuild = rebuild
            || match segment.load_tail(size) {
                Ok(()) => false,
                Err(Error::Corrupt { .. }) if role != SegmentRole::ReadOnly => true,
                Err(error) => return Err(error),
            };
        if rebuild {
            if role == SegmentRole::ReadOnly {
                // Name the index that failed, so that the user knows which file to look at.
                let bad_index = if created || !offset_index_ok {
                    segment.offset_index.path()
                } else {
                    segment.time_index.path()
                };
                return Err(Error::Corrupt {
                    file: bad_index,
                    position: 0,
                    what: Corruption::BadIndexEntry(
                        "the index is missing or fails its check, and a read-only open may not rebuild it"
                            .into(),
                    ),
                });
            }
            log::info!("rebuilding the indexes of {}", segment.log_path().display());
            let report = segment.rescan()?;
            if let Some(invalid) = report.first_invalid {
                return Err(Error::Corrupt {
                    file: segment.log_path(),
                    position: invalid.position,
                    what: invalid.what,
                });
            }
        }
        Ok(segment)
    }

    /// Opens an existing segment as the active one without trusting anything in it: the indexes
    /// are opened (created when missing) but not checked, and nothing is published until the
    /// caller runs [`scan`](Self::scan), which validates every batch and rebuilds the indexes.
    /// This is how recovery opens the segments above the recovery point.
    ///
    /// With `read_only`, nothing is written: the `.log` opens read-only and the indexes are
    /// rebuilt in memory only.
    // ARCHITECTURE.md §3, invariant 22.
    pub fn open_for_recovery(
        storage: &Arc<dyn Storage>,
        dir: &Path,
        base_offset: i64,
        config: SegmentConfig,
        now_ms: i64,
        read_only: bool,
    ) -> Result<Segment> {
        validate_config(&config)?;
        let log_path = segment_file_path(dir, base_offset, SegmentFileKind::Log);
        let index_path = segment_file_path(dir, base_offset, SegmentFileKind::OffsetIndex);
        let time_path = segment_file_path(dir, base_offset, SegmentFileKind::TimeIndex);
        // Kept as it is: rebuilding it needs the producer state, which is the log's.
        let txn_index = TransactionIndex::open(
            storage,
            &segment_file_path(dir, base_offset, SegmentFileKind::TxnIndex),
            base_offset,
            !read_only,
        )?;
        if read_only {
            let log = storage.open(&log_path, OpenMode::Read)?;
            let offset_index =
                OffsetIndex::in_memory(&index_path, base_offset, config.segment_index_bytes)?;
            let time_index =
                TimeIndex::in_memory(&time_path, base_offset, config.segment_index_bytes)?;
            return Ok(Segment::assemble(
                storage,
                base_offset,
                log_path,
                log,
                offset_index,
                time_index,
                txn_index,
                config,
                SegmentRole::ReadOnly,
                now_ms,
            ));
        }
        let log = storage.open(&log_path, OpenMode::ReadWrite)?;
        let role = SegmentRole::Active;
        let (offset_index, time_index, _) = open_indexes(
            storage,
            [&index_path, &time_path],
            base_offset,
            config.segment_index_bytes,
            role,
            true,
        )?;
        Ok(Segment::assemble(
            storage,
            base_offset,
            log_path,
            log,
            offset_index,
            time_index,
            txn_index,
            config,
            role,
            now_ms,
        ))
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "a private constructor that names every part"
    )]
    fn assemble(
        storage: &Arc<dyn Storage>,
        base_offset: i64,
        log_path: PathBuf,
        log: Arc<dyn StorageFile>,
        offset_index: OffsetIndex,
        time_index: TimeIndex,
        txn_index: TransactionIndex,
        config: SegmentConfig,
        role: SegmentRole,
        now_ms: i64,
    ) -> Segment {
        let position_cache_bytes = config.position_cache_bytes;
        Segment {
            storage: Arc::clone(storage),
            base_offset,
            log_path,
            log,
            offset_index,
            time_index,
            txn_index,
            config,
            role: RwLock::new(role),
            published_size: AtomicU64::new(0),
            published_next_offset: AtomicI64::new(base_offset),
            sealed: AtomicBool::new(role != SegmentRole::Active),
            truncation_seq: AtomicU64::new(0),
            truncated_to: AtomicI64::new(i64::MAX),
            mapping: RwLock::new(MappingState::NotYet),
            positions: PositionCache::new(position_cache_bytes),
            writer: Mutex::new(WriterState {
                size: 0,
                next_offset: base_offset,
                bytes_since_last_index_entry: 0,
                max_timestamp_so_far: None,
                rolling_based_timestamp: Some(None),
                created_ms: now_ms,
                broken: false,
                index_room: None,
            }),
            syncs: SegmentSyncs::default(),
            damage: std::sync::OnceLock::new(),
        }
    }

    /// Finds the next offset, the largest timestamp and the index counter from the last index
    /// entries and a walk of the batches after them.
    fn load_tail(&self, size: u64) -> Result<()> {
        let mut writer = self.writer.lock();
        writer.index_room = None;
        let last_entry = self.offset_index.last_entry()?;
        let mut max_so_far = self.time_index_max()?;
        let mut next_offset = self.base_offset;
        let mut walker = BatchWalker::new(&self.log, &self.log_path, size);
        let mut position = u64::from(last_entry.position);
        loop {
            match walker.frame_at(position)? {
                Step::End => break,
                Step::Partial { available, needed } => {
                    return Err(Error::Corrupt {
                        file: self.log_path(),
                        position,
                        what: Corruption::Truncated { needed, available },
                    });
                }
                Step::Batch(frame) => {
                    let summary = walker.summary(&frame)?;
                    // The tail sets the segment's end: a damaged baseOffset or lastOffsetDelta
                    // here would move it, and hide or invent offsets without an error.
                    if summary.order_floor() < next_offset
                        || summary.last_offset < summary.order_floor()
                        || summary.last_offset - self.base_offset > i32::MAX as i64
                    {
                        return Err(Error::Corrupt {
                            file: self.log_path(),
                            position,
                            what: Corruption::OffsetOrder {
                                offset: summary.order_floor(),
                                bound: next_offset,
                            },
                        });
                    }
                    next_offset = summary.next_offset();
                    note_max_timestamp(&mut max_so_far, &summary);
                    position += frame.total_size;
                }
            }
        }
        writer.size = size;
        writer.next_offset = next_offset;
        writer.bytes_since_last_index_entry = size - u64::from(last_entry.position);
        writer.max_timestamp_so_far = max_so_far;
        self.publish(&writer);
        Ok(())
    }

    pub(super) fn time_index_max(&self) -> Result<Option<TimestampOffset>> {
        let last = self.time_index.last_entry()?;
        Ok((self.time_index.entries() > 0).then_some(last))
    }

    pub(super) fn publish(&self, writer: &WriterState) {
        self.published_next_offset
            .store(writer.next_offset, Ordering::Relaxed);
        self.published_size.store(writer.size, Ordering::Release);
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
        self.syncs.run(|| {
            self.log.sync_data()?;
            self.offset_index.sync()?;
            self.time_index.sync()?;
            self.txn_index.flush()
        })
    }

    /// Makes a sealed segment durable with its metadata: `fsync` of the `.log`, not `fdatasync`,
    /// because its mtime (set at roll: the append time that time retention reads) is inode
    /// metadata that `fdatasync` may skip; then the indexes.
    pub fn flush_sealed(&self) -> Result<()> {
        self.syncs.run(|| {
            self.log.sync_all()?;
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

/// Opens a segment's offset and time indexes (`paths` in that order), creating a missing one
/// when the role allows writing. Returns them and whether either was created (so the pair must
/// be rebuilt from the log). A read-only role treats a missing index as corruption.
fn open_indexes(
    storage: &Arc<dyn Storage>,
    [index_path, time_path]: [&Path; 2],
    base_offset: i64,
    max_index_bytes: u32,
    role: SegmentRole,
    writable: bool,
) -> Result<(OffsetIndex, TimeIndex, bool)> {
    let missing = |path: &Path| -> Result<bool> {
        let missing = !storage.exists(path)?;
        if missing && role == SegmentRole::ReadOnly {
            return Err(Error::Corrupt {
                file: path.to_path_buf(),
                position: 0,
                what: Corruption::BadIndexEntry("the index file is missing".into()),
            });
        }
        Ok(missing)
    };
    let (index_missing, time_missing) = (missing(index_path)?, missing(time_path)?);
    let offset_index = if index_missing {
        OffsetIndex::create(storage, index_path, base_offset, max_index_bytes)?
    } else {
        OffsetIndex::open(storage, index_path, base_offset, max_index_bytes, writable)?
    };
    let time_index = if time_missing {
        TimeIndex::create(storage, time_path, base_offset, max_index_bytes)?
    } else {
        TimeIndex::open(storage, time_path, base_offset, max_index_bytes, writable)?
    };
    Ok((offset_index, time_index, index_missing || time_missing))
}

pub(super) fn note_max_timestamp(max_so_far: &mut Option<TimestampOffset>, batch: &BatchSummary) {
    if max_so_far.is_none_or(|max| batch.max_timestamp > max.timestamp) {
        *max_so_far = Some(TimestampOffset {
            timestamp: batch.max_timestamp,
            offset: batch.last_offset,
        });
    }
}

fn validate_config(config: &SegmentConfig) -> Result<()> {
    if config.segment_bytes == 0 || config.segment_bytes > i32::MAX as u32 {
        return Err(Error::InvalidConfig {
            setting: "segment.bytes",
            why: format!("{} is outside [1, {}]", config.segment_bytes, i32::MAX),
        });
    }
    if config.segment_index_bytes < 12 {
        return Err(Error::InvalidConfig {
            setting: "segment.index.bytes",
            why: format!(
                "{} is below one time-index entry (12 bytes)",
                config.segment_index_bytes
            ),
        });
    }
    if config.segment_ms <= 0 {
        return Err(Error::InvalidConfig {
            setting: "segment.ms",
            why: format!("{} is not positive", config.segment_ms),
        });
    }
    if config.roll_jitter_ms < 0 || config.roll_jitter_ms >= config.segment_ms {
        return Err(Error::InvalidConfig {
            setting: "segment.jitter.ms",
            why: format!(
                "the drawn jitter {} is outside [0, segment.ms)",
                config.roll_jitter_ms
            ),
        });
    }
    Ok(())
}
