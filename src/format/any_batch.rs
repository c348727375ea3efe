//! [`Batch`]: one batch of any magic, and the one way to iterate its records.
//!
//! A Kafka `.log` file written over the years may hold legacy messages (magic 0 and 1) followed
//! by v2 batches: the log's format was upgraded in place. [`Batch`] validates either kind and
//! yields its records as [`Record`]s with absolute offsets and Kafka's timestamps (legacy
//! records have no headers), so that readers, and tools that rewrite old logs as v2, need not
//! care which kind they hold.

use super::batch::{BatchHeader, BatchView, FrameSplitter, TimestampType, peek_batch_frame};
use super::legacy::{LegacyBatchView, LegacyRecordIter};
use super::record::{Record, RecordIter};
use crate::error::{Corruption, Error, Result};

/// One validated batch: a RecordBatch v2, or a legacy outer message (a wrapper with its inner
/// messages, or a single uncompressed message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Batch<'a> {
    /// Magic 2.
    V2(BatchView<'a>),
    /// Magic 0 or 1.
    Legacy(LegacyBatchView<'a>),
}

impl<'a> Batch<'a> {
    /// Validates `bytes` as one whole batch of any magic: [`BatchView::new`] for magic 2,
    /// [`LegacyBatchView::new`] for magic 0 and 1 (each checks its own CRC). Another magic is
    /// `BadMagic`.
    pub fn new(bytes: &'a [u8]) -> Result<Batch<'a>, Corruption> {
        let frame = peek_batch_frame(bytes)?.ok_or(Corruption::Truncated {
            needed: super::HEADER_SIZE_UP_TO_MAGIC as u64,
            available: bytes.len() as u64,
        })?;
        if frame.is_legacy() {
            LegacyBatchView::new(bytes).map(Batch::Legacy)
        } else {
            BatchView::new(bytes).map(Batch::V2)
        }
    }

    /// [`Batch::new`] for bytes a caller handed in: the error is [`Error::InvalidBatch`].
    pub fn decode(bytes: &'a [u8]) -> Result<Batch<'a>> {
        Batch::new(bytes).map_err(|what| Error::InvalidBatch { what })
    }

    /// The format version: 2, or 0/1 for a legacy message.
    pub fn magic(&self) -> i8 {
        match self {
            Batch::V2(view) => view.header().magic,
            Batch::Legacy(view) => view.header().magic,
        }
    }

    /// The v2 view, if this is a v2 batch.
    pub fn as_v2(&self) -> Option<&BatchView<'a>> {
        match self {
            Batch::V2(view) => Some(view),
            Batch::Legacy(_) => None,
        }
    }

    /// The legacy view, if this is a magic 0 or 1 message.
    pub fn as_legacy(&self) -> Option<&LegacyBatchView<'a>> {
        match self {
            Batch::V2(_) => None,
            Batch::Legacy(view) => Some(view),
        }
    }

    /// The v2 header, if this is a v2 batch (producer ids, sequences, the transactional and
    /// control bits, the leader epoch: a legacy message has none of them).
    pub fn header(&self) -> Option<&BatchHeader> {
        self.as_v2().map(BatchView::header)
    }

    /// The offset of the last record slot: `baseOffset + lastOffsetDelta` for v2, the outer
    /// message's offset for a legacy batch. What Kafka's offset index stores.
    pub fn last_offset(&self) -> i64 {
        match self {
            Batch::V2(view) => view.last_offset(),
            Batch::Legacy(view) => view.last_offset(),
        }
    }

    /// `last_offset() + 1`: where the next batch starts at the earliest.
    pub fn next_offset(&self) -> i64 {
        match self {
            Batch::V2(view) => view.next_offset(),
            Batch::Legacy(view) => view.next_offset(),
        }
    }

    /// The offset of the first record slot: v2's `baseOffset`, or a legacy batch's first
    /// record's offset, which for a compressed wrapper takes decompressing it into `scratch`.
    pub fn base_offset(&self, scratch: &mut Vec<u8>) -> Result<i64> {
        match self {
            Batch::V2(view) => Ok(view.base_offset()),
            Batch::Legacy(view) => view.base_offset(scratch),
        }
    }

    /// The largest timestamp as Kafka's indexes see it: v2's `maxTimestamp`, a legacy outer
    /// message's timestamp (-1 for magic 0, which has none).
    pub fn max_timestamp(&self) -> i64 {
        match self {
            Batch::V2(view) => view.header().max_timestamp,
            Batch::Legacy(view) => view.header().max_timestamp(),
        }
    }

    /// What the records' timestamps mean. Magic 0 reports CreateTime (its timestamps are -1).
    pub fn timestamp_type(&self) -> TimestampType {
        match self {
            Batch::V2(view) => view.header().timestamp_type(),
            Batch::Legacy(view) => view.header().timestamp_type(),
        }
    }

    /// The raw codec id (attribute bits 0-2).
    pub fn compression_id(&self) -> u8 {
        match self {
            Batch::V2(view) => view.header().compression_id(),
            Batch::Legacy(view) => view.header().compression_id(),
        }
    }

    /// Whether this is a v2 control batch (transaction markers). Legacy messages never are.
    pub fn is_control(&self) -> bool {
        self.header().is_some_and(BatchHeader::is_control)
    }

    /// The batch's size in bytes, framing included.
    pub fn total_size(&self) -> usize {
        self.as_bytes().len()
    }

    /// The whole batch, exactly as validated.
    pub fn as_bytes(&self) -> &'a [u8] {
        match self {
            Batch::V2(view) => view.as_bytes(),
            Batch::Legacy(view) => view.as_bytes(),
        }
    }

    /// Iterates the records, with absolute offsets and Kafka's timestamps: see
    /// [`BatchView::records`] and [`LegacyBatchView::records`] for what fails up front and what
    /// the iterator reports. A compressed batch is decompressed once, into `scratch`.
    #[inline]
    pub fn records<'s>(&'s self, scratch: &'s mut Vec<u8>) -> Result<BatchRecords<'s>> {
        Ok(BatchRecords(match self {
            Batch::V2(view) => Records::V2(view.records(scratch)?),
            Batch::Legacy(view) => Records::Legacy(view.records(scratch)?),
        }))
    }

    /// [`records`](Self::records) that borrow the batch's bytes (or `scratch`) rather than the
    /// view, so that a record can outlive the view it was found through (a point read's).
    #[inline]
    pub(crate) fn into_records(self, scratch: &'a mut Vec<u8>) -> Result<BatchRecords<'a>> {
        Ok(BatchRecords(match self {
            Batch::V2(view) => Records::V2(view.into_records(scratch)?),
            Batch::Legacy(view) => Records::Legacy(view.into_records(scratch)?),
        }))
    }
}

/// The records of a [`Batch`] of either kind, each or the first error (after which it ends).
#[derive(Debug, Clone)]
pub struct BatchRecords<'a>(Records<'a>);

