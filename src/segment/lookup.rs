//! Offset and timestamp lookups: the walk from an index entry to the batch that holds an
//! offset ([`Segment::find_offset_by_timestamp`] and the reads' `translate_offset`), and the
//! policy for an index entry the walk cannot trust: rebuild the indexes once and walk again.
//!
//! Kept apart because the indexes are derived data: this is where an entry is checked against
//! the `.log` before it is used, and where a bad entry is told from bytes that a concurrent
//! truncation or append changed under the walk.

use super::log_segment::{Segment, SegmentRole};
use super::read::{MAX_TRUNCATION_RETRIES, ReadView};
use super::walker::{BatchSummary, BatchWalker, Frame, Step};
use crate::error::{Corruption, Error, Result};
use crate::format::Batch;
use crate::index::{OffsetPosition, TimestampOffset};

/// What one walk from an index entry found: its answer, or that the entry it started from
/// cannot be trusted. The second is kept apart from the walk's errors because it alone may be
/// cured by rebuilding the indexes, which are derived from the `.log`.
enum IndexWalk<T> {
    /// The walk's answer: the index led it there and the `.log` bore the entry out.
    Answered(T),
    /// The entry is out of range, points at no batch or past the end, or names a batch it
    /// does not hold: the error to fail with when no rebuild is allowed or a rebuild did not
    /// help.
    EntryUntrusted(Error),
}

impl Segment {
    /// Finds the first batch whose last offset is at or above `target`, below `end`.
    ///
    /// The offset index gives a starting position; its entry is checked against the batch it
    /// names (as Kafka's DumpLogSegments does), and on a mismatch the indexes are rebuilt from the
    /// log and the lookup retried once, unless [`may_rebuild`](Self::may_rebuild) says the
    /// entry may only look bad to this read: a cut, or the appends after it or after `view`
    /// was taken, make good entries look bad to a walk that began before them.
    pub(super) fn translate_offset(
        &self,
        target: i64,
        view: ReadView,
    ) -> Result<Option<(Frame, BatchSummary)>> {
        let mut walker = BatchWalker::new(&self.log, &self.log_path, view.end);
        self.translate_offset_in(target, view, &mut walker, &mut 0)
    }

    /// [`translate_offset`](Self::translate_offset) through the caller's walker, whose window
    /// then holds the bytes read (a read goes on from there without another system call).
    /// `walk_from` is set to the position the successful walk started at (a batch boundary).
    pub(super) fn translate_offset_in(
        &self,
        target: i64,
        view: ReadView,
        walker: &mut BatchWalker<'_>,
        walk_from: &mut u64,
    ) -> Result<Option<(Frame, BatchSummary)>> {
        self.rebuild_once_and_retry(view, || {
            self.walk_from_offset_entry(target, view, walker, walk_from)
        })
    }

