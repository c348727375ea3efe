//! The simulated machine, [`FsState`]: the tree that links the nodes (`node.rs`), path lookup,
//! the namespace operations of the `Storage` trait (open, create, rename, remove, sync a
//! directory), the fault rules each operation consults, the counters and event log, and the
//! inspection of the live and durable trees. Its file operations on behalf of a handle are in
//! `file_ops.rs`, its locks in `locks.rs`, a crash in `crash.rs`.
//!
//! Every operation here returns `io::Result` with the errno the Linux call would give; the
//! façade in the parent module adds the path and turns it into [`crate::Error::Io`].

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::Path;
use std::sync::Arc;

use rustix::io::Errno;

use super::fault::{FaultEffect, FaultOp, FaultTable};
use super::locks::LockHolders;
use super::node::{DirNode, DirOp, FileNode, Node, NodeId, ROOT, len_u64, sim_file_id};
use super::observe::{PathStats, SimEvent, SimFileState, SimSnapshot, SimStats};
use super::path::SimPath;
use crate::clock::Clock;
use crate::rng::SplitMix64;
use crate::storage::{CanonicalPath, Metadata, OpenMode};

/// The largest file the simulator holds by default (256 MiB): files live in memory, so a caller's
/// `set_len(u64::MAX)` must be an error (EFBIG), not an allocation failure.
pub(super) const DEFAULT_MAX_FILE_LEN: u64 = 256 << 20;

/// The `io::Error` of `errno`.
pub(super) fn errno(errno: Errno) -> io::Error {
    errno.into()
}

/// The error of every call on a handle (or lock) from before a crash.
pub(super) fn dead_handle() -> io::Error {
    io::Error::other("handle from before the simulated crash")
}

/// The whole simulated machine: file system, locks, fault rules, counters and event log.
pub(super) struct FsState {
    pub(super) nodes: BTreeMap<NodeId, Node>,
    pub(super) next_node: u64,
    /// Bumped by every crash; handles and locks remember the generation they were made in.
    pub(super) generation: u64,
    pub(super) locks: BTreeMap<NodeId, LockHolders>,
    /// The holder of each node's OFD write lock (`Storage::lock_foreign_ofd`). A table of its
    /// own: on Linux, `flock` and `fcntl` locks do not see each other.
    pub(super) ofd_locks: BTreeMap<NodeId, u64>,
    pub(super) next_lock_id: u64,
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
    pub(super) fn now_ms(&mut self) -> i64 {
        match &self.clock {
            Some(clock) => clock.now_ms(),
            None => {
                self.logical_ms += 1;
                self.logical_ms
            }
        }
    }

    pub(super) fn alloc(&mut self, node: Node) -> NodeId {
        let id = NodeId(self.next_node);
        self.next_node += 1;
        self.nodes.insert(id, node);
        id
    }

    pub(super) fn dir(&self, id: NodeId) -> Option<&DirNode> {
        match self.nodes.get(&id) {
            Some(Node::Dir(dir)) => Some(dir),
            _ => None,
        }
    }

    pub(super) fn dir_mut(&mut self, id: NodeId) -> Option<&mut DirNode> {
        match self.nodes.get_mut(&id) {
            Some(Node::Dir(dir)) => Some(dir),
            _ => None,
        }
    }

    pub(super) fn file_mut(&mut self, id: NodeId) -> Option<&mut FileNode> {
        match self.nodes.get_mut(&id) {
            Some(Node::File(file)) => Some(file),
            _ => None,
        }
    }

    pub(super) fn is_dir(&self, id: NodeId) -> bool {
        self.dir(id).is_some()
    }

    pub(super) fn child(&self, dir: NodeId, name: &str) -> Option<NodeId> {
        self.dir(dir).and_then(|d| d.live.get(name).copied())
    }

    /// Follows `names` from the root through the live (or durable) entries.
    pub(super) fn walk(&self, names: &[String], durable: bool) -> io::Result<NodeId> {
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

    pub(super) fn lookup(&self, path: &SimPath) -> io::Result<NodeId> {
        self.walk(path.names(), false)
    }

    pub(super) fn lookup_dir(&self, names: &[String]) -> io::Result<NodeId> {
        let id = self.walk(names, false)?;
        if self.is_dir(id) {
            Ok(id)
        } else {
            Err(errno(Errno::NOTDIR))
        }
    }

    /// Adds a new entry, live now and pending for durability.
    pub(super) fn link(&mut self, parent: NodeId, name: &str, node: NodeId) {
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
    pub(super) fn count_path(&mut self, path: &Path, count: impl FnOnce(&mut PathStats)) {
        match self.stats.per_path.get_mut(path) {
            Some(stats) => count(stats),
            None => count(self.stats.per_path.entry(path.to_path_buf()).or_default()),
        }
    }

    /// Counts `op` against the armed fault rules; a fired rule is counted and logged.
    pub(super) fn fault(&mut self, op: FaultOp, path: &Path) -> Option<FaultEffect> {
        let effect = self.faults.on_operation(op, &path.to_string_lossy())?;
        self.stats.faults += 1;
        self.record(SimEvent::Fault {
            op,
            path: path.to_path_buf(),
        });
        Some(effect)
    }

    /// The error a fired fault returns; a crash effect crashes the machine first.
    pub(super) fn fault_error(&mut self, effect: FaultEffect) -> io::Error {
        match effect {
            FaultEffect::Fail(error) | FaultEffect::ShortWrite { error, .. } => error.to_io_error(),
            FaultEffect::Crash(config) => {
                self.crash(&config);
                dead_handle()
            }
        }
    }

    /// Fails with the fault's error if a rule fires for `op`.
    pub(super) fn check(&mut self, op: FaultOp, path: &Path) -> io::Result<()> {
        match self.fault(op, path) {
            Some(effect) => Err(self.fault_error(effect)),
            None => Ok(()),
        }
    }

    // ----- Namespace operations (the `Storage` trait) -----

    /// Resolves (and for the create modes, creates) a file; returns it and whether it is new.
    /// Does not count an open: see [`Self::open`].
    pub(super) fn open_node(
        &mut self,
        path: &SimPath,
        mode: OpenMode,
    ) -> io::Result<(NodeId, bool)> {
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

    /// The canonical form of an existing path: its absolute form, tagged with this file system.
    pub(super) fn canonical_path(&self, path: &SimPath) -> io::Result<CanonicalPath> {
        self.lookup(path)?;
        Ok(CanonicalPath::new(self.file_system, path.to_path_buf()))
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
