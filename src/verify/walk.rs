//! Phase 1 of [`verify_dir`](super::verify_dir): the walk. It lists the segments and reads
//! every batch of each one (frame, CRC, offsets, every record), feeding each batch to the index
//! checks, and notes what is wrong without grading it.
//!
//! Grading waits for the whole walk because how serious a problem is depends on the recovery
//! point and on whether the last close was clean, known only once the last segment is walked.

use std::path::Path;
use std::sync::Arc;

use crate::error::{Corruption, Error, Result};
use crate::format::{
    Batch, BatchHeader, BatchView, ControlRecordType, HEADER_SIZE_UP_TO_MAGIC, TimestampType,
    control_record_type, peek_batch_frame,
};
use crate::log::LogConfig;
use crate::segment::{
    SegmentFileKind, SegmentFileName, TransientSuffix, parse_segment_file_name, segment_file_path,
};
use crate::storage::{OpenMode, Storage, StorageFile};

use super::index_check::{IndexProblem, OffsetIndexCheck, TimeIndexCheck};
use super::{Finding, SegmentSummary, Severity};

/// How many bytes of a `.log` file are read at once while walking it.
const READ_CHUNK: usize = 1 << 20;

/// The segments [`list_segments`] found.
#[derive(Debug)]
pub(super) struct SegmentListing {
    /// The base offsets of the `.log` files, in order.
    pub(super) bases: Vec<i64>,
    /// The bases whose `<base>.txnindex.swap` an interrupted compaction swap left after its
    /// `.log` was swapped in (no `<base>.log.swap` is left): the next writable open renames it
    /// to `<base>.txnindex` (`complete_swaps`), so it is the segment's index to check. Sorted.
    pub(super) txn_index_swaps: Vec<i64>,
}

/// Lists the segments' base offsets, in order, and notes leftover files.
pub(super) fn list_segments(
    storage: &dyn Storage,
    dir: &Path,
    findings: &mut Vec<Finding>,
) -> Result<SegmentListing> {
    let mut names = storage.list(dir)?;
    names.sort();
    let parsed: Vec<(&String, SegmentFileName)> = names
        .iter()
        .filter_map(|name| Some((name, parse_segment_file_name(name)?)))
        .collect();
    let log_swaps: Vec<i64> = parsed
        .iter()
        .filter(|(_, p)| {
            p.transient == Some(TransientSuffix::Swap) && p.kind == SegmentFileKind::Log
        })
        .map(|(_, p)| p.base_offset)
        .collect();
    let mut bases = Vec::new();
    let mut indexes = Vec::new();
    let mut txn_index_swaps = Vec::new();
    for &(name, parsed) in &parsed {
        let what = match (parsed.transient, parsed.kind) {
            (None, SegmentFileKind::Log) => {
                bases.push(parsed.base_offset);
                continue;
            }
            (None, _) => {
                indexes.push((name, parsed.base_offset));
                continue;
            }
            (Some(TransientSuffix::Deleted), _) => {
                "a leftover of an interrupted deletion; the next writable open removes it"
            }
            (Some(TransientSuffix::Cleaned), _) => {
                "a leftover of an interrupted compaction; the next writable open removes it"
            }
            (Some(TransientSuffix::Swap), SegmentFileKind::Log) => {
                "an interrupted compaction swap: the next writable open completes it, replacing \
                 the segments it covers (a read-only open refuses the log until then); this \
                 check walks the segments as they are"
            }
            (Some(TransientSuffix::Swap), SegmentFileKind::TxnIndex)
                if log_swaps.binary_search(&parsed.base_offset).is_err() =>
            {
                txn_index_swaps.push(parsed.base_offset);
                "the compacted segment's aborted-transaction index, left by a compaction swap \
                 interrupted after its .log was renamed in: the next writable open renames it \
                 to .txnindex, and this check reads it as the segment's .txnindex"
            }
            (Some(TransientSuffix::Swap), SegmentFileKind::TxnIndex) => {
                "the compacted segment's aborted-transaction index: the next writable open \
                 renames it in with its .log.swap"
            }
            (Some(TransientSuffix::Swap), _) => {
                "a leftover of an interrupted compaction swap; the next writable open removes it"
            }
        };
        findings.push(Finding {
            severity: Severity::Note,
            file: dir.join(name),
            position: None,
            what: what.into(),
        });
    }
    bases.sort_unstable();
    txn_index_swaps.sort_unstable();
    for (name, base) in indexes {
        if bases.binary_search(&base).is_err() {
            findings.push(Finding {
                severity: Severity::Note,
                file: dir.join(name),
                position: None,
                what: "an index file without its .log; the next writable open removes it".into(),
            });
        }
    }
    Ok(SegmentListing {
        bases,
        txn_index_swaps,
    })
}

