//! Does `preallocate` speed up durable appends? A B A B pairs in one run, median of per-pair
//! ratios (benches/README.md's method), on the machine's real file system.
//!
//! ```sh
//! cargo bench --bench preallocate
//! ```
//!
//! Each rep appends 2,000 records of 100 bytes with `FlushPolicy::EveryAppend` (an fdatasync per
//! append) into a fresh directory, with `preallocate` off (A) and on (B). Rolls and close are
//! inside the timed region on both sides.

use std::time::Instant;

use partlog::{FlushPolicy, Log, LogConfig, NewRecord};

const RECORDS: usize = 2_000;
const PAIRS: usize = 7;

fn rep(preallocate: bool) -> f64 {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = LogConfig::builder()
        .segment_bytes(1 << 20)
        .flush_policy(FlushPolicy::EveryAppend)
        .preallocate(preallocate)
        .build()
        .expect("a valid config");
    let value = [b'x'; 100];
    let started = Instant::now();
    let log = Log::open(dir.path(), config).expect("open");
    for i in 0..RECORDS {
        log.append(&[NewRecord::new(i as i64, None, Some(&value))])
            .expect("append");
    }
    log.close().expect("close");
    started.elapsed().as_secs_f64()
}

fn main() {
    // Criterion-style filters are passed by `cargo bench`; this bench takes none.
    rep(false);
    let mut ratios = Vec::new();
    for pair in 0..PAIRS {
        let (off, on) = if pair % 2 == 0 {
            let off = rep(false);
            (off, rep(true))
        } else {
            let on = rep(true);
            (rep(false), on)
        };
        println!(
            "pair {pair}: preallocate off {:.0} appends/s, on {:.0} appends/s",
            RECORDS as f64 / off,
            RECORDS as f64 / on
        );
        ratios.push(off / on);
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "median speed ratio, preallocate on / off: {:.3} ({} pairs of {} durable 100 B appends)",
        ratios[ratios.len() / 2],
        PAIRS,
        RECORDS
    );
}
