//! The transactional producer's calls: Kafka's `initTransactions`, `beginTransaction`,
//! `commitTransaction` and `abortTransaction`, over the engine's coordinator, and how a
//! partition's or the coordinator's error moves the client state (fatal: fenced; abortable:
//! everything else but a retriable `ConcurrentTransactions`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use partlog::{Error, Log, Producer};

use super::idempotence::IdempotenceState;
use super::routes::{self, RouteTable};
use super::state::ProducerTransactionState::{self, *};
use super::{State, TopicProducer};
use crate::engine::open::lock;
use crate::txn::logs::wait_all_durable;
use crate::txn::{ProducerIdAndEpoch, TransactionResult};

impl TopicProducer {
    /// Kafka's `initTransactions`: gets the transactional id's producer id and a new epoch from
    /// the coordinator, which fences any earlier producer of the id and aborts its open
    /// transaction. Retries while the coordinator answers `ConcurrentTransactions` (an abort
    /// of the fenced producer's transaction under way), up to `max.block.ms`.
    ///
    /// # Errors
    /// `InvalidTxnState` for a producer that is not transactional or not `Uninitialized`;
    /// `ProducerFenced` (fatal); the coordinator's other errors, after which the call may be
    /// made again.
    pub fn init_transactions(&self) -> Result<(), Error> {
        let id = self.transactional_id()?;
        let mut state = lock(&self.state);
        transition(&mut state, id, Initializing)?;
        let expected = state
            .idempotence
            .as_ref()
            .map(IdempotenceState::producer_id_and_epoch);
        let timeout = self.config.transaction_timeout_ms;
        let result = self.with_retries(|| {
            self.coordinator
                .init_producer_id(Some(id), timeout, expected)
        });
        match result {
            Ok(ids) => {
                state.idempotence = Some(IdempotenceState::new(ids));
                transition(&mut state, id, Ready)
            }
            Err(error) if is_fenced(&error) => Err(fatal(&mut state, id, error)),
            Err(error) => {
                // Nothing changed at the coordinator: the producer may try again.
                state.set_txn_state(Uninitialized);
                Err(error)
            }
        }
    }

    /// Kafka's `beginTransaction`: from `Ready` to `InTransaction`. Nothing reaches the
    /// coordinator until the first record of the transaction.
    ///
    /// # Errors
    /// `InvalidTxnState` naming both states for an illegal call; the fatal error once the
    /// producer has one.
    pub fn begin_transaction(&self) -> Result<(), Error> {
        let id = self.transactional_id()?;
        let mut state = lock(&self.state);
        transition(&mut state, id, InTransaction)?;
        state.txn_started = false;
        if let (Some(adds), Some(ids)) = (&self.adds, &state.idempotence) {
            adds.begin(ids.producer_id_and_epoch());
        }
        Ok(())
    }

    /// Kafka's `commitTransaction`: appends what every partition of the transaction holds,
    /// waits until all of it is durable, then ends the transaction through the coordinator
    /// (`PrepareCommit`, the markers, `CompleteCommit`), and moves to the new epoch. When it
    /// returns, `read_committed` readers see the transaction.
    ///
    /// A coordinator error other than fencing leaves the producer `CommittingTransaction`:
    /// call `commit_transaction` again (the coordinator finishes a decided commit itself).
    ///
    /// # Errors
    /// `InvalidTxnState` for an illegal call or a transaction that can only be aborted (a
    /// batch failed: the producer is then `AbortableError`); `ProducerFenced` (fatal).
    pub fn commit_transaction(&self) -> Result<(), Error> {
        let id = self.transactional_id()?;
        let mut state = lock(&self.state);
        if state.txn_state != CommittingTransaction {
            transition(&mut state, id, CommittingTransaction)?;
            // Every queued partition added (one write), so that its batches can go out.
            match self.adds.as_ref().map(|adds| adds.finish()) {
                Some(Ok(added)) => state.txn_started |= added,
                Some(Err(error)) => return Err(fail_transaction(&mut state, id, error)),
                None => {}
            }
            let logs = match close_transaction_producers(&self.routes, true) {
                Ok(logs) => logs,
                Err(error) => return Err(fail_transaction(&mut state, id, error)),
            };
            if let Err(error) = wait_all_durable(&logs) {
                return Err(fail_transaction(&mut state, id, error));
            }
        }
        self.end(&mut state, id, TransactionResult::Commit)
    }

    /// Kafka's `abortTransaction`: from `InTransaction` or `AbortableError`, ends the
    /// transaction with ABORT markers; the partitions' errors do not stop it. The records
    /// already sent are appended before the markers (see the module docs).
    ///
    /// # Errors
    /// `InvalidTxnState` for an illegal call; `ProducerFenced` (fatal); the coordinator's
    /// other errors (the producer stays `AbortingTransaction`: call it again).
    pub fn abort_transaction(&self) -> Result<(), Error> {
        let id = self.transactional_id()?;
        let mut state = lock(&self.state);
        if state.txn_state != AbortingTransaction {
            transition(&mut state, id, AbortingTransaction)?;
            if let Some(adds) = &self.adds {
                state.txn_started |= adds.stop();
            }
            // Their records' handles carry their errors; the abort goes on regardless.
            let _ = close_transaction_producers(&self.routes, false);
        }
        self.end(&mut state, id, TransactionResult::Abort)
    }

