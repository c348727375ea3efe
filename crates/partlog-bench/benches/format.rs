//! RecordBatch v2 encode and decode, per codec: 100 records of 100-byte values with 8-byte keys.
//!
//! ```sh
//! cargo bench --bench format
//! ```

use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use partlog::{BatchBuilder, BatchView, Compression, NewRecord};

fn records() -> Vec<NewRecord> {
    (0..100u64)
        .map(|i| {
            let value: Vec<u8> = (0..100).map(|j| ((i * 31 + j) % 26) as u8 + b'a').collect();
            NewRecord::new(1_700_000_000_000, Some(&i.to_be_bytes()), Some(&value))
        })
        .collect()
}

fn format(c: &mut Criterion) {
    let records = records();
    let user_bytes = records.len() as u64 * 108;
    let mut group = c.benchmark_group("format");
    group.throughput(Throughput::Bytes(user_bytes));
    for (name, codec) in [
        ("none", Compression::None),
        ("lz4", Compression::Lz4),
        ("zstd", Compression::Zstd),
    ] {
        group.bench_function(format!("encode/{name}"), |b| {
            b.iter(|| {
                let mut builder = BatchBuilder::new(codec);
                for record in &records {
                    builder.push(record);
                }
                builder.build().expect("batch")
            })
        });
        let batch = {
            let mut builder = BatchBuilder::new(codec);
            for record in &records {
                builder.push(record);
            }
            builder.build().expect("batch")
        };
        let mut scratch = Vec::new();
        group.bench_function(format!("decode/{name}"), |b| {
            b.iter(|| {
                let view = BatchView::new(&batch).expect("valid");
                let mut lengths = 0usize;
                for record in view.records(&mut scratch).expect("records") {
                    let record = record.expect("record");
                    lengths +=
                        record.key.map_or(0, <[u8]>::len) + record.value.map_or(0, <[u8]>::len);
                }
                lengths
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    targets = format
}
criterion_main!(benches);
