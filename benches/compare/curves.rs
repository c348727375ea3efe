//! How partlog's cost grows with its work (issue 18, section 3): six curves of 4-5 points each,
//! partlog only (a curve is read by its shape, not against a reference).
//!
//! ```sh
//! cargo bench --bench compare -- --curves                       # the issue's sizes
//! CURVES_SCALE=0.25 cargo bench --bench compare -- --curves     # every log a quarter the size
//! CURVES_ONLY=open,durable cargo bench --bench compare -- --curves   # some curves only
//! ```
//!
//! - `append_vs_segments`: `append_batch` of pre-built 100 × 1 KiB batches (128 MiB a rep, 64 MiB
//!   segments, page cache) into a log that already holds 1 to 10,000 segments (six points).
//!   Each rep truncates its appends away afterwards (untimed), so every rep starts from the
//!   same log. Expected: flat.
//! - `open_vs_segments`: `Log::open` after a clean shutdown of the same logs, 1 to 10,000 segments (close
//!   untimed). Expected: sub-linear, no scan of sealed segments.
//! - `recovery_vs_tail`: an unclean open of a fixed 4 GiB log (four 1 GiB segments) with 16 MiB
//!   to 1 GiB above its recovery point. Expected: linear in the tail.
//! - `rss_vs_log_size`: RssAnon (as `examples/rss.rs` reads it) of a fresh process appending up
//!   to 10 GiB, with Kafka's default 1 GiB segments and with 64 MiB ones; the slope of the
//!   64 MiB series is the cost of one segment. Expected: flat, plus that cost per segment.
//! - `compaction_vs_keys`: one `compact_with` pass over a fixed 1 GiB log of 100 B values, with
//!   1 K to 1 M distinct keys, and the pass's peak memory (VmHWM above the resident set before
//!   it) beside the key map's own estimate (key length + about 40 bytes a key).
//! - `durable_vs_threads`: `FlushPolicy::EveryAppend` appends of 100 B records from 1 to 16
//!   threads: throughput, and the records each group-commit sync covered.
//!
//! `CURVES_REPS` sets the reps a point (5, or 3 with `COMPARE_QUICK=1`; the median is kept).
//! `CURVES_SCALE` (a fraction, 1 by default) scales every log size (the recovery log and its
//! tails, the memory curve's log, the compaction log); segment counts, key counts and thread
//! counts stay. The table goes to stdout, one JSON line per point to `curves.jsonl`, and one
//! SVG per curve to `curves/` (both under `$CARGO_TARGET_DIR`, or `target/`).

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use partlog::unstable::checkpoint::CheckpointFile;
use partlog::unstable::{OsStorage, Storage};
use partlog::{
    BatchBuilder, CleanupPolicy, CompactionOptions, Compression, FlushPolicy, Log, LogConfig,
    NewRecord,
};
use plotters::prelude::*;

use super::{
    Ctx, DEFAULT_MAX_GATHER, SEGMENT_BYTES, SMALL_VALUE, TIMESTAMP, median, one_kib_batch,
    partlog_durable_rep, write_rep_batches,
};

/// The environment variable that makes this binary the memory curve's child process.
const RSS_CHILD_ENV: &str = "CURVES_RSS_CHILD";
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// One measured point of a curve: its series, its x, and every figure measured there (the
/// panels plot some of them; the table and the JSON line show all).
struct Point {
    series: String,
    x: f64,
    values: Vec<(&'static str, f64)>,
}

impl Point {
    fn value(&self, name: &str) -> Option<f64> {
        self.values
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, v)| v)
    }
}

/// One plot of a curve: which figure of the points it draws, and its axis label.
struct Panel {
    value: &'static str,
    y_label: &'static str,
}

/// A curve: what it measured and how to draw it.
struct Curve {
    name: &'static str,
    title: String,
    x_name: &'static str,
    x_label: &'static str,
    x_log: bool,
    panels: Vec<Panel>,
    points: Vec<Point>,
    /// What the shape says, for the table (a fitted slope, the per-segment cost).
    summary: String,
}

/// The settings of a curves run.
struct Settings {
    scale: f64,
    reps: usize,
    only: Option<Vec<String>>,
}

impl Settings {
    fn from_env(reps: usize) -> Settings {
        let scale = std::env::var("CURVES_SCALE")
            .ok()
            .map_or(1.0, |s| s.parse::<f64>().expect("CURVES_SCALE: a number"));
        assert!(scale > 0.0, "CURVES_SCALE must be positive");
        Settings {
            scale,
            reps,
            only: std::env::var("CURVES_ONLY")
                .ok()
                .map(|only| only.split(',').map(str::to_string).collect()),
        }
    }

    /// `bytes` scaled, rounded down to whole MiB (at least one).
    fn scaled(&self, bytes: u64) -> u64 {
        (((bytes as f64 * self.scale) as u64) / MIB).max(1) * MIB
    }

