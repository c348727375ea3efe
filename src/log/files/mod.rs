//! The log directory's own files beside its segments. Owns `LogFiles` (`log_files.rs`: the
//! directory's locks, the reaping lock, the cleaner checkpoint as last written) and
//! `PendingDeletes` (`deleted.rs`: the `.deleted` files waiting for their last reader, in the
//! writer mutex), with the files' formats: `partlog.lock` and the Kafka log dir's lock
//! (`dir_lock`, `kafka_dir`), `partlog.checkpoint` (`checkpoint`), `partlog.cleaner-checkpoint`
//! (`cleaner_checkpoint`), Kafka's producer snapshots (`producer_snapshot`), and one listing of
//! the directory for an open (`dir_listing`). Uses `observe` and `config`.

pub mod checkpoint;
pub(in crate::log) mod cleaner_checkpoint;
pub(in crate::log) mod deleted;
pub(in crate::log) mod dir_listing;
pub(in crate::log) mod dir_lock;
pub(crate) mod kafka_dir;
pub(in crate::log) mod log_files;
pub mod producer_snapshot;

use std::path::Path;

use crate::storage::Storage;

/// Removes `path` if it exists, and only logs a failure: for leftovers whose removal a later
/// pass or open retries (a temporary file, a cleaned copy that will not be swapped in).
pub(in crate::log) fn remove_quietly(storage: &dyn Storage, path: &Path) {
    match storage.remove(path) {
        Ok(()) => {}
        Err(error) if error.io_kind() == Some(std::io::ErrorKind::NotFound) => {}
        Err(error) => log::warn!("could not remove {}: {error}", path.display()),
    }
}
