//! The log: segments, offsets, durability and recovery (DESIGN §3, §4).
//!
//! A [`Log`] is one partition directory. It owns the active segment and assigns offsets; it
//! serves reads from an immutable snapshot of its segments; it makes appends durable through a
//! group commit; and at open it recovers from whatever a crash left behind.
//!
//! Locks, in the order they may be taken: a retention pass's lock, the lock of reaping
//! `.deleted` files, the writer mutex, then the snapshot lock, then a segment's own locks. The
//! group commit holds none of them while it syncs.

pub mod checkpoint;
mod compaction;
mod config;
mod fetch;
mod group_commit;
pub(crate) mod kafka_dir;
mod observer;
mod recovery;
mod retention;
mod snapshot;
mod stats;
mod wait;
mod watermark;

use crate::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use crate::sync::thread::JoinHandle;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::sync::{Condvar, Mutex};

use crate::clock::{COARSE_CLOCK_LAG_MS, Clock};
use crate::error::{Error, Result};
use crate::format::{
    BatchBuilder, BatchHeader, BatchView, Compression, NewRecord, TimestampType, set_base_offset,
    set_log_append_time, set_partition_leader_epoch,
};
use crate::segment::{DELETED_SUFFIX, Segment, SegmentRole, rename_segment_files};
use crate::storage::{FileLock, LockMode, Storage};
use fetch::ResumePoint;

use checkpoint::{CheckpointFile, CleanShutdown, DurableWriteError};
use group_commit::GroupCommit;
use snapshot::{SegmentHandle, SegmentList, Snapshot};
use watermark::Watermark;

pub use compaction::{
    CompactionOptions, CompactionSchedule, CompactionStats, PRODUCER_ID_EXPIRATION_MS,
};
pub use config::{
    CleanupPolicy, CompressionType, FlushPolicy, LogConfig, LogConfigBuilder, RecoveryMode,
};
pub use fetch::{FetchBatches, FetchData, LogRecord, ReadBound};
pub use observer::{LogEvent, Observer};
pub use retention::{DeletedSegment, RetentionReport, RetentionRule};
pub use stats::{LogStats, RecoveryReport};
pub use wait::{WaitDurable, WaitForData};

/// The name of the lock file in a log directory.
pub(crate) const LOCK_FILE: &str = "partlog.lock";

/// The `partitionLeaderEpoch` of every batch the log appends: Kafka's `NO_PARTITION_LEADER_EPOCH`.
/// A Kafka leader stamps its own epoch over whatever a producer sent; partlog leads no epoch, and
/// an epoch it passed through could enter a broker's epoch cache at its next recovery (after a
/// hand-off) as an election that never happened.
const NO_PARTITION_LEADER_EPOCH: i32 = -1;

/// How many sealed segments stay open at most (beyond those readers pin).
const MAX_OPEN_SEGMENTS: usize = 64;

/// How many sealed segments may wait for their fsync before an append waits for one: the
/// flusher syncs them off the append path, but a writer that rolls faster than the disk syncs
/// must not hold an unbounded number of them (and their descriptors) open.
const MAX_UNSYNCED_SEALED: usize = 8;

/// What [`Log::append`] and friends stored.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogAppendInfo {
    /// The offset of the first record of the batch.
    pub first_offset: i64,
    /// The offset of the last record of the batch.
    pub last_offset: i64,
    /// The number of records in the batch.
    pub records: u32,
    /// The batch's largest timestamp (the append time under LogAppendTime).
    pub max_timestamp: i64,
    /// The log append time, when the log stamps batches with it.
    pub log_append_time: Option<i64>,
    /// The size of the batch in bytes.
    pub bytes: usize,
}

/// How many truncations the log had seen when a batch was appended, read under the writer
/// lock that the append held: a durability wait that starts from it fails with
/// [`Error::Truncated`] if a truncation at or below its offset came after the append, even
/// one that came before the wait began (ARCHITECTURE.md §8, "Acknowledgements").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TruncationEpoch(u64);

impl TruncationEpoch {
    /// An epoch for tests of code that never waits on a log with it.
    #[cfg(test)]
    pub(crate) fn for_tests() -> TruncationEpoch {
        TruncationEpoch(0)
    }
}

/// The appender's state, behind the writer mutex.
#[derive(Debug)]
struct Writer {
    active: Arc<Segment>,
    log_end_offset: i64,
    /// Sealed segments whose data and indexes are not yet synced (the flusher syncs them off
    /// the append path, and any group commit syncs them first).
    unsynced_sealed: Vec<Arc<Segment>>,
    /// A segment file was created since the last directory sync.
    dir_dirty: bool,
    checkpoint: Option<CheckpointFile>,
    recovery_point: i64,
    messages_since_flush: u64,
    bytes_since_flush: u64,
    /// Files renamed `.deleted`, removed once no reader pins their segment.
    pending_deletes: Vec<PendingDelete>,
    jitter_state: u64,
}

#[derive(Debug)]
struct PendingDelete {
    paths: Vec<PathBuf>,
    segment: Option<Arc<Segment>>,
}

#[derive(Debug, Default)]
struct FlusherSignal {
    stop: bool,
    roll_pending: bool,
    /// A future form of `wait_durable` (or the batching writer) asked for a group-commit sync:
    /// futures must not block their executor's thread, so the flusher leads the sync for them.
    sync_requested: bool,
}

/// Everything the log's threads share.
#[derive(Debug)]
struct Shared {
    dir: PathBuf,
    config: LogConfig,
    storage: Arc<dyn Storage>,
    clock: Arc<dyn Clock>,
    read_only: bool,
    /// The directory lock, released by `close()` (or the drop of the log).
    dir_lock: Mutex<Option<FileLock>>,
    /// This log's share of its Kafka log directory's lock, left at close (DESIGN §4, Opening).
    kafka_dir: Mutex<Option<kafka_dir::KafkaDirMembership>>,
    snapshot: Snapshot,
    writer: Mutex<Writer>,
    log_end: Watermark,
    log_start: AtomicI64,
    commit: GroupCommit,
    closed: AtomicBool,
    /// The lowest offset a truncation has cut the log back to since open (`i64::MAX` if none).
    truncated_to: AtomicI64,
    counters: stats::Counters,
    report: RecoveryReport,
    flusher: Mutex<FlusherSignal>,
    flusher_wake: Condvar,
    bytes_at_last_checkpoint: AtomicU64,
    /// Held by a compaction pass (one pass at a time), with what passes remember.
    compaction: Mutex<compaction::CleanerState>,
    /// Compaction's counters and persisted checkpoint, readable while a pass runs.
    compaction_status: compaction::CompactionStatus,
    /// Counts truncations, so that a compaction pass never swaps in a copy of a segment that a
    /// truncation changed meanwhile.
    truncations: AtomicU64,
    /// Held for a whole retention pass: passes run one at a time.
    retention_pass: Mutex<()>,
    /// Held while unlinking `.deleted` files outside the writer lock, so that a caller who reaps
    /// finds every unpinned file gone when it returns, whichever thread took it. Taken before
    /// the writer lock.
    reaping: Mutex<()>,
    /// For a read-only log that follows a writer in another process (`allow_live_writer`):
    /// when it may look at the directory next. Held for a whole poll, so that concurrent
    /// readers never poll twice.
    live: Option<Mutex<Instant>>,
    /// Set by `close()` to stop the maintenance thread.
    maintenance_stop: Mutex<bool>,
    maintenance_wake: Condvar,
}

/// One partition's log: a directory of segments. It owns the active segment and assigns
/// offsets, serves reads from an immutable snapshot of its segments, makes appends durable
/// through a group commit, and recovers from a crash when it opens.
///
/// `Log` is `Send + Sync`: share it with an `Arc`. One writer at a time appends (appends from
/// several threads serialise inside); any number of threads read concurrently.
///
/// Blocking calls: [`append`](Self::append) blocks on the disk write (and, under
/// [`FlushPolicy::EveryAppend`], on an fsync); [`wait_durable`](Self::wait_durable) and
/// [`wait_for_data`](Self::wait_for_data) block until their condition holds;
/// [`durable`](Self::durable) and [`data_available`](Self::data_available) are their future
/// forms, which never block.
#[derive(Debug)]
pub struct Log {
    shared: Arc<Shared>,
    flusher: Mutex<Option<JoinHandle<()>>>,
    /// The maintenance thread, when `retention.check.interval.ms` is set.
    maintenance: Mutex<Option<JoinHandle<()>>>,
}

impl Log {
    /// Opens (creating if needed) the log in `dir` for reading and writing.
    ///
    /// Takes the exclusive lock on `partlog.lock` ([`Error::Locked`] if another user holds it),
    /// removes leftover `.deleted` files and index files that have no `.log`, and recovers: after
    /// a clean shutdown it reads only the checkpoint and the active segment's tail; after a crash
    /// it validates every batch from the recovery point on (see [`RecoveryReport`]).
    ///
    /// Inside a Kafka log directory (`dir`'s parent holds `meta.properties`) it first takes the
    /// broker's lock on the parent's `.lock` ([`Error::Locked`] while a broker runs, before
    /// anything is created) and sets `.kafka_cleanshutdown` aside, so that a crash of this
    /// process makes the broker recover; the lock is shared by every log this process has open
    /// in that directory (DESIGN §4, Opening).
    pub fn open(dir: impl AsRef<Path>, config: LogConfig) -> Result<Log> {
        Log::open_inner(dir.as_ref(), config, false)
    }

