//! [`Discarded`]: what an open removed from the log (ARCHITECTURE.md §7, "What an open may
//! discard"), and the accounting that fills it in before anything goes.
//!
//! Recovery cuts the log at most once per open: at the first invalid byte, or at the end of a
//! segment followed by a gap, everything after the cut goes (the rest of that segment and every
//! later segment). Before it cuts, it counts what the cut takes, so that the refusal of an open
//! that may not cut (`Error::DamagedWithoutCheckpoint`) and the report of one that did
//! ([`RecoveryReport::discarded`](crate::RecoveryReport::discarded)) say how many records, in
//! which files.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::segment::{BatchWalker, SegmentFileKind, Step, segment_file_path};
use crate::storage::{OpenMode, Storage};

/// Why an open discarded data.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DiscardReason {
    /// A torn tail: bytes above the recovery point that are no whole, valid batch, the normal
    /// result of a crash during a write. None of it was durable.
    TornTail,
    /// A lost tail: a segment ends before the next one begins, above the recovery point (its
    /// unsynced tail was lost while the next segment's name reached the disk). Nothing cut was
    /// durable.
    LostTail,
    /// Corruption that no crash explains (below the recovery point, in a log whose durable
    /// point is unknown, or a batch whose CRC is right), cut under
    /// [`RecoveryMode::TruncateAtCorruption`](crate::RecoveryMode::TruncateAtCorruption).
    /// Records that were durable went.
    Corruption,
    /// The log ended below its start offset: every segment went and the log restarted empty at
    /// the start offset (Kafka's rule). The records were below the start, so no reader could
    /// see them.
    BelowLogStart,
}

impl fmt::Display for DiscardReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DiscardReason::TornTail => "a torn tail (a crash cut a write short)",
            DiscardReason::LostTail => "a lost tail (a crash lost a segment's unsynced end)",
            DiscardReason::Corruption => "corruption",
            DiscardReason::BelowLogStart => "the log ended below its start offset",
        })
    }
}

/// What an open removed from the log (a read-only open: what it left out of its view), from
/// [`RecoveryReport::discarded`](crate::RecoveryReport::discarded).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discarded {
    /// Why.
    pub reason: DiscardReason,
    /// The `.log` file of the segment that was cut.
    pub file: PathBuf,
    /// The byte of `file` the cut starts at: the first invalid byte, or the end of its valid
    /// batches before a gap.
    pub position: u64,
    /// The log end offset after the cut: the first offset that went.
    pub cut_offset: i64,
    /// The offset after the last whole batch that went (`cut_offset` when only bytes that are
    /// no batch went): the log ended at or above it before.
    pub end_offset: i64,
    /// Records in the whole batches that went: those of every deleted segment, counted before
    /// it was deleted, and, in a log that is not compacted, the offsets from `cut_offset` to the
    /// next segment's base (the cut segment's batches after an invalid byte cannot be read).
    pub records: u64,
    /// Bytes removed: the cut segment's from `position`, and every deleted segment's `.log`.
    pub bytes: u64,
    /// The `.log` files of the segments deleted after the cut, in offset order.
    pub deleted_segments: Vec<PathBuf>,
}

impl fmt::Display for Discarded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.reason == DiscardReason::BelowLogStart {
            return write!(
                f,
                "{} segment{} below the log start offset {} (the log restarted empty there)",
                self.deleted_segments.len(),
                if self.deleted_segments.len() == 1 {
                    ""
                } else {
                    "s"
                },
                self.cut_offset
            );
        }
        write!(f, "{} record", self.records)?;
        if self.records != 1 {
            f.write_str("s")?;
        }
        if self.end_offset > self.cut_offset {
            write!(f, " (offsets [{}, {}))", self.cut_offset, self.end_offset)?;
        }
        write!(
            f,
            ", {} bytes: {} from byte {}",
            self.bytes,
            self.file.display(),
            self.position
        )?;
        match self.deleted_segments.as_slice() {
            [] => {}
            [only] => write!(f, " and the segment after it, {}", file_name(only))?,
            [first, .., last] => write!(
                f,
                " and the {} segments after it, {} to {}",
                self.deleted_segments.len(),
                file_name(first),
                file_name(last)
            )?,
        }
        write!(f, "; why: {}", self.reason)
    }
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |name| name.to_string_lossy().into_owned(),
    )
}

