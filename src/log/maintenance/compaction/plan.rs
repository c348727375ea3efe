//! Planning a pass (Kafka's `LogCleanerManager` and `SkimpyOffsetMap`): the cleanable range
//! and the schedule's figures, the key map of phase 1, and the grouping of the mapped segments
//! by size.
//!
//! Nothing here writes: a plan is read from the segments and the cleaner's state, so that
//! [`Log::compaction_schedule`](crate::Log::compaction_schedule) can answer without running a pass.

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::Result;
use crate::format::{AnyBatchIter, BatchHeader, Record};
use crate::segment::{Segment, SegmentFileKind, segment_file_path};

use crate::log::Shared;
use crate::log::segments::snapshot::SegmentHandle;

use super::clean::rewritable;
use super::txn::{ActiveProducers, TxnTracker, last_record_of_producer, marker_type};
use super::{CompactionOptions, for_each_batch};
use crate::log::CompactionSchedule;
use crate::log::config::compaction_policy::{CompactionPolicy, RecordVersion};
use crate::log::maintenance::state::CleanerState;

/// The winning record of each key, as the policy ranks them: offsets alone for a policy that
/// reads no versions (Kafka's order), so that its map costs what it always did.
enum Winners {
    Offsets(HashMap<Vec<u8>, i64>),
    Versioned(HashMap<Vec<u8>, RecordVersion>),
}

impl Winners {
    fn len(&self) -> usize {
        match self {
            Winners::Offsets(map) => map.len(),
            Winners::Versioned(map) => map.len(),
        }
    }

    fn get(&self, key: &[u8]) -> Option<RecordVersion> {
        match self {
            Winners::Offsets(map) => map.get(key).map(|&offset| RecordVersion {
                offset,
                version: None,
            }),
            Winners::Versioned(map) => map.get(key).copied(),
        }
    }

    /// Makes `record` the winner of `key` if the policy prefers it to the current one (or the
    /// key is new, `true` then when there is room for it). Returns `false` when the key is new
    /// and the map holds `capacity` keys.
    fn offer(
        &mut self,
        policy: &dyn CompactionPolicy,
        key: &[u8],
        record: RecordVersion,
        capacity: usize,
    ) -> bool {
        let room = self.len() < capacity;
        match self {
            Winners::Offsets(map) => match map.get_mut(key) {
                Some(current) => {
                    let current_version = RecordVersion {
                        offset: *current,
                        version: None,
                    };
                    if policy.prefers(record, current_version) {
                        *current = record.offset;
                    }
                }
                None if room => {
                    map.insert(key.to_vec(), record.offset);
                }
                None => return false,
            },
            Winners::Versioned(map) => match map.get_mut(key) {
                Some(current) => {
                    if policy.prefers(record, *current) {
                        *current = record;
                    }
                }
                None if room => {
                    map.insert(key.to_vec(), record);
                }
                None => return false,
            },
        }
        true
    }

    fn offsets(&self) -> Vec<i64> {
        match self {
            Winners::Offsets(map) => map.values().copied().collect(),
            Winners::Versioned(map) => map.values().map(|winner| winner.offset).collect(),
        }
    }
}

/// The key map of phase 1: for each key, its winning record in the mapped range, by the log's
/// [`CompactionPolicy`] (the highest offset under Kafka's).
pub(super) struct KeyMap {
    winners: Winners,
    /// Decides which record of a key wins, and what a tombstone is.
    pub(super) policy: Arc<dyn CompactionPolicy>,
    capacity: usize,
    /// The end of the mapped range: every record below it is in the map.
    pub(super) mapped_end: i64,
    full: bool,
    /// The mapped range holds batches copied whole (legacy, gzip, snappy), whose keys the map
    /// lacks: no tombstone may go in this pass.
    pub(super) holds_unmapped_records: bool,
    /// Every active producer's last record at planning time: its batch stays (RETAIN_EMPTY).
    pub(super) producers: ActiveProducers,
    /// The end of the cleanable range: the batch that ends there stays too (Kafka keeps the
    /// last batch of a cleaning round, so that the range's last offset stays in the log).
    pub(super) round_end: i64,
    /// The records from here on were mapped (those below were not: they were clean).
    first_dirty: i64,
    /// Every key's winning offset, sorted, once phase 1 is done; `None` when some lies at or
    /// above `mapped_end` (a segment the pass stopped at part-way), where the shortcut of
    /// [`superseded_batch`](KeyMap::superseded_batch) does not hold.
    latest_sorted: Option<Vec<i64>>,
}

/// One sealed segment of the cleanable range.
#[derive(Debug, Clone)]
pub(super) struct Planned {
    pub(super) handle: Arc<SegmentHandle>,
    /// The next segment's base.
    pub(super) end_offset: i64,
    bytes: u64,
}

