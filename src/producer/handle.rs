//! [`SendHandle`]: what `send` returns, resolving to the record's offset once its `acks` say done.
//!
//! Every record of a batch shares one [`BatchSlot`]: the sender thread fills it in once, with the
//! batch's first offset or its error, and wakes the wakers registered on it. A handle is the
//! slot and the record's index in the batch; under `acks=all` it then waits on the log's durable
//! watermark through [`WaitDurable`], the future form of `Log::wait_durable`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::error::Result;
use crate::log::{Log, WaitDurable};

/// The outcome of one batch, shared by the handles of its records.
#[derive(Debug)]
pub(crate) struct BatchSlot {
    state: Mutex<SlotState>,
    /// The log to wait on for durability, under `acks=all` only.
    durable_log: Option<Arc<Log>>,
}

#[derive(Debug, Default)]
struct SlotState {
    /// The batch's first offset once appended, or why it failed.
    outcome: Option<Result<i64>>,
    wakers: Vec<Waker>,
}

impl BatchSlot {
    /// A slot for a new batch; `durable_log` is set under `acks=all`.
    pub fn new(durable_log: Option<Arc<Log>>) -> Arc<BatchSlot> {
        Arc::new(BatchSlot {
            state: Mutex::new(SlotState::default()),
            durable_log,
        })
    }

    /// Records the batch's outcome and wakes every handle waiting on it. Only the first call
    /// counts: a batch is appended or failed once.
    pub fn complete(&self, outcome: Result<i64>) {
        let wakers = {
            let mut state = self.state.lock();
            if state.outcome.is_some() {
                return;
            }
            state.outcome = Some(outcome);
            std::mem::take(&mut state.wakers)
        };
        for waker in wakers {
            waker.wake();
        }
    }

