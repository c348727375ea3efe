//! The producer state through `Log` (ARCHITECTURE.md §9): idempotent re-sends, transaction
//! markers and the `.txnindex`, the last stable offset, `read_committed` reads, snapshots at roll
//! and close, and the replay that rebuilds the state at open and after a truncation.
//!
//! The manager's own rules (Kafka's `ProducerStateManagerTest`) are tested in
//! `src/log/txn/producer_state/tests/`; the files, in `src/log/files/producer_snapshot/tests.rs`
//! and `src/segment/txn_index/tests.rs`. Here each test goes through the log's calls.

use std::path::{Path, PathBuf};

use partlog::{
    AbortedTxn, BatchBuilder, Compression, ControlRecordType, Error, Isolation, Log, LogConfig,
    NewRecord, ReadBound, ReadOptions,
};

/// Now, on the wall clock the logs run on: a producer idle for `producer.id.expiration.ms`
/// (measured from its batches' timestamps, as in Kafka) is dropped at load.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn config() -> LogConfig {
    LogConfig::builder_for_tests().build().unwrap()
}

fn small_segments() -> LogConfig {
    LogConfig::builder_for_tests()
        .segment_bytes(1024)
        .build()
        .unwrap()
}

/// A batch of `count` records from producer `pid` at `epoch`, from sequence `base_seq`.
fn batch(pid: i64, epoch: i16, base_seq: i32, count: usize, transactional: bool) -> Vec<u8> {
    let mut builder = BatchBuilder::new(Compression::None)
        .producer(pid, epoch, base_seq)
        .transactional(transactional);
    for i in 0..count {
        let value = format!("p{pid}e{epoch}s{}", base_seq + i as i32);
        builder.push(&NewRecord::new(
            now_ms(),
            Some(b"k"),
            Some(value.as_bytes()),
        ));
    }
    builder.build().unwrap()
}

fn plain(log: &Log, value: &str) -> i64 {
    log.append(&[NewRecord::new(now_ms(), Some(b"k"), Some(value.as_bytes()))])
        .unwrap()
        .first_offset
}

fn values(records: impl Iterator<Item = partlog::Result<partlog::LogRecord>>) -> Vec<String> {
    records
        .map(|r| String::from_utf8(r.unwrap().value.unwrap()).unwrap())
        .collect()
}

fn committed_values(log: &Log) -> Vec<String> {
    values(log.committed_records(log.log_start_offset(), ReadBound::LogEnd))
}

fn files_with_suffix(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    files.sort();
    files
}

#[test]
fn producer_state_a_resent_batch_is_a_duplicate_with_the_original_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config()).unwrap();
    plain(&log, "before");
    let first = log.append_batch(&batch(7, 0, 0, 3, false)).unwrap();
    let second = log.append_batch(&batch(7, 0, 3, 2, false)).unwrap();
    assert_eq!((first.first_offset, first.last_offset), (1, 3));
    assert!(!first.duplicate);
    let end = log.log_end_offset();
    let again = log.append_batch(&batch(7, 0, 0, 3, false)).unwrap();
    assert!(again.duplicate);
    assert_eq!((again.first_offset, again.last_offset), (1, 3));
    let again = log.append_batch(&batch(7, 0, 3, 2, false)).unwrap();
    assert_eq!(
        (again.first_offset, again.last_offset),
        (second.first_offset, second.last_offset)
    );
    assert_eq!(log.log_end_offset(), end, "a duplicate writes nothing");
    let state = log.producer_state(7).unwrap();
    assert_eq!((state.producer_epoch, state.last_sequence), (0, 4));
    assert_eq!(state.last_offset, 5);
}

#[test]
fn producer_state_sequence_and_epoch_errors_carry_kafka_codes() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config()).unwrap();
    log.append_batch(&batch(1, 3, 0, 2, false)).unwrap();
    let gap = log.append_batch(&batch(1, 3, 5, 1, false)).unwrap_err();
    assert!(matches!(gap, Error::OutOfOrderSequence { .. }), "{gap}");
    assert_eq!(gap.kafka_code(), Some(45));
    let old = log.append_batch(&batch(1, 2, 2, 1, false)).unwrap_err();
    assert!(matches!(old, Error::InvalidProducerEpoch { .. }), "{old}");
    assert_eq!(old.kafka_code(), Some(47));
    // A new epoch starts at sequence 0.
    log.append_batch(&batch(1, 4, 0, 1, false)).unwrap();
    assert_eq!(log.log_end_offset(), 3, "refused batches wrote nothing");
}

