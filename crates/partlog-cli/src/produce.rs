//! `partlog produce DIR`: standard input, one record per line (or per `-D` delimiter, or per JSON
//! object: produce_input.rs), into the log.

use std::io::Write;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use partlog::unstable::{OsStorage, Storage};
use partlog::{
    Acks, CleanupPolicy, CompressionType, FlushPolicy, Log, LogAppendInfo, LogConfig, NewRecord,
    ProducerConfig, SendHandle,
};

use crate::kcat_format::Separator;
use crate::produce_input::{InputFormat, RecordParser};
use crate::{CliError, Outcome};

pub const EXAMPLES: &str = r##"Examples:
  # Three records, keys split off at the first '=' (the line without '=' gets a null key):
  printf 'user1=hello\nuser2=world\nno key here\n' | partlog produce /tmp/orders-0 --key-separator =

  # Headers and tombstones: 'h1:v1,h2:v2<TAB>key=value'; a value 'NULL' is a tombstone:
  printf 'src:web\tuser1=hello\nsrc:app\tuser1=NULL\n' | partlog produce /tmp/users-0 \
    --header-separator '\t' --key-separator = --null-marker NULL --header env=prod

  # Every record fsynced before its offset is printed (acknowledged):
  seq 1 1000 | partlog produce /tmp/orders-0 --flush always --print-offsets

  # A compacted log (every line needs a key):
  printf 'user1=a\nuser2=b\nuser1=c\nuser2=DELETE\n' | partlog produce /tmp/users-0 \
      --key-separator = --cleanup-policy compact --tombstone-value DELETE

  # zstd batches of 500 records in 64 MiB segments:
  partlog produce /tmp/orders-0 --compression zstd --batch 500 --segment-bytes 67108864 < events.txt

  # A million lines, batched by the producer (16 KiB batches), into a new directory tree:
  seq 1 1000000 | partlog produce /tmp/new/tree/numbers-0 --create --max-message-bytes 2097152

  # Idempotent batches of producer 7, their sequences continuing from the log's producer state;
  # then the whole input as one transaction, committed at the end (aborted on an input error):
  seq 1 100 | partlog produce /tmp/ledger-0 --producer-id 7 --producer-epoch 0
  printf 'alice=-10\nbob=10\n' | partlog produce /tmp/ledger-0 --producer-id 7 --transactional \
      --key-separator =
  partlog consume /tmp/ledger-0 --isolation-level read_committed   # committed records only

  # Values with newlines in them: records end at a NUL byte instead (kcat's -D), keys at a tab:
  find . -print0 | partlog produce /tmp/files-0 -D '\0'
  printf 'k1\tline 1\nline 2\0' | partlog produce /tmp/notes-0 -D '\0' -K '\t'

  # JSON, one object per line, as 'consume --format json' prints it: a log copied exactly, with
  # its timestamps, headers, binary bytes and tombstones (the copy gets its own offsets):
  partlog consume /tmp/orders-0 --format json | partlog produce /tmp/orders-copy-0 --format json
  echo '{"key":"k","value_b64":"AAoB","headers":{"src":"web"},"timestamp":1700000000000}' |
    partlog produce /tmp/orders-0 --format json

Each line of standard input becomes one record: its bytes up to the newline (a '\r' before the
newline is kept; a last line without a newline is a record too). With -D DELIM, records end at
DELIM instead: one or more bytes, with kcat's escapes \n \r \t \0 \xNN and \\ (-K and
--header-separator take them too). The timestamp is the time of reading.

--format json reads each record as one JSON object, {"key":..,"value":..,"headers":..,
"timestamp":..}, every member optional. key, value and header values are a string (its UTF-8
bytes), null, or {"base64":"..."}; "key_b64" and "value_b64" hold base64 instead. headers is
[["name",value],...] (what consume prints: order and repeated names kept) or {"name":value,...}.
A missing timestamp is the time of reading; "offset" is ignored (the log assigns offsets); a
blank line is skipped; an unknown member is an error.

A bad input record (a line that is not such an object) stops the run: the records before it are
written, nothing from it on. So does a record the log refuses (over max.message.bytes). Either
way one line on standard error names its line (or record) number and says what this run wrote,
exit status 2.

