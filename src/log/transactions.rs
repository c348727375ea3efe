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
//! - **Open** ([`load_producer_state`]): the newest valid snapshot at or below where recovery
//!   began scanning (the log end after a clean shutdown), then a replay of every batch with a
//!   producer id from there to the log end (an unclean open first deletes the torn snapshots
//!   above the first segment it recovers, which a crash caught unsynced); the `.txnindex` of
//!   every segment recovery scanned is
//!   rebuilt by that replay. In those segments the scan has just checked every batch, so the
//!   replay reads only headers ([`Segment::visit_batch_headers`]); below them it reads whole
//!   batches and checks their CRCs.
//! - **Truncation** ([`Shared::reload_producer_state`]): the snapshots above the new end go, and
//!   the state is reloaded from the newest one left and replayed to the new end.

use crate::sync::atomic::Ordering;
use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::{
    AnyBatchIter, Batch, BatchHeader, ControlRecordType, EndTransactionMarker, build_control_batch,
    control_record_type,
};
use crate::segment::{AbortedTxn, Marker, Segment};
use crate::storage::Storage;

use super::config::LogConfig;
use super::dir_listing::DirListing;
use super::producer_state::snapshot_file::{
    SnapshotEntry, UnsyncedSnapshot, delete_listed_torn_above, delete_snapshots_above,
    list_snapshots, load_newest_valid_listed_snapshot, remove_listed_stray_snapshots,
    remove_listed_temporary_snapshots, retain_listed_snapshots_of_segments, write_snapshot_file,
    write_unsynced_snapshot,
};
use super::producer_state::{
    AppendOrigin, BatchSummary, FinishedTxn, ProducerAppendCheck, ProducerAppendInfo,
    ProducerStateConfig, ProducerStateManager, snapshot_entry_of,
};
use super::snapshot::Snapshot;
use super::{Log, LogAppendInfo, Shared, Writer};

/// How much a replay reads at once.
const REPLAY_CHUNK_BYTES: usize = 1 << 20;

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

impl Log {
    /// The aborted transactions whose ABORT marker lies at or above `from` that a read-only
    /// open's producer-state replay met, in marker order, each with the last stable offset that
    /// a writable open's replay writes into the `.txnindex` ([`upgrade_dir`](crate::upgrade_dir)
    /// writes them for the segments the source's open had to recover).
    pub(crate) fn replayed_aborted_from(&self, from: i64) -> Vec<AbortedTxn> {
        self.shared.replayed_aborted_in(from, i64::MAX)
    }

