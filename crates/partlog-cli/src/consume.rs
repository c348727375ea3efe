//! `partlog consume DIR`: records out, kcat-like, through a read-only open that tolerates a live
//! writer in another process.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgGroup, Args, ValueEnum};
use partlog::{CommittedRecords, Isolation, Log, LogRecord, LogRecords, ReadBound, ReadOptions};

use crate::kcat_format::{RecordFormat, Separator, topic_and_partition};
use crate::{CliError, Outcome};

/// One `-o` value: where to start, or (`e@MS`) where to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    /// `N`, or `-N`: N records before the end.
    Offset(i64),
    /// `beginning`: the log start offset.
    Beginning,
    /// `end`: the log end offset.
    End,
    /// `s@MS`: the first record whose timestamp is at or above MS.
    StartTimestamp(i64),
    /// `e@MS`: stop before the first record whose timestamp is at or above MS.
    EndTimestamp(i64),
}

fn parse_offset_spec(value: &str) -> Result<OffsetSpec, String> {
    let expected = "expected N, -N (from the end), beginning, end, s@MS or e@MS";
    let timestamp = |ms: &str| {
        ms.parse::<i64>()
            .map_err(|_| format!("{ms:?} is not a timestamp in milliseconds ({expected})"))
    };
    match value {
        "beginning" => Ok(OffsetSpec::Beginning),
        "end" => Ok(OffsetSpec::End),
        _ => {
            if let Some(ms) = value.strip_prefix("s@") {
                return timestamp(ms).map(OffsetSpec::StartTimestamp);
            }
            if let Some(ms) = value.strip_prefix("e@") {
                return timestamp(ms).map(OffsetSpec::EndTimestamp);
            }
            value
                .parse::<i64>()
                .map(OffsetSpec::Offset)
                .map_err(|_| format!("{value:?} is not an offset ({expected})"))
        }
    }
}

fn parse_count(value: &str) -> Result<u64, String> {
    match value.parse::<i64>() {
        Ok(n) if n >= 0 => Ok(n as u64),
        Ok(_) => Err("a count is 0 or more (leave --count out to print every record)".to_owned()),
        Err(_) => Err(format!("{value:?} is not a number of records")),
    }
}

fn parse_non_negative(value: &str) -> Result<i64, String> {
    match value.parse::<i64>() {
        Ok(n) if n >= 0 => Ok(n),
        _ => Err(format!("{value:?} is not an offset (0 or more)")),
    }
}

pub const EXAMPLES: &str = "\
Examples:
  partlog consume /tmp/orders-0                       # every record, values only, then exit
  partlog consume /tmp/orders-0 --offset 1000 --count 10 --format json
  partlog consume /tmp/orders-0 --offset -5          # the last five records
  partlog consume /tmp/orders-0 --timestamp 1700000000000   # from the first record at/after it
  partlog consume /tmp/orders-0 --end --follow        # like kcat -o end: new records as they come
  partlog consume /tmp/orders-0 --follow --durable-only --key-separator =
  partlog consume /tmp/orders-0 -Z -f '%o %k %s %T %h\\n'   # kcat's format string, nulls as NULL
  partlog consume /tmp/orders-0 -o s@1700000000000 -o e@1700003600000   # one hour, by timestamp
  partlog consume /tmp/orders-0 -o 1000 --end-offset 2000  # offsets [1000, 2000)
  partlog consume /tmp/orders-0 --isolation-level read_committed   # or -X isolation.level=...
  partlog consume /tmp/orders-0 -D '\\0' -K '\\t'   # records end at NUL, key TAB value

The log is opened read-only without a lock, so a process may be writing it meanwhile
(allow_live_writer): --follow polls the directory every --poll-ms and prints each record once its
batch is complete. --durable-only prints only what the writer has recorded as durable (fsynced),
so nothing printed can vanish in a crash of the writer's machine.

