//! [`Tail`]: the writer mutex's part of the segments: the active segment, the log end offset,
//! and what rolls left for the next sync (sealed segments, producer snapshots written in place,
//! new names in the directory), with the roll jitter's generator.
//!
//! A sealed segment stays in the unsynced list until its sync has succeeded, not only until
//! one began: a recovery point must never pass it ([`Tail::recovery_point_bound`]).

use std::sync::Arc;

use crate::log::files::producer_snapshot::UnsyncedSnapshot;
use crate::rng::SplitMix64;
use crate::segment::Segment;

/// See the [module docs](self). Behind the writer mutex.
#[derive(Debug)]
pub(in crate::log) struct Tail {
    active: Arc<Segment>,
    log_end_offset: i64,
    /// Sealed segments whose data and indexes are not yet synced (the flusher syncs them off
    /// the append path, and any group commit syncs them first).
    unsynced_sealed: Vec<Arc<Segment>>,
    /// A segment file was created since the last directory sync.
    dir_dirty: bool,
    /// Producer snapshots a roll put in place without fsyncing them: the flusher's next sync
    /// (or close) fsyncs them before the directory, off the append path.
    unsynced_snapshots: Vec<UnsyncedSnapshot>,
    /// The roll jitter's draws.
    jitter: SplitMix64,
}

impl Tail {
    /// The tail an open found: `active` ending at `log_end_offset`, everything synced.
    pub(in crate::log) fn new(
        active: Arc<Segment>,
        log_end_offset: i64,
        jitter: SplitMix64,
    ) -> Tail {
        Tail {
            active,
            log_end_offset,
            unsynced_sealed: Vec::new(),
            dir_dirty: false,
            unsynced_snapshots: Vec::new(),
            jitter,
        }
    }

    /// The active segment: the only one appended to.
    pub(in crate::log) fn active(&self) -> &Arc<Segment> {
        &self.active
    }

    /// The offset the next append gets.
    pub(in crate::log) fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }

    /// An append (or a roll past a gap) moved the log end to `end`.
    pub(in crate::log) fn set_log_end_offset(&mut self, end: i64) {
        self.log_end_offset = end;
    }

    /// A new active segment ending at `log_end_offset` (a truncation, a restart, a live
    /// reader's reload); returns the old log end.
    pub(in crate::log) fn replace_active(
        &mut self,
        active: Arc<Segment>,
        log_end_offset: i64,
    ) -> i64 {
        self.active = active;
        std::mem::replace(&mut self.log_end_offset, log_end_offset)
    }

    /// A live reader found a new active segment; the log end follows with the poll.
    pub(in crate::log) fn follow_active(&mut self, active: Arc<Segment>) {
        self.active = active;
    }

    /// A roll: `new` is active, and the old active segment, sealed, waits for its sync, with
    /// `new`'s name in the directory.
    pub(in crate::log) fn rolled(&mut self, new: Arc<Segment>) {
        let old = std::mem::replace(&mut self.active, new);
        self.unsynced_sealed.push(old);
        self.dir_dirty = true;
    }

    /// The draw of a roll's jitter.
    pub(in crate::log) fn next_jitter(&mut self) -> u64 {
        self.jitter.next_u64()
    }

    /// The generator as it stands, for a recovery that draws without consuming it.
    pub(in crate::log) fn jitter(&self) -> SplitMix64 {
        self.jitter.clone()
    }

    /// The sealed segments waiting for their sync, oldest first.
    pub(in crate::log) fn unsynced_sealed(&self) -> &[Arc<Segment>] {
        &self.unsynced_sealed
    }

    /// Takes the sealed segments waiting for their sync (close syncs them itself).
    pub(in crate::log) fn take_unsynced_sealed(&mut self) -> Vec<Arc<Segment>> {
        std::mem::take(&mut self.unsynced_sealed)
    }

    /// Takes `synced` off the unsynced list: their sync succeeded.
    pub(in crate::log) fn forget_synced(&mut self, synced: &[Arc<Segment>]) {
        self.unsynced_sealed
            .retain(|segment| !synced.iter().any(|done| Arc::ptr_eq(done, segment)));
    }

    /// Keeps on the unsynced list only the segments that `keep` accepts (a truncation or a
    /// deletion took the others out of the log).
    pub(in crate::log) fn retain_unsynced(&mut self, keep: impl FnMut(&Arc<Segment>) -> bool) {
        self.unsynced_sealed.retain(keep);
    }

    /// A name was created in the directory: the next sync syncs the directory.
    pub(in crate::log) fn mark_dir_dirty(&mut self) {
        self.dir_dirty = true;
    }

    /// A directory sync covered every name created so far.
    pub(in crate::log) fn mark_dir_synced(&mut self) {
        self.dir_dirty = false;
    }

    /// Whether a name waits for a directory sync.
    pub(in crate::log) fn dir_dirty(&self) -> bool {
        self.dir_dirty
    }

    /// Takes the need for a directory sync (the sync about to run makes the names durable).
    pub(in crate::log) fn take_dir_dirty(&mut self) -> bool {
        std::mem::take(&mut self.dir_dirty)
    }

    /// A roll wrote `snapshot` in place, unsynced: it replaces a pending one at the same offset
    /// (a truncation that removed the segment at this base may have left one), and the
    /// directory needs its sync.
    pub(in crate::log) fn note_unsynced_snapshot(&mut self, snapshot: UnsyncedSnapshot) {
        self.unsynced_snapshots
            .retain(|pending| pending.offset != snapshot.offset);
        self.unsynced_snapshots.push(snapshot);
        self.dir_dirty = true;
    }

    /// Takes the rolls' unsynced snapshots (the sync about to run syncs them).
    pub(in crate::log) fn take_unsynced_snapshots(&mut self) -> Vec<UnsyncedSnapshot> {
        std::mem::take(&mut self.unsynced_snapshots)
    }

    /// Forgets the unsynced snapshots above `end` (a truncation deletes their files).
    pub(in crate::log) fn forget_snapshots_above(&mut self, end: i64) {
        self.unsynced_snapshots
            .retain(|snapshot| snapshot.offset <= end);
    }

    /// The highest recovery point the log may record now, given the durable offset: every
    /// offset below it must be durable with the index entries that recovery will trust
    /// (ARCHITECTURE.md §7). That stops at the oldest sealed segment whose sync has not
    /// completed: its `.log` may be durable (a group commit synced it while it was still
    /// active, which leaves the active segment's indexes alone) while its index entries and its
    /// final time-index entry are not, and recovery trusts the entries of every segment below
    /// the recovery point.
    pub(in crate::log) fn recovery_point_bound(&self, durable_offset: i64) -> i64 {
        self.unsynced_sealed
            .iter()
            .map(|segment| segment.base_offset())
            .fold(durable_offset.min(self.log_end_offset), i64::min)
    }
}