    /// Opens the log in `dir` for reading only. It never writes, truncates or creates a file;
    /// it takes a shared lock when `partlog.lock` exists and runs unlocked otherwise.
    ///
    /// With [`LogConfig::allow_live_writer`] it takes no lock at all and coexists with a writer
    /// in another process: at most every [`LogConfig::poll_interval`] (when a read, a getter,
    /// `stats` or `wait_for_data` runs) it re-reads the checkpoint, re-lists the directory and
    /// reads what the writer appended, up to the last complete batch. [`ReadBound::Durable`]
    /// then stops at the recovery point the writer last recorded in `partlog.checkpoint`. See
    /// [`refresh`](Self::refresh).
    ///
    /// ```
    /// use partlog::{FlushPolicy, Log, LogConfig, NewRecord, ReadBound};
    /// use std::time::Duration;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let temp = tempfile::tempdir()?;
    /// # let dir = temp.path();
    /// let writer = Log::open(dir, LogConfig::default())?; // in practice: another process
    /// let reader = Log::open_read_only(
    ///     dir,
    ///     LogConfig::builder()
    ///         .allow_live_writer(true)
    ///         .poll_interval(Duration::from_millis(10))
    ///         .build()?,
    /// )?;
    /// writer.append(&[NewRecord::new(1_700_000_000_000, None, Some(b"hello"))])?;
    /// // The reader sees the record at its next poll, within about 10 ms.
    /// assert!(reader.wait_for_data(0, Duration::from_secs(10))?);
    /// assert_eq!(reader.read(0, 1 << 20, ReadBound::LogEnd)?.next_offset(), 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn open_read_only(dir: impl AsRef<Path>, config: LogConfig) -> Result<Log> {
        Log::open_inner(dir.as_ref(), config, true)
    }

    fn open_inner(dir: &Path, config: LogConfig, read_only: bool) -> Result<Log> {
        config.validate()?;
        let storage = Arc::clone(&config.storage);
        let clock = Arc::clone(&config.clock);
        // Before anything is created: a running broker must find its directory untouched.
        let kafka_dir = if read_only {
            None
        } else {
            kafka_dir::enter(&storage, dir)?
        };
        let lock = match lock_log_dir(&*storage, dir, read_only, config.allow_live_writer) {
            Ok(lock) => lock,
            Err(error) => {
                // No log data changed yet, so this does not spoil the directory's clean close.
                if let Some(Err(leave_error)) = kafka_dir.map(|m| m.leave(true)) {
                    log::warn!("{}: {leave_error}", dir.display());
                }
                return Err(error);
            }
        };
        let now_ms = clock.now_ms();
        let mut jitter_state = (now_ms as u64) ^ 0x9E37_79B9_7F4A_7C15;
        let recovered =
            recovery::recover(&storage, dir, &config, read_only, now_ms, &mut jitter_state)?;
        let opener = snapshot::SegmentOpener {
            storage: Arc::clone(&storage),
            dir: dir.to_path_buf(),
            config: config.segment_config(0),
            role: if read_only {
                SegmentRole::ReadOnly
            } else {
                SegmentRole::Sealed
            },
            live: read_only && config.allow_live_writer,
        };
        let snapshot = Snapshot::new(
            SegmentList::new(recovered.handles),
            opener,
            MAX_OPEN_SEGMENTS,
        );
        let log_end_offset = recovered.active.next_offset();
        let (cleaner, compaction_status) =
            compaction::load_cleaner_state(&*storage, dir, log_end_offset, read_only);
        let shared = Arc::new(Shared {
            dir: dir.to_path_buf(),
            storage,
            clock,
            read_only,
            dir_lock: Mutex::new(lock),
            kafka_dir: Mutex::new(kafka_dir),
            snapshot,
            writer: Mutex::new(Writer {
                active: recovered.active,
                log_end_offset,
                unsynced_sealed: Vec::new(),
                dir_dirty: false,
                checkpoint: recovered.checkpoint,
                recovery_point: recovered.recovery_point,
                messages_since_flush: 0,
                bytes_since_flush: 0,
                pending_deletes: Vec::new(),
                jitter_state,
            }),
            log_end: Watermark::new(log_end_offset),
            log_start: AtomicI64::new(recovered.log_start_offset),
            commit: GroupCommit::new(recovered.durable_offset, config.group_commit_max_gather),
            closed: AtomicBool::new(false),
            truncated_to: AtomicI64::new(i64::MAX),
            counters: stats::Counters::default(),
            report: recovered.report,
            flusher: Mutex::new(FlusherSignal::default()),
            flusher_wake: Condvar::new(),
            bytes_at_last_checkpoint: AtomicU64::new(0),
            compaction: Mutex::new(cleaner),
            compaction_status,
            truncations: AtomicU64::new(0),
            retention_pass: Mutex::new(()),
            reaping: Mutex::new(()),
            live: (read_only && config.allow_live_writer)
                .then(|| Mutex::new(Instant::now() + config.poll_interval)),
            maintenance_stop: Mutex::new(false),
            maintenance_wake: Condvar::new(),
            config,
        });
        let flusher = if read_only {
            None
        } else {
            let shared = Arc::clone(&shared);
            Some(
                crate::sync::thread::Builder::new()
                    .name(format!("partlog-flusher:{}", dir.display()))
                    .spawn(move || flusher_loop(&shared))
                    .map_err(|e| Error::io(dir, e))?,
            )
        };
        observer::notify(
            shared.config.observer.as_ref(),
            LogEvent::Recovery {
                report: &shared.report,
            },
        );
        let log = Log {
            shared,
            flusher: Mutex::new(flusher),
            maintenance: Mutex::new(None),
        };
        if !read_only && log.shared.config.retention_check_interval_ms > 0 {
            let shared = Arc::clone(&log.shared);
            // The first interval counts from the open, not from whenever the new thread first
            // runs: on a loaded machine that can be after the clock has moved on.
            let opened_ms = shared.clock.now_ms();
            // On failure the log drops, which closes it and stops the flusher.
            let maintenance = crate::sync::thread::Builder::new()
                .name(format!("partlog-maintenance:{}", dir.display()))
                .spawn(move || retention::maintenance_loop(&shared, opened_ms))
                .map_err(|e| Error::io(dir, e))?;
            *log.maintenance.lock() = Some(maintenance);
        }
        Ok(log)
    }

    /// The directory of the log.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// The configuration the log was opened with.
    pub fn config(&self) -> &LogConfig {
        &self.shared.config
    }

    /// The first offset a read may ask for.
    pub fn log_start_offset(&self) -> i64 {
        self.poll_live();
        self.shared.log_start.load(Ordering::Acquire)
    }

    /// The offset the next appended record will get: one past the last record.
    pub fn log_end_offset(&self) -> i64 {
        self.poll_live();
        self.shared.log_end.get()
    }

    /// The durable watermark: every offset below it has been fsynced (with its directory
    /// entry) and survives a crash of the machine. For a read-only log, it is the recovery
    /// point recorded in `partlog.checkpoint` (the whole log after a clean shutdown).
    pub fn durable_offset(&self) -> i64 {
        self.poll_live();
        self.shared.commit.durable_offset()
    }

    /// For a read-only log opened with [`LogConfig::allow_live_writer`]: looks now (whatever
    /// the poll interval) for what the writer did, and returns whether the log's view changed.
    ///
    /// It re-reads `partlog.checkpoint` (the recovery point bounds
    /// [`ReadBound::Durable`], and the log start offset), re-lists the directory (new segments
    /// after a roll; segments gone to retention or replaced by compaction) and reads the
    /// active segment's new batches, up to the last complete one: a batch still being written
    /// is left for the next look. When the active segment shrank, vanished, or its name now
    /// names another file (the writer truncated the log, or recovered from a crash), the view
    /// is rebuilt from the directory, and reads above the new end fail with
    /// [`Error::Truncated`]. A truncation that the writer cut inside the reader's active
    /// segment and re-filled past the reader's end between two looks is not detected; such a
    /// reader sees CRC-checked batches either way.
    ///
    /// Any other log: `Ok(false)`, nothing done.
    pub fn refresh(&self) -> Result<bool> {
        self.check_open()?;
        let Some(live) = &self.shared.live else {
            return Ok(false);
        };
        let mut next_poll = live.lock();
        *next_poll = Instant::now() + self.shared.config.poll_interval;
        self.shared.refresh_live()
    }

    /// [`refresh`](Self::refresh) when the poll interval has passed and no other thread is
    /// polling. A failed poll keeps the old view (the next one tries again): a reader must not
    /// fail because the writer was half-way through a roll when it looked.
    fn poll_live(&self) {
        let Some(live) = &self.shared.live else {
            return;
        };
        let Some(mut next_poll) = live.try_lock() else {
            return;
        };
        let now = Instant::now();
        if now < *next_poll || self.shared.closed.load(Ordering::Acquire) {
            return;
        }
        *next_poll = now + self.shared.config.poll_interval;
        if let Err(error) = self.shared.refresh_live() {
            log::debug!(
                "{}: polling the live writer's files: {error}",
                self.shared.dir.display()
            );
        }
    }

    /// What the last open found and did.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.shared.report
    }

    fn check_writable(&self) -> Result<()> {
        let shared = &self.shared;
        if shared.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        if shared.read_only {
            return Err(Error::Unsupported {
                what: "writing to a log opened read-only".into(),
            });
        }
        if shared.commit.is_poisoned() {
            return Err(Error::Poisoned);
        }
        Ok(())
    }

    fn check_open(&self) -> Result<()> {
        if self.shared.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// Appends `records` as exactly one batch, built with the log's codec
    /// (`compression.type`; `producer` means none here), and returns once the batch is in the
    /// file and visible to readers: it then survives a crash of the process, and, once
    /// [`durable_offset`](Self::durable_offset) passes it, of the machine (DESIGN §3.3).
    ///
    /// Fails with [`Error::RecordTooLarge`] over `max.message.bytes` (a batch is never split),
    /// [`Error::InvalidTimestamp`] outside the timestamp bounds, and [`Error::InvalidArgument`]
    /// for an empty slice or, in a compacted log, a record without a key.
    pub fn append(&self, records: &[NewRecord]) -> Result<LogAppendInfo> {
        self.check_writable()?;
        if records.is_empty() {
            return Err(Error::InvalidArgument {
                why: "an append needs at least one record".into(),
            });
        }
        let now = self.shared.clock.now_ms();
        for record in records {
            self.check_new_record(record.timestamp, record.key.is_some(), now)?;
        }
        let mut builder = BatchBuilder::with_buffer(self.records_codec(), take_batch_buffer());
        for record in records {
            builder.push(record);
        }
        let mut batch = builder.build()?;
        // The time the records were checked against serves the append too: a second clock read
        // per append cost as much as the CRC.
        let appended = self.append_built(&mut batch, now);
        give_back_batch_buffer(batch);
        appended
    }

    /// The checks [`append`](Self::append) makes of each record: a key in a compacted log, and
    /// the timestamp bounds under CreateTime, against the log's time `now_ms`.
    pub(crate) fn check_new_record(
        &self,
        timestamp: i64,
        has_key: bool,
        now_ms: i64,
    ) -> Result<()> {
        let config = &self.shared.config;
        if config.cleanup_policy.compact && !has_key {
            return Err(compacted_without_key());
        }
        if config.message_timestamp_type == TimestampType::CreateTime {
            check_timestamp(config, timestamp, now_ms)?;
        }
        Ok(())
    }

    /// [`check_new_record`](Self::check_new_record) against the log's time now, for the
    /// batching writer's `send`: the same verdict, from the coarse clock
    /// ([`Clock::now_ms_coarse`]) unless the timestamp is within the coarse clock's lag of a
    /// bound, where only the precise clock can tell.
    pub(crate) fn check_record_at_send(&self, timestamp: i64, has_key: bool) -> Result<()> {
        let config = &self.shared.config;
        if config.cleanup_policy.compact && !has_key {
            return Err(compacted_without_key());
        }
        // -1 (no timestamp) passes without a look at the clock, as it does in check_timestamp.
        if config.message_timestamp_type != TimestampType::CreateTime || timestamp == -1 {
            return Ok(());
        }
        let clock = &self.shared.clock;
        if timestamp >= 0 {
            // coarse <= now <= coarse + lag. Then timestamp - now <= timestamp - coarse, and
            // now - timestamp <= coarse + lag - timestamp: both within their bound means the
            // precise check would pass too.
            let coarse = clock.now_ms_coarse();
            let ahead = timestamp.saturating_sub(coarse);
            let behind = coarse
                .saturating_add(COARSE_CLOCK_LAG_MS)
                .saturating_sub(timestamp);
            if ahead <= config.message_timestamp_after_max_ms
                && behind <= config.message_timestamp_before_max_ms
            {
                return Ok(());
            }
        }
        check_timestamp(config, timestamp, clock.now_ms())
    }

    /// The codec batches built from records get: `compression.type`, with `producer` meaning
    /// none (there is no producer codec to keep).
    pub(crate) fn records_codec(&self) -> Compression {
        match self.shared.config.compression_type {
            CompressionType::Producer | CompressionType::Uncompressed => Compression::None,
            CompressionType::Lz4 => Compression::Lz4,
            CompressionType::Zstd => Compression::Zstd,
        }
    }

    /// The clock the log reads time from (`LogConfig::clock`).
    pub(crate) fn clock(&self) -> &Arc<dyn Clock> {
        &self.shared.clock
    }

    /// Appends a batch that partlog's batching writer built from records it already checked
    /// with [`check_new_record`](Self::check_new_record), with the log's codec: the rest of
    /// [`append`](Self::append)'s path (size limit, offsets, roll, flush policy). The bytes stay
    /// the caller's, so that it can reuse the buffer for its next batch.
    ///
    /// With the batch's [`TruncationEpoch`], for an `acks=all` wait on its offsets
    /// ([`durable_since_append`](Self::durable_since_append)).
    pub(crate) fn append_checked_batch(
        &self,
        batch: &mut [u8],
    ) -> Result<(LogAppendInfo, TruncationEpoch)> {
        self.check_writable()?;
        self.append_built_in_epoch(batch, self.shared.clock.now_ms())
    }

    /// Asks the flusher thread to run a group-commit sync now, without waiting for it.
    pub(crate) fn request_sync(&self) {
        self.shared.request_sync();
    }

    /// Whether appends would fail now: the log is closed, read-only or poisoned.
    pub(crate) fn writable(&self) -> Result<()> {
        self.check_writable()
    }

    /// Appends one batch a producer built, after Kafka's leader checks (DESIGN §4, Appending):
    /// one whole batch, magic 2, a valid CRC, records count > 0 and equal to lastOffsetDelta + 1,
    /// a base sequence when the producer id is set, none of the control, delete-horizon or
    /// LogAppendTime bits, keys in a compacted log, the size limit, the timestamp bounds, and
    /// the record framing (checked by decompressing every record).
    ///
    /// The batch's base offset and leader epoch are ignored: the log assigns the offsets, and
    /// stores the epoch as -1 (no epoch), since it is no Kafka leader.
    pub fn append_batch(&self, batch: &[u8]) -> Result<LogAppendInfo> {
        self.check_writable()?;
        let mut batch = self.validate_producer_batch(batch, true)?;
        let appended = self.append_built(&mut batch, self.shared.clock.now_ms());
        give_back_batch_buffer(batch);
        appended
    }

    /// [`append_batch`](Self::append_batch) without the record-framing check: the records are
    /// not decompressed, so a batch whose CRC is right but whose records are malformed is
    /// stored as it is (readers will report it). Timestamp bounds are checked against the
    /// batch's maxTimestamp only. Use it for batches from a trusted producer.
    pub fn append_batch_trusted(&self, batch: &[u8]) -> Result<LogAppendInfo> {
        self.check_writable()?;
        let mut batch = self.validate_producer_batch(batch, false)?;
        let appended = self.append_built(&mut batch, self.shared.clock.now_ms());
        give_back_batch_buffer(batch);
        appended
    }

    fn validate_producer_batch(&self, bytes: &[u8], check_records: bool) -> Result<Vec<u8>> {
        let config = &self.shared.config;
        let invalid = |why: &str| Error::InvalidArgument {
            why: why.to_string(),
        };
        let view = BatchView::new(bytes).map_err(|what| Error::InvalidBatch { what })?;
        let header = *view.header();
        if bytes.len() as u64 > u64::from(config.max_message_bytes) {
            return Err(Error::RecordTooLarge {
                size: bytes.len() as u64,
                max: u64::from(config.max_message_bytes),
            });
        }
        if header.records_count <= 0 {
            return Err(invalid("a produced batch must hold at least one record"));
        }
        if i64::from(header.last_offset_delta) + 1 != i64::from(header.records_count) {
            return Err(invalid("lastOffsetDelta + 1 must equal the records count"));
        }
        if header.producer_id >= 0 && header.base_sequence < 0 {
            return Err(invalid("an idempotent batch needs a base sequence"));
        }
        if header.is_control() {
            return Err(invalid("producers may not write control batches"));
        }
        if header.delete_horizon_ms().is_some() {
            return Err(invalid("producers may not set the delete-horizon bit"));
        }
        if header.timestamp_type() == TimestampType::LogAppendTime {
            return Err(invalid("producers may not set the LogAppendTime bit"));
        }
        let now = self.shared.clock.now_ms();
        let create_time = config.message_timestamp_type == TimestampType::CreateTime;
        let codec = header.compression()?;
        let target_codec = match config.compression_type {
            CompressionType::Producer => codec,
            CompressionType::Uncompressed => Compression::None,
            CompressionType::Lz4 => Compression::Lz4,
            CompressionType::Zstd => Compression::Zstd,
        };
        let recompress = target_codec != codec;
        if check_records || recompress || config.cleanup_policy.compact {
            let mut scratch = Vec::new();
            let mut count = 0i64;
            let mut rebuilt = recompress.then(|| {
                BatchBuilder::new(target_codec)
                    .producer(
                        header.producer_id,
                        header.producer_epoch,
                        header.base_sequence,
                    )
                    .transactional(header.is_transactional())
            });
            for record in view.records(&mut scratch)? {
                let record = record?;
                count += 1;
                if config.cleanup_policy.compact && record.key.is_none() {
                    return Err(compacted_without_key());
                }
                if create_time {
                    check_timestamp(config, record.timestamp, now)?;
                }
                if let Some(builder) = rebuilt.as_mut() {
                    builder.push_record(&record);
                }
            }
            if count != i64::from(header.records_count) {
                return Err(Error::InvalidBatch {
                    what: crate::error::Corruption::RecordCount {
                        declared: header.records_count,
                        found: count,
                    },
                });
            }
            if let Some(builder) = rebuilt {
                let batch = builder.build()?;
                if batch.len() as u64 > u64::from(config.max_message_bytes) {
                    return Err(Error::RecordTooLarge {
                        size: batch.len() as u64,
                        max: u64::from(config.max_message_bytes),
                    });
                }
                return Ok(batch);
            }
        } else if create_time {
            check_timestamp(config, header.max_timestamp, now)?;
        }
        let mut copy = take_batch_buffer();
        copy.extend_from_slice(bytes);
        Ok(copy)
    }

    /// Assigns offsets to a validated batch and appends it under the writer lock.
    ///
    /// `now` is the log's time for this append (rolling by age, LogAppendTime), read by the
    /// caller.
    fn append_built(&self, batch: &mut [u8], now: i64) -> Result<LogAppendInfo> {
        self.append_built_in_epoch(batch, now).map(|(info, _)| info)
    }

    /// [`append_built`](Self::append_built), with the truncation count read under the same
    /// hold of the writer lock as the append: no truncation can come between the two.
    fn append_built_in_epoch(
        &self,
        batch: &mut [u8],
        now: i64,
    ) -> Result<(LogAppendInfo, TruncationEpoch)> {
        let shared = &self.shared;
        let config = &shared.config;
        if batch.len() as u64 > u64::from(config.max_message_bytes) {
            return Err(Error::RecordTooLarge {
                size: batch.len() as u64,
                max: u64::from(config.max_message_bytes),
            });
        }
        let log_append_time = (config.message_timestamp_type == TimestampType::LogAppendTime)
            .then(|| set_log_append_time(batch, now).map(|()| now))
            .transpose()?;
        let mut writer = shared.writer.lock();
        while writer.unsynced_sealed.len() >= MAX_UNSYNCED_SEALED {
            // Back-pressure: rolls outran the flusher's fsyncs. Wait for one covering sync (it
            // drains the whole backlog) rather than let sealed segments and their descriptors
            // pile up.
            let end = writer.log_end_offset;
            drop(writer);
            match shared.sync_through(end - 1) {
                Ok(()) | Err(Error::Truncated { .. }) => {}
                Err(error) => return Err(error),
            }
            writer = shared.writer.lock();
        }
        self.check_writable()?;
        let base_offset = writer.log_end_offset;
        set_base_offset(batch, base_offset)?;
        set_partition_leader_epoch(batch, NO_PARTITION_LEADER_EPOCH)?;
        let header = BatchHeader::parse(batch).map_err(|what| Error::InvalidBatch { what })?;
        let last_offset = header.last_offset();
        // Kafka's shouldRoll, then the append, under one hold of the segment's lock.
        let appended =
            match writer
                .active
                .append_unless_roll(batch, header.max_timestamp, last_offset, now)
            {
                Ok(Ok(info)) => Ok(info),
                Ok(Err(_reason)) => {
                    shared.roll(&mut writer, now)?;
                    writer.active.append(batch)
                }
                Err(error) => Err(error),
            };
        if let Err(error) = appended {
            if writer.active.append_is_broken() {
                log::error!(
                    "poisoning {}: a failed append could not be undone",
                    shared.dir.display()
                );
                shared.commit.poison();
            }
            return Err(error);
        }
        writer.log_end_offset = last_offset + 1;
        shared.log_end.advance(last_offset + 1);
        let epoch = TruncationEpoch(shared.truncations.load(Ordering::Acquire));
        let records = u32::try_from(header.records_count).unwrap_or(0);
        // Only appends write these, under the writer mutex: a load and a store each, not the
        // locked read-modify-write of fetch_add.
        let counters = &shared.counters;
        let bump = |counter: &crate::sync::atomic::AtomicU64, by: u64| {
            counter.store(
                counter.load(Ordering::Relaxed).wrapping_add(by),
                Ordering::Relaxed,
            );
        };
        bump(&counters.appends, 1);
        bump(&counters.appended_bytes, batch.len() as u64);
        bump(&counters.appended_records, u64::from(records));
        let sync_now = match config.flush_policy {
            FlushPolicy::EveryAppend => true,
            FlushPolicy::EveryMessages(limit) => {
                writer.messages_since_flush += u64::from(records);
                writer.messages_since_flush >= limit.get()
            }
            FlushPolicy::EveryBytes(limit) => {
                writer.bytes_since_flush += batch.len() as u64;
                writer.bytes_since_flush >= limit.get()
            }
            FlushPolicy::Interval(_) | FlushPolicy::OsDecides => false,
        };
        if sync_now {
            writer.messages_since_flush = 0;
            writer.bytes_since_flush = 0;
        }
        drop(writer);
        if sync_now {
            shared.sync_through(last_offset)?;
        }
        let info = LogAppendInfo {
            first_offset: base_offset,
            last_offset,
            records,
            max_timestamp: log_append_time.unwrap_or(header.max_timestamp),
            log_append_time,
            bytes: batch.len(),
        };
        Ok((info, epoch))
    }

    /// Blocks until `offset` is durable, starting or joining a group-commit fsync that covers
    /// it, whatever the flush policy. This is what acks=all waits for.
    pub fn wait_durable(&self, offset: i64) -> Result<()> {
        self.check_open()?;
        let end = self.log_end_offset();
        if offset >= end || offset < 0 {
            return Err(Error::OffsetOutOfRange {
                requested: offset,
                start: self.log_start_offset(),
                end,
            });
        }
        self.shared.sync_through(offset)
    }

    /// Blocks until the log holds `offset` (the log end offset has moved past it, so a read at
    /// `offset` finds data), or `timeout` passes, or the log closes. Returns whether the data is
    /// there.
    ///
    /// A poisoned log answers nothing above its durable offset: a wait at or above it fails
    /// with [`Error::Poisoned`], at once or as soon as a failed fsync poisons the log during
    /// the wait, since no append will ever bring the data.
    pub fn wait_for_data(&self, offset: i64, timeout: Duration) -> Result<bool> {
        self.check_open()?;
        let deadline = Instant::now().checked_add(timeout);
        let shared = &self.shared;
        if shared.live.is_some() {
            return Ok(self.wait_for_live_data(offset, deadline));
        }
        // A poisoned log takes no more appends: what it holds now is all it will hold.
        shared.check_readable_above(offset)?;
        shared.log_end.wait_above(offset, deadline, || {
            shared.closed.load(Ordering::Acquire) || shared.commit.is_poisoned()
        });
        // The poison may have come during the wait.
        shared.check_readable_above(offset)?;
        Ok(shared.readable_end() > offset)
    }

    /// [`wait_for_data`](Self::wait_for_data) on a log another process writes: no append here
    /// moves the log end, so the wait polls, once per poll interval.
    fn wait_for_live_data(&self, offset: i64, deadline: Option<Instant>) -> bool {
        let shared = &self.shared;
        loop {
            self.poll_live();
            let end = shared.log_end.get();
            if end > offset || shared.closed.load(Ordering::Acquire) {
                return end > offset;
            }
            let now = Instant::now();
            if deadline.is_some_and(|deadline| now >= deadline) {
                return false;
            }
            let next_poll = now + shared.config.poll_interval;
            let wake = deadline.map_or(next_poll, |deadline| deadline.min(next_poll));
            // Woken early only by close (or a truncation the poll saw).
            shared
                .log_end
                .wait_above(offset, Some(wake), || shared.closed.load(Ordering::Acquire));
        }
    }

    /// Reads whole batches from `offset` (the batch holding it comes first; a read in a gap
    /// starts at the next batch), up to about `max_bytes` but always at least one whole batch.
    ///
    /// At the bound's end it returns empty data. Below the log start offset or above the log
    /// end offset it fails with [`Error::OffsetOutOfRange`], or [`Error::Truncated`] when a
    /// truncation took the log back below `offset`.
    pub fn read(&self, offset: i64, max_bytes: usize, bound: ReadBound) -> Result<FetchData> {
        let mut fetch = FetchData::new();
        self.read_into(offset, max_bytes, bound, &mut fetch)?;
        Ok(fetch)
    }

    /// [`read`](Self::read) into `fetch`, reusing its buffer: a reader that keeps one
    /// [`FetchData`] allocates nothing per read once the buffer has grown to its largest read.
    /// Whatever `fetch` held is replaced (on an error it is left empty).
    pub fn read_into(
        &self,
        offset: i64,
        max_bytes: usize,
        bound: ReadBound,
        fetch: &mut FetchData,
    ) -> Result<()> {
        let resume = fetch.take_resume_point();
        fetch.clear_at(offset, 0);
        self.check_open()?;
        self.poll_live();
        match self.read_current(offset, max_bytes, bound, resume.as_ref(), fetch) {
            // A live writer deleted a segment this view still lists (retention, a truncation)
            // since the last poll: look again, and answer from what is there now.
            Err(error)
                if self.shared.live.is_some()
                    && error.io_kind() == Some(std::io::ErrorKind::NotFound) =>
            {
                fetch.clear_at(offset, 0);
                self.refresh()?;
                self.read_current(offset, max_bytes, bound, None, fetch)
            }
            other => other,
        }
    }

    /// [`read`](Self::read) on the log's current view.
    fn read_current(
        &self,
        offset: i64,
        max_bytes: usize,
        bound: ReadBound,
        resume: Option<&ResumePoint>,
        fetch: &mut FetchData,
    ) -> Result<()> {
        // A try finds nothing below its bound when a truncation overtook it; a new one finds
        // the offset written again, or the truncation below it (or, in the rare legitimate
        // case, the same gap at the end of the bound, and ends with nothing once more).
        const MAX_OVERTAKEN_READS: u32 = 4;
        for _ in 1..MAX_OVERTAKEN_READS {
            if !self.read_current_once(offset, max_bytes, bound, resume, fetch)? {
                return Ok(());
            }
        }
        self.read_current_once(offset, max_bytes, bound, resume, fetch)
            .map(|_| ())
    }

    /// One try of [`read_current`](Self::read_current): `Ok(true)` when it found nothing
    /// below the bound it read to, though the log ended above `offset` when it began: a
    /// truncation may have taken the offset away and appends brought it back since, so that a
    /// new try may find it.
    fn read_current_once(
        &self,
        offset: i64,
        max_bytes: usize,
        bound: ReadBound,
        resume: Option<&ResumePoint>,
        fetch: &mut FetchData,
    ) -> Result<bool> {
        let shared = &self.shared;
        let end = shared.readable_end();
        let start = self.log_start_offset();
        if offset > end {
            let truncated_to = shared.truncated_to.load(Ordering::Acquire);
            if truncated_to < offset {
                return Err(Error::Truncated { at: end });
            }
        }
        if offset < start || offset > end {
            return Err(Error::OffsetOutOfRange {
                requested: offset,
                start,
                end,
            });
        }
        let upper = match bound {
            ReadBound::LogEnd => end,
            ReadBound::Durable => self.durable_offset().min(end),
        };
        fetch.clear_at(offset, end);
        if offset >= upper {
            return Ok(false);
        }
        'retry: loop {
            let list = shared.snapshot.load();
            // Retention moves the start before it swaps segments out: a list without the
            // segment holding `offset` comes with a start above it.
            let start = self.log_start_offset();
            if offset < start {
                return Err(Error::OffsetOutOfRange {
                    requested: offset,
                    start,
                    end,
                });
            }
            let mut index = list.floor_index(offset);
            while let Some(handle) = list.handles().get(index) {
                if handle.base_offset() >= upper {
                    break;
                }
                let Some(segment) = shared.snapshot.pin(handle)? else {
                    continue 'retry;
                };
                let from = offset.max(handle.base_offset());
                let resume_at = resume.and_then(|point| point.position_for(&segment, from));
                // Before the read: `send_to` may send the file's bytes only if no truncation
                // was under way or began since.
                let segment_truncations = segment.truncation_sequence();
                let found = segment.read_in_place(
                    from,
                    max_bytes,
                    Some(upper),
                    resume_at,
                    fetch.buffer_mut(),
                )?;
                if let Some((read, at)) = found {
                    fetch.fill(&read, at, end, segment, segment_truncations);
                    return Ok(false);
                }
                index += 1;
            }
            // Nothing below `upper`, which the log end covered when the read began: if the log
            // now ends at or below `offset`, a truncation took it away meanwhile.
            let list = shared.snapshot.load();
            let data_end = list.active().and_then(|handle| handle.if_open());
            if let Some(at) = data_end.map(|active| active.next_offset())
                && at <= offset
            {
                return Err(Error::Truncated { at });
            }
            return Ok(true);
        }
    }

    /// An iterator over the data records from `offset` on, across segments, up to `bound` as
    /// it stands when each fetch runs. Control records are skipped. Until transactions land,
    /// records of aborted transactions are returned too (`read_uncommitted`).
    pub fn records(&self, offset: i64, bound: ReadBound) -> LogRecords<'_> {
        LogRecords {
            log: self,
            position: offset,
            bound,
            buffered: Vec::new().into_iter(),
            scratch: Vec::new(),
            fetch: FetchData::new(),
            failed: false,
        }
    }

    /// Kafka's ListOffsets by timestamp: the first record whose timestamp is at or above
    /// `timestamp`, as `(offset, timestamp)`, or `None` when every record is older. A poisoned
    /// log answers only from below its durable offset.
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<(i64, i64)>> {
        self.check_open()?;
        self.poll_live();
        let shared = &self.shared;
        let start = self.log_start_offset();
        // Read once: a poisoned log vouches for nothing above its durable offset, and the
        // answer must not come from there.
        let end = shared.readable_end();
        'retry: loop {
            let list = shared.snapshot.load();
            for handle in list.handles() {
                if handle.base_offset() >= end {
                    return Ok(None);
                }
                let Some(segment) = shared.snapshot.pin(handle)? else {
                    continue 'retry;
                };
                if segment.next_offset() <= start {
                    continue;
                }
                if segment
                    .max_timestamp()
                    .is_none_or(|max| max.timestamp < timestamp)
                {
                    continue;
                }
                if let Some(found) =
                    segment.find_offset_by_timestamp_below(timestamp, start, end)?
                {
                    // The first record at or above `timestamp`: every record before it is
                    // older, so one at or above the end means none the log vouches for.
                    return Ok((found.offset < end).then_some((found.offset, found.timestamp)));
                }
            }
            return Ok(None);
        }
    }

    /// Removes every record at or above `offset` and makes that durable before returning
    /// (DESIGN §4, Truncation). A batch that straddles `offset` goes whole, so the new log end
    /// offset may be a little below `offset`; it is returned. Readers positioned above it get
    /// [`Error::Truncated`].
    ///
    /// In a compacted log the new end is the offset after the last batch kept, since the files
    /// are all that record the end: an `offset` in a gap that compaction left, or at a batch that
    /// follows one, ends the log after the last batch kept below it (the segment's base offset
    /// if it keeps none), so the new end may be well below `offset`, and the log start offset
    /// comes down to it if it was higher (nothing below the old start comes back: every batch
    /// kept ends at or below the new end).
    ///
    /// Compaction has already removed the records that a later record of their key superseded.
    /// Truncating below such a later record removes the key's latest value without bringing the
    /// older ones back: the key then reads as its last record below `offset` that compaction
    /// kept, or not at all. Kafka avoids this by cleaning only below
    /// the high watermark and truncating only above it; do the same by truncating only above
    /// what [`compact`](Self::compact) has cleaned.
    pub fn truncate_to(&self, offset: i64) -> Result<i64> {
        self.check_writable()?;
        if offset < 0 {
            return Err(Error::InvalidArgument {
                why: format!("cannot truncate to negative offset {offset}"),
            });
        }
        let shared = &self.shared;
        let mut writer = shared.writer.lock();
        if offset >= writer.log_end_offset {
            return Ok(writer.log_end_offset);
        }
        let result = shared.truncate_locked(&mut writer, offset);
        if result.is_err() {
            // A half-done truncation leaves files the in-memory state no longer describes.
            shared.commit.poison();
        }
        result
    }

    /// Runs one retention pass now: deletes the oldest segments that lie wholly below the log
    /// start offset, then (when `cleanup.policy` has `delete`) those over `retention.bytes`, then
    /// those older than `retention.ms`, each rule walking from the oldest segment and stopping at
    /// the first one it keeps. If the active segment goes too, the log first rolls a new, empty
    /// one at the log end offset. The new log start offset is in a synced checkpoint before any
    /// file is touched.
    ///
    /// Appends wait at most for that checkpoint fsync and one directory fsync; readers never
    /// wait, and a reader holding data of a deleted segment keeps reading it: the files are
    /// renamed `*.deleted` and removed once no reader pins them. Set
    /// [`LogConfig::retention_check_interval_ms`] to have a background thread run this.
    pub fn enforce_retention(&self) -> Result<RetentionReport> {
        self.check_writable()?;
        self.shared.enforce_retention()
    }

    /// Moves the log start offset up to `offset`, durably: reads below it fail from then on,
    /// and the new start is in an fsynced checkpoint before this returns. Whole segments below
    /// it are deleted by retention. Fails if `offset` is above the log end offset.
    pub fn delete_records_before(&self, offset: i64) -> Result<()> {
        self.check_writable()?;
        let shared = &self.shared;
        let mut writer = shared.writer.lock();
        let end = writer.log_end_offset;
        let start = shared.log_start.load(Ordering::Acquire);
        if offset > end {
            return Err(Error::OffsetOutOfRange {
                requested: offset,
                start,
                end,
            });
        }
        if offset <= start {
            return Ok(());
        }
        let recovery_point = writer.recovery_point;
        shared.write_checkpoint_durably(&mut writer, recovery_point, offset)?;
        shared.log_start.store(offset, Ordering::Release);
        Ok(())
    }

    /// A snapshot of the log's counters.
    pub fn stats(&self) -> LogStats {
        self.poll_live();
        let shared = &self.shared;
        let counters = &shared.counters;
        let list = shared.snapshot.load();
        let active_segment_bytes = list
            .active()
            .and_then(|h| h.if_open())
            .map_or(0, |s| s.size());
        let compaction = shared.compaction_counters();
        LogStats {
            segments: list.len(),
            open_segments: shared.snapshot.open_count(),
            active_segment_bytes,
            log_start_offset: self.log_start_offset(),
            log_end_offset: self.log_end_offset(),
            durable_offset: self.durable_offset(),
            appends: counters.appends.load(Ordering::Relaxed),
            appended_bytes: counters.appended_bytes.load(Ordering::Relaxed),
            appended_records: counters.appended_records.load(Ordering::Relaxed),
            rolls: counters.rolls.load(Ordering::Relaxed),
            fsyncs: counters.fsyncs.load(Ordering::Relaxed),
            fsync_nanos: counters.fsync_nanos.load(Ordering::Relaxed),
            max_fsync_nanos: counters.max_fsync_nanos.load(Ordering::Relaxed),
            poisoned: shared.commit.is_poisoned(),
            compaction_passes: compaction.passes,
            compaction_failed_passes: compaction.failed_passes,
            compaction_uncleanable_from: compaction.uncleanable_from,
            compaction_uncleanable_bytes: compaction.uncleanable_bytes,
        }
    }

    /// Makes everything appended so far durable, then writes the clean-shutdown checkpoint so
    /// that the next open scans nothing. Later calls fail with [`Error::Closed`]. A poisoned log
    /// writes no clean-shutdown fields and returns [`Error::Poisoned`]: the next open recovers.
    ///
    /// In a Kafka log directory, when the last log this process has open there closes, and none
    /// of them was poisoned or failed to close, `.kafka_cleanshutdown` goes back where it was;
    /// then the broker's lock is released.
    pub fn close(&self) -> Result<()> {
        if self.shared.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        // A retention pass may still sync through the group commit: the flusher stops after it.
        self.stop_maintenance();
        self.stop_flusher();
        self.shared.log_end.wake_all();
        let result = if self.shared.read_only {
            Ok(())
        } else {
            self.shared.close_writable()
        };
        if result.is_err() {
            // Its final fsyncs may have failed: nothing more may be reported durable, and the
            // stats say why the clean-shutdown record is missing.
            self.shared.commit.poison();
        }
        // Released even after a failed close: the next open recovers whatever state is left.
        drop(self.shared.dir_lock.lock().take());
        // Last: the broker may start once the Kafka log directory is handed back.
        let membership = self.shared.kafka_dir.lock().take();
        match membership.map(|m| m.leave(result.is_ok())) {
            Some(Err(leave_error)) if result.is_ok() => Err(leave_error),
            Some(Err(leave_error)) => {
                log::warn!("{}: {leave_error}", self.shared.dir.display());
                result
            }
            _ => result,
        }
    }

    fn stop_maintenance(&self) {
        *self.shared.maintenance_stop.lock() = true;
        self.shared.maintenance_wake.notify_all();
        if let Some(handle) = self.maintenance.lock().take()
            && handle.join().is_err()
        {
            log::error!(
                "the maintenance thread of {} panicked",
                self.shared.dir.display()
            );
        }
    }

    fn stop_flusher(&self) {
        {
            let mut signal = self.shared.flusher.lock();
            signal.stop = true;
        }
        self.shared.flusher_wake.notify_all();
        if let Some(handle) = self.flusher.lock().take()
            && handle.join().is_err()
        {
            log::error!(
                "the flusher thread of {} panicked",
                self.shared.dir.display()
            );
        }
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        if let Err(error) = self.close() {
            log::warn!("closing {} on drop: {error}", self.shared.dir.display());
        }
    }
}

