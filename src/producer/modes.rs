//! The idempotent and transactional modes of the batching writer ([`ProducerMode`]): Kafka's
//! `TransactionManager`, for one log, with the producer id and epoch the caller gives.
//!
//! - **Sequences.** The sender thread stamps the producer id, epoch and the next sequence on a
//!   batch when it takes the batch to append it (Kafka's drain), and moves the sequence on only
//!   once the log has taken the batch (appended, or answered as a duplicate of one it holds).
//!   A batch the log refused leaves no gap behind it: the next batch takes its sequence, as
//!   Kafka's producer moves its later batches' sequences down after a failed one. The first
//!   sequence continues from the log's producer state for the id and epoch.
//! - **Fatal errors.** The log's answers that end the producer's session (fenced by a higher
//!   epoch, a gap in the sequence, a batch that does not fit the producer's transaction state)
//!   are kept: every later `send`, `begin`, `commit` and `abort` fails with the same error, and
//!   the batches queued behind it fail with it unappended, as Kafka's producer fails everything
//!   after a fatal error. Bumping the epoch is the caller's: a new `Producer` with a higher one.
//! - **Transactions.** `begin` opens one in the producer (and registers it with the log, for
//!   KIP-890's verification), `send` refuses records outside one, `commit` and `abort` seal the
//!   open batch, wait until every batch of the transaction is appended, then append the marker
//!   (acknowledged as the producer's `acks` say). A batch of the transaction that failed makes
//!   the transaction abortable only, as in Kafka: `commit` refuses, `abort` ends it.
//! - **Held transactions.** `begin_held` opens a transaction whose batches the sender keeps
//!   until `release`, as Kafka's sender drains no batch of a partition whose
//!   `AddPartitionsToTxn` is still pending: a coordinator above the log adds the partitions of
//!   many producers in one durable write, then releases them. When a batch falls due while
//!   held, the sender calls the hook `begin_held` was given, so that the add starts no later
//!   than a batch would have gone out.

use std::fmt;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::{ControlRecordType, increment_sequence};
use crate::log::Log;

use super::Producer;
use super::accumulator::Accumulator;
use super::config::{Acks, ProducerMode};

/// The mode's state, in the accumulator: `send` reads it under the lock it takes anyway.
#[derive(Debug, Default)]
pub(crate) struct ModeState {
    /// The sequence of the next batch's first record (idempotent and transactional modes). The
    /// sender stamps it and moves it on; nothing else writes it.
    pub next_sequence: i32,
    /// The error that ended the producer's session, if one did.
    pub fatal: Option<Error>,
    /// Where the producer's transaction stands (transactional mode).
    pub txn: TxnPhase,
    /// The first failure of a batch of the open transaction: it may then only be aborted.
    pub txn_error: Option<Error>,
    /// Set by `begin_held` until `release`: the sender appends no batch meanwhile.
    pub held: Option<Held>,
}

/// Why a transaction's batches are held (`begin_held`).
#[derive(Debug)]
pub(crate) enum Held {
    /// Until `release`; the hook is called when a batch falls due.
    Waiting(HeldBatchHook),
    /// Never to be released (`refuse_held`): each batch fails with this error, unappended.
    Refused(Error),
}

/// What a held producer's sender calls when a batch falls due (see
/// [`Producer::begin_held`]). It runs on the sender's thread or pool task, with no producer
/// lock held, and may call [`Producer::release`] itself.
#[derive(Clone)]
pub struct HeldBatchHook(Arc<dyn Fn() + Send + Sync>);

impl HeldBatchHook {
    /// A hook that runs `on_due`.
    pub fn new(on_due: impl Fn() + Send + Sync + 'static) -> HeldBatchHook {
        HeldBatchHook(Arc::new(on_due))
    }

    pub(crate) fn call(&self) {
        (self.0)();
    }
}

impl fmt::Debug for HeldBatchHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HeldBatchHook")
    }
}

/// Where a transactional producer's transaction stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum TxnPhase {
    /// No transaction: `send` refuses, `begin` opens one.
    #[default]
    Idle,
    /// Open: `send` adds records to it.
    Open,
    /// `commit` or `abort` is draining the batches and appending the marker: `send` refuses.
    Ending,
}

