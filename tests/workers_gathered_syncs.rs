//! Gathered syncs (`Workers::gather_file_system_syncs`): one file-system sync makes many logs'
//! appends durable, and what it acknowledges survives a crash; a truncation during the sync
//! keeps the truncated log's watermark down; a failed one acknowledges nothing and poisons
//! every log it was for. On the real file system, the gathered path runs and reopens clean.
#![cfg(feature = "sim")]

#[path = "common/crash_points.rs"]
mod crash_points;
#[path = "common/fenced.rs"]
mod fenced_storage;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use partlog::unstable::sim::{CrashConfig, FaultError, FaultOp, FaultRule};
use partlog::unstable::{
    CanonicalPath, FileLock, LockMode, ManualClock, Metadata, OpenMode, SimStorage, Storage,
    StorageFile,
};
use partlog::{Error, FlushPolicy, Log, LogConfig, NewRecord, ReadBound, Workers};

const T0: i64 = 1_700_000_000_000;

fn record(value: &str) -> NewRecord {
    NewRecord::new(T0, None, Some(value.as_bytes()))
}

/// Rolls only in the concurrent test: a roll asks the flusher for a sync of its own, which
/// would make the other tests' counts of rounds depend on timing.
fn config(storage: Arc<dyn Storage>, workers: &Workers) -> LogConfig {
    config_rolling_at(storage, workers, 1 << 20)
}

fn config_rolling_at(
    storage: Arc<dyn Storage>,
    workers: &Workers,
    segment_bytes: u32,
) -> LogConfig {
    LogConfig::builder_for_tests()
        .segment_bytes(segment_bytes)
        // Syncs only when a wait asks for one: the test decides when.
        .flush_policy(FlushPolicy::OsDecides)
        .storage(storage)
        .clock(Arc::new(ManualClock::new(T0)))
        .workers(workers.clone())
        .build()
        .unwrap()
}

fn log_dir(i: usize) -> PathBuf {
    PathBuf::from(format!("/data/t-{i}"))
}

fn values(log: &Log) -> Vec<String> {
    log.records(0, ReadBound::LogEnd)
        .map(|record| String::from_utf8(record.unwrap().value.unwrap().to_vec()).unwrap())
        .collect()
}

#[test]
fn one_file_system_sync_makes_every_waiting_log_durable_and_survives_a_crash() {
    let sim = SimStorage::new(7);
    let workers = Workers::new(2)
        .unwrap()
        .gather_file_system_syncs(3)
        .unwrap();
    let logs: Vec<Log> = (0..12)
        .map(|i| Log::open(log_dir(i), config(Arc::new(sim.clone()), &workers)).unwrap())
        .collect();
    for (i, log) in logs.iter().enumerate() {
        for n in 0..30 {
            log.append(&[record(&format!("{i}-{n}-{}", "v".repeat(100)))])
                .unwrap();
        }
    }
    let syncs_before = sim.stats().syncs;
    logs[0].wait_durable(29).unwrap();

    assert_eq!(workers.gathered_syncs(), Some((1, 12)), "one round for all");
    assert_eq!(sim.stats().file_system_syncs, 1);
    assert_eq!(
        sim.stats().syncs,
        syncs_before,
        "no log synced its own files"
    );
    for log in &logs {
        assert_eq!(log.durable_offset(), 30, "{log:?}");
    }

    sim.crash_with(&CrashConfig::lose_unsynced());
    drop(logs);
    for i in 0..12 {
        let log = Log::open(log_dir(i), config(Arc::new(sim.clone()), &workers)).unwrap();
        let expected: Vec<String> = (0..30)
            .map(|n| format!("{i}-{n}-{}", "v".repeat(100)))
            .collect();
        assert_eq!(values(&log), expected, "log {i} lost acknowledged records");
    }
}

