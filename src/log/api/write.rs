//! The public methods of [`Log`](crate::Log) for write; see the [`api`](super) module.

use std::sync::Arc;

use crate::clock::Clock;
use crate::error::Result;
use crate::format::{Compression, NewRecord, RecordRef};
use crate::log::{Log, LogAppendInfo, TruncationEpoch};

impl Log {
    /// Appends `records` as exactly one batch, built with the log's codec
    /// (`compression.type`; `producer` means none here), and returns once the batch is in the
    /// file and visible to readers: it then survives a crash of the process, and, once
    /// [`durable_offset`](Self::durable_offset) passes it, of the machine.
    ///
    /// Fails with [`Error::RecordTooLarge`](crate::Error::RecordTooLarge) over `max.message.bytes`
    /// (a batch is never split), [`Error::InvalidTimestamp`](crate::Error::InvalidTimestamp)
    /// outside the timestamp bounds, and [`Error::InvalidArgument`](crate::Error::InvalidArgument)
    /// for an empty slice or, in a compacted log, a record without a key.
    // ARCHITECTURE.md §3, invariant 3.
    pub fn append(&self, records: &[NewRecord]) -> Result<LogAppendInfo> {
        self.shared.append(records)
    }

    /// [`append`](Self::append) for records that borrow their bytes: each is encoded straight
    /// into the batch, where `append` takes [`NewRecord`]s that the caller had to copy its
    /// bytes into first. The same checks and the same errors.
    pub fn append_refs(&self, records: &[RecordRef<'_>]) -> Result<LogAppendInfo> {
        self.shared.append_refs(records)
    }

    /// [`check_record_against`](Self::check_record_against) the log's time now, for the
    /// batching writer's `send`: the coarse clock is read only when a timestamp needs it.
    pub(crate) fn check_record_at_send(&self, timestamp: i64, has_key: bool) -> Result<()> {
        self.shared.check_record_at_send(timestamp, has_key)
    }

    /// The codec batches built from records get: `compression.type`, with `producer` meaning
    /// none (there is no producer codec to keep).
    pub(crate) fn records_codec(&self) -> Compression {
        self.shared.records_codec()
    }

    /// The clock the log reads time from (`LogConfig::clock`).
    pub(crate) fn clock(&self) -> &Arc<dyn Clock> {
        self.shared.clock()
    }

    /// Appends a batch that partlog's batching writer built from records it already checked
    /// with [`check_record_at_send`](Self::check_record_at_send), with the log's codec: the rest of
    /// [`append`](Self::append)'s path (size limit, offsets, roll, flush policy). The bytes stay
    /// the caller's, so that it can reuse the buffer for its next batch.
    ///
    /// With the batch's [`TruncationEpoch`], for an `acks=all` wait on its offsets
    /// ([`durable_since_append`](Self::durable_since_append)).
    pub(crate) fn append_checked_batch(
        &self,
        batch: &mut [u8],
    ) -> Result<(LogAppendInfo, TruncationEpoch)> {
        self.shared.append_checked_batch(batch)
    }

    /// Whether appends would fail now: the log is closed, read-only or poisoned.
    pub(crate) fn writable(&self) -> Result<()> {
        self.shared.writable()
    }

    /// Appends one batch a producer built, after Kafka's leader checks:
    /// one whole batch, magic 2, a valid CRC, records count > 0 and equal to lastOffsetDelta + 1,
    /// a base sequence when the producer id is set, none of the control, delete-horizon or
    /// LogAppendTime bits, keys in a compacted log, the size limit, the timestamp bounds, and
    /// the record framing (checked by decompressing every record).
    ///
    /// The batch's base offset and leader epoch are ignored: the log assigns the offsets, and
    /// stores its own epoch, as a Kafka leader stamps its own over whatever a producer sent:
    /// -1 (no epoch) for a bare log, whose epoch a broker's cache would otherwise take for an
    /// election that never happened, or the epoch of [`become_leader`](Self::become_leader).
    // ARCHITECTURE.md §4.
    pub fn append_batch(&self, batch: &[u8]) -> Result<LogAppendInfo> {
        self.shared.append_batch(batch)
    }

    /// [`append_batch`](Self::append_batch) without the record-framing check: the records are
    /// not decompressed, so a batch whose CRC is right but whose records are malformed is
    /// stored as it is (readers will report it). Timestamp bounds are checked against the
    /// batch's maxTimestamp only. Use it for batches from a trusted producer.
    pub fn append_batch_trusted(&self, batch: &[u8]) -> Result<LogAppendInfo> {
        self.shared.append_batch_trusted(batch)
    }

    /// Kafka's `appendAsFollower`: appends one or more whole v2 batches that carry the leader's
    /// offsets and `partitionLeaderEpoch`, byte for byte (CRC checked, no decompression, no size
    /// checks), and returns what was stored. Works whatever the role (a bare log, a leader or a
    /// follower).
    ///
    /// Nothing is written when it fails:
    /// [`Error::UnexpectedAppendOffset`](crate::Error::UnexpectedAppendOffset) if the first offset
    /// is below the log end offset (the follower must truncate first),
    /// [`Error::OffsetsOutOfOrder`](crate::Error::OffsetsOutOfOrder) if a batch does not start
    /// after the previous one ends, [`Error::InvalidBatch`](crate::Error::InvalidBatch) for a torn
    /// batch, a bad CRC or a magic other than 2, and
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an empty buffer. The producer
    /// state follows Kafka's REPLICATION rules: a re-sent batch is not a duplicate here, since the
    /// leader decided. Offsets may leave gaps (a compacted leader's); the log end becomes the last
    /// offset + 1. A call whose last offset lies more than `i32::MAX` past the log end rolls at its
    /// first offset, with the gap between two segments (Kafka's `maybeRoll`), in any log: the roll
    /// records in `partlog.checkpoint` that the log's records are compacted, so that reads,
    /// recovery and `verify` take the gap for what it is. A call whose batches span more than
    /// `i32::MAX` offsets fits no segment and is
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) (append it in two calls).
    pub fn append_as_follower(&self, batches: &[u8]) -> Result<LogAppendInfo> {
        self.shared.append_as_follower(batches)
    }

