//! [`Workers`]: one pool of threads that runs the background work of many logs (ARCHITECTURE.md
//! §8, "Workers").
//!
//! `pool.rs` is the scheduler (threads, timers, lanes); `task.rs` the [`Task`] trait the logs'
//! flusher, retention and compaction implement (in their own folders under `log/`), as may a
//! crate built on partlog for its timers.

mod pool;
mod task;

use std::time::Duration;

use crate::error::Result;
use crate::sync::Arc;

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
            .finish()
    }
}

impl Workers {
    /// Starts a pool of `threads` threads. [`Error::InvalidConfig`](crate::Error::InvalidConfig)
    /// for 0; an I/O error when the system refuses a thread.
    pub fn new(threads: usize) -> Result<Workers> {
        Ok(Workers {
            owner: Arc::new(PoolOwner {
                pool: Pool::start(threads)?,
            }),
        })
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
