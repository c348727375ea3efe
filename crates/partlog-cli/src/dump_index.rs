//! `partlog dump --index`: the entries of each `.index` and `.timeindex`, and a check that each
//! entry names the right batch, as kafka-dump-log does with `--index-sanity-check` and its
//! mismatch report.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use partlog::Batch;
use partlog::unstable::{
    OffsetIndex, OpenMode, OsStorage, SegmentFileKind, Storage, StorageFile, TimeIndex,
    segment_file_path,
};

/// One batch of a `.log` file, as the checks need it.
struct BatchAt {
    position: u64,
    last_offset: i64,
    max_timestamp: i64,
}

/// What the index checks found, over every segment.
#[derive(Debug, Default)]
pub struct IndexTally {
    /// Entries printed.
    pub entries: u64,
    /// Entries that name no batch, or the wrong one.
    pub mismatches: u64,
}

/// Prints the entries of the segment at `base` and checks them against its `.log`. Mismatches
/// are printed as they are found, in kafka-dump-log's words.
pub fn dump_segment_indexes(
    out: &mut impl Write,
    dir: &Path,
    base: i64,
    tally: &mut IndexTally,
) -> Result<(), crate::CliError> {
    dump_indexes(out, dir, base, tally, true, true)
}

/// Prints the entries of one `.index` or `.timeindex` file, checked against its segment's
/// `.log` beside it (`partlog dump FILE`, as kafka-dump-log --files FILE).
pub fn dump_index_file(
    out: &mut impl Write,
    path: &Path,
    tally: &mut IndexTally,
) -> Result<(), crate::CliError> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let parsed = partlog::unstable::parse_segment_file_name(name).ok_or_else(|| {
        crate::CliError::new(format!(
            "{} is not a segment file name (<20-digit offset>.log, .index or .timeindex)",
            path.display()
        ))
    })?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let offset = parsed.kind == SegmentFileKind::OffsetIndex;
    dump_indexes(out, dir, parsed.base_offset, tally, offset, !offset)
}

