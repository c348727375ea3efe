//! The simulated file system: a tree of directory and file nodes (inodes), each holding both its
//! live state and the durable state a crash falls back to.
//!
//! Every operation here returns `io::Result` with the errno the Linux call would give; the
//! façade in the parent module adds the path and turns it into [`crate::Error::Io`].

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::Path;
use std::sync::Arc;

use rustix::io::Errno;

use super::fault::{FaultEffect, FaultOp, FaultTable};
use super::observe::{PathStats, SimEvent, SimFileState, SimSnapshot, SimStats};
use super::path::SimPath;
use super::rng::SplitMix64;
use crate::clock::Clock;
use crate::storage::{Advice, CanonicalPath, LockMode, Metadata, OpenMode};

/// The size of a page of the simulated page cache: the unit in which a failed writeback loses
/// data and in which [`Advice::DontNeed`] drops it.
pub const PAGE_SIZE: u64 = 4096;

/// The largest file the simulator holds by default (256 MiB): files live in memory, so a caller's
/// `set_len(u64::MAX)` must be an error (EFBIG), not an allocation failure.
pub(super) const DEFAULT_MAX_FILE_LEN: u64 = 256 << 20;

/// Names a node (an inode). Ids are never reused, not even across crashes, so a stale id can
/// never reach a newer file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct NodeId(u64);

impl NodeId {
    /// The id as a number: the simulated file's inode number.
    pub(super) fn number(self) -> u64 {
        self.0
    }
}

/// A simulated file's [`FileId`](crate::storage::FileId): its node id on device 0 (ids are
/// never reused, so a recreated file always differs).
pub(super) fn sim_file_id(id: NodeId) -> crate::storage::FileId {
    crate::storage::FileId {
        device: 0,
        inode: id.number(),
    }
}

/// The root directory, which always exists and is always durable.
pub(super) const ROOT: NodeId = NodeId(0);

/// A file or a directory.
#[derive(Debug)]
pub(super) enum Node {
    Dir(DirNode),
    File(FileNode),
}

/// A directory: names mapped to nodes, live and durable.
///
/// Invariant: applying `pending` in order to `durable` gives `live`. `sync_dir` makes
/// `durable = live`; a crash keeps `durable` plus a prefix of `pending`.
#[derive(Debug)]
pub(super) struct DirNode {
    /// The entries every call sees now.
    pub(super) live: BTreeMap<String, NodeId>,
    /// The entries as of the last `sync_dir` of this directory.
    pub(super) durable: BTreeMap<String, NodeId>,
    /// The entry changes since then, oldest first.
    pub(super) pending: Vec<DirOp>,
    modified_ms: i64,
}

impl DirNode {
    fn new(now_ms: i64) -> Self {
        DirNode {
            live: BTreeMap::new(),
            durable: BTreeMap::new(),
            pending: Vec::new(),
            modified_ms: now_ms,
        }
    }

    fn entries(&self, durable: bool) -> &BTreeMap<String, NodeId> {
        if durable { &self.durable } else { &self.live }
    }
}

/// One unsynced change to a directory's entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum DirOp {
    /// `name` now refers to `node` (a create, or the arriving half of a rename from another
    /// directory); whatever `name` referred to before is replaced.
    Link { name: String, node: NodeId },
    /// `name` is gone (a remove, or the leaving half of a rename to another directory).
    Unlink { name: String },
    /// A rename within this directory: atomic, so a crash shows either both names as before or
    /// `to` as the node that was `from` and no `from`.
    Rename { from: String, to: String },
}

impl DirOp {
    /// Replays this change on `entries`.
    pub(super) fn apply(&self, entries: &mut BTreeMap<String, NodeId>) {
        match self {
            DirOp::Link { name, node } => {
                entries.insert(name.clone(), *node);
            }
            DirOp::Unlink { name } => {
                entries.remove(name);
            }
            DirOp::Rename { from, to } => {
                // `from` is always present: a directory's pending operations replay, in order,
                // exactly the states it went through.
                if let Some(node) = entries.remove(from) {
                    entries.insert(to.clone(), node);
                }
            }
        }
    }
}

/// A file: its live bytes (the page cache), its synced image (the disk), and the changes in
/// between.
///
/// Invariant: applying `pending` in order to `synced`, then setting the length to `live`'s, gives
/// `live` everywhere except on the pages in `lost_pages`, whose bytes in `live` never reached
/// the disk and never will unless the page is written again.
#[derive(Debug)]
pub(super) struct FileNode {
    /// What reads see now: the page cache.
    pub(super) live: Vec<u8>,
    /// The data and length made durable by the last successful sync.
    pub(super) synced: Vec<u8>,
    /// Writes and length changes since then, oldest first.
    pub(super) pending: Vec<FileOp>,
    /// Pages (numbered in [`PAGE_SIZE`] units) that a failed sync left "clean but not on disk":
    /// reads still return the bytes written to them, though the disk never got them, until the
    /// page is dropped from the cache (`Advice::DontNeed`, a crash) or written again.
    pub(super) lost_pages: BTreeSet<u64>,
    pub(super) modified_ms: i64,
    /// The modification time as of the last `sync_all`: `fdatasync` does not persist it.
    pub(super) synced_modified_ms: i64,
    /// Live handles of the current generation; a removed file is kept while this is above 0.
    pub(super) open_handles: usize,
}

