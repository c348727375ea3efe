//! [`OffsetIndex`]: the `.index` file, mapping offsets to positions in the `.log` file.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::file::{self, Entry, IndexFile, MAX_ENTRY_SIZE};
use super::{check_base_offset, relative_offset};
use crate::error::{Error, Result};
use crate::storage::Storage;

/// An offset and the byte position in the `.log` file of the batch whose last offset it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OffsetPosition {
    /// The absolute offset (the segment's base offset plus the entry's relative offset).
    pub offset: i64,
    /// The byte position of the batch's first byte in the `.log` file.
    pub position: u32,
}

/// One `.index` entry as stored: relative offset (i32 BE), then position (i32 BE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OffsetEntry {
    relative_offset: i32,
    position: i32,
}

impl Entry for OffsetEntry {
    const SIZE: usize = 8;

    fn decode(bytes: &[u8]) -> Option<Self> {
        Some(OffsetEntry {
            relative_offset: i32::from_be_bytes(bytes.get(0..4)?.try_into().ok()?),
            position: i32::from_be_bytes(bytes.get(4..8)?.try_into().ok()?),
        })
    }

    fn encode(&self) -> [u8; MAX_ENTRY_SIZE] {
        let mut out = [0u8; MAX_ENTRY_SIZE];
        let (offset, rest) = out.split_at_mut(4);
        offset.copy_from_slice(&self.relative_offset.to_be_bytes());
        if let Some(position) = rest.get_mut(..4) {
            position.copy_from_slice(&self.position.to_be_bytes());
        }
        out
    }
}

/// Kafka's offset index (`.index`): a sparse, sorted map from a batch's last offset to the byte
/// position of that batch in the segment's `.log` file.
///
/// Each entry is 8 bytes: the batch's **last** offset minus the segment's base offset (i32
/// big-endian), then the position of the batch's first byte (i32 big-endian). Offsets and
/// positions strictly increase. The file grows by one positional write per entry and is never
/// preallocated, so its length is always its entry count times 8 (less a partial entry torn by a
/// crash, which opening drops). It is full at `max_index_bytes / 8` entries.
///
/// # Concurrency
/// All methods take `&self`. One thread appends (and truncates, seals, renames); any number of
/// threads look up concurrently. An entry becomes visible to lookups only once it is completely
/// in the file. The active index mirrors its entries in memory; a sealed one reads its file on
/// demand, through a read-only mapping made on the first lookup, or positional reads when the
/// storage cannot map.
///
/// # Truncation of a sealed index
/// A mapped file is never shrunk: truncating a sealed (or once-mapped) index writes the kept
/// entries to `<path>.swap.deleted`, syncs it, renames it over `<path>` and syncs the
/// directory. Readers holding the old mapping keep reading the old, valid bytes. A leftover
/// `*.swap.deleted` file (a crash mid-truncation) is garbage that Kafka's loader deletes.
///
/// # In memory
/// [`in_memory`](Self::in_memory) makes an index with no file: the same entries, rules and
/// answers as a file-backed one, and no storage operation ever.
#[derive(Debug)]
pub struct OffsetIndex {
    base_offset: i64,
    file: IndexFile<OffsetEntry>,
}

impl OffsetIndex {
    /// Creates a new, empty, writable index at `path` (which must not exist) for the segment
    /// starting at `base_offset`, holding at most `max_index_bytes / 8` entries.
    pub fn create(
        storage: &Arc<dyn Storage>,
        path: &Path,
        base_offset: i64,
        max_index_bytes: u32,
    ) -> Result<OffsetIndex> {
        check_base_offset(base_offset)?;
        Ok(OffsetIndex {
            base_offset,
            file: IndexFile::create(storage, path, max_entries(max_index_bytes))?,
        })
    }

    // ARCHITECTURE.md §3, invariant 22.
    /// Creates an empty, writable index with no file behind it, for the segment starting at
    /// `base_offset`, holding at most `max_index_bytes / 8` entries. `path` only names the index
    /// in errors and [`path`](Self::path).
    ///
    /// Every method works as on an active index created by [`create`](Self::create), but no
    /// storage is ever touched: [`sync`](Self::sync) does nothing, [`seal`](Self::seal) only
    /// refuses further appends and keeps the entries in memory (nothing is ever mapped),
    /// [`make_writable`](Self::make_writable) lifts the seal, and [`rename_to`](Self::rename_to)
    /// only remembers the new path. A read-only log rebuilds an inconsistent index this way,
    /// because it must never write or create a file.
    ///
    /// Fails only with [`Error::InvalidArgument`] for a base offset outside
    /// [0, i64::MAX − i32::MAX].
    pub fn in_memory(path: &Path, base_offset: i64, max_index_bytes: u32) -> Result<OffsetIndex> {
        check_base_offset(base_offset)?;
        Ok(OffsetIndex {
            base_offset,
            file: IndexFile::in_memory(path, max_entries(max_index_bytes)),
        })
    }

