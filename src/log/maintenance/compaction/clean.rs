//! Writing cleaned segments (Kafka's `Cleaner.cleanInto`): each group of segments is copied
//! batch by batch into `<base>.log.cleaned`, keeping, rebuilding or dropping each batch by the
//! key map, and fsynced.
//!
//! A `.cleaned` file is never part of the log: until `swap.rs` renames it, a crash leaves the
//! old segments whole, and open deletes it.

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::format::{
    Batch, BatchBuilder, BatchHeader, BatchView, Compression, MIN_BATCH_LENGTH, TimestampType,
    crc32c,
};
use crate::segment::{AbortedTxn, CLEANED_SUFFIX, Segment, TransactionIndex};
use crate::storage::OpenMode;

use crate::log::Shared;

use super::plan::{KeyMap, Planned};
use super::swap::transient_txn_index_path;
use super::throttle::IoThrottle;
use super::txn::{TxnTracker, last_record_of_producer, marker_type};
use super::{
    CompactionStats, READ_CHUNK_BYTES, for_each_batch, remove_quietly, transient_log_path,
};

/// What rewriting one group came to.
pub(super) enum GroupOutcome {
    /// Nothing changed: no new segment.
    Unchanged,
    /// A cleaned copy of this many bytes waits as `.cleaned`.
    Written(u64),
    /// A segment of the group left the log meanwhile (truncation or retention).
    Gone,
}

/// Builds a group's cleaned file batch by batch.
pub(super) struct GroupWriter<'f> {
    file: &'f dyn crate::storage::StorageFile,
    /// The pass's transaction state, carried from group to group.
    tracker: &'f mut TxnTracker,
    /// The last offset of the last batch the cleaned file holds so far.
    last_kept_offset: Option<i64>,
    position: u64,
    changed: bool,
    removed: u64,
    tombstones: u64,
    /// The last batch seen, when it is to go: it stays as an empty header if it turns out to
    /// be the group's last batch and nothing else of the last segment stays (its header and
    /// its bytes as they were).
    pending_drop: Option<(BatchHeader, Vec<u8>)>,
    /// Decompressed records, reused from batch to batch.
    scratch: Vec<u8>,
    /// While the group (one segment) has not changed: the bytes of the unchanged batches seen so
    /// far, not written yet. They are the file's first bytes, whole batches.
    deferred_bytes: Option<u64>,
    /// Bytes read again to copy a deferred prefix.
    bytes_reread: u64,
    /// Paces the writes (and the re-reads) with the pass's reads.
    io: &'f IoThrottle,
}