    fn poll_outcome(&self, cx: &mut Context<'_>) -> Poll<Result<i64>> {
        let mut state = self.state.lock();
        match &state.outcome {
            Some(Ok(first_offset)) => Poll::Ready(Ok(*first_offset)),
            Some(Err(error)) => Poll::Ready(Err(error.duplicate())),
            None => {
                if !state.wakers.iter().any(|w| w.will_wake(cx.waker())) {
                    state.wakers.push(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }
}

/// A record sent through a [`Producer`](crate::Producer): resolves to the record's offset once
/// the producer's [`Acks`](crate::Acks) say it is done (under `acks=0`, at once, to -1: the offset
/// is not known when the record is queued, as in Kafka).
///
/// Wait for it by blocking ([`wait`](Self::wait), [`wait_timeout`](Self::wait_timeout)) or by
/// `.await`ing it: it implements [`Future`] with no runtime behind it, waking through the task's
/// [`Waker`]. It is `Send`, `Unpin` and `'static`. Dropping it does not cancel the record: the
/// producer appends it all the same.
///
/// A failed batch fails every record in it with the same error: the log was closed
/// ([`Error::Closed`](crate::Error::Closed)) or poisoned ([`Error::Poisoned`](crate::Error::Poisoned)),
/// an I/O error, or, under `acks=all`, a truncation that removed the record.
#[derive(Debug)]
#[must_use = "a send handle reports whether the record was stored"]
pub struct SendHandle {
    state: HandleState,
}

#[derive(Debug)]
enum HandleState {
    /// The batch is queued or being appended.
    Queued { slot: Arc<BatchSlot>, index: i64 },
    /// Appended at `offset`; waiting for the fsync (`acks=all`).
    Durable { offset: i64, wait: WaitDurable },
    /// Resolved; kept so that a handle polled again answers the same.
    Done(Result<i64>),
}

impl SendHandle {
    pub(crate) fn queued(slot: Arc<BatchSlot>, index: i64) -> SendHandle {
        SendHandle {
            state: HandleState::Queued { slot, index },
        }
    }

    pub(crate) fn done(result: Result<i64>) -> SendHandle {
        SendHandle {
            state: HandleState::Done(result),
        }
    }

    /// Blocks the calling thread until the record is done, and returns its offset.
    pub fn wait(mut self) -> Result<i64> {
        loop {
            if let Some(result) = self.wait_until(None) {
                return result;
            }
        }
    }

    /// Blocks up to `timeout` for the record to be done: `None` if it is not done by then (the
    /// handle stays usable). `Duration::ZERO` only looks. Once it has answered, it answers the
    /// same again.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Option<Result<i64>> {
        self.wait_until(Instant::now().checked_add(timeout))
    }

    /// Polls with a waker that unparks this thread, parking between polls.
    fn wait_until(&mut self, deadline: Option<Instant>) -> Option<Result<i64>> {
        // One waker per thread, so that a thread that waits again (say, `wait_timeout` in a
        // loop) is recognised by `Waker::will_wake` and registered once, not once per call.
        let waker = THREAD_WAKER.with(Waker::clone);
        let mut cx = Context::from_waker(&waker);
        loop {
            if let Poll::Ready(result) = Pin::new(&mut *self).poll(&mut cx) {
                return Some(result);
            }
            match deadline {
                None => std::thread::park(),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return None;
                    }
                    std::thread::park_timeout(deadline - now);
                }
            }
        }
    }
}

impl Future for SendHandle {
    type Output = Result<i64>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<i64>> {
        let this = self.get_mut();
        loop {
            let next = match &mut this.state {
                HandleState::Done(result) => {
                    return Poll::Ready(match result {
                        Ok(offset) => Ok(*offset),
                        Err(error) => Err(error.duplicate()),
                    });
                }
                HandleState::Queued { slot, index } => match slot.poll_outcome(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Err(error)) => HandleState::Done(Err(error)),
                    Poll::Ready(Ok(first_offset)) => {
                        let offset = first_offset + *index;
                        match &slot.durable_log {
                            Some(log) => HandleState::Durable {
                                offset,
                                wait: log.durable(offset),
                            },
                            None => HandleState::Done(Ok(offset)),
                        }
                    }
                },
                HandleState::Durable { offset, wait } => match Pin::new(wait).poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(result) => HandleState::Done(result.map(|()| *offset)),
                },
            };
            this.state = next;
        }
    }
}

thread_local! {
    static THREAD_WAKER: Waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
}

/// Wakes a thread blocked in [`SendHandle::wait`].
struct ThreadWaker(Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn a_thread_waiting_again_and_again_registers_once() {
        let slot = BatchSlot::new(None);
        let mut handle = SendHandle::queued(Arc::clone(&slot), 3);
        for _ in 0..100 {
            assert!(handle.wait_timeout(Duration::ZERO).is_none());
        }
        assert_eq!(slot.state.lock().wakers.len(), 1);
        slot.complete(Ok(40));
        assert!(slot.state.lock().wakers.is_empty());
        assert_eq!(handle.wait_timeout(Duration::ZERO).unwrap().unwrap(), 43);
    }

    #[test]
    fn a_failed_batch_fails_every_handle_with_its_error() {
        let slot = BatchSlot::new(None);
        let handles: Vec<SendHandle> = (0..5)
            .map(|index| SendHandle::queued(Arc::clone(&slot), index))
            .collect();
        slot.complete(Err(Error::Io {
            path: "/log/00000000000000000000.log".into(),
            source: std::io::Error::from_raw_os_error(5),
        }));
        // A later outcome changes nothing: a batch is appended or failed once.
        slot.complete(Ok(0));
        for handle in handles {
            match handle.wait() {
                Err(Error::Io { path, source }) => {
                    assert!(path.ends_with("00000000000000000000.log"));
                    assert_eq!(source.raw_os_error(), Some(5));
                }
                other => panic!("expected the batch's i/o error, got {other:?}"),
            }
        }
    }
}
