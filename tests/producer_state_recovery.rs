//! Recovery of the producer state and the `.txnindex` (ARCHITECTURE.md §9), as Kafka's
//! `LogSegmentTest` and `LogLoaderTest` check it: an unclean open rebuilds the aborted
//! transactions exactly, whatever derived file is missing; a bad snapshot (torn, corrupt,
//! empty, or above the log end) is deleted and an older one used, never trusted; and a snapshot
//! a truncation deleted never comes back after a crash to answer for data written since.

use std::path::{Path, PathBuf};

use partlog::unstable::producer_snapshot::{
    SnapshotEntry, decode_snapshot, encode_snapshot, snapshot_file_name,
};
use partlog::{
    AbortedTxn, BatchBuilder, Compression, ControlRecordType, Isolation, Log, LogConfig, NewRecord,
    ReadBound, ReadOptions,
};

/// Now, on the wall clock the logs run on (producers idle for `producer.id.expiration.ms` are
/// dropped at load, measured from their batches' timestamps).
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

/// A batch of `count` records from producer `pid` (epoch 0) from sequence `base_seq`.
fn batch(pid: i64, base_seq: i32, count: usize, transactional: bool) -> Vec<u8> {
    let mut builder = BatchBuilder::new(Compression::None)
        .producer(pid, 0, base_seq)
        .transactional(transactional);
    for i in 0..count {
        let value = format!("p{pid}s{}", base_seq + i as i32);
        builder.push(&NewRecord::new(
            now_ms(),
            Some(b"k"),
            Some(value.as_bytes()),
        ));
    }
    builder.build().unwrap()
}

fn plain_batch(count: usize) -> Vec<u8> {
    let mut builder = BatchBuilder::new(Compression::None);
    for i in 0..count {
        builder.push(&NewRecord::new(
            now_ms(),
            Some(b"k"),
            Some(format!("plain{i}").as_bytes()),
        ));
    }
    builder.build().unwrap()
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

/// The entries of a `.txnindex` file, decoded from its bytes.
fn txn_index_entries(path: &Path) -> Vec<AbortedTxn> {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(bytes.len() % AbortedTxn::SIZE, 0, "{}", path.display());
    bytes
        .chunks_exact(AbortedTxn::SIZE)
        .map(|chunk| AbortedTxn::from_bytes(chunk.try_into().unwrap()).unwrap())
        .collect()
}

/// Forgets that the last shutdown was clean: the next open recovers.
fn make_unclean(dir: &Path) {
    std::fs::remove_file(dir.join("partlog.checkpoint")).unwrap();
}

/// Every aborted transaction `read_committed` reads list over the whole log, each once.
fn aborted_list(log: &Log) -> Vec<(i64, i64, i64, i64)> {
    let mut listed = Vec::new();
    let mut at = log.log_start_offset();
    let options = ReadOptions::default().isolation(Isolation::ReadCommitted);
    while at < log.last_stable_offset() {
        let fetch = log.read_with(at, 1 << 20, options).unwrap();
        if fetch.is_empty() {
            break;
        }
        for t in fetch.aborted_transactions() {
            let entry = (
                t.producer_id,
                t.first_offset,
                t.last_offset,
                t.last_stable_offset,
            );
            if !listed.contains(&entry) {
                listed.push(entry);
            }
        }
        at = fetch.next_offset();
    }
    listed
}

/// A log whose first segment begins at 100, as Kafka's `LogSegmentTest` makes one.
fn log_at_100(dir: &Path) -> Log {
    std::fs::write(dir.join("00000000000000000100.log"), b"").unwrap();
    let log = Log::open(dir, config()).unwrap();
    assert_eq!(log.log_end_offset(), 100);
    log
}

/// Kafka's `LogSegmentTest` layout: pid1@100–101, pid2@102–103, plain@104–105, ABORT(pid2)@106,
/// COMMIT(pid1)@107.
fn write_segment_test_layout(log: &Log) {
    assert_eq!(
        log.append_batch(&batch(1, 0, 2, true))
            .unwrap()
            .first_offset,
        100
    );
    assert_eq!(
        log.append_batch(&batch(2, 0, 2, true))
            .unwrap()
            .first_offset,
        102
    );
    assert_eq!(log.append_batch(&plain_batch(2)).unwrap().first_offset, 104);
    let abort = log
        .append_marker(2, 0, ControlRecordType::Abort, 0)
        .unwrap();
    assert_eq!(abort.first_offset, 106);
    let commit = log
        .append_marker(1, 0, ControlRecordType::Commit, 0)
        .unwrap();
    assert_eq!(commit.first_offset, 107);
}

/// Kafka's `LogSegmentTest.testRecoveryRebuildsTransactionIndex` (first half): recovery of the
/// segment without any state rebuilds the map to 108 and the one aborted transaction, whose
/// last stable offset is pid 1's transaction still open at the abort.
#[test]
fn producer_state_segment_recovery_with_transactions_rebuilds_the_txn_index() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = log_at_100(dir.path());
        write_segment_test_layout(&log);
        log.close().unwrap();
    }
    let index = dir.path().join("00000000000000000100.txnindex");
    let expected = [AbortedTxn {
        producer_id: 2,
        first_offset: 102,
        last_offset: 106,
        last_stable_offset: 100,
    }];
    assert_eq!(txn_index_entries(&index), expected);
    make_unclean(dir.path());
    for path in files_with_suffix(dir.path(), ".snapshot") {
        std::fs::remove_file(path).unwrap();
    }
    std::fs::remove_file(&index).unwrap();
    let log = Log::open(dir.path(), config()).unwrap();
    assert!(!log.recovery_report().clean_shutdown);
    assert_eq!(log.log_end_offset(), 108);
    assert_eq!(txn_index_entries(&index), expected);
    // The state is mapped to 108: both transactions are over, and each producer's batch is known.
    assert_eq!(log.first_unstable_offset(), None);
    assert_eq!(log.last_stable_offset(), 108);
    for (pid, last_offset) in [(1, 101), (2, 103)] {
        let state = log.producer_state(pid).unwrap();
        assert_eq!((state.last_offset, state.last_sequence), (last_offset, 1));
        assert_eq!(state.current_txn_first_offset, None);
    }
    assert_eq!(aborted_list(&log), [(2, 102, 106, 100)]);
}

