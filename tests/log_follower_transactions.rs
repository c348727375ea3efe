//! Transactions through follower appends (ARCHITECTURE.md §9 and §11): a call of
//! `append_as_follower` holding several producers' batches and markers completes their
//! transactions in batch order, as Kafka's `UnifiedLog.append` does, and writes the `.txnindex`
//! entries a leader's appends and recovery's replay write for the same batches (issue 29,
//! item 1).
//!
//! The property test feeds random interleavings of several producers' data, commits and aborts
//! through the three paths and compares their files and producer state:
//! `PARTLOG_FOLLOWER_TXN_CASES` (default 500) cases, from `PARTLOG_FOLLOWER_TXN_SEED`.
#![cfg(feature = "sim")] // the manual clock: `cargo test --all-features`

#[path = "common/sim_files.rs"]
#[allow(dead_code, reason = "only its directory snapshot serves here")]
mod sim_files;
#[path = "common/txn_log.rs"]
mod txn_log;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use partlog::unstable::format::{build_control_batch, set_partition_leader_epoch};
use partlog::unstable::{ManualClock, SimStorage, Storage};
use partlog::{
    BatchBuilder, Compression, ControlRecordType, Log, LogConfig, NewRecord, ProducerStateEntry,
    ReadBound,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};

use txn_log::{aborted, aborted_txns};

const T0: i64 = 1_700_000_000_000;

fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(T0))
}

fn config(clock: &Arc<ManualClock>) -> LogConfig {
    LogConfig::builder_for_tests()
        // Rolls only where a test rolls.
        .segment_ms(i64::MAX / 4)
        .retention_check_interval_ms(-1)
        .clock(Arc::clone(clock) as Arc<dyn partlog::unstable::Clock>)
        .build()
        .unwrap()
}

/// A transactional batch of `count` records of `producer_id` at `base`, as a leader stored it.
fn txn_batch(base: i64, producer_id: i64, sequence: i32, count: i64) -> Vec<u8> {
    let mut builder = BatchBuilder::new(Compression::None)
        .base_offset(base)
        .producer(producer_id, 0, sequence)
        .transactional(true);
    for i in 0..count {
        builder.push(&NewRecord::new(
            T0,
            Some(b"k"),
            Some(format!("{producer_id}-{}", sequence as i64 + i).as_bytes()),
        ));
    }
    builder.build().unwrap()
}

/// A COMMIT or ABORT marker of `producer_id` at `offset`, as a leader stored it.
fn marker(offset: i64, producer_id: i64, kind: ControlRecordType) -> Vec<u8> {
    build_control_batch(kind, producer_id, 0, 0, offset, T0)
}

/// The offsets `committed_records` returns over the whole log.
fn committed_offsets(log: &Log) -> Vec<i64> {
    log.committed_records(log.log_start_offset(), ReadBound::LogEnd)
        .map(|record| record.unwrap().offset)
        .collect()
}

/// Issue 29, item 1: in one call `[txn(2)@0, txn(1)@1, ABORT(2)@2]`, producer 1's transaction
/// is open when producer 2's ABORT is written, so the entry's last stable offset is 1, not 3 (the
/// offset after the call). With 3, a `read_committed` fetch of the first segment stopped its
/// search there and missed producer 1's ABORT in the next one: offset 1, aborted, was returned
/// as committed, and the cleaner would have taken it for committed data.
#[test]
fn append_as_follower_completes_transactions_in_batch_order_with_the_lso_at_each_marker() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let log = Log::open(dir.path(), config(&clock)).unwrap();
    let mut call = txn_batch(0, 2, 0, 1);
    call.extend(txn_batch(1, 1, 0, 1));
    call.extend(marker(2, 2, ControlRecordType::Abort));
    log.append_as_follower(&call).unwrap();
    assert_eq!(log.roll().unwrap(), 3);
    log.append_as_follower(&marker(3, 1, ControlRecordType::Abort))
        .unwrap();
    assert_eq!(
        aborted_txns(dir.path()),
        [aborted(2, 0, 2, 1), aborted(1, 1, 3, 4)]
    );
    assert_eq!(committed_offsets(&log), Vec::<i64>::new());
    assert_eq!(log.first_unstable_offset(), None);
}

