//! Maintenance that writes: `partlog delete-records`, `partlog retention` and `partlog roll`.
//! They open the log for writing, so they take its exclusive lock and fail, saying so, while a
//! writer runs.

use std::path::PathBuf;

use clap::Args;
use partlog::{CleanupPolicy, LogConfig, RetentionReport, RetentionRule};

use crate::{CliError, Outcome};

pub const DELETE_RECORDS_EXAMPLES: &str = "\
Examples:
  partlog delete-records /tmp/orders-0 --before 1000
  partlog delete-records /tmp/orders-0 --before -1     # everything: the log end offset

Like kafka-delete-records: moves the log start offset up to OFFSET, durably (an fsynced
partlog.checkpoint), so that reads below it fail from then on; then deletes the segments that lie
wholly below it, and prints them. Only that: no time or size retention runs. OFFSET may be the
log end offset (everything goes) but not above it. Takes the log's exclusive lock: it fails
while another process writes the log.";

pub const RETENTION_EXAMPLES: &str = "\
Examples:
  partlog retention /tmp/orders-0                          # the log's stored settings
  partlog retention /tmp/orders-0 --retention-ms 3600000   # keep one hour, this pass only
  partlog retention /tmp/orders-0 --retention-bytes 1073741824 --retention-ms -1
  partlog config /tmp/orders-0 --set retention.ms=604800000  # Kafka's 7 days, for every pass

Runs one retention pass now with the log's stored settings (partlog.properties, see 'partlog
config'; partlog's default keeps everything: retention.ms=-1, retention.bytes=-1), the flags
overriding them for this pass only, as the log's maintenance thread would, and
prints each segment deleted and the rule that deleted it: below the log start offset, over
retention.bytes, or older than retention.ms (by its largest timestamp). A log whose
cleanup.policy has no delete keeps its segments but for the first rule. The active segment goes
too when every record is past retention; the log then rolls an empty one at the log end offset.
Takes the log's exclusive lock: it fails while another process writes the log.";

pub const ROLL_EXAMPLES: &str = "\
Examples:
  partlog roll /tmp/users-0                  # seal the active segment
  partlog roll /tmp/users-0 && partlog compact /tmp/users-0

Like Kafka's UnifiedLog.roll(): seals the active segment and starts a new, empty one at the log
end offset (Log::roll in the crate). Retention deletes and compaction cleans only sealed
segments, so a roll makes the newest records reachable by both. An empty active segment stays
as it is. Takes the log's exclusive lock: it fails while another process writes the log.";

/// Arguments of `partlog roll`.
#[derive(Debug, Args)]
pub struct RollArgs {
    /// The log directory.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

/// Runs `partlog roll`.
pub fn run_roll(args: &RollArgs) -> Result<Outcome, CliError> {
    crate::require_dir(&args.dir)?;
    if crate::segment_bases(&args.dir)?.is_empty() {
        return Err(CliError::new(format!(
            "{} holds no log (no .log file)",
            args.dir.display()
        )));
    }
    let log = crate::open_writable(&args.dir, LogConfig::default())?;
    let before = log.stats().segments;
    let base = log.roll()?;
    let after = log.stats().segments;
    log.close()?;
    if after > before {
        outln!(
            "rolled: {base:020}.log is the new active segment; the records below offset {base} are in sealed segments"
        );
    } else {
        outln!("nothing to roll: the active segment {base:020}.log is empty");
    }
    Ok(Outcome::Done)
}

/// Arguments of `partlog delete-records`.
#[derive(Debug, Args)]
pub struct DeleteRecordsArgs {
    /// The log directory.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,

    /// The new log start offset: every record below it is deleted. -1 means the log end
    /// offset (everything), as in kafka-delete-records' offset JSON.
    #[arg(long, value_name = "OFFSET", allow_negative_numbers = true)]
    pub before: i64,
}

/// Arguments of `partlog retention`.
#[derive(Debug, Args)]
pub struct RetentionArgs {
    /// The log directory.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,

    /// Kafka's retention.ms for this pass: segments whose newest record is older are deleted;
    /// -1 keeps them forever. By default, the log's stored retention.ms, else -1.
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    pub retention_ms: Option<i64>,

    /// Kafka's retention.bytes for this pass: the oldest segments are deleted while the log is
    /// larger; -1 sets no limit. By default, the log's stored retention.bytes, else -1.
    #[arg(long, value_name = "BYTES", allow_negative_numbers = true)]
    pub retention_bytes: Option<i64>,

    /// Kafka's cleanup.policy for this pass: delete, compact, or compact,delete. By default,
    /// the log's stored cleanup.policy, else delete.
    #[arg(long, value_name = "POLICY")]
    pub cleanup_policy: Option<String>,
}

/// Runs `partlog delete-records`.
pub fn run_delete_records(args: &DeleteRecordsArgs) -> Result<Outcome, CliError> {
    crate::require_dir(&args.dir)?;
    if args.before < -1 {
        return Err(CliError::new(format!(
            "--before {} is negative: give an offset, or -1 for the log end (everything)",
            args.before
        )));
    }
    // No time or size rule: only the segments below the new start may go.
    let config = LogConfig::builder()
        .retention_ms(-1)
        .retention_bytes(-1)
        .store_settings(false)
        .build()?;
    let log = crate::open_writable(&args.dir, config)?;
    let old_start = log.log_start_offset();
    let end = log.log_end_offset();
    let before = if args.before == -1 { end } else { args.before };
    if before > end {
        return Err(CliError::new(format!(
            "--before {before} is above the log end offset {end}: the log holds offsets [{old_start}, {end})"
        )));
    }
    log.delete_records_before(before)?;
    // The move is durable now: say so before the deletions, which may fail on their own.
    let new_start = log.log_start_offset();
    outln!("log start offset: {old_start} -> {new_start} (the log ends at {end})");
    let deleted = log.enforce_retention();
    let closed = log.close();
    match deleted {
        Ok(report) => print_deleted(&report),
        Err(error) => {
            return Err(CliError::new(format!(
                "the log start offset moved to {new_start} (durably: reads below it fail), but \
                 deleting the segments below it failed: {error}; the next retention pass or \
                 open retries"
            )));
        }
    }
    closed?;
    Ok(Outcome::Done)
}

/// Runs `partlog retention`.
pub fn run_retention(args: &RetentionArgs) -> Result<Outcome, CliError> {
    crate::require_dir(&args.dir)?;
    // The flags override the stored settings for this pass only.
    let mut builder = LogConfig::builder().store_settings(false);
    if let Some(retention_ms) = args.retention_ms {
        builder = builder.retention_ms(retention_ms);
    }
    if let Some(retention_bytes) = args.retention_bytes {
        builder = builder.retention_bytes(retention_bytes);
    }
    if let Some(policy) = &args.cleanup_policy {
        builder = builder.cleanup_policy(CleanupPolicy::from_kafka_str(policy)?);
    }
    let config = builder.build()?;
    let log = crate::open_writable(&args.dir, config)?;
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
