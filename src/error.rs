//! The one error type of the crate.
//!
//! Every fallible call returns [`Error`]. Its variants are stable enough to match on; the enum is
//! `#[non_exhaustive]` so that new failure modes can be added without a breaking change.

use std::fmt;
use std::path::PathBuf;

/// The result type of every fallible partlog call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in partlog.
///
/// Messages are lowercase and specific, so that they can be shown to a user as they are.
///
/// # What each error means to a caller
///
/// | error | what happened | what the caller does |
/// | --- | --- | --- |
/// | [`Io`](Error::Io) | the OS failed a call; a write that returned it published nothing (or, if even its cut-back failed, the log is poisoned) | retry, or surface it; `kind()` tells ENOSPC from EIO |
/// | [`Corrupt`](Error::Corrupt) | bytes on disk fail a check, or offsets are missing between two segments of a log that is not compacted ([`Corruption::MissingOffsets`]), and no concurrent truncation explains it | stop; `partlog verify`, or reopen with [`RecoveryMode::TruncateAtCorruption`](crate::RecoveryMode::TruncateAtCorruption) |
/// | [`Truncated`](Error::Truncated) | a truncation removed the offset read or waited for; offsets from `at` may hold other records now | re-read from below `at`; send an unacknowledged record again |
/// | [`OffsetOutOfRange`](Error::OffsetOutOfRange) | the offset is below the log start (retention, `delete_records_before`) or above the log end with no truncation to blame | reset the position (Kafka's `auto.offset.reset`) |
/// | [`Poisoned`](Error::Poisoned) | an earlier fsync failed; nothing above the durable offset is vouched for | reopen the log, which recovers from what the disk holds |
/// | [`Closed`](Error::Closed) | `close()` ran, or the producer closed | stop |
/// | [`Locked`](Error::Locked) | another process or handle holds the directory | wait, or open read-only |
/// | [`InvalidBatch`](Error::InvalidBatch), [`RecordTooLarge`](Error::RecordTooLarge), [`InvalidTimestamp`](Error::InvalidTimestamp), [`UnsupportedCompression`](Error::UnsupportedCompression), [`InvalidArgument`](Error::InvalidArgument), [`InvalidConfig`](Error::InvalidConfig), [`Unsupported`](Error::Unsupported) | the caller's input was refused; nothing changed | fix the input |
/// | [`BufferExhausted`](Error::BufferExhausted) | a [`Producer`](crate::Producer)'s `buffer.memory` stayed full for `max.block.ms` | slow down, or raise the limits |
/// | the variants with a Kafka error code ([`kafka_code`](Error::kafka_code)) | what a Kafka broker refuses with that code | what a Kafka client does |
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The operating system (or the simulator) failed an I/O call on `path`.
    #[error("i/o error on {}: {source}", path.display())]
    Io {
        /// The file or directory the call was about.
        path: PathBuf,
        /// The underlying error; its `kind()` tells ENOSPC, EIO and friends apart.
        #[source]
        source: std::io::Error,
    },

    /// Bytes in a file failed a check: a CRC, a length, a varint, an offset order.
    #[error(
        "corrupt data in {} at byte {position}: {what}; run `partlog verify` on the log's directory to see the damage (`--repair` rebuilds what is derived from the data, `--truncate-at-corruption` also cuts at it)",
        file.display()
    )]
    Corrupt {
        /// The file that holds the bad bytes.
        file: PathBuf,
        /// The byte position in that file where the bad batch or entry starts.
        position: u64,
        /// What exactly is wrong.
        what: Corruption,
    },

    /// Opening found damage that no crash explains in a log whose durable point is unknown
    /// (`partlog.checkpoint` is missing, or neither of its slots is valid), and recovering would
    /// discard more than the torn tail of the last segment: invalid bytes in a segment that has
    /// later ones, a gap between segments of a log that is not compacted, or a batch whose CRC
    /// is right but whose offsets no offset can follow. Nothing was changed;
    /// [`RecoveryMode::TruncateAtCorruption`](crate::RecoveryMode::TruncateAtCorruption) accepts
    /// the loss that `discarded` describes.
    #[error(
        "corrupt data in {} at byte {position}: {what}; partlog.checkpoint is missing or unreadable, so the durable point is unknown and this is damage, not a torn write: recovery would discard {discarded}. Nothing was changed; opening with RecoveryMode::TruncateAtCorruption accepts the loss",
        file.display()
    )]
    DamagedWithoutCheckpoint {
        /// The `.log` file where the damage starts.
        file: PathBuf,
        /// The byte of `file` where it starts.
        position: u64,
        /// What is wrong there.
        what: Corruption,
        /// What recovery would discard.
        discarded: Box<crate::log::Discarded>,
    },

    /// Bytes handed in by a caller (for example a producer-built batch) failed a check.
    #[error("invalid batch: {what}")]
    InvalidBatch {
        /// What exactly is wrong.
        what: Corruption,
    },

    /// A read asked for an offset the log does not hold.
    #[error("offset {requested} is out of range: the log holds offsets [{start}, {end})")]
    OffsetOutOfRange {
        /// The offset asked for.
        requested: i64,
        /// The log start offset at the time of the call.
        start: i64,
        /// The log end offset (exclusive) at the time of the call.
        end: i64,
    },

    /// A batch is larger than the configured limit (`max.message.bytes`), than the batching
    /// writer's `buffer.memory`, or than the format or a segment can hold. The message names
    /// the limit and, for a setting, how to raise it.
    #[error(
        "batch of {size} bytes exceeds {limit} ({max} bytes){}",
        limit_hint(limit)
    )]
    RecordTooLarge {
        /// The size of the batch in bytes, including the 12-byte log overhead.
        size: u64,
        /// The limit that it exceeds.
        max: u64,
        /// Which limit: a setting's Kafka name (`max.message.bytes`, `buffer.memory`) or what
        /// else bounds it (`the largest batch the format can frame`, `the room left in the
        /// segment`).
        limit: &'static str,
    },

    /// A record timestamp is outside the allowed window.
    #[error("invalid timestamp {timestamp}: {why}")]
    InvalidTimestamp {
        /// The offending timestamp, in milliseconds since the epoch.
        timestamp: i64,
        /// Which bound it broke.
        why: String,
    },

    /// A batch uses a compression codec that this build cannot decode or encode: gzip or snappy
    /// without its feature, either of them for writing (partlog never writes them), or ids 5-7.
    #[error("unsupported compression codec {codec}{}", codec_hint(*codec))]
    UnsupportedCompression {
        /// The codec id from the batch attributes (1 gzip, 2 snappy, 5..=7 unknown).
        codec: u8,
    },

    /// A value in a [`LogConfig`](crate) or builder is out of range.
    #[error("invalid value for {setting}: {why}")]
    InvalidConfig {
        /// The setting's name, as Kafka spells it where Kafka has one (`segment.bytes`).
        setting: &'static str,
        /// Why the value was rejected.
        why: String,
    },

    /// Another process or handle holds the lock on the log directory.
    #[error("{} is locked by another user of the log{}", path.display(), locked_hint(*in_this_process))]
    Locked {
        /// The lock file.
        path: PathBuf,
        /// Whether the holder is another [`Log`](crate::Log) of this very process, which a
        /// second `Log::open` of the same directory meets: share the first handle instead.
        in_this_process: bool,
    },

    /// A previous fsync failed; the log refuses writes until it is reopened and recovered.
    #[error("the log is poisoned by an earlier failed fsync; reopen it to recover")]
    Poisoned,

    /// The log was truncated below a reader's position.
    #[error("the log was truncated at offset {at}")]
    Truncated {
        /// The new log end offset.
        at: i64,
    },

    /// The log or segment was closed.
    #[error("the log is closed")]
    Closed,

    /// The input uses a feature that partlog does not support (yet).
    #[error("unsupported: {what}")]
    Unsupported {
        /// What is not supported.
        what: String,
    },

    /// A caller broke an API precondition (for example a non-increasing offset).
    #[error("invalid argument: {why}")]
    InvalidArgument {
        /// What was wrong with the argument.
        why: String,
    },

    /// The batching writer's memory (`buffer.memory`) stayed full for `max.block.ms`, so a `send`
    /// gave up without queueing its record (Kafka's `BufferExhaustedException`).
    #[error(
        "buffer.memory ({buffer_memory} bytes) stayed full for max.block.ms ({max_block_ms} ms); the record was not queued"
    )]
    BufferExhausted {
        /// The configured `buffer.memory`.
        buffer_memory: u64,
        /// The configured `max.block.ms`.
        max_block_ms: u64,
    },

    /// An idempotent or transactional batch does not continue its producer's sequence: its
    /// `baseSequence` is not the last one plus 1 (wrapping after `i32::MAX` to 0), or a new epoch
    /// does not start at 0 (Kafka's `OutOfOrderSequenceException`, code 45). A retry of a batch
    /// older than the producer's last 5 lands here too.
    #[error("out of order sequence for producer {producer_id}: expected {expected}, found {found}")]
    OutOfOrderSequence {
        /// The producer id of the batch.
        producer_id: i64,
        /// The sequence the log expected (0 for a new epoch); -1 when the producer has no
        /// sequence yet (its last write was a marker).
        expected: i32,
        /// The batch's `baseSequence`.
        found: i32,
    },

    /// A batch or marker carries a producer epoch below the one the log knows for its producer:
    /// a fenced (zombie) producer (Kafka's `InvalidProducerEpochException`, code 47).
    #[error("producer {producer_id} has epoch {current}; epoch {found} is fenced")]
    InvalidProducerEpoch {
        /// The producer id of the batch.
        producer_id: i64,
        /// The epoch the log holds for the producer.
        current: i16,
        /// The epoch of the batch.
        found: i16,
    },

    /// A batch does not fit its producer's transaction state: non-transactional data while the
    /// producer has an open transaction, or transactional data that no registered transaction
    /// covers (Kafka's `InvalidTxnStateException`, code 48). A [`Producer`](crate::Producer)
    /// answers with it a call out of its transaction's order too (a transactional `send`
    /// outside a transaction, `begin` inside one, `commit` with none open or after a failed
    /// batch), where Kafka's client throws `IllegalStateException`; `reason` says what to do.
    #[error("invalid transaction state for producer {producer_id}: {reason}")]
    InvalidTxnState {
        /// The producer id of the batch.
        producer_id: i64,
        /// Which rule the batch broke.
        reason: String,
    },

    /// A transaction marker carries a coordinator epoch below the one the log holds for its
    /// producer: it comes from a zombie transaction coordinator (Kafka's
    /// `TransactionCoordinatorFencedException`, code 52).
    #[error(
        "transaction marker for producer {producer_id} has coordinator epoch {found}, below the current {current}"
    )]
    TransactionCoordinatorFenced {
        /// The producer id of the marker.
        producer_id: i64,
        /// The coordinator epoch the log holds for the producer.
        current: i32,
        /// The coordinator epoch of the marker.
        found: i32,
    },
    /// A request to the transaction coordinator is malformed: an empty `transactional.id`
    /// (Kafka's `INVALID_REQUEST`, code 42).
    #[error("invalid request: {why}")]
    InvalidRequest {
        /// What is wrong with the request.
        why: String,
    },

    /// The transaction coordinator holds no state for the transactional id, or holds another
    /// producer id for it (Kafka's `INVALID_PRODUCER_ID_MAPPING`, code 49): the producer must
    /// call `init_producer_id` (`initTransactions`) again.
    #[error(
        "transactional id {transactional_id:?} is not mapped to producer {producer_id}: call init_producer_id first"
    )]
    InvalidProducerIdMapping {
        /// The transactional id.
        transactional_id: String,
        /// The producer id of the request.
        producer_id: i64,
    },

    /// A transaction timeout is not positive or exceeds `transaction.max.timeout.ms` (Kafka's
    /// `INVALID_TRANSACTION_TIMEOUT`, code 50).
    #[error(
        "transaction timeout {timeout_ms} ms is invalid: it must be above 0 and at most transaction.max.timeout.ms ({max_timeout_ms} ms)"
    )]
    InvalidTransactionTimeout {
        /// The timeout asked for.
        timeout_ms: i64,
        /// The coordinator's `transaction.max.timeout.ms`.
        max_timeout_ms: i64,
    },

    /// The transaction coordinator is completing another transition of the transactional id
    /// (a commit or abort whose markers are on their way, an append in flight): retry after a
    /// backoff (Kafka's `CONCURRENT_TRANSACTIONS`, code 51, which clients retry).
    #[error(
        "transactional id {transactional_id:?} is busy ({state}): retry once the transition in progress completes"
    )]
    ConcurrentTransactions {
        /// The transactional id.
        transactional_id: String,
        /// The state, or the transition, in progress.
        state: String,
    },

    /// Another producer with the same `transactional.id` has initialized, or the request's epoch
    /// is not the current one: this producer is a zombie and must close (Kafka's
    /// `PRODUCER_FENCED`, code 90, fatal to the producer).
    #[error(
        "producer {producer_id} with epoch {found} of transactional id {transactional_id:?} is fenced: the current epoch is {current}"
    )]
    ProducerFenced {
        /// The transactional id.
        transactional_id: String,
        /// The producer id of the request.
        producer_id: i64,
        /// The coordinator's current epoch for the id.
        current: i16,
        /// The epoch of the request.
        found: i16,
    },

    /// A client append reached a log or partition that is not the leader (it became a
    /// follower), or a leader-only call reached a follower (Kafka's `NOT_LEADER_OR_FOLLOWER`,
    /// code 6).
    #[error("not the leader: {why}")]
    NotLeaderOrFollower {
        /// What the call found instead of a leader.
        why: String,
    },

    /// An `acks=all` append was not replicated to the in-sync replicas within the caller's
    /// timeout (Kafka's `REQUEST_TIMED_OUT`, code 7). The records are in the leader's log and
    /// may still be committed later.
    #[error("request timed out after {timeout_ms} ms waiting for {what}")]
    RequestTimedOut {
        /// The caller's timeout.
        timeout_ms: u64,
        /// What the call was waiting for.
        what: String,
    },

    /// An `acks=all` append found fewer in-sync replicas than `min.insync.replicas` (capped at
    /// the replication factor) and wrote nothing (Kafka's `NOT_ENOUGH_REPLICAS`, code 19).
    #[error(
        "not enough in-sync replicas: {in_sync} in the ISR, {required} required (min.insync.replicas); nothing was written"
    )]
    NotEnoughReplicas {
        /// The size of the ISR at the time of the call.
        in_sync: usize,
        /// The effective `min.insync.replicas`.
        required: usize,
    },

    /// An `acks=all` append was written, but the ISR shrank below `min.insync.replicas` before
    /// it was committed (Kafka's `NOT_ENOUGH_REPLICAS_AFTER_APPEND`, code 20). The records stay
    /// in the log; an idempotent retry is deduplicated.
    #[error(
        "the ISR shrank to {in_sync}, below the {required} in-sync replicas required, after the append; the records were written"
    )]
    NotEnoughReplicasAfterAppend {
        /// The size of the ISR when the shrink was seen.
        in_sync: usize,
        /// The effective `min.insync.replicas`.
        required: usize,
    },

    /// A request carries a leader epoch older than the partition's: it comes from a replica
    /// that missed a leader change, or `become_leader` was given an epoch below the epoch
    /// cache's latest (Kafka's `FENCED_LEADER_EPOCH`, code 74).
    #[error("leader epoch {found} is fenced: the current leader epoch is {current}")]
    FencedLeaderEpoch {
        /// The partition's (or the cache's) current leader epoch.
        current: i32,
        /// The epoch the request carried.
        found: i32,
    },

    /// A request carries a leader epoch newer than the partition's: this replica has not yet
    /// learned of the leader change (Kafka's `UNKNOWN_LEADER_EPOCH`, code 75).
    #[error("leader epoch {found} is unknown: the current leader epoch is {current}")]
    UnknownLeaderEpoch {
        /// The partition's current leader epoch.
        current: i32,
        /// The epoch the request carried.
        found: i32,
    },

    /// A replica outside the partition's last ISR was asked to lead while
    /// `unclean.leader.election.enable` is off. Its log may lack records the ISR committed, and
    /// the followers would truncate them away. Kafka's controller refuses the same election
    /// (`ELIGIBLE_LEADERS_NOT_AVAILABLE`, code 83).
    #[error(
        "replica {replica} is not in the last ISR {isr:?}{}: making it the leader is an unclean \
         leader election, which can lose committed records; set unclean.leader.election.enable \
         (ReplicaConfig::unclean_leader_election_enable) to allow it",
        elr_hint(elr)
    )]
    UncleanLeaderElection {
        /// The replica asked to lead.
        replica: i32,
        /// The last ISR the partition was told.
        isr: Vec<i32>,
        /// Its eligible leader replicas (KIP-966), which may lead cleanly once the ISR is empty.
        elr: Vec<i32>,
    },

    /// A file the directory must hold is missing, and recreating it empty would lose state
    /// that was acknowledged (for example `partlog.raft-state` beside a non-empty log: the Raft
    /// vote). The message says how to recover.
    #[error("{} is missing: {why}", path.display())]
    MissingFile {
        /// The file.
        path: PathBuf,
        /// What was lost with it, and what to do.
        why: String,
    },

    /// A follower append starts below the log end offset (Kafka's
    /// `UnexpectedAppendOffsetException`): the follower must truncate first. Nothing was
    /// written.
    #[error(
        "unexpected append offset: the batches start at {found}, the log ends at {log_end_offset}"
    )]
    UnexpectedAppendOffset {
        /// The log end offset at the time of the call.
        log_end_offset: i64,
        /// The first offset of the batches.
        found: i64,
    },

    /// The batches of a follower append do not have strictly increasing offsets (Kafka's
    /// `OffsetsOutOfOrderException`). Nothing was written.
    #[error(
        "offsets out of order: a batch starting at {found} follows one ending at {previous_last}"
    )]
    OffsetsOutOfOrder {
        /// The last offset of the previous batch.
        previous_last: i64,
        /// The base offset of the batch that does not follow it.
        found: i64,
    },
}

