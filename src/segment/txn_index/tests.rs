//! Tests of the `.txnindex`: ports of Kafka's `TransactionIndexTest`, the broker fixture, and
//! the index as a segment owns it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::*;
use crate::format::{BatchBuilder, Compression};
use crate::segment::{Segment, SegmentConfig, SegmentFileKind, SegmentRole, segment_file_path};
use crate::storage::OsStorage;

fn os() -> Arc<dyn Storage> {
    Arc::new(OsStorage::new())
}

fn txn(producer_id: i64, first: i64, last: i64, lso: i64) -> AbortedTxn {
    AbortedTxn {
        producer_id,
        first_offset: first,
        last_offset: last,
        last_stable_offset: lso,
    }
}

fn index_at(dir: &Path, base: i64) -> (PathBuf, TransactionIndex) {
    let path = segment_file_path(dir, base, SegmentFileKind::TxnIndex);
    let index = TransactionIndex::open(&os(), &path, base, true).unwrap();
    (path, index)
}

#[test]
fn txn_index_entry_bytes_match_the_example() {
    let bytes = txn(1000, 100, 106, 100).to_bytes();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(
        hex,
        "0000".to_owned()
            + "00000000000003e8"
            + "0000000000000064"
            + "000000000000006a"
            + "0000000000000064"
    );
    assert_eq!(
        AbortedTxn::from_bytes(&bytes),
        Some(txn(1000, 100, 106, 100))
    );
}

/// Kafka's `testAbortedTxnSerde`.
#[test]
fn txn_index_aborted_txn_round_trips() {
    let original = txn(983493, 137, 10500, 5093);
    assert_eq!(AbortedTxn::from_bytes(&original.to_bytes()), Some(original));
    let mut other_version = original.to_bytes();
    other_version[1] = 1;
    assert_eq!(AbortedTxn::from_bytes(&other_version), None);
}

#[test]
fn txn_index_reads_broker_fixture() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/broker/partlog-fixture-0/00000000000000000000.txnindex");
    let index = TransactionIndex::open(&os(), &path, 0, false).unwrap();
    index.sanity_check().unwrap();
    let all = index.all().unwrap();
    assert_eq!(all, vec![txn(1, 15, 17, 18)]);
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(all[0].to_bytes().as_slice(), bytes.as_slice());
    assert_eq!(index.last_offset(), Some(17));
}

/// Kafka's `testCollectAbortedTransactions`.
#[test]
fn txn_index_collect_searches_across_entries() {
    let dir = tempfile::tempdir().unwrap();
    let (path, index) = index_at(dir.path(), 0);
    let aborted = vec![
        txn(0, 0, 10, 11),
        txn(1, 5, 15, 13),
        txn(2, 18, 35, 25),
        txn(3, 32, 50, 40),
    ];
    for entry in &aborted {
        index.append(*entry).unwrap();
    }
    drop(index);
    let index = TransactionIndex::open(&os(), &path, 0, true).unwrap();
    let cases: [(i64, i64, &[AbortedTxn], bool); 6] = [
        (0, 100, &aborted[..], false),
        (0, 32, &aborted[..3], true),
        (0, 35, &aborted[..], true),
        (10, 35, &aborted[..], true),
        (11, 35, &aborted[1..4], true),
        (20, 41, &aborted[2..4], false),
    ];
    for (fetch, upper, expected, complete) in cases {
        let result = index.collect(fetch, upper).unwrap();
        assert_eq!(result.aborted, expected, "collect({fetch}, {upper})");
        assert_eq!(result.complete, complete, "collect({fetch}, {upper})");
    }
}

/// Kafka's `testTruncate`.
#[test]
fn txn_index_truncate_removes_entries_at_or_above_the_offset() {
    let dir = tempfile::tempdir().unwrap();
    let (path, index) = index_at(dir.path(), 0);
    let aborted = vec![
        txn(0, 0, 10, 2),
        txn(1, 5, 15, 16),
        txn(2, 18, 35, 25),
        txn(3, 32, 50, 40),
    ];
    for entry in &aborted {
        index.append(*entry).unwrap();
    }
    index.truncate_to(51).unwrap();
    assert_eq!(index.collect(0, 100).unwrap().aborted, aborted);
    index.truncate_to(50).unwrap();
    assert_eq!(index.collect(0, 100).unwrap().aborted, aborted[..3]);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 3 * 34);
    // The bound follows the cut: 50 may be appended again, 35 may not.
    assert!(matches!(
        index.append(txn(9, 30, 35, 36)),
        Err(Error::InvalidArgument { .. })
    ));
    index.append(txn(3, 32, 50, 40)).unwrap();
    index.reset().unwrap();
    assert_eq!(
        index.collect(0, 100).unwrap(),
        TxnIndexSearchResult::default()
    );
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    index.append(txn(0, 0, 1, 2)).unwrap();
    assert_eq!(index.entries(), 1);
}

