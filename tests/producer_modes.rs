//! The batching writer's idempotent and transactional modes (issue 32, item 4): sequences
//! stamped per batch and continued from the log's producer state, re-sent batches answered with
//! their original offsets, transactions with `begin`, `commit` and `abort`, and what a fatal or
//! abortable error leaves the producer able to do (Kafka's `TransactionManagerTest` names where
//! it has the case). `cargo test --all-features --test producer_modes`.

#[cfg(feature = "sim")]
#[path = "common/fenced.rs"]
mod fenced_storage;

use std::sync::Arc;

use partlog::{
    Acks, BatchHeader, Error, HeldBatchHook, Log, LogConfig, NewRecord, Producer, ProducerConfig,
    ReadBound, SendHandle,
};

const T0: i64 = 1_700_000_000_000;

fn value(i: usize) -> Vec<u8> {
    let mut value = format!("record {i:>8} ").into_bytes();
    value.resize(100, b'.');
    value
}

fn record(i: usize) -> NewRecord {
    NewRecord::new(T0 + i as i64, None, Some(&value(i)))
}

fn open_log(dir: &std::path::Path) -> Arc<Log> {
    Arc::new(Log::open(dir, LogConfig::default()).unwrap())
}

/// Every batch of the log, with its bytes.
fn batches(log: &Log) -> Vec<(BatchHeader, Vec<u8>)> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let fetch = log.read(offset, 1 << 20, ReadBound::LogEnd).unwrap();
        for batch in fetch.batches() {
            let batch = batch.unwrap();
            out.push((*batch.header().unwrap(), batch.as_bytes().to_vec()));
        }
        offset = fetch.next_offset();
    }
    out
}

/// The data batches' (base sequence, last sequence), in log order.
fn sequences(log: &Log) -> Vec<(i32, i32)> {
    batches(log)
        .iter()
        .filter(|(header, _)| !header.is_control())
        .map(|(header, _)| (header.base_sequence, header.last_sequence()))
        .collect()
}

/// The values a `read_committed` consumer gets, in order.
fn committed_values(log: &Log) -> Vec<Vec<u8>> {
    log.committed_records(log.log_start_offset(), ReadBound::LogEnd)
        .map(|r| r.map(|r| r.value.unwrap_or_default()))
        .collect::<partlog::Result<_>>()
        .unwrap()
}

fn send_all(producer: &Producer, range: std::ops::Range<usize>) -> Vec<SendHandle> {
    range.map(|i| producer.send(&record(i)).unwrap()).collect()
}

fn wait_all(handles: Vec<SendHandle>) -> Vec<i64> {
    handles.into_iter().map(|h| h.wait().unwrap()).collect()
}

fn idempotent(log: &Arc<Log>, producer_id: i64, producer_epoch: i16) -> Producer {
    let config = ProducerConfig::idempotent(producer_id, producer_epoch)
        .acks(Acks::One)
        // At most two records a batch: many batches, each with its own sequence.
        .batch_size(300)
        .linger_ms(0)
        .build()
        .unwrap();
    Producer::new(Arc::clone(log), config).unwrap()
}

fn transactional(log: &Arc<Log>, producer_id: i64, producer_epoch: i16, acks: Acks) -> Producer {
    let config = ProducerConfig::transactional(producer_id, producer_epoch)
        .acks(acks)
        .build()
        .unwrap();
    Producer::new(Arc::clone(log), config).unwrap()
}

fn is_txn_state(result: partlog::Result<impl std::fmt::Debug>) -> bool {
    matches!(result, Err(Error::InvalidTxnState { .. }))
}

#[test]
fn idempotent_batches_carry_the_producer_and_consecutive_sequences() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path());
    let producer = idempotent(&log, 7, 3);
    let offsets = wait_all(send_all(&producer, 0..20));
    producer.flush().unwrap();
    assert_eq!(offsets, (0..20).collect::<Vec<i64>>());
    let all = batches(&log);
    assert!(all.len() >= 5, "{} batches", all.len());
    let mut next = 0;
    for (header, _) in &all {
        assert_eq!((header.producer_id, header.producer_epoch), (7, 3));
        assert!(!header.is_transactional());
        assert_eq!(
            header.base_sequence, next,
            "sequences continue batch to batch"
        );
        next = header.last_sequence() + 1;
    }
    assert_eq!(next, 20);
    let state = log.producer_state(7).unwrap();
    assert_eq!((state.producer_epoch, state.last_sequence), (3, 19));
    assert_eq!(producer.stats().duplicate_batches, 0);
    producer.close().unwrap();
}

