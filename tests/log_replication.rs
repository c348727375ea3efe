//! The log-level replication hooks (ARCHITECTURE.md §11) on a real directory: the epoch client
//! appends stamp, the leader-epoch cache hooked into appends, truncation, `delete_records_before`,
//! retention and open (Kafka's `UnifiedLogTest`, `LogLoaderTest` and `LogSegmentTest` cases where
//! they apply), and the high watermark.
//!
//! Follower appends and `truncate_fully_and_start_at` are in `log_follower.rs`.

use std::path::Path;

use partlog::unstable::OsStorage;
use partlog::unstable::leader_epoch::{LEADER_EPOCH_CHECKPOINT_FILE_NAME, read_checkpoint};
use partlog::{
    BatchBuilder, Compression, ControlRecordType, EpochEntry, Error, Isolation, Log, LogConfig,
    NewRecord, ReadBound, ReadOptions,
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
    let mut builder = BatchBuilder::new(Compression::None)
        .base_offset(base)
        .partition_leader_epoch(epoch);
    for i in 0..n {
        builder.push(&record(base + i));
    }
    builder.build().unwrap()
}

fn checkpoint_text(dir: &Path) -> String {
    std::fs::read_to_string(dir.join(LEADER_EPOCH_CHECKPOINT_FILE_NAME)).unwrap()
}

fn on_disk(dir: &Path) -> Option<Vec<EpochEntry>> {
    read_checkpoint(&OsStorage::new(), dir).unwrap()
}

/// The `partitionLeaderEpoch` of every batch from offset 0, as stored.
fn stored_epochs(log: &Log) -> Vec<(i64, i32)> {
    let fetch = log
        .read(log.log_start_offset(), 1 << 20, ReadBound::LogEnd)
        .unwrap();
    fetch
        .batches()
        .map(|batch| {
            let header = *batch.unwrap().header().unwrap();
            (header.base_offset, header.partition_leader_epoch)
        })
        .collect()
}

/// Opens `dir` with the checkpoint that makes the next open clean removed: the open then
/// recovers every segment, as after a crash in a directory without `partlog.checkpoint`.
fn reopen_unclean(dir: &Path) -> Log {
    std::fs::remove_file(dir.join("partlog.checkpoint")).unwrap();
    Log::open(dir, LogConfig::default()).unwrap()
}

#[test]
fn leader_epoch_a_bare_log_stamps_no_epoch_and_writes_no_cache() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    log.append(&[record(0)]).unwrap();
    assert_eq!(log.leader_epoch(), None);
    assert_eq!(stored_epochs(&log), [(0, -1)]);
    assert!(log.leader_epoch_entries().is_empty());
    assert_eq!(log.end_offset_for_epoch(0), (-1, -1));
    assert_eq!(on_disk(dir.path()), None);
}

#[test]
fn leader_epoch_client_appends_after_become_leader_stamp_the_epoch_and_assign_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    log.append(&[record(0)]).unwrap();
    log.become_leader(3).unwrap();
    assert_eq!(log.leader_epoch(), Some(3));
    log.append(&[record(1), record(2)]).unwrap();
    // A producer's batch carrying another epoch gets the leader's, as in Kafka.
    let mut produced = BatchBuilder::new(Compression::None).partition_leader_epoch(77);
    produced.push(&record(3));
    log.append_batch(&produced.build().unwrap()).unwrap();
    let marker = log
        .append_marker(9, 0, ControlRecordType::Commit, 0)
        .unwrap();
    assert_eq!(stored_epochs(&log), [(0, -1), (1, 3), (3, 3)]);
    let fetch = log
        .read(marker.first_offset, 1 << 20, ReadBound::LogEnd)
        .unwrap();
    let batch = fetch.batches().next().unwrap().unwrap();
    assert!(batch.is_control());
    assert_eq!(batch.header().unwrap().partition_leader_epoch, 3);
    assert_eq!(log.leader_epoch_entries(), entries(&[(3, 1)]));
    assert_eq!(log.latest_epoch(), Some(3));
    assert_eq!(log.epoch_for_offset(2), Some(3));
    assert_eq!(log.epoch_for_offset(0), None);
    assert_eq!(log.end_offset_for_epoch(3), (3, 5));
    assert_eq!(checkpoint_text(dir.path()), "0\n1\n3 1\n");
}

