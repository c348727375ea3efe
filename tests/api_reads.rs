//! Reads as a library user meets them (issue 15): reads with an end (`records_until`), a
//! record view that starts at the offset asked for, the tailing iterator and its async form
//! (feature `stream`), and `ConsumerPosition`, which keeps a consumer's place.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use partlog::{
    CompressionType, ConsumerPosition, FlushPolicy, Log, LogConfig, NewRecord, ReadBound, ReadEnd,
};

const T0: i64 = 1_700_000_000_000;
/// The longest any test waits for another thread: generous, for a loaded machine.
const PATIENCE: Duration = Duration::from_secs(120);

fn value(n: i64) -> Vec<u8> {
    format!("value {n}").into_bytes()
}
/// `count` records, one batch each, stamped T0 + n seconds.
fn log_with(dir: &std::path::Path, config: LogConfig, count: i64) -> Log {
    let log = Log::open(dir, config).unwrap();
    for n in 0..count {
        log.append(&[NewRecord::new(T0 + n * 1000, None, Some(&value(n)))])
            .unwrap();
    }
    log
}
fn offsets(records: impl Iterator<Item = partlog::Result<partlog::LogRecord>>) -> Vec<i64> {
    records.map(|record| record.unwrap().offset).collect()
}
#[test]
fn records_until_an_offset_stop_below_it() {
    let temp = tempfile::tempdir().unwrap();
    let log = log_with(temp.path(), LogConfig::default(), 10);
    let until = |from, end| offsets(log.records_until(from, ReadBound::LogEnd, end));
    assert_eq!(until(2, ReadEnd::Offset(5)), [2, 3, 4]);
    assert_eq!(until(5, ReadEnd::Offset(5)), Vec::<i64>::new());
    assert_eq!(until(8, ReadEnd::Offset(100)), [8, 9]);
    assert_eq!(until(0, ReadEnd::Unbounded).len(), 10);
    // Records appended after the iterator began stay out when they lie at or above the end.
    let mut records = log.records_until(7, ReadBound::LogEnd, ReadEnd::Offset(11));
    assert_eq!(records.next().unwrap().unwrap().offset, 7);
    for n in 10..13 {
        log.append(&[NewRecord::new(T0 + n * 1000, None, Some(&value(n)))])
            .unwrap();
    }
    assert_eq!(offsets(records), [8, 9, 10]);
}

#[test]
fn records_until_a_timestamp_stop_below_the_first_record_at_it() {
    let temp = tempfile::tempdir().unwrap();
    let log = log_with(temp.path(), LogConfig::default(), 10);
    let until =
        |from, ts| offsets(log.records_until(from, ReadBound::LogEnd, ReadEnd::Timestamp(ts)));
    // Record n is stamped T0 + n s: the first at or after T0 + 4.5 s is offset 5.
    assert_eq!(until(2, T0 + 4500), [2, 3, 4]);
    assert_eq!(until(0, T0 + 3000), [0, 1, 2]);
    assert_eq!(until(0, T0), Vec::<i64>::new());
    // Every record older: up to the log end offset.
    assert_eq!(until(7, T0 + 3_600_000), [7, 8, 9]);
    let mut records = log.records_until(0, ReadBound::LogEnd, ReadEnd::Timestamp(T0 + 2000));
    assert_eq!(records.end_offset(), None, "resolved at the first next");
    records.next().unwrap().unwrap();
    assert_eq!(records.end_offset(), Some(2));
}