impl GroupWriter<'_> {
    /// Takes the next batch of `segment`, the group's current segment.
    fn take(
        &mut self,
        segment: &Segment,
        batch: &Batch<'_>,
        map: &mut KeyMap,
        now_ms: i64,
        horizon_ms: i64,
    ) -> Result<()> {
        let out = match batch.as_v2() {
            Some(view) => {
                let (out, removed, tombstones) = self.decide(view, map, now_ms, horizon_ms)?;
                self.removed += removed;
                self.tombstones += tombstones;
                if matches!(out, CleanedBatch::Dropped) {
                    if self.pending_drop.is_some() {
                        // The batch before did not end the group: it goes for good.
                        self.change(segment)?;
                    }
                    self.pending_drop = Some((*view.header(), batch.as_bytes().to_vec()));
                    return Ok(());
                }
                out
            }
            // Legacy batches are copied whole.
            None => CleanedBatch::Unchanged,
        };
        if self.pending_drop.take().is_some() {
            self.change(segment)?;
        }
        self.last_kept_offset = Some(batch.last_offset());
        match &out {
            CleanedBatch::Unchanged => self.keep(batch.as_bytes()),
            CleanedBatch::Rebuilt(bytes) => {
                self.change(segment)?;
                self.write(bytes)
            }
            CleanedBatch::Dropped => Ok(()),
        }
    }

    /// Kafka's `checkBatchRetention` and record filter for one v2 batch: returns its fate with
    /// the records it dropped and the tombstones among them that went because their horizon had
    /// passed.
    ///
    /// The batch holding an active producer's last record (its last data batch, or a marker of
    /// its current epoch when it has none), and the batch that ends the cleanable range, stay
    /// as empty headers when all their records go (RETAIN_EMPTY). Otherwise data of an aborted
    /// transaction goes, and so does a discardable marker whose delete horizon has passed; a
    /// discardable marker without a horizon gets one; any other batch goes when none of its
    /// records stays.
    fn decide(
        &mut self,
        view: &BatchView<'_>,
        map: &mut KeyMap,
        now_ms: i64,
        horizon_ms: i64,
    ) -> Result<(CleanedBatch, u64, u64)> {
        let header = view.header();
        let control = header.is_control();
        let discardable = if control {
            let marker = marker_type(view, &mut self.scratch)?;
            self.tracker.on_control_batch(header, marker)
        } else {
            self.tracker.on_data_batch(header)
        };
        let discard_records = if control {
            discardable
                && map
                    .policy
                    .horizon_passed(header.delete_horizon_ms(), now_ms)
        } else {
            discardable
        };
        let retain_empty = last_record_of_producer(&map.producers, header, control)
            || header.last_offset().checked_add(1) == Some(map.round_end);
        let count = u64::try_from(header.records_count).unwrap_or(0);
        if discard_records {
            if !retain_empty {
                return Ok((CleanedBatch::Dropped, count, 0));
            }
            if header.records_count == 0 {
                return Ok((CleanedBatch::Unchanged, 0, 0));
            }
            return Ok((CleanedBatch::Rebuilt(empty_header(header)), count, 0));
        }
        if control {
            if header.records_count == 0 {
                let out = if retain_empty {
                    CleanedBatch::Unchanged
                } else {
                    CleanedBatch::Dropped
                };
                return Ok((out, 0, 0));
            }
            // A marker no data of whose transaction was seen waits out `delete.retention.ms`,
            // as a tombstone does: consumers that read its transaction's data before the pass
            // still meet it.
            if discardable && header.delete_horizon_ms().is_none() {
                return Ok((
                    CleanedBatch::Rebuilt(with_delete_horizon(
                        view,
                        horizon_ms,
                        &mut self.scratch,
                    )?),
                    0,
                    0,
                ));
            }
            return Ok((CleanedBatch::Unchanged, 0, 0));
        }
        if !rewritable(view) {
            // A codec partlog does not write (gzip, snappy): copied whole.
            return Ok((CleanedBatch::Unchanged, 0, 0));
        }
        if !retain_empty && map.superseded_batch(header) {
            return Ok((CleanedBatch::Dropped, count, 0));
        }
        clean_batch(
            view,
            map,
            now_ms,
            horizon_ms,
            retain_empty,
            &mut self.scratch,
        )
    }

    /// Ends the group after its last segment, `segment`: a last batch that was to go stays as
    /// an empty header when nothing else of `segment` stayed, so that the cleaned segment ends
    /// above that segment's base (open's swap completion replaces the old segments whose base
    /// lies below the cleaned segment's end) and is never empty.
    fn finish(&mut self, segment: &Segment) -> Result<()> {
        if let Some((header, original)) = self.pending_drop.take() {
            let stays = self
                .last_kept_offset
                .is_none_or(|last| last < segment.base_offset());
            if !stays {
                return self.change(segment);
            }
            self.last_kept_offset = Some(header.last_offset());
            if header.records_count == 0 {
                // Already an empty header: it stays as it is.
                return self.keep(&original);
            }
            self.change(segment)?;
            return self.write(&empty_header(&header));
        }
        Ok(())
    }

    /// An unchanged batch: written, or counted while the group has not changed.
    fn keep(&mut self, bytes: &[u8]) -> Result<()> {
        match &mut self.deferred_bytes {
            Some(deferred) => {
                *deferred += bytes.len() as u64;
                Ok(())
            }
            None => self.write(bytes),
        }
    }

    /// The group changes: from here on every batch is written, after the unchanged batches
    /// deferred so far, which are copied from the start of `segment`.
    fn change(&mut self, segment: &Segment) -> Result<()> {
        self.changed = true;
        let Some(mut remaining) = self.deferred_bytes.take() else {
            return Ok(());
        };
        let mut buf = Vec::new();
        let mut offset = segment.base_offset();
        while remaining > 0 {
            let want = usize::try_from(remaining)
                .unwrap_or(usize::MAX)
                .min(READ_CHUNK_BYTES);
            let read = segment.read(offset, want, None, &mut buf)?;
            // Whole batches from position 0 on: the deferred bytes end on a batch boundary.
            // Other bytes there mean a truncation cut the segment (and appends refilled it)
            // since the pass read it: a race, not corruption, and the pass gives the group up.
            let Some(read) =
                read.filter(|r| r.position == self.position && r.len as u64 <= remaining)
            else {
                return Err(Error::Truncated {
                    at: segment.next_offset(),
                });
            };
            let bytes = buf.get(..read.len).unwrap_or_default();
            self.file.write_all_at(bytes, self.position)?;
            self.io.pace(2 * read.len as u64);
            self.position += read.len as u64;
            self.bytes_reread += read.len as u64;
            remaining -= read.len as u64;
            offset = read.next_offset;
        }
        Ok(())
    }

    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.file.write_all_at(bytes, self.position)?;
        self.io.pace(bytes.len() as u64);
        self.position += bytes.len() as u64;
        Ok(())
    }
}

