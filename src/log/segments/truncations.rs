//! [`Truncations`]: the log's record of its truncations, which durability waits and passes
//! planned without the writer lock consult (ARCHITECTURE.md §3, invariant 4; §8,
//! "Acknowledgements").
//!
//! A durability wait for offset `o` that began in [`TruncationEpoch`] `e` (read when its batch
//! was appended, or when the wait was made) must fail only if a truncation *since `e`* cut the
//! log at or below `o`: a truncation that cut above `o`, or one before `e`, says nothing about
//! the record at `o`. So each truncation is recorded with its cut, and a wait asks for the
//! lowest cut of the truncations after its epoch ([`Truncations::cut_since`]).
//!
//! The record is a seqlock's sequence and a history of cuts:
//! - the **sequence** moves twice per truncation, to odd when it begins (its cut recorded first,
//!   before it changes a byte or lowers the durable offset) and back to even when it ends. An
//!   epoch is an even sequence: one read while a truncation runs counts as before it, so that
//!   a wait made during a truncation still hears of its cut. A pass that planned without the
//!   writer lock compares the sequence under the lock with the one it planned on: any
//!   truncation that began or was running meanwhile moved it;
//! - the **history** keeps, of the cuts, only those a later truncation did not undercut: a
//!   stack of (sequence at the truncation's begin, cut), rising in both, whose first entry after
//!   an epoch holds the lowest cut since that epoch. Truncations that cut ever higher (a
//!   follower truncating at each leader change) grow it by one entry each, so it keeps at most
//!   [`MAX_CUTS`] entries and merges the two oldest beyond that: a wait older than the
//!   [`MAX_CUTS`] latest rising truncations may then be told of a cut that came just before
//!   its epoch, and fail as truncated. It never misses a cut.
//!
//! A wait reads the durable offset first and this record second: if the durable offset was
//! past `o` and no truncation since the epoch had cut at or below `o` by the later read, the
//! record at `o` was durable and still the one appended when the durable offset was read (a
//! truncation records its cut before it cuts, and the appends that refill its offsets come
//! after it, under the writer lock).

use std::collections::VecDeque;

use crate::sync::Mutex;
use crate::sync::atomic::{AtomicU64, Ordering};

/// The most cuts [`Truncations`] keeps (16 bytes each); the two oldest merge beyond it.
const MAX_CUTS: usize = 1024;

/// The log's truncation sequence as a wait (or an append) read it: even, and counting a
/// truncation that was running at the read as one that came after it. A durability wait that
/// starts from it fails with [`Error::Truncated`](crate::Error::Truncated) if a truncation at
/// or below its offset came after it, even one that came before the wait itself began
/// (ARCHITECTURE.md §8, "Acknowledgements").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TruncationEpoch(u64);

impl TruncationEpoch {
    /// An epoch for tests of code that never waits on a log with it.
    #[cfg(test)]
    pub(crate) fn for_tests() -> TruncationEpoch {
        TruncationEpoch(0)
    }
}

/// See the [module docs](self).
#[derive(Debug, Default)]
pub(crate) struct Truncations {
    /// Odd while a truncation runs (ARCHITECTURE.md §3, invariant 15: under the writer mutex).
    sequence: AtomicU64,
    /// (the sequence a truncation began at, its cut), both rising.
    cuts: Mutex<VecDeque<(u64, i64)>>,
}

impl Truncations {
    /// The sequence: moves when a truncation begins and when it ends. Equal values read at two
    /// moments, the first even, mean no truncation began or ran in between.
    pub(crate) fn sequence(&self) -> u64 {
        self.sequence.load(Ordering::Acquire)
    }

    /// The epoch a wait or an append starts from now.
    pub(crate) fn epoch(&self) -> TruncationEpoch {
        TruncationEpoch(self.sequence() & !1)
    }

    /// Records a truncation that cuts every record at or above `cut`, before it changes
    /// anything; it ends when the guard drops (also on failure). The caller holds the writer
    /// mutex, so truncations never overlap.
    pub(crate) fn begin(&self, cut: i64) -> TruncationGuard<'_> {
        let mut cuts = self.cuts.lock();
        let began = self.sequence.load(Ordering::Relaxed) | 1;
        // Entries cut at or above this one can no longer be the lowest cut since any epoch.
        while cuts.back().is_some_and(|&(_, older)| older >= cut) {
            cuts.pop_back();
        }
        cuts.push_back((began, cut));
        if cuts.len() > MAX_CUTS
            && let (Some((_, oldest_cut)), Some(next)) = (cuts.pop_front(), cuts.front_mut())
        {
            // The merged entry tells the waits between the two of the older cut too: a
            // false "truncated", never a missed one.
            next.1 = oldest_cut;
        }
        // Under the history's lock: a wait that sees the new sequence finds the cut.
        self.sequence.store(began, Ordering::Release);
        TruncationGuard { truncations: self }
    }

    /// The lowest cut at or below `offset` of the truncations since `epoch`, if any.
    pub(crate) fn cut_since(&self, epoch: TruncationEpoch, offset: i64) -> Option<i64> {
        if self.sequence() == epoch.0 {
            return None;
        }
        let cuts = self.cuts.lock();
        let first_after = cuts.partition_point(|&(began, _)| began < epoch.0);
        cuts.get(first_after)
            .map(|&(_, cut)| cut)
            .filter(|&cut| cut <= offset)
    }
}

