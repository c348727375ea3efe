//! Retention (ARCHITECTURE.md §3, invariant 7; §8): the three rules with the manual clock, the roll
//! of an active segment that qualifies, readers of deleted segments, the `*.deleted` files, reopen,
//! crashes at every operation of a pass on the simulator, and the maintenance thread.
//!
//! Every segment here holds exactly [`PER_SEGMENT`] one-record batches of [`BATCH`] bytes, so the
//! tests can name the segments by offset: `[0, 4)`, `[4, 8)`, ... No test sleeps to let time
//! pass: the log's clock is a `ManualClock`, and the simulator takes its mtimes from the same
//! clock.

#![cfg(feature = "sim")]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "common/fenced.rs"]
mod fenced_storage;
use fenced_storage::fenced_config;

use partlog::unstable::sim::{CrashConfig, FaultOp, FaultRule};
use partlog::unstable::{
    ManualClock, OpenMode, SegmentFileKind, SimStorage, Storage, parse_segment_file_name,
    segment_file_path,
};
use partlog::{
    BatchBuilder, CleanupPolicy, Compression, Error, Log, LogConfig, LogConfigBuilder, NewRecord,
    ReadBound, RecoveryMode, RetentionRule,
};

const T0: i64 = 1_700_000_000_000;
const HOUR: i64 = 60 * 60 * 1000;
const DAY: i64 = 24 * HOUR;
/// One-record batches per segment.
const PER_SEGMENT: i64 = 4;

fn value(offset: i64) -> Vec<u8> {
    format!("value of offset {offset:>6} {}", "v".repeat(200)).into_bytes()
}

fn record(offset: i64, timestamp: i64) -> NewRecord {
    let key = format!("key-{:>6}", offset % 5);
    NewRecord::new(timestamp, Some(key.as_bytes()), Some(&value(offset)))
}

/// The size of every batch the tests append (offsets and timestamps do not change it).
fn batch_bytes() -> u64 {
    let mut builder = BatchBuilder::new(Compression::None);
    builder.push(&record(0, T0));
    builder.build().unwrap().len() as u64
}

/// A config whose segments hold exactly `PER_SEGMENT` batches, on `storage` and `clock`, with
/// nothing deleted unless a test says so.
fn builder(storage: Arc<dyn Storage>, clock: &Arc<ManualClock>) -> LogConfigBuilder {
    let batch = batch_bytes();
    LogConfig::builder_for_tests()
        .segment_bytes(u32::try_from(PER_SEGMENT as u64 * batch + batch / 2).unwrap())
        .index_interval_bytes(256)
        .retention_ms(-1)
        .retention_bytes(-1)
        .message_timestamp_after_max_ms(i64::MAX)
        .recovery_mode(RecoveryMode::Fail)
        .storage(storage)
        .clock(Arc::clone(clock) as Arc<dyn partlog::unstable::Clock>)
}

/// A simulator whose mtimes come from `clock`, as a real file system's come from the real one.
fn simulator(seed: u64, clock: &Arc<ManualClock>) -> SimStorage {
    SimStorage::new(seed).with_clock(Arc::clone(clock) as Arc<dyn partlog::unstable::Clock>)
}

/// Appends one batch per timestamp; the first gets offset `log.log_end_offset()`.
fn append(log: &Log, timestamps: &[i64]) {
    for &timestamp in timestamps {
        let offset = log.log_end_offset();
        let info = log.append(&[record(offset, timestamp)]).unwrap();
        assert_eq!(info.first_offset, offset);
        assert_eq!(info.bytes as u64, batch_bytes());
    }
}

/// The bases of the segments in `dir` (live `.log` files only).
fn segment_bases(storage: &dyn Storage, dir: &Path) -> Vec<i64> {
    let mut bases: Vec<i64> = storage
        .list(dir)
        .unwrap()
        .iter()
        .filter_map(|name| parse_segment_file_name(name))
        .filter(|parsed| parsed.transient.is_none() && parsed.kind == SegmentFileKind::Log)
        .map(|parsed| parsed.base_offset)
        .collect();
    bases.sort_unstable();
    bases
}

/// The names in `dir` that end with `.deleted`.
fn deleted_files(storage: &dyn Storage, dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = storage
        .list(dir)
        .unwrap()
        .into_iter()
        .filter(|name| name.ends_with(".deleted"))
        .collect();
    names.sort();
    names
}

/// Checks that the log holds exactly the offsets `[start, end)`, each with its value.
fn check_records(log: &Log, start: i64, end: i64) {
    assert_eq!(
        (log.log_start_offset(), log.log_end_offset()),
        (start, end),
        "(start, end) of {}",
        log.dir().display()
    );
    let records = log
        .records(start, ReadBound::LogEnd)
        .collect::<partlog::Result<Vec<_>>>()
        .unwrap();
    let offsets: Vec<i64> = records.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, (start..end).collect::<Vec<_>>());
    for record in &records {
        assert_eq!(record.value.as_deref(), Some(&value(record.offset)[..]));
    }
    if start > 0 {
        assert!(matches!(
            log.read(start - 1, 1 << 20, ReadBound::LogEnd),
            Err(Error::OffsetOutOfRange { requested, .. }) if requested == start - 1
        ));
    }
}

