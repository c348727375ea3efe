//! The clock seam: the only place partlog reads the wall clock.
//!
//! Time-based rules (`segment.ms`, retention, compaction lags, `linger.ms`, interval flushes) read
//! time through a [`Clock`], so tests drive them with a [`ManualClock`] instead of sleeping.

#[cfg(any(test, feature = "sim"))]
use crate::sync::atomic::{AtomicI64, Ordering};
use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

/// A source of wall-clock time in milliseconds since the Unix epoch, as Kafka timestamps are.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;

    /// A cheaper reading of the same clock, for checks that allow for a coarse time: never
    /// later than [`now_ms`](Self::now_ms) read at the same moment, and at most a second
    /// behind it. The default reads `now_ms`.
    ///
    /// The batching writer checks each record's timestamp bounds with it, and reads `now_ms`
    /// only for a record near a bound: on a virtual machine the precise wall clock can cost a
    /// quarter of a `send`.
    fn now_ms_coarse(&self) -> i64 {
        self.now_ms()
    }
}

/// How far [`Clock::now_ms_coarse`] may lag [`Clock::now_ms`]. Linux's coarse clock is the time
/// of the last timer tick (1 to 10 ms old); a second leaves room for a tick that runs late.
pub(crate) const COARSE_CLOCK_LAG_MS: i64 = 1_000;

/// The operating system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(since) => i64::try_from(since.as_millis()).unwrap_or(i64::MAX),
            // A clock set before 1970 is reported as negative milliseconds, as Java does.
            Err(before) => -i64::try_from(before.duration().as_millis()).unwrap_or(i64::MAX),
        }
    }

    /// `CLOCK_REALTIME_COARSE`: the wall clock as of the last timer tick, read from the vDSO
    /// without the time counter, several times cheaper than `now_ms` under a hypervisor.
    /// Through libc rather than rustix: rustix's own vDSO lookup crashes under valgrind.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[allow(
        clippy::useless_conversion,
        reason = "time_t and c_long are 32 bits on some targets"
    )]
    fn now_ms_coarse(&self) -> i64 {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `now` is a valid, writable timespec that outlives the call, and
        // CLOCK_REALTIME_COARSE is a clock id this target defines; clock_gettime writes only
        // `now`.
        if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut now) } != 0 {
            return self.now_ms();
        }
        // Before 1970 tv_sec is negative and tv_nsec still counts up within the second, so this
        // rounds down, never above what `now_ms` reports.
        i64::from(now.tv_sec)
            .saturating_mul(1_000)
            .saturating_add(i64::from(now.tv_nsec) / 1_000_000)
    }
}

/// A clock that moves only when told to (feature `sim`).
#[cfg(any(test, feature = "sim"))]
#[derive(Debug, Default)]
pub struct ManualClock {
    now_ms: AtomicI64,
}

#[cfg(any(test, feature = "sim"))]
impl ManualClock {
    /// A clock that reads `start_ms` until moved.
    pub fn new(start_ms: i64) -> Self {
        ManualClock {
            now_ms: AtomicI64::new(start_ms),
        }
    }

    /// Sets the time.
    pub fn set(&self, now_ms: i64) {
        self.now_ms.store(now_ms, Ordering::SeqCst);
    }

    /// Moves the time forward (or back, with a negative delta) and returns the new time.
    pub fn advance(&self, delta_ms: i64) -> i64 {
        self.now_ms.fetch_add(delta_ms, Ordering::SeqCst) + delta_ms
    }
}

#[cfg(any(test, feature = "sim"))]
impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.now_ms.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_clock_is_after_2020() {
        assert!(SystemClock.now_ms() > 1_577_836_800_000);
    }

    #[test]
    fn the_coarse_system_clock_is_never_ahead_and_at_most_the_lag_behind() {
        for _ in 0..1_000 {
            let coarse = SystemClock.now_ms_coarse();
            let precise = SystemClock.now_ms();
            assert!(coarse <= precise, "coarse {coarse} ahead of {precise}");
            assert!(
                precise - coarse <= COARSE_CLOCK_LAG_MS,
                "{precise} - {coarse}"
            );
        }
    }

    #[test]
    fn manual_clock_moves_only_when_told() {
        let clock = ManualClock::new(1_000);
        assert_eq!(clock.now_ms(), 1_000);
        assert_eq!(clock.advance(500), 1_500);
        clock.set(7);
        assert_eq!(clock.now_ms(), 7);
    }
}
