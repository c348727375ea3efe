//! The crash matrix (issue 6): a model test over random sequences of log operations, with a
//! simulated machine crash injected at each write, sync and directory operation in turn.
//!
//! A case is a random sequence of appends (single records and producer batches, in every
//! codec), flushes, rolls, `truncate_to`, `delete_records_before`, retention and compaction
//! passes (in the compacted variant), and clean close-and-reopens. A dry run records every
//! operation that changes or persists state (create, write, `set_len`, sync, directory sync,
//! rename, remove, ...); then the case runs once per such operation k, with the machine crashing
//! just before the kth (a random legal crash image: unsynced writes kept, lost or torn at a
//! sector, unsynced directory changes cut). After each crash `verify_dir` must find no
//! corruption, the log must reopen under `RecoveryMode::Fail`, and:
//! - every record acknowledged durable (below the durable offset the log reported) is there,
//!   unless a later record with its key is there too (the compacted variant);
//! - every record there is one that was appended at that offset (nothing truncated comes back,
//!   no torn or corrupt batch: every read is CRC-checked), and without compaction the records
//!   are gap-free from the log start; with it, a record is missing below one that is there only
//!   if a later record of its key is there (what survives is the durable records, then a
//!   prefix of the rest: never a hole);
//! - the log start offset is at least what a returned `delete_records_before` set;
//! - the read at every offset from the log start to the end, and `offset_for_timestamp` for
//!   every record's timestamp, answer what the model says;
//! - the log takes an append at its end, and after a clean close `verify_dir` (which checks
//!   every index entry against its batch) finds nothing wrong.
//!
//! Scale: `PARTLOG_CRASH_MATRIX_CASES` (default 24) cases, or as many as fit in
//! `PARTLOG_CRASH_MATRIX_SECS` seconds; `PARTLOG_CRASH_MATRIX_SEED` is the first case's seed
//! (a failure prints its seed, and the shrunk sequence of operations).
#![cfg(feature = "sim")] // the simulator and the manual clock: `cargo test --all-features`

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use partlog::unstable::sim::{CrashConfig, FaultOp, FaultRule, SimEvent};
use partlog::unstable::{ManualClock, SimStorage, Storage};
use partlog::{
    BatchBuilder, CleanupPolicy, Compression, CompressionType, FlushPolicy, Log, LogConfig,
    NewRecord, ReadBound, RecoveryMode, Severity, verify_dir,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};

const T0: i64 = 1_700_000_000_000;
const DIR: &str = "/matrix/topic-0";
const SEGMENT_MS: i64 = 60_000;
const KEYS: i64 = 6;

#[derive(Debug, Clone)]
enum Op {
    /// `append` of 1 to 3 records (the log's `compression.type` picks the codec).
    Append { count: u8 },
    /// `append_batch` of a producer batch of 1 to 4 records in codec none, lz4 or zstd.
    AppendBatch { count: u8, codec: u8 },
    /// `wait_durable` of everything appended.
    Flush,
    /// Moves the clock past `segment.ms`, so that the next append rolls.
    Roll,
    /// `truncate_to(end - back)`, at least the log start.
    Truncate { back: u8 },
    /// `delete_records_before` an eighth-step between the start and the end.
    DeleteBefore { eighths: u8 },
    /// `enforce_retention`.
    Retention,
    /// `compact` (the compacted variant only).
    Compact,
    /// `close` and `open`.
    Reopen,
}

#[derive(Debug, Clone)]
struct Case {
    compacted: bool,
    /// 0: producer (none), 1: lz4, 2: zstd, for `append`.
    compression: u8,
    /// 0: OS decides, 1: every append, 2: every 3 messages.
    flush: u8,
    segment_bytes: u32,
    seed: u64,
    ops: Vec<Op>,
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1u8..=3).prop_map(|count| Op::Append { count }),
        3 => (1u8..=4, 0u8..3).prop_map(|(count, codec)| Op::AppendBatch { count, codec }),
        2 => Just(Op::Flush),
        2 => Just(Op::Roll),
        2 => (0u8..40).prop_map(|back| Op::Truncate { back }),
        1 => (0u8..=8).prop_map(|eighths| Op::DeleteBefore { eighths }),
        1 => Just(Op::Retention),
        1 => Just(Op::Compact),
        1 => Just(Op::Reopen),
    ]
}

