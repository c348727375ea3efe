//! Segment tests on the OS storage in a temporary directory.

mod mapping;

use std::path::Path;
use std::sync::Arc;

use super::*;
use crate::error::{Corruption, Error};
use crate::format::{BatchBuilder, BatchHeader, BatchView, Compression};
use crate::storage::{OpenMode, OsStorage, Storage};

const T0: i64 = 1_700_000_000_000;

fn storage() -> Arc<dyn Storage> {
    Arc::new(OsStorage::new())
}

/// One batch of `count` records at `base`, timestamps `ts, ts+1, ...`, values of `value_len` bytes.
fn batch(base: i64, count: usize, ts: i64, value_len: usize, compression: Compression) -> Vec<u8> {
    let mut builder = BatchBuilder::new(compression).base_offset(base);
    for i in 0..count {
        let key = format!("key-{}", base + i as i64);
        let value = vec![b'a' + (i % 26) as u8; value_len];
        builder.push_parts::<&str>(ts + i as i64, Some(key.as_bytes()), Some(&value), &[]);
    }
    builder.build().unwrap()
}

fn small_config() -> SegmentConfig {
    SegmentConfig {
        segment_bytes: 1 << 20,
        segment_index_bytes: 1 << 16,
        index_interval_bytes: 256,
        ..SegmentConfig::default()
    }
}

/// Appends `n` batches of 3 records each, contiguous offsets from `base`; returns their bytes.
fn fill(segment: &Segment, base: i64, n: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut offset = base;
    for i in 0..n {
        let bytes = batch(offset, 3, T0 + offset, 40, Compression::None);
        segment.append(&bytes).unwrap();
        out.push(bytes);
        offset += 3;
        let _ = i;
    }
    out
}

fn header(bytes: &[u8]) -> BatchHeader {
    BatchHeader::parse(bytes).unwrap()
}

#[test]
fn append_then_read_returns_whole_batches_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let segment = Segment::create(&storage(), dir.path(), 100, small_config(), T0).unwrap();
    let written = fill(&segment, 100, 20);
    assert_eq!(segment.next_offset(), 160);
    let total: usize = written.iter().map(Vec::len).sum();
    assert_eq!(segment.size(), total as u64);

    let mut buf = Vec::new();
    // Every offset reads back the batch that holds it, as the first batch returned.
    for (i, bytes) in written.iter().enumerate() {
        for offset in 100 + 3 * i as i64..103 + 3 * i as i64 {
            let read = segment.read(offset, 1, None, &mut buf).unwrap().unwrap();
            assert_eq!(&buf[..], &bytes[..], "offset {offset}");
            assert_eq!(read.first_offset, 100 + 3 * i as i64);
            assert_eq!(read.len, bytes.len());
        }
    }
    // A large read returns everything, byte for byte.
    let read = segment
        .read(0, usize::MAX / 2, None, &mut buf)
        .unwrap()
        .unwrap();
    assert_eq!(read.position, 0);
    assert_eq!(buf, written.concat());
    assert_eq!(read.next_offset, 160);
    // max_bytes cuts at a batch boundary, never inside a batch.
    let read = segment
        .read(100, written[0].len() + 10, None, &mut buf)
        .unwrap()
        .unwrap();
    assert_eq!(read.len, written[0].len());
    // Past the end: nothing.
    assert!(segment.read(160, 1000, None, &mut buf).unwrap().is_none());
    // The upper bound excludes batches that reach it.
    let read = segment
        .read(100, 100_000, Some(106), &mut buf)
        .unwrap()
        .unwrap();
    assert_eq!(read.next_offset, 106);
    assert!(
        segment
            .read(100, 100_000, Some(102), &mut buf)
            .unwrap()
            .is_none()
    );
}

#[test]
fn index_entries_follow_kafkas_sparse_rule_and_hold_last_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config();
    let segment = Segment::create(&storage(), dir.path(), 0, config.clone(), T0).unwrap();
    let written = fill(&segment, 0, 30);
    // Recompute Kafka's rule independently.
    let mut expected = Vec::new();
    let mut since = 0u64;
    let mut position = 0u64;
    for bytes in &written {
        if since > u64::from(config.index_interval_bytes) {
            expected.push((header(bytes).last_offset(), position as u32));
            since = 0;
        }
        since += bytes.len() as u64;
        position += bytes.len() as u64;
    }
    assert!(!expected.is_empty());
    let index = segment.offset_index();
    assert_eq!(index.entries(), expected.len());
    for (n, (offset, position)) in expected.iter().enumerate() {
        let entry = index.entry(n).unwrap();
        assert_eq!((entry.offset, entry.position), (*offset, *position));
    }
    // Time index entries: strictly increasing timestamps, each the max so far at its batch.
    let times = segment.time_index();
    assert!(times.entries() > 0);
    let last = times.last_entry().unwrap();
    assert_eq!(last.offset, expected.last().unwrap().0);
}

