//! Follower appends (Kafka's `appendAsFollower`) and `truncate_fully_and_start_at` (ARCHITECTURE.md
//! §11): the bad-input cases that must write nothing, the producer state under Kafka's
//! REPLICATION rules, the role, and a crash at every storage operation of a full truncation.
//!
//! The on-disk proof against Kafka's tools (DumpLogSegments, `check.sh`, `cmp` of a leader's and
//! a follower's files) is in `log_follower_kafka.rs`.

use std::path::Path;

use partlog::unstable::format::build_control_batch;
use partlog::{
    BatchBuilder, CleanupPolicy, Compression, ControlRecordType, Corruption, EpochEntry, Error,
    Isolation, Log, LogConfig, NewRecord, ReadBound, ReadOptions,
};

const T0: i64 = 1_700_000_000_000;

fn record(i: i64) -> NewRecord {
    NewRecord::new(T0 + i, None, Some(format!("value-{i}").as_bytes()))
}

fn entries(pairs: &[(i32, i64)]) -> Vec<EpochEntry> {
    pairs.iter().map(|&(e, s)| EpochEntry::new(e, s)).collect()
}

/// A leader's batch of `n` records at `base` stamped with `epoch`, as a fetch returns it.
fn leader_batch(base: i64, epoch: i32, n: i64) -> Vec<u8> {
    batch_of(BatchBuilder::new(Compression::None), base, epoch, n)
}

fn batch_of(builder: BatchBuilder, base: i64, epoch: i32, n: i64) -> Vec<u8> {
    let mut builder = builder.base_offset(base).partition_leader_epoch(epoch);
    for i in 0..n {
        builder.push(&record(base + i));
    }
    builder.build().unwrap()
}

/// A producer's batch as a leader stored it.
fn producer_batch(base: i64, producer_id: i64, producer_epoch: i16, sequence: i32) -> Vec<u8> {
    let builder =
        BatchBuilder::new(Compression::None).producer(producer_id, producer_epoch, sequence);
    batch_of(builder, base, 1, 2)
}

/// What a follower append must leave alone when it fails.
#[derive(Debug, PartialEq)]
struct Observed {
    log_end_offset: i64,
    bytes: Vec<u8>,
    epochs: Vec<EpochEntry>,
    checkpoint_file: Option<Vec<u8>>,
}

fn observe(log: &Log) -> Observed {
    Observed {
        log_end_offset: log.log_end_offset(),
        bytes: log
            .read(0, 1 << 20, ReadBound::LogEnd)
            .map(|fetch| fetch.bytes().to_vec())
            .unwrap_or_default(),
        epochs: log.leader_epoch_entries(),
        checkpoint_file: std::fs::read(log.dir().join("leader-epoch-checkpoint")).ok(),
    }
}

fn follower_with_three_records(dir: &Path) -> Log {
    let log = Log::open(dir, LogConfig::default()).unwrap();
    log.append_as_follower(&leader_batch(0, 2, 3)).unwrap();
    log
}

#[test]
fn follower_append_below_the_log_end_is_an_unexpected_offset_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = follower_with_three_records(dir.path());
    let before = observe(&log);
    // Even when later batches of the call would be above the end.
    let mut fetched = leader_batch(2, 3, 1);
    fetched.extend(leader_batch(3, 3, 1));
    assert!(matches!(
        log.append_as_follower(&fetched),
        Err(Error::UnexpectedAppendOffset {
            log_end_offset: 3,
            found: 2
        })
    ));
    assert_eq!(observe(&log), before);
}

#[test]
fn follower_append_with_offsets_out_of_order_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = follower_with_three_records(dir.path());
    let before = observe(&log);
    for second in [leader_batch(4, 3, 2), leader_batch(3, 3, 1)] {
        let mut fetched = leader_batch(3, 3, 2);
        fetched.extend(second);
        assert!(
            matches!(
                log.append_as_follower(&fetched),
                Err(Error::OffsetsOutOfOrder {
                    previous_last: 4,
                    ..
                })
            ),
            "{:?}",
            log.append_as_follower(&fetched)
        );
        assert_eq!(observe(&log), before);
    }
}

