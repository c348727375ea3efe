//! [`upgrade_dir`]: rewrites a partition directory that holds legacy messages (magic 0 and 1) or
//! batches in codecs partlog does not write (gzip, snappy) as one that holds only RecordBatch v2
//! in codecs it writes, with the same offsets, timestamps, keys, values and headers.
//!
//! Kafka 4 reads neither magic 0 nor magic 1, so a partition Kafka wrote before 0.11 (or one
//! partlog cannot append to because its batches use gzip or snappy) must be rewritten before a
//! Kafka 4 broker or a partlog writer can take it over. The rewrite goes into a new directory;
//! the source is only read.
//!
//! # What is kept, and how
//!
//! - **Segments.** The destination has the source's segments, with the same base offsets, so
//!   Kafka's tooling sees the same layout. Their indexes are built as partlog builds them on
//!   append. A segment wholly below the log start offset is left out.
//! - **v2 batches in none, lz4 or zstd** are copied byte for byte, so their producer ids,
//!   sequences, transactional and control bits, leader epochs and CRCs stay exactly as they are.
//! - **v2 batches in gzip or snappy** are recompressed and nothing else: the records section
//!   is decompressed and compressed again, and the header keeps every field but the codec
//!   bits, the length and the CRC.
//! - **A legacy compressed wrapper** becomes one v2 batch holding its inner messages at their
//!   offsets (gaps left by compaction stay gaps), whose last offset is the wrapper's offset, as
//!   Kafka's indexes had it. A LogAppendTime wrapper becomes a LogAppendTime batch with the
//!   wrapper's timestamp. Magic 0 has no timestamps: its records get -1, as Kafka writes when
//!   it converts magic 0.
//! - **Uncompressed legacy messages** that follow one another join one v2 batch, up to
//!   [`GROUPED_RECORDS_BYTES`] of records, as a producer batch would hold them (one batch per
//!   message would add a 61-byte header to every record). Under LogAppendTime, only messages
//!   with the same timestamp join, since a v2 batch has one append time.
//! - **Legacy batches carry no leader epoch:** the v2 batches made from them get -1, Kafka's
//!   "no epoch", as Kafka's own conversion of such messages does.
//!
//! # Codecs
//!
//! A batch that must be rewritten gets [`UpgradeOptions::compression`] when it is set. Without
//! it, the codec of the source where partlog writes it (none, lz4), zstd for gzip (both are
//! chosen for their ratio, and zstd compresses better and faster) and lz4 for snappy (both are
//! chosen for speed).
//!
//! # Kafka's files
//!
//! `partition.metadata`, `leader-epoch-checkpoint`, the producer snapshots (`*.snapshot`) and
//! the `.txnindex` files of copied segments are copied as they are: they name offsets only,
//! which the upgrade keeps, and a broker that loads the destination needs them (without a
//! `.txnindex`, a `read_committed` consumer would see aborted records, since a broker rebuilds
//! it only when it recovers a segment). Leftovers of interrupted operations (`*.deleted`,
//! `*.cleaned`, `*.swap`) and unknown files are not copied, and the report names them. When the
//! source's last close was not clean (a Kafka directory without partlog's checkpoint, or a
//! crash), the `.txnindex` files of the segments its open had to recover are written from the
//! aborted transactions that open replayed, not copied: a crash can leave a lazily created one
//! missing, and a copy would make the loss permanent under the destination's clean-shutdown
//! record.
//!
//! # Durability
//!
//! Every file is synced, and the directory, before `partlog.checkpoint` is written with a
//! clean-shutdown record, last: the destination then opens without a scan, and a destination
//! without that record is an interrupted upgrade, to be removed and run again. Inside a Kafka
//! log directory, the destination is written under the broker's lock with the clean-shutdown
//! marker set aside (ARCHITECTURE.md §7), exactly as a log opened for writing: a running broker
//! makes the upgrade fail with [`Error::Locked`], and an upgrade that dies makes the broker
//! recover.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::{
    Batch, BatchBuilder, BatchView, Compression, DEFAULT_ZSTD_LEVEL, LegacyBatchView,
    TimestampType, corruption_in_file, recompress,
};
use crate::log::checkpoint::{CHECKPOINT_FILE_NAME, CheckpointFile, CleanShutdown};
use crate::log::kafka_dir;
use crate::log::{CleanupPolicy, LOCK_FILE, Log, LogConfig, ReadBound};
use crate::segment::{
    AbortedTxn, Segment, SegmentConfig, SegmentFileKind, TransactionIndex, parse_segment_file_name,
    segment_file_path,
};
use crate::storage::{LockMode, OpenMode, Storage, create_dir_durably};

/// How many bytes of records uncompressed legacy messages may fill in one v2 batch: a Kafka
/// producer's default `batch.size` (16 KiB).
pub const GROUPED_RECORDS_BYTES: usize = 16 * 1024;

/// How much one read of the source asks for.
const READ_BYTES: usize = 1 << 20;

