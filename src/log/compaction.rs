//! Log compaction (`cleanup.policy` compact): for every key, only the record with the highest
//! offset stays (DESIGN §3.8; kafka-storage.md §1.8 and §5).
//!
//! One pass runs in two phases over the sealed segments (never the active one):
//!
//! 1. **Map.** Walk the cleanable range from the first dirty offset (the end of what earlier
//!    passes of this open mapped whole; Kafka's cleaner checkpoint, kept in memory here),
//!    recording for every key the highest offset it has. The map holds at most [`CompactionOptions::max_map_keys`] keys;
//!    when it fills, the mapped range ends at the first record it could not take, and the pass
//!    cleans only that far (a record above the mapped range is always kept).
//! 2. **Rewrite.** Each segment that holds a record to drop (or a tombstone that needs its
//!    delete horizon) is copied, batch by batch, into `<base>.log.cleaned`. A batch whose
//!    records all stay is copied byte for byte; one that loses records is rebuilt at its own
//!    base offset, keeping its last offset, producer fields, transactional flag, timestamp type,
//!    codec and leader epoch, with each kept record at its own offset (gaps remain); a batch
//!    that loses all its records goes.
//!
//! Crash safety follows Kafka's cleaner: the `.cleaned` file is fsynced; then, under the writer
//! mutex (so that no truncation or retention deletes the segment meanwhile), it is renamed
//! `.swap`, the directory is fsynced, and under the snapshot write lock the old segment's files
//! are renamed `.deleted` and the `.swap` becomes the `.log`, followed by a directory fsync.
//! The new `.log` keeps the old one's mtime (time retention's append time). Open ([`complete_swaps`]) deletes a leftover `.cleaned` and completes a
//! leftover `.swap`, so a crash leaves each segment either wholly old or wholly new. Readers on
//! the old segment keep its descriptor and finish on it: the old handle leaves the snapshot and
//! is never reopened by path.
//!
//! Tombstones: the pass that first recopies a tombstone writes `now + delete.retention.ms`
//! into its batch as the delete horizon (attribute bit 6); a pass at or after that horizon
//! drops the tombstone.
//!
//! Batches in the legacy formats (magic 0 and 1) or in a codec partlog does not write (gzip,
//! snappy) are copied whole, and their keys are not mapped: the pass then keeps more than Kafka
//! would, never less.
//!
//! The last batch of each producer id in the cleaned range stays as an empty header when all its
//! records go (Kafka's RETAIN_EMPTY), until its max timestamp is a day old
//! (`producer.id.expiration.ms`'s default).
//!
//! Not yet done: transactions (a pass stops at the base of the first segment that holds a
//! transactional or control batch, or has a `.txnindex`), merging small segments into groups, and scheduling by dirty ratio and lags.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::format::{
    AnyBatchIter, Batch, BatchBuilder, BatchHeader, BatchView, Compression, MIN_BATCH_LENGTH,
    TimestampType, crc32c,
};
use crate::segment::{
    CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX, Segment, SegmentFileKind, TransientSuffix,
    parse_segment_file_name, rename_segment_files, segment_file_name, segment_file_path,
};
use crate::storage::{OpenMode, Storage};

use super::snapshot::SegmentHandle;
use super::{Log, PendingDelete};

/// How many bytes of a segment one read brings in while a pass walks it.
const READ_CHUNK_BYTES: usize = 1 << 20;

/// Settings of one compaction pass that are not topic configs.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionOptions {
    /// The most keys the pass's key map holds (Kafka bounds it by
    /// `log.cleaner.dedupe.buffer.size`). Each key costs its length plus about 40 bytes. When
    /// the map fills, the pass cleans only the range it mapped. Default: 1,000,000.
    pub max_map_keys: usize,
}

impl Default for CompactionOptions {
    fn default() -> Self {
        CompactionOptions {
            max_map_keys: 1_000_000,
        }
    }
}

impl CompactionOptions {
    /// Options with a key map of at most `max_map_keys` keys (at least one).
    pub fn with_max_map_keys(max_map_keys: usize) -> CompactionOptions {
        CompactionOptions {
            max_map_keys: max_map_keys.max(1),
        }
    }
}