/// Issue 29, item 1: `[txn(1)@0, txn(2)@1, ABORT(2)@2, ABORT(1)@3]` in one call. Completed
/// producer by producer, producer 1's ABORT at 3 went into the `.txnindex` before producer 2's
/// at 2, which the index refused ("last offset … must increase") after the bytes were written,
/// poisoning the log.
#[test]
fn append_as_follower_indexes_interleaved_aborts_in_batch_order_and_stays_writable() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let log = Log::open(dir.path(), config(&clock)).unwrap();
    let mut call = txn_batch(0, 1, 0, 1);
    call.extend(txn_batch(1, 2, 0, 1));
    call.extend(marker(2, 2, ControlRecordType::Abort));
    call.extend(marker(3, 1, ControlRecordType::Abort));
    let info = log.append_as_follower(&call).unwrap();
    assert_eq!((info.first_offset, info.last_offset), (0, 3));
    assert_eq!(
        aborted_txns(dir.path()),
        [aborted(2, 1, 2, 0), aborted(1, 0, 3, 4)]
    );
    assert_eq!(committed_offsets(&log), Vec::<i64>::new());
    // Not poisoned: the log takes the next call and closes cleanly.
    log.append_as_follower(&txn_batch(4, 3, 0, 1)).unwrap();
    assert_eq!(log.first_unstable_offset(), Some(4));
    log.close().unwrap();
    let report = partlog::verify_dir(dir.path(), &config(&clock)).unwrap();
    assert!(report.findings.is_empty(), "{:?}", report.findings);
}

/// Kafka's `testTransactionIndexUpdatedThroughReplication` (`UnifiedLogTest`): four producers'
/// transactions, interleaved with plain batches, in one follower append; then the first
/// unstable offset as the high watermark passes the markers.
#[test]
fn transaction_index_updated_through_replication() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let log = Log::open(dir.path(), config(&clock)).unwrap();
    // Kafka's new log has a high watermark of 0: the markers are not yet replicated.
    log.set_high_watermark(0).unwrap();
    let mut sequences: BTreeMap<i64, i32> = BTreeMap::new();
    let mut buffer = Vec::new();
    let mut append_pid = |buffer: &mut Vec<u8>, pid: i64, offset: i64, count: i64| {
        let sequence = sequences.entry(pid).or_insert(0);
        buffer.extend(txn_batch(offset, pid, *sequence, count));
        *sequence += count as i32;
    };
    let plain = |buffer: &mut Vec<u8>, offset: i64, count: i64| {
        let mut builder = BatchBuilder::new(Compression::None).base_offset(offset);
        for seq in 0..count {
            builder.push(&NewRecord::new(T0, None, Some(seq.to_string().as_bytes())));
        }
        buffer.extend(builder.build().unwrap());
    };
    let end_txn = |buffer: &mut Vec<u8>, pid: i64, offset: i64, kind: ControlRecordType| {
        buffer.extend(marker(offset, pid, kind));
    };
    append_pid(&mut buffer, 1, 0, 5);
    plain(&mut buffer, 5, 3);
    append_pid(&mut buffer, 2, 8, 2);
    append_pid(&mut buffer, 1, 10, 4);
    append_pid(&mut buffer, 3, 14, 3);
    plain(&mut buffer, 17, 2);
    append_pid(&mut buffer, 1, 19, 10);
    end_txn(&mut buffer, 1, 29, ControlRecordType::Abort);
    append_pid(&mut buffer, 2, 30, 6);
    append_pid(&mut buffer, 4, 36, 3);
    plain(&mut buffer, 39, 10);
    append_pid(&mut buffer, 3, 49, 9);
    end_txn(&mut buffer, 3, 58, ControlRecordType::Commit);
    append_pid(&mut buffer, 4, 59, 8);
    append_pid(&mut buffer, 2, 67, 7);
    end_txn(&mut buffer, 2, 74, ControlRecordType::Abort);
    plain(&mut buffer, 75, 10);
    append_pid(&mut buffer, 4, 85, 4);
    end_txn(&mut buffer, 4, 89, ControlRecordType::Commit);
    // Kafka's `appendAsFollower` helper stamps leader epoch 0 on every batch.
    let mut stamped = Vec::new();
    for (_, batch) in partlog::AnyBatchIter::new(&buffer) {
        let mut bytes = batch.unwrap().as_bytes().to_vec();
        set_partition_leader_epoch(&mut bytes, 0).unwrap();
        stamped.extend(bytes);
    }
    log.append_as_follower(&stamped).unwrap();

    assert_eq!(
        aborted_txns(dir.path()),
        [aborted(1, 0, 29, 8), aborted(2, 8, 74, 36)]
    );
    log.set_high_watermark(30).unwrap();
    assert_eq!(log.first_unstable_offset(), Some(8));
    log.set_high_watermark(75).unwrap();
    assert_eq!(log.first_unstable_offset(), Some(36));
    log.set_high_watermark(log.log_end_offset()).unwrap();
    assert_eq!(log.first_unstable_offset(), None);
}

