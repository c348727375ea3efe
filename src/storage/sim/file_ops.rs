//! The file operations of the `StorageFile` trait, on behalf of a [`Handle`]: reads, writes
//! (whole, short or refused), length changes, syncs (and a failed sync's lost writeback), advice
//! and close. Each checks that the handle outlived no crash, counts itself and logs its event.

use std::io;
use std::path::Path;

use rustix::io::Errno;

use super::fault::{FaultEffect, FaultOp};
use super::node::{FileNode, FileOp, Node, NodeId, index, len_u64};
use super::observe::SimEvent;
use super::state::{FsState, dead_handle, errno};
use crate::storage::Advice;

impl FsState {
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

    /// `syncfs`: every file's data, length and metadata and every directory's entries become
    /// durable. A failed one fails the writeback of every file with pending writes, as a
    /// failed `sync` does for its file.
    pub(super) fn sync_file_system(&mut self, path: &Path) -> io::Result<()> {
        if let Some(effect) = self.fault(FaultOp::SyncFileSystem, path) {
            if !matches!(effect, FaultEffect::Crash(_)) {
                for node in self.nodes.values_mut() {
                    if let Node::File(file) = node {
                        file.fail_writeback();
                    }
                }
            }
            return Err(self.fault_error(effect));
        }
        for node in self.nodes.values_mut() {
            match node {
                Node::File(file) => file.sync(true),
                Node::Dir(dir) => {
                    dir.durable.clone_from(&dir.live);
                    dir.pending.clear();
                }
            }
        }
        self.stats.file_system_syncs += 1;
        self.record(SimEvent::SyncFileSystem {
            path: path.to_path_buf(),
        });
        // Entries that just stopped being durable may have been the last hold on a node.
        self.sweep();
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
