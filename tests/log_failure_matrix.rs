//! The failure matrix beyond crashes (ARCHITECTURE.md §3, invariants 3 and 4), on the
//! simulator: every operation of the log (append, a producer batch, the appends that roll,
//! `truncate_to`, `delete_records_before` with a retention pass, compaction, close) runs with
//! one fault aimed at its kth file operation of one kind, for every k the operation performs:
//! EIO, ENOSPC and a short write on writes, ENOSPC on creating a file, a failed `set_len`, EIO and
//! ENOSPC on fsync, a failed directory fsync, rename and remove.
//!
//! Each case must end in a typed error or success, never a panic, and then:
//! - ENOSPC on a write or a file creation (append, roll, compaction) leaves the log working, not
//!   poisoned: once the fault is cleared ("space returns") the next append lands at the log end;
//! - a failed fsync (EIO or ENOSPC) poisons the log: every later write is `Error::Poisoned`, and
//!   nothing the failed sync covered is reported durable;
//! - every record acknowledged (every append is durable here) reads back, before and after a
//!   crash that keeps only synced data, with the value it was written with; a record removed by
//!   an operation that returned `Ok` stays removed, and one that failed leaves either state;
//! - `verify_dir` finds no corruption, and the log reopens under `RecoveryMode::Fail`.
#![cfg(feature = "sim")] // the simulator and the manual clock: `cargo test --all-features`

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::sync::Arc;

use partlog::unstable::sim::{CrashConfig, FaultError, FaultOp, FaultRule, SimEvent};
use partlog::unstable::{ManualClock, SimStorage, Storage};
use partlog::{
    BatchBuilder, CleanupPolicy, Compression, Error, FlushPolicy, Log, LogConfig, NewRecord,
    ReadBound, Severity,
};

const T0: i64 = 1_700_000_000_000;
const DIR: &str = "/matrix/p-0";
/// Records written before the operation under test: several segments of 1 KiB.
const SETUP_RECORDS: i64 = 30;

/// Records by offset: (key, value).
type Records = BTreeMap<i64, (Vec<u8>, Vec<u8>)>;

/// What the log holds: its records, its start and its end.
#[derive(Debug, Clone, PartialEq)]
struct Expect {
    start: i64,
    end: i64,
    records: Records,
}

impl Expect {
    fn push(&mut self, offset: i64, epoch: u32) {
        self.records
            .insert(offset, (key(offset), value(offset, epoch)));
        self.end = self.end.max(offset + 1);
    }
    fn visible(&self) -> impl Iterator<Item = (&i64, &(Vec<u8>, Vec<u8>))> {
        self.records.range(self.start..self.end)
    }
    /// Offsets that must be there whatever compaction did: the latest record of each key.
    fn latest_per_key(&self) -> BTreeMap<Vec<u8>, i64> {
        let mut latest = BTreeMap::new();
        for (offset, (key, _)) in self.visible() {
            latest.insert(key.clone(), *offset);
        }
        latest
    }
}

fn key(offset: i64) -> Vec<u8> {
    format!("k{}", offset % 5).into_bytes()
}

fn value(offset: i64, epoch: u32) -> Vec<u8> {
    format!(
        "{offset}/{epoch}/{}",
        "v".repeat(60 + (offset % 7) as usize)
    )
    .into_bytes()
}

fn record(offset: i64, epoch: u32) -> (Vec<u8>, Vec<u8>) {
    (key(offset), value(offset, epoch))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Append,
    AppendBatch,
    AppendsThatRoll,
    Truncate,
    DeleteAndRetain,
    Compact,
    Close,
}

const STEPS: [Step; 7] = [
    Step::Append,
    Step::AppendBatch,
    Step::AppendsThatRoll,
    Step::Truncate,
    Step::DeleteAndRetain,
    Step::Compact,
    Step::Close,
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    WriteEio,
    WriteEnospc,
    ShortWrite,
    CreateEnospc,
    SetLenEio,
    SyncEio,
    SyncEnospc,
    SyncDirEio,
    RenameEio,
    RemoveEio,
}

