//! One listing of a partition directory, shared by the steps of an open.
//!
//! An open after a clean shutdown reads no sealed segment (ARCHITECTURE.md §3), so listing the
//! directory is its cost per segment: each step that listed it again (recovery's tidying, the
//! producer snapshots' cleanup and load, the `.txnindex` checks) made the open cost several
//! listings of every segment's files. The steps now share this one, and a step that removes a
//! file tells the listing ([`DirListing::forget`]); a step that may create or rename files
//! (a compaction swap completed, an unclean recovery, a rebuilt `.txnindex`) reads it anew.

use std::path::Path;

use super::producer_snapshot::parse_snapshot_file_name;
use crate::error::Result;
use crate::segment::{SegmentFileKind, parse_segment_file_name};
use crate::storage::Storage;

/// The names in a partition directory when it was last listed, less those removed since.
#[derive(Debug, Clone)]
pub(crate) struct DirListing {
    names: Vec<String>,
}

impl DirListing {
    /// Lists `dir`.
    pub(crate) fn read(storage: &dyn Storage, dir: &Path) -> Result<DirListing> {
        Ok(DirListing {
            names: storage.list(dir)?,
        })
    }

    /// Every name, in the storage's order.
    pub(crate) fn names(&self) -> &[String] {
        &self.names
    }

    /// Drops `name`, a file this open removed.
    pub(crate) fn forget(&mut self, name: &str) {
        self.names.retain(|n| n != name);
    }

    /// Drops every name in `names`, files this open removed.
    pub(crate) fn forget_all(&mut self, names: &[String]) {
        if !names.is_empty() {
            self.names.retain(|n| !names.contains(n));
        }
    }

    /// The offsets of the `<offset>.snapshot` files, ascending.
    pub(crate) fn snapshot_offsets(&self) -> Vec<i64> {
        let mut offsets: Vec<i64> = self
            .names
            .iter()
            .filter_map(|name| parse_snapshot_file_name(name))
            .collect();
        offsets.sort_unstable();
        offsets
    }

    /// The bases of the segments with a `.txnindex` file (no transient one), ascending.
    pub(crate) fn txn_index_bases(&self) -> Vec<i64> {
        let mut bases: Vec<i64> = self
            .names
            .iter()
            .filter_map(|name| parse_segment_file_name(name))
            .filter(|name| name.kind == SegmentFileKind::TxnIndex && name.transient.is_none())
            .map(|name| name.base_offset)
            .collect();
        bases.sort_unstable();
        bases
    }
}
