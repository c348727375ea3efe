//! `partlog stats DIR`: what a log holds, at a glance, through a read-only open that tolerates a
//! live writer.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use partlog::unstable::{OsStorage, SegmentFileKind, Storage, segment_file_path};
use partlog::{CompactionSchedule, Log, LogStats, ReadBound};

use crate::{CliError, Outcome};

pub const EXAMPLES: &str = "\
Examples:
  partlog stats /tmp/orders-0
  partlog stats /tmp/users-0 --cleanup-policy compact --superseded --json
  partlog stats /tmp/orders-0 --batches          # how well the producers batched

Prints the segments (base offset, offsets, .log/.index/.timeindex sizes), the log start and end
offsets, the durable offset (the recovery point the writer recorded; the whole log after a clean
close), and the time range (the first batch's first timestamp, the last batch's largest).

It reads the first and the last batch, and the last offset before each segment boundary: a
segment cut short (in a log that is not compacted), or one whose bytes end inside a batch, ends
the report with the error and exit status 1. Only partlog verify reads every batch.

Compaction dirtiness: --cleanup-policy compact prints Kafka's dirty ratio as the writer's
scheduler sees it (the bytes after the first dirty offset, which a compacting writer keeps in
partlog.cleaner-checkpoint, over the cleanable bytes; Log::compaction_schedule). --superseded reads
every record instead and counts those whose key appears again later: what a compaction would
remove now, as a share of the records (keys are held in memory: one entry per distinct key).";

/// Arguments of `partlog stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// The log directory.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,

    /// Also read every record and count those a compaction would remove (keys seen again
    /// later, and tombstones' older records).
    #[arg(long)]
    pub superseded: bool,

    /// The log's cleanup.policy (delete, compact, or compact,delete). With compact, stats also
    /// prints Kafka's dirty ratio as the writer's scheduler sees it (Log::compaction_schedule):
    /// the first dirty offset (from partlog.cleaner-checkpoint), dirty and clean bytes, and
    /// whether a pass is due at min.cleanable.dirty.ratio 0.5 and the default lags.
    /// By default, the log's stored cleanup.policy (partlog.properties), else delete.
    #[arg(long, value_name = "POLICY")]
    pub cleanup_policy: Option<String>,

    /// Also count the batches and their records (reading every batch header), as a broker's
    /// batch-size metrics would show how well producers batched.
    #[arg(long)]
    pub batches: bool,

    /// One JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

struct SegmentLine {
    base: i64,
    end: i64,
    log_bytes: u64,
    index_bytes: u64,
    time_index_bytes: u64,
}

/// What `partlog stats` prints, in either form.
struct Figures {
    segments: Vec<SegmentLine>,
    total_bytes: u64,
    stats: LogStats,
    first_timestamp: Option<i64>,
    last_timestamp: Option<i64>,
    /// Records, and those a later record with their key supersedes (`--superseded`).
    superseded: Option<(u64, u64)>,
    /// Batches and the records they hold (`--batches`).
    batches: Option<(u64, u64)>,
    /// Kafka's dirty ratio and its parts (`--cleanup-policy compact`).
    schedule: Option<CompactionSchedule>,
}

/// Runs `partlog stats`.
pub fn run(args: &StatsArgs) -> Result<Outcome, CliError> {
    crate::require_dir(&args.dir)?;
    // Stops at corrupt bytes instead of refusing: see `open_live_reader`.
    let mut builder = partlog::LogConfig::builder()
        .allow_live_writer(true)
        .poll_interval(Duration::from_millis(100))
        .recovery_mode(partlog::RecoveryMode::TruncateAtCorruption);
    if let Some(policy) = &args.cleanup_policy {
        builder = builder.cleanup_policy(partlog::CleanupPolicy::from_kafka_str(policy)?);
    }
    let log = Log::open_read_only(&args.dir, builder.build()?)?;
    let stats = log.stats();
    let schedule = if log.config().cleanup_policy.compacts() {
        Some(log.compaction_schedule()?)
    } else {
        None
    };
    let bases = crate::segment_bases(&args.dir)?;
    let segments = segment_lines(&args.dir, &bases, stats.log_end_offset);
    // Corrupt bytes in a segment the open did not scan stop these reads: the figures they
    // feed are left out, the rest is printed, and the corruption ends the report.
    let mut stopped = None;
    let (first_timestamp, last_timestamp) =
        reading(time_range(&log), &mut stopped).unwrap_or((None, None));
    reading(segment_ends(&log, &bases), &mut stopped);
    let superseded = if args.superseded {
        reading(superseded(&log), &mut stopped)
    } else {
        None
    };
    let batches = if args.batches {
        reading(batch_count(&log), &mut stopped)
    } else {
        None
    };
    let figures = Figures {
        total_bytes: segments.iter().map(|s| s.log_bytes).sum(),
        segments,
        stats,
        first_timestamp,
        last_timestamp,
        superseded,
        batches,
        schedule,
    };
    if args.json {
        outln!("{}", json_report(&args.dir, &figures, &log));
    } else {
        print_text(&args.dir, &figures, stopped.is_some());
    }
    if let Some(error) = stopped {
        return crate::stopped_reading(error);
    }
    Ok(crate::finish_reading(&log))
}

