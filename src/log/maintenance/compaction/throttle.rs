//! [`IoThrottle`]: the cap on a log's compaction I/O, Kafka's
//! `log.cleaner.io.max.bytes.per.second` (its cleaner's `Throttler`): a pass that has read and
//! written faster than the cap over the last window sleeps until it is back under it, so that
//! a long pass leaves the disk to the appends and syncs of the logs beside it.

use std::time::{Duration, Instant};

use crate::sync::Mutex;

/// How long a window of observed bytes runs before the rate is checked: long enough that a
/// sleep is rarely a few microseconds, short enough that a burst is caught early (Kafka's is
/// 300 ms).
const WINDOW: Duration = Duration::from_millis(100);

/// The cap on one log's compaction I/O, in bytes a second; unlimited (Kafka's default) when
/// the cap is infinite or `f64::MAX`.
#[derive(Debug)]
pub(in crate::log) struct IoThrottle {
    bytes_per_second: f64,
    window: Mutex<Window>,
}

#[derive(Debug)]
struct Window {
    started: Instant,
    bytes: f64,
}

impl IoThrottle {
    /// A throttle at `bytes_per_second` (validated by the config: above 0).
    pub(in crate::log) fn new(bytes_per_second: f64) -> IoThrottle {
        IoThrottle {
            bytes_per_second,
            window: Mutex::new(Window {
                started: Instant::now(),
                bytes: 0.0,
            }),
        }
    }

    fn unlimited(&self) -> bool {
        self.bytes_per_second >= f64::MAX
    }

    /// Counts `bytes` of compaction I/O, and sleeps if the window's rate is over the cap.
    pub(in crate::log) fn pace(&self, bytes: u64) {
        if self.unlimited() {
            return;
        }
        if let Some(pause) = self.pause_after(bytes, Instant::now()) {
            std::thread::sleep(pause);
        }
    }

    /// The sleep that brings the window at `now`, with `bytes` more, back to the cap, if it is
    /// over it and the window is over; a window ends at the check (so a sleep is counted in
    /// the next one's start).
    fn pause_after(&self, bytes: u64, now: Instant) -> Option<Duration> {
        let mut window = self.window.lock();
        window.bytes += bytes as f64;
        let elapsed = now.saturating_duration_since(window.started);
        if elapsed < WINDOW {
            return None;
        }
        let wanted = Duration::from_secs_f64(window.bytes / self.bytes_per_second);
        let pause = wanted.checked_sub(elapsed).filter(|pause| !pause.is_zero());
        window.started = now + pause.unwrap_or_default();
        window.bytes = 0.0;
        pause
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_over_the_cap_sleeps_until_it_is_back_under() {
        let throttle = IoThrottle::new(1_000_000.0);
        let start = throttle.window.lock().started;
        // 50 kB in 10 ms: the window is not over, nothing to check yet.
        assert_eq!(
            throttle.pause_after(50_000, start + Duration::from_millis(10)),
            None
        );
        // 250 kB in 100 ms is 2.5 MB/s: sleep until 250 ms.
        assert_eq!(
            throttle.pause_after(200_000, start + WINDOW),
            Some(Duration::from_millis(150))
        );
        // The next window starts after the sleep: 50 kB in 100 ms is under the cap.
        let next = start + Duration::from_millis(250);
        assert_eq!(throttle.pause_after(50_000, next + WINDOW), None);
    }

    #[test]
    fn an_unlimited_throttle_never_sleeps() {
        let throttle = IoThrottle::new(f64::MAX);
        assert!(throttle.unlimited());
        // pace returns at once however much it is told.
        throttle.pace(u64::MAX);
        assert!(IoThrottle::new(f64::INFINITY).unlimited());
    }
}