/// The one place where this log and Kafka's follower differ: a call in which no other
/// transaction is open at an ABORT, and a later batch of the call opens one. Kafka's follower
/// counts that later transaction (`findNextIncompleteTxn` over every open one) and writes
/// `lastStableOffset` 3; its own recovery, its leader and this log write 2, the LSO right after
/// the marker, so that the entry does not depend on how the batches were grouped into calls.
#[test]
fn append_as_follower_counts_only_transactions_begun_before_the_marker() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let log = Log::open(dir.path(), config(&clock)).unwrap();
    let mut call = txn_batch(0, 1, 0, 1);
    call.extend(marker(1, 1, ControlRecordType::Abort));
    let mut plain = BatchBuilder::new(Compression::None).base_offset(2);
    plain.push(&NewRecord::new(T0, None, Some(b"plain")));
    call.extend(plain.build().unwrap());
    call.extend(txn_batch(3, 2, 0, 1));
    log.append_as_follower(&call).unwrap();
    assert_eq!(aborted_txns(dir.path()), [aborted(1, 0, 1, 2)]);
    assert_eq!(log.first_unstable_offset(), Some(3));
}

// ---------------------------------------------------------------------------------------------
// The property: leader, follower and recovery write the same `.txnindex` and producer state.
// ---------------------------------------------------------------------------------------------

/// The transactional producers' ids are `TXN_PID + 0..TXN_PRODUCERS`.
const TXN_PID: i64 = 10;
const TXN_PRODUCERS: u8 = 4;
/// The idempotent producer's id.
const IDEMPOTENT_PID: i64 = 20;

/// One step of the leader's history.
#[derive(Debug, Clone)]
enum Step {
    /// A transactional batch of `count` records: it opens the producer's transaction or adds to
    /// it.
    Txn { producer: u8, count: u8 },
    /// An idempotent (non-transactional) batch of the idempotent producer.
    Idempotent { count: u8 },
    /// Records without a producer id.
    Plain { count: u8 },
    /// A COMMIT or ABORT of the producer (ending nothing when no transaction is open); `bump`
    /// writes it at the next producer epoch, as a coordinator fencing the producer does.
    End {
        producer: u8,
        commit: bool,
        bump: bool,
    },
    /// `roll()`: the entries after it go to the next segment's `.txnindex`.
    Roll,
}

fn step_strategy() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0..TXN_PRODUCERS, 1u8..=3).prop_map(|(producer, count)| Step::Txn { producer, count }),
        1 => (1u8..=3).prop_map(|count| Step::Idempotent { count }),
        2 => (1u8..=3).prop_map(|count| Step::Plain { count }),
        4 => (0..TXN_PRODUCERS, any::<bool>(), prop::bool::weighted(0.15))
            .prop_map(|(producer, commit, bump)| Step::End { producer, commit, bump }),
        1 => Just(Step::Roll),
    ]
}

#[derive(Debug, Clone)]
struct Case {
    steps: Vec<Step>,
    /// `cuts[i]`: the follower's call ends after the batch of step `i` (a roll always ends it).
    cuts: Vec<bool>,
}

fn case_strategy() -> impl Strategy<Value = Case> {
    prop::collection::vec(step_strategy(), 1..48).prop_flat_map(|steps| {
        let n = steps.len();
        (
            Just(steps),
            prop::collection::vec(prop::bool::weighted(0.3), n),
        )
            .prop_map(|(steps, cuts)| Case { steps, cuts })
    })
}

