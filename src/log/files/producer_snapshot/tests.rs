//! Tests of the snapshot codec and file list, including the file-level ports of Kafka's
//! `ProducerStateManagerTest` cases about bad snapshot files.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::storage::sim::{CrashConfig, FaultOp, SimStorage};
use crate::storage::{OpenMode, Storage};

fn entry(producer_id: i64, last_offset: i64) -> SnapshotEntry {
    SnapshotEntry {
        producer_id,
        producer_epoch: 3,
        last_sequence: 7,
        last_offset,
        offset_delta: 2,
        timestamp: 1_700_000_000_000i64.wrapping_add(producer_id),
        coordinator_epoch: -1,
        current_txn_first_offset: -1,
    }
}

fn sim_dir() -> (Arc<dyn Storage>, PathBuf) {
    let storage: Arc<dyn Storage> = Arc::new(SimStorage::new(11));
    let dir = PathBuf::from("/p-0");
    storage.create_dir_all(&dir).unwrap();
    storage.sync_dir(Path::new("/")).unwrap();
    (storage, dir)
}

fn fixture_snapshot() -> (PathBuf, Vec<u8>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/broker/partlog-fixture-0/00000000000000000018.snapshot");
    let bytes = std::fs::read(&path).unwrap();
    (path, bytes)
}

fn overwrite(storage: &dyn Storage, path: &Path, bytes: &[u8]) {
    let file = storage.open(path, OpenMode::ReadWrite).unwrap();
    file.set_len(0).unwrap();
    file.write_all_at(bytes, 0).unwrap();
}

fn corrupt_what(result: Result<Vec<SnapshotEntry>>) -> Corruption {
    match result {
        Err(Error::Corrupt { what, .. }) => what,
        other => panic!("expected Error::Corrupt, got {other:?}"),
    }
}

#[test]
fn broker_fixture_producer_state_snapshot_decodes() {
    let (path, bytes) = fixture_snapshot();
    let entries = decode_snapshot(&path, &bytes).unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(
        entries[0],
        SnapshotEntry {
            producer_id: 0,
            producer_epoch: 0,
            last_sequence: 4,
            last_offset: 10,
            offset_delta: 4,
            timestamp: 1_767_225_614_000,
            coordinator_epoch: -1,
            current_txn_first_offset: -1,
        }
    );
    assert_eq!(entries[0].first_sequence(), 0);
    assert_eq!(
        (
            entries[1].producer_id,
            entries[1].producer_epoch,
            entries[1].last_sequence,
            entries[1].last_offset,
            entries[1].coordinator_epoch,
            entries[1].open_transaction(),
        ),
        (1, 1, 1, 16, 0, None)
    );
    assert_eq!(
        parse_snapshot_file_name("00000000000000000018.snapshot"),
        Some(18)
    );
    // Two pids in ascending order are Kafka's HashMap order too: re-encoding is byte-identical.
    assert_eq!(encode_snapshot(&entries), bytes);
}

#[test]
fn producer_state_snapshot_round_trips_entries_in_the_order_given() {
    let entries = vec![entry(9, 100), entry(-5, 7), entry(i64::MAX, i64::MAX)];
    let bytes = encode_snapshot(&entries);
    assert_eq!(
        bytes.len(),
        SNAPSHOT_HEADER_BYTES + 3 * SNAPSHOT_ENTRY_BYTES
    );
    assert_eq!(&bytes[..2], &[0, 1]);
    assert_eq!(&bytes[6..10], &[0, 0, 0, 3]);
    assert_eq!(decode_snapshot(Path::new("x"), &bytes).unwrap(), entries);
    let empty = encode_snapshot(&[]);
    assert_eq!(empty.len(), SNAPSHOT_HEADER_BYTES);
    assert_eq!(decode_snapshot(Path::new("x"), &empty).unwrap(), vec![]);
}

