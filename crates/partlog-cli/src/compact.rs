//! `partlog compact DIR`: one compaction pass over the log, and what it did.

use std::path::PathBuf;

use clap::Args;
use clap::builder::{PossibleValue, PossibleValuesParser};
use partlog::{CleanupPolicy, CompactionOptions, CompactionStats, LogConfig};

use crate::{CliError, Outcome};

pub const EXAMPLES: &str = "\
Examples:
  partlog roll /tmp/users-0 && partlog compact /tmp/users-0   # include the newest records
  partlog compact /tmp/users-0
  partlog compact /tmp/users-0 --delete-retention-ms 0   # tombstones get a horizon of now
  partlog compact /tmp/users-0 --min-lag-ms 3600000      # leave the last hour uncompacted
  partlog compact /tmp/users-0 --policy header --policy-header version   # KIP-280's order

Runs one compaction pass now, due or not: for every key only one record stays (by default the one
with the highest offset; --policy names another of the library's policies), at its own offset
(gaps remain), and small segments are merged up to --segment-bytes. The
active segment is never compacted (partlog roll seals it), nor the segment holding the last stable offset (an open
transaction) and those after it. Data of aborted transactions goes; COMMIT and ABORT markers go
once no data of their transaction is left and their delete horizon has passed. A pass that
cleans no segment ends with a 'nothing to clean:' line saying why. A tombstone is first given a delete horizon (now +
delete.retention.ms, one day by default) and removed by the first pass after it.

The log is opened for writing (no other process may have it open) and closed cleanly.";

/// Arguments of `partlog compact`.
#[derive(Debug, Args)]
pub struct CompactArgs {
    /// The log directory.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,

    /// delete.retention.ms for this pass: how long a tombstone stays after the pass that first
    /// recopies it (default: one day).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(i64).range(0..))]
    pub delete_retention_ms: Option<i64>,

    /// min.compaction.lag.ms for this pass: segments whose newest record is younger than this
    /// are left alone (default: 0).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(i64).range(0..))]
    pub min_lag_ms: Option<i64>,

    /// The size up to which cleaned segments are merged (Kafka's segment.bytes; at least
    /// 1048576; default 1 GiB).
    #[arg(long, value_name = "N")]
    pub segment_bytes: Option<u32>,

    /// Let --segment-bytes go down to 1024 bytes, below Kafka's 1 MiB floor (for tests).
    #[arg(long)]
    pub allow_small_segments: bool,

    /// The compaction policy for this pass (compaction.strategy), one of the library's (see
    /// --help); default: the log's stored one, else offset.
    #[arg(long, value_name = "NAME", value_parser = policy_names())]
    pub policy: Option<String>,

    /// compaction.strategy.header for this pass: the header --policy header reads each record's
    /// version from (an 8-byte big-endian long); default: the log's stored one.
    #[arg(long, value_name = "HEADER")]
    pub policy_header: Option<String>,
}

/// The compaction policies the library registers, with their one-line docs, for `--policy`.
fn policy_names() -> PossibleValuesParser {
    PossibleValuesParser::new(
        partlog::compaction_policies().map(|info| PossibleValue::new(info.name).help(info.doc)),
    )
}

/// Runs `partlog compact`.
pub fn run(args: &CompactArgs) -> Result<Outcome, CliError> {
    crate::require_dir(&args.dir)?;
    let mut builder = if args.allow_small_segments {
        LogConfig::builder_for_tests()
    } else {
        LogConfig::builder()
    };
    // A pass asked for by hand runs whatever the stored policy; nothing it is given is stored.
    builder = builder
        .cleanup_policy(CleanupPolicy::COMPACT)
        .store_settings(false);
    if let Some(segment_bytes) = args.segment_bytes {
        builder = builder.segment_bytes(segment_bytes);
    }
    if let Some(policy) = &args.policy {
        builder = builder.compaction_strategy(policy.as_str());
    }
    if let Some(header) = &args.policy_header {
        builder = builder.compaction_strategy_header(header.as_str());
    }
    let config = builder.build()?;
    let mut options = CompactionOptions::default();
    if let Some(ms) = args.delete_retention_ms {
        options = options.delete_retention_ms(ms);
    }
    if let Some(ms) = args.min_lag_ms {
        options = options.min_compaction_lag_ms(ms);
    }
    let log = crate::open_writable(&args.dir, config)?;
    let segments_before = log.stats().segments;
    let schedule = log.compaction_schedule()?;
    let stats = log.compact_with(options)?;
    let segments_after = log.stats().segments;
    log.close()?;
    let report = render(&args.dir, &stats, segments_before, segments_after);
    outln!("{}", report.trim_end_matches('\n'));
    if stats.segments_cleaned == 0 {
        outln!(
            "{}",
            why_nothing_was_cleaned(&stats, segments_before, schedule.first_dirty_offset)
        );
    }
    Ok(Outcome::Done)
}

/// The line that explains a pass that cleaned no segment, with what to do about it.
fn why_nothing_was_cleaned(stats: &CompactionStats, segments: usize, first_dirty: i64) -> String {
    if segments <= 1 {
        return "nothing to clean: the log has only its active segment, which compaction never \
                touches (partlog roll DIR seals it)"
            .to_owned();
    }
    if let Some(from) = stats.uncleanable_from
        && from <= first_dirty
    {
        return format!(
            "nothing to clean: transactional data from offset {from} on is not compacted yet"
        );
    }
    format!(
        "nothing to clean: the sealed segments are clean up to offset {first_dirty} and the \
         rest is the active segment or younger than min.compaction.lag.ms (partlog roll DIR \
         seals the active segment)"
    )
}

/// The report: one `name: value` line per figure of the pass.
fn render(
    dir: &std::path::Path,
    stats: &CompactionStats,
    segments_before: usize,
    segments_after: usize,
) -> String {
    let uncleanable = match stats.uncleanable_from {
        Some(from) => format!(
            "from offset {from} ({} bytes held back by the last stable offset: a transaction is open there)",
            stats.uncleanable_bytes
        ),
        None => "none".to_owned(),
    };
    format!(
        "compacted {}\n\
         segments: {segments_before} -> {segments_after} ({} replaced by {})\n\
         cleaned up to offset: {}\n\
         bytes read: {}\n\
         bytes written: {}\n\
         records removed: {}\n\
         tombstones removed: {}\n\
         uncleanable: {uncleanable}\n\
         duration: {:.3} s\n",
        dir.display(),
        stats.segments_cleaned,
        stats.segments_written,
        stats.cleaned_up_to,
        stats.bytes_read,
        stats.bytes_written,
        stats.records_removed,
        stats.tombstones_removed,
        stats.duration.as_secs_f64(),
    )
}
