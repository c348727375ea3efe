//! The segment's read path: [`Segment::read`] and [`Segment::read_in_place`], with what makes
//! them cheap (the resume position, the position cache, the mapping of a sealed `.log`) and
//! what makes them safe against a truncation that overlaps them (the [`ReadView`] taken
//! before any byte is read, and the retries after a raced truncation).
//!
//! Kept apart because readers run concurrently with the appender and with truncations, through
//! `&self` and without the writer lock: every function here must hold to that.

use crate::sync::atomic::Ordering;

use super::log_segment::{InvalidBytes, Segment, SegmentRead};
use super::positions::{CachedBatch, RunBuilder};
use super::walker::{BatchSummary, BatchWalker, Frame, Step};
use crate::error::{Corruption, Error, Result};
use crate::format::{Batch, BatchHeader, BatchView, peek_batch_frame};

/// Whether the segment's `.log` is mapped for reads.
#[derive(Debug)]
pub(super) enum MappingState {
    /// Not tried yet (or dropped by a truncation, an unseal or the trim of preallocated space;
    /// the next read maps the file again).
    NotYet,
    /// Mapped: a sealed segment at its sealed size, the active one at its reserved length (a
    /// live view, of which only bytes below the published end are touched).
    Mapped(crate::storage::ReadMapping),
    /// The storage cannot map, or mapping failed: positional reads.
    Unavailable,
}

/// How many times a read runs again after truncations that left its start offset in place
/// overtook it, before it gives up with [`Error::Truncated`].
pub(super) const MAX_TRUNCATION_RETRIES: u32 = 4;

/// The most a read reads ahead past the index interval in one system call, whatever its
/// `max_bytes`: a caller asking for "everything" must not make each read allocate gigabytes.
const MAX_READ_AHEAD_BYTES: usize = 8 << 20;

/// Where a read may find its first batch without the index walk.
#[derive(Debug)]
struct ReadStart {
    /// The offset the read starts at.
    offset: i64,
    /// The end of the previous read of this segment (a sequential reader).
    resume_at: Option<u64>,
    /// The batch the position cache places there.
    cached: Option<CachedBatch>,
    /// The position cache's generation before any byte was read.
    generation: u64,
    /// What the segment had published when the read began.
    view: ReadView,
}

/// What a read of a segment takes before it reads a byte: the truncation epoch, then the
/// published size it reads up to. Whatever looks wrong in the bytes below `end` is corruption
/// only if no truncation overlapped the read ([`Segment::raced_truncation`]) and no index entry
/// it used was added after `end` (the writer indexes a batch before it publishes it).
#[derive(Debug, Clone, Copy)]
pub(super) struct ReadView {
    /// The truncation sequence when the read began.
    pub(super) epoch: u64,
    /// The published size, read after `epoch`.
    pub(super) end: u64,
}

impl Segment {
    /// Reads whole batches starting with the one that holds `start_offset` (or the next one, if
    /// `start_offset` falls in a gap or below the segment) into `buf`, replacing its contents.
    ///
    /// Kafka's semantics: at least one whole batch is returned even when it is larger than
    /// `max_bytes`; after that, batches are added while they fit. Batches whose last offset is at
    /// or above `upper_bound` (exclusive), if given, are not returned. `Ok(None)` when no such
    /// batch exists. Every returned batch has passed its CRC check.
    pub fn read(
        &self,
        start_offset: i64,
        max_bytes: usize,
        upper_bound: Option<i64>,
        buf: &mut Vec<u8>,
    ) -> Result<Option<SegmentRead>> {
        let found = self.read_in_place(start_offset, max_bytes, upper_bound, None, buf);
        match found {
            Ok(Some((read, at))) => {
                buf.copy_within(at..at + read.len, 0);
                buf.truncate(read.len);
                Ok(Some(read))
            }
            other => {
                buf.clear();
                other.map(|_| None)
            }
        }
    }