/// Fills segments `[0, 4)`, `[4, 8)`, `[8, 12)` with records stamped T0, T0 + 1 day and
/// T0 + 2 days, appended a day apart, and starts the active segment `[12, 13)` at T0 + 3 days.
/// Each sealed segment is rolled (its mtime set) a day after its records were written. Returns
/// once everything is durable, so that no sync in flight holds a sealed segment.
fn three_days(log: &Log, clock: &ManualClock) {
    for day in 0..3 {
        clock.set(T0 + day * DAY);
        append(log, &[T0 + day * DAY; PER_SEGMENT as usize]);
    }
    clock.set(T0 + 3 * DAY);
    append(log, &[T0 + 3 * DAY]);
    log.wait_durable(12).unwrap();
    assert_eq!(log.log_end_offset(), 13);
}

#[test]
fn time_rule_deletes_old_segments_oldest_first_then_rolls_the_active_one() {
    let clock = Arc::new(ManualClock::new(T0));
    let sim = simulator(1, &clock);
    let dir = Path::new("/logs/time-0");
    let config = builder(Arc::new(sim.clone()), &clock)
        .retention_ms(5 * DAY / 2)
        .build()
        .unwrap();
    let log = Log::open(dir, config.clone()).unwrap();
    three_days(&log, &clock);
    assert_eq!(segment_bases(&sim, dir), [0, 4, 8, 12]);
    // The sealed segments' mtimes are their roll times on the log's clock, not their last writes.
    for (base, rolled_at) in [(0, T0 + DAY), (4, T0 + 2 * DAY), (8, T0 + 3 * DAY)] {
        let path = segment_file_path(dir, base, SegmentFileKind::Log);
        assert_eq!(sim.metadata(&path).unwrap().modified_ms, rolled_at);
    }

    // Now T0 + 3 days: only [0, 4) is older than 2.5 days.
    let report = log.enforce_retention().unwrap();
    assert_eq!(report.segments_deleted(), 1);
    assert_eq!(report.segments_deleted_by(RetentionRule::Time), 1);
    assert_eq!(report.bytes_deleted(), PER_SEGMENT as u64 * batch_bytes());
    assert_eq!(
        (report.deleted[0].base_offset, report.deleted[0].end_offset),
        (0, 4)
    );
    assert!(!report.rolled_active_segment);
    assert_eq!(report.log_start_offset, 4);
    check_records(&log, 4, 13);
    assert_eq!(segment_bases(&sim, dir), [4, 8, 12]);
    // No reader pinned it: its files go when the pass reaps, or, if a sync in flight held the
    // segment a moment longer, at the flusher's next tick.
    wait_until("[0, 4)'s files are gone", || {
        deleted_files(&sim, dir).is_empty()
    });

    // Nothing more is due: a second pass deletes nothing.
    assert_eq!(log.enforce_retention().unwrap().segments_deleted(), 0);

    // T0 + 4.6 days: [4, 8) and [8, 12) go, the active segment (T0 + 3 days) stays.
    clock.set(T0 + 46 * DAY / 10);
    let report = log.enforce_retention().unwrap();
    let bases: Vec<i64> = report.deleted.iter().map(|d| d.base_offset).collect();
    assert_eq!(bases, [4, 8]);
    assert_eq!(report.log_start_offset, 12);
    check_records(&log, 12, 13);

    // T0 + 6 days: the active segment qualifies too. The log rolls, then deletes it.
    clock.set(T0 + 6 * DAY);
    let report = log.enforce_retention().unwrap();
    assert!(report.rolled_active_segment);
    assert_eq!(report.segments_deleted_by(RetentionRule::Time), 1);
    assert_eq!(
        (report.deleted[0].base_offset, report.deleted[0].end_offset),
        (12, 13)
    );
    assert_eq!(report.log_start_offset, 13);
    check_records(&log, 13, 13);
    assert_eq!(segment_bases(&sim, dir), [13]);
    assert_eq!(log.stats().segments, 1);
    assert!(log.read(13, 1 << 20, ReadBound::LogEnd).unwrap().is_empty());
    // The empty active segment is never deleted, and appends go on at the end.
    clock.set(T0 + 60 * DAY);
    assert_eq!(log.enforce_retention().unwrap().segments_deleted(), 0);
    append(&log, &[T0 + 60 * DAY]);
    check_records(&log, 13, 14);
    log.close().unwrap();
    drop(log);

    // The new start survives a reopen.
    let log = Log::open(dir, config).unwrap();
    check_records(&log, 13, 14);
}