    fn wants(&self, name: &str) -> bool {
        self.only
            .as_ref()
            .is_none_or(|only| only.iter().any(|want| name.contains(want.as_str())))
    }
}

/// `cargo bench --bench compare -- --curves`: measures, prints and plots every curve.
pub(super) fn main() {
    if let Ok(args) = std::env::var(RSS_CHILD_ENV) {
        rss_child(&args);
        return;
    }
    let quick = std::env::var_os("COMPARE_QUICK").is_some_and(|v| v != "0");
    let reps = std::env::var("CURVES_REPS")
        .ok()
        .map_or(if quick { 3 } else { 5 }, |reps| {
            reps.parse().expect("CURVES_REPS: a count")
        });
    let settings = Settings::from_env(reps.max(1));
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target"));
    let scratch = tempfile::Builder::new()
        .prefix("partlog-curves-")
        .tempdir_in(std::env::var_os("COMPARE_DIR").map_or_else(std::env::temp_dir, PathBuf::from))
        .expect("a scratch directory");
    let ctx = Ctx {
        pairs: settings.reps,
        root: scratch.path().to_path_buf(),
    };
    println!(
        "partlog curves: {} reps a point, scale {}, scratch in {}",
        settings.reps,
        settings.scale,
        ctx.root.display()
    );
    let started = Instant::now();
    type CurvesFn = fn(&Ctx, &Settings) -> Vec<Curve>;
    let all: [(&[&str], CurvesFn); 5] = [
        (&["append_vs_segments", "open_vs_segments"], segment_curves),
        (&["recovery_vs_tail"], |ctx, s| {
            vec![recovery_vs_tail(ctx, s)]
        }),
        (&["rss_vs_log_size"], |ctx, s| vec![rss_vs_log_size(ctx, s)]),
        (&["compaction_vs_keys"], |ctx, s| {
            vec![compaction_vs_keys(ctx, s)]
        }),
        (&["durable_vs_threads"], |ctx, s| {
            vec![durable_vs_threads(ctx, s)]
        }),
    ];
    let mut curves = Vec::new();
    for (names, measure) in all {
        if !names.iter().any(|name| settings.wants(name)) {
            continue;
        }
        let curves_started = Instant::now();
        let measured = measure(&ctx, &settings);
        for curve in &measured {
            println!(
                "  {}: {} points ({:.1} s for {})",
                curve.name,
                curve.points.len(),
                curves_started.elapsed().as_secs_f64(),
                names.join(" and ")
            );
        }
        curves.extend(measured);
    }
    print_table(&curves);
    let plots = target_dir.join("curves");
    fs::create_dir_all(&plots).expect("create the plots directory");
    let mut lines = Vec::new();
    for curve in &curves {
        lines.extend(json_lines(curve));
        let path = plots.join(format!("{}.svg", curve.name));
        if let Err(error) = plot(curve, &path) {
            panic!("plotting {}: {error}", path.display());
        }
    }
    let jsonl = target_dir.join("curves.jsonl");
    fs::write(&jsonl, lines.join("\n") + "\n").expect("write curves.jsonl");
    println!(
        "\n{} curves measured in {:.0} s; JSON lines in {}, plots in {}",
        curves.len(),
        started.elapsed().as_secs_f64(),
        jsonl.display(),
        plots.display()
    );
}

// ---------------------------------------------------------------------------------------------
// Curves 1 and 2: appends and open against the number of segments.

/// One 30-record batch of 100 B values (about 3.5 KiB) per 4 KiB segment: every append rolls.
fn tiny_segments_config() -> LogConfig {
    LogConfig::builder_for_tests()
        .segment_bytes(4096)
        .max_message_bytes(4096)
        .build()
        .expect("a valid config")
}

/// The append curve's config: the compare rows' 64 MiB segments, and Kafka's default
/// `max.message.bytes` set explicitly (the tiny config stored 4096 in the log's settings).
fn append_config() -> LogConfig {
    LogConfig::builder()
        .segment_bytes(SEGMENT_BYTES)
        .max_message_bytes(1_048_588)
        .flush_policy(FlushPolicy::OsDecides)
        .build()
        .expect("a valid config")
}

/// A log of `segments` small segments in `dir`, closed cleanly.
fn build_segments(dir: &Path, segments: usize) {
    let log = Log::open(dir, tiny_segments_config()).expect("open");
    let mut builder = BatchBuilder::new(Compression::None);
    for _ in 0..30 {
        builder.push(&NewRecord::new(TIMESTAMP, None, Some(&SMALL_VALUE)));
    }
    let batch = builder.build().expect("batch");
    log.append_batch(&batch).expect("append_batch");
    while log.stats().segments < segments {
        log.append_batch(&batch).expect("append_batch");
    }
    log.close().expect("close");
}