impl FileNode {
    fn new(now_ms: i64) -> Self {
        FileNode {
            live: Vec::new(),
            synced: Vec::new(),
            pending: Vec::new(),
            lost_pages: BTreeSet::new(),
            modified_ms: now_ms,
            synced_modified_ms: now_ms,
            open_handles: 0,
        }
    }

    fn apply(&mut self, op: FileOp, now_ms: i64) {
        op.apply(&mut self.live);
        let redirtied = self.redirtied_pages(&op);
        self.pending.push(op);
        // Writing into a lost page dirties the whole cached page again, and its writeback
        // writes all of it: the bytes the failed sync lost reach the disk after all.
        for page in redirtied {
            let start = page.saturating_mul(PAGE_SIZE);
            let end = start.saturating_add(PAGE_SIZE).min(len_u64(&self.live));
            if let Some(bytes) = self.live.get(index(start)..index(end)) {
                self.pending.push(FileOp::Write {
                    offset: start,
                    data: bytes.to_vec(),
                });
            }
        }
        self.modified_ms = now_ms;
    }

    /// Takes out of `lost_pages` the pages that `op` (just applied) changes or cuts, and returns
    /// the ones it dirtied and that still exist.
    fn redirtied_pages(&mut self, op: &FileOp) -> Vec<u64> {
        if self.lost_pages.is_empty() {
            return Vec::new();
        }
        let len = len_u64(&self.live);
        // Pages wholly past the end are gone; a truncation to inside a page zeroes its tail.
        let pages_in_file = len.div_ceil(PAGE_SIZE);
        self.lost_pages.retain(|&page| page < pages_in_file);
        let touched = match op {
            FileOp::Write { offset, data } => page_span(*offset, len_u64(data)),
            FileOp::SetLen(new_len) if new_len % PAGE_SIZE != 0 => {
                (new_len / PAGE_SIZE)..(new_len / PAGE_SIZE + 1)
            }
            FileOp::SetLen(_) => 0..0,
        };
        let redirtied: Vec<u64> = self.lost_pages.range(touched).copied().collect();
        for page in &redirtied {
            self.lost_pages.remove(page);
        }
        redirtied
    }

    /// Makes the live state durable, except the lost pages, which are clean and not written.
    fn sync(&mut self, metadata_too: bool) {
        // Replaying the pending operations costs what was written since the last sync, where
        // copying `live` would cost the whole file on every sync.
        for op in self.pending.drain(..) {
            op.apply(&mut self.synced);
        }
        // The in-memory size is what the sync persists, even when a failed writeback kept the
        // data it covers off the disk (which then reads as zeros).
        resize(&mut self.synced, len_u64(&self.live));
        if metadata_too {
            self.synced_modified_ms = self.modified_ms;
        }
    }

    /// What Linux does after a failed writeback: the pages it could not write are marked clean
    /// and stay in the cache, so reads still return their bytes, a later fsync finds nothing to
    /// write and succeeds, and only dropping the page (or rebooting) shows what the disk holds
    /// (PostgreSQL's "fsyncgate", 2018). Unsynced length changes are forgotten with them.
    fn fail_writeback(&mut self) {
        let len = len_u64(&self.live);
        for op in self.pending.drain(..) {
            if let FileOp::Write { offset, data } = op {
                let end = offset.saturating_add(len_u64(&data)).min(len);
                if offset < end {
                    self.lost_pages.extend(page_span(offset, end - offset));
                }
            }
        }
    }

    /// Drops the lost pages wholly inside `[offset, offset + len)` (`len` 0: to the end of the
    /// file) from the cache, as `posix_fadvise(POSIX_FADV_DONTNEED)` drops clean pages: their
    /// bytes become what the disk holds. A page the range covers only in part stays, as on
    /// Linux. Other pages are either dirty (never dropped) or already equal to the disk.
    fn drop_cached(&mut self, offset: u64, len: u64) -> u64 {
        let first = offset.div_ceil(PAGE_SIZE);
        let end = if len == 0 {
            u64::MAX
        } else {
            offset.saturating_add(len) / PAGE_SIZE
        };
        if first >= end {
            return 0;
        }
        let dropped: Vec<u64> = self.lost_pages.range(first..end).copied().collect();
        let live_len = self.live.len();
        for page in &dropped {
            self.lost_pages.remove(page);
            let start = index(page.saturating_mul(PAGE_SIZE)).min(live_len);
            let stop = start.saturating_add(index(PAGE_SIZE)).min(live_len);
            for position in start..stop {
                let disk = self.synced.get(position).copied().unwrap_or(0);
                if let Some(byte) = self.live.get_mut(position) {
                    *byte = disk;
                }
            }
        }
        u64::try_from(dropped.len()).unwrap_or(u64::MAX)
    }
}