/// What the sender stamps on a batch it takes.
#[derive(Debug)]
pub(crate) enum Stamp {
    /// A plain batch: no producer id.
    Plain,
    /// The producer id and epoch, and this first sequence.
    Sequence(i32),
    /// Nothing: the producer hit a fatal error, and the batch fails with it unappended.
    Refused(Error),
}

impl ModeState {
    /// The state a producer in `mode` starts from on `log`: the next sequence after the one
    /// the log holds for the producer id at this epoch (0 for a new id or epoch), and the
    /// transaction the log holds open for it, which a transactional producer resumes.
    ///
    /// Fails with [`Error::InvalidProducerEpoch`] if the log knows a higher epoch for the id
    /// (this producer is fenced), and, for an idempotent producer, with
    /// [`Error::InvalidTxnState`] if the log holds a transaction open for the id (its data
    /// would be refused until a marker ends it). A transactional producer with a higher epoch
    /// than the open transaction's aborts it, as Kafka's `InitProducerId` does for a new epoch.
    pub(crate) fn start(log: &Log, mode: ProducerMode, acks: Acks) -> Result<ModeState> {
        let Some((producer_id, producer_epoch)) = mode.producer() else {
            return Ok(ModeState::default());
        };
        let mut state = ModeState::default();
        let Some(entry) = log.producer_state(producer_id) else {
            return Ok(state);
        };
        if entry.producer_epoch > producer_epoch {
            return Err(Error::InvalidProducerEpoch {
                producer_id,
                current: entry.producer_epoch,
                found: producer_epoch,
            });
        }
        let same_epoch = entry.producer_epoch == producer_epoch;
        if same_epoch && entry.last_sequence >= 0 {
            state.next_sequence = increment_sequence(entry.last_sequence, 1);
        }
        let Some(first_offset) = entry.current_txn_first_offset else {
            return Ok(state);
        };
        match mode {
            ProducerMode::Transactional { .. } if same_epoch => state.txn = TxnPhase::Open,
            ProducerMode::Transactional { .. } => {
                log::info!(
                    "{}: aborting producer {producer_id}'s transaction of epoch {} (open since \
                     offset {first_offset}) for its new epoch {producer_epoch}",
                    log.dir().display(),
                    entry.producer_epoch
                );
                append_marker_acked(log, mode, acks, ControlRecordType::Abort)
                    .map_err(MarkerError::into_error)?;
            }
            _ => {
                return Err(Error::InvalidTxnState {
                    producer_id,
                    reason: format!(
                        "the log holds its transaction of epoch {} open since offset \
                         {first_offset}, and takes no idempotent data from it until a marker \
                         ends it: commit or abort it first (Producer::commit or abort with a \
                         transactional producer of that epoch, or Log::append_marker)",
                        entry.producer_epoch
                    ),
                });
            }
        }
        Ok(state)
    }

    /// Whether `send` may add a record now, in `mode`; the error says why not.
    #[inline]
    pub(crate) fn check_send(&self, mode: &ProducerMode) -> Result<()> {
        let Some((producer_id, _)) = mode.producer() else {
            return Ok(());
        };
        if let Some(fatal) = &self.fatal {
            return Err(fatal.duplicate());
        }
        if !mode.is_transactional() {
            return Ok(());
        }
        match (self.txn, &self.txn_error) {
            (TxnPhase::Open, None) => Ok(()),
            (TxnPhase::Open, Some(error)) => Err(abortable(producer_id, error)),
            (TxnPhase::Idle, _) => Err(txn_state(
                producer_id,
                "a transactional producer sends only inside a transaction: call begin() first",
            )),
            (TxnPhase::Ending, _) => Err(txn_state(
                producer_id,
                "the transaction is being committed or aborted: send after the next begin()",
            )),
        }
    }

    /// What the sender stamps on the next batch it takes.
    pub(crate) fn stamp(&self, mode: &ProducerMode) -> Stamp {
        match (mode.producer(), &self.fatal) {
            (None, _) => Stamp::Plain,
            (Some(_), Some(fatal)) => Stamp::Refused(fatal.duplicate()),
            (Some(_), None) => Stamp::Sequence(self.next_sequence),
        }
    }