#[test]
fn a_far_future_timestamp_pins_a_segment_only_for_the_skew() {
    let clock = Arc::new(ManualClock::new(T0));
    let far_future = T0 + 365 * DAY;
    for (skew, capped) in [(HOUR, true), (400 * DAY, false)] {
        let sim = simulator(2, &clock);
        let dir = Path::new("/logs/future-0");
        clock.set(T0);
        let log = Log::open(
            dir,
            builder(Arc::new(sim.clone()), &clock)
                .retention_ms(DAY)
                .retention_timestamp_skew_ms(skew)
                .build()
                .unwrap(),
        )
        .unwrap();
        // [0, 4) holds one record stamped a year ahead, first (a later one would roll the
        // segment on `segment.ms`, as in Kafka); it is rolled at T0 + 1 hour.
        append(&log, &[far_future, T0, T0, T0]);
        clock.set(T0 + HOUR);
        append(&log, &[T0 + HOUR; PER_SEGMENT as usize]);
        append(&log, &[T0 + HOUR]);
        assert_eq!(segment_bases(&sim, dir), [0, 4, 8]);

        // With a one-hour skew, [0, 4) ages from its roll time plus an hour, T0 + 2 hours: at
        // T0 + 1 day + 2 hours it is exactly a day old, not older. The walk stops at it, though
        // [4, 8) and the active segment (stamped and written at T0 + 1 hour) are older.
        clock.set(T0 + DAY + 2 * HOUR);
        let report = log.enforce_retention().unwrap();
        assert_eq!(report.segments_deleted(), 0, "skew {skew}");

        clock.set(T0 + DAY + 2 * HOUR + 1);
        let report = log.enforce_retention().unwrap();
        if capped {
            // One millisecond later it goes, and everything after it (the active segment after
            // a roll).
            assert_eq!(report.segments_deleted_by(RetentionRule::Time), 3);
            assert!(report.rolled_active_segment);
            assert_eq!(report.log_start_offset, 9);
            assert_eq!(segment_bases(&sim, dir), [9]);
        } else {
            // With a 400-day skew the year-ahead timestamp wins, as in Kafka: the segment stays,
            // and so does every later one, since the walk stops at it.
            assert_eq!(report.segments_deleted(), 0);
            clock.set(T0 + 300 * DAY);
            assert_eq!(log.enforce_retention().unwrap().segments_deleted(), 0);
            assert_eq!(segment_bases(&sim, dir), [0, 4, 8]);
        }
    }
}

#[test]
fn a_segment_without_timestamps_ages_from_its_mtime() {
    let clock = Arc::new(ManualClock::new(T0));
    let sim = simulator(3, &clock);
    let dir = Path::new("/logs/no-timestamps-0");
    let log = Log::open(
        dir,
        builder(Arc::new(sim.clone()), &clock)
            .retention_ms(DAY)
            .build()
            .unwrap(),
    )
    .unwrap();
    // -1 is "no timestamp"; the segment is rolled at T0 + 10 hours. The active segment is
    // written (and stamped) last at T0 + 20 hours.
    append(&log, &[-1; PER_SEGMENT as usize]);
    clock.set(T0 + 10 * HOUR);
    append(&log, &[T0 + 10 * HOUR]);
    clock.set(T0 + 20 * HOUR);
    append(&log, &[T0 + 20 * HOUR]);
    clock.set(T0 + 10 * HOUR + DAY);
    assert_eq!(log.enforce_retention().unwrap().segments_deleted(), 0);
    clock.set(T0 + 10 * HOUR + DAY + 1);
    let report = log.enforce_retention().unwrap();
    assert_eq!(report.segments_deleted_by(RetentionRule::Time), 1);
    assert_eq!(report.log_start_offset, PER_SEGMENT);
}

#[test]
fn size_rule_keeps_the_log_within_one_segment_of_the_limit() {
    let clock = Arc::new(ManualClock::new(T0));
    let sim = simulator(4, &clock);
    let dir = Path::new("/logs/size-0");
    let batch = batch_bytes();
    let segment = PER_SEGMENT as u64 * batch;
    // Five sealed segments and one batch in the active one: 21 batches.
    let fill = |log: &Log| append(log, &[T0; 5 * PER_SEGMENT as usize + 1]);
    let log = Log::open(
        dir,
        builder(Arc::new(sim.clone()), &clock)
            .retention_bytes(i64::try_from(10 * batch).unwrap())
            .build()
            .unwrap(),
    )
    .unwrap();
    fill(&log);
    assert_eq!(segment_bases(&sim, dir), [0, 4, 8, 12, 16, 20]);
    // 21 batches against a limit of 10: an excess of 11 batches covers two whole segments
    // (11 - 4 - 4 = 3) but not a third (3 - 4 < 0). The log stays above the limit, by less than
    // one segment.
    let report = log.enforce_retention().unwrap();
    assert_eq!(report.segments_deleted_by(RetentionRule::Size), 2);
    assert_eq!(report.bytes_deleted_by(RetentionRule::Size), 2 * segment);
    assert_eq!(report.log_start_offset, 8);
    assert_eq!(segment_bases(&sim, dir), [8, 12, 16, 20]);
    check_records(&log, 8, 21);
    // Nothing changed, so a second pass deletes nothing.
    assert_eq!(log.enforce_retention().unwrap().segments_deleted(), 0);
    log.close().unwrap();
    drop(log);

    // With a limit of 0 every byte is excess: the active segment goes too, after a roll.
    let log = Log::open(
        dir,
        builder(Arc::new(sim.clone()), &clock)
            .retention_bytes(0)
            .build()
            .unwrap(),
    )
    .unwrap();
    let report = log.enforce_retention().unwrap();
    assert_eq!(report.segments_deleted_by(RetentionRule::Size), 4);
    assert!(report.rolled_active_segment);
    assert_eq!(report.bytes_deleted(), 3 * segment + batch);
    check_records(&log, 21, 21);
    assert_eq!(segment_bases(&sim, dir), [21]);
}