/// The first bytes of a segment that are not a valid batch.
#[derive(Debug)]
pub(super) struct InvalidAt {
    pub(super) position: u64,
    pub(super) what: Corruption,
    /// A whole batch whose CRC is right but whose header values fail a check: no torn write
    /// leaves one (recovery grades it so too).
    pub(super) crc_right: bool,
}

impl InvalidAt {
    /// Invalid bytes at `position`; `batch` is the whole batch there when it framed, which
    /// tells whether its CRC is right.
    fn new(position: u64, what: Corruption, batch: Option<&[u8]>) -> InvalidAt {
        let crc_right = matches!(what, Corruption::BadHeader(_))
            && batch.is_some_and(crate::format::frame_crc_holds);
        InvalidAt {
            position,
            what,
            crc_right,
        }
    }
}

/// An aborted transaction whose data and ABORT marker the walk read: its marker's segment must
/// have a `.txnindex` entry for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct AbortSeen {
    pub(super) producer_id: i64,
    /// The offset of the transaction's first batch the walk read.
    pub(super) first_offset: i64,
    /// The offset of the ABORT marker.
    pub(super) marker_offset: i64,
}

/// What the walk tracks across segments to know which ABORT markers need a `.txnindex`
/// entry: each producer's open transaction (its first offset), from its transactional data
/// batches. A marker whose transaction's data the walk never read (deleted by retention,
/// removed by compaction) needs none that the walk can vouch for.
#[derive(Debug, Default)]
pub(super) struct TxnTracker {
    open: std::collections::HashMap<i64, i64>,
}

/// What walking one segment found, before grading.
#[derive(Debug)]
pub(super) struct SegmentWalk {
    pub(super) summary: SegmentSummary,
    /// The first bytes that are not a valid batch (the walk stops there).
    pub(super) invalid: Option<InvalidAt>,
    /// Batches whose CRC holds but whose records do not decode or break an invariant.
    pub(super) content_problems: Vec<(u64, String)>,
    pub(super) index_problems: Vec<IndexProblem>,
    /// A sealed segment's time index should end with the segment's largest timestamp.
    pub(super) final_time_entry_note: Option<Finding>,
    /// Notes that need no grading.
    pub(super) notes: Vec<Finding>,
    /// The ABORT markers of the segment's valid batches: offset to producer id.
    pub(super) abort_markers: std::collections::HashMap<i64, i64>,
    /// The aborted transactions whose marker lies in the segment and whose data the walk read.
    pub(super) aborts_seen: Vec<AbortSeen>,
}

/// A batch as the index checks need it.
#[derive(Debug, Clone, Copy)]
pub(super) struct BatchAt {
    pub(super) position: u64,
    pub(super) last_offset: i64,
    pub(super) max_timestamp: i64,
}