/// The iterator of [`Log::records`].
#[derive(Debug)]
pub struct LogRecords<'a> {
    log: &'a Log,
    position: i64,
    bound: ReadBound,
    buffered: std::vec::IntoIter<LogRecord>,
    scratch: Vec<u8>,
    /// Reused by every fetch, so that the iterator's reads allocate no new buffers.
    fetch: FetchData,
    failed: bool,
}

impl LogRecords<'_> {
    /// The offset the iterator will read next.
    pub fn position(&self) -> i64 {
        self.position
    }
}

impl Iterator for LogRecords<'_> {
    type Item = Result<LogRecord>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(record) = self.buffered.next() {
                self.position = record.offset + 1;
                return Some(Ok(record));
            }
            if self.failed {
                return None;
            }
            let fetch = &mut self.fetch;
            if let Err(error) = self
                .log
                .read_into(self.position, 1 << 20, self.bound, fetch)
            {
                self.failed = true;
                return Some(Err(error));
            }
            if fetch.is_empty() {
                return None;
            }
            let mut records = Vec::new();
            for batch in fetch.batches() {
                let result = batch.and_then(|batch| {
                    fetch::decode_records(&batch, self.position, &mut self.scratch, &mut records)
                });
                if let Err(error) = result {
                    self.failed = true;
                    return Some(Err(error));
                }
            }
            // Skip over batches that held only control records or records below the position.
            self.position = self.position.max(fetch.next_offset());
            if let Some(first) = records.first() {
                self.position = first.offset;
            }
            self.buffered = records.into_iter();
        }
    }
}

