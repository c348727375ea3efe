//! The engine's topics: [`Engine::create_topic`], [`Engine::add_partitions`],
//! [`Engine::topic`], [`Engine::delete_topic`], and the [`Topic`] handle.
//!
//! A change is made on disk first and recorded in `partlog.topics` last: new partition
//! directories (each with its `partition.metadata`) are created and fsynced, then the list is
//! written durably. A crash in between leaves directories the list does not name, which the
//! next open reports and never deletes. A deleted topic leaves the list first; its directories
//! are then renamed `<topic>-<p>.<id>-delete` (Kafka's name) and emptied.

use std::sync::Arc;

use partlog::{Error, Log};

use super::config::TopicConfig;
use super::open::{DELETED_DIR_SUFFIX, Engine, EngineShared, lock};
use super::partition_metadata::{PartitionMetadata, write_partition_metadata};
use super::topic::{TopicId, partition_dir_name, topics_collide, validate_topic_name};
use super::topics_file::TopicEntry;
use crate::txn::coordinator::CONSUMER_OFFSETS_TOPIC;
use crate::txn::log_records::TRANSACTION_STATE_TOPIC;

/// One topic of an [`Engine`], as it was when [`Engine::topic`] (or `create_topic`) returned
/// it: its name, id and partition count; its partitions' logs open at first use.
#[derive(Debug, Clone)]
pub struct Topic {
    shared: Arc<EngineShared>,
    name: String,
    topic_id: TopicId,
    partitions: i32,
}

impl Topic {
    /// The topic's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The topic's id, as its partitions' `partition.metadata` hold it.
    pub fn topic_id(&self) -> TopicId {
        self.topic_id
    }

    /// How many partitions the topic had when this handle was made.
    pub fn partitions(&self) -> i32 {
        self.partitions
    }

    /// The log of partition `partition`, opened if this is its first use.
    ///
    /// # Errors
    /// `InvalidArgument` for a partition the topic does not have (or a deleted topic);
    /// `Corrupt` for a `partition.metadata` of another topic; the log's open errors.
    pub fn partition(&self, partition: i32) -> Result<Arc<Log>, Error> {
        self.shared.partition(&self.name, partition)
    }
}

/// The partition count of a new topic or of `add_partitions`: at least 1.
fn check_partition_count(topic: &str, count: i32) -> Result<(), Error> {
    if count < 1 {
        return Err(Error::InvalidArgument {
            why: format!("num.partitions of topic {topic:?} must be at least 1, not {count}"),
        });
    }
    Ok(())
}

