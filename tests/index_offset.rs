//! `.index` files: the on-disk layout byte by byte, append rules, fullness, truncation (active
//! and sealed), sealing, renaming and the O(1) and full checks.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use partlog::unstable::{OffsetIndex, OffsetPosition, OsStorage, Storage};
use partlog::{Corruption, Error};

fn storage() -> Arc<dyn Storage> {
    Arc::new(OsStorage::new())
}

fn index_path(dir: &Path) -> PathBuf {
    dir.join("00000000000000001000.index")
}

fn op(offset: i64, position: u32) -> OffsetPosition {
    OffsetPosition { offset, position }
}

/// Asserts that `result` is `Error::Corrupt` about `file` at byte `position`.
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

fn assert_invalid(result: partlog::Result<()>) {
    assert!(
        matches!(result, Err(Error::InvalidArgument { .. })),
        "expected InvalidArgument, got {result:?}"
    );
}

#[test]
fn entries_are_last_offset_minus_base_then_position_both_i32_big_endian() {
    let dir = tempfile::tempdir().unwrap();
    let path = index_path(dir.path());
    let index = OffsetIndex::create(&storage(), &path, 1000, 1024).unwrap();
    index.append(1005, 0).unwrap();
    index.append(1000 + 0x0102_0304, 0x0A0B_0C0D).unwrap();
    index
        .append(1000 + i64::from(i32::MAX), i32::MAX as u32)
        .unwrap();
    let expected: [u8; 24] = [
        0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00, // (5, 0)
        0x01, 0x02, 0x03, 0x04, 0x0A, 0x0B, 0x0C, 0x0D, // (0x01020304, 0x0A0B0C0D)
        0x7F, 0xFF, 0xFF, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF, // (i32::MAX, i32::MAX)
    ];
    // The file gets the entries at a sync (or a seal, or a page of them at a time); never
    // preallocated, it is then exactly its entries.
    index.sync().unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), expected);
    assert_eq!(index.size_bytes(), 24);
    assert_eq!(index.entries(), 3);
}

#[test]
fn hand_built_bytes_read_back_in_every_mode() {
    let dir = tempfile::tempdir().unwrap();
    let path = index_path(dir.path());
    let bytes: [u8; 16] = [
        0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x10, 0x00, // (7, 4096)
        0x00, 0x00, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, // (256, 65536)
    ];
    std::fs::write(&path, bytes).unwrap();
    for writable in [false, true] {
        let index = OffsetIndex::open(&storage(), &path, 1000, 1024, writable).unwrap();
        assert_eq!(index.is_sealed(), !writable);
        assert_eq!(index.entries(), 2);
        assert_eq!(index.entry(0).unwrap(), op(1007, 4096));
        assert_eq!(index.entry(1).unwrap(), op(1256, 65536));
        assert_eq!(index.last_entry().unwrap(), op(1256, 65536));
        assert_eq!(index.lookup(1006).unwrap(), op(1000, 0));
        assert_eq!(index.lookup(1007).unwrap(), op(1007, 4096));
        assert_eq!(index.lookup(1255).unwrap(), op(1007, 4096));
        assert_eq!(index.lookup(99_999).unwrap(), op(1256, 65536));
        assert_eq!(
            index.upper_bound_by_position(4097).unwrap(),
            Some(op(1256, 65536))
        );
        assert_eq!(index.upper_bound_by_position(65537).unwrap(), None);
        assert!(matches!(index.entry(2), Err(Error::InvalidArgument { .. })));
        index.quick_check(65537).unwrap();
        index.full_check(65537).unwrap();
    }
    // Opening never rewrote the file.
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
}

#[test]
fn empty_index_answers_base_and_zero() {
    let dir = tempfile::tempdir().unwrap();
    let index = OffsetIndex::create(&storage(), &index_path(dir.path()), 1000, 1024).unwrap();
    assert_eq!(index.last_entry().unwrap(), op(1000, 0));
    assert_eq!(index.lookup(5000).unwrap(), op(1000, 0));
    assert_eq!(index.lookup(i64::MIN).unwrap(), op(1000, 0));
    assert_eq!(index.upper_bound_by_position(0).unwrap(), None);
    index.quick_check(0).unwrap();
    index.full_check(0).unwrap();
}

