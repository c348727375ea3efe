//! [`SimStorage`]: an in-memory, seeded file system that can crash.
//!
//! partlog promises that an acknowledged record survives a machine crash and that recovery
//! never returns a torn batch. Those promises are about what the disk holds when the power goes,
//! which a test on a real file system cannot choose. The simulator can: it keeps, for every file
//! and directory, both what callers see now and what is *durable*, and a [`SimStorage::crash`]
//! replaces the first with one of the images a real machine could have left.
//!
//! # The model
//!
//! - **Inodes.** Files and directories are nodes; a directory maps names to nodes. A rename
//!   moves a node, so a handle keeps working after its file is renamed or removed, as on POSIX.
//! - **Files** have a *synced image* (data and length as of the last successful `sync_data` or
//!   `sync_all`) and the list of writes and `set_len` calls since.
//! - **Directories** have *durable entries* (as of the last `sync_dir` of that directory) and
//!   the ordered list of entry changes since: creates, renames and removes (and the directories
//!   `create_dir_all` makes, which need a `sync_dir` of their parent like any other entry).
//!   Unlike these, `set_len` is file state, made durable by the file's own sync, because that
//!   is what `fdatasync` persists.
//!
//! # A crash
//!
//! [`SimStorage::crash`] (or [`crash_with`](SimStorage::crash_with) a [`CrashConfig`]):
//!
//! 1. Every open handle dies: each later call on it fails with an `Io` error of kind `Other`
//!    ("handle from before the simulated crash"). Every lock is released.
//! 2. Every directory keeps its durable entries plus a random **prefix** of its unsynced
//!    changes. A prefix, because journalling file systems commit metadata in order: a crash can
//!    cut the sequence but not reorder it. A create that is cut makes the file vanish; a cut
//!    rename puts the node back under its old name (and the node it replaced back under the
//!    new one); a cut remove brings the file back. A synced directory's changes are never cut.
//!    A rename between two directories is a change in each, durable once both are synced.
//! 3. Every file still reachable gets a length and contents drawn independently:
//!    - its length is its synced length or one it had after a later write or `set_len` (the
//!      size is metadata, journalled in order, so it is the size after some prefix of the
//!      file's changes; a truncation in that prefix also discards the bytes it cut);
//!    - each unsynced write survives whole, is lost, or survives **torn**: a prefix of it
//!      survives, ending at a 512-byte boundary of the file ([`SECTOR_SIZE`]). Surviving
//!      writes are applied in the order they were made, so where two overlap the later wins;
//!    - bytes no surviving write covers read as synced, or as zeros past the synced length: a
//!      length can persist while the data it covers does not (XFS, ext4 in writeback mode).
//!
//!    Synced bytes change only where a surviving write covers them or a surviving truncation
//!    cut them. Drawing each write on its own allows a few images a page cache rarely makes (an
//!    earlier write to a page kept while a later one is lost); recovery that accepts all of
//!    them accepts the real ones.
//! 4. Nodes no name reaches any more are forgotten.
//!
//! The choices come from a seed, so a crash is reproducible: [`CrashReport::seed`] names it.
//! [`CrashMode::LoseUnsynced`] gives the strictest image (exactly
//! [`durable_snapshot`](SimStorage::durable_snapshot)) and [`CrashMode::KeepUnsynced`] the
//! kindest (exactly [`snapshot`](SimStorage::snapshot), but for the pages a failed sync lost).
//!
//! # Faults
//!
//! [`SimStorage::fail_nth`] and [`SimStorage::inject`] arm a [`FaultRule`]: the Nth operation of a
//! [`FaultOp`] kind, counted from when the rule is armed (optionally only on some paths), fails
//! with EIO, ENOSPC or another error, stores only part of a write, or crashes the machine just
//! before the operation; [`FaultRule::until_cancelled`] keeps a rule firing (a disk that stays
//! full until space is freed). A **failed sync loses the file's unsynced data, but not from the
//! cache**, as on Linux after an fsync error (PostgreSQL's "fsyncgate", 2018): the pages it could
//! not write are marked clean and stay cached ([`SimFileState::lost_pages`]), so reads still
//! return their bytes and a retried sync succeeds without writing them. They are not on the
//! disk: a crash loses them, and [`Advice::DontNeed`] on a range drops those wholly inside it
//! ([`PAGE_SIZE`] pages, as `posix_fadvise` does), after which reads return what the disk holds
//! (the synced bytes, zeros past the synced length). Writing into a lost page dirties it again,
//! and its next sync writes the whole page, lost bytes included, as Linux's writeback does.
//! Unsynced length changes are forgotten by the failed sync; the next successful one persists
//! the in-memory length.
//!
//! # Observing
//!
//! [`SimStorage::stats`] counts operations (overall and per path), [`SimStorage::events`] logs
//! every change and sync in order, and [`snapshot`](SimStorage::snapshot),
//! [`durable_snapshot`](SimStorage::durable_snapshot) and [`file_state`](SimStorage::file_state)
//! show the live and durable images.
//!
//! # Where it differs from Linux
//!
//! - Paths resolve lexically against one root (`a/b` is `/a/b`); there are no symbolic links,
//!   no hard links (though a crash between the syncs of a two-directory rename can leave one
//!   node under two names), no permissions, and names must be UTF-8.
//! - Opening a directory as a file fails with `IsADirectory`, and `sync_dir` of a file with
//!   `NotADirectory` (Linux allows both): either is a bug in the caller.
//! - A directory can be renamed only within its parent (`Unsupported` otherwise), which keeps
//!   every crash image a tree; partlog renames directories only in place.
//! - `map_read` returns a copy of the file's current bytes (never `None`): partlog maps only files
//!   it no longer writes, for which a copy and a mapping read the same.
//! - Files live in memory, so a length above a limit (256 MiB unless
//!   [`set_max_file_len`](SimStorage::set_max_file_len) says otherwise) fails with EFBIG.
//! - Modification times come from a counter that ticks once per change, or from the clock
//!   given to [`with_clock`](SimStorage::with_clock), or from [`Storage::set_mtime`]; after a
//!   crash (other than [`CrashMode::KeepUnsynced`]) a file's is the one its last `sync_all` saw,
//!   since `sync_data` does not persist it.
//! - Locks are `flock`-like per node: two holders conflict even within one process. OFD locks
//!   ([`Storage::lock_foreign_ofd`]) are a separate table, as `flock` and `fcntl` locks are on
//!   Linux, and conflict with any other OFD lock on the node. A crash releases both kinds. A test
//!   plays a Kafka broker (another process) by holding an OFD lock itself.
//! - [`Storage::canonical_path`] is the lexical absolute path, tagged with a file-system id that
//!   is unique to this simulator and changes at every crash: state a dead "process" keyed by it
//!   never matches what the next one sees.

