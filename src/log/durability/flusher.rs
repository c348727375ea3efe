//! Durability off the append path: the group-commit sync of everything published
//! (`sync_through`, `sync_published`), the recovery-point writes to `partlog.checkpoint`, the
//! poisoning that a failed sync brings, and the flusher thread that drives them (ARCHITECTURE.md
//! §6).
//!
//! The flusher holds no lock while it syncs: it takes the writer mutex only to collect what to
//! sync and to record a recovery point.

use crate::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::segment::Segment;

use crate::log::files::checkpoint::{CheckpointFile, DurableWriteError};
use crate::log::observe;
use crate::log::{FlushPolicy, Log, LogConfig, LogEvent, Shared, Writer};

impl Log {
    /// Makes everything appended so far durable (Kafka's `UnifiedLog.flush()`): when it returns,
    /// [`durable_offset`](Self::durable_offset) has reached the log end offset as it stood when
    /// the call began, and the sealed segments' indexes are synced too. It joins or leads one
    /// group-commit fsync, as [`wait_durable`](Self::wait_durable) does, and succeeds at once on
    /// an empty log or one that is durable already.
    ///
    /// Fails with [`Error::Poisoned`] after a failed fsync (nothing more can be made durable),
    /// [`Error::Closed`] after close, and [`Error::Unsupported`] on a log opened read-only.
    pub fn sync(&self) -> Result<()> {
        self.check_writable()?;
        let shared = &self.shared;
        loop {
            let end = shared.view.log_end();
            if shared.commit.durable_offset() >= end {
                break;
            }
            match shared.sync_through(end - 1) {
                Ok(()) => break,
                // A truncation took `end - 1` away meanwhile: sync to where the log ends now.
                Err(Error::Truncated { .. }) => continue,
                Err(error) => return Err(error),
            }
        }
        // A roll with nothing appended after it leaves its sealed segment for the flusher: the
        // data may be durable while its indexes are not yet.
        shared.sync_sealed_segments()
    }

    /// Asks the flusher thread to run a group-commit sync now, without waiting for it.
    pub(crate) fn request_sync(&self) {
        self.shared.request_sync();
    }
}

impl Shared {
    /// See [`Log::request_sync`].
    pub(in crate::log) fn request_sync(&self) {
        self.flusher.lock().sync_requested = true;
        self.flusher_wake.notify_all();
    }

    /// Syncs everything published so far, through the group commit, until `offset` is durable.
    pub(in crate::log) fn sync_through(&self, offset: i64) -> Result<()> {
        let result = self.commit.wait_durable(offset, || self.sync_published());
        if result.is_err() && self.commit.is_poisoned() {
            // Waiters for data above the durable offset will never get it now.
            self.view.log_end_mark().wake_all();
        }
        result
    }

