//! What reads return: [`FetchData`] (whole batches, as Kafka's fetch returns them) and the
//! record iterator [`LogRecords`].

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::{Batch, TimestampType, peek_batch_frame};
use crate::segment::Segment;

/// How far a read may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReadBound {
    /// Up to the log end offset: everything appended, as a Kafka leader serves
    /// `read_uncommitted` consumers. A crash of the machine may take back the newest records.
    #[default]
    LogEnd,
    /// Only below [`durable_offset`](crate::Log::durable_offset): nothing a reader sees can
    /// disappear in a crash.
    Durable,
}

/// Whole record batches read from one segment, with the segment pinned.
///
/// The bytes are exactly the `.log` bytes (Kafka's disk format is its wire format), and every
/// batch in them has passed its CRC check. A log Kafka wrote before 0.11 may hold legacy
/// (magic 0 and 1) messages: they come back as they are stored, and [`FetchData::batches`]
/// reads them too. Until transactions land, batches of aborted
/// transactions are returned too (`read_uncommitted`); control batches are returned, flagged.
#[derive(Debug)]
pub struct FetchData {
    bytes: Vec<u8>,
    next_offset: i64,
    log_end_offset: i64,
    /// Keeps the segment's descriptor alive for zero-copy transfers added later.
    _segment: Option<Arc<Segment>>,
}

impl FetchData {
    pub(crate) fn new(
        bytes: Vec<u8>,
        next_offset: i64,
        log_end_offset: i64,
        segment: Option<Arc<Segment>>,
    ) -> Self {
        FetchData {
            bytes,
            next_offset,
            log_end_offset,
            _segment: segment,
        }
    }

    pub(crate) fn empty(at: i64, log_end_offset: i64) -> Self {
        FetchData::new(Vec::new(), at, log_end_offset, None)
    }

    /// The raw batch bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Whether the read found nothing (it was at the end of what the bound allows).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The offset to read next: one past the last returned batch.
    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }

    /// The log end offset when the read ran.
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }

    /// The batches, as borrowed views of either kind: v2 batches and legacy messages.
    /// [`Batch::records`] reads the records of both; [`Batch::is_control`] tells a control batch
    /// apart, and [`Batch::header`] gives a v2 batch's header.
    pub fn batches(&self) -> FetchBatches<'_> {
        FetchBatches { rest: &self.bytes }
    }
}

/// Iterator over the batches of a [`FetchData`].
#[derive(Debug)]
pub struct FetchBatches<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for FetchBatches<'a> {
    type Item = Result<Batch<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let rest = self.rest;
        let size = match peek_batch_frame(rest) {
            Ok(Some(frame)) => frame.total_size(),
            Ok(None) => rest.len().max(crate::format::HEADER_SIZE_UP_TO_MAGIC),
            Err(what) => {
                self.rest = &[];
                return Some(Err(Error::InvalidBatch { what }));
            }
        };
        let Some((batch, tail)) = (size <= rest.len()).then(|| rest.split_at(size)) else {
            self.rest = &[];
            return Some(Err(Error::InvalidBatch {
                what: crate::error::Corruption::Truncated {
                    needed: size as u64,
                    available: rest.len() as u64,
                },
            }));
        };
        self.rest = tail;
        Some(Batch::decode(batch))
    }
}

/// A record read from the log, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    /// The record's offset.
    pub offset: i64,
    /// Its timestamp: CreateTime from the producer, or the log's append time under LogAppendTime;
    /// -1 for a legacy magic 0 message, which has none.
    pub timestamp: i64,
    /// Which kind of timestamp it is.
    pub timestamp_type: TimestampType,
    /// The key; `None` for a null key.
    pub key: Option<Vec<u8>>,
    /// The value; `None` for a tombstone.
    pub value: Option<Vec<u8>>,
    /// The headers, in order (none for a legacy message). Keys are decoded as UTF-8 with
    /// replacement, as Kafka's clients do.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

/// Decodes the data records of one batch of any kind at or above `from` into `out`. Control
/// batches add nothing.
pub(crate) fn decode_records(
    batch: &Batch<'_>,
    from: i64,
    scratch: &mut Vec<u8>,
    out: &mut Vec<LogRecord>,
) -> Result<()> {
    if batch.is_control() {
        return Ok(());
    }
    let timestamp_type = batch.timestamp_type();
    for record in batch.records(scratch)? {
        let record = record?;
        if record.offset < from {
            continue;
        }
        let headers = record
            .headers()
            .map(|h| {
                (
                    String::from_utf8_lossy(h.key).into_owned(),
                    h.value.map(<[u8]>::to_vec),
                )
            })
            .collect();
        out.push(LogRecord {
            offset: record.offset,
            timestamp: record.timestamp,
            timestamp_type,
            key: record.key.map(<[u8]>::to_vec),
            value: record.value.map(<[u8]>::to_vec),
            headers,
        });
    }
    Ok(())
}
