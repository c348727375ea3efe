//! The sender (Kafka's `Sender`, for one log): takes sealed batches in order, seals the open
//! one when `linger.ms` has passed (or memory, a flush or close asks for it), builds each batch
//! (compression and CRC) and appends it through the log's normal append path, then resolves the
//! batch's handles and gives its memory back. It runs as a thread of its own ([`run`]) or, on a
//! log opened with [`Workers`](crate::Workers), as a pool task ([`run_some`]); both take and
//! append batches with the same functions.

use std::time::Duration;

use crate::error::Error;

use super::Inner;
use super::accumulator::{Accumulator, PendingBatch, Unconfirmed};
use super::config::Acks;
use super::handle::Appended;
use super::modes::{Held, HeldBatchHook, Stamp};
use crate::format::BatchBuilder;
use crate::format::RECORD_BATCH_OVERHEAD;
use crate::log::TruncationEpoch;
use crate::sync::MutexGuard;
use crate::workers::Next;

/// The longest the sender sleeps while a batch lingers. Linger is measured on the log's clock,
/// which need not run with the monotonic clock the sleep uses (a manual clock in tests, a wall
/// clock that is stepped): the sender looks at it again at least this often.
const LINGER_RECHECK: Duration = Duration::from_millis(10);

/// The most batches one run of a pooled sender appends before it gives its thread back: a busy
/// producer is rescheduled at once, behind the other tasks already due, so it starves none.
const BATCHES_PER_RUN: usize = 16;

/// What the sender does next, decided under the accumulator's lock.
#[allow(
    clippy::large_enum_variant,
    reason = "one a batch, moved once, as the `Option` it replaces was: boxing would allocate"
)]
enum Due {
    /// Append this batch, with what to stamp on it (taken under the same lock: Kafka's drain).
    Batch(PendingBatch, Stamp),
    /// Nothing is due: wait for a wake, or at most this long (a batch lingers).
    Wait(Option<Duration>),
    /// A batch is due but the transaction is held (`begin_held`): call the hook, with no lock
    /// held, then wait for the release's wake.
    Held(HeldBatchHook),
    /// Closing, and every accepted batch is taken.
    Drained,
}

/// The thread's body: runs until `close()` and every batch accepted before it is appended.
pub(crate) fn run(inner: &Inner) {
    // Whatever ends this loop, even a panic, no accepted record may be left unresolved.
    let _exit = FailLeftovers(inner);
    while let Some((batch, stamp)) = next_batch(inner) {
        append(inner, batch, stamp);
    }
}

/// One run of the sender as a [`Workers`](crate::Workers) task: appends up to
/// [`BATCHES_PER_RUN`] due batches and says when to run next: at once if more are due, when a
/// lingering batch is due, or when woken (`send`, `flush`, `close`, memory wanted). Once
/// closing and drained it marks the sender exited and leaves the pool.
pub(crate) fn run_some(inner: &Inner) -> Next {
    // A panic, or the drain's end, resolves whatever is left as the thread's exit does.
    let mut exit = Some(FailLeftovers(inner));
    for _ in 0..BATCHES_PER_RUN {
        let due = poll_due(inner, &mut inner.accumulator.lock());
        match due {
            Due::Batch(batch, stamp) => append(inner, batch, stamp),
            Due::Held(hook) => {
                hook.call();
                // The release wakes the task; a wake during this run runs it again.
                std::mem::forget(exit.take());
                return Next::After(Duration::MAX);
            }
            Due::Wait(wait) => {
                std::mem::forget(exit.take());
                return Next::After(wait.unwrap_or(Duration::MAX));
            }
            Due::Drained => return Next::Done,
        }
    }
    std::mem::forget(exit.take());
    Next::After(Duration::ZERO)
}

/// Blocks until a batch is due, and takes it, with what to stamp on it; `None` once closing
/// and drained.
fn next_batch(inner: &Inner) -> Option<(PendingBatch, Stamp)> {
    let mut acc = inner.accumulator.lock();
    loop {
        match poll_due(inner, &mut acc) {
            Due::Batch(batch, stamp) => return Some((batch, stamp)),
            Due::Drained => return None,
            Due::Held(hook) => {
                drop(acc);
                hook.call();
                acc = inner.accumulator.lock();
                if matches!(acc.mode.held, Some(Held::Waiting(_))) && !acc.closing {
                    inner.sender_wake.wait(&mut acc);
                }
            }
            Due::Wait(None) => inner.sender_wake.wait(&mut acc),
            Due::Wait(Some(wait)) => inner.sender_wake.wait_for(&mut acc, wait),
        }
    }
}

