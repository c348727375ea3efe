//! [`Watermark`]: a monotone offset that threads and futures can wait on.
//!
//! The log has two: the log end offset (readers wait for data) and the durable offset (writers
//! wait for an fsync). Both are built on one waiter list of [`Waker`]s: the blocking form wakes a
//! parked thread through a waker that unparks it, and a future form can register its task's
//! waker on the same list.

use crate::sync::Arc;
use crate::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use crate::sync::thread::Thread;
use std::task::{Wake, Waker};
use std::time::Instant;

use crate::sync::Mutex;

/// A registration on a watermark's waiter list, for removal when a wait gives up.
pub(crate) type WaiterId = u64;

struct Waiter {
    id: WaiterId,
    /// Woken once the watermark is above this value.
    above: i64,
    waker: Waker,
}

/// An offset that only moves forward, except when the log is truncated.
pub(crate) struct Watermark {
    value: AtomicI64,
    next_id: AtomicU64,
    waiters: Mutex<Vec<Waiter>>,
    /// How many waiters are registered, kept with the list under its lock. An advance reads
    /// it, after moving the value, to skip the lock when no one waits (every append advances the
    /// log end); a registration stores it before it reads the value. Both sides are `SeqCst`,
    /// so either the advance sees the waiter or the waiter sees the new value.
    waiting: AtomicUsize,
}

impl std::fmt::Debug for Watermark {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watermark")
            .field("value", &self.get())
            .finish_non_exhaustive()
    }
}