#[test]
fn follower_append_with_a_bad_crc_or_a_torn_batch_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = follower_with_three_records(dir.path());
    let before = observe(&log);
    let good = leader_batch(3, 3, 2);

    // A flipped payload byte, in the last batch of the call.
    let mut flipped = leader_batch(3, 3, 1);
    let mut second = leader_batch(4, 3, 1);
    let last = second.len() - 1;
    second[last] ^= 0x40;
    flipped.extend(second);
    assert!(matches!(
        log.append_as_follower(&flipped),
        Err(Error::InvalidBatch {
            what: Corruption::CrcMismatch { .. }
        })
    ));
    assert_eq!(observe(&log), before);

    // Torn: the fetch ends inside a batch, whether inside its header or its records.
    for cut in [good.len() - 1, 30, 5] {
        let torn = good[..cut].to_vec();
        let result = log.append_as_follower(&torn);
        assert!(
            matches!(result, Err(Error::InvalidBatch { .. })),
            "cut at {cut}: {result:?}"
        );
        assert_eq!(observe(&log), before, "cut at {cut}");
    }

    // A legacy message: partlog writes v2 only.
    let legacy =
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/legacy/v1.log"))
            .unwrap();
    assert!(matches!(
        log.append_as_follower(&legacy),
        Err(Error::InvalidBatch {
            what: Corruption::BadMagic(1)
        })
    ));
    assert!(matches!(
        log.append_as_follower(&[]),
        Err(Error::InvalidArgument { .. })
    ));
    assert_eq!(observe(&log), before);
    // The log takes the good batch afterwards.
    log.append_as_follower(&good).unwrap();
    assert_eq!(log.log_end_offset(), 5);
}

#[test]
fn follower_append_keeps_the_leaders_offsets_gaps_and_epochs_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let mut fetched = leader_batch(0, 0, 2);
    fetched.extend(leader_batch(5, 0, 1)); // a compacted leader's gap
    fetched.extend(leader_batch(6, 4, 3));
    let info = log.append_as_follower(&fetched).unwrap();
    assert_eq!(
        (info.first_offset, info.last_offset, info.records),
        (0, 8, 6)
    );
    assert_eq!(info.bytes, fetched.len());
    assert_eq!(log.log_end_offset(), 9);
    assert_eq!(
        log.read(0, 1 << 20, ReadBound::LogEnd).unwrap().bytes(),
        &fetched[..]
    );
    assert_eq!(log.leader_epoch_entries(), entries(&[(0, 0), (4, 6)]));
    // Batches without an epoch (a bare leader's) assign nothing.
    log.append_as_follower(&leader_batch(9, -1, 1)).unwrap();
    assert_eq!(log.leader_epoch_entries(), entries(&[(0, 0), (4, 6)]));
}

/// The epoch cache is updated once per run of one epoch: the result must be what assigning
/// every batch gives, including an epoch lower than the one before it in the same call (which
/// removes the higher entry, as Kafka's `assign` does) and batches without an epoch inside a run.
#[test]
fn follower_append_with_several_epoch_runs_assigns_as_batch_by_batch_would() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let mut fetched = Vec::new();
    for (base, epoch) in [
        (0, 2),
        (1, -1),
        (2, 2),
        (3, 5),
        (4, 5),
        (5, 3),
        (6, 3),
        (7, 6),
    ] {
        fetched.extend(leader_batch(base, epoch, 1));
    }
    log.append_as_follower(&fetched).unwrap();
    assert_eq!(
        log.leader_epoch_entries(),
        entries(&[(2, 0), (3, 5), (6, 7)])
    );
    // The next call's first batch continues the latest run: nothing changes.
    log.append_as_follower(&leader_batch(8, 6, 2)).unwrap();
    assert_eq!(
        log.leader_epoch_entries(),
        entries(&[(2, 0), (3, 5), (6, 7)])
    );
}

#[test]
fn follower_append_works_in_every_role_and_become_follower_refuses_client_appends() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    log.append_as_follower(&leader_batch(0, 1, 1)).unwrap();
    log.become_leader(2).unwrap();
    log.append_as_follower(&leader_batch(1, 2, 1)).unwrap();
    log.become_follower().unwrap();
    assert_eq!(log.leader_epoch(), None);
    let refused = log.append(&[record(2)]);
    assert!(
        matches!(refused, Err(Error::NotLeaderOrFollower { .. })),
        "{refused:?}"
    );
    assert_eq!(refused.unwrap_err().kafka_code(), Some(6));
    assert!(matches!(
        log.append_batch(&leader_batch(0, 2, 1)),
        Err(Error::NotLeaderOrFollower { .. })
    ));
    assert!(matches!(
        log.append_marker(5, 0, ControlRecordType::Commit, 0),
        Err(Error::NotLeaderOrFollower { .. })
    ));
    assert_eq!(log.log_end_offset(), 2);
    log.append_as_follower(&leader_batch(2, 2, 1)).unwrap();
    assert_eq!(log.log_end_offset(), 3);
    // A new election makes it a leader again.
    log.become_leader(3).unwrap();
    log.append(&[record(3)]).unwrap();
    assert_eq!(
        log.leader_epoch_entries(),
        entries(&[(1, 0), (2, 1), (3, 3)])
    );
}

