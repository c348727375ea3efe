//! Removing data: [`Log::truncate_to`], the durable move of the log start offset in
//! [`Log::delete_records_before`], and the reaping of `.deleted` files once no reader pins
//! their segment ([`PendingDelete`]), which retention and compaction share.
//!
//! A truncation runs under the writer mutex throughout, in the order that keeps a crash
//! part-way a prefix of the old log (ARCHITECTURE.md §3, invariant 15).

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::segment::{DELETED_SUFFIX, Segment, rename_segment_files};

use crate::log::segments::snapshot::{SegmentHandle, SegmentList};
use crate::log::{Shared, Writer};

impl Shared {
    /// See [`Log::truncate_to`](crate::Log::truncate_to).
    pub(in crate::log) fn truncate_to(&self, offset: i64) -> Result<i64> {
        self.check_writable()?;
        if offset < 0 {
            return Err(Error::InvalidArgument {
                why: format!("cannot truncate to negative offset {offset}"),
            });
        }
        let shared = self;
        let mut writer = shared.writer.lock();
        if offset >= writer.tail.log_end_offset() {
            // Kafka's `truncateTo` above the log end only cuts the epoch cache there: an epoch
            // recorded at the log end (a leader elected there) that never wrote goes.
            shared
                .replication
                .epochs()
                .truncate_from_end(writer.tail.log_end_offset())?;
            return Ok(writer.tail.log_end_offset());
        }
        let result = shared.truncate_locked(&mut writer, offset);
        if result.is_err() {
            // A half-done truncation leaves files the in-memory state no longer describes.
            shared.durability.poison();
        }
        result
    }

    /// See [`Log::delete_records_before`](crate::Log::delete_records_before).
    pub(in crate::log) fn delete_records_before(&self, offset: i64) -> Result<()> {
        self.check_writable()?;
        let shared = self;
        let mut writer = loop {
            let writer = shared.writer.lock();
            let end = writer.tail.log_end_offset();
            let start = shared.view.log_start();
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
            // Kafka's `maybeIncrementLogStartOffset`: nothing at or above the high watermark
            // goes.
            if let Some(high_watermark) = shared.replication.high_watermark_if_set()
                && offset > high_watermark
            {
                return Err(Error::OffsetOutOfRange {
                    requested: offset,
                    start,
                    end: high_watermark,
                });
            }
            // The records below the new start are made durable first: a crash that took some
            // back would leave the log ending below its start, and the open would restart it
            // empty there, forgetting the producers the live log knows by them (ARCHITECTURE.md
            // §9). Under the writer lock the durable offset does not move down.
            if shared.durability.durable_offset() >= offset {
                break writer;
            }
            drop(writer);
            match shared.sync_through(offset - 1) {
                // A truncation took offsets below `offset`: the checks above run again.
                Ok(()) | Err(Error::Truncated { .. }) => {}
                Err(error) => return Err(error),
            }
        };
        let recovery_point = writer.points.recovery_point();
        shared.write_checkpoint_durably(&mut writer, recovery_point, offset)?;
        shared.view.set_log_start(offset);
        // Producers stay until they expire, even those whose data now lies below the start
        // (KIP-360); ended transactions below it are forgotten.
        writer.producers.on_log_start_incremented(offset);
        shared.txn.publish(&writer.producers);
        // After the start is durable: a crash before this leaves entries below the start, which
        // the next open clamps.
        shared.replication.epochs().truncate_from_start(offset)?;
        Ok(())
    }

