//! The batching writer: ordering, offsets, batching by size and by linger, the three
//! `acks` levels, back-pressure, close, concurrency and error delivery; and the future forms of
//! `wait_durable` and `wait_for_data`, driven by a tiny std-only executor.
//!
//! Time-based behaviour runs on the manual clock (feature `sim`): nothing here waits for time to
//! pass. `cargo test --all-features --test producer`.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::Duration;

use partlog::{
    Acks, Error, Log, LogConfig, NewRecord, Producer, ProducerConfig, ReadBound, SendHandle,
};

const T0: i64 = 1_700_000_000_000;

/// Wakes the thread that runs [`block_on`].
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

fn thread_waker() -> Waker {
    Waker::from(Arc::new(Unpark(std::thread::current())))
}

/// The smallest executor: poll, park until woken, poll again.
fn block_on<F: Future>(future: F) -> F::Output {
    let waker = thread_waker();
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        std::thread::park();
    }
}

/// Polls once: `Some` if the future is ready.
fn poll_once<F: Future + Unpin>(future: &mut F) -> Option<F::Output> {
    let waker = thread_waker();
    match std::pin::Pin::new(future).poll(&mut Context::from_waker(&waker)) {
        Poll::Ready(output) => Some(output),
        Poll::Pending => None,
    }
}

fn value(i: usize) -> Vec<u8> {
    // 100-byte values, each naming its record.
    let mut value = format!("record {i:>8} ").into_bytes();
    value.resize(100, b'.');
    value
}

fn record(i: usize) -> NewRecord {
    NewRecord::new(T0 + i as i64, None, Some(&value(i)))
}

/// Every record of the log as (offset, value).
fn read_all(log: &Log) -> Vec<(i64, Vec<u8>)> {
    log.records(log.log_start_offset(), ReadBound::LogEnd)
        .map(|r| r.map(|r| (r.offset, r.value.unwrap_or_default())))
        .collect::<partlog::Result<_>>()
        .unwrap()
}

/// Every batch of the log as (records, bytes).
#[cfg(feature = "sim")]
fn batches(log: &Log) -> Vec<(i32, usize)> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let fetch = log.read(offset, 1 << 20, ReadBound::LogEnd).unwrap();
        for batch in fetch.batches() {
            let batch = batch.unwrap();
            out.push((batch.header().unwrap().records_count, batch.total_size()));
        }
        offset = fetch.next_offset();
    }
    out
}

fn open_log(dir: &std::path::Path) -> Arc<Log> {
    Arc::new(Log::open(dir, LogConfig::default()).unwrap())
}

fn producer(log: &Arc<Log>, acks: Acks) -> Producer {
    Producer::new(
        Arc::clone(log),
        ProducerConfig::builder().acks(acks).build().unwrap(),
    )
    .unwrap()
}

#[test]
fn offsets_from_handles_match_what_reads_return_in_send_order() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path());
    let producer = producer(&log, Acks::One);
    let handles: Vec<SendHandle> = (0..500)
        .map(|i| producer.send(&record(i)).unwrap())
        .collect();
    let offsets: Vec<i64> = handles.into_iter().map(|h| h.wait().unwrap()).collect();
    assert_eq!(offsets, (0..500).collect::<Vec<i64>>());
    let read = read_all(&log);
    assert_eq!(read.len(), 500);
    for (i, (offset, value)) in read.into_iter().enumerate() {
        assert_eq!(offset, offsets[i]);
        assert_eq!(value, self::value(i));
    }
    producer.close().unwrap();
}

#[test]
fn acks_all_resolves_only_once_the_offset_is_durable() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path());
    let producer = producer(&log, Acks::All);
    let handles: Vec<SendHandle> = (0..300)
        .map(|i| producer.send(&record(i)).unwrap())
        .collect();
    for (i, handle) in handles.into_iter().enumerate() {
        let offset = if i % 2 == 0 {
            handle.wait().unwrap()
        } else {
            block_on(handle).unwrap()
        };
        assert_eq!(offset, i as i64);
        assert!(log.durable_offset() > offset, "offset {offset} not durable");
    }
    producer.close().unwrap();
}

#[test]
fn handles_and_futures_can_move_between_threads_and_tasks() {
    fn movable<T: Send + Sync + Unpin + 'static>() {}
    movable::<SendHandle>();
    movable::<partlog::WaitDurable>();
    movable::<partlog::WaitForData>();
    movable::<Producer>();
}

