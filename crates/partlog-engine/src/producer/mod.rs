//! [`TopicProducer`]: Kafka's `KafkaProducer` over an [`Engine`]'s topics. Each record is
//! routed by Kafka's partitioner (an explicit partition, else murmur2 of the key, else the
//! topic's sticky partition) to one batching [`Producer`] per partition, so accumulation,
//! linger, acks and the handles are the log's own.
//!
//! | module | what it owns |
//! | --- | --- |
//! | [`config`] | [`TopicProducerConfig`] |
//! | [`state`] | [`ProducerTransactionState`]: Kafka's client states and legal transitions |
//! | [`idempotence`] | [`IdempotenceState`]: sequences in flight and the epoch bump of KIP-360 |
//! | `transactions` | `init_transactions`, `begin_transaction`, `commit_transaction`, `abort_transaction` |
//! | `adds` | `PartitionAdds`: the partitions new to a transaction, added in one write |
//! | `routes` | `Routes`: each topic's partitions, sticky partitioner and partition producers |
//! | `route_cache` | each thread's copy of the last route it sent through |
//!
//! # Modes
//!
//! - **Idempotent** (`enable.idempotence=true`, Kafka's default): a producer id at epoch 0 from
//!   the engine's `ProducerIdManager`, and each partition's producer stamps its sequences when
//!   it seals a batch. When a partition's log answers with a sequence gap or a fenced epoch of
//!   the producer's own id (it lost a tail it had acknowledged), the producer bumps its own
//!   epoch and every partition restarts at sequence 0 (KIP-360); at `epoch == i16::MAX` it
//!   takes a new producer id.
//! - **Transactional** (`transactional.id`): Kafka's client state machine
//!   ([`ProducerTransactionState`]). The first record of a transaction to a partition queues
//!   the partition, and its producer holds the batches; the coordinator adds every queued
//!   partition in one `AddPartitionsToTxn` (one durable `Ongoing` write, which registers the
//!   transaction with the logs) when a held batch is due or the transaction ends, and only
//!   then are the batches appended, as Kafka's sender batches its adds. `commit_transaction` appends
//!   every partition's batches, waits until all are durable (their fsyncs at once), then has
//!   the coordinator write `PrepareCommit`, the markers and `CompleteCommit`: a
//!   `read_committed` reader sees the transaction when the call returns (Kafka answers after
//!   `PrepareCommit`). Every end bumps the epoch (transaction version 2).
//! - **Plain** (`enable.idempotence=false`): batches without a producer id.
//!
//! Differences from Kafka's client: `abort_transaction` appends the batches already sent in
//! the transaction before the ABORT marker (a partition's producer has no way to drop a sealed
//! batch), where Kafka drops the unsent ones; `read_committed` readers see neither. A sticky
//! partition switches after `batch.size` bytes whatever its queue holds (the partition
//! producer's queue is not visible from here).

mod adds;
pub mod config;
pub mod idempotence;
mod route_cache;
mod routes;
pub mod state;
mod transactions;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use partlog::{Error, NewRecord, Producer, ProducerMode, SendHandle};

use self::adds::PartitionAdds;
use self::config::TopicProducerConfig;
use self::idempotence::{EpochBump, IdempotenceState};
use self::routes::{Route, RouteTable};
use self::state::ProducerTransactionState;
use crate::engine::Engine;
use crate::engine::open::{EngineShared, lock};
use crate::partitioner::{RecordToRoute, StickyPartitionInfo};
use crate::txn::{ProducerIdAndEpoch, TopicPartition, TransactionCoordinator};

/// Where a sent record went: Kafka's `RecordMetadata`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RecordMetadata {
    /// The partition the record was routed to.
    pub partition: i32,
    /// Its offset in that partition (-1 under `acks=0`).
    pub offset: i64,
}

/// The handle of one [`TopicProducer::send`]: the partition at once, the offset once the
/// partition's producer resolves it (blocking with [`wait`](Self::wait), or as a `Future`).
#[derive(Debug)]
pub struct TopicSendHandle {
    partition: i32,
    handle: SendHandle,
}

impl TopicSendHandle {
    /// The partition the record was routed to.
    pub fn partition(&self) -> i32 {
        self.partition
    }