The log is created if DIR does not exist (its parent must exist, or add --create), and closed
cleanly at the end of input; a directory of other files is refused. Records are batched as
kafka-console-producer batches them (--batch-size, --linger-ms; --batch N for exactly N per
batch), and a summary goes to standard error at the end (--quiet: none).
--cleanup-policy, --compression and --segment-bytes are stored with the log (partlog.properties,
see 'partlog config'): a later produce without them keeps the log as it was made.
With --producer-id the batches are idempotent (Kafka's enable.idempotence); --transactional makes
the input one transaction: committed at the end of the input, or aborted on an input error (a line
the log refuses, an unreadable input), so that read_committed consumers see all of it or none;
--no-commit leaves it open for 'partlog txn commit|abort' or a later --transactional produce."##;

/// The codecs `produce` writes batches with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Codec {
    /// Uncompressed batches.
    None,
    /// LZ4 frames, as Kafka writes them.
    Lz4,
    /// zstd frames.
    Zstd,
}

/// Arguments of `partlog produce`.
#[derive(Debug, Args)]
pub struct ProduceArgs {
    /// The log directory (a Kafka partition directory); created if missing.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,

    /// Split each line into key and value at the first SEP; a line without SEP gets a null key
    /// and the whole line as value (kcat's -K: SEP takes -D's escapes).
    #[arg(short = 'K', long, value_name = "SEP", value_parser = Separator::parse)]
    pub key_separator: Option<Separator>,

    /// Each line starts with its headers, up to the first SEP: 'k1:v1,k2:v2' (a header without
    /// ':' has a null value), as kafka-console-producer's parse.headers reads them.
    #[arg(long, value_name = "SEP", value_parser = Separator::parse)]
    pub header_separator: Option<Separator>,

    /// What ends each record of the input (kcat's -D): one or more bytes, with the escapes \n
    /// \r \t \0 \xNN and \\ (a backslash).
    #[arg(short = 'D', long, value_name = "DELIM", default_value = "\\n", value_parser = Separator::parse)]
    pub delimiter: Separator,

    /// How each input record is read: text ([headers SEP] [key SEP] value), or json (one object,
    /// as 'partlog consume --format json' prints it; see below).
    #[arg(long, value_enum, default_value_t = InputFormat::Text, conflicts_with_all = ["key_separator", "header_separator", "null_marker"])]
    pub format: InputFormat,

    /// A header for every record, KEY=VALUE (repeatable), like kcat -H.
    #[arg(long = "header", value_name = "KEY=VALUE", value_parser = parse_header)]
    pub headers: Vec<(String, Vec<u8>)>,

    /// A value equal to MARKER is a tombstone (a null value), like kafka-console-producer's
    /// null.marker.
    /// `--tombstone-value` is another name for it.
    #[arg(long, value_name = "MARKER", alias = "tombstone-value")]
    pub null_marker: Option<String>,

    /// The codec of the batches written (Kafka's compression.type; stored with the log). By
    /// default, the log's stored compression.type, else none.
    #[arg(long, value_name = "CODEC", value_enum)]
    pub compression: Option<Codec>,

    /// When appends are fsynced: always (each append, before it is acknowledged), never (the
    /// OS decides, Kafka's default), or interval:MS (at least every MS milliseconds).
    #[arg(long, value_name = "POLICY", value_parser = parse_flush, default_value = "never")]
    pub flush: FlushPolicy,

    /// The size at which a segment rolls (Kafka's segment.bytes; at least 1048576).
    #[arg(long, value_name = "N")]
    pub segment_bytes: Option<u32>,

    /// Let --segment-bytes go down to 1024 bytes, below Kafka's 1 MiB floor, to make many small
    /// segments (for tests, like Kafka's internal.segment.bytes).
    #[arg(long)]
    pub allow_small_segments: bool,

    /// Exactly N records per batch, each batch one append (a partial batch at the end of
    /// input). Without it, records are batched as kafka-console-producer batches them, through
    /// the crate's Producer: up to --batch-size bytes, or --linger-ms after a batch's first
    /// record.
    #[arg(long, value_name = "N", value_parser = parse_batch, conflicts_with_all = ["batch_size", "linger_ms"])]
    pub batch: Option<NonZeroUsize>,

    /// The producer's batch.size: a batch is sealed once its records take this many bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 16384, value_parser = clap::value_parser!(u32).range(1..))]
    pub batch_size: u32,

    /// The producer's linger.ms: how long a batch waits for more records after its first.
    #[arg(long, value_name = "MS", default_value_t = 5)]
    pub linger_ms: u64,

    /// The log's max.message.bytes: the largest batch an append accepts (stored with the log).
    #[arg(long, value_name = "BYTES")]
    pub max_message_bytes: Option<u32>,

