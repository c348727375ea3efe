//! What the pool runs: a [`Task`], the [`Lane`] it runs in, and what it says about its next run
//! ([`Next`]); a [`TaskHandle`] wakes or cancels one registered task.

use std::time::Duration;

use crate::sync::Arc;

use super::pool::Pool;

/// Background work the [`Workers`](crate::Workers) pool runs again and again, each run short,
/// on whichever pool thread is free: a log's flusher, its retention and producer expiry, its
/// compaction, or (for a crate built on partlog) a timer of its own.
///
/// The pool never runs one task on two threads at once, so a task may keep its schedule behind
/// an uncontended lock.
pub trait Task: Send + Sync + 'static {
    /// Runs once and says when to run next. A run that blocks holds a pool thread: a long one
    /// belongs in [`Lane::Long`].
    fn run(&self) -> Next;

    /// Which lane the task runs in (asked once, at registration).
    fn lane(&self) -> Lane {
        Lane::Periodic
    }
}

/// When a [`Task`] runs next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// After this long, or sooner if [`TaskHandle::wake`] is called.
    After(Duration),
    /// Never: the task is done and leaves the pool.
    Done,
}

/// The lanes that keep one kind of work from delaying another. A pool of `n` threads runs
/// sync tasks on any thread and first; periodic and long tasks on at most `n - 1` threads
/// together (so one thread is always free for syncs); long tasks on at most `n / 2` (so, from 3
/// threads on, a periodic task always finds a thread while long ones run). Each lane takes at
/// least one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lane {
    /// Group-commit syncs that callers wait on (a log's flusher): first, on any thread.
    Sync,
    /// Short periodic work: retention, producer expiry, timers.
    Periodic,
    /// Work that may take long: compaction passes.
    Long,
}

impl Lane {
    pub(super) const ALL: [Lane; 3] = [Lane::Sync, Lane::Periodic, Lane::Long];

    pub(super) fn index(self) -> usize {
        match self {
            Lane::Sync => 0,
            Lane::Periodic => 1,
            Lane::Long => 2,
        }
    }
}

/// One registered task: wakes it, or cancels it. Dropping the handle leaves the task
/// registered (it leaves when it returns [`Next::Done`] or is cancelled).
#[derive(Debug, Clone)]
pub struct TaskHandle {
    pub(super) pool: crate::sync::Weak<Pool>,
    pub(super) id: u64,
}

impl TaskHandle {
    /// Runs the task as soon as a thread of its lane is free (after its current run, if it
    /// is running now). Does nothing once the task has left the pool.
    pub fn wake(&self) {
        if let Some(pool) = self.pool.upgrade() {
            pool.wake(self.id);
        }
    }

    /// Removes the task from the pool and waits for its current run, if any, to end: once this
    /// returns the task never runs again and the pool holds no reference to it. Called from
    /// the task's own run, it returns without waiting for that run.
    pub fn cancel(&self) {
        if let Some(pool) = self.pool.upgrade() {
            pool.cancel(self.id);
        }
    }
}

/// A task in the pool, with what the scheduler needs.
pub(super) struct Entry {
    pub(super) task: Arc<dyn Task>,
    pub(super) lane: Lane,
    /// Bumped at each reschedule: a timer whose stamp differs is stale.
    pub(super) stamp: u64,
    pub(super) running: bool,
    /// Woken while running: runs again at once.
    pub(super) woken: bool,
    /// Cancelled while running: leaves the pool when the run ends.
    pub(super) cancelled: bool,
}