impl Shared {
    /// One look at a live writer's directory; see [`Log::refresh`]. Runs under the writer
    /// mutex, which a read-only log uses for nothing else.
    fn refresh_live(&self) -> Result<bool> {
        let mut writer = self.writer.lock();
        let record = CheckpointFile::read(&self.storage, &self.dir)?;
        let bases = crate::segment::list_segment_bases(&*self.storage, &self.dir)?;
        let Some(&last_base) = bases.last() else {
            // Between a writer's deletion and its creation of a segment: look again later.
            return Ok(false);
        };
        let active = Arc::clone(&writer.active);
        let active_base = active.base_offset();
        let shrank = match active.file_len() {
            Ok(len) => len < active.size(),
            Err(error) if error.io_kind() == Some(std::io::ErrorKind::NotFound) => true,
            Err(error) => return Err(error),
        };
        // A writer that removed the segment and created another at the same base between two
        // looks (a truncation below it, then appends and a roll at the same offset): the name
        // is back, but it is another file.
        let replaced = match self.storage.metadata(&active.log_path()) {
            Ok(metadata) => match (metadata.file_id, active.log_file_id()?) {
                (Some(named), Some(open)) => named != open,
                _ => false,
            },
            Err(error) if error.io_kind() == Some(std::io::ErrorKind::NotFound) => true,
            Err(error) => return Err(error),
        };
        if shrank
            || replaced
            || bases.binary_search(&active_base).is_err()
            || last_base < active_base
        {
            self.reload_live(&mut writer)?;
            return Ok(true);
        }
        let old_end = writer.log_end_offset;
        // The segments listed after the active one were created after its last batch was
        // written, so catching up now reads it to its end.
        active.catch_up()?;

        let list = self.snapshot.load();
        let mut changed = false;
        let mut handles = Vec::with_capacity(bases.len());
        let mut new_active = None;
        for &base in &bases {
            if let Some(handle) = list.handles().iter().find(|h| h.base_offset() == base) {
                handles.push(Arc::clone(handle));
                continue;
            }
            changed = true;
            if base == last_base {
                let segment = Segment::open_for_recovery(
                    &self.storage,
                    &self.dir,
                    base,
                    self.config.segment_config(0),
                    self.clock.now_ms(),
                    true,
                )?;
                // Up to the last complete batch: the rest is being written.
                segment.scan()?;
                let segment = Arc::new(segment);
                handles.push(SegmentHandle::opened(Arc::clone(&segment)));
                new_active = Some(segment);
            } else {
                // A segment sealed since the last look, or a compaction's output: opened on use.
                handles.push(SegmentHandle::closed(base));
            }
        }
        let removed: Vec<_> = list
            .handles()
            .iter()
            .filter(|h| bases.binary_search(&h.base_offset()).is_err())
            .cloned()
            .collect();
        if changed || !removed.is_empty() {
            drop(self.snapshot.swap(SegmentList::new(handles), &removed));
            if let Some(segment) = new_active {
                self.snapshot.note_opened();
                writer.active = segment;
            }
        }
        let new_end = writer.active.next_offset();
        writer.log_end_offset = new_end;
        self.publish_live_offsets(record, bases.first().copied(), new_end);
        Ok(changed || !removed.is_empty() || new_end != old_end)
    }