    /// One walk of [`translate_offset_in`](Self::translate_offset_in) from the offset-index
    /// entry for `target`, trusting the entry only as far as the batch it names bears it out.
    fn walk_from_offset_entry(
        &self,
        target: i64,
        view: ReadView,
        walker: &mut BatchWalker<'_>,
        walk_from: &mut u64,
    ) -> Result<IndexWalk<Option<(Frame, BatchSummary)>>> {
        let end = view.end;
        let entry = match self.offset_index.lookup(target) {
            Ok(entry) => entry,
            // An entry that fails its own range check: the index is derived, so rebuild it.
            Err(error @ Error::Corrupt { .. }) => return Ok(IndexWalk::EntryUntrusted(error)),
            Err(error) => return Err(error),
        };
        let mut position = u64::from(entry.position);
        *walk_from = position;
        let mut first = true;
        let mut order_floor = self.base_offset;
        // The batch last skipped on its lastOffsetDelta (and batchLength), which only its
        // CRC protects: a damaged one would hide the batch's records without an error. The
        // next batch proves both when its baseOffset is the skipped batch's last offset + 1
        // (a damaged delta or length would have to be matched by a damaged baseOffset);
        // otherwise (a gap left by compaction, the end, an error) the skipped batch's CRC
        // is checked before anything else happens.
        let mut skipped: Option<Frame> = None;
        loop {
            // What lies at an index entry's position is only as good as the entry: bytes
            // there that are no batch header mean a bad entry, not a corrupt log.
            let at_entry = first && position != 0;
            let step = match walker.frame_at(position) {
                Err(Error::Corrupt { .. }) if at_entry => {
                    return Ok(IndexWalk::EntryUntrusted(
                        self.bad_entry(entry, "does not point at a batch"),
                    ));
                }
                Err(error) => {
                    self.check_skipped(walker, skipped.take())?;
                    return Err(error);
                }
                Ok(step) => step,
            };
            let frame = match step {
                Step::Batch(frame) => frame,
                Step::End if !first || position == 0 => {
                    self.check_skipped(walker, skipped.take())?;
                    return Ok(IndexWalk::Answered(None));
                }
                // The published end lies on a batch boundary, so a frame that runs past it
                // is a damaged length, never a batch still being written.
                Step::Partial { available, needed } if !first || position == 0 => {
                    self.check_skipped(walker, skipped.take())?;
                    return Err(self.corrupt(position, Corruption::Truncated { needed, available }));
                }
                Step::End | Step::Partial { .. } => {
                    // An entry the writer added for a batch it has not published yet (the
                    // caller asked past the end this read saw): `target`, at or above it,
                    // is above every offset the segment holds, so nothing here holds it.
                    if entry.offset >= self.next_offset() {
                        return Ok(IndexWalk::Answered(None));
                    }
                    // Otherwise the entry points past the published end: it cannot be
                    // trusted.
                    return Ok(IndexWalk::EntryUntrusted(
                        self.bad_entry(entry, "points past the end of the log"),
                    ));
                }
            };
            let summary = match walker.summary(&frame) {
                Err(Error::Corrupt { .. }) if at_entry => {
                    return Ok(IndexWalk::EntryUntrusted(
                        self.bad_entry(entry, "does not point at a batch"),
                    ));
                }
                Err(error) => {
                    self.check_skipped(walker, skipped.take())?;
                    return Err(error);
                }
                Ok(summary) => summary,
            };
            // Proven by this batch's baseOffset, or checked now.
            let unproven = skipped
                .take()
                .filter(|_| summary.base_offset != Some(order_floor));
            self.check_skipped(walker, unproven)?;
            // Offsets lie outside the CRC: a damaged baseOffset that leaves the batch below
            // the one before it, outside the segment's range, or past the segment's end
            // would be returned under wrong offsets. The end is read after `end` was (the
            // writer publishes it first); a truncation meanwhile shrinks the size, and then
            // the end says nothing about this batch.
            let past_end = summary.last_offset >= self.next_offset() && self.size() >= end;
            if summary.order_floor() < order_floor
                || summary.last_offset < summary.order_floor()
                || summary.last_offset - self.base_offset > i32::MAX as i64
                || past_end
            {
                return Err(self.corrupt(
                    frame.position,
                    Corruption::OffsetOrder {
                        offset: summary.order_floor(),
                        bound: order_floor,
                    },
                ));
            }
            order_floor = summary.next_offset();
            if first && position != 0 && summary.last_offset != entry.offset {
                return Ok(IndexWalk::EntryUntrusted(
                    self.bad_entry(entry, "does not name the batch at its position"),
                ));
            }
            first = false;
            if summary.last_offset >= target {
                return Ok(IndexWalk::Answered(Some((frame, summary))));
            }
            skipped = Some(frame);
            position += frame.total_size;
        }
    }

    /// Checks the CRC of a batch the walk skipped without proof (see `translate_offset_in`).
    fn check_skipped(&self, walker: &mut BatchWalker<'_>, skipped: Option<Frame>) -> Result<()> {
        let Some(frame) = skipped else {
            return Ok(());
        };
        let bytes = walker.batch_bytes(&frame)?;
        Batch::new(bytes)
            .map(|_| ())
            .map_err(|what| self.corrupt(frame.position, what))
    }

    fn can_rebuild(&self) -> bool {
        *self.role.read() != SegmentRole::ReadOnly
    }

