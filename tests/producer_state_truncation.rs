//! The segments and the producer state across truncations and moves of the log start (issue 29,
//! items 3 to 6), with the cases of Kafka's `UnifiedLogTest` that cover them:
//! - a truncation to a segment's base keeps that segment, empty, as the active one (Kafka's
//!   `LocalLog.truncateTo`);
//! - a truncation leaves a producer snapshot at its new end (Kafka's `truncateTo` rebuilds the
//!   state and takes one);
//! - a move of the log start (`delete_records_before`, retention) forgets no producer: they stay
//!   until `producer.id.expiration.ms` (KIP-360, KAFKA-7190), in the live log and in a reopened
//!   one, after a clean close or a crash;
//! - the first unstable offset is never below the log start (Kafka's
//!   `maybeIncrementFirstUnstableOffset`).
//!
//! `cargo test --all-features --test producer_state_truncation`.

#[path = "common/fenced.rs"]
#[cfg(feature = "sim")]
mod fenced_storage;

use std::path::Path;

use partlog::{BatchBuilder, Compression, ControlRecordType, Log, LogConfig, NewRecord, ReadBound};

/// Now, on the wall clock the logs run on: a producer idle for `producer.id.expiration.ms`
/// (measured from its batches' timestamps) is dropped.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// A batch of `count` records of `value_bytes` bytes each from producer `pid` (epoch 0), from
/// sequence `base_seq`; `pid` -1 makes a plain batch.
fn batch(
    pid: i64,
    base_seq: i32,
    count: usize,
    value_bytes: usize,
    transactional: bool,
) -> Vec<u8> {
    let mut builder = BatchBuilder::new(Compression::None);
    if pid >= 0 {
        builder = builder
            .producer(pid, 0, base_seq)
            .transactional(transactional);
    }
    for i in 0..count {
        let mut value = format!("p{pid}s{}", base_seq + i as i32).into_bytes();
        value.resize(value_bytes.max(value.len()), b'.');
        builder.push(&NewRecord::new(now_ms(), Some(b"k"), Some(&value)));
    }
    builder.build().unwrap()
}

/// The offsets of the producer snapshots in `dir`, ascending.
fn snapshots(dir: &Path) -> Vec<i64> {
    let mut offsets: Vec<i64> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|entry| {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            name.strip_suffix(".snapshot")?.parse().ok()
        })
        .collect();
    offsets.sort_unstable();
    offsets
}

/// The base offsets of the segments in `dir`, ascending.
fn segments(dir: &Path) -> Vec<i64> {
    let mut bases: Vec<i64> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|entry| {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            name.strip_suffix(".log")?.parse().ok()
        })
        .collect();
    bases.sort_unstable();
    bases
}

fn producer_ids(log: &Log) -> Vec<i64> {
    log.active_producers()
        .iter()
        .map(|entry| entry.producer_id)
        .collect()
}

/// 1 KiB segments: a batch of one 512-byte record fills half of one.
fn kib_segments() -> LogConfig {
    LogConfig::builder_for_tests()
        .segment_bytes(1024)
        .build()
        .unwrap()
}

/// Issue 29, item 3: with 1 KiB segments, two 512-byte appends roll at offset 1; `truncate_to(1)`
/// deleted segment 1 and left `1.snapshot` without a segment. Kafka keeps segment 1, emptied,
/// as the active segment.
#[test]
fn issue29_item3_a_truncation_to_a_segments_base_keeps_that_segment_as_the_active_one() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), kib_segments()).unwrap();
    log.append_batch(&batch(-1, 0, 1, 512, false)).unwrap();
    log.append_batch(&batch(-1, 0, 1, 512, false)).unwrap();
    assert_eq!(segments(dir.path()), [0, 1]);
    assert_eq!(snapshots(dir.path()), [1]);
    assert_eq!(log.truncate_to(1).unwrap(), 1);
    assert_eq!(segments(dir.path()), [0, 1]);
    assert_eq!(log.stats().segments, 2);
    assert_eq!(snapshots(dir.path()), [1]);
    // The next append goes to segment 1, at offset 1.
    assert_eq!(
        log.append_batch(&batch(-1, 0, 1, 10, false))
            .unwrap()
            .first_offset,
        1
    );
    assert_eq!(segments(dir.path()), [0, 1]);
    log.close().unwrap();
    drop(log);
    let log = Log::open(dir.path(), kib_segments()).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 2));
}

