//! Log compaction (`cleanup.policy` compact): for every key, only the record with the highest
//! offset stays (DESIGN §3.8; kafka-storage.md §1.8 and §5).
//!
//! # Scheduling
//!
//! The *cleanable range* runs from the first sealed segment up to the first of: the active
//! segment (never cleaned), a dirty segment whose largest timestamp is younger than
//! `min.compaction.lag.ms` when that is above 0 (Kafka's rule: with 0, a timestamp in the future
//! holds nothing back), and the first segment that holds transactional data (below). Within
//! it, segments wholly below the *first dirty offset* are clean (earlier passes compared every
//! record there with every later one), the rest are dirty. A pass is due
//! ([`Log::compaction_schedule`]) when the dirty bytes are at least `min.cleanable.dirty.ratio`
//! of the cleanable bytes, or when the first batch of a dirty segment is older than
//! `max.compaction.lag.ms` (Kafka's KIP-354), and there are dirty bytes. Time comes from the
//! log's clock. The maintenance thread (`retention.check.interval.ms`) runs a pass when one is
//! due; [`Log::compact`] runs one whenever it is called.
//!
//! The first dirty offset survives a reopen in `partlog.cleaner-checkpoint` (FORMAT.md), written
//! atomically (temporary file, fsync, rename, directory fsync) after each pass that moves it. A
//! truncation below it lowers it first, durably; a file that names an offset above the log end
//! is ignored. A lost or stale-low value costs a pass, never a record.
//!
//! # A pass
//!
//! 1. **Map.** Walk the cleanable range, recording for every key at or above the first dirty
//!    offset the highest offset it has. The map holds at most
//!    [`CompactionOptions::max_map_keys`] keys; when it fills, the mapped range ends at the first
//!    record it could not take, and the pass cleans only that far (a record above the mapped
//!    range is always kept), so that the next pass continues from there. A segment mapped whole
//!    takes the mapped range to the next segment's base, across any offset gap between them, so
//!    that the first dirty offset never lies inside a gap.
//! 2. **Group.** The segments of the mapped range are grouped as Kafka's `groupSegmentsBySize`
//!    does: consecutive segments join a group while the group's `.log` bytes stay within
//!    `segment.bytes`, its `.index` and `.timeindex` bytes each within `segment.index.bytes`,
//!    and its offsets within the i32 range of relative offsets. Each group becomes one segment
//!    at the first one's base, so a superseded segment leaves no empty file behind.
//! 3. **Rewrite.** Each group is copied, batch by batch, into `<base>.log.cleaned`. A batch
//!    whose records all stay is copied byte for byte; one that loses records is rebuilt at its
//!    own base offset, keeping its last offset, producer fields, transactional flag, timestamp
//!    type, codec and leader epoch, with each kept record at its own offset (gaps remain); a
//!    batch that loses all its records goes, except the group's last batch, which stays as an
//!    empty header, so that the cleaned segment ends where the group ended (Kafka keeps the
//!    last batch of a round for the same reason). A group of one segment is written only from
//!    its first change on (the unchanged batches before it are copied then), and not at all
//!    when nothing in it changes: the clean segments a pass walks cost reads, not writes. A
//!    batch none of whose records is the latest of its key (no key's latest offset lies in its
//!    offset range, and all its records were mapped) goes on its header alone, undecompressed.
//!
//! # Crash safety
//!
//! As Kafka's cleaner: the `.cleaned` file is fsynced; then, under the writer mutex (so that no
//! truncation or retention deletes a segment of the group meanwhile), it is renamed `.swap`, the
//! directory is fsynced, and under the snapshot write lock every old segment's files are
//! renamed `.deleted` and the `.swap` becomes the `.log`, followed by a directory fsync. The
//! new `.log` takes the mtime of the group's last `.log` (time retention's append time). Open
//! ([`complete_swaps`]) deletes a leftover `.cleaned` and completes a leftover `.swap`: it
//! deletes every segment whose base lies in `[swap base, swap's next offset)` (Kafka's rule),
//! which is the whole group because the cleaned segment ends with the group's last batch. A
//! crash therefore leaves each group either wholly old or wholly new. Readers on an old segment
//! keep its descriptor and finish on it: the old handles leave the snapshot and are never
//! reopened by path.
//!
//! # What stays
//!
//! Tombstones: the pass that first recopies a tombstone writes `now + delete.retention.ms`
//! into its batch as the delete horizon (attribute bit 6); a pass at or after that horizon
//! drops the tombstone.
//!
//! Batches in the legacy formats (magic 0 and 1) or in a codec partlog does not write (gzip,
//! snappy) are copied whole, and their keys are not mapped: the pass then keeps more than Kafka
//! would, never less.
//!
//! The last batch of each producer id in the cleaned range stays as an empty header when all its
//! records go (Kafka's RETAIN_EMPTY), until its max timestamp is older than
//! [`PRODUCER_ID_EXPIRATION_MS`] (`producer.id.expiration.ms`'s default, one day).
//!
//! # Transactions
//!
//! Until transactions are supported, the cleanable range ends at the base of the first segment
//! that holds a transactional or control batch, or has a `.txnindex`. The bytes from there on
//! are reported once as uncleanable ([`LogStats::compaction_uncleanable_bytes`], and one log
//! line), and that segment is not read again while it stays in the log.
//!
//! # Failures
//!
//! A pass that fails (an I/O error) is counted in [`LogStats::compaction_failed_passes`]; what
//! it left is undone by the next pass or the next open, and the maintenance thread retries at
//! its next interval.
//!
//! [`LogStats::compaction_uncleanable_bytes`]: crate::LogStats::compaction_uncleanable_bytes
//! [`LogStats::compaction_failed_passes`]: crate::LogStats::compaction_failed_passes

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::format::{
    AnyBatchIter, Batch, BatchBuilder, BatchHeader, BatchView, Compression, MIN_BATCH_LENGTH,
    TimestampType, crc32c,
};
use crate::segment::{BatchWalker, Step};
use crate::segment::{
    CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX, Segment, SegmentFileKind, TransientSuffix,
    parse_segment_file_name, rename_segment_files, segment_file_name, segment_file_path,
};
use crate::storage::{OpenMode, Storage};

use super::checkpoint::DurableWriteError;
use super::snapshot::SegmentHandle;
use super::truncate::PendingDelete;
use super::{Log, Shared};

/// How many bytes of a segment one read brings in while a pass walks it.
const READ_CHUNK_BYTES: usize = 1 << 20;

/// The file that keeps the cleaner's first dirty offset across opens (FORMAT.md). No rule of
/// Kafka's loader matches the name.
pub const CLEANER_CHECKPOINT_FILE_NAME: &str = "partlog.cleaner-checkpoint";

/// The temporary name a new cleaner checkpoint is written under before its rename.
const CLEANER_CHECKPOINT_TEMP_NAME: &str = "partlog.cleaner-checkpoint.tmp";

const CLEANER_CHECKPOINT_MAGIC: [u8; 4] = *b"PLCC";
const CLEANER_CHECKPOINT_VERSION: u16 = 1;
/// magic, version, flags, first dirty offset, CRC-32C of the 16 bytes before it.
const CLEANER_CHECKPOINT_SIZE: usize = 20;

/// Settings of one compaction pass that are not topic configs, and overrides of those that are.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionOptions {
    /// The most keys the pass's key map holds (Kafka bounds it by
    /// `log.cleaner.dedupe.buffer.size`). Each key costs its length plus about 40 bytes. When
    /// the map fills, the pass cleans only the range it mapped. Default: 1,000,000.
    pub max_map_keys: usize,
    /// Replaces `delete.retention.ms` for this pass (the delete horizon it writes into the
    /// tombstones it recopies). Default: `None`, the log's config.
    pub delete_retention_ms: Option<i64>,
    /// Replaces `min.compaction.lag.ms` for this pass. Default: `None`, the log's config.
    pub min_compaction_lag_ms: Option<i64>,
}

impl Default for CompactionOptions {
    fn default() -> Self {
        CompactionOptions {
            max_map_keys: 1_000_000,
            delete_retention_ms: None,
            min_compaction_lag_ms: None,
        }
    }
}

impl CompactionOptions {
    /// Options with a key map of at most `max_map_keys` keys (at least one).
    pub fn with_max_map_keys(max_map_keys: usize) -> CompactionOptions {
        CompactionOptions {
            max_map_keys: max_map_keys.max(1),
            ..CompactionOptions::default()
        }
    }

