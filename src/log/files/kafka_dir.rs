//! The Kafka log-dir contract (ARCHITECTURE.md §7, "Opening inside a Kafka log dir"): what opening
//! a log for writing does when its directory is a partition directory inside a Kafka log directory.
//!
//! A Kafka log directory is recognised by the `meta.properties` file in the log's parent. A broker
//! that runs on it holds a lock on its `.lock` file, and at a clean shutdown it writes
//! `.kafka_cleanshutdown`, which tells its next start that every log in the directory is whole
//! and need not be recovered (Kafka's `LogManager` at startup). partlog writing a partition of that
//! directory must therefore:
//!
//! 1. **Keep the broker out while it writes.** It takes an OFD write lock on `.lock`
//!    ([`Storage::lock_foreign_ofd`]), which conflicts with the broker's `FileChannel.tryLock`
//!    (a classic `fcntl(F_SETLK)` lock on the whole file), and holds it until the log closes. A
//!    running broker makes the open fail with [`Error::Locked`] before anything in the log
//!    directory changes. `.lock` is created if missing and never removed: unlinking a lock file
//!    lets the next locker lock a new file while an old holder still holds the unlinked one.
//! 2. **Make a crash of its own look like an unclean shutdown.** Before any write it renames
//!    `.kafka_cleanshutdown` to `.kafka_cleanshutdown.partlog` and fsyncs the log directory. If
//!    partlog dies while writing, the broker finds no marker and recovers the directory, which
//!    truncates the torn tail rather than serving it.
//! 3. **Hand a clean directory back.** When the last log of the directory that this process has
//!    open closes, and every one of them closed cleanly (none poisoned, no close failed, no open
//!    failed once recovery had begun), the set-aside file is renamed back unchanged
//!    and the directory fsynced, and only then is the lock released. The broker then starts as
//!    after its own clean shutdown.
//!
//! Opening for reading does none of this.
//!
//! # One lock per log directory per process
//!
//! OFD locks belong to an open file description, so two locks this process took on one `.lock`
//! would conflict with each other. Every log in one log directory therefore shares one lock,
//! through a process-wide registry keyed by the log directory's [`CanonicalPath`] and counted:
//! the first log to open takes the lock and sets the marker aside, the last to close puts it back
//! and releases the lock. The registry's mutex is held across that I/O, so a log opening while
//! the last one closes waits and then sees the finished state.
//!
//! # A set-aside file found at open
//!
//! When the first log of a directory opens and finds no `.kafka_cleanshutdown`, there is nothing
//! to set aside and nothing will be put back: the broker's last shutdown was not clean (or it
//! never ran), so its next start must recover whatever partlog does now. A
//! `.kafka_cleanshutdown.partlog` without a `.kafka_cleanshutdown` is what a partlog crash leaves:
//! it is left where it is, and the directory is still handed back unclean, because the crash may
//! have torn logs that this run never opens and so never recovers. Renaming it back would tell
//! the broker those logs are whole.
//!
//! A `.kafka_cleanshutdown.partlog` found *together with* a `.kafka_cleanshutdown` is stale: a
//! put-back consumes the set-aside file, so the marker beside it was written by the broker, which
//! has therefore started since that crash (recovering from it) and shut down cleanly. The marker
//! is set aside over it, as usual.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::sync::Mutex;

use crate::error::{Error, Result};
use crate::storage::{CanonicalPath, FileLock, Storage};

/// The file whose presence in a log's parent makes the parent a Kafka log directory.
const META_PROPERTIES: &str = "meta.properties";
/// The file a Kafka broker locks for as long as it runs on the log directory.
const BROKER_LOCK_FILE: &str = ".lock";
/// Kafka's clean-shutdown marker.
const CLEAN_SHUTDOWN_FILE: &str = ".kafka_cleanshutdown";
/// Where partlog keeps the marker while it writes.
const SET_ASIDE_FILE: &str = ".kafka_cleanshutdown.partlog";

