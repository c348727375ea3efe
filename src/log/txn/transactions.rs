//! The producer state at the log level (ARCHITECTURE.md §9): idempotent appends, transaction
//! markers, the last stable offset, producer snapshots, and the replay that rebuilds the state
//! and the `.txnindex` files at open and after a truncation.
//!
//! The rules live in `producer_state/` (Kafka's `ProducerStateManager`), which does no I/O; this
//! file feeds it batches and writes what it decides:
//! - **Append.** A batch with a producer id is checked under the writer lock after its offsets
//!   are assigned and before the segment write ([`Shared::check_producer`]); a duplicate writes
//!   nothing. Once the write succeeded, [`Shared::commit_producer`] applies the change, appends
//!   the `AbortedTxn` of each ABORT marker to the `.txnindex` of the segment holding it, in
//!   batch order (a follower's call holds many producers' batches), and publishes the first
//!   unstable offset, all before the log end moves past the batch.
//! - **Snapshots** (`<offset>.snapshot`, FORMAT.md §9) at each roll, at the new segment's base
//!   (in place, fsynced by the flusher's next sync: [`Shared::take_roll_snapshot`]), and at
//!   close, at the log end, durably before the clean-shutdown record.
//! - **Open** (`recovery::producer_load`): the newest valid snapshot at or below where recovery
//!   began scanning (the log end after a clean shutdown), then a replay of every batch with a
//!   producer id from there to the log end (an unclean open first deletes the torn snapshots
//!   above the first segment it recovers, which a crash caught unsynced); the `.txnindex` of
//!   every segment recovery scanned is
//!   rebuilt by that replay. In those segments the scan has just checked every batch, so the
//!   replay reads only headers ([`Segment::visit_batch_headers`]); below them it reads whole
//!   batches and checks their CRCs.
//! - **Truncation** ([`Shared::reload_producer_state`]): the snapshots above the new end go, and
//!   the state is reloaded from the newest one left and replayed to the new end.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::{BatchHeader, ControlRecordType, EndTransactionMarker};
use crate::segment::AbortedTxn;

use super::producer_state::{
    AppendOrigin, BatchSummary, ProducerAppendCheck, ProducerAppendInfo, ProducerStateManager,
    snapshot_entry_of,
};
use super::replay::{Replay, ReplayRange, record_aborted, replay_segments, replay_state};
use crate::log::files::dir_listing::DirListing;
use crate::log::files::producer_snapshot::{
    SnapshotEntry, delete_snapshots_above, write_snapshot_file, write_unsynced_snapshot,
};
use crate::log::{Shared, Writer};

/// One producer's state as the log holds it (a read-only copy; Kafka's `ProducerStateEntry`
/// as `kafka-dump-log` prints it from a snapshot).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerStateEntry {
    /// The producer id.
    pub producer_id: i64,
    /// The producer's current epoch.
    pub producer_epoch: i16,
    /// The first sequence of the oldest batch the log remembers (-1 when none: after a marker
    /// of a new epoch).
    pub first_sequence: i32,
    /// The last sequence of the newest batch (-1 when none).
    pub last_sequence: i32,
    /// The last offset of the newest data batch (-1 when none).
    pub last_offset: i64,
    /// How many batches the log remembers for duplicate detection (at most 5; 1 right after a
    /// load from a snapshot, which stores only the newest).
    pub cached_batches: usize,
    /// The coordinator epoch of the producer's last marker (-1 when none).
    pub coordinator_epoch: i32,
    /// The timestamp of the producer's last batch or marker; expiration counts from it.
    pub last_timestamp: i64,
    /// The first offset of the producer's open transaction.
    pub current_txn_first_offset: Option<i64>,
}

impl ProducerStateEntry {
    fn of(producer_id: i64, entry: &super::producer_state::ProducerStateEntry) -> Self {
        ProducerStateEntry {
            producer_id,
            producer_epoch: entry.producer_epoch,
            first_sequence: entry.first_seq(),
            last_sequence: entry.last_seq(),
            last_offset: entry.last_data_offset(),
            cached_batches: entry.batches.len(),
            coordinator_epoch: entry.coordinator_epoch,
            last_timestamp: entry.last_timestamp,
            current_txn_first_offset: entry.current_txn_first_offset,
        }
    }
}

impl Shared {
    /// See [`Log::replayed_aborted_from`](crate::Log::replayed_aborted_from).
    pub(in crate::log) fn replayed_aborted_from(&self, from: i64) -> Vec<AbortedTxn> {
        self.txn.replayed_aborted_in(from, i64::MAX)
    }

    /// See [`Log::register_transaction`](crate::Log::register_transaction).
    pub(in crate::log) fn register_transaction(
        &self,
        producer_id: i64,
        producer_epoch: i16,
    ) -> Result<()> {
        self.check_writable()?;
        if producer_id < 0 {
            return Err(Error::InvalidArgument {
                why: format!("a transaction needs a producer id, not {producer_id}"),
            });
        }
        let now = self.clock.now_ms();
        self.writer
            .lock()
            .producers
            .register_transaction(producer_id, producer_epoch, now);
        Ok(())
    }

