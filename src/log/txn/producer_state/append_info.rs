//! [`ProducerAppendInfo`]: one append's changes to one producer, validated but not yet applied
//! (Kafka's `ProducerAppendInfo`), and the [`BatchSummary`] it validates.

use crate::error::{Corruption, Error, Result};
use crate::format::{BatchHeader, ControlRecordType, EndTransactionMarker};

use super::entry::{
    BatchMetadata, NO_PRODUCER_EPOCH, NO_SEQUENCE, ProducerStateEntry, in_sequence,
};

/// Where an append comes from, which decides how much of it is checked (Kafka's `AppendOrigin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AppendOrigin {
    /// A producer's batch: every check, and duplicates are answered with the original offsets.
    Client,
    /// A transaction marker written for the coordinator: epoch and coordinator-epoch checks,
    /// no sequence check.
    Coordinator,
    /// Data already validated once: recovery replay, and a follower's appends. No sequence
    /// check; an old producer or coordinator epoch is accepted as it stands in the log.
    Replication,
}

/// What kind of batch a [`BatchSummary`] describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BatchKind {
    /// A data batch.
    Data,
    /// A COMMIT or ABORT marker batch.
    Marker {
        /// Whether the marker is an ABORT.
        is_abort: bool,
        /// The coordinator epoch in the marker's value.
        coordinator_epoch: i32,
    },
    /// A control batch whose marker record the cleaner removed: the transaction it ended was
    /// cleaned away entirely, so it changes nothing (as in Kafka).
    EmptyControl,
}

/// The fields of one batch that the producer state needs, so that the module knows nothing of
/// segments or batch bytes. [`BatchSummary::from_header`] fills it from a parsed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchSummary {
    /// The batch's producer id (≥ 0: batches without one never reach the producer state).
    pub(crate) producer_id: i64,
    /// The batch's producer epoch.
    pub(crate) producer_epoch: i16,
    /// The batch's `baseSequence` (-1 for a marker).
    pub(crate) base_sequence: i32,
    /// The sequence of the last record: `baseSequence + lastOffsetDelta`, wrapping after
    /// `i32::MAX` to 0.
    pub(crate) last_sequence: i32,
    /// The offset of the batch's first record, once assigned.
    pub(crate) first_offset: i64,
    /// The offset of the batch's last record, once assigned.
    pub(crate) last_offset: i64,
    /// The batch's max timestamp (a marker's is its one record's timestamp).
    pub(crate) timestamp: i64,
    /// The batch's transactional bit.
    pub(crate) is_transactional: bool,
    /// Data, marker, or emptied control batch.
    pub(crate) kind: BatchKind,
}

impl BatchSummary {
    /// The summary of a batch from its header and, for a control batch, the type and value of
    /// its one control record (`None` for a control batch the cleaner emptied).
    ///
    /// A control batch whose record is not a COMMIT or ABORT (a KRaft control type) carries no
    /// transaction, and is refused with [`Error::InvalidBatch`], as Kafka refuses to read an
    /// end-transaction marker from it.
    pub(crate) fn from_header(
        header: &BatchHeader,
        control: Option<(ControlRecordType, EndTransactionMarker)>,
    ) -> Result<Self> {
        let kind = if !header.is_control() {
            BatchKind::Data
        } else {
            match control {
                None => BatchKind::EmptyControl,
                Some((kind, marker)) if kind.is_transaction_marker() => BatchKind::Marker {
                    is_abort: kind == ControlRecordType::Abort,
                    coordinator_epoch: marker.coordinator_epoch,
                },
                Some(_) => {
                    return Err(Error::InvalidBatch {
                        what: Corruption::BadRecord(
                            "a control batch with a producer id is not a COMMIT or ABORT marker",
                        ),
                    });
                }
            }
        };
        Ok(BatchSummary {
            producer_id: header.producer_id,
            producer_epoch: header.producer_epoch,
            base_sequence: header.base_sequence,
            last_sequence: header.last_sequence(),
            first_offset: header.base_offset,
            last_offset: header.last_offset(),
            timestamp: header.max_timestamp,
            is_transactional: header.is_transactional(),
            kind,
        })
    }
}

