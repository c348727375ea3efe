//! The durability waits: [`Log::wait_durable`](crate::Log::wait_durable) and its future form,
//! [`WaitDurable`], with the end of what a poisoned log still answers (`readable_end`).
//!
//! Both forms are built on the durable offset's waiter list, the same list whose thread-unpark
//! wakers serve the blocking form: a future registers its task's [`Waker`](std::task::Waker)
//! and is woken when the watermark passes its offset. They need no runtime: any executor that
//! polls futures can drive them.
//!
//! A blocking `wait_durable` leads a group-commit sync on its own thread when none is in flight.
//! A future must not block its executor's thread, so [`WaitDurable`] asks the log's flusher thread
//! to lead that sync instead, and joins it like any follower.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::error::{Error, Result};
use crate::log::{Shared, TruncationEpoch};

impl Shared {
    /// See [`Log::wait_durable_since_append`](crate::Log::wait_durable_since_append).
    pub(in crate::log) fn wait_durable_since_append(
        &self,
        offset: i64,
        epoch: TruncationEpoch,
    ) -> Result<()> {
        if self.durability.durable_offset() <= offset {
            self.check_open()?;
        }
        self.wait_durable_since(offset, epoch)
    }

    /// See [`Log::cut_since`](crate::Log::cut_since).
    pub(in crate::log) fn cut_since(&self, epoch: TruncationEpoch, offset: i64) -> Option<i64> {
        self.view.truncations().cut_since(epoch, offset)
    }

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

    /// [`Error::Poisoned`](crate::Error::Poisoned) when the log is poisoned and `offset` is at or
    /// above what it still answers: no data will come there any more.
    pub(in crate::log) fn check_readable_above(&self, offset: i64) -> Result<()> {
        if self.durability.is_poisoned() && offset >= self.readable_end() {
            return Err(Error::Poisoned);
        }
        Ok(())
    }

    /// Blocks until `offset` is durable (`sync_through`), and fails with
    /// [`Error::Truncated`](crate::Error::Truncated) if a truncation since `epoch` cut the log at
    /// or below it: a refill of the offset made durable is not the record the wait is for.
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

/// What [`Log::durable`](crate::Log::durable) returns: a future that resolves once an offset is
/// durable.
///
/// It holds a reference to the log's shared state, not a borrow of the [`Log`](crate::Log), so it
/// may outlive the call (it is `'static`, `Send` and `Unpin`). Dropping it early leaves its waker
/// registered until the durable offset passes its offset (or a truncation, poison or close wakes
/// every waiter): a task that waits again with the same waker reuses that registration. The
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
    /// A wait for `offset` made now (see [`Log::durable`](crate::Log::durable)): the range is
    /// checked here, after the truncation epoch is read, as in `wait_durable`.
    pub(in crate::log) fn new(shared: Arc<Shared>, offset: i64) -> WaitDurable {
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

    /// A wait for `offset`, appended in `epoch`: no range check (see
    /// [`Log::durable_since_append`](crate::Log::durable_since_append)).
    pub(in crate::log) fn since_append(
        shared: Arc<Shared>,
        offset: i64,
        epoch: TruncationEpoch,
    ) -> WaitDurable {
        WaitDurable {
            shared,
            offset,
            early: None,
            epoch,
            sync_requested: false,
        }
    }

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