--isolation-level (Kafka's isolation.level; also -X isolation.level=...) is read_uncommitted by
default, as in Kafka: every data record is printed, those of aborted and still-open transactions
too. read_committed prints what a read_committed Kafka consumer gets: the records of aborted
transactions are skipped, and reading stops at the last stable offset, before the first record
of a transaction still open (--follow waits there for its marker; -o end and -o -N count from
there). 'partlog dump --records --txn-state' shows which transaction each record belongs to.

text prints each value as raw bytes and a newline, or -D DELIM (a tombstone as an empty
record, or as NULL with -Z); with -K/--key-separator SEP, the key, SEP, then the value (what
`partlog produce -K SEP -D DELIM` reads back). SEP and DELIM take kcat's escapes \\n \\r \\t \\0
\\xNN \\\\. json prints one object per record (what `partlog produce --format json` reads back):
  {\"offset\":0,\"timestamp\":1700000000000,\"key\":\"user1\",\"value\":\"hello\",\"headers\":[]}
(the same object as `partlog dump --json`; non-UTF-8 bytes as {\"base64\":\"...\"}).";

/// Kafka's `isolation.level`, by its Kafka names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum IsolationLevel {
    /// Every data record, those of open and aborted transactions too.
    #[value(name = "read_uncommitted")]
    ReadUncommitted,
    /// Committed records only, up to the last stable offset.
    #[value(name = "read_committed")]
    ReadCommitted,
}

fn parse_property(value: &str) -> Result<(String, String), String> {
    match value.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_owned(), value.to_owned())),
        _ => Err(format!(
            "{value:?} is not PROP=VALUE (as in -X isolation.level=read_committed)"
        )),
    }
}

/// The isolation `--isolation-level` and `-X isolation.level` ask for (they must agree);
/// `-X` with any other property is refused, naming the one consume knows.
fn isolation(args: &ConsumeArgs) -> Result<Isolation, CliError> {
    let mut level = args.isolation_level;
    for (name, value) in &args.properties {
        if name != "isolation.level" {
            return Err(CliError::new(format!(
                "-X {name}: consume takes one property, isolation.level (read_uncommitted or \
                 read_committed)"
            )));
        }
        let given = IsolationLevel::from_str(value, false).map_err(|_| {
            CliError::new(format!(
                "-X isolation.level={value}: expected read_uncommitted or read_committed"
            ))
        })?;
        if level.is_some_and(|level| level != given) {
            return Err(CliError::new(
                "--isolation-level and -X isolation.level disagree: give one",
            ));
        }
        level = Some(given);
    }
    Ok(match level {
        Some(IsolationLevel::ReadCommitted) => Isolation::ReadCommitted,
        Some(IsolationLevel::ReadUncommitted) | None => Isolation::ReadUncommitted,
    })
}

/// The records a pass of the read loop prints: all of them, or the committed ones
/// (`Log::committed_records`, which applies a read_committed consumer's filter).
enum Records<'a> {
    All(LogRecords<'a>),
    Committed(CommittedRecords<'a>),
}

impl<'a> Records<'a> {
    fn new(log: &'a Log, position: i64, bound: ReadBound, isolation: Isolation) -> Self {
        match isolation {
            Isolation::ReadCommitted => Records::Committed(log.committed_records(position, bound)),
            _ => Records::All(log.records(position, bound)),
        }
    }

    /// Where the next read starts, past aborted records skipped since the last one returned.
    fn skipped_to(&self) -> Option<i64> {
        match self {
            Records::All(_) => None,
            Records::Committed(records) => Some(records.position()),
        }
    }
}

impl Iterator for Records<'_> {
    type Item = partlog::Result<LogRecord>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Records::All(records) => records.next(),
            Records::Committed(records) => records.next(),
        }
    }
}

/// Output formats of `consume`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// The value's bytes (or key SEP value), one record per line.
    Text,
    /// One JSON object per line, every field.
    Json,
}

/// Arguments of `partlog consume`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("start").args(["offset", "timestamp", "end"])))]
pub struct ConsumeArgs {
    /// The log directory.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,

