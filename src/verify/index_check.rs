//! The index checks of the walk: each `.index` and `.timeindex` entry is matched against the
//! batch it names as the walk passes it, as Kafka's `DumpLogSegments` checks.
//!
//! Indexes are derived data, so their problems are kept apart from the `.log`'s: grading makes
//! them crash state in a segment that recovery rescans and corruption elsewhere.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::index::{OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset};
use crate::log::LogConfig;
use crate::segment::{SegmentFileKind, segment_file_path};
use crate::storage::Storage;

use super::walk::BatchAt;

/// How many mismatching entries of one index are described one by one; the rest are counted.
const MISMATCHES_DESCRIBED: usize = 3;

/// A problem in an index file, graded later.
#[derive(Debug)]
pub(super) struct IndexProblem {
    pub(super) file: PathBuf,
    pub(super) position: Option<u64>,
    pub(super) what: String,
}

/// What the offset- and time-index checks share: the entries, where the merge with the walk
/// stands, and the tally of problems and mismatched entries.
pub(super) struct IndexTally<E> {
    path: PathBuf,
    entry_size: u64,
    pub(super) entries: Vec<E>,
    next: usize,
    problems: Vec<IndexProblem>,
    mismatches: Vec<String>,
    mismatch_count: usize,
    first_mismatch_entry: Option<usize>,
    /// Whether `full_check` failed: then the entries are not matched one by one.
    broken: bool,
}

impl<E: Copy> IndexTally<E> {
    /// Records the file's length check and `full_check`'s verdict, then reads the entries.
    fn new(
        storage: &Arc<dyn Storage>,
        path: PathBuf,
        entry_size: u64,
        full_check: Result<()>,
        entry_count: usize,
        entry: impl Fn(usize) -> Result<E>,
    ) -> Result<Self> {
        let mut tally = IndexTally {
            entries: Vec::with_capacity(entry_count),
            next: 0,
            problems: Vec::new(),
            mismatches: Vec::new(),
            mismatch_count: 0,
            first_mismatch_entry: None,
            broken: false,
            entry_size,
            path,
        };
        let file_len = storage.metadata(&tally.path)?.len;
        if file_len % entry_size != 0 {
            tally.problems.push(IndexProblem {
                file: tally.path.clone(),
                position: Some(file_len - file_len % entry_size),
                what: format!(
                    "{file_len} bytes is not a whole number of {entry_size}-byte entries: a torn \
                     entry"
                ),
            });
        }
        if let Err(error) = full_check {
            tally.broken = true;
            tally.problems.push(index_error(&tally.path, error)?);
        }
        for n in 0..entry_count {
            tally.entries.push(entry(n)?);
        }
        Ok(tally)
    }

    fn mismatch(&mut self, what: String) {
        self.first_mismatch_entry.get_or_insert(self.next);
        self.mismatch_count += 1;
        if self.mismatches.len() < MISMATCHES_DESCRIBED {
            self.mismatches.push(what);
        }
    }

    /// Every entry not yet matched is one past the last valid batch (when the walk reached the
    /// end); `describe` names it.
    fn entries_past_the_end(&mut self, walked_to_end: bool, describe: impl Fn(usize, E) -> String) {
        if self.broken || !walked_to_end {
            return;
        }
        while let Some(&entry) = self.entries.get(self.next) {
            self.mismatch(describe(self.next, entry));
            self.next += 1;
        }
    }

    /// The problems found, the mismatches summed up as one.
    fn into_problems(mut self) -> (Vec<IndexProblem>, Vec<E>) {
        if let Some(first) = self.first_mismatch_entry {
            self.problems.push(IndexProblem {
                file: self.path.clone(),
                position: Some(first as u64 * self.entry_size),
                what: describe_mismatches(
                    self.mismatch_count,
                    self.entries.len(),
                    &self.mismatches,
                ),
            });
        }
        (self.problems, self.entries)
    }
}

/// Checks an offset index: its length, its `full_check`, and each entry against the batch at
/// its position, merged with the walk (entries are sorted by position).
pub(super) struct OffsetIndexCheck(pub(super) IndexTally<OffsetPosition>);

impl OffsetIndexCheck {
    pub(super) fn open(
        storage: &Arc<dyn Storage>,
        dir: &Path,
        base: i64,
        config: &LogConfig,
        mapping_allowed: bool,
        log_bytes: u64,
    ) -> Result<Option<Self>> {
        let path = segment_file_path(dir, base, SegmentFileKind::OffsetIndex);
        if !storage.exists(&path)? {
            return Ok(None);
        }
        let index = OffsetIndex::open(storage, &path, base, config.segment_index_bytes, false)?;
        index.set_mapping_allowed(mapping_allowed);
        let tally = IndexTally::new(
            storage,
            path,
            8,
            index.full_check(log_bytes),
            index.entries(),
            |n| index.entry(n),
        )?;
        Ok(Some(OffsetIndexCheck(tally)))
    }

