//! The one place partlog takes its locks, atomics and threads from.
//!
//! By default these are parking_lot's locks and std's atomics and threads, re-exported as they
//! are: the facade costs nothing. Built with `RUSTFLAGS="--cfg shuttle"` they are shuttle's,
//! whose scheduler then decides every interleaving of the lock-free and waiter code in the
//! model-checked tests (the `shuttle_tests` modules), and replays a failing one from the
//! schedule it prints. This is how tokio swaps in loom under its `loom` cfg.
//!
//! Under shuttle only the model-checked tests can run: shuttle's primitives work only inside a
//! `shuttle::check_*` execution. Two things differ from the real primitives there:
//!
//! - Shuttle's locks have std's poisoning API; the wrappers below give them parking_lot's
//!   (no poisoning: a panic while a lock is held fails the execution anyway).
//! - Shuttle does not model time. A timed condvar wait ([`Condvar::wait_for`],
//!   [`Condvar::wait_until`]) releases the lock, yields to the scheduler, takes the lock again
//!   and reports a timeout or not by a coin shuttle draws (recorded in the schedule, so a replay
//!   makes the same choices). That is a superset of what real time can do: a timed waiter may
//!   wake at any moment, notified or not, and every caller already re-checks its condition.
//!   `park_timeout` and `sleep` are shuttle's: `park_timeout` never times out, `sleep` yields.
//!   A [`SpinBudget`] runs out by the same coin.
//!   Shuttle also treats every atomic ordering as `SeqCst`, so the tests find lost wake-ups,
//!   lock-order and reference-counting races, not bugs that only weak orderings cause.

#[cfg(not(shuttle))]
pub(crate) use parking_lot::{
    Condvar, MappedRwLockReadGuard, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard,
};
#[cfg(not(shuttle))]
pub(crate) use std::sync::{Arc, Weak};
#[cfg(not(shuttle))]
pub(crate) use std::thread_local;

#[cfg(shuttle)]
pub(crate) use model::{
    Condvar, MappedRwLockReadGuard, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard,
};
#[cfg(shuttle)]
pub(crate) use shuttle::sync::{Arc, Weak};
#[cfg(shuttle)]
pub(crate) use shuttle::thread_local;

/// Atomic integers and booleans, their orderings and the fence.
pub(crate) mod atomic {
    #[cfg(shuttle)]
    pub(crate) use shuttle::sync::atomic::{
        AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering, fence,
    };
    #[cfg(not(shuttle))]
    pub(crate) use std::sync::atomic::{
        AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering, fence,
    };
}

/// Threads: spawning, joining, parking and yielding.
pub(crate) mod thread {
    #![allow(
        unused_imports,
        reason = "spawning, sleeping and yielding are for the tests"
    )]
    #[cfg(shuttle)]
    pub(crate) use shuttle::thread::{
        Builder, JoinHandle, Thread, ThreadId, current, park, park_timeout, sleep, spawn, yield_now,
    };
    #[cfg(not(shuttle))]
    pub(crate) use std::thread::{
        Builder, JoinHandle, Thread, ThreadId, current, park, park_timeout, sleep, spawn, yield_now,
    };
}

/// A bounded spin-wait: a waiter that expects its condition soon yields the CPU in a loop,
/// checking between yields, rather than sleeping until another thread wakes it. Each
/// [`yield_once`](Self::yield_once) gives the CPU to any other runnable thread, so a spinner
/// delays others by a system call, not by a time slice.
#[derive(Debug)]
pub(crate) struct SpinBudget {
    #[cfg_attr(
        shuttle,
        allow(dead_code, reason = "shuttle has no time: a coin decides")
    )]
    deadline: std::time::Instant,
}

impl SpinBudget {
    /// A budget that runs out at `deadline`.
    pub(crate) fn until(deadline: std::time::Instant) -> Self {
        SpinBudget { deadline }
    }

    /// A budget that runs out after `budget`.
    pub(crate) fn lasting(budget: std::time::Duration) -> Self {
        Self::until(std::time::Instant::now() + budget)
    }

    /// Yields the CPU once; false once the budget is spent (under shuttle, by a coin).
    pub(crate) fn yield_once(&self) -> bool {
        thread::yield_now();
        #[cfg(not(shuttle))]
        return std::time::Instant::now() < self.deadline;
        #[cfg(shuttle)]
        {
            use shuttle::rand::Rng;
            shuttle::rand::thread_rng().gen_bool(0.5)
        }
    }
}

