//! Durable changes made of several storage calls, in the order that makes them survive a crash:
//! [`replace_file_durably`] (`partlog.properties`, `leader-epoch-checkpoint`) and
//! [`create_dir_durably`] (a log's directory, an upgrade's destination).

use std::path::Path;

use crate::error::Result;
use crate::storage::{OpenMode, Storage};

/// Writes `bytes` as `dir/name` durably, through the temporary file `dir/temp_name`: written,
/// fsynced, renamed over the old file, then the directory fsynced. A crash at any point leaves
/// the old file or the new one under the final name, never a torn one; a leftover temporary
/// file is overwritten by the next write. On return the new content survives a crash; on an
/// error the old file, if any, is still in place.
pub fn replace_file_durably(
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

/// Creates `dir` and any missing ancestors, and syncs the parent of each directory it created:
/// a new directory's name must survive a crash before anything inside it can.
pub fn create_dir_durably(storage: &dyn Storage, dir: &Path) -> Result<()> {
    let mut missing = Vec::new();
    let mut current = Some(dir);
    while let Some(path) = current.filter(|p| !p.as_os_str().is_empty()) {
        if storage.exists(path)? {
            break;
        }
        missing.push(path);
        current = path.parent();
    }
    if missing.is_empty() {
        return Ok(());
    }
    storage.create_dir_all(dir)?;
    for created in missing.iter().rev() {
        let parent = match created.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        storage.sync_dir(parent)?;
    }
    Ok(())
}