    /// Whether a read that took `view` may rebuild the indexes over an entry it found bad: not
    /// when a truncation overlapped it (the entry may be fine and the bytes under it cut or
    /// new), nor when the segment has grown since (the entry may name a batch published after
    /// `view`); rebuilding the active segment's indexes would then race its writer for nothing.
    /// The read fails instead, and [`read_in_place`](Self::read_in_place) tells why.
    fn may_rebuild(&self, view: ReadView) -> bool {
        if !self.can_rebuild() || self.raced_truncation(view.epoch).is_some() {
            return false;
        }
        // An append writes its index entries before it publishes its batches: let one under
        // way finish (the rebuild would wait for it anyway), then see whether it moved the end.
        drop(self.writer.lock());
        self.size() == view.end && self.raced_truncation(view.epoch).is_none()
    }

    /// Runs `walk`, and when the index entry it started from is not trusted, rebuilds the
    /// indexes from the log once, if [`may_rebuild`](Self::may_rebuild) allows, and runs it
    /// again (the shape of Kafka's `LogLoader.retryOnOffsetOverflow`). An entry still untrusted
    /// after the rebuild, or one that may not be rebuilt, fails the lookup with the walk's
    /// error: a reader that raced a truncation or an append never rebuilds.
    fn rebuild_once_and_retry<T>(
        &self,
        view: ReadView,
        mut walk: impl FnMut() -> Result<IndexWalk<T>>,
    ) -> Result<T> {
        let untrusted = match walk()? {
            IndexWalk::Answered(answer) => return Ok(answer),
            IndexWalk::EntryUntrusted(error) => error,
        };
        if !self.may_rebuild(view) {
            return Err(untrusted);
        }
        log::warn!(
            "{untrusted}; rebuilding the indexes of {}",
            self.log_path().display()
        );
        self.rebuild_indexes_for_read()?;
        match walk()? {
            IndexWalk::Answered(answer) => Ok(answer),
            IndexWalk::EntryUntrusted(error) => Err(error),
        }
    }

    fn bad_entry(&self, entry: OffsetPosition, why: &str) -> Error {
        Error::Corrupt {
            file: self.offset_index.path(),
            position: 0,
            what: Corruption::BadIndexEntry(format!(
                "entry (offset {}, position {}) {why}",
                entry.offset, entry.position
            )),
        }
    }

    /// Kafka's `findOffsetByTimestamp`: the first record at or after `start_offset` whose
    /// timestamp is at or above `timestamp`, as `(timestamp, offset)`.
    ///
    /// A truncation of the segment that overlaps the lookup and makes it fail (the bytes it
    /// walked were cut or rewritten) makes it run again, and after a few such tries fail with
    /// [`Error::Truncated`]; it is never reported as corruption and never rebuilds an index.
    pub fn find_offset_by_timestamp(
        &self,
        timestamp: i64,
        start_offset: i64,
    ) -> Result<Option<TimestampOffset>> {
        self.find_offset_by_timestamp_below(timestamp, start_offset, i64::MAX)
    }

    /// [`find_offset_by_timestamp`](Self::find_offset_by_timestamp) among the batches that end
    /// below `end_offset`: the walk reads no byte of a batch at or above it. A poisoned log
    /// answers from below its durable offset only, and a failed fsync may have dropped the
    /// pages above it. Races with a truncation end as in `find_offset_by_timestamp`.
    pub fn find_offset_by_timestamp_below(
        &self,
        timestamp: i64,
        start_offset: i64,
        end_offset: i64,
    ) -> Result<Option<TimestampOffset>> {
        let mut tries = 0;
        loop {
            let view = self.read_view();
            let error =
                match self.find_offset_by_timestamp_once(timestamp, start_offset, end_offset, view)
                {
                    Err(error) => error,
                    found => return found,
                };
            let error = match self.raced_truncation(view.epoch) {
                Some(at) => Error::Truncated { at },
                // An index entry added after `view` led the lookup past its end.
                None if self.size() > view.end => error,
                None => return Err(error),
            };
            tries += 1;
            if tries >= MAX_TRUNCATION_RETRIES {
                return Err(error);
            }
        }
    }

