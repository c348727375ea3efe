//! Compaction with transactions (ARCHITECTURE.md §9, "Compaction"): Kafka's `LogCleanerTest`
//! transaction cases, ported number for number (the helpers and how they map to Kafka's are in
//! `common/txn_log.rs`).

#[path = "common/txn_log.rs"]
mod txn_log;

use std::sync::Arc;

use partlog::Log;
use partlog::unstable::ManualClock;

use txn_log::*;

/// `LogCleanerTest.testMultiPassSegmentCleaningWithAbortedTransactions`: a key map too small for
/// one pass; the aborted data goes in the first pass, the `.txnindex` entries in the second
/// (no data of their transactions is left), the ABORT markers once `delete.retention.ms` has
/// passed.
#[test]
fn compaction_txn_multi_pass_segment_cleaning_with_aborted_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let delete_retention_ms = 50_000;
    let log = multi_pass_log(dir.path(), &clock, delete_retention_ms);
    // Kafka's FakeOffsetMap(slots = 4) at a 0.75 load factor.
    let max_map_keys = 3;
    assert_eq!(log.log_end_offset(), 20);

    let expected_aborted = vec![aborted(1, 8, 10, 11), aborted(2, 11, 16, 17)];
    assert_all_transactions_complete(&log);
    assert_eq!(aborted_txns(dir.path()), expected_aborted);

    // The first pass removes the aborted data; the markers stay until the horizon passes.
    assert_eq!(clean(&log, max_map_keys), 4);
    assert_eq!(
        batch_base_offsets(dir.path()),
        [0, 2, 4, 6, 7, 10, 13, 15, 16, 17, 19]
    );
    assert_eq!(
        offsets_in_log(dir.path()),
        [0, 2, 3, 4, 5, 6, 7, 10, 13, 14, 15, 16, 17, 18, 19]
    );
    assert_all_transactions_complete(&log);
    assert_eq!(aborted_txns(dir.path()), expected_aborted);

    // The second: no data of the aborted transactions is left, so the index no longer lists
    // them, but the markers wait for the retention time.
    assert_eq!(clean(&log, max_map_keys), 14);
    assert_eq!(
        batch_base_offsets(dir.path()),
        [0, 2, 4, 6, 7, 10, 13, 15, 16, 17, 19]
    );
    assert_eq!(
        offsets_in_log(dir.path()),
        [0, 2, 4, 5, 6, 7, 10, 13, 14, 15, 16, 17, 18, 19]
    );
    assert_all_transactions_complete(&log);
    assert_eq!(aborted_txns(dir.path()), []);

    // After the retention time, the ABORT markers (10 and 16) go.
    clock.advance(delete_retention_ms);
    assert_eq!(clean(&log, max_map_keys), 20);
    assert_eq!(
        batch_base_offsets(dir.path()),
        [0, 2, 4, 6, 7, 13, 15, 17, 19]
    );
    assert_eq!(
        offsets_in_log(dir.path()),
        [0, 2, 4, 5, 6, 7, 13, 15, 17, 18, 19]
    );
    assert_all_transactions_complete(&log);
    assert_eq!(aborted_txns(dir.path()), []);
}

/// `LogCleanerTest.testBasicTransactionAwareCleaning`: aborted data never supersedes, and is
/// removed; the ABORT marker stays with its `.txnindex` entry while its data was seen.
#[test]
fn compaction_txn_basic_transaction_aware_cleaning() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(dir.path(), config(&clock, DAY_MS)).unwrap();
    let (mut p1, mut p2) = (Producer::transactional(1), Producer::transactional(2));

    p1.append(&log, &clock, &[1, 2]);
    p2.append(&log, &clock, &[2, 3]);
    p1.append(&log, &clock, &[3, 4]);
    abort(&log, 1);
    commit(&log, 2);
    p1.append(&log, &clock, &[2]);
    commit(&log, 1);
    let aborted_before = aborted_txns(dir.path());
    assert_eq!(aborted_before.len(), 1);

    log.roll().unwrap();
    clean_all(&log);
    assert_eq!(keys_in_log(dir.path()), [3, 2]);
    assert_eq!(offsets_in_log(dir.path()), [3, 6, 7, 8, 9]);
    // The transaction index is still correct.
    assert_eq!(aborted_txns(dir.path()), aborted_before);
}

