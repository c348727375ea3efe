//! [`GroupCommit`]: a leader/follower fsync (DESIGN §3a).
//!
//! Many writers want their appends durable; one `fdatasync` covers all of them. The first waiter
//! that finds no sync in flight becomes the leader: it runs the sync for everything appended so
//! far, advances the durable watermark, and hands over. Waiters that arrived during the sync are
//! followers: they wait, and those the sync did not cover elect the next leader. So at most one
//! sync runs at a time, and N concurrent waiters cost about two syncs, not N.
//!
//! A finished sync wakes only whom it must. When it covers no waiter (they all appended while it
//! ran, the common case under load), it wakes one of them to lead the next sync and leaves the
//! rest asleep until a sync covers them: waking all would make every waiter run twice per sync,
//! which on a small machine costs more than the sync itself.
//!
//! A failed sync poisons the log (DESIGN §3.4): the kernel may have dropped the dirty pages it
//! failed to write, so nothing later may be reported durable until the log is reopened.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::{Condvar, Mutex};

use super::watermark::Watermark;
use crate::error::{Error, Result};

#[derive(Debug, Default)]
struct LeaderState {
    /// A leader is syncing.
    in_flight: bool,
    /// Bumped by truncation: a sync that started before it must not advance the watermark,
    /// since its target may lie above the new end of the log.
    generation: u64,
    poisoned: bool,
    /// The offsets that sleeping waiters wait for, with how many wait for each: a finished sync
    /// compares the lowest with what it made durable to decide whom to wake.
    waiting: BTreeMap<i64, usize>,
    /// The last sync woke waiters it covered: the next leader lets them append first.
    woke_covered: bool,
}

impl LeaderState {
    fn start_waiting(&mut self, offset: i64) {
        *self.waiting.entry(offset).or_insert(0) += 1;
    }

    fn stop_waiting(&mut self, offset: i64) {
        if let Some(count) = self.waiting.get_mut(&offset) {
            *count -= 1;
            if *count == 0 {
                self.waiting.remove(&offset);
            }
        }
    }

    /// Whether some sleeping waiter's offset is below `durable`.
    fn covers_a_waiter(&self, durable: i64) -> bool {
        self.waiting
            .first_key_value()
            .is_some_and(|(&lowest, _)| lowest < durable)
    }
}

/// See the [module docs](self).
#[derive(Debug)]
pub(crate) struct GroupCommit {
    /// Every offset below this value is durable.
    durable: Watermark,
    leader: Mutex<LeaderState>,
    handover: Condvar,
    /// `LeaderState::poisoned`, readable without the lock: every append and every `send` of the
    /// batching writer asks, and must not contend with a leader for the answer.
    poisoned: AtomicBool,
}

impl GroupCommit {
    /// Starts with every offset below `durable_offset` durable.
    pub fn new(durable_offset: i64) -> Self {
        GroupCommit {
            durable: Watermark::new(durable_offset),
            leader: Mutex::new(LeaderState::default()),
            handover: Condvar::new(),
            poisoned: AtomicBool::new(false),
        }
    }

    /// The durable watermark: every offset below it survives a machine crash.
    pub fn durable_offset(&self) -> i64 {
        self.durable.get()
    }

    /// The durable watermark itself, for the future forms of the waits to register on.
    pub fn durable_watermark(&self) -> &Watermark {
        &self.durable
    }

