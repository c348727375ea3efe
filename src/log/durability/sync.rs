//! The syncs: the group-commit sync of everything published (`sync_through`, `sync_published`),
//! the syncs of sealed segments off the append path, the report of each sync to the observer,
//! and the poisoning that a failed one brings (ARCHITECTURE.md §6, §8 "Failed fsyncs").
//!
//! No sync runs under a lock of the log: the writer mutex is taken only to collect what to sync
//! and to take what was synced off the unsynced lists.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::segment::Segment;
use crate::storage::Storage;

use crate::log::files::producer_snapshot::UnsyncedSnapshot;
use crate::log::observe;
use crate::log::{LogEvent, Shared};

impl Shared {
    /// See [`Log::sync`](crate::Log::sync).
    pub(in crate::log) fn sync(&self) -> Result<()> {
        self.check_writable()?;
        let shared = self;
        loop {
            let end = shared.view.log_end();
            if shared.durability.durable_offset() >= end {
                break;
            }
            match shared.sync_through(end - 1) {
                Ok(()) => break,
                // A truncation took `end - 1` away meanwhile: sync to where the log ends now.
                Err(Error::Truncated { .. }) => continue,
                Err(error) => return Err(error),
            }
        }
        // A roll with nothing appended after it leaves its sealed segment for the flusher: the
        // data may be durable while its indexes are not yet.
        shared.sync_sealed_segments()
    }

    /// See [`Log::request_sync`].
    pub(in crate::log) fn request_sync(&self) {
        self.durability.request_sync();
    }

    /// Syncs everything published so far, through the group commit, until `offset` is durable.
    pub(in crate::log) fn sync_through(&self, offset: i64) -> Result<()> {
        let result = self
            .durability
            .wait_durable(offset, || self.sync_published());
        if result.is_err() && self.durability.is_poisoned() {
            // Waiters for data above the durable offset will never get it now.
            self.view.log_end_mark().wake_all();
        }
        result
    }

    /// The leader's sync: sealed segments not yet synced (data and indexes), the directory if a
    /// segment was created, then the active `.log` (data only: indexes are derived). On a pool
    /// that gathers syncs, one file-system sync for this log and the others waiting with it
    /// instead, when enough of them wait (`gather.rs`).
    fn sync_published(&self) -> Result<i64> {
        if let Some(gather) = self.config.workers.as_ref().and_then(|w| w.sync_gather())
            && let Some(gathered) = gather.sync_for(self)
        {
            return gathered;
        }
        let published = self.capture_published();
        let started = Instant::now();
        // Sealed segments before the directory: once a new segment's name is durable, every
        // segment before it is complete on disk, so a crash can only cut the log's tail.
        let result = (|| {
            for segment in &published.sealed {
                // With its metadata: the `.log` mtime set at roll is what time retention reads.
                segment.flush_sealed()?;
            }
            // The rolls' producer snapshots, synced before the directory fsync makes their
            // names durable.
            let snapshots_synced = sync_roll_snapshots(&*self.storage, &published.snapshots)?;
            if published.dir_dirty || snapshots_synced {
                self.storage.sync_dir(&self.dir)?;
            }
            published.active.flush_log()
        })();
        self.finish_sync(&published, started.elapsed(), &result);
        result.map(|()| published.target)
    }

    /// What a sync starting now must make durable, read under the writer lock: the log end,
    /// the sealed segments not yet synced, the rolls' snapshots and whether the directory
    /// changed (both taken off their lists), with the truncation counts that say whether the
    /// result may still be applied when the sync ends.
    pub(in crate::log) fn capture_published(&self) -> Published {
        let durable_before = self.durability.durable_offset();
        let mut writer = crate::sync::lock_spinning(&self.writer, crate::log::WRITER_LOCK_SPIN);
        Published {
            durable_before,
            target: writer.tail.log_end_offset(),
            // Left in the list until synced, so that no recovery point passes them while this
            // sync runs (`Writer::recovery_point_bound`).
            sealed: writer.tail.unsynced_sealed().to_vec(),
            snapshots: writer.tail.take_unsynced_snapshots(),
            dir_dirty: writer.tail.take_dir_dirty(),
            active: Arc::clone(writer.tail.active()),
            truncations: self.view.truncations().sequence(),
            // Truncations bump it under the writer lock, which is held here.
            generation: self.durability.generation(),
        }
    }