/// Kafka: `UnifiedLogTest.testMakeLeaderUpdatesEpochCache` (as `PartitionTest` drives it): the
/// log ends at 4, leader epoch 8 starts there.
#[test]
fn leader_epoch_become_leader_records_the_epoch_at_the_log_end() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    log.append(&[record(0), record(1), record(2), record(3)])
        .unwrap();
    log.become_leader(8).unwrap();
    assert_eq!(log.end_offset_for_epoch(8), (8, 4));
    assert_eq!(log.leader_epoch_entries(), entries(&[(8, 4)]));
    // Leading the same epoch again changes nothing, even after appends.
    log.append(&[record(4)]).unwrap();
    log.become_leader(8).unwrap();
    assert_eq!(log.leader_epoch_entries(), entries(&[(8, 4)]));
    assert_eq!(on_disk(dir.path()), Some(entries(&[(8, 4)])));
}

#[test]
fn leader_epoch_become_leader_below_the_latest_epoch_is_fenced() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    log.become_leader(5).unwrap();
    assert!(matches!(
        log.become_leader(4),
        Err(Error::FencedLeaderEpoch {
            current: 5,
            found: 4
        })
    ));
    assert!(matches!(
        log.become_leader(-1),
        Err(Error::InvalidArgument { .. })
    ));
    assert_eq!(log.leader_epoch(), Some(5));
    assert_eq!(log.leader_epoch_entries(), entries(&[(5, 0)]));
}

#[test]
fn leader_epoch_truncate_to_rewrites_the_cache_file_before_it_returns() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let mut fetched = leader_batch(0, 1, 2);
    fetched.extend(leader_batch(2, 3, 2));
    fetched.extend(leader_batch(4, 4, 2));
    log.append_as_follower(&fetched).unwrap();
    assert_eq!(
        on_disk(dir.path()),
        Some(entries(&[(1, 0), (3, 2), (4, 4)]))
    );
    assert_eq!(log.truncate_to(3).unwrap(), 2);
    // The file, not only the cache: a crash right after the return reopens with it.
    assert_eq!(on_disk(dir.path()), Some(entries(&[(1, 0)])));
    assert_eq!(log.end_offset_for_epoch(1), (1, 2));
    assert_eq!(log.end_offset_for_epoch(3), (-1, -1));
    // At or above the log end only the cache is cut there, as Kafka's `truncateTo` does: the
    // epoch of a leader elected at the end that never wrote goes.
    log.become_leader(5).unwrap();
    assert_eq!(log.leader_epoch_entries(), entries(&[(1, 0), (5, 2)]));
    assert_eq!(log.truncate_to(9).unwrap(), 2);
    assert_eq!(on_disk(dir.path()), Some(entries(&[(1, 0)])));
}

#[test]
fn leader_epoch_delete_records_before_moves_the_first_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let mut fetched = leader_batch(0, 2, 3);
    fetched.extend(leader_batch(3, 3, 3));
    fetched.extend(leader_batch(6, 4, 3));
    log.append_as_follower(&fetched).unwrap();
    log.delete_records_before(4).unwrap();
    // Kafka's `shouldUpdateSavedOffsetWhenOffsetToClearToIsBetweenEpochs`, on a log.
    assert_eq!(log.leader_epoch_entries(), entries(&[(3, 4), (4, 6)]));
    assert_eq!(on_disk(dir.path()), Some(entries(&[(3, 4), (4, 6)])));
}

#[test]
fn leader_epoch_retention_truncates_the_cache_from_the_new_start() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig::builder_for_tests()
        .segment_bytes(1024)
        .retention_bytes(3000)
        .build()
        .unwrap();
    let log = Log::open(dir.path(), config).unwrap();
    for (i, base) in (0..400).step_by(4).enumerate() {
        log.append_as_follower(&leader_batch(base, i as i32, 4))
            .unwrap();
    }
    assert!(log.stats().segments > 2);
    let report = log.enforce_retention().unwrap();
    assert!(report.segments_deleted() > 0);
    let start = log.log_start_offset();
    assert!(start > 0 && start < 400, "{start}");
    let cache = log.leader_epoch_entries();
    assert_eq!(cache.len() as i64, (400 - start) / 4);
    assert_eq!(cache.first().unwrap().start_offset, start);
    assert_eq!(cache.first().unwrap().epoch, (start / 4) as i32);
    assert_eq!(on_disk(dir.path()), Some(cache));
}