    /// Appends a transaction marker (a COMMIT or ABORT control batch, as a Kafka broker writes
    /// for its transaction coordinator) that ends `producer_id`'s open transaction on this
    /// partition, and returns where it landed.
    ///
    /// The marker is checked as Kafka checks one from the coordinator: an epoch below the
    /// producer's is [`Error::InvalidProducerEpoch`], a `coordinator_epoch` below the last one
    /// seen is [`Error::TransactionCoordinatorFenced`]; a marker for a producer with no open
    /// transaction is written and ends nothing. An ABORT records the transaction in the
    /// `.txnindex` of the segment that holds the marker, so that `read_committed` reads skip its
    /// data ([`Log::read_with`]).
    ///
    /// A `producer_id` below 0, or a `marker` other than COMMIT or ABORT, is
    /// [`Error::InvalidArgument`].
    pub fn append_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        marker: ControlRecordType,
        coordinator_epoch: i32,
    ) -> Result<LogAppendInfo> {
        self.append_marker_in_epoch(producer_id, producer_epoch, marker, coordinator_epoch)
            .map(|(info, _)| info)
    }

    /// [`append_marker`](Self::append_marker), with the truncation epoch of the append, for the
    /// batching writer's `acks=all` wait on the marker.
    pub(crate) fn append_marker_in_epoch(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        marker: ControlRecordType,
        coordinator_epoch: i32,
    ) -> Result<(LogAppendInfo, super::TruncationEpoch)> {
        self.check_writable()?;
        if producer_id < 0 {
            return Err(Error::InvalidArgument {
                why: format!("a transaction marker needs a producer id, not {producer_id}"),
            });
        }
        if !marker.is_transaction_marker() {
            return Err(Error::InvalidArgument {
                why: format!("{marker:?} is not a transaction marker (COMMIT or ABORT)"),
            });
        }
        let now = self.shared.clock.now_ms();
        let mut batch = build_control_batch(
            marker,
            producer_id,
            producer_epoch,
            coordinator_epoch,
            0,
            now,
        );
        self.append_built_from(&mut batch, &[], now, AppendOrigin::Coordinator)
    }

    /// Records that the transaction coordinator added this partition to `producer_id`'s
    /// transaction at `producer_epoch` (KIP-890's partition verification, in process). With
    /// [`LogConfig::transaction_partition_verification_enable`], a transaction's first batch is
    /// refused with [`Error::InvalidTxnState`] unless it was registered so: a late write from a
    /// fenced or aborted producer cannot open a transaction that no marker will close.
    pub fn register_transaction(&self, producer_id: i64, producer_epoch: i16) -> Result<()> {
        self.check_writable()?;
        if producer_id < 0 {
            return Err(Error::InvalidArgument {
                why: format!("a transaction needs a producer id, not {producer_id}"),
            });
        }
        let now = self.shared.clock.now_ms();
        self.shared
            .writer
            .lock()
            .producer_state
            .register_transaction(producer_id, producer_epoch, now);
        Ok(())
    }

    /// The state the log holds for `producer_id`, if any.
    pub fn producer_state(&self, producer_id: i64) -> Option<ProducerStateEntry> {
        let writer = self.shared.writer.lock();
        writer
            .producer_state
            .last_entry(producer_id)
            .map(|entry| ProducerStateEntry::of(producer_id, entry))
    }

    /// Every producer the log holds state for, by ascending producer id.
    pub fn active_producers(&self) -> Vec<ProducerStateEntry> {
        let writer = self.shared.writer.lock();
        writer
            .producer_state
            .entries()
            .into_iter()
            .map(|(producer_id, entry)| ProducerStateEntry::of(producer_id, entry))
            .collect()
    }

    /// The first offset of the earliest transaction that is open (or ended above the high
    /// watermark), if any, and never below the log start offset: a transaction whose first
    /// offset a move of the log start passed is unstable from the log start on (Kafka's
    /// `maybeIncrementFirstUnstableOffset`).
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.poll_live();
        let first_unstable = self.shared.first_unstable.load(Ordering::Acquire);
        (first_unstable != i64::MAX)
            .then(|| first_unstable.max(self.shared.log_start.load(Ordering::Acquire)))
    }

    /// The last stable offset: `read_committed` reads stop below it. It is the first unstable
    /// offset, or the high watermark when no transaction is unstable, and never below the log
    /// start. Until [`set_high_watermark`](Log::set_high_watermark) is called the log has one
    /// replica, so its high watermark is its log end offset (as a Kafka leader alone in its ISR
    /// has it).
    pub fn last_stable_offset(&self) -> i64 {
        self.poll_live();
        self.shared.last_stable_offset()
    }
}

impl Shared {
    /// See [`Log::last_stable_offset`]. The first unstable offset is read before the log end:
    /// an append publishes it before it moves the end past a transactional batch.
    pub(super) fn last_stable_offset(&self) -> i64 {
        let first_unstable = self.first_unstable.load(Ordering::Acquire);
        let high_watermark = self.high_watermark();
        let log_start = self.log_start.load(Ordering::Acquire);
        first_unstable.min(high_watermark).max(log_start)
    }

    /// Checks a batch whose offsets are assigned against its producer's state. Batches without
    /// a producer id pass with one branch.
    pub(super) fn check_producer(
        &self,
        writer: &Writer,
        header: &BatchHeader,
        control: Option<(ControlRecordType, EndTransactionMarker)>,
        origin: AppendOrigin,
    ) -> Result<ProducerAppendCheck> {
        let summary = BatchSummary::from_header(header, control)?;
        writer.producer_state.analyze(&summary, origin)
    }

