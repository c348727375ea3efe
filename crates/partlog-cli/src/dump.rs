//! `partlog dump DIR`: the batches and records of a log, read through a read-only open.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use partlog::unstable::format::control_record_type;
use partlog::{
    Batch, BatchHeader, ControlRecordType, EndTransactionMarker, Log, LogConfig, ReadBound,
    TimestampType,
};

use crate::text::human;
use crate::{CliError, Outcome};

pub const EXAMPLES: &str = "\
Examples:
  partlog dump /tmp/orders-0                     # the batches, like kafka-dump-log
  partlog dump /tmp/orders-0 --records           # and their records (--print-data-log)
  partlog dump /tmp/orders-0 --txn-state         # and each transactional record's outcome
  partlog dump /tmp/orders-0 --index             # and every index entry, checked
  partlog dump /tmp/orders-0 --producer-state    # and every .txnindex and .snapshot entry
  partlog dump /tmp/orders-0 --leader-epochs     # and the leader-epoch-checkpoint entries
  partlog dump /tmp/logs/__consumer_offsets-42 --offsets-decoder   # commits and groups as JSON
  partlog dump /tmp/orders-0 --from 1000 --json  # one JSON object per record from offset 1000
  partlog dump /tmp/orders-0/00000000000000000000.log --skip-record-metadata   # one file
  partlog dump /tmp/orders-0/00000000000000000000.timeindex
  partlog dump /tmp/orders-0 --records --max-bytes 1048576   # the first MiB of each .log

The log is opened read-only without a lock: a process may be writing it meanwhile. A damaged
log is shown up to its first invalid byte, then that byte's file and position are reported
(exit status 1); nothing is repaired. A single FILE is read as it lies on disk, like
kafka-dump-log --files: an invalid batch is shown with 'isvalid: false' and stepped over, and
'Found N invalid bytes at the end of FILE' reports what cannot be read.

The lines are kafka-dump-log's (--deep-iteration --print-data-log with --records), so the two
diff clean; 'Non-consecutive offsets in FILE' goes to standard error as Kafka prints it, for
each gap compaction left (Kafka also lists every segment's first record as following -1;
partlog lists only real gaps).

