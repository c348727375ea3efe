//! The check of `leader-epoch-checkpoint` (FORMAT.md §12): that it parses (version, count,
//! numbers, strictly increasing entries) and that no entry starts beyond the log end.

use std::path::Path;

use crate::error::{Error, Result};
use crate::log::leader_epoch::{LEADER_EPOCH_CHECKPOINT_FILE_NAME, read_checkpoint};
use crate::storage::Storage;

use super::{Finding, Severity};

/// Adds a finding for a `leader-epoch-checkpoint` in `dir` that does not parse, and for each
/// entry that starts beyond `log_end_offset`. A missing file is fine: a log that no leader ever
/// wrote has none.
///
/// A file that does not parse is corruption, because Kafka and partlog both replace it
/// atomically; the next writable open rebuilds it from the batches' epochs. An entry beyond the
/// log end is what a crash leaves when the epoch was recorded before its batch was durable; the
/// next writable open drops it. An entry starting exactly at the log end is normal: a leader
/// elected at that offset has not written yet.
pub(super) fn check_leader_epoch_checkpoint(
    storage: &dyn Storage,
    dir: &Path,
    log_end_offset: i64,
    findings: &mut Vec<Finding>,
) -> Result<()> {
    let file = dir.join(LEADER_EPOCH_CHECKPOINT_FILE_NAME);
    match read_checkpoint(storage, dir) {
        Ok(None) => {}
        Ok(Some(entries)) => {
            for entry in entries.iter().filter(|e| e.start_offset > log_end_offset) {
                findings.push(Finding {
                    severity: Severity::CrashState,
                    file: file.clone(),
                    position: None,
                    what: format!(
                        "leader epoch {} starts at offset {}, beyond the log end {log_end_offset}; \
                         the next writable open drops it",
                        entry.epoch, entry.start_offset
                    ),
                });
            }
        }
        Err(Error::Corrupt { position, what, .. }) => findings.push(Finding {
            severity: Severity::Corruption,
            file,
            position: Some(position),
            what: format!(
                "leader-epoch-checkpoint: {what}; the next writable open rebuilds it from the \
                 batches' leader epochs"
            ),
        }),
        Err(error) => return Err(error),
    }
    Ok(())
}