/// Builds one log per segment count under `ctx`'s scratch: (count, directory).
fn segment_logs(ctx: &Ctx, counts: &[usize]) -> Vec<(usize, PathBuf)> {
    counts
        .iter()
        .map(|&count| {
            let dir = ctx.fresh_dir(&format!("segments-{count}"));
            let started = Instant::now();
            build_segments(&dir, count);
            println!(
                "    built a log of {count} segments in {:.1} s",
                started.elapsed().as_secs_f64()
            );
            (count, dir)
        })
        .collect()
}

/// The segment counts of curves 1 and 2, one log each, built once for both.
const SEGMENT_COUNTS: [usize; 6] = [1, 10, 100, 1_000, 3_000, 10_000];

/// Curves 1 and 2 on the same logs (building 14,111 small segments takes a minute).
fn segment_curves(ctx: &Ctx, settings: &Settings) -> Vec<Curve> {
    let logs = segment_logs(ctx, &SEGMENT_COUNTS);
    let mut curves = Vec::new();
    if settings.wants("append_vs_segments") {
        curves.push(append_vs_segments(&logs, settings));
    }
    if settings.wants("open_vs_segments") {
        curves.push(open_vs_segments(&logs, settings));
    }
    for (_, dir) in &logs {
        fs::remove_dir_all(dir).ok();
    }
    curves
}

fn append_vs_segments(logs: &[(usize, PathBuf)], settings: &Settings) -> Curve {
    let counts: Vec<usize> = logs.iter().map(|(count, _)| *count).collect();
    let batch = one_kib_batch();
    let batches = write_rep_batches();
    let mut rates = vec![Vec::new(); counts.len()];
    // Reps interleave the points, so that the machine's noise spreads over all of them alike.
    for _ in 0..settings.reps {
        for (i, (count, dir)) in logs.iter().enumerate() {
            let log = Log::open(dir, append_config()).expect("open");
            assert_eq!(log.stats().segments, *count, "the log holds its segments");
            let end = log.log_end_offset();
            let started = Instant::now();
            for _ in 0..batches {
                log.append_batch(&batch).expect("append_batch");
            }
            let seconds = started.elapsed().as_secs_f64();
            log.truncate_to(end)
                .expect("truncate the rep's appends away");
            log.close().expect("close");
            rates[i].push(batches as f64 * 100.0 / seconds);
        }
    }
    let points: Vec<Point> = counts
        .iter()
        .zip(&mut rates)
        .map(|(&count, rates)| Point {
            series: "append_batch, 100 x 1 KiB".into(),
            x: count as f64,
            values: vec![
                ("records_per_s", median(rates)),
                ("user_mb_per_s", median(rates) * 1024.0 / 1e6),
            ],
        })
        .collect();
    let first = points[0].value("records_per_s").unwrap_or(f64::NAN);
    let last = points[points.len() - 1]
        .value("records_per_s")
        .unwrap_or(f64::NAN);
    Curve {
        name: "append_vs_segments",
        title: "append throughput against segments already in the log".into(),
        x_name: "segments",
        x_label: "segments in the log before the appends",
        x_log: true,
        panels: vec![Panel {
            value: "records_per_s",
            y_label: "records/s (100 x 1 KiB batches, page cache)",
        }],
        points,
        summary: format!(
            "10,000 segments / 1 segment: {:.2} of the throughput",
            last / first
        ),
    }
}

fn open_vs_segments(logs: &[(usize, PathBuf)], settings: &Settings) -> Curve {
    let counts: Vec<usize> = logs.iter().map(|(count, _)| *count).collect();
    let mut times = vec![Vec::new(); counts.len()];
    for _ in 0..settings.reps {
        for (i, (count, dir)) in logs.iter().enumerate() {
            let started = Instant::now();
            let log = Log::open(dir, tiny_segments_config()).expect("open");
            let seconds = started.elapsed().as_secs_f64();
            assert!(log.recovery_report().clean_shutdown, "a clean open");
            assert_eq!(log.stats().segments, *count, "the log holds its segments");
            // Untimed, but it writes the clean-shutdown fields the next open trusts.
            log.close().expect("close");
            times[i].push(seconds * 1e3);
        }
    }
    let points: Vec<Point> = counts
        .iter()
        .zip(&mut times)
        .map(|(&count, times)| Point {
            series: "clean open".into(),
            x: count as f64,
            values: vec![("open_ms", median(times))],
        })
        .collect();
    let exponent = log_log_slope(&points, "open_ms");
    Curve {
        name: "open_vs_segments",
        title: "open after a clean shutdown against segments".into(),
        x_name: "segments",
        x_label: "segments in the log",
        x_log: true,
        panels: vec![Panel {
            value: "open_ms",
            y_label: "open time, ms",
        }],
        points,
        summary: format!("time grows as segments^{exponent:.2} (fitted on log-log axes)"),
    }
}

