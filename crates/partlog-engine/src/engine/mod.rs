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

use std::path::Path;

use partlog::Error;
use partlog::unstable::{OpenMode, Storage};

/// Writes `bytes` as `dir/name` durably: into `dir/temp_name`, fsynced, renamed over `name`,
/// and the directory fsynced. A crash leaves the old file or the new one under the name.
///
/// partlog's log layer has the same helper for its own files (`partlog.properties`,
/// `leader-epoch-checkpoint`) but does not export it.
pub(crate) fn replace_file_durably(
    storage: &dyn Storage,
    dir: &Path,
    temp_name: &str,
    name: &str,
    bytes: &[u8],
) -> Result<(), Error> {
    let temp = dir.join(temp_name);
    let file = storage.open(&temp, OpenMode::Create)?;
    let written = file
        .set_len(0)
        .and_then(|()| file.write_all_at(bytes, 0))
        .and_then(|()| file.sync_all());
    drop(file);
    if let Err(error) = written {
        // The old file is untouched; a leftover temporary file is overwritten next time.
        let _ = storage.remove(&temp);
        return Err(error);
    }
    storage.rename(&temp, &dir.join(name))?;
    storage.sync_dir(dir)
}