    /// [`read`](Self::read) without moving the bytes: they are `buf[at..at + read.len]`, where
    /// `at` is returned beside the [`SegmentRead`]. `buf` is the reads' reusable window: its
    /// contents are overwritten and its length only grows, so a caller that keeps it across
    /// reads allocates and zero-fills nothing in the steady state.
    ///
    /// The offset index lookup, the walk from the entry to the batch, and the batches returned
    /// are served by one positional read in the common case: it reads `max_bytes` plus
    /// `index.interval.bytes` from the index entry on. The walk's batch boundaries go into the
    /// segment's position cache (`positions.rs`, bounded); a later read of an offset they cover
    /// skips the index and the walk and reads just `max(max_bytes, its batch)` from the batch,
    /// after checking that the bytes there are that batch (anything else: the walk runs).
    ///
    /// `resume_at` is a hint from a previous read of this segment: the file position where a
    /// batch starting at `start_offset` should lie (the end of the batches it returned). When
    /// the batch there does start at `start_offset`, the read starts there, with no index
    /// lookup and no walk; otherwise the hint is ignored.
    ///
    /// A truncation of the segment that overlaps the read makes it fail with
    /// [`Error::Truncated`] (naming the truncation's new end) when the truncation removed
    /// `start_offset`; one that left `start_offset` in place makes the read run again. Whatever
    /// the read returns passed every check in bytes no truncation changed meanwhile, or in bytes
    /// a truncation's appends wrote at the same offsets: it never reports as corruption the
    /// bytes a truncation cut or rewrote under it, and never rebuilds an index over them.
    pub fn read_in_place(
        &self,
        start_offset: i64,
        max_bytes: usize,
        upper_bound: Option<i64>,
        resume_at: Option<u64>,
        buf: &mut Vec<u8>,
    ) -> Result<Option<(SegmentRead, usize)>> {
        let mut resume_at = resume_at;
        let mut tries = 0;
        loop {
            let view = self.read_view();
            let read =
                self.read_in_place_once(start_offset, max_bytes, upper_bound, resume_at, view, buf);
            let failed = match read {
                Ok(Some(found)) => return Ok(Some(found)),
                Ok(None) => match self.raced_truncation(view.epoch) {
                    Some(at) if at <= start_offset => return Err(Error::Truncated { at }),
                    Some(_) => return Ok(None),
                    // Nothing at or above `start_offset` up to the published end: the read
                    // reached the end, and the damage after it if the open found some.
                    None if start_offset >= self.next_offset() => {
                        self.check_damage()?;
                        return Ok(None);
                    }
                    None => return Ok(None),
                },
                Err(error) => match self.raced_truncation(view.epoch) {
                    Some(at) if at <= start_offset => return Err(Error::Truncated { at }),
                    // A truncation above `start_offset` cut bytes the read went on into (the
                    // batches after the first, or a walk through a gap): the offset is still
                    // there, so read it again.
                    Some(at) => Error::Truncated { at },
                    // An index entry added after `view` (a caller asking past the end it saw)
                    // led the read past its end: read again to the new end.
                    None if self.size() > view.end => error,
                    None => return Err(error),
                },
            };
            // Each retry needs yet another truncation or append to overtake it.
            tries += 1;
            if tries >= MAX_TRUNCATION_RETRIES {
                return Err(failed);
            }
            resume_at = None;
        }
    }