/// What cleaning did to one batch.
pub(super) enum CleanedBatch {
    /// Copied byte for byte.
    Unchanged,
    /// Rebuilt with fewer records or a new delete horizon.
    Rebuilt(Vec<u8>),
    /// Every record went.
    Dropped,
}

/// Where a v2 batch's CRC field sits, and where the bytes it covers start.
const CRC_AT: usize = 17;

const CRC_COVERED_FROM: usize = 21;

impl Shared {
    /// Writes the cleaned copy of `group` as `<first base>.log.cleaned` and fsyncs it. The
    /// rename to `.swap` waits for [`swap_in`](Self::swap_in).
    pub(super) fn clean_group(
        &self,
        group: &[Planned],
        map: &mut KeyMap,
        tracker: &mut TxnTracker,
        now_ms: i64,
        horizon_ms: i64,
        stats: &mut CompactionStats,
    ) -> Result<GroupOutcome> {
        let Some(first) = group.first() else {
            return Ok(GroupOutcome::Unchanged);
        };
        let base = first.handle.base_offset();
        let cleaned_path = transient_log_path(&self.dir, base, CLEANED_SUFFIX);
        let txn_cleaned_path = transient_txn_index_path(&self.dir, base, CLEANED_SUFFIX);
        for path in [&cleaned_path, &txn_cleaned_path] {
            if self.storage.exists(path)? {
                // Left by an earlier pass that failed: never part of the log.
                self.storage.remove(path)?;
            }
        }
        let file = self.storage.open(&cleaned_path, OpenMode::CreateNew)?;
        tracker.kept_aborts.clear();
        let mut writer = GroupWriter {
            file: &*file,
            tracker,
            last_kept_offset: None,
            position: 0,
            // Merging segments is a change even when every batch stays.
            changed: group.len() > 1,
            removed: 0,
            tombstones: 0,
            pending_drop: None,
            scratch: Vec::new(),
            // A lone segment is written only from its first change on (the unchanged batches
            // before it are copied then): most segments of a pass, the clean ones, never change.
            deferred_bytes: (group.len() == 1).then_some(0),
            bytes_reread: 0,
            io: self.maintenance.cleaner_io(),
        };
        let result = (|| -> Result<Option<(PathBuf, Vec<AbortedTxn>)>> {
            let mut last_log_path = None;
            let mut old_aborts = Vec::new();
            for (index, planned) in group.iter().enumerate() {
                let Some(segment) = self.view.segments().pin(&planned.handle)? else {
                    return Ok(None);
                };
                // The whole segment's range, as Kafka collects it: the cleaned `.txnindex`
                // is rebuilt in full.
                writer
                    .tracker
                    .add_aborted(self.aborted_in_range(segment.base_offset(), planned.end_offset)?);
                old_aborts.extend(segment.txn_index().all()?);
                stats.bytes_read +=
                    for_each_batch(&segment, self.maintenance.cleaner_io(), |batch| {
                        writer.take(&segment, batch, map, now_ms, horizon_ms)?;
                        Ok(true)
                    })?;
                if index + 1 == group.len() {
                    writer.finish(&segment)?;
                    if writer.tracker.kept_aborts != old_aborts {
                        // The `.txnindex` loses an entry whose marker lost its data: the
                        // segment is rewritten with it.
                        writer.change(&segment)?;
                    }
                }
                last_log_path = Some(segment.log_path());
            }
            let kept_aborts = std::mem::take(&mut writer.tracker.kept_aborts);
            Ok(last_log_path.map(|path| (path, kept_aborts)))
        })();
        stats.bytes_read += writer.bytes_reread;
        let outcome = result.and_then(|done| {
            let Some((last_log_path, kept_aborts)) = done else {
                return Ok(false);
            };
            if writer.changed {
                // The `.log`'s mtime is the segment's append time for time retention: the
                // cleaned copy takes the group's last one, as Kafka's cleaner does, and the
                // fsync below makes it durable.
                let mtime_ms = match self.storage.metadata(&last_log_path) {
                    Ok(metadata) => metadata.modified_ms,
                    // A truncation or retention renamed the group's last segment after it was
                    // read: the group has left the log.
                    Err(error) if error.io_kind() == Some(std::io::ErrorKind::NotFound) => {
                        return Ok(false);
                    }
                    Err(error) => return Err(error),
                };
                match self.storage.set_mtime(&cleaned_path, mtime_ms) {
                    Ok(()) | Err(Error::Unsupported { .. }) => {}
                    Err(error) => return Err(error),
                }
                file.sync_all()?;
                if !kept_aborts.is_empty() {
                    // Swapped in with the `.log` (swap.rs): the kept ABORT markers' entries
                    // cannot be rebuilt from the cleaned `.log` without the producer state.
                    let index =
                        TransactionIndex::open(&self.storage, &txn_cleaned_path, base, true)?;
                    for txn in kept_aborts {
                        index.append(txn)?;
                    }
                    index.flush()?;
                }
            }
            Ok(true)
        });
        let (changed, written, removed, tombstones) = (
            writer.changed,
            writer.position,
            writer.removed,
            writer.tombstones,
        );
        drop(writer);
        drop(file);
        let still_there = match outcome {
            Ok(still_there) => still_there,
            Err(error) => {
                remove_quietly(&*self.storage, &cleaned_path);
                remove_quietly(&*self.storage, &txn_cleaned_path);
                return Err(error);
            }
        };
        if !still_there || !changed {
            self.storage.remove(&cleaned_path)?;
            remove_quietly(&*self.storage, &txn_cleaned_path);
            return Ok(if still_there {
                GroupOutcome::Unchanged
            } else {
                GroupOutcome::Gone
            });
        }
        stats.records_removed += removed;
        stats.tombstones_removed += tombstones;
        Ok(GroupOutcome::Written(written))
    }
}

