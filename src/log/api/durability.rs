//! The public methods of [`Log`](crate::Log) for durability; see the [`api`](super) module.

use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::log::{Log, TruncationEpoch, WaitDurable, WaitForData};

impl Log {
    /// Makes everything appended so far durable (Kafka's `UnifiedLog.flush()`): when it returns,
    /// [`durable_offset`](Self::durable_offset) has reached the log end offset as it stood when
    /// the call began, and the sealed segments' indexes are synced too. It joins or leads one
    /// group-commit fsync, as [`wait_durable`](Self::wait_durable) does, and succeeds at once on
    /// an empty log or one that is durable already.
    ///
    /// Fails with [`Error::Poisoned`](crate::Error::Poisoned) after a failed fsync (nothing more
    /// can be made durable), [`Error::Closed`](crate::Error::Closed) after close, and
    /// [`Error::Unsupported`](crate::Error::Unsupported) on a log opened read-only.
    pub fn sync(&self) -> Result<()> {
        self.shared.sync()
    }

    /// Asks the flusher thread to run a group-commit sync now, without waiting for it.
    pub(crate) fn request_sync(&self) {
        self.shared.request_sync()
    }

    /// Blocks until `offset` is durable, starting or joining a group-commit fsync that covers
    /// it, whatever the flush policy. This is what acks=all waits for.
    ///
    /// Fails with [`Error::OffsetOutOfRange`](crate::Error::OffsetOutOfRange) if `offset` is not
    /// below the log end offset when called, [`Error::Truncated`](crate::Error::Truncated) if a
    /// truncation since the call cut the log at or below `offset` (the offset may hold another
    /// record by then; a truncation that cut above it changes nothing), and
    /// [`Error::Poisoned`](crate::Error::Poisoned) if a sync fails.
    pub fn wait_durable(&self, offset: i64) -> Result<()> {
        self.shared.check_open()?;
        // Before the range check: a truncation that cuts below `offset` after the check is
        // one since this epoch.
        let epoch = self.shared.view.truncations().epoch();
        let end = self.log_end_offset();
        if offset >= end || offset < 0 {
            return Err(Error::OffsetOutOfRange {
                requested: offset,
                start: self.log_start_offset(),
                end,
            });
        }
        self.shared.wait_durable_since(offset, epoch)
    }

    /// [`wait_durable`](Self::wait_durable) for an offset of a batch appended in `epoch`: a
    /// truncation at or below `offset` since that append fails it with
    /// [`Error::Truncated`](crate::Error::Truncated), even one that came before this call. The
    /// offset was appended, so no range check is made; an offset durable already is answered after
    /// a close too.
    pub(crate) fn wait_durable_since_append(
        &self,
        offset: i64,
        epoch: TruncationEpoch,
    ) -> Result<()> {
        self.shared.wait_durable_since_append(offset, epoch)
    }

    /// The lowest cut at or below `offset` of the truncations since `epoch`, if one came
    /// (`truncations.rs`).
    pub(crate) fn cut_since(&self, epoch: TruncationEpoch, offset: i64) -> Option<i64> {
        self.shared.cut_since(epoch, offset)
    }

    /// Blocks until the log holds `offset` (the log end offset has moved past it, so a read at
    /// `offset` finds data), or `timeout` passes, or the log closes. Returns whether the data is
    /// there.
    ///
    /// A poisoned log answers nothing above its durable offset: a wait at or above it fails with
    /// [`Error::Poisoned`](crate::Error::Poisoned), at once or as soon as a failed fsync poisons
    /// the log during the wait, since no append will ever bring the data.
    pub fn wait_for_data(&self, offset: i64, timeout: Duration) -> Result<bool> {
        self.shared.wait_for_data(offset, timeout)
    }

    /// The future form of [`wait_durable`](Self::wait_durable): resolves once `offset` is durable
    /// (`durable_offset() > offset`), after a group-commit fsync that the log's flusher thread
    /// leads on the future's behalf. It never blocks the thread that polls it.
    ///
    /// Resolves to [`Error::OffsetOutOfRange`](crate::Error::OffsetOutOfRange) if `offset` is not
    /// below the log end offset when this is called, [`Error::Poisoned`](crate::Error::Poisoned) if
    /// a sync fails, [`Error::Truncated`](crate::Error::Truncated) if a truncation since this call
    /// cut the log at or below `offset` (one that cut above it changes nothing), and
    /// [`Error::Closed`](crate::Error::Closed) if the log closes before the future sees the offset
    /// durable (close itself makes every appended offset durable, so that only happens in a race
    /// with close). A log opened read-only has no flusher:
    /// [`Error::Unsupported`](crate::Error::Unsupported).
    ///
    /// Any executor can drive it; this one is a dozen lines of std:
    ///
    /// ```
    /// use std::future::Future;
    /// use std::sync::Arc;
    /// use std::task::{Context, Poll, Wake, Waker};
    /// use partlog::{Log, LogConfig, NewRecord};
    ///
    /// /// Polls `future` on this thread, parking between wake-ups.
    /// fn block_on<F: Future>(future: F) -> F::Output {
    ///     struct Unpark(std::thread::Thread);
    ///     impl Wake for Unpark {
    ///         fn wake(self: Arc<Self>) {
    ///             self.0.unpark();
    ///         }
    ///     }
    ///     let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    ///     let mut future = std::pin::pin!(future);
    ///     loop {
    ///         if let Poll::Ready(output) = future.as_mut().poll(&mut Context::from_waker(&waker)) {
    ///             return output;
    ///         }
    ///         std::thread::park();
    ///     }
    /// }
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let dir = tempfile::tempdir()?;
    /// let log = Log::open(dir.path(), LogConfig::default())?;
    /// let appended = log.append(&[NewRecord::new(1_700_000_000_000, None, Some(b"hello"))])?;
    /// block_on(log.durable(appended.last_offset))?; // the flusher thread ran the fsync
    /// assert!(log.durable_offset() > appended.last_offset);
    /// # Ok(())
    /// # }
    /// ```
    pub fn durable(&self, offset: i64) -> WaitDurable {
        WaitDurable::new(Arc::clone(&self.shared), offset)
    }

    /// [`durable`](Self::durable) for an offset of a batch appended in `epoch`: a truncation at or
    /// below `offset` since that append ends the wait with
    /// [`Error::Truncated`](crate::Error::Truncated), even one that came before this call (the
    /// offset may hold another record by now). The offset was appended, so no range check is made
    /// here: a truncation that took it away is reported by the first poll.
    pub(crate) fn durable_since_append(&self, offset: i64, epoch: TruncationEpoch) -> WaitDurable {
        WaitDurable::since_append(Arc::clone(&self.shared), offset, epoch)
    }

    /// The future form of [`wait_for_data`](Self::wait_for_data), without a timeout (combine it
    /// with your runtime's): resolves once the log holds `offset`, that is once the log end offset
    /// has moved past it, so that a read at `offset` finds data. Resolves to
    /// [`Error::Closed`](crate::Error::Closed) if the log is or becomes closed first, and to
    /// [`Error::Poisoned`](crate::Error::Poisoned) when the log is poisoned and `offset` is at or
    /// above its durable offset (seen at the next poll: a poisoned log takes no more appends). It
    /// never blocks the thread that polls it.
    pub fn data_available(&self, offset: i64) -> WaitForData {
        WaitForData::new(Arc::clone(&self.shared), offset)
    }
}
