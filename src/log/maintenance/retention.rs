//! Retention: which old segments go, and a deletion that never blocks appends or readers
//! (ARCHITECTURE.md §3, invariant 7; §8; Kafka's `UnifiedLog.deleteOldSegments`).
//!
//! # The rules
//!
//! In Kafka's order, each walking the segments oldest first and stopping at the first segment
//! it may not delete, each starting where the one before stopped:
//!
//! 1. **Log start offset** (whatever `cleanup.policy`): a segment goes once every offset in it
//!    lies below the log start offset, that is, once its upper bound (the next segment's base,
//!    or the log end offset for the last segment) is at or below it.
//! 2. **Size** (`cleanup.policy` has `delete`, `retention.bytes` ≥ 0): with
//!    `excess = log bytes − retention.bytes`, the oldest segments go while `excess − size ≥ 0`,
//!    each one subtracting its size. Kafka's approximation: the log may stay above the limit by
//!    less than one segment.
//! 3. **Time** (`cleanup.policy` has `delete`, `retention.ms` ≥ 0): a segment goes once
//!    `now − age_from > retention.ms`, where `age_from` is the smaller of its largest record
//!    timestamp and its append time plus `retention.timestamp.skew.ms`. The append time is the
//!    `.log` file's mtime, which the log sets at roll from its clock. Kafka trusts the largest
//!    timestamp alone, so one record stamped far in the future pins its segment, and every later
//!    one, forever; the skew bounds that. A segment with no
//!    timestamp ages from its mtime, as in Kafka.
//!
//! The last segment is never deleted while empty. Kafka deletes only below the high watermark:
//! once [`Log::set_high_watermark`] was called, a segment goes only if the next one (the log end
//! for the last) starts at or below it; until then the high watermark is the log end offset
//! (one replica). Rule 1 reaching
//! the active segment is partlog's generalisation of Kafka's rule (which never deletes the
//! active segment on the start offset): after `delete_records_before(log_end_offset)` no
//! record of the active segment can be read, and its bytes go like any other.
//!
//! # The active segment
//!
//! When every segment qualifies, the active one included, the log first rolls a new, empty
//! active segment at the log end offset, as Kafka does, then deletes every old one. A segment
//! is never deleted while appends go to it.
//!
//! # A pass
//!
//! 1. **Plan** (no lock that appends take): walk the sealed segments of the current snapshot.
//!    Sizes come from open segments or a `stat`; timestamps from the segment (opened lazily,
//!    its time index's final entry) and the mtime from a `stat`.
//! 2. **Under the writer lock:** check that no truncation began or ran since planning began (the
//!    truncation sequence, `truncations.rs`) and no other pass changed the planned
//!    segments (otherwise plan again), walk on into the segments that were active at planning
//!    time, roll if the active segment goes too. If records below the new start (the first
//!    surviving segment's base, or more if the start was already higher) are not durable yet,
//!    sync them with the lock released and plan again: a crash must never leave the log ending
//!    below its start, which the open would restart empty, forgetting the producers the live log
//!    knows by those records (ARCHITECTURE.md §9). Then:
//!    1. fsync the producer snapshot at the first surviving segment's base (the roll's, which
//!       the flusher may not have synced yet): producers whose data lies only in the segments
//!       that go stay (KIP-360), and after a crash that snapshot is what knows them; and write
//!       the new log start offset into a synced checkpoint slot. A crash from here on leaves at
//!       worst segments below the start, which the next open keeps unread and the next pass
//!       deletes; a crash before it leaves every segment;
//!    2. swap the snapshot: readers can no longer find the segments, while a reader that already
//!       pinned one keeps its descriptor and finishes its read;
//!    3. rename the segments' files (`.log`, `.index`, `.timeindex`, `.txnindex`, and Kafka's
//!       `<base>.snapshot`) to `*.deleted`;
//!    4. fsync the directory.
//! 3. **Reap** (outside the lock): unlink the `*.deleted` files of segments no reader pins. The
//!    flusher retries the pinned ones on its cadence. Open removes any `*.deleted` file a crash
//!    left behind.
//!
//! Appends wait only for step 2's snapshot and checkpoint fsyncs and directory fsync; readers
//! never wait.
//!
//! The time rule reads mtimes from the storage and the time from the log's clock, so the two must
//! agree: on the simulator, pass the log's clock to `SimStorage::with_clock`, or its mtimes count
//! from 1970 and every active segment looks ancient.

