//! What a maintenance pass reports: [`RetentionReport`] (with its [`DeletedSegment`]s and their
//! [`RetentionRule`]) and [`CompactionStats`], returned by the passes and sent to the
//! [`Observer`](super::Observer).

use std::time::Duration;

/// The rule that deleted a segment, in the order the rules run.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RetentionRule {
    /// Every offset of the segment lies below the log start offset (moved by
    /// `delete_records_before` or an earlier pass). Applies whatever `cleanup.policy`.
    LogStartOffset,
    /// The log was larger than `retention.bytes`.
    Size,
    /// The segment was older than `retention.ms`.
    Time,
}

/// One segment that a retention pass deleted.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeletedSegment {
    /// The segment's base offset.
    pub base_offset: i64,
    /// The offset after the segment: the next segment's base (the log end offset for the
    /// active segment).
    pub end_offset: i64,
    /// The bytes of its `.log` file.
    pub bytes: u64,
    /// The rule that deleted it.
    pub rule: RetentionRule,
}

/// What one retention pass ([`Log::enforce_retention`](crate::Log::enforce_retention)) did.
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetentionReport {
    /// The deleted segments, oldest first.
    pub deleted: Vec<DeletedSegment>,
    /// Whether the active segment qualified too, so the log rolled a new, empty one at the log
    /// end offset before deleting it.
    pub rolled_active_segment: bool,
    /// The log start offset after the pass.
    pub log_start_offset: i64,
}

impl RetentionReport {
    /// How many segments the pass deleted.
    pub fn segments_deleted(&self) -> usize {
        self.deleted.len()
    }

    /// How many bytes of `.log` files the pass deleted.
    pub fn bytes_deleted(&self) -> u64 {
        self.deleted.iter().map(|d| d.bytes).sum()
    }

    /// How many segments `rule` deleted.
    pub fn segments_deleted_by(&self, rule: RetentionRule) -> usize {
        self.deleted.iter().filter(|d| d.rule == rule).count()
    }

    /// How many bytes of `.log` files `rule` deleted.
    pub fn bytes_deleted_by(&self, rule: RetentionRule) -> u64 {
        self.deleted
            .iter()
            .filter(|d| d.rule == rule)
            .map(|d| d.bytes)
            .sum()
    }
}

/// What one compaction pass did.
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactionStats {
    /// Bytes of segment data the pass read, both phases counted.
    pub bytes_read: u64,
    /// Bytes of cleaned segment data the pass wrote.
    pub bytes_written: u64,
    /// Records dropped, tombstones included.
    pub records_removed: u64,
    /// Tombstones dropped because their delete horizon had passed.
    pub tombstones_removed: u64,
    /// Old segments replaced by cleaned ones.
    pub segments_cleaned: u64,
    /// Cleaned segments swapped in: one per group, so `segments_cleaned - segments_written`
    /// segments were merged away.
    pub segments_written: u64,
    /// The end of the range the pass cleaned: every record below it was compared with the
    /// latest record of its key below it.
    pub cleaned_up_to: i64,
    /// The base of the segment holding the last stable offset, when the LSO (a transaction
    /// still open, or ended above the high watermark) ended the cleanable range: that segment
    /// and the later ones wait.
    pub uncleanable_from: Option<i64>,
    /// The bytes of the segments from [`uncleanable_from`](Self::uncleanable_from) to the log
    /// end, the active segment included.
    pub uncleanable_bytes: u64,
    /// How long the pass took.
    pub duration: Duration,
}

/// Whether a compaction pass is due, and why: see
/// [`Log::compaction_schedule`](crate::Log::compaction_schedule).
///
/// ```
/// use partlog::{CleanupPolicy, Log, LogConfig, NewRecord};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = tempfile::tempdir()?;
/// // Small segments (a test-only floor) so that a few appends seal some.
/// let config = LogConfig::builder_for_tests()
///     .cleanup_policy(CleanupPolicy::COMPACT)
///     .segment_bytes(4096)
///     .build()?;
/// let log = Log::open(dir.path(), config)?;
/// for i in 0..200_i64 {
///     let key = format!("user-{}", i % 4);
///     log.append(&[NewRecord::new(1_700_000_000_000 + i, Some(key.as_bytes()), Some(b"state"))])?;
/// }
/// let schedule = log.compaction_schedule()?;
/// // Nothing was ever compacted: every sealed segment is dirty.
/// assert_eq!(schedule.clean_bytes, 0);
/// assert!(schedule.dirty_bytes > 0 && schedule.due);
/// log.compact()?;
/// assert!(!log.compaction_due()?); // what the pass cleaned is clean now
/// # Ok(())
/// # }
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CompactionSchedule {
    /// Every record below it has been compared with every later record below it by earlier
    /// passes (Kafka's cleaner checkpoint).
    pub first_dirty_offset: i64,
    /// The end of the cleanable range: the active segment's base, or the base of the first
    /// dirty segment younger than `min.compaction.lag.ms` (when above 0), or of the segment
    /// holding the last stable offset, whichever is lowest.
    pub first_uncleanable_offset: i64,
    /// Bytes of the cleanable segments wholly below the first dirty offset.
    pub clean_bytes: u64,
    /// Bytes of the other cleanable segments.
    pub dirty_bytes: u64,
    /// `dirty_bytes / (clean_bytes + dirty_bytes)`, 0 when both are 0.
    pub dirty_ratio: f64,
    /// The first batch of a dirty segment is older than `max.compaction.lag.ms`.
    pub max_lag_exceeded: bool,
    /// A pass is due: there are dirty bytes, and the ratio reaches
    /// `min.cleanable.dirty.ratio` or the max lag is exceeded.
    pub due: bool,
}