/// REPLICATION origin: the leader decided, so a re-sent sequence is not a duplicate and an
/// older producer epoch or a sequence gap is accepted (Kafka only warns about the epoch).
#[test]
fn follower_append_applies_no_producer_dedupe_and_no_sequence_checks() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    log.append_as_follower(&producer_batch(0, 42, 3, 0))
        .unwrap();
    // The same producer batch again, at new offsets: written, not answered as a duplicate.
    let again = log
        .append_as_follower(&producer_batch(2, 42, 3, 0))
        .unwrap();
    assert!(!again.duplicate);
    assert_eq!((again.first_offset, log.log_end_offset()), (2, 4));
    // An older epoch and a sequence gap.
    log.append_as_follower(&producer_batch(4, 42, 2, 0))
        .unwrap();
    log.append_as_follower(&producer_batch(6, 42, 3, 90))
        .unwrap();
    assert_eq!(log.log_end_offset(), 8);
    let entry = log.producer_state(42).unwrap();
    assert_eq!((entry.producer_epoch, entry.last_sequence), (3, 91));
    // The same batch through the client path is a duplicate there.
    let dir = tempfile::tempdir().unwrap();
    let leader = Log::open(dir.path(), LogConfig::default()).unwrap();
    leader.append_batch(&producer_batch(0, 42, 3, 0)).unwrap();
    assert!(
        leader
            .append_batch(&producer_batch(0, 42, 3, 0))
            .unwrap()
            .duplicate
    );
}

/// A transaction and its ABORT marker in one follower append: the producer state sees the
/// batches in order, and the `.txnindex` records the aborted transaction for `read_committed`.
#[test]
fn follower_append_of_a_transaction_and_its_marker_indexes_the_abort() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let txn = BatchBuilder::new(Compression::None)
        .producer(7, 0, 0)
        .transactional(true);
    let mut fetched = batch_of(txn, 0, 1, 2);
    let mut marker = build_control_batch(ControlRecordType::Abort, 7, 0, 0, 2, T0);
    partlog::unstable::format::set_partition_leader_epoch(&mut marker, 1).unwrap();
    fetched.extend(&marker);
    fetched.extend(leader_batch(3, 1, 1));
    log.append_as_follower(&fetched).unwrap();
    assert_eq!(log.first_unstable_offset(), None);
    let read = log
        .read_with(
            0,
            1 << 20,
            ReadOptions::default().isolation(Isolation::ReadCommitted),
        )
        .unwrap();
    let aborted: Vec<(i64, i64, i64)> = read
        .aborted_transactions()
        .iter()
        .map(|t| (t.producer_id, t.first_offset, t.last_offset))
        .collect();
    assert_eq!(aborted, [(7, 0, 2)]);
}

#[test]
fn follower_append_rolls_when_the_active_segment_is_full() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig::builder_for_tests()
        .segment_bytes(1024)
        .build()
        .unwrap();
    let log = Log::open(dir.path(), config).unwrap();
    let mut expected: Vec<u8> = Vec::new();
    for base in (0..200).step_by(5) {
        let batch = leader_batch(base, 1, 5);
        expected.extend(&batch);
        log.append_as_follower(&batch).unwrap();
    }
    assert!(log.stats().segments > 3);
    let mut read: Vec<u8> = Vec::new();
    let mut offset = 0;
    while offset < log.log_end_offset() {
        let fetch = log.read(offset, 1 << 20, ReadBound::LogEnd).unwrap();
        read.extend(fetch.bytes());
        offset = fetch.next_offset();
    }
    assert_eq!(read, expected);
    drop(log);
    let log = Log::open(
        dir.path(),
        LogConfig::builder_for_tests()
            .segment_bytes(1024)
            .build()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(log.log_end_offset(), 200);
    assert_eq!(log.leader_epoch_entries(), entries(&[(1, 0)]));
}

