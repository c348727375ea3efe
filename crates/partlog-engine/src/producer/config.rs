//! [`TopicProducerConfig`]: Kafka's producer settings of a [`TopicProducer`](super::TopicProducer).

use std::sync::Arc;

use partlog::{Error, ProducerConfig};

use crate::partitioner::{DefaultRandom, Partitioner, RandomSource};

/// The settings of a [`TopicProducer`](super::TopicProducer), Kafka's names and defaults.
#[derive(Clone)]
#[non_exhaustive]
pub struct TopicProducerConfig {
    /// Each partition's batching writer: `batch.size`, `linger.ms`, `buffer.memory` (per
    /// partition), `max.block.ms`, `acks`. The mode is the topic producer's to set.
    pub producer: ProducerConfig,
    /// `enable.idempotence` (true, Kafka's default): a producer id, an epoch and sequences on
    /// every batch. Required by `transactional.id`.
    pub enable_idempotence: bool,
    /// `transactional.id`: set, the producer is transactional.
    pub transactional_id: Option<String>,
    /// `transaction.timeout.ms` (60000).
    pub transaction_timeout_ms: i32,
    /// `partitioner.ignore.keys` (false): keyed records are spread as unkeyed ones.
    pub partitioner_ignore_keys: bool,
    /// `partitioner.class`: a custom partitioner for every record without a partition.
    pub partitioner: Option<Arc<dyn Partitioner>>,
    /// Where the sticky partitioner draws its random numbers (Kafka's `ThreadLocalRandom`).
    pub random: Arc<dyn RandomSource>,
}

impl std::fmt::Debug for TopicProducerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TopicProducerConfig")
            .field("producer", &self.producer)
            .field("enable_idempotence", &self.enable_idempotence)
            .field("transactional_id", &self.transactional_id)
            .field("transaction_timeout_ms", &self.transaction_timeout_ms)
            .field("partitioner_ignore_keys", &self.partitioner_ignore_keys)
            .field("partitioner", &self.partitioner.is_some())
            .finish_non_exhaustive()
    }
}

impl Default for TopicProducerConfig {
    fn default() -> Self {
        TopicProducerConfig {
            producer: ProducerConfig::default(),
            enable_idempotence: true,
            transactional_id: None,
            transaction_timeout_ms: 60_000,
            partitioner_ignore_keys: false,
            partitioner: None,
            random: Arc::new(DefaultRandom::new()),
        }
    }
}

impl TopicProducerConfig {
    /// A transactional producer's settings with Kafka's other defaults.
    pub fn transactional(transactional_id: impl Into<String>) -> TopicProducerConfig {
        TopicProducerConfig {
            transactional_id: Some(transactional_id.into()),
            ..TopicProducerConfig::default()
        }
    }

    /// Checks the settings against each other, as Kafka's `ProducerConfig` does.
    ///
    /// # Errors
    /// `InvalidConfig` naming the setting.
    pub fn validate(&self) -> Result<(), Error> {
        self.producer.validate()?;
        if let Some(id) = &self.transactional_id {
            if !self.enable_idempotence {
                return Err(Error::InvalidConfig {
                    setting: "enable.idempotence",
                    why: "a transactional.id requires enable.idempotence=true".to_owned(),
                });
            }
            if id.is_empty() {
                return Err(Error::InvalidConfig {
                    setting: "transactional.id",
                    why: "the empty string is not a transactional id".to_owned(),
                });
            }
        }
        if self.transaction_timeout_ms <= 0 {
            return Err(Error::InvalidConfig {
                setting: "transaction.timeout.ms",
                why: format!("must be at least 1, not {}", self.transaction_timeout_ms),
            });
        }
        Ok(())
    }
}
