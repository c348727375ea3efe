//! [`TransactionCoordinator`]: Kafka's transaction coordinator for the transactional ids of
//! one engine, its request handlers (`InitProducerId`, `AddPartitionsToTxn`,
//! `AddOffsetsToTxn`, `EndTxn`) and the markers it writes.
//!
//! # A transaction's path
//!
//! `add_partitions` persists `Ongoing` with the partitions and registers the transaction on
//! each new partition's log (`Log::register_transaction`: partition verification, transaction
//! version 2). `end_txn` persists `PrepareCommit` (or `PrepareAbort`), appends a marker to every
//! partition of the transaction (`Log::append_marker`) and waits until all are durable, their
//! fsyncs running at once, then appends `CompleteCommit`. Each step is prepared in memory,
//! written to `__transaction_state` and made durable before it is applied (see
//! [`super::state_manager::TransactionStateManager`]), but for `Complete*`, which is not
//! waited for: the outcome was durable at `Prepare*` and the markers are durable, so a crash
//! that loses it leaves `Prepare*`, which recovery completes; and the id's next transition,
//! later in the same log, waits for both.
//!
//! Kafka answers `EndTxn` once `PrepareCommit` is durable and writes the markers after; here
//! `end_txn` returns once the markers are durable and `CompleteCommit` is appended, so that a `read_committed` reader sees the
//! transaction's records when the call returns. A failure after `PrepareCommit` is durable
//! (a marker's append or fsync) is returned, and the transaction stays decided: the next
//! [`tick`](TransactionCoordinator::tick), or recovery after a crash, writes the markers again
//! and completes it. A marker for a producer with no open transaction on a partition ends
//! nothing, so writing one twice is harmless.
//!
//! # Coordinator epoch
//!
//! A Kafka coordinator stamps its markers with the leader epoch of its `__transaction_state`
//! partition, so that a partition refuses markers from a deposed coordinator. An engine has one
//! coordinator for the life of its directory: the epoch is always [`COORDINATOR_EPOCH`] (0).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use partlog::unstable::Clock;
use partlog::{ControlRecordType, Error};

use super::config::TransactionCoordinatorConfig;
use super::log_records::java_abs;
use super::log_records::java_string_hash;
use super::logs::{TxnLogs, wait_all_durable};
use super::metadata::{
    NO_PRODUCER_ID, TopicPartition, TransactionMetadata, TxnTransitMetadata, is_epoch_exhausted,
    supports_epoch_bump,
};
use super::state::TransactionState;
use super::state_manager::{MetadataEntry, TransactionStateManager, lock};
use crate::engine::producer_ids::ProducerIdManager;

/// The coordinator epoch of every marker an engine writes (see the module docs).
pub const COORDINATOR_EPOCH: i32 = 0;

/// The internal topic of consumer group offsets, which `add_offsets` adds to a transaction.
pub const CONSUMER_OFFSETS_TOPIC: &str = "__consumer_offsets";

/// A producer id and its epoch, as `init_producer_id` and `end_txn` hand them out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProducerIdAndEpoch {
    /// The producer id.
    pub producer_id: i64,
    /// Its epoch.
    pub epoch: i16,
}

/// How a transaction ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransactionResult {
    /// Its records become visible to `read_committed` readers.
    Commit,
    /// Its records are skipped by `read_committed` readers.
    Abort,
}

impl TransactionResult {
    fn marker(self) -> ControlRecordType {
        match self {
            TransactionResult::Commit => ControlRecordType::Commit,
            TransactionResult::Abort => ControlRecordType::Abort,
        }
    }

    fn prepare_state(self) -> TransactionState {
        match self {
            TransactionResult::Commit => TransactionState::PrepareCommit,
            TransactionResult::Abort => TransactionState::PrepareAbort,
        }
    }
}