    /// Whether a sync has failed.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    /// Blocks until `offset` is durable, leading a sync if none is in flight.
    ///
    /// `sync` runs on the leader's thread with no lock of this type held; it syncs everything
    /// published so far and returns the offset below which that is now durable. If that sync
    /// does not reach `offset`, a truncation removed it: [`Error::Truncated`].
    pub fn wait_durable(&self, offset: i64, sync: impl Fn() -> Result<i64>) -> Result<()> {
        loop {
            if self.durable.get() > offset {
                return Ok(());
            }
            let (generation, woke_covered) = {
                let mut state = self.leader.lock();
                loop {
                    if state.poisoned {
                        return Err(Error::Poisoned);
                    }
                    if self.durable.get() > offset {
                        // This waiter may have been the one woken to lead: pass that on.
                        self.wake_a_leader_if_needed(&state);
                        return Ok(());
                    }
                    if !state.in_flight {
                        break;
                    }
                    state.start_waiting(offset);
                    self.handover.wait(&mut state);
                    state.stop_waiting(offset);
                }
                state.in_flight = true;
                (state.generation, std::mem::take(&mut state.woke_covered))
            };
            if woke_covered {
                // The waiters the last sync covered were just woken and are about to append
                // again: give them the CPU first, so that this sync covers their next appends
                // instead of leaving them to the one after (on a 2-core machine the leader
                // otherwise runs ahead of them and every other sync covers one or two records).
                std::thread::yield_now();
            }
            let result = sync();
            let mut state = self.leader.lock();
            state.in_flight = false;
            match result {
                Ok(durable_end) => {
                    let current = state.generation == generation;
                    if current {
                        self.durable.advance(durable_end);
                    }
                    if state.covers_a_waiter(self.durable.get()) {
                        // Covered waiters must return; the uncovered ones among them find the
                        // next leader in flight (or become it) and sleep again.
                        state.woke_covered = true;
                        self.handover.notify_all();
                    } else {
                        self.wake_a_leader_if_needed(&state);
                    }
                    if current && durable_end <= offset {
                        // The sync covered everything the log holds, and `offset` is not in it:
                        // a truncation took it away. Waiting longer would spin forever.
                        return Err(Error::Truncated { at: durable_end });
                    }
                }
                Err(error) => {
                    state.poisoned = true;
                    self.poisoned.store(true, Ordering::Release);
                    self.handover.notify_all();
                    drop(state);
                    self.durable.wake_all();
                    return Err(error);
                }
            }
        }
    }

    /// With no sync in flight and waiters asleep, wakes one of them to lead the next sync.
    fn wake_a_leader_if_needed(&self, state: &LeaderState) {
        if !state.in_flight && !state.waiting.is_empty() {
            self.handover.notify_one();
        }
    }

    /// Marks the log poisoned (a sync outside [`wait_durable`](Self::wait_durable) failed).
    pub fn poison(&self) {
        self.leader.lock().poisoned = true;
        self.poisoned.store(true, Ordering::Release);
        self.handover.notify_all();
        self.durable.wake_all();
    }

    /// Sets the watermark to what another process made durable (a live read-only log follows
    /// its writer's recovery point, which may also move down after a truncation).
    pub fn observe(&self, durable: i64) {
        if durable > self.durable.get() {
            self.durable.advance(durable);
        } else if durable < self.durable.get() {
            self.durable.set(durable);
        }
    }