    /// Blocks until the record is done as the producer's `acks` say.
    ///
    /// # Errors
    /// The batch's error, as the partition's [`SendHandle`] reports it.
    pub fn wait(self) -> Result<RecordMetadata, Error> {
        let partition = self.partition;
        self.handle
            .wait()
            .map(|offset| RecordMetadata { partition, offset })
    }
}

impl Future for TopicSendHandle {
    type Output = Result<RecordMetadata, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let partition = this.partition;
        Pin::new(&mut this.handle)
            .poll(cx)
            .map(|result| result.map(|offset| RecordMetadata { partition, offset }))
    }
}

/// What the producer's calls change together.
#[derive(Debug)]
pub(crate) struct State {
    /// The producer id, epoch and sequence bookkeeping (idempotent and transactional).
    idempotence: Option<IdempotenceState>,
    /// The client state (transactional only).
    txn_state: ProducerTransactionState,
    /// The error that put the producer in `AbortableError` or `FatalError`.
    last_error: Option<Error>,
    /// Whether the open transaction added a partition (an empty one needs no `EndTxn`).
    txn_started: bool,
    /// Whether `txn_state` is `InTransaction`, for `send` to read without this lock.
    in_transaction: Arc<AtomicBool>,
}

impl State {
    /// Moves the client state to `target` (the one place that does).
    pub(crate) fn set_txn_state(&mut self, target: ProducerTransactionState) {
        self.txn_state = target;
        self.in_transaction.store(
            target == ProducerTransactionState::InTransaction,
            Ordering::Release,
        );
    }
}

/// Kafka's `KafkaProducer` over an engine: see the module docs. `Send + Sync`: share it with
/// an `Arc` between the threads that send.
#[derive(Debug)]
pub struct TopicProducer {
    shared: Arc<EngineShared>,
    coordinator: Arc<TransactionCoordinator>,
    config: TopicProducerConfig,
    state: Mutex<State>,
    /// Where records go; taken after `state` when both are (see `routes`).
    routes: RouteTable,
    /// This producer's key in the threads' route copies (see `route_cache`).
    id: u64,
    /// Set by `close`: later sends fail.
    closed: AtomicBool,
    /// `State::in_transaction`, read by a transactional send without the state lock.
    in_transaction: Arc<AtomicBool>,
    /// The partitions of the open transaction waiting to be added (transactional only).
    adds: Option<Arc<PartitionAdds>>,
}

impl TopicProducer {
    /// A producer of `engine`'s topics. An idempotent one gets its producer id now; a
    /// transactional one in [`init_transactions`](Self::init_transactions).
    ///
    /// # Errors
    /// `InvalidConfig` for a bad setting; the producer id allocation's errors.
    pub fn new(engine: &Engine, config: TopicProducerConfig) -> Result<TopicProducer, Error> {
        config.validate()?;
        let coordinator = Arc::clone(engine.coordinator());
        let idempotence = if config.enable_idempotence && config.transactional_id.is_none() {
            let ids = coordinator.init_producer_id(None, config.transaction_timeout_ms, None)?;
            Some(IdempotenceState::new(ids))
        } else {
            None
        };
        let in_transaction = Arc::new(AtomicBool::new(false));
        let adds = config
            .transactional_id
            .as_ref()
            .map(|id| PartitionAdds::new(Arc::clone(&coordinator), id.clone()));
        Ok(TopicProducer {
            adds,
            shared: Arc::clone(&engine.shared),
            coordinator,
            config,
            state: Mutex::new(State {
                idempotence,
                txn_state: ProducerTransactionState::Uninitialized,
                last_error: None,
                txn_started: false,
                in_transaction: Arc::clone(&in_transaction),
            }),
            in_transaction,
            routes: RouteTable::default(),
            id: route_cache::producer_id(),
            closed: AtomicBool::new(false),
        })
    }

    /// The producer's settings.
    pub fn config(&self) -> &TopicProducerConfig {
        &self.config
    }

    /// The producer id and epoch, once it has them (idempotent and transactional producers).
    pub fn producer_id_and_epoch(&self) -> Option<ProducerIdAndEpoch> {
        lock(&self.state)
            .idempotence
            .as_ref()
            .map(IdempotenceState::producer_id_and_epoch)
    }