/// The transaction coordinator of an engine: see the module docs. `Send + Sync`; requests for
/// different ids run concurrently, and a request for an id with a transition in flight is
/// answered with [`Error::ConcurrentTransactions`].
#[derive(Debug)]
pub struct TransactionCoordinator {
    pub(super) state: TransactionStateManager,
    pub(super) producer_ids: Arc<ProducerIdManager>,
    pub(super) config: TransactionCoordinatorConfig,
    /// When each timer runs next (`tick`).
    pub(super) timers: Mutex<super::timers::TimerDeadlines>,
}

impl TransactionCoordinator {
    /// A coordinator over `logs`, with no state loaded: [`open`](Self::open) is the one that
    /// replays `__transaction_state`.
    pub(super) fn new_unloaded(
        logs: Arc<dyn TxnLogs>,
        producer_ids: Arc<ProducerIdManager>,
        clock: Arc<dyn Clock>,
        config: TransactionCoordinatorConfig,
    ) -> Result<Self, Error> {
        config.validate()?;
        Ok(TransactionCoordinator {
            state: TransactionStateManager::new(logs, clock, config.clone()),
            producer_ids,
            config,
            timers: Mutex::new(super::timers::TimerDeadlines::default()),
        })
    }

    /// The coordinator's settings.
    pub fn config(&self) -> &TransactionCoordinatorConfig {
        &self.config
    }

    /// The partition of `__transaction_state` that holds `transactional_id`.
    ///
    /// # Errors
    /// Never with a validated config.
    pub fn partition_for(&self, transactional_id: &str) -> Result<i32, Error> {
        self.state.partition_for(transactional_id)
    }

    /// A copy of what the coordinator holds for `transactional_id`, if it knows the id.
    pub fn transaction_metadata(&self, transactional_id: &str) -> Option<TransactionMetadata> {
        self.state
            .get(transactional_id)
            .map(|entry| lock(&entry).clone())
    }

    /// `InitProducerId` (Kafka's `handleInitProducerId`).
    ///
    /// Without a transactional id: a new producer id at epoch 0, for an idempotent producer.
    /// With one: the id's producer id and its next epoch, persisted as `Empty`. An id seen for
    /// the first time gets a new producer id at epoch 0. Once the epoch is exhausted
    /// (≥ `i16::MAX - 1`) the id moves to a new producer id at epoch 0. A retry by the producer
    /// that already got the current epoch (`expected` at the last epoch) gets it again.
    ///
    /// An `Ongoing` transaction of the id is fenced: the epoch is bumped, the transaction is
    /// aborted (markers and all), and the call answers `ConcurrentTransactions` so that the
    /// producer retries; the retry bumps again.
    ///
    /// # Errors
    /// `InvalidRequest` (42) for an empty id; `InvalidTransactionTimeout` (50) for a timeout
    /// not in `1..=transaction.max.timeout.ms`; `ConcurrentTransactions` (51) while a
    /// transition is in flight or the id's transaction is ending, and after a fence;
    /// `ProducerFenced` (90) when `expected` is a zombie's; the errors of the
    /// `__transaction_state` write (nothing changed then).
    pub fn init_producer_id(
        &self,
        transactional_id: Option<&str>,
        transaction_timeout_ms: i32,
        expected: Option<ProducerIdAndEpoch>,
    ) -> Result<ProducerIdAndEpoch, Error> {
        let Some(transactional_id) = transactional_id else {
            return Ok(ProducerIdAndEpoch {
                producer_id: self.producer_ids.generate_producer_id()?,
                epoch: 0,
            });
        };
        if transactional_id.is_empty() {
            return Err(Error::InvalidRequest {
                why: "the transactional id is empty".to_owned(),
            });
        }
        if transaction_timeout_ms <= 0
            || transaction_timeout_ms > self.config.transaction_max_timeout_ms
        {
            return Err(Error::InvalidTransactionTimeout {
                timeout_ms: i64::from(transaction_timeout_ms),
                max_timeout_ms: i64::from(self.config.transaction_max_timeout_ms),
            });
        }
        let entry = match self.state.get(transactional_id) {
            Some(entry) => entry,
            None => {
                let producer_id = self.producer_ids.generate_producer_id()?;
                self.state.put_if_not_exists(TransactionMetadata::new_empty(
                    transactional_id,
                    producer_id,
                    transaction_timeout_ms,
                    self.state.now_ms(),
                ))
            }
        };
        let transit =
            self.prepare_init_producer_id(&entry, transaction_timeout_ms, expected.as_ref())?;
        if transit.state == TransactionState::PrepareEpochFence {
            self.abort_by_fence(transactional_id, &entry, &transit)?;
            return Err(self.concurrent(transactional_id, "an ongoing transaction was fenced"));
        }
        self.state
            .append_and_complete(transactional_id, &entry, &transit)?;
        Ok(ProducerIdAndEpoch {
            producer_id: transit.producer_id,
            epoch: transit.producer_epoch,
        })
    }

