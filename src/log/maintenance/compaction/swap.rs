//! Swapping cleaned segments in (Kafka's `replaceSegments`): `.cleaned` -> `.swap` -> `.log`
//! under the writer mutex and the snapshot lock, the old segments renamed `.deleted`; and
//! [`complete_swaps`], which finishes or discards what a crash left part-way at the next open.
//!
//! The order of renames and directory fsyncs here is what makes a crash leave each group either
//! wholly old or wholly new (the parent module's "Crash safety").

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::Result;
use crate::segment::{BatchWalker, Step};
use crate::segment::{
    CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX, SegmentFileKind, TransientSuffix,
    parse_segment_file_name, rename_segment_files, segment_file_path,
};
use crate::storage::{OpenMode, Storage};

use crate::log::Shared;
use crate::log::segments::snapshot::SegmentHandle;

use super::plan::Planned;
use super::transient_log_path;
use crate::log::files::remove_quietly;

impl Shared {
    /// Swaps `<base>.log.cleaned` in for the segments of `group`: renames it `.swap`, fsyncs
    /// the directory, renames every old segment's files `.deleted` and the `.swap` to `.log`,
    /// and fsyncs the directory again, all under the writer mutex. A `.swap` therefore exists
    /// only for segments that are still in the log: a truncation or retention (which take the
    /// writer mutex) can never delete a segment whose `.swap` a crash would then bring back.
    /// `false` when a segment of the group left the log meanwhile (a truncation or retention
    /// took it): the cleaned file is then removed.
    ///
    /// A `<base>.txnindex.cleaned` (the cleaned group's aborted transactions, written and
    /// fsynced before this call) joins the swap: it becomes `.txnindex.swap` right after the
    /// `.log` does, and `.txnindex` right after the `.log` does, so that [`complete_swaps`] can
    /// tell from the names alone which `.txnindex` is the new one.
    pub(super) fn swap_in(&self, group: &[Planned], truncations_at_start: u64) -> Result<bool> {
        let Some(first) = group.first() else {
            return Ok(false);
        };
        let base = first.handle.base_offset();
        let dir = &self.dir;
        let cleaned_path = transient_log_path(dir, base, CLEANED_SUFFIX);
        let swap_path = transient_log_path(dir, base, SWAP_SUFFIX);
        let txn_cleaned = transient_txn_index_path(dir, base, CLEANED_SUFFIX);
        let txn_swap = transient_txn_index_path(dir, base, SWAP_SUFFIX);
        let old_handles: Vec<Arc<SegmentHandle>> =
            group.iter().map(|p| Arc::clone(&p.handle)).collect();
        let mut writer = self.writer.lock();
        let list = self.view.segments().load();
        let still_there = list.handles().split_last().is_some_and(|(_, sealed)| {
            sealed
                .windows(old_handles.len())
                .any(|run| run.iter().zip(&old_handles).all(|(a, b)| Arc::ptr_eq(a, b)))
        });
        // A truncation may have cut (and refilled) a segment since it was read.
        if !still_there || self.view.truncations().sequence() != truncations_at_start {
            drop(writer);
            remove_quietly(&*self.storage, &cleaned_path);
            remove_quietly(&*self.storage, &txn_cleaned);
            return Ok(false);
        }
        self.storage.rename(&cleaned_path, &swap_path)?;
        // After the `.log`'s rename: a `.txnindex.swap` without a `.log.swap` then always means
        // the `.log` was swapped in.
        let has_txn_index = self.storage.exists(&txn_cleaned)?;
        if has_txn_index {
            self.storage.rename(&txn_cleaned, &txn_swap)?;
        }
        if let Err(error) = self.storage.sync_dir(dir) {
            // Whether the rename is durable is unknown: stop writing; reopening resolves it.
            self.durability.poison();
            return Err(error);
        }
        let new_handle = SegmentHandle::closed(base);
        let mut renamed: Vec<Vec<PathBuf>> = Vec::new();
        let replaced = self
            .view
            .segments()
            .replace(&old_handles, Arc::clone(&new_handle), || {
                // Oldest first; the `.swap` last: a crash keeps a prefix of these renames,
                // and open completes the swap from any of them.
                for handle in &old_handles {
                    renamed.push(rename_segment_files(
                        &*self.storage,
                        dir,
                        handle.base_offset(),
                        DELETED_SUFFIX,
                    )?);
                }
                self.storage.rename(
                    &swap_path,
                    &segment_file_path(dir, base, SegmentFileKind::Log),
                )?;
                if has_txn_index {
                    self.storage.rename(
                        &txn_swap,
                        &segment_file_path(dir, base, SegmentFileKind::TxnIndex),
                    )?;
                }
                Ok(())
            });
        let old_segments = match replaced {
            Ok(Some(old_segments)) => old_segments,
            Ok(None) => {
                // Checked above under the same writer mutex: nothing can have removed them.
                remove_quietly(&*self.storage, &swap_path);
                remove_quietly(&*self.storage, &txn_swap);
                self.storage.sync_dir(dir)?;
                return Ok(false);
            }
            Err(error) => {
                // The files may be half swapped while the snapshot still names the old
                // segments: stop writing; reopening completes the swap.
                log::error!(
                    "{}: swapping in the compacted segment {base} failed: {error}",
                    dir.display()
                );
                self.durability.poison();
                return Err(error);
            }
        };
        for (paths, segment) in renamed.into_iter().zip(old_segments) {
            writer.deletes.push(paths, segment);
        }
        if let Err(error) = self.storage.sync_dir(dir) {
            self.durability.poison();
            return Err(error);
        }
        drop(writer);
        // Unlinks outside the writer lock, as retention does.
        self.reap_unpinned();
        // The new segment has only its `.log`: opening it now builds its indexes (off the
        // writer mutex), so that they are on disk for Kafka's tools and the next open. They are
        // derived data, so a failure here only costs a rebuild later.
        match self.view.segments().pin(&new_handle) {
            Ok(Some(segment)) => {
                if let Err(error) = segment.flush() {
                    // A failed fsync: the kernel may have dropped pages of the segment.
                    return Err(self.poison_after_failed_sync(
                        &format!("syncing the compacted segment {base}"),
                        error,
                    ));
                }
            }
            Ok(None) => {}
            Err(error) => log::warn!(
                "{}: indexing the compacted segment {base} failed: {error}",
                dir.display()
            ),
        }
        Ok(true)
    }
}