    /// The leader's sync: sealed segments not yet synced (data and indexes), the directory if a
    /// segment was created, then the active `.log` (data only: indexes are derived).
    fn sync_published(&self) -> Result<i64> {
        let durable_before = self.commit.durable_offset();
        let (target, sealed, snapshots, dir_dirty, active, truncations) = {
            let mut writer = crate::sync::lock_spinning(
                &self.writer,
                crate::log::write::append::WRITER_LOCK_SPIN,
            );
            (
                writer.log_end_offset,
                // Left in the list until synced, so that no recovery point passes them
                // while this sync runs (`Writer::recovery_point_bound`).
                writer.unsynced_sealed.clone(),
                std::mem::take(&mut writer.unsynced_snapshots),
                std::mem::take(&mut writer.dir_dirty),
                Arc::clone(&writer.active),
                self.view.truncations().sequence(),
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
            // The rolls' producer snapshots, synced before the directory fsync makes their
            // names durable.
            let snapshots_synced = self.sync_roll_snapshots(&snapshots)?;
            if dir_dirty || snapshots_synced {
                self.storage.sync_dir(&self.dir)?;
            }
            active.flush_log()
        })();
        let duration = started.elapsed();
        self.counters
            .note_fsync(u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX));
        self.report_fsync(durable_before.min(target)..target, duration, &result);
        if result.is_ok() {
            self.forget_synced_sealed(&sealed, truncations);
        }
        result.map(|()| target)
    }

    /// Writes a recovery-point checkpoint slot (not fsynced: ARCHITECTURE.md §6) once the durable
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
                self.view.truncations().sequence(),
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
        if self.view.truncations().sequence() != truncations
            || !Arc::ptr_eq(&writer.active, &active)
        {
            return Ok(());
        }
        let recovery_point = writer.recovery_point_bound(durable);
        if recovery_point <= writer.recovery_point {
            return Ok(());
        }
        let log_start = self.view.log_start();
        if let Some(checkpoint) = writer.checkpoint.as_mut() {
            checkpoint.write(recovery_point, log_start, None, false)?;
        }
        writer.recovery_point = recovery_point;
        // The bytes read above count as checkpointed only if the point covers the whole log:
        // one short of the end (a sync still in flight, or appends since) leaves them due, or a
        // durable offset that reached the end later would wait for the next append or for
        // `recovery_point_ms` (for ever on a stopped clock: tests/reliability_bitflips_crash.rs
        // waited 120 s for it).
        if recovery_point >= writer.log_end_offset {
            self.bytes_at_last_checkpoint
                .store(appended, Ordering::Relaxed);
        }
        *last_checkpoint_ms = now_ms;
        Ok(())
    }

    /// Makes every offset below `offset` durable and records a recovery point at or above it in
    /// a synced checkpoint slot, which sets the `COMPACTED` flag. Compaction calls it before a
    /// pass, with the active segment's base: every segment it cleans then lies below the
    /// recorded point, even after a crash, and no gap it leaves can reach the disk before the
    /// flag that makes gaps legal (ARCHITECTURE.md §3, invariant 5). (The flusher's
    /// recovery-point slots are not synced, so the point held in memory may not be on disk
    /// yet: this always syncs one.)
    ///
    /// Returns whether every offset below `offset` now lies below a synced recovery point:
    /// `false` when a truncation overtook the call, and the pass must then clean nothing.
    pub(in crate::log) fn record_recovery_point_through(&self, offset: i64) -> Result<bool> {
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
        self.sync_sealed_segments()?;
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
            .view
            .segments()
            .load()
            .handles()
            .binary_search_by_key(&offset, |handle| handle.base_offset())
            .is_ok();
        if writer.recovery_point_bound(self.commit.durable_offset()) < offset || !is_segment_base {
            return Ok(false);
        }
        // The sealed segments below `offset` had their indexes synced with their data. The
        // point held in memory never exceeds the durable offset.
        let recovery_point = writer.recovery_point.max(offset);
        let log_start = self.view.log_start();
        self.write_checkpoint_compacted(&mut writer, recovery_point, log_start)?;
        // Before the pass swaps anything in, so that no reader meets a gap without it.
        self.view.mark_compacted();
        writer.recovery_point = recovery_point;
        Ok(true)
    }

    /// Syncs the sealed segments still waiting for the flusher (data and indexes) and takes
    /// them off the list. A durable offset at or above a sealed segment's end says only that
    /// its `.log` is synced (a group commit may have synced it while it was active); its index
    /// entries, which recovery trusts below a recovery point, may not be.
    pub(in crate::log) fn sync_sealed_segments(&self) -> Result<()> {
        let (sealed, truncations) = {
            let writer = self.writer.lock();
            (
                writer.unsynced_sealed.clone(),
                self.view.truncations().sequence(),
            )
        };
        if let Err(error) = self.flush_sealed_alone(&sealed) {
            return Err(self.poison_after_failed_sync("syncing a sealed segment", error));
        }
        self.forget_synced_sealed(&sealed, truncations);
        Ok(())
    }

    /// Syncs sealed segments outside the group commit (data, metadata and indexes), and
    /// reports it like a group commit's sync: an observer watching syncs for failures must see
    /// the one that poisoned the log, whichever path met it. The caller poisons on failure.
    pub(in crate::log) fn flush_sealed_alone(&self, sealed: &[Arc<Segment>]) -> Result<()> {
        let Some(last) = sealed.last() else {
            return Ok(());
        };
        let end = last.next_offset();
        let durable_before = self.commit.durable_offset();
        let started = Instant::now();
        let result = sealed.iter().try_for_each(|segment| segment.flush_sealed());
        self.report_fsync(durable_before.min(end)..end, started.elapsed(), &result);
        result
    }

    /// Tells the observer how a sync of log data went.
    fn report_fsync(&self, offsets: std::ops::Range<i64>, duration: Duration, result: &Result<()>) {
        observe::notify(
            self.config.observer.as_ref(),
            LogEvent::Fsync {
                offsets,
                duration,
                result: result.as_ref().map(|_| ()),
            },
        );
    }

    /// Takes the sealed segments a sync just completed off the unsynced list, unless a
    /// truncation came since the list was read (`truncations`): it may have made one of them
    /// active again, appended to it, and a roll sealed it again, unsynced, under the same
    /// `Arc`. They then stay listed, and the next sync syncs them again.
    fn forget_synced_sealed(&self, synced: &[Arc<Segment>], truncations: u64) {
        if synced.is_empty() {
            return;
        }
        let mut writer = self.writer.lock();
        if self.view.truncations().sequence() != truncations {
            return;
        }
        writer
            .unsynced_sealed
            .retain(|segment| !synced.iter().any(|done| Arc::ptr_eq(done, segment)));
    }

    /// Writes a checkpoint slot with `recovery_point` and `log_start` and syncs it. A failed
    /// sync poisons the log (ARCHITECTURE.md §8, "Failed fsyncs"): the kernel may have dropped
    /// the slot's pages, so what the file holds is unknown until a reopen reads it. A failed
    /// write is only returned: the synced slot is never the one written.
    pub(in crate::log) fn write_checkpoint_durably(
        &self,
        writer: &mut Writer,
        recovery_point: i64,
        log_start: i64,
    ) -> Result<()> {
        self.write_checkpoint_slot(writer, |checkpoint| {
            checkpoint.write_durable(recovery_point, log_start)
        })
    }

    /// [`write_checkpoint_durably`](Self::write_checkpoint_durably), setting the `COMPACTED`
    /// flag that every later slot carries: the log's records have been compacted, so offsets
    /// may be missing between segments. Called before the first such gap can exist on disk
    /// (FORMAT.md §6.2). The caller publishes the flag to readers.
    pub(in crate::log) fn write_checkpoint_compacted(
        &self,
        writer: &mut Writer,
        recovery_point: i64,
        log_start: i64,
    ) -> Result<()> {
        self.write_checkpoint_slot(writer, |checkpoint| {
            checkpoint.write_durable_compacted(recovery_point, log_start)
        })
    }

    /// Runs one durable write of the checkpoint; a failed sync poisons the log.
    fn write_checkpoint_slot(
        &self,
        writer: &mut Writer,
        write: impl FnOnce(&mut CheckpointFile) -> std::result::Result<u64, DurableWriteError>,
    ) -> Result<()> {
        let Some(checkpoint) = writer.checkpoint.as_mut() else {
            return Ok(());
        };
        match write(checkpoint) {
            Ok(_) => Ok(()),
            Err(DurableWriteError::Write(error)) => Err(error),
            Err(DurableWriteError::Sync(error)) => Err(self.poison_after_failed_sync(
                &format!("syncing {}", checkpoint.path().display()),
                error,
            )),
        }
    }

    /// Consumes a clean-shutdown record that still stands, under the writer lock, before the
    /// log's first change after a clean open: appends, rolls and full truncations call it
    /// (other changes write a durable checkpoint record first, which consumes it too). Until
    /// then a crash finds the clean record, which still describes the directory. A failed sync
    /// poisons the log, as in [`write_checkpoint_durably`](Self::write_checkpoint_durably).
    #[inline]
    pub(in crate::log) fn consume_clean_shutdown(&self, writer: &mut Writer) -> Result<()> {
        if writer
            .checkpoint
            .as_ref()
            .is_some_and(CheckpointFile::clean_shutdown_standing)
        {
            self.consume_standing_clean_shutdown(writer)
        } else {
            Ok(())
        }
    }

    #[cold]
    fn consume_standing_clean_shutdown(&self, writer: &mut Writer) -> Result<()> {
        // A closed log's record is close's own, and a poisoned log writes no checkpoint.
        if self.view.is_closed() {
            return Err(Error::Closed);
        }
        if self.commit.is_poisoned() {
            return Err(Error::Poisoned);
        }
        let recovery_point = writer.recovery_point;
        let log_start = self.view.log_start();
        let Some(checkpoint) = writer.checkpoint.as_mut() else {
            return Ok(());
        };
        match checkpoint.consume_clean_shutdown(recovery_point, log_start) {
            Ok(()) => Ok(()),
            Err(DurableWriteError::Write(error)) => Err(error),
            Err(DurableWriteError::Sync(error)) => Err(self.poison_after_failed_sync(
                &format!("syncing {}", checkpoint.path().display()),
                error,
            )),
        }
    }

    /// Poisons the log after a failed fsync (`what` says which), and returns its error.
    pub(in crate::log) fn poison_after_failed_sync(&self, what: &str, error: Error) -> Error {
        log::error!("poisoning {}: {what} failed: {error}", self.dir.display());
        self.commit.poison();
        self.view.log_end_mark().wake_all();
        error
    }
}