    /// The checks and the transition of `init_producer_id` (Kafka's
    /// `prepareInitProducerIdTransit`), under the id's lock.
    fn prepare_init_producer_id(
        &self,
        entry: &MetadataEntry,
        timeout_ms: i32,
        expected: Option<&ProducerIdAndEpoch>,
    ) -> Result<TxnTransitMetadata, Error> {
        let mut metadata = lock(entry);
        if let Some(pending) = metadata.pending_state {
            return Err(self.concurrent(&metadata.transactional_id, pending.name()));
        }
        // Fenced unless the metadata was just created, the producer id is the current one (its
        // epoch is checked below), or it is the previous one at an exhausted epoch: a retry of
        // the rotation whose answer was lost.
        if let Some(expected) = expected {
            let valid = metadata.producer_epoch == super::metadata::NO_PRODUCER_EPOCH
                || expected.producer_id == metadata.producer_id
                || (expected.producer_id == metadata.previous_producer_id
                    && is_epoch_exhausted(expected.epoch));
            if !valid {
                return Err(fenced(&metadata, expected.producer_id, expected.epoch));
            }
        }
        match metadata.state {
            TransactionState::PrepareAbort | TransactionState::PrepareCommit => {
                Err(self.concurrent(&metadata.transactional_id, metadata.state.name()))
            }
            TransactionState::CompleteAbort
            | TransactionState::CompleteCommit
            | TransactionState::Empty => {
                let now = self.state.now_ms();
                if metadata.is_producer_epoch_exhausted()
                    && expected.is_none_or(|e| e.epoch == metadata.producer_epoch)
                {
                    let producer_id = self.producer_ids.generate_producer_id()?;
                    metadata.prepare_producer_id_rotation(
                        producer_id,
                        timeout_ms,
                        now,
                        expected.is_some(),
                    )
                } else {
                    metadata.prepare_increment_producer_epoch(
                        timeout_ms,
                        expected.map(|e| e.epoch),
                        now,
                    )
                }
            }
            TransactionState::Ongoing => metadata.prepare_fence_producer_epoch(),
            TransactionState::Dead | TransactionState::PrepareEpochFence => {
                Err(Error::InvalidTxnState {
                    producer_id: metadata.producer_id,
                    reason: format!(
                        "transactional id {:?} is in state {}, which no transition leaves",
                        metadata.transactional_id, metadata.state
                    ),
                })
            }
        }
    }