/// `LogCleanerTest.testCleanWithTransactionsSpanningSegments`: transactions whose data lies in
/// the cleaned segment and whose markers lie in a later one are known from that segment's
/// `.txnindex`; a later pass, held back by newly open transactions, cleans the second segment.
#[test]
fn compaction_txn_clean_with_transactions_spanning_segments() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(dir.path(), config(&clock, DAY_MS)).unwrap();
    let mut p1 = Producer::transactional(1);
    let mut p2 = Producer::transactional(2);
    let mut p3 = Producer::transactional(3);

    p1.append(&log, &clock, &[1, 2]);
    p3.append(&log, &clock, &[2, 3]);
    p2.append(&log, &clock, &[3, 4]);
    log.roll().unwrap();
    p2.append(&log, &clock, &[5, 6]);
    p3.append(&log, &clock, &[6, 7]);
    p1.append(&log, &clock, &[7, 8]);
    abort(&log, 2);
    p3.append(&log, &clock, &[8, 9]);
    commit(&log, 3);
    p1.append(&log, &clock, &[9, 10]);
    abort(&log, 1);

    // Only the first segment is cleaned (the second is active).
    assert_eq!(clean_all(&log), 6);
    assert_eq!(
        keys_in_log(dir.path()),
        [2, 3, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10]
    );

    log.roll().unwrap();
    // New transactions in the active segment: the LSO holds the next pass below it.
    p2.append(&log, &clock, &[11]);
    p1.append(&log, &clock, &[12]);

    // Only the keys of producer 3 (committed) are left in the cleaned segments.
    clean_all(&log);
    assert_eq!(keys_in_log(dir.path()), [2, 3, 6, 7, 8, 9, 11, 12]);
}

/// `LogCleanerTest.testCommitMarkerRemoval`: a COMMIT marker stays while data of its
/// transaction is left, then gets a delete horizon, and goes once it has passed.
#[test]
fn compaction_txn_commit_marker_removal() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(dir.path(), config(&clock, DAY_MS)).unwrap();
    let mut producer = Producer::transactional(1);

    producer.append(&log, &clock, &[1]);
    producer.append(&log, &clock, &[2, 3]);
    commit(&log, 1);
    producer.append(&log, &clock, &[2]);
    commit(&log, 1);
    log.roll().unwrap();

    // The marker cannot go in this pass: records of its transaction are left.
    clean_all(&log);
    assert_eq!(keys_in_log(dir.path()), [1, 3, 2]);
    assert_eq!(offsets_in_log(dir.path()), [0, 2, 3, 4, 5]);

    producer.append(&log, &clock, &[1, 3]);
    commit(&log, 1);
    log.roll().unwrap();

    // The commit marker at 3 stays: this pass still saw records of its transaction.
    clean_all(&log);
    assert_eq!(keys_in_log(dir.path()), [2, 1, 3]);
    assert_eq!(offsets_in_log(dir.path()), [3, 4, 5, 6, 7, 8]);

    // Again at the same time: the marker is not removed early (it only gets its horizon).
    clean_all(&log);
    assert_eq!(keys_in_log(dir.path()), [2, 1, 3]);
    assert_eq!(offsets_in_log(dir.path()), [3, 4, 5, 6, 7, 8]);

    // Past the horizon, the marker goes.
    clock.advance(DAY_MS + 1);
    clean_all(&log);
    assert_eq!(keys_in_log(dir.path()), [2, 1, 3]);
    assert_eq!(offsets_in_log(dir.path()), [4, 5, 6, 7, 8]);
}