    /// After the log took a batch of `records` stamped with `first_sequence` (appended, or
    /// answered as a duplicate).
    pub(crate) fn taken(&mut self, first_sequence: i32, records: usize) {
        let records = i32::try_from(records).unwrap_or(i32::MAX);
        self.next_sequence = increment_sequence(first_sequence, records);
    }

    /// After the log refused or failed a batch in `mode` with `error`.
    pub(crate) fn failed(&mut self, mode: &ProducerMode, error: &Error) {
        if mode.producer().is_none() {
            return;
        }
        if self.fatal.is_none() && is_fatal(error) {
            self.fatal = Some(error.duplicate());
        }
        if mode.is_transactional() && self.txn_error.is_none() {
            self.txn_error = Some(error.duplicate());
        }
    }
}

/// Whether the log's `error` for a batch or a marker ends the producer's session: its epoch is
/// fenced, its sequence broken, or its transaction state wrong. Kafka's producer takes these
/// (`ProducerFencedException`, `OutOfOrderSequenceException`, `InvalidTxnStateException`) as
/// fatal when the epoch bump that could recover from them is not its own to make.
fn is_fatal(error: &Error) -> bool {
    matches!(
        error,
        Error::InvalidProducerEpoch { .. }
            | Error::OutOfOrderSequence { .. }
            | Error::InvalidTxnState { .. }
            | Error::TransactionCoordinatorFenced { .. }
    )
}

fn txn_state(producer_id: i64, reason: &str) -> Error {
    Error::InvalidTxnState {
        producer_id,
        reason: reason.to_owned(),
    }
}

/// Whether `begin` may open a transaction now.
fn may_begin(acc: &Accumulator, producer_id: i64) -> Result<()> {
    if acc.closing {
        return Err(Error::Closed);
    }
    if let Some(fatal) = &acc.mode.fatal {
        return Err(fatal.duplicate());
    }
    match acc.mode.txn {
        TxnPhase::Idle => Ok(()),
        TxnPhase::Open => Err(txn_state(
            producer_id,
            "a transaction is open already: commit() or abort() it first",
        )),
        TxnPhase::Ending => Err(txn_state(
            producer_id,
            "the previous transaction is still being committed or aborted",
        )),
    }
}

/// The error of a `send` or `commit` in a transaction a failed batch made abortable only.
fn abortable(producer_id: i64, cause: &Error) -> Error {
    Error::InvalidTxnState {
        producer_id,
        reason: format!(
            "a batch of the open transaction failed ({cause}): the transaction can only be \
             aborted; call abort(), then begin() again"
        ),
    }
}

/// Why a marker did not end up acknowledged.
#[derive(Debug)]
pub(crate) enum MarkerError {
    /// The log refused the marker or failed to append it: the transaction is as it was.
    NotAppended(Error),
    /// The marker was appended, and so ended the transaction, but its `acks=all` wait failed.
    NotAcknowledged(Error),
}

impl MarkerError {
    fn into_error(self) -> Error {
        match self {
            MarkerError::NotAppended(error) | MarkerError::NotAcknowledged(error) => error,
        }
    }
}

/// Appends `marker` for the producer of `mode` (which has one) and waits for it as `acks`
/// says: `all` until it is durable, otherwise until it is appended (the marker is appended by
/// the calling thread, so `0` waits that long too). The coordinator epoch is the one the log
/// holds for the producer, or 0: the producer is its own coordinator, and a marker may not go
/// below an epoch another coordinator wrote.
fn append_marker_acked(
    log: &Log,
    mode: ProducerMode,
    acks: Acks,
    marker: ControlRecordType,
) -> std::result::Result<(), MarkerError> {
    let Some((producer_id, producer_epoch)) = mode.producer() else {
        return Ok(());
    };
    let coordinator_epoch = log
        .producer_state(producer_id)
        .map_or(0, |entry| entry.coordinator_epoch.max(0));
    let (info, epoch) = log
        .append_marker_in_epoch(producer_id, producer_epoch, marker, coordinator_epoch)
        .map_err(MarkerError::NotAppended)?;
    if acks == Acks::All {
        log.wait_durable_since_append(info.last_offset, epoch)
            .map_err(MarkerError::NotAcknowledged)?;
    }
    Ok(())
}

