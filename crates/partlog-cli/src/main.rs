//! `partlog`: the command-line tool for partlog logs (the workspace crate crates/partlog-cli).
//!
//! ```text
//! partlog produce DIR          append the lines of standard input to the log in DIR
//! partlog consume DIR          print its records (kcat-like; --follow tails a live writer)
//! partlog dump DIR             print its batches (--records, --index), like kafka-dump-log
//! partlog verify DIR           check every batch and index (--repair fixes what it can)
//! partlog stats DIR            segments, sizes, offsets, the durable offset, the time range
//! partlog perf-produce DIR     kafka-producer-perf-test's figures for appends
//! partlog perf-consume DIR     kafka-consumer-perf-test's figures for reads
//! partlog delete-records DIR --before N   move the log start offset up
//! partlog retention DIR        apply retention now
//! partlog upgrade SRC DST      rewrite a legacy or gzip/snappy partition directory as v2
//! partlog compact DIR          run one compaction pass (--delete-retention-ms, --min-lag-ms)
//! partlog config DIR           print the log's stored settings; --set key=value changes one
//! partlog roll DIR             seal the active segment (Kafka's UnifiedLog.roll())
//! partlog txn list|commit|abort DIR   the producers a log knows; end an open transaction
//! ```
//!
//! Every command uses the settings stored with the log (`partlog.properties`, Kafka's topic
//! config names) unless a flag overrides them.
//!
//! Reading commands (consume, dump, stats, perf-consume) open the log read-only without a lock
//! (`allow_live_writer`), so they work while an application writes it.
//!
//! Exit status: 0 on success; 1 when `verify` (or `dump --index`) finds corruption, or when
//! `dump`, `consume`, `stats` or `perf-consume` met corrupt bytes or missing offsets (they
//! print every valid batch before them, then the error); 2 for any error (bad arguments, a missing directory, an I/O error, a locked
//! log...), reported as one line on standard error: `partlog: <message>`.

/// Prints one line on standard output, as `println!` does, except that a failed write never
/// panics. A reader that went away (`partlog stats DIR | grep -q ...`) is not an error: the rest
/// of the output is dropped and the command still finishes its work (a repair, a retention pass).
/// Any other write error is remembered and reported by `main` as one line, exit status 2.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::stdout_line(::std::format_args!($($arg)*))
    };
}

mod compact;
mod config;
mod consume;
mod dump;
mod dump_epochs;
mod dump_file;
mod dump_index;
mod dump_txn;
mod dump_txn_state;
mod json;
mod kcat_format;
mod maint;
mod perf;
mod perf_producer;
mod produce;
mod produce_input;
mod record_json;
mod stats;
mod text;
mod txn;
mod upgrade;
mod verify;

use std::io::Write as _;
use std::process::ExitCode;
use std::sync::Mutex;

use clap::error::ErrorKind;
use clap::{Parser, Subcommand};

/// Exit status of a run that found corruption (`verify`).
const EXIT_CORRUPT: u8 = 1;
/// Exit status of any error: bad arguments, I/O, a locked log.
const EXIT_ERROR: u8 = 2;

const ABOUT: &str = "Write, read, check and upgrade partlog logs: Kafka partition directories \
                     (RecordBatch v2 .log files with Kafka's .index and .timeindex)";

const TOP_EXAMPLES: &str = "\
Examples:
  printf 'user1=hello\\nuser2=world\\n' | partlog produce /tmp/orders-0 --key-separator =
  partlog consume /tmp/orders-0 --key-separator =
  partlog consume /tmp/orders-0 --end --follow --format json
  partlog dump /tmp/orders-0 --records --index
  partlog verify /tmp/orders-0
  partlog stats /tmp/orders-0
  partlog perf-produce /tmp/perf-0 --records 1000000 --record-size 100
  partlog delete-records /tmp/orders-0 --before 1000
  partlog config /tmp/orders-0 --set retention.ms=604800000
  partlog roll /tmp/orders-0
  seq 1 5 | partlog produce /tmp/ledger-0 --producer-id 7 --transactional
  partlog txn commit /tmp/ledger-0 --producer-id 7 --producer-epoch 0
  partlog upgrade /var/kafka-0.10/orders-0 /tmp/orders-0

Reading commands (consume, dump, stats, perf-consume) take no lock: they work on a log that a
running application writes. Writing commands take the log's exclusive lock. Every command uses
the settings stored with the log (partlog.properties; see 'partlog config') unless a flag
overrides them.

Exit status: 0 on success, 1 when verify (or dump --index) finds corruption or when dump,
consume, stats or perf-consume meet corrupt bytes or missing offsets (they print every valid
batch before them, then the error), 2 on any error.";

