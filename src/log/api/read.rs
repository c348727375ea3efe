//! The public methods of [`Log`](crate::Log) for read; see the [`api`](super) module.

use crate::error::Result;
use crate::format::Record;
#[cfg(feature = "stream")]
use crate::log::LogTailStream;
use crate::log::read::records::ReadEnd;
use crate::log::{
    CommittedRecords, FetchData, Log, LogRecord, LogRecords, LogStats, LogTail, ReadBound,
    ReadOptions, RecordRead,
};

impl Log {
    /// A snapshot of the log's counters.
    pub fn stats(&self) -> LogStats {
        self.shared.poll_live();
        let shared = &self.shared;
        let list = shared.view.segments().load();
        let active_segment_bytes = list
            .active()
            .and_then(|h| h.if_open())
            .map_or(0, |s| s.size());
        let compaction = shared.maintenance.status().counters();
        let mut stats = LogStats {
            segments: list.len(),
            open_segments: shared.view.segments().open_count(),
            active_segment_bytes,
            log_start_offset: self.log_start_offset(),
            log_end_offset: self.log_end_offset(),
            durable_offset: self.durable_offset(),
            appends: 0,
            appended_bytes: 0,
            appended_records: 0,
            rolls: 0,
            fsyncs: 0,
            fsync_nanos: 0,
            max_fsync_nanos: 0,
            poisoned: shared.durability.is_poisoned(),
            compaction_passes: compaction.passes,
            compaction_failed_passes: compaction.failed_passes,
            compaction_uncleanable_from: compaction.uncleanable_from,
            compaction_uncleanable_bytes: compaction.uncleanable_bytes,
        };
        shared.counters.fill(&mut stats);
        stats
    }

    /// Reads whole batches from `offset` (the batch holding it comes first; a read in a gap
    /// starts at the next batch), up to about `max_bytes` but always at least one whole batch.
    ///
    /// At the bound's end it returns empty data. Below the log start offset or above the log end
    /// offset it fails with [`Error::OffsetOutOfRange`](crate::Error::OffsetOutOfRange), or
    /// [`Error::Truncated`](crate::Error::Truncated) when a truncation took the log back below
    /// `offset`.
    pub fn read(&self, offset: i64, max_bytes: usize, bound: ReadBound) -> Result<FetchData> {
        self.shared.read(offset, max_bytes, bound)
    }

    /// [`read`](Self::read) with [`ReadOptions`]: with
    /// [`Isolation::ReadCommitted`](crate::Isolation::ReadCommitted) the read stops at the last
    /// stable offset and fills [`FetchData::aborted_transactions`], as a Kafka leader serves a
    /// `read_committed` consumer.
    pub fn read_with(
        &self,
        offset: i64,
        max_bytes: usize,
        options: ReadOptions,
    ) -> Result<FetchData> {
        self.shared.read_with(offset, max_bytes, options)
    }

    /// [`read`](Self::read) into `fetch`, reusing its buffer: a reader that keeps one
    /// [`FetchData`] allocates nothing per read once the buffer has grown to its largest read.
    /// Whatever `fetch` held is replaced (on an error it is left empty).
    pub fn read_into(
        &self,
        offset: i64,
        max_bytes: usize,
        bound: ReadBound,
        fetch: &mut FetchData,
    ) -> Result<()> {
        self.shared.read_into(offset, max_bytes, bound, fetch)
    }

    /// [`read_with`](Self::read_with) into `fetch`, reusing its buffer as
    /// [`read_into`](Self::read_into) does.
    pub fn read_with_into(
        &self,
        offset: i64,
        max_bytes: usize,
        options: ReadOptions,
        fetch: &mut FetchData,
    ) -> Result<()> {
        self.shared
            .read_with_into(offset, max_bytes, options, fetch)
    }

