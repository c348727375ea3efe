//! Maintenance that writes: `partlog delete-records` and `partlog retention`. Both open the log
//! for writing, so they take its exclusive lock and fail, saying so, while a writer runs.

use std::path::PathBuf;

use clap::Args;
use partlog::{CleanupPolicy, Log, LogConfig, RetentionReport, RetentionRule};

use crate::{CliError, Outcome};

pub const DELETE_RECORDS_EXAMPLES: &str = "\
Examples:
  partlog delete-records /tmp/orders-0 --before 1000

Like kafka-delete-records: moves the log start offset up to OFFSET, durably (an fsynced
partlog.checkpoint), so that reads below it fail from then on; then deletes the segments that lie
wholly below it, and prints them. Only that: no time or size retention runs. OFFSET may be the
log end offset (everything goes) but not above it. Takes the log's exclusive lock: it fails
while another process writes the log.";

pub const RETENTION_EXAMPLES: &str = "\
Examples:
  partlog retention /tmp/orders-0                          # Kafka's defaults: 7 days, no size limit
  partlog retention /tmp/orders-0 --retention-ms 3600000   # keep one hour
  partlog retention /tmp/orders-0 --retention-bytes 1073741824 --retention-ms -1

Runs one retention pass now, as the log's maintenance thread would with these settings, and
prints each segment deleted and the rule that deleted it: below the log start offset, over
retention.bytes, or older than retention.ms (by its largest timestamp). A log whose
cleanup.policy has no delete keeps its segments but for the first rule. The active segment goes
too when every record is past retention; the log then rolls an empty one at the log end offset.
Takes the log's exclusive lock: it fails while another process writes the log.";

/// Arguments of `partlog delete-records`.
#[derive(Debug, Args)]
pub struct DeleteRecordsArgs {
    /// The log directory.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,

    /// The new log start offset: every record below it is deleted.
    #[arg(long, value_name = "OFFSET", allow_negative_numbers = true)]
    pub before: i64,
}

/// Arguments of `partlog retention`.
#[derive(Debug, Args)]
pub struct RetentionArgs {
    /// The log directory.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,

    /// Kafka's retention.ms: segments whose newest record is older are deleted; -1 keeps
    /// them forever.
    #[arg(long, value_name = "MS", allow_negative_numbers = true, default_value_t = 7 * 24 * 60 * 60 * 1000)]
    pub retention_ms: i64,

    /// Kafka's retention.bytes: the oldest segments are deleted while the log is larger; -1
    /// sets no limit.
    #[arg(long, value_name = "BYTES", allow_negative_numbers = true, default_value_t = -1)]
    pub retention_bytes: i64,

    /// Kafka's cleanup.policy: delete, compact, or compact,delete.
    #[arg(long, value_name = "POLICY", default_value = "delete")]
    pub cleanup_policy: String,
}

/// Runs `partlog delete-records`.
pub fn run_delete_records(args: &DeleteRecordsArgs) -> Result<Outcome, CliError> {
    crate::require_dir(&args.dir)?;
    if args.before < 0 {
        return Err(CliError::new(format!(
            "--before {} is negative",
            args.before
        )));
    }
    // No time or size rule: only the segments below the new start may go.
    let config = LogConfig::builder()
        .retention_ms(-1)
        .retention_bytes(-1)
        .build()?;
    let log = Log::open(&args.dir, config)?;
    let old_start = log.log_start_offset();
    let end = log.log_end_offset();
    if args.before > end {
        return Err(CliError::new(format!(
            "--before {} is above the log end offset {end}: the log holds offsets [{old_start}, {end})",
            args.before
        )));
    }
    log.delete_records_before(args.before)?;
    let report = log.enforce_retention()?;
    let new_start = log.log_start_offset();
    log.close()?;
    outln!("log start offset: {old_start} -> {new_start} (the log ends at {end})");
    print_deleted(&report);
    Ok(Outcome::Done)
}

/// Runs `partlog retention`.
pub fn run_retention(args: &RetentionArgs) -> Result<Outcome, CliError> {
    crate::require_dir(&args.dir)?;
    let config = LogConfig::builder()
        .retention_ms(args.retention_ms)
        .retention_bytes(args.retention_bytes)
        .cleanup_policy(CleanupPolicy::from_kafka_str(&args.cleanup_policy)?)
        .build()?;
    let log = Log::open(&args.dir, config)?;
    let report = log.enforce_retention()?;
    let start = log.log_start_offset();
    let end = log.log_end_offset();
    log.close()?;
    print_deleted(&report);
    outln!("the log now holds offsets [{start}, {end})");
    Ok(Outcome::Done)
}

fn print_deleted(report: &RetentionReport) {
    for segment in &report.deleted {
        let rule = match segment.rule {
            RetentionRule::LogStartOffset => "below the log start offset",
            RetentionRule::Size => "over retention.bytes",
            RetentionRule::Time => "older than retention.ms",
            _ => "retention",
        };
        outln!(
            "deleted {:020}.log: offsets [{}, {}), {} bytes ({rule})",
            segment.base_offset,
            segment.base_offset,
            segment.end_offset,
            segment.bytes
        );
    }
    if report.rolled_active_segment {
        outln!("the active segment went too: the log rolled an empty one at its end");
    }
    outln!(
        "{} segments deleted, {} bytes",
        report.segments_deleted(),
        report.bytes_deleted()
    );
}