#[test]
fn follower_truncate_fully_and_start_at_restarts_the_log_empty_at_any_offset() {
    // Above the log end (a follower behind its leader's start), at it, inside, and at 0.
    for offset in [100, 20, 7, 0] {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig::builder_for_tests()
            .segment_bytes(1024)
            .build()
            .unwrap();
        {
            let log = Log::open(dir.path(), config.clone()).unwrap();
            log.become_leader(1).unwrap();
            for i in 0..20 {
                log.append(&[record(i)]).unwrap();
            }
            let mut txn = BatchBuilder::new(Compression::None)
                .producer(3, 0, 0)
                .transactional(true);
            txn.push(&record(20));
            log.append_batch(&txn.build().unwrap()).unwrap();
            log.set_high_watermark(15).unwrap();
            log.truncate_fully_and_start_at(offset).unwrap();
            let context = format!("offset {offset}");
            assert_eq!(log.log_start_offset(), offset, "{context}");
            assert_eq!(log.log_end_offset(), offset, "{context}");
            assert_eq!(log.high_watermark(), offset, "{context}");
            assert_eq!(log.durable_offset(), offset, "{context}");
            assert!(log.leader_epoch_entries().is_empty(), "{context}");
            assert!(log.active_producers().is_empty(), "{context}");
            assert_eq!(log.first_unstable_offset(), None, "{context}");
            assert_eq!(log.stats().segments, 1, "{context}");
            let snapshots = std::fs::read_dir(dir.path())
                .unwrap()
                .filter(|e| {
                    let name = e.as_ref().unwrap().file_name();
                    name.to_string_lossy().ends_with(".snapshot")
                })
                .count();
            assert_eq!(snapshots, 0, "{context}");
            assert!(
                log.read(offset, 1 << 20, ReadBound::LogEnd)
                    .unwrap()
                    .is_empty()
            );
            // The leader's next append assigns its epoch at the new start.
            log.append(&[record(offset)]).unwrap();
            assert_eq!(log.leader_epoch_entries(), entries(&[(1, offset)]));
            log.close().unwrap();
        }
        let log = Log::open(dir.path(), config).unwrap();
        assert_eq!(
            (log.log_start_offset(), log.log_end_offset()),
            (offset, offset + 1)
        );
        let values: Vec<Vec<u8>> = log
            .records(offset, ReadBound::LogEnd)
            .map(|r| r.unwrap().value.unwrap().to_vec())
            .collect();
        assert_eq!(values, [format!("value-{offset}").into_bytes()]);
    }
}

#[test]
fn follower_truncate_fully_and_start_at_refuses_offsets_no_segment_can_have() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    log.append(&[record(0)]).unwrap();
    for offset in [-1, i64::MAX] {
        assert!(matches!(
            log.truncate_fully_and_start_at(offset),
            Err(Error::InvalidArgument { .. })
        ));
    }
    assert_eq!(log.log_end_offset(), 1);
}

/// A crash at any storage operation of `truncate_fully_and_start_at` (with each crash image)
/// reopens the log either as it was or as the new empty log at the offset, never anything else.
#[cfg(feature = "sim")]
#[test]
fn follower_truncate_fully_and_start_at_crash_at_every_operation_leaves_the_old_or_the_new_log() {
    use std::sync::Arc;

    use partlog::FlushPolicy;
    use partlog::unstable::sim::{CrashConfig, FaultOp, FaultRule};
    use partlog::unstable::{ManualClock, SimStorage, Storage};

    #[derive(Debug, PartialEq)]
    struct State {
        start: i64,
        end: i64,
        values: Vec<(i64, Vec<u8>)>,
        epochs: Vec<EpochEntry>,
        producers: usize,
    }
    fn state_of(log: &Log) -> State {
        State {
            start: log.log_start_offset(),
            end: log.log_end_offset(),
            values: log
                .records(log.log_start_offset(), ReadBound::LogEnd)
                .map(|r| {
                    let r = r.unwrap();
                    (r.offset, r.value.unwrap().to_vec())
                })
                .collect(),
            epochs: log.leader_epoch_entries(),
            producers: log.active_producers().len(),
        }
    }

    const RESTART_AT: i64 = 500;
    let dir = Path::new("/data/topic-0");
    let images = [
        CrashConfig::lose_unsynced(),
        CrashConfig::keep_unsynced(),
        CrashConfig::default(),
    ];
    for (image_index, image) in images.iter().enumerate() {
        let mut completed = false;
        let mut crashes = 0;
        for crash_at in 1..400u64 {
            let sim = SimStorage::new(crash_at * 10 + image_index as u64);
            let storage: Arc<dyn Storage> = Arc::new(sim.clone());
            let config = LogConfig::builder_for_tests()
                .segment_bytes(1024)
                .flush_policy(FlushPolicy::EveryAppend)
                .storage(storage)
                .clock(Arc::new(ManualClock::new(T0)))
                .build()
                .unwrap();
            let log = Log::open(dir, config.clone()).unwrap();
            for (i, base) in (0..60).step_by(3).enumerate() {
                log.append_as_follower(&leader_batch(base, (i / 10) as i32, 3))
                    .unwrap();
            }
            log.append_as_follower(&producer_batch(60, 9, 0, 0))
                .unwrap();
            log.roll().unwrap();
            log.wait_durable(61).unwrap();
            let old = state_of(&log);
            assert_eq!(old.epochs, entries(&[(0, 0), (1, 30)]));
            let new = State {
                start: RESTART_AT,
                end: RESTART_AT,
                values: Vec::new(),
                epochs: Vec::new(),
                producers: 0,
            };

            let crashes_before = sim.stats().crashes;
            sim.inject(FaultRule::crash(FaultOp::Any, crash_at).crash_config(image.clone()));
            let result = log.truncate_fully_and_start_at(RESTART_AT);
            sim.clear_faults();
            let crashed = sim.stats().crashes > crashes_before;
            if !crashed {
                result.unwrap();
                assert_eq!(state_of(&log), new);
                log.close().unwrap();
                let reopened = Log::open(dir, config).unwrap();
                assert_eq!(state_of(&reopened), new);
                completed = true;
                break;
            }
            crashes += 1;
            drop(log);
            let context = format!("{image:?}: crash at operation {crash_at}");
            let reopened =
                Log::open(dir, config).unwrap_or_else(|error| panic!("{context}: {error}"));
            let state = state_of(&reopened);
            assert!(state == old || state == new, "{context}: {state:?}");
        }
        assert!(completed, "{image:?}: the call never completed");
        // The snapshots' removal, two checkpoint writes, the cache file's replacement, the new
        // segment's files, the renames and the directory syncs: 42 operations today.
        assert!(crashes >= 30, "{image:?}: only {crashes} crash points");
    }
}