#[test]
fn producer_state_snapshot_entry_layout_is_kafkas() {
    let bytes = encode_snapshot(&[SnapshotEntry {
        producer_id: 0x0102_0304_0506_0708,
        producer_epoch: 0x1112,
        last_sequence: 0x2122_2324,
        last_offset: 0x3132_3334_3536_3738,
        offset_delta: 0x4142_4344,
        timestamp: 0x5152_5354_5556_5758,
        coordinator_epoch: 0x6162_6364,
        current_txn_first_offset: 0x7172_7374_7576_7778,
    }]);
    let expected_entry: Vec<u8> = [
        &[1u8, 2, 3, 4, 5, 6, 7, 8][..],
        &[0x11, 0x12],
        &[0x21, 0x22, 0x23, 0x24],
        &[0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38],
        &[0x41, 0x42, 0x43, 0x44],
        &[0x51, 0x52, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58],
        &[0x61, 0x62, 0x63, 0x64],
        &[0x71, 0x72, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78],
    ]
    .concat();
    assert_eq!(&bytes[10..], &expected_entry[..]);
    assert_eq!(
        u32::from_be_bytes(bytes[2..6].try_into().unwrap()),
        crate::format::crc32c(&bytes[6..])
    );
}

#[test]
fn producer_state_snapshot_first_sequence_wraps_like_kafka() {
    let mut wrapped = entry(1, 2020);
    wrapped.last_sequence = 9;
    wrapped.offset_delta = 20;
    assert_eq!(wrapped.first_sequence(), i32::MAX - 10);
    wrapped.last_sequence = 0;
    wrapped.offset_delta = 1;
    assert_eq!(wrapped.first_sequence(), i32::MAX);
    // No batch (after a marker): Kafka's DumpLogSegments prints 2147483647 here too.
    wrapped.last_sequence = -1;
    wrapped.offset_delta = 0;
    assert_eq!(wrapped.first_sequence(), i32::MAX);
    wrapped.last_sequence = 4;
    wrapped.offset_delta = 4;
    assert_eq!(wrapped.first_sequence(), 0);
}

#[test]
fn producer_state_snapshot_empty_file_is_truncated_error() {
    assert_eq!(
        corrupt_what(decode_snapshot(Path::new("x"), &[])),
        Corruption::Truncated {
            needed: 10,
            available: 0
        }
    );
}

#[test]
fn producer_state_snapshot_wrong_version_is_rejected_before_the_crc() {
    let mut bytes = encode_snapshot(&[entry(1, 5)]);
    bytes[1] = 2;
    assert!(matches!(
        corrupt_what(decode_snapshot(Path::new("x"), &bytes)),
        Corruption::BadHeader(_)
    ));
}

#[test]
fn producer_state_snapshot_crc_mismatch_is_reported_with_both_values() {
    let mut bytes = encode_snapshot(&[entry(1, 5)]);
    let last = bytes.len() - 1;
    bytes[last] ^= 0x40;
    let what = corrupt_what(decode_snapshot(Path::new("x"), &bytes));
    let Corruption::CrcMismatch { stored, computed } = what else {
        panic!("expected a CRC mismatch, got {what:?}");
    };
    assert_ne!(stored, computed);
}

/// A count that disagrees with the length, under a valid CRC (a writer bug, not a torn file).
#[test]
fn producer_state_snapshot_bad_count_with_valid_crc_is_rejected() {
    let recrc = |mut bytes: Vec<u8>| {
        let crc = crate::format::crc32c(&bytes[6..]);
        bytes[2..6].copy_from_slice(&crc.to_be_bytes());
        bytes
    };
    for (count, extra) in [(3i32, 0usize), (-1, 0), (1, 0), (2, 5), (i32::MAX, 0)] {
        let mut bytes = encode_snapshot(&[entry(1, 5), entry(2, 6)]);
        bytes[6..10].copy_from_slice(&count.to_be_bytes());
        bytes.extend(std::iter::repeat_n(0u8, extra));
        let bytes = recrc(bytes);
        if count == 2 && extra == 0 {
            continue;
        }
        assert!(
            matches!(
                corrupt_what(decode_snapshot(Path::new("x"), &bytes)),
                Corruption::RecordCount { declared, .. } if declared == count
            ),
            "count {count}, {extra} extra bytes"
        );
    }
}

#[test]
fn producer_state_snapshot_names_have_twenty_digits() {
    assert_eq!(snapshot_file_name(18), "00000000000000000018.snapshot");
    assert_eq!(
        snapshot_path(Path::new("/d"), i64::MAX),
        Path::new("/d/09223372036854775807.snapshot")
    );
    for other in [
        "0000000000000000018.snapshot",
        "00000000000000000018.snapshot.deleted",
        "00000000000000000018.snapshot.tmp",
        "0000000000000000001x.snapshot",
        "00000000000000000018.log",
        "99999999999999999999.snapshot",
    ] {
        assert_eq!(parse_snapshot_file_name(other), None, "{other}");
    }
}

