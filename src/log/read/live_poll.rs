//! [`LivePoll`]: when a read-only log that follows a writer in another process may look at the
//! directory next, and the lock that makes one reader poll at a time.

use std::time::{Duration, Instant};

use crate::sync::Mutex;

/// See the [module docs](self).
#[derive(Debug)]
pub(in crate::log) struct LivePoll {
    /// The earliest time of the next poll; held for a whole poll, so that concurrent readers
    /// never poll twice.
    next_poll: Mutex<Instant>,
    interval: Duration,
}

impl LivePoll {
    /// The first poll is due one `interval` from now (the open read the directory).
    pub(in crate::log) fn new(interval: Duration) -> LivePoll {
        LivePoll {
            next_poll: Mutex::new(Instant::now() + interval),
            interval,
        }
    }

    /// Runs `poll` now, whatever the interval, holding the poll lock; the next poll is due one
    /// interval from now.
    pub(in crate::log) fn poll_now<T>(&self, poll: impl FnOnce() -> T) -> T {
        let mut next_poll = self.next_poll.lock();
        *next_poll = Instant::now() + self.interval;
        poll()
    }

    /// Runs `poll`, holding the poll lock, when the interval has passed, no other thread is
    /// polling, and `skip` (asked last) says no.
    pub(in crate::log) fn poll_if_due(&self, skip: impl FnOnce() -> bool, poll: impl FnOnce()) {
        let Some(mut next_poll) = self.next_poll.try_lock() else {
            return;
        };
        let now = Instant::now();
        if now < *next_poll || skip() {
            return;
        }
        *next_poll = now + self.interval;
        poll();
    }
}
