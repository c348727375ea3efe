//! Compaction's scheduling and bookkeeping (ARCHITECTURE.md §3, invariant 8; Kafka's `LogCleaner`):
//! the dirty ratio, `min.compaction.lag.ms` and `max.compaction.lag.ms` on the manual clock, the
//! maintenance thread, segment grouping within `segment.bytes`, the range an open transaction
//! holds back (the last stable offset), failed passes, and the persisted first dirty offset.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use partlog::unstable::{Clock, ManualClock};
use partlog::{
    BatchBuilder, CleanupPolicy, CompactionOptions, Compression, Log, LogConfig, LogConfigBuilder,
    NewRecord, ReadBound,
};

const T0: i64 = 1_700_000_000_000;
const SEGMENT_MS: i64 = 1_000;
const SEGMENT_BYTES: u32 = 64 * 1024;

fn builder(clock: &Arc<ManualClock>) -> LogConfigBuilder {
    LogConfig::builder_for_tests()
        .segment_bytes(SEGMENT_BYTES)
        .segment_ms(SEGMENT_MS)
        .cleanup_policy(CleanupPolicy::COMPACT)
        .clock(Arc::clone(clock) as Arc<dyn Clock>)
}

fn config(clock: &Arc<ManualClock>) -> LogConfig {
    builder(clock).build().unwrap()
}

/// Appends one record in its own segment: the clock moves past `segment.ms` first, so the
/// append rolls the segment that holds the previous record.
fn put(log: &Log, clock: &ManualClock, key: &str, value: &[u8]) -> i64 {
    clock.advance(SEGMENT_MS + 1);
    log.append(&[NewRecord::new(
        clock.now_ms(),
        Some(key.as_bytes()),
        Some(value),
    )])
    .unwrap()
    .first_offset
}

fn key_offsets(log: &Log) -> Vec<(String, i64)> {
    log.records(log.log_start_offset(), ReadBound::LogEnd)
        .map(|r| {
            let r = r.unwrap();
            (String::from_utf8(r.key.unwrap()).unwrap(), r.offset)
        })
        .collect()
}

fn log_files(dir: &Path) -> Vec<(i64, u64)> {
    let mut files: Vec<(i64, u64)> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let e = e.unwrap();
            let name = e.file_name().into_string().unwrap();
            let base = name.strip_suffix(".log")?.parse().ok()?;
            Some((base, e.metadata().unwrap().len()))
        })
        .collect();
    files.sort_unstable();
    files
}

/// Waits (without asserting anything about time) until `done` holds; fails after a minute.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "gave up waiting until {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn the_dirty_ratio_decides_when_a_pass_is_due() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(dir.path(), config(&clock)).unwrap();
    // Nothing sealed: nothing to clean.
    put(&log, &clock, "a", b"1");
    let schedule = log.compaction_schedule().unwrap();
    assert_eq!((schedule.clean_bytes, schedule.dirty_bytes), (0, 0));
    assert!(!schedule.due);
    for key in ["b", "c", "d", "end"] {
        put(&log, &clock, key, b"1");
    }
    // Four dirty segments, nothing clean: ratio 1.
    let schedule = log.compaction_schedule().unwrap();
    assert_eq!(schedule.clean_bytes, 0);
    assert!(schedule.dirty_bytes > 0);
    assert_eq!(schedule.dirty_ratio, 1.0);
    assert_eq!(schedule.first_uncleanable_offset, 4, "the active segment");
    assert!(schedule.due && log.compaction_due().unwrap());
    let stats = log.compact().unwrap();
    assert_eq!(stats.cleaned_up_to, 4);
    // All clean now.
    let schedule = log.compaction_schedule().unwrap();
    assert_eq!(schedule.first_dirty_offset, 4);
    assert_eq!(schedule.dirty_bytes, 0);
    assert!(schedule.clean_bytes > 0);
    assert!(!schedule.due);
    // One small dirty segment against four records' worth of clean ones: below 0.5.
    put(&log, &clock, "e", b"1");
    let schedule = log.compaction_schedule().unwrap();
    assert!(schedule.dirty_bytes > 0);
    assert!(schedule.dirty_ratio < 0.5, "{schedule:?}");
    assert_eq!(
        schedule.dirty_ratio,
        schedule.dirty_bytes as f64 / (schedule.clean_bytes + schedule.dirty_bytes) as f64
    );
    assert!(!schedule.due);
    // As many dirty bytes as clean ones: due.
    for key in ["f", "g", "h", "i"] {
        put(&log, &clock, key, b"1");
    }
    let schedule = log.compaction_schedule().unwrap();
    assert!(schedule.dirty_ratio >= 0.5, "{schedule:?}");
    assert!(schedule.due);
    // A log without the compact policy is never due.
    let plain_dir = tempfile::tempdir().unwrap();
    let plain = Log::open(
        plain_dir.path(),
        builder(&clock)
            .cleanup_policy(CleanupPolicy::DELETE)
            .build()
            .unwrap(),
    )
    .unwrap();
    for key in ["a", "b", "c"] {
        put(&plain, &clock, key, b"1");
    }
    assert!(!plain.compaction_due().unwrap());
}

