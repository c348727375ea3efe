//! The maintenance thread's work as methods (ARCHITECTURE.md §8): every
//! `retention.check.interval.ms` of the log's clock a retention pass
//! ([`Shared::enforce_retention`]) and, in a compacted log, a compaction pass if one is due
//! ([`Shared::compact_if_due`]); and producer expiry ([`Shared::remove_expired_producers`]) on
//! its own interval. [`MaintenanceSchedule`] says when each is next due; one round
//! ([`Shared::maintenance_round`]) runs what is due; the thread ([`maintenance_loop`]) waits for
//! the schedule's tick and runs a round, until the log closes or can do no more. On a
//! [`Workers`](crate::Workers) pool the round is two tasks, [`MaintenanceTask`]s: producer
//! expiry with retention (periodic lane), and compaction (long lane), each with its own
//! schedule, so that a long compaction pass delays no retention pass.

use std::ops::ControlFlow;
use std::time::Duration;

use crate::error::Error;
use crate::sync::{Arc, Mutex};
use crate::workers::{Lane, Next, Task};

use crate::log::{LogConfig, Shared};

/// When each maintenance task last ran and is next due, on the log's clock.
#[derive(Debug)]
pub(in crate::log) struct MaintenanceSchedule {
    /// `retention.check.interval.ms` (at least 1).
    pass_interval_ms: i64,
    /// `producer.id.expiration.check.interval.ms`.
    expiry_interval_ms: i64,
    last_pass_ms: i64,
    last_expiry_ms: i64,
}

impl MaintenanceSchedule {
    /// A schedule whose intervals count from `opened_ms`, the log's time at open (not from
    /// whenever the thread first runs: on a loaded machine that can be after the clock has
    /// moved on).
    pub(in crate::log) fn new(config: &LogConfig, opened_ms: i64) -> MaintenanceSchedule {
        MaintenanceSchedule {
            pass_interval_ms: config.retention_check_interval_ms.max(1),
            expiry_interval_ms: config.producer_id_expiration_check_interval_ms,
            last_pass_ms: opened_ms,
            last_expiry_ms: opened_ms,
        }
    }

    /// When the next retention pass (and compaction check) is due, on the log's clock.
    pub(in crate::log) fn pass_due_at(&self) -> i64 {
        self.last_pass_ms.saturating_add(self.pass_interval_ms)
    }

    /// When producer expiry is next due, on the log's clock.
    pub(in crate::log) fn expiry_due_at(&self) -> i64 {
        self.last_expiry_ms.saturating_add(self.expiry_interval_ms)
    }

    /// How often to look at the log's clock for what is due: the clock may be a manual one
    /// that moves only when a test moves it. Often enough to notice the pass interval, never
    /// busier than every 5 ms nor lazier than every 100 ms.
    pub(in crate::log) fn tick(&self) -> Duration {
        Duration::from_millis(u64::try_from(self.pass_interval_ms.clamp(5, 100)).unwrap_or(100))
    }

    /// Whether producer expiry is due at `now_ms`; if so it counts as run.
    fn take_expiry(&mut self, now_ms: i64) -> bool {
        let due = now_ms >= self.expiry_due_at();
        if due {
            self.last_expiry_ms = now_ms;
        }
        due
    }

    /// Whether a retention pass is due at `now_ms`; if so it counts as run.
    fn take_pass(&mut self, now_ms: i64) -> bool {
        let due = now_ms >= self.pass_due_at();
        if due {
            self.last_pass_ms = now_ms;
        }
        due
    }
}

/// Which parts of a maintenance round run: the thread runs them all; on a pool, retention (with
/// producer expiry) and compaction are separate tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::log) enum MaintenanceParts {
    /// Producer expiry, retention and compaction: the maintenance thread's round.
    All,
    /// Producer expiry and retention.
    Retention,
    /// Compaction only.
    Compaction,
}