/// What one compaction pass did.
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactionStats {
    /// Bytes of segment data the pass read, both phases counted.
    pub bytes_read: u64,
    /// Bytes of cleaned segment data the pass wrote.
    pub bytes_written: u64,
    /// Records dropped, tombstones included.
    pub records_removed: u64,
    /// Tombstones dropped because their delete horizon had passed.
    pub tombstones_removed: u64,
    /// Segments replaced by a cleaned copy.
    pub segments_cleaned: u64,
    /// The end of the range the pass cleaned: every record below it was compared with the
    /// latest record of its key below it.
    pub cleaned_up_to: i64,
    /// Where the uncleanable range starts when a transactional or control batch (or a
    /// `.txnindex`) stopped the pass, until transactions are supported.
    pub uncleanable_from: Option<i64>,
    /// How long the pass took.
    pub duration: Duration,
}

/// What the cleaner remembers between passes (in memory: after a reopen the whole log counts
/// as dirty once, which costs a pass, never a record).
#[derive(Debug, Default)]
pub(crate) struct CleanerState {
    /// Every record below it has been compared with every later record below it (Kafka's
    /// cleaner checkpoint): a pass maps only from here on.
    first_dirty_offset: i64,
    /// The log's truncation count when `first_dirty_offset` was last valid.
    truncations_seen: u64,
}

/// The key map of phase 1: for each key, the highest offset it has in the mapped range.
struct KeyMap {
    latest: HashMap<Vec<u8>, i64>,
    capacity: usize,
    /// The end of the mapped range: every record below it is in the map.
    mapped_end: i64,
    full: bool,
    /// The mapped range holds batches copied whole (legacy, gzip, snappy), whose keys the map
    /// lacks: no tombstone may go in this pass.
    holds_unmapped_records: bool,
    /// For each producer id, the last offset of its last batch in the mapped range: that batch
    /// survives as an empty header when all its records go (Kafka's RETAIN_EMPTY).
    producer_last_offset: HashMap<i64, i64>,
}

impl Log {
    /// Runs one compaction pass with the default [`CompactionOptions`]: see
    /// [`compact_with`](Self::compact_with).
    pub fn compact(&self) -> Result<CompactionStats> {
        self.compact_with(CompactionOptions::default())
    }

    /// Runs one compaction pass over the sealed segments (the active segment is never
    /// cleaned): for every key only the record with the highest offset stays, and offsets
    /// never change (gaps remain). A batch keeps its base and last offset, producer fields,
    /// transactional flag, timestamp type and codec; the last batch of a producer id whose
    /// records all go stays as an empty header for a day (Kafka's RETAIN_EMPTY).
    ///
    /// Tombstones: the pass that first recopies one writes its delete horizon
    /// (now + `delete.retention.ms`) into the batch; a pass at or after the horizon drops it.
    ///
    /// Crash safety: each segment's cleaned copy is written as `<base>.log.cleaned`, fsynced,
    /// renamed `.swap`, and swapped in (old files renamed `.deleted`, `.swap` renamed `.log`)
    /// with a directory fsync after each step; [`Log::open`] completes or discards what a
    /// crash left, so each segment is wholly old or wholly new. A reader on an old segment
    /// finishes on it.
    ///
    /// Segments newer than `min.compaction.lag.ms` (by their largest timestamp) are left alone.
    /// Until transactions are supported, the pass stops at the first segment that holds a
    /// transactional or control batch, or has a `.txnindex`, and reports that offset in
    /// [`CompactionStats::uncleanable_from`].
    ///
    /// Blocks on the reads, writes and fsyncs of the pass. Appends wait only while a cleaned
    /// segment is swapped in (a few renames and two directory fsyncs); readers wait only for
    /// the renames, never for an fsync. Fails with [`Error::InvalidArgument`] unless `cleanup.policy` includes compact.
    /// If the swap of a segment fails half-way, the log poisons itself, and reopening it
    /// completes the swap.
    pub fn compact_with(&self, options: CompactionOptions) -> Result<CompactionStats> {
        let result = self.compaction_pass(options);
        super::observer::notify(
            self.shared.config.observer.as_ref(),
            super::LogEvent::Compaction {
                result: result.as_ref(),
            },
        );
        result
    }

