//! [`PartitionAdds`]: the partitions of the open transaction whose records wait for the
//! coordinator to add them, and the add that takes all of them in one durable `Ongoing` write.
//!
//! Kafka's producer queues a partition new to the transaction and lets `send` return; its
//! sender sends one `AddPartitionsToTxn` for every partition queued since the last, and drains
//! none of their batches until the coordinator answered. Here a partition's producer begins
//! its transaction held (`Producer::begin_held`): it queues records but appends nothing. The
//! add runs when one of those producers has a batch due (its sender calls the hook), or when
//! `commit_transaction`, `abort_transaction` or `flush` needs every record out; it adds every
//! partition queued by then with one `add_partitions` (one `__transaction_state` record, one
//! fsync), and only then releases their producers. Partitions queued while an add is under
//! way go in the next one. So no transactional batch reaches a log before the `Ongoing` record
//! naming its partition is durable and the log has registered the transaction.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError, Weak};

use partlog::{Error, HeldBatchHook, Producer};

use crate::engine::open::lock;
use crate::txn::{ProducerIdAndEpoch, TopicPartition, TransactionCoordinator};

/// The queued partitions of one transactional producer's open transaction: see the module
/// docs.
#[derive(Debug)]
pub(crate) struct PartitionAdds {
    coordinator: Arc<TransactionCoordinator>,
    transactional_id: String,
    state: Mutex<AddsState>,
    /// Signalled when an add ends.
    add_ended: Condvar,
    /// Whether an add of the open transaction failed: `send` reads it without the lock.
    failed: AtomicBool,
}

#[derive(Debug, Default)]
struct AddsState {
    /// The producer id and epoch of the open transaction.
    ids: Option<ProducerIdAndEpoch>,
    /// Partitions with records, not yet added, and their held producers.
    queued: Vec<(TopicPartition, Arc<Producer>)>,
    /// An add is under way (its partitions are out of `queued`).
    in_flight: bool,
    /// Whether an add of the open transaction succeeded: it then needs an `EndTxn`.
    added_any: bool,
    /// The first failed add's error, until `send` or `finish` reports it.
    error: Option<Error>,
    /// No more adds in this transaction: one failed, or it is aborting.
    stopped: bool,
}

impl PartitionAdds {
    pub(crate) fn new(
        coordinator: Arc<TransactionCoordinator>,
        transactional_id: String,
    ) -> Arc<PartitionAdds> {
        Arc::new(PartitionAdds {
            coordinator,
            transactional_id,
            state: Mutex::new(AddsState::default()),
            add_ended: Condvar::new(),
            failed: AtomicBool::new(false),
        })
    }

    /// A new transaction of `ids`: forgets whatever the last one left.
    pub(crate) fn begin(&self, ids: ProducerIdAndEpoch) {
        let mut state = lock(&self.state);
        *state = AddsState {
            ids: Some(ids),
            ..AddsState::default()
        };
        self.failed.store(false, Ordering::Release);
    }

    /// The hook a held producer's sender calls when a batch is due: the add of everything
    /// queued. Weak, so that a queued producer does not keep its queue alive.
    pub(crate) fn hook(self: &Arc<Self>) -> HeldBatchHook {
        let adds: Weak<PartitionAdds> = Arc::downgrade(self);
        HeldBatchHook::new(move || {
            if let Some(adds) = adds.upgrade() {
                adds.add_queued();
            }
        })
    }

    /// Queues `tp`, whose producer (begun held) got the transaction's first record for it.
    pub(crate) fn queue(&self, tp: TopicPartition, producer: Arc<Producer>) {
        lock(&self.state).queued.push((tp, producer));
    }

    /// Whether an add failed: the error is waiting in [`take_error`](Self::take_error).
    pub(crate) fn failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// The failed add's error, once.
    pub(crate) fn take_error(&self) -> Option<Error> {
        lock(&self.state).error.take()
    }

    /// Adds every queued partition in one `add_partitions` and releases their producers, then
    /// the partitions queued meanwhile, until none is left. Returns at once if an add is under
    /// way (it takes what is queued next) or one failed (the transaction can only abort).
    pub(crate) fn add_queued(&self) {
        let mut state = lock(&self.state);
        while !state.in_flight && !state.stopped && !state.queued.is_empty() {
            let Some(ids) = state.ids else {
                return;
            };
            let queued = std::mem::take(&mut state.queued);
            state.in_flight = true;
            drop(state);
            let partitions: Vec<TopicPartition> = queued.iter().map(|(tp, _)| tp.clone()).collect();
            let added = self.coordinator.add_partitions(
                &self.transactional_id,
                ids.producer_id,
                ids.epoch,
                &partitions,
            );
            // Released only once added: the `Ongoing` record naming them is durable.
            let released = added.map(|()| {
                queued
                    .iter()
                    .map(|(_, producer)| producer.release())
                    .fold(Ok(()), Result::and)
            });
            state = lock(&self.state);
            state.in_flight = false;
            let failure = match released {
                Ok(Ok(())) => {
                    state.added_any = true;
                    None
                }
                Ok(Err(error)) => {
                    state.added_any = true;
                    Some(error)
                }
                Err(error) => Some(error),
            };
            if let Some(error) = failure {
                // The records never reach their logs: their handles fail with the cause.
                for (_, producer) in &queued {
                    producer.refuse_held(for_handles(&error));
                }
                state.error.get_or_insert(error);
                state.stopped = true;
                self.failed.store(true, Ordering::Release);
            }
            self.add_ended.notify_all();
        }
    }

    /// Ends the adds of an aborting transaction: what is queued is added (its batches reach
    /// their logs before the ABORT markers, as those of partitions added earlier do), then no
    /// add starts. Returns whether any partition was (or may have been) added, so the
    /// transaction needs an `EndTxn`.
    pub(crate) fn stop(&self) -> bool {
        // A failed add's error: the abort goes on regardless.
        let _ = self.finish();
        let mut state = lock(&self.state);
        state.stopped = true;
        while state.in_flight {
            state = self
                .add_ended
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        state.added_any
    }

    /// Adds what is queued and waits until no add is under way: after it, every producer of
    /// the transaction is released, or an add failed. Returns whether any partition was added
    /// (the transaction then needs an `EndTxn`), or the failed add's error (once).
    pub(crate) fn finish(&self) -> Result<bool, Error> {
        loop {
            self.add_queued();
            let mut state = lock(&self.state);
            while state.in_flight {
                state = self
                    .add_ended
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            if let Some(error) = state.error.take() {
                return Err(error);
            }
            if state.queued.is_empty() || state.stopped {
                return Ok(state.added_any);
            }
        }
    }
}

/// What the handles of a record whose partition was not added fail with: `error` itself when
/// it is fencing (the producer must hear it), else `InvalidTxnState` naming it.
fn for_handles(error: &Error) -> Error {
    super::transactions::fencing_copy(error).unwrap_or_else(|| Error::InvalidTxnState {
        producer_id: -1,
        reason: format!(
            "the coordinator did not add the partition to the transaction ({error}): abort it"
        ),
    })
}
