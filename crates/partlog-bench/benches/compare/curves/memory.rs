//! Curve 4: resident memory against log size, in a fresh process per series.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use partlog::{Log, LogConfig};

use super::super::{Ctx, one_kib_batch};
use super::{Curve, GIB, MIB, Panel, Point, RSS_CHILD_ENV, Settings, slope};

/// `--curves` with [`RSS_CHILD_ENV`] set to `DIR SEGMENT_MIB SIZE_MIB...`: appends 100 × 1 KiB
/// batches into a new log in `DIR` and prints `rss BYTES SEGMENTS RSS_ANON_KIB RSS_FILE_KIB` at
/// the start and at each size.
pub(super) fn rss_child(args: &str) {
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
pub(super) fn status_kib(field: &str) -> u64 {
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

pub(super) fn rss_vs_log_size(ctx: &Ctx, settings: &Settings) -> Curve {
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
