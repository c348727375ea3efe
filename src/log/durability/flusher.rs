//! The flusher's work off the append path (ARCHITECTURE.md §6): the sync a roll, a future or an
//! interval asks for, the sealed segments' syncs, the recovery-point checkpoints, and the
//! removal of unpinned `.deleted` files. One round is one method, [`Shared::flusher_round`],
//! with its [`FlusherSchedule`]; the flusher thread ([`flusher_loop`]) waits for a request or
//! the schedule's tick and runs a round, until the log closes. On a [`Workers`](crate::Workers)
//! pool, [`FlusherTask`] runs the same round in the sync lane, woken by the same requests.

use std::time::Duration;

use crate::error::Error;
use crate::sync::{Arc, Mutex};
use crate::workers::{Lane, Next, Task};

use super::state::FlusherWork;
use crate::log::{FlushPolicy, LogConfig, Shared};

/// What the flusher keeps from round to round: when it last flushed on its interval and last
/// wrote a recovery point, on the log's clock, and how often it looks at that clock.
#[derive(Debug)]
pub(in crate::log) struct FlusherSchedule {
    tick: Duration,
    last_flush_ms: i64,
    last_checkpoint_ms: i64,
}

impl FlusherSchedule {
    /// A schedule whose intervals count from `now_ms` (the open).
    pub(in crate::log) fn new(config: &LogConfig, now_ms: i64) -> FlusherSchedule {
        FlusherSchedule {
            tick: flusher_tick(config),
            last_flush_ms: now_ms,
            last_checkpoint_ms: now_ms,
        }
    }

    /// When the next round is due without a request: within this long. The interval flush and
    /// the recovery point are due on the log's clock, which may be a manual one that moves
    /// only when a test moves it, so the answer is how often to look, not an instant.
    pub(in crate::log) fn next_due(&self) -> Duration {
        self.tick
    }
}

impl Shared {
    /// One round of the flusher: a group-commit sync when a roll or a future asked for one or
    /// `flush.ms` is due, the sealed segments' syncs after a roll, a recovery point when due,
    /// and the reaping of unpinned `.deleted` files. Failures are logged (a failed sync has
    /// poisoned the log); a poisoned log's round does nothing.
    pub(in crate::log) fn flusher_round(&self, schedule: &mut FlusherSchedule, work: FlusherWork) {
        let sync_due = work.roll_pending || work.sync_requested;
        if self.durability.is_poisoned() {
            return;
        }
        let now = self.clock.now_ms();
        let end = self.view.log_end();
        let interval_due = match self.config.flush_policy {
            FlushPolicy::Interval(every) => {
                now.saturating_sub(schedule.last_flush_ms)
                    >= i64::try_from(every.as_millis()).unwrap_or(i64::MAX)
            }
            _ => false,
        };
        if (sync_due || interval_due) && end > self.durability.durable_offset() {
            match self.sync_through(end - 1) {
                // A truncation overtook the flush: nothing is left to sync.
                Ok(()) | Err(Error::Truncated { .. }) => {}
                Err(error) => {
                    log::error!("background flush of {} failed: {error}", self.dir.display());
                    return;
                }
            }
            schedule.last_flush_ms = now;
        } else if interval_due {
            schedule.last_flush_ms = now;
        }
        // A roll signals before the append that rolled publishes its batch, so the flusher can
        // find nothing above the durable offset and skip the sync above; the sealed segment's
        // indexes would then wait for the next append's sync, for ever on an idle log (found by
        // tests/reliability_concurrency.rs under load). An empty list makes this a no-op.
        if work.roll_pending
            && let Err(error) = self.sync_sealed_segments()
        {
            log::error!(
                "syncing the sealed segments of {} failed: {error}",
                self.dir.display()
            );
            return;
        }
        if let Err(error) = self.maybe_write_recovery_point(now, &mut schedule.last_checkpoint_ms) {
            log::warn!(
                "recovery-point checkpoint of {} failed: {error}",
                self.dir.display()
            );
        }
        self.reap_unpinned();
    }
}

/// The flusher thread: a round at each request, or at each tick of its schedule, until the log
/// closes.
pub(in crate::log) fn flusher_loop(shared: &Shared) {
    let mut schedule = FlusherSchedule::new(&shared.config, shared.clock.now_ms());
    while let Some(work) = shared.durability.next_flusher_work(schedule.next_due()) {
        shared.flusher_round(&mut schedule, work);
    }
}

/// The flusher as a task of a [`Workers`](crate::Workers) pool: a round at each request or
/// tick, in the sync lane (first, on any thread).
#[derive(Debug)]
pub(in crate::log) struct FlusherTask {
    shared: Arc<Shared>,
    schedule: Mutex<FlusherSchedule>,
}

impl FlusherTask {
    /// The flusher of `shared`, its intervals counting from now.
    pub(in crate::log) fn new(shared: Arc<Shared>) -> FlusherTask {
        let schedule = FlusherSchedule::new(&shared.config, shared.clock.now_ms());
        FlusherTask {
            shared,
            schedule: Mutex::new(schedule),
        }
    }

    /// How long after registration the first round runs.
    pub(in crate::log) fn first_run(&self) -> Duration {
        self.schedule.lock().next_due()
    }
}

impl Task for FlusherTask {
    fn run(&self) -> Next {
        let Some(work) = self.shared.durability.take_flusher_work() else {
            return Next::Done;
        };
        let mut schedule = self.schedule.lock();
        self.shared.flusher_round(&mut schedule, work);
        Next::After(schedule.next_due())
    }

    fn lane(&self) -> Lane {
        Lane::Sync
    }
}

/// How often the flusher wakes to look at the clock: often enough for the shortest interval it
/// serves, never busier than every 5 ms nor lazier than every 100 ms.
fn flusher_tick(config: &LogConfig) -> Duration {
    let mut tick = Duration::from_millis(100).min(Duration::from_millis(config.recovery_point_ms));
    if let FlushPolicy::Interval(every) = config.flush_policy {
        tick = tick.min(every);
    }
    tick.max(Duration::from_millis(5))
}
