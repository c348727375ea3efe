//! The read rows of issue 18 against the `commitlog` crate (benches/README.md, "The targets"):
//! a single record read out of a 100-record batch, sequential reads of 1-record batches, and
//! random reads of a log the position cache has never seen (Kafka's default 1 GiB segments and
//! 4096-byte index interval).
//!
//! Both sides read from the page cache, single-threaded, and touch what they return: partlog
//! sums the key and value lengths of the records it decodes, commitlog the payload lengths of
//! its messages. Each side checks a CRC over every batch (message) it returns.

use std::fs;
use std::ops::ControlFlow;
use std::path::Path;
use std::time::Instant;

use partlog::{BatchBuilder, Compression, FetchData, Log, LogConfig, NewRecord, ReadBound};

use super::{
    Ctx, Measured, Outcome, READ_CHUNK, Rep, SEGMENT_BYTES, TIMESTAMP, pairs, percentile,
    random_offsets,
};

const REFERENCE_SINGLE: &str = "commitlog 0.2, single-message read";
const REFERENCE_SEQUENTIAL: &str = "commitlog 0.2, sequential 1 MiB reads";
/// Random reads per rep.
const RANDOM_READS: usize = 100_000;
/// Records in the 100-record-batch log: 2,000 batches of about 11 KB.
const BATCHED_LOG_RECORDS: usize = 200_000;
/// Bytes of `.log` each 1-record-batch log is built to (about): the harness's 64 MB log.
const SMALL_BATCH_LOG_BYTES: usize = 64 << 20;

pub(super) fn value_of(size: usize) -> Vec<u8> {
    vec![b'v'; size]
}

pub(super) fn batch_of(records: usize, value: &[u8]) -> Vec<u8> {
    let mut builder = BatchBuilder::new(Compression::None);
    for _ in 0..records {
        builder.push(&NewRecord::new(TIMESTAMP, None, Some(value)));
    }
    builder.build().expect("a valid batch")
}

fn segment_config(segment_bytes: u32) -> LogConfig {
    super::mapping_from_env(
        LogConfig::builder()
            .segment_bytes(segment_bytes)
            .build()
            .expect("a valid config"),
    )
}

pub(super) fn commitlog_options(dir: &Path, segment_bytes: u32) -> commitlog::LogOptions {
    let mut options = commitlog::LogOptions::new(dir);
    options.segment_max_bytes(segment_bytes as usize);
    options
}

/// Builds both logs: `batches` copies of `batch` (of `per_batch` records of `value`) in
/// partlog, the same records in commitlog, appended `per_batch` messages at a time.
pub(super) fn build_logs(
    partlog_dir: &Path,
    commitlog_dir: &Path,
    config: LogConfig,
    segment_bytes: u32,
    (batches, per_batch, value): (usize, usize, &[u8]),
) {
    let batch = batch_of(per_batch, value);
    let log = Log::open(partlog_dir, config).expect("open");
    for _ in 0..batches {
        log.append_batch(&batch).expect("append_batch");
    }
    log.close().expect("close");
    let mut reference =
        commitlog::CommitLog::new(commitlog_options(commitlog_dir, segment_bytes)).expect("open");
    for _ in 0..batches {
        let mut buf = commitlog::message::MessageBuf::default();
        for _ in 0..per_batch {
            buf.push(value).expect("push");
        }
        reference.append(&mut buf).expect("append");
    }
    reference.flush().expect("flush");
}

/// The read limit that makes commitlog return exactly one message, wherever it lies: less than
/// two messages (one message's size exactly fails at some positions).
pub(super) fn one_message_limit(reference: &commitlog::CommitLog) -> commitlog::ReadLimit {
    use commitlog::message::MessageSet;
    let first = reference
        .read(0, commitlog::ReadLimit::max_bytes(4096))
        .expect("read");
    let one_message = first.bytes().len() / first.len();
    commitlog::ReadLimit::max_bytes(2 * one_message - 1)
}