#[test]
fn the_record_view_of_a_read_starts_exactly_at_the_offset_asked_for() {
    for compression in [CompressionType::Uncompressed, CompressionType::Lz4] {
        let temp = tempfile::tempdir().unwrap();
        let config = LogConfig::builder()
            .compression_type(compression)
            .build()
            .unwrap();
        let log = Log::open(temp.path(), config).unwrap();
        let batch: Vec<NewRecord> = (0..10)
            .map(|n| NewRecord::new(T0, None, Some(&value(n))))
            .collect();
        log.append(&batch).unwrap();
        log.append(&batch).unwrap();
        let fetch = log.read(4, 1 << 20, ReadBound::LogEnd).unwrap();
        assert_eq!(fetch.requested_offset(), 4);
        let first_batch_base = fetch.batches().next().unwrap().unwrap().last_offset() - 9;
        assert_eq!(first_batch_base, 0, "the read returns the whole batch");
        let mut seen = Vec::new();
        let mut scratch = Vec::new();
        fetch
            .for_each_record(&mut scratch, |record| {
                assert_eq!(record.value, Some(&value(record.offset % 10)[..]));
                seen.push(record.offset);
                ControlFlow::Continue(())
            })
            .unwrap();
        assert_eq!(seen, (4..20).collect::<Vec<_>>(), "{compression:?}");
        // A break stops the visit.
        let mut visited = 0;
        fetch
            .for_each_record(&mut scratch, |_| {
                visited += 1;
                if visited == 3 {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            })
            .unwrap();
        assert_eq!(visited, 3);
    }
}

#[test]
fn a_tail_takes_records_as_another_thread_appends_them() {
    let temp = tempfile::tempdir().unwrap();
    let log = Arc::new(Log::open(temp.path(), LogConfig::default()).unwrap());
    let writer = {
        let log = Arc::clone(&log);
        std::thread::spawn(move || {
            for n in 0..200 {
                log.append(&[NewRecord::new(T0 + n, None, Some(&value(n)))])
                    .unwrap();
            }
        })
    };
    let got: Vec<i64> = log
        .tail(0, ReadBound::LogEnd)
        .take(200)
        .map(|record| record.unwrap().offset)
        .collect();
    writer.join().unwrap();
    assert_eq!(got, (0..200).collect::<Vec<_>>());
}

#[test]
fn a_tail_waiting_at_the_end_ends_when_the_log_closes() {
    let temp = tempfile::tempdir().unwrap();
    let log = Arc::new(log_with(temp.path(), LogConfig::default(), 3));
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let tail = {
        let log = Arc::clone(&log);
        std::thread::spawn(move || {
            let mut tail = log.tail(1, ReadBound::Durable);
            let mut got = Vec::new();
            for record in tail.by_ref() {
                got.push(record.unwrap().offset);
                if got.len() == 2 {
                    started_tx.send(()).unwrap();
                }
            }
            (got, tail.position())
        })
    };
    // The first two come once durable; the log's close makes them so, and ends the tail.
    log.sync().unwrap();
    started_rx.recv_timeout(PATIENCE).unwrap();
    log.close().unwrap();
    let (got, position) = tail.join().unwrap();
    assert_eq!(got, [1, 2]);
    assert_eq!(position, 3);
}

#[test]
fn a_durable_tail_waits_for_the_sync_not_for_the_append() {
    let temp = tempfile::tempdir().unwrap();
    // Nothing syncs unless asked: a long flush interval.
    let config = LogConfig::builder()
        .flush_policy(FlushPolicy::Interval(Duration::from_secs(3600)))
        .build()
        .unwrap();
    let log = log_with(temp.path(), config, 1);
    let mut tail = log.tail(0, ReadBound::Durable);
    // Appended, not durable: nothing within a short wait (not a timing assertion: nothing
    // can make it durable meanwhile).
    assert_eq!(tail.next_within(Duration::from_millis(20)).unwrap(), None);
    log.sync().unwrap();
    let record = tail.next_within(PATIENCE).unwrap().unwrap();
    assert_eq!(record.offset, 0);
    assert_eq!(tail.next_within(Duration::from_millis(1)).unwrap(), None);
}

#[test]
fn a_tail_of_a_read_only_log_follows_a_live_writer() {
    let temp = tempfile::tempdir().unwrap();
    let writer = Arc::new(log_with(temp.path(), LogConfig::default(), 2));
    let config = LogConfig::builder()
        .allow_live_writer(true)
        .poll_interval(Duration::from_millis(5))
        .build()
        .unwrap();
    let reader = Log::open_read_only(temp.path(), config).unwrap();
    let appender = {
        let writer = Arc::clone(&writer);
        std::thread::spawn(move || {
            for n in 2..50 {
                writer
                    .append(&[NewRecord::new(T0 + n, None, Some(&value(n)))])
                    .unwrap();
            }
        })
    };
    let mut tail = reader.tail(0, ReadBound::LogEnd);
    let got: Vec<i64> = (0..50)
        .map(|_| tail.next_within(PATIENCE).unwrap().unwrap().offset)
        .collect();
    appender.join().unwrap();
    assert_eq!(got, (0..50).collect::<Vec<_>>());
}

#[test]
fn a_consumer_position_resumes_within_the_log() {
    let temp = tempfile::tempdir().unwrap();
    let log = log_with(&temp.path().join("t-0"), LogConfig::default(), 10);
    let path = temp.path().join("c.position");
    let mut position = ConsumerPosition::open(&path).unwrap();
    assert_eq!(position.resume_offset(&log), 0);
    let mut processed = Vec::new();
    for record in log.records(position.resume_offset(&log), ReadBound::LogEnd) {
        let record = record.unwrap();
        processed.push(record.offset);
        if record.offset == 5 {
            position.commit(record.offset + 1).unwrap();
            break;
        }
    }
    // A restart resumes after the last commit.
    let position = ConsumerPosition::open(&path).unwrap();
    assert_eq!(position.committed(), Some(6));
    assert_eq!(position.resume_offset(&log), 6);
    // Retention moved the start past it: resume at the start, not out of range.
    log.delete_records_before(8).unwrap();
    assert_eq!(position.resume_offset(&log), 8);
    // A truncation cut the log below it: resume at the end.
    let mut ahead = ConsumerPosition::open(&path).unwrap();
    ahead.commit(50).unwrap();
    assert_eq!(ahead.resume_offset(&log), 10);
}

#[cfg(feature = "sim")]
#[test]
fn a_crash_leaves_the_old_consumer_position_or_the_new_one() {
    use partlog::unstable::Storage;
    use partlog::unstable::sim::{FaultError, FaultOp, SimStorage};

    for seed in 0..50 {
        for (fault, n) in [
            (None, 0),
            (Some(FaultOp::Write), 1),
            (Some(FaultOp::Sync), 1),
            (Some(FaultOp::Rename), 1),
            (Some(FaultOp::SyncDir), 1),
        ] {
            let sim = SimStorage::new(seed);
            let storage: Arc<dyn Storage> = Arc::new(sim.clone());
            storage.create_dir_all(std::path::Path::new("/c")).unwrap();
            storage.sync_dir(std::path::Path::new("/")).unwrap();
            let path = std::path::Path::new("/c/p");
            let mut position = ConsumerPosition::open_with(Arc::clone(&storage), path).unwrap();
            position.commit(5).unwrap();
            if let Some(op) = fault {
                sim.fail_nth(op, n, FaultError::Eio);
            }
            let committed = position.commit(9);
            assert_eq!(
                committed.is_err(),
                fault.is_some(),
                "seed {seed}, {fault:?}"
            );
            sim.crash();
            let after = ConsumerPosition::open_with(Arc::clone(&storage), path)
                .unwrap()
                .committed();
            match committed {
                // Acknowledged: it must be there.
                Ok(()) => assert_eq!(after, Some(9), "seed {seed}, {fault:?}"),
                Err(_) => {
                    assert!(
                        after == Some(5) || after == Some(9),
                        "seed {seed}, {fault:?}: {after:?}"
                    );
                    assert_eq!(position.committed(), Some(5));
                }
            }
        }
    }
}

/// Polls `stream` for its next item on this thread, parking between wake-ups: a wake-up that
/// never comes fails the test after `PATIENCE` instead of hanging it.
#[cfg(feature = "stream")]
fn next_item<S: futures_core::Stream + Unpin>(stream: &mut S) -> Option<S::Item> {
    use std::task::{Context, Poll, Wake, Waker};
    struct Unpark(std::thread::Thread, std::sync::atomic::AtomicBool);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.1.store(true, std::sync::atomic::Ordering::SeqCst);
            self.0.unpark();
        }
    }
    let unpark = Arc::new(Unpark(
        std::thread::current(),
        std::sync::atomic::AtomicBool::new(false),
    ));
    let waker = Waker::from(Arc::clone(&unpark));
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        let polled = std::pin::Pin::new(&mut *stream).poll_next(&mut Context::from_waker(&waker));
        if let Poll::Ready(item) = polled {
            return item;
        }
        while !unpark.1.swap(false, std::sync::atomic::Ordering::SeqCst) {
            assert!(std::time::Instant::now() < deadline, "never woken");
            std::thread::park_timeout(Duration::from_secs(1));
        }
    }
}

