//! A clean open writes and syncs nothing, and its clean-shutdown record stands until the log's
//! first change (ARCHITECTURE.md §3, invariant 21; FORMAT.md §6.2): every change consumes it
//! durably before it touches a file, so a crash after any change recovers, and a crash before
//! one trusts the record again. A close before any change writes nothing either.
#![cfg(feature = "sim")] // the simulator and the manual clock: `cargo test --all-features`

use std::path::Path;
use std::sync::Arc;

// The process that crashes runs on fenced storage: once the machine is down, its `close` (the
// drop after the crash) can change nothing in the image the next open recovers.
#[path = "common/fenced.rs"]
mod fenced_storage;
use fenced_storage::fenced_config;

use partlog::unstable::sim::{CrashConfig, FaultError, FaultOp};
use partlog::unstable::{ManualClock, SimStorage, Storage};
use partlog::{Error, FlushPolicy, Log, LogConfig, NewRecord, ReadBound};

const T0: i64 = 1_700_000_000_000;
const DIR: &str = "/clean-open/p-0";
const CHECKPOINT: &str = "/clean-open/p-0/partlog.checkpoint";

fn config(sim: &SimStorage) -> LogConfig {
    config_flushing(sim, FlushPolicy::OsDecides)
}

fn config_flushing(sim: &SimStorage, flush_policy: FlushPolicy) -> LogConfig {
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    LogConfig::builder_for_tests()
        .segment_bytes(2048)
        .index_interval_bytes(128)
        .flush_policy(flush_policy)
        .storage(storage)
        .clock(Arc::new(ManualClock::new(T0)))
        .build()
        .unwrap()
}

fn record(i: i64) -> NewRecord {
    NewRecord::new(T0 + i, Some(b"key"), Some(format!("value {i}").as_bytes()))
}

fn values(log: &Log) -> Vec<(i64, Vec<u8>)> {
    log.records(log.log_start_offset(), ReadBound::LogEnd)
        .map(|r| r.map(|r| (r.offset, r.value.unwrap_or_default())))
        .collect::<partlog::Result<_>>()
        .unwrap()
}

/// A log of 40 records over several segments, closed cleanly.
fn closed_log(seed: u64) -> (SimStorage, Vec<(i64, Vec<u8>)>) {
    let sim = SimStorage::new(seed);
    let log = Log::open(DIR, config(&sim)).unwrap();
    for i in 0..40 {
        log.append(&[record(i)]).unwrap();
    }
    assert!(log.stats().rolls > 0, "several segments");
    let all = values(&log);
    log.close().unwrap();
    (sim, all)
}

#[test]
fn a_clean_open_that_changes_nothing_syncs_and_writes_nothing() {
    let (sim, all) = closed_log(1);
    let checkpoint_before = sim.file_state(Path::new(CHECKPOINT)).unwrap();
    let before = sim.stats();
    let log = Log::open(DIR, fenced_config(config(&sim), &sim)).unwrap();
    assert!(log.recovery_report().clean_shutdown);
    assert_eq!(values(&log), all);
    let after = sim.stats();
    assert_eq!(after.syncs, before.syncs, "no fsync");
    assert_eq!(after.sync_dirs, before.sync_dirs, "no directory fsync");
    let checkpoint_writes = |stats: &partlog::unstable::sim::SimStats| {
        stats
            .per_path
            .get(Path::new(CHECKPOINT))
            .map_or(0, |path| path.writes)
    };
    assert_eq!(checkpoint_writes(&after), checkpoint_writes(&before));
    assert_eq!(after.writes, before.writes, "no file written");
    assert_eq!(after.set_lens, before.set_lens, "no file resized");
    assert_eq!(
        sim.file_state(Path::new(CHECKPOINT)).unwrap(),
        checkpoint_before
    );

    // A crash now loses nothing the record describes: the next open trusts it again.
    sim.crash_with(&CrashConfig::lose_unsynced());
    drop(log);
    let log = Log::open(DIR, config(&sim)).unwrap();
    assert!(log.recovery_report().clean_shutdown, "the record stood");
    assert_eq!(values(&log), all);

    // Closing it changes nothing either: the record still stands for the next open.
    let before = sim.stats();
    log.close().unwrap();
    let after = sim.stats();
    assert_eq!(
        (after.syncs, after.sync_dirs, after.writes, after.set_lens),
        (
            before.syncs,
            before.sync_dirs,
            before.writes,
            before.set_lens
        ),
        "a close with nothing to make durable"
    );
    drop(log);
    sim.crash_with(&CrashConfig::lose_unsynced());
    let log = Log::open(DIR, config(&sim)).unwrap();
    assert!(log.recovery_report().clean_shutdown);
    assert_eq!(values(&log), all);
    // And after a change, close writes the clean record again.
    log.append(&[record(40)]).unwrap();
    log.close().unwrap();
    drop(log);
    sim.crash_with(&CrashConfig::lose_unsynced());
    let log = Log::open(DIR, config(&sim)).unwrap();
    assert!(log.recovery_report().clean_shutdown);
    assert_eq!(log.log_end_offset(), 41);
}

/// The changes a log can make after a clean open, each applied to the reopened log.
const CHANGES: [&str; 6] = [
    "append",
    "append_batch",
    "roll",
    "truncate_to",
    "truncate_fully_and_start_at",
    "delete_records_before",
];

