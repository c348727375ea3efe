//! The accumulator: the open batch, the sealed batches waiting for the sender thread, and the
//! memory they hold (Kafka's `RecordAccumulator` and `BufferPool`, for one log).
//!
//! `send` encodes each record straight into the open batch's [`BatchBuilder`], so a batch's
//! size is known exactly as it grows and the sender thread only compresses, checksums and
//! appends. Memory is counted in encoded record bytes: a record reserves an upper bound of its
//! encoded size before it is pushed (so that the wait for memory happens before anything is
//! touched), and gives back the difference once its real size is known.

use std::collections::VecDeque;

use crate::error::{Error, Result};
use crate::format::{BatchBuilder, Compression, NewRecord, RECORD_BATCH_OVERHEAD, RecordShape};

use super::handle::SlotIssuer;
use super::modes::ModeState;
use crate::log::TruncationEpoch;

/// One batch being filled, or sealed and waiting to be appended.
#[derive(Debug)]
pub(crate) struct PendingBatch {
    /// Batches are numbered in the order they open, which is the order they are appended.
    pub seq: u64,
    pub builder: BatchBuilder,
    /// The batch's slot, and the references its records' handles get.
    pub slot: SlotIssuer,
    /// When the first record arrived, on the log's clock (for `linger.ms`).
    pub created_ms: i64,
    /// The accumulator memory its records hold.
    pub reserved: u64,
}

/// The state `send`, `flush`, `close` and the sender thread share, behind one mutex.
#[derive(Debug)]
pub(crate) struct Accumulator {
    /// The batch records go into now.
    pub open: Option<PendingBatch>,
    /// Sealed batches, oldest first; always older than `open`.
    pub sealed: VecDeque<PendingBatch>,
    /// Record bytes queued and not yet appended (or failed).
    pub used_memory: u64,
    /// The running totals [`Producer::stats`](super::Producer::stats) reports, kept here
    /// because each changes where this mutex is held anyway; its buffer fields stay zero (they
    /// are read from `used_memory` and `memory_queue`).
    pub counters: super::ProducerStats,
    /// `send` calls blocked on `buffer.memory`, in arrival order: while there are any,
    /// lingering batches are sealed at once, as Kafka's accumulator does when its pool is
    /// exhausted.
    pub memory_queue: MemoryQueue,
    /// The number the next batch will get.
    pub next_seq: u64,
    /// Every batch numbered below this is appended or failed.
    pub completed_seq: u64,
    /// `close()` was called: `send` fails, and the sender exits once everything is appended.
    pub closing: bool,
    /// The sender thread has exited; nothing will be appended any more.
    pub sender_exited: bool,
    /// The first batch failure that `flush` or `close` has not reported yet.
    pub unreported_error: Option<Error>,
    /// Under `acks=all`, the batches appended since the last `flush` or `close` that confirmed
    /// them durable (or reported their loss).
    pub unconfirmed: Option<Unconfirmed>,
    /// Buffers of appended batches, for the next batches to encode into (Kafka's `BufferPool`
    /// keeps its free `batch.size` buffers too): no allocation, and no page faults on fresh
    /// memory, per batch. At most [`FREE_BUFFERS`].
    free_buffers: Vec<Vec<u8>>,
    /// The idempotent or transactional mode's sequence, transaction and fatal error.
    pub mode: ModeState,
}

/// Appended batches whose durability no `flush` has confirmed: the truncation epoch of the
/// newest, and the last offset of the newest appended in that epoch. The older ones appended in
/// it lie below that offset, so a truncation that took one of them took it too; those of an
/// earlier epoch were judged when the epoch changed (the sender's `note_appended`): a
/// truncation since then that cuts at or below them cuts at or below this one too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unconfirmed {
    pub epoch: TruncationEpoch,
    pub last_offset: i64,
}

/// The sends blocked on `buffer.memory`, served first come, first served, as Kafka's
/// `BufferPool` serves its waiters: a send may take memory only when no earlier send still
/// waits for it, so a large record is not starved by a stream of small ones that each fit in
/// what the sender frees.
#[derive(Debug, Default)]
pub(crate) struct MemoryQueue {
    /// The tickets of the waiting sends, oldest first.
    waiting: VecDeque<u64>,
    next_ticket: u64,
}

impl MemoryQueue {
    /// Whether a send may take memory that fits now: one that never waited (`None`) only if
    /// no send waits, one that waits only if it is the oldest.
    pub fn may_take(&self, ticket: Option<u64>) -> bool {
        match ticket {
            None => self.waiting.is_empty(),
            Some(ticket) => self.waiting.front() == Some(&ticket),
        }
    }

    /// Queues a send that must wait; returns its ticket.
    pub fn join(&mut self) -> u64 {
        let ticket = self.next_ticket;
        self.next_ticket = self.next_ticket.wrapping_add(1);
        self.waiting.push_back(ticket);
        ticket
    }

