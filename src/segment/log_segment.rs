//! [`Segment`]: one `.log` file of record batches with its [`OffsetIndex`] and [`TimeIndex`].
//!
//! A segment knows nothing of other segments and assigns no offsets: it stores batches whose
//! offsets the log chose, keeps Kafka's sparse indexes over them, and answers reads.
//!
//! Concurrency: one appender and any number of readers share a segment through `&self`. The
//! appender serialises on an internal mutex; readers take it only to rebuild an index they
//! found bad, after letting an append under way finish. A batch becomes readable when
//! `published_size` moves past it, which happens (with `Release`) only after its bytes and its
//! index entries are complete (DESIGN §3.2).

use crate::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::sync::{Mutex, RwLock};

use super::files::{SegmentFileKind, segment_file_path};
use super::positions::{CachedBatch, DEFAULT_POSITION_CACHE_BYTES, PositionCache, RunBuilder};
use super::walker::{BatchSummary, BatchWalker, Frame, Step};
use crate::error::{Corruption, Error, Result};
use crate::format::{Batch, BatchHeader, peek_batch_frame};
use crate::index::{OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset, truncation_temp_path};
use crate::storage::{OpenMode, Storage, StorageFile};

/// Whether a sealed segment's `.log` is mapped for reads.
#[derive(Debug)]
enum MappingState {
    /// Not tried yet (or dropped by a truncation or an unseal; a later seal allows a new one).
    NotYet,
    /// Mapped: its length is the sealed size.
    Mapped(crate::storage::ReadMapping),
    /// The storage cannot map, or mapping failed: positional reads.
    Unavailable,
}

/// How many times a read runs again after truncations that left its start offset in place
/// overtook it, before it gives up with [`Error::Truncated`].
const MAX_TRUNCATION_RETRIES: u32 = 4;

/// The most a read reads ahead past the index interval in one system call, whatever its
/// `max_bytes`: a caller asking for "everything" must not make each read allocate gigabytes.
const MAX_READ_AHEAD_BYTES: usize = 8 << 20;

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

/// Where a read may find its first batch without the index walk.
#[derive(Debug)]
struct ReadStart {
    /// The offset the read starts at.
    offset: i64,
    /// The end of the previous read of this segment (a sequential reader).
    resume_at: Option<u64>,
    /// The batch the position cache places there.
    cached: Option<CachedBatch>,
    /// The position cache's generation before any byte was read.
    generation: u64,
    /// What the segment had published when the read began.
    view: ReadView,
}

