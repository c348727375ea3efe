//! The waits: [`Log::wait_durable`] and [`Log::wait_for_data`], and their future forms.
//!
//! Both are built on the waiter lists of the log's two watermarks (the durable offset and the log
//! end offset), the same lists whose thread-unpark wakers serve the blocking forms: a future
//! registers its task's [`Waker`](std::task::Waker) and is woken when the watermark passes its
//! offset. They need no runtime: any executor that polls futures can drive them.
//!
//! A blocking `wait_durable` leads a group-commit sync on its own thread when none is in flight.
//! A future must not block its executor's thread, so [`WaitDurable`] asks the log's flusher thread
//! to lead that sync instead, and joins it like any follower.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::log::{Log, Shared, TruncationEpoch};

impl Log {
    /// Blocks until `offset` is durable, starting or joining a group-commit fsync that covers
    /// it, whatever the flush policy. This is what acks=all waits for.
    ///
    /// Fails with [`Error::OffsetOutOfRange`] if `offset` is not below the log end offset when
    /// called, [`Error::Truncated`] if a truncation since the call cut the log at or below
    /// `offset` (the offset may hold another record by then; a truncation that cut above it
    /// changes nothing), and [`Error::Poisoned`] if a sync fails.
    pub fn wait_durable(&self, offset: i64) -> Result<()> {
        self.check_open()?;
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
    /// truncation at or below `offset` since that append fails it with [`Error::Truncated`],
    /// even one that came before this call. The offset was appended, so no range check is made;
    /// an offset durable already is answered after a close too.
    pub(crate) fn wait_durable_since_append(
        &self,
        offset: i64,
        epoch: TruncationEpoch,
    ) -> Result<()> {
        if self.shared.durability.durable_offset() <= offset {
            self.check_open()?;
        }
        self.shared.wait_durable_since(offset, epoch)
    }

    /// The lowest cut at or below `offset` of the truncations since `epoch`, if one came
    /// (`truncations.rs`).
    pub(crate) fn cut_since(&self, epoch: TruncationEpoch, offset: i64) -> Option<i64> {
        self.shared.view.truncations().cut_since(epoch, offset)
    }

    /// Blocks until the log holds `offset` (the log end offset has moved past it, so a read at
    /// `offset` finds data), or `timeout` passes, or the log closes. Returns whether the data is
    /// there.
    ///
    /// A poisoned log answers nothing above its durable offset: a wait at or above it fails
    /// with [`Error::Poisoned`], at once or as soon as a failed fsync poisons the log during
    /// the wait, since no append will ever bring the data.
    pub fn wait_for_data(&self, offset: i64, timeout: Duration) -> Result<bool> {
        self.check_open()?;
        let deadline = Instant::now().checked_add(timeout);
        let shared = &self.shared;
        if shared.live.is_some() {
            return Ok(self.wait_for_live_data(offset, deadline));
        }
        // A poisoned log takes no more appends: what it holds now is all it will hold.
        shared.check_readable_above(offset)?;
        shared.view.log_end_mark().wait_above(offset, deadline, || {
            shared.view.is_closed() || shared.durability.is_poisoned()
        });
        // The poison may have come during the wait.
        shared.check_readable_above(offset)?;
        Ok(shared.readable_end() > offset)
    }

    /// The future form of [`wait_durable`](Self::wait_durable): resolves once `offset` is durable
    /// (`durable_offset() > offset`), after a group-commit fsync that the log's flusher thread
    /// leads on the future's behalf. It never blocks the thread that polls it.
    ///
    /// Resolves to [`Error::OffsetOutOfRange`] if `offset` is not below the log end offset when
    /// this is called, [`Error::Poisoned`] if a sync fails, [`Error::Truncated`] if a truncation
    /// since this call cut the log at or below `offset` (one that cut above it changes
    /// nothing), and
    /// [`Error::Closed`] if the log closes before the future sees the offset durable (close
    /// itself makes every appended offset durable, so that only happens in a race with close).
    /// A log opened read-only has no flusher: [`Error::Unsupported`].
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
        let shared = Arc::clone(&self.shared);
        // Before the range check, as in `wait_durable`.
        let epoch = shared.view.truncations().epoch();
        let early = if shared.read_only {
            Some(Error::Unsupported {
                what: "waiting for durability on a log opened read-only".into(),
            })
        } else {
            let end = shared.view.log_end();
            (offset < 0 || offset >= end).then(|| Error::OffsetOutOfRange {
                requested: offset,
                start: shared.view.log_start(),
                end,
            })
        };
        WaitDurable {
            shared,
            offset,
            early,
            epoch,
            sync_requested: false,
        }
    }