/// How many bytes of batches are buffered before one write to a destination segment.
const WRITE_BYTES: usize = 1 << 20;

/// How much of a side file one copy step moves.
const COPY_CHUNK: usize = 1 << 20;

/// Kafka's files that the upgrade copies as they are, besides `*.snapshot` and `.txnindex`.
const KAFKA_FILES: &[&str] = &["partition.metadata", "leader-epoch-checkpoint"];

/// How [`upgrade_dir`] rewrites a directory.
#[non_exhaustive]
#[derive(Debug, Clone)]
pub struct UpgradeOptions {
    /// The codec of every batch the upgrade must rewrite (legacy messages, gzip and snappy v2
    /// batches): [`Compression::None`], [`Compression::Lz4`] or [`Compression::Zstd`]. `None`
    /// chooses per batch (see [`UpgradeOptions::codec_for`]). v2 batches in none, lz4 or zstd
    /// are copied as they are either way. Default: `None`.
    pub compression: Option<Compression>,
    /// The zstd level of rewritten batches. Default: 3, Kafka's `compression.zstd.level`.
    pub zstd_level: i32,
    /// The storage, and `index.interval.bytes` and `segment.index.bytes` of the destination's
    /// indexes. Default: [`LogConfig::default`].
    pub config: LogConfig,
}

impl Default for UpgradeOptions {
    fn default() -> Self {
        UpgradeOptions {
            compression: None,
            zstd_level: DEFAULT_ZSTD_LEVEL,
            config: LogConfig::default(),
        }
    }
}

impl UpgradeOptions {
    /// The codec a rewritten batch whose source codec is `source` gets: the one set in
    /// [`compression`](Self::compression), else `source` where partlog writes it, zstd for
    /// gzip and lz4 for snappy.
    pub fn codec_for(&self, source: Compression) -> Compression {
        self.compression.unwrap_or(match source {
            Compression::Gzip => Compression::Zstd,
            Compression::Snappy => Compression::Lz4,
            writable => writable,
        })
    }
}

/// What [`upgrade_dir`] did to one segment.
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpgradedSegment {
    /// The segment's base offset, the same in both directories.
    pub base_offset: i64,
    /// The source `.log` file's length.
    pub source_bytes: u64,
    /// The destination `.log` file's length.
    pub bytes: u64,
    /// v2 batches copied byte for byte.
    pub batches_copied: u64,
    /// v2 batches recompressed (gzip and snappy).
    pub batches_recompressed: u64,
    /// Legacy messages read (a compressed wrapper counts once).
    pub legacy_messages: u64,
    /// v2 batches written into the destination, copies included.
    pub batches_written: u64,
    /// Records in the batches written (their `recordsCount`), control records included.
    pub records: u64,
}

/// What [`upgrade_dir`] did.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpgradeReport {
    /// The source directory.
    pub src: PathBuf,
    /// The destination directory.
    pub dst: PathBuf,
    /// The log start offset, kept from the source.
    pub log_start_offset: i64,
    /// The log end offset, the same in both directories.
    pub log_end_offset: i64,
    /// Every destination segment, in offset order.
    pub segments: Vec<UpgradedSegment>,
    /// Kafka's files copied as they are, by name.
    pub copied_files: Vec<String>,
    /// Files of the source that were not copied, by name: leftovers of interrupted operations,
    /// segments wholly below the log start offset or past the end a read of the source
    /// reaches, and files the upgrade does not know.
    pub skipped_files: Vec<String>,
    /// `.txnindex` files written rather than copied, by name: when the source's last close was
    /// not clean, those of the segments its open recovered, from the aborted transactions that
    /// open replayed (a crash may have cost the source's files entries).
    pub rebuilt_files: Vec<String>,
    /// Bytes at the end of the source that a read-only open did not serve (a torn tail left by
    /// a crash), and so were not copied.
    pub source_bytes_not_copied: u64,
}

