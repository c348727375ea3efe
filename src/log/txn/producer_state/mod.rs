//! The per-partition producer state: idempotent dedupe, transactions and the last stable offset
//! (Kafka's `ProducerStateManager`).
//!
//! [`ProducerStateManager`] holds, per producer id, a [`ProducerStateEntry`] (epoch, the last 5
//! batches, coordinator epoch, last timestamp, open transaction), the open transactions by first
//! offset, the ended ones whose marker is not yet below the high watermark, and the map end
//! offset (the offset after the last batch it has seen). It does no I/O: the log feeds it
//! [`BatchSummary`] values and writes the `.snapshot` and `.txnindex` files itself. It lives
//! under the writer mutex, as Kafka's lives under the log lock.
//!
//! # The rules
//!
//! A batch is checked against its producer's entry in this order (origin CLIENT; COORDINATOR
//! skips the sequence rules, REPLICATION skips every sequence rule and accepts old epochs):
//!
//! | the batch | outcome |
//! | --- | --- |
//! | same epoch, and `[baseSeq, lastSeq]` equals one of the ≤ 5 remembered batches | duplicate: nothing written; the original first and last offset |
//! | `epoch < current` | [`Error::InvalidProducerEpoch`] (47) |
//! | `epoch > current`, `baseSeq != 0`, and the producer has state | [`Error::OutOfOrderSequence`] (45) |
//! | same epoch, `baseSeq != lastSeq + 1` (after `i32::MAX` comes 0) | 45 (a retry older than the last 5 lands here) |
//! | no state for the pid (new, or expired) | any sequence accepted |
//! | non-transactional data while the pid has an open transaction | [`Error::InvalidTxnState`] (48) |
//! | transactional data opening a transaction, verification on, no registration at its epoch | 48 |
//! | marker with `coordinatorEpoch < stored` | [`Error::TransactionCoordinatorFenced`] (52) |
//!
//! A new epoch empties the 5-batch window. A marker for a producer without an open transaction
//! completes nothing, but still sets its epoch and coordinator epoch. Kafka checks KIP-890's
//! registration before the epoch and sequence; here it comes after them, so a fenced producer
//! hears 47 rather than 48. Either refuses the batch.
//!
//! The first unstable offset is the lowest first offset of the open transactions and of the
//! ended ones whose marker is not yet below the high watermark; the LSO is
//! `min(first unstable offset, high watermark)`, never below the log start.
//!
//! # How the log drives it
//!
//! - **Append** (after offsets are assigned, before the segment write), for a batch with
//!   `producer_id >= 0` only, so that other batches cost one branch:
//!   [`analyze`](ProducerStateManager::analyze) with [`AppendOrigin::Client`] (or
//!   [`AppendOrigin::Coordinator`] for a marker) returns either
//!   [`ProducerAppendCheck::Duplicate`] (write nothing, answer the original offsets) or
//!   [`ProducerAppendCheck::Append`] holding a validated [`ProducerAppendInfo`]. Once the segment
//!   write succeeded, [`commit`](ProducerStateManager::commit) applies it and returns the ended
//!   transactions with their `lastStableOffset`: each aborted one is the `AbortedTxn` to append
//!   to the `.txnindex` of the segment holding the marker. A failed write drops the info and
//!   leaves the state as it was.
//! - **Recovery replay and rebuild**: [`replay`](ProducerStateManager::replay) (origin
//!   REPLICATION: no sequence checks) for every batch with a producer id, in log order; its
//!   result rebuilds the `.txnindex` the same way.
//! - **Snapshots**: [`entries`](ProducerStateManager::entries) is the sorted view a snapshot
//!   writes (one 46-byte entry per producer from [`ProducerStateEntry`]'s `last_*` getters);
//!   write it at [`map_end_offset`](ProducerStateManager::map_end_offset) when
//!   [`needs_snapshot`](ProducerStateManager::needs_snapshot), then call
//!   [`snapshot_written`](ProducerStateManager::snapshot_written).
//!   [`load_snapshot`](ProducerStateManager::load_snapshot) loads a checked snapshot, dropping
//!   expired producers: it finds the open transactions at once and builds the producer table
//!   on first use (an open then costs about the reading of the file);
//!   `load_entries` loads entries built with
//!   [`ProducerStateEntry::from_snapshot`] at once. With no valid snapshot,
//!   load no entries at the log start offset. Kafka's `truncateAndReload(start, end)` is: delete
//!   the snapshots above `end` or at or below `start`; if
//!   `needs_reload(end)`, load the newest remaining one
//!   and replay from its offset to `end`; otherwise
//!   [`on_log_start_incremented(start)`](ProducerStateManager::on_log_start_incremented).
//! - **Log start moves** (retention, `delete_records_before`):
//!   [`on_log_start_incremented`](ProducerStateManager::on_log_start_incremented): producers
//!   stay until they expire, as in Kafka since KIP-360. **Everything goes**: `truncate_fully`.
//! - **Reads**: `lso` with the high watermark (the log end offset
//!   of a bare `Log`) and the log start; [`on_high_watermark_updated`](ProducerStateManager::on_high_watermark_updated)
//!   whenever the high watermark moves.
//! - **Maintenance**: [`remove_expired_producers`](ProducerStateManager::remove_expired_producers)
//!   every `producer.id.expiration.check.interval.ms`, on the log's clock.
//! - **KIP-890**: [`register_transaction`](ProducerStateManager::register_transaction) before a
//!   transaction's first write, when `transaction.partition.verification.enable` is on.

