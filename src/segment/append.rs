//! The segment's write path: [`Segment::append`] and the roll decision
//! ([`Segment::should_roll`]), which run under the segment's writer lock.
//!
//! Kept apart from reads and recovery because it is the only code that extends the file and its
//! indexes in place: everything it publishes must follow the publication order (ARCHITECTURE.md
//! §4) that the readers in `read.rs` rely on.

use super::log_segment::{AppendInfo, RollReason, Segment, WriterState, note_max_timestamp};
use super::walker::{BatchSummary, BatchWalker, Step};
use crate::error::{Corruption, Error, Result};
use crate::format::{BatchHeader, RECORD_BATCH_OVERHEAD};

/// The bytes of an append: one or more whole batches, held in up to two slices that are
/// written as one (`StorageFile::write_all_pair_at`). The log appends a produced batch as its
/// stamped header and the producer's bytes after it, so that it never copies a large batch
/// whole; every other append is one slice.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AppendBytes<'a> {
    head: &'a [u8],
    tail: &'a [u8],
}

impl<'a> AppendBytes<'a> {
    /// Batches in one slice.
    pub(crate) fn whole(batches: &'a [u8]) -> Self {
        AppendBytes {
            head: batches,
            tail: &[],
        }
    }

    /// Batches that are `head` followed by `tail`.
    pub(crate) fn pair(head: &'a [u8], tail: &'a [u8]) -> Self {
        AppendBytes { head, tail }
    }

    pub(crate) fn len(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    /// The header of the batch at `position`, whichever of the two slices it lies in.
    fn header_at(&self, position: usize) -> std::result::Result<BatchHeader, Corruption> {
        let Some(in_head) = self.head.get(position..) else {
            let in_tail = self
                .tail
                .get(position - self.head.len()..)
                .unwrap_or_default();
            return BatchHeader::parse(in_tail);
        };
        if in_head.len() >= RECORD_BATCH_OVERHEAD || self.tail.is_empty() {
            return BatchHeader::parse(in_head);
        }
        // A header split across the two slices: parse a joined copy of its 61 bytes.
        let mut joined = [0u8; RECORD_BATCH_OVERHEAD];
        let (from_head, from_tail) = joined.split_at_mut(in_head.len());
        from_head.copy_from_slice(in_head);
        let Some(rest) = self.tail.get(..from_tail.len()) else {
            return Err(Corruption::Truncated {
                needed: RECORD_BATCH_OVERHEAD as u64,
                available: self.len().saturating_sub(position) as u64,
            });
        };
        from_tail.copy_from_slice(rest);
        BatchHeader::parse(&joined)
    }
}

impl Segment {
    /// Appends one or more encoded v2 batches whose offsets the log has assigned.
    ///
    /// Checks: every batch is whole and framed as v2; offsets increase (a batch's base is at or
    /// above the previous batch's next offset: gaps are legal, as in a compacted log); the last
    /// offset fits the 32-bit relative range; the file stays within `i32::MAX` bytes. CRCs are
    /// the caller's to check (the log validates batches before assigning offsets).
    ///
    /// Indexing follows Kafka: an entry is added for a batch once more than
    /// `index.interval.bytes` have been appended since the last entry, so the first batch of a
    /// segment is never indexed. A full index is simply not extended (the log rolls on it).
    ///
    /// A failed write truncates the file back to the end of the last complete batch; if even that
    /// fails, the segment refuses further appends (the log poisons itself).
    pub fn append(&self, batches: &[u8]) -> Result<AppendInfo> {
        let mut writer = self.writer.lock();
        self.append_locked(&mut writer, AppendBytes::whole(batches))
    }

    /// [`should_roll`](Self::should_roll) for one batch, then, if it should not, its
    /// [`append`](Self::append), under one hold of the writer lock: `Ok(Err(reason))` when the
    /// segment should roll first (nothing was appended).
    pub fn append_unless_roll(
        &self,
        batch: &[u8],
        max_timestamp: i64,
        last_offset: i64,
        now_ms: i64,
    ) -> Result<std::result::Result<AppendInfo, RollReason>> {
        self.append_bytes_unless_roll(
            AppendBytes::whole(batch),
            max_timestamp,
            last_offset,
            now_ms,
        )
    }

    /// [`append`](Self::append) of batches held in two slices.
    pub(crate) fn append_bytes(&self, batches: AppendBytes<'_>) -> Result<AppendInfo> {
        let mut writer = self.writer.lock();
        self.append_locked(&mut writer, batches)
    }