/// Takes the next batch if one is due: a sealed one, or the open one once `linger.ms` has
/// passed (or closing or memory wanted asks for it); else says how long it may wait.
fn poll_due(inner: &Inner, acc: &mut MutexGuard<'_, Accumulator>) -> Due {
    if acc.sealed.is_empty() {
        let Some(open) = acc.open.as_ref() else {
            return if acc.closing {
                Due::Drained
            } else {
                Due::Wait(None)
            };
        };
        let linger_ms = i64::try_from(inner.config.linger_ms).unwrap_or(i64::MAX);
        let now_ms = inner.log.clock().now_ms();
        // A wall clock stepped back below the batch's start makes its age unknowable: send the
        // batch now rather than hold it until the clock is back where it was.
        let stepped_back = now_ms < open.created_ms;
        let age_ms = now_ms.saturating_sub(open.created_ms);
        let memory_wanted = !acc.memory_queue.is_empty();
        if !(acc.closing || memory_wanted || stepped_back || age_ms >= linger_ms) {
            let remaining =
                Duration::from_millis(u64::try_from(linger_ms - age_ms).unwrap_or(u64::MAX));
            return Due::Wait(Some(remaining.min(LINGER_RECHECK)));
        }
        acc.seal_open();
    }
    if let Some(held) = &acc.mode.held {
        let error = match held {
            Held::Waiting(hook) if !acc.closing => return Due::Held(hook.clone()),
            // Closing before the release: the held batches fail, never appended.
            Held::Waiting(_) => Error::Closed,
            Held::Refused(error) => error.duplicate(),
        };
        return match acc.sealed.pop_front() {
            Some(batch) => Due::Batch(batch, Stamp::Refused(error)),
            None => Due::Wait(None),
        };
    }
    match acc.sealed.pop_front() {
        Some(batch) => Due::Batch(batch, acc.mode.stamp(&inner.config.mode)),
        None => Due::Wait(None),
    }
}

/// Stamps, builds and appends one batch, then settles its accounts and its handles.
fn append(inner: &Inner, batch: PendingBatch, stamp: Stamp) {
    let PendingBatch {
        seq,
        builder,
        slot,
        reserved,
        ..
    } = batch;
    let records = builder.record_count();
    let mut spent_buffer = None;
    let mode = &inner.config.mode;
    let builder = match (&stamp, mode.producer()) {
        (Stamp::Sequence(first_sequence), Some((producer_id, producer_epoch))) => Ok(builder
            .producer(producer_id, producer_epoch, *first_sequence)
            .transactional(mode.is_transactional())),
        (Stamp::Refused(error), _) => Err(error.duplicate()),
        _ => Ok(builder),
    };
    let result = builder.and_then(BatchBuilder::build).and_then(|mut bytes| {
        let result = inner.log.append_checked_batch(&mut bytes);
        spent_buffer = Some(bytes);
        result
    });
    if let Ok((info, _)) = &result
        && inner.config.acks == Acks::All
        && inner.log.durable_offset() <= info.last_offset
    {
        // The fsync runs on the log's flusher while this thread appends the next batch.
        inner.log.request_sync();
    }
    let judged = match &result {
        Ok((_, epoch)) if inner.config.acks == Acks::All => note_appended(inner, *epoch),
        _ => None,
    };
    {
        let mut acc = inner.accumulator.lock();
        if let Some(buffer) = spent_buffer {
            acc.recycle(buffer, RECORD_BATCH_OVERHEAD + inner.batch_limit);
        }
        acc.used_memory = acc.used_memory.saturating_sub(reserved);
        acc.completed_seq = seq + 1;
        match &result {
            Ok((info, epoch)) => {
                if inner.config.acks == Acks::All {
                    acc.note_unconfirmed(judged, *epoch, info.last_offset);
                }
                if let Stamp::Sequence(first_sequence) = stamp {
                    acc.mode.taken(first_sequence, records);
                }
                if info.duplicate {
                    acc.counters.duplicate_batches += 1;
                } else {
                    acc.counters.records_appended += records as u64;
                    acc.counters.batches_appended += 1;
                    acc.counters.bytes_appended += info.bytes as u64;
                }
            }
            Err(error) => {
                acc.mode.failed(mode, error);
                acc.counters.records_failed += records as u64;
                acc.counters.batches_failed += 1;
                log::warn!(
                    "batching writer of {}: a batch of {records} records failed: {error}",
                    inner.log.dir().display()
                );
                if acc.unreported_error.is_none() {
                    acc.unreported_error = Some(error.duplicate());
                }
            }
        }
    }
    inner.progress.notify_all();
    slot.complete(result.map(|(info, epoch)| Appended {
        first_offset: info.first_offset,
        epoch,
    }));
}

/// Under `acks=all`, before a batch appended in `epoch` joins the unconfirmed ones: if it is
/// the first of a new epoch (a truncation came since the last batch), the older ones' outcome
/// is settled (a later truncation that cuts below them cuts below this batch too, unless one
/// since took them already), and is judged here, with no producer lock held while the log is
/// asked. Returns the judged entry and the cut that took it, if one did, for
/// `Accumulator::note_unconfirmed`.
fn note_appended(inner: &Inner, epoch: TruncationEpoch) -> Option<(Unconfirmed, Option<i64>)> {
    let older = inner.accumulator.lock().unconfirmed?;
    if older.epoch == epoch {
        return None;
    }
    Some((older, inner.log.cut_since(older.epoch, older.last_offset)))
}

/// Runs when the sender's loop ends: fails whatever is still queued (nothing is, unless the
/// loop panicked) and tells `flush` and `close` that the thread is gone.
struct FailLeftovers<'a>(&'a Inner);

impl Drop for FailLeftovers<'_> {
    fn drop(&mut self) {
        let inner = self.0;
        let leftovers: Vec<PendingBatch> = {
            let mut acc = inner.accumulator.lock();
            acc.closing = true;
            acc.seal_open();
            let leftovers: Vec<PendingBatch> = acc.sealed.drain(..).collect();
            for batch in &leftovers {
                acc.used_memory = acc.used_memory.saturating_sub(batch.reserved);
            }
            if !leftovers.is_empty() && acc.unreported_error.is_none() {
                acc.unreported_error = Some(Error::Closed);
            }
            acc.completed_seq = acc.next_seq;
            acc.sender_exited = true;
            leftovers
        };
        inner.progress.notify_all();
        for batch in leftovers {
            batch.slot.complete(Err(Error::Closed));
        }
    }
}
