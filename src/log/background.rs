//! [`Background`]: what runs a log's work off the caller's threads. Without a
//! [`Workers`](crate::Workers) pool, its own flusher thread (a writable log) and maintenance
//! thread (when `retention.check.interval.ms` is set), as ever; with one, the same work as
//! tasks on the pool: the flusher, retention with producer expiry, and compaction (a compacted
//! log). Closing stops each and waits for a run under way, so nothing runs on a closed log.

use crate::sync::thread::JoinHandle;
use crate::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::workers::{Task, TaskHandle};

use super::Shared;
use super::durability::flusher::{FlusherTask, flusher_loop};
use super::maintenance::schedule::{MaintenanceParts, MaintenanceTask, maintenance_loop};

/// One kind of background work of a log: a thread, pool tasks, or nothing.
#[derive(Debug, Default)]
enum Runner {
    #[default]
    None,
    Thread(JoinHandle<()>),
    Pool(Vec<TaskHandle>),
}

/// See the [module docs](self).
#[derive(Debug, Default)]
pub(super) struct Background {
    flusher: Mutex<Runner>,
    maintenance: Mutex<Runner>,
}

impl Background {
    /// Starts the flusher (a writable log) and maintenance (when `retention.check.interval.ms`
    /// is set) of `shared`, on its pool or on threads of their own. On failure what started
    /// is left for [`stop`](Self::stop_flusher) to stop.
    pub(super) fn start(&self, shared: &Arc<Shared>) -> Result<()> {
        if shared.read_only {
            return Ok(());
        }
        let dir = shared.dir.as_path();
        // The first interval counts from the open, not from whenever the work first runs: on a
        // loaded machine that can be after the clock has moved on.
        let opened_ms = shared.clock.now_ms();
        let maintained = shared.config.runs_maintenance();
        if let Some(workers) = &shared.config.workers {
            let flusher = Arc::new(FlusherTask::new(Arc::clone(shared)));
            let first = flusher.first_run();
            let handle = workers.register(flusher as Arc<dyn Task>, first);
            shared.durability.set_pool_flusher(handle.clone());
            *self.flusher.lock() = Runner::Pool(vec![handle]);
            if maintained {
                let mut parts = vec![MaintenanceParts::Retention];
                if shared.config.cleanup_policy.compacts() {
                    parts.push(MaintenanceParts::Compaction);
                }
                let handles = parts
                    .into_iter()
                    .map(|part| {
                        let task =
                            Arc::new(MaintenanceTask::new(Arc::clone(shared), part, opened_ms));
                        let first = task.first_run();
                        workers.register(task as Arc<dyn Task>, first)
                    })
                    .collect();
                *self.maintenance.lock() = Runner::Pool(handles);
            }
            return Ok(());
        }
        let flusher_shared = Arc::clone(shared);
        let flusher = crate::sync::thread::Builder::new()
            .name(format!("partlog-flusher:{}", dir.display()))
            .spawn(move || flusher_loop(&flusher_shared))
            .map_err(|e| Error::io(dir, e))?;
        *self.flusher.lock() = Runner::Thread(flusher);
        if maintained {
            let maintenance_shared = Arc::clone(shared);
            let maintenance = crate::sync::thread::Builder::new()
                .name(format!("partlog-maintenance:{}", dir.display()))
                .spawn(move || maintenance_loop(&maintenance_shared, opened_ms))
                .map_err(|e| Error::io(dir, e))?;
            *self.maintenance.lock() = Runner::Thread(maintenance);
        }
        Ok(())
    }

    /// Stops maintenance and waits for a pass under way.
    pub(super) fn stop_maintenance(&self, shared: &Shared) {
        shared.maintenance.stop();
        stop(&self.maintenance, shared, "maintenance");
    }

    /// Stops the flusher and waits for a round under way.
    pub(super) fn stop_flusher(&self, shared: &Shared) {
        shared.durability.stop_flusher();
        stop(&self.flusher, shared, "flusher");
    }
}

/// Joins `runner`'s thread or cancels its tasks (each waits for a run under way).
fn stop(runner: &Mutex<Runner>, shared: &Shared, what: &str) {
    let taken = std::mem::take(&mut *runner.lock());
    match taken {
        Runner::None => {}
        Runner::Thread(handle) => {
            if handle.join().is_err() {
                log::error!("the {what} thread of {} panicked", shared.dir.display());
            }
        }
        Runner::Pool(tasks) => tasks.iter().for_each(TaskHandle::cancel),
    }
}