// Without the `sim` feature the simulator is compiled only for the crate's own unit tests,
// which use part of its API; the rest is dead code there, and only there.
#![cfg_attr(not(feature = "sim"), allow(dead_code, unused_imports))]

mod crash;
mod fault;
mod file_ops;
mod locks;
mod node;
mod observe;
mod path;
mod state;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::sync::Mutex;

pub use crash::{CrashConfig, CrashMode, CrashReport, SECTOR_SIZE};
pub use fault::{FaultError, FaultId, FaultOp, FaultRule};
pub use node::PAGE_SIZE;
pub use observe::{PathStats, SimEvent, SimFileState, SimSnapshot, SimStats};

use self::file_ops::Handle;
use self::node::NodeId;
use self::path::SimPath;
use self::state::FsState;
use super::{
    Advice, CanonicalPath, FileId, FileLock, LockMode, Metadata, OpenMode, ReadMapping, Storage,
    StorageFile,
};
use crate::clock::Clock;
use crate::error::{Error, Result};

/// The state every clone, handle and lock of one simulator shares. One mutex over all of it:
/// the simulator is for correctness, and a single lock makes every operation atomic.
struct Shared {
    state: Mutex<FsState>,
}

/// The in-memory crash simulator. See the [module docs](self) for the model.
///
/// Cloning is cheap and shares the file system, as does an `Arc<SimStorage>` used as an
/// `Arc<dyn Storage>`.
#[derive(Clone)]
pub struct SimStorage {
    shared: Arc<Shared>,
}

