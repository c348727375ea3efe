//! Compaction with transactions against models (ARCHITECTURE.md §9, "Compaction"):
//! `read_committed` over compacted logs (a fixed case and a property test), the LSO holding a
//! pass back, crashes at every step of a pass, Kafka's DumpLogSegments on the result, and
//! `Log::roll`.

#[path = "common/kafka.rs"]
mod kafka;
#[path = "common/txn_log.rs"]
mod txn_log;

use std::path::Path;
use std::sync::Arc;

use partlog::unstable::ManualClock;
use partlog::{CleanupPolicy, ControlRecordType, Log, LogConfig, ReadBound};

use txn_log::*;

/// `read_committed` over a compacted log with aborted transactions returns the committed
/// records of the uncompacted log, less those a later committed record of their key
/// superseded: an aborted value never hides a committed one, and never comes back.
#[test]
fn compaction_txn_read_committed_equals_the_uncompacted_committed_records_per_key() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(dir.path(), config(&clock, DAY_MS)).unwrap();
    let mut producers: Vec<Producer> = (1..=3).map(Producer::transactional).collect();
    // Three producers interleave transactions over five keys; every third one aborts, plain
    // records land in between, and rolls cut transactions across segments.
    for round in 0..24_i32 {
        let index = (round % 3) as usize;
        let producer = &mut producers[index];
        let keys = [round % 5, (round * 7 + 1) % 5];
        producer.append(&log, &clock, &keys);
        if round % 4 == 1 {
            plain(&log, &clock, round % 5);
        }
        if round % 5 == 2 {
            log.roll().unwrap();
        }
        if round % 2 == 1 {
            // End the transactions of the producers behind this one.
            for other in [index, (index + 2) % 3] {
                let id = producers[other].id;
                if (round / 2) % 3 == 0 {
                    abort(&log, id);
                } else {
                    commit(&log, id);
                }
            }
        }
    }
    for id in 1..=3 {
        abort(&log, id);
    }
    log.roll().unwrap();
    assert_eq!(log.first_unstable_offset(), None);
    let before = committed(&log);
    assert!(
        !aborted_txns(dir.path()).is_empty(),
        "the case holds aborted transactions"
    );
    let expected = latest_committed_per_key(&before);

    // Passes until nothing changes; the markers' delete horizons pass in between.
    for _ in 0..3 {
        clean_all(&log);
        assert_eq!(
            latest_committed_per_key(&committed(&log)),
            expected,
            "the latest committed record of every key stays"
        );
        clock.advance(DAY_MS + 1);
    }
    assert_eq!(committed(&log), expected);
    // No aborted record is left to filter.
    assert_eq!(aborted_txns(dir.path()), []);
    let all: Vec<_> = log
        .records(0, ReadBound::LogEnd)
        .map(|record| record.unwrap().offset)
        .collect();
    let committed_offsets: Vec<_> = expected.iter().map(|record| record.0).collect();
    assert_eq!(all, committed_offsets);
}

/// An open transaction holds compaction back at the segment holding the LSO, and a later pass
/// (once the transaction ends) cleans what it held back.
#[test]
fn compaction_txn_an_open_transaction_holds_the_cleanable_range_at_the_lso() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(dir.path(), config(&clock, DAY_MS)).unwrap();
    plain(&log, &clock, 1); // 0
    plain(&log, &clock, 1); // 1
    log.roll().unwrap();
    let mut producer = Producer::transactional(7);
    producer.append(&log, &clock, &[1]); // 2, open
    plain(&log, &clock, 2); // 3
    log.roll().unwrap();
    plain(&log, &clock, 2); // 4
    log.roll().unwrap();
    assert_eq!(log.last_stable_offset(), 2);

    let stats = log.compact().unwrap();
    assert_eq!(stats.uncleanable_from, Some(2));
    assert_eq!(stats.cleaned_up_to, 2);
    assert_eq!(log.stats().compaction_uncleanable_from, Some(2));
    assert_eq!(
        log.compaction_schedule().unwrap().first_uncleanable_offset,
        2
    );
    assert_eq!(offsets_in_log(dir.path()), [1, 2, 3, 4]);

    abort(&log, 7); // 5
    log.roll().unwrap();
    let stats = log.compact().unwrap();
    assert_eq!(stats.uncleanable_from, None);
    assert_eq!(stats.cleaned_up_to, 6);
    // The aborted 1@2 went and superseded nothing; 2@3 went for 2@4; the marker stays.
    assert_eq!(offsets_in_log(dir.path()), [1, 4, 5]);
    assert_eq!(aborted_txns(dir.path()), [aborted(7, 2, 5, 6)]);
}

