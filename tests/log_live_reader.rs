//! `Log::open_read_only` with `allow_live_writer` (ARCHITECTURE.md §5, "Reading a log another
//! process writes"): a reader that follows a writer it does not share memory with. The writer here
//! is another `Log` in this process (the reader shares nothing with it but the files); the
//! `partlog produce` binary in a process of its own is the writer of
//! crates/partlog-cli/tests/cli_live_reader.rs.
//!
//! Nothing is timed: waits are `wait_for_data` calls with generous timeouts, and a poll is
//! forced with `refresh` where a test needs one now.

use std::path::Path;
use std::time::Duration;

use partlog::{Error, FlushPolicy, Log, LogConfig, NewRecord, ReadBound};

const TIMEOUT: Duration = Duration::from_secs(30);

fn writer_config() -> LogConfig {
    // Records are stamped in 2023: no time retention, so that only the tests' own calls delete.
    LogConfig::builder_for_tests()
        .segment_bytes(4096)
        .retention_ms(-1)
        .build()
        .unwrap()
}

fn live_config() -> LogConfig {
    LogConfig::builder_for_tests()
        .allow_live_writer(true)
        .poll_interval(Duration::from_millis(5))
        .build()
        .unwrap()
}

fn record(n: u64) -> Vec<u8> {
    format!("value-{n:06}-{}", "x".repeat((n % 50) as usize)).into_bytes()
}

fn append(log: &Log, n: u64) -> i64 {
    let value = record(n);
    log.append(&[NewRecord::new(
        1_700_000_000_000 + n as i64,
        None,
        Some(&value),
    )])
    .unwrap()
    .first_offset
}

/// Every value from `from` up to the reader's log end, in order.
fn values(log: &Log, from: i64, bound: ReadBound) -> Vec<(i64, Vec<u8>)> {
    log.records(from, bound)
        .map(|r| {
            let r = r.unwrap();
            (r.offset, r.value.unwrap())
        })
        .collect()
}

fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_live_reader_takes_no_lock_creates_nothing_and_follows_rolls() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("t-0");
    let writer = Log::open(&dir, writer_config()).unwrap();
    for n in 0..10 {
        append(&writer, n);
    }
    // Without allow_live_writer a reader needs the shared lock, which the writer's excludes.
    assert!(matches!(
        Log::open_read_only(&dir, LogConfig::for_tests()),
        Err(Error::Locked { .. })
    ));
    let before = files(&dir);
    let reader = Log::open_read_only(&dir, live_config()).unwrap();
    assert_eq!(
        files(&dir),
        before,
        "a live reader created or removed a file"
    );
    assert_eq!(reader.log_end_offset(), 10);

    // Enough to roll several 4 KiB segments.
    for n in 10..300 {
        append(&writer, n);
    }
    assert!(writer.stats().segments > 3);
    assert!(reader.wait_for_data(299, TIMEOUT).unwrap());
    let read = values(&reader, 0, ReadBound::LogEnd);
    assert_eq!(read.len(), 300);
    for (n, (offset, value)) in read.iter().enumerate() {
        assert_eq!(
            (*offset, value.as_slice()),
            (n as i64, record(n as u64).as_slice())
        );
    }
    assert_eq!(reader.stats().segments, writer.stats().segments);
    // Offsets by time work across the segments the reader discovered.
    assert_eq!(
        reader.offset_for_timestamp(1_700_000_000_250).unwrap(),
        Some((250, 1_700_000_000_250))
    );
    // And it can still not write.
    assert!(
        reader
            .append(&[NewRecord::new(0, None, Some(b"x"))])
            .is_err()
    );
    reader.close().unwrap();
    writer.close().unwrap();
}