impl Default for SimStorage {
    /// A simulator seeded with 0.
    fn default() -> Self {
        SimStorage::new(0)
    }
}

impl std::fmt::Debug for SimStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.shared.state.try_lock() {
            Some(state) => f.debug_tuple("SimStorage").field(&*state).finish(),
            None => f.write_str("SimStorage(<in use>)"),
        }
    }
}

fn wrap(path: &Path) -> impl FnOnce(io::Error) -> Error + '_ {
    move |source| Error::io(path, source)
}

fn parse(path: &Path) -> Result<SimPath> {
    SimPath::parse(path).map_err(wrap(path))
}

impl SimStorage {
    /// An empty file system (just the root directory) whose crashes are drawn from `seed`.
    pub fn new(seed: u64) -> Self {
        SimStorage {
            shared: Arc::new(Shared {
                state: Mutex::new(FsState::new(seed)),
            }),
        }
    }

    /// Takes modification times from `clock` (for example a `ManualClock` shared with the code
    /// under test) instead of from the change counter.
    pub fn with_clock(self, clock: Arc<dyn Clock>) -> Self {
        self.shared.state.lock().clock = Some(clock);
        self
    }

    /// The largest length a file may reach; a write or `set_len` beyond it fails with EFBIG.
    pub fn set_max_file_len(&self, max_len: u64) {
        self.shared.state.lock().max_file_len = max_len;
    }

    /// Crashes the machine with a random image. The crash's seed is drawn from the simulator's
    /// own generator, so a whole run is reproducible from the seed given to [`new`](Self::new);
    /// the returned report names it.
    pub fn crash(&self) -> CrashReport {
        self.crash_with(&CrashConfig::default())
    }

    /// Crashes the machine with an image chosen per `config`.
    pub fn crash_with(&self, config: &CrashConfig) -> CrashReport {
        self.shared.state.lock().crash(config)
    }

    /// Arms a rule: the `n`th operation of kind `op` from now (1 is the next) fails with `error`.
    pub fn fail_nth(&self, op: FaultOp, n: u64, error: FaultError) -> FaultId {
        self.inject(FaultRule::fail(op, n).error(error))
    }

    /// Arms any [`FaultRule`].
    pub fn inject(&self, rule: FaultRule) -> FaultId {
        self.shared.state.lock().faults.arm(rule)
    }

    /// Disarms a rule; false if it already fired or was disarmed.
    pub fn cancel_fault(&self, id: FaultId) -> bool {
        self.shared.state.lock().faults.cancel(id)
    }

    /// Disarms every rule.
    pub fn clear_faults(&self) {
        self.shared.state.lock().faults.clear();
    }

    /// How many rules are armed and have not fired.
    pub fn armed_faults(&self) -> usize {
        self.shared.state.lock().faults.armed()
    }

    /// The operation counters since the simulator was made or the counters reset.
    pub fn stats(&self) -> SimStats {
        self.shared.state.lock().stats.clone()
    }

    /// Sets every counter to zero.
    pub fn reset_stats(&self) {
        self.shared.state.lock().stats = SimStats::default();
    }

    /// The event log, oldest first.
    pub fn events(&self) -> Vec<SimEvent> {
        self.shared.state.lock().events.clone()
    }

    /// The events from position `from` of the log on (see [`event_count`](Self::event_count)).
    pub fn events_since(&self, from: usize) -> Vec<SimEvent> {
        let state = self.shared.state.lock();
        state.events.get(from..).unwrap_or_default().to_vec()
    }

    /// The length of the event log: note it before an operation and pass it to
    /// [`events_since`](Self::events_since) after.
    pub fn event_count(&self) -> usize {
        self.shared.state.lock().events.len()
    }

    /// Empties the event log (positions restart at 0).
    pub fn clear_events(&self) {
        self.shared.state.lock().events.clear();
    }

    /// The live file system: every directory, and every file with what a read returns now.
    pub fn snapshot(&self) -> SimSnapshot {
        self.shared.state.lock().snapshot(false)
    }