use std::sync::Arc;

use crate::sync::MutexGuard;

use crate::error::{Error, Result};
use crate::log::files::producer_snapshot::snapshot_path;
use crate::log::segments::snapshot::{SegmentHandle, SegmentList};
use crate::log::{DeletedSegment, LogConfig, RetentionReport, RetentionRule, Shared, Writer};
use crate::segment::{
    DELETED_SUFFIX, Segment, SegmentFileKind, rename_segment_files, segment_file_path,
};
use crate::storage::OpenMode;

/// How many times a pass plans again when a truncation or a concurrent change moved the
/// segments it planned on, before it gives up until the next pass.
const MAX_PLANS: usize = 4;

/// How many times a pass waits for sealed segments to be synced before its directory fsync,
/// while new rolls keep adding some, before it leaves the directory to the group commit.
const MAX_DIR_SYNC_ATTEMPTS: usize = 3;

/// The suffix of Kafka's producer-state snapshot files (`<offset>.snapshot`). A segment's snapshot
/// is the one named by its base offset, and it is deleted with the segment (FORMAT.md §5).
const PRODUCER_SNAPSHOT_SUFFIX: &str = ".snapshot";

/// What the time rule needs of a segment: its largest record timestamp, if it has one, and its
/// `.log` file's mtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SegmentTimes {
    pub largest_timestamp: Option<i64>,
    pub mtime_ms: i64,
}

/// One segment as the rules see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Candidate {
    pub base_offset: i64,
    /// The next segment's base, or the log end offset for the last segment.
    pub end_offset: i64,
    pub bytes: u64,
    pub is_last: bool,
}

/// Which rule's walk is under way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    LogStartOffset,
    Size,
    Time,
    Done,
}

/// The three rules as one walk over the segments, oldest first: [`decide`](Self::decide) is
/// offered each segment in turn until it answers `None`. A rule that declines a segment hands
/// the same segment to the next rule, as Kafka's three passes do (each starts on the segments
/// the one before left).
#[derive(Debug)]
pub(crate) struct RetentionRules {
    stage: Stage,
    now_ms: i64,
    log_start_offset: i64,
    /// `retention.ms`, when the time rule applies.
    retention_ms: Option<i64>,
    skew_ms: i64,
    /// `retention.bytes` and the log's total bytes, when the size rule applies.
    size_limit: Option<(u64, u64)>,
    /// What the size rule may still delete (Kafka's `diff`), once its walk has begun; negative
    /// when the log is below the limit.
    size_excess: Option<i128>,
    bytes_decided: u64,
    /// The high watermark once one is set: no segment holding an offset at or above it goes.
    high_watermark: Option<i64>,
}

impl RetentionRules {
    /// The rules of `config` at `now_ms`. `total_bytes` is the log's size, needed only when the
    /// size rule applies ([`needs_total_bytes`](Self::needs_total_bytes)).
    pub fn new(
        config: &LogConfig,
        now_ms: i64,
        log_start_offset: i64,
        total_bytes: Option<u64>,
    ) -> Self {
        let delete = config.cleanup_policy.deletes();
        let size_limit = match (delete, u64::try_from(config.retention_bytes), total_bytes) {
            (true, Ok(limit), Some(total)) => Some((limit, total)),
            _ => None,
        };
        RetentionRules {
            stage: Stage::LogStartOffset,
            now_ms,
            log_start_offset,
            retention_ms: (delete && config.retention_ms >= 0).then_some(config.retention_ms),
            skew_ms: config.retention_timestamp_skew_ms,
            size_limit,
            size_excess: None,
            bytes_decided: 0,
            high_watermark: None,
        }
    }

    /// The rules, bounded by a set high watermark: Kafka deletes a segment only when the next
    /// one (or the log end, for the last) starts at or below the high watermark.
    pub fn below_high_watermark(mut self, high_watermark: Option<i64>) -> Self {
        self.high_watermark = high_watermark;
        self
    }

    /// Whether the size rule applies, so that [`new`](Self::new) needs the log's total bytes.
    pub fn needs_total_bytes(config: &LogConfig) -> bool {
        config.cleanup_policy.deletes() && config.retention_bytes >= 0
    }

