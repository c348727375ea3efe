//! Retention that runs without being asked: a log whose retention or compaction is set checks it
//! every `retention.check.interval.ms`, Kafka's 5 minutes by default, unless the interval is -1.
//! Its own test binary, so that the maintenance threads it counts are its own.

#![cfg(feature = "sim")]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use partlog::unstable::{ManualClock, SimStorage};
use partlog::{CleanupPolicy, Error, Log, LogConfig, LogConfigBuilder, NewRecord, ReadBound};

const T0: i64 = 1_700_000_000_000;
const MINUTE: i64 = 60 * 1000;

/// Kafka's defaults on the simulator and `clock`: not `builder_for_tests`, whose interval is -1.
fn kafka_defaults(sim: &SimStorage, clock: &Arc<ManualClock>) -> LogConfigBuilder {
    LogConfig::builder()
        .storage(Arc::new(sim.clone().with_clock(
            Arc::clone(clock) as Arc<dyn partlog::unstable::Clock>
        )))
        .clock(Arc::clone(clock) as Arc<dyn partlog::unstable::Clock>)
}

/// Threads of this process whose name (truncated by Linux to 15 bytes) is a maintenance thread's.
fn maintenance_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.unwrap().path().join("comm")).ok())
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

/// Two sealed segments of two records each, stamped `T0`, and an empty active one.
fn two_sealed_segments(log: &Log) {
    for _ in 0..2 {
        for n in 0..2 {
            let value = format!("record {n}");
            log.append(&[NewRecord::new(T0, None, Some(value.as_bytes()))])
                .unwrap();
        }
        log.roll().unwrap();
    }
}

#[test]
fn issue32_item6_which_configs_run_a_maintenance_thread() {
    let sim = SimStorage::new(1);
    let clock = Arc::new(ManualClock::new(T0));
    let with = |builder: LogConfigBuilder| builder.build().unwrap().runs_maintenance();

    let defaults = kafka_defaults(&sim, &clock).build().unwrap();
    assert_eq!(defaults.retention_check_interval_ms, 5 * MINUTE);
    assert!(!defaults.runs_maintenance(), "nothing to keep short");
    assert!(with(kafka_defaults(&sim, &clock).retention_ms(MINUTE)));
    assert!(with(kafka_defaults(&sim, &clock).retention_bytes(0)));
    assert!(with(
        kafka_defaults(&sim, &clock).cleanup_policy(CleanupPolicy::COMPACT)
    ));
    // Given explicitly, the interval runs the thread for producer expiry alone, as before.
    assert!(with(
        kafka_defaults(&sim, &clock).retention_check_interval_ms(60_000)
    ));
    assert!(!with(
        kafka_defaults(&sim, &clock)
            .retention_ms(MINUTE)
            .retention_check_interval_ms(-1)
    ));
    assert!(!with(LogConfig::builder_for_tests().retention_ms(MINUTE)));
}

#[test]
fn issue32_item6_a_log_with_retention_set_deletes_at_kafkas_interval_unasked() {
    let sim = SimStorage::new(2);
    let clock = Arc::new(ManualClock::new(T0));

    // Retention off: no thread, whatever the clock does.
    let untouched = Log::open(
        Path::new("/logs/untouched-0"),
        kafka_defaults(&sim, &clock).build().unwrap(),
    )
    .unwrap();
    two_sealed_segments(&untouched);
    // Retention set, its checks turned off.
    let off = Log::open(
        Path::new("/logs/off-0"),
        kafka_defaults(&sim, &clock)
            .retention_ms(MINUTE)
            .retention_check_interval_ms(-1)
            .build()
            .unwrap(),
    )
    .unwrap();
    two_sealed_segments(&off);
    assert_eq!(maintenance_threads(), 0);

    // Retention set, nothing else: Kafka's 5-minute checks.
    let log = Log::open(
        Path::new("/logs/retained-0"),
        kafka_defaults(&sim, &clock)
            .retention_ms(MINUTE)
            .build()
            .unwrap(),
    )
    .unwrap();
    two_sealed_segments(&log);
    wait_until("the log's maintenance thread starts", || {
        maintenance_threads() == 1
    });
    clock.set(T0 + 5 * MINUTE + 1);
    wait_until("the thread deletes both sealed segments", || {
        log.log_start_offset() == 4
    });
    assert!(matches!(
        log.read(0, 1 << 20, ReadBound::LogEnd),
        Err(Error::OffsetOutOfRange { start: 4, .. })
    ));

    // The others kept everything; a pass called by hand still runs.
    assert_eq!(untouched.log_start_offset(), 0);
    assert_eq!(off.log_start_offset(), 0);
    assert_eq!(off.enforce_retention().unwrap().deleted.len(), 2);
    assert_eq!(off.log_start_offset(), 4);

    log.close().unwrap();
    wait_until("the thread stops with its log", || {
        maintenance_threads() == 0
    });
}
