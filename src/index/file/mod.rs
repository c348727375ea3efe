//! The machinery both indexes share: [`IndexFile`], an index's file with its in-memory mirror or
//! lazy read path, and the entry codec seam ([`Entry`]).
//!
//! [`OffsetIndex`](super::OffsetIndex) and [`TimeIndex`](super::TimeIndex) are thin typed wrappers
//! over [`IndexFile`]: they turn absolute offsets into relative ones, validate arguments and decide
//! what an append means; everything about bytes, files, locks and sealing lives here once.
//!
//! This file owns an index's lives ([`View`]: active, sealed, in memory), its locks and its
//! lifecycle (create, open, seal, make writable, restart, rename). The parts that own one concern
//! each have a file: `search.rs` the warm-tail binary search, `source.rs` reads (the view one read
//! uses, a sealed file's lazy mapping), `write.rs` appends (the mirror first, the file a page of
//! entries at a time) and syncs, `truncate.rs` truncation (in place, or a new file renamed over
//! the old one).

mod search;
mod source;
mod truncate;
mod write;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::sync::{Mutex, RwLock};

use crate::error::{Corruption, Error, Result};
use crate::storage::{OpenMode, ReadMapping, Storage, StorageFile};

use source::{Source, SourceKind, read_entries};
pub(crate) use truncate::{TRUNCATION_TEMP_SUFFIX, truncation_temp_path};

/// The largest entry size of any index, so that one stack buffer fits every entry.
pub(crate) const MAX_ENTRY_SIZE: usize = 12;

/// Kafka's warm section: lookups near the tail touch only the last 8 KiB of entries, so those
/// pages stay resident while the index grows (as in Kafka's `AbstractIndex`).
const WARM_SECTION_BYTES: usize = 8192;

/// How many bytes a sequential read (open, full check, truncation) pulls per call.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// How many bytes of entries an active index holds in memory only before it writes them to its
/// file in one `pwrite` (a page): see [`View::Active`].
const PENDING_WRITE_BYTES: usize = 4096;

/// One index entry in its on-disk form (relative offsets, raw signed fields).
///
/// Decoding never fails on content, only on a short slice: range checks belong to the typed
/// wrappers, which report them as corruption with the entry's position.
pub(crate) trait Entry: Copy + PartialEq + fmt::Debug + Send + Sync + 'static {
    /// Bytes per entry on disk.
    const SIZE: usize;

    /// Decodes one entry from the first `SIZE` bytes, big-endian; `None` if fewer are given.
    fn decode(bytes: &[u8]) -> Option<Self>;

    /// Encodes the entry big-endian into the first `SIZE` bytes of the returned buffer.
    fn encode(&self) -> [u8; MAX_ENTRY_SIZE];

    /// Entries in the warm tail section.
    fn warm_entries() -> usize {
        WARM_SECTION_BYTES / Self::SIZE
    }
}

/// The on-disk bytes of one entry.
fn encoded<'a, E: Entry>(entry: &E, buf: &'a mut [u8; MAX_ENTRY_SIZE]) -> &'a [u8] {
    *buf = entry.encode();
    buf.get(..E::SIZE).unwrap_or(&buf[..])
}

/// The byte position of entry `n` in its file.
pub(crate) fn entry_position<E: Entry>(n: usize) -> u64 {
    (n as u64).saturating_mul(E::SIZE as u64)
}

/// An [`Error::Corrupt`] about entry `n` of the index at `path`.
pub(crate) fn corrupt_entry<E: Entry>(path: &Path, n: usize, why: String) -> Error {
    Error::Corrupt {
        file: path.to_path_buf(),
        position: entry_position::<E>(n),
        what: Corruption::BadIndexEntry(why),
    }
}

fn invalid(why: impl Into<String>) -> Error {
    Error::InvalidArgument { why: why.into() }
}