#[test]
fn start_offset_rule_applies_whatever_the_cleanup_policy() {
    let clock = Arc::new(ManualClock::new(T0));
    for policy in [
        CleanupPolicy::COMPACT,
        CleanupPolicy::NONE,
        CleanupPolicy::DELETE,
    ] {
        let sim = simulator(5, &clock);
        let dir = Path::new("/logs/start-0");
        let log = Log::open(
            dir,
            builder(Arc::new(sim.clone()), &clock)
                .cleanup_policy(policy)
                // Would delete everything if the policy let it: only the start may decide here.
                .retention_ms(if policy.deletes() { -1 } else { 0 })
                .retention_bytes(if policy.deletes() { -1 } else { 0 })
                .build()
                .unwrap(),
        )
        .unwrap();
        append(&log, &[T0; 3 * PER_SEGMENT as usize + 1]);
        // Offset 9 lies inside [8, 12): that segment stays, the two before it go.
        log.delete_records_before(9).unwrap();
        let report = log.enforce_retention().unwrap();
        assert_eq!(
            report.segments_deleted_by(RetentionRule::LogStartOffset),
            2,
            "{policy:?}"
        );
        assert_eq!(report.segments_deleted(), 2);
        // The start stays where delete_records_before put it, above the first segment's base.
        assert_eq!(report.log_start_offset, 9);
        check_records(&log, 9, 13);
        assert_eq!(segment_bases(&sim, dir), [8, 12]);

        // At the log end offset nothing can be read: the active segment goes too, after a roll.
        log.delete_records_before(13).unwrap();
        let report = log.enforce_retention().unwrap();
        assert_eq!(report.segments_deleted_by(RetentionRule::LogStartOffset), 2);
        assert!(report.rolled_active_segment);
        check_records(&log, 13, 13);
        assert_eq!(segment_bases(&sim, dir), [13]);
    }
}

#[test]
fn a_reader_in_a_deleted_segment_finishes_and_its_files_go_when_it_lets_go() {
    let clock = Arc::new(ManualClock::new(T0));
    let sim = simulator(6, &clock);
    let dir = Path::new("/logs/readers-0");
    let log = Log::open(
        dir,
        builder(Arc::new(sim.clone()), &clock)
            .retention_ms(DAY)
            .build()
            .unwrap(),
    )
    .unwrap();
    three_days(&log, &clock);
    // Kafka's files of [0, 4) that partlog never writes: they go with the segment.
    for name in [
        "00000000000000000000.txnindex",
        "00000000000000000000.snapshot",
    ] {
        let file = sim.open(&dir.join(name), OpenMode::CreateNew).unwrap();
        file.write_all_at(b"kafka's", 0).unwrap();
    }

    // One reader holds a fetch from the middle of [0, 4); another is iterating through it.
    let fetch = log.read(1, 1 << 20, ReadBound::LogEnd).unwrap();
    let mut iterator = log.records(0, ReadBound::LogEnd);
    assert_eq!(iterator.next().unwrap().unwrap().offset, 0);

    // T0 + 2.5 days: [0, 4) and [4, 8) are more than a day old.
    clock.set(T0 + 5 * DAY / 2);
    let report = log.enforce_retention().unwrap();
    assert_eq!(report.segments_deleted(), 2);
    assert_eq!(report.log_start_offset, 8);
    check_records(&log, 8, 13);
    // [4, 8) was never pinned: its files go. [0, 4) is pinned by both readers: its files stay,
    // all five of them.
    let pinned = [
        "00000000000000000000.index.deleted",
        "00000000000000000000.log.deleted",
        "00000000000000000000.snapshot.deleted",
        "00000000000000000000.timeindex.deleted",
        "00000000000000000000.txnindex.deleted",
    ];
    wait_until("only [0, 4)'s files are left", || {
        deleted_files(&sim, dir) == pinned
    });
    assert_eq!(segment_bases(&sim, dir), [8, 12]);

    // Both readers finish [0, 4).
    let mut scratch = Vec::new();
    let mut offsets = Vec::new();
    for batch in fetch.batches() {
        for record in batch.unwrap().records(&mut scratch).unwrap() {
            let record = record.unwrap();
            assert_eq!(record.value, Some(&value(record.offset)[..]));
            offsets.push(record.offset);
        }
    }
    assert_eq!(offsets, [1, 2, 3]);
    let rest: Vec<i64> = iterator
        .by_ref()
        .take(3)
        .map(|r| r.unwrap().offset)
        .collect();
    assert_eq!(rest, [1, 2, 3]);
    // Its next fetch, at 4, is below the new start.
    assert!(matches!(
        iterator.next(),
        Some(Err(Error::OffsetOutOfRange {
            requested: 4,
            start: 8,
            ..
        }))
    ));

    // Still pinned by the fetch: a pass keeps the files.
    drop(iterator);
    assert_eq!(log.enforce_retention().unwrap().segments_deleted(), 0);
    assert_eq!(deleted_files(&sim, dir).len(), 5);
    // Let go: the next pass removes them.
    drop(fetch);
    assert_eq!(log.enforce_retention().unwrap().segments_deleted(), 0);
    wait_until("[0, 4)'s files are gone", || {
        deleted_files(&sim, dir).is_empty()
    });
    let names = sim.list(dir).unwrap();
    assert!(
        !names
            .iter()
            .any(|name| name.starts_with("00000000000000000000")),
        "{names:?}"
    );
}

