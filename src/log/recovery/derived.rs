//! Derived files a writable open finds missing: a sealed segment's `.index` or `.timeindex`,
//! and the `.txnindex` entry of an aborted transaction (ARCHITECTURE.md §7).
//!
//! Both are derived from the `.log`, and an open after a clean shutdown reads no sealed segment,
//! so without these checks a lost file would stay lost: a missing index until a reader happens
//! to open its segment, a missing `.txnindex` for good, with `read_committed` reads returning
//! the aborted records. The checks cost nothing when nothing is missing: the first looks at the
//! directory listing the open already holds, the second reads only the batches between each
//! transactional producer's last data batch and its marker.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::format::{AnyBatchIter, Batch, ControlRecordType, control_record_type};
use crate::segment::{Segment, SegmentFileKind, segment_file_path};

use crate::log::files::dir_listing::DirListing;
use crate::log::segments::snapshot::Snapshot;
use crate::log::txn::producer_state::ProducerStateManager;

/// How much one read of the last-transaction check asks for: the batches between a producer's
/// last data batch and its marker are usually few.
const MARKER_SEARCH_CHUNK_BYTES: usize = 64 * 1024;

/// How many segments a search for one producer's marker reads at most: its marker follows its
/// last data batch closely, but compaction may have removed it.
const MARKER_SEARCH_SEGMENTS: usize = 2;

/// Rebuilds, from their `.log`, the `.index` and `.timeindex` of every segment the open left
/// closed whose file `listing` lacks (Kafka's loader does the same), and returns the files
/// rebuilt. Opening such a segment as a sealed one rebuilds them ([`Segment::open`]); an
/// invalid byte it meets then fails the open with `Error::Corrupt`.
pub(in crate::log) fn rebuild_missing_indexes(
    dir: &Path,
    snapshot: &Snapshot,
    listing: &DirListing,
) -> Result<Vec<PathBuf>> {
    let names: HashSet<&str> = listing.names().iter().map(String::as_str).collect();
    let list = snapshot.load();
    let mut rebuilt = Vec::new();
    for handle in list.handles() {
        // An open segment's indexes were checked, or rebuilt, when it opened.
        if handle.if_open().is_some() {
            continue;
        }
        let base = handle.base_offset();
        let missing: Vec<PathBuf> = [SegmentFileKind::OffsetIndex, SegmentFileKind::TimeIndex]
            .into_iter()
            .map(|kind| segment_file_path(dir, base, kind))
            .filter(|path| {
                path.file_name()
                    .and_then(|name| name.to_str())
                    .is_some_and(|name| !names.contains(name))
            })
            .collect();
        if missing.is_empty() {
            continue;
        }
        log::warn!(
            "{}: {} missing; rebuilding it from the log",
            dir.display(),
            missing
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" and ")
        );
        if snapshot.pin(handle)?.is_some() {
            rebuilt.extend(missing);
        }
    }
    Ok(rebuilt)
}

/// A transactional producer whose last transaction the loaded state says has ended.
struct Ended {
    producer_id: i64,
    /// The last offset of its last data batch: its marker lies after it.
    last_data: i64,
}

/// The base of the first segment holding an ABORT marker that ends a producer's last
/// transaction and that no `.txnindex` entry lists, if any: its `.txnindex` was lost or cut.
///
/// The producer state loaded at open knows, for each producer, its last data batch and whether
/// its transaction is still open; a producer whose last transaction has ended has its marker
/// after that batch. Only those markers are looked for (an older abort's lost entry is what
/// `verify` finds and a repair rebuilds): the search reads forward from each last data batch to
/// the producer's marker, the ranges of several producers read once.
pub(in crate::log) fn first_unlisted_abort(
    state: &ProducerStateManager,
    snapshot: &Snapshot,
    log_start: i64,
) -> Result<Option<i64>> {
    let mut ended: Vec<Ended> = state
        .entries_unordered()
        .filter(|(_, entry)| {
            entry.coordinator_epoch >= 0 && entry.current_txn_first_offset.is_none()
        })
        .map(|(producer_id, entry)| Ended {
            producer_id,
            last_data: entry.last_data_offset(),
        })
        .filter(|ended| ended.last_data >= log_start)
        .collect();
    if ended.is_empty() {
        return Ok(None);
    }
    ended.sort_by_key(|e| e.last_data);
    let by_producer: HashMap<i64, usize> = ended
        .iter()
        .enumerate()
        .map(|(i, e)| (e.producer_id, i))
        .collect();
    let mut resolved = vec![false; ended.len()];
    let mut first_unlisted: Option<i64> = None;
    // Offsets below this have been read.
    let mut read_to = i64::MIN;
    for i in 0..ended.len() {
        if resolved[i] {
            continue;
        }
        let from = (ended[i].last_data + 1).max(read_to);
        let mut search = MarkerSearch {
            ended: &ended,
            by_producer: &by_producer,
            resolved: &mut resolved,
            first_unlisted: &mut first_unlisted,
        };
        read_to = search.read_until_resolved(snapshot, from, i)?;
    }
    Ok(first_unlisted)
}

