//! `partlog perf-produce` and `partlog perf-consume`: the figures of Kafka's
//! `kafka-producer-perf-test` and `kafka-consumer-perf-test`, measured on a log directory.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use partlog::unstable::{Clock, SystemClock};
use partlog::{BatchBuilder, Compression, FlushPolicy, Log, LogConfig, NewRecord, ReadBound};

use crate::produce::Codec;
use crate::{CliError, Outcome};

pub const PRODUCE_EXAMPLES: &str = "\
Examples:
  partlog perf-produce /tmp/perf-0 --records 1000000 --record-size 100
  partlog perf-produce /tmp/perf-0 --records 100000 --record-size 1024 --batch 100 --flush always --json

Appends --records records of --record-size bytes (random-looking, incompressible values, no
key), --batch records per append, and prints what kafka-producer-perf-test prints: records/s,
MB/s (MB = 2^20 bytes), the average and largest latency and the 50th, 95th, 99th and 99.9th
percentiles. The latency of a record is the latency of the append that wrote it: from the call
until the batch is in the file (and, with --flush always, fsynced: acks=all). A progress bar
shows on a terminal. The directory is created if missing; appending to an existing log is fine.";

pub const CONSUME_EXAMPLES: &str = "\
Examples:
  partlog perf-consume /tmp/perf-0
  partlog perf-consume /tmp/perf-0 --fetch-bytes 1048576 --records 500000 --json

Reads the log from --from (default: the log start offset) with reads of --fetch-bytes, decodes
every record, and prints what kafka-consumer-perf-test prints: records and MB consumed, records/s,
MB/s, and the fetch latency (one Log::read plus the decoding of its records): average, largest
and the 50th, 95th, 99th and 99.9th percentiles. Opens the log read-only, without a lock, so a
writer may be running.";

/// Arguments of `partlog perf-produce`.
#[derive(Debug, Args)]
pub struct PerfProduceArgs {
    /// The log directory; created if missing.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,

    /// How many records to append.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub records: u64,

    /// The value size of each record, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 100)]
    pub record_size: usize,

    /// Records per append (one batch each).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub batch: u64,

    /// The codec of the batches.
    #[arg(long, value_enum, default_value_t = Codec::None)]
    pub compression: Codec,

    /// always (each append fsynced before it returns: acks=all) or never (the OS decides).
    #[arg(long, value_name = "POLICY", default_value = "never", value_parser = ["always", "never"])]
    pub flush: String,

    /// One JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `partlog perf-consume`.
#[derive(Debug, Args)]
pub struct PerfConsumeArgs {
    /// The log directory.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,

    /// The first offset to read (default: the log start offset).
    #[arg(long, value_name = "OFFSET")]
    pub from: Option<i64>,

    /// Stop after this many records (default: the whole log).
    #[arg(long, value_name = "N")]
    pub records: Option<u64>,

    /// The max_bytes of each read (a read returns at least one whole batch).
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 20)]
    pub fetch_bytes: usize,

    /// One JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Latencies in nanoseconds, one per operation, with a count of records each covers.
struct Latencies {
    samples: Vec<(u64, u64)>,
}

impl Latencies {
    fn new() -> Self {
        Latencies {
            samples: Vec::new(),
        }
    }

    fn record(&mut self, nanos: u64, records: u64) {
        self.samples.push((nanos, records));
    }

    /// Average, max and the given percentiles, in milliseconds, weighted by records: each
    /// record has its operation's latency, as in kafka-producer-perf-test.
    fn summary(&mut self, percentiles: &[f64]) -> (f64, f64, Vec<f64>) {
        self.samples.sort_unstable();
        let total: u64 = self.samples.iter().map(|s| s.1).sum();
        if total == 0 {
            return (0.0, 0.0, vec![0.0; percentiles.len()]);
        }
        let sum: f64 = self
            .samples
            .iter()
            .map(|&(nanos, n)| nanos as f64 * n as f64)
            .sum();
        let max = self.samples.last().map_or(0, |s| s.0);
        let mut out = Vec::new();
        for &p in percentiles {
            let rank = ((p / 100.0) * total as f64).ceil().max(1.0) as u64;
            let mut seen = 0;
            let mut value = max;
            for &(nanos, n) in &self.samples {
                seen += n;
                if seen >= rank {
                    value = nanos;
                    break;
                }
            }
            out.push(value as f64 / 1e6);
        }
        (sum / total as f64 / 1e6, max as f64 / 1e6, out)
    }
}

const PERCENTILES: [f64; 4] = [50.0, 95.0, 99.0, 99.9];

fn progress(total: u64, json: bool) -> ProgressBar {
    // On a terminal only, and never in JSON mode: the output must stay machine-readable.
    let bar = if json {
        ProgressBar::hidden()
    } else {
        ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr())
    };
    if let Ok(style) =
        ProgressStyle::with_template("{bar:40} {pos}/{len} records, {per_sec}, eta {eta}")
    {
        bar.set_style(style);
    }
    bar
}