    /// One try of [`read_in_place`](Self::read_in_place), up to what `view` saw published.
    fn read_in_place_once(
        &self,
        start_offset: i64,
        max_bytes: usize,
        upper_bound: Option<i64>,
        resume_at: Option<u64>,
        view: ReadView,
        buf: &mut Vec<u8>,
    ) -> Result<Option<(SegmentRead, usize)>> {
        // Read before any byte is: a run learned from bytes a truncation cut meanwhile is
        // then refused.
        let generation = self.positions.generation();
        let cached = match resume_at {
            Some(_) => None,
            None => self.positions.find(start_offset),
        };
        let mut start = ReadStart {
            offset: start_offset,
            resume_at,
            cached,
            generation,
            view,
        };
        if let Some(state) = self.mapped_for_read(view.end)
            && let MappingState::Mapped(mapping) = &*state
        {
            // While the guard is held no cut of published bytes runs, so the file holds every
            // byte below the size published now; a truncation between `view` and the guard may
            // have cut below `view.end`, where an active segment's mapping runs on past the
            // file's end (a SIGBUS): read below both. The epoch still tells the read it raced.
            let end = view.end.min(self.size());
            start.view.end = end;
            let Some(mapped) = usize::try_from(end).ok().and_then(|end| mapping.get(..end)) else {
                return Err(self.corrupt(end, Corruption::BadBatchLength(i32::MAX)));
            };
            let mut walker = BatchWalker::over_mapping(&self.log, &self.log_path, end, mapped);
            let Some(read) =
                self.read_with(&mut walker, &start, max_bytes, upper_bound, end, usize::MAX)?
            else {
                return Ok(None);
            };
            // Only the returned batches are copied: into the caller's buffer, which outlives
            // the read guard.
            let bytes = usize::try_from(read.position)
                .ok()
                .and_then(|from| mapped.get(from..from.checked_add(read.len)?))
                .ok_or_else(|| self.corrupt(read.position, Corruption::BadBatchLength(i32::MAX)))?;
            if buf.len() < bytes.len() {
                buf.resize(bytes.len(), 0);
            }
            if let Some(target) = buf.get_mut(..bytes.len()) {
                target.copy_from_slice(bytes);
            }
            return Ok(Some((read, 0)));
        }
        let end = view.end;
        let walk_read_ahead = max_bytes
            .min(MAX_READ_AHEAD_BYTES)
            .saturating_add(self.config.index_interval_bytes as usize)
            .saturating_add(crate::format::RECORD_BATCH_OVERHEAD);
        // A batch whose place is known is read alone (with what else `max_bytes` asks for):
        // one system call of its size instead of the index interval.
        let read_ahead = match cached {
            Some(batch) => usize::try_from(batch.size)
                .unwrap_or(usize::MAX)
                .max(max_bytes.min(MAX_READ_AHEAD_BYTES)),
            None => walk_read_ahead,
        };
        let mut walker = BatchWalker::with_buffer(
            &self.log,
            &self.log_path,
            end,
            std::mem::take(buf),
            read_ahead,
        );
        let result = self.read_with(
            &mut walker,
            &start,
            max_bytes,
            upper_bound,
            end,
            walk_read_ahead,
        );
        let window_start = walker.window_start();
        *buf = walker.into_buffer().0;
        let Some(read) = result? else {
            return Ok(None);
        };
        let at = usize::try_from(read.position - window_start)
            .map_err(|_| self.corrupt(read.position, Corruption::BadBatchLength(i32::MAX)))?;
        Ok(Some((read, at)))
    }

    /// Finds the first batch a read returns: at the resume position, at the cached position,
    /// or by the index walk (whose batches the cache then learns).
    fn first_batch(
        &self,
        walker: &mut BatchWalker<'_>,
        start: &ReadStart,
        end: u64,
        walk_read_ahead: usize,
    ) -> Result<Option<(Frame, BatchSummary)>> {
        if let Some(position) = start.resume_at
            && let Some(found) = self.batch_starting_at(walker, position, start.offset)?
        {
            return Ok(Some(found));
        }
        if let Some(cached) = start.cached {
            if let Some(found) = self.cached_batch_holding(walker, cached, start.offset, end) {
                return Ok(Some(found));
            }
            walker.set_read_ahead(walk_read_ahead);
        }
        let mut walk_from = 0;
        let found = self.translate_offset_in(start.offset, start.view, walker, &mut walk_from)?;
        if let Some((frame, summary)) = &found {
            self.learn_positions(walker, walk_from, frame, summary, end, start.generation);
        }
        Ok(found)
    }

