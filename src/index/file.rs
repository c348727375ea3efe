//! The machinery both indexes share: the entry codec seam, the file with its in-memory mirror or
//! lazy read path, the warm-tail binary search, and the replace-by-rename truncation.
//!
//! [`OffsetIndex`](super::OffsetIndex) and [`TimeIndex`](super::TimeIndex) are thin typed wrappers
//! over [`IndexFile`]: they turn absolute offsets into relative ones, validate arguments and decide
//! what an append means; everything about bytes, files, locks and sealing lives here once.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::sync::{MappedRwLockReadGuard, Mutex, RwLock, RwLockReadGuard};

use crate::error::{Corruption, Error, Result};
use crate::storage::{OpenMode, ReadMapping, Storage, StorageFile};

/// The suffix of the temporary file a truncation writes before renaming it over the index.
///
/// Not Kafka's `.swap`: Kafka's log loader (checked in 3.6 and 4.x: `LogLoader.load`, "rename
/// all swap files") renames every leftover `*.swap` file into place, so a replacement torn by a
/// crash would become a live index that a broker trusts after a hand-off. Every name ending in
/// `.deleted` is instead removed unread by Kafka's loader, which is exactly right for a
/// leftover; partlog's loader must delete it too.
pub(crate) const TRUNCATION_TEMP_SUFFIX: &str = ".swap.deleted";

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

/// The result of a floor/ceiling search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SlotRange {
    /// The largest slot whose key is <= the target.
    pub floor: Option<usize>,
    /// The smallest slot whose key is >= the target.
    pub ceil: Option<usize>,
}

/// Finds the floor and ceiling slots of `target` among `len` entries with strictly increasing
/// keys, trying the warm tail (the last `warm` entries) first as Kafka does.
///
/// On unsorted (corrupt) keys it still terminates with in-range slots; the answer is then simply
/// wrong, which the caller's check against the log catches.
pub(crate) fn slot_range(
    len: usize,
    warm: usize,
    mut key_at: impl FnMut(usize) -> Result<i64>,
    target: i64,
) -> Result<SlotRange> {
    let Some(last) = len.checked_sub(1) else {
        return Ok(SlotRange {
            floor: None,
            ceil: None,
        });
    };
    let first_hot = last.saturating_sub(warm);
    let hot_key = key_at(first_hot)?;
    // Invariant of the search below: key(lo) <= target, and lo_key caches key(lo).
    let (mut lo, mut lo_key, mut hi) = if hot_key < target {
        (first_hot, hot_key, last)
    } else {
        let first_key = if first_hot == 0 { hot_key } else { key_at(0)? };
        if first_key > target {
            return Ok(SlotRange {
                floor: None,
                ceil: Some(0),
            });
        }
        (0, first_key, first_hot)
    };
    while lo < hi {
        // Round up so that `lo = mid` always makes progress.
        let mid = lo + (hi - lo).div_ceil(2);
        let key = key_at(mid)?;
        match key.cmp(&target) {
            std::cmp::Ordering::Greater => hi = mid - 1,
            std::cmp::Ordering::Less => {
                lo = mid;
                lo_key = key;
            }
            std::cmp::Ordering::Equal => {
                return Ok(SlotRange {
                    floor: Some(mid),
                    ceil: Some(mid),
                });
            }
        }
    }
    if lo_key == target {
        return Ok(SlotRange {
            floor: Some(lo),
            ceil: Some(lo),
        });
    }
    Ok(SlotRange {
        floor: Some(lo),
        ceil: (lo < last).then_some(lo + 1),
    })
}

/// The first slot whose key is >= `target` among `len` entries with non-decreasing keys
/// (`len` if none). Unlike [`slot_range`] this is exact with duplicate keys, which the time
/// index's offsets may have; it serves truncation, which is rare, so it has no warm path.
pub(crate) fn partition_point(
    len: usize,
    mut key_at: impl FnMut(usize) -> Result<i64>,
    target: i64,
) -> Result<usize> {
    let (mut lo, mut hi) = (0, len);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if key_at(mid)? < target {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
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
}

/// A consistent view of an index's entries for one read operation.
///
/// The `Memory` variant holds the state's read lock: keep a `Source` only for the duration of a
/// search, and never while taking the state's write lock.
pub(crate) struct Source<'a, E: Entry> {
    path: Arc<Path>,
    kind: SourceKind<'a, E>,
}