mod append_info;
mod entry;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::OnceLock;

use crate::error::{Error, Result};

use crate::log::config::LogConfig;
use crate::log::files::producer_snapshot::{CheckedSnapshot, SnapshotEntry};

pub(crate) use append_info::{
    AppendOrigin, BatchKind, BatchSummary, CompletedTxn, ProducerAppendInfo,
};
pub(crate) use entry::ProducerStateEntry;

/// The settings the producer state reads from a [`LogConfig`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProducerStateConfig {
    /// `producer.id.expiration.ms`.
    pub(crate) producer_id_expiration_ms: i64,
    /// `transaction.partition.verification.enable`.
    pub(crate) transaction_verification_enabled: bool,
}

impl ProducerStateConfig {
    /// The producer-state settings of `config`.
    pub(crate) fn from_log_config(config: &LogConfig) -> Self {
        ProducerStateConfig {
            producer_id_expiration_ms: config.producer_id_expiration_ms,
            transaction_verification_enabled: config.transaction_partition_verification_enable,
        }
    }
}

/// The outcome of [`ProducerStateManager::analyze`].
#[derive(Debug, Clone)]
pub(crate) enum ProducerAppendCheck {
    /// The batch re-sends one of its producer's last 5: write nothing, and answer with the
    /// offsets the original got.
    Duplicate {
        /// The original batch's first offset.
        first_offset: i64,
        /// The original batch's last offset.
        last_offset: i64,
    },
    /// The batch is valid; apply the info with [`ProducerStateManager::commit`] once written.
    Append(ProducerAppendInfo),
}

/// Batches without a producer id have no producer state; the log keeps them off this path.
fn check_producer_id(batch: &BatchSummary) -> Result<()> {
    if batch.producer_id < 0 {
        return Err(Error::InvalidArgument {
            why: format!(
                "batch at offset {} has no producer id ({})",
                batch.first_offset, batch.producer_id
            ),
        });
    }
    Ok(())
}

/// An ended transaction and the `lastStableOffset` its `.txnindex` entry records: the first
/// offset of the earliest *other* open transaction when the marker was written, or the marker's
/// offset + 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FinishedTxn {
    /// The transaction.
    pub(crate) txn: CompletedTxn,
    /// The `lastStableOffset` of its `.txnindex` entry.
    pub(crate) last_stable_offset: i64,
}

