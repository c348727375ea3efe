//! `partlog dump FILE`: one `.log`, `.index` or `.timeindex` file as it is on disk, without
//! opening the log, as `kafka-dump-log --files FILE` reads it: every batch in file order (an
//! invalid one shown with `isvalid: false`, then stepped over by its length), and the bytes
//! after the last readable frame reported as Kafka reports them.

use std::io::Write;
use std::path::Path;

use partlog::unstable::{OpenMode, OsStorage, SegmentFileKind, Storage, parse_segment_file_name};
use partlog::{AnyBatchIter, BatchHeader};

use crate::dump::{DumpArgs, DumpError, Dumper};
use crate::{CliError, Outcome};

/// Runs `partlog dump FILE`.
pub fn run(args: &DumpArgs) -> Result<Outcome, CliError> {
    let path = &args.dir;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let parsed = parse_segment_file_name(name)
        .filter(|parsed| parsed.transient.is_none())
        .ok_or_else(|| {
            CliError::new(format!(
                "{} is not a segment file: give a log directory, or a <20-digit offset>.log, \
                 .index or .timeindex file",
                path.display()
            ))
        })?;
    if args.from.is_some() {
        return Err(CliError::new(
            "--from needs a log directory: a single file is dumped whole",
        ));
    }
    if args.txn_state {
        return Err(CliError::new(
            "--txn-state needs a log directory: a transaction's outcome is decided by its \
             marker, which may lie in another segment",
        ));
    }
    match parsed.kind {
        SegmentFileKind::Log => dump_log_file(args, path, parsed.base_offset),
        SegmentFileKind::OffsetIndex | SegmentFileKind::TimeIndex => {
            let mut out = std::io::BufWriter::new(crate::QuietStdout);
            let mut tally = crate::dump_index::IndexTally::default();
            crate::dump_index::dump_index_file(&mut out, path, &mut tally)?;
            finish_index(&mut out, &tally)
        }
        _ => Err(CliError::new(format!(
            "{} is not a .log, .index or .timeindex file",
            path.display()
        ))),
    }
}

fn finish_index(
    out: &mut impl Write,
    tally: &crate::dump_index::IndexTally,
) -> Result<Outcome, CliError> {
    writeln!(
        out,
        "index check: {} entries, {} mismatches",
        tally.entries, tally.mismatches
    )
    .and_then(|()| out.flush())
    .map_err(|e| CliError::new(format!("cannot write to standard output: {e}")))?;
    Ok(if tally.mismatches > 0 {
        Outcome::Corrupt
    } else {
        Outcome::Done
    })
}

fn dump_log_file(args: &DumpArgs, path: &Path, base: i64) -> Result<Outcome, CliError> {
    let storage = OsStorage::new();
    let file = storage.open(path, OpenMode::Read)?;
    let len = file.len()?;
    let mapped = file.map_read()?;
    let mut read = Vec::new();
    let bytes: &[u8] = match &mapped {
        Some(mapping) => mapping,
        None => {
            read.resize(usize::try_from(len).unwrap_or(0), 0);
            file.read_exact_at(&mut read, 0)?;
            &read
        }
    };
    let limit = args.max_bytes.map_or(bytes.len(), |max| {
        bytes.len().min(usize::try_from(max).unwrap_or(usize::MAX))
    });
    let mut dumper = Dumper::new(args, i64::MIN);
    // The slice already stops at --max-bytes, as Kafka's does.
    dumper.max_bytes = None;
    let mut invalid = 0usize;
    let result = (|| -> Result<usize, DumpError> {
        dumper.announce_file(path, base)?;
        let mut batches = AnyBatchIter::new(&bytes[..limit]);
        for (position, batch) in batches.by_ref() {
            match batch {
                Ok(batch) => dumper.batch(&batch, Some(position as u64))?,
                // A frame with a readable header (a CRC mismatch, bad records) is a batch Kafka
                // shows as invalid; an unreadable one ends the walk, and its bytes are counted
                // after it.
                Err(_) => {
                    if let Ok(header) = BatchHeader::parse(&bytes[position..limit]) {
                        invalid += 1;
                        dumper.invalid_batch(&header, position as u64)?;
                    }
                }
            }
        }
        // With --max-bytes, the bytes after the last whole batch are where the slice cut, and
        // Kafka reports none of them, even when the slice covers the whole file.
        let rest = if args.max_bytes.is_none() {
            limit - batches.position()
        } else {
            0
        };
        if rest > 0 {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            writeln!(
                dumper.out,
                "Found {rest} invalid bytes at the end of {name}"
            )?;
        }
        dumper.out.flush()?;
        Ok(rest)
    })();
    let trailing = match result {
        Ok(trailing) => trailing,
        Err(DumpError::Output(e)) => {
            return Err(CliError::new(format!(
                "cannot write to standard output: {e}"
            )));
        }
        Err(DumpError::Log(e)) => return Err(e.into()),
    };
    dumper.report_gaps();
    let mut outcome = if invalid > 0 || trailing > 0 {
        Outcome::Corrupt
    } else {
        Outcome::Done
    };
    if args.index {
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut out = std::io::BufWriter::new(crate::QuietStdout);
        let mut tally = crate::dump_index::IndexTally::default();
        crate::dump_index::dump_segment_indexes(&mut out, dir, base, &mut tally)?;
        if finish_index(&mut out, &tally)? == Outcome::Corrupt {
            outcome = Outcome::Corrupt;
        }
    }
    Ok(outcome)
}