/// `testRecoveryRebuildsTransactionIndex` (second half): pid 2's transaction began at 75, in
/// the segment before: the rebuilt entry of the segment at 100 begins there, whether the state
/// at 100 comes from the snapshot written at the roll or from a replay of the first segment.
#[test]
fn producer_state_segment_recovery_keeps_a_transaction_begun_in_an_earlier_segment() {
    for keep_roll_snapshot in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let config = || {
            LogConfig::builder_for_tests()
                .segment_ms(60_000)
                .build()
                .unwrap()
        };
        {
            let log = Log::open(dir.path(), config()).unwrap();
            // Records two minutes old, so that the first batch with the clock's time rolls.
            let old = now_ms() - 120_000;
            let plain = |count: usize| {
                let records: Vec<NewRecord> = (0..count)
                    .map(|_| NewRecord::new(old, Some(b"k"), Some(b"plain")))
                    .collect();
                log.append(&records).unwrap()
            };
            plain(75);
            let mut txn = BatchBuilder::new(Compression::None)
                .producer(2, 0, 0)
                .transactional(true);
            txn.push(&NewRecord::new(old, Some(b"k"), Some(b"p2s0")));
            assert_eq!(
                log.append_batch(&txn.build().unwrap())
                    .unwrap()
                    .first_offset,
                75
            );
            plain(24);
            assert_eq!(
                log.append_batch(&batch(1, 0, 2, true))
                    .unwrap()
                    .first_offset,
                100
            );
            assert_eq!(log.stats().segments, 2, "the roll at 100");
            assert_eq!(
                log.append_batch(&batch(2, 1, 2, true))
                    .unwrap()
                    .first_offset,
                102
            );
            assert_eq!(log.append_batch(&plain_batch(2)).unwrap().first_offset, 104);
            log.append_marker(2, 0, ControlRecordType::Abort, 0)
                .unwrap();
            log.append_marker(1, 0, ControlRecordType::Commit, 0)
                .unwrap();
            log.close().unwrap();
        }
        let index = dir.path().join("00000000000000000100.txnindex");
        let expected = [AbortedTxn {
            producer_id: 2,
            first_offset: 75,
            last_offset: 106,
            last_stable_offset: 100,
        }];
        assert_eq!(txn_index_entries(&index), expected);
        make_unclean(dir.path());
        std::fs::remove_file(&index).unwrap();
        for path in files_with_suffix(dir.path(), ".snapshot") {
            if !(keep_roll_snapshot && path.ends_with(snapshot_file_name(100))) {
                std::fs::remove_file(path).unwrap();
            }
        }
        let log = Log::open(dir.path(), config()).unwrap();
        let what = format!("the snapshot at 100 kept: {keep_roll_snapshot}");
        assert_eq!(log.log_end_offset(), 108, "{what}");
        assert_eq!(txn_index_entries(&index), expected, "{what}");
        assert_eq!(log.first_unstable_offset(), None, "{what}");
        assert_eq!(aborted_list(&log), [(2, 75, 106, 100)], "{what}");
    }
}