    /// [`durable`](Self::durable) for an offset of a batch appended in `epoch`: a truncation at
    /// or below `offset` since that append ends the wait with [`Error::Truncated`], even one
    /// that came before this call (the offset may hold another record by now). The offset was
    /// appended, so no range check is made here: a truncation that took it away is reported by
    /// the first poll.
    pub(crate) fn durable_since_append(&self, offset: i64, epoch: TruncationEpoch) -> WaitDurable {
        WaitDurable {
            shared: Arc::clone(&self.shared),
            offset,
            early: None,
            epoch,
            sync_requested: false,
        }
    }

    /// The future form of [`wait_for_data`](Self::wait_for_data), without a timeout (combine it
    /// with your runtime's): resolves once the log holds `offset`, that is once the log end
    /// offset has moved past it, so that a read at `offset` finds data. Resolves to
    /// [`Error::Closed`] if the log is or becomes closed first, and to [`Error::Poisoned`] when
    /// the log is poisoned and `offset` is at or above its durable offset (seen at the next
    /// poll: a poisoned log takes no more appends). It never blocks the thread that polls it.
    pub fn data_available(&self, offset: i64) -> WaitForData {
        WaitForData {
            shared: Arc::clone(&self.shared),
            offset,
        }
    }
}

impl Shared {
    /// The end of what the log answers reads from: the log end offset, or, once a failed
    /// fsync poisoned the log, no more than the durable offset: the kernel may have dropped the
    /// pages above it (ARCHITECTURE.md §8, "Failed fsyncs").
    pub(in crate::log) fn readable_end(&self) -> i64 {
        let end = self.view.log_end();
        if self.durability.is_poisoned() {
            end.min(self.durability.durable_offset())
        } else {
            end
        }
    }

    /// [`Error::Poisoned`] when the log is poisoned and `offset` is at or above what it still
    /// answers: no data will come there any more.
    pub(in crate::log) fn check_readable_above(&self, offset: i64) -> Result<()> {
        if self.durability.is_poisoned() && offset >= self.readable_end() {
            return Err(Error::Poisoned);
        }
        Ok(())
    }

    /// Blocks until `offset` is durable (`sync_through`), and fails with [`Error::Truncated`]
    /// if a truncation since `epoch` cut the log at or below it: a refill of the offset made
    /// durable is not the record the wait is for.
    pub(in crate::log) fn wait_durable_since(
        &self,
        offset: i64,
        epoch: TruncationEpoch,
    ) -> Result<()> {
        if let Some(at) = self.view.truncations().cut_since(epoch, offset) {
            return Err(Error::Truncated { at });
        }
        let synced = self.sync_through(offset);
        if matches!(synced, Ok(()) | Err(Error::Truncated { .. })) {
            // The durable offset passed `offset` before this look (`truncations.rs`); a sync
            // that covered the log and not `offset` means a truncation took it, whose cut is
            // what the error names.
            if let Some(at) = self.view.truncations().cut_since(epoch, offset) {
                return Err(Error::Truncated { at });
            }
        }
        synced
    }
}