/// Resolves what an interrupted compaction left in `dir`, as Kafka's log loader does: a
/// `.cleaned` file is deleted (the swap never began), and a `<base>.log.swap` replaces every
/// segment whose base lies in `[base, the swap's next offset)` (the old group: the cleaned
/// segment ends above the base of the group's last segment), and the segment at `base` in any
/// case; their
/// index files go with them, also those of a segment whose `.log` the swap had already renamed
/// (the new segment's offset and time indexes are rebuilt from its `.log` on first use).
///
/// The cleaned segment's `.txnindex` cannot be rebuilt from its `.log` alone, so it travels
/// with the swap (see `Shared::swap_in`): a `<base>.txnindex.swap` or `.txnindex.cleaned` next
/// to a `<base>.log.swap` becomes the new `<base>.txnindex`, and a `.txnindex.swap` whose
/// `.log.swap` is gone (the `.log` was swapped in, as the order of the renames guarantees, here
/// and in Kafka) is renamed in. Other index `.swap` files are deleted: partlog never writes them.
/// Returns whether anything changed (the directory is then fsynced).
///
/// `names` is a listing of `dir` taken by the caller (an open lists its directory once). A
/// completed `.log` swap renames and removes files, so the second pass then lists the
/// directory anew; otherwise `names` is still what the directory holds.
pub(crate) fn complete_swaps(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    names: &[String],
) -> Result<bool> {
    let mut changed = false;
    // Every base with a file of any kind: a crash keeps a prefix of a swap's renames, which can
    // take an old segment's `.log` to `.deleted` and leave its index files, which the cleaned
    // `.log` must not inherit.
    let mut segment_bases: Vec<i64> = names
        .iter()
        .filter_map(|name| parse_segment_file_name(name))
        .filter(|parsed| parsed.transient.is_none())
        .map(|parsed| parsed.base_offset)
        .collect();
    segment_bases.sort_unstable();
    segment_bases.dedup();
    let mut log_swaps: Vec<i64> = names
        .iter()
        .filter_map(|name| parse_segment_file_name(name))
        .filter(|p| p.transient == Some(TransientSuffix::Swap) && p.kind == SegmentFileKind::Log)
        .map(|parsed| parsed.base_offset)
        .collect();
    log_swaps.sort_unstable();
    for base in log_swaps {
        let path = transient_log_path(dir, base, SWAP_SUFFIX);
        let next_offset = swap_next_offset(storage, &path, base)?;
        let replaced: Vec<i64> = segment_bases
            .iter()
            .copied()
            .filter(|&old| old == base || (base..next_offset).contains(&old))
            .collect();
        for &old in &replaced {
            for kind in [
                SegmentFileKind::Log,
                SegmentFileKind::OffsetIndex,
                SegmentFileKind::TimeIndex,
                SegmentFileKind::TxnIndex,
            ] {
                let old_path = segment_file_path(dir, old, kind);
                if storage.exists(&old_path)? {
                    storage.remove(&old_path)?;
                }
            }
        }
        segment_bases.retain(|b| !replaced.contains(b));
        storage.rename(&path, &segment_file_path(dir, base, SegmentFileKind::Log))?;
        for suffix in [SWAP_SUFFIX, CLEANED_SUFFIX] {
            let new_txn_index = transient_txn_index_path(dir, base, suffix);
            if storage.exists(&new_txn_index)? {
                storage.rename(
                    &new_txn_index,
                    &segment_file_path(dir, base, SegmentFileKind::TxnIndex),
                )?;
                break;
            }
        }
        segment_bases.push(base);
        segment_bases.sort_unstable();
        log::info!(
            "{}: completed the compaction swap of the segments at {replaced:?} into one at {base}",
            dir.display()
        );
        changed = true;
    }
    let relisted;
    let names = if changed {
        relisted = storage.list(dir)?;
        &relisted[..]
    } else {
        names
    };
    for name in names {
        let Some(parsed) = parse_segment_file_name(name) else {
            continue;
        };
        let path = dir.join(name);
        match (parsed.transient, parsed.kind) {
            (Some(TransientSuffix::Cleaned), _) => {
                storage.remove(&path)?;
                changed = true;
            }
            (Some(TransientSuffix::Swap), SegmentFileKind::TxnIndex) => {
                storage.rename(
                    &path,
                    &segment_file_path(dir, parsed.base_offset, SegmentFileKind::TxnIndex),
                )?;
                changed = true;
            }
            (Some(TransientSuffix::Swap), _) => {
                storage.remove(&path)?;
                changed = true;
            }
            _ => {}
        }
    }
    if changed {
        storage.sync_dir(dir)?;
    }
    Ok(changed)
}

