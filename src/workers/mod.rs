//! [`Workers`]: one pool of threads that runs the background work of many logs (ARCHITECTURE.md
//! §8, "Workers").
//!
//! `pool.rs` is the scheduler (threads, timers, lanes); `task.rs` the [`Task`] trait the logs'
//! flusher, retention and compaction implement (in their own folders under `log/`), as may a
//! crate built on partlog for its timers.

mod budget;
mod pool;
mod task;

use std::time::Duration;

use crate::error::Result;
use crate::log::SyncGather;
use crate::sync::Arc;

pub(crate) use budget::{IdleSegments, SegmentBudget};
pub(crate) use pool::Pool;
pub use task::{Lane, Next, Task, TaskHandle};

/// A pool of threads shared by the logs that opt into it: their flushers (the group-commit
/// syncs that futures and the batching [`Producer`](crate::Producer) ask for, the sealed
/// segments' syncs, the recovery points), their retention and producer expiry, and their
/// compaction run on it instead of on two threads per log.
///
/// Create one per process (or per group of logs) and give a clone to each log through
/// [`LogConfigBuilder::workers`](crate::LogConfigBuilder::workers); a log opened without one
/// starts its own threads, as before. A clone is a reference to the same pool. The threads end
/// once every clone (the logs' included) is dropped.
///
/// Syncs run first, on any thread; retention and compaction leave one thread free for them,
/// and compaction passes take at most half the threads, so that with 3 threads or more one
/// log's long pass delays neither another log's syncs nor its retention.
///
/// ```
/// use partlog::{Log, LogConfig, Workers};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let temp = tempfile::tempdir()?;
/// let workers = Workers::new(4)?;
/// let logs = (0..100)
///     .map(|i| {
///         let config = LogConfig::builder().workers(workers.clone()).build()?;
///         Log::open(temp.path().join(format!("topic-{i}")), config)
///     })
///     .collect::<Result<Vec<Log>, partlog::Error>>()?;
/// // 100 logs, 4 background threads.
/// # drop(logs);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Workers {
    owner: Arc<PoolOwner>,
}

/// Shuts the pool down when the last [`Workers`] clone drops. The pool's threads hold the
/// pool, not this: they never keep it alive.
struct PoolOwner {
    pool: Arc<Pool>,
    segments: Arc<SegmentBudget>,
    /// Set by [`Workers::gather_file_system_syncs`].
    gather: std::sync::OnceLock<Arc<SyncGather>>,
}

impl Drop for PoolOwner {
    fn drop(&mut self) {
        // Not joined: the last clone may drop on a pool thread (a task dropping a log).
        self.pool.shut_down();
    }
}

impl std::fmt::Debug for Workers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workers")
            .field("threads", &self.threads())
            .field("segments", &self.owner.segments)
            .finish()
    }
}

impl Workers {
    /// How many sealed segments the logs of a pool keep open together by default
    /// ([`with_open_segment_budget`](Self::with_open_segment_budget)).
    pub const DEFAULT_OPEN_SEGMENT_BUDGET: usize = 1024;

    /// Starts a pool of `threads` threads, whose logs keep at most
    /// [`DEFAULT_OPEN_SEGMENT_BUDGET`](Self::DEFAULT_OPEN_SEGMENT_BUDGET) sealed segments open
    /// together. [`Error::InvalidConfig`](crate::Error::InvalidConfig) for 0 threads; an I/O
    /// error when the system refuses a thread.
    pub fn new(threads: usize) -> Result<Workers> {
        Workers::with_open_segment_budget(threads, Workers::DEFAULT_OPEN_SEGMENT_BUDGET)
    }

    /// [`new`](Self::new), with the logs keeping at most `segments` sealed segments open
    /// together (at least 2), three descriptors each (`.log`, `.index`, `.timeindex`), beside
    /// each log's active segment, `partlog.lock` and `partlog.checkpoint`. In place of each
    /// log's own bound (64): a log that opens one beyond the budget closes the least recently
    /// used idle segment of any log of the pool, and one the system refuses a descriptor
    /// (`EMFILE`) closes idle ones and retries, failing only when none is left to close.
    pub fn with_open_segment_budget(threads: usize, segments: usize) -> Result<Workers> {
        Ok(Workers {
            owner: Arc::new(PoolOwner {
                pool: Pool::start(threads)?,
                segments: Arc::new(SegmentBudget::new(segments)),
                gather: std::sync::OnceLock::new(),
            }),
        })
    }

    /// Makes the pool's logs gather their syncs: when a log's group commit is to sync and at
    /// least `min_logs` of the pool's logs on its file system (itself included) have appends
    /// not yet durable, one [`Storage::sync_file_system`](crate::storage::Storage::sync_file_system)
    /// (`syncfs(2)`) makes all of them durable, in place of a sync of each log's files. Applies
    /// to the logs opened on the pool after this call.
    ///
    /// Off by default. Worth it when many logs sync at once (a thousand partitions under
    /// `acks=all`: benches/README.md, "Gathered syncs"); the price is that the file-system sync
    /// also writes back whatever other programs left dirty on the same file system, so its
    /// latency depends on them. Storages that cannot sync a file system, and Linux kernels
    /// before 5.8 (whose `syncfs` does not report a failed writeback), keep per-log syncs. A
    /// failed file-system sync poisons every log it was for.
    ///
    /// [`Error::InvalidConfig`](crate::Error::InvalidConfig) for `min_logs` below 2, or when
    /// the pool gathers already.
    pub fn gather_file_system_syncs(self, min_logs: usize) -> Result<Workers> {
        let refuse = |why: String| crate::Error::InvalidConfig {
            setting: "workers.gather.min.logs",
            why,
        };
        if min_logs < 2 {
            return Err(refuse(format!(
                "{min_logs} is below 2: a file-system sync for one log is no gathering"
            )));
        }
        self.owner
            .gather
            .set(Arc::new(SyncGather::new(min_logs)))
            .map_err(|_| refuse("the pool gathers its logs' syncs already".into()))?;
        Ok(self)
    }

    /// The pool's gathering of file-system syncs, if it gathers.
    pub(crate) fn sync_gather(&self) -> Option<&SyncGather> {
        self.owner.gather.get().map(|gather| &**gather)
    }

    /// How many file-system syncs the pool's logs gathered, and how many log syncs they stood
    /// for; `None` unless [`gather_file_system_syncs`](Self::gather_file_system_syncs) was
    /// called.
    pub fn gathered_syncs(&self) -> Option<(u64, u64)> {
        self.sync_gather().map(SyncGather::rounds)
    }

    /// The budget of open sealed segments the pool's logs share.
    pub(crate) fn segment_budget(&self) -> Arc<SegmentBudget> {
        Arc::clone(&self.owner.segments)
    }

    /// How many threads the pool runs.
    pub fn threads(&self) -> usize {
        self.owner.pool.threads()
    }

    /// Registers `task` (unstable: [`Task`] is in [`unstable`](crate::unstable)), to run first
    /// after `first_run` and then when it asks. The pool holds it until it returns
    /// [`Next::Done`] or is cancelled through the returned handle.
    pub fn register(&self, task: Arc<dyn Task>, first_run: Duration) -> TaskHandle {
        self.owner.pool.register(task, first_run)
    }

    /// Whether `self` and `other` are clones of one pool.
    pub fn same_pool(&self, other: &Workers) -> bool {
        Arc::ptr_eq(&self.owner, &other.owner)
    }
}
