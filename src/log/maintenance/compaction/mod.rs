//! Log compaction (`cleanup.policy` compact): for every key, only the record the log's
//! [`CompactionPolicy`](crate::CompactionPolicy) prefers stays, under Kafka's (the default) the
//! one with the highest offset (ARCHITECTURE.md §3, invariant 8; Kafka's `LogCleaner`). This
//! folder is the mechanism; what a pass decides is the policy's (`policy/`).
//!
//! # Scheduling
//!
//! The *cleanable range* runs from the first sealed segment up to the first of: the active segment
//! (never cleaned), a dirty segment whose largest timestamp is younger than `min.compaction.lag.ms`
//! when that is above 0 (Kafka's rule: with 0, a timestamp in the future holds nothing back), and
//! the segment holding the last stable offset (below). Within it, segments wholly below the *first
//! dirty offset* are clean (earlier passes compared every record there with every later one), the
//! rest are dirty. A pass is due ([`Log::compaction_schedule`](crate::Log::compaction_schedule))
//! when the dirty bytes are at least `min.cleanable.dirty.ratio` of the cleanable bytes, or when
//! the first batch of a dirty segment is older than `max.compaction.lag.ms` (Kafka's KIP-354), and
//! there are dirty bytes. Time comes from the log's clock. The maintenance thread
//! (`retention.check.interval.ms`) runs a pass when one is due;
//! [`Log::compact`](crate::Log::compact) runs one whenever it is called.
//!
//! The first dirty offset survives a reopen in `partlog.cleaner-checkpoint` (FORMAT.md), written
//! atomically (temporary file, fsync, rename, directory fsync) after each pass that moves it. A
//! truncation below it lowers it first, durably; a file that names an offset above the log end
//! is ignored. A lost or stale-low value costs a pass, never a record.
//!
//! # A pass
//!
//! 1. **Map.** Walk the cleanable range, recording for every key at or above the first dirty
//!    offset its winning record (the policy's choice; the highest offset under Kafka's). A record
//!    below the first dirty offset that the policy prefers to its key's winner becomes the winner
//!    when step 3 meets it (never under Kafka's order). Data of aborted transactions is skipped (its keys never
//!    enter the map, so it supersedes nothing); control batches only move the transaction state
//!    along (below). The map holds at most [`CompactionOptions::max_map_keys`] keys; once it
//!    holds that many, the mapped range ends at the next keyed record, whatever its key (Kafka's
//!    rule), and the pass cleans only that far (a record above the mapped range is always kept),
//!    so that the next pass continues from there. A segment mapped whole
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
//!    batch that loses all its records goes (but see "What stays"), except a group's last
//!    batch when nothing else of the group's last segment stays: it stays as an empty header,
//!    so that the cleaned segment ends above the base of every segment it replaces (open's
//!    swap completion relies on it) and is never empty. A group of one segment is written only from
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
//! which is the whole group because the cleaned segment ends above the base of the group's last
//! segment (see "A pass", step 3). The group's `.txnindex.cleaned` follows the `.log` through
//! the same renames, right after it. A
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
//! Kafka's `checkBatchRetention` decides each batch, in this order:
//! 1. the batch holding an active producer's last record, according to the log's producer
//!    state read when the pass plans (its last data batch, or, when it has none, a marker of its
//!    current epoch), and the batch that ends the cleanable range, stay, as empty headers when
//!    all their records go (RETAIN_EMPTY): the producer's sequence and epoch survive for
//!    idempotent dedupe and fencing. A producer that `producer.id.expiration.ms` (the log's
//!    config) would expire counts as gone;
//! 2. otherwise, data of an aborted transaction goes;
//! 3. a discardable marker (below) whose delete horizon has passed goes;
//! 4. otherwise the batch goes when none of its records stays.
//!
//! # Transactions
//!
//! The cleanable range ends below the last stable offset, rounded down to a segment boundary:
//! the segment holding the LSO and those after it wait until the transactions open there end.
//! So every transaction the pass sees data of is decided. [`LogStats::compaction_uncleanable_from`]
//! and [`LogStats::compaction_uncleanable_bytes`] report where the LSO held the last pass back.
//!
//! Both phases walk the range with Kafka's `CleanedTransactionMetadata` (`txn.rs`): the aborted
//! transactions come from the `.txnindex` files, and a data batch of one is *aborted*. A marker
//! is *discardable* when no data batch of its transaction was seen in the walk: an ABORT
//! marker stays while one was, and its `AbortedTxn` goes into the cleaned segment's
//! `.txnindex` (`<base>.txnindex.cleaned`, swapped in with the `.log`); a COMMIT marker the
//! same. A discardable marker is rebuilt with a delete horizon (now + `delete.retention.ms`),
//! and a pass at or after it drops the marker; its transaction has left the `.txnindex` by
//! then. Tombstones and markers therefore go in two passes, `delete.retention.ms` apart.
//!
//! # Failures
//!
//! A pass that fails (an I/O error) is counted in [`LogStats::compaction_failed_passes`]; what
//! it left is undone by the next pass or the next open, and the maintenance thread retries at
//! its next interval.
//!
//! # Files
//!
//! As Kafka keeps `LogCleaner`, `LogCleanerManager` and `SkimpyOffsetMap` apart: this file
//! holds the options, the stats and a pass from end to end; `plan.rs` the cleanable range, the
//! schedule, the key map and the groups; `txn.rs` the transaction state of a walk and the
//! producers' last records; `clean.rs` the writing of cleaned segments; `swap.rs` their swap into
//! the log and its completion at open; `checkpoint.rs` the cleaner checkpoint; `policy/` the
//! policies and their registry.
//!
//! [`LogStats::compaction_uncleanable_from`]: crate::LogStats::compaction_uncleanable_from
//! [`LogStats::compaction_uncleanable_bytes`]: crate::LogStats::compaction_uncleanable_bytes
//! [`LogStats::compaction_failed_passes`]: crate::LogStats::compaction_failed_passes

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::error::{Error, Result};
use crate::format::{AnyBatchIter, Batch};
use crate::segment::{Segment, SegmentFileKind};

