//! [`TxnLogs`]: the logs the transaction coordinator writes, as the engine (or a test) provides
//! them, and the settings of a `__transaction_state` partition.
//!
//! The coordinator does not own its logs: the engine opens every partition (its own
//! `__transaction_state-N` and the data partitions whose markers it writes) on its shared
//! storage, clock and workers, and hands them over through this trait.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use partlog::{CleanupPolicy, CompressionType, Error, Log, LogConfig, LogConfigBuilder};

use super::log_records::TRANSACTION_STATE_SEGMENT_BYTES;

/// Where the coordinator finds its logs. Implementations open a log at its first use and
/// hand out the same `Arc<Log>` after that.
pub trait TxnLogs: Send + Sync + fmt::Debug {
    /// The partition `partition` of `__transaction_state`, opened, or created when it does not
    /// exist (configured with [`transaction_state_log_config`]).
    ///
    /// # Errors
    /// The log's open errors.
    fn transaction_state_log(&self, partition: i32) -> Result<Arc<Log>, Error>;

    /// The partitions of `__transaction_state` that exist on disk, whatever their order: the
    /// ones the coordinator replays when it starts. Only partitions that hold an id exist.
    ///
    /// # Errors
    /// The directory listing's errors.
    fn transaction_state_partitions(&self) -> Result<Vec<i32>, Error>;

    /// The data partition `partition` of `topic`, for its markers and partition verification.
    /// The engine runs it with `transaction.partition.verification.enable=true`.
    ///
    /// # Errors
    /// `InvalidArgument` for a partition that does not exist; the log's open errors.
    fn partition_log(&self, topic: &str, partition: i32) -> Result<Arc<Log>, Error>;

    /// Called once the marker the coordinator wrote at `offset` of `__consumer_offsets`
    /// partition `partition` is durable, so that the group layer applies it to the offsets it
    /// keeps in memory (transactional offsets take effect on COMMIT, are dropped on ABORT).
    /// The default does nothing: a store that opens later replays the marker.
    fn offsets_marker_written(&self, partition: i32, producer_id: i64, commit: bool, offset: i64) {
        let _ = (partition, producer_id, commit, offset);
    }
}

/// What the group layer hands the engine ([`Engine::set_offsets_marker_listener`]) to learn of
/// the transaction markers the coordinator writes into `__consumer_offsets`: the engine does
/// not depend on the group layer, the group layer implements this.
///
/// [`Engine::set_offsets_marker_listener`]: crate::engine::Engine::set_offsets_marker_listener
pub trait OffsetsMarkerListener: Send + Sync {
    /// The marker ending `producer_id`'s transaction (COMMIT: `commit`) is durable at `offset`
    /// of `__consumer_offsets` partition `partition`.
    fn marker_written(&self, partition: i32, producer_id: i64, commit: bool, offset: i64);
}

/// The settings of a `__transaction_state` partition, on top of `builder` (which carries the
/// engine's storage and clock): Kafka's `cleanup.policy=compact`,
/// `transaction.state.log.segment.bytes` (100 MiB) and no compression.
///
/// # Errors
/// What `builder` refuses.
pub fn transaction_state_log_config(builder: LogConfigBuilder) -> Result<LogConfig, Error> {
    builder
        .cleanup_policy(CleanupPolicy::COMPACT)
        .segment_bytes(TRANSACTION_STATE_SEGMENT_BYTES as u32)
        .compression_type(CompressionType::Uncompressed)
        .build()
}

/// The settings of a `__consumer_offsets` partition, on top of `builder`: Kafka's
/// `cleanup.policy=compact`, `offsets.topic.segment.bytes` (100 MiB) and no compression.
///
/// # Errors
/// What `builder` refuses.
pub fn consumer_offsets_log_config(builder: LogConfigBuilder) -> Result<LogConfig, Error> {
    builder
        .cleanup_policy(CleanupPolicy::COMPACT)
        .segment_bytes(OFFSETS_TOPIC_SEGMENT_BYTES)
        .compression_type(CompressionType::Uncompressed)
        .build()
}

/// Kafka's `offsets.topic.segment.bytes` default: 100 MiB.
pub const OFFSETS_TOPIC_SEGMENT_BYTES: u32 = 104_857_600;

/// Waits until every `(log, offset)` is durable, the fsyncs of different logs running at once,
/// and returns the first error met, after every wait has ended.
///
/// Each log's flusher is asked for its sync first (one poll of its `durable` future), so that
/// the flushers fsync the logs together; then this thread waits on each log in turn with
/// `wait_durable`, which joins the sync under way or leads one itself. Leading matters on a pool:
/// the caller may be a task holding the pool's only free thread (the coordinator's timers), and
/// a wait that only parked would wait for a flusher task that cannot run.
pub(crate) fn wait_all_durable(waits: &[(Arc<Log>, i64)]) -> Result<(), Error> {
    let waker = Waker::noop();
    let mut context = Context::from_waker(waker);
    let mut requested: Vec<_> = waits
        .iter()
        .map(|(log, offset)| log.durable(*offset))
        .collect();
    let mut first_error = None;
    for wait in &mut requested {
        if let Poll::Ready(Err(error)) = Pin::new(wait).poll(&mut context) {
            first_error.get_or_insert(error);
        }
    }
    for (log, offset) in waits {
        if let Err(error) = log.wait_durable(*offset) {
            first_error.get_or_insert(error);
        }
    }
    first_error.map_or(Ok(()), Err)
}