/// A batch of the producer sent again, as a client that lost the answer to its append sends
/// it (same producer, epoch and sequences), is answered with the offsets it got the first
/// time, and the producer goes on after it with no gap. (The producer's own handles resolve to
/// the original offsets too: the crate's unit test
/// `a_resent_batch_resolves_its_handles_to_the_original_offsets`.)
#[test]
fn a_retried_idempotent_batch_is_a_duplicate_with_its_original_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path());
    let producer = idempotent(&log, 7, 0);
    wait_all(send_all(&producer, 0..12));
    producer.flush().unwrap();
    let all = batches(&log);
    let end = log.log_end_offset();
    // One of the producer's last five batches, re-sent.
    let (original, bytes) = &all[all.len() - 2];
    let retry = log.append_batch(bytes).unwrap();
    assert!(retry.duplicate);
    assert_eq!(
        (retry.first_offset, retry.last_offset),
        (original.base_offset, original.last_offset())
    );
    assert_eq!(log.log_end_offset(), end, "a duplicate writes nothing");
    // The producer continues its sequence after the retry.
    let offsets = wait_all(send_all(&producer, 12..16));
    assert_eq!(offsets, (end..end + 4).collect::<Vec<i64>>());
    assert_eq!(log.producer_state(7).unwrap().last_sequence, 15);
    assert_eq!(producer.stats().batches_failed, 0);
    producer.close().unwrap();
}

/// Kafka's `testNotReadyForSendBeforeBeginTransaction` and
/// `testFailIfNotReadyForSendNoOngoingTransaction`: a transactional producer refuses records
/// outside a transaction, with a typed error, and nothing reaches the log.
#[test]
fn not_ready_for_send_before_begin_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path());
    let producer = transactional(&log, 11, 0, Acks::One);
    assert!(!producer.in_transaction());
    match producer.send(&record(0)) {
        Err(Error::InvalidTxnState {
            producer_id,
            reason,
        }) => {
            assert_eq!(producer_id, 11);
            assert!(reason.contains("begin()"), "{reason}");
        }
        other => panic!("expected InvalidTxnState, got {other:?}"),
    }
    assert!(is_txn_state(producer.commit()));
    assert!(is_txn_state(producer.abort()));
    producer.begin().unwrap();
    assert!(producer.in_transaction());
    assert!(is_txn_state(producer.begin()), "one transaction at a time");
    let handle = producer.send(&record(1)).unwrap();
    producer.commit().unwrap();
    assert_eq!(handle.wait().unwrap(), 0);
    assert!(!producer.in_transaction());
    assert!(is_txn_state(producer.send(&record(2))), "after the commit");
    // The refused records never reached the log: one record and its marker.
    assert_eq!(log.log_end_offset(), 2);
    assert_eq!(committed_values(&log), vec![value(1)]);
    // The transaction calls need a transactional producer.
    let plain = Producer::new(Arc::clone(&log), ProducerConfig::default()).unwrap();
    assert!(is_txn_state(plain.begin()));
    let idempotent = idempotent(&log, 12, 0);
    assert!(is_txn_state(idempotent.commit()));
}

#[test]
fn abort_hides_the_records_of_its_transaction_from_committed_records() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path());
    let producer = transactional(&log, 5, 0, Acks::All);
    producer.begin().unwrap();
    let aborted = send_all(&producer, 0..5);
    producer.abort().unwrap();
    // Aborted records are in the log, at their offsets, unseen by read_committed.
    assert_eq!(wait_all(aborted), (0..5).collect::<Vec<i64>>());
    producer.begin().unwrap();
    let committed = send_all(&producer, 5..8);
    producer.commit().unwrap();
    assert_eq!(wait_all(committed), (6..9).collect::<Vec<i64>>());
    assert_eq!(
        committed_values(&log),
        (5..8).map(value).collect::<Vec<_>>()
    );
    // read_uncommitted sees all eight.
    let uncommitted = log
        .records(0, ReadBound::LogEnd)
        .filter_map(|r| r.unwrap().value)
        .count();
    assert_eq!(uncommitted, 8);
    assert_eq!(log.last_stable_offset(), log.log_end_offset());
    let headers: Vec<BatchHeader> = batches(&log).into_iter().map(|(h, _)| h).collect();
    assert!(
        headers
            .iter()
            .filter(|h| !h.is_control())
            .all(|h| h.is_transactional() && h.producer_id == 5)
    );
    assert_eq!(headers.iter().filter(|h| h.is_control()).count(), 2);
    // Under acks=all the marker is durable when commit returns.
    assert!(log.durable_offset() >= log.log_end_offset());
    producer.close().unwrap();
}

