//! [`Maintenance`]: what the maintenance passes share: the lock that runs retention passes one
//! at a time, the cleaner's memory between compaction passes ([`CleanerState`], behind the
//! lock that runs compaction passes one at a time), compaction's counters
//! ([`CompactionStatus`]), and the stop signal of the maintenance thread.

use std::time::Duration;

use crate::sync::atomic::{AtomicU64, Ordering};
use crate::sync::{Condvar, Mutex, MutexGuard};

use super::compaction::throttle::IoThrottle;

/// See the [module docs](self).
#[derive(Debug)]
pub(in crate::log) struct Maintenance {
    /// Held for a whole retention pass: passes run one at a time.
    retention_pass: Mutex<()>,
    /// Held by a compaction pass (one pass at a time), with what passes remember.
    cleaner: Mutex<CleanerState>,
    /// Compaction's counters, readable while a pass runs.
    status: CompactionStatus,
    /// The cap on the passes' I/O (`log.cleaner.io.max.bytes.per.second`).
    cleaner_io: IoThrottle,
    /// Set by `close()` to stop the maintenance thread; taken last (ARCHITECTURE.md §8).
    stop: Mutex<bool>,
    wake: Condvar,
}

impl Maintenance {
    /// Nothing run yet; the cleaner starts from `first_dirty_offset` (the cleaner checkpoint's),
    /// its I/O capped at `cleaner_io_bytes_per_second`.
    pub(in crate::log) fn new(
        first_dirty_offset: i64,
        cleaner_io_bytes_per_second: f64,
    ) -> Maintenance {
        Maintenance {
            retention_pass: Mutex::new(()),
            cleaner: Mutex::new(CleanerState {
                first_dirty_offset,
                truncations_seen: 0,
            }),
            status: CompactionStatus::default(),
            cleaner_io: IoThrottle::new(cleaner_io_bytes_per_second),
            stop: Mutex::new(false),
            wake: Condvar::new(),
        }
    }

    /// The retention pass lock (ARCHITECTURE.md §8: a pass lock, taken before the writer
    /// mutex).
    pub(in crate::log) fn retention_pass(&self) -> MutexGuard<'_, ()> {
        self.retention_pass.lock()
    }

    /// The compaction pass lock, with the cleaner's memory.
    pub(in crate::log) fn cleaner(&self) -> MutexGuard<'_, CleanerState> {
        self.cleaner.lock()
    }

    /// Compaction's counters.
    pub(in crate::log) fn status(&self) -> &CompactionStatus {
        &self.status
    }

    /// The cap on the compaction passes' I/O.
    pub(in crate::log) fn cleaner_io(&self) -> &IoThrottle {
        &self.cleaner_io
    }

    /// Tells the maintenance thread to stop.
    pub(in crate::log) fn stop(&self) {
        *self.stop.lock() = true;
        self.wake.notify_all();
    }

    /// Waits for `tick` unless told to stop; `false` once told.
    pub(in crate::log) fn wait(&self, tick: Duration) -> bool {
        let mut stop = self.stop.lock();
        if !*stop {
            self.wake.wait_for(&mut stop, tick);
        }
        !*stop
    }
}

/// What the cleaner remembers between passes. Held by a pass for its whole run.
#[derive(Debug)]
pub(in crate::log) struct CleanerState {
    /// Every record below it has been compared with every later record below it (Kafka's
    /// cleaner checkpoint): a pass maps only from here on.
    first_dirty_offset: i64,
    /// The log's truncation count when `first_dirty_offset` was last valid.
    truncations_seen: u64,
}

impl CleanerState {
    /// Every record below it has been compared with every later record below it.
    pub(in crate::log) fn first_dirty_offset(&self) -> i64 {
        self.first_dirty_offset
    }

    /// The truncation count the first dirty offset is valid for.
    pub(in crate::log) fn truncations_seen(&self) -> u64 {
        self.truncations_seen
    }

    /// With the log's truncation count now: a truncation since the last pass reused offsets,
    /// so what was clean is dirty again.
    pub(in crate::log) fn note_truncations(&mut self, truncations: u64) {
        if self.truncations_seen != truncations {
            self.first_dirty_offset = 0;
            self.truncations_seen = truncations;
        }
    }

    /// A pass cleaned everything below `first_dirty_offset`.
    pub(in crate::log) fn cleaned_up_to(&mut self, first_dirty_offset: i64) {
        self.first_dirty_offset = first_dirty_offset;
    }
}

/// Compaction's counters, readable without waiting for a pass.
#[derive(Debug, Default)]
pub(in crate::log) struct CompactionStatus {
    passes: AtomicU64,
    failed_passes: AtomicU64,
    /// Where the last stable offset held the last pass back, and the bytes from there on.
    uncleanable: Mutex<Option<(i64, u64)>>,
}

/// What [`Log::stats`](crate::Log::stats) reports of compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::log) struct CompactionCounters {
    pub(in crate::log) passes: u64,
    pub(in crate::log) failed_passes: u64,
    pub(in crate::log) uncleanable_from: Option<i64>,
    pub(in crate::log) uncleanable_bytes: u64,
}

impl CompactionStatus {
    /// A pass completed.
    pub(in crate::log) fn note_pass(&self) {
        self.passes.fetch_add(1, Ordering::Relaxed);
    }

    /// A pass (or the schedule of one) failed.
    pub(in crate::log) fn note_failed_pass(&self) {
        self.failed_passes.fetch_add(1, Ordering::Relaxed);
    }

    /// Where the last stable offset held the last pass back, and the bytes from there on.
    pub(in crate::log) fn set_uncleanable(&self, uncleanable: Option<(i64, u64)>) {
        *self.uncleanable.lock() = uncleanable;
    }

    /// The counters now.
    pub(in crate::log) fn counters(&self) -> CompactionCounters {
        let uncleanable = *self.uncleanable.lock();
        CompactionCounters {
            passes: self.passes.load(Ordering::Relaxed),
            failed_passes: self.failed_passes.load(Ordering::Relaxed),
            uncleanable_from: uncleanable.map(|(from, _)| from),
            uncleanable_bytes: uncleanable.map_or(0, |(_, bytes)| bytes),
        }
    }
}