    pub(super) fn see_batch(&mut self, batch: BatchAt) {
        let tally = &mut self.0;
        if tally.broken {
            return;
        }
        while let Some(&entry) = tally.entries.get(tally.next) {
            let position = u64::from(entry.position);
            if position > batch.position {
                break;
            }
            if position < batch.position {
                tally.mismatch(format!(
                    "entry {} (offset {}) points at byte {position}, which is not the start of \
                     a batch",
                    tally.next, entry.offset
                ));
            } else if entry.offset != batch.last_offset {
                tally.mismatch(format!(
                    "entry {} holds offset {}, but the batch at byte {position} has last offset \
                     {}",
                    tally.next, entry.offset, batch.last_offset
                ));
            }
            tally.next += 1;
        }
    }

    /// The problems found; entries past the last batch are one unless the walk stopped early.
    pub(super) fn finish(mut self, valid_bytes: u64, walked_to_end: bool) -> Vec<IndexProblem> {
        self.0.entries_past_the_end(walked_to_end, |n, entry| {
            format!(
                "entry {n} (offset {}, byte {}) points past the last valid batch, which ends at \
                 byte {valid_bytes}",
                entry.offset, entry.position
            )
        });
        self.0.into_problems().0
    }
}

/// Checks a time index: its length, its `full_check`, and each entry against the batch whose
/// last offset it holds (entries are sorted by offset, merged with the walk).
pub(super) struct TimeIndexCheck(pub(super) IndexTally<TimestampOffset>);

impl TimeIndexCheck {
    pub(super) fn open(
        storage: &Arc<dyn Storage>,
        dir: &Path,
        base: i64,
        config: &LogConfig,
        mapping_allowed: bool,
    ) -> Result<Option<Self>> {
        let path = segment_file_path(dir, base, SegmentFileKind::TimeIndex);
        if !storage.exists(&path)? {
            return Ok(None);
        }
        let index = TimeIndex::open(storage, &path, base, config.segment_index_bytes, false)?;
        index.set_mapping_allowed(mapping_allowed);
        let tally = IndexTally::new(
            storage,
            path,
            12,
            index.full_check(),
            index.entries(),
            |n| index.entry(n),
        )?;
        Ok(Some(TimeIndexCheck(tally)))
    }

    pub(super) fn see_batch(&mut self, batch: BatchAt) {
        let tally = &mut self.0;
        if tally.broken {
            return;
        }
        while let Some(&entry) = tally.entries.get(tally.next) {
            if entry.offset > batch.last_offset {
                break;
            }
            if entry.offset < batch.last_offset {
                tally.mismatch(format!(
                    "entry {} holds offset {}, which is not the last offset of a batch",
                    tally.next, entry.offset
                ));
            } else if entry.timestamp != batch.max_timestamp {
                tally.mismatch(format!(
                    "entry {} holds timestamp {} for offset {}, but that batch's maxTimestamp \
                     is {}",
                    tally.next, entry.timestamp, entry.offset, batch.max_timestamp
                ));
            }
            tally.next += 1;
        }
    }

    /// The problems found (entries past the last batch are one unless the walk stopped
    /// early), and the last entry, for the final-entry note.
    pub(super) fn finish(
        mut self,
        walked_to_end: bool,
    ) -> (Vec<IndexProblem>, Option<TimestampOffset>) {
        self.0.entries_past_the_end(walked_to_end, |n, entry| {
            format!(
                "entry {n} (timestamp {}, offset {}) names an offset past the last valid batch",
                entry.timestamp, entry.offset
            )
        });
        let (problems, entries) = self.0.into_problems();
        (problems, entries.last().copied())
    }
}

fn describe_mismatches(count: usize, entries: usize, described: &[String]) -> String {
    let mut what = format!(
        "{count} of {entries} entries disagree with the log: {}",
        described.join("; ")
    );
    if count > described.len() {
        what.push_str("; ...");
    }
    what
}

/// Turns a failed `full_check` into a problem; an I/O error stays an error.
pub(super) fn index_error(path: &Path, error: Error) -> Result<IndexProblem> {
    match error {
        Error::Corrupt {
            file,
            position,
            what,
        } => Ok(IndexProblem {
            file,
            position: Some(position),
            what: what.to_string(),
        }),
        Error::InvalidArgument { why } => Ok(IndexProblem {
            file: path.to_path_buf(),
            position: None,
            what: why,
        }),
        other => Err(other),
    }
}
