//! The maintenance thread's work as methods (ARCHITECTURE.md §8): every
//! `retention.check.interval.ms` of the log's clock a retention pass
//! ([`Shared::enforce_retention`]) and, in a compacted log, a compaction pass if one is due
//! ([`Shared::compact_if_due`]); and producer expiry ([`Shared::remove_expired_producers`]) on
//! its own interval. [`MaintenanceSchedule`] says when each is next due; one round
//! ([`Shared::maintenance_round`]) runs what is due; the thread ([`maintenance_loop`]) waits for
//! the schedule's tick and runs a round, until the log closes or can do no more.

use std::ops::ControlFlow;
use std::time::Duration;

use crate::error::Error;

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
    ) -> ControlFlow<()> {
        if schedule.take_expiry(now_ms) {
            self.remove_expired_producers(now_ms);
        }
        if !schedule.take_pass(now_ms) {
            return ControlFlow::Continue(());
        }
        let interval_ms = schedule.pass_interval_ms;
        match self.enforce_retention() {
            Ok(_) => {}
            Err(Error::Closed | Error::Poisoned) => return ControlFlow::Break(()),
            Err(error) => log::warn!(
                "{}: retention pass failed (retried in {interval_ms} ms): {error}",
                self.dir.display()
            ),
        }
        if self.config.cleanup_policy.compacts() {
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
            .maintenance_round(&mut schedule, shared.clock.now_ms())
            .is_break()
        {
            return;
        }
    }
}
