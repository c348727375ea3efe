//! Validation and truncation: [`Segment::scan`], recovery's [`Segment::recover_from`], a
//! read-only segment's [`Segment::catch_up`], the index rebuild of an open, and
//! [`Segment::truncate_to`] / [`Segment::truncate_tail`].
//!
//! Kept apart because these are the paths that trust nothing in the file and that move the
//! segment's end backwards: they mark a truncation under way so that readers which overlap it
//! are told, not misled.

use crate::sync::atomic::{AtomicU64, Ordering};

use super::epochs::{FrameEpoch, RisingEpochs};
use super::log_segment::{InvalidBytes, ScanReport, Segment, SegmentRole, note_max_timestamp};
use super::walker::{BatchSummary, BatchWalker, Frame, Step};
use crate::error::{Corruption, Error, Result};
use crate::format::Batch;
use crate::index::{OffsetPosition, TimestampOffset, truncation_temp_path};

impl Segment {
    /// [`scan`](Self::scan) for a segment of any role. A sealed segment's indexes refuse
    /// appends, so they are rebuilt on new files, get back the final time-index entry that
    /// [`seal`](Self::seal) wrote, and are synced and sealed again: a bad entry found in a
    /// sealed index at open must be rebuilt, not turned into an error. If the scan finds
    /// invalid bytes, a sealed segment's indexes are left as they were: the open fails with
    /// `Error::Corrupt`, and indexes cut at the damage would outlive it (a time index without
    /// its final entry, an offset index without its tail, passing the next open's checks once
    /// the damage is gone). Like `scan`, it sets the segment's end: an open's alone (a read
    /// rebuilds with [`rebuild_indexes_for_read`](Self::rebuild_indexes_for_read)).
    pub(super) fn rescan(&self) -> Result<ScanReport> {
        if !self.indexes_sealed() {
            return self.scan();
        }
        self.rewrite_sealed_indexes(|| {
            let report = self.scan()?;
            Ok(match report.first_invalid {
                None => IndexRewrite::Keep {
                    final_time_entry: self.writer.lock().max_timestamp_so_far,
                    answer: report,
                },
                Some(_) => IndexRewrite::Abandon(report),
            })
        })
    }

    /// Whether the segment's indexes are (or are to be) sealed: a rebuild must then write them
    /// as [`rewrite_sealed_indexes`](Self::rewrite_sealed_indexes) does. A sealed segment whose
    /// index files were missing has new, writable ones: they too get the final time-index
    /// entry and the seal (a compacted segment's indexes are built so).
    pub(super) fn indexes_sealed(&self) -> bool {
        self.offset_index.is_sealed()
            || self.time_index.is_sealed()
            || *self.role.read() == SegmentRole::Sealed
    }

    /// Rebuilds a sealed segment's indexes: `fill` appends their entries (to writable, empty
    /// indexes) and says whether to keep them, with the final time-index entry to write, if
    /// any; kept, the indexes are then synced and sealed again. If `fill` abandons them, or
    /// anything fails before they are in place, the indexes are given back as they were.
    pub(super) fn rewrite_sealed_indexes<R>(
        &self,
        fill: impl FnOnce() -> Result<IndexRewrite<R>>,
    ) -> Result<R> {
        // The rebuilt indexes are written to new files under temporary names and renamed into
        // place only once synced. A sealed segment below the recovery point is trusted at the
        // next open after an O(1) check, so a crash must not leave an index whose unsynced
        // entries read back as zeros (an entry (0, 0) passes that check): it leaves either the
        // old files, untouched, or the temporary ones, which open deletes unread
        // (`*.deleted`), and the index is rebuilt again. An index without a file is rebuilt
        // alike in memory.
        let on_disk = !self.offset_index.is_in_memory() || !self.time_index.is_in_memory();
        let [offset_path, time_path] = [self.offset_index.path(), self.time_index.path()];
        let written = (|| {
            self.offset_index
                .restart_at(&truncation_temp_path(&offset_path))?;
            self.time_index
                .restart_at(&truncation_temp_path(&time_path))?;
            let (answer, final_time_entry) = match fill()? {
                IndexRewrite::Keep {
                    answer,
                    final_time_entry,
                } => (answer, final_time_entry),
                IndexRewrite::Abandon(answer) => return Ok(Err(answer)),
            };
            if let Some(max) = final_time_entry {
                self.time_index
                    .maybe_append(max.timestamp, max.offset, true)?;
            }
            self.offset_index.sync()?;
            self.time_index.sync()?;
            self.offset_index.finish_restart(&offset_path)?;
            self.time_index.finish_restart(&time_path)?;
            Ok(Ok(answer))
        })();
        self.writer.lock().index_room = None;
        let answer = match written {
            Ok(Ok(answer)) => answer,
            Ok(Err(abandoned)) => {
                self.abandon_index_rewrite()?;
                return Ok(abandoned);
            }
            Err(error) => {
                if let Err(cleanup) = self.abandon_index_rewrite() {
                    log::warn!(
                        "could not give back the indexes of {} after a failed rebuild: {cleanup}",
                        self.log_path.display()
                    );
                }
                return Err(error);
            }
        };
        if on_disk && let Some(dir) = offset_path.parent() {
            self.storage.sync_dir(dir)?;
        }
        self.offset_index.seal()?;
        self.time_index.seal()?;
        Ok(answer)
    }