/// Rewrites the partition directory `src` into `dst` as RecordBatch v2 in codecs partlog writes,
/// keeping offsets (gaps included), timestamps and their type, keys, values and headers, and the
/// segment layout:
///
/// - v2 batches in none, lz4 or zstd are copied byte for byte; gzip and snappy ones are
///   recompressed, every other header field and the records' bytes kept;
/// - a legacy compressed wrapper becomes one v2 batch ending at the wrapper's offset (a
///   LogAppendTime wrapper, a LogAppendTime batch); uncompressed legacy messages in a row are
///   grouped into batches of up to [`GROUPED_RECORDS_BYTES`] of records;
/// - segments keep their base offsets; indexes are built anew; `partition.metadata`,
///   `leader-epoch-checkpoint`, `*.snapshot` and `.txnindex` files are copied as they are;
/// - everything is synced, then `partlog.checkpoint` gets a clean-shutdown record, last, so the
///   destination opens without a scan; inside a Kafka log directory the broker's lock is held
///   and its clean-shutdown marker set aside meanwhile, as by [`Log::open`].
///
/// `dst` must not exist or be an empty directory. `src` is opened read-only
/// ([`Log::open_read_only`]), so a partlog writer holding it makes this fail with
/// [`Error::Locked`]; what that open serves, `[log start, log end)`, is what is copied. Gaps
/// between segments are accepted, as in a compacted log.
///
/// Errors: [`Error::InvalidArgument`] when `src` is not a directory or `dst` is not empty; a
/// source that does not read ([`Error::Corrupt`], [`Error::UnsupportedCompression`] for gzip or
/// snappy without their features); I/O errors. A failed upgrade leaves `dst` without its
/// checkpoint: remove it and run again.
///
/// ```no_run
/// # fn main() -> partlog::Result<()> {
/// use partlog::{Compression, UpgradeOptions, upgrade_dir};
///
/// let mut options = UpgradeOptions::default();
/// options.compression = Some(Compression::Zstd);
/// let report = upgrade_dir("/var/kafka-0.10/orders-0", "/var/kafka/orders-0", &options)?;
/// println!("offsets [{}, {})", report.log_start_offset, report.log_end_offset);
/// # Ok(())
/// # }
/// ```
pub fn upgrade_dir(
    src: impl AsRef<Path>,
    dst: impl AsRef<Path>,
    options: &UpgradeOptions,
) -> Result<UpgradeReport> {
    let (src, dst) = (src.as_ref(), dst.as_ref());
    options.config.validate()?;
    if let Some(codec) = options.compression
        && !codec.is_supported()
    {
        return Err(Error::UnsupportedCompression { codec: codec.id() });
    }
    let storage = Arc::clone(&options.config.storage);
    if !storage.metadata(src)?.is_dir {
        return Err(Error::InvalidArgument {
            why: format!("{} is not a directory", src.display()),
        });
    }
    check_destination(&*storage, dst)?;
    // Before anything is created: a running broker must find its log directory untouched.
    let membership = kafka_dir::enter(&storage, dst)?;
    let result = Upgrade::run(&storage, src, dst, options);
    match membership.map(|m| m.leave(result.is_ok())) {
        Some(Err(leave_error)) if result.is_ok() => Err(leave_error),
        Some(Err(leave_error)) => {
            log::warn!("{}: {leave_error}", dst.display());
            result
        }
        _ => result,
    }
}

/// Fails unless `dst` is missing or an empty directory.
fn check_destination(storage: &dyn Storage, dst: &Path) -> Result<()> {
    let metadata = match storage.metadata(dst) {
        Ok(metadata) => metadata,
        Err(error) if error.io_kind() == Some(std::io::ErrorKind::NotFound) => return Ok(()),
        Err(error) => return Err(error),
    };
    if !metadata.is_dir {
        return Err(Error::InvalidArgument {
            why: format!("{} exists and is not a directory", dst.display()),
        });
    }
    let mut names = storage.list(dst)?;
    names.sort();
    if let Some(name) = names.first() {
        return Err(Error::InvalidArgument {
            why: format!(
                "{} is not empty (it holds {name}{}): the upgrade writes only into a new or \
                 empty directory",
                dst.display(),
                match names.len() - 1 {
                    0 => String::new(),
                    1 => " and 1 other entry".to_owned(),
                    n => format!(" and {n} other entries"),
                }
            ),
        });
    }
    Ok(())
}

/// One run of the upgrade.
struct Upgrade<'a> {
    storage: &'a Arc<dyn Storage>,
    src: &'a Path,
    dst: &'a Path,
    options: &'a UpgradeOptions,
    segment_config: SegmentConfig,
    now_ms: i64,
    /// Where the read of the source starts.
    log_start: i64,
    /// The base offsets of the destination's segments, in order.
    bases: Vec<i64>,
    /// Which of `bases` is being written; `None` before the first.
    current: Option<usize>,
    segment: Option<Segment>,
    summary: UpgradedSegment,
    done: Vec<UpgradedSegment>,
    /// Whole batches waiting to be written to `segment`.
    out: Vec<u8>,
    /// Uncompressed legacy messages being grouped into one batch.
    group: Option<Group>,
    /// The byte position of the next source batch in its segment, when known (a read that
    /// starts inside the first segment cannot know it).
    position: Option<u64>,
    scratch: Vec<u8>,
    /// When the source's open recovered it: the base of the first segment it scanned, from
    /// which the `.txnindex` files are written from these aborted transactions, not copied.
    txn_rebuild: Option<(i64, Vec<AbortedTxn>)>,
}

/// Uncompressed legacy messages on their way into one v2 batch.
struct Group {
    builder: BatchBuilder,
    timestamp_type: TimestampType,
    /// Under LogAppendTime, the append time every member shares.
    append_time: i64,
}

