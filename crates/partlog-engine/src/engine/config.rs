//! [`EngineConfig`]: what an [`Engine`](super::Engine) shares between its logs (storage, clock,
//! the pool of background workers), the settings every topic starts from, and the
//! coordinator's settings.

use std::fmt;
use std::sync::Arc;

use partlog::unstable::{Clock, OsStorage, Storage, SystemClock};
use partlog::{Error, LogConfig, LogConfigBuilder, Workers};

use crate::txn::TransactionCoordinatorConfig;

/// The builder every partition's [`LogConfig`] starts from, before the engine's shared parts
/// and the topic's overrides are applied.
pub type LogConfigBase = Arc<dyn Fn() -> LogConfigBuilder + Send + Sync>;

/// The settings of an [`Engine`](super::Engine).
#[derive(Clone)]
#[non_exhaustive]
pub struct EngineConfig {
    /// The file system of the engine's files and of every partition ([`OsStorage`] by default;
    /// partlog's `SimStorage` in crash tests).
    pub storage: Arc<dyn Storage>,
    /// The clock of every partition and of the coordinator's timestamps.
    pub clock: Arc<dyn Clock>,
    /// The pool that runs every partition's background work (flushes, retention, compaction)
    /// and the coordinator's timers. `None`: the engine starts its own of
    /// [`worker_threads`](Self::worker_threads) threads. A pool made with
    /// [`Workers::gather_file_system_syncs`] makes many partitions durable with one `syncfs`
    /// (for many partitions under `acks=all`; see its price there).
    pub workers: Option<Workers>,
    /// The size of the pool the engine starts when [`workers`](Self::workers) is `None` (4).
    pub worker_threads: usize,
    /// The settings every partition starts from ([`LogConfig::builder`], Kafka's defaults);
    /// a topic's overrides (`create_topic`'s [`TopicConfig`]) are set on top, by Kafka's names.
    /// The engine then sets the storage, the clock, the workers and
    /// `transaction.partition.verification.enable=true` (Kafka's default) on every partition.
    pub log_config: LogConfigBase,
    /// The transaction coordinator's settings.
    pub coordinator: TransactionCoordinatorConfig,
}

/// A topic's config overrides, by Kafka's names (`cleanup.policy`, `retention.ms`,
/// `segment.bytes`, ...): the per-log settings of [`LogConfigBuilder::set`].
pub type TopicConfig = std::collections::BTreeMap<String, String>;

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            storage: Arc::new(OsStorage::new()),
            clock: Arc::new(SystemClock),
            workers: None,
            worker_threads: 4,
            log_config: Arc::new(LogConfig::builder),
            coordinator: TransactionCoordinatorConfig::default(),
        }
    }
}

impl fmt::Debug for EngineConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EngineConfig")
            .field("storage", &self.storage)
            .field("workers", &self.workers)
            .field("worker_threads", &self.worker_threads)
            .field("coordinator", &self.coordinator)
            .finish_non_exhaustive()
    }
}

impl EngineConfig {
    /// Checks the settings that do not need the directory: the pool size and the coordinator's.
    ///
    /// # Errors
    /// `InvalidConfig` naming the setting.
    pub fn validate(&self) -> Result<(), Error> {
        if self.workers.is_none() && self.worker_threads == 0 {
            return Err(Error::InvalidConfig {
                setting: "worker.threads",
                why: "the engine's pool needs at least 1 thread".to_owned(),
            });
        }
        self.coordinator.validate()
    }

    /// The config of a partition of a topic with `overrides`, on this engine's shared parts.
    ///
    /// # Errors
    /// `InvalidArgument` for an override that is not a per-log setting, `InvalidConfig` for a
    /// value out of range, each naming the setting.
    pub(crate) fn partition_config(
        &self,
        workers: &Workers,
        overrides: &TopicConfig,
    ) -> Result<LogConfig, Error> {
        let mut builder = self.shared_parts((self.log_config)(), workers);
        for (key, value) in overrides {
            builder = builder.set(key, value)?;
        }
        builder.build()
    }

    /// `builder` with the engine's storage, clock and workers, and partition verification on.
    pub(crate) fn shared_parts(
        &self,
        builder: LogConfigBuilder,
        workers: &Workers,
    ) -> LogConfigBuilder {
        builder
            .storage(Arc::clone(&self.storage))
            .clock(Arc::clone(&self.clock))
            .workers(workers.clone())
            .transaction_partition_verification_enable(true)
    }
}
