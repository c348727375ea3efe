//! Curve 3: unclean recovery against the unflushed tail, at a fixed log size.
//!
//! One log is built and closed cleanly: four segments of `segment` bytes, the last (active) one
//! nearly full, every byte synced. Each rep lays a crashed copy of it: the `.log` files
//! hard-linked (recovery below a torn tail writes none of them: the rep checks the template's
//! active `.log` afterwards), every other file copied and synced, producer snapshots above the
//! recovery point left out (a crash at that point had not written them), and a checkpoint record
//! without the clean-shutdown fields whose recovery point leaves `tail` bytes of the active
//! segment above it. Recovery then drops the tail's cached pages and reads it from the disk, as
//! after a crash (ARCHITECTURE.md §7).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use partlog::unstable::checkpoint::CheckpointFile;
use partlog::unstable::{OsStorage, Storage};
use partlog::{FlushPolicy, Log, LogConfig};

use super::super::{Ctx, median, one_kib_batch};
use super::{Curve, GIB, MIB, Panel, Point, Settings, log_log_slope, slope};

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

pub(super) fn recovery_vs_tail(ctx: &Ctx, settings: &Settings) -> Curve {
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