/// The cleanable range as [`Shared::plan`] found it.
#[derive(Debug, Default)]
pub(super) struct Plan {
    pub(super) segments: Vec<Planned>,
    pub(super) schedule: CompactionSchedule,
    /// The base of the segment holding the last stable offset, when the LSO (an undecided
    /// transaction) ends the range.
    pub(super) uncleanable_from: Option<i64>,
}

impl KeyMap {
    /// Phase 1 is done: sorts the latest offsets for [`superseded_batch`](Self::superseded_batch).
    fn sort_latest(&mut self) {
        let mut sorted = self.winners.offsets();
        sorted.sort_unstable();
        self.latest_sorted = sorted
            .last()
            .is_none_or(|&last| last < self.mapped_end)
            .then_some(sorted);
    }

    /// Whether every record of the batch `header` goes because a later record of its key exists,
    /// decided from the header alone (no decompression): all its records were mapped, and no
    /// key's latest offset lies in the batch, so none of its records is the latest of its key
    /// (a record without a key goes anyway). A producer's last batch, which may stay as an empty
    /// header, is left to [`clean_batch`](super::clean::clean_batch).
    pub(super) fn superseded_batch(&self, header: &BatchHeader) -> bool {
        let Some(sorted) = &self.latest_sorted else {
            return false;
        };
        let last_offset = header.last_offset();
        let last_of_producer = last_record_of_producer(&self.producers, header, false);
        let first_latest_in_or_after = sorted.partition_point(|&o| o < header.base_offset);
        header.records_count > 0
            && !header.is_control()
            && header.base_offset >= self.first_dirty
            && last_offset < self.mapped_end
            && !last_of_producer
            && sorted
                .get(first_latest_in_or_after)
                .is_none_or(|&latest| latest > last_offset)
    }

    /// The version of `record` the policy compares, read only when the policy reads any.
    pub(super) fn version_of(&self, record: &Record<'_>) -> RecordVersion {
        RecordVersion {
            offset: record.offset,
            version: match self.winners {
                Winners::Offsets(_) => None,
                Winners::Versioned(_) => self.policy.record_version(record),
            },
        }
    }

    /// The winning record of `key` in the mapped range, or one that won over it since.
    pub(super) fn winner(&self, key: &[u8]) -> Option<RecordVersion> {
        self.winners.get(key)
    }

    /// Phase 2 meets `record` of a mapped key below the mapped part (a record earlier passes
    /// kept): returns whether it wins over the key's winner, which it then becomes, so that
    /// the later record it beats goes. Under Kafka's order it never does.
    pub(super) fn claims(&mut self, key: &[u8], record: RecordVersion) -> bool {
        let Some(current) = self.winners.get(key) else {
            return false;
        };
        self.policy.prefers(record, current)
            && self
                .winners
                .offer(&*self.policy, key, record, self.capacity)
    }

    /// Offers `record` (records come in offset order) as the winner of `key`, allocating only
    /// for a new key. Once the map holds its capacity of keys, the mapped range ends just below
    /// this record, whatever its key, and `false` says to stop: Kafka's rule, so that a pass
    /// with a small map stops where Kafka's stops.
    fn put(&mut self, key: &[u8], record: RecordVersion) -> bool {
        if self.winners.len() >= self.capacity {
            self.full = true;
            self.mapped_end = record.offset;
            return false;
        }
        self.winners
            .offer(&*self.policy, key, record, self.capacity)
    }
}