#[test]
fn durable_reads_stop_at_the_writers_recorded_recovery_point() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("t-0");
    let config = LogConfig::builder_for_tests()
        .segment_bytes(1 << 20)
        .recovery_point_ms(1)
        .recovery_point_bytes(1)
        .build()
        .unwrap();
    let writer = Log::open(&dir, config).unwrap();
    let reader = Log::open_read_only(&dir, live_config()).unwrap();
    for n in 0..20 {
        append(&writer, n);
    }
    assert!(reader.wait_for_data(19, TIMEOUT).unwrap());
    // Nothing was fsynced (the OS decides): nothing is durable, so a durable read is empty.
    assert_eq!(reader.durable_offset(), 0);
    assert!(
        reader
            .read(0, 1 << 20, ReadBound::Durable)
            .unwrap()
            .is_empty()
    );
    assert_eq!(values(&reader, 0, ReadBound::LogEnd).len(), 20);

    // Once the writer syncs, its flusher records a recovery point; the reader follows it.
    writer.wait_durable(9).unwrap();
    let mut durable = 0;
    for _ in 0..3000 {
        reader.refresh().unwrap();
        durable = reader.durable_offset();
        if durable >= 10 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        durable >= 10,
        "the reader's durable offset stayed at {durable}"
    );
    let durable_values = values(&reader, 0, ReadBound::Durable);
    assert_eq!(durable_values.len() as i64, durable);
    writer.close().unwrap();
    // A clean close records the whole log as the recovery point.
    reader.refresh().unwrap();
    assert_eq!(reader.durable_offset(), 20);
}

#[test]
fn a_torn_tail_is_where_the_live_reader_stops_not_an_error() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("t-0");
    let writer = Log::open(&dir, LogConfig::for_tests()).unwrap();
    for n in 0..5 {
        append(&writer, n);
    }
    let reader = Log::open_read_only(&dir, live_config()).unwrap();
    assert_eq!(reader.log_end_offset(), 5);
    // Half a batch at the end of the active segment, as a writer mid-write leaves it.
    let mut builder = partlog::BatchBuilder::new(partlog::Compression::None);
    builder.push(&NewRecord::new(1_700_000_000_000, None, Some(b"half")));
    let mut batch = builder.build().unwrap();
    partlog::unstable::format::set_base_offset(&mut batch, 5).unwrap();
    let log_file = dir.join(format!("{:020}.log", 0));
    let mut bytes = std::fs::read(&log_file).unwrap();
    bytes.extend_from_slice(&batch[..batch.len() / 2]);
    std::fs::write(&log_file, &bytes).unwrap();
    reader.refresh().unwrap();
    assert_eq!(reader.log_end_offset(), 5);
    assert_eq!(values(&reader, 0, ReadBound::LogEnd).len(), 5);
    // The other half arrives: the batch is whole, and the reader returns it.
    bytes.extend_from_slice(&batch[batch.len() / 2..]);
    std::fs::write(&log_file, &bytes).unwrap();
    assert!(reader.refresh().unwrap());
    assert_eq!(reader.log_end_offset(), 6);
    let read = values(&reader, 5, ReadBound::LogEnd);
    assert_eq!(read, [(5, b"half".to_vec())]);
    drop(writer);
}

#[test]
fn retention_and_truncation_by_the_writer_reach_the_reader() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("t-0");
    let writer = Log::open(&dir, writer_config()).unwrap();
    for n in 0..200 {
        append(&writer, n);
    }
    let reader = Log::open_read_only(&dir, live_config()).unwrap();
    assert_eq!(reader.log_end_offset(), 200);

    writer.delete_records_before(120).unwrap();
    writer.enforce_retention().unwrap();
    assert!(writer.stats().segments < 8, "retention deleted nothing");
    reader.refresh().unwrap();
    assert_eq!(reader.stats().segments, writer.stats().segments);
    assert_eq!(reader.log_start_offset(), 120);
    assert!(matches!(
        reader.read(0, 1 << 20, ReadBound::LogEnd),
        Err(Error::OffsetOutOfRange { .. })
    ));
    assert_eq!(values(&reader, 120, ReadBound::LogEnd).len(), 80);

    let new_end = writer.truncate_to(150).unwrap();
    assert!(new_end <= 150);
    reader.refresh().unwrap();
    assert_eq!(reader.log_end_offset(), new_end);
    assert!(matches!(
        reader.read(new_end + 10, 1 << 20, ReadBound::LogEnd),
        Err(Error::Truncated { .. })
    ));
    // The writer goes on; so does the reader.
    let next = append(&writer, 1000);
    assert_eq!(next, new_end);
    assert!(reader.wait_for_data(new_end, TIMEOUT).unwrap());
    assert_eq!(
        values(&reader, new_end, ReadBound::LogEnd),
        [(new_end, record(1000))]
    );
    writer.close().unwrap();
}