fn case_strategy() -> impl Strategy<Value = Case> {
    (
        any::<bool>(),
        0u8..3,
        0u8..3,
        prop_oneof![Just(1024u32), Just(1536u32)],
        any::<u64>(),
        prop::collection::vec(op_strategy(), 8..28),
    )
        .prop_map(
            |(compacted, compression, flush, segment_bytes, seed, ops)| Case {
                compacted,
                compression,
                flush,
                segment_bytes,
                seed,
                ops,
            },
        )
}

fn config(case: &Case, sim: &SimStorage, clock: &Arc<ManualClock>) -> LogConfig {
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    LogConfig::builder_for_tests()
        .segment_bytes(case.segment_bytes)
        .segment_ms(SEGMENT_MS)
        .index_interval_bytes(128)
        .segment_index_bytes(96)
        .cleanup_policy(if case.compacted {
            CleanupPolicy::COMPACT
        } else {
            CleanupPolicy::DELETE
        })
        .retention_ms(-1)
        .compression_type(match case.compression {
            0 => CompressionType::Producer,
            1 => CompressionType::Lz4,
            _ => CompressionType::Zstd,
        })
        .flush_policy(match case.flush {
            0 => FlushPolicy::OsDecides,
            1 => FlushPolicy::EveryAppend,
            _ => FlushPolicy::EveryMessages(std::num::NonZeroU64::new(3).unwrap()),
        })
        .recovery_point_ms(1)
        .recovery_mode(RecoveryMode::Fail)
        .storage(storage)
        .clock(clock.clone())
        .build()
        .unwrap()
}

/// One record as the model knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rec {
    key: Vec<u8>,
    value: Vec<u8>,
    timestamp: i64,
}

fn rec(offset: i64, epoch: u32) -> Rec {
    Rec {
        key: format!("k{}", offset % KEYS).into_bytes(),
        value: format!("{offset}/{epoch}/{}", "v".repeat((offset % 29) as usize)).into_bytes(),
        // Increasing with the offset, so that `offset_for_timestamp` has one right answer.
        timestamp: T0 - 1_000_000 + offset,
    }
}

/// What the log must and may hold.
#[derive(Debug, Default)]
struct Model {
    /// Acknowledged records, by offset (a completed truncation removes its tail).
    acked: BTreeMap<i64, Rec>,
    /// Records that may be there: those of an operation a crash interrupted.
    maybe: BTreeMap<i64, Rec>,
    /// The log said every offset below this was durable.
    durable: i64,
    /// A returned `delete_records_before` (or truncation) set the start to at least this.
    start: i64,
    /// The start may be up to this (an interrupted `delete_records_before`).
    start_max: i64,
    /// Truncations so far: a record's value names the epoch it was written in.
    epoch: u32,
    /// The first offset of every batch appended (a truncation removes a straddling batch whole).
    batch_starts: std::collections::BTreeSet<i64>,
    /// Offsets a compaction pass may have removed: when it ran, a later record had their key.
    removable: std::collections::BTreeSet<i64>,
}

impl Model {
    /// Before a compaction pass: every record with a later one of its key may go.
    fn note_compaction(&mut self) {
        let mut later_keys = std::collections::BTreeSet::new();
        for (offset, r) in self.acked.iter().rev() {
            if !later_keys.insert(r.key.clone()) {
                self.removable.insert(*offset);
            }
        }
    }
}

/// Maps a simulator event to the kind of operation a crash rule counts.
fn op_of(event: &SimEvent) -> Option<FaultOp> {
    Some(match event {
        SimEvent::Create { .. } => FaultOp::Create,
        SimEvent::CreateDir { .. } => FaultOp::CreateDir,
        SimEvent::Write { .. } => FaultOp::Write,
        SimEvent::SetLen { .. } => FaultOp::SetLen,
        SimEvent::Sync { .. } => FaultOp::Sync,
        SimEvent::SyncDir { .. } => FaultOp::SyncDir,
        SimEvent::Rename { .. } => FaultOp::Rename,
        SimEvent::Remove { .. } => FaultOp::Remove,
        SimEvent::SetMtime { .. } => FaultOp::SetMtime,
        _ => return None,
    })
}

