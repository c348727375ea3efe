//! What a pass knows of transactions (Kafka's `CleanedTransactionMetadata` and the cleaner's
//! view of the producer state): the aborted transactions of the range, from `.txnindex`, the
//! transactions a walk is inside of, and each active producer's last record at planning time.
//!
//! The cleanable range ends below the last stable offset, so every transaction it holds data of
//! is decided: data of an aborted one goes whatever its keys, and a marker stays while data of
//! its transaction was seen in the walk (an ABORT's `AbortedTxn` then goes into the cleaned
//! segment's `.txnindex`). Once none was, the marker is discardable: the rewrite gives it a
//! delete horizon, and a pass after the horizon drops it.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

use crate::error::Result;
use crate::format::{BatchHeader, BatchView, ControlRecordType, control_record_type};
use crate::segment::AbortedTxn;

use crate::log::Shared;

/// An active producer's last record, as the producer state held it when the pass planned
/// (Kafka's `LastRecord`): the batch holding it keeps the producer's sequence (or epoch) in the
/// log, so it stays, as an empty header if all its records go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct LastRecord {
    /// The last offset of the producer's last data batch; `None` when it has none (its last
    /// record is a marker).
    pub(super) last_data_offset: Option<i64>,
    /// The producer's current epoch.
    pub(super) producer_epoch: i16,
}

/// Every producer the log holds state for, with its last record, at planning time.
pub(super) type ActiveProducers = HashMap<i64, LastRecord>;

/// Whether the batch `header` (a marker when `control`) holds its producer's last record:
/// Kafka's `isBatchLastRecordOfProducer`.
pub(super) fn last_record_of_producer(
    producers: &ActiveProducers,
    header: &BatchHeader,
    control: bool,
) -> bool {
    header.producer_id >= 0
        && producers
            .get(&header.producer_id)
            .is_some_and(|last| match last.last_data_offset {
                Some(offset) => header.last_offset() == offset,
                None => control && header.producer_epoch == last.producer_epoch,
            })
}

/// The type of the control batch `view`'s record, `None` when it has none (a marker a pass
/// emptied).
pub(super) fn marker_type(
    view: &BatchView<'_>,
    scratch: &mut Vec<u8>,
) -> Result<Option<ControlRecordType>> {
    match view.records(scratch)?.next() {
        Some(record) => Ok(Some(control_record_type(&record?)?)),
        None => Ok(None),
    }
}

/// An aborted transaction the walk has reached (its first offset is behind it) and whose marker
/// it has not reached yet.
#[derive(Debug)]
struct OngoingAbort {
    txn: AbortedTxn,
    /// Whether a batch of the transaction was seen in this walk.
    batch_seen: bool,
}

/// The transaction state of one walk over the range, batch by batch, in offset order (Kafka's
/// `CleanedTransactionMetadata`).
#[derive(Debug, Default)]
pub(super) struct TxnTracker {
    /// The aborted transactions not reached yet, lowest first offset first.
    pending: BinaryHeap<Reverse<(i64, i64, i64)>>,
    /// The full entries of `pending`, by (producer id, first offset).
    entries: HashMap<(i64, i64), AbortedTxn>,
    /// Every aborted transaction ever added, so that one found in two segments' searches is
    /// added once.
    added: HashSet<(i64, i64)>,
    ongoing_aborted: HashMap<i64, OngoingAbort>,
    /// Producers whose transactional data (not aborted) the walk saw since their last marker.
    ongoing_committed: HashSet<i64>,
    /// The ABORT markers kept in this walk, whose transactions the cleaned `.txnindex` lists.
    pub(super) kept_aborts: Vec<AbortedTxn>,
}

impl TxnTracker {
    /// Adds aborted transactions (from `.txnindex` searches) for the walk to meet.
    pub(super) fn add_aborted(&mut self, aborted: impl IntoIterator<Item = AbortedTxn>) {
        for txn in aborted {
            let id = (txn.producer_id, txn.first_offset);
            if self.added.insert(id) {
                self.pending.push(Reverse((
                    txn.first_offset,
                    txn.producer_id,
                    txn.last_offset,
                )));
                self.entries.insert(id, txn);
            }
        }
    }