    /// `EndTxn` through the coordinator, and the producer's next epoch.
    fn end(&self, state: &mut State, id: &str, result: TransactionResult) -> Result<(), Error> {
        if !state.txn_started {
            // Nothing reached the coordinator: there is no transaction to end (Kafka skips
            // the EndTxn of a transaction that added no partition).
            return transition(state, id, Ready);
        }
        let ids = self.current_ids(state)?;
        let ended = self.with_retries(|| {
            self.coordinator
                .end_txn(id, ids.producer_id, ids.epoch, result)
        });
        match ended {
            Ok(next) => {
                state.idempotence = Some(IdempotenceState::new(next));
                state.txn_started = false;
                transition(state, id, Ready)
            }
            Err(error) if is_fenced(&error) || matches!(error, Error::InvalidTxnState { .. }) => {
                Err(fatal(state, id, error))
            }
            Err(error) => Err(error),
        }
    }

    /// Kafka's `AddOffsetsToTxn`, the first half of `sendOffsetsToTransaction`: adds the
    /// `__consumer_offsets` partition of `group_id` to the open transaction, and returns the
    /// producer id and epoch its transactional offset commit must carry. The group layer
    /// (`partlog-groups`, which the engine does not depend on) writes the commit itself, and
    /// calls [`fail_transaction_with`](Self::fail_transaction_with) when the group refuses it.
    ///
    /// # Errors
    /// `InvalidTxnState` outside a transaction (or the error that made it abortable);
    /// `ProducerFenced` (fatal); the coordinator's other errors, which make the transaction
    /// abortable.
    pub fn add_offsets_to_transaction(&self, group_id: &str) -> Result<ProducerIdAndEpoch, Error> {
        let id = self.transactional_id()?;
        let mut state = lock(&self.state);
        may_send(&state, id)?;
        let ids = self.current_ids(&state)?;
        let added = self.with_retries(|| {
            self.coordinator
                .add_offsets(id, ids.producer_id, ids.epoch, group_id)
        });
        match added {
            Ok(()) => {
                state.txn_started = true;
                Ok(ids)
            }
            Err(error) => Err(fail_transaction(&mut state, id, error)),
        }
    }

    /// Makes the open transaction abortable because of `error` (a refused transactional offset
    /// commit: Kafka's FENCED_INSTANCE_ID, UNKNOWN_MEMBER_ID and ILLEGAL_GENERATION are
    /// abortable errors): later sends and `commit_transaction` fail with it; call
    /// `abort_transaction`. Returns the error sends will answer.
    pub fn fail_transaction_with(&self, error: Error) -> Error {
        let Ok(id) = self.transactional_id() else {
            return error;
        };
        let mut state = lock(&self.state);
        fail_transaction(&mut state, id, error)
    }

    fn current_ids(&self, state: &State) -> Result<ProducerIdAndEpoch, Error> {
        state
            .idempotence
            .as_ref()
            .map(IdempotenceState::producer_id_and_epoch)
            .ok_or_else(|| Error::InvalidTxnState {
                producer_id: -1,
                reason: "no producer id: call init_transactions() first".to_owned(),
            })
    }

    fn transactional_id(&self) -> Result<&str, Error> {
        self.config
            .transactional_id
            .as_deref()
            .ok_or_else(|| Error::InvalidTxnState {
                producer_id: -1,
                reason: "Transactional method invoked on a non-transactional producer: set \
                         transactional.id"
                    .to_owned(),
            })
    }

    /// Runs `call` again while it answers `ConcurrentTransactions`, backing off up to
    /// `max.block.ms` in all.
    fn with_retries<T>(&self, mut call: impl FnMut() -> Result<T, Error>) -> Result<T, Error> {
        let deadline = Instant::now()
            + Duration::from_millis(self.config.producer.max_block_ms.min(i64::MAX as u64));
        let mut backoff = Duration::from_millis(1);
        loop {
            match call() {
                Err(Error::ConcurrentTransactions { .. }) if Instant::now() < deadline => {
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(Duration::from_millis(100));
                }
                other => return other,
            }
        }
    }
}

/// Moves `state` to `target`, or refuses naming both states; a fatal producer answers with
/// its error.
fn transition(state: &mut State, id: &str, target: ProducerTransactionState) -> Result<(), Error> {
    if state.txn_state == FatalError {
        return Err(replay(state, id));
    }
    if state.txn_state == AbortableError && target == CommittingTransaction {
        return Err(replay(state, id));
    }
    if !target.is_transition_valid(state.txn_state) {
        let producer_id = state
            .idempotence
            .as_ref()
            .map_or(-1, |i| i.producer_id_and_epoch().producer_id);
        return Err(target.illegal(state.txn_state, id, producer_id));
    }
    state.set_txn_state(target);
    Ok(())
}