#[test]
fn follower_hooks_on_a_read_only_or_closed_log_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = Log::open(dir.path(), LogConfig::default()).unwrap();
        log.append_as_follower(&leader_batch(0, 1, 2)).unwrap();
        log.close().unwrap();
        assert!(matches!(
            log.append_as_follower(&leader_batch(2, 1, 1)),
            Err(Error::Closed)
        ));
        assert!(matches!(log.become_leader(2), Err(Error::Closed)));
        assert!(matches!(log.set_high_watermark(1), Err(Error::Closed)));
        assert!(matches!(
            log.truncate_fully_and_start_at(5),
            Err(Error::Closed)
        ));
    }
    let reader = Log::open_read_only(dir.path(), LogConfig::default()).unwrap();
    let unsupported = |result: partlog::Result<()>| {
        assert!(
            matches!(result, Err(Error::Unsupported { .. })),
            "{result:?}"
        );
    };
    unsupported(
        reader
            .append_as_follower(&leader_batch(2, 1, 1))
            .map(|_| ()),
    );
    unsupported(reader.become_leader(2));
    unsupported(reader.become_follower());
    unsupported(reader.set_high_watermark(1).map(|_| ()));
    unsupported(reader.truncate_fully_and_start_at(5));
    // The read side answers: the cache as loaded, the high watermark at the log end.
    assert_eq!(reader.leader_epoch_entries(), entries(&[(1, 0)]));
    assert_eq!(reader.high_watermark(), 2);
    assert_eq!(reader.leader_epoch(), None);
}

/// The segment bases of the log in `dir`, from its file names.
fn segment_bases(dir: &Path) -> Vec<i64> {
    partlog::unstable::list_segment_bases(&partlog::unstable::OsStorage::new(), dir).unwrap()
}

/// Every record's offset, read from the log start.
fn record_offsets(log: &Log) -> Vec<i64> {
    log.records(log.log_start_offset(), ReadBound::LogEnd)
        .map(|record| record.unwrap().offset)
        .collect()
}

/// The offsets `committed_records` returns from the log start.
fn committed_offsets(log: &Log) -> Vec<i64> {
    log.committed_records(log.log_start_offset(), ReadBound::LogEnd)
        .map(|record| record.unwrap().offset)
        .collect()
}

/// A compacted log, as a follower of a compacted topic is configured.
fn compacted() -> LogConfig {
    LogConfig::builder_for_tests()
        .cleanup_policy(CleanupPolicy::COMPACT)
        .build()
        .unwrap()
}