#[test]
fn create_refuses_an_existing_file_and_bad_base_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let path = index_path(dir.path());
    std::fs::write(&path, b"").unwrap();
    assert!(OffsetIndex::create(&storage(), &path, 1000, 1024).is_err());
    let other = dir.path().join("x.index");
    assert!(matches!(
        OffsetIndex::create(&storage(), &other, -1, 1024),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(matches!(
        OffsetIndex::create(&storage(), &other, i64::MAX, 1024),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(!other.exists());
}

#[test]
fn append_rejects_misuse_with_invalid_argument_and_leaves_the_file_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = index_path(dir.path());
    let index = OffsetIndex::create(&storage(), &path, 1000, 1024).unwrap();
    assert_invalid(index.append(999, 0));
    assert_invalid(index.append(1000 + i64::from(i32::MAX) + 1, 0));
    assert_invalid(index.append(1000, i32::MAX as u32 + 1));
    index.append(1010, 100).unwrap();
    assert_invalid(index.append(1010, 200)); // offset not increasing
    assert_invalid(index.append(1009, 200));
    assert_invalid(index.append(1020, 100)); // position not increasing
    assert_invalid(index.append(1020, 50));
    index.append(1020, 200).unwrap();
    assert_eq!(index.entries(), 2);
    index.sync().unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 16);
    index.seal().unwrap();
    assert_invalid(index.append(1030, 300));
    assert_eq!(index.entries(), 2);
}

#[test]
fn full_at_max_index_bytes_over_eight() {
    let dir = tempfile::tempdir().unwrap();
    let path = index_path(dir.path());
    // 39 bytes round down to 4 entries.
    let index = OffsetIndex::create(&storage(), &path, 0, 39).unwrap();
    assert_eq!(index.max_entries(), 4);
    for n in 0..4u32 {
        assert!(!index.is_full());
        index.append(i64::from(n) * 10, n * 100).unwrap();
    }
    assert!(index.is_full());
    assert_invalid(index.append(100, 1000));
    index.sync().unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 32);

    let tiny = OffsetIndex::create(&storage(), &dir.path().join("t.index"), 0, 7).unwrap();
    assert_eq!(tiny.max_entries(), 0);
    assert!(tiny.is_full());
    assert_invalid(tiny.append(1, 1));
}

#[test]
fn a_trailing_partial_entry_is_dropped_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = index_path(dir.path());
    let mut bytes = Vec::new();
    for (rel, pos) in [(1i32, 10i32), (2, 20), (3, 30)] {
        bytes.extend_from_slice(&rel.to_be_bytes());
        bytes.extend_from_slice(&pos.to_be_bytes());
    }
    bytes.extend_from_slice(&[0x00, 0x00, 0x00, 0x04, 0x00]); // torn fourth entry
    std::fs::write(&path, &bytes).unwrap();

    let sealed = OffsetIndex::open(&storage(), &path, 1000, 1024, false).unwrap();
    assert_eq!(sealed.entries(), 3);
    assert_eq!(sealed.last_entry().unwrap(), op(1003, 30));
    sealed.quick_check(31).unwrap();
    drop(sealed);
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        29,
        "read-only open wrote"
    );

    let active = OffsetIndex::open(&storage(), &path, 1000, 1024, true).unwrap();
    assert_eq!(active.entries(), 3);
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        24,
        "torn tail not cut"
    );
    active.append(1004, 40).unwrap();
    active.sync().unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 32);
    active.full_check(41).unwrap();
}

fn build(dir: &Path, count: i64) -> OffsetIndex {
    let index = OffsetIndex::create(&storage(), &index_path(dir), 1000, 1 << 20).unwrap();
    for n in 1..=count {
        index.append(1000 + n * 10, (n * 100) as u32).unwrap();
    }
    index
}

