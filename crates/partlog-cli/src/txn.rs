//! Idempotent and transactional writes from the tool: `produce`'s producer-mode flags
//! (`--producer-id`, `--producer-epoch`, `--transactional`, `--no-commit`) over the crate's
//! `Producer` modes, and `partlog txn list|commit|abort DIR`, which shows the producers a log
//! knows and ends a transaction left open (by `produce --transactional --no-commit`, a crash, or
//! another writer), as `kafka-transactions describe-producers` and `abort` do for a broker.

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, Subcommand};
use partlog::{ControlRecordType, Log, LogConfig, Producer, ProducerConfig, ProducerMode};

use crate::{CliError, Outcome};

/// `produce`'s flags for Kafka's producer modes.
#[derive(Debug, Args)]
pub struct ProducerModeArgs {
    /// Write idempotent batches with this producer id (Kafka's idempotent producer; a broker
    /// would hand the id out, here you give it): each batch carries the id, the epoch and its
    /// sequence, which continues from the sequence the log holds for the id and epoch, so a
    /// later produce with the same id goes on where this one stopped.
    #[arg(long, value_name = "P", conflicts_with = "batch")]
    pub producer_id: Option<i64>,

    /// The producer epoch of --producer-id (0 to 32767). A higher epoch than the log knows for
    /// the id fences the older writer, as Kafka's InitProducerId does; a lower one is refused.
    #[arg(long, value_name = "E", default_value_t = 0, requires = "producer_id")]
    pub producer_epoch: i16,

    /// Write the whole input as one transaction, committed at the end of the input. On an input
    /// error (a line the log refuses, an unreadable input) the transaction is aborted instead,
    /// and none of its records is ever seen by read_committed consumers. Needs --producer-id.
    /// A transaction the log holds open for the id at this epoch (left by --no-commit) is
    /// continued; one of an older epoch is aborted first.
    #[arg(long, requires = "producer_id")]
    pub transactional: bool,

    /// With --transactional: leave the transaction open at the end of the input, for a later
    /// 'produce --transactional' with the same id and epoch to continue, or for 'partlog txn
    /// commit|abort' to end. Until then read_committed consumers stop at its first record.
    #[arg(long, requires = "transactional")]
    pub no_commit: bool,
}

impl ProducerModeArgs {
    /// The crate's mode for these flags.
    pub fn mode(&self) -> ProducerMode {
        match self.producer_id {
            None => ProducerMode::Plain,
            Some(producer_id) if self.transactional => ProducerMode::Transactional {
                producer_id,
                producer_epoch: self.producer_epoch,
            },
            Some(producer_id) => ProducerMode::Idempotent {
                producer_id,
                producer_epoch: self.producer_epoch,
            },
        }
    }
}

/// Starts `produce`'s batching writer in the mode of `args`, saying on standard error (unless
/// `quiet`) what it does to a transaction the log holds open, and opens the run's transaction.
pub fn start_producer(
    log: &Arc<Log>,
    config: ProducerConfig,
    args: &ProducerModeArgs,
    quiet: bool,
) -> Result<Producer, CliError> {
    let note = |line: String| {
        if !quiet {
            eprintln!("partlog: {line}");
        }
    };
    let open = args.producer_id.and_then(|producer_id| {
        let entry = log.producer_state(producer_id)?;
        Some((entry.producer_epoch, entry.current_txn_first_offset?))
    });
    if let (Some((epoch, first)), Some(producer_id), true) =
        (open, args.producer_id, args.transactional)
        && epoch < args.producer_epoch
    {
        note(format!(
            "aborting the transaction producer {producer_id} left open at epoch {epoch} (since \
             offset {first}): epoch {} fences it",
            args.producer_epoch
        ));
    }
    let producer =
        Producer::new(Arc::clone(log), config).map_err(|error| refused_mode(error, args, log))?;
    if producer.in_transaction() {
        if let (Some((_, first)), Some(producer_id)) = (open, args.producer_id) {
            note(format!(
                "continuing the transaction producer {producer_id} (epoch {}) left open at \
                 offset {first}",
                args.producer_epoch
            ));
        }
    } else if args.transactional {
        producer.begin()?;
    }
    Ok(producer)
}

/// The error of a producer mode the log refused, with the flag that fixes it.
fn refused_mode(error: partlog::Error, args: &ProducerModeArgs, log: &Log) -> CliError {
    let dir = log.dir().display();
    match error {
        partlog::Error::InvalidProducerEpoch {
            producer_id,
            current,
            found,
        } => CliError::new(format!(
            "producer {producer_id} is at epoch {current} in {dir}: epoch {found} is fenced; give \
             --producer-epoch {current} (or higher, to fence the writer of epoch {current})"
        )),
        partlog::Error::InvalidTxnState { producer_id, .. } if !args.transactional => {
            let epoch = log
                .producer_state(producer_id)
                .map_or(0, |entry| entry.producer_epoch);
            CliError::new(format!(
                "producer {producer_id} has a transaction open in {dir} (epoch {epoch}), and the \
                 log takes no idempotent writes from it until it ends: end it with 'partlog txn \
                 commit {dir} --producer-id {producer_id} --producer-epoch {epoch}' (or abort), \
                 or add --transactional to continue it"
            ))
        }
        other => other.into(),
    }
}

