//! Log compaction (ARCHITECTURE.md §3, invariant 8): what stays, offsets and gaps, tombstones and
//! their delete horizon, crash leftovers, and readers and appenders during a pass.

#[cfg(feature = "sim")]
#[path = "common/fenced.rs"]
mod fenced_storage;
#[path = "common/kafka.rs"]
mod kafka;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use partlog::unstable::ManualClock;
use partlog::{
    BatchBuilder, CleanupPolicy, CompactionOptions, Compression, Error, Log, LogConfig, LogRecord,
    NewRecord, ReadBound,
};
use proptest::prelude::*;

const T0: i64 = 1_700_000_000_000;
const SEGMENT_MS: i64 = 1_000;
const DELETE_RETENTION_MS: i64 = 10_000;

fn config(clock: &Arc<ManualClock>) -> LogConfig {
    LogConfig::builder_for_tests()
        .segment_bytes(64 * 1024)
        .segment_ms(SEGMENT_MS)
        .cleanup_policy(CleanupPolicy::COMPACT)
        .delete_retention_ms(DELETE_RETENTION_MS)
        .clock(Arc::clone(clock) as Arc<dyn partlog::unstable::Clock>)
        .build()
        .unwrap()
}

/// Appends one record in its own segment: the clock moves past `segment.ms` first, so the
/// append rolls the previous segment (which holds the previous record) to sealed.
fn put(log: &Log, clock: &ManualClock, key: &str, value: Option<&str>) -> i64 {
    clock.advance(SEGMENT_MS + 1);
    let now = clock.now();
    let info = log
        .append(&[NewRecord::new(
            now,
            Some(key.as_bytes()),
            value.map(str::as_bytes),
        )])
        .unwrap();
    info.first_offset
}

fn all_records(log: &Log) -> Vec<LogRecord> {
    log.records(log.log_start_offset(), ReadBound::LogEnd)
        .collect::<Result<Vec<_>, _>>()
        .unwrap()
}

fn key_value_offsets(log: &Log) -> Vec<(String, Option<String>, i64)> {
    all_records(log)
        .into_iter()
        .map(|r| {
            (
                String::from_utf8(r.key.unwrap()).unwrap(),
                r.value.map(|v| String::from_utf8(v).unwrap()),
                r.offset,
            )
        })
        .collect()
}

trait Now {
    fn now(&self) -> i64;
}

impl Now for ManualClock {
    fn now(&self) -> i64 {
        partlog::unstable::Clock::now_ms(self)
    }
}

fn kv(key: &str, value: &str, offset: i64) -> (String, Option<String>, i64) {
    (key.to_owned(), Some(value.to_owned()), offset)
}

#[test]
fn the_seeds_example_keeps_the_latest_value_of_each_key_at_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(dir.path(), config(&clock)).unwrap();
    for (key, value) in [
        ("user:1", "v1"),
        ("user:2", "v1"),
        ("user:1", "v2"),
        ("user:3", "v1"),
        ("user:2", "v2"),
    ] {
        put(&log, &clock, key, Some(value));
    }
    // A last record, so that `user:2 v2` sits in a sealed segment too.
    put(&log, &clock, "other", Some("x"));
    let stats = log.compact().unwrap();
    assert_eq!(stats.records_removed, 2);
    assert_eq!(stats.tombstones_removed, 0);
    // The five sealed segments are merged into one: none is left as an empty file.
    assert_eq!(stats.segments_cleaned, 5);
    assert_eq!(stats.segments_written, 1);
    assert_eq!(stats.cleaned_up_to, 5);
    assert!(stats.bytes_read > stats.bytes_written);
    assert_eq!(stats.uncleanable_from, None);
    let expected = vec![
        kv("user:1", "v2", 2),
        kv("user:3", "v1", 3),
        kv("user:2", "v2", 4),
        kv("other", "x", 5),
    ];
    assert_eq!(key_value_offsets(&log), expected);
    // A read that lands in a gap returns the next record.
    let data = log.read(0, 1 << 20, ReadBound::LogEnd).unwrap();
    let first = data.batches().next().unwrap().unwrap();
    assert_eq!(first.last_offset(), 2);
    // A second pass finds nothing more to do.
    let again = log.compact().unwrap();
    assert_eq!((again.records_removed, again.segments_cleaned), (0, 0));
    log.close().unwrap();
    drop(log);
    let names = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect::<std::collections::BTreeSet<_>>();
    for base in 0..6 {
        for suffix in ["log", "index", "timeindex"] {
            let name = format!("{base:020}.{suffix}");
            // The merged segment at 0 and the active one at 5; the merged-away ones are gone.
            let expected = base == 0 || base == 5;
            assert_eq!(names.contains(&name), expected, "{name} in {names:?}");
        }
    }
    let report = partlog::verify_dir(dir.path(), &config(&clock)).unwrap();
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    let log = Log::open(dir.path(), config(&clock)).unwrap();
    assert_eq!(key_value_offsets(&log), expected);
}

