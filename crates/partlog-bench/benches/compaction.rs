//! Compaction throughput against a plain `read()` of the same bytes (benches/README.md: target ≥
//! 0.1), and the pass's peak memory.
//!
//! ```sh
//! cargo bench --bench compaction                                  # 1 GiB per codec (the default)
//! COMPACTION_BENCH_BYTES=67108864 cargo bench --bench compaction  # a quick 64 MiB run
//! COMPACTION_BENCH_CODECS=lz4 cargo bench --bench compaction      # one codec only
//! ```
//!
//! For each codec (none, lz4) a log of at least `COMPACTION_BENCH_BYTES` bytes (default 1 GiB)
//! is built once, untimed: 100-record batches of 1 KiB values over 4,096 keys, in segments of an
//! eighth of the log (128 MiB at 1 GiB), so that each key has hundreds of superseded records. Every iteration copies that
//! log into a fresh directory (untimed), then times one `Log::compact()` on it, and, in the same
//! iteration, a plain `read()` of the files of the segments the pass cleaned, in 1 MiB chunks;
//! the two run in alternating order. Criterion reports the compaction time; at the end the bench
//! prints, per codec, the median of the per-iteration ratios
//!
//! ```text
//! (bytes the pass read, both phases counted / compaction time) / (bytes read / read time)
//! ```
//!
//! (benches/README.md counts compaction's input over both phases), and the peak memory of the
//! passes: VmHWM (peak resident set, reset through `/proc/self/clear_refs` before each pass) and
//! the largest RssAnon seen right after a pass, from `/proc/self/status`. Everything runs in the
//! page cache (the machine has the memory for it), so neither side waits for the disk.

#[path = "common/compaction_log.rs"]
mod compaction_log;

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use partlog::{CompressionType, Log};

const DEFAULT_BYTES: u64 = 1 << 30;
/// Segments of an eighth of the log, at most 128 MiB (the size at 1 GiB).
const MAX_SEGMENT_BYTES: u64 = 128 << 20;

fn target_bytes() -> u64 {
    std::env::var("COMPACTION_BENCH_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_BYTES)
}

fn segment_bytes() -> u32 {
    let bytes = (target_bytes() / 8).clamp(1 << 20, MAX_SEGMENT_BYTES);
    u32::try_from(bytes).unwrap_or(u32::MAX)
}

/// A field of `/proc/self/status`, in KiB.
fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
}

/// Resets VmHWM to the current resident set (Linux ≥ 4.0); `false` when that is not allowed.
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

#[derive(Debug, Default)]
struct Figures {
    ratios: Vec<f64>,
    compaction_mib_s: Vec<f64>,
    read_mib_s: Vec<f64>,
    peak_hwm_kib: u64,
    peak_rss_anon_kib: u64,
    pass_bytes_read: u64,
    pass_bytes_written: u64,
    log_bytes: u64,
}

fn bench_codec(c: &mut Criterion, name: &str, codec: CompressionType) {
    let bytes = target_bytes();
    let scratch = tempfile::tempdir().expect("a temporary directory");
    let template = scratch.path().join("template");
    let started = Instant::now();
    compaction_log::build(&template, codec, segment_bytes(), bytes);
    let built_bytes = compaction_log::log_bytes(&template);
    eprintln!(
        "{name}: built {built_bytes} bytes of log in {:.1} s (untimed)",
        started.elapsed().as_secs_f64()
    );
    let figures = Mutex::new(Figures {
        log_bytes: built_bytes,
        ..Figures::default()
    });
    let mut run = 0u64;
    let mut group = c.benchmark_group("compaction");
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(1));
    group.measurement_time(Duration::from_secs(1));
    group.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let mut timed = Duration::ZERO;
            for _ in 0..iters {
                run += 1;
                let dir = scratch.path().join(format!("run-{run}"));
                compaction_log::copy_log(&template, &dir);
                let log =
                    Log::open(&dir, compaction_log::config(codec, segment_bytes())).expect("open");
                // The sealed segments' files, before the pass replaces them: what it reads.
                let sealed: Vec<PathBuf> = {
                    let mut files = compaction_log::log_files(&dir);
                    files.pop();
                    files
                };
                let read_first = run.is_multiple_of(2);
                let mut read_time = Duration::ZERO;
                let mut read_bytes = 0;
                if read_first {
                    let started = Instant::now();
                    read_bytes = compaction_log::read_files(&sealed);
                    read_time = started.elapsed();
                }
                let peak_reset = reset_peak();
                let started = Instant::now();
                let stats = log.compact().expect("compact");
                let pass_time = started.elapsed();
                let hwm = status_kib("VmHWM").unwrap_or(0);
                let rss_anon = status_kib("RssAnon").unwrap_or(0);
                if !read_first {
                    let started = Instant::now();
                    read_bytes = compaction_log::read_files(&sealed);
                    read_time = started.elapsed();
                }
                timed += pass_time;
                let mut figures = figures.lock().expect("not poisoned");
                let mib =
                    |bytes: u64, time: Duration| bytes as f64 / time.as_secs_f64() / 1048576.0;
                let compaction = mib(stats.bytes_read, pass_time);
                let read = mib(read_bytes, read_time);
                figures.compaction_mib_s.push(compaction);
                figures.read_mib_s.push(read);
                figures.ratios.push(compaction / read);
                if peak_reset {
                    figures.peak_hwm_kib = figures.peak_hwm_kib.max(hwm);
                }
                figures.peak_rss_anon_kib = figures.peak_rss_anon_kib.max(rss_anon);
                figures.pass_bytes_read = stats.bytes_read;
                figures.pass_bytes_written = stats.bytes_written;
                drop(figures);
                log.close().expect("close");
                drop(log);
                std::fs::remove_dir_all(&dir).expect("remove the run's copy");
            }
            timed
        });
    });
    group.finish();
    let mut figures = figures.into_inner().expect("not poisoned");
    let median = |values: &mut Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
    };
    let runs = figures.ratios.len();
    println!(
        "compaction/{name}: log {} bytes, pass read {} bytes (both phases) and wrote {}; \
         median over {runs} runs: compaction {:.0} MiB/s, read() {:.0} MiB/s, ratio {:.3} \
         (target >= 0.1); peak memory of a pass: VmHWM {} KiB, RssAnon {} KiB",
        figures.log_bytes,
        figures.pass_bytes_read,
        figures.pass_bytes_written,
        median(&mut figures.compaction_mib_s),
        median(&mut figures.read_mib_s),
        median(&mut figures.ratios),
        figures.peak_hwm_kib,
        figures.peak_rss_anon_kib,
    );
}

fn compaction(c: &mut Criterion) {
    // COMPACTION_BENCH_CODECS=lz4 runs one codec only (default: both).
    let codecs = std::env::var("COMPACTION_BENCH_CODECS").unwrap_or_else(|_| "none,lz4".into());
    for (name, codec) in [
        ("none", CompressionType::Uncompressed),
        ("lz4", CompressionType::Lz4),
    ] {
        if codecs.split(',').any(|wanted| wanted.trim() == name) {
            bench_codec(c, name, codec);
        }
    }
}

criterion_group!(benches, compaction);
criterion_main!(benches);
