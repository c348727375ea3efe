//! [`ProducerStateEntry`] and [`BatchMetadata`]: what the log remembers of one producer (Kafka's
//! `ProducerStateEntry` and `BatchMetadata`).

/// How many of a producer's newest batches the log remembers for duplicate detection: Kafka's
/// `NUM_BATCHES_TO_RETAIN`, which is also the most in-flight requests an idempotent producer
/// may have (`max.in.flight.requests.per.connection` ≤ 5).
pub(crate) const NUM_BATCHES_TO_RETAIN: usize = 5;

/// Kafka's `RecordBatch.NO_SEQUENCE`.
pub(crate) const NO_SEQUENCE: i32 = -1;

/// Kafka's `RecordBatch.NO_PRODUCER_EPOCH`.
pub(crate) const NO_PRODUCER_EPOCH: i16 = -1;

/// Kafka's `RecordBatch.NO_TIMESTAMP`.
pub(crate) const NO_TIMESTAMP: i64 = -1;

/// One data batch of a producer, as remembered for duplicate detection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct BatchMetadata {
    /// The sequence of the batch's last record.
    pub(crate) last_seq: i32,
    /// The offset of the batch's last record.
    pub(crate) last_offset: i64,
    /// `last_offset - first offset`: the batch's `lastOffsetDelta`.
    pub(crate) offset_delta: i32,
    /// The batch's max timestamp.
    pub(crate) timestamp: i64,
}

impl BatchMetadata {
    /// The sequence of the batch's first record: `last_seq - offset_delta`, undoing a wrap past
    /// `i32::MAX`.
    pub(crate) fn first_seq(&self) -> i32 {
        decrement_sequence(self.last_seq, self.offset_delta)
    }

    /// The offset of the batch's first record.
    pub(crate) fn first_offset(&self) -> i64 {
        self.last_offset
            .saturating_sub(i64::from(self.offset_delta))
    }
}

/// A producer's newest batches, oldest first: at most [`NUM_BATCHES_TO_RETAIN`]. Kafka keeps
/// them in a deque. Here one batch is held inline, and a ring of five is allocated only when a
/// second batch comes: a producer state loaded from a snapshot holds one batch per producer,
/// and loading 100,000 producers with a `VecDeque` an entry spent most of its time in `malloc`
/// and `free`. Inline, the entry stays 64 bytes: a ring of five inline would make the table of
/// a large snapshot two and a half times larger, and the load is then bound by first touching
/// its pages.
#[derive(Debug, Clone, Default)]
pub(crate) enum RecentBatches {
    /// None remembered.
    #[default]
    Empty,
    /// Exactly one.
    One(BatchMetadata),
    /// Any number, once a second came (a `clear` keeps the ring).
    Ring(Box<BatchRing>),
}

impl RecentBatches {
    /// No batches.
    pub(crate) fn new() -> Self {
        RecentBatches::Empty
    }

    /// How many batches are remembered.
    pub(crate) fn len(&self) -> usize {
        match self {
            RecentBatches::Empty => 0,
            RecentBatches::One(_) => 1,
            RecentBatches::Ring(ring) => ring.len(),
        }
    }

    /// Whether none is.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The batches, oldest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &BatchMetadata> {
        (0..self.len()).filter_map(move |nth| self.get(nth))
    }

    /// The oldest batch.
    pub(crate) fn front(&self) -> Option<&BatchMetadata> {
        self.get(0)
    }

    /// The newest batch.
    pub(crate) fn back(&self) -> Option<&BatchMetadata> {
        self.len().checked_sub(1).and_then(|last| self.get(last))
    }

    /// The `nth` oldest batch.
    fn get(&self, nth: usize) -> Option<&BatchMetadata> {
        match self {
            RecentBatches::Empty => None,
            RecentBatches::One(batch) => (nth == 0).then_some(batch),
            RecentBatches::Ring(ring) => ring.get(nth),
        }
    }

    /// Forgets every batch.
    pub(crate) fn clear(&mut self) {
        match self {
            RecentBatches::Ring(ring) => ring.clear(),
            _ => *self = RecentBatches::Empty,
        }
    }

    /// Remembers `batch` as the newest, forgetting the oldest beyond [`NUM_BATCHES_TO_RETAIN`].
    pub(crate) fn push_back(&mut self, batch: BatchMetadata) {
        match self {
            RecentBatches::Empty => *self = RecentBatches::One(batch),
            RecentBatches::One(first) => {
                let mut ring = Box::<BatchRing>::default();
                ring.push_back(*first);
                ring.push_back(batch);
                *self = RecentBatches::Ring(ring);
            }
            RecentBatches::Ring(ring) => ring.push_back(batch),
        }
    }
}