    /// Also create DIR's missing parent directories. Without it, produce creates DIR only in
    /// an existing directory, and never writes into a directory of files that are not a log.
    #[arg(long)]
    pub create: bool,

    /// No summary line on standard error at the end.
    #[arg(long, short = 'q')]
    pub quiet: bool,

    /// The log's cleanup.policy (Kafka's syntax: delete, compact, or compact,delete), stored
    /// with the log (partlog.properties) for every later command. By default, the stored
    /// policy, else delete. A compacted log takes only keyed records: use --key-separator, and
    /// give every line a key.
    #[arg(long, value_name = "POLICY", value_parser = parse_cleanup_policy)]
    pub cleanup_policy: Option<CleanupPolicy>,

    /// Print the offset of each line on standard output, one per line, once its append is
    /// acknowledged: after the fsync with --flush always; otherwise once the batch is written
    /// to the file (it then survives a crash of this process, not necessarily of the machine).
    #[arg(long)]
    pub print_offsets: bool,

    /// Idempotent and transactional writes (`txn.rs`).
    #[command(flatten)]
    pub producer_mode: crate::txn::ProducerModeArgs,
}

fn parse_header(value: &str) -> Result<(String, Vec<u8>), String> {
    match value.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.as_bytes().to_vec())),
        _ => Err(format!("{value:?} is not KEY=VALUE")),
    }
}

fn parse_cleanup_policy(value: &str) -> Result<CleanupPolicy, String> {
    CleanupPolicy::from_kafka_str(value).map_err(|error| error.to_string())
}

fn parse_batch(value: &str) -> Result<NonZeroUsize, String> {
    match value.parse::<usize>() {
        Ok(n) => NonZeroUsize::new(n).ok_or_else(|| "a batch holds at least 1 record".to_owned()),
        Err(_) => Err(format!("{value:?} is not a number of records")),
    }
}

fn parse_flush(value: &str) -> Result<FlushPolicy, String> {
    match value {
        "always" => Ok(FlushPolicy::EveryAppend),
        "never" => Ok(FlushPolicy::OsDecides),
        _ => {
            let millis = value
                .strip_prefix("interval:")
                .ok_or_else(|| "expected always, never or interval:MS".to_owned())?;
            match millis.parse::<u64>() {
                Ok(0) => Err("interval:0 would fsync without pause; use always".into()),
                Ok(ms) => Ok(FlushPolicy::Interval(Duration::from_millis(ms))),
                Err(_) => Err(format!(
                    "{millis:?} is not a number of milliseconds (expected interval:MS)"
                )),
            }
        }
    }
}

/// Runs `partlog produce`.
pub fn run(args: &ProduceArgs) -> Result<Outcome, CliError> {
    let mut builder = if args.allow_small_segments {
        LogConfig::builder_for_tests()
    } else {
        LogConfig::builder()
    };
    // Flags given are stored with the log; the rest come from its stored settings.
    builder = builder.flush_policy(args.flush);
    if let Some(codec) = args.compression {
        builder = builder.compression_type(match codec {
            Codec::None => CompressionType::Uncompressed,
            Codec::Lz4 => CompressionType::Lz4,
            Codec::Zstd => CompressionType::Zstd,
        });
    }
    if let Some(policy) = args.cleanup_policy {
        builder = builder.cleanup_policy(policy);
    }
    if let Some(segment_bytes) = args.segment_bytes {
        builder = builder.segment_bytes(segment_bytes);
    }
    if let Some(max_message_bytes) = args.max_message_bytes {
        builder = builder.max_message_bytes(max_message_bytes);
    }
    let config = builder.build().map_err(|error| match error {
        partlog::Error::InvalidConfig {
            setting: "segment.bytes",
            ..
        } if !args.allow_small_segments => CliError::new(format!(
            "{error} (--allow-small-segments lowers the floor to 1024, for tests)"
        )),
        other => other.into(),
    })?;
    check_target(&args.dir, args.create)?;
    let log = std::sync::Arc::new(crate::open_writable(&args.dir, config)?);
    let end_before = log.log_end_offset();
    let mut producer = Producer {
        log: &log,
        parser: RecordParser {
            format: args.format,
            key_separator: args.key_separator.as_ref().map(Separator::bytes),
            header_separator: args.header_separator.as_ref().map(Separator::bytes),
            static_headers: &args.headers,
            null_marker: args.null_marker.as_deref().map(str::as_bytes),
        },
        delimiter: args.delimiter.bytes(),
        print_offsets: args.print_offsets,
        // Not locked for the run: the batched path prints from its settling thread.
        out: std::io::BufWriter::new(std::io::stdout()),
        pending: Vec::with_capacity(args.batch.map_or(1, NonZeroUsize::get)),
        first_pending_line: 1,
        last_pending_line: 1,
    };
    let produced = match args.batch {
        Some(batch) => produce_in_batches_of(&mut producer, batch.get())
            .map(|first| (first, crate::txn::Ended::NoTransaction)),
        None => produce_batched(&mut producer, &log, args),
    };
    drop(producer);
    let stats = log.stats();
    log.close()?;
    let (first, ended) = produced.map_err(|error| {
        crate::produce_input::with_what_was_written(
            error,
            &args.dir,
            end_before,
            stats.log_end_offset,
        )
    })?;
    if !args.quiet {
        // Data records: a transaction's marker is counted in the bytes and batches only.
        let records = stats.appended_records - ended.markers();
        let range = match first {
            Some(first) => format!(
                "offsets [{first}, {}]{}",
                stats.log_end_offset - 1 - ended.markers() as i64,
                ended.summary()
            ),
            None => "no records".to_owned(),
        };
        eprintln!(
            "partlog: produced {records} records to {}: {range}, {} bytes in {} batches",
            args.dir.display(),
            stats.appended_bytes,
            stats.appends
        );
    }
    Ok(Outcome::Done)
}

