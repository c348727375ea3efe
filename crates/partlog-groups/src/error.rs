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
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InconsistentAssignment { assignor, reason } => {
                write!(f, "the {assignor} assignor cannot assign this group: {reason}")
            }
        }
    }
}

impl std::error::Error for Error {}