enum SourceKind<'a, E: Entry> {
    Memory(MappedRwLockReadGuard<'a, [E]>),
    Mapped {
        bytes: Arc<ReadMapping>,
        entries: usize,
    },
    Positional {
        file: Arc<dyn StorageFile>,
        entries: usize,
    },
}

impl<E: Entry> Source<'_, E> {
    /// The number of entries this view holds.
    pub(crate) fn len(&self) -> usize {
        match &self.kind {
            SourceKind::Memory(entries) => entries.len(),
            SourceKind::Mapped { entries, .. } | SourceKind::Positional { entries, .. } => *entries,
        }
    }

    /// [`slot_range`] of `target` among this view's entries, keyed by `key`. An in-memory view
    /// (an active index's mirror, where every cold read's lookup lands) is searched as a slice:
    /// each probe is then a load, not a call through the view's kind and length checks.
    pub(crate) fn slot_range(&self, key: impl Fn(&E) -> i64, target: i64) -> Result<SlotRange> {
        match &self.kind {
            SourceKind::Memory(entries) => {
                let entries: &[E] = entries;
                slot_range(
                    entries.len(),
                    E::warm_entries(),
                    |n| {
                        entries
                            .get(n)
                            .map(&key)
                            .ok_or_else(|| invalid(format!("entry {n} does not exist")))
                    },
                    target,
                )
            }
            SourceKind::Mapped { .. } | SourceKind::Positional { .. } => slot_range(
                self.len(),
                E::warm_entries(),
                |n| self.get(n).map(|entry| key(&entry)),
                target,
            ),
        }
    }

    /// Entry `n`, decoded.
    pub(crate) fn get(&self, n: usize) -> Result<E> {
        if n >= self.len() {
            return Err(invalid(format!(
                "entry {n} does not exist: the index holds {} entries",
                self.len()
            )));
        }
        match &self.kind {
            SourceKind::Memory(entries) => entries
                .get(n)
                .copied()
                .ok_or_else(|| invalid(format!("entry {n} does not exist"))),
            SourceKind::Mapped { bytes, .. } => {
                let start = n.saturating_mul(E::SIZE);
                bytes
                    .get(start..start.saturating_add(E::SIZE))
                    .and_then(E::decode)
                    .ok_or_else(|| Error::Corrupt {
                        file: self.path.to_path_buf(),
                        position: entry_position::<E>(n),
                        what: Corruption::Truncated {
                            needed: entry_position::<E>(n + 1),
                            available: bytes.len() as u64,
                        },
                    })
            }
            SourceKind::Positional { file, .. } => {
                let mut buf = [0u8; MAX_ENTRY_SIZE];
                let slot = buf
                    .get_mut(..E::SIZE)
                    .ok_or_else(|| invalid("entry size"))?;
                file.read_exact_at(slot, entry_position::<E>(n))?;
                E::decode(slot).ok_or_else(|| invalid("entry size"))
            }
        }
    }
}

/// Reads `count` whole entries from the start of `file`, in chunks.
fn read_entries<E: Entry>(file: &dyn StorageFile, count: usize) -> Result<Vec<E>> {
    let mut entries = Vec::with_capacity(count);
    let chunk_entries = (READ_CHUNK_BYTES / E::SIZE).max(1);
    let mut buf = vec![0u8; chunk_entries * E::SIZE];
    while entries.len() < count {
        let n = chunk_entries.min(count - entries.len());
        let bytes = buf
            .get_mut(..n * E::SIZE)
            .ok_or_else(|| invalid("chunk size"))?;
        file.read_exact_at(bytes, entry_position::<E>(entries.len()))?;
        entries.extend(bytes.chunks_exact(E::SIZE).filter_map(E::decode));
    }
    Ok(entries)
}