#[test]
fn a_live_reader_of_a_closed_log_reads_it_whole() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("t-0");
    let writer = Log::open(
        &dir,
        LogConfig::builder_for_tests()
            .segment_bytes(4096)
            .flush_policy(FlushPolicy::EveryAppend)
            .build()
            .unwrap(),
    )
    .unwrap();
    for n in 0..100 {
        append(&writer, n);
    }
    writer.close().unwrap();
    drop(writer);
    let reader = Log::open_read_only(&dir, live_config()).unwrap();
    assert_eq!(reader.durable_offset(), 100);
    assert_eq!(values(&reader, 0, ReadBound::Durable).len(), 100);
    // A writer that opens later appends into the segment the reader holds as active.
    let writer = Log::open(&dir, writer_config()).unwrap();
    append(&writer, 100);
    assert!(reader.wait_for_data(100, TIMEOUT).unwrap());
    assert_eq!(
        values(&reader, 100, ReadBound::LogEnd),
        [(100, record(100))]
    );
}

#[test]
fn a_segment_deleted_between_polls_is_looked_up_again_not_an_io_error() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("t-0");
    let writer = Log::open(&dir, writer_config()).unwrap();
    for n in 0..200 {
        append(&writer, n);
    }
    // A clean close and a reopen: the reader's recovery then opens only the last segment, and
    // holds the others as names to open on first use.
    writer.close().unwrap();
    drop(writer);
    let writer = Log::open(&dir, writer_config()).unwrap();
    let never_polls = LogConfig::builder_for_tests()
        .allow_live_writer(true)
        .poll_interval(Duration::from_secs(3600))
        .build()
        .unwrap();
    let reader = Log::open_read_only(&dir, never_polls).unwrap();
    assert_eq!(reader.log_start_offset(), 0);
    writer.delete_records_before(120).unwrap();
    writer.enforce_retention().unwrap();
    writer.close().unwrap();
    assert!(!dir.join(format!("{:020}.log", 0)).exists());
    // The reader's view still starts at 0; the read finds the file gone, looks again, and
    // answers from the directory as it is now.
    assert!(matches!(
        reader.read(0, 1 << 20, ReadBound::LogEnd),
        Err(Error::OffsetOutOfRange { start: 120, .. })
    ));
    assert_eq!(reader.log_start_offset(), 120);
    assert_eq!(values(&reader, 120, ReadBound::LogEnd).len(), 80);
}

#[test]
fn reader_threads_tail_a_writer_that_rolls_fast() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("t-0");
    const RECORDS: u64 = 3000;
    let writer = Log::open(&dir, writer_config()).unwrap();
    append(&writer, 0);
    let reader = std::sync::Arc::new(Log::open_read_only(&dir, live_config()).unwrap());
    let tails: Vec<_> = (0..2)
        .map(|_| {
            let reader = std::sync::Arc::clone(&reader);
            std::thread::spawn(move || {
                let mut next = 0i64;
                while next < RECORDS as i64 {
                    assert!(
                        reader.wait_for_data(next, TIMEOUT).unwrap(),
                        "stuck at {next}"
                    );
                    for r in reader.records(next, ReadBound::LogEnd) {
                        let r = r.unwrap();
                        assert_eq!(r.offset, next);
                        assert_eq!(r.value.unwrap(), record(next as u64));
                        next += 1;
                    }
                }
            })
        })
        .collect();
    for n in 1..RECORDS {
        append(&writer, n);
    }
    for tail in tails {
        tail.join().unwrap();
    }
    assert!(
        writer.stats().rolls > 50,
        "the writer rolled {} times",
        writer.stats().rolls
    );
    assert_eq!(reader.stats().segments, writer.stats().segments);
}