/// A transaction registered by the coordinator (KIP-890's verification state, reduced to what
/// an in-process coordinator needs: the epoch of the transaction and when it was registered).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct VerificationStateEntry {
    epoch: i16,
    timestamp: i64,
}

/// The producer state of one partition. See the module docs for how the log drives it.
#[derive(Debug, Clone)]
pub(crate) struct ProducerStateManager {
    config: ProducerStateConfig,
    producers: ProducerTable,
    verification_states: HashMap<i64, VerificationStateEntry>,
    /// Open transactions, keyed by (first offset, producer id). The producer id is in the key
    /// so that two entries of a damaged snapshot claiming one first offset cannot hide each
    /// other.
    ongoing_txns: BTreeSet<(i64, i64)>,
    /// Ended transactions whose marker is not yet below the high watermark, keyed as
    /// `ongoing_txns`, valued by the marker's offset.
    unreplicated_txns: BTreeMap<(i64, i64), i64>,
    /// The offset after the last batch seen: Kafka's `lastMapOffset`.
    last_map_offset: i64,
    /// The map end offset of the last snapshot written or loaded: Kafka's `lastSnapOffset`.
    last_snap_offset: i64,
}

impl ProducerStateManager {
    /// An empty state whose map starts at `log_start_offset`.
    pub(crate) fn new(config: ProducerStateConfig, log_start_offset: i64) -> Self {
        ProducerStateManager {
            config,
            producers: ProducerTable::default(),
            verification_states: HashMap::new(),
            ongoing_txns: BTreeSet::new(),
            unreplicated_txns: BTreeMap::new(),
            last_map_offset: log_start_offset,
            last_snap_offset: log_start_offset,
        }
    }

    /// The entry of `producer_id`, if the log has state for it.
    pub(crate) fn last_entry(&self, producer_id: i64) -> Option<&ProducerStateEntry> {
        self.producers.map().get(&producer_id)
    }

    /// How many producers the log has state for.
    #[cfg(test)]
    pub(crate) fn producer_count(&self) -> usize {
        self.producers.map().len()
    }

    /// Every producer's entry, in no particular order (no sort: an open with many producers
    /// looks at every one).
    pub(crate) fn entries_unordered(&self) -> impl Iterator<Item = (i64, &ProducerStateEntry)> {
        self.producers.map().iter().map(|(&pid, e)| (pid, e))
    }

    /// Every producer's entry, by ascending producer id: the order partlog writes a snapshot
    /// in (Kafka writes `HashMap` order and reads any).
    pub(crate) fn entries(&self) -> Vec<(i64, &ProducerStateEntry)> {
        let mut entries: Vec<_> = self
            .producers
            .map()
            .iter()
            .map(|(&pid, e)| (pid, e))
            .collect();
        entries.sort_unstable_by_key(|&(pid, _)| pid);
        entries
    }

    /// A fresh append for `producer_id` on top of its entry (Kafka's `prepareUpdate`).
    pub(crate) fn prepare_update(
        &self,
        producer_id: i64,
        origin: AppendOrigin,
    ) -> ProducerAppendInfo {
        let empty;
        let current = match self.producers.map().get(&producer_id) {
            Some(entry) => entry,
            None => {
                empty = ProducerStateEntry::empty();
                &empty
            }
        };
        ProducerAppendInfo::new(
            producer_id,
            current,
            origin,
            self.config.transaction_verification_enabled,
            self.verification_states
                .get(&producer_id)
                .map(|state| state.epoch),
        )
    }

