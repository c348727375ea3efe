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
//!   it) beside the key map's documented estimate (key length + about 110 bytes a key at the
//!   peak; it was + 40 until the curve showed that too low).
//! - `durable_vs_threads`: `FlushPolicy::EveryAppend` appends of 100 B records from 1 to 16
//!   threads: throughput, and the records each group-commit sync covered.
//!
//! `CURVES_REPS` sets the reps a point (5, or 3 with `COMPARE_QUICK=1`; the median is kept).
//! `CURVES_SCALE` (a fraction, 1 by default) scales every log size (the recovery log and its
//! tails, the memory curve's log, the compaction log); segment counts, key counts and thread
//! counts stay. The table goes to stdout, one JSON line per point to `curves.jsonl`, and one
//! SVG per curve to `curves/` (both under `$CARGO_TARGET_DIR`, or `target/`).
//!
//! This file holds the run, the durable curve and the output; each other curve has its file in
//! `curves/`, and `curves/plot.rs` draws them.

use std::fs;
use std::path::PathBuf;
use std::time::Instant;

#[path = "curves/compaction.rs"]
mod compaction;
#[path = "curves/memory.rs"]
mod memory;
#[path = "curves/plot.rs"]
mod plot;
#[path = "curves/recovery.rs"]
mod recovery;
#[path = "curves/segments.rs"]
mod segments;

use super::{Ctx, DEFAULT_MAX_GATHER, median, partlog_durable_rep, target_dir};

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
        memory::rss_child(&args);
        return;
    }
    let quick = std::env::var_os("COMPARE_QUICK").is_some_and(|v| v != "0");
    let reps = std::env::var("CURVES_REPS")
        .ok()
        .map_or(if quick { 3 } else { 5 }, |reps| {
            reps.parse().expect("CURVES_REPS: a count")
        });
    let settings = Settings::from_env(reps.max(1));
    let target_dir = target_dir();
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
        (
            &["append_vs_segments", "open_vs_segments"],
            segments::segment_curves,
        ),
        (&["recovery_vs_tail"], |ctx, s| {
            vec![recovery::recovery_vs_tail(ctx, s)]
        }),
        (&["rss_vs_log_size"], |ctx, s| {
            vec![memory::rss_vs_log_size(ctx, s)]
        }),
        (&["compaction_vs_keys"], |ctx, s| {
            vec![compaction::compaction_vs_keys(ctx, s)]
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
        if let Err(error) = plot::plot(curve, &path) {
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