/// What is wrong with a corrupt batch, record or index entry.
///
/// Carried by [`Error::Corrupt`] (bytes from a file) and [`Error::InvalidBatch`] (bytes from a caller).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Corruption {
    /// Fewer bytes are present than the structure needs.
    Truncated {
        /// How many bytes the structure needs.
        needed: u64,
        /// How many are there.
        available: u64,
    },
    /// The batch length field is outside the legal range.
    BadBatchLength(i32),
    /// The magic byte is not one partlog can read here.
    BadMagic(i8),
    /// The stored CRC does not match the computed one.
    CrcMismatch {
        /// The CRC stored in the batch.
        stored: u32,
        /// The CRC computed over the bytes.
        computed: u32,
    },
    /// A varint is longer than its type allows, or runs past the end of its buffer.
    BadVarint,
    /// A record's framing is wrong (length, key, value or header sizes).
    BadRecord(&'static str),
    /// The number of records found differs from the declared count, or bytes remain after the last one.
    RecordCount {
        /// The count in the batch header.
        declared: i32,
        /// What was actually found (or -1 when bytes remained after the declared count).
        found: i64,
    },
    /// A compressed payload failed to decompress.
    BadCompression(String),
    /// A header field breaks a batch invariant (for example lastOffsetDelta < 0).
    BadHeader(&'static str),
    /// An offset is not above the previous one, or lies outside its segment's range.
    OffsetOrder {
        /// The offending offset.
        offset: i64,
        /// The bound it should have exceeded or respected.
        bound: i64,
    },
    /// An index entry does not agree with the log.
    BadIndexEntry(String),
    /// A segment ends below the next segment's base offset in a log whose records were never
    /// compacted (its `partlog.checkpoint` does not say they were, and its cleanup policy does
    /// not include compact): the offsets in between are missing. Only compaction leaves such a
    /// gap, so there it means lost bytes (a `.log` file cut short at a batch boundary, or a
    /// segment lost).
    MissingOffsets {
        /// The offset after the segment's last batch: the first one missing.
        from: i64,
        /// The next segment's base offset: the first one there again.
        to: i64,
    },
}

impl fmt::Display for Corruption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Corruption::Truncated { needed, available } => {
                write!(f, "truncated: needs {needed} bytes, {available} present")
            }
            Corruption::BadBatchLength(len) => write!(f, "batch length {len} is out of range"),
            Corruption::BadMagic(magic) => write!(f, "magic byte {magic} is not supported here"),
            Corruption::CrcMismatch { stored, computed } => {
                write!(
                    f,
                    "crc mismatch: stored {stored:#010x}, computed {computed:#010x}"
                )
            }
            Corruption::BadVarint => write!(f, "malformed varint"),
            Corruption::BadRecord(why) => write!(f, "bad record: {why}"),
            Corruption::RecordCount { declared, found } if *found < 0 => {
                write!(f, "bytes remain after the declared {declared} records")
            }
            Corruption::RecordCount { declared, found } => {
                write!(f, "batch declares {declared} records but holds {found}")
            }
            Corruption::BadCompression(why) => write!(f, "bad compressed payload: {why}"),
            Corruption::BadHeader(why) => write!(f, "bad batch header: {why}"),
            Corruption::OffsetOrder { offset, bound } => {
                write!(f, "offset {offset} is out of order (bound {bound})")
            }
            Corruption::BadIndexEntry(why) => write!(f, "bad index entry: {why}"),
            Corruption::MissingOffsets { from, to } => write!(
                f,
                "offsets [{from}, {to}) are missing: the segment ends at offset {from} but the \
                 next one begins at {to} (such gaps are legal only in a log whose records \
                 were compacted, which partlog.checkpoint records, or whose cleanup.policy \
                 includes compact)"
            ),
        }
    }
}

