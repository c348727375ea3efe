//! [`SyncGather`]: one file-system sync for the syncs of many logs (ARCHITECTURE.md §6,
//! "Gathered syncs").
//!
//! A pool of 1,000 logs whose producers wait for durability asks for 1,000 syncs at once. The
//! disk runs `fdatasync`s one after another, each ending in a cache flush, so the round costs
//! 1,000 of them, where one `syncfs(2)` of the same dirty files costs a few (benches/README.md,
//! "Gathered syncs"). When a log's group-commit leader finds at least `min_logs` logs of its
//! pool on its file system with appends not yet durable, it syncs the file system once and
//! moves each of them to what it had published when the sync began; with fewer waiting, it
//! syncs its own files, as a log outside such a pool does.
//!
//! Rounds run one at a time per pool. A leader that waited for the round in flight usually
//! finds its log covered by it and returns at once; the flusher tasks of the other logs find
//! nothing left to sync.
//!
//! Why a round's promise holds: each log's target is read under its writer lock before the
//! file-system sync starts, and every byte below a published log end was written before it was
//! published, so the sync writes it back and commits it (with the directory entries and the
//! sealed segments' indexes the log's own sync would have synced). A truncation bumps the
//! group commit's generation under the same lock, and a target read before it is dropped. A
//! failed file-system sync cannot say whose pages it lost: it poisons every log of the round.

use std::time::Instant;

use crate::error::Result;
use crate::sync::atomic::{AtomicU64, Ordering};
use crate::sync::{Arc, Mutex, Weak};

use crate::log::Shared;

/// See the [module docs](self).
pub(crate) struct SyncGather {
    /// The fewest logs (the leader's included) waiting for a sync that make a round.
    min_logs: usize,
    members: Mutex<Vec<Member>>,
    /// Held for a whole round: one file-system sync at a time.
    round: Mutex<()>,
    /// File-system syncs run, and the log syncs they stood for.
    rounds: AtomicU64,
    logs_covered: AtomicU64,
}

/// A log of the pool, with the file system it lives on.
struct Member {
    /// The file system that holds the log's directory (`Storage::file_system_id`).
    file_system: u64,
    shared: Weak<Shared>,
}

impl std::fmt::Debug for SyncGather {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyncGather")
            .field("min_logs", &self.min_logs)
            .field("rounds", &self.rounds.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl SyncGather {
    /// Gathers when at least `min_logs` logs wait (at least 2).
    pub(crate) fn new(min_logs: usize) -> SyncGather {
        SyncGather {
            min_logs: min_logs.max(2),
            members: Mutex::new(Vec::new()),
            round: Mutex::new(()),
            rounds: AtomicU64::new(0),
            logs_covered: AtomicU64::new(0),
        }
    }

    /// How many file-system syncs ran, and how many log syncs they stood for.
    pub(crate) fn rounds(&self) -> (u64, u64) {
        (
            self.rounds.load(Ordering::Relaxed),
            self.logs_covered.load(Ordering::Relaxed),
        )
    }

    /// Adds a writable log of the pool. A storage that cannot sync a whole file system leaves
    /// the log out: it syncs its own files.
    pub(in crate::log) fn register(&self, shared: &Arc<Shared>) {
        let file_system = match shared.storage.file_system_id(&shared.dir) {
            Ok(id) => id,
            Err(error) => {
                log::debug!(
                    "{} syncs its own files, not gathered: {error}",
                    shared.dir.display()
                );
                return;
            }
        };
        if shared
            .durability
            .gathered_file_system()
            .set(file_system)
            .is_err()
        {
            return;
        }
        let mut members = self.members.lock();
        members.retain(|member| member.shared.strong_count() > 0);
        members.push(Member {
            file_system,
            shared: Arc::downgrade(shared),
        });
    }

    /// Called by `leader`'s group-commit leader in place of its own sync: `None` when fewer
    /// than `min_logs` logs of its file system wait (the leader then syncs its own files);
    /// otherwise the end below which the leader's log is durable, after a round of its own or
    /// the one it waited for.
    pub(in crate::log) fn sync_for(&self, leader: &Shared) -> Option<Result<i64>> {
        let file_system = *leader.durability.gathered_file_system().get()?;
        let _round = self.round.lock();
        let durable = leader.durability.durable_offset();
        if durable >= leader.view.log_end() {
            // The round this leader waited for covered everything it had published.
            return Some(Ok(durable));
        }
        let waiting = self.waiting_logs(file_system, leader);
        if waiting.len() + 1 < self.min_logs {
            return None;
        }
        let leader_published = leader.capture_published();
        let published: Vec<_> = waiting
            .iter()
            .map(|shared| shared.capture_published())
            .collect();
        let started = Instant::now();
        let result = leader.storage.sync_file_system(&leader.dir);
        let duration = started.elapsed();
        self.rounds.fetch_add(1, Ordering::Relaxed);
        self.logs_covered
            .fetch_add(1 + waiting.len() as u64, Ordering::Relaxed);
        for (shared, published) in waiting.iter().zip(&published) {
            shared.finish_sync(published, duration, &result);
            match &result {
                Ok(()) => shared
                    .durability
                    .advance_by_other_sync(published.target, published.generation),
                Err(error) => {
                    shared
                        .poison_after_failed_sync("a gathered file-system sync", error.duplicate());
                }
            }
        }
        // The leader's own group commit moves its watermark (or poisons it) from the answer.
        leader.finish_sync(&leader_published, duration, &result);
        Some(result.map(|()| leader_published.target))
    }

    /// The pool's other logs on `file_system` with appends not yet durable, and forgets the
    /// members whose logs are gone.
    fn waiting_logs(&self, file_system: u64, leader: &Shared) -> Vec<Arc<Shared>> {
        let mut members = self.members.lock();
        members.retain(|member| member.shared.strong_count() > 0);
        members
            .iter()
            .filter(|member| {
                member.file_system == file_system && !std::ptr::eq(member.shared.as_ptr(), leader)
            })
            .filter_map(|member| member.shared.upgrade())
            .filter(|shared| {
                !shared.durability.is_poisoned()
                    && shared.view.log_end() > shared.durability.durable_offset()
            })
            .collect()
    }
}