    /// Rolls the active segment (Kafka's `UnifiedLog.roll()`): seals it and starts a new active
    /// segment at the log end offset, whose base offset it returns. A sealed segment is what
    /// retention deletes and compaction cleans, so a roll makes the newest records eligible
    /// for both.
    ///
    /// An active segment that is empty and already starts at the log end offset stays: the
    /// call then changes nothing and returns its base (Kafka replaces such a segment with an
    /// identical one). Appends from other threads serialise with the roll.
    ///
    /// Fails with [`Error::Closed`](crate::Error::Closed),
    /// [`Error::Poisoned`](crate::Error::Poisoned),
    /// [`Error::Unsupported`](crate::Error::Unsupported) on a log opened read-only, or an I/O error
    /// creating the new segment (the old one then stays active).
    pub fn roll(&self) -> Result<i64> {
        self.shared.roll_now()
    }

    /// Removes every record at or above `offset` and makes that durable before returning. A
    /// batch that straddles `offset` goes whole, so the new
    /// log end offset may be a little below `offset`; it is returned. Readers positioned above it
    /// get [`Error::Truncated`](crate::Error::Truncated). The leader-epoch cache drops the epochs
    /// starting at or above the new end (also when `offset` is at or above the log end, as Kafka's
    /// `truncateTo` does), and a high watermark above it comes down to it (see
    /// [`set_high_watermark`](Self::set_high_watermark)). A
    /// segment that begins at `offset` stays, emptied, as the active segment (Kafka's `truncateTo`
    /// deletes only the segments that begin above it).
    ///
    /// In a compacted log the new end is the offset after the last batch kept, since the files
    /// are all that record the end: an `offset` in a gap that compaction left, or at a batch that
    /// follows one, ends the log after the last batch kept below it (the segment's base offset
    /// if it keeps none), so the new end may be well below `offset`, and the log start offset
    /// comes down to it if it was higher (nothing below the old start comes back: every batch
    /// kept ends at or below the new end).
    ///
    /// Compaction has already removed the records that a later record of their key superseded.
    /// Truncating below such a later record removes the key's latest value without bringing the
    /// older ones back: the key then reads as its last record below `offset` that compaction
    /// kept, or not at all. Kafka avoids this by cleaning only below
    /// the high watermark and truncating only above it; do the same by truncating only above
    /// what [`compact`](Self::compact) has cleaned.
    // ARCHITECTURE.md §3, invariant 15; §11.
    pub fn truncate_to(&self, offset: i64) -> Result<i64> {
        self.shared.truncate_to(offset)
    }

    /// Moves the log start offset up to `offset`, durably: reads below it fail from then on,
    /// and the new start is in an fsynced checkpoint before this returns, after the records
    /// below it were made durable (a group-commit sync, if they were not yet). Whole segments
    /// below it are deleted by retention. The leader-epoch cache drops the epochs wholly below
    /// it; the producer state forgets no producer: one whose data now lies below the start stays
    /// until it expires (`producer.id.expiration.ms`, as in Kafka since KIP-360).
    ///
    /// Fails with [`Error::OffsetOutOfRange`](crate::Error::OffsetOutOfRange) if `offset` is above
    /// the log end offset, or, once [`set_high_watermark`](Self::set_high_watermark) was called,
    /// above the high watermark (Kafka's `deleteRecords` refuses the same: nothing at or above the
    /// high watermark is deleted).
    pub fn delete_records_before(&self, offset: i64) -> Result<()> {
        self.shared.delete_records_before(offset)
    }

    /// Deletes every segment and restarts the log empty at `offset` (Kafka's
    /// `truncateFullyAndStartAt`): a new empty active segment at `offset`, the log start and the
    /// log end offset at `offset`, the leader-epoch cache and the producer state cleared, the
    /// producer snapshots deleted, and a set high watermark moved to `offset`. Durable on
    /// return; see the module docs of `truncate_fully.rs` for what a crash part-way leaves.
    ///
    /// Readers positioned below `offset` get
    /// [`Error::OffsetOutOfRange`](crate::Error::OffsetOutOfRange) from then on. A negative
    /// `offset`, or one no segment can start at (above `i64::MAX - i32::MAX`), is
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument). A failure part-way poisons the
    /// log, which then recovers at its next open.
    pub fn truncate_fully_and_start_at(&self, offset: i64) -> Result<()> {
        self.shared.truncate_fully_and_start_at(offset)
    }
}