impl Producer {
    /// Opens a transaction: the records sent from now until [`commit`](Self::commit) or
    /// [`abort`](Self::abort) are written as one transaction (Kafka's `beginTransaction`).
    /// `read_committed` readers ([`Log::committed_records`], [`ReadOptions`](crate::ReadOptions))
    /// see them once `commit` has written its marker, and never if `abort` has.
    ///
    /// Registers the transaction with the log ([`Log::register_transaction`]), which a log with
    /// `transaction.partition.verification.enable` requires of a transaction's first batch.
    ///
    /// Fails with [`Error::InvalidTxnState`] for a producer that is not transactional, or while
    /// a transaction is open (one [`Producer::new`] resumed included: [`in_transaction`](Self::in_transaction)
    /// says so); with the producer's fatal error once it has one; with [`Error::Closed`] after
    /// [`close`](Self::close); and with the log's error if it is closed or poisoned.
    pub fn begin(&self) -> Result<()> {
        let (producer_id, producer_epoch) = self.transactional_ids()?;
        let inner = &*self.inner;
        may_begin(&inner.accumulator.lock(), producer_id)?;
        inner
            .log
            .register_transaction(producer_id, producer_epoch)?;
        let mut acc = inner.accumulator.lock();
        // Again under the lock of the change: another thread may have begun meanwhile.
        may_begin(&acc, producer_id)?;
        acc.mode.txn = TxnPhase::Open;
        acc.mode.txn_error = None;
        Ok(())
    }

    /// Opens a transaction as [`begin`](Self::begin) does, but holds its batches: `send`
    /// queues records, and the sender appends nothing until [`release`](Self::release), which
    /// registers the transaction with the log. Kafka's sender holds a partition's batches so
    /// while its `AddPartitionsToTxn` is pending; a transaction coordinator above the log uses
    /// this to make one durable write for many partitions before any of their batches goes
    /// out.
    ///
    /// When a batch falls due (sealed, or its `linger.ms` passed) while held, the sender calls
    /// `on_due` (again at later wakes while still held): the caller's cue to release soon.
    /// [`flush`](Self::flush) waits for the release. [`commit`](Self::commit) and
    /// [`abort`](Self::abort) refuse while held; [`close`](Self::close) fails the held batches
    /// with [`Error::Closed`], unappended.
    ///
    /// Fails as `begin` does, but never with the log's registration error (`release` has it).
    pub fn begin_held(&self, on_due: HeldBatchHook) -> Result<()> {
        let (producer_id, _) = self.transactional_ids()?;
        let mut acc = self.inner.accumulator.lock();
        may_begin(&acc, producer_id)?;
        acc.mode.txn = TxnPhase::Open;
        acc.mode.txn_error = None;
        acc.mode.held = Some(Held::Waiting(on_due));
        Ok(())
    }

    /// Ends the hold of [`begin_held`](Self::begin_held) without a release: every held batch,
    /// and every batch sent after, fails with a copy of `error`, never appended (their handles
    /// say so), and the transaction can only be aborted. For a coordinator that could not add
    /// the partition. A producer that holds nothing is left as it is.
    pub fn refuse_held(&self, error: Error) {
        let inner = &*self.inner;
        {
            let mut acc = inner.accumulator.lock();
            if acc.mode.held.is_none() {
                return;
            }
            acc.mode.held = Some(Held::Refused(error));
        }
        inner.sender_wake.wake();
    }