const FAULTS: [Fault; 10] = [
    Fault::WriteEio,
    Fault::WriteEnospc,
    Fault::ShortWrite,
    Fault::CreateEnospc,
    Fault::SetLenEio,
    Fault::SyncEio,
    Fault::SyncEnospc,
    Fault::SyncDirEio,
    Fault::RenameEio,
    Fault::RemoveEio,
];

impl Fault {
    fn op(self) -> FaultOp {
        match self {
            Fault::WriteEio | Fault::WriteEnospc | Fault::ShortWrite => FaultOp::Write,
            Fault::CreateEnospc => FaultOp::Create,
            Fault::SetLenEio => FaultOp::SetLen,
            Fault::SyncEio | Fault::SyncEnospc => FaultOp::Sync,
            Fault::SyncDirEio => FaultOp::SyncDir,
            Fault::RenameEio => FaultOp::Rename,
            Fault::RemoveEio => FaultOp::Remove,
        }
    }
    fn rule(self, nth: u64) -> FaultRule {
        match self {
            Fault::ShortWrite => FaultRule::short_write(nth, 9),
            Fault::WriteEnospc | Fault::CreateEnospc | Fault::SyncEnospc => {
                FaultRule::fail(self.op(), nth).error(FaultError::Enospc)
            }
            _ => FaultRule::fail(self.op(), nth).error(FaultError::Eio),
        }
    }
    /// The disk is full: the log must keep working once the fault is cleared.
    fn is_space(self) -> bool {
        matches!(
            self,
            Fault::WriteEnospc | Fault::ShortWrite | Fault::CreateEnospc
        )
    }
    fn is_sync(self) -> bool {
        matches!(self, Fault::SyncEio | Fault::SyncEnospc)
    }
    fn count(self, sim: &SimStorage) -> u64 {
        let stats = sim.stats();
        match self.op() {
            FaultOp::Write => stats.writes,
            FaultOp::Create => stats.creates,
            FaultOp::SetLen => stats.set_lens,
            FaultOp::Sync => stats.syncs,
            FaultOp::SyncDir => stats.sync_dirs,
            FaultOp::Rename => stats.renames,
            FaultOp::Remove => stats.removes,
            _ => 0,
        }
    }
}

fn config(sim: &SimStorage) -> LogConfig {
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    LogConfig::builder_for_tests()
        .segment_bytes(1024)
        .index_interval_bytes(128)
        .cleanup_policy(CleanupPolicy::COMPACT)
        .retention_ms(-1)
        .flush_policy(FlushPolicy::EveryAppend)
        .storage(storage)
        .clock(Arc::new(ManualClock::new(T0)))
        .build()
        .unwrap()
}

fn new_record(offset: i64, epoch: u32) -> NewRecord {
    let (key, value) = record(offset, epoch);
    NewRecord::new(T0 - 10_000 + offset, Some(&key), Some(&value))
}

/// A log with [`SETUP_RECORDS`] durable records in several segments.
fn setup(seed: u64) -> (SimStorage, Log, Expect) {
    let sim = SimStorage::new(seed);
    let log = Log::open(DIR, config(&sim)).unwrap();
    let mut expect = Expect {
        start: 0,
        end: 0,
        records: BTreeMap::new(),
    };
    for offset in 0..SETUP_RECORDS {
        log.append(&[new_record(offset, 0)]).unwrap();
        expect.push(offset, 0);
    }
    assert!(log.stats().segments >= 4);
    log.wait_durable(SETUP_RECORDS - 1).unwrap();
    (sim, log, expect)
}

