//! The checks of Kafka's producer-state files: each segment's `.txnindex` (its sanity check,
//! and every entry against the ABORT markers of its `.log`) and every `.snapshot` (version, CRC
//! and entry count; FORMAT.md §9 and §10).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use super::{Finding, Severity};
use crate::error::{Error, Result};
use crate::format::{BatchView, ControlRecordType, control_record_type};
use crate::log::producer_state::snapshot_file::{list_snapshots, read_snapshot, snapshot_path};
use crate::segment::{BatchWalker, SegmentFileKind, Step, TransactionIndex, segment_file_path};
use crate::storage::{OpenMode, Storage};

/// Checks the `.txnindex` of every segment in `bases` that has one, and every `.snapshot`.
///
/// A `.txnindex` problem in a segment at index `first_rescanned` or later is crash state (the
/// next writable open recovers that segment, which rebuilds the index), and corruption
/// elsewhere. A bad snapshot is crash state unless the last close was clean (`clean_shutdown`):
/// a roll writes its snapshot in place and the flusher fsyncs it later, as Kafka's roll does, so
/// a crash can leave one torn or empty; close syncs them all. Either way the next writable open
/// deletes it and rebuilds the state from an older snapshot or the log.
pub(super) fn check_producer_state_files(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    bases: &[i64],
    first_rescanned: usize,
    clean_shutdown: bool,
    findings: &mut Vec<Finding>,
) -> Result<()> {
    for (i, &base) in bases.iter().enumerate() {
        let path = segment_file_path(dir, base, SegmentFileKind::TxnIndex);
        if !storage.exists(&path)? {
            continue;
        }
        let (severity, why) = if i >= first_rescanned {
            (
                Severity::CrashState,
                "the next writable open recovers this segment, which rebuilds its .txnindex",
            )
        } else {
            (
                Severity::Corruption,
                "delete the .txnindex and reopen with recovery to rebuild it",
            )
        };
        for (position, what) in txn_index_problems(storage, dir, base, &path)? {
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

/// What is wrong with one `.txnindex`: its sanity check, then each entry against the `.log`.
fn txn_index_problems(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    base: i64,
    path: &Path,
) -> Result<Vec<(Option<u64>, String)>> {
    let index = TransactionIndex::open(storage, path, base, false)?;
    let mut problems = Vec::new();
    match index.sanity_check() {
        Ok(()) => {}
        Err(Error::Corrupt { position, what, .. }) => {
            problems.push((Some(position), format!("aborted-transaction index: {what}")));
            return Ok(problems);
        }
        Err(error) => return Err(error),
    }
    let entries = index.all()?;
    if entries.is_empty() {
        return Ok(problems);
    }
    let aborts = abort_markers(storage, dir, base)?;
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
    Ok(problems)
}

/// The ABORT markers of the segment's `.log`: offset to producer id. Stops at the first bytes
/// that are not a valid batch (the segment walk reports those).
fn abort_markers(storage: &Arc<dyn Storage>, dir: &Path, base: i64) -> Result<HashMap<i64, i64>> {
    let log_path = segment_file_path(dir, base, SegmentFileKind::Log);
    let file = storage.open(&log_path, OpenMode::Read)?;
    let len = file.len()?;
    let mut walker = BatchWalker::new(&file, &log_path, len);
    let mut aborts = HashMap::new();
    let mut position = 0u64;
    let mut scratch = Vec::new();
    loop {
        let frame = match walker.frame_at(position) {
            Ok(Step::Batch(frame)) => frame,
            Ok(_) | Err(Error::Corrupt { .. }) => break,
            Err(error) => return Err(error),
        };
        position += frame.total_size;
        if frame.magic != 2 {
            continue;
        }
        let Ok(view) = BatchView::new(walker.batch_bytes(&frame)?) else {
            break;
        };
        if !view.header().is_control() {
            continue;
        }
        let Ok(mut records) = view.records(&mut scratch) else {
            continue;
        };
        if let Some(Ok(record)) = records.next()
            && matches!(control_record_type(&record), Ok(ControlRecordType::Abort))
        {
            aborts.insert(view.base_offset(), view.header().producer_id);
        }
    }
    Ok(aborts)
}