#[test]
fn send_parts_stores_keys_headers_and_tombstones_as_given() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path());
    let producer = producer(&log, Acks::One);
    let first = producer
        .send_parts(
            T0,
            Some(b"k1"),
            Some(b"v1"),
            &[("trace", Some(&b"abc"[..]))],
        )
        .unwrap();
    let second = producer
        .send_parts::<&str>(T0 + 1, Some(b"k1"), None, &[])
        .unwrap();
    assert_eq!((first.wait().unwrap(), second.wait().unwrap()), (0, 1));
    let records: Vec<_> = log
        .records(0, ReadBound::LogEnd)
        .collect::<partlog::Result<_>>()
        .unwrap();
    assert_eq!(records.len(), 2);
    assert_eq!(records[0].timestamp, T0);
    assert_eq!(records[0].key.as_deref(), Some(&b"k1"[..]));
    assert_eq!(records[0].value.as_deref(), Some(&b"v1"[..]));
    assert_eq!(
        records[0].headers,
        vec![("trace".to_string(), Some(b"abc".to_vec()))]
    );
    assert_eq!(
        (records[1].timestamp, records[1].value.as_deref()),
        (T0 + 1, None)
    );
}

#[test]
fn records_append_would_refuse_are_refused_at_send() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig::builder()
        .cleanup_policy(partlog::CleanupPolicy::COMPACT)
        .build()
        .unwrap();
    let log = Arc::new(Log::open(dir.path(), config).unwrap());
    let producer = producer(&log, Acks::One);
    assert!(matches!(
        producer.send(&NewRecord::new(T0, None, Some(b"no key"))),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(matches!(
        producer.send(&NewRecord::new(-5, Some(b"k"), Some(b"v"))),
        Err(Error::InvalidTimestamp { timestamp: -5, .. })
    ));
    // The refused records took no place: the next one gets offset 0.
    let handle = producer
        .send(&NewRecord::new(T0, Some(b"k"), Some(b"v")))
        .unwrap();
    assert_eq!(handle.wait().unwrap(), 0);
}

#[test]
fn acks_one_resolves_once_appended_and_readable() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path());
    let producer = producer(&log, Acks::One);
    let offset = producer.send(&record(7)).unwrap().wait().unwrap();
    assert_eq!(offset, 0);
    assert!(log.log_end_offset() > offset);
    assert_eq!(read_all(&log), vec![(0, value(7))]);
    producer.close().unwrap();
}

#[test]
fn a_handle_answers_the_same_when_asked_again() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path());
    let producer = producer(&log, Acks::All);
    let mut handle = producer.send(&record(0)).unwrap();
    let first = loop {
        if let Some(result) = handle.wait_timeout(Duration::from_secs(60)) {
            break result.unwrap();
        }
    };
    assert_eq!(handle.wait_timeout(Duration::ZERO).unwrap().unwrap(), first);
    assert_eq!(block_on(handle).unwrap(), first);
}

#[test]
fn many_threads_sending_keep_each_threads_order() {
    const THREADS: usize = 8;
    const PER_THREAD: usize = 400;
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path());
    let producer = Arc::new(producer(&log, Acks::One));
    let senders: Vec<_> = (0..THREADS)
        .map(|t| {
            let producer = Arc::clone(&producer);
            std::thread::spawn(move || {
                let handles: Vec<SendHandle> = (0..PER_THREAD)
                    .map(|i| {
                        let record = NewRecord::new(T0, None, Some(format!("{t}:{i}").as_bytes()));
                        producer.send(&record).unwrap()
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.wait().unwrap())
                    .collect::<Vec<i64>>()
            })
        })
        .collect();
    let offsets: Vec<Vec<i64>> = senders.into_iter().map(|s| s.join().unwrap()).collect();
    producer.flush().unwrap();
    let read = read_all(&log);
    assert_eq!(read.len(), THREADS * PER_THREAD);
    for (t, offsets) in offsets.iter().enumerate() {
        assert!(
            offsets.windows(2).all(|w| w[0] < w[1]),
            "thread {t} reordered"
        );
        for (i, offset) in offsets.iter().enumerate() {
            let (read_offset, value) = &read[usize::try_from(*offset).unwrap()];
            assert_eq!(read_offset, offset);
            assert_eq!(value, format!("{t}:{i}").as_bytes());
        }
    }
    // With 8 threads sending, batches formed: far fewer appends than records.
    assert!(log.stats().appends < (THREADS * PER_THREAD) as u64);
}