/// Kafka's `testLoadFromEmptySnapshotFile`, at the file level: the empty newest snapshot is
/// deleted and the older one loads.
#[test]
fn producer_state_snapshot_load_from_empty_snapshot_file_falls_back() {
    load_falls_back_from(|_| Vec::new());
}

/// Kafka's `testLoadFromTruncatedSnapshotFile`.
#[test]
fn producer_state_snapshot_load_from_truncated_snapshot_file_falls_back() {
    load_falls_back_from(|bytes| bytes[..bytes.len() - 1].to_vec());
    load_falls_back_from(|bytes| bytes[..5].to_vec());
}

/// Kafka's `testLoadFromCorruptSnapshotFile`.
#[test]
fn producer_state_snapshot_load_from_corrupt_snapshot_file_falls_back() {
    load_falls_back_from(|bytes| {
        let mut bytes = bytes.to_vec();
        bytes[20] ^= 0xff;
        bytes
    });
}

fn load_falls_back_from(damage: impl Fn(&[u8]) -> Vec<u8>) {
    let (storage, dir) = sim_dir();
    let older = vec![entry(1, 0)];
    let newer = vec![entry(1, 0), entry(2, 1)];
    write_snapshot(&*storage, &dir, 1, &older).unwrap();
    let newest = write_snapshot(&*storage, &dir, 2, &newer).unwrap();
    overwrite(&*storage, &newest, &damage(&encode_snapshot(&newer)));
    assert!(matches!(
        read_snapshot(&*storage, &newest),
        Err(Error::Corrupt { .. })
    ));

    // A read-only open skips it and deletes nothing.
    let loaded = load_newest_valid_snapshot(&*storage, &dir, 2, false).unwrap();
    assert_eq!(
        loaded.map(|loaded| (loaded.offset, loaded.snapshot.entries().collect())),
        Some((1, older.clone()))
    );
    assert_eq!(list_snapshots(&*storage, &dir).unwrap(), vec![1, 2]);

    let loaded = load_newest_valid_snapshot(&*storage, &dir, 2, true).unwrap();
    assert_eq!(
        loaded.map(|loaded| (loaded.offset, loaded.snapshot.entries().collect())),
        Some((1, older))
    );
    assert_eq!(list_snapshots(&*storage, &dir).unwrap(), vec![1]);
}

#[test]
fn producer_state_snapshot_load_ignores_snapshots_above_the_offset() {
    let (storage, dir) = sim_dir();
    write_snapshot(&*storage, &dir, 3, &[entry(1, 2)]).unwrap();
    write_snapshot(&*storage, &dir, 8, &[entry(1, 7)]).unwrap();
    let loaded = load_newest_valid_snapshot(&*storage, &dir, 7, true).unwrap();
    assert_eq!(loaded.map(|l| l.offset), Some(3));
    assert_eq!(
        load_newest_valid_snapshot(&*storage, &dir, 2, true).unwrap(),
        None
    );
    assert_eq!(
        latest_snapshot_at_or_below(&*storage, &dir, 8).unwrap(),
        Some(8)
    );
    assert_eq!(
        latest_snapshot_at_or_below(&*storage, &dir, 7).unwrap(),
        Some(3)
    );
    assert_eq!(list_snapshots(&*storage, &dir).unwrap(), vec![3, 8]);
}

/// Kafka's `testTruncateAndReloadRemovesOutOfRangeSnapshots`, at the file-list level: snapshots
/// 1 to 5, truncate-and-reload to (1, 3) leaves 2 and 3.
#[test]
fn producer_state_snapshot_truncate_and_reload_removes_out_of_range_snapshots() {
    let (storage, dir) = sim_dir();
    for offset in 1..=5 {
        write_snapshot(&*storage, &dir, offset, &[entry(1, offset - 1)]).unwrap();
    }
    let deleted = retain_snapshots_within(&*storage, &dir, 1, 3).unwrap();
    assert_eq!(deleted, vec![1, 4, 5]);
    let left = list_snapshots(&*storage, &dir).unwrap();
    assert_eq!((left.first(), left.last()), (Some(&2), Some(&3)));
}

