//! Point reads (issue 35): `Log::read_record` and `Log::read_record_into` answer one offset
//! with the bounds, isolation and errors of `Log::read_with`, on every `ReadBound`, across
//! compaction's gaps, under `read_committed`, and in agreement with the record iterators.

use std::sync::Arc;

use partlog::unstable::ManualClock;
use partlog::{
    BatchBuilder, CleanupPolicy, Compression, Error, FlushPolicy, Isolation, Log, LogConfig,
    LogRecord, NewRecord, ReadBound, ReadOptions, RecordRead,
};

const T0: i64 = 1_700_000_000_000;

fn options(bound: ReadBound) -> ReadOptions {
    ReadOptions::default().bound(bound)
}

fn committed() -> ReadOptions {
    ReadOptions::default().isolation(Isolation::ReadCommitted)
}

fn value_of(offset: i64) -> Vec<u8> {
    format!("value {offset}").into_bytes()
}

/// Which segments a test log reads through a mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mapped {
    None,
    /// `map.sealed.segments`.
    Sealed,
    /// `map.active.segment`: every segment, the active one too.
    All,
}

/// A log of `batches` batches of `per_batch` records, each value naming its offset, over small
/// segments so that most reads land in sealed ones.
fn filled_log(dir: &std::path::Path, batches: i64, per_batch: i64, mapped: Mapped) -> Log {
    let config = LogConfig::builder_for_tests()
        .segment_bytes(4096)
        .index_interval_bytes(256)
        .map_sealed_segments(mapped == Mapped::Sealed)
        .map_active_segment(mapped == Mapped::All)
        .flush_policy(FlushPolicy::OsDecides)
        .build()
        .unwrap();
    let log = Log::open(dir, config).unwrap();
    for n in 0..batches {
        let mut builder = BatchBuilder::new(Compression::None);
        for i in 0..per_batch {
            let offset = n * per_batch + i;
            builder.push(&NewRecord::new(
                T0 + offset,
                Some(b"k"),
                Some(&value_of(offset)),
            ));
        }
        log.append_batch(&builder.build().unwrap()).unwrap();
    }
    log
}

#[test]
fn a_point_read_returns_the_record_at_every_offset_as_the_iterator_does() {
    for mapped in [Mapped::None, Mapped::Sealed, Mapped::All] {
        let dir = tempfile::tempdir().unwrap();
        let log = filled_log(dir.path(), 60, 7, mapped);
        let all: Vec<LogRecord> = log
            .records(0, ReadBound::LogEnd)
            .collect::<partlog::Result<_>>()
            .unwrap();
        assert_eq!(all.len(), 420);
        let mut read = RecordRead::new();
        // Backwards and forwards, so that neither the resume point nor the cache decides.
        for offset in (0..420).rev().chain(0..420) {
            let owned = log.read_record(offset, ReadOptions::default()).unwrap();
            assert_eq!(owned.as_ref(), Some(&all[offset as usize]), "at {offset}");
            let borrowed = log
                .read_record_into(offset, ReadOptions::default(), &mut read)
                .unwrap()
                .expect("a record");
            assert_eq!(borrowed.offset, offset);
            assert_eq!(borrowed.value, Some(&value_of(offset)[..]));
            assert_eq!(borrowed.timestamp, T0 + offset);
        }
    }
}

