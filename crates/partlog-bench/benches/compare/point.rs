//! The point-read rows of issue 35 against the `commitlog` crate: one record by a uniformly
//! random offset through `Log::read_record_into`, against commitlog's single-message read, both
//! sides on their default configurations and reading from the page cache, one thread.
//!
//! Three warm layouts (100 B records one a batch, 100 B and 1 KiB records a hundred a batch)
//! and a cold one (the log reopened before each rep, so nothing learned by an earlier rep
//! helps). Each row reports partlog's and commitlog's p50 and p99 and, beside them, the bytes
//! partlog's read caches held at the end of the rep.

use std::fs;
use std::path::Path;

use partlog::{Log, LogConfig, ReadOptions, RecordRead};

use super::reads::{
    batch_of, build_logs, commitlog_single_read, latency_row, one_message_limit, timed_reads,
    value_of,
};
use super::{Ctx, Outcome, Rep, pairs, random_offsets};

/// Point reads per rep.
const POINT_READS: usize = 100_000;
/// Bytes of `.log` each log is built to (about): the 64 MB logs.
const LOG_BYTES: usize = 64 << 20;

/// One point-read row: `per_batch` records of `value_size` bytes a batch, `LOG_BYTES` of
/// them, `POINT_READS` random offsets; `cold` reopens both logs before each rep.
fn point_row(
    ctx: &Ctx,
    workload: &str,
    (per_batch, value_size): (usize, usize),
    cold: bool,
    (target, target_text): (f64, &'static str),
) -> Outcome {
    let partlog_dir = ctx.fresh_dir("point-partlog");
    let commitlog_dir = ctx.fresh_dir("point-commitlog");
    let value = value_of(value_size);
    let batches = LOG_BYTES / batch_of(per_batch, &value).len();
    let records = batches * per_batch;
    let segment_bytes = LogConfig::default().segment_bytes;
    build_logs(
        &partlog_dir,
        &commitlog_dir,
        super::mapping_from_env(LogConfig::default()),
        segment_bytes,
        (batches, per_batch, &value),
    );
    let offsets = random_offsets(POINT_READS, records as u64, 0x9017);
    let (mut p_lat, mut r_lat) = (Vec::new(), Vec::new());
    let mut read = RecordRead::new();
    let mut warm_log = (!cold).then(|| {
        Log::open(&partlog_dir, super::mapping_from_env(LogConfig::default())).expect("open")
    });
    let mut warm_reference = (!cold).then(|| open_commitlog(&commitlog_dir, segment_bytes));
    let mut cache_bytes = 0u64;
    let result = pairs(
        ctx,
        || {
            let reopened;
            let log = match &warm_log {
                Some(log) => log,
                None => {
                    reopened =
                        Log::open(&partlog_dir, super::mapping_from_env(LogConfig::default()))
                            .expect("reopen");
                    &reopened
                }
            };
            let rep: Rep = timed_reads(&offsets, &mut p_lat, |offset| {
                let record = log
                    .read_record_into(offset as i64, ReadOptions::default(), &mut read)
                    .expect("read_record")
                    .expect("a record at every offset");
                record.value.map_or(0, <[u8]>::len) as u64
            });
            cache_bytes = partlog_cache_bytes();
            rep
        },
        || {
            let reopened;
            let reference = match &warm_reference {
                Some(reference) => reference,
                None => {
                    reopened = open_commitlog(&commitlog_dir, segment_bytes);
                    &reopened
                }
            };
            let limit = one_message_limit(reference);
            timed_reads(&offsets, &mut r_lat, |offset| {
                commitlog_single_read(reference, offset, limit)
            })
        },
        Rep::records_per_second,
    );
    let mut row = latency_row(
        &format!("{workload}, {records} records, default configs"),
        (result.0, result.1, result.2),
        &mut p_lat,
        &mut r_lat,
        target,
        target_text,
    );
    row.extra
        .push(("partlog_cache_resident_bytes".into(), cache_bytes as f64));
    warm_log.take();
    warm_reference.take();
    fs::remove_dir_all(&partlog_dir).ok();
    fs::remove_dir_all(&commitlog_dir).ok();
    Outcome::Measured(row)
}

fn open_commitlog(dir: &Path, segment_bytes: u32) -> commitlog::CommitLog {
    commitlog::CommitLog::new(super::reads::commitlog_options(dir, segment_bytes)).expect("open")
}

/// The bytes partlog's read caches hold now: the process-wide verified-batch cache (the
/// position caches' 4 bytes a batch are bounded per segment, and not counted here).
fn partlog_cache_bytes() -> u64 {
    partlog::VerifiedBatchCache::global().resident_bytes() as u64
}

/// Random point reads of 100 B records, one a batch. Target: at least 1.0, p99 at most 3x p50.
pub(super) fn row_100b_1_a_batch(ctx: &Ctx) -> Outcome {
    point_row(
        ctx,
        "point read, 100 B records 1 a batch, random offsets",
        (1, 100),
        false,
        (1.0, ">= 1.0, p99 <= 3x p50"),
    )
}

/// Random point reads of 100 B records, 100 a batch. Target: at least 0.8.
pub(super) fn row_100b_100_a_batch(ctx: &Ctx) -> Outcome {
    point_row(
        ctx,
        "point read, 100 B records 100 a batch, random offsets",
        (100, 100),
        false,
        (0.8, ">= 0.8"),
    )
}

/// Random point reads of 1 KiB records, 100 a batch. Target: at least 0.5.
pub(super) fn row_1kib_100_a_batch(ctx: &Ctx) -> Outcome {
    point_row(
        ctx,
        "point read, 1 KiB records 100 a batch, random offsets",
        (100, 1024),
        false,
        (0.5, ">= 0.5"),
    )
}

/// Random point reads of 100 B records one a batch, both logs reopened before each rep.
/// Target: at least 0.8, p99 at most 3x p50.
pub(super) fn row_cold(ctx: &Ctx) -> Outcome {
    point_row(
        ctx,
        "point read, cold (reopened each rep), 100 B records 1 a batch",
        (1, 100),
        true,
        (0.8, ">= 0.8, p99 <= 3x p50"),
    )
}