#[test]
fn a_record_too_large_for_the_log_fails_at_send() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig::builder()
        .max_message_bytes(2_000)
        .build()
        .unwrap();
    let log = Arc::new(Log::open(dir.path(), config).unwrap());
    let producer = producer(&log, Acks::One);
    let big = NewRecord::new(T0, None, Some(&[1u8; 2_000]));
    match producer.send(&big) {
        Err(Error::RecordTooLarge { max, .. }) => assert_eq!(max, 2_000),
        other => panic!("expected RecordTooLarge, got {other:?}"),
    }
    // One that fits alone still goes, alone in its batch.
    let fits = NewRecord::new(T0, None, Some(&[1u8; 1_800]));
    assert_eq!(producer.send(&fits).unwrap().wait().unwrap(), 0);
    let small_buffer = Producer::new(
        Arc::clone(&log),
        ProducerConfig::builder()
            .buffer_memory(500)
            .acks(Acks::One)
            .build()
            .unwrap(),
    )
    .unwrap();
    match small_buffer.send(&fits) {
        Err(Error::RecordTooLarge { max, .. }) => assert_eq!(max, 500),
        other => panic!("expected RecordTooLarge for buffer.memory, got {other:?}"),
    }
}

#[test]
fn batches_take_the_logs_codec_and_never_exceed_max_message_bytes() {
    for (codec, id) in [
        (partlog::CompressionType::Lz4, 3),
        (partlog::CompressionType::Zstd, 4),
        (partlog::CompressionType::Producer, 0),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig::builder()
            .compression_type(codec)
            .max_message_bytes(4096)
            .build()
            .unwrap();
        let log = Arc::new(Log::open(dir.path(), config).unwrap());
        // batch.size (16384) above max.message.bytes (4096): the log's limit wins.
        let producer = producer(&log, Acks::One);
        // Incompressible values (an LCG), the worst case for a codec's framing.
        let mut state = 0x9e37_79b9_u32;
        let handles: Vec<SendHandle> = (0..300)
            .map(|_| {
                let value: Vec<u8> = (0..100)
                    .map(|_| {
                        state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                        (state >> 24) as u8
                    })
                    .collect();
                producer
                    .send(&NewRecord::new(T0, None, Some(&value)))
                    .unwrap()
            })
            .collect();
        producer.flush().unwrap();
        for (i, handle) in handles.into_iter().enumerate() {
            assert_eq!(handle.wait().unwrap(), i as i64);
        }
        let fetch = log.read(0, 1 << 20, ReadBound::LogEnd).unwrap();
        let mut batches = 0;
        for batch in fetch.batches() {
            let batch = batch.unwrap();
            assert_eq!(batch.compression_id(), id, "{codec:?}");
            assert!(
                batch.total_size() <= 4096,
                "{codec:?}: {}",
                batch.total_size()
            );
            batches += 1;
        }
        assert!(batches > 1 && batches < 300, "{codec:?}: {batches} batches");
        assert_eq!(read_all(&log).len(), 300);
    }
}

#[test]
fn a_read_only_log_takes_no_producer() {
    let dir = tempfile::tempdir().unwrap();
    drop(Log::open(dir.path(), LogConfig::default()).unwrap());
    let log = Arc::new(Log::open_read_only(dir.path(), LogConfig::default()).unwrap());
    assert!(matches!(
        Producer::new(log, ProducerConfig::default()),
        Err(Error::Unsupported { .. })
    ));
}

#[test]
fn records_a_closed_log_refuses_fail_their_handles_and_flush() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path());
    // A linger no test run reaches: the records stay queued until the log is gone.
    let producer = Producer::new(
        Arc::clone(&log),
        ProducerConfig::builder()
            .linger_ms(3_600_000)
            .acks(Acks::One)
            .build()
            .unwrap(),
    )
    .unwrap();
    let handles: Vec<SendHandle> = (0..50)
        .map(|i| producer.send(&record(i)).unwrap())
        .collect();
    log.close().unwrap();
    assert!(matches!(producer.flush(), Err(Error::Closed)));
    for handle in handles {
        assert!(matches!(handle.wait(), Err(Error::Closed)));
    }
    assert!(matches!(producer.send(&record(0)), Err(Error::Closed)));
    // Reported once: a second flush has nothing new to say.
    producer.flush().unwrap();
    let stats = producer.stats();
    assert_eq!(stats.records_sent, 50, "{stats:?}");
    assert_eq!(stats.records_appended, 0, "{stats:?}");
    assert_eq!(stats.records_failed, 50, "{stats:?}");
    assert!(stats.batches_failed >= 1, "{stats:?}");
    assert_eq!(stats.buffer_used_bytes, 0, "{stats:?}");
}