#[test]
fn a_point_read_keeps_the_errors_of_read_with() {
    let dir = tempfile::tempdir().unwrap();
    let log = filled_log(dir.path(), 10, 3, Mapped::None);
    // At the log end: nothing yet, as an empty read.
    assert_eq!(log.read_record(30, ReadOptions::default()).unwrap(), None);
    assert!(matches!(
        log.read_record(31, ReadOptions::default()),
        Err(Error::OffsetOutOfRange { requested: 31, .. })
    ));
    assert!(matches!(
        log.read_record(-1, ReadOptions::default()),
        Err(Error::OffsetOutOfRange { requested: -1, .. })
    ));
    log.delete_records_before(6).unwrap();
    assert!(matches!(
        log.read_record(5, ReadOptions::default()),
        Err(Error::OffsetOutOfRange {
            requested: 5,
            start: 6,
            ..
        })
    ));
    assert!(
        log.read_record(6, ReadOptions::default())
            .unwrap()
            .is_some()
    );
    // Below a truncation's cut: Truncated, as a read says.
    log.truncate_to(12).unwrap();
    assert!(matches!(
        log.read_record(20, ReadOptions::default()),
        Err(Error::Truncated { at: 12 })
    ));
    assert_eq!(log.read_record(12, ReadOptions::default()).unwrap(), None);
    assert!(
        log.read_record(11, ReadOptions::default())
            .unwrap()
            .is_some()
    );
}

#[test]
fn a_point_read_stops_at_every_read_bound() {
    for mapped in [Mapped::None, Mapped::All] {
        point_reads_stop_at_every_read_bound(mapped);
    }
}

/// Ten batches of three in one 4 KiB segment: the active one, mapped with `Mapped::All`.
fn point_reads_stop_at_every_read_bound(mapped: Mapped) {
    let dir = tempfile::tempdir().unwrap();
    let log = filled_log(dir.path(), 10, 3, mapped);
    let end = log.log_end_offset();
    assert_eq!(end, 30);
    // LogEnd: everything below the end.
    assert!(
        log.read_record(29, options(ReadBound::LogEnd))
            .unwrap()
            .is_some()
    );
    // HighWatermark: the log end until it is first set, then below it.
    assert!(
        log.read_record(29, options(ReadBound::HighWatermark))
            .unwrap()
            .is_some()
    );
    // Whole batches only, as a read returns them: a bound inside a batch hides all of it.
    log.set_high_watermark(13).unwrap();
    assert!(
        log.read_record(11, options(ReadBound::HighWatermark))
            .unwrap()
            .is_some()
    );
    for offset in [12, 13, 14, 29] {
        assert_eq!(
            log.read_record(offset, options(ReadBound::HighWatermark))
                .unwrap(),
            None,
            "above the high watermark at {offset}"
        );
        assert!(
            log.read_record(offset, options(ReadBound::LogEnd))
                .unwrap()
                .is_some()
        );
    }
    // Durable: below the durable offset only.
    let durable = log.durable_offset();
    assert!(durable < end, "the active segment's tail is not synced yet");
    assert_eq!(
        log.read_record(end - 1, options(ReadBound::Durable))
            .unwrap(),
        None
    );
    log.sync().unwrap();
    assert_eq!(log.durable_offset(), end);
    assert!(
        log.read_record(end - 1, options(ReadBound::Durable))
            .unwrap()
            .is_some()
    );
}

#[test]
fn a_point_read_in_a_compacted_log_finds_nothing_in_a_gap() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let config = LogConfig::builder_for_tests()
        .segment_bytes(64 * 1024)
        .segment_ms(1_000)
        .cleanup_policy(CleanupPolicy::COMPACT)
        .clock(Arc::clone(&clock) as Arc<dyn partlog::unstable::Clock>)
        .build()
        .unwrap();
    let log = Log::open(dir.path(), config).unwrap();
    let keys = ["a", "b", "a", "c", "b", "a", "d"];
    for (n, key) in keys.iter().enumerate() {
        clock.advance(1_001);
        let value = format!("{key}{n}");
        let now = partlog::unstable::Clock::now_ms(&*clock);
        log.append(&[NewRecord::new(
            now,
            Some(key.as_bytes()),
            Some(value.as_bytes()),
        )])
        .unwrap();
    }
    let stats = log.compact().unwrap();
    assert!(stats.records_removed > 0);
    let kept: Vec<i64> = log
        .records(0, ReadBound::LogEnd)
        .map(|r| r.unwrap().offset)
        .collect();
    assert_eq!(kept, [3, 4, 5, 6]);
    let mut read = RecordRead::new();
    for offset in 0..7 {
        let found = log
            .read_record_into(offset, ReadOptions::default(), &mut read)
            .unwrap()
            .map(|record| (record.offset, record.value.map(<[u8]>::to_vec)));
        if kept.contains(&offset) {
            let value = format!("{}{offset}", keys[offset as usize]).into_bytes();
            assert_eq!(found, Some((offset, Some(value))), "at {offset}");
        } else {
            assert_eq!(found, None, "offset {offset} was compacted away");
        }
    }
}