#[test]
fn a_batch_keeps_its_offsets_producer_fields_and_codec() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(dir.path(), config(&clock)).unwrap();
    let now = clock.now();
    let mut builder = BatchBuilder::new(Compression::Lz4).producer(77, 3, 10);
    for (key, value) in [("a", "1"), ("b", "1"), ("a", "2"), ("c", "1")] {
        builder.push(&NewRecord::new(
            now,
            Some(key.as_bytes()),
            Some(value.as_bytes()),
        ));
    }
    log.append_batch(&builder.build().unwrap()).unwrap();
    // `c` comes again later: the batch loses its last record, and keeps its last offset.
    put(&log, &clock, "c", Some("2"));
    put(&log, &clock, "z", Some("end"));
    let stats = log.compact().unwrap();
    assert_eq!(stats.records_removed, 2);
    let data = log.read(0, 1 << 20, ReadBound::LogEnd).unwrap();
    let batch = data.batches().next().unwrap().unwrap();
    let header = *batch.header().unwrap();
    assert_eq!(header.base_offset, 0);
    assert_eq!(header.last_offset_delta, 3);
    assert_eq!(header.records_count, 2);
    assert_eq!(
        (
            header.producer_id,
            header.producer_epoch,
            header.base_sequence
        ),
        (77, 3, 10)
    );
    assert_eq!(header.compression().unwrap(), Compression::Lz4);
    assert_eq!(
        key_value_offsets(&log),
        vec![
            kv("b", "1", 1),
            kv("a", "2", 2),
            kv("c", "2", 4),
            kv("z", "end", 5)
        ]
    );
}

/// A read that starts inside a batch steps over the records below its offset by their offset
/// deltas (`RecordIter::skip_below`): in compacted batches, whose deltas have holes, every
/// offset reads from the first surviving record at or above it, in both codecs, through both
/// record views, while another thread appends to the log.
#[test]
fn a_read_from_any_offset_of_a_compacted_batch_starts_at_the_next_survivor() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Arc::new(Log::open(dir.path(), config(&clock)).unwrap());
    for (batch, codec) in [Compression::None, Compression::Lz4, Compression::None]
        .into_iter()
        .enumerate()
    {
        let now = clock.now();
        let mut builder = BatchBuilder::new(codec);
        for n in 0..30 {
            // Every third record shares a key with the others of its batch: one of them stays.
            let key = match n % 3 {
                0 => format!("shared-{batch}"),
                _ => format!("k-{batch}-{n}"),
            };
            builder.push(&NewRecord::new(
                now,
                Some(key.as_bytes()),
                Some(key.as_bytes()),
            ));
        }
        log.append_batch(&builder.build().unwrap()).unwrap();
    }
    put(&log, &clock, "roll", Some("x"));
    let stats = log.compact().unwrap();
    assert_eq!(
        stats.records_removed, 27,
        "nine of each batch's ten shared keys"
    );
    let survivors = all_records(&log);
    let end = survivors.last().unwrap().offset + 1;
    let appender = {
        let log = Arc::clone(&log);
        std::thread::spawn(move || {
            for n in 0..300 {
                let key = format!("late-{n}");
                log.append(&[NewRecord::new(T0, Some(key.as_bytes()), Some(b"v"))])
                    .unwrap();
            }
        })
    };
    let mut scratch = Vec::new();
    for offset in 0..end {
        let expected = survivors.iter().find(|r| r.offset >= offset).unwrap();
        let first = log
            .records(offset, ReadBound::LogEnd)
            .next()
            .unwrap()
            .unwrap();
        assert_eq!(&first, expected, "records({offset})");
        // One batch a read: a batch whose last records went keeps its last offset, so a read
        // of one of theirs returns it with nothing at or above the offset; the next read goes
        // on from its next offset, as a consumer's does.
        let (mut at, mut visited) = (offset, None);
        while visited.is_none() {
            let fetch = log.read(at, 1, ReadBound::LogEnd).unwrap();
            assert!(!fetch.is_empty(), "a survivor lies above {offset}");
            fetch
                .for_each_record(&mut scratch, |record| {
                    visited = Some((record.offset, record.value.map(<[u8]>::to_vec)));
                    std::ops::ControlFlow::Break(())
                })
                .unwrap();
            at = fetch.next_offset();
        }
        assert_eq!(
            visited,
            Some((expected.offset, expected.value.clone())),
            "for_each_record from {offset}"
        );
    }
    appender.join().unwrap();
}