    /// Gives back both indexes as they were before a rebuild that is not kept (a no-op on one
    /// already renamed into place).
    fn abandon_index_rewrite(&self) -> Result<()> {
        let offset = self.offset_index.abandon_restart();
        self.time_index.abandon_restart()?;
        offset
    }

    /// Marks a truncation to `kept_end` as under way until the guard drops (on success or on
    /// an error part-way: either way the file may have changed). Call it with the segment's
    /// writer lock held, before any index entry or byte goes.
    fn begin_truncation(&self, kept_end: i64) -> TruncationUnderWay<'_> {
        self.truncated_to.store(kept_end, Ordering::Release);
        self.truncation_seq.fetch_add(1, Ordering::AcqRel);
        TruncationUnderWay {
            seq: &self.truncation_seq,
        }
    }

    /// Validates every batch from the start of the file (length bounds, magic, CRC, offset
    /// order and range), rebuilds both indexes as it goes, and reports the valid end and the
    /// first invalid position with its reason. It does not truncate: the log decides. Readers
    /// see only the valid prefix afterwards.
    pub fn scan(&self) -> Result<ScanReport> {
        self.scan_from(ScanStart::Beginning, None)
    }

    /// For a [`SegmentRole::ReadOnly`] segment that another process appends to (a live log
    /// opened read-only): validates and indexes (in memory) the batches written after what the
    /// segment has published so far, and publishes them. It stops, without error, at the first
    /// incomplete or invalid batch, which may be one the writer has not finished; the report says
    /// where. Fails with [`Error::Unsupported`] on a segment of any other role, whose appender is
    /// this process.
    pub fn catch_up(&self) -> Result<ScanReport> {
        if *self.role.read() != SegmentRole::ReadOnly {
            return Err(Error::Unsupported {
                what: "catching up on a segment this process writes".into(),
            });
        }
        self.scan_from(ScanStart::Published, None)
    }

    // ARCHITECTURE.md §3, invariants 13 and 20; §7.
    /// Recovery's scan: index entries below `recovery_point` were synced
    /// before the point was recorded, so after an O(entries) check (monotonic, inside the file)
    /// they are kept, and only the batches from the last kept entry on are validated and indexed.
    /// If the check fails, or the kept entry does not name a valid batch ending at its offset,
    /// the whole segment is scanned as by [`scan`](Self::scan).
    ///
    /// Before validating, it drops the cached pages from the kept entry on (from byte 0 when
    /// none is kept), so that it validates what the disk holds: a failed fsync of an earlier
    /// process in this boot may have left pages cached that never reached it. The bytes up to
    /// the kept entry's batch were synced, so their pages match the disk.
    pub fn recover_from(&self, recovery_point: i64) -> Result<ScanReport> {
        self.recover_noting_epochs(recovery_point, &mut RisingEpochs::default())
    }

    /// [`recover_from`](Self::recover_from), noting in `rising` the epochs of the segment's
    /// valid batches that Kafka's recovery rule can assign, in order: the scan reads every
    /// header anyway, so the epoch cache's load need not read the tail a second time. The
    /// trusted prefix, which the scan skips, has its headers walked (bytes synced before the
    /// recovery point was recorded).
    pub(crate) fn recover_noting_epochs(
        &self,
        recovery_point: i64,
        rising: &mut RisingEpochs,
    ) -> Result<ScanReport> {
        let start = self.trusted_index_prefix(recovery_point)?;
        let first_unsynced = start.map_or(0, |entry| u64::from(entry.position));
        crate::storage::drop_cached_tail(&*self.log, first_unsynced)?;
        if first_unsynced > 0 {
            self.visit_leader_epochs_below(first_unsynced, &mut |frame| {
                if let FrameEpoch::V2 { epoch, base_offset } = frame {
                    rising.note(epoch, base_offset);
                }
                Ok(())
            })?;
        }
        self.scan_from(
            start.map_or(ScanStart::Beginning, ScanStart::Trusted),
            Some(rising),
        )
    }

    /// The last offset-index entry below `recovery_point` that can be trusted, with both
    /// indexes cut back to the entries below it; `None` when nothing can be kept.
    fn trusted_index_prefix(&self, recovery_point: i64) -> Result<Option<OffsetPosition>> {
        let file_bytes = self.log.len()?;
        if self.offset_index.full_check(file_bytes).is_err()
            || self.time_index.full_check().is_err()
        {
            return Ok(None);
        }
        self.offset_index.truncate_to(recovery_point)?;
        self.time_index.truncate_to(recovery_point)?;
        if self.offset_index.entries() == 0 {
            return Ok(None);
        }
        let entry = self.offset_index.last_entry()?;
        if self.time_index.entries() > 0 && self.time_index.last_entry()?.offset > entry.offset {
            return Ok(None);
        }
        // The entry must name a whole, valid batch that ends at its offset.
        let mut walker =
            BatchWalker::new(&self.log, &self.log_path, file_bytes.min(i32::MAX as u64));
        let position = u64::from(entry.position);
        let Ok(Step::Batch(frame)) = walker.frame_at(position) else {
            return Ok(None);
        };
        let named = walker
            .batch_bytes(&frame)
            .ok()
            .and_then(|bytes| Batch::new(bytes).ok().map(|batch| batch.last_offset()));
        if named != Some(entry.offset) {
            return Ok(None);
        }
        // So must the last kept time-index entry, with the batch's max timestamp. Its offset
        // alone proves nothing: a crash can keep an index file's length but not the entry
        // written into it, and an all-zero entry reads as (timestamp 0, the base offset),
        // which lies below any recovery point and passes the monotonic check.
        if self.time_index.entries() > 0 {
            let time_entry = self.time_index.last_entry()?;
            let mut position = u64::from(self.offset_index.lookup(time_entry.offset)?.position);
            let named = loop {
                let Ok(Step::Batch(frame)) = walker.frame_at(position) else {
                    break None;
                };
                let Ok(summary) = walker.summary(&frame) else {
                    break None;
                };
                if summary.last_offset >= time_entry.offset {
                    break Some(summary);
                }
                position = frame.position.saturating_add(frame.total_size);
            };
            let matches = named.is_some_and(|batch| {
                batch.last_offset == time_entry.offset
                    && batch.max_timestamp == time_entry.timestamp
            });
            if !matches {
                return Ok(None);
            }
        }
        Ok(Some(entry))
    }

    /// Whether every byte of the `.log` from `position` to its end is zero: what a segment
    /// created with `preallocate` holds past its last batch until its seal trims the file. A
    /// live reader may open such a segment between its writer's creation of the next segment
    /// and that trim; anything else past the last valid batch of a sealed segment is damage.
    pub(crate) fn is_zero_from(&self, position: u64) -> Result<bool> {
        let mut chunk = vec![0u8; 64 * 1024];
        let mut at = position;
        loop {
            let read = self.log.read_at(&mut chunk, at)?;
            let Some(bytes) = chunk.get(..read).filter(|bytes| !bytes.is_empty()) else {
                return Ok(true);
            };
            if bytes.iter().any(|&byte| byte != 0) {
                return Ok(false);
            }
            at += read as u64;
        }
    }

    /// Validates batches from `start` (a trusted index entry) or from the file's beginning,
    /// rebuilding index entries from there on, and noting in `rising` (when given) the epochs of
    /// the valid v2 batches.
    fn scan_from(
        &self,
        start: ScanStart,
        mut rising: Option<&mut RisingEpochs>,
    ) -> Result<ScanReport> {
        let mut writer = self.writer.lock();
        writer.index_room = None;
        let file_bytes = self.log.len()?;
        let mut walker =
            BatchWalker::new(&self.log, &self.log_path, file_bytes.min(i32::MAX as u64));
        let mut batches = 0u64;
        let mut next_offset = self.base_offset;
        let mut bytes_since = 0u64;
        // With a trusted start, the batch at the entry is already indexed, the time index holds
        // the largest timestamp up to it, and the first batch's timestamp is loaded lazily.
        let (mut position, mut max_so_far, mut first_max_timestamp, mut indexed_position) =
            match start {
                ScanStart::Trusted(entry) => {
                    let max = (self.time_index.entries() > 0)
                        .then(|| self.time_index.last_entry())
                        .transpose()?;
                    (
                        u64::from(entry.position),
                        max,
                        None,
                        Some(u64::from(entry.position)),
                    )
                }
                ScanStart::Published => {
                    // Everything published was validated and indexed: go on from its end.
                    next_offset = writer.next_offset;
                    bytes_since = writer.bytes_since_last_index_entry;
                    (
                        writer.size,
                        writer.max_timestamp_so_far,
                        writer.rolling_based_timestamp,
                        None,
                    )
                }
                ScanStart::Beginning => {
                    self.offset_index.reset()?;
                    self.time_index.reset()?;
                    (0, None, Some(None), None)
                }
            };
        let scanned_from = position;
        let first_invalid = loop {
            let frame = match walker.frame_at(position) {
                Ok(Step::Batch(frame)) => frame,
                Ok(Step::End) => break None,
                Ok(Step::Partial { available, needed }) => {
                    break Some(InvalidBytes {
                        position,
                        what: Corruption::Truncated { needed, available },
                    });
                }
                Err(Error::Corrupt { what, .. }) => break Some(InvalidBytes { position, what }),
                Err(other) => return Err(other),
            };
            let (summary, epoch) =
                match self.check_scanned_batch(&mut walker, &frame, next_offset)? {
                    Ok(checked) => checked,
                    Err(what) => break Some(InvalidBytes { position, what }),
                };
            if position == 0 {
                first_max_timestamp = Some(Some(summary.max_timestamp));
            }
            note_max_timestamp(&mut max_so_far, &summary);
            if indexed_position.take() == Some(position) {
                // The trusted entry's own batch: its entries exist already.
            } else if bytes_since > u64::from(self.config.index_interval_bytes) {
                if !self.offset_index.is_full() {
                    self.offset_index
                        .append(summary.last_offset, position as u32)?;
                }
                if let (Some(max), false) = (max_so_far, self.time_index.is_full()) {
                    self.time_index
                        .maybe_append(max.timestamp, max.offset, false)?;
                }
                bytes_since = 0;
            }
            if let (Some(rising), Some(epoch), Some(base_offset)) =
                (rising.as_deref_mut(), epoch, summary.base_offset)
            {
                rising.note(epoch, base_offset);
            }
            bytes_since += frame.total_size;
            next_offset = summary.next_offset();
            batches += 1;
            position += frame.total_size;
        };
        writer.size = position;
        writer.next_offset = next_offset;
        writer.bytes_since_last_index_entry = bytes_since;
        writer.max_timestamp_so_far = max_so_far;
        writer.rolling_based_timestamp = first_max_timestamp;
        writer.broken = false;
        self.publish(&writer);
        Ok(ScanReport {
            valid_bytes: position,
            scanned_from,
            file_bytes,
            batches,
            next_offset,
            max_timestamp: max_so_far.map(|m| m.timestamp),
            first_invalid,
        })
    }

    /// Checks the batch `frame` frames as a scan does: a v2 batch (CRC-32C) or a legacy message
    /// (CRC-32, Kafka before 0.11), both validated alike, by their last offset, as Kafka does (a
    /// legacy message with a bad CRC is what torn bytes whose magic reads 0 or 1 look like),
    /// whose offsets follow `next_offset` and stay within the segment's relative range. Returns
    /// its summary and, for a v2 batch, its leader epoch; the inner error is what is wrong.
    pub(super) fn check_scanned_batch(
        &self,
        walker: &mut BatchWalker<'_>,
        frame: &Frame,
        next_offset: i64,
    ) -> Result<std::result::Result<(BatchSummary, Option<i32>), Corruption>> {
        let bytes = walker.batch_bytes(frame)?;
        let checked = Batch::new(bytes).and_then(|batch| {
            let epoch = match &batch {
                Batch::V2(view) => Some(view.header().partition_leader_epoch),
                Batch::Legacy(_) => None,
            };
            BatchSummary::of(&batch)
                .followable()
                .map(|summary| (summary, epoch))
        });
        let Ok((summary, epoch)) = checked else {
            return Ok(checked);
        };
        if summary.order_floor() < next_offset {
            return Ok(Err(Corruption::OffsetOrder {
                offset: summary.order_floor(),
                bound: next_offset,
            }));
        }
        if summary.last_offset - self.base_offset > i32::MAX as i64 {
            return Ok(Err(Corruption::OffsetOrder {
                offset: summary.last_offset,
                bound: self.base_offset + i32::MAX as i64,
            }));
        }
        Ok(Ok((summary, epoch)))
    }

    /// Removes every batch that holds an offset at or above `offset` (a batch straddling it goes
    /// whole, as in Kafka) and the index entries that point at them. Returns the bytes removed.
    ///
    /// A truncation that empties the segment restarts its roll clock at `now_ms`, as Kafka's
    /// `LogSegment.truncateTo` does: an empty segment is as young as a new one.
    pub fn truncate_to(&self, offset: i64, now_ms: i64) -> Result<u64> {
        // Before the writer lock: a mapped reader may take the writer lock (an index rebuild)
        // while it holds the mapping's read lock.
        let _no_readers = self.drop_mapping();
        // The log's writer lock keeps appends and other truncations out: nothing overtakes
        // this lookup.
        let Some((frame, summary)) = self.translate_offset(offset, self.read_view())? else {
            return Ok(0);
        };
        let first_offset = self.first_offset_of(&frame, &summary)?;
        // The end is what the file will record: after the last batch kept, which in a
        // compacted segment may lie below both `offset` and the removed batch's first offset.
        let kept_end = self.next_offset_before(frame.position, first_offset.min(offset))?;
        let mut writer = self.writer.lock();
        writer.index_room = None;
        let position = frame.position;
        // Until it drops, at the end, a reader that meets what this cut does is told so.
        let _under_way = self.begin_truncation(kept_end);
        // Every entry at or above the kept end points into a removed batch (a time-index entry
        // may name an offset below `offset` inside a straddling batch).
        self.offset_index.truncate_to(kept_end)?;
        self.time_index.truncate_to(kept_end)?;
        // An aborted transaction whose marker is cut goes with it (Kafka's `txnIndex.truncateTo`).
        self.txn_index.truncate_to(kept_end)?;
        self.log.set_len(position)?;
        // After the cut: a read that learned positions from the old bytes cannot keep them.
        self.positions.forget();
        let removed = writer.size - position;
        writer.size = position;
        writer.next_offset = kept_end;
        // The largest timestamp so far: the time index's last entry, or a batch after the last
        // offset-index entry (entries are added together, so nothing before it is missing).
        let last_entry = self.offset_index.last_entry()?;
        let mut max_so_far = self.time_index_max()?;
        let mut walker = BatchWalker::new(&self.log, &self.log_path, position);
        let mut at = u64::from(last_entry.position);
        while let Step::Batch(frame) = walker.frame_at(at)? {
            note_max_timestamp(&mut max_so_far, &walker.summary(&frame)?);
            at += frame.total_size;
        }
        writer.max_timestamp_so_far = max_so_far;
        writer.bytes_since_last_index_entry = position - u64::from(last_entry.position);
        if position == 0 {
            writer.rolling_based_timestamp = Some(None);
            writer.created_ms = now_ms;
        } else {
            writer.rolling_based_timestamp = None;
        }
        self.publish(&writer);
        Ok(removed)
    }

    /// Where [`truncate_to`](Self::truncate_to)`(offset)` would leave the segment's end: the
    /// offset after the last batch it keeps (the segment's base offset when it keeps none), or
    /// `offset` (or the current end, if lower) when no batch goes.
    ///
    /// Without compaction that is the base of the batch holding `offset`. In a compacted
    /// segment the last batch kept may end below it (the removed batch followed a gap, or
    /// `offset` fell in one): the end must then drop to that batch's end, because the file is
    /// all that records the end. Ending the log higher would claim offsets that no byte on disk
    /// holds: a reopen (after a crash or not) finds the lower end, below what the log said was
    /// durable, and a recovery point above the file's last batch makes torn appends after it
    /// look like corruption.
    pub fn truncation_point(&self, offset: i64) -> Result<i64> {
        // Under the log's writer lock, as in `truncate_to`.
        Ok(match self.translate_offset(offset, self.read_view())? {
            Some((frame, summary)) => {
                let first = self.first_offset_of(&frame, &summary)?;
                self.next_offset_before(frame.position, first.min(offset))?
            }
            None => self.next_offset().min(offset),
        })
    }

    /// The offset after the last batch that ends at or before byte `position` (the segment's
    /// base offset when none does). `first_removed` bounds the offsets of the batch at
    /// `position`: the walk starts at the offset index's entry below it, so it reads only the
    /// batches between that entry and `position` (the whole file if the entry does not lead
    /// there exactly: the index is derived data, the `.log` decides).
    fn next_offset_before(&self, position: u64, first_removed: i64) -> Result<i64> {
        if position == 0 {
            return Ok(self.base_offset);
        }
        let entry = self
            .offset_index
            .lookup(first_removed.saturating_sub(1))
            .ok()
            .map(|entry| u64::from(entry.position))
            .filter(|&at| at < position);
        if let Some(at) = entry
            && let Ok(Some(next_offset)) = self.next_offset_between(at, position)
        {
            return Ok(next_offset);
        }
        Ok(self
            .next_offset_between(0, position)?
            .unwrap_or(self.base_offset))
    }

    /// The offset after the last batch of those that tile the bytes from `from` (a batch
    /// boundary) to `position` exactly; `None` when they do not (or there are none).
    fn next_offset_between(&self, from: u64, position: u64) -> Result<Option<i64>> {
        let mut walker = BatchWalker::new(&self.log, &self.log_path, position);
        let mut next_offset = None;
        let mut at = from;
        while at < position {
            let Step::Batch(frame) = walker.frame_at(at)? else {
                return Ok(None);
            };
            next_offset = Some(walker.summary(&frame)?.next_offset());
            at = frame.position + frame.total_size;
        }
        Ok(next_offset.filter(|_| at == position))
    }

    /// The first offset of the batch framed by `frame`: from its summary, except for a
    /// compressed legacy wrapper, which is decompressed to find it (Kafka's `baseOffset()` of a
    /// legacy batch does the same).
    fn first_offset_of(&self, frame: &Frame, summary: &BatchSummary) -> Result<i64> {
        if let Some(base_offset) = summary.base_offset {
            return Ok(base_offset);
        }
        let mut walker =
            BatchWalker::new(&self.log, &self.log_path, frame.position + frame.total_size);
        let bytes = walker.batch_bytes(frame)?;
        let batch = Batch::new(bytes).map_err(|what| self.corrupt(frame.position, what))?;
        batch
            .base_offset(&mut Vec::new())
            .map_err(|error| self.relocate(error, frame.position))
    }

    /// Removes the bytes at and after `valid_bytes` (a torn tail found by [`scan`](Self::scan)).
    pub fn truncate_tail(&self, valid_bytes: u64) -> Result<u64> {
        let _no_readers = self.drop_mapping();
        let writer = self.writer.lock();
        if valid_bytes != writer.size {
            return Err(Error::InvalidArgument {
                why: format!(
                    "truncate_tail({valid_bytes}) must follow a scan that found {} valid bytes",
                    writer.size
                ),
            });
        }
        let file_bytes = self.log.len()?;
        if file_bytes > valid_bytes {
            let _under_way = self.begin_truncation(writer.next_offset);
            self.txn_index.truncate_to(writer.next_offset)?;
            self.log.set_len(valid_bytes)?;
            self.positions.forget();
        }
        Ok(file_bytes.saturating_sub(valid_bytes))
    }
}

/// What a [`Segment::rewrite_sealed_indexes`] fill decides about the entries it wrote.
pub(super) enum IndexRewrite<R> {
    /// Put them in place, with the final time-index entry (the segment's largest timestamp),
    /// if any.
    Keep {
        answer: R,
        final_time_entry: Option<TimestampOffset>,
    },
    /// Leave the indexes as they were before the rebuild.
    Abandon(R),
}

/// Where [`Segment::scan_from`] starts validating.
#[derive(Debug, Clone, Copy)]
enum ScanStart {
    /// From byte 0, rebuilding both indexes.
    Beginning,
    /// From a trusted offset-index entry, keeping the entries up to it.
    Trusted(OffsetPosition),
    /// From the end of what the segment has published (a read-only segment catching up).
    Published,
}

/// A truncation in progress (see [`Segment::begin_truncation`]): dropping it ends it.
struct TruncationUnderWay<'a> {
    seq: &'a AtomicU64,
}

impl Drop for TruncationUnderWay<'_> {
    fn drop(&mut self) {
        self.seq.fetch_add(1, Ordering::AcqRel);
    }
}