/// How `produce`'s transaction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Not a transactional produce.
    NoTransaction,
    /// Committed; the COMMIT marker's offset, if the transaction wrote anything.
    Committed(Option<i64>),
    /// Left open (`--no-commit`).
    LeftOpen,
    /// Aborted after an input error; the ABORT marker's offset, if the transaction wrote
    /// anything.
    Aborted(Option<i64>),
    /// Neither committed nor aborted: the log refused the marker (the error says why).
    Failed,
}

impl Ended {
    /// How many control records the end appended (the summary counts data records).
    pub fn markers(self) -> u64 {
        match self {
            Ended::Committed(Some(_)) | Ended::Aborted(Some(_)) => 1,
            _ => 0,
        }
    }

    /// What the summary line adds after the data records' offsets.
    pub fn summary(self) -> String {
        match self {
            Ended::Committed(Some(marker)) => format!(", committed (COMMIT marker at {marker})"),
            Ended::Committed(None) => ", committed".to_owned(),
            Ended::LeftOpen => ", in a transaction left open".to_owned(),
            Ended::NoTransaction | Ended::Aborted(_) | Ended::Failed => String::new(),
        }
    }

    /// `error`, saying what became of the transaction.
    pub fn explain(self, error: CliError) -> CliError {
        match self {
            Ended::Aborted(_) => CliError::new(format!(
                "{}; the transaction was aborted: read_committed consumers see none of its \
                 records",
                error.0
            )),
            _ => error,
        }
    }
}

/// Ends `produce`'s transaction: commits it (or leaves it open, with `--no-commit`) when
/// `input_ok`, else aborts it. A commit the log refuses because a batch failed is an abort.
/// Returns how it ended and the error to report, if the end itself failed.
pub fn end_transaction(
    producer: &Producer,
    args: &ProducerModeArgs,
    input_ok: bool,
    quiet: bool,
) -> (Ended, Result<(), CliError>) {
    if !args.transactional {
        return (Ended::NoTransaction, Ok(()));
    }
    let log = producer.log();
    if input_ok && args.no_commit {
        if !quiet {
            eprintln!(
                "partlog: the transaction is left open: 'partlog txn commit {dir} --producer-id \
                 {id} --producer-epoch {epoch}' commits it (or abort), and a later 'produce \
                 --transactional' with the same id and epoch continues it",
                dir = log.dir().display(),
                id = args.producer_id.unwrap_or_default(),
                epoch = args.producer_epoch
            );
        }
        return (Ended::LeftOpen, Ok(()));
    }
    if input_ok {
        match producer.commit() {
            Ok(()) => return (Ended::Committed(last_marker(log)), Ok(())),
            // A batch of the transaction failed: its record's error is what to report.
            Err(partlog::Error::InvalidTxnState { .. }) => {}
            Err(error) => return (Ended::Failed, Err(error.into())),
        }
    }
    match producer.abort() {
        Ok(()) => (Ended::Aborted(last_marker(log)), Ok(())),
        Err(error) => (Ended::Failed, Err(error.into())),
    }
}

/// The offset of the log's last record if it is a transaction marker: after a commit, under the
/// exclusive lock, the commit's marker (a transaction that wrote nothing gets none).
fn last_marker(log: &Log) -> Option<i64> {
    let last = log.log_end_offset().checked_sub(1)?;
    let fetch = log.read(last, 1024, partlog::ReadBound::LogEnd).ok()?;
    let batch = fetch.batches().last()?.ok()?;
    (batch.is_control() && batch.last_offset() == last).then_some(last)
}

/// Arguments of `partlog txn`.
#[derive(Debug, Args)]
pub struct TxnArgs {
    #[command(subcommand)]
    pub action: TxnAction,
}

/// What `partlog txn` does.
#[derive(Debug, Subcommand)]
pub enum TxnAction {
    /// Print every producer the log in DIR knows, with its open transaction, as
    /// kafka-transactions describe-producers prints them (opened read-only).
    #[command(alias = "describe-producers", after_help = EXAMPLES)]
    List(TxnListArgs),
    /// Commit the transaction a producer left open: append its COMMIT marker (fsynced).
    #[command(after_help = EXAMPLES)]
    Commit(TxnEndArgs),
    /// Abort the transaction a producer left open: append its ABORT marker (fsynced).
    #[command(after_help = EXAMPLES)]
    Abort(TxnEndArgs),
}

/// Arguments of `partlog txn list`.
#[derive(Debug, Args)]
pub struct TxnListArgs {
    /// The log directory.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

/// Arguments of `partlog txn commit` and `partlog txn abort`.
#[derive(Debug, Args)]
pub struct TxnEndArgs {
    /// The log directory.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,

    /// The producer whose open transaction ends.
    #[arg(long, value_name = "P")]
    pub producer_id: i64,

