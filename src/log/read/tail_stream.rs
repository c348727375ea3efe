//! [`LogTailStream`] (feature `stream`): the tailing reader of [`Log::tail`](crate::Log::tail) as
//! an async [`Stream`](futures_core::Stream), woken through the same watermark waiter lists as the
//! log's futures (`wait.rs`).

use std::pin::Pin;
use std::task::{Context, Poll};

use futures_core::Stream;

use crate::error::{Error, Result};

use super::records::ReadEnd;
use crate::log::{LogRecord, LogRecords, ReadBound, Shared};

/// What [`Log::tail_stream`](crate::Log::tail_stream) returns (feature `stream`): the records of a
/// log, as they come.
///
/// It borrows the [`Log`](crate::Log); dropping it early leaves its waker registered until the
/// watermark it waits on passes its position, as the log's futures do.
#[derive(Debug)]
#[must_use = "streams do nothing unless polled"]
pub struct LogTailStream<'a> {
    records: LogRecords<'a>,
    shared: &'a Shared,
    bound: ReadBound,
    finished: bool,
}

impl<'a> LogTailStream<'a> {
    /// A stream of `shared`'s records from `offset` within `bound`.
    pub(in crate::log) fn new(shared: &'a Shared, offset: i64, bound: ReadBound) -> Self {
        LogTailStream {
            records: LogRecords::new(shared, offset, bound, ReadEnd::Unbounded),
            shared,
            bound,
            finished: false,
        }
    }

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
                    match this.shared.poll_data_within(position, this.bound, cx) {
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

impl Shared {
    /// Registers `cx`'s waker to be woken when a record at `offset` within `bound` may be
    /// there: `Pending` once registered, `Ready(Ok)` if it is there already, `Ready(Err)` when
    /// it never will be (the log closed or is poisoned).
    fn poll_data_within(
        &self,
        offset: i64,
        bound: ReadBound,
        cx: &mut Context<'_>,
    ) -> Poll<Result<()>> {
        let shared = self;
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