/// Kafka's `testLastOffsetMustIncrease` and `testLastOffsetCannotDecrease`, also across a
/// reopen (Kafka forgets the bound there; partlog reads it from the last entry).
#[test]
fn txn_index_last_offset_must_increase() {
    let dir = tempfile::tempdir().unwrap();
    let (path, index) = index_at(dir.path(), 0);
    index.append(txn(1, 5, 15, 13)).unwrap();
    for last in [15, 14] {
        assert!(matches!(
            index.append(txn(0, 0, last, 11)),
            Err(Error::InvalidArgument { .. })
        ));
    }
    drop(index);
    let index = TransactionIndex::open(&os(), &path, 0, true).unwrap();
    assert!(matches!(
        index.append(txn(0, 0, 15, 11)),
        Err(Error::InvalidArgument { .. })
    ));
    index.append(txn(0, 0, 16, 17)).unwrap();
    assert_eq!(index.entries(), 2);
}

/// Kafka's `testSanityCheck`, and partlog's stricter rules (order, torn tail, version).
#[test]
fn txn_index_sanity_check_finds_bad_entries() {
    let dir = tempfile::tempdir().unwrap();
    let path = segment_file_path(dir.path(), 0, SegmentFileKind::TxnIndex);
    let write = |entries: &[AbortedTxn], extra: &[u8]| {
        let mut bytes: Vec<u8> = entries.iter().flat_map(|t| t.to_bytes()).collect();
        bytes.extend_from_slice(extra);
        std::fs::write(&path, bytes).unwrap();
        TransactionIndex::open(&os(), &path, 20, false).unwrap()
    };
    let good = [txn(0, 20, 25, 26), txn(1, 22, 30, 31)];
    write(&good, &[]).sanity_check().unwrap();

    // Kafka's case: an entry below the segment's base (20).
    let below = write(&[txn(0, 0, 10, 11), txn(1, 5, 15, 13)], &[]);
    assert!(matches!(
        below.sanity_check(),
        Err(Error::Corrupt {
            position: 0,
            what: Corruption::OffsetOrder {
                offset: 10,
                bound: 20
            },
            ..
        })
    ));
    let unordered = write(&[txn(0, 20, 30, 31), txn(1, 22, 30, 31)], &[]);
    assert!(matches!(
        unordered.sanity_check(),
        Err(Error::Corrupt {
            position: 34,
            what: Corruption::OffsetOrder {
                offset: 30,
                bound: 31
            },
            ..
        })
    ));
    let torn = write(&good, &[0, 0, 0]);
    assert!(matches!(
        torn.sanity_check(),
        Err(Error::Corrupt {
            position: 68,
            what: Corruption::Truncated { .. },
            ..
        })
    ));
    // Reads ignore the torn tail, as Kafka's do.
    assert_eq!(torn.all().unwrap(), good);
    let mut other_version = good[1].to_bytes();
    other_version[0] = 0x7f;
    let versioned = write(&good[..1], &other_version);
    assert!(matches!(
        versioned.sanity_check(),
        Err(Error::Corrupt {
            position: 34,
            what: Corruption::BadHeader(_),
            ..
        })
    ));
    assert!(versioned.collect(0, 100).is_err());
}

#[test]
fn txn_index_rejects_an_entry_below_the_base() {
    let dir = tempfile::tempdir().unwrap();
    let (_, index) = index_at(dir.path(), 100);
    assert!(matches!(
        index.append(txn(1, 90, 99, 100)),
        Err(Error::InvalidArgument { .. })
    ));
    index.append(txn(1, 90, 100, 101)).unwrap();
}

/// Kafka creates the file on the first entry; a read-only index never creates one.
#[test]
fn txn_index_file_is_created_lazily() {
    let dir = tempfile::tempdir().unwrap();
    let path = segment_file_path(dir.path(), 0, SegmentFileKind::TxnIndex);
    let read_only = TransactionIndex::open(&os(), &path, 0, false).unwrap();
    assert_eq!(
        read_only.collect(0, 10).unwrap(),
        TxnIndexSearchResult::default()
    );
    assert!(read_only.append(txn(1, 0, 1, 2)).is_err());
    assert!(!path.exists());
    let (_, index) = index_at(dir.path(), 0);
    index.truncate_to(0).unwrap();
    index.reset().unwrap();
    index.flush().unwrap();
    assert!(!path.exists() && !index.file_exists());
    index.append(txn(1, 0, 1, 2)).unwrap();
    assert!(path.exists() && index.file_exists());
    index.flush().unwrap();
}

/// Kafka's `testRenameIndex`.
#[test]
fn txn_index_rename_and_delete_follow_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let (path, index) = index_at(dir.path(), 0);
    index.append(txn(0, 0, 10, 11)).unwrap();
    let renamed = dir.path().join("00000000000000000000.txnindex.deleted");
    index.rename_to(&renamed).unwrap();
    assert!(!path.exists() && renamed.exists());
    index.append(txn(1, 5, 15, 16)).unwrap();
    assert_eq!(index.path(), renamed);
    let reopened = TransactionIndex::open(&os(), &renamed, 0, false).unwrap();
    assert_eq!(reopened.all().unwrap().len(), 2);
    assert!(index.delete_if_exists().unwrap());
    assert!(!renamed.exists());
    assert!(!index.delete_if_exists().unwrap());
}

