//! Curves 1 and 2: appends and a clean open against the number of segments already in the log.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use partlog::{BatchBuilder, Compression, FlushPolicy, Log, LogConfig, NewRecord};

use super::super::{
    Ctx, SEGMENT_BYTES, SMALL_VALUE, TIMESTAMP, median, one_kib_batch, write_rep_batches,
};
use super::{Curve, Panel, Point, Settings, log_log_slope};

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
pub(super) fn segment_curves(ctx: &Ctx, settings: &Settings) -> Vec<Curve> {
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
