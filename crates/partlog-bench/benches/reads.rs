//! Log reads from the page cache: sequential (every record, key and value lengths summed,
//! through one reused `FetchData`) and random (the batch holding a random offset, 100 B
//! records one to a batch, 4096-byte index interval).
//!
//! ```sh
//! cargo bench --bench reads
//! ```

use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use partlog::{BatchBuilder, Compression, FetchData, Log, LogConfig, NewRecord, ReadBound};

const TIMESTAMP: i64 = 1_700_000_000_000;

fn reads(c: &mut Criterion) {
    let mut group = c.benchmark_group("reads");

    // Sequential: 64 MiB of 100 x 1 KiB batches.
    let seq_dir = tempfile::tempdir().expect("tempdir");
    let seq = Log::open(seq_dir.path(), LogConfig::default()).expect("open");
    let value = [b'x'; 1024];
    let mut builder = BatchBuilder::new(Compression::None);
    for _ in 0..100 {
        builder.push(&NewRecord::new(TIMESTAMP, None, Some(&value)));
    }
    let batch = builder.build().expect("batch");
    let batches = 640u64;
    for _ in 0..batches {
        seq.append_batch(&batch).expect("append");
    }
    let mut fetch = FetchData::new();
    let mut scratch = Vec::new();
    group.throughput(Throughput::Elements(batches * 100));
    group.bench_function("sequential/64MiB_1KiB_records", |b| {
        b.iter(|| {
            let mut offset = 0;
            let mut lengths = 0usize;
            loop {
                seq.read_into(offset, 1 << 20, ReadBound::LogEnd, &mut fetch)
                    .expect("read");
                if fetch.is_empty() {
                    break;
                }
                for batch in fetch.batches() {
                    for record in batch
                        .expect("batch")
                        .records(&mut scratch)
                        .expect("records")
                    {
                        let record = record.expect("record");
                        lengths += record.value.map_or(0, <[u8]>::len);
                    }
                }
                offset = fetch.next_offset();
            }
            lengths
        })
    });

    // Random: 200,000 single-record batches of 100 B.
    let rnd_dir = tempfile::tempdir().expect("tempdir");
    let rnd = Log::open(rnd_dir.path(), LogConfig::default()).expect("open");
    let record = [NewRecord::new(TIMESTAMP, None, Some(&[b'v'; 100]))];
    let records = 200_000u64;
    for _ in 0..records {
        rnd.append(&record).expect("append");
    }
    let mut state = 0x853c_49e6_748f_ea9bu64;
    group.throughput(Throughput::Elements(1));
    group.bench_function("random/one_batch_of_100B", |b| {
        b.iter(|| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            rnd.read_into((state % records) as i64, 1, ReadBound::LogEnd, &mut fetch)
                .expect("read");
            fetch.bytes().len()
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
    targets = reads
}
criterion_main!(benches);