#[test]
fn reads_below_the_segment_and_in_gaps_return_the_next_batch() {
    let dir = tempfile::tempdir().unwrap();
    let segment = Segment::create(&storage(), dir.path(), 10, small_config(), T0).unwrap();
    let first = batch(12, 2, T0, 10, Compression::None); // offsets 12..=13: 10 and 11 are a gap
    let second = batch(50, 2, T0, 10, Compression::Lz4); // gap 14..=49
    segment.append(&first).unwrap();
    segment.append(&second).unwrap();
    let mut buf = Vec::new();
    let read = segment.read(0, 1, None, &mut buf).unwrap().unwrap();
    assert_eq!(read.first_offset, 12);
    let read = segment.read(20, 1, None, &mut buf).unwrap().unwrap();
    assert_eq!(read.first_offset, 50);
    assert_eq!(&buf[..], &second[..]);
    assert!(segment.read(52, 1, None, &mut buf).unwrap().is_none());
}

#[test]
fn append_rejects_bad_offsets_and_sealed_segments() {
    let dir = tempfile::tempdir().unwrap();
    let segment = Segment::create(&storage(), dir.path(), 100, small_config(), T0).unwrap();
    let below = batch(99, 1, T0, 1, Compression::None);
    assert!(matches!(
        segment.append(&below),
        Err(Error::InvalidBatch {
            what: Corruption::OffsetOrder { .. }
        })
    ));
    segment
        .append(&batch(100, 5, T0, 1, Compression::None))
        .unwrap();
    let overlapping = batch(104, 1, T0, 1, Compression::None);
    assert!(matches!(
        segment.append(&overlapping),
        Err(Error::InvalidBatch {
            what: Corruption::OffsetOrder { .. }
        })
    ));
    let too_far = batch(100 + i32::MAX as i64 + 1, 1, T0, 1, Compression::None);
    assert!(matches!(
        segment.append(&too_far),
        Err(Error::InvalidArgument { .. })
    ));
    let torn = batch(105, 1, T0, 1, Compression::None);
    assert!(matches!(
        segment.append(&torn[..torn.len() - 1]),
        Err(Error::InvalidBatch {
            what: Corruption::Truncated { .. }
        })
    ));
    // Nothing of the rejected appends reached the file.
    assert_eq!(segment.next_offset(), 105);
    segment.seal().unwrap();
    assert!(
        segment
            .append(&batch(105, 1, T0, 1, Compression::None))
            .is_err()
    );
}

#[test]
fn scan_reports_torn_tail_and_corruption_and_rebuilds_identical_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let storage = storage();
    let config = small_config();
    let segment = Segment::create(&storage, dir.path(), 0, config.clone(), T0).unwrap();
    let written = fill(&segment, 0, 40);
    let entries_before: Vec<_> = (0..segment.offset_index().entries())
        .map(|n| segment.offset_index().entry(n).unwrap())
        .collect();
    let report = segment.scan().unwrap();
    assert_eq!(report.first_invalid, None);
    assert_eq!(report.batches, 40);
    assert_eq!(report.next_offset, 120);
    let entries_after: Vec<_> = (0..segment.offset_index().entries())
        .map(|n| segment.offset_index().entry(n).unwrap())
        .collect();
    assert_eq!(entries_before, entries_after);
    drop(segment);

    // Tear the last batch, then flip a CRC-covered byte in batch 10.
    let log_path = segment_file_path(dir.path(), 0, SegmentFileKind::Log);
    let file = storage.open(&log_path, OpenMode::ReadWrite).unwrap();
    let total: u64 = written.iter().map(|b| b.len() as u64).sum();
    file.set_len(total - 7).unwrap();
    let segment = Segment::open(
        &storage,
        dir.path(),
        0,
        config.clone(),
        SegmentRole::Active,
        T0,
    );
    // The clean-open tail walk notices the torn batch.
    assert!(matches!(
        segment,
        Err(Error::Corrupt {
            what: Corruption::Truncated { .. },
            ..
        })
    ));
    let segment = reopen_and_scan(&storage, dir.path(), &config);
    let last_start = total - written[39].len() as u64;
    assert_eq!(
        (
            segment.1.valid_bytes,
            segment.1.first_invalid.as_ref().map(|i| i.position)
        ),
        (last_start, Some(last_start))
    );
    assert_eq!(
        segment.0.truncate_tail(last_start).unwrap(),
        written[39].len() as u64 - 7
    );
    assert_eq!(segment.0.next_offset(), 117);
    drop(segment);

    let position_10: u64 = written[..10].iter().map(|b| b.len() as u64).sum();
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, position_10 + 70).unwrap();
    file.write_all_at(&[byte[0] ^ 0x10], position_10 + 70)
        .unwrap();
    let (segment, report) = reopen_and_scan(&storage, dir.path(), &config);
    let invalid = report.first_invalid.unwrap();
    assert_eq!(invalid.position, position_10);
    assert!(matches!(invalid.what, Corruption::CrcMismatch { .. }));
    assert_eq!(segment.next_offset(), 30);
    // A read that meets the corrupt batch reports it and does not truncate.
    let mut buf = Vec::new();
    assert!(segment.read(29, 1, None, &mut buf).unwrap().is_some());
    assert!(segment.read(30, 1, None, &mut buf).unwrap().is_none());
    assert_eq!(file.len().unwrap(), total - written[39].len() as u64);
}