/// The crash points of a dry run: for each state-changing operation, its kind and its ordinal
/// among operations of that kind.
fn crash_points(events: &[SimEvent]) -> Vec<(FaultOp, u64)> {
    let mut seen: BTreeMap<FaultOp, u64> = BTreeMap::new();
    events
        .iter()
        .filter_map(op_of)
        .map(|op| {
            let n = seen.entry(op).or_insert(0);
            *n += 1;
            (op, *n)
        })
        .collect()
}

struct Run<'a> {
    case: &'a Case,
    sim: SimStorage,
    clock: Arc<ManualClock>,
    log: Option<Log>,
    model: Model,
}

macro_rules! check {
    ($cond:expr, $($arg:tt)*) => {
        if !$cond {
            return Err(TestCaseError::fail(format!($($arg)*)));
        }
    };
}

impl Run<'_> {
    fn crashed(&self) -> bool {
        self.sim.stats().crashes > 0
    }

    fn log(&self) -> &Log {
        self.log.as_ref().expect("open")
    }

    fn note_append(&mut self, first: i64, count: i64, result: &partlog::Result<()>) {
        let epoch = self.model.epoch;
        self.model.batch_starts.insert(first);
        for offset in first..first + count {
            if result.is_ok() {
                self.model.acked.insert(offset, rec(offset, epoch));
            } else {
                self.model.maybe.insert(offset, rec(offset, epoch));
            }
        }
    }

    fn new_record(r: &Rec) -> NewRecord {
        NewRecord::new(r.timestamp, Some(&r.key), Some(&r.value))
    }

    /// Runs one operation; `Err` only with a crash (checked by the caller).
    fn apply(&mut self, op: &Op) -> partlog::Result<()> {
        let end = self.log().log_end_offset();
        let start = self.log().log_start_offset();
        let epoch = self.model.epoch;
        match op {
            Op::Append { count } => {
                let count = i64::from(*count);
                let records: Vec<NewRecord> = (end..end + count)
                    .map(|o| Self::new_record(&rec(o, epoch)))
                    .collect();
                let result = self.log().append(&records).map(|_| ());
                self.note_append(end, count, &result);
                result
            }
            Op::AppendBatch { count, codec } => {
                let count = i64::from(*count);
                let codec = [Compression::None, Compression::Lz4, Compression::Zstd]
                    [usize::from(*codec) % 3];
                let mut builder = BatchBuilder::new(codec);
                for o in end..end + count {
                    builder.push(&Self::new_record(&rec(o, epoch)));
                }
                let batch = builder.build().expect("a valid batch");
                let result = self.log().append_batch(&batch).map(|_| ());
                self.note_append(end, count, &result);
                result
            }
            Op::Flush => {
                if end > start {
                    self.log().wait_durable(end - 1)
                } else {
                    Ok(())
                }
            }
            Op::Roll => {
                self.clock.advance(SEGMENT_MS + 1);
                Ok(())
            }
            Op::Truncate { back } => {
                let to = (end - i64::from(*back)).max(start);
                let result = self.log().truncate_to(to);
                self.model.epoch += 1;
                match result {
                    Ok(new_end) => {
                        self.model.acked.split_off(&new_end);
                        self.model.batch_starts.split_off(&new_end);
                        self.model.removable.split_off(&new_end);
                        self.model.maybe.clear();
                        self.model.durable = self.model.durable.min(new_end);
                        self.model.start = self.model.start.min(new_end);
                        self.model.start_max = self.model.start_max.min(new_end);
                        Ok(())
                    }
                    Err(error) => {
                        // Interrupted: the tail from the batch holding `to` on may be gone (a
                        // straddling batch goes whole), durable or not; what remains of it is
                        // the old records.
                        let cut = if to < end {
                            self.model
                                .batch_starts
                                .range(..=to)
                                .next_back()
                                .copied()
                                .unwrap_or(to)
                        } else {
                            to
                        };
                        // In a compacted log a truncation ends the log after the last batch
                        // kept (Segment::truncation_point): below `to`, down to the last
                        // record compaction cannot have removed, and with none, down to the
                        // holder's base (the log start follows, as it does after a return).
                        let cut = if self.case.compacted {
                            let lowest = self
                                .model
                                .acked
                                .keys()
                                .next()
                                .map_or(start, |&first| first.min(start));
                            self.model
                                .acked
                                .range(..cut)
                                .rev()
                                .find(|(offset, _)| !self.model.removable.contains(offset))
                                .map_or(lowest, |(offset, _)| offset + 1)
                                .min(cut)
                        } else {
                            cut
                        };
                        let tail = self.model.acked.split_off(&cut);
                        self.model.maybe.extend(tail);
                        self.model.durable = self.model.durable.min(cut);
                        self.model.start = self.model.start.min(cut);
                        Err(error)
                    }
                }
            }
            Op::DeleteBefore { eighths } => {
                let to = start + (end - start) * i64::from(*eighths) / 8;
                self.model.start_max = self.model.start_max.max(to);
                let result = self.log().delete_records_before(to);
                if result.is_ok() {
                    self.model.start = self.model.start.max(to);
                }
                result
            }
            Op::Retention => self.log().enforce_retention().map(|_| ()),
            Op::Compact => {
                if self.case.compacted {
                    self.model.note_compaction();
                    self.log().compact().map(|_| ())
                } else {
                    Ok(())
                }
            }
            Op::Reopen => {
                let log = self.log.take().expect("open");
                let closed = log.close();
                drop(log);
                closed?;
                let log = Log::open(DIR, config(self.case, &self.sim, &self.clock))?;
                self.log = Some(log);
                Ok(())
            }
        }
    }

    /// Everything the module docs promise of a log after a crash (or a clean run).
    fn check_recovered(&mut self, label: &str) -> Result<(), TestCaseError> {
        let config = config(self.case, &self.sim, &self.clock);
        // A crash inside the first open may leave no directory at all.
        // A crash inside the first open may leave no directory, or one without a segment,
        // which `verify_dir` refuses as not a log.
        match verify_dir(DIR, &config) {
            Ok(report) => {
                let corrupt: Vec<_> = report.findings_of(Severity::Corruption).collect();
                check!(corrupt.is_empty(), "{label}: verify: {corrupt:?}");
            }
            Err(error) => check!(
                self.model.acked.is_empty() && self.model.maybe.is_empty(),
                "{label}: verify: {error}"
            ),
        }
        let log = Log::open(DIR, config.clone())
            .map_err(|e| TestCaseError::fail(format!("{label}: reopen: {e}")))?;
        let model = &self.model;
        let start = log.log_start_offset();
        let end = log.log_end_offset();
        check!(
            start >= model.start && start <= model.start_max.max(model.start),
            "{label}: log start {start}, model {}..={}",
            model.start,
            model.start_max
        );
        let mut found: BTreeMap<i64, Rec> = BTreeMap::new();
        for record in log.records(start, ReadBound::LogEnd) {
            let record = record.map_err(|e| TestCaseError::fail(format!("{label}: read: {e}")))?;
            let got = Rec {
                key: record.key.unwrap_or_default(),
                value: record.value.unwrap_or_default(),
                timestamp: record.timestamp,
            };
            let allowed = model.acked.get(&record.offset) == Some(&got)
                || model.maybe.get(&record.offset) == Some(&got);
            check!(
                allowed,
                "{label}: offset {} holds {:?}, never acknowledged there",
                record.offset,
                String::from_utf8_lossy(&got.value)
            );
            found.insert(record.offset, got);
        }
        // Every durable record is there, unless compaction kept a later one of its key, or
        // removed it for a later one that a truncation then took (truncate_to's docs: Kafka
        // avoids this by compacting only below the high watermark and truncating above it).
        let mut latest_found: BTreeMap<&[u8], i64> = BTreeMap::new();
        for (offset, r) in &found {
            latest_found.insert(&r.key, *offset);
        }
        for (offset, r) in model.acked.range(start..model.durable.max(start)) {
            let superseded = self.case.compacted
                && latest_found
                    .get(r.key.as_slice())
                    .is_some_and(|latest| latest > offset);
            check!(
                found.contains_key(offset) || superseded || model.removable.contains(offset),
                "{label}: durable offset {offset} lost (durable {}, end {end})",
                model.durable
            );
        }
        // No hole: what survives is the durable records, then a prefix of the rest. A record
        // missing below one that is there must be one a compaction pass could remove.
        if let Some(&last_found) = found.keys().next_back() {
            let candidates = model
                .acked
                .range(start..last_found)
                .chain(model.maybe.range(start..last_found));
            for (offset, _) in candidates {
                check!(
                    found.contains_key(offset) || model.removable.contains(offset),
                    "{label}: offset {offset} is missing below {last_found}, which is there"
                );
            }
        }
        check!(
            end >= model.durable.max(start),
            "{label}: end {end} below durable {}",
            model.durable
        );
        if !self.case.compacted {
            let offsets: Vec<i64> = found.keys().copied().collect();
            let expected: Vec<i64> = (start..end).collect();
            check!(
                offsets == expected,
                "{label}: records are not gap-free from the start"
            );
        }
        // The read at every offset returns the next record there is.
        for offset in start..end {
            let next = log
                .records(offset, ReadBound::LogEnd)
                .next()
                .transpose()
                .map_err(|e| TestCaseError::fail(format!("{label}: read at {offset}: {e}")))?;
            let expected = found.range(offset..).next().map(|(o, _)| *o);
            check!(
                next.as_ref().map(|r| r.offset) == expected,
                "{label}: read at {offset} gave {:?}, expected {expected:?}",
                next.map(|r| r.offset)
            );
        }
        // offset_for_timestamp: the first record at or after each timestamp.
        let mut targets: Vec<i64> = found.values().map(|r| r.timestamp).collect();
        targets.push(T0);
        for target in targets {
            let answer = log
                .offset_for_timestamp(target)
                .map_err(|e| TestCaseError::fail(format!("{label}: offset_for_timestamp: {e}")))?;
            let expected = found
                .iter()
                .find(|(_, r)| r.timestamp >= target)
                .map(|(o, r)| (*o, r.timestamp));
            check!(
                answer == expected,
                "{label}: offset_for_timestamp({target}) = {answer:?}, expected {expected:?}"
            );
        }
        // The log goes on at its end, and closes into a state that verifies clean.
        let info = log
            .append(&[Self::new_record(&rec(end, 1000))])
            .map_err(|e| TestCaseError::fail(format!("{label}: append after recovery: {e}")))?;
        check!(info.first_offset == end, "{label}: append landed elsewhere");
        log.close()
            .map_err(|e| TestCaseError::fail(format!("{label}: close: {e}")))?;
        drop(log);
        let report =
            verify_dir(DIR, &config).map_err(|e| TestCaseError::fail(format!("{label}: {e}")))?;
        check!(
            report.findings.iter().all(|f| f.severity == Severity::Note),
            "{label}: after a clean close: {:?}",
            report.findings
        );
        Ok(())
    }
}

