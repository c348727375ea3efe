//! The leader-epoch cache at open (Kafka's `LogLoader` and `LogSegment.recover`), after
//! recovery has settled the segments, the log start and the log end offset:
//!
//! 1. `leader-epoch-checkpoint` is read. A file that does not parse is derived data gone bad:
//!    it is logged and the cache is rebuilt from the batches' `partitionLeaderEpoch`, reading
//!    every segment's batch headers (not their records) and replaying the append path's rules
//!    (every epoch ≥ 0 assigned; a legacy message clears the cache, as its append did in Kafka).
//! 2. Otherwise the batches recovery scanned after a crash (the segments from
//!    `first_recovered_base` on) assign their epochs with Kafka's recovery rule (only an epoch
//!    above the latest one is added): the file may lag them after a crash inside a truncation,
//!    which drops the entries before it cuts the segments. The scan noted those epochs as it
//!    validated the batches (`RisingEpochs`), so the tail is not read a second time.
//! 3. Entries starting at or after the log end offset are dropped, and the first start is
//!    clamped up to the log start offset (and back down to it, when a crash inside a truncation
//!    left the start below the first entry in a batch of that entry's epoch). A log that restarted empty at its start offset (it
//!    ended below it) clears the cache, as Kafka does.
//! 4. A writable open writes the file if that changed anything; a read-only one keeps the
//!    result in memory only.

use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::segment::{FrameEpoch, RisingEpochs};
use crate::storage::Storage;

use super::leader_epoch::{LeaderEpochFileCache, read_checkpoint};
use crate::log::segments::snapshot::Snapshot;

/// What recovery found, as the cache's load needs it.
pub(in crate::log) struct EpochLoad {
    /// The base of the first segment an unclean recovery scanned.
    pub first_recovered_base: Option<i64>,
    /// The log ended below its start offset and restarted empty there.
    pub restarted_at_log_start: bool,
    /// The epochs that scan found rising, in offset order.
    pub scanned_epochs: RisingEpochs,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    pub read_only: bool,
}

/// Loads, corrects and (for a writable open) persists the cache. See the module docs.
pub(in crate::log) fn load_leader_epochs(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    snapshot: &Snapshot,
    load: EpochLoad,
) -> Result<LeaderEpochFileCache> {
    let (entries, rebuild) = match read_checkpoint(&**storage, dir) {
        Ok(entries) => (entries.unwrap_or_default(), false),
        Err(error @ Error::Corrupt { .. }) => {
            log::warn!(
                "{}: {error}; rebuilding the leader epoch cache from the batches",
                dir.display()
            );
            (Vec::new(), true)
        }
        Err(error) => return Err(error),
    };
    let mut cache = LeaderEpochFileCache::detached_with(entries.clone());
    if load.restarted_at_log_start {
        cache.clear()?;
    } else if rebuild {
        replay_appended_epochs(snapshot, &mut cache)?;
    } else if load.first_recovered_base.is_some() {
        for &(epoch, base_offset) in load.scanned_epochs.starts() {
            cache.assign_recovered(epoch, base_offset)?;
        }
    }
    cache.truncate_from_end(load.log_end_offset)?;
    cache.truncate_from_start(load.log_start_offset)?;
    lower_first_start_to_the_log_start(snapshot, &load, &mut cache)?;
    if !load.read_only {
        cache.attach(Arc::clone(storage), dir);
        if rebuild || cache.entries() != entries.as_slice() {
            cache.flush()?;
        }
    }
    Ok(cache)
}

/// A truncation that cuts the batch holding the log start brings the start down to that batch's
/// base, durably, before it drops the cache's entries and cuts the segments. After a crash in
/// between, the batch is still there, below the first entry, which `truncate_from_start` had
/// moved up to the old start: the entry comes back down to the batch if the batch has its epoch.
/// One segment's headers are read, and only when the first entry starts above the log start.
fn lower_first_start_to_the_log_start(
    snapshot: &Snapshot,
    load: &EpochLoad,
    cache: &mut LeaderEpochFileCache,
) -> Result<()> {
    let start = load.log_start_offset;
    let Some(first) = cache.earliest_entry() else {
        return Ok(());
    };
    if first.start_offset <= start || start >= load.log_end_offset {
        return Ok(());
    }
    let list = snapshot.load();
    let Some(handle) = list.handles().get(list.floor_index(start)) else {
        return Ok(());
    };
    let Some(segment) = snapshot.pin(handle)? else {
        return Ok(());
    };
    // The epoch of the last batch starting at or before the log start: the one holding it.
    let mut holding = None;
    segment.visit_leader_epochs(&mut |frame| {
        if let FrameEpoch::V2 { epoch, base_offset } = frame
            && base_offset <= start
        {
            holding = Some(epoch);
        }
        Ok(())
    })?;
    if holding == Some(first.epoch) {
        cache.lower_first_start(start)?;
    }
    Ok(())
}

/// Replays into `cache` the epoch of every batch of every segment, reading headers only, under
/// the append path's rule, to rebuild what the appends wrote: every epoch ≥ 0 is assigned, and
/// a legacy message clears the cache.
fn replay_appended_epochs(snapshot: &Snapshot, cache: &mut LeaderEpochFileCache) -> Result<()> {
    let list = snapshot.load();
    for handle in list.handles() {
        let Some(segment) = snapshot.pin(handle)? else {
            continue;
        };
        segment.visit_leader_epochs(&mut |frame| {
            match frame {
                FrameEpoch::V2 { epoch, base_offset } if epoch >= 0 => {
                    cache.assign(epoch, base_offset)?;
                }
                FrameEpoch::Legacy => cache.clear()?,
                FrameEpoch::V2 { .. } => {}
            }
            Ok(())
        })?;
    }
    Ok(())
}
