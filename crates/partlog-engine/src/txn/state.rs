//! [`TransactionState`]: the states of a transactional id at its coordinator, with Kafka's ids
//! (stored in `__transaction_state` values), names, valid previous states and expiry rule.

use std::fmt;

/// A transactional id's state at the coordinator: Kafka's `TransactionState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TransactionState {
    /// No transaction in progress (id 0).
    Empty,
    /// A transaction in progress: partitions added, neither committed nor aborted (1).
    Ongoing,
    /// The commit is decided; the markers are on their way (2).
    PrepareCommit,
    /// The abort is decided; the markers are on their way (3).
    PrepareAbort,
    /// The commit markers are written (4).
    CompleteCommit,
    /// The abort markers are written (5).
    CompleteAbort,
    /// The id expired; its record is a tombstone (6).
    Dead,
    /// An ongoing transaction is being fenced by a new producer with the same id: the epoch is
    /// bumped and the transaction aborted (7). Never persisted; written as PrepareAbort.
    PrepareEpochFence,
}

impl TransactionState {
    /// Every state, in id order.
    pub const ALL: [TransactionState; 8] = [
        TransactionState::Empty,
        TransactionState::Ongoing,
        TransactionState::PrepareCommit,
        TransactionState::PrepareAbort,
        TransactionState::CompleteCommit,
        TransactionState::CompleteAbort,
        TransactionState::Dead,
        TransactionState::PrepareEpochFence,
    ];

    /// The id stored in a `__transaction_state` value (`TransactionStatus`).
    pub fn id(self) -> i8 {
        match self {
            TransactionState::Empty => 0,
            TransactionState::Ongoing => 1,
            TransactionState::PrepareCommit => 2,
            TransactionState::PrepareAbort => 3,
            TransactionState::CompleteCommit => 4,
            TransactionState::CompleteAbort => 5,
            TransactionState::Dead => 6,
            TransactionState::PrepareEpochFence => 7,
        }
    }

    /// The state of an id (Kafka's `fromId`); `None` for an unknown id.
    pub fn from_id(id: i8) -> Option<TransactionState> {
        usize::try_from(id)
            .ok()
            .and_then(|index| TransactionState::ALL.get(index).copied())
    }

    /// Kafka's `stateName`: `Empty`, `Ongoing`, `PrepareCommit`, …, as Kafka's tools print it.
    pub fn name(self) -> &'static str {
        match self {
            TransactionState::Empty => "Empty",
            TransactionState::Ongoing => "Ongoing",
            TransactionState::PrepareCommit => "PrepareCommit",
            TransactionState::PrepareAbort => "PrepareAbort",
            TransactionState::CompleteCommit => "CompleteCommit",
            TransactionState::CompleteAbort => "CompleteAbort",
            TransactionState::Dead => "Dead",
            TransactionState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    /// The states a transition into this one may start from (Kafka's `validPreviousStates`).
    pub fn valid_previous_states(self) -> &'static [TransactionState] {
        use TransactionState::*;
        match self {
            Empty => &[Empty, CompleteCommit, CompleteAbort],
            Ongoing => &[Ongoing, Empty, CompleteCommit, CompleteAbort],
            PrepareCommit => &[Ongoing],
            PrepareAbort => &[Ongoing, PrepareEpochFence],
            CompleteCommit => &[PrepareCommit],
            CompleteAbort => &[PrepareAbort],
            Dead => &[Empty, CompleteAbort, CompleteCommit],
            PrepareEpochFence => &[Ongoing],
        }
    }

    /// Whether an id idle in this state may expire (`transactional.id.expiration.ms`):
    /// Empty, CompleteCommit and CompleteAbort.
    pub fn is_expiration_allowed(self) -> bool {
        matches!(
            self,
            TransactionState::Empty
                | TransactionState::CompleteCommit
                | TransactionState::CompleteAbort
        )
    }
}

impl fmt::Display for TransactionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_unknown_ids_are_none() {
        for state in TransactionState::ALL {
            assert_eq!(TransactionState::from_id(state.id()), Some(state));
        }
        assert_eq!(TransactionState::from_id(8), None);
        assert_eq!(TransactionState::from_id(-1), None);
    }
}