/// `LogCleanerTest.testCommitMarkerRetentionWithEmptyBatch`: a producer's last data batch stays
/// as an empty header (its sequence), and a COMMIT marker stays while such a batch of its
/// transaction does.
#[test]
fn compaction_txn_commit_marker_retention_with_empty_batch() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(dir.path(), config(&clock, DAY_MS)).unwrap();
    let (mut p1, mut p2) = (Producer::transactional(1), Producer::transactional(2));

    p1.append(&log, &clock, &[2, 3]); // 0, 1
    log.roll().unwrap();
    p2.append(&log, &clock, &[2, 3]); // 2, 3
    commit(&log, 2); // 4
    log.roll().unwrap();
    plain(&log, &clock, 2); // 5
    plain(&log, &clock, 3); // 6
    commit(&log, 1); // 7
    log.roll().unwrap();

    // The records go; both producers' batches stay as empty headers.
    clean_all(&log);
    assert_eq!(keys_in_log(dir.path()), [2, 3]);
    assert_eq!(offsets_in_log(dir.path()), [4, 5, 6, 7]);
    assert_eq!(last_offsets_per_batch(dir.path()), [1, 3, 4, 5, 6, 7]);

    // Cleaned again, the empty batches stay: they hold the producers' last sequences.
    clean_all(&log);
    assert_eq!(keys_in_log(dir.path()), [2, 3]);
    assert_eq!(offsets_in_log(dir.path()), [4, 5, 6, 7]);
    assert_eq!(last_offsets_per_batch(dir.path()), [1, 3, 4, 5, 6, 7]);

    // A new batch of producer 2 lets its empty batch go; its COMMIT at 4 does not get a delete
    // horizon yet (this pass saw the empty batch of its transaction).
    p2.append(&log, &clock, &[1]); // 8
    commit(&log, 2); // 9
    log.roll().unwrap();
    clean_all(&log);
    assert_eq!(keys_in_log(dir.path()), [2, 3, 1]);
    assert_eq!(offsets_in_log(dir.path()), [4, 5, 6, 7, 8, 9]);
    assert_eq!(last_offsets_per_batch(dir.path()), [1, 4, 5, 6, 7, 8, 9]);

    // The first pass sets the COMMIT's horizon, the second (after it) removes it.
    two_pass_clean(&log, &clock);
    assert_eq!(keys_in_log(dir.path()), [2, 3, 1]);
    assert_eq!(offsets_in_log(dir.path()), [5, 6, 7, 8, 9]);
    assert_eq!(last_offsets_per_batch(dir.path()), [1, 5, 6, 7, 8, 9]);
}

/// `LogCleanerTest.testCleanEmptyControlBatch`: a marker that is its producer's last record (no
/// data, current epoch) stays as an empty control batch once its horizon has passed, and an
/// empty control batch is cleaned again without harm.
#[test]
fn compaction_txn_clean_empty_control_batch() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(dir.path(), config(&clock, DAY_MS)).unwrap();
    commit(&log, 1); // 0
    plain(&log, &clock, 2); // 1
    plain(&log, &clock, 3); // 2
    log.roll().unwrap();

    two_pass_clean(&log, &clock);
    assert_eq!(keys_in_log(dir.path()), [2, 3]);
    assert_eq!(offsets_in_log(dir.path()), [1, 2]);
    assert_eq!(last_offsets_per_batch(dir.path()), [0, 1, 2]);

    clock.advance(DAY_MS);
    clean_all(&log);
    assert_eq!(keys_in_log(dir.path()), [2, 3]);
    assert_eq!(offsets_in_log(dir.path()), [1, 2]);
    assert_eq!(last_offsets_per_batch(dir.path()), [0, 1, 2]);
}