fn reopen_and_scan(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    config: &SegmentConfig,
) -> (Segment, ScanReport) {
    let segment = Segment::open_for_recovery(storage, dir, 0, config.clone(), T0, false).unwrap();
    let report = segment.scan().unwrap();
    (segment, report)
}

#[test]
fn truncate_to_removes_whole_batches_and_appends_continue() {
    let dir = tempfile::tempdir().unwrap();
    let segment = Segment::create(&storage(), dir.path(), 0, small_config(), T0).unwrap();
    let written = fill(&segment, 0, 30);
    // Offset 40 is inside batch 13 (offsets 39..=41): the whole batch goes.
    let kept: u64 = written[..13].iter().map(|b| b.len() as u64).sum();
    let removed = segment.truncate_to(40, 0).unwrap();
    assert_eq!(segment.size(), kept);
    assert_eq!(
        removed,
        written[13..].iter().map(|b| b.len() as u64).sum::<u64>()
    );
    assert_eq!(segment.next_offset(), 39);
    for n in 0..segment.offset_index().entries() {
        assert!(segment.offset_index().entry(n).unwrap().offset < 39);
    }
    assert!(segment.time_index().last_entry().unwrap().offset < 39);
    segment
        .append(&batch(39, 3, T0 + 39, 40, Compression::Zstd))
        .unwrap();
    let mut buf = Vec::new();
    let read = segment.read(40, 1, None, &mut buf).unwrap().unwrap();
    assert_eq!(read.first_offset, 39);
    assert_eq!(header(&buf).compression().unwrap(), Compression::Zstd);
    // Truncating past the end removes nothing.
    assert_eq!(segment.truncate_to(1000, 0).unwrap(), 0);
}

/// In a compacted segment the batch removed may follow a gap: the end must be the offset after
/// the last batch kept (what a reopen finds in the file), not the removed batch's first offset.
#[test]
fn truncate_after_a_gap_ends_after_the_last_batch_kept() {
    let dir = tempfile::tempdir().unwrap();
    let segment = Segment::create(&storage(), dir.path(), 10, small_config(), T0).unwrap();
    segment
        .append(&batch(12, 2, T0, 10, Compression::None))
        .unwrap(); // 12..=13
    segment
        .append(&batch(20, 3, T0, 10, Compression::None))
        .unwrap(); // 20..=22
    segment
        .append(&batch(30, 2, T0, 10, Compression::Lz4))
        .unwrap(); // 30..=31
    // At the first offset of a batch after a gap, inside a straddling one, and in a gap.
    assert_eq!(segment.truncation_point(30).unwrap(), 23);
    assert_eq!(segment.truncation_point(21).unwrap(), 14);
    assert_eq!(segment.truncation_point(16).unwrap(), 14);
    // At the first batch of the segment, after the gap below it: nothing is kept.
    assert_eq!(segment.truncation_point(12).unwrap(), 10);
    assert_eq!(segment.truncation_point(40).unwrap(), 32);

    segment.truncate_to(30, 0).unwrap();
    assert_eq!(segment.next_offset(), 23);
    segment.truncate_to(20, 0).unwrap();
    assert_eq!(segment.next_offset(), 14);
    segment.seal().unwrap();
    segment.flush().unwrap();
    let reopened = Segment::open(
        &storage(),
        dir.path(),
        10,
        small_config(),
        SegmentRole::Sealed,
        T0,
    )
    .unwrap();
    assert_eq!(reopened.next_offset(), 14);
    drop(reopened);
    segment.unseal().unwrap();
    segment.truncate_to(12, 0).unwrap();
    assert_eq!(segment.next_offset(), 10);
    assert_eq!(segment.size(), 0);
}

