//! The coordinator's timers (Kafka's scheduled tasks of `TransactionCoordinator` and
//! `TransactionStateManager`), as plain methods: [`tick`](TransactionCoordinator::tick) runs
//! each when its interval has passed; the engine's maintenance scheduler calls it beside
//! retention and compaction, and tests call it with the time they choose.
//!
//! - Every `transaction.abort.timed.out.transaction.cleanup.interval.ms`: each `Ongoing`
//!   transaction past `txn_start_timestamp + txn_timeout_ms`, with no transition in flight, is
//!   aborted through a fence (the epoch goes up, so the late producer is fenced), and each
//!   decided transaction whose markers failed earlier gets them again and completes.
//! - Every `transaction.remove.expired.transaction.cleanup.interval.ms`: each id in `Empty`,
//!   `CompleteCommit` or `CompleteAbort` unchanged for `transactional.id.expiration.ms` is
//!   removed: a tombstone in `__transaction_state`, and the cache forgets it.

use partlog::Error;

use super::coordinator::{TransactionCoordinator, TransactionResult, lock_timers};
use super::state::TransactionState;
use super::state_manager::lock;

/// When each timer runs next; `None` until its first run, which the first `tick` makes.
#[derive(Debug, Default)]
pub(super) struct TimerDeadlines {
    abort_timed_out: Option<i64>,
    remove_expired: Option<i64>,
}

/// What a run of the timers did, by transactional id.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct TimerReport {
    /// The ids whose timed-out transaction was aborted.
    pub aborted: Vec<String>,
    /// The ids whose decided transaction got its markers and completed.
    pub completed: Vec<String>,
    /// The ids that expired.
    pub expired: Vec<String>,
    /// The ids a timer could not handle, and why; the next run tries again.
    pub failed: Vec<(String, Error)>,
}

impl TransactionCoordinator {
    /// Runs the timers whose interval has passed at `now_ms` (every timer at the first call).
    pub fn tick(&self, now_ms: i64) -> TimerReport {
        let (abort, expire) =
            {
                let mut deadlines = lock_timers(&self.timers);
                let abort = deadlines.abort_timed_out.is_none_or(|at| now_ms >= at);
                if abort {
                    deadlines.abort_timed_out = Some(now_ms.saturating_add(
                        self.config.abort_timed_out_transaction_cleanup_interval_ms,
                    ));
                }
                let expire = deadlines.remove_expired.is_none_or(|at| now_ms >= at);
                if expire {
                    deadlines.remove_expired = Some(now_ms.saturating_add(
                        self.config.remove_expired_transaction_cleanup_interval_ms,
                    ));
                }
                (abort, expire)
            };
        let mut report = TimerReport::default();
        if abort {
            self.abort_timed_out_transactions(now_ms, &mut report);
            self.complete_decided_transactions(&mut report);
        }
        if expire {
            self.remove_expired_transactional_ids(now_ms, &mut report);
        }
        report
    }

    /// Aborts, through a fence, every `Ongoing` transaction whose timeout passed before
    /// `now_ms` and has no transition in flight (Kafka's `abortTimedOutTransactions`).
    pub fn abort_timed_out_transactions(&self, now_ms: i64, report: &mut TimerReport) {
        for entry in self.state.entries() {
            let (id, fence) = {
                let mut metadata = lock(&entry);
                let timed_out = metadata.state == TransactionState::Ongoing
                    && metadata.pending_state.is_none()
                    && metadata
                        .txn_start_timestamp
                        .saturating_add(i64::from(metadata.txn_timeout_ms))
                        < now_ms;
                if !timed_out {
                    continue;
                }
                let id = metadata.transactional_id.clone();
                match metadata.prepare_fence_producer_epoch() {
                    Ok(fence) => (id, fence),
                    Err(error) => {
                        report.failed.push((id, error));
                        continue;
                    }
                }
            };
            match self.abort_by_fence(&id, &entry, &fence) {
                Ok(()) => report.aborted.push(id),
                Err(error) => report.failed.push((id, error)),
            }
        }
    }

    /// Writes the markers of every decided transaction (`PrepareCommit`, `PrepareAbort`) with
    /// no transition in flight, and completes it: after recovery, or after a marker failed.
    pub fn complete_decided_transactions(&self, report: &mut TimerReport) {
        for entry in self.state.entries() {
            let (id, result) = {
                let metadata = lock(&entry);
                let result = match metadata.state {
                    TransactionState::PrepareCommit => TransactionResult::Commit,
                    TransactionState::PrepareAbort => TransactionResult::Abort,
                    _ => continue,
                };
                if metadata.pending_state.is_some() {
                    continue;
                }
                (metadata.transactional_id.clone(), result)
            };
            match self.write_markers_and_complete(&id, &entry, result) {
                Ok(()) => report.completed.push(id),
                Err(error) => report.failed.push((id, error)),
            }
        }
    }

    /// Expires every id with no transaction in progress and no transition in flight whose
    /// state last changed `transactional.id.expiration.ms` or more before `now_ms` (Kafka's
    /// `removeExpiredTransactionalIds`): its tombstone is written, durably, then the cache
    /// forgets it.
    pub fn remove_expired_transactional_ids(&self, now_ms: i64, report: &mut TimerReport) {
        let expiration = self.config.transactional_id_expiration_ms;
        for entry in self.state.entries() {
            let (id, transit) = {
                let mut metadata = lock(&entry);
                let expired = metadata.state.is_expiration_allowed()
                    && metadata.pending_state.is_none()
                    && metadata.txn_last_update_timestamp <= now_ms.saturating_sub(expiration);
                if !expired {
                    continue;
                }
                let id = metadata.transactional_id.clone();
                match metadata.prepare_dead() {
                    Ok(transit) => (id, transit),
                    Err(error) => {
                        report.failed.push((id, error));
                        continue;
                    }
                }
            };
            match self.state.append_and_complete(&id, &entry, &transit) {
                Ok(()) => report.expired.push(id),
                Err(error) => report.failed.push((id, error)),
            }
        }
    }
}