/// Runs `step`; returns its result and what the log holds if it completed.
fn run_step(step: Step, log: &Log, before: &Expect) -> (partlog::Result<()>, Expect) {
    let mut after = before.clone();
    let end = before.end;
    let result = match step {
        Step::Append => log.append(&[new_record(end, 1)]).map(|info| {
            assert_eq!(info.first_offset, end);
            after.push(end, 1);
        }),
        Step::AppendBatch => {
            let mut builder = BatchBuilder::new(Compression::Lz4);
            for offset in end..end + 3 {
                builder.push(&new_record(offset, 1));
            }
            let batch = builder.build().unwrap();
            log.append_batch(&batch).map(|_| {
                for offset in end..end + 3 {
                    after.push(offset, 1);
                }
            })
        }
        Step::AppendsThatRoll => {
            let segments = log.stats().segments;
            let mut result = Ok(());
            for offset in end..end + 12 {
                match log.append(&[new_record(offset, 1)]) {
                    Ok(_) => after.push(offset, 1),
                    Err(error) => {
                        result = Err(error);
                        break;
                    }
                }
                if log.stats().segments > segments {
                    break;
                }
            }
            result
        }
        Step::Truncate => {
            let target = 11;
            // What the log holds if the truncation happened, whether or not it reports so.
            after.records.retain(|&offset, _| offset < target);
            after.end = target;
            log.truncate_to(target).map(|new_end| {
                assert_eq!(new_end, target, "one record per batch");
            })
        }
        Step::DeleteAndRetain => {
            let start = 17;
            after.start = start;
            log.delete_records_before(start).and_then(|()| {
                log.enforce_retention().map(|report| {
                    assert!(report.segments_deleted() > 0);
                })
            })
        }
        Step::Compact => log.compact().map(|_| ()),
        Step::Close => log.close(),
    };
    (result, after)
}

/// What the log shows: offset -> (key, value) from the log start.
fn contents(log: &Log) -> partlog::Result<Records> {
    log.records(log.log_start_offset(), ReadBound::LogEnd)
        .map(|r| {
            r.map(|r| {
                (
                    r.offset,
                    (r.key.unwrap_or_default(), r.value.unwrap_or_default()),
                )
            })
        })
        .collect()
}

/// The log holds what one of `states` says: nothing else, and everything it must.
fn check_contents(label: &str, log: &Log, step: Step, states: &[&Expect]) {
    let found = contents(log).unwrap_or_else(|e| panic!("{label}: read failed: {e}"));
    let fits = |expect: &Expect| -> Result<(), String> {
        if log.log_start_offset() != expect.start {
            return Err(format!(
                "log start {} != {}",
                log.log_start_offset(),
                expect.start
            ));
        }
        for (offset, record) in &found {
            if expect.records.get(offset) != Some(record) {
                return Err(format!("offset {offset} is {record:?}, not expected"));
            }
        }
        let required: Vec<i64> = if step == Step::Compact {
            expect.latest_per_key().into_values().collect()
        } else {
            expect.visible().map(|(offset, _)| *offset).collect()
        };
        for offset in required {
            if !found.contains_key(&offset) {
                return Err(format!("offset {offset} is missing"));
            }
        }
        Ok(())
    };
    let verdicts: Vec<Result<(), String>> = states.iter().map(|state| fits(state)).collect();
    assert!(
        verdicts.iter().any(Result::is_ok),
        "{label}: the log matches no allowed state: {verdicts:?}"
    );
}