use crate::log::files::checkpoint::DurableWriteError;
use crate::log::files::cleaner_checkpoint::CLEANER_CHECKPOINT_FILE_NAME;
use crate::log::files::remove_quietly;
use crate::log::maintenance::state::CleanerState;
use crate::log::{CompactionSchedule, CompactionStats, Shared};

mod clean;
mod plan;
mod swap;
pub(in crate::log) mod throttle;
mod txn;

use clean::GroupOutcome;
pub(crate) use swap::complete_swaps;
use txn::TxnTracker;

/// How many bytes of a segment one read brings in while a pass walks it.
const READ_CHUNK_BYTES: usize = 1 << 20;

/// Settings of one compaction pass that are not topic configs, and overrides of those that are.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionOptions {
    /// The most keys the pass's key map holds (Kafka bounds it by
    /// `log.cleaner.dedupe.buffer.size`). At the pass's peak each key costs its length plus about
    /// 110 bytes: its table slot in a power-of-two table up to 7/8 full, its own heap block, its
    /// sorted latest offset, and the old table beside the new one while the map grows (1,000,000
    /// 12-byte keys peaked at 116 MiB). When the map fills, the pass cleans only the range it
    /// mapped. Default: 1,000,000.
    // The peak: crates/partlog-bench/benches/README.md, "curves".
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

impl Shared {
    /// See [`Log::compact`](crate::Log::compact).
    pub(in crate::log) fn compact(&self) -> Result<CompactionStats> {
        self.compact_with(CompactionOptions::default())
    }

    pub(in crate::log) fn compaction_schedule(&self) -> Result<CompactionSchedule> {
        if !self.config.cleanup_policy.compacts() {
            return Ok(CompactionSchedule::default());
        }
        let mut cleaner = self.maintenance.cleaner();
        cleaner.note_truncations(self.view.truncations().sequence());
        let now_ms = self.clock.now_ms();
        let policy = self.config.compaction_policy()?;
        let plan = self.plan(
            &cleaner,
            now_ms,
            self.config.min_compaction_lag_ms,
            true,
            &*policy,
        )?;
        Ok(plan.schedule)
    }

    /// Runs a pass if one is due (the maintenance thread's step). Failures are logged and
    /// counted; the next interval retries.
    pub(super) fn compact_if_due(&self) -> Result<()> {
        match self.compaction_schedule() {
            Ok(schedule) if schedule.due => {}
            Ok(_) => return Ok(()),
            Err(error) => {
                self.maintenance.status().note_failed_pass();
                return Err(error);
            }
        }
        self.compact_with(CompactionOptions::default()).map(|_| ())
    }