    fn compaction_pass(&self, options: CompactionOptions) -> Result<CompactionStats> {
        self.check_writable()?;
        let shared = &self.shared;
        if !shared.config.cleanup_policy.compact {
            return Err(Error::InvalidArgument {
                why: "compaction needs cleanup.policy compact".into(),
            });
        }
        let mut cleaner = shared.compaction.lock();
        let started = Instant::now();
        let now_ms = shared.clock.now_ms();
        let mut stats = CompactionStats::default();
        let truncations_at_start = shared.truncations.load(Ordering::Acquire);
        if cleaner.truncations_seen != truncations_at_start {
            // Offsets above the truncation point were reused: all of it is dirty again.
            cleaner.first_dirty_offset = 0;
            cleaner.truncations_seen = truncations_at_start;
        }
        let first_dirty = cleaner.first_dirty_offset;

        let list = shared.snapshot.load();
        let Some((active, sealed)) = list.handles().split_last() else {
            return Ok(stats);
        };
        // Clean only what is durable and below a recorded recovery point: a pass then never
        // drops a durable record for a later one that a crash could still lose, and recovery
        // can tell the gaps it leaves (below the point) from a lost tail (above it).
        shared.record_recovery_point_through(active.base_offset())?;
        let mut map = KeyMap {
            latest: HashMap::new(),
            capacity: options.max_map_keys.max(1),
            mapped_end: sealed.first().map_or(0, |h| h.base_offset()),
            full: false,
            holds_unmapped_records: false,
            producer_last_offset: HashMap::new(),
        };
        // Phase 1: map the cleanable range.
        // Handles only: holding every segment open would cost a descriptor per segment.
        let mut mapped: Vec<Arc<SegmentHandle>> = Vec::new();
        for handle in sealed {
            let Some(segment) = shared.snapshot.pin(handle)? else {
                // A truncation or retention changed the list: clean what was mapped so far.
                break;
            };
            if let Some(max) = segment.max_timestamp()
                && now_ms.saturating_sub(max.timestamp) < shared.config.min_compaction_lag_ms
            {
                break;
            }
            let txn_index =
                segment_file_path(&shared.dir, handle.base_offset(), SegmentFileKind::TxnIndex);
            if shared.storage.exists(&txn_index)? {
                stats.uncleanable_from = Some(handle.base_offset());
                break;
            }
            let mut entries: Vec<(Vec<u8>, i64)> = Vec::new();
            let mut producer_last: Vec<(i64, i64)> = Vec::new();
            let mut transactional = false;
            let next_offset = segment.next_offset();
            stats.bytes_read += for_each_batch(&segment, |batch| {
                if batch.is_control() || batch.header().is_some_and(|h| h.is_transactional()) {
                    transactional = true;
                    return Ok(false);
                }
                let view = batch.as_v2().filter(|v| rewritable(v));
                // Records the pass copies whole are not mapped: a tombstone must then outlive
                // them, or an older value of its key in them would come back.
                map.holds_unmapped_records |= view.is_none();
                if let Some(header) = batch.header().filter(|h| h.producer_id >= 0) {
                    producer_last.push((header.producer_id, header.last_offset()));
                }
                if let Some(view) = view {
                    let mut scratch = Vec::new();
                    for record in view.records(&mut scratch)? {
                        let record = record?;
                        // Below the first dirty offset every record has already been compared
                        // with every later one there: only the dirty part is mapped.
                        if let Some(key) = record.key.filter(|_| record.offset >= first_dirty) {
                            entries.push((key.to_vec(), record.offset));
                        }
                    }
                }
                Ok(true)
            })?;
            if transactional {
                stats.uncleanable_from = Some(handle.base_offset());
                break;
            }
            map.take_segment(entries, next_offset);
            for (producer_id, last_offset) in producer_last {
                if last_offset < map.mapped_end {
                    map.producer_last_offset.insert(producer_id, last_offset);
                }
            }
            mapped.push(Arc::clone(handle));
            if map.full {
                break;
            }
        }
        if let Some(from) = stats.uncleanable_from {
            log::info!(
                "{}: compaction stops at offset {from}: transactional data is not compacted yet",
                shared.dir.display()
            );
        }
        stats.cleaned_up_to = map.mapped_end;

        // Phase 2: rewrite each mapped segment that has something to drop.
        let horizon_ms = now_ms.saturating_add(shared.config.delete_retention_ms);
        let mut every_segment_cleaned = true;
        for handle in mapped {
            if handle.base_offset() >= map.mapped_end {
                break;
            }
            let Some(segment) = shared.snapshot.pin(&handle)? else {
                every_segment_cleaned = false;
                continue;
            };
            let cleaned = self.clean_segment(&segment, &map, now_ms, horizon_ms, &mut stats)?;
            let Some(written) = cleaned else {
                continue;
            };
            drop(segment);
            if self.swap_in(&handle, truncations_at_start)? {
                stats.bytes_written += written;
                stats.segments_cleaned += 1;
            } else {
                every_segment_cleaned = false;
            }
        }
        if every_segment_cleaned {
            // The next pass maps from here on, so that a small key map still makes progress.
            cleaner.first_dirty_offset = cleaner.first_dirty_offset.max(map.mapped_end);
        }
        stats.duration = started.elapsed();
        log::debug!("{}: compaction pass: {stats:?}", shared.dir.display());
        Ok(stats)
    }

