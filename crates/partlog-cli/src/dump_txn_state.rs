//! `partlog dump --txn-state`: the outcome of each transactional record's transaction, as a
//! read_committed consumer decides it. The decision is the library's (`Log::committed_records`,
//! the filter of Kafka's consumer), not a second implementation: a transactional record it
//! returns is committed; one it skips below the last stable offset is aborted; one at or above
//! it belongs to a transaction still open.

use std::iter::Peekable;

use partlog::{CommittedRecords, Log, ReadBound};

/// Walks the committed records beside the dump, which visits offsets in increasing order.
pub struct TxnStates<'a> {
    committed: Peekable<CommittedRecords<'a>>,
    /// The last stable offset when the dump began: records at or above it are "open". Read
    /// before the committed records, so that a transaction decided meanwhile shows as open (it
    /// was) or committed, never as aborted when it was not.
    last_stable: i64,
}

impl<'a> TxnStates<'a> {
    /// States for the records of `log` from offset `from` on.
    pub fn new(log: &'a Log, from: i64) -> Self {
        let last_stable = log.last_stable_offset();
        TxnStates {
            committed: log.committed_records(from, ReadBound::LogEnd).peekable(),
            last_stable,
        }
    }

    /// The state of the transactional data record at `offset`: "committed", "aborted" or
    /// "open". Offsets must come in increasing order.
    pub fn state(&mut self, offset: i64) -> partlog::Result<&'static str> {
        loop {
            match self.committed.peek() {
                Some(Ok(record)) if record.offset < offset => {
                    self.committed.next();
                }
                Some(Ok(record)) if record.offset == offset => return Ok("committed"),
                Some(Ok(_)) | None => break,
                Some(Err(_)) => {
                    if let Some(Err(error)) = self.committed.next() {
                        return Err(error);
                    }
                }
            }
        }
        Ok(if offset < self.last_stable {
            "aborted"
        } else {
            "open"
        })
    }
}
