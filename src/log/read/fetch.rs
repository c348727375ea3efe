//! Reads: [`Log::read`](crate::Log::read) and [`Log::read_into`](crate::Log::read_into) (whole
//! batches, as Kafka's fetch returns them, in a [`FetchData`]), the record iterator
//! [`Log::records`](crate::Log::records) ([`LogRecords`]), and
//! [`Log::offset_for_timestamp`](crate::Log::offset_for_timestamp).
//!
//! Reads pin segments through the snapshot; in a writable log they take no writer lock (only a live
//! reader's poll does). A truncation that overtakes a read is detected (the read tries again or
//! fails with [`Error::Truncated`](crate::Error::Truncated)), never returned as data
//! (ARCHITECTURE.md §3, invariant 16).

use std::os::fd::BorrowedFd;
use std::sync::Arc;

use crate::error::{Corruption, Error, Result};
use crate::format::{Batch, BatchHeader, BatchView, Record, TimestampType, peek_batch_frame};
use crate::segment::{AbortedTxn, Segment, SegmentRead};
use std::ops::ControlFlow;

use super::records::ReadEnd;
use crate::log::Shared;
use crate::log::files::checkpoint::gaps_between_segments_are_legal;
use crate::log::segments::snapshot::SegmentList;

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
/// use partlog::{Isolation, ReadBound, ReadOptions};
///
/// let options = ReadOptions::default()
///     .bound(ReadBound::Durable)
///     .isolation(Isolation::ReadCommitted);
/// assert_eq!(options.isolation, Isolation::ReadCommitted);
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

/// The iterator of [`Log::records`](crate::Log::records) and
/// [`Log::records_until`](crate::Log::records_until).
#[derive(Debug)]
pub struct LogRecords<'a> {
    shared: &'a Shared,
    position: i64,
    bound: ReadBound,
    /// Where the records end; a timestamp is turned into an offset at the first `next`.
    end: ReadEnd,
    buffered: std::vec::IntoIter<LogRecord>,
    scratch: Vec<u8>,
    /// Reused by every fetch, so that the iterator's reads allocate no new buffers.
    fetch: FetchData,
    /// Set after an error, or once the end is reached: the iterator has ended.
    finished: bool,
}

impl<'a> LogRecords<'a> {
    /// An iterator over the records from `offset` below `end`.
    pub(in crate::log) fn new(
        shared: &'a Shared,
        offset: i64,
        bound: ReadBound,
        end: ReadEnd,
    ) -> Self {
        LogRecords {
            shared,
            position: offset,
            bound,
            end,
            buffered: Vec::new().into_iter(),
            scratch: Vec::new(),
            fetch: FetchData::new(),
            finished: false,
        }
    }

    /// The offset the iterator will read next.
    pub fn position(&self) -> i64 {
        self.position
    }

    /// Whether the iterator has ended for good: after an error, or at its end offset. Without
    /// either, a `None` from `next` means only that the bound was reached: a later call may
    /// find new records.
    /// The offset a tail waits for after `next` returned `None`: its position, or the end of
    /// the last read's bound if that read found only a gap above the position (data can then
    /// come only above it, and waiting at the position would find it there at once).
    pub(in crate::log) fn waiting_offset(&self) -> i64 {
        self.position.max(self.fetch.bound_end)
    }

    pub(in crate::log) fn is_finished(&self) -> bool {
        self.finished || self.end_offset().is_some_and(|end| self.position >= end)
    }

    /// The offset the records end below, once known: the end offset given, or the one a
    /// timestamp end resolved to at the first `next`. `None` without an end, or before then.
    pub fn end_offset(&self) -> Option<i64> {
        match self.end {
            ReadEnd::Offset(end) => Some(end),
            _ => None,
        }
    }

    /// Turns a timestamp end into an offset: the first record at or after it, or the log end
    /// offset when every record is older.
    fn resolve_end(&mut self) -> Result<()> {
        if let ReadEnd::Timestamp(timestamp) = self.end {
            let end = match self.shared.offset_for_timestamp(timestamp)? {
                Some((offset, _)) => offset,
                None => self.shared.log_end_offset(),
            };
            self.end = ReadEnd::Offset(end);
        }
        Ok(())
    }
}