fn config() -> SegmentConfig {
    SegmentConfig {
        segment_bytes: 1 << 20,
        segment_index_bytes: 1 << 16,
        index_interval_bytes: 256,
        ..SegmentConfig::default()
    }
}

fn batch(base: i64, count: i64) -> Vec<u8> {
    let mut builder = BatchBuilder::new(Compression::None).base_offset(base);
    for i in 0..count {
        builder.push_parts::<&str>(1_700_000_000_000 + i, Some(b"k"), Some(b"v"), &[]);
    }
    builder.build().unwrap()
}

#[test]
fn txn_index_segment_keeps_its_file_across_reopen_and_truncation() {
    let dir = tempfile::tempdir().unwrap();
    let storage = os();
    let path = segment_file_path(dir.path(), 10, SegmentFileKind::TxnIndex);
    let segment = Segment::create(&storage, dir.path(), 10, config(), 0).unwrap();
    assert!(!path.exists());
    assert_eq!(segment.file_paths().len(), 3);
    segment.append(&batch(10, 5)).unwrap();
    segment.append(&batch(15, 5)).unwrap();
    segment.append_aborted_txn(txn(7, 10, 14, 15)).unwrap();
    segment.append_aborted_txn(txn(8, 12, 19, 20)).unwrap();
    assert!(segment.append_aborted_txn(txn(8, 12, 19, 20)).is_err());
    segment.txn_index_sanity_check().unwrap();
    assert!(segment.file_paths().contains(&path));
    segment.seal().unwrap();
    segment.flush_sealed().unwrap();
    drop(segment);

    for role in [SegmentRole::ReadOnly, SegmentRole::Sealed] {
        let segment = Segment::open(&storage, dir.path(), 10, config(), role, 0).unwrap();
        let found = segment.collect_aborted_txns(0, 100).unwrap();
        assert_eq!(found.aborted, vec![txn(7, 10, 14, 15), txn(8, 12, 19, 20)]);
        assert!(!found.complete);
    }
    let segment =
        Segment::open(&storage, dir.path(), 10, config(), SegmentRole::Sealed, 0).unwrap();
    segment.truncate_to(15, 0).unwrap();
    assert_eq!(
        segment.collect_aborted_txns(0, 100).unwrap().aborted,
        vec![txn(7, 10, 14, 15)]
    );
    segment.truncate_to(10, 0).unwrap();
    assert_eq!(segment.txn_index().entries(), 0);
}

/// A stale `.txnindex` left where a new segment is created (its `.log` is gone) is not the new
/// segment's: creating the segment removes it.
#[test]
fn txn_index_segment_create_drops_a_stale_file() {
    let dir = tempfile::tempdir().unwrap();
    let storage = os();
    let path = segment_file_path(dir.path(), 0, SegmentFileKind::TxnIndex);
    std::fs::write(&path, txn(1, 0, 5, 6).to_bytes()).unwrap();
    let segment = Segment::create(&storage, dir.path(), 0, config(), 0).unwrap();
    assert!(!path.exists());
    assert_eq!(
        segment.collect_aborted_txns(0, 100).unwrap().aborted,
        vec![]
    );
}

/// A read-only index of a log another process writes sees the file appear and grow only when
/// refreshed.
#[test]
fn txn_index_read_only_refresh_follows_a_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = segment_file_path(dir.path(), 0, SegmentFileKind::TxnIndex);
    let reader = TransactionIndex::open(&os(), &path, 0, false).unwrap();
    reader.refresh().unwrap();
    assert!(!reader.file_exists());
    let writer = TransactionIndex::open(&os(), &path, 0, true).unwrap();
    writer.append(txn(1, 0, 3, 4)).unwrap();
    assert_eq!(reader.all().unwrap(), vec![]);
    reader.refresh().unwrap();
    assert_eq!(reader.all().unwrap(), vec![txn(1, 0, 3, 4)]);
    writer.append(txn(2, 4, 6, 7)).unwrap();
    reader.refresh().unwrap();
    assert_eq!(reader.last_offset(), Some(6));
    writer.truncate_to(5).unwrap();
    reader.refresh().unwrap();
    assert_eq!(reader.all().unwrap(), vec![txn(1, 0, 3, 4)]);
}

/// Kafka's `testPositionSetCorrectlyWhenOpened`: appends after a reopen go after the entries
/// already there.
#[test]
fn txn_index_appends_after_a_reopen_follow_the_existing_entries() {
    let dir = tempfile::tempdir().unwrap();
    let (path, index) = index_at(dir.path(), 0);
    let mut aborted = vec![
        txn(0, 0, 10, 11),
        txn(1, 5, 15, 13),
        txn(2, 18, 35, 25),
        txn(3, 32, 50, 40),
    ];
    for entry in &aborted {
        index.append(*entry).unwrap();
    }
    drop(index);
    let reopened = TransactionIndex::open(&os(), &path, 0, true).unwrap();
    reopened.append(txn(3, 50, 60, 55)).unwrap();
    aborted.push(txn(3, 50, 60, 55));
    assert_eq!(reopened.all().unwrap(), aborted);
}
