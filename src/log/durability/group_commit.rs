//! [`GroupCommit`]: a leader/follower fsync (ARCHITECTURE.md §6).
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
//! A new leader gathers before it syncs. The writers the last sync released are about to append
//! again; a leader that syncs at once covers the one or two that got the CPU first and leaves the
//! rest to the next sync (on 2 cores, 8 writers averaged 4-5 records a sync). So the leader waits
//! until as many writers wait behind it as took part in the last round, for at most a quarter of
//! the last sync's duration and never more than `LogConfig::group_commit_max_gather`. A lone writer has no one to
//! wait for and syncs at once; when writers leave, one round waits out the window and the next
//! expects fewer. This is PostgreSQL's `commit_delay` with `commit_siblings`, made adaptive.
//!
//! Waiting writers spin, when a sync is short. Waking a sleeping thread takes the waker a system
//! call and the woken thread a trip through the scheduler, 4-5 µs each on a small virtual
//! machine; a leader that wakes 7 writers, which then append one after another on 2 cores and
//! wake it in turn, left the disk idle a third of each round (ARCHITECTURE.md §6). So when the
//! last sync took no longer than `LogConfig::group_commit_max_spin`, a waiting writer yields the
//! CPU in a loop, watching for the sync to end, and a gathering leader watches for writers to
//! register; either sleeps once that budget is spent. A yield hands the CPU to any runnable
//! thread, so a spinner costs others a system call, not a time slice; on a disk whose syncs take
//! longer, sleeping costs little beside the sync, and no one spins. This is RocksDB's adaptive
//! yield for its write-group followers (`WriteThread::AwaitState`).
//!
//! A failed sync poisons the log (ARCHITECTURE.md §3, invariant 4): the kernel may have dropped the
//! dirty pages it failed to write, so nothing later may be reported durable until the log is
//! reopened.

use crate::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::sync::{Condvar, Mutex, MutexGuard, SpinBudget};

use crate::error::{Error, Result};
use crate::log::segments::watermark::Watermark;

#[derive(Debug, Default)]
struct LeaderState {
    /// A leader is syncing.
    in_flight: bool,
    /// Bumped by truncation: a sync that started before it must not advance the watermark,
    /// since its target may lie above the new end of the log.
    generation: u64,
    poisoned: bool,
    /// The offsets that waiters (asleep or spinning) wait for, with how many wait for each: a
    /// finished sync compares the lowest with what it made durable to decide whom to wake.
    waiting: BTreeMap<i64, usize>,
    /// How many writers took part in the last sync's round: its leader and every waiter still
    /// waiting when it ended. The next leader gathers until all but itself wait again.
    last_round_writers: usize,
    /// A leader is gathering until this many writers wait for offsets not yet durable.
    gather_target: Option<usize>,
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

    /// How many waiters wait for an offset at or above `durable`: the writers a sync
    /// starting now would cover. (Waiters below it were covered and are on their way out.)
    fn waiting_at_or_above(&self, durable: i64) -> usize {
        self.waiting.range(durable..).map(|(_, count)| count).sum()
    }

    /// Whether some waiter's offset is below `durable`.
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
    /// Wakes a gathering leader once its target of waiters is reached.
    gathered: Condvar,
    /// The longest a new leader gathers: a bound on the latency gathering adds when the last
    /// round's writers do not come back. Zero turns gathering off.
    max_gather: Duration,
    /// `LeaderState::poisoned`, readable without the lock: every append and every `send` of the
    /// batching writer asks, and must not contend with a leader for the answer.
    poisoned: AtomicBool,
    /// The longest a waiter spins before it sleeps; zero turns spinning off.
    max_spin: Duration,
    /// How long the last sync took, in nanoseconds: the gathering window is a quarter of it,
    /// and waiters spin only if it was at most `max_spin`. Written under the leader lock.
    last_sync_nanos: AtomicU64,
    /// Bumped under the leader lock when a sync ends: what a spinning waiter watches.
    syncs_ended: AtomicU64,
    /// Bumped under the leader lock when a waiter starts waiting: what a spinning gathering
    /// leader watches.
    registrations: AtomicU64,
    /// `LeaderState::generation`, readable without the lock: a gathered sync reads it under
    /// the writer lock, beside its target, and every sync would otherwise take the leader
    /// lock there for it.
    generation: AtomicU64,
}