/// Kafka: `LogSegmentTest.testRecoveryRebuildsEpochCache`. Batches with epochs 0@104, 1@106,
/// 1@108, 2@110; the file says nothing of them (an append writes its batch after the file, so
/// a crash can leave the file behind): recovery adds what it scans.
#[test]
fn leader_epoch_recovery_assigns_the_epochs_of_the_batches_it_scans() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = Log::open(dir.path(), LogConfig::default()).unwrap();
        let mut fetched = leader_batch(104, 0, 2);
        fetched.extend(leader_batch(106, 1, 2));
        fetched.extend(leader_batch(108, 1, 2));
        fetched.extend(leader_batch(110, 2, 2));
        log.append_as_follower(&fetched).unwrap();
        log.close().unwrap();
    }
    std::fs::write(dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE_NAME), "0\n0\n").unwrap();
    let log = reopen_unclean(dir.path());
    assert!(!log.recovery_report().clean_shutdown);
    let expected = entries(&[(0, 104), (1, 106), (2, 110)]);
    assert_eq!(log.leader_epoch_entries(), expected);
    assert_eq!(on_disk(dir.path()), Some(expected));
}

#[test]
fn leader_epoch_open_drops_entries_past_the_log_end_and_clamps_the_first_start() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = Log::open(dir.path(), LogConfig::default()).unwrap();
        let mut fetched = leader_batch(0, 1, 5);
        fetched.extend(leader_batch(5, 2, 5));
        log.append_as_follower(&fetched).unwrap();
        log.delete_records_before(3).unwrap();
        log.close().unwrap();
    }
    // As a crash leaves it after an assign whose batch never reached the log, and with an
    // entry below the start (the start moved before the cache followed).
    std::fs::write(
        dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE_NAME),
        "0\n4\n0 0\n1 1\n2 5\n3 10\n",
    )
    .unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let expected = entries(&[(1, 3), (2, 5)]);
    assert_eq!(log.leader_epoch_entries(), expected);
    assert_eq!(on_disk(dir.path()), Some(expected));
}

#[test]
fn leader_epoch_unparsable_file_is_rebuilt_from_the_batches_and_rewritten() {
    for bad in [
        "1\n0\n",
        "0\n2\n1 0\n",
        "0\n1\nx 0\n",
        "0\n2\n3 5\n2 7\n",
        "",
    ] {
        let dir = tempfile::tempdir().unwrap();
        {
            let log = Log::open(dir.path(), LogConfig::default()).unwrap();
            let mut fetched = leader_batch(0, 1, 2);
            fetched.extend(leader_batch(2, 1, 2));
            fetched.extend(leader_batch(4, 6, 2));
            log.append_as_follower(&fetched).unwrap();
            log.close().unwrap();
        }
        std::fs::write(dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE_NAME), bad).unwrap();
        // After a clean shutdown: the rebuild reads the headers although recovery scans nothing.
        let log = Log::open(dir.path(), LogConfig::default()).unwrap();
        assert!(log.recovery_report().clean_shutdown, "{bad:?}");
        let expected = entries(&[(1, 0), (6, 4)]);
        assert_eq!(log.leader_epoch_entries(), expected, "{bad:?}");
        assert_eq!(checkpoint_text(dir.path()), "0\n2\n1 0\n6 4\n", "{bad:?}");
    }
}

#[test]
fn leader_epoch_unparsable_file_on_a_read_only_open_is_rebuilt_in_memory_only() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = Log::open(dir.path(), LogConfig::default()).unwrap();
        log.append_as_follower(&leader_batch(0, 4, 3)).unwrap();
        log.close().unwrap();
    }
    let path = dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE_NAME);
    std::fs::write(&path, "0\n7\n").unwrap();
    let reader = Log::open_read_only(dir.path(), LogConfig::default()).unwrap();
    assert_eq!(reader.leader_epoch_entries(), entries(&[(4, 0)]));
    assert_eq!(reader.end_offset_for_epoch(4), (4, 3));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "0\n7\n");
}

/// Kafka clears its cache when a legacy (magic 0 or 1) message is appended; the rebuild of a bad
/// file replays that rule over a broker directory that holds one after v2 batches.
#[cfg(all(feature = "gzip", feature = "snappy"))]
#[test]
fn leader_epoch_legacy_message_after_v2_batches_clears_the_rebuilt_cache() {
    let dir = tempfile::tempdir().unwrap();
    // A v2 segment that ends where the legacy one starts: no gap for recovery to cut.
    std::fs::write(
        dir.path().join("00000000004999999998.log"),
        leader_batch(4_999_999_998, 3, 2),
    )
    .unwrap();
    let legacy = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/legacy");
    std::fs::copy(
        legacy.join("v1_high_offsets.log"),
        dir.path().join("00000000005000000000.log"),
    )
    .unwrap();
    std::fs::write(dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE_NAME), "bad").unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    assert!(log.log_end_offset() > 5_000_000_000);
    assert!(log.leader_epoch_entries().is_empty());
    assert_eq!(checkpoint_text(dir.path()), "0\n0\n");

    // Without the legacy segment the same rebuild keeps the epoch.
    drop(log);
    std::fs::remove_file(dir.path().join("00000000005000000000.log")).unwrap();
    std::fs::write(dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE_NAME), "bad").unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    assert_eq!(log.leader_epoch_entries(), entries(&[(3, 4_999_999_998)]));
}