/// Kafka's DumpLogSegments reads what transaction-aware passes write: the rebuilt `.txnindex`
/// after the first pass, and after the second the markers rebuilt with their delete horizon
/// (still control batches, their CRC valid, their `endTxnMarker` intact); `verify_dir` finds
/// every `.txnindex` entry's ABORT marker after each pass. DumpLogSegments is skipped when the
/// Kafka tools are not installed.
#[test]
fn compaction_txn_dump_log_segments_reads_cleaned_markers_and_txnindex() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let mut log = multi_pass_log(dir.path(), &clock, 50_000);
    clean(&log, 3);
    log = verified_reopen(dir.path(), log, &clock, 50_000);
    let indexes = kafka::segment_files(dir.path(), &["txnindex"]);
    assert_eq!(indexes.len(), 1, "{indexes:?}");
    if let Some(dump) = kafka::dump_log_segments(&indexes, &[]) {
        assert!(dump.status.success() && dump.stderr.is_empty(), "{dump:?}");
        let entries: Vec<&str> = dump.stdout.lines().skip(1).collect();
        assert_eq!(
            entries,
            [
                "version: 0 producerId: 1 firstOffset: 8 lastOffset: 10 lastStableOffset: 11",
                "version: 0 producerId: 2 firstOffset: 11 lastOffset: 16 lastStableOffset: 17",
            ],
            "{dump:?}"
        );
    }
    assert_eq!(clean(&log, 3), 14);
    let log = verified_reopen(dir.path(), log, &clock, 50_000);
    log.close().unwrap();
    drop(log);
    let Some(dump) = kafka::dump_deep(dir.path()) else {
        return;
    };
    kafka::assert_clean_deep_dump(&dump);
    let batches = kafka::parse_batches(&dump);
    let markers: Vec<_> = batches.iter().filter(|b| b.is_control).collect();
    assert_eq!(
        markers.iter().map(|b| b.base_offset).collect::<Vec<_>>(),
        [6, 7, 10, 15, 16, 19],
        "{dump:?}"
    );
    for marker in &markers {
        assert!(marker.is_valid && marker.is_transactional, "{marker:?}");
        assert_eq!(marker.count, Some(1), "{marker:?}");
    }
    // The ABORT markers whose data is gone carry the horizon of the second pass.
    let horizon = T0 + 50_000;
    for marker in markers.iter().filter(|b| [10, 16].contains(&b.base_offset)) {
        assert_eq!(marker.delete_horizon_ms, Some(horizon), "{marker:?}");
    }
    let control: Vec<_> = kafka::parse_records(&dump)
        .into_iter()
        .filter_map(|record| record.control.map(|control| (record.offset, control)))
        .collect();
    assert_eq!(
        control,
        [
            (6, "endTxnMarker: COMMIT coordinatorEpoch: 0".to_owned()),
            (7, "endTxnMarker: COMMIT coordinatorEpoch: 0".to_owned()),
            (10, "endTxnMarker: ABORT coordinatorEpoch: 0".to_owned()),
            (15, "endTxnMarker: COMMIT coordinatorEpoch: 0".to_owned()),
            (16, "endTxnMarker: ABORT coordinatorEpoch: 0".to_owned()),
            (19, "endTxnMarker: COMMIT coordinatorEpoch: 0".to_owned()),
        ],
        "{dump:?}"
    );
}

