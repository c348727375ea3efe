//! `.timeindex` files: layout byte by byte, `maybe_append` semantics, the reserved last slot,
//! truncation and the checks.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use partlog::unstable::{OsStorage, Storage, TimeIndex, TimestampOffset};
use partlog::{Corruption, Error};

fn storage() -> Arc<dyn Storage> {
    Arc::new(OsStorage::new())
}

fn index_path(dir: &Path) -> PathBuf {
    dir.join("00000000000000001000.timeindex")
}

fn to(timestamp: i64, offset: i64) -> TimestampOffset {
    TimestampOffset { timestamp, offset }
}

fn assert_corrupt_at(result: partlog::Result<()>, file: &Path, position: u64) -> String {
    match result {
        Err(Error::Corrupt {
            file: f,
            position: p,
            what: Corruption::BadIndexEntry(why),
        }) => {
            assert_eq!(f, file);
            assert_eq!(p, position, "wrong position; message: {why}");
            why
        }
        other => panic!("expected a corrupt index entry at {position}, got {other:?}"),
    }
}

fn write_entries(path: &Path, entries: &[(i64, i32)]) {
    let mut bytes = Vec::new();
    for (timestamp, rel) in entries {
        bytes.extend_from_slice(&timestamp.to_be_bytes());
        bytes.extend_from_slice(&rel.to_be_bytes());
    }
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn entries_are_timestamp_i64_then_relative_offset_i32_big_endian() {
    let dir = tempfile::tempdir().unwrap();
    let path = index_path(dir.path());
    let index = TimeIndex::create(&storage(), &path, 1000, 1200).unwrap();
    assert!(
        index
            .maybe_append(0x0102_0304_0506_0708, 1009, false)
            .unwrap()
    );
    assert!(
        index
            .maybe_append(i64::MAX, 1000 + i64::from(i32::MAX), false)
            .unwrap()
    );
    let expected: [u8; 24] = [
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x00, 0x00, 0x00, 0x09, //
        0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF, //
    ];
    // The file gets the entries at a sync (or a seal, or a page of them at a time).
    index.sync().unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), expected);
    assert_eq!(index.size_bytes(), 24);
}

#[test]
fn hand_built_bytes_read_back_in_every_mode() {
    let dir = tempfile::tempdir().unwrap();
    let path = index_path(dir.path());
    let bytes: [u8; 24] = [
        0x00, 0x00, 0x01, 0x8F, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x03, // (0x18F00000000, 3)
        0x00, 0x00, 0x01, 0x8F, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x02,
        0x00, // (+4096, 512)
    ];
    std::fs::write(&path, bytes).unwrap();
    let t0 = 0x0000_018F_0000_0000i64;
    for writable in [false, true] {
        let index = TimeIndex::open(&storage(), &path, 1000, 1200, writable).unwrap();
        assert_eq!(index.entries(), 2);
        assert_eq!(index.entry(0).unwrap(), to(t0, 1003));
        assert_eq!(index.entry(1).unwrap(), to(t0 + 4096, 1512));
        assert_eq!(index.last_entry().unwrap(), to(t0 + 4096, 1512));
        assert_eq!(index.lookup(t0 - 1).unwrap(), to(-1, 1000));
        assert_eq!(index.lookup(t0).unwrap(), to(t0, 1003));
        assert_eq!(index.lookup(t0 + 4095).unwrap(), to(t0, 1003));
        assert_eq!(index.lookup(i64::MAX).unwrap(), to(t0 + 4096, 1512));
        index.quick_check().unwrap();
        index.full_check().unwrap();
    }
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
}