    /// The data record at `offset`, owned: a point read. Same bounds, isolation and errors as
    /// [`read_with`](Self::read_with): `Ok(None)` when the bound ends at or below `offset`, when
    /// compaction removed it (a gap), when it is a control record, and, under
    /// [`Isolation::ReadCommitted`](crate::Isolation::ReadCommitted), when its transaction was
    /// aborted. Below the log start offset or above the log end offset it fails with
    /// [`Error::OffsetOutOfRange`](crate::Error::OffsetOutOfRange), or
    /// [`Error::Truncated`](crate::Error::Truncated) when a truncation took the log back below
    /// `offset`. [`read_record_into`](Self::read_record_into) borrows instead of copying.
    ///
    /// ```
    /// use partlog::{Log, LogConfig, NewRecord, ReadOptions};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = tempfile::tempdir()?;
    /// let log = Log::open(dir.path(), LogConfig::default())?;
    /// let ts = 1_700_000_000_000;
    /// log.append(&[NewRecord::new(ts, None, Some(b"a")), NewRecord::new(ts, None, Some(b"b"))])?;
    /// let record = log.read_record(1, ReadOptions::default())?.expect("offset 1 is there");
    /// assert_eq!(record.value.as_deref(), Some(&b"b"[..]));
    /// // At the log end: nothing yet.
    /// assert!(log.read_record(2, ReadOptions::default())?.is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub fn read_record(&self, offset: i64, options: ReadOptions) -> Result<Option<LogRecord>> {
        self.shared.read_record(offset, options)
    }

    /// [`read_record`](Self::read_record) that borrows: the record's key, value and headers
    /// are in `read`'s buffers, which later reads reuse (keep one [`RecordRead`] and pass it
    /// again: reads then allocate nothing). Its timestamp type is
    /// [`RecordRead::timestamp_type`].
    ///
    /// ```
    /// use partlog::{Log, LogConfig, NewRecord, ReadOptions, RecordRead};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = tempfile::tempdir()?;
    /// let log = Log::open(dir.path(), LogConfig::default())?;
    /// for n in 0..10u8 {
    ///     log.append(&[NewRecord::now(None, Some(&[n]))])?;
    /// }
    /// let mut read = RecordRead::new();
    /// for offset in [7, 2, 9] {
    ///     let record = log.read_record_into(offset, ReadOptions::default(), &mut read)?;
    ///     assert_eq!(record.and_then(|r| r.value), Some(&[offset as u8][..]));
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn read_record_into<'r>(
        &self,
        offset: i64,
        options: ReadOptions,
        read: &'r mut RecordRead,
    ) -> Result<Option<Record<'r>>> {
        let found = self.shared.read_record_into(offset, options, read)?;
        Ok(found.map(|(record, _)| record))
    }

    /// An iterator over the data records from `offset` on, across segments, up to `bound` as it
    /// stands when each fetch runs. Control records are skipped. Records of open and aborted
    /// transactions are returned too (`read_uncommitted`);
    /// [`committed_records`](Self::committed_records) returns only committed ones.
    pub fn records(&self, offset: i64, bound: ReadBound) -> LogRecords<'_> {
        LogRecords::new(&self.shared, offset, bound, ReadEnd::Unbounded)
    }

    /// Kafka's ListOffsets by timestamp: the first record whose timestamp is at or above
    /// `timestamp`, as `(offset, timestamp)`, or `None` when every record is older. A poisoned
    /// log answers only from below its durable offset.
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<(i64, i64)>> {
        self.shared.offset_for_timestamp(timestamp)
    }

    /// [`records`](Self::records) that stop at `end`: the data records from `offset` on, below
    /// the end offset (or the offset `end`'s timestamp resolves to), up to `bound`.
    ///
    /// ```
    /// use partlog::{Log, LogConfig, NewRecord, ReadBound, ReadEnd};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = tempfile::tempdir()?;
    /// let log = Log::open(dir.path(), LogConfig::default())?;
    /// let base = 1_700_000_000_000;
    /// for n in 0..10 {
    ///     log.append(&[NewRecord::new(base + n * 1000, None, Some(b"event"))])?;
    /// }
    /// let first_three = log.records_until(0, ReadBound::LogEnd, ReadEnd::Offset(3));
    /// assert_eq!(first_three.count(), 3);
    /// // The records before the one stamped base + 5 s: offsets 2, 3 and 4.
    /// let window: Vec<i64> = log
    ///     .records_until(2, ReadBound::LogEnd, ReadEnd::Timestamp(base + 5000))
    ///     .map(|record| record.map(|record| record.offset))
    ///     .collect::<Result<_, _>>()?;
    /// assert_eq!(window, [2, 3, 4]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn records_until(&self, offset: i64, bound: ReadBound, end: ReadEnd) -> LogRecords<'_> {
        LogRecords::new(&self.shared, offset, bound, end)
    }

    /// A blocking iterator over the data records from `offset` on that never runs dry: at the
    /// bound's end, its `next` waits for the next record (on the log's watermarks, with no
    /// polling; a read-only log that follows a live writer looks every
    /// [`poll_interval`](crate::log::LogConfig::poll_interval)). It ends when the log closes, and
    /// after the first error, which it returns. [`LogTail::next_within`] waits at most a
    /// given time.
    ///
    /// With [`ReadBound::Durable`] it waits for records to become durable and never asks for
    /// a sync itself: the flush policy, or another caller, makes them durable.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use partlog::{Log, LogConfig, NewRecord, ReadBound};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = tempfile::tempdir()?;
    /// let log = Arc::new(Log::open(dir.path(), LogConfig::default())?);
    /// let writer = {
    ///     let log = Arc::clone(&log);
    ///     std::thread::spawn(move || -> partlog::Result<()> {
    ///         for n in 0..5 {
    ///             log.append(&[NewRecord::now(None, Some(format!("{n}").as_bytes()))])?;
    ///         }
    ///         Ok(())
    ///     })
    /// };
    /// // Takes the five records as they come, however fast the writer is.
    /// let values: Vec<_> = log
    ///     .tail(0, ReadBound::LogEnd)
    ///     .take(5)
    ///     .map(|record| record.map(|record| record.value))
    ///     .collect::<Result<_, _>>()?;
    /// assert_eq!(values.len(), 5);
    /// writer.join().expect("the writer panicked")?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn tail(&self, offset: i64, bound: ReadBound) -> LogTail<'_> {
        LogTail::new(&self.shared, offset, bound)
    }

    /// An iterator over the committed data records from `offset` on, up to `bound` and the last
    /// stable offset as they stand when each read runs: the records of aborted transactions,
    /// and control records, are skipped, as a Kafka consumer with `isolation.level =
    /// read_committed` skips them. It ends at the last stable offset; records of a transaction
    /// still open wait there until its marker is written.
    ///
    /// ```
    /// use partlog::{BatchBuilder, Compression, Log, LogConfig, NewRecord, ReadBound};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = tempfile::tempdir()?;
    /// let log = Log::open(dir.path(), LogConfig::default())?;
    /// log.append(&[NewRecord::now(None, Some(b"plain"))])?; // offset 0, outside any transaction
    /// for (producer_id, value) in [(1, b"kept"), (2, b"gone")] {
    ///     let mut batch =
    ///         BatchBuilder::new(Compression::None).producer(producer_id, 0, 0).transactional(true);
    ///     batch.push(&NewRecord::now(None, Some(value)));
    ///     log.append_batch(&batch.build()?)?;
    /// }
    /// log.commit_transaction(1, 0)?;
    /// log.abort_transaction(2, 0)?;
    ///
    /// let values: Vec<_> = log
    ///     .committed_records(0, ReadBound::LogEnd)
    ///     .map(|record| record.map(|record| record.value))
    ///     .collect::<Result<_, _>>()?;
    /// assert_eq!(values, [Some(b"plain".to_vec()), Some(b"kept".to_vec())]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn committed_records(&self, offset: i64, bound: ReadBound) -> CommittedRecords<'_> {
        CommittedRecords::new(&self.shared, offset, bound)
    }

    /// For a read-only log opened with
    /// [`LogConfig::allow_live_writer`](crate::LogConfig::allow_live_writer): looks now (whatever
    /// the poll interval) for what the writer did, and returns whether the log's view changed.
    ///
    /// It re-reads `partlog.checkpoint` (the recovery point bounds [`ReadBound::Durable`], and the
    /// log start offset), re-lists the directory (new segments after a roll; segments gone to
    /// retention or replaced by compaction) and reads the active segment's new batches, up to the
    /// last complete one: a batch still being written is left for the next look. When the active
    /// segment shrank, vanished, or its name now names another file (the writer truncated the log,
    /// or recovered from a crash), the view is rebuilt from the directory, and reads above the new
    /// end fail with [`Error::Truncated`](crate::Error::Truncated). A truncation that the writer
    /// cut inside the reader's active segment and re-filled past the reader's end between two looks
    /// is not detected; such a reader sees CRC-checked batches either way.
    ///
    /// Any other log: `Ok(false)`, nothing done.
    ///
    /// [`LogConfig::allow_live_writer`]: crate::LogConfig::allow_live_writer
    /// [`ReadBound::Durable`]: crate::ReadBound::Durable
    /// [`Error::Truncated`]: crate::Error::Truncated
    pub fn refresh(&self) -> Result<bool> {
        self.shared.refresh()
    }

    /// [`tail`](Self::tail) as an async [`Stream`](futures_core::Stream) (feature `stream`): the
    /// data records from `offset` on, waiting for each new one without blocking the task's thread.
    /// It ends when the log closes, and after the first error, which it yields.
    ///
    /// Waiting never blocks; reading does: the records are read from the page cache (or the disk)
    /// on the polling thread, as any file read in an async task is. A log opened read-only with
    /// [`allow_live_writer`](crate::log::LogConfig::allow_live_writer) learns of new records only
    /// by looking at the directory, which a stream cannot do without blocking: its stream yields
    /// [`Error::Unsupported`](crate::Error::Unsupported) (use [`tail`](Self::tail) on a thread).
    ///
    /// ```
    /// use std::future::Future;
    /// use std::pin::Pin;
    /// use std::sync::Arc;
    /// use std::task::{Context, Poll, Wake, Waker};
    /// use futures_core::Stream;
    /// use partlog::{Log, LogConfig, NewRecord, ReadBound};
    ///
    /// /// Polls `stream` once for its next item on this thread, parking between wake-ups.
    /// fn block_on_next<S: Stream + Unpin>(stream: &mut S) -> Option<S::Item> {
    ///     struct Unpark(std::thread::Thread);
    ///     impl Wake for Unpark {
    ///         fn wake(self: Arc<Self>) {
    ///             self.0.unpark();
    ///         }
    ///     }
    ///     let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    ///     loop {
    ///         let next = Pin::new(&mut *stream).poll_next(&mut Context::from_waker(&waker));
    ///         if let Poll::Ready(item) = next {
    ///             return item;
    ///         }
    ///         std::thread::park();
    ///     }
    /// }
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = tempfile::tempdir()?;
    /// let log = Arc::new(Log::open(dir.path(), LogConfig::default())?);
    /// let writer = {
    ///     let log = Arc::clone(&log);
    ///     std::thread::spawn(move || log.append(&[NewRecord::now(None, Some(b"hi"))]))
    /// };
    /// let mut stream = log.tail_stream(0, ReadBound::LogEnd);
    /// let record = block_on_next(&mut stream).expect("the log is open")?;
    /// assert_eq!(record.value.as_deref(), Some(&b"hi"[..]));
    /// writer.join().expect("the writer panicked")?;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "stream")]
    pub fn tail_stream(&self, offset: i64, bound: ReadBound) -> LogTailStream<'_> {
        LogTailStream::new(&self.shared, offset, bound)
    }
}
