//! [`LogTailStream`] (feature `stream`): the tailing reader of [`Log::tail`] as an async
//! [`Stream`], woken through the same watermark waiter lists as the log's futures (`wait.rs`).

use std::pin::Pin;
use std::task::{Context, Poll};

use futures_core::Stream;

use crate::error::{Error, Result};

use super::records::ReadEnd;
use crate::log::{Log, LogRecord, LogRecords, ReadBound};

impl Log {
    /// [`tail`](Self::tail) as an async [`Stream`] (feature `stream`): the data records from
    /// `offset` on, waiting for each new one without blocking the task's thread. It ends when
    /// the log closes, and after the first error, which it yields.
    ///
    /// Waiting never blocks; reading does: the records are read from the page cache (or the
    /// disk) on the polling thread, as any file read in an async task is. A log opened read-only
    /// with [`allow_live_writer`](crate::log::LogConfig::allow_live_writer) learns of new records
    /// only by looking at the directory, which a stream cannot do without blocking: its stream
    /// yields [`Error::Unsupported`] (use [`tail`](Self::tail) on a thread).
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
    pub fn tail_stream(&self, offset: i64, bound: ReadBound) -> LogTailStream<'_> {
        LogTailStream {
            records: LogRecords::new(self, offset, bound, ReadEnd::Unbounded),
            log: self,
            bound,
            finished: false,
        }
    }

    /// Registers `cx`'s waker to be woken when a record at `offset` within `bound` may be
    /// there: `Pending` once registered, `Ready(Ok)` if it is there already, `Ready(Err)` when
    /// it never will be (the log closed or is poisoned).
    fn poll_data_within(
        &self,
        offset: i64,
        bound: ReadBound,
        cx: &mut Context<'_>,
    ) -> Poll<Result<()>> {
        let shared = &self.shared;
        if shared.live.is_some() {
            return Poll::Ready(Err(Error::Unsupported {
                what: "a stream of a log that follows a live writer (use Log::tail on a thread)"
                    .into(),
            }));
        }
        let (mark, there) = match bound {
            ReadBound::LogEnd => (shared.view.log_end_mark(), shared.readable_end()),
            ReadBound::Durable => (
                shared.durability.durable_mark(),
                shared.durability.durable_offset(),
            ),
            ReadBound::HighWatermark => (shared.high_watermark_mark(), shared.high_watermark()),
        };
        let check = || -> Option<Result<()>> {
            if shared.view.is_closed() {
                return Some(Err(Error::Closed));
            }
            if let Err(error) = shared.check_readable_above(offset) {
                return Some(Err(error));
            }
            None
        };
        if let Some(result) = check() {
            return Poll::Ready(result);
        }
        if there > offset || mark.register(offset, cx.waker()).is_none() {
            return Poll::Ready(Ok(()));
        }
        // Checked again after registering: a close or poison that woke every waiter before the
        // registration is seen here instead.
        match check() {
            Some(result) => Poll::Ready(result),
            None => Poll::Pending,
        }
    }
}

/// What [`Log::tail_stream`] returns (feature `stream`): the records of a log, as they come.
///
/// It borrows the [`Log`]; dropping it early leaves its waker registered until the watermark it
/// waits on passes its position, as the log's futures do.
#[derive(Debug)]
#[must_use = "streams do nothing unless polled"]
pub struct LogTailStream<'a> {
    records: LogRecords<'a>,
    log: &'a Log,
    bound: ReadBound,
    finished: bool,
}

impl LogTailStream<'_> {
    /// The offset the stream will yield next (or the first above it that holds a data record).
    pub fn position(&self) -> i64 {
        self.records.position()
    }
}

impl Stream for LogTailStream<'_> {
    type Item = Result<LogRecord>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<LogRecord>>> {
        let this = self.get_mut();
        while !this.finished {
            match this.records.next() {
                Some(Ok(record)) => return Poll::Ready(Some(Ok(record))),
                Some(Err(Error::Closed)) => this.finished = true,
                Some(Err(error)) => {
                    this.finished = true;
                    return Poll::Ready(Some(Err(error)));
                }
                None if this.records.is_finished() => this.finished = true,
                None => {
                    let position = this.records.waiting_offset();
                    match this.log.poll_data_within(position, this.bound, cx) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(Ok(())) => {}
                        Poll::Ready(Err(Error::Closed)) => this.finished = true,
                        Poll::Ready(Err(error)) => {
                            this.finished = true;
                            return Poll::Ready(Some(Err(error)));
                        }
                    }
                }
            }
        }
        Poll::Ready(None)
    }
}
