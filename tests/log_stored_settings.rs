//! The per-log settings stored with the log in `partlog.properties` (ARCHITECTURE.md §7,
//! "Stored settings"): a later open with a default config keeps a compacted log compacted; a
//! caller's explicit setting is applied and stored; `store_settings(false)` applies it for one
//! open only; read-only opens never write the file; a bad file is one clear error; a crash at
//! any step of the file's write leaves the old settings or the new ones, never neither. And the
//! retention default: `LogConfig::default()` deletes nothing by time.
#![cfg(feature = "sim")]

use std::path::Path;
use std::sync::Arc;

use partlog::unstable::sim::{FaultOp, FaultRule};
use partlog::unstable::{
    CrashConfig, ManualClock, PROPERTIES_FILE_NAME, SimStorage, Storage, read_stored_settings,
};
use partlog::{CleanupPolicy, Error, Log, LogConfig, NewRecord};

const T0: i64 = 1_700_000_000_000;

fn stored(dir: &Path) -> Vec<(String, String)> {
    read_stored_settings(&partlog::unstable::OsStorage::new(), dir)
        .unwrap()
        .into_iter()
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn a_compacted_log_stays_compacted_when_reopened_with_a_default_config() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("users-0");
    let config = LogConfig::builder()
        .cleanup_policy(CleanupPolicy::COMPACT)
        .build()
        .unwrap();
    let log = Log::open(&dir, config).unwrap();
    log.append(&[NewRecord::new(T0, Some(b"k"), Some(b"v"))])
        .unwrap();
    log.close().unwrap();
    assert_eq!(stored(&dir), pairs(&[("cleanup.policy", "compact")]));

    let log = Log::open(&dir, LogConfig::default()).unwrap();
    assert_eq!(log.config().cleanup_policy, CleanupPolicy::COMPACT);
    let unkeyed = log.append(&[NewRecord::new(T0, None, Some(b"no key"))]);
    assert!(unkeyed.is_err(), "a compacted log took an unkeyed record");
    assert_eq!(log.log_end_offset(), 1);
    log.close().unwrap();

    let reader = Log::open_read_only(&dir, LogConfig::default()).unwrap();
    assert_eq!(reader.config().cleanup_policy, CleanupPolicy::COMPACT);
}

#[test]
fn an_explicit_setting_that_contradicts_a_stored_one_is_applied_and_stored() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("orders-0");
    let config = LogConfig::builder()
        .cleanup_policy(CleanupPolicy::COMPACT)
        .retention_ms(3_600_000)
        .build()
        .unwrap();
    Log::open(&dir, config).unwrap().close().unwrap();

    // Explicitly back to the default: applied, and the stored value leaves the file.
    let config = LogConfig::builder()
        .cleanup_policy(CleanupPolicy::DELETE)
        .build()
        .unwrap();
    let log = Log::open(&dir, config).unwrap();
    assert_eq!(log.config().cleanup_policy, CleanupPolicy::DELETE);
    assert_eq!(
        log.config().retention_ms,
        3_600_000,
        "the other setting stays"
    );
    log.close().unwrap();
    assert_eq!(stored(&dir), pairs(&[("retention.ms", "3600000")]));

    // By Kafka name, as `kafka-configs --alter` spells it.
    let config = LogConfig::builder()
        .set("retention.ms", "60000")
        .unwrap()
        .build()
        .unwrap();
    Log::open(&dir, config).unwrap().close().unwrap();
    assert_eq!(stored(&dir), pairs(&[("retention.ms", "60000")]));
    let log = Log::open(&dir, LogConfig::default()).unwrap();
    assert_eq!(log.config().retention_ms, 60_000);
    assert_eq!(
        log.config().setting("retention.ms").as_deref(),
        Some("60000")
    );
}

#[test]
fn store_settings_false_applies_an_explicit_setting_for_one_open_only() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("orders-0");
    let config = LogConfig::builder()
        .cleanup_policy(CleanupPolicy::COMPACT)
        .build()
        .unwrap();
    Log::open(&dir, config).unwrap().close().unwrap();
    let before = std::fs::read(dir.join(PROPERTIES_FILE_NAME)).unwrap();

    let config = LogConfig::builder()
        .retention_ms(1)
        .store_settings(false)
        .build()
        .unwrap();
    let log = Log::open(&dir, config).unwrap();
    assert_eq!(log.config().retention_ms, 1);
    assert_eq!(log.config().cleanup_policy, CleanupPolicy::COMPACT);
    log.close().unwrap();
    assert_eq!(
        std::fs::read(dir.join(PROPERTIES_FILE_NAME)).unwrap(),
        before
    );
}

#[test]
fn a_read_only_open_applies_the_stored_settings_and_never_writes_them() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("orders-0");
    Log::open(&dir, LogConfig::default())
        .unwrap()
        .close()
        .unwrap();
    assert!(
        !dir.join(PROPERTIES_FILE_NAME).exists(),
        "a log at the defaults has no settings file"
    );
    let config = LogConfig::builder()
        .cleanup_policy(CleanupPolicy::COMPACT)
        .build()
        .unwrap();
    let reader = Log::open_read_only(&dir, config).unwrap();
    assert_eq!(reader.config().cleanup_policy, CleanupPolicy::COMPACT);
    drop(reader);
    assert!(!dir.join(PROPERTIES_FILE_NAME).exists());
}