#[test]
fn maybe_append_adds_only_strictly_larger_timestamps() {
    let dir = tempfile::tempdir().unwrap();
    let path = index_path(dir.path());
    let index = TimeIndex::create(&storage(), &path, 1000, 1200).unwrap();
    assert_eq!(index.last_entry().unwrap(), to(-1, 1000));
    // -1 means "no timestamp" and is never indexed.
    assert!(!index.maybe_append(-1, 1001, false).unwrap());
    assert!(index.maybe_append(0, 1001, false).unwrap());
    assert!(index.maybe_append(100, 1005, false).unwrap());
    assert!(!index.maybe_append(100, 1009, false).unwrap()); // equal: no-op
    assert!(!index.maybe_append(50, 1009, false).unwrap()); // smaller: no-op
    // A larger timestamp at the same offset is an entry (Kafka accepts it too).
    assert!(index.maybe_append(101, 1005, false).unwrap());
    assert_eq!(index.entries(), 3);
    // A decreasing offset is misuse, even when the timestamp would be a no-op.
    for timestamp in [50, 200] {
        assert!(matches!(
            index.maybe_append(timestamp, 1004, false),
            Err(Error::InvalidArgument { .. })
        ));
    }
    assert!(matches!(
        index.maybe_append(500, 999, false),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(matches!(
        index.maybe_append(500, 1000 + i64::from(i32::MAX) + 1, false),
        Err(Error::InvalidArgument { .. })
    ));
    assert_eq!(index.entries(), 3);
    index.sync().unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 36);
    index.full_check().unwrap();
    index.seal().unwrap();
    assert!(matches!(
        index.maybe_append(1000, 2000, false),
        Err(Error::InvalidArgument { .. })
    ));
}

#[test]
fn the_last_slot_is_reserved_for_the_final_entry() {
    let dir = tempfile::tempdir().unwrap();
    let path = index_path(dir.path());
    // 59 bytes round down to 4 slots: 3 for appends, 1 for the final entry.
    let index = TimeIndex::create(&storage(), &path, 0, 59).unwrap();
    assert_eq!(index.max_entries(), 4);
    for n in 0..3 {
        assert!(!index.is_full());
        assert!(index.maybe_append(n * 10, n, false).unwrap());
    }
    assert!(index.is_full());
    assert!(matches!(
        index.maybe_append(100, 10, false),
        Err(Error::InvalidArgument { .. })
    ));
    // Full, but a no-op append is still a no-op, not an error.
    assert!(!index.maybe_append(20, 10, false).unwrap());
    assert!(index.maybe_append(100, 10, true).unwrap());
    assert_eq!(index.entries(), 4);
    // The file has no more room, even for a final entry.
    assert!(matches!(
        index.maybe_append(200, 11, true),
        Err(Error::InvalidArgument { .. })
    ));
    index.sync().unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 48);

    // At the default 10 MiB, Kafka's counts.
    let big = TimeIndex::create(&storage(), &dir.path().join("b.timeindex"), 0, 10 << 20).unwrap();
    assert_eq!(big.max_entries(), 873_813);
}

#[test]
fn truncate_to_removes_entries_at_or_above_the_offset() {
    let dir = tempfile::tempdir().unwrap();
    let path = index_path(dir.path());
    let index = TimeIndex::create(&storage(), &path, 1000, 1200).unwrap();
    // Two entries may share an offset (a larger timestamp found in the batch already indexed);
    // they stay or go together.
    for (timestamp, offset) in [(10, 1001), (20, 1005), (30, 1005), (40, 1009), (50, 1020)] {
        assert!(index.maybe_append(timestamp, offset, false).unwrap());
    }
    index.sync().unwrap();
    index.truncate_to(1021).unwrap();
    assert_eq!(index.entries(), 5);
    index.truncate_to(1010).unwrap();
    assert_eq!(index.entries(), 4);
    assert_eq!(index.last_entry().unwrap(), to(40, 1009));
    index.truncate_to(1005).unwrap();
    assert_eq!(index.entries(), 1);
    assert_eq!(index.last_entry().unwrap(), to(10, 1001));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 12);
    index.truncate_to(0).unwrap();
    assert_eq!(index.entries(), 0);
    assert!(index.maybe_append(5, 1000, false).unwrap());
    index.reset().unwrap();
    assert_eq!(index.last_entry().unwrap(), to(-1, 1000));
}