#[test]
fn a_tombstone_gets_its_horizon_then_goes_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(dir.path(), config(&clock)).unwrap();
    put(&log, &clock, "k", Some("v"));
    put(&log, &clock, "k", None);
    put(&log, &clock, "other", Some("x"));
    let first = log.compact().unwrap();
    let pass_time = clock.now();
    assert_eq!((first.records_removed, first.tombstones_removed), (1, 0));
    let data = log.read(1, 1 << 20, ReadBound::LogEnd).unwrap();
    let batch = data.batches().next().unwrap().unwrap();
    let header = *batch.header().unwrap();
    assert_eq!(
        header.delete_horizon_ms(),
        Some(pass_time + DELETE_RETENTION_MS)
    );
    assert_eq!(
        key_value_offsets(&log),
        vec![("k".to_owned(), None, 1), kv("other", "x", 2)]
    );
    // Before the horizon the tombstone stays.
    clock.advance(DELETE_RETENTION_MS - 1);
    let early = log.compact().unwrap();
    assert_eq!(early.tombstones_removed, 0);
    assert_eq!(all_records(&log).len(), 2);
    clock.advance(1);
    let late = log.compact().unwrap();
    assert_eq!((late.records_removed, late.tombstones_removed), (1, 1));
    assert_eq!(key_value_offsets(&log), vec![kv("other", "x", 2)]);
}

#[test]
fn a_log_without_compact_policy_refuses_a_pass() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::for_tests()).unwrap();
    assert!(matches!(log.compact(), Err(Error::InvalidArgument { .. })));
}

#[test]
fn a_full_key_map_cleans_only_what_it_mapped() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(dir.path(), config(&clock)).unwrap();
    for (key, value) in [("a", "1"), ("a", "2"), ("b", "1"), ("a", "3"), ("b", "2")] {
        put(&log, &clock, key, Some(value));
    }
    put(&log, &clock, "end", Some("x"));
    // Two keys fit: the map covers offsets 0..3. The record at 3 finds it full and ends the
    // mapped range, although its key is in the map (Kafka's rule).
    let stats = log
        .compact_with(CompactionOptions::with_max_map_keys(2))
        .unwrap();
    assert_eq!(stats.cleaned_up_to, 3);
    assert_eq!(stats.records_removed, 1);
    assert_eq!(
        key_value_offsets(&log),
        vec![
            kv("a", "2", 1),
            kv("b", "1", 2),
            kv("a", "3", 3),
            kv("b", "2", 4),
            kv("end", "x", 5)
        ]
    );
    let full = log.compact().unwrap();
    assert_eq!(full.records_removed, 2);
    assert_eq!(
        key_value_offsets(&log),
        vec![kv("a", "3", 3), kv("b", "2", 4), kv("end", "x", 5)]
    );
}

#[test]
fn a_reader_on_an_old_segment_finishes_on_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(dir.path(), config(&clock)).unwrap();
    put(&log, &clock, "k", Some("old"));
    put(&log, &clock, "k", Some("new"));
    put(&log, &clock, "end", Some("x"));
    // The fetch pins segment 0 and holds its bytes' source.
    let before = log.read(0, 1 << 20, ReadBound::LogEnd).unwrap();
    log.compact().unwrap();
    let batch = before.batches().next().unwrap().unwrap();
    assert_eq!(batch.last_offset(), 0);
    let mut scratch = Vec::new();
    let records: Vec<_> = batch
        .records(&mut scratch)
        .unwrap()
        .map(|r| r.unwrap().value.map(<[u8]>::to_vec))
        .collect();
    assert_eq!(records, vec![Some(b"old".to_vec())]);
    drop(before);
    // A new read skips the gap.
    let after = log.read(0, 1 << 20, ReadBound::LogEnd).unwrap();
    assert_eq!(after.batches().next().unwrap().unwrap().last_offset(), 1);
}

#[test]
fn appenders_and_readers_keep_going_during_passes() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let config = LogConfig::builder_for_tests()
        .segment_bytes(1024)
        .cleanup_policy(CleanupPolicy::COMPACT)
        .clock(Arc::clone(&clock) as Arc<dyn partlog::unstable::Clock>)
        .build()
        .unwrap();
    let log = Arc::new(Log::open(dir.path(), config).unwrap());
    const N: i64 = 400;
    let appender = {
        let log = Arc::clone(&log);
        std::thread::spawn(move || {
            for i in 0..N {
                let key = format!("key-{}", i % 7);
                let value = format!("value-{i}-{}", "x".repeat(40));
                log.append(&[NewRecord::new(
                    T0,
                    Some(key.as_bytes()),
                    Some(value.as_bytes()),
                )])
                .unwrap();
            }
        })
    };
    let reader = {
        let log = Arc::clone(&log);
        std::thread::spawn(move || {
            let mut reads = 0;
            while log.log_end_offset() < N {
                let mut last = -1;
                for record in log.records(0, ReadBound::LogEnd) {
                    let record = record.unwrap();
                    assert!(record.offset > last, "offsets go up");
                    last = record.offset;
                }
                reads += 1;
            }
            reads
        })
    };
    let mut passes = 0;
    while log.log_end_offset() < N {
        log.compact().unwrap();
        passes += 1;
    }
    appender.join().unwrap();
    assert!(reader.join().unwrap() > 0);
    assert!(passes > 0);
    log.compact().unwrap();
    // Each key's last value is there, at its offset.
    let mut latest = BTreeMap::new();
    for record in all_records(&log) {
        latest.insert(record.key.unwrap(), (record.offset, record.value.unwrap()));
    }
    assert_eq!(latest.len(), 7);
    for (key, (offset, value)) in latest {
        let key = String::from_utf8(key).unwrap();
        let expected_last = (0..N)
            .rev()
            .find(|i| format!("key-{}", i % 7) == key)
            .unwrap();
        assert_eq!(offset, expected_last);
        assert!(
            String::from_utf8(value)
                .unwrap()
                .starts_with(&format!("value-{expected_last}-"))
        );
    }
}