#[test]
fn min_compaction_lag_keeps_young_segments_out() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    // Records are SEGMENT_MS + 1 apart: a lag of 2.5 segments keeps the last two sealed
    // segments out of the cleanable range.
    let lag = 5 * SEGMENT_MS / 2;
    let log = Log::open(
        dir.path(),
        builder(&clock).min_compaction_lag_ms(lag).build().unwrap(),
    )
    .unwrap();
    for key in ["k", "k", "k", "k", "k", "end"] {
        put(&log, &clock, key, b"v");
    }
    let schedule = log.compaction_schedule().unwrap();
    assert_eq!(schedule.first_uncleanable_offset, 3, "{schedule:?}");
    let stats = log.compact().unwrap();
    assert_eq!(stats.cleaned_up_to, 3);
    // Only k@2 survives below 3: k@3 and k@4 are too young to count.
    assert_eq!(
        key_offsets(&log),
        [
            ("k".into(), 2),
            ("k".into(), 3),
            ("k".into(), 4),
            ("end".into(), 5)
        ]
    );
    // The option overrides the config for one pass.
    let stats = log
        .compact_with(CompactionOptions::default().min_compaction_lag_ms(0))
        .unwrap();
    assert_eq!(stats.cleaned_up_to, 5);
    assert_eq!(key_offsets(&log), [("k".into(), 4), ("end".into(), 5)]);
}

#[test]
fn max_compaction_lag_forces_a_pass_below_the_ratio() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let max_lag = 60_000;
    let log = Log::open(
        dir.path(),
        builder(&clock)
            .min_cleanable_dirty_ratio(1.0)
            .max_compaction_lag_ms(max_lag)
            .build()
            .unwrap(),
    )
    .unwrap();
    for key in ["a", "b", "c", "d"] {
        put(&log, &clock, key, b"1");
    }
    log.compact().unwrap();
    put(&log, &clock, "a", b"2");
    put(&log, &clock, "end", b"x");
    // Some clean bytes: the ratio is below 1, and the dirty record is young.
    let schedule = log.compaction_schedule().unwrap();
    assert!(schedule.dirty_bytes > 0 && schedule.dirty_ratio < 1.0);
    assert!(!schedule.max_lag_exceeded && !schedule.due, "{schedule:?}");
    clock.advance(max_lag);
    let schedule = log.compaction_schedule().unwrap();
    assert!(schedule.max_lag_exceeded && schedule.due, "{schedule:?}");
    log.compact().unwrap();
    assert!(!log.compaction_due().unwrap());
}