impl Engine {
    /// Creates topic `name` with `partitions` partitions and the config overrides `config`,
    /// durably (see the module docs), and returns its handle. Each partition directory gets a
    /// `partition.metadata` with the topic's new id.
    ///
    /// # Errors
    /// `InvalidArgument` for a name against Kafka's rule, an internal topic's name
    /// (`__transaction_state`, `__consumer_offsets`), a topic that exists or whose name
    /// collides with one (`.` against `_`), a count below 1, a setting that is not a per-log
    /// one, or a partition directory already on disk; `InvalidConfig` naming a setting whose
    /// value is out of range; I/O errors (the list is then unchanged).
    pub fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        config: TopicConfig,
    ) -> Result<Topic, Error> {
        validate_topic_name(name)?;
        if name == TRANSACTION_STATE_TOPIC || name == CONSUMER_OFFSETS_TOPIC {
            return Err(Error::InvalidArgument {
                why: format!("{name} is an internal topic: the engine creates it itself"),
            });
        }
        check_partition_count(name, partitions)?;
        // Build one partition's config now: a bad override fails before anything is written.
        self.shared
            .config
            .partition_config(&self.shared.workers, &config)?;
        let mut list = lock(&self.shared.topics);
        if list.topics.contains_key(name) {
            return Err(Error::InvalidArgument {
                why: format!("topic {name:?} already exists"),
            });
        }
        if let Some(other) = list.topics.keys().find(|other| topics_collide(name, other)) {
            return Err(Error::InvalidArgument {
                why: format!(
                    "topic {name:?} collides with existing topic {other:?}: Kafka refuses names \
                     that differ only in '.' against '_'"
                ),
            });
        }
        let topic_id = TopicId::random();
        self.shared
            .create_partition_dirs(name, topic_id, 0..partitions)?;
        let mut topics = list.topics.clone();
        topics.insert(
            name.to_owned(),
            TopicEntry {
                topic_id,
                partitions,
                configs: config,
            },
        );
        list.file.write(&topics)?;
        list.topics = topics;
        Ok(Topic {
            shared: Arc::clone(&self.shared),
            name: name.to_owned(),
            topic_id,
            partitions,
        })
    }

    /// Grows topic `name` to `new_count` partitions (Kafka's `CreatePartitions`): the new
    /// partitions' directories, then the list, durably. Keyed records of the topic route
    /// differently afterwards, as in Kafka.
    ///
    /// # Errors
    /// `InvalidArgument` for an unknown topic or a count that does not grow it; I/O errors.
    pub fn add_partitions(&self, name: &str, new_count: i32) -> Result<Topic, Error> {
        let mut list = lock(&self.shared.topics);
        let entry = list.topics.get(name).ok_or_else(|| unknown_topic(name))?;
        let old_count = entry.partitions;
        if new_count <= old_count {
            return Err(Error::InvalidArgument {
                why: format!(
                    "topic {name:?} has {old_count} partitions, and partitions only grow: \
                     {new_count} is not more"
                ),
            });
        }
        let topic_id = entry.topic_id;
        self.shared
            .create_partition_dirs(name, topic_id, old_count..new_count)?;
        let mut topics = list.topics.clone();
        if let Some(entry) = topics.get_mut(name) {
            entry.partitions = new_count;
        }
        list.file.write(&topics)?;
        list.topics = topics;
        Ok(Topic {
            shared: Arc::clone(&self.shared),
            name: name.to_owned(),
            topic_id,
            partitions: new_count,
        })
    }

    /// The handle of topic `name`.
    ///
    /// # Errors
    /// `InvalidArgument` for a topic the engine does not have.
    pub fn topic(&self, name: &str) -> Result<Topic, Error> {
        let list = lock(&self.shared.topics);
        let entry = list.topics.get(name).ok_or_else(|| unknown_topic(name))?;
        Ok(Topic {
            shared: Arc::clone(&self.shared),
            name: name.to_owned(),
            topic_id: entry.topic_id,
            partitions: entry.partitions,
        })
    }

    /// The names of the engine's topics, sorted (internal topics not included).
    pub fn topic_names(&self) -> Vec<String> {
        lock(&self.shared.topics).topics.keys().cloned().collect()
    }

    /// Deletes topic `name`: it leaves `partlog.topics` (durably), its open logs are closed
    /// (their handles answer `Error::Closed`), and its directories are renamed
    /// `<topic>-<p>.<id>-delete` and emptied. A crash after the list changed leaves the
    /// directories, which the next open reports as unlisted.
    ///
    /// # Errors
    /// `InvalidArgument` for an unknown topic; I/O errors.
    pub fn delete_topic(&self, name: &str) -> Result<(), Error> {
        let entry = {
            let mut list = lock(&self.shared.topics);
            let entry = list
                .topics
                .get(name)
                .cloned()
                .ok_or_else(|| unknown_topic(name))?;
            let mut topics = list.topics.clone();
            topics.remove(name);
            list.file.write(&topics)?;
            list.topics = topics;
            entry
        };
        let storage = &self.shared.config.storage;
        let dir = &self.shared.dir;
        for partition in 0..entry.partitions {
            let dir_name = partition_dir_name(name, partition);
            if let Some(log) = lock(&self.shared.logs).remove(&dir_name) {
                // Closing releases its lock and its files; a failed final fsync does not
                // matter for records about to be deleted.
                let _ = log.close();
            }
            let from = dir.join(&dir_name);
            if !storage.exists(&from)? {
                continue;
            }
            // Kafka's name: the partition's, a 32-hex-digit id, `-delete`.
            let id: String = entry
                .topic_id
                .0
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            let to = dir.join(format!("{dir_name}.{id}{DELETED_DIR_SUFFIX}"));
            storage.rename(&from, &to)?;
            storage.sync_dir(dir)?;
            for file in storage.list(&to)? {
                storage.remove(&to.join(file))?;
            }
        }
        Ok(())
    }
}

fn unknown_topic(name: &str) -> Error {
    Error::InvalidArgument {
        why: format!("topic {name:?} does not exist in this engine: create_topic it first"),
    }
}

impl EngineShared {
    /// The partition count of topic `name`.
    pub(crate) fn topic_partitions(&self, name: &str) -> Result<i32, Error> {
        lock(&self.topics)
            .topics
            .get(name)
            .map(|entry| entry.partitions)
            .ok_or_else(|| unknown_topic(name))
    }

    /// Creates the directories of `partitions` of topic `name`, each with its
    /// `partition.metadata`, and makes them durable in the engine directory. Refuses a
    /// directory that exists: it holds data the list does not know.
    fn create_partition_dirs(
        &self,
        name: &str,
        topic_id: TopicId,
        partitions: std::ops::Range<i32>,
    ) -> Result<(), Error> {
        let storage = &self.config.storage;
        for partition in partitions.clone() {
            let dir = self.dir.join(partition_dir_name(name, partition));
            if storage.exists(&dir)? {
                return Err(Error::InvalidArgument {
                    why: format!(
                        "{} exists and partlog.topics does not list it (left by a crash, or \
                         copied in): move it away or remove it, then create the partition again",
                        dir.display()
                    ),
                });
            }
        }
        let metadata = PartitionMetadata::new(topic_id);
        for partition in partitions {
            let dir = self.dir.join(partition_dir_name(name, partition));
            storage.create_dir_all(&dir)?;
            write_partition_metadata(storage, &dir, &metadata)?;
        }
        storage.sync_dir(&self.dir)
    }
}