/// Issue 29, item 2: a compacted leader's gap of more than `i32::MAX` offsets. The batch after
/// it does not fit a segment beginning at the log end (32-bit relative offsets), so the
/// follower rolls at the batch's first offset (Kafka's `maybeRoll`, KAFKA-6264) and the gap
/// lies between two segments. The call used to fail with `InvalidArgument` ("relative offsets
/// are 32-bit"), and a fetcher retried it for ever. The log then reads, takes the next
/// batches, verifies, and reopens cleanly and after a crash with every record (the gap lies
/// below the recovery point the roll recorded, so recovery does not cut it as a lost tail). In
/// an empty log the empty first segment stays, as Kafka's does.
#[test]
fn follower_append_rolls_at_a_batch_more_than_i32_max_offsets_past_the_log_end() {
    for records_before in [3, 0] {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), compacted()).unwrap();
        if records_before > 0 {
            log.append_as_follower(&leader_batch(0, 1, records_before))
                .unwrap();
        }
        let far = records_before + i64::from(i32::MAX) + 10;
        // A transaction past the gap: the roll's producer snapshot and the `.txnindex` follow.
        let mut fetched = leader_batch(far, 2, 2);
        let txn = BatchBuilder::new(Compression::None)
            .producer(7, 0, 0)
            .transactional(true);
        fetched.extend(batch_of(txn, far + 2, 2, 1));
        let mut abort = build_control_batch(ControlRecordType::Abort, 7, 0, 0, far + 3, T0);
        partlog::unstable::format::set_partition_leader_epoch(&mut abort, 2).unwrap();
        fetched.extend(&abort);
        let info = log.append_as_follower(&fetched).unwrap();
        assert_eq!((info.first_offset, info.last_offset), (far, far + 3));
        assert_eq!(log.log_end_offset(), far + 4);
        assert_eq!(segment_bases(dir.path()), [0, far]);
        let mut expected: Vec<i64> = (0..records_before).collect();
        expected.extend([far, far + 1, far + 2]);
        assert_eq!(record_offsets(&log), expected);
        let mut committed = expected[..expected.len() - 1].to_vec();
        assert_eq!(committed_offsets(&log), committed);
        // The next fetch lands after it, in the same segment.
        log.append_as_follower(&leader_batch(far + 4, 2, 1))
            .unwrap();
        expected.push(far + 4);
        committed.push(far + 4);
        let mut epochs = vec![(2, far)];
        if records_before > 0 {
            epochs.insert(0, (1, 0));
        }
        assert_eq!(log.leader_epoch_entries(), entries(&epochs));
        log.close().unwrap();
        drop(log);

        let report = partlog::verify_dir(dir.path(), &compacted()).unwrap();
        assert!(report.findings.is_empty(), "{:?}", report.findings);
        let reopened = Log::open(dir.path(), compacted()).unwrap();
        assert_eq!(reopened.log_end_offset(), far + 5);
        assert_eq!(record_offsets(&reopened), expected);
        drop(reopened);
        // Without the checkpoint (an unclean open that scans every segment): both stay.
        std::fs::remove_file(dir.path().join("partlog.checkpoint")).unwrap();
        let recovered = Log::open(dir.path(), compacted()).unwrap();
        recovered
            .append_as_follower(&leader_batch(far + 5, 2, 1))
            .unwrap();
        expected.push(far + 5);
        committed.push(far + 5);
        assert_eq!(recovered.log_end_offset(), far + 6);
        assert_eq!(record_offsets(&recovered), expected);
        assert_eq!(committed_offsets(&recovered), committed);
        assert_eq!(segment_bases(dir.path()), [0, far]);
    }
}

/// Issue 29, item 2, in a follower whose cleanup policy is delete: its leader's topic was
/// compacted, then switched to delete, so the gap is the leader's. The call used to be refused
/// with `Unsupported` (a gap between segments was legal only under the compact policy), and a
/// fetcher retried it for ever. The roll now records in `partlog.checkpoint` that the log's
/// records are compacted, in the synced slot of its recovery point: reads move across the gap,
/// a read-only open and `verify` read the flag, and a clean reopen keeps both segments. Offsets
/// up to `i32::MAX` past the end still fit a segment beginning there.
#[test]
fn item2_a_delete_policy_follower_rolls_past_an_i32_max_gap_and_reads_across_it() {
    let delete = || LogConfig::default();
    assert_eq!(delete().cleanup_policy, CleanupPolicy::DELETE);
    let dir = tempfile::tempdir().unwrap();
    let log = follower_with_three_records(dir.path());
    let near = 3 + i64::from(i32::MAX);
    log.append_as_follower(&leader_batch(near, 2, 1)).unwrap();
    // Rolled at the log end: the gap lies inside the new segment.
    assert_eq!(segment_bases(dir.path()), [0, 3]);
    let far = near + 1 + i64::from(i32::MAX) + 1;
    let info = log.append_as_follower(&leader_batch(far, 2, 2)).unwrap();
    assert_eq!((info.first_offset, info.last_offset), (far, far + 1));
    assert_eq!(segment_bases(dir.path()), [0, 3, far]);
    let mut expected = vec![0, 1, 2, near, far, far + 1];
    assert_eq!(record_offsets(&log), expected);
    // A fetch that reaches the end of the first segment goes on in the next one.
    let fetch = log.read(near + 1, 1 << 20, ReadBound::LogEnd).unwrap();
    assert_eq!(
        fetch.batches().next().unwrap().unwrap().last_offset(),
        far + 1
    );
    log.append_as_follower(&leader_batch(far + 2, 2, 1))
        .unwrap();
    expected.push(far + 2);
    log.close().unwrap();
    drop(log);

    let report = partlog::verify_dir(dir.path(), &delete()).unwrap();
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    let reader = Log::open_read_only(dir.path(), delete()).unwrap();
    assert_eq!(record_offsets(&reader), expected);
    drop(reader);
    let reopened = Log::open(dir.path(), delete()).unwrap();
    assert_eq!(record_offsets(&reopened), expected);
    assert_eq!(reopened.log_end_offset(), far + 3);
    reopened
        .append_as_follower(&leader_batch(far + 3, 2, 1))
        .unwrap();
    expected.push(far + 3);
    assert_eq!(record_offsets(&reopened), expected);
    drop(reopened);
    assert_eq!(segment_bases(dir.path()), [0, 3, far]);
    // Without the checkpoint nothing says the records were compacted, and the policy does
    // not: the gap is damage that the open refuses to cut by itself.
    std::fs::remove_file(dir.path().join("partlog.checkpoint")).unwrap();
    match Log::open(dir.path(), delete()) {
        Err(Error::DamagedWithoutCheckpoint { what, .. }) => assert_eq!(
            what,
            Corruption::MissingOffsets {
                from: near + 1,
                to: far
            }
        ),
        other => panic!("expected DamagedWithoutCheckpoint, got {other:?}"),
    }
}