/// Takes `mutex`, spinning for at most `budget` while another thread holds it, before it blocks.
///
/// For a lock held across one short system call, as the log's writer lock is across a `pwrite`:
/// a blocked waiter is woken by the unlock and must then be scheduled again, which on a small
/// virtual machine took up to 20 µs against a hold of 2-3 µs (ARCHITECTURE.md §6, "Spinning").
/// parking_lot spins only briefly before it parks. Spinning helps only while the holder runs on
/// another CPU, so with one CPU this blocks at once. glibc's adaptive mutex
/// (`PTHREAD_MUTEX_ADAPTIVE_NP`) and the Linux kernel's optimistic spinning do the same. Under
/// shuttle it blocks at once: spinning changes no outcome, only how long a wait takes.
pub(crate) fn lock_spinning<T>(mutex: &Mutex<T>, budget: std::time::Duration) -> MutexGuard<'_, T> {
    #[cfg(not(shuttle))]
    {
        if let Some(guard) = mutex.try_lock() {
            return guard;
        }
        if several_cpus() {
            let deadline = std::time::Instant::now() + budget;
            loop {
                for _ in 0..16 {
                    std::hint::spin_loop();
                }
                // A load first: a failing compare-and-swap would take the cache line from
                // the holder each time.
                if !mutex.is_locked()
                    && let Some(guard) = mutex.try_lock()
                {
                    return guard;
                }
                if std::time::Instant::now() >= deadline {
                    break;
                }
            }
        }
    }
    #[cfg(shuttle)]
    let _ = budget;
    mutex.lock()
}

/// Whether this process may run on more than one CPU (asked once).
#[cfg(not(shuttle))]
fn several_cpus() -> bool {
    static SEVERAL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SEVERAL.get_or_init(|| std::thread::available_parallelism().is_ok_and(|n| n.get() > 1))
}

