//! [`verify_dir`]: a full, read-only check of a log directory (what `partlog verify` runs).
//!
//! Two phases: walk every segment and note what is wrong, then grade each problem as recovery
//! would, which needs the recovery point and whether the last close was clean (known only once
//! the last segment has been walked).
//!
//! The walk is in `walk.rs`, with the index checks it feeds in `index_check.rs`; the grading and
//! the report are here.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::log::LOCK_FILE;
use crate::log::LogConfig;
use crate::log::checkpoint::{
    CHECKPOINT_FILE_NAME, CheckpointFile, CheckpointRecord, gaps_between_segments_are_legal,
};
use crate::storage::{FileLock, LockMode, Storage};

mod epoch_check;
mod index_check;
mod repair;
mod txn_check;
mod walk;

pub use repair::{RepairPlan, repair_dir};

use walk::{InvalidAt, SegmentWalk, list_segments, walk_segment};

/// How serious a [`Finding`] is.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// Harmless and worth knowing: a leftover file the next writable open removes, a missing
    /// index it rebuilds, a batch this build cannot decompress.
    Note,
    /// What a crash normally leaves behind: a torn tail above the recovery point, or an index
    /// of a segment that recovery rescans. The next writable open repairs it, and nothing that
    /// was durable is lost.
    CrashState,
    /// Bytes that fail a check where a crash cannot explain them: below the recovery point, in
    /// a cleanly closed log, or inside a batch whose CRC is right.
    Corruption,
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Severity::Note => "note",
            Severity::CrashState => "crash state",
            Severity::Corruption => "CORRUPT",
        })
    }
}

/// One thing [`verify_dir`] found.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// How serious it is.
    pub severity: Severity,
    /// The file it is about.
    pub file: PathBuf,
    /// The byte position in that file, when the finding has one.
    pub position: Option<u64>,
    /// What was found, in words (lowercase, specific).
    pub what: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.severity, self.file.display())?;
        if let Some(position) = self.position {
            write!(f, " at byte {position}")?;
        }
        write!(f, ": {}", self.what)
    }
}

/// What [`verify_dir`] saw in one segment.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentSummary {
    /// The segment's base offset (its file name).
    pub base_offset: i64,
    /// The `.log` file.
    pub log_path: PathBuf,
    /// The `.log` file's length.
    pub log_bytes: u64,
    /// The end of the last batch that passed the frame checks (the whole file when all did).
    pub valid_bytes: u64,
    /// Batches that passed the frame checks.
    pub batches: u64,
    /// Records in those batches: a v2 batch's `recordsCount`; for a legacy (magic 0 or 1)
    /// message, the records it holds (a compressed wrapper's inner messages), counted as they
    /// decode, so 0 for a wrapper this build cannot decompress or whose records are corrupt.
    pub records: u64,
    /// The offset after the last valid batch (the base offset when there is none).
    pub next_offset: i64,
    /// The largest batch `maxTimestamp`, if any batch was valid.
    pub max_timestamp: Option<i64>,
    /// Entries of the `.index` file (`None` when the file is missing).
    pub offset_index_entries: Option<usize>,
    /// Entries of the `.timeindex` file (`None` when the file is missing).
    pub time_index_entries: Option<usize>,
}

/// What [`verify_dir`] found in a directory.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    /// The directory checked.
    pub dir: PathBuf,
    /// Whether `partlog.checkpoint` held a valid record.
    pub checkpoint_found: bool,
    /// Whether the last close was clean: the checkpoint's clean-shutdown fields match the
    /// directory, so the next open will scan nothing.
    pub clean_shutdown: bool,
    /// The recovery point: the checkpoint's (at least the first segment's base), or the first
    /// segment's base without a checkpoint. Invalid bytes at or above it are a torn tail.
    pub recovery_point: i64,
    /// The log start offset: the checkpoint's, at least the first segment's base.
    pub log_start_offset: i64,
    /// The log end offset the next writable open will arrive at, if it succeeds: the end of
    /// the valid data, before any torn tail.
    pub log_end_offset: i64,
    /// Every segment, in offset order.
    pub segments: Vec<SegmentSummary>,
    /// Everything found, in the order of the files.
    pub findings: Vec<Finding>,
    /// What a repair ([`repair_dir`]) of what was found does: where it rescans from, and what
    /// cutting the log at corruption would take.
    pub repair: RepairPlan,
}

impl VerifyReport {
    /// Whether any finding is [`Severity::Corruption`].
    pub fn is_corrupt(&self) -> bool {
        self.worst() == Some(Severity::Corruption)
    }

    /// The most serious finding's severity, or `None` when nothing was found.
    pub fn worst(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).max()
    }

    /// The findings of one severity.
    pub fn findings_of(&self, severity: Severity) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(move |f| f.severity == severity)
    }
}