pub(super) fn walk_segment(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    base: i64,
    config: &LogConfig,
    mapping_allowed: bool,
    txns: &mut TxnTracker,
) -> Result<SegmentWalk> {
    let log_path = segment_file_path(dir, base, SegmentFileKind::Log);
    let file = storage.open(&log_path, OpenMode::Read)?;
    let log_bytes = file.len()?;
    let mut walk = SegmentWalk {
        summary: SegmentSummary {
            base_offset: base,
            log_path: log_path.clone(),
            log_bytes,
            valid_bytes: 0,
            batches: 0,
            records: 0,
            next_offset: base,
            max_timestamp: None,
            offset_index_entries: None,
            time_index_entries: None,
        },
        invalid: None,
        content_problems: Vec::new(),
        index_problems: Vec::new(),
        final_time_entry_note: None,
        notes: Vec::new(),
        abort_markers: std::collections::HashMap::new(),
        aborts_seen: Vec::new(),
    };
    let mut offset_check =
        OffsetIndexCheck::open(storage, dir, base, config, mapping_allowed, log_bytes)?;
    let mut time_check = TimeIndexCheck::open(storage, dir, base, config, mapping_allowed)?;
    walk.summary.offset_index_entries = offset_check.as_ref().map(|c| c.0.entries.len());
    walk.summary.time_index_entries = time_check.as_ref().map(|c| c.0.entries.len());
    walk.notes.extend(missing_index_notes(
        dir,
        base,
        offset_check.is_some(),
        time_check.is_some(),
    ));

    let mut reader = ChunkReader::new(file, log_bytes);
    let mut scratch = Vec::new();
    let mut position = 0u64;
    let mut running_max: Option<i64> = None;
    while position < log_bytes {
        let expected_next = walk.summary.next_offset;
        let bytes = match next_batch(&mut reader, position, expected_next, base)? {
            Next::Batch(bytes) => bytes,
            Next::Invalid(what) => {
                walk.invalid = Some(InvalidAt::new(position, what, None));
                break;
            }
        };
        // A v2 batch (CRC-32C) or a legacy magic 0/1 message (CRC-32), which a log Kafka
        // wrote before 0.11 may hold: each is checked by its own rules.
        // A last offset of i64::MAX leaves no next offset (the segment walker refuses it too).
        let batch = match Batch::new(bytes).and_then(|batch| {
            if batch.last_offset() == i64::MAX {
                Err(Corruption::BadHeader(
                    "the last offset is i64::MAX: no offset can follow it",
                ))
            } else {
                Ok(batch)
            }
        }) {
            Ok(batch) => batch,
            Err(what) => {
                walk.invalid = Some(InvalidAt::new(position, what, Some(bytes)));
                break;
            }
        };
        let records = match check_records(&batch, expected_next, &mut scratch) {
            Ok(records) => records,
            Err(RecordsProblem::Corrupt(what)) => {
                walk.content_problems.push((position, what));
                0
            }
            Err(RecordsProblem::Unreadable(what)) => {
                walk.notes.push(Finding {
                    severity: Severity::Note,
                    file: log_path.clone(),
                    position: Some(position),
                    what: format!("records not checked: {what}"),
                });
                0
            }
        };
        if let Some(view) = batch.as_v2() {
            txns.see(view, &mut walk, &mut scratch);
        }
        let max_timestamp = batch.max_timestamp();
        running_max = Some(running_max.map_or(max_timestamp, |m| m.max(max_timestamp)));
        let at = BatchAt {
            position,
            last_offset: batch.last_offset(),
            max_timestamp,
        };
        if let Some(check) = offset_check.as_mut() {
            check.see_batch(at);
        }
        if let Some(check) = time_check.as_mut() {
            check.see_batch(at);
        }
        position += batch.total_size() as u64;
        walk.summary.batches += 1;
        walk.summary.records += match batch.header() {
            Some(header) => u64::try_from(header.records_count).unwrap_or(0),
            // A legacy message states no count: its records are counted as they decode.
            None => records,
        };
        walk.summary.next_offset = batch.next_offset();
        walk.summary.valid_bytes = position;
    }
    walk.summary.max_timestamp = running_max;
    // Entries past invalid bytes cannot be checked: the invalid bytes are the finding.
    let walked_to_end = walk.invalid.is_none();
    if let Some(check) = offset_check {
        walk.index_problems
            .extend(check.finish(walk.summary.valid_bytes, walked_to_end));
    }
    if let Some(check) = time_check {
        let (problems, last_entry) = check.finish(walked_to_end);
        walk.index_problems.extend(problems);
        // At roll and at close the final time-index entry is written (FORMAT.md §4), so a
        // sealed segment's index ends with its largest timestamp. Missing, lookups still work
        // (they scan on from the last entry), so this is a note.
        if let Some(max) = running_max.filter(|&m| m >= 0)
            && last_entry.is_none_or(|e| e.timestamp < max)
        {
            walk.final_time_entry_note = Some(Finding {
                severity: Severity::Note,
                file: segment_file_path(dir, base, SegmentFileKind::TimeIndex),
                position: None,
                what: format!(
                    "the last entry is not the segment's largest timestamp {max}: the final \
                     entry written at roll or close is missing"
                ),
            });
        }
    }
    Ok(walk)
}