/// partlog's single-record read: the batch holding `offset`, then its record at `offset`.
fn partlog_single_read(
    log: &Log,
    offset: i64,
    fetch: &mut FetchData,
    scratch: &mut Vec<u8>,
) -> u64 {
    log.read_into(offset, 1, ReadBound::LogEnd, fetch)
        .expect("read");
    let mut bytes = 0u64;
    fetch
        .for_each_record(scratch, |record| {
            bytes += record.value.map_or(0, <[u8]>::len) as u64;
            ControlFlow::Break(())
        })
        .expect("records");
    assert!(bytes > 0, "the read returned the record at {offset}");
    bytes
}

pub(super) fn commitlog_single_read(
    reference: &commitlog::CommitLog,
    offset: u64,
    limit: commitlog::ReadLimit,
) -> u64 {
    use commitlog::message::MessageSet;
    let messages = reference.read(offset, limit).expect("read");
    let bytes: u64 = messages.iter().map(|m| m.payload().len() as u64).sum();
    assert!(bytes > 0, "the read returned the message at {offset}");
    bytes
}

/// Timed single-record reads of `offsets`, each latency pushed to `latencies` (cleared first).
pub(super) fn timed_reads(
    offsets: &[u64],
    latencies: &mut Vec<f64>,
    mut read: impl FnMut(u64) -> u64,
) -> Rep {
    latencies.clear();
    let started = Instant::now();
    let mut bytes = 0u64;
    for &offset in offsets {
        let t = Instant::now();
        bytes += read(offset);
        latencies.push(t.elapsed().as_secs_f64());
    }
    Rep {
        seconds: started.elapsed().as_secs_f64(),
        records: offsets.len() as u64,
        user_bytes: std::hint::black_box(bytes),
    }
}

/// A random-read row's outcome: reads/s, with both sides' p50 and p99 (of the median rep's
/// run, the last rep of each side) and partlog's p99 over its p50 (target: at most 3).
pub(super) fn latency_row(
    workload: &str,
    (a, b, ratio): (Rep, Rep, f64),
    partlog_latencies: &mut [f64],
    reference_latencies: &mut [f64],
    target: f64,
    target_text: &'static str,
) -> Measured {
    partlog_latencies.sort_by(f64::total_cmp);
    reference_latencies.sort_by(f64::total_cmp);
    let micros = 1e6;
    let (p50, p99) = (
        percentile(partlog_latencies, 0.5),
        percentile(partlog_latencies, 0.99),
    );
    Measured {
        workload: workload.into(),
        unit: "reads/s",
        partlog: a.records_per_second(),
        reference: b.records_per_second(),
        reference_name: REFERENCE_SINGLE.into(),
        ratio,
        target,
        target_text,
        roll_and_close_timed: "-",
        extra: vec![
            ("partlog_p50_us".into(), p50 * micros),
            ("partlog_p99_us".into(), p99 * micros),
            (
                "reference_p50_us".into(),
                percentile(reference_latencies, 0.5) * micros,
            ),
            (
                "reference_p99_us".into(),
                percentile(reference_latencies, 0.99) * micros,
            ),
            ("partlog_p99_over_p50".into(), p99 / p50),
        ],
    }
}

// ---------------------------------------------------------------------------------------------
// A single record out of a 100-record batch.