    /// Opens an existing index. `writable`: the index is active and its entries are loaded into
    /// memory (O(entries)); a trailing partial entry is cut from the file. Read-only: the index
    /// is sealed and opening costs O(1) (a length and the last entry); a trailing partial entry
    /// is ignored. Entries are not checked: see [`quick_check`](Self::quick_check).
    pub fn open(
        storage: &Arc<dyn Storage>,
        path: &Path,
        base_offset: i64,
        max_index_bytes: u32,
        writable: bool,
    ) -> Result<OffsetIndex> {
        check_base_offset(base_offset)?;
        Ok(OffsetIndex {
            base_offset,
            file: IndexFile::open(storage, path, max_entries(max_index_bytes), writable)?,
        })
    }

    /// The base offset of the segment this index belongs to.
    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }

    /// The number of entries.
    pub fn entries(&self) -> usize {
        self.file.entries()
    }

    /// The most entries the index may hold: `max_index_bytes / 8`.
    pub fn max_entries(&self) -> usize {
        self.file.max_entries()
    }

    /// Whether no entry can be appended, which makes the segment roll.
    pub fn is_full(&self) -> bool {
        self.entries() >= self.max_entries()
    }

    /// Whether the index is sealed (read-only).
    pub fn is_sealed(&self) -> bool {
        !self.file.is_active()
    }

    /// Whether the index has no file behind it (made by [`in_memory`](Self::in_memory)).
    pub fn is_in_memory(&self) -> bool {
        self.file.is_in_memory()
    }

    /// The last entry, or `(base_offset, 0)` when the index is empty.
    pub fn last_entry(&self) -> Result<OffsetPosition> {
        match self.file.last() {
            Some(entry) => self.absolute(entry, self.entries().saturating_sub(1)),
            None => Ok(OffsetPosition {
                offset: self.base_offset,
                position: 0,
            }),
        }
    }

    /// Entry `n` (0-based); an [`Error::InvalidArgument`] if there is no such entry.
    pub fn entry(&self, n: usize) -> Result<OffsetPosition> {
        let entry = self.file.source(true).get(n)?;
        self.absolute(entry, n)
    }

    /// Appends the entry for the batch whose last offset is `offset` and which starts at byte
    /// `position` of the `.log` file.
    ///
    /// Fails with [`Error::InvalidArgument`] when the index is full or sealed, when `offset`
    /// minus the base offset or `position` lies outside [0, i32::MAX], or when `offset` or
    /// `position` is not above the last entry's.
    pub fn append(&self, offset: i64, position: u32) -> Result<()> {
        let relative_offset = relative_offset(self.base_offset, offset)?;
        let position = i32::try_from(position).map_err(|_| Error::InvalidArgument {
            why: format!("position {position} is beyond i32::MAX"),
        })?;
        let max_entries = self.max_entries();
        self.file.append_with(|entries, last| {
            if entries >= max_entries {
                return Err(Error::InvalidArgument {
                    why: format!("the offset index is full at {max_entries} entries"),
                });
            }
            if let Some(last) = last {
                if relative_offset <= last.relative_offset {
                    return Err(Error::InvalidArgument {
                        why: format!(
                            "offset {offset} is not above the last indexed offset {}",
                            self.base_offset + i64::from(last.relative_offset)
                        ),
                    });
                }
                if position <= last.position {
                    return Err(Error::InvalidArgument {
                        why: format!(
                            "position {position} is not above the last indexed position {}",
                            last.position
                        ),
                    });
                }
            }
            Ok(Some(OffsetEntry {
                relative_offset,
                position,
            }))
        })?;
        Ok(())
    }

    /// The entry with the largest offset <= `target_offset`, or `(base_offset, 0)` if there is
    /// none. The segment scans the log from the returned position for the first batch whose
    /// last offset is >= the target.
    pub fn lookup(&self, target_offset: i64) -> Result<OffsetPosition> {
        let target = target_offset.saturating_sub(self.base_offset);
        let source = self.file.source(true);
        let range = source.slot_range(|e| i64::from(e.relative_offset), target)?;
        match range.floor {
            Some(n) => {
                let entry = source.get(n)?;
                drop(source);
                self.absolute(entry, n)
            }
            None => Ok(OffsetPosition {
                offset: self.base_offset,
                position: 0,
            }),
        }
    }

    /// The first entry whose position is >= `position`, if any: the offset bound of a read that
    /// ends at that byte (Kafka's `fetchUpperBoundOffset`, given `start + fetch size`).
    pub fn upper_bound_by_position(&self, position: u64) -> Result<Option<OffsetPosition>> {
        let target = i64::try_from(position).unwrap_or(i64::MAX);
        let source = self.file.source(true);
        let range = source.slot_range(|e| i64::from(e.position), target)?;
        match range.ceil {
            Some(n) => {
                let entry = source.get(n)?;
                drop(source);
                self.absolute(entry, n).map(Some)
            }
            None => Ok(None),
        }
    }

    /// Removes every entry whose offset is >= `offset` (Kafka's `truncateTo`).
    pub fn truncate_to(&self, offset: i64) -> Result<()> {
        let target = offset.saturating_sub(self.base_offset);
        self.file
            .truncate_from_key(|e| i64::from(e.relative_offset), target)
    }

    /// Keeps only the first `n` entries.
    pub fn truncate_to_entries(&self, n: usize) -> Result<()> {
        self.file.truncate_to_entries(n)
    }

    /// Removes every entry.
    pub fn reset(&self) -> Result<()> {
        self.file.reset()
    }

    // ARCHITECTURE.md §3, invariant 6.
    /// The O(1) check run when a segment is first opened, Kafka's
    /// `sanityCheck` plus a zero-padding probe: the file holds every counted entry; the last
    /// entry's offset is >= the base offset and its position lies inside a log of `log_size`
    /// bytes; and the last entry is above the one before it, which catches the zero padding a
    /// preallocating writer leaves after a crash.
    ///
    /// Fails with [`Error::Corrupt`] naming the index file and the byte position of the bad
    /// entry (with [`Corruption::BadIndexEntry`](crate::Corruption::BadIndexEntry)), or with an
    /// I/O error. A failed index is rebuilt from the log, never trusted.
    pub fn quick_check(&self, log_size: u64) -> Result<()> {
        let entries = self.entries();
        let Some(last_n) = entries.checked_sub(1) else {
            return Ok(());
        };
        let path = self.path();
        let file_len = self.file.file_len()?;
        let needed = file::entry_position::<OffsetEntry>(entries);
        if file_len < needed {
            return Err(file::corrupt_entry::<OffsetEntry>(
                &path,
                last_n,
                format!("the file holds {file_len} bytes, fewer than its {entries} entries need"),
            ));
        }
        let source = self.file.source(false);
        let last = source.get(last_n)?;
        let previous = match last_n.checked_sub(1) {
            Some(n) => Some(source.get(n)?),
            None => None,
        };
        drop(source);
        check_entry(&path, last_n, last, previous, log_size)
    }

    /// The O(entries) check run when recovering a segment's tail and in `verify`: every offset
    /// is >= the base offset and above the previous one, every position lies inside a log of
    /// `log_size` bytes and is above the previous one, and no entry after the first is zero
    /// padding. Errors as for [`quick_check`](Self::quick_check), naming the first bad entry.
    pub fn full_check(&self, log_size: u64) -> Result<()> {
        let path = self.path();
        let mut previous = None;
        self.file.for_each(|n, entry| {
            check_entry(&path, n, entry, previous, log_size)?;
            previous = Some(entry);
            Ok(())
        })
    }

    /// Makes the written entries durable (`fdatasync`); a no-op in memory. Does not block
    /// appends or lookups.
    pub fn sync(&self) -> Result<()> {
        self.file.sync()
    }

    /// Makes the index read-only (at roll or close); [`sync`](Self::sync) is separate. Lookups
    /// then read the file, through a mapping made on the first lookup; an in-memory index keeps
    /// its entries.
    pub fn seal(&self) -> Result<()> {
        self.file.seal()
    }

    /// Makes a sealed index writable again (when truncation makes its segment active): the file
    /// is reopened for writing if needed and its entries are loaded into memory. In memory, only
    /// lifts the seal.
    pub fn make_writable(&self) -> Result<()> {
        self.file.make_writable()
    }

    /// Drops the read-only mapping of a sealed index, if any, to bound the number of mappings;
    /// the next lookup maps the file again.
    pub fn release_mapping(&self) {
        self.file.release_mapping();
    }

    /// Allows (the default) or forbids reading the sealed file through a mapping; forbidden,
    /// lookups use positional reads. A reader in another process than the writer forbids it,
    /// because the writer may shrink a file it never mapped itself, and a mapped page with no
    /// file behind it is a SIGBUS.
    pub fn set_mapping_allowed(&self, allowed: bool) {
        self.file.set_mapping_allowed(allowed);
    }

    /// The current path of the file.
    pub fn path(&self) -> PathBuf {
        self.file.path()
    }

    /// Starts the index over, empty and writable, on a new file at `temp`, leaving the old
    /// file untouched: how a rebuild writes its entries away from the old name. The rebuild
    /// then keeps them ([`finish_restart`](Self::finish_restart)) or gives the old index back
    /// ([`abandon_restart`](Self::abandon_restart)).
    pub(crate) fn restart_at(&self, temp: &Path) -> Result<()> {
        self.file.restart_at(temp)
    }

    /// Renames the file a rebuild wrote since [`restart_at`](Self::restart_at) to `path`, over
    /// the old one, which is forgotten. The caller syncs the directory.
    pub(crate) fn finish_restart(&self, path: &Path) -> Result<()> {
        self.file.finish_restart(path)
    }

    /// Gives back the index [`restart_at`](Self::restart_at) replaced, as it was, and removes
    /// the file the rebuild wrote.
    pub(crate) fn abandon_restart(&self) -> Result<()> {
        self.file.abandon_restart()
    }

    /// See [`IndexFile::retire`].
    pub(crate) fn retire(&self) {
        self.file.retire();
    }

    /// Renames the file to `new_path` (for example `<name>.deleted`) and keeps using it there;
    /// in memory, only remembers the new path. The caller syncs the directory.
    pub fn rename_to(&self, new_path: &Path) -> Result<()> {
        self.file.rename_to(new_path)
    }

    /// The size of the entries in bytes (the file's length, less any torn trailing bytes).
    pub fn size_bytes(&self) -> u64 {
        file::entry_position::<OffsetEntry>(self.entries())
    }

    /// Turns stored entry `n` into an absolute entry, rejecting out-of-range fields.
    fn absolute(&self, entry: OffsetEntry, n: usize) -> Result<OffsetPosition> {
        let path = || self.path();
        if entry.relative_offset < 0 {
            return Err(file::corrupt_entry::<OffsetEntry>(
                &path(),
                n,
                format!(
                    "entry {n} has offset {} below the base offset {}",
                    self.base_offset + i64::from(entry.relative_offset),
                    self.base_offset
                ),
            ));
        }
        let position = u32::try_from(entry.position).map_err(|_| {
            file::corrupt_entry::<OffsetEntry>(
                &path(),
                n,
                format!("entry {n} has negative position {}", entry.position),
            )
        })?;
        Ok(OffsetPosition {
            offset: self.base_offset + i64::from(entry.relative_offset),
            position,
        })
    }
}