impl<'a> Upgrade<'a> {
    fn run(
        storage: &'a Arc<dyn Storage>,
        src: &'a Path,
        dst: &'a Path,
        options: &'a UpgradeOptions,
    ) -> Result<UpgradeReport> {
        let mut source_config = options.config.clone();
        // Segments of a compacted log may leave gaps between them; a read-only open of a log
        // that is not compacted would stop at the first one, as after a lost tail.
        source_config.cleanup_policy = CleanupPolicy::COMPACT;
        let source = Log::open_read_only(src, source_config)?;
        let log_start = source.log_start_offset();
        // A source that needed recovery may have lost `.txnindex` entries in the segments its
        // open scanned (Kafka creates the file lazily, so a power loss can take it): those are
        // written from the aborted transactions the open's replay met, as a writable open's
        // recovery rebuilds them, not copied.
        let recovered_from = {
            let report = source.recovery_report();
            (!report.clean_shutdown).then_some(report.recovery_point)
        };
        let log_end = source.log_end_offset();
        let names = storage.list(src)?;
        let mut source_bases: Vec<i64> = names
            .iter()
            .filter_map(|name| parse_segment_file_name(name))
            .filter(|parsed| parsed.transient.is_none() && parsed.kind == SegmentFileKind::Log)
            .map(|parsed| parsed.base_offset)
            .collect();
        source_bases.sort_unstable();
        let txn_rebuild = recovered_from.map(|point| {
            let first = source_bases
                .partition_point(|&b| b < point)
                .saturating_sub(1);
            let base = source_bases.get(first).copied().unwrap_or(point);
            (base, source.replayed_aborted_from(base))
        });
        // The segments that hold `[log_start, log_end)`, and an empty last one at `log_end`.
        let bases: Vec<i64> = source_bases
            .iter()
            .enumerate()
            .filter(|&(i, &base)| {
                base <= log_end && source_bases.get(i + 1).is_none_or(|&next| next > log_start)
            })
            .map(|(_, &base)| base)
            .collect();

        create_dir_durably(&**storage, dst)?;
        // Keeps partlog users out while the destination is incomplete; the file stays, as in
        // any partlog directory.
        let _lock = storage.lock(&dst.join(LOCK_FILE), LockMode::Exclusive)?;
        let config = &options.config;
        let mut upgrade = Upgrade {
            storage,
            src,
            dst,
            options,
            segment_config: SegmentConfig {
                // Never rolls: the segments are the source's.
                segment_bytes: i32::MAX as u32,
                segment_index_bytes: config.segment_index_bytes,
                index_interval_bytes: config.index_interval_bytes,
                segment_ms: config.max_segment_ms(),
                roll_jitter_ms: 0,
                preallocate: false,
                map_sealed_reads: false,
                map_active_reads: false,
                // The upgrade writes; it never reads at random.
                position_cache_bytes: 0,
            },
            now_ms: config.clock.now_ms(),
            log_start,
            bases,
            current: None,
            segment: None,
            summary: UpgradedSegment::default(),
            done: Vec::new(),
            out: Vec::with_capacity(WRITE_BYTES),
            group: None,
            position: None,
            scratch: Vec::new(),
            txn_rebuild,
        };
        upgrade.copy_batches(&source, log_start)?;
        let last = upgrade.finish_segments()?;
        let (copied_files, skipped_files) = upgrade.copy_kafka_files(&names)?;
        let rebuilt_files = upgrade.write_rebuilt_txn_indexes()?;
        storage.sync_dir(dst)?;

        let log_end_written = last.next_offset();
        if log_end_written != log_end {
            return Err(Error::InvalidArgument {
                why: format!(
                    "the upgraded log ends at offset {log_end_written}, but {} ends at {log_end}",
                    src.display()
                ),
            });
        }
        // Last: the clean-shutdown record marks the destination complete.
        let (mut checkpoint, _) = CheckpointFile::open(storage, dst)?;
        checkpoint.write(
            log_end,
            log_start,
            Some(CleanShutdown {
                active_segment_base: last.base_offset(),
                active_segment_size: last.size(),
                log_end_offset: log_end,
            }),
            true,
        )?;
        Ok(UpgradeReport {
            src: src.to_path_buf(),
            dst: dst.to_path_buf(),
            log_start_offset: log_start,
            log_end_offset: log_end,
            segments: upgrade.done,
            copied_files,
            skipped_files,
            rebuilt_files,
            source_bytes_not_copied: source.recovery_report().bytes_truncated,
        })
    }

    /// Reads every batch of the source from `log_start` on and writes it into its segment.
    fn copy_batches(&mut self, source: &Log, log_start: i64) -> Result<()> {
        let mut offset = log_start;
        loop {
            let fetch = source.read(offset, READ_BYTES, ReadBound::LogEnd)?;
            if fetch.is_empty() {
                return Ok(());
            }
            for batch in fetch.batches() {
                let batch = batch?;
                let size = batch.total_size() as u64;
                self.enter_segment_of(batch.last_offset())?;
                let position = self.position;
                self.copy_batch(&batch)
                    .map_err(|error| self.locate(error, position))?;
                self.position = self.position.map(|p| p + size);
            }
            offset = fetch.next_offset();
        }
    }