#[test]
fn truncate_to_keeps_offsets_below_the_target_on_an_active_index() {
    let dir = tempfile::tempdir().unwrap();
    let path = index_path(dir.path());
    let index = build(dir.path(), 10); // offsets 1010..=1100
    index.sync().unwrap();
    let inode = std::fs::metadata(&path).unwrap().ino();
    index.truncate_to(1_100_000).unwrap(); // beyond: no-op
    assert_eq!(index.entries(), 10);
    index.truncate_to(1055).unwrap(); // between 1050 and 1060
    assert_eq!(index.entries(), 5);
    assert_eq!(index.last_entry().unwrap(), op(1050, 500));
    index.truncate_to(1050).unwrap(); // exactly an entry: it goes
    assert_eq!(index.entries(), 4);
    assert_eq!(index.last_entry().unwrap(), op(1040, 400));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 32);
    // An active, never-mapped index shrinks in place.
    assert_eq!(std::fs::metadata(&path).unwrap().ino(), inode);
    index.append(1041, 401).unwrap();
    assert_eq!(index.lookup(1045).unwrap(), op(1041, 401));
    index.truncate_to_entries(2).unwrap();
    assert_eq!(index.last_entry().unwrap(), op(1020, 200));
    index.truncate_to_entries(7).unwrap();
    assert_eq!(index.entries(), 2);
    index.truncate_to(999).unwrap(); // below base: everything goes
    assert_eq!(index.entries(), 0);
    index.append(1001, 1).unwrap();
    index.reset().unwrap();
    assert_eq!(index.entries(), 0);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
}

#[test]
fn truncating_a_sealed_index_writes_a_new_file_and_old_readers_keep_old_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = index_path(dir.path());
    let index = build(dir.path(), 100);
    index.seal().unwrap();
    assert!(index.is_sealed());
    // A lookup maps the sealed file.
    assert_eq!(index.lookup(1505).unwrap(), op(1500, 5000));
    let before = std::fs::read(&path).unwrap();
    let inode = std::fs::metadata(&path).unwrap().ino();
    // Another reader's handle on the old file.
    let old_reader = std::fs::File::open(&path).unwrap();

    index.truncate_to(1505).unwrap();
    assert_eq!(index.entries(), 50);
    assert!(index.is_sealed());
    assert_eq!(index.last_entry().unwrap(), op(1500, 5000));
    assert_eq!(index.lookup(99_999).unwrap(), op(1500, 5000));
    assert_ne!(
        std::fs::metadata(&path).unwrap().ino(),
        inode,
        "shrunk in place"
    );
    assert_eq!(std::fs::read(&path).unwrap(), before[..400]);
    let mut old = Vec::new();
    std::io::Read::read_to_end(&mut &old_reader, &mut old).unwrap();
    assert_eq!(old, before, "the old file changed under its reader");
    // No temporary file is left behind.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, vec!["00000000000000001000.index".to_string()]);

    // It becomes active again and grows from the kept entries.
    index.make_writable().unwrap();
    assert!(!index.is_sealed());
    index.append(1501, 5001).unwrap();
    assert_eq!(index.entries(), 51);
    index.sync().unwrap();
    let reopened = OffsetIndex::open(&storage(), &path, 1000, 1 << 20, false).unwrap();
    assert_eq!(reopened.entries(), 51);
    assert_eq!(reopened.last_entry().unwrap(), op(1501, 5001));
    reopened.full_check(5002).unwrap();
}

#[test]
fn an_index_mapped_while_sealed_is_rewritten_on_truncation_even_when_active_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = index_path(dir.path());
    let index = build(dir.path(), 20);
    index.seal().unwrap();
    index.lookup(1100).unwrap(); // maps it
    index.make_writable().unwrap();
    let inode = std::fs::metadata(&path).unwrap().ino();
    index.truncate_to(1100).unwrap();
    assert_eq!(index.entries(), 9);
    assert_ne!(std::fs::metadata(&path).unwrap().ino(), inode);
    // Now on a fresh, never-mapped file: the next truncation shrinks in place.
    let inode = std::fs::metadata(&path).unwrap().ino();
    index.truncate_to(1050).unwrap();
    assert_eq!(index.entries(), 4);
    assert_eq!(std::fs::metadata(&path).unwrap().ino(), inode);
    index.append(1060, 600).unwrap();
    index.sync().unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 40);
}

#[test]
fn a_leftover_temporary_file_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let path = index_path(dir.path());
    let index = build(dir.path(), 5);
    index.seal().unwrap();
    let leftover = dir.path().join("00000000000000001000.index.swap.deleted");
    std::fs::write(&leftover, b"garbage from a crash").unwrap();
    index.truncate_to(1030).unwrap();
    assert!(!leftover.exists());
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 16);
}