    /// These options with `delete.retention.ms` replaced by `delete_retention_ms` (at least 0)
    /// for the pass.
    pub fn delete_retention_ms(mut self, delete_retention_ms: i64) -> CompactionOptions {
        self.delete_retention_ms = Some(delete_retention_ms.max(0));
        self
    }

    /// These options with `min.compaction.lag.ms` replaced by `min_compaction_lag_ms` (at least
    /// 0) for the pass.
    pub fn min_compaction_lag_ms(mut self, min_compaction_lag_ms: i64) -> CompactionOptions {
        self.min_compaction_lag_ms = Some(min_compaction_lag_ms.max(0));
        self
    }
}

/// What one compaction pass did.
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactionStats {
    /// Bytes of segment data the pass read, both phases counted.
    pub bytes_read: u64,
    /// Bytes of cleaned segment data the pass wrote.
    pub bytes_written: u64,
    /// Records dropped, tombstones included.
    pub records_removed: u64,
    /// Tombstones dropped because their delete horizon had passed.
    pub tombstones_removed: u64,
    /// Old segments replaced by cleaned ones.
    pub segments_cleaned: u64,
    /// Cleaned segments swapped in: one per group, so `segments_cleaned - segments_written`
    /// segments were merged away.
    pub segments_written: u64,
    /// The end of the range the pass cleaned: every record below it was compared with the
    /// latest record of its key below it.
    pub cleaned_up_to: i64,
    /// Where the uncleanable range starts when a transactional or control batch (or a
    /// `.txnindex`) stopped the pass, until transactions are supported.
    pub uncleanable_from: Option<i64>,
    /// The bytes of the segments from [`uncleanable_from`](Self::uncleanable_from) to the log
    /// end, the active segment included.
    pub uncleanable_bytes: u64,
    /// How long the pass took.
    pub duration: Duration,
}

/// Whether a compaction pass is due, and why: see [`Log::compaction_schedule`].
///
/// ```
/// use partlog::{CleanupPolicy, Log, LogConfig, NewRecord};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = tempfile::tempdir()?;
/// // Small segments (a test-only floor) so that a few appends seal some.
/// let config = LogConfig::builder_for_tests()
///     .cleanup_policy(CleanupPolicy::COMPACT)
///     .segment_bytes(4096)
///     .build()?;
/// let log = Log::open(dir.path(), config)?;
/// for i in 0..200_i64 {
///     let key = format!("user-{}", i % 4);
///     log.append(&[NewRecord::new(1_700_000_000_000 + i, Some(key.as_bytes()), Some(b"state"))])?;
/// }
/// let schedule = log.compaction_schedule()?;
/// // Nothing was ever compacted: every sealed segment is dirty.
/// assert_eq!(schedule.clean_bytes, 0);
/// assert!(schedule.dirty_bytes > 0 && schedule.due);
/// log.compact()?;
/// assert!(!log.compaction_due()?); // what the pass cleaned is clean now
/// # Ok(())
/// # }
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CompactionSchedule {
    /// Every record below it has been compared with every later record below it by earlier
    /// passes (Kafka's cleaner checkpoint).
    pub first_dirty_offset: i64,
    /// The end of the cleanable range: the active segment's base, or the base of the first
    /// dirty segment younger than `min.compaction.lag.ms` (when above 0), or of the first segment holding
    /// transactional data, whichever is lowest.
    pub first_uncleanable_offset: i64,
    /// Bytes of the cleanable segments wholly below the first dirty offset.
    pub clean_bytes: u64,
    /// Bytes of the other cleanable segments.
    pub dirty_bytes: u64,
    /// `dirty_bytes / (clean_bytes + dirty_bytes)`, 0 when both are 0.
    pub dirty_ratio: f64,
    /// The first batch of a dirty segment is older than `max.compaction.lag.ms`.
    pub max_lag_exceeded: bool,
    /// A pass is due: there are dirty bytes, and the ratio reaches
    /// `min.cleanable.dirty.ratio` or the max lag is exceeded.
    pub due: bool,
}

/// What the cleaner remembers between passes. Held by a pass for its whole run.
#[derive(Debug, Default)]
pub(crate) struct CleanerState {
    /// Every record below it has been compared with every later record below it (Kafka's
    /// cleaner checkpoint): a pass maps only from here on.
    first_dirty_offset: i64,
    /// The log's truncation count when `first_dirty_offset` was last valid.
    truncations_seen: u64,
    /// The first segment found to hold transactional data: the cleanable range ends before it,
    /// and it is not read again while it stays in the log.
    uncleanable: Option<Arc<SegmentHandle>>,
}

/// Compaction's counters and its persisted checkpoint, readable without waiting for a pass.
#[derive(Debug, Default)]
pub(crate) struct CompactionStatus {
    passes: AtomicU64,
    failed_passes: AtomicU64,
    /// Where transactional data stops compaction, and the bytes from there on.
    uncleanable: Mutex<Option<(i64, u64)>>,
    /// The first dirty offset in `partlog.cleaner-checkpoint` (`None`: no valid file). Taken
    /// after the writer mutex by a truncation, and alone by a pass that persists.
    persisted_first_dirty: Mutex<Option<i64>>,
}

/// What [`Log::stats`] reports of compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CompactionCounters {
    pub passes: u64,
    pub failed_passes: u64,
    pub uncleanable_from: Option<i64>,
    pub uncleanable_bytes: u64,
}

/// The key map of phase 1: for each key, the highest offset it has in the mapped range.
struct KeyMap {
    latest: HashMap<Vec<u8>, i64>,
    capacity: usize,
    /// The end of the mapped range: every record below it is in the map.
    mapped_end: i64,
    full: bool,
    /// The mapped range holds batches copied whole (legacy, gzip, snappy), whose keys the map
    /// lacks: no tombstone may go in this pass.
    holds_unmapped_records: bool,
    /// For each producer id, the last offset of its last batch in the mapped range: that batch
    /// survives as an empty header when all its records go (Kafka's RETAIN_EMPTY).
    producer_last_offset: HashMap<i64, i64>,
    /// The records from here on were mapped (those below were not: they were clean).
    first_dirty: i64,
    /// Every key's latest offset, sorted, once phase 1 is done; `None` when some lies at or
    /// above `mapped_end` (a segment the pass stopped at part-way), where the shortcut of
    /// [`superseded_batch`](KeyMap::superseded_batch) does not hold.
    latest_sorted: Option<Vec<i64>>,
}

/// One sealed segment of the cleanable range.
#[derive(Debug, Clone)]
struct Planned {
    handle: Arc<SegmentHandle>,
    /// The next segment's base.
    end_offset: i64,
    bytes: u64,
}

/// The cleanable range as [`Shared::plan`] found it.
#[derive(Debug, Default)]
struct Plan {
    segments: Vec<Planned>,
    schedule: CompactionSchedule,
    /// The known transactional segment that ends the range, if it does.
    uncleanable_from: Option<i64>,
}

/// What rewriting one group came to.
enum GroupOutcome {
    /// Nothing changed: no new segment.
    Unchanged,
    /// A cleaned copy of this many bytes waits as `.cleaned`.
    Written(u64),
    /// A segment of the group left the log meanwhile (truncation or retention).
    Gone,
}

impl Log {
    /// Runs one compaction pass with the default [`CompactionOptions`]: see
    /// [`compact_with`](Self::compact_with).
    pub fn compact(&self) -> Result<CompactionStats> {
        self.compact_with(CompactionOptions::default())
    }

    /// Runs one compaction pass over the cleanable range (the module docs of `compaction` and
    /// [`compaction_schedule`](Self::compaction_schedule) define it; the active segment is never
    /// cleaned), whether or not one is due: for every key only the record with the highest
    /// offset stays, and offsets never change (gaps remain). A batch keeps its base and last
    /// offset, producer fields, transactional flag, timestamp type and codec; the last batch
    /// of a producer id whose records all go stays as an empty header for
    /// `producer.id.expiration.ms` (one day, Kafka's RETAIN_EMPTY). Consecutive segments are
    /// merged into one while the result stays within `segment.bytes`, `segment.index.bytes`
    /// and the i32 range of relative offsets.
    ///
    /// Tombstones: the pass that first recopies one writes its delete horizon
    /// (now + `delete.retention.ms`) into the batch; a pass at or after the horizon drops it.
    ///
    /// Crash safety: each group's cleaned copy is written as `<base>.log.cleaned`, fsynced,
    /// renamed `.swap`, and swapped in (old files renamed `.deleted`, `.swap` renamed `.log`)
    /// with a directory fsync after each step; [`Log::open`] completes or discards what a
    /// crash left, so each group is wholly old or wholly new. A reader on an old segment
    /// finishes on it.
    ///
    /// Until transactions are supported, the pass stops at the first segment that holds a
    /// transactional or control batch, or has a `.txnindex`, and reports that offset in
    /// [`CompactionStats::uncleanable_from`].
    ///
    /// Blocks on the reads, writes and fsyncs of the pass. Appends wait only while a cleaned
    /// segment is swapped in (a few renames and two directory fsyncs); readers wait only for
    /// the renames, never for an fsync. Fails with [`Error::InvalidArgument`] unless
    /// `cleanup.policy` includes compact. A pass that fails otherwise is counted in
    /// [`LogStats::compaction_failed_passes`](crate::LogStats::compaction_failed_passes). If
    /// the swap of a group fails half-way, the log poisons itself, and reopening it completes
    /// the swap.
    pub fn compact_with(&self, options: CompactionOptions) -> Result<CompactionStats> {
        self.check_writable()?;
        self.shared.compact_with(options)
    }