    /// See [`Log::producer_state`](crate::Log::producer_state).
    pub(in crate::log) fn producer_state(&self, producer_id: i64) -> Option<ProducerStateEntry> {
        let writer = self.writer.lock();
        writer
            .producers
            .last_entry(producer_id)
            .map(|entry| ProducerStateEntry::of(producer_id, entry))
    }

    /// See [`Log::active_producers`](crate::Log::active_producers).
    pub(in crate::log) fn active_producers(&self) -> Vec<ProducerStateEntry> {
        let writer = self.writer.lock();
        writer
            .producers
            .entries()
            .into_iter()
            .map(|(producer_id, entry)| ProducerStateEntry::of(producer_id, entry))
            .collect()
    }

    /// See [`Log::first_unstable_offset`](crate::Log::first_unstable_offset).
    pub(in crate::log) fn first_unstable_offset(&self) -> Option<i64> {
        let first_unstable = self.txn.first_unstable();
        (first_unstable != i64::MAX).then(|| first_unstable.max(self.view.log_start()))
    }

    /// Checks a batch whose offsets are assigned against its producer's state. Batches without
    /// a producer id pass with one branch.
    pub(in crate::log) fn check_producer(
        &self,
        writer: &Writer,
        header: &BatchHeader,
        control: Option<(ControlRecordType, EndTransactionMarker)>,
        origin: AppendOrigin,
    ) -> Result<ProducerAppendCheck> {
        let summary = BatchSummary::from_header(header, control)?;
        writer.producers.analyze(&summary, origin)
    }

    /// Applies the checked appends of one call (one info per producer; none for batches
    /// without a producer id) once its batches are in the active segment, records the
    /// transactions its ABORT markers end in that segment's `.txnindex` in batch order
    /// ([`ProducerStateManager::commit_all`]), and publishes the first unstable offset. Call it
    /// before the log end moves past the batches, with the high watermark once the log ends at
    /// `next_offset`.
    pub(in crate::log) fn commit_producer(
        &self,
        writer: &mut Writer,
        infos: impl IntoIterator<Item = ProducerAppendInfo>,
        next_offset: i64,
        high_watermark: i64,
    ) -> Result<()> {
        let mut infos = infos.into_iter().peekable();
        if infos.peek().is_none() {
            writer.producers.update_map_end_offset(next_offset);
            return Ok(());
        }
        let finished = writer.producers.commit_all(infos, next_offset);
        let segment = Arc::clone(writer.tail.active());
        let recorded = record_aborted(&segment, &finished);
        if finished.iter().any(|done| done.txn.is_aborted) {
            self.txn.note_txn_index(segment.base_offset());
        }
        // A bare log's high watermark is its end: a marker is below it once written. A set
        // high watermark keeps an unreplicated marker's transaction unstable.
        writer.producers.on_high_watermark_updated(high_watermark);
        self.txn.publish(&writer.producers);
        if let Err(error) = recorded {
            // The marker is in the log but its `.txnindex` entry is not: `read_committed`
            // readers would take the aborted data for committed.
            log::error!(
                "poisoning {}: an aborted transaction could not be indexed",
                self.dir.display()
            );
            self.durability.poison();
            return Err(error);
        }
        Ok(())
    }

    /// Drops the producers idle for `producer.id.expiration.ms` at `now_ms` (the maintenance
    /// thread runs it every `producer.id.expiration.check.interval.ms`).
    pub(in crate::log) fn remove_expired_producers(&self, now_ms: i64) {
        let mut writer = self.writer.lock();
        writer.producers.remove_expired_producers(now_ms);
        self.txn.publish(&writer.producers);
    }

    /// Writes the producer snapshot at the map end offset, unless one is there already. A
    /// read-only log writes none.
    ///
    /// A failure to write or fsync the snapshot's temporary file is returned and leaves the
    /// log as it was (the file is removed, and a missing snapshot only lengthens a replay). A
    /// failed fsync of the directory poisons the log: the directory holds the segments too, and
    /// the kernel may have dropped their entries with the snapshot's (ARCHITECTURE.md §8,
    /// "Failed fsyncs").
    pub(in crate::log) fn take_producer_snapshot(&self, writer: &mut Writer) -> Result<()> {
        if self.read_only || !writer.producers.needs_snapshot() {
            return Ok(());
        }
        let offset = writer.producers.map_end_offset();
        let entries = snapshot_entries(&writer.producers);
        write_snapshot_file(&*self.storage, &self.dir, offset, &entries)?;
        if let Err(error) = self.storage.sync_dir(&self.dir) {
            log::error!(
                "poisoning {}: the directory fsync after the producer snapshot at {offset} \
                 failed: {error}",
                self.dir.display()
            );
            self.durability.poison();
            return Err(error);
        }
        writer.producers.snapshot_written(offset);
        Ok(())
    }