    /// Writes the cleaned copy of `segment` as `<base>.log.cleaned`, fsyncs it, renames it
    /// The rename to `.swap` waits for [`swap_in`](Self::swap_in). `None` when nothing in the
    /// segment changes.
    fn clean_segment(
        &self,
        segment: &Segment,
        map: &KeyMap,
        now_ms: i64,
        horizon_ms: i64,
        stats: &mut CompactionStats,
    ) -> Result<Option<u64>> {
        let shared = &self.shared;
        let base = segment.base_offset();
        let cleaned_path = transient_log_path(&shared.dir, base, CLEANED_SUFFIX);
        if shared.storage.exists(&cleaned_path)? {
            // Left by an earlier pass that failed: never part of the log.
            shared.storage.remove(&cleaned_path)?;
        }
        let file = shared.storage.open(&cleaned_path, OpenMode::CreateNew)?;
        let mut position = 0u64;
        let mut changed = false;
        let mut removed = 0u64;
        let mut tombstones = 0u64;
        let result = for_each_batch(segment, |batch| {
            let out = match batch.as_v2().filter(|v| rewritable(v)) {
                Some(view) => {
                    let (out, batch_removed, batch_tombstones) =
                        clean_batch(view, map, now_ms, horizon_ms)?;
                    removed += batch_removed;
                    tombstones += batch_tombstones;
                    out
                }
                // Legacy batches, and batches in a codec partlog does not write (gzip,
                // snappy), are copied whole.
                None => CleanedBatch::Unchanged,
            };
            let bytes: &[u8] = match &out {
                CleanedBatch::Unchanged => batch.as_bytes(),
                CleanedBatch::Rebuilt(bytes) => {
                    changed = true;
                    bytes
                }
                CleanedBatch::Dropped => {
                    changed = true;
                    return Ok(true);
                }
            };
            file.write_all_at(bytes, position)?;
            position += bytes.len() as u64;
            Ok(true)
        });
        let outcome = result.and_then(|read| {
            stats.bytes_read += read;
            if changed {
                // The old `.log`'s mtime is the segment's append time for time retention:
                // the cleaned copy keeps it (issue 5), and the fsync below makes it durable.
                let mtime_ms = shared.storage.metadata(&segment.log_path())?.modified_ms;
                match shared.storage.set_mtime(&cleaned_path, mtime_ms) {
                    Ok(()) | Err(Error::Unsupported { .. }) => {}
                    Err(error) => return Err(error),
                }
                file.sync_all()?;
            }
            Ok(())
        });
        drop(file);
        if let Err(error) = outcome {
            remove_quietly(&*shared.storage, &cleaned_path);
            return Err(error);
        }
        if !changed {
            shared.storage.remove(&cleaned_path)?;
            return Ok(None);
        }
        stats.records_removed += removed;
        stats.tombstones_removed += tombstones;
        Ok(Some(position))
    }