    /// The batch at a cached position, if it is what the cache says: a whole v2 batch of the
    /// cached size and last offset, inside the published end, that holds `offset` (offsets
    /// increase within a segment, so it is the one batch the index walk would find). Anything
    /// else is no error here: the index walk that runs instead reports real damage.
    fn cached_batch_holding(
        &self,
        walker: &mut BatchWalker<'_>,
        cached: CachedBatch,
        offset: i64,
        end: u64,
    ) -> Option<(Frame, BatchSummary)> {
        // One parse of the header, from the bytes the walker reads for the whole batch (the
        // frame and summary steps of a walk would each check the window and parse again).
        if cached.position >= end || cached.size > end - cached.position {
            return None;
        }
        let bytes = walker
            .fill(cached.position, crate::format::RECORD_BATCH_OVERHEAD)
            .ok()?;
        let header = BatchHeader::parse(bytes).ok()?;
        if header.total_size() as u64 != cached.size {
            return None;
        }
        let summary = BatchSummary::of_v2_checked(&header).ok()?;
        let frame = Frame {
            position: cached.position,
            total_size: cached.size,
            magic: header.magic,
        };
        let holds = summary.base_offset.is_some_and(|base| base <= offset)
            && summary.last_offset == cached.last_offset
            && offset <= summary.last_offset
            && summary.last_offset < self.next_offset()
            && summary.last_offset - self.base_offset <= i32::MAX as i64;
        holds.then_some((frame, summary))
    }

    /// Remembers the batches the walker holds from `walk_from` (a batch boundary the index walk
    /// started at) on, through the batch it found and on to the end of what it read, up to one
    /// index interval past the found batch.
    fn learn_positions(
        &self,
        walker: &BatchWalker<'_>,
        walk_from: u64,
        found: &Frame,
        found_summary: &BatchSummary,
        end: u64,
        generation: u64,
    ) {
        let (held_from, held) = walker.held();
        // A walk longer than one window re-read from a later batch boundary.
        let mut position = walk_from.max(held_from);
        let stop = found
            .position
            .saturating_add(u64::from(self.config.index_interval_bytes))
            .min(end);
        if walker.is_mapped() {
            // Mapped bytes past the found batch were not read yet: the walk below would miss
            // the CPU caches on each header in turn; asked for together, the misses overlap.
            let from = found.position.saturating_add(found.total_size);
            let lines = (from..stop).step_by(64);
            for line in lines.filter_map(|at| usize::try_from(at).ok()) {
                super::verified::prefetch(held, line);
            }
        }
        let mut run: Option<RunBuilder> = None;
        while position < stop {
            let (base, last, size) = if position == found.position {
                // The walk read its header; its bytes may run past what the walker holds.
                let Some(base) = found_summary.base_offset.filter(|_| found.magic == 2) else {
                    break;
                };
                (base, found_summary.last_offset, found.total_size)
            } else {
                let Some(bytes) = usize::try_from(position - held_from)
                    .ok()
                    .and_then(|from| held.get(from..))
                else {
                    break;
                };
                let Ok(header) = BatchHeader::parse(bytes) else {
                    break;
                };
                let size = header.total_size() as u64;
                if size > bytes.len() as u64 || position + size > end {
                    break;
                }
                (header.base_offset, header.last_offset(), size)
            };
            let added = match run.as_mut() {
                Some(run) => run.push(position, base, last, size),
                None => {
                    run = RunBuilder::new(position, base, last, size);
                    run.is_some()
                }
            };
            if !added {
                break;
            }
            position += size;
        }
        if let Some(run) = run {
            self.positions.learn(run, generation);
        }
    }

