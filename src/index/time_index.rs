//! [`TimeIndex`]: the `.timeindex` file, mapping timestamps to offsets.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::file::{self, Entry, IndexFile, MAX_ENTRY_SIZE};
use super::{check_base_offset, relative_offset};
use crate::error::{Error, Result};
use crate::storage::Storage;

/// A timestamp and the offset it leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimestampOffset {
    /// Milliseconds since the epoch; -1 in the "no entry" answer.
    pub timestamp: i64,
    /// The absolute offset (the segment's base offset plus the entry's relative offset).
    pub offset: i64,
}

/// One `.timeindex` entry as stored: timestamp (i64 BE), then relative offset (i32 BE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TimeEntry {
    timestamp: i64,
    relative_offset: i32,
}

impl Entry for TimeEntry {
    const SIZE: usize = 12;

    fn decode(bytes: &[u8]) -> Option<Self> {
        Some(TimeEntry {
            timestamp: i64::from_be_bytes(bytes.get(0..8)?.try_into().ok()?),
            relative_offset: i32::from_be_bytes(bytes.get(8..12)?.try_into().ok()?),
        })
    }

    fn encode(&self) -> [u8; MAX_ENTRY_SIZE] {
        let mut out = [0u8; MAX_ENTRY_SIZE];
        let (timestamp, offset) = out.split_at_mut(8);
        timestamp.copy_from_slice(&self.timestamp.to_be_bytes());
        offset.copy_from_slice(&self.relative_offset.to_be_bytes());
        out
    }
}

/// Kafka's time index (`.timeindex`): a sparse, sorted map from the largest timestamp seen so
/// far in a segment to the offset of the batch that holds it.
///
/// Each entry is 12 bytes: a timestamp (i64 big-endian), then the last offset of the batch
/// holding that timestamp minus the segment's base offset (i32 big-endian). Timestamps strictly
/// increase: [`maybe_append`](Self::maybe_append) adds an entry only when the timestamp does.
/// The file grows by positional appends and is never preallocated.
///
/// The index is full one entry early, at `max_index_bytes / 12 - 1` entries: the last slot is
/// reserved for the final entry written at roll and close with `skip_full_check`, the entry
/// retention reads.
///
/// Concurrency, sealing, lazy mapping, truncation and the in-memory mode work as for
/// [`OffsetIndex`](super::OffsetIndex).
#[derive(Debug)]
pub struct TimeIndex {
    base_offset: i64,
    file: IndexFile<TimeEntry>,
}

impl TimeIndex {
    /// Creates a new, empty, writable index at `path` (which must not exist) for the segment
    /// starting at `base_offset`, with room for `max_index_bytes / 12` entries.
    pub fn create(
        storage: &Arc<dyn Storage>,
        path: &Path,
        base_offset: i64,
        max_index_bytes: u32,
    ) -> Result<TimeIndex> {
        check_base_offset(base_offset)?;
        Ok(TimeIndex {
            base_offset,
            file: IndexFile::create(storage, path, max_entries(max_index_bytes))?,
        })
    }

    /// Creates an empty, writable index with no file behind it, with room for
    /// `max_index_bytes / 12` entries; as [`OffsetIndex::in_memory`](super::OffsetIndex::in_memory),
    /// no storage is ever touched.
    pub fn in_memory(path: &Path, base_offset: i64, max_index_bytes: u32) -> Result<TimeIndex> {
        check_base_offset(base_offset)?;
        Ok(TimeIndex {
            base_offset,
            file: IndexFile::in_memory(path, max_entries(max_index_bytes)),
        })
    }