    /// Removes a send from the queue: it took its memory, gave up, or the producer closed.
    pub fn leave(&mut self, ticket: u64) {
        if let Some(at) = self.waiting.iter().position(|&t| t == ticket) {
            self.waiting.remove(at);
        }
    }

    /// Whether any send waits.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// How many sends wait.
    pub fn waiting_count(&self) -> usize {
        self.waiting.len()
    }
}

/// How many appended batch buffers the accumulator keeps for reuse: one being filled while
/// the sender appends another is the steady state.
pub(crate) const FREE_BUFFERS: usize = 2;

impl Accumulator {
    pub fn new() -> Accumulator {
        Accumulator {
            open: None,
            sealed: VecDeque::new(),
            used_memory: 0,
            counters: super::ProducerStats::default(),
            memory_queue: MemoryQueue::default(),
            next_seq: 0,
            completed_seq: 0,
            closing: false,
            sender_exited: false,
            unreported_error: None,
            unconfirmed: None,
            free_buffers: Vec::new(),
            mode: ModeState::default(),
        }
    }

    /// Under `acks=all`, a batch appended in `epoch` up to `last_offset` joins the unconfirmed
    /// ones. `judged` is what the sender's `note_appended` found of the entry before it, if
    /// this batch began a new epoch: a loss is reported by the next `flush`, unless a `flush`
    /// settled that entry meanwhile.
    pub fn note_unconfirmed(
        &mut self,
        judged: Option<(Unconfirmed, Option<i64>)>,
        epoch: TruncationEpoch,
        last_offset: i64,
    ) {
        if let Some((older, cut)) = judged
            && self.unconfirmed == Some(older)
            && let Some(at) = cut
            && self.unreported_error.is_none()
        {
            self.unreported_error = Some(Error::Truncated { at });
        }
        self.unconfirmed = Some(Unconfirmed { epoch, last_offset });
    }

    /// Keeps an appended batch's buffer for a later batch, if it holds `capacity` bytes (the
    /// buffer of a compressed batch is usually smaller) and is not far larger (one huge record
    /// must not pin its memory), and fewer than [`FREE_BUFFERS`] are kept.
    pub fn recycle(&mut self, buffer: Vec<u8>, capacity: usize) {
        let fits = buffer.capacity() >= capacity && buffer.capacity() <= capacity.saturating_mul(2);
        if fits && self.free_buffers.len() < FREE_BUFFERS {
            self.free_buffers.push(buffer);
        }
    }

    /// Seals the open batch, if any. Returns whether one was sealed.
    pub fn seal_open(&mut self) -> bool {
        match self.open.take() {
            Some(batch) => {
                self.sealed.push_back(batch);
                true
            }
            None => false,
        }
    }

    /// Opens a new batch.
    pub fn open_batch(
        &mut self,
        codec: Compression,
        capacity: usize,
        slot: SlotIssuer,
        now_ms: i64,
    ) -> &mut PendingBatch {
        let seq = self.next_seq;
        self.next_seq += 1;
        let builder = match self.free_buffers.pop() {
            Some(mut buffer) if buffer.capacity() >= RECORD_BATCH_OVERHEAD + capacity => {
                // Write the whole buffer once before records go in. The sender thread read it
                // last (CRC, pwrite), so its cache lines sit on the other core; taken back one
                // record at a time, they stalled every send at the accumulator's unlock, which
                // waits for the record's bytes. One sweep takes them back together: a quarter
                // of a send's CPU (measured on 100-byte records).
                buffer.clear();
                buffer.resize(buffer.capacity(), 0);
                BatchBuilder::with_buffer(codec, buffer)
            }
            _ => BatchBuilder::with_capacity(codec, capacity),
        };
        self.open.insert(PendingBatch {
            seq,
            builder,
            slot,
            created_ms: now_ms,
            reserved: 0,
        })
    }
}

/// The largest uncompressed batch (header and records) whose compressed form stays within
/// `max_message_bytes`, for `codec`: compressing data it cannot shrink adds framing, and a batch
/// must never exceed the limit once built.
pub(crate) fn max_uncompressed_batch(codec: Compression, max_message_bytes: u32) -> usize {
    let max = max_message_bytes as usize;
    match codec {
        // Kafka's LZ4 frame: 7 header bytes and a 4-byte end mark, plus a 4-byte size word per
        // 64 KiB block; an incompressible block is stored as it is.
        Compression::Lz4 => max.saturating_sub(11 + 4 * max.div_ceil(64 * 1024)),
        // ZSTD_compressBound: n + n/256, plus at most 64 bytes below 128 KiB; 8 more for the
        // frame header's worst case over the bound's own allowance.
        Compression::Zstd => max.saturating_sub(max / 256 + 72),
        _ => max,
    }
}