    /// Whether the walk may still delete segments.
    pub fn is_live(&self) -> bool {
        self.stage != Stage::Done
    }

    /// The rule that deletes `segment`, or `None`: the walk stops there for good. `times` is
    /// asked only when the time rule has to look at the segment.
    pub fn decide(
        &mut self,
        segment: &Candidate,
        times: impl FnOnce() -> Result<SegmentTimes>,
    ) -> Result<Option<RetentionRule>> {
        if segment.is_last && segment.bytes == 0 {
            // Kafka never deletes an empty last segment: the log always keeps one.
            self.stage = Stage::Done;
            return Ok(None);
        }
        if self
            .high_watermark
            .is_some_and(|high_watermark| segment.end_offset > high_watermark)
        {
            self.stage = Stage::Done;
            return Ok(None);
        }
        let mut times = Some(times);
        loop {
            match self.stage {
                Stage::LogStartOffset => {
                    if segment.end_offset <= self.log_start_offset {
                        return Ok(Some(self.take(segment, RetentionRule::LogStartOffset)));
                    }
                    self.stage = Stage::Size;
                }
                Stage::Size => {
                    if self.size_excess.is_none()
                        && let Some((limit, total)) = self.size_limit
                    {
                        // The log's size once rule 1's segments are gone, as Kafka's second pass
                        // sees it.
                        let size = total.saturating_sub(self.bytes_decided);
                        self.size_excess = Some(i128::from(size) - i128::from(limit));
                    }
                    if let Some(excess) = self.size_excess
                        && excess - i128::from(segment.bytes) >= 0
                    {
                        self.size_excess = Some(excess - i128::from(segment.bytes));
                        return Ok(Some(self.take(segment, RetentionRule::Size)));
                    }
                    self.stage = Stage::Time;
                }
                Stage::Time => {
                    if let Some(retention_ms) = self.retention_ms
                        && let Some(times) = times.take()
                    {
                        let age_from = self.age_from(times()?);
                        if self.now_ms.saturating_sub(age_from) > retention_ms {
                            return Ok(Some(self.take(segment, RetentionRule::Time)));
                        }
                    }
                    self.stage = Stage::Done;
                }
                Stage::Done => return Ok(None),
            }
        }
    }

    /// The time a segment's age counts from: the smaller of its largest timestamp and its mtime
    /// plus the skew; its mtime alone when it has no timestamp.
    pub fn age_from(&self, times: SegmentTimes) -> i64 {
        match times.largest_timestamp {
            Some(largest) => largest.min(times.mtime_ms.saturating_add(self.skew_ms)),
            None => times.mtime_ms,
        }
    }

    fn take(&mut self, segment: &Candidate, rule: RetentionRule) -> RetentionRule {
        self.bytes_decided = self.bytes_decided.saturating_add(segment.bytes);
        rule
    }
}

/// A plan: the segments to delete, oldest first, as a prefix of a segment list.
#[derive(Debug, Default)]
struct Plan {
    deleted: Vec<DeletedSegment>,
}

/// How one attempt at a pass ended.
enum Attempt {
    Done(RetentionReport),
    /// A truncation or a concurrent change moved the segments the plan was made on.
    Replan,
}

impl Shared {
    /// Runs one retention pass. See the [module docs](self).
    pub(in crate::log) fn enforce_retention(&self) -> Result<RetentionReport> {
        let result = self.retention_pass();
        crate::log::observe::notify(
            self.config.observer.as_ref(),
            crate::log::LogEvent::Retention {
                result: result.as_ref(),
            },
        );
        result
    }

    fn retention_pass(&self) -> Result<RetentionReport> {
        // One pass at a time: a second one would only find the first one's work undone.
        let _pass = self.maintenance.retention_pass();
        // Whether an attempt rolled the active segment before it planned again.
        let mut rolled = false;
        for _ in 0..MAX_PLANS {
            if let Attempt::Done(mut report) = self.retention_attempt(&mut rolled)? {
                report.rolled_active_segment |= rolled;
                return Ok(report);
            }
        }
        log::debug!(
            "{}: the segments kept changing under retention; trying again at the next pass",
            self.dir.display()
        );
        Ok(RetentionReport {
            log_start_offset: self.view.log_start(),
            ..RetentionReport::default()
        })
    }