/// Equal when they remember the same batches in the same order, however they hold them.
impl PartialEq for RecentBatches {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for RecentBatches {}

/// [`NUM_BATCHES_TO_RETAIN`] batches in a ring: the newest overwrites the oldest.
#[derive(Debug, Clone, Default)]
pub(crate) struct BatchRing {
    slots: [BatchMetadata; NUM_BATCHES_TO_RETAIN],
    /// The slot of the oldest batch.
    oldest: u8,
    /// How many slots from `oldest` on (wrapping) hold batches.
    len: u8,
}

impl BatchRing {
    fn len(&self) -> usize {
        usize::from(self.len)
    }

    fn get(&self, nth: usize) -> Option<&BatchMetadata> {
        (nth < self.len()).then(|| &self.slots[self.slot(nth)])
    }

    fn clear(&mut self) {
        self.oldest = 0;
        self.len = 0;
    }

    fn push_back(&mut self, batch: BatchMetadata) {
        if self.len() == NUM_BATCHES_TO_RETAIN {
            self.slots[usize::from(self.oldest)] = batch;
            self.oldest = ((usize::from(self.oldest) + 1) % NUM_BATCHES_TO_RETAIN) as u8;
        } else {
            let free = self.slot(self.len());
            self.slots[free] = batch;
            self.len += 1;
        }
    }

    /// The slot of the `nth` oldest batch.
    fn slot(&self, nth: usize) -> usize {
        (usize::from(self.oldest) + nth) % NUM_BATCHES_TO_RETAIN
    }
}

/// Kafka's `DefaultRecordBatch.decrementSequence`: the inverse of the wrapping `lastSequence`
/// arithmetic of `BatchHeader::last_sequence`.
fn decrement_sequence(sequence: i32, decrement: i32) -> i32 {
    // Wrapping arithmetic: a snapshot entry is read from a file and may hold any values.
    if sequence < decrement {
        // The batch wrapped: its first sequence lies below i32::MAX by what is left over.
        i32::MAX
            .wrapping_sub(decrement.wrapping_sub(sequence))
            .wrapping_add(1)
    } else {
        sequence.wrapping_sub(decrement)
    }
}

/// The state of one producer id: its epoch, its newest batches (at most
/// [`NUM_BATCHES_TO_RETAIN`], all of the current epoch), the epoch of the coordinator that wrote
/// its last marker, the timestamp of its last write, and the first offset of its open
/// transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProducerStateEntry {
    /// The producer's current epoch; [`NO_PRODUCER_EPOCH`] for a producer the log has not seen.
    pub(crate) producer_epoch: i16,
    /// The newest batches, oldest first. An epoch change empties it.
    pub(crate) batches: RecentBatches,
    /// The coordinator epoch of the producer's last marker; -1 before any marker.
    pub(crate) coordinator_epoch: i32,
    /// The timestamp of the producer's last batch or marker (it drives expiration).
    pub(crate) last_timestamp: i64,
    /// The first offset of the producer's open transaction, if one is open.
    pub(crate) current_txn_first_offset: Option<i64>,
}

impl ProducerStateEntry {
    /// The state of a producer the log has never seen: no epoch, no batches.
    pub(crate) fn empty() -> Self {
        ProducerStateEntry {
            producer_epoch: NO_PRODUCER_EPOCH,
            batches: RecentBatches::new(),
            coordinator_epoch: -1,
            last_timestamp: NO_TIMESTAMP,
            current_txn_first_offset: None,
        }
    }

    /// An entry rebuilt from the fields of one 46-byte `.snapshot` entry (Kafka's
    /// `ProducerStateManager.readSnapshot`). A `last_offset` below 0 means the producer had no
    /// data batch (only a marker), and a `current_txn_first_offset` below 0 means no open
    /// transaction. Only the newest batch survives a snapshot, so only it is known afterwards.
    pub(crate) fn from_snapshot(
        producer_epoch: i16,
        last_seq: i32,
        last_offset: i64,
        offset_delta: i32,
        timestamp: i64,
        coordinator_epoch: i32,
        current_txn_first_offset: i64,
    ) -> Self {
        let mut batches = RecentBatches::new();
        if last_offset >= 0 {
            batches.push_back(BatchMetadata {
                last_seq,
                last_offset,
                offset_delta,
                timestamp,
            });
        }
        ProducerStateEntry {
            producer_epoch,
            batches,
            coordinator_epoch,
            last_timestamp: timestamp,
            current_txn_first_offset: (current_txn_first_offset >= 0)
                .then_some(current_txn_first_offset),
        }
    }