    /// Swaps `<base>.log.cleaned` in for the segment of `handle`: renames it `.swap`, fsyncs the
    /// directory, renames the old files `.deleted` and the `.swap` to `.log`, and fsyncs the
    /// directory again, all under the writer mutex. A `.swap` therefore exists only for a
    /// segment that is still in the log: a truncation or retention (which take the writer
    /// mutex) can never delete a segment whose `.swap` a crash would then bring back. `false` when the segment left
    /// the log meanwhile (a truncation or retention took it): the swap file is then removed.
    fn swap_in(&self, handle: &Arc<SegmentHandle>, truncations_at_start: u64) -> Result<bool> {
        let shared = &self.shared;
        let base = handle.base_offset();
        let dir = &shared.dir;
        let cleaned_path = transient_log_path(dir, base, CLEANED_SUFFIX);
        let swap_path = transient_log_path(dir, base, SWAP_SUFFIX);
        let mut writer = shared.writer.lock();
        let still_there = shared
            .snapshot
            .load()
            .handles()
            .split_last()
            .is_some_and(|(_, sealed)| sealed.iter().any(|h| Arc::ptr_eq(h, handle)));
        // A truncation may have cut (and refilled) the segment since it was read.
        if !still_there || shared.truncations.load(Ordering::Acquire) != truncations_at_start {
            drop(writer);
            remove_quietly(&*shared.storage, &cleaned_path);
            return Ok(false);
        }
        shared.storage.rename(&cleaned_path, &swap_path)?;
        if let Err(error) = shared.storage.sync_dir(dir) {
            // Whether the rename is durable is unknown: stop writing; reopening resolves it.
            shared.commit.poison();
            return Err(error);
        }
        let new_handle = SegmentHandle::closed(base);
        let mut renamed = Vec::new();
        let replaced = shared
            .snapshot
            .replace(handle, Arc::clone(&new_handle), || {
                renamed = rename_segment_files(&*shared.storage, dir, base, DELETED_SUFFIX)?;
                shared.storage.rename(
                    &swap_path,
                    &segment_file_path(dir, base, SegmentFileKind::Log),
                )
            });
        let old_segment = match replaced {
            Ok(Some(old_segment)) => old_segment,
            Ok(None) => {
                // Checked above under the same writer mutex: nothing can have removed it.
                remove_quietly(&*shared.storage, &swap_path);
                shared.storage.sync_dir(dir)?;
                return Ok(false);
            }
            Err(error) => {
                // The files may be half swapped while the snapshot still names the old
                // segment: stop writing; reopening completes the swap.
                log::error!(
                    "{}: swapping in the compacted segment {base} failed: {error}",
                    dir.display()
                );
                shared.commit.poison();
                return Err(error);
            }
        };
        writer.pending_deletes.push(PendingDelete {
            paths: renamed,
            segment: old_segment,
        });
        if let Err(error) = shared.storage.sync_dir(dir) {
            shared.commit.poison();
            return Err(error);
        }
        drop(writer);
        // Unlinks outside the writer lock, as retention does.
        shared.reap_unpinned();
        // The new segment has only its `.log`: opening it now builds its indexes (off the
        // writer mutex), so that they are on disk for Kafka's tools and the next open. They are
        // derived data, so a failure here only costs a rebuild later.
        let indexed = shared
            .snapshot
            .pin(&new_handle)
            .and_then(|segment| segment.map_or(Ok(()), |segment| segment.flush()));
        if let Err(error) = indexed {
            log::warn!(
                "{}: indexing the compacted segment {base} failed: {error}",
                dir.display()
            );
        }
        Ok(true)
    }
}

/// What cleaning did to one batch.
enum CleanedBatch {
    /// Copied byte for byte.
    Unchanged,
    /// Rebuilt with fewer records or a new delete horizon.
    Rebuilt(Vec<u8>),
    /// Every record went.
    Dropped,
}

/// Kafka's default `producer.id.expiration.ms` (1 day): an empty header kept for a producer id
/// goes once its batch's max timestamp is older than this.
const PRODUCER_ID_EXPIRATION_MS: i64 = 24 * 60 * 60 * 1000;