#[test]
fn seal_reopen_and_make_writable_keep_every_entry() {
    let dir = tempfile::tempdir().unwrap();
    let path = index_path(dir.path());
    let index = build(dir.path(), 3000);
    index.sync().unwrap();
    index.seal().unwrap();
    index.seal().unwrap(); // idempotent
    for n in [0usize, 1, 1500, 2999] {
        let expected = op(1000 + (n as i64 + 1) * 10, ((n as u32) + 1) * 100);
        assert_eq!(index.entry(n).unwrap(), expected);
    }
    index.release_mapping();
    assert_eq!(index.lookup(1015).unwrap(), op(1010, 100));
    drop(index);
    let reopened = OffsetIndex::open(&storage(), &path, 1000, 1 << 20, false).unwrap();
    assert_eq!(reopened.entries(), 3000);
    assert_eq!(reopened.last_entry().unwrap(), op(31000, 300_000));
    reopened.make_writable().unwrap();
    reopened.append(31001, 300_001).unwrap();
    assert_eq!(reopened.entries(), 3001);
    reopened.full_check(300_002).unwrap();
}

#[test]
fn rename_moves_the_file_and_the_index_keeps_working_there() {
    let dir = tempfile::tempdir().unwrap();
    let path = index_path(dir.path());
    let index = build(dir.path(), 10);
    index.seal().unwrap();
    let deleted = dir.path().join("00000000000000001000.index.deleted");
    index.rename_to(&deleted).unwrap();
    assert_eq!(index.path(), deleted);
    assert!(!path.exists());
    assert_eq!(index.lookup(1055).unwrap(), op(1050, 500));
    index.truncate_to(1030).unwrap();
    assert_eq!(std::fs::metadata(&deleted).unwrap().len(), 16);
    assert!(!path.exists());
}

fn write_entries(path: &Path, entries: &[(i32, i32)]) {
    let mut bytes = Vec::new();
    for (rel, pos) in entries {
        bytes.extend_from_slice(&rel.to_be_bytes());
        bytes.extend_from_slice(&pos.to_be_bytes());
    }
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn checks_catch_zero_padding() {
    let dir = tempfile::tempdir().unwrap();
    let path = index_path(dir.path());
    // What a preallocating writer leaves after a crash: real entries, then zeros.
    write_entries(&path, &[(1, 100), (2, 200), (3, 300), (0, 0), (0, 0)]);
    for writable in [false, true] {
        let index = OffsetIndex::open(&storage(), &path, 1000, 1024, writable).unwrap();
        let why = assert_corrupt_at(index.quick_check(10_000), &path, 32);
        assert!(why.contains("zero padding"), "{why}");
        let why = assert_corrupt_at(index.full_check(10_000), &path, 24);
        assert!(
            why.contains("entry 3") && why.contains("zero padding"),
            "{why}"
        );
    }
}

#[test]
fn checks_catch_non_monotonic_entries() {
    let dir = tempfile::tempdir().unwrap();
    let path = index_path(dir.path());
    // A bad entry in the middle: only the full check sees it.
    write_entries(&path, &[(1, 100), (5, 500), (4, 600), (9, 900)]);
    let index = OffsetIndex::open(&storage(), &path, 1000, 1024, false).unwrap();
    index.quick_check(1000).unwrap();
    let why = assert_corrupt_at(index.full_check(1000), &path, 16);
    assert!(why.contains("relative offset 4"), "{why}");

    write_entries(&path, &[(1, 100), (5, 500), (6, 500), (9, 900)]);
    let index = OffsetIndex::open(&storage(), &path, 1000, 1024, false).unwrap();
    let why = assert_corrupt_at(index.full_check(1000), &path, 16);
    assert!(why.contains("position 500"), "{why}");

    // At the tail the O(1) check sees it too.
    write_entries(&path, &[(1, 100), (5, 500), (4, 600)]);
    let index = OffsetIndex::open(&storage(), &path, 1000, 1024, false).unwrap();
    assert_corrupt_at(index.quick_check(1000), &path, 16);
}

#[test]
fn checks_catch_positions_beyond_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let path = index_path(dir.path());
    write_entries(&path, &[(1, 100), (2, 200), (3, 300)]);
    let index = OffsetIndex::open(&storage(), &path, 1000, 1024, false).unwrap();
    index.quick_check(301).unwrap();
    index.full_check(301).unwrap();
    let why = assert_corrupt_at(index.quick_check(300), &path, 16);
    assert!(why.contains("beyond the log"), "{why}");
    assert_corrupt_at(index.full_check(300), &path, 16);
    assert_corrupt_at(index.full_check(150), &path, 8);
    assert_corrupt_at(index.quick_check(0), &path, 16);

    write_entries(&path, &[(1, 100), (2, -5)]);
    let index = OffsetIndex::open(&storage(), &path, 1000, 1024, false).unwrap();
    assert_corrupt_at(index.quick_check(1000), &path, 8);
    assert!(matches!(index.last_entry(), Err(Error::Corrupt { .. })));
}