    /// `AddPartitionsToTxn`: adds `partitions` to the producer's transaction, starting one if
    /// none is open, and registers the transaction on each partition new to it
    /// (`Log::register_transaction`), so that the producer's first transactional batch there is
    /// accepted. Partitions already in the open transaction are accepted without a write.
    ///
    /// # Errors
    /// `InvalidRequest` (42) for an empty id; `InvalidProducerIdMapping` (49) for an unknown id
    /// or another producer id; `ProducerFenced` (90) for another epoch;
    /// `ConcurrentTransactions` (51) while a transition is in flight or the transaction is
    /// ending; the write's and the partitions' errors.
    pub fn add_partitions(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[TopicPartition],
    ) -> Result<(), Error> {
        if transactional_id.is_empty() {
            return Err(Error::InvalidRequest {
                why: "the transactional id is empty".to_owned(),
            });
        }
        let entry =
            self.state
                .get(transactional_id)
                .ok_or_else(|| Error::InvalidProducerIdMapping {
                    transactional_id: transactional_id.to_owned(),
                    producer_id,
                })?;
        let requested: BTreeSet<TopicPartition> = partitions.iter().cloned().collect();
        let (transit, added) = {
            let mut metadata = lock(&entry);
            if metadata.producer_id != producer_id {
                return Err(Error::InvalidProducerIdMapping {
                    transactional_id: transactional_id.to_owned(),
                    producer_id,
                });
            }
            if metadata.producer_epoch != producer_epoch {
                return Err(fenced(&metadata, producer_id, producer_epoch));
            }
            if let Some(pending) = metadata.pending_state {
                return Err(self.concurrent(transactional_id, pending.name()));
            }
            if matches!(
                metadata.state,
                TransactionState::PrepareCommit | TransactionState::PrepareAbort
            ) {
                return Err(self.concurrent(transactional_id, metadata.state.name()));
            }
            if metadata.state == TransactionState::Ongoing
                && requested.is_subset(&metadata.partitions)
            {
                return Ok(());
            }
            let added: Vec<TopicPartition> = if metadata.state == TransactionState::Ongoing {
                requested
                    .difference(&metadata.partitions)
                    .cloned()
                    .collect()
            } else {
                requested.iter().cloned().collect()
            };
            let transit = metadata.prepare_add_partitions(
                &requested,
                self.state.now_ms(),
                self.config.transaction_version,
            )?;
            (transit, added)
        };
        self.state
            .append_and_complete(transactional_id, &entry, &transit)?;
        for tp in &added {
            self.state
                .logs()
                .partition_log(&tp.topic, tp.partition)?
                .register_transaction(producer_id, producer_epoch)?;
        }
        Ok(())
    }

    /// `AddOffsetsToTxn`: adds the partition of `__consumer_offsets` that holds `group_id`'s
    /// offsets (`abs(javaStringHash(group_id)) % offsets.topic.num.partitions`) to the
    /// transaction, as [`add_partitions`](Self::add_partitions) does.
    ///
    /// # Errors
    /// As `add_partitions`.
    pub fn add_offsets(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        group_id: &str,
    ) -> Result<(), Error> {
        let partition = java_abs(java_string_hash(group_id)) % self.config.offsets_topic_partitions;
        self.add_partitions(
            transactional_id,
            producer_id,
            producer_epoch,
            &[TopicPartition::new(CONSUMER_OFFSETS_TOPIC, partition)],
        )
    }

    /// `EndTxn`: commits or aborts the producer's open transaction, and returns the producer id
    /// and epoch the producer continues with (at transaction version 2 every end bumps the
    /// epoch; an exhausted one moves to a new producer id at epoch 0). See the module docs for
    /// what happens when, and on failure.
    ///
    /// A retry of an end that completed (`CompleteCommit` and commit, `CompleteAbort` and
    /// abort, with the epoch the retry's producer had) succeeds without a write.
    ///
    /// # Errors
    /// `InvalidProducerIdMapping` (49) for an unknown id or another producer id;
    /// `ProducerFenced` (90) for an epoch that is not the producer's; `ConcurrentTransactions`
    /// (51) while a transition is in flight or the same end is still under way;
    /// `InvalidTxnState` (48) for an end that does not fit the state (no transaction, or the
    /// other result already decided); the writes' errors.
    pub fn end_txn(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        result: TransactionResult,
    ) -> Result<ProducerIdAndEpoch, Error> {
        if transactional_id.is_empty() {
            return Err(Error::InvalidRequest {
                why: "the transactional id is empty".to_owned(),
            });
        }
        let entry =
            self.state
                .get(transactional_id)
                .ok_or_else(|| Error::InvalidProducerIdMapping {
                    transactional_id: transactional_id.to_owned(),
                    producer_id,
                })?;
        let transit = match self.prepare_end_txn(&entry, producer_id, producer_epoch, result)? {
            EndTxnStep::AlreadyDone(done) => return Ok(done),
            EndTxnStep::Prepare(transit) => transit,
        };
        self.state
            .append_and_complete(transactional_id, &entry, &transit)?;
        self.write_markers_and_complete(transactional_id, &entry, result)?;
        let metadata = lock(&entry);
        Ok(ProducerIdAndEpoch {
            producer_id: metadata.producer_id,
            epoch: metadata.producer_epoch,
        })
    }