#[test]
fn reopen_after_seal_restores_state_without_scanning() {
    let dir = tempfile::tempdir().unwrap();
    let storage = storage();
    let config = small_config();
    let segment = Segment::create(&storage, dir.path(), 7, config.clone(), T0).unwrap();
    fill(&segment, 7, 25);
    let (next, size, max) = (
        segment.next_offset(),
        segment.size(),
        segment.max_timestamp(),
    );
    segment.seal().unwrap();
    segment.flush().unwrap();
    drop(segment);
    for role in [
        SegmentRole::Active,
        SegmentRole::Sealed,
        SegmentRole::ReadOnly,
    ] {
        let reopened = Segment::open(&storage, dir.path(), 7, config.clone(), role, T0).unwrap();
        assert_eq!(reopened.next_offset(), next);
        assert_eq!(reopened.size(), size);
        assert_eq!(reopened.max_timestamp(), max);
        let mut buf = Vec::new();
        assert_eq!(
            reopened
                .read(50, 1, None, &mut buf)
                .unwrap()
                .unwrap()
                .first_offset,
            49
        );
    }
}

#[test]
fn a_missing_index_is_rebuilt_and_a_wrong_one_is_repaired_on_read() {
    let dir = tempfile::tempdir().unwrap();
    let storage = storage();
    let config = small_config();
    let segment = Segment::create(&storage, dir.path(), 0, config.clone(), T0).unwrap();
    fill(&segment, 0, 30);
    let entries: Vec<_> = (0..segment.offset_index().entries())
        .map(|n| segment.offset_index().entry(n).unwrap())
        .collect();
    segment.seal().unwrap();
    drop(segment);
    let index_path = segment_file_path(dir.path(), 0, SegmentFileKind::OffsetIndex);
    storage.remove(&index_path).unwrap();
    let segment = Segment::open(
        &storage,
        dir.path(),
        0,
        config.clone(),
        SegmentRole::Active,
        T0,
    )
    .unwrap();
    let rebuilt: Vec<_> = (0..segment.offset_index().entries())
        .map(|n| segment.offset_index().entry(n).unwrap())
        .collect();
    assert_eq!(rebuilt, entries);
    segment.seal().unwrap();
    drop(segment);

    // Rewrite the index with BASE offsets instead of last offsets: a classic mistake that
    // Kafka's DumpLogSegments reports as "Mismatches in". Reads must repair it.
    let file = storage.open(&index_path, OpenMode::ReadWrite).unwrap();
    for (n, entry) in entries.iter().enumerate() {
        let relative = (entry.offset - 2) as i32; // batches hold 3 records
        file.write_all_at(&relative.to_be_bytes(), n as u64 * 8)
            .unwrap();
    }
    drop(file);
    let segment = Segment::open(&storage, dir.path(), 0, config, SegmentRole::Active, T0).unwrap();
    let mut buf = Vec::new();
    for offset in 0..90 {
        let read = segment.read(offset, 1, None, &mut buf).unwrap().unwrap();
        assert_eq!(read.first_offset, offset - offset % 3);
        assert!(BatchView::new(&buf).is_ok());
    }
    let repaired: Vec<_> = (0..segment.offset_index().entries())
        .map(|n| segment.offset_index().entry(n).unwrap())
        .collect();
    assert_eq!(repaired, entries);
}