/// The empty batch Kafka's cleaner keeps for the last batch of a producer id whose records all
/// went (RETAIN_EMPTY, `DefaultRecordBatch.writeEmptyHeader`): the same base offset, last
/// offset, producer id, epoch and base sequence, leader epoch, timestamp type and transactional
/// flag, no codec, the batch's max timestamp as both timestamps, and no records, so that the
/// producer's last sequence survives for idempotent dedupe.
fn empty_header(header: &BatchHeader) -> Vec<u8> {
    /// Attribute bit 3: LogAppendTime.
    const LOG_APPEND_TIME_BIT: i16 = 1 << 3;
    /// Attribute bit 4: transactional.
    const TRANSACTIONAL_BIT: i16 = 1 << 4;
    let empty = BatchHeader {
        batch_length: MIN_BATCH_LENGTH,
        crc: 0,
        attributes: header.attributes & (LOG_APPEND_TIME_BIT | TRANSACTIONAL_BIT),
        base_timestamp: header.max_timestamp,
        records_count: 0,
        ..*header
    };
    let mut bytes = empty.encode().to_vec();
    let crc = crc32c(bytes.get(CRC_COVERED_FROM..).unwrap_or_default());
    if let Some(slot) = bytes.get_mut(CRC_AT..CRC_COVERED_FROM) {
        slot.copy_from_slice(&crc.to_be_bytes());
    }
    bytes
}

/// Where a v2 batch's CRC field sits, and where the bytes it covers start.
const CRC_AT: usize = 17;
const CRC_COVERED_FROM: usize = 21;

/// Whether a pass may rebuild this batch: partlog writes none, lz4 and zstd, never gzip or
/// snappy, so batches in those codecs stay as they are (and their keys stay out of the map,
/// which only ever keeps more records).
fn rewritable(view: &BatchView<'_>) -> bool {
    matches!(
        view.header().compression(),
        Ok(Compression::None | Compression::Lz4 | Compression::Zstd)
    )
}

/// Decides the fate of one v2 batch: returns it with the records it dropped and the
/// tombstones among them that went because their horizon had passed.
fn clean_batch(
    view: &BatchView<'_>,
    map: &KeyMap,
    now_ms: i64,
    horizon_ms: i64,
) -> Result<(CleanedBatch, u64, u64)> {
    let header = view.header();
    let horizon = header.delete_horizon_ms();
    let mut scratch = Vec::new();
    let mut kept = Vec::new();
    let mut total = 0u64;
    let mut expired_tombstones = 0u64;
    let mut keeps_tombstone = false;
    for record in view.records(&mut scratch)? {
        let record = record?;
        total += 1;
        let keep = if record.offset >= map.mapped_end {
            true
        } else {
            match record.key {
                // Kafka's cleaner drops records without a key: nothing can look them up.
                None => false,
                Some(key) => match map.latest.get(key) {
                    Some(&latest) if record.offset < latest => false,
                    _ if record.value.is_none()
                        && !map.holds_unmapped_records
                        && horizon.is_some_and(|h| h <= now_ms) =>
                    {
                        expired_tombstones += 1;
                        false
                    }
                    _ => true,
                },
            }
        };
        if keep {
            keeps_tombstone |= record.value.is_none();
            kept.push(record);
        }
    }
    let removed = total - kept.len() as u64;
    if kept.is_empty() {
        let last_of_producer = header.producer_id >= 0
            && map.producer_last_offset.get(&header.producer_id) == Some(&header.last_offset());
        let expired = header.max_timestamp < now_ms.saturating_sub(PRODUCER_ID_EXPIRATION_MS);
        if last_of_producer && !expired {
            if header.records_count == 0 {
                return Ok((CleanedBatch::Unchanged, 0, 0));
            }
            return Ok((
                CleanedBatch::Rebuilt(empty_header(header)),
                removed,
                expired_tombstones,
            ));
        }
        return Ok((CleanedBatch::Dropped, removed, expired_tombstones));
    }
    let needs_horizon = keeps_tombstone && horizon.is_none();
    if removed == 0 && !needs_horizon {
        return Ok((CleanedBatch::Unchanged, 0, 0));
    }
    let mut builder = BatchBuilder::new(header.compression()?)
        .base_offset(header.base_offset)
        .partition_leader_epoch(header.partition_leader_epoch)
        .producer(
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
        )
        .transactional(header.is_transactional())
        .last_offset_delta(header.last_offset_delta);
    builder = match header.timestamp_type() {
        TimestampType::LogAppendTime => builder.log_append_time(header.max_timestamp),
        TimestampType::CreateTime => builder,
    };
    if keeps_tombstone {
        builder = builder.delete_horizon_ms(horizon.unwrap_or(horizon_ms));
    }
    for record in &kept {
        builder.push_record_at_offset(record);
    }
    Ok((
        CleanedBatch::Rebuilt(builder.build()?),
        removed,
        expired_tombstones,
    ))
}

