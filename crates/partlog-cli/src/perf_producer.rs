//! `partlog perf-produce` through the crate's `Producer`, as kafka-producer-perf-test drives
//! Kafka's: `--acks`, `--linger-ms`, `--batch-size`, a `--throughput` cap and `--payload-file`,
//! each record's latency from its `send` to its handle's completion, and a window line every
//! five seconds when standard output is not a terminal.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use partlog::unstable::{Clock, SystemClock};
use partlog::{Acks, Log, NewRecord, Producer, ProducerConfig, SendHandle};

use crate::CliError;
use crate::perf::{Latencies, PerfProduceArgs};

/// How often a window line is printed when no progress bar shows (kafka-producer-perf-test's
/// reporting interval).
const WINDOW: Duration = Duration::from_secs(5);

/// What a run sent: records, payload bytes, the time it took, and each record's latency.
pub struct Sent {
    /// Records acknowledged.
    pub records: u64,
    /// Their payload bytes.
    pub bytes: u64,
    /// From the first send to the last acknowledgement.
    pub elapsed: Duration,
    /// Per-record latencies, send to acknowledgement.
    pub latencies: Latencies,
}

/// The payloads to send: one value repeated, or the lines of `--payload-file`, chosen in turn
/// by a xorshift generator as Kafka picks them at random.
fn payloads(args: &PerfProduceArgs) -> Result<Vec<Vec<u8>>, CliError> {
    let Some(path) = &args.payload_file else {
        return Ok(vec![crate::perf::value_bytes(args.record_size, 0x5eed)]);
    };
    let text = std::fs::read(path)
        .map_err(|e| CliError::new(format!("cannot read {}: {e}", path.display())))?;
    let lines: Vec<Vec<u8>> = text
        .split(|&b| b == b'\n')
        .filter(|line| !line.is_empty())
        .map(<[u8]>::to_vec)
        .collect();
    if lines.is_empty() {
        return Err(CliError::new(format!(
            "{} holds no payload (one per line)",
            path.display()
        )));
    }
    Ok(lines)
}

/// Drives a `Producer` over `log` as `args` say, reporting progress through `bar` and, when
/// `windows` is set, a line every five seconds.
pub fn run(
    log: &Arc<Log>,
    args: &PerfProduceArgs,
    acks: Acks,
    bar: &indicatif::ProgressBar,
    windows: bool,
) -> Result<Sent, CliError> {
    let payloads = payloads(args)?;
    let config = ProducerConfig::builder()
        .acks(acks)
        .linger_ms(args.linger_ms)
        .batch_size(args.batch_size)
        .build()?;
    let producer = Producer::new(Arc::clone(log), config)?;
    let clock = SystemClock;
    let mut latencies = Latencies::new();
    let mut window = Window::new();
    let mut in_flight: VecDeque<(Instant, u64, SendHandle)> = VecDeque::new();
    let (mut sent, mut acked, mut bytes) = (0u64, 0u64, 0u64);
    let mut pick = 0x9E37_79B9_7F4A_7C15_u64;
    let started = Instant::now();
    while sent < args.records {
        pick ^= pick << 13;
        pick ^= pick >> 7;
        pick ^= pick << 17;
        let payload = &payloads[(pick % payloads.len() as u64) as usize];
        let record = NewRecord::new(clock.now_ms(), None, Some(payload.as_slice()));
        let handle = producer.send(&record)?;
        in_flight.push_back((Instant::now(), payload.len() as u64, handle));
        sent += 1;
        bytes += payload.len() as u64;
        // Settle what has completed, oldest first, without waiting.
        while let Some((_, _, front)) = in_flight.front_mut() {
            if front.wait_timeout(Duration::ZERO).is_none() {
                break;
            }
            if let Some((sent_at, size, handle)) = in_flight.pop_front() {
                settle(handle, sent_at, size, &mut latencies, &mut window)?;
                acked += 1;
            }
        }
        bar.set_position(acked);
        if windows && window.started.elapsed() >= WINDOW {
            outln!("{}", window.line());
            window = Window::new();
        }
        if args.throughput > 0 {
            // Kafka's ThroughputThrottler: sleep until the sends are back under the target.
            let due = Duration::from_secs_f64(sent as f64 / args.throughput as f64);
            let elapsed = started.elapsed();
            if due > elapsed {
                std::thread::sleep(due - elapsed);
            }
        }
    }
    producer.flush()?;
    for (sent_at, size, handle) in in_flight {
        settle(handle, sent_at, size, &mut latencies, &mut window)?;
        acked += 1;
    }
    producer.close()?;
    bar.set_position(acked);
    Ok(Sent {
        records: acked,
        bytes,
        elapsed: started.elapsed(),
        latencies,
    })
}

/// Waits for `handle` and records its latency from `sent_at`.
fn settle(
    handle: SendHandle,
    sent_at: Instant,
    size: u64,
    latencies: &mut Latencies,
    window: &mut Window,
) -> Result<(), partlog::Error> {
    handle.wait()?;
    let nanos = u64::try_from(sent_at.elapsed().as_nanos()).unwrap_or(u64::MAX);
    latencies.record(nanos, 1);
    window.record(nanos, size);
    Ok(())
}

/// One five-second window of kafka-producer-perf-test's periodic report.
struct Window {
    started: Instant,
    records: u64,
    bytes: u64,
    total_nanos: u128,
    max_nanos: u64,
}

impl Window {
    fn new() -> Self {
        Window {
            started: Instant::now(),
            records: 0,
            bytes: 0,
            total_nanos: 0,
            max_nanos: 0,
        }
    }

    fn record(&mut self, nanos: u64, bytes: u64) {
        self.records += 1;
        self.bytes += bytes;
        self.total_nanos += u128::from(nanos);
        self.max_nanos = self.max_nanos.max(nanos);
    }

    /// `N records sent, R records/sec (M MB/sec), A ms avg latency, X ms max latency.`
    fn line(&self) -> String {
        let secs = self.started.elapsed().as_secs_f64().max(1e-9);
        let avg = if self.records == 0 {
            0.0
        } else {
            self.total_nanos as f64 / self.records as f64 / 1e6
        };
        format!(
            "{} records sent, {:.1} records/sec ({:.2} MB/sec), {avg:.1} ms avg latency, {:.1} ms max latency.",
            self.records,
            self.records as f64 / secs,
            self.bytes as f64 / (1024.0 * 1024.0) / secs,
            self.max_nanos as f64 / 1e6
        )
    }
}