/// A truncation in progress: moves the sequence back to even when dropped.
#[derive(Debug)]
#[must_use = "the truncation ends when the guard drops"]
pub(crate) struct TruncationGuard<'a> {
    truncations: &'a Truncations,
}

impl Drop for TruncationGuard<'_> {
    fn drop(&mut self) {
        self.truncations.sequence.fetch_add(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_fails_only_for_a_cut_since_its_epoch_at_or_below_its_offset() {
        let truncations = Truncations::default();
        drop(truncations.begin(5));
        let after_the_first = truncations.epoch();
        assert_eq!(truncations.cut_since(after_the_first, 5), None);
        drop(truncations.begin(12));
        // The cut at 12 leaves offset 5 alone; the one at 5 came before the epoch.
        assert_eq!(truncations.cut_since(after_the_first, 5), None);
        assert_eq!(truncations.cut_since(after_the_first, 12), Some(12));
        assert_eq!(truncations.cut_since(after_the_first, 40), Some(12));
        // A wait from before both hears of the lower one.
        assert_eq!(truncations.cut_since(TruncationEpoch(0), 20), Some(5));
        assert_eq!(truncations.cut_since(TruncationEpoch(0), 4), None);
    }

    #[test]
    fn a_wait_made_during_a_truncation_hears_of_its_cut() {
        let truncations = Truncations::default();
        let running = truncations.begin(3);
        let during = truncations.epoch();
        assert_eq!(truncations.sequence() % 2, 1);
        drop(running);
        assert_eq!(truncations.cut_since(during, 7), Some(3));
        assert_eq!(truncations.sequence() % 2, 0);
        assert_eq!(truncations.cut_since(truncations.epoch(), 7), None);
    }

    #[test]
    fn a_lower_cut_replaces_the_higher_ones_before_it() {
        let truncations = Truncations::default();
        let epochs: Vec<TruncationEpoch> = [30, 20, 25]
            .into_iter()
            .map(|cut| {
                let epoch = truncations.epoch();
                drop(truncations.begin(cut));
                epoch
            })
            .collect();
        assert_eq!(truncations.cuts.lock().len(), 2, "30 is undercut by 20");
        assert_eq!(truncations.cut_since(epochs[0], 40), Some(20));
        assert_eq!(truncations.cut_since(epochs[1], 40), Some(20));
        assert_eq!(truncations.cut_since(epochs[2], 40), Some(25));
        assert_eq!(truncations.cut_since(epochs[2], 24), None);
    }

    #[test]
    fn rising_cuts_keep_a_bounded_history_that_never_misses_a_cut() {
        let truncations = Truncations::default();
        let mut epochs = Vec::new();
        for cut in 0..(MAX_CUTS as i64 + 100) {
            epochs.push((truncations.epoch(), cut));
            drop(truncations.begin(cut));
        }
        assert_eq!(truncations.cuts.lock().len(), MAX_CUTS);
        for &(epoch, cut) in &epochs {
            // Never missed; exact for the recent epochs.
            let told = truncations
                .cut_since(epoch, cut)
                .expect("a cut at its offset");
            assert!(told <= cut);
        }
        for &(epoch, cut) in &epochs[epochs.len() - MAX_CUTS + 1..] {
            assert_eq!(truncations.cut_since(epoch, cut), Some(cut));
            assert_eq!(truncations.cut_since(epoch, cut - 1), None);
        }
    }

    /// Model-checked with shuttle (`RUSTFLAGS="--cfg shuttle"`, see `crate::sync`).
    #[cfg(shuttle)]
    mod shuttle_tests {
        use super::*;
        use crate::sync::Arc;
        use crate::sync::atomic::AtomicI64;
        use crate::sync::thread;

        /// A record at offset 4 appended in the epoch a waiter holds; a truncation to 2 and a
        /// refill past 4 race the wait. The waiter reads the durable offset, then the record (as
        /// `WaitDurable::check` does): it must never call the refilled offset 4 durable.
        #[test]
        fn shuttle_a_wait_never_acknowledges_a_refill_of_its_offset() {
            crate::sync::check(
                "shuttle_a_wait_never_acknowledges_a_refill_of_its_offset",
                || {
                    let truncations = Arc::new(Truncations::default());
                    // The durable offset: 0 at first, then the refill's sync makes 6 durable.
                    let durable = Arc::new(AtomicI64::new(0));
                    let epoch = truncations.epoch();
                    let truncator = {
                        let (truncations, durable) =
                            (Arc::clone(&truncations), Arc::clone(&durable));
                        thread::spawn(move || {
                            let guard = truncations.begin(2);
                            drop(guard);
                            // The refill and its sync, after the truncation ended.
                            durable.store(6, Ordering::Release);
                        })
                    };
                    let durable_now = durable.load(Ordering::Acquire);
                    let cut = truncations.cut_since(epoch, 4);
                    assert!(
                        durable_now <= 4 || cut.is_some(),
                        "offset 4 called durable after a truncation to 2 refilled it"
                    );
                    truncator.join().unwrap();
                    assert_eq!(truncations.cut_since(epoch, 4), Some(2));
                },
            );
        }
    }
}
