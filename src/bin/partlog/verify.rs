//! `partlog verify DIR`: every batch and index entry checked, nothing written.

use std::path::PathBuf;

use clap::Args;
use partlog::{CleanupPolicy, LogConfig, Severity, VerifyReport, verify_dir};

use crate::{CliError, Outcome};

pub const EXAMPLES: &str = "\
Examples:
  partlog verify /tmp/orders-0 && echo sound
  partlog verify /tmp/users-0 --cleanup-policy compact   # offset gaps are legal in a compacted log

Checks every batch of every segment (frame, CRC-32C, offsets, every record decoded; a legacy
magic 0 or 1 message, as Kafka wrote before 0.11, by its CRC-32 and its inner messages) and every
.index and .timeindex entry against the batch it names, like Kafka's DumpLogSegments, and says
what it found. It never writes: the log may be checked after a crash, before anything opens it.

Exit status: 0 when the log is sound, and also when it holds only what a crash normally leaves
(a torn tail above the recovery point, which the next open truncates; it says so); 1 when it
finds corruption; 2 when it cannot check (no such directory, a writer holds the log, ...).";

/// Arguments of `partlog verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The log directory.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,

    /// The log's `cleanup.policy` (Kafka's syntax: delete, compact, or compact,delete). In a
    /// compacted log offset gaps are legal; in any other, a gap between segments is a lost tail
    /// or corruption.
    #[arg(long, value_name = "POLICY", default_value = "delete")]
    pub cleanup_policy: String,
}

/// Runs `partlog verify`.
pub fn run(args: &VerifyArgs) -> Result<Outcome, CliError> {
    crate::require_dir(&args.dir)?;
    let config = LogConfig::builder()
        .cleanup_policy(CleanupPolicy::from_kafka_str(&args.cleanup_policy)?)
        .build()?;
    let report = verify_dir(&args.dir, &config)?;
    print_report(&report);
    Ok(if report.is_corrupt() {
        Outcome::Corrupt
    } else {
        Outcome::Done
    })
}

fn print_report(report: &VerifyReport) {
    let shutdown = if report.clean_shutdown {
        "clean"
    } else if report.checkpoint_found {
        "not clean (a crash, or still open)"
    } else {
        "unknown (no checkpoint)"
    };
    println!("verifying {}", report.dir.display());
    println!(
        "last shutdown: {shutdown}; recovery point {}; log start offset {}",
        report.recovery_point, report.log_start_offset
    );
    for segment in &report.segments {
        let entries = |n: Option<usize>| n.map_or_else(|| "missing".to_owned(), |n| n.to_string());
        let invalid = segment.log_bytes - segment.valid_bytes;
        println!(
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
        println!("{finding}");
    }
    let corrupt = report.findings_of(Severity::Corruption).count();
    let batches: u64 = report.segments.iter().map(|s| s.batches).sum();
    let records: u64 = report.segments.iter().map(|s| s.records).sum();
    let summary = format!(
        "{} segments, {batches} batches, {records} records",
        report.segments.len()
    );
    match report.worst() {
        Some(Severity::Corruption) => println!(
            "result: CORRUPT: {corrupt} problem{} that no crash explains ({summary})",
            if corrupt == 1 { "" } else { "s" }
        ),
        Some(Severity::CrashState) => println!(
            "result: ok, with what a crash leaves behind: the next open repairs it, and the log \
             will end at offset {} ({summary})",
            report.log_end_offset
        ),
        _ => println!(
            "result: ok: offsets [{}, {}) ({summary})",
            report.log_start_offset, report.log_end_offset
        ),
    }
}