    /// Validates one batch with a producer id, whose offsets are assigned, against the state.
    /// A producer's re-send of one of its last 5 batches (origin CLIENT) is a duplicate;
    /// anything else is checked in the order of the module docs' table and yields the
    /// changes to [`commit`](Self::commit) after the write.
    pub(crate) fn analyze(
        &self,
        batch: &BatchSummary,
        origin: AppendOrigin,
    ) -> Result<ProducerAppendCheck> {
        check_producer_id(batch)?;
        if origin == AppendOrigin::Client && batch.kind == BatchKind::Data {
            let duplicate = self
                .producers
                .map()
                .get(&batch.producer_id)
                .and_then(|entry| {
                    entry.find_duplicate_batch(
                        batch.producer_epoch,
                        batch.base_sequence,
                        batch.last_sequence,
                    )
                });
            if let Some(original) = duplicate {
                return Ok(ProducerAppendCheck::Duplicate {
                    first_offset: original.first_offset(),
                    last_offset: original.last_offset,
                });
            }
        }
        let mut info = self.prepare_update(batch.producer_id, origin);
        info.append(batch)?;
        Ok(ProducerAppendCheck::Append(info))
    }

    /// Applies a validated append of one producer once its batches are written, and moves the
    /// map end to `next_offset` (the offset after the append): [`commit_all`](Self::commit_all)
    /// of one info.
    pub(crate) fn commit(
        &mut self,
        info: ProducerAppendInfo,
        next_offset: i64,
    ) -> Vec<FinishedTxn> {
        self.commit_all(std::iter::once(info), next_offset)
    }

    /// Applies the validated appends of one call, one info per producer, once their batches
    /// are written, and moves the map end to `next_offset` (the offset after the call).
    /// Returns the transactions the call ended in batch order (their markers' offsets
    /// increase through a call), each with the `lastStableOffset` of its `.txnindex` entry.
    ///
    /// Kafka's `UnifiedLog.append`: every producer's changes are applied first, then the
    /// transactions are completed in batch order, each taking its
    /// [`last_stable_offset`](Self::last_stable_offset) before it leaves the open ones. Every
    /// path goes through here (a leader's append, a marker, a follower's call of many
    /// producers' batches, recovery's replay of one batch at a time), so the same batches give
    /// the same entries however they were grouped into calls.
    pub(crate) fn commit_all(
        &mut self,
        infos: impl IntoIterator<Item = ProducerAppendInfo>,
        next_offset: i64,
    ) -> Vec<FinishedTxn> {
        let mut completed: Vec<CompletedTxn> = Vec::new();
        for info in infos {
            let ended = self.update(info);
            if completed.is_empty() {
                completed = ended;
            } else {
                completed.extend(ended);
            }
        }
        // Each producer's info lists its own in order; across producers, batch order is the
        // markers' offset order.
        completed.sort_unstable_by_key(|txn| txn.last_offset);
        let finished = completed
            .into_iter()
            .map(|txn| {
                let last_stable_offset = self.last_stable_offset(&txn);
                self.complete_txn(txn);
                FinishedTxn {
                    txn,
                    last_stable_offset,
                }
            })
            .collect();
        self.update_map_end_offset(next_offset);
        finished
    }

    /// Replays one batch from the log with REPLICATION rules (recovery, rebuild after a
    /// truncation): [`analyze`](Self::analyze) then [`commit`](Self::commit) up to the batch's
    /// end. An error (data of a producer outside its open transaction) leaves the state as it
    /// was.
    pub(crate) fn replay(&mut self, batch: &BatchSummary) -> Result<Vec<FinishedTxn>> {
        check_producer_id(batch)?;
        let mut info = self.prepare_update(batch.producer_id, AppendOrigin::Replication);
        info.append(batch)?;
        Ok(self.commit(info, batch.last_offset + 1))
    }

    /// Applies the entry changes and opened transactions of `info` (Kafka's `update`), and
    /// returns the transactions it ended, which the caller passes to
    /// [`complete_txn`](Self::complete_txn) after taking their
    /// [`last_stable_offset`](Self::last_stable_offset).
    pub(crate) fn update(&mut self, info: ProducerAppendInfo) -> Vec<CompletedTxn> {
        let producer_id = info.producer_id();
        let (updated, started, completed, used_registration) = info.into_parts();
        let producers = self.producers.map_mut();
        match producers.get_mut(&producer_id) {
            Some(entry) => entry.update(updated),
            None => {
                producers.insert(producer_id, updated);
            }
        }
        for first_offset in started {
            self.ongoing_txns.insert((first_offset, producer_id));
        }
        // A registration opens one transaction: the first write or the marker uses it up.
        if used_registration {
            self.verification_states.remove(&producer_id);
        }
        completed
    }