/// A random single-record read from a log of 100 x 100 B batches (64 MiB segments, the index
/// interval's default): partlog reads the batch holding the offset and decodes up to the record;
/// commitlog reads the one message. Target: at least 0.5, with partlog's p99 at most 3x its p50.
pub(super) fn row_read_one_record_of_100(ctx: &Ctx) -> Outcome {
    let partlog_dir = ctx.fresh_dir("reads-partlog");
    let commitlog_dir = ctx.fresh_dir("reads-commitlog");
    let value = value_of(100);
    build_logs(
        &partlog_dir,
        &commitlog_dir,
        segment_config(SEGMENT_BYTES),
        SEGMENT_BYTES,
        (BATCHED_LOG_RECORDS / 100, 100, &value),
    );
    let log = Log::open(&partlog_dir, segment_config(SEGMENT_BYTES)).expect("reopen");
    let reference =
        commitlog::CommitLog::new(commitlog_options(&commitlog_dir, SEGMENT_BYTES)).expect("open");
    let limit = one_message_limit(&reference);
    let offsets = random_offsets(RANDOM_READS, BATCHED_LOG_RECORDS as u64, 0x5eed);
    let (mut fetch, mut scratch) = (FetchData::new(), Vec::new());
    let (mut p_lat, mut r_lat) = (Vec::new(), Vec::new());
    let result = pairs(
        ctx,
        || {
            timed_reads(&offsets, &mut p_lat, |offset| {
                partlog_single_read(&log, offset as i64, &mut fetch, &mut scratch)
            })
        },
        || {
            timed_reads(&offsets, &mut r_lat, |offset| {
                commitlog_single_read(&reference, offset, limit)
            })
        },
        Rep::records_per_second,
    );
    let row = latency_row(
        "single-record read from 100 x 100 B batches, random offsets",
        (result.0, result.1, result.2),
        &mut p_lat,
        &mut r_lat,
        0.5,
        ">= 0.5, p99 <= 3x p50",
    );
    drop(log);
    drop(reference);
    fs::remove_dir_all(&partlog_dir).ok();
    fs::remove_dir_all(&commitlog_dir).ok();
    Outcome::Measured(row)
}

// ---------------------------------------------------------------------------------------------
// Sequential reads of 1-record batches.

/// The whole log from offset 0 in 1 MiB reads, 1-record batches of 100 B and of 1 KiB values,
/// against commitlog's sequential 1 MiB reads of the same records. Target: at least 0.8.
pub(super) fn row_read_sequential_1_record_batches(ctx: &Ctx) -> Outcome {
    let mut rows = Vec::new();
    for value_size in [100usize, 1024] {
        let value = value_of(value_size);
        let batch_size = batch_of(1, &value).len();
        let records = SMALL_BATCH_LOG_BYTES / batch_size;
        let partlog_dir = ctx.fresh_dir("reads-partlog");
        let commitlog_dir = ctx.fresh_dir("reads-commitlog");
        build_logs(
            &partlog_dir,
            &commitlog_dir,
            segment_config(SEGMENT_BYTES),
            SEGMENT_BYTES,
            (records, 1, &value),
        );
        let log = Log::open(&partlog_dir, segment_config(SEGMENT_BYTES)).expect("reopen");
        let reference = commitlog::CommitLog::new(commitlog_options(&commitlog_dir, SEGMENT_BYTES))
            .expect("open");
        let (mut fetch, mut scratch) = (FetchData::new(), Vec::new());
        let partlog_read = || {
            let started = Instant::now();
            let (mut offset, mut count, mut bytes) = (0i64, 0u64, 0u64);
            loop {
                log.read_into(offset, READ_CHUNK, ReadBound::LogEnd, &mut fetch)
                    .expect("read");
                if fetch.is_empty() {
                    break;
                }
                for batch in fetch.batches() {
                    let batch = batch.expect("batch");
                    for record in batch.records(&mut scratch).expect("records") {
                        let record = record.expect("record");
                        count += 1;
                        bytes += (record.key.map_or(0, <[u8]>::len)
                            + record.value.map_or(0, <[u8]>::len))
                            as u64;
                    }
                }
                offset = fetch.next_offset();
            }
            Rep {
                seconds: started.elapsed().as_secs_f64(),
                records: count,
                user_bytes: bytes,
            }
        };
        let reference_read = || {
            use commitlog::message::MessageSet;
            let started = Instant::now();
            let (mut offset, mut count, mut bytes) = (0u64, 0u64, 0u64);
            loop {
                let messages = reference
                    .read(offset, commitlog::ReadLimit::max_bytes(READ_CHUNK))
                    .expect("read");
                let mut last = None;
                for message in messages.iter() {
                    count += 1;
                    bytes += message.payload().len() as u64;
                    last = Some(message.offset());
                }
                match last {
                    Some(last) => offset = last + 1,
                    None => break,
                }
            }
            Rep {
                seconds: started.elapsed().as_secs_f64(),
                records: count,
                user_bytes: bytes,
            }
        };
        let (a, b, ratio, _) = pairs(ctx, partlog_read, reference_read, Rep::records_per_second);
        assert_eq!(a.records, records as u64, "partlog read every record");
        assert_eq!(b.records, records as u64, "commitlog read every message");
        rows.push(Measured {
            workload: format!(
                "sequential read of 1-record batches, {value_size} B values, {records} records"
            ),
            unit: "records/s",
            partlog: a.records_per_second(),
            reference: b.records_per_second(),
            reference_name: REFERENCE_SEQUENTIAL.into(),
            ratio,
            target: 0.8,
            target_text: ">= 0.8",
            roll_and_close_timed: "-",
            extra: vec![
                ("partlog_user_bytes_per_s".into(), a.user_bytes_per_second()),
                (
                    "reference_user_bytes_per_s".into(),
                    b.user_bytes_per_second(),
                ),
                (
                    "partlog_ns_per_record".into(),
                    a.seconds * 1e9 / a.records as f64,
                ),
                (
                    "reference_ns_per_record".into(),
                    b.seconds * 1e9 / b.records as f64,
                ),
            ],
        });
        drop(log);
        drop(reference);
        fs::remove_dir_all(&partlog_dir).ok();
        fs::remove_dir_all(&commitlog_dir).ok();
    }
    Outcome::MeasuredMany(rows)
}

