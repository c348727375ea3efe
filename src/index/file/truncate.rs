//! Truncation: an active index no one maps shrinks its file in place; a file that may be mapped
//! (now, or by a reader holding an old mapping) or is open read-only is never shrunk: the kept
//! entries go to a new file, `<name>.swap.deleted`, which is synced and renamed over the old one.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::Result;
use crate::storage::{OpenMode, Storage, StorageFile};

use super::search::partition_point;
use super::{
    BackingFile, Entry, IndexFile, MAX_ENTRY_SIZE, MapState, View, encoded, entry_position,
};

/// The suffix of the temporary file a truncation writes before renaming it over the index.
///
/// Not Kafka's `.swap`: Kafka's log loader (checked in 3.6 and 4.x: `LogLoader.load`, "rename
/// all swap files") renames every leftover `*.swap` file into place, so a replacement torn by a
/// crash would become a live index that a broker trusts after a hand-off. Every name ending in
/// `.deleted` is instead removed unread by Kafka's loader, which is exactly right for a
/// leftover; partlog's loader must delete it too.
pub(crate) const TRUNCATION_TEMP_SUFFIX: &str = ".swap.deleted";

/// The temporary path a truncation, or a sealed segment's index rebuild, writes before renaming
/// it over `path`.
pub(crate) fn truncation_temp_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(TRUNCATION_TEMP_SUFFIX);
    PathBuf::from(name)
}

impl<E: Entry> IndexFile<E> {
    /// Keeps the first `keep` entries (a no-op if there are not more).
    pub(crate) fn truncate_to_entries(&self, keep: usize) -> Result<()> {
        let _mutation = self.mutation.lock();
        self.truncate_locked(keep)
    }

    /// Removes every entry whose key is >= `target`; keys must be non-decreasing.
    pub(crate) fn truncate_from_key(&self, key: impl Fn(&E) -> i64, target: i64) -> Result<()> {
        let _mutation = self.mutation.lock();
        let keep = {
            let source = self.source(false);
            partition_point(source.len(), |n| source.get(n).map(|e| key(&e)), target)?
        };
        self.truncate_locked(keep)
    }

    /// Truncation with the mutation lock held.
    fn truncate_locked(&self, keep: usize) -> Result<()> {
        let (path, backing, count, active) = {
            let state = self.state.read();
            (
                Arc::clone(&state.path),
                state.view.backing().cloned(),
                state.view.len(),
                matches!(state.view, View::Active { .. }),
            )
        };
        if keep >= count {
            return Ok(());
        }
        let Some(backing) = backing else {
            // No file: the entries in memory are all there is.
            if let View::InMemory { entries, .. } = &mut self.state.write().view {
                entries.truncate(keep);
            }
            return Ok(());
        };
        if active && !backing.mapped {
            // Shrink first, then unpublish: if the shrink fails, the file still holds no entry
            // the mirror lacks. Readers meanwhile read the mirror, whose memory stays valid.
            // Entries still pending only leave the mirror; the file never had them.
            let written = match &self.state.read().view {
                View::Active { written, .. } => *written,
                _ => count,
            };
            if keep < written {
                backing.file.set_len(entry_position::<E>(keep))?;
            }
            if let View::Active {
                entries, written, ..
            } = &mut self.state.write().view
            {
                entries.truncate(keep);
                *written = (*written).min(keep);
            }
            return Ok(());
        }
        // The file may be mapped (now or by a reader that still holds an old mapping), or it is
        // open read-only: write the kept entries to a new file and rename it over the old one.
        let kept = {
            let source = self.source(false);
            let mut kept = Vec::with_capacity(keep.saturating_mul(E::SIZE));
            let mut buf = [0u8; MAX_ENTRY_SIZE];
            for n in 0..keep {
                kept.extend_from_slice(encoded(&source.get(n)?, &mut buf));
            }
            kept
        };
        let writable = active || backing.writable;
        let file = replace_file(&*backing.storage, &path, &kept, writable)?;
        let replaced = BackingFile {
            file,
            writable,
            mapped: false,
            ..backing
        };
        let old_view = {
            let mut state = self.state.write();
            match &mut state.view {
                View::Active {
                    entries,
                    backing,
                    written,
                } => {
                    // The new file holds every kept entry.
                    entries.truncate(keep);
                    *backing = replaced;
                    *written = keep;
                    None
                }
                View::Sealed { .. } => {
                    let last = keep
                        .checked_sub(1)
                        .and_then(|n| kept.get(entry_position::<E>(n) as usize..))
                        .and_then(E::decode);
                    Some(std::mem::replace(
                        &mut state.view,
                        View::Sealed {
                            backing: replaced,
                            entries: keep,
                            last,
                            mapping: MapState::NotYet,
                        },
                    ))
                }
                View::InMemory { .. } => None,
            }
        };
        // Drop the old mapping outside the lock.
        drop(old_view);
        Ok(())
    }

    /// Empties the index.
    pub(crate) fn reset(&self) -> Result<()> {
        self.truncate_to_entries(0)
    }
}

/// Writes `bytes` to a new file, makes it durable and renames it over `path`; returns a handle
/// to the new file at `path`.
fn replace_file(
    storage: &dyn Storage,
    path: &Path,
    bytes: &[u8],
    writable: bool,
) -> Result<Arc<dyn StorageFile>> {
    let temp = truncation_temp_path(path);
    if storage.exists(&temp)? {
        // A leftover of a crashed truncation: garbage by construction.
        storage.remove(&temp)?;
    }
    let written = storage
        .open(&temp, OpenMode::CreateNew)
        .and_then(|file| {
            file.write_all_at(bytes, 0)?;
            file.sync_data()
        })
        .and_then(|()| storage.rename(&temp, path));
    if let Err(e) = written {
        let _ = storage.remove(&temp);
        return Err(e);
    }
    // The rename must survive a crash before the log reports the truncation done (ARCHITECTURE.md
    // §6).
    storage.sync_dir(parent_dir(path))?;
    let mode = if writable {
        OpenMode::ReadWrite
    } else {
        OpenMode::Read
    };
    storage.open(path, mode)
}

/// The directory holding `path` ("." for a bare file name).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_path_ends_in_a_suffix_every_loader_deletes() {
        let temp = truncation_temp_path(Path::new("/d/00000000000000000042.index"));
        assert_eq!(
            temp,
            PathBuf::from("/d/00000000000000000042.index.swap.deleted")
        );
        assert!(temp.to_string_lossy().ends_with(".deleted"));
        assert_eq!(parent_dir(Path::new("a.index")), Path::new("."));
        assert_eq!(parent_dir(Path::new("/d/a.index")), Path::new("/d"));
    }
}