#[test]
fn roll_conditions_follow_kafka() {
    let dir = tempfile::tempdir().unwrap();
    let config = SegmentConfig {
        segment_bytes: 4096,
        segment_index_bytes: 8 * 4,
        index_interval_bytes: 1,
        segment_ms: 1_000,
        roll_jitter_ms: 100,
        preallocate: false,
        map_sealed_reads: false,
        map_active_reads: false,
        position_cache_bytes: 1 << 20,
    };
    let segment = Segment::create(&storage(), dir.path(), 0, config, T0).unwrap();
    // Empty: never rolls, not on age and not on size (a fresh segment is the best place even
    // for a batch larger than segment.bytes; the log bounds batches by max.message.bytes).
    assert_eq!(
        segment.should_roll(100, T0 + 1_000_000, 0, T0).unwrap(),
        None
    );
    assert_eq!(segment.should_roll(5000, T0, 0, T0).unwrap(), None);
    segment
        .append(&batch(0, 1, T0, 10, Compression::None))
        .unwrap();
    let size = segment.size();
    assert_eq!(segment.should_roll(4096 - size, T0, 1, T0).unwrap(), None);
    assert_eq!(
        segment.should_roll(4096 - size + 1, T0, 1, T0).unwrap(),
        Some(RollReason::Size)
    );
    // Age counts from the first batch's timestamp against the incoming one: > 1000 - 100.
    assert_eq!(segment.should_roll(10, T0 + 900, 1, T0).unwrap(), None);
    assert_eq!(
        segment.should_roll(10, T0 + 901, 1, T0).unwrap(),
        Some(RollReason::Age)
    );
    // Relative offset overflow.
    assert_eq!(
        segment
            .should_roll(10, T0, i32::MAX as i64 + 1, T0)
            .unwrap(),
        Some(RollReason::OffsetOverflow)
    );
    // Index full: 4 offset entries fit (32 bytes); the time index (2 entries, one reserved) fills first.
    for base in 1..6 {
        segment
            .append(&batch(base, 1, T0 + base, 10, Compression::None))
            .unwrap();
    }
    assert!(matches!(
        segment.should_roll(10, T0, 7, T0).unwrap(),
        Some(RollReason::OffsetIndexFull | RollReason::TimeIndexFull)
    ));
    // The room should_roll remembers follows a truncation that empties the indexes.
    segment.truncate_to(1, 0).unwrap();
    assert_eq!(segment.offset_index().entries(), 0);
    assert_eq!(segment.should_roll(10, T0, 2, T0).unwrap(), None);
}

#[test]
fn age_without_timestamps_counts_from_creation() {
    let dir = tempfile::tempdir().unwrap();
    let config = SegmentConfig {
        segment_ms: 1_000,
        ..small_config()
    };
    let segment = Segment::create(&storage(), dir.path(), 0, config, T0).unwrap();
    segment
        .append(&batch(0, 1, -1, 10, Compression::None))
        .unwrap();
    assert_eq!(segment.should_roll(10, -1, 1, T0 + 1_000).unwrap(), None);
    assert_eq!(
        segment.should_roll(10, -1, 1, T0 + 1_001).unwrap(),
        Some(RollReason::Age)
    );
}

#[test]
fn find_offset_by_timestamp_finds_the_first_record_at_or_after() {
    let dir = tempfile::tempdir().unwrap();
    let segment = Segment::create(&storage(), dir.path(), 0, small_config(), T0).unwrap();
    fill(&segment, 0, 30); // record at offset o has timestamp T0 + 2*o - base... see fill: ts = T0 + base + i
    let mut buf = Vec::new();
    for target in [T0 - 5, T0, T0 + 1, T0 + 44, T0 + 89] {
        let found = segment
            .find_offset_by_timestamp(target, 0)
            .unwrap()
            .unwrap();
        // Independent answer: read every record.
        let mut expected = None;
        segment.read(0, usize::MAX / 2, None, &mut buf).unwrap();
        let mut scratch = Vec::new();
        let mut at = 0;
        'outer: while at < buf.len() {
            let size = header(&buf[at..]).total_size();
            let view = BatchView::new(&buf[at..at + size]).unwrap();
            for record in view.records(&mut scratch).unwrap() {
                let record = record.unwrap();
                if record.timestamp >= target {
                    expected = Some((record.timestamp, record.offset));
                    break 'outer;
                }
            }
            at += size;
        }
        assert_eq!(
            Some((found.timestamp, found.offset)),
            expected,
            "target {target}"
        );
    }
    assert!(
        segment
            .find_offset_by_timestamp(T0 + 1_000, 0)
            .unwrap()
            .is_none()
    );
    // With a start offset, earlier records do not count.
    let found = segment.find_offset_by_timestamp(T0, 50).unwrap().unwrap();
    assert_eq!(found.offset, 50);
}