    /// The checks and the transition of `end_txn` from a client (Kafka's `endTransaction`).
    fn prepare_end_txn(
        &self,
        entry: &MetadataEntry,
        producer_id: i64,
        producer_epoch: i16,
        result: TransactionResult,
    ) -> Result<EndTxnStep, Error> {
        use TransactionState::*;
        let mut metadata = lock(entry);
        let id = metadata.transactional_id.clone();
        let v2 = supports_epoch_bump(metadata.client_transaction_version);
        // A retry of an end that exhausted the epoch and moved to the next producer id.
        let retry_on_overflow = v2
            && metadata.previous_producer_id == producer_id
            && producer_epoch == i16::MAX - 1
            && metadata.producer_epoch == 0;
        // A retry of an end that bumped the epoch (version 2).
        let retry_on_epoch_bump =
            v2 && i32::from(metadata.producer_epoch) == i32::from(producer_epoch) + 1;
        let valid_epoch = if v2 {
            match metadata.state {
                Ongoing | Empty | Dead | PrepareEpochFence => {
                    producer_epoch == metadata.producer_epoch
                }
                PrepareCommit | PrepareAbort => retry_on_epoch_bump,
                CompleteCommit | CompleteAbort => retry_on_epoch_bump || retry_on_overflow,
            }
        } else {
            producer_epoch == metadata.producer_epoch
        };
        if metadata.producer_id != producer_id && !retry_on_overflow {
            return Err(Error::InvalidProducerIdMapping {
                transactional_id: id,
                producer_id,
            });
        }
        if !valid_epoch {
            return Err(fenced(&metadata, producer_id, producer_epoch));
        }
        if let Some(pending) = metadata.pending_state {
            return Err(self.concurrent(&id, pending.name()));
        }
        let wrong_state = |state: TransactionState| Error::InvalidTxnState {
            producer_id,
            reason: format!(
                "transactional id {id:?} is in state {state}: it cannot {}",
                match result {
                    TransactionResult::Commit => "commit",
                    TransactionResult::Abort => "abort",
                }
            ),
        };
        match (metadata.state, result) {
            (Ongoing, _) => {
                let client_version = self.config.transaction_version;
                let next_producer_id = if supports_epoch_bump(client_version)
                    && metadata.is_producer_epoch_exhausted()
                {
                    self.producer_ids.generate_producer_id()?
                } else {
                    NO_PRODUCER_ID
                };
                let transit = metadata.prepare_abort_or_commit(
                    result.prepare_state(),
                    client_version,
                    next_producer_id,
                    self.state.now_ms(),
                )?;
                Ok(EndTxnStep::Prepare(transit))
            }
            (CompleteCommit, TransactionResult::Commit)
            | (CompleteAbort, TransactionResult::Abort) => {
                Ok(EndTxnStep::AlreadyDone(ProducerIdAndEpoch {
                    producer_id: metadata.producer_id,
                    epoch: metadata.producer_epoch,
                }))
            }
            (PrepareCommit, TransactionResult::Commit)
            | (PrepareAbort, TransactionResult::Abort) => {
                Err(self.concurrent(&id, metadata.state.name()))
            }
            (state, _) => Err(wrong_state(state)),
        }
    }

    /// Aborts the `Ongoing` transaction whose producer `fence` fenced: `PrepareAbort` at the
    /// fenced epoch, durable, then the markers and `CompleteAbort`. A failed `PrepareAbort`
    /// keeps the fenced epoch in memory (the old producer stays fenced) and remembers that the
    /// next fence must not bump it again (Kafka's `hasFailedEpochFence`). Once `PrepareAbort`
    /// is durable the abort is decided: a marker that fails is left to the next `tick`.
    pub(super) fn abort_by_fence(
        &self,
        transactional_id: &str,
        entry: &MetadataEntry,
        fence: &TxnTransitMetadata,
    ) -> Result<(), Error> {
        let transit = lock(entry).prepare_fence_abort(
            fence,
            self.config.transaction_version,
            self.state.now_ms(),
        )?;
        if let Err(error) = self
            .state
            .append_and_complete(transactional_id, entry, &transit)
        {
            lock(entry).has_failed_epoch_fence = true;
            return Err(error);
        }
        // Decided: the markers are retried by `tick` if they fail now.
        let _ = self.write_markers_and_complete(transactional_id, entry, TransactionResult::Abort);
        Ok(())
    }