/// A crash before each storage operation of a pass over transactional data (the pass that drops
/// the aborted data, the one that drops their `.txnindex` entries and sets the markers' delete
/// horizons, and the one that drops the markers), with random and with lose-everything-unsynced
/// crash images: `verify_dir` finds no corruption in what the crash left, the reopened log's
/// `read_committed` records are those before the pass or those after it, never an aborted
/// record, no `.swap` or `.cleaned` file is left, and the next passes end where an uncrashed run
/// ends.
#[cfg(feature = "sim")]
#[test]
fn compaction_txn_a_crash_at_any_step_of_a_pass_never_exposes_aborted_data() {
    use partlog::unstable::sim::{CrashConfig, FaultOp, FaultRule};
    use partlog::unstable::{SimStorage, Storage};

    let dir = Path::new("/data/txn-compact-0");
    let retention = 50_000;
    let sim_config = |sim: &SimStorage, clock: &Arc<ManualClock>| sim_config(sim, clock, retention);
    // The multi-pass layout, in three segments, so that one group merges them and their
    // `.txnindex` files.
    let setup = |seed: u64, passes_before: usize| {
        let sim = SimStorage::new(seed);
        let clock = Arc::new(ManualClock::new(T0));
        let config = sim_config(&sim, &clock);
        let log = Log::open(dir, config.clone()).unwrap();
        let (mut p1, mut p2) = (Producer::transactional(1), Producer::transactional(2));
        p1.append(&log, &clock, &[1, 2]);
        p2.append(&log, &clock, &[2, 3]);
        p1.append(&log, &clock, &[3, 4]);
        commit(&log, 1);
        commit(&log, 2);
        p1.append(&log, &clock, &[2, 3]);
        log.roll().unwrap();
        abort(&log, 1);
        p2.append(&log, &clock, &[4, 5]);
        p1.append(&log, &clock, &[5, 6]);
        commit(&log, 1);
        log.roll().unwrap();
        abort(&log, 2);
        p2.append(&log, &clock, &[6, 7]);
        commit(&log, 2);
        log.roll().unwrap();
        log.wait_durable(log.log_end_offset() - 1).unwrap();
        for _ in 0..passes_before {
            clean_all(&log);
            clock.advance(retention);
        }
        (sim, config, log, clock)
    };
    let mut crashes = 0;
    for passes_before in 0..3 {
        let (_, _, log, clock) = setup(0, passes_before);
        let before = committed(&log);
        clean_all(&log);
        let after = committed(&log);
        for _ in passes_before + 1..3 {
            clock.advance(retention);
            clean_all(&log);
        }
        let end_state = committed(&log);
        let end_batches = log
            .read(0, 1 << 20, ReadBound::LogEnd)
            .unwrap()
            .bytes()
            .to_vec();
        drop(log);
        for lose_unsynced in [false, true] {
            for nth in 1.. {
                let (sim, config, log, clock) = setup(nth, passes_before);
                let crash = if lose_unsynced {
                    CrashConfig::lose_unsynced()
                } else {
                    CrashConfig::random().seed(nth)
                };
                let crashes_before = sim.stats().crashes;
                sim.inject(FaultRule::crash(FaultOp::Any, nth).crash_config(crash));
                let outcome = log.compact();
                sim.clear_faults();
                let crashed = sim.stats().crashes > crashes_before;
                drop(log);
                if !crashed {
                    outcome.unwrap();
                    assert!(nth > 5, "a pass takes more than a few operations");
                    break;
                }
                crashes += 1;
                let label = format!("pass {}, crash before operation {nth}", passes_before + 1);
                // What the crash left is crash state at worst, as the open that follows sees it.
                let report = partlog::verify_dir(dir, &config).unwrap();
                let corrupt: Vec<_> = report.findings_of(partlog::Severity::Corruption).collect();
                assert!(corrupt.is_empty(), "{label}: verify: {corrupt:?}");
                let log = Log::open(dir, config)
                    .unwrap_or_else(|e| panic!("{label}: reopen failed: {e}"));
                let found = committed(&log);
                assert!(
                    found == before || found == after,
                    "{label}: read_committed returned {found:?}, neither {before:?} nor {after:?}"
                );
                let leftovers: Vec<String> = sim
                    .list(dir)
                    .unwrap()
                    .into_iter()
                    .filter(|n| n.ends_with(".swap") || n.ends_with(".cleaned"))
                    .collect();
                assert!(leftovers.is_empty(), "{label}: {leftovers:?}");
                // The setup's last roll created an empty segment that nothing made durable: a
                // crash may take it back, leaving the last segment active and uncleanable. Roll
                // again (nothing happens when it survived), so that the passes see the same
                // segments as the run without a crash.
                log.roll().unwrap();
                clean_all(&log);
                for _ in passes_before + 1..3 {
                    clock.advance(retention);
                    clean_all(&log);
                }
                assert_eq!(committed(&log), end_state, "{label}");
                // Byte for byte: the same batches, markers and horizons included.
                let batches = log.read(0, 1 << 20, ReadBound::LogEnd).unwrap();
                assert_eq!(batches.bytes(), end_batches, "{label}");
                log.close().unwrap();
            }
        }
    }
    assert!(crashes > 30, "only {crashes} crashes");
}