    /// The client state of a transactional producer (`Uninitialized` for the others).
    pub fn transaction_state(&self) -> ProducerTransactionState {
        lock(&self.state).txn_state
    }

    /// Sends `record` to `topic`, routed by the partitioner (see [`send_to`](Self::send_to)).
    ///
    /// # Errors
    /// As [`send_to`](Self::send_to).
    pub fn send(&self, topic: &str, record: &NewRecord) -> Result<TopicSendHandle, Error> {
        self.send_to(topic, None, record)
    }

    /// Sends `record` to `topic`'s `partition`, or where the partitioner routes it when
    /// `None`, and returns at once with its handle (Kafka's `send`). Blocks only while the
    /// partition producer's `buffer.memory` is full, or, in a transaction, while the
    /// coordinator adds a partition new to the transaction.
    ///
    /// # Errors
    /// `InvalidArgument` for an unknown topic or a partition it does not have; in a
    /// transactional producer, `InvalidTxnState` outside a transaction, `ProducerFenced` once
    /// another producer took the transactional id over, and the error that made the
    /// transaction abortable; the partition producer's errors ([`Producer::send`]).
    pub fn send_to(
        &self,
        topic: &str,
        partition: Option<i32>,
        record: &NewRecord,
    ) -> Result<TopicSendHandle, Error> {
        let route = RecordToRoute {
            topic,
            partition,
            key: record.key.as_deref(),
            value: record.value.as_deref(),
        };
        self.may_send()?;
        let custom = self.config.partitioner.as_deref();
        let ignore_keys = self.config.partitioner_ignore_keys;
        let generation = self.routes.generation();
        // The handle is built where it is returned: every move of it here was a copy of bytes
        // the partition producer had just written, each a store-forwarding stall.
        route_cache::with_cached(
            self.id,
            generation,
            topic,
            #[inline(always)]
            |cached| {
                let (partition, sticky) = cached.choose(&route, custom, ignore_keys)?;
                let Some(producer) = cached.producer(partition) else {
                    return self.send_slow(&route, Some((partition, sticky)), None, record);
                };
                let sent = producer.send(record);
                // Counted before the handle moves: between the two, the call made the handle
                // be copied twice.
                if let Some(info) = sticky
                    && sent.is_ok()
                {
                    cached.sticky_appended(&info, estimated_size(record));
                }
                match sent {
                    Ok(handle) => Ok(TopicSendHandle { partition, handle }),
                    // A producer taken out meanwhile (a commit, an epoch bump) refuses the
                    // record: the table has the partition's producer now, or none.
                    Err(_) if self.routes.generation() != generation => {
                        self.send_slow(&route, Some((partition, None)), None, record)
                    }
                    Err(error) => {
                        let failed = (Arc::clone(producer), error);
                        self.send_slow(&route, None, Some(failed), record)
                    }
                }
            },
            || self.send_slow(&route, None, None, record),
        )
    }

    /// `send_to` through the route table: for a thread with no current copy of the route, a
    /// partition with no producer yet (`chosen` holds the partition and sticky partition), or
    /// after a partition producer's error (`failed`, with the producer): an idempotent
    /// producer's own sequence gap bumps the epoch and sends once more.
    #[cold]
    #[inline(never)]
    fn send_slow(
        &self,
        route: &RecordToRoute<'_>,
        mut chosen: Option<(i32, Option<Arc<StickyPartitionInfo>>)>,
        mut failed: Option<(Arc<Producer>, Error)>,
        record: &NewRecord,
    ) -> Result<TopicSendHandle, Error> {
        let mut retried = false;
        loop {
            let (producer, error) = match failed.take() {
                Some(failed) => failed,
                None => match self.send_routed(route, chosen.take(), record)? {
                    Ok(handle) => return Ok(handle),
                    Err(failed) => *failed,
                },
            };
            match self.on_partition_error(&producer, error) {
                SendRetry::Retry(error) if retried => return Err(error),
                SendRetry::Retry(_) => retried = true,
                SendRetry::Fail(error) => return Err(error),
            }
            self.may_send()?;
        }
    }