#[test]
fn log_durable_future_resolves_after_the_group_commit() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path());
    let appended = log.append(&[record(0), record(1)]).unwrap();
    // The default flush policy leaves the fsync to the OS: only the future asks for one.
    block_on(log.durable(appended.last_offset)).unwrap();
    assert!(log.durable_offset() > appended.last_offset);
    // Already durable: ready at the first poll.
    assert!(poll_once(&mut log.durable(0)).unwrap().is_ok());
    // Beyond the log end: an error, not a wait.
    assert!(matches!(
        block_on(log.durable(2)),
        Err(Error::OffsetOutOfRange { requested: 2, .. })
    ));
}

#[test]
fn log_durable_future_reports_a_truncation_and_a_read_only_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path());
    for i in 0..10 {
        log.append(&[record(i)]).unwrap();
    }
    let removed = log.durable(8);
    let kept = log.durable(2);
    assert_eq!(log.truncate_to(5).unwrap(), 5);
    assert!(matches!(block_on(removed), Err(Error::Truncated { at: 5 })));
    // truncate_to is durable when it returns, and offset 2 is below the cut.
    block_on(kept).unwrap();
    log.close().unwrap();
    drop(log);
    let read_only = Log::open_read_only(dir.path(), LogConfig::default()).unwrap();
    assert!(matches!(
        block_on(read_only.durable(0)),
        Err(Error::Unsupported { .. })
    ));
}

#[test]
fn log_data_available_future_wakes_on_append_and_on_close() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path());
    let mut first = log.data_available(0);
    assert!(
        poll_once(&mut first).is_none(),
        "an empty log holds no offset 0"
    );
    let appender = {
        let log = Arc::clone(&log);
        std::thread::spawn(move || log.append(&[record(0)]).unwrap())
    };
    block_on(first).unwrap();
    appender.join().unwrap();
    assert!(log.log_end_offset() > 0);

    let mut later = log.data_available(100);
    assert!(poll_once(&mut later).is_none());
    let closer = {
        let log = Arc::clone(&log);
        std::thread::spawn(move || log.close().unwrap())
    };
    assert!(matches!(block_on(later), Err(Error::Closed)));
    closer.join().unwrap();
}

/// Tests on the manual clock and the simulator.
#[cfg(feature = "sim")]
mod sim {
    use super::*;
    use partlog::unstable::sim::{FaultError, FaultOp};
    use partlog::unstable::{ManualClock, SimStorage, Storage};

    const DIR: &str = "/producer/p-0";

    /// A log on the simulator whose clock moves only when the test moves it.
    fn sim_log() -> (Arc<Log>, Arc<ManualClock>, SimStorage) {
        let sim = SimStorage::new(7);
        let clock = Arc::new(ManualClock::new(T0));
        let storage: Arc<dyn Storage> = Arc::new(sim.clone());
        let config = LogConfig::builder()
            .storage(storage)
            .clock(Arc::clone(&clock) as _)
            .build()
            .unwrap();
        (Arc::new(Log::open(DIR, config).unwrap()), clock, sim)
    }

    fn config() -> partlog::ProducerConfigBuilder {
        // linger.ms far beyond what the tests move the clock: only size, memory, flush and
        // close seal a batch unless a test moves the clock.
        ProducerConfig::builder().linger_ms(1_000).acks(Acks::One)
    }