impl TxnTracker {
    /// Notes a valid v2 batch: a transactional data batch opens its producer's transaction, an
    /// ABORT or COMMIT marker ends it (and an ABORT is noted in the walk).
    fn see(&mut self, view: &BatchView<'_>, walk: &mut SegmentWalk, scratch: &mut Vec<u8>) {
        let header = view.header();
        if header.producer_id < 0 || !header.is_transactional() {
            return;
        }
        if !header.is_control() {
            self.open
                .entry(header.producer_id)
                .or_insert(header.base_offset);
            return;
        }
        let kind = view
            .records(scratch)
            .ok()
            .and_then(|mut records| records.next())
            .and_then(|record| record.ok())
            .and_then(|record| control_record_type(&record).ok());
        let is_abort = match kind {
            Some(ControlRecordType::Abort) => true,
            Some(ControlRecordType::Commit) => false,
            _ => return,
        };
        let marker_offset = header.base_offset;
        let opened = self.open.remove(&header.producer_id);
        if is_abort {
            walk.abort_markers.insert(marker_offset, header.producer_id);
            if let Some(first_offset) = opened {
                walk.aborts_seen.push(AbortSeen {
                    producer_id: header.producer_id,
                    first_offset,
                    marker_offset,
                });
            }
        }
    }
}

/// A note for each index file of the segment at `base` that is missing.
fn missing_index_notes(
    dir: &Path,
    base: i64,
    offset_index: bool,
    time_index: bool,
) -> impl Iterator<Item = Finding> {
    [
        (SegmentFileKind::OffsetIndex, offset_index),
        (SegmentFileKind::TimeIndex, time_index),
    ]
    .into_iter()
    .filter(|(_, present)| !present)
    .map(move |(kind, _)| Finding {
        severity: Severity::Note,
        file: segment_file_path(dir, base, kind),
        position: None,
        what: "missing; the next writable open rebuilds it from the log (a read-only open \
               cannot)"
            .into(),
    })
}

/// What the walk found at a position.
enum Next<'a> {
    Batch(&'a [u8]),
    Invalid(Corruption),
}

/// Reads the batch at `position`: its frame, its whole bytes, and its offsets against what
/// came before (`expected_next`) and the segment's 32-bit relative range.
///
/// A legacy message's frame holds its own offset where a v2 batch holds its base offset; for
/// a compressed wrapper that is its last offset, so the order check here is weaker for it, and
/// [`check_records`] checks its first record against `expected_next` once decompressed.
fn next_batch<'r>(
    reader: &'r mut ChunkReader,
    position: u64,
    expected_next: i64,
    base: i64,
) -> Result<Next<'r>> {
    let available = reader.len - position;
    let head = reader.bytes(position, HEADER_SIZE_UP_TO_MAGIC)?;
    let frame = match peek_batch_frame(head) {
        Ok(Some(frame)) => frame,
        Ok(None) => {
            return Ok(Next::Invalid(Corruption::Truncated {
                needed: HEADER_SIZE_UP_TO_MAGIC as u64,
                available,
            }));
        }
        Err(what) => return Ok(Next::Invalid(what)),
    };
    let size = frame.total_size() as u64;
    if size > available {
        return Ok(Next::Invalid(Corruption::Truncated {
            needed: size,
            available,
        }));
    }
    if frame.base_offset < expected_next {
        return Ok(Next::Invalid(Corruption::OffsetOrder {
            offset: frame.base_offset,
            bound: expected_next,
        }));
    }
    let bytes = reader.bytes(position, frame.total_size())?;
    let last_offset = if frame.is_legacy() {
        Some(frame.base_offset)
    } else {
        BatchHeader::parse(bytes)
            .ok()
            .map(|header| header.last_offset())
    };
    if let Some(last_offset) = last_offset
        && last_offset.saturating_sub(base) > i64::from(i32::MAX)
    {
        return Ok(Next::Invalid(Corruption::OffsetOrder {
            offset: last_offset,
            bound: base.saturating_add(i64::from(i32::MAX)),
        }));
    }
    Ok(Next::Batch(bytes))
}

