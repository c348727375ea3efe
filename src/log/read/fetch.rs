//! Reads: [`Log::read`](crate::Log::read) and [`Log::read_into`](crate::Log::read_into) (whole
//! batches, as Kafka's fetch returns them, in a [`FetchData`](super::fetch_data::FetchData)),
//! and [`Log::offset_for_timestamp`](crate::Log::offset_for_timestamp).
//!
//! Reads pin segments through the snapshot; in a writable log they take no writer lock (only a live
//! reader's poll does). A truncation that overtakes a read is detected (the read tries again or
//! fails with [`Error::Truncated`](crate::Error::Truncated)), never returned as data
//! (ARCHITECTURE.md §3, invariant 16).

use std::sync::Arc;

use crate::error::{Corruption, Error, Result};
use crate::segment::{Segment, SegmentRead};

use super::fetch_data::{FetchData, Isolation, ReadBound, ReadOptions, ResumePoint};
use crate::log::Shared;
use crate::log::files::checkpoint::gaps_between_segments_are_legal;
use crate::log::segments::snapshot::SegmentList;
use crate::segment::verified::VerifiedBatch;

impl Shared {
    /// See [`Log::read`](crate::Log::read).
    pub(in crate::log) fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        bound: ReadBound,
    ) -> Result<FetchData> {
        let mut fetch = FetchData::new();
        self.read_into(offset, max_bytes, bound, &mut fetch)?;
        Ok(fetch)
    }

    /// See [`Log::read_with`](crate::Log::read_with).
    pub(in crate::log) fn read_with(
        &self,
        offset: i64,
        max_bytes: usize,
        options: ReadOptions,
    ) -> Result<FetchData> {
        let mut fetch = FetchData::new();
        self.read_with_into(offset, max_bytes, options, &mut fetch)?;
        Ok(fetch)
    }

    /// See [`Log::read_into`](crate::Log::read_into).
    pub(in crate::log) fn read_into(
        &self,
        offset: i64,
        max_bytes: usize,
        bound: ReadBound,
        fetch: &mut FetchData,
    ) -> Result<()> {
        self.read_with_into(
            offset,
            max_bytes,
            ReadOptions::default().bound(bound),
            fetch,
        )
    }

    /// See [`Log::read_with_into`](crate::Log::read_with_into).
    pub(in crate::log) fn read_with_into(
        &self,
        offset: i64,
        max_bytes: usize,
        options: ReadOptions,
        fetch: &mut FetchData,
    ) -> Result<()> {
        let resume = fetch.take_resume_point();
        fetch.clear_at(offset, 0);
        self.check_open()?;
        self.poll_live();
        match self.read_current(offset, max_bytes, options, resume.as_ref(), fetch) {
            // A live writer deleted a segment this view still lists (retention, a truncation)
            // since the last poll, or cut one and writes it again: look again, and answer from
            // what is there now. Real damage is met again, and reported.
            Err(error)
                if self.live.is_some()
                    && (error.io_kind() == Some(std::io::ErrorKind::NotFound)
                        || matches!(error, Error::Corrupt { .. })) =>
            {
                fetch.clear_at(offset, 0);
                if self.refresh().is_err() {
                    return Err(error);
                }
                self.read_current(offset, max_bytes, options, None, fetch)
            }
            other => other,
        }
    }

    /// [`read`](Self::read) on the log's current view.
    fn read_current(
        &self,
        offset: i64,
        max_bytes: usize,
        options: ReadOptions,
        resume: Option<&ResumePoint>,
        fetch: &mut FetchData,
    ) -> Result<()> {
        // A try finds nothing below its bound when a truncation overtook it; a new one finds
        // the offset written again, or the truncation below it (or, in the rare legitimate
        // case, the same gap at the end of the bound, and ends with nothing once more).
        const MAX_OVERTAKEN_READS: u32 = 4;
        for _ in 1..MAX_OVERTAKEN_READS {
            if !self.read_current_once(offset, max_bytes, options, resume, fetch)? {
                return Ok(());
            }
        }
        self.read_current_once(offset, max_bytes, options, resume, fetch)
            .map(|_| ())
    }

    /// One try of [`read_current`](Self::read_current): `Ok(true)` when it found nothing
    /// below the bound it read to, though the log ended above `offset` when it began: a
    /// truncation may have taken the offset away and appends brought it back since, so that a
    /// new try may find it.
    fn read_current_once(
        &self,
        offset: i64,
        max_bytes: usize,
        options: ReadOptions,
        resume: Option<&ResumePoint>,
        fetch: &mut FetchData,
    ) -> Result<bool> {
        let shared = self;
        let end = shared.readable_end();
        let start = self.log_start_offset();
        if offset > end && offset <= shared.view.highest_cut_end() {
            return Err(Error::Truncated { at: end });
        }
        if offset < start || offset > end {
            return Err(Error::OffsetOutOfRange {
                requested: offset,
                start,
                end,
            });
        }
        let last_stable_offset = shared.last_stable_offset();
        let upper = match options.bound {
            ReadBound::LogEnd => end,
            ReadBound::Durable => self.durable_offset().min(end),
            ReadBound::HighWatermark => shared.high_watermark().min(end),
        };
        let read_committed = options.isolation == Isolation::ReadCommitted;
        let upper = if read_committed {
            upper.min(last_stable_offset)
        } else {
            upper
        };
        fetch.clear_at(offset, end);
        fetch.set_bounds(last_stable_offset, upper);
        if offset >= upper {
            return Ok(false);
        }
        'retry: loop {
            let list = shared.view.segments().load();
            // Retention moves the start before it swaps segments out: a list without the
            // segment holding `offset` comes with a start above it.
            let start = self.log_start_offset();
            if offset < start {
                return Err(Error::OffsetOutOfRange {
                    requested: offset,
                    start,
                    end,
                });
            }
            let mut index = list.floor_index(offset);
            while let Some(handle) = list.handles().get(index) {
                if handle.base_offset() >= upper {
                    break;
                }
                let Some(segment) = shared.view.segments().pin(handle)? else {
                    continue 'retry;
                };
                let from = offset.max(handle.base_offset());
                let resume_at = resume.and_then(|point| point.position_for(&segment, from));
                // Before the read: `send_to` may send the file's bytes only if no truncation
                // was under way or began since.
                let segment_truncations = segment.truncation_sequence();
                if let Some(batch) = self.cached_batch(fetch, &segment, from, upper) {
                    let read = SegmentRead {
                        position: batch.position,
                        len: batch.bytes.len(),
                        first_offset: batch.base_offset,
                        next_offset: batch.last_offset + 1,
                    };
                    if read_committed
                        && !self.collect_aborted(&list, index, &segment, offset, &read, fetch)?
                    {
                        fetch.clear_aborted();
                        continue 'retry;
                    }
                    fetch.fill_verified(batch, end, segment, segment_truncations);
                    return Ok(false);
                }
                let found = segment.read_in_place(
                    from,
                    max_bytes,
                    Some(upper),
                    resume_at,
                    fetch.buffer_mut(),
                )?;
                if let Some((read, at)) = found {
                    // Before `fill` hands the pin to the fetch: the aborted transactions come
                    // from the view the batches came from, this segment first.
                    if read_committed
                        && !self.collect_aborted(&list, index, &segment, offset, &read, fetch)?
                    {
                        // A segment they may be listed in left the log after the batches were
                        // read (a compaction swap, retention, a truncation): the batches may
                        // hold data whose ABORT only that segment listed. Read again from the
                        // current list, batches and aborted transactions both.
                        fetch.clear_aborted();
                        continue 'retry;
                    }
                    let kept = fetch
                        .point_read()
                        .then(|| {
                            self.keep_verified(&segment, segment_truncations, &read, at, fetch)
                        })
                        .flatten();
                    match kept {
                        // The copy's record table finds the record: no walk over the others.
                        Some(batch) => {
                            fetch.fill_verified(batch, end, segment, segment_truncations)
                        }
                        None => fetch.fill(&read, at, end, segment, segment_truncations),
                    }
                    return Ok(false);
                }
                // Nothing at or above `from` here: the read moves on to the next segment.
                if let Some(next) = list.handles().get(index + 1)
                    && next.base_offset() < upper
                {
                    self.check_continuity(
                        &list,
                        &segment,
                        segment_truncations,
                        next.base_offset(),
                    )?;
                }
                index += 1;
            }
            // Nothing below `upper`, which the log end covered when the read began: if the log
            // now ends at or below `offset`, a truncation took it away meanwhile.
            let list = shared.view.segments().load();
            let data_end = list.active().and_then(|handle| handle.if_open());
            if let Some(at) = data_end.map(|active| active.next_offset())
                && at <= offset
            {
                return Err(Error::Truncated { at });
            }
            return Ok(true);
        }
    }

    /// For a point read (`fetch`'s kind): the cached copy of `segment`'s batch holding `from`,
    /// if the cache keeps one read under the segment's current truncation sequence, whose
    /// last offset is below `upper` (a read returns no batch that reaches its bound). A log
    /// that follows a writer in another process never uses the cache: that writer's cuts are
    /// seen only at its polls, and no truncation sequence counts them.
    fn cached_batch(
        &self,
        fetch: &FetchData,
        segment: &Segment,
        from: i64,
        upper: i64,
    ) -> Option<Arc<VerifiedBatch>> {
        if !fetch.point_read() || self.live.is_some() {
            return None;
        }
        let batch = self.config.verified_batch_cache.find(segment.id(), from)?;
        let unchanged = batch.truncations == segment.truncation_sequence();
        (unchanged && batch.last_offset < upper).then_some(batch)
    }

    /// Keeps a copy of the batch a point read has just read and checked (`read`, at `at` in
    /// `fetch`'s buffer) when no truncation was under way when the read began or has begun
    /// since (the bytes it checked are then the segment's bytes at `truncations`) and the
    /// cache admits it ([`VerifiedBatchCache::admits`](crate::VerifiedBatchCache)); the copy
    /// kept.
    fn keep_verified(
        &self,
        segment: &Segment,
        truncations: u64,
        read: &SegmentRead,
        at: usize,
        fetch: &mut FetchData,
    ) -> Option<Arc<VerifiedBatch>> {
        let cache = &self.config.verified_batch_cache;
        if self.live.is_some() || cache.limit_bytes() == 0 {
            return None;
        }
        if truncations % 2 == 1 || segment.truncation_sequence() != truncations {
            return None;
        }
        if !cache.admits(segment.id(), read.first_offset, read.len) {
            return None;
        }
        let bytes = fetch.buffer_mut().get(at..at + read.len)?;
        // A point read returns one batch; a legacy message is not kept.
        let batch = VerifiedBatch::copy_of(bytes, read.position, truncations)?;
        cache.insert(segment.id(), batch)
    }

    /// Kafka's `collectAbortedTransactions` for a fetch from `offset` whose batches `read` took
    /// from `segment`, the one at `index` in `list`: the `.txnindex` entries of that segment and
    /// of the later ones in `list` that overlap the fetch, until a segment's search says no
    /// later transaction can. `Ok(false)` when a later segment of `list` has left the log since
    /// (its handle can no longer be pinned): what it listed cannot be read from this view, and
    /// the caller reads again (ARCHITECTURE.md §8, "A `read_committed` reader").
    fn collect_aborted(
        &self,
        list: &SegmentList,
        index: usize,
        segment: &Arc<Segment>,
        offset: i64,
        read: &SegmentRead,
        fetch: &mut FetchData,
    ) -> Result<bool> {
        let upper_bound = read.next_offset;
        // No segment above the last one that ever held a `.txnindex` has entries.
        let last_indexed = self.txn.last_txn_index_base();
        for (n, handle) in list.handles().iter().skip(index).enumerate() {
            if handle.base_offset() > last_indexed {
                break;
            }
            let later;
            let searched = if n == 0 {
                segment
            } else {
                let Some(pinned) = self.view.segments().pin(handle)? else {
                    return Ok(false);
                };
                later = pinned;
                &later
            };
            let found = searched.collect_aborted_txns(offset, upper_bound)?;
            fetch.add_aborted(found.aborted);
            if found.complete {
                break;
            }
        }
        if self.read_only {
            // What the replay met that no `.txnindex` this view has read may list yet.
            for txn in self.txn.replayed_aborted_in(offset, upper_bound) {
                fetch.add_aborted_once(txn);
            }
        }
        Ok(true)
    }

    /// Called when a read found nothing at or above its offset in `segment` (sealed: a segment
    /// based at `next_base` follows it in `list`) and moves on to the next one. Only compaction
    /// (here or on the leader a follower copies) leaves offsets out between segments, so unless
    /// the checkpoint says the log's records were compacted or its cleanup policy includes
    /// compact ([`gaps_between_segments_are_legal`]), a segment that ends below the next one's
    /// base has lost bytes: `Error::Corrupt` naming where it ends, instead of a read that skips
    /// the missing offsets without a word.
    /// A truncation into the segment that overlapped the read, or a list swapped since, is no
    /// corruption: a truncation swaps in a list without the later segments before it cuts.
    fn check_continuity(
        &self,
        list: &Arc<SegmentList>,
        segment: &Segment,
        truncations: u64,
        next_base: i64,
    ) -> Result<()> {
        let ends_at = segment.next_offset();
        if ends_at >= next_base {
            return Ok(());
        }
        let compacted = self.view.compacted();
        if gaps_between_segments_are_legal(compacted, self.config.cleanup_policy) {
            return Ok(());
        }
        let raced = truncations % 2 == 1
            || segment.truncation_sequence() != truncations
            || !Arc::ptr_eq(&self.view.segments().load(), list);
        if raced {
            return Ok(());
        }
        Err(Error::Corrupt {
            file: segment.log_path(),
            position: segment.size(),
            what: Corruption::MissingOffsets {
                from: ends_at,
                to: next_base,
            },
        })
    }

    /// See [`Log::offset_for_timestamp`](crate::Log::offset_for_timestamp).
    pub(in crate::log) fn offset_for_timestamp(
        &self,
        timestamp: i64,
    ) -> Result<Option<(i64, i64)>> {
        self.check_open()?;
        self.poll_live();
        let shared = self;
        let start = self.log_start_offset();
        // Read once: a poisoned log vouches for nothing above its durable offset, and the
        // answer must not come from there.
        let end = shared.readable_end();
        'retry: loop {
            let list = shared.view.segments().load();
            for handle in list.handles() {
                if handle.base_offset() >= end {
                    return Ok(None);
                }
                let Some(segment) = shared.view.segments().pin(handle)? else {
                    continue 'retry;
                };
                if segment.next_offset() <= start {
                    continue;
                }
                if segment
                    .max_timestamp()
                    .is_none_or(|max| max.timestamp < timestamp)
                {
                    // Damage after its last valid batch may have held the answer.
                    segment.check_damage()?;
                    continue;
                }
                if let Some(found) =
                    segment.find_offset_by_timestamp_below(timestamp, start, end)?
                {
                    // The first record at or above `timestamp`: every record before it is
                    // older, so one at or above the end means none the log vouches for.
                    return Ok((found.offset < end).then_some((found.offset, found.timestamp)));
                }
                segment.check_damage()?;
            }
            return Ok(None);
        }
    }
}