/// The slope of `value` against x on log-log axes (least squares): 1 is linear, 0 flat.
fn log_log_slope(points: &[Point], value: &str) -> f64 {
    let pairs: Vec<(f64, f64)> = points
        .iter()
        .filter_map(|p| Some((p.x.ln(), p.value(value)?.ln())))
        .collect();
    slope(&pairs)
}

/// The least-squares slope of `pairs` (x, y).
fn slope(pairs: &[(f64, f64)]) -> f64 {
    let n = pairs.len() as f64;
    let mean_x = pairs.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = pairs.iter().map(|p| p.1).sum::<f64>() / n;
    let covariance: f64 = pairs.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    let variance: f64 = pairs.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    covariance / variance
}

// ---------------------------------------------------------------------------------------------
// Curve 3: unclean recovery against the unflushed tail, at a fixed log size.
//
// One log is built and closed cleanly: four segments of `segment` bytes, the last (active) one
// nearly full, every byte synced. Each rep lays a crashed copy of it: the `.log` files
// hard-linked (recovery below a torn tail writes none of them: the rep checks the template's
// active `.log` afterwards), every other file copied and synced, producer snapshots above the
// recovery point left out (a crash at that point had not written them), and a checkpoint record
// without the clean-shutdown fields whose recovery point leaves `tail` bytes of the active
// segment above it. Recovery then drops the tail's cached pages and reads it from the disk, as
// after a crash (ARCHITECTURE.md §7).

fn recovery_config(segment_bytes: u64) -> LogConfig {
    LogConfig::builder()
        .segment_bytes(u32::try_from(segment_bytes).expect("segment.bytes fits in an i32"))
        .flush_policy(FlushPolicy::OsDecides)
        .build()
        .expect("a valid config")
}

/// The `.log` file of the segment with the highest base in `dir`.
fn active_log_file(dir: &Path) -> PathBuf {
    let mut logs: Vec<PathBuf> = fs::read_dir(dir)
        .expect("list")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "log"))
        .collect();
    logs.sort();
    logs.pop().expect("a segment")
}

/// The base offset in a segment-style file name (`00000000000000012345.log`).
fn base_of(path: &Path) -> i64 {
    path.file_stem()
        .and_then(|stem| stem.to_str())
        .and_then(|stem| stem.parse().ok())
        .expect("a segment file name")
}

/// Lays a crashed copy of `template` in `dir` with its recovery point at `recovery_point`.
fn lay_crashed_copy(template: &Path, dir: &Path, recovery_point: i64) {
    for entry in fs::read_dir(template).expect("list") {
        let path = entry.expect("entry").path();
        let name = path.file_name().expect("a file name").to_owned();
        let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        if name == "partlog.lock" || (extension == "snapshot" && base_of(&path) > recovery_point) {
            continue;
        }
        let target = dir.join(&name);
        if extension == "log" {
            fs::hard_link(&path, &target).expect("link a segment");
        } else {
            fs::copy(&path, &target).expect("copy");
            fs::File::open(&target)
                .and_then(|file| file.sync_all())
                .expect("sync the copy");
        }
    }
    let storage: Arc<dyn Storage> = Arc::new(OsStorage::new());
    let (mut checkpoint, _) = CheckpointFile::open(&storage, dir).expect("open the checkpoint");
    checkpoint
        .write(recovery_point, 0, None, true)
        .expect("write a crash checkpoint");
}