#[derive(Debug, Clone)]
enum Records<'a> {
    V2(RecordIter<'a>),
    Legacy(LegacyRecordIter<'a>),
}

impl BatchRecords<'_> {
    /// Steps over the records below `offset` without decoding them: for a v2 batch, as
    /// [`RecordIter::skip_below`] does; the records of a legacy batch are few (a wrapper's inner
    /// messages), and [`next`](Iterator::next) steps over nothing.
    pub fn skip_below(&mut self, offset: i64) {
        if let Records::V2(records) = &mut self.0 {
            records.skip_below(offset);
        }
    }
}

impl<'a> Iterator for BatchRecords<'a> {
    type Item = Result<Record<'a>>;

    #[inline]
    fn next(&mut self) -> Option<Result<Record<'a>>> {
        match &mut self.0 {
            Records::V2(records) => records.next(),
            Records::Legacy(records) => records.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.0 {
            Records::V2(records) => records.size_hint(),
            Records::Legacy(records) => records.size_hint(),
        }
    }
}

/// Iterates the batches of any magic in a buffer of whole batches back to back (a `.log` file
/// that may hold legacy messages), yielding each batch's byte position with its validation
/// result. It stops as [`super::BatchIter`] does: at a trailing partial batch
/// ([`AnyBatchIter::remainder`]), or after a frame that cannot be read; after any other invalid
/// batch it steps over it and goes on.
#[derive(Debug, Clone)]
pub struct AnyBatchIter<'a> {
    frames: FrameSplitter<'a>,
}

impl<'a> AnyBatchIter<'a> {
    /// Iterates the batches in `bytes`, starting at position 0.
    pub fn new(bytes: &'a [u8]) -> AnyBatchIter<'a> {
        AnyBatchIter {
            frames: FrameSplitter::new(bytes),
        }
    }

    /// The position of the next batch to be read (after the iteration ends: where the valid
    /// prefix stops).
    pub fn position(&self) -> usize {
        self.frames.position
    }

    /// The bytes from [`AnyBatchIter::position`] on.
    pub fn remainder(&self) -> &'a [u8] {
        self.frames.remainder()
    }
}

impl<'a> Iterator for AnyBatchIter<'a> {
    type Item = (usize, Result<Batch<'a>, Corruption>);

    fn next(&mut self) -> Option<Self::Item> {
        let (start, frame) = self.frames.next()?;
        Some((start, frame.and_then(Batch::new)))
    }
}