#[test]
fn high_watermark_follows_the_log_end_until_it_is_first_set() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    for i in 0..3 {
        log.append(&[record(i)]).unwrap();
    }
    assert_eq!(log.high_watermark(), 3);
    assert_eq!(
        log.read(0, 1 << 20, ReadBound::HighWatermark)
            .unwrap()
            .next_offset(),
        3
    );
    // The first call may set it below the log end; from then on it only moves forward.
    assert_eq!(log.set_high_watermark(1).unwrap(), 1);
    log.append(&[record(3)]).unwrap();
    assert_eq!(log.high_watermark(), 1);
    assert_eq!(log.set_high_watermark(0).unwrap(), 1);
    assert_eq!(log.set_high_watermark(3).unwrap(), 3);
    assert_eq!(log.high_watermark(), 3);
}

#[test]
fn high_watermark_above_the_log_end_is_refused_and_below_the_start_is_clamped() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    for i in 0..4 {
        log.append(&[record(i)]).unwrap();
    }
    log.delete_records_before(2).unwrap();
    assert!(matches!(
        log.set_high_watermark(5),
        Err(Error::InvalidArgument { .. })
    ));
    assert_eq!(log.high_watermark(), 4, "a refused call changes nothing");
    assert_eq!(log.set_high_watermark(1).unwrap(), 2);
    assert_eq!(log.high_watermark(), 2);
}

#[test]
fn high_watermark_bounds_reads_and_a_tail_waits_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = std::sync::Arc::new(Log::open(dir.path(), LogConfig::default()).unwrap());
    for i in 0..4 {
        log.append(&[record(i)]).unwrap();
    }
    log.set_high_watermark(2).unwrap();
    let fetch = log.read(0, 1 << 20, ReadBound::HighWatermark).unwrap();
    assert_eq!(fetch.next_offset(), 2);
    assert_eq!(
        log.read(2, 1 << 20, ReadBound::HighWatermark)
            .unwrap()
            .next_offset(),
        2,
        "nothing at or above the high watermark"
    );
    let records: Vec<i64> = log
        .records(0, ReadBound::HighWatermark)
        .map(|r| r.unwrap().offset)
        .collect();
    assert_eq!(records, [0, 1]);
    // A tail blocks at the high watermark until it moves.
    let tailing = std::sync::Arc::clone(&log);
    let tail = std::thread::spawn(move || {
        tailing
            .tail(0, ReadBound::HighWatermark)
            .take(3)
            .map(|r| r.unwrap().offset)
            .collect::<Vec<_>>()
    });
    log.set_high_watermark(3).unwrap();
    assert_eq!(tail.join().unwrap(), [0, 1, 2]);
}

#[test]
fn high_watermark_bounds_the_last_stable_offset_with_the_first_unstable_offset() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    log.append(&[record(0), record(1)]).unwrap();
    log.set_high_watermark(1).unwrap();
    assert_eq!(log.last_stable_offset(), 1);
    let mut txn = BatchBuilder::new(Compression::None)
        .producer(7, 0, 0)
        .transactional(true);
    txn.push(&record(2));
    log.append_batch(&txn.build().unwrap()).unwrap();
    log.append_marker(7, 0, ControlRecordType::Commit, 0)
        .unwrap();
    // The marker at 3 is above the high watermark: the transaction is not yet stable.
    assert_eq!(log.first_unstable_offset(), Some(2));
    log.set_high_watermark(3).unwrap();
    assert_eq!(log.last_stable_offset(), 2);
    log.set_high_watermark(4).unwrap();
    assert_eq!(log.first_unstable_offset(), None);
    assert_eq!(log.last_stable_offset(), 4);
    let committed = log
        .read_with(
            2,
            1 << 20,
            ReadOptions::default().isolation(Isolation::ReadCommitted),
        )
        .unwrap();
    assert_eq!(committed.last_stable_offset(), 4);
    assert!(committed.next_offset() > 2);
}