#[test]
fn commit_makes_the_transaction_visible_only_once_its_marker_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path());
    let producer = transactional(&log, 5, 0, Acks::One);
    producer.begin().unwrap();
    let handles = send_all(&producer, 0..5);
    producer.flush().unwrap();
    assert_eq!(wait_all(handles), (0..5).collect::<Vec<i64>>());
    // Appended, and unstable: read_committed readers stop at the transaction's first offset.
    assert_eq!(log.log_end_offset(), 5);
    assert_eq!(log.last_stable_offset(), 0);
    assert!(committed_values(&log).is_empty());
    producer.commit().unwrap();
    assert_eq!(log.last_stable_offset(), 6);
    assert_eq!(
        committed_values(&log),
        (0..5).map(value).collect::<Vec<_>>()
    );
    // A transaction that wrote nothing gets no marker.
    producer.begin().unwrap();
    producer.commit().unwrap();
    assert_eq!(log.log_end_offset(), 6);
}

#[test]
fn concurrent_senders_with_acks_all_in_one_transaction() {
    const THREADS: usize = 4;
    const PER_THREAD: usize = 200;
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path());
    let producer = Arc::new(transactional(&log, 21, 2, Acks::All));
    producer.begin().unwrap();
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let producer = Arc::clone(&producer);
            std::thread::spawn(move || {
                let first = t * PER_THREAD;
                send_all(&producer, first..first + PER_THREAD)
            })
        })
        .collect();
    let handles: Vec<SendHandle> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    producer.commit().unwrap();
    let marker_offset = log.log_end_offset() - 1;
    assert!(
        log.durable_offset() > marker_offset,
        "the marker is durable"
    );
    let mut offsets = wait_all(handles);
    offsets.sort_unstable();
    assert_eq!(
        offsets,
        (0..(THREADS * PER_THREAD) as i64).collect::<Vec<_>>()
    );
    assert_eq!(marker_offset, (THREADS * PER_THREAD) as i64);
    let mut committed = committed_values(&log);
    committed.sort();
    let mut sent: Vec<Vec<u8>> = (0..THREADS * PER_THREAD).map(value).collect();
    sent.sort();
    assert_eq!(committed, sent);
    // One sequence across every thread's records.
    let mut next = 0;
    for (first, last) in sequences(&log) {
        assert_eq!(first, next);
        next = last + 1;
    }
    assert_eq!(next, (THREADS * PER_THREAD) as i32);
    producer.close().unwrap();
}

/// Kafka's `testNotReadyForSendAfterFatalError`, with the fatal error a producer meets in
/// practice: a producer with the same id and a higher epoch fenced it (Kafka's
/// `ProducerFencedException`). Its batch fails with the log's error, and every later call
/// fails with it at once; bumping the epoch is the caller's.
#[test]
fn not_ready_for_send_after_fatal_error() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path());
    let old = idempotent(&log, 7, 0);
    wait_all(send_all(&old, 0..3));
    let new = idempotent(&log, 7, 1);
    wait_all(send_all(&new, 3..6));
    new.flush().unwrap();
    let fenced = old.send(&record(6)).unwrap();
    assert!(matches!(
        old.flush(),
        Err(Error::InvalidProducerEpoch { .. })
    ));
    match fenced.wait() {
        Err(Error::InvalidProducerEpoch {
            producer_id: 7,
            current: 1,
            found: 0,
        }) => {}
        other => panic!("expected InvalidProducerEpoch, got {other:?}"),
    }
    assert!(matches!(
        old.send(&record(7)),
        Err(Error::InvalidProducerEpoch { .. })
    ));
    assert!(matches!(
        Producer::new(
            Arc::clone(&log),
            ProducerConfig::idempotent(7, 0).build().unwrap()
        ),
        Err(Error::InvalidProducerEpoch { .. })
    ));
    // The new epoch goes on.
    assert_eq!(wait_all(send_all(&new, 8..9)), vec![6]);
    assert_eq!(sequences(&log).last(), Some(&(3, 3)));
}