#[test]
fn the_new_start_is_durable_when_the_pass_returns() {
    let clock = Arc::new(ManualClock::new(T0));
    let sim = simulator(7, &clock);
    let dir = Path::new("/logs/durable-0");
    let config = builder(Arc::new(sim.clone()), &clock)
        .retention_ms(DAY)
        .build()
        .unwrap();
    // The process that crashes runs on fenced storage: its drop after the crash changes
    // nothing in the image the next open recovers.
    let log = Log::open(dir, fenced_config(config.clone(), &sim)).unwrap();
    three_days(&log, &clock);
    log.wait_durable(12).unwrap();
    clock.set(T0 + 5 * DAY / 2);
    assert_eq!(log.enforce_retention().unwrap().log_start_offset, 8);
    // The strictest crash: only what was synced survives.
    sim.crash_with(&CrashConfig::lose_unsynced());
    drop(log);
    let log = Log::open(dir, config).unwrap();
    check_records(&log, 8, 13);
    assert_eq!(segment_bases(&sim, dir), [8, 12]);
    assert!(deleted_files(&sim, dir).is_empty());
}

/// Appends, reads and retention passes at once: appends never fail, readers see only whole,
/// correct records and, when retention overtakes them, `OffsetOutOfRange` below the new start,
/// from which they go on.
#[test]
fn appends_and_readers_go_on_while_retention_deletes() {
    const RECORDS: i64 = 600;
    let clock = Arc::new(ManualClock::new(T0));
    let sim = simulator(9, &clock);
    let dir = Path::new("/logs/concurrent-0");
    let segment = PER_SEGMENT as u64 * batch_bytes();
    let log = Arc::new(
        Log::open(
            dir,
            builder(Arc::new(sim.clone()), &clock)
                .retention_bytes(i64::try_from(3 * segment).unwrap())
                .build()
                .unwrap(),
        )
        .unwrap(),
    );
    let appender = {
        let log = Arc::clone(&log);
        std::thread::spawn(move || append(&log, &[T0; RECORDS as usize]))
    };
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                let (mut position, mut read, mut overtaken) = (0, 0u64, 0u64);
                let mut scratch = Vec::new();
                while position < RECORDS {
                    match log.read(position, 2 * batch_bytes() as usize, ReadBound::LogEnd) {
                        Ok(fetch) if fetch.is_empty() => {
                            log.wait_for_data(position, Duration::from_millis(50))
                                .unwrap();
                        }
                        Ok(fetch) => {
                            for batch in fetch.batches() {
                                for record in batch.unwrap().records(&mut scratch).unwrap() {
                                    let record = record.unwrap();
                                    assert_eq!(record.offset, position);
                                    assert_eq!(record.value, Some(&value(record.offset)[..]));
                                    position += 1;
                                    read += 1;
                                }
                            }
                        }
                        Err(Error::OffsetOutOfRange {
                            requested, start, ..
                        }) if requested < start => {
                            overtaken += 1;
                            position = start;
                        }
                        Err(error) => panic!("read at {position}: {error}"),
                    }
                }
                (read, overtaken)
            })
        })
        .collect();
    let mut deleted = 0;
    while !appender.is_finished() {
        deleted += log.enforce_retention().unwrap().segments_deleted();
    }
    appender.join().unwrap();
    for reader in readers {
        let (read, _overtaken) = reader.join().unwrap();
        assert!(read > 0);
    }
    // With no reader left and no sync in flight holding a sealed segment, the last pass leaves
    // no `*.deleted` file behind.
    log.wait_durable(RECORDS - 1).unwrap();
    deleted += log.enforce_retention().unwrap().segments_deleted();
    // 600 batches in segments of 4: the size rule keeps 3 segments' worth plus less than one.
    let start = log.log_start_offset();
    assert_eq!(deleted as i64, start / PER_SEGMENT);
    assert!(
        (RECORDS - start) as u64 * batch_bytes() < 4 * segment,
        "start {start}"
    );
    check_records(&log, start, RECORDS);
    wait_until("every deleted file is gone", || {
        deleted_files(&sim, dir).is_empty()
    });
    assert_eq!(
        segment_bases(&sim, dir),
        (start..RECORDS)
            .step_by(PER_SEGMENT as usize)
            .collect::<Vec<_>>()
    );
}