    /// One plan and, if it still holds, its execution. `rolled_before` is set when it rolls the
    /// active segment and plans again.
    fn retention_attempt(&self, rolled_before: &mut bool) -> Result<Attempt> {
        let now_ms = self.clock.now_ms();
        // Read before the plan: any truncation that begins, or is running, from here on moves
        // it (`truncations.rs`).
        let truncations = self.view.truncations().sequence();
        let planned_on = self.view.segments().load();
        let log_start_offset = self.view.log_start();
        let handles = planned_on.handles();
        let total_bytes = if RetentionRules::needs_total_bytes(&self.config) {
            match self.total_bytes(&planned_on) {
                Ok(total) => Some(total),
                Err(error) => return self.replan_if_moved(&planned_on, error),
            }
        } else {
            None
        };
        let high_watermark = self.replication.high_watermark_if_set();
        let mut rules = RetentionRules::new(&self.config, now_ms, log_start_offset, total_bytes)
            .below_high_watermark(high_watermark);
        let mut plan = Plan::default();

        // 1. The sealed segments, without the writer lock.
        let sealed_count = handles.len().saturating_sub(1);
        for (index, handle) in handles.iter().enumerate().take(sealed_count) {
            let end_offset = handles
                .get(index + 1)
                .map_or(i64::MAX, |next| next.base_offset());
            match self.decide_sealed(&mut rules, handle, end_offset) {
                Ok(Some(deleted)) => plan.deleted.push(deleted),
                Ok(None) => break,
                Err(error) => return self.replan_if_moved(&planned_on, error),
            }
        }

        let reaches_active = rules.is_live() && plan.deleted.len() == sealed_count;
        if plan.deleted.is_empty() && !reaches_active {
            // Nothing is due: no need to stop appends even for a moment.
            self.reap_unpinned();
            return Ok(Attempt::Done(RetentionReport {
                log_start_offset: self.view.log_start(),
                ..RetentionReport::default()
            }));
        }

        // 2. Under the writer lock: check the plan, finish the walk, delete.
        let mut writer = self.writer.lock();
        if self.view.is_closed() {
            return Err(Error::Closed);
        }
        if self.durability.is_poisoned() {
            return Err(Error::Poisoned);
        }
        let current = self.view.segments().load();
        // The planned segments and the one after them must be where they were: then their
        // sizes, timestamps and upper bounds are what the plan saw.
        let window = (plan.deleted.len() + 1).min(handles.len());
        let unchanged = self.view.truncations().sequence() == truncations
            && current.len() >= window
            && handles
                .iter()
                .zip(current.handles())
                .take(window)
                .all(|(planned, now)| Arc::ptr_eq(planned, now));
        if !unchanged {
            return Ok(Attempt::Replan);
        }
        if reaches_active {
            // The walk reached what was the active segment when it began: that one (and any
            // segment rolled since) is judged now, with nothing appended behind the judge's back.
            self.decide_under_lock(&mut rules, &writer, &current, &mut plan)?;
        }
        if plan.deleted.is_empty() {
            drop(writer);
            self.reap_unpinned();
            return Ok(Attempt::Done(RetentionReport {
                log_start_offset: self.view.log_start(),
                ..RetentionReport::default()
            }));
        }
        let rolled = plan.deleted.len() == current.len();
        // The records below the new start are made durable before it is recorded, as in
        // `delete_records_before`: a crash that took some back would restart the log empty at
        // its start, forgetting the producers the live log knows by them (ARCHITECTURE.md §9).
        let new_start = match current.handles().get(plan.deleted.len()) {
            Some(first_kept) => first_kept.base_offset(),
            None => writer.tail.log_end_offset(),
        }
        .max(self.view.log_start());
        if self.durability.durable_offset() < new_start {
            if rolled {
                // Appends from here on go above the new start: the sync need not chase them.
                self.roll(&mut writer, now_ms)?;
                *rolled_before = true;
            }
            drop(writer);
            match self.sync_through(new_start - 1) {
                Ok(()) | Err(Error::Truncated { .. }) => {}
                Err(error) => return Err(error),
            }
            return Ok(Attempt::Replan);
        }
        let report = self.delete_planned(&mut writer, plan, rolled, now_ms)?;
        drop(writer);
        self.reap_unpinned();
        Ok(Attempt::Done(report))
    }