    /// Whether a compaction pass is due, and the figures that decide it: the clean and dirty
    /// bytes of the cleanable range, their ratio against `min.cleanable.dirty.ratio`, and
    /// whether `max.compaction.lag.ms` forces a pass. Time is the log's clock. Never due unless
    /// `cleanup.policy` includes compact. Waits for a pass that is running.
    ///
    /// Opens the dirty segments of the cleanable range (an O(1) check each) to read their
    /// timestamps; reads nothing else.
    pub fn compaction_schedule(&self) -> Result<CompactionSchedule> {
        if self.shared.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        self.shared.compaction_schedule()
    }

    /// Whether a compaction pass is due: [`compaction_schedule`](Self::compaction_schedule)'s
    /// verdict.
    pub fn compaction_due(&self) -> Result<bool> {
        Ok(self.compaction_schedule()?.due)
    }
}

impl Shared {
    pub(super) fn compaction_counters(&self) -> CompactionCounters {
        let status = &self.compaction_status;
        let uncleanable = *status.uncleanable.lock();
        CompactionCounters {
            passes: status.passes.load(Ordering::Relaxed),
            failed_passes: status.failed_passes.load(Ordering::Relaxed),
            uncleanable_from: uncleanable.map(|(from, _)| from),
            uncleanable_bytes: uncleanable.map_or(0, |(_, bytes)| bytes),
        }
    }

    pub(super) fn compaction_schedule(&self) -> Result<CompactionSchedule> {
        if !self.config.cleanup_policy.compact {
            return Ok(CompactionSchedule::default());
        }
        let mut cleaner = self.compaction.lock();
        self.note_truncations(&mut cleaner);
        let now_ms = self.clock.now_ms();
        let plan = self.plan(&cleaner, now_ms, self.config.min_compaction_lag_ms, true)?;
        Ok(plan.schedule)
    }

    /// Runs a pass if one is due (the maintenance thread's step). Failures are logged and
    /// counted; the next interval retries.
    pub(super) fn compact_if_due(&self) -> Result<()> {
        match self.compaction_schedule() {
            Ok(schedule) if schedule.due => {}
            Ok(_) => return Ok(()),
            Err(error) => {
                self.compaction_status
                    .failed_passes
                    .fetch_add(1, Ordering::Relaxed);
                return Err(error);
            }
        }
        self.compact_with(CompactionOptions::default()).map(|_| ())
    }

    /// A truncation since the last pass reused offsets: what was clean is dirty again.
    fn note_truncations(&self, cleaner: &mut CleanerState) {
        let truncations = self.truncations.load(Ordering::Acquire);
        if cleaner.truncations_seen != truncations {
            cleaner.first_dirty_offset = 0;
            cleaner.uncleanable = None;
            cleaner.truncations_seen = truncations;
        }
    }

    /// One pass, reported to the observer whether it ran or failed.
    fn compact_with(&self, options: CompactionOptions) -> Result<CompactionStats> {
        let result = self.compact_counted(options);
        super::observer::notify(
            self.config.observer.as_ref(),
            super::LogEvent::Compaction {
                result: result.as_ref(),
            },
        );
        result
    }

    fn compact_counted(&self, options: CompactionOptions) -> Result<CompactionStats> {
        if !self.config.cleanup_policy.compact {
            return Err(Error::InvalidArgument {
                why: "compaction needs cleanup.policy compact".into(),
            });
        }
        let mut cleaner = self.compaction.lock();
        match self.compact_locked(&mut cleaner, options) {
            Ok(stats) => {
                self.compaction_status
                    .passes
                    .fetch_add(1, Ordering::Relaxed);
                Ok(stats)
            }
            Err(error) => {
                self.compaction_status
                    .failed_passes
                    .fetch_add(1, Ordering::Relaxed);
                log::warn!(
                    "{}: compaction pass failed (the next pass retries): {error}",
                    self.dir.display()
                );
                Err(error)
            }
        }
    }

    /// The cleanable range at `now_ms`: the sealed segments up to the first uncleanable one,
    /// with the schedule's figures. `check_max_lag` reads the first batch of dirty segments
    /// (only the schedule needs it).
    fn plan(
        &self,
        cleaner: &CleanerState,
        now_ms: i64,
        min_lag_ms: i64,
        check_max_lag: bool,
    ) -> Result<Plan> {
        let first_dirty = cleaner.first_dirty_offset;
        let list = self.snapshot.load();
        let handles = list.handles();
        let mut plan = Plan::default();
        plan.schedule.first_dirty_offset = first_dirty;
        let Some((active, sealed)) = handles.split_last() else {
            return Ok(plan);
        };
        plan.schedule.first_uncleanable_offset = active.base_offset();
        let max_lag_ms = self.config.max_compaction_lag_ms;
        let check_max_lag = check_max_lag && max_lag_ms < i64::MAX;
        let mut buf = Vec::new();
        for (index, handle) in sealed.iter().enumerate() {
            let end_offset = handles
                .get(index + 1)
                .map_or(i64::MAX, |next| next.base_offset());
            if cleaner
                .uncleanable
                .as_ref()
                .is_some_and(|known| Arc::ptr_eq(known, handle))
            {
                plan.uncleanable_from = Some(handle.base_offset());
                plan.schedule.first_uncleanable_offset = handle.base_offset();
                break;
            }
            let bytes = self.segment_log_bytes(handle)?;
            if end_offset > first_dirty {
                let Some(segment) = self.snapshot.pin(handle)? else {
                    // A truncation or retention changed the list: plan up to here.
                    plan.schedule.first_uncleanable_offset = handle.base_offset();
                    break;
                };
                // Kafka's cleanableOffsets applies the lag only when it is above 0: with a lag
                // of 0 a timestamp in the future (which `message.timestamp.after.max.ms`
                // admits) would otherwise hold this segment and every later one back.
                if min_lag_ms > 0
                    && let Some(max) = segment.max_timestamp()
                    && now_ms.saturating_sub(max.timestamp) < min_lag_ms
                {
                    plan.schedule.first_uncleanable_offset = handle.base_offset();
                    break;
                }
                if check_max_lag
                    && !plan.schedule.max_lag_exceeded
                    && let Some(first) = first_batch_timestamp(&segment, &mut buf)?
                {
                    plan.schedule.max_lag_exceeded = now_ms.saturating_sub(first) > max_lag_ms;
                }
                plan.schedule.dirty_bytes += bytes;
            } else {
                plan.schedule.clean_bytes += bytes;
            }
            plan.segments.push(Planned {
                handle: Arc::clone(handle),
                end_offset,
                bytes,
            });
        }
        let schedule = &mut plan.schedule;
        let total = schedule.clean_bytes + schedule.dirty_bytes;
        schedule.dirty_ratio = if total == 0 {
            0.0
        } else {
            schedule.dirty_bytes as f64 / total as f64
        };
        schedule.due = schedule.dirty_bytes > 0
            && (schedule.dirty_ratio >= self.config.min_cleanable_dirty_ratio
                || schedule.max_lag_exceeded);
        Ok(plan)
    }

    /// The bytes of a segment's index file of `kind`, 0 when it has none yet.
    fn index_bytes(&self, base_offset: i64, kind: SegmentFileKind) -> Result<u64> {
        let path = segment_file_path(&self.dir, base_offset, kind);
        match self.storage.metadata(&path) {
            Ok(metadata) => Ok(metadata.len),
            Err(error) if error.io_kind() == Some(std::io::ErrorKind::NotFound) => Ok(0),
            Err(error) => Err(error),
        }
    }