    /// [`append_unless_roll`](Self::append_unless_roll) of batches held in two slices.
    pub(crate) fn append_bytes_unless_roll(
        &self,
        batch: AppendBytes<'_>,
        max_timestamp: i64,
        last_offset: i64,
        now_ms: i64,
    ) -> Result<std::result::Result<AppendInfo, RollReason>> {
        let mut writer = self.writer.lock();
        if let Some(reason) = self.roll_reason(
            &mut writer,
            batch.len() as u64,
            max_timestamp,
            last_offset,
            now_ms,
        )? {
            return Ok(Err(reason));
        }
        self.append_locked(&mut writer, batch).map(Ok)
    }

    fn append_locked(
        &self,
        writer: &mut WriterState,
        batches: AppendBytes<'_>,
    ) -> Result<AppendInfo> {
        if self.is_sealed() {
            return Err(Error::InvalidArgument {
                why: format!(
                    "segment {} is sealed and takes no appends",
                    self.base_offset
                ),
            });
        }
        if writer.broken {
            return Err(Error::InvalidArgument {
                why: format!(
                    "segment {} could not undo an earlier failed write; reopen the log",
                    self.base_offset
                ),
            });
        }
        let start = writer.size;
        let new_size = start + batches.len() as u64;
        if new_size > i32::MAX as u64 {
            return Err(Error::RecordTooLarge {
                size: batches.len() as u64,
                max: (i32::MAX as u64).saturating_sub(start),
                limit: "the room left in the segment",
            });
        }
        let checked = self.check_batches(batches, writer.next_offset)?;
        let (first_offset, last_offset) = (checked.first_offset, checked.last_offset);

        let written = if batches.tail.is_empty() {
            self.log.write_all_at(batches.head, start)
        } else {
            self.log
                .write_all_pair_at(batches.head, batches.tail, start)
        };
        if let Err(error) = written {
            self.undo_write(writer, start);
            return Err(error);
        }

        let mut max_timestamp = i64::MIN;
        let mut bytes_since = writer.bytes_since_last_index_entry;
        let mut max_so_far = writer.max_timestamp_so_far;
        let mut index_changed = false;
        let index_result = (|| {
            // The headers again, parsed where check_batches parsed them (and cannot fail now):
            // cheaper than collecting them, which cost an allocation per append.
            let mut relative_position = 0usize;
            while relative_position < batches.len() {
                let header = batches
                    .header_at(relative_position)
                    .map_err(|what| Error::InvalidBatch { what })?;
                let position = start + relative_position as u64;
                relative_position += header.total_size();
                max_timestamp = max_timestamp.max(header.max_timestamp);
                note_max_timestamp(&mut max_so_far, &BatchSummary::of_v2(&header));
                if bytes_since > u64::from(self.config.index_interval_bytes) {
                    index_changed = true;
                    if !self.offset_index.is_full() {
                        // Positions fit: the whole file stays within i32::MAX bytes.
                        self.offset_index
                            .append(header.last_offset(), position as u32)?;
                    }
                    if let (Some(max), false) = (max_so_far, self.time_index.is_full()) {
                        self.time_index
                            .maybe_append(max.timestamp, max.offset, false)?;
                    }
                    bytes_since = 0;
                }
                bytes_since += header.total_size() as u64;
            }
            Ok::<(), Error>(())
        })();
        if index_changed {
            writer.index_room = None;
        }
        if let Err(error) = index_result {
            // The index entries may point at bytes that are about to vanish: drop them too.
            let _ = self.offset_index.truncate_to(first_offset);
            let _ = self.time_index.truncate_to(first_offset);
            self.undo_write(writer, start);
            return Err(error);
        }

        if start == 0 {
            writer.rolling_based_timestamp = Some(Some(checked.first_max_timestamp));
        }
        writer.size = new_size;
        writer.next_offset = last_offset + 1;
        writer.bytes_since_last_index_entry = bytes_since;
        writer.max_timestamp_so_far = max_so_far;
        self.publish(writer);
        Ok(AppendInfo {
            position: start,
            batches: checked.count,
            first_offset,
            last_offset,
            max_timestamp,
        })
    }