/// Each segment's offsets and file sizes, from the names in `dir` (a file that is missing
/// counts 0 bytes).
fn segment_lines(dir: &Path, bases: &[i64], log_end_offset: i64) -> Vec<SegmentLine> {
    let storage = OsStorage::new();
    let size = |base: i64, kind: SegmentFileKind| {
        storage
            .metadata(&segment_file_path(dir, base, kind))
            .map_or(0, |m| m.len)
    };
    bases
        .iter()
        .enumerate()
        .map(|(n, &base)| SegmentLine {
            base,
            end: bases
                .get(n + 1)
                .copied()
                .unwrap_or(log_end_offset)
                .max(base),
            log_bytes: size(base, SegmentFileKind::Log),
            index_bytes: size(base, SegmentFileKind::OffsetIndex),
            time_index_bytes: size(base, SegmentFileKind::TimeIndex),
        })
        .collect()
}

/// The `--json` report: one object.
fn json_report(dir: &Path, figures: &Figures, log: &Log) -> String {
    let stats = &figures.stats;
    let mut out = String::from("{");
    out.push_str(&format!(
        "\"dir\":{},\"segments\":[",
        json_text(&dir.display().to_string())
    ));
    for (n, s) in figures.segments.iter().enumerate() {
        if n > 0 {
            out.push(',');
        }
        out.push_str(&format!(
            "{{\"base_offset\":{},\"end_offset\":{},\"log_bytes\":{},\"index_bytes\":{},\"timeindex_bytes\":{}}}",
            s.base, s.end, s.log_bytes, s.index_bytes, s.time_index_bytes
        ));
    }
    out.push_str(&format!(
        "],\"log_bytes\":{},\"log_start_offset\":{},\"log_end_offset\":{},\"durable_offset\":{},\"first_timestamp\":{},\"last_timestamp\":{}",
        figures.total_bytes,
        stats.log_start_offset,
        stats.log_end_offset,
        stats.durable_offset,
        json_option(figures.first_timestamp),
        json_option(figures.last_timestamp),
    ));
    if let Some((records, gone)) = figures.superseded {
        out.push_str(&format!(
            ",\"records\":{records},\"superseded_records\":{gone}"
        ));
    }
    if let Some((batches, records)) = figures.batches {
        out.push_str(&format!(
            ",\"batches\":{batches},\"batch_records\":{records}"
        ));
    }
    if let Some(schedule) = &figures.schedule {
        out.push_str(&format!(
            ",\"first_dirty_offset\":{},\"dirty_bytes\":{},\"clean_bytes\":{},\"dirty_ratio\":{},\"compaction_due\":{}",
            schedule.first_dirty_offset,
            schedule.dirty_bytes,
            schedule.clean_bytes,
            // JSON has no NaN: an empty cleanable range has no ratio to speak of.
            if schedule.dirty_ratio.is_finite() {
                schedule.dirty_ratio
            } else {
                0.0
            },
            schedule.due
        ));
    }
    if let Some((file, position, what)) = &log.recovery_report().corruption {
        out.push_str(&format!(
            ",\"corruption\":{{\"file\":{},\"position\":{position},\"what\":{}}}",
            json_text(&file.display().to_string()),
            json_text(&what.to_string())
        ));
    }
    out.push('}');
    out
}