    #[test]
    fn batches_are_sealed_at_batch_size() {
        let (log, _clock, _sim) = sim_log();
        let producer =
            Producer::new(Arc::clone(&log), config().batch_size(4096).build().unwrap()).unwrap();
        let handles: Vec<SendHandle> = (0..1000)
            .map(|i| producer.send(&record(i)).unwrap())
            .collect();
        producer.flush().unwrap();
        for (i, handle) in handles.into_iter().enumerate() {
            assert_eq!(handle.wait().unwrap(), i as i64);
        }
        let batches = batches(&log);
        let (last, full) = batches.split_last().unwrap();
        assert!(!full.is_empty());
        for &(records, bytes) in full {
            assert!(bytes <= 4096, "a batch of {bytes} bytes exceeds batch.size");
            // The next record (about 110 bytes encoded) did not fit.
            assert!(
                bytes > 4096 - 140,
                "a batch of {bytes} bytes was sealed early"
            );
            assert!(records > 1);
        }
        assert!(last.1 <= 4096);
        let total: i32 = batches.iter().map(|b| b.0).sum();
        assert_eq!(total, 1000);
        assert_eq!(log.stats().appends, batches.len() as u64);
    }

    #[test]
    fn linger_seals_a_batch_on_the_logs_clock() {
        let (log, clock, _sim) = sim_log();
        let producer = Producer::new(Arc::clone(&log), config().build().unwrap()).unwrap();
        let mut handles: Vec<SendHandle> =
            (0..3).map(|i| producer.send(&record(i)).unwrap()).collect();
        // The clock has not moved: the batch lingers, nothing is appended.
        assert!(handles[0].wait_timeout(Duration::ZERO).is_none());
        assert_eq!(log.log_end_offset(), 0);
        clock.advance(999);
        assert_eq!(log.log_end_offset(), 0);
        clock.advance(1);
        let offsets: Vec<i64> = handles.drain(..).map(|h| h.wait().unwrap()).collect();
        assert_eq!(offsets, [0, 1, 2]);
        assert_eq!(batches(&log), [(3, batches(&log)[0].1)]);
        assert_eq!(log.stats().appends, 1);
    }

    #[test]
    fn a_clock_stepped_back_sends_the_lingering_batch_instead_of_holding_it() {
        let (log, clock, _sim) = sim_log();
        let producer = Producer::new(Arc::clone(&log), config().build().unwrap()).unwrap();
        let handle = producer.send(&record(0)).unwrap();
        // An hour back: the batch goes out without waiting for the clock to come back to
        // where the batch was opened.
        clock.advance(-3_600_000);
        assert_eq!(handle.wait().unwrap(), 0);
    }

    #[test]
    fn acks_zero_is_done_when_queued() {
        let (log, _clock, _sim) = sim_log();
        let producer =
            Producer::new(Arc::clone(&log), config().acks(Acks::Zero).build().unwrap()).unwrap();
        let mut handle = producer.send(&record(0)).unwrap();
        // Done before anything is appended; the offset is unknown, as in Kafka.
        assert_eq!(handle.wait_timeout(Duration::ZERO).unwrap().unwrap(), -1);
        assert_eq!(log.log_end_offset(), 0);
        producer.flush().unwrap();
        assert_eq!(read_all(&log), vec![(0, value(0))]);
    }

    #[test]
    fn a_full_buffer_fails_send_after_max_block_ms() {
        let (log, _clock, _sim) = sim_log();
        let producer = Producer::new(
            Arc::clone(&log),
            config()
                .buffer_memory(2048)
                .max_block_ms(0)
                .build()
                .unwrap(),
        )
        .unwrap();
        let mut accepted = 0;
        let error = loop {
            match producer.send(&record(accepted)) {
                Ok(_) => accepted += 1,
                Err(error) => break error,
            }
            assert!(accepted < 100, "buffer.memory never filled");
        };
        match &error {
            Error::BufferExhausted {
                buffer_memory,
                max_block_ms,
            } => assert_eq!((*buffer_memory, *max_block_ms), (2048, 0)),
            other => panic!("expected BufferExhausted, got {other:?}"),
        }
        assert!(error.to_string().contains("buffer.memory (2048 bytes)"));
        // About 110 encoded bytes a record: the buffer held what fits in 2048.
        assert!((15..=19).contains(&accepted), "{accepted} records accepted");
        // Nothing was appended yet; a flush frees the memory, and sends go through again.
        assert_eq!(log.log_end_offset(), 0);
        producer.flush().unwrap();
        assert_eq!(log.log_end_offset(), accepted as i64);
        assert!(producer.send(&record(accepted)).is_ok());
    }