/// The command line.
#[derive(Debug, Parser)]
#[command(
    name = "partlog",
    version,
    about = ABOUT,
    after_help = TOP_EXAMPLES,
    arg_required_else_help = true,
    propagate_version = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Append the lines of standard input to the log in DIR, one record per line.
    #[command(after_help = produce::EXAMPLES)]
    Produce(produce::ProduceArgs),
    /// Print the records of the log in DIR, kcat-like: from an offset, a timestamp or the end;
    /// --follow tails a log another process writes.
    #[command(after_help = consume::EXAMPLES)]
    Consume(consume::ConsumeArgs),
    /// Print the batches (and records, and index entries) of the log in DIR, like
    /// kafka-dump-log (opened read-only).
    #[command(after_help = dump::EXAMPLES)]
    Dump(dump::DumpArgs),
    /// Check every batch and every index entry of the log in DIR, without writing; --repair
    /// fixes what a crash left.
    #[command(after_help = verify::EXAMPLES)]
    Verify(verify::VerifyArgs),
    /// Segments, sizes, offsets, the durable offset and the time range of the log in DIR.
    #[command(after_help = stats::EXAMPLES)]
    Stats(stats::StatsArgs),
    /// Append generated records and print kafka-producer-perf-test's figures.
    #[command(after_help = perf::PRODUCE_EXAMPLES)]
    PerfProduce(perf::PerfProduceArgs),
    /// Read the log and print kafka-consumer-perf-test's figures.
    #[command(after_help = perf::CONSUME_EXAMPLES)]
    PerfConsume(perf::PerfConsumeArgs),
    /// Delete every record below an offset (move the log start offset up), like
    /// kafka-delete-records.
    #[command(after_help = maint::DELETE_RECORDS_EXAMPLES)]
    DeleteRecords(maint::DeleteRecordsArgs),
    /// Apply retention (retention.ms, retention.bytes) now and print what went.
    #[command(after_help = maint::RETENTION_EXAMPLES)]
    Retention(maint::RetentionArgs),
    /// Rewrite the partition directory SRC (legacy messages, gzip or snappy batches) into DST
    /// as RecordBatch v2, with the same offsets, timestamps, keys, values and headers.
    #[command(after_help = upgrade::EXAMPLES)]
    Upgrade(upgrade::UpgradeArgs),
    /// Run one compaction pass over the log in DIR: only the latest record of each key stays.
    #[command(after_help = compact::EXAMPLES)]
    Compact(compact::CompactArgs),
    /// Print the settings stored with the log in DIR (partlog.properties), or change one, like
    /// kafka-configs --describe and --alter.
    #[command(after_help = config::EXAMPLES)]
    Config(config::ConfigArgs),
    /// Seal the active segment of the log in DIR and start a new one (Kafka's
    /// UnifiedLog.roll()), so that retention and compaction can reach its records.
    #[command(after_help = maint::ROLL_EXAMPLES)]
    Roll(maint::RollArgs),
    /// The producers the log in DIR knows, and the end of a transaction one left open: list,
    /// commit, abort (like kafka-transactions describe-producers and abort).
    #[command(after_help = txn::EXAMPLES)]
    Txn(txn::TxnArgs),
}

/// The first error from writing standard output other than a closed pipe (see `outln!`).
static STDOUT_ERROR: Mutex<Option<std::io::Error>> = Mutex::new(None);
/// Set once standard output's reader has gone away: later lines are dropped.
static STDOUT_CLOSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Writes `line` and a newline to standard output; see `outln!`.
fn stdout_line(line: std::fmt::Arguments<'_>) {
    use std::sync::atomic::Ordering;
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    let written = out
        .write_fmt(line)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
    if let Err(error) = written {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
        if error.kind() != std::io::ErrorKind::BrokenPipe {
            let mut first = STDOUT_ERROR
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            first.get_or_insert(error);
        }
    }
}

/// Standard output for commands that write it through `Write` rather than `outln!`, with the
/// same rule: once the reader has gone away (`partlog dump DIR --index | grep -m3 ...`), every
/// write succeeds and is dropped, so the command finishes its work and exits quietly. Other
/// errors are returned as they are.
pub struct QuietStdout;

impl std::io::Write for QuietStdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        use std::sync::atomic::Ordering;
        if STDOUT_CLOSED.load(Ordering::Relaxed) {
            return Ok(buf.len());
        }
        match std::io::stdout().lock().write(buf) {
            Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => {
                STDOUT_CLOSED.store(true, Ordering::Relaxed);
                Ok(buf.len())
            }
            other => other,
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        use std::sync::atomic::Ordering;
        if STDOUT_CLOSED.load(Ordering::Relaxed) {
            return Ok(());
        }
        match std::io::stdout().lock().flush() {
            Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => {
                STDOUT_CLOSED.store(true, Ordering::Relaxed);
                Ok(())
            }
            other => other,
        }
    }
}