/// Kafka's `UnifiedLogTest.testProducerSnapshotAfterSegmentRollOnAppend`.
#[test]
fn test_producer_snapshot_after_segment_roll_on_append() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), kib_segments()).unwrap();
    log.append_batch(&batch(1, 0, 1, 512, false)).unwrap();
    // The next append overflows the segment and rolls it.
    log.append_batch(&batch(1, 1, 1, 512, false)).unwrap();
    assert_eq!(log.stats().segments, 2);
    assert_eq!(segments(dir.path()), [0, 1]);
    assert_eq!(snapshots(dir.path()).last(), Some(&1));
    // A reload from the snapshot, to check it.
    log.truncate_to(1).unwrap();
    assert_eq!(log.stats().segments, 2);
    assert_eq!(segments(dir.path()).last(), Some(&1), "the active segment");
    assert_eq!(log.log_end_offset(), 1, "the active segment is empty");
    assert_eq!(snapshots(dir.path()).last(), Some(&1));
    let entry = log.producer_state(1).unwrap();
    assert_eq!((entry.last_offset, entry.last_sequence), (0, 0));
}

/// Issue 29, item 4: append two records, roll (snapshot 2), append one, roll (snapshot 3),
/// `truncate_to(2)`, `truncate_to(1)`: no snapshot was left. A truncation leaves one at its
/// new end, unless the snapshot the state was reloaded from lies there.
#[test]
fn issue29_item4_a_truncation_leaves_a_producer_snapshot_at_its_new_end() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::builder_for_tests().build().unwrap()).unwrap();
    log.append_batch(&batch(-1, 0, 1, 10, false)).unwrap();
    log.append_batch(&batch(-1, 0, 1, 10, false)).unwrap();
    assert_eq!(log.roll().unwrap(), 2);
    log.append_batch(&batch(-1, 0, 1, 10, false)).unwrap();
    assert_eq!(log.roll().unwrap(), 3);
    assert_eq!(snapshots(dir.path()), [2, 3]);
    assert_eq!(log.truncate_to(2).unwrap(), 2);
    assert_eq!(snapshots(dir.path()), [2]);
    assert_eq!(log.truncate_to(1).unwrap(), 1);
    assert_eq!(snapshots(dir.path()), [1]);
}

/// Kafka's `UnifiedLogTest.testProducerIdMapTruncateTo` (its `takeProducerSnapshot` calls are
/// rolls here, which take the snapshot at the new segment's base).
#[test]
fn test_producer_id_map_truncate_to() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(
        dir.path(),
        LogConfig::builder_for_tests()
            .segment_bytes(2048 * 5)
            .build()
            .unwrap(),
    )
    .unwrap();
    log.append_batch(&batch(-1, 0, 1, 1, false)).unwrap();
    log.append_batch(&batch(-1, 0, 1, 1, false)).unwrap();
    log.roll().unwrap();
    log.append_batch(&batch(-1, 0, 1, 1, false)).unwrap();
    log.roll().unwrap();
    log.truncate_to(2).unwrap();
    assert_eq!(snapshots(dir.path()).last(), Some(&2));
    log.truncate_to(1).unwrap();
    assert_eq!(snapshots(dir.path()).last(), Some(&1));
    log.truncate_to(0).unwrap();
    assert_eq!(snapshots(dir.path()).last(), None);
}

/// Whether a re-send of producer `pid`'s batch of sequence `seq` (one record) is answered as a
/// duplicate at `offset`.
fn resend_is_duplicate_at(log: &Log, pid: i64, seq: i32, offset: i64) -> bool {
    let info = log.append_batch(&batch(pid, seq, 1, 10, false)).unwrap();
    info.duplicate && info.first_offset == offset
}