    /// After a truncation to `end`: nothing at or above `end` is durable any more (it is gone),
    /// and a sync in flight must not advance the watermark past it.
    pub fn truncate(&self, end: i64) {
        let mut state = self.leader.lock();
        state.generation += 1;
        if self.durable.get() > end {
            self.durable.set(end);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
    use std::time::Duration;

    #[test]
    fn concurrent_waiters_share_syncs() {
        let commit = Arc::new(GroupCommit::new(0));
        let end = Arc::new(AtomicI64::new(0));
        let syncs = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let (commit, end, syncs) =
                    (Arc::clone(&commit), Arc::clone(&end), Arc::clone(&syncs));
                std::thread::spawn(move || {
                    for i in 0..50 {
                        let offset = end.fetch_add(1, Ordering::SeqCst);
                        commit
                            .wait_durable(offset, || {
                                syncs.fetch_add(1, Ordering::SeqCst);
                                std::thread::sleep(Duration::from_micros(200));
                                Ok(end.load(Ordering::SeqCst))
                            })
                            .unwrap();
                        assert!(commit.durable_offset() > offset, "thread {t} op {i}");
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(commit.durable_offset(), 400);
        // Not a timing claim: with 8 writers some syncs must have been shared.
        assert!(syncs.load(Ordering::SeqCst) < 400);
    }

    #[test]
    fn waiters_a_sync_does_not_cover_get_one_leader_whose_sync_covers_them_all() {
        const FOLLOWERS: usize = 6;
        let commit = Arc::new(GroupCommit::new(0));
        // Offset 0 is appended; the followers append 1..=FOLLOWERS while its sync runs.
        let end = Arc::new(AtomicI64::new(1));
        let syncs = Arc::new(AtomicUsize::new(0));
        let release = Arc::new(AtomicBool::new(false));
        let sync = {
            let (end, syncs, release) =
                (Arc::clone(&end), Arc::clone(&syncs), Arc::clone(&release));
            move || {
                if syncs.fetch_add(1, Ordering::SeqCst) == 0 {
                    // The first sync read its target (1) before the followers appended.
                    while !release.load(Ordering::SeqCst) {
                        std::thread::yield_now();
                    }
                    return Ok(1);
                }
                Ok(end.load(Ordering::SeqCst))
            }
        };
        let leader = {
            let (commit, sync) = (Arc::clone(&commit), sync.clone());
            std::thread::spawn(move || commit.wait_durable(0, sync))
        };
        while syncs.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        let followers: Vec<_> = (0..FOLLOWERS)
            .map(|_| {
                let offset = end.fetch_add(1, Ordering::SeqCst);
                let (commit, sync) = (Arc::clone(&commit), sync.clone());
                std::thread::spawn(move || commit.wait_durable(offset, sync))
            })
            .collect();
        // Every follower is asleep behind the first sync before it ends.
        while commit.leader.lock().waiting.values().sum::<usize>() < FOLLOWERS {
            std::thread::yield_now();
        }
        release.store(true, Ordering::SeqCst);
        leader.join().unwrap().unwrap();
        for follower in followers {
            follower.join().unwrap().unwrap();
        }
        // The first sync covered none of them: one was woken to lead, and its sync covered all.
        assert_eq!(syncs.load(Ordering::SeqCst), 2);
        assert_eq!(commit.durable_offset(), 1 + FOLLOWERS as i64);
        assert!(commit.leader.lock().waiting.is_empty());
    }

    #[test]
    fn a_failed_sync_poisons_for_good() {
        let commit = GroupCommit::new(0);
        let result = commit.wait_durable(0, || {
            Err(Error::Io {
                path: "x".into(),
                source: std::io::Error::other("eio"),
            })
        });
        assert!(matches!(result, Err(Error::Io { .. })));
        assert!(commit.is_poisoned());
        assert!(matches!(
            commit.wait_durable(0, || Ok(1)),
            Err(Error::Poisoned)
        ));
        assert_eq!(commit.durable_offset(), 0);
    }

    #[test]
    fn a_wait_for_a_truncated_offset_ends_with_truncated() {
        let commit = GroupCommit::new(10);
        // The log ends at 12 now: offset 15 was truncated away after the waiter looked.
        let result = commit.wait_durable(15, || Ok(12));
        assert!(matches!(result, Err(Error::Truncated { at: 12 })));
        assert_eq!(commit.durable_offset(), 12);
        assert!(!commit.is_poisoned());
    }

    #[test]
    fn a_sync_that_straddles_a_truncation_does_not_advance() {
        let commit = GroupCommit::new(10);
        let calls = AtomicUsize::new(0);
        commit
            .wait_durable(12, || {
                if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                    // The log is truncated while this sync runs: its target is stale.
                    commit.truncate(11);
                    Ok(20)
                } else {
                    Ok(15)
                }
            })
            .unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert_eq!(commit.durable_offset(), 15);
    }
}