/// Where a sealed index's bytes come from.
#[derive(Debug)]
enum MapState {
    /// Not mapped yet: mapping is deferred to the first lookup, so that opening thousands of
    /// sealed segments costs no mapping at all (reference pain points 2 and 3).
    NotYet,
    /// Mapped read-only.
    Mapped(Arc<ReadMapping>),
    /// The storage cannot map (or mapping failed): positional reads.
    Unavailable,
}

/// The file behind an index, and what the index knows about it.
#[derive(Debug, Clone)]
struct BackingFile {
    storage: Arc<dyn Storage>,
    file: Arc<dyn StorageFile>,
    /// Whether `file` was opened for writing (sealed indexes opened from disk are not).
    writable: bool,
    /// Whether `file` has ever been mapped. A mapped file must never shrink (a reader touching a
    /// page past the new end would fault), so truncating it writes a new file instead.
    mapped: bool,
}

/// The lives of an index.
///
/// This is the one place that decides whether an index does I/O: the two file-backed lives
/// carry their [`BackingFile`], and [`View::InMemory`] has none, so no path from it can reach a
/// storage.
#[derive(Debug)]
enum View<E> {
    /// The active index: every entry mirrored in memory, where lookups read it. The file gets
    /// the entries after the mirror, a page of them in one write ([`PENDING_WRITE_BYTES`]), and
    /// every pending one before a sync and before the index seals (a sealed index is read from
    /// its file): with one entry per `index.interval.bytes` of appends, writing each entry at
    /// once cost two small `pwrite`s per 4 KiB batch (one per index), about a tenth of the
    /// batching writer's time. A crash may leave the file short of the mirror; recovery trusts
    /// only entries below the recovery point, which a sync wrote and made durable first
    /// (ARCHITECTURE.md §7).
    Active {
        entries: Vec<E>,
        backing: BackingFile,
        /// How many of `entries` the file holds.
        written: usize,
    },
    /// A sealed index: read-only, read on demand through a mapping or positional reads.
    Sealed {
        backing: BackingFile,
        /// The number of whole entries in the file.
        entries: usize,
        /// The last entry, read at open so that the O(1) checks need no further I/O.
        last: Option<E>,
        /// The mapping, once a lookup has asked for one.
        mapping: MapState,
    },
    /// An index with no file at all (see [`IndexFile::in_memory`]): the entries live only here,
    /// whether sealed or not, and sealing only refuses further appends.
    InMemory { entries: Vec<E>, sealed: bool },
}

impl<E: Entry> View<E> {
    /// The entries, when lookups read them from memory.
    fn resident(&self) -> Option<&Vec<E>> {
        match self {
            View::Active { entries, .. } | View::InMemory { entries, .. } => Some(entries),
            View::Sealed { .. } => None,
        }
    }

    /// The number of published entries.
    fn len(&self) -> usize {
        match self {
            View::Active { entries, .. } | View::InMemory { entries, .. } => entries.len(),
            View::Sealed { entries, .. } => *entries,
        }
    }

    /// The file behind the index; `None` for an in-memory index.
    fn backing(&self) -> Option<&BackingFile> {
        match self {
            View::Active { backing, .. } | View::Sealed { backing, .. } => Some(backing),
            View::InMemory { .. } => None,
        }
    }
}

#[derive(Debug)]
struct State<E> {
    path: Arc<Path>,
    /// Whether lookups may map a sealed file. A reader in another process than the writer must
    /// not (ARCHITECTURE.md §3, invariant 17): the writer may shrink a file it never mapped itself.
    mapping_allowed: bool,
    view: View<E>,
    /// The path and view a [`restart_at`](IndexFile::restart_at) replaced, until the rebuild
    /// is kept ([`finish_restart`](IndexFile::finish_restart)) or abandoned
    /// ([`abandon_restart`](IndexFile::abandon_restart)): an abandoned rebuild leaves the index
    /// as it was, file and entries.
    replaced: Option<(Arc<Path>, View<E>)>,
}

