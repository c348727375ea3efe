//! One segment on the real file system: appends of 100-record batches (100 B values) and reads
//! of the batch holding an offset, from the page cache.
//!
//! ```sh
//! cargo bench --bench segment
//! ```

use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use partlog::unstable::format::set_base_offset;
use partlog::unstable::{OsStorage, Segment, SegmentConfig, Storage};
use partlog::{BatchBuilder, Compression, NewRecord};

fn batch() -> Vec<u8> {
    let value = [b'v'; 100];
    let mut builder = BatchBuilder::new(Compression::None);
    for _ in 0..100 {
        builder.push(&NewRecord::new(1_700_000_000_000, None, Some(&value)));
    }
    builder.build().expect("batch")
}

fn segment(c: &mut Criterion) {
    let storage: Arc<dyn Storage> = Arc::new(OsStorage::new());
    let mut batch = batch();
    let mut group = c.benchmark_group("segment");
    group.throughput(Throughput::Elements(100));

    group.bench_function("append/100x100B", |b| {
        b.iter_custom(|iters| {
            let dir = tempfile::tempdir().expect("tempdir");
            let segment = Segment::create(&storage, dir.path(), 0, SegmentConfig::default(), 0)
                .expect("segment");
            let started = std::time::Instant::now();
            for i in 0..iters {
                set_base_offset(&mut batch, i as i64 * 100).expect("offset");
                segment.append(&batch).expect("append");
            }
            started.elapsed()
        })
    });

    let dir = tempfile::tempdir().expect("tempdir");
    let segment =
        Segment::create(&storage, dir.path(), 0, SegmentConfig::default(), 0).expect("segment");
    let batches = 2_000i64;
    for i in 0..batches {
        set_base_offset(&mut batch, i * 100).expect("offset");
        segment.append(&batch).expect("append");
    }
    let mut buf = Vec::new();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    group.bench_function("read/random_batch", |b| {
        b.iter(|| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let offset = (state % (batches as u64 * 100)) as i64;
            segment
                .read_in_place(offset, 1, None, None, &mut buf)
                .expect("read")
                .expect("found")
        })
    });
    group.throughput(Throughput::Bytes(1 << 20));
    group.bench_function("read/1MiB_from_start", |b| {
        b.iter(|| {
            segment
                .read_in_place(0, 1 << 20, None, None, &mut buf)
                .expect("read")
                .expect("found")
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    targets = segment
}
criterion_main!(benches);
