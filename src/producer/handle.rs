//! [`SendHandle`]: what `send` returns, resolving to the record's offset once its `acks` say done.
//!
//! Every record of a batch shares one [`BatchSlot`]: the sender thread fills it in once, with the
//! batch's first offset or its error, and wakes the wakers registered on it. A handle is a
//! counted reference to the slot ([`SlotRef`]) and the record's index in the batch; under
//! `acks=all` it then waits on the log's durable watermark through [`WaitDurable`], the future
//! form of `Log::wait_durable`.
//!
//! The slot is reference-counted by hand rather than with an `Arc`: an `Arc::clone` per record
//! (one atomic read-modify-write, under the accumulator mutex, right after the record's bytes
//! were copied) was the largest single cost of `send`. The batch's [`SlotIssuer`] takes
//! references in blocks of [`REFS_PER_BLOCK`], hands them out one per record with no atomic
//! operation, and gives back the ones it did not hand out when the batch is done with.

use crate::sync::Arc;
use crate::sync::atomic::{AtomicUsize, Ordering, fence};
use crate::sync::thread::Thread;
use std::fmt;
use std::future::Future;
use std::ops::Deref;
use std::pin::Pin;
use std::ptr::NonNull;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use crate::sync::Mutex;

use crate::error::Result;
use crate::log::{Log, TruncationEpoch, WaitDurable};

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
    outcome: Option<Result<Appended>>,
    wakers: Vec<Waker>,
}

/// Where a batch was appended, and the log's truncation epoch at that append: an `acks=all`
/// wait must count truncations from the append, not from the handle's first poll, or a
/// truncation and a refill in between would acknowledge another record at the same offset.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Appended {
    /// The batch's first offset.
    pub first_offset: i64,
    /// The truncation epoch under the append's hold of the writer lock.
    pub epoch: TruncationEpoch,
}

impl BatchSlot {
    /// A slot for a new batch; `durable_log` is set under `acks=all`.
    pub fn new(durable_log: Option<Arc<Log>>) -> BatchSlot {
        BatchSlot {
            state: Mutex::new(SlotState::default()),
            durable_log,
        }
    }

