//! The durable replacement of a small whole file (`partlog.properties`, `leader-epoch-checkpoint`):
//! a temporary file, fsynced, renamed over the old one, then the directory fsynced. A crash at
//! any point leaves the old file or the new one under the final name, never a torn one
//! (ARCHITECTURE.md §6); a leftover temporary file is overwritten by the next write.

use std::path::Path;

use crate::error::Result;
use crate::storage::{OpenMode, Storage};

/// Writes `bytes` as `dir/name` durably, through the temporary file `dir/temp_name`. On return
/// the new content survives a crash; on an error the old file, if any, is still in place.
pub(crate) fn replace_file_durably(
    storage: &dyn Storage,
    dir: &Path,
    temp_name: &str,
    name: &str,
    bytes: &[u8],
) -> Result<()> {
    let temp = dir.join(temp_name);
    let file = storage.open(&temp, OpenMode::Create)?;
    let written = file
        .set_len(0)
        .and_then(|()| file.write_all_at(bytes, 0))
        .and_then(|()| file.sync_all());
    drop(file);
    if let Err(error) = written {
        if let Err(remove_error) = storage.remove(&temp) {
            log::warn!("{}: {remove_error}", temp.display());
        }
        return Err(error);
    }
    storage.rename(&temp, &dir.join(name))?;
    storage.sync_dir(dir)
}
