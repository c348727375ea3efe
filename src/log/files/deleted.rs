//! [`PendingDeletes`]: the files renamed `.deleted` that wait for the last reader of their
//! segment (ARCHITECTURE.md §3, invariant 10). Truncation, retention and compaction's swap queue
//! them under the writer mutex; the flusher, each pass and close reap them.
//!
//! Reaping unlinks outside the writer lock when it can (`Shared::reap_unpinned`, under the
//! reaping lock, so that a caller who reaps finds every unpinned file gone when it returns), and
//! under it at close and right after a truncation (`Shared::reap_deleted`).

use std::path::PathBuf;
use std::sync::Arc;

use crate::segment::Segment;
use crate::storage::Storage;

use crate::log::{Shared, Writer};

/// The files of one segment renamed `.deleted`, and the log's reference to the segment, which
/// tells whether a reader still pins it.
#[derive(Debug)]
pub(in crate::log) struct PendingDelete {
    paths: Vec<PathBuf>,
    segment: Option<Arc<Segment>>,
}

impl PendingDelete {
    /// The files still to remove.
    #[cfg(all(test, shuttle))]
    pub(in crate::log) fn paths(&self) -> &[PathBuf] {
        &self.paths
    }
}

/// The `.deleted` files not removed yet, behind the writer mutex.
#[derive(Debug, Default)]
pub(in crate::log) struct PendingDeletes {
    pending: Vec<PendingDelete>,
}

impl PendingDeletes {
    /// Queues the `.deleted` files `paths` of `segment` (the instance a reader may still pin, if
    /// one was open).
    pub(in crate::log) fn push(&mut self, paths: Vec<PathBuf>, segment: Option<Arc<Segment>>) {
        if let Some(segment) = &segment {
            // Its pending index entries would be written into a file about to go, while a
            // reader may still be reading (found by tests/reliability_read_truncation.rs).
            segment.retire();
        }
        self.pending.push(PendingDelete { paths, segment });
    }

    /// Whether nothing waits.
    #[cfg(all(test, shuttle))]
    pub(in crate::log) fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Takes out the ones whose segment no reader pins (every one when `force`), dropping the
    /// log's own reference to each segment.
    pub(in crate::log) fn take_unpinned(&mut self, force: bool) -> Vec<PendingDelete> {
        let mut ready = Vec::new();
        let mut index = 0;
        while let Some(pending) = self.pending.get(index) {
            let pinned = pending
                .segment
                .as_ref()
                .is_some_and(|s| Arc::strong_count(s) > 1);
            if pinned && !force {
                index += 1;
                continue;
            }
            let mut pending = self.pending.swap_remove(index);
            pending.segment = None;
            ready.push(pending);
        }
        ready
    }

    /// Queues again what a reap could not remove, for the next one.
    pub(in crate::log) fn retry(&mut self, failed: Vec<PendingDelete>) {
        self.pending.extend(failed);
    }
}

/// Removes the files of `pending`; returns what could not be removed, to retry later.
fn remove_pending(storage: &dyn Storage, mut pending: Vec<PendingDelete>) -> Vec<PendingDelete> {
    pending.retain_mut(|pending| {
        pending.paths.retain(|path| match storage.remove(path) {
            Ok(()) => false,
            Err(error) if error.io_kind() == Some(std::io::ErrorKind::NotFound) => false,
            Err(error) => {
                log::warn!("could not remove {}: {error}", path.display());
                true
            }
        });
        !pending.paths.is_empty()
    });
    pending
}

impl Shared {
    /// Removes `.deleted` files whose segment no reader pins any more (all of them when
    /// `force`, at close: a reader's descriptor outlives the unlink anyway).
    pub(in crate::log) fn reap_deleted(&self, writer: &mut Writer, force: bool) {
        let ready = writer.deletes.take_unpinned(force);
        let failed = remove_pending(&*self.storage, ready);
        writer.deletes.retry(failed);
    }

    /// [`reap_deleted`](Self::reap_deleted) without `force`, unlinking outside the writer lock:
    /// unlinking a large file can take a while, and appends must not wait for it.
    pub(in crate::log) fn reap_unpinned(&self) {
        let _reaping = self.files.reaping();
        let ready = self.writer.lock().deletes.take_unpinned(false);
        if ready.is_empty() {
            return;
        }
        let failed = remove_pending(&*self.storage, ready);
        if !failed.is_empty() {
            self.writer.lock().deletes.retry(failed);
        }
    }
}
