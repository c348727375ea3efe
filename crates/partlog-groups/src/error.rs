//! The crate's one error type.

use std::fmt;

use crate::wire::{DecodeError, EncodeError};

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
    /// Kafka's OFFSET_METADATA_TOO_LARGE (12): a commit's metadata is longer than
    /// `offset.metadata.max.bytes`. Only that partition's commit is refused; shorten the
    /// metadata or raise the setting.
    OffsetMetadataTooLarge {
        /// The metadata's length in bytes.
        len: usize,
        /// The configured limit.
        max: usize,
    },
    /// Kafka's COORDINATOR_NOT_AVAILABLE (15): the group is Dead (deleted or being unloaded), or
    /// the offsets log could not take the write for a moment. Retry after rediscovering the
    /// coordinator.
    CoordinatorNotAvailable,
    /// Kafka's NOT_COORDINATOR (16): the offsets log failed (closed, poisoned by a failed fsync,
    /// an I/O error), so this coordinator can no longer answer for the group. Reopen the store.
    NotCoordinator,
    /// Kafka's ILLEGAL_GENERATION (22): the request names another generation than the group's;
    /// rejoin the group.
    IllegalGeneration,
    /// Kafka's INCONSISTENT_GROUP_PROTOCOL (23): the member's protocol type or protocols do not
    /// match the group's, or it offered none.
    InconsistentGroupProtocol,
    /// Kafka's INVALID_GROUP_ID (24): the group id is empty.
    InvalidGroupId,
    /// Kafka's UNKNOWN_MEMBER_ID (25): the group has no such member (it was removed, or never
    /// joined); rejoin with an empty member id.
    UnknownMemberId,
    /// Kafka's INVALID_SESSION_TIMEOUT (26): the session timeout is outside
    /// `group.min.session.timeout.ms`..=`group.max.session.timeout.ms`.
    InvalidSessionTimeout,
    /// Kafka's REBALANCE_IN_PROGRESS (27): the group is rebalancing; rejoin.
    RebalanceInProgress,
    /// Kafka's NON_EMPTY_GROUP (68): offsets of a group with members cannot be deleted.
    NonEmptyGroup,
    /// Kafka's GROUP_SUBSCRIBED_TO_TOPIC (86): a member of the group subscribes to the topic,
    /// so its offsets cannot be deleted.
    GroupSubscribedToTopic,
    /// Kafka's GROUP_ID_NOT_FOUND (69): the group does not exist (or is Dead).
    GroupIdNotFound,
    /// Kafka's MEMBER_ID_REQUIRED (79): join again with the member id the response carries
    /// (only with the two-step join turned on).
    MemberIdRequired,
    /// Kafka's GROUP_MAX_SIZE_REACHED (81): the group already has `group.max.size` members.
    GroupMaxSizeReached,
    /// Kafka's FENCED_INSTANCE_ID (82): another member joined with this `group.instance.id`
    /// since; this one must stop.
    FencedInstanceId,
    /// Kafka's UNSTABLE_OFFSET_COMMIT (88): an open transaction holds an offset for the
    /// partition; retry the fetch once it ends.
    UnstableOffsetCommit,
    /// A record of `__consumer_offsets` of a known type that does not parse: the log's
    /// directory and the record's offset say where. The store does not open over it.
    CorruptRecord {
        /// The log (its directory) that holds the record.
        log: String,
        /// The record's offset.
        offset: i64,
        /// What is wrong with it.
        what: DecodeError,
    },
    /// A key, value or blob cannot be written in Kafka's layout (a string longer than Kafka's
    /// `STRING` holds).
    Encode(EncodeError),
    /// The offsets log failed (partlog's error, shared so that every waiter gets it).
    #[cfg(feature = "coordinator")]
    Log(LogError),
    /// Kafka's `CommitFailedException`: the group rebalanced (or removed this member) since
    /// the consumer joined, so its commit was refused. Its partitions may now be another
    /// member's: poll again to rejoin, and reprocess from the committed offsets.
    CommitFailed {
        /// The coordinator's refusal (22 or 25).
        cause: Box<Error>,
    },
    /// Kafka's `NoOffsetForPartitionException`: `auto.offset.reset=none` and these partitions
    /// have no committed offset (or one out of range): `seek` them, or choose `earliest` or
    /// `latest`.
    NoOffsetForPartition {
        /// The partitions, sorted.
        partitions: Vec<crate::assignor::TopicPartition>,
    },
    /// A consumer call that its state does not allow (Kafka's `IllegalStateException`): the
    /// message says which and what to do.
    IllegalState {
        /// What is wrong.
        why: String,
    },
}