/// Issue 29, item 5: idempotent producer 1 writes at 0, a roll, producer 2 writes; after
/// `delete_records_before(1)` the log remembered only producer 2, and a retry of producer 1's
/// batch of sequence 0 was written again at offset 2 instead of being answered as a duplicate
/// of offset 0. Kafka keeps producers until they expire; so does retention's deletion, and a
/// reopened log remembers what the live one did.
#[test]
fn issue29_item5_a_move_of_the_log_start_forgets_no_producer() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::builder_for_tests().build().unwrap()).unwrap();
    assert_eq!(
        log.append_batch(&batch(1, 0, 1, 10, false))
            .unwrap()
            .first_offset,
        0
    );
    log.roll().unwrap();
    assert_eq!(
        log.append_batch(&batch(2, 0, 1, 10, false))
            .unwrap()
            .first_offset,
        1
    );
    log.delete_records_before(1).unwrap();
    assert_eq!(producer_ids(&log), [1, 2]);
    assert!(resend_is_duplicate_at(&log, 1, 0, 0));
    // Retention deletes segment 0, with producer 1's only batch.
    assert_eq!(log.enforce_retention().unwrap().segments_deleted(), 1);
    assert_eq!(segments(dir.path()), [1]);
    assert_eq!(producer_ids(&log), [1, 2]);
    assert!(resend_is_duplicate_at(&log, 1, 0, 0));
    // A truncation reloads the state: still both.
    log.append_batch(&batch(2, 1, 1, 10, false)).unwrap();
    assert_eq!(log.truncate_to(2).unwrap(), 2);
    assert_eq!(producer_ids(&log), [1, 2]);
    assert!(resend_is_duplicate_at(&log, 1, 0, 0));
    log.close().unwrap();
    drop(log);
    let log = Log::open(dir.path(), LogConfig::builder_for_tests().build().unwrap()).unwrap();
    assert_eq!(log.log_start_offset(), 1);
    assert_eq!(producer_ids(&log), [1, 2]);
    assert!(resend_is_duplicate_at(&log, 1, 0, 0));
    // The next batch of producer 1 follows its sequence.
    assert!(
        !log.append_batch(&batch(1, 1, 1, 10, false))
            .unwrap()
            .duplicate
    );
}

/// Kafka's `UnifiedLogTest.testProducerIdExpirationOnSegmentDeletion`: each batch fills a
/// segment (of at least 1 KiB, partlog's floor), and retention by size deletes producer 1's;
/// its state stays.
#[test]
fn test_producer_id_expiration_on_segment_deletion() {
    let dir = tempfile::tempdir().unwrap();
    let records = batch(1, 0, 1, 1100, false);
    let size = records.len();
    let log = Log::open(
        dir.path(),
        LogConfig::builder_for_tests()
            .segment_bytes(u32::try_from(size).unwrap())
            .retention_bytes(i64::try_from(size * 2).unwrap())
            .build()
            .unwrap(),
    )
    .unwrap();
    log.append_batch(&records).unwrap();
    log.append_batch(&batch(2, 0, 1, 1100, false)).unwrap();
    log.append_batch(&batch(2, 1, 1, 1100, false)).unwrap();
    assert_eq!(log.stats().segments, 3);
    assert_eq!(producer_ids(&log), [1, 2]);
    log.enforce_retention().unwrap();
    // Producer state is not removed with the segment.
    assert_eq!(log.stats().segments, 2);
    assert_eq!(producer_ids(&log), [1, 2]);
}