/// Issue 29, item 2: batches that span more than `i32::MAX` offsets in one call fit no
/// segment. The call is refused before anything is written, with where to split it; the two
/// halves are then taken one call each.
#[test]
fn follower_append_of_a_call_spanning_more_than_a_segment_is_refused_with_where_to_split() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), compacted()).unwrap();
    log.append_as_follower(&leader_batch(0, 1, 3)).unwrap();
    let before = observe(&log);
    let far = 3 + i64::from(i32::MAX) + 1;
    let mut fetched = leader_batch(3, 2, 1);
    fetched.extend(leader_batch(far, 2, 1));
    match log.append_as_follower(&fetched) {
        Err(Error::InvalidArgument { why }) => {
            assert!(why.contains(&format!("from offset {far} on")), "{why}")
        }
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    assert_eq!(observe(&log), before);
    log.append_as_follower(&leader_batch(3, 2, 1)).unwrap();
    log.append_as_follower(&leader_batch(far, 2, 1)).unwrap();
    assert_eq!(log.log_end_offset(), far + 1);
    assert_eq!(record_offsets(&log), [0, 1, 2, 3, far]);
    assert_eq!(segment_bases(dir.path()), [0, 4]);
}

/// Issue 29, item 2: a crash at any storage operation of a follower append past an `i32::MAX`
/// gap (with each crash image, under the compact and the delete policy) reopens a log that
/// verifies without corruption and holds either the old records or those and the new batch,
/// and, once the append returned (durable under `EveryAppend`), a crash at the next append
/// keeps the new batch: the roll recorded the recovery point past the gap, with the
/// checkpoint's `COMPACTED` flag, before the new segment took a byte, so recovery never takes
/// the gap for a lost tail, nor, under the delete policy, for corruption.
#[cfg(feature = "sim")]
#[test]
fn follower_append_past_an_i32_max_gap_crash_at_every_operation_keeps_what_was_acknowledged() {
    use std::sync::Arc;

    use partlog::unstable::sim::{CrashConfig, FaultOp, FaultRule};
    use partlog::unstable::{ManualClock, SimStorage, Storage};
    use partlog::{FlushPolicy, Severity};

    let dir = Path::new("/data/topic-0");
    let far = 30 + i64::from(i32::MAX) + 7;
    let old: Vec<i64> = (0..30).collect();
    let new: Vec<i64> = old.iter().copied().chain([far, far + 1]).collect();
    let images = [
        CrashConfig::lose_unsynced(),
        CrashConfig::keep_unsynced(),
        CrashConfig::default(),
    ];
    let cases = [CleanupPolicy::COMPACT, CleanupPolicy::DELETE]
        .into_iter()
        .flat_map(|policy| images.iter().enumerate().map(move |image| (policy, image)));
    for (policy, (image_index, image)) in cases {
        let mut completed = false;
        let mut crashes = 0;
        for crash_at in 1..200u64 {
            let sim = SimStorage::new(crash_at * 10 + image_index as u64);
            let storage: Arc<dyn Storage> = Arc::new(sim.clone());
            let config = LogConfig::builder_for_tests()
                .segment_bytes(1024)
                .cleanup_policy(policy)
                .flush_policy(FlushPolicy::EveryAppend)
                .storage(storage)
                .clock(Arc::new(ManualClock::new(T0)))
                .build()
                .unwrap();
            let log = Log::open(dir, config.clone()).unwrap();
            for base in (0..30).step_by(3) {
                log.append_as_follower(&leader_batch(base, 1, 3)).unwrap();
            }
            let crashes_before = sim.stats().crashes;
            sim.inject(FaultRule::crash(FaultOp::Any, crash_at).crash_config(image.clone()));
            let result = log.append_as_follower(&leader_batch(far, 2, 2));
            let crashed = sim.stats().crashes > crashes_before;
            let context = format!("{policy:?}, {image:?}: crash at operation {crash_at}");
            if !crashed {
                result.unwrap();
                completed = true;
                // Acknowledged: a crash from here on keeps it.
                sim.clear_faults();
                sim.inject(FaultRule::crash(FaultOp::Any, 1).crash_config(image.clone()));
                let _ = log.append_as_follower(&leader_batch(far + 2, 2, 1));
            }
            sim.clear_faults();
            crashes += 1;
            drop(log);
            let report = partlog::verify_dir(dir, &config).unwrap();
            let corrupt: Vec<_> = report.findings_of(Severity::Corruption).collect();
            assert!(corrupt.is_empty(), "{context}: {corrupt:?}");
            let reopened =
                Log::open(dir, config).unwrap_or_else(|error| panic!("{context}: {error}"));
            let offsets = record_offsets(&reopened);
            if completed {
                assert!(offsets.starts_with(&new), "{context}: {offsets:?}");
                break;
            }
            assert!(offsets == old || offsets == new, "{context}: {offsets:?}");
            // The log goes on from where it recovered.
            let end = reopened.log_end_offset();
            reopened
                .append_as_follower(&leader_batch(end.max(far + 2), 2, 1))
                .unwrap();
        }
        assert!(completed, "{policy:?}, {image:?}: the call never completed");
        // The roll's files and snapshot, the syncs, the checkpoint slot, the batch's write.
        assert!(
            crashes >= 8,
            "{policy:?}, {image:?}: only {crashes} crash points"
        );
    }
}