/// An error to report as one line, `partlog: <message>`.
#[derive(Debug)]
pub struct CliError(String);

impl CliError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        CliError(message.into())
    }
}

impl From<partlog::Error> for CliError {
    fn from(error: partlog::Error) -> Self {
        CliError(error.to_string())
    }
}

/// What a command reports besides success.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The command did what it was asked.
    Done,
    /// `verify` found corruption.
    Corrupt,
}

fn main() -> ExitCode {
    // A bug must still end in one line, never a backtrace (whatever RUST_BACKTRACE says).
    std::panic::set_hook(Box::new(|info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".to_owned());
        let location = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        eprintln!("partlog: internal error{location}: {}", one_line(&message));
    }));
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => return report_usage_error(&error),
    };
    let result = match &cli.command {
        Command::Produce(args) => produce::run(args),
        Command::Consume(args) => consume::run(args),
        Command::Dump(args) => dump::run(args),
        Command::Verify(args) => verify::run(args),
        Command::Stats(args) => stats::run(args),
        Command::PerfProduce(args) => perf::run_produce(args),
        Command::PerfConsume(args) => perf::run_consume(args),
        Command::DeleteRecords(args) => maint::run_delete_records(args),
        Command::Retention(args) => maint::run_retention(args),
        Command::Upgrade(args) => upgrade::run(args),
        Command::Compact(args) => compact::run(args),
        Command::Config(args) => config::run(args),
        Command::Roll(args) => maint::run_roll(args),
        Command::Txn(args) => txn::run(args),
    };
    let stdout_error = STDOUT_ERROR
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    let result = match (result, stdout_error) {
        (Ok(_), Some(error)) => Err(CliError::new(format!(
            "cannot write to standard output: {error}"
        ))),
        (result, _) => result,
    };
    match result {
        Ok(Outcome::Done) => ExitCode::SUCCESS,
        Ok(Outcome::Corrupt) => ExitCode::from(EXIT_CORRUPT),
        Err(CliError(message)) => {
            eprintln!("partlog: {}", one_line(&message));
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// Prints help and version as clap renders them (exit 0), and any other parse error as one line.
fn report_usage_error(error: &clap::Error) -> ExitCode {
    match error.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            // Printing help cannot usefully fail: a closed stdout just ends the run.
            let _ = error.print();
            ExitCode::SUCCESS
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = error.print();
            ExitCode::from(EXIT_ERROR)
        }
        _ => {
            eprintln!("partlog: {}", usage_error_line(&error.to_string()));
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// Folds clap's multi-line error (message, possible values, tips, usage) into one line that
/// ends by naming the help to read.
fn usage_error_line(rendered: &str) -> String {
    let mut parts = Vec::new();
    // Errors about a value carry no usage line: name the subcommand from the arguments.
    let mut command = match std::env::args().nth(1) {
        Some(name) if COMMANDS.contains(&name.as_str()) => {
            format!("partlog {name}")
        }
        _ => String::from("partlog"),
    };
    for line in rendered.lines().map(str::trim) {
        if let Some(usage) = line.strip_prefix("Usage:") {
            command = usage
                .split_whitespace()
                .take_while(|word| !word.starts_with(['[', '<']))
                .collect::<Vec<_>>()
                .join(" ");
        } else if line.starts_with("tip: to pass '-") {
            // "use '-- -1'": wrong for an option's value, and every option that takes a
            // negative number accepts it as it is.
            continue;
        } else if !line.is_empty() && !line.starts_with("For more information") {
            parts.push(line.strip_prefix("error: ").unwrap_or(line).to_owned());
        }
    }
    format!("{} (see '{command} --help')", parts.join(" "))
}

/// Every subcommand's name, for error messages that name the help to read.
const COMMANDS: &[&str] = &[
    "produce",
    "consume",
    "dump",
    "verify",
    "stats",
    "perf-produce",
    "perf-consume",
    "delete-records",
    "retention",
    "upgrade",
    "compact",
    "config",
    "roll",
    "txn",
];

/// Opens `dir` read-only without a lock, following a writer in another process if there is
/// one (`allow_live_writer`): what every reading command does.
///
/// Read-only inspection never needs a repair first: the open stops at the first invalid byte
/// below the recovery point (`RecoveryMode::TruncateAtCorruption`, which a read-only open
/// applies to its own view and never to the files), so the command shows every valid batch
/// before it; [`corruption_found`] then reports the bytes, as DumpLogSegments does.
pub fn open_live_reader(
    dir: &std::path::Path,
    poll_interval: std::time::Duration,
) -> Result<partlog::Log, CliError> {
    let config = partlog::LogConfig::builder()
        .allow_live_writer(true)
        .poll_interval(poll_interval)
        .recovery_mode(partlog::RecoveryMode::TruncateAtCorruption)
        .build()?;
    Ok(partlog::Log::open_read_only(dir, config)?)
}

/// After a reading command printed what `log` holds: the corruption its open stopped at, as
/// the error to end with (exit status 1), naming the file, the byte and what is wrong there.
pub fn corruption_found(log: &partlog::Log) -> Option<String> {
    let report = log.recovery_report();
    let (file, position, what) = report.corruption.as_ref()?;
    let later = match report.segments_deleted {
        0 => String::new(),
        1 => " and 1 later segment".to_owned(),
        n => format!(" and {n} later segments"),
    };
    Some(format!(
        "corrupt data in {} at byte {position}: {what}; everything before it was shown, the {} \
         bytes from there{later} were not read (partlog verify {} checks all of it)",
        file.display(),
        report.bytes_truncated,
        log.dir().display()
    ))
}

/// Ends a reading command that met `error` after printing what came before it: corrupt bytes
/// in a segment the open did not scan (it scans from the recovery point) end it as the open's
/// corruption does, with exit status 1 and one line that names them; any other error is one.
pub fn stopped_reading(error: partlog::Error) -> Result<Outcome, CliError> {
    match error {
        partlog::Error::Corrupt { .. } => {
            eprintln!("partlog: {error}; everything before it was shown");
            Ok(Outcome::Corrupt)
        }
        other => Err(other.into()),
    }
}

/// Ends a reading command: exit status 1 with the corruption its open stopped at on standard
/// error (after the output, which it follows), else `Done`.
pub fn finish_reading(log: &partlog::Log) -> Outcome {
    match corruption_found(log) {
        Some(message) => {
            eprintln!("partlog: {message}");
            Outcome::Corrupt
        }
        None => Outcome::Done,
    }
}

/// Opens `dir` for writing, as every writing command does, and says on standard error what the
/// open discarded, if anything (a torn tail a crash left, or what it cut under
/// `--truncate-at-corruption`). An open that refuses corrupt bytes names the repair that cuts the
/// log there.
pub fn open_writable(
    dir: &std::path::Path,
    config: partlog::LogConfig,
) -> Result<partlog::Log, CliError> {
    let log = partlog::Log::open(dir, config).map_err(|error| match error {
        partlog::Error::Corrupt { .. } | partlog::Error::DamagedWithoutCheckpoint { .. } => {
            CliError::new(format!(
                "{error}; 'partlog verify {} --repair --truncate-at-corruption' cuts the log \
                 there, after saying how many records go",
                dir.display()
            ))
        }
        other => other.into(),
    })?;
    if let Some(discarded) = &log.recovery_report().discarded {
        eprintln!("partlog: opening {} discarded {discarded}", dir.display());
    }
    Ok(log)
}

/// A config builder holding the settings stored with the log in `dir` (partlog.properties),
/// for the commands that do not open the log (`verify`), and that stores nothing: a flag given
/// to such a command applies to that run only.
pub fn stored_config_builder(dir: &std::path::Path) -> Result<partlog::LogConfigBuilder, CliError> {
    use partlog::unstable::{OsStorage, read_stored_settings};
    // The stored segment.bytes passed validation when it was stored, perhaps below 1 MiB.
    let mut builder = partlog::LogConfig::builder_for_tests().store_settings(false);
    for (key, value) in read_stored_settings(&OsStorage::new(), dir)? {
        builder = builder.set(&key, &value)?;
    }
    Ok(builder)
}

/// The base offsets of the directory's segments, from their `.log` file names, in order.
pub fn segment_bases(dir: &std::path::Path) -> Result<Vec<i64>, CliError> {
    use partlog::unstable::{OsStorage, list_segment_bases};
    Ok(list_segment_bases(&OsStorage::new(), dir)?)
}

/// Fails unless `dir` exists and is a directory, with a message that says which: the errors of
/// opening a missing log name a file inside it, which confuses.
pub fn require_dir(dir: &std::path::Path) -> Result<(), CliError> {
    use partlog::unstable::{OsStorage, Storage};
    match OsStorage::new().metadata(dir) {
        Ok(metadata) if metadata.is_dir => Ok(()),
        Ok(_) => Err(CliError::new(format!(
            "{} is not a directory",
            dir.display()
        ))),
        Err(error) if error.io_kind() == Some(std::io::ErrorKind::NotFound) => Err(CliError::new(
            format!("no such directory: {}", dir.display()),
        )),
        Err(error) => Err(error.into()),
    }
}

/// Joins the lines of a message, so that an error is always one line.
fn one_line(message: &str) -> String {
    message
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}