// ---------------------------------------------------------------------------------------------
// The cold random read.

/// Random single-record reads spread over a 64 MB log of 1-record 100 B batches, in Kafka's
/// default config (1 GiB segments, 4096-byte index interval), each rep on a log just reopened,
/// so its position cache starts empty (commitlog is reopened too). Target: at least 0.8, with
/// partlog's p99 at most 3x its p50.
pub(super) fn row_read_random_cold(ctx: &Ctx) -> Outcome {
    let partlog_dir = ctx.fresh_dir("reads-partlog");
    let commitlog_dir = ctx.fresh_dir("reads-commitlog");
    let value = value_of(100);
    let records = SMALL_BATCH_LOG_BYTES / batch_of(1, &value).len();
    let default_config = || super::mapping_from_env(LogConfig::default());
    let segment_bytes = default_config().segment_bytes;
    build_logs(
        &partlog_dir,
        &commitlog_dir,
        default_config(),
        segment_bytes,
        (records, 1, &value),
    );
    let offsets = random_offsets(RANDOM_READS, records as u64, 0xc01d);
    let (mut fetch, mut scratch) = (FetchData::new(), Vec::new());
    let (mut p_lat, mut r_lat) = (Vec::new(), Vec::new());
    let result = pairs(
        ctx,
        || {
            let log = Log::open(&partlog_dir, default_config()).expect("reopen");
            let rep = timed_reads(&offsets, &mut p_lat, |offset| {
                partlog_single_read(&log, offset as i64, &mut fetch, &mut scratch)
            });
            log.close().expect("close");
            rep
        },
        || {
            let reference =
                commitlog::CommitLog::new(commitlog_options(&commitlog_dir, segment_bytes))
                    .expect("open");
            let limit = one_message_limit(&reference);
            timed_reads(&offsets, &mut r_lat, |offset| {
                commitlog_single_read(&reference, offset, limit)
            })
        },
        Rep::records_per_second,
    );
    let row = latency_row(
        &format!(
            "random read, cold: {records} 1-record 100 B batches, default config, reopened each rep"
        ),
        (result.0, result.1, result.2),
        &mut p_lat,
        &mut r_lat,
        0.8,
        ">= 0.8, p99 <= 3x p50",
    );
    fs::remove_dir_all(&partlog_dir).ok();
    fs::remove_dir_all(&commitlog_dir).ok();
    Outcome::Measured(row)
}