// Recovery's grading and its cheap checks: ARCHITECTURE.md §3, invariants 5 and 6.
/// Checks every batch and every index entry of the log in `dir`, without writing anything.
///
/// Opening a log checks as little as it safely can: O(1) index
/// checks, and a batch-by-batch scan only from the recovery point on. Verification checks
/// everything, and never writes:
///
/// - every batch of every segment: frame, magic, length, CRC-32C, offsets increasing across
///   batches and segments, and every record decoded (decompressed when the codec says so), with
///   its offset inside its batch and, under CreateTime, its timestamp not above the batch's
///   `maxTimestamp`. A legacy message (magic 0 or 1, which a log Kafka wrote before 0.11 may
///   hold) gets the same checks by its own rules: its CRC-32, its framing, and for a compressed
///   wrapper every inner message (CRC, offsets increasing, above the batch before and not past
///   the wrapper's offset); the index checks below use its offset and timestamp, as Kafka's
///   indexes do;
/// - every `.index`: a whole number of entries, the O(entries) `full_check`, and each entry
///   against the batch it names (the batch starting at its position must have its offset as
///   last offset), as Kafka's `DumpLogSegments` checks;
/// - every `.timeindex`: the same, with each entry's timestamp equal to the `maxTimestamp` of
///   the batch whose last offset the entry holds;
/// - every `.txnindex`: Kafka's sanity check (entries at or above the segment's base, in
///   increasing order, whole), and each entry's `lastOffset` an ABORT marker of its producer;
/// - every `.snapshot` (Kafka's producer-state snapshot): version, CRC and entry count;
/// - `leader-epoch-checkpoint`: its format (version, count, numbers, strictly increasing
///   entries) and no entry starting beyond the log end.
///
/// Each finding gets a [`Severity`], decided as recovery would decide it: an invalid byte above
/// the recovery point is a torn tail, the normal state after a crash, which the next writable
/// open truncates ([`Severity::CrashState`]); the same byte below the recovery point, or
/// anywhere in a cleanly closed log, is [`Severity::Corruption`]. An index that disagrees with
/// its log is crash state in a segment that recovery will rescan (and so rebuild), and
/// corruption elsewhere: indexes are derived data, so deleting the bad index files lets the next
/// writable open rebuild them.
///
/// Like `Log::open_read_only`, it takes a shared lock on `partlog.lock` when that file exists
/// (so it fails with [`Error::Locked`] while a writer has the log open) and runs unlocked
/// otherwise, as in a Kafka partition directory. `config` supplies the storage, the cleanup
/// policy (gaps between segments are legal only where `partlog.checkpoint` says the log's
/// records were compacted or the policy includes compact) and `segment.index.bytes`.
///
/// Problems in the files are [`Finding`]s in the report, never errors. Errors are for what
/// stops the check itself: I/O errors, a missing directory, a directory without segments, a
/// held lock.
///
/// ```
/// # fn main() -> partlog::Result<()> {
/// use partlog::{Log, LogConfig, NewRecord, Severity, verify_dir};
/// # let temp = tempfile::tempdir().unwrap();
/// # let dir = temp.path();
/// let log = Log::open(dir, LogConfig::default())?;
/// log.append(&[NewRecord::new(1_700_000_000_000, None, Some(b"hello"))])?;
/// log.close()?;
/// drop(log); // releases the lock
///
/// let report = verify_dir(dir, &LogConfig::default())?;
/// assert!(!report.is_corrupt());
/// assert_eq!(report.worst(), None::<Severity>);
/// assert_eq!(report.log_end_offset, 1);
/// # Ok(())
/// # }
/// ```
pub fn verify_dir(dir: impl AsRef<Path>, config: &LogConfig) -> Result<VerifyReport> {
    let dir = dir.as_ref();
    let storage = Arc::clone(&config.storage);
    // First the directory, its lock, its checkpoint and its segments.
    let lock = lock_dir_shared(&*storage, dir)?;
    let mut findings = Vec::new();
    let record = read_checkpoint(&storage, dir, &mut findings)?;
    let listing = list_segments(&*storage, dir, &mut findings)?;
    let bases = listing.bases;
    let Some(&first_base) = bases.first() else {
        return Err(Error::InvalidArgument {
            why: format!("{} holds no log segments", dir.display()),
        });
    };

    // Phase 1: walk every segment and note what is wrong, without judging it yet: how serious
    // a problem is depends on the recovery point and on whether the last close was clean,
    // which is known only once the last segment has been walked.
    let walks = walk_segments(&storage, dir, &bases, config, lock.is_some())?;

    // Phase 2: grade the problems as recovery would.
    let grading = Grading::new(record, first_base, &bases, &walks, config, &mut findings);
    let cuts = grading.grade(&walks, &mut findings);
    txn_check::check_producer_state_files(
        &storage,
        dir,
        &walks,
        &listing.txn_index_swaps,
        grading.first_rescanned,
        grading.clean_shutdown,
        &mut findings,
    )?;

    // Then the report. The log ends where the next writable open would cut it.
    let log_end_offset = match cuts.torn {
        Some((_, end)) => end,
        None => walks.last().map_or(first_base, |w| w.summary.next_offset),
    };
    epoch_check::check_leader_epoch_checkpoint(&*storage, dir, log_end_offset, &mut findings)?;
    let repair = repair::plan(&walks, &findings, cuts.corrupt, grading.gaps_legal);
    Ok(VerifyReport {
        dir: dir.to_path_buf(),
        checkpoint_found: record.is_some(),
        clean_shutdown: grading.clean_shutdown,
        recovery_point: grading.recovery_point,
        log_start_offset: grading.log_start_offset,
        log_end_offset,
        segments: walks.into_iter().map(|w| w.summary).collect(),
        findings,
        repair,
    })
}

