//! [`ReadView`]: what every thread sees of the log without the writer mutex: the segment list
//! readers pin, the log start and end offsets, the cuts that truncations made, whether gaps
//! between segments are legal, and whether the log is closed.
//!
//! Writers change it under the writer mutex (a live reader under its poll), in the orders the
//! write paths document; readers only load it. The log end moves after the data it covers is
//! readable and after what a `read_committed` reader needs beside it (the first unstable
//! offset) is published.

use crate::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use super::snapshot::Snapshot;
use super::truncations::Truncations;
use super::watermark::Watermark;

/// See the [module docs](self).
#[derive(Debug)]
pub(in crate::log) struct ReadView {
    segments: Snapshot,
    log_end: Watermark,
    log_start: AtomicI64,
    /// The highest log end offset a truncation has cut the log back from since open (`-1` if
    /// none): a read above the log end at or below it asks for an offset the log held before a
    /// cut, and gets `Truncated`; one above it asks past anything the log ever held, and gets
    /// `OffsetOutOfRange`. Waits ask `truncations`, which knows each cut.
    highest_cut_end: AtomicI64,
    /// The truncations and their cuts: a durability wait fails only for a cut at or below its
    /// offset since it began, and a compaction pass never swaps in a copy of a segment that a
    /// truncation changed meanwhile (`truncations.rs`).
    truncations: Truncations,
    /// The `COMPACTED` flag of `partlog.checkpoint` as this log knows it (with the cleanup
    /// policy, whether a read may move across a gap between segments): read at open, set
    /// before any gap the log makes can reach a reader, cleared only by a full truncation. A
    /// live reader ORs in the flag of each checkpoint it reads.
    compacted: AtomicBool,
    closed: AtomicBool,
}

impl ReadView {
    /// The view an open built: `segments` ending at `log_end`, starting at `log_start`.
    pub(in crate::log) fn new(
        segments: Snapshot,
        log_start: i64,
        log_end: i64,
        compacted: bool,
    ) -> ReadView {
        ReadView {
            segments,
            log_end: Watermark::new(log_end),
            log_start: AtomicI64::new(log_start),
            highest_cut_end: AtomicI64::new(-1),
            truncations: Truncations::default(),
            compacted: AtomicBool::new(compacted),
            closed: AtomicBool::new(false),
        }
    }

    /// The segment list and its pins.
    pub(in crate::log) fn segments(&self) -> &Snapshot {
        &self.segments
    }

    /// The log end offset: every offset below it is readable.
    pub(in crate::log) fn log_end(&self) -> i64 {
        self.log_end.get()
    }

    /// The log end as a watermark, for waits and wake-ups.
    pub(in crate::log) fn log_end_mark(&self) -> &Watermark {
        &self.log_end
    }

    /// Moves the log end up to `to` (an append, a roll past a gap), waking the readers it
    /// satisfies.
    pub(in crate::log) fn advance_log_end(&self, to: i64) {
        self.log_end.advance(to);
    }

    /// Sets the log end, down too (a truncation, a restart, a live reader's poll), waking every
    /// waiter to look again.
    pub(in crate::log) fn set_log_end(&self, to: i64) {
        self.log_end.set(to);
    }

    /// The log start offset.
    pub(in crate::log) fn log_start(&self) -> i64 {
        self.log_start.load(Ordering::Acquire)
    }

    /// Sets the log start offset (made durable by the caller first).
    pub(in crate::log) fn set_log_start(&self, start: i64) {
        self.log_start.store(start, Ordering::Release);
    }

    /// Moves the log start offset up to `start`, never down.
    pub(in crate::log) fn raise_log_start(&self, start: i64) {
        self.log_start.fetch_max(start, Ordering::AcqRel);
    }

    /// Records that a truncation (or a live reader's reload) cut the log back from `old_end`.
    pub(in crate::log) fn note_cut_from(&self, old_end: i64) {
        self.highest_cut_end.fetch_max(old_end, Ordering::AcqRel);
    }

    /// The highest log end a cut came from since open, `-1` if none.
    pub(in crate::log) fn highest_cut_end(&self) -> i64 {
        self.highest_cut_end.load(Ordering::Acquire)
    }

    /// The record of truncations.
    pub(in crate::log) fn truncations(&self) -> &Truncations {
        &self.truncations
    }

    /// Whether the log's records have been compacted (the checkpoint's `COMPACTED` flag).
    pub(in crate::log) fn compacted(&self) -> bool {
        self.compacted.load(Ordering::Acquire)
    }

    /// Sets the `COMPACTED` flag for readers, before any gap reaches them.
    pub(in crate::log) fn mark_compacted(&self) {
        self.compacted.store(true, Ordering::Release);
    }

    /// Clears the `COMPACTED` flag: a full truncation left no gap.
    pub(in crate::log) fn forget_compacted(&self) {
        self.compacted.store(false, Ordering::Release);
    }

    /// Whether `close()` has begun.
    pub(in crate::log) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Marks the log closed; `true` if it already was.
    pub(in crate::log) fn close(&self) -> bool {
        self.closed.swap(true, Ordering::AcqRel)
    }
}
