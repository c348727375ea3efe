//! The coordinator's timers as a task on the engine's pool of workers, beside the partitions'
//! retention and compaction: each run calls
//! [`TransactionCoordinator::tick`] with the engine's clock, which runs every timer whose
//! interval has passed.

use std::sync::{Arc, Weak};
use std::time::Duration;

use partlog::unstable::{Clock, Lane, Next, Task, TaskHandle};

use super::open::EngineShared;
use crate::txn::TransactionCoordinator;

/// The task; it holds the coordinator weakly, so that the engine's drop ends it.
pub(crate) struct CoordinatorTimers {
    coordinator: Weak<TransactionCoordinator>,
    clock: Arc<dyn Clock>,
    every: Duration,
}

impl CoordinatorTimers {
    /// Registers the timers of `coordinator` on the engine's pool; the first run comes after
    /// the shortest interval (recovery has just done what a first run would).
    pub(crate) fn register(
        shared: &EngineShared,
        coordinator: &Arc<TransactionCoordinator>,
    ) -> TaskHandle {
        let config = coordinator.config();
        let shortest = config
            .abort_timed_out_transaction_cleanup_interval_ms
            .min(config.remove_expired_transaction_cleanup_interval_ms);
        let every = Duration::from_millis(u64::try_from(shortest).unwrap_or(1).max(1));
        let task = Arc::new(CoordinatorTimers {
            coordinator: Arc::downgrade(coordinator),
            clock: Arc::clone(&shared.config.clock),
            every,
        });
        shared.workers.register(task as Arc<dyn Task>, every)
    }
}

impl Task for CoordinatorTimers {
    fn run(&self) -> Next {
        let Some(coordinator) = self.coordinator.upgrade() else {
            return Next::Done;
        };
        let report = coordinator.tick(self.clock.now_ms());
        for (id, error) in &report.failed {
            log::warn!(
                "transactional id {id:?}: a coordinator timer failed, retried next run: {error}"
            );
        }
        Next::After(self.every)
    }

    fn lane(&self) -> Lane {
        Lane::Periodic
    }
}