/// An index file of `E` entries, or an index with no file (see [`in_memory`](Self::in_memory)).
/// See the [module docs](self).
///
/// Locking: `mutation` serializes every change (append, truncate, seal, rename); readers never
/// take it. `state` is held by readers for a lookup in the mirror, and by writers only to
/// publish a finished change, so no I/O ever happens under its write lock except the one-time
/// `mmap` call of a sealed index.
#[derive(Debug)]
pub(crate) struct IndexFile<E: Entry> {
    max_entries: usize,
    mutation: Mutex<()>,
    state: RwLock<State<E>>,
    /// Set once the segment is deleted (renamed `.deleted`, waiting for its last reader):
    /// the drop then writes no pending entries into a file about to go.
    retired: std::sync::atomic::AtomicBool,
}

impl<E: Entry> IndexFile<E> {
    /// Creates a new, empty, writable index file at `path`; it must not exist.
    pub(crate) fn create(
        storage: &Arc<dyn Storage>,
        path: &Path,
        max_entries: usize,
    ) -> Result<Self> {
        let file = storage.open(path, OpenMode::CreateNew)?;
        Ok(Self::with_state(
            max_entries,
            path,
            View::Active {
                entries: Vec::new(),
                backing: BackingFile {
                    storage: Arc::clone(storage),
                    file,
                    writable: true,
                    mapped: false,
                },
                written: 0,
            },
        ))
    }

    /// Creates an empty, writable index with no file behind it: every method works as on an
    /// active index, but nothing ever reaches a storage. `path` only names the index in errors.
    pub(crate) fn in_memory(path: &Path, max_entries: usize) -> Self {
        Self::with_state(
            max_entries,
            path,
            View::InMemory {
                entries: Vec::new(),
                sealed: false,
            },
        )
    }

    /// Opens an existing index file. A trailing partial entry is ignored (and cut off when
    /// `writable`). Writable: the entries are read into the mirror (O(entries)). Read-only:
    /// O(1), a length and the last entry.
    pub(crate) fn open(
        storage: &Arc<dyn Storage>,
        path: &Path,
        max_entries: usize,
        writable: bool,
    ) -> Result<Self> {
        let mode = if writable {
            OpenMode::ReadWrite
        } else {
            OpenMode::Read
        };
        let file = storage.open(path, mode)?;
        let len = file.len()?;
        let entries = usize::try_from(len / E::SIZE as u64).map_err(|_| Error::Corrupt {
            file: path.to_path_buf(),
            position: 0,
            what: Corruption::BadIndexEntry(format!("index of {len} bytes is too large")),
        })?;
        let whole = entry_position::<E>(entries);
        let backing = BackingFile {
            storage: Arc::clone(storage),
            file: Arc::clone(&file),
            writable,
            mapped: false,
        };
        let view = if writable {
            if len != whole {
                // A torn append left a partial entry: cut it, so the file holds exactly the
                // entries the mirror does. Nothing maps this file yet, so shrinking is safe.
                file.set_len(whole)?;
            }
            View::Active {
                entries: read_entries(&*file, entries)?,
                backing,
                written: entries,
            }
        } else {
            let last = match entries.checked_sub(1) {
                Some(n) => {
                    let source = Source {
                        path: Arc::from(path),
                        kind: SourceKind::Positional {
                            file: Arc::clone(&file),
                            entries,
                        },
                    };
                    Some(source.get(n)?)
                }
                None => None,
            };
            View::Sealed {
                backing,
                entries,
                last,
                mapping: MapState::NotYet,
            }
        };
        Ok(Self::with_state(max_entries, path, view))
    }