/// Why a codec id is unsupported, for the message of [`Error::UnsupportedCompression`].
fn limit_hint(limit: &str) -> &'static str {
    match limit {
        MAX_MESSAGE_BYTES => {
            "; raise it with LogConfig::builder().max_message_bytes(..) (Kafka's topic config max.message.bytes)"
        }
        BUFFER_MEMORY => "; raise it with ProducerConfig::builder().buffer_memory(..)",
        _ => "",
    }
}

/// The `limit` of [`Error::RecordTooLarge`] for the log's batch limit.
pub(crate) const MAX_MESSAGE_BYTES: &str = "max.message.bytes";
/// The `limit` of [`Error::RecordTooLarge`] for the batching writer's memory.
pub(crate) const BUFFER_MEMORY: &str = "buffer.memory";
/// The `limit` of [`Error::RecordTooLarge`] for a batch the format cannot frame.
pub(crate) const FORMAT_BATCH_LIMIT: &str = "the largest batch the format can frame";

fn elr_hint(elr: &[i32]) -> String {
    if elr.is_empty() {
        String::new()
    } else {
        format!(" or its eligible leader replicas {elr:?}")
    }
}

fn locked_hint(in_this_process: bool) -> &'static str {
    if in_this_process {
        ": this process has it open already (one Log per directory: share that handle, \
         it is Send + Sync, or close it first)"
    } else {
        ""
    }
}