    /// Applies the checked appends of one call (one info per producer; none for batches
    /// without a producer id) once its batches are in the active segment, records the
    /// transactions its ABORT markers end in that segment's `.txnindex` in batch order
    /// ([`ProducerStateManager::commit_all`]), and publishes the first unstable offset. Call it
    /// before the log end moves past the batches.
    pub(super) fn commit_producer(
        &self,
        writer: &mut Writer,
        infos: impl IntoIterator<Item = ProducerAppendInfo>,
        next_offset: i64,
    ) -> Result<()> {
        let mut infos = infos.into_iter().peekable();
        if infos.peek().is_none() {
            writer.producer_state.update_map_end_offset(next_offset);
            return Ok(());
        }
        let finished = writer.producer_state.commit_all(infos, next_offset);
        let segment = Arc::clone(&writer.active);
        let recorded = record_aborted(&segment, &finished);
        if finished.iter().any(|done| done.txn.is_aborted) {
            self.last_txn_index_base
                .fetch_max(segment.base_offset(), Ordering::AcqRel);
        }
        // A bare log's high watermark is its end: a marker is below it once written. A set
        // high watermark keeps an unreplicated marker's transaction unstable.
        let high_watermark = self.high_watermark_at(next_offset);
        writer
            .producer_state
            .on_high_watermark_updated(high_watermark);
        self.publish_first_unstable(writer);
        if let Err(error) = recorded {
            // The marker is in the log but its `.txnindex` entry is not: `read_committed`
            // readers would take the aborted data for committed.
            log::error!(
                "poisoning {}: an aborted transaction could not be indexed",
                self.dir.display()
            );
            self.commit.poison();
            return Err(error);
        }
        Ok(())
    }

    /// Drops the producers idle for `producer.id.expiration.ms` at `now_ms` (the maintenance
    /// thread runs it every `producer.id.expiration.check.interval.ms`).
    pub(super) fn remove_expired_producers(&self, now_ms: i64) {
        let mut writer = self.writer.lock();
        writer.producer_state.remove_expired_producers(now_ms);
        self.publish_first_unstable(&writer);
    }

    /// Publishes the producer state's first unstable offset for readers.
    pub(super) fn publish_first_unstable(&self, writer: &Writer) {
        let first_unstable = writer
            .producer_state
            .first_unstable_offset()
            .unwrap_or(i64::MAX);
        self.first_unstable.store(first_unstable, Ordering::Release);
    }

    /// Writes the producer snapshot at the map end offset, unless one is there already. A
    /// read-only log writes none.
    ///
    /// A failure to write or fsync the snapshot's temporary file is returned and leaves the
    /// log as it was (the file is removed, and a missing snapshot only lengthens a replay). A
    /// failed fsync of the directory poisons the log: the directory holds the segments too, and
    /// the kernel may have dropped their entries with the snapshot's (ARCHITECTURE.md §8,
    /// "Failed fsyncs").
    pub(super) fn take_producer_snapshot(&self, writer: &mut Writer) -> Result<()> {
        if self.read_only || !writer.producer_state.needs_snapshot() {
            return Ok(());
        }
        let offset = writer.producer_state.map_end_offset();
        let entries = snapshot_entries(&writer.producer_state);
        write_snapshot_file(&*self.storage, &self.dir, offset, &entries)?;
        if let Err(error) = self.storage.sync_dir(&self.dir) {
            log::error!(
                "poisoning {}: the directory fsync after the producer snapshot at {offset} \
                 failed: {error}",
                self.dir.display()
            );
            self.commit.poison();
            return Err(error);
        }
        writer.producer_state.snapshot_written(offset);
        Ok(())
    }

