//! The segment's aborted-transaction index (`.txnindex`): the calls the log makes when it
//! writes an ABORT marker, serves a `read_committed` fetch, or checks a segment at open.
//!
//! The segment only stores what it is given: which transactions were aborted, and their offsets,
//! comes from the log's producer state (a segment knows nothing of other segments).

use super::log_segment::Segment;
use super::txn_index::{AbortedTxn, TransactionIndex, TxnIndexSearchResult};
use crate::error::Result;

impl Segment {
    /// The segment's `.txnindex`.
    pub fn txn_index(&self) -> &TransactionIndex {
        &self.txn_index
    }

    /// Records an aborted transaction whose ABORT marker this segment holds (see
    /// [`TransactionIndex::append`]: `lastOffset`s strictly increase, and none lies below the
    /// segment's base). The file is created with the first entry.
    pub fn append_aborted_txn(&self, txn: AbortedTxn) -> Result<()> {
        self.txn_index.append(txn)
    }

    /// The aborted transactions of this segment that overlap a fetch of
    /// `[fetch_offset, upper_bound)`, and whether later segments need not be searched (see
    /// [`TransactionIndex::collect`]).
    pub fn collect_aborted_txns(
        &self,
        fetch_offset: i64,
        upper_bound: i64,
    ) -> Result<TxnIndexSearchResult> {
        self.txn_index.collect(fetch_offset, upper_bound)
    }

    /// Checks the `.txnindex` (see [`TransactionIndex::sanity_check`]); a failure means the
    /// segment must be recovered to rebuild it.
    pub fn txn_index_sanity_check(&self) -> Result<()> {
        self.txn_index.sanity_check()
    }
}