    /// Turns an error met while planning into a request to plan again when the snapshot moved
    /// meanwhile (a truncation renamed a file the plan was reading).
    fn replan_if_moved(&self, planned_on: &Arc<SegmentList>, error: Error) -> Result<Attempt> {
        if Arc::ptr_eq(&self.view.segments().load(), planned_on) {
            Err(error)
        } else {
            Ok(Attempt::Replan)
        }
    }

    /// The bytes of every segment's `.log`: the open ones from memory, the others by `stat`
    /// (opening every closed segment would cost descriptors, ARCHITECTURE.md §3, invariant 10).
    fn total_bytes(&self, list: &SegmentList) -> Result<u64> {
        let mut total = 0u64;
        for handle in list.handles() {
            total = total.saturating_add(self.segment_log_bytes(handle)?);
        }
        Ok(total)
    }

    /// The bytes of a segment's `.log`: from memory when it is open, else by `stat` (retention
    /// and compaction both size segments they must not open).
    pub(in crate::log) fn segment_log_bytes(&self, handle: &SegmentHandle) -> Result<u64> {
        match handle.if_open() {
            Some(segment) => Ok(segment.size()),
            None => Ok(self
                .storage
                .metadata(&segment_file_path(
                    &self.dir,
                    handle.base_offset(),
                    SegmentFileKind::Log,
                ))?
                .len),
        }
    }