    /// Gives an error about the source batch at `position` of the current segment its place.
    fn locate(&self, error: Error, position: Option<u64>) -> Error {
        match (error, position) {
            (Error::InvalidBatch { what }, Some(position)) => {
                let base = self.summary.base_offset;
                let file = segment_file_path(self.src, base, SegmentFileKind::Log);
                corruption_in_file(what, &file, position)
            }
            (error, _) => error,
        }
    }

    /// Makes the segment that holds `last_offset` the current one, finishing the ones before
    /// it (empty ones included).
    fn enter_segment_of(&mut self, last_offset: i64) -> Result<()> {
        let wanted = self
            .bases
            .partition_point(|&base| base <= last_offset)
            .saturating_sub(1);
        while self.current.is_none_or(|current| current < wanted) {
            let next = self.current.map_or(0, |current| current + 1);
            self.finish_segment()?;
            self.open_segment(next)?;
        }
        Ok(())
    }

    fn open_segment(&mut self, index: usize) -> Result<()> {
        let Some(&base) = self.bases.get(index) else {
            return Err(Error::InvalidArgument {
                why: format!("no segment number {index} to upgrade"),
            });
        };
        let segment = Segment::create(
            self.storage,
            self.dst,
            base,
            self.segment_config.clone(),
            self.now_ms,
        )?;
        self.summary = UpgradedSegment {
            base_offset: base,
            source_bytes: self
                .storage
                .metadata(&segment_file_path(self.src, base, SegmentFileKind::Log))?
                .len,
            ..UpgradedSegment::default()
        };
        // A segment read from its first byte has known positions; the first one may be read
        // from the log start offset, inside it.
        self.position = (index > 0 || base == self.log_start).then_some(0);
        self.segment = Some(segment);
        self.current = Some(index);
        Ok(())
    }

    /// Writes what is pending into the current segment, seals it and makes it durable.
    fn finish_segment(&mut self) -> Result<Option<Segment>> {
        self.flush_group()?;
        self.flush_out()?;
        let Some(segment) = self.segment.take() else {
            return Ok(None);
        };
        // As at a roll or close: the final time-index entry, then data and indexes to disk.
        // The `.log` keeps the source's mtime: time retention counts a segment's age from it
        // (legacy magic 0 segments carry no timestamps at all). `flush_sealed` fsyncs, so the
        // mtime is durable too.
        segment.seal()?;
        let source_log = segment_file_path(self.src, segment.base_offset(), SegmentFileKind::Log);
        let source_mtime = self.storage.metadata(&source_log)?.modified_ms;
        self.storage.set_mtime(&segment.log_path(), source_mtime)?;
        segment.flush_sealed()?;
        self.summary.bytes = segment.size();
        self.done.push(std::mem::take(&mut self.summary));
        Ok(Some(segment))
    }

    /// Finishes every segment, empty trailing ones included, and returns the last.
    fn finish_segments(&mut self) -> Result<Segment> {
        let last = self.bases.len().saturating_sub(1);
        while self.current.is_none_or(|current| current < last) {
            let next = self.current.map_or(0, |current| current + 1);
            self.finish_segment()?;
            self.open_segment(next)?;
        }
        self.finish_segment()?
            .ok_or_else(|| Error::InvalidArgument {
                why: format!("{} holds no segment to upgrade", self.src.display()),
            })
    }

    fn copy_batch(&mut self, batch: &Batch<'_>) -> Result<()> {
        match batch {
            Batch::V2(view) => self.copy_v2(view),
            Batch::Legacy(view) => {
                self.summary.legacy_messages += 1;
                if view.header().is_compressed() {
                    self.flush_group()?;
                    self.rewrite_wrapper(view)
                } else {
                    self.add_to_group(view)
                }
            }
        }
    }

    fn copy_v2(&mut self, view: &BatchView<'_>) -> Result<()> {
        self.flush_group()?;
        let header = view.header();
        let codec = header.compression()?;
        if codec.is_supported() {
            self.summary.batches_copied += 1;
            self.push_batch(view.as_bytes(), header.records_count)
        } else {
            let target = self.options.codec_for(codec);
            let batch = recompress(view, target, self.options.zstd_level, &mut self.scratch)?;
            self.summary.batches_recompressed += 1;
            self.push_batch(&batch, header.records_count)
        }
    }

    /// One compressed legacy message: one v2 batch of its inner messages, ending at the
    /// wrapper's offset.
    fn rewrite_wrapper(&mut self, view: &LegacyBatchView<'_>) -> Result<()> {
        let header = *view.header();
        let codec = self.options.codec_for(header.compression()?);
        let records = view
            .records(&mut self.scratch)?
            .collect::<Result<Vec<_>>>()?;
        let Some(first) = records.first() else {
            return Err(no_inner_messages());
        };
        let last_offset_delta = header
            .last_offset()
            .checked_sub(first.offset)
            .and_then(|delta| i32::try_from(delta).ok())
            .ok_or_else(|| Error::InvalidArgument {
                why: format!(
                    "the legacy wrapper at offset {} spans more than i32::MAX offsets",
                    header.last_offset()
                ),
            })?;
        let mut builder = BatchBuilder::new(codec)
            .compression_level(self.options.zstd_level)
            .base_offset(first.offset)
            .last_offset_delta(last_offset_delta);
        if header.timestamp_type() == TimestampType::LogAppendTime {
            builder = builder.log_append_time(header.max_timestamp());
        }
        for record in &records {
            builder.push_record_at_offset(record);
        }
        let count = i32::try_from(records.len()).unwrap_or(i32::MAX);
        let batch = builder.build()?;
        self.push_batch(&batch, count)
    }