/// Issue 29, item 6: an open transaction at 0 and `delete_records_before(5)` gave a first
/// unstable offset of 0; Kafka's is 5, the log start.
#[test]
fn issue29_item6_the_first_unstable_offset_is_never_below_the_log_start() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig::builder_for_tests().build().unwrap();
    let log = Log::open(dir.path(), config.clone()).unwrap();
    log.append_batch(&batch(7, 0, 3, 10, true)).unwrap();
    log.append_batch(&batch(-1, 0, 4, 10, false)).unwrap();
    assert_eq!(log.first_unstable_offset(), Some(0));
    log.delete_records_before(5).unwrap();
    assert_eq!(log.first_unstable_offset(), Some(5));
    assert_eq!(log.last_stable_offset(), 5);
    log.close().unwrap();
    drop(log);
    let log = Log::open(dir.path(), config).unwrap();
    assert_eq!(log.first_unstable_offset(), Some(5));
    log.append_marker(7, 0, ControlRecordType::Commit, 0)
        .unwrap();
    assert_eq!(log.first_unstable_offset(), None);
    assert_eq!(log.last_stable_offset(), log.log_end_offset());
    let committed = log.committed_records(5, ReadBound::LogEnd).count();
    assert_eq!(committed, 2);
}

/// Issue 29, item 5, after a crash: the reopened log remembers the producers the live one
/// remembered, though their data lies below the log start or went with a deleted segment.
/// Each case crashes, losing everything unsynced, once the operations have returned (so that
/// what they promised durable is on disk), and compares the producers and a re-send of each
/// one's last batch with what the live log answered.
#[cfg(feature = "sim")]
#[test]
fn issue29_item5_a_crash_reopens_with_the_producers_the_live_log_remembered() {
    use partlog::unstable::SimStorage;
    use partlog::unstable::sim::CrashConfig;
    use std::sync::Arc;

    /// Each case's operations after producer 1 wrote at 0 and producer 2 at 1.
    type Case = (&'static str, fn(&Log));
    let cases: [Case; 4] = [
        ("start moved within a segment", |log| {
            log.delete_records_before(1).unwrap();
        }),
        ("segment 0 deleted after a roll", |log| {
            log.roll().unwrap();
            log.append_batch(&batch(2, 1, 1, 10, false)).unwrap();
            log.delete_records_before(2).unwrap();
            log.enforce_retention().unwrap();
        }),
        ("everything deleted, the active segment rolled", |log| {
            log.delete_records_before(2).unwrap();
            log.enforce_retention().unwrap();
        }),
        ("start moved, then a truncation", |log| {
            log.roll().unwrap();
            log.append_batch(&batch(2, 1, 1, 10, false)).unwrap();
            log.delete_records_before(2).unwrap();
            log.enforce_retention().unwrap();
            log.append_batch(&batch(2, 2, 1, 10, false)).unwrap();
            log.truncate_to(3).unwrap();
        }),
    ];
    for (seed, (name, operations)) in (0u64..).zip(cases) {
        let sim = SimStorage::new(seed);
        let dir = Path::new("/logs/producers-0");
        let config = LogConfig::builder_for_tests()
            .storage(Arc::new(sim.clone()))
            .build()
            .unwrap();
        let log = Log::open(dir, fenced_storage::fenced_config(config.clone(), &sim)).unwrap();
        log.append_batch(&batch(1, 0, 1, 10, false)).unwrap();
        log.append_batch(&batch(2, 0, 1, 10, false)).unwrap();
        operations(&log);
        log.sync().unwrap();
        let live = log.active_producers();
        assert_eq!(producer_ids(&log), [1, 2], "{name}");
        sim.crash_with(&CrashConfig::lose_unsynced());
        drop(log);
        let log = Log::open(dir, config).unwrap();
        let reopened = log.active_producers();
        assert_eq!(
            reopened
                .iter()
                .map(|e| (e.producer_id, e.last_sequence, e.last_offset))
                .collect::<Vec<_>>(),
            live.iter()
                .map(|e| (e.producer_id, e.last_sequence, e.last_offset))
                .collect::<Vec<_>>(),
            "{name}"
        );
        for entry in &live {
            let seq = entry.last_sequence;
            assert!(
                resend_is_duplicate_at(&log, entry.producer_id, seq, entry.last_offset),
                "{name}: producer {}'s batch {seq} at {}",
                entry.producer_id,
                entry.last_offset
            );
        }
    }
}