/// The pages `[offset, offset + len)` touches.
fn page_span(offset: u64, len: u64) -> std::ops::Range<u64> {
    if len == 0 {
        return 0..0;
    }
    let last = offset.saturating_add(len - 1);
    (offset / PAGE_SIZE)..(last / PAGE_SIZE + 1)
}

/// One unsynced change to a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum FileOp {
    /// `write_all_at(data, offset)`.
    Write { offset: u64, data: Vec<u8> },
    /// `set_len(len)`.
    SetLen(u64),
}

impl FileOp {
    /// Replays this change on `data`.
    pub(super) fn apply(&self, data: &mut Vec<u8>) {
        match self {
            FileOp::Write {
                offset,
                data: bytes,
            } => write_into(data, *offset, bytes),
            FileOp::SetLen(len) => resize(data, *len),
        }
    }

    /// The file's length after this change, given its length before.
    pub(super) fn len_after(&self, before: u64) -> u64 {
        match self {
            FileOp::Write { offset, data } => before.max(offset.saturating_add(len_u64(data))),
            FileOp::SetLen(len) => *len,
        }
    }
}

/// `bytes.len()` as a u64 (lossless: partlog targets 64-bit Linux).
pub(super) fn len_u64(bytes: &[u8]) -> u64 {
    u64::try_from(bytes.len()).unwrap_or(u64::MAX)
}

/// A file position as an index. Positions are checked against `max_file_len` before any
/// operation stores them, so this never saturates in practice.
fn index(position: u64) -> usize {
    usize::try_from(position).unwrap_or(usize::MAX)
}

/// Stores `bytes` at `offset`, filling any gap before it with zeros.
pub(super) fn write_into(data: &mut Vec<u8>, offset: u64, bytes: &[u8]) {
    let start = index(offset);
    let end = start.saturating_add(bytes.len());
    if data.len() < end {
        data.resize(end, 0);
    }
    if let Some(target) = data.get_mut(start..end) {
        target.copy_from_slice(bytes);
    }
}

/// Truncates or extends (with zeros) to `len` bytes.
pub(super) fn resize(data: &mut Vec<u8>, len: u64) {
    data.resize(index(len), 0);
}

fn errno(errno: Errno) -> io::Error {
    errno.into()
}

/// The error of every call on a handle (or lock) from before a crash.
pub(super) fn dead_handle() -> io::Error {
    io::Error::other("handle from before the simulated crash")
}

/// Who holds the advisory lock on one node.
#[derive(Debug, Default)]
pub(super) struct LockHolders {
    exclusive: Option<u64>,
    shared: BTreeSet<u64>,
}

/// The whole simulated machine: file system, locks, fault rules, counters and event log.
pub(super) struct FsState {
    pub(super) nodes: BTreeMap<NodeId, Node>,
    next_node: u64,
    /// Bumped by every crash; handles and locks remember the generation they were made in.
    pub(super) generation: u64,
    pub(super) locks: BTreeMap<NodeId, LockHolders>,
    /// The holder of each node's OFD write lock (`Storage::lock_foreign_ofd`). A table of its
    /// own: on Linux, `flock` and `fcntl` locks do not see each other.
    pub(super) ofd_locks: BTreeMap<NodeId, u64>,
    next_lock_id: u64,
    /// The tag of this file system in `CanonicalPath`s. A crash draws a new one: the process
    /// that saw the old one is gone, and so must be whatever it keyed by the old paths.
    pub(super) file_system: u64,
    pub(super) faults: FaultTable,
    pub(super) stats: SimStats,
    pub(super) events: Vec<SimEvent>,
    /// Draws the seed of each crash that is not given one, so that a run is determined by the
    /// simulator's seed alone.
    pub(super) rng: SplitMix64,
    logical_ms: i64,
    pub(super) clock: Option<Arc<dyn Clock>>,
    pub(super) max_file_len: u64,
}

impl std::fmt::Debug for FsState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FsState")
            .field("nodes", &self.nodes.len())
            .field("generation", &self.generation)
            .field("armed_faults", &self.faults.armed())
            .finish_non_exhaustive()
    }
}

impl FsState {
    pub(super) fn new(seed: u64) -> Self {
        let mut nodes = BTreeMap::new();
        nodes.insert(ROOT, Node::Dir(DirNode::new(0)));
        FsState {
            nodes,
            next_node: 1,
            generation: 0,
            locks: BTreeMap::new(),
            ofd_locks: BTreeMap::new(),
            next_lock_id: 0,
            file_system: CanonicalPath::unique_file_system(),
            faults: FaultTable::default(),
            stats: SimStats::default(),
            events: Vec::new(),
            rng: SplitMix64::new(seed),
            logical_ms: 0,
            clock: None,
            max_file_len: DEFAULT_MAX_FILE_LEN,
        }
    }