/// A transaction ended by a marker (Kafka's `CompletedTxn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CompletedTxn {
    /// The transaction's producer.
    pub(crate) producer_id: i64,
    /// The offset of the transaction's first batch on this partition.
    pub(crate) first_offset: i64,
    /// The offset of the marker.
    pub(crate) last_offset: i64,
    /// Whether the marker is an ABORT (only aborted transactions enter the `.txnindex`).
    pub(crate) is_aborted: bool,
}

/// One append's changes to one producer: validated against the producer's entry as the log
/// holds it, and applied only by
/// [`ProducerStateManager::commit`](super::ProducerStateManager::commit) once the batch is in
/// the segment, so that a failed write leaves the state untouched.
///
/// After an error from [`append`](Self::append), drop the info: it may hold part of the
/// refused batch.
#[derive(Debug, Clone)]
pub(crate) struct ProducerAppendInfo {
    producer_id: i64,
    origin: AppendOrigin,
    /// The epoch the log held for the producer before this append.
    current_epoch: i16,
    /// The last sequence the log held for the producer before this append.
    current_last_seq: i32,
    /// The entry as this append leaves it, holding only the batches this append adds.
    updated: ProducerStateEntry,
    /// Whether a transaction must be registered before its first batch (KIP-890).
    verification_required: bool,
    /// The epoch of the transaction registered for this producer, if any.
    verified_epoch: Option<i16>,
    /// The first offsets of the transactions this append opens.
    started: Vec<i64>,
    /// The transactions this append's markers end, in order.
    completed: Vec<CompletedTxn>,
    /// Whether this append holds a transactional batch (data or marker), which uses up the
    /// producer's registration.
    saw_transactional: bool,
}

impl ProducerAppendInfo {
    /// An empty append for `producer_id` on top of `current`, the producer's entry in the log
    /// (or [`ProducerStateEntry::empty`]).
    pub(crate) fn new(
        producer_id: i64,
        current: &ProducerStateEntry,
        origin: AppendOrigin,
        verification_required: bool,
        verified_epoch: Option<i16>,
    ) -> Self {
        ProducerAppendInfo {
            producer_id,
            origin,
            current_epoch: current.producer_epoch,
            current_last_seq: current.last_seq(),
            updated: current.without_batches(),
            verification_required,
            verified_epoch,
            started: Vec::new(),
            completed: Vec::new(),
            saw_transactional: false,
        }
    }

    /// The producer this append is for.
    pub(crate) fn producer_id(&self) -> i64 {
        self.producer_id
    }

    /// Validates one batch of this producer and records its changes. Returns the transaction a
    /// marker ends (none for a marker of a producer without an open transaction, which
    /// completes nothing).
    pub(crate) fn append(&mut self, batch: &BatchSummary) -> Result<Option<CompletedTxn>> {
        match batch.kind {
            BatchKind::Data => {
                self.append_data_batch(batch)?;
                Ok(None)
            }
            BatchKind::Marker {
                is_abort,
                coordinator_epoch,
            } => self.append_end_txn_marker(
                batch.producer_epoch,
                batch.first_offset,
                batch.timestamp,
                is_abort,
                coordinator_epoch,
            ),
            BatchKind::EmptyControl => Ok(None),
        }
    }

    /// Validates and records a data batch, in the order of the table in the module docs:
    /// producer epoch, sequence, then transaction state.
    pub(crate) fn append_data_batch(&mut self, batch: &BatchSummary) -> Result<()> {
        let epoch = batch.producer_epoch;
        self.check_producer_epoch(epoch)?;
        if self.origin == AppendOrigin::Client {
            self.check_sequence(epoch, batch.base_sequence)?;
        }
        let offset_delta = batch.last_offset - batch.first_offset;
        let offset_delta = i32::try_from(offset_delta).map_err(|_| Error::InvalidArgument {
            why: format!(
                "batch offsets {}..={} span more than i32::MAX",
                batch.first_offset, batch.last_offset
            ),
        })?;
        let open_txn = self.updated.current_txn_first_offset.is_some();
        if open_txn && !batch.is_transactional {
            return Err(Error::InvalidTxnState {
                producer_id: self.producer_id,
                reason: format!(
                    "non-transactional batch at offset {} while the producer's transaction is open",
                    batch.first_offset
                ),
            });
        }
        if !open_txn && batch.is_transactional {
            if self.verification_required
                && self.origin != AppendOrigin::Replication
                && self.verified_epoch != Some(epoch)
            {
                return Err(Error::InvalidTxnState {
                    producer_id: self.producer_id,
                    reason: format!(
                        "transactional batch at offset {} with epoch {epoch} opens a transaction \
                         that was not registered for this partition",
                        batch.first_offset
                    ),
                });
            }
            self.updated.current_txn_first_offset = Some(batch.first_offset);
            self.started.push(batch.first_offset);
        }
        self.updated.add_batch(
            epoch,
            BatchMetadata {
                last_seq: batch.last_sequence,
                last_offset: batch.last_offset,
                offset_delta,
                timestamp: batch.timestamp,
            },
        );
        self.saw_transactional |= batch.is_transactional;
        Ok(())
    }

