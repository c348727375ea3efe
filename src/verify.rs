//! [`verify_dir`]: a full, read-only check of a log directory (what `partlog verify` runs).
//!
//! Two phases: walk every segment and note what is wrong, then grade each problem as recovery
//! would, which needs the recovery point and whether the last close was clean (known only once
//! the last segment has been walked).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Corruption, Error, Result};
use crate::format::{Batch, BatchHeader, HEADER_SIZE_UP_TO_MAGIC, TimestampType, peek_batch_frame};
use crate::index::{OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset};
use crate::log::LOCK_FILE;
use crate::log::LogConfig;
use crate::log::checkpoint::{CHECKPOINT_FILE_NAME, CheckpointFile, CheckpointRecord};
use crate::segment::{
    SegmentFileKind, TransientSuffix, parse_segment_file_name, segment_file_path,
};
use crate::storage::{LockMode, OpenMode, Storage, StorageFile};

/// How many bytes of a `.log` file are read at once while walking it.
const READ_CHUNK: usize = 1 << 20;

/// How many mismatching entries of one index are described one by one; the rest are counted.
const MISMATCHES_DESCRIBED: usize = 3;

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

/// Checks every batch and every index entry of the log in `dir`, without writing anything.
///
/// Opening a log checks as little as it safely can (DESIGN §3 inv. 6): O(1) index checks, and a
/// batch-by-batch scan only from the recovery point on. Verification checks everything, and
/// never writes:
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
///   the batch whose last offset the entry holds.
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
/// policy (gaps between segments are legal only in a compacted log) and `segment.index.bytes`.
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
    let record = CheckpointFile::read(&storage, dir)?;
    let mut findings = Vec::new();
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
    let bases = list_segments(&*storage, dir, &mut findings)?;
    let Some(&first_base) = bases.first() else {
        return Err(Error::InvalidArgument {
            why: format!("{} holds no log segments", dir.display()),
        });
    };

    // Phase 1: walk every segment and note what is wrong, without judging it yet: how serious
    // a problem is depends on the recovery point and on whether the last close was clean,
    // which is known only once the last segment has been walked.
    let mut walks = Vec::with_capacity(bases.len());
    for &base in &bases {
        // Mapping is safe only while the lock keeps writers (who may shrink files) away.
        walks.push(walk_segment(&storage, dir, base, config, lock.is_some())?);
    }

    // Phase 2: grade the problems as recovery would.
    let recovery_point = record
        .map_or(first_base, |r| r.recovery_point)
        .max(first_base);
    let log_start_offset = record
        .map_or(first_base, |r| r.log_start_offset)
        .max(first_base);
    let clean_shutdown = is_clean(record, &walks, &mut findings);
    // Recovery rescans (and so rebuilds the indexes of) every segment from the one holding the
    // recovery point on, unless the last close was clean.
    let first_rescanned = if clean_shutdown {
        bases.len()
    } else {
        // As recovery: from the segment holding the offset before the recovery point.
        bases
            .partition_point(|&b| b < recovery_point)
            .saturating_sub(1)
    };
    let mut log_end_offset = walks.last().map_or(first_base, |w| w.summary.next_offset);
    let mut cut_at: Option<(usize, i64)> = None;
    for (i, walk) in walks.iter().enumerate() {
        let log_path = walk.summary.log_path.clone();
        if let Some((cut, _)) = cut_at {
            findings.push(Finding {
                severity: Severity::CrashState,
                file: log_path,
                position: None,
                what: format!(
                    "the next writable open deletes this segment: it follows the torn end of \
                     segment {}",
                    walks[cut].summary.base_offset
                ),
            });
            continue;
        }
        let rescanned = i >= first_rescanned;
        let next_offset = walk.summary.next_offset;
        if let Some(invalid) = &walk.invalid {
            let torn = rescanned && next_offset >= recovery_point;
            let bytes = walk.summary.log_bytes - invalid.position;
            if torn {
                let later = walks.len() - i - 1;
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
                    file: log_path.clone(),
                    position: Some(invalid.position),
                    what,
                });
                cut_at = Some((i, next_offset));
            } else {
                let why = if clean_shutdown {
                    "in a cleanly closed log".to_string()
                } else if !rescanned {
                    format!(
                        "in a segment wholly below the recovery point {recovery_point}, which \
                         recovery trusts"
                    )
                } else {
                    format!("below the recovery point {recovery_point}")
                };
                findings.push(Finding {
                    severity: Severity::Corruption,
                    file: log_path.clone(),
                    position: Some(invalid.position),
                    what: format!(
                        "{} ({bytes} bytes from here on were not checked), {why}",
                        invalid.what
                    ),
                });
            }
        }
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
        if !rescanned || clean_shutdown {
            findings.extend(walk.final_time_entry_note.iter().cloned());
        }
        if walk.invalid.is_some() {
            // After invalid bytes the segment's real end is unknown: no continuity check.
            continue;
        }
        let Some(next) = walks.get(i + 1) else {
            continue;
        };
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
            let compacted = config.cleanup_policy.compact;
            // As recovery: compaction leaves gaps only below a recovery point it recorded, so
            // with partlog's checkpoint a gap at or above the point is a lost tail there too.
            let lost_tail =
                rescanned && next_offset >= recovery_point && (!compacted || record.is_some());
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
                cut_at = Some((i, next_offset));
            } else if !compacted {
                findings.push(Finding {
                    severity: Severity::Corruption,
                    file: log_path,
                    position: Some(walk.summary.valid_bytes),
                    what: format!(
                        "offsets [{next_offset}, {next_base}) are missing between this segment \
                         and the next (gaps are legal only in a compacted log)"
                    ),
                });
            }
        }
    }
    if let Some((_, end)) = cut_at {
        log_end_offset = end;
    }
    Ok(VerifyReport {
        dir: dir.to_path_buf(),
        checkpoint_found: record.is_some(),
        clean_shutdown,
        recovery_point,
        log_start_offset,
        log_end_offset,
        segments: walks.into_iter().map(|w| w.summary).collect(),
        findings,
    })
}