/// A batch of one record for `producer`, transactional or not.
fn producer_batch(producer: i64, sequence: i32, transactional: bool, value: &[u8]) -> Vec<u8> {
    let mut builder = BatchBuilder::new(Compression::None)
        .producer(producer, 0, sequence)
        .transactional(transactional);
    builder.push(&NewRecord::new(T0, None, Some(value)));
    builder.build().unwrap()
}

#[test]
fn a_point_read_under_read_committed_skips_aborted_markers_and_open_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    // 0: aborted data of producer 4; 1: plain; 2: ABORT of 4; 3: committed data of 5;
    // 4: COMMIT of 5; 5: open transaction of 6; 6: plain, above the LSO.
    log.append_batch(&producer_batch(4, 0, true, b"aborted"))
        .unwrap();
    log.append(&[NewRecord::new(T0, None, Some(b"plain"))])
        .unwrap();
    log.abort_transaction(4, 0).unwrap();
    log.append_batch(&producer_batch(5, 0, true, b"committed"))
        .unwrap();
    log.commit_transaction(5, 0).unwrap();
    log.append_batch(&producer_batch(6, 0, true, b"open"))
        .unwrap();
    log.append(&[NewRecord::new(T0, None, Some(b"late"))])
        .unwrap();
    assert_eq!(log.last_stable_offset(), 5);
    let value = |offset, options| {
        log.read_record(offset, options)
            .unwrap()
            .and_then(|record| record.value)
    };
    let uncommitted = ReadOptions::default();
    assert_eq!(value(0, uncommitted), Some(b"aborted".to_vec()));
    assert_eq!(value(0, committed()), None, "aborted data");
    assert_eq!(value(1, committed()), Some(b"plain".to_vec()));
    assert_eq!(value(2, uncommitted), None, "a control record");
    assert_eq!(value(2, committed()), None);
    assert_eq!(value(3, committed()), Some(b"committed".to_vec()));
    assert_eq!(value(4, committed()), None);
    assert_eq!(value(5, uncommitted), Some(b"open".to_vec()));
    assert_eq!(value(5, committed()), None, "at the last stable offset");
    assert_eq!(value(6, committed()), None, "above the last stable offset");
    assert_eq!(value(6, uncommitted), Some(b"late".to_vec()));
    // The committed iterator agrees with the point reads.
    let iterated: Vec<i64> = log
        .committed_records(0, ReadBound::LogEnd)
        .map(|r| r.unwrap().offset)
        .collect();
    let pointed: Vec<i64> = (0..7)
        .filter(|&offset| log.read_record(offset, committed()).unwrap().is_some())
        .collect();
    assert_eq!(pointed, iterated);
}