    /// [`take_producer_snapshot`](Self::take_producer_snapshot) at a roll, without its fsyncs:
    /// the snapshot is written and renamed into place under the writer lock, and joins
    /// `Writer::unsynced_snapshots`; the next sync of the flusher (or close) fsyncs it before
    /// the directory fsync ([`sync_roll_snapshots`](Self::sync_roll_snapshots)). The two fsyncs
    /// of the durable form cost a quarter of the page-cache append rate with 64 MiB segments
    /// (crates/partlog-bench/benches/README.md); why a snapshot that a crash caught unsynced is safe is in
    /// [`write_unsynced_snapshot`].
    pub(super) fn take_roll_snapshot(&self, writer: &mut Writer) -> Result<()> {
        if self.read_only || !writer.producer_state.needs_snapshot() {
            return Ok(());
        }
        let offset = writer.producer_state.map_end_offset();
        let entries = snapshot_entries(&writer.producer_state);
        // A truncation that removed the segment at this base may have left a roll's snapshot
        // at the same offset pending: this one has replaced its file.
        writer
            .unsynced_snapshots
            .retain(|snapshot| snapshot.offset != offset);
        let snapshot = write_unsynced_snapshot(&*self.storage, &self.dir, offset, &entries)?;
        writer.unsynced_snapshots.push(snapshot);
        writer.dir_dirty = true;
        writer.producer_state.snapshot_written(offset);
        Ok(())
    }

    /// Fsyncs the rolls' snapshots `pending` (taken from `Writer::unsynced_snapshots`). Returns
    /// whether there were any: the directory then needs its fsync. One a truncation deleted
    /// since is synced through its handle all the same, which is harmless.
    pub(super) fn sync_roll_snapshots(&self, pending: &[UnsyncedSnapshot]) -> Result<bool> {
        for snapshot in pending {
            snapshot.sync(&*self.storage)?;
        }
        Ok(!pending.is_empty())
    }

    /// After a truncation to `new_end` (under the same hold of the writer lock): the snapshots
    /// above it go, and the state is reloaded from the newest one left and replayed to
    /// `new_end`, as Kafka's `truncateAndReload` does. The `.txnindex` entries above the new end
    /// went with the segment truncation.
    pub(super) fn reload_producer_state(&self, writer: &mut Writer, new_end: i64) -> Result<()> {
        let log_start = self.log_start.load(Ordering::Acquire);
        // A roll's unsynced snapshot above the new end describes the cut data: its file goes
        // with the others below, durably.
        writer
            .unsynced_snapshots
            .retain(|snapshot| snapshot.offset <= new_end);
        // Durably gone before any append reuses their offsets: a snapshot that came back
        // after a crash would describe records that are no longer there.
        if !delete_snapshots_above(&*self.storage, &self.dir, new_end)?.is_empty() {
            self.storage.sync_dir(&self.dir)?;
        }
        let (state, _) = replay_state(
            &*self.storage,
            &self.dir,
            &self.config,
            &self.snapshot,
            Replay {
                log_start_offset: log_start,
                log_end_offset: new_end,
                snapshot_limit: new_end,
                rebuild_txn_index_from: None,
                validated_from: None,
                delete_bad: true,
                collect_aborted: false,
                // Lowered to the new end already, if it was above it.
                high_watermark: self.high_watermark_at(new_end),
                now_ms: self.clock.now_ms(),
                listed_snapshots: None,
            },
        )?;
        writer.producer_state = state;
        self.publish_first_unstable(writer);
        Ok(())
    }
}