    /// The epoch of the marker: the open transaction's epoch ('partlog txn list' shows it). An
    /// abort may give a higher one, which fences the writer of the older epoch.
    #[arg(long, value_name = "E", default_value_t = 0)]
    pub producer_epoch: i16,
}

pub const EXAMPLES: &str = "\
Examples:
  partlog txn list /tmp/ledger-0                         # producers, and their open transactions
  seq 1 5 | partlog produce /tmp/ledger-0 --producer-id 7 --transactional --no-commit
  partlog txn commit /tmp/ledger-0 --producer-id 7 --producer-epoch 0
  partlog txn abort /tmp/ledger-0 --producer-id 7 --producer-epoch 1   # fences epoch 0 too

A transaction stays open until a COMMIT or ABORT marker ends it, and read_committed consumers
('partlog consume --isolation-level read_committed') stop at its first record until then. 'txn
commit' and 'txn abort' append that marker for a transaction left open by 'produce
--transactional --no-commit', by a writer that crashed, or by another application (as
kafka-transactions abort does for a hanging one), fsync it, and print where it went. The epoch
must be the open transaction's (commit), or that or higher (abort); a producer with no open
transaction is an error, and nothing is written. They take the log's exclusive lock: they fail
while another process writes the log. 'txn list' prints, for each producer the log knows, its
epoch, its last coordinator epoch, sequence and timestamp, and the first offset of its open
transaction (None when it has none).";

/// Runs `partlog txn`.
pub fn run(args: &TxnArgs) -> Result<Outcome, CliError> {
    match &args.action {
        TxnAction::List(args) => run_list(args),
        TxnAction::Commit(args) => run_end(args, ControlRecordType::Commit),
        TxnAction::Abort(args) => run_end(args, ControlRecordType::Abort),
    }
}

fn run_list(args: &TxnListArgs) -> Result<Outcome, CliError> {
    crate::require_dir(&args.dir)?;
    let log = crate::open_live_reader(&args.dir, std::time::Duration::from_millis(100))?;
    outln!(
        "ProducerId\tProducerEpoch\tLatestCoordinatorEpoch\tLastSequence\tLastTimestamp\tCurrentTransactionStartOffset"
    );
    for entry in log.active_producers() {
        let open = entry
            .current_txn_first_offset
            .map_or_else(|| "None".to_owned(), |offset| offset.to_string());
        outln!(
            "{}\t{}\t{}\t{}\t{}\t{open}",
            entry.producer_id,
            entry.producer_epoch,
            entry.coordinator_epoch,
            entry.last_sequence,
            entry.last_timestamp
        );
    }
    Ok(crate::finish_reading(&log))
}

fn run_end(args: &TxnEndArgs, marker: ControlRecordType) -> Result<Outcome, CliError> {
    crate::require_dir(&args.dir)?;
    if crate::segment_bases(&args.dir)?.is_empty() {
        return Err(CliError::new(format!(
            "{} holds no log (no .log file)",
            args.dir.display()
        )));
    }
    let log = crate::open_writable(&args.dir, LogConfig::default())?;
    let ended = end_open_transaction(&log, args, marker);
    let closed = log.close();
    let line = ended?;
    closed?;
    outln!("{line}");
    Ok(Outcome::Done)
}

/// Appends `marker` for the transaction `args` names, durably; returns the line to print.
fn end_open_transaction(
    log: &Log,
    args: &TxnEndArgs,
    marker: ControlRecordType,
) -> Result<String, CliError> {
    let (producer_id, epoch) = (args.producer_id, args.producer_epoch);
    let dir = log.dir().display();
    let (verb, name) = match marker {
        ControlRecordType::Commit => ("committed", "COMMIT"),
        _ => ("aborted", "ABORT"),
    };
    let list = format!("'partlog txn list {dir}' shows the open ones");
    let entry = log.producer_state(producer_id).ok_or_else(|| {
        CliError::new(format!(
            "the log in {dir} holds no state for producer {producer_id}: it has no transaction \
             to end ({list})"
        ))
    })?;
    let Some(first) = entry.current_txn_first_offset else {
        return Err(CliError::new(format!(
            "producer {producer_id} has no open transaction in {dir}: nothing to end, nothing \
             written ({list})"
        )));
    };
    let current = entry.producer_epoch;
    if epoch < current || (epoch > current && marker == ControlRecordType::Commit) {
        return Err(CliError::new(format!(
            "producer {producer_id}'s open transaction is of epoch {current}: give \
             --producer-epoch {current}{}",
            if marker == ControlRecordType::Abort {
                " (or higher, which fences that writer)"
            } else {
                " (a higher epoch may only abort it)"
            }
        )));
    }
    let info = log.append_marker(producer_id, epoch, marker, entry.coordinator_epoch.max(0))?;
    log.wait_durable(info.last_offset)?;
    Ok(format!(
        "{verb} producer {producer_id}'s transaction (epoch {epoch}, open since offset {first}): \
         {name} marker at offset {}",
        info.first_offset
    ))
}