fn recovery_vs_tail(ctx: &Ctx, settings: &Settings) -> Curve {
    let segment = settings.scaled(GIB);
    let tails: Vec<u64> = [16 * MIB, 64 * MIB, 256 * MIB, GIB]
        .iter()
        .map(|&tail| settings.scaled(tail))
        .collect();
    let template = ctx.fresh_dir("recovery-template");
    let batch = one_kib_batch();
    let per_segment = segment / batch.len() as u64;
    {
        let log = Log::open(&template, recovery_config(segment)).expect("open");
        for _ in 0..4 * per_segment {
            log.append_batch(&batch).expect("append_batch");
        }
        assert_eq!(log.stats().segments, 4, "four segments");
        log.close().expect("close");
    }
    let active = active_log_file(&template);
    let active_base = base_of(&active);
    let active_bytes = fs::metadata(&active).expect("stat").len();
    let log_bytes: u64 = fs::read_dir(&template)
        .expect("list")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "log"))
        .map(|path| fs::metadata(path).expect("stat").len())
        .sum();
    let batch_bytes = batch.len() as u64;
    // The recovery point for each tail: the first batch boundary at or above `active - tail`.
    let plans: Vec<(u64, i64)> = tails
        .iter()
        .map(|&tail| {
            let kept = active_bytes.saturating_sub(tail).div_ceil(batch_bytes);
            (
                active_bytes - kept * batch_bytes,
                active_base + 100 * kept as i64,
            )
        })
        .collect();
    let mut times = vec![Vec::new(); plans.len()];
    let mut scanned = vec![0u64; plans.len()];
    for _ in 0..settings.reps {
        for (i, &(tail, recovery_point)) in plans.iter().enumerate() {
            let dir = ctx.fresh_dir("recovery");
            lay_crashed_copy(&template, &dir, recovery_point);
            let started = Instant::now();
            let log = Log::open(&dir, recovery_config(segment)).expect("unclean open");
            let seconds = started.elapsed().as_secs_f64();
            let report = log.recovery_report();
            assert!(!report.clean_shutdown, "an unclean open");
            assert_eq!(report.recovery_point, recovery_point, "the laid point");
            assert!(
                report.bytes_scanned >= tail,
                "recovery scanned the tail: {} < {tail}",
                report.bytes_scanned
            );
            scanned[i] = report.bytes_scanned;
            log.close().expect("close");
            drop(log);
            assert_eq!(
                fs::metadata(&active).expect("stat").len(),
                active_bytes,
                "recovery left the hard-linked template's active segment alone"
            );
            times[i].push(seconds * 1e3);
        }
    }
    fs::remove_dir_all(ctx.root.join("recovery")).ok();
    fs::remove_dir_all(&template).ok();
    let series = format!("{:.2} GiB log", log_bytes as f64 / GIB as f64);
    let points: Vec<Point> = plans
        .iter()
        .zip(&mut times)
        .zip(&scanned)
        .map(|((&(tail, _), times), &scanned)| {
            let ms = median(times);
            Point {
                series: series.clone(),
                x: tail as f64 / MIB as f64,
                values: vec![
                    ("recovery_ms", ms),
                    ("bytes_scanned", scanned as f64),
                    ("scan_mb_per_s", scanned as f64 / 1e6 / (ms / 1e3)),
                ],
            }
        })
        .collect();
    let exponent = log_log_slope(&points, "recovery_ms");
    let per_gib: Vec<(f64, f64)> = points
        .iter()
        .filter_map(|p| Some((p.x / 1024.0, p.value("recovery_ms")?)))
        .collect();
    Curve {
        name: "recovery_vs_tail",
        title: format!("unclean recovery against the unflushed tail ({series})"),
        x_name: "tail_mib",
        x_label: "unflushed tail, MiB",
        x_log: false,
        panels: vec![Panel {
            value: "recovery_ms",
            y_label: "unclean open, ms",
        }],
        summary: format!(
            "{:.0} ms per GiB of tail (least squares); time grows as tail^{exponent:.2}",
            slope(&per_gib)
        ),
        points,
    }
}

// ---------------------------------------------------------------------------------------------
// Curve 4: resident memory against log size, in a fresh process per series.

/// `--curves` with [`RSS_CHILD_ENV`] set to `DIR SEGMENT_MIB SIZE_MIB...`: appends 100 × 1 KiB
/// batches into a new log in `DIR` and prints `rss BYTES SEGMENTS RSS_ANON_KIB RSS_FILE_KIB` at
/// the start and at each size.
fn rss_child(args: &str) {
    let mut args = args.split_whitespace();
    let dir = PathBuf::from(args.next().expect("DIR"));
    let segment_mib: u32 = args
        .next()
        .and_then(|s| s.parse().ok())
        .expect("SEGMENT_MIB");
    let sizes: Vec<u64> = args
        .map(|s| s.parse::<u64>().expect("SIZE_MIB") * MIB)
        .collect();
    let config = LogConfig::builder()
        .segment_bytes(segment_mib << 20)
        .build()
        .expect("config");
    let log = Log::open(&dir, config).expect("open");
    let batch = one_kib_batch();
    let report = |log: &Log, written: u64| {
        println!(
            "rss {written} {} {} {}",
            log.stats().segments,
            status_kib("RssAnon:"),
            status_kib("RssFile:")
        );
    };
    report(&log, 0);
    let mut written = 0u64;
    for size in sizes {
        while written < size {
            written += log.append_batch(&batch).expect("append").bytes as u64;
        }
        report(&log, written);
    }
    log.close().expect("close");
}

