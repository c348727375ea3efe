//! [`Durability`]: what the log's threads share to make appends durable: the group commit (the
//! durable offset, the leader/follower sync, the poison), the flusher's signal, and how many
//! appended bytes the last recovery point covered.

use std::sync::OnceLock;
use std::time::Duration;

use crate::error::Result;
use crate::sync::atomic::{AtomicU64, Ordering};
use crate::sync::{Condvar, Mutex};
use crate::workers::TaskHandle;

use super::group_commit::GroupCommit;
use crate::log::segments::watermark::Watermark;

/// What the flusher is asked to do, besides its timed work.
#[derive(Debug, Default)]
struct FlusherSignal {
    stop: bool,
    roll_pending: bool,
    /// A future form of `wait_durable` (or the batching writer) asked for a group-commit sync:
    /// futures must not block their executor's thread, so the flusher leads the sync for them.
    sync_requested: bool,
}

/// The requests a flusher round found when it woke (see [`Durability::next_flusher_work`]).
#[derive(Debug, Clone, Copy, Default)]
pub(in crate::log) struct FlusherWork {
    /// A roll sealed a segment that waits for its sync.
    pub(in crate::log) roll_pending: bool,
    /// A future (or the batching writer) asked for a group-commit sync.
    pub(in crate::log) sync_requested: bool,
}

/// See the [module docs](self).
#[derive(Debug)]
pub(in crate::log) struct Durability {
    commit: GroupCommit,
    /// Taken last, never held while taking another lock (ARCHITECTURE.md §8).
    flusher: Mutex<FlusherSignal>,
    flusher_wake: Condvar,
    /// The appended bytes the last recovery point covered: the flusher writes the next one
    /// once `recovery.point.bytes` more are durable.
    bytes_at_last_checkpoint: AtomicU64,
    /// The flusher's task, when a [`Workers`](crate::Workers) pool runs it: woken by each
    /// request, as the flusher thread's condvar is.
    pool_flusher: OnceLock<TaskHandle>,
    /// The file system of the log's directory, once the log joined its pool's gathered syncs
    /// (`gather.rs`).
    gathered_file_system: OnceLock<u64>,
}

impl Durability {
    /// Every offset below `durable_offset` durable; the group commit's gathering and spinning
    /// bounds.
    pub(in crate::log) fn new(
        durable_offset: i64,
        max_gather: Duration,
        max_spin: Duration,
    ) -> Durability {
        Durability {
            commit: GroupCommit::new(durable_offset, max_gather, max_spin),
            flusher: Mutex::new(FlusherSignal::default()),
            flusher_wake: Condvar::new(),
            bytes_at_last_checkpoint: AtomicU64::new(0),
            pool_flusher: OnceLock::new(),
            gathered_file_system: OnceLock::new(),
        }
    }

    /// Every offset below it has been fsynced with its directory entry.
    pub(in crate::log) fn durable_offset(&self) -> i64 {
        self.commit.durable_offset()
    }

    /// The durable offset as a watermark, for waits, futures and wake-ups.
    pub(in crate::log) fn durable_mark(&self) -> &Watermark {
        self.commit.durable_watermark()
    }

    /// Whether a failed fsync poisoned the log.
    pub(in crate::log) fn is_poisoned(&self) -> bool {
        self.commit.is_poisoned()
    }

    /// Poisons the log: nothing more is reported durable, and writes are refused.
    pub(in crate::log) fn poison(&self) {
        self.commit.poison();
    }

    /// Blocks until `offset` is durable, joining or leading a group-commit `sync`
    /// ([`GroupCommit::wait_durable`]).
    pub(in crate::log) fn wait_durable(
        &self,
        offset: i64,
        sync: impl Fn() -> Result<i64>,
    ) -> Result<()> {
        self.commit.wait_durable(offset, sync)
    }

    /// The file system the log's syncs are gathered on, if they are (`gather.rs`).
    pub(in crate::log) fn gathered_file_system(&self) -> &OnceLock<u64> {
        &self.gathered_file_system
    }

