//! The [`Engine`] (topics of logs in one directory, [`open`]), and the engine directory's own
//! files and rules: producer ids, the topic list, topic names and ids, and each partition's
//! `partition.metadata`.
//!
//! | module | what it owns |
//! | --- | --- |
//! | [`open`] | [`Engine`]: open (lock, directory, coordinator), close, the open report |
//! | [`config`] | [`EngineConfig`], [`TopicConfig`] |
//! | [`topics`] | `create_topic`, `add_partitions`, `topic`, `delete_topic`, the [`Topic`] handle |
//! | `partitions` | each partition opened at first use; the coordinator's [`TxnLogs`](crate::txn::TxnLogs) |
//! | `timers_task` | the coordinator's timers as a task on the engine's workers |
//!
//! An engine directory holds one Kafka partition directory per partition
//! (`<topic>-<partition>`, [`topic::partition_dir_name`]) and the engine's files beside them:
//!
//! | file | what it holds | module |
//! | --- | --- | --- |
//! | `partlog.producer-ids` | the last producer id reserved, two CRC-32C slots | [`producer_ids`] |
//! | `partlog.topics` | each topic's id, partition count and config overrides, two CRC-32C slots | [`topics_file`] |
//! | `<topic>-<p>/partition.metadata` | the topic id, Kafka's text file | [`partition_metadata`] |
//!
//! It holds no `meta.properties`, so partlog's Kafka log-dir rules (the parent's `.lock`,
//! `.kafka_cleanshutdown`) do not apply to its partitions.

pub mod config;
pub mod open;
pub mod partition_metadata;
mod partitions;
pub mod producer_ids;
mod slot_file;
mod timers_task;
pub mod topic;
pub mod topics;
pub mod topics_file;

pub use self::config::{EngineConfig, TopicConfig};
pub use self::open::{Engine, OpenReport};
pub use self::topics::Topic;
