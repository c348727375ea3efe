//! `partlog dump --producer-state`: every `.txnindex` and `.snapshot` entry of a directory, line
//! for line in the words of Kafka's `DumpLogSegments`, so that the two outputs compare.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use partlog::unstable::producer_snapshot::{
    SnapshotEntry, list_snapshots, read_snapshot, snapshot_path,
};
use partlog::unstable::{
    OsStorage, SegmentFileKind, Storage, TransactionIndex, list_segment_bases, segment_file_path,
};

/// Prints the `.txnindex` of every segment that has one, then every `.snapshot`, oldest first.
/// Returns how many files were bad; each is named with what is wrong, and the dump goes on.
pub fn dump_producer_state(out: &mut impl Write, dir: &Path) -> Result<u64, crate::CliError> {
    let storage: Arc<dyn Storage> = Arc::new(OsStorage::new());
    let write = |e: std::io::Error| crate::CliError::new(format!("cannot write: {e}"));
    let mut bad = 0u64;
    for base in list_segment_bases(&*storage, dir)? {
        let path = segment_file_path(dir, base, SegmentFileKind::TxnIndex);
        if !storage.exists(&path)? {
            continue;
        }
        writeln!(out, "Dumping {}", path.display()).map_err(write)?;
        let index = TransactionIndex::open(&storage, &path, base, false)?;
        let checked = index.sanity_check().and_then(|()| index.all());
        match checked {
            Ok(entries) => {
                for txn in entries {
                    writeln!(
                        out,
                        "version: 0 producerId: {} firstOffset: {} lastOffset: {} lastStableOffset: {}",
                        txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset
                    )
                    .map_err(write)?;
                }
            }
            Err(error) => {
                bad += 1;
                writeln!(out, "Error: {error}").map_err(write)?;
            }
        }
    }
    for offset in list_snapshots(&*storage, dir)? {
        let path = snapshot_path(dir, offset);
        writeln!(out, "Dumping {}", path.display()).map_err(write)?;
        match read_snapshot(&*storage, &path) {
            Ok(entries) => {
                for entry in entries {
                    writeln!(out, "{}", snapshot_line(&entry)).map_err(write)?;
                }
            }
            Err(error) => {
                bad += 1;
                writeln!(out, "Error: {error}").map_err(write)?;
            }
        }
    }
    Ok(bad)
}

/// One snapshot entry as `DumpLogSegments` prints it (Java's `OptionalLong` spelling included).
fn snapshot_line(entry: &SnapshotEntry) -> String {
    let txn = match entry.open_transaction() {
        Some(first) => format!("OptionalLong[{first}]"),
        None => "OptionalLong.empty".to_owned(),
    };
    format!(
        "producerId: {} producerEpoch: {} coordinatorEpoch: {} currentTxnFirstOffset: {txn} \
         lastTimestamp: {} firstSequence: {} lastSequence: {} lastOffset: {} offsetDelta: {} \
         timestamp: {}",
        entry.producer_id,
        entry.producer_epoch,
        entry.coordinator_epoch,
        entry.timestamp,
        entry.first_sequence(),
        entry.last_sequence,
        entry.last_offset,
        entry.offset_delta,
        entry.timestamp
    )
}