/// Lists the segments' base offsets, in order, and notes leftover files.
fn list_segments(
    storage: &dyn Storage,
    dir: &Path,
    findings: &mut Vec<Finding>,
) -> Result<Vec<i64>> {
    let mut names = storage.list(dir)?;
    names.sort();
    let mut bases = Vec::new();
    let mut indexes = Vec::new();
    for name in &names {
        let Some(parsed) = parse_segment_file_name(name) else {
            continue;
        };
        let what = match (parsed.transient, parsed.kind) {
            (None, SegmentFileKind::Log) => {
                bases.push(parsed.base_offset);
                continue;
            }
            (None, _) => {
                indexes.push((name, parsed.base_offset));
                continue;
            }
            (Some(TransientSuffix::Deleted), _) => {
                "a leftover of an interrupted deletion; the next writable open removes it"
            }
            (Some(TransientSuffix::Cleaned), _) => {
                "a leftover of an interrupted compaction; the next writable open removes it"
            }
            (Some(TransientSuffix::Swap), _) => {
                "an unfinished compaction swap, which this version of partlog cannot complete: \
                 it will refuse to open the log for writing"
            }
        };
        findings.push(Finding {
            severity: Severity::Note,
            file: dir.join(name),
            position: None,
            what: what.into(),
        });
    }
    bases.sort_unstable();
    for (name, base) in indexes {
        if bases.binary_search(&base).is_err() {
            findings.push(Finding {
                severity: Severity::Note,
                file: dir.join(name),
                position: None,
                what: "an index file without its .log; the next writable open removes it".into(),
            });
        }
    }
    Ok(bases)
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

/// The first bytes of a segment that are not a valid batch.
#[derive(Debug)]
struct InvalidAt {
    position: u64,
    what: Corruption,
}

/// A problem in an index file, graded later.
#[derive(Debug)]
struct IndexProblem {
    file: PathBuf,
    position: Option<u64>,
    what: String,
}

/// What walking one segment found, before grading.
#[derive(Debug)]
struct SegmentWalk {
    summary: SegmentSummary,
    /// The first bytes that are not a valid batch (the walk stops there).
    invalid: Option<InvalidAt>,
    /// Batches whose CRC holds but whose records do not decode or break an invariant.
    content_problems: Vec<(u64, String)>,
    index_problems: Vec<IndexProblem>,
    /// A sealed segment's time index should end with the segment's largest timestamp.
    final_time_entry_note: Option<Finding>,
    /// Notes that need no grading.
    notes: Vec<Finding>,
}

/// A batch as the index checks need it.
#[derive(Debug, Clone, Copy)]
struct BatchAt {
    position: u64,
    last_offset: i64,
    max_timestamp: i64,
}

fn walk_segment(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    base: i64,
    config: &LogConfig,
    mapping_allowed: bool,
) -> Result<SegmentWalk> {
    let log_path = segment_file_path(dir, base, SegmentFileKind::Log);
    let file = storage.open(&log_path, OpenMode::Read)?;
    let log_bytes = file.len()?;
    let mut walk = SegmentWalk {
        summary: SegmentSummary {
            base_offset: base,
            log_path: log_path.clone(),
            log_bytes,
            valid_bytes: 0,
            batches: 0,
            records: 0,
            next_offset: base,
            max_timestamp: None,
            offset_index_entries: None,
            time_index_entries: None,
        },
        invalid: None,
        content_problems: Vec::new(),
        index_problems: Vec::new(),
        final_time_entry_note: None,
        notes: Vec::new(),
    };
    let mut offset_check =
        OffsetIndexCheck::open(storage, dir, base, config, mapping_allowed, log_bytes)?;
    let mut time_check = TimeIndexCheck::open(storage, dir, base, config, mapping_allowed)?;
    walk.summary.offset_index_entries = offset_check.as_ref().map(|c| c.0.entries.len());
    walk.summary.time_index_entries = time_check.as_ref().map(|c| c.0.entries.len());
    for (kind, present) in [
        (SegmentFileKind::OffsetIndex, offset_check.is_some()),
        (SegmentFileKind::TimeIndex, time_check.is_some()),
    ] {
        if !present {
            walk.notes.push(Finding {
                severity: Severity::Note,
                file: segment_file_path(dir, base, kind),
                position: None,
                what: "missing; the next writable open rebuilds it from the log (a read-only \
                       open cannot)"
                    .into(),
            });
        }
    }

    let mut reader = ChunkReader::new(file, log_bytes);
    let mut scratch = Vec::new();
    let mut position = 0u64;
    let mut running_max: Option<i64> = None;
    while position < log_bytes {
        let expected_next = walk.summary.next_offset;
        let bytes = match next_batch(&mut reader, position, expected_next, base)? {
            Next::Batch(bytes) => bytes,
            Next::Invalid(what) => {
                walk.invalid = Some(InvalidAt { position, what });
                break;
            }
        };
        // A v2 batch (CRC-32C) or a legacy magic 0/1 message (CRC-32), which a log Kafka
        // wrote before 0.11 may hold: each is checked by its own rules.
        // A last offset of i64::MAX leaves no next offset (the segment walker refuses it too).
        let batch = match Batch::new(bytes).and_then(|batch| {
            if batch.last_offset() == i64::MAX {
                Err(Corruption::BadHeader(
                    "the last offset is i64::MAX: no offset can follow it",
                ))
            } else {
                Ok(batch)
            }
        }) {
            Ok(batch) => batch,
            Err(what) => {
                walk.invalid = Some(InvalidAt { position, what });
                break;
            }
        };
        let records = match check_records(&batch, expected_next, &mut scratch) {
            Ok(records) => records,
            Err(RecordsProblem::Corrupt(what)) => {
                walk.content_problems.push((position, what));
                0
            }
            Err(RecordsProblem::Unreadable(what)) => {
                walk.notes.push(Finding {
                    severity: Severity::Note,
                    file: log_path.clone(),
                    position: Some(position),
                    what: format!("records not checked: {what}"),
                });
                0
            }
        };
        let max_timestamp = batch.max_timestamp();
        running_max = Some(running_max.map_or(max_timestamp, |m| m.max(max_timestamp)));
        let at = BatchAt {
            position,
            last_offset: batch.last_offset(),
            max_timestamp,
        };
        if let Some(check) = offset_check.as_mut() {
            check.see_batch(at);
        }
        if let Some(check) = time_check.as_mut() {
            check.see_batch(at);
        }
        position += batch.total_size() as u64;
        walk.summary.batches += 1;
        walk.summary.records += match batch.header() {
            Some(header) => u64::try_from(header.records_count).unwrap_or(0),
            // A legacy message states no count: its records are counted as they decode.
            None => records,
        };
        walk.summary.next_offset = batch.next_offset();
        walk.summary.valid_bytes = position;
    }
    walk.summary.max_timestamp = running_max;
    // Entries past invalid bytes cannot be checked: the invalid bytes are the finding.
    let walked_to_end = walk.invalid.is_none();
    if let Some(check) = offset_check {
        walk.index_problems
            .extend(check.finish(walk.summary.valid_bytes, walked_to_end));
    }
    if let Some(check) = time_check {
        let (problems, last_entry) = check.finish(walked_to_end);
        walk.index_problems.extend(problems);
        // At roll and at close the final time-index entry is written (DESIGN §2.2), so a
        // sealed segment's index ends with its largest timestamp. Missing, lookups still work
        // (they scan on from the last entry), so this is a note.
        if let Some(max) = running_max.filter(|&m| m >= 0)
            && last_entry.is_none_or(|e| e.timestamp < max)
        {
            walk.final_time_entry_note = Some(Finding {
                severity: Severity::Note,
                file: segment_file_path(dir, base, SegmentFileKind::TimeIndex),
                position: None,
                what: format!(
                    "the last entry is not the segment's largest timestamp {max}: the final \
                     entry written at roll or close is missing"
                ),
            });
        }
    }
    Ok(walk)
}

/// What the walk found at a position.
enum Next<'a> {
    Batch(&'a [u8]),
    Invalid(Corruption),
}

/// Reads the batch at `position`: its frame, its whole bytes, and its offsets against what
/// came before (`expected_next`) and the segment's 32-bit relative range.
///
/// A legacy message's frame holds its own offset where a v2 batch holds its base offset; for
/// a compressed wrapper that is its last offset, so the order check here is weaker for it, and
/// [`check_records`] checks its first record against `expected_next` once decompressed.
fn next_batch<'r>(
    reader: &'r mut ChunkReader,
    position: u64,
    expected_next: i64,
    base: i64,
) -> Result<Next<'r>> {
    let available = reader.len - position;
    let head = reader.bytes(position, HEADER_SIZE_UP_TO_MAGIC)?;
    let frame = match peek_batch_frame(head) {
        Ok(Some(frame)) => frame,
        Ok(None) => {
            return Ok(Next::Invalid(Corruption::Truncated {
                needed: HEADER_SIZE_UP_TO_MAGIC as u64,
                available,
            }));
        }
        Err(what) => return Ok(Next::Invalid(what)),
    };
    let size = frame.total_size() as u64;
    if size > available {
        return Ok(Next::Invalid(Corruption::Truncated {
            needed: size,
            available,
        }));
    }
    if frame.base_offset < expected_next {
        return Ok(Next::Invalid(Corruption::OffsetOrder {
            offset: frame.base_offset,
            bound: expected_next,
        }));
    }
    let bytes = reader.bytes(position, frame.total_size())?;
    let last_offset = if frame.is_legacy() {
        Some(frame.base_offset)
    } else {
        BatchHeader::parse(bytes)
            .ok()
            .map(|header| header.last_offset())
    };
    if let Some(last_offset) = last_offset
        && last_offset.saturating_sub(base) > i64::from(i32::MAX)
    {
        return Ok(Next::Invalid(Corruption::OffsetOrder {
            offset: last_offset,
            bound: base.saturating_add(i64::from(i32::MAX)),
        }));
    }
    Ok(Next::Batch(bytes))
}

