//! The engine's partitions, opened at first use: each an ordinary [`Log`] on the engine's
//! storage, clock and workers, its `partition.metadata` checked against the topic's id; and
//! [`TxnLogs`], through which the coordinator reaches them and its own `__transaction_state`
//! partitions.

use std::sync::{Arc, Weak};

use partlog::{Corruption, Error, Log, LogConfig, LogConfigBuilder};

use super::open::{EngineShared, lock};
use super::partition_metadata::{
    PARTITION_METADATA_FILE_NAME, PartitionMetadata, read_partition_metadata,
    write_partition_metadata,
};
use super::topic::partition_dir_name;
use crate::txn::TxnLogs;
use crate::txn::coordinator::CONSUMER_OFFSETS_TOPIC;
use crate::txn::log_records::TRANSACTION_STATE_TOPIC;
use crate::txn::logs::{consumer_offsets_log_config, transaction_state_log_config};

impl EngineShared {
    /// The open log of `topic`'s `partition`, opened now if this is its first use.
    ///
    /// # Errors
    /// `InvalidArgument` for a topic the engine does not list or a partition past its count;
    /// `Corrupt` when the directory's `partition.metadata` names another topic id; the log's
    /// open errors.
    pub(crate) fn partition(&self, topic: &str, partition: i32) -> Result<Arc<Log>, Error> {
        if topic == CONSUMER_OFFSETS_TOPIC {
            return self.consumer_offsets_log(partition);
        }
        let name = partition_dir_name(topic, partition);
        if let Some(log) = lock(&self.logs).get(&name) {
            return Ok(Arc::clone(log));
        }
        let (topic_id, overrides) = {
            let list = lock(&self.topics);
            let entry = list
                .topics
                .get(topic)
                .ok_or_else(|| unknown_partition(topic, partition, None))?;
            if !(0..entry.partitions).contains(&partition) {
                return Err(unknown_partition(topic, partition, Some(entry.partitions)));
            }
            (entry.topic_id, entry.configs.clone())
        };
        let config = self.config.partition_config(&self.workers, &overrides)?;
        let mut logs = lock(&self.logs);
        // Another thread may have opened it meanwhile.
        if let Some(log) = logs.get(&name) {
            return Ok(Arc::clone(log));
        }
        let dir = self.dir.join(&name);
        let storage = &self.config.storage;
        match read_partition_metadata(storage, &dir)? {
            Some(found) if found.topic_id == topic_id => {}
            Some(found) => {
                return Err(Error::Corrupt {
                    file: dir.join(PARTITION_METADATA_FILE_NAME),
                    position: 0,
                    what: Corruption::BadHeader(if found.topic_id.is_reserved() {
                        "partition.metadata holds a reserved topic id, not the topic's"
                    } else {
                        "partition.metadata names another topic id than partlog.topics"
                    }),
                });
            }
            // Kafka writes the file again when it is missing; so does the engine.
            None => {
                storage.create_dir_all(&dir)?;
                write_partition_metadata(storage, &dir, &PartitionMetadata::new(topic_id))?;
            }
        }
        let log = Arc::new(Log::open(&dir, config)?);
        logs.insert(name, Arc::clone(&log));
        Ok(log)
    }
}

fn unknown_partition(topic: &str, partition: i32, count: Option<i32>) -> Error {
    Error::InvalidArgument {
        why: match count {
            None => format!("topic {topic:?} does not exist in this engine: create_topic it first"),
            Some(count) => format!(
                "topic {topic:?} has {count} partitions (0..{count}), not partition {partition}: \
                 add_partitions grows it"
            ),
        },
    }
}

impl EngineShared {
    /// Partition `partition` of `__consumer_offsets`, opened (created at its first use) with
    /// [`consumer_offsets_log_config`]; `offsets.topic.num.partitions` is the coordinator's
    /// setting, which also places a group in `add_offsets`.
    ///
    /// # Errors
    /// `InvalidArgument` for a partition past the setting; the log's open errors.
    pub(crate) fn consumer_offsets_log(&self, partition: i32) -> Result<Arc<Log>, Error> {
        let count = self.config.coordinator.offsets_topic_partitions;
        self.internal_log(
            CONSUMER_OFFSETS_TOPIC,
            partition,
            count,
            consumer_offsets_log_config,
        )
    }

    /// An internal topic's partition: it has no entry in `partlog.topics` and no
    /// `partition.metadata`, as Kafka's own internal topics in a KRaft-less directory.
    fn internal_log(
        &self,
        topic: &str,
        partition: i32,
        count: i32,
        configure: fn(LogConfigBuilder) -> Result<LogConfig, Error>,
    ) -> Result<Arc<Log>, Error> {
        if !(0..count).contains(&partition) {
            return Err(unknown_partition(topic, partition, Some(count)));
        }
        let name = partition_dir_name(topic, partition);
        let mut logs = lock(&self.logs);
        if let Some(log) = logs.get(&name) {
            return Ok(Arc::clone(log));
        }
        let config = configure(
            self.config
                .shared_parts((self.config.log_config)(), &self.workers),
        )?;
        let log = Arc::new(Log::open(self.dir.join(&name), config)?);
        logs.insert(name, Arc::clone(&log));
        Ok(log)
    }
}

impl TxnLogs for EngineShared {
    fn transaction_state_log(&self, partition: i32) -> Result<Arc<Log>, Error> {
        self.internal_log(
            TRANSACTION_STATE_TOPIC,
            partition,
            self.config.coordinator.transaction_state_partitions,
            transaction_state_log_config,
        )
    }

    fn transaction_state_partitions(&self) -> Result<Vec<i32>, Error> {
        let count = self.config.coordinator.transaction_state_partitions;
        let mut partitions = Vec::new();
        for name in self.config.storage.list(&self.dir)? {
            match super::topic::parse_partition_dir_name(&name) {
                Some((TRANSACTION_STATE_TOPIC, partition)) if partition < count => {
                    partitions.push(partition);
                }
                Some((TRANSACTION_STATE_TOPIC, partition)) => {
                    return Err(Error::InvalidConfig {
                        setting: "transaction.state.log.num.partitions",
                        why: format!(
                            "the engine holds {name}, partition {partition} of \
                             {TRANSACTION_STATE_TOPIC}, but the setting is {count}: ids live in \
                             the partition their hash picks, so keep the setting the directory \
                             was written with"
                        ),
                    });
                }
                _ => {}
            }
        }
        Ok(partitions)
    }

    fn partition_log(&self, topic: &str, partition: i32) -> Result<Arc<Log>, Error> {
        self.partition(topic, partition)
    }

    fn offsets_marker_written(&self, partition: i32, producer_id: i64, commit: bool, offset: i64) {
        let listener = lock(&self.offsets_listener)
            .as_ref()
            .and_then(Weak::upgrade);
        if let Some(listener) = listener {
            listener.marker_written(partition, producer_id, commit, offset);
        }
    }
}
