//! KIP-280's compaction orders (`compaction.strategy` `header` and `timestamp`): the record with
//! the highest version of each key stays, even when it is not the last; ties and records without
//! a version fall back to offset order; a full key map still cleans only what it mapped; a crash
//! at any step of a pass under the policy recovers.

#[cfg(feature = "sim")]
#[path = "common/fenced.rs"]
mod fenced_storage;

use std::sync::Arc;

use partlog::unstable::{Clock, ManualClock};
use partlog::{
    CleanupPolicy, CompactionOptions, Error, Log, LogConfig, LogConfigBuilder, NewRecord, ReadBound,
};

const T0: i64 = 1_700_000_000_000;
const SEGMENT_MS: i64 = 1_000;
const VERSION_HEADER: &str = "version";

fn builder(clock: &Arc<ManualClock>) -> LogConfigBuilder {
    LogConfig::builder_for_tests()
        .segment_bytes(64 * 1024)
        .segment_ms(SEGMENT_MS)
        .cleanup_policy(CleanupPolicy::COMPACT)
        .compaction_strategy("header")
        .compaction_strategy_header(VERSION_HEADER)
        .clock(Arc::clone(clock) as Arc<dyn Clock>)
}

/// Appends one record, with `version` in the version header when given, in its own segment:
/// the clock moves past `segment.ms` first, so the append seals the previous segment.
fn put(log: &Log, clock: &ManualClock, key: &str, version: Option<i64>, value: &str) -> i64 {
    clock.advance(SEGMENT_MS + 1);
    let mut record = NewRecord::new(clock.now_ms(), Some(key.as_bytes()), Some(value.as_bytes()));
    if let Some(version) = version {
        record = record.with_header(VERSION_HEADER, Some(&version.to_be_bytes()));
    }
    log.append(&[record]).unwrap().first_offset
}

/// Every record left, as (key, value, offset).
fn contents(log: &Log) -> Vec<(String, String, i64)> {
    log.records(log.log_start_offset(), ReadBound::LogEnd)
        .map(|record| {
            let record = record.unwrap();
            (
                String::from_utf8(record.key.unwrap()).unwrap(),
                String::from_utf8(record.value.unwrap()).unwrap(),
                record.offset,
            )
        })
        .collect()
}

fn entry(key: &str, value: &str, offset: i64) -> (String, String, i64) {
    (key.to_owned(), value.to_owned(), offset)
}

/// The records of the version-order example: per key, which one wins and why.
const EXAMPLE: [(&str, Option<i64>, &str); 10] = [
    ("a", Some(5), "a5"), // 0: the highest version of a, though not its last record
    ("a", Some(3), "a3"), // 1: later, lower: goes
    ("b", None, "b-old"), // 2: no version: loses to b1
    ("b", Some(1), "b1"), // 3: a version beats none
    ("b", None, "b-new"), // 4: later, but without a version: goes
    ("c", Some(2), "c2-first"), // 5: a tie with offset 6: the higher offset wins
    ("c", Some(2), "c2-second"), // 6
    ("d", None, "d1"),    // 7: neither has a version: offset order
    ("d", None, "d2"),    // 8
    ("end", Some(0), "end"), // 9: the active segment, never cleaned
];

fn example_winners() -> Vec<(String, String, i64)> {
    vec![
        entry("a", "a5", 0),
        entry("b", "b1", 3),
        entry("c", "c2-second", 6),
        entry("d", "d2", 8),
        entry("end", "end", 9),
    ]
}

#[test]
fn the_highest_header_version_wins_even_when_it_is_not_the_last() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(dir.path(), builder(&clock).build().unwrap()).unwrap();
    for (index, (key, version, value)) in EXAMPLE.into_iter().enumerate() {
        assert_eq!(put(&log, &clock, key, version, value), index as i64);
    }
    let stats = log.compact().unwrap();
    assert_eq!(stats.records_removed, 5, "{stats:?}");
    assert_eq!(contents(&log), example_winners());

    // A later record of a lower version, in the dirty part, loses to the one an earlier pass
    // kept in the clean part.
    assert_eq!(put(&log, &clock, "a", Some(4), "a4"), 10);
    put(&log, &clock, "end2", None, "end2");
    log.compact().unwrap();
    let mut expected = example_winners();
    expected.push(entry("end2", "end2", 11));
    assert_eq!(contents(&log), expected);

    // A higher version wins over it at last.
    assert_eq!(put(&log, &clock, "a", Some(9), "a9"), 12);
    put(&log, &clock, "end3", None, "end3");
    log.compact().unwrap();
    expected.retain(|(key, _, _)| key != "a");
    expected.insert(0, entry("a", "a9", 12));
    expected.sort_by_key(|&(_, _, offset)| offset);
    expected.push(entry("end3", "end3", 13));
    assert_eq!(contents(&log), expected);
    log.close().unwrap();

    // The policy is stored with the log: a reopen that names none compacts by it still.
    let reopened = LogConfig::builder_for_tests()
        .cleanup_policy(CleanupPolicy::COMPACT)
        .clock(Arc::clone(&clock) as Arc<dyn Clock>)
        .build()
        .unwrap();
    let log = Log::open(dir.path(), reopened).unwrap();
    assert_eq!(log.config().compaction_strategy, "header");
    assert_eq!(log.config().compaction_strategy_header, VERSION_HEADER);
    log.close().unwrap();
}