enum RecordsProblem {
    /// The records are wrong.
    Corrupt(String),
    /// The records cannot be read by this build (a codec it lacks).
    Unreadable(String),
}

/// Decodes every record of a batch whose CRC held, and checks each record's offset against the
/// batch and, under CreateTime, a v2 record's timestamp against the batch's `maxTimestamp`.
/// Returns how many records it decoded.
///
/// A v2 record's offset must lie in `[baseOffset, lastOffset]`. A legacy message states only
/// its last offset, so its records must lie in `[expected_next, last offset]`: above the end of
/// the batch before, which for a compressed wrapper is checked only here. Legacy timestamps are
/// not compared with the wrapper's: Kafka never checked them against each other either.
fn check_records(
    batch: &Batch<'_>,
    expected_next: i64,
    scratch: &mut Vec<u8>,
) -> Result<u64, RecordsProblem> {
    let records = match batch.records(scratch) {
        Ok(records) => records,
        Err(error @ (Error::UnsupportedCompression { .. } | Error::Unsupported { .. })) => {
            return Err(RecordsProblem::Unreadable(error.to_string()));
        }
        Err(error) => return Err(RecordsProblem::Corrupt(error.to_string())),
    };
    let (first_allowed, last_allowed) = match batch.header() {
        Some(header) => (header.base_offset, header.last_offset()),
        None => (expected_next, batch.last_offset()),
    };
    let timestamp_bound = batch.header().and_then(|header| {
        (header.timestamp_type() == TimestampType::CreateTime && !header.is_control())
            .then_some(header.max_timestamp)
    });
    let mut previous: Option<i64> = None;
    let mut count = 0u64;
    for record in records {
        let record = record.map_err(|e| RecordsProblem::Corrupt(e.to_string()))?;
        if record.offset < first_allowed
            || record.offset > last_allowed
            || previous.is_some_and(|p| record.offset <= p)
        {
            return Err(RecordsProblem::Corrupt(format!(
                "record offset {} is outside its batch [{first_allowed}, {last_allowed}] or not \
                 above the record before",
                record.offset,
            )));
        }
        if let Some(max_timestamp) = timestamp_bound
            && record.timestamp > max_timestamp
        {
            return Err(RecordsProblem::Corrupt(format!(
                "record {} has timestamp {}, above the batch's maxTimestamp {max_timestamp}",
                record.offset, record.timestamp
            )));
        }
        previous = Some(record.offset);
        count += 1;
    }
    Ok(count)
}

/// Reads a file forward in large chunks, so that walking small batches costs few reads.
struct ChunkReader {
    file: Arc<dyn StorageFile>,
    len: u64,
    buf: Vec<u8>,
    buf_start: u64,
}

impl ChunkReader {
    fn new(file: Arc<dyn StorageFile>, len: u64) -> Self {
        ChunkReader {
            file,
            len,
            buf: Vec::new(),
            buf_start: 0,
        }
    }

    /// Up to `n` bytes at `position` (fewer only at the end of the file).
    fn bytes(&mut self, position: u64, n: usize) -> Result<&[u8]> {
        let want = (n as u64).min(self.len.saturating_sub(position));
        let buf_end = self.buf_start + self.buf.len() as u64;
        if position < self.buf_start || position + want > buf_end {
            let chunk = want.max(READ_CHUNK as u64).min(self.len - position);
            self.buf
                .resize(usize::try_from(chunk).unwrap_or(usize::MAX), 0);
            self.file.read_exact_at(&mut self.buf, position)?;
            self.buf_start = position;
        }
        let from = usize::try_from(position - self.buf_start).unwrap_or(usize::MAX);
        let to = from.saturating_add(usize::try_from(want).unwrap_or(usize::MAX));
        self.buf
            .get(from..to)
            .ok_or_else(|| Error::InvalidArgument {
                why: "a read past the buffered bytes".into(),
            })
    }
}