#[test]
fn open_completes_a_swap_and_drops_a_cleaned_file() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(dir.path(), config(&clock)).unwrap();
    put(&log, &clock, "k", Some("old"));
    put(&log, &clock, "k", Some("new"));
    put(&log, &clock, "end", Some("x"));
    log.close().unwrap();
    drop(log);
    let name = |suffix: &str| dir.path().join(format!("{:020}.log{suffix}", 0));
    // An interrupted pass: segment 0's cleaned copy (empty: its record was superseded) reached
    // `.swap`, and the old segment was already renamed `.deleted`; a `.cleaned` of segment 1
    // never got further.
    std::fs::write(name(".swap"), b"").unwrap();
    std::fs::rename(name(""), name(".deleted")).unwrap();
    std::fs::write(dir.path().join(format!("{:020}.log.cleaned", 1)), b"junk").unwrap();
    let log = Log::open(dir.path(), config(&clock)).unwrap();
    assert_eq!(
        key_value_offsets(&log),
        vec![kv("k", "new", 1), kv("end", "x", 2)]
    );
    let names = leftover_names(dir.path());
    assert!(names.is_empty(), "{names:?}");
}

/// A crash keeps a prefix of a swap's renames: here the old segment's `.log` went to `.deleted`
/// but its `.index` and `.timeindex` did not, and the `.swap` was not yet renamed. Open must
/// delete the old segment's index files along with its `.log`, or the cleaned `.log` inherits
/// index entries for records it no longer holds (found by the crash matrix).
#[test]
fn open_completes_a_swap_whose_old_log_was_renamed_before_its_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(dir.path(), config(&clock)).unwrap();
    // One batch at 0 whose last record, with the largest timestamp, is a tombstone.
    clock.advance(SEGMENT_MS + 1);
    let now = clock.now();
    log.append(&[
        NewRecord::new(now, Some(b"a"), Some(b"a0")),
        NewRecord::new(now + 1, Some(b"b"), Some(b"b1")),
        NewRecord::new(now + 2, Some(b"c"), None),
    ])
    .unwrap();
    // Past the batch's largest timestamp too, so that the next record rolls.
    clock.advance(2);
    put(&log, &clock, "end", Some("x"));
    // The first pass writes the tombstone's horizon.
    assert_eq!(log.compact().unwrap().segments_written, 1);
    log.close().unwrap();
    drop(log);
    let path = |suffix: &str| dir.path().join(format!("{:020}{suffix}", 0));
    assert!(std::fs::metadata(path(".timeindex")).unwrap().len() > 0);
    // The second pass, past the horizon, drops the tombstone: made in a copy of the log, it
    // gives the cleaned copy of segment 0 (the batch keeps its last offset, 2, but its largest
    // timestamp is now b's).
    let copy = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), copy.path().join(entry.file_name())).unwrap();
    }
    clock.advance(DELETE_RETENTION_MS);
    let copied = Log::open(copy.path(), config(&clock)).unwrap();
    assert_eq!(copied.compact().unwrap().tombstones_removed, 1);
    copied.close().unwrap();
    drop(copied);
    std::fs::copy(
        copy.path().join(format!("{:020}.log", 0)),
        path(".log.swap"),
    )
    .unwrap();
    std::fs::rename(path(".log"), path(".log.deleted")).unwrap();

    let log = Log::open(dir.path(), config(&clock)).unwrap();
    assert_eq!(
        key_value_offsets(&log),
        vec![kv("a", "a0", 0), kv("b", "b1", 1), kv("end", "x", 3)]
    );
    log.close().unwrap();
    drop(log);
    let names = leftover_names(dir.path());
    assert!(names.is_empty(), "{names:?}");
    let report = partlog::verify_dir(dir.path(), &config(&clock)).unwrap();
    assert!(report.findings.is_empty(), "{:?}", report.findings);
}

fn leftover_names(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".swap") || n.ends_with(".cleaned") || n.ends_with(".deleted"))
        .collect()
}