    /// The durable file system: what the strictest crash would leave ([`CrashMode::LoseUnsynced`]),
    /// the durable entries of every directory and the synced image of every file.
    pub fn durable_snapshot(&self) -> SimSnapshot {
        self.shared.state.lock().snapshot(true)
    }

    /// The live and synced contents of the file at `path` (a live name).
    pub fn file_state(&self, path: &Path) -> Result<SimFileState> {
        let sim_path = parse(path)?;
        self.shared
            .state
            .lock()
            .file_state(&sim_path)
            .map_err(wrap(path))
    }
}

impl Storage for SimStorage {
    fn open(&self, path: &Path, mode: OpenMode) -> Result<Arc<dyn StorageFile>> {
        let sim_path = parse(path)?;
        let mut state = self.shared.state.lock();
        let node = state.open(&sim_path, mode).map_err(wrap(path))?;
        Ok(Arc::new(SimFile {
            shared: Arc::clone(&self.shared),
            path: path.to_path_buf(),
            absolute: sim_path.to_path_buf(),
            node,
            generation: state.generation,
            writable: mode != OpenMode::Read,
        }))
    }

    fn create_dir_all(&self, path: &Path) -> Result<()> {
        let sim_path = parse(path)?;
        self.shared
            .state
            .lock()
            .create_dir_all(&sim_path)
            .map_err(wrap(path))
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let sim_path = parse(dir)?;
        self.shared
            .state
            .lock()
            .sync_dir(&sim_path)
            .map_err(wrap(dir))
    }

    fn sync_file_system(&self, path: &Path) -> Result<()> {
        let sim_path = parse(path)?;
        let mut state = self.shared.state.lock();
        state.lookup(&sim_path).map_err(wrap(path))?;
        state
            .sync_file_system(&sim_path.to_path_buf())
            .map_err(wrap(path))
    }

    fn file_system_id(&self, path: &Path) -> Result<u64> {
        // One simulated machine (shared by the clones), one file system: the machine's address,
        // with the top bit set so that it never equals a device number of `OsStorage`.
        parse(path)?;
        Ok(Arc::as_ptr(&self.shared) as usize as u64 | 1 << 63)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let (sim_from, sim_to) = (parse(from)?, parse(to)?);
        self.shared
            .state
            .lock()
            .rename(&sim_from, &sim_to)
            .map_err(wrap(from))
    }

    fn remove(&self, path: &Path) -> Result<()> {
        let sim_path = parse(path)?;
        self.shared
            .state
            .lock()
            .remove(&sim_path)
            .map_err(wrap(path))
    }

    fn set_mtime(&self, path: &Path, mtime_ms: i64) -> Result<()> {
        let sim_path = parse(path)?;
        self.shared
            .state
            .lock()
            .set_mtime(&sim_path, mtime_ms)
            .map_err(wrap(path))
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let sim_path = parse(dir)?;
        self.shared.state.lock().list(&sim_path).map_err(wrap(dir))
    }

    fn metadata(&self, path: &Path) -> Result<Metadata> {
        let sim_path = parse(path)?;
        self.shared
            .state
            .lock()
            .metadata(&sim_path)
            .map_err(wrap(path))
    }

    fn lock(&self, path: &Path, mode: LockMode) -> Result<FileLock> {
        let sim_path = parse(path)?;
        let mut state = self.shared.state.lock();
        match state.lock(&sim_path, mode).map_err(wrap(path))? {
            Some((node, id)) => Ok(FileLock::new(Box::new(SimLock {
                shared: Arc::clone(&self.shared),
                kind: SimLockKind::Flock,
                node,
                id,
                generation: state.generation,
            }))),
            None => Err(Error::Locked {
                path: path.to_path_buf(),
                in_this_process: false,
            }),
        }
    }

    fn canonical_path(&self, path: &Path) -> Result<CanonicalPath> {
        let sim_path = parse(path)?;
        self.shared
            .state
            .lock()
            .canonical_path(&sim_path)
            .map_err(wrap(path))
    }