/// What a crash test expects of one pass: the start before and after it, and the segments left.
struct Scenario {
    name: &'static str,
    /// When the pass runs.
    now: i64,
    start_after: i64,
    bases_after: &'static [i64],
    /// Close and reopen the log before the pass, so that it opens the sealed segments it reads.
    reopen: bool,
}

/// Crashes the machine before each operation of a retention pass in turn (every file
/// operation, sync, directory operation and read, on any thread), with the strictest, the
/// kindest and a random crash image, until a pass completes. After each crash the log must open under `RecoveryMode::Fail` with
/// its start either unchanged or the new one, every record from that start to the end intact
/// (all were durable), and no `*.deleted` file; the next pass must then finish the job.
#[test]
fn a_crash_at_any_step_of_a_pass_leaves_a_log_that_opens_and_loses_nothing() {
    let scenarios = [
        Scenario {
            name: "sealed segments only",
            now: T0 + 5 * DAY / 2,
            start_after: 8,
            bases_after: &[8, 12],
            reopen: false,
        },
        Scenario {
            name: "sealed segments only, after a clean reopen",
            now: T0 + 5 * DAY / 2,
            start_after: 8,
            bases_after: &[8, 12],
            reopen: true,
        },
        Scenario {
            name: "every segment, after a roll",
            now: T0 + 10 * DAY,
            start_after: 13,
            bases_after: &[13],
            reopen: false,
        },
    ];
    let dir = Path::new("/logs/crash-0");
    let images = [
        ("a random image", CrashConfig::default()),
        ("the strictest image", CrashConfig::lose_unsynced()),
        ("the kindest image", CrashConfig::keep_unsynced()),
    ];
    for (scenario, (image, crash_config)) in scenarios
        .iter()
        .flat_map(|scenario| images.iter().map(move |image| (scenario, image)))
    {
        let mut operations = None;
        for crash_at in 1..400u64 {
            let clock = Arc::new(ManualClock::new(T0));
            let sim = simulator(1_000 + crash_at, &clock);
            let config = builder(Arc::new(sim.clone()), &clock)
                .retention_ms(DAY)
                // Keep the flusher from writing checkpoints of its own during the pass.
                .recovery_point_ms(u64::MAX)
                .recovery_point_bytes(u64::MAX)
                .build()
                .unwrap();
            let mut log = Log::open(dir, config.clone()).unwrap();
            three_days(&log, &clock);
            clock.set(scenario.now);
            if scenario.reopen {
                log.close().unwrap();
                drop(log);
                log = Log::open(dir, config.clone()).unwrap();
            }

            let crashes = sim.stats().crashes;
            sim.inject(FaultRule::crash(FaultOp::Any, crash_at).crash_config(crash_config.clone()));
            let result = log.enforce_retention();
            let crashed = sim.stats().crashes > crashes;
            if !crashed {
                // The pass ran to its end before the armed operation: every step was covered.
                sim.clear_faults();
                let report = result.unwrap();
                assert_eq!(report.log_start_offset, scenario.start_after);
                check_records(&log, scenario.start_after, 13);
                log.close().unwrap();
                operations = Some(crash_at - 1);
                break;
            }
            drop(log);

            let context = format!(
                "{}, {image}: crash before operation {crash_at}",
                scenario.name
            );
            let log = Log::open(dir, config.clone())
                .unwrap_or_else(|error| panic!("{context}: the log does not open: {error}"));
            let start = log.log_start_offset();
            assert!(
                start == 0 || start == scenario.start_after,
                "{context}: start {start}"
            );
            check_records(&log, start, 13);
            assert!(
                deleted_files(&sim, dir).is_empty(),
                "{context}: {:?}",
                deleted_files(&sim, dir)
            );

            // The next pass (the same time) finishes the job.
            let report = log.enforce_retention().unwrap();
            assert_eq!(report.log_start_offset, scenario.start_after, "{context}");
            check_records(&log, scenario.start_after, 13);
            assert_eq!(segment_bases(&sim, dir), scenario.bases_after, "{context}");
            log.close().unwrap();
        }
        // A pass reads, writes and syncs the checkpoint, renames and removes files, and syncs the
        // directory (and rolls, creating three files, when the active segment goes).
        let operations =
            operations.unwrap_or_else(|| panic!("{}: the pass never completed", scenario.name));
        assert!(
            operations >= 10,
            "{}: only {operations} operations",
            scenario.name
        );
    }
}