#[test]
fn producer_state_snapshot_delete_above_and_below_are_strict() {
    let (storage, dir) = sim_dir();
    for offset in [0, 4, 8, 12] {
        write_snapshot(&*storage, &dir, offset, &[]).unwrap();
    }
    assert_eq!(
        delete_snapshots_above(&*storage, &dir, 8).unwrap(),
        vec![12]
    );
    assert_eq!(delete_snapshots_below(&*storage, &dir, 4).unwrap(), vec![0]);
    assert_eq!(list_snapshots(&*storage, &dir).unwrap(), vec![4, 8]);
}

/// Kafka's `removeStraySnapshots`: snapshots at segment bases stay; of the others only the
/// newest, and only when it is not below the newest segment base.
#[test]
fn producer_state_snapshot_stray_rules_are_kafkas() {
    assert_eq!(stray_snapshots(&[0, 5, 10], &[0, 5, 10]), Vec::<i64>::new());
    // 3 and 7 are strays; 12 (above the last base) is the active segment's log-end snapshot.
    assert_eq!(stray_snapshots(&[0, 3, 5, 7, 12], &[0, 5, 10]), vec![3, 7]);
    // The newest stray lies below the newest base: it goes too.
    assert_eq!(stray_snapshots(&[3, 7], &[0, 5, 10]), vec![3, 7]);
    // One at exactly the newest base is not a stray.
    assert_eq!(stray_snapshots(&[7, 10], &[0, 10]), vec![7]);
    // No segments: the newest stray stays.
    assert_eq!(stray_snapshots(&[7, 3], &[]), vec![3]);

    let (storage, dir) = sim_dir();
    for offset in [0, 3, 5, 7, 12] {
        write_snapshot(&*storage, &dir, offset, &[]).unwrap();
    }
    assert_eq!(
        remove_stray_snapshots(&*storage, &dir, &[0, 5, 10]).unwrap(),
        vec![3, 7]
    );
    assert_eq!(list_snapshots(&*storage, &dir).unwrap(), vec![0, 5, 12]);
}

#[test]
fn producer_state_snapshot_write_rejects_a_negative_offset() {
    let (storage, dir) = sim_dir();
    assert!(matches!(
        write_snapshot(&*storage, &dir, -1, &[]),
        Err(Error::InvalidArgument { .. })
    ));
}

/// A write stopped at any step, then a crash of any shape, leaves the older snapshot whole and
/// the new one either absent or whole: a torn snapshot is never under the final name.
#[test]
fn producer_state_snapshot_write_is_atomic_across_crashes() {
    let older = vec![entry(1, 4)];
    let newer = vec![entry(1, 8), entry(2, 6)];
    for stop_at in 1..=7u64 {
        for crash_seed in 0..8u64 {
            let sim = SimStorage::new(crash_seed);
            let storage: Arc<dyn Storage> = Arc::new(sim.clone());
            let dir = PathBuf::from("/p-0");
            storage.create_dir_all(&dir).unwrap();
            storage.sync_dir(Path::new("/")).unwrap();
            write_snapshot(&*storage, &dir, 5, &older).unwrap();
            sim.fail_nth(FaultOp::Any, stop_at, Default::default());
            let finished = write_snapshot(&*storage, &dir, 9, &newer).is_ok();
            sim.clear_faults();
            sim.crash_with(&CrashConfig::random());
            let listed = list_snapshots(&*storage, &dir).unwrap();
            assert_eq!(listed.first(), Some(&5), "stop {stop_at} seed {crash_seed}");
            assert_eq!(
                read_snapshot(&*storage, &snapshot_path(&dir, 5)).unwrap(),
                older
            );
            if finished {
                assert_eq!(listed, vec![5, 9], "stop {stop_at} seed {crash_seed}");
            }
            if listed.contains(&9) {
                assert_eq!(
                    read_snapshot(&*storage, &snapshot_path(&dir, 9)).unwrap(),
                    newer,
                    "stop {stop_at} seed {crash_seed}"
                );
            }
            remove_temporary_snapshots(&*storage, &dir).unwrap();
            assert!(
                storage
                    .list(&dir)
                    .unwrap()
                    .iter()
                    .all(|name| !name.ends_with(".tmp"))
            );
        }
    }
}

