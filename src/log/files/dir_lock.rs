//! The lock on a log directory's `partlog.lock`, and the directories this process's logs hold
//! it on.
//!
//! The lock itself cannot tell a second `Log::open` of a directory in this process from another
//! process (both meet a held lock), and the two call for different fixes: wait for the other
//! process, or share the first `Log` handle. The logs of this process therefore record the
//! directories they hold, keyed by [`CanonicalPath`] as the Kafka log-dir lock is
//! (`kafka_dir.rs`), and a refused lock on one of them says so ([`Error::Locked`]'s
//! `in_this_process`).

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{Error, Result};
use crate::storage::{CanonicalPath, FileLock, LockMode, Storage, create_dir_durably};

use crate::log::LOCK_FILE;

/// The log directories whose `partlog.lock` logs of this process hold, with how many hold it
/// (readers share it). A lock refused on one of them conflicts with a holder in this process:
/// two shared locks never conflict, so a refused shared lock met an exclusive one, which no
/// other process can hold beside this process's.
///
/// `parking_lot`'s mutex even under shuttle: a process-wide static outlives the model-checked
/// execution that would own a shuttle mutex, and no critical section here reaches a shuttle
/// switch point.
static HELD_DIRS: parking_lot::Mutex<BTreeMap<CanonicalPath, usize>> =
    parking_lot::Mutex::new(BTreeMap::new());

/// A held lock on `partlog.lock`: released, and its directory forgotten, when dropped.
#[derive(Debug)]
pub(in crate::log) struct DirLock {
    _lock: FileLock,
    /// `None` when the storage cannot canonicalize paths.
    registered: Option<CanonicalPath>,
}

impl Drop for DirLock {
    fn drop(&mut self) {
        if let Some(dir) = self.registered.take() {
            let mut held = HELD_DIRS.lock();
            if let Some(holders) = held.get_mut(&dir) {
                *holders -= 1;
                if *holders == 0 {
                    held.remove(&dir);
                }
            }
        }
    }
}

/// Takes the lock on `partlog.lock`: exclusive for a writer (creating `dir` first), shared for
/// a reader when the file exists, none otherwise. A reader that allows a live writer takes no
/// lock: the writer holds it exclusively.
pub(in crate::log) fn lock_log_dir(
    storage: &dyn Storage,
    dir: &Path,
    read_only: bool,
    allow_live_writer: bool,
) -> Result<Option<DirLock>> {
    let lock_path = dir.join(LOCK_FILE);
    if read_only && allow_live_writer {
        return Ok(None);
    }
    let mode = if read_only {
        if !storage.exists(&lock_path)? {
            return Ok(None);
        }
        LockMode::Shared
    } else {
        create_dir_durably(storage, dir)?;
        LockMode::Exclusive
    };
    // Unsupported by this storage: the lock works, only the message stays generic.
    let canonical = storage.canonical_path(dir).ok();
    let lock = match storage.lock(&lock_path, mode) {
        Ok(lock) => lock,
        Err(Error::Locked { path, .. }) => {
            let in_this_process = canonical
                .as_ref()
                .is_some_and(|dir| HELD_DIRS.lock().contains_key(dir));
            return Err(Error::Locked {
                path,
                in_this_process,
            });
        }
        Err(error) => return Err(error),
    };
    if let Some(dir) = &canonical {
        *HELD_DIRS.lock().entry(dir.clone()).or_insert(0) += 1;
    }
    Ok(Some(DirLock {
        _lock: lock,
        registered: canonical,
    }))
}

/// What an open holds from before recovery to the log's close, taken in this order: inside a
/// Kafka log dir, the broker's lock (a writable open only, before anything is created: a
/// running broker must find its directory untouched); the lock on `partlog.lock`; and, under
/// it, `config` with the settings stored with the log applied (a writable open may store the
/// ones it was given). On a failure nothing stays held.
pub(in crate::log) fn enter_dir(
    storage: &std::sync::Arc<dyn Storage>,
    dir: &Path,
    config: crate::log::LogConfig,
    read_only: bool,
) -> Result<(
    Option<super::kafka_dir::KafkaDirMembership>,
    Option<DirLock>,
    crate::log::LogConfig,
)> {
    let kafka_dir = if read_only {
        None
    } else {
        super::kafka_dir::enter(storage, dir)?
    };
    // No log data changed yet, so leaving does not spoil the directory's clean close.
    let leave = |kafka_dir: Option<super::kafka_dir::KafkaDirMembership>| {
        if let Some(Err(leave_error)) = kafka_dir.map(|m| m.leave(true)) {
            log::warn!("{}: {leave_error}", dir.display());
        }
    };
    let lock = match lock_log_dir(&**storage, dir, read_only, config.allow_live_writer) {
        Ok(lock) => lock,
        Err(error) => {
            leave(kafka_dir);
            return Err(error);
        }
    };
    match crate::log::config::properties::apply_stored_settings(&**storage, dir, config, read_only)
    {
        Ok(config) => Ok((kafka_dir, lock, config)),
        Err(error) => {
            leave(kafka_dir);
            Err(error)
        }
    }
}
