//! The sender thread (Kafka's `Sender`, for one log): takes sealed batches in order, seals the
//! open one when `linger.ms` has passed (or memory, a flush or close asks for it), builds each
//! batch (compression and CRC) and appends it through the log's normal append path, then
//! resolves the batch's handles and gives its memory back.

use std::time::Duration;

use crate::error::Error;

use super::Inner;
use super::accumulator::{Accumulator, PendingBatch, Unconfirmed};
use super::config::Acks;
use super::handle::Appended;
use super::modes::Stamp;
use crate::format::BatchBuilder;
use crate::format::RECORD_BATCH_OVERHEAD;
use crate::log::TruncationEpoch;
use crate::sync::MutexGuard;

/// The longest the sender sleeps while a batch lingers. Linger is measured on the log's clock,
/// which need not run with the monotonic clock the sleep uses (a manual clock in tests, a wall
/// clock that is stepped): the sender looks at it again at least this often.
const LINGER_RECHECK: Duration = Duration::from_millis(10);

/// The thread's body: runs until `close()` and every batch accepted before it is appended.
pub(crate) fn run(inner: &Inner) {
    // Whatever ends this loop, even a panic, no accepted record may be left unresolved.
    let _exit = FailLeftovers(inner);
    while let Some((batch, stamp)) = next_batch(inner) {
        append(inner, batch, stamp);
    }
}

/// Blocks until a batch is due, and takes it, with what to stamp on it (taken under the same
/// lock: Kafka's drain); `None` once closing and drained.
fn next_batch(inner: &Inner) -> Option<(PendingBatch, Stamp)> {
    let mut acc = inner.accumulator.lock();
    let batch = due_batch(inner, &mut acc)?;
    Some((batch, acc.mode.stamp(&inner.config.mode)))
}

/// The body of `next_batch`: waits on `acc` until a batch is due.
fn due_batch(inner: &Inner, acc: &mut MutexGuard<'_, Accumulator>) -> Option<PendingBatch> {
    let linger_ms = i64::try_from(inner.config.linger_ms).unwrap_or(i64::MAX);
    loop {
        if let Some(batch) = acc.sealed.pop_front() {
            return Some(batch);
        }
        let (closing, memory_wanted) = (acc.closing, !acc.memory_queue.is_empty());
        let Some(open) = acc.open.as_ref() else {
            if closing {
                return None;
            }
            inner.work.wait(acc);
            continue;
        };
        let now_ms = inner.log.clock().now_ms();
        // A wall clock stepped back below the batch's start makes its age unknowable: send the
        // batch now rather than hold it until the clock is back where it was.
        let stepped_back = now_ms < open.created_ms;
        let age_ms = now_ms.saturating_sub(open.created_ms);
        if closing || memory_wanted || stepped_back || age_ms >= linger_ms {
            return acc.open.take();
        }
        let remaining =
            Duration::from_millis(u64::try_from(linger_ms - age_ms).unwrap_or(u64::MAX));
        inner.work.wait_for(acc, remaining.min(LINGER_RECHECK));
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