/// Refuses a DIR that is a file, a DIR whose parent is missing (without --create) or not
/// writable, and a directory that holds files but no log, each with a message that names what
/// the user gave rather than a file inside it.
fn check_target(dir: &std::path::Path, create: bool) -> Result<(), CliError> {
    let storage = OsStorage::new();
    match storage.metadata(dir) {
        Ok(metadata) if !metadata.is_dir => Err(CliError::new(format!(
            "{} is not a directory",
            dir.display()
        ))),
        Ok(_) => {
            let names = storage.list(dir)?;
            let is_log = names.iter().any(|name| {
                name.ends_with(".log") || name.starts_with("partlog.") || name.ends_with(".index")
            });
            if names.is_empty() || is_log {
                Ok(())
            } else {
                Err(CliError::new(format!(
                    "{} holds files but no log (no .log segment, no partlog.checkpoint): give an \
                     empty or new directory",
                    dir.display()
                )))
            }
        }
        Err(error) if error.io_kind() == Some(std::io::ErrorKind::NotFound) => {
            let parent = dir
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(std::path::Path::new("."));
            if !create && !storage.exists(parent)? {
                return Err(CliError::new(format!(
                    "no such directory: {} (add --create to create it and the log {} in it)",
                    parent.display(),
                    dir.display()
                )));
            }
            if storage.exists(parent)? && !writable(parent) {
                return Err(CliError::new(format!(
                    "cannot create {}: {} is not writable by this user",
                    dir.display(),
                    parent.display()
                )));
            }
            Ok(())
        }
        Err(error) => Err(error.into()),
    }
}

/// Whether this process may create entries in `dir` (access(2) with W_OK and X_OK).
fn writable(dir: &std::path::Path) -> bool {
    rustix::fs::access(
        dir,
        rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK,
    )
    .is_ok()
}

/// `--batch N`: exactly N records per append. Returns the first offset written, if any. The
/// records before a bad one are appended before its error is returned.
fn produce_in_batches_of<W: Write>(
    producer: &mut Producer<'_, W>,
    batch: usize,
) -> Result<Option<i64>, CliError> {
    let mut first = None;
    let delimiter = producer.delimiter;
    let read = crate::produce_input::for_each_record(
        std::io::stdin().lock(),
        delimiter,
        |input, line_number| {
            let Some(record) = producer.parse(input, line_number)? else {
                return Ok(true);
            };
            if producer.pending.is_empty() {
                producer.first_pending_line = line_number;
            }
            producer.pending.push(record);
            producer.last_pending_line = line_number;
            if producer.pending.len() == batch {
                let appended = producer.append()?;
                first.get_or_insert(appended);
            }
            Ok(true)
        },
    );
    if !producer.pending.is_empty() {
        let appended = producer.append()?;
        first.get_or_insert(appended);
    }
    read?;
    Ok(first)
}