    /// The rules' verdict on one sealed segment of the plan.
    fn decide_sealed(
        &self,
        rules: &mut RetentionRules,
        handle: &SegmentHandle,
        end_offset: i64,
    ) -> Result<Option<DeletedSegment>> {
        let candidate = Candidate {
            base_offset: handle.base_offset(),
            end_offset,
            bytes: self.segment_log_bytes(handle)?,
            is_last: false,
        };
        let times = || {
            // Opening a sealed segment is O(1) plus a short tail walk; it stays open (and
            // closes when idle) like any segment a reader opened.
            let segment = self.view.segments().pin(handle)?.ok_or_else(|| {
                Error::io(
                    &self.dir,
                    std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        "a segment left the log while retention planned",
                    ),
                )
            })?;
            self.segment_times(&segment)
        };
        Ok(rules
            .decide(&candidate, times)?
            .map(|rule| deleted(&candidate, rule)))
    }

    /// Walks on, under the writer lock, into the segments after the plan's prefix: what was the
    /// active segment when planning began, any segment rolled since, and the active one.
    fn decide_under_lock(
        &self,
        rules: &mut RetentionRules,
        writer: &Writer,
        current: &SegmentList,
        plan: &mut Plan,
    ) -> Result<()> {
        let handles = current.handles();
        while let Some(handle) = handles.get(plan.deleted.len()) {
            let index = plan.deleted.len();
            let is_last = index + 1 == handles.len();
            let (segment, end_offset) =
                if is_last {
                    (
                        Arc::clone(writer.tail.active()),
                        writer.tail.log_end_offset(),
                    )
                } else {
                    let next_base = handles.get(index + 1).map_or(i64::MAX, |h| h.base_offset());
                    let segment = self.view.segments().pin(handle)?.ok_or_else(|| {
                        Error::InvalidArgument {
                            why: "a segment left the log under the writer lock".into(),
                        }
                    })?;
                    (segment, next_base)
                };
            let candidate = Candidate {
                base_offset: handle.base_offset(),
                end_offset,
                bytes: segment.size(),
                is_last,
            };
            match rules.decide(&candidate, || self.segment_times(&segment))? {
                Some(rule) => plan.deleted.push(deleted(&candidate, rule)),
                None => break,
            }
        }
        Ok(())
    }

    fn segment_times(&self, segment: &Segment) -> Result<SegmentTimes> {
        let mtime_ms = self.storage.metadata(&segment.log_path())?.modified_ms;
        let largest_timestamp = segment
            .max_timestamp()
            .map(|max| max.timestamp)
            .filter(|&timestamp| timestamp >= 0);
        Ok(SegmentTimes {
            largest_timestamp,
            mtime_ms,
        })
    }

    /// Steps 1 to 4 of the module docs, under the writer lock.
    fn delete_planned(
        &self,
        writer: &mut MutexGuard<'_, Writer>,
        plan: Plan,
        rolled: bool,
        now_ms: i64,
    ) -> Result<RetentionReport> {
        if rolled {
            // Everything goes, the active segment too: a new one at the log end takes appends.
            self.roll(writer, now_ms)?;
        }
        let list = self.view.segments().load();
        let (removed, kept) = list.handles().split_at(plan.deleted.len().min(list.len()));
        let first_kept = kept.first().ok_or_else(|| Error::InvalidArgument {
            why: "retention would leave the log without a segment".into(),
        })?;
        let log_start_offset = self.view.log_start().max(first_kept.base_offset());
        self.sync_snapshot_at(first_kept.base_offset())?;

        // 1. The new start, durably, before any file goes.
        let recovery_point = writer.points.recovery_point();
        self.write_checkpoint_durably(writer, recovery_point, log_start_offset)?;
        self.view.raise_log_start(log_start_offset);
        // Producers stay until they expire, even those whose data goes now (KIP-360).
        writer.producers.on_log_start_incremented(log_start_offset);
        self.txn.publish(&writer.producers);
        self.replication
            .epochs()
            .truncate_from_start(self.view.log_start())?;

        // 2. Out of the snapshot: no reader finds these segments from now on.
        let taken = self
            .view
            .segments()
            .swap(SegmentList::new(kept.to_vec()), removed);
        let first_kept_base = first_kept.base_offset();
        writer
            .tail
            .retain_unsynced(|segment| segment.base_offset() >= first_kept_base);

        // 3. Rename every file to `*.deleted`, oldest segment first, stopping at the first
        // failure: the segments left on disk must stay contiguous, since recovery cuts the log
        // where a segment ends before the next one begins. What a failure leaves under its
        // name lies below the log start, and the next open's first pass deletes it.
        let mut rename_error = None;
        for (handle, segment) in removed.iter().zip(taken) {
            match self.rename_to_deleted(handle.base_offset()) {
                Ok(paths) => writer.deletes.push(paths, segment),
                Err(error) => {
                    log::error!(
                        "{}: could not rename the segment at {} for deletion; it and the ones \
                         after it stay on disk until the log reopens: {error}",
                        self.dir.display(),
                        handle.base_offset()
                    );
                    rename_error = Some(error);
                    break;
                }
            }
        }

        // 4. The directory, so that the renames hold.
        let synced = self.sync_dir_after_renames(writer);
        if let Some(error) = rename_error {
            return Err(error);
        }
        synced?;
        let report = RetentionReport {
            deleted: plan.deleted,
            rolled_active_segment: rolled,
            log_start_offset: self.view.log_start(),
        };
        log::info!(
            "{}: retention deleted {} segments ({} bytes); log start offset {}",
            self.dir.display(),
            report.segments_deleted(),
            report.bytes_deleted(),
            report.log_start_offset
        );
        Ok(report)
    }

    /// Fsyncs the producer snapshot at `base`, the first kept segment's, if there is one,
    /// before the segments below it go: producers whose data lies only in those segments stay
    /// (KIP-360), and once the segments are gone that snapshot (the roll's into the segment) is
    /// what a reopen knows them by. A roll leaves its snapshot for the flusher to sync, which
    /// may not have done it yet (or have it in flight), so it is synced here, through its path;
    /// the deletion's renames come after its name in the directory's order, so a crash that
    /// keeps them keeps the snapshot whole. A failed fsync poisons the log (ARCHITECTURE.md §3,
    /// invariant 4).
    fn sync_snapshot_at(&self, base: i64) -> Result<()> {
        let path = snapshot_path(&self.dir, base);
        let synced = match self.storage.open(&path, OpenMode::ReadWrite) {
            Ok(file) => file.sync_all(),
            Err(gone) if gone.io_kind() == Some(std::io::ErrorKind::NotFound) => return Ok(()),
            Err(error) => return Err(error),
        };
        if let Err(error) = synced {
            log::error!(
                "poisoning {}: syncing the producer snapshot at {base} failed: {error}",
                self.dir.display()
            );
            self.durability.poison();
            return Err(error);
        }
        Ok(())
    }

    /// Renames the files of the segment at `base_offset`, and its producer snapshot if any, to
    /// `*.deleted`; returns the new paths.
    fn rename_to_deleted(&self, base_offset: i64) -> Result<Vec<std::path::PathBuf>> {
        let mut paths =
            rename_segment_files(&*self.storage, &self.dir, base_offset, DELETED_SUFFIX)?;
        let snapshot = format!("{base_offset:020}{PRODUCER_SNAPSHOT_SUFFIX}");
        let from = self.dir.join(&snapshot);
        if self.storage.exists(&from)? {
            let to = self.dir.join(format!("{snapshot}{DELETED_SUFFIX}"));
            self.storage.rename(&from, &to)?;
            paths.push(to);
        }
        Ok(paths)
    }

    /// Fsyncs the directory after the renames, keeping the group commit's order: a new
    /// segment's name becomes durable only after the sealed segments before it (ARCHITECTURE.md
    /// §6). A roll whose sealed segment is not synced yet left its new name pending in the
    /// directory, so such segments are synced first, outside the writer lock.
    fn sync_dir_after_renames(&self, writer: &mut MutexGuard<'_, Writer>) -> Result<()> {
        let mut synced: Vec<Arc<Segment>> = Vec::new();
        for _ in 0..MAX_DIR_SYNC_ATTEMPTS {
            let unsynced: Vec<Arc<Segment>> = if writer.tail.dir_dirty() {
                writer
                    .tail
                    .unsynced_sealed()
                    .iter()
                    .filter(|s| !synced.iter().any(|done| Arc::ptr_eq(done, s)))
                    .cloned()
                    .collect()
            } else {
                Vec::new()
            };
            if unsynced.is_empty() {
                if let Err(error) = self.storage.sync_dir(&self.dir) {
                    // Whether the renames (and any new segment's name) reached the disk is
                    // unknown, and a retry may report success without writing what the kernel
                    // dropped (ARCHITECTURE.md §8, "Failed fsyncs").
                    writer.tail.mark_dir_dirty();
                    return Err(self.poison_after_failed_sync("syncing the directory", error));
                }
                writer.tail.mark_dir_synced();
                return Ok(());
            }
            // Reported before the writer lock is taken again, as the flusher reports its syncs:
            // an observer never runs under the lock for a sync.
            let result = MutexGuard::unlocked(writer, || self.flush_sealed_alone(&unsynced));
            if let Err(error) = result {
                log::error!(
                    "poisoning {}: syncing a sealed segment failed: {error}",
                    self.dir.display()
                );
                self.durability.poison();
                return Err(error);
            }
            synced.extend(unsynced);
        }
        // Rolls kept outrunning the syncs: the group commit syncs the directory in order, and the
        // log start is durable already, so a crash can only bring back files below it.
        writer.tail.mark_dir_dirty();
        self.durability.signal_roll();
        Ok(())
    }
}