/// The Kafka log directories this process has logs open in for writing.
static OPEN_LOG_DIRS: Mutex<BTreeMap<CanonicalPath, OpenLogDir>> = Mutex::new(BTreeMap::new());

/// What becomes of the clean-shutdown marker when the last log of the directory closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MarkerPlan {
    /// partlog set it aside: it goes back if every log closed cleanly.
    RestoreIfClean,
    /// There was none to set aside: the broker must recover whatever happens.
    LeaveAbsent,
}

/// One Kafka log directory with logs open in this process.
#[derive(Debug)]
struct OpenLogDir {
    /// The storage the first log opened it through, for putting the marker back.
    storage: Arc<dyn Storage>,
    /// How many logs of the directory are open (or opening).
    members: usize,
    marker: MarkerPlan,
    /// Some member left without a clean close: the marker stays aside.
    unclean: bool,
    /// The OFD lock on `.lock`; dropped only after the marker is back.
    broker_lock: FileLock,
}

/// One log's share of its Kafka log directory's lock, from [`enter`] until [`leave`](Self::leave).
///
/// Dropping it without `leave` counts as an unclean exit: the marker will not be put back.
#[derive(Debug)]
pub(crate) struct KafkaDirMembership {
    log_dir: CanonicalPath,
    left: bool,
}

/// The Kafka log directory that holds `partition_dir`, if its parent is one.
fn kafka_log_dir(storage: &dyn Storage, partition_dir: &Path) -> Result<Option<PathBuf>> {
    let parent = match partition_dir.parent() {
        None => return Ok(None),
        Some(parent) if parent.as_os_str().is_empty() => Path::new("."),
        Some(parent) => parent,
    };
    match storage.metadata(&parent.join(META_PROPERTIES)) {
        Ok(metadata) => Ok((!metadata.is_dir).then(|| parent.to_path_buf())),
        Err(error) if error.io_kind() == Some(std::io::ErrorKind::NotFound) => Ok(None),
        Err(error) => Err(error),
    }
}

/// Joins the Kafka log directory of `partition_dir`, if it is in one: the first member takes the
/// broker lock and sets the clean-shutdown marker aside (see the [module docs](self)).
///
/// Fails with [`Error::Locked`] while a broker (or another process) holds `.lock`, and with
/// [`Error::Unsupported`] on a storage without OFD locks or canonical paths, rather than write
/// into a Kafka log directory unprotected. On failure nothing in the log directory has changed,
/// except that a marker whose rename succeeded but whose directory fsync failed stays aside.
pub(crate) fn enter(
    storage: &Arc<dyn Storage>,
    partition_dir: &Path,
) -> Result<Option<KafkaDirMembership>> {
    let Some(log_dir) = kafka_log_dir(&**storage, partition_dir)? else {
        return Ok(None);
    };
    let log_dir = storage
        .canonical_path(&log_dir)
        .map_err(|error| unprotected(partition_dir, error))?;
    let mut open_dirs = OPEN_LOG_DIRS.lock();
    if let Some(open) = open_dirs.get_mut(&log_dir) {
        open.members += 1;
        return Ok(Some(KafkaDirMembership {
            log_dir,
            left: false,
        }));
    }
    let broker_lock = storage
        .lock_foreign_ofd(&log_dir.path().join(BROKER_LOCK_FILE))
        .map_err(|error| unprotected(partition_dir, error))?;
    let marker = set_marker_aside(&**storage, log_dir.path())?;
    open_dirs.insert(
        log_dir.clone(),
        OpenLogDir {
            storage: Arc::clone(storage),
            members: 1,
            marker,
            unclean: false,
            broker_lock,
        },
    );
    log::info!(
        "{}: holding the Kafka log-dir lock of {}",
        partition_dir.display(),
        log_dir.path().display()
    );
    Ok(Some(KafkaDirMembership {
        log_dir,
        left: false,
    }))
}