    fn lock_foreign_ofd(&self, path: &Path) -> Result<FileLock> {
        let sim_path = parse(path)?;
        let mut state = self.shared.state.lock();
        match state.lock_ofd(&sim_path).map_err(wrap(path))? {
            Some((node, id)) => Ok(FileLock::new(Box::new(SimLock {
                shared: Arc::clone(&self.shared),
                kind: SimLockKind::Ofd,
                node,
                id,
                generation: state.generation,
            }))),
            None => Err(Error::Locked {
                path: path.to_path_buf(),
                in_this_process: false,
            }),
        }
    }
}

/// Which lock table a [`SimLock`] is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SimLockKind {
    /// [`Storage::lock`].
    Flock,
    /// [`Storage::lock_foreign_ofd`].
    Ofd,
}

/// A held simulated lock; dropping it releases the lock unless a crash already did.
struct SimLock {
    shared: Arc<Shared>,
    kind: SimLockKind,
    node: NodeId,
    id: u64,
    generation: u64,
}

impl Drop for SimLock {
    fn drop(&mut self) {
        let mut state = self.shared.state.lock();
        if state.generation == self.generation {
            match self.kind {
                SimLockKind::Flock => state.unlock(self.node, self.id),
                SimLockKind::Ofd => state.unlock_ofd(self.node, self.id),
            }
        }
    }
}

/// An open simulated file.
struct SimFile {
    shared: Arc<Shared>,
    /// The path as the caller spelled it, for [`StorageFile::path`] and error messages.
    path: PathBuf,
    /// The absolute form, for statistics, events and fault rules.
    absolute: PathBuf,
    node: NodeId,
    /// The crash generation the handle was opened in; a crash kills it.
    generation: u64,
    writable: bool,
}

impl std::fmt::Debug for SimFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimFile")
            .field("path", &self.path)
            .field("node", &self.node)
            .field("generation", &self.generation)
            .finish()
    }
}

impl SimFile {
    fn handle(&self) -> Handle<'_> {
        Handle {
            node: self.node,
            generation: self.generation,
            path: &self.absolute,
            writable: self.writable,
        }
    }
}

impl StorageFile for SimFile {
    fn path(&self) -> &Path {
        &self.path
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        self.shared
            .state
            .lock()
            .read_at(&self.handle(), buf, offset)
            .map_err(wrap(&self.path))
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.shared
            .state
            .lock()
            .write_at(&self.handle(), buf, offset)
            .map_err(wrap(&self.path))
    }

    fn len(&self) -> Result<u64> {
        self.shared
            .state
            .lock()
            .len(&self.handle())
            .map_err(wrap(&self.path))
    }

    fn file_id(&self) -> Result<Option<FileId>> {
        Ok(Some(node::sim_file_id(self.node)))
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.shared
            .state
            .lock()
            .set_len(&self.handle(), len)
            .map_err(wrap(&self.path))
    }

    fn sync_data(&self) -> Result<()> {
        self.shared
            .state
            .lock()
            .sync(&self.handle(), true)
            .map_err(wrap(&self.path))
    }

    fn sync_all(&self) -> Result<()> {
        self.shared
            .state
            .lock()
            .sync(&self.handle(), false)
            .map_err(wrap(&self.path))
    }

    fn advise(&self, offset: u64, len: u64, advice: Advice) -> Result<()> {
        self.shared
            .state
            .lock()
            .advise(&self.handle(), offset, len, advice)
            .map_err(wrap(&self.path))
    }

    /// A copy of the file's current bytes (see the module docs).
    fn map_read(&self) -> Result<Option<ReadMapping>> {
        let bytes = self
            .shared
            .state
            .lock()
            .map_read(&self.handle())
            .map_err(wrap(&self.path))?;
        Ok(Some(ReadMapping::new(Box::new(bytes))))
    }
}

