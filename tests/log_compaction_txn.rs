//! Compaction with transactions (ARCHITECTURE.md §9, "Compaction"): Kafka's `LogCleanerTest`
//! cases ported number for number, and `read_committed` over a compacted log.
//!
//! Kafka's helpers map as follows: `appendTransactionalAsLeader` / `appendIdempotentAsLeader`
//! are [`Producer`] (one sequence counter per producer, every record's key and value its
//! number), `commitMarker` / `abortMarker` are [`Log::append_marker`], `log.roll()` is
//! [`Log::roll`], a cleaning at a given time is a pass on the log's [`ManualClock`], and
//! Kafka's `FakeOffsetMap(slots)` at the cleaner's 0.75 load factor is a key map of
//! `slots * 3 / 4` keys.

#[path = "common/kafka.rs"]
mod kafka;

use std::path::Path;
use std::sync::Arc;

use partlog::unstable::ManualClock;
use partlog::{
    AbortedTxn, AnyBatchIter, Batch, BatchBuilder, CleanupPolicy, CompactionOptions, Compression,
    ControlRecordType, Log, LogAppendInfo, LogConfig, NewRecord, ReadBound,
};

const T0: i64 = 1_700_000_000_000;
/// Kafka's `log.cleaner.delete.retention.ms` default, which the ported tests leave in place.
const DAY_MS: i64 = 24 * 60 * 60 * 1000;

fn config(clock: &Arc<ManualClock>, delete_retention_ms: i64) -> LogConfig {
    LogConfig::builder_for_tests()
        .segment_bytes(64 * 1024)
        // Rolls only where the tests roll.
        .segment_ms(i64::MAX / 4)
        .cleanup_policy(CleanupPolicy::COMPACT)
        .delete_retention_ms(delete_retention_ms)
        // Kafka's cleaner tests never expire a producer, whatever time the cleaner is given.
        .producer_id_expiration_ms(365 * DAY_MS)
        // No maintenance thread: every pass is one the test runs.
        .retention_check_interval_ms(-1)
        .clock(Arc::clone(clock) as Arc<dyn partlog::unstable::Clock>)
        .build()
        .unwrap()
}

/// One producer's appends, as Kafka's `append(Transactional|Idempotent)AsLeader` makes them.
struct Producer {
    id: i64,
    epoch: i16,
    transactional: bool,
    sequence: i32,
}

impl Producer {
    fn transactional(id: i64) -> Producer {
        Producer {
            id,
            epoch: 0,
            transactional: true,
            sequence: 0,
        }
    }

    fn idempotent(id: i64) -> Producer {
        Producer {
            transactional: false,
            ..Producer::transactional(id)
        }
    }

    /// One batch, a record per key (key and value both the key's number).
    fn append(&mut self, log: &Log, clock: &ManualClock, keys: &[i32]) -> LogAppendInfo {
        let mut builder = BatchBuilder::new(Compression::None)
            .producer(self.id, self.epoch, self.sequence)
            .transactional(self.transactional);
        for key in keys {
            let bytes = key.to_string();
            builder.push(&NewRecord::new(
                now(clock),
                Some(bytes.as_bytes()),
                Some(bytes.as_bytes()),
            ));
        }
        self.sequence += keys.len() as i32;
        log.append_batch(&builder.build().unwrap()).unwrap()
    }
}

fn now(clock: &ManualClock) -> i64 {
    partlog::unstable::Clock::now_ms(clock)
}

fn commit(log: &Log, producer_id: i64) {
    log.append_marker(producer_id, 0, ControlRecordType::Commit, 0)
        .unwrap();
}

fn abort(log: &Log, producer_id: i64) {
    log.append_marker(producer_id, 0, ControlRecordType::Abort, 0)
        .unwrap();
}

fn plain(log: &Log, clock: &ManualClock, key: i32) {
    let bytes = key.to_string();
    log.append(&[NewRecord::new(
        now(clock),
        Some(bytes.as_bytes()),
        Some(bytes.as_bytes()),
    )])
    .unwrap();
}

/// A pass with a key map of `max_map_keys`; returns where it cleaned up to (Kafka's dirty
/// offset after the pass).
fn clean(log: &Log, max_map_keys: usize) -> i64 {
    log.compact_with(CompactionOptions::with_max_map_keys(max_map_keys))
        .unwrap()
        .cleaned_up_to
}