    /// Where to start, as kcat's -o: N, -N (N records before the end), beginning, end, or
    /// s@MS (the first record whose timestamp is at or above MS); and e@MS, where to stop (before
    /// the first record at or above MS). Repeatable: -o s@MS1 -o e@MS2. Default: beginning.
    #[arg(
        short = 'o',
        long,
        value_name = "SPEC",
        allow_negative_numbers = true,
        value_parser = parse_offset_spec
    )]
    pub offset: Vec<OffsetSpec>,

    /// Stop before this offset (records up to N-1 are printed), like a consumer that stops at a
    /// known end.
    #[arg(long, value_name = "N", value_parser = parse_non_negative)]
    pub end_offset: Option<i64>,

    /// Stop before the first record whose timestamp is at or above MS (kcat's -o e@MS).
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    pub end_timestamp: Option<i64>,

    /// Start at the first record whose timestamp is at or above MS (milliseconds since the
    /// epoch), as Kafka's ListOffsets finds it.
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    pub timestamp: Option<i64>,

    /// Start at the log end: only records appended from now on (with --follow).
    #[arg(long)]
    pub end: bool,

    /// Keep reading: wait for new records when the log's end is reached, until interrupted
    /// (or --count records are printed).
    #[arg(long)]
    pub follow: bool,

    /// Print only records the writer has made durable (its recorded recovery point).
    #[arg(long)]
    pub durable_only: bool,

    /// Stop after N records (kcat's -c).
    #[arg(short = 'c', long, value_name = "N", allow_negative_numbers = true, value_parser = parse_count)]
    pub count: Option<u64>,

    /// Print a null key or value as NULL, so that it differs from an empty one (kcat's -Z);
    /// --null-marker chooses another string.
    #[arg(short = 'Z', long)]
    pub print_null: bool,

    /// The string a null key or value prints as (implies -Z), like kafka-console-consumer's
    /// null.literal.
    #[arg(long, value_name = "MARKER")]
    pub null_marker: Option<String>,

    /// Print each record as kcat's -f format string says: %o offset, %k key, %s value, %T
    /// timestamp, %h headers (k=v,...), %K and %S their lengths (-1 for null), %t topic and
    /// %p partition (from DIR's name), %% a %; \n \t \r \0 \\ escapes. No newline is added.
    #[arg(short = 'f', long, value_name = "FORMAT", conflicts_with_all = ["format", "key_separator"], value_parser = RecordFormat::parse)]
    pub format_string: Option<RecordFormat>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,

    /// In the text format, print the key, SEP and the value (kcat's -K; SEP takes -D's
    /// escapes).
    #[arg(short = 'K', long, value_name = "SEP", value_parser = Separator::parse)]
    pub key_separator: Option<Separator>,

    /// What ends each record in the text and json formats (kcat's -D): one or more bytes, with
    /// the escapes \n \r \t \0 \xNN and \\ (a backslash).
    #[arg(short = 'D', long, value_name = "DELIM", default_value = "\\n", value_parser = Separator::parse, conflicts_with = "format_string")]
    pub delimiter: Separator,

    /// Which records of transactions to print (Kafka's isolation.level): read_uncommitted
    /// (Kafka's default) prints them all; read_committed skips those of aborted transactions and
    /// stops at the last stable offset, as a read_committed Kafka consumer does.
    #[arg(long, value_enum, value_name = "LEVEL")]
    pub isolation_level: Option<IsolationLevel>,

    /// A kcat (librdkafka) property, PROP=VALUE, repeatable: consume takes isolation.level.
    #[arg(short = 'X', value_name = "PROP=VALUE", value_parser = parse_property)]
    pub properties: Vec<(String, String)>,

    /// How often --follow looks for new data, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 100)]
    pub poll_ms: u64,
}