    /// Rebuilds a live read-only log's view from the directory, after its writer truncated the
    /// log (or crashed and recovered) under it.
    fn reload_live(&self, writer: &mut Writer) -> Result<()> {
        let now_ms = self.clock.now_ms();
        let mut jitter_state = writer.jitter_state;
        let recovered = recovery::recover(
            &self.storage,
            &self.dir,
            &self.config,
            true,
            now_ms,
            &mut jitter_state,
        )?;
        let old_list = self.snapshot.load();
        drop(
            self.snapshot
                .swap(SegmentList::new(recovered.handles), old_list.handles()),
        );
        let old_end = writer.log_end_offset;
        let new_end = recovered.active.next_offset();
        writer.active = recovered.active;
        writer.log_end_offset = new_end;
        if new_end < old_end {
            // Readers above the new end learn that it was cut, not that it is out of range.
            self.truncated_to.fetch_min(new_end, Ordering::AcqRel);
        }
        self.log_start
            .store(recovered.log_start_offset, Ordering::Release);
        self.commit.observe(recovered.durable_offset.min(new_end));
        self.log_end.set(new_end);
        log::info!(
            "{}: the active segment shrank or left the directory; view rebuilt, the log \
             ends at {new_end} (was {old_end})",
            self.dir.display()
        );
        Ok(())
    }