#[derive(Debug, Clone)]
enum Op {
    Put(u8, u8),
    Delete(u8),
    Compact,
    Reopen,
    Advance(i64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0u8..6, any::<u8>()).prop_map(|(k, v)| Op::Put(k, v)),
        2 => (0u8..6).prop_map(Op::Delete),
        2 => Just(Op::Compact),
        1 => Just(Op::Reopen),
        1 => (0..DELETE_RETENTION_MS * 2).prop_map(Op::Advance),
    ]
}

/// The latest record per key in the log, in offset order.
fn latest_per_key(log: &Log) -> BTreeMap<String, (i64, Option<String>)> {
    let mut latest = BTreeMap::new();
    let mut last = -1;
    for (key, value, offset) in key_value_offsets(log) {
        assert!(offset > last);
        last = offset;
        latest.insert(key, (offset, value));
    }
    latest
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn compaction_agrees_with_a_model(ops in proptest::collection::vec(op(), 1..40)) {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(T0));
        let mut log = Log::open(dir.path(), config(&clock)).unwrap();
        // key -> (offset, value) of its last put or delete
        let mut model: BTreeMap<String, (i64, Option<String>)> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Put(k, v) => {
                    let key = format!("k{k}");
                    let value = format!("v{v}");
                    let offset = put(&log, &clock, &key, Some(&value));
                    model.insert(key, (offset, Some(value)));
                }
                Op::Delete(k) => {
                    let key = format!("k{k}");
                    let offset = put(&log, &clock, &key, None);
                    model.insert(key, (offset, None));
                }
                Op::Compact => {
                    log.compact().unwrap();
                }
                Op::Reopen => {
                    log.close().unwrap();
                    drop(log);
                    log = Log::open(dir.path(), config(&clock)).unwrap_or_else(|e| panic!("reopen: {e:?}"));
                }
                Op::Advance(ms) => {
                    clock.advance(ms);
                }
            }
            let in_log = latest_per_key(&log);
            for (key, (offset, value)) in &model {
                match (value, in_log.get(key)) {
                    (Some(_), found) => prop_assert_eq!(found, Some(&(*offset, value.clone()))),
                    // A deleted key: its tombstone, or nothing once the tombstone went.
                    (None, Some(found)) => prop_assert_eq!(found, &(*offset, None)),
                    (None, None) => {}
                }
            }
            prop_assert!(in_log.keys().all(|k| model.contains_key(k)));
        }
        // Settle: a last record seals everything, a pass sets the horizons, and a pass after
        // them removes every tombstone and every superseded record.
        let end = put(&log, &clock, "end", Some("x"));
        model.insert("end".into(), (end, Some("x".into())));
        log.compact().unwrap();
        clock.advance(DELETE_RETENTION_MS);
        log.compact().unwrap();
        let records = key_value_offsets(&log);
        let expected: Vec<_> = {
            let mut live: Vec<_> = model
                .iter()
                .filter_map(|(k, (o, v))| v.as_ref().map(|v| (k.clone(), Some(v.clone()), *o)))
                .collect();
            live.sort_by_key(|(_, _, o)| *o);
            live
        };
        prop_assert_eq!(records, expected);
    }
}

