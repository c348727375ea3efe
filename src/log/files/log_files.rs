//! [`LogFiles`]: what the log holds of its directory beyond the segments, for its whole life.

use crate::error::Result;
use crate::sync::{Mutex, MutexGuard};

use super::cleaner_checkpoint::CleanerCheckpoint;
use super::dir_lock::DirLock;
use super::kafka_dir::KafkaDirMembership;

/// The log's hold on its directory: `partlog.lock` and its share of the Kafka log dir's lock
/// (both given back by close), the lock that serializes reaping `.deleted` files, and the
/// cleaner checkpoint as this log last wrote it.
#[derive(Debug)]
pub(in crate::log) struct LogFiles {
    /// Released by `close()` (or the drop of the log).
    dir_lock: Mutex<Option<DirLock>>,
    /// Left at close (ARCHITECTURE.md §7, "Opening inside a Kafka log dir").
    kafka_dir: Mutex<Option<KafkaDirMembership>>,
    /// Held while unlinking `.deleted` files outside the writer lock, so that a caller who reaps
    /// finds every unpinned file gone when it returns, whichever thread took it. Taken before
    /// the writer lock.
    reaping: Mutex<()>,
    cleaner_checkpoint: CleanerCheckpoint,
}

impl LogFiles {
    /// What an open took: the locks (none for a live reader, or a read-only open without a
    /// lock file) and the cleaner checkpoint it read.
    pub(in crate::log) fn new(
        dir_lock: Option<DirLock>,
        kafka_dir: Option<KafkaDirMembership>,
        cleaner_checkpoint: CleanerCheckpoint,
    ) -> LogFiles {
        LogFiles {
            dir_lock: Mutex::new(dir_lock),
            kafka_dir: Mutex::new(kafka_dir),
            reaping: Mutex::new(()),
            cleaner_checkpoint,
        }
    }

    /// The reaping lock (ARCHITECTURE.md §8: a pass lock, taken before the writer mutex).
    pub(in crate::log) fn reaping(&self) -> MutexGuard<'_, ()> {
        self.reaping.lock()
    }

    /// `partlog.cleaner-checkpoint`.
    pub(in crate::log) fn cleaner_checkpoint(&self) -> &CleanerCheckpoint {
        &self.cleaner_checkpoint
    }

    /// Releases `partlog.lock`; later calls do nothing.
    pub(in crate::log) fn release_dir_lock(&self) {
        drop(self.dir_lock.lock().take());
    }

    /// Gives back this log's share of the Kafka log dir's lock (`clean`: the log closed
    /// without a failure), if it holds one; later calls do nothing.
    pub(in crate::log) fn leave_kafka_dir(&self, clean: bool) -> Option<Result<()>> {
        let membership = self.kafka_dir.lock().take();
        membership.map(|m| m.leave(clean))
    }
}