    /// An uncompressed legacy message joins the batch being grouped, or starts the next one.
    fn add_to_group(&mut self, view: &LegacyBatchView<'_>) -> Result<()> {
        let header = *view.header();
        let timestamp_type = header.timestamp_type();
        // An uncompressed message's record borrows the message itself: no scratch is used.
        let mut unused = Vec::new();
        let mut records = view.records(&mut unused)?;
        let record = records.next().ok_or_else(no_inner_messages)??;
        let joins = self.group.as_ref().is_some_and(|group| {
            group.timestamp_type == timestamp_type
                && (timestamp_type == TimestampType::CreateTime
                    || group.append_time == record.timestamp)
                && group.builder.uncompressed_size() < GROUPED_RECORDS_BYTES
        });
        if !joins {
            self.flush_group()?;
            let codec = self.options.codec_for(Compression::None);
            let mut builder = BatchBuilder::with_capacity(codec, GROUPED_RECORDS_BYTES)
                .compression_level(self.options.zstd_level)
                .base_offset(record.offset);
            if timestamp_type == TimestampType::LogAppendTime {
                builder = builder.log_append_time(record.timestamp);
            }
            self.group = Some(Group {
                builder,
                timestamp_type,
                append_time: record.timestamp,
            });
        }
        if let Some(group) = self.group.as_mut() {
            group.builder.push_record_at_offset(&record);
        }
        Ok(())
    }

    fn flush_group(&mut self) -> Result<()> {
        let Some(group) = self.group.take() else {
            return Ok(());
        };
        let count = i32::try_from(group.builder.record_count()).unwrap_or(i32::MAX);
        let batch = group.builder.build()?;
        self.push_batch(&batch, count)
    }

    /// Queues one whole v2 batch for the current segment.
    fn push_batch(&mut self, batch: &[u8], records: i32) -> Result<()> {
        if self.out.len() + batch.len() > WRITE_BYTES {
            self.flush_out()?;
        }
        self.out.extend_from_slice(batch);
        self.summary.batches_written += 1;
        self.summary.records += u64::try_from(records).unwrap_or(0);
        Ok(())
    }

    fn flush_out(&mut self) -> Result<()> {
        if self.out.is_empty() {
            return Ok(());
        }
        let segment = self
            .segment
            .as_ref()
            .ok_or_else(|| Error::InvalidArgument {
                why: "batches to write before any segment".into(),
            })?;
        segment.append(&self.out)?;
        self.out.clear();
        Ok(())
    }

    /// Copies Kafka's files (see the [module docs](self)) and sorts every other name into
    /// handled or skipped. Returns (copied, skipped).
    fn copy_kafka_files(&self, names: &[String]) -> Result<(Vec<String>, Vec<String>)> {
        let mut copied = Vec::new();
        let mut skipped = Vec::new();
        let mut names = names.to_vec();
        names.sort();
        for name in names {
            let copy = match parse_segment_file_name(&name) {
                Some(parsed) if parsed.transient.is_some() => false,
                Some(parsed) => {
                    let kept = self.bases.binary_search(&parsed.base_offset).is_ok();
                    match parsed.kind {
                        // Written from the replay from there on (`write_rebuilt_txn_indexes`).
                        SegmentFileKind::TxnIndex
                            if self
                                .txn_rebuild
                                .as_ref()
                                .is_some_and(|(from, _)| parsed.base_offset >= *from) =>
                        {
                            continue;
                        }
                        SegmentFileKind::TxnIndex => kept,
                        // Rewritten, or left out with their segment.
                        SegmentFileKind::Log
                        | SegmentFileKind::OffsetIndex
                        | SegmentFileKind::TimeIndex => {
                            if !kept {
                                skipped.push(name);
                            }
                            continue;
                        }
                    }
                }
                // partlog's own files are written anew.
                None if name == LOCK_FILE || name == CHECKPOINT_FILE_NAME => continue,
                None => {
                    (KAFKA_FILES.contains(&name.as_str()) || name.ends_with(".snapshot"))
                        && !self.storage.metadata(&self.src.join(&name))?.is_dir
                }
            };
            if copy {
                self.copy_file(&name)?;
                copied.push(name);
            } else {
                skipped.push(name);
            }
        }
        Ok((copied, skipped))
    }