/// Runs `case`, crashing just before `crash_at` (a dry run when `None`). Returns the dry run's
/// events.
fn run_case(case: &Case, crash_at: Option<(FaultOp, u64)>) -> Result<Vec<SimEvent>, TestCaseError> {
    let sim = SimStorage::new(case.seed);
    let clock = Arc::new(ManualClock::new(T0));
    if let Some((op, nth)) = crash_at {
        let image = CrashConfig::random().seed(case.seed ^ nth.rotate_left(17) ^ op as u64);
        sim.inject(FaultRule::crash(op, nth).crash_config(image));
    }
    let label = format!("seed {} crash {crash_at:?}", case.seed);
    let mut run = Run {
        case,
        sim: sim.clone(),
        clock: clock.clone(),
        log: None,
        model: Model::default(),
    };
    match Log::open(DIR, config(case, &sim, &clock)) {
        Ok(log) => run.log = Some(log),
        Err(error) => check!(
            run.crashed(),
            "{label}: open failed without a crash: {error}"
        ),
    }
    if run.log.is_some() {
        for (index, op) in case.ops.iter().enumerate() {
            let result = run.apply(op);
            if run.crashed() {
                // The model noted what the interrupted operation may have left; an append
                // that returned before the crash (the flusher met it) stays acknowledged.
                break;
            }
            if let Err(error) = result {
                return Err(TestCaseError::fail(format!(
                    "{label}: op {index} {op:?} failed without a crash: {error}"
                )));
            }
            if run.log.is_none() {
                break;
            }
            let durable = run.log().durable_offset();
            run.model.durable = run.model.durable.max(durable);
        }
    }
    if !run.crashed() {
        // Beyond the last crash point of this run (the flusher's timing varies): crash now.
        sim.clear_faults();
        let image = CrashConfig::random().seed(case.seed);
        if let Some(log) = run.log.as_ref() {
            run.model.durable = run.model.durable.max(log.durable_offset());
        }
        sim.crash_with(&image);
    }
    sim.clear_faults();
    let events = sim.events();
    // The dead log's drop fails quietly: its handles died with the machine.
    drop(run.log.take());
    run.check_recovered(&label)?;
    Ok(events)
}

