//! `partlog consume DIR`: records out, kcat-like, through a read-only open that tolerates a live
//! writer in another process.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgGroup, Args, ValueEnum};
use partlog::{Log, LogRecord, ReadBound};

use crate::text::json_bytes;
use crate::{CliError, Outcome};

pub const EXAMPLES: &str = "\
Examples:
  partlog consume /tmp/orders-0                       # every record, values only, then exit
  partlog consume /tmp/orders-0 --offset 1000 --count 10 --format json
  partlog consume /tmp/orders-0 --offset -5          # the last five records
  partlog consume /tmp/orders-0 --timestamp 1700000000000   # from the first record at/after it
  partlog consume /tmp/orders-0 --end --follow        # like kcat -o end: new records as they come
  partlog consume /tmp/orders-0 --follow --durable-only --key-separator =

The log is opened read-only without a lock, so a process may be writing it meanwhile
(allow_live_writer): --follow polls the directory every --poll-ms and prints each record once its
batch is complete. --durable-only prints only what the writer has recorded as durable (fsynced),
so nothing printed can vanish in a crash of the writer's machine.

text prints each value as raw bytes and a newline (a tombstone as an empty line); with
--key-separator SEP, the key, SEP, then the value (what `partlog produce --key-separator SEP`
reads back). json prints one object per record:
  {\"offset\":0,\"timestamp\":1700000000000,\"key\":\"user1\",\"value\":\"hello\",\"headers\":[]}
(the same object as `partlog dump --json`; non-UTF-8 bytes as {\"base64\":\"...\"}).";

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

    /// Start at this offset (default: the log start offset); a negative N starts N records
    /// before the end, as kcat's -o -N does.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub offset: Option<i64>,

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

    /// Stop after N records.
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,

    /// In the text format, print the key, SEP and the value.
    #[arg(long, value_name = "SEP")]
    pub key_separator: Option<String>,

    /// How often --follow looks for new data, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 100)]
    pub poll_ms: u64,
}

/// Runs `partlog consume`.
pub fn run(args: &ConsumeArgs) -> Result<Outcome, CliError> {
    crate::require_dir(&args.dir)?;
    let log = crate::open_live_reader(&args.dir, Duration::from_millis(args.poll_ms.max(1)))?;
    let bound = if args.durable_only {
        ReadBound::Durable
    } else {
        ReadBound::LogEnd
    };
    let start = log.log_start_offset();
    let end = log.log_end_offset();
    let mut position = if let Some(offset) = args.offset {
        let offset = if offset < 0 {
            end.saturating_add(offset).max(start)
        } else {
            offset
        };
        if offset < start || offset > end {
            return Err(CliError::new(format!(
                "--offset {offset} is out of range: the log holds offsets [{start}, {end})"
            )));
        }
        offset
    } else if let Some(timestamp) = args.timestamp {
        match log.offset_for_timestamp(timestamp)? {
            Some((offset, _)) => offset,
            // Every record is older: start where the next one will come.
            None => end,
        }
    } else if args.end {
        end
    } else {
        start
    };
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let mut printed = 0u64;
    let mut line = Vec::new();
    let limit = args.count.unwrap_or(u64::MAX);
    let result = (|| -> Result<(), ConsumeError> {
        while printed < limit {
            let mut progressed = false;
            for record in log.records(position, bound) {
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
                position = record.offset + 1;
                progressed = true;
                line.clear();
                render(&mut line, &record, args);
                out.write_all(&line)?;
                printed += 1;
                if printed >= limit {
                    break;
                }
            }
            if printed >= limit || !args.follow {
                break;
            }
            if !progressed {
                // What a reader sees is flushed before it waits, as a tail does.
                out.flush()?;
                wait(
                    &log,
                    position,
                    bound,
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
        Err(ConsumeError::Log(e)) => Err(e.into()),
    }
}

/// Waits up to one poll for data at `position` within `bound`.
fn wait(log: &Log, position: i64, bound: ReadBound, poll: Duration) -> partlog::Result<()> {
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

fn render(out: &mut Vec<u8>, record: &LogRecord, args: &ConsumeArgs) {
    match args.format {
        Format::Text => {
            if let Some(separator) = &args.key_separator {
                out.extend_from_slice(record.key.as_deref().unwrap_or_default());
                out.extend_from_slice(separator.as_bytes());
            }
            out.extend_from_slice(record.value.as_deref().unwrap_or_default());
        }
        Format::Json => json_log_record(out, record),
    }
    out.push(b'\n');
}

/// The object of `partlog dump --json`, for an owned record.
pub fn json_log_record(out: &mut Vec<u8>, record: &LogRecord) {
    out.extend_from_slice(b"{\"offset\":");
    out.extend_from_slice(record.offset.to_string().as_bytes());
    out.extend_from_slice(b",\"timestamp\":");
    out.extend_from_slice(record.timestamp.to_string().as_bytes());
    out.extend_from_slice(b",\"key\":");
    json_bytes(out, record.key.as_deref());
    out.extend_from_slice(b",\"value\":");
    json_bytes(out, record.value.as_deref());
    out.extend_from_slice(b",\"headers\":[");
    for (n, (key, value)) in record.headers.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        out.push(b'[');
        json_bytes(out, Some(key.as_bytes()));
        out.push(b',');
        json_bytes(out, value.as_deref());
        out.push(b']');
    }
    out.extend_from_slice(b"]}");
}
