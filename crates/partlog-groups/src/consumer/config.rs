//! [`ConsumerConfig`]: the consumer's settings, by Kafka's names and with Kafka's defaults.

/// `auto.offset.reset`: where a partition with no committed offset (or one out of range)
/// starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AutoOffsetReset {
    /// At the log start offset.
    Earliest,
    /// At the end: the log end offset, or the last stable offset under `read_committed`
    /// (Kafka's default).
    #[default]
    Latest,
    /// Nowhere: `poll` fails with [`Error::NoOffsetForPartition`](crate::Error).
    None,
}

/// `isolation.level`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IsolationLevel {
    /// Every record, transactional or not (Kafka's default).
    #[default]
    ReadUncommitted,
    /// Only committed records (the log's `committed_records`), and committed offsets fetched
    /// with `require_stable`: a partition an open transaction holds an offset for waits.
    ReadCommitted,
}

/// The consumer's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerConfig {
    /// `group.id`: `None` for a consumer that only `assign`s and never commits.
    pub group_id: Option<String>,
    /// `client.id` ("consumer"): the prefix of the member id the coordinator gives.
    pub client_id: String,
    /// `group.instance.id`: a static member keeps its partitions across restarts within the
    /// session timeout, and does not leave the group on `close`.
    pub group_instance_id: Option<String>,
    /// `auto.offset.reset` (`latest`).
    pub auto_offset_reset: AutoOffsetReset,
    /// `isolation.level` (`read_uncommitted`).
    pub isolation_level: IsolationLevel,
    /// `enable.auto.commit` (true): commit the positions every `auto.commit.interval.ms` from
    /// `poll`, before a revocation and on `close`.
    pub enable_auto_commit: bool,
    /// `auto.commit.interval.ms` (5000).
    pub auto_commit_interval_ms: i64,
    /// `session.timeout.ms` (45000).
    pub session_timeout_ms: i32,
    /// `heartbeat.interval.ms` (3000): heartbeats go from `poll`, at this interval, and at
    /// once when a join phase started in the group's shard since the last one (in process a
    /// heartbeat is a lock, not a round trip).
    pub heartbeat_interval_ms: i64,
    /// `max.poll.interval.ms` (300000): also the rebalance timeout. A consumer that does not
    /// poll for longer leaves the group at its next `poll` and rejoins.
    pub max_poll_interval_ms: i32,
    /// `max.poll.records` (500).
    pub max_poll_records: usize,
    /// `retry.backoff.ms` (100): the wait before a failed auto-commit is tried again.
    pub retry_backoff_ms: i64,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        ConsumerConfig {
            group_id: None,
            client_id: "consumer".to_owned(),
            group_instance_id: None,
            auto_offset_reset: AutoOffsetReset::default(),
            isolation_level: IsolationLevel::default(),
            enable_auto_commit: true,
            auto_commit_interval_ms: 5_000,
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 3_000,
            max_poll_interval_ms: 300_000,
            max_poll_records: 500,
            retry_backoff_ms: 100,
        }
    }
}

impl ConsumerConfig {
    /// The defaults with `group.id` set.
    pub fn with_group(group_id: impl Into<String>) -> Self {
        ConsumerConfig {
            group_id: Some(group_id.into()),
            ..ConsumerConfig::default()
        }
    }
}