#[test]
fn concurrent_readers_see_only_complete_batches() {
    let dir = tempfile::tempdir().unwrap();
    let segment = Arc::new(Segment::create(&storage(), dir.path(), 0, small_config(), T0).unwrap());
    let writer = {
        let segment = Arc::clone(&segment);
        crate::sync::thread::spawn(move || fill(&segment, 0, 300))
    };
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let segment = Arc::clone(&segment);
            crate::sync::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut seen = 0;
                while seen < 900 {
                    if let Some(read) = segment.read(seen, 4096, None, &mut buf).unwrap() {
                        assert_eq!(read.first_offset, seen);
                        // Every returned batch is whole and valid, offsets contiguous.
                        let mut at = 0;
                        while at < buf.len() {
                            let size = header(&buf[at..]).total_size();
                            let view = BatchView::new(&buf[at..at + size]).unwrap();
                            assert_eq!(view.header().base_offset, seen);
                            seen = view.header().last_offset() + 1;
                            at += size;
                        }
                    }
                }
            })
        })
        .collect();
    writer.join().unwrap();
    for reader in readers {
        reader.join().unwrap();
    }
}

#[test]
fn recovery_keeps_index_entries_below_the_recovery_point_and_scans_only_the_tail() {
    let dir = tempfile::tempdir().unwrap();
    let storage = storage();
    let config = small_config();
    let segment = Segment::create(&storage, dir.path(), 0, config.clone(), T0).unwrap();
    fill(&segment, 0, 40);
    let entries: Vec<_> = (0..segment.offset_index().entries())
        .map(|n| segment.offset_index().entry(n).unwrap())
        .collect();
    let times_before = segment.time_index().entries();
    segment.flush().unwrap();
    drop(segment);

    let recovery_point = 60;
    let segment =
        Segment::open_for_recovery(&storage, dir.path(), 0, config.clone(), T0, false).unwrap();
    let report = segment.recover_from(recovery_point).unwrap();
    let kept = entries.iter().filter(|e| e.offset < recovery_point).count();
    let last_kept = entries[kept - 1];
    assert_eq!(report.scanned_from, u64::from(last_kept.position));
    assert_eq!(report.first_invalid, None);
    assert_eq!(report.next_offset, 120);
    // The tail was re-indexed by the same rule: the result equals the original index.
    let after: Vec<_> = (0..segment.offset_index().entries())
        .map(|n| segment.offset_index().entry(n).unwrap())
        .collect();
    assert_eq!(after, entries);
    assert_eq!(segment.time_index().entries(), times_before);
    drop(segment);

    // A zero-padded index fails its check: the whole segment is scanned instead.
    let index_path = segment_file_path(dir.path(), 0, SegmentFileKind::OffsetIndex);
    let file = storage.open(&index_path, OpenMode::ReadWrite).unwrap();
    let len = file.len().unwrap();
    file.write_all_at(&[0u8; 16], len).unwrap();
    drop(file);
    let segment = Segment::open_for_recovery(&storage, dir.path(), 0, config, T0, false).unwrap();
    let report = segment.recover_from(recovery_point).unwrap();
    assert_eq!(report.scanned_from, 0);
    let rebuilt: Vec<_> = (0..segment.offset_index().entries())
        .map(|n| segment.offset_index().entry(n).unwrap())
        .collect();
    assert_eq!(rebuilt, entries);
}

#[test]
fn wrong_cached_positions_fall_back_to_the_index_walk() {
    use super::positions::RunBuilder;
    let dir = tempfile::tempdir().unwrap();
    let segment = Segment::create(&storage(), dir.path(), 100, small_config(), T0).unwrap();
    let written = fill(&segment, 100, 20);
    let mut starts = vec![0u64];
    for bytes in &written {
        starts.push(starts.last().unwrap() + bytes.len() as u64);
    }
    let size = |k: usize| starts[k + 1] - starts[k];
    let cache = segment.position_cache();
    // Each batch k at its true position and size, but named by batch k + 1's offsets: a read of
    // those offsets must not take batch k for them.
    let mut shifted = RunBuilder::new(starts[0], 103, 105, size(0)).unwrap();
    for (k, &start) in starts.iter().enumerate().take(19).skip(1) {
        let base = 103 + 3 * k as i64;
        assert!(shifted.push(start, base, base + 2, size(k)));
    }
    cache.learn(shifted, cache.generation());
    let mut buf = Vec::new();
    for (k, bytes) in written.iter().enumerate() {
        for offset in 100 + 3 * k as i64..103 + 3 * k as i64 {
            segment.read(offset, 1, None, &mut buf).unwrap().unwrap();
            assert_eq!(&buf[..], &bytes[..], "offset {offset}, shifted names");
        }
    }
    // Positions a few bytes off, sizes right: no batch header there.
    cache.forget();
    let mut off = RunBuilder::new(starts[3] + 5, 109, 111, size(3)).unwrap();
    assert!(off.push(starts[4] + 5, 112, 114, size(4)));
    cache.learn(off, cache.generation());
    for offset in 109..115 {
        segment.read(offset, 1, None, &mut buf).unwrap().unwrap();
        let k = (offset as usize - 100) / 3;
        assert_eq!(&buf[..], &written[k][..], "offset {offset}, positions off");
    }
    // The right positions are used, and give the same answers.
    cache.forget();
    for (k, bytes) in written.iter().enumerate() {
        for offset in 100 + 3 * k as i64..103 + 3 * k as i64 {
            segment.read(offset, 1, None, &mut buf).unwrap().unwrap();
            assert_eq!(&buf[..], &bytes[..], "offset {offset}, learned");
        }
    }
    assert!(cache.find(130).is_some(), "reads learned the positions");
}

