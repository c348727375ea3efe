//! The rows of logs sharing one `Workers` pool (issue 31, section 2): the threads of 1,000 logs,
//! durable appends spread over 100 (and 1,000) logs against 8 logs with their own threads, and
//! the durable-append latency of one log while a compaction pass of a 1 GiB log runs on the
//! same pool. Each row's notes carry the load average when it started.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use partlog::{CleanupPolicy, FlushPolicy, Log, LogConfig, NewRecord, Workers};

use super::{
    Ctx, DURABLE_APPENDS, Measured, Outcome, Rep, SMALL_VALUE, TIMESTAMP, compaction_log, median,
    pairs, throughput_row,
};

/// The 1-minute load average, from `/proc/loadavg`.
fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |dir| dir.count())
}

fn descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |dir| dir.count())
}

/// Opens `count` logs under `root`, on `workers` when given.
fn open_logs(root: &Path, count: usize, workers: Option<&Workers>, durable: bool) -> Vec<Log> {
    (0..count)
        .map(|i| {
            let mut builder = LogConfig::builder().segment_bytes(64 << 20);
            if durable {
                builder = builder.flush_policy(FlushPolicy::EveryAppend);
            }
            if let Some(workers) = workers {
                builder = builder.workers(workers.clone());
            }
            Log::open(
                root.join(format!("log-{i}")),
                builder.build().expect("config"),
            )
            .expect("open")
        })
        .collect()
}

/// 1,000 logs on one `Workers` of 4 threads: the threads they add (target: at most 8), against
/// the same logs each with its own flusher thread.
pub fn row_threads(ctx: &Ctx) -> Outcome {
    let load = load_average();
    let root = ctx.fresh_dir("workers-threads");
    let before = (threads(), descriptors());
    let workers = Workers::new(4).expect("workers");
    let logs = open_logs(&root, 1000, Some(&workers), false);
    let pooled = threads() - before.0;
    let held = descriptors() - before.1;
    drop(logs);
    drop(workers);
    let root = ctx.fresh_dir("workers-threads");
    let before_own = threads();
    let logs = open_logs(&root, 1000, None, false);
    let own = threads() - before_own;
    drop(logs);
    println!(
        "workers_threads: 1,000 logs on Workers(4) add {pooled} threads and hold {held} \
         descriptors; with their own threads they add {own} (load {load:.2})"
    );
    Outcome::Measured(Measured {
        workload: "1,000 logs open, one Workers(4): threads added".into(),
        unit: "threads",
        partlog: pooled as f64,
        reference: own as f64,
        reference_name: "the same logs, each with its own flusher".into(),
        ratio: 8.0 / pooled.max(1) as f64,
        target: 1.0,
        target_text: "<= 8 threads",
        roll_and_close_timed: "n/a",
        extra: vec![
            ("descriptors_held".into(), held as f64),
            ("load_average".into(), load),
        ],
    })
}

/// 8 threads of durable 100 B appends, thread `t` appending to logs `t`, `t + 8`, ... in turn.
fn spread_rep(ctx: &Ctx, logs: usize, workers: Option<&Workers>) -> Rep {
    let root = ctx.fresh_dir("workers-durable");
    let logs = open_logs(&root, logs, workers, true);
    let started = Instant::now();
    std::thread::scope(|scope| {
        for t in 0..8 {
            let logs = &logs;
            scope.spawn(move || {
                let record = [NewRecord::new(TIMESTAMP, None, Some(&SMALL_VALUE))];
                let mine: Vec<&Log> = logs.iter().skip(t).step_by(8).collect();
                for i in 0..DURABLE_APPENDS / 8 {
                    mine[i % mine.len()].append(&record).expect("append");
                }
            });
        }
    });
    // Every append was durable when it returned; closing 100 logs (a clean-shutdown record
    // each) is not part of the appends, on either side.
    let seconds = started.elapsed().as_secs_f64();
    for log in &logs {
        log.close().expect("close");
    }
    let records = (DURABLE_APPENDS / 8 * 8) as u64;
    Rep {
        seconds,
        records,
        user_bytes: records * SMALL_VALUE.len() as u64,
    }
}

/// Durable appends from 8 threads over 100 logs sharing one `Workers(4)`, against the same
/// appends to 8 logs with their own threads (target: at least 0.8x); 1,000 logs in the notes.
pub fn row_durable(ctx: &Ctx) -> Outcome {
    let load = load_average();
    let workers = Workers::new(4).expect("workers");
    let (a, b, ratio, _) = pairs(
        ctx,
        || spread_rep(ctx, 100, Some(&workers)),
        || spread_rep(ctx, 8, None),
        Rep::records_per_second,
    );
    let thousand = spread_rep(ctx, 1000, Some(&workers));
    let Outcome::Measured(mut row) = throughput_row(
        "durable 100 B appends, 8 threads over 100 logs on one Workers(4)",
        "8 logs with their own threads",
        a,
        b,
        ratio,
        0.8,
        ">= 0.8",
        "no",
    ) else {
        unreachable!("throughput_row measures")
    };
    row.extra.push((
        "thousand_logs_records_per_s".into(),
        thousand.records_per_second(),
    ));
    row.extra.push(("load_average".into(), load));
    println!(
        "workers_durable: 1,000 logs: {:.0} records/s (load {load:.2})",
        thousand.records_per_second()
    );
    Outcome::Measured(row)
}

