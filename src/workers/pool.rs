//! The scheduler of one [`Workers`](crate::Workers): its threads, the registered tasks, one
//! timer heap per [`Lane`], and the lane limits that keep long work from delaying syncs.
//!
//! One mutex guards the state; no other lock is taken under it, and no task runs and no task is
//! dropped while it is held (a task's drop may drop a log).

use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::task::{Entry, Lane, Next, Task, TaskHandle};

crate::sync::thread_local! {
    /// The pool (by address) and task this thread is running, so that a task that cancels
    /// itself does not wait for its own run to end.
    static CURRENT: Cell<Option<(usize, u64)>> = const { Cell::new(None) };
}

/// Far enough that a timer at it never fires: for a `Next::After` too large for an `Instant`.
const FOREVER: Duration = Duration::from_secs(365 * 24 * 3600);

/// See the [module docs](self).
pub(crate) struct Pool {
    threads: usize,
    state: Mutex<PoolState>,
    /// A task became due, a timer moved earlier, or a lane slot freed.
    work: Condvar,
    /// A run ended (a cancel waits on it).
    done: Condvar,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("threads", &self.threads)
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
struct PoolState {
    next_id: u64,
    tasks: HashMap<u64, Entry>,
    /// Per lane: (due, task id, stamp), earliest first. Entries whose stamp no longer matches
    /// their task's are stale and skipped.
    timers: [BinaryHeap<Reverse<(Instant, u64, u64)>>; 3],
    /// Per lane: how many runs are under way.
    running: [usize; 3],
    /// Tasks that left the pool whose last references the runner is still dropping.
    leaving: HashSet<u64>,
    shutdown: bool,
}

impl Pool {
    /// A pool of `threads` threads (at least 1), started.
    pub(crate) fn start(threads: usize) -> Result<Arc<Pool>> {
        if threads == 0 {
            return Err(Error::InvalidConfig {
                setting: "workers.threads",
                why: "a pool needs at least one thread".into(),
            });
        }
        let pool = Arc::new(Pool {
            threads,
            state: Mutex::new(PoolState::default()),
            work: Condvar::new(),
            done: Condvar::new(),
        });
        for i in 0..threads {
            let runner = Arc::clone(&pool);
            let spawned = crate::sync::thread::Builder::new()
                .name(format!("partlog-worker-{i}"))
                .spawn(move || runner.run_thread());
            if let Err(error) = spawned {
                pool.shut_down();
                return Err(Error::io("partlog-worker", error));
            }
        }
        Ok(pool)
    }

    /// How many threads the pool runs.
    pub(crate) fn threads(&self) -> usize {
        self.threads
    }

    /// Registers `task`, to run first after `first_run`.
    pub(crate) fn register(
        self: &Arc<Self>,
        task: Arc<dyn Task>,
        first_run: Duration,
    ) -> TaskHandle {
        let lane = task.lane();
        let mut state = self.state.lock();
        let id = state.next_id;
        state.next_id += 1;
        state.tasks.insert(
            id,
            Entry {
                task,
                lane,
                stamp: 0,
                running: false,
                woken: false,
                cancelled: false,
            },
        );
        let due = due_after(Instant::now(), first_run);
        state.timers[lane.index()].push(Reverse((due, id, 0)));
        drop(state);
        self.work.notify_all();
        TaskHandle {
            pool: Arc::downgrade(self),
            id,
        }
    }

    /// Makes task `id` due now (or again at the end of its current run).
    pub(crate) fn wake(&self, id: u64) {
        let mut state = self.state.lock();
        let Some(entry) = state.tasks.get_mut(&id) else {
            return;
        };
        if entry.running {
            entry.woken = true;
            return;
        }
        entry.stamp += 1;
        let (lane, stamp) = (entry.lane, entry.stamp);
        state.timers[lane.index()].push(Reverse((Instant::now(), id, stamp)));
        drop(state);
        // One task is due: one thread runs it (a busy thread picks it up when its run ends).
        self.work.notify_one();
    }