#[cfg(feature = "stream")]
#[test]
fn a_tail_stream_yields_records_as_they_come_and_ends_at_close() {
    let temp = tempfile::tempdir().unwrap();
    let log = Arc::new(Log::open(temp.path(), LogConfig::default()).unwrap());
    let writer = {
        let log = Arc::clone(&log);
        std::thread::spawn(move || {
            for n in 0..100 {
                log.append(&[NewRecord::new(T0 + n, None, Some(&value(n)))])
                    .unwrap();
            }
        })
    };
    let mut stream = log.tail_stream(0, ReadBound::LogEnd);
    for n in 0..100 {
        let record = next_item(&mut stream).unwrap().unwrap();
        assert_eq!((record.offset, record.value), (n, Some(value(n))));
    }
    writer.join().unwrap();
    assert_eq!(stream.position(), 100);
    let closer = {
        let log = Arc::clone(&log);
        std::thread::spawn(move || log.close())
    };
    // Waiting at the end: the close wakes it, and the stream ends.
    assert!(next_item(&mut stream).is_none());
    closer.join().unwrap().unwrap();
}

#[cfg(feature = "stream")]
#[test]
fn a_tail_stream_of_a_log_that_follows_a_live_writer_says_it_cannot() {
    let temp = tempfile::tempdir().unwrap();
    let _writer = log_with(temp.path(), LogConfig::default(), 1);
    let config = LogConfig::builder()
        .allow_live_writer(true)
        .build()
        .unwrap();
    let reader = Log::open_read_only(temp.path(), config).unwrap();
    let mut stream = reader.tail_stream(0, ReadBound::LogEnd);
    // What is there comes; then, at the end, the stream cannot wait without blocking.
    assert_eq!(next_item(&mut stream).unwrap().unwrap().offset, 0);
    match next_item(&mut stream) {
        Some(Err(partlog::Error::Unsupported { what })) => {
            assert!(what.contains("Log::tail"), "{what}")
        }
        other => panic!("{other:?}"),
    }
    assert!(next_item(&mut stream).is_none());
}