/// What the batches of one segment's `.log` that frame correctly hold, read without trusting
/// its indexes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SegmentCount {
    pub records: u64,
    /// The offset after the last whole batch (the base when there is none).
    pub next_offset: i64,
    /// The file's length.
    pub bytes: u64,
}

/// Counts the records of the segment at `base` by walking its batch headers (no CRC is
/// checked: the count says what a cut would take, and stops at the first bytes that do not
/// frame). A legacy message counts its offsets past the message before.
pub(crate) fn count_segment(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    base: i64,
) -> Result<SegmentCount> {
    let path = segment_file_path(dir, base, SegmentFileKind::Log);
    let file = storage.open(&path, OpenMode::Read)?;
    let bytes = file.len()?;
    let mut walker = BatchWalker::new(&file, &path, bytes);
    let mut count = SegmentCount {
        records: 0,
        next_offset: base,
        bytes,
    };
    let mut position = 0;
    loop {
        let frame = match walker.frame_at(position) {
            Ok(Step::Batch(frame)) => frame,
            Ok(_) | Err(Error::Corrupt { .. }) => return Ok(count),
            Err(error) => return Err(error),
        };
        let records = if frame.magic == 2 {
            let header = walker.fill(frame.position, crate::format::RECORD_BATCH_OVERHEAD)?;
            match crate::format::BatchHeader::parse(header) {
                Ok(header) => u64::try_from(header.records_count).unwrap_or(0),
                Err(_) => return Ok(count),
            }
        } else {
            0
        };
        let summary = match walker.summary(&frame) {
            Ok(summary) => summary,
            Err(Error::Corrupt { .. }) => return Ok(count),
            Err(error) => return Err(error),
        };
        count.records += if frame.magic == 2 {
            records
        } else {
            u64::try_from(summary.next_offset() - count.next_offset).unwrap_or(0)
        };
        count.next_offset = summary.next_offset();
        position = frame.position + frame.total_size;
    }
}

/// What a cut of the log at byte `position` of segment `bases[index]` takes: the rest of that
/// segment (whose valid batches end at `cut_offset`, in a file of `file_bytes`) and every
/// later segment, counted before anything goes.
pub(crate) struct CutPlan<'a> {
    pub storage: &'a Arc<dyn Storage>,
    pub dir: &'a Path,
    pub bases: &'a [i64],
    pub index: usize,
    pub position: u64,
    pub cut_offset: i64,
    pub file_bytes: u64,
    /// Offsets are dense between segments (the log is not compacted): the offsets from the cut
    /// to the next segment's base were records.
    pub dense: bool,
}

impl CutPlan<'_> {
    /// Counts what the cut takes.
    pub(crate) fn count(&self, reason: DiscardReason) -> Result<Discarded> {
        let later = &self.bases[(self.index + 1).min(self.bases.len())..];
        let mut discarded = Discarded {
            reason,
            file: segment_file_path(self.dir, self.bases[self.index], SegmentFileKind::Log),
            position: self.position,
            cut_offset: self.cut_offset,
            end_offset: self.cut_offset,
            records: 0,
            bytes: self.file_bytes.saturating_sub(self.position),
            deleted_segments: Vec::with_capacity(later.len()),
        };
        if let Some(&next) = later.first()
            && self.dense
        {
            discarded.records += u64::try_from(next - self.cut_offset).unwrap_or(0);
            discarded.end_offset = next;
        }
        for &base in later {
            let count = count_segment(self.storage, self.dir, base)?;
            discarded.records += count.records;
            discarded.bytes += count.bytes;
            discarded.end_offset = discarded.end_offset.max(count.next_offset);
            discarded.deleted_segments.push(segment_file_path(
                self.dir,
                base,
                SegmentFileKind::Log,
            ));
        }
        Ok(discarded)
    }
}