fn clean_all(log: &Log) -> i64 {
    clean(log, 1_000_000)
}

/// Every batch of every segment, in order (Kafka's `log.logSegments.flatMap(_.log.batches)`).
fn batches(dir: &Path) -> Vec<Vec<u8>> {
    let mut logs: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "log"))
        .collect();
    logs.sort();
    let mut all = Vec::new();
    for path in logs {
        let bytes = std::fs::read(&path).unwrap();
        for (_, batch) in AnyBatchIter::new(&bytes) {
            all.push(batch.unwrap().as_bytes().to_vec());
        }
    }
    all
}

fn with_batches<T>(dir: &Path, mut visit: impl FnMut(&Batch<'_>) -> Option<T>) -> Vec<T> {
    batches(dir)
        .iter()
        .filter_map(|bytes| {
            let (_, batch) = AnyBatchIter::new(bytes).next().unwrap();
            visit(&batch.unwrap())
        })
        .collect()
}

fn batch_base_offsets(dir: &Path) -> Vec<i64> {
    with_batches(dir, |batch| {
        Some(batch.as_v2().unwrap().header().base_offset)
    })
}

fn last_offsets_per_batch(dir: &Path) -> Vec<i64> {
    with_batches(dir, |batch| Some(batch.last_offset()))
}

/// Kafka's `offsetsInLog`: the offset of every record with a key and a value, control records
/// included.
fn offsets_in_log(dir: &Path) -> Vec<i64> {
    records_in_log(dir, true)
        .into_iter()
        .map(|(offset, _)| offset)
        .collect()
}

/// Kafka's `LogTestUtils.keysInLog`: the keys of the data records with a value.
fn keys_in_log(dir: &Path) -> Vec<i32> {
    records_in_log(dir, false)
        .into_iter()
        .map(|(_, key)| key)
        .collect()
}

fn records_in_log(dir: &Path, with_control: bool) -> Vec<(i64, i32)> {
    let mut scratch = Vec::new();
    with_batches(dir, |batch| {
        let view = batch.as_v2().unwrap();
        let control = view.header().is_control();
        if control && !with_control {
            return None;
        }
        let mut found = Vec::new();
        for record in view.records(&mut scratch).unwrap() {
            let record = record.unwrap();
            if let (Some(key), Some(_)) = (record.key, record.value) {
                let key = if control {
                    -1
                } else {
                    std::str::from_utf8(key).unwrap().parse().unwrap()
                };
                found.push((record.offset, key));
            }
        }
        Some(found)
    })
    .into_iter()
    .flatten()
    .collect()
}

/// Kafka's `lastSequencesInLog`: each producer's last data batch's last sequence.
fn last_sequences_in_log(dir: &Path) -> Vec<(i64, i32)> {
    let mut last = std::collections::BTreeMap::new();
    with_batches(dir, |batch| {
        let header = *batch.as_v2().unwrap().header();
        (!header.is_control() && header.producer_id >= 0).then_some(header)
    })
    .into_iter()
    .for_each(|header| {
        last.insert(header.producer_id, header.last_sequence());
    });
    last.into_iter().collect()
}

/// Every `.txnindex` entry of the log, segment by segment (Kafka's
/// `collectAbortedTransactions(0, logEndOffset)` on a log whose transactions are all decided).
fn aborted_txns(dir: &Path) -> Vec<AbortedTxn> {
    let mut indexes: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "txnindex"))
        .collect();
    indexes.sort();
    let mut all = Vec::new();
    for path in indexes {
        let bytes = std::fs::read(&path).unwrap();
        for chunk in bytes.chunks_exact(AbortedTxn::SIZE) {
            all.push(AbortedTxn::from_bytes(chunk.try_into().unwrap()).unwrap());
        }
    }
    all
}

fn aborted(producer_id: i64, first_offset: i64, last_offset: i64, lso: i64) -> AbortedTxn {
    AbortedTxn {
        producer_id,
        first_offset,
        last_offset,
        last_stable_offset: lso,
    }
}

/// Kafka's `assertAllTransactionsComplete`.
fn assert_all_transactions_complete(log: &Log) {
    assert!(
        log.active_producers()
            .iter()
            .all(|p| p.current_txn_first_offset.is_none())
    );
    assert_eq!(log.first_unstable_offset(), None);
}

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