enum RecordsProblem {
    /// The records are wrong.
    Corrupt(String),
    /// The records cannot be read by this build (a codec it lacks).
    Unreadable(String),
}

/// Decodes every record of a batch whose CRC held, and checks each record's offset against the
/// batch and, under CreateTime, a v2 record's timestamp against the batch's `maxTimestamp`.
/// Returns how many records it decoded.
///
/// A v2 record's offset must lie in `[baseOffset, lastOffset]`. A legacy message states only
/// its last offset, so its records must lie in `[expected_next, last offset]`: above the end of
/// the batch before, which for a compressed wrapper is checked only here. Legacy timestamps are
/// not compared with the wrapper's: Kafka never checked them against each other either.
fn check_records(
    batch: &Batch<'_>,
    expected_next: i64,
    scratch: &mut Vec<u8>,
) -> Result<u64, RecordsProblem> {
    let records = match batch.records(scratch) {
        Ok(records) => records,
        Err(error @ (Error::UnsupportedCompression { .. } | Error::Unsupported { .. })) => {
            return Err(RecordsProblem::Unreadable(error.to_string()));
        }
        Err(error) => return Err(RecordsProblem::Corrupt(error.to_string())),
    };
    let (first_allowed, last_allowed) = match batch.header() {
        Some(header) => (header.base_offset, header.last_offset()),
        None => (expected_next, batch.last_offset()),
    };
    let timestamp_bound = batch.header().and_then(|header| {
        (header.timestamp_type() == TimestampType::CreateTime && !header.is_control())
            .then_some(header.max_timestamp)
    });
    let mut previous: Option<i64> = None;
    let mut count = 0u64;
    for record in records {
        let record = record.map_err(|e| RecordsProblem::Corrupt(e.to_string()))?;
        if record.offset < first_allowed
            || record.offset > last_allowed
            || previous.is_some_and(|p| record.offset <= p)
        {
            return Err(RecordsProblem::Corrupt(format!(
                "record offset {} is outside its batch [{first_allowed}, {last_allowed}] or not \
                 above the record before",
                record.offset,
            )));
        }
        if let Some(max_timestamp) = timestamp_bound
            && record.timestamp > max_timestamp
        {
            return Err(RecordsProblem::Corrupt(format!(
                "record {} has timestamp {}, above the batch's maxTimestamp {max_timestamp}",
                record.offset, record.timestamp
            )));
        }
        previous = Some(record.offset);
        count += 1;
    }
    Ok(count)
}

