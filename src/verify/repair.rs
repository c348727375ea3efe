//! [`repair_dir`]: what `partlog verify --repair` does with what [`verify_dir`](super::verify_dir)
//! found, and [`RepairPlan`], the repair that a [`VerifyReport`](super::VerifyReport) calls for.
//!
//! A repair is a writable open that distrusts the log from the first damaged segment on: every
//! segment from there is validated from byte 0, and its `.index`, `.timeindex` and `.txnindex`
//! are rebuilt from its `.log` by recovery's own scan and producer-state replay, whatever the
//! checkpoint says (ARCHITECTURE.md §7). The recovery point still decides what is corruption, so
//! a `.log` byte changes only where the log is cut: at a torn tail, or, under
//! [`RecoveryMode::TruncateAtCorruption`](crate::RecoveryMode::TruncateAtCorruption), at the
//! first corruption the plan names.

use std::path::Path;

use super::walk::SegmentWalk;
use super::{Finding, Severity};
use crate::error::Result;
use crate::log::{DiscardReason, Discarded, Log, LogConfig, RecoveryReport};
use crate::segment::{SegmentFileKind, parse_segment_file_name};

/// What a repair of the directory does, from what [`verify_dir`](super::verify_dir) found
/// ([`VerifyReport::repair`](super::VerifyReport::repair)).
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepairPlan {
    /// The base of the first segment the repair validates from byte 0, rebuilding its indexes
    /// and `.txnindex` (and every later segment's) from the log: the first segment with
    /// corruption in its `.log`, or a bad `.index`, `.timeindex` or `.txnindex`. `None` when
    /// nothing calls for it (a plain writable open then does the rest: a torn tail, leftovers,
    /// a missing index).
    pub rescan_from: Option<i64>,
    /// What cutting the log at its first corruption takes, counted from the walk: the repair
    /// does it only under `RecoveryMode::TruncateAtCorruption`. `None` when no `.log` holds
    /// corruption that a cut removes.
    pub cut: Option<Discarded>,
}

/// The repair that the walks and findings of one verification call for. `corrupt` is where the
/// first corruption a cut removes lies (the segment and the byte); unless `gaps_legal` (the
/// log's records were compacted), the offsets from there to the next segment's base count as
/// records.
pub(super) fn plan(
    walks: &[SegmentWalk],
    findings: &[Finding],
    corrupt: Option<(usize, u64)>,
    gaps_legal: bool,
) -> RepairPlan {
    let derived_damage = findings
        .iter()
        .filter(|f| f.severity >= Severity::CrashState)
        .filter_map(|f| parse_segment_file_name(f.file.file_name()?.to_str()?))
        .filter(|name| {
            name.transient.is_none()
                && matches!(
                    name.kind,
                    SegmentFileKind::OffsetIndex
                        | SegmentFileKind::TimeIndex
                        | SegmentFileKind::TxnIndex
                )
        })
        .map(|name| name.base_offset)
        .min();
    let cut = corrupt.map(|(i, position)| planned_cut(walks, i, position, gaps_legal));
    let corrupt_base = corrupt.map(|(i, _)| walks[i].summary.base_offset);
    let rescan_from = match (derived_damage, corrupt_base) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    RepairPlan { rescan_from, cut }
}

/// What a cut of the `i`th segment at byte `position` takes, from the walk's counts.
fn planned_cut(walks: &[SegmentWalk], i: usize, position: u64, gaps_legal: bool) -> Discarded {
    let walk = &walks[i].summary;
    let later = &walks[i + 1..];
    let cut_offset = walk.next_offset;
    let mut records = 0;
    let mut end_offset = cut_offset;
    if let Some(next) = later.first().filter(|_| !gaps_legal) {
        records += u64::try_from(next.summary.base_offset - cut_offset).unwrap_or(0);
        end_offset = next.summary.base_offset;
    }
    let mut bytes = walk.log_bytes.saturating_sub(position);
    for segment in later {
        records += segment.summary.records;
        bytes += segment.summary.log_bytes;
        end_offset = end_offset.max(segment.summary.next_offset);
    }
    Discarded {
        reason: DiscardReason::Corruption,
        file: walk.log_path.clone(),
        position,
        cut_offset,
        end_offset,
        records,
        bytes,
        deleted_segments: later.iter().map(|w| w.summary.log_path.clone()).collect(),
    }
}

/// Repairs the log in `dir` as `plan` says, and returns what the repair's open found and did.
///
/// It opens the log for writing (so it takes the exclusive lock, and fails with
/// [`Error::Locked`](crate::Error::Locked) while a writer runs), validating every segment from
/// [`RepairPlan::rescan_from`] on from byte 0 and rebuilding its `.index`, `.timeindex` and
/// `.txnindex` from the log, and closes it. Without a `rescan_from` it is a plain writable open
/// and close: a torn tail is truncated, leftovers removed, missing indexes rebuilt.
///
/// `config.recovery_mode` decides about corruption in a `.log`: under
/// [`RecoveryMode::Fail`](crate::RecoveryMode::Fail) (the default) the repair fails with
/// [`Error::Corrupt`](crate::Error::Corrupt) and no `.log` byte changes; under
/// [`RecoveryMode::TruncateAtCorruption`](crate::RecoveryMode::TruncateAtCorruption) the log is
/// cut at the first corrupt batch, and [`RepairPlan::cut`] said beforehand what that takes.
/// Settings in `config` are applied to this open only when `config.store_settings` is false.
///
/// ```
/// # fn main() -> partlog::Result<()> {
/// use partlog::{Log, LogConfig, NewRecord, Severity, repair_dir, verify_dir};
/// # let temp = tempfile::tempdir().unwrap();
/// # let dir = temp.path();
/// let log = Log::open(dir, LogConfig::default())?;
/// log.append(&[NewRecord::new(1_700_000_000_000, None, Some(b"hello"))])?;
/// log.close()?;
/// drop(log);
/// // A crash's torn write: half a batch header after the last batch.
/// let segment = dir.join("00000000000000000000.log");
/// let mut bytes = std::fs::read(&segment).unwrap();
/// bytes.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 90]);
/// std::fs::write(&segment, &bytes).unwrap();
///
/// let report = verify_dir(dir, &LogConfig::default())?;
/// assert_eq!(report.worst(), Some(Severity::CrashState));
/// let recovery = repair_dir(dir, &LogConfig::default(), &report.repair)?;
/// assert_eq!(recovery.discarded.map(|d| d.bytes), Some(12));
/// assert_eq!(verify_dir(dir, &LogConfig::default())?.worst(), None);
/// # Ok(())
/// # }
/// ```
pub fn repair_dir(
    dir: impl AsRef<Path>,
    config: &LogConfig,
    plan: &RepairPlan,
) -> Result<RecoveryReport> {
    let dir = dir.as_ref();
    let log = match plan.rescan_from {
        Some(from) => Log::open_rescanning(dir, config.clone(), from)?,
        None => Log::open(dir, config.clone())?,
    };
    let report = log.recovery_report().clone();
    log.close()?;
    Ok(report)
}
