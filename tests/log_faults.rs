//! Failures other than crashes, on the simulator (ARCHITECTURE.md §3, invariant 4):
//! - a failed fsync poisons the log: every later write fails with `Error::Poisoned`, nothing the
//!   failed sync covered is reported durable, and a reopen recovers;
//! - any other write error (EIO, ENOSPC, a short write) truncates the active segment back to the
//!   last published end, and the log goes on;
//! - a poisoned log writes no clean-shutdown record, so the next open recovers.
#![cfg(feature = "sim")] // the simulator and the manual clock: `cargo test --all-features`

use std::path::Path;
use std::sync::Arc;

use partlog::unstable::sim::{FaultError, FaultOp, FaultRule};
use partlog::unstable::{ManualClock, SimStorage, Storage};
use partlog::{Error, FlushPolicy, Log, LogConfig, NewRecord, ReadBound};

const T0: i64 = 1_700_000_000_000;
const DIR: &str = "/faults/p-0";

fn config(sim: &SimStorage, flush_policy: FlushPolicy) -> LogConfig {
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

#[test]
fn a_failed_fsync_poisons_the_log_until_it_is_reopened() {
    let sim = SimStorage::new(1);
    let log = Log::open(DIR, config(&sim, FlushPolicy::EveryAppend)).unwrap();
    for i in 0..5 {
        log.append(&[record(i)]).unwrap();
    }
    assert_eq!(log.durable_offset(), 5);
    sim.fail_nth(FaultOp::Sync, 1, FaultError::Eio);
    let failed = log.append(&[record(5)]);
    assert!(matches!(failed, Err(Error::Io { .. })), "{failed:?}");
    // The record reached the file, but its sync failed: it is never reported durable.
    assert_eq!(log.durable_offset(), 5);
    assert!(log.stats().poisoned);
    assert!(matches!(log.append(&[record(6)]), Err(Error::Poisoned)));
    assert!(
        matches!(log.wait_durable(4), Ok(())),
        "already durable offsets stay durable"
    );
    assert!(matches!(log.truncate_to(2), Err(Error::Poisoned)));
    assert!(matches!(log.delete_records_before(2), Err(Error::Poisoned)));
    // Reads still work, up to what reached the disk: the failed sync may have dropped the rest.
    assert_eq!(values(&log).len(), 5);
    assert!(matches!(
        log.read(6, 100, ReadBound::LogEnd),
        Err(Error::OffsetOutOfRange { end: 5, .. })
    ));
    // A poisoned log writes no clean-shutdown record.
    assert!(matches!(log.close(), Err(Error::Poisoned)));
    drop(log);

    let log = Log::open(DIR, config(&sim, FlushPolicy::EveryAppend)).unwrap();
    assert!(!log.recovery_report().clean_shutdown);
    // The simulator dropped the dirty data the failed sync could not write.
    assert_eq!(log.log_end_offset(), 5);
    log.append(&[record(5)]).unwrap();
    assert_eq!(values(&log).last().unwrap(), &(5, b"value 5".to_vec()));
}

#[test]
fn a_failed_roll_fsync_in_the_background_poisons_the_log() {
    let sim = SimStorage::new(2);
    let log = Log::open(DIR, config(&sim, FlushPolicy::OsDecides)).unwrap();
    // Every sync fails from now on; rolls hand their syncs to the flusher thread.
    for n in 1..=64 {
        sim.inject(FaultRule::fail(FaultOp::Sync, n).error(FaultError::Eio));
    }
    let mut i = 0;
    while !log.stats().poisoned && i < 10_000 {
        match log.append(&[record(i)]) {
            Ok(_) => i += 1,
            Err(Error::Poisoned) => break,
            // The producer snapshot of a roll fails its own sync: that append fails, the
            // temporary file goes, and the log goes on (the failed sync lost nothing of it).
            Err(Error::Io { path, .. }) if path.to_string_lossy().ends_with(".snapshot.tmp") => {}
            Err(other) => panic!("unexpected error: {other}"),
        }
        if log.stats().rolls > 0 {
            // Give the flusher its chance; `wait_durable` joins or leads the same sync.
            let _ = log.wait_durable(log.log_end_offset() - 1);
        }
    }
    assert!(
        log.stats().poisoned,
        "a roll's failed fsync must poison the log"
    );
    assert!(matches!(log.append(&[record(i)]), Err(Error::Poisoned)));
    assert_eq!(log.durable_offset(), 0);
}

#[test]
fn write_errors_truncate_back_and_the_log_goes_on() {
    for (name, rule) in [
        (
            "eio",
            FaultRule::fail(FaultOp::Write, 1).error(FaultError::Eio),
        ),
        (
            "enospc",
            FaultRule::fail(FaultOp::Write, 1).error(FaultError::Enospc),
        ),
        ("short write", FaultRule::short_write(1, 7)),
    ] {
        let sim = SimStorage::new(3);
        let log = Log::open(DIR, config(&sim, FlushPolicy::OsDecides)).unwrap();
        for i in 0..10 {
            log.append(&[record(i), record(i)]).unwrap();
        }
        let end = log.log_end_offset();
        sim.inject(rule.on_paths_ending_with(".log"));
        let failed = log.append(&[record(99)]);
        let error = failed.expect_err(name);
        assert!(matches!(error, Error::Io { .. }), "{name}: {error}");
        if name == "enospc" {
            assert_eq!(error.io_kind(), Some(std::io::ErrorKind::StorageFull));
        }
        assert!(!log.stats().poisoned, "{name}: only a failed fsync poisons");
        assert_eq!(log.log_end_offset(), end, "{name}: nothing was published");
        // The next append lands at the same offset, and the file holds no partial batch.
        let info = log.append(&[record(10)]).unwrap();
        assert_eq!(info.first_offset, end, "{name}");
        log.close().unwrap();
        drop(log);
        let log = Log::open(DIR, config(&sim, FlushPolicy::OsDecides)).unwrap();
        assert!(log.recovery_report().clean_shutdown, "{name}");
        let all = values(&log);
        assert_eq!(all.len() as i64, end + 1, "{name}");
        assert_eq!(all.last().unwrap().1, b"value 10".to_vec(), "{name}");
        drop(log);
        let _ = Path::new(DIR);
    }
}

#[test]
fn a_failed_roll_leaves_the_old_segment_active() {
    let sim = SimStorage::new(4);
    let log = Log::open(DIR, config(&sim, FlushPolicy::OsDecides)).unwrap();
    let mut i = 0;
    // Fill the first segment up to just before a roll.
    while log.stats().segments == 1 {
        sim.inject(FaultRule::fail(FaultOp::Create, 1).on_paths_ending_with(".log"));
        match log.append(&[record(i)]) {
            Ok(_) => {
                i += 1;
                sim.clear_faults();
            }
            Err(error) => {
                // The roll could not create the new segment: all or nothing.
                assert!(matches!(error, Error::Io { .. }), "{error}");
                assert_eq!(log.stats().segments, 1);
                assert_eq!(log.log_end_offset(), i);
                sim.clear_faults();
                break;
            }
        }
    }
    // Without the fault the roll goes through and the append lands.
    let info = log.append(&[record(i)]).unwrap();
    assert_eq!(info.first_offset, i);
    assert_eq!(log.stats().segments, 2);
    let listed = sim
        .snapshot()
        .files
        .keys()
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .count();
    assert_eq!(listed, 2, "the failed roll left no stray segment file");
    assert_eq!(values(&log).len() as i64, i + 1);
}
