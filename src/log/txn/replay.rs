//! The replay that rebuilds the producer state from the segments: from the newest valid producer
//! snapshot at or below a limit, every batch with a producer id up to the log end, rebuilding
//! the `.txnindex` files on the way when asked (at open, after a truncation, and at each poll of
//! a live reader).

use std::path::Path;

use crate::error::{Error, Result};
use crate::format::{AnyBatchIter, Batch, BatchHeader, EndTransactionMarker, control_record_type};
use crate::segment::{AbortedTxn, Marker, Segment};
use crate::storage::Storage;

use crate::log::config::LogConfig;
use crate::log::files::producer_snapshot::{list_snapshots, load_newest_valid_listed_snapshot};
use crate::log::segments::snapshot::Snapshot;
use crate::log::txn::producer_state::{
    BatchSummary, FinishedTxn, ProducerStateConfig, ProducerStateManager,
};

/// How much a replay reads at once.
const REPLAY_CHUNK_BYTES: usize = 1 << 20;

/// What [`replay_state`] loads and replays.
pub(in crate::log) struct Replay {
    pub(in crate::log) log_start_offset: i64,
    pub(in crate::log) log_end_offset: i64,
    /// The newest snapshot at or below this is loaded.
    pub(in crate::log) snapshot_limit: i64,
    /// The `.txnindex` of every segment from this base on is reset and rebuilt by the replay.
    pub(in crate::log) rebuild_txn_index_from: Option<i64>,
    /// Every batch of the segments from this base on was read and checked by this open's
    /// recovery scan: the replay reads only their headers.
    pub(in crate::log) validated_from: Option<i64>,
    /// Whether a corrupt snapshot is deleted (a writable log).
    pub(in crate::log) delete_bad: bool,
    /// Whether the aborted transactions the replay meets are returned (a read-only log).
    pub(in crate::log) collect_aborted: bool,
    /// The high watermark the replayed state ends under: a transaction whose marker lies at or
    /// above it stays unstable (`i64::MAX`: the replayed end, a log with one replica).
    pub(in crate::log) high_watermark: i64,
    pub(in crate::log) now_ms: i64,
    /// The snapshot offsets of a listing of the directory the caller took (ascending); `None`
    /// lists it here.
    pub(in crate::log) listed_snapshots: Option<Vec<i64>>,
}

/// The base of the log's first segment (`fallback` with none): where its records begin, the
/// log start or below it.
pub(in crate::log) fn first_segment_base(snapshot: &Snapshot, fallback: i64) -> i64 {
    snapshot
        .load()
        .handles()
        .first()
        .map_or(fallback, |handle| handle.base_offset())
}

/// Loads the newest valid snapshot at or below `replay.snapshot_limit` (and not below the first
/// segment) and replays every batch with a producer id from its offset to the log end, or every
/// batch the segments hold with none. Batches below the log start are replayed too: a producer
/// whose data lies below the start stays until it expires (KIP-360), in the live log and so in
/// a reopened one.
pub(in crate::log) fn replay_state(
    storage: &dyn Storage,
    dir: &Path,
    config: &LogConfig,
    snapshot: &Snapshot,
    replay: Replay,
) -> Result<(ProducerStateManager, Vec<AbortedTxn>)> {
    let settings = ProducerStateConfig::from_log_config(config);
    let first_base = first_segment_base(snapshot, replay.log_start_offset);
    let mut state = ProducerStateManager::new(settings, first_base);
    let limit = replay.snapshot_limit.min(replay.log_end_offset);
    let mut candidates = match replay.listed_snapshots {
        Some(listed) => listed,
        None => list_snapshots(storage, dir)?,
    };
    // One below the first segment knows nothing of the records between it and the segment.
    candidates.retain(|&offset| offset >= first_base);
    let loaded =
        load_newest_valid_listed_snapshot(storage, dir, &candidates, limit, replay.delete_bad)?;
    let replay_from = match loaded {
        Some(loaded) => {
            state.load_snapshot(loaded.snapshot, loaded.offset, replay.now_ms);
            loaded.offset
        }
        None => first_base,
    };
    let mut aborted = Vec::new();
    replay_segments(
        &mut state,
        snapshot,
        ReplayRange {
            from: replay_from,
            to: replay.log_end_offset,
            rebuild_txn_index_from: replay.rebuild_txn_index_from,
            validated_from: replay.validated_from,
            high_watermark: replay.high_watermark,
        },
        replay.collect_aborted.then_some(&mut aborted),
    )?;
    // As the live log did when its start moved there.
    state.on_log_start_incremented(replay.log_start_offset);
    Ok((state, aborted))
}

/// The batches [`replay_segments`] replays, and what it does beside.
pub(in crate::log) struct ReplayRange {
    pub(in crate::log) from: i64,
    pub(in crate::log) to: i64,
    /// The `.txnindex` of every segment from this base on is reset and rebuilt.
    pub(in crate::log) rebuild_txn_index_from: Option<i64>,
    /// The segments from this base on were checked by this open's recovery scan.
    pub(in crate::log) validated_from: Option<i64>,
    /// As [`Replay::high_watermark`].
    pub(in crate::log) high_watermark: i64,
}