fn deleted(candidate: &Candidate, rule: RetentionRule) -> DeletedSegment {
    DeletedSegment {
        base_offset: candidate.base_offset,
        end_offset: candidate.end_offset,
        bytes: candidate.bytes,
        rule,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::CleanupPolicy;

    const DAY: i64 = 24 * 60 * 60 * 1000;
    const NOW: i64 = 1_700_000_000_000;

    fn config(retention_ms: i64, retention_bytes: i64, policy: CleanupPolicy) -> LogConfig {
        LogConfig::builder()
            .retention_ms(retention_ms)
            .retention_bytes(retention_bytes)
            .cleanup_policy(policy)
            .build()
            .unwrap()
    }

    /// Segments of 100 offsets and `bytes` each, the last one active; returns the rules'
    /// verdicts until the walk stops.
    fn walk(
        rules: &mut RetentionRules,
        sizes: &[u64],
        times: &[SegmentTimes],
    ) -> Vec<RetentionRule> {
        let mut verdicts = Vec::new();
        for (index, &bytes) in sizes.iter().enumerate() {
            let base = 100 * index as i64;
            let candidate = Candidate {
                base_offset: base,
                end_offset: base + 100,
                bytes,
                is_last: index + 1 == sizes.len(),
            };
            match rules.decide(&candidate, || Ok(times[index])).unwrap() {
                Some(rule) => verdicts.push(rule),
                None => break,
            }
        }
        verdicts
    }

    fn at(largest: Option<i64>, mtime_ms: i64) -> SegmentTimes {
        SegmentTimes {
            largest_timestamp: largest,
            mtime_ms,
        }
    }

    #[test]
    fn size_rule_is_kafkas_approximation() {
        let config = config(-1, 250, CleanupPolicy::DELETE);
        let fresh = [at(Some(NOW), NOW); 4];
        // 400 bytes, limit 250: excess 150 deletes one 100-byte segment (150-100 >= 0) but
        // not a second (50-100 < 0): the log stays 50 bytes over, less than a segment.
        let mut rules = RetentionRules::new(&config, NOW, 0, Some(400));
        assert_eq!(
            walk(&mut rules, &[100, 100, 100, 100], &fresh),
            [RetentionRule::Size]
        );
        // Exactly at the limit: nothing goes.
        let mut rules = RetentionRules::new(&config, NOW, 0, Some(250));
        assert!(walk(&mut rules, &[100, 100, 50], &fresh).is_empty());
        // Bytes the start-offset rule deleted count against the excess.
        // (450 - 100 - 250 = 100: one more segment, where 450 - 250 would allow two.)
        let mut rules = RetentionRules::new(&config, NOW, 100, Some(450));
        assert_eq!(
            walk(&mut rules, &[100, 100, 100, 150], &fresh),
            [RetentionRule::LogStartOffset, RetentionRule::Size]
        );
    }

    #[test]
    fn time_rule_caps_future_timestamps_with_the_skew() {
        let config = LogConfig::builder()
            .retention_ms(7 * DAY)
            .retention_timestamp_skew_ms(60 * 60 * 1000)
            .build()
            .unwrap();
        let rules = RetentionRules::new(&config, NOW, 0, None);
        let mtime = NOW - 8 * DAY;
        // An honest timestamp is trusted.
        assert_eq!(rules.age_from(at(Some(mtime - 5), mtime)), mtime - 5);
        // A far-future one counts from the append time plus the skew.
        assert_eq!(
            rules.age_from(at(Some(i64::MAX), mtime)),
            mtime + 60 * 60 * 1000
        );
        // No timestamp: the mtime, as in Kafka.
        assert_eq!(rules.age_from(at(None, mtime)), mtime);
        let mut rules = RetentionRules::new(&config, NOW, 0, None);
        assert_eq!(
            walk(
                &mut rules,
                &[10, 10, 10],
                &[at(Some(i64::MAX), mtime), at(Some(NOW), NOW), at(None, NOW)]
            ),
            [RetentionRule::Time]
        );
    }

    #[test]
    fn the_walk_stops_at_the_first_segment_kept() {
        let config = config(DAY, -1, CleanupPolicy::DELETE);
        let old = at(Some(NOW - 2 * DAY), NOW - 2 * DAY);
        let young = at(Some(NOW), NOW);
        let mut rules = RetentionRules::new(&config, NOW, 0, None);
        assert_eq!(
            walk(&mut rules, &[1, 1, 1, 1], &[old, young, old, old]),
            [RetentionRule::Time]
        );
        assert!(!rules.is_live());
    }

    #[test]
    fn compaction_alone_deletes_only_below_the_start() {
        let compacted = config(0, 0, CleanupPolicy::COMPACT);
        let old = at(Some(0), 0);
        let mut rules = RetentionRules::new(&compacted, NOW, 150, Some(1000));
        assert_eq!(
            walk(&mut rules, &[500, 500], &[old, old]),
            [RetentionRule::LogStartOffset]
        );
        let neither = config(0, 0, CleanupPolicy::NONE);
        let mut rules = RetentionRules::new(&neither, NOW, 0, Some(1000));
        assert!(walk(&mut rules, &[500, 500], &[old, old]).is_empty());
    }

    #[test]
    fn an_empty_last_segment_is_never_deleted() {
        let config = config(0, 0, CleanupPolicy::DELETE);
        let old = at(Some(0), 0);
        let mut rules = RetentionRules::new(&config, NOW, 1_000, Some(10));
        assert_eq!(
            walk(&mut rules, &[10, 0], &[old, old]),
            [RetentionRule::LogStartOffset]
        );
        // A non-empty active segment qualifies like any other (the log rolls first).
        let mut rules = RetentionRules::new(&config, NOW, 0, None);
        assert_eq!(
            walk(&mut rules, &[10, 10], &[old, old]),
            [RetentionRule::Time, RetentionRule::Time]
        );
    }
}