    /// The time for a modification: the configured clock, or else a counter that ticks once
    /// per modification, which keeps runs deterministic and modification times distinct.
    fn now_ms(&mut self) -> i64 {
        match &self.clock {
            Some(clock) => clock.now_ms(),
            None => {
                self.logical_ms += 1;
                self.logical_ms
            }
        }
    }

    fn alloc(&mut self, node: Node) -> NodeId {
        let id = NodeId(self.next_node);
        self.next_node += 1;
        self.nodes.insert(id, node);
        id
    }

    fn dir(&self, id: NodeId) -> Option<&DirNode> {
        match self.nodes.get(&id) {
            Some(Node::Dir(dir)) => Some(dir),
            _ => None,
        }
    }

    fn dir_mut(&mut self, id: NodeId) -> Option<&mut DirNode> {
        match self.nodes.get_mut(&id) {
            Some(Node::Dir(dir)) => Some(dir),
            _ => None,
        }
    }

    fn file_mut(&mut self, id: NodeId) -> Option<&mut FileNode> {
        match self.nodes.get_mut(&id) {
            Some(Node::File(file)) => Some(file),
            _ => None,
        }
    }

    fn is_dir(&self, id: NodeId) -> bool {
        self.dir(id).is_some()
    }

    fn child(&self, dir: NodeId, name: &str) -> Option<NodeId> {
        self.dir(dir).and_then(|d| d.live.get(name).copied())
    }

    /// Follows `names` from the root through the live (or durable) entries.
    fn walk(&self, names: &[String], durable: bool) -> io::Result<NodeId> {
        let mut current = ROOT;
        for name in names {
            let dir = self.dir(current).ok_or_else(|| errno(Errno::NOTDIR))?;
            current = *dir
                .entries(durable)
                .get(name)
                .ok_or_else(|| errno(Errno::NOENT))?;
        }
        Ok(current)
    }

    fn lookup(&self, path: &SimPath) -> io::Result<NodeId> {
        self.walk(path.names(), false)
    }

    fn lookup_dir(&self, names: &[String]) -> io::Result<NodeId> {
        let id = self.walk(names, false)?;
        if self.is_dir(id) {
            Ok(id)
        } else {
            Err(errno(Errno::NOTDIR))
        }
    }

    /// Adds a new entry, live now and pending for durability.
    fn link(&mut self, parent: NodeId, name: &str, node: NodeId) {
        let now = self.now_ms();
        if let Some(dir) = self.dir_mut(parent) {
            dir.live.insert(name.to_owned(), node);
            dir.pending.push(DirOp::Link {
                name: name.to_owned(),
                node,
            });
            dir.modified_ms = now;
        }
    }

    pub(super) fn record(&mut self, event: SimEvent) {
        self.events.push(event);
    }

    /// Updates the per-path counters of `path`, allocating its key only the first time.
    fn count_path(&mut self, path: &Path, count: impl FnOnce(&mut PathStats)) {
        match self.stats.per_path.get_mut(path) {
            Some(stats) => count(stats),
            None => count(self.stats.per_path.entry(path.to_path_buf()).or_default()),
        }
    }

    /// Counts `op` against the armed fault rules; a fired rule is counted and logged.
    fn fault(&mut self, op: FaultOp, path: &Path) -> Option<FaultEffect> {
        let effect = self.faults.on_operation(op, &path.to_string_lossy())?;
        self.stats.faults += 1;
        self.record(SimEvent::Fault {
            op,
            path: path.to_path_buf(),
        });
        Some(effect)
    }

    /// The error a fired fault returns; a crash effect crashes the machine first.
    fn fault_error(&mut self, effect: FaultEffect) -> io::Error {
        match effect {
            FaultEffect::Fail(error) | FaultEffect::ShortWrite { error, .. } => error.to_io_error(),
            FaultEffect::Crash(config) => {
                self.crash(&config);
                dead_handle()
            }
        }
    }

    /// Fails with the fault's error if a rule fires for `op`.
    fn check(&mut self, op: FaultOp, path: &Path) -> io::Result<()> {
        match self.fault(op, path) {
            Some(effect) => Err(self.fault_error(effect)),
            None => Ok(()),
        }
    }

    // ----- Namespace operations (the `Storage` trait) -----