/// The only test here that configures a maintenance thread.
#[test]
fn the_maintenance_thread_compacts_when_a_pass_is_due() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(
        dir.path(),
        builder(&clock)
            .min_cleanable_dirty_ratio(0.0)
            .retention_check_interval_ms(60_000)
            .build()
            .unwrap(),
    )
    .unwrap();
    for key in ["a", "b", "a", "b", "a", "end"] {
        put(&log, &clock, key, b"v");
    }
    assert_eq!(log.stats().compaction_passes, 0, "no interval passed yet");
    clock.advance(60_000);
    let expected = [("b".into(), 3), ("a".into(), 4), ("end".into(), 5)];
    wait_until("the thread compacts the log", || {
        key_offsets(&log) == expected && !log.compaction_due().unwrap()
    });
    let passes = log.stats().compaction_passes;
    assert!(passes >= 1);
    // Nothing is due: further intervals run no pass.
    clock.advance(60_000);
    clock.advance(60_000);
    log.close().unwrap();
    assert_eq!(log.stats().compaction_passes, passes);
    assert_eq!(log.stats().compaction_failed_passes, 0);
}

#[test]
fn segments_are_merged_within_segment_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(dir.path(), config(&clock)).unwrap();
    // Six segments of about 20 KiB with distinct keys: three fit in 64 KiB, four do not.
    let value = vec![7u8; 20 * 1024];
    for i in 0..6 {
        put(&log, &clock, &format!("k{i}"), &value);
    }
    put(&log, &clock, "end", b"x");
    let stats = log.compact().unwrap();
    assert_eq!((stats.segments_cleaned, stats.segments_written), (6, 2));
    assert_eq!(stats.records_removed, 0);
    let files = log_files(dir.path());
    assert_eq!(
        files.iter().map(|(base, _)| *base).collect::<Vec<_>>(),
        [0, 3, 6]
    );
    for (base, bytes) in &files {
        assert!(*bytes <= u64::from(SEGMENT_BYTES), "{base}: {bytes} bytes");
    }
    let offsets: Vec<i64> = key_offsets(&log).into_iter().map(|(_, o)| o).collect();
    assert_eq!(offsets, [0, 1, 2, 3, 4, 5, 6]);
    // The two groups cannot merge: the next pass leaves them alone.
    let stats = log.compact().unwrap();
    assert_eq!((stats.segments_cleaned, stats.segments_written), (0, 0));
    assert_eq!(stats.bytes_written, 0);
    // Every merged segment reads back whole through a fresh open, indexes included.
    log.close().unwrap();
    drop(log);
    let report = partlog::verify_dir(dir.path(), &config(&clock)).unwrap();
    assert!(report.findings.is_empty(), "{:?}", report.findings);
}

/// A segment alone in its group is written from its first change on: the unchanged batches
/// before that change are copied then, byte for byte; a segment that does not change is not
/// written at all.
#[test]
fn a_lone_segment_is_copied_from_its_first_change_on() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(dir.path(), config(&clock)).unwrap();
    let value = vec![1u8; 10 * 1024];
    let append = |key: &str| {
        log.append(&[NewRecord::new(
            clock.now_ms(),
            Some(key.as_bytes()),
            Some(&value),
        )])
        .unwrap()
        .first_offset
    };
    // Segment 0: b, c, a (superseded later), d, e: about 50 KiB, so that it cannot share a
    // group with segment 5 (about 30 KiB) under 64 KiB.
    clock.advance(SEGMENT_MS + 1);
    for key in ["b", "c", "a", "d", "e"] {
        append(key);
    }
    clock.advance(SEGMENT_MS + 1);
    for key in ["a", "f", "g"] {
        append(key);
    }
    put(&log, &clock, "end", b"x");
    let before = std::fs::read(dir.path().join(format!("{:020}.log", 0))).unwrap();
    let stats = log.compact().unwrap();
    assert_eq!((stats.segments_cleaned, stats.segments_written), (1, 1));
    assert_eq!(stats.records_removed, 1);
    let after = std::fs::read(dir.path().join(format!("{:020}.log", 0))).unwrap();
    // b and c as they were, then d and e as they were (a's batch went).
    let batch = before.len() / 5;
    assert_eq!(after.len(), 4 * batch);
    assert_eq!(after[..2 * batch], before[..2 * batch]);
    assert_eq!(after[2 * batch..], before[3 * batch..]);
    let keys: Vec<String> = key_offsets(&log).into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys, ["b", "c", "d", "e", "a", "f", "g", "end"]);
    // Nothing changes now: nothing is written, and no file is left behind.
    let again = log.compact().unwrap();
    assert_eq!((again.segments_written, again.bytes_written), (0, 0));
    let leftovers: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".cleaned") || n.ends_with(".swap") || n.ends_with(".deleted"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    log.close().unwrap();
    drop(log);
    let report = partlog::verify_dir(dir.path(), &config(&clock)).unwrap();
    assert!(report.findings.is_empty(), "{:?}", report.findings);
}