/// What the three logs must agree on.
#[derive(Debug, PartialEq)]
struct Outcome {
    /// The bytes of every `.txnindex` file with entries, by name (one without entries may be
    /// missing or empty).
    txn_indexes: BTreeMap<String, Vec<u8>>,
    producers: Vec<ProducerStateEntry>,
    first_unstable: Option<i64>,
    last_stable: i64,
    log_end: i64,
    committed: Vec<i64>,
}

fn outcome(log: &Log, sim: &SimStorage, dir: &str) -> Outcome {
    Outcome {
        txn_indexes: files_ending(sim, dir, ".txnindex"),
        producers: log.active_producers(),
        first_unstable: log.first_unstable_offset(),
        last_stable: log.last_stable_offset(),
        log_end: log.log_end_offset(),
        committed: committed_offsets(log),
    }
}

/// The bytes of every non-empty file of `dir` whose name ends with `suffix`, by name.
fn files_ending(sim: &SimStorage, dir: &str, suffix: &str) -> BTreeMap<String, Vec<u8>> {
    sim_files::snapshot(sim, dir)
        .into_iter()
        .filter(|(name, bytes)| name.ends_with(suffix) && !bytes.is_empty())
        .collect()
}

/// What the leader wrote, in order: each batch's bytes, and the rolls between them.
enum Written {
    Batch(Vec<u8>),
    Roll,
}

/// The leader path: `append_batch`, `append` and `append_marker`, one batch a call. Returns
/// what it wrote, with, for each batch, whether the follower's call ends after it.
fn run_leader(case: &Case, log: &Log, clock: &ManualClock) -> Vec<(Written, bool)> {
    let mut epochs = [0i16; TXN_PRODUCERS as usize];
    let mut sequences = [0i32; TXN_PRODUCERS as usize];
    let mut idempotent_sequence = 0;
    let mut written = Vec::new();
    let record = |i: u8| NewRecord::new(T0, Some(b"k"), Some(format!("r{i}").as_bytes()));
    for (step, &cut) in case.steps.iter().zip(&case.cuts) {
        clock.advance(1);
        let end = log.log_end_offset();
        let info = match *step {
            Step::Txn { producer, count } => {
                let p = usize::from(producer);
                let mut builder = BatchBuilder::new(Compression::None)
                    .producer(TXN_PID + i64::from(producer), epochs[p], sequences[p])
                    .transactional(true);
                (0..count).for_each(|i| builder.push(&record(i)));
                sequences[p] += i32::from(count);
                log.append_batch(&builder.build().unwrap()).unwrap()
            }
            Step::Idempotent { count } => {
                let mut builder = BatchBuilder::new(Compression::None).producer(
                    IDEMPOTENT_PID,
                    0,
                    idempotent_sequence,
                );
                (0..count).for_each(|i| builder.push(&record(i)));
                idempotent_sequence += i32::from(count);
                log.append_batch(&builder.build().unwrap()).unwrap()
            }
            Step::Plain { count } => {
                let records: Vec<NewRecord> = (0..count).map(record).collect();
                log.append(&records).unwrap()
            }
            Step::End {
                producer,
                commit,
                bump,
            } => {
                let p = usize::from(producer);
                if bump {
                    epochs[p] += 1;
                    sequences[p] = 0;
                }
                let kind = if commit {
                    ControlRecordType::Commit
                } else {
                    ControlRecordType::Abort
                };
                log.append_marker(TXN_PID + i64::from(producer), epochs[p], kind, 0)
                    .unwrap()
            }
            Step::Roll => {
                log.roll().unwrap();
                written.push((Written::Roll, true));
                continue;
            }
        };
        assert_eq!(info.first_offset, end, "{step:?}");
        let fetch = log.read(end, 1 << 20, ReadBound::LogEnd).unwrap();
        let (_, batch) = partlog::AnyBatchIter::new(fetch.bytes()).next().unwrap();
        written.push((Written::Batch(batch.unwrap().as_bytes().to_vec()), cut));
    }
    written
}