/// A point read racing retention (the log start moving up, whole segments deleted) gets the
/// record written at its offset or `OffsetOutOfRange` below the new start: never `Corrupt`,
/// never a missing file.
#[test]
fn point_reads_racing_retention_get_the_record_or_out_of_range() {
    for mapped in [Mapped::None, Mapped::Sealed, Mapped::All] {
        let dir = tempfile::tempdir().unwrap();
        let log = filled_log(dir.path(), 400, 2, mapped);
        let end = log.log_end_offset();
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            let readers: Vec<_> = (0..2u64)
                .map(|seed| {
                    let (log, done) = (&log, &done);
                    scope.spawn(move || {
                        let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ seed;
                        let mut read = RecordRead::new();
                        let mut found = 0u32;
                        while !done.load(std::sync::atomic::Ordering::Acquire) || found == 0 {
                            state ^= state << 13;
                            state ^= state >> 7;
                            state ^= state << 17;
                            let offset = (state % end as u64) as i64;
                            match log.read_record_into(offset, ReadOptions::default(), &mut read) {
                                Ok(Some(record)) => {
                                    assert_eq!(record.offset, offset);
                                    assert_eq!(record.value, Some(&value_of(offset)[..]));
                                    found += 1;
                                }
                                Ok(None) => panic!("nothing at {offset}, below the end"),
                                Err(Error::OffsetOutOfRange {
                                    requested, start, ..
                                }) if requested < start => {}
                                Err(error) => panic!("read_record({offset}) failed: {error}"),
                            }
                        }
                    })
                })
                .collect();
            for start in (0..end - 10).step_by(37) {
                log.delete_records_before(start).unwrap();
                log.enforce_retention().unwrap();
            }
            done.store(true, std::sync::atomic::Ordering::Release);
            for reader in readers {
                reader.join().expect("a reader panicked");
            }
        });
    }
}

/// A kept copy is used only under the truncation sequence it was read under: after a
/// truncation below its offset and new appends there, a point read returns the new record, not
/// the copy (and before the appends, `Truncated` or nothing, never the copy).
#[test]
fn a_kept_copy_is_not_used_after_a_truncation_rewrote_its_offset() {
    for mapped in [Mapped::None, Mapped::Sealed, Mapped::All] {
        let dir = tempfile::tempdir().unwrap();
        let cache = partlog::VerifiedBatchCache::new(1 << 20);
        let mut config = LogConfig::builder_for_tests()
            .segment_bytes(4096)
            .index_interval_bytes(256)
            .map_sealed_segments(mapped == Mapped::Sealed)
            .map_active_segment(mapped == Mapped::All)
            .build()
            .unwrap();
        config.verified_batch_cache = Arc::clone(&cache);
        let log = Log::open(dir.path(), config).unwrap();
        let append = |first: i64, count: i64, tag: &str| {
            for offset in first..first + count {
                let value = format!("{tag} {offset}");
                log.append(&[NewRecord::new(T0, None, Some(value.as_bytes()))])
                    .unwrap();
            }
        };
        append(0, 100, "old");
        let value = |offset| {
            log.read_record(offset, ReadOptions::default())
                .map(|record| record.and_then(|r| r.value))
        };
        for offset in 0..100 {
            assert_eq!(
                value(offset).unwrap(),
                Some(format!("old {offset}").into_bytes())
            );
        }
        assert!(cache.resident_bytes() > 0);
        log.truncate_to(30).unwrap();
        assert!(matches!(value(60), Err(Error::Truncated { at: 30 })));
        assert_eq!(value(30).unwrap(), None);
        append(30, 70, "new");
        for offset in 0..100 {
            let tag = if offset < 30 { "old" } else { "new" };
            assert_eq!(
                value(offset).unwrap(),
                Some(format!("{tag} {offset}").into_bytes()),
                "at {offset} ({mapped:?})"
            );
        }
    }
}

/// Flips one bit of the value `value` in the `.log` files of `dir` (it is written once).
fn flip_value_bit(dir: &std::path::Path, value: &[u8]) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("log") {
            continue;
        }
        let mut bytes = std::fs::read(&path).unwrap();
        if let Some(at) = bytes.windows(value.len()).position(|w| w == value) {
            bytes[at + value.len() - 1] ^= 0x01;
            std::fs::write(&path, &bytes).unwrap();
            return;
        }
    }
    panic!("no value {value:?} in {}", dir.display());
}