    /// Validates and records a COMMIT or ABORT marker at `offset`.
    pub(crate) fn append_end_txn_marker(
        &mut self,
        producer_epoch: i16,
        offset: i64,
        timestamp: i64,
        is_abort: bool,
        coordinator_epoch: i32,
    ) -> Result<Option<CompletedTxn>> {
        self.check_producer_epoch(producer_epoch)?;
        let current = self.updated.coordinator_epoch;
        if current > coordinator_epoch && self.origin != AppendOrigin::Replication {
            return Err(Error::TransactionCoordinatorFenced {
                producer_id: self.producer_id,
                current,
                found: coordinator_epoch,
            });
        }
        // A marker without data before it (an empty transaction) does not move the LSO and
        // has no place in the `.txnindex`.
        let completed = self
            .updated
            .current_txn_first_offset
            .map(|first_offset| CompletedTxn {
                producer_id: self.producer_id,
                first_offset,
                last_offset: offset,
                is_aborted: is_abort,
            });
        self.updated
            .end_transaction(producer_epoch, coordinator_epoch, timestamp);
        self.completed.extend(completed);
        self.saw_transactional = true;
        Ok(completed)
    }

    fn check_producer_epoch(&self, epoch: i16) -> Result<()> {
        // A replica keeps what the leader wrote, even from an epoch it has since seen fenced.
        if epoch < self.updated.producer_epoch && self.origin != AppendOrigin::Replication {
            return Err(Error::InvalidProducerEpoch {
                producer_id: self.producer_id,
                current: self.updated.producer_epoch,
                found: epoch,
            });
        }
        Ok(())
    }

    fn check_sequence(&self, epoch: i16, first_seq: i32) -> Result<()> {
        if epoch != self.updated.producer_epoch {
            // A new epoch starts its sequences at 0, unless the log knows nothing of the
            // producer (KIP-360: its state expired).
            if first_seq != 0 && self.updated.producer_epoch != NO_PRODUCER_EPOCH {
                return Err(self.out_of_order(0, first_seq));
            }
            return Ok(());
        }
        let last_seq = if !self.updated.is_empty() {
            self.updated.last_seq()
        } else if epoch == self.current_epoch {
            self.current_last_seq
        } else {
            NO_SEQUENCE
        };
        if self.current_epoch != NO_PRODUCER_EPOCH && !in_sequence(last_seq, first_seq) {
            let expected = if last_seq == i32::MAX {
                0
            } else {
                last_seq + 1
            };
            return Err(self.out_of_order(expected, first_seq));
        }
        Ok(())
    }

    fn out_of_order(&self, expected: i32, found: i32) -> Error {
        Error::OutOfOrderSequence {
            producer_id: self.producer_id,
            expected,
            found,
        }
    }

    /// The first offsets of the transactions this append opens, in order.
    #[cfg(test)]
    pub(crate) fn started_transactions(&self) -> &[i64] {
        &self.started
    }

    /// The entry as this append leaves it, holding only the batches the append adds.
    #[cfg(test)]
    pub(crate) fn updated_entry(&self) -> &ProducerStateEntry {
        &self.updated
    }

    /// Splits the info into what the manager applies: the updated entry, the transactions
    /// opened, those ended, and whether the producer's registration is used up.
    pub(super) fn into_parts(self) -> (ProducerStateEntry, Vec<i64>, Vec<CompletedTxn>, bool) {
        (
            self.updated,
            self.started,
            self.completed,
            self.saw_transactional,
        )
    }
}