/// The group's index files must also fit `segment.index.bytes` together: here each sealed
/// segment's `.timeindex` holds one 12-byte entry, and 36 bytes allow three.
#[test]
fn segments_are_merged_within_segment_index_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(
        dir.path(),
        builder(&clock).segment_index_bytes(36).build().unwrap(),
    )
    .unwrap();
    for i in 0..6 {
        put(&log, &clock, &format!("k{i}"), b"v");
    }
    put(&log, &clock, "end", b"x");
    let timeindex = |base: i64| {
        std::fs::metadata(dir.path().join(format!("{base:020}.timeindex")))
            .unwrap()
            .len()
    };
    assert_eq!(timeindex(0), 12);
    let stats = log.compact().unwrap();
    assert_eq!((stats.segments_cleaned, stats.segments_written), (6, 2));
    let bases: Vec<i64> = log_files(dir.path()).iter().map(|(b, _)| *b).collect();
    assert_eq!(bases, [0, 3, 6]);
    assert!(timeindex(0) <= 36 && timeindex(3) <= 36);
    let offsets: Vec<i64> = key_offsets(&log).into_iter().map(|(_, o)| o).collect();
    assert_eq!(offsets, [0, 1, 2, 3, 4, 5, 6]);
}

#[test]
fn an_open_transaction_holds_compaction_back_at_the_lso() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(dir.path(), config(&clock)).unwrap();
    for key in ["a", "a", "b"] {
        put(&log, &clock, key, b"1");
    }
    // A transactional batch in its own segment at 3, its transaction open: the LSO is 3.
    clock.advance(SEGMENT_MS + 1);
    let mut builder = BatchBuilder::new(Compression::None)
        .producer(7, 0, 0)
        .transactional(true);
    builder.push(&NewRecord::new(clock.now_ms(), Some(b"a"), Some(b"txn")));
    log.append_batch(&builder.build().unwrap()).unwrap();
    for key in ["a", "b", "end"] {
        put(&log, &clock, key, b"2");
    }
    let stats = log.compact().unwrap();
    assert_eq!(stats.uncleanable_from, Some(3));
    assert_eq!(stats.cleaned_up_to, 3);
    assert!(stats.uncleanable_bytes > 0);
    let log_stats = log.stats();
    assert_eq!(log_stats.compaction_uncleanable_from, Some(3));
    assert_eq!(
        log_stats.compaction_uncleanable_bytes,
        stats.uncleanable_bytes
    );
    // Below 3 only a@1 went; nothing from 3 on was touched.
    let keys = key_offsets(&log);
    assert_eq!(keys.first(), Some(&("a".into(), 1)));
    assert_eq!(keys.len(), 6);
    // The next pass does not read the held-back segments: it reads only what lies below the
    // LSO's segment (once to map it, once to find that nothing there changes).
    let below: u64 = log_files(dir.path())
        .iter()
        .filter(|(base, _)| *base < 3)
        .map(|(_, bytes)| bytes)
        .sum();
    let again = log.compact().unwrap();
    assert_eq!(again.uncleanable_from, Some(3));
    assert_eq!(again.bytes_read, 2 * below);
    assert!(!log.compaction_due().unwrap());
}