/// A field of `/proc/self/status`, in KiB (0 when absent).
fn status_kib(field: &str) -> u64 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix(field))
                .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn rss_vs_log_size(ctx: &Ctx, settings: &Settings) -> Curve {
    let sizes_mib: Vec<u64> = [GIB, 2 * GIB, 5 * GIB, 10 * GIB]
        .iter()
        .map(|&size| settings.scaled(size) / MIB)
        .collect();
    let mut points = Vec::new();
    let mut summary = Vec::new();
    for segment_mib in [1024u32, 64] {
        let dir = ctx.fresh_dir("rss");
        fs::remove_dir_all(&dir).ok();
        let mut args = format!("{} {segment_mib}", dir.display());
        for size in &sizes_mib {
            args.push_str(&format!(" {size}"));
        }
        let mut child = Command::new(std::env::current_exe().expect("this binary"))
            .env(RSS_CHILD_ENV, args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the memory child");
        let stdout = child.stdout.take().expect("the child's stdout");
        let mut figures = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let line = line.expect("read the child's output");
            let fields: Vec<f64> = line
                .strip_prefix("rss ")
                .map(|rest| rest.split(' ').filter_map(|f| f.parse().ok()).collect())
                .unwrap_or_default();
            if let [written, segments, anon, file] = fields[..] {
                figures.push((written, segments, anon, file));
            }
        }
        assert!(child.wait().expect("wait").success(), "the memory child");
        fs::remove_dir_all(&dir).ok();
        assert_eq!(figures.len(), sizes_mib.len() + 1, "a figure per size");
        let series = format!("segment.bytes {segment_mib} MiB");
        let per_segment = slope(&figures[1..].iter().map(|f| (f.1, f.2)).collect::<Vec<_>>());
        let (first, last) = (figures[1], figures[figures.len() - 1]);
        summary.push(format!(
            "{series}: empty {:.0} KiB, {:+.1}% from {:.1} to {:.1} GiB, {per_segment:.2} KiB per segment",
            figures[0].2,
            (last.2 / first.2 - 1.0) * 100.0,
            first.0 / GIB as f64,
            last.0 / GIB as f64
        ));
        for &(written, segments, anon, file) in &figures[1..] {
            points.push(Point {
                series: series.clone(),
                x: written / GIB as f64,
                values: vec![
                    ("rss_anon_kib", anon),
                    ("segments", segments),
                    ("rss_file_kib", file),
                ],
            });
        }
    }
    Curve {
        name: "rss_vs_log_size",
        title: "resident memory (RssAnon) against log size".into(),
        x_name: "log_gib",
        x_label: "log size, GiB",
        x_log: false,
        panels: vec![Panel {
            value: "rss_anon_kib",
            y_label: "RssAnon, KiB",
        }],
        points,
        summary: summary.join("; "),
    }
}

// ---------------------------------------------------------------------------------------------
// Curve 5: compaction against distinct keys, at a fixed log size.

/// Bytes of each value in the compaction curve's log: small, so that a 1 GiB log holds each of
/// 1 M keys several times.
const COMPACTION_VALUE_BYTES: usize = 100;

fn compaction_config(segment_bytes: u64) -> LogConfig {
    LogConfig::builder()
        .segment_bytes(u32::try_from(segment_bytes).expect("segment.bytes fits in an i32"))
        .cleanup_policy(CleanupPolicy::COMPACT)
        .compression_type(partlog::CompressionType::Uncompressed)
        .build()
        .expect("a valid config")
}

fn compaction_key(i: u64) -> Vec<u8> {
    format!("key-{i:08}").into_bytes()
}

/// Builds a log of `bytes` of 100-record batches whose keys cycle through `keys` names.
fn build_keyed_log(dir: &Path, segment_bytes: u64, bytes: u64, keys: u64) {
    let log = Log::open(dir, compaction_config(segment_bytes)).expect("open");
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut record = 0u64;
    let mut appended = 0u64;
    while appended < bytes {
        let keys: Vec<Vec<u8>> = (0..100)
            .map(|i| compaction_key((record + i) % keys))
            .collect();
        let values: Vec<[u8; COMPACTION_VALUE_BYTES]> = (0..100)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let mut value = [b'v'; COMPACTION_VALUE_BYTES];
                value[..8].copy_from_slice(&state.to_le_bytes());
                value
            })
            .collect();
        let batch: Vec<NewRecord> = keys
            .iter()
            .zip(&values)
            .map(|(key, value)| NewRecord::new(TIMESTAMP, Some(key), Some(value)))
            .collect();
        appended += log.append(&batch).expect("append").bytes as u64;
        record += 100;
    }
    log.close().expect("close");
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("mkdir");
    for entry in fs::read_dir(from).expect("list") {
        let path = entry.expect("entry").path();
        let name = path.file_name().expect("a file name");
        if name != "partlog.lock" {
            fs::copy(&path, to.join(name)).expect("copy");
        }
    }
}