/// A log over several segments with committed and aborted transactions of three producers,
/// some spanning segments, closed cleanly. Returns its aborted list.
fn write_transactions(dir: &Path) -> Vec<(i64, i64, i64, i64)> {
    let log = Log::open(dir, small_segments()).unwrap();
    let mut seq = [0i32; 3];
    for round in 0..30 {
        let pid = round % 3;
        log.append_batch(&batch(pid as i64, seq[pid], 3, true))
            .unwrap();
        seq[pid] += 3;
        if round % 3 == 2 {
            log.append_batch(&plain_batch(2)).unwrap();
        }
        if round % 5 == 4 {
            let marker = if round % 10 == 4 {
                ControlRecordType::Abort
            } else {
                ControlRecordType::Commit
            };
            log.append_marker(pid as i64, 0, marker, 0).unwrap();
        }
    }
    log.append_marker(0, 0, ControlRecordType::Abort, 0)
        .unwrap();
    let aborted = aborted_list(&log);
    assert!(aborted.len() >= 3, "{aborted:?}");
    assert!(log.stats().segments >= 4);
    log.close().unwrap();
    aborted
}

/// The `.txnindex` files of `dir`, by name, with their bytes.
fn txn_indexes(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    files_with_suffix(dir, ".txnindex")
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect()
}

/// Kafka's `LogLoaderTest` index-recovery cases: the offset indexes and `.txnindex` files of
/// every segment, or of the last one only, are deleted, with or without the snapshots, and an
/// unclean open rebuilds the aborted list exactly.
fn txn_index_recovery_case(only_last_segment: bool, keep_snapshots: bool) {
    let dir = tempfile::tempdir().unwrap();
    let aborted = write_transactions(dir.path());
    let indexes = txn_indexes(dir.path());
    let mut deleted = files_with_suffix(dir.path(), ".index");
    deleted.extend(files_with_suffix(dir.path(), ".txnindex"));
    if only_last_segment {
        let last_base = files_with_suffix(dir.path(), ".log")
            .last()
            .unwrap()
            .file_stem()
            .unwrap()
            .to_owned();
        deleted.retain(|p| p.file_stem().unwrap() == last_base);
    }
    if !keep_snapshots {
        deleted.extend(files_with_suffix(dir.path(), ".snapshot"));
    }
    for path in &deleted {
        std::fs::remove_file(path).unwrap();
    }
    make_unclean(dir.path());
    let log = Log::open(dir.path(), small_segments()).unwrap();
    assert!(!log.recovery_report().clean_shutdown);
    let what = format!("only last segment: {only_last_segment}, snapshots: {keep_snapshots}");
    assert_eq!(aborted_list(&log), aborted, "{what}");
    assert_eq!(txn_indexes(dir.path()), indexes, "{what}");
}

#[test]
fn txn_index_full_recovery_rebuilds_the_aborted_list() {
    txn_index_recovery_case(false, true);
}

#[test]
fn txn_index_full_recovery_without_snapshots_rebuilds_the_aborted_list() {
    txn_index_recovery_case(false, false);
}

#[test]
fn txn_index_recovery_of_the_last_segment_rebuilds_the_aborted_list() {
    txn_index_recovery_case(true, true);
}

#[test]
fn txn_index_recovery_of_the_last_segment_without_snapshots_rebuilds_the_aborted_list() {
    txn_index_recovery_case(true, false);
}

/// One producer's state as it survives a reload: (producer id, epoch, last sequence, last
/// offset, coordinator epoch, open transaction's first offset). A snapshot keeps only the
/// newest batch, so the remembered-batch count is left out.
type ProducerView = (i64, i16, i32, i64, i32, Option<i64>);