/// The configuration of [`config`] on the simulator, every append synced.
#[cfg(feature = "sim")]
fn sim_config(
    sim: &partlog::unstable::SimStorage,
    clock: &Arc<ManualClock>,
    delete_retention_ms: i64,
) -> LogConfig {
    LogConfig::builder_for_tests()
        .segment_bytes(64 * 1024)
        .segment_ms(i64::MAX / 4)
        .cleanup_policy(CleanupPolicy::COMPACT)
        .delete_retention_ms(delete_retention_ms)
        .producer_id_expiration_ms(365 * DAY_MS)
        .retention_check_interval_ms(-1)
        .flush_policy(partlog::FlushPolicy::EveryAppend)
        .storage(Arc::new(sim.clone()) as Arc<dyn partlog::unstable::Storage>)
        .clock(Arc::clone(clock) as Arc<dyn partlog::unstable::Clock>)
        .build()
        .unwrap()
}

/// Issue 29, item 10 (`verify` checks every ABORT marker against the `.txnindex`) meeting a
/// compaction swap (PARTLOG_CRASH_MATRIX_CONCURRENT_SEED=129, CRASH_AT=Rename:37): a crash after
/// the cleaned `.log` was renamed in and before its `.txnindex.swap` followed leaves the segment
/// without a `.txnindex` until the next writable open renames the `.swap` in, as Kafka's loader
/// does. The cleaned segment keeps an aborted transaction's empty batch (its producer's last)
/// and its ABORT marker, whose entry is in the `.swap`. `verify_dir` reads the `.swap` as the
/// segment's index and finds nothing wrong (it reported every ABORT marker there as lacking its
/// entry, as corruption); the open renames it in, `read_committed` serves no aborted record,
/// and the closed log verifies clean.
#[cfg(feature = "sim")]
#[test]
fn item10_verify_reads_the_txnindex_swap_a_crash_left_as_the_segments_txnindex() {
    use partlog::unstable::sim::{CrashConfig, FaultOp, FaultRule};
    use partlog::unstable::{OpenMode, SimStorage, Storage};
    use partlog::{AbortedTxn, Severity, verify_dir};

    let dir = Path::new("/data/txn-swap-0");
    let sim = SimStorage::new(29);
    let clock = Arc::new(ManualClock::new(T0));
    let config = sim_config(&sim, &clock, DAY_MS);
    let log = Log::open(dir, config.clone()).unwrap();
    let mut p1 = Producer::transactional(1);
    p1.append(&log, &clock, &[1, 2]); // [0, 1], aborted
    plain(&log, &clock, 3); // 2
    log.roll().unwrap();
    abort(&log, 1); // 3
    plain(&log, &clock, 1); // 4
    log.roll().unwrap();
    plain(&log, &clock, 5); // 5, in the active segment
    // A clean close and a reopen: the recovery point is the log end, in the active segment, so
    // the segment the pass writes lies wholly below it, where recovery rescans nothing and
    // verify grades a missing entry as corruption.
    log.close().unwrap();
    drop(log);
    let log = Log::open(dir, config.clone()).unwrap();
    let before = committed(&log);
    assert_eq!(before.iter().map(|r| r.0).collect::<Vec<_>>(), [2, 4, 5]);
    // Just before the rename of `<base>.txnindex.swap` to `<base>.txnindex`, keeping every
    // rename made before it (the `.log.swap` is the `.log` already).
    sim.inject(
        FaultRule::crash(FaultOp::Rename, 1)
            .on_paths_ending_with(".txnindex.swap")
            .crash_config(CrashConfig::keep_unsynced()),
    );
    assert!(log.compact().is_err(), "the pass meets the crash");
    assert_eq!(sim.stats().crashes, 1);
    sim.clear_faults();
    drop(log);
    let mut names = sim.list(dir).unwrap();
    names.sort();
    let swap_name = "00000000000000000000.txnindex.swap";
    assert!(names.iter().any(|n| n == swap_name), "{names:?}");
    assert!(
        !names
            .iter()
            .any(|n| n == "00000000000000000000.txnindex" || n.ends_with(".log.swap")),
        "{names:?}"
    );

    let report = verify_dir(dir, &config).unwrap();
    assert!(
        report.findings.iter().all(|f| f.severity == Severity::Note),
        "{:?}",
        report.findings
    );
    assert!(
        report
            .findings
            .iter()
            .any(|f| f.file == dir.join(swap_name) && f.what.contains("renames it to .txnindex")),
        "{:?}",
        report.findings
    );

    // A read-only open cannot rename the `.swap` in: it refuses the directory, or serves no
    // aborted record.
    match Log::open_read_only(dir, config.clone()) {
        Err(partlog::Error::Unsupported { .. }) => {}
        Ok(read_only) => assert!(committed(&read_only).iter().all(|r| r.0 > 1)),
        Err(error) => panic!("read-only open: {error}"),
    }
    let log = Log::open(dir, config.clone()).unwrap();
    let found = committed(&log);
    assert_eq!(found, latest_committed_per_key(&before));
    assert!(found.iter().all(|r| r.0 != 0 && r.0 != 1), "{found:?}");
    let index = sim
        .open(&dir.join("00000000000000000000.txnindex"), OpenMode::Read)
        .unwrap();
    let mut bytes = vec![0; usize::try_from(index.len().unwrap()).unwrap()];
    index.read_exact_at(&mut bytes, 0).unwrap();
    let entries: Vec<AbortedTxn> = bytes
        .chunks_exact(AbortedTxn::SIZE)
        .map(|chunk| AbortedTxn::from_bytes(chunk.try_into().unwrap()).unwrap())
        .collect();
    assert_eq!(entries, [aborted(1, 0, 3, 4)]);
    log.close().unwrap();
    drop(log);
    let report = verify_dir(dir, &config).unwrap();
    assert!(report.findings.is_empty(), "{:?}", report.findings);
}