fn compaction_vs_keys(ctx: &Ctx, settings: &Settings) -> Curve {
    let log_bytes = settings.scaled(GIB);
    let segment = (log_bytes / 8).max(MIB);
    let key_counts = [1_000u64, 10_000, 100_000, 1_000_000];
    let mut points = Vec::new();
    for &keys in &key_counts {
        let template = ctx.fresh_dir("compaction-template");
        build_keyed_log(&template, segment, log_bytes, keys);
        let mut times = Vec::new();
        let mut peak_kib = 0u64;
        let mut stats_seen = None;
        for _ in 0..settings.reps {
            let dir = ctx.fresh_dir("compaction");
            copy_dir(&template, &dir);
            let log = Log::open(&dir, compaction_config(segment)).expect("open");
            // A map large enough for every key: the pass then covers the whole cleanable range
            // in one go at every point (at its default of 1 M keys, the 1 M point's map would
            // fill and end the pass early).
            let options = CompactionOptions::with_max_map_keys(4 * keys as usize);
            let peak_reset = fs::write("/proc/self/clear_refs", "5").is_ok();
            let resident_before = status_kib("VmRSS:");
            let started = Instant::now();
            let stats = log.compact_with(options).expect("compact");
            let seconds = started.elapsed().as_secs_f64();
            if peak_reset {
                // The allocator may hand back memory freed by an earlier rep without a page
                // fault, so the largest figure of the reps is the one kept.
                peak_kib = peak_kib.max(status_kib("VmHWM:").saturating_sub(resident_before));
            }
            // A log too small to hold each key twice (a small CURVES_SCALE) has nothing to remove.
            assert!(
                stats.records_removed > 0 || log.log_end_offset() < 2 * keys as i64,
                "the pass removed records: {stats:?}"
            );
            log.close().expect("close");
            drop(log);
            times.push(seconds * 1e3);
            stats_seen = Some(stats);
        }
        fs::remove_dir_all(ctx.root.join("compaction")).ok();
        fs::remove_dir_all(&template).ok();
        let stats = stats_seen.expect("at least one rep");
        let key_bytes = compaction_key(0).len() as f64;
        points.push(Point {
            series: format!("{:.2} GiB log, 100 B values", log_bytes as f64 / GIB as f64),
            x: keys as f64,
            values: vec![
                ("compaction_ms", median(&mut times)),
                ("pass_peak_mib", peak_kib as f64 / 1024.0),
                (
                    "key_map_estimate_mib",
                    keys as f64 * (key_bytes + 40.0) / MIB as f64,
                ),
                ("bytes_read", stats.bytes_read as f64),
                ("records_removed", stats.records_removed as f64),
            ],
        });
    }
    let exponent = log_log_slope(&points, "compaction_ms");
    Curve {
        name: "compaction_vs_keys",
        title: "compaction against distinct keys, fixed log size".into(),
        x_name: "keys",
        x_label: "distinct keys",
        x_log: true,
        panels: vec![
            Panel {
                value: "compaction_ms",
                y_label: "one compaction pass, ms",
            },
            Panel {
                value: "pass_peak_mib",
                y_label: "pass peak memory (VmHWM rise), MiB",
            },
        ],
        points,
        summary: format!("time grows as keys^{exponent:.2} (fitted on log-log axes)"),
    }
}

// ---------------------------------------------------------------------------------------------
// Curve 6: durable appends against writer threads.

fn durable_vs_threads(ctx: &Ctx, settings: &Settings) -> Curve {
    let threads = [1usize, 2, 4, 8, 16];
    let mut rates = vec![Vec::new(); threads.len()];
    let mut per_sync = vec![Vec::new(); threads.len()];
    for _ in 0..settings.reps {
        for (i, &count) in threads.iter().enumerate() {
            let (rep, records_per_sync) = partlog_durable_rep(ctx, count, DEFAULT_MAX_GATHER);
            rates[i].push(rep.records_per_second());
            per_sync[i].push(records_per_sync);
        }
    }
    fs::remove_dir_all(ctx.root.join("partlog")).ok();
    let points: Vec<Point> = threads
        .iter()
        .zip(rates.iter_mut().zip(&mut per_sync))
        .map(|(&count, (rates, per_sync))| Point {
            series: "EveryAppend, 100 B records".into(),
            x: count as f64,
            values: vec![
                ("records_per_s", median(rates)),
                ("records_per_sync", median(per_sync)),
            ],
        })
        .collect();
    let scaling = points[points.len() - 1]
        .value("records_per_s")
        .unwrap_or(f64::NAN)
        / points[0].value("records_per_s").unwrap_or(f64::NAN);
    Curve {
        name: "durable_vs_threads",
        title: "durable appends against writer threads".into(),
        x_name: "threads",
        x_label: "writer threads",
        x_log: true,
        panels: vec![
            Panel {
                value: "records_per_s",
                y_label: "records/s, every append durable",
            },
            Panel {
                value: "records_per_sync",
                y_label: "records per group-commit sync",
            },
        ],
        points,
        summary: format!("16 threads / 1 thread: {scaling:.1}x"),
    }
}

// ---------------------------------------------------------------------------------------------
// Output.

