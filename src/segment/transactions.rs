//! The segment's aborted-transaction index (`.txnindex`): the calls the log makes when it
//! writes an ABORT marker, serves a `read_committed` fetch, or checks a segment at open.
//!
//! The segment only stores what it is given: which transactions were aborted, and their offsets,
//! comes from the log's producer state (a segment knows nothing of other segments).

use super::log_segment::Segment;
use super::txn_index::{AbortedTxn, TransactionIndex, TxnIndexSearchResult};
use super::walker::{BatchWalker, Step, WINDOW_BYTES};
use crate::error::{Corruption, Result};
use crate::format::{
    BatchHeader, BatchView, ControlRecordType, EndTransactionMarker, RECORD_BATCH_OVERHEAD,
    control_record_type,
};

/// A batch at least this large is most likely followed by another as large: the walk then
/// reads just the next header instead of a window it would mostly skip.
const LARGE_BATCH_BYTES: u64 = 16 * 1024;

/// A transaction marker, as the producer-state replay needs it.
pub(crate) type Marker = (ControlRecordType, EndTransactionMarker);

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

    /// Calls `visit` with the header of every v2 batch from the one holding `from_offset` to the
    /// segment's end, in order, and for a COMMIT or ABORT marker with the marker; other
    /// control batches, and legacy messages (which have no producer id), are skipped.
    ///
    /// Only the 61-byte headers are read, and the whole batch only for control batches (whose
    /// CRC is checked): no CRC of a data batch is. It is for bytes this process has validated
    /// already, such as those recovery's scan just read: the producer-state replay after an
    /// unclean open would otherwise read the whole tail a second time.
    pub(crate) fn visit_batch_headers(
        &self,
        from_offset: i64,
        visit: &mut dyn FnMut(&BatchHeader, Option<Marker>) -> Result<()>,
    ) -> Result<()> {
        let view = self.read_view();
        let mut position = if from_offset <= self.base_offset {
            0
        } else {
            match self.translate_offset(from_offset, view)? {
                Some((frame, _)) => frame.position,
                None => return Ok(()),
            }
        };
        let mut walker = BatchWalker::new(&self.log, &self.log_path, view.end);
        let mut scratch = Vec::new();
        loop {
            let frame = match walker.frame_at(position)? {
                Step::Batch(frame) => frame,
                Step::End => return Ok(()),
                Step::Partial { available, needed } => {
                    return Err(self.corrupt(position, Corruption::Truncated { needed, available }));
                }
            };
            walker.set_read_ahead(if frame.total_size >= LARGE_BATCH_BYTES {
                RECORD_BATCH_OVERHEAD
            } else {
                WINDOW_BYTES
            });
            position = frame.position + frame.total_size;
            if frame.magic != 2 {
                continue;
            }
            let header = BatchHeader::parse(walker.fill(frame.position, RECORD_BATCH_OVERHEAD)?)
                .map_err(|what| self.corrupt(frame.position, what))?;
            if !header.is_control() {
                visit(&header, None)?;
                continue;
            }
            let bytes = walker.batch_bytes(&frame)?;
            let batch = BatchView::new(bytes).map_err(|what| self.corrupt(frame.position, what))?;
            let marker = match batch.records(&mut scratch)?.next() {
                Some(record) => {
                    let record = record?;
                    let kind = control_record_type(&record)?;
                    if !kind.is_transaction_marker() {
                        continue;
                    }
                    Some((kind, EndTransactionMarker::parse(&record)?))
                }
                None => None,
            };
            visit(&header, marker)?;
        }
    }

    /// Checks the `.txnindex` (see [`TransactionIndex::sanity_check`]); a failure means the
    /// segment must be recovered to rebuild it.
    pub fn txn_index_sanity_check(&self) -> Result<()> {
        self.txn_index.sanity_check()
    }
}
