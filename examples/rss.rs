//! Memory of a log as it grows: RssAnon (anonymous resident memory, from `/proc/self/status`)
//! at 1 GiB and at 10 GiB of log, and the cost per segment.
//!
//! ```sh
//! cargo run --release --example rss -- [DIR] [SEGMENT_MIB]
//! ```
//!
//! Appends pre-built batches of 100 x 1 KiB records (page cache only, `FlushPolicy::OsDecides`)
//! into `DIR` (default: a temporary directory, deleted at the end) with `segment.bytes` of
//! `SEGMENT_MIB` MiB (default 1024, Kafka's default), and prints RssAnon (and RssFile, which
//! holds the mapped indexes) before the first append and at each GiB.
//! crates/partlog-bench/benches/README.md: the 1 GiB and 10 GiB figures differ by less than 10%,
//! plus a fixed cost per segment.

mod scratch;

use std::path::PathBuf;

use partlog::{BatchBuilder, Compression, Log, LogConfig, NewRecord};

/// A field of `/proc/self/status`, in KiB.
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let temp = scratch::ScratchDir::new("rss").expect("tempdir");
    let dir = args
        .next()
        .map_or_else(|| temp.path().join("log"), PathBuf::from);
    let segment_mib: u32 = args
        .next()
        .map_or(1024, |s| s.parse().expect("SEGMENT_MIB"));
    let config = LogConfig::builder()
        .segment_bytes(segment_mib << 20)
        .build()
        .expect("config");
    let log = Log::open(&dir, config).expect("open");
    let value = [b'x'; 1024];
    let mut builder = BatchBuilder::new(Compression::None);
    for _ in 0..100 {
        builder.push(&NewRecord::new(1_700_000_000_000, None, Some(&value)));
    }
    let batch = builder.build().expect("batch");
    let gib = 1u64 << 30;
    let report = |log: &Log, label: &str, written: u64| {
        let stats = log.stats();
        println!(
            "{label}: {} segments, {:.2} GiB: RssAnon {} KiB, RssFile {} KiB",
            stats.segments,
            written as f64 / gib as f64,
            status_kib("RssAnon:"),
            status_kib("RssFile:")
        );
        (stats.segments, status_kib("RssAnon:"))
    };
    let (_, empty) = report(&log, "open", 0);
    let mut figures = Vec::new();
    let mut written = 0u64;
    for target in 1..=10u64 {
        while written < target * gib {
            let info = log.append_batch(&batch).expect("append");
            written += info.bytes as u64;
        }
        let figure = report(&log, &format!("{target} GiB"), written);
        figures.push(figure);
    }
    let (segments_1, anon_1) = figures[0];
    let (segments_10, anon_10) = figures[9];
    let per_segment = (anon_10 as f64 - anon_1 as f64) / (segments_10 as f64 - segments_1 as f64);
    println!(
        "RssAnon: empty {empty} KiB, 1 GiB {anon_1} KiB ({segments_1} segments), 10 GiB {anon_10} KiB ({segments_10} segments); {:+.1}% from 1 to 10 GiB; {per_segment:.1} KiB per added segment (segment.bytes {segment_mib} MiB)",
        (anon_10 as f64 / anon_1 as f64 - 1.0) * 100.0
    );
    log.close().expect("close");
    drop(log);
    std::fs::remove_dir_all(&dir).ok();
}