fn codec_hint(codec: u8) -> &'static str {
    match codec {
        1 => " (gzip: partlog reads it with the `gzip` feature and never writes it)",
        2 => " (snappy: partlog reads it with the `snappy` feature and never writes it)",
        5.. => " (not a Kafka codec)",
        _ => "",
    }
}

/// A copy of an I/O error (which does not clone): its OS error code, or else its kind and
/// message.
fn duplicate_io_error(source: &std::io::Error) -> std::io::Error {
    match source.raw_os_error() {
        Some(code) => std::io::Error::from_raw_os_error(code),
        None => std::io::Error::new(source.kind(), source.to_string()),
    }
}

impl Error {
    /// Wraps an `std::io::Error` with the path it concerns.
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// A copy of this error, for delivering one failure to many waiters (every record of a
    /// batch that failed). An I/O error's copy keeps its kind, OS error code and message, but
    /// not its source chain.
    pub(crate) fn duplicate(&self) -> Error {
        // Every variant but `Io` holds fields that clone. The generated match is exhaustive: a
        // new variant must be listed here.
        macro_rules! copy_fields {
            ($error:expr; $($variant:ident { $($field:ident),* }),* $(,)?) => {
                match $error {
                    Error::Io { path, source } => Error::Io {
                        path: path.clone(),
                        source: duplicate_io_error(source),
                    },
                    $(Error::$variant { $($field),* } => Error::$variant {
                        $($field: Clone::clone($field)),*
                    },)*
                }
            };
        }
        copy_fields! { self;
            Corrupt { file, position, what },
            DamagedWithoutCheckpoint { file, position, what, discarded },
            InvalidBatch { what },
            OffsetOutOfRange { requested, start, end },
            RecordTooLarge { size, max, limit },
            InvalidTimestamp { timestamp, why },
            UnsupportedCompression { codec },
            InvalidConfig { setting, why },
            Locked { path, in_this_process },
            Poisoned {},
            Truncated { at },
            Closed {},
            Unsupported { what },
            InvalidArgument { why },
            BufferExhausted { buffer_memory, max_block_ms },
            OutOfOrderSequence { producer_id, expected, found },
            InvalidProducerEpoch { producer_id, current, found },
            InvalidTxnState { producer_id, reason },
            TransactionCoordinatorFenced { producer_id, current, found },
            InvalidRequest { why },
            InvalidProducerIdMapping { transactional_id, producer_id },
            InvalidTransactionTimeout { timeout_ms, max_timeout_ms },
            ConcurrentTransactions { transactional_id, state },
            ProducerFenced { transactional_id, producer_id, current, found },
            NotLeaderOrFollower { why },
            RequestTimedOut { timeout_ms, what },
            NotEnoughReplicas { in_sync, required },
            NotEnoughReplicasAfterAppend { in_sync, required },
            FencedLeaderEpoch { current, found },
            UnknownLeaderEpoch { current, found },
            UncleanLeaderElection { replica, isr, elr },
            MissingFile { path, why },
            UnexpectedAppendOffset { log_end_offset, found },
            OffsetsOutOfOrder { previous_last, found },
        }
    }