/// A crash before each storage operation of a pass (the first pass, which writes horizons, and
/// a later one, which drops tombstones), with random and with lose-everything-unsynced crash
/// images: the reopened log holds every key's latest record at its offset, and no leftover.
#[cfg(feature = "sim")]
#[test]
fn a_crash_at_any_step_of_a_pass_keeps_every_latest_value() {
    use partlog::FlushPolicy;
    use partlog::unstable::sim::{CrashConfig, FaultOp, FaultRule};
    use partlog::unstable::{SimStorage, Storage};

    let dir = Path::new("/data/compact-0");
    let setup = |seed: u64, late: bool| {
        let sim = SimStorage::new(seed);
        let clock = Arc::new(ManualClock::new(T0));
        let config_on = |storage: Arc<dyn Storage>| {
            LogConfig::builder_for_tests()
                .segment_bytes(64 * 1024)
                .segment_ms(SEGMENT_MS)
                .cleanup_policy(CleanupPolicy::COMPACT)
                .delete_retention_ms(DELETE_RETENTION_MS)
                .flush_policy(FlushPolicy::EveryAppend)
                .storage(storage)
                .clock(Arc::clone(&clock) as Arc<dyn partlog::unstable::Clock>)
                .build()
                .unwrap()
        };
        // The process that crashes runs on fenced storage: once the machine is down, none of
        // its threads may rename or remove a file in the image the next open recovers (the
        // simulator kills handles, not path operations). The reopen is a new process.
        let config = config_on(Arc::new(sim.clone()));
        let fenced = fenced_storage::Fenced::new(Arc::new(sim.clone()), sim.clone());
        let log = Log::open(dir, config_on(Arc::new(fenced))).unwrap();
        let mut model = BTreeMap::new();
        for (i, (key, value)) in [
            ("a", Some("1")),
            ("b", Some("1")),
            ("a", Some("2")),
            ("c", Some("1")),
            ("b", None),
            ("c", Some("2")),
            ("d", Some("1")),
            ("end", Some("x")),
        ]
        .into_iter()
        .enumerate()
        {
            let offset = put(&log, &clock, key, value);
            assert_eq!(offset, i as i64);
            model.insert(key.to_owned(), (offset, value.map(str::to_owned)));
        }
        if late {
            log.wait_durable(log.log_end_offset() - 1).unwrap();
            log.compact().unwrap();
            clock.advance(DELETE_RETENTION_MS);
            // Two more sealed segments, so that the later pass merges three segments (the
            // first pass's merged one among them) into one.
            for key in ["e", "end2"] {
                let offset = put(&log, &clock, key, Some("1"));
                model.insert(key.to_owned(), (offset, Some("1".to_owned())));
            }
        }
        log.wait_durable(log.log_end_offset() - 1).unwrap();
        (sim, config, log, model)
    };
    let segment_bases = |sim: &SimStorage| -> Vec<i64> {
        let mut bases: Vec<i64> = sim
            .list(dir)
            .unwrap()
            .into_iter()
            .filter_map(|n| n.strip_suffix(".log").and_then(|b| b.parse().ok()))
            .collect();
        bases.sort_unstable();
        bases
    };
    let mut crashes = 0;
    for late in [false, true] {
        // Each group of the pass is wholly old or wholly new after any crash.
        let (sim, _, log, _) = setup(0, late);
        let old_bases = segment_bases(&sim);
        let stats = log.compact().unwrap();
        assert!(stats.segments_cleaned >= 3, "{stats:?}");
        assert_eq!(stats.segments_written, 1, "{stats:?}");
        let new_bases = segment_bases(&sim);
        assert!(new_bases.len() < old_bases.len());
        drop(log);
        for lose_unsynced in [false, true] {
            for nth in 1.. {
                let (sim, config, log, model) = setup(nth, late);
                let crash = if lose_unsynced {
                    CrashConfig::lose_unsynced()
                } else {
                    CrashConfig::random().seed(nth)
                };
                let before = sim.stats().crashes;
                sim.inject(FaultRule::crash(FaultOp::Any, nth).crash_config(crash));
                let outcome = log.compact();
                sim.clear_faults();
                let crashed = sim.stats().crashes > before;
                drop(log);
                if !crashed {
                    outcome.unwrap();
                    assert!(nth > 5, "a pass takes more than a few operations");
                    break;
                }
                crashes += 1;
                let log = Log::open(dir, config).unwrap_or_else(|e| {
                    panic!("late {late}, crash before operation {nth}: reopen failed: {e}")
                });
                let bases = segment_bases(&sim);
                assert!(
                    bases == old_bases || bases == new_bases,
                    "late {late}, crash before operation {nth}: segments {bases:?}, \
                     neither {old_bases:?} nor {new_bases:?}"
                );
                let in_log = latest_per_key(&log);
                for (key, (offset, value)) in &model {
                    match (value, in_log.get(key)) {
                        (Some(_), found) => assert_eq!(
                            found,
                            Some(&(*offset, value.clone())),
                            "late {late}, crash before operation {nth}: key {key}"
                        ),
                        (None, Some(found)) => assert_eq!(found, &(*offset, None)),
                        (None, None) => {}
                    }
                }
                let names: Vec<String> = sim
                    .list(dir)
                    .unwrap()
                    .into_iter()
                    .filter(|n| n.ends_with(".swap") || n.ends_with(".cleaned"))
                    .collect();
                assert!(names.is_empty(), "{names:?}");
                // The reopened log compacts to the same result as an uncrashed one.
                log.compact().unwrap();
                let after = latest_per_key(&log);
                assert_eq!(after.get("a"), Some(&(2, Some("2".to_owned()))));
                assert_eq!(after.get("c"), Some(&(5, Some("2".to_owned()))));
                log.close().unwrap();
            }
        }
    }
    assert!(crashes > 20, "only {crashes} crashes");
}