/// What a read of a segment takes before it reads a byte: the truncation epoch, then the
/// published size it reads up to. Whatever looks wrong in the bytes below `end` is corruption
/// only if no truncation overlapped the read ([`Segment::raced_truncation`]) and no index entry
/// it used was added after `end` (the writer indexes a batch before it publishes it).
#[derive(Debug, Clone, Copy)]
struct ReadView {
    /// The truncation sequence when the read began.
    epoch: u64,
    /// The published size, read after `epoch`.
    end: u64,
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
struct WriterState {
    /// Bytes of complete batches; equals `published_size` between calls.
    size: u64,
    /// The offset after the last batch.
    next_offset: i64,
    /// Bytes appended since the last index entry (Kafka's `bytesSinceLastIndexEntry`).
    bytes_since_last_index_entry: u64,
    /// The largest batch timestamp so far and the last offset of its batch.
    max_timestamp_so_far: Option<TimestampOffset>,
    /// The first batch's max timestamp (Kafka's `rollingBasedTimestamp`), loaded lazily.
    rolling_based_timestamp: Option<Option<i64>>,
    /// When the segment was created, or last emptied by a truncation (Kafka's `created`):
    /// the age a segment whose first batch has no timestamp rolls on.
    created_ms: i64,
    /// Set when a failed write could not be undone: the file may hold bytes past `size`.
    broken: bool,
    /// How many more entries the offset index and the time index take before they are full
    /// (the time index keeps its last slot for the seal), so that `should_roll` need not take
    /// both indexes' locks on every append. `None`: unknown, read from the indexes at the next
    /// `should_roll`. Every path that changes an index other than an append without index
    /// entries resets it.
    index_room: Option<(usize, usize)>,
}

/// A `.log` file and its two indexes. One appender and any number of readers share it through
/// `&self`; a batch becomes readable only once its bytes and index entries are complete.
#[derive(Debug)]
pub struct Segment {
    storage: Arc<dyn Storage>,
    base_offset: i64,
    /// The `.log` path: fixed for the segment's life (renames make new segments).
    log_path: PathBuf,
    log: Arc<dyn StorageFile>,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    config: SegmentConfig,
    role: RwLock<SegmentRole>,
    published_size: AtomicU64,
    published_next_offset: AtomicI64,
    sealed: AtomicBool,
    /// The truncation sequence: every truncation makes it odd before it changes an index or
    /// cuts the file, and even again once the segment is published at its new end. A reader
    /// takes it before the size it reads to ([`Segment::read_in_place`]): an odd value, or a
    /// different one later, means the bytes it read may have been cut under it.
    truncation_seq: AtomicU64,
    /// The end (next offset) that the latest truncation left, or is leaving: what a reader it
    /// overtook is told in [`Error::Truncated`]. Stored before `truncation_seq` turns odd.
    truncated_to: AtomicI64,
    /// The read-only mapping of a sealed `.log` (`SegmentConfig::map_sealed_reads`), made at the
    /// first read after the seal. Readers hold the read lock while they touch the mapped bytes;
    /// every truncation and unseal takes the write lock and drops the mapping before the file can
    /// shrink, so partlog never cuts a file under a reader's feet (which would raise SIGBUS).
    mapping: RwLock<MappingState>,
    /// Batch positions learned from reads' index walks (bounded; see `positions.rs`).
    positions: PositionCache,
    writer: Mutex<WriterState>,
}

impl Segment {
    /// Creates a new, empty segment at `base_offset` in `dir`: its `.log`, `.index` and
    /// `.timeindex` files. All or nothing: if any file cannot be created, the ones already
    /// created are removed and the error is returned. Directory durability is the log's job.
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
            Ok((log, offset_index, time_index))
        })();
        let (log, offset_index, time_index) = match result {
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
    /// rebuilt in memory only (DESIGN §4, `open_read_only`).
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

    fn time_index_max(&self) -> Result<Option<TimestampOffset>> {
        let last = self.time_index.last_entry()?;
        Ok((self.time_index.entries() > 0).then_some(last))
    }

    fn publish(&self, writer: &WriterState) {
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

    fn corrupt(&self, position: u64, what: Corruption) -> Error {
        Error::Corrupt {
            file: self.log_path(),
            position,
            what,
        }
    }

    /// Appends one or more encoded v2 batches whose offsets the log has assigned.
    ///
    /// Checks: every batch is whole and framed as v2; offsets increase (a batch's base is at or
    /// above the previous batch's next offset: gaps are legal, as in a compacted log); the last
    /// offset fits the 32-bit relative range; the file stays within `i32::MAX` bytes. CRCs are
    /// the caller's to check (the log validates batches before assigning offsets).
    ///
    /// Indexing follows Kafka: an entry is added for a batch once more than
    /// `index.interval.bytes` have been appended since the last entry, so the first batch of a
    /// segment is never indexed. A full index is simply not extended (the log rolls on it).
    ///
    /// A failed write truncates the file back to the end of the last complete batch; if even that
    /// fails, the segment refuses further appends (the log poisons itself).
    pub fn append(&self, batches: &[u8]) -> Result<AppendInfo> {
        let mut writer = self.writer.lock();
        self.append_locked(&mut writer, batches)
    }

    /// [`should_roll`](Self::should_roll) for one batch, then, if it should not, its
    /// [`append`](Self::append), under one hold of the writer lock: `Ok(Err(reason))` when the
    /// segment should roll first (nothing was appended).
    pub fn append_unless_roll(
        &self,
        batch: &[u8],
        max_timestamp: i64,
        last_offset: i64,
        now_ms: i64,
    ) -> Result<std::result::Result<AppendInfo, RollReason>> {
        let mut writer = self.writer.lock();
        if let Some(reason) = self.roll_reason(
            &mut writer,
            batch.len() as u64,
            max_timestamp,
            last_offset,
            now_ms,
        )? {
            return Ok(Err(reason));
        }
        self.append_locked(&mut writer, batch).map(Ok)
    }

    fn append_locked(&self, writer: &mut WriterState, batches: &[u8]) -> Result<AppendInfo> {
        if self.is_sealed() {
            return Err(Error::InvalidArgument {
                why: format!(
                    "segment {} is sealed and takes no appends",
                    self.base_offset
                ),
            });
        }
        if writer.broken {
            return Err(Error::InvalidArgument {
                why: format!(
                    "segment {} could not undo an earlier failed write; reopen the log",
                    self.base_offset
                ),
            });
        }
        let start = writer.size;
        let new_size = start + batches.len() as u64;
        if new_size > i32::MAX as u64 {
            return Err(Error::RecordTooLarge {
                size: batches.len() as u64,
                max: (i32::MAX as u64).saturating_sub(start),
            });
        }
        let checked = self.check_batches(batches, writer.next_offset)?;
        let (first_offset, last_offset) = (checked.first_offset, checked.last_offset);

        if let Err(error) = self.log.write_all_at(batches, start) {
            self.undo_write(writer, start);
            return Err(error);
        }

        let mut max_timestamp = i64::MIN;
        let mut bytes_since = writer.bytes_since_last_index_entry;
        let mut max_so_far = writer.max_timestamp_so_far;
        let mut index_changed = false;
        let index_result = (|| {
            // The headers again, parsed where check_batches parsed them (and cannot fail now):
            // cheaper than collecting them, which cost an allocation per append.
            let mut relative_position = 0usize;
            while let Some(rest) = batches.get(relative_position..).filter(|r| !r.is_empty()) {
                let header =
                    BatchHeader::parse(rest).map_err(|what| Error::InvalidBatch { what })?;
                let position = start + relative_position as u64;
                relative_position += header.total_size();
                max_timestamp = max_timestamp.max(header.max_timestamp);
                note_max_timestamp(&mut max_so_far, &BatchSummary::of_v2(&header));
                if bytes_since > u64::from(self.config.index_interval_bytes) {
                    index_changed = true;
                    if !self.offset_index.is_full() {
                        // Positions fit: the whole file stays within i32::MAX bytes.
                        self.offset_index
                            .append(header.last_offset(), position as u32)?;
                    }
                    if let (Some(max), false) = (max_so_far, self.time_index.is_full()) {
                        self.time_index
                            .maybe_append(max.timestamp, max.offset, false)?;
                    }
                    bytes_since = 0;
                }
                bytes_since += header.total_size() as u64;
            }
            Ok::<(), Error>(())
        })();
        if index_changed {
            writer.index_room = None;
        }
        if let Err(error) = index_result {
            // The index entries may point at bytes that are about to vanish: drop them too.
            let _ = self.offset_index.truncate_to(first_offset);
            let _ = self.time_index.truncate_to(first_offset);
            self.undo_write(writer, start);
            return Err(error);
        }

        if start == 0 {
            writer.rolling_based_timestamp = Some(Some(checked.first_max_timestamp));
        }
        writer.size = new_size;
        writer.next_offset = last_offset + 1;
        writer.bytes_since_last_index_entry = bytes_since;
        writer.max_timestamp_so_far = max_so_far;
        self.publish(writer);
        Ok(AppendInfo {
            position: start,
            batches: checked.count,
            first_offset,
            last_offset,
            max_timestamp,
        })
    }

    /// Parses and checks the framing and offsets of `batches`; returns what the append needs
    /// of them. Fails on zero batches.
    fn check_batches(&self, batches: &[u8], mut next_offset: i64) -> Result<CheckedBatches> {
        let mut checked: Option<CheckedBatches> = None;
        let mut position = 0usize;
        while position < batches.len() {
            let rest = &batches[position..];
            let invalid = |what| Error::InvalidBatch { what };
            let header = BatchHeader::parse(rest).map_err(invalid)?;
            let size = header.total_size();
            if size > rest.len() {
                return Err(invalid(Corruption::Truncated {
                    needed: size as u64,
                    available: rest.len() as u64,
                }));
            }
            if header.base_offset < next_offset || header.base_offset < self.base_offset {
                return Err(invalid(Corruption::OffsetOrder {
                    offset: header.base_offset,
                    bound: next_offset.max(self.base_offset),
                }));
            }
            if header.last_offset_delta < 0 {
                return Err(invalid(Corruption::BadHeader(
                    "lastOffsetDelta is negative",
                )));
            }
            let last = header.last_offset();
            if last - self.base_offset > i32::MAX as i64 {
                return Err(Error::InvalidArgument {
                    why: format!(
                        "offset {last} does not fit segment {} (relative offsets are 32-bit)",
                        self.base_offset
                    ),
                });
            }
            next_offset = last + 1;
            let checked = checked.get_or_insert(CheckedBatches {
                count: 0,
                first_offset: header.base_offset,
                last_offset: last,
                first_max_timestamp: header.max_timestamp,
            });
            checked.count += 1;
            checked.last_offset = last;
            position += size;
        }
        checked.ok_or_else(|| Error::InvalidArgument {
            why: "append of zero batches".into(),
        })
    }

    /// Truncates the file back to `size` after a failed append; marks the segment broken if
    /// even that fails.
    fn undo_write(&self, writer: &mut WriterState, size: u64) {
        if let Err(error) = self.log.set_len(size) {
            log::error!(
                "could not truncate {} back to {size} bytes after a failed append: {error}",
                self.log_path().display()
            );
            writer.broken = true;
        }
    }

    /// Whether the segment should roll before an append of `incoming_bytes` whose largest
    /// timestamp is `incoming_max_timestamp` and whose last offset is `incoming_last_offset`
    /// (Kafka's `shouldRoll`, reference §2.7).
    pub fn should_roll(
        &self,
        incoming_bytes: u64,
        incoming_max_timestamp: i64,
        incoming_last_offset: i64,
        now_ms: i64,
    ) -> Result<Option<RollReason>> {
        let mut writer = self.writer.lock();
        self.roll_reason(
            &mut writer,
            incoming_bytes,
            incoming_max_timestamp,
            incoming_last_offset,
            now_ms,
        )
    }

    fn roll_reason(
        &self,
        writer: &mut WriterState,
        incoming_bytes: u64,
        incoming_max_timestamp: i64,
        incoming_last_offset: i64,
        now_ms: i64,
    ) -> Result<Option<RollReason>> {
        let size = writer.size;
        // Kafka's `size > segment.bytes - incoming`, except that an empty segment never rolls on
        // size: a new one would be no roomier.
        if size > 0 && size + incoming_bytes > u64::from(self.config.segment_bytes) {
            return Ok(Some(RollReason::Size));
        }
        if size > 0 {
            let rolling_based = match writer.rolling_based_timestamp {
                Some(known) => known,
                None => {
                    let first = self.first_batch_max_timestamp(size)?;
                    writer.rolling_based_timestamp = Some(first);
                    first
                }
            };
            let waited = match rolling_based {
                Some(first) if first >= 0 => incoming_max_timestamp.saturating_sub(first),
                _ => now_ms.saturating_sub(writer.created_ms),
            };
            if waited > self.config.segment_ms - self.config.roll_jitter_ms {
                return Ok(Some(RollReason::Age));
            }
        }
        let (offset_room, time_room) = match writer.index_room {
            Some(room) => room,
            None => {
                let room = (
                    self.offset_index
                        .max_entries()
                        .saturating_sub(self.offset_index.entries()),
                    self.time_index
                        .max_entries()
                        .saturating_sub(1)
                        .saturating_sub(self.time_index.entries()),
                );
                writer.index_room = Some(room);
                room
            }
        };
        if offset_room == 0 {
            return Ok(Some(RollReason::OffsetIndexFull));
        }
        if time_room == 0 {
            return Ok(Some(RollReason::TimeIndexFull));
        }
        if incoming_last_offset.saturating_sub(self.base_offset) > i32::MAX as i64 {
            return Ok(Some(RollReason::OffsetOverflow));
        }
        Ok(None)
    }

    fn first_batch_max_timestamp(&self, size: u64) -> Result<Option<i64>> {
        let mut walker = BatchWalker::new(&self.log, &self.log_path, size);
        match walker.frame_at(0)? {
            Step::Batch(frame) => Ok(Some(walker.summary(&frame)?.max_timestamp)),
            _ => Ok(None),
        }
    }

    /// Finds the first batch whose last offset is at or above `target`, below `end`.
    ///
    /// The offset index gives a starting position; its entry is checked against the batch it
    /// names (as Kafka's DumpLogSegments does), and on a mismatch the indexes are rebuilt from the
    /// log and the lookup retried once, unless [`may_rebuild`](Self::may_rebuild) says the
    /// entry may only look bad to this read: a cut, or the appends after it or after `view`
    /// was taken, make good entries look bad to a walk that began before them.
    fn translate_offset(
        &self,
        target: i64,
        view: ReadView,
    ) -> Result<Option<(Frame, BatchSummary)>> {
        let mut walker = BatchWalker::new(&self.log, &self.log_path, view.end);
        self.translate_offset_in(target, view, &mut walker, &mut 0)
    }

    /// [`translate_offset`](Self::translate_offset) through the caller's walker, whose window
    /// then holds the bytes read (a read goes on from there without another system call).
    /// `walk_from` is set to the position the successful walk started at (a batch boundary).
    fn translate_offset_in(
        &self,
        target: i64,
        view: ReadView,
        walker: &mut BatchWalker<'_>,
        walk_from: &mut u64,
    ) -> Result<Option<(Frame, BatchSummary)>> {
        let end = view.end;
        for attempt in 0..2 {
            let entry = match self.offset_index.lookup(target) {
                Ok(entry) => entry,
                // An entry that fails its own range check: the index is derived, so rebuild it.
                Err(Error::Corrupt { .. }) if attempt == 0 && self.may_rebuild(view) => {
                    self.rebuild_indexes()?;
                    continue;
                }
                Err(error) => return Err(error),
            };
            let mut position = u64::from(entry.position);
            *walk_from = position;
            let mut first = true;
            let mut order_floor = self.base_offset;
            // The batch last skipped on its lastOffsetDelta (and batchLength), which only its
            // CRC protects: a damaged one would hide the batch's records without an error. The
            // next batch proves both when its baseOffset is the skipped batch's last offset + 1
            // (a damaged delta or length would have to be matched by a damaged baseOffset);
            // otherwise (a gap left by compaction, the end, an error) the skipped batch's CRC
            // is checked before anything else happens.
            let mut skipped: Option<Frame> = None;
            loop {
                // What lies at an index entry's position is only as good as the entry: bytes
                // there that are no batch header mean a bad entry, not a corrupt log.
                let at_entry = first && position != 0;
                let step = match walker.frame_at(position) {
                    Err(Error::Corrupt { .. }) if at_entry => {
                        if attempt == 0 && self.may_rebuild(view) {
                            break;
                        }
                        return Err(self.bad_entry(entry, "does not point at a batch"));
                    }
                    Err(error) => {
                        self.check_skipped(walker, skipped.take())?;
                        return Err(error);
                    }
                    Ok(step) => step,
                };
                let frame = match step {
                    Step::Batch(frame) => frame,
                    Step::End if !first || position == 0 => {
                        self.check_skipped(walker, skipped.take())?;
                        return Ok(None);
                    }
                    // The published end lies on a batch boundary, so a frame that runs past it
                    // is a damaged length, never a batch still being written.
                    Step::Partial { available, needed } if !first || position == 0 => {
                        self.check_skipped(walker, skipped.take())?;
                        return Err(
                            self.corrupt(position, Corruption::Truncated { needed, available })
                        );
                    }
                    Step::End | Step::Partial { .. } => {
                        // An entry the writer added for a batch it has not published yet (the
                        // caller asked past the end this read saw): `target`, at or above it,
                        // is above every offset the segment holds, so nothing here holds it.
                        if entry.offset >= self.next_offset() {
                            return Ok(None);
                        }
                        // Otherwise the entry points past the published end: it cannot be
                        // trusted.
                        if attempt == 0 && self.may_rebuild(view) {
                            break;
                        }
                        return Err(self.bad_entry(entry, "points past the end of the log"));
                    }
                };
                let summary = match walker.summary(&frame) {
                    Err(Error::Corrupt { .. }) if at_entry => {
                        if attempt == 0 && self.may_rebuild(view) {
                            break;
                        }
                        return Err(self.bad_entry(entry, "does not point at a batch"));
                    }
                    Err(error) => {
                        self.check_skipped(walker, skipped.take())?;
                        return Err(error);
                    }
                    Ok(summary) => summary,
                };
                // Proven by this batch's baseOffset, or checked now.
                let unproven = skipped
                    .take()
                    .filter(|_| summary.base_offset != Some(order_floor));
                self.check_skipped(walker, unproven)?;
                // Offsets lie outside the CRC: a damaged baseOffset that leaves the batch below
                // the one before it, outside the segment's range, or past the segment's end
                // would be returned under wrong offsets. The end is read after `end` was (the
                // writer publishes it first); a truncation meanwhile shrinks the size, and then
                // the end says nothing about this batch.
                let past_end = summary.last_offset >= self.next_offset() && self.size() >= end;
                if summary.order_floor() < order_floor
                    || summary.last_offset < summary.order_floor()
                    || summary.last_offset - self.base_offset > i32::MAX as i64
                    || past_end
                {
                    return Err(self.corrupt(
                        frame.position,
                        Corruption::OffsetOrder {
                            offset: summary.order_floor(),
                            bound: order_floor,
                        },
                    ));
                }
                order_floor = summary.next_offset();
                if first && position != 0 && summary.last_offset != entry.offset {
                    if attempt == 0 && self.may_rebuild(view) {
                        log::warn!(
                            "index entry ({}, {}) of {} names a batch ending at {}; rebuilding",
                            entry.offset,
                            entry.position,
                            self.log_path().display(),
                            summary.last_offset
                        );
                        break;
                    }
                    return Err(self.bad_entry(entry, "does not name the batch at its position"));
                }
                first = false;
                if summary.last_offset >= target {
                    return Ok(Some((frame, summary)));
                }
                skipped = Some(frame);
                position += frame.total_size;
            }
            self.rebuild_indexes()?;
        }
        Ok(None)
    }

    /// Checks the CRC of a batch the walk skipped without proof (see `translate_offset_in`).
    fn check_skipped(&self, walker: &mut BatchWalker<'_>, skipped: Option<Frame>) -> Result<()> {
        let Some(frame) = skipped else {
            return Ok(());
        };
        let bytes = walker.batch_bytes(&frame)?;
        Batch::new(bytes)
            .map(|_| ())
            .map_err(|what| self.corrupt(frame.position, what))
    }

    fn can_rebuild(&self) -> bool {
        *self.role.read() != SegmentRole::ReadOnly
    }

    /// Whether a read that took `view` may rebuild the indexes over an entry it found bad: not
    /// when a truncation overlapped it (the entry may be fine and the bytes under it cut or
    /// new), nor when the segment has grown since (the entry may name a batch published after
    /// `view`); rebuilding the active segment's indexes would then race its writer for nothing.
    /// The read fails instead, and [`read_in_place`](Self::read_in_place) tells why.
    fn may_rebuild(&self, view: ReadView) -> bool {
        if !self.can_rebuild() || self.raced_truncation(view.epoch).is_some() {
            return false;
        }
        // An append writes its index entries before it publishes its batches: let one under
        // way finish (the rebuild would wait for it anyway), then see whether it moved the end.
        drop(self.writer.lock());
        self.size() == view.end && self.raced_truncation(view.epoch).is_none()
    }

    fn bad_entry(&self, entry: OffsetPosition, why: &str) -> Error {
        Error::Corrupt {
            file: self.offset_index.path(),
            position: 0,
            what: Corruption::BadIndexEntry(format!(
                "entry (offset {}, position {}) {why}",
                entry.offset, entry.position
            )),
        }
    }

    /// Rebuilds both indexes from the log (used when an entry fails its check).
    fn rebuild_indexes(&self) -> Result<()> {
        let report = self.rescan()?;
        if let Some(invalid) = report.first_invalid {
            return Err(self.corrupt(invalid.position, invalid.what));
        }
        Ok(())
    }

    /// [`scan`](Self::scan) for a segment of any role. A sealed segment's indexes refuse
    /// appends, so they are made writable for the scan, get back the final time-index entry
    /// that [`seal`](Self::seal) wrote, and are synced and sealed again: a bad entry found in a
    /// sealed index by a read or at open must be rebuilt, not turned into an error.
    fn rescan(&self) -> Result<ScanReport> {
        // A sealed segment whose index files were missing has new, writable ones: they too get
        // the final time-index entry and the seal (a compacted segment's indexes are built so).
        let sealed = self.offset_index.is_sealed()
            || self.time_index.is_sealed()
            || *self.role.read() == SegmentRole::Sealed;
        if !sealed {
            return self.scan();
        }
        // The rebuilt indexes are written to new files under temporary names and renamed into
        // place only once synced. A sealed segment below the recovery point is trusted at the
        // next open after an O(1) check, so a crash must not leave an index whose unsynced
        // entries read back as zeros (an entry (0, 0) passes that check): it leaves either the
        // old files, untouched, or the temporary ones, which open deletes unread
        // (`*.deleted`), and the index is rebuilt again.
        let on_disk = !self.offset_index.is_in_memory() && !self.time_index.is_in_memory();
        let final_paths = [self.offset_index.path(), self.time_index.path()];
        if on_disk {
            let [offset_path, time_path] = &final_paths;
            self.offset_index
                .restart_at(&truncation_temp_path(offset_path))?;
            self.time_index
                .restart_at(&truncation_temp_path(time_path))?;
        } else {
            self.offset_index.make_writable()?;
            self.time_index.make_writable()?;
        }
        let report = self.scan()?;
        if report.first_invalid.is_none() {
            let writer = self.writer.lock();
            if let Some(max) = writer.max_timestamp_so_far {
                self.time_index
                    .maybe_append(max.timestamp, max.offset, true)?;
            }
        }
        self.offset_index.sync()?;
        self.time_index.sync()?;
        if on_disk {
            let [offset_path, time_path] = &final_paths;
            self.offset_index.rename_to(offset_path)?;
            self.time_index.rename_to(time_path)?;
            if let Some(dir) = offset_path.parent() {
                self.storage.sync_dir(dir)?;
            }
        }
        self.offset_index.seal()?;
        self.time_index.seal()?;
        self.writer.lock().index_room = None;
        Ok(report)
    }

    /// Reads whole batches starting with the one that holds `start_offset` (or the next one, if
    /// `start_offset` falls in a gap or below the segment) into `buf`, replacing its contents.
    ///
    /// Kafka's semantics: at least one whole batch is returned even when it is larger than
    /// `max_bytes`; after that, batches are added while they fit. Batches whose last offset is at
    /// or above `upper_bound` (exclusive), if given, are not returned. `Ok(None)` when no such
    /// batch exists. Every returned batch has passed its CRC check.
    pub fn read(
        &self,
        start_offset: i64,
        max_bytes: usize,
        upper_bound: Option<i64>,
        buf: &mut Vec<u8>,
    ) -> Result<Option<SegmentRead>> {
        let found = self.read_in_place(start_offset, max_bytes, upper_bound, None, buf);
        match found {
            Ok(Some((read, at))) => {
                buf.copy_within(at..at + read.len, 0);
                buf.truncate(read.len);
                Ok(Some(read))
            }
            other => {
                buf.clear();
                other.map(|_| None)
            }
        }
    }

    /// [`read`](Self::read) without moving the bytes: they are `buf[at..at + read.len]`, where
    /// `at` is returned beside the [`SegmentRead`]. `buf` is the reads' reusable window: its
    /// contents are overwritten and its length only grows, so a caller that keeps it across
    /// reads allocates and zero-fills nothing in the steady state.
    ///
    /// The offset index lookup, the walk from the entry to the batch, and the batches returned
    /// are served by one positional read in the common case: it reads `max_bytes` plus
    /// `index.interval.bytes` from the index entry on. The walk's batch boundaries go into the
    /// segment's position cache (`positions.rs`, bounded); a later read of an offset they cover
    /// skips the index and the walk and reads just `max(max_bytes, its batch)` from the batch,
    /// after checking that the bytes there are that batch (anything else: the walk runs).
    ///
    /// `resume_at` is a hint from a previous read of this segment: the file position where a
    /// batch starting at `start_offset` should lie (the end of the batches it returned). When
    /// the batch there does start at `start_offset`, the read starts there, with no index
    /// lookup and no walk; otherwise the hint is ignored.
    ///
    /// A truncation of the segment that overlaps the read makes it fail with
    /// [`Error::Truncated`] (naming the truncation's new end) when the truncation removed
    /// `start_offset`; one that left `start_offset` in place makes the read run again. Whatever
    /// the read returns passed every check in bytes no truncation changed meanwhile, or in bytes
    /// a truncation's appends wrote at the same offsets: it never reports as corruption the
    /// bytes a truncation cut or rewrote under it, and never rebuilds an index over them.
    pub fn read_in_place(
        &self,
        start_offset: i64,
        max_bytes: usize,
        upper_bound: Option<i64>,
        resume_at: Option<u64>,
        buf: &mut Vec<u8>,
    ) -> Result<Option<(SegmentRead, usize)>> {
        let mut resume_at = resume_at;
        let mut tries = 0;
        loop {
            let view = self.read_view();
            let read =
                self.read_in_place_once(start_offset, max_bytes, upper_bound, resume_at, view, buf);
            let failed = match read {
                Ok(Some(found)) => return Ok(Some(found)),
                Ok(None) => match self.raced_truncation(view.epoch) {
                    Some(at) if at <= start_offset => return Err(Error::Truncated { at }),
                    _ => return Ok(None),
                },
                Err(error) => match self.raced_truncation(view.epoch) {
                    Some(at) if at <= start_offset => return Err(Error::Truncated { at }),
                    // A truncation above `start_offset` cut bytes the read went on into (the
                    // batches after the first, or a walk through a gap): the offset is still
                    // there, so read it again.
                    Some(at) => Error::Truncated { at },
                    // An index entry added after `view` (a caller asking past the end it saw)
                    // led the read past its end: read again to the new end.
                    None if self.size() > view.end => error,
                    None => return Err(error),
                },
            };
            // Each retry needs yet another truncation or append to overtake it.
            tries += 1;
            if tries >= MAX_TRUNCATION_RETRIES {
                return Err(failed);
            }
            resume_at = None;
        }
    }

    /// One try of [`read_in_place`](Self::read_in_place), up to what `view` saw published.
    fn read_in_place_once(
        &self,
        start_offset: i64,
        max_bytes: usize,
        upper_bound: Option<i64>,
        resume_at: Option<u64>,
        view: ReadView,
        buf: &mut Vec<u8>,
    ) -> Result<Option<(SegmentRead, usize)>> {
        let end = view.end;
        // Read before any byte is: a run learned from bytes a truncation cut meanwhile is
        // then refused.
        let generation = self.positions.generation();
        let cached = match resume_at {
            Some(_) => None,
            None => self.positions.find(start_offset),
        };
        let start = ReadStart {
            offset: start_offset,
            resume_at,
            cached,
            generation,
            view,
        };
        if let Some(state) = self.mapped_for_read()
            && let MappingState::Mapped(mapping) = &*state
        {
            let mapped: &[u8] = mapping;
            let mut walker = BatchWalker::over_mapping(&self.log, &self.log_path, end, mapped);
            let Some(read) =
                self.read_with(&mut walker, &start, max_bytes, upper_bound, end, usize::MAX)?
            else {
                return Ok(None);
            };
            // Only the returned batches are copied: into the caller's buffer, which outlives
            // the read guard.
            let bytes = usize::try_from(read.position)
                .ok()
                .and_then(|from| mapped.get(from..from.checked_add(read.len)?))
                .ok_or_else(|| self.corrupt(read.position, Corruption::BadBatchLength(i32::MAX)))?;
            if buf.len() < bytes.len() {
                buf.resize(bytes.len(), 0);
            }
            if let Some(target) = buf.get_mut(..bytes.len()) {
                target.copy_from_slice(bytes);
            }
            return Ok(Some((read, 0)));
        }
        let walk_read_ahead = max_bytes
            .min(MAX_READ_AHEAD_BYTES)
            .saturating_add(self.config.index_interval_bytes as usize)
            .saturating_add(crate::format::RECORD_BATCH_OVERHEAD);
        // A batch whose place is known is read alone (with what else `max_bytes` asks for):
        // one system call of its size instead of the index interval.
        let read_ahead = match cached {
            Some(batch) => usize::try_from(batch.size)
                .unwrap_or(usize::MAX)
                .max(max_bytes.min(MAX_READ_AHEAD_BYTES)),
            None => walk_read_ahead,
        };
        let mut walker = BatchWalker::with_buffer(
            &self.log,
            &self.log_path,
            end,
            std::mem::take(buf),
            read_ahead,
        );
        let result = self.read_with(
            &mut walker,
            &start,
            max_bytes,
            upper_bound,
            end,
            walk_read_ahead,
        );
        let window_start = walker.window_start();
        *buf = walker.into_buffer().0;
        let Some(read) = result? else {
            return Ok(None);
        };
        let at = usize::try_from(read.position - window_start)
            .map_err(|_| self.corrupt(read.position, Corruption::BadBatchLength(i32::MAX)))?;
        Ok(Some((read, at)))
    }

    /// Finds the first batch a read returns: at the resume position, at the cached position,
    /// or by the index walk (whose batches the cache then learns).
    fn first_batch(
        &self,
        walker: &mut BatchWalker<'_>,
        start: &ReadStart,
        end: u64,
        walk_read_ahead: usize,
    ) -> Result<Option<(Frame, BatchSummary)>> {
        if let Some(position) = start.resume_at
            && let Some(found) = self.batch_starting_at(walker, position, start.offset)?
        {
            return Ok(Some(found));
        }
        if let Some(cached) = start.cached {
            if let Some(found) = self.cached_batch_holding(walker, cached, start.offset) {
                return Ok(Some(found));
            }
            walker.set_read_ahead(walk_read_ahead);
        }
        let mut walk_from = 0;
        let found = self.translate_offset_in(start.offset, start.view, walker, &mut walk_from)?;
        if let Some((frame, summary)) = &found {
            self.learn_positions(walker, walk_from, frame, summary, end, start.generation);
        }
        Ok(found)
    }

    /// The batch at a cached position, if it is what the cache says: a whole v2 batch of the
    /// cached size and last offset, inside the published end, that holds `offset` (offsets
    /// increase within a segment, so it is the one batch the index walk would find). Anything
    /// else is no error here: the index walk that runs instead reports real damage.
    fn cached_batch_holding(
        &self,
        walker: &mut BatchWalker<'_>,
        cached: CachedBatch,
        offset: i64,
    ) -> Option<(Frame, BatchSummary)> {
        let Ok(Step::Batch(frame)) = walker.frame_at(cached.position) else {
            return None;
        };
        if frame.magic != 2 || frame.total_size != cached.size {
            return None;
        }
        let summary = walker.summary(&frame).ok()?;
        let holds = summary.base_offset.is_some_and(|base| base <= offset)
            && summary.last_offset == cached.last_offset
            && offset <= summary.last_offset
            && summary.last_offset < self.next_offset()
            && summary.last_offset - self.base_offset <= i32::MAX as i64;
        holds.then_some((frame, summary))
    }

    /// Remembers the batches the walker holds from `walk_from` (a batch boundary the index walk
    /// started at) on, through the batch it found and on to the end of what it read, up to one
    /// index interval past the found batch.
    fn learn_positions(
        &self,
        walker: &BatchWalker<'_>,
        walk_from: u64,
        found: &Frame,
        found_summary: &BatchSummary,
        end: u64,
        generation: u64,
    ) {
        let (held_from, held) = walker.held();
        // A walk longer than one window re-read from a later batch boundary.
        let mut position = walk_from.max(held_from);
        let stop = found
            .position
            .saturating_add(u64::from(self.config.index_interval_bytes))
            .min(end);
        let mut run: Option<RunBuilder> = None;
        while position < stop {
            let (base, last, size) = if position == found.position {
                // The walk read its header; its bytes may run past what the walker holds.
                let Some(base) = found_summary.base_offset.filter(|_| found.magic == 2) else {
                    break;
                };
                (base, found_summary.last_offset, found.total_size)
            } else {
                let Some(bytes) = usize::try_from(position - held_from)
                    .ok()
                    .and_then(|from| held.get(from..))
                else {
                    break;
                };
                let Ok(header) = BatchHeader::parse(bytes) else {
                    break;
                };
                let size = header.total_size() as u64;
                if size > bytes.len() as u64 || position + size > end {
                    break;
                }
                (header.base_offset, header.last_offset(), size)
            };
            let added = match run.as_mut() {
                Some(run) => run.push(position, base, last, size),
                None => {
                    run = RunBuilder::new(position, base, last, size);
                    run.is_some()
                }
            };
            if !added {
                break;
            }
            position += size;
        }
        if let Some(run) = run {
            self.positions.learn(run, generation);
        }
    }

    fn read_with(
        &self,
        walker: &mut BatchWalker<'_>,
        start: &ReadStart,
        max_bytes: usize,
        upper_bound: Option<i64>,
        end: u64,
        walk_read_ahead: usize,
    ) -> Result<Option<SegmentRead>> {
        let Some((frame, first_summary)) = self.first_batch(walker, start, end, walk_read_ahead)?
        else {
            return Ok(None);
        };
        let position = frame.position;
        let available = end - position;
        let first_size = usize::try_from(frame.total_size)
            .map_err(|_| self.corrupt(position, Corruption::BadBatchLength(i32::MAX)))?;
        let want = max_bytes
            .max(first_size)
            .min(usize::try_from(available).unwrap_or(usize::MAX));
        // Up to `want` bytes: the file may end before the published size when a failed fsync
        // dropped its dirty pages (the log is poisoned then, and bounds reads below the loss).
        let window = walker.fill(position, want)?;
        let read = window.len().min(want);
        if read < first_size {
            return Err(self.corrupt(
                position,
                Corruption::Truncated {
                    needed: first_size as u64,
                    available: read as u64,
                },
            ));
        }
        let buf = window.get(..read).unwrap_or_default();
        let mut len = 0usize;
        let mut first_offset = first_summary.base_offset;
        let mut next_offset = first_summary.order_floor();
        while len < buf.len() {
            let rest = &buf[len..];
            let at = position + len as u64;
            let frame = match peek_batch_frame(rest) {
                Ok(Some(frame)) => frame,
                // A frame cut off by `max_bytes` ends the read after the first batch.
                Ok(None) => break,
                Err(_) if len > 0 => break,
                Err(what) => return Err(self.corrupt(position, what)),
            };
            let size = frame.total_size();
            let Some(bytes) = rest.get(..size) else {
                break;
            };
            let summary =
                BatchSummary::parse(bytes, frame.magic).map_err(|what| self.corrupt(at, what))?;
            if upper_bound.is_some_and(|bound| summary.last_offset >= bound) {
                break;
            }
            let batch = Batch::new(bytes).map_err(|what| self.corrupt(at, what))?;
            if len > 0 && summary.order_floor() < next_offset {
                return Err(self.corrupt(
                    at,
                    Corruption::OffsetOrder {
                        offset: summary.order_floor(),
                        bound: next_offset,
                    },
                ));
            }
            if first_offset.is_none() {
                // A compressed legacy wrapper: its first offset is inside it.
                let base_offset = batch
                    .base_offset(&mut Vec::new())
                    .map_err(|error| self.relocate(error, at))?;
                first_offset = Some(base_offset);
            }
            next_offset = summary.next_offset();
            len += size;
        }
        let (true, Some(first_offset)) = (len > 0, first_offset) else {
            return Ok(None);
        };
        Ok(Some(SegmentRead {
            position,
            len,
            first_offset,
            next_offset,
        }))
    }

    /// Drops the `.log` mapping, waiting for the readers that use it, and returns the write
    /// guard: while it is held no reader maps the file again, so the caller may shrink it.
    fn drop_mapping(&self) -> crate::sync::RwLockWriteGuard<'_, MappingState> {
        let mut state = self.mapping.write();
        *state = MappingState::NotYet;
        state
    }

    /// The mapping's read guard when this segment's reads are served from a mapping: the
    /// segment is sealed, `map_sealed_reads` is set, and the storage can map. Maps the file at
    /// the first call after the seal.
    fn mapped_for_read(&self) -> Option<crate::sync::RwLockReadGuard<'_, MappingState>> {
        if !self.config.map_sealed_reads || !self.is_sealed() {
            return None;
        }
        {
            let state = self.mapping.read();
            match &*state {
                MappingState::Mapped(_) => return Some(state),
                MappingState::Unavailable => return None,
                MappingState::NotYet => {}
            }
        }
        let mut state = self.mapping.write();
        if matches!(*state, MappingState::NotYet) && self.is_sealed() {
            *state = match self.log.map_read() {
                Ok(Some(mapping)) if mapping.len() as u64 >= self.size() => {
                    MappingState::Mapped(mapping)
                }
                Ok(_) => MappingState::Unavailable,
                Err(error) => {
                    log::warn!(
                        "mapping {} failed, reading it with pread: {error}",
                        self.log_path().display()
                    );
                    MappingState::Unavailable
                }
            };
        }
        let state = crate::sync::RwLockWriteGuard::downgrade(state);
        matches!(*state, MappingState::Mapped(_)).then_some(state)
    }

    /// The batch at `position` if it is a v2 batch whose base offset is `offset` and whose
    /// last offset lies inside the segment (a resumed sequential read), else `None`. Damage
    /// there is no error here: the index path that runs instead reports it (a damaged
    /// lastOffsetDelta, which only the CRC protects, must not make the read skip the batch).
    fn batch_starting_at(
        &self,
        walker: &mut BatchWalker<'_>,
        position: u64,
        offset: i64,
    ) -> Result<Option<(Frame, BatchSummary)>> {
        let Ok(Step::Batch(frame)) = walker.frame_at(position) else {
            return Ok(None);
        };
        if frame.magic != 2 {
            return Ok(None);
        }
        match walker.summary(&frame) {
            Ok(summary)
                if summary.base_offset == Some(offset)
                    && summary.last_offset >= offset
                    && summary.last_offset < self.next_offset() =>
            {
                Ok(Some((frame, summary)))
            }
            _ => Ok(None),
        }
    }

    /// The position cache, for tests that plant wrong positions in it.
    #[cfg(test)]
    pub(crate) fn position_cache(&self) -> &PositionCache {
        &self.positions
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

    /// Marks a truncation to `kept_end` as under way until the guard drops (on success or on
    /// an error part-way: either way the file may have changed). Call it with the segment's
    /// writer lock held, before any index entry or byte goes.
    fn begin_truncation(&self, kept_end: i64) -> TruncationUnderWay<'_> {
        self.truncated_to.store(kept_end, Ordering::Release);
        self.truncation_seq.fetch_add(1, Ordering::AcqRel);
        TruncationUnderWay {
            seq: &self.truncation_seq,
        }
    }

    /// What a read takes before it reads a byte (see [`ReadView`]).
    fn read_view(&self) -> ReadView {
        let epoch = self.truncation_seq.load(Ordering::Acquire);
        ReadView {
            epoch,
            end: self.size(),
        }
    }

    /// The end a truncation left (or is leaving) if one overlapped a read that took `epoch`
    /// at its start: one was under way then, or one began since. `None`: no truncation
    /// touched the file since, so whatever the read found in its bytes is really there.
    fn raced_truncation(&self, epoch: u64) -> Option<i64> {
        let now = self.truncation_seq.load(Ordering::Acquire);
        (epoch % 2 == 1 || now != epoch).then(|| self.truncated_to.load(Ordering::Acquire))
    }

    /// The `.log` file, for zero-copy transfers of bytes a read has checked.
    pub(crate) fn log_file(&self) -> &Arc<dyn StorageFile> {
        &self.log
    }

    /// Kafka's `findOffsetByTimestamp`: the first record at or after `start_offset` whose
    /// timestamp is at or above `timestamp`, as `(timestamp, offset)`.
    ///
    /// A truncation of the segment that overlaps the lookup and makes it fail (the bytes it
    /// walked were cut or rewritten) makes it run again, and after a few such tries fail with
    /// [`Error::Truncated`]; it is never reported as corruption and never rebuilds an index.
    pub fn find_offset_by_timestamp(
        &self,
        timestamp: i64,
        start_offset: i64,
    ) -> Result<Option<TimestampOffset>> {
        self.find_offset_by_timestamp_below(timestamp, start_offset, i64::MAX)
    }

    /// [`find_offset_by_timestamp`](Self::find_offset_by_timestamp) among the batches that end
    /// below `end_offset`: the walk reads no byte of a batch at or above it. A poisoned log
    /// answers from below its durable offset only, and a failed fsync may have dropped the
    /// pages above it. Races with a truncation end as in `find_offset_by_timestamp`.
    pub fn find_offset_by_timestamp_below(
        &self,
        timestamp: i64,
        start_offset: i64,
        end_offset: i64,
    ) -> Result<Option<TimestampOffset>> {
        let mut tries = 0;
        loop {
            let view = self.read_view();
            let error =
                match self.find_offset_by_timestamp_once(timestamp, start_offset, end_offset, view)
                {
                    Err(error) => error,
                    found => return found,
                };
            let error = match self.raced_truncation(view.epoch) {
                Some(at) => Error::Truncated { at },
                // An index entry added after `view` led the lookup past its end.
                None if self.size() > view.end => error,
                None => return Err(error),
            };
            tries += 1;
            if tries >= MAX_TRUNCATION_RETRIES {
                return Err(error);
            }
        }
    }

    /// One try of [`find_offset_by_timestamp_below`](Self::find_offset_by_timestamp_below), up
    /// to what `view` saw published.
    fn find_offset_by_timestamp_once(
        &self,
        timestamp: i64,
        start_offset: i64,
        end_offset: i64,
        view: ReadView,
    ) -> Result<Option<TimestampOffset>> {
        let end = view.end;
        let mut attempt = 0;
        let frame = loop {
            let time_entry = match self.time_index.lookup(timestamp) {
                Ok(entry) => entry,
                Err(Error::Corrupt { .. }) if attempt == 0 && self.may_rebuild(view) => {
                    attempt += 1;
                    self.rebuild_indexes()?;
                    continue;
                }
                Err(error) => return Err(error),
            };
            let from = time_entry.offset.max(start_offset);
            if from >= end_offset && end_offset < self.next_offset() {
                // The entry leads into batches the caller may not read, and it cannot be
                // checked without reading them: walk from the start instead.
                match self.translate_offset(start_offset.max(self.base_offset), view)? {
                    Some((frame, _)) => break frame,
                    None => return Ok(None),
                }
            }
            let found = self.translate_offset(from, view)?;
            // The entry is used like an offset-index entry (DESIGN §3 inv. 6): it must name the
            // batch that holds its timestamp, or records before a damaged entry would be
            // skipped. `(-1, base)` is the lookup's answer when no entry applies.
            let is_entry = (time_entry.timestamp, time_entry.offset) != (-1, self.base_offset);
            let names_its_batch = found.as_ref().is_some_and(|(_, summary)| {
                summary.last_offset == time_entry.offset
                    && summary.max_timestamp == time_entry.timestamp
            });
            // An entry below `start_offset` is not used, so it needs no check.
            let unused = !is_entry || from != time_entry.offset;
            match found {
                Some((frame, _)) if unused || names_its_batch => break frame,
                None if unused => return Ok(None),
                _ => {}
            }
            if attempt == 0 && self.may_rebuild(view) {
                attempt += 1;
                self.rebuild_indexes()?;
                continue;
            }
            return Err(Error::Corrupt {
                file: self.time_index.path(),
                position: 0,
                what: Corruption::BadIndexEntry(format!(
                    "entry (timestamp {}, offset {}) does not name the batch holding it",
                    time_entry.timestamp, time_entry.offset
                )),
            });
        };
        let mut walker = BatchWalker::new(&self.log, &self.log_path, end);
        let mut position = frame.position;
        let mut scratch = Vec::new();
        loop {
            let frame = match walker.frame_at(position)? {
                Step::Batch(frame) => frame,
                Step::End => return Ok(None),
                Step::Partial { available, needed } => {
                    return Err(self.corrupt(position, Corruption::Truncated { needed, available }));
                }
            };
            let summary = walker.summary(&frame)?;
            // Every walked batch is CRC-checked: a batch is skipped on its maxTimestamp and
            // lastOffset, which only the CRC protects.
            let bytes = walker.batch_bytes(&frame)?;
            let batch = Batch::new(bytes).map_err(|what| self.corrupt(position, what))?;
            if summary.max_timestamp >= timestamp
                && summary.last_offset >= start_offset
                && !batch.is_control()
            {
                let records = batch
                    .records(&mut scratch)
                    .map_err(|e| self.relocate(e, position))?;
                for record in records {
                    let record = record.map_err(|e| self.relocate(e, position))?;
                    if record.timestamp >= timestamp && record.offset >= start_offset {
                        return Ok(Some(TimestampOffset {
                            timestamp: record.timestamp,
                            offset: record.offset,
                        }));
                    }
                }
            }
            if summary.next_offset() >= end_offset {
                return Ok(None);
            }
            position += frame.total_size;
        }
    }

    /// Gives a format error about a batch the file position it was found at.
    fn relocate(&self, error: Error, position: u64) -> Error {
        match error {
            Error::InvalidBatch { what } => self.corrupt(position, what),
            other => other,
        }
    }

    /// Validates every batch from the start of the file (length bounds, magic, CRC, offset
    /// order and range), rebuilds both indexes as it goes, and reports the valid end and the
    /// first invalid position with its reason. It does not truncate: the log decides. Readers
    /// see only the valid prefix afterwards.
    pub fn scan(&self) -> Result<ScanReport> {
        self.scan_from(ScanStart::Beginning)
    }

    /// For a [`SegmentRole::ReadOnly`] segment that another process appends to (a live log
    /// opened read-only): validates and indexes (in memory) the batches written after what the
    /// segment has published so far, and publishes them. It stops, without error, at the first
    /// incomplete or invalid batch, which may be one the writer has not finished; the report says
    /// where. Fails with [`Error::Unsupported`] on a segment of any other role, whose appender is
    /// this process.
    pub fn catch_up(&self) -> Result<ScanReport> {
        if *self.role.read() != SegmentRole::ReadOnly {
            return Err(Error::Unsupported {
                what: "catching up on a segment this process writes".into(),
            });
        }
        self.scan_from(ScanStart::Published)
    }

    /// Recovery's scan (DESIGN §3a): index entries below `recovery_point` were synced before
    /// the point was recorded, so after an O(entries) check (monotonic, inside the file) they
    /// are kept, and only the batches from the last kept entry on are validated and indexed.
    /// If the check fails, or the kept entry does not name a valid batch ending at its offset,
    /// the whole segment is scanned as by [`scan`](Self::scan).
    ///
    /// Before validating, it drops the cached pages from the kept entry on (from byte 0 when
    /// none is kept), so that it validates what the disk holds: a failed fsync of an earlier
    /// process in this boot may have left pages cached that never reached it (ARCHITECTURE.md
    /// §7). The bytes up to the kept entry's batch were synced, so their pages match the disk.
    pub fn recover_from(&self, recovery_point: i64) -> Result<ScanReport> {
        let start = self.trusted_index_prefix(recovery_point)?;
        let first_unsynced = start.map_or(0, |entry| u64::from(entry.position));
        crate::storage::drop_cached_tail(&*self.log, first_unsynced)?;
        self.scan_from(start.map_or(ScanStart::Beginning, ScanStart::Trusted))
    }

    /// The last offset-index entry below `recovery_point` that can be trusted, with both
    /// indexes cut back to the entries below it; `None` when nothing can be kept.
    fn trusted_index_prefix(&self, recovery_point: i64) -> Result<Option<OffsetPosition>> {
        let file_bytes = self.log.len()?;
        if self.offset_index.full_check(file_bytes).is_err()
            || self.time_index.full_check().is_err()
        {
            return Ok(None);
        }
        self.offset_index.truncate_to(recovery_point)?;
        self.time_index.truncate_to(recovery_point)?;
        if self.offset_index.entries() == 0 {
            return Ok(None);
        }
        let entry = self.offset_index.last_entry()?;
        if self.time_index.entries() > 0 && self.time_index.last_entry()?.offset > entry.offset {
            return Ok(None);
        }
        // The entry must name a whole, valid batch that ends at its offset.
        let mut walker =
            BatchWalker::new(&self.log, &self.log_path, file_bytes.min(i32::MAX as u64));
        let position = u64::from(entry.position);
        let Ok(Step::Batch(frame)) = walker.frame_at(position) else {
            return Ok(None);
        };
        let named = walker
            .batch_bytes(&frame)
            .ok()
            .and_then(|bytes| Batch::new(bytes).ok().map(|batch| batch.last_offset()));
        if named != Some(entry.offset) {
            return Ok(None);
        }
        // So must the last kept time-index entry, with the batch's max timestamp. Its offset
        // alone proves nothing: a crash can keep an index file's length but not the entry
        // written into it, and an all-zero entry reads as (timestamp 0, the base offset),
        // which lies below any recovery point and passes the monotonic check.
        if self.time_index.entries() > 0 {
            let time_entry = self.time_index.last_entry()?;
            let mut position = u64::from(self.offset_index.lookup(time_entry.offset)?.position);
            let named = loop {
                let Ok(Step::Batch(frame)) = walker.frame_at(position) else {
                    break None;
                };
                let Ok(summary) = walker.summary(&frame) else {
                    break None;
                };
                if summary.last_offset >= time_entry.offset {
                    break Some(summary);
                }
                position = frame.position.saturating_add(frame.total_size);
            };
            let matches = named.is_some_and(|batch| {
                batch.last_offset == time_entry.offset
                    && batch.max_timestamp == time_entry.timestamp
            });
            if !matches {
                return Ok(None);
            }
        }
        Ok(Some(entry))
    }

    /// Validates batches from `start` (a trusted index entry) or from the file's beginning,
    /// rebuilding index entries from there on.
    fn scan_from(&self, start: ScanStart) -> Result<ScanReport> {
        let mut writer = self.writer.lock();
        writer.index_room = None;
        let file_bytes = self.log.len()?;
        let mut walker =
            BatchWalker::new(&self.log, &self.log_path, file_bytes.min(i32::MAX as u64));
        let mut batches = 0u64;
        let mut next_offset = self.base_offset;
        let mut bytes_since = 0u64;
        // With a trusted start, the batch at the entry is already indexed, the time index holds
        // the largest timestamp up to it, and the first batch's timestamp is loaded lazily.
        let (mut position, mut max_so_far, mut first_max_timestamp, mut indexed_position) =
            match start {
                ScanStart::Trusted(entry) => {
                    let max = (self.time_index.entries() > 0)
                        .then(|| self.time_index.last_entry())
                        .transpose()?;
                    (
                        u64::from(entry.position),
                        max,
                        None,
                        Some(u64::from(entry.position)),
                    )
                }
                ScanStart::Published => {
                    // Everything published was validated and indexed: go on from its end.
                    next_offset = writer.next_offset;
                    bytes_since = writer.bytes_since_last_index_entry;
                    (
                        writer.size,
                        writer.max_timestamp_so_far,
                        writer.rolling_based_timestamp,
                        None,
                    )
                }
                ScanStart::Beginning => {
                    self.offset_index.reset()?;
                    self.time_index.reset()?;
                    (0, None, Some(None), None)
                }
            };
        let scanned_from = position;
        let first_invalid = loop {
            let frame = match walker.frame_at(position) {
                Ok(Step::Batch(frame)) => frame,
                Ok(Step::End) => break None,
                Ok(Step::Partial { available, needed }) => {
                    break Some(InvalidBytes {
                        position,
                        what: Corruption::Truncated { needed, available },
                    });
                }
                Err(Error::Corrupt { what, .. }) => break Some(InvalidBytes { position, what }),
                Err(other) => return Err(other),
            };
            // A v2 batch (CRC-32C) or a legacy message (CRC-32, Kafka before 0.11): both are
            // validated and indexed alike, by their last offset, as Kafka does. A legacy
            // message with a bad CRC is what torn bytes whose magic reads 0 or 1 look like.
            let bytes = walker.batch_bytes(&frame)?;
            let summary =
                match Batch::new(bytes).and_then(|batch| BatchSummary::of(&batch).followable()) {
                    Ok(summary) => summary,
                    Err(what) => break Some(InvalidBytes { position, what }),
                };
            if summary.order_floor() < next_offset {
                break Some(InvalidBytes {
                    position,
                    what: Corruption::OffsetOrder {
                        offset: summary.order_floor(),
                        bound: next_offset,
                    },
                });
            }
            if summary.last_offset - self.base_offset > i32::MAX as i64 {
                break Some(InvalidBytes {
                    position,
                    what: Corruption::OffsetOrder {
                        offset: summary.last_offset,
                        bound: self.base_offset + i32::MAX as i64,
                    },
                });
            }
            if position == 0 {
                first_max_timestamp = Some(Some(summary.max_timestamp));
            }
            note_max_timestamp(&mut max_so_far, &summary);
            if indexed_position.take() == Some(position) {
                // The trusted entry's own batch: its entries exist already.
            } else if bytes_since > u64::from(self.config.index_interval_bytes) {
                if !self.offset_index.is_full() {
                    self.offset_index
                        .append(summary.last_offset, position as u32)?;
                }
                if let (Some(max), false) = (max_so_far, self.time_index.is_full()) {
                    self.time_index
                        .maybe_append(max.timestamp, max.offset, false)?;
                }
                bytes_since = 0;
            }
            bytes_since += frame.total_size;
            next_offset = summary.next_offset();
            batches += 1;
            position += frame.total_size;
        };
        writer.size = position;
        writer.next_offset = next_offset;
        writer.bytes_since_last_index_entry = bytes_since;
        writer.max_timestamp_so_far = max_so_far;
        writer.rolling_based_timestamp = first_max_timestamp;
        writer.broken = false;
        self.publish(&writer);
        Ok(ScanReport {
            valid_bytes: position,
            scanned_from,
            file_bytes,
            batches,
            next_offset,
            max_timestamp: max_so_far.map(|m| m.timestamp),
            first_invalid,
        })
    }

    /// Removes every batch that holds an offset at or above `offset` (a batch straddling it goes
    /// whole, as in Kafka) and the index entries that point at them. Returns the bytes removed.
    ///
    /// A truncation that empties the segment restarts its roll clock at `now_ms`, as Kafka's
    /// `LogSegment.truncateTo` does: an empty segment is as young as a new one.
    pub fn truncate_to(&self, offset: i64, now_ms: i64) -> Result<u64> {
        // Before the writer lock: a mapped reader may take the writer lock (an index rebuild)
        // while it holds the mapping's read lock.
        let _no_readers = self.drop_mapping();
        // The log's writer lock keeps appends and other truncations out: nothing overtakes
        // this lookup.
        let Some((frame, summary)) = self.translate_offset(offset, self.read_view())? else {
            return Ok(0);
        };
        let first_offset = self.first_offset_of(&frame, &summary)?;
        // The end is what the file will record: after the last batch kept, which in a
        // compacted segment may lie below both `offset` and the removed batch's first offset.
        let kept_end = self.next_offset_before(frame.position, first_offset.min(offset))?;
        let mut writer = self.writer.lock();
        writer.index_room = None;
        let position = frame.position;
        // Until it drops, at the end, a reader that meets what this cut does is told so.
        let _under_way = self.begin_truncation(kept_end);
        // Every entry at or above the kept end points into a removed batch (a time-index entry
        // may name an offset below `offset` inside a straddling batch).
        self.offset_index.truncate_to(kept_end)?;
        self.time_index.truncate_to(kept_end)?;
        self.log.set_len(position)?;
        // After the cut: a read that learned positions from the old bytes cannot keep them.
        self.positions.forget();
        let removed = writer.size - position;
        writer.size = position;
        writer.next_offset = kept_end;
        // The largest timestamp so far: the time index's last entry, or a batch after the last
        // offset-index entry (entries are added together, so nothing before it is missing).
        let last_entry = self.offset_index.last_entry()?;
        let mut max_so_far = self.time_index_max()?;
        let mut walker = BatchWalker::new(&self.log, &self.log_path, position);
        let mut at = u64::from(last_entry.position);
        while let Step::Batch(frame) = walker.frame_at(at)? {
            note_max_timestamp(&mut max_so_far, &walker.summary(&frame)?);
            at += frame.total_size;
        }
        writer.max_timestamp_so_far = max_so_far;
        writer.bytes_since_last_index_entry = position - u64::from(last_entry.position);
        if position == 0 {
            writer.rolling_based_timestamp = Some(None);
            writer.created_ms = now_ms;
        } else {
            writer.rolling_based_timestamp = None;
        }
        self.publish(&writer);
        Ok(removed)
    }

    /// Where [`truncate_to`](Self::truncate_to)`(offset)` would leave the segment's end: the
    /// offset after the last batch it keeps (the segment's base offset when it keeps none), or
    /// `offset` (or the current end, if lower) when no batch goes.
    ///
    /// Without compaction that is the base of the batch holding `offset`. In a compacted
    /// segment the last batch kept may end below it (the removed batch followed a gap, or
    /// `offset` fell in one): the end must then drop to that batch's end, because the file is
    /// all that records the end. Ending the log higher would claim offsets that no byte on disk
    /// holds: a reopen (after a crash or not) finds the lower end, below what the log said was
    /// durable, and a recovery point above the file's last batch makes torn appends after it
    /// look like corruption.
    pub fn truncation_point(&self, offset: i64) -> Result<i64> {
        // Under the log's writer lock, as in `truncate_to`.
        Ok(match self.translate_offset(offset, self.read_view())? {
            Some((frame, summary)) => {
                let first = self.first_offset_of(&frame, &summary)?;
                self.next_offset_before(frame.position, first.min(offset))?
            }
            None => self.next_offset().min(offset),
        })
    }

    /// The offset after the last batch that ends at or before byte `position` (the segment's
    /// base offset when none does). `first_removed` bounds the offsets of the batch at
    /// `position`: the walk starts at the offset index's entry below it, so it reads only the
    /// batches between that entry and `position` (the whole file if the entry does not lead
    /// there exactly: the index is derived data, the `.log` decides).
    fn next_offset_before(&self, position: u64, first_removed: i64) -> Result<i64> {
        if position == 0 {
            return Ok(self.base_offset);
        }
        let entry = self
            .offset_index
            .lookup(first_removed.saturating_sub(1))
            .ok()
            .map(|entry| u64::from(entry.position))
            .filter(|&at| at < position);
        if let Some(at) = entry
            && let Ok(Some(next_offset)) = self.next_offset_between(at, position)
        {
            return Ok(next_offset);
        }
        Ok(self
            .next_offset_between(0, position)?
            .unwrap_or(self.base_offset))
    }

    /// The offset after the last batch of those that tile the bytes from `from` (a batch
    /// boundary) to `position` exactly; `None` when they do not (or there are none).
    fn next_offset_between(&self, from: u64, position: u64) -> Result<Option<i64>> {
        let mut walker = BatchWalker::new(&self.log, &self.log_path, position);
        let mut next_offset = None;
        let mut at = from;
        while at < position {
            let Step::Batch(frame) = walker.frame_at(at)? else {
                return Ok(None);
            };
            next_offset = Some(walker.summary(&frame)?.next_offset());
            at = frame.position + frame.total_size;
        }
        Ok(next_offset.filter(|_| at == position))
    }

    /// The first offset of the batch framed by `frame`: from its summary, except for a
    /// compressed legacy wrapper, which is decompressed to find it (Kafka's `baseOffset()` of a
    /// legacy batch does the same).
    fn first_offset_of(&self, frame: &Frame, summary: &BatchSummary) -> Result<i64> {
        if let Some(base_offset) = summary.base_offset {
            return Ok(base_offset);
        }
        let mut walker =
            BatchWalker::new(&self.log, &self.log_path, frame.position + frame.total_size);
        let bytes = walker.batch_bytes(frame)?;
        let batch = Batch::new(bytes).map_err(|what| self.corrupt(frame.position, what))?;
        batch
            .base_offset(&mut Vec::new())
            .map_err(|error| self.relocate(error, frame.position))
    }

    /// Removes the bytes at and after `valid_bytes` (a torn tail found by [`scan`](Self::scan)).
    pub fn truncate_tail(&self, valid_bytes: u64) -> Result<u64> {
        let _no_readers = self.drop_mapping();
        let writer = self.writer.lock();
        if valid_bytes != writer.size {
            return Err(Error::InvalidArgument {
                why: format!(
                    "truncate_tail({valid_bytes}) must follow a scan that found {} valid bytes",
                    writer.size
                ),
            });
        }
        let file_bytes = self.log.len()?;
        if file_bytes > valid_bytes {
            let _under_way = self.begin_truncation(writer.next_offset);
            self.log.set_len(valid_bytes)?;
            self.positions.forget();
        }
        Ok(file_bytes.saturating_sub(valid_bytes))
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
        self.log.sync_data()?;
        self.offset_index.sync()?;
        self.time_index.sync()
    }

    /// Makes a sealed segment durable with its metadata: `fsync` of the `.log`, not `fdatasync`,
    /// because its mtime (set at roll: the append time that time retention reads) is inode
    /// metadata that `fdatasync` may skip; then the indexes.
    pub fn flush_sealed(&self) -> Result<()> {
        self.log.sync_all()?;
        self.offset_index.sync()?;
        self.time_index.sync()
    }

    /// Makes only the `.log` data durable: the acknowledgement path needs nothing else, since
    /// the indexes are derived data that recovery rebuilds.
    pub fn flush_log(&self) -> Result<()> {
        self.log.sync_data()
    }

    /// Whether a failed write could not be undone, so the file may hold bytes past the last
    /// complete batch: the log must poison itself.
    pub fn append_is_broken(&self) -> bool {
        self.writer.lock().broken
    }

    /// The paths of the segment's `.log`, `.index` and `.timeindex` files.
    pub fn file_paths(&self) -> Vec<PathBuf> {
        vec![
            self.log_path(),
            self.offset_index.path(),
            self.time_index.path(),
        ]
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

/// Where [`Segment::scan_from`] starts validating.
#[derive(Debug, Clone, Copy)]
enum ScanStart {
    /// From byte 0, rebuilding both indexes.
    Beginning,
    /// From a trusted offset-index entry, keeping the entries up to it.
    Trusted(OffsetPosition),
    /// From the end of what the segment has published (a read-only segment catching up).
    Published,
}

fn note_max_timestamp(max_so_far: &mut Option<TimestampOffset>, batch: &BatchSummary) {
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

/// A truncation in progress (see [`Segment::begin_truncation`]): dropping it ends it.
struct TruncationUnderWay<'a> {
    seq: &'a AtomicU64,
}

impl Drop for TruncationUnderWay<'_> {
    fn drop(&mut self) {
        self.seq.fetch_add(1, Ordering::AcqRel);
    }
}

/// What [`Segment::append`] needs of the batches it checked.
struct CheckedBatches {
    count: usize,
    first_offset: i64,
    last_offset: i64,
    /// The first batch's maxTimestamp: the time rolling counts from, in a new segment.
    first_max_timestamp: i64,
}