/// A segment whose open transaction begins after plain records: the range ends at its base (a
/// segment boundary below the LSO), and the plain records there supersede nothing.
#[test]
fn an_open_transaction_part_way_through_a_segment_holds_the_pass_at_its_base() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(dir.path(), config(&clock)).unwrap();
    put(&log, &clock, "a", b"1");
    put(&log, &clock, "b", b"1");
    // Segment 2: a@2, then a transactional batch.
    put(&log, &clock, "a", b"2");
    let mut builder = BatchBuilder::new(Compression::None)
        .producer(7, 0, 0)
        .transactional(true);
    builder.push(&NewRecord::new(clock.now_ms(), Some(b"t"), Some(b"txn")));
    log.append_batch(&builder.build().unwrap()).unwrap();
    put(&log, &clock, "end", b"x");
    let stats = log.compact().unwrap();
    assert_eq!(stats.uncleanable_from, Some(2));
    assert_eq!(stats.cleaned_up_to, 2);
    assert_eq!(stats.records_removed, 0);
    assert_eq!(
        key_offsets(&log),
        [
            ("a".into(), 0),
            ("b".into(), 1),
            ("a".into(), 2),
            ("t".into(), 3),
            ("end".into(), 4)
        ]
    );
}

/// A `.txnindex` no longer stops compaction: with no transaction open, its segment is cleaned
/// like any other.
#[test]
fn a_segment_with_a_txnindex_is_cleaned_like_any_other() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(dir.path(), config(&clock)).unwrap();
    for key in ["a", "a", "a", "a", "end"] {
        put(&log, &clock, key, b"1");
    }
    std::fs::write(dir.path().join(format!("{:020}.txnindex", 2)), b"").unwrap();
    let stats = log.compact().unwrap();
    assert_eq!(stats.uncleanable_from, None);
    assert_eq!(stats.cleaned_up_to, 4);
    assert_eq!(key_offsets(&log), [("a".into(), 3), ("end".into(), 4)]);
}

#[cfg(feature = "sim")]
#[test]
fn a_failed_pass_is_counted_and_the_next_one_cleans() {
    use partlog::unstable::sim::{FaultOp, FaultRule};
    use partlog::unstable::{SimStorage, Storage};

    let sim = SimStorage::new(3);
    let clock = Arc::new(ManualClock::new(T0));
    let config = builder(&clock)
        .storage(Arc::new(sim.clone()) as Arc<dyn Storage>)
        .build()
        .unwrap();
    let dir = Path::new("/data/failing-pass");
    let log = Log::open(dir, config).unwrap();
    for key in ["a", "a", "b", "end"] {
        put(&log, &clock, key, b"1");
    }
    sim.inject(FaultRule::fail(FaultOp::Write, 1).on_paths_ending_with(".cleaned"));
    assert!(log.compact().is_err());
    sim.clear_faults();
    let stats = log.stats();
    assert_eq!(
        (stats.compaction_passes, stats.compaction_failed_passes),
        (0, 1)
    );
    assert!(!stats.poisoned);
    // Nothing of the failed pass is left, and the next pass cleans as if it never ran.
    assert!(
        sim.list(dir)
            .unwrap()
            .iter()
            .all(|n| !n.ends_with(".cleaned") && !n.ends_with(".swap"))
    );
    assert!(log.compaction_due().unwrap());
    let cleaned = log.compact().unwrap();
    assert_eq!(cleaned.records_removed, 1);
    assert_eq!(log.stats().compaction_passes, 1);
    assert!(!log.compaction_due().unwrap());
}