#[cfg(feature = "stream")]
#[test]
fn a_durable_tail_stream_is_woken_by_the_sync() {
    let temp = tempfile::tempdir().unwrap();
    let config = LogConfig::builder()
        .flush_policy(FlushPolicy::Interval(Duration::from_secs(3600)))
        .build()
        .unwrap();
    let log = Arc::new(log_with(temp.path(), config, 2));
    let mut stream = log.tail_stream(0, ReadBound::Durable);
    let syncer = {
        let log = Arc::clone(&log);
        std::thread::spawn(move || log.sync())
    };
    assert_eq!(next_item(&mut stream).unwrap().unwrap().offset, 0);
    assert_eq!(next_item(&mut stream).unwrap().unwrap().offset, 1);
    syncer.join().unwrap().unwrap();
}

/// Readers of many sealed segments while another thread closes the log. Close closes the
/// sealed segments' files: every read returns exactly the record it asked for or
/// `Error::Closed`, never another record or a corrupt one, and a fetch taken before the close
/// still decodes after it (its bytes are its own).
#[test]
fn reads_racing_a_close_return_their_record_or_closed() {
    const RECORDS: i64 = 400;
    let temp = tempfile::tempdir().unwrap();
    let config = LogConfig::builder_for_tests()
        .segment_bytes(1024)
        .build()
        .unwrap();
    let log = Arc::new(log_with(temp.path(), config, RECORDS));
    assert!(log.stats().segments > 20, "{:?}", log.stats());
    let held = log.read(3, 1 << 20, ReadBound::LogEnd).unwrap();
    let reads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let closing = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..3)
        .map(|reader| {
            let (log, reads, closing) =
                (Arc::clone(&log), Arc::clone(&reads), Arc::clone(&closing));
            std::thread::spawn(move || {
                let started = std::time::Instant::now();
                let mut n = reader * 7;
                loop {
                    assert!(
                        started.elapsed() < PATIENCE,
                        "reader {reader} never saw the close"
                    );
                    n = (n * 31 + 17) % RECORDS;
                    let mut records =
                        log.records_until(n, ReadBound::LogEnd, ReadEnd::Offset(n + 1));
                    match records.next() {
                        Some(Ok(record)) => {
                            assert_eq!(record.offset, n);
                            assert_eq!(record.value, Some(value(n)));
                            reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        Some(Err(partlog::Error::Closed)) => return,
                        // An iterator that finds the log closed may end instead; before the
                        // close, a missing record is a lost one.
                        None => assert!(
                            closing.load(std::sync::atomic::Ordering::Acquire),
                            "reader {reader}: offset {n} missing"
                        ),
                        Some(Err(error)) => panic!("reader {reader}, offset {n}: {error}"),
                    }
                }
            })
        })
        .collect();
    let started = std::time::Instant::now();
    while reads.load(std::sync::atomic::Ordering::Relaxed) < 300 {
        assert!(started.elapsed() < PATIENCE, "the readers made no progress");
        std::thread::yield_now();
    }
    closing.store(true, std::sync::atomic::Ordering::Release);
    log.close().unwrap();
    for reader in readers {
        reader.join().unwrap();
    }
    let mut offsets = Vec::new();
    held.for_each_record(&mut Vec::new(), |record| {
        offsets.push(record.offset);
        ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(offsets.first(), Some(&3));
}