/// `testDuplicateAppends` through the log: the last 5 batches are recognised, older ones are
/// out of order, and a partial overlap is out of order.
#[test]
fn producer_state_duplicate_appends_within_the_last_five_batches() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config()).unwrap();
    let mut offsets = Vec::new();
    for seq in 0..6 {
        offsets.push(log.append_batch(&batch(1, 0, seq, 1, false)).unwrap());
    }
    let multi = log.append_batch(&batch(1, 0, 6, 3, false)).unwrap();
    let resent = log.append_batch(&batch(1, 0, 6, 3, false)).unwrap();
    assert!(resent.duplicate);
    assert_eq!(resent.first_offset, multi.first_offset);
    let partial = log.append_batch(&batch(1, 0, 7, 2, false)).unwrap_err();
    assert!(matches!(partial, Error::OutOfOrderSequence { .. }));
    let recent = log.append_batch(&batch(1, 0, 2, 1, false)).unwrap();
    assert!(recent.duplicate);
    assert_eq!(recent.first_offset, offsets[2].first_offset);
    let too_old = log.append_batch(&batch(1, 0, 1, 1, false)).unwrap_err();
    assert!(matches!(too_old, Error::OutOfOrderSequence { .. }));
}

#[test]
fn read_committed_skips_aborted_data_and_stops_at_the_lso() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config()).unwrap();
    plain(&log, "a");
    log.append_batch(&batch(1, 0, 0, 2, true)).unwrap(); // 1-2, committed later
    log.append_batch(&batch(2, 0, 0, 2, true)).unwrap(); // 3-4, aborted later
    plain(&log, "b"); // 5
    assert_eq!(log.first_unstable_offset(), Some(1));
    assert_eq!(log.last_stable_offset(), 1);
    assert_eq!(committed_values(&log), ["a"]);
    let abort = log
        .append_marker(2, 0, ControlRecordType::Abort, 0)
        .unwrap(); // 6
    assert_eq!(abort.first_offset, 6);
    assert_eq!(
        log.last_stable_offset(),
        1,
        "pid 1's transaction is still open"
    );
    log.append_marker(1, 0, ControlRecordType::Commit, 0)
        .unwrap(); // 7
    plain(&log, "c"); // 8
    assert_eq!(log.first_unstable_offset(), None);
    assert_eq!(log.last_stable_offset(), 9);
    assert_eq!(committed_values(&log), ["a", "p1e0s0", "p1e0s1", "b", "c"]);
    // The uncommitted view still has everything but the markers.
    assert_eq!(values(log.records(0, ReadBound::LogEnd)).len(), 7);
    let fetch = log
        .read_with(
            0,
            1 << 20,
            ReadOptions::default().isolation(Isolation::ReadCommitted),
        )
        .unwrap();
    assert_eq!(fetch.last_stable_offset(), 9);
    let aborted: Vec<(i64, i64)> = fetch
        .aborted_transactions()
        .iter()
        .map(|t| (t.producer_id, t.first_offset))
        .collect();
    assert_eq!(aborted, [(2, 3)]);
    let entry: &AbortedTxn = &fetch.aborted_transactions()[0];
    // The other open transaction (pid 1, from 1) bounded the LSO when the abort was written.
    assert_eq!((entry.last_offset, entry.last_stable_offset), (6, 1));
    // A read_uncommitted read lists none.
    let fetch = log.read(0, 1 << 20, ReadBound::LogEnd).unwrap();
    assert!(fetch.aborted_transactions().is_empty());
}

#[test]
fn read_committed_an_aborted_transaction_spanning_segments_is_listed_once() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_segments()).unwrap();
    let mut seq = 0;
    while log.stats().segments < 3 {
        log.append_batch(&batch(137, 0, seq, 4, true)).unwrap();
        seq += 4;
    }
    log.append_marker(137, 0, ControlRecordType::Abort, 0)
        .unwrap();
    plain(&log, "after");
    let fetch = log
        .read_with(
            0,
            64,
            ReadOptions::default().isolation(Isolation::ReadCommitted),
        )
        .unwrap();
    let aborted: Vec<(i64, i64)> = fetch
        .aborted_transactions()
        .iter()
        .map(|t| (t.producer_id, t.first_offset))
        .collect();
    assert_eq!(aborted, [(137, 0)]);
    assert_eq!(committed_values(&log), ["after"]);
}