/// `partlog.cleaner-checkpoint` as FORMAT.md describes it, written from that description.
fn cleaner_checkpoint_bytes(first_dirty: i64) -> Vec<u8> {
    let mut bytes = b"PLCC".to_vec();
    bytes.extend_from_slice(&1u16.to_be_bytes());
    bytes.extend_from_slice(&0u16.to_be_bytes());
    bytes.extend_from_slice(&first_dirty.to_be_bytes());
    let crc = crc32c::crc32c(&bytes);
    bytes.extend_from_slice(&crc.to_be_bytes());
    bytes
}

#[test]
fn the_first_dirty_offset_survives_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(dir.path(), config(&clock)).unwrap();
    for key in ["a", "b", "a", "c", "end"] {
        put(&log, &clock, key, b"1");
    }
    assert_eq!(log.compact().unwrap().cleaned_up_to, 4);
    let checkpoint = dir.path().join("partlog.cleaner-checkpoint");
    assert_eq!(
        std::fs::read(&checkpoint).unwrap(),
        cleaner_checkpoint_bytes(4)
    );
    log.close().unwrap();
    drop(log);

    // Reopened: what was clean stays clean, so no pass is due.
    let log = Log::open(dir.path(), config(&clock)).unwrap();
    let schedule = log.compaction_schedule().unwrap();
    assert_eq!(schedule.first_dirty_offset, 4);
    assert_eq!(schedule.dirty_bytes, 0);
    assert!(!schedule.due);

    // A truncation below it lowers it on disk before the offsets are reused.
    assert_eq!(log.truncate_to(2).unwrap(), 2);
    assert_eq!(
        std::fs::read(&checkpoint).unwrap(),
        cleaner_checkpoint_bytes(2)
    );
    for key in ["c", "c", "end"] {
        put(&log, &clock, key, b"2");
    }
    log.close().unwrap();
    drop(log);
    let log = Log::open(dir.path(), config(&clock)).unwrap();
    assert_eq!(log.compaction_schedule().unwrap().first_dirty_offset, 2);
    // c@2 is a reused offset the pass must map: it is superseded by c@3.
    log.compact().unwrap();
    assert_eq!(
        key_offsets(&log),
        [("b".into(), 1), ("c".into(), 3), ("end".into(), 4)]
    );
    log.close().unwrap();
    drop(log);

    // A file that names an offset above the log end is not trusted, and goes.
    std::fs::write(&checkpoint, cleaner_checkpoint_bytes(1_000)).unwrap();
    let log = Log::open(dir.path(), config(&clock)).unwrap();
    assert_eq!(log.compaction_schedule().unwrap().first_dirty_offset, 0);
    assert!(!checkpoint.exists());
    log.close().unwrap();
    drop(log);

    // A damaged file counts as none.
    let mut damaged = cleaner_checkpoint_bytes(3);
    damaged[10] ^= 1;
    std::fs::write(&checkpoint, damaged).unwrap();
    let log = Log::open(dir.path(), config(&clock)).unwrap();
    assert_eq!(log.compaction_schedule().unwrap().first_dirty_offset, 0);
}

/// A `.log` file at `base` holding one batch of `(key, timestamp)` records, one offset each.
fn write_segment(dir: &Path, base: i64, records: &[(&str, i64)]) {
    let mut builder = BatchBuilder::new(Compression::None).base_offset(base);
    for (key, timestamp) in records {
        builder.push(&NewRecord::new(
            *timestamp,
            Some(key.as_bytes()),
            Some(b"v"),
        ));
    }
    std::fs::write(
        dir.join(format!("{base:020}.log")),
        builder.build().unwrap(),
    )
    .unwrap();
}