/// `LogCleanerTest.testCommittedTransactionSpanningSegments`: the data and its COMMIT in two
/// segments both stay.
#[test]
fn compaction_txn_committed_transaction_spanning_segments() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(dir.path(), config(&clock, DAY_MS)).unwrap();
    Producer::transactional(1).append(&log, &clock, &[1]);
    log.roll().unwrap();
    commit(&log, 1);
    log.roll().unwrap();

    two_pass_clean(&log, &clock);
    assert_eq!(offsets_in_log(dir.path()), [0, 1]);
    assert_eq!(last_offsets_per_batch(dir.path()), [0, 1]);
}

/// `LogCleanerTest.testAbortedTransactionSpanningSegments`: the aborted batch stays empty (its
/// producer's last), and so its ABORT marker stays, pass after pass.
#[test]
fn compaction_txn_aborted_transaction_spanning_segments() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(dir.path(), config(&clock, DAY_MS)).unwrap();
    Producer::transactional(1).append(&log, &clock, &[1]);
    log.roll().unwrap();
    abort(&log, 1);
    log.roll().unwrap();

    clean_all(&log);
    assert_eq!(offsets_in_log(dir.path()), [1]);
    assert_eq!(last_offsets_per_batch(dir.path()), [0, 1]);

    clock.advance(DAY_MS + 1);
    clean_all(&log);
    assert_eq!(offsets_in_log(dir.path()), [1]);
    assert_eq!(last_offsets_per_batch(dir.path()), [0, 1]);
}

/// `LogCleanerTest.testAbortMarkerRemoval`: aborted records go at once, their ABORT marker two
/// passes (and `delete.retention.ms`) later.
#[test]
fn compaction_txn_abort_marker_removal() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(dir.path(), config(&clock, DAY_MS)).unwrap();
    let mut producer = Producer::transactional(1);
    producer.append(&log, &clock, &[1]);
    producer.append(&log, &clock, &[2, 3]);
    abort(&log, 1);
    producer.append(&log, &clock, &[3]);
    commit(&log, 1);
    log.roll().unwrap();

    clean_all(&log);
    assert_eq!(keys_in_log(dir.path()), [3]);
    assert_eq!(offsets_in_log(dir.path()), [3, 4, 5]);

    two_pass_clean(&log, &clock);
    assert_eq!(keys_in_log(dir.path()), [3]);
    assert_eq!(offsets_in_log(dir.path()), [4, 5]);
}

/// `LogCleanerTest.testAbortMarkerRetentionWithEmptyBatch`: the ABORT marker (and its
/// `.txnindex` entry) stays while the empty batch of its transaction does; once a newer batch
/// lets that go, the marker goes two passes later. Kafka's test cleans past the newer batch's
/// open transaction (it hands the cleaner its bounds); partlog never cleans past the last
/// stable offset, so here a COMMIT at 4 ends that transaction, and the offsets after the
/// roll carry it.
#[test]
fn compaction_txn_abort_marker_retention_with_empty_batch() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(dir.path(), config(&clock, DAY_MS)).unwrap();
    let mut producer = Producer::transactional(1);
    producer.append(&log, &clock, &[2, 3]); // last offset 1
    abort(&log, 1); // 2
    log.roll().unwrap();
    let indexed = || {
        let aborted = aborted_txns(dir.path());
        assert_eq!(
            aborted
                .iter()
                .map(|txn| (txn.producer_id, txn.first_offset, txn.last_offset))
                .collect::<Vec<_>>(),
            [(1, 0, 2)]
        );
    };
    indexed();

    // The records go; the marker and the empty batch stay.
    clean_all(&log);
    indexed();
    assert_eq!(keys_in_log(dir.path()), [] as [i32; 0]);
    assert_eq!(offsets_in_log(dir.path()), [2]);
    assert_eq!(last_offsets_per_batch(dir.path()), [1, 2]);

    // Still there: the empty batch holds the producer's last sequence.
    two_pass_clean(&log, &clock);
    indexed();
    assert_eq!(keys_in_log(dir.path()), [] as [i32; 0]);
    assert_eq!(offsets_in_log(dir.path()), [2]);
    assert_eq!(last_offsets_per_batch(dir.path()), [1, 2]);

    // A newer batch lets the empty one go; the marker stays this pass (it read the empty batch).
    producer.append(&log, &clock, &[1]); // 3
    commit(&log, 1); // 4
    log.roll().unwrap();
    clean_all(&log);
    indexed();
    assert_eq!(keys_in_log(dir.path()), [1]);
    assert_eq!(offsets_in_log(dir.path()), [2, 3, 4]);
    assert_eq!(last_offsets_per_batch(dir.path()), [2, 3, 4]);

    // The first pass sets the marker's horizon and drops its entry, the second removes it.
    two_pass_clean(&log, &clock);
    assert_eq!(keys_in_log(dir.path()), [1]);
    assert_eq!(offsets_in_log(dir.path()), [3, 4]);
    assert_eq!(last_offsets_per_batch(dir.path()), [3, 4]);
    assert_eq!(aborted_txns(dir.path()), []);
}