#[test]
fn producer_state_survives_a_clean_reopen_from_its_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = Log::open(dir.path(), config()).unwrap();
        log.append_batch(&batch(9, 1, 0, 2, false)).unwrap();
        log.append_batch(&batch(9, 1, 2, 2, false)).unwrap();
        log.append_batch(&batch(4, 0, 0, 1, true)).unwrap();
        log.close().unwrap();
    }
    let snapshots = files_with_suffix(dir.path(), ".snapshot");
    assert_eq!(
        snapshots.last().unwrap().file_name().unwrap(),
        "00000000000000000005.snapshot"
    );
    let log = Log::open(dir.path(), config()).unwrap();
    assert!(log.recovery_report().clean_shutdown);
    // The newest batch of each producer is recognised after the load; the older ones are not
    // (a snapshot holds one batch per producer).
    let again = log.append_batch(&batch(9, 1, 2, 2, false)).unwrap();
    assert!(again.duplicate);
    assert_eq!(again.first_offset, 2);
    let older = log.append_batch(&batch(9, 1, 0, 2, false)).unwrap_err();
    assert!(matches!(older, Error::OutOfOrderSequence { .. }));
    // The open transaction of pid 4 holds the LSO back after the reopen.
    assert_eq!(log.first_unstable_offset(), Some(4));
    assert_eq!(log.last_stable_offset(), 4);
}

#[test]
fn producer_state_and_txn_index_are_rebuilt_by_an_unclean_open() {
    let dir = tempfile::tempdir().unwrap();
    let expected_index;
    {
        let log = Log::open(dir.path(), small_segments()).unwrap();
        let mut seq = [0i32; 3];
        for round in 0..12 {
            let pid = (round % 3) as i64;
            log.append_batch(&batch(pid, 0, seq[pid as usize], 3, true))
                .unwrap();
            seq[pid as usize] += 3;
            if round % 4 == 3 {
                let marker = if round % 8 == 3 {
                    ControlRecordType::Abort
                } else {
                    ControlRecordType::Commit
                };
                log.append_marker(pid, 0, marker, 0).unwrap();
            }
        }
        log.append_marker(0, 0, ControlRecordType::Abort, 0)
            .unwrap();
        log.append_marker(1, 0, ControlRecordType::Abort, 0)
            .unwrap();
        expected_index = (
            committed_values(&log),
            log.active_producers(),
            log.last_stable_offset(),
        );
        log.close().unwrap();
    }
    let txn_indexes = files_with_suffix(dir.path(), ".txnindex");
    assert!(!txn_indexes.is_empty());
    let index_bytes: Vec<Vec<u8>> = txn_indexes
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    // An unclean open without snapshots and without `.txnindex` files: the checkpoint goes
    // (nothing says the shutdown was clean) and so do the derived files.
    std::fs::remove_file(dir.path().join("partlog.checkpoint")).unwrap();
    for path in files_with_suffix(dir.path(), ".snapshot")
        .iter()
        .chain(&txn_indexes)
    {
        std::fs::remove_file(path).unwrap();
    }
    let log = Log::open(dir.path(), small_segments()).unwrap();
    assert!(!log.recovery_report().clean_shutdown);
    let rebuilt: Vec<Vec<u8>> = txn_indexes
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    assert_eq!(
        rebuilt, index_bytes,
        "the .txnindex files are rebuilt byte for byte"
    );
    assert_eq!(
        (
            committed_values(&log),
            log.active_producers(),
            log.last_stable_offset()
        ),
        expected_index
    );
}

/// A batch of `count` records of 1 KiB values: 16 or more make a batch that the replay after an
/// unclean open walks past by reading only the next header.
fn kib_batch(pid: i64, base_seq: i32, count: usize, transactional: bool) -> Vec<u8> {
    let mut builder = BatchBuilder::new(Compression::None)
        .producer(pid, 0, base_seq)
        .transactional(transactional);
    let value = vec![b'v'; 1024];
    for _ in 0..count {
        builder.push(&NewRecord::new(now_ms(), Some(b"k"), Some(&value)));
    }
    builder.build().unwrap()
}