impl Iterator for LogRecords<'_> {
    type Item = Result<LogRecord>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        if let Err(error) = self.resolve_end() {
            self.finished = true;
            return Some(Err(error));
        }
        let end = self.end_offset();
        loop {
            if let Some(record) = self.buffered.next() {
                if end.is_some_and(|end| record.offset >= end) {
                    // Done: nothing at or above the end is returned, now or later.
                    self.buffered = Vec::new().into_iter();
                    self.finished = true;
                    return None;
                }
                self.position = record.offset + 1;
                return Some(Ok(record));
            }
            if self.finished || end.is_some_and(|end| self.position >= end) {
                return None;
            }
            let fetch = &mut self.fetch;
            if let Err(error) = self
                .shared
                .read_into(self.position, 1 << 20, self.bound, fetch)
            {
                self.finished = true;
                return Some(Err(error));
            }
            if fetch.is_empty() {
                return None;
            }
            let mut records = Vec::new();
            for batch in fetch.batches() {
                let result = batch.and_then(|batch| {
                    decode_records(&batch, self.position, &mut self.scratch, &mut records)
                });
                if let Err(error) = result {
                    self.finished = true;
                    return Some(Err(error));
                }
            }
            // Skip over batches that held only control records or records below the position.
            self.position = self.position.max(fetch.next_offset());
            if let Some(first) = records.first() {
                self.position = first.offset;
            }
            self.buffered = records.into_iter();
        }
    }
}