impl Shared {
    /// The cleanable range at `now_ms`: the sealed segments up to the first uncleanable one,
    /// with the schedule's figures. `check_max_lag` reads the first batch of dirty segments
    /// (only the schedule needs it).
    pub(super) fn plan(
        &self,
        cleaner: &CleanerState,
        now_ms: i64,
        min_lag_ms: i64,
        check_max_lag: bool,
        policy: &dyn CompactionPolicy,
    ) -> Result<Plan> {
        let first_dirty = cleaner.first_dirty_offset();
        // Read before the segment list: the LSO only grows while no truncation runs, and a
        // truncation resets the cleaner (and the pass then swaps nothing in).
        let last_stable = self.last_stable_offset();
        let list = self.view.segments().load();
        let handles = list.handles();
        let mut plan = Plan::default();
        plan.schedule.first_dirty_offset = first_dirty;
        let Some((active, sealed)) = handles.split_last() else {
            return Ok(plan);
        };
        plan.schedule.first_uncleanable_offset = active.base_offset();
        let max_lag_ms = self.config.max_compaction_lag_ms;
        let check_max_lag = check_max_lag && max_lag_ms < i64::MAX;
        let mut buf = Vec::new();
        for (index, handle) in sealed.iter().enumerate() {
            let end_offset = handles
                .get(index + 1)
                .map_or(i64::MAX, |next| next.base_offset());
            if end_offset > last_stable {
                // The segment holds the LSO (an undecided transaction begins in it, or a marker
                // is not yet below the high watermark): the range ends at its base, a segment
                // boundary, and the rest waits for the transactions to end.
                plan.uncleanable_from = Some(handle.base_offset());
                plan.schedule.first_uncleanable_offset = handle.base_offset();
                break;
            }
            let bytes = match self.segment_log_bytes(handle) {
                Ok(bytes) => bytes,
                // A truncation or retention took the segment after the list was loaded (its
                // closed handle is sized by path, and the file was renamed): plan up to here,
                // as when a pin finds the handle gone.
                Err(error)
                    if error.io_kind() == Some(std::io::ErrorKind::NotFound)
                        && !Arc::ptr_eq(&self.view.segments().load(), &list) =>
                {
                    plan.schedule.first_uncleanable_offset = handle.base_offset();
                    break;
                }
                Err(error) => return Err(error),
            };
            if end_offset > first_dirty {
                let Some(segment) = self.view.segments().pin(handle)? else {
                    // A truncation or retention changed the list: plan up to here.
                    plan.schedule.first_uncleanable_offset = handle.base_offset();
                    break;
                };
                let max_timestamp = segment.max_timestamp().map(|max| max.timestamp);
                if !policy.segment_cleanable(now_ms, max_timestamp, min_lag_ms) {
                    plan.schedule.first_uncleanable_offset = handle.base_offset();
                    break;
                }
                if check_max_lag
                    && !plan.schedule.max_lag_exceeded
                    && let Some(first) = first_batch_timestamp(&segment, &mut buf)?
                {
                    plan.schedule.max_lag_exceeded =
                        policy.max_lag_exceeded(now_ms, first, max_lag_ms);
                }
                plan.schedule.dirty_bytes += bytes;
            } else {
                plan.schedule.clean_bytes += bytes;
            }
            plan.segments.push(Planned {
                handle: Arc::clone(handle),
                end_offset,
                bytes,
            });
        }
        let schedule = &mut plan.schedule;
        let total = schedule.clean_bytes + schedule.dirty_bytes;
        schedule.dirty_ratio = if total == 0 {
            0.0
        } else {
            schedule.dirty_bytes as f64 / total as f64
        };
        schedule.due = policy.pass_due(schedule, self.config.min_cleanable_dirty_ratio);
        Ok(plan)
    }

    /// The bytes of a segment's index file of `kind`, 0 when it has none yet.
    fn index_bytes(&self, base_offset: i64, kind: SegmentFileKind) -> Result<u64> {
        let path = segment_file_path(&self.dir, base_offset, kind);
        match self.storage.metadata(&path) {
            Ok(metadata) => Ok(metadata.len),
            Err(error) if error.io_kind() == Some(std::io::ErrorKind::NotFound) => Ok(0),
            Err(error) => Err(error),
        }
    }

    /// The bytes of every segment whose base is at or above `from`.
    pub(super) fn bytes_from(&self, from: i64) -> Result<u64> {
        let list = self.view.segments().load();
        let mut total = 0u64;
        for handle in list.handles().iter().filter(|h| h.base_offset() >= from) {
            total = total.saturating_add(self.segment_log_bytes(handle)?);
        }
        Ok(total)
    }

