//! Offset- and time-index lookups in the index of a full 1 GiB segment: one entry per 4096 bytes
//! (Kafka's defaults `segment.bytes` and `index.interval.bytes`), 262,144 entries in a file of
//! Kafka's default `segment.index.bytes` (10 MiB).
//!
//! ```sh
//! cargo bench --bench index
//! ```

use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use partlog::unstable::{OffsetIndex, OsStorage, Storage, TimeIndex};

const INDEX_BYTES: u32 = 10 << 20;

fn index(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let storage: Arc<dyn Storage> = Arc::new(OsStorage::new());
    let offsets = OffsetIndex::create(&storage, &dir.path().join("0.index"), 0, INDEX_BYTES)
        .expect("offset index");
    let times = TimeIndex::create(&storage, &dir.path().join("0.timeindex"), 0, INDEX_BYTES)
        .expect("time index");
    // Entries as a 4096-byte index interval leaves them: one per ~40 records of 100 B.
    let mut entries = 0i64;
    while entries < (1 << 30) / 4096 && !offsets.is_full() {
        offsets
            .append(entries * 40 + 39, (entries * 4096) as u32)
            .expect("append");
        entries += 1;
    }
    for n in 0..entries.min(800_000) {
        if times.is_full() {
            break;
        }
        times
            .maybe_append(1_000 + n * 10, n * 40 + 39, false)
            .expect("time append");
    }
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |below: i64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % below as u64) as i64
    };
    let mut group = c.benchmark_group("index");
    group.bench_function("offset_lookup/random", |b| {
        b.iter(|| offsets.lookup(next(entries * 40)).expect("lookup"))
    });
    group.bench_function("offset_lookup/tail", |b| {
        b.iter(|| offsets.lookup(entries * 40 - 5).expect("lookup"))
    });
    group.bench_function("time_lookup/random", |b| {
        b.iter(|| times.lookup(1_000 + next(entries * 10)).expect("lookup"))
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    targets = index
}
criterion_main!(benches);