#[test]
fn checks_catch_a_last_offset_below_the_base() {
    let dir = tempfile::tempdir().unwrap();
    let path = index_path(dir.path());
    write_entries(&path, &[(-3, 0)]);
    let index = OffsetIndex::open(&storage(), &path, 1000, 1024, false).unwrap();
    let why = assert_corrupt_at(index.quick_check(1000), &path, 0);
    assert!(why.contains("below the base offset"), "{why}");
    assert_corrupt_at(index.full_check(1000), &path, 0);
    assert!(matches!(index.last_entry(), Err(Error::Corrupt { .. })));
    assert!(matches!(index.lookup(5000), Err(Error::Corrupt { .. })));
}

#[test]
fn quick_check_catches_a_file_shorter_than_its_entries() {
    let dir = tempfile::tempdir().unwrap();
    let path = index_path(dir.path());
    write_entries(&path, &[(1, 100), (2, 200), (3, 300)]);
    let index = OffsetIndex::open(&storage(), &path, 1000, 1024, false).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(10)
        .unwrap();
    assert_corrupt_at(index.quick_check(1000), &path, 16);
}

#[test]
fn index_types_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<OffsetIndex>();
    assert_send_sync::<partlog::unstable::TimeIndex>();
}

/// An active index publishes an entry in memory at once and writes its file later: a page of
/// entries in one write, every pending one at a sync or a seal, and at a drop. Lookups never
/// wait for the file; a truncation drops pending entries without touching it.
#[test]
fn an_active_index_writes_its_entries_a_page_at_a_time_and_at_sync_seal_and_drop() {
    let dir = tempfile::tempdir().unwrap();
    let path = index_path(dir.path());
    let file_len = || std::fs::metadata(&path).unwrap().len();
    let index = OffsetIndex::create(&storage(), &path, 1000, 1 << 20).unwrap();
    index.append(1010, 100).unwrap();
    index.append(1020, 200).unwrap();
    assert_eq!(file_len(), 0, "nothing written before a page or a sync");
    assert_eq!(index.lookup(1025).unwrap(), op(1020, 200));
    index.quick_check(201).unwrap();
    index.full_check(201).unwrap();
    index.sync().unwrap();
    assert_eq!(file_len(), 16);
    // A truncation of pending entries leaves the file alone; of written ones, cuts it.
    index.append(1030, 300).unwrap();
    index.truncate_to(1030).unwrap();
    assert_eq!((index.entries(), file_len()), (2, 16));
    index.truncate_to(1020).unwrap();
    assert_eq!((index.entries(), file_len()), (1, 8));
    // A page of pending entries (512 of 8 bytes) is written without a sync.
    for n in 2..=512i64 {
        index.append(1000 + n * 10, (n * 100) as u32).unwrap();
    }
    assert_eq!(file_len(), 8, "511 entries pending");
    index.append(1000 + 513 * 10, 51_300).unwrap();
    assert_eq!(
        file_len(),
        513 * 8,
        "the 512th pending entry wrote the page"
    );
    index.append(1000 + 514 * 10, 51_400).unwrap();
    assert_eq!(file_len(), 513 * 8, "the next page is pending");
    index.seal().unwrap();
    assert_eq!(file_len(), 514 * 8, "the seal wrote it");
    let reopened = OffsetIndex::open(&storage(), &path, 1000, 1 << 20, false).unwrap();
    assert_eq!(reopened.last_entry().unwrap(), op(1000 + 514 * 10, 51_400));
    reopened.full_check(51_401).unwrap();
    drop(reopened);
    index.make_writable().unwrap();
    index.append(1000 + 515 * 10, 51_500).unwrap();
    drop(index);
    assert_eq!(file_len(), 515 * 8, "the drop wrote the pending entry");
}