#[test]
fn below_the_threshold_a_log_syncs_its_own_files() {
    let sim = SimStorage::new(8);
    let workers = Workers::new(2)
        .unwrap()
        .gather_file_system_syncs(4)
        .unwrap();
    let logs: Vec<Log> = (0..3)
        .map(|i| Log::open(log_dir(i), config(Arc::new(sim.clone()), &workers)).unwrap())
        .collect();
    for log in &logs {
        log.append(&[record("x")]).unwrap();
    }
    logs[1].wait_durable(0).unwrap();
    assert_eq!(workers.gathered_syncs(), Some((0, 0)));
    assert_eq!(sim.stats().file_system_syncs, 0);
    assert_eq!(logs[1].durable_offset(), 1);
    assert_eq!(
        logs[0].durable_offset(),
        0,
        "not synced by another log's sync"
    );
}

#[test]
fn concurrent_writers_lose_nothing_they_were_told_is_durable() {
    let sim = SimStorage::new(9);
    let workers = Workers::new(2)
        .unwrap()
        .gather_file_system_syncs(2)
        .unwrap();
    let logs: Vec<Arc<Log>> = (0..6)
        .map(|i| {
            let config = config_rolling_at(Arc::new(sim.clone()), &workers, 2048);
            Arc::new(Log::open(log_dir(i), config).unwrap())
        })
        .collect();
    let acknowledged: Vec<usize> = std::thread::scope(|scope| {
        let threads: Vec<_> = logs
            .iter()
            .enumerate()
            .map(|(i, log)| {
                scope.spawn(move || {
                    let mut acknowledged = 0;
                    // Rolls on the way: their sealed segments and new names ride on the rounds.
                    for n in 0..60 {
                        let info = log
                            .append(&[record(&format!("{i}-{n}-{}", "v".repeat(60)))])
                            .unwrap();
                        log.wait_durable(info.last_offset).unwrap();
                        acknowledged = n + 1;
                    }
                    acknowledged
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let (rounds, covered) = workers.gathered_syncs().unwrap();
    assert!(covered >= rounds * 2, "a round covers at least two logs");
    sim.crash_with(&CrashConfig::lose_unsynced());
    drop(logs);
    for (i, count) in acknowledged.into_iter().enumerate() {
        let log = Log::open(log_dir(i), config(Arc::new(sim.clone()), &workers)).unwrap();
        let expected: Vec<String> = (0..count)
            .map(|n| format!("{i}-{n}-{}", "v".repeat(60)))
            .collect();
        assert_eq!(values(&log), expected, "log {i}");
    }
}

#[test]
fn a_failed_file_system_sync_acknowledges_nothing_and_poisons_every_log_of_the_round() {
    let sim = SimStorage::new(10);
    let workers = Workers::new(2)
        .unwrap()
        .gather_file_system_syncs(2)
        .unwrap();
    let logs: Vec<Log> = (0..4)
        .map(|i| Log::open(log_dir(i), config(Arc::new(sim.clone()), &workers)).unwrap())
        .collect();
    for log in &logs {
        log.append(&[record("lost")]).unwrap();
    }
    sim.fail_nth(FaultOp::SyncFileSystem, 1, FaultError::Eio);
    let error = logs[2].wait_durable(0).unwrap_err();
    assert!(matches!(error, Error::Io { .. }), "{error}");
    for log in &logs {
        assert_eq!(log.durable_offset(), 0, "nothing acknowledged");
        let refused = log.append(&[record("after")]).unwrap_err();
        assert!(matches!(refused, Error::Poisoned), "{refused}");
        assert!(matches!(log.wait_durable(0), Err(Error::Poisoned)));
    }
}

/// A [`SimStorage`] that runs a hook just before its next file-system sync: the moment after a
/// round read its targets and before the sync makes them durable.
struct BeforeSyncFs {
    sim: SimStorage,
    hook: Mutex<Option<Hook>>,
}

type Hook = Box<dyn FnOnce() + Send>;

impl std::fmt::Debug for BeforeSyncFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BeforeSyncFs")
            .field("sim", &self.sim)
            .finish()
    }
}

impl Storage for BeforeSyncFs {
    fn open(&self, path: &Path, mode: OpenMode) -> partlog::Result<Arc<dyn StorageFile>> {
        self.sim.open(path, mode)
    }
    fn create_dir_all(&self, path: &Path) -> partlog::Result<()> {
        self.sim.create_dir_all(path)
    }
    fn sync_dir(&self, dir: &Path) -> partlog::Result<()> {
        self.sim.sync_dir(dir)
    }
    fn sync_file_system(&self, path: &Path) -> partlog::Result<()> {
        let hook = self.hook.lock().unwrap().take();
        if let Some(hook) = hook {
            hook();
        }
        self.sim.sync_file_system(path)
    }
    fn file_system_id(&self, path: &Path) -> partlog::Result<u64> {
        self.sim.file_system_id(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> partlog::Result<()> {
        self.sim.rename(from, to)
    }
    fn remove(&self, path: &Path) -> partlog::Result<()> {
        self.sim.remove(path)
    }
    fn list(&self, dir: &Path) -> partlog::Result<Vec<String>> {
        self.sim.list(dir)
    }
    fn metadata(&self, path: &Path) -> partlog::Result<Metadata> {
        self.sim.metadata(path)
    }
    fn lock(&self, path: &Path, mode: LockMode) -> partlog::Result<FileLock> {
        self.sim.lock(path, mode)
    }
    fn canonical_path(&self, path: &Path) -> partlog::Result<CanonicalPath> {
        self.sim.canonical_path(path)
    }
    fn set_mtime(&self, path: &Path, mtime_ms: i64) -> partlog::Result<()> {
        self.sim.set_mtime(path, mtime_ms)
    }
}

#[test]
fn a_truncation_during_the_round_keeps_the_truncated_log_from_being_moved_past_its_end() {
    let sim = SimStorage::new(11);
    let workers = Workers::new(2)
        .unwrap()
        .gather_file_system_syncs(2)
        .unwrap();
    let storage = Arc::new(BeforeSyncFs {
        sim: sim.clone(),
        hook: Mutex::new(None),
    });
    let truncated: Arc<OnceLock<Arc<Log>>> = Arc::new(OnceLock::new());
    let leader = Log::open(log_dir(0), config(storage.clone(), &workers)).unwrap();
    let other = Arc::new(Log::open(log_dir(1), config(storage.clone(), &workers)).unwrap());
    truncated.set(Arc::clone(&other)).unwrap();
    leader.append(&[record("leader")]).unwrap();
    for n in 0..10 {
        other.append(&[record(&format!("old-{n}"))]).unwrap();
    }
    let in_hook = Arc::clone(&truncated);
    *storage.hook.lock().unwrap() = Some(Box::new(move || {
        // The round read `other`'s end as 10; it is cut to 3 and refilled to 4, unsynced.
        let other = in_hook.get().unwrap();
        assert_eq!(other.truncate_to(3).unwrap(), 3);
        other.append(&[record("new-3")]).unwrap();
    }));
    leader.wait_durable(0).unwrap();
    assert_eq!(workers.gathered_syncs(), Some((1, 2)));
    assert!(
        other.durable_offset() <= other.log_end_offset(),
        "durable {} above the end {}",
        other.durable_offset(),
        other.log_end_offset()
    );
    // What a later sync acknowledges is what the log holds.
    other.wait_durable(3).unwrap();
    sim.crash_with(&CrashConfig::lose_unsynced());
    drop((leader, other, truncated));
    let other = Log::open(log_dir(1), config(Arc::new(sim.clone()), &workers)).unwrap();
    assert_eq!(values(&other), ["old-0", "old-1", "old-2", "new-3"]);
}

#[test]
fn on_the_real_file_system_the_gathered_path_syncs_and_reopens_clean() {
    let temp = tempfile::tempdir().unwrap();
    let workers = Workers::new(2)
        .unwrap()
        .gather_file_system_syncs(2)
        .unwrap();
    let os_config = || {
        LogConfig::builder()
            .flush_policy(FlushPolicy::OsDecides)
            .workers(workers.clone())
            .build()
            .unwrap()
    };
    let logs: Vec<Log> = (0..4)
        .map(|i| Log::open(temp.path().join(format!("t-{i}")), os_config()).unwrap())
        .collect();
    for (i, log) in logs.iter().enumerate() {
        log.append(&[record(&format!("r{i}"))]).unwrap();
    }
    logs[0].wait_durable(0).unwrap();
    // A kernel whose syncfs cannot report errors (before 5.8) keeps per-log syncs.
    let expected = if kernel_reports_syncfs_errors() {
        (1, 4)
    } else {
        (0, 0)
    };
    assert_eq!(workers.gathered_syncs(), Some(expected));
    if expected.0 == 1 {
        assert!(logs.iter().all(|log| log.durable_offset() == 1));
    }
    drop(logs);
    for i in 0..4 {
        let log = Log::open(temp.path().join(format!("t-{i}")), os_config()).unwrap();
        assert_eq!(values(&log), [format!("r{i}")]);
    }
}

#[test]
fn a_threshold_below_two_or_a_second_call_is_refused() {
    let refused = Workers::new(1).unwrap().gather_file_system_syncs(1);
    assert!(matches!(
        refused,
        Err(Error::InvalidConfig {
            setting: "workers.gather.min.logs",
            ..
        })
    ));
    let workers = Workers::new(1)
        .unwrap()
        .gather_file_system_syncs(2)
        .unwrap();
    assert!(matches!(
        workers.clone().gather_file_system_syncs(3),
        Err(Error::InvalidConfig { .. })
    ));
    assert_eq!(Workers::new(1).unwrap().gathered_syncs(), None);
}

/// Linux 5.8 or later, read from `/proc`.
fn kernel_reports_syncfs_errors() -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut numbers = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|part| part.parse::<u32>().ok());
    matches!(
        (numbers.next().flatten(), numbers.next().flatten()),
        (Some(major), Some(minor)) if (major, minor) >= (5, 8)
    )
}

/// Six logs on a gathering pool: three appends each, a wait on one (a round for all), two more
/// appends each, a wait on another. Stops at the first error (the machine crashed).
fn gathered_rounds(logs: &mut Vec<Log>, sim: &SimStorage, workers: &Workers) {
    let mut run = || -> partlog::Result<()> {
        for i in 0..6 {
            let config = fenced_storage::fenced_config(config(Arc::new(sim.clone()), workers), sim);
            logs.push(Log::open(log_dir(i), config)?);
        }
        for (from, to, waiter) in [(0, 3, 0), (3, 5, 3)] {
            for (i, log) in logs.iter().enumerate() {
                for n in from..to {
                    log.append(&[record(&format!("{i}-{n}"))])?;
                }
            }
            logs[waiter].wait_durable(to - 1)?;
        }
        Ok(())
    };
    let _ = run();
}

/// Crashes before every storage operation of [`gathered_rounds`] (losing what was not synced),
/// then reopens: every log holds a prefix of what was appended to it, at least as long as the
/// durable offset it reported, so no record it called durable is lost.
#[test]
fn a_crash_at_any_point_of_gathered_rounds_loses_nothing_reported_durable() {
    let dry = SimStorage::new(21);
    let workers = Workers::new(2)
        .unwrap()
        .gather_file_system_syncs(3)
        .unwrap();
    let mut logs = Vec::new();
    gathered_rounds(&mut logs, &dry, &workers);
    assert_eq!(
        logs.iter().map(Log::durable_offset).collect::<Vec<_>>(),
        [5; 6]
    );
    assert_eq!(workers.gathered_syncs(), Some((2, 12)));
    drop(logs);
    let points = crash_points::crash_points(&dry.events());
    assert!(points.iter().any(|(op, _)| *op == FaultOp::SyncFileSystem));
    for (op, nth) in points {
        let sim = SimStorage::new(21);
        sim.inject(FaultRule::crash(op, nth).crash_config(CrashConfig::lose_unsynced()));
        let mut logs = Vec::new();
        gathered_rounds(&mut logs, &sim, &workers);
        if sim.stats().crashes == 0 {
            sim.crash_with(&CrashConfig::lose_unsynced());
        }
        sim.clear_faults();
        let reported: Vec<i64> = logs.iter().map(Log::durable_offset).collect();
        drop(logs);
        for (i, durable) in reported.into_iter().enumerate() {
            let log = Log::open(log_dir(i), config(Arc::new(sim.clone()), &workers)).unwrap();
            let held = values(&log);
            let appended: Vec<String> = (0..5).map(|n| format!("{i}-{n}")).collect();
            assert!(
                appended.starts_with(&held) && held.len() as i64 >= durable,
                "crash before {op:?} #{nth}: log {i} holds {held:?}, reported {durable} durable"
            );
        }
    }
}