    /// Routes `record` through the table (unless `chosen` already holds its partition and
    /// sticky partition) and sends it to its partition's producer (made at the partition's
    /// first record, held in a transaction until the coordinator adds the partition). The
    /// outer error is routing's; the inner one the partition producer's, with the producer.
    fn send_routed(
        &self,
        route: &RecordToRoute<'_>,
        chosen: Option<(i32, Option<Arc<StickyPartitionInfo>>)>,
        record: &NewRecord,
    ) -> Result<Result<TopicSendHandle, SendFailure>, Error> {
        if let Some((partition, sticky)) = chosen {
            return self.send_to_partition(route.topic, partition, sticky, record);
        }
        let custom = self.config.partitioner.as_deref();
        let ignore_keys = self.config.partitioner_ignore_keys;
        let routes = routes::read(&self.routes);
        let Some(topic) = routes.get(route.topic) else {
            drop(routes);
            self.add_route(route.topic)?;
            return self.send_routed(route, None, record);
        };
        route_cache::store(self.id, self.routes.generation(), route.topic, topic);
        let (partition, sticky) = topic.choose(route, custom, ignore_keys)?;
        if let Some(producer) = topic.producer(partition) {
            return Ok(send_with(topic, producer, partition, sticky, record));
        }
        drop(routes);
        self.send_to_partition(route.topic, partition, sticky, record)
    }

    /// Sends `record`, already routed to `topic`'s `partition`, through the table, making the
    /// partition's producer if it has none.
    fn send_to_partition(
        &self,
        topic: &str,
        partition: i32,
        sticky: Option<Arc<StickyPartitionInfo>>,
        record: &NewRecord,
    ) -> Result<Result<TopicSendHandle, SendFailure>, Error> {
        let routes = routes::read(&self.routes);
        if let Some(route) = routes.get(topic)
            && let Some(producer) = route.producer(partition)
        {
            return Ok(send_with(route, producer, partition, sticky, record));
        }
        drop(routes);
        let producer = self.add_producer(topic, partition)?;
        let routes = routes::read(&self.routes);
        let Some(route) = routes.get(topic) else {
            return Err(Error::Closed);
        };
        Ok(send_with(route, &producer, partition, sticky, record))
    }

    /// Adds `topic` to the route table.
    fn add_route(&self, topic: &str) -> Result<(), Error> {
        let partitions = self.shared.topic_partitions(topic)?;
        let mut routes = routes::write(&self.routes);
        if !routes.contains_key(topic) {
            let batch_size =
                i32::try_from(self.config.producer.batch_size.max(1)).unwrap_or(i32::MAX);
            let route = Route::new(
                topic,
                partitions,
                batch_size,
                Arc::clone(&self.config.random),
            )?;
            routes.insert(topic.to_owned(), route);
        }
        Ok(())
    }

    /// The producer of `topic`'s `partition`, made now if it does not exist (in a
    /// transaction: begun held and queued for the coordinator's add).
    fn add_producer(&self, topic: &str, partition: i32) -> Result<Arc<Producer>, Error> {
        let mut state = lock(&self.state);
        self.may_send_in(&mut state)?;
        let mut routes = routes::write(&self.routes);
        let Some(route) = routes.get_mut(topic) else {
            return Err(Error::Closed);
        };
        let Some(slot) = usize::try_from(partition)
            .ok()
            .and_then(|index| route.producers.get_mut(index))
        else {
            return Err(Error::InvalidArgument {
                why: format!(
                    "partition {partition} is not in [0, {}) of topic {topic}",
                    route.partitions
                ),
            });
        };
        if let Some(producer) = slot {
            return Ok(Arc::clone(producer));
        }
        let ids = state
            .idempotence
            .as_ref()
            .map(IdempotenceState::producer_id_and_epoch);
        let log = self.shared.partition(topic, partition)?;
        let producer = Arc::new(self.partition_producer(log, ids)?);
        if let Some(adds) = &self.adds {
            // Held until the coordinator has added the partition (see `adds`).
            adds.queue(TopicPartition::new(topic, partition), Arc::clone(&producer));
        }
        *slot = Some(Arc::clone(&producer));
        Ok(producer)
    }