/// The names of this process's threads (Linux truncates them to 15 bytes).
fn thread_names() -> Vec<String> {
    let mut names = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let comm = task.unwrap().path().join("comm");
        // A thread may exit between the listing and the read.
        if let Ok(name) = std::fs::read_to_string(comm) {
            names.push(name.trim_end().to_string());
        }
    }
    names
}

fn maintenance_threads() -> usize {
    thread_names()
        .iter()
        .filter(|name| name.starts_with("partlog-mainten"))
        .count()
}

/// Waits (without asserting anything about time) until `done` holds; fails after a minute.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "gave up waiting until {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The only test here that configures a maintenance thread, so that the thread count is its own.
#[test]
fn the_maintenance_thread_runs_retention_on_its_interval_and_stops_with_the_log() {
    let clock = Arc::new(ManualClock::new(T0));
    let sim = simulator(8, &clock);
    let dir = Path::new("/logs/maintenance-0");
    // Four days: nothing is due while the three days are written (the thread may run passes
    // meanwhile, as the clock jumps).
    let config = builder(Arc::new(sim.clone()), &clock)
        .retention_ms(4 * DAY)
        .retention_check_interval_ms(60_000)
        .build()
        .unwrap();

    // Off by default: this log's segments are due at once, and nothing deletes them.
    let quiet_dir = Path::new("/logs/maintenance-1");
    let quiet = Log::open(
        quiet_dir,
        builder(Arc::new(sim.clone()), &clock)
            .retention_ms(0)
            .build()
            .unwrap(),
    )
    .unwrap();
    append(&quiet, &[T0; PER_SEGMENT as usize + 1]);
    assert_eq!(maintenance_threads(), 0);

    let log = Log::open(dir, config.clone()).unwrap();
    wait_until("the thread is named", || maintenance_threads() == 1);
    three_days(&log, &clock);
    // T0 + 5.5 days: [0, 4) and [4, 8) are due, and the interval has passed.
    clock.set(T0 + 11 * DAY / 2);
    wait_until("the thread deletes [0, 8)", || log.log_start_offset() == 8);
    wait_until("the files are gone", || segment_bases(&sim, dir) == [8, 12]);
    // Later: [8, 12) and then the active segment are due.
    clock.set(T0 + 8 * DAY);
    wait_until("the thread deletes the rest", || {
        log.log_start_offset() == 13
    });
    check_records(&log, 13, 13);
    wait_until("the files are gone", || segment_bases(&sim, dir) == [13]);

    log.close().unwrap();
    assert_eq!(maintenance_threads(), 0, "close() joins the thread");
    drop(log);

    // Dropping the log stops it too.
    let log = Log::open(dir, config).unwrap();
    wait_until("the thread is named", || maintenance_threads() == 1);
    drop(log);
    assert_eq!(maintenance_threads(), 0, "drop joins the thread");
    // The log without a maintenance thread never deleted anything on its own.
    assert_eq!(quiet.log_start_offset(), 0);
    assert_eq!(segment_bases(&sim, quiet_dir), [0, PER_SEGMENT]);
    drop(quiet);
}

/// The same rules on the real file system: the mtime set at roll is the log clock's, and the
/// `*.deleted` files are removed once unpinned.
#[test]
fn on_the_os_file_system_mtimes_come_from_the_log_clock() {
    let clock = Arc::new(ManualClock::new(T0));
    let tempdir = tempfile::tempdir().unwrap();
    let dir = tempdir.path();
    let storage: Arc<dyn Storage> = Arc::new(partlog::unstable::OsStorage::new());
    let log = Log::open(
        dir,
        builder(Arc::clone(&storage), &clock)
            .retention_ms(DAY)
            .build()
            .unwrap(),
    )
    .unwrap();
    three_days(&log, &clock);
    let mtime = |base: i64| -> i64 {
        let path: PathBuf = segment_file_path(dir, base, SegmentFileKind::Log);
        storage.metadata(&path).unwrap().modified_ms
    };
    // The real clock is years past T0; the rolled segments carry the manual clock's times.
    assert_eq!(
        [mtime(0), mtime(4), mtime(8)],
        [T0 + DAY, T0 + 2 * DAY, T0 + 3 * DAY]
    );
    let fetch = log.read(0, 1 << 20, ReadBound::LogEnd).unwrap();
    clock.set(T0 + 5 * DAY / 2);
    let report = log.enforce_retention().unwrap();
    assert_eq!(report.segments_deleted_by(RetentionRule::Time), 2);
    assert_eq!(segment_bases(&*storage, dir), [8, 12]);
    wait_until("only pinned [0, 4)'s three files are left", || {
        deleted_files(&*storage, dir).len() == 3
    });
    assert_eq!(fetch.batches().count(), PER_SEGMENT as usize);
    drop(fetch);
    log.enforce_retention().unwrap();
    wait_until("[0, 4)'s files are gone", || {
        deleted_files(&*storage, dir).is_empty()
    });
    check_records(&log, 8, 13);
    log.close().unwrap();
}