/// What the log holds for each producer.
fn producer_view(log: &Log) -> Vec<ProducerView> {
    log.active_producers()
        .into_iter()
        .map(|p| {
            (
                p.producer_id,
                p.producer_epoch,
                p.last_sequence,
                p.last_offset,
                p.coordinator_epoch,
                p.current_txn_first_offset,
            )
        })
        .collect()
}

/// Ways to spoil the newest snapshot.
#[derive(Debug, Clone, Copy)]
enum Spoil {
    /// Cut in the middle of an entry, as a crash during a write without fsync leaves it.
    Torn,
    /// One byte of an entry flipped: the CRC no longer matches.
    Corrupt,
    /// No bytes at all.
    Empty,
    /// A snapshot above the log end (a crash between a snapshot and a truncation), holding a
    /// state the log never had.
    AboveEnd,
}

fn spoiled_snapshot_case(spoil: Spoil) {
    let original = tempfile::tempdir().unwrap();
    let (view, lso, end) = {
        let log = Log::open(original.path(), small_segments()).unwrap();
        let mut seq = [0i32; 2];
        for round in 0..24 {
            let pid = round % 2;
            log.append_batch(&batch(pid as i64, seq[pid], 4, pid == 1))
                .unwrap();
            seq[pid] += 4;
        }
        assert!(log.stats().segments >= 3);
        let state = (
            producer_view(&log),
            log.last_stable_offset(),
            log.log_end_offset(),
        );
        log.close().unwrap();
        state
    };
    // Both after a clean shutdown (which reads the snapshot at the log end) and after an
    // unclean one (which looks for the newest at or below where it recovers from).
    for unclean in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        for entry in std::fs::read_dir(original.path()).unwrap() {
            let path = entry.unwrap().path();
            std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
        }
        let snapshots = files_with_suffix(dir.path(), ".snapshot");
        assert!(snapshots.len() >= 2, "{snapshots:?}");
        let newest = snapshots.last().unwrap().clone();
        assert_eq!(newest, dir.path().join(snapshot_file_name(end)));
        let bad = match spoil {
            Spoil::Torn => {
                let bytes = std::fs::read(&newest).unwrap();
                std::fs::write(&newest, &bytes[..bytes.len() - 20]).unwrap();
                newest
            }
            Spoil::Corrupt => {
                let mut bytes = std::fs::read(&newest).unwrap();
                bytes[20] ^= 0x10;
                std::fs::write(&newest, &bytes).unwrap();
                newest
            }
            Spoil::Empty => {
                std::fs::write(&newest, b"").unwrap();
                newest
            }
            Spoil::AboveEnd => {
                let wrong = SnapshotEntry {
                    producer_id: 0,
                    producer_epoch: 3,
                    last_sequence: 500,
                    last_offset: end + 40,
                    offset_delta: 0,
                    timestamp: now_ms(),
                    coordinator_epoch: 9,
                    current_txn_first_offset: -1,
                };
                let path = dir.path().join(snapshot_file_name(end + 50));
                std::fs::write(&path, encode_snapshot(&[wrong])).unwrap();
                path
            }
        };
        if unclean {
            make_unclean(dir.path());
        }
        let whole: Vec<PathBuf> = files_with_suffix(dir.path(), ".snapshot")
            .into_iter()
            .filter(|path| *path != bad)
            .collect();
        // An unclean open loads the newest snapshot at or below where recovery starts; it also
        // deletes the bad ones above that (a roll's snapshot a crash caught before its fsync),
        // so none outlives it, and keeps the whole ones.
        for reopen in [false, true] {
            let log = Log::open(dir.path(), small_segments()).unwrap();
            let what = format!("{spoil:?}, unclean: {unclean}, reopened: {reopen}");
            assert_eq!(log.log_end_offset(), end, "{what}");
            assert_eq!(producer_view(&log), view, "{what}");
            assert_eq!(log.last_stable_offset(), lso, "{what}");
            // The newest batch of each producer is still a duplicate.
            let resent = log.append_batch(&batch(0, seq_of(&view, 0) - 3, 4, false));
            let resent = resent.unwrap_or_else(|e| panic!("{what}: {e}"));
            assert!(resent.duplicate, "{what}");
            // Gone, or written again whole at the log end.
            let rewritten = bad == dir.path().join(snapshot_file_name(end))
                && std::fs::read(&bad).is_ok_and(|b| decode_snapshot(&bad, &b).is_ok());
            assert!(
                !bad.exists() || rewritten,
                "{what}: the bad snapshot was kept"
            );
            if !reopen {
                for path in &whole {
                    assert!(path.exists(), "{what}: a whole snapshot went: {path:?}");
                }
            }
            log.close().unwrap();
        }
    }
}

