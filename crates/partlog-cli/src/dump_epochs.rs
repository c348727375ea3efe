//! `partlog dump --leader-epochs`: the entries of the directory's `leader-epoch-checkpoint`
//! (FORMAT.md §12), which leader epoch started at which offset.

use std::io::Write;
use std::path::Path;

use partlog::unstable::OsStorage;
use partlog::unstable::leader_epoch::{
    LEADER_EPOCH_CHECKPOINT_FILE_NAME, LEADER_EPOCH_CHECKPOINT_VERSION, read_checkpoint,
};

/// Prints the file's entries, oldest first, or that there is none. Returns how many files were
/// bad (0 or 1); a bad one is named with what is wrong.
pub fn dump_leader_epochs(out: &mut impl Write, dir: &Path) -> Result<u64, crate::CliError> {
    let write = |e: std::io::Error| crate::CliError::new(format!("cannot write: {e}"));
    let path = dir.join(LEADER_EPOCH_CHECKPOINT_FILE_NAME);
    match read_checkpoint(&OsStorage::new(), dir) {
        Ok(None) => {
            writeln!(out, "No {}", path.display()).map_err(write)?;
            Ok(0)
        }
        Ok(Some(entries)) => {
            writeln!(out, "Dumping {}", path.display()).map_err(write)?;
            writeln!(
                out,
                "version: {LEADER_EPOCH_CHECKPOINT_VERSION} entries: {}",
                entries.len()
            )
            .map_err(write)?;
            for entry in entries {
                writeln!(
                    out,
                    "leaderEpoch: {} startOffset: {}",
                    entry.epoch, entry.start_offset
                )
                .map_err(write)?;
            }
            Ok(0)
        }
        Err(error @ partlog::Error::Corrupt { .. }) => {
            writeln!(out, "Dumping {}", path.display()).map_err(write)?;
            writeln!(out, "Error: {error}").map_err(write)?;
            Ok(1)
        }
        Err(error) => Err(error.into()),
    }
}