/// The default: records batched by the crate's `Producer` (batch.size, linger.ms), as
/// kafka-console-producer batches them. A settling thread waits for each record's handle in
/// input order and prints its offset once acknowledged (with --print-offsets), so that an
/// offset shows while standard input is still open: a caller may wait for it before writing the
/// next line. With --transactional the input is one transaction (`txn.rs`). Returns the first
/// offset written, if any, and how the transaction ended.
fn produce_batched<W: Write>(
    producer: &mut Producer<'_, W>,
    log: &std::sync::Arc<Log>,
    args: &ProduceArgs,
) -> Result<(Option<i64>, crate::txn::Ended), CliError> {
    use std::sync::atomic::{AtomicBool, Ordering};
    let acks = if args.flush == FlushPolicy::EveryAppend {
        Acks::All
    } else {
        Acks::One
    };
    let config = ProducerConfig::builder()
        .batch_size(args.batch_size)
        .linger_ms(args.linger_ms)
        .acks(acks)
        .mode(args.producer_mode.mode())
        .build()?;
    let sender = crate::txn::start_producer(log, config, &args.producer_mode, args.quiet)?;
    let (handles, settling) = std::sync::mpsc::channel::<(u64, SendHandle)>();
    let failed_early = std::sync::Arc::new(AtomicBool::new(false));
    let settler = {
        let failed_early = std::sync::Arc::clone(&failed_early);
        let print = args.print_offsets;
        std::thread::Builder::new()
            .name("partlog-produce-acks".into())
            .spawn(move || settle(&settling, print, &failed_early))
            .map_err(|e| CliError::new(format!("cannot start a thread: {e}")))?
    };
    let sent = crate::produce_input::for_each_record(
        std::io::stdin().lock(),
        producer.delimiter,
        |input, line_number| {
            if failed_early.load(Ordering::Relaxed) {
                // An append failed: the settler reports it; stop reading.
                return Ok(false);
            }
            let Some(record) = producer.parse(input, line_number)? else {
                return Ok(true);
            };
            let handle = sender
                .send(&record)
                .map_err(|error| producer.append_error(line_number, line_number, &error))?;
            // The settler only ends after this sender is dropped.
            let _ = handles.send((line_number, handle));
            Ok(true)
        },
    );
    drop(handles);
    // The transaction ends before the close: committed, left open, or aborted after an error.
    let (ended, end_result) =
        crate::txn::end_transaction(&sender, &args.producer_mode, sent.is_ok(), args.quiet);
    // Whatever was sent is drained and settled, even after a failure, before the log closes:
    // the lines before a bad one are acknowledged, and their offsets printed.
    let closed = sender.close();
    let settled = settler
        .join()
        .map_err(|_| CliError::new("the thread printing offsets panicked"))?;
    let outcome = (|| {
        sent?;
        if let Some((line_number, error)) = &settled.failed {
            return Err(producer.append_error(*line_number, *line_number, error));
        }
        end_result?;
        closed?;
        if let Some(error) = settled.write_error {
            return Err(CliError::new(format!(
                "cannot write to standard output: {error}"
            )));
        }
        Ok(settled.first)
    })();
    outcome
        .map(|first| (first, ended))
        .map_err(|error| ended.explain(error))
}

/// What the settling thread saw.
struct Settled {
    /// The first offset acknowledged.
    first: Option<i64>,
    /// The first record that failed, by input line.
    failed: Option<(u64, partlog::Error)>,
    /// The first error writing an offset.
    write_error: Option<std::io::Error>,
}

/// Waits for each handle in input order, printing its offset when `print`; flushes whenever it
/// has caught up with the sends, so that each offset shows as soon as it is acknowledged.
fn settle(
    handles: &std::sync::mpsc::Receiver<(u64, SendHandle)>,
    print: bool,
    failed_early: &std::sync::atomic::AtomicBool,
) -> Settled {
    use std::sync::mpsc::TryRecvError;
    let mut out = std::io::BufWriter::new(std::io::stdout());
    let mut settled = Settled {
        first: None,
        failed: None,
        write_error: None,
    };
    loop {
        let (line_number, handle) = match handles.try_recv() {
            Ok(next) => next,
            Err(TryRecvError::Empty) => {
                if print
                    && settled.write_error.is_none()
                    && let Err(error) = out.flush()
                {
                    settled.write_error = Some(error);
                }
                match handles.recv() {
                    Ok(next) => next,
                    Err(_) => break,
                }
            }
            Err(TryRecvError::Disconnected) => break,
        };
        match handle.wait() {
            Ok(offset) => {
                settled.first.get_or_insert(offset);
                if print
                    && settled.write_error.is_none()
                    && let Err(error) = writeln!(out, "{offset}")
                {
                    settled.write_error = Some(error);
                }
            }
            Err(error) => {
                failed_early.store(true, std::sync::atomic::Ordering::Relaxed);
                settled.failed.get_or_insert((line_number, error));
            }
        }
    }
    if print
        && settled.write_error.is_none()
        && let Err(error) = out.flush()
    {
        settled.write_error = Some(error);
    }
    settled
}