    /// The truncation generation ([`GroupCommit::generation`]).
    pub(in crate::log) fn generation(&self) -> u64 {
        self.commit.generation()
    }

    /// A sync led elsewhere made everything below `durable_end` durable
    /// ([`GroupCommit::advance_by_other_sync`]).
    pub(in crate::log) fn advance_by_other_sync(&self, durable_end: i64, generation: u64) {
        self.commit.advance_by_other_sync(durable_end, generation);
    }

    /// A truncation to `end` ([`GroupCommit::truncate`]).
    pub(in crate::log) fn truncate(&self, end: i64) {
        self.commit.truncate(end);
    }

    /// The log restarted empty at `start` ([`GroupCommit::restart_at`]).
    pub(in crate::log) fn restart_at(&self, start: i64) {
        self.commit.restart_at(start);
    }

    /// What another process made durable, for a live reader ([`GroupCommit::observe`]).
    pub(in crate::log) fn observe(&self, durable: i64) {
        self.commit.observe(durable);
    }

    /// Asks the flusher to lead a group-commit sync now.
    pub(in crate::log) fn request_sync(&self) {
        self.flusher.lock().sync_requested = true;
        self.flusher_wake.notify_all();
        self.wake_pool_flusher();
    }

    /// Tells the flusher that a roll left a sealed segment (and a new name in the directory)
    /// to sync.
    pub(in crate::log) fn signal_roll(&self) {
        self.flusher.lock().roll_pending = true;
        self.flusher_wake.notify_all();
        self.wake_pool_flusher();
    }

    /// Wakes the flusher's pool task, if a pool runs it (after the signal's lock is released:
    /// that lock is taken last).
    fn wake_pool_flusher(&self) {
        if let Some(task) = self.pool_flusher.get() {
            task.wake();
        }
    }

    /// Hands the flusher's pool task to the requests that wake it.
    pub(in crate::log) fn set_pool_flusher(&self, task: TaskHandle) {
        // Set once, at open, before anyone can ask for a sync.
        let _ = self.pool_flusher.set(task);
    }

    /// The requests since the last call, without waiting: `None` once the flusher is told to
    /// stop (the pool's form of [`next_flusher_work`](Self::next_flusher_work)).
    pub(in crate::log) fn take_flusher_work(&self) -> Option<FlusherWork> {
        let mut signal = self.flusher.lock();
        if signal.stop {
            return None;
        }
        Some(FlusherWork {
            roll_pending: std::mem::take(&mut signal.roll_pending),
            sync_requested: std::mem::take(&mut signal.sync_requested),
        })
    }

    /// Tells the flusher to stop.
    pub(in crate::log) fn stop_flusher(&self) {
        self.flusher.lock().stop = true;
        self.flusher_wake.notify_all();
    }

    /// Waits until the flusher is asked for something or `tick` passes, and takes the
    /// requests: `None` once it is told to stop.
    pub(in crate::log) fn next_flusher_work(&self, tick: Duration) -> Option<FlusherWork> {
        let mut signal = self.flusher.lock();
        if !signal.stop && !signal.roll_pending && !signal.sync_requested {
            self.flusher_wake.wait_for(&mut signal, tick);
        }
        if signal.stop {
            return None;
        }
        Some(FlusherWork {
            roll_pending: std::mem::take(&mut signal.roll_pending),
            sync_requested: std::mem::take(&mut signal.sync_requested),
        })
    }

    /// The appended bytes the last recovery point covered.
    pub(in crate::log) fn checkpointed_bytes(&self) -> u64 {
        self.bytes_at_last_checkpoint.load(Ordering::Relaxed)
    }

    /// Records that a recovery point covered `appended` bytes.
    pub(in crate::log) fn note_checkpointed_bytes(&self, appended: u64) {
        self.bytes_at_last_checkpoint
            .store(appended, Ordering::Relaxed);
    }
}