    /// The code of Kafka's `Errors` enum that a broker answers for this failure, so that tests
    /// and callers bridging to Kafka's protocol can speak Kafka's codes. `None` where Kafka has
    /// no matching code (a lock held by another user of the directory, a closed handle, a
    /// precondition of partlog's API, the batching writer's full memory).
    ///
    /// A batch whose bytes fail a check is `CORRUPT_MESSAGE` (2), as Kafka answers a batch that
    /// fails its CRC or size checks; a poisoned log is `KAFKA_STORAGE_ERROR` (56), as a broker
    /// answers for a log directory that failed.
    pub fn kafka_code(&self) -> Option<i16> {
        match self {
            Error::OffsetOutOfRange { .. } => Some(1),
            Error::Corrupt { .. }
            | Error::DamagedWithoutCheckpoint { .. }
            | Error::InvalidBatch { .. } => Some(2),
            Error::RecordTooLarge { .. } => Some(10),
            Error::InvalidTimestamp { .. } => Some(32),
            Error::InvalidConfig { .. } => Some(40),
            Error::OutOfOrderSequence { .. } => Some(45),
            Error::InvalidProducerEpoch { .. } => Some(47),
            Error::InvalidTxnState { .. } => Some(48),
            Error::TransactionCoordinatorFenced { .. } => Some(52),
            Error::InvalidRequest { .. } => Some(42),
            Error::InvalidProducerIdMapping { .. } => Some(49),
            Error::InvalidTransactionTimeout { .. } => Some(50),
            Error::ConcurrentTransactions { .. } => Some(51),
            Error::ProducerFenced { .. } => Some(90),
            Error::NotLeaderOrFollower { .. } => Some(6),
            Error::RequestTimedOut { .. } => Some(7),
            Error::NotEnoughReplicas { .. } => Some(19),
            Error::NotEnoughReplicasAfterAppend { .. } => Some(20),
            Error::FencedLeaderEpoch { .. } => Some(74),
            Error::UnknownLeaderEpoch { .. } => Some(75),
            Error::UncleanLeaderElection { .. } => Some(83),
            Error::Io { .. } | Error::Poisoned | Error::MissingFile { .. } => Some(56),
            Error::UnsupportedCompression { .. } => Some(76),
            Error::Locked { .. }
            | Error::Truncated { .. }
            | Error::Closed
            | Error::Unsupported { .. }
            | Error::InvalidArgument { .. }
            | Error::BufferExhausted { .. }
            | Error::UnexpectedAppendOffset { .. }
            | Error::OffsetsOutOfOrder { .. } => None,
        }
    }