/// Kafka's DumpLogSegments reads every compacted segment (deep iteration, every index entry
/// checked) with no complaint but the expected "Non-consecutive offsets", and prints the
/// records that stayed. Skipped when the Kafka tools are not installed.
#[test]
fn dump_log_segments_reads_compacted_segments() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(dir.path(), config(&clock)).unwrap();
    let now = clock.now();
    // A producer batch whose records all go: it stays as an empty header.
    let mut producer = BatchBuilder::new(Compression::None).producer(9, 0, 0);
    producer.push(&NewRecord::new(now, Some(b"key-1"), Some(b"first")));
    log.append_batch(&producer.build().unwrap()).unwrap();
    // Batches of several records, some compressed, so that gaps fall inside batches.
    for (round, codec) in [Compression::None, Compression::Lz4, Compression::None]
        .into_iter()
        .enumerate()
    {
        clock.advance(SEGMENT_MS + 1);
        let mut builder = BatchBuilder::new(codec);
        for key in 0..8 {
            let value = format!("round {round}");
            let value = (key % 3 != 0 || round == 2).then_some(value.as_bytes().to_vec());
            builder.push(&NewRecord::new(
                now,
                Some(format!("key-{key}").as_bytes()),
                value.as_deref(),
            ));
        }
        log.append_batch(&builder.build().unwrap()).unwrap();
        put(&log, &clock, &format!("single-{round}"), Some("x"));
    }
    put(&log, &clock, "key-1", Some("last"));
    put(&log, &clock, "gone", None);
    put(&log, &clock, "end", Some("x"));
    let stats = log.compact().unwrap();
    assert!(stats.records_removed >= 16, "{stats:?}");
    log.close().unwrap();
    drop(log);
    let Some(dump) = kafka::dump_deep(dir.path()) else {
        return;
    };
    kafka::assert_clean_deep_dump(&dump);
    assert!(
        !kafka::non_consecutive_offsets(&dump).is_empty(),
        "{dump:?}"
    );
    let batches = kafka::parse_batches(&dump);
    let empty = batches
        .iter()
        .find(|b| b.producer_id == 9)
        .expect("the empty header");
    assert_eq!(
        (empty.base_offset, empty.last_offset, empty.count),
        (0, 0, Some(0))
    );
    assert!(empty.is_valid);
    // Tombstones kept by this first pass carry their delete horizon.
    assert!(
        batches.iter().any(|b| b.delete_horizon_ms.is_some()),
        "{dump:?}"
    );
    let records = kafka::parse_records(&dump);
    let log = Log::open_read_only(dir.path(), config(&clock)).unwrap();
    let ours = all_records(&log);
    assert_eq!(records.len(), ours.len(), "{dump:?}");
}

/// Kafka's RETAIN_EMPTY: the last batch of a producer id whose records all went stays as an
/// empty header (same offsets and producer fields, no records) until it is a day old.
#[test]
fn a_producers_last_batch_stays_as_an_empty_header_for_a_day() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(dir.path(), config(&clock)).unwrap();
    let now = clock.now();
    let producer_batch = |base_sequence: i32| {
        let mut builder = BatchBuilder::new(Compression::Lz4).producer(42, 7, base_sequence);
        for key in ["a", "b"] {
            builder.push(&NewRecord::new(now, Some(key.as_bytes()), Some(b"old")));
        }
        builder.build().unwrap()
    };
    log.append_batch(&producer_batch(0)).unwrap();
    clock.advance(SEGMENT_MS + 1);
    log.append_batch(&producer_batch(2)).unwrap();
    put(&log, &clock, "a", Some("new"));
    put(&log, &clock, "b", Some("new"));
    put(&log, &clock, "end", Some("x"));
    let first_header = |log: &Log| {
        let data = log.read(0, 1 << 20, ReadBound::LogEnd).unwrap();
        *data.batches().next().unwrap().unwrap().header().unwrap()
    };
    let stats = log.compact().unwrap();
    assert_eq!(stats.records_removed, 4);
    // The producer's first batch went; its last one (offsets 2..=3) is an empty header.
    let header = first_header(&log);
    assert_eq!(header.base_offset, 2);
    assert_eq!(header.last_offset_delta, 1);
    assert_eq!(header.records_count, 0);
    assert_eq!(
        (
            header.producer_id,
            header.producer_epoch,
            header.base_sequence
        ),
        (42, 7, 2)
    );
    assert_eq!(header.compression().unwrap(), Compression::None);
    assert_eq!(
        key_value_offsets(&log),
        vec![kv("a", "new", 4), kv("b", "new", 5), kv("end", "x", 6)]
    );
    // Kept as it is by the next pass ...
    assert_eq!(log.compact().unwrap().segments_cleaned, 0);
    assert_eq!(first_header(&log).base_offset, 2);
    // ... until it is older than producer.id.expiration.ms (1 day).
    clock.advance(24 * 60 * 60 * 1000);
    assert_eq!(log.compact().unwrap().segments_cleaned, 1);
    assert_eq!(first_header(&log).base_offset, 4);
}

/// A key map that holds one key still cleans the whole log: each pass maps from where the last
/// one stopped, and the result is what one unbounded pass gives.
#[test]
fn a_one_key_map_makes_progress_until_the_log_is_clean() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(dir.path(), config(&clock)).unwrap();
    let mut expected = BTreeMap::new();
    for i in 0..30i64 {
        let key = format!("k{}", (i * 7) % 5);
        let value = format!("v{i}");
        let offset = put(&log, &clock, &key, Some(&value));
        expected.insert(key, (offset, Some(value)));
    }
    let end = put(&log, &clock, "end", Some("x"));
    expected.insert("end".to_owned(), (end, Some("x".to_owned())));
    let mut passes = 0;
    let mut cleaned_up_to = 0;
    while cleaned_up_to < end {
        let stats = log
            .compact_with(CompactionOptions::with_max_map_keys(1))
            .unwrap();
        assert!(
            stats.cleaned_up_to > cleaned_up_to,
            "no progress: {stats:?}"
        );
        cleaned_up_to = stats.cleaned_up_to;
        passes += 1;
        assert!(passes <= 30, "too many passes");
    }
    assert!(passes > 1);
    let records = key_value_offsets(&log);
    assert_eq!(records.len(), expected.len(), "{records:?}");
    assert_eq!(latest_per_key(&log), expected);
}

