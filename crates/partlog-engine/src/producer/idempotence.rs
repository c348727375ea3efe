//! [`IdempotenceState`]: the idempotent producer's bookkeeping of sequences per partition and
//! the decision to bump its own epoch (Kafka's `TransactionManager` for an idempotent producer,
//! KIP-360).
//!
//! Each partition's [`Producer`](partlog::Producer) stamps the sequences on its batches; this
//! state follows the batches a partition has in flight and their outcomes. A batch whose
//! outcome is unknown (it failed without the log saying whether it holds it) leaves the
//! partition's sequence *unresolved*. Once nothing of that partition is in flight, the sequence
//! resolves: if the last acknowledged sequence is the one just before the next, nothing was
//! lost and the producer goes on; otherwise a gap is possible, and the producer bumps its epoch
//! and restarts every partition's sequences at 0 (at `epoch == i16::MAX` it needs a new
//! producer id instead).

use std::collections::{BTreeMap, HashMap};

use crate::txn::{ProducerIdAndEpoch, TopicPartition};

/// One partition's sequences.
#[derive(Debug, Default)]
struct PartitionSequences {
    /// The sequence of the next batch's first record.
    next_sequence: i32,
    /// The last sequence the log acknowledged.
    last_acked: Option<i32>,
    /// The batches in flight: first sequence → record count.
    in_flight: BTreeMap<i32, i32>,
}

/// What an epoch bump asks of the producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EpochBump {
    /// Nothing to do.
    None,
    /// The epoch went up by one: restart every partition's producer at sequence 0.
    Bumped(ProducerIdAndEpoch),
    /// The epoch is exhausted: get a new producer id (epoch 0).
    NewProducerId,
}

/// An idempotent producer's sequences and epoch: see the module docs.
#[derive(Debug)]
pub struct IdempotenceState {
    ids: ProducerIdAndEpoch,
    partitions: HashMap<TopicPartition, PartitionSequences>,
    unresolved: Vec<TopicPartition>,
    epoch_bump_required: bool,
}

impl IdempotenceState {
    /// The state of a producer that just got `ids`.
    pub fn new(ids: ProducerIdAndEpoch) -> IdempotenceState {
        IdempotenceState {
            ids,
            partitions: HashMap::new(),
            unresolved: Vec::new(),
            epoch_bump_required: false,
        }
    }

    /// The producer id and epoch (Kafka's `producerIdAndEpoch`).
    pub fn producer_id_and_epoch(&self) -> ProducerIdAndEpoch {
        self.ids
    }

    /// The next sequence of `tp` (Kafka's `sequenceNumber`).
    pub fn sequence_number(&self, tp: &TopicPartition) -> i32 {
        self.partitions.get(tp).map_or(0, |p| p.next_sequence)
    }

    /// The last sequence the log acknowledged on `tp` (Kafka's `lastAckedSequence`).
    pub fn last_acked_sequence(&self, tp: &TopicPartition) -> Option<i32> {
        self.partitions.get(tp).and_then(|p| p.last_acked)
    }

    /// A batch of `records` sealed for `tp`: returns its first sequence, now in flight.
    pub fn add_batch(&mut self, tp: &TopicPartition, records: i32) -> i32 {
        let partition = self.partitions.entry(tp.clone()).or_default();
        let first = partition.next_sequence;
        partition.next_sequence = first.wrapping_add(records) & i32::MAX;
        partition.in_flight.insert(first, records);
        first
    }

    /// The log took the batch of `tp` that starts at `first_sequence` (Kafka's
    /// `handleCompletedBatch`).
    pub fn handle_completed_batch(&mut self, tp: &TopicPartition, first_sequence: i32) {
        if let Some(partition) = self.partitions.get_mut(tp)
            && let Some(records) = partition.in_flight.remove(&first_sequence)
        {
            let last = first_sequence.wrapping_add(records - 1) & i32::MAX;
            partition.last_acked = Some(partition.last_acked.map_or(last, |acked| acked.max(last)));
        }
    }

    /// The batch of `tp` that starts at `first_sequence` failed, the log's copy of it unknown
    /// (Kafka's `handleFailedBatch` of a timeout): the partition's sequence is unresolved.
    pub fn handle_failed_batch(&mut self, tp: &TopicPartition, first_sequence: i32) {
        if let Some(partition) = self.partitions.get_mut(tp) {
            partition.in_flight.remove(&first_sequence);
        }
        self.mark_sequence_unresolved(tp);
    }

    /// Marks `tp`'s sequence unresolved (Kafka's `markSequenceUnresolved`).
    pub fn mark_sequence_unresolved(&mut self, tp: &TopicPartition) {
        if !self.unresolved.contains(tp) {
            self.unresolved.push(tp.clone());
        }
    }

    /// Whether a partition's sequence is unresolved (Kafka's `hasUnresolvedSequences`).
    pub fn has_unresolved_sequences(&self) -> bool {
        !self.unresolved.is_empty()
    }

    /// Resolves every unresolved partition with nothing in flight (Kafka's
    /// `maybeResolveSequences`): resolved when its last acknowledged sequence is just before
    /// its next one, else an epoch bump is required.
    pub fn maybe_resolve_sequences(&mut self) {
        let partitions = &self.partitions;
        let mut bump = false;
        self.unresolved.retain(|tp| {
            let Some(partition) = partitions.get(tp) else {
                return false;
            };
            if !partition.in_flight.is_empty() {
                return true;
            }
            let expected_last = partition.next_sequence.wrapping_sub(1) & i32::MAX;
            let contiguous = match partition.last_acked {
                Some(acked) => acked == expected_last,
                None => partition.next_sequence == 0,
            };
            bump |= !contiguous;
            false
        });
        self.epoch_bump_required |= bump;
    }

    /// Requires an epoch bump: a partition's producer met a sequence gap or a fenced epoch of
    /// its own (the log lost a tail it had acknowledged).
    pub fn require_epoch_bump(&mut self) {
        self.epoch_bump_required = true;
    }

    /// Kafka's `bumpIdempotentEpochAndResetIdIfNeeded`: when a bump is required, the epoch goes
    /// up by one and every partition's sequences restart at 0; at `i16::MAX` a new producer id
    /// is needed ([`reset_producer_id`](Self::reset_producer_id)).
    pub fn bump_idempotent_epoch_and_reset_id_if_needed(&mut self) -> EpochBump {
        if !self.epoch_bump_required {
            return EpochBump::None;
        }
        if self.ids.epoch == i16::MAX {
            return EpochBump::NewProducerId;
        }
        self.epoch_bump_required = false;
        self.ids.epoch += 1;
        self.partitions.clear();
        self.unresolved.clear();
        EpochBump::Bumped(self.ids)
    }

    /// Starts over with a new producer id from the coordinator.
    pub fn reset_producer_id(&mut self, ids: ProducerIdAndEpoch) {
        *self = IdempotenceState::new(ids);
    }
}