    #[test]
    fn a_blocked_send_makes_the_sender_seal_lingering_batches() {
        let (log, _clock, _sim) = sim_log();
        let producer = Producer::new(
            Arc::clone(&log),
            config().buffer_memory(2048).build().unwrap(),
        )
        .unwrap();
        // Far more than 2048 bytes, with a linger the clock never reaches: each send that finds
        // the buffer full waits until the sender seals and appends the lingering batch.
        let handles: Vec<SendHandle> = (0..200)
            .map(|i| producer.send(&record(i)).unwrap())
            .collect();
        producer.flush().unwrap();
        for (i, handle) in handles.into_iter().enumerate() {
            assert_eq!(handle.wait().unwrap(), i as i64);
        }
        assert!(batches(&log).iter().all(|&(_, bytes)| bytes <= 2048 + 61));
        // The producer's figures agree with the log's.
        let stats = producer.stats();
        let log_stats = log.stats();
        assert_eq!(stats.records_sent, 200, "{stats:?}");
        assert_eq!(stats.records_appended, 200, "{stats:?}");
        assert_eq!(stats.batches_appended, log_stats.appends, "{stats:?}");
        assert_eq!(stats.bytes_appended, log_stats.appended_bytes, "{stats:?}");
        assert_eq!((stats.records_failed, stats.batches_failed), (0, 0));
        assert!(stats.blocked_sends > 0, "{stats:?}");
        assert!(stats.blocked_time > Duration::ZERO, "{stats:?}");
        assert_eq!(stats.waiting_sends, 0);
        assert_eq!(
            (stats.buffer_used_bytes, stats.buffer_available_bytes),
            (0, 2048)
        );
    }

    #[test]
    fn close_drains_everything_accepted_and_drop_too() {
        let (log, _clock, _sim) = sim_log();
        let producer = Producer::new(Arc::clone(&log), config().build().unwrap()).unwrap();
        // 100 records of about 110 bytes: less than one batch.size, so all of them linger.
        let handles: Vec<SendHandle> = (0..100)
            .map(|i| producer.send(&record(i)).unwrap())
            .collect();
        assert_eq!(log.log_end_offset(), 0);
        producer.close().unwrap();
        assert_eq!(log.log_end_offset(), 100);
        for (i, handle) in handles.into_iter().enumerate() {
            assert_eq!(handle.wait().unwrap(), i as i64);
        }
        assert!(matches!(producer.send(&record(0)), Err(Error::Closed)));
        producer.close().unwrap();

        let producer = Producer::new(Arc::clone(&log), config().build().unwrap()).unwrap();
        let handle = producer.send(&record(100)).unwrap();
        drop(producer);
        assert_eq!(handle.wait().unwrap(), 100);
        assert_eq!(read_all(&log).last().unwrap(), &(100, value(100)));
    }

    #[test]
    fn a_failed_fsync_fails_every_acks_all_handle() {
        let (log, _clock, sim) = sim_log();
        let producer =
            Producer::new(Arc::clone(&log), config().acks(Acks::All).build().unwrap()).unwrap();
        sim.fail_nth(FaultOp::Sync, 1, FaultError::Eio);
        let handles: Vec<SendHandle> = (0..20)
            .map(|i| producer.send(&record(i)).unwrap())
            .collect();
        assert!(producer.flush().is_err());
        for handle in handles {
            match handle.wait() {
                Err(Error::Poisoned | Error::Io { .. }) => {}
                other => panic!("expected the failed fsync, got {other:?}"),
            }
        }
        assert!(log.stats().poisoned);
        assert!(matches!(producer.send(&record(0)), Err(Error::Poisoned)));
        assert!(log.durable_offset() <= 0);
    }

    /// A wall clock whose coarse reading lags its precise one by 900 ms (the trait allows up
    /// to a second), counting the precise reads made on the thread that created it.
    #[derive(Debug)]
    struct LaggingClock {
        now_ms: std::sync::atomic::AtomicI64,
        counted_thread: std::thread::ThreadId,
        precise_reads: std::sync::atomic::AtomicU64,
    }

    impl partlog::unstable::Clock for LaggingClock {
        fn now_ms(&self) -> i64 {
            if std::thread::current().id() == self.counted_thread {
                self.precise_reads
                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            self.now_ms.load(std::sync::atomic::Ordering::SeqCst)
        }

        fn now_ms_coarse(&self) -> i64 {
            self.now_ms.load(std::sync::atomic::Ordering::SeqCst) - 900
        }
    }