fn arb_entry() -> impl Strategy<Value = SnapshotEntry> {
    (
        any::<i64>(),
        any::<i16>(),
        any::<i32>(),
        any::<i64>(),
        any::<i32>(),
        any::<i64>(),
        any::<i32>(),
        any::<i64>(),
    )
        .prop_map(
            |(pid, epoch, seq, last, delta, ts, coord, txn)| SnapshotEntry {
                producer_id: pid,
                producer_epoch: epoch,
                last_sequence: seq,
                last_offset: last,
                offset_delta: delta,
                timestamp: ts,
                coordinator_epoch: coord,
                current_txn_first_offset: txn,
            },
        )
}

proptest! {
    /// Flipping any bit gives a typed error, or (a flip that keeps every check passing is
    /// impossible for CRC-32C over one bit) never a wrong entry list; never a panic.
    #[test]
    fn producer_state_snapshot_bit_flip_is_a_typed_error(
        entries in proptest::collection::vec(arb_entry(), 0..6),
        bit in any::<prop::sample::Index>(),
    ) {
        let mut bytes = encode_snapshot(&entries);
        let bit = bit.index(bytes.len() * 8);
        bytes[bit / 8] ^= 1 << (bit % 8);
        let result = decode_snapshot(Path::new("x"), &bytes);
        prop_assert!(matches!(result, Err(Error::Corrupt { .. })), "{result:?}");
    }

    /// A prefix of a snapshot is a typed error, except the whole file, which gives the exact
    /// entries.
    #[test]
    fn producer_state_snapshot_truncation_is_a_typed_error_or_exact(
        entries in proptest::collection::vec(arb_entry(), 0..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let bytes = encode_snapshot(&entries);
        let len = cut.index(bytes.len() + 1);
        match decode_snapshot(Path::new("x"), &bytes[..len]) {
            Ok(decoded) => {
                prop_assert_eq!(len, bytes.len());
                prop_assert_eq!(decoded, entries);
            }
            Err(Error::Corrupt { .. }) => prop_assert!(len < bytes.len()),
            Err(other) => prop_assert!(false, "untyped error {other:?}"),
        }
    }

    /// Arbitrary bytes never panic the decoder.
    #[test]
    fn producer_state_snapshot_arbitrary_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..200),
    ) {
        let _ = decode_snapshot(Path::new("x"), &bytes);
    }
}

#[test]
fn producer_state_snapshot_check_finds_open_transactions_in_any_block() {
    let path = Path::new("/p/00000000000000000001.snapshot");
    let entries: Vec<SnapshotEntry> = (0..2_500).map(|id| entry(id, id * 10)).collect();
    assert!(entries.iter().all(|e| e.open_transaction().is_none()));
    let checked = CheckedSnapshot::check(path, encode_snapshot(&entries)).unwrap();
    assert!(!checked.has_open_transaction());
    assert_eq!(
        checked.transaction_fields().count(),
        entries.len(),
        "every entry still readable"
    );
    // One open transaction in the first block, the last full one, the partial last, or at
    // first offset 0 (the sign bit alone decides).
    for (at, first_offset) in [(0, 5), (1_023, 7), (1_024, 9), (2_047, 11), (2_499, 0)] {
        let mut with_open = entries.clone();
        with_open[at].current_txn_first_offset = first_offset;
        let checked = CheckedSnapshot::check(path, encode_snapshot(&with_open)).unwrap();
        assert!(checked.has_open_transaction(), "entry {at}");
        assert_eq!(
            checked
                .transaction_fields()
                .filter(|&(_, _, first)| first >= 0)
                .collect::<Vec<_>>(),
            [(
                with_open[at].producer_id,
                with_open[at].timestamp,
                first_offset
            )],
            "entry {at}"
        );
    }
    // A flipped byte in any block still fails the check's CRC.
    for at in [
        SNAPSHOT_HEADER_BYTES + 3,
        SNAPSHOT_HEADER_BYTES + 1_024 * SNAPSHOT_ENTRY_BYTES + 40,
    ] {
        let mut bytes = encode_snapshot(&entries);
        bytes[at] ^= 0x10;
        assert!(matches!(
            CheckedSnapshot::check(path, bytes),
            Err(Error::Corrupt {
                what: Corruption::CrcMismatch { .. },
                ..
            })
        ));
    }
}