    fn with_state(max_entries: usize, path: &Path, view: View<E>) -> Self {
        IndexFile {
            max_entries,
            mutation: Mutex::new(()),
            state: RwLock::new(State {
                path: Arc::from(path),
                mapping_allowed: true,
                view,
                replaced: None,
            }),
            retired: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The segment was deleted: its pending entries are not worth writing when it drops.
    pub(crate) fn retire(&self) {
        self.retired
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// The most entries the file may hold.
    pub(crate) fn max_entries(&self) -> usize {
        self.max_entries
    }

    /// The number of published entries.
    pub(crate) fn entries(&self) -> usize {
        self.state.read().view.len()
    }

    /// Whether the index is active (writable); `false` once sealed.
    pub(crate) fn is_active(&self) -> bool {
        matches!(
            self.state.read().view,
            View::Active { .. } | View::InMemory { sealed: false, .. }
        )
    }

    /// Whether the index has no file behind it.
    pub(crate) fn is_in_memory(&self) -> bool {
        matches!(self.state.read().view, View::InMemory { .. })
    }

    /// The current path of the file.
    pub(crate) fn path(&self) -> PathBuf {
        self.state.read().path.to_path_buf()
    }

    /// The last published entry, without I/O.
    pub(crate) fn last(&self) -> Option<E> {
        match &self.state.read().view {
            View::Active { entries, .. } | View::InMemory { entries, .. } => {
                entries.last().copied()
            }
            View::Sealed { last, .. } => *last,
        }
    }

    /// The length of the file on the storage, counting an active index's pending entries as
    /// written; for an in-memory index, the length a file of its entries would have.
    pub(crate) fn file_len(&self) -> Result<u64> {
        let (file, pending_end) = {
            let state = self.state.read();
            match &state.view {
                // Entries still pending count as the file's: it will hold them.
                View::Active {
                    entries, backing, ..
                } => (
                    Arc::clone(&backing.file),
                    entry_position::<E>(entries.len()),
                ),
                View::Sealed { backing, .. } => (Arc::clone(&backing.file), 0),
                View::InMemory { entries, .. } => return Ok(entry_position::<E>(entries.len())),
            }
        };
        Ok(file.len()?.max(pending_end))
    }

    /// Makes the index read-only; the in-memory mirror is dropped and later lookups read the file
    /// (mapped lazily), so the entries still pending are written first. It does not sync: the log syncs a sealed segment's files off the append
    /// path (ARCHITECTURE.md §6), and a mapping sees the page cache either way. Sealing a sealed
    /// index does nothing. Without a file, the entries stay in memory and sealing only refuses
    /// further appends.
    pub(crate) fn seal(&self) -> Result<()> {
        let _mutation = self.mutation.lock();
        // A sealed index is read from its file: it must hold every entry first.
        self.write_pending_locked()?;
        let old_view = {
            let mut state = self.state.write();
            match &mut state.view {
                View::Active {
                    entries, backing, ..
                } => {
                    let sealed = View::Sealed {
                        backing: backing.clone(),
                        entries: entries.len(),
                        last: entries.last().copied(),
                        mapping: MapState::NotYet,
                    };
                    Some(std::mem::replace(&mut state.view, sealed))
                }
                View::InMemory { sealed, .. } => {
                    *sealed = true;
                    None
                }
                View::Sealed { .. } => None,
            }
        };
        // Free the mirror outside the lock.
        drop(old_view);
        Ok(())
    }

    /// Makes a sealed index active again: reopens the file for writing if needed and loads the
    /// entries into the mirror (O(entries)). Without a file, only lifts the seal. A no-op on an
    /// active index.
    pub(crate) fn make_writable(&self) -> Result<()> {
        let _mutation = self.mutation.lock();
        let sealed_file = {
            let state = self.state.read();
            match &state.view {
                View::Sealed {
                    backing, entries, ..
                } => Some((Arc::clone(&state.path), backing.clone(), *entries)),
                View::Active { .. } | View::InMemory { .. } => None,
            }
        };
        let Some((path, backing, count)) = sealed_file else {
            if let View::InMemory { sealed, .. } = &mut self.state.write().view {
                *sealed = false;
            }
            return Ok(());
        };
        let backing = if backing.writable {
            backing
        } else {
            BackingFile {
                file: backing.storage.open(&path, OpenMode::ReadWrite)?,
                writable: true,
                ..backing
            }
        };
        let mirror = read_entries(&*backing.file, count)?;
        // A trailing partial entry (from a torn append) needs no cut: the next append
        // overwrites it whole, and a reopen ignores it. Cutting would shrink a maybe-mapped file.
        let old_view = std::mem::replace(
            &mut self.state.write().view,
            View::Active {
                written: mirror.len(),
                entries: mirror,
                backing,
            },
        );
        drop(old_view);
        Ok(())
    }

    /// Starts the index over, empty and active, on a new file created at `temp` (a file left
    /// there earlier is removed first); the old file is left as it is, and remembered. A
    /// rebuild writes its entries there and renames the file into place once they are synced
    /// ([`finish_restart`](Self::finish_restart)): no write ever reaches the old file's inode,
    /// so a crash cannot leave the old name holding unsynced entries that read back as zeros.
    /// A rebuild that finds it must not replace the index gives it back as it was
    /// ([`abandon_restart`](Self::abandon_restart)). Without a file, the entries start over
    /// empty and unsealed, the old ones remembered alike.
    pub(crate) fn restart_at(&self, temp: &Path) -> Result<()> {
        let _mutation = self.mutation.lock();
        let backing = self.state.read().view.backing().cloned();
        let fresh = match backing {
            None => View::InMemory {
                entries: Vec::new(),
                sealed: false,
            },
            Some(backing) => {
                if backing.storage.exists(temp)? {
                    backing.storage.remove(temp)?;
                }
                let file = backing.storage.open(temp, OpenMode::CreateNew)?;
                View::Active {
                    entries: Vec::new(),
                    backing: BackingFile {
                        file,
                        writable: true,
                        mapped: false,
                        ..backing
                    },
                    written: 0,
                }
            }
        };
        let dropped = {
            let mut state = self.state.write();
            let old_path = std::mem::replace(&mut state.path, Arc::from(temp));
            let old_view = std::mem::replace(&mut state.view, fresh);
            if state.replaced.is_none() {
                state.replaced = Some((old_path, old_view));
                None
            } else {
                // Restarted twice: the first restart's old index is the one to give back.
                Some(old_view)
            }
        };
        // Drop any mapping outside the lock.
        drop(dropped);
        Ok(())
    }

    /// Keeps what a rebuild wrote since [`restart_at`](Self::restart_at): renames its file to
    /// `path` (over the old one; the caller syncs the directory) and forgets the old index. On
    /// an index not restarted, a plain [`rename_to`](Self::rename_to).
    pub(crate) fn finish_restart(&self, path: &Path) -> Result<()> {
        self.rename_to(path)?;
        let old = self.state.write().replaced.take();
        drop(old);
        Ok(())
    }

    /// Gives back the index a [`restart_at`](Self::restart_at) replaced, path, file and
    /// entries, and removes the file the rebuild wrote (open deletes it anyway, by its
    /// `*.deleted` name, if this cannot). A no-op on an index not restarted.
    pub(crate) fn abandon_restart(&self) -> Result<()> {
        let _mutation = self.mutation.lock();
        let (written_path, written_view) = {
            let mut state = self.state.write();
            let Some((old_path, old_view)) = state.replaced.take() else {
                return Ok(());
            };
            let written_path = std::mem::replace(&mut state.path, old_path);
            (written_path, std::mem::replace(&mut state.view, old_view))
        };
        let storage = written_view
            .backing()
            .map(|backing| Arc::clone(&backing.storage));
        drop(written_view);
        match storage {
            Some(storage) => storage.remove(&written_path),
            None => Ok(()),
        }
    }

    /// Renames the file (for example to `<name>.deleted`) and remembers the new path; without a
    /// file, only remembers it. The caller syncs the directory, so that several renames share
    /// one directory sync.
    pub(crate) fn rename_to(&self, new_path: &Path) -> Result<()> {
        let _mutation = self.mutation.lock();
        let (old, storage) = {
            let state = self.state.read();
            (
                Arc::clone(&state.path),
                state
                    .view
                    .backing()
                    .map(|backing| Arc::clone(&backing.storage)),
            )
        };
        if let Some(storage) = storage {
            storage.rename(&old, new_path)?;
        }
        self.state.write().path = Arc::from(new_path);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