    fn read_with(
        &self,
        walker: &mut BatchWalker<'_>,
        start: &ReadStart,
        max_bytes: usize,
        upper_bound: Option<i64>,
        end: u64,
        walk_read_ahead: usize,
    ) -> Result<Option<SegmentRead>> {
        let Some((frame, first_summary)) = self.first_batch(walker, start, end, walk_read_ahead)?
        else {
            return Ok(None);
        };
        let position = frame.position;
        let available = end - position;
        let first_size = usize::try_from(frame.total_size)
            .map_err(|_| self.corrupt(position, Corruption::BadBatchLength(i32::MAX)))?;
        let want = max_bytes
            .max(first_size)
            .min(usize::try_from(available).unwrap_or(usize::MAX));
        // Up to `want` bytes: the file may end before the published size when a failed fsync
        // dropped its dirty pages (the log is poisoned then, and bounds reads below the loss).
        let window = walker.fill(position, want)?;
        let read = window.len().min(want);
        if read < first_size {
            return Err(self.corrupt(
                position,
                Corruption::Truncated {
                    needed: first_size as u64,
                    available: read as u64,
                },
            ));
        }
        let buf = window.get(..read).unwrap_or_default();
        let mut len = 0usize;
        let mut first_offset = first_summary.base_offset;
        let mut next_offset = first_summary.order_floor();
        while len < buf.len() {
            let rest = &buf[len..];
            let at = position + len as u64;
            let frame = match peek_batch_frame(rest) {
                Ok(Some(frame)) => frame,
                // A frame cut off by `max_bytes` ends the read after the first batch.
                Ok(None) => break,
                Err(_) if len > 0 => break,
                Err(what) => return Err(self.corrupt(position, what)),
            };
            let size = frame.total_size();
            let Some(bytes) = rest.get(..size) else {
                break;
            };
            // A v2 header is parsed once, for the bound, the order and the checks; the batch's
            // CRC is checked once, here, before it can be returned (a fetch's views trust it).
            let (summary, header) = match frame.magic {
                2 => {
                    let header =
                        BatchHeader::parse(bytes).map_err(|what| self.corrupt(at, what))?;
                    let summary = BatchSummary::of_v2_checked(&header)
                        .map_err(|what| self.corrupt(at, what))?;
                    (summary, Some(header))
                }
                magic => (
                    BatchSummary::parse(bytes, magic).map_err(|what| self.corrupt(at, what))?,
                    None,
                ),
            };
            if upper_bound.is_some_and(|bound| summary.last_offset >= bound) {
                break;
            }
            match &header {
                Some(header) => BatchView::check_parsed_header(bytes, header)
                    .map_err(|what| self.corrupt(at, what))?,
                None => {
                    let batch = Batch::new(bytes).map_err(|what| self.corrupt(at, what))?;
                    if first_offset.is_none() {
                        // A compressed legacy wrapper: its first offset is inside it.
                        let base_offset = batch
                            .base_offset(&mut Vec::new())
                            .map_err(|error| self.relocate(error, at))?;
                        first_offset = Some(base_offset);
                    }
                }
            }
            if len > 0 && summary.order_floor() < next_offset {
                return Err(self.corrupt(
                    at,
                    Corruption::OffsetOrder {
                        offset: summary.order_floor(),
                        bound: next_offset,
                    },
                ));
            }
            next_offset = summary.next_offset();
            len += size;
        }
        let (true, Some(first_offset)) = (len > 0, first_offset) else {
            return Ok(None);
        };
        Ok(Some(SegmentRead {
            position,
            len,
            first_offset,
            next_offset,
        }))
    }