/// The rebuild-once policy of timestamp lookups: a time-index entry that names the wrong batch
/// is rebuilt away and the lookup answers from the `.log`; a read-only segment, which may not
/// rebuild, reports the entry instead of answering past records it would skip.
#[test]
fn a_time_index_entry_naming_the_wrong_batch_is_rebuilt_once_or_reported_read_only() {
    let dir = tempfile::tempdir().unwrap();
    let storage = storage();
    let config = small_config();
    let segment = Segment::create(&storage, dir.path(), 0, config.clone(), T0).unwrap();
    fill(&segment, 0, 30);
    segment.seal().unwrap();
    let entries: Vec<_> = (0..segment.time_index().entries())
        .map(|n| segment.time_index().entry(n).unwrap())
        .collect();
    assert!(entries.len() > 4, "the test needs middle entries");
    drop(segment);

    // Move a middle entry's offset back one batch (still between its neighbours, so the
    // index's own checks pass): it now names a batch whose max timestamp is not its own.
    let victim = entries.len() / 2;
    let moved = entries[victim].offset - 3;
    assert!(moved > entries[victim - 1].offset);
    let time_path = segment_file_path(dir.path(), 0, SegmentFileKind::TimeIndex);
    let file = storage.open(&time_path, OpenMode::ReadWrite).unwrap();
    file.write_all_at(&(moved as i32).to_be_bytes(), victim as u64 * 12 + 8)
        .unwrap();
    drop(file);
    let target = entries[victim].timestamp;

    let read_only = Segment::open(
        &storage,
        dir.path(),
        0,
        config.clone(),
        SegmentRole::ReadOnly,
        T0,
    )
    .unwrap();
    match read_only.find_offset_by_timestamp(target, 0) {
        Err(Error::Corrupt {
            what: Corruption::BadIndexEntry(_),
            file,
            ..
        }) => assert_eq!(file, time_path),
        other => panic!("a read-only segment answered over a bad entry: {other:?}"),
    }
    assert_eq!(read_only.time_index().entry(victim).unwrap().offset, moved);
    drop(read_only);

    let segment = Segment::open(&storage, dir.path(), 0, config, SegmentRole::Sealed, T0).unwrap();
    let found = segment
        .find_offset_by_timestamp(target, 0)
        .unwrap()
        .unwrap();
    // Each record's timestamp is T0 + its offset (see `fill`).
    assert_eq!((found.timestamp, found.offset), (target, target - T0));
    let rebuilt: Vec<_> = (0..segment.time_index().entries())
        .map(|n| segment.time_index().entry(n).unwrap())
        .collect();
    assert_eq!(rebuilt, entries);
}

