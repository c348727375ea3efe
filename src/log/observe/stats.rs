//! [`LogStats`] and [`RecoveryReport`]: what the log tells about itself, and [`Log::stats`].

use crate::sync::atomic::{AtomicU64, Ordering};
use std::path::PathBuf;

use super::discarded::Discarded;
use crate::error::Corruption;

/// A point-in-time view of a log's counters, from [`Log::stats`](crate::Log::stats).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogStats {
    /// Segments in the log, the active one included.
    pub segments: usize,
    /// Segments whose files are open right now.
    pub open_segments: usize,
    /// Bytes of the active segment (sealed segments are not opened to count theirs).
    pub active_segment_bytes: u64,
    /// The log start offset.
    pub log_start_offset: i64,
    /// The log end offset.
    pub log_end_offset: i64,
    /// The durable offset.
    pub durable_offset: i64,
    /// Appends since open.
    pub appends: u64,
    /// Bytes appended since open.
    pub appended_bytes: u64,
    /// Records appended since open.
    pub appended_records: u64,
    /// Segment rolls since open.
    pub rolls: u64,
    /// Group-commit syncs since open.
    pub fsyncs: u64,
    /// Total time spent in group-commit syncs, in nanoseconds.
    pub fsync_nanos: u64,
    /// The longest group-commit sync, in nanoseconds.
    pub max_fsync_nanos: u64,
    /// Whether a failed fsync has poisoned the log.
    pub poisoned: bool,
    /// Compaction passes that completed since open.
    pub compaction_passes: u64,
    /// Compaction passes that failed since open (an I/O error, say); the next pass retries.
    pub compaction_failed_passes: u64,
    /// Where the last stable offset held the last compaction pass back: the base of the segment
    /// holding the LSO (a transaction still open there), which waits with every later segment
    /// until the transactions end. `None` when the LSO did not end the cleanable range.
    pub compaction_uncleanable_from: Option<i64>,
    /// The bytes from [`compaction_uncleanable_from`](Self::compaction_uncleanable_from) to the
    /// log end when the last pass ran.
    pub compaction_uncleanable_bytes: u64,
}

/// The counters behind [`LogStats`]: how much the log appended, rolled and synced since open.
#[derive(Debug, Default)]
pub(in crate::log) struct Counters {
    appends: AtomicU64,
    appended_bytes: AtomicU64,
    appended_records: AtomicU64,
    rolls: AtomicU64,
    fsyncs: AtomicU64,
    fsync_nanos: AtomicU64,
    max_fsync_nanos: AtomicU64,
}

impl Counters {
    /// An append of `records` in `bytes`. Call it under the writer mutex: only appends write
    /// these, so each is a load and a store, not the locked read-modify-write of `fetch_add`.
    pub(in crate::log) fn note_append(&self, records: u32, bytes: usize) {
        let bump = |counter: &AtomicU64, by: u64| {
            counter.store(
                counter.load(Ordering::Relaxed).wrapping_add(by),
                Ordering::Relaxed,
            );
        };
        bump(&self.appends, 1);
        bump(&self.appended_bytes, bytes as u64);
        bump(&self.appended_records, u64::from(records));
    }

    /// A roll.
    pub(in crate::log) fn note_roll(&self) {
        self.rolls.fetch_add(1, Ordering::Relaxed);
    }

    /// A group-commit sync that took `nanos`.
    pub(in crate::log) fn note_fsync(&self, nanos: u64) {
        self.fsyncs.fetch_add(1, Ordering::Relaxed);
        self.fsync_nanos.fetch_add(nanos, Ordering::Relaxed);
        self.max_fsync_nanos.fetch_max(nanos, Ordering::Relaxed);
    }

    /// The bytes appended since open.
    pub(in crate::log) fn appended_bytes(&self) -> u64 {
        self.appended_bytes.load(Ordering::Relaxed)
    }

    /// The counters' part of [`LogStats`], into `stats`.
    pub(in crate::log) fn fill(&self, stats: &mut LogStats) {
        stats.appends = self.appends.load(Ordering::Relaxed);
        stats.appended_bytes = self.appended_bytes.load(Ordering::Relaxed);
        stats.appended_records = self.appended_records.load(Ordering::Relaxed);
        stats.rolls = self.rolls.load(Ordering::Relaxed);
        stats.fsyncs = self.fsyncs.load(Ordering::Relaxed);
        stats.fsync_nanos = self.fsync_nanos.load(Ordering::Relaxed);
        stats.max_fsync_nanos = self.max_fsync_nanos.load(Ordering::Relaxed);
    }
}

/// What [`Log::open`](crate::Log::open) found and did, from
/// [`Log::recovery_report`](crate::Log::recovery_report).
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// The last close was clean and its checkpoint matched the directory: nothing was scanned.
    pub clean_shutdown: bool,
    /// The recovery point the scan started from (the checkpoint's, or the first segment's base).
    pub recovery_point: i64,
    /// Segments validated batch by batch.
    pub segments_scanned: usize,
    /// Bytes of batches validated.
    pub bytes_scanned: u64,
    /// Bytes removed from the end of the log: a torn tail, or data after corruption under
    /// [`RecoveryMode::TruncateAtCorruption`](crate::RecoveryMode::TruncateAtCorruption).
    pub bytes_truncated: u64,
    /// Segments deleted because they followed the truncation point.
    pub segments_deleted: usize,
    /// Corruption found below the recovery point, or in a log whose durable point is unknown
    /// (only reported when the mode truncates).
    pub corruption: Option<(PathBuf, u64, Corruption)>,
    /// What the open truncated and deleted (a read-only open: what it left out of its view),
    /// why, and how many records that was: `None` when it discarded nothing. Every open that
    /// discards data says so here, in the [`LogEvent::Recovery`](crate::LogEvent::Recovery)
    /// event, and in a warning through the `log` crate.
    pub discarded: Option<Discarded>,
    /// Index files (`.index`, `.timeindex`) of sealed segments that a writable open found
    /// missing and rebuilt from the log.
    pub rebuilt_indexes: Vec<PathBuf>,
    /// The bases of the segments whose `.txnindex` a writable open rebuilt because it found an
    /// ABORT marker no `.txnindex` entry listed (recovery's own rebuild of the segments it
    /// scanned is not counted here).
    pub rebuilt_txn_indexes_from: Option<i64>,
    /// Leftover files removed: `.deleted` files and index files without a `.log`.
    pub stray_files_removed: Vec<String>,
    /// The log end offset after recovery.
    pub log_end_offset: i64,
}
