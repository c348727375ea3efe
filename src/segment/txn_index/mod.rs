//! [`TransactionIndex`]: a segment's `.txnindex`, the aborted transactions whose ABORT marker
//! lies in the segment, and [`AbortedTxn`], its 34-byte entry (FORMAT.md §10).
//!
//! A `read_committed` fetch collects from it the aborted transactions that overlap what it
//! returns, so that the consumer can drop their batches. The file is created on the first entry,
//! as Kafka does: most segments never hold an aborted transaction, and have no `.txnindex`.
//!
//! Entries are appended in marker order, so their `lastOffset`s strictly increase; the file has
//! no header and no checksum. A torn tail (fewer than 34 bytes) or an entry out of order or
//! below the segment's base fails [`TransactionIndex::sanity_check`], and the segment is then
//! recovered (its index rebuilt from the `.log`), as Kafka's loader does.
//!
//! Readers share the index with the one appender: reads take a read lock and use positional
//! reads, appends and cuts take the write lock.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Corruption, Error, Result};
use crate::storage::{OpenMode, Storage, StorageFile};
use crate::sync::RwLock;

/// The only `.txnindex` entry version Kafka writes.
pub const ABORTED_TXN_VERSION: i16 = 0;

/// One aborted transaction: its producer, its offsets, and the LSO when its marker was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AbortedTxn {
    /// The producer whose transaction was aborted.
    pub producer_id: i64,
    /// The offset of the transaction's first batch.
    pub first_offset: i64,
    /// The offset of the ABORT marker.
    pub last_offset: i64,
    /// The first offset of the earliest other transaction still open when the marker was
    /// written, or the marker's offset + 1 when none was: a fetch bounded below it needs no
    /// entry after this one.
    pub last_stable_offset: i64,
}

impl AbortedTxn {
    /// The bytes of one entry: `i16 version | i64 producerId | i64 firstOffset | i64 lastOffset
    /// | i64 lastStableOffset`, big-endian.
    pub const SIZE: usize = 34;