    /// Resolves (and for the create modes, creates) a file; returns it and whether it is new.
    /// Does not count an open: see [`Self::open`].
    fn open_node(&mut self, path: &SimPath, mode: OpenMode) -> io::Result<(NodeId, bool)> {
        let Some((parent_names, name)) = path.split_last() else {
            return Err(errno(Errno::ISDIR));
        };
        let parent = self.lookup_dir(parent_names)?;
        let absolute = path.to_path_buf();
        match self.child(parent, name) {
            Some(id) if self.is_dir(id) => Err(errno(Errno::ISDIR)),
            Some(_) if mode == OpenMode::CreateNew => Err(errno(Errno::EXIST)),
            Some(id) => {
                self.check(FaultOp::Open, &absolute)?;
                Ok((id, false))
            }
            None if matches!(mode, OpenMode::Read | OpenMode::ReadWrite) => {
                Err(errno(Errno::NOENT))
            }
            None => {
                self.check(FaultOp::Create, &absolute)?;
                let now = self.now_ms();
                let id = self.alloc(Node::File(FileNode::new(now)));
                self.link(parent, name, id);
                self.stats.creates += 1;
                self.record(SimEvent::Create { path: absolute });
                Ok((id, true))
            }
        }
    }

    /// Opens a file for a new handle; the caller makes the handle with the returned node.
    pub(super) fn open(&mut self, path: &SimPath, mode: OpenMode) -> io::Result<NodeId> {
        let (id, _) = self.open_node(path, mode)?;
        if let Some(file) = self.file_mut(id) {
            file.open_handles += 1;
        }
        self.stats.opens += 1;
        self.count_path(&path.to_path_buf(), |stats| stats.opens += 1);
        Ok(id)
    }

    pub(super) fn create_dir_all(&mut self, path: &SimPath) -> io::Result<()> {
        let names = path.names();
        let mut current = ROOT;
        let mut so_far = SimPath::root();
        for (depth, name) in names.iter().enumerate() {
            so_far = so_far.join(name);
            match self.child(current, name) {
                Some(id) if self.is_dir(id) => current = id,
                // What mkdir(2) says, and std's create_dir_all passes on.
                Some(_) if depth + 1 == names.len() => return Err(errno(Errno::EXIST)),
                Some(_) => return Err(errno(Errno::NOTDIR)),
                None => {
                    let absolute = so_far.to_path_buf();
                    self.check(FaultOp::CreateDir, &absolute)?;
                    let now = self.now_ms();
                    let id = self.alloc(Node::Dir(DirNode::new(now)));
                    self.link(current, name, id);
                    self.stats.dirs_created += 1;
                    self.record(SimEvent::CreateDir { path: absolute });
                    current = id;
                }
            }
        }
        Ok(())
    }

    pub(super) fn sync_dir(&mut self, path: &SimPath) -> io::Result<()> {
        let id = self.lookup(path)?;
        if !self.is_dir(id) {
            return Err(errno(Errno::NOTDIR));
        }
        let absolute = path.to_path_buf();
        self.check(FaultOp::SyncDir, &absolute)?;
        if let Some(dir) = self.dir_mut(id) {
            dir.durable.clone_from(&dir.live);
            dir.pending.clear();
        }
        self.stats.sync_dirs += 1;
        self.record(SimEvent::SyncDir { path: absolute });
        // Entries that just stopped being durable may have been the last hold on a node.
        self.sweep();
        Ok(())
    }