fn apply(log: &Log, change: &str) {
    match change {
        "append" => {
            log.append(&[record(40)]).unwrap();
        }
        "append_batch" => {
            let mut builder = partlog::BatchBuilder::new(partlog::Compression::None);
            builder.push(&record(40));
            log.append_batch(&builder.build().unwrap()).unwrap();
        }
        "roll" => {
            log.roll().unwrap();
        }
        "truncate_to" => {
            log.truncate_to(35).unwrap();
        }
        "truncate_fully_and_start_at" => {
            log.truncate_fully_and_start_at(100).unwrap();
        }
        "delete_records_before" => {
            log.delete_records_before(10).unwrap();
        }
        other => unreachable!("{other}"),
    }
}

#[test]
fn every_change_consumes_the_clean_record_before_a_crash_can_trust_it() {
    for (index, change) in CHANGES.into_iter().enumerate() {
        for keep_unsynced in [false, true] {
            let (sim, _) = closed_log(10 + index as u64);
            let log = Log::open(DIR, fenced_config(config(&sim), &sim)).unwrap();
            assert!(log.recovery_report().clean_shutdown);
            apply(&log, change);
            let expected = values(&log);
            let (end, start) = (log.log_end_offset(), log.log_start_offset());
            sim.crash_with(&if keep_unsynced {
                CrashConfig::keep_unsynced()
            } else {
                CrashConfig::lose_unsynced()
            });
            drop(log);

            let log = Log::open(DIR, config(&sim)).unwrap();
            assert!(
                !log.recovery_report().clean_shutdown,
                "{change}, keep_unsynced {keep_unsynced}: the change consumed the record"
            );
            let recovered = values(&log);
            if keep_unsynced || change != "append" && change != "append_batch" {
                // Everything reached the disk, or the change itself was durable.
                assert_eq!(
                    recovered, expected,
                    "{change}, keep_unsynced {keep_unsynced}"
                );
                assert_eq!(log.log_end_offset(), end, "{change}");
                assert_eq!(log.log_start_offset(), start, "{change}");
            } else {
                // The unsynced append was lost, and nothing before it.
                assert_eq!(recovered[..], expected[..40], "{change}");
            }
        }
    }
}

#[test]
fn a_failed_sync_of_the_consumption_poisons_the_log_and_changes_nothing() {
    let (sim, all) = closed_log(30);
    let log = Log::open(DIR, config(&sim)).unwrap();
    sim.fail_nth(FaultOp::Sync, 1, FaultError::Eio);
    let failed = log.append(&[record(40)]);
    assert!(matches!(failed, Err(Error::Io { .. })), "{failed:?}");
    assert!(log.stats().poisoned);
    assert_eq!(log.log_end_offset(), 40, "nothing appended");
    assert!(matches!(log.append(&[record(40)]), Err(Error::Poisoned)));
    drop(log);

    let log = Log::open(DIR, config(&sim)).unwrap();
    assert_eq!(values(&log), all);
    log.append(&[record(40)]).unwrap();
    assert_eq!(log.log_end_offset(), 41);
}

#[test]
fn writers_racing_to_be_first_after_a_clean_open_consume_it_and_lose_no_acknowledged_record() {
    let (sim, all) = closed_log(40);
    let log = Log::open(
        DIR,
        fenced_config(config_flushing(&sim, FlushPolicy::EveryAppend), &sim),
    )
    .unwrap();
    assert!(log.recovery_report().clean_shutdown);
    let checkpoint_writes = || {
        sim.stats()
            .per_path
            .get(Path::new(CHECKPOINT))
            .map_or(0, |path| path.writes)
    };
    let writes_before = checkpoint_writes();
    // Four writers, each acknowledged only once its record is durable (EveryAppend), and a
    // reader, all started together on the clean open.
    let acknowledged: Vec<Vec<(i64, Vec<u8>)>> = std::thread::scope(|scope| {
        let writers: Vec<_> = (0..4i64)
            .map(|writer| {
                let log = &log;
                scope.spawn(move || {
                    (0..10i64)
                        .map(|n| {
                            let value = format!("writer {writer} record {n}").into_bytes();
                            let info = log
                                .append(&[NewRecord::new(T0 + n, Some(b"key"), Some(&value))])
                                .unwrap();
                            (info.first_offset, value)
                        })
                        .collect()
                })
            })
            .collect();
        let reader = scope.spawn(|| values(&log).len());
        assert!(reader.join().unwrap() >= all.len());
        writers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    // Whoever came first consumed the record: the newest slot has no clean-shutdown fields.
    assert!(checkpoint_writes() > writes_before);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let newest = partlog::unstable::checkpoint::CheckpointFile::read(&storage, Path::new(DIR))
        .unwrap()
        .unwrap();
    assert_eq!(newest.clean_shutdown, None);
    sim.crash_with(&CrashConfig::lose_unsynced());
    drop(log);

    let log = Log::open(DIR, config(&sim)).unwrap();
    assert!(!log.recovery_report().clean_shutdown);
    let recovered: std::collections::BTreeMap<i64, Vec<u8>> = values(&log).into_iter().collect();
    for (offset, value) in &all {
        assert_eq!(recovered.get(offset), Some(value), "offset {offset}");
    }
    for (offset, value) in acknowledged.iter().flatten() {
        assert_eq!(recovered.get(offset), Some(value), "acknowledged {offset}");
    }
    assert_eq!(recovered.len(), all.len() + 40);
}