/// A value that does not compress: xorshift bytes.
fn value_bytes(size: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    (0..size)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// Runs `partlog perf-produce`.
pub fn run_produce(args: &PerfProduceArgs) -> Result<Outcome, CliError> {
    if args.batch == 0 {
        return Err(CliError::new("--batch must be at least 1"));
    }
    let flush = if args.flush == "always" {
        FlushPolicy::EveryAppend
    } else {
        FlushPolicy::OsDecides
    };
    let config = LogConfig::builder().flush_policy(flush).build()?;
    let log = Log::open(&args.dir, config)?;
    let codec = match args.compression {
        Codec::None => Compression::None,
        Codec::Lz4 => Compression::Lz4,
        Codec::Zstd => Compression::Zstd,
    };
    let value = value_bytes(args.record_size, 0x5eed);
    let clock = SystemClock;
    let bar = progress(args.records, args.json);
    let mut latencies = Latencies::new();
    let mut bytes = 0u64;
    let mut sent = 0u64;
    let started = Instant::now();
    while sent < args.records {
        let n = args.batch.min(args.records - sent);
        let timestamp = clock.now_ms();
        let mut builder = BatchBuilder::new(codec);
        for _ in 0..n {
            builder.push(&NewRecord::new(timestamp, None, Some(&value)));
        }
        let batch = builder.build()?;
        let call = Instant::now();
        log.append_batch_trusted(&batch)?;
        let nanos = u64::try_from(call.elapsed().as_nanos()).unwrap_or(u64::MAX);
        latencies.record(nanos, n);
        sent += n;
        bytes += n * args.record_size as u64;
        bar.set_position(sent);
    }
    let elapsed = started.elapsed();
    bar.finish_and_clear();
    log.close()?;
    let (avg, max, p) = latencies.summary(&PERCENTILES);
    let secs = elapsed.as_secs_f64().max(1e-9);
    let records_per_sec = sent as f64 / secs;
    let mb_per_sec = bytes as f64 / (1024.0 * 1024.0) / secs;
    if args.json {
        outln!(
            "{{\"records\":{sent},\"record_size\":{},\"batch\":{},\"bytes\":{bytes},\"seconds\":{secs:.6},\"records_per_sec\":{records_per_sec:.1},\"mb_per_sec\":{mb_per_sec:.2},\"avg_latency_ms\":{avg:.4},\"max_latency_ms\":{max:.4},\"p50_ms\":{:.4},\"p95_ms\":{:.4},\"p99_ms\":{:.4},\"p999_ms\":{:.4}}}",
            args.record_size,
            args.batch,
            p[0],
            p[1],
            p[2],
            p[3]
        );
    } else {
        outln!(
            "{sent} records sent, {records_per_sec:.1} records/sec ({mb_per_sec:.2} MB/sec), \
             {avg:.4} ms avg latency, {max:.4} ms max latency, {:.4} ms 50th, {:.4} ms 95th, \
             {:.4} ms 99th, {:.4} ms 99.9th.",
            p[0],
            p[1],
            p[2],
            p[3]
        );
    }
    Ok(Outcome::Done)
}

/// Runs `partlog perf-consume`.
pub fn run_consume(args: &PerfConsumeArgs) -> Result<Outcome, CliError> {
    crate::require_dir(&args.dir)?;
    let log = crate::open_live_reader(&args.dir, Duration::from_millis(100))?;
    let start = log.log_start_offset();
    let end = log.log_end_offset();
    let mut position = args.from.unwrap_or(start);
    if position < start || position > end {
        return Err(CliError::new(format!(
            "--from {position} is out of range: the log holds offsets [{start}, {end})"
        )));
    }
    let limit = args.records.unwrap_or(u64::MAX);
    let bar = progress(
        u64::try_from(end - position).unwrap_or(0).min(limit),
        args.json,
    );
    let mut latencies = Latencies::new();
    let mut records = 0u64;
    let mut bytes = 0u64;
    let mut scratch = Vec::new();
    let started = Instant::now();
    while records < limit && position < end {
        let call = Instant::now();
        let fetch = log.read(position, args.fetch_bytes, ReadBound::LogEnd)?;
        if fetch.is_empty() {
            break;
        }
        let mut fetched = 0u64;
        for batch in fetch.batches() {
            let batch = batch?;
            for record in batch.records(&mut scratch)? {
                let record = record?;
                if record.offset < position || records + fetched >= limit {
                    continue;
                }
                fetched += 1;
                bytes += record.key.map_or(0, |k| k.len() as u64)
                    + record.value.map_or(0, |v| v.len() as u64);
            }
        }
        let nanos = u64::try_from(call.elapsed().as_nanos()).unwrap_or(u64::MAX);
        latencies.record(nanos, 1);
        records += fetched;
        position = fetch.next_offset();
        bar.set_position(records);
    }
    let elapsed = started.elapsed();
    bar.finish_and_clear();
    let fetches = latencies.samples.len();
    let (avg, max, p) = latencies.summary(&PERCENTILES);
    let secs = elapsed.as_secs_f64().max(1e-9);
    let mb = bytes as f64 / (1024.0 * 1024.0);
    if args.json {
        outln!(
            "{{\"records\":{records},\"bytes\":{bytes},\"fetches\":{fetches},\"seconds\":{secs:.6},\"records_per_sec\":{:.1},\"mb_per_sec\":{:.2},\"avg_fetch_ms\":{avg:.4},\"max_fetch_ms\":{max:.4},\"p50_ms\":{:.4},\"p95_ms\":{:.4},\"p99_ms\":{:.4},\"p999_ms\":{:.4}}}",
            records as f64 / secs,
            mb / secs,
            p[0],
            p[1],
            p[2],
            p[3]
        );
    } else {
        outln!(
            "data.consumed.in.MB: {mb:.4}, MB.sec: {:.4}, data.consumed.in.nMsg: {records}, \
             nMsg.sec: {:.1}, fetches: {fetches}, fetch latency: {avg:.4} ms avg, {max:.4} ms \
             max, {:.4} ms 50th, {:.4} ms 95th, {:.4} ms 99th, {:.4} ms 99.9th.",
            mb / secs,
            records as f64 / secs,
            p[0],
            p[1],
            p[2],
            p[3]
        );
    }
    Ok(Outcome::Done)
}
