//! What reads return: [`FetchData`] (whole batches, as Kafka's fetch returns them) and the
//! record iterator [`LogRecords`].

use std::os::fd::BorrowedFd;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::{Batch, TimestampType, peek_batch_frame};
use crate::segment::{Segment, SegmentRead};

/// How far a read may go. Default: [`ReadBound::LogEnd`].
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
///
/// The bytes live in a buffer that [`Log::read_into`](crate::Log::read_into) reuses: a reader
/// that keeps one `FetchData` and reads into it again and again allocates nothing per read once
/// the buffer has grown to its largest read. They are read with one positional read (`pread`)
/// from the segment's index entry in the common case, straight into that buffer.
#[derive(Debug, Default)]
pub struct FetchData {
    /// The reusable window; the returned batches are `buffer[range]`.
    buffer: Vec<u8>,
    range: std::ops::Range<usize>,
    /// The `.log` position of the first returned byte.
    position: u64,
    next_offset: i64,
    log_end_offset: i64,
    /// The segment the bytes came from, pinned for [`send_to`](Self::send_to), with its
    /// truncation sequence from before the bytes were read.
    segment: Option<(Arc<Segment>, u64)>,
}

impl FetchData {
    /// An empty fetch whose buffer can be handed to [`Log::read_into`](crate::Log::read_into).
    pub fn new() -> Self {
        FetchData::default()
    }

    /// Empties the fetch, keeping its buffer (take its resume point first), and marks it as
    /// found at `at`.
    pub(crate) fn clear_at(&mut self, at: i64, log_end_offset: i64) {
        self.range = 0..0;
        self.position = 0;
        self.next_offset = at;
        self.log_end_offset = log_end_offset;
        self.segment = None;
    }

    /// The buffer a read fills; [`fill`](Self::fill) says where the batches landed.
    pub(crate) fn buffer_mut(&mut self) -> &mut Vec<u8> {
        &mut self.buffer
    }

    /// Where the next sequential read may resume: the segment this fetch came from, the offset
    /// after its batches, and the file position after them. `None` for an empty fetch. The
    /// segment moves out of the fetch (no reference count changes hands twice per read); the
    /// read that follows clears the fetch anyway.
    pub(crate) fn take_resume_point(&mut self) -> Option<ResumePoint> {
        let (segment, _) = self.segment.take()?;
        (!self.range.is_empty()).then(|| ResumePoint {
            segment,
            next_offset: self.next_offset,
            next_position: self.position + self.range.len() as u64,
        })
    }

    /// Records what a segment read put into the buffer; `truncations` is the segment's
    /// truncation sequence taken before the read.
    pub(crate) fn fill(
        &mut self,
        read: &SegmentRead,
        at: usize,
        log_end_offset: i64,
        segment: Arc<Segment>,
        truncations: u64,
    ) {
        self.range = at..at + read.len;
        self.position = read.position;
        self.next_offset = read.next_offset;
        self.log_end_offset = log_end_offset;
        self.segment = Some((segment, truncations));
    }

    /// The raw batch bytes.
    pub fn bytes(&self) -> &[u8] {
        self.buffer.get(self.range.clone()).unwrap_or_default()
    }

    /// Whether the read found nothing (it was at the end of what the bound allows).
    pub fn is_empty(&self) -> bool {
        self.range.is_empty()
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
    ///
    /// The read checked every batch's CRC already; the views do not check it again.
    pub fn batches(&self) -> FetchBatches<'_> {
        FetchBatches { rest: self.bytes() }
    }

    /// Writes the batch bytes to `out` (a socket, a pipe or a file, in blocking mode) and
    /// returns how many bytes were written: all of [`bytes`](Self::bytes), in order.
    ///
    /// The kernel moves the bytes straight from the segment's file (`sendfile`, or
    /// `copy_file_range` to a regular file) when the storage has descriptors; otherwise, or when
    /// the kernel refuses both calls, the bytes this read checked are written.
    ///
    /// The file bytes sent are the bytes the read CRC-checked unless the log was truncated below
    /// them and appended to again in between. The segment's truncation sequence, taken before
    /// the read, is compared before the transfer (a truncation under way then, or begun since,
    /// sends the checked bytes instead) and after it: a truncation that raced the transfer fails
    /// the call with [`Error::Truncated`], since what was sent may differ from what was checked,
    /// and the caller must discard it.
    pub fn send_to(&self, out: BorrowedFd<'_>) -> Result<u64> {
        let bytes = self.bytes();
        let Some((segment, truncations)) = &self.segment else {
            return crate::storage::transfer_to(None, bytes, out);
        };
        if truncations % 2 == 1 || segment.truncation_sequence() != *truncations {
            return crate::storage::transfer_to(None, bytes, out);
        }
        let source: &dyn crate::storage::StorageFile = &**segment.log_file();
        let sent = crate::storage::transfer_to(Some((source, self.position)), bytes, out)?;
        if segment.truncation_sequence() != *truncations {
            return Err(Error::Truncated {
                at: self.next_offset,
            });
        }
        Ok(sent)
    }
}

/// Where a fetch ended, so that the next read of the same segment at its next offset can start
/// at the known file position instead of looking the offset up in the index.
#[derive(Debug)]
pub(crate) struct ResumePoint {
    segment: Arc<Segment>,
    next_offset: i64,
    next_position: u64,
}

impl ResumePoint {
    /// The file position to resume at, when reading `offset` in `segment`.
    pub(crate) fn position_for(&self, segment: &Arc<Segment>, offset: i64) -> Option<u64> {
        (Arc::ptr_eq(&self.segment, segment) && offset == self.next_offset)
            .then_some(self.next_position)
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
        // The segment read checked this batch's CRC moments ago, in this very buffer.
        Some(Batch::new_crc_checked(batch).map_err(|what| Error::InvalidBatch { what }))
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