#[test]
fn a_bad_settings_file_is_an_error_that_names_the_file_and_the_line() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("orders-0");
    Log::open(&dir, LogConfig::default())
        .unwrap()
        .close()
        .unwrap();
    for (content, expected) in [
        ("cleanup.policy=compacted\n", "compacted"),
        ("retention.ms=soon\n", "retention.ms=soon"),
        ("log.retention.hours=1\n", "log.retention.hours"),
        ("# a comment\nno separator here\n", "line 2"),
    ] {
        std::fs::write(dir.join(PROPERTIES_FILE_NAME), content).unwrap();
        let error = Log::open(&dir, LogConfig::default()).unwrap_err();
        let message = error.to_string();
        assert!(
            matches!(error, Error::InvalidConfig { .. }),
            "{content:?}: {error:?}"
        );
        assert!(message.contains(expected), "{content:?}: {message}");
        assert!(
            message.contains(PROPERTIES_FILE_NAME),
            "{content:?}: {message}"
        );
    }
    // Java properties syntax: comments, spaces around the separator, ':' as separator.
    std::fs::write(
        dir.join(PROPERTIES_FILE_NAME),
        "# by hand\n! also a comment\n\n  cleanup.policy = compact\nretention.ms: 5000\n",
    )
    .unwrap();
    let log = Log::open_read_only(&dir, LogConfig::default()).unwrap();
    assert_eq!(log.config().cleanup_policy, CleanupPolicy::COMPACT);
    assert_eq!(log.config().retention_ms, 5000);
}

/// A crash before any storage operation of an open that changes the stored settings leaves
/// either the old settings or the new ones, and the log opens.
#[test]
fn a_crash_while_the_settings_are_stored_leaves_the_old_or_the_new_ones() {
    let dir = Path::new("/data/users-0");
    let mut nth = 1;
    loop {
        let sim = SimStorage::new(nth);
        let storage: Arc<dyn Storage> = Arc::new(sim.clone());
        let with_storage = |builder: partlog::LogConfigBuilder| {
            builder
                .storage(Arc::clone(&storage))
                .clock(Arc::new(ManualClock::new(T0)))
                .build()
                .unwrap()
        };
        let log = Log::open(
            dir,
            with_storage(LogConfig::builder().cleanup_policy(CleanupPolicy::COMPACT)),
        )
        .unwrap();
        log.close().unwrap();
        let crashes = sim.stats().crashes;
        sim.inject(
            FaultRule::crash(FaultOp::Any, nth).crash_config(CrashConfig::random().seed(nth)),
        );
        let new = with_storage(
            LogConfig::builder()
                .cleanup_policy(CleanupPolicy::COMPACT_DELETE)
                .retention_ms(1000),
        );
        // A crash inside the open, or inside its close: either way the machine went down.
        if let Ok(log) = Log::open(dir, new) {
            let closed = log.close();
            if sim.stats().crashes == crashes {
                closed.unwrap();
            }
        }
        sim.clear_faults();
        let crashed = sim.stats().crashes > crashes;
        let settings: Vec<(String, String)> = read_stored_settings(&*storage, dir)
            .unwrap()
            .into_iter()
            .collect();
        let old_ones = pairs(&[("cleanup.policy", "compact")]);
        let new_ones = pairs(&[
            ("cleanup.policy", "compact,delete"),
            ("retention.ms", "1000"),
        ]);
        assert!(
            settings == old_ones || settings == new_ones,
            "crash before operation {nth}: {settings:?}"
        );
        let reopened = Log::open(dir, with_storage(LogConfig::builder())).unwrap();
        assert!(
            reopened.config().cleanup_policy.compacts(),
            "crash before {nth}"
        );
        reopened.close().unwrap();
        if !crashed {
            assert_eq!(settings, new_ones);
            break;
        }
        nth += 1;
        assert!(nth < 10_000, "the open never finished");
    }
}

#[test]
fn the_default_config_deletes_nothing_by_time_even_for_old_timestamps() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("events-0");
    let log = Log::open(&dir, LogConfig::default()).unwrap();
    // Events of 2023, appended today: Kafka's 7-day default would delete them all.
    let old = 1_680_000_000_000;
    for i in 0..100_i64 {
        log.append(&[NewRecord::new(old + i, None, Some(b"event"))])
            .unwrap();
    }
    let report = log.enforce_retention().unwrap();
    assert_eq!(report.segments_deleted(), 0, "{report:?}");
    assert_eq!(log.log_start_offset(), 0);
    assert_eq!(log.config().retention_ms, -1);
    // Kafka's value, asked for, does delete them.
    log.close().unwrap();
    let config = LogConfig::builder()
        .retention_ms(7 * 24 * 60 * 60 * 1000)
        .build()
        .unwrap();
    let log = Log::open(&dir, config).unwrap();
    let report = log.enforce_retention().unwrap();
    assert!(report.segments_deleted() >= 1, "{report:?}");
}