#[test]
fn the_timestamp_order_keeps_the_newest_timestamp_of_each_key() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let config = builder(&clock)
        .compaction_strategy("timestamp")
        .build()
        .unwrap();
    let log = Log::open(dir.path(), config).unwrap();
    for (key, timestamp, value) in [
        ("a", T0 + 500, "a-newest"),
        ("a", T0 + 100, "a-older"),
        ("b", T0 + 200, "b-first"),
        ("b", T0 + 200, "b-second"),
    ] {
        log.append(&[NewRecord::new(
            timestamp,
            Some(key.as_bytes()),
            Some(value.as_bytes()),
        )])
        .unwrap();
    }
    log.roll().unwrap();
    log.append(&[NewRecord::new(T0, Some(b"end"), Some(b"end"))])
        .unwrap();
    log.compact().unwrap();
    assert_eq!(
        contents(&log),
        [
            entry("a", "a-newest", 0),
            entry("b", "b-second", 3),
            entry("end", "end", 4)
        ]
    );
}

#[test]
fn a_header_order_without_a_header_name_is_refused() {
    let clock = Arc::new(ManualClock::new(T0));
    let Err(Error::InvalidConfig { setting, why }) =
        builder(&clock).compaction_strategy_header("").build()
    else {
        panic!("compaction.strategy=header without a header is refused");
    };
    assert_eq!(setting, "compaction.strategy.header");
    assert!(why.contains("header"), "{why}");
    let names: Vec<&str> = partlog::compaction_policies()
        .map(|info| info.name)
        .collect();
    assert_eq!(names, ["offset", "header", "timestamp"]);
}

/// The key map's bound holds under a version order: a map of one key cleans only the range it
/// mapped, each pass continues where the last stopped, and the passes end with the same
/// winners as one pass with a large map.
#[test]
fn a_full_key_map_cleans_only_what_it_mapped_under_a_version_order() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(dir.path(), builder(&clock).build().unwrap()).unwrap();
    for (key, version, value) in EXAMPLE {
        put(&log, &clock, key, version, value);
    }
    let end = log.compaction_schedule().unwrap().first_uncleanable_offset;
    let mut cleaned_up_to = 0;
    let mut passes = 0;
    while cleaned_up_to < end {
        let stats = log
            .compact_with(CompactionOptions::with_max_map_keys(1))
            .unwrap();
        assert!(stats.cleaned_up_to > cleaned_up_to, "{stats:?}");
        cleaned_up_to = stats.cleaned_up_to;
        passes += 1;
        assert!(passes <= EXAMPLE.len(), "no progress");
    }
    assert!(
        passes > 1,
        "a map of one key cannot clean four keys in one pass"
    );
    assert_eq!(contents(&log), example_winners());
}

/// A crash before each storage operation of a pass under the header order, with random and
/// with lose-everything-unsynced crash images: the reopened log holds every key's winner at
/// its offset and no leftover, and a pass after the reopen ends where an uncrashed one does.
#[cfg(feature = "sim")]
#[test]
fn a_crash_at_any_step_of_a_pass_under_a_version_order_keeps_every_winner() {
    use std::collections::BTreeMap;
    use std::path::Path;

    use partlog::FlushPolicy;
    use partlog::unstable::sim::{CrashConfig, FaultOp, FaultRule};
    use partlog::unstable::{SimStorage, Storage};

    let dir = Path::new("/data/compact-kip280");
    let setup = |seed: u64| {
        let sim = SimStorage::new(seed);
        let clock = Arc::new(ManualClock::new(T0));
        let config_on = |storage: Arc<dyn Storage>| {
            builder(&clock)
                .flush_policy(FlushPolicy::EveryAppend)
                .storage(storage)
                .build()
                .unwrap()
        };
        let config = config_on(Arc::new(sim.clone()));
        // The crashing process runs on fenced storage (see log_compaction.rs): once the machine
        // is down, none of its threads may change the image the reopen recovers.
        let fenced = fenced_storage::Fenced::new(Arc::new(sim.clone()), sim.clone());
        let log = Log::open(dir, config_on(Arc::new(fenced))).unwrap();
        for (key, version, value) in EXAMPLE {
            put(&log, &clock, key, version, value);
        }
        log.wait_durable(log.log_end_offset() - 1).unwrap();
        (sim, config, log)
    };
    let winners: BTreeMap<String, (String, i64)> = example_winners()
        .into_iter()
        .map(|(key, value, offset)| (key, (value, offset)))
        .collect();
    let mut crashes = 0;
    for lose_unsynced in [false, true] {
        for nth in 1.. {
            let (sim, config, log) = setup(nth);
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
            let log = Log::open(dir, config)
                .unwrap_or_else(|e| panic!("crash before operation {nth}: reopen failed: {e}"));
            // Wholly old or wholly new: every winner is there at its offset.
            let found = contents(&log);
            for (key, (value, offset)) in &winners {
                assert!(
                    found.contains(&entry(key, value, *offset)),
                    "crash before operation {nth}: {key}'s winner is gone: {found:?}"
                );
            }
            let leftovers: Vec<String> = sim
                .list(dir)
                .unwrap()
                .into_iter()
                .filter(|n| n.ends_with(".swap") || n.ends_with(".cleaned"))
                .collect();
            assert!(leftovers.is_empty(), "{leftovers:?}");
            log.compact().unwrap();
            assert_eq!(
                contents(&log),
                example_winners(),
                "crash before operation {nth}"
            );
            log.close().unwrap();
        }
    }
    assert!(crashes > 10, "only {crashes} crashes");
}