/// Checks entry `n` on its own and against the entry before it.
fn check_entry(
    path: &Path,
    n: usize,
    entry: OffsetEntry,
    previous: Option<OffsetEntry>,
    log_size: u64,
) -> Result<()> {
    let bad = |why: String| Err(file::corrupt_entry::<OffsetEntry>(path, n, why));
    if let Some(previous) = previous {
        if entry.relative_offset == 0 && entry.position == 0 {
            return bad(format!(
                "entry {n} is zero padding (relative offset 0, position 0) after a real entry"
            ));
        }
        if entry.relative_offset <= previous.relative_offset {
            return bad(format!(
                "entry {n} has relative offset {}, not above the previous entry's {}",
                entry.relative_offset, previous.relative_offset
            ));
        }
        if entry.position <= previous.position {
            return bad(format!(
                "entry {n} has position {}, not above the previous entry's {}",
                entry.position, previous.position
            ));
        }
    }
    if entry.relative_offset < 0 {
        return bad(format!(
            "entry {n} has relative offset {}: its offset is below the base offset",
            entry.relative_offset
        ));
    }
    match u64::try_from(entry.position) {
        Err(_) => bad(format!(
            "entry {n} has negative position {}",
            entry.position
        )),
        Ok(position) if position >= log_size => bad(format!(
            "entry {n} has position {position}, beyond the log's {log_size} bytes"
        )),
        Ok(_) => Ok(()),
    }
}

/// `max_index_bytes / 8`.
fn max_entries(max_index_bytes: u32) -> usize {
    max_index_bytes as usize / OffsetEntry::SIZE
}