impl Shared {
    /// One round of maintenance at `now_ms`: producer expiry if due (Kafka's
    /// producer-expiration task, on its own interval), then, if the pass interval has passed,
    /// a retention pass and, in a compacted log, a compaction pass if one is due (dirty ratio
    /// or max lag). A failed pass is logged (and counted, for compaction) and retried at the
    /// next interval. `Break` once the log is closed or poisoned: nothing can be deleted until
    /// it is reopened.
    pub(in crate::log) fn maintenance_round(
        &self,
        schedule: &mut MaintenanceSchedule,
        now_ms: i64,
        parts: MaintenanceParts,
    ) -> ControlFlow<()> {
        let retention = parts != MaintenanceParts::Compaction;
        let compaction = parts != MaintenanceParts::Retention;
        if retention && schedule.take_expiry(now_ms) {
            self.remove_expired_producers(now_ms);
        }
        if !schedule.take_pass(now_ms) {
            return ControlFlow::Continue(());
        }
        let interval_ms = schedule.pass_interval_ms;
        match retention.then(|| self.enforce_retention()) {
            None | Some(Ok(_)) => {}
            Some(Err(Error::Closed | Error::Poisoned)) => return ControlFlow::Break(()),
            Some(Err(error)) => log::warn!(
                "{}: retention pass failed (retried in {interval_ms} ms): {error}",
                self.dir.display()
            ),
        }
        if compaction && self.config.cleanup_policy.compacts() {
            match self.compact_if_due() {
                Ok(()) => {}
                Err(Error::Closed | Error::Poisoned) => return ControlFlow::Break(()),
                Err(error) => log::warn!(
                    "{}: compaction failed (retried in {interval_ms} ms): {error}",
                    self.dir.display()
                ),
            }
        }
        ControlFlow::Continue(())
    }
}

/// The maintenance thread: a round at each tick of its schedule, until the log closes (or can
/// do no more). `opened_ms` is the log's time at open: the first intervals count from it.
pub(in crate::log) fn maintenance_loop(shared: &Shared, opened_ms: i64) {
    let mut schedule = MaintenanceSchedule::new(&shared.config, opened_ms);
    while shared.maintenance.wait(schedule.tick()) {
        if shared
            .maintenance_round(&mut schedule, shared.clock.now_ms(), MaintenanceParts::All)
            .is_break()
        {
            return;
        }
    }
}

/// Maintenance as a task of a [`Workers`](crate::Workers) pool: `parts` of a round at each tick
/// of its own schedule, until the log closes (or can do no more).
#[derive(Debug)]
pub(in crate::log) struct MaintenanceTask {
    shared: Arc<Shared>,
    parts: MaintenanceParts,
    schedule: Mutex<MaintenanceSchedule>,
}

impl MaintenanceTask {
    /// `parts` of the maintenance of `shared`, its intervals counting from `opened_ms`.
    pub(in crate::log) fn new(
        shared: Arc<Shared>,
        parts: MaintenanceParts,
        opened_ms: i64,
    ) -> MaintenanceTask {
        let schedule = MaintenanceSchedule::new(&shared.config, opened_ms);
        MaintenanceTask {
            shared,
            parts,
            schedule: Mutex::new(schedule),
        }
    }

    /// How long after registration the first round runs.
    pub(in crate::log) fn first_run(&self) -> Duration {
        self.schedule.lock().tick()
    }
}

impl Task for MaintenanceTask {
    fn run(&self) -> Next {
        let mut schedule = self.schedule.lock();
        let now_ms = self.shared.clock.now_ms();
        match self
            .shared
            .maintenance_round(&mut schedule, now_ms, self.parts)
        {
            ControlFlow::Continue(()) => Next::After(schedule.tick()),
            ControlFlow::Break(()) => Next::Done,
        }
    }

    fn lane(&self) -> Lane {
        match self.parts {
            MaintenanceParts::Compaction => Lane::Long,
            MaintenanceParts::All | MaintenanceParts::Retention => Lane::Periodic,
        }
    }
}