impl Shared {
    /// See [`Log::read`](crate::Log::read).
    pub(in crate::log) fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        bound: ReadBound,
    ) -> Result<FetchData> {
        let mut fetch = FetchData::new();
        self.read_into(offset, max_bytes, bound, &mut fetch)?;
        Ok(fetch)
    }

    /// See [`Log::read_with`](crate::Log::read_with).
    pub(in crate::log) fn read_with(
        &self,
        offset: i64,
        max_bytes: usize,
        options: ReadOptions,
    ) -> Result<FetchData> {
        let mut fetch = FetchData::new();
        self.read_with_into(offset, max_bytes, options, &mut fetch)?;
        Ok(fetch)
    }

    /// See [`Log::read_into`](crate::Log::read_into).
    pub(in crate::log) fn read_into(
        &self,
        offset: i64,
        max_bytes: usize,
        bound: ReadBound,
        fetch: &mut FetchData,
    ) -> Result<()> {
        self.read_with_into(
            offset,
            max_bytes,
            ReadOptions::default().bound(bound),
            fetch,
        )
    }

    /// See [`Log::read_with_into`](crate::Log::read_with_into).
    pub(in crate::log) fn read_with_into(
        &self,
        offset: i64,
        max_bytes: usize,
        options: ReadOptions,
        fetch: &mut FetchData,
    ) -> Result<()> {
        let resume = fetch.take_resume_point();
        fetch.clear_at(offset, 0);
        self.check_open()?;
        self.poll_live();
        match self.read_current(offset, max_bytes, options, resume.as_ref(), fetch) {
            // A live writer deleted a segment this view still lists (retention, a truncation)
            // since the last poll, or cut one and writes it again: look again, and answer from
            // what is there now. Real damage is met again, and reported.
            Err(error)
                if self.live.is_some()
                    && (error.io_kind() == Some(std::io::ErrorKind::NotFound)
                        || matches!(error, Error::Corrupt { .. })) =>
            {
                fetch.clear_at(offset, 0);
                if self.refresh().is_err() {
                    return Err(error);
                }
                self.read_current(offset, max_bytes, options, None, fetch)
            }
            other => other,
        }
    }

    /// [`read`](Self::read) on the log's current view.
    fn read_current(
        &self,
        offset: i64,
        max_bytes: usize,
        options: ReadOptions,
        resume: Option<&ResumePoint>,
        fetch: &mut FetchData,
    ) -> Result<()> {
        // A try finds nothing below its bound when a truncation overtook it; a new one finds
        // the offset written again, or the truncation below it (or, in the rare legitimate
        // case, the same gap at the end of the bound, and ends with nothing once more).
        const MAX_OVERTAKEN_READS: u32 = 4;
        for _ in 1..MAX_OVERTAKEN_READS {
            if !self.read_current_once(offset, max_bytes, options, resume, fetch)? {
                return Ok(());
            }
        }
        self.read_current_once(offset, max_bytes, options, resume, fetch)
            .map(|_| ())
    }

    /// One try of [`read_current`](Self::read_current): `Ok(true)` when it found nothing
    /// below the bound it read to, though the log ended above `offset` when it began: a
    /// truncation may have taken the offset away and appends brought it back since, so that a
    /// new try may find it.
    fn read_current_once(
        &self,
        offset: i64,
        max_bytes: usize,
        options: ReadOptions,
        resume: Option<&ResumePoint>,
        fetch: &mut FetchData,
    ) -> Result<bool> {
        let shared = self;
        let end = shared.readable_end();
        let start = self.log_start_offset();
        if offset > end && offset <= shared.view.highest_cut_end() {
            return Err(Error::Truncated { at: end });
        }
        if offset < start || offset > end {
            return Err(Error::OffsetOutOfRange {
                requested: offset,
                start,
                end,
            });
        }
        let last_stable_offset = shared.last_stable_offset();
        let upper = match options.bound {
            ReadBound::LogEnd => end,
            ReadBound::Durable => self.durable_offset().min(end),
            ReadBound::HighWatermark => shared.high_watermark().min(end),
        };
        let read_committed = options.isolation == Isolation::ReadCommitted;
        let upper = if read_committed {
            upper.min(last_stable_offset)
        } else {
            upper
        };
        fetch.clear_at(offset, end);
        fetch.last_stable_offset = last_stable_offset;
        fetch.bound_end = upper;
        if offset >= upper {
            return Ok(false);
        }
        'retry: loop {
            let list = shared.view.segments().load();
            // Retention moves the start before it swaps segments out: a list without the
            // segment holding `offset` comes with a start above it.
            let start = self.log_start_offset();
            if offset < start {
                return Err(Error::OffsetOutOfRange {
                    requested: offset,
                    start,
                    end,
                });
            }
            let mut index = list.floor_index(offset);
            while let Some(handle) = list.handles().get(index) {
                if handle.base_offset() >= upper {
                    break;
                }
                let Some(segment) = shared.view.segments().pin(handle)? else {
                    continue 'retry;
                };
                let from = offset.max(handle.base_offset());
                let resume_at = resume.and_then(|point| point.position_for(&segment, from));
                // Before the read: `send_to` may send the file's bytes only if no truncation
                // was under way or began since.
                let segment_truncations = segment.truncation_sequence();
                let found = segment.read_in_place(
                    from,
                    max_bytes,
                    Some(upper),
                    resume_at,
                    fetch.buffer_mut(),
                )?;
                if let Some((read, at)) = found {
                    // Before `fill` hands the pin to the fetch: the aborted transactions come
                    // from the view the batches came from, this segment first.
                    if read_committed
                        && !self.collect_aborted(&list, index, &segment, offset, &read, fetch)?
                    {
                        // A segment they may be listed in left the log after the batches were
                        // read (a compaction swap, retention, a truncation): the batches may
                        // hold data whose ABORT only that segment listed. Read again from the
                        // current list, batches and aborted transactions both.
                        fetch.aborted.clear();
                        continue 'retry;
                    }
                    fetch.fill(&read, at, end, segment, segment_truncations);
                    return Ok(false);
                }
                // Nothing at or above `from` here: the read moves on to the next segment.
                if let Some(next) = list.handles().get(index + 1)
                    && next.base_offset() < upper
                {
                    self.check_continuity(
                        &list,
                        &segment,
                        segment_truncations,
                        next.base_offset(),
                    )?;
                }
                index += 1;
            }
            // Nothing below `upper`, which the log end covered when the read began: if the log
            // now ends at or below `offset`, a truncation took it away meanwhile.
            let list = shared.view.segments().load();
            let data_end = list.active().and_then(|handle| handle.if_open());
            if let Some(at) = data_end.map(|active| active.next_offset())
                && at <= offset
            {
                return Err(Error::Truncated { at });
            }
            return Ok(true);
        }
    }

    /// Kafka's `collectAbortedTransactions` for a fetch from `offset` whose batches `read` took
    /// from `segment`, the one at `index` in `list`: the `.txnindex` entries of that segment and
    /// of the later ones in `list` that overlap the fetch, until a segment's search says no
    /// later transaction can. `Ok(false)` when a later segment of `list` has left the log since
    /// (its handle can no longer be pinned): what it listed cannot be read from this view, and
    /// the caller reads again (ARCHITECTURE.md §8, "A `read_committed` reader").
    fn collect_aborted(
        &self,
        list: &SegmentList,
        index: usize,
        segment: &Arc<Segment>,
        offset: i64,
        read: &SegmentRead,
        fetch: &mut FetchData,
    ) -> Result<bool> {
        let upper_bound = read.next_offset;
        // No segment above the last one that ever held a `.txnindex` has entries.
        let last_indexed = self.txn.last_txn_index_base();
        for (n, handle) in list.handles().iter().skip(index).enumerate() {
            if handle.base_offset() > last_indexed {
                break;
            }
            let later;
            let searched = if n == 0 {
                segment
            } else {
                let Some(pinned) = self.view.segments().pin(handle)? else {
                    return Ok(false);
                };
                later = pinned;
                &later
            };
            let found = searched.collect_aborted_txns(offset, upper_bound)?;
            fetch.aborted.extend(found.aborted);
            if found.complete {
                break;
            }
        }
        if self.read_only {
            // What the replay met that no `.txnindex` this view has read may list yet.
            for txn in self.txn.replayed_aborted_in(offset, upper_bound) {
                let listed = fetch.aborted.iter().any(|known| {
                    known.producer_id == txn.producer_id && known.first_offset == txn.first_offset
                });
                if !listed {
                    fetch.aborted.push(txn);
                }
            }
        }
        Ok(true)
    }

    /// Called when a read found nothing at or above its offset in `segment` (sealed: a segment
    /// based at `next_base` follows it in `list`) and moves on to the next one. Only compaction
    /// (here or on the leader a follower copies) leaves offsets out between segments, so unless
    /// the checkpoint says the log's records were compacted or its cleanup policy includes
    /// compact ([`gaps_between_segments_are_legal`]), a segment that ends below the next one's
    /// base has lost bytes: `Error::Corrupt` naming where it ends, instead of a read that skips
    /// the missing offsets without a word.
    /// A truncation into the segment that overlapped the read, or a list swapped since, is no
    /// corruption: a truncation swaps in a list without the later segments before it cuts.
    fn check_continuity(
        &self,
        list: &Arc<SegmentList>,
        segment: &Segment,
        truncations: u64,
        next_base: i64,
    ) -> Result<()> {
        let ends_at = segment.next_offset();
        if ends_at >= next_base {
            return Ok(());
        }
        let compacted = self.view.compacted();
        if gaps_between_segments_are_legal(compacted, self.config.cleanup_policy) {
            return Ok(());
        }
        let raced = truncations % 2 == 1
            || segment.truncation_sequence() != truncations
            || !Arc::ptr_eq(&self.view.segments().load(), list);
        if raced {
            return Ok(());
        }
        Err(Error::Corrupt {
            file: segment.log_path(),
            position: segment.size(),
            what: Corruption::MissingOffsets {
                from: ends_at,
                to: next_base,
            },
        })
    }

    /// See [`Log::offset_for_timestamp`](crate::Log::offset_for_timestamp).
    pub(in crate::log) fn offset_for_timestamp(
        &self,
        timestamp: i64,
    ) -> Result<Option<(i64, i64)>> {
        self.check_open()?;
        self.poll_live();
        let shared = self;
        let start = self.log_start_offset();
        // Read once: a poisoned log vouches for nothing above its durable offset, and the
        // answer must not come from there.
        let end = shared.readable_end();
        'retry: loop {
            let list = shared.view.segments().load();
            for handle in list.handles() {
                if handle.base_offset() >= end {
                    return Ok(None);
                }
                let Some(segment) = shared.view.segments().pin(handle)? else {
                    continue 'retry;
                };
                if segment.next_offset() <= start {
                    continue;
                }
                if segment
                    .max_timestamp()
                    .is_none_or(|max| max.timestamp < timestamp)
                {
                    // Damage after its last valid batch may have held the answer.
                    segment.check_damage()?;
                    continue;
                }
                if let Some(found) =
                    segment.find_offset_by_timestamp_below(timestamp, start, end)?
                {
                    // The first record at or above `timestamp`: every record before it is
                    // older, so one at or above the end means none the log vouches for.
                    return Ok((found.offset < end).then_some((found.offset, found.timestamp)));
                }
                segment.check_damage()?;
            }
            return Ok(None);
        }
    }
}