/// Reads a file forward in large chunks, so that walking small batches costs few reads.
struct ChunkReader {
    file: Arc<dyn StorageFile>,
    len: u64,
    buf: Vec<u8>,
    buf_start: u64,
}

impl ChunkReader {
    fn new(file: Arc<dyn StorageFile>, len: u64) -> Self {
        ChunkReader {
            file,
            len,
            buf: Vec::new(),
            buf_start: 0,
        }
    }

    /// Up to `n` bytes at `position` (fewer only at the end of the file).
    fn bytes(&mut self, position: u64, n: usize) -> Result<&[u8]> {
        let want = (n as u64).min(self.len.saturating_sub(position));
        let buf_end = self.buf_start + self.buf.len() as u64;
        if position < self.buf_start || position + want > buf_end {
            let chunk = want.max(READ_CHUNK as u64).min(self.len - position);
            self.buf
                .resize(usize::try_from(chunk).unwrap_or(usize::MAX), 0);
            self.file.read_exact_at(&mut self.buf, position)?;
            self.buf_start = position;
        }
        let from = usize::try_from(position - self.buf_start).unwrap_or(usize::MAX);
        let to = from.saturating_add(usize::try_from(want).unwrap_or(usize::MAX));
        self.buf
            .get(from..to)
            .ok_or_else(|| Error::InvalidArgument {
                why: "a read past the buffered bytes".into(),
            })
    }
}

