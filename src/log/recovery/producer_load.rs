//! The producer state of a log just recovered (ARCHITECTURE.md §9): the producer snapshots
//! tidied (temporary, stray and torn ones), the newest valid one loaded and the batches after it
//! replayed, with the `.txnindex` files of the segments recovery scanned (or whose index failed
//! its check, or missed an ABORT) rebuilt by that replay.

use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::segment::AbortedTxn;
use crate::storage::Storage;

use crate::log::config::LogConfig;
use crate::log::files::dir_listing::DirListing;
use crate::log::files::producer_snapshot::{
    delete_listed_torn_above, remove_listed_stray_snapshots, remove_listed_temporary_snapshots,
    retain_listed_snapshots_of_segments,
};
use crate::log::segments::snapshot::Snapshot;
use crate::log::txn::producer_state::ProducerStateManager;
use crate::log::txn::replay::{Replay, first_segment_base, replay_state};

/// Where [`load_producer_state`] starts from.
pub(in crate::log) struct LoadFrom {
    pub(in crate::log) log_start_offset: i64,
    pub(in crate::log) log_end_offset: i64,
    /// The first segment an unclean recovery scanned: its `.txnindex` and those after it are
    /// rebuilt, so the replay starts at or below it.
    pub(in crate::log) first_recovered_base: Option<i64>,
    pub(in crate::log) read_only: bool,
    pub(in crate::log) now_ms: i64,
}

/// The producer state of a log just recovered (see the [module docs](self)), the aborted
/// transactions a read-only open's replay met, and the base from which a writable open rebuilt
/// the `.txnindex` files because it found an ABORT marker none listed.
pub(in crate::log) fn load_producer_state(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    config: &LogConfig,
    snapshot: &Snapshot,
    listing: &mut DirListing,
    from: LoadFrom,
) -> Result<(ProducerStateManager, Vec<AbortedTxn>, Option<i64>)> {
    let mut snapshots = listing.snapshot_offsets();
    if !from.read_only {
        // Kafka's removeStraySnapshots, and what no rename finished: a snapshot above the log
        // end (a crash between a snapshot and a truncation, or a lost tail), or below the
        // first segment, says nothing about this log. One at or below the start stays: it may
        // be all that knows the producers whose data lies below it (ARCHITECTURE.md §9).
        let temporary = remove_listed_temporary_snapshots(&**storage, dir, listing.names())?;
        listing.forget_all(&temporary);
        let first_base = first_segment_base(snapshot, from.log_start_offset);
        let mut removed = retain_listed_snapshots_of_segments(
            &**storage,
            dir,
            &snapshots,
            first_base,
            from.log_end_offset,
        )?;
        snapshots.retain(|offset| !removed.contains(offset));
        // An unclean open: a snapshot above the first recovered segment's base may be one a roll
        // wrote that the crash caught before the flusher synced it. A torn or empty one goes
        // (the load would only have passed over it, and it would outlive the open); a whole
        // one is right about the records below it, which recovery has just kept, and stays:
        // a broker's snapshots are left alone.
        if let Some(first_recovered) = from.first_recovered_base {
            let torn = delete_listed_torn_above(&**storage, dir, &snapshots, first_recovered)?;
            snapshots.retain(|offset| !torn.contains(offset));
            removed.extend(torn);
        }
        let bases: Vec<i64> = snapshot
            .load()
            .handles()
            .iter()
            .map(|handle| handle.base_offset())
            .collect();
        let strays = remove_listed_stray_snapshots(&**storage, dir, &snapshots, &bases)?;
        snapshots.retain(|offset| !strays.contains(offset));
        removed.extend(strays);
        for offset in removed {
            listing.forget(&crate::log::files::producer_snapshot::snapshot_file_name(
                offset,
            ));
        }
    }
    // Kafka's rule: a segment whose `.txnindex` fails its sanity check is recovered, which
    // here means its index is rebuilt by the replay (with every later segment's). A read-only
    // open cannot rebuild it, and reports it.
    let scanned_from = from.first_recovered_base.unwrap_or(i64::MAX);
    let bad_txn_index = first_bad_txn_index(listing, snapshot, scanned_from)?;
    if let Some((base, error)) = &bad_txn_index {
        if from.read_only {
            return Err(error.duplicate());
        }
        log::warn!(
            "{}: the aborted-transaction index of the segment at {base} is unusable ({error}); \
             rebuilding it from the log",
            dir.display()
        );
    }
    let rebuild_txn_index_from = if from.read_only {
        None
    } else {
        match (
            from.first_recovered_base,
            bad_txn_index.map(|(base, _)| base),
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    };
    // A read-only open of a log that needs recovery cannot rebuild the `.txnindex` files of the
    // segments it scanned, which a crash may have left without their last entries (Kafka
    // creates the file lazily): its replay starts at or below the first of them, so that the
    // aborted transactions there are known in memory ([`Shared::replayed_aborted`]).
    let replay_limit = if from.read_only {
        from.first_recovered_base
    } else {
        rebuild_txn_index_from
    };
    let replay = |rebuild_txn_index_from: Option<i64>, limit: Option<i64>| Replay {
        log_start_offset: from.log_start_offset,
        log_end_offset: from.log_end_offset,
        snapshot_limit: limit.unwrap_or(from.log_end_offset),
        rebuild_txn_index_from,
        validated_from: from.first_recovered_base,
        delete_bad: !from.read_only,
        collect_aborted: from.read_only,
        high_watermark: i64::MAX,
        now_ms: from.now_ms,
        // A corrupt snapshot this load deletes stays in `listing`: no later step of the
        // open reads snapshots from it.
        listed_snapshots: Some(snapshots.clone()),
    };
    let mut loaded = replay_state(
        &**storage,
        dir,
        config,
        snapshot,
        replay(rebuild_txn_index_from, replay_limit),
    )?;
    let mut rebuilt_from = None;
    if !from.read_only
        && let Some(base) =
            super::derived::first_unlisted_abort(&loaded.0, snapshot, from.log_start_offset)?
        && rebuild_txn_index_from.is_none_or(|rebuilt| base < rebuilt)
    {
        log::warn!(
            "{}: the segment at {base} holds an ABORT marker that its .txnindex does not list \
             (the file was lost or cut); rebuilding the .txnindex files from there",
            dir.display()
        );
        loaded = replay_state(
            &**storage,
            dir,
            config,
            snapshot,
            replay(Some(base), Some(base)),
        )?;
        rebuilt_from = Some(base);
    }
    if !from.read_only && (rebuild_txn_index_from.is_some() || rebuilt_from.is_some()) {
        storage.sync_dir(dir)?;
        // The replay created `.txnindex` files: whoever reads the listing next must see them.
        *listing = DirListing::read(&**storage, dir)?;
    }
    Ok((loaded.0, loaded.1, rebuilt_from))
}

/// The first segment below `below` whose `.txnindex` fails its sanity check, with the error.
/// Only segments with a `.txnindex` file are opened.
fn first_bad_txn_index(
    listing: &DirListing,
    snapshot: &Snapshot,
    below: i64,
) -> Result<Option<(i64, Error)>> {
    let indexed = listing.txn_index_bases();
    let list = snapshot.load();
    for handle in list.handles() {
        let base = handle.base_offset();
        if base >= below || indexed.binary_search(&base).is_err() {
            continue;
        }
        let Some(segment) = snapshot.pin(handle)? else {
            continue;
        };
        match segment.txn_index_sanity_check() {
            Ok(()) => {}
            Err(error @ Error::Corrupt { .. }) => return Ok(Some((base, error))),
            Err(error) => return Err(error),
        }
    }
    Ok(None)
}