impl Drop for SimFile {
    fn drop(&mut self) {
        self.shared.state.lock().close(self.node, self.generation);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{CrashConfig, SimStorage};

    fn nodes(sim: &SimStorage) -> usize {
        sim.shared.state.lock().nodes.len()
    }

    #[test]
    fn a_removed_file_lives_while_a_handle_or_a_durable_name_holds_it() {
        let sim = SimStorage::new(1);
        sim.create_dir_all(Path::new("/d")).unwrap();
        sim.sync_dir(Path::new("/")).unwrap();
        let file = sim.open(Path::new("/d/f"), OpenMode::CreateNew).unwrap();
        file.write_all_at(b"data", 0).unwrap();
        sim.sync_dir(Path::new("/d")).unwrap();
        assert_eq!(nodes(&sim), 3, "root, d, f");
        sim.remove(Path::new("/d/f")).unwrap();
        sim.sync_dir(Path::new("/d")).unwrap();
        assert_eq!(nodes(&sim), 3, "the open handle holds the removed file");
        let mut buf = [0u8; 4];
        file.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"data");
        drop(file);
        assert_eq!(nodes(&sim), 3, "forgotten only at the next sweep");
        sim.sync_dir(Path::new("/d")).unwrap();
        assert_eq!(nodes(&sim), 2);

        // A remove that is not yet durable keeps the node: a crash may undo it.
        drop(sim.open(Path::new("/d/g"), OpenMode::CreateNew).unwrap());
        sim.sync_dir(Path::new("/d")).unwrap();
        sim.remove(Path::new("/d/g")).unwrap();
        sim.sync_dir(Path::new("/")).unwrap();
        assert_eq!(nodes(&sim), 3);
        sim.crash_with(&CrashConfig::keep_unsynced());
        assert_eq!(nodes(&sim), 2, "a crash forgets what no name reaches");
    }

    #[test]
    fn handles_and_locks_from_before_a_crash_are_dead() {
        let sim = SimStorage::new(2);
        let file = sim.open(Path::new("/f"), OpenMode::Create).unwrap();
        let lock = sim.lock(Path::new("/lock"), LockMode::Exclusive).unwrap();
        sim.crash_with(&CrashConfig::keep_unsynced());
        for result in [
            file.write_all_at(b"x", 0),
            file.sync_data(),
            file.set_len(0),
            file.len().map(drop),
            file.read_at(&mut [0u8; 1], 0).map(drop),
            file.map_read().map(drop),
        ] {
            let err = result.unwrap_err();
            assert_eq!(err.io_kind(), Some(io::ErrorKind::Other), "{err}");
            assert!(
                err.to_string().contains("before the simulated crash"),
                "{err}"
            );
        }
        // The crash released the lock, and the stale guard must not release the new holder's.
        let relock = sim.lock(Path::new("/lock"), LockMode::Exclusive).unwrap();
        drop(lock);
        assert!(matches!(
            sim.lock(Path::new("/lock"), LockMode::Shared),
            Err(Error::Locked { .. })
        ));
        drop(relock);
        drop(sim.lock(Path::new("/lock"), LockMode::Shared).unwrap());
        // A new handle works.
        let file = sim.open(Path::new("/f"), OpenMode::ReadWrite).unwrap();
        file.write_all_at(b"y", 0).unwrap();
    }

    #[test]
    fn ofd_locks_conflict_with_each_other_not_with_flock_and_die_in_a_crash() {
        let sim = SimStorage::new(4);
        let path = Path::new("/k/.lock");
        sim.create_dir_all(Path::new("/k")).unwrap();
        let held = sim.lock_foreign_ofd(path).unwrap();
        assert!(sim.exists(path).unwrap(), "the lock file is created");
        assert!(matches!(
            sim.lock_foreign_ofd(path),
            Err(Error::Locked { .. })
        ));
        drop(sim.lock(path, LockMode::Exclusive).unwrap());
        drop(held);
        let before_crash = sim.lock_foreign_ofd(path).unwrap();
        sim.crash_with(&CrashConfig::keep_unsynced());
        let after_crash = sim.lock_foreign_ofd(path).unwrap();
        // The stale guard must not release the new holder's lock.
        drop(before_crash);
        assert!(matches!(
            sim.lock_foreign_ofd(path),
            Err(Error::Locked { .. })
        ));
        drop(after_crash);
        drop(sim.lock_foreign_ofd(path).unwrap());
    }