#[test]
fn retention_of_every_segment_including_the_active_one_is_no_truncation() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("t-0");
    let writer = Log::open(&dir, writer_config()).unwrap();
    for n in 0..50 {
        append(&writer, n);
    }
    let reader = Log::open_read_only(&dir, live_config()).unwrap();
    writer.delete_records_before(50).unwrap();
    let report = writer.enforce_retention().unwrap();
    assert!(report.rolled_active_segment);
    reader.refresh().unwrap();
    assert_eq!(
        (reader.log_start_offset(), reader.log_end_offset()),
        (50, 50)
    );
    append(&writer, 50);
    assert!(reader.wait_for_data(50, TIMEOUT).unwrap());
    assert_eq!(values(&reader, 50, ReadBound::LogEnd), [(50, record(50))]);
    // Above the end is out of range, not "truncated": nothing was cut.
    assert!(matches!(
        reader.read(60, 1 << 20, ReadBound::LogEnd),
        Err(Error::OffsetOutOfRange { .. })
    ));
}

/// Every record the log holds, as (offset, value).
fn everything(log: &Log) -> Vec<(i64, Vec<u8>)> {
    values(log, log.log_start_offset(), ReadBound::LogEnd)
}

/// A writer that truncates below the reader's active segment, then appends until a roll
/// recreates a segment under the very name the reader has open: the name is back, but it is
/// another file, which the reader must notice (`FileId`).
#[test]
fn a_segment_recreated_under_the_same_name_between_two_looks_is_seen() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("t-0");
    let clock = std::sync::Arc::new(partlog::unstable::ManualClock::new(1_700_000_000_000));
    let config = || {
        LogConfig::builder_for_tests()
            .segment_ms(1000)
            .retention_ms(-1)
            .clock(std::sync::Arc::clone(&clock) as std::sync::Arc<dyn partlog::unstable::Clock>)
            .build()
            .unwrap()
    };
    let writer = Log::open(&dir, config()).unwrap();
    // Stamped with the clock: Kafka's age roll compares record timestamps.
    let append = |writer: &Log, n: u64| {
        let value = record(n);
        writer
            .append(&[NewRecord::new(
                partlog::unstable::Clock::now_ms(&*clock),
                None,
                Some(&value),
            )])
            .unwrap()
            .first_offset
    };
    // Segments [0, 5) and [5, 10), the second active: a roll by age at offset 5.
    for n in 0..10 {
        if n == 5 {
            clock.advance(1001);
        }
        append(&writer, n);
    }
    assert_eq!(writer.stats().segments, 2, "{:?}", files(&dir));
    let reader = Log::open_read_only(&dir, live_config()).unwrap();
    assert_eq!(reader.stats().segments, 2);
    assert_eq!(everything(&reader), everything(&writer));

    // Cut the first segment at 3: segment 5 goes. Then a roll by age at offset 5 again
    // creates `00000000000000000005.log` anew.
    assert_eq!(writer.truncate_to(3).unwrap(), 3);
    for n in 200..212 {
        if n == 202 {
            clock.advance(1001);
        }
        let offset = append(&writer, n);
        if n == 202 {
            assert_eq!(offset, 5);
        }
    }
    assert!(dir.join("00000000000000000005.log").exists());
    assert!(reader.refresh().unwrap());
    let seen = everything(&reader);
    assert_eq!(seen, everything(&writer));
    assert_eq!(seen.len(), 15);
    assert_eq!(seen[5], (5, record(202)));
    writer.close().unwrap();
}
