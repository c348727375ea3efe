//! [`TransactionMetadata`]: what the coordinator knows of one transactional id (Kafka's
//! `TransactionMetadata`), and its transitions.
//!
//! Every change is made in two steps, as in Kafka: a `prepare_*` method checks that the
//! transition is legal from the current state, sets [`pending_state`](TransactionMetadata::pending_state)
//! and returns the new values ([`TxnTransitMetadata`]) without applying them; the coordinator
//! appends those values to `__transaction_state` and waits until they are durable, then
//! [`complete_transition_to`](TransactionMetadata::complete_transition_to) applies them, or, when
//! the append failed, [`roll_back_pending`](TransactionMetadata::roll_back_pending) clears the
//! pending state and nothing changed. While a transition is pending, every other request for the
//! id is answered with `ConcurrentTransactions` (51).
//!
//! Where Kafka throws `IllegalStateException` (a transition the coordinator's own checks should
//! have ruled out), these methods return [`Error::InvalidTxnState`].

use std::collections::BTreeSet;

use partlog::Error;

use super::log_records::{TransactionLogValue, TxnTopicPartitions, value_version_for};
use super::state::TransactionState;

/// No producer id (Kafka's `RecordBatch.NO_PRODUCER_ID`).
pub const NO_PRODUCER_ID: i64 = -1;

/// No producer epoch (Kafka's `RecordBatch.NO_PRODUCER_EPOCH`).
pub const NO_PRODUCER_EPOCH: i16 = -1;

/// Whether `epoch` is too high to hand out a bumped one: Kafka keeps `i16::MAX` in reserve so
/// that the coordinator can always fence the producer that holds `i16::MAX - 1`.
pub fn is_epoch_exhausted(epoch: i16) -> bool {
    epoch >= i16::MAX - 1
}

/// Whether a client at `transaction_version` gets a new epoch at every end of a transaction
/// (KIP-890 part 2, `transaction.version` 2).
pub fn supports_epoch_bump(transaction_version: i16) -> bool {
    transaction_version >= 2
}

/// One partition of a topic.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
}

impl TopicPartition {
    /// The partition `partition` of `topic`.
    pub fn new(topic: impl Into<String>, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

/// The state of one transactional id at the coordinator (Kafka's `TransactionMetadata`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionMetadata {
    /// The transactional id.
    pub transactional_id: String,
    /// The producer id in use.
    pub producer_id: i64,
    /// The producer id before the last rotation (an exhausted epoch moved to a new id), or −1.
    pub previous_producer_id: i64,
    /// The producer id the id moves to once the current transaction completes, when its end
    /// exhausted the epoch (transaction version 2), or −1.
    pub next_producer_id: i64,
    /// The current epoch of `producer_id` (−1 for an id just created).
    pub producer_epoch: i16,
    /// The epoch before the last bump, so that a retried `init_producer_id` is recognised; −1
    /// when none (it is not persisted: −1 after a reload, as in Kafka).
    pub last_producer_epoch: i16,
    /// The producer's `transaction.timeout.ms`.
    pub txn_timeout_ms: i32,
    /// The current state.
    pub state: TransactionState,
    /// The partitions of the current transaction.
    pub partitions: BTreeSet<TopicPartition>,
    /// When the current transaction started (its first partition was added), or −1.
    pub txn_start_timestamp: i64,
    /// When the state last changed: idle ids expire from it.
    pub txn_last_update_timestamp: i64,
    /// The `transaction.version` the state was last written with.
    pub client_transaction_version: i16,
    /// The state a transition in flight goes to, if any: set by `prepare_*`, cleared when the
    /// transition completes or is rolled back. Never persisted.
    pub pending_state: Option<TransactionState>,
    /// An epoch fence bumped the epoch in memory but its abort was not written: the next fence
    /// reuses that epoch instead of bumping again (Kafka's `hasFailedEpochFence`).
    pub has_failed_epoch_fence: bool,
}

/// The values a prepared transition will give the metadata once it is durable (Kafka's
/// `TxnTransitMetadata`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnTransitMetadata {
    /// The producer id after the transition.
    pub producer_id: i64,
    /// The previous producer id after the transition.
    pub previous_producer_id: i64,
    /// The next producer id after the transition.
    pub next_producer_id: i64,
    /// The epoch after the transition.
    pub producer_epoch: i16,
    /// The last epoch after the transition.
    pub last_producer_epoch: i16,
    /// The timeout after the transition.
    pub txn_timeout_ms: i32,
    /// The state the transition goes to.
    pub state: TransactionState,
    /// The partitions after the transition.
    pub partitions: BTreeSet<TopicPartition>,
    /// The transaction's start after the transition.
    pub txn_start_timestamp: i64,
    /// The time of the transition.
    pub txn_last_update_timestamp: i64,
    /// The client's transaction version.
    pub client_transaction_version: i16,
}

