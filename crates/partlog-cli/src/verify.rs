//! `partlog verify DIR`: every batch and index entry checked, nothing written.

use std::path::PathBuf;

use clap::Args;
use partlog::{
    CleanupPolicy, LogConfig, RecoveryMode, Severity, VerifyReport, repair_dir, verify_dir,
};

use crate::{CliError, Outcome};

pub const EXAMPLES: &str = "\
Examples:
  partlog verify /tmp/orders-0 && echo sound
  partlog verify /tmp/users-0 --cleanup-policy compact   # offset gaps are legal in a compacted log
  partlog verify /tmp/orders-0 --repair                    # fix what a crash or a bad index left

Checks every batch of every segment (frame, CRC-32C, offsets, every record decoded; a legacy
magic 0 or 1 message, as Kafka wrote before 0.11, by its CRC-32 and its inner messages) and every
.index and .timeindex entry against the batch it names, like Kafka's DumpLogSegments, and says
what it found. It never writes: the log may be checked after a crash, before anything opens it.

Exit status: 0 when the log is sound, and also when it holds only what a crash normally leaves
(a torn tail above the recovery point, which the next open truncates; it says so); 1 when it
finds corruption; 2 when it cannot check (no such directory, a writer holds the log, ...).

--repair takes the log's exclusive lock (it fails while a writer runs), checks every segment
from the first damaged one on from its first byte, rebuilding their .index, .timeindex and
.txnindex files from the log, truncates a torn tail, removes leftover files, says what it did,
and verifies again: the exit status is that of the second check. Corruption inside a .log file
is cut only with --truncate-at-corruption too: it first says how many records in which files
go, then cuts the log at the first corrupt batch.";

/// Arguments of `partlog verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The log directory.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,

    /// The log's `cleanup.policy` (Kafka's syntax: delete, compact, or compact,delete). Offset
    /// gaps between segments are legal where it includes compact, or where partlog.checkpoint
    /// says the log's records were compacted (a compaction pass or a follower's roll past a
    /// gap records that); in any other log, a gap between segments is a lost tail or
    /// corruption. By default, the log's stored cleanup.policy (partlog.properties), else
    /// delete.
    #[arg(long, value_name = "POLICY")]
    pub cleanup_policy: Option<String>,

    /// Repair: rebuild bad indexes, truncate a torn tail, remove leftovers (takes the
    /// exclusive lock), then verify again.
    #[arg(long)]
    pub repair: bool,

    /// With --repair: cut the log at the first corrupt batch of a .log file, losing every
    /// record after it.
    #[arg(long, requires = "repair")]
    pub truncate_at_corruption: bool,
}

/// Runs `partlog verify`.
pub fn run(args: &VerifyArgs) -> Result<Outcome, CliError> {
    crate::require_dir(&args.dir)?;
    let mut builder = crate::stored_config_builder(&args.dir)?;
    if let Some(policy) = &args.cleanup_policy {
        builder = builder.cleanup_policy(CleanupPolicy::from_kafka_str(policy)?);
    }
    let config = builder.build()?;
    let report = verify_dir(&args.dir, &config).map_err(written_now)?;
    print_report(&report);
    let report = if args.repair {
        repair(args, &config, &report)?;
        let again = verify_dir(&args.dir, &config)?;
        outln!("after the repair:");
        print_report(&again);
        again
    } else {
        report
    };
    Ok(if report.is_corrupt() {
        Outcome::Corrupt
    } else {
        Outcome::Done
    })
}

/// The error of a check that could not take the log's lock: when a writer holds it, says
/// what to run instead, for the check needs a log nobody writes.
fn written_now(error: partlog::Error) -> CliError {
    match error {
        partlog::Error::Locked {
            in_this_process: false,
            ..
        } => CliError::new(format!(
            "{error}: a writer has it open, and verify checks a log no one writes (stop the \
             writer, then verify); partlog dump and partlog consume read a live log"
        )),
        other => other.into(),
    }
}