/// The follower path: the leader's batches through `append_as_follower`, grouped into calls
/// as the case cuts them, rolling where the leader rolled.
fn run_follower(written: &[(Written, bool)], log: &Log) -> Result<(), TestCaseError> {
    let mut call: Vec<u8> = Vec::new();
    let append = |call: &[u8]| {
        log.append_as_follower(call)
            .map_err(|e| TestCaseError::fail(format!("append_as_follower: {e}")))
    };
    for (what, cut) in written {
        match what {
            Written::Batch(bytes) => call.extend(bytes),
            Written::Roll => {}
        }
        if *cut && !call.is_empty() {
            append(&call)?;
            call.clear();
        }
        if let Written::Roll = what {
            log.roll().unwrap();
        }
    }
    if !call.is_empty() {
        append(&call)?;
    }
    Ok(())
}

/// A log of the property test: on the simulator (no fsync reaches a disk), on the case's clock.
fn sim_config(sim: &SimStorage, clock: &Arc<ManualClock>) -> LogConfig {
    LogConfig::builder_for_tests()
        .segment_ms(i64::MAX / 4)
        .retention_check_interval_ms(-1)
        .storage(Arc::new(sim.clone()))
        .clock(Arc::clone(clock) as Arc<dyn partlog::unstable::Clock>)
        .build()
        .unwrap()
}

fn run_property_case(case: &Case) -> Result<(), TestCaseError> {
    const LEADER: &str = "/property/leader-0";
    const FOLLOWER: &str = "/property/follower-0";
    let sim = SimStorage::new(0);
    let clock = clock();
    let leader = Log::open(LEADER, sim_config(&sim, &clock)).unwrap();
    let written = run_leader(case, &leader, &clock);
    let follower = Log::open(FOLLOWER, sim_config(&sim, &clock)).unwrap();
    run_follower(&written, &follower)?;

    let expected = outcome(&leader, &sim, LEADER);
    prop_assert_eq!(
        &outcome(&follower, &sim, FOLLOWER),
        &expected,
        "follower against leader"
    );
    prop_assert_eq!(
        files_ending(&sim, FOLLOWER, ".log"),
        files_ending(&sim, LEADER, ".log"),
        "the follower's .log files are the leader's"
    );

    // Recovery's replay: the leader's files without a snapshot, a `.txnindex` or the
    // clean-shutdown record, so that the open replays every batch and rebuilds every index.
    leader.close().unwrap();
    drop(leader);
    for name in sim.list(Path::new(LEADER)).unwrap() {
        let derived = name.ends_with(".snapshot")
            || name.ends_with(".txnindex")
            || name == "partlog.checkpoint";
        if derived {
            sim.remove(&Path::new(LEADER).join(&name)).unwrap();
        }
    }
    let replayed = Log::open(LEADER, sim_config(&sim, &clock)).unwrap();
    prop_assert!(
        replayed.recovery_report().segments_scanned > 0,
        "the open recovered"
    );
    prop_assert_eq!(
        &outcome(&replayed, &sim, LEADER),
        &expected,
        "recovery's replay against the leader"
    );
    Ok(())
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|value| {
        value
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value} is not a number"))
    })
}

/// Issue 29, item 1: random interleavings of four transactional producers' batches, COMMITs
/// and ABORTs (some at a bumped epoch, some ending nothing), an idempotent producer's batches,
/// plain records and rolls, written by the leader path one batch a call, by the follower path
/// in random groupings of calls, and rebuilt by recovery's replay: the same `.txnindex` bytes,
/// producer state, first unstable and last stable offsets, and committed records.
#[test]
fn leader_follower_and_replay_write_the_same_txn_indexes_and_producer_state() {
    let cases = env_u64("PARTLOG_FOLLOWER_TXN_CASES").unwrap_or(500);
    let seed = env_u64("PARTLOG_FOLLOWER_TXN_SEED").unwrap_or(0);
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        Config {
            cases: u32::try_from(cases).unwrap(),
            failure_persistence: None,
            ..Config::default()
        },
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes),
    );
    let started = Instant::now();
    runner
        .run(&case_strategy(), |case| run_property_case(&case))
        .unwrap();
    eprintln!(
        "{cases} cases from seed {seed} in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