    /// The `lastStableOffset` of the `.txnindex` entry for `txn`: the first offset of the
    /// earliest transaction of another producer that began before the marker and is still
    /// open, or the marker's offset + 1. That is the LSO right after the marker in the log.
    ///
    /// The transactions a call of several batches opens after the marker are already among
    /// the open ones when its markers are completed ([`commit_all`](Self::commit_all)), and do
    /// not count: a follower's call then writes the entry a leader's one-batch appends and
    /// recovery's replay write for the same batches. Kafka's follower counts them (its
    /// `findNextIncompleteTxn` looks at every open transaction), which gives a larger value
    /// than its own recovery writes for the same log whenever no other transaction was open at
    /// the marker and a later batch of the call opens one.
    pub(crate) fn last_stable_offset(&self, txn: &CompletedTxn) -> i64 {
        self.ongoing_txns
            .iter()
            .take_while(|&&(first_offset, _)| first_offset < txn.last_offset)
            .find(|&&(_, producer_id)| producer_id != txn.producer_id)
            .map_or(txn.last_offset + 1, |&(first_offset, _)| first_offset)
    }

    /// Moves `txn` from the open transactions to the unreplicated ones, until the high
    /// watermark passes its marker.
    pub(crate) fn complete_txn(&mut self, txn: CompletedTxn) {
        let key = (txn.first_offset, txn.producer_id);
        if !self.ongoing_txns.remove(&key) {
            // Kafka throws here. The producer's entry said the transaction was open, so only a
            // damaged snapshot gets here; keeping the transaction unstable until the high
            // watermark passes its marker is the safe side.
            log::warn!(
                "producer {} ended transaction at {} that was not open",
                txn.producer_id,
                txn.first_offset
            );
        }
        self.unreplicated_txns.insert(key, txn.last_offset);
    }

    /// Moves the map end offset (Kafka's `updateMapEndOffset`).
    pub(crate) fn update_map_end_offset(&mut self, offset: i64) {
        self.last_map_offset = offset;
    }

    /// The offset after the last batch the state has seen.
    pub(crate) fn map_end_offset(&self) -> i64 {
        self.last_map_offset
    }

    /// The first offset of the earliest open transaction.
    pub(crate) fn first_undecided_offset(&self) -> Option<i64> {
        self.ongoing_txns
            .iter()
            .next()
            .map(|&(first_offset, _)| first_offset)
    }