/// The text report; `stopped`: a read met corrupt data, so missing figures are unknown.
fn print_text(dir: &Path, figures: &Figures, stopped: bool) {
    let stats = &figures.stats;
    outln!("log {}", dir.display());
    outln!(
        "{} segments, {} bytes of .log",
        figures.segments.len(),
        figures.total_bytes
    );
    for s in &figures.segments {
        outln!(
            "  {:020}.log  offsets [{}, {})  {} bytes  (.index {} bytes, .timeindex {} bytes)",
            s.base,
            s.base,
            s.end,
            s.log_bytes,
            s.index_bytes,
            s.time_index_bytes
        );
    }
    outln!(
        "offsets: log start {}, log end {}, durable {}",
        stats.log_start_offset,
        stats.log_end_offset,
        stats.durable_offset
    );
    match (figures.first_timestamp, figures.last_timestamp) {
        (Some(first), Some(last)) => outln!("timestamps: {first} .. {last} (ms since the epoch)"),
        _ if stopped => outln!("timestamps: unknown (a read met corrupt data)"),
        _ => outln!("timestamps: none (the log is empty)"),
    }
    if let Some((records, gone)) = figures.superseded {
        let share = if records == 0 {
            0.0
        } else {
            gone as f64 * 100.0 / records as f64
        };
        outln!(
            "compaction: {gone} of {records} records are superseded by a later record with their key ({share:.1}%)"
        );
    }
    if let Some((batches, records)) = figures.batches {
        let per_batch = if batches == 0 {
            0.0
        } else {
            records as f64 / batches as f64
        };
        outln!("batches: {batches}, {records} records, {per_batch:.1} records per batch");
    }
    if let Some(schedule) = &figures.schedule {
        outln!(
            "compaction: first dirty offset {}, {} dirty and {} clean bytes in the cleanable range, dirty ratio {:.3}, a pass is {}",
            schedule.first_dirty_offset,
            schedule.dirty_bytes,
            schedule.clean_bytes,
            schedule.dirty_ratio,
            if schedule.due { "due" } else { "not due" }
        );
    }
}

/// The first batch's first timestamp and the last batch's largest, when the log holds any.
fn time_range(log: &Log) -> partlog::Result<(Option<i64>, Option<i64>)> {
    let start = log.log_start_offset();
    let end = log.log_end_offset();
    if end <= start {
        return Ok((None, None));
    }
    let first = log.read(start, 1, ReadBound::LogEnd)?;
    let first_timestamp = match first.batches().next() {
        Some(batch) => {
            let batch = batch?;
            Some(
                batch
                    .header()
                    .map_or_else(|| batch.max_timestamp(), |h| h.base_timestamp),
            )
        }
        None => None,
    };
    let last = log.read(end - 1, 1, ReadBound::LogEnd)?;
    let last_timestamp = match last.batches().next() {
        Some(batch) => Some(batch?.max_timestamp()),
        None => None,
    };
    Ok((first_timestamp, last_timestamp))
}

/// Reads the last offset before each segment boundary: the segment before it must hold it
/// (in a log that is not compacted, offsets run on from one segment to the next), so a
/// segment cut short, or whose bytes end inside a batch, fails the read with the error that
/// names where (`Error::Corrupt`). One small read a segment; the batches are not walked.
fn segment_ends(log: &Log, bases: &[i64]) -> partlog::Result<()> {
    let start = log.log_start_offset();
    let end = log.log_end_offset();
    for &next_base in bases.iter().skip(1) {
        let last = next_base - 1;
        if (start..end).contains(&last) {
            log.read(last, 1, ReadBound::LogEnd)?;
        }
    }
    Ok(())
}

/// The value of a read, or `None` after keeping its error in `stopped` (the first one wins).
fn reading<T>(result: partlog::Result<T>, stopped: &mut Option<partlog::Error>) -> Option<T> {
    match result {
        Ok(value) => Some(value),
        Err(error) => {
            stopped.get_or_insert(error);
            None
        }
    }
}

/// The batches of the log and the records they hold (control batches included), from their
/// headers; decompresses nothing.
fn batch_count(log: &Log) -> partlog::Result<(u64, u64)> {
    let (mut batches, mut records) = (0u64, 0u64);
    let mut offset = log.log_start_offset();
    loop {
        let fetch = log.read(offset, 1 << 20, ReadBound::LogEnd)?;
        if fetch.is_empty() {
            return Ok((batches, records));
        }
        for batch in fetch.batches() {
            let batch = batch?;
            batches += 1;
            records += batch
                .header()
                .map_or(1, |header| u64::try_from(header.records_count).unwrap_or(0));
        }
        offset = fetch.next_offset();
    }
}

/// How many records there are, and how many a later record with the same key supersedes.
fn superseded(log: &Log) -> partlog::Result<(u64, u64)> {
    let mut last_offset_of_key: HashMap<Vec<u8>, i64> = HashMap::new();
    let mut records = 0u64;
    let mut keyed = 0u64;
    for record in log.records(log.log_start_offset(), ReadBound::LogEnd) {
        let record = record?;
        records += 1;
        if let Some(key) = record.key {
            keyed += 1;
            last_offset_of_key.insert(key, record.offset);
        }
    }
    let gone = keyed - last_offset_of_key.len() as u64;
    Ok((records, gone))
}

fn json_option(value: Option<i64>) -> String {
    value.map_or_else(|| "null".to_owned(), |v| v.to_string())
}

fn json_text(text: &str) -> String {
    let mut out = Vec::new();
    crate::text::json_string(&mut out, text);
    String::from_utf8_lossy(&out).into_owned()
}