impl GroupCommit {
    /// Starts with every offset below `durable_offset` durable; a new leader gathers for at
    /// most `max_gather`, and a waiter spins for at most `max_spin`.
    pub fn new(durable_offset: i64, max_gather: Duration, max_spin: Duration) -> Self {
        GroupCommit {
            durable: Watermark::new(durable_offset),
            leader: Mutex::new(LeaderState::default()),
            handover: Condvar::new(),
            gathered: Condvar::new(),
            max_gather,
            poisoned: AtomicBool::new(false),
            max_spin,
            last_sync_nanos: AtomicU64::new(0),
            syncs_ended: AtomicU64::new(0),
            registrations: AtomicU64::new(0),
            generation: AtomicU64::new(0),
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
            let generation = {
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
                    self.registrations.fetch_add(1, Ordering::Release);
                    if let Some(target) = state.gather_target
                        && state.waiting_at_or_above(self.durable.get()) >= target
                    {
                        self.gathered.notify_one();
                    }
                    let round = self.syncs_ended.load(Ordering::Acquire);
                    if self.spinning_pays() {
                        MutexGuard::unlocked(&mut state, || {
                            self.spin_until_sync_ends(round, offset)
                        });
                    }
                    // Checked under the lock: a sync that ended (or a poisoning) after the
                    // spin's last look has sent its wake-up already, and a wait now would miss it.
                    if self.syncs_ended.load(Ordering::Acquire) == round
                        && !state.poisoned
                        && self.durable.get() <= offset
                    {
                        self.handover.wait(&mut state);
                    }
                    state.stop_waiting(offset);
                }
                state.in_flight = true;
                self.gather(&mut state);
                if state.poisoned {
                    state.in_flight = false;
                    self.handover.notify_all();
                    return Err(Error::Poisoned);
                }
                state.generation
            };
            let sync_started = Instant::now();
            let result = sync();
            let sync_duration = sync_started.elapsed();
            let mut state = self.leader.lock();
            state.in_flight = false;
            self.last_sync_nanos.store(
                u64::try_from(sync_duration.as_nanos()).unwrap_or(u64::MAX),
                Ordering::Relaxed,
            );
            state.last_round_writers = 1 + state.waiting.values().sum::<usize>();
            match result {
                Ok(durable_end) => {
                    let current = state.generation == generation;
                    if current {
                        self.durable.advance(durable_end);
                    }
                    self.syncs_ended.fetch_add(1, Ordering::Release);
                    if state.covers_a_waiter(self.durable.get()) {
                        // Covered waiters must return; the uncovered ones among them find the
                        // next leader in flight (or become it) and sleep again.
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

    /// Called by a new leader (in flight, lock held): waits until the writers of the last round,
    /// but itself, wait for offsets a sync would cover, for at most a quarter of the last sync
    /// (see the [module docs](self)). Waiters arriving meanwhile find a sync in flight and wait.
    fn gather(&self, state: &mut MutexGuard<'_, LeaderState>) {
        let target = state.last_round_writers.saturating_sub(1);
        if target == 0
            || self.max_gather.is_zero()
            || state.waiting_at_or_above(self.durable.get()) >= target
        {
            return;
        }
        let deadline = Instant::now() + (self.last_sync() / 4).min(self.max_gather);
        let spin = self.spinning_pays();
        state.gather_target = Some(target);
        while !state.poisoned && state.waiting_at_or_above(self.durable.get()) < target {
            let timed_out = if spin {
                // Registrations are counted under the lock, so none made before this load
                // goes unseen; the count is checked again, under the lock, after any change.
                let seen = self.registrations.load(Ordering::Acquire);
                let budget = SpinBudget::until(deadline);
                MutexGuard::unlocked(state, || {
                    while self.registrations.load(Ordering::Acquire) == seen && !self.is_poisoned()
                    {
                        if !budget.yield_once() {
                            return true;
                        }
                    }
                    false
                })
            } else {
                self.gathered.wait_until(state, deadline).timed_out()
            };
            if timed_out {
                break;
            }
        }
        state.gather_target = None;
    }

    /// How long the last sync took.
    fn last_sync(&self) -> Duration {
        Duration::from_nanos(self.last_sync_nanos.load(Ordering::Relaxed))
    }

    /// Whether waiters spin: the last sync was short enough that waking a sleeper would cost a
    /// good part of it (see the [module docs](self)).
    fn spinning_pays(&self) -> bool {
        !self.max_spin.is_zero() && self.last_sync() <= self.max_spin
    }

    /// Called by a waiter without the lock: yields the CPU until the sync in flight when it
    /// read `round` ends, the log is poisoned or `offset` is durable, for at most `max_spin`.
    fn spin_until_sync_ends(&self, round: u64, offset: i64) {
        let budget = SpinBudget::lasting(self.max_spin);
        while self.syncs_ended.load(Ordering::Acquire) == round
            && !self.is_poisoned()
            && self.durable.get() <= offset
        {
            if !budget.yield_once() {
                return;
            }
        }
    }

    /// With no sync in flight and waiters asleep, wakes one of them to lead the next sync.
    fn wake_a_leader_if_needed(&self, state: &LeaderState) {
        if !state.in_flight && !state.waiting.is_empty() {
            self.handover.notify_one();
        }
    }

    /// The truncation generation: a sync whose target was read after this call may move the
    /// watermark ([`advance_by_other_sync`](Self::advance_by_other_sync)) only while it holds.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Moves the watermark to `durable_end` after a sync that this group commit did not lead
    /// (a file-system sync gathered for many logs), unless a truncation came since
    /// `generation` was read or the log is poisoned. Wakes the waiters it covers, as a sync
    /// ending here would.
    pub fn advance_by_other_sync(&self, durable_end: i64, generation: u64) {
        let state = self.leader.lock();
        if state.poisoned || state.generation != generation || durable_end <= self.durable.get() {
            return;
        }
        self.durable.advance(durable_end);
        self.syncs_ended.fetch_add(1, Ordering::Release);
        if state.covers_a_waiter(self.durable.get()) {
            self.handover.notify_all();
        }
    }

    /// Marks the log poisoned (a sync outside [`wait_durable`](Self::wait_durable) failed).
    pub fn poison(&self) {
        let mut state = self.leader.lock();
        state.poisoned = true;
        // Under the lock: a waiter that the lock shows poisoned must find `is_poisoned` true
        // too, or an append right after its `Err(Poisoned)` would still be let through.
        self.poisoned.store(true, Ordering::Release);
        drop(state);
        self.handover.notify_all();
        self.gathered.notify_all();
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

    /// After the log restarted empty at `start` (`truncate_fully_and_start_at`, durable when it
    /// calls this): every offset below `start` counts as durable, since none can come back, and
    /// a sync in flight must not move the watermark.
    pub fn restart_at(&self, start: i64) {
        let mut state = self.leader.lock();
        state.generation += 1;
        self.generation.store(state.generation, Ordering::Release);
        self.durable.set(start);
    }

    /// After a truncation to `end`: nothing at or above `end` is durable any more (it is gone),
    /// and a sync in flight must not advance the watermark past it.
    pub fn truncate(&self, end: i64) {
        let mut state = self.leader.lock();
        state.generation += 1;
        self.generation.store(state.generation, Ordering::Release);
        if self.durable.get() > end {
            self.durable.set(end);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::Arc;
    use crate::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
    use std::time::Duration;

    /// The `max_spin`s the threaded tests run with: waiters that sleep at once; waiters that
    /// spin for 50 µs and then sleep (so a wake-up must reach a waiter that gave up spinning);
    /// and waiters that spin for as long as any test runs.
    const SPIN_MODES: [Duration; 3] = [
        Duration::ZERO,
        Duration::from_micros(50),
        Duration::from_secs(3600),
    ];

    impl GroupCommit {
        pub(super) fn set_last_sync(&self, last_sync: Duration) {
            let _leader = self.leader.lock();
            self.last_sync_nanos
                .store(last_sync.as_nanos() as u64, Ordering::Relaxed);
        }
    }

    #[test]
    fn concurrent_waiters_share_syncs() {
        for max_spin in SPIN_MODES {
            concurrent_waiters_share_syncs_with(max_spin);
        }
    }

    fn concurrent_waiters_share_syncs_with(max_spin: Duration) {
        let commit = Arc::new(GroupCommit::new(0, Duration::ZERO, max_spin));
        let end = Arc::new(AtomicI64::new(0));
        let syncs = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let (commit, end, syncs) =
                    (Arc::clone(&commit), Arc::clone(&end), Arc::clone(&syncs));
                crate::sync::thread::spawn(move || {
                    for i in 0..50 {
                        let offset = end.fetch_add(1, Ordering::SeqCst);
                        commit
                            .wait_durable(offset, || {
                                syncs.fetch_add(1, Ordering::SeqCst);
                                crate::sync::thread::sleep(Duration::from_micros(200));
                                Ok(end.load(Ordering::SeqCst))
                            })
                            .unwrap();
                        assert!(
                            commit.durable_offset() > offset,
                            "thread {t} op {i}, max_spin {max_spin:?}"
                        );
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(commit.durable_offset(), 400);
        // Not a timing claim: with 8 writers some syncs must have been shared.
        assert!(syncs.load(Ordering::SeqCst) < 400, "max_spin {max_spin:?}");
    }

    #[test]
    fn waiters_a_sync_does_not_cover_get_one_leader_whose_sync_covers_them_all() {
        for max_spin in SPIN_MODES {
            one_leader_covers_the_waiters_a_sync_left_with(max_spin);
        }
    }

    fn one_leader_covers_the_waiters_a_sync_left_with(max_spin: Duration) {
        const FOLLOWERS: usize = 6;
        let commit = Arc::new(GroupCommit::new(0, Duration::ZERO, max_spin));
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
                        crate::sync::thread::yield_now();
                    }
                    return Ok(1);
                }
                Ok(end.load(Ordering::SeqCst))
            }
        };
        let leader = {
            let (commit, sync) = (Arc::clone(&commit), sync.clone());
            crate::sync::thread::spawn(move || commit.wait_durable(0, sync))
        };
        while syncs.load(Ordering::SeqCst) == 0 {
            crate::sync::thread::yield_now();
        }
        let followers: Vec<_> = (0..FOLLOWERS)
            .map(|_| {
                let offset = end.fetch_add(1, Ordering::SeqCst);
                let (commit, sync) = (Arc::clone(&commit), sync.clone());
                crate::sync::thread::spawn(move || commit.wait_durable(offset, sync))
            })
            .collect();
        // Every follower waits behind the first sync before it ends.
        while commit.leader.lock().waiting.values().sum::<usize>() < FOLLOWERS {
            crate::sync::thread::yield_now();
        }
        release.store(true, Ordering::SeqCst);
        leader.join().unwrap().unwrap();
        for follower in followers {
            follower.join().unwrap().unwrap();
        }
        // The first sync covered none of them: one was woken to lead, and its sync covered all.
        assert_eq!(syncs.load(Ordering::SeqCst), 2, "max_spin {max_spin:?}");
        assert_eq!(commit.durable_offset(), 1 + FOLLOWERS as i64);
        assert!(commit.leader.lock().waiting.is_empty());
    }

    /// A group commit (nothing durable yet, gathering for up to an hour, waiters spinning for
    /// up to `max_spin`) whose last round had `writers` writers and a sync of `last_sync`.
    fn after_a_round(writers: usize, last_sync: Duration, max_spin: Duration) -> GroupCommit {
        let commit = GroupCommit::new(0, Duration::from_secs(3600), max_spin);
        commit.leader.lock().last_round_writers = writers;
        commit.set_last_sync(last_sync);
        commit
    }

    #[test]
    fn a_new_leader_gathers_the_last_rounds_writers_into_one_sync() {
        for max_spin in SPIN_MODES {
            a_new_leader_gathers_with(max_spin);
        }
    }

    fn a_new_leader_gathers_with(max_spin: Duration) {
        // The last round: three writers, and a sync long enough that the window never ends
        // before the writers come back. (As long as the longest spin: with that budget the
        // leader spins while it gathers, with the others it sleeps.)
        let commit = Arc::new(after_a_round(3, Duration::from_secs(3600), max_spin));
        let end = Arc::new(AtomicI64::new(1));
        let syncs = Arc::new(AtomicUsize::new(0));
        let sync = {
            let (end, syncs) = (Arc::clone(&end), Arc::clone(&syncs));
            move || {
                syncs.fetch_add(1, Ordering::SeqCst);
                Ok(end.load(Ordering::SeqCst))
            }
        };
        let leader = {
            let (commit, sync) = (Arc::clone(&commit), sync.clone());
            crate::sync::thread::spawn(move || commit.wait_durable(0, sync))
        };
        while commit.leader.lock().gather_target.is_none() {
            crate::sync::thread::yield_now();
        }
        assert_eq!(
            syncs.load(Ordering::SeqCst),
            0,
            "the leader synced before gathering"
        );
        let followers: Vec<_> = (0..2)
            .map(|_| {
                let offset = end.fetch_add(1, Ordering::SeqCst);
                let (commit, sync) = (Arc::clone(&commit), sync.clone());
                crate::sync::thread::spawn(move || commit.wait_durable(offset, sync))
            })
            .collect();
        leader.join().unwrap().unwrap();
        for follower in followers {
            follower.join().unwrap().unwrap();
        }
        assert_eq!(
            syncs.load(Ordering::SeqCst),
            1,
            "one sync covered all three, max_spin {max_spin:?}"
        );
        assert_eq!(commit.durable_offset(), 3);
        assert_eq!(commit.leader.lock().last_round_writers, 3);
    }

    #[test]
    fn a_leader_stops_gathering_at_the_window_when_writers_do_not_come_back() {
        for max_spin in SPIN_MODES {
            // The window is a quarter of the last sync: 5 ms.
            let commit = after_a_round(8, Duration::from_millis(20), max_spin);
            commit.wait_durable(0, || Ok(1)).unwrap();
            assert_eq!(commit.durable_offset(), 1);
            let state = commit.leader.lock();
            assert_eq!(state.gather_target, None);
            // Alone this round: the next leader expects no one.
            assert_eq!(state.last_round_writers, 1);
        }
    }

    #[test]
    fn a_poisoned_log_ends_a_gathering_leader() {
        for max_spin in SPIN_MODES {
            let commit = Arc::new(after_a_round(4, Duration::from_secs(3600), max_spin));
            let leader = {
                let commit = Arc::clone(&commit);
                crate::sync::thread::spawn(move || commit.wait_durable(0, || Ok(1)))
            };
            while commit.leader.lock().gather_target.is_none() {
                crate::sync::thread::yield_now();
            }
            commit.poison();
            assert!(matches!(leader.join().unwrap(), Err(Error::Poisoned)));
            assert_eq!(commit.durable_offset(), 0);
            assert!(!commit.leader.lock().in_flight);
        }
    }

    #[test]
    fn a_failed_sync_poisons_for_good() {
        let commit = GroupCommit::new(0, Duration::ZERO, Duration::ZERO);
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
        let commit = GroupCommit::new(10, Duration::ZERO, Duration::ZERO);
        // The log ends at 12 now: offset 15 was truncated away after the waiter looked.
        let result = commit.wait_durable(15, || Ok(12));
        assert!(matches!(result, Err(Error::Truncated { at: 12 })));
        assert_eq!(commit.durable_offset(), 12);
        assert!(!commit.is_poisoned());
    }

    #[test]
    fn a_sync_that_straddles_a_truncation_does_not_advance() {
        let commit = GroupCommit::new(10, Duration::ZERO, Duration::ZERO);
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

    /// Model-checked with shuttle (`RUSTFLAGS="--cfg shuttle"`, see `crate::sync`).
    #[cfg(shuttle)]
    mod shuttle_tests {
        use super::*;
        use crate::sync::Arc;
        use crate::sync::atomic::{AtomicBool, AtomicI64};
        use crate::sync::thread;
        use shuttle::rand::Rng;

        /// How a run ends its syncs: all succeed, the second sync fails, or another thread poisons
        /// the log at a point the scheduler picks.
        #[derive(Debug, Clone, Copy, PartialEq)]
        enum Poison {
            Never,
            SecondSyncFails,
            FromOutside,
        }

        #[test]
        fn shuttle_group_commit_wakes_every_waiter_and_reports_only_synced_offsets() {
            crate::sync::check(
                "shuttle_group_commit_wakes_every_waiter_and_reports_only_synced_offsets",
                || {
                    const WRITERS: usize = 3;
                    const APPENDS: usize = 2;
                    let poison = match shuttle::rand::thread_rng().gen_range(0..3) {
                        0 => Poison::Never,
                        1 => Poison::SecondSyncFails,
                        _ => Poison::FromOutside,
                    };
                    // Waiters spin (until the model's coin says the budget is spent), or sleep.
                    let max_spin = if shuttle::rand::thread_rng().gen_bool(0.5) {
                        Duration::from_secs(3600)
                    } else {
                        Duration::ZERO
                    };
                    // The last round had every writer and a long sync: the first leader gathers
                    // (the model's timed wait ends, or not, at any point).
                    let commit = Arc::new(GroupCommit::new(0, Duration::from_secs(3600), max_spin));
                    commit.leader.lock().last_round_writers = WRITERS;
                    commit.set_last_sync(Duration::from_secs(1));
                    // The log end (the next offset to append) and the highest end a sync reached.
                    let end = Arc::new(AtomicI64::new(0));
                    let synced = Arc::new(AtomicI64::new(0));
                    let syncs = Arc::new(AtomicI64::new(0));
                    let syncing = Arc::new(AtomicBool::new(false));
                    let sync = {
                        let (end, synced, syncs, syncing) = (
                            Arc::clone(&end),
                            Arc::clone(&synced),
                            Arc::clone(&syncs),
                            Arc::clone(&syncing),
                        );
                        move || -> Result<i64> {
                            assert!(!syncing.swap(true, Ordering::SeqCst), "two syncs at once");
                            let target = end.load(Ordering::SeqCst);
                            let number = syncs.fetch_add(1, Ordering::SeqCst) + 1;
                            thread::yield_now();
                            syncing.store(false, Ordering::SeqCst);
                            if poison == Poison::SecondSyncFails && number == 2 {
                                return Err(Error::Io {
                                    path: "/log/00000000000000000000.log".into(),
                                    source: std::io::Error::other("eio"),
                                });
                            }
                            synced.fetch_max(target, Ordering::SeqCst);
                            Ok(target)
                        }
                    };
                    let writers: Vec<_> = (0..WRITERS)
                        .map(|_| {
                            let (commit, end, synced, sync) = (
                                Arc::clone(&commit),
                                Arc::clone(&end),
                                Arc::clone(&synced),
                                sync.clone(),
                            );
                            thread::spawn(move || {
                                let mut seen = commit.durable_offset();
                                for _ in 0..APPENDS {
                                    let offset = end.fetch_add(1, Ordering::SeqCst);
                                    let result = commit.wait_durable(offset, &sync);
                                    let durable = commit.durable_offset();
                                    assert!(
                                        durable >= seen,
                                        "durable went back: {seen} -> {durable}"
                                    );
                                    seen = durable;
                                    match result {
                                        Ok(()) => {
                                            let synced = synced.load(Ordering::SeqCst);
                                            assert!(
                                                offset < synced,
                                                "Ok for {offset}, only {synced} synced"
                                            );
                                            assert!(durable > offset);
                                        }
                                        Err(Error::Poisoned | Error::Io { .. }) => {
                                            assert!(
                                                poison != Poison::Never,
                                                "failed with no poison"
                                            );
                                            assert!(commit.is_poisoned());
                                            return;
                                        }
                                        Err(other) => panic!("unexpected error {other:?}"),
                                    }
                                }
                            })
                        })
                        .collect();
                    let poisoner = (poison == Poison::FromOutside).then(|| {
                        let commit = Arc::clone(&commit);
                        thread::spawn(move || commit.poison())
                    });
                    // Every waiter returns: a lost wake-up leaves threads blocked, which shuttle
                    // reports as a deadlock.
                    for writer in writers {
                        writer.join().unwrap();
                    }
                    if let Some(poisoner) = poisoner {
                        poisoner.join().unwrap();
                    }
                    if poison == Poison::Never {
                        assert_eq!(commit.durable_offset(), (WRITERS * APPENDS) as i64);
                    } else {
                        assert!(commit.is_poisoned());
                        // A poison reaches every later waiter too.
                        assert!(matches!(
                            commit.wait_durable(i64::MAX - 1, &sync),
                            Err(Error::Poisoned)
                        ));
                    }
                    assert!(commit.durable_offset() <= synced.load(Ordering::SeqCst));
                    let state = commit.leader.lock();
                    assert!(!state.in_flight, "a leader left a sync in flight");
                    assert!(state.waiting.is_empty(), "a waiter left its offset behind");
                },
            );
        }
    }
}