    /// The lowest first offset among open transactions and ended ones whose marker is not yet
    /// below the high watermark.
    pub(crate) fn first_unstable_offset(&self) -> Option<i64> {
        let unreplicated = self
            .unreplicated_txns
            .keys()
            .next()
            .map(|&(first, _)| first);
        match (self.first_undecided_offset(), unreplicated) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The last stable offset: `min(first unstable offset, high watermark)`, never below the
    /// log start offset. A `read_committed` read stops there.
    ///
    /// Ended transactions whose marker is below `high_watermark` do not count, whether or not
    /// [`on_high_watermark_updated`](Self::on_high_watermark_updated) has pruned them yet.
    #[cfg(test)]
    pub(crate) fn lso(&self, high_watermark: i64, log_start_offset: i64) -> i64 {
        let unreplicated = self
            .unreplicated_txns
            .iter()
            .find(|&(_, &marker)| marker >= high_watermark)
            .map(|(&(first_offset, _), _)| first_offset);
        let first_unstable = match (self.first_undecided_offset(), unreplicated) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let bound = match first_unstable {
            Some(first_unstable) => first_unstable.min(high_watermark),
            None => high_watermark,
        };
        bound.max(log_start_offset)
    }

    /// Forgets the ended transactions whose marker is below `high_watermark`: they no longer
    /// hold the LSO back.
    pub(crate) fn on_high_watermark_updated(&mut self, high_watermark: i64) {
        self.unreplicated_txns
            .retain(|_, &mut marker| marker >= high_watermark);
    }

    /// Drops the producers idle for `producer.id.expiration.ms` at `now_ms` (their next batch
    /// is accepted with any sequence), and registrations as old.
    pub(crate) fn remove_expired_producers(&mut self, now_ms: i64) {
        let expiration_ms = self.config.producer_id_expiration_ms;
        self.producers
            .map_mut()
            .retain(|_, entry| !expired(expiration_ms, now_ms, entry));
        self.verification_states
            .retain(|_, state| now_ms.saturating_sub(state.timestamp) < expiration_ms);
    }

    /// Records that the coordinator added this partition to `producer_id`'s transaction at
    /// `epoch` (KIP-890's verification, in process): with
    /// `transaction.partition.verification.enable`, the transaction's first batch must carry
    /// this epoch. The registration is used up by the producer's next transactional batch or
    /// marker, and expires as producers do.
    pub(crate) fn register_transaction(&mut self, producer_id: i64, epoch: i16, now_ms: i64) {
        let state = self
            .verification_states
            .entry(producer_id)
            .or_insert(VerificationStateEntry {
                epoch,
                timestamp: now_ms,
            });
        // A newer epoch replaces an older registration; a stale one changes nothing.
        if epoch > state.epoch {
            *state = VerificationStateEntry {
                epoch,
                timestamp: now_ms,
            };
        }
    }

    /// The log start moved to `log_start_offset` (retention, `delete_records_before`): Kafka's
    /// `onLogStartOffsetIncremented`. Ended transactions whose marker lies below the start are
    /// forgotten; every producer stays, until it expires (`producer.id.expiration.ms`), even one
    /// whose data now lies wholly below the start: its sequence and epoch still fence a zombie
    /// and answer a re-send of its last batches as a duplicate (KIP-360 made Kafka keep them;
    /// KAFKA-7190).
    pub(crate) fn on_log_start_incremented(&mut self, log_start_offset: i64) {
        self.unreplicated_txns
            .retain(|_, &mut marker| marker >= log_start_offset);
        self.last_map_offset = self.last_map_offset.max(log_start_offset);
    }

    /// Forgets everything and starts the map at `offset` (Kafka's `truncateFullyAndStartAt`).
    /// The caller deletes the snapshot files.
    #[cfg(test)]
    pub(crate) fn truncate_fully(&mut self, offset: i64) {
        self.producers = ProducerTable::default();
        self.ongoing_txns.clear();
        self.unreplicated_txns.clear();
        self.last_map_offset = offset;
        self.last_snap_offset = 0;
    }

    /// Whether a log ending at `log_end_offset` needs the state reloaded from a snapshot and
    /// replayed, because the map does not end there.
    #[cfg(test)]
    pub(crate) fn needs_reload(&self, log_end_offset: i64) -> bool {
        log_end_offset != self.last_map_offset
    }

    /// Loads `entries` as a snapshot at `snapshot_offset` holding them would be loaded: the
    /// tests' way into [`load_snapshot`](Self::load_snapshot), so that they exercise the path
    /// an open takes.
    #[cfg(test)]
    pub(crate) fn load_entries(
        &mut self,
        entries: impl IntoIterator<Item = (i64, ProducerStateEntry)>,
        snapshot_offset: i64,
        now_ms: i64,
    ) {
        let entries: Vec<SnapshotEntry> = entries
            .into_iter()
            .map(|(producer_id, entry)| snapshot_entry_of(producer_id, &entry))
            .collect();
        let bytes = crate::log::files::producer_snapshot::encode_snapshot(&entries);
        let snapshot = CheckedSnapshot::check(std::path::Path::new("test.snapshot"), bytes)
            .expect("encode_snapshot writes a valid snapshot");
        self.load_snapshot(snapshot, snapshot_offset, now_ms);
    }

    /// Replaces the state with the entries of the checked snapshot at `snapshot_offset` (with no
    /// valid snapshot, the caller loads nothing and the map starts at the log start offset).
    /// Producers expired at `now_ms` are dropped; an entry with an open transaction reopens it.
    /// The ended transactions are forgotten: the snapshot lies at or below the high watermark.
    /// A producer listed twice (a damaged snapshot) keeps its later entry, and only that
    /// entry's transaction. A producer whose data lies wholly below the log start stays, as it
    /// stays in the live log when the start moves
    /// ([`on_log_start_incremented`](Self::on_log_start_incremented)).
    ///
    /// The producer table is built on its first use rather than here: an open that loads a snapshot of many
    /// producers then costs about the reading of the file, and a log opened to be read never
    /// builds it. The open transactions are found here (the LSO needs them at once), from the
    /// same entries and by the same rules the table is built with.
    pub(crate) fn load_snapshot(
        &mut self,
        snapshot: CheckedSnapshot,
        snapshot_offset: i64,
        now_ms: i64,
    ) {
        let expiration_ms = self.config.producer_id_expiration_ms;
        self.ongoing_txns = if snapshot.has_open_transaction() {
            open_transactions(snapshot.transaction_fields(), expiration_ms, now_ms)
        } else {
            // The check's pass found no entry with one: no entry need be read again.
            BTreeSet::new()
        };
        self.producers = ProducerTable::pending(PendingTable {
            snapshot,
            expiration_ms,
            now_ms,
        });
        self.unreplicated_txns.clear();
        self.last_map_offset = snapshot_offset;
        self.last_snap_offset = snapshot_offset;
    }

    /// Whether the map moved past the last snapshot, so that a snapshot at
    /// [`map_end_offset`](Self::map_end_offset) is worth writing (one at the same offset as the
    /// last is not written again).
    pub(crate) fn needs_snapshot(&self) -> bool {
        self.last_map_offset > self.last_snap_offset
    }

    /// Records that a snapshot at `offset` was written.
    pub(crate) fn snapshot_written(&mut self, offset: i64) {
        self.last_snap_offset = offset;
    }

    /// The offset of the last snapshot written or loaded.
    #[cfg(test)]
    pub(crate) fn last_snapshot_offset(&self) -> i64 {
        self.last_snap_offset
    }
}

/// Whether a producer idle since `entry.last_timestamp` has expired at `now_ms`. A producer
/// with an open transaction never expires: its marker is still to come.
fn expired(expiration_ms: i64, now_ms: i64, entry: &ProducerStateEntry) -> bool {
    expired_at(
        expiration_ms,
        now_ms,
        entry.last_timestamp,
        entry.current_txn_first_offset,
    )
}

/// [`expired`] of a producer's last timestamp and open transaction.
fn expired_at(expiration_ms: i64, now_ms: i64, last_timestamp: i64, open_txn: Option<i64>) -> bool {
    open_txn.is_none() && now_ms.saturating_sub(last_timestamp) >= expiration_ms
}

/// A snapshot entry as the state holds it (Kafka's `ProducerStateManager.readSnapshot`).
fn entry_of(entry: &SnapshotEntry) -> (i64, ProducerStateEntry) {
    (
        entry.producer_id,
        ProducerStateEntry::from_snapshot(
            entry.producer_epoch,
            entry.last_sequence,
            entry.last_offset,
            entry.offset_delta,
            entry.timestamp,
            entry.coordinator_epoch,
            entry.current_txn_first_offset,
        ),
    )
}

/// The snapshot entry of a producer: its newest batch (Kafka's `writeSnapshot`).
pub(crate) fn snapshot_entry_of(producer_id: i64, entry: &ProducerStateEntry) -> SnapshotEntry {
    let newest = entry.batches.back();
    SnapshotEntry {
        producer_id,
        producer_epoch: entry.producer_epoch,
        last_sequence: newest.map_or(-1, |batch| batch.last_seq),
        last_offset: newest.map_or(-1, |batch| batch.last_offset),
        offset_delta: newest.map_or(0, |batch| batch.offset_delta),
        timestamp: entry.last_timestamp,
        coordinator_epoch: entry.coordinator_epoch,
        current_txn_first_offset: entry.current_txn_first_offset.unwrap_or(-1),
    }
}

/// The producer table of loaded entries: the producers not expired at `now_ms`, each with its
/// last entry.
fn table_of(
    entries: impl IntoIterator<Item = (i64, ProducerStateEntry)>,
    expiration_ms: i64,
    now_ms: i64,
) -> HashMap<i64, ProducerStateEntry> {
    let entries = entries.into_iter();
    // One allocation for the whole table: a snapshot may hold hundreds of thousands of
    // producers, and growing the table step by step re-inserts every entry each time.
    let mut table = HashMap::with_capacity(entries.size_hint().0);
    for (producer_id, entry) in entries {
        if !expired(expiration_ms, now_ms, &entry) {
            table.insert(producer_id, entry);
        }
    }
    table
}

/// The open transactions of loaded entries, keyed as `ProducerStateManager::ongoing_txns`:
/// that of each producer's last entry not expired at `now_ms`, as in [`table_of`].
///
/// It reads the entries' fields and builds no entry: it runs at the open, for every producer.
fn open_transactions(
    entries: impl Iterator<Item = (i64, i64, i64)>,
    expiration_ms: i64,
    now_ms: i64,
) -> BTreeSet<(i64, i64)> {
    let mut open = BTreeMap::new();
    for (producer_id, timestamp, current_txn_first_offset) in entries {
        let open_txn = (current_txn_first_offset >= 0).then_some(current_txn_first_offset);
        if expired_at(expiration_ms, now_ms, timestamp, open_txn) {
            continue;
        }
        match open_txn {
            Some(first_offset) => {
                open.insert(producer_id, first_offset);
            }
            // A later entry of the same producer replaces an earlier one (the table's rule).
            None if !open.is_empty() => {
                open.remove(&producer_id);
            }
            None => {}
        }
    }
    open.into_iter()
        .map(|(producer_id, first_offset)| (first_offset, producer_id))
        .collect()
}

/// The producers' entries by producer id. After [`ProducerStateManager::load_snapshot`] the
/// table is built from the snapshot's bytes on its first use; until then it holds them.
#[derive(Debug, Clone, Default)]
struct ProducerTable {
    table: OnceLock<HashMap<i64, ProducerStateEntry>>,
    /// What the table is built from while it is not.
    pending: Option<PendingTable>,
}

/// A loaded snapshot whose producer table is still to build, and the expiration rule of the
/// load.
#[derive(Debug, Clone)]
struct PendingTable {
    snapshot: CheckedSnapshot,
    expiration_ms: i64,
    now_ms: i64,
}

impl ProducerTable {
    fn pending(pending: PendingTable) -> Self {
        ProducerTable {
            table: OnceLock::new(),
            pending: Some(pending),
        }
    }

    /// The table, built now if it is not yet.
    fn map(&self) -> &HashMap<i64, ProducerStateEntry> {
        self.table.get_or_init(|| match &self.pending {
            Some(pending) => table_of(
                pending.snapshot.entries().map(|entry| entry_of(&entry)),
                pending.expiration_ms,
                pending.now_ms,
            ),
            None => HashMap::new(),
        })
    }

    /// The table to change, built now if it is not yet; the snapshot's bytes are let go.
    fn map_mut(&mut self) -> &mut HashMap<i64, ProducerStateEntry> {
        self.map();
        self.pending = None;
        self.table
            .get_mut()
            .expect("map() has just built the table")
    }
}

#[cfg(test)]
mod tests;
