//! The recovery points and the other writes of `partlog.checkpoint` (ARCHITECTURE.md §6, §7):
//! the flusher's unsynced recovery-point slots, the synced ones that a pass, a move of the log
//! start or a gap needs, and the consumption of a standing clean-shutdown record before the
//! first change after a clean open. A failed sync of the file poisons the log.

use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};

use crate::log::files::checkpoint::{CHECKPOINT_FILE_NAME, DurableWriteError};
use crate::log::{Shared, Writer};

impl Shared {
    /// Writes a recovery-point checkpoint slot (not fsynced: ARCHITECTURE.md §6) once the durable
    /// offset has moved far enough, after syncing the active indexes it relies on.
    pub(in crate::log) fn maybe_write_recovery_point(
        &self,
        now_ms: i64,
        last_checkpoint_ms: &mut i64,
    ) -> Result<()> {
        let appended = self.counters.appended_bytes();
        // Under the writer lock, which a truncation holds throughout: the durable offset and
        // the truncation count are read between truncations, never in the middle of one.
        let (recovery_point, active, durable, truncations) = {
            let writer = self.writer.lock();
            (
                writer.points.recovery_point(),
                Arc::clone(writer.tail.active()),
                self.durability.durable_offset(),
                self.view.truncations().sequence(),
            )
        };
        if durable <= recovery_point {
            return Ok(());
        }
        let bytes_moved = appended.saturating_sub(self.durability.checkpointed_bytes());
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
            || !Arc::ptr_eq(writer.tail.active(), &active)
        {
            return Ok(());
        }
        let recovery_point = writer.tail.recovery_point_bound(durable);
        if recovery_point <= writer.points.recovery_point() {
            return Ok(());
        }
        let log_start = self.view.log_start();
        writer
            .points
            .write(recovery_point, log_start, None, false)?;
        writer.points.set_recovery_point(recovery_point);
        // The bytes read above count as checkpointed only if the point covers the whole log:
        // one short of the end (a sync still in flight, or appends since) leaves them due, or a
        // durable offset that reached the end later would wait for the next append or for
        // `recovery_point_ms` (for ever on a stopped clock: tests/reliability_bitflips_crash.rs
        // waited 120 s for it).
        if recovery_point >= writer.tail.log_end_offset() {
            self.durability.note_checkpointed_bytes(appended);
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
        if self.durability.durable_offset() < offset {
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
        if writer
            .tail
            .recovery_point_bound(self.durability.durable_offset())
            < offset
            || !is_segment_base
        {
            return Ok(false);
        }
        // The sealed segments below `offset` had their indexes synced with their data. The
        // point held in memory never exceeds the durable offset.
        let recovery_point = writer.points.recovery_point().max(offset);
        let log_start = self.view.log_start();
        self.write_checkpoint_compacted(&mut writer, recovery_point, log_start)?;
        // Before the pass swaps anything in, so that no reader meets a gap without it.
        self.view.mark_compacted();
        writer.points.set_recovery_point(recovery_point);
        Ok(true)
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
        let written = writer.points.write_durable(recovery_point, log_start);
        self.checkpoint_written(writer, written)
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
        let written = writer
            .points
            .write_durable_compacted(recovery_point, log_start);
        self.checkpoint_written(writer, written)
    }

    /// The outcome of a durable write of the checkpoint: a failed sync poisons the log.
    fn checkpoint_written(
        &self,
        writer: &Writer,
        written: std::result::Result<(), DurableWriteError>,
    ) -> Result<()> {
        match written {
            Ok(()) => Ok(()),
            Err(DurableWriteError::Write(error)) => Err(error),
            Err(DurableWriteError::Sync(error)) => {
                let path = writer
                    .points
                    .path()
                    .unwrap_or(Path::new(CHECKPOINT_FILE_NAME));
                Err(self.poison_after_failed_sync(&format!("syncing {}", path.display()), error))
            }
        }
    }

    /// Consumes a clean-shutdown record that still stands, under the writer lock, before the
    /// log's first change after a clean open: appends, rolls and full truncations call it
    /// (other changes write a durable checkpoint record first, which consumes it too). Until
    /// then a crash finds the clean record, which still describes the directory. A failed sync
    /// poisons the log, as in [`write_checkpoint_durably`](Self::write_checkpoint_durably).
    #[inline]
    pub(in crate::log) fn consume_clean_shutdown(&self, writer: &mut Writer) -> Result<()> {
        if writer.points.clean_shutdown_standing() {
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
        if self.durability.is_poisoned() {
            return Err(Error::Poisoned);
        }
        let log_start = self.view.log_start();
        let written = writer.points.consume_clean_shutdown(log_start);
        self.checkpoint_written(writer, written)
    }
}