    fn compact_locked(
        &self,
        cleaner: &mut CleanerState,
        options: CompactionOptions,
    ) -> Result<CompactionStats> {
        let started = Instant::now();
        let now_ms = self.clock.now_ms();
        let mut stats = CompactionStats::default();
        self.note_truncations(cleaner);
        let truncations_at_start = cleaner.truncations_seen;
        let first_dirty = cleaner.first_dirty_offset;
        let min_lag_ms = options
            .min_compaction_lag_ms
            .unwrap_or(self.config.min_compaction_lag_ms);
        let delete_retention_ms = options
            .delete_retention_ms
            .unwrap_or(self.config.delete_retention_ms);
        let plan = self.plan(cleaner, now_ms, min_lag_ms, false)?;
        stats.uncleanable_from = plan.uncleanable_from;
        // Clean only what is durable and below a recorded recovery point: a pass then never
        // drops a durable record for a later one that a crash could still lose, and recovery
        // can tell the gaps it leaves (below the point) from a lost tail (above). A truncation
        // that overtook the plan leaves nothing to clean until the next pass plans again.
        if !plan.segments.is_empty()
            && !self.record_recovery_point_through(plan.schedule.first_uncleanable_offset)?
        {
            stats.duration = started.elapsed();
            return Ok(stats);
        }

        let mut map = KeyMap {
            latest: HashMap::new(),
            capacity: options.max_map_keys.max(1),
            mapped_end: plan.segments.first().map_or(0, |p| p.handle.base_offset()),
            full: false,
            holds_unmapped_records: false,
            producer_last_offset: HashMap::new(),
            first_dirty,
            latest_sorted: None,
        };
        // Phase 1: map the cleanable range.
        let mut mapped: Vec<Planned> = Vec::new();
        // Decompressed records, reused from batch to batch.
        let mut scratch = Vec::new();
        for planned in &plan.segments {
            let handle = &planned.handle;
            let Some(segment) = self.snapshot.pin(handle)? else {
                // A truncation or retention changed the list: clean what was mapped so far.
                break;
            };
            let txn_index =
                segment_file_path(&self.dir, handle.base_offset(), SegmentFileKind::TxnIndex);
            let mut transactional = self.storage.exists(&txn_index)?;
            let mut producer_last: Vec<(i64, i64)> = Vec::new();
            if !transactional {
                stats.bytes_read += for_each_batch(&segment, |batch| {
                    if batch.is_control() || batch.header().is_some_and(|h| h.is_transactional()) {
                        transactional = true;
                        return Ok(false);
                    }
                    let view = batch.as_v2().filter(|v| rewritable(v));
                    // Records the pass copies whole are not mapped: a tombstone must then
                    // outlive them, or an older value of its key in them would come back.
                    map.holds_unmapped_records |= view.is_none();
                    if let Some(header) = batch.header().filter(|h| h.producer_id >= 0) {
                        producer_last.push((header.producer_id, header.last_offset()));
                    }
                    if let Some(view) = view {
                        for record in view.records(&mut scratch)? {
                            let record = record?;
                            // Below the first dirty offset every record has already been
                            // compared with every later one there: only the dirty part is
                            // mapped.
                            if let Some(key) = record.key.filter(|_| record.offset >= first_dirty)
                                && !map.put(key, record.offset)
                            {
                                return Ok(false);
                            }
                        }
                    }
                    Ok(true)
                })?;
            }
            if transactional {
                stats.uncleanable_from = Some(handle.base_offset());
                log::info!(
                    "{}: compaction stops at offset {}: the segment there holds transactional \
                     data, which is not compacted yet; it is not read again while it stays",
                    self.dir.display(),
                    handle.base_offset()
                );
                cleaner.uncleanable = Some(Arc::clone(handle));
                break;
            }
            if !map.full {
                // The next segment's base, not this one's next offset: an offset gap between
                // the two (compaction leaves them) is mapped too, or the next pass would start
                // inside it and find this segment dirty again, forever (Kafka fast-forwards
                // past the gap the same way, KAFKA-8764).
                map.mapped_end = planned.end_offset;
            }
            for (producer_id, last_offset) in producer_last {
                if last_offset < map.mapped_end {
                    map.producer_last_offset.insert(producer_id, last_offset);
                }
            }
            mapped.push(planned.clone());
            if map.full {
                break;
            }
        }
        stats.cleaned_up_to = map.mapped_end;
        map.sort_latest();
        stats.uncleanable_bytes = match stats.uncleanable_from {
            Some(from) => self.bytes_from(from)?,
            None => 0,
        };
        *self.compaction_status.uncleanable.lock() = stats
            .uncleanable_from
            .map(|from| (from, stats.uncleanable_bytes));

        // Phase 2: group the mapped segments and rewrite each group.
        mapped.retain(|p| p.handle.base_offset() < map.mapped_end);
        let horizon_ms = now_ms.saturating_add(delete_retention_ms);
        let mut every_group_done = true;
        for group in self.group_by_size(&mapped)? {
            match self.clean_group(group, &map, now_ms, horizon_ms, &mut stats)? {
                GroupOutcome::Unchanged => {}
                GroupOutcome::Gone => every_group_done = false,
                GroupOutcome::Written(written) => {
                    if self.swap_in(group, truncations_at_start)? {
                        stats.bytes_written += written;
                        stats.segments_cleaned += group.len() as u64;
                        stats.segments_written += 1;
                    } else {
                        every_group_done = false;
                    }
                }
            }
        }
        if every_group_done && map.mapped_end > cleaner.first_dirty_offset {
            // The next pass maps from here on, so that a small key map still makes progress.
            cleaner.first_dirty_offset = map.mapped_end;
            self.persist_first_dirty(map.mapped_end, truncations_at_start);
        }
        stats.duration = started.elapsed();
        log::debug!("{}: compaction pass: {stats:?}", self.dir.display());
        Ok(stats)
    }

    /// The bytes of every segment whose base is at or above `from`.
    fn bytes_from(&self, from: i64) -> Result<u64> {
        let list = self.snapshot.load();
        let mut total = 0u64;
        for handle in list.handles().iter().filter(|h| h.base_offset() >= from) {
            total = total.saturating_add(self.segment_log_bytes(handle)?);
        }
        Ok(total)
    }

