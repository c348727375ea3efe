//! The batching writer with its sender on a `Workers` pool (a log opened with
//! `LogConfigBuilder::workers`): the key producer behaviours of `tests/producer.rs` and
//! `tests/producer_modes.rs` again, pooled: `acks=all` across truncations, the idempotent and
//! transactional modes, `close` with pending sends, memory back-pressure, many producers
//! sharing a small pool, and that nothing of a closed producer stays in the pool.
//!
//! `cargo test --all-features --test producer_pooled`.

use std::sync::Arc;

use partlog::{
    Acks, Error, Log, LogConfig, NewRecord, Producer, ProducerConfig, ReadBound, SendHandle,
    Workers,
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

fn open_log(dir: &std::path::Path, workers: &Workers) -> Arc<Log> {
    let config = LogConfig::builder()
        .workers(workers.clone())
        .build()
        .unwrap();
    Arc::new(Log::open(dir, config).unwrap())
}

fn producer(log: &Arc<Log>, acks: Acks) -> Producer {
    Producer::new(
        Arc::clone(log),
        ProducerConfig::builder().acks(acks).build().unwrap(),
    )
    .unwrap()
}

fn read_all(log: &Log) -> Vec<(i64, Vec<u8>)> {
    log.records(log.log_start_offset(), ReadBound::LogEnd)
        .map(|r| r.map(|r| (r.offset, r.value.unwrap_or_default())))
        .collect::<partlog::Result<_>>()
        .unwrap()
}

fn committed_values(log: &Log) -> Vec<Vec<u8>> {
    log.committed_records(log.log_start_offset(), ReadBound::LogEnd)
        .map(|r| r.map(|r| r.value.unwrap_or_default()))
        .collect::<partlog::Result<_>>()
        .unwrap()
}

/// Waits until the log ends at `end` or beyond: the sender appended what it was sent.
fn wait_for_end(log: &Log, end: i64) {
    while log.log_end_offset() < end {
        std::thread::yield_now();
    }
}

#[test]
fn pooled_acks_all_resolves_only_once_the_offset_is_durable() {
    let dir = tempfile::tempdir().unwrap();
    let workers = Workers::new(2).unwrap();
    let log = open_log(dir.path(), &workers);
    let producer = producer(&log, Acks::All);
    let handles: Vec<SendHandle> = (0..300)
        .map(|i| producer.send(&record(i)).unwrap())
        .collect();
    for (i, handle) in handles.into_iter().enumerate() {
        let offset = handle.wait().unwrap();
        assert_eq!(offset, i as i64);
        assert!(log.durable_offset() > offset, "offset {offset} not durable");
    }
    producer.close().unwrap();
}

/// `tests/producer.rs`'s issue29_item14, pooled: `flush` and `close` report an `acks=all`
/// record a truncation removed, as its handle does, and once only.
#[test]
fn pooled_flush_and_close_report_an_acks_all_record_a_truncation_removed() {
    let dir = tempfile::tempdir().unwrap();
    let workers = Workers::new(2).unwrap();
    let log = open_log(dir.path(), &workers);
    let producer = producer(&log, Acks::All);
    let original = producer.send(&record(0)).unwrap();
    wait_for_end(&log, 1);
    assert_eq!(log.truncate_to(0).unwrap(), 0);
    let impostor = log.append(&[record(99)]).unwrap();
    assert_eq!(impostor.first_offset, 0);
    log.wait_durable(0).unwrap();
    assert!(matches!(producer.flush(), Err(Error::Truncated { at: 0 })));
    assert!(matches!(original.wait(), Err(Error::Truncated { at: 0 })));
    let next = producer.send(&record(1)).unwrap();
    producer.flush().unwrap();
    assert_eq!(next.wait().unwrap(), 1);
    let lost = producer.send(&record(2)).unwrap();
    wait_for_end(&log, 3);
    assert_eq!(log.truncate_to(2).unwrap(), 2);
    log.append(&[record(98)]).unwrap();
    log.sync().unwrap();
    assert!(matches!(producer.close(), Err(Error::Truncated { at: 2 })));
    assert!(matches!(lost.wait(), Err(Error::Truncated { at: 2 })));
    assert_eq!(
        read_all(&log),
        vec![(0, value(99)), (1, value(1)), (2, value(98))]
    );
}

/// A truncation between flushes: the next flush waits for what was sent since, at the offsets
/// the truncation left, and the pooled sender goes on appending after it.
#[test]
fn pooled_flush_after_a_truncation_waits_for_what_was_sent_since() {
    let dir = tempfile::tempdir().unwrap();
    let workers = Workers::new(2).unwrap();
    let log = open_log(dir.path(), &workers);
    let producer = producer(&log, Acks::All);
    let first = producer.send(&record(0)).unwrap();
    producer.flush().unwrap();
    let handles: Vec<SendHandle> = (1..4).map(|i| producer.send(&record(i)).unwrap()).collect();
    producer.flush().unwrap();
    assert_eq!(first.wait().unwrap(), 0);
    for handle in handles {
        handle.wait().unwrap();
    }
    assert_eq!(log.truncate_to(1).unwrap(), 1);
    let handle = producer.send(&record(10)).unwrap();
    producer.flush().unwrap();
    assert_eq!(handle.wait().unwrap(), 1);
    assert!(log.durable_offset() > 1, "the flushed record is durable");
    assert_eq!(read_all(&log), vec![(0, value(0)), (1, value(10))]);
    producer.close().unwrap();
}

#[test]
fn pooled_idempotent_batches_carry_consecutive_sequences() {
    let dir = tempfile::tempdir().unwrap();
    let workers = Workers::new(2).unwrap();
    let log = open_log(dir.path(), &workers);
    let config = ProducerConfig::idempotent(7, 3)
        .acks(Acks::One)
        .batch_size(300)
        .linger_ms(0)
        .build()
        .unwrap();
    let producer = Producer::new(Arc::clone(&log), config).unwrap();
    let handles: Vec<SendHandle> = (0..20)
        .map(|i| producer.send(&record(i)).unwrap())
        .collect();
    let offsets: Vec<i64> = handles.into_iter().map(|h| h.wait().unwrap()).collect();
    assert_eq!(offsets, (0..20).collect::<Vec<i64>>());
    producer.close().unwrap();
    let state = log.producer_state(7).unwrap();
    assert_eq!((state.producer_epoch, state.last_sequence), (3, 19));
    assert!(
        producer.stats().batches_appended >= 5,
        "one record a batch or two"
    );
}

#[test]
fn pooled_transactions_commit_and_abort_as_read_committed_sees_them() {
    let dir = tempfile::tempdir().unwrap();
    let workers = Workers::new(2).unwrap();
    let log = open_log(dir.path(), &workers);
    let config = ProducerConfig::transactional(42, 0)
        .acks(Acks::All)
        .build()
        .unwrap();
    let producer = Producer::new(Arc::clone(&log), config).unwrap();
    assert!(matches!(
        producer.send(&record(0)),
        Err(Error::InvalidTxnState { .. })
    ));
    producer.begin().unwrap();
    let committed: Vec<SendHandle> = (0..10)
        .map(|i| producer.send(&record(i)).unwrap())
        .collect();
    producer.commit().unwrap();
    producer.begin().unwrap();
    let aborted: Vec<SendHandle> = (10..20)
        .map(|i| producer.send(&record(i)).unwrap())
        .collect();
    producer.abort().unwrap();
    for handle in committed.into_iter().chain(aborted) {
        handle.wait().unwrap();
    }
    assert_eq!(
        committed_values(&log),
        (0..10).map(value).collect::<Vec<_>>()
    );
    producer.close().unwrap();
}

/// `close` with records lingering (a linger of a minute): it appends every accepted record,
/// resolves every handle, refuses later sends, and leaves nothing of the producer in the pool
/// (the log's only reference is the test's once the producer is dropped). Dropping a pooled
/// producer does the same.
#[test]
fn pooled_close_with_pending_sends_drains_and_leaves_the_pool() {
    let dir = tempfile::tempdir().unwrap();
    let workers = Workers::new(2).unwrap();
    let log = open_log(dir.path(), &workers);
    let config = ProducerConfig::builder()
        .linger_ms(60_000)
        .acks(Acks::One)
        .build()
        .unwrap();
    let producer = Producer::new(Arc::clone(&log), config.clone()).unwrap();
    let handles: Vec<SendHandle> = (0..100)
        .map(|i| producer.send(&record(i)).unwrap())
        .collect();
    assert_eq!(log.log_end_offset(), 0, "the batch lingers");
    producer.close().unwrap();
    assert_eq!(log.log_end_offset(), 100);
    for (i, handle) in handles.into_iter().enumerate() {
        assert_eq!(handle.wait().unwrap(), i as i64);
    }
    assert!(matches!(producer.send(&record(0)), Err(Error::Closed)));
    producer.close().unwrap();
    drop(producer);
    assert_eq!(
        Arc::strong_count(&log),
        1,
        "the pool still holds the producer"
    );

    let producer = Producer::new(Arc::clone(&log), config).unwrap();
    let handle = producer.send(&record(100)).unwrap();
    drop(producer);
    assert_eq!(handle.wait().unwrap(), 100);
    assert_eq!(
        Arc::strong_count(&log),
        1,
        "the pool still holds the producer"
    );
}

/// Memory back-pressure: a `buffer.memory` of 2 KB and a linger of a minute; each send that
/// finds the buffer full wakes the pooled sender, which seals and appends the lingering batch.
#[test]
fn pooled_a_blocked_send_makes_the_sender_seal_lingering_batches() {
    let dir = tempfile::tempdir().unwrap();
    let workers = Workers::new(2).unwrap();
    let log = open_log(dir.path(), &workers);
    let config = ProducerConfig::builder()
        .linger_ms(60_000)
        .buffer_memory(2048)
        .acks(Acks::One)
        .build()
        .unwrap();
    let producer = Producer::new(Arc::clone(&log), config).unwrap();
    let handles: Vec<SendHandle> = (0..200)
        .map(|i| producer.send(&record(i)).unwrap())
        .collect();
    producer.flush().unwrap();
    for (i, handle) in handles.into_iter().enumerate() {
        assert_eq!(handle.wait().unwrap(), i as i64);
    }
    let stats = producer.stats();
    assert_eq!(stats.records_appended, 200, "{stats:?}");
    assert!(stats.blocked_sends > 0, "{stats:?}");
    assert_eq!(stats.waiting_sends, 0);
    producer.close().unwrap();
}

/// 40 producers, each on its own log, share a pool of 2 threads: 4 threads send to all of
/// them at once, `acks=all`. Every record is appended once, at its producer's next offset, and
/// durable: a busy producer's runs leave the others (and the flushers) their turn.
#[test]
fn pooled_many_producers_on_a_small_pool_all_make_progress_in_order() {
    const LOGS: usize = 40;
    const THREADS: usize = 4;
    const PER_LOG_PER_THREAD: usize = 50;
    let root = tempfile::tempdir().unwrap();
    let workers = Workers::new(2).unwrap();
    let producers: Arc<Vec<Producer>> = Arc::new(
        (0..LOGS)
            .map(|i| {
                let log = open_log(&root.path().join(format!("p-{i}")), &workers);
                producer(&log, Acks::All)
            })
            .collect(),
    );
    let senders: Vec<_> = (0..THREADS)
        .map(|t| {
            let producers = Arc::clone(&producers);
            std::thread::spawn(move || {
                let mut handles = Vec::new();
                for i in 0..PER_LOG_PER_THREAD {
                    for (p, producer) in producers.iter().enumerate() {
                        let value = format!("{t}:{i}");
                        let handle = producer
                            .send(&NewRecord::new(T0, None, Some(value.as_bytes())))
                            .unwrap();
                        handles.push((p, handle));
                    }
                }
                let mut last = vec![-1i64; producers.len()];
                for (p, handle) in handles {
                    let offset = handle.wait().unwrap();
                    assert!(offset > last[p], "thread {t} reordered on log {p}");
                    assert!(producers[p].log().durable_offset() > offset);
                    last[p] = offset;
                }
            })
        })
        .collect();
    for sender in senders {
        sender.join().unwrap();
    }
    for producer in producers.iter() {
        producer.close().unwrap();
        assert_eq!(
            producer.log().log_end_offset(),
            (THREADS * PER_LOG_PER_THREAD) as i64
        );
    }
}