/// Whether a send may go on in a transactional producer.
pub(super) fn may_send(state: &State, id: &str) -> Result<(), Error> {
    match state.txn_state {
        InTransaction => Ok(()),
        FatalError | AbortableError => Err(replay(state, id)),
        Uninitialized => Err(Error::InvalidTxnState {
            producer_id: -1,
            reason: "Cannot perform a 'send' before completing a call to initTransactions when \
                     transactions are enabled"
                .to_owned(),
        }),
        other => Err(Error::InvalidTxnState {
            producer_id: state
                .idempotence
                .as_ref()
                .map_or(-1, |i| i.producer_id_and_epoch().producer_id),
            reason: format!("Cannot call send in state {other}"),
        }),
    }
}

/// What `error` does to the transaction: fenced → `FatalError` (answered as
/// `ProducerFenced`); `ConcurrentTransactions` → nothing (retriable); during an abort →
/// nothing (the abort goes on); else `AbortableError`. Returns the error for the caller.
pub(super) fn fail_transaction(state: &mut State, id: &str, error: Error) -> Error {
    if is_fenced(&error) {
        return fatal(state, id, error);
    }
    if matches!(error, Error::ConcurrentTransactions { .. })
        || state.txn_state == AbortingTransaction
        || !AbortableError.is_transition_valid(state.txn_state)
    {
        return error;
    }
    state.set_txn_state(AbortableError);
    let answer = replay_of(&error, id, state);
    state.last_error = Some(error);
    answer
}

/// Moves to `FatalError` for `error` (an `InvalidProducerEpoch` is answered as
/// `ProducerFenced`, as Kafka's producer converts it) and returns the answer.
fn fatal(state: &mut State, id: &str, error: Error) -> Error {
    let error = match error {
        Error::InvalidProducerEpoch {
            producer_id,
            current,
            found,
        } => Error::ProducerFenced {
            transactional_id: id.to_owned(),
            producer_id,
            current,
            found,
        },
        other => other,
    };
    state.set_txn_state(FatalError);
    let answer = replay_of(&error, id, state);
    state.last_error = Some(error);
    answer
}

fn is_fenced(error: &Error) -> bool {
    matches!(
        error,
        Error::ProducerFenced { .. } | Error::InvalidProducerEpoch { .. }
    )
}

/// The error a call answers with once the producer is `FatalError` or `AbortableError`.
fn replay(state: &State, id: &str) -> Error {
    match &state.last_error {
        Some(error) => replay_of(error, id, state),
        None => Error::InvalidTxnState {
            producer_id: -1,
            reason: format!(
                "TransactionalId {id}: the producer is in state {}",
                state.txn_state
            ),
        },
    }
}

fn replay_of(error: &Error, id: &str, state: &State) -> Error {
    fencing_copy(error).unwrap_or_else(|| Error::InvalidTxnState {
        producer_id: state
            .idempotence
            .as_ref()
            .map_or(-1, |i| i.producer_id_and_epoch().producer_id),
        reason: format!(
            "TransactionalId {id}: the transaction can only be aborted (state {}): {error}",
            state.txn_state
        ),
    })
}

/// A copy of a fencing error (`ProducerFenced`, `InvalidProducerEpoch`), which every later
/// call must report as it was; `None` for any other (`Error` is not `Clone`: it can hold an
/// I/O error).
pub(super) fn fencing_copy(error: &Error) -> Option<Error> {
    match error {
        Error::ProducerFenced {
            transactional_id,
            producer_id,
            current,
            found,
        } => Some(Error::ProducerFenced {
            transactional_id: transactional_id.clone(),
            producer_id: *producer_id,
            current: *current,
            found: *found,
        }),
        Error::InvalidProducerEpoch {
            producer_id,
            current,
            found,
        } => Some(Error::InvalidProducerEpoch {
            producer_id: *producer_id,
            current: *current,
            found: *found,
        }),
        _ => None,
    }
}

/// Closes the producers of the open transaction's partitions (each appends what it holds)
/// and returns each log with its end offset, for the durability wait. `fail_fast`: the first
/// error is returned (after closing all); otherwise errors are ignored.
fn close_transaction_producers(
    routes: &RouteTable,
    fail_fast: bool,
) -> Result<Vec<(Arc<Log>, i64)>, Error> {
    let producers: Vec<Arc<Producer>> = routes::write(routes)
        .values_mut()
        .flat_map(|route| route.producers.iter_mut().filter_map(Option::take))
        .collect();
    for producer in &producers {
        producer.request_flush();
    }
    let mut first_error = None;
    let mut logs = Vec::with_capacity(producers.len());
    for producer in producers {
        // Appended, not waited for: the caller waits for every log's durability at once (under
        // acks=all the sender asked each flusher for a sync after each append meanwhile).
        if let Err(error) = producer.close_appended() {
            first_error.get_or_insert(error);
        }
        let log = Arc::clone(producer.log());
        let end = log.log_end_offset();
        if end > 0 {
            logs.push((log, end - 1));
        }
    }
    match first_error {
        Some(error) if fail_fast => Err(error),
        _ => Ok(logs),
    }
}