    /// Writes `first_dirty` to `partlog.cleaner-checkpoint`, unless a truncation came since the
    /// pass began. A failure costs the next open a pass, never a record: it is logged.
    fn persist_first_dirty(&self, first_dirty: i64, truncations_at_start: u64) {
        let persisted =
            self.files
                .cleaner_checkpoint()
                .persist(&*self.storage, &self.dir, first_dirty, || {
                    self.view.truncations().sequence() == truncations_at_start
                });
        match persisted {
            Ok(()) => {}
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

    /// One pass, reported to the observer whether it ran or failed.
    pub(in crate::log) fn compact_with(
        &self,
        options: CompactionOptions,
    ) -> Result<CompactionStats> {
        let result = self.compact_counted(options);
        crate::log::observe::notify(
            self.config.observer.as_ref(),
            crate::log::LogEvent::Compaction {
                result: result.as_ref(),
            },
        );
        result
    }

    fn compact_counted(&self, options: CompactionOptions) -> Result<CompactionStats> {
        if !self.config.cleanup_policy.compacts() {
            return Err(Error::InvalidArgument {
                why: "compaction needs cleanup.policy compact".into(),
            });
        }
        let mut cleaner = self.maintenance.cleaner();
        match self.compact_locked(&mut cleaner, options) {
            Ok(stats) => {
                self.maintenance.status().note_pass();
                Ok(stats)
            }
            Err(error) => {
                self.maintenance.status().note_failed_pass();
                log::warn!(
                    "{}: compaction pass failed (the next pass retries): {error}",
                    self.dir.display()
                );
                Err(error)
            }
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
        cleaner.note_truncations(self.view.truncations().sequence());
        let truncations_at_start = cleaner.truncations_seen();
        let first_dirty = cleaner.first_dirty_offset();
        let min_lag_ms = options
            .min_compaction_lag_ms
            .unwrap_or(self.config.min_compaction_lag_ms);
        let delete_retention_ms = options
            .delete_retention_ms
            .unwrap_or(self.config.delete_retention_ms);
        let policy = self.config.compaction_policy()?;
        let plan = self.plan(cleaner, now_ms, min_lag_ms, false, &*policy)?;
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

        // Phase 1: map the cleanable range. The producers' last records are read once, at
        // planning time: a later append only moves a producer's last record above the range,
        // so a batch kept for an older one keeps more, never less.
        let producers = self.active_producers_at(now_ms);
        let horizon_ms = policy.delete_horizon_ms(now_ms, delete_retention_ms);
        let (mut map, mut mapped, bytes_read) =
            self.map_cleanable_range(&plan, options, first_dirty, producers, policy)?;
        stats.bytes_read += bytes_read;
        stats.cleaned_up_to = map.mapped_end;
        stats.uncleanable_bytes = match stats.uncleanable_from {
            Some(from) => self.bytes_from(from)?,
            None => 0,
        };
        self.maintenance.status().set_uncleanable(
            stats
                .uncleanable_from
                .map(|from| (from, stats.uncleanable_bytes)),
        );

        // Phase 2: group the mapped segments and rewrite each group.
        mapped.retain(|p| p.handle.base_offset() < map.mapped_end);
        let mut every_group_done = true;
        // Carried from group to group, as Kafka's is: a transaction may span groups.
        let mut tracker = TxnTracker::default();
        for group in self.group_by_size(&mapped)? {
            match self.clean_group(
                group,
                &mut map,
                &mut tracker,
                now_ms,
                horizon_ms,
                &mut stats,
            )? {
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
        if every_group_done && map.mapped_end > cleaner.first_dirty_offset() {
            // The next pass maps from here on, so that a small key map still makes progress.
            cleaner.cleaned_up_to(map.mapped_end);
            self.persist_first_dirty(map.mapped_end, truncations_at_start);
        }
        stats.duration = started.elapsed();
        log::debug!("{}: compaction pass: {stats:?}", self.dir.display());
        Ok(stats)
    }
}

/// Kafka's default `producer.id.expiration.ms` (1 day). Compaction no longer reads it: a
/// producer's last batch stays while the log's producer state holds the producer, which
/// [`LogConfig::producer_id_expiration_ms`](crate::LogConfig::producer_id_expiration_ms) bounds.
/// Kept because it is part of the stable API.
pub const PRODUCER_ID_EXPIRATION_MS: i64 = 24 * 60 * 60 * 1000;

/// Calls `visit` on every batch of `segment` in order, until it returns `false`, its reads
/// paced by `io`. Returns the bytes read.
fn for_each_batch(
    segment: &Segment,
    io: &throttle::IoThrottle,
    mut visit: impl FnMut(&Batch<'_>) -> Result<bool>,
) -> Result<u64> {
    let mut buf = Vec::new();
    let mut offset = segment.base_offset();
    let mut bytes_read = 0u64;
    while let Some(read) = segment.read(offset, READ_CHUNK_BYTES, None, &mut buf)? {
        bytes_read += read.len as u64;
        io.pace(read.len as u64);
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
    crate::segment::transient_segment_file_path(dir, base_offset, SegmentFileKind::Log, suffix)
}