    /// Records the batch's outcome and wakes every handle waiting on it. Only the first call
    /// counts: a batch is appended or failed once.
    pub fn complete(&self, outcome: Result<Appended>) {
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

    fn poll_outcome(&self, cx: &mut Context<'_>) -> Poll<Result<Appended>> {
        let mut state = self.state.lock();
        match &state.outcome {
            Some(Ok(appended)) => Poll::Ready(Ok(*appended)),
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

/// How many references a [`SlotIssuer`] takes at a time: one atomic add per this many records.
pub(crate) const REFS_PER_BLOCK: usize = 64;

/// Above this many references the count is about to overflow (only leaked handles get there):
/// abort, as `Arc` does, rather than free a slot still referenced.
const MAX_REFS: usize = isize::MAX as usize;

/// A batch's slot and the number of references to it; freed when the number reaches 0.
struct SlotBox {
    refs: AtomicUsize,
    slot: BatchSlot,
}

/// Gives up `count` references to `slot_box`, freeing it if they were the last.
///
/// # Safety
///
/// The caller owns `count` of the box's references and uses none of them afterwards.
unsafe fn release(slot_box: NonNull<SlotBox>, count: usize) {
    // SAFETY: the caller owns `count` >= 1 references, so the box is alive until the
    // subtraction below; no reference is freed by another owner before that.
    let refs = unsafe { &slot_box.as_ref().refs };
    // Release: this owner's uses of the slot happen before the free, as in `Arc`'s drop.
    if refs.fetch_sub(count, Ordering::Release) == count {
        // Acquire: every other owner's release is seen before the slot is dropped.
        fence(Ordering::Acquire);
        // SAFETY: the box came from `Box::leak` in `SlotIssuer::new`, and these were the
        // last references: no one else can reach it any more.
        drop(unsafe { Box::from_raw(slot_box.as_ptr()) });
    }
}

/// One counted reference to a batch's [`BatchSlot`], held by a [`SendHandle`]: an `Arc` whose
/// count was taken in advance by the batch's [`SlotIssuer`].
pub(crate) struct SlotRef {
    slot_box: NonNull<SlotBox>,
}

// SAFETY: a SlotRef is a shared, counted reference to a BatchSlot (like Arc<BatchSlot>), and
// BatchSlot is Send + Sync (checked below): its state is behind a mutex, the rest is read-only.
unsafe impl Send for SlotRef {}
// SAFETY: as for Send: through a &SlotRef only &BatchSlot is reachable.
unsafe impl Sync for SlotRef {}

const _: () = {
    const fn send_and_sync<T: Send + Sync>() {}
    send_and_sync::<BatchSlot>();
};

#[cfg(test)]
impl SlotRef {
    /// The number of references to the slot.
    fn refs_for_tests(&self) -> usize {
        // SAFETY: this SlotRef owns one reference, so the box is alive while it exists.
        unsafe { self.slot_box.as_ref().refs.load(Ordering::SeqCst) }
    }
}

impl Deref for SlotRef {
    type Target = BatchSlot;

    fn deref(&self) -> &BatchSlot {
        // SAFETY: this SlotRef owns one reference, so the box is alive while it exists.
        unsafe { &self.slot_box.as_ref().slot }
    }
}

impl Drop for SlotRef {
    fn drop(&mut self) {
        // SAFETY: this SlotRef owns exactly one reference and is never used again.
        unsafe { release(self.slot_box, 1) }
    }
}

impl fmt::Debug for SlotRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("SlotRef").field(&**self).finish()
    }
}

/// The batch's own reference to its slot, through which the accumulator hands out one
/// [`SlotRef`] per record, and the sender completes it. It owns `held` references: its own,
/// and those taken in advance and not yet handed out.
pub(crate) struct SlotIssuer {
    slot_box: NonNull<SlotBox>,
    /// At least 1 (the issuer's own reference).
    held: usize,
}

// SAFETY: as for SlotRef: a counted reference to a Send + Sync BatchSlot; `held` is plain data
// that only the owner of the issuer (`&mut self`) changes.
unsafe impl Send for SlotIssuer {}
// SAFETY: through a &SlotIssuer only &BatchSlot is reachable.
unsafe impl Sync for SlotIssuer {}

impl SlotIssuer {
    /// The slot of a new batch, with its one reference.
    pub fn new(slot: BatchSlot) -> SlotIssuer {
        let slot_box = Box::new(SlotBox {
            refs: AtomicUsize::new(1),
            slot,
        });
        SlotIssuer {
            slot_box: NonNull::from(Box::leak(slot_box)),
            held: 1,
        }
    }

    /// A reference for one more record: no atomic operation, except one in
    /// [`REFS_PER_BLOCK`] that takes the next block.
    pub fn issue(&mut self) -> SlotRef {
        if self.held == 1 {
            // Relaxed, as in `Arc::clone`: the issuer's own reference keeps the box alive, and
            // handing a reference to another thread synchronises through that hand-over.
            let before = self.refs().fetch_add(REFS_PER_BLOCK, Ordering::Relaxed);
            if before > MAX_REFS {
                std::process::abort();
            }
            self.held += REFS_PER_BLOCK;
        }
        self.held -= 1;
        // The reference comes out of `held`, which still counts the issuer's own one.
        SlotRef {
            slot_box: self.slot_box,
        }
    }

    fn refs(&self) -> &AtomicUsize {
        // SAFETY: the issuer owns at least one reference, so the box is alive while it exists.
        unsafe { &self.slot_box.as_ref().refs }
    }
}

impl Deref for SlotIssuer {
    type Target = BatchSlot;

    fn deref(&self) -> &BatchSlot {
        // SAFETY: the issuer owns at least one reference, so the box is alive while it exists.
        unsafe { &self.slot_box.as_ref().slot }
    }
}

impl Drop for SlotIssuer {
    fn drop(&mut self) {
        // SAFETY: the issuer owns exactly `held` references (its own and the unissued ones) and
        // is never used again.
        unsafe { release(self.slot_box, self.held) }
    }
}

impl fmt::Debug for SlotIssuer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlotIssuer")
            .field("slot", &**self)
            .field("held", &self.held)
            .finish()
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
    Queued { slot: SlotRef, index: i64 },
    /// Appended at `offset`; waiting for the fsync (`acks=all`).
    Durable { offset: i64, wait: WaitDurable },
    /// Resolved; kept so that a handle polled again answers the same.
    Done(Result<i64>),
}

impl SendHandle {
    pub(crate) fn queued(slot: SlotRef, index: i64) -> SendHandle {
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
                None => crate::sync::thread::park(),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return None;
                    }
                    crate::sync::thread::park_timeout(deadline - now);
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
                    Poll::Ready(Ok(appended)) => {
                        let offset = appended.first_offset + *index;
                        match &slot.durable_log {
                            Some(log) => HandleState::Durable {
                                offset,
                                wait: log.durable_since_append(offset, appended.epoch),
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

crate::sync::thread_local! {
    static THREAD_WAKER: Waker = Waker::from(Arc::new(ThreadWaker(crate::sync::thread::current())));
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

    /// A batch appended at `first_offset`, for slots with no log behind them (the epoch then
    /// serves nothing).
    fn appended_at(first_offset: i64) -> Appended {
        Appended {
            first_offset,
            epoch: TruncationEpoch::for_tests(),
        }
    }

    #[test]
    fn a_thread_waiting_again_and_again_registers_once() {
        let mut slot = SlotIssuer::new(BatchSlot::new(None));
        let mut handle = SendHandle::queued(slot.issue(), 3);
        for _ in 0..100 {
            assert!(handle.wait_timeout(Duration::ZERO).is_none());
        }
        assert_eq!(slot.state.lock().wakers.len(), 1);
        slot.complete(Ok(appended_at(40)));
        assert!(slot.state.lock().wakers.is_empty());
        assert_eq!(handle.wait_timeout(Duration::ZERO).unwrap().unwrap(), 43);
    }

    #[test]
    fn a_failed_batch_fails_every_handle_with_its_error() {
        let mut slot = SlotIssuer::new(BatchSlot::new(None));
        let handles: Vec<SendHandle> = (0..5)
            .map(|index| SendHandle::queued(slot.issue(), index))
            .collect();
        slot.complete(Err(Error::Io {
            path: "/log/00000000000000000000.log".into(),
            source: std::io::Error::from_raw_os_error(5),
        }));
        // A later outcome changes nothing: a batch is appended or failed once.
        slot.complete(Ok(appended_at(0)));
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

    #[test]
    fn the_reference_count_is_every_handle_and_block_the_issuer_holds() {
        let mut issuer = SlotIssuer::new(BatchSlot::new(None));
        assert_eq!(issuer.refs().load(Ordering::SeqCst), 1);
        // Across three blocks: the count covers every handle out plus what the issuer holds.
        let mut handles: Vec<SlotRef> = (0..2 * REFS_PER_BLOCK + 5)
            .map(|_| issuer.issue())
            .collect();
        assert_eq!(
            issuer.refs().load(Ordering::SeqCst),
            handles.len() + issuer.held
        );
        assert_eq!(issuer.refs().load(Ordering::SeqCst), 3 * REFS_PER_BLOCK + 1);
        handles.truncate(10);
        assert_eq!(issuer.refs().load(Ordering::SeqCst), 10 + issuer.held);
        // The issuer goes first (the sender drops it once the batch is done): the handles
        // keep the slot, and its outcome, alive.
        issuer.complete(Ok(appended_at(100)));
        let last = handles.pop().unwrap();
        drop(issuer);
        assert_eq!(last.refs_for_tests(), 10);
        drop(handles);
        assert_eq!(last.refs_for_tests(), 1);
        let mut handle = SendHandle::queued(last, 4);
        assert_eq!(handle.wait_timeout(Duration::ZERO).unwrap().unwrap(), 104);
    }

    #[test]
    fn handles_dropped_on_many_threads_free_the_slot_once() {
        // Run under valgrind (or a sanitizer) this also shows the slot freed exactly once.
        for _ in 0..20 {
            let mut issuer = SlotIssuer::new(BatchSlot::new(None));
            let handles: Vec<SlotRef> = (0..500).map(|_| issuer.issue()).collect();
            let mut chunks: Vec<Vec<SlotRef>> = Vec::new();
            let mut handles = handles.into_iter();
            for _ in 0..4 {
                chunks.push(handles.by_ref().take(125).collect());
            }
            let threads: Vec<_> = chunks
                .into_iter()
                .map(|chunk| crate::sync::thread::spawn(move || drop(chunk)))
                .collect();
            issuer.complete(Ok(appended_at(0)));
            drop(issuer);
            for thread in threads {
                thread.join().unwrap();
            }
        }
    }

    /// Model-checked with shuttle (`RUSTFLAGS="--cfg shuttle"`, see `crate::sync`).
    #[cfg(shuttle)]
    mod shuttle_tests {
        use super::*;
        use crate::error::Error;
        use crate::sync::thread;

        /// The source of the batch's error: each drop counts one free of the slot that holds it
        /// (handles get copies of the error, not this value).
        #[derive(Debug)]
        struct CountsFrees(Arc<AtomicUsize>);

        impl Drop for CountsFrees {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }

        impl fmt::Display for CountsFrees {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("the batch failed")
            }
        }

        impl std::error::Error for CountsFrees {}

        #[test]
        fn shuttle_slot_refs_dropped_on_many_threads_free_the_slot_once_after_the_last_drop() {
            crate::sync::check(
                "shuttle_slot_refs_dropped_on_many_threads_free_the_slot_once_after_the_last_drop",
                || {
                    const THREADS: usize = 3;
                    // 3 x 43 references: three blocks of REFS_PER_BLOCK, the last one part-used, so
                    // the issuer gives back unissued references when it goes.
                    const PER_THREAD: usize = (2 * REFS_PER_BLOCK + 3) / THREADS;
                    let frees = Arc::new(AtomicUsize::new(0));
                    let mut issuer = SlotIssuer::new(BatchSlot::new(None));
                    let threads: Vec<_> = (0..THREADS)
                        .map(|index| {
                            let mut refs: Vec<SlotRef> =
                                (0..PER_THREAD).map(|_| issuer.issue()).collect();
                            let frees = Arc::clone(&frees);
                            thread::spawn(move || {
                                let waiter = SendHandle::queued(refs.pop().unwrap(), index as i64);
                                // Half the references go before the outcome, half after: drops
                                // race the completion, the issuer's drop and the other threads.
                                let after = refs.split_off(refs.len() / 2);
                                drop(refs);
                                assert_eq!(
                                    frees.load(Ordering::SeqCst),
                                    0,
                                    "freed while referenced"
                                );
                                match waiter.wait() {
                                    Err(Error::Io { source, .. }) => {
                                        assert_eq!(source.to_string(), "the batch failed");
                                    }
                                    other => {
                                        panic!("waiter {index} got {other:?}, not the outcome")
                                    }
                                }
                                assert_eq!(
                                    frees.load(Ordering::SeqCst),
                                    0,
                                    "freed while referenced"
                                );
                                drop(after);
                            })
                        })
                        .collect();
                    issuer.complete(Err(Error::Io {
                        path: "/log/00000000000000000000.log".into(),
                        source: std::io::Error::other(CountsFrees(Arc::clone(&frees))),
                    }));
                    drop(issuer);
                    for thread in threads {
                        thread.join().unwrap();
                    }
                    assert_eq!(
                        frees.load(Ordering::SeqCst),
                        1,
                        "the slot must be freed exactly once"
                    );
                },
            );
        }
    }
}