/// `LogCleanerTest.testDuplicateCheckAfterCleaning`: after a pass and a reopen, re-sending each
/// idempotent batch is a duplicate answered with its original offsets, also when the producer
/// state is rebuilt from the compacted log alone (no snapshot).
#[test]
fn compaction_txn_duplicate_check_after_cleaning() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let mut log = Log::open(dir.path(), config(&clock, DAY_MS)).unwrap();
    let resend = |log: &Log, id: i64, keys: &[i32]| {
        let info = Producer::idempotent(id).append(log, &clock, keys);
        assert!(info.duplicate, "{info:?}");
        (info.first_offset, info.last_offset)
    };

    Producer::idempotent(1).append(&log, &clock, &[1, 2, 3]);
    Producer::idempotent(2).append(&log, &clock, &[3, 1, 4]);
    Producer::idempotent(3).append(&log, &clock, &[1, 4]);
    log.roll().unwrap();
    clean_all(&log);
    assert_eq!(last_offsets_per_batch(dir.path()), [2, 5, 7]);
    assert_eq!(last_sequences_in_log(dir.path()), [(1, 2), (2, 2), (3, 1)]);
    assert_eq!(keys_in_log(dir.path()), [2, 3, 1, 4]);
    assert_eq!(offsets_in_log(dir.path()), [1, 3, 6, 7]);

    // Reloaded, the log still knows each producer's sequence.
    log = reopen(dir.path(), log, &clock);
    assert_eq!(resend(&log, 1, &[1, 2, 3]), (0, 2));
    assert_eq!(resend(&log, 3, &[1, 4]), (6, 7));
    assert_eq!(resend(&log, 2, &[3, 1, 4]), (3, 5));

    // One more append and pass removes producer 1's last record: its batch stays empty.
    Producer::idempotent(4).append(&log, &clock, &[2]);
    log.roll().unwrap();
    clean_all(&log);
    assert_eq!(
        last_sequences_in_log(dir.path()),
        [(1, 2), (2, 2), (3, 1), (4, 0)]
    );
    assert_eq!(last_offsets_per_batch(dir.path()), [2, 5, 7, 8]);
    assert_eq!(keys_in_log(dir.path()), [3, 1, 4, 2]);
    assert_eq!(offsets_in_log(dir.path()), [3, 6, 7, 8]);

    log = reopen(dir.path(), log, &clock);
    assert_eq!(resend(&log, 1, &[1, 2, 3]), (0, 2));

    // Without snapshots the state comes from the compacted log: the empty header still
    // carries producer 1's sequence.
    log.close().unwrap();
    drop(log);
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|ext| ext == "snapshot") {
            std::fs::remove_file(path).unwrap();
        }
    }
    let log = Log::open(dir.path(), config(&clock, DAY_MS)).unwrap();
    assert_eq!(resend(&log, 1, &[1, 2, 3]), (0, 2));
    assert_eq!(resend(&log, 2, &[3, 1, 4]), (3, 5));
    assert_eq!(resend(&log, 3, &[1, 4]), (6, 7));
    assert_eq!(resend(&log, 4, &[2]), (8, 8));
}