/// Checks that `dir` is a directory and takes the shared lock on its `partlog.lock` when that
/// file exists, as `Log::open_read_only` does.
fn lock_dir_shared(storage: &dyn Storage, dir: &Path) -> Result<Option<FileLock>> {
    if !storage.metadata(dir)?.is_dir {
        return Err(Error::InvalidArgument {
            why: format!("{} is not a directory", dir.display()),
        });
    }
    let lock_path = dir.join(LOCK_FILE);
    let lock = if storage.exists(&lock_path)? {
        Some(storage.lock(&lock_path, LockMode::Shared)?)
    } else {
        None
    };
    Ok(lock)
}

/// Reads `partlog.checkpoint`, noting a file neither of whose slots holds a valid record.
fn read_checkpoint(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    findings: &mut Vec<Finding>,
) -> Result<Option<CheckpointRecord>> {
    let record = CheckpointFile::read(storage, dir)?;
    if record.is_none() && storage.exists(&dir.join(CHECKPOINT_FILE_NAME))? {
        findings.push(Finding {
            severity: Severity::Note,
            file: dir.join(CHECKPOINT_FILE_NAME),
            position: None,
            what: "neither slot holds a valid record; the next open recovers from the first \
                   segment"
                .into(),
        });
    }
    Ok(record)
}

/// Walks every segment in order (phase 1).
fn walk_segments(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    bases: &[i64],
    config: &LogConfig,
    locked: bool,
) -> Result<Vec<SegmentWalk>> {
    let mut walks = Vec::with_capacity(bases.len());
    let mut txns = walk::TxnTracker::default();
    for &base in bases {
        // Mapping is safe only while the lock keeps writers (who may shrink files) away.
        walks.push(walk_segment(storage, dir, base, config, locked, &mut txns)?);
    }
    Ok(walks)
}

/// Where the log would be cut in a segment.
enum Cut {
    None,
    /// At its end, by the next writable open: what a crash leaves.
    Torn,
    /// At this byte, by a repair that accepts losing records: corruption.
    Corrupt(u64),
}

/// Where [`Grading::grade`] found the log cut.
struct Cuts {
    /// Where the next writable open cuts it: the segment and the new log end offset.
    torn: Option<(usize, i64)>,
    /// The first corruption a repair cuts at: the segment and the byte.
    corrupt: Option<(usize, u64)>,
}

/// What recovery would make of the log, which decides how serious each problem is (phase 2).
#[derive(Debug)]
struct Grading {
    recovery_point: i64,
    log_start_offset: i64,
    clean_shutdown: bool,
    /// The first segment that recovery rescans (and so rebuilds the indexes of).
    first_rescanned: usize,
    /// Offsets may be missing between segments below the recovery point, as recovery judges
    /// it ([`gaps_between_segments_are_legal`]).
    gaps_legal: bool,
    checkpoint_found: bool,
}

impl Grading {
    fn new(
        record: Option<CheckpointRecord>,
        first_base: i64,
        bases: &[i64],
        walks: &[SegmentWalk],
        config: &LogConfig,
        findings: &mut Vec<Finding>,
    ) -> Grading {
        let recovery_point = record
            .map_or(first_base, |r| r.recovery_point)
            .max(first_base);
        let log_start_offset = record
            .map_or(first_base, |r| r.log_start_offset)
            .max(first_base);
        let clean_shutdown = is_clean(record, walks, findings);
        // Recovery rescans (and so rebuilds the indexes of) every segment from the one holding
        // the recovery point on, unless the last close was clean.
        let first_rescanned = if clean_shutdown {
            bases.len()
        } else {
            // As recovery: from the segment holding the offset before the recovery point.
            bases
                .partition_point(|&b| b < recovery_point)
                .saturating_sub(1)
        };
        Grading {
            recovery_point,
            log_start_offset,
            clean_shutdown,
            first_rescanned,
            gaps_legal: gaps_between_segments_are_legal(
                record.is_some_and(|r| r.compacted),
                config.cleanup_policy,
            ),
            checkpoint_found: record.is_some(),
        }
    }

    /// Grades every segment's problems, in order, and returns where the next writable open
    /// cuts the log, if it does (the segment that ends it and the new log end offset), and
    /// where the first corruption a repair would cut the log at lies (the segment and the byte).
    fn grade(&self, walks: &[SegmentWalk], findings: &mut Vec<Finding>) -> Cuts {
        let mut cut_at: Option<(usize, i64)> = None;
        let mut corrupt_at: Option<(usize, u64)> = None;
        for (i, walk) in walks.iter().enumerate() {
            if let Some((cut, _)) = cut_at {
                findings.push(Finding {
                    severity: Severity::CrashState,
                    file: walk.summary.log_path.clone(),
                    position: None,
                    what: format!(
                        "the next writable open deletes this segment: it follows the torn end \
                         of segment {}",
                        walks[cut].summary.base_offset
                    ),
                });
                continue;
            }
            match self.grade_segment(walks, i, findings) {
                Cut::None => {}
                Cut::Torn => cut_at = Some((i, walk.summary.next_offset)),
                Cut::Corrupt(position) => {
                    corrupt_at.get_or_insert((i, position));
                }
            }
        }
        Cuts {
            torn: cut_at,
            corrupt: corrupt_at,
        }
    }