/// The highest base of a segment with a `.txnindex` file in `listing`, -1 when none has one.
pub(super) fn last_txn_index_base(listing: &DirListing) -> i64 {
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
    pub(super) fn follow_live_producer_state(
        &self,
        writer: &mut Writer,
        new_end: i64,
        reloaded: bool,
    ) -> Result<()> {
        let map_end = writer.producer_state.map_end_offset();
        if reloaded || new_end < map_end {
            let (state, aborted) = replay_state(
                &*self.storage,
                &self.dir,
                &self.config,
                &self.snapshot,
                Replay {
                    log_start_offset: self.log_start.load(Ordering::Acquire),
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
            writer.producer_state = state;
            *self.replayed_aborted.lock() = aborted;
        } else if new_end > map_end {
            let mut aborted = Vec::new();
            replay_segments(
                &mut writer.producer_state,
                &self.snapshot,
                ReplayRange {
                    from: map_end,
                    to: new_end,
                    rebuild_txn_index_from: None,
                    validated_from: None,
                    high_watermark: i64::MAX,
                },
                Some(&mut aborted),
            )?;
            self.replayed_aborted.lock().extend(aborted);
        }
        self.publish_first_unstable(writer);
        Ok(())
    }

    /// The aborted transactions a read-only log's replay met that overlap a fetch of
    /// `[offset, upper_bound)`, for [`Log::read_with`]'s list.
    pub(super) fn replayed_aborted_in(&self, offset: i64, upper_bound: i64) -> Vec<AbortedTxn> {
        self.replayed_aborted
            .lock()
            .iter()
            .filter(|txn| txn.first_offset < upper_bound && txn.last_offset >= offset)
            .copied()
            .collect()
    }
}

/// Appends the `AbortedTxn` of each aborted transaction in `finished` to `segment`'s
/// `.txnindex`.
fn record_aborted(segment: &Segment, finished: &[FinishedTxn]) -> Result<()> {
    for done in finished.iter().filter(|done| done.txn.is_aborted) {
        segment.append_aborted_txn(AbortedTxn {
            producer_id: done.txn.producer_id,
            first_offset: done.txn.first_offset,
            last_offset: done.txn.last_offset,
            last_stable_offset: done.last_stable_offset,
        })?;
    }
    Ok(())
}

/// The snapshot entries of `state`: the newest batch of each producer, by ascending id.
fn snapshot_entries(state: &ProducerStateManager) -> Vec<SnapshotEntry> {
    state
        .entries()
        .into_iter()
        .map(|(producer_id, entry)| snapshot_entry_of(producer_id, entry))
        .collect()
}

/// Where [`load_producer_state`] starts from.
pub(super) struct LoadFrom {
    pub(super) log_start_offset: i64,
    pub(super) log_end_offset: i64,
    /// The first segment an unclean recovery scanned: its `.txnindex` and those after it are
    /// rebuilt, so the replay starts at or below it.
    pub(super) first_recovered_base: Option<i64>,
    pub(super) read_only: bool,
    pub(super) now_ms: i64,
}

/// The producer state of a log just recovered (see the [module docs](self)), the aborted
/// transactions a read-only open's replay met, and the base from which a writable open rebuilt
/// the `.txnindex` files because it found an ABORT marker none listed.
pub(super) fn load_producer_state(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    config: &LogConfig,
    snapshot: &Snapshot,
    listing: &mut DirListing,
    from: LoadFrom,
) -> Result<(ProducerStateManager, Vec<AbortedTxn>, Option<i64>)> {
    let mut snapshots = listing.snapshot_offsets();
    if !from.read_only {
        // Kafka's removeStraySnapshots, and what no rename finished: a snapshot above the log
        // end (a crash between a snapshot and a truncation, or a lost tail), or below the
        // first segment, says nothing about this log. One at or below the start stays: it may
        // be all that knows the producers whose data lies below it (ARCHITECTURE.md §9).
        let temporary = remove_listed_temporary_snapshots(&**storage, dir, listing.names())?;
        listing.forget_all(&temporary);
        let first_base = first_segment_base(snapshot, from.log_start_offset);
        let mut removed = retain_listed_snapshots_of_segments(
            &**storage,
            dir,
            &snapshots,
            first_base,
            from.log_end_offset,
        )?;
        snapshots.retain(|offset| !removed.contains(offset));
        // An unclean open: a snapshot above the first recovered segment's base may be one a roll
        // wrote that the crash caught before the flusher synced it. A torn or empty one goes
        // (the load would only have passed over it, and it would outlive the open); a whole
        // one is right about the records below it, which recovery has just kept, and stays:
        // a broker's snapshots are left alone.
        if let Some(first_recovered) = from.first_recovered_base {
            let torn = delete_listed_torn_above(&**storage, dir, &snapshots, first_recovered)?;
            snapshots.retain(|offset| !torn.contains(offset));
            removed.extend(torn);
        }
        let bases: Vec<i64> = snapshot
            .load()
            .handles()
            .iter()
            .map(|handle| handle.base_offset())
            .collect();
        let strays = remove_listed_stray_snapshots(&**storage, dir, &snapshots, &bases)?;
        snapshots.retain(|offset| !strays.contains(offset));
        removed.extend(strays);
        for offset in removed {
            listing.forget(&super::producer_state::snapshot_file::snapshot_file_name(
                offset,
            ));
        }
    }
    // Kafka's rule: a segment whose `.txnindex` fails its sanity check is recovered, which
    // here means its index is rebuilt by the replay (with every later segment's). A read-only
    // open cannot rebuild it, and reports it.
    let scanned_from = from.first_recovered_base.unwrap_or(i64::MAX);
    let bad_txn_index = first_bad_txn_index(listing, snapshot, scanned_from)?;
    if let Some((base, error)) = &bad_txn_index {
        if from.read_only {
            return Err(error.duplicate());
        }
        log::warn!(
            "{}: the aborted-transaction index of the segment at {base} is unusable ({error}); \
             rebuilding it from the log",
            dir.display()
        );
    }
    let rebuild_txn_index_from = if from.read_only {
        None
    } else {
        match (
            from.first_recovered_base,
            bad_txn_index.map(|(base, _)| base),
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    };
    // A read-only open of a log that needs recovery cannot rebuild the `.txnindex` files of the
    // segments it scanned, which a crash may have left without their last entries (Kafka
    // creates the file lazily): its replay starts at or below the first of them, so that the
    // aborted transactions there are known in memory ([`Shared::replayed_aborted`]).
    let replay_limit = if from.read_only {
        from.first_recovered_base
    } else {
        rebuild_txn_index_from
    };
    let replay = |rebuild_txn_index_from: Option<i64>, limit: Option<i64>| Replay {
        log_start_offset: from.log_start_offset,
        log_end_offset: from.log_end_offset,
        snapshot_limit: limit.unwrap_or(from.log_end_offset),
        rebuild_txn_index_from,
        validated_from: from.first_recovered_base,
        delete_bad: !from.read_only,
        collect_aborted: from.read_only,
        high_watermark: i64::MAX,
        now_ms: from.now_ms,
        // A corrupt snapshot this load deletes stays in `listing`: no later step of the
        // open reads snapshots from it.
        listed_snapshots: Some(snapshots.clone()),
    };
    let mut loaded = replay_state(
        &**storage,
        dir,
        config,
        snapshot,
        replay(rebuild_txn_index_from, replay_limit),
    )?;
    let mut rebuilt_from = None;
    if !from.read_only
        && let Some(base) =
            super::derived_repair::first_unlisted_abort(&loaded.0, snapshot, from.log_start_offset)?
        && rebuild_txn_index_from.is_none_or(|rebuilt| base < rebuilt)
    {
        log::warn!(
            "{}: the segment at {base} holds an ABORT marker that its .txnindex does not list \
             (the file was lost or cut); rebuilding the .txnindex files from there",
            dir.display()
        );
        loaded = replay_state(
            &**storage,
            dir,
            config,
            snapshot,
            replay(Some(base), Some(base)),
        )?;
        rebuilt_from = Some(base);
    }
    if !from.read_only && (rebuild_txn_index_from.is_some() || rebuilt_from.is_some()) {
        storage.sync_dir(dir)?;
        // The replay created `.txnindex` files: whoever reads the listing next must see them.
        *listing = DirListing::read(&**storage, dir)?;
    }
    Ok((loaded.0, loaded.1, rebuilt_from))
}

/// The first segment below `below` whose `.txnindex` fails its sanity check, with the error.
/// Only segments with a `.txnindex` file are opened.
fn first_bad_txn_index(
    listing: &DirListing,
    snapshot: &Snapshot,
    below: i64,
) -> Result<Option<(i64, Error)>> {
    let indexed = listing.txn_index_bases();
    let list = snapshot.load();
    for handle in list.handles() {
        let base = handle.base_offset();
        if base >= below || indexed.binary_search(&base).is_err() {
            continue;
        }
        let Some(segment) = snapshot.pin(handle)? else {
            continue;
        };
        match segment.txn_index_sanity_check() {
            Ok(()) => {}
            Err(error @ Error::Corrupt { .. }) => return Ok(Some((base, error))),
            Err(error) => return Err(error),
        }
    }
    Ok(None)
}

/// What [`replay_state`] loads and replays.
struct Replay {
    log_start_offset: i64,
    log_end_offset: i64,
    /// The newest snapshot at or below this is loaded.
    snapshot_limit: i64,
    /// The `.txnindex` of every segment from this base on is reset and rebuilt by the replay.
    rebuild_txn_index_from: Option<i64>,
    /// Every batch of the segments from this base on was read and checked by this open's
    /// recovery scan: the replay reads only their headers.
    validated_from: Option<i64>,
    /// Whether a corrupt snapshot is deleted (a writable log).
    delete_bad: bool,
    /// Whether the aborted transactions the replay meets are returned (a read-only log).
    collect_aborted: bool,
    /// The high watermark the replayed state ends under: a transaction whose marker lies at or
    /// above it stays unstable (`i64::MAX`: the replayed end, a log with one replica).
    high_watermark: i64,
    now_ms: i64,
    /// The snapshot offsets of a listing of the directory the caller took (ascending); `None`
    /// lists it here.
    listed_snapshots: Option<Vec<i64>>,
}

/// The base of the log's first segment (`fallback` with none): where its records begin, the
/// log start or below it.
fn first_segment_base(snapshot: &Snapshot, fallback: i64) -> i64 {
    snapshot
        .load()
        .handles()
        .first()
        .map_or(fallback, |handle| handle.base_offset())
}

/// Loads the newest valid snapshot at or below `replay.snapshot_limit` (and not below the first
/// segment) and replays every batch with a producer id from its offset to the log end, or every
/// batch the segments hold with none. Batches below the log start are replayed too: a producer
/// whose data lies below the start stays until it expires (KIP-360), in the live log and so in
/// a reopened one.
fn replay_state(
    storage: &dyn Storage,
    dir: &Path,
    config: &LogConfig,
    snapshot: &Snapshot,
    replay: Replay,
) -> Result<(ProducerStateManager, Vec<AbortedTxn>)> {
    let settings = ProducerStateConfig::from_log_config(config);
    let first_base = first_segment_base(snapshot, replay.log_start_offset);
    let mut state = ProducerStateManager::new(settings, first_base);
    let limit = replay.snapshot_limit.min(replay.log_end_offset);
    let mut candidates = match replay.listed_snapshots {
        Some(listed) => listed,
        None => list_snapshots(storage, dir)?,
    };
    // One below the first segment knows nothing of the records between it and the segment.
    candidates.retain(|&offset| offset >= first_base);
    let loaded =
        load_newest_valid_listed_snapshot(storage, dir, &candidates, limit, replay.delete_bad)?;
    let replay_from = match loaded {
        Some(loaded) => {
            state.load_snapshot(loaded.snapshot, loaded.offset, replay.now_ms);
            loaded.offset
        }
        None => first_base,
    };
    let mut aborted = Vec::new();
    replay_segments(
        &mut state,
        snapshot,
        ReplayRange {
            from: replay_from,
            to: replay.log_end_offset,
            rebuild_txn_index_from: replay.rebuild_txn_index_from,
            validated_from: replay.validated_from,
            high_watermark: replay.high_watermark,
        },
        replay.collect_aborted.then_some(&mut aborted),
    )?;
    // As the live log did when its start moved there.
    state.on_log_start_incremented(replay.log_start_offset);
    Ok((state, aborted))
}

/// The batches [`replay_segments`] replays, and what it does beside.
struct ReplayRange {
    from: i64,
    to: i64,
    /// The `.txnindex` of every segment from this base on is reset and rebuilt.
    rebuild_txn_index_from: Option<i64>,
    /// The segments from this base on were checked by this open's recovery scan.
    validated_from: Option<i64>,
    /// As [`Replay::high_watermark`].
    high_watermark: i64,
}

/// Replays every batch with a producer id in `[range.from, range.to)` into `state`, with
/// replication rules, and moves its map end to `range.to`. The aborted transactions it ends go
/// to the `.txnindex` of their marker's segment when that index is being rebuilt, and to
/// `aborted` when given.
fn replay_segments(
    state: &mut ProducerStateManager,
    snapshot: &Snapshot,
    range: ReplayRange,
    mut aborted: Option<&mut Vec<AbortedTxn>>,
) -> Result<()> {
    let replay_from = range.from;
    let list = snapshot.load();
    let handles = list.handles();
    for (i, handle) in handles.iter().enumerate() {
        let base = handle.base_offset();
        if base >= range.to && range.rebuild_txn_index_from.is_none_or(|from| base < from) {
            break;
        }
        let rebuild = range
            .rebuild_txn_index_from
            .is_some_and(|from| base >= from);
        // The list is in base order: the next handle's base, found in O(1) (a search from the
        // front made this walk quadratic in the segment count).
        let next_base = handles.get(i + 1).map(|h| h.base_offset());
        if next_base.is_some_and(|next| next <= replay_from) && !rebuild {
            continue;
        }
        let Some(segment) = snapshot.pin(handle)? else {
            continue;
        };
        if rebuild {
            segment.txn_index().reset()?;
        }
        let from = replay_from.max(base);
        let mut replay_batch = |header: &BatchHeader, control: Option<Marker>| -> Result<()> {
            if header.producer_id < 0
                || header.last_offset() < replay_from
                || header.base_offset >= range.to
            {
                return Ok(());
            }
            let summary = BatchSummary::from_header(header, control)?;
            let finished = state.replay(&summary)?;
            state.on_high_watermark_updated((header.last_offset() + 1).min(range.high_watermark));
            if rebuild {
                record_aborted(&segment, &finished)?;
            }
            if let Some(aborted) = aborted.as_deref_mut() {
                aborted.extend(
                    finished
                        .iter()
                        .filter(|done| done.txn.is_aborted)
                        .map(|done| AbortedTxn {
                            producer_id: done.txn.producer_id,
                            first_offset: done.txn.first_offset,
                            last_offset: done.txn.last_offset,
                            last_stable_offset: done.last_stable_offset,
                        }),
                );
            }
            Ok(())
        };
        if range
            .validated_from
            .is_some_and(|validated| base >= validated)
        {
            // Recovery's scan has just read and checked every batch here: the headers are
            // enough, and only markers are read whole.
            segment.visit_batch_headers(from, &mut replay_batch)?;
        } else {
            replay_checked_batches(&segment, from, range.to, &mut replay_batch)?;
        }
        if rebuild {
            segment.txn_index().flush()?;
        }
    }
    state.update_map_end_offset(range.to);
    state.on_high_watermark_updated(range.to.min(range.high_watermark));
    Ok(())
}

/// Feeds `visit` every v2 batch of `segment` from `from` to `end`, each read whole and its CRC
/// checked, with the marker of a COMMIT or ABORT control batch (other control batches are
/// skipped), as [`Segment::visit_batch_headers`] does for bytes already checked.
fn replay_checked_batches(
    segment: &Segment,
    from: i64,
    end: i64,
    visit: &mut dyn FnMut(&BatchHeader, Option<Marker>) -> Result<()>,
) -> Result<()> {
    let mut scratch = Vec::new();
    let mut buffer = Vec::new();
    let mut offset = from;
    while offset < end {
        let Some(read) = segment.read(offset, REPLAY_CHUNK_BYTES, None, &mut buffer)? else {
            break;
        };
        let bytes = buffer.get(..read.len).unwrap_or_default();
        for (position, batch) in AnyBatchIter::new(bytes) {
            let batch = batch.map_err(|what| Error::Corrupt {
                file: segment.log_path(),
                position: read.position + position as u64,
                what,
            })?;
            let Batch::V2(view) = batch else { continue };
            let header = *view.header();
            let control = if header.is_control() {
                match view.records(&mut scratch)?.next() {
                    Some(record) => {
                        let record = record?;
                        let kind = control_record_type(&record)?;
                        if !kind.is_transaction_marker() {
                            continue;
                        }
                        Some((kind, EndTransactionMarker::parse(&record)?))
                    }
                    None => None,
                }
            } else {
                None
            };
            visit(&header, control)?;
        }
        if read.next_offset <= offset {
            break;
        }
        offset = read.next_offset;
    }
    Ok(())
}