/// The 99th percentile, in microseconds, of `count` durable appends to `log`, each made
/// durable through the pool's flusher (the future form), stopping early once `stop` holds.
fn durable_latencies(log: &Log, count: usize, stop: impl Fn() -> bool) -> Vec<f64> {
    let record = [NewRecord::new(TIMESTAMP, None, Some(&SMALL_VALUE))];
    let mut latencies = Vec::with_capacity(count);
    for _ in 0..count {
        if stop() {
            break;
        }
        let started = Instant::now();
        let info = log.append(&record).expect("append");
        block_on(log.durable(info.last_offset)).expect("durable");
        latencies.push(started.elapsed().as_secs_f64() * 1e6);
    }
    latencies
}

fn p99(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[(values.len() * 99 / 100).min(values.len() - 1)]
}

/// The compaction row's cap on the pass's I/O, in MB/s (`log.cleaner.io.max.bytes.per.second`).
const CLEANER_IO_MBPS: f64 = 100.0;

/// The p99 of durable-append latency on one log of a `Workers(4)` pool while a compaction pass
/// of a 1 GiB log runs on the same pool, against its p99 with no pass (target: at most 2x).
pub fn row_compaction_latency(ctx: &Ctx) -> Outcome {
    let load = load_average();
    // `log.cleaner.io.max.bytes.per.second` of the compacted log, in MB/s
    // (`COMPARE_CLEANER_IO_MBPS`; 0 for no cap).
    let cleaner_io_mbps: f64 = std::env::var("COMPARE_CLEANER_IO_MBPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CLEANER_IO_MBPS);
    let cleaner_io = if cleaner_io_mbps > 0.0 {
        cleaner_io_mbps * 1e6
    } else {
        f64::MAX
    };
    let template = ctx.fresh_dir("workers-compaction-template");
    let codec = partlog::CompressionType::Uncompressed;
    compaction_log::build(&template, codec, 128 << 20, 1 << 30);
    let workers = Workers::new(4).expect("workers");
    let mut quiet = Vec::new();
    let mut busy = Vec::new();
    for _ in 0..ctx.pairs.min(3) {
        let root = ctx.fresh_dir("workers-compaction");
        let other = open_logs(&root, 1, Some(&workers), false).remove(0);
        quiet.push(p99(&mut durable_latencies(&other, 2_000, || false)));
        let compacted = root.join("compacted");
        compaction_log::copy_log(&template, &compacted);
        let config = LogConfig::builder()
            .segment_bytes(128 << 20)
            .cleaner_io_max_bytes_per_second(cleaner_io)
            .cleanup_policy(CleanupPolicy::COMPACT)
            .compression_type(codec)
            .retention_check_interval_ms(1)
            .workers(workers.clone())
            .build()
            .expect("config");
        let log = Log::open(&compacted, config).expect("open");
        // Appends from the pass's start (the pool's first tick) to its end.
        while log.stats().compaction_passes == 0 && log.stats().segments > 0 {
            let mut latencies =
                durable_latencies(&other, 100_000, || log.stats().compaction_passes > 0);
            if !latencies.is_empty() {
                busy.push(p99(&mut latencies));
            }
        }
        log.close().expect("close");
        other.close().expect("close");
    }
    let busy = if busy.is_empty() {
        f64::NAN
    } else {
        median(&mut busy)
    };
    let quiet = median(&mut quiet);
    println!(
        "workers_compaction: durable-append p99 {quiet:.0} us alone, {busy:.0} us during a 1 GiB \
         pass on the same pool, cleaner I/O cap {cleaner_io_mbps} MB/s (0: none) (load {load:.2})"
    );
    Outcome::Measured(Measured {
        workload: "durable-append p99 on a log of Workers(4) during a 1 GiB compaction pass".into(),
        unit: "us (p99)",
        partlog: busy,
        reference: quiet,
        reference_name: "the same appends, no pass".into(),
        ratio: quiet / busy,
        target: 0.5,
        target_text: "<= 2x its time",
        roll_and_close_timed: "n/a",
        extra: vec![
            ("load_average".into(), load),
            ("cleaner_io_max_mb_per_s".into(), cleaner_io_mbps),
        ],
    })
}

/// Polls `future` to completion on this thread, parking between polls.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    use std::task::{Context, Poll, Wake, Waker};

    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut context = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
        std::thread::park_timeout(Duration::from_millis(10));
    }
}