/// Runs every crash point of one case.
fn run_matrix(case: &Case, crash_points_run: &AtomicU64) -> Result<(), TestCaseError> {
    let events = run_case(case, None)?;
    let points = crash_points(&events);
    for point in points {
        run_case(case, Some(point))?;
        crash_points_run.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[test]
fn crash_at_every_write_sync_and_directory_operation() {
    let cases = env_u64("PARTLOG_CRASH_MATRIX_CASES").unwrap_or(24);
    let deadline =
        env_u64("PARTLOG_CRASH_MATRIX_SECS").map(|secs| Instant::now() + Duration::from_secs(secs));
    let first_seed = env_u64("PARTLOG_CRASH_MATRIX_SEED").unwrap_or(0);
    let crash_points_run = AtomicU64::new(0);
    let mut seed = first_seed;
    loop {
        let done = seed - first_seed;
        match deadline {
            Some(deadline) if Instant::now() >= deadline => break,
            None if done >= cases => break,
            _ => {}
        }
        let mut seed_bytes = [0u8; 32];
        seed_bytes[..8].copy_from_slice(&seed.to_be_bytes());
        let mut runner = TestRunner::new_with_rng(
            Config {
                cases: 1,
                failure_persistence: None,
                max_shrink_iters: 2000,
                ..Config::default()
            },
            TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes),
        );
        if let Err(failure) = runner.run(&case_strategy(), |case| {
            run_matrix(&case, &crash_points_run)
        }) {
            panic!("PARTLOG_CRASH_MATRIX_SEED={seed}: {failure}");
        }
        seed += 1;
    }
    let points = crash_points_run.load(Ordering::Relaxed);
    println!(
        "crash matrix: {} cases, {points} crash points, all recovered",
        seed - first_seed
    );
    assert!(points > 0);
}

/// The case that found a bug: in a compacted log (where recovery accepts gaps between
/// segments), `truncate_to` cut the segment holding the new end before renaming the later
/// segments away, so a crash in between brought the later segments back behind a hole.
#[test]
fn a_truncation_across_segments_of_a_compacted_log() {
    let mut ops = vec![Op::Append { count: 3 }; 12];
    ops.push(Op::Flush);
    ops.push(Op::Truncate { back: 25 });
    ops.push(Op::Append { count: 1 });
    for flush in 0..3 {
        let case = Case {
            compacted: true,
            compression: flush,
            flush,
            segment_bytes: 1024,
            seed: 7,
            ops: ops.clone(),
        };
        let points = AtomicU64::new(0);
        if let Err(failure) = run_matrix(&case, &points) {
            panic!("{failure}");
        }
        assert!(points.load(Ordering::Relaxed) > 20);
    }
}

/// The case that found a bug (PARTLOG_CRASH_MATRIX_SEED=2314): a compaction pass left offset
/// 12's batch first in the cleaned segment (every key has a later record), and `truncate_to(12)`
/// removed it and everything after. The log said it ended at 12, durably, but the file ended at
/// the segment's base: a reopen (after a crash, and after a clean close too) found the log
/// ending at 0, below the start offset, and started it over at 2.
#[test]
fn a_truncation_to_the_first_batch_of_a_compacted_segment() {
    let mut ops = vec![
        Op::Append { count: 1 },
        Op::Append { count: 2 },
        Op::AppendBatch { count: 3, codec: 0 },
        Op::Append { count: 2 },
        Op::AppendBatch { count: 4, codec: 0 },
        Op::Append { count: 1 },
        Op::Append { count: 2 },
        Op::Append { count: 1 },
        Op::Append { count: 2 },
        Op::Append { count: 1 },
        Op::Compact,
        Op::DeleteBefore { eighths: 1 },
        Op::Truncate { back: 7 },
    ];
    for reopen in [false, true] {
        if reopen {
            ops.push(Op::Reopen);
            ops.push(Op::Append { count: 2 });
        }
        let case = Case {
            compacted: true,
            compression: 0,
            flush: 0,
            segment_bytes: 1024,
            seed: 0,
            ops: ops.clone(),
        };
        let points = AtomicU64::new(0);
        if let Err(failure) = run_matrix(&case, &points) {
            panic!("{failure}");
        }
        assert!(points.load(Ordering::Relaxed) > 20);
    }
}
