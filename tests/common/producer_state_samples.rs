//! Producer-state files to hand to Kafka's DumpLogSegments: snapshot entries and aborted
//! transactions that exercise every field, written with partlog's codecs. Included by path by
//! tests/kafka_tools.rs (the values DumpLogSegments prints) and by the tool's
//! crates/partlog-cli/tests/cli_dump_kafka.rs (`partlog dump --producer-state` prints them as it
//! does).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use partlog::unstable::producer_snapshot::SnapshotEntry;
use partlog::unstable::{
    AbortedTxn, OsStorage, SegmentFileKind, Storage, TransactionIndex, segment_file_path,
};

pub fn os() -> Arc<dyn Storage> {
    Arc::new(OsStorage::new())
}

/// Entries that exercise every field: an open transaction, a coordinator epoch, sequences
/// that wrap inside the batch, no batch at all (after a marker), extreme values.
pub fn snapshot_entries() -> Vec<SnapshotEntry> {
    vec![
        SnapshotEntry {
            producer_id: 0,
            producer_epoch: 0,
            last_sequence: 4,
            last_offset: 10,
            offset_delta: 4,
            timestamp: 1_767_225_614_000,
            coordinator_epoch: -1,
            current_txn_first_offset: -1,
        },
        SnapshotEntry {
            producer_id: 6,
            producer_epoch: 2,
            last_sequence: 9,
            last_offset: 2020,
            offset_delta: 20,
            timestamp: 2000,
            coordinator_epoch: 7,
            current_txn_first_offset: 2000,
        },
        SnapshotEntry {
            producer_id: 1000,
            producer_epoch: 1,
            last_sequence: -1,
            last_offset: 30,
            offset_delta: 0,
            timestamp: -1,
            coordinator_epoch: 3,
            current_txn_first_offset: -1,
        },
        SnapshotEntry {
            producer_id: i64::MAX,
            producer_epoch: i16::MAX,
            last_sequence: i32::MAX,
            last_offset: i64::MAX - 1,
            offset_delta: 0,
            timestamp: i64::MAX,
            coordinator_epoch: i32::MAX,
            current_txn_first_offset: i64::MAX - 5,
        },
    ]
}

pub fn aborted_txns() -> Vec<AbortedTxn> {
    vec![
        AbortedTxn {
            producer_id: 1000,
            first_offset: 100,
            last_offset: 106,
            last_stable_offset: 100,
        },
        AbortedTxn {
            producer_id: 1,
            first_offset: 15,
            last_offset: 117,
            last_stable_offset: 118,
        },
        AbortedTxn {
            producer_id: i64::MAX,
            first_offset: 0,
            last_offset: i64::MAX,
            last_stable_offset: i64::MAX,
        },
    ]
}

pub fn write_txn_index(dir: &Path, base: i64) -> PathBuf {
    let path = segment_file_path(dir, base, SegmentFileKind::TxnIndex);
    let index = TransactionIndex::open(&os(), &path, base, true).unwrap();
    for txn in aborted_txns() {
        index.append(txn).unwrap();
    }
    index.flush().unwrap();
    path
}