/// The first sequence of producer `pid`'s newest 4-record batch plus 3: its last sequence.
fn seq_of(view: &[ProducerView], pid: i64) -> i32 {
    view.iter().find(|p| p.0 == pid).unwrap().2
}

#[test]
fn producer_state_a_torn_snapshot_is_deleted_and_an_older_one_used() {
    spoiled_snapshot_case(Spoil::Torn);
}

#[test]
fn producer_state_a_corrupt_snapshot_is_deleted_and_an_older_one_used() {
    spoiled_snapshot_case(Spoil::Corrupt);
}

#[test]
fn producer_state_an_empty_snapshot_is_deleted_and_an_older_one_used() {
    spoiled_snapshot_case(Spoil::Empty);
}

#[test]
fn producer_state_a_snapshot_above_the_log_end_is_deleted_and_never_trusted() {
    spoiled_snapshot_case(Spoil::AboveEnd);
}

/// A truncation deletes the snapshots above its new end; a crash may undo a deletion that no
/// directory fsync covered. Data appended after the truncation then reaches past such a
/// snapshot's offset: were the snapshot back, it would describe a state this log never had
/// (producer 7's batches up to 39, truncated away). After every crash image, the state of each
/// producer must be its newest batch in the log.
#[cfg(feature = "sim")]
#[path = "common/fenced.rs"]
mod fenced_storage;

#[cfg(feature = "sim")]
#[test]
fn producer_state_a_snapshot_from_before_a_truncation_never_comes_back_after_a_crash() {
    use partlog::unstable::{CrashConfig, ManualClock, SimStorage, Storage};
    use std::sync::Arc;

    const DIR: &str = "/truncated/topic-0";
    for seed in 0..40u64 {
        let sim = SimStorage::new(seed);
        let clock = Arc::new(ManualClock::new(now_ms()));
        let config = || {
            let storage: Arc<dyn Storage> = Arc::new(sim.clone());
            LogConfig::builder_for_tests()
                .segment_bytes(1024)
                .storage(storage)
                .clock(clock.clone())
                .build()
                .unwrap()
        };
        // The process that crashes runs on fenced storage: its drop after the crash changes
        // nothing in the image the next open recovers.
        let log = Log::open(DIR, fenced_storage::fenced_config(config(), &sim)).unwrap();
        for seq in 0..40 {
            log.append_batch(&batch(7, seq * 2, 2, false)).unwrap();
        }
        log.wait_durable(log.log_end_offset() - 1).unwrap();
        assert!(log.stats().segments >= 3, "snapshots at the rolls");
        log.truncate_to(10).unwrap();
        for seq in 0..40 {
            log.append_batch(&batch(8, seq * 2, 2, false)).unwrap();
        }
        log.wait_durable(log.log_end_offset() - 1).unwrap();
        sim.crash_with(&CrashConfig::random().seed(seed));
        drop(log);
        sim.clear_faults();

        let log = Log::open(DIR, config()).unwrap();
        // The newest surviving batch of each producer, from the log itself.
        let mut newest = std::collections::BTreeMap::new();
        let mut at = log.log_start_offset();
        while at < log.log_end_offset() {
            let fetch = log.read(at, 1 << 20, ReadBound::LogEnd).unwrap();
            for b in fetch.batches() {
                let b = b.unwrap();
                let h = b.header().unwrap();
                newest.insert(h.producer_id, (h.last_offset(), h.last_sequence()));
            }
            at = fetch.next_offset();
        }
        for pid in [7, 8] {
            let state = log
                .producer_state(pid)
                .map(|s| (s.last_offset, s.last_sequence));
            assert_eq!(
                state,
                newest.get(&pid).copied(),
                "seed {seed}: producer {pid} (log end {})",
                log.log_end_offset()
            );
        }
        assert!(
            newest.get(&7).is_none_or(|(last, _)| *last < 10),
            "seed {seed}: producer 7's truncated batches came back"
        );
    }
}
