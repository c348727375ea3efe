//! The nodes of the simulated file system (its inodes), each holding its live state and the
//! durable state a crash falls back to: a directory's live, durable and pending entries, and a
//! file's page cache, synced image and unsynced writes, with what a failed writeback and
//! `POSIX_FADV_DONTNEED` do to its pages. The tree that links them is [`FsState`](super::state::FsState).

use std::collections::{BTreeMap, BTreeSet};

/// The size of a page of the simulated page cache: the unit in which a failed writeback loses
/// data and in which [`Advice::DontNeed`](crate::storage::Advice::DontNeed) drops it.
pub const PAGE_SIZE: u64 = 4096;

/// Names a node (an inode). Ids are never reused, not even across crashes, so a stale id can
/// never reach a newer file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct NodeId(pub(super) u64);

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
    pub(super) modified_ms: i64,
}

impl DirNode {
    pub(super) fn new(now_ms: i64) -> Self {
        DirNode {
            live: BTreeMap::new(),
            durable: BTreeMap::new(),
            pending: Vec::new(),
            modified_ms: now_ms,
        }
    }

    pub(super) fn entries(&self, durable: bool) -> &BTreeMap<String, NodeId> {
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
    pub(super) fn new(now_ms: i64) -> Self {
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

    pub(super) fn apply(&mut self, op: FileOp, now_ms: i64) {
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
    pub(super) fn sync(&mut self, metadata_too: bool) {
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
    pub(super) fn fail_writeback(&mut self) {
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
    pub(super) fn drop_cached(&mut self, offset: u64, len: u64) -> u64 {
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
pub(super) fn index(position: u64) -> usize {
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