/// A transaction left open (a producer closed inside it, or a crash) is resumed by a producer
/// of the same id and epoch, which may commit or abort it; a higher epoch aborts it, as Kafka's
/// `InitProducerId` does; an idempotent producer of the id is refused until it ends.
#[test]
fn a_transaction_left_open_is_resumed_by_its_epoch_and_aborted_by_a_higher_one() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path());
    let first = transactional(&log, 9, 0, Acks::One);
    first.begin().unwrap();
    wait_all(send_all(&first, 0..3));
    first.close().unwrap();
    assert_eq!(log.first_unstable_offset(), Some(0));

    let resumed = transactional(&log, 9, 0, Acks::One);
    assert!(resumed.in_transaction());
    assert!(is_txn_state(resumed.begin()));
    wait_all(send_all(&resumed, 3..5));
    resumed.commit().unwrap();
    assert_eq!(
        committed_values(&log),
        (0..5).map(value).collect::<Vec<_>>()
    );
    resumed.begin().unwrap();
    wait_all(send_all(&resumed, 5..8));
    drop(resumed);
    assert!(log.first_unstable_offset().is_some());

    assert!(matches!(
        Producer::new(
            Arc::clone(&log),
            ProducerConfig::idempotent(9, 1).build().unwrap()
        ),
        Err(Error::InvalidTxnState { .. })
    ));
    let next_epoch = transactional(&log, 9, 1, Acks::All);
    assert!(!next_epoch.in_transaction());
    assert_eq!(log.first_unstable_offset(), None);
    assert_eq!(log.producer_state(9).unwrap().producer_epoch, 1);
    next_epoch.begin().unwrap();
    wait_all(send_all(&next_epoch, 8..9));
    next_epoch.commit().unwrap();
    let mut expected: Vec<Vec<u8>> = (0..5).map(value).collect();
    expected.push(value(8));
    assert_eq!(committed_values(&log), expected);
    // A new epoch starts its sequence at 0.
    assert_eq!(sequences(&log).last(), Some(&(0, 0)));
}

/// Tests on the simulator: faults and crashes.
#[cfg(feature = "sim")]
mod sim {
    use super::*;
    use partlog::unstable::sim::{CrashConfig, FaultError, FaultOp};
    use partlog::unstable::{SimStorage, Storage};

    use super::fenced_storage;

    const DIR: &str = "/producer/modes-0";

    fn sim_config(sim: &SimStorage) -> LogConfig {
        let storage: Arc<dyn Storage> = Arc::new(sim.clone());
        LogConfig::builder().storage(storage).build().unwrap()
    }

    /// After a crash, a producer of the same id and epoch continues from the sequence the
    /// recovered log holds, not from where the crashed one had got: the records it lost are
    /// not a gap.
    #[test]
    fn a_reopened_log_continues_the_sequence_of_its_producer_state() {
        let sim = SimStorage::new(32);
        let config = sim_config(&sim);
        let log =
            Arc::new(Log::open(DIR, fenced_storage::fenced_config(config.clone(), &sim)).unwrap());
        let producer = idempotent(&log, 4, 0);
        wait_all(send_all(&producer, 0..10));
        producer.flush().unwrap();
        log.sync().unwrap();
        // Appended, not synced: the crash takes them.
        wait_all(send_all(&producer, 10..15));
        producer.flush().unwrap();
        assert_eq!(log.producer_state(4).unwrap().last_sequence, 14);
        sim.crash_with(&CrashConfig::lose_unsynced());
        drop(producer);
        drop(log);

        let log = Arc::new(Log::open(DIR, config).unwrap());
        assert_eq!(log.log_end_offset(), 10);
        assert_eq!(log.producer_state(4).unwrap().last_sequence, 9);
        let producer = idempotent(&log, 4, 0);
        let offsets = wait_all(send_all(&producer, 10..13));
        producer.flush().unwrap();
        assert_eq!(offsets, vec![10, 11, 12]);
        assert_eq!(sequences(&log).last().map(|s| s.1), Some(12));
        let mut next = 0;
        for (first, last) in sequences(&log) {
            assert_eq!(first, next);
            next = last + 1;
        }
        producer.close().unwrap();
    }

