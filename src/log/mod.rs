//! The log: segments, offsets, durability and recovery (ARCHITECTURE.md §3 to §8).
//!
//! A [`Log`] is one partition directory. It owns the active segment and assigns offsets; it
//! serves reads from an immutable snapshot of its segments; it makes appends durable through a
//! group commit; and at open it recovers from whatever a crash left behind.
//!
//! # Owners
//!
//! What the log's threads share, `Shared` (this file), is the context every part reads (the
//! directory, the config, the storage and the clock, whether the log is read-only, the open's
//! report) and one field per owner, each a type whose fields are private to its file and whose
//! methods keep its invariants: `view` (`segments::view::ReadView`), `writer` (the writer mutex,
//! whose `Writer` is four owned parts: `tail`, `segments::tail::Tail`; `points`,
//! `durability::points::DurablePoints`; `producers`, the `ProducerStateManager`; `deletes`,
//! `files::deleted::PendingDeletes`), `durability`, `txn`, `replication`, `maintenance`,
//! `files`, `counters` and `live`. The operations that need several owners are methods of
//! `Shared` in the folder of the work they do.
//!
//! # Folders
//!
//! Layers, bottom first: observe, config, files, segments, durability, txn, replication, write,
//! maintenance, recovery, read, api.
//!
//! A folder uses only the folders before it in that order (its imports, the owners it touches,
//! the `Shared` methods it calls); this file and `open.rs` use them all, and `api/` holds every
//! other `impl Log`. Each folder's module docs say what it owns. The locks and the order they
//! are taken in are ARCHITECTURE.md §8's; each lock belongs to the owner named there.

mod api;
mod config;
mod durability;
pub(crate) use durability::gather::SyncGather;
mod files;
mod maintenance;
mod observe;
mod open;
mod read;
mod recovery;
mod replication;
mod segments;
mod txn;
mod write;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::sync::Mutex;

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::storage::Storage;

use durability::points::DurablePoints;
use durability::state::Durability;
use files::checkpoint::CleanShutdown;
use files::deleted::PendingDeletes;
use files::log_files::LogFiles;
use maintenance::state::Maintenance;
use read::live_poll::LivePoll;
use replication::state::Replication;
use segments::tail::Tail;
pub(crate) use segments::truncations::TruncationEpoch;
use segments::view::ReadView;
use txn::producer_state::ProducerStateManager;
use txn::view::TxnView;

pub use crate::segment::verified::VerifiedBatchCache;
pub use config::compaction_policy::{
    CompactionPolicy, CompactionPolicyInfo, KafkaCompaction, RecordVersion, compaction_policies,
};
pub use config::properties::{
    PROPERTIES_FILE_NAME, per_log_setting_names, read_stored_settings, write_stored_settings,
};
pub use config::{
    CleanupPolicy, CompressionType, FlushPolicy, LogConfig, LogConfigBuilder, RecoveryMode,
};
pub use durability::wait::WaitDurable;
pub use files::checkpoint;
pub(crate) use files::kafka_dir;
pub use files::producer_snapshot;
pub use maintenance::compaction::{CompactionOptions, PRODUCER_ID_EXPIRATION_MS};
pub use observe::discarded::{DiscardReason, Discarded};
pub use observe::reports::{
    CompactionSchedule, CompactionStats, DeletedSegment, RetentionReport, RetentionRule,
};
pub use observe::stats::{LogStats, RecoveryReport};
pub use observe::{LogEvent, Observer};
pub use read::committed::CommittedRecords;
pub use read::fetch_data::{FetchBatches, FetchData, Isolation, LogRecord, ReadBound, ReadOptions};
pub use read::point::RecordRead;
pub use read::records::{LogRecords, LogTail, ReadEnd};
#[cfg(feature = "stream")]
pub use read::tail_stream::LogTailStream;
pub use read::wait::WaitForData;
pub(crate) use replication::leader_epoch;
pub use txn::transactions::ProducerStateEntry;

/// The name of the lock file in a log directory.
pub(crate) const LOCK_FILE: &str = "partlog.lock";

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
    /// The batch re-sent one of its producer's last 5 batches (an idempotent producer's retry):
    /// nothing was written, and the offsets are the original's.
    pub duplicate: bool,
}

/// How long an append (or a group-commit leader reading its target) spins for the writer lock
/// before it sleeps: a few holds, each one `pwrite` of a batch (2-3 µs for a small one). With 8
/// durable writers on 2 cores, appends that slept on the lock waited 19 µs at the 75th
/// percentile and spinning ones 3 µs (ARCHITECTURE.md §6, "Spinning").
const WRITER_LOCK_SPIN: std::time::Duration = std::time::Duration::from_micros(8);

