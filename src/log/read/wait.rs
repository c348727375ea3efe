//! The wait for data: [`Log::wait_for_data`](crate::Log::wait_for_data) and its future form,
//! [`WaitForData`], built on the log end's waiter list as the durability waits are on the
//! durable offset's (`durability/wait.rs`). A log that follows a writer in another process
//! polls instead (`live.rs`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::log::Shared;

impl Shared {
    /// See [`Log::wait_for_data`](crate::Log::wait_for_data).
    pub(in crate::log) fn wait_for_data(&self, offset: i64, timeout: Duration) -> Result<bool> {
        self.check_open()?;
        let deadline = Instant::now().checked_add(timeout);
        let shared = self;
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
}

/// What [`Log::data_available`](crate::Log::data_available) returns: a future that resolves once
/// the log holds an offset.
///
/// Like [`WaitDurable`](crate::WaitDurable) it is `'static`, `Send` and `Unpin`, and dropping it early leaves its
/// waker registered until the log end offset passes its offset (or the log closes or is
/// truncated).
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct WaitForData {
    shared: Arc<Shared>,
    offset: i64,
}

impl WaitForData {
    /// A wait for data at `offset` (see [`Log::data_available`](crate::Log::data_available)).
    pub(in crate::log) fn new(shared: Arc<Shared>, offset: i64) -> WaitForData {
        WaitForData { shared, offset }
    }

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
