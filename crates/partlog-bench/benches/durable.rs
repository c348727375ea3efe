//! Durable appends (`FlushPolicy::EveryAppend`: each 100 B append is fsynced before it returns,
//! concurrent appends share one fsync) from 1, 2, 4 and 8 threads. Throughput is appends per
//! second across all threads.
//!
//! ```sh
//! cargo bench --bench durable
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use partlog::{FlushPolicy, Log, LogConfig, NewRecord};

fn durable(c: &mut Criterion) {
    let mut group = c.benchmark_group("durable");
    group.throughput(Throughput::Elements(1));
    for threads in [1u64, 2, 4, 8] {
        group.bench_with_input(
            BenchmarkId::new("threads", threads),
            &threads,
            |b, &threads| {
                b.iter_custom(|iters| {
                    let dir = tempfile::tempdir().expect("tempdir");
                    let config = LogConfig::builder()
                        .flush_policy(FlushPolicy::EveryAppend)
                        .build()
                        .expect("config");
                    let log = Arc::new(Log::open(dir.path(), config).expect("open"));
                    let per_thread = iters.div_ceil(threads);
                    let started = Instant::now();
                    std::thread::scope(|scope| {
                        for _ in 0..threads {
                            let log = Arc::clone(&log);
                            scope.spawn(move || {
                                let record =
                                    [NewRecord::new(1_700_000_000_000, None, Some(&[b'v'; 100]))];
                                for _ in 0..per_thread {
                                    log.append(&record).expect("append");
                                }
                            });
                        }
                    });
                    // Per append: `iters` is what criterion divides by.
                    let elapsed = started.elapsed();
                    log.close().expect("close");
                    elapsed.mul_f64(iters as f64 / (per_thread * threads) as f64)
                })
            },
        );
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = durable
}
criterion_main!(benches);