#[test]
fn high_watermark_delete_records_before_refuses_to_pass_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    for i in 0..5 {
        log.append(&[record(i)]).unwrap();
    }
    log.set_high_watermark(3).unwrap();
    assert!(matches!(
        log.delete_records_before(4),
        Err(Error::OffsetOutOfRange {
            requested: 4,
            end: 3,
            ..
        })
    ));
    assert_eq!(log.log_start_offset(), 0);
    log.delete_records_before(3).unwrap();
    assert_eq!(log.log_start_offset(), 3);
}

#[test]
fn high_watermark_retention_deletes_only_segments_wholly_below_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig::builder_for_tests()
        .segment_bytes(1024)
        .retention_bytes(0)
        .build()
        .unwrap();
    let log = Log::open(dir.path(), config).unwrap();
    for base in (0..400).step_by(4) {
        log.append_as_follower(&leader_batch(base, 0, 4)).unwrap();
    }
    let segments = log.stats().segments;
    assert!(segments > 3, "{segments}");
    log.set_high_watermark(100).unwrap();
    log.enforce_retention().unwrap();
    // Every segment holding offset 100 or above stays; the one holding 100 starts at or below.
    let start = log.log_start_offset();
    assert!(start <= 100 && start > 0, "{start}");
    assert!(log.read(100, 1, ReadBound::LogEnd).unwrap().next_offset() > 100);
    log.set_high_watermark(400).unwrap();
    log.enforce_retention().unwrap();
    assert_eq!(log.log_start_offset(), 400);
}

/// Kafka's follower truncation: `HW = min(HW, new log end)`.
#[test]
fn high_watermark_truncation_below_it_lowers_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    for i in 0..6 {
        log.append(&[record(i)]).unwrap();
    }
    log.set_high_watermark(5).unwrap();
    log.truncate_to(3).unwrap();
    assert_eq!(log.high_watermark(), 3);
    log.truncate_to(4).unwrap();
    assert_eq!(log.high_watermark(), 3);
    for i in 3..6 {
        log.append(&[record(i)]).unwrap();
    }
    assert_eq!(
        log.high_watermark(),
        3,
        "appends do not move a set high watermark"
    );
}

/// After a truncation the producer state is replayed from the segments: a transaction whose
/// marker lies at or above the high watermark stays unstable there too.
#[test]
fn high_watermark_keeps_a_transaction_unstable_through_a_truncation_replay() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    log.append(&[record(0)]).unwrap();
    log.set_high_watermark(1).unwrap();
    let mut txn = BatchBuilder::new(Compression::None)
        .producer(7, 0, 0)
        .transactional(true);
    txn.push(&record(1));
    log.append_batch(&txn.build().unwrap()).unwrap();
    log.append_marker(7, 0, ControlRecordType::Commit, 0)
        .unwrap();
    log.append(&[record(3)]).unwrap();
    log.append(&[record(4)]).unwrap();
    log.set_high_watermark(2).unwrap();
    assert_eq!(log.first_unstable_offset(), Some(1));
    log.truncate_to(4).unwrap();
    assert_eq!(log.high_watermark(), 2);
    assert_eq!(
        log.first_unstable_offset(),
        Some(1),
        "the marker at 2 is not below the HW"
    );
    assert_eq!(log.last_stable_offset(), 1);
    log.set_high_watermark(3).unwrap();
    assert_eq!(log.first_unstable_offset(), None);
    assert_eq!(log.last_stable_offset(), 3);
}

/// A read-only log that follows a live writer sees the writer's epochs at its next poll.
#[test]
fn leader_epoch_a_live_reader_follows_the_writers_cache() {
    let dir = tempfile::tempdir().unwrap();
    let writer = Log::open(dir.path(), LogConfig::default()).unwrap();
    writer.append_as_follower(&leader_batch(0, 1, 2)).unwrap();
    let reader = Log::open_read_only(
        dir.path(),
        LogConfig::builder()
            .allow_live_writer(true)
            .poll_interval(std::time::Duration::from_millis(1))
            .build()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(reader.leader_epoch_entries(), entries(&[(1, 0)]));
    writer.become_leader(4).unwrap();
    writer.append(&[record(2)]).unwrap();
    reader.refresh().unwrap();
    assert_eq!(reader.leader_epoch_entries(), entries(&[(1, 0), (4, 2)]));
    writer.truncate_to(2).unwrap();
    reader.refresh().unwrap();
    assert_eq!(reader.leader_epoch_entries(), entries(&[(1, 0)]));
}
