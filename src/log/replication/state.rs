//! [`Replication`]: the log's replication state (ARCHITECTURE.md §11): the leader-epoch cache,
//! the role that decides which epoch client appends stamp, and the high watermark.
//!
//! The role and the high watermark are written under the writer mutex and read without it;
//! the cache has a lock of its own, taken after the writer mutex and never before it.

use crate::error::{Error, Result};
use crate::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use crate::sync::{Mutex, MutexGuard};

use super::leader_epoch::{LeaderEpochFileCache, UNDEFINED_EPOCH};
use crate::log::segments::watermark::Watermark;

/// The role of a log that leads no epoch and follows no leader: client appends stamp -1.
const ROLE_BARE: i64 = -1;

/// The role of a follower: client appends are refused.
const ROLE_FOLLOWER: i64 = -2;

/// See the [module docs](self).
#[derive(Debug)]
pub(in crate::log) struct Replication {
    /// The leader-epoch cache (`leader_epoch.rs`).
    leader_epochs: Mutex<LeaderEpochFileCache>,
    /// Which epoch client appends stamp: [`ROLE_BARE`], [`ROLE_FOLLOWER`], or the leader epoch
    /// (≥ 0).
    role: AtomicI64,
    /// The high watermark once it was first set (`high_watermark_set`); until then the log end
    /// offset stands for it.
    high_watermark: Watermark,
    high_watermark_set: AtomicBool,
}

impl Replication {
    /// A bare log's state with `leader_epochs`; the high watermark follows the log end, which
    /// is `log_end` now.
    pub(in crate::log) fn new(leader_epochs: LeaderEpochFileCache, log_end: i64) -> Replication {
        Replication {
            leader_epochs: Mutex::new(leader_epochs),
            role: AtomicI64::new(ROLE_BARE),
            high_watermark: Watermark::new(log_end),
            high_watermark_set: AtomicBool::new(false),
        }
    }

    /// The leader-epoch cache, under its lock.
    pub(in crate::log) fn epochs(&self) -> MutexGuard<'_, LeaderEpochFileCache> {
        self.leader_epochs.lock()
    }

    /// Records that `epoch` wrote a batch at `base_offset` (Kafka's assign on append). A
    /// negative epoch is no epoch and changes nothing.
    pub(in crate::log) fn assign_epoch(&self, epoch: i32, base_offset: i64) -> Result<()> {
        if epoch < 0 {
            return Ok(());
        }
        self.leader_epochs.lock().assign(epoch, base_offset)?;
        Ok(())
    }

    /// The epoch client appends stamp as a leader, `None` for a bare log or a follower.
    pub(in crate::log) fn leader_epoch(&self) -> Option<i32> {
        let role = self.role.load(Ordering::Acquire);
        (role >= 0).then(|| i32::try_from(role).ok()).flatten()
    }

    /// Client appends stamp `epoch` from now on (under the writer mutex).
    pub(in crate::log) fn lead(&self, epoch: i32) {
        self.role.store(i64::from(epoch), Ordering::Release);
    }

    /// Client appends are refused from now on (under the writer mutex).
    pub(in crate::log) fn follow(&self) {
        self.role.store(ROLE_FOLLOWER, Ordering::Release);
    }

    /// The epoch a client append stamps, or [`Error::NotLeaderOrFollower`] naming `log` for a
    /// follower. Called under the writer mutex.
    pub(in crate::log) fn client_append_epoch(&self, log: &std::path::Path) -> Result<i32> {
        match self.role.load(Ordering::Acquire) {
            ROLE_FOLLOWER => Err(Error::NotLeaderOrFollower {
                why: format!(
                    "{} is a follower: only append_as_follower writes to it",
                    log.display()
                ),
            }),
            role => Ok(i32::try_from(role)
                .unwrap_or(UNDEFINED_EPOCH)
                .max(UNDEFINED_EPOCH)),
        }
    }

    /// The high watermark once it was first set, `None` before.
    pub(in crate::log) fn high_watermark_if_set(&self) -> Option<i64> {
        self.high_watermark_set
            .load(Ordering::Acquire)
            .then(|| self.high_watermark.get())
    }

    /// The high watermark as readers see it: the set value, or `readable_end` until one is
    /// set, and never above `readable_end`.
    pub(in crate::log) fn high_watermark(&self, readable_end: i64) -> i64 {
        match self.high_watermark_if_set() {
            Some(high_watermark) => high_watermark.min(readable_end),
            None => readable_end,
        }
    }

    /// What a reader bounded by the high watermark waits on: `log_end` until the high
    /// watermark is first set.
    pub(in crate::log) fn mark<'a>(&'a self, log_end: &'a Watermark) -> &'a Watermark {
        if self.high_watermark_set.load(Ordering::Acquire) {
            &self.high_watermark
        } else {
            log_end
        }
    }

    /// The high watermark once the log ends at `next_offset` (under the writer mutex).
    pub(in crate::log) fn high_watermark_at(&self, next_offset: i64) -> i64 {
        self.high_watermark_if_set().unwrap_or(next_offset)
    }

    /// Sets the high watermark to `value` (under the writer mutex): set from now on.
    pub(in crate::log) fn publish(&self, value: i64) {
        self.high_watermark_set.store(true, Ordering::Release);
        self.high_watermark.set(value);
    }

    /// After a truncation to `new_end`: a set high watermark above it comes down to it
    /// (Kafka's follower sets `HW = min(HW, LEO)`).
    pub(in crate::log) fn lower_to(&self, new_end: i64) {
        if self.high_watermark_if_set().is_some_and(|hw| hw > new_end) {
            self.high_watermark.set(new_end);
        }
    }

    /// After the log restarted empty at `start`: a set high watermark moves there.
    pub(in crate::log) fn restart_at(&self, start: i64) {
        if self.high_watermark_set.load(Ordering::Acquire) {
            self.high_watermark.set(start);
        }
    }
}
