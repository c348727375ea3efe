//! The simulated advisory locks: `flock`'s shared and exclusive locks per node, and the OFD
//! write locks of `Storage::lock_foreign_ofd` in a table of their own (on Linux the two kinds do
//! not see each other). A crash releases every lock.

use std::collections::BTreeSet;
use std::io;

use super::node::NodeId;
use super::path::SimPath;
use super::state::FsState;
use crate::storage::{LockMode, OpenMode};

/// Who holds the advisory lock on one node.
#[derive(Debug, Default)]
pub(super) struct LockHolders {
    exclusive: Option<u64>,
    shared: BTreeSet<u64>,
}

impl FsState {
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
}