/// The empty batch Kafka's cleaner keeps for the last batch of a producer id whose records all
/// went (RETAIN_EMPTY, `DefaultRecordBatch.writeEmptyHeader`): the same base offset, last
/// offset, producer id, epoch and base sequence, leader epoch, timestamp type, transactional
/// and control flags, no codec, the batch's max timestamp as both timestamps, and no records, so that the
/// producer's last sequence survives for idempotent dedupe.
pub(super) fn empty_header(header: &BatchHeader) -> Vec<u8> {
    /// Attribute bit 3: LogAppendTime.
    const LOG_APPEND_TIME_BIT: i16 = 1 << 3;
    /// Attribute bit 4: transactional.
    const TRANSACTIONAL_BIT: i16 = 1 << 4;
    let empty = BatchHeader {
        batch_length: MIN_BATCH_LENGTH,
        crc: 0,
        attributes: header.attributes & (LOG_APPEND_TIME_BIT | TRANSACTIONAL_BIT | CONTROL_BIT),
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

/// Whether a pass may rebuild this batch: partlog writes none, lz4 and zstd, never gzip or
/// snappy, so batches in those codecs stay as they are (and their keys stay out of the map,
/// which only ever keeps more records).
pub(super) fn rewritable(view: &BatchView<'_>) -> bool {
    matches!(
        view.header().compression(),
        Ok(Compression::None | Compression::Lz4 | Compression::Zstd)
    )
}

/// Decides which records of one v2 data batch stay (`retain_empty`: the batch stays as an empty
/// header when none does): returns the batch's fate with the records it dropped and the
/// tombstones among them that went because their horizon had passed.
pub(super) fn clean_batch(
    view: &BatchView<'_>,
    map: &mut KeyMap,
    now_ms: i64,
    horizon_ms: i64,
    retain_empty: bool,
    scratch: &mut Vec<u8>,
) -> Result<(CleanedBatch, u64, u64)> {
    let header = view.header();
    let horizon = header.delete_horizon_ms();
    let mut kept = Vec::new();
    let mut total = 0u64;
    let mut expired_tombstones = 0u64;
    let mut keeps_tombstone = false;
    for record in view.records(scratch)? {
        let record = record?;
        total += 1;
        let tombstone = map.policy.is_tombstone(&record);
        let keep = if record.offset >= map.mapped_end {
            true
        } else {
            match record.key {
                // Kafka's cleaner drops records without a key: nothing can look them up.
                None => false,
                Some(key) => match map.winner(key) {
                    // A later record of the key outside the cleaned range (in a segment the
                    // pass stopped at part-way): the older values may not go, nor may a
                    // tombstone whose older values stay.
                    Some(winner) if winner.offset >= map.mapped_end => true,
                    // Not the key's winner, unless (a record earlier passes kept, below the
                    // mapped part) the policy prefers it to the winner the map found.
                    Some(winner)
                        if record.offset != winner.offset
                            && !map.claims(key, map.version_of(&record)) =>
                    {
                        false
                    }
                    _ if tombstone
                        && !map.holds_unmapped_records
                        && map.policy.horizon_passed(horizon, now_ms) =>
                    {
                        expired_tombstones += 1;
                        false
                    }
                    _ => true,
                },
            }
        };
        if keep {
            keeps_tombstone |= tombstone;
            kept.push(record);
        }
    }
    let removed = total - kept.len() as u64;
    if kept.is_empty() {
        if retain_empty {
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

/// Attribute bit 5: a control batch.
const CONTROL_BIT: i16 = 1 << 5;

/// A copy of the marker batch `view` with `horizon_ms` as its delete horizon (Kafka rebuilds
/// it so), its record and every other field as they were.
fn with_delete_horizon(
    view: &BatchView<'_>,
    horizon_ms: i64,
    scratch: &mut Vec<u8>,
) -> Result<Vec<u8>> {
    let header = view.header();
    let mut builder = BatchBuilder::new(Compression::None)
        .base_offset(header.base_offset)
        .partition_leader_epoch(header.partition_leader_epoch)
        .producer(
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
        )
        .transactional(header.is_transactional())
        .last_offset_delta(header.last_offset_delta)
        .delete_horizon_ms(horizon_ms);
    if header.timestamp_type() == TimestampType::LogAppendTime {
        builder = builder.log_append_time(header.max_timestamp);
    }
    for record in view.records(scratch)? {
        builder.push_record_at_offset(&record?);
    }
    let mut bytes = builder.build()?;
    // The builder writes data batches only; the control bit is set here, under the CRC.
    if let Some(attributes) = bytes.get_mut(ATTRIBUTES_AT..ATTRIBUTES_AT + 2) {
        let mut value = [0u8; 2];
        value.copy_from_slice(attributes);
        attributes.copy_from_slice(&(i16::from_be_bytes(value) | CONTROL_BIT).to_be_bytes());
    }
    let crc = crc32c(bytes.get(CRC_COVERED_FROM..).unwrap_or_default());
    if let Some(slot) = bytes.get_mut(CRC_AT..CRC_COVERED_FROM) {
        slot.copy_from_slice(&crc.to_be_bytes());
    }
    Ok(bytes)
}

/// Where a v2 batch's attributes sit.
const ATTRIBUTES_AT: usize = 21;