/// What [`Log::durable`] returns: a future that resolves once an offset is durable.
///
/// It holds a reference to the log's shared state, not a borrow of the [`Log`], so it may outlive
/// the call (it is `'static`, `Send` and `Unpin`). Dropping it early leaves its waker registered
/// until the durable offset passes its offset (or a truncation, poison or close wakes every
/// waiter): a task that waits again with the same waker reuses that registration. The
/// registration is not removed on drop because the waiter list merges the registrations of one
/// waker, which another future of the same task may still rely on.
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct WaitDurable {
    shared: Arc<Shared>,
    offset: i64,
    /// An error found when the future was made, returned by the first poll.
    early: Option<Error>,
    /// The truncation epoch when the future was made, or when its offset was appended.
    epoch: TruncationEpoch,
    sync_requested: bool,
}

impl WaitDurable {
    /// The offset this future waits for.
    pub fn offset(&self) -> i64 {
        self.offset
    }

    /// The condition, checked without registering: `Some` once the future can resolve.
    fn check(&self) -> Option<Result<()>> {
        let shared = &*self.shared;
        let commit = &shared.durability;
        // The durable offset first, the truncations second (`truncations.rs`): a cut since the
        // epoch at or below the offset fails the wait even if a refill made it durable again.
        let durable = commit.durable_offset() > self.offset;
        if let Some(at) = shared.view.truncations().cut_since(self.epoch, self.offset) {
            // The offset may hold another record now; whether ours survived cannot be told.
            return Some(Err(Error::Truncated { at }));
        }
        if durable {
            return Some(Ok(()));
        }
        if commit.is_poisoned() {
            return Some(Err(Error::Poisoned));
        }
        let end = shared.view.log_end();
        if self.offset >= end {
            return Some(Err(Error::Truncated { at: end }));
        }
        if shared.view.is_closed() {
            return Some(Err(Error::Closed));
        }
        None
    }
}

impl Future for WaitDurable {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let this = self.get_mut();
        if let Some(error) = this.early.take() {
            return Poll::Ready(Err(error));
        }
        loop {
            if let Some(result) = this.check() {
                return Poll::Ready(result);
            }
            let mark = this.shared.durability.durable_mark();
            if mark.register(this.offset, cx.waker()).is_some() {
                break;
            }
        }
        // Checked again after registering: a poison or close that woke every waiter before
        // the registration is seen here instead.
        if let Some(result) = this.check() {
            return Poll::Ready(result);
        }
        if !this.sync_requested {
            this.shared.request_sync();
            this.sync_requested = true;
        }
        Poll::Pending
    }
}

/// What [`Log::data_available`] returns: a future that resolves once the log holds an offset.
///
/// Like [`WaitDurable`] it is `'static`, `Send` and `Unpin`, and dropping it early leaves its
/// waker registered until the log end offset passes its offset (or the log closes or is
/// truncated).
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct WaitForData {
    shared: Arc<Shared>,
    offset: i64,
}

impl WaitForData {
    /// The offset this future waits for.
    pub fn offset(&self) -> i64 {
        self.offset
    }

    fn check(&self) -> Option<Result<()>> {
        if self.shared.view.is_closed() {
            return Some(Err(Error::Closed));
        }
        if let Err(error) = self.shared.check_readable_above(self.offset) {
            return Some(Err(error));
        }
        (self.shared.readable_end() > self.offset).then_some(Ok(()))
    }
}

impl Future for WaitForData {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let this = self.get_mut();
        loop {
            if let Some(result) = this.check() {
                return Poll::Ready(result);
            }
            if this
                .shared
                .view
                .log_end_mark()
                .register(this.offset, cx.waker())
                .is_some()
            {
                break;
            }
        }
        // `close` sets its flag before it wakes every waiter: either that wake-up finds this
        // registration, or this check finds the flag.
        match this.check() {
            Some(result) => Poll::Ready(result),
            None => Poll::Pending,
        }
    }
}