    /// The entry's bytes, version 0.
    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut out = [0u8; Self::SIZE];
        out[0..2].copy_from_slice(&ABORTED_TXN_VERSION.to_be_bytes());
        out[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        out[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        out[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        out[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        out
    }

    /// Decodes one entry; `None` when its version is not 0 (Kafka refuses any above its own).
    pub fn from_bytes(bytes: &[u8; Self::SIZE]) -> Option<AbortedTxn> {
        let i64_at = |at: usize| {
            let mut field = [0u8; 8];
            field.copy_from_slice(&bytes[at..at + 8]);
            i64::from_be_bytes(field)
        };
        (i16::from_be_bytes([bytes[0], bytes[1]]) == ABORTED_TXN_VERSION).then(|| AbortedTxn {
            producer_id: i64_at(2),
            first_offset: i64_at(10),
            last_offset: i64_at(18),
            last_stable_offset: i64_at(26),
        })
    }
}

/// What [`TransactionIndex::collect`] found (Kafka's `TxnIndexSearchResult`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TxnIndexSearchResult {
    /// The aborted transactions that overlap the fetched range, in index order.
    pub aborted: Vec<AbortedTxn>,
    /// Whether the search may stop here: an entry's `lastStableOffset` reached the upper bound,
    /// so no later segment's index holds a transaction that overlaps the range.
    pub complete: bool,
}

/// The mutable part, behind the lock.
#[derive(Debug)]
struct State {
    /// Where the file is, or will be created.
    path: PathBuf,
    /// The open file; `None` until the first entry (or when the file does not exist).
    file: Option<Arc<dyn StorageFile>>,
    /// The bytes of whole entries in the file: reads stop there, appends start there.
    len: u64,
    /// The last entry's `lastOffset`, the bound the next append must exceed.
    last_offset: Option<i64>,
}

/// A segment's `.txnindex`: the aborted transactions whose marker lies in the segment.
#[derive(Debug)]
pub struct TransactionIndex {
    storage: Arc<dyn Storage>,
    base_offset: i64,
    writable: bool,
    state: RwLock<State>,
}

impl TransactionIndex {
    /// Opens the `.txnindex` at `path` for the segment at `base_offset`, if the file exists, and
    /// otherwise an empty index whose file the first [`append`](Self::append) creates. Nothing is
    /// checked but the last whole entry, read to order the next append: call
    /// [`sanity_check`](Self::sanity_check) before trusting the rest. A read-only index
    /// (`writable` false) never writes, creates or removes a file.
    pub fn open(
        storage: &Arc<dyn Storage>,
        path: &Path,
        base_offset: i64,
        writable: bool,
    ) -> Result<TransactionIndex> {
        let mode = if writable {
            OpenMode::ReadWrite
        } else {
            OpenMode::Read
        };
        // Most segments have no `.txnindex`: look before opening, so that their open costs no
        // failed open.
        let file = if storage.exists(path)? {
            match storage.open(path, mode) {
                Ok(file) => Some(file),
                Err(error) if error.io_kind() == Some(std::io::ErrorKind::NotFound) => None,
                Err(error) => return Err(error),
            }
        } else {
            None
        };
        let size = AbortedTxn::SIZE as u64;
        let (len, last_offset) = match &file {
            Some(file) => {
                let len = file.len()? / size * size;
                let last = if len >= size {
                    let mut bytes = [0u8; AbortedTxn::SIZE];
                    file.read_exact_at(&mut bytes, len - size)?;
                    AbortedTxn::from_bytes(&bytes).map(|txn| txn.last_offset)
                } else {
                    None
                };
                (len, last)
            }
            None => (0, None),
        };
        Ok(TransactionIndex {
            storage: Arc::clone(storage),
            base_offset,
            writable,
            state: RwLock::new(State {
                path: path.to_path_buf(),
                file,
                len,
                last_offset,
            }),
        })
    }

    /// An empty, writable index whose file does not exist yet (a new segment's): no I/O until
    /// the first [`append`](Self::append) creates the file.
    pub fn new_empty(
        storage: &Arc<dyn Storage>,
        path: &Path,
        base_offset: i64,
    ) -> TransactionIndex {
        TransactionIndex {
            storage: Arc::clone(storage),
            base_offset,
            writable: true,
            state: RwLock::new(State {
                path: path.to_path_buf(),
                file: None,
                len: 0,
                last_offset: None,
            }),
        }
    }

    /// The segment's base offset: no entry's `lastOffset` may lie below it.
    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }

    /// Where the file is, or will be created.
    pub fn path(&self) -> PathBuf {
        self.state.read().path.clone()
    }

    /// Whether the file exists (this index created or opened it).
    pub fn file_exists(&self) -> bool {
        self.state.read().file.is_some()
    }

    /// The number of whole entries.
    pub fn entries(&self) -> usize {
        usize::try_from(self.state.read().len / AbortedTxn::SIZE as u64).unwrap_or(usize::MAX)
    }

    /// The last entry's `lastOffset`, if any.
    pub fn last_offset(&self) -> Option<i64> {
        self.state.read().last_offset
    }

    /// Appends `txn`, creating the file on the first entry.
    ///
    /// [`Error::InvalidArgument`] when its `lastOffset` is not above the last entry's (markers
    /// are appended in offset order) or lies below the segment's base, and when the index is
    /// read-only. Durability comes with [`flush`](Self::flush).
    pub fn append(&self, txn: AbortedTxn) -> Result<()> {
        let mut state = self.state.write();
        if !self.writable {
            return Err(Error::InvalidArgument {
                why: format!("{} is read-only", state.path.display()),
            });
        }
        if let Some(last) = state.last_offset.filter(|&last| last >= txn.last_offset) {
            return Err(Error::InvalidArgument {
                why: format!(
                    "the last offset of appended transactions must increase: {} is not above {last} \
                     in {}",
                    txn.last_offset,
                    state.path.display()
                ),
            });
        }
        if txn.last_offset < self.base_offset {
            return Err(Error::InvalidArgument {
                why: format!(
                    "an aborted transaction ending at {} does not belong in the segment at {}",
                    txn.last_offset, self.base_offset
                ),
            });
        }
        let file = match &state.file {
            Some(file) => Arc::clone(file),
            None => {
                let file = self.storage.open(&state.path, OpenMode::Create)?;
                state.file = Some(Arc::clone(&file));
                file
            }
        };
        // On an error, a torn entry past `len` is ignored by reads and overwritten by the next
        // append.
        file.write_all_at(&txn.to_bytes(), state.len)?;
        state.len += AbortedTxn::SIZE as u64;
        state.last_offset = Some(txn.last_offset);
        Ok(())
    }

    /// Every entry, in file order. A torn tail is left out; an entry of another version is
    /// [`Error::Corrupt`].
    pub fn all(&self) -> Result<Vec<AbortedTxn>> {
        let mut all = Vec::new();
        self.for_each(|_, txn| {
            all.push(txn);
            true
        })?;
        Ok(all)
    }

    /// The aborted transactions a fetch of `[fetch_offset, upper_bound)` must know of: every
    /// entry with `lastOffset >= fetch_offset` and `firstOffset < upper_bound`. The search is
    /// complete at the first entry whose `lastStableOffset >= upper_bound` (Kafka's
    /// `collectAbortedTxns`): when that marker was written no other transaction was open below
    /// the bound, so no later marker (in this index or a later segment's) can abort one that
    /// overlaps the range.
    pub fn collect(&self, fetch_offset: i64, upper_bound: i64) -> Result<TxnIndexSearchResult> {
        let mut result = TxnIndexSearchResult::default();
        self.for_each(|_, txn| {
            if txn.last_offset >= fetch_offset && txn.first_offset < upper_bound {
                result.aborted.push(txn);
            }
            if txn.last_stable_offset >= upper_bound {
                result.complete = true;
                return false;
            }
            true
        })?;
        Ok(result)
    }

    /// Kafka's sanity check, made strict: [`Error::Corrupt`] when the file ends in a torn entry,
    /// holds an entry of another version, an entry whose `lastOffset` lies below the segment's
    /// base, or one whose `lastOffset` is not above the one before it. The log then rebuilds the
    /// segment's index from its `.log` (or, opened read-only, reports the error).
    pub fn sanity_check(&self) -> Result<()> {
        let (path, file_len, whole) = {
            let state = self.state.read();
            let Some(file) = &state.file else {
                return Ok(());
            };
            (state.path.clone(), file.len()?, state.len)
        };
        if file_len > whole {
            return Err(Error::Corrupt {
                file: path,
                position: whole,
                what: Corruption::Truncated {
                    needed: AbortedTxn::SIZE as u64,
                    available: file_len - whole,
                },
            });
        }
        let mut bad = None;
        let mut previous: Option<i64> = None;
        self.for_each(|position, txn| {
            let bound = previous.map_or(self.base_offset, |p| p.saturating_add(1));
            if txn.last_offset < bound {
                bad = Some((position, txn.last_offset, bound));
                return false;
            }
            previous = Some(txn.last_offset);
            true
        })?;
        match bad {
            Some((position, offset, bound)) => Err(Error::Corrupt {
                file: path,
                position,
                what: Corruption::OffsetOrder { offset, bound },
            }),
            None => Ok(()),
        }
    }

    /// Removes the entries whose `lastOffset >= offset` (a truncation of the segment to
    /// `offset`: their markers are gone). Entries are ordered, so this cuts the file.
    pub fn truncate_to(&self, offset: i64) -> Result<()> {
        let mut keep = None;
        let mut new_last = None;
        self.for_each(|position, txn| {
            if txn.last_offset >= offset {
                keep = Some(position);
                return false;
            }
            new_last = Some(txn.last_offset);
            true
        })?;
        let Some(keep) = keep else {
            return Ok(());
        };
        let mut state = self.state.write();
        self.check_writable(&state)?;
        if let Some(file) = &state.file {
            file.set_len(keep)?;
        }
        state.len = keep;
        state.last_offset = new_last;
        Ok(())
    }

    /// Empties the index (recovery rebuilds it from the `.log`). The file stays, empty.
    pub fn reset(&self) -> Result<()> {
        let mut state = self.state.write();
        self.check_writable(&state)?;
        if let Some(file) = &state.file {
            file.set_len(0)?;
        }
        state.len = 0;
        state.last_offset = None;
        Ok(())
    }

    /// Makes the entries durable (`fdatasync`); nothing to do without a file.
    pub fn flush(&self) -> Result<()> {
        let file = self.state.read().file.clone();
        match file {
            Some(file) => file.sync_data(),
            None => Ok(()),
        }
    }

    /// Removes the file, if there is one, and empties the index; returns whether a file was
    /// removed. The directory's durability is the caller's.
    pub fn delete_if_exists(&self) -> Result<bool> {
        let mut state = self.state.write();
        self.check_writable(&state)?;
        let removed = match self.storage.remove(&state.path) {
            Ok(()) => true,
            Err(error) if error.io_kind() == Some(std::io::ErrorKind::NotFound) => false,
            Err(error) => return Err(error),
        };
        state.file = None;
        state.len = 0;
        state.last_offset = None;
        Ok(removed)
    }

    /// Renames the file to `new_path` (a segment's `.deleted`, `.cleaned` or `.swap` rename),
    /// or, without a file, makes `new_path` the name the first entry will create. Open handles
    /// keep working.
    pub fn rename_to(&self, new_path: &Path) -> Result<()> {
        let mut state = self.state.write();
        self.check_writable(&state)?;
        if state.file.is_some() {
            self.storage.rename(&state.path, new_path)?;
        }
        state.path = new_path.to_path_buf();
        Ok(())
    }

    /// Catches up with a writer in another process (a read-only index of a live log): opens
    /// the file if it has appeared since, and reads its whole entries up to its current length.
    /// A writable index is its file's only writer and has nothing to catch up with.
    pub fn refresh(&self) -> Result<()> {
        if self.writable {
            return Ok(());
        }
        let mut state = self.state.write();
        if state.file.is_none() {
            if !self.storage.exists(&state.path)? {
                return Ok(());
            }
            state.file = Some(self.storage.open(&state.path, OpenMode::Read)?);
        }
        let Some(file) = state.file.clone() else {
            return Ok(());
        };
        let size = AbortedTxn::SIZE as u64;
        // A writer's truncation may also have shortened it.
        let len = file.len()? / size * size;
        let last_offset = if len >= size {
            let mut bytes = [0u8; AbortedTxn::SIZE];
            file.read_exact_at(&mut bytes, len - size)?;
            AbortedTxn::from_bytes(&bytes).map(|txn| txn.last_offset)
        } else {
            None
        };
        state.len = len;
        state.last_offset = last_offset;
        Ok(())
    }

    fn check_writable(&self, state: &State) -> Result<()> {
        if self.writable {
            Ok(())
        } else {
            Err(Error::InvalidArgument {
                why: format!("{} is read-only", state.path.display()),
            })
        }
    }

    /// Calls `visit(position, entry)` for each whole entry in order until it returns false.
    fn for_each(&self, mut visit: impl FnMut(u64, AbortedTxn) -> bool) -> Result<()> {
        let state = self.state.read();
        let Some(file) = &state.file else {
            return Ok(());
        };
        // Read in chunks of whole entries: one read for a typical index.
        const CHUNK_ENTRIES: u64 = 256;
        let size = AbortedTxn::SIZE as u64;
        let mut chunk = Vec::new();
        let mut position = 0u64;
        while position < state.len {
            let bytes = (state.len - position).min(CHUNK_ENTRIES * size);
            chunk.resize(usize::try_from(bytes).unwrap_or(0), 0);
            file.read_exact_at(&mut chunk, position)?;
            for entry in chunk.chunks_exact(AbortedTxn::SIZE) {
                let Ok(entry) = <&[u8; AbortedTxn::SIZE]>::try_from(entry) else {
                    continue;
                };
                let Some(txn) = AbortedTxn::from_bytes(entry) else {
                    return Err(Error::Corrupt {
                        file: state.path.clone(),
                        position,
                        what: Corruption::BadHeader("the aborted transaction's version is not 0"),
                    });
                };
                if !visit(position, txn) {
                    return Ok(());
                }
                position += size;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