    /// Writes the markers of the decided transaction of `entry` (in `PrepareCommit` or
    /// `PrepareAbort`, no transition in flight) to every partition in it, waits until they are
    /// durable, then persists `CompleteCommit` or `CompleteAbort`. On failure the state stays
    /// `Prepare*`, for a later call to finish.
    pub(super) fn write_markers_and_complete(
        &self,
        transactional_id: &str,
        entry: &MetadataEntry,
        result: TransactionResult,
    ) -> Result<(), Error> {
        let (transit, producer_id, epoch, partitions) = {
            let mut metadata = lock(entry);
            if metadata.state != result.prepare_state() {
                return Err(Error::InvalidTxnState {
                    producer_id: metadata.producer_id,
                    reason: format!(
                        "transactional id {transactional_id:?} is in state {}, not {}",
                        metadata.state,
                        result.prepare_state()
                    ),
                });
            }
            let transit = metadata.prepare_complete(self.state.now_ms())?;
            (
                transit,
                metadata.producer_id,
                metadata.producer_epoch,
                metadata.partitions.clone(),
            )
        };
        let written = self.write_markers(producer_id, epoch, &partitions, result.marker());
        if let Err(error) = written {
            lock(entry).roll_back_pending();
            return Err(error);
        }
        self.state
            .append_and_complete_unawaited(transactional_id, entry, &transit)
    }

    /// A marker on each partition, then one wait for all of them to be durable.
    fn write_markers(
        &self,
        producer_id: i64,
        epoch: i16,
        partitions: &BTreeSet<TopicPartition>,
        marker: ControlRecordType,
    ) -> Result<(), Error> {
        let mut waits = Vec::with_capacity(partitions.len());
        let mut offsets_markers = Vec::new();
        for tp in partitions {
            let log = self.state.logs().partition_log(&tp.topic, tp.partition)?;
            let appended = log.append_marker(producer_id, epoch, marker, COORDINATOR_EPOCH)?;
            if tp.topic == CONSUMER_OFFSETS_TOPIC {
                offsets_markers.push((tp.partition, appended.last_offset));
            }
            waits.push((log, appended.last_offset));
        }
        wait_all_durable(&waits)?;
        let commit = marker == ControlRecordType::Commit;
        for (partition, offset) in offsets_markers {
            self.state
                .logs()
                .offsets_marker_written(partition, producer_id, commit, offset);
        }
        Ok(())
    }

    fn concurrent(&self, transactional_id: &str, state: &str) -> Error {
        Error::ConcurrentTransactions {
            transactional_id: transactional_id.to_owned(),
            state: state.to_owned(),
        }
    }
}

/// What `end_txn` does after its checks.
enum EndTxnStep {
    /// The same end completed before: answer it again.
    AlreadyDone(ProducerIdAndEpoch),
    /// Persist this `Prepare*` transition, then the markers.
    Prepare(TxnTransitMetadata),
}

fn fenced(metadata: &TransactionMetadata, producer_id: i64, found: i16) -> Error {
    Error::ProducerFenced {
        transactional_id: metadata.transactional_id.clone(),
        producer_id,
        current: metadata.producer_epoch,
        found,
    }
}

/// A poisoned timer lock holds only deadlines: take them as they are.
pub(super) fn lock_timers(
    timers: &Mutex<super::timers::TimerDeadlines>,
) -> std::sync::MutexGuard<'_, super::timers::TimerDeadlines> {
    timers.lock().unwrap_or_else(PoisonError::into_inner)
}