fn print_table(curves: &[Curve]) {
    println!();
    println!("| curve | series | x | figures |");
    println!("| --- | --- | --- | --- |");
    for curve in curves {
        for point in &curve.points {
            let figures: Vec<String> = point
                .values
                .iter()
                .map(|(name, value)| format!("{name} {}", super::human(*value)))
                .collect();
            println!(
                "| {} | {} | {} {} | {} |",
                curve.name,
                point.series,
                curve.x_name,
                super::human(point.x),
                figures.join("; ")
            );
        }
    }
    println!();
    for curve in curves {
        println!("- {}: {}", curve.name, curve.summary);
    }
}

fn json_lines(curve: &Curve) -> Vec<String> {
    curve
        .points
        .iter()
        .map(|point| {
            let mut fields = vec![
                format!("\"curve\":{}", super::json_string(curve.name)),
                format!("\"series\":{}", super::json_string(&point.series)),
                format!("\"x_name\":{}", super::json_string(curve.x_name)),
                format!("\"x\":{}", super::json_number(point.x)),
            ];
            for (name, value) in &point.values {
                fields.push(format!(
                    "{}:{}",
                    super::json_string(name),
                    super::json_number(*value)
                ));
            }
            format!("{{{}}}", fields.join(","))
        })
        .collect()
}

/// Line colours, one per series.
const SERIES_COLOURS: [RGBColor; 3] = [RGBColor(31, 119, 180), RGBColor(214, 39, 40), BLACK];

/// Draws `curve` as one SVG at `path`: a panel per figure, side by side.
fn plot(curve: &Curve, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let width = 560 * curve.panels.len() as u32;
    let root = SVGBackend::new(path, (width, 400)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(&curve.title, ("sans-serif", 18))?;
    let areas = root.split_evenly((1, curve.panels.len()));
    let mut series_names: Vec<&str> = Vec::new();
    for point in &curve.points {
        if !series_names.contains(&point.series.as_str()) {
            series_names.push(&point.series);
        }
    }
    let xs: Vec<f64> = curve.points.iter().map(|p| p.x).collect();
    let x_min = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let x_max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    for (area, panel) in areas.iter().zip(&curve.panels) {
        let lines: Vec<(&str, Vec<(f64, f64)>)> = series_names
            .iter()
            .map(|&name| {
                let line = curve
                    .points
                    .iter()
                    .filter(|p| p.series == name)
                    .filter_map(|p| Some((p.x, p.value(panel.value)?)))
                    .collect();
                (name, line)
            })
            .collect();
        let y_max = lines
            .iter()
            .flat_map(|(_, line)| line.iter().map(|p| p.1))
            .fold(0.0, f64::max)
            * 1.15;
        let y_max = if y_max > 0.0 { y_max } else { 1.0 };
        let mut builder = ChartBuilder::on(area);
        builder
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70);
        if curve.x_log {
            let chart =
                builder.build_cartesian_2d((x_min * 0.8..x_max * 1.25).log_scale(), 0.0..y_max)?;
            draw_lines(chart, curve.x_label, panel.y_label, &lines)?;
        } else {
            let chart = builder.build_cartesian_2d(0.0..x_max * 1.05, 0.0..y_max)?;
            draw_lines(chart, curve.x_label, panel.y_label, &lines)?;
        }
    }
    root.present()?;
    Ok(())
}

/// An axis tick: whole numbers without decimals, thousands and millions shortened.
fn axis_label(value: f64) -> String {
    if value.abs() >= 1e6 {
        format!("{}M", value / 1e6)
    } else if value.abs() >= 1e3 {
        format!("{}k", value / 1e3)
    } else if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.2}")
    }
}

/// Draws the mesh, one line with point markers per series, and a legend when there are several.
fn draw_lines<'chart, 'backend: 'chart, X>(
    mut chart: ChartContext<
        'chart,
        SVGBackend<'backend>,
        Cartesian2d<X, plotters::coord::types::RangedCoordf64>,
    >,
    x_label: &str,
    y_label: &str,
    lines: &[(&str, Vec<(f64, f64)>)],
) -> Result<(), Box<dyn std::error::Error>>
where
    X: plotters::coord::ranged1d::Ranged<ValueType = f64>
        + plotters::coord::ranged1d::ValueFormatter<f64>,
{
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .y_label_formatter(&|y| axis_label(*y))
        .x_label_formatter(&|x| axis_label(*x))
        .draw()?;
    for (i, (name, line)) in lines.iter().enumerate() {
        let colour = SERIES_COLOURS[i % SERIES_COLOURS.len()];
        chart
            .draw_series(LineSeries::new(
                line.iter().copied(),
                colour.stroke_width(2),
            ))?
            .label(*name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], colour));
        chart.draw_series(
            line.iter()
                .map(|&point| Circle::new(point, 4, colour.filled())),
        )?;
    }
    if lines.len() > 1 {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::LowerRight)
            .draw()?;
    }
    Ok(())
}
