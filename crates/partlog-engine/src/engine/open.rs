//! [`Engine`]: one directory of topics, each partition an ordinary [`Log`], opened at first
//! use on the engine's shared storage, clock and pool of workers; the transaction coordinator
//! over them, with its timers on the same pool.
//!
//! # Opening
//!
//! [`Engine::open`] creates the directory (durably: the parent is fsynced), takes
//! `partlog.lock`, reads `partlog.topics` and `partlog.producer-ids`, lists the partition
//! directories, and opens the coordinator, which replays `__transaction_state` and completes
//! the transactions that were decided before a crash. No data partition is opened then: each
//! opens at its first use, so an engine of 1,000 partitions starts in the time of its
//! coordinator's replay, and its threads are the pool's whatever the partition count.
//!
//! A partition directory that `partlog.topics` does not list (a topic created up to its
//! directories when the process died, or a directory copied in) is reported in
//! [`OpenReport::unlisted_partition_dirs`] and never deleted or opened.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use partlog::unstable::{Clock, FileLock, LockMode, TaskHandle, create_dir_durably};
use partlog::{Error, Log, Workers};

use super::config::EngineConfig;
use super::producer_ids::ProducerIdManager;
use super::timers_task::CoordinatorTimers;
use super::topic::parse_partition_dir_name;
use super::topics_file::{Topics, TopicsFile};
use crate::txn::coordinator::CONSUMER_OFFSETS_TOPIC;
use crate::txn::log_records::TRANSACTION_STATE_TOPIC;
use crate::txn::{OffsetsMarkerListener, TimerReport, TransactionCoordinator, TxnLogs};

/// The engine directory's lock file, as a log's: held exclusively while the engine is open.
pub const ENGINE_LOCK_FILE_NAME: &str = "partlog.lock";

/// A Kafka log directory's marker file: an engine refuses a directory that holds one.
pub const META_PROPERTIES_FILE_NAME: &str = "meta.properties";

/// The suffix of a deleted topic's partition directories (Kafka's `-delete`).
pub const DELETED_DIR_SUFFIX: &str = "-delete";

/// What [`Engine::open`] found.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct OpenReport {
    /// Partition directories that `partlog.topics` does not list (an unknown topic, or a
    /// partition past the topic's count), sorted. The engine neither opens nor deletes them:
    /// move them away, or remove them once you know what they hold.
    pub unlisted_partition_dirs: Vec<PathBuf>,
    /// Directories of deleted topics (`<topic>-<p>.<id>-delete`) whose files the engine
    /// removed; the empty directories stay (the storage seam removes files, not directories).
    pub deleted_dirs: Vec<PathBuf>,
    /// What the coordinator's recovery completed, and what it could not.
    pub coordinator: TimerReport,
}

/// Topics of partlog logs in one directory, with the transaction coordinator over them. See
/// the module docs; `Send + Sync`, share it with an `Arc`.
#[derive(Debug)]
pub struct Engine {
    pub(crate) shared: Arc<EngineShared>,
    coordinator: Arc<TransactionCoordinator>,
    timers: TaskHandle,
    report: OpenReport,
}

/// What the engine's handles ([`Topic`](super::Topic)s, the coordinator's [`TxnLogs`]) share.
#[derive(Debug)]
pub(crate) struct EngineShared {
    pub(crate) dir: PathBuf,
    pub(crate) config: EngineConfig,
    pub(crate) workers: Workers,
    pub(crate) topics: Mutex<TopicList>,
    /// The open partitions, by directory name.
    pub(crate) logs: Mutex<HashMap<String, Arc<Log>>>,
    pub(crate) producer_ids: Arc<ProducerIdManager>,
    /// The group layer, told of the markers written into `__consumer_offsets`.
    pub(crate) offsets_listener: Mutex<Option<Weak<dyn OffsetsMarkerListener>>>,
    /// Released last: nothing else may open the directory while a log of it is open.
    _lock: FileLock,
}