/// The replay after an unclean open reads only the batch headers of what recovery's scan has
/// just checked (a marker whole): large batches, read one header at a time, and small ones,
/// read by the window, with markers and plain batches among them, rebuild the state, the LSO
/// and the `.txnindex` exactly.
#[test]
fn producer_state_unclean_open_replays_large_and_small_batches_from_their_headers() {
    let dir = tempfile::tempdir().unwrap();
    let expected;
    {
        let log = Log::open(dir.path(), config()).unwrap();
        let mut seq = [0i32; 3];
        for round in 0..40 {
            let pid = round % 3;
            let count = if round % 4 < 2 { 40 } else { 1 };
            log.append_batch(&kib_batch(pid as i64, seq[pid], count, pid != 0))
                .unwrap();
            seq[pid] += count as i32;
            if round % 5 == 4 {
                plain(&log, "plain");
            }
            if pid != 0 && round % 7 >= 5 {
                let marker = if round % 2 == 0 {
                    ControlRecordType::Abort
                } else {
                    ControlRecordType::Commit
                };
                log.append_marker(pid as i64, 0, marker, 0).unwrap();
            }
        }
        // Producer 2's last transaction stays open: the LSO stops at its first offset.
        log.append_marker(1, 0, ControlRecordType::Abort, 0)
            .unwrap();
        assert!(log.first_unstable_offset().is_some());
        expected = (
            committed_values(&log),
            log.active_producers(),
            log.last_stable_offset(),
        );
        log.close().unwrap();
    }
    let txn_index = dir.path().join("00000000000000000000.txnindex");
    let index_bytes = std::fs::read(&txn_index).unwrap();
    assert!(
        index_bytes.len() >= 2 * 34,
        "at least two aborted transactions"
    );
    std::fs::remove_file(dir.path().join("partlog.checkpoint")).unwrap();
    for path in files_with_suffix(dir.path(), ".snapshot") {
        std::fs::remove_file(path).unwrap();
    }
    std::fs::remove_file(&txn_index).unwrap();
    let log = Log::open(dir.path(), config()).unwrap();
    assert!(!log.recovery_report().clean_shutdown);
    assert_eq!(std::fs::read(&txn_index).unwrap(), index_bytes);
    assert_eq!(
        (
            committed_values(&log),
            log.active_producers(),
            log.last_stable_offset()
        ),
        expected
    );
    // Each producer's newest batches are recognised again as duplicates.
    let resent = log
        .append_batch(&kib_batch(0, seq_of_last(&log, 0), 1, false))
        .unwrap();
    assert!(resent.duplicate);
}

/// The first sequence of producer `pid`'s newest batch, from its state.
fn seq_of_last(log: &Log, pid: i64) -> i32 {
    let state = log.producer_state(pid).unwrap();
    state.last_sequence
}

#[test]
fn producer_state_is_rebuilt_after_a_truncation() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_segments()).unwrap();
    let mut seq = 0;
    for _ in 0..40 {
        log.append_batch(&batch(5, 0, seq, 2, false)).unwrap();
        seq += 2;
    }
    assert!(log.stats().segments > 2);
    let end = log.truncate_to(20).unwrap();
    assert_eq!(end, 20);
    // The producer is back at the batch ending at 19 (sequence 19): sequence 20 follows.
    let state = log.producer_state(5).unwrap();
    assert_eq!((state.last_sequence, state.last_offset), (19, 19));
    let next = log.append_batch(&batch(5, 0, 20, 2, false)).unwrap();
    assert_eq!(next.first_offset, 20);
    assert!(!next.duplicate);
    // No snapshot above the new end survives the truncation.
    for path in files_with_suffix(dir.path(), ".snapshot") {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let offset: i64 = name.trim_end_matches(".snapshot").parse().unwrap();
        assert!(offset <= 22, "{name} outlived the truncation");
    }
}