/// Says why a storage that lacks what the contract needs cannot write into a Kafka log directory.
fn unprotected(partition_dir: &Path, error: Error) -> Error {
    match error {
        Error::Unsupported { what } => Error::Unsupported {
            what: format!(
                "writing {} inside a Kafka log directory, which needs its OFD lock: {what}",
                partition_dir.display()
            ),
        },
        other => other,
    }
}

/// Renames the marker aside and makes the rename durable, or notes that there is none.
fn set_marker_aside(storage: &dyn Storage, log_dir: &Path) -> Result<MarkerPlan> {
    let marker = log_dir.join(CLEAN_SHUTDOWN_FILE);
    let aside = log_dir.join(SET_ASIDE_FILE);
    if storage.exists(&marker)? {
        // Replaces a stale set-aside file, if any (see the module docs).
        storage.rename(&marker, &aside)?;
        storage.sync_dir(log_dir)?;
        return Ok(MarkerPlan::RestoreIfClean);
    }
    if storage.exists(&aside)? {
        log::warn!(
            "{}: an earlier partlog run crashed here ({SET_ASIDE_FILE} is present and \
             {CLEAN_SHUTDOWN_FILE} is not); it stays that way, so the broker will recover",
            log_dir.display()
        );
    } else {
        log::info!(
            "{}: no {CLEAN_SHUTDOWN_FILE}; the broker will recover this log directory at its \
             next start",
            log_dir.display()
        );
    }
    Ok(MarkerPlan::LeaveAbsent)
}

impl KafkaDirMembership {
    /// Leaves the log directory: `clean` says whether this log closed cleanly. The last member
    /// puts the marker back (if every member was clean and there was one), then releases the
    /// lock. An error means the marker could not be put back: it stays aside, the broker will
    /// recover, and the lock is released all the same.
    pub(crate) fn leave(mut self, clean: bool) -> Result<()> {
        self.leave_once(clean)
    }

    fn leave_once(&mut self, clean: bool) -> Result<()> {
        if std::mem::replace(&mut self.left, true) {
            return Ok(());
        }
        let mut open_dirs = OPEN_LOG_DIRS.lock();
        let Some(open) = open_dirs.get_mut(&self.log_dir) else {
            return Ok(());
        };
        open.unclean |= !clean;
        open.members = open.members.saturating_sub(1);
        if open.members > 0 {
            return Ok(());
        }
        let Some(open) = open_dirs.remove(&self.log_dir) else {
            return Ok(());
        };
        let log_dir = self.log_dir.path();
        let restored = match (open.marker, open.unclean) {
            (MarkerPlan::RestoreIfClean, false) => put_marker_back(&*open.storage, log_dir),
            (MarkerPlan::RestoreIfClean, true) => {
                log::warn!(
                    "{}: a log did not close cleanly; {CLEAN_SHUTDOWN_FILE} stays aside as \
                     {SET_ASIDE_FILE}, so the broker will recover",
                    log_dir.display()
                );
                Ok(())
            }
            (MarkerPlan::LeaveAbsent, _) => Ok(()),
        };
        // Only now may a broker start: the marker is back (or durably absent).
        drop(open.broker_lock);
        restored
    }
}

/// Renames the set-aside marker back and makes that durable.
fn put_marker_back(storage: &dyn Storage, log_dir: &Path) -> Result<()> {
    storage.rename(
        &log_dir.join(SET_ASIDE_FILE),
        &log_dir.join(CLEAN_SHUTDOWN_FILE),
    )?;
    storage.sync_dir(log_dir)
}

impl Drop for KafkaDirMembership {
    fn drop(&mut self) {
        if let Err(error) = self.leave_once(false) {
            log::warn!(
                "leaving the Kafka log directory {}: {error}",
                self.log_dir.path().display()
            );
        }
    }
}