    /// One try of [`find_offset_by_timestamp_below`](Self::find_offset_by_timestamp_below), up
    /// to what `view` saw published.
    fn find_offset_by_timestamp_once(
        &self,
        timestamp: i64,
        start_offset: i64,
        end_offset: i64,
        view: ReadView,
    ) -> Result<Option<TimestampOffset>> {
        let end = view.end;
        let Some(frame) = self.rebuild_once_and_retry(view, || {
            self.walk_from_time_entry(timestamp, start_offset, end_offset, view)
        })?
        else {
            return Ok(None);
        };
        let mut walker = BatchWalker::new(&self.log, &self.log_path, end);
        let mut position = frame.position;
        let mut scratch = Vec::new();
        loop {
            let frame = match walker.frame_at(position)? {
                Step::Batch(frame) => frame,
                Step::End => return Ok(None),
                Step::Partial { available, needed } => {
                    return Err(self.corrupt(position, Corruption::Truncated { needed, available }));
                }
            };
            let summary = walker.summary(&frame)?;
            // Every walked batch is CRC-checked: a batch is skipped on its maxTimestamp and
            // lastOffset, which only the CRC protects.
            let bytes = walker.batch_bytes(&frame)?;
            let batch = Batch::new(bytes).map_err(|what| self.corrupt(position, what))?;
            if summary.max_timestamp >= timestamp
                && summary.last_offset >= start_offset
                && !batch.is_control()
            {
                let records = batch
                    .records(&mut scratch)
                    .map_err(|e| self.relocate(e, position))?;
                for record in records {
                    let record = record.map_err(|e| self.relocate(e, position))?;
                    if record.timestamp >= timestamp && record.offset >= start_offset {
                        return Ok(Some(TimestampOffset {
                            timestamp: record.timestamp,
                            offset: record.offset,
                        }));
                    }
                }
            }
            if summary.next_offset() >= end_offset {
                return Ok(None);
            }
            position += frame.total_size;
        }
    }

    /// One walk of [`find_offset_by_timestamp_once`](Self::find_offset_by_timestamp_once) from
    /// the time-index entry for `timestamp` to the batch its record walk starts at (`None`:
    /// no batch holds a record it could return), trusting the entry only if that batch bears
    /// it out.
    fn walk_from_time_entry(
        &self,
        timestamp: i64,
        start_offset: i64,
        end_offset: i64,
        view: ReadView,
    ) -> Result<IndexWalk<Option<Frame>>> {
        let time_entry = match self.time_index.lookup(timestamp) {
            Ok(entry) => entry,
            Err(error @ Error::Corrupt { .. }) => return Ok(IndexWalk::EntryUntrusted(error)),
            Err(error) => return Err(error),
        };
        let from = time_entry.offset.max(start_offset);
        if from >= end_offset && end_offset < self.next_offset() {
            // The entry leads into batches the caller may not read, and it cannot be
            // checked without reading them: walk from the start instead.
            let found = self.translate_offset(start_offset.max(self.base_offset), view)?;
            return Ok(IndexWalk::Answered(found.map(|(frame, _)| frame)));
        }
        let found = self.translate_offset(from, view)?;
        // The entry is used like an offset-index entry (ARCHITECTURE.md §3, invariant 6): it must
        // name the batch that holds its timestamp, or records before a damaged entry would be
        // skipped. `(-1, base)` is the lookup's answer when no entry applies.
        let is_entry = (time_entry.timestamp, time_entry.offset) != (-1, self.base_offset);
        let names_its_batch = found.as_ref().is_some_and(|(_, summary)| {
            summary.last_offset == time_entry.offset
                && summary.max_timestamp == time_entry.timestamp
        });
        // An entry below `start_offset` is not used, so it needs no check.
        let unused = !is_entry || from != time_entry.offset;
        match found {
            Some((frame, _)) if unused || names_its_batch => {
                return Ok(IndexWalk::Answered(Some(frame)));
            }
            None if unused => return Ok(IndexWalk::Answered(None)),
            _ => {}
        }
        Ok(IndexWalk::EntryUntrusted(Error::Corrupt {
            file: self.time_index.path(),
            position: 0,
            what: Corruption::BadIndexEntry(format!(
                "entry (timestamp {}, offset {}) does not name the batch holding it",
                time_entry.timestamp, time_entry.offset
            )),
        }))
    }
}
