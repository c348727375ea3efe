//! Reads: [`Source`], the consistent view of an index's entries that one read uses (the active
//! index's mirror under the state's read lock, a sealed file's mapping, or positional reads), the
//! lazy mapping of a sealed file on its first lookup and its release, and the sequential reads of
//! whole files (open, full checks).

use std::path::Path;
use std::sync::Arc;

use crate::error::{Corruption, Error, Result};
use crate::storage::{ReadMapping, StorageFile};
use crate::sync::{MappedRwLockReadGuard, RwLockReadGuard};

use super::search::{SlotRange, slot_range};
use super::{
    Entry, IndexFile, MAX_ENTRY_SIZE, MapState, READ_CHUNK_BYTES, View, entry_position, invalid,
};

/// A consistent view of an index's entries for one read operation.
///
/// The `Memory` variant holds the state's read lock: keep a `Source` only for the duration of a
/// search, and never while taking the state's write lock.
pub(crate) struct Source<'a, E: Entry> {
    pub(super) path: Arc<Path>,
    pub(super) kind: SourceKind<'a, E>,
}

pub(super) enum SourceKind<'a, E: Entry> {
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
pub(super) fn read_entries<E: Entry>(file: &dyn StorageFile, count: usize) -> Result<Vec<E>> {
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

impl<E: Entry> IndexFile<E> {
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
}
