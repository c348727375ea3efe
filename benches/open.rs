//! Opening a log of 1,000 segments after a clean shutdown (close untimed).
//!
//! ```sh
//! cargo bench --bench open
//! ```

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use partlog::{BatchBuilder, Compression, Log, LogConfig, NewRecord};

fn config() -> LogConfig {
    LogConfig::builder_for_tests()
        .segment_bytes(4096)
        .max_message_bytes(4096)
        .build()
        .expect("config")
}

fn open(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let log = Log::open(dir.path(), config()).expect("open");
        let mut builder = BatchBuilder::new(Compression::None);
        for _ in 0..30 {
            builder.push(&NewRecord::new(1_700_000_000_000, None, Some(&[b'v'; 100])));
        }
        let batch = builder.build().expect("batch");
        while log.stats().segments < 1_000 {
            log.append_batch(&batch).expect("append");
        }
        log.close().expect("close");
    }
    c.bench_function("open/1000_segments_clean", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let started = Instant::now();
                let log = Log::open(dir.path(), config()).expect("open");
                total += started.elapsed();
                log.close().expect("close");
            }
            total
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    targets = open
}
criterion_main!(benches);