    pub(in crate::log) fn truncate_locked(&self, writer: &mut Writer, offset: i64) -> Result<i64> {
        self.consume_clean_shutdown(writer)?;
        let list = self.view.segments().load();
        let handles = list.handles();
        // Kafka's `LocalLog.truncateTo` deletes only the segments whose base lies above the
        // target: one that begins exactly there stays, emptied, as the active segment (with its
        // roll's producer snapshot, which describes the state at its base).
        let keep = handles.partition_point(|h| h.base_offset() <= offset);
        let holder = match keep {
            0 => None,
            _ => Some(
                self.view
                    .segments()
                    .pin(&handles[keep - 1])?
                    .ok_or_else(|| Error::InvalidArgument {
                        why: "the segment list changed during a truncation".into(),
                    })?,
            ),
        };
        // A batch that straddles `offset` goes whole: the real new end may lie below it.
        let new_end = match &holder {
            Some(segment) => segment.truncation_point(offset)?,
            None => offset,
        };
        // Counted, with its cut, before anything changes: a durability wait for an offset at
        // or above the cut fails from here on, and a pass that planned before sees the count
        // move (`truncations.rs`).
        let _truncation = self.view.truncations().begin(new_end);

        // Offsets from the new end on will be reused: compaction's persisted first dirty
        // offset must not cover them, even after a crash from here on.
        self.files
            .cleaner_checkpoint()
            .lower_to(&*self.storage, &self.dir, new_end)?;
        // 1. The checkpoint first: recovery must never trust bytes above the new end.
        let log_start = self.view.log_start().min(new_end);
        writer.points.record_cut(new_end, log_start)?;
        self.view.set_log_start(log_start);
        // 2. The epoch cache forgets the epochs that start in the records going, durably. After
        //    step 1 a crash makes the next open scan from at most the new end, and that scan
        //    assigns again the epochs of whatever batches the crash left above it; a high
        //    watermark above the new end comes down to it.
        self.replication.epochs().truncate_from_end(new_end)?;
        self.replication.lower_to(new_end);

        let (kept, removed) = match &holder {
            None => {
                // Everything lies above `offset`: start over with an empty segment there (no
                // existing segment has that base, so no file name collides).
                let handle = self.create_empty_segment(offset)?;
                writer.tail.mark_dir_dirty();
                (vec![handle], handles.to_vec())
            }
            Some(_) => (handles[..keep].to_vec(), handles[keep..].to_vec()),
        };
        // 3. Later segments leave the snapshot and are renamed `.deleted`, the last one first,
        //    and the directory is synced, all before the segment holding the new end is cut.
        //    A crash part-way then leaves a prefix of the old log: with the renames durable in
        //    order, the segments that remain are contiguous. Cutting the holder first could
        //    leave it ending below the next segment's base, a gap that recovery of a compacted
        //    log must accept (compaction makes gaps), so the later segments would come back.
        let active_handle = Arc::clone(kept.last().ok_or_else(|| Error::InvalidArgument {
            why: "a truncation left no segment".into(),
        })?);
        self.retire_segments(writer, SegmentList::new(kept), &removed)?;
        // 4. Truncate the segment that holds the new end, and sync it.
        if let Some(segment) = &holder {
            segment.truncate_to(new_end, self.clock.now_ms())?;
            if segment.is_sealed() {
                segment.unseal()?;
            }
            segment.flush()?;
        }

        let active = self.pin_new_active(&active_handle)?;
        writer
            .tail
            .retain_unsynced(|s| s.base_offset() < active.base_offset());
        let new_end = active.next_offset();
        let old_end = writer.tail.replace_active(active, new_end);
        self.durability.truncate(new_end);
        self.view.set_log_end(new_end);
        if new_end < old_end {
            self.view.note_cut_from(old_end);
        }
        // Futures waiting for durability of a removed offset must look again; the durable
        // watermark only wakes them by itself if it moves down.
        self.durability.durable_mark().wake_all();
        self.reap_deleted(writer, false);
        // 5. The producer state as of the new end, before the lock goes: the next append is
        //    checked against it. Then its snapshot at the new end, as Kafka's `truncateTo`
        //    takes one (unless the snapshot it was loaded from lies there): the next open
        //    replays from here rather than from an older one.
        self.reload_producer_state(writer, new_end, self.high_watermark_at(new_end))?;
        if let Err(error) = self.take_producer_snapshot(writer) {
            if self.durability.is_poisoned() {
                return Err(error);
            }
            // The truncation is done and durable; a missing snapshot only lengthens a replay.
            log::warn!(
                "{}: no producer snapshot at {new_end} after the truncation: {error}",
                self.dir.display()
            );
        }
        Ok(new_end)
    }

    /// A new, empty segment at `offset`, open, for a truncation or a restart to make active
    /// (no segment of the log has that base).
    pub(in crate::log) fn create_empty_segment(&self, offset: i64) -> Result<Arc<SegmentHandle>> {
        let segment = Arc::new(Segment::create(
            &self.storage,
            &self.dir,
            offset,
            self.config.segment_config(0),
            self.clock.now_ms(),
        )?);
        self.view.segments().note_opened();
        Ok(SegmentHandle::opened(segment))
    }

    /// The segment of `handle`, which a truncation or a restart just listed last, to make
    /// active: pinned under the writer mutex, so nothing can have taken it out of the list.
    pub(in crate::log) fn pin_new_active(&self, handle: &SegmentHandle) -> Result<Arc<Segment>> {
        self.view
            .segments()
            .pin(handle)?
            .ok_or_else(|| Error::InvalidArgument {
                why: "the new active segment left the log".into(),
            })
    }

    /// Publishes `list` as the log's segments and retires `removed`: each is renamed `.deleted`,
    /// the last one first, and queued for deletion, then the directory is synced. The segments
    /// the handles had open are taken under the snapshot lock, so no reader can pin another
    /// instance from then on; a reader already holding one keeps reading it until it lets go.
    /// Shared by `truncate_to` and `truncate_fully_and_start_at`, whose crash order both rely
    /// on the renames being durable, in this order, before anything else is cut.
    pub(in crate::log) fn retire_segments(
        &self,
        writer: &mut Writer,
        list: Arc<SegmentList>,
        removed: &[Arc<SegmentHandle>],
    ) -> Result<()> {
        let open_removed = self.view.segments().swap(list, removed);
        for (handle, segment) in removed.iter().zip(open_removed).rev() {
            let paths = rename_segment_files(
                &*self.storage,
                &self.dir,
                handle.base_offset(),
                DELETED_SUFFIX,
            )?;
            writer.deletes.push(paths, segment);
        }
        self.storage.sync_dir(&self.dir)?;
        writer.tail.mark_dir_synced();
        Ok(())
    }
}