/// One step of [`compaction_txn_read_committed_agrees_with_a_model`].
#[derive(Debug, Clone)]
enum Op {
    /// A transactional batch of one of three producers.
    Data {
        producer: usize,
        keys: Vec<i32>,
    },
    /// A COMMIT (or ABORT) marker for one of them, open transaction or not.
    End {
        producer: usize,
        commit: bool,
    },
    /// A record without a producer.
    Plain {
        key: i32,
    },
    Roll,
    /// A pass with a key map of this many keys.
    Compact {
        max_map_keys: usize,
    },
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        4 => (0..3usize, proptest::collection::vec(0..6i32, 1..4))
            .prop_map(|(producer, keys)| Op::Data { producer, keys }),
        2 => (0..3usize, any::<bool>()).prop_map(|(producer, commit)| Op::End { producer, commit }),
        1 => (0..6i32).prop_map(|key| Op::Plain { key }),
        1 => Just(Op::Roll),
        1 => (1..8usize).prop_map(|max_map_keys| Op::Compact { max_map_keys }),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(32))]

    /// Random interleavings of transactions, plain records, rolls and passes (small key maps
    /// included): `read_committed` never returns an aborted record, and once every transaction
    /// has ended and passes have run past the markers' horizons, it returns exactly the latest
    /// committed record of every key, and so does `read_uncommitted`.
    #[test]
    fn compaction_txn_read_committed_agrees_with_a_model(ops in proptest::collection::vec(op(), 1..60)) {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(T0));
        let log = Log::open(dir.path(), config(&clock, DAY_MS)).unwrap();
        let mut producers: Vec<Producer> = (1..=3).map(Producer::transactional).collect();
        // Each producer's records since its last marker, and every committed record.
        let mut open: Vec<Vec<(i64, String, String)>> = vec![Vec::new(); 3];
        let mut committed_model: Vec<(i64, String, String)> = Vec::new();
        let record = |offset: i64, key: i32| (offset, key.to_string(), key.to_string());
        let end = |producer: usize, commit: bool, open: &mut Vec<Vec<_>>, committed_model: &mut Vec<_>| {
            let id = producer as i64 + 1;
            if commit {
                log.append_marker(id, 0, ControlRecordType::Commit, 0).unwrap();
                committed_model.append(&mut open[producer]);
            } else {
                log.append_marker(id, 0, ControlRecordType::Abort, 0).unwrap();
                open[producer].clear();
            }
        };
        for op in ops {
            match op {
                Op::Data { producer, keys } => {
                    let info = producers[producer].append(&log, &clock, &keys);
                    for (i, key) in keys.iter().enumerate() {
                        open[producer].push(record(info.first_offset + i as i64, *key));
                    }
                }
                Op::End { producer, commit } => end(producer, commit, &mut open, &mut committed_model),
                Op::Plain { key } => {
                    let offset = log.log_end_offset();
                    plain(&log, &clock, key);
                    committed_model.push(record(offset, key));
                }
                Op::Roll => {
                    log.roll().unwrap();
                }
                Op::Compact { max_map_keys } => {
                    clean(&log, max_map_keys);
                    for found in committed(&log) {
                        proptest::prop_assert!(
                            committed_model.contains(&found),
                            "read_committed returned {found:?}, not a committed record"
                        );
                    }
                }
            }
        }
        for producer in 0..3 {
            end(producer, producer != 1, &mut open, &mut committed_model);
        }
        log.roll().unwrap();
        committed_model.sort();
        let expected = latest_committed_per_key(&committed_model);
        for _ in 0..3 {
            clean_all(&log);
            clock.advance(DAY_MS + 1);
        }
        proptest::prop_assert_eq!(committed(&log), expected.clone());
        let everything: Vec<_> = log
            .records(0, ReadBound::LogEnd)
            .map(|found| {
                let found = found.unwrap();
                (
                    found.offset,
                    String::from_utf8(found.key.unwrap()).unwrap(),
                    String::from_utf8(found.value.unwrap()).unwrap(),
                )
            })
            .collect();
        proptest::prop_assert_eq!(everything, expected);
    }
}

/// `Log::roll` seals the active segment (so that a pass may clean it) and starts an empty one at
/// the log end; a second roll with nothing appended is a no-op, and a read-only log refuses it.
#[test]
fn roll_seals_the_active_segment_once() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(dir.path(), config(&clock, DAY_MS)).unwrap();
    plain(&log, &clock, 1);
    plain(&log, &clock, 1);
    assert_eq!(
        log.compact().unwrap().cleaned_up_to,
        0,
        "nothing sealed yet"
    );
    log.roll().unwrap();
    log.roll().unwrap();
    let logs = |dir: &Path| kafka::segment_files(dir, &["log"]).len();
    assert_eq!(logs(dir.path()), 2);
    assert_eq!(log.stats().rolls, 1);
    assert_eq!(log.compact().unwrap().cleaned_up_to, 2);
    assert_eq!(offsets_in_log(dir.path()), [1]);
    log.close().unwrap();
    drop(log);
    let read_only = Log::open_read_only(dir.path(), config(&clock, DAY_MS)).unwrap();
    assert!(read_only.roll().is_err());
}