impl TxnTransitMetadata {
    /// The `__transaction_state` value of this transition, for `transaction_version` (the value
    /// version it implies, [`value_version_for`]). Version 0 cannot carry the tagged fields, so
    /// they are written at their defaults there, as Kafka's version 0 records have none.
    pub fn to_log_value(&self, transaction_version: i16) -> (TransactionLogValue, i16) {
        let version = value_version_for(transaction_version);
        let mut value = TransactionLogValue::new(
            self.producer_id,
            self.producer_epoch,
            self.txn_timeout_ms,
            self.state,
        );
        value.partitions = group_by_topic(&self.partitions);
        value.last_update_timestamp_ms = self.txn_last_update_timestamp;
        value.start_timestamp_ms = self.txn_start_timestamp;
        if version >= 1 {
            value.previous_producer_id = self.previous_producer_id;
            value.next_producer_id = self.next_producer_id;
            value.client_transaction_version = self.client_transaction_version;
        }
        (value, version)
    }
}

/// The partitions grouped by topic, in order, as a `__transaction_state` value lists them.
fn group_by_topic(partitions: &BTreeSet<TopicPartition>) -> Vec<TxnTopicPartitions> {
    let mut topics: Vec<TxnTopicPartitions> = Vec::new();
    for tp in partitions {
        match topics.last_mut() {
            Some(last) if last.topic == tp.topic => last.partitions.push(tp.partition),
            _ => topics.push(TxnTopicPartitions {
                topic: tp.topic.clone(),
                partitions: vec![tp.partition],
            }),
        }
    }
    topics
}

impl TransactionMetadata {
    /// The metadata of an id seen for the first time: `producer_id` at epoch −1, `Empty`
    /// (Kafka creates it so in `handleInitProducerId`; the first epoch bump makes it 0).
    pub fn new_empty(
        transactional_id: &str,
        producer_id: i64,
        txn_timeout_ms: i32,
        now_ms: i64,
    ) -> TransactionMetadata {
        TransactionMetadata {
            transactional_id: transactional_id.to_owned(),
            producer_id,
            previous_producer_id: NO_PRODUCER_ID,
            next_producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            txn_timeout_ms,
            state: TransactionState::Empty,
            partitions: BTreeSet::new(),
            txn_start_timestamp: -1,
            txn_last_update_timestamp: now_ms,
            client_transaction_version: 0,
            pending_state: None,
            has_failed_epoch_fence: false,
        }
    }

