//! The crate's one error type.

use std::fmt;

/// What can go wrong in this crate.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The input led Kafka's algorithm into a state in which Kafka's own class throws (an
    /// `IllegalStateException` or a `NullPointerException`): for example owned partitions that
    /// the topic metadata does not have, claimed so that the bookkeeping no longer adds up.
    /// partlog returns this instead of an assignment that Kafka would never have produced.
    InconsistentAssignment {
        /// The assignor that gave up.
        assignor: &'static str,
        /// Which of Kafka's checks failed.
        reason: &'static str,
    },
    /// Kafka's sticky balance loop (`performReassignments`) would never return on this input:
    /// it came back to a state it had already been in, so Kafka's own class spins forever
    /// (seen in Kafka 4.4 on some groups with unequal subscriptions). partlog stops and says so.
    BalanceLoopCycles {
        /// The assignor that gave up.
        assignor: &'static str,
        /// How many sweeps over the partitions ran before the repeat.
        sweeps: usize,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InconsistentAssignment { assignor, reason } => {
                write!(
                    f,
                    "the {assignor} assignor cannot assign this group: {reason}"
                )
            }
            Error::BalanceLoopCycles { assignor, sweeps } => write!(
                f,
                "the {assignor} assignor's balance loop repeats a state after {sweeps} sweeps: Kafka's own class never returns on this group"
            ),
        }
    }
}

impl std::error::Error for Error {}
