//! Point reads: [`Log::read_record`](crate::Log::read_record) and
//! [`Log::read_record_into`](crate::Log::read_record_into), one record by its offset, with the
//! bounds, isolation and errors of [`Log::read_with`](crate::Log::read_with).
//!
//! A point read is a read of the one batch holding the offset (`max_bytes` 1: the read path
//! returns exactly one batch), then a step to the record inside it. What it returns is found in
//! bytes the read checked, as every read's are (ARCHITECTURE.md §5).

use crate::error::Result;
use crate::format::{Batch, Record, TimestampType};

use super::fetch_data::{FetchData, Isolation, LogRecord, ReadOptions};
use crate::log::Shared;

/// The reusable state of point reads ([`Log::read_record_into`](crate::Log::read_record_into)):
/// the buffer the batch holding a record is read into, and the scratch a compressed batch is
/// decompressed into. The record a read returns borrows it; keep one and pass it again, and
/// reads allocate nothing once its buffers have grown.
#[derive(Debug)]
pub struct RecordRead {
    fetch: FetchData,
    scratch: Vec<u8>,
    timestamp_type: TimestampType,
}

impl Default for RecordRead {
    fn default() -> Self {
        RecordRead::new()
    }
}

impl RecordRead {
    /// An empty one.
    pub fn new() -> Self {
        RecordRead {
            fetch: FetchData::for_point_reads(),
            scratch: Vec::new(),
            timestamp_type: TimestampType::default(),
        }
    }

    /// What the timestamp of the record the last read returned means: its batch's timestamp
    /// type.
    pub fn timestamp_type(&self) -> TimestampType {
        self.timestamp_type
    }

    /// The data record at exactly `offset` in the batch the last read returned, if there is
    /// one that a reader at `isolation` sees: none in a gap (compaction removed the offset), at
    /// a control record, in a transaction listed as aborted (`read_committed`), or at the end
    /// of the read's bound.
    fn record_at(
        &mut self,
        offset: i64,
        isolation: Isolation,
    ) -> Result<Option<(Record<'_>, TimestampType)>> {
        let RecordRead {
            fetch,
            scratch,
            timestamp_type,
        } = self;
        let fetch: &FetchData = fetch;
        // A cached batch of many records knows where every fourth starts: a step over at most
        // three others. Looked up first, so that the bytes arrive while the header is parsed.
        let start = fetch
            .verified()
            .and_then(|verified| verified.record_start(offset));
        let Some(batch) = fetch.batches().next() else {
            return Ok(None);
        };
        let batch = batch?;
        if batch.is_control() || batch.last_offset() < offset {
            return Ok(None);
        }
        if isolation == Isolation::ReadCommitted && is_aborted(&batch, fetch) {
            return Ok(None);
        }
        *timestamp_type = batch.timestamp_type();
        let found_type = *timestamp_type;
        if let (Some((pos, index)), Batch::V2(view)) = (start, batch) {
            let mut records = view.into_records(scratch)?;
            records.seek(pos, index);
            records.skip_below(offset);
            let record = records.next().transpose()?;
            return Ok(record
                .filter(|record| record.offset == offset)
                .map(|record| (record, found_type)));
        }
        let mut records = batch.into_records(scratch)?;
        records.skip_below(offset);
        for record in records {
            let record = record?;
            if record.offset >= offset {
                return Ok((record.offset == offset).then_some((record, found_type)));
            }
        }
        Ok(None)
    }
}

/// Whether `batch` is data of a transaction `fetch` lists as aborted: a transactional batch of
/// a producer with an aborted transaction that began at or before the batch and whose ABORT
/// marker comes after it (Kafka's consumer applies the same rule, batch by batch).
fn is_aborted(batch: &Batch<'_>, fetch: &FetchData) -> bool {
    let Some(header) = batch.header() else {
        return false;
    };
    if !header.is_transactional() {
        return false;
    }
    let last = header.last_offset();
    fetch.aborted_transactions().iter().any(|txn| {
        txn.producer_id == header.producer_id && txn.first_offset <= last && last < txn.last_offset
    })
}

impl Shared {
    /// See [`Log::read_record_into`](crate::Log::read_record_into).
    pub(in crate::log) fn read_record_into<'r>(
        &self,
        offset: i64,
        options: ReadOptions,
        read: &'r mut RecordRead,
    ) -> Result<Option<(Record<'r>, TimestampType)>> {
        // One byte: the read returns the batch holding `offset` (or the next one), and no more.
        self.read_with_into(offset, 1, options, &mut read.fetch)?;
        read.record_at(offset, options.isolation)
    }

    /// See [`Log::read_record`](crate::Log::read_record).
    pub(in crate::log) fn read_record(
        &self,
        offset: i64,
        options: ReadOptions,
    ) -> Result<Option<LogRecord>> {
        let mut read = RecordRead::new();
        let found = self.read_record_into(offset, options, &mut read)?;
        Ok(found.map(|(record, timestamp_type)| LogRecord::owned(&record, timestamp_type)))
    }
}