    #[test]
    fn canonical_paths_are_lexical_and_tagged_per_simulator_and_boot() {
        let sim = SimStorage::new(5);
        sim.create_dir_all(Path::new("/a/b")).unwrap();
        sim.sync_dir(Path::new("/")).unwrap();
        sim.sync_dir(Path::new("/a")).unwrap();
        let direct = sim.canonical_path(Path::new("/a/b")).unwrap();
        assert_eq!(direct, sim.canonical_path(Path::new("a/./c/../b")).unwrap());
        assert_eq!(direct.path(), Path::new("/a/b"));
        assert_ne!(direct.file_system(), CanonicalPath::OS_FILE_SYSTEM);
        assert_eq!(
            sim.canonical_path(Path::new("/a/x")).unwrap_err().io_kind(),
            Some(io::ErrorKind::NotFound)
        );
        let other = SimStorage::new(5);
        other.create_dir_all(Path::new("/a/b")).unwrap();
        assert_ne!(direct, other.canonical_path(Path::new("/a/b")).unwrap());
        sim.crash_with(&CrashConfig::keep_unsynced());
        let after_crash = sim.canonical_path(Path::new("/a/b")).unwrap();
        assert_eq!(after_crash.path(), direct.path());
        assert_ne!(after_crash, direct, "a crash starts a new boot");
    }

    #[test]
    fn set_mtime_is_live_at_once_and_durable_after_sync_all() {
        let sim = SimStorage::new(6);
        let path = Path::new("/d/00000000000000000000.log");
        sim.create_dir_all(Path::new("/d")).unwrap();
        let file = sim.open(path, OpenMode::CreateNew).unwrap();
        file.write_all_at(b"batch", 0).unwrap();
        file.sync_all().unwrap();
        sim.sync_dir(Path::new("/d")).unwrap();
        sim.sync_dir(Path::new("/")).unwrap();
        let synced_mtime = sim.metadata(path).unwrap().modified_ms;

        sim.set_mtime(path, 1_700_000_000_000).unwrap();
        assert_eq!(sim.metadata(path).unwrap().modified_ms, 1_700_000_000_000);
        assert_eq!(sim.stats().set_mtimes, 1);
        file.sync_data().unwrap();
        sim.crash_with(&CrashConfig::lose_unsynced());
        assert_eq!(
            sim.metadata(path).unwrap().modified_ms,
            synced_mtime,
            "fdatasync does not persist the mtime"
        );

        sim.set_mtime(path, 1_700_000_000_000).unwrap();
        let file = sim.open(path, OpenMode::ReadWrite).unwrap();
        file.sync_all().unwrap();
        sim.crash_with(&CrashConfig::lose_unsynced());
        assert_eq!(sim.metadata(path).unwrap().modified_ms, 1_700_000_000_000);

        assert_eq!(
            sim.set_mtime(Path::new("/d/missing"), 1)
                .unwrap_err()
                .io_kind(),
            Some(io::ErrorKind::NotFound)
        );
        sim.fail_nth(FaultOp::SetMtime, 1, FaultError::Eio);
        assert!(sim.set_mtime(path, 5).is_err());
        assert_eq!(sim.metadata(path).unwrap().modified_ms, 1_700_000_000_000);
    }

    #[test]
    fn sync_replays_pending_operations_into_the_synced_image() {
        let sim = SimStorage::new(3);
        let file = sim.open(Path::new("/f"), OpenMode::CreateNew).unwrap();
        file.write_all_at(b"hello world", 0).unwrap();
        file.set_len(5).unwrap();
        file.write_all_at(b"!", 7).unwrap();
        file.sync_data().unwrap();
        let state = sim.file_state(Path::new("/f")).unwrap();
        assert_eq!(state.current, b"hello\0\0!");
        assert_eq!(state.synced, state.current);
        assert_eq!(state.unsynced_ops, 0);
        assert!(!state.name_durable, "the root was never synced");
        sim.sync_dir(Path::new("/")).unwrap();
        assert!(sim.file_state(Path::new("/f")).unwrap().name_durable);
    }
}