/// Repairs what `report` found; see the command's help.
fn repair(args: &VerifyArgs, config: &LogConfig, report: &VerifyReport) -> Result<(), CliError> {
    let plan = &report.repair;
    if let Some(cut) = &plan.cut {
        let finding = report
            .findings_of(Severity::Corruption)
            .find(|f| f.file == cut.file && f.position == Some(cut.position))
            .map_or_else(|| cut.file.display().to_string(), ToString::to_string);
        if !args.truncate_at_corruption {
            return Err(CliError::new(format!(
                "not repairing: {finding}; cutting the log there would discard {cut} (add \
                 --truncate-at-corruption to do so)"
            )));
        }
        outln!("repair: cutting the log at its first corruption discards {cut}");
    }
    if let Some(base) = plan.rescan_from {
        outln!(
            "repair: the segments from {base:020} on are checked from their first byte, and \
             their indexes and .txnindex files will be rebuilt from the log"
        );
    }
    let mut repair_config = config.clone();
    repair_config.recovery_mode = if args.truncate_at_corruption {
        RecoveryMode::TruncateAtCorruption
    } else {
        RecoveryMode::Fail
    };
    let recovery = repair_dir(&args.dir, &repair_config, plan)?;
    if recovery.clean_shutdown {
        outln!("repair: the last shutdown was clean and nothing called for a rescan");
    } else {
        outln!(
            "repair: scanned {} segments ({} bytes), rebuilding their indexes",
            recovery.segments_scanned,
            recovery.bytes_scanned,
        );
    }
    if let Some((file, position, what)) = &recovery.corruption {
        outln!(
            "repair: cut {} at byte {position}, where it is corrupt ({what})",
            file.display()
        );
    }
    if recovery.bytes_truncated > 0 {
        outln!(
            "repair: truncated {} bytes at the end of the log",
            recovery.bytes_truncated
        );
    }
    if recovery.segments_deleted > 0 {
        outln!(
            "repair: deleted {} segments after the truncation point",
            recovery.segments_deleted
        );
    }
    if let Some(discarded) = &recovery.discarded {
        outln!("repair: discarded {discarded}");
    }
    for path in &recovery.rebuilt_indexes {
        outln!("repair: rebuilt the missing {}", path.display());
    }
    for name in &recovery.stray_files_removed {
        outln!("repair: removed leftover file {name}");
    }
    outln!("repair: the log ends at offset {}", recovery.log_end_offset);
    Ok(())
}

fn print_report(report: &VerifyReport) {
    let shutdown = if report.clean_shutdown {
        "clean"
    } else if report.checkpoint_found {
        "not clean (a crash, or still open)"
    } else {
        "unknown (no checkpoint)"
    };
    outln!("verifying {}", report.dir.display());
    outln!(
        "last shutdown: {shutdown}; recovery point {}; log start offset {}",
        report.recovery_point,
        report.log_start_offset
    );
    for segment in &report.segments {
        let entries = |n: Option<usize>| n.map_or_else(|| "missing".to_owned(), |n| n.to_string());
        let invalid = segment.log_bytes - segment.valid_bytes;
        outln!(
            "{}: {} batches, {} records, offsets [{}, {}), {} bytes{}; .index {} entries, \
             .timeindex {} entries",
            segment.log_path.file_name().map_or_else(
                || segment.log_path.display().to_string(),
                |n| { n.to_string_lossy().into_owned() }
            ),
            segment.batches,
            segment.records,
            segment.base_offset,
            segment.next_offset,
            segment.log_bytes,
            if invalid > 0 {
                format!(" ({invalid} not valid)")
            } else {
                String::new()
            },
            entries(segment.offset_index_entries),
            entries(segment.time_index_entries),
        );
    }
    for finding in &report.findings {
        outln!("{finding}");
    }
    let corrupt = report.findings_of(Severity::Corruption).count();
    let batches: u64 = report.segments.iter().map(|s| s.batches).sum();
    let records: u64 = report.segments.iter().map(|s| s.records).sum();
    let summary = format!(
        "{} segments, {batches} batches, {records} records",
        report.segments.len()
    );
    match report.worst() {
        Some(Severity::Corruption) => outln!(
            "result: CORRUPT: {corrupt} problem{} that no crash explains ({summary})",
            if corrupt == 1 { "" } else { "s" }
        ),
        Some(Severity::CrashState) => outln!(
            "result: ok, with what a crash leaves behind: the next open repairs it, and the log \
             will end at offset {} ({summary})",
            report.log_end_offset
        ),
        _ => outln!(
            "result: ok: offsets [{}, {}) ({summary})",
            report.log_start_offset,
            report.log_end_offset
        ),
    }
}