    /// [`take_producer_snapshot`](Self::take_producer_snapshot) at a roll, without its fsyncs:
    /// the snapshot is written and renamed into place under the writer lock, and joins
    /// `Writer::unsynced_snapshots`; the next sync of the flusher (or close) fsyncs it before
    /// the directory fsync ([`sync_roll_snapshots`](Self::sync_roll_snapshots)). The two fsyncs
    /// of the durable form cost a quarter of the page-cache append rate with 64 MiB segments
    /// (crates/partlog-bench/benches/README.md); why a snapshot that a crash caught unsynced is safe is in
    /// [`write_unsynced_snapshot`].
    pub(in crate::log) fn take_roll_snapshot(&self, writer: &mut Writer) -> Result<()> {
        if self.read_only || !writer.producers.needs_snapshot() {
            return Ok(());
        }
        let offset = writer.producers.map_end_offset();
        let entries = snapshot_entries(&writer.producers);
        let snapshot = write_unsynced_snapshot(&*self.storage, &self.dir, offset, &entries)?;
        writer.tail.note_unsynced_snapshot(snapshot);
        writer.producers.snapshot_written(offset);
        Ok(())
    }

    /// After a truncation to `new_end` (under the same hold of the writer lock): the snapshots
    /// above it go, and the state is reloaded from the newest one left and replayed to
    /// `new_end`, as Kafka's `truncateAndReload` does, under `high_watermark` (lowered to the
    /// new end already, if it was above it). The `.txnindex` entries above the new end went
    /// with the segment truncation.
    pub(in crate::log) fn reload_producer_state(
        &self,
        writer: &mut Writer,
        new_end: i64,
        high_watermark: i64,
    ) -> Result<()> {
        let log_start = self.view.log_start();
        // A roll's unsynced snapshot above the new end describes the cut data: its file goes
        // with the others below, durably.
        writer.tail.forget_snapshots_above(new_end);
        // Durably gone before any append reuses their offsets: a snapshot that came back
        // after a crash would describe records that are no longer there.
        if !delete_snapshots_above(&*self.storage, &self.dir, new_end)?.is_empty() {
            self.storage.sync_dir(&self.dir)?;
        }
        let (state, _) = replay_state(
            &*self.storage,
            &self.dir,
            &self.config,
            self.view.segments(),
            Replay {
                log_start_offset: log_start,
                log_end_offset: new_end,
                snapshot_limit: new_end,
                rebuild_txn_index_from: None,
                validated_from: None,
                delete_bad: true,
                collect_aborted: false,
                high_watermark,
                now_ms: self.clock.now_ms(),
                listed_snapshots: None,
            },
        )?;
        writer.producers = state;
        self.txn.publish(&writer.producers);
        Ok(())
    }
}

/// The highest base of a segment with a `.txnindex` file in `listing`, -1 when none has one.
pub(in crate::log) fn last_txn_index_base(listing: &DirListing) -> i64 {
    listing.txn_index_bases().last().copied().unwrap_or(-1)
}

impl Shared {
    /// A live read-only log's producer state after a poll found the log ending at `new_end`:
    /// the batches its writer appended since are replayed, or, when the view was rebuilt (a
    /// truncation by the writer), the state is loaded and replayed again from the start.
    ///
    /// The aborted transactions the replay meets are kept in memory
    /// ([`Shared::replayed_aborted`]): the writer appends a marker's `.txnindex` entry just
    /// after the marker, so a poll can see the marker first.
    pub(in crate::log) fn follow_live_producer_state(
        &self,
        writer: &mut Writer,
        new_end: i64,
        reloaded: bool,
    ) -> Result<()> {
        let map_end = writer.producers.map_end_offset();
        if reloaded || new_end < map_end {
            let (state, aborted) = replay_state(
                &*self.storage,
                &self.dir,
                &self.config,
                self.view.segments(),
                Replay {
                    log_start_offset: self.view.log_start(),
                    log_end_offset: new_end,
                    snapshot_limit: new_end,
                    rebuild_txn_index_from: None,
                    validated_from: None,
                    delete_bad: false,
                    collect_aborted: true,
                    high_watermark: i64::MAX,
                    now_ms: self.clock.now_ms(),
                    listed_snapshots: None,
                },
            )?;
            writer.producers = state;
            self.txn.replace_replayed_aborted(aborted);
        } else if new_end > map_end {
            let mut aborted = Vec::new();
            replay_segments(
                &mut writer.producers,
                self.view.segments(),
                ReplayRange {
                    from: map_end,
                    to: new_end,
                    rebuild_txn_index_from: None,
                    validated_from: None,
                    high_watermark: i64::MAX,
                },
                Some(&mut aborted),
            )?;
            self.txn.extend_replayed_aborted(aborted);
        }
        self.txn.publish(&writer.producers);
        Ok(())
    }
}

/// The snapshot entries of `state`: the newest batch of each producer, by ascending id.
fn snapshot_entries(state: &ProducerStateManager) -> Vec<SnapshotEntry> {
    state
        .entries()
        .into_iter()
        .map(|(producer_id, entry)| snapshot_entry_of(producer_id, entry))
        .collect()
}