    pub(super) fn rename(&mut self, from: &SimPath, to: &SimPath) -> io::Result<()> {
        let (Some((from_parent_names, from_name)), Some((to_parent_names, to_name))) =
            (from.split_last(), to.split_last())
        else {
            return Err(errno(Errno::BUSY));
        };
        let from_parent = self.lookup_dir(from_parent_names)?;
        let node = self
            .child(from_parent, from_name)
            .ok_or_else(|| errno(Errno::NOENT))?;
        let to_parent = self.lookup_dir(to_parent_names)?;
        let target = self.child(to_parent, to_name);
        if target == Some(node) {
            // Both names are the same file: rename(2) does nothing.
            return Ok(());
        }
        if self.is_dir(node) {
            if from_parent != to_parent {
                // Keeping every directory under its first parent keeps the tree acyclic in every
                // crash image; partlog only renames directories in place (`-delete`).
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "the simulator renames a directory only within its parent",
                ));
            }
            match target.map(|t| self.dir(t)) {
                Some(None) => return Err(errno(Errno::NOTDIR)),
                Some(Some(dir)) if !dir.live.is_empty() => return Err(errno(Errno::NOTEMPTY)),
                _ => {}
            }
        } else if target.is_some_and(|t| self.is_dir(t)) {
            return Err(errno(Errno::ISDIR));
        }
        let from_absolute = from.to_path_buf();
        self.check(FaultOp::Rename, &from_absolute)?;
        let now = self.now_ms();
        if from_parent == to_parent {
            if let Some(dir) = self.dir_mut(from_parent) {
                dir.live.remove(from_name);
                dir.live.insert(to_name.to_owned(), node);
                dir.pending.push(DirOp::Rename {
                    from: from_name.to_owned(),
                    to: to_name.to_owned(),
                });
                dir.modified_ms = now;
            }
        } else {
            // Two directories, two halves: each becomes durable with its own directory's sync.
            if let Some(dir) = self.dir_mut(from_parent) {
                dir.live.remove(from_name);
                dir.pending.push(DirOp::Unlink {
                    name: from_name.to_owned(),
                });
                dir.modified_ms = now;
            }
            self.link(to_parent, to_name, node);
        }
        self.stats.renames += 1;
        self.record(SimEvent::Rename {
            from: from_absolute,
            to: to.to_path_buf(),
        });
        Ok(())
    }

    /// Sets a file's modification time. Like any metadata change it is live at once and durable
    /// only after a `sync_all` of the file: a crash before that brings back the synced one.
    pub(super) fn set_mtime(&mut self, path: &SimPath, mtime_ms: i64) -> io::Result<()> {
        let id = self.lookup(path)?;
        if self.is_dir(id) {
            // The OS twin could, but partlog never sets a directory's time: a caller's bug.
            return Err(errno(Errno::ISDIR));
        }
        let absolute = path.to_path_buf();
        self.check(FaultOp::SetMtime, &absolute)?;
        if let Some(file) = self.file_mut(id) {
            file.modified_ms = mtime_ms;
        }
        self.stats.set_mtimes += 1;
        self.record(SimEvent::SetMtime {
            path: absolute,
            mtime_ms,
        });
        Ok(())
    }

    pub(super) fn remove(&mut self, path: &SimPath) -> io::Result<()> {
        let Some((parent_names, name)) = path.split_last() else {
            return Err(errno(Errno::ISDIR));
        };
        let parent = self.lookup_dir(parent_names)?;
        let node = self
            .child(parent, name)
            .ok_or_else(|| errno(Errno::NOENT))?;
        if self.is_dir(node) {
            // unlink(2) of a directory on Linux.
            return Err(errno(Errno::ISDIR));
        }
        let absolute = path.to_path_buf();
        self.check(FaultOp::Remove, &absolute)?;
        let now = self.now_ms();
        if let Some(dir) = self.dir_mut(parent) {
            dir.live.remove(name);
            dir.pending.push(DirOp::Unlink {
                name: name.to_owned(),
            });
            dir.modified_ms = now;
        }
        self.stats.removes += 1;
        self.record(SimEvent::Remove { path: absolute });
        Ok(())
    }

    pub(super) fn list(&self, path: &SimPath) -> io::Result<Vec<String>> {
        let id = self.lookup(path)?;
        let dir = self.dir(id).ok_or_else(|| errno(Errno::NOTDIR))?;
        Ok(dir.live.keys().cloned().collect())
    }

    pub(super) fn metadata(&self, path: &SimPath) -> io::Result<Metadata> {
        let id = self.lookup(path)?;
        Ok(match self.nodes.get(&id) {
            Some(Node::File(file)) => Metadata {
                len: len_u64(&file.live),
                is_dir: false,
                modified_ms: file.modified_ms,
                file_id: Some(sim_file_id(id)),
            },
            Some(Node::Dir(dir)) => Metadata {
                len: 0,
                is_dir: true,
                modified_ms: dir.modified_ms,
                file_id: Some(sim_file_id(id)),
            },
            None => return Err(errno(Errno::NOENT)),
        })
    }

    /// Takes the advisory lock on `path`; returns the node and the holder's id, or `Ok(None)`
    /// when another holder conflicts.
    pub(super) fn lock(
        &mut self,
        path: &SimPath,
        mode: LockMode,
    ) -> io::Result<Option<(NodeId, u64)>> {
        let node = match mode {
            // flock needs an open descriptor: the OS twin opens (and creates) the file read-write.
            LockMode::Exclusive => self.open_node(path, OpenMode::Create)?.0,
            LockMode::Shared => self.lookup(path)?,
        };
        let holders = self.locks.entry(node).or_default();
        let free = match mode {
            LockMode::Exclusive => holders.exclusive.is_none() && holders.shared.is_empty(),
            LockMode::Shared => holders.exclusive.is_none(),
        };
        if !free {
            return Ok(None);
        }
        let id = self.next_lock_id;
        self.next_lock_id += 1;
        match mode {
            LockMode::Exclusive => holders.exclusive = Some(id),
            LockMode::Shared => {
                holders.shared.insert(id);
            }
        }
        Ok(Some((node, id)))
    }

    /// The canonical form of an existing path: its absolute form, tagged with this file system.
    pub(super) fn canonical_path(&self, path: &SimPath) -> io::Result<CanonicalPath> {
        self.lookup(path)?;
        Ok(CanonicalPath::new(self.file_system, path.to_path_buf()))
    }

    /// Takes the OFD write lock on `path` (creating the file, as the OS twin does); returns the
    /// node and the holder's id, or `Ok(None)` when anyone holds it. Every call is a new open
    /// file description, so two calls conflict even within one process, as on Linux.
    pub(super) fn lock_ofd(&mut self, path: &SimPath) -> io::Result<Option<(NodeId, u64)>> {
        let node = self.open_node(path, OpenMode::Create)?.0;
        if self.ofd_locks.contains_key(&node) {
            return Ok(None);
        }
        let id = self.next_lock_id;
        self.next_lock_id += 1;
        self.ofd_locks.insert(node, id);
        Ok(Some((node, id)))
    }

    pub(super) fn unlock_ofd(&mut self, node: NodeId, id: u64) {
        if self.ofd_locks.get(&node) == Some(&id) {
            self.ofd_locks.remove(&node);
        }
    }

    pub(super) fn unlock(&mut self, node: NodeId, id: u64) {
        if let Some(holders) = self.locks.get_mut(&node) {
            if holders.exclusive == Some(id) {
                holders.exclusive = None;
            }
            holders.shared.remove(&id);
            if holders.exclusive.is_none() && holders.shared.is_empty() {
                self.locks.remove(&node);
            }
        }
    }

    // ----- File operations (the `StorageFile` trait), on behalf of a handle -----

    /// The file behind a live handle.
    fn handle_file(&mut self, handle: &Handle<'_>) -> io::Result<&mut FileNode> {
        if handle.generation != self.generation {
            return Err(dead_handle());
        }
        // A node with open handles is never swept, so this always finds the file.
        self.file_mut(handle.node)
            .ok_or_else(|| io::Error::other("simulated file vanished"))
    }

    /// A handle opened read-only refuses changes, with the errno Linux gives for the call:
    /// EBADF for pwrite(2), EINVAL for ftruncate(2).
    fn check_writable(handle: &Handle<'_>, refusal: Errno) -> io::Result<()> {
        if handle.writable {
            Ok(())
        } else {
            Err(errno(refusal))
        }
    }

    fn check_len(&self, end: Option<u64>) -> io::Result<u64> {
        match end {
            Some(end) if end <= self.max_file_len => Ok(end),
            _ => Err(errno(Errno::FBIG)),
        }
    }

    pub(super) fn read_at(
        &mut self,
        handle: &Handle<'_>,
        buf: &mut [u8],
        offset: u64,
    ) -> io::Result<usize> {
        self.handle_file(handle)?;
        self.check(FaultOp::Read, handle.path)?;
        let file = self.handle_file(handle)?;
        let start = index(offset).min(file.live.len());
        let available = file.live.get(start..).unwrap_or_default();
        let n = available.len().min(buf.len());
        if let (Some(dst), Some(src)) = (buf.get_mut(..n), available.get(..n)) {
            dst.copy_from_slice(src);
        }
        let bytes = u64::try_from(n).unwrap_or(u64::MAX);
        self.stats.reads += 1;
        self.stats.read_bytes += bytes;
        self.count_path(handle.path, |stats| {
            stats.reads += 1;
            stats.read_bytes += bytes;
        });
        Ok(n)
    }

    pub(super) fn map_read(&mut self, handle: &Handle<'_>) -> io::Result<Vec<u8>> {
        self.handle_file(handle)?;
        self.check(FaultOp::Read, handle.path)?;
        let copy = self.handle_file(handle)?.live.clone();
        self.stats.maps += 1;
        self.count_path(handle.path, |stats| stats.maps += 1);
        Ok(copy)
    }

    pub(super) fn write_at(
        &mut self,
        handle: &Handle<'_>,
        buf: &[u8],
        offset: u64,
    ) -> io::Result<()> {
        self.handle_file(handle)?;
        Self::check_writable(handle, Errno::BADF)?;
        self.check_len(offset.checked_add(len_u64(buf)))?;
        if let Some(effect) = self.fault(FaultOp::Write, handle.path) {
            if let FaultEffect::ShortWrite { written, .. } = effect {
                let stored = buf.get(..index(written)).unwrap_or(buf);
                self.store(handle, stored, offset)?;
            }
            return Err(self.fault_error(effect));
        }
        self.store(handle, buf, offset)
    }

    /// Applies a write that passed every check.
    fn store(&mut self, handle: &Handle<'_>, buf: &[u8], offset: u64) -> io::Result<()> {
        let now = self.now_ms();
        let file = self.handle_file(handle)?;
        if !buf.is_empty() {
            // pwrite(2) of nothing changes nothing, not even a length.
            file.apply(
                FileOp::Write {
                    offset,
                    data: buf.to_vec(),
                },
                now,
            );
        }
        let len = len_u64(buf);
        self.stats.writes += 1;
        self.stats.written_bytes += len;
        self.count_path(handle.path, |stats| stats.writes += 1);
        self.record(SimEvent::Write {
            path: handle.path.to_path_buf(),
            offset,
            len,
        });
        Ok(())
    }

    pub(super) fn len(&mut self, handle: &Handle<'_>) -> io::Result<u64> {
        Ok(len_u64(&self.handle_file(handle)?.live))
    }

    pub(super) fn set_len(&mut self, handle: &Handle<'_>, len: u64) -> io::Result<()> {
        self.handle_file(handle)?;
        Self::check_writable(handle, Errno::INVAL)?;
        self.check_len(Some(len))?;
        self.check(FaultOp::SetLen, handle.path)?;
        let now = self.now_ms();
        self.handle_file(handle)?.apply(FileOp::SetLen(len), now);
        self.stats.set_lens += 1;
        self.record(SimEvent::SetLen {
            path: handle.path.to_path_buf(),
            len,
        });
        Ok(())
    }

    pub(super) fn sync(&mut self, handle: &Handle<'_>, data_only: bool) -> io::Result<()> {
        self.handle_file(handle)?;
        if let Some(effect) = self.fault(FaultOp::Sync, handle.path) {
            if !matches!(effect, FaultEffect::Crash(_)) {
                self.handle_file(handle)?.fail_writeback();
            }
            return Err(self.fault_error(effect));
        }
        self.handle_file(handle)?.sync(!data_only);
        self.stats.syncs += 1;
        self.count_path(handle.path, |stats| stats.syncs += 1);
        self.record(SimEvent::Sync {
            path: handle.path.to_path_buf(),
            data_only,
        });
        Ok(())
    }

    /// `posix_fadvise` on behalf of a handle: counted, and for [`Advice::DontNeed`] the lost
    /// pages in the range are dropped (see [`FileNode::drop_cached`]). The other hints change
    /// nothing a caller can see.
    pub(super) fn advise(
        &mut self,
        handle: &Handle<'_>,
        offset: u64,
        len: u64,
        advice: Advice,
    ) -> io::Result<()> {
        let file = self.handle_file(handle)?;
        let dropped = if advice == Advice::DontNeed {
            file.drop_cached(offset, len)
        } else {
            0
        };
        self.stats.advises += 1;
        self.stats.lost_pages_dropped += dropped;
        self.count_path(handle.path, |stats| stats.advises += 1);
        Ok(())
    }

    /// Forgets a handle that is being dropped.
    pub(super) fn close(&mut self, node: NodeId, generation: u64) {
        if generation == self.generation
            && let Some(file) = self.file_mut(node)
        {
            file.open_handles = file.open_handles.saturating_sub(1);
        }
    }

    // ----- Inspection -----

    /// The live (or durable) tree with the live (or synced) contents of its files.
    pub(super) fn snapshot(&self, durable: bool) -> SimSnapshot {
        let mut snapshot = SimSnapshot::default();
        let mut stack = vec![(ROOT, SimPath::root())];
        while let Some((id, path)) = stack.pop() {
            match self.nodes.get(&id) {
                Some(Node::Dir(dir)) => {
                    snapshot.dirs.insert(path.to_path_buf());
                    for (name, child) in dir.entries(durable) {
                        stack.push((*child, path.join(name)));
                    }
                }
                Some(Node::File(file)) => {
                    let bytes = if durable { &file.synced } else { &file.live };
                    snapshot.files.insert(path.to_path_buf(), bytes.clone());
                }
                None => {}
            }
        }
        snapshot
    }

    pub(super) fn file_state(&self, path: &SimPath) -> io::Result<SimFileState> {
        let id = self.lookup(path)?;
        let Some(Node::File(file)) = self.nodes.get(&id) else {
            return Err(errno(Errno::ISDIR));
        };
        Ok(SimFileState {
            current: file.live.clone(),
            synced: file.synced.clone(),
            unsynced_ops: file.pending.len(),
            lost_pages: file.lost_pages.len(),
            name_durable: self.walk(path.names(), true).ok() == Some(id),
        })
    }

    /// Forgets nodes that no directory refers to (live, durable or pending) and no handle holds.
    pub(super) fn sweep(&mut self) {
        let mut referenced = BTreeSet::from([ROOT]);
        for (id, node) in &self.nodes {
            match node {
                Node::Dir(dir) => {
                    referenced.extend(dir.live.values().copied());
                    referenced.extend(dir.durable.values().copied());
                    for op in &dir.pending {
                        if let DirOp::Link { node, .. } = op {
                            referenced.insert(*node);
                        }
                    }
                }
                Node::File(file) if file.open_handles > 0 => {
                    referenced.insert(*id);
                }
                Node::File(_) => {}
            }
        }
        self.nodes.retain(|id, _| referenced.contains(id));
    }
}

/// What a handle tells the state about itself on every call.
#[derive(Debug)]
pub(super) struct Handle<'a> {
    pub(super) node: NodeId,
    pub(super) generation: u64,
    /// The absolute path it was opened at, for statistics, events and fault matching.
    pub(super) path: &'a Path,
    pub(super) writable: bool,
}