/// The flusher thread: roll fsyncs off the append path, interval flushes, recovery-point
/// checkpoints, and removal of unpinned `.deleted` files (ARCHITECTURE.md §6).
pub(in crate::log) fn flusher_loop(shared: &Shared) {
    let tick = flusher_tick(&shared.config);
    let mut last_flush_ms = shared.clock.now_ms();
    let mut last_checkpoint_ms = last_flush_ms;
    loop {
        let (roll_pending, sync_requested) = {
            let mut signal = shared.flusher.lock();
            if !signal.stop && !signal.roll_pending && !signal.sync_requested {
                shared.flusher_wake.wait_for(&mut signal, tick);
            }
            if signal.stop {
                return;
            }
            (
                std::mem::take(&mut signal.roll_pending),
                std::mem::take(&mut signal.sync_requested),
            )
        };
        let sync_due = roll_pending || sync_requested;
        if shared.commit.is_poisoned() {
            continue;
        }
        let now = shared.clock.now_ms();
        let end = shared.view.log_end();
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
        // A roll signals before the append that rolled publishes its batch, so the flusher can
        // find nothing above the durable offset and skip the sync above; the sealed segment's
        // indexes would then wait for the next append's sync, for ever on an idle log (found by
        // tests/reliability_concurrency.rs under load). An empty list makes this a no-op.
        if roll_pending && let Err(error) = shared.sync_sealed_segments() {
            log::error!(
                "syncing the sealed segments of {} failed: {error}",
                shared.dir.display()
            );
            continue;
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

impl Writer {
    /// The highest recovery point the log may record now: every offset below it must be
    /// durable with the index entries that recovery will trust (ARCHITECTURE.md §7). That
    /// stops at the oldest sealed segment whose sync has not completed: its `.log` may be
    /// durable (a group commit synced it while it was still active, which leaves the active
    /// segment's indexes alone) while its index entries and its final time-index entry are
    /// not, and recovery trusts the entries of every segment below the recovery point.
    fn recovery_point_bound(&self, durable_offset: i64) -> i64 {
        self.unsynced_sealed
            .iter()
            .map(|segment| segment.base_offset())
            .fold(durable_offset.min(self.log_end_offset), i64::min)
    }
}