/// The writer mutex's state: one part per owner whose state appends, rolls and truncations
/// change together (ARCHITECTURE.md §8: the writer mutex, lock 1).
#[derive(Debug)]
struct Writer {
    /// The active segment, the log end, what rolls left unsynced, the roll jitter.
    tail: Tail,
    /// `partlog.checkpoint`, the recovery point, the flush policy's counts.
    points: DurablePoints,
    /// Per-producer sequences, epochs and open transactions (Kafka's `ProducerStateManager`,
    /// under the log lock as here).
    producers: ProducerStateManager,
    /// Files renamed `.deleted`, removed once no reader pins their segment.
    deletes: PendingDeletes,
}

/// Everything the log's threads share.
#[derive(Debug)]
struct Shared {
    dir: PathBuf,
    config: LogConfig,
    storage: Arc<dyn Storage>,
    clock: Arc<dyn Clock>,
    read_only: bool,
    /// The locks on the directory, the reaping lock, the cleaner checkpoint.
    files: LogFiles,
    /// The segment list, the log start and end, the truncations, the compacted flag, closed.
    view: ReadView,
    writer: Mutex<Writer>,
    /// The group commit, the flusher's signal, the bytes the last recovery point covered.
    durability: Durability,
    counters: observe::stats::Counters,
    report: RecoveryReport,
    /// The pass locks, the cleaner's memory, compaction's counters, the thread's stop.
    maintenance: Maintenance,
    /// The first unstable offset, the last `.txnindex` base, a replay's aborted transactions.
    txn: TxnView,
    /// For a read-only log that follows a writer in another process (`allow_live_writer`):
    /// when it may look at the directory next. Held for a whole poll, so that concurrent
    /// readers never poll twice.
    live: Option<LivePoll>,
    /// The leader-epoch cache, the role, the high watermark.
    replication: Replication,
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
    /// The flusher and maintenance: threads of the log's own, or tasks on its `Workers`.
    background: open::Background,
}

impl Log {
    /// Opens (creating if needed) the log in `dir` for reading and writing.
    ///
    /// Takes the exclusive lock on `partlog.lock` ([`Error::Locked`] if another user holds it),
    /// removes leftover `.deleted` files and index files that have no `.log`, and recovers: after
    /// a clean shutdown it reads only the checkpoint and the active segment's tail; after a crash
    /// it validates every batch from the recovery point on (see [`RecoveryReport`]).
    ///
    /// The per-log settings stored with the log (`partlog.properties`) fill every per-log
    /// setting `config` leaves unset; those `config` sets are applied and stored in their place
    /// (unless [`LogConfig::store_settings`] is false). See [`LogConfig`], "Per-log settings are
    /// stored with the log".
    ///
    /// Inside a Kafka log directory (`dir`'s parent holds `meta.properties`) it first takes the
    /// broker's lock on the parent's `.lock` ([`Error::Locked`] while a broker runs, before
    /// anything is created) and sets `.kafka_cleanshutdown` aside, so that a crash of this
    /// process makes the broker recover; the lock is shared by every log this process has open
    /// in that directory.
    // ARCHITECTURE.md §7, "Opening inside a Kafka log dir".
    pub fn open(dir: impl AsRef<Path>, config: LogConfig) -> Result<Log> {
        Log::open_inner(dir.as_ref(), config, false, None)
    }

    /// [`Log::open`] for a repair ([`repair_dir`](crate::repair_dir)): everything from the
    /// segment holding `rescan_from` on is validated from byte 0, and its indexes and
    /// `.txnindex` are rebuilt from the log, whatever the checkpoint says.
    pub(crate) fn open_rescanning(dir: &Path, config: LogConfig, rescan_from: i64) -> Result<Log> {
        Log::open_inner(dir, config, false, Some(rescan_from))
    }

