//! Appends and syncs: an entry is published in the active index's mirror at once, and reaches
//! the file with the others pending, a page of them in one write, before a sync and before the
//! index seals (see [`View::Active`]). A sync writes what is pending and makes the file durable.

use std::sync::Arc;

use crate::error::Result;

use super::{
    Entry, IndexFile, MAX_ENTRY_SIZE, PENDING_WRITE_BYTES, View, encoded, entry_position, invalid,
};

impl<E: Entry> IndexFile<E> {
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
    pub(super) fn write_pending_locked(&self) -> Result<()> {
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
}

/// An active index dropped without a sync or a seal (a log dropped after a failed operation, a
/// tool, a test) still leaves its file holding every entry, as when each entry was written at
/// once. Best effort: nothing can report the error, and a crash-time file short of the mirror
/// is what recovery expects anyway.
impl<E: Entry> Drop for IndexFile<E> {
    fn drop(&mut self) {
        if !*self.retired.get_mut() {
            let _ = self.write_pending_locked();
        }
    }
}