/// The model-checked tests' entry point: runs `body` under shuttle's random scheduler for
/// `PARTLOG_SHUTTLE_ITERATIONS` executions (default 10,000). A failing execution prints its
/// schedule; `PARTLOG_SHUTTLE_REPLAY=<schedule>` (with the test's name as the filter) replays
/// exactly that one.
#[cfg(all(test, shuttle))]
pub(crate) fn check(name: &str, body: impl Fn() + Send + Sync + 'static) {
    if let Ok(schedule) = std::env::var("PARTLOG_SHUTTLE_REPLAY") {
        eprintln!("{name}: replaying schedule {schedule}");
        shuttle::replay(body, &schedule);
        return;
    }
    let iterations = std::env::var("PARTLOG_SHUTTLE_ITERATIONS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(10_000);
    eprintln!("{name}: {iterations} shuttle iterations (PARTLOG_SHUTTLE_ITERATIONS)");
    shuttle::check_random(body, iterations);
}

/// parking_lot's API over shuttle's primitives.
#[cfg(shuttle)]
mod model {
    use std::fmt;
    use std::ops::{Deref, DerefMut};
    use std::sync::{PoisonError, TryLockError};
    use std::time::{Duration, Instant};

    use shuttle::rand::Rng;

    /// A mutex whose `lock` cannot fail (shuttle's poisoning is ignored, as parking_lot has none).
    #[derive(Default)]
    pub(crate) struct Mutex<T: ?Sized>(shuttle::sync::Mutex<T>);

    /// A held [`Mutex`]; its inner guard is out only while a condvar wait has given it back.
    pub(crate) struct MutexGuard<'a, T: ?Sized> {
        lock: &'a Mutex<T>,
        inner: Option<shuttle::sync::MutexGuard<'a, T>>,
    }

    impl<T> Mutex<T> {
        pub(crate) const fn new(value: T) -> Self {
            Mutex(shuttle::sync::Mutex::new(value))
        }
    }

    impl<T: ?Sized> Mutex<T> {
        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            MutexGuard {
                lock: self,
                inner: Some(self.0.lock().unwrap_or_else(PoisonError::into_inner)),
            }
        }

        pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
            let inner = match self.0.try_lock() {
                Ok(inner) => inner,
                Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                Err(TryLockError::WouldBlock) => return None,
            };
            Some(MutexGuard {
                lock: self,
                inner: Some(inner),
            })
        }
    }

    impl<T: ?Sized> fmt::Debug for Mutex<T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            // Not locked: a lock is a scheduling point, which formatting must not add.
            f.write_str("Mutex { .. }")
        }
    }

    impl<'a, T: ?Sized> MutexGuard<'a, T> {
        /// Runs `f` with the lock released, as parking_lot's `MutexGuard::unlocked`.
        pub(crate) fn unlocked<U>(guard: &mut Self, f: impl FnOnce() -> U) -> U {
            drop(guard.inner.take());
            let result = f();
            guard.inner = Some(guard.lock.0.lock().unwrap_or_else(PoisonError::into_inner));
            result
        }

        fn take(&mut self) -> shuttle::sync::MutexGuard<'a, T> {
            match self.inner.take() {
                Some(inner) => inner,
                None => unreachable!("a MutexGuard is only empty inside a condvar wait"),
            }
        }
    }

    impl<T: ?Sized> Deref for MutexGuard<'_, T> {
        type Target = T;

        fn deref(&self) -> &T {
            match &self.inner {
                Some(inner) => inner,
                None => unreachable!("a MutexGuard is only empty inside a condvar wait"),
            }
        }
    }

    impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            match &mut self.inner {
                Some(inner) => inner,
                None => unreachable!("a MutexGuard is only empty inside a condvar wait"),
            }
        }
    }

    impl<T: ?Sized + fmt::Debug> fmt::Debug for MutexGuard<'_, T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            (**self).fmt(f)
        }
    }

    /// Whether a timed wait ended by its timeout (see the [module docs](super)).
    #[derive(Debug, Clone, Copy)]
    pub(crate) struct WaitTimeoutResult(bool);

    impl WaitTimeoutResult {
        pub(crate) fn timed_out(self) -> bool {
            self.0
        }
    }

    /// A condition variable with parking_lot's API: waits take `&mut MutexGuard`.
    #[derive(Default)]
    pub(crate) struct Condvar(shuttle::sync::Condvar);

    impl Condvar {
        pub(crate) const fn new() -> Self {
            Condvar(shuttle::sync::Condvar::new())
        }

        pub(crate) fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
            let inner = guard.take();
            guard.inner = Some(self.0.wait(inner).unwrap_or_else(PoisonError::into_inner));
        }

        pub(crate) fn wait_for<T>(
            &self,
            guard: &mut MutexGuard<'_, T>,
            _timeout: Duration,
        ) -> WaitTimeoutResult {
            self.timed_wait(guard)
        }

        pub(crate) fn wait_until<T>(
            &self,
            guard: &mut MutexGuard<'_, T>,
            _deadline: Instant,
        ) -> WaitTimeoutResult {
            self.timed_wait(guard)
        }

        /// Shuttle has no time: give the lock up, let any thread run, and let shuttle's coin
        /// decide whether the deadline passed meanwhile.
        fn timed_wait<T>(&self, guard: &mut MutexGuard<'_, T>) -> WaitTimeoutResult {
            MutexGuard::unlocked(guard, shuttle::thread::yield_now);
            WaitTimeoutResult(shuttle::rand::thread_rng().gen_bool(0.5))
        }

        pub(crate) fn notify_one(&self) -> bool {
            self.0.notify_one();
            // parking_lot says whether a thread was woken; shuttle does not tell, and no
            // caller in partlog asks.
            false
        }

        pub(crate) fn notify_all(&self) -> usize {
            self.0.notify_all();
            0
        }
    }

    impl fmt::Debug for Condvar {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("Condvar { .. }")
        }
    }

    /// A reader-writer lock with parking_lot's API.
    #[derive(Default)]
    pub(crate) struct RwLock<T: ?Sized>(shuttle::sync::RwLock<T>);

    impl<T> RwLock<T> {
        pub(crate) const fn new(value: T) -> Self {
            RwLock(shuttle::sync::RwLock::new(value))
        }
    }

    impl<T: ?Sized> RwLock<T> {
        pub(crate) fn read(&self) -> RwLockReadGuard<'_, T> {
            RwLockReadGuard(self.0.read().unwrap_or_else(PoisonError::into_inner))
        }

        pub(crate) fn write(&self) -> RwLockWriteGuard<'_, T> {
            RwLockWriteGuard {
                lock: self,
                inner: self.0.write().unwrap_or_else(PoisonError::into_inner),
            }
        }

        pub(crate) fn try_write(&self) -> Option<RwLockWriteGuard<'_, T>> {
            let inner = match self.0.try_write() {
                Ok(inner) => inner,
                Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                Err(TryLockError::WouldBlock) => return None,
            };
            Some(RwLockWriteGuard { lock: self, inner })
        }
    }

    impl<T: ?Sized> fmt::Debug for RwLock<T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("RwLock { .. }")
        }
    }

    /// A read lock held on a [`RwLock`].
    pub(crate) struct RwLockReadGuard<'a, T: ?Sized>(shuttle::sync::RwLockReadGuard<'a, T>);

    impl<'a, T: ?Sized> RwLockReadGuard<'a, T> {
        /// A guard for a part of the locked value, or the guard back when `f` finds none.
        pub(crate) fn try_map<U: ?Sized>(
            guard: Self,
            f: impl FnOnce(&T) -> Option<&U>,
        ) -> Result<MappedRwLockReadGuard<'a, U>, Self>
        where
            T: 'a,
        {
            let Some(part) = f(&guard.0).map(|part| part as *const U) else {
                return Err(guard);
            };
            Ok(MappedRwLockReadGuard {
                part,
                _held: Box::new(guard.0),
            })
        }
    }

    impl<T: ?Sized> Deref for RwLockReadGuard<'_, T> {
        type Target = T;

        fn deref(&self) -> &T {
            &self.0
        }
    }

    impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLockReadGuard<'_, T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            (**self).fmt(f)
        }
    }

    /// A write lock held on a [`RwLock`].
    pub(crate) struct RwLockWriteGuard<'a, T: ?Sized> {
        lock: &'a RwLock<T>,
        inner: shuttle::sync::RwLockWriteGuard<'a, T>,
    }

    impl<'a, T: ?Sized> RwLockWriteGuard<'a, T> {
        /// Turns the write lock into a read lock. Shuttle's lock cannot do that atomically, so
        /// under shuttle a writer may run in between: the callers re-check what they wrote.
        pub(crate) fn downgrade(guard: Self) -> RwLockReadGuard<'a, T> {
            let lock = guard.lock;
            drop(guard);
            lock.read()
        }
    }

    impl<T: ?Sized> Deref for RwLockWriteGuard<'_, T> {
        type Target = T;

        fn deref(&self) -> &T {
            &self.inner
        }
    }

    impl<T: ?Sized> DerefMut for RwLockWriteGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            &mut self.inner
        }
    }

    impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLockWriteGuard<'_, T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            (**self).fmt(f)
        }
    }

    /// Anything a [`MappedRwLockReadGuard`] keeps alive: the read guard it was mapped from.
    trait Held {}

    impl<T: ?Sized> Held for T {}

    /// A read lock held for a part of the locked value (see [`RwLockReadGuard::try_map`]).
    pub(crate) struct MappedRwLockReadGuard<'a, U: ?Sized> {
        /// Points into the value behind the lock `_held` keeps read-locked.
        part: *const U,
        _held: Box<dyn Held + 'a>,
    }

    impl<U: ?Sized> Deref for MappedRwLockReadGuard<'_, U> {
        type Target = U;

        fn deref(&self) -> &U {
            // SAFETY: `part` came from a `&U` borrowed from the value behind the lock, which
            // lives for 'a; the read guard in `_held` keeps it read-locked, so no writer
            // changes or moves it, for as long as this guard exists.
            unsafe { &*self.part }
        }
    }

    impl<U: ?Sized + fmt::Debug> fmt::Debug for MappedRwLockReadGuard<'_, U> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            (**self).fmt(f)
        }
    }
}

#[cfg(all(test, not(shuttle)))]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn lock_spinning_takes_a_free_lock_and_waits_out_a_holder_past_its_budget() {
        let counter = Arc::new(Mutex::new(0u64));
        assert_eq!(*lock_spinning(&counter, Duration::ZERO), 0);
        // Threads add under the lock while others hold it for longer than the spin budget, so
        // both the spinning and the blocking paths take it; no increment may be lost.
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let counter = Arc::clone(&counter);
                std::thread::spawn(move || {
                    for round in 0..200u64 {
                        let mut value = lock_spinning(&counter, Duration::from_micros(5));
                        let seen = *value;
                        if round % 50 == 0 {
                            std::thread::sleep(Duration::from_micros(200));
                        }
                        *value = seen + 1;
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(*counter.lock(), 800);
    }
}