    /// Whether no data batch of the current epoch is remembered.
    pub(crate) fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    /// The first sequence of the oldest remembered batch, or [`NO_SEQUENCE`].
    pub(crate) fn first_seq(&self) -> i32 {
        self.batches
            .front()
            .map_or(NO_SEQUENCE, BatchMetadata::first_seq)
    }

    /// The last sequence of the newest remembered batch, or [`NO_SEQUENCE`]: the `lastSequence`
    /// of a snapshot entry.
    pub(crate) fn last_seq(&self) -> i32 {
        self.batches
            .back()
            .map_or(NO_SEQUENCE, |batch| batch.last_seq)
    }

    /// The first offset of the oldest remembered batch, or -1.
    #[cfg(test)]
    pub(crate) fn first_data_offset(&self) -> i64 {
        self.batches.front().map_or(-1, BatchMetadata::first_offset)
    }

    /// The last offset of the newest remembered batch, or -1: the `lastOffset` of a snapshot
    /// entry.
    pub(crate) fn last_data_offset(&self) -> i64 {
        self.batches.back().map_or(-1, |batch| batch.last_offset)
    }

    /// The offset delta of the newest remembered batch, or 0: the `offsetDelta` of a snapshot
    /// entry.
    #[cfg(test)]
    pub(crate) fn last_offset_delta(&self) -> i32 {
        self.batches.back().map_or(0, |batch| batch.offset_delta)
    }

    /// The remembered batch of the current epoch with exactly this sequence range: the batch a
    /// re-send duplicates.
    pub(crate) fn find_duplicate_batch(
        &self,
        epoch: i16,
        first_seq: i32,
        last_seq: i32,
    ) -> Option<BatchMetadata> {
        if epoch != self.producer_epoch {
            return None;
        }
        self.batches
            .iter()
            .find(|batch| batch.first_seq() == first_seq && batch.last_seq == last_seq)
            .copied()
    }

    /// Moves to `epoch`; a new epoch forgets the batches of the old one.
    pub(crate) fn maybe_update_producer_epoch(&mut self, epoch: i16) {
        if self.producer_epoch != epoch {
            self.batches.clear();
            self.producer_epoch = epoch;
        }
    }

    /// Remembers a data batch, dropping the oldest beyond [`NUM_BATCHES_TO_RETAIN`].
    pub(crate) fn add_batch(&mut self, epoch: i16, batch: BatchMetadata) {
        self.maybe_update_producer_epoch(epoch);
        self.push_batch(batch);
        self.last_timestamp = batch.timestamp;
    }

    fn push_batch(&mut self, batch: BatchMetadata) {
        self.batches.push_back(batch);
    }

    /// Applies a marker: the epoch it carries (a bump empties the batches), its coordinator
    /// epoch and timestamp, and the end of any open transaction.
    pub(crate) fn end_transaction(&mut self, epoch: i16, coordinator_epoch: i32, timestamp: i64) {
        self.maybe_update_producer_epoch(epoch);
        self.coordinator_epoch = coordinator_epoch;
        self.current_txn_first_offset = None;
        self.last_timestamp = timestamp;
    }

    /// Takes over `next`, the entry a [`ProducerAppendInfo`](super::ProducerAppendInfo) built on
    /// top of this one (Kafka's `ProducerStateEntry.update`): the batches `next` added are
    /// appended to the ones kept here.
    pub(crate) fn update(&mut self, next: ProducerStateEntry) {
        self.maybe_update_producer_epoch(next.producer_epoch);
        for &batch in next.batches.iter() {
            self.push_batch(batch);
        }
        self.coordinator_epoch = next.coordinator_epoch;
        self.current_txn_first_offset = next.current_txn_first_offset;
        self.last_timestamp = next.last_timestamp;
    }

    /// A copy with this entry's epoch, coordinator epoch, timestamp and transaction but no
    /// batches: what a [`ProducerAppendInfo`](super::ProducerAppendInfo) starts from, so that
    /// [`update`](Self::update) adds only the new batches.
    pub(crate) fn without_batches(&self) -> Self {
        ProducerStateEntry {
            producer_epoch: self.producer_epoch,
            batches: RecentBatches::new(),
            coordinator_epoch: self.coordinator_epoch,
            last_timestamp: self.last_timestamp,
            current_txn_first_offset: self.current_txn_first_offset,
        }
    }
}

/// Whether `next` continues `last`: `last + 1`, or 0 after `i32::MAX` (Kafka's
/// `ProducerAppendInfo.inSequence`).
pub(crate) fn in_sequence(last: i32, next: i32) -> bool {
    i64::from(next) == i64::from(last) + 1 || (next == 0 && last == i32::MAX)
}