    /// Opens the log in `dir` for reading only. It never writes, truncates or creates a file;
    /// it takes a shared lock when `partlog.lock` exists and runs unlocked otherwise.
    ///
    /// It applies the settings stored with the log (`partlog.properties`) as [`Log::open`]
    /// does, and never writes them.
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
        Log::open_inner(dir.as_ref(), config, true, None)
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
        self.shared.log_start_offset()
    }

    /// The offset the next appended record will get: one past the last record.
    pub fn log_end_offset(&self) -> i64 {
        self.shared.log_end_offset()
    }

    /// The durable watermark: every offset below it has been fsynced (with its directory
    /// entry) and survives a crash of the machine. For a read-only log, it is the recovery
    /// point recorded in `partlog.checkpoint` (the whole log after a clean shutdown).
    pub fn durable_offset(&self) -> i64 {
        self.shared.durable_offset()
    }

    /// What the last open found and did.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.shared.report
    }

    /// Makes everything appended so far durable, then writes the clean-shutdown checkpoint so
    /// that the next open scans nothing. Later calls fail with [`Error::Closed`]. A poisoned log
    /// writes no clean-shutdown fields and returns [`Error::Poisoned`]: the next open recovers.
    ///
    /// Close releases the directory lock and closes every sealed segment's files; a reader that
    /// still holds records from one keeps its descriptors until it drops them. The active
    /// segment's files and the checkpoint stay open until the `Log` is dropped.
    ///
    /// In a Kafka log directory, when the last log this process has open there closes, and none
    /// of them was poisoned or failed to close, `.kafka_cleanshutdown` goes back where it was;
    /// then the broker's lock is released.
    pub fn close(&self) -> Result<()> {
        if self.shared.view.close() {
            return Ok(());
        }
        // A retention pass may still sync through the group commit: the flusher stops after it.
        self.background.stop_maintenance(&self.shared);
        self.background.stop_flusher(&self.shared);
        self.shared.view.log_end_mark().wake_all();
        // Tails waiting for durability: what close syncs wakes only those below the end.
        self.shared.durability.durable_mark().wake_all();
        let result = if self.shared.read_only {
            Ok(())
        } else {
            self.shared.close_writable()
        };
        if result.is_err() {
            // Its final fsyncs may have failed: nothing more may be reported durable, and the
            // stats say why the clean-shutdown record is missing.
            self.shared.durability.poison();
        }
        // Released even after a failed close: the next open recovers whatever state is left.
        self.shared.files.release_dir_lock();
        // Reads have ended: a log kept after its close holds no sealed segment's descriptors.
        self.shared.view.segments().close_sealed();
        // Last: the broker may start once the Kafka log directory is handed back.
        match self.shared.files.leave_kafka_dir(result.is_ok()) {
            Some(Err(leave_error)) if result.is_ok() => Err(leave_error),
            Some(Err(leave_error)) => {
                log::warn!("{}: {leave_error}", self.shared.dir.display());
                result
            }
            _ => result,
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

impl Shared {
    /// Whether appends would fail now: [`Error::Closed`], [`Error::Unsupported`] for a log
    /// opened read-only, or [`Error::Poisoned`].
    fn check_writable(&self) -> Result<()> {
        if self.view.is_closed() {
            return Err(Error::Closed);
        }
        if self.read_only {
            return Err(Error::Unsupported {
                what: "writing to a log opened read-only".into(),
            });
        }
        if self.durability.is_poisoned() {
            return Err(Error::Poisoned);
        }
        Ok(())
    }

    /// [`Error::Closed`] once `close()` has begun.
    fn check_open(&self) -> Result<()> {
        if self.view.is_closed() {
            return Err(Error::Closed);
        }
        Ok(())
    }

    fn close_writable(&self) -> Result<()> {
        if self.durability.is_poisoned() {
            return Err(Error::Poisoned);
        }
        let end = self.view.log_end();
        if end > self.durability.durable_offset() {
            match self.sync_through(end - 1) {
                Ok(()) | Err(Error::Truncated { .. }) => {}
                Err(error) => return Err(error),
            }
        }
        let mut writer = self.writer.lock();
        if writer.points.clean_shutdown_standing() {
            // Nothing changed since a clean open (every change consumes the record first): the
            // record that open trusted still describes every file, and all it covers is on
            // disk. Writing it again would only cost the syncs of a close with nothing to make
            // durable.
            self.reap_deleted(&mut writer, true);
            return Ok(());
        }
        // Segments sealed with nothing appended after them (so no sync above covered them)
        // must be on disk before the clean-shutdown record says everything is.
        for segment in writer.tail.take_unsynced_sealed() {
            segment.flush_sealed()?;
        }
        let active = Arc::clone(writer.tail.active());
        // The final time-index entry, then data and indexes to disk.
        active.seal()?;
        active.flush()?;
        for snapshot in writer.tail.take_unsynced_snapshots() {
            snapshot.sync(&*self.storage)?;
            writer.tail.mark_dir_dirty();
        }
        if writer.tail.take_dir_dirty() {
            self.storage.sync_dir(&self.dir)?;
        }
        self.reap_deleted(&mut writer, true);
        // The snapshot at the log end, durable before the clean-shutdown record: the next open
        // loads it and replays nothing.
        self.take_producer_snapshot(&mut writer)?;
        let log_start = self.view.log_start();
        let clean = CleanShutdown {
            active_segment_base: active.base_offset(),
            active_segment_size: active.size(),
            log_end_offset: writer.tail.log_end_offset(),
        };
        let log_end_offset = writer.tail.log_end_offset();
        writer
            .points
            .write(log_end_offset, log_start, Some(clean), true)?;
        Ok(())
    }
}