    /// After a sync of what `published` lists: counts and reports it, and takes the synced
    /// sealed segments off the unsynced list when it succeeded.
    pub(in crate::log) fn finish_sync(
        &self,
        published: &Published,
        duration: Duration,
        result: &Result<()>,
    ) {
        self.counters
            .note_fsync(u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX));
        let target = published.target;
        self.report_fsync(
            published.durable_before.min(target)..target,
            duration,
            result,
        );
        if result.is_ok() {
            self.forget_synced_sealed(&published.sealed, published.truncations);
        }
    }

    /// Syncs the sealed segments still waiting for the flusher (data and indexes) and takes
    /// them off the list. A durable offset at or above a sealed segment's end says only that
    /// its `.log` is synced (a group commit may have synced it while it was active); its index
    /// entries, which recovery trusts below a recovery point, may not be.
    pub(in crate::log) fn sync_sealed_segments(&self) -> Result<()> {
        let (sealed, truncations) = {
            let writer = self.writer.lock();
            (
                writer.tail.unsynced_sealed().to_vec(),
                self.view.truncations().sequence(),
            )
        };
        if let Err(error) = self.flush_sealed_alone(&sealed) {
            return Err(self.poison_after_failed_sync("syncing a sealed segment", error));
        }
        self.forget_synced_sealed(&sealed, truncations);
        Ok(())
    }

    /// Syncs sealed segments outside the group commit (data, metadata and indexes), and
    /// reports it like a group commit's sync: an observer watching syncs for failures must see
    /// the one that poisoned the log, whichever path met it. The caller poisons on failure.
    pub(in crate::log) fn flush_sealed_alone(&self, sealed: &[Arc<Segment>]) -> Result<()> {
        let Some(last) = sealed.last() else {
            return Ok(());
        };
        let end = last.next_offset();
        let durable_before = self.durability.durable_offset();
        let started = Instant::now();
        let result = sealed.iter().try_for_each(|segment| segment.flush_sealed());
        self.report_fsync(durable_before.min(end)..end, started.elapsed(), &result);
        result
    }

    /// Tells the observer how a sync of log data went.
    fn report_fsync(&self, offsets: std::ops::Range<i64>, duration: Duration, result: &Result<()>) {
        observe::notify(
            self.config.observer.as_ref(),
            LogEvent::Fsync {
                offsets,
                duration,
                result: result.as_ref().map(|_| ()),
            },
        );
    }

    /// Takes the sealed segments a sync just completed off the unsynced list, unless a
    /// truncation came since the list was read (`truncations`): it may have made one of them
    /// active again, appended to it, and a roll sealed it again, unsynced, under the same
    /// `Arc`. They then stay listed, and the next sync syncs them again.
    fn forget_synced_sealed(&self, synced: &[Arc<Segment>], truncations: u64) {
        if synced.is_empty() {
            return;
        }
        let mut writer = self.writer.lock();
        if self.view.truncations().sequence() != truncations {
            return;
        }
        writer.tail.forget_synced(synced);
    }

    /// Poisons the log after a failed fsync (`what` says which), and returns its error.
    pub(in crate::log) fn poison_after_failed_sync(&self, what: &str, error: Error) -> Error {
        log::error!("poisoning {}: {what} failed: {error}", self.dir.display());
        self.durability.poison();
        self.view.log_end_mark().wake_all();
        error
    }
}

/// What one sync of a log covers ([`Shared::capture_published`]).
pub(in crate::log) struct Published {
    /// The durable offset when it was read.
    durable_before: i64,
    /// The log end: everything below it is durable once the sync succeeds.
    pub(in crate::log) target: i64,
    sealed: Vec<Arc<Segment>>,
    snapshots: Vec<UnsyncedSnapshot>,
    dir_dirty: bool,
    active: Arc<Segment>,
    truncations: u64,
    /// The group commit's truncation generation, for a sync it does not lead.
    pub(in crate::log) generation: u64,
}

/// Fsyncs the rolls' snapshots `pending` (taken from `Writer::unsynced_snapshots`). Returns
/// whether there were any: the directory then needs its fsync. One a truncation deleted
/// since is synced through its handle all the same, which is harmless.
fn sync_roll_snapshots(storage: &dyn Storage, pending: &[UnsyncedSnapshot]) -> Result<bool> {
    for snapshot in pending {
        snapshot.sync(storage)?;
    }
    Ok(!pending.is_empty())
}
