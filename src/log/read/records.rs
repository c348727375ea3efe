//! Record reads with an end and without one: [`Log::records_until`](crate::Log::records_until)
//! (records below an offset, or below the first record at a timestamp, as kcat's `-o e@ts` ends),
//! and the tailing iterator [`Log::tail`](crate::Log::tail), which waits for records instead of
//! ending at the bound.
//!
//! Both are built on [`LogRecords`], the iterator of [`Log::records`](crate::Log::records),
//! which reads a batch at a time into one reused [`FetchData`](crate::FetchData); the waits are
//! the log's watermark waits.

use std::time::{Duration, Instant};

use crate::error::{Error, Result};

use super::fetch_data::{FetchData, decode_records};
use crate::log::{LogRecord, ReadBound, Shared};

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
        self.position.max(self.fetch.bound_end())
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

/// Where [`Log::records_until`](crate::Log::records_until) stops. Default: [`ReadEnd::Unbounded`].
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReadEnd {
    /// No end: the records go on to the [`ReadBound`].
    #[default]
    Unbounded,
    /// Below this offset (exclusive).
    Offset(i64),
    /// Below the first record whose timestamp is at or after this one (milliseconds since the
    /// epoch), found by [`Log::offset_for_timestamp`](crate::Log::offset_for_timestamp) at the
    /// iterator's first `next`, or below the log end offset then if every record is older. As in
    /// Kafka's `offsetsForTimes`, a record below that offset comes back even if its own timestamp
    /// is later (timestamps need not grow with offsets).
    Timestamp(i64),
}

/// The iterator of [`Log::tail`](crate::Log::tail): blocks for the next record instead of ending.
#[derive(Debug)]
pub struct LogTail<'a> {
    records: LogRecords<'a>,
    shared: &'a Shared,
    bound: ReadBound,
    finished: bool,
}

impl<'a> LogTail<'a> {
    /// A tail of `shared`'s records from `offset` within `bound`.
    pub(in crate::log) fn new(shared: &'a Shared, offset: i64, bound: ReadBound) -> Self {
        LogTail {
            records: LogRecords::new(shared, offset, bound, ReadEnd::Unbounded),
            shared,
            bound,
            finished: false,
        }
    }

    /// The offset the iterator will return next (or the first above it that holds a data
    /// record): where a consumer resumes.
    pub fn position(&self) -> i64 {
        self.records.position()
    }

    /// The next record, waiting at most `timeout` for it: `Ok(None)` when none came in time,
    /// or when the iterator has ended (the log closed, or an earlier call returned an error).
    pub fn next_within(&mut self, timeout: Duration) -> Result<Option<LogRecord>> {
        let deadline = Instant::now().checked_add(timeout);
        self.next_before(deadline)
    }

    fn next_before(&mut self, deadline: Option<Instant>) -> Result<Option<LogRecord>> {
        while !self.finished {
            match self.records.next() {
                Some(Ok(record)) => return Ok(Some(record)),
                Some(Err(Error::Closed)) => self.finished = true,
                Some(Err(error)) => return Err(self.finish(error)),
                None if self.records.is_finished() => self.finished = true,
                None => {
                    let position = self.records.waiting_offset();
                    match self.shared.wait_within(position, self.bound, deadline) {
                        Ok(true) => {}
                        Ok(false) => return Ok(None),
                        Err(Error::Closed) => self.finished = true,
                        Err(error) => return Err(self.finish(error)),
                    }
                }
            }
        }
        Ok(None)
    }

    fn finish(&mut self, error: Error) -> Error {
        self.finished = true;
        error
    }
}

impl Iterator for LogTail<'_> {
    type Item = Result<LogRecord>;

    /// Blocks until the next record is there; `None` once the log has closed.
    fn next(&mut self) -> Option<Result<LogRecord>> {
        self.next_before(None).transpose()
    }
}

impl Shared {
    /// Blocks until the log holds a record at `offset` within `bound` (for
    /// [`ReadBound::Durable`]: until `offset` is durable), or `deadline` passes (`Ok(false)`).
    /// Fails with [`Error::Closed`](crate::Error::Closed) when the log closes, and with
    /// [`Error::Poisoned`](crate::Error::Poisoned) when a poisoned log will never answer `offset`.
    pub(in crate::log) fn wait_within(
        &self,
        offset: i64,
        bound: ReadBound,
        deadline: Option<Instant>,
    ) -> Result<bool> {
        self.check_open()?;
        let shared = self;
        if bound == ReadBound::LogEnd {
            let timeout = deadline.map_or(Duration::MAX, |deadline| {
                deadline.saturating_duration_since(Instant::now())
            });
            let found = self.wait_for_data(offset, timeout)?;
            self.check_open()?;
            return Ok(found);
        }
        let stop = || shared.view.is_closed() || shared.durability.is_poisoned();
        let high_watermark = bound == ReadBound::HighWatermark;
        loop {
            self.poll_live();
            shared.check_readable_above(offset)?;
            // Chosen again at every turn: the high watermark waits on the log end until it is
            // first set.
            let (mark, value) = if high_watermark {
                (shared.high_watermark_mark(), shared.high_watermark())
            } else {
                (
                    shared.durability.durable_mark(),
                    shared.durability.durable_offset(),
                )
            };
            if value > offset {
                return Ok(true);
            }
            self.check_open()?;
            let now = Instant::now();
            if deadline.is_some_and(|deadline| now >= deadline) {
                return Ok(false);
            }
            // A live reader's durable offset moves only when it looks at the directory.
            let wake = match (&shared.live, deadline) {
                (Some(_), deadline) => {
                    let next_poll = now + shared.config.poll_interval;
                    Some(deadline.map_or(next_poll, |deadline| deadline.min(next_poll)))
                }
                (None, deadline) => deadline,
            };
            mark.wait_above(offset, wake, stop);
        }
    }
}
