//! Kafka's segment file names: the base offset in 20 decimal digits, then a suffix.
//!
//! `00000000000000368769.log`, `.index`, `.timeindex`, `.txnindex`, and the transient suffixes
//! Kafka appends to a whole name: `.deleted`, `.cleaned`, `.swap`.

use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::storage::Storage;

/// The `.log` suffix of a segment's record file.
pub const LOG_SUFFIX: &str = ".log";
/// The `.index` suffix of a segment's offset index.
pub const INDEX_SUFFIX: &str = ".index";
/// The `.timeindex` suffix of a segment's time index.
pub const TIME_INDEX_SUFFIX: &str = ".timeindex";
/// The `.txnindex` suffix of a segment's aborted-transaction index.
pub const TXN_INDEX_SUFFIX: &str = ".txnindex";
/// The suffix Kafka appends to a file scheduled for deletion.
pub const DELETED_SUFFIX: &str = ".deleted";
/// The suffix of a file the cleaner is still writing.
pub const CLEANED_SUFFIX: &str = ".cleaned";
/// The suffix of a complete replacement waiting to be swapped in.
pub const SWAP_SUFFIX: &str = ".swap";

/// Which file of a segment a name denotes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentFileKind {
    /// `.log`: the record batches.
    Log,
    /// `.index`: the offset index.
    OffsetIndex,
    /// `.timeindex`: the time index.
    TimeIndex,
    /// `.txnindex`: the aborted-transaction index.
    TxnIndex,
}

impl SegmentFileKind {
    /// The suffix of this kind of file.
    pub fn suffix(self) -> &'static str {
        match self {
            SegmentFileKind::Log => LOG_SUFFIX,
            SegmentFileKind::OffsetIndex => INDEX_SUFFIX,
            SegmentFileKind::TimeIndex => TIME_INDEX_SUFFIX,
            SegmentFileKind::TxnIndex => TXN_INDEX_SUFFIX,
        }
    }
}

/// A transient suffix Kafka appends after the kind's suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransientSuffix {
    /// `.deleted`
    Deleted,
    /// `.cleaned`
    Cleaned,
    /// `.swap`
    Swap,
}

/// A parsed segment file name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentFileName {
    /// The base offset encoded in the name.
    pub base_offset: i64,
    /// Which file of the segment this is.
    pub kind: SegmentFileKind,
    /// A transient suffix, if any.
    pub transient: Option<TransientSuffix>,
}

/// The name of a segment file: `format!("{base_offset:020}{suffix}")`.
pub fn segment_file_name(base_offset: i64, kind: SegmentFileKind) -> String {
    format!("{base_offset:020}{}", kind.suffix())
}

/// The path of a segment file in `dir`.
pub fn segment_file_path(dir: &Path, base_offset: i64, kind: SegmentFileKind) -> PathBuf {
    dir.join(segment_file_name(base_offset, kind))
}

/// The path of a segment file on its way in or out: its name with a transient `suffix`
/// ([`CLEANED_SUFFIX`], [`SWAP_SUFFIX`], [`DELETED_SUFFIX`]) appended.
pub(crate) fn transient_segment_file_path(
    dir: &Path,
    base_offset: i64,
    kind: SegmentFileKind,
    suffix: &str,
) -> PathBuf {
    dir.join(format!("{}{suffix}", segment_file_name(base_offset, kind)))
}

/// The base offsets of the `.log` files in `dir`, sorted, leaving out every transient file
/// (`.cleaned`, `.swap`, `.deleted`). A live read-only log re-lists its writer's directory with
/// this, and the tool finds the segments to dump and count.
pub fn list_segment_bases(storage: &dyn Storage, dir: &Path) -> Result<Vec<i64>> {
    let mut bases: Vec<i64> = storage
        .list(dir)?
        .iter()
        .filter_map(|name| parse_segment_file_name(name))
        .filter(|parsed| parsed.transient.is_none() && parsed.kind == SegmentFileKind::Log)
        .map(|parsed| parsed.base_offset)
        .collect();
    bases.sort_unstable();
    Ok(bases)
}

/// Parses a segment file name; `None` for any other name (partlog's own files, Kafka's
/// checkpoints, `.snapshot` files).
pub fn parse_segment_file_name(name: &str) -> Option<SegmentFileName> {
    let (rest, transient) = if let Some(rest) = name.strip_suffix(DELETED_SUFFIX) {
        (rest, Some(TransientSuffix::Deleted))
    } else if let Some(rest) = name.strip_suffix(CLEANED_SUFFIX) {
        (rest, Some(TransientSuffix::Cleaned))
    } else if let Some(rest) = name.strip_suffix(SWAP_SUFFIX) {
        (rest, Some(TransientSuffix::Swap))
    } else {
        (name, None)
    };
    let (digits, kind) = [
        SegmentFileKind::Log,
        SegmentFileKind::OffsetIndex,
        SegmentFileKind::TimeIndex,
        SegmentFileKind::TxnIndex,
    ]
    .into_iter()
    .find_map(|kind| rest.strip_suffix(kind.suffix()).map(|d| (d, kind)))?;
    // Kafka pads to at least 20 digits; a larger offset simply has more (it cannot: i64::MAX has 19).
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let base_offset = digits.parse::<i64>().ok()?;
    Some(SegmentFileName {
        base_offset,
        kind,
        transient,
    })
}

/// Renames every existing file of the segment at `base_offset` (`.log`, `.index`, `.timeindex`,
/// `.txnindex`) by appending `suffix` (Kafka's `.deleted`), and returns the new paths. Open
/// handles keep working: a rename does not touch the inode.
pub fn rename_segment_files(
    storage: &dyn crate::storage::Storage,
    dir: &Path,
    base_offset: i64,
    suffix: &str,
) -> crate::error::Result<Vec<PathBuf>> {
    let mut renamed = Vec::new();
    for kind in [
        SegmentFileKind::Log,
        SegmentFileKind::OffsetIndex,
        SegmentFileKind::TimeIndex,
        SegmentFileKind::TxnIndex,
    ] {
        let from = segment_file_path(dir, base_offset, kind);
        if storage.exists(&from)? {
            let to = dir.join(format!("{}{suffix}", segment_file_name(base_offset, kind)));
            storage.rename(&from, &to)?;
            renamed.push(to);
        }
    }
    Ok(renamed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_twenty_digits() {
        assert_eq!(
            segment_file_name(368769, SegmentFileKind::Log),
            "00000000000000368769.log"
        );
        assert_eq!(
            segment_file_name(i64::MAX, SegmentFileKind::TimeIndex),
            "09223372036854775807.timeindex"
        );
    }

    #[test]
    fn parse_round_trips_and_rejects_others() {
        let parsed = parse_segment_file_name("00000000005000000000.index.deleted").unwrap();
        assert_eq!(parsed.base_offset, 5_000_000_000);
        assert_eq!(parsed.kind, SegmentFileKind::OffsetIndex);
        assert_eq!(parsed.transient, Some(TransientSuffix::Deleted));
        let parsed = parse_segment_file_name("00000000000000000042.log").unwrap();
        assert_eq!(
            (parsed.base_offset, parsed.kind, parsed.transient),
            (42, SegmentFileKind::Log, None)
        );
        for other in [
            "partlog.lock",
            "partlog.checkpoint",
            "00000000000000000042.snapshot",
            "leader-epoch-checkpoint",
            "0000000000000000042.log",
            "0000000000000000004x.log",
            "00000000000000000042.log.tmp",
            ".log",
        ] {
            assert_eq!(parse_segment_file_name(other), None, "{other}");
        }
    }
}
