//! [`AckFuture`]: what [`Partition::append_as_leader`](super::Partition::append_as_leader)
//! returns, resolving once the append is committed (the high watermark passed it) or failed.
//!
//! The partition keeps a weak reference to each waiting slot and completes it when the high
//! watermark passes the slot's offset, when the ISR shrinks below `min.insync.replicas`, or
//! when the partition stops leading. A dropped future's slot is pruned at the next completion.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::log::LogAppendInfo;
use crate::sync::{Condvar, Mutex};

/// The outcome of one append, filled in once.
#[derive(Debug, Default)]
pub(crate) struct AckSlot {
    state: Mutex<AckState>,
    done: Condvar,
}

#[derive(Debug, Default)]
struct AckState {
    outcome: Option<Result<LogAppendInfo>>,
    waker: Option<Waker>,
}

impl AckSlot {
    /// Stores the outcome, unless one is there already, and wakes the waiter.
    pub(crate) fn complete(&self, outcome: Result<LogAppendInfo>) {
        let waker = {
            let mut state = self.state.lock();
            if state.outcome.is_some() {
                return;
            }
            state.outcome = Some(outcome);
            state.waker.take()
        };
        self.done.notify_all();
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// An append waiting for its commit, as the partition tracks it.
#[derive(Debug)]
pub(crate) struct PendingAck {
    /// The append completes once the high watermark reaches this (its last offset + 1).
    pub required_offset: i64,
    /// What the append stored.
    pub info: LogAppendInfo,
    pub slot: Weak<AckSlot>,
}

/// Resolves to the append's [`LogAppendInfo`] once the leader's high watermark passes the
/// append's last offset (under `acks=all`; at once under `acks=0` and `acks=1`), or to the
/// error that ended the wait:
/// - [`Error::NotEnoughReplicasAfterAppend`]: the ISR shrank below `min.insync.replicas`
///   before the append was committed; the records stay in the log, and an idempotent retry
///   is deduplicated;
/// - [`Error::NotLeaderOrFollower`]: the partition stopped leading first; the records may be
///   truncated by the next leader;
/// - [`Error::RequestTimedOut`] (from [`wait`](Self::wait) only): the timeout passed first.
///
/// The future needs no runtime; the high watermark moves on a follower's fetch, which wakes it.
#[derive(Debug)]
#[must_use = "an acks=all append is not known to be committed until its future resolves"]
pub struct AckFuture {
    slot: Arc<AckSlot>,
    required_offset: i64,
}

impl AckFuture {
    /// A future that resolves when the partition completes `slot`.
    pub(crate) fn pending(slot: Arc<AckSlot>, required_offset: i64) -> AckFuture {
        AckFuture {
            slot,
            required_offset,
        }
    }

    /// A future resolved already.
    pub(crate) fn ready(outcome: Result<LogAppendInfo>, required_offset: i64) -> AckFuture {
        let slot = Arc::new(AckSlot::default());
        slot.complete(outcome);
        AckFuture::pending(slot, required_offset)
    }

    /// The high watermark at which the append counts as committed: its last offset + 1.
    pub fn required_offset(&self) -> i64 {
        self.required_offset
    }

    /// Whether the outcome is in (a [`wait`](Self::wait) would return at once).
    pub fn is_done(&self) -> bool {
        self.slot.state.lock().outcome.is_some()
    }

    /// Blocks until the outcome is in, or `timeout` passes: then [`Error::RequestTimedOut`]
    /// (Kafka's `REQUEST_TIMED_OUT`, code 7). The records stay in the leader's log after a
    /// timeout, and may yet be committed.
    pub fn wait(self, timeout: Duration) -> Result<LogAppendInfo> {
        let deadline = Instant::now().checked_add(timeout);
        let mut state = self.slot.state.lock();
        loop {
            if let Some(outcome) = state.outcome.take() {
                return outcome;
            }
            match deadline {
                Some(deadline) => {
                    if self.slot.done.wait_until(&mut state, deadline).timed_out()
                        && state.outcome.is_none()
                    {
                        return Err(Error::RequestTimedOut {
                            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                            what: format!(
                                "the high watermark to reach {} (acks=all)",
                                self.required_offset
                            ),
                        });
                    }
                }
                None => self.slot.done.wait(&mut state),
            }
        }
    }
}

impl Future for AckFuture {
    type Output = Result<LogAppendInfo>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.slot.state.lock();
        if let Some(outcome) = state.outcome.take() {
            return Poll::Ready(outcome);
        }
        state.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> LogAppendInfo {
        LogAppendInfo {
            first_offset: 0,
            last_offset: 0,
            records: 1,
            max_timestamp: 0,
            log_append_time: None,
            bytes: 70,
            duplicate: false,
        }
    }

    #[test]
    fn a_wait_with_no_outcome_times_out_with_request_timed_out() {
        let slot = Arc::new(AckSlot::default());
        let future = AckFuture::pending(Arc::clone(&slot), 1);
        let error = future
            .wait(Duration::from_millis(1))
            .expect_err("no outcome");
        assert_eq!(error.kafka_code(), Some(7));
    }

    #[test]
    fn a_completed_slot_resolves_the_wait_once_with_the_first_outcome() {
        let slot = Arc::new(AckSlot::default());
        let future = AckFuture::pending(Arc::clone(&slot), 1);
        slot.complete(Ok(info()));
        slot.complete(Err(Error::Closed));
        assert!(future.is_done());
        assert_eq!(
            future
                .wait(Duration::from_secs(120))
                .expect("ok")
                .last_offset,
            0
        );
    }

    #[test]
    fn the_future_is_pending_until_completed_and_the_completion_wakes_its_task() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::task::Wake;

        struct CountingWaker(AtomicUsize);
        impl Wake for CountingWaker {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let counter = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&counter));
        let mut cx = Context::from_waker(&waker);
        let slot = Arc::new(AckSlot::default());
        let mut future = AckFuture::pending(Arc::clone(&slot), 1);
        assert!(Pin::new(&mut future).poll(&mut cx).is_pending());
        assert_eq!(counter.0.load(Ordering::SeqCst), 0);
        slot.complete(Ok(info()));
        assert_eq!(
            counter.0.load(Ordering::SeqCst),
            1,
            "the completion woke the task"
        );
        match Pin::new(&mut future).poll(&mut cx) {
            Poll::Ready(Ok(appended)) => assert_eq!(appended.last_offset, 0),
            other => panic!("expected the outcome: {other:?}"),
        }
    }

    #[test]
    fn a_completion_from_another_thread_wakes_a_blocked_wait() {
        let slot = Arc::new(AckSlot::default());
        let future = AckFuture::pending(Arc::clone(&slot), 1);
        let completer = std::thread::spawn(move || slot.complete(Ok(info())));
        assert!(future.wait(Duration::from_secs(120)).is_ok());
        completer.join().expect("completer");
    }
}