/// The shape of `record` ([`RecordShape::measure`]), whose
/// [`size_upper_bound`](RecordShape::size_upper_bound) is what `send` reserves.
///
/// Fails with [`Error::InvalidArgument`] for a field longer than `i32::MAX` bytes, which the
/// format cannot encode: rejecting it here keeps one bad record from failing its whole batch.
#[inline]
pub(crate) fn record_shape(record: &NewRecord) -> Result<RecordShape> {
    RecordShape::measure(
        record.key.as_deref(),
        record.value.as_deref(),
        record
            .headers
            .iter()
            .map(|(key, value)| (key.as_bytes(), value.as_deref())),
    )
}

/// The header every batch starts with.
pub(crate) const BATCH_HEADER_BYTES: usize = RECORD_BATCH_OVERHEAD;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_queue_serves_first_come_first_served() {
        let mut queue = MemoryQueue::default();
        assert!(
            queue.may_take(None),
            "no one waits: a new send may take memory"
        );
        let first = queue.join();
        let second = queue.join();
        assert!(
            !queue.may_take(None),
            "a new send may not pass the waiting ones"
        );
        assert!(queue.may_take(Some(first)));
        assert!(!queue.may_take(Some(second)));
        // The first gives up (a timeout): the second is next.
        queue.leave(first);
        assert!(queue.may_take(Some(second)));
        let third = queue.join();
        // One in the middle leaves: the order of the rest stays.
        let fourth = queue.join();
        queue.leave(third);
        queue.leave(second);
        assert!(queue.may_take(Some(fourth)));
        queue.leave(fourth);
        assert!(queue.is_empty());
        assert!(queue.may_take(None));
    }

    #[test]
    fn the_bound_covers_the_encoded_size() {
        let records = [
            NewRecord::new(0, None, None),
            NewRecord::new(i64::MAX, Some(b"key"), Some(&[7u8; 300])),
            NewRecord::new(-1, Some(&[1u8; 70_000]), None).with_header("h", Some(b"v")),
        ];
        for record in &records {
            // Pushed second, after a record with a far-off timestamp: the widest deltas.
            let mut builder = BatchBuilder::new(Compression::None);
            builder.push(&NewRecord::new(i64::MIN, None, None));
            let before = builder.uncompressed_size();
            builder.push(record);
            let encoded = builder.uncompressed_size() - before;
            let bound = record_shape(record).unwrap().size_upper_bound().unwrap();
            assert!(bound >= encoded, "{bound} < {encoded}");
            assert!(
                bound <= encoded + 16,
                "the bound {bound} is loose for {encoded}"
            );
        }
    }

    #[test]
    fn a_full_uncompressed_batch_compresses_within_the_limit() {
        let limit = 100_000u32;
        for codec in [Compression::None, Compression::Lz4, Compression::Zstd] {
            let max = max_uncompressed_batch(codec, limit);
            let mut builder = BatchBuilder::new(codec);
            // Incompressible bytes (an LCG), the worst case for framing overhead.
            let mut state = 0x2545_f491_u32;
            let value: Vec<u8> = (0..max - BATCH_HEADER_BYTES - 11)
                .map(|_| {
                    state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    (state >> 24) as u8
                })
                .collect();
            builder.push(&NewRecord::new(0, None, Some(&value)));
            // 11 bytes of record framing: the batch is exactly as large as allowed.
            assert_eq!(builder.uncompressed_size(), max);
            let batch = builder.build().unwrap();
            assert!(batch.len() <= limit as usize, "{codec:?}: {}", batch.len());
        }
    }

    #[test]
    fn recycled_buffers_are_kept_only_when_they_fit_and_a_few() {
        let mut acc = Accumulator::new();
        let want = RECORD_BATCH_OVERHEAD + 16_384;
        // Too small (a compressed batch) and too large (one huge record): dropped.
        acc.recycle(Vec::with_capacity(want / 2), want);
        acc.recycle(Vec::with_capacity(want * 3), want);
        assert!(acc.free_buffers.is_empty());
        for _ in 0..FREE_BUFFERS + 3 {
            acc.recycle(Vec::with_capacity(want), want);
        }
        assert_eq!(acc.free_buffers.len(), FREE_BUFFERS);
        // A new batch takes one, and encodes into it from an empty record area.
        let batch = acc.open_batch(
            Compression::None,
            16_384,
            SlotIssuer::new(super::super::handle::BatchSlot::new(None)),
            0,
        );
        assert!(batch.builder.is_empty());
        assert_eq!(batch.builder.uncompressed_size(), RECORD_BATCH_OVERHEAD);
        assert_eq!(acc.free_buffers.len(), FREE_BUFFERS - 1);
    }
}