    /// Opens an existing index; as [`OffsetIndex::open`](super::OffsetIndex::open).
    pub fn open(
        storage: &Arc<dyn Storage>,
        path: &Path,
        base_offset: i64,
        max_index_bytes: u32,
        writable: bool,
    ) -> Result<TimeIndex> {
        check_base_offset(base_offset)?;
        Ok(TimeIndex {
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

    /// The room of the file: `max_index_bytes / 12` entries, the last one reserved.
    pub fn max_entries(&self) -> usize {
        self.file.max_entries()
    }

    /// Whether the index is full for ordinary appends: `entries >= max_entries - 1`, keeping the
    /// last slot for the final entry. A full index makes the segment roll.
    pub fn is_full(&self) -> bool {
        self.entries() >= self.max_entries().saturating_sub(1)
    }

    /// Whether the index is sealed (read-only).
    pub fn is_sealed(&self) -> bool {
        !self.file.is_active()
    }

    /// Whether the index has no file behind it (made by [`in_memory`](Self::in_memory)).
    pub fn is_in_memory(&self) -> bool {
        self.file.is_in_memory()
    }

    /// The last entry, or `(-1, base_offset)` when the index is empty.
    pub fn last_entry(&self) -> Result<TimestampOffset> {
        match self.file.last() {
            Some(entry) => self.absolute(entry, self.entries().saturating_sub(1)),
            None => Ok(self.none()),
        }
    }

    /// Entry `n` (0-based); an [`Error::InvalidArgument`] if there is no such entry.
    pub fn entry(&self, n: usize) -> Result<TimestampOffset> {
        let entry = self.file.source(true).get(n)?;
        self.absolute(entry, n)
    }

    /// Appends `(timestamp, offset)` if `timestamp` is above the last entry's timestamp (-1 when
    /// empty), and does nothing otherwise; returns whether it appended. `offset` is the last
    /// offset of the batch holding `timestamp`.
    ///
    /// Fails with [`Error::InvalidArgument`] when `offset` is below the last entry's offset
    /// (Kafka throws there too), when `offset` minus the base offset lies outside
    /// [0, i32::MAX], when the index is sealed, or when an entry is due and the index is full.
    /// `skip_full_check` lets the final entry at roll and close use the reserved last slot.
    pub fn maybe_append(&self, timestamp: i64, offset: i64, skip_full_check: bool) -> Result<bool> {
        let relative_offset = relative_offset(self.base_offset, offset)?;
        let max_entries = self.max_entries();
        self.file.append_with(|entries, last| {
            let last_timestamp = match last {
                Some(last) => {
                    if relative_offset < last.relative_offset {
                        return Err(Error::InvalidArgument {
                            why: format!(
                                "offset {offset} is below the last time-indexed offset {}",
                                self.base_offset + i64::from(last.relative_offset)
                            ),
                        });
                    }
                    last.timestamp
                }
                None => -1,
            };
            if timestamp <= last_timestamp {
                return Ok(None);
            }
            if !skip_full_check && entries >= max_entries.saturating_sub(1) {
                return Err(Error::InvalidArgument {
                    why: format!(
                        "the time index is full at {entries} entries (the last of {max_entries} \
                         slots is reserved for the final entry)"
                    ),
                });
            }
            Ok(Some(TimeEntry {
                timestamp,
                relative_offset,
            }))
        })
    }

    /// The entry with the largest timestamp <= `timestamp`, or `(-1, base_offset)` if there is
    /// none.
    pub fn lookup(&self, timestamp: i64) -> Result<TimestampOffset> {
        let source = self.file.source(true);
        let range = source.slot_range(|e| e.timestamp, timestamp)?;
        match range.floor {
            Some(n) => {
                let entry = source.get(n)?;
                drop(source);
                self.absolute(entry, n)
            }
            None => Ok(self.none()),
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

    /// The O(1) check run when a segment is first opened: the file holds every counted entry;
    /// the last entry's offset is >= the base offset and its timestamp is not negative; the last
    /// timestamp is not below the first (Kafka's `sanityCheck`); and the last entry is above the
    /// one before it, which catches zero padding.
    ///
    /// A time index holds no positions, so unlike [`OffsetIndex::quick_check`](super::OffsetIndex::quick_check)
    /// it takes no log size. Fails with [`Error::Corrupt`] naming the file and the byte position
    /// of the bad entry, or with an I/O error.
    pub fn quick_check(&self) -> Result<()> {
        let entries = self.entries();
        let Some(last_n) = entries.checked_sub(1) else {
            return Ok(());
        };
        let path = self.path();
        let file_len = self.file.file_len()?;
        let needed = file::entry_position::<TimeEntry>(entries);
        if file_len < needed {
            return Err(file::corrupt_entry::<TimeEntry>(
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
        let first = source.get(0)?;
        drop(source);
        check_entry(&path, last_n, last, previous)?;
        if last.timestamp < first.timestamp {
            return Err(file::corrupt_entry::<TimeEntry>(
                &path,
                last_n,
                format!(
                    "the last timestamp {} is below the first timestamp {}",
                    last.timestamp, first.timestamp
                ),
            ));
        }
        Ok(())
    }

    /// The O(entries) check run when recovering a segment's tail and in `verify`: timestamps
    /// are not negative and strictly increase, offsets are >= the base offset and never
    /// decrease, and no entry after the first is zero padding. Errors as for
    /// [`quick_check`](Self::quick_check), naming the first bad entry.
    pub fn full_check(&self) -> Result<()> {
        let path = self.path();
        let mut previous = None;
        self.file.for_each(|n, entry| {
            check_entry(&path, n, entry, previous)?;
            previous = Some(entry);
            Ok(())
        })
    }

    /// Makes the written entries durable (`fdatasync`); a no-op in memory. Does not block
    /// appends or lookups.
    pub fn sync(&self) -> Result<()> {
        self.file.sync()
    }

    /// Makes the index read-only (at roll or close, after the final entry); [`sync`](Self::sync)
    /// is separate. An in-memory index keeps its entries.
    pub fn seal(&self) -> Result<()> {
        self.file.seal()
    }

    /// Makes a sealed index writable again; as [`OffsetIndex::make_writable`](super::OffsetIndex::make_writable).
    pub fn make_writable(&self) -> Result<()> {
        self.file.make_writable()
    }

    /// Drops the read-only mapping of a sealed index, if any.
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

    /// See [`IndexFile::retire`](super::file::IndexFile::retire).
    pub(crate) fn retire(&self) {
        self.file.retire();
    }

    /// Renames the file to `new_path` and keeps using it there; in memory, only remembers the
    /// new path. The caller syncs the directory.
    pub fn rename_to(&self, new_path: &Path) -> Result<()> {
        self.file.rename_to(new_path)
    }

    /// The size of the entries in bytes.
    pub fn size_bytes(&self) -> u64 {
        file::entry_position::<TimeEntry>(self.entries())
    }

    /// The "no entry" answer.
    fn none(&self) -> TimestampOffset {
        TimestampOffset {
            timestamp: -1,
            offset: self.base_offset,
        }
    }

    /// Turns stored entry `n` into an absolute entry, rejecting an offset below the base.
    fn absolute(&self, entry: TimeEntry, n: usize) -> Result<TimestampOffset> {
        if entry.relative_offset < 0 {
            return Err(file::corrupt_entry::<TimeEntry>(
                &self.path(),
                n,
                format!(
                    "entry {n} has offset {} below the base offset {}",
                    self.base_offset + i64::from(entry.relative_offset),
                    self.base_offset
                ),
            ));
        }
        Ok(TimestampOffset {
            timestamp: entry.timestamp,
            offset: self.base_offset + i64::from(entry.relative_offset),
        })
    }
}

/// Checks entry `n` on its own and against the entry before it.
fn check_entry(path: &Path, n: usize, entry: TimeEntry, previous: Option<TimeEntry>) -> Result<()> {
    let bad = |why: String| Err(file::corrupt_entry::<TimeEntry>(path, n, why));
    if let Some(previous) = previous {
        if entry.timestamp == 0 && entry.relative_offset == 0 {
            return bad(format!(
                "entry {n} is zero padding (timestamp 0, relative offset 0) after a real entry"
            ));
        }
        if entry.timestamp <= previous.timestamp {
            return bad(format!(
                "entry {n} has timestamp {}, not above the previous entry's {}",
                entry.timestamp, previous.timestamp
            ));
        }
        if entry.relative_offset < previous.relative_offset {
            return bad(format!(
                "entry {n} has relative offset {}, below the previous entry's {}",
                entry.relative_offset, previous.relative_offset
            ));
        }
    }
    if entry.relative_offset < 0 {
        return bad(format!(
            "entry {n} has relative offset {}: its offset is below the base offset",
            entry.relative_offset
        ));
    }
    if entry.timestamp < 0 {
        // Kafka indexes only timestamps above -1 (no timestamp), so never a negative one.
        return bad(format!(
            "entry {n} has negative timestamp {}",
            entry.timestamp
        ));
    }
    Ok(())
}

/// `max_index_bytes / 12`.
fn max_entries(max_index_bytes: u32) -> usize {
    max_index_bytes as usize / TimeEntry::SIZE
}