    /// Ends the hold of [`begin_held`](Self::begin_held): registers the transaction with the
    /// log ([`Log::register_transaction`]), then lets the sender append the held batches. A
    /// producer that holds nothing is left as it is.
    ///
    /// Fails with the log's registration error (the batches stay held), with
    /// [`Error::Closed`] once the producer is closing, or with the error of
    /// [`refuse_held`](Self::refuse_held).
    pub fn release(&self) -> Result<()> {
        let (producer_id, producer_epoch) = self.transactional_ids()?;
        let inner = &*self.inner;
        {
            let acc = inner.accumulator.lock();
            if acc.closing {
                return Err(Error::Closed);
            }
            match &acc.mode.held {
                None => return Ok(()),
                Some(Held::Refused(error)) => return Err(error.duplicate()),
                Some(Held::Waiting(_)) => {}
            }
        }
        inner
            .log
            .register_transaction(producer_id, producer_epoch)?;
        inner.accumulator.lock().mode.held = None;
        inner.sender_wake.wake();
        Ok(())
    }

    /// Commits the open transaction (Kafka's `commitTransaction`): seals the open batch, waits
    /// until every batch of the transaction is appended, then appends a COMMIT marker, and
    /// returns once the marker is done as the producer's [`Acks`] say (`all`: durable, with
    /// every record of the transaction; otherwise appended). `send` refuses records while it
    /// runs. A transaction that wrote nothing to the log needs no marker and gets none.
    ///
    /// Fails with [`Error::InvalidTxnState`] when no transaction is open, or when a batch of
    /// the transaction failed (its records' handles say how): the transaction can then only
    /// be aborted. A marker the log refuses fails with its error ([`Error::InvalidProducerEpoch`]
    /// for a fenced producer, which is then fatal); one it failed to append
    /// ([`Error::Io`](crate::Error::Io)) leaves the transaction open, to commit or abort again.
    /// Under `acks=all`, [`Error::Truncated`] or [`Error::Poisoned`] if the marker or a record of
    /// the transaction did not become durable; the transaction has ended all the same.
    pub fn commit(&self) -> Result<()> {
        self.end_transaction(ControlRecordType::Commit)
    }

    /// Aborts the open transaction (Kafka's `abortTransaction`): as [`commit`](Self::commit),
    /// with an ABORT marker, and allowed after a batch of the transaction failed. Records
    /// already sent in the transaction are appended before the marker, and stay in the log
    /// unseen by `read_committed` readers (their handles resolve to their offsets).
    pub fn abort(&self) -> Result<()> {
        self.end_transaction(ControlRecordType::Abort)
    }

    /// Whether a transaction is open: between [`begin`](Self::begin) and the end of
    /// [`commit`](Self::commit) or [`abort`](Self::abort), or resumed by [`Producer::new`] from
    /// the log (a transaction left open by a crash, or by a producer closed inside it).
    pub fn in_transaction(&self) -> bool {
        self.inner.accumulator.lock().mode.txn != TxnPhase::Idle
    }

    /// The producer id and epoch of a transactional producer.
    fn transactional_ids(&self) -> Result<(i64, i16)> {
        match self.inner.config.mode {
            ProducerMode::Transactional {
                producer_id,
                producer_epoch,
            } => Ok((producer_id, producer_epoch)),
            other => Err(txn_state(
                other.producer().map_or(-1, |(id, _)| id),
                "not a transactional producer: build its config with ProducerConfig::transactional",
            )),
        }
    }