    /// Drops the `.log` mapping, waiting for the readers that use it, and returns the write
    /// guard: while it is held no reader maps the file again, so the caller may shrink it.
    pub(super) fn drop_mapping(&self) -> crate::sync::RwLockWriteGuard<'_, MappingState> {
        let mut state = self.mapping.write();
        *state = MappingState::NotYet;
        state
    }

    /// The mapping's read guard when this segment's reads are served from a mapping that covers
    /// `end` (the published size the read saw): the segment is sealed and `map_sealed_reads` is
    /// set, or it is active and `map_active_reads` is set, and the storage can map. Maps the
    /// file at the first call (after a seal, or after a truncation dropped the mapping), and
    /// again if the segment grew past the reserved length.
    fn mapped_for_read(&self, end: u64) -> Option<crate::sync::RwLockReadGuard<'_, MappingState>> {
        if !self.maps_reads() {
            return None;
        }
        {
            let state = self.mapping.read();
            match &*state {
                MappingState::Mapped(mapping) if mapping.len() as u64 >= end => {
                    return Some(state);
                }
                MappingState::Unavailable => return None,
                MappingState::Mapped(_) | MappingState::NotYet => {}
            }
        }
        let mut state = self.mapping.write();
        let stale = match &*state {
            MappingState::NotYet => true,
            MappingState::Mapped(mapping) => (mapping.len() as u64) < end,
            MappingState::Unavailable => false,
        };
        // Checked again under the lock: an unseal drops the mapping under it, then unseals.
        if stale && self.maps_reads() {
            *state = self.map_log(end);
        }
        let state = crate::sync::RwLockWriteGuard::downgrade(state);
        matches!(&*state, MappingState::Mapped(mapping) if mapping.len() as u64 >= end)
            .then_some(state)
    }

    /// Whether this segment's reads go through a mapping now.
    fn maps_reads(&self) -> bool {
        if self.is_sealed() {
            self.config.map_sealed_reads
        } else {
            // Only a segment of a writable log is ever unsealed (a read-only log's are sealed).
            self.config.map_active_reads
        }
    }

    /// A new mapping of the `.log`: a sealed one at its length, the active one at the reserved
    /// length (`segment_bytes`, or more if the segment already reaches past it), a live view
    /// that the appends after it need not map again.
    fn map_log(&self, end: u64) -> MappingState {
        let mapped = if self.is_sealed() {
            self.log.map_read()
        } else {
            let reserve = u64::from(self.config.segment_bytes).max(end);
            self.log.map_read_reserved(reserve)
        };
        match mapped {
            Ok(Some(mapping)) if mapping.len() as u64 >= self.size() => {
                MappingState::Mapped(mapping)
            }
            Ok(_) => MappingState::Unavailable,
            Err(error) => {
                log::warn!(
                    "mapping {} failed, reading it with pread: {error}",
                    self.log_path().display()
                );
                MappingState::Unavailable
            }
        }
    }

    /// The batch at `position` if it is a v2 batch whose base offset is `offset` and whose
    /// last offset lies inside the segment (a resumed sequential read), else `None`. Damage
    /// there is no error here: the index path that runs instead reports it (a damaged
    /// lastOffsetDelta, which only the CRC protects, must not make the read skip the batch).
    fn batch_starting_at(
        &self,
        walker: &mut BatchWalker<'_>,
        position: u64,
        offset: i64,
    ) -> Result<Option<(Frame, BatchSummary)>> {
        let Ok(Step::Batch(frame)) = walker.frame_at(position) else {
            return Ok(None);
        };
        if frame.magic != 2 {
            return Ok(None);
        }
        match walker.summary(&frame) {
            Ok(summary)
                if summary.base_offset == Some(offset)
                    && summary.last_offset >= offset
                    && summary.last_offset < self.next_offset() =>
            {
                Ok(Some((frame, summary)))
            }
            _ => Ok(None),
        }
    }

    /// Notes the bytes after the segment's last valid batch, which its open left out of the
    /// published end: from now on a read that reaches the end reports them
    /// ([`check_damage`](Self::check_damage)). For a read-only segment, whose end nothing moves.
    pub(crate) fn note_damage(&self, invalid: InvalidBytes) {
        let _ = self.damage.set(invalid);
    }

    /// `Error::Corrupt` naming the bytes after the last valid batch, if the segment's open found
    /// some ([`note_damage`](Self::note_damage)); called where a walk reaches the published end
    /// of the segment, never per batch.
    pub(crate) fn check_damage(&self) -> Result<()> {
        match self.damage.get() {
            Some(invalid) => Err(self.corrupt(invalid.position, invalid.what.clone())),
            None => Ok(()),
        }
    }

    /// The position cache, for tests that plant wrong positions in it.
    #[cfg(test)]
    pub(crate) fn position_cache(&self) -> &super::positions::PositionCache {
        &self.positions
    }

    /// What a read takes before it reads a byte (see [`ReadView`]).
    pub(super) fn read_view(&self) -> ReadView {
        let epoch = self.truncation_seq.load(Ordering::Acquire);
        ReadView {
            epoch,
            end: self.size(),
        }
    }

    /// The end a truncation left (or is leaving) if one overlapped a read that took `epoch`
    /// at its start: one was under way then, or one began since. `None`: no truncation
    /// touched the file since, so whatever the read found in its bytes is really there.
    pub(super) fn raced_truncation(&self, epoch: u64) -> Option<i64> {
        let now = self.truncation_seq.load(Ordering::Acquire);
        (epoch % 2 == 1 || now != epoch).then(|| self.truncated_to.load(Ordering::Acquire))
    }
}