#[test]
fn truncating_a_sealed_index_rewrites_it_and_it_can_grow_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = index_path(dir.path());
    let index = TimeIndex::create(&storage(), &path, 1000, 1 << 20).unwrap();
    for n in 0..2000 {
        assert!(index.maybe_append(n * 7, 1000 + n * 3, false).unwrap());
    }
    assert!(index.maybe_append(20_000, 7000, true).unwrap()); // final entry
    index.seal().unwrap();
    assert_eq!(
        index.lookup(7 * 1500 + 3).unwrap(),
        to(7 * 1500, 1000 + 3 * 1500)
    );
    let before = std::fs::read(&path).unwrap();
    index.truncate_to(1000 + 3 * 1000).unwrap();
    assert_eq!(index.entries(), 1000);
    assert!(index.is_sealed());
    assert_eq!(std::fs::read(&path).unwrap(), before[..12_000]);
    index.make_writable().unwrap();
    assert!(index.maybe_append(1_000_000, 5000, false).unwrap());
    index.sync().unwrap();
    let reopened = TimeIndex::open(&storage(), &path, 1000, 1 << 20, false).unwrap();
    assert_eq!(reopened.entries(), 1001);
    assert_eq!(reopened.last_entry().unwrap(), to(1_000_000, 5000));
    reopened.quick_check().unwrap();
    reopened.full_check().unwrap();
}

#[test]
fn a_trailing_partial_entry_is_dropped_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = index_path(dir.path());
    write_entries(&path, &[(10, 1), (20, 2)]);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 30, 0, 0]);
    std::fs::write(&path, &bytes).unwrap();
    let sealed = TimeIndex::open(&storage(), &path, 1000, 1200, false).unwrap();
    assert_eq!(sealed.entries(), 2);
    assert_eq!(sealed.last_entry().unwrap(), to(20, 1002));
    let active = TimeIndex::open(&storage(), &path, 1000, 1200, true).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 24);
    assert!(active.maybe_append(30, 1003, false).unwrap());
    active.full_check().unwrap();
}

#[test]
fn checks_catch_zero_padding() {
    let dir = tempfile::tempdir().unwrap();
    let path = index_path(dir.path());
    write_entries(&path, &[(100, 1), (200, 2), (0, 0), (0, 0)]);
    for writable in [false, true] {
        let index = TimeIndex::open(&storage(), &path, 1000, 1200, writable).unwrap();
        let why = assert_corrupt_at(index.quick_check(), &path, 36);
        assert!(why.contains("zero padding"), "{why}");
        let why = assert_corrupt_at(index.full_check(), &path, 24);
        assert!(
            why.contains("entry 2") && why.contains("zero padding"),
            "{why}"
        );
    }
}

#[test]
fn checks_catch_non_monotonic_entries() {
    let dir = tempfile::tempdir().unwrap();
    let path = index_path(dir.path());
    // Timestamp not increasing in the middle: only the full check sees it.
    write_entries(&path, &[(100, 1), (300, 2), (200, 3), (400, 4)]);
    let index = TimeIndex::open(&storage(), &path, 1000, 1200, false).unwrap();
    index.quick_check().unwrap();
    let why = assert_corrupt_at(index.full_check(), &path, 24);
    assert!(why.contains("timestamp 200"), "{why}");

    // Offset decreasing.
    write_entries(&path, &[(100, 1), (200, 5), (300, 4), (400, 6)]);
    let index = TimeIndex::open(&storage(), &path, 1000, 1200, false).unwrap();
    let why = assert_corrupt_at(index.full_check(), &path, 24);
    assert!(why.contains("relative offset 4"), "{why}");

    // Last timestamp below the first (Kafka's own sanity check).
    write_entries(&path, &[(500, 1), (50, 2)]);
    let index = TimeIndex::open(&storage(), &path, 1000, 1200, false).unwrap();
    assert_corrupt_at(index.quick_check(), &path, 12);

    // A negative timestamp is never indexed.
    write_entries(&path, &[(-5, 1)]);
    let index = TimeIndex::open(&storage(), &path, 1000, 1200, false).unwrap();
    assert_corrupt_at(index.quick_check(), &path, 0);
    assert_corrupt_at(index.full_check(), &path, 0);
}

#[test]
fn checks_catch_a_last_offset_below_the_base() {
    let dir = tempfile::tempdir().unwrap();
    let path = index_path(dir.path());
    write_entries(&path, &[(100, -1)]);
    let index = TimeIndex::open(&storage(), &path, 1000, 1200, false).unwrap();
    let why = assert_corrupt_at(index.quick_check(), &path, 0);
    assert!(why.contains("below the base offset"), "{why}");
    assert_corrupt_at(index.full_check(), &path, 0);
    assert!(matches!(index.last_entry(), Err(Error::Corrupt { .. })));
    assert!(matches!(index.lookup(100), Err(Error::Corrupt { .. })));
}