impl Error {
    /// Kafka's error code for this error, as a broker would answer; `None` for the errors that
    /// are partlog's own (the assignors', a corrupt record, a value that cannot be encoded).
    /// A log failure answers NOT_COORDINATOR (16) or COORDINATOR_NOT_AVAILABLE (15) as Kafka's
    /// coordinator maps the errors of its appends.
    pub fn kafka_code(&self) -> Option<i16> {
        Some(match self {
            Error::OffsetMetadataTooLarge { .. } => 12,
            Error::CoordinatorNotAvailable => 15,
            Error::NotCoordinator => 16,
            Error::IllegalGeneration => 22,
            Error::InconsistentGroupProtocol => 23,
            Error::InvalidGroupId => 24,
            Error::UnknownMemberId => 25,
            Error::InvalidSessionTimeout => 26,
            Error::RebalanceInProgress => 27,
            Error::NonEmptyGroup => 68,
            Error::GroupIdNotFound => 69,
            Error::GroupSubscribedToTopic => 86,
            Error::MemberIdRequired => 79,
            Error::GroupMaxSizeReached => 81,
            Error::FencedInstanceId => 82,
            Error::UnstableOffsetCommit => 88,
            #[cfg(feature = "coordinator")]
            Error::Log(e) => e.kafka_code(),
            _ => return None,
        })
    }
}

/// partlog's error from the offsets log, shared. Two are equal when they say the same.
#[cfg(feature = "coordinator")]
#[derive(Debug, Clone)]
pub struct LogError(pub std::sync::Arc<partlog::Error>);

#[cfg(feature = "coordinator")]
impl LogError {
    /// The code Kafka's coordinator answers for a failed append: NOT_COORDINATOR (16) when the
    /// log can take no more writes (closed, poisoned, an I/O error), else
    /// COORDINATOR_NOT_AVAILABLE (15).
    pub fn kafka_code(&self) -> i16 {
        match &*self.0 {
            partlog::Error::Closed | partlog::Error::Poisoned | partlog::Error::Io { .. } => 16,
            _ => 15,
        }
    }
}

#[cfg(feature = "coordinator")]
impl PartialEq for LogError {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0) || self.0.to_string() == other.0.to_string()
    }
}

#[cfg(feature = "coordinator")]
impl Eq for LogError {}

#[cfg(feature = "coordinator")]
impl From<partlog::Error> for Error {
    fn from(e: partlog::Error) -> Self {
        Error::Log(LogError(std::sync::Arc::new(e)))
    }
}

impl From<EncodeError> for Error {
    fn from(e: EncodeError) -> Self {
        Error::Encode(e)
    }
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
            Error::OffsetMetadataTooLarge { len, max } => write!(
                f,
                "the offset's metadata is {len} bytes, more than offset.metadata.max.bytes ({max}): shorten it or raise the setting"
            ),
            Error::CoordinatorNotAvailable => {
                f.write_str("the group coordinator is not available (the group is dead or the offsets log is busy): retry")
            }
            Error::NotCoordinator => f.write_str(
                "this store can no longer answer for the group (its offsets log failed): reopen it",
            ),
            Error::IllegalGeneration => {
                f.write_str("the generation is not the group's: rejoin the group")
            }
            Error::InconsistentGroupProtocol => f.write_str(
                "the protocol type or protocols do not match the group's (or none were given)",
            ),
            Error::InvalidGroupId => f.write_str("the group id is empty"),
            Error::UnknownMemberId => {
                f.write_str("the group has no such member: rejoin with an empty member id")
            }
            Error::InvalidSessionTimeout => f.write_str(
                "the session timeout is outside group.min.session.timeout.ms..=group.max.session.timeout.ms",
            ),
            Error::RebalanceInProgress => f.write_str("the group is rebalancing: rejoin"),
            Error::NonEmptyGroup => {
                f.write_str("the group has members: its offsets cannot be deleted")
            }
            Error::GroupIdNotFound => f.write_str("the group does not exist"),
            Error::GroupSubscribedToTopic => f.write_str(
                "a member of the group subscribes to the topic: its offsets cannot be deleted",
            ),
            Error::MemberIdRequired => {
                f.write_str("join again with the member id this response carries")
            }
            Error::GroupMaxSizeReached => {
                f.write_str("the group already has group.max.size members")
            }
            Error::FencedInstanceId => f.write_str(
                "another member joined with this group.instance.id since: this one is fenced",
            ),
            Error::UnstableOffsetCommit => f.write_str(
                "an open transaction holds an offset for the partition: retry once it ends",
            ),
            Error::CorruptRecord { log, offset, what } => write!(
                f,
                "the __consumer_offsets record at offset {offset} of {log} does not parse: {what}; restore the partition or delete the damaged records"
            ),
            Error::Encode(e) => write!(f, "cannot encode: {e}"),
            #[cfg(feature = "coordinator")]
            Error::Log(e) => write!(f, "the offsets log failed: {}", e.0),
            Error::CommitFailed { cause } => write!(
                f,
                "the commit failed because the group rebalanced or removed this member ({cause}): poll to rejoin and reprocess from the committed offsets"
            ),
            Error::NoOffsetForPartition { partitions } => {
                f.write_str("no committed offset and auto.offset.reset=none for")?;
                for tp in partitions {
                    write!(f, " {tp}")?;
                }
                f.write_str(": seek them, or set auto.offset.reset to earliest or latest")
            }
            Error::IllegalState { why } => f.write_str(why),
        }
    }
}

impl std::error::Error for Error {}
