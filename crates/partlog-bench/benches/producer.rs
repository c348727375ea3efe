//! The batching writer: one `send()` per 100-byte record, at acks 0, 1 and all, against
//! partlog's own `append(records)` of pre-built 100-record batches (benches/README.md, the row
//! "batching writer"; the row's `commitlog` reference lives in `cargo bench --bench compare`).
//!
//! ```sh
//! cargo bench --bench producer
//! ```
//!
//! Every iteration writes 10,000 records into one log in a temporary directory (the page cache
//! only: the default flush policy leaves fsyncs to the OS) and ends when they are stored as its
//! level says: `flush()` for acks 0 and 1; for acks=all, every handle awaited after all 10,000
//! are in flight, so group commits cover many batches. The baseline appends the same records
//! as 100 `append` calls of 100 records each. Throughput is in records per second.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use partlog::{Acks, Log, LogConfig, NewRecord, Producer, ProducerConfig};

const RECORDS: usize = 10_000;
const T0: i64 = 1_700_000_000_000;

fn records() -> Vec<NewRecord> {
    (0..RECORDS)
        .map(|i| NewRecord::new(T0 + i as i64, None, Some(&[(i % 251) as u8; 100])))
        .collect()
}

fn open(dir: &tempfile::TempDir) -> Arc<Log> {
    Arc::new(Log::open(dir.path(), LogConfig::default()).expect("open"))
}

fn bench(c: &mut Criterion) {
    let records = records();
    let mut group = c.benchmark_group("producer_100B");
    group.throughput(Throughput::Elements(RECORDS as u64));
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(4));

    for acks in [Acks::Zero, Acks::One, Acks::All] {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = open(&dir);
        let config = ProducerConfig::builder()
            .acks(acks)
            .build()
            .expect("config");
        let producer = Producer::new(Arc::clone(&log), config).expect("producer");
        group.bench_function(format!("send_acks_{acks}"), |b| {
            b.iter(|| {
                let handles: Vec<_> = records
                    .iter()
                    .map(|record| producer.send(record).expect("send"))
                    .collect();
                match acks {
                    Acks::All => {
                        for handle in handles {
                            black_box(handle.wait().expect("durable"));
                        }
                    }
                    _ => {
                        drop(handles);
                        producer.flush().expect("flush");
                    }
                }
            });
        });
        if acks == Acks::One {
            // The borrowed form: no NewRecord per record, one copy into the batch.
            let values: Vec<&[u8]> = records.iter().filter_map(|r| r.value.as_deref()).collect();
            group.bench_function("send_parts_acks_1", |b| {
                b.iter(|| {
                    for (i, value) in values.iter().enumerate() {
                        let handle = producer
                            .send_parts::<&str>(T0 + i as i64, None, Some(value), &[])
                            .expect("send");
                        drop(handle);
                    }
                    producer.flush().expect("flush");
                });
            });
        }
        producer.close().expect("close");
    }

    let dir = tempfile::tempdir().expect("tempdir");
    let log = open(&dir);
    group.bench_function("append_100_records", |b| {
        b.iter(|| {
            for chunk in records.chunks(100) {
                black_box(log.append(chunk).expect("append"));
            }
        });
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