fn run_case(step: Step, fault: Fault, nth: u64) {
    let label = format!("{step:?} with {fault:?} at op {nth}");
    let (sim, log, before) = setup(nth);
    let events_before = sim.event_count();
    sim.inject(fault.rule(nth));
    let (result, after) = run_step(step, &log, &before);
    let faulted_path = sim
        .events_since(events_before)
        .into_iter()
        .find_map(|event| match event {
            SimEvent::Fault { path, .. } => Some(path),
            _ => None,
        });
    // Some failed syncs lose nothing, so they need not poison: the checkpoint's slot is
    // rewritten whole at the next write and its synced slot was never touched
    // (src/log/files/checkpoint.rs), a compaction pass discards a `.cleaned` copy it could not
    // sync (the caller gets the error), and so does a producer snapshot's writer its
    // temporary file. After a swap, a pass builds the new segment's indexes
    // and syncs them with the already durable `.log`; indexes are derived data, so a failure
    // there is only logged (the crash check below proves nothing was lost).
    let harmless_sync = fault.is_sync()
        && faulted_path.as_ref().is_some_and(|path| {
            let name = path.to_string_lossy();
            // A producer snapshot's temporary file is removed after a failed sync, and no
            // snapshot is ever needed to keep a record (only to shorten a replay).
            let scratch = name.ends_with("partlog.checkpoint")
                || name.ends_with(".cleaned")
                || name.ends_with(".snapshot.tmp");
            // A truncation writes its producer snapshot once it is done and durable: a
            // failure there is only logged.
            let after_the_truncation = step == Step::Truncate && name.ends_with(".snapshot.tmp");
            if scratch && !after_the_truncation {
                assert!(result.is_err(), "{label}: the failed sync is reported");
            }
            scratch || (step == Step::Compact && result.is_ok())
        });
    let faulted = faulted_path.is_some() && !harmless_sync;
    if let Err(error) = &result {
        assert!(
            matches!(error, Error::Io { .. } | Error::Poisoned),
            "{label}: untyped error {error:?}"
        );
        if fault.is_space()
            && let Error::Io { .. } = error
        {
            assert_eq!(error.io_kind(), Some(ErrorKind::StorageFull), "{label}");
        }
    }
    let poisoned = log.stats().poisoned;
    if fault.is_space() && step != Step::Close && step != Step::Truncate {
        assert!(
            !poisoned,
            "{label}: a full disk must not poison the log: {result:?}"
        );
    }
    if fault.is_sync() && faulted {
        assert!(
            poisoned,
            "{label}: a failed fsync of {faulted_path:?} must poison the log: {result:?}"
        );
    }
    // The state the log may be in: the step's, or (if it failed) the one before.
    // A truncation that failed part-way may have cut the tail to anywhere from its target
    // up: a prefix of the old log, never one with a hole.
    let prefixes: Vec<Expect> = if step == Step::Truncate && result.is_err() {
        (after.end..before.end)
            .map(|end| {
                let mut prefix = before.clone();
                prefix.records.retain(|&offset, _| offset < end);
                prefix.end = end;
                prefix
            })
            .collect()
    } else {
        Vec::new()
    };
    let states: Vec<&Expect> = if result.is_ok() {
        vec![&after]
    } else {
        let mut states = vec![&before, &after];
        states.extend(prefixes.iter());
        states
    };
    sim.clear_faults();
    if step == Step::Close {
        // Nothing can be read or written through a closed log; the reopen below checks it.
    } else if poisoned {
        assert!(
            matches!(log.append(&[new_record(999, 9)]), Err(Error::Poisoned)),
            "{label}"
        );
        assert!(
            log.durable_offset() <= log.log_end_offset(),
            "{label}: durable past the end"
        );
    } else {
        // Space returned: the log takes appends again, at its end.
        check_contents(&label, &log, step, &states);
        let end = log.log_end_offset();
        let info = log
            .append(&[new_record(end, 2)])
            .unwrap_or_else(|e| panic!("{label}: append after the fault was cleared: {e}"));
        assert_eq!(info.first_offset, end, "{label}");
        assert_eq!(log.durable_offset(), end + 1, "{label}");
    }
    let appended_after = (!poisoned && step != Step::Close).then(|| log.log_end_offset() - 1);
    let durable = log.durable_offset();
    drop(log);

    // The strictest crash: only synced bytes and directory entries remain.
    sim.crash_with(&CrashConfig::lose_unsynced());
    let report = partlog::verify_dir(DIR, &config(&sim))
        .unwrap_or_else(|e| panic!("{label}: verify failed: {e}"));
    let corrupt: Vec<_> = report.findings_of(Severity::Corruption).collect();
    assert!(corrupt.is_empty(), "{label}: {corrupt:?}");
    let log = Log::open(DIR, config(&sim)).unwrap_or_else(|e| panic!("{label}: reopen: {e}"));
    assert!(
        log.log_end_offset() >= durable.min(before.end.min(after.end)),
        "{label}: durable offsets lost ({} < {durable})",
        log.log_end_offset()
    );
    let mut states: Vec<Expect> = states.into_iter().cloned().collect();
    if let Some(offset) = appended_after {
        for state in &mut states {
            state.records.retain(|&o, _| o < offset);
            state.push(offset, 2);
        }
    }
    let refs: Vec<&Expect> = states.iter().collect();
    check_contents(&format!("{label}, after a crash"), &log, step, &refs);
    log.close().unwrap();
}