    /// Writes the `.txnindex` of every destination segment from the first one the source's
    /// open recovered on, from the aborted transactions that open's replay met, and returns
    /// their names.
    fn write_rebuilt_txn_indexes(&self) -> Result<Vec<String>> {
        let Some((from, aborted)) = &self.txn_rebuild else {
            return Ok(Vec::new());
        };
        let mut written = Vec::new();
        for (i, &base) in self.bases.iter().enumerate().filter(|(_, b)| **b >= *from) {
            let next = self.bases.get(i + 1).copied().unwrap_or(i64::MAX);
            let path = segment_file_path(self.dst, base, SegmentFileKind::TxnIndex);
            let index = TransactionIndex::new_empty(self.storage, &path, base);
            for txn in aborted
                .iter()
                .filter(|t| t.last_offset >= base && t.last_offset < next)
            {
                index.append(*txn)?;
            }
            index.flush()?;
            if index.file_exists() {
                written.extend(path.file_name().map(|n| n.to_string_lossy().into_owned()));
            }
        }
        Ok(written)
    }

    /// Copies one file from the source into the destination and syncs it.
    fn copy_file(&self, name: &str) -> Result<()> {
        let from = self.storage.open(&self.src.join(name), OpenMode::Read)?;
        let to = self
            .storage
            .open(&self.dst.join(name), OpenMode::CreateNew)?;
        let len = from.len()?;
        let mut buf = vec![0u8; usize::try_from(len).unwrap_or(COPY_CHUNK).min(COPY_CHUNK)];
        let mut position = 0u64;
        while position < len {
            let n = usize::try_from(len - position)
                .unwrap_or(COPY_CHUNK)
                .min(buf.len());
            let chunk = buf.get_mut(..n).unwrap_or_default();
            from.read_exact_at(chunk, position)?;
            to.write_all_at(chunk, position)?;
            position += n as u64;
        }
        to.sync_data()
    }
}