impl KeyMap {
    /// Adds one segment's keyed records (in offset order). When a new key does not fit, the
    /// mapped range ends just below that record.
    fn take_segment(&mut self, entries: Vec<(Vec<u8>, i64)>, segment_end: i64) {
        for (key, offset) in entries {
            if let Some(latest) = self.latest.get_mut(&key) {
                *latest = offset;
                continue;
            }
            if self.latest.len() >= self.capacity {
                self.full = true;
                self.mapped_end = offset;
                return;
            }
            self.latest.insert(key, offset);
        }
        self.mapped_end = segment_end;
    }
}

/// Calls `visit` on every batch of `segment` in order, until it returns `false`. Returns the
/// bytes read.
fn for_each_batch(
    segment: &Segment,
    mut visit: impl FnMut(&Batch<'_>) -> Result<bool>,
) -> Result<u64> {
    let mut buf = Vec::new();
    let mut offset = segment.base_offset();
    let mut bytes_read = 0u64;
    while let Some(read) = segment.read(offset, READ_CHUNK_BYTES, None, &mut buf)? {
        bytes_read += read.len as u64;
        let mut batches = AnyBatchIter::new(buf.get(..read.len).unwrap_or_default());
        for (position, batch) in batches.by_ref() {
            let batch = batch.map_err(|what| Error::Corrupt {
                file: segment.log_path(),
                position: read.position + position as u64,
                what,
            })?;
            if !visit(&batch)? {
                return Ok(bytes_read);
            }
        }
        if read.next_offset <= offset {
            break;
        }
        offset = read.next_offset;
    }
    Ok(bytes_read)
}

fn transient_log_path(dir: &Path, base_offset: i64, suffix: &str) -> PathBuf {
    dir.join(format!(
        "{}{suffix}",
        segment_file_name(base_offset, SegmentFileKind::Log)
    ))
}

fn remove_quietly(storage: &dyn Storage, path: &Path) {
    match storage.remove(path) {
        Ok(()) => {}
        Err(error) if error.io_kind() == Some(std::io::ErrorKind::NotFound) => {}
        Err(error) => log::warn!("could not remove {}: {error}", path.display()),
    }
}

/// Resolves what an interrupted compaction left in `dir`, as Kafka's log loader does: a
/// `.cleaned` file is deleted (the swap never began), and a `<base>.log.swap` replaces
/// `<base>.log`, whose index files go with it (they are rebuilt from the new log on first
/// use). Index `.swap` files are deleted: partlog never writes them. Returns whether anything
/// changed (the directory is then fsynced).
pub(crate) fn complete_swaps(storage: &Arc<dyn Storage>, dir: &Path) -> Result<bool> {
    let mut changed = false;
    for name in storage.list(dir)? {
        let Some(parsed) = parse_segment_file_name(&name) else {
            continue;
        };
        let path = dir.join(&name);
        match (parsed.transient, parsed.kind) {
            (Some(TransientSuffix::Cleaned), _) => {
                storage.remove(&path)?;
                changed = true;
            }
            (Some(TransientSuffix::Swap), SegmentFileKind::Log) => {
                let base = parsed.base_offset;
                for kind in [
                    SegmentFileKind::Log,
                    SegmentFileKind::OffsetIndex,
                    SegmentFileKind::TimeIndex,
                ] {
                    let old = segment_file_path(dir, base, kind);
                    if storage.exists(&old)? {
                        storage.remove(&old)?;
                    }
                }
                storage.rename(&path, &segment_file_path(dir, base, SegmentFileKind::Log))?;
                log::info!(
                    "{}: completed the compaction swap of segment {base}",
                    dir.display()
                );
                changed = true;
            }
            (Some(TransientSuffix::Swap), _) => {
                storage.remove(&path)?;
                changed = true;
            }
            _ => {}
        }
    }
    if changed {
        storage.sync_dir(dir)?;
    }
    Ok(changed)
}