    /// The `std::io::ErrorKind` of an I/O error, if this is one. Handy for telling ENOSPC apart.
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        match self {
            Error::Io { source, .. } => Some(source.kind()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io_error() -> Error {
        Error::io("/x", std::io::Error::other("disk"))
    }

    /// The errors about bytes, files and settings, with Kafka's codes.
    fn data_and_storage_cases() -> Vec<(Error, Option<i16>)> {
        vec![
            (
                Error::OffsetOutOfRange {
                    requested: 5,
                    start: 0,
                    end: 3,
                },
                Some(1),
            ),
            (
                Error::Corrupt {
                    file: "/x".into(),
                    position: 0,
                    what: Corruption::BadVarint,
                },
                Some(2),
            ),
            (
                Error::InvalidBatch {
                    what: Corruption::BadVarint,
                },
                Some(2),
            ),
            (
                Error::RecordTooLarge {
                    size: 2,
                    max: 1,
                    limit: "max.message.bytes",
                },
                Some(10),
            ),
            (
                Error::InvalidTimestamp {
                    timestamp: 0,
                    why: "old".into(),
                },
                Some(32),
            ),
            (
                Error::InvalidConfig {
                    setting: "segment.bytes",
                    why: "small".into(),
                },
                Some(40),
            ),
            (
                Error::MissingFile {
                    path: "/x".into(),
                    why: "x".into(),
                },
                Some(56),
            ),
            (io_error(), Some(56)),
            (Error::Poisoned, Some(56)),
            (Error::UnsupportedCompression { codec: 2 }, Some(76)),
        ]
    }

    /// The producer-state errors, with Kafka's codes.
    fn producer_cases() -> Vec<(Error, Option<i16>)> {
        vec![
            (
                Error::OutOfOrderSequence {
                    producer_id: 1,
                    expected: 2,
                    found: 5,
                },
                Some(45),
            ),
            (
                Error::InvalidProducerEpoch {
                    producer_id: 1,
                    current: 1,
                    found: 0,
                },
                Some(47),
            ),
            (
                Error::InvalidTxnState {
                    producer_id: 1,
                    reason: "open transaction".into(),
                },
                Some(48),
            ),
            (
                Error::TransactionCoordinatorFenced {
                    producer_id: 1,
                    current: 2,
                    found: 1,
                },
                Some(52),
            ),
            (Error::InvalidRequest { why: "x".into() }, Some(42)),
            (
                Error::InvalidProducerIdMapping {
                    transactional_id: "t".into(),
                    producer_id: 1,
                },
                Some(49),
            ),
            (
                Error::InvalidTransactionTimeout {
                    timeout_ms: 0,
                    max_timeout_ms: 900_000,
                },
                Some(50),
            ),
            (
                Error::ConcurrentTransactions {
                    transactional_id: "t".into(),
                    state: "PrepareCommit".into(),
                },
                Some(51),
            ),
            (
                Error::ProducerFenced {
                    transactional_id: "t".into(),
                    producer_id: 1,
                    current: 2,
                    found: 1,
                },
                Some(90),
            ),
        ]
    }

    /// The replication errors, with Kafka's codes where Kafka has one.
    fn replication_cases() -> Vec<(Error, Option<i16>)> {
        vec![
            (
                Error::NotLeaderOrFollower {
                    why: "follower".into(),
                },
                Some(6),
            ),
            (
                Error::RequestTimedOut {
                    timeout_ms: 1,
                    what: "the high watermark".into(),
                },
                Some(7),
            ),
            (
                Error::NotEnoughReplicas {
                    in_sync: 1,
                    required: 2,
                },
                Some(19),
            ),
            (
                Error::NotEnoughReplicasAfterAppend {
                    in_sync: 1,
                    required: 2,
                },
                Some(20),
            ),
            (
                Error::FencedLeaderEpoch {
                    current: 3,
                    found: 2,
                },
                Some(74),
            ),
            (
                Error::UnknownLeaderEpoch {
                    current: 3,
                    found: 4,
                },
                Some(75),
            ),
            (
                Error::UnexpectedAppendOffset {
                    log_end_offset: 5,
                    found: 3,
                },
                None,
            ),
            (
                Error::OffsetsOutOfOrder {
                    previous_last: 5,
                    found: 3,
                },
                None,
            ),
            (
                Error::UncleanLeaderElection {
                    replica: 2,
                    isr: vec![0, 1],
                    elr: Vec::new(),
                },
                Some(83),
            ),
        ]
    }

    /// The errors of partlog's own API, which Kafka has no code for.
    fn cases_without_a_kafka_code() -> Vec<(Error, Option<i16>)> {
        vec![
            (
                Error::Locked {
                    path: "/x".into(),
                    in_this_process: false,
                },
                None,
            ),
            (Error::Truncated { at: 3 }, None),
            (Error::Closed, None),
            (Error::Unsupported { what: "x".into() }, None),
            (Error::InvalidArgument { why: "x".into() }, None),
            (
                Error::BufferExhausted {
                    buffer_memory: 1,
                    max_block_ms: 1,
                },
                None,
            ),
        ]
    }

    #[test]
    fn kafka_code_matches_kafkas_errors_enum() {
        let cases = [
            data_and_storage_cases(),
            producer_cases(),
            replication_cases(),
            cases_without_a_kafka_code(),
        ];
        for (error, code) in cases.into_iter().flatten() {
            assert_eq!(error.kafka_code(), code, "{error}");
            // A copy delivered to another waiter keeps the code.
            assert_eq!(error.duplicate().kafka_code(), code, "{error}");
        }
    }

    #[test]
    fn producer_state_errors_name_the_producer() {
        let error = Error::OutOfOrderSequence {
            producer_id: 7,
            expected: 3,
            found: 9,
        };
        assert_eq!(
            error.to_string(),
            "out of order sequence for producer 7: expected 3, found 9"
        );
        let error = Error::TransactionCoordinatorFenced {
            producer_id: 7,
            current: 2,
            found: 1,
        };
        assert!(error.to_string().contains("coordinator epoch 1"), "{error}");
    }
}