/// `<base>.txnindex<suffix>`: the cleaned segment's aborted-transaction index on its way in.
pub(super) fn transient_txn_index_path(dir: &Path, base_offset: i64, suffix: &str) -> PathBuf {
    crate::segment::transient_segment_file_path(dir, base_offset, SegmentFileKind::TxnIndex, suffix)
}

/// The offset after the last batch of a `.swap` file (its base when it has none). The file was
/// fsynced before its rename to `.swap`, so it holds whole batches.
fn swap_next_offset(storage: &Arc<dyn Storage>, path: &Path, base: i64) -> Result<i64> {
    let file = storage.open(path, OpenMode::Read)?;
    let len = file.len()?;
    let mut walker = BatchWalker::new(&file, path, len);
    let mut position = 0u64;
    let mut next_offset = base;
    while let Step::Batch(frame) = walker.frame_at(position)? {
        next_offset = next_offset.max(walker.summary(&frame)?.next_offset());
        position += frame.total_size;
    }
    Ok(next_offset)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{BatchBuilder, Compression};
    use crate::segment::segment_file_name;
    use crate::storage::OsStorage;

    fn os() -> Arc<dyn Storage> {
        Arc::new(OsStorage::new())
    }

    /// A `.log` whose one batch holds offsets `[base, base + count)`.
    fn log_bytes(base: i64, count: i64) -> Vec<u8> {
        let mut builder = BatchBuilder::new(Compression::None).base_offset(base);
        for i in 0..count {
            builder.push_parts::<&str>(1_700_000_000_000 + i, Some(b"k"), Some(b"v"), &[]);
        }
        builder.build().unwrap()
    }

    fn name(base: i64, kind: SegmentFileKind, suffix: &str) -> String {
        format!("{}{suffix}", segment_file_name(base, kind))
    }

    fn files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    /// The old group 0 and 5 (each with a `.txnindex`) and a cleaned `.log.swap` covering both.
    fn old_group_and_swap(dir: &Path) {
        for base in [0, 5] {
            std::fs::write(
                dir.join(name(base, SegmentFileKind::Log, "")),
                log_bytes(base, 5),
            )
            .unwrap();
            std::fs::write(dir.join(name(base, SegmentFileKind::TxnIndex, "")), b"old").unwrap();
        }
        std::fs::write(
            dir.join(name(0, SegmentFileKind::Log, SWAP_SUFFIX)),
            log_bytes(0, 10),
        )
        .unwrap();
    }

    #[test]
    fn txn_index_swap_next_to_a_log_swap_replaces_the_groups_indexes() {
        for new_suffix in [SWAP_SUFFIX, CLEANED_SUFFIX] {
            let dir = tempfile::tempdir().unwrap();
            old_group_and_swap(dir.path());
            std::fs::write(
                dir.path()
                    .join(name(0, SegmentFileKind::TxnIndex, new_suffix)),
                b"new",
            )
            .unwrap();
            assert!(complete_swaps(&os(), dir.path(), &files(dir.path())).unwrap());
            assert_eq!(
                files(dir.path()),
                vec![
                    name(0, SegmentFileKind::Log, ""),
                    name(0, SegmentFileKind::TxnIndex, "")
                ],
                "{new_suffix}"
            );
            let txn_index = dir.path().join(name(0, SegmentFileKind::TxnIndex, ""));
            assert_eq!(std::fs::read(txn_index).unwrap(), b"new");
        }
    }

    #[test]
    fn txn_index_of_the_old_group_goes_when_the_swap_brings_none() {
        let dir = tempfile::tempdir().unwrap();
        old_group_and_swap(dir.path());
        assert!(complete_swaps(&os(), dir.path(), &files(dir.path())).unwrap());
        assert_eq!(files(dir.path()), vec![name(0, SegmentFileKind::Log, "")]);
    }

    /// A crash after the `.log.swap` became the `.log`, before the `.txnindex.swap` followed.
    #[test]
    fn txn_index_swap_without_a_log_swap_is_renamed_in() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join(name(0, SegmentFileKind::Log, "")), log_bytes(0, 10)).unwrap();
        std::fs::write(
            d.join(name(0, SegmentFileKind::TxnIndex, SWAP_SUFFIX)),
            b"new",
        )
        .unwrap();
        std::fs::write(d.join(name(5, SegmentFileKind::Log, DELETED_SUFFIX)), b"x").unwrap();
        assert!(complete_swaps(&os(), d, &files(d)).unwrap());
        assert_eq!(
            std::fs::read(d.join(name(0, SegmentFileKind::TxnIndex, ""))).unwrap(),
            b"new"
        );
        assert!(
            !d.join(name(0, SegmentFileKind::TxnIndex, SWAP_SUFFIX))
                .exists()
        );
    }

    /// A crash before the swap began: the cleaned files go, the old `.txnindex` stays.
    #[test]
    fn txn_index_cleaned_without_a_swap_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join(name(0, SegmentFileKind::Log, "")), log_bytes(0, 5)).unwrap();
        std::fs::write(d.join(name(0, SegmentFileKind::TxnIndex, "")), b"old").unwrap();
        std::fs::write(d.join(name(0, SegmentFileKind::Log, CLEANED_SUFFIX)), b"c").unwrap();
        std::fs::write(
            d.join(name(0, SegmentFileKind::TxnIndex, CLEANED_SUFFIX)),
            b"c",
        )
        .unwrap();
        assert!(complete_swaps(&os(), d, &files(d)).unwrap());
        assert_eq!(
            files(d),
            vec![
                name(0, SegmentFileKind::Log, ""),
                name(0, SegmentFileKind::TxnIndex, "")
            ]
        );
        assert_eq!(
            std::fs::read(d.join(name(0, SegmentFileKind::TxnIndex, ""))).unwrap(),
            b"old"
        );
    }
}