    /// The metadata a `__transaction_state` value describes, as Kafka's coordinator loads it
    /// (the last epoch is not persisted: −1).
    pub fn from_log_value(transactional_id: &str, value: &TransactionLogValue) -> Self {
        let partitions = value
            .partitions
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|&p| TopicPartition::new(&t.topic, p))
            })
            .collect();
        TransactionMetadata {
            transactional_id: transactional_id.to_owned(),
            producer_id: value.producer_id,
            previous_producer_id: value.previous_producer_id,
            next_producer_id: value.next_producer_id,
            producer_epoch: value.producer_epoch,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            txn_timeout_ms: value.transaction_timeout_ms,
            state: value.state,
            partitions,
            txn_start_timestamp: value.start_timestamp_ms,
            txn_last_update_timestamp: value.last_update_timestamp_ms,
            client_transaction_version: value.client_transaction_version,
            pending_state: None,
            has_failed_epoch_fence: false,
        }
    }

    /// Whether the current epoch can no longer be bumped ([`is_epoch_exhausted`]).
    pub fn is_producer_epoch_exhausted(&self) -> bool {
        is_epoch_exhausted(self.producer_epoch)
    }

    /// Whether a transition is in flight.
    pub fn pending_transition_in_progress(&self) -> bool {
        self.pending_state.is_some()
    }

    fn illegal(&self, why: String) -> Error {
        Error::InvalidTxnState {
            producer_id: self.producer_id,
            reason: format!("transactional id {:?}: {why}", self.transactional_id),
        }
    }

    /// The values of the metadata as they stand, with no pending state set (Kafka's
    /// `prepareNoTransit`).
    pub fn prepare_no_transit(&self) -> TxnTransitMetadata {
        TxnTransitMetadata {
            producer_id: self.producer_id,
            previous_producer_id: self.previous_producer_id,
            next_producer_id: self.next_producer_id,
            producer_epoch: self.producer_epoch,
            last_producer_epoch: self.last_producer_epoch,
            txn_timeout_ms: self.txn_timeout_ms,
            state: self.state,
            partitions: self.partitions.clone(),
            txn_start_timestamp: self.txn_start_timestamp,
            txn_last_update_timestamp: self.txn_last_update_timestamp,
            client_transaction_version: self.client_transaction_version,
        }
    }

    /// Fences the producer of an `Ongoing` transaction: the epoch goes up by one (unless an
    /// earlier fence already bumped it and failed to write its abort), pending
    /// `PrepareEpochFence`. The abort that follows writes PrepareAbort at that epoch.
    ///
    /// # Errors
    /// At epoch `i16::MAX`: the bump would overflow.
    pub fn prepare_fence_producer_epoch(&mut self) -> Result<TxnTransitMetadata, Error> {
        if self.producer_epoch == i16::MAX {
            return Err(self.illegal(
                "cannot fence a producer at epoch i16::MAX: the bump would overflow".to_owned(),
            ));
        }
        let bumped = if self.has_failed_epoch_fence {
            self.producer_epoch
        } else {
            self.producer_epoch + 1
        };
        let mut transit = self.transit_to(TransactionState::PrepareEpochFence)?;
        transit.producer_epoch = bumped;
        transit.last_producer_epoch = NO_PRODUCER_EPOCH;
        self.pending_state = Some(TransactionState::PrepareEpochFence);
        Ok(transit)
    }

    /// `init_producer_id` on an id with no transaction in flight: the next epoch, `Empty`.
    /// `expected_epoch` is the epoch the producer holds, if it says: the current one (or none
    /// yet) bumps; the last one is a retry of a bump that succeeded, which returns the current
    /// epoch unchanged; anything else is a zombie.
    ///
    /// # Errors
    /// `ProducerFenced` for an expected epoch that is neither; `InvalidTxnState` when the epoch
    /// is exhausted (the coordinator rotates the producer id instead).
    pub fn prepare_increment_producer_epoch(
        &mut self,
        new_txn_timeout_ms: i32,
        expected_epoch: Option<i16>,
        now_ms: i64,
    ) -> Result<TxnTransitMetadata, Error> {
        if self.is_producer_epoch_exhausted() {
            return Err(self.illegal(format!(
                "cannot bump epoch {} of producer {}: the epochs are exhausted",
                self.producer_epoch, self.producer_id
            )));
        }
        let bumped = self.producer_epoch + 1;
        let (epoch, last_epoch) = match expected_epoch {
            None => (bumped, NO_PRODUCER_EPOCH),
            Some(expected)
                if self.producer_epoch == NO_PRODUCER_EPOCH || expected == self.producer_epoch =>
            {
                (bumped, self.producer_epoch)
            }
            Some(expected) if expected == self.last_producer_epoch => {
                (self.producer_epoch, self.last_producer_epoch)
            }
            Some(expected) => {
                return Err(Error::ProducerFenced {
                    transactional_id: self.transactional_id.clone(),
                    producer_id: self.producer_id,
                    current: self.producer_epoch,
                    found: expected,
                });
            }
        };
        let mut transit = self.transit_to(TransactionState::Empty)?;
        transit.producer_epoch = epoch;
        transit.last_producer_epoch = last_epoch;
        transit.txn_timeout_ms = new_txn_timeout_ms;
        transit.partitions.clear();
        transit.txn_start_timestamp = -1;
        transit.txn_last_update_timestamp = now_ms;
        self.pending_state = Some(TransactionState::Empty);
        Ok(transit)
    }

    /// `init_producer_id` once the epoch is exhausted: `new_producer_id` at epoch 0, `Empty`;
    /// the old id becomes the previous one, and with `record_last_epoch` the old epoch the last
    /// one (so that a retry of this call is recognised).
    ///
    /// # Errors
    /// `InvalidTxnState` while a transaction is open or ending.
    pub fn prepare_producer_id_rotation(
        &mut self,
        new_producer_id: i64,
        new_txn_timeout_ms: i32,
        now_ms: i64,
        record_last_epoch: bool,
    ) -> Result<TxnTransitMetadata, Error> {
        if matches!(
            self.state,
            TransactionState::Ongoing
                | TransactionState::PrepareCommit
                | TransactionState::PrepareAbort
        ) {
            return Err(self.illegal(format!(
                "cannot rotate the producer id in state {}: a transaction is pending",
                self.state
            )));
        }
        let mut transit = self.transit_to(TransactionState::Empty)?;
        transit.producer_id = new_producer_id;
        transit.previous_producer_id = self.producer_id;
        transit.producer_epoch = 0;
        transit.last_producer_epoch = if record_last_epoch {
            self.producer_epoch
        } else {
            NO_PRODUCER_EPOCH
        };
        transit.txn_timeout_ms = new_txn_timeout_ms;
        transit.partitions.clear();
        transit.txn_start_timestamp = -1;
        transit.txn_last_update_timestamp = now_ms;
        self.pending_state = Some(TransactionState::Empty);
        Ok(transit)
    }

    /// Adds `added` to the transaction: `Ongoing`, starting it now when none was open.
    ///
    /// # Errors
    /// `InvalidTxnState` from a state that cannot go to `Ongoing`, or with a transition pending.
    pub fn prepare_add_partitions(
        &mut self,
        added: &BTreeSet<TopicPartition>,
        now_ms: i64,
        client_transaction_version: i16,
    ) -> Result<TxnTransitMetadata, Error> {
        let start = match self.state {
            TransactionState::Empty
            | TransactionState::CompleteAbort
            | TransactionState::CompleteCommit => now_ms,
            _ => self.txn_start_timestamp,
        };
        let mut transit = self.transit_to(TransactionState::Ongoing)?;
        transit.partitions.extend(added.iter().cloned());
        transit.txn_start_timestamp = start;
        transit.txn_last_update_timestamp = now_ms;
        transit.client_transaction_version = client_transaction_version;
        self.pending_state = Some(TransactionState::Ongoing);
        Ok(transit)
    }

    /// Ends the `Ongoing` transaction: `PrepareCommit` or `PrepareAbort`. At transaction
    /// version 2 the epoch goes up by one (the markers carry it); `next_producer_id` is the id
    /// to move to at completion when that bump exhausts the epoch, else −1.
    ///
    /// # Errors
    /// `InvalidTxnState` from a state other than `Ongoing` (or `PrepareEpochFence` for an
    /// abort), or with a transition pending.
    pub fn prepare_abort_or_commit(
        &mut self,
        new_state: TransactionState,
        client_transaction_version: i16,
        next_producer_id: i64,
        now_ms: i64,
    ) -> Result<TxnTransitMetadata, Error> {
        let mut transit = self.transit_to(new_state)?;
        if supports_epoch_bump(client_transaction_version) {
            transit.producer_epoch = self.producer_epoch.checked_add(1).ok_or_else(|| {
                self.illegal("cannot end a transaction at epoch i16::MAX".to_owned())
            })?;
            transit.last_producer_epoch = self.producer_epoch;
        }
        transit.next_producer_id = next_producer_id;
        if transit.txn_start_timestamp == -1 {
            // An abort with no partition added (transaction version 2 allows it).
            transit.txn_start_timestamp = now_ms;
        }
        transit.txn_last_update_timestamp = now_ms;
        transit.client_transaction_version = client_transaction_version;
        self.pending_state = Some(new_state);
        Ok(transit)
    }

    /// The abort that follows a fence ([`prepare_fence_producer_epoch`](Self::prepare_fence_producer_epoch)),
    /// as Kafka's `endTransaction` makes it: the fenced epoch is taken at once (it stays, with
    /// `has_failed_epoch_fence` set by the coordinator, if the abort's append fails), then
    /// `PrepareAbort`, which at transaction version 2 bumps the epoch once more, as every end
    /// does there, so that the fenced producer cannot pass for the one that ended the
    /// transaction. At epoch `i16::MAX` there is no bump left: the abort keeps it.
    ///
    /// # Errors
    /// `InvalidTxnState` unless `fence` is the pending fence of an `Ongoing` transaction.
    pub fn prepare_fence_abort(
        &mut self,
        fence: &TxnTransitMetadata,
        transaction_version: i16,
        now_ms: i64,
    ) -> Result<TxnTransitMetadata, Error> {
        if self.pending_state != Some(TransactionState::PrepareEpochFence)
            || fence.state != TransactionState::PrepareEpochFence
        {
            return Err(self.illegal("an abort by fence needs a pending fence".to_owned()));
        }
        self.pending_state = None;
        self.producer_epoch = fence.producer_epoch;
        self.last_producer_epoch = NO_PRODUCER_EPOCH;
        let version = if self.producer_epoch == i16::MAX {
            transaction_version.min(1)
        } else {
            transaction_version
        };
        self.prepare_abort_or_commit(
            TransactionState::PrepareAbort,
            version,
            NO_PRODUCER_ID,
            now_ms,
        )
    }

    /// The markers are written: `CompleteCommit` or `CompleteAbort`, no partitions. When the
    /// end of the transaction exhausted the epoch (version 2), the id moves to the next
    /// producer id at epoch 0, and the old one becomes the previous.
    ///
    /// # Errors
    /// `InvalidTxnState` from a state other than `PrepareCommit` / `PrepareAbort`.
    pub fn prepare_complete(&mut self, now_ms: i64) -> Result<TxnTransitMetadata, Error> {
        let new_state = if self.state == TransactionState::PrepareCommit {
            TransactionState::CompleteCommit
        } else {
            TransactionState::CompleteAbort
        };
        let mut transit = self.transit_to(new_state)?;
        // The state change before it was written: a failed fence is behind us.
        self.has_failed_epoch_fence = false;
        if supports_epoch_bump(self.client_transaction_version)
            && self.next_producer_id != NO_PRODUCER_ID
        {
            transit.previous_producer_id = self.producer_id;
            transit.producer_id = self.next_producer_id;
            transit.producer_epoch = 0;
        }
        transit.last_producer_epoch = self.producer_epoch;
        transit.next_producer_id = NO_PRODUCER_ID;
        transit.partitions.clear();
        transit.txn_last_update_timestamp = now_ms;
        self.pending_state = Some(new_state);
        Ok(transit)
    }

    /// The id expired: `Dead`, written as a tombstone.
    ///
    /// # Errors
    /// `InvalidTxnState` from a state that may not expire.
    pub fn prepare_dead(&mut self) -> Result<TxnTransitMetadata, Error> {
        let mut transit = self.transit_to(TransactionState::Dead)?;
        transit.partitions.clear();
        self.pending_state = Some(TransactionState::Dead);
        Ok(transit)
    }

    /// The transit values for `new_state`, starting from the current ones, after checking that
    /// no transition is pending and that `new_state` may follow the current state.
    fn transit_to(&self, new_state: TransactionState) -> Result<TxnTransitMetadata, Error> {
        if let Some(pending) = self.pending_state {
            return Err(self.illegal(format!(
                "cannot prepare a transition to {new_state} while one to {pending} is pending"
            )));
        }
        if !new_state.valid_previous_states().contains(&self.state) {
            return Err(self.illegal(format!(
                "{new_state} cannot follow {}: its valid previous states are {:?}",
                self.state,
                new_state.valid_previous_states()
            )));
        }
        let mut transit = self.prepare_no_transit();
        transit.state = new_state;
        Ok(transit)
    }

    /// The prepared transition failed (its append did not become durable): nothing changes but
    /// the pending state, which is cleared.
    pub fn roll_back_pending(&mut self) {
        self.pending_state = None;
    }

    /// Applies a prepared transition once its record is durable, after Kafka's checks: the
    /// pending state is `transit`'s, the epoch moves only as the transition allows, partitions
    /// only grow while the transaction is open.
    ///
    /// # Errors
    /// `InvalidTxnState` when a check fails; nothing is applied then.
    pub fn complete_transition_to(&mut self, transit: &TxnTransitMetadata) -> Result<(), Error> {
        use TransactionState::*;
        let Some(to_state) = self.pending_state else {
            return Err(self.illegal(format!(
                "cannot complete a transition to {}: none is pending",
                transit.state
            )));
        };
        let fail = |this: &Self| {
            Err(this.illegal(format!(
                "the transition from {} to {transit:?} does not follow the metadata",
                this.state
            )))
        };
        if to_state != transit.state {
            return fail(self);
        }
        match to_state {
            Empty => {
                if (self.producer_epoch != transit.producer_epoch
                    && !self.valid_producer_epoch_bump(transit))
                    || !transit.partitions.is_empty()
                    || transit.txn_start_timestamp != -1
                {
                    return fail(self);
                }
                self.txn_timeout_ms = transit.txn_timeout_ms;
                self.producer_epoch = transit.producer_epoch;
                self.last_producer_epoch = transit.last_producer_epoch;
                self.producer_id = transit.producer_id;
                self.previous_producer_id = transit.previous_producer_id;
            }
            Ongoing => {
                if !self.valid_producer_epoch(transit)
                    || !self.partitions.is_subset(&transit.partitions)
                    || self.txn_timeout_ms != transit.txn_timeout_ms
                {
                    return fail(self);
                }
                self.txn_start_timestamp = transit.txn_start_timestamp;
                self.partitions.extend(transit.partitions.iter().cloned());
            }
            PrepareAbort | PrepareCommit => {
                if !self.valid_producer_epoch(transit)
                    || self.partitions != transit.partitions
                    || self.txn_timeout_ms != transit.txn_timeout_ms
                {
                    return fail(self);
                }
                self.txn_start_timestamp = transit.txn_start_timestamp;
                self.producer_epoch = transit.producer_epoch;
                self.last_producer_epoch = transit.last_producer_epoch;
                self.next_producer_id = transit.next_producer_id;
            }
            CompleteAbort | CompleteCommit => {
                if !self.valid_producer_epoch(transit)
                    || self.txn_timeout_ms != transit.txn_timeout_ms
                    || transit.txn_start_timestamp == -1
                {
                    return fail(self);
                }
                self.txn_start_timestamp = transit.txn_start_timestamp;
                self.partitions.clear();
                self.producer_epoch = transit.producer_epoch;
                self.last_producer_epoch = transit.last_producer_epoch;
                self.previous_producer_id = transit.previous_producer_id;
                self.producer_id = transit.producer_id;
                self.next_producer_id = transit.next_producer_id;
            }
            // A fence is never completed: its abort replaces it. A Dead id is removed from the
            // cache instead.
            PrepareEpochFence | Dead => return fail(self),
        }
        self.client_transaction_version = transit.client_transaction_version;
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp;
        self.pending_state = None;
        self.state = to_state;
        Ok(())
    }

    /// Whether `transit` keeps the producer id and epoch, allowing for the bumps of
    /// transaction version 2 (Kafka's `validProducerEpoch`).
    fn valid_producer_epoch(&self, transit: &TxnTransitMetadata) -> bool {
        use TransactionState::*;
        let v2 = supports_epoch_bump(transit.client_transaction_version);
        let overflow_complete = v2
            && matches!(transit.state, CompleteCommit | CompleteAbort)
            && transit.producer_epoch == 0
            && transit.producer_id != self.producer_id;
        let bumped = v2 && matches!(transit.state, PrepareCommit | PrepareAbort);
        let epoch = if overflow_complete || bumped {
            transit.last_producer_epoch
        } else {
            transit.producer_epoch
        };
        let producer_id = if overflow_complete {
            transit.previous_producer_id
        } else {
            transit.producer_id
        };
        epoch == self.producer_epoch && producer_id == self.producer_id
    }

    /// Whether `transit`'s epoch is the next one, or 0 of a new producer id.
    fn valid_producer_epoch_bump(&self, transit: &TxnTransitMetadata) -> bool {
        i32::from(transit.producer_epoch) == i32::from(self.producer_epoch) + 1
            || (transit.producer_epoch == 0 && transit.producer_id != self.producer_id)
    }
}

#[cfg(test)]
mod tests;