/// After a truncation the offsets above it are reused, so the next pass maps them again.
#[test]
fn a_truncation_makes_the_reused_offsets_dirty_again() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(dir.path(), config(&clock)).unwrap();
    for key in ["a", "c", "d", "e", "end"] {
        put(&log, &clock, key, Some("1"));
    }
    assert_eq!(log.compact().unwrap().cleaned_up_to, 4);
    assert_eq!(log.truncate_to(1).unwrap(), 1);
    for key in ["b", "b", "x", "y", "end"] {
        put(&log, &clock, key, Some("2"));
    }
    let stats = log.compact().unwrap();
    assert_eq!(stats.records_removed, 1);
    assert_eq!(
        key_value_offsets(&log),
        vec![
            kv("a", "1", 0),
            kv("b", "2", 2),
            kv("x", "2", 3),
            kv("y", "2", 4),
            kv("end", "2", 5)
        ]
    );
}

/// The cleaned `.log` keeps the old one's mtime: time retention counts a segment's age from it.
#[test]
fn a_cleaned_segment_keeps_its_mtime() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(dir.path(), config(&clock)).unwrap();
    put(&log, &clock, "k", Some("old"));
    put(&log, &clock, "k", Some("new"));
    put(&log, &clock, "end", Some("x"));
    let path = |base: i64| dir.path().join(format!("{base:020}.log"));
    // The merged segment takes the mtime of the group's last `.log`, as Kafka's cleaner does.
    let first = std::fs::metadata(path(0)).unwrap().modified().unwrap();
    let last = std::fs::metadata(path(1)).unwrap().modified().unwrap();
    assert!(first < last);
    clock.advance(60_000);
    let stats = log.compact().unwrap();
    assert_eq!((stats.segments_cleaned, stats.segments_written), (2, 1));
    assert!(!path(1).exists());
    assert_eq!(
        std::fs::metadata(path(0)).unwrap().modified().unwrap(),
        last
    );
}

/// A `.log` file holding one batch at `base` of `(key, value)` records, one offset each.
fn write_segment(dir: &Path, base: i64, records: &[(&str, &str)]) {
    let mut builder = BatchBuilder::new(Compression::None).base_offset(base);
    for (key, value) in records {
        builder.push(&NewRecord::new(
            T0,
            Some(key.as_bytes()),
            Some(value.as_bytes()),
        ));
    }
    std::fs::write(
        dir.join(format!("{base:020}.log")),
        builder.build().unwrap(),
    )
    .unwrap();
}

/// Kafka's `groupSegmentsBySize` keeps a group's last offset within i32 of its base, since index
/// entries hold offsets relative to the segment's base. Two tiny segments three billion offsets
/// apart (a compacted Kafka log can have such a gap) must be cleaned as two groups, not merged.
#[test]
fn segments_further_apart_than_the_i32_relative_range_are_not_merged() {
    const FAR: i64 = 3_000_000_000;
    let dir = tempfile::tempdir().unwrap();
    write_segment(dir.path(), 0, &[("a", "a0"), ("b", "b1"), ("a", "a2")]);
    write_segment(dir.path(), FAR, &[("a", "a3"), ("c", "c4"), ("c", "c5")]);
    write_segment(dir.path(), FAR + 3, &[("d", "d6")]);
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(dir.path(), config(&clock)).unwrap();
    assert_eq!(log.stats().segments, 3);
    let stats = log.compact().unwrap();
    assert_eq!(stats.cleaned_up_to, FAR + 3, "{stats:?}");
    // Without the range rule the two sealed segments (a few hundred bytes) would be one group.
    assert_eq!(log.stats().segments, 3, "{stats:?}");
    assert_eq!(
        key_value_offsets(&log),
        vec![
            kv("b", "b1", 1),
            kv("a", "a3", FAR),
            kv("c", "c5", FAR + 2),
            kv("d", "d6", FAR + 3),
        ]
    );
    log.close().unwrap();
    let report = partlog::verify_dir(dir.path(), &config(&clock)).unwrap();
    assert_eq!(report.worst(), None, "{report:?}");
    let log = Log::open(dir.path(), config(&clock)).unwrap();
    assert_eq!(
        key_value_offsets(&log).last(),
        Some(&kv("d", "d6", FAR + 3))
    );
}