/// Lines waiting to be appended as one batch, and where their offsets go.
struct Producer<'a, W: Write> {
    log: &'a Log,
    /// What turns an input record into a record (produce_input.rs).
    parser: RecordParser<'a>,
    /// What ends each input record (`-D`).
    delimiter: &'a [u8],
    print_offsets: bool,
    out: W,
    pending: Vec<NewRecord>,
    /// The input line number of the first pending record, for error messages.
    first_pending_line: u64,
    /// That of the last one (blank JSON lines between records are skipped).
    last_pending_line: u64,
}

impl<W: Write> Producer<'_, W> {
    /// The record that input record `number` holds (`None`: a blank JSON line), or the error
    /// that names it.
    fn parse(&self, input: &[u8], number: u64) -> Result<Option<NewRecord>, CliError> {
        self.parser.parse(input).map_err(|what| {
            CliError::new(format!(
                "{} {number} of standard input: {what}",
                crate::produce_input::unit(self.delimiter)
            ))
        })
    }

    /// Appends the pending records as one batch, then prints their offsets. The offsets are
    /// printed and flushed only after `append` returned (under `--flush always`, after its
    /// fsync), so that no printed offset is ever unacknowledged, even if the process is killed.
    /// Returns the batch's first offset.
    fn append(&mut self) -> Result<i64, CliError> {
        let info: LogAppendInfo = self.log.append(&self.pending).map_err(|error| {
            let error = self.append_error(self.first_pending_line, self.last_pending_line, &error);
            // Refused, and named in the error: never appended again.
            self.pending.clear();
            error
        })?;
        self.pending.clear();
        for offset in info.first_offset..=info.last_offset {
            self.print_offset(offset)?;
        }
        self.flush_offsets()?;
        Ok(info.first_offset)
    }

    /// The error for lines `first..=last` that could not be appended; a batch over the limit
    /// names `max.message.bytes` and how to raise it.
    fn append_error(&self, first: u64, last: u64, error: &partlog::Error) -> CliError {
        let unit = crate::produce_input::unit(self.delimiter);
        let lines = if first == last {
            format!("{unit} {last}")
        } else {
            format!("{unit}s {first}-{last}")
        };
        match error {
            partlog::Error::RecordTooLarge {
                size,
                max,
                limit: "max.message.bytes",
            } => CliError::new(format!(
                "cannot append {lines}: a batch of {size} bytes exceeds max.message.bytes \
                 ({max}); raise it with --max-message-bytes N (stored with the log) or \
                 'partlog config {} --set max.message.bytes=N'",
                self.log.dir().display()
            )),
            error => CliError::new(format!("cannot append {lines}: {error}")),
        }
    }

    /// Prints an acknowledged offset (with --print-offsets).
    fn print_offset(&mut self, offset: i64) -> Result<(), CliError> {
        if self.print_offsets {
            writeln!(self.out, "{offset}")
                .map_err(|e| CliError::new(format!("cannot write to standard output: {e}")))?;
        }
        Ok(())
    }

    /// Flushes the printed offsets, so that a reader sees each as soon as it is acknowledged.
    fn flush_offsets(&mut self) -> Result<(), CliError> {
        if self.print_offsets {
            self.out
                .flush()
                .map_err(|e| CliError::new(format!("cannot write to standard output: {e}")))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flush_policies_parse() {
        assert_eq!(parse_flush("always"), Ok(FlushPolicy::EveryAppend));
        assert_eq!(parse_flush("never"), Ok(FlushPolicy::OsDecides));
        assert_eq!(
            parse_flush("interval:250"),
            Ok(FlushPolicy::Interval(Duration::from_millis(250)))
        );
        assert!(parse_flush("interval:0").is_err());
        assert!(parse_flush("interval:soon").is_err());
        assert!(parse_flush("sometimes").is_err());
    }
}