/// A storage that runs an action at a `metadata` call on a file once armed, after passing
/// over as many calls on that file as the arming says: retention sizes the segments it does
/// not hold open that way while it plans.
struct MetadataHook {
    inner: Arc<dyn Storage>,
    action: HookAction,
}

impl std::fmt::Debug for MetadataHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetadataHook")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

/// The file's name, the calls on it to pass over, and the action.
type HookAction = Arc<parking_lot::Mutex<Option<(String, usize, Box<dyn FnOnce() + Send>)>>>;

impl partlog::unstable::Storage for MetadataHook {
    fn open(
        &self,
        path: &Path,
        mode: OpenMode,
    ) -> partlog::Result<Arc<dyn partlog::unstable::StorageFile>> {
        self.inner.open(path, mode)
    }
    fn create_dir_all(&self, path: &Path) -> partlog::Result<()> {
        self.inner.create_dir_all(path)
    }
    fn sync_dir(&self, dir: &Path) -> partlog::Result<()> {
        self.inner.sync_dir(dir)
    }
    fn rename(&self, from: &Path, to: &Path) -> partlog::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> partlog::Result<()> {
        self.inner.remove(path)
    }
    fn list(&self, dir: &Path) -> partlog::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn metadata(&self, path: &Path) -> partlog::Result<partlog::unstable::Metadata> {
        let action = {
            let mut armed = self.action.lock();
            match armed.as_mut() {
                Some((name, skip, _)) if path.ends_with(name.as_str()) => {
                    if *skip == 0 {
                        armed.take().map(|(_, _, action)| action)
                    } else {
                        *skip -= 1;
                        None
                    }
                }
                _ => None,
            }
        };
        if let Some(action) = action {
            action();
        }
        self.inner.metadata(path)
    }
    fn lock(
        &self,
        path: &Path,
        mode: partlog::unstable::LockMode,
    ) -> partlog::Result<partlog::unstable::FileLock> {
        self.inner.lock(path, mode)
    }
    fn set_mtime(&self, path: &Path, mtime_ms: i64) -> partlog::Result<()> {
        self.inner.set_mtime(path, mtime_ms)
    }
}

/// Issue 29, item 13 (retention's side): a pass asked whether a truncation came since it
/// planned by comparing the lowest cut the log had had, so a truncation that cut above an
/// earlier, lower one went unseen, and the pass deleted by the size it planned on. Here a
/// truncation of the last segment, while the pass plans, leaves the log within
/// `retention.bytes`: nothing may go.
#[test]
fn issue29_item13_retention_plans_again_after_any_truncation_since_it_planned() {
    let clock = Arc::new(ManualClock::new(T0));
    let sim = simulator(29, &clock);
    let dir = Path::new("/logs/size-truncated-0");
    let batch = batch_bytes();
    let action: HookAction = Arc::new(parking_lot::Mutex::new(None));
    let storage = Arc::new(MetadataHook {
        inner: Arc::new(sim.clone()),
        action: Arc::clone(&action),
    });
    let config = builder(storage, &clock)
        .retention_bytes(i64::try_from(10 * batch).unwrap())
        .retention_ms(7 * DAY)
        .build()
        .unwrap();
    let log = Arc::new(Log::open(dir, config).unwrap());
    // An early truncation to 1, the lowest the log will be cut to.
    append(&log, &[T0; 3]);
    assert_eq!(log.truncate_to(1).unwrap(), 1);
    // [0, 4), [4, 8), [8, 12) and 3 batches in the active segment: 15 batches, 5 too many.
    append(&log, &[T0; 14]);
    assert_eq!(segment_bases(&sim, dir), [0, 4, 8, 12]);
    log.sync().unwrap();
    // The size rule takes [0, 4) and keeps [4, 8); the time rule then reads [4, 8)'s mtime,
    // and the truncation comes at that read, after the pass sized the log.
    *action.lock() = Some((
        "00000000000000000004.log".to_owned(),
        0,
        Box::new({
            let log = Arc::clone(&log);
            move || assert_eq!(log.truncate_to(9).unwrap(), 9)
        }),
    ));
    let report = log.enforce_retention().unwrap();
    assert!(
        action.lock().is_none(),
        "the truncation ran while the pass planned"
    );
    // 9 batches are left, within the 10 allowed.
    assert_eq!(report.segments_deleted(), 0, "{report:?}");
    assert_eq!(segment_bases(&sim, dir), [0, 4, 8]);
    check_records(&log, 0, 9);
}