    #[test]
    fn timestamp_bounds_at_send_are_exact_though_the_coarse_clock_lags() {
        let clock = Arc::new(LaggingClock {
            now_ms: std::sync::atomic::AtomicI64::new(T0),
            counted_thread: std::thread::current().id(),
            precise_reads: std::sync::atomic::AtomicU64::new(0),
        });
        let storage: Arc<dyn Storage> = Arc::new(SimStorage::new(7));
        let log_config = LogConfig::builder()
            .storage(storage)
            .clock(Arc::clone(&clock) as _)
            .message_timestamp_before_max_ms(10_000)
            .build()
            .unwrap();
        let log = Arc::new(Log::open(DIR, log_config).unwrap());
        let producer = Producer::new(Arc::clone(&log), config().build().unwrap()).unwrap();
        let precise_reads = || {
            clock
                .precise_reads
                .load(std::sync::atomic::Ordering::SeqCst)
        };

        // Well inside both bounds: the coarse clock decides, and the precise clock is read
        // once, when the batch opens (linger.ms counts from there).
        let before = precise_reads();
        for i in 0..100 {
            drop(
                producer
                    .send(&NewRecord::new(T0 + i, None, Some(b"v")))
                    .unwrap(),
            );
        }
        assert_eq!(precise_reads() - before, 1);

        // At a bound the coarse clock cannot tell: the precise one decides, as Log::append
        // would (after.max.ms is Kafka's default hour).
        for (timestamp, accepted) in [
            (T0 + 3_600_000, true),
            (T0 + 3_600_001, false),
            (T0 - 10_000, true),
            (T0 - 10_001, false),
        ] {
            let sent = producer.send(&NewRecord::new(timestamp, None, Some(b"v")));
            let appended = log.append(&[NewRecord::new(timestamp, None, Some(b"v"))]);
            assert_eq!(sent.is_ok(), accepted, "send at {timestamp}: {sent:?}");
            assert_eq!(appended.is_ok(), accepted, "append at {timestamp}");
            if !accepted {
                assert!(matches!(sent, Err(Error::InvalidTimestamp { .. })));
            }
        }
        assert!(precise_reads() - before >= 5);
        producer.flush().unwrap();
    }

    /// `Log::append` checks its records against the coarse clock, reading the precise one only
    /// for a timestamp near a bound: the verdict stays the precise clock's, and a record well
    /// inside the bounds costs no precise read.
    #[test]
    fn append_reads_no_precise_clock_inside_the_bounds_and_stays_exact_at_them() {
        let clock = Arc::new(LaggingClock {
            now_ms: std::sync::atomic::AtomicI64::new(T0),
            counted_thread: std::thread::current().id(),
            precise_reads: std::sync::atomic::AtomicU64::new(0),
        });
        let storage: Arc<dyn Storage> = Arc::new(SimStorage::new(8));
        let log_config = LogConfig::builder()
            .storage(storage)
            .clock(Arc::clone(&clock) as _)
            .message_timestamp_before_max_ms(10_000)
            .build()
            .unwrap();
        let log = Log::open(DIR, log_config).unwrap();
        let precise_reads = || {
            clock
                .precise_reads
                .load(std::sync::atomic::Ordering::SeqCst)
        };

        let before = precise_reads();
        for i in 0..100 {
            log.append(&[NewRecord::new(T0 + i, None, Some(b"v"))])
                .unwrap();
        }
        assert_eq!(precise_reads(), before, "no precise read inside the bounds");
        assert_eq!(log.log_end_offset(), 100);

        // 900 ms of coarse lag: each of these is within it of a bound, so the precise clock
        // decides, to the millisecond.
        for (timestamp, accepted) in [
            (T0 + 3_600_000, true),
            (T0 + 3_600_001, false),
            (T0 - 10_000, true),
            (T0 - 10_001, false),
        ] {
            let reads = precise_reads();
            let appended = log.append(&[NewRecord::new(timestamp, None, Some(b"v"))]);
            assert_eq!(
                appended.is_ok(),
                accepted,
                "append at {timestamp}: {appended:?}"
            );
            if !accepted {
                assert!(matches!(appended, Err(Error::InvalidTimestamp { .. })));
            }
            assert_eq!(
                precise_reads() - reads,
                1,
                "one precise read at {timestamp}"
            );
        }
        assert_eq!(log.log_end_offset(), 102);
    }
}

/// `flush` used to wait for the highest offset the producer had ever appended: once a
/// truncation took that offset, every later `flush` failed (`OffsetOutOfRange`) although the
/// records it covered were stored and durable, until the log grew past the old offset again.
#[test]
fn flush_after_a_truncation_waits_for_what_was_sent_since_not_for_truncated_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path());
    let producer = producer(&log, Acks::All);
    // Two batches, so that the truncation can take the second whole.
    let first = producer.send(&record(0)).unwrap();
    producer.flush().unwrap();
    let handles: Vec<SendHandle> = (1..4).map(|i| producer.send(&record(i)).unwrap()).collect();
    producer.flush().unwrap();
    assert_eq!(first.wait().unwrap(), 0);
    for handle in handles {
        handle.wait().unwrap();
    }
    assert_eq!(log.log_end_offset(), 4);
    assert_eq!(log.truncate_to(1).unwrap(), 1);
    let handle = producer.send(&record(10)).unwrap();
    producer.flush().unwrap();
    assert_eq!(handle.wait().unwrap(), 1);
    assert!(log.durable_offset() > 1, "the flushed record is durable");
    assert_eq!(read_all(&log), vec![(0, value(0)), (1, value(10))]);
    producer.close().unwrap();
}