/// What the offset- and time-index checks share: the entries, where the merge with the walk
/// stands, and the tally of problems and mismatched entries.
struct IndexTally<E> {
    path: PathBuf,
    entry_size: u64,
    entries: Vec<E>,
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
struct OffsetIndexCheck(IndexTally<OffsetPosition>);

impl OffsetIndexCheck {
    fn open(
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

    fn see_batch(&mut self, batch: BatchAt) {
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
    fn finish(mut self, valid_bytes: u64, walked_to_end: bool) -> Vec<IndexProblem> {
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
struct TimeIndexCheck(IndexTally<TimestampOffset>);

impl TimeIndexCheck {
    fn open(
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

    fn see_batch(&mut self, batch: BatchAt) {
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
    fn finish(mut self, walked_to_end: bool) -> (Vec<IndexProblem>, Option<TimestampOffset>) {
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
fn index_error(path: &Path, error: Error) -> Result<IndexProblem> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{NewRecord, RECORD_BATCH_OVERHEAD, crc32c};
    use crate::log::Log;
    use crate::storage::OsStorage;

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

    #[test]
    fn without_a_checkpoint_a_torn_middle_segment_cuts_the_log_where_recovery_does() {
        let temp = tempfile::tempdir().unwrap();
        write_log(temp.path());
        let before = verify(temp.path());
        storage()
            .remove(&temp.path().join(CHECKPOINT_FILE_NAME))
            .unwrap();
        let middle = segment(temp.path(), &before, 1, SegmentFileKind::Log);
        set_len(&middle, read_file(&middle).len() as u64 / 2);
        let report = verify(temp.path());
        assert!(!report.is_corrupt(), "{:#?}", report.findings);
        assert_eq!(report.recovery_point, 0);
        let later = before.segments.len() - 2;
        let crash = only(&report, Severity::CrashState);
        // The torn tail, the middle segment's indexes past it, and each later segment.
        assert!(
            crash
                .iter()
                .any(|f| f.file == middle && f.what.starts_with("torn tail"))
        );
        assert_eq!(
            crash
                .iter()
                .filter(|f| f
                    .what
                    .starts_with("the next writable open deletes this segment"))
                .count(),
            later
        );

        let log = Log::open(temp.path(), config()).unwrap();
        assert_eq!(log.log_end_offset(), report.log_end_offset);
        assert_eq!(log.recovery_report().segments_deleted, later);
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
            (0, &include_bytes!("../tests/fixtures/legacy/v0.log")[..]),
            (25, &include_bytes!("../tests/fixtures/legacy/v1.log")[..]),
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