    /// Removes task `id` and waits for its current run, and the drop of the pool's references
    /// to it, to end (unless this thread is that run).
    pub(crate) fn cancel(&self, id: u64) {
        let mut state = self.state.lock();
        let removed = match state.tasks.get_mut(&id) {
            None => None,
            Some(entry) if entry.running => {
                entry.cancelled = true;
                None
            }
            Some(_) => state.tasks.remove(&id),
        };
        if removed.is_some() {
            drop(state);
            drop(removed);
            return;
        }
        let me = (self as *const Pool as usize, id);
        if CURRENT.with(|current| current.get()) == Some(me) {
            return;
        }
        while state.tasks.contains_key(&id) || state.leaving.contains(&id) {
            self.done.wait(&mut state);
        }
    }

    /// Stops the threads once their current runs end; the tasks still registered are dropped
    /// with the pool.
    pub(crate) fn shut_down(&self) {
        self.state.lock().shutdown = true;
        self.work.notify_all();
    }

    /// Whether a run of `lane` may start now: syncs always; periodic and long work on at most
    /// `threads - 1` threads together; long work on at most `threads / 2` (each at least 1).
    fn may_start(&self, state: &PoolState, lane: Lane) -> bool {
        let background = state.running[Lane::Periodic.index()] + state.running[Lane::Long.index()];
        let background_limit = self.threads.saturating_sub(1).max(1);
        match lane {
            Lane::Sync => true,
            Lane::Periodic => background < background_limit,
            Lane::Long => {
                background < background_limit
                    && state.running[Lane::Long.index()] < (self.threads / 2).max(1)
            }
        }
    }

    /// The next task to run now, marked running; or else when the next one that may start is
    /// due (`None`: none is).
    #[allow(
        clippy::type_complexity,
        reason = "a private pair of the task to run and its lane"
    )]
    fn pick(
        &self,
        state: &mut PoolState,
        now: Instant,
    ) -> std::result::Result<(u64, Arc<dyn Task>, Lane), Option<Instant>> {
        let mut earliest: Option<Instant> = None;
        for lane in Lane::ALL {
            while let Some(&Reverse((due, id, stamp))) = state.timers[lane.index()].peek() {
                let may_start = self.may_start(state, lane);
                let Some(entry) = state
                    .tasks
                    .get_mut(&id)
                    .filter(|entry| entry.stamp == stamp && !entry.running)
                else {
                    state.timers[lane.index()].pop();
                    continue;
                };
                if !may_start {
                    // The run that ends and frees the slot notifies.
                    break;
                }
                if due > now {
                    earliest = Some(earliest.map_or(due, |at| at.min(due)));
                    break;
                }
                entry.running = true;
                let task = Arc::clone(&entry.task);
                state.timers[lane.index()].pop();
                state.running[lane.index()] += 1;
                return Ok((id, task, lane));
            }
        }
        Err(earliest)
    }

    /// One pool thread: runs what is due, waits for what is next, until shut down.
    fn run_thread(self: Arc<Self>) {
        let mut state = self.state.lock();
        loop {
            if state.shutdown {
                return;
            }
            let now = Instant::now();
            match self.pick(&mut state, now) {
                Ok((id, task, lane)) => {
                    drop(state);
                    let next = self.run_task(id, &*task);
                    state = self.finish(id, lane, next, task);
                }
                Err(Some(at)) => {
                    self.work
                        .wait_for(&mut state, at.saturating_duration_since(now));
                }
                Err(None) => self.work.wait(&mut state),
            }
        }
    }

    /// Runs `task` once; a panic ends the task (logged), not the thread.
    fn run_task(&self, id: u64, task: &dyn Task) -> Next {
        CURRENT.with(|current| current.set(Some((self as *const Pool as usize, id))));
        let next = catch_unwind(AssertUnwindSafe(|| task.run())).unwrap_or_else(|_| {
            log::error!("a partlog worker task panicked: it no longer runs");
            Next::Done
        });
        CURRENT.with(|current| current.set(None));
        next
    }

    /// Records the end of a run of task `id`: reschedules it, or lets it leave the pool,
    /// dropping its references outside the lock. Returns the lock.
    fn finish(
        &self,
        id: u64,
        lane: Lane,
        next: Next,
        task: Arc<dyn Task>,
    ) -> MutexGuard<'_, PoolState> {
        let mut state = self.state.lock();
        state.running[lane.index()] -= 1;
        let mut leaving = None;
        if let Some(entry) = state.tasks.get_mut(&id) {
            entry.running = false;
            match next {
                Next::After(delay) if !entry.cancelled => {
                    entry.stamp += 1;
                    let now = Instant::now();
                    let due = if std::mem::take(&mut entry.woken) {
                        now
                    } else {
                        due_after(now, delay)
                    };
                    let stamp = entry.stamp;
                    state.timers[lane.index()].push(Reverse((due, id, stamp)));
                }
                _ => {
                    leaving = state.tasks.remove(&id);
                    state.leaving.insert(id);
                }
            }
        }
        drop(state);
        drop(task);
        let left = leaving.is_some();
        drop(leaving);
        let mut state = self.state.lock();
        if left {
            state.leaving.remove(&id);
        }
        self.done.notify_all();
        // A lane slot freed, or the task is due again: this thread looks at once (the caller
        // loops to `pick`), and one more, in case two tasks may now start.
        self.work.notify_one();
        state
    }
}

