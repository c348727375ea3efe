//! `Log` appends to the page cache: unbatched (one 100 B record a call), batched
//! (`append(records)` of 100 records), and pre-built batches (`append_batch`). The `from_bytes`
//! pair starts from bytes the caller holds, as a benchmark adapter does: `NewRecord`s copy them
//! before the append encodes them, `RecordRef`s borrow them (`append_refs`).
//!
//! ```sh
//! cargo bench --bench log_append
//! ```

use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use partlog::{BatchBuilder, Compression, Log, LogConfig, NewRecord, RecordRef};

const TIMESTAMP: i64 = 1_700_000_000_000;

/// Runs `append` `iters` times on a fresh log; open and close are outside the timing.
fn timed(iters: u64, mut append: impl FnMut(&Log)) -> Duration {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Log::open(dir.path(), LogConfig::default()).expect("open");
    let started = Instant::now();
    for _ in 0..iters {
        append(&log);
    }
    let elapsed = started.elapsed();
    log.close().expect("close");
    elapsed
}

fn log_append(c: &mut Criterion) {
    let value = [b'v'; 100];
    let one = [NewRecord::new(TIMESTAMP, None, Some(&value))];
    let hundred: Vec<NewRecord> = (0..100)
        .map(|_| NewRecord::new(TIMESTAMP, None, Some(&value)))
        .collect();
    let prebuilt = {
        let mut builder = BatchBuilder::new(Compression::None);
        for record in &hundred {
            builder.push(record);
        }
        builder.build().expect("batch")
    };
    let mut group = c.benchmark_group("log_append");
    group.throughput(Throughput::Elements(1));
    group.bench_function("unbatched/1x100B", |b| {
        b.iter_custom(|iters| {
            timed(iters, |log| {
                log.append(&one).expect("append");
            })
        })
    });
    group.throughput(Throughput::Elements(100));
    group.bench_function("batched/append_100x100B", |b| {
        b.iter_custom(|iters| {
            timed(iters, |log| {
                log.append(&hundred).expect("append");
            })
        })
    });
    let payloads: Vec<Vec<u8>> = (0..100).map(|_| value.to_vec()).collect();
    group.bench_function("from_bytes/new_records_100x100B", |b| {
        b.iter_custom(|iters| {
            timed(iters, |log| {
                let records: Vec<NewRecord> = payloads
                    .iter()
                    .map(|payload| NewRecord::new(TIMESTAMP, None, Some(payload)))
                    .collect();
                log.append(&records).expect("append");
            })
        })
    });
    group.bench_function("from_bytes/record_refs_100x100B", |b| {
        b.iter_custom(|iters| {
            timed(iters, |log| {
                let records: Vec<RecordRef<'_>> = payloads
                    .iter()
                    .map(|payload| RecordRef::new(TIMESTAMP, None, Some(payload)))
                    .collect();
                log.append_refs(&records).expect("append");
            })
        })
    });
    group.bench_function("batched/append_batch_100x100B", |b| {
        b.iter_custom(|iters| {
            timed(iters, |log| {
                log.append_batch(&prebuilt).expect("append");
            })
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    targets = log_append
}
criterion_main!(benches);
