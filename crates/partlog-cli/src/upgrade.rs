//! `partlog upgrade SRC DST`: a legacy or gzip/snappy partition directory, rewritten as v2.

use std::path::PathBuf;

use clap::Args;
use partlog::{Compression, UpgradeOptions, UpgradeReport, upgrade_dir};

use crate::produce::Codec;
use crate::{CliError, Outcome};

pub const EXAMPLES: &str = "\
Examples:
  partlog upgrade /var/kafka-0.10/orders-0 /tmp/orders-0            # then check it:
  partlog verify /tmp/orders-0
  partlog upgrade /var/kafka-0.10/orders-0 /tmp/orders-0 --compression zstd

Rewrites the partition directory SRC, which may hold legacy messages (magic 0 and 1, what Kafka
wrote before 0.11; Kafka 4 reads neither) and gzip or snappy batches (which partlog reads but
never writes), into DST as RecordBatch v2 in none, lz4 or zstd. DST must not exist or be empty;
SRC is only read (stop the broker or the partlog writer first).

Kept: every offset (gaps of a compacted log included), timestamp and timestamp type, key, value
and header; the segments, with the same base offsets; and v2 batches in none, lz4 or zstd, byte
for byte (producer ids, sequences, transactions, control batches, leader epochs). A gzip or
snappy v2 batch is recompressed and keeps every other header field. A legacy compressed wrapper
becomes one v2 batch; uncompressed legacy messages that follow one another are grouped into
batches of up to 16 KiB of records.

The codec of rewritten batches: --compression, or by default the source's where partlog writes
it (none, lz4), zstd for gzip and lz4 for snappy.

Kafka's files partition.metadata, leader-epoch-checkpoint, *.snapshot and the segments' .txnindex
are copied as they are (they name offsets, which are kept); indexes are built anew. When SRC was
not closed cleanly (a Kafka partition directory, or a crash), the .txnindex files of the segments
its open recovered are rebuilt from the log instead, as a recovery rebuilds them. DST is
written durably and ends with partlog.checkpoint's clean-shutdown record, so it opens without a
scan; a DST without it is an interrupted upgrade: remove it and run again. Inside a Kafka log
directory, the broker's lock is held meanwhile, as by any partlog writer.

Exit status: 0 when DST is complete; 2 on any error (SRC missing, DST not empty, a source batch
that does not read, I/O).";

/// Arguments of `partlog upgrade`.
#[derive(Debug, Args)]
pub struct UpgradeArgs {
    /// The partition directory to read.
    #[arg(value_name = "SRC")]
    pub src: PathBuf,

    /// The directory to write: new, or empty.
    #[arg(value_name = "DST")]
    pub dst: PathBuf,

    /// The codec of every rewritten batch (legacy messages, gzip and snappy batches). Default:
    /// the source's where partlog writes it, zstd for gzip, lz4 for snappy.
    #[arg(long, value_name = "CODEC", value_enum)]
    pub compression: Option<Codec>,
}

/// Runs `partlog upgrade`.
pub fn run(args: &UpgradeArgs) -> Result<Outcome, CliError> {
    crate::require_dir(&args.src)?;
    let mut options = UpgradeOptions::default();
    options.compression = args.compression.map(|codec| match codec {
        Codec::None => Compression::None,
        Codec::Lz4 => Compression::Lz4,
        Codec::Zstd => Compression::Zstd,
    });
    let report = upgrade_dir(&args.src, &args.dst, &options).map_err(|error| match error {
        // The library's "invalid argument: " prefix says nothing a user needs.
        partlog::Error::InvalidArgument { why } => CliError::new(why),
        other => other.into(),
    })?;
    print_report(&report);
    Ok(Outcome::Done)
}

fn print_report(report: &UpgradeReport) {
    outln!(
        "upgraded {} into {}",
        report.src.display(),
        report.dst.display()
    );
    for segment in &report.segments {
        outln!(
            "{:020}.log: {} bytes -> {} bytes; {} legacy messages, {} v2 batches copied, {} \
             recompressed; {} batches, {} records written",
            segment.base_offset,
            segment.source_bytes,
            segment.bytes,
            segment.legacy_messages,
            segment.batches_copied,
            segment.batches_recompressed,
            segment.batches_written,
            segment.records,
        );
    }
    if !report.copied_files.is_empty() {
        outln!("copied: {}", report.copied_files.join(" "));
    }
    if !report.rebuilt_files.is_empty() {
        outln!(
            "rebuilt from the log (the source was not closed cleanly): {}",
            report.rebuilt_files.join(" ")
        );
    }
    if !report.skipped_files.is_empty() {
        outln!("not copied: {}", report.skipped_files.join(" "));
    }
    if report.source_bytes_not_copied > 0 {
        outln!(
            "not copied: {} bytes at the end of the source that do not read (a torn tail)",
            report.source_bytes_not_copied
        );
    }
    let records: u64 = report.segments.iter().map(|s| s.records).sum();
    outln!(
        "result: ok: offsets [{}, {}), {} segments, {records} records; closed cleanly",
        report.log_start_offset,
        report.log_end_offset,
        report.segments.len()
    );
}