    /// Kafka's `groupSegmentsBySize`: consecutive segments join a group while its `.log` bytes
    /// stay within `segment.bytes`, its `.index` and `.timeindex` bytes each within
    /// `segment.index.bytes`, and its last offset within i32 of its base.
    fn group_by_size<'a>(&self, segments: &'a [Planned]) -> Result<Vec<&'a [Planned]>> {
        let max_log_bytes = u64::from(self.config.segment_bytes);
        let max_index_bytes = u64::from(self.config.segment_index_bytes);
        let mut sizes = Vec::with_capacity(segments.len());
        for planned in segments {
            let base = planned.handle.base_offset();
            sizes.push((
                planned.bytes,
                self.index_bytes(base, SegmentFileKind::OffsetIndex)?,
                self.index_bytes(base, SegmentFileKind::TimeIndex)?,
            ));
        }
        let mut groups = Vec::new();
        let mut start = 0;
        while start < segments.len() {
            let base = segments
                .get(start)
                .map_or(0, |first| first.handle.base_offset());
            let (mut log_bytes, mut index_bytes, mut time_index_bytes) =
                sizes.get(start).copied().unwrap_or_default();
            let mut end = start + 1;
            while let (Some(next), Some(&(log, index, time_index))) =
                (segments.get(end), sizes.get(end))
            {
                let last_offset = next.end_offset.saturating_sub(1);
                let fits = log_bytes + log <= max_log_bytes
                    && index_bytes + index <= max_index_bytes
                    && time_index_bytes + time_index <= max_index_bytes
                    && last_offset.saturating_sub(base) <= i64::from(i32::MAX);
                if !fits {
                    break;
                }
                log_bytes += log;
                index_bytes += index;
                time_index_bytes += time_index;
                end += 1;
            }
            if let Some(group) = segments.get(start..end) {
                groups.push(group);
            }
            start = end;
        }
        Ok(groups)
    }

    /// Writes the cleaned copy of `group` as `<first base>.log.cleaned` and fsyncs it. The
    /// rename to `.swap` waits for [`swap_in`](Self::swap_in).
    fn clean_group(
        &self,
        group: &[Planned],
        map: &KeyMap,
        now_ms: i64,
        horizon_ms: i64,
        stats: &mut CompactionStats,
    ) -> Result<GroupOutcome> {
        let Some(first) = group.first() else {
            return Ok(GroupOutcome::Unchanged);
        };
        let base = first.handle.base_offset();
        let cleaned_path = transient_log_path(&self.dir, base, CLEANED_SUFFIX);
        if self.storage.exists(&cleaned_path)? {
            // Left by an earlier pass that failed: never part of the log.
            self.storage.remove(&cleaned_path)?;
        }
        let file = self.storage.open(&cleaned_path, OpenMode::CreateNew)?;
        let mut writer = GroupWriter {
            file: &*file,
            position: 0,
            // Merging segments is a change even when every batch stays.
            changed: group.len() > 1,
            removed: 0,
            tombstones: 0,
            pending_drop: None,
            scratch: Vec::new(),
            // A lone segment is written only from its first change on (the unchanged batches
            // before it are copied then): most segments of a pass, the clean ones, never change.
            deferred_bytes: (group.len() == 1).then_some(0),
            bytes_reread: 0,
        };
        let result = (|| -> Result<Option<PathBuf>> {
            let mut last_log_path = None;
            for (index, planned) in group.iter().enumerate() {
                let Some(segment) = self.snapshot.pin(&planned.handle)? else {
                    return Ok(None);
                };
                stats.bytes_read += for_each_batch(&segment, |batch| {
                    writer.take(&segment, batch, map, now_ms, horizon_ms)?;
                    Ok(true)
                })?;
                if index + 1 == group.len() {
                    writer.finish(&segment)?;
                }
                last_log_path = Some(segment.log_path());
            }
            Ok(last_log_path)
        })();
        stats.bytes_read += writer.bytes_reread;
        let outcome = result.and_then(|last_log_path| {
            let Some(last_log_path) = last_log_path else {
                return Ok(false);
            };
            if writer.changed {
                // The `.log`'s mtime is the segment's append time for time retention: the
                // cleaned copy takes the group's last one, as Kafka's cleaner does, and the
                // fsync below makes it durable.
                let mtime_ms = self.storage.metadata(&last_log_path)?.modified_ms;
                match self.storage.set_mtime(&cleaned_path, mtime_ms) {
                    Ok(()) | Err(Error::Unsupported { .. }) => {}
                    Err(error) => return Err(error),
                }
                file.sync_all()?;
            }
            Ok(true)
        });
        let (changed, written, removed, tombstones) = (
            writer.changed,
            writer.position,
            writer.removed,
            writer.tombstones,
        );
        drop(writer);
        drop(file);
        let still_there = match outcome {
            Ok(still_there) => still_there,
            Err(error) => {
                remove_quietly(&*self.storage, &cleaned_path);
                return Err(error);
            }
        };
        if !still_there || !changed {
            self.storage.remove(&cleaned_path)?;
            return Ok(if still_there {
                GroupOutcome::Unchanged
            } else {
                GroupOutcome::Gone
            });
        }
        stats.records_removed += removed;
        stats.tombstones_removed += tombstones;
        Ok(GroupOutcome::Written(written))
    }

    /// Swaps `<base>.log.cleaned` in for the segments of `group`: renames it `.swap`, fsyncs
    /// the directory, renames every old segment's files `.deleted` and the `.swap` to `.log`,
    /// and fsyncs the directory again, all under the writer mutex. A `.swap` therefore exists
    /// only for segments that are still in the log: a truncation or retention (which take the
    /// writer mutex) can never delete a segment whose `.swap` a crash would then bring back.
    /// `false` when a segment of the group left the log meanwhile (a truncation or retention
    /// took it): the cleaned file is then removed.
    fn swap_in(&self, group: &[Planned], truncations_at_start: u64) -> Result<bool> {
        let Some(first) = group.first() else {
            return Ok(false);
        };
        let base = first.handle.base_offset();
        let dir = &self.dir;
        let cleaned_path = transient_log_path(dir, base, CLEANED_SUFFIX);
        let swap_path = transient_log_path(dir, base, SWAP_SUFFIX);
        let old_handles: Vec<Arc<SegmentHandle>> =
            group.iter().map(|p| Arc::clone(&p.handle)).collect();
        let mut writer = self.writer.lock();
        let list = self.snapshot.load();
        let still_there = list.handles().split_last().is_some_and(|(_, sealed)| {
            sealed
                .windows(old_handles.len())
                .any(|run| run.iter().zip(&old_handles).all(|(a, b)| Arc::ptr_eq(a, b)))
        });
        // A truncation may have cut (and refilled) a segment since it was read.
        if !still_there || self.truncations.load(Ordering::Acquire) != truncations_at_start {
            drop(writer);
            remove_quietly(&*self.storage, &cleaned_path);
            return Ok(false);
        }
        self.storage.rename(&cleaned_path, &swap_path)?;
        if let Err(error) = self.storage.sync_dir(dir) {
            // Whether the rename is durable is unknown: stop writing; reopening resolves it.
            self.commit.poison();
            return Err(error);
        }
        let new_handle = SegmentHandle::closed(base);
        let mut renamed: Vec<Vec<PathBuf>> = Vec::new();
        let replaced = self
            .snapshot
            .replace(&old_handles, Arc::clone(&new_handle), || {
                // Oldest first; the `.swap` last: a crash keeps a prefix of these renames,
                // and open completes the swap from any of them.
                for handle in &old_handles {
                    renamed.push(rename_segment_files(
                        &*self.storage,
                        dir,
                        handle.base_offset(),
                        DELETED_SUFFIX,
                    )?);
                }
                self.storage.rename(
                    &swap_path,
                    &segment_file_path(dir, base, SegmentFileKind::Log),
                )
            });
        let old_segments = match replaced {
            Ok(Some(old_segments)) => old_segments,
            Ok(None) => {
                // Checked above under the same writer mutex: nothing can have removed them.
                remove_quietly(&*self.storage, &swap_path);
                self.storage.sync_dir(dir)?;
                return Ok(false);
            }
            Err(error) => {
                // The files may be half swapped while the snapshot still names the old
                // segments: stop writing; reopening completes the swap.
                log::error!(
                    "{}: swapping in the compacted segment {base} failed: {error}",
                    dir.display()
                );
                self.commit.poison();
                return Err(error);
            }
        };
        for (paths, segment) in renamed.into_iter().zip(old_segments) {
            writer
                .pending_deletes
                .push(PendingDelete { paths, segment });
        }
        if let Err(error) = self.storage.sync_dir(dir) {
            self.commit.poison();
            return Err(error);
        }
        drop(writer);
        // Unlinks outside the writer lock, as retention does.
        self.reap_unpinned();
        // The new segment has only its `.log`: opening it now builds its indexes (off the
        // writer mutex), so that they are on disk for Kafka's tools and the next open. They are
        // derived data, so a failure here only costs a rebuild later.
        match self.snapshot.pin(&new_handle) {
            Ok(Some(segment)) => {
                if let Err(error) = segment.flush() {
                    // A failed fsync: the kernel may have dropped pages of the segment.
                    return Err(self.poison_after_failed_sync(
                        &format!("syncing the compacted segment {base}"),
                        error,
                    ));
                }
            }
            Ok(None) => {}
            Err(error) => log::warn!(
                "{}: indexing the compacted segment {base} failed: {error}",
                dir.display()
            ),
        }
        Ok(true)
    }

    /// Writes `first_dirty` to `partlog.cleaner-checkpoint`, unless a truncation came since the
    /// pass began. A failure costs the next open a pass, never a record: it is logged.
    fn persist_first_dirty(&self, first_dirty: i64, truncations_at_start: u64) {
        let mut persisted = self.compaction_status.persisted_first_dirty.lock();
        // Under the lock a truncation takes after counting itself: a truncation either
        // shows here or lowers what this writes.
        if self.truncations.load(Ordering::Acquire) != truncations_at_start {
            return;
        }
        match write_cleaner_checkpoint(&*self.storage, &self.dir, first_dirty) {
            Ok(()) => *persisted = Some(first_dirty),
            Err(DurableWriteError::Write(error)) => log::warn!(
                "{}: could not write {CLEANER_CHECKPOINT_FILE_NAME} (the next open compacts \
                 more): {error}",
                self.dir.display()
            ),
            // The directory's pending entries, not only this file's, may be lost.
            Err(DurableWriteError::Sync(error)) => {
                let _ = self.poison_after_failed_sync(
                    &format!("syncing {CLEANER_CHECKPOINT_FILE_NAME}"),
                    error,
                );
            }
        }
    }

    /// Called by a truncation to `new_end` under the writer mutex, before it changes anything:
    /// offsets from `new_end` on will be reused, so a persisted first dirty offset above it is
    /// lowered durably first.
    pub(super) fn lower_cleaner_checkpoint(&self, new_end: i64) -> Result<()> {
        let mut persisted = self.compaction_status.persisted_first_dirty.lock();
        if let Some(first_dirty) = *persisted
            && first_dirty > new_end
        {
            // The truncation poisons the log on any error of its own.
            write_cleaner_checkpoint(&*self.storage, &self.dir, new_end).map_err(
                |(DurableWriteError::Write(error) | DurableWriteError::Sync(error))| error,
            )?;
            *persisted = Some(new_end);
        }
        Ok(())
    }
}