/// Runs `partlog consume`.
pub fn run(args: &ConsumeArgs) -> Result<Outcome, CliError> {
    crate::require_dir(&args.dir)?;
    let isolation = isolation(args)?;
    let log = crate::open_live_reader(&args.dir, Duration::from_millis(args.poll_ms.max(1)))?;
    let bound = if args.durable_only {
        ReadBound::Durable
    } else {
        ReadBound::LogEnd
    };
    let (mut position, end_timestamp) = match start_position(&log, args, isolation)? {
        Ok(start) => start,
        Err(error) => return crate::stopped_reading(error),
    };
    // The end bound: an offset, or the first offset at or after a timestamp. A timestamp no
    // record has reached yet is checked record by record (a followed log may reach it).
    let mut stop_before = args.end_offset.unwrap_or(i64::MAX);
    let mut stop_at_timestamp = None;
    if let Some(ms) = end_timestamp {
        match log.offset_for_timestamp(ms) {
            Ok(Some((offset, _))) => stop_before = stop_before.min(offset),
            Ok(None) => stop_at_timestamp = Some(ms),
            Err(error) => return crate::stopped_reading(error),
        }
    }
    let null_marker: &[u8] = match (&args.null_marker, args.print_null) {
        (Some(marker), _) => marker.as_bytes(),
        (None, true) => b"NULL",
        (None, false) => b"",
    };
    let (topic, partition) = topic_and_partition(&args.dir);
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let mut printed = 0u64;
    let mut line = Vec::new();
    let limit = args.count.unwrap_or(u64::MAX);
    let result = (|| -> Result<(), ConsumeError> {
        // One record from an offset (`-o N -c 1`): a point read answers it when a record the
        // reader sees is there. A gap, an aborted record or an error takes the iterator's way
        // below, which goes on to the next record or reports the error.
        if limit == 1 && !args.follow && stop_at_timestamp.is_none() && position < stop_before {
            let options = ReadOptions::default().bound(bound).isolation(isolation);
            if let Ok(Some(record)) = log.read_record(position, options) {
                match &args.format_string {
                    Some(format) => {
                        format.render(&mut line, &record, &topic, partition, null_marker)
                    }
                    None => render(&mut line, &record, args, null_marker),
                }
                out.write_all(&line)?;
                printed = 1;
            }
        }
        while printed < limit && position < stop_before {
            let mut progressed = false;
            let mut records = Records::new(&log, position, bound, isolation);
            for record in records.by_ref() {
                let record = match record {
                    Ok(record) => record,
                    // Retention moved the start past us while we followed: go on from there,
                    // as a consumer with auto.offset.reset=earliest does, and say so.
                    Err(partlog::Error::OffsetOutOfRange { start, .. })
                        if args.follow && position < start =>
                    {
                        out.flush()?;
                        eprintln!(
                            "partlog: offsets [{position}, {start}) were deleted meanwhile; going on from {start}"
                        );
                        position = start;
                        progressed = true;
                        break;
                    }
                    Err(error) => return Err(error.into()),
                };
                if record.offset >= stop_before
                    || stop_at_timestamp.is_some_and(|ms| record.timestamp >= ms)
                {
                    stop_before = position.min(record.offset);
                    break;
                }
                position = record.offset + 1;
                progressed = true;
                line.clear();
                match &args.format_string {
                    Some(format) => {
                        format.render(&mut line, &record, &topic, partition, null_marker)
                    }
                    None => render(&mut line, &record, args, null_marker),
                }
                out.write_all(&line)?;
                printed += 1;
                if printed >= limit {
                    break;
                }
            }
            if let Some(skipped_to) = records.skipped_to()
                && skipped_to > position
            {
                // Only aborted records (or markers) lay there: the next pass reads past them.
                position = skipped_to;
                progressed = true;
            }
            drop(records);
            if printed >= limit || !args.follow || position >= stop_before {
                break;
            }
            if !progressed {
                // What a reader sees is flushed before it waits, as a tail does.
                out.flush()?;
                wait(
                    &log,
                    position,
                    bound,
                    isolation,
                    Duration::from_millis(args.poll_ms.max(1)),
                )?;
            }
        }
        out.flush()?;
        Ok(())
    })();
    match result {
        Ok(()) => Ok(crate::finish_reading(&log)),
        Err(ConsumeError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            Ok(Outcome::Done)
        }
        Err(ConsumeError::Output(e)) => Err(CliError::new(format!(
            "cannot write to standard output: {e}"
        ))),
        Err(ConsumeError::Log(e)) => {
            // Flushed first: the error follows the output it ends.
            let _ = out.flush();
            crate::stopped_reading(e)
        }
    }
}

