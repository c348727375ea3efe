//! [`Log::committed_records`](crate::Log::committed_records): the records a `read_committed` Kafka
//! consumer returns. The reads stop at the last stable offset and list the aborted transactions of
//! their range; this iterator applies the consumer's filter to them (Kafka's `CompletedFetch`):
//! - a min-heap of the listed aborted transactions, by first offset;
//! - before each batch with a producer id, every listed transaction whose first offset is at or
//!   below the batch's last offset moves into the set of aborted producers;
//! - an ABORT marker of producer P takes P out of the set; control batches are never returned;
//! - the transactional batches of a producer in the set are skipped.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};

use crate::error::Result;
use crate::format::{Batch, ControlRecordType, control_record_type};

use super::fetch_data::{FetchData, Isolation, LogRecord, ReadBound, ReadOptions, decode_records};
use crate::log::Shared;

/// The iterator of [`Log::committed_records`](crate::Log::committed_records).
#[derive(Debug)]
pub struct CommittedRecords<'a> {
    shared: &'a Shared,
    position: i64,
    options: ReadOptions,
    buffered: std::vec::IntoIter<LogRecord>,
    scratch: Vec<u8>,
    fetch: FetchData,
    /// Listed aborted transactions not yet reached: (first offset, producer id).
    aborted: BinaryHeap<Reverse<(i64, i64)>>,
    /// Producers whose batches are aborted data until their ABORT marker.
    aborted_producers: HashSet<i64>,
    /// The end of the last read: the filter's state covers every batch below it, so no read
    /// may start below it again (a marker already taken would not be seen twice).
    fetched_to: i64,
    failed: bool,
}

impl<'a> CommittedRecords<'a> {
    /// `shared`'s committed records from `offset` within `bound`.
    pub(in crate::log) fn new(shared: &'a Shared, offset: i64, bound: ReadBound) -> Self {
        CommittedRecords {
            shared,
            position: offset,
            options: ReadOptions::default()
                .bound(bound)
                .isolation(Isolation::ReadCommitted),
            buffered: Vec::new().into_iter(),
            scratch: Vec::new(),
            fetch: FetchData::new(),
            aborted: BinaryHeap::new(),
            aborted_producers: HashSet::new(),
            fetched_to: offset,
            failed: false,
        }
    }
}

impl CommittedRecords<'_> {
    /// The offset the iterator will read next.
    pub fn position(&self) -> i64 {
        self.position
    }

    /// Applies the consumer's filter to one batch, decoding the records it keeps.
    fn take_batch(&mut self, batch: &Batch<'_>, records: &mut Vec<LogRecord>) -> Result<()> {
        let Some(header) = batch.header().copied() else {
            // A legacy message has no producer id and no transaction.
            return decode_records(batch, self.position, &mut self.scratch, records);
        };
        if header.producer_id >= 0 {
            while let Some(&Reverse((first_offset, producer_id))) = self.aborted.peek() {
                if first_offset > header.last_offset() {
                    break;
                }
                self.aborted.pop();
                self.aborted_producers.insert(producer_id);
            }
        }
        if header.is_control() {
            let mut scratch = Vec::new();
            if let Some(record) = batch.records(&mut scratch)?.next() {
                let record = record?;
                if control_record_type(&record)? == ControlRecordType::Abort {
                    self.aborted_producers.remove(&header.producer_id);
                }
            }
            return Ok(());
        }
        if header.is_transactional() && self.aborted_producers.contains(&header.producer_id) {
            return Ok(());
        }
        decode_records(batch, self.position, &mut self.scratch, records)
    }
}

impl Iterator for CommittedRecords<'_> {
    type Item = Result<LogRecord>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(record) = self.buffered.next() {
                self.position = record.offset + 1;
                return Some(Ok(record));
            }
            if self.failed {
                return None;
            }
            self.position = self.position.max(self.fetched_to);
            let mut fetch = std::mem::take(&mut self.fetch);
            if let Err(error) =
                self.shared
                    .read_with_into(self.position, 1 << 20, self.options, &mut fetch)
            {
                self.failed = true;
                return Some(Err(error));
            }
            if fetch.is_empty() {
                self.fetch = fetch;
                return None;
            }
            for txn in fetch.aborted_transactions() {
                self.aborted
                    .push(Reverse((txn.first_offset, txn.producer_id)));
            }
            let mut records = Vec::new();
            for batch in fetch.batches() {
                if let Err(error) = batch.and_then(|batch| self.take_batch(&batch, &mut records)) {
                    self.failed = true;
                    return Some(Err(error));
                }
            }
            self.fetched_to = fetch.next_offset();
            if records.is_empty() {
                self.position = self.position.max(self.fetched_to);
            }
            self.fetch = fetch;
            self.buffered = records.into_iter();
        }
    }
}