/// Builds a group's cleaned file batch by batch.
struct GroupWriter<'f> {
    file: &'f dyn crate::storage::StorageFile,
    position: u64,
    changed: bool,
    removed: u64,
    tombstones: u64,
    /// The last batch seen, when it is to go: it stays as an empty header if it turns out to
    /// be the group's last batch (its header and its bytes as they were).
    pending_drop: Option<(BatchHeader, Vec<u8>)>,
    /// Decompressed records, reused from batch to batch.
    scratch: Vec<u8>,
    /// While the group (one segment) has not changed: the bytes of the unchanged batches seen so
    /// far, not written yet. They are the file's first bytes, whole batches.
    deferred_bytes: Option<u64>,
    /// Bytes read again to copy a deferred prefix.
    bytes_reread: u64,
}

impl GroupWriter<'_> {
    /// Takes the next batch of `segment`, the group's current segment.
    fn take(
        &mut self,
        segment: &Segment,
        batch: &Batch<'_>,
        map: &KeyMap,
        now_ms: i64,
        horizon_ms: i64,
    ) -> Result<()> {
        let out = match batch.as_v2().filter(|v| rewritable(v)) {
            Some(view) => {
                let (out, removed, tombstones) = if map.superseded_batch(view.header()) {
                    let count = u64::try_from(view.header().records_count).unwrap_or(0);
                    (CleanedBatch::Dropped, count, 0)
                } else {
                    clean_batch(view, map, now_ms, horizon_ms, &mut self.scratch)?
                };
                self.removed += removed;
                self.tombstones += tombstones;
                if matches!(out, CleanedBatch::Dropped) {
                    if self.pending_drop.is_some() {
                        // The batch before did not end the group: it goes for good.
                        self.change(segment)?;
                    }
                    self.pending_drop = Some((*view.header(), batch.as_bytes().to_vec()));
                    return Ok(());
                }
                out
            }
            // Legacy batches, and batches in a codec partlog does not write (gzip, snappy),
            // are copied whole.
            None => CleanedBatch::Unchanged,
        };
        if self.pending_drop.take().is_some() {
            self.change(segment)?;
        }
        match &out {
            CleanedBatch::Unchanged => self.keep(batch.as_bytes()),
            CleanedBatch::Rebuilt(bytes) => {
                self.change(segment)?;
                self.write(bytes)
            }
            CleanedBatch::Dropped => Ok(()),
        }
    }

    /// Ends the group after its last segment, `segment`: a last batch that was to go stays as
    /// an empty header, so that the cleaned segment ends at the group's last offset (open's
    /// swap completion relies on it).
    fn finish(&mut self, segment: &Segment) -> Result<()> {
        if let Some((header, original)) = self.pending_drop.take() {
            if header.records_count == 0 {
                // Already an empty header: it stays as it is.
                return self.keep(&original);
            }
            self.change(segment)?;
            return self.write(&empty_header(&header));
        }
        Ok(())
    }

    /// An unchanged batch: written, or counted while the group has not changed.
    fn keep(&mut self, bytes: &[u8]) -> Result<()> {
        match &mut self.deferred_bytes {
            Some(deferred) => {
                *deferred += bytes.len() as u64;
                Ok(())
            }
            None => self.write(bytes),
        }
    }

    /// The group changes: from here on every batch is written, after the unchanged batches
    /// deferred so far, which are copied from the start of `segment`.
    fn change(&mut self, segment: &Segment) -> Result<()> {
        self.changed = true;
        let Some(mut remaining) = self.deferred_bytes.take() else {
            return Ok(());
        };
        let mut buf = Vec::new();
        let mut offset = segment.base_offset();
        while remaining > 0 {
            let want = usize::try_from(remaining)
                .unwrap_or(usize::MAX)
                .min(READ_CHUNK_BYTES);
            let read = segment.read(offset, want, None, &mut buf)?;
            // Whole batches from position 0 on: the deferred bytes end on a batch boundary.
            let Some(read) =
                read.filter(|r| r.position == self.position && r.len as u64 <= remaining)
            else {
                return Err(Error::Corrupt {
                    file: segment.log_path(),
                    position: self.position,
                    what: crate::error::Corruption::BadHeader(
                        "the segment changed while compaction copied it",
                    ),
                });
            };
            let bytes = buf.get(..read.len).unwrap_or_default();
            self.file.write_all_at(bytes, self.position)?;
            self.position += read.len as u64;
            self.bytes_reread += read.len as u64;
            remaining -= read.len as u64;
            offset = read.next_offset;
        }
        Ok(())
    }

    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.file.write_all_at(bytes, self.position)?;
        self.position += bytes.len() as u64;
        Ok(())
    }
}

/// The max timestamp of a segment's first v2 batch (Kafka's `getFirstBatchTimestamp`), for
/// `max.compaction.lag.ms`.
fn first_batch_timestamp(segment: &Segment, buf: &mut Vec<u8>) -> Result<Option<i64>> {
    let Some(read) = segment.read(segment.base_offset(), 1, None, buf)? else {
        return Ok(None);
    };
    let mut batches = AnyBatchIter::new(buf.get(..read.len).unwrap_or_default());
    Ok(batches
        .next()
        .and_then(|(_, batch)| batch.ok())
        .and_then(|batch| batch.header().map(|h| h.max_timestamp))
        .filter(|&timestamp| timestamp >= 0))
}

/// Encodes the cleaner checkpoint (FORMAT.md): magic, version, flags, first dirty offset, and
/// the CRC-32C of those 16 bytes, all big-endian.
fn encode_cleaner_checkpoint(first_dirty: i64) -> [u8; CLEANER_CHECKPOINT_SIZE] {
    let mut bytes = [0u8; CLEANER_CHECKPOINT_SIZE];
    bytes[0..4].copy_from_slice(&CLEANER_CHECKPOINT_MAGIC);
    bytes[4..6].copy_from_slice(&CLEANER_CHECKPOINT_VERSION.to_be_bytes());
    bytes[8..16].copy_from_slice(&first_dirty.to_be_bytes());
    let crc = crc32c(&bytes[..16]);
    bytes[16..20].copy_from_slice(&crc.to_be_bytes());
    bytes
}

/// Decodes the cleaner checkpoint; `None` for anything but a valid one.
fn decode_cleaner_checkpoint(bytes: &[u8]) -> Option<i64> {
    let bytes: &[u8; CLEANER_CHECKPOINT_SIZE] = bytes.try_into().ok()?;
    let (covered, crc) = bytes.split_last_chunk::<4>()?;
    if crc32c(covered) != u32::from_be_bytes(*crc) {
        return None;
    }
    let magic = covered.get(0..4)?;
    let version = u16::from_be_bytes(covered.get(4..6)?.try_into().ok()?);
    let flags = u16::from_be_bytes(covered.get(6..8)?.try_into().ok()?);
    if magic != CLEANER_CHECKPOINT_MAGIC || version != CLEANER_CHECKPOINT_VERSION || flags != 0 {
        return None;
    }
    let first_dirty = i64::from_be_bytes(covered.get(8..16)?.try_into().ok()?);
    (first_dirty >= 0).then_some(first_dirty)
}

/// Writes the cleaner checkpoint atomically: a temporary file, fsynced, renamed over the old
/// one, and the directory fsynced.
///
/// A failed fsync is told apart ([`DurableWriteError::Sync`]): it poisons the log.
fn write_cleaner_checkpoint(
    storage: &dyn Storage,
    dir: &Path,
    first_dirty: i64,
) -> std::result::Result<(), DurableWriteError> {
    let temp = dir.join(CLEANER_CHECKPOINT_TEMP_NAME);
    let file = storage
        .open(&temp, OpenMode::Create)
        .map_err(DurableWriteError::Write)?;
    let written = file
        .set_len(0)
        .and_then(|()| file.write_all_at(&encode_cleaner_checkpoint(first_dirty), 0))
        .map_err(DurableWriteError::Write)
        .and_then(|()| file.sync_all().map_err(DurableWriteError::Sync));
    drop(file);
    if let Err(error) = written {
        remove_quietly(storage, &temp);
        return Err(error);
    }
    storage
        .rename(&temp, &dir.join(CLEANER_CHECKPOINT_FILE_NAME))
        .map_err(DurableWriteError::Write)?;
    storage.sync_dir(dir).map_err(DurableWriteError::Sync)
}