    /// The body of `commit` and `abort`.
    fn end_transaction(&self, marker: ControlRecordType) -> Result<()> {
        let (producer_id, producer_epoch) = self.transactional_ids()?;
        let inner = &*self.inner;
        let mut acc = inner.accumulator.lock();
        if acc.closing {
            return Err(Error::Closed);
        }
        if let Some(fatal) = &acc.mode.fatal {
            return Err(fatal.duplicate());
        }
        if matches!(acc.mode.held, Some(Held::Waiting(_))) {
            return Err(txn_state(
                producer_id,
                "the transaction's batches are held: release() it before commit() or abort(), \
                 or close() the producer to fail them",
            ));
        }
        match acc.mode.txn {
            TxnPhase::Open => {}
            TxnPhase::Idle => {
                return Err(txn_state(
                    producer_id,
                    "no transaction is open: call begin() first",
                ));
            }
            TxnPhase::Ending => {
                return Err(txn_state(
                    producer_id,
                    "the transaction is being committed or aborted by another call",
                ));
            }
        }
        if marker == ControlRecordType::Commit
            && let Some(error) = &acc.mode.txn_error
        {
            return Err(abortable(producer_id, error));
        }
        acc.mode.txn = TxnPhase::Ending;
        if acc.seal_open() {
            inner.sender_wake.wake();
        }
        let target = acc.next_seq;
        while acc.completed_seq < target && !acc.sender_exited {
            inner.progress.wait(&mut acc);
        }
        let unconfirmed = acc.unconfirmed;
        // A failed batch of this transaction is reported here (by a refused commit) or made
        // moot (by the abort): `flush` and `close` need not report it again.
        let failed = acc.mode.txn_error.take();
        if failed.is_some() {
            acc.unreported_error = None;
        }
        if let Some(fatal) = acc.mode.fatal.as_ref().map(Error::duplicate) {
            acc.mode.txn = TxnPhase::Idle;
            return Err(fatal);
        }
        if marker == ControlRecordType::Commit
            && let Some(error) = failed
        {
            let refused = abortable(producer_id, &error);
            acc.mode.txn = TxnPhase::Open;
            acc.mode.txn_error = Some(error);
            return Err(refused);
        }
        drop(acc);
        // A transaction that wrote nothing has nothing for a marker to end; a log that knows
        // a higher epoch for the id answers the marker with the error the caller must hear.
        let needs_marker = inner.log.producer_state(producer_id).is_some_and(|entry| {
            entry.current_txn_first_offset.is_some() || entry.producer_epoch > producer_epoch
        });
        let appended = if needs_marker {
            append_marker_acked(&inner.log, inner.config.mode, inner.config.acks, marker)
        } else {
            Ok(())
        };
        let mut acc = inner.accumulator.lock();
        match &appended {
            Err(MarkerError::NotAppended(error)) if !is_fatal(error) => {
                acc.mode.txn = TxnPhase::Open;
            }
            Err(MarkerError::NotAppended(error)) => {
                acc.mode.fatal = Some(error.duplicate());
                acc.mode.txn = TxnPhase::Idle;
            }
            Ok(()) | Err(MarkerError::NotAcknowledged(_)) => acc.mode.txn = TxnPhase::Idle,
        }
        drop(acc);
        appended.map_err(MarkerError::into_error)?;
        // The marker is durable under acks=all, and the transaction's batches lie below it:
        // this only reports a truncation that took one of them.
        self.finish(None, unconfirmed)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::format::NewRecord;
    use crate::log::LogConfig;
    use crate::producer::ProducerConfig;

    /// The sender sends a batch again from the same sequence, as it would after losing the
    /// answer to its append: the log answers it as a duplicate, writing nothing, and the
    /// records' handles resolve to the offsets the first append gave them.
    #[test]
    fn a_resent_batch_resolves_its_handles_to_the_original_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let log = Arc::new(Log::open(dir.path(), LogConfig::default()).unwrap());
        let config = ProducerConfig::idempotent(3, 0)
            .acks(Acks::One)
            .linger_ms(60_000)
            .build()
            .unwrap();
        let producer = Producer::new(Arc::clone(&log), config).unwrap();
        let records: Vec<NewRecord> = (0..3u8)
            .map(|i| NewRecord::new(1_700_000_000_000, None, Some(&[i])))
            .collect();
        let send = || -> Vec<i64> {
            let handles: Vec<_> = records.iter().map(|r| producer.send(r).unwrap()).collect();
            producer.flush().unwrap();
            handles.into_iter().map(|h| h.wait().unwrap()).collect()
        };
        assert_eq!(send(), [0, 1, 2]);
        producer.inner.accumulator.lock().mode.next_sequence = 0;
        assert_eq!(send(), [0, 1, 2], "the original offsets");
        assert_eq!(log.log_end_offset(), 3, "the duplicate wrote nothing");
        let stats = producer.stats();
        assert_eq!((stats.batches_appended, stats.duplicate_batches), (1, 1));
        // The sequence goes on after the duplicate.
        let next = producer.send(&records[0]).unwrap();
        producer.flush().unwrap();
        assert_eq!(next.wait().unwrap(), 3);
        assert_eq!(log.producer_state(3).unwrap().last_sequence, 3);
        producer.close().unwrap();
    }
}