#[test]
fn every_fault_at_every_operation_of_every_step() {
    let mut cases = 0;
    for step in STEPS {
        for fault in FAULTS {
            // A dry run counts the operations of this kind that the step performs.
            let (sim, log, before) = setup(0);
            let ops_before = fault.count(&sim);
            let (result, _) = run_step(step, &log, &before);
            result.unwrap_or_else(|e| panic!("{step:?} without a fault: {e}"));
            let ops = fault.count(&sim) - ops_before;
            drop(log);
            // One more than counted: background syncs vary a little from run to run.
            for nth in 1..=ops + 1 {
                run_case(step, fault, nth);
                cases += 1;
            }
        }
    }
    println!("{cases} fault cases");
    assert!(cases > 100, "{cases}");
}

/// A full disk that stays full: appends fail with ENOSPC (typed, not poisoned) as long as it
/// lasts, rolls too, and the log goes on when space returns.
#[test]
fn a_disk_that_stays_full_until_space_is_freed() {
    let (sim, log, mut expect) = setup(7);
    let full = sim.inject(
        FaultRule::fail(FaultOp::Write, 1)
            .error(FaultError::Enospc)
            .until_cancelled(),
    );
    let end = log.log_end_offset();
    for attempt in 0..20 {
        let error = log.append(&[new_record(end, 1)]).unwrap_err();
        assert_eq!(
            error.io_kind(),
            Some(ErrorKind::StorageFull),
            "{attempt}: {error}"
        );
        assert!(!log.stats().poisoned);
        assert_eq!(log.log_end_offset(), end);
    }
    check_contents("full", &log, Step::Append, &[&expect]);
    assert!(sim.cancel_fault(full));
    for offset in end..end + 20 {
        log.append(&[new_record(offset, 1)]).unwrap();
        expect.push(offset, 1);
    }
    check_contents("space returned", &log, Step::Append, &[&expect]);

    // Full while a roll creates the new segment's files: the old segment stays active.
    let full = sim.inject(
        FaultRule::fail(FaultOp::Create, 1)
            .error(FaultError::Enospc)
            .until_cancelled(),
    );
    let segments = log.stats().segments;
    let end = log.log_end_offset();
    let mut failed = 0;
    for offset in end..end + 20 {
        match log.append(&[new_record(offset, 1)]) {
            Ok(_) => {
                assert_eq!(failed, 0, "once the roll is due, every append needs it");
                expect.push(offset, 1);
            }
            Err(error) => {
                assert_eq!(error.io_kind(), Some(ErrorKind::StorageFull), "{error}");
                failed += 1;
            }
        }
    }
    assert!(failed > 0);
    assert_eq!(log.stats().segments, segments);
    assert!(!log.stats().poisoned);
    sim.cancel_fault(full);
    let end = log.log_end_offset();
    log.append(&[new_record(end, 1)]).unwrap();
    expect.push(end, 1);
    assert_eq!(log.stats().segments, segments + 1);

    // Full during compaction: the pass fails, the log is untouched and works.
    let full = sim.inject(
        FaultRule::fail(FaultOp::Write, 1)
            .on_paths_ending_with(".cleaned")
            .error(FaultError::Enospc)
            .until_cancelled(),
    );
    let error = log.compact().unwrap_err();
    assert_eq!(error.io_kind(), Some(ErrorKind::StorageFull), "{error}");
    assert!(!log.stats().poisoned);
    // Segments whose cleaned copy needed no write may have been swapped in: each segment is
    // wholly old or wholly new, and every latest record of a key is there.
    check_contents("compaction failed", &log, Step::Compact, &[&expect]);
    sim.cancel_fault(full);
    log.compact().unwrap();
    check_contents("compacted", &log, Step::Compact, &[&expect]);
    log.close().unwrap();
    drop(log);
    let log = Log::open(DIR, config(&sim)).unwrap();
    check_contents("reopened", &log, Step::Compact, &[&expect]);
}