/// Reads the cleaner checkpoint at open: the first dirty offset to start from (0 when the file
/// is missing, invalid or names an offset above `log_end_offset`), and what the file holds.
pub(crate) fn load_cleaner_state(
    storage: &dyn Storage,
    dir: &Path,
    log_end_offset: i64,
    read_only: bool,
) -> (CleanerState, CompactionStatus) {
    let path = dir.join(CLEANER_CHECKPOINT_FILE_NAME);
    let read = (|| -> Result<Option<i64>> {
        if !storage.exists(&path)? {
            return Ok(None);
        }
        let file = storage.open(&path, OpenMode::Read)?;
        let mut bytes = [0u8; CLEANER_CHECKPOINT_SIZE + 1];
        let mut got = 0;
        while got < bytes.len() {
            let n = file.read_at(&mut bytes[got..], got as u64)?;
            if n == 0 {
                break;
            }
            got += n;
        }
        Ok(bytes.get(..got).and_then(decode_cleaner_checkpoint))
    })();
    let persisted = match read {
        Ok(persisted) => persisted,
        Err(error) => {
            log::warn!(
                "{}: could not read {CLEANER_CHECKPOINT_FILE_NAME}; the whole log counts as \
                 dirty: {error}",
                dir.display()
            );
            None
        }
    };
    // Above the log end, the offsets it covered were lost (a crash or a truncation at open):
    // they will be reused, so nothing of it can be trusted, now or after the log has grown
    // past it again: the file goes before the first append.
    let mut persisted = persisted;
    if let Some(stale) = persisted.filter(|&first_dirty| first_dirty > log_end_offset) {
        log::info!(
            "{}: {CLEANER_CHECKPOINT_FILE_NAME} names offset {stale}, above the log end \
             {log_end_offset}: the whole log counts as dirty",
            dir.display()
        );
        if !read_only {
            let removed = storage.remove(&path).and_then(|()| storage.sync_dir(dir));
            match removed {
                Ok(()) => persisted = None,
                Err(error) => log::warn!(
                    "{}: could not remove the stale {CLEANER_CHECKPOINT_FILE_NAME}: {error}",
                    dir.display()
                ),
            }
        }
    }
    let first_dirty_offset = persisted
        .filter(|&first_dirty| first_dirty <= log_end_offset)
        .unwrap_or(0);
    let cleaner = CleanerState {
        first_dirty_offset,
        ..CleanerState::default()
    };
    let status = CompactionStatus {
        persisted_first_dirty: Mutex::new(persisted),
        ..CompactionStatus::default()
    };
    (cleaner, status)
}

/// What cleaning did to one batch.
enum CleanedBatch {
    /// Copied byte for byte.
    Unchanged,
    /// Rebuilt with fewer records or a new delete horizon.
    Rebuilt(Vec<u8>),
    /// Every record went.
    Dropped,
}

/// Kafka's default `producer.id.expiration.ms` (1 day): an empty header kept for a producer id
/// goes once its batch's max timestamp is older than this.
pub const PRODUCER_ID_EXPIRATION_MS: i64 = 24 * 60 * 60 * 1000;

/// The empty batch Kafka's cleaner keeps for the last batch of a producer id whose records all
/// went (RETAIN_EMPTY, `DefaultRecordBatch.writeEmptyHeader`): the same base offset, last
/// offset, producer id, epoch and base sequence, leader epoch, timestamp type and transactional
/// flag, no codec, the batch's max timestamp as both timestamps, and no records, so that the
/// producer's last sequence survives for idempotent dedupe.
fn empty_header(header: &BatchHeader) -> Vec<u8> {
    /// Attribute bit 3: LogAppendTime.
    const LOG_APPEND_TIME_BIT: i16 = 1 << 3;
    /// Attribute bit 4: transactional.
    const TRANSACTIONAL_BIT: i16 = 1 << 4;
    let empty = BatchHeader {
        batch_length: MIN_BATCH_LENGTH,
        crc: 0,
        attributes: header.attributes & (LOG_APPEND_TIME_BIT | TRANSACTIONAL_BIT),
        base_timestamp: header.max_timestamp,
        records_count: 0,
        ..*header
    };
    let mut bytes = empty.encode().to_vec();
    let crc = crc32c(bytes.get(CRC_COVERED_FROM..).unwrap_or_default());
    if let Some(slot) = bytes.get_mut(CRC_AT..CRC_COVERED_FROM) {
        slot.copy_from_slice(&crc.to_be_bytes());
    }
    bytes
}

/// Where a v2 batch's CRC field sits, and where the bytes it covers start.
const CRC_AT: usize = 17;
const CRC_COVERED_FROM: usize = 21;

/// Whether a pass may rebuild this batch: partlog writes none, lz4 and zstd, never gzip or
/// snappy, so batches in those codecs stay as they are (and their keys stay out of the map,
/// which only ever keeps more records).
fn rewritable(view: &BatchView<'_>) -> bool {
    matches!(
        view.header().compression(),
        Ok(Compression::None | Compression::Lz4 | Compression::Zstd)
    )
}

/// Decides the fate of one v2 batch: returns it with the records it dropped and the
/// tombstones among them that went because their horizon had passed.
fn clean_batch(
    view: &BatchView<'_>,
    map: &KeyMap,
    now_ms: i64,
    horizon_ms: i64,
    scratch: &mut Vec<u8>,
) -> Result<(CleanedBatch, u64, u64)> {
    let header = view.header();
    let horizon = header.delete_horizon_ms();
    let mut kept = Vec::new();
    let mut total = 0u64;
    let mut expired_tombstones = 0u64;
    let mut keeps_tombstone = false;
    for record in view.records(scratch)? {
        let record = record?;
        total += 1;
        let keep = if record.offset >= map.mapped_end {
            true
        } else {
            match record.key {
                // Kafka's cleaner drops records without a key: nothing can look them up.
                None => false,
                Some(key) => match map.latest.get(key) {
                    // A later record of the key outside the cleaned range (in a segment the
                    // pass stopped at part-way): the older values may not go, nor may a
                    // tombstone whose older values stay.
                    Some(&latest) if latest >= map.mapped_end => true,
                    Some(&latest) if record.offset < latest => false,
                    _ if record.value.is_none()
                        && !map.holds_unmapped_records
                        && horizon.is_some_and(|h| h <= now_ms) =>
                    {
                        expired_tombstones += 1;
                        false
                    }
                    _ => true,
                },
            }
        };
        if keep {
            keeps_tombstone |= record.value.is_none();
            kept.push(record);
        }
    }
    let removed = total - kept.len() as u64;
    if kept.is_empty() {
        let last_of_producer = header.producer_id >= 0
            && map.producer_last_offset.get(&header.producer_id) == Some(&header.last_offset());
        let expired = header.max_timestamp < now_ms.saturating_sub(PRODUCER_ID_EXPIRATION_MS);
        if last_of_producer && !expired {
            if header.records_count == 0 {
                return Ok((CleanedBatch::Unchanged, 0, 0));
            }
            return Ok((
                CleanedBatch::Rebuilt(empty_header(header)),
                removed,
                expired_tombstones,
            ));
        }
        return Ok((CleanedBatch::Dropped, removed, expired_tombstones));
    }
    let needs_horizon = keeps_tombstone && horizon.is_none();
    if removed == 0 && !needs_horizon {
        return Ok((CleanedBatch::Unchanged, 0, 0));
    }
    let mut builder = BatchBuilder::new(header.compression()?)
        .base_offset(header.base_offset)
        .partition_leader_epoch(header.partition_leader_epoch)
        .producer(
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
        )
        .transactional(header.is_transactional())
        .last_offset_delta(header.last_offset_delta);
    builder = match header.timestamp_type() {
        TimestampType::LogAppendTime => builder.log_append_time(header.max_timestamp),
        TimestampType::CreateTime => builder,
    };
    if keeps_tombstone {
        builder = builder.delete_horizon_ms(horizon.unwrap_or(horizon_ms));
    }
    for record in &kept {
        builder.push_record_at_offset(record);
    }
    Ok((
        CleanedBatch::Rebuilt(builder.build()?),
        removed,
        expired_tombstones,
    ))
}

impl KeyMap {
    /// Phase 1 is done: sorts the latest offsets for [`superseded_batch`](Self::superseded_batch).
    fn sort_latest(&mut self) {
        let mut sorted: Vec<i64> = self.latest.values().copied().collect();
        sorted.sort_unstable();
        self.latest_sorted = sorted
            .last()
            .is_none_or(|&last| last < self.mapped_end)
            .then_some(sorted);
    }

