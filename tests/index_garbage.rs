//! No panic on garbage: random bytes, cut at every length, opened as either index in either
//! mode, then driven through every call. Errors are fine; panics and hangs are not.
//! (The final `reset` must succeed whatever the bytes were: an index can always be emptied.)

use std::path::Path;
use std::sync::Arc;

use partlog::unstable::{OffsetIndex, OsStorage, Storage, TimeIndex};
use proptest::prelude::*;

fn exercise_offset_index(
    storage: &Arc<dyn Storage>,
    path: &Path,
    base: i64,
    writable: bool,
    mutate: bool,
) {
    let Ok(index) = OffsetIndex::open(storage, path, base, 64, writable) else {
        return;
    };
    let entries = index.entries();
    let _ = index.last_entry();
    for n in [
        0,
        entries / 2,
        entries.saturating_sub(1),
        entries,
        usize::MAX,
    ] {
        let _ = index.entry(n);
    }
    for target in [i64::MIN, -1, 0, base, base + 1, base + 1_000_000, i64::MAX] {
        let _ = index.lookup(target);
    }
    for position in [0, 1, 1 << 20, u64::MAX] {
        let _ = index.upper_bound_by_position(position);
    }
    for log_size in [0, 100, u64::MAX] {
        let quick = index.quick_check(log_size);
        let full = index.full_check(log_size);
        // The full check is at least as strict as the quick one.
        if quick.is_err() && entries > 0 {
            assert!(full.is_err(), "quick failed ({quick:?}) but full passed");
        }
    }
    if !mutate {
        return;
    }
    let _ = index.append(base + i64::from(i32::MAX), i32::MAX as u32);
    let _ = index.seal();
    let _ = index.lookup(base + 5);
    let _ = index.truncate_to(base + 3);
    let _ = index.make_writable();
    let _ = index.append(base + i64::from(i32::MAX), i32::MAX as u32);
    let _ = index.truncate_to_entries(1);
    index.reset().unwrap();
    assert_eq!(index.entries(), 0);
}

fn exercise_time_index(
    storage: &Arc<dyn Storage>,
    path: &Path,
    base: i64,
    writable: bool,
    mutate: bool,
) {
    let Ok(index) = TimeIndex::open(storage, path, base, 64, writable) else {
        return;
    };
    let entries = index.entries();
    let _ = index.last_entry();
    for n in [
        0,
        entries / 2,
        entries.saturating_sub(1),
        entries,
        usize::MAX,
    ] {
        let _ = index.entry(n);
    }
    for target in [i64::MIN, -1, 0, 1, 1 << 40, i64::MAX] {
        let _ = index.lookup(target);
    }
    let quick = index.quick_check();
    let full = index.full_check();
    if quick.is_err() && entries > 0 {
        assert!(full.is_err(), "quick failed ({quick:?}) but full passed");
    }
    if !mutate {
        return;
    }
    let _ = index.maybe_append(i64::MAX, base + i64::from(i32::MAX), true);
    let _ = index.seal();
    let _ = index.lookup(1 << 40);
    let _ = index.truncate_to(base + 3);
    let _ = index.make_writable();
    let _ = index.maybe_append(i64::MAX, base + i64::from(i32::MAX), false);
    let _ = index.truncate_to_entries(1);
    index.reset().unwrap();
    assert_eq!(index.entries(), 0);
}

fn exercise_every_prefix(bytes: &[u8], base: i64) {
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(OsStorage::new());
    let path = dir.path().join("garbage.index");
    for len in 0..=bytes.len() {
        // Mutations fsync, so they run at every third length only: that still meets every
        // residue modulo 8 and four modulo 12, so partial entries of every shape.
        let mutate = len % 3 == 0;
        for writable in [false, true] {
            std::fs::write(&path, &bytes[..len]).unwrap();
            exercise_offset_index(&storage, &path, base, writable, mutate);
            std::fs::write(&path, &bytes[..len]).unwrap();
            exercise_time_index(&storage, &path, base, writable, mutate);
        }
    }
}

#[test]
fn a_fixed_random_blob_at_every_length() {
    // A deterministic blob with all the interesting shapes: zeros, 0xFF runs, sign bits.
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut bytes: Vec<u8> = (0..96)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    bytes.extend_from_slice(&[0; 24]);
    bytes.extend_from_slice(&[0xFF; 24]);
    bytes.extend_from_slice(&[0x80, 0, 0, 0, 0x7F, 0xFF, 0xFF, 0xFF, 0, 0, 0, 1]);
    exercise_every_prefix(&bytes, 1 << 40);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_at_every_length_never_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..50),
        base in 0i64..1_000_000,
    ) {
        exercise_every_prefix(&bytes, base);
    }
}
