//! The checks of Kafka's producer-state files: each segment's `.txnindex` (its sanity check,
//! every entry against the ABORT markers of its `.log`, and every ABORT marker against the
//! entries) and every `.snapshot` (version, CRC and entry count; FORMAT.md §9 and §10).

use std::path::Path;
use std::sync::Arc;

use super::walk::SegmentWalk;
use super::{Finding, Severity};
use crate::error::{Error, Result};
use crate::log::producer_snapshot::{list_snapshots, read_snapshot, snapshot_path};
use crate::segment::{
    SWAP_SUFFIX, SegmentFileKind, TransactionIndex, segment_file_path, transient_segment_file_path,
};
use crate::storage::Storage;

/// Checks the `.txnindex` of every walked segment against its `.log`, and every `.snapshot`.
///
/// Every entry must name an ABORT marker of its producer in the segment, and every ABORT marker
/// whose transaction's data the walk read must have its entry (a missing file included): a
/// `read_committed` read without it returns the aborted records. A problem in a segment at
/// index `first_rescanned` or later is crash state (the next writable open recovers that
/// segment, which rebuilds the index), and corruption elsewhere: the index is derived from the
/// `.log`, and a repair rebuilds it.
///
/// A segment in `txn_index_swaps` is checked against its `<base>.txnindex.swap`, which a
/// compaction swap interrupted after renaming the cleaned `.log` in left for the next writable
/// open to rename to `<base>.txnindex` (Kafka's loader renames a leftover `.swap` index in the
/// same way): that file, not the `.txnindex` a crash left missing, is the segment's index.
///
/// A bad snapshot is crash state unless the last close was clean (`clean_shutdown`): a roll
/// writes its snapshot in place and the flusher fsyncs it later, as Kafka's roll does, so a
/// crash can leave one torn or empty; close syncs them all. Either way the next writable open
/// deletes it and rebuilds the state from an older snapshot or the log.
pub(super) fn check_producer_state_files(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    walks: &[SegmentWalk],
    txn_index_swaps: &[i64],
    first_rescanned: usize,
    clean_shutdown: bool,
    findings: &mut Vec<Finding>,
) -> Result<()> {
    for (i, walk) in walks.iter().enumerate() {
        let base = walk.summary.base_offset;
        // Findings name the `.txnindex` in either case: a repair rebuilds it under that name
        // (after its open has renamed the `.swap` in).
        let path = segment_file_path(dir, base, SegmentFileKind::TxnIndex);
        let read_from = if txn_index_swaps.binary_search(&base).is_ok() {
            transient_segment_file_path(dir, base, SegmentFileKind::TxnIndex, SWAP_SUFFIX)
        } else {
            path.clone()
        };
        let (severity, why) = if i >= first_rescanned {
            (
                Severity::CrashState,
                "the next writable open recovers this segment, which rebuilds its .txnindex",
            )
        } else {
            (
                Severity::Corruption,
                "derived data: a repair (partlog verify --repair) rebuilds it from the log \
                 without changing the .log",
            )
        };
        for (position, what) in txn_index_problems(storage, &read_from, walk)? {
            let what = if read_from == path {
                what
            } else {
                format!("{what} (read from {})", read_from.display())
            };
            findings.push(Finding {
                severity,
                file: path.clone(),
                position,
                what: format!("{what}; {why}"),
            });
        }
    }
    for offset in list_snapshots(&**storage, dir)? {
        let path = snapshot_path(dir, offset);
        match read_snapshot(&**storage, &path) {
            Ok(_) => {}
            Err(Error::Corrupt { position, what, .. }) => findings.push(Finding {
                severity: if clean_shutdown {
                    Severity::Corruption
                } else {
                    Severity::CrashState
                },
                file: path,
                position: Some(position),
                what: format!(
                    "producer snapshot: {what}; the next writable open deletes it and rebuilds \
                     the producer state from an older snapshot or the log"
                ),
            }),
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

/// What is wrong with one segment's `.txnindex`: its sanity check, each entry against the
/// ABORT markers of the `.log`, then each aborted transaction the walk read against the entries.
fn txn_index_problems(
    storage: &Arc<dyn Storage>,
    path: &Path,
    walk: &SegmentWalk,
) -> Result<Vec<(Option<u64>, String)>> {
    let mut problems = Vec::new();
    let entries = if storage.exists(path)? {
        let index = TransactionIndex::open(storage, path, walk.summary.base_offset, false)?;
        match index.sanity_check() {
            Ok(()) => {}
            Err(Error::Corrupt { position, what, .. }) => {
                problems.push((Some(position), format!("aborted-transaction index: {what}")));
                return Ok(problems);
            }
            Err(error) => return Err(error),
        }
        index.all()?
    } else {
        Vec::new()
    };
    let aborts = &walk.abort_markers;
    let size = crate::segment::AbortedTxn::SIZE as u64;
    for (n, txn) in entries.iter().enumerate() {
        let position = Some(n as u64 * size);
        match aborts.get(&txn.last_offset) {
            Some(&pid) if pid == txn.producer_id => {}
            Some(&pid) => problems.push((
                position,
                format!(
                    "the aborted transaction of producer {} ends at {}, but the ABORT marker \
                     there is producer {pid}'s",
                    txn.producer_id, txn.last_offset
                ),
            )),
            None => problems.push((
                position,
                format!(
                    "the aborted transaction of producer {} ends at {}, where the .log holds no \
                     ABORT marker",
                    txn.producer_id, txn.last_offset
                ),
            )),
        }
        if txn.first_offset > txn.last_offset {
            problems.push((
                position,
                format!(
                    "the aborted transaction of producer {} starts at {}, after its marker at {}",
                    txn.producer_id, txn.first_offset, txn.last_offset
                ),
            ));
        }
    }
    let missing_file = entries.is_empty() && !storage.exists(path)?;
    for seen in &walk.aborts_seen {
        let listed = entries
            .iter()
            .any(|t| t.producer_id == seen.producer_id && t.last_offset == seen.marker_offset);
        if !listed {
            problems.push((
                None,
                format!(
                    "{}: the ABORT marker of producer {} at offset {} (its transaction began at \
                     {}) has no entry, so a read_committed read returns the aborted records",
                    if missing_file {
                        "missing"
                    } else {
                        "an entry is missing"
                    },
                    seen.producer_id,
                    seen.marker_offset,
                    seen.first_offset
                ),
            ));
        }
    }
    Ok(problems)
}