    /// Publishes what a live poll found: the log start offset and the durable offset from the
    /// writer's checkpoint, and the new log end offset.
    fn publish_live_offsets(
        &self,
        record: Option<checkpoint::CheckpointRecord>,
        first_base: Option<i64>,
        end: i64,
    ) {
        if let Some(record) = record {
            let start = record.log_start_offset.max(first_base.unwrap_or(0));
            self.log_start.store(start.min(end), Ordering::Release);
            self.commit.observe(record.recovery_point.clamp(0, end));
        }
        if end != self.log_end.get() {
            if end < self.log_end.get() {
                self.truncated_to.fetch_min(end, Ordering::AcqRel);
            }
            self.log_end.set(end);
        }
    }

    /// The end of what the log answers reads from: the log end offset, or, once a failed
    /// fsync poisoned the log, no more than the durable offset: the kernel may have dropped the
    /// pages above it (ARCHITECTURE.md §8, "Failed fsyncs").
    fn readable_end(&self) -> i64 {
        let end = self.log_end.get();
        if self.commit.is_poisoned() {
            end.min(self.commit.durable_offset())
        } else {
            end
        }
    }

    /// [`Error::Poisoned`] when the log is poisoned and `offset` is at or above what it still
    /// answers: no data will come there any more.
    fn check_readable_above(&self, offset: i64) -> Result<()> {
        if self.commit.is_poisoned() && offset >= self.readable_end() {
            return Err(Error::Poisoned);
        }
        Ok(())
    }

    /// See [`Log::request_sync`].
    fn request_sync(&self) {
        self.flusher.lock().sync_requested = true;
        self.flusher_wake.notify_all();
    }

    /// Syncs everything published so far, through the group commit, until `offset` is durable.
    fn sync_through(&self, offset: i64) -> Result<()> {
        let result = self.commit.wait_durable(offset, || self.sync_published());
        if result.is_err() && self.commit.is_poisoned() {
            // Waiters for data above the durable offset will never get it now.
            self.log_end.wake_all();
        }
        result
    }

    /// The leader's sync: sealed segments not yet synced (data and indexes), the directory if a
    /// segment was created, then the active `.log` (data only: indexes are derived).
    fn sync_published(&self) -> Result<i64> {
        let durable_before = self.commit.durable_offset();
        // The sealed segments stay listed until they are synced: a recovery point recorded
        // meanwhile must not count on their indexes (`record_recovery_point_through`).
        let (target, sealed, dir_dirty, active, truncations) = {
            let mut writer = self.writer.lock();
            (
                writer.log_end_offset,
                writer.unsynced_sealed.clone(),
                std::mem::take(&mut writer.dir_dirty),
                Arc::clone(&writer.active),
                self.truncations.load(Ordering::Acquire),
            )
        };
        let started = Instant::now();
        // Sealed segments before the directory: once a new segment's name is durable, every
        // segment before it is complete on disk, so a crash can only cut the log's tail.
        let result = (|| {
            for segment in &sealed {
                // With its metadata: the `.log` mtime set at roll is what time retention reads.
                segment.flush_sealed()?;
            }
            if dir_dirty {
                self.storage.sync_dir(&self.dir)?;
            }
            active.flush_log()
        })();
        if result.is_ok() && !sealed.is_empty() {
            let mut writer = self.writer.lock();
            // A truncation since may have reactivated one of them and sealed it again with
            // entries this sync did not cover: it then stays listed.
            if self.truncations.load(Ordering::Acquire) == truncations {
                writer
                    .unsynced_sealed
                    .retain(|listed| !sealed.iter().any(|synced| Arc::ptr_eq(synced, listed)));
            }
        }
        let duration = started.elapsed();
        let nanos = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        self.counters.note_fsync(nanos);
        observer::notify(
            self.config.observer.as_ref(),
            LogEvent::Fsync {
                offsets: durable_before.min(target)..target,
                duration,
                result: result.as_ref().map(|_| ()),
            },
        );
        result.map(|()| target)
    }

    /// Rolls to a new active segment at the log end offset. All or nothing: if the new segment
    /// cannot be created or the old one sealed, the old one stays active and the error returns.
    fn roll(&self, writer: &mut Writer, now_ms: i64) -> Result<()> {
        let base = writer.log_end_offset;
        let old = Arc::clone(&writer.active);
        if old.base_offset() == base && old.size() == 0 {
            return Ok(());
        }
        let jitter = self
            .config
            .draw_roll_jitter(next_random(&mut writer.jitter_state));
        let segment_config = self.config.segment_config(jitter);
        let new = Arc::new(Segment::create(
            &self.storage,
            &self.dir,
            base,
            segment_config,
            now_ms,
        )?);
        if let Err(error) = old.seal() {
            for path in new.file_paths() {
                if let Err(cleanup) = self.storage.remove(&path) {
                    log::warn!("removing {} after a failed roll: {cleanup}", path.display());
                }
            }
            if let Err(unseal) = old.unseal() {
                log::error!(
                    "could not reactivate {}: {unseal}",
                    old.log_path().display()
                );
                self.commit.poison();
            }
            return Err(error);
        }
        // The sealed `.log`'s mtime is its append time for time retention, from the log's clock;
        // the flusher's sync of the sealed segment makes it durable.
        match self.storage.set_mtime(&old.log_path(), now_ms) {
            Ok(()) => {}
            Err(Error::Unsupported { .. }) => {}
            Err(error) => log::warn!(
                "{}: could not set its mtime (time retention falls back to the file system's): {error}",
                old.log_path().display()
            ),
        }
        let list = self.snapshot.load();
        let mut handles = list.handles().to_vec();
        handles.push(SegmentHandle::opened(Arc::clone(&new)));
        self.snapshot.swap(SegmentList::new(handles), &[]);
        self.snapshot.note_opened();
        let old_base = old.base_offset();
        writer.unsynced_sealed.push(old);
        writer.dir_dirty = true;
        writer.active = new;
        self.counters.rolls.fetch_add(1, Ordering::Relaxed);
        observer::notify(
            self.config.observer.as_ref(),
            LogEvent::Roll {
                old_base,
                new_base: base,
            },
        );
        self.flusher.lock().roll_pending = true;
        self.flusher_wake.notify_all();
        log::debug!("rolled {} to a new segment at {base}", self.dir.display());
        Ok(())
    }

