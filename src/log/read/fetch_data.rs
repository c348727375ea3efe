//! What a read returns: [`FetchData`] (whole batches with their segment pinned, and what a
//! `read_committed` reader needs beside them), its batch iterator [`FetchBatches`], and the
//! options of a read ([`ReadBound`], [`Isolation`], [`ReadOptions`]); [`LogRecord`], a record
//! decoded from a batch.

use std::os::fd::BorrowedFd;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::{Batch, BatchHeader, BatchView, Record, TimestampType, peek_batch_frame};
use crate::segment::{AbortedTxn, Segment, SegmentRead};

use crate::segment::verified::VerifiedBatch;
use std::ops::ControlFlow;

/// How far a read may go. Default: [`ReadBound::LogEnd`].
///
/// `#[non_exhaustive]`: more bounds may come; match it with a wildcard arm.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReadBound {
    /// Up to the log end offset: everything appended, as a Kafka leader serves
    /// `read_uncommitted` consumers. A crash of the machine may take back the newest records.
    #[default]
    LogEnd,
    /// Only below [`durable_offset`](crate::Log::durable_offset): nothing a reader sees can
    /// disappear in a crash.
    Durable,
    /// Only below [`high_watermark`](crate::Log::high_watermark): what the replicas have
    /// committed, as a Kafka leader serves consumers (the log end offset until the high
    /// watermark is first set).
    HighWatermark,
}

/// Which records of transactions a read returns (Kafka's `isolation.level`). Default:
/// [`Isolation::ReadUncommitted`](crate::Isolation::ReadUncommitted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Isolation {
    /// Everything up to the read's bound, the data of open and aborted transactions included.
    #[default]
    ReadUncommitted,
    /// Only below the last stable offset
    /// ([`Log::last_stable_offset`](crate::Log::last_stable_offset)), with the aborted transactions
    /// in the range listed in [`FetchData::aborted_transactions`], so that the reader can skip
    /// their data ([`Log::committed_records`](crate::Log::committed_records) does). With
    /// [`ReadBound::Durable`] the read stops at the lower of the two bounds.
    ReadCommitted,
}

/// How [`Log::read_with`](crate::Log::read_with) reads: its bound and its isolation level.
///
/// ```
/// use partlog::{
///     BatchBuilder, Compression, FetchData, Isolation, Log, LogConfig, NewRecord, ReadBound,
///     ReadOptions,
/// };
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = tempfile::tempdir()?;
/// let log = Log::open(dir.path(), LogConfig::default())?;
/// let mut batch = BatchBuilder::new(Compression::None).producer(4, 0, 0).transactional(true);
/// batch.push(&NewRecord::now(None, Some(b"never happened")));
/// log.append_batch(&batch.build()?)?;
/// log.abort_transaction(4, 0)?;
///
/// // A read_committed read returns the batches below the last stable offset and lists the
/// // aborted transactions among them, for the reader to skip.
/// let options = ReadOptions::default()
///     .bound(ReadBound::LogEnd)
///     .isolation(Isolation::ReadCommitted);
/// let data: FetchData = log.read_with(0, 1 << 20, options)?;
/// assert_eq!(data.aborted_transactions().len(), 1);
/// assert_eq!(data.aborted_transactions()[0].producer_id, 4);
/// # Ok(())
/// # }
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReadOptions {
    /// How far the read may go. Default: [`ReadBound::LogEnd`].
    pub bound: ReadBound,
    /// Which transactional records it returns. Default:
    /// [`Isolation::ReadUncommitted`](crate::Isolation::ReadUncommitted).
    pub isolation: Isolation,
}

impl ReadOptions {
    /// These options with `bound`.
    pub fn bound(mut self, bound: ReadBound) -> Self {
        self.bound = bound;
        self
    }

    /// These options with `isolation`.
    pub fn isolation(mut self, isolation: Isolation) -> Self {
        self.isolation = isolation;
        self
    }
}