    /// Parses and checks the framing and offsets of `batches`; returns what the append needs
    /// of them. Fails on zero batches.
    fn check_batches(
        &self,
        batches: AppendBytes<'_>,
        mut next_offset: i64,
    ) -> Result<CheckedBatches> {
        let mut checked: Option<CheckedBatches> = None;
        let mut position = 0usize;
        while position < batches.len() {
            let rest = batches.len() - position;
            let invalid = |what| Error::InvalidBatch { what };
            let header = batches.header_at(position).map_err(invalid)?;
            let size = header.total_size();
            if size > rest {
                return Err(invalid(Corruption::Truncated {
                    needed: size as u64,
                    available: rest as u64,
                }));
            }
            if header.base_offset < next_offset || header.base_offset < self.base_offset {
                return Err(invalid(Corruption::OffsetOrder {
                    offset: header.base_offset,
                    bound: next_offset.max(self.base_offset),
                }));
            }
            if header.last_offset_delta < 0 {
                return Err(invalid(Corruption::BadHeader(
                    "lastOffsetDelta is negative",
                )));
            }
            let last = header.last_offset();
            if last - self.base_offset > i32::MAX as i64 {
                return Err(Error::InvalidArgument {
                    why: format!(
                        "offset {last} does not fit segment {} (relative offsets are 32-bit)",
                        self.base_offset
                    ),
                });
            }
            next_offset = last + 1;
            let checked = checked.get_or_insert(CheckedBatches {
                count: 0,
                first_offset: header.base_offset,
                last_offset: last,
                first_max_timestamp: header.max_timestamp,
            });
            checked.count += 1;
            checked.last_offset = last;
            position += size;
        }
        checked.ok_or_else(|| Error::InvalidArgument {
            why: "append of zero batches".into(),
        })
    }

    /// Truncates the file back to `size` after a failed append; marks the segment broken if
    /// even that fails.
    ///
    /// The one cut made under a mapping of the active segment (invariant 17): it removes only
    /// bytes past the published size, which no reader touches, and dropping the mapping here,
    /// under the writer lock, could deadlock with a mapped reader rebuilding an index.
    fn undo_write(&self, writer: &mut WriterState, size: u64) {
        if let Err(error) = self.log.set_len(size) {
            log::error!(
                "could not truncate {} back to {size} bytes after a failed append: {error}",
                self.log_path().display()
            );
            writer.broken = true;
        }
    }

    /// Whether the segment should roll before an append of `incoming_bytes` whose largest
    /// timestamp is `incoming_max_timestamp` and whose last offset is `incoming_last_offset`
    /// (Kafka's `shouldRoll`).
    pub fn should_roll(
        &self,
        incoming_bytes: u64,
        incoming_max_timestamp: i64,
        incoming_last_offset: i64,
        now_ms: i64,
    ) -> Result<Option<RollReason>> {
        let mut writer = self.writer.lock();
        self.roll_reason(
            &mut writer,
            incoming_bytes,
            incoming_max_timestamp,
            incoming_last_offset,
            now_ms,
        )
    }

    fn roll_reason(
        &self,
        writer: &mut WriterState,
        incoming_bytes: u64,
        incoming_max_timestamp: i64,
        incoming_last_offset: i64,
        now_ms: i64,
    ) -> Result<Option<RollReason>> {
        let size = writer.size;
        // Kafka's `size > segment.bytes - incoming`, except that an empty segment never rolls on
        // size: a new one would be no roomier.
        if size > 0 && size + incoming_bytes > u64::from(self.config.segment_bytes) {
            return Ok(Some(RollReason::Size));
        }
        if size > 0 {
            let rolling_based = match writer.rolling_based_timestamp {
                Some(known) => known,
                None => {
                    let first = self.first_batch_max_timestamp(size)?;
                    writer.rolling_based_timestamp = Some(first);
                    first
                }
            };
            let waited = match rolling_based {
                Some(first) if first >= 0 => incoming_max_timestamp.saturating_sub(first),
                _ => now_ms.saturating_sub(writer.created_ms),
            };
            if waited > self.config.segment_ms - self.config.roll_jitter_ms {
                return Ok(Some(RollReason::Age));
            }
        }
        let (offset_room, time_room) = match writer.index_room {
            Some(room) => room,
            None => {
                let room = (
                    self.offset_index
                        .max_entries()
                        .saturating_sub(self.offset_index.entries()),
                    self.time_index
                        .max_entries()
                        .saturating_sub(1)
                        .saturating_sub(self.time_index.entries()),
                );
                writer.index_room = Some(room);
                room
            }
        };
        if offset_room == 0 {
            return Ok(Some(RollReason::OffsetIndexFull));
        }
        if time_room == 0 {
            return Ok(Some(RollReason::TimeIndexFull));
        }
        if incoming_last_offset.saturating_sub(self.base_offset) > i32::MAX as i64 {
            return Ok(Some(RollReason::OffsetOverflow));
        }
        Ok(None)
    }

    fn first_batch_max_timestamp(&self, size: u64) -> Result<Option<i64>> {
        let mut walker = BatchWalker::new(&self.log, &self.log_path, size);
        match walker.frame_at(0)? {
            Step::Batch(frame) => Ok(Some(walker.summary(&frame)?.max_timestamp)),
            _ => Ok(None),
        }
    }
}

/// What [`Segment::append`] needs of the batches it checked.
struct CheckedBatches {
    count: usize,
    first_offset: i64,
    last_offset: i64,
    /// The first batch's maxTimestamp: the time rolling counts from, in a new segment.
    first_max_timestamp: i64,
}