/// fsyncgate: after a failed sync Linux may mark the pages it could not write clean, so the
/// next sync finds nothing to write and succeeds (the simulator does the same). Every later
/// sync of the segment must fail too, or a group commit syncing it right after the flusher's
/// failed sync would count the lost bytes durable.
#[test]
fn every_sync_after_a_failed_one_fails_and_the_lost_bytes_are_not_vouched_for() {
    use crate::storage::sim::{CrashConfig, FaultOp, FaultRule, SimStorage};
    let sim = SimStorage::new(5);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let dir = Path::new("/p-0");
    storage.create_dir_all(dir).unwrap();
    storage.sync_dir(Path::new("/")).unwrap();
    let segment = Segment::create(&storage, dir, 0, small_config(), T0).unwrap();
    storage.sync_dir(dir).unwrap();
    let appended: Vec<u8> = fill(&segment, 0, 10).concat();
    sim.inject(FaultRule::fail(FaultOp::Sync, 1).on_paths_ending_with(".log"));

    assert!(matches!(segment.flush_log(), Err(Error::Io { .. })));
    // The storage itself would now report success: the hazard is real.
    segment.log.sync_data().unwrap();
    for sync in [Segment::flush_log, Segment::flush, Segment::flush_sealed] {
        assert!(matches!(sync(&segment), Err(Error::Poisoned)));
    }

    // And what those syncs would have vouched for is not on the disk.
    drop(segment);
    sim.crash_with(&CrashConfig::lose_unsynced());
    let file = storage
        .open(&dir.join("00000000000000000000.log"), OpenMode::Read)
        .unwrap();
    let mut on_disk = vec![0; appended.len()];
    let read = file.read_at(&mut on_disk, 0).unwrap();
    assert_ne!(&on_disk[..read], &appended[..]);
}

/// An append in two slices (the log's stamped header beside a producer's bytes) is the same
/// append as in one, wherever the slices meet: inside a header, at a batch boundary, inside the
/// records, or with either slice empty. The file, the indexes and the offsets all match.
#[test]
fn an_append_in_two_slices_is_the_append_of_their_concatenation() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = Vec::new();
    let mut offset = 0;
    for i in 0..5 {
        run.extend(batch(
            offset,
            3,
            T0 + offset,
            40 + 30 * i,
            Compression::None,
        ));
        offset += 3;
    }
    // A segment with earlier batches, so that index entries land inside the run.
    let earlier = batch(0, 3, T0, 300, Compression::None);
    let shift = |bytes: &[u8]| {
        let mut shifted = bytes.to_vec();
        let mut position = 0;
        while position < shifted.len() {
            let size = header(&shifted[position..]).total_size();
            let base = header(&shifted[position..]).base_offset;
            crate::format::set_base_offset(&mut shifted[position..], base + 3).unwrap();
            position += size;
        }
        shifted
    };
    let run = shift(&run);
    let new_dir = |name: String| {
        let path = dir.path().join(name);
        std::fs::create_dir_all(&path).unwrap();
        path
    };
    let reference =
        Segment::create(&storage(), &new_dir("whole".into()), 0, small_config(), T0).unwrap();
    reference.append(&earlier).unwrap();
    reference.append(&run).unwrap();
    let expected_file = std::fs::read(reference.log_path()).unwrap();
    let expected_index: Vec<_> = (0..reference.offset_index().entries())
        .map(|n| reference.offset_index().entry(n).unwrap())
        .collect();
    assert!(expected_index.len() >= 2, "{expected_index:?}");
    let splits: Vec<usize> = (0..=run.len())
        .filter(|&split| split < 130 || split % 37 == 0 || split + 3 > run.len())
        .collect();
    for split in splits {
        let subdir = new_dir(format!("split-{split}"));
        let segment = Segment::create(&storage(), &subdir, 0, small_config(), T0).unwrap();
        segment.append(&earlier).unwrap();
        let (head, tail) = run.split_at(split);
        let info = segment.append_bytes(AppendBytes::pair(head, tail)).unwrap();
        assert_eq!(
            (info.first_offset, info.last_offset, info.batches),
            (3, 17, 5)
        );
        assert_eq!(
            std::fs::read(segment.log_path()).unwrap(),
            expected_file,
            "{split}"
        );
        let index: Vec<_> = (0..segment.offset_index().entries())
            .map(|n| segment.offset_index().entry(n).unwrap())
            .collect();
        assert_eq!(index, expected_index, "{split}");
        assert_eq!(segment.next_offset(), 18);
        // A run cut short in the second slice is refused whole, and the file keeps its size.
        let short = new_dir(format!("split-{split}-short"));
        let segment = Segment::create(&storage(), &short, 0, small_config(), T0).unwrap();
        let cut = &tail[..tail.len().saturating_sub(1)];
        if head.len() + cut.len() < run.len() {
            let refused = segment.append_bytes(AppendBytes::pair(head, cut));
            assert!(
                matches!(refused, Err(Error::InvalidBatch { .. })),
                "{split}: {refused:?}"
            );
            assert_eq!(segment.size(), 0);
        }
    }
}