    /// Moves the aborted transactions that begin at or below `offset` into the ongoing ones.
    fn reach(&mut self, offset: i64) {
        while let Some(Reverse((first_offset, producer_id, _))) = self.pending.peek().copied() {
            if first_offset > offset {
                break;
            }
            self.pending.pop();
            if let Some(txn) = self.entries.remove(&(producer_id, first_offset)) {
                self.ongoing_aborted
                    .entry(producer_id)
                    .or_insert(OngoingAbort {
                        txn,
                        batch_seen: false,
                    });
            }
        }
    }

    /// A data batch: whether it belongs to an aborted transaction (and goes whatever its keys).
    pub(super) fn on_data_batch(&mut self, header: &BatchHeader) -> bool {
        self.reach(header.last_offset());
        if !header.is_transactional() {
            return false;
        }
        match self.ongoing_aborted.get_mut(&header.producer_id) {
            Some(ongoing) => {
                ongoing.batch_seen = true;
                true
            }
            None => {
                self.ongoing_committed.insert(header.producer_id);
                false
            }
        }
    }

    /// A control batch (`marker` its record's type, `None` when it has no record): whether it
    /// is discardable, that is, no data of its transaction was seen in this walk. A kept ABORT
    /// marker's transaction goes into [`kept_aborts`](Self::kept_aborts).
    pub(super) fn on_control_batch(
        &mut self,
        header: &BatchHeader,
        marker: Option<ControlRecordType>,
    ) -> bool {
        self.reach(header.last_offset());
        match marker {
            // An empty control batch was cleaned before: nothing depends on it.
            None => true,
            Some(ControlRecordType::Abort) => {
                match self.ongoing_aborted.remove(&header.producer_id) {
                    Some(ongoing) if ongoing.batch_seen => {
                        self.kept_aborts.push(ongoing.txn);
                        false
                    }
                    _ => true,
                }
            }
            Some(ControlRecordType::Commit) => !self.ongoing_committed.remove(&header.producer_id),
            Some(_) => false,
        }
    }
}

impl Shared {
    /// Kafka's `collectAbortedTransactions(start, upper_bound)`: the `.txnindex` entries of the
    /// segment holding `start` and of the later ones, with `lastOffset >= start` and
    /// `firstOffset < upper_bound`, until a search says no later marker can abort a transaction
    /// below the bound.
    pub(super) fn aborted_in_range(&self, start: i64, upper_bound: i64) -> Result<Vec<AbortedTxn>> {
        let list = self.view.segments().load();
        let handles = list.handles();
        let from = handles
            .partition_point(|handle| handle.base_offset() <= start)
            .saturating_sub(1);
        // No segment above the last one that ever held a `.txnindex` has entries: the walk
        // stops there rather than open every later segment.
        let last_indexed = self.txn.last_txn_index_base();
        let mut aborted = Vec::new();
        for handle in handles.iter().skip(from) {
            if handle.base_offset() > last_indexed {
                break;
            }
            let Some(segment) = self.view.segments().pin(handle)? else {
                continue;
            };
            let found = segment.collect_aborted_txns(start, upper_bound)?;
            aborted.extend(found.aborted);
            if found.complete {
                break;
            }
        }
        Ok(aborted)
    }

    /// Every producer the log holds state for, with its last record, leaving out those that
    /// `producer.id.expiration.ms` (the log's config, on its clock) would drop at `now_ms`: the
    /// maintenance thread's next check forgets them, so their last batch need not stay.
    pub(super) fn active_producers_at(&self, now_ms: i64) -> ActiveProducers {
        let expiration_ms = self.config.producer_id_expiration_ms;
        let writer = self.writer.lock();
        writer
            .producers
            .entries()
            .into_iter()
            .filter(|(_, entry)| {
                entry.current_txn_first_offset.is_some()
                    || now_ms.saturating_sub(entry.last_timestamp) < expiration_ms
            })
            .map(|(producer_id, entry)| {
                let offset = entry.last_data_offset();
                (
                    producer_id,
                    LastRecord {
                        last_data_offset: (offset >= 0).then_some(offset),
                        producer_epoch: entry.producer_epoch,
                    },
                )
            })
            .collect()
    }
}