/// Whole record batches read from one segment, with the segment pinned.
///
/// The bytes are exactly the `.log` bytes (Kafka's disk format is its wire format), and every batch
/// in them has passed its CRC check. A log Kafka wrote before 0.11 may hold legacy (magic 0 and 1)
/// messages: they come back as they are stored, and [`FetchData::batches`] reads them too. Control
/// batches (transaction markers) are returned, flagged. A `read_uncommitted` read returns the
/// batches of open and aborted transactions too; a `read_committed` one
/// ([`Log::read_with`](crate::Log::read_with)) stops at the last stable offset and lists the
/// aborted transactions its batches may hold
/// ([`aborted_transactions`](Self::aborted_transactions)).
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
    /// The offset the read asked for: the first batch may start below it.
    requested_offset: i64,
    /// Where the read's bound ended when it ran: an empty read at an offset below it found a
    /// gap, and new data can only come at or above it.
    bound_end: i64,
    next_offset: i64,
    log_end_offset: i64,
    /// The segment the bytes came from, pinned for [`send_to`](Self::send_to), with its
    /// truncation sequence from before the bytes were read.
    segment: Option<(Arc<Segment>, u64)>,
    /// The last stable offset when the read ran.
    last_stable_offset: i64,
    /// The aborted transactions of a `read_committed` read's range.
    aborted: Vec<AbortedTxn>,
    /// Set for a point read's fetch: a read may answer from, and adds to, the log's
    /// [`VerifiedBatchCache`](crate::VerifiedBatchCache).
    point_read: bool,
    /// The checked copy the bytes are, when a point read found its batch in the cache (the
    /// buffer is then unused).
    verified: Option<Arc<VerifiedBatch>>,
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
        self.requested_offset = at;
        self.bound_end = at;
        self.next_offset = at;
        self.log_end_offset = log_end_offset;
        self.segment = None;
        self.aborted.clear();
        self.verified = None;
    }

    /// A fetch for point reads ([`point_read`](Self::point_read)).
    pub(crate) fn for_point_reads() -> Self {
        FetchData {
            point_read: true,
            ..FetchData::default()
        }
    }

    /// Whether this is a point read's fetch, which may use the verified-batch cache.
    pub(crate) fn point_read(&self) -> bool {
        self.point_read
    }

    /// The cached copy of the batch the read returned, if it came from the cache.
    pub(crate) fn verified(&self) -> Option<&Arc<VerifiedBatch>> {
        self.verified.as_ref()
    }

    /// Records that a point read's batch is `batch`, a copy the cache kept, of `segment`.
    pub(crate) fn fill_verified(
        &mut self,
        batch: Arc<VerifiedBatch>,
        log_end_offset: i64,
        segment: Arc<Segment>,
        truncations: u64,
    ) {
        self.range = 0..batch.bytes.len();
        self.position = batch.position;
        self.next_offset = batch.last_offset + 1;
        self.log_end_offset = log_end_offset;
        self.segment = Some((segment, truncations));
        self.verified = Some(batch);
    }

    /// The bounds a read ran under: the last stable offset then, and the end of the range it
    /// could read (`read_committed` stops at the LSO).
    pub(crate) fn set_bounds(&mut self, last_stable_offset: i64, bound_end: i64) {
        self.last_stable_offset = last_stable_offset;
        self.bound_end = bound_end;
    }

    /// The end of the range the last read could read.
    pub(crate) fn bound_end(&self) -> i64 {
        self.bound_end
    }

    /// Adds aborted transactions found for the read, in order.
    pub(crate) fn add_aborted(&mut self, aborted: impl IntoIterator<Item = AbortedTxn>) {
        self.aborted.extend(aborted);
    }

    /// Adds `txn` unless a transaction of the same producer and first offset is listed.
    pub(crate) fn add_aborted_once(&mut self, txn: AbortedTxn) {
        let listed = self.aborted.iter().any(|known| {
            known.producer_id == txn.producer_id && known.first_offset == txn.first_offset
        });
        if !listed {
            self.aborted.push(txn);
        }
    }

    /// Forgets the aborted transactions listed so far (the read runs again).
    pub(crate) fn clear_aborted(&mut self) {
        self.aborted.clear();
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
        if let Some(batch) = &self.verified {
            return &batch.bytes;
        }
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

    /// The offset the read asked for. The first batch holds it, so it may begin below it:
    /// [`for_each_record`](Self::for_each_record) starts exactly here.
    pub fn requested_offset(&self) -> i64 {
        self.requested_offset
    }

    /// Calls `visit` with each data record of the fetch in offset order, starting exactly at
    /// [`requested_offset`](Self::requested_offset): the records of the first batch below it
    /// are skipped, as are control batches (transaction markers). A compressed batch is
    /// decompressed into `scratch` (keep one and pass it again: it is reused). The records
    /// borrow the fetch's buffer or `scratch`, and live for one call of `visit`.
    ///
    /// Stops early when `visit` returns [`ControlFlow::Break`], and at the first record that
    /// fails to decode, whose error it returns.
    ///
    /// ```
    /// use std::ops::ControlFlow;
    /// use partlog::{Log, LogConfig, NewRecord, ReadBound};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = tempfile::tempdir()?;
    /// let log = Log::open(dir.path(), LogConfig::default())?;
    /// let ts = 1_700_000_000_000;
    /// log.append(&[
    ///     NewRecord::new(ts, None, Some(b"a")),
    ///     NewRecord::new(ts, None, Some(b"b")),
    ///     NewRecord::new(ts, None, Some(b"c")),
    /// ])?;
    /// let fetch = log.read(1, 1 << 20, ReadBound::LogEnd)?; // the whole batch, from offset 0
    /// let mut offsets = Vec::new();
    /// fetch.for_each_record(&mut Vec::new(), |record| {
    ///     offsets.push(record.offset);
    ///     ControlFlow::Continue(())
    /// })?;
    /// assert_eq!(offsets, [1, 2]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn for_each_record<F>(&self, scratch: &mut Vec<u8>, mut visit: F) -> Result<()>
    where
        F: FnMut(&Record<'_>) -> ControlFlow<()>,
    {
        for batch in self.batches() {
            let batch = batch?;
            if batch.is_control() || batch.next_offset() <= self.requested_offset {
                continue;
            }
            let mut records = batch.records(scratch)?;
            records.skip_below(self.requested_offset);
            for record in records {
                let record = record?;
                if record.offset < self.requested_offset {
                    continue;
                }
                if visit(&record).is_break() {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// The log end offset when the read ran.
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }

    /// The last stable offset when the read ran
    /// ([`Log::last_stable_offset`](crate::Log::last_stable_offset)).
    pub fn last_stable_offset(&self) -> i64 {
        self.last_stable_offset
    }

    /// For a `read_committed` read ([`Isolation::ReadCommitted`](crate::Isolation::ReadCommitted)),
    /// the aborted transactions that may have data among the returned batches: every one whose
    /// first offset lies below [`next_offset`](Self::next_offset) and whose ABORT marker lies at or
    /// above the read's offset, as Kafka's fetch response lists them. Empty for a
    /// `read_uncommitted` read.
    pub fn aborted_transactions(&self) -> &[AbortedTxn] {
        &self.aborted
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
    /// them and appended to again in between. The segment's truncation sequence, taken before the
    /// read, is compared before the transfer (a truncation under way then, or begun since, sends
    /// the checked bytes instead) and after it: a truncation that raced the transfer fails the call
    /// with [`Error::Truncated`](crate::Error::Truncated), since what was sent may differ from what
    /// was checked, and the caller must discard it.
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

    // Inlined into the caller's loop, in another crate: with the record iterator's `next`
    // (also inlined) the view and each record are built in place instead of copied out of a
    // call's return slot (a sequential read of 1-record batches: a fifth fewer instructions).
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let rest = self.rest;
        let (size, magic) = match peek_batch_frame(rest) {
            Ok(Some(frame)) => (frame.total_size(), frame.magic),
            Ok(None) => (rest.len().max(crate::format::HEADER_SIZE_UP_TO_MAGIC), 2),
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
        // The segment read checked this very buffer's batches moments ago, each in full (its
        // CRC and every header check): a v2 view only decodes the header again.
        if magic == 2
            && let Some(header) = batch.first_chunk::<{ crate::format::RECORD_BATCH_OVERHEAD }>()
        {
            return Some(Ok(Batch::V2(BatchView::read_checked(
                batch,
                BatchHeader::decode(header),
            ))));
        }
        Some(Batch::new(batch).map_err(|what| Error::InvalidBatch { what }))
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
    let mut records = batch.records(scratch)?;
    records.skip_below(from);
    for record in records {
        let record = record?;
        if record.offset < from {
            continue;
        }
        out.push(LogRecord::owned(&record, timestamp_type));
    }
    Ok(())
}

impl LogRecord {
    /// An owned copy of `record`, a record of a batch whose timestamps are `timestamp_type`.
    pub(crate) fn owned(record: &Record<'_>, timestamp_type: TimestampType) -> LogRecord {
        let headers = record
            .headers()
            .map(|h| {
                (
                    String::from_utf8_lossy(h.key).into_owned(),
                    h.value.map(<[u8]>::to_vec),
                )
            })
            .collect();
        LogRecord {
            offset: record.offset,
            timestamp: record.timestamp,
            timestamp_type,
            key: record.key.map(<[u8]>::to_vec),
            value: record.value.map(<[u8]>::to_vec),
            headers,
        }
    }
}