/// Wakes a thread parked in [`Watermark::wait_above`].
struct ThreadWaker(Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

impl Watermark {
    pub fn new(value: i64) -> Self {
        Watermark {
            value: AtomicI64::new(value),
            next_id: AtomicU64::new(0),
            waiters: Mutex::new(Vec::new()),
            waiting: AtomicUsize::new(0),
        }
    }

    /// The current value. `Acquire`: whatever was published before the value moved is visible.
    pub fn get(&self) -> i64 {
        self.value.load(Ordering::Acquire)
    }

    /// Moves the value up to `to` (never down) and wakes every waiter it satisfies.
    pub fn advance(&self, to: i64) {
        let previous = self.value.fetch_max(to, Ordering::SeqCst);
        if to > previous && self.waiting.load(Ordering::SeqCst) > 0 {
            self.wake_satisfied(to);
        }
    }

    /// Sets the value, possibly lowering it (truncation), and wakes every waiter so that each
    /// re-checks its condition.
    pub fn set(&self, to: i64) {
        self.value.store(to, Ordering::SeqCst);
        self.wake_all();
    }

    /// Wakes every waiter without changing the value (a poisoned log, a closing log). It must
    /// not store the value it read: an `advance` in between would be undone, and the watermark
    /// would move down with no truncation.
    pub fn wake_all(&self) {
        let woken: Vec<Waiter> = {
            let mut waiters = self.waiters.lock();
            self.waiting.store(0, Ordering::SeqCst);
            std::mem::take(&mut *waiters)
        };
        for waiter in woken {
            waiter.waker.wake();
        }
    }

    fn wake_satisfied(&self, value: i64) {
        let woken: Vec<Waiter> = {
            let mut waiters = self.waiters.lock();
            if waiters.iter().all(|w| value <= w.above) {
                // The common case (often no waiter at all): nothing to wake, nothing to move.
                return;
            }
            let (woken, kept): (Vec<Waiter>, Vec<Waiter>) = std::mem::take(&mut *waiters)
                .into_iter()
                .partition(|w| value > w.above);
            *waiters = kept;
            self.waiting.store(waiters.len(), Ordering::SeqCst);
            woken
        };
        for waiter in woken {
            waiter.waker.wake();
        }
    }

    /// Registers `waker` to be woken once the value is above `above`. Returns `None` when it
    /// already is (nothing was registered). The value is checked under the list's lock, and
    /// [`advance`](Self::advance) stores before it takes the lock, so no wake-up is lost.
    pub fn register(&self, above: i64, waker: &Waker) -> Option<WaiterId> {
        let mut waiters = self.waiters.lock();
        // Counted before the value is read (see `waiting`).
        self.waiting.store(waiters.len() + 1, Ordering::SeqCst);
        if self.value.load(Ordering::SeqCst) > above {
            self.waiting.store(waiters.len(), Ordering::SeqCst);
            return None;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        if let Some(existing) = waiters.iter_mut().find(|w| w.waker.will_wake(waker)) {
            // The same task registering again only moves its threshold.
            existing.above = existing.above.min(above);
            existing.id = id;
            self.waiting.store(waiters.len(), Ordering::SeqCst);
            return Some(id);
        }
        waiters.push(Waiter {
            id,
            above,
            waker: waker.clone(),
        });
        Some(id)
    }

    /// Removes a registration (a wait that timed out or was dropped).
    pub fn deregister(&self, id: WaiterId) {
        let mut waiters = self.waiters.lock();
        waiters.retain(|w| w.id != id);
        self.waiting.store(waiters.len(), Ordering::SeqCst);
    }

    /// Blocks the calling thread until the value is above `above` or `deadline` passes, or
    /// `interrupted()` says to stop (checked after every wake-up). Returns the last value seen.
    pub fn wait_above(
        &self,
        above: i64,
        deadline: Option<Instant>,
        interrupted: impl Fn() -> bool,
    ) -> i64 {
        let waker = Waker::from(Arc::new(ThreadWaker(crate::sync::thread::current())));
        loop {
            let value = self.get();
            if value > above || interrupted() {
                return value;
            }
            let Some(id) = self.register(above, &waker) else {
                return self.get();
            };
            // Checked again after registering: an interrupter that sets its flag and then wakes
            // all waiters either sees this registration or is seen here.
            if interrupted() {
                self.deregister(id);
                return self.get();
            }
            match deadline {
                None => crate::sync::thread::park(),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        self.deregister(id);
                        return self.get();
                    }
                    crate::sync::thread::park_timeout(deadline - now);
                }
            }
            self.deregister(id);
        }
    }

    /// How many waiters are registered (for tests and stats).
    #[cfg(test)]
    pub fn waiter_count(&self) -> usize {
        let waiters = self.waiters.lock();
        assert_eq!(waiters.len(), self.waiting.load(Ordering::SeqCst));
        waiters.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn waiters_wake_when_the_value_passes_them() {
        let mark = Arc::new(Watermark::new(0));
        let waiter = {
            let mark = Arc::clone(&mark);
            crate::sync::thread::spawn(move || mark.wait_above(5, None, || false))
        };
        for value in 1..=6 {
            mark.advance(value);
        }
        assert_eq!(waiter.join().unwrap(), 6);
        assert_eq!(mark.waiter_count(), 0);
    }

    #[test]
    fn no_wake_up_is_lost_when_advances_skip_the_lock() {
        // A waiter registers while the value moves past it: either the advance sees the
        // registration, or the registration sees the value. A lost wake-up would leave the
        // waiter parked until its (long) deadline.
        for round in 0..200 {
            let mark = Arc::new(Watermark::new(0));
            let waiter = {
                let mark = Arc::clone(&mark);
                crate::sync::thread::spawn(move || {
                    let deadline = Instant::now() + Duration::from_secs(30);
                    mark.wait_above(0, Some(deadline), || false)
                })
            };
            if round % 2 == 0 {
                crate::sync::thread::yield_now();
            }
            mark.advance(1);
            assert_eq!(waiter.join().unwrap(), 1, "round {round}");
            assert_eq!(mark.waiter_count(), 0);
        }
    }

    #[test]
    fn a_timed_out_wait_leaves_no_registration() {
        let mark = Watermark::new(0);
        let deadline = Instant::now() + Duration::from_millis(20);
        assert_eq!(mark.wait_above(10, Some(deadline), || false), 0);
        assert_eq!(mark.waiter_count(), 0);
    }

    #[test]
    fn advance_never_lowers_and_set_does() {
        let mark = Watermark::new(10);
        mark.advance(5);
        assert_eq!(mark.get(), 10);
        mark.set(3);
        assert_eq!(mark.get(), 3);
    }

    #[test]
    fn interruption_ends_a_wait() {
        let mark = Arc::new(Watermark::new(0));
        let stop = Arc::new(crate::sync::atomic::AtomicBool::new(false));
        let waiter = {
            let (mark, stop) = (Arc::clone(&mark), Arc::clone(&stop));
            crate::sync::thread::spawn(move || {
                mark.wait_above(100, None, || stop.load(Ordering::SeqCst))
            })
        };
        crate::sync::thread::sleep(Duration::from_millis(10));
        stop.store(true, Ordering::SeqCst);
        mark.wake_all();
        assert_eq!(waiter.join().unwrap(), 0);
    }

    /// Model-checked with shuttle (`RUSTFLAGS="--cfg shuttle"`, see `crate::sync`).
    #[cfg(shuttle)]
    mod shuttle_tests {
        use super::*;
        use crate::sync::thread;

        #[test]
        fn shuttle_waking_every_waiter_never_undoes_an_advance() {
            crate::sync::check(
                "shuttle_waking_every_waiter_never_undoes_an_advance",
                || {
                    let mark = Arc::new(Watermark::new(0));
                    let advancer = {
                        let mark = Arc::clone(&mark);
                        thread::spawn(move || mark.advance(3))
                    };
                    let waker = {
                        let mark = Arc::clone(&mark);
                        thread::spawn(move || mark.wake_all())
                    };
                    let mut seen = mark.get();
                    for _ in 0..3 {
                        let now = mark.get();
                        assert!(now >= seen, "the watermark went back: {seen} -> {now}");
                        seen = now;
                    }
                    advancer.join().unwrap();
                    waker.join().unwrap();
                    assert_eq!(mark.get(), 3, "a wake-up undid the advance");
                },
            );
        }
    }
}