#[test]
fn read_committed_truncation_takes_back_an_abort_and_its_index_entry() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config()).unwrap();
    log.append_batch(&batch(3, 0, 0, 2, true)).unwrap(); // 0-1
    let abort = log
        .append_marker(3, 0, ControlRecordType::Abort, 0)
        .unwrap(); // 2
    assert_eq!(committed_values(&log), Vec::<String>::new());
    log.truncate_to(abort.first_offset).unwrap();
    // The transaction is open again: nothing is stable from 0.
    assert_eq!(log.first_unstable_offset(), Some(0));
    log.append_marker(3, 0, ControlRecordType::Commit, 0)
        .unwrap();
    assert_eq!(committed_values(&log), ["p3e0s0", "p3e0s1"]);
}

#[test]
fn append_marker_refuses_bad_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config()).unwrap();
    assert!(matches!(
        log.append_marker(-1, 0, ControlRecordType::Commit, 0),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(matches!(
        log.append_marker(1, 0, ControlRecordType::LeaderChange, 0),
        Err(Error::InvalidArgument { .. })
    ));
    // A marker for a producer without an open transaction is written and ends nothing.
    let info = log
        .append_marker(1, 0, ControlRecordType::Commit, 0)
        .unwrap();
    assert_eq!(info.first_offset, 0);
    assert_eq!(log.first_unstable_offset(), None);
    // Coordinator fencing.
    log.append_marker(1, 0, ControlRecordType::Commit, 2)
        .unwrap();
    let fenced = log
        .append_marker(1, 0, ControlRecordType::Commit, 1)
        .unwrap_err();
    assert!(
        matches!(fenced, Error::TransactionCoordinatorFenced { .. }),
        "{fenced}"
    );
    assert_eq!(fenced.kafka_code(), Some(52));
}

/// A roll writes its producer snapshot to a temporary file without an fsync (under the writer
/// lock, as Kafka's roll does); the next sync fsyncs it and renames it into place before the
/// directory fsync, so that once the log says its data is durable, every roll's snapshot is too,
/// whole and under a durable name, and no temporary file is left.
#[cfg(feature = "sim")]
#[test]
fn producer_state_roll_snapshots_are_durable_after_the_next_sync() {
    use partlog::unstable::{SimStorage, Storage};
    use std::sync::Arc;

    let sim = SimStorage::new(14);
    let dir = Path::new("/data/topic-0");
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let config = LogConfig::builder_for_tests()
        .segment_bytes(1024)
        .storage(storage)
        .build()
        .unwrap();
    let log = Log::open(dir, config).unwrap();
    let mut seq = 0;
    while log.stats().segments < 4 {
        log.append_batch(&batch(3, 0, seq, 4, false)).unwrap();
        seq += 4;
    }
    log.sync().unwrap();
    let snapshots: Vec<_> = sim
        .snapshot()
        .files
        .into_keys()
        .filter(|path| path.to_string_lossy().ends_with(".snapshot"))
        .collect();
    assert_eq!(snapshots.len(), 3, "one snapshot a roll: {snapshots:?}");
    let temporary: Vec<_> = sim
        .snapshot()
        .files
        .into_keys()
        .filter(|path| path.to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(temporary.is_empty(), "{temporary:?}");
    for path in &snapshots {
        let state = sim.file_state(path).unwrap();
        assert!(!state.current.is_empty());
        assert_eq!(state.synced, state.current, "{} is synced", path.display());
        assert!(state.name_durable, "{} has a durable name", path.display());
    }
}

/// Kafka's rule for a `.txnindex` that fails its sanity check (entries out of order here): a
/// writable open rebuilds it from the log, exactly; a read-only open reports it.
#[test]
fn txn_index_failing_its_sanity_check_is_rebuilt_by_a_writable_open() {
    let dir = tempfile::tempdir().unwrap();
    let committed_before;
    {
        let log = Log::open(dir.path(), config()).unwrap();
        log.append_batch(&batch(1, 0, 0, 2, true)).unwrap();
        log.append_marker(1, 0, ControlRecordType::Abort, 0)
            .unwrap();
        log.append_batch(&batch(2, 0, 0, 2, true)).unwrap();
        log.append_marker(2, 0, ControlRecordType::Abort, 0)
            .unwrap();
        plain(&log, "kept");
        log.roll().unwrap();
        plain(&log, "after the roll");
        committed_before = committed_values(&log);
        log.close().unwrap();
    }
    let index = files_with_suffix(dir.path(), ".txnindex");
    assert_eq!(index.len(), 1);
    let good = std::fs::read(&index[0]).unwrap();
    assert_eq!(good.len(), 2 * 34);
    // The second entry first: lastOffsets 5 then 2, out of order.
    let mut swapped = good[34..].to_vec();
    swapped.extend_from_slice(&good[..34]);
    std::fs::write(&index[0], &swapped).unwrap();

    let read_only = Log::open_read_only(dir.path(), config());
    assert!(
        matches!(read_only, Err(Error::Corrupt { ref file, .. }) if file == &index[0]),
        "{read_only:?}"
    );
    let log = Log::open(dir.path(), config()).unwrap();
    assert_eq!(std::fs::read(&index[0]).unwrap(), good);
    assert_eq!(committed_values(&log), committed_before);
}

/// A read-only log that follows a live writer follows its producer state too: a transaction
/// the writer opens holds the reader's LSO back, and the reader skips its data once the writer
/// aborts it, whether or not the reader has seen the `.txnindex` entry yet.
#[test]
fn read_committed_a_live_reader_follows_the_writers_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let writer = Log::open(dir.path(), config()).unwrap();
    plain(&writer, "before");
    let reader = Log::open_read_only(
        dir.path(),
        LogConfig::builder_for_tests()
            .allow_live_writer(true)
            .poll_interval(std::time::Duration::from_millis(1))
            .build()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(committed_values(&reader), ["before"]);
    writer.append_batch(&batch(8, 0, 0, 2, true)).unwrap(); // 1-2
    plain(&writer, "during"); // 3
    reader.refresh().unwrap();
    assert_eq!(reader.log_end_offset(), 4);
    assert_eq!(reader.first_unstable_offset(), Some(1));
    assert_eq!(committed_values(&reader), ["before"]);
    writer
        .append_marker(8, 0, ControlRecordType::Abort, 0)
        .unwrap(); // 4
    plain(&writer, "after"); // 5
    reader.refresh().unwrap();
    assert_eq!(reader.first_unstable_offset(), None);
    assert_eq!(reader.last_stable_offset(), 6);
    assert_eq!(committed_values(&reader), ["before", "during", "after"]);
    // A new transaction after a truncation by the writer.
    writer.truncate_to(4).unwrap();
    writer
        .append_marker(8, 0, ControlRecordType::Commit, 0)
        .unwrap(); // 4
    reader.refresh().unwrap();
    assert_eq!(
        committed_values(&reader),
        ["before", "p8e0s0", "p8e0s1", "during"]
    );
}

/// `commit_transaction` and `abort_transaction`, the short forms of `append_marker` for a log
/// without a coordinator: they end the transaction as `append_marker` does, and are never fenced
/// by a coordinator epoch the log saw before, nor lower it (a later coordinator marker below it
/// is still fenced).
#[test]
fn issue32_item7_commit_and_abort_transaction_need_no_coordinator_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config()).unwrap();

    // A producer the log has never seen.
    log.append_batch(&batch(3, 0, 0, 2, true)).unwrap();
    let commit = log.commit_transaction(3, 0).unwrap();
    assert_eq!(commit.first_offset, 2);
    assert_eq!(committed_values(&log), ["p3e0s0", "p3e0s1"]);

    // After a coordinator wrote at epoch 5, the short form is not fenced...
    log.append_batch(&batch(3, 0, 2, 1, true)).unwrap();
    log.append_marker(3, 0, ControlRecordType::Commit, 5)
        .unwrap();
    log.append_batch(&batch(3, 0, 3, 1, true)).unwrap();
    log.abort_transaction(3, 0).unwrap();
    assert_eq!(committed_values(&log), ["p3e0s0", "p3e0s1", "p3e0s2"]);
    assert_eq!(log.first_unstable_offset(), None);
    // ... and kept epoch 5: a stale coordinator is still fenced.
    let fenced = log
        .append_marker(3, 0, ControlRecordType::Commit, 4)
        .unwrap_err();
    assert!(
        matches!(fenced, Error::TransactionCoordinatorFenced { .. }),
        "{fenced}"
    );
    // The producer-epoch check is append_marker's.
    log.append_batch(&batch(3, 1, 0, 1, true)).unwrap();
    assert!(matches!(
        log.commit_transaction(3, 0),
        Err(Error::InvalidProducerEpoch { .. })
    ));
    assert!(matches!(
        log.abort_transaction(-1, 0),
        Err(Error::InvalidArgument { .. })
    ));
}