fn dump_indexes(
    out: &mut impl Write,
    dir: &Path,
    base: i64,
    tally: &mut IndexTally,
    offset_index: bool,
    time_index: bool,
) -> Result<(), crate::CliError> {
    let storage: Arc<dyn Storage> = Arc::new(OsStorage::new());
    let batches = walk_log(
        &storage,
        &segment_file_path(dir, base, SegmentFileKind::Log),
    )?;
    let write =
        |e: std::io::Error| crate::CliError::new(format!("cannot write to standard output: {e}"));

    if offset_index {
        let index_path = segment_file_path(dir, base, SegmentFileKind::OffsetIndex);
        writeln!(out, "Dumping {}", index_path.display()).map_err(write)?;
        if storage.exists(&index_path)? {
            let index = OffsetIndex::open(
                &storage,
                &index_path,
                base,
                max_bytes(&storage, &index_path)?,
                false,
            )?;
            let mut unused = 0usize;
            for n in 0..index.entries() {
                let entry = index.entry(n)?;
                // A preallocated, still active index ends in zeros: slots, not entries.
                if n > 0 && entry.offset == base && entry.position == 0 {
                    unused += 1;
                    continue;
                }
                tally.entries += 1;
                writeln!(out, "offset: {} position: {}", entry.offset, entry.position)
                    .map_err(write)?;
                let position = u64::from(entry.position);
                match batches.binary_search_by_key(&position, |b| b.position) {
                    Ok(at) if batches[at].last_offset == entry.offset => {}
                    Ok(at) => {
                        tally.mismatches += 1;
                        writeln!(
                            out,
                            "Mismatches in :{}\n  Index offset: {}, log offset: {}",
                            index_path.display(),
                            entry.offset,
                            batches[at].last_offset
                        )
                        .map_err(write)?;
                    }
                    Err(_) => {
                        tally.mismatches += 1;
                        writeln!(
                            out,
                            "Mismatches in :{}\n  Index offset: {}, no batch starts at position {position}",
                            index_path.display(),
                            entry.offset
                        )
                        .map_err(write)?;
                    }
                }
            }
            if unused > 0 {
                writeln!(out, "({unused} unused slots at the end)").map_err(write)?;
            }
        } else {
            tally.mismatches += 1;
            writeln!(out, "missing: {}", index_path.display()).map_err(write)?;
        }
    }
    if time_index {
        let time_path = segment_file_path(dir, base, SegmentFileKind::TimeIndex);
        writeln!(out, "Dumping {}", time_path.display()).map_err(write)?;
        if storage.exists(&time_path)? {
            let index = TimeIndex::open(
                &storage,
                &time_path,
                base,
                max_bytes(&storage, &time_path)?,
                false,
            )?;
            let mut unused = 0usize;
            let mut previous: Option<i64> = None;
            for n in 0..index.entries() {
                let entry = index.entry(n)?;
                if n > 0 && entry.timestamp == 0 && entry.offset == base {
                    unused += 1;
                    continue;
                }
                tally.entries += 1;
                writeln!(
                    out,
                    "timestamp: {} offset: {}",
                    entry.timestamp, entry.offset
                )
                .map_err(write)?;
                // The entry names the batch whose last offset it holds, and that batch's largest
                // timestamp; entries only grow.
                let named = batches
                    .binary_search_by_key(&entry.offset, |b| b.last_offset)
                    .ok()
                    .map(|at| batches[at].max_timestamp);
                if named != Some(entry.timestamp) {
                    tally.mismatches += 1;
                    writeln!(
                        out,
                        "Found timestamp mismatch in :{}\n  Index timestamp: {}, log timestamp: {}",
                        time_path.display(),
                        entry.timestamp,
                        named.map_or_else(
                            || "no batch ends at that offset".to_owned(),
                            |t| t.to_string()
                        )
                    )
                    .map_err(write)?;
                }
                if previous.is_some_and(|p| entry.timestamp < p) {
                    tally.mismatches += 1;
                    writeln!(
                        out,
                        "Found out of order timestamp in :{}\n  Index timestamp: {}, previous: {}",
                        time_path.display(),
                        entry.timestamp,
                        previous.unwrap_or_default()
                    )
                    .map_err(write)?;
                }
                previous = Some(entry.timestamp);
            }
            if unused > 0 {
                writeln!(out, "({unused} unused slots at the end)").map_err(write)?;
            }
        } else {
            tally.mismatches += 1;
            writeln!(out, "missing: {}", time_path.display()).map_err(write)?;
        }
    }
    Ok(())
}

/// The index's own size (at least Kafka's default), so that every entry in it is read.
fn max_bytes(storage: &Arc<dyn Storage>, path: &Path) -> Result<u32, crate::CliError> {
    let len = storage.metadata(path)?.len;
    Ok(u32::try_from(len).unwrap_or(u32::MAX).max(10 * 1024 * 1024))
}

/// Every complete, valid batch of a `.log` file, in order, up to the first that is not.
fn walk_log(storage: &Arc<dyn Storage>, path: &Path) -> Result<Vec<BatchAt>, crate::CliError> {
    let file = storage.open(path, OpenMode::Read)?;
    let len = file.len()?;
    let mut batches = Vec::new();
    let mut position = 0u64;
    let mut head = [0u8; 12];
    let mut bytes = Vec::new();
    while position + 12 <= len {
        read_exact(&*file, &mut head, position)?;
        let length = i32::from_be_bytes([head[8], head[9], head[10], head[11]]);
        let Ok(length) = u64::try_from(length) else {
            break;
        };
        let total = 12 + length;
        if length == 0 || position + total > len {
            break;
        }
        bytes.resize(usize::try_from(total).unwrap_or(0), 0);
        read_exact(&*file, &mut bytes, position)?;
        let Ok(batch) = Batch::new(&bytes) else {
            break;
        };
        batches.push(BatchAt {
            position,
            last_offset: batch.last_offset(),
            max_timestamp: batch.max_timestamp(),
        });
        position += total;
    }
    Ok(batches)
}

fn read_exact(file: &dyn StorageFile, buf: &mut [u8], at: u64) -> Result<(), crate::CliError> {
    file.read_exact_at(buf, at)?;
    Ok(())
}