    /// Whether every record of the batch `header` goes because a later record of its key exists,
    /// decided from the header alone (no decompression): all its records were mapped, and no
    /// key's latest offset lies in the batch, so none of its records is the latest of its key
    /// (a record without a key goes anyway). A producer's last batch, which may stay as an empty
    /// header, is left to [`clean_batch`].
    fn superseded_batch(&self, header: &BatchHeader) -> bool {
        let Some(sorted) = &self.latest_sorted else {
            return false;
        };
        let last_offset = header.last_offset();
        let last_of_producer = header.producer_id >= 0
            && self.producer_last_offset.get(&header.producer_id) == Some(&last_offset);
        let first_latest_in_or_after = sorted.partition_point(|&o| o < header.base_offset);
        header.records_count > 0
            && header.base_offset >= self.first_dirty
            && last_offset < self.mapped_end
            && !last_of_producer
            && sorted
                .get(first_latest_in_or_after)
                .is_none_or(|&latest| latest > last_offset)
    }

    /// Records `offset` as the latest of `key` (records come in offset order), allocating only
    /// for a new key. When a new key does not fit, the mapped range ends just below this record
    /// and `false` says to stop.
    ///
    /// Keys are put as a segment is walked, before the walk knows whether the segment is
    /// cleanable: a segment found to hold transactional data part-way leaves offsets at or above
    /// `mapped_end` in the map, which [`clean_batch`] reads as "keep" (never as "superseded").
    fn put(&mut self, key: &[u8], offset: i64) -> bool {
        if let Some(latest) = self.latest.get_mut(key) {
            *latest = offset;
            return true;
        }
        if self.latest.len() >= self.capacity {
            self.full = true;
            self.mapped_end = offset;
            return false;
        }
        self.latest.insert(key.to_vec(), offset);
        true
    }
}

/// Calls `visit` on every batch of `segment` in order, until it returns `false`. Returns the
/// bytes read.
fn for_each_batch(
    segment: &Segment,
    mut visit: impl FnMut(&Batch<'_>) -> Result<bool>,
) -> Result<u64> {
    let mut buf = Vec::new();
    let mut offset = segment.base_offset();
    let mut bytes_read = 0u64;
    while let Some(read) = segment.read(offset, READ_CHUNK_BYTES, None, &mut buf)? {
        bytes_read += read.len as u64;
        let mut batches = AnyBatchIter::new(buf.get(..read.len).unwrap_or_default());
        for (position, batch) in batches.by_ref() {
            let batch = batch.map_err(|what| Error::Corrupt {
                file: segment.log_path(),
                position: read.position + position as u64,
                what,
            })?;
            if !visit(&batch)? {
                return Ok(bytes_read);
            }
        }
        if read.next_offset <= offset {
            break;
        }
        offset = read.next_offset;
    }
    Ok(bytes_read)
}

fn transient_log_path(dir: &Path, base_offset: i64, suffix: &str) -> PathBuf {
    dir.join(format!(
        "{}{suffix}",
        segment_file_name(base_offset, SegmentFileKind::Log)
    ))
}

fn remove_quietly(storage: &dyn Storage, path: &Path) {
    match storage.remove(path) {
        Ok(()) => {}
        Err(error) if error.io_kind() == Some(std::io::ErrorKind::NotFound) => {}
        Err(error) => log::warn!("could not remove {}: {error}", path.display()),
    }
}

/// Resolves what an interrupted compaction left in `dir`, as Kafka's log loader does: a
/// `.cleaned` file is deleted (the swap never began), and a `<base>.log.swap` replaces every
/// segment whose base lies in `[base, the swap's next offset)` (the old group: the cleaned
/// segment ends with the group's last batch), and the segment at `base` in any case; their
/// index files go with them, also those of a segment whose `.log` the swap had already renamed
/// (the new segment's are rebuilt from its `.log` on first use). Index
/// `.swap` files are deleted: partlog never writes them. Returns whether anything changed (the
/// directory is then fsynced).
pub(crate) fn complete_swaps(storage: &Arc<dyn Storage>, dir: &Path) -> Result<bool> {
    let mut changed = false;
    let names = storage.list(dir)?;
    // Every base with a file of any kind: a crash keeps a prefix of a swap's renames, which can
    // take an old segment's `.log` to `.deleted` and leave its index files, which the cleaned
    // `.log` must not inherit.
    let mut segment_bases: Vec<i64> = names
        .iter()
        .filter_map(|name| parse_segment_file_name(name))
        .filter(|parsed| parsed.transient.is_none())
        .map(|parsed| parsed.base_offset)
        .collect();
    segment_bases.sort_unstable();
    segment_bases.dedup();
    for name in &names {
        let Some(parsed) = parse_segment_file_name(name) else {
            continue;
        };
        let path = dir.join(name);
        match (parsed.transient, parsed.kind) {
            (Some(TransientSuffix::Cleaned), _) => {
                storage.remove(&path)?;
                changed = true;
            }
            (Some(TransientSuffix::Swap), SegmentFileKind::Log) => {
                let base = parsed.base_offset;
                let next_offset = swap_next_offset(storage, &path, base)?;
                let replaced: Vec<i64> = segment_bases
                    .iter()
                    .copied()
                    .filter(|&old| old == base || (base..next_offset).contains(&old))
                    .collect();
                for &old in &replaced {
                    for kind in [
                        SegmentFileKind::Log,
                        SegmentFileKind::OffsetIndex,
                        SegmentFileKind::TimeIndex,
                        SegmentFileKind::TxnIndex,
                    ] {
                        let old_path = segment_file_path(dir, old, kind);
                        if storage.exists(&old_path)? {
                            storage.remove(&old_path)?;
                        }
                    }
                }
                segment_bases.retain(|b| !replaced.contains(b));
                storage.rename(&path, &segment_file_path(dir, base, SegmentFileKind::Log))?;
                segment_bases.push(base);
                segment_bases.sort_unstable();
                log::info!(
                    "{}: completed the compaction swap of the segments at {replaced:?} into one \
                     at {base}",
                    dir.display()
                );
                changed = true;
            }
            (Some(TransientSuffix::Swap), _) => {
                storage.remove(&path)?;
                changed = true;
            }
            _ => {}
        }
    }
    if changed {
        storage.sync_dir(dir)?;
    }
    Ok(changed)
}

/// The offset after the last batch of a `.swap` file (its base when it has none). The file was
/// fsynced before its rename to `.swap`, so it holds whole batches.
fn swap_next_offset(storage: &Arc<dyn Storage>, path: &Path, base: i64) -> Result<i64> {
    let file = storage.open(path, OpenMode::Read)?;
    let len = file.len()?;
    let mut walker = BatchWalker::new(&file, path, len);
    let mut position = 0u64;
    let mut next_offset = base;
    while let Step::Batch(frame) = walker.frame_at(position)? {
        next_offset = next_offset.max(walker.summary(&frame)?.next_offset());
        position += frame.total_size;
    }
    Ok(next_offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cleaner_checkpoint_round_trips_and_rejects_damage() {
        for first_dirty in [0, 1, 4096, i64::MAX] {
            let bytes = encode_cleaner_checkpoint(first_dirty);
            assert_eq!(decode_cleaner_checkpoint(&bytes), Some(first_dirty));
        }
        // FORMAT.md §6.3's worked example.
        assert_eq!(
            encode_cleaner_checkpoint(4),
            [
                0x50, 0x4c, 0x43, 0x43, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0x8e, 0x2a, 0x3e, 0x7c
            ]
        );
        let bytes = encode_cleaner_checkpoint(42);
        assert_eq!(&bytes[..8], b"PLCC\x00\x01\x00\x00");
        assert_eq!(&bytes[8..16], &42i64.to_be_bytes());
        for bit in 0..bytes.len() * 8 {
            let mut flipped = bytes;
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(decode_cleaner_checkpoint(&flipped), None, "bit {bit}");
        }
        assert_eq!(decode_cleaner_checkpoint(&bytes[..19]), None);
        assert_eq!(
            decode_cleaner_checkpoint(&[bytes.as_slice(), &[0]].concat()),
            None
        );
        // A negative offset with a good CRC is still invalid.
        let mut negative = encode_cleaner_checkpoint(0);
        negative[8..16].copy_from_slice(&(-1i64).to_be_bytes());
        let crc = crc32c(&negative[..16]);
        negative[16..20].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(decode_cleaner_checkpoint(&negative), None);
    }
}