    /// Kafka's `testNotReadyForSendAfterAbortableError`: a batch of the transaction failed
    /// (here a write the disk refused, which published nothing), so the transaction can only be
    /// aborted: sends and commit refuse, abort ends it, and the next transaction takes the
    /// failed batch's sequence, leaving no gap.
    #[test]
    fn not_ready_for_send_after_abortable_error() {
        let sim = SimStorage::new(33);
        let log = Arc::new(Log::open(DIR, sim_config(&sim)).unwrap());
        let producer = transactional(&log, 6, 0, Acks::One);
        producer.begin().unwrap();
        wait_all(send_all(&producer, 0..2));
        producer.flush().unwrap();
        sim.fail_nth(FaultOp::Write, 1, FaultError::Enospc);
        let failed = producer.send(&record(2)).unwrap();
        assert!(producer.flush().is_err());
        assert!(matches!(failed.wait(), Err(Error::Io { .. })));
        assert!(!log.stats().poisoned);
        assert!(is_txn_state(producer.send(&record(3))));
        assert!(is_txn_state(producer.commit()));
        assert!(producer.in_transaction(), "a refused commit leaves it open");
        producer.abort().unwrap();
        producer.begin().unwrap();
        wait_all(send_all(&producer, 4..6));
        producer.commit().unwrap();
        assert_eq!(committed_values(&log), vec![value(4), value(5)]);
        let mut next = 0;
        for (first, last) in sequences(&log) {
            assert_eq!(first, next, "no gap where the failed batch was");
            next = last + 1;
        }
        assert_eq!(next, 4);
        producer.close().unwrap();
    }
}

fn held(log: &Arc<Log>) -> (Producer, Arc<std::sync::atomic::AtomicUsize>) {
    let config = ProducerConfig::transactional(9, 0)
        .acks(Acks::One)
        .batch_size(300)
        .linger_ms(0)
        .build()
        .unwrap();
    let producer = Producer::new(Arc::clone(log), config).unwrap();
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    producer
        .begin_held(HeldBatchHook::new(move || {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }))
        .unwrap();
    (producer, calls)
}

/// Issue 33 (the engine's batched `AddPartitionsToTxn`): a transaction begun held queues its
/// records but appends nothing until `release`; its due batches call the hook; commit and
/// abort refuse while held; once released everything is appended and commits.
#[test]
fn a_held_transaction_appends_nothing_until_released() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path());
    let (producer, calls) = held(&log);
    let handles = send_all(&producer, 0..10);
    while calls.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        std::thread::yield_now();
    }
    assert_eq!(log.log_end_offset(), 0, "a held batch reached the log");
    assert!(is_txn_state(producer.commit()));
    assert!(is_txn_state(producer.abort()));
    producer.release().unwrap();
    assert_eq!(wait_all(handles), (0..10).collect::<Vec<i64>>());
    producer.commit().unwrap();
    assert_eq!(
        committed_values(&log),
        (0..10).map(value).collect::<Vec<_>>()
    );
}

/// Closing a producer before its held transaction is released fails the held batches,
/// unappended; `refuse_held` fails them with the caller's error.
#[test]
fn held_batches_fail_unappended_on_close_or_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path());
    let (producer, _) = held(&log);
    let handles = send_all(&producer, 0..4);
    assert!(matches!(producer.close(), Err(Error::Closed)));
    for handle in handles {
        assert!(matches!(handle.wait(), Err(Error::Closed)));
    }
    assert_eq!(log.log_end_offset(), 0);

    let (producer, _) = held(&log);
    let handles = send_all(&producer, 0..4);
    producer.refuse_held(Error::InvalidRequest {
        why: "not added".to_owned(),
    });
    for handle in handles {
        assert!(matches!(handle.wait(), Err(Error::InvalidRequest { .. })));
    }
    assert!(matches!(
        producer.release(),
        Err(Error::InvalidRequest { .. })
    ));
    // Refused, the transaction can only be aborted; nothing reached the log.
    assert!(is_txn_state(producer.commit()));
    producer.abort().unwrap();
    assert_eq!(log.log_end_offset(), 0);
}

/// `request_flush` seals a lingering batch so that the sender appends it now, without waiting
/// (issue 33: the engine requests every partition's flush before waiting on any).
#[test]
fn request_flush_appends_a_lingering_batch_without_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path());
    let config = ProducerConfig::builder()
        .acks(Acks::One)
        .linger_ms(3_600_000)
        .build()
        .unwrap();
    let producer = Producer::new(Arc::clone(&log), config).unwrap();
    let handles = send_all(&producer, 0..3);
    assert_eq!(log.log_end_offset(), 0, "an hour's linger holds the batch");
    producer.request_flush();
    assert_eq!(wait_all(handles), vec![0, 1, 2]);
    producer.close().unwrap();
}