/// Issue 29, item 13: the log kept the lowest truncation point it ever had, and a durability
/// wait failed whenever any truncation came after it began and that lowest point was at or
/// below its offset, though the truncation since the wait cut far above it. A wait fails only
/// for a truncation since it began that cut at or below its own offset.
#[test]
fn issue29_item13_a_truncation_above_a_durable_record_leaves_its_waits_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path());
    let producer = producer(&log, Acks::All);
    for i in 0..10 {
        log.append(&[record(i)]).unwrap();
    }
    assert_eq!(log.truncate_to(5).unwrap(), 5);
    let handle = producer.send(&record(100)).unwrap();
    producer.flush().unwrap();
    let waiting = log.durable(5);
    for i in 0..10 {
        log.append(&[record(200 + i)]).unwrap();
    }
    assert_eq!(log.truncate_to(12).unwrap(), 12);
    assert_eq!(handle.wait().unwrap(), 5, "record 5 is intact and fsynced");
    block_on(waiting).unwrap();
    log.wait_durable(5).unwrap();
    producer.flush().unwrap();
    // A truncation that does reach a wait's offset still fails it, with its own cut.
    let reached = log.durable(11);
    let spared = log.durable(7);
    assert_eq!(log.truncate_to(9).unwrap(), 9);
    log.append(&[record(300), record(301), record(302)])
        .unwrap();
    log.sync().unwrap();
    assert!(
        log.durable_offset() > 11,
        "the refill of offset 11 is durable"
    );
    assert!(matches!(block_on(reached), Err(Error::Truncated { at: 9 })));
    block_on(spared).unwrap();
    assert_eq!(read_all(&log)[5], (5, value(100)));
    producer.close().unwrap();
}

/// Issue 29, item 14: `flush` and `close` waited only for the last appended offset to be
/// durable, so they said `Ok` for an `acks=all` record that a truncation removed while its
/// own handle said `Truncated`. They report every covered record's outcome.
#[test]
fn issue29_item14_flush_and_close_report_an_acks_all_record_a_truncation_removed() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path());
    let producer = producer(&log, Acks::All);
    let original = producer.send(&record(0)).unwrap();
    wait_for_end(&log, 1);
    assert_eq!(log.truncate_to(0).unwrap(), 0);
    let impostor = log.append(&[record(99)]).unwrap();
    assert_eq!(impostor.first_offset, 0);
    log.wait_durable(0).unwrap();
    assert!(matches!(producer.flush(), Err(Error::Truncated { at: 0 })));
    assert!(matches!(original.wait(), Err(Error::Truncated { at: 0 })));
    // Reported once: the next flush answers for what was sent since.
    let next = producer.send(&record(1)).unwrap();
    producer.flush().unwrap();
    assert_eq!(next.wait().unwrap(), 1);
    // `close` reports it the same way.
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

/// Waits until the log ends at `end` or beyond: the producer's sender appended what it was
/// sent (`linger.ms` is 5 ms of the system clock), durable or not.
fn wait_for_end(log: &Log, end: i64) {
    while log.log_end_offset() < end {
        std::thread::yield_now();
    }
}