/// One forward read of the marker search.
struct MarkerSearch<'a> {
    ended: &'a [Ended],
    by_producer: &'a HashMap<i64, usize>,
    resolved: &'a mut [bool],
    first_unlisted: &'a mut Option<i64>,
}

impl MarkerSearch<'_> {
    /// Reads forward from offset `from` until the marker of `ended[target]` is found (or
    /// [`MARKER_SEARCH_SEGMENTS`] segments were read), resolving every producer whose marker it
    /// meets on the way. Returns the offset it read up to.
    fn read_until_resolved(
        &mut self,
        snapshot: &Snapshot,
        from: i64,
        target: usize,
    ) -> Result<i64> {
        let list = snapshot.load();
        let handles = list.handles();
        let first = list.floor_index(from);
        let mut offset = from;
        let mut buffer = Vec::new();
        let mut scratch = Vec::new();
        for handle in handles.iter().skip(first).take(MARKER_SEARCH_SEGMENTS) {
            let Some(segment) = snapshot.pin(handle)? else {
                continue;
            };
            offset = offset.max(segment.base_offset());
            while let Some(read) =
                segment.read(offset, MARKER_SEARCH_CHUNK_BYTES, None, &mut buffer)?
            {
                let bytes = buffer.get(..read.len).unwrap_or_default();
                for (_, batch) in AnyBatchIter::new(bytes) {
                    let Ok(Batch::V2(view)) = batch else { continue };
                    let header = *view.header();
                    if header.is_control() && header.producer_id >= 0 {
                        let kind = view
                            .records(&mut scratch)?
                            .next()
                            .transpose()?
                            .map(|record| control_record_type(&record))
                            .transpose()?;
                        if let Some(kind) = kind.filter(|kind| kind.is_transaction_marker()) {
                            self.meet_marker(
                                &segment,
                                header.producer_id,
                                header.base_offset,
                                kind,
                            )?;
                        }
                    }
                    if self.resolved[target] {
                        return Ok(header.base_offset + 1);
                    }
                }
                if read.next_offset <= offset {
                    break;
                }
                offset = read.next_offset;
            }
        }
        // Not found where it should be (compaction may have removed it): give up on it.
        self.resolved[target] = true;
        Ok(offset)
    }

    /// A COMMIT or ABORT marker of `producer_id` at `offset` in `segment`: it ends that
    /// producer's last transaction if it lies after its last data batch; an ABORT must then be
    /// listed in the segment's `.txnindex`.
    fn meet_marker(
        &mut self,
        segment: &Segment,
        producer_id: i64,
        offset: i64,
        kind: ControlRecordType,
    ) -> Result<()> {
        let Some(&i) = self.by_producer.get(&producer_id) else {
            return Ok(());
        };
        if self.resolved[i] || self.ended[i].last_data >= offset {
            return Ok(());
        }
        self.resolved[i] = true;
        if kind != ControlRecordType::Abort {
            return Ok(());
        }
        let listed = segment
            .txn_index()
            .all()?
            .iter()
            .any(|txn| txn.producer_id == producer_id && txn.last_offset == offset);
        if !listed {
            let base = segment.base_offset();
            *self.first_unlisted = Some(self.first_unlisted.map_or(base, |b| b.min(base)));
        }
        Ok(())
    }
}

/// The producer state of a log just recovered, and the aborted transactions a read-only open's
/// replay met ([`load_producer_state`](super::producer_load::load_producer_state)); then, for a
/// writable open, the derived files found missing are rebuilt, and `recovered.report` says what
/// was.
#[allow(
    clippy::too_many_arguments,
    reason = "one call site, in the open; the parts are all distinct"
)]
pub(in crate::log) fn load_derived_state(
    storage: &std::sync::Arc<dyn crate::storage::Storage>,
    dir: &Path,
    config: &crate::log::LogConfig,
    snapshot: &Snapshot,
    listing: &mut DirListing,
    recovered: &mut super::Recovered,
    read_only: bool,
    now_ms: i64,
) -> Result<(ProducerStateManager, Vec<crate::segment::AbortedTxn>)> {
    let (state, aborted, txn_indexes_rebuilt_from) = super::producer_load::load_producer_state(
        storage,
        dir,
        config,
        snapshot,
        listing,
        super::producer_load::LoadFrom {
            log_start_offset: recovered.log_start_offset,
            log_end_offset: recovered.active.next_offset(),
            first_recovered_base: recovered.first_recovered_base,
            read_only,
            now_ms,
        },
    )?;
    recovered.report.rebuilt_txn_indexes_from = txn_indexes_rebuilt_from;
    if !read_only {
        recovered.report.rebuilt_indexes = rebuild_missing_indexes(dir, snapshot, listing)?;
    }
    Ok((state, aborted))
}
