//! [`TxnView`]: what readers need of the producer state without the writer mutex: the first
//! unstable offset (a `read_committed` read's bound), the highest base of a segment with a
//! `.txnindex`, and the aborted transactions a read-only log's replay met.
//!
//! The producer state itself ([`ProducerStateManager`]) is behind the writer mutex; after each
//! change to it the writer publishes its first unstable offset here, before the log end moves
//! past the batch that changed it.

use crate::segment::AbortedTxn;
use crate::sync::Mutex;
use crate::sync::atomic::{AtomicI64, Ordering};

use super::producer_state::ProducerStateManager;

/// See the [module docs](self).
#[derive(Debug)]
pub(in crate::log) struct TxnView {
    /// The producer state's first unstable offset (`i64::MAX` when none), published under the
    /// writer lock before the log end moves past a transactional batch: a `read_committed`
    /// read, which takes no writer lock, bounds itself by it.
    first_unstable: AtomicI64,
    /// The highest base of a segment that has held a `.txnindex` since open (-1: none): a
    /// `read_committed` read searches no segment above it for aborted transactions.
    last_txn_index_base: AtomicI64,
    /// A read-only log's aborted transactions that its replay met (at open, and at each live
    /// poll): with the `.txnindex` files, what its `read_committed` reads skip. Empty for a
    /// writable log, whose own appends index every ABORT.
    replayed_aborted: Mutex<Vec<AbortedTxn>>,
}

impl TxnView {
    /// What an open loaded: `state`'s first unstable offset, the highest `.txnindex` base of
    /// the directory, and the aborted transactions a read-only open's replay met.
    pub(in crate::log) fn new(
        state: &ProducerStateManager,
        last_txn_index_base: i64,
        replayed_aborted: Vec<AbortedTxn>,
    ) -> TxnView {
        TxnView {
            first_unstable: AtomicI64::new(first_unstable_of(state)),
            last_txn_index_base: AtomicI64::new(last_txn_index_base),
            replayed_aborted: Mutex::new(replayed_aborted),
        }
    }

    /// The first unstable offset last published, `i64::MAX` when none.
    pub(in crate::log) fn first_unstable(&self) -> i64 {
        self.first_unstable.load(Ordering::Acquire)
    }

    /// Publishes `state`'s first unstable offset for readers (under the writer mutex).
    pub(in crate::log) fn publish(&self, state: &ProducerStateManager) {
        self.first_unstable
            .store(first_unstable_of(state), Ordering::Release);
    }

    /// The highest base of a segment that has held a `.txnindex` since open, `-1` if none.
    pub(in crate::log) fn last_txn_index_base(&self) -> i64 {
        self.last_txn_index_base.load(Ordering::Acquire)
    }

    /// The segment at `base` holds a `.txnindex` now.
    pub(in crate::log) fn note_txn_index(&self, base: i64) {
        self.last_txn_index_base.fetch_max(base, Ordering::AcqRel);
    }

    /// The aborted transactions a read-only log's replay met that overlap a fetch of
    /// `[offset, upper_bound)`.
    pub(in crate::log) fn replayed_aborted_in(
        &self,
        offset: i64,
        upper_bound: i64,
    ) -> Vec<AbortedTxn> {
        self.replayed_aborted
            .lock()
            .iter()
            .filter(|txn| txn.first_offset < upper_bound && txn.last_offset >= offset)
            .copied()
            .collect()
    }

    /// A replay from the start met `aborted`: it replaces what earlier ones met.
    pub(in crate::log) fn replace_replayed_aborted(&self, aborted: Vec<AbortedTxn>) {
        *self.replayed_aborted.lock() = aborted;
    }

    /// A replay of the batches since the last one met `aborted`.
    pub(in crate::log) fn extend_replayed_aborted(&self, aborted: Vec<AbortedTxn>) {
        self.replayed_aborted.lock().extend(aborted);
    }
}

fn first_unstable_of(state: &ProducerStateManager) -> i64 {
    state.first_unstable_offset().unwrap_or(i64::MAX)
}