/// Replays every batch with a producer id in `[range.from, range.to)` into `state`, with
/// replication rules, and moves its map end to `range.to`. The aborted transactions it ends go
/// to the `.txnindex` of their marker's segment when that index is being rebuilt, and to
/// `aborted` when given.
pub(in crate::log) fn replay_segments(
    state: &mut ProducerStateManager,
    snapshot: &Snapshot,
    range: ReplayRange,
    mut aborted: Option<&mut Vec<AbortedTxn>>,
) -> Result<()> {
    let replay_from = range.from;
    let list = snapshot.load();
    let handles = list.handles();
    for (i, handle) in handles.iter().enumerate() {
        let base = handle.base_offset();
        if base >= range.to && range.rebuild_txn_index_from.is_none_or(|from| base < from) {
            break;
        }
        let rebuild = range
            .rebuild_txn_index_from
            .is_some_and(|from| base >= from);
        // The list is in base order: the next handle's base, found in O(1) (a search from the
        // front made this walk quadratic in the segment count).
        let next_base = handles.get(i + 1).map(|h| h.base_offset());
        if next_base.is_some_and(|next| next <= replay_from) && !rebuild {
            continue;
        }
        let Some(segment) = snapshot.pin(handle)? else {
            continue;
        };
        if rebuild {
            segment.txn_index().reset()?;
        }
        let from = replay_from.max(base);
        let mut replay_batch = |header: &BatchHeader, control: Option<Marker>| -> Result<()> {
            if header.producer_id < 0
                || header.last_offset() < replay_from
                || header.base_offset >= range.to
            {
                return Ok(());
            }
            let summary = BatchSummary::from_header(header, control)?;
            let finished = state.replay(&summary)?;
            state.on_high_watermark_updated((header.last_offset() + 1).min(range.high_watermark));
            if rebuild {
                record_aborted(&segment, &finished)?;
            }
            if let Some(aborted) = aborted.as_deref_mut() {
                aborted.extend(
                    finished
                        .iter()
                        .filter(|done| done.txn.is_aborted)
                        .map(|done| AbortedTxn {
                            producer_id: done.txn.producer_id,
                            first_offset: done.txn.first_offset,
                            last_offset: done.txn.last_offset,
                            last_stable_offset: done.last_stable_offset,
                        }),
                );
            }
            Ok(())
        };
        if range
            .validated_from
            .is_some_and(|validated| base >= validated)
        {
            // Recovery's scan has just read and checked every batch here: the headers are
            // enough, and only markers are read whole.
            segment.visit_batch_headers(from, &mut replay_batch)?;
        } else {
            replay_checked_batches(&segment, from, range.to, &mut replay_batch)?;
        }
        if rebuild {
            segment.txn_index().flush()?;
        }
    }
    state.update_map_end_offset(range.to);
    state.on_high_watermark_updated(range.to.min(range.high_watermark));
    Ok(())
}

/// Feeds `visit` every v2 batch of `segment` from `from` to `end`, each read whole and its CRC
/// checked, with the marker of a COMMIT or ABORT control batch (other control batches are
/// skipped), as [`Segment::visit_batch_headers`] does for bytes already checked.
fn replay_checked_batches(
    segment: &Segment,
    from: i64,
    end: i64,
    visit: &mut dyn FnMut(&BatchHeader, Option<Marker>) -> Result<()>,
) -> Result<()> {
    let mut scratch = Vec::new();
    let mut buffer = Vec::new();
    let mut offset = from;
    while offset < end {
        let Some(read) = segment.read(offset, REPLAY_CHUNK_BYTES, None, &mut buffer)? else {
            break;
        };
        let bytes = buffer.get(..read.len).unwrap_or_default();
        for (position, batch) in AnyBatchIter::new(bytes) {
            let batch = batch.map_err(|what| Error::Corrupt {
                file: segment.log_path(),
                position: read.position + position as u64,
                what,
            })?;
            let Batch::V2(view) = batch else { continue };
            let header = *view.header();
            let control = if header.is_control() {
                match view.records(&mut scratch)?.next() {
                    Some(record) => {
                        let record = record?;
                        let kind = control_record_type(&record)?;
                        if !kind.is_transaction_marker() {
                            continue;
                        }
                        Some((kind, EndTransactionMarker::parse(&record)?))
                    }
                    None => None,
                }
            } else {
                None
            };
            visit(&header, control)?;
        }
        if read.next_offset <= offset {
            break;
        }
        offset = read.next_offset;
    }
    Ok(())
}

/// Appends the `AbortedTxn` of each aborted transaction in `finished` to `segment`'s
/// `.txnindex`.
pub(in crate::log) fn record_aborted(segment: &Segment, finished: &[FinishedTxn]) -> Result<()> {
    for done in finished.iter().filter(|done| done.txn.is_aborted) {
        segment.append_aborted_txn(AbortedTxn {
            producer_id: done.txn.producer_id,
            first_offset: done.txn.first_offset,
            last_offset: done.txn.last_offset,
            last_stable_offset: done.last_stable_offset,
        })?;
    }
    Ok(())
}