/// Issue 35's doorkeeper: once the verified-batch cache is full, a point read keeps a batch's
/// copy only on its second read. Seen through a bit flipped in the file after the reads: a
/// batch read once was not kept (the next read checks the file again and reports the damage),
/// one read twice was (the next read answers from the checked copy, never from the flipped
/// bytes).
#[test]
fn a_full_cache_keeps_a_batch_on_its_second_point_read_only() {
    let dir = tempfile::tempdir().unwrap();
    let cache = partlog::VerifiedBatchCache::new(8 << 10);
    let mut config = LogConfig::builder_for_tests()
        .index_interval_bytes(256)
        .build()
        .unwrap();
    config.verified_batch_cache = Arc::clone(&cache);
    let log = Log::open(dir.path(), config).unwrap();
    for offset in 0..200 {
        log.append(&[NewRecord::new(T0, None, Some(&value_of(offset)))])
            .unwrap();
    }
    let read = |offset| log.read_record(offset, ReadOptions::default());
    // Fills the cache: batches read while it has room are kept at once.
    for offset in 0..100 {
        read(offset).unwrap();
    }
    let full = cache.resident_bytes();
    assert!(
        full > cache.limit_bytes() * 9 / 10,
        "{full} of {}",
        cache.limit_bytes()
    );
    // Read once while full: not kept, so the flipped file bytes are read and rejected.
    assert_eq!(
        read(150).unwrap().and_then(|r| r.value),
        Some(value_of(150))
    );
    flip_value_bit(dir.path(), &value_of(150));
    assert!(
        matches!(read(150), Err(Error::Corrupt { .. })),
        "a batch read once into a full cache is read from the file again"
    );
    // Read twice while full: kept, and the copy is what passed the CRC.
    for _ in 0..2 {
        assert_eq!(
            read(160).unwrap().and_then(|r| r.value),
            Some(value_of(160))
        );
    }
    flip_value_bit(dir.path(), &value_of(160));
    assert_eq!(
        read(160).unwrap().and_then(|r| r.value),
        Some(value_of(160)),
        "the second read kept the checked copy"
    );
    assert!(cache.resident_bytes() <= cache.limit_bytes());
}

/// Issue 35's record tables: batches of many records whose records section is under 64 KiB
/// (two-byte entries) and over it (four-byte entries), each kept with every fourth record's
/// start; every offset, read twice in a scattered order (the first read of a batch keeps its
/// copy and finds its record through the table, the later ones hit it), is the iterator's
/// record.
#[test]
fn point_reads_through_record_tables_of_both_widths_return_every_record() {
    let dir = tempfile::tempdir().unwrap();
    let cache = partlog::VerifiedBatchCache::new(16 << 20);
    let mut config = LogConfig::builder_for_tests().build().unwrap();
    config.verified_batch_cache = Arc::clone(&cache);
    let log = Log::open(dir.path(), config).unwrap();
    // 37 records of 40 B (a narrow table), then 101 of 1 KiB (over 64 KiB: a wide one).
    for (records, value_size) in [(37, 40), (101, 1024)] {
        let mut builder = BatchBuilder::new(Compression::None);
        for n in 0..records {
            builder.push(&NewRecord::new(
                T0 + n,
                None,
                Some(&vec![n as u8; value_size]),
            ));
        }
        log.append_batch(&builder.build().unwrap()).unwrap();
    }
    let all: Vec<LogRecord> = log
        .records(0, ReadBound::LogEnd)
        .collect::<partlog::Result<_>>()
        .unwrap();
    assert_eq!(all.len(), 138);
    let mut read = RecordRead::new();
    for round in 0..2 {
        for step in 0..138 {
            let offset = (step * 53 + round * 7) % 138;
            let found = log
                .read_record_into(offset, ReadOptions::default(), &mut read)
                .unwrap()
                .expect("a record");
            let expected = &all[offset as usize];
            assert_eq!(found.offset, expected.offset);
            assert_eq!(found.value, expected.value.as_deref(), "at {offset}");
            assert_eq!(found.timestamp, expected.timestamp);
        }
    }
    assert!(cache.resident_bytes() > 100 << 10, "both batches were kept");
}
