//! [`ProducerTransactionState`]: the states of a transactional [`TopicProducer`](super::TopicProducer),
//! Kafka's `TransactionManager.State`, with its legal transitions.

use std::fmt;

use partlog::Error;

/// Where a transactional producer stands (Kafka's `TransactionManager.State`, same names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProducerTransactionState {
    /// Before `init_transactions`.
    Uninitialized,
    /// `init_transactions` is getting the producer id and epoch from the coordinator.
    Initializing,
    /// No transaction open: `begin_transaction` opens one.
    Ready,
    /// A transaction is open: `send` adds records to it.
    InTransaction,
    /// `commit_transaction` is under way.
    CommittingTransaction,
    /// `abort_transaction` is under way.
    AbortingTransaction,
    /// The transaction failed and can only be aborted.
    AbortableError,
    /// The producer is done (fenced, or an error nothing recovers from): every call fails.
    FatalError,
}

impl ProducerTransactionState {
    /// Kafka's name of the state (`IN_TRANSACTION`).
    pub fn name(self) -> &'static str {
        use ProducerTransactionState::*;
        match self {
            Uninitialized => "UNINITIALIZED",
            Initializing => "INITIALIZING",
            Ready => "READY",
            InTransaction => "IN_TRANSACTION",
            CommittingTransaction => "COMMITTING_TRANSACTION",
            AbortingTransaction => "ABORTING_TRANSACTION",
            AbortableError => "ABORTABLE_ERROR",
            FatalError => "FATAL_ERROR",
        }
    }

    /// Kafka's `isTransitionValid`: whether the producer may move from `source` to `self`.
    pub fn is_transition_valid(self, source: ProducerTransactionState) -> bool {
        use ProducerTransactionState::*;
        match self {
            Uninitialized => matches!(source, Ready | AbortableError),
            Initializing => matches!(source, Uninitialized | AbortingTransaction),
            Ready => matches!(
                source,
                Initializing | CommittingTransaction | AbortingTransaction
            ),
            InTransaction => source == Ready,
            CommittingTransaction => source == InTransaction,
            AbortingTransaction => matches!(source, InTransaction | AbortableError),
            AbortableError => matches!(
                source,
                InTransaction | CommittingTransaction | AbortableError | Initializing
            ),
            FatalError => true,
        }
    }

    /// The error of an illegal transition, naming both states as Kafka's message does.
    pub(crate) fn illegal(
        self,
        source: ProducerTransactionState,
        transactional_id: &str,
        producer_id: i64,
    ) -> Error {
        Error::InvalidTxnState {
            producer_id,
            reason: format!(
                "TransactionalId {transactional_id}: Invalid transition attempted from state \
                 {source} to state {self}"
            ),
        }
    }
}

impl fmt::Display for ProducerTransactionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