    /// Grades what the walk of segment `i` found, and where the log would be cut in it.
    fn grade_segment(&self, walks: &[SegmentWalk], i: usize, findings: &mut Vec<Finding>) -> Cut {
        let walk = &walks[i];
        let rescanned = i >= self.first_rescanned;
        let torn = match &walk.invalid {
            Some(invalid) => {
                self.grade_invalid_bytes(walk, invalid, walks.len() - i - 1, rescanned, findings)
            }
            None => Cut::None,
        };
        self.grade_found_problems(walk, rescanned, findings);
        if walk.invalid.is_some() {
            // After invalid bytes the segment's real end is unknown: no continuity check.
            return torn;
        }
        let Some(next) = walks.get(i + 1) else {
            return Cut::None;
        };
        self.grade_continuity(walk, next, rescanned, findings)
    }

    /// Grades the bytes where the walk of a segment stopped: a torn tail or corruption, where
    /// the log is cut. `later` is the number of segments after this one.
    fn grade_invalid_bytes(
        &self,
        walk: &SegmentWalk,
        invalid: &InvalidAt,
        later: usize,
        rescanned: bool,
        findings: &mut Vec<Finding>,
    ) -> Cut {
        let recovery_point = self.recovery_point;
        let log_path = walk.summary.log_path.clone();
        let next_offset = walk.summary.next_offset;
        // As recovery: without a valid checkpoint only the last segment's tail can be torn,
        // and a whole batch whose CRC is right was never torn.
        let torn = rescanned
            && next_offset >= recovery_point
            && (self.checkpoint_found || later == 0)
            && !invalid.crc_right;
        let bytes = walk.summary.log_bytes - invalid.position;
        if torn {
            let what = format!(
                "torn tail: {bytes} bytes that are not a valid batch ({}), above the \
                 recovery point {recovery_point}: a normal state after a crash; the next \
                 writable open truncates them{}",
                invalid.what,
                match later {
                    0 => String::new(),
                    1 => " and deletes the segment after this one".into(),
                    n => format!(" and deletes the {n} segments after this one"),
                }
            );
            findings.push(Finding {
                severity: Severity::CrashState,
                file: log_path,
                position: Some(invalid.position),
                what,
            });
        } else {
            let why = if invalid.crc_right {
                "in a whole batch whose CRC is right, which no torn write leaves".to_string()
            } else if self.clean_shutdown {
                "in a cleanly closed log".to_string()
            } else if !rescanned {
                format!(
                    "in a segment wholly below the recovery point {recovery_point}, which \
                     recovery trusts"
                )
            } else if next_offset < recovery_point {
                format!("below the recovery point {recovery_point}")
            } else {
                format!(
                    "in a segment that {later} later segment{}, and without a valid \
                     partlog.checkpoint the durable point is unknown: no crash explains it, and \
                     the next writable open refuses to cut the log here",
                    if later == 1 { " follows" } else { "s follow" }
                )
            };
            findings.push(Finding {
                severity: Severity::Corruption,
                file: log_path,
                position: Some(invalid.position),
                what: format!(
                    "{} ({bytes} bytes from here on were not checked), {why}",
                    invalid.what
                ),
            });
        }
        if torn {
            Cut::Torn
        } else {
            Cut::Corrupt(invalid.position)
        }
    }

    /// Grades the rest of what the walk of a segment found: its notes, batches whose CRC holds
    /// but whose records do not, and its indexes' problems.
    fn grade_found_problems(
        &self,
        walk: &SegmentWalk,
        rescanned: bool,
        findings: &mut Vec<Finding>,
    ) {
        let log_path = &walk.summary.log_path;
        for note in &walk.notes {
            findings.push(note.clone());
        }
        for problem in &walk.content_problems {
            findings.push(Finding {
                severity: Severity::Corruption,
                file: log_path.clone(),
                position: Some(problem.0),
                what: format!(
                    "{} (the batch's CRC is right, so no crash explains it)",
                    problem.1
                ),
            });
        }
        for problem in &walk.index_problems {
            let (severity, why) = if rescanned {
                (
                    Severity::CrashState,
                    "the next writable open rebuilds this index from the log",
                )
            } else {
                (
                    Severity::Corruption,
                    "derived data: removing the index file makes the next writable open \
                     rebuild it",
                )
            };
            findings.push(Finding {
                severity,
                file: problem.file.clone(),
                position: problem.position,
                what: format!("{} ({why})", problem.what),
            });
        }
        if !rescanned || self.clean_shutdown {
            findings.extend(walk.final_time_entry_note.iter().cloned());
        }
    }

