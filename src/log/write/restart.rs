//! [`Log::truncate_fully_and_start_at`]: Kafka's `truncateFullyAndStartAt`, for a follower whose
//! fetch offset fell below its leader's log start, or a Raft log that installed a snapshot past
//! its last entry. Every segment goes and the log restarts empty at the offset.
//!
//! The order makes a crash at any point reopen the log either as it was or as the new empty log
//! (ARCHITECTURE.md §11), for an offset at or above the log end offset:
//! 1. the producer snapshots go (durably): until step 2 the old log reopens and replays its
//!    producer state from the segments, which is the same state;
//! 2. the checkpoint records the new log start: from here the next open finds the log ending
//!    below its start and restarts it empty there, clearing the epoch cache and the producer
//!    state, as Kafka's loader does;
//! 3. the epoch cache is cleared (durably);
//! 4. the new active segment is created at the offset (or the empty active segment already
//!    there is kept), then the old segments leave the snapshot, are renamed `.deleted`, the last
//!    one first, and the directory is synced; a leftover old segment below the new one is cut
//!    at the gap or lies below the start, so the next open still finds the new empty log;
//! 5. the checkpoint records the recovery point at the new start, with its `COMPACTED` flag
//!    cleared: no segment with a gap is left.
//!
//! An offset below the log end offset first truncates the log to it ([`Log::truncate_to`]'s
//! durable sequence), so a crash during that part leaves a prefix of the old log, as a
//! truncation does.

use std::sync::Arc;

use crate::error::{Error, Result};

use crate::log::files::producer_snapshot::delete_snapshots_above;
use crate::log::segments::snapshot::SegmentList;
use crate::log::txn::producer_state::{ProducerStateConfig, ProducerStateManager};
use crate::log::{Shared, Writer};

impl Shared {
    /// See [`Log::truncate_fully_and_start_at`](crate::Log::truncate_fully_and_start_at).
    pub(in crate::log) fn truncate_fully_and_start_at(&self, offset: i64) -> Result<()> {
        self.check_writable()?;
        if !(0..=i64::MAX - i64::from(i32::MAX)).contains(&offset) {
            return Err(Error::InvalidArgument {
                why: format!("a log cannot restart at offset {offset}"),
            });
        }
        let shared = self;
        let mut writer = shared.writer.lock();
        self.check_writable()?;
        let result = (|| {
            shared.consume_clean_shutdown(&mut writer)?;
            if offset < writer.tail.log_end_offset() {
                shared.truncate_locked(&mut writer, offset)?;
            }
            shared.restart_locked(&mut writer, offset)
        })();
        if result.is_err() {
            shared.durability.poison();
        }
        result
    }

    /// Steps 1 to 4 of the module docs, for an `offset` at or above the log end offset.
    fn restart_locked(&self, writer: &mut Writer, offset: i64) -> Result<()> {
        // Every record goes: a wait for any of them fails from here on.
        let _truncation = self.view.truncations().begin(self.view.log_start());
        self.files
            .cleaner_checkpoint()
            .lower_to(&*self.storage, &self.dir, offset)?;
        // 1. The producer snapshots, durably gone.
        // The rolls' unsynced snapshots are in place: the deletion below takes them too.
        drop(writer.tail.take_unsynced_snapshots());
        if !delete_snapshots_above(&*self.storage, &self.dir, -1)?.is_empty() {
            self.storage.sync_dir(&self.dir)?;
        }
        // 2. The new start.
        writer.points.record_cut(offset, offset)?;
        self.view.set_log_start(offset);
        // 3. The epoch cache.
        self.replication.epochs().clear()?;
        // 4. The new active segment, then the old ones go.
        let list = self.view.segments().load();
        let handles = list.handles();
        let reuse = handles
            .last()
            .filter(|h| h.base_offset() == offset && writer.tail.active().size() == 0)
            .cloned();
        let (new_handle, removed) = match reuse {
            Some(handle) => (handle, handles[..handles.len() - 1].to_vec()),
            None => (self.create_empty_segment(offset)?, handles.to_vec()),
        };
        self.retire_segments(
            writer,
            SegmentList::new(vec![Arc::clone(&new_handle)]),
            &removed,
        )?;
        let active = self.pin_new_active(&new_handle)?;
        if active.is_sealed() {
            active.unseal()?;
        }
        drop(writer.tail.take_unsynced_sealed());
        writer.tail.replace_active(active, offset);
        writer.points.set_recovery_point(offset);
        writer.points.reset_flush_counts();
        let mut producer_state =
            ProducerStateManager::new(ProducerStateConfig::from_log_config(&self.config), offset);
        producer_state.update_map_end_offset(offset);
        writer.producers = producer_state;
        self.txn.publish(&writer.producers);
        self.durability.restart_at(offset);
        self.view.set_log_end(offset);
        self.replication.restart_at(offset);
        self.durability.durable_mark().wake_all();
        self.reap_deleted(writer, false);
        // The old segments' renames are durable, and no `.swap` exists outside a swap (which
        // holds the writer lock): the directory holds no gap a crash could bring back, so the
        // log's records are no longer compacted.
        writer.points.forget_compaction();
        // The recovery point reaches the new start: nothing below it is left to recover.
        self.write_checkpoint_durably(writer, offset, offset)?;
        self.view.forget_compacted();
        Ok(())
    }
}