/// The temporary path a truncation, or a sealed segment's index rebuild, writes before renaming
/// it over `path`.
pub(crate) fn truncation_temp_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(TRUNCATION_TEMP_SUFFIX);
    PathBuf::from(name)
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
            }),
        }
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

    /// A view of the entries for one read. A sealed index is mapped on the first call with
    /// `allow_map`; mutations pass `false` so that a file about to be replaced is not mapped.
    pub(crate) fn source(&self, allow_map: bool) -> Source<'_, E> {
        let state = self.state.read();
        let allow_map = allow_map && state.mapping_allowed;
        let path = Arc::clone(&state.path);
        let state = match RwLockReadGuard::try_map(state, |s| s.view.resident().map(Vec::as_slice))
        {
            Ok(entries) => {
                return Source {
                    path,
                    kind: SourceKind::Memory(entries),
                };
            }
            Err(state) => state,
        };
        if let View::Sealed {
            backing,
            entries,
            mapping,
            ..
        } = &state.view
        {
            match mapping {
                MapState::Mapped(bytes) => {
                    return Source {
                        path,
                        kind: SourceKind::Mapped {
                            bytes: Arc::clone(bytes),
                            entries: *entries,
                        },
                    };
                }
                MapState::NotYet if allow_map && *entries > 0 => {}
                MapState::NotYet | MapState::Unavailable => {
                    return Source {
                        path,
                        kind: SourceKind::Positional {
                            file: Arc::clone(&backing.file),
                            entries: *entries,
                        },
                    };
                }
            }
        }
        drop(state);
        self.map_and_source(allow_map)
    }

    /// The slow path of [`source`](Self::source): installs the mapping of a sealed index.
    fn map_and_source(&self, allow_map: bool) -> Source<'_, E> {
        {
            let mut guard = self.state.write();
            let state = &mut *guard;
            let path = Arc::clone(&state.path);
            let allow_map = allow_map && state.mapping_allowed;
            if let View::Sealed {
                backing,
                entries,
                mapping,
                ..
            } = &mut state.view
            {
                if allow_map && matches!(mapping, MapState::NotYet) {
                    *mapping = match backing.file.map_read() {
                        Ok(Some(bytes)) => {
                            backing.mapped = true;
                            MapState::Mapped(Arc::new(bytes))
                        }
                        Ok(None) => MapState::Unavailable,
                        Err(e) => {
                            // Out of mappings (vm.max_map_count) is no reason to fail a read.
                            log::warn!(
                                "cannot map {}, reading it with positional reads: {e}",
                                path.display()
                            );
                            MapState::Unavailable
                        }
                    };
                }
                let kind = match mapping {
                    MapState::Mapped(bytes) => SourceKind::Mapped {
                        bytes: Arc::clone(bytes),
                        entries: *entries,
                    },
                    MapState::NotYet | MapState::Unavailable => SourceKind::Positional {
                        file: Arc::clone(&backing.file),
                        entries: *entries,
                    },
                };
                return Source { path, kind };
            }
        }
        // Made writable in between: the fast path now finds the mirror, so this cannot recurse.
        self.source(false)
    }

    /// Allows or forbids mapping the sealed file; forbidding also drops a current mapping.
    pub(crate) fn set_mapping_allowed(&self, allowed: bool) {
        let released = {
            let mut state = self.state.write();
            state.mapping_allowed = allowed;
            match &mut state.view {
                View::Sealed { mapping, .. } if !allowed => {
                    std::mem::replace(mapping, MapState::NotYet)
                }
                _ => MapState::NotYet,
            }
        };
        drop(released);
    }

    /// Drops this index's mapping, if any; the next lookup maps again. Lets a caller bound the
    /// number of live mappings. Readers holding the old mapping keep valid bytes.
    pub(crate) fn release_mapping(&self) {
        let released = {
            let mut state = self.state.write();
            match &mut state.view {
                View::Sealed { mapping, .. } => std::mem::replace(mapping, MapState::NotYet),
                View::Active { .. } | View::InMemory { .. } => MapState::NotYet,
            }
        };
        // Unmap outside the lock.
        drop(released);
    }

    /// Calls `check` on every entry in order, for full checks. Entries in memory are walked
    /// under the read lock (an appender waits for the walk to publish, never for I/O); a sealed
    /// file is read in chunks without holding any lock.
    pub(crate) fn for_each(&self, mut check: impl FnMut(usize, E) -> Result<()>) -> Result<()> {
        let (file, count) = {
            let state = self.state.read();
            match &state.view {
                View::Active { entries, .. } | View::InMemory { entries, .. } => {
                    return entries
                        .iter()
                        .enumerate()
                        .try_for_each(|(n, entry)| check(n, *entry));
                }
                View::Sealed {
                    backing, entries, ..
                } => (Arc::clone(&backing.file), *entries),
            }
        };
        let chunk_entries = (READ_CHUNK_BYTES / E::SIZE).max(1);
        let mut buf = vec![0u8; chunk_entries * E::SIZE];
        let mut done = 0;
        while done < count {
            let n = chunk_entries.min(count - done);
            let bytes = buf
                .get_mut(..n * E::SIZE)
                .ok_or_else(|| invalid("chunk size"))?;
            file.read_exact_at(bytes, entry_position::<E>(done))?;
            for (i, chunk) in bytes.chunks_exact(E::SIZE).enumerate() {
                let entry = E::decode(chunk).ok_or_else(|| invalid("entry size"))?;
                check(done + i, entry)?;
            }
            done += n;
        }
        Ok(())
    }

    /// Appends the entry that `decide` returns, given the current entry count and last entry;
    /// `Ok(None)` from `decide` makes the call a no-op. Returns whether an entry was appended.
    ///
    /// The entry is published in memory at once (a reader sees it whole); an active index writes
    /// it to the file with the others pending, once they fill a page (see [`View::Active`]).
    pub(crate) fn append_with(
        &self,
        decide: impl FnOnce(usize, Option<E>) -> Result<Option<E>>,
    ) -> Result<bool> {
        let _mutation = self.mutation.lock();
        let (backing, count, last) = {
            let state = self.state.read();
            match &state.view {
                View::Active {
                    entries, backing, ..
                } => (
                    Some(backing.clone()),
                    entries.len(),
                    entries.last().copied(),
                ),
                View::InMemory {
                    entries,
                    sealed: false,
                } => (None, entries.len(), entries.last().copied()),
                View::Sealed { .. } | View::InMemory { sealed: true, .. } => {
                    return Err(invalid(format!(
                        "{} is sealed; make it writable before appending",
                        state.path.display()
                    )));
                }
            }
        };
        let Some(entry) = decide(count, last)? else {
            return Ok(false);
        };
        if count >= self.max_entries {
            return Err(invalid(format!(
                "the index is full: it holds {count} of at most {} entries",
                self.max_entries
            )));
        }
        let pending = match &mut self.state.write().view {
            View::Active {
                entries, written, ..
            } => {
                entries.push(entry);
                entries.len() - *written
            }
            View::InMemory { entries, .. } => {
                entries.push(entry);
                0
            }
            View::Sealed { .. } => 0,
        };
        if backing.is_some() && pending * E::SIZE >= PENDING_WRITE_BYTES {
            self.write_pending_locked()?;
        }
        Ok(true)
    }

    /// Writes the entries the file lacks (see [`View::Active`]); a no-op for an index that
    /// has none pending. [`sync`](Self::sync) and [`seal`](Self::seal) call it.
    pub(crate) fn write_pending(&self) -> Result<()> {
        let _mutation = self.mutation.lock();
        self.write_pending_locked()
    }

    /// [`write_pending`](Self::write_pending) with the mutation lock held, so that nothing
    /// appends or truncates between the copy of the pending entries and the write.
    fn write_pending_locked(&self) -> Result<()> {
        let (file, mapped, from, to, bytes) = {
            let state = self.state.read();
            let View::Active {
                entries,
                backing,
                written,
            } = &state.view
            else {
                return Ok(());
            };
            let Some(pending) = entries
                .get(*written..)
                .filter(|pending| !pending.is_empty())
            else {
                return Ok(());
            };
            let mut bytes = Vec::with_capacity(pending.len() * E::SIZE);
            let mut buf = [0u8; MAX_ENTRY_SIZE];
            for entry in pending {
                bytes.extend_from_slice(encoded(entry, &mut buf));
            }
            (
                Arc::clone(&backing.file),
                backing.mapped,
                *written,
                entries.len(),
                bytes,
            )
        };
        let position = entry_position::<E>(from);
        if let Err(e) = file.write_all_at(&bytes, position) {
            // Best effort: cut what a failed write tore, so that the file holds only whole
            // entries the mirror has. A later write rewrites them anyway, and a reopen drops a
            // partial entry.
            if !mapped {
                let _ = file.set_len(position);
            }
            return Err(e);
        }
        if let View::Active { written, .. } = &mut self.state.write().view {
            *written = to;
        }
        Ok(())
    }

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

    /// Writes the pending entries and makes the file durable (`fdatasync`); a no-op without a
    /// file. Does not block lookups, nor appends beyond the write of the pending entries.
    pub(crate) fn sync(&self) -> Result<()> {
        // An index is derived data, and a file short of the mirror is one recovery handles (it
        // trusts only the entries a sync found there): a failed write of the pending entries
        // (ENOSPC, say) leaves them pending for the next sync or the seal, and must not fail
        // the sync, which would poison the log for want of entries it can rebuild.
        if let Err(error) = self.write_pending() {
            log::warn!(
                "{}: writing the pending index entries failed ({error}); they stay pending",
                self.path().display()
            );
        }
        let file = self
            .state
            .read()
            .view
            .backing()
            .map(|backing| Arc::clone(&backing.file));
        match file {
            Some(file) => file.sync_data(),
            None => Ok(()),
        }
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
    /// there earlier is removed first); the old file is left as it is. A rebuild writes its
    /// entries there and renames the file into place once they are synced
    /// ([`rename_to`](Self::rename_to)): no write ever reaches the old file's inode, so a crash
    /// cannot leave the old name holding unsynced entries that read back as zeros. Without a
    /// file, only empties the entries.
    pub(crate) fn restart_at(&self, temp: &Path) -> Result<()> {
        let _mutation = self.mutation.lock();
        let backing = self.state.read().view.backing().cloned();
        let Some(backing) = backing else {
            if let View::InMemory { entries, .. } = &mut self.state.write().view {
                entries.clear();
            }
            return Ok(());
        };
        if backing.storage.exists(temp)? {
            backing.storage.remove(temp)?;
        }
        let file = backing.storage.open(temp, OpenMode::CreateNew)?;
        let fresh = BackingFile {
            file,
            writable: true,
            mapped: false,
            ..backing
        };
        let old_view = {
            let mut state = self.state.write();
            state.path = Arc::from(temp);
            std::mem::replace(
                &mut state.view,
                View::Active {
                    entries: Vec::new(),
                    backing: fresh,
                    written: 0,
                },
            )
        };
        // Drop the old mapping outside the lock.
        drop(old_view);
        Ok(())
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

/// An active index dropped without a sync or a seal (a log dropped after a failed operation, a
/// tool, a test) still leaves its file holding every entry, as when each entry was written at
/// once. Best effort: nothing can report the error, and a crash-time file short of the mirror
/// is what recovery expects anyway.
impl<E: Entry> Drop for IndexFile<E> {
    fn drop(&mut self) {
        let _ = self.write_pending_locked();
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
    use crate::index::offset_index::OffsetEntry;
    use crate::storage::OsStorage;

    fn naive(keys: &[i64], target: i64) -> SlotRange {
        SlotRange {
            floor: keys.iter().rposition(|&k| k <= target),
            ceil: keys.iter().position(|&k| k >= target),
        }
    }

    fn search(keys: &[i64], warm: usize, target: i64) -> SlotRange {
        slot_range(
            keys.len(),
            warm,
            |n| keys.get(n).copied().ok_or_else(|| invalid("out of range")),
            target,
        )
        .unwrap()
    }

    #[test]
    fn slot_range_matches_a_linear_scan_around_every_key_and_the_warm_boundary() {
        for len in [0usize, 1, 2, 3, 7, 8, 9, 10, 17, 40] {
            let keys: Vec<i64> = (0..len as i64).map(|i| i * 3 + 5).collect();
            for warm in [0usize, 1, 2, 4, 8, 100] {
                for target in -1..(len as i64 * 3 + 9) {
                    assert_eq!(
                        search(&keys, warm, target),
                        naive(&keys, target),
                        "len {len} warm {warm} target {target}"
                    );
                }
            }
        }
    }

    #[test]
    fn slot_range_stays_in_bounds_on_unsorted_keys() {
        let keys = [9i64, 3, 7, 1, 1, 12, -4, 0, 5];
        for warm in 0..10 {
            for target in -6..15 {
                let range = search(&keys, warm, target);
                assert!(range.floor.is_none_or(|n| n < keys.len()));
                assert!(range.ceil.is_none_or(|n| n < keys.len()));
            }
        }
    }

    #[test]
    fn partition_point_is_exact_with_duplicates() {
        let keys = [1i64, 3, 3, 3, 5, 5, 9];
        for target in 0..11 {
            let expected = keys.iter().position(|&k| k >= target).unwrap_or(keys.len());
            let got = partition_point(keys.len(), |n| Ok(keys[n]), target).unwrap();
            assert_eq!(got, expected, "target {target}");
        }
    }

    fn offset_entry(relative_offset: i32, position: i32) -> OffsetEntry {
        let mut bytes = relative_offset.to_be_bytes().to_vec();
        bytes.extend_from_slice(&position.to_be_bytes());
        OffsetEntry::decode(&bytes).unwrap()
    }

    #[test]
    fn a_mapping_held_across_a_truncation_keeps_reading_the_old_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.index");
        let storage: Arc<dyn Storage> = Arc::new(OsStorage::new());
        let index = IndexFile::<OffsetEntry>::create(&storage, &path, 1000).unwrap();
        for n in 0..100 {
            index
                .append_with(|_, _| Ok(Some(offset_entry(n, n * 10))))
                .unwrap();
        }
        index.seal().unwrap();
        let held = index.source(true);
        assert!(matches!(held.kind, SourceKind::Mapped { .. }));

        index.truncate_to_entries(10).unwrap();

        // The held view still sees all 100 old entries, byte for byte.
        assert_eq!(held.len(), 100);
        for n in 0..100 {
            assert_eq!(held.get(n as usize).unwrap(), offset_entry(n, n * 10));
        }
        // The index and the file at the path hold the 10 kept ones.
        assert_eq!(index.entries(), 10);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 80);
        let fresh = index.source(true);
        assert_eq!(fresh.len(), 10);
        assert_eq!(fresh.get(9).unwrap(), offset_entry(9, 90));
        assert!(fresh.get(10).is_err());
    }

    fn file_mapped<E: Entry>(index: &IndexFile<E>) -> bool {
        index
            .state
            .read()
            .view
            .backing()
            .is_some_and(|backing| backing.mapped)
    }

    #[test]
    fn sealed_open_maps_nothing_until_the_first_lookup() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.index");
        let storage: Arc<dyn Storage> = Arc::new(OsStorage::new());
        let index = IndexFile::<OffsetEntry>::create(&storage, &path, 1000).unwrap();
        index
            .append_with(|_, _| Ok(Some(offset_entry(1, 1))))
            .unwrap();
        drop(index);
        let sealed = IndexFile::<OffsetEntry>::open(&storage, &path, 1000, false).unwrap();
        assert!(matches!(
            sealed.state.read().view,
            View::Sealed {
                mapping: MapState::NotYet,
                ..
            }
        ));
        assert!(!file_mapped(&sealed));
        // Mutations and checks read without mapping.
        assert!(matches!(
            sealed.source(false).kind,
            SourceKind::Positional { .. }
        ));
        assert!(!file_mapped(&sealed));
        assert!(matches!(
            sealed.source(true).kind,
            SourceKind::Mapped { .. }
        ));
        assert!(file_mapped(&sealed));
        sealed.release_mapping();
        assert!(matches!(
            sealed.state.read().view,
            View::Sealed {
                mapping: MapState::NotYet,
                ..
            }
        ));
        // Forbidden, lookups read positionally and map nothing.
        sealed.source(true);
        sealed.set_mapping_allowed(false);
        assert!(matches!(
            sealed.state.read().view,
            View::Sealed {
                mapping: MapState::NotYet,
                ..
            }
        ));
        assert!(matches!(
            sealed.source(true).kind,
            SourceKind::Positional { .. }
        ));
        sealed.set_mapping_allowed(true);
        assert!(matches!(
            sealed.source(true).kind,
            SourceKind::Mapped { .. }
        ));
    }

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