The human format prints, per segment, 'Dumping <file>', then one line per batch (its offsets,
count, producer fields, leader epoch, flags, file position, timestamp, size, magic, codec and
CRC) and, with --records, one '| offset: ...' line per record. --index prints, per segment,
'offset: O position: P' for each .index entry and 'timestamp: T offset: O' for each .timeindex
entry, with a 'Mismatches in' line (kafka-dump-log's words) for an entry that does not name the
batch at its position (offset index) or the batch ending at its offset with that largest
timestamp (time index), and ends with a summary; a mismatch makes the exit status 1. Keys and payloads are shown as UTF-8 with invalid
bytes replaced by U+FFFD and control characters escaped; use --json for the exact bytes.

--txn-state (implies --records) marks the records of transactions, which kafka-dump-log does not:
each record of a transactional batch gets 'txnState: committed', 'txnState: aborted' or
'txnState: open' (its transaction has no marker yet) after its headerKeys, as a read_committed
consumer decides it ('partlog consume --isolation-level read_committed' prints the committed
ones). Only that field differs from kafka-dump-log's lines, so without --txn-state the two still
diff clean.

--json prints one object per data record (control records are skipped, as consumers skip them):
  {\"offset\":0,\"timestamp\":1700000000000,\"key\":\"user1\",\"value\":\"hello\",\"headers\":[[\"k\",\"v\"]]}
key, value and header values are JSON strings when they are valid UTF-8, null when absent, and
{\"base64\":\"...\"} (RFC 4648 standard alphabet, padded) when they are not UTF-8. headers is an
array of [key, value] pairs in record order (keys may repeat).";

/// Arguments of `partlog dump`.
#[derive(Debug, Args)]
pub struct DumpArgs {
    /// The log directory, or one segment file: a .log, .index or .timeindex (kafka-dump-log's
    /// --files). A single file is read as it is on disk, without opening the log.
    #[arg(value_name = "DIR|FILE")]
    pub dir: PathBuf,

    /// The first offset to print (default: the log start offset). Batches that end below it are
    /// skipped; in the human format, the batch that holds it is shown, then its records from
    /// OFFSET on.
    #[arg(long, value_name = "OFFSET", allow_negative_numbers = true)]
    pub from: Option<i64>,

    /// One JSON object per record instead of the human format.
    #[arg(long, conflicts_with = "index")]
    pub json: bool,

    /// In the human format, print each record under its batch (kafka-dump-log's
    /// --print-data-log); without it, batches only.
    #[arg(long, visible_alias = "print-data-log")]
    pub records: bool,

    /// Also print every .index and .timeindex entry, and check that each names the right
    /// batch (exit status 1 on a mismatch).
    #[arg(long)]
    pub index: bool,

    /// Also print every .txnindex entry (aborted transactions) and every .snapshot entry
    /// (producer state), in the words of Kafka's DumpLogSegments (exit status 1 on a bad file).
    #[arg(long, conflicts_with = "json")]
    pub producer_state: bool,

    /// Also print the leader-epoch-checkpoint entries, which leader epoch started at which
    /// offset (exit status 1 when the file does not parse).
    #[arg(long, conflicts_with = "json")]
    pub leader_epochs: bool,

    /// Read at most N bytes of each .log file: only the batches that end within them
    /// (kafka-dump-log's --max-bytes).
    #[arg(long, value_name = "N")]
    pub max_bytes: Option<u64>,

    /// Print records without their metadata: '| key: K payload: P', and no control records
    /// (kafka-dump-log's --skip-record-metadata). Implies --records.
    #[arg(long, conflicts_with = "json")]
    pub skip_record_metadata: bool,

    /// Mark each record of a transactional batch with its transaction's outcome, 'txnState:
    /// committed|aborted|open' after its headerKeys, as a read_committed consumer decides it
    /// (kafka-dump-log has no such field: without this flag the lines are its lines). Implies
    /// --records.
    #[arg(long, conflicts_with_all = ["json", "skip_record_metadata"])]
    pub txn_state: bool,

    /// Print the keys and values of a __transaction_state partition decoded, as
    /// kafka-dump-log's --transaction-log-decoder does: each transactional id's state as JSON,
    /// <DELETE> for a tombstone. Implies --records.
    #[arg(long, conflicts_with = "json")]
    pub transaction_log_decoder: bool,

    /// Print the keys and values of a __consumer_offsets partition decoded, as kafka-dump-log's
    /// --offsets-decoder does: each committed offset and group record as JSON (a consumer
    /// group's subscriptions and assignments decoded), <DELETE> for a tombstone. Implies
    /// --records.
    #[arg(long, conflicts_with_all = ["json", "transaction_log_decoder"])]
    pub offsets_decoder: bool,
}

/// Which of kafka-dump-log's decoders prints the keys and values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decoder {
    /// The bytes as UTF-8.
    Bytes,
    /// `--transaction-log-decoder`.
    TransactionLog,
    /// `--offsets-decoder`.
    Offsets,
}

impl Decoder {
    fn of(args: &DumpArgs) -> Decoder {
        if args.transaction_log_decoder {
            Decoder::TransactionLog
        } else if args.offsets_decoder {
            Decoder::Offsets
        } else {
            Decoder::Bytes
        }
    }
}

/// How much one read asks for.
const READ_BYTES: usize = 1 << 20;

/// Runs `partlog dump`.
pub fn run(args: &DumpArgs) -> Result<Outcome, CliError> {
    if std::fs::metadata(&args.dir).is_ok_and(|m| m.is_file()) {
        return crate::dump_file::run(args);
    }
    crate::require_dir(&args.dir)?;
    let config = LogConfig::default();
    let bases = partlog::unstable::list_segment_bases(&*config.storage, &args.dir)?;
    let log = crate::open_live_reader(&args.dir, std::time::Duration::from_millis(100))?;
    let start = log.log_start_offset();
    let end = log.log_end_offset();
    let from = args.from.unwrap_or(start);
    if from < start || from > end {
        return Err(CliError::new(format!(
            "--from {from} is out of range: the log holds offsets [{start}, {end})"
        )));
    }
    let mut dumper = Dumper::new(args, from);
    if args.txn_state {
        dumper.txn_states = Some(crate::dump_txn_state::TxnStates::new(&log, from));
    }
    match dumper.dump(&log, &bases, start) {
        Ok(()) => {}
        // A reader that went away (`partlog dump DIR | head`) is not an error.
        Err(DumpError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            return Ok(Outcome::Done);
        }
        Err(DumpError::Output(e)) => {
            return Err(CliError::new(format!(
                "cannot write to standard output: {e}"
            )));
        }
        Err(DumpError::Log(e)) => {
            // Flushed first: the error follows the output it ends.
            let _ = dumper.out.flush();
            return crate::stopped_reading(e);
        }
    }
    dumper.report_gaps();
    if args.index {
        // The check runs to the end and sets the exit status even if the reader left early.
        let mut out = std::io::BufWriter::new(crate::QuietStdout);
        let mut tally = crate::dump_index::IndexTally::default();
        for &base in &bases {
            crate::dump_index::dump_segment_indexes(&mut out, &args.dir, base, &mut tally)?;
        }
        let summary = format!(
            "index check: {} entries, {} mismatches",
            tally.entries, tally.mismatches
        );
        if let Err(e) = writeln!(out, "{summary}").and_then(|()| out.flush()) {
            return Err(CliError::new(format!(
                "cannot write to standard output: {e}"
            )));
        }
        if tally.mismatches > 0 {
            crate::finish_reading(&log);
            return Ok(Outcome::Corrupt);
        }
    }
    if args.producer_state {
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        let bad = crate::dump_txn::dump_producer_state(&mut out, &args.dir)?;
        match out.flush() {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            Err(e) => return Err(CliError::new(format!("cannot write: {e}"))),
        }
        if bad > 0 {
            return Ok(Outcome::Corrupt);
        }
    }
    if args.leader_epochs {
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        let bad = crate::dump_epochs::dump_leader_epochs(&mut out, &args.dir)?;
        match out.flush() {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            Err(e) => return Err(CliError::new(format!("cannot write: {e}"))),
        }
        if bad > 0 {
            return Ok(Outcome::Corrupt);
        }
    }
    Ok(crate::finish_reading(&log))
}

/// Why a dump stopped.
pub enum DumpError {
    /// The log failed to read.
    Log(partlog::Error),
    /// Standard output failed.
    Output(std::io::Error),
}

impl From<partlog::Error> for DumpError {
    fn from(error: partlog::Error) -> Self {
        DumpError::Log(error)
    }
}

impl From<std::io::Error> for DumpError {
    fn from(error: std::io::Error) -> Self {
        DumpError::Output(error)
    }
}

/// The batch and record printer of `partlog dump`, over a log (here) or one file (dump_file.rs).
pub struct Dumper<'a> {
    pub out: std::io::BufWriter<crate::QuietStdout>,
    json: bool,
    /// Whether the human format prints records.
    records: bool,
    /// `--skip-record-metadata`.
    skip_record_metadata: bool,
    /// `--max-bytes`: batches ending past it in their file are not printed.
    pub max_bytes: Option<u64>,
    dir: &'a Path,
    from: i64,
    /// One output line, reused.
    line: Vec<u8>,
    /// Decompression space, reused.
    scratch: Vec<u8>,
    /// Kafka's "Non-consecutive offsets" report.
    gaps: Gaps,
    /// `--txn-state`: the outcome of each transactional record's transaction.
    pub txn_states: Option<crate::dump_txn_state::TxnStates<'a>>,
    /// How keys and values print (`--transaction-log-decoder`, `--offsets-decoder`).
    decoder: Decoder,
}

/// Kafka's "Non-consecutive offsets" report: per file, each record offset that does not follow
/// the one before it (the first record of a file is compared with its base offset).
#[derive(Default)]
struct Gaps {
    /// The `.log` file being printed.
    file: PathBuf,
    /// Its base offset.
    segment_base: i64,
    /// The offset of the last record printed from it, if any.
    last_offset: Option<i64>,
    /// The gaps found, per file.
    found: Vec<(PathBuf, Vec<(i64, i64)>)>,
}

impl Gaps {
    /// Starts the `.log` file `file`, whose base offset is `base`.
    fn start(&mut self, file: &Path, base: i64) {
        self.file = file.to_path_buf();
        self.segment_base = base;
        self.last_offset = None;
    }

    /// Notes the record at `offset`.
    fn note(&mut self, offset: i64) {
        let expected = self.last_offset.map_or(self.segment_base, |last| last + 1);
        if offset != expected {
            let before = self.last_offset.unwrap_or(-1);
            match self.found.last_mut() {
                Some((file, pairs)) if *file == self.file => pairs.push((before, offset)),
                _ => self.found.push((self.file.clone(), vec![(before, offset)])),
            }
        }
        self.last_offset = Some(offset);
    }
}

impl<'a> Dumper<'a> {
    /// A dumper with `args`' choices, printing from offset `from` on.
    pub fn new(args: &'a DumpArgs, from: i64) -> Self {
        Dumper {
            out: std::io::BufWriter::with_capacity(1 << 16, crate::QuietStdout),
            json: args.json,
            records: args.records
                || args.skip_record_metadata
                || args.txn_state
                || args.transaction_log_decoder
                || args.offsets_decoder,
            skip_record_metadata: args.skip_record_metadata,
            max_bytes: args.max_bytes,
            dir: &args.dir,
            from,
            line: Vec::new(),
            scratch: Vec::new(),
            gaps: Gaps::default(),
            txn_states: None,
            decoder: Decoder::of(args),
        }
    }

    /// Kafka's `Non-consecutive offsets in <file>` lines, on standard error as Kafka prints
    /// them, after the dump: the gaps compaction leaves. Kafka also compares each file's first
    /// record with -1, which reports every segment but the first; only a real gap (a first
    /// record above its segment's base) is reported here, in Kafka's words.
    pub fn report_gaps(&mut self) {
        for (file, pairs) in std::mem::take(&mut self.gaps.found) {
            eprintln!("Non-consecutive offsets in {}", file.display());
            for (before, after) in pairs {
                eprintln!("  {before} is followed by {after}");
            }
        }
    }

    /// Reads from the start of the segment that holds `from`, so that batch positions can be
    /// counted from the segment's first byte, and prints what lies at or above `from`.
    ///
    /// The read returns whole batches of one segment, back to back as in the file; the next
    /// read starts at the next batch. A batch whose base offset reaches the next segment's base
    /// is that segment's first batch, at position 0. When the log start offset lies inside the
    /// first segment read, bytes below it cannot be read, and positions there are unknown.
    fn dump(&mut self, log: &Log, bases: &[i64], log_start: i64) -> Result<(), DumpError> {
        let mut segment = bases.partition_point(|&b| b <= self.from).saturating_sub(1);
        let segment_base = bases.get(segment).copied().unwrap_or(log_start);
        let mut offset = segment_base.max(log_start);
        let mut position = (offset == segment_base).then_some(0u64);
        let mut announced = false;
        loop {
            let fetch = log.read(offset, READ_BYTES, ReadBound::LogEnd)?;
            if fetch.is_empty() {
                break;
            }
            for batch in fetch.batches() {
                let batch = batch?;
                // A batch lies wholly inside one segment, so its last offset tells the segment
                // as well as its base (which a compressed legacy message hides inside it).
                while bases
                    .get(segment + 1)
                    .is_some_and(|&next| batch.last_offset() >= next)
                {
                    segment += 1;
                    position = Some(0);
                    announced = false;
                }
                let past_max_bytes = self.max_bytes.is_some_and(|max| {
                    position.is_some_and(|p| p + batch.total_size() as u64 > max)
                });
                if batch.last_offset() >= self.from && !past_max_bytes {
                    if !announced {
                        let base = bases.get(segment).copied().unwrap_or(segment_base);
                        self.announce_segment(base)?;
                        announced = true;
                    }
                    self.batch(&batch, position)?;
                }
                position = position.map(|p| p + batch.total_size() as u64);
            }
            offset = fetch.next_offset();
        }
        self.out.flush()?;
        Ok(())
    }

    fn announce_segment(&mut self, base: i64) -> Result<(), DumpError> {
        self.announce_file(&self.dir.join(format!("{base:020}.log")), base)
    }

    /// Starts the `.log` file `file`, whose base offset is `base`.
    pub fn announce_file(&mut self, file: &Path, base: i64) -> Result<(), DumpError> {
        self.gaps.start(file, base);
        if !self.json {
            writeln!(self.out, "Dumping {}", file.display())?;
            writeln!(self.out, "Log starting offset: {base}")?;
        }
        Ok(())
    }

    /// Prints the batch line of a batch whose CRC or contents are invalid, as Kafka does
    /// (`isvalid: false`), from its header alone.
    pub fn invalid_batch(&mut self, header: &BatchHeader, position: u64) -> Result<(), DumpError> {
        if !self.json {
            let line = batch_line(header, Some(position), header.total_size(), false);
            writeln!(self.out, "{line}")?;
        }
        Ok(())
    }

    /// Prints one valid batch found at `position` of its file (`None`: unknown).
    pub fn batch(&mut self, batch: &Batch<'_>, position: Option<u64>) -> Result<(), DumpError> {
        let header = match batch {
            Batch::V2(view) => *view.header(),
            Batch::Legacy(view) => {
                // Kafka's DumpLogSegments line for a legacy (magic 0 or 1) message.
                let legacy = *view.header();
                if !self.json {
                    let codec = legacy.compression().map_or_else(
                        |_| format!("unknown({})", legacy.compression_id()),
                        |c| c.name().to_owned(),
                    );
                    writeln!(
                        self.out,
                        "offset: {} position: {} {}: {} size: {} magic: {} compresscodec: {} \
                         crc: {} isvalid: true",
                        legacy.last_offset(),
                        position.map_or_else(|| "unknown".to_owned(), |p| p.to_string()),
                        legacy.timestamp_type(),
                        legacy.max_timestamp(),
                        batch.total_size(),
                        legacy.magic,
                        codec,
                        legacy.crc,
                    )?;
                }
                if !self.records {
                    return Ok(());
                }
                return self.records(batch, None);
            }
        };
        if !self.json {
            let line = batch_line(&header, position, batch.total_size(), true);
            writeln!(self.out, "{line}")?;
        }
        if (self.json && header.is_control()) || !(self.json || self.records) {
            return Ok(());
        }
        self.records(batch, Some(&header))
    }

    /// The record lines of a batch; `header` is `None` for a legacy message.
    fn records(
        &mut self,
        batch: &Batch<'_>,
        header: Option<&BatchHeader>,
    ) -> Result<(), DumpError> {
        let timestamp_type = batch.timestamp_type();
        let records = batch.records(&mut self.scratch)?;
        for record in records {
            let record = record?;
            if record.offset < self.from {
                continue;
            }
            let control = header.is_some_and(BatchHeader::is_control);
            if !self.json {
                self.gaps.note(record.offset);
            }
            if self.skip_record_metadata && control {
                continue;
            }
            self.line.clear();
            if self.json {
                json_record(&mut self.line, &record);
            } else if self.skip_record_metadata {
                let texts = key_and_payload(&record, self.decoder);
                bare_record(&mut self.line, texts);
            } else {
                let txn_state = match (&mut self.txn_states, header) {
                    (Some(states), Some(header)) if header.is_transactional() && !control => {
                        Some(states.state(record.offset)?)
                    }
                    _ => None,
                };
                let texts = key_and_payload(&record, self.decoder);
                human_record(
                    &mut self.line,
                    &record,
                    (header, timestamp_type),
                    txn_state,
                    texts,
                );
            }
            self.line.push(b'\n');
            self.out.write_all(&self.line)?;
        }
        Ok(())
    }
}

/// Kafka's DumpLogSegments line for a v2 batch, `isvalid` as given.
fn batch_line(header: &BatchHeader, position: Option<u64>, size: usize, valid: bool) -> String {
    let last_sequence = if header.base_sequence < 0 {
        -1
    } else {
        header.last_sequence()
    };
    let codec = header.compression().map_or_else(
        |_| format!("unknown({})", header.compression_id()),
        |c| c.name().to_owned(),
    );
    // Kafka prints the Java OptionalLong as it is: diffs against its output stay clean.
    let delete_horizon = header.delete_horizon_ms().map_or_else(
        || "OptionalLong.empty".to_owned(),
        |ms| format!("OptionalLong[{ms}]"),
    );
    format!(
        "baseOffset: {} lastOffset: {} count: {} baseSequence: {} lastSequence: {} \
         producerId: {} producerEpoch: {} partitionLeaderEpoch: {} isTransactional: {} \
         isControl: {} deleteHorizonMs: {delete_horizon} position: {} {}: {} size: {size} \
         magic: {} compresscodec: {codec} crc: {} isvalid: {valid}",
        header.base_offset,
        header.last_offset(),
        header.records_count,
        header.base_sequence,
        last_sequence,
        header.producer_id,
        header.producer_epoch,
        header.partition_leader_epoch,
        header.is_transactional(),
        header.is_control(),
        position.map_or_else(|| "unknown".to_owned(), |p| p.to_string()),
        header.timestamp_type(),
        header.max_timestamp,
        header.magic,
        header.crc,
    )
}

/// `{"offset":..,"timestamp":..,"key":..,"value":..,"headers":[[k,v],..]}` (record_json.rs).
fn json_record(out: &mut Vec<u8>, record: &partlog::Record<'_>) {
    crate::record_json::write(
        out,
        record.offset,
        record.timestamp,
        record.key,
        record.value,
        record.headers().map(|header| (header.key, header.value)),
    );
}

/// Kafka's words for a control record: ` endTxnMarker: COMMIT coordinatorEpoch: N` for a
/// transaction marker, ` controlType: NAME(id)` for any other type (Kafka prints a KRaft
/// snapshot header or footer as JSON; neither lies in a partition's log).
fn control_record_text(record: &partlog::Record<'_>) -> String {
    let kind = match control_record_type(record) {
        Ok(kind) => kind,
        Err(error) => return format!(" controlType: unreadable ({error})"),
    };
    let name = match kind {
        ControlRecordType::Abort => "ABORT",
        ControlRecordType::Commit => "COMMIT",
        ControlRecordType::LeaderChange => "LEADER_CHANGE",
        ControlRecordType::SnapshotHeader => "SNAPSHOT_HEADER",
        ControlRecordType::SnapshotFooter => "SNAPSHOT_FOOTER",
        ControlRecordType::KraftVersion => "KRAFT_VERSION",
        ControlRecordType::KraftVoters => "KRAFT_VOTERS",
        ControlRecordType::Unknown(_) => "UNKNOWN",
    };
    if !kind.is_transaction_marker() {
        return format!(" controlType: {name}({})", kind.id());
    }
    match EndTransactionMarker::parse(record) {
        Ok(marker) => format!(
            " endTxnMarker: {name} coordinatorEpoch: {}",
            marker.coordinator_epoch
        ),
        Err(error) => format!(" endTxnMarker: {name}, unreadable ({error})"),
    }
}

/// The key and payload texts of a record line: the bytes as UTF-8 (invalid bytes escaped), or
/// what Kafka's decoder prints for a `__transaction_state` (`--transaction-log-decoder`) or
/// `__consumer_offsets` (`--offsets-decoder`) record.
fn key_and_payload(
    record: &partlog::Record<'_>,
    decoder: Decoder,
) -> (Option<String>, Option<String>) {
    match decoder {
        Decoder::TransactionLog => partlog_engine::txn::dump_text::kafka_decoder_text(
            record.offset,
            record.key,
            record.value,
        ),
        Decoder::Offsets => partlog_groups::offsets::dump_text::kafka_decoder_text(
            record.offset,
            record.key,
            record.value,
        ),
        Decoder::Bytes => (record.key.map(human), record.value.map(human)),
    }
}

/// Kafka's `--skip-record-metadata` line: `| key: K payload: P`, each part only when present.
fn bare_record(out: &mut Vec<u8>, (key, payload): (Option<String>, Option<String>)) {
    out.push(b'|');
    if let Some(key) = key {
        out.extend_from_slice(b" key: ");
        out.extend_from_slice(key.as_bytes());
    }
    if let Some(payload) = payload {
        out.extend_from_slice(b" payload: ");
        out.extend_from_slice(payload.as_bytes());
    }
}

/// Kafka's `| offset: .. CreateTime: .. keySize: .. valueSize: .. sequence: .. headerKeys: [..]
/// key: .. payload: ..`, or the control record's type and fields for a control batch (see
/// `control_record_text`); `txnState: ..` after
/// the header keys when `txn_state` is given (`--txn-state`).
fn human_record(
    out: &mut Vec<u8>,
    record: &partlog::Record<'_>,
    (header, timestamp_type): (Option<&BatchHeader>, TimestampType),
    txn_state: Option<&str>,
    (key, payload): (Option<String>, Option<String>),
) {
    let size = |bytes: Option<&[u8]>| bytes.map_or(-1, |b| i64::try_from(b.len()).unwrap_or(-1));
    let sequence = match header {
        Some(header) if header.base_sequence >= 0 => {
            i64::from(header.base_sequence) + (record.offset - header.base_offset)
        }
        _ => -1,
    };
    let timestamp_type = match timestamp_type {
        TimestampType::CreateTime => "CreateTime",
        TimestampType::LogAppendTime => "LogAppendTime",
    };
    let header_keys: Vec<String> = record.headers().map(|h| human(h.key)).collect();
    let mut line = format!(
        "| offset: {} {timestamp_type}: {} keySize: {} valueSize: {} sequence: {sequence} \
         headerKeys: [{}]",
        record.offset,
        record.timestamp,
        size(record.key),
        size(record.value),
        header_keys.join(","),
    );
    if let Some(state) = txn_state {
        line.push_str(" txnState: ");
        line.push_str(state);
    }
    if header.is_some_and(BatchHeader::is_control) {
        line.push_str(&control_record_text(record));
    } else {
        if let Some(key) = key {
            line.push_str(" key: ");
            line.push_str(&key);
        }
        if let Some(payload) = payload {
            line.push_str(" payload: ");
            line.push_str(&payload);
        }
    }
    out.extend_from_slice(line.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use partlog::{BatchBuilder, BatchView, Compression, NewRecord};

    #[test]
    fn json_records_carry_every_field() {
        let batch = BatchBuilder::new(Compression::None);
        let mut batch = batch;
        batch.push(
            &NewRecord::new(7, Some(b"k\"1"), None)
                .with_header("h", Some(b"\xff"))
                .with_header("h", None),
        );
        let bytes = batch.build().unwrap();
        let view = BatchView::new(&bytes).unwrap();
        let mut scratch = Vec::new();
        let record = view.records(&mut scratch).unwrap().next().unwrap().unwrap();
        let mut out = Vec::new();
        json_record(&mut out, &record);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"offset":0,"timestamp":7,"key":"k\"1","value":null,"headers":[["h",{"base64":"/w=="}],["h",null]]}"#
        );
    }
}