    /// Kafka's `groupSegmentsBySize`: consecutive segments join a group while its `.log` bytes
    /// stay within `segment.bytes`, its `.index` and `.timeindex` bytes each within
    /// `segment.index.bytes`, and its last offset within i32 of its base.
    pub(super) fn group_by_size<'a>(&self, segments: &'a [Planned]) -> Result<Vec<&'a [Planned]>> {
        let max_log_bytes = u64::from(self.config.segment_bytes);
        let max_index_bytes = u64::from(self.config.segment_index_bytes);
        let mut sizes = Vec::with_capacity(segments.len());
        for planned in segments {
            let base = planned.handle.base_offset();
            sizes.push((
                planned.bytes,
                self.index_bytes(base, SegmentFileKind::OffsetIndex)?,
                self.index_bytes(base, SegmentFileKind::TimeIndex)?,
            ));
        }
        let mut groups = Vec::new();
        let mut start = 0;
        while start < segments.len() {
            let base = segments
                .get(start)
                .map_or(0, |first| first.handle.base_offset());
            let (mut log_bytes, mut index_bytes, mut time_index_bytes) =
                sizes.get(start).copied().unwrap_or_default();
            let mut end = start + 1;
            while let (Some(next), Some(&(log, index, time_index))) =
                (segments.get(end), sizes.get(end))
            {
                let last_offset = next.end_offset.saturating_sub(1);
                let fits = log_bytes + log <= max_log_bytes
                    && index_bytes + index <= max_index_bytes
                    && time_index_bytes + time_index <= max_index_bytes
                    && last_offset.saturating_sub(base) <= i64::from(i32::MAX);
                if !fits {
                    break;
                }
                log_bytes += log;
                index_bytes += index;
                time_index_bytes += time_index;
                end += 1;
            }
            if let Some(group) = segments.get(start..end) {
                groups.push(group);
            }
            start = end;
        }
        Ok(groups)
    }

    /// Phase 1 of a pass: maps the cleanable range `plan` found, segment by segment, until the
    /// key map fills or a segment leaves the log. Data of aborted transactions (from the
    /// `.txnindex` files) is skipped: its keys never enter the map, so it supersedes nothing.
    /// Control batches only move the transaction state along. Returns the map, sorted, and the
    /// segments it covers.
    pub(super) fn map_cleanable_range(
        &self,
        plan: &Plan,
        options: CompactionOptions,
        first_dirty: i64,
        producers: ActiveProducers,
        policy: Arc<dyn CompactionPolicy>,
    ) -> Result<(KeyMap, Vec<Planned>, u64)> {
        let winners = if policy.reads_versions() {
            Winners::Versioned(HashMap::new())
        } else {
            Winners::Offsets(HashMap::new())
        };
        let mut map = KeyMap {
            winners,
            policy,
            capacity: options.max_map_keys.max(1),
            mapped_end: plan.segments.first().map_or(0, |p| p.handle.base_offset()),
            full: false,
            holds_unmapped_records: false,
            producers,
            round_end: plan.schedule.first_uncleanable_offset,
            first_dirty,
            latest_sorted: None,
        };
        let mut bytes_read = 0u64;
        let mut mapped: Vec<Planned> = Vec::new();
        let mut tracker = TxnTracker::default();
        if !plan.segments.is_empty() {
            tracker.add_aborted(
                self.aborted_in_range(first_dirty, plan.schedule.first_uncleanable_offset)?,
            );
        }
        // Decompressed records, reused from batch to batch.
        let mut scratch = Vec::new();
        for planned in &plan.segments {
            let handle = &planned.handle;
            let Some(segment) = self.view.segments().pin(handle)? else {
                // A truncation or retention changed the list: clean what was mapped so far.
                break;
            };
            bytes_read += for_each_batch(&segment, self.maintenance.cleaner_io(), |batch| {
                let Some(view) = batch.as_v2() else {
                    // Legacy records are copied whole and not mapped: a tombstone must then
                    // outlive them, or an older value of its key in them would come back.
                    map.holds_unmapped_records = true;
                    return Ok(true);
                };
                let header = view.header();
                if header.is_control() {
                    let marker = marker_type(view, &mut scratch)?;
                    tracker.on_control_batch(header, marker);
                    return Ok(true);
                }
                if tracker.on_data_batch(header) {
                    // Aborted: the rewrite drops it whatever its keys.
                    return Ok(true);
                }
                if !rewritable(view) {
                    map.holds_unmapped_records = true;
                    return Ok(true);
                }
                for record in view.records(&mut scratch)? {
                    let record = record?;
                    // Below the first dirty offset every record has already been compared
                    // with every later one there: only the dirty part is mapped.
                    if let Some(key) = record.key.filter(|_| record.offset >= first_dirty)
                        && !map.put(key, map.version_of(&record))
                    {
                        return Ok(false);
                    }
                }
                Ok(true)
            })?;
            if !map.full {
                // The next segment's base, not this one's next offset: an offset gap between
                // the two (compaction leaves them) is mapped too, or the next pass would start
                // inside it and find this segment dirty again, forever (Kafka fast-forwards
                // past the gap the same way, KAFKA-8764).
                map.mapped_end = planned.end_offset;
            }
            mapped.push(planned.clone());
            if map.full {
                break;
            }
        }
        map.sort_latest();
        Ok((map, mapped, bytes_read))
    }
}

/// The max timestamp of a segment's first v2 batch (Kafka's `getFirstBatchTimestamp`), for
/// `max.compaction.lag.ms`.
fn first_batch_timestamp(segment: &Segment, buf: &mut Vec<u8>) -> Result<Option<i64>> {
    let Some(read) = segment.read(segment.base_offset(), 1, None, buf)? else {
        return Ok(None);
    };
    let mut batches = AnyBatchIter::new(buf.get(..read.len).unwrap_or_default());
    Ok(batches
        .next()
        .and_then(|(_, batch)| batch.ok())
        .and_then(|batch| batch.header().map(|h| h.max_timestamp))
        .filter(|&timestamp| timestamp >= 0))
}