/// Bug 6: with `min.compaction.lag.ms` 0 (the default) Kafka applies no lag at all, so a record
/// stamped half an hour ahead (within the default `message.timestamp.after.max.ms`) must not hold
/// its segment, and every later one, out of the cleanable range.
#[test]
fn a_future_timestamp_holds_nothing_back_without_a_min_lag() {
    let dir = tempfile::tempdir().unwrap();
    let ahead = T0 + 30 * 60 * 1000;
    write_segment(dir.path(), 0, &[("a", T0)]);
    write_segment(dir.path(), 1, &[("a", T0), ("a", ahead)]);
    write_segment(dir.path(), 3, &[("a", T0)]);
    write_segment(dir.path(), 4, &[("end", T0)]);
    let clock = Arc::new(ManualClock::new(T0 + 1));
    let log = Log::open(dir.path(), config(&clock)).unwrap();
    assert_eq!(log.config().min_compaction_lag_ms, 0);
    let schedule = log.compaction_schedule().unwrap();
    assert_eq!(
        schedule.first_uncleanable_offset, 4,
        "only the active segment is uncleanable: {schedule:?}"
    );
    let stats = log.compact().unwrap();
    assert_eq!(stats.cleaned_up_to, 4, "{stats:?}");
    assert_eq!(key_offsets(&log), [("a".into(), 3), ("end".into(), 4)]);
    assert!(!log.compaction_due().unwrap());
}

/// A positive `min.compaction.lag.ms` still holds a segment with a future timestamp back, as
/// Kafka's does.
#[test]
fn a_future_timestamp_holds_its_segment_back_under_a_min_lag() {
    let dir = tempfile::tempdir().unwrap();
    let ahead = T0 + 30 * 60 * 1000;
    write_segment(dir.path(), 0, &[("a", T0)]);
    write_segment(dir.path(), 1, &[("a", ahead)]);
    write_segment(dir.path(), 2, &[("a", T0)]);
    write_segment(dir.path(), 3, &[("end", T0)]);
    let clock = Arc::new(ManualClock::new(T0 + 1));
    let log = Log::open(
        dir.path(),
        builder(&clock).min_compaction_lag_ms(1).build().unwrap(),
    )
    .unwrap();
    let schedule = log.compaction_schedule().unwrap();
    assert_eq!(schedule.first_uncleanable_offset, 1, "{schedule:?}");
    assert_eq!(log.compact().unwrap().cleaned_up_to, 1);
    assert_eq!(key_offsets(&log).len(), 4);
}

/// Bug 7 (Kafka's `LogCleanerTest.testCleaningBeyondMissingOffsets`): segments 0-9 and 11, with
/// no offset 10. A pass must take the first dirty offset to 11, the next segment's base, not to
/// 10 inside the gap, where the schedule would find segment 0 dirty (and a pass due) forever.
#[test]
fn a_pass_takes_the_first_dirty_offset_across_an_offset_gap() {
    let dir = tempfile::tempdir().unwrap();
    let keys: Vec<String> = (0..10).map(|i| format!("k{i}")).collect();
    let records: Vec<(&str, i64)> = keys.iter().map(|k| (k.as_str(), T0)).collect();
    write_segment(dir.path(), 0, &records);
    write_segment(dir.path(), 11, &[("end", T0)]);
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(dir.path(), config(&clock)).unwrap();
    assert_eq!(log.stats().segments, 2);
    assert!(log.compaction_due().unwrap());
    let stats = log.compact().unwrap();
    assert_eq!(stats.cleaned_up_to, 11, "{stats:?}");
    let schedule = log.compaction_schedule().unwrap();
    assert_eq!(schedule.first_dirty_offset, 11, "{schedule:?}");
    assert_eq!(schedule.dirty_bytes, 0, "{schedule:?}");
    assert!(!schedule.due, "{schedule:?}");
    // The checkpoint holds it across a reopen.
    log.close().unwrap();
    drop(log);
    let log = Log::open(dir.path(), config(&clock)).unwrap();
    let schedule = log.compaction_schedule().unwrap();
    assert_eq!(schedule.first_dirty_offset, 11, "{schedule:?}");
    assert!(!schedule.due, "{schedule:?}");
    assert_eq!(key_offsets(&log).len(), 11);
}