    /// The batching writer of one partition, in the producer's mode.
    fn partition_producer(
        &self,
        log: Arc<partlog::Log>,
        ids: Option<ProducerIdAndEpoch>,
    ) -> Result<Producer, Error> {
        let transactional = self.adds.is_some();
        let mut config = self.config.producer.clone();
        config.mode = match (ids, transactional) {
            (None, _) => ProducerMode::Plain,
            (Some(ids), false) => ProducerMode::Idempotent {
                producer_id: ids.producer_id,
                producer_epoch: ids.epoch,
            },
            (Some(ids), true) => ProducerMode::Transactional {
                producer_id: ids.producer_id,
                producer_epoch: ids.epoch,
            },
        };
        let producer = Producer::new(log, config)?;
        if let Some(adds) = &self.adds {
            producer.begin_held(adds.hook())?;
        }
        Ok(producer)
    }

    /// Whether the producer may send now: not closed, and in a transactional producer, in a
    /// transaction that no failure made abortable.
    #[inline]
    fn may_send(&self) -> Result<(), Error> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        if self.config.transactional_id.is_none() {
            return Ok(());
        }
        // In a transaction no add failed: no lock. A commit or abort starting meanwhile takes
        // the partitions' producers under the routes' write lock, so this record either makes
        // it into the transaction or finds no producer, and `add_producer` refuses it.
        if self.in_transaction.load(Ordering::Acquire)
            && !self.adds.as_ref().is_some_and(|adds| adds.failed())
        {
            return Ok(());
        }
        self.may_send_in(&mut lock(&self.state))
    }

    /// [`may_send`](Self::may_send) under the state lock the caller holds.
    fn may_send_in(&self, state: &mut State) -> Result<(), Error> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        let Some(id) = &self.config.transactional_id else {
            return Ok(());
        };
        transactions::may_send(state, id)?;
        self.check_adds(state, id)
    }

    /// Makes the transaction abortable (or the producer fenced) once an add of its partitions
    /// failed: the error, the first time; `may_send`'s refusal after.
    fn check_adds(&self, state: &mut State, id: &str) -> Result<(), Error> {
        let Some(adds) = self.adds.as_ref().filter(|adds| adds.failed()) else {
            return Ok(());
        };
        match adds.take_error() {
            Some(error) => Err(transactions::fail_transaction(state, id, error)),
            None => transactions::may_send(state, id),
        }
    }

    /// What a partition producer's error means for the producer: an idempotent producer's
    /// own sequence gap or fenced epoch bumps its epoch (then the send is retried once); a
    /// transactional producer's error makes the transaction abortable, or the producer fenced.
    fn on_partition_error(&self, producer: &Producer, error: Error) -> SendRetry {
        let mut guard = lock(&self.state);
        let state = &mut *guard;
        if let Some(id) = &self.config.transactional_id {
            return SendRetry::Fail(transactions::fail_transaction(state, id, error));
        }
        let own_gap = matches!(
            error,
            Error::OutOfOrderSequence { .. } | Error::InvalidProducerEpoch { .. }
        );
        let Some(idempotence) = state.idempotence.as_mut().filter(|_| own_gap) else {
            return SendRetry::Fail(error);
        };
        let mut routes = routes::write(&self.routes);
        // Another thread may have bumped already: this producer is then gone from the routes.
        let current = routes.values().any(|route| {
            route
                .producers
                .iter()
                .flatten()
                .any(|p| std::ptr::eq(p.as_ref(), producer))
        });
        if !current {
            return SendRetry::Retry(error);
        }
        idempotence.require_epoch_bump();
        let bumped = match idempotence.bump_idempotent_epoch_and_reset_id_if_needed() {
            EpochBump::NewProducerId => {
                match self.coordinator.init_producer_id(
                    None,
                    self.config.transaction_timeout_ms,
                    None,
                ) {
                    Ok(ids) => {
                        idempotence.reset_producer_id(ids);
                        true
                    }
                    Err(_) => false,
                }
            }
            EpochBump::Bumped(_) => true,
            EpochBump::None => false,
        };
        if !bumped {
            return SendRetry::Fail(error);
        }
        log::info!(
            "idempotent producer: {error}; bumped to {:?}",
            idempotence.producer_id_and_epoch()
        );
        for route in routes.values_mut() {
            for slot in &mut route.producers {
                if let Some(old) = slot.take() {
                    // Its batches failed with the error that caused the bump.
                    let _ = old.close();
                }
            }
        }
        SendRetry::Retry(error)
    }

    /// Blocks until every record sent before is done as `acks` say, on every partition.
    ///
    /// # Errors
    /// The first partition's error.
    pub fn flush(&self) -> Result<(), Error> {
        self.finish_adds()?;
        let producers = self.producers();
        // Every partition appends (and under acks=all syncs) at once; then the waits.
        for producer in &producers {
            producer.request_flush();
        }
        let mut first_error = None;
        for producer in producers {
            if let Err(error) = producer.flush() {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Flushes and closes every partition's producer; later sends fail with `Error::Closed`.
    /// An open transaction is left to the coordinator's timeout, as Kafka's `close` leaves it.
    ///
    /// # Errors
    /// The first partition's error.
    pub fn close(&self) -> Result<(), Error> {
        // Kafka's close sends what it holds, the adds it needs included; a failed add leaves
        // the held batches to fail below.
        let _ = self.finish_adds();
        self.closed.store(true, Ordering::Release);
        route_cache::forget(self.id);
        let producers = self.producers();
        for producer in &producers {
            producer.request_flush();
        }
        let mut first_error = None;
        for producer in producers {
            if let Err(error) = producer.close() {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// In a transaction: adds every queued partition, so that its producer's batches go out.
    /// Fails if an add failed (its batches stay held: flushing them would wait forever).
    fn finish_adds(&self) -> Result<(), Error> {
        let (Some(adds), Some(id)) = (&self.adds, &self.config.transactional_id) else {
            return Ok(());
        };
        if lock(&self.state).txn_state != ProducerTransactionState::InTransaction {
            return Ok(());
        }
        let finished = adds.finish();
        let mut state = lock(&self.state);
        match finished {
            Ok(added) => {
                state.txn_started |= added;
                self.check_adds(&mut state, id)
            }
            Err(error) => Err(transactions::fail_transaction(&mut state, id, error)),
        }
    }

    fn producers(&self) -> Vec<Arc<Producer>> {
        routes::read(&self.routes)
            .values()
            .flat_map(|route| route.producers.iter().flatten().cloned())
            .collect()
    }
}

impl Drop for TopicProducer {
    fn drop(&mut self) {
        if let Err(error) = self.close() {
            log::warn!("closing a topic producer: {error}");
        }
    }
}

/// Sends `record` with `producer`, the one of `topic`'s `partition`, and counts its bytes
/// against the sticky partition it used, if any.
#[inline(always)]
fn send_with(
    topic: &Route,
    producer: &Arc<Producer>,
    partition: i32,
    sticky: Option<Arc<StickyPartitionInfo>>,
    record: &NewRecord,
) -> Result<TopicSendHandle, SendFailure> {
    match producer.send(record) {
        Ok(handle) => {
            if let Some(info) = sticky {
                topic.sticky_appended(&info, estimated_size(record));
            }
            Ok(TopicSendHandle { partition, handle })
        }
        Err(error) => Err(Box::new((Arc::clone(producer), error))),
    }
}

/// A partition producer's refusal of a record, with the producer; boxed, as it is rare and
/// every send's result is moved through the send path.
type SendFailure = Box<(Arc<Producer>, Error)>;

/// What `send` does after a partition producer's error.
enum SendRetry {
    /// Send again (the epoch was bumped, the partitions' producers restart); the error is the
    /// answer if the retry fails too.
    Retry(Error),
    /// Fail with this.
    Fail(Error),
}

/// Kafka's size estimate of a record in a batch, for the sticky partitioner's byte budget.
fn estimated_size(record: &NewRecord) -> i32 {
    let headers: usize = record
        .headers
        .iter()
        .map(|(key, value)| key.len() + value.as_ref().map_or(0, Vec::len) + 2)
        .sum();
    let bytes = record.key.as_ref().map_or(0, Vec::len)
        + record.value.as_ref().map_or(0, Vec::len)
        + headers
        + 21;
    i32::try_from(bytes).unwrap_or(i32::MAX)
}