/// `now + delay`, or far in the future when that overflows.
fn due_after(now: Instant, delay: Duration) -> Instant {
    now.checked_add(delay.min(FOREVER))
        .unwrap_or(now + Duration::from_secs(1))
}

#[cfg(test)]
mod tests {
    /// Model-checked with shuttle (`RUSTFLAGS="--cfg shuttle"`, see `crate::sync`).
    #[cfg(shuttle)]
    mod shuttle_tests {
        use std::time::Duration;

        use super::super::*;
        use crate::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        use crate::sync::thread;

        /// Counts its runs, and notes a run once its cancel has returned (a panic here would
        /// be caught by the pool).
        #[derive(Default)]
        struct Counter {
            runs: AtomicUsize,
            cancelled: AtomicBool,
            ran_after_cancel: AtomicBool,
        }

        impl Task for Counter {
            fn run(&self) -> Next {
                if self.cancelled.load(Ordering::SeqCst) {
                    self.ran_after_cancel.store(true, Ordering::SeqCst);
                }
                self.runs.fetch_add(1, Ordering::SeqCst);
                Next::After(Duration::from_millis(1))
            }

            fn lane(&self) -> Lane {
                Lane::Sync
            }
        }

        /// Wakes from another thread race the runs and the cancel: once `cancel` returns, the
        /// task never runs again and the pool holds no reference to it; the threads end at
        /// shutdown (no lost wake-up leaves one blocked).
        #[test]
        fn pool_cancel_racing_wakes_and_runs_leaves_nothing_running() {
            crate::sync::check(
                "pool_cancel_racing_wakes_and_runs_leaves_nothing_running",
                || {
                    let pool = Pool::start(2).unwrap();
                    let task = Arc::new(Counter::default());
                    let handle = pool.register(Arc::clone(&task) as Arc<dyn Task>, Duration::ZERO);
                    let other = Arc::new(Counter::default());
                    let other_handle =
                        pool.register(Arc::clone(&other) as Arc<dyn Task>, Duration::ZERO);
                    let waker = {
                        let handle = handle.clone();
                        thread::spawn(move || {
                            handle.wake();
                            handle.wake();
                        })
                    };
                    handle.cancel();
                    task.cancelled.store(true, Ordering::SeqCst);
                    waker.join().unwrap();
                    assert_eq!(Arc::strong_count(&task), 1, "the pool still holds the task");
                    other_handle.wake();
                    other_handle.cancel();
                    assert_eq!(Arc::strong_count(&other), 1);
                    assert!(
                        !task.ran_after_cancel.load(Ordering::SeqCst),
                        "ran after cancel"
                    );
                    pool.shut_down();
                },
            );
        }
    }
}