    fn truncate_locked(&self, writer: &mut Writer, offset: i64) -> Result<i64> {
        self.truncations.fetch_add(1, Ordering::AcqRel);
        let list = self.snapshot.load();
        let handles = list.handles();
        let mut keep = handles.partition_point(|h| h.base_offset() < offset);
        if keep == 0 && handles.first().is_some_and(|h| h.base_offset() == offset) {
            // Truncating to the first segment's base empties that segment and keeps it.
            keep = 1;
        }
        let holder = match keep {
            0 => None,
            _ => Some(self.snapshot.pin(&handles[keep - 1])?.ok_or_else(|| {
                Error::InvalidArgument {
                    why: "the segment list changed during a truncation".into(),
                }
            })?),
        };
        // A batch that straddles `offset` goes whole: the real new end may lie below it.
        let new_end = match &holder {
            Some(segment) => segment.truncation_point(offset)?,
            None => offset,
        };

        // Offsets from the new end on will be reused: compaction's persisted first dirty
        // offset must not cover them, even after a crash from here on.
        self.lower_cleaner_checkpoint(new_end)?;
        // 1. The checkpoint first: recovery must never trust bytes above the new end.
        let recovery_point = writer.recovery_point.min(new_end);
        let log_start = self.log_start.load(Ordering::Acquire).min(new_end);
        if let Some(checkpoint) = writer.checkpoint.as_mut() {
            checkpoint.write(recovery_point, log_start, None, true)?;
        }
        writer.recovery_point = recovery_point;
        self.log_start.store(log_start, Ordering::Release);

        let (kept, removed) = match &holder {
            None => {
                // Everything lies above `offset`: start over with an empty segment there (no
                // existing segment has that base, so no file name collides).
                let segment = Arc::new(Segment::create(
                    &self.storage,
                    &self.dir,
                    offset,
                    self.config.segment_config(0),
                    self.clock.now_ms(),
                )?);
                writer.dir_dirty = true;
                self.snapshot.note_opened();
                (vec![SegmentHandle::opened(segment)], handles.to_vec())
            }
            Some(_) => (handles[..keep].to_vec(), handles[keep..].to_vec()),
        };
        // 2. Later segments leave the snapshot and are renamed `.deleted`, the last one first,
        //    and the directory is synced, all before the segment holding the new end is cut.
        //    A crash part-way then leaves a prefix of the old log: with the renames durable in
        //    order, the segments that remain are contiguous. Cutting the holder first could
        //    leave it ending below the next segment's base, a gap that recovery of a compacted
        //    log must accept (compaction makes gaps), so the later segments would come back.
        let active_handle = Arc::clone(kept.last().ok_or_else(|| Error::InvalidArgument {
            why: "a truncation left no segment".into(),
        })?);
        // The segments the handles had open, taken under the snapshot lock: no reader can pin
        // another instance from now on.
        let open_removed = self.snapshot.swap(SegmentList::new(kept), &removed);
        for (handle, segment) in removed.iter().zip(open_removed).rev() {
            let paths = rename_segment_files(
                &*self.storage,
                &self.dir,
                handle.base_offset(),
                DELETED_SUFFIX,
            )?;
            writer
                .pending_deletes
                .push(PendingDelete { paths, segment });
        }
        self.storage.sync_dir(&self.dir)?;
        writer.dir_dirty = false;
        // 3. Truncate the segment that holds the new end, and sync it.
        if let Some(segment) = &holder {
            segment.truncate_to(new_end, self.clock.now_ms())?;
            if segment.is_sealed() {
                segment.unseal()?;
            }
            segment.flush()?;
        }

        let active = self
            .snapshot
            .pin(&active_handle)?
            .ok_or_else(|| Error::InvalidArgument {
                why: "the new active segment left the log".into(),
            })?;
        writer
            .unsynced_sealed
            .retain(|s| s.base_offset() < active.base_offset());
        let new_end = active.next_offset();
        writer.active = active;
        writer.log_end_offset = new_end;
        self.commit.truncate(new_end);
        self.log_end.set(new_end);
        self.truncated_to.fetch_min(new_end, Ordering::AcqRel);
        // Futures waiting for durability of a removed offset must look again; the durable
        // watermark only wakes them by itself if it moves down.
        self.commit.durable_watermark().wake_all();
        self.reap_deleted(writer, false);
        Ok(new_end)
    }

    /// Removes `.deleted` files whose segment no reader pins any more (all of them when
    /// `force`, at close: a reader's descriptor outlives the unlink anyway).
    fn reap_deleted(&self, writer: &mut Writer, force: bool) {
        let ready = take_unpinned(&mut writer.pending_deletes, force);
        let failed = self.remove_pending(ready);
        writer.pending_deletes.extend(failed);
    }

    /// [`reap_deleted`](Self::reap_deleted) without `force`, unlinking outside the writer lock:
    /// unlinking a large file can take a while, and appends must not wait for it.
    fn reap_unpinned(&self) {
        let _reaping = self.reaping.lock();
        let ready = take_unpinned(&mut self.writer.lock().pending_deletes, false);
        if ready.is_empty() {
            return;
        }
        let failed = self.remove_pending(ready);
        if !failed.is_empty() {
            self.writer.lock().pending_deletes.extend(failed);
        }
    }

    /// Removes the files of `pending`; returns what could not be removed, to retry later.
    fn remove_pending(&self, mut pending: Vec<PendingDelete>) -> Vec<PendingDelete> {
        pending.retain_mut(|pending| {
            pending
                .paths
                .retain(|path| match self.storage.remove(path) {
                    Ok(()) => false,
                    Err(error) if error.io_kind() == Some(std::io::ErrorKind::NotFound) => false,
                    Err(error) => {
                        log::warn!("could not remove {}: {error}", path.display());
                        true
                    }
                });
            !pending.paths.is_empty()
        });
        pending
    }

    /// Writes a recovery-point checkpoint slot (not fsynced: DESIGN §3a) once the durable
    /// offset has moved far enough, after syncing the active indexes it relies on.
    fn maybe_write_recovery_point(&self, now_ms: i64, last_checkpoint_ms: &mut i64) -> Result<()> {
        let appended = self.counters.appended_bytes.load(Ordering::Relaxed);
        // Under the writer lock, which a truncation holds throughout: the durable offset and
        // the truncation count are read between truncations, never in the middle of one.
        let (recovery_point, active, durable, truncations) = {
            let writer = self.writer.lock();
            (
                writer.recovery_point,
                Arc::clone(&writer.active),
                self.commit.durable_offset(),
                self.truncations.load(Ordering::Acquire),
            )
        };
        if durable <= recovery_point {
            return Ok(());
        }
        let bytes_moved =
            appended.saturating_sub(self.bytes_at_last_checkpoint.load(Ordering::Relaxed));
        let due = bytes_moved >= self.config.recovery_point_bytes
            || now_ms.saturating_sub(*last_checkpoint_ms)
                >= i64::try_from(self.config.recovery_point_ms).unwrap_or(i64::MAX);
        if !due {
            return Ok(());
        }
        if let Err(error) = active
            .offset_index()
            .sync()
            .and_then(|()| active.time_index().sync())
        {
            return Err(self.poison_after_failed_sync("syncing the active indexes", error));
        }
        let mut writer = self.writer.lock();
        // A truncation (or a roll) since `durable` was read makes it stale: the log may since
        // have appended new, unsynced data below it, and the indexes synced above may no
        // longer be the active ones. Try again at the next tick (found by tests/crash_matrix.rs:
        // a point recorded over re-appended data that a crash then lost).
        if self.truncations.load(Ordering::Acquire) != truncations
            || !Arc::ptr_eq(&writer.active, &active)
        {
            return Ok(());
        }
        let recovery_point = durable.min(writer.log_end_offset);
        if recovery_point <= writer.recovery_point {
            return Ok(());
        }
        // A roll after the sync that made `durable` durable sealed a segment whose indexes only
        // the next sync covers: recovery would trust their entries below the point. The roll
        // wakes this thread to sync; try again at the next tick.
        if writer
            .unsynced_sealed
            .iter()
            .any(|segment| segment.base_offset() < recovery_point)
        {
            return Ok(());
        }
        let log_start = self.log_start.load(Ordering::Acquire);
        if let Some(checkpoint) = writer.checkpoint.as_mut() {
            checkpoint.write(recovery_point, log_start, None, false)?;
        }
        writer.recovery_point = recovery_point;
        self.bytes_at_last_checkpoint
            .store(appended, Ordering::Relaxed);
        *last_checkpoint_ms = now_ms;
        Ok(())
    }

    /// Makes every offset below `offset` durable and records a recovery point at or above it in
    /// a synced checkpoint slot. Compaction calls it before a pass, with the active segment's
    /// base: every segment it cleans then lies below the recorded point, even after a crash.
    /// (The flusher's recovery-point slots are not synced, so the point held in memory may not
    /// be on disk yet: this always syncs one.)
    ///
    /// Returns whether every offset below `offset` now lies below a synced recovery point:
    /// `false` when a truncation overtook the call, and the pass must then clean nothing.
    fn record_recovery_point_through(&self, offset: i64) -> Result<bool> {
        if offset <= 0 {
            return Ok(true);
        }
        if self.commit.durable_offset() < offset {
            match self.sync_through(offset - 1) {
                // A truncation took offsets below `offset`: the pass was overtaken, as when
                // the check below declines.
                Ok(()) | Err(Error::Truncated { .. }) => {}
                Err(error) => return Err(error),
            }
        }
        let mut writer = self.writer.lock();
        // What was checked above may be stale by now: a truncation below `offset`, then appends
        // past it, can land between that check and this lock. So the point is judged here,
        // under the writer lock that every truncation holds throughout, on what makes it safe
        // rather than on how it was reached: every offset below it is synced (the durable
        // offset only moves down in a truncation, which lowers it under this lock), and it is
        // still a segment's base, so no index entry of the active segment (whose indexes a
        // sync leaves alone) lies below it. Otherwise nothing is recorded, and the pass must
        // not go on: its segments may now hold unsynced records that a crash could take back
        // after the pass dropped older, durable ones for them. (Its own truncation count does
        // not show a truncation that was under way when it was read.)
        let is_segment_base = self
            .snapshot
            .load()
            .handles()
            .binary_search_by_key(&offset, |handle| handle.base_offset())
            .is_ok();
        if writer.log_end_offset < offset
            || self.commit.durable_offset() < offset
            || !is_segment_base
        {
            return Ok(false);
        }
        // A durable offset does not make a sealed segment's indexes durable: a sync for an
        // acknowledgement syncs the active `.log` only, so a roll just after it leaves the
        // durable offset at the new base while the segment it sealed waits, indexes unsynced,
        // for the next sync. Recovery trusts index entries below a recorded point, and a crash
        // that kept an index's later entries but not an earlier one would leave a zero entry
        // no check catches (tests/crash_matrix_concurrent.rs, seed 4924). So they are synced
        // here, under the writer lock that every roll and truncation takes.
        for segment in writer
            .unsynced_sealed
            .iter()
            .filter(|segment| segment.base_offset() < offset)
        {
            if let Err(error) = segment.flush_sealed() {
                return Err(self.poison_after_failed_sync(
                    &format!("syncing {}", segment.log_path().display()),
                    error,
                ));
            }
        }
        writer
            .unsynced_sealed
            .retain(|segment| segment.base_offset() >= offset);
        // The point held in memory never exceeds the durable offset, nor lies above a sealed
        // segment whose indexes are unsynced (the flusher checks that too).
        let recovery_point = writer.recovery_point.max(offset);
        let log_start = self.log_start.load(Ordering::Acquire);
        self.write_checkpoint_durably(&mut writer, recovery_point, log_start)?;
        writer.recovery_point = recovery_point;
        Ok(true)
    }

