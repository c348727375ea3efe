//! Curve 5: compaction against distinct keys, at a fixed log size.

use std::fs;
use std::path::Path;
use std::time::Instant;

use partlog::{CleanupPolicy, CompactionOptions, Log, LogConfig, NewRecord};

use super::super::{Ctx, TIMESTAMP, median};
use super::memory::status_kib;
use super::{Curve, GIB, MIB, Panel, Point, Settings, log_log_slope};

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

pub(super) fn compaction_vs_keys(ctx: &Ctx, settings: &Settings) -> Curve {
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
                // `CompactionOptions::max_map_keys`' estimate of the peak.
                (
                    "key_map_estimate_mib",
                    keys as f64 * (key_bytes + 110.0) / MIB as f64,
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