/// `partlog.topics` and the list it holds, changed together.
#[derive(Debug)]
pub(crate) struct TopicList {
    pub(crate) file: TopicsFile,
    pub(crate) topics: Topics,
}

/// A poisoned lock of the engine holds state that every change leaves consistent (the file is
/// written before the list changes): take it as it is.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Engine {
    /// Opens the engine directory `dir`, creating it if needed: see the module docs.
    ///
    /// # Errors
    /// `InvalidConfig` for a setting out of range; `InvalidArgument` for a directory holding
    /// `meta.properties` (a Kafka log directory: give the engine its own); `Locked` while
    /// another engine holds it; `Corrupt` for `partlog.topics` or `partlog.producer-ids` with
    /// both slots bad, or a `__transaction_state` record that does not decode; I/O errors.
    pub fn open(dir: impl AsRef<Path>, config: EngineConfig) -> Result<Engine, Error> {
        config.validate()?;
        let dir = dir.as_ref().to_path_buf();
        let storage = Arc::clone(&config.storage);
        create_dir_durably(storage.as_ref(), &dir)?;
        if storage.exists(&dir.join(META_PROPERTIES_FILE_NAME))? {
            return Err(Error::InvalidArgument {
                why: format!(
                    "{} holds {META_PROPERTIES_FILE_NAME}: it is a Kafka log directory, and an \
                     engine needs a directory of its own",
                    dir.display()
                ),
            });
        }
        let lock = storage.lock(&dir.join(ENGINE_LOCK_FILE_NAME), LockMode::Exclusive)?;
        let (file, topics) = match TopicsFile::open(&storage, &dir)? {
            Some(found) => found,
            None => {
                let topics = Topics::new();
                (TopicsFile::create(&storage, &dir, &topics)?, topics)
            }
        };
        let producer_ids = Arc::new(ProducerIdManager::open(&storage, &dir)?);
        let mut report = OpenReport::default();
        scan_partition_dirs(storage.as_ref(), &dir, &topics, &mut report)?;
        let workers = match &config.workers {
            Some(workers) => workers.clone(),
            None => Workers::new(config.worker_threads)?,
        };
        let shared = Arc::new(EngineShared {
            dir,
            config,
            workers,
            topics: Mutex::new(TopicList { file, topics }),
            logs: Mutex::new(HashMap::new()),
            producer_ids,
            offsets_listener: Mutex::new(None),
            _lock: lock,
        });
        let (coordinator, recovered) = TransactionCoordinator::open(
            Arc::clone(&shared) as Arc<dyn TxnLogs>,
            Arc::clone(&shared.producer_ids),
            Arc::clone(&shared.config.clock),
            shared.config.coordinator.clone(),
        )?;
        report.coordinator = recovered;
        let coordinator = Arc::new(coordinator);
        let timers = CoordinatorTimers::register(&shared, &coordinator);
        Ok(Engine {
            shared,
            coordinator,
            timers,
            report,
        })
    }

    /// The engine's directory.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// What [`open`](Self::open) found.
    pub fn open_report(&self) -> &OpenReport {
        &self.report
    }

    /// The transaction coordinator of the engine's transactional ids.
    pub fn coordinator(&self) -> &Arc<TransactionCoordinator> {
        &self.coordinator
    }

    /// The engine's producer ids (Kafka's `ProducerIdManager`), for idempotent producers.
    pub fn producer_ids(&self) -> &Arc<ProducerIdManager> {
        &self.shared.producer_ids
    }

    /// The pool that runs the partitions' background work and the coordinator's timers.
    pub fn workers(&self) -> &Workers {
        &self.shared.workers
    }

    /// The clock of every partition and of the coordinators' timers.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.shared.config.clock
    }

    /// Partition `partition` of `__consumer_offsets` (`0..offsets.topic.num.partitions`),
    /// opened, or created at its first use: compacted, 100 MiB segments, uncompressed. The
    /// group layer keeps its offset stores there; the coordinator adds it to a transaction in
    /// `add_offsets` and writes its markers there.
    ///
    /// # Errors
    /// `InvalidArgument` for a partition out of range; the log's open errors.
    pub fn consumer_offsets_log(&self, partition: i32) -> Result<Arc<Log>, Error> {
        self.shared.consumer_offsets_log(partition)
    }

    /// `offsets.topic.num.partitions` (the coordinator's setting, 50).
    pub fn offsets_topic_partitions(&self) -> i32 {
        self.shared.config.coordinator.offsets_topic_partitions
    }

    /// Registers the group layer, told of every transaction marker the coordinator writes into
    /// `__consumer_offsets` once it is durable. Held weakly: dropping the listener ends it.
    /// Replaces any earlier one.
    pub fn set_offsets_marker_listener(&self, listener: Weak<dyn OffsetsMarkerListener>) {
        *lock(&self.shared.offsets_listener) = Some(listener);
    }

    /// How many partitions are open now (each opens at its first use).
    pub fn open_partition_count(&self) -> usize {
        lock(&self.shared.logs).len()
    }

    /// Stops the coordinator's timers and closes every open partition (each log's final
    /// fsync and clean-shutdown record). Returns the first error, after trying every log.
    /// Later calls through [`Topic`](super::Topic) handles fail with `Error::Closed`.
    ///
    /// Without this call the partitions close when the engine's last handle goes (the
    /// `Engine`, its `Topic`s, its `TopicProducer`s and its coordinator): then every `Log` of
    /// the engine closes, even one still held elsewhere, before the directory's lock is
    /// released, so the directory opens again in this process.
    ///
    /// # Errors
    /// The first log's close error.
    pub fn close(&self) -> Result<(), Error> {
        self.timers.cancel();
        let logs: Vec<Arc<Log>> = lock(&self.shared.logs).values().cloned().collect();
        let mut first_error = None;
        for log in logs {
            if let Err(error) = log.close() {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl EngineShared {
    /// Closes every open partition, logging each error: see the `Drop` below.
    fn close_logs_on_drop(&self) {
        let logs: Vec<Arc<Log>> = lock(&self.logs).drain().map(|(_, log)| log).collect();
        for partition in logs {
            if let Err(error) = partition.close() {
                log::warn!(
                    "closing {} with its engine: {error}",
                    partition.dir().display()
                );
            }
        }
    }
}

impl Drop for EngineShared {
    /// The engine's last handle is gone and its directory lock goes next: its partitions close
    /// first, whoever still holds one (a sending thread's route copy holds its topic's partition
    /// producers, and through them the logs), so that the directory can be opened again and no
    /// log of it writes after.
    fn drop(&mut self) {
        self.close_logs_on_drop();
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        // The task holds the coordinator weakly; cancelling waits out a run in progress.
        self.timers.cancel();
    }
}

/// Sorts the entries of `dir` into the report: partition directories not listed, and deleted
/// topics' directories, whose files it removes.
fn scan_partition_dirs(
    storage: &dyn partlog::unstable::Storage,
    dir: &Path,
    topics: &Topics,
    report: &mut OpenReport,
) -> Result<(), Error> {
    let mut names = storage.list(dir)?;
    names.sort_unstable();
    for name in names {
        if name.ends_with(DELETED_DIR_SUFFIX) && name.contains('.') {
            let deleted = dir.join(&name);
            if storage.metadata(&deleted)?.is_dir {
                for file in storage.list(&deleted)? {
                    storage.remove(&deleted.join(file))?;
                }
                report.deleted_dirs.push(deleted);
            }
            continue;
        }
        let Some((topic, partition)) = parse_partition_dir_name(&name) else {
            continue;
        };
        let listed = topic == TRANSACTION_STATE_TOPIC
            || topic == CONSUMER_OFFSETS_TOPIC
            || topics
                .get(topic)
                .is_some_and(|entry| partition < entry.partitions);
        if !listed {
            report.unlisted_partition_dirs.push(dir.join(name));
        }
    }
    Ok(())
}