    /// Grades how a whole segment meets the next one: overlapping offsets, or a gap, which is
    /// a lost tail or corruption (the log is cut there), or legal in a log whose records were
    /// compacted.
    fn grade_continuity(
        &self,
        walk: &SegmentWalk,
        next: &SegmentWalk,
        rescanned: bool,
        findings: &mut Vec<Finding>,
    ) -> Cut {
        let log_path = walk.summary.log_path.clone();
        let next_offset = walk.summary.next_offset;
        let next_base = next.summary.base_offset;
        if next_offset > next_base {
            findings.push(Finding {
                severity: Severity::Corruption,
                file: log_path,
                position: Some(walk.summary.valid_bytes),
                what: format!(
                    "the segment ends at offset {next_offset}, past the base offset {next_base} \
                     of the next segment"
                ),
            });
        } else if next_offset < next_base {
            // As recovery: compaction leaves gaps only below a recovery point it recorded, so
            // with partlog's checkpoint a gap at or above the point is a lost tail there too.
            let lost_tail =
                rescanned && next_offset >= self.recovery_point && self.checkpoint_found;
            if lost_tail {
                findings.push(Finding {
                    severity: Severity::CrashState,
                    file: log_path,
                    position: Some(walk.summary.valid_bytes),
                    what: format!(
                        "the segment ends at offset {next_offset} but the next one starts at \
                         {next_base}: its unsynced tail was lost in a crash; the next writable \
                         open drops the segments from {next_base} on"
                    ),
                });
                return Cut::Torn;
            } else if !self.gaps_legal {
                findings.push(Finding {
                    severity: Severity::Corruption,
                    file: log_path,
                    position: Some(walk.summary.valid_bytes),
                    what: format!(
                        "offsets [{next_offset}, {next_base}) are missing between this segment \
                         and the next (gaps are legal only in a log whose records were \
                         compacted: partlog.checkpoint does not say so, and cleanup.policy does \
                         not include compact{})",
                        if self.checkpoint_found {
                            ""
                        } else {
                            "; without a valid partlog.checkpoint the durable point is unknown, \
                             so no crash explains one"
                        }
                    ),
                });
                return Cut::Corrupt(walk.summary.valid_bytes);
            }
        }
        Cut::None
    }
}