    /// Writes a checkpoint slot with `recovery_point` and `log_start` and syncs it. A failed
    /// sync poisons the log (ARCHITECTURE.md §8, "Failed fsyncs"): the kernel may have dropped
    /// the slot's pages, so what the file holds is unknown until a reopen reads it. A failed
    /// write is only returned: the synced slot is never the one written.
    fn write_checkpoint_durably(
        &self,
        writer: &mut Writer,
        recovery_point: i64,
        log_start: i64,
    ) -> Result<()> {
        let Some(checkpoint) = writer.checkpoint.as_mut() else {
            return Ok(());
        };
        match checkpoint.write_durable(recovery_point, log_start) {
            Ok(_) => Ok(()),
            Err(DurableWriteError::Write(error)) => Err(error),
            Err(DurableWriteError::Sync(error)) => Err(self.poison_after_failed_sync(
                &format!("syncing {}", checkpoint.path().display()),
                error,
            )),
        }
    }

    /// Poisons the log after a failed fsync (`what` says which), and returns its error.
    fn poison_after_failed_sync(&self, what: &str, error: Error) -> Error {
        log::error!("poisoning {}: {what} failed: {error}", self.dir.display());
        self.commit.poison();
        self.log_end.wake_all();
        error
    }

    fn close_writable(&self) -> Result<()> {
        if self.commit.is_poisoned() {
            return Err(Error::Poisoned);
        }
        let end = self.log_end.get();
        if end > self.commit.durable_offset() {
            match self.sync_through(end - 1) {
                Ok(()) | Err(Error::Truncated { .. }) => {}
                Err(error) => return Err(error),
            }
        }
        let mut writer = self.writer.lock();
        // Segments sealed with nothing appended after them (so no sync above covered them)
        // must be on disk before the clean-shutdown record says everything is.
        for segment in std::mem::take(&mut writer.unsynced_sealed) {
            segment.flush_sealed()?;
        }
        let active = Arc::clone(&writer.active);
        // The final time-index entry, then data and indexes to disk.
        active.seal()?;
        active.flush()?;
        if std::mem::take(&mut writer.dir_dirty) {
            self.storage.sync_dir(&self.dir)?;
        }
        self.reap_deleted(&mut writer, true);
        let log_start = self.log_start.load(Ordering::Acquire);
        let clean = CleanShutdown {
            active_segment_base: active.base_offset(),
            active_segment_size: active.size(),
            log_end_offset: writer.log_end_offset,
        };
        let log_end_offset = writer.log_end_offset;
        if let Some(checkpoint) = writer.checkpoint.as_mut() {
            checkpoint.write(log_end_offset, log_start, Some(clean), true)?;
        }
        Ok(())
    }
}

/// The flusher thread: roll fsyncs off the append path, interval flushes, recovery-point
/// checkpoints, and removal of unpinned `.deleted` files (DESIGN §3a).
fn flusher_loop(shared: &Shared) {
    let tick = flusher_tick(&shared.config);
    let mut last_flush_ms = shared.clock.now_ms();
    let mut last_checkpoint_ms = last_flush_ms;
    loop {
        let sync_due = {
            let mut signal = shared.flusher.lock();
            if !signal.stop && !signal.roll_pending && !signal.sync_requested {
                shared.flusher_wake.wait_for(&mut signal, tick);
            }
            if signal.stop {
                return;
            }
            let sync_requested = std::mem::take(&mut signal.sync_requested);
            std::mem::take(&mut signal.roll_pending) || sync_requested
        };
        if shared.commit.is_poisoned() {
            continue;
        }
        let now = shared.clock.now_ms();
        let end = shared.log_end.get();
        let interval_due = match shared.config.flush_policy {
            FlushPolicy::Interval(every) => {
                now.saturating_sub(last_flush_ms)
                    >= i64::try_from(every.as_millis()).unwrap_or(i64::MAX)
            }
            _ => false,
        };
        if (sync_due || interval_due) && end > shared.commit.durable_offset() {
            match shared.sync_through(end - 1) {
                // A truncation overtook the flush: nothing is left to sync.
                Ok(()) | Err(Error::Truncated { .. }) => {}
                Err(error) => {
                    log::error!(
                        "background flush of {} failed: {error}",
                        shared.dir.display()
                    );
                    continue;
                }
            }
            last_flush_ms = now;
        } else if interval_due {
            last_flush_ms = now;
        }
        if let Err(error) = shared.maybe_write_recovery_point(now, &mut last_checkpoint_ms) {
            log::warn!(
                "recovery-point checkpoint of {} failed: {error}",
                shared.dir.display()
            );
        }
        shared.reap_unpinned();
    }
}

/// How often the flusher wakes to look at the clock: often enough for the shortest interval it
/// serves, never busier than every 5 ms nor lazier than every 100 ms.
fn flusher_tick(config: &LogConfig) -> Duration {
    let mut tick = Duration::from_millis(100).min(Duration::from_millis(config.recovery_point_ms));
    if let FlushPolicy::Interval(every) = config.flush_policy {
        tick = tick.min(every);
    }
    tick.max(Duration::from_millis(5))
}

/// Takes out of `pending_deletes` the ones whose segment no reader pins (every one when
/// `force`), dropping the log's own reference to each segment.
fn take_unpinned(pending_deletes: &mut Vec<PendingDelete>, force: bool) -> Vec<PendingDelete> {
    let mut ready = Vec::new();
    let mut index = 0;
    while let Some(pending) = pending_deletes.get(index) {
        let pinned = pending
            .segment
            .as_ref()
            .is_some_and(|s| Arc::strong_count(s) > 1);
        if pinned && !force {
            index += 1;
            continue;
        }
        let mut pending = pending_deletes.swap_remove(index);
        pending.segment = None;
        ready.push(pending);
    }
    ready
}

/// Takes the lock on `partlog.lock`: exclusive for a writer (creating `dir` first), shared for
/// a reader when the file exists, none otherwise.
/// A reader that allows a live writer takes no lock: the writer holds it exclusively.
fn lock_log_dir(
    storage: &dyn Storage,
    dir: &Path,
    read_only: bool,
    allow_live_writer: bool,
) -> Result<Option<FileLock>> {
    let lock_path = dir.join(LOCK_FILE);
    if read_only && allow_live_writer {
        return Ok(None);
    }
    if read_only {
        if storage.exists(&lock_path)? {
            return Ok(Some(storage.lock(&lock_path, LockMode::Shared)?));
        }
        return Ok(None);
    }
    create_dir_durably(storage, dir)?;
    Ok(Some(storage.lock(&lock_path, LockMode::Exclusive)?))
}

/// Creates `dir` and any missing ancestors, and syncs the parent of each directory it created:
/// a new directory's name must survive a crash before anything inside it can.
fn create_dir_durably(storage: &dyn Storage, dir: &Path) -> Result<()> {
    let mut missing = Vec::new();
    let mut current = Some(dir);
    while let Some(path) = current.filter(|p| !p.as_os_str().is_empty()) {
        if storage.exists(path)? {
            break;
        }
        missing.push(path);
        current = path.parent();
    }
    if missing.is_empty() {
        return Ok(());
    }
    storage.create_dir_all(dir)?;
    for created in missing.iter().rev() {
        let parent = match created.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        storage.sync_dir(parent)?;
    }
    Ok(())
}

fn check_timestamp(config: &LogConfig, timestamp: i64, now_ms: i64) -> Result<()> {
    // Kafka lets records without a timestamp (-1) through.
    if timestamp == -1 {
        return Ok(());
    }
    if timestamp < 0 {
        return Err(Error::InvalidTimestamp {
            timestamp,
            why: "timestamps must be -1 (none) or non-negative".into(),
        });
    }
    if now_ms.saturating_sub(timestamp) > config.message_timestamp_before_max_ms {
        return Err(Error::InvalidTimestamp {
            timestamp,
            why: format!(
                "it is more than message.timestamp.before.max.ms ({}) before the log's time {now_ms}",
                config.message_timestamp_before_max_ms
            ),
        });
    }
    if timestamp.saturating_sub(now_ms) > config.message_timestamp_after_max_ms {
        return Err(Error::InvalidTimestamp {
            timestamp,
            why: format!(
                "it is more than message.timestamp.after.max.ms ({}) after the log's time {now_ms}",
                config.message_timestamp_after_max_ms
            ),
        });
    }
    Ok(())
}

fn compacted_without_key() -> Error {
    Error::InvalidArgument {
        why: "a compacted log cannot accept a record without a key".into(),
    }
}

thread_local! {
    /// The buffer this thread's last append built its batch in, kept for its next append.
    static BATCH_BUFFER: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// The largest batch buffer a thread keeps between appends: Kafka's default
/// `max.message.bytes` (1 MiB and 12 bytes) and a little room, so that batches up to the
/// default limit reuse it too, while a larger one (a raised limit) does not pin its memory in
/// every thread that made one.
const KEPT_BATCH_BUFFER_BYTES: usize = (1 << 20) + (64 << 10);

/// This thread's batch buffer (empty, with the capacity its last append left).
fn take_batch_buffer() -> Vec<u8> {
    let mut buffer = BATCH_BUFFER.take();
    buffer.clear();
    buffer
}

/// Keeps `buffer` for this thread's next append, if it is not too large.
fn give_back_batch_buffer(buffer: Vec<u8>) {
    if buffer.capacity() <= KEPT_BATCH_BUFFER_BYTES {
        BATCH_BUFFER.set(buffer);
    }
}

/// splitmix64: enough randomness for roll jitter, without a dependency.
fn next_random(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