/// Kafka's `runTwoPassClean`: the first pass sets delete horizons, the second runs after them.
fn two_pass_clean(log: &Log, clock: &ManualClock) -> i64 {
    clean_all(log);
    clock.advance(DAY_MS + 1);
    clean_all(log)
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

fn reopen(dir: &Path, log: Log, clock: &Arc<ManualClock>) -> Log {
    log.close().unwrap();
    drop(log);
    Log::open(dir, config(clock, DAY_MS)).unwrap()
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

/// The records `read_committed` returns, as (offset, key, value).
fn committed(log: &Log) -> Vec<(i64, String, String)> {
    log.committed_records(log.log_start_offset(), ReadBound::LogEnd)
        .map(|record| {
            let record = record.unwrap();
            (
                record.offset,
                String::from_utf8(record.key.unwrap()).unwrap(),
                String::from_utf8(record.value.unwrap()).unwrap(),
            )
        })
        .collect()
}

/// What compaction may leave of `read_committed`'s records: for each key, its latest committed
/// record (aborted data supersedes nothing).
fn latest_committed_per_key(records: &[(i64, String, String)]) -> Vec<(i64, String, String)> {
    let mut latest = std::collections::BTreeMap::new();
    for record in records {
        latest.insert(record.1.clone(), record.clone());
    }
    let mut kept: Vec<_> = latest.into_values().collect();
    kept.sort();
    kept
}

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

/// The log of [`compaction_txn_multi_pass_segment_cleaning_with_aborted_transactions`], rolled.
fn multi_pass_log(dir: &Path, clock: &Arc<ManualClock>, delete_retention_ms: i64) -> Log {
    let log = Log::open(dir, config(clock, delete_retention_ms)).unwrap();
    let (mut p1, mut p2) = (Producer::transactional(1), Producer::transactional(2));
    p1.append(&log, clock, &[1, 2]); // [0, 1]
    p2.append(&log, clock, &[2, 3]); // [2, 3]
    p1.append(&log, clock, &[3, 4]); // [4, 5]
    commit(&log, 1); // 6
    commit(&log, 2); // 7
    p1.append(&log, clock, &[2, 3]); // [8, 9]
    abort(&log, 1); // 10
    p2.append(&log, clock, &[4, 5]); // [11, 12]
    p1.append(&log, clock, &[5, 6]); // [13, 14]
    commit(&log, 1); // 15
    abort(&log, 2); // 16
    p2.append(&log, clock, &[6, 7]); // [17, 18]
    commit(&log, 2); // 19
    log.roll().unwrap();
    log
}

/// Closes `log`, checks the directory with `verify_dir` (every `.txnindex` entry against the
/// ABORT markers of its `.log`, every snapshot), and reopens it.
fn verified_reopen(
    dir: &Path,
    log: Log,
    clock: &Arc<ManualClock>,
    delete_retention_ms: i64,
) -> Log {
    log.close().unwrap();
    drop(log);
    let config = config(clock, delete_retention_ms);
    let report = partlog::verify_dir(dir, &config).unwrap();
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    Log::open(dir, config).unwrap()
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
/// crash images: the reopened log's `read_committed` records are those before the pass or those
/// after it, never an aborted record, no `.swap` or `.cleaned` file is left, and the next passes
/// end where an uncrashed run ends.
#[cfg(feature = "sim")]
#[test]
fn compaction_txn_a_crash_at_any_step_of_a_pass_never_exposes_aborted_data() {
    use partlog::FlushPolicy;
    use partlog::unstable::sim::{CrashConfig, FaultOp, FaultRule};
    use partlog::unstable::{SimStorage, Storage};

    let dir = Path::new("/data/txn-compact-0");
    let retention = 50_000;
    let sim_config = |sim: &SimStorage, clock: &Arc<ManualClock>| {
        LogConfig::builder_for_tests()
            .segment_bytes(64 * 1024)
            .segment_ms(i64::MAX / 4)
            .cleanup_policy(CleanupPolicy::COMPACT)
            .delete_retention_ms(retention)
            .producer_id_expiration_ms(365 * DAY_MS)
            .retention_check_interval_ms(-1)
            .flush_policy(FlushPolicy::EveryAppend)
            .storage(Arc::new(sim.clone()) as Arc<dyn Storage>)
            .clock(Arc::clone(clock) as Arc<dyn partlog::unstable::Clock>)
            .build()
            .unwrap()
    };
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
                Op::Roll => log.roll().unwrap(),
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