fn no_inner_messages() -> Error {
    Error::InvalidBatch {
        what: crate::error::Corruption::BadRecord("a legacy message holds no records"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::NewRecord;
    use crate::storage::OsStorage;

    fn small_segments() -> LogConfig {
        LogConfig::builder_for_tests()
            .segment_bytes(4096)
            .index_interval_bytes(256)
            .build()
            .unwrap()
    }

    /// A closed partlog log of 120 one-record batches over several segments.
    fn write_log(dir: &Path) -> Vec<i64> {
        let log = Log::open(dir, small_segments()).unwrap();
        for i in 0..120i64 {
            let key = format!("key-{i}");
            let record = NewRecord::new(1_000 + i, Some(key.as_bytes()), Some(&[b'v'; 100]))
                .with_header("n", Some(key.as_bytes()));
            log.append(&[record]).unwrap();
        }
        log.close().unwrap();
        let mut bases: Vec<i64> = OsStorage::new()
            .list(dir)
            .unwrap()
            .iter()
            .filter_map(|name| parse_segment_file_name(name))
            .filter(|p| p.kind == SegmentFileKind::Log)
            .map(|p| p.base_offset)
            .collect();
        bases.sort_unstable();
        bases
    }

    fn read_all(dir: &Path) -> Vec<(i64, i64, Vec<u8>)> {
        let log = Log::open_read_only(dir, small_segments()).unwrap();
        log.records(log.log_start_offset(), ReadBound::LogEnd)
            .map(|r| {
                let r = r.unwrap();
                (r.offset, r.timestamp, r.value.unwrap())
            })
            .collect()
    }

    #[test]
    fn codecs_default_to_the_source_where_partlog_writes_it() {
        let mut options = UpgradeOptions::default();
        let pairs = [
            (Compression::None, Compression::None),
            (Compression::Lz4, Compression::Lz4),
            (Compression::Gzip, Compression::Zstd),
            (Compression::Snappy, Compression::Lz4),
        ];
        for (source, target) in pairs {
            assert_eq!(options.codec_for(source), target);
        }
        options.compression = Some(Compression::None);
        for (source, _) in pairs {
            assert_eq!(options.codec_for(source), Compression::None);
        }
    }

    #[test]
    fn a_partlog_log_is_copied_batch_for_batch_with_its_segments() {
        let temp = tempfile::tempdir().unwrap();
        let (src, dst) = (temp.path().join("src"), temp.path().join("dst"));
        let bases = write_log(&src);
        assert!(bases.len() >= 3, "{bases:?}");
        let options = UpgradeOptions::default();
        let report = upgrade_dir(&src, &dst, &options).unwrap();
        assert_eq!((report.log_start_offset, report.log_end_offset), (0, 120));
        let upgraded: Vec<i64> = report.segments.iter().map(|s| s.base_offset).collect();
        assert_eq!(upgraded, bases);
        for segment in &report.segments {
            // Nothing to rewrite: the files are the same bytes.
            assert_eq!(segment.batches_copied, segment.batches_written);
            assert_eq!(segment.bytes, segment.source_bytes);
            let name = format!("{:020}.log", segment.base_offset);
            assert_eq!(
                std::fs::read(dst.join(&name)).unwrap(),
                std::fs::read(src.join(&name)).unwrap()
            );
        }
        assert_eq!(read_all(&dst), read_all(&src));
        let log = Log::open(&dst, small_segments()).unwrap();
        assert!(log.recovery_report().clean_shutdown);
        assert_eq!(log.log_end_offset(), 120);
    }

    #[test]
    fn the_log_start_offset_is_kept_and_segments_below_it_left_out() {
        let temp = tempfile::tempdir().unwrap();
        let (src, dst) = (temp.path().join("src"), temp.path().join("dst"));
        let bases = write_log(&src);
        // Inside the third segment: the first two lie wholly below it.
        let start = bases[2] + 1;
        let log = Log::open(&src, small_segments()).unwrap();
        log.delete_records_before(start).unwrap();
        log.close().unwrap();
        drop(log);

        let report = upgrade_dir(&src, &dst, &UpgradeOptions::default()).unwrap();
        assert_eq!(report.log_start_offset, start);
        let upgraded: Vec<i64> = report.segments.iter().map(|s| s.base_offset).collect();
        assert_eq!(upgraded, bases[2..]);
        for base in &bases[..2] {
            assert!(
                report.skipped_files.contains(&format!("{base:020}.log")),
                "{report:?}"
            );
            assert!(!dst.join(format!("{base:020}.log")).exists());
        }
        let after = read_all(&dst);
        assert_eq!(after.first().map(|r| r.0), Some(start));
        assert_eq!(after, read_all(&src));
        let log = Log::open(&dst, small_segments()).unwrap();
        assert!(log.recovery_report().clean_shutdown);
        assert_eq!(log.log_start_offset(), start);
    }

    #[test]
    fn a_torn_tail_of_the_source_is_not_copied() {
        let temp = tempfile::tempdir().unwrap();
        let (src, dst) = (temp.path().join("src"), temp.path().join("dst"));
        let bases = write_log(&src);
        let storage = OsStorage::new();
        let last = segment_file_path(&src, bases[bases.len() - 1], SegmentFileKind::Log);
        let last_bytes = storage.metadata(&last).unwrap().len;
        // Half a batch at the end, as a crash while appending leaves it.
        let file = storage.open(&last, OpenMode::ReadWrite).unwrap();
        let mut head = vec![0u8; 80];
        file.read_exact_at(&mut head, 0).unwrap();
        file.write_all_at(&head, last_bytes).unwrap();
        drop(file);

        let report = upgrade_dir(&src, &dst, &UpgradeOptions::default()).unwrap();
        assert_eq!(report.source_bytes_not_copied, 80);
        let torn = report.segments.last().unwrap();
        assert_eq!(
            (torn.source_bytes, torn.bytes),
            (last_bytes + 80, last_bytes)
        );
        assert_eq!(read_all(&dst), read_all(&src));
        assert_eq!(report.log_end_offset, 120);
    }

    #[test]
    fn an_empty_last_segment_is_kept() {
        let temp = tempfile::tempdir().unwrap();
        let (src, dst) = (temp.path().join("src"), temp.path().join("dst"));
        let bases = write_log(&src);
        // What a roll leaves when nothing is appended after it.
        OsStorage::new()
            .open(
                &segment_file_path(&src, 120, SegmentFileKind::Log),
                OpenMode::CreateNew,
            )
            .unwrap();

        let report = upgrade_dir(&src, &dst, &UpgradeOptions::default()).unwrap();
        let upgraded: Vec<i64> = report.segments.iter().map(|s| s.base_offset).collect();
        assert_eq!(upgraded.len(), bases.len() + 1);
        assert_eq!(upgraded.last(), Some(&120));
        assert_eq!(report.segments.last().unwrap().bytes, 0);
        assert_eq!(read_all(&dst), read_all(&src));
        let log = Log::open(&dst, small_segments()).unwrap();
        assert!(log.recovery_report().clean_shutdown);
        assert_eq!(log.log_end_offset(), 120);
        assert_eq!(log.stats().segments, bases.len() + 1);
    }

    #[test]
    fn a_destination_that_is_not_empty_is_refused_untouched() {
        let temp = tempfile::tempdir().unwrap();
        let (src, dst) = (temp.path().join("src"), temp.path().join("dst"));
        write_log(&src);
        write_log(&dst);
        let before = OsStorage::new().list(&dst).unwrap().len();
        match upgrade_dir(&src, &dst, &UpgradeOptions::default()) {
            Err(Error::InvalidArgument { why }) => assert!(why.contains("is not empty"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(OsStorage::new().list(&dst).unwrap().len(), before);
    }

    #[test]
    fn a_source_held_by_a_writer_is_refused() {
        let temp = tempfile::tempdir().unwrap();
        let (src, dst) = (temp.path().join("src"), temp.path().join("dst"));
        write_log(&src);
        let _writer = Log::open(&src, small_segments()).unwrap();
        assert!(matches!(
            upgrade_dir(&src, &dst, &UpgradeOptions::default()),
            Err(Error::Locked { .. })
        ));
        assert!(!dst.exists());
    }
}