/// Whether the checkpoint's clean-shutdown fields match the directory, as `Log::open` checks
/// them: the last segment's base, its size, and the log end offset found in it.
fn is_clean(
    record: Option<CheckpointRecord>,
    walks: &[SegmentWalk],
    findings: &mut Vec<Finding>,
) -> bool {
    let (Some(clean), Some(last)) = (record.and_then(|r| r.clean_shutdown), walks.last()) else {
        return false;
    };
    let summary = &last.summary;
    let matches = clean.active_segment_base == summary.base_offset
        && clean.active_segment_size == summary.log_bytes
        && last.invalid.is_none()
        && clean.log_end_offset == summary.next_offset;
    if !matches {
        findings.push(Finding {
            severity: Severity::Note,
            file: summary.log_path.clone(),
            position: None,
            what: format!(
                "the checkpoint's clean-shutdown record (segment {}, {} bytes, end offset {}) \
                 does not match this segment; the next open recovers",
                clean.active_segment_base, clean.active_segment_size, clean.log_end_offset
            ),
        });
    }
    matches
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{NewRecord, RECORD_BATCH_OVERHEAD, crc32c};
    use crate::log::Log;
    use crate::segment::{SegmentFileKind, segment_file_path};
    use crate::storage::{OpenMode, OsStorage};

    const RECORDS: usize = 120;

    fn config() -> LogConfig {
        LogConfig::builder_for_tests()
            .segment_bytes(4096)
            .index_interval_bytes(256)
            .build()
            .unwrap()
    }

    fn storage() -> Arc<dyn Storage> {
        Arc::new(OsStorage::new())
    }

    /// A cleanly closed log of `RECORDS` records, one per batch of about 170 bytes, over
    /// several 4 KiB segments with a few index entries each.
    fn write_log(dir: &Path) {
        let log = Log::open(dir, config()).unwrap();
        for i in 0..RECORDS {
            let record = NewRecord::new(1_000 + i as i64, Some(b"key"), Some(&[b'v'; 100]));
            log.append(&[record]).unwrap();
        }
        log.close().unwrap();
    }

    fn segment(dir: &Path, report: &VerifyReport, n: usize, kind: SegmentFileKind) -> PathBuf {
        segment_file_path(dir, report.segments[n].base_offset, kind)
    }

    fn read_file(path: &Path) -> Vec<u8> {
        let file = storage().open(path, OpenMode::Read).unwrap();
        let mut bytes = vec![0; usize::try_from(file.len().unwrap()).unwrap()];
        file.read_exact_at(&mut bytes, 0).unwrap();
        bytes
    }

    fn write_at(path: &Path, position: u64, bytes: &[u8]) {
        let file = storage().open(path, OpenMode::ReadWrite).unwrap();
        file.write_all_at(bytes, position).unwrap();
    }

    fn set_len(path: &Path, len: u64) {
        storage()
            .open(path, OpenMode::ReadWrite)
            .unwrap()
            .set_len(len)
            .unwrap();
    }

    fn verify(dir: &Path) -> VerifyReport {
        verify_dir(dir, &config()).unwrap()
    }

    fn only(report: &VerifyReport, severity: Severity) -> Vec<&Finding> {
        report.findings_of(severity).collect()
    }

    #[test]
    fn a_cleanly_closed_log_has_no_findings() {
        let temp = tempfile::tempdir().unwrap();
        write_log(temp.path());
        let report = verify(temp.path());
        assert_eq!(report.findings, Vec::new());
        assert!(report.clean_shutdown && report.checkpoint_found);
        assert_eq!(report.log_end_offset, RECORDS as i64);
        assert_eq!(report.recovery_point, RECORDS as i64);
        assert!(report.segments.len() >= 3, "{:?}", report.segments);
        let records: u64 = report.segments.iter().map(|s| s.records).sum();
        assert_eq!(records, RECORDS as u64);
        for pair in report.segments.windows(2) {
            assert_eq!(pair[0].next_offset, pair[1].base_offset);
            assert!(pair[0].offset_index_entries.unwrap() > 0);
            assert!(pair[0].time_index_entries.unwrap() > 0);
        }
    }

    #[test]
    fn bytes_lost_below_the_recovery_point_are_corruption_as_for_recovery() {
        let temp = tempfile::tempdir().unwrap();
        write_log(temp.path());
        let before = verify(temp.path());
        let last = segment(
            temp.path(),
            &before,
            before.segments.len() - 1,
            SegmentFileKind::Log,
        );
        let len = read_file(&last).len() as u64;
        // The last batch cut short: its records were durable (the clean close put the recovery
        // point at the log end), so this is not a torn tail.
        set_len(&last, len - 10);
        let report = verify(temp.path());
        assert!(report.is_corrupt(), "{:#?}", report.findings);
        let corrupt = only(&report, Severity::Corruption);
        assert_eq!(corrupt.len(), 1, "{corrupt:#?}");
        assert_eq!(corrupt[0].file, last);
        assert!(
            corrupt[0].what.contains("below the recovery point"),
            "{corrupt:?}"
        );
        match Log::open(temp.path(), config()) {
            Err(Error::Corrupt { file, .. }) => assert_eq!(file, last),
            other => panic!("recovery disagrees with verify: {other:?}"),
        }
    }

    #[test]
    fn a_torn_tail_above_the_recovery_point_is_crash_state_and_recovery_agrees() {
        let temp = tempfile::tempdir().unwrap();
        write_log(temp.path());
        let before = verify(temp.path());
        let last = segment(
            temp.path(),
            &before,
            before.segments.len() - 1,
            SegmentFileKind::Log,
        );
        let bytes = read_file(&last);
        // Half of a copy of the first batch after the last one: a write cut short.
        let half = bytes.get(..90).unwrap();
        write_at(&last, bytes.len() as u64, half);
        let report = verify(temp.path());
        assert!(!report.is_corrupt(), "{:#?}", report.findings);
        assert!(!report.clean_shutdown);
        let torn = only(&report, Severity::CrashState);
        assert_eq!(torn.len(), 1, "{torn:#?}");
        assert_eq!(torn[0].position, Some(bytes.len() as u64));
        assert!(torn[0].what.starts_with("torn tail: 90 bytes"), "{torn:?}");
        assert_eq!(report.log_end_offset, RECORDS as i64);

        let log = Log::open(temp.path(), config()).unwrap();
        assert_eq!(log.recovery_report().bytes_truncated, 90);
        assert_eq!(log.log_end_offset(), report.log_end_offset);
        log.close().unwrap();
        drop(log);
        assert_eq!(verify(temp.path()).findings, Vec::new());
    }

    /// Issue 29, item 9: without a checkpoint the durable point is unknown, so a middle
    /// segment cut short is damage, not a torn tail: verify grades it as corruption, a writable
    /// open refuses to cut the log there (saying what would go), and
    /// `RecoveryMode::TruncateAtCorruption` cuts it where verify said, reporting it.
    #[test]
    fn item9_without_a_checkpoint_a_short_middle_segment_is_corruption_for_verify_and_recovery() {
        let temp = tempfile::tempdir().unwrap();
        write_log(temp.path());
        let before = verify(temp.path());
        storage()
            .remove(&temp.path().join(CHECKPOINT_FILE_NAME))
            .unwrap();
        let middle = segment(temp.path(), &before, 1, SegmentFileKind::Log);
        set_len(&middle, read_file(&middle).len() as u64 / 2);
        let report = verify(temp.path());
        assert!(report.is_corrupt(), "{:#?}", report.findings);
        assert_eq!(report.recovery_point, 0);
        let later = before.segments.len() - 2;
        let corrupt = only(&report, Severity::Corruption);
        assert!(
            corrupt
                .iter()
                .any(|f| f.file == middle && f.what.contains("the durable point is unknown")),
            "{corrupt:#?}"
        );
        let cut = report.repair.cut.clone().expect("a planned cut");
        assert_eq!(cut.file, middle);
        assert_eq!(cut.deleted_segments.len(), later);
        let lost: u64 = report.segments[2..].iter().map(|s| s.records).sum::<u64>()
            + u64::try_from(report.segments[2].base_offset - report.segments[1].next_offset)
                .unwrap();
        assert_eq!(cut.records, lost);

        let bytes_before = read_file(&middle);
        match Log::open(temp.path(), config()) {
            Err(Error::DamagedWithoutCheckpoint {
                file, discarded, ..
            }) => {
                assert_eq!(file, middle);
                assert_eq!(discarded.records, lost);
                assert_eq!(discarded.deleted_segments, cut.deleted_segments);
            }
            other => panic!("expected a refusal: {other:?}"),
        }
        assert_eq!(read_file(&middle), bytes_before);
        assert_eq!(verify(temp.path()).segments.len(), before.segments.len());

        let mut truncate = config();
        truncate.recovery_mode = crate::RecoveryMode::TruncateAtCorruption;
        let log = Log::open(temp.path(), truncate).unwrap();
        assert_eq!(log.log_end_offset(), report.segments[1].next_offset);
        assert_eq!(log.recovery_report().segments_deleted, later);
        assert_eq!(log.recovery_report().discarded.as_ref(), Some(&cut));
    }

    #[test]
    fn a_missing_segment_in_a_clean_log_is_corruption() {
        let temp = tempfile::tempdir().unwrap();
        write_log(temp.path());
        let before = verify(temp.path());
        for kind in [
            SegmentFileKind::Log,
            SegmentFileKind::OffsetIndex,
            SegmentFileKind::TimeIndex,
        ] {
            storage()
                .remove(&segment(temp.path(), &before, 1, kind))
                .unwrap();
        }
        let report = verify(temp.path());
        let corrupt = only(&report, Severity::Corruption);
        assert_eq!(corrupt.len(), 1, "{corrupt:#?}");
        assert!(
            corrupt[0].what.starts_with(&format!(
                "offsets [{}, {}) are missing",
                before.segments[1].base_offset, before.segments[2].base_offset
            )),
            "{corrupt:?}"
        );
    }

    #[test]
    fn a_wrong_index_entry_is_corruption_in_a_trusted_segment_and_crash_state_in_a_rescanned_one() {
        let temp = tempfile::tempdir().unwrap();
        write_log(temp.path());
        let before = verify(temp.path());
        let index = segment(temp.path(), &before, 0, SegmentFileKind::OffsetIndex);
        // Entry 0 points one byte into its batch.
        let entry = read_file(&index);
        let position = u32::from_be_bytes(entry[4..8].try_into().unwrap());
        write_at(&index, 4, &(position + 1).to_be_bytes());
        let report = verify(temp.path());
        let corrupt = only(&report, Severity::Corruption);
        assert_eq!(corrupt.len(), 1, "{corrupt:#?}");
        assert_eq!(corrupt[0].file, index);
        assert!(
            corrupt[0].what.contains("is not the start of a batch"),
            "{corrupt:?}"
        );

        // Without a checkpoint, recovery rescans every segment and rebuilds its indexes.
        storage()
            .remove(&temp.path().join(CHECKPOINT_FILE_NAME))
            .unwrap();
        let report = verify(temp.path());
        assert!(!report.is_corrupt(), "{:#?}", report.findings);
        assert!(
            only(&report, Severity::CrashState)
                .iter()
                .any(|f| f.file == index)
        );
        let log = Log::open(temp.path(), config()).unwrap();
        log.close().unwrap();
        drop(log);
        assert_eq!(verify(temp.path()).findings, Vec::new());
    }

    #[test]
    fn a_batch_with_a_right_crc_and_broken_records_is_corruption() {
        let temp = tempfile::tempdir().unwrap();
        write_log(temp.path());
        let before = verify(temp.path());
        let log_file = segment(temp.path(), &before, 0, SegmentFileKind::Log);
        let mut batch = read_file(&log_file);
        let size =
            12 + usize::try_from(i32::from_be_bytes(batch[8..12].try_into().unwrap())).unwrap();
        batch.truncate(size);
        // The first record's length varint, made longer than the record; then a valid CRC.
        batch[RECORD_BATCH_OVERHEAD] = batch[RECORD_BATCH_OVERHEAD].wrapping_add(8);
        let crc = crc32c(&batch[21..]);
        batch[17..21].copy_from_slice(&crc.to_be_bytes());
        write_at(&log_file, 0, &batch);
        let report = verify(temp.path());
        let corrupt = only(&report, Severity::Corruption);
        assert_eq!(corrupt.len(), 1, "{corrupt:#?}");
        assert_eq!(
            (&corrupt[0].file, corrupt[0].position),
            (&log_file, Some(0))
        );
        assert!(corrupt[0].what.contains("CRC is right"), "{corrupt:?}");
        assert_eq!(report.segments[0].valid_bytes, report.segments[0].log_bytes);
    }

    #[test]
    fn leftovers_and_missing_indexes_are_notes() {
        let temp = tempfile::tempdir().unwrap();
        write_log(temp.path());
        let before = verify(temp.path());
        let stray = temp.path().join(format!("{:020}.index", 999_999));
        let deleted = temp.path().join(format!("{:020}.log.deleted", 5));
        for path in [&stray, &deleted] {
            storage().open(path, OpenMode::CreateNew).unwrap();
        }
        let time_index = segment(temp.path(), &before, 0, SegmentFileKind::TimeIndex);
        storage().remove(&time_index).unwrap();
        let report = verify(temp.path());
        assert_eq!(
            report.worst(),
            Some(Severity::Note),
            "{:#?}",
            report.findings
        );
        let noted: Vec<&PathBuf> = report.findings.iter().map(|f| &f.file).collect();
        for path in [&stray, &deleted, &time_index] {
            assert!(noted.contains(&path), "{path:?} not in {noted:?}");
        }
        assert_eq!(report.segments[0].time_index_entries, None);
    }

    #[test]
    fn a_log_open_for_writing_is_not_verified() {
        let temp = tempfile::tempdir().unwrap();
        let _log = Log::open(temp.path(), config()).unwrap();
        assert!(matches!(
            verify_dir(temp.path(), &config()),
            Err(Error::Locked { .. })
        ));
    }

    /// A partition directory holding `v0.log` then `v1.log` of the legacy fixtures as two
    /// segments (offsets 0-24 and 25-59), as Kafka 0.9 then 0.10 wrote them: no indexes, no
    /// checkpoint.
    fn write_legacy_log(dir: &Path) {
        for (base, bytes) in [
            (0, &include_bytes!("../../tests/fixtures/legacy/v0.log")[..]),
            (
                25,
                &include_bytes!("../../tests/fixtures/legacy/v1.log")[..],
            ),
        ] {
            let path = segment_file_path(dir, base, SegmentFileKind::Log);
            storage()
                .open(&path, OpenMode::CreateNew)
                .unwrap()
                .write_all_at(bytes, 0)
                .unwrap();
        }
    }

    #[test]
    fn legacy_messages_are_checked_not_refused() {
        let temp = tempfile::tempdir().unwrap();
        write_legacy_log(temp.path());
        let report = verify(temp.path());
        assert!(!report.is_corrupt(), "{:#?}", report.findings);
        assert_eq!(report.log_end_offset, 60);
        let batches: Vec<u64> = report.segments.iter().map(|s| s.batches).collect();
        assert_eq!(batches, [10, 15]);
        for segment in &report.segments {
            assert_eq!(segment.valid_bytes, segment.log_bytes);
        }
        if cfg!(all(feature = "gzip", feature = "snappy")) {
            // Every inner message decoded: the fixture's 22 + 32 records.
            let records: Vec<u64> = report.segments.iter().map(|s| s.records).collect();
            assert_eq!(records, [22, 32]);
            assert_eq!(report.worst(), Some(Severity::Note));
        } else {
            assert!(
                report
                    .findings_of(Severity::Note)
                    .any(|f| f.what.starts_with("records not checked")),
                "{:#?}",
                report.findings
            );
        }
        // Missing indexes are notes; nothing else is.
        assert!(
            report
                .findings
                .iter()
                .all(|f| f.what.starts_with("missing") || f.what.starts_with("records not")),
            "{:#?}",
            report.findings
        );
    }

    #[test]
    fn a_legacy_message_with_a_bad_crc_is_invalid_bytes() {
        let temp = tempfile::tempdir().unwrap();
        write_legacy_log(temp.path());
        let v1 = segment_file_path(temp.path(), 25, SegmentFileKind::Log);
        // A byte of the second message's value (it starts at byte 44).
        let byte = read_file(&v1)[80];
        write_at(&v1, 80, &[byte ^ 0x40]);
        let report = verify(temp.path());
        // No checkpoint: the recovery point is the first base, so it is a torn tail.
        let torn = only(&report, Severity::CrashState);
        assert_eq!(torn.len(), 1, "{:#?}", report.findings);
        assert_eq!((&torn[0].file, torn[0].position), (&v1, Some(44)));
        assert!(torn[0].what.contains("crc mismatch"), "{torn:?}");
        assert_eq!(report.log_end_offset, 26);
    }

    /// A magic 0 message: offset, size, CRC-32, magic, attributes, key, value.
    #[cfg(feature = "gzip")]
    fn legacy_v0_message(offset: i64, codec: u8, key: Option<&[u8]>, value: &[u8]) -> Vec<u8> {
        let mut body = vec![0u8, codec];
        for field in [key, Some(value)] {
            match field {
                Some(bytes) => {
                    body.extend_from_slice(&i32::try_from(bytes.len()).unwrap().to_be_bytes());
                    body.extend_from_slice(bytes);
                }
                None => body.extend_from_slice(&(-1i32).to_be_bytes()),
            }
        }
        let mut message = offset.to_be_bytes().to_vec();
        message.extend_from_slice(&i32::try_from(body.len() + 4).unwrap().to_be_bytes());
        message.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
        message.extend_from_slice(&body);
        message
    }

    #[cfg(feature = "gzip")]
    #[test]
    fn a_legacy_wrapper_reaching_below_the_message_before_is_corruption() {
        use std::io::Write as _;
        let temp = tempfile::tempdir().unwrap();
        // Offset 0, then a gzip wrapper (magic 0: absolute inner offsets) whose outer offset 5
        // passes the frame check but whose first inner message reuses offset 0.
        let mut inner = legacy_v0_message(0, 0, None, b"again");
        inner.extend(legacy_v0_message(5, 0, None, b"five"));
        let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gzip.write_all(&inner).unwrap();
        let mut log = legacy_v0_message(0, 0, Some(b"k"), b"zero");
        let wrapper_at = log.len() as u64;
        log.extend(legacy_v0_message(5, 1, None, &gzip.finish().unwrap()));
        let path = segment_file_path(temp.path(), 0, SegmentFileKind::Log);
        storage()
            .open(&path, OpenMode::CreateNew)
            .unwrap()
            .write_all_at(&log, 0)
            .unwrap();
        let report = verify(temp.path());
        let corrupt = only(&report, Severity::Corruption);
        assert_eq!(corrupt.len(), 1, "{:#?}", report.findings);
        assert_eq!(
            (&corrupt[0].file, corrupt[0].position),
            (&path, Some(wrapper_at))
        );
        assert!(
            corrupt[0]
                .what
                .contains("record offset 0 is outside its batch [1, 5]"),
            "{corrupt:?}"
        );
        assert_eq!(report.log_end_offset, 6);
    }
}