/// Where the run starts (`-o`, `--timestamp`, `--end`), and the timestamp it stops before (`-o
/// e@MS`, `--end-timestamp`), if any. The outer error is a bad argument; the inner one, a log
/// that failed to answer (corrupt bytes), which ends the run as a reading error.
fn start_position(
    log: &Log,
    args: &ConsumeArgs,
    isolation: Isolation,
) -> Result<partlog::Result<(i64, Option<i64>)>, CliError> {
    let start = log.log_start_offset();
    let end = log.log_end_offset();
    // Where a read_committed consumer's "end" is: the last stable offset (Kafka's ListOffsets
    // LATEST under read_committed).
    let readable_end = match isolation {
        Isolation::ReadCommitted => log.last_stable_offset().min(end),
        _ => end,
    };
    let mut start_spec = None;
    let mut end_timestamp = args.end_timestamp;
    for spec in &args.offset {
        match spec {
            OffsetSpec::EndTimestamp(ms) => end_timestamp = Some(*ms),
            _ if start_spec.is_some() => {
                return Err(CliError::new(
                    "-o gives two starts: give one start (and at most one e@MS to stop at)",
                ));
            }
            spec => start_spec = Some(*spec),
        }
    }
    if args.timestamp.is_some() {
        start_spec = args.timestamp.map(OffsetSpec::StartTimestamp);
    } else if args.end {
        start_spec = Some(OffsetSpec::End);
    }
    let position = match start_spec.unwrap_or(OffsetSpec::Beginning) {
        OffsetSpec::Offset(offset) => {
            let offset = if offset < 0 {
                readable_end.saturating_add(offset).max(start)
            } else {
                offset
            };
            if offset < start || offset > end {
                return Err(CliError::new(format!(
                    "--offset {offset} is out of range: the log holds offsets [{start}, {end})"
                )));
            }
            offset
        }
        OffsetSpec::StartTimestamp(timestamp) => match log.offset_for_timestamp(timestamp) {
            Ok(Some((offset, _))) => offset,
            // Every record is older: start where the next one will come.
            Ok(None) => end,
            Err(error) => return Ok(Err(error)),
        },
        OffsetSpec::End => readable_end,
        OffsetSpec::Beginning | OffsetSpec::EndTimestamp(_) => start,
    };
    Ok(Ok((position, end_timestamp)))
}

/// Waits up to one poll for data at `position` within `bound` (and, read_committed, below the
/// last stable offset).
fn wait(
    log: &Log,
    position: i64,
    bound: ReadBound,
    isolation: Isolation,
    poll: Duration,
) -> partlog::Result<()> {
    if isolation == Isolation::ReadCommitted
        && log.last_stable_offset() <= position
        && log.log_end_offset() > position
    {
        // The data is there, its transaction still open: the marker comes with a later poll.
        std::thread::sleep(poll);
        return Ok(());
    }
    match bound {
        ReadBound::LogEnd => {
            log.wait_for_data(position, poll)?;
        }
        _ => {
            // The durable offset moves with the writer's checkpoint, which a poll re-reads.
            if log.durable_offset() <= position {
                std::thread::sleep(poll);
            }
        }
    }
    Ok(())
}

enum ConsumeError {
    Log(partlog::Error),
    Output(std::io::Error),
}

impl From<partlog::Error> for ConsumeError {
    fn from(error: partlog::Error) -> Self {
        ConsumeError::Log(error)
    }
}

impl From<std::io::Error> for ConsumeError {
    fn from(error: std::io::Error) -> Self {
        ConsumeError::Output(error)
    }
}

fn render(out: &mut Vec<u8>, record: &LogRecord, args: &ConsumeArgs, null_marker: &[u8]) {
    match args.format {
        Format::Text => {
            if let Some(separator) = &args.key_separator {
                out.extend_from_slice(record.key.as_deref().unwrap_or(null_marker));
                out.extend_from_slice(separator.bytes());
            }
            out.extend_from_slice(record.value.as_deref().unwrap_or(null_marker));
        }
        Format::Json => crate::record_json::write_log_record(out, record),
    }
    out.extend_from_slice(args.delimiter.bytes());
}