/// Issue 29, item 2: a failed storage operation (EIO) at any point of a follower append past
/// an `i32::MAX` gap, under the compact and the delete policy. Either the call fails and the
/// log is poisoned, or, if it is not, the retried call (and whatever it acknowledges) survives
/// a crash: the new segment never takes a byte before the recovery point past the gap, and the
/// `COMPACTED` flag, are recorded. The log reopens with the old records, or with the new batch
/// too once it was acknowledged.
#[cfg(feature = "sim")]
#[test]
fn follower_append_past_an_i32_max_gap_with_a_failure_at_every_operation_poisons_or_keeps_it() {
    let dir = Path::new("/data/topic-0");
    let far = 30 + i64::from(i32::MAX) + 7;
    let old: Vec<i64> = (0..30).collect();
    let new: Vec<i64> = old.iter().copied().chain([far, far + 1]).collect();
    for policy in [CleanupPolicy::COMPACT, CleanupPolicy::DELETE] {
        failures_at_every_operation(dir, far, &old, &new, policy);
    }
}

/// The body of the test above, under one cleanup policy.
#[cfg(feature = "sim")]
fn failures_at_every_operation(
    dir: &Path,
    far: i64,
    old: &[i64],
    new: &[i64],
    policy: CleanupPolicy,
) {
    use std::sync::Arc;

    use partlog::unstable::sim::{CrashConfig, FaultOp, FaultRule};
    use partlog::unstable::{ManualClock, SimStorage, Storage};
    use partlog::{FlushPolicy, Severity};

    for (failures, fail_at) in (1..200u64).enumerate() {
        let sim = SimStorage::new(fail_at);
        let storage: Arc<dyn Storage> = Arc::new(sim.clone());
        let config = LogConfig::builder_for_tests()
            .segment_bytes(1024)
            .cleanup_policy(policy)
            .flush_policy(FlushPolicy::EveryAppend)
            .storage(storage)
            .clock(Arc::new(ManualClock::new(T0)))
            .build()
            .unwrap();
        let log = Log::open(dir, config.clone()).unwrap();
        for base in (0..30).step_by(3) {
            log.append_as_follower(&leader_batch(base, 1, 3)).unwrap();
        }
        let failures_before = sim.stats().faults;
        sim.inject(FaultRule::fail(FaultOp::Any, fail_at));
        let result = log.append_as_follower(&leader_batch(far, 2, 2));
        sim.clear_faults();
        if sim.stats().faults == failures_before {
            result.unwrap();
            assert!(failures >= 5, "only {failures} operations failed");
            return;
        }
        let context = format!("{policy:?}: failure at operation {fail_at}");
        let acknowledged = match result {
            Ok(_) => true,
            Err(_) if log.stats().poisoned => false,
            // Not poisoned: the retry must be safe.
            Err(_) => log.append_as_follower(&leader_batch(far, 2, 2)).is_ok(),
        };
        sim.crash_with(&CrashConfig::lose_unsynced());
        drop(log);
        let report = partlog::verify_dir(dir, &config).unwrap();
        let corrupt: Vec<_> = report.findings_of(Severity::Corruption).collect();
        assert!(corrupt.is_empty(), "{context}: {corrupt:?}");
        let reopened = Log::open(dir, config).unwrap_or_else(|error| panic!("{context}: {error}"));
        let offsets = record_offsets(&reopened);
        if acknowledged {
            assert_eq!(offsets, new, "{context}");
        } else {
            assert!(offsets == old || offsets == new, "{context}: {offsets:?}");
        }
    }
    panic!("{policy:?}: the call never completed");
}
