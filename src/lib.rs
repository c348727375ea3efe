//! partlog: the per-partition commit log of Apache Kafka, as an embeddable Rust library.
//!
//! A partlog directory is a Kafka partition directory: RecordBatch v2 `.log` files, `.index`
//! and `.timeindex` files in Kafka's layouts, and Kafka's 20-digit file names, so Kafka's own
//! tools read what partlog writes. Linux only for 0.x.
//!
//! ```
//! use partlog::{Log, LogConfig, NewRecord, ReadBound};
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let dir = tempfile::tempdir()?;
//!     let log = Log::open(dir.path(), LogConfig::default())?;
//!     let record = NewRecord::new(1_700_000_000_000, Some(b"user-7"), Some(b"signed up"));
//!     let appended = log.append(&[record])?; // in the file: survives a crash of this process
//!     log.wait_durable(appended.last_offset)?; // fsynced: survives a crash of the machine
//!     let read: Vec<_> = log.records(0, ReadBound::Durable).collect::<Result<_, _>>()?;
//!     assert_eq!(read[0].value.as_deref(), Some(&b"signed up"[..]));
//!     log.close()?; // the final fsync and the clean-shutdown record
//!     Ok(())
//! }
//! ```
//!
//! # A fuller example
//!
//! Durability on every append (acks=all), a batch read byte for byte, a tombstone, and a reopen
//! after a clean close:
//!
//! ```
//! use partlog::{FlushPolicy, Log, LogConfig, NewRecord, ReadBound};
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let dir = tempfile::tempdir()?;
//!     // Kafka's defaults, except that every append is fsynced before it returns (acks=all).
//!     let config = LogConfig::builder()
//!         .flush_policy(FlushPolicy::EveryAppend)
//!         .build()?;
//!
//!     let log = Log::open(dir.path(), config.clone())?;
//!     let appended = log.append(&[
//!         NewRecord::new(1_700_000_000_000, Some(b"user-7"), Some(b"signed up")),
//!         NewRecord::new(1_700_000_000_001, Some(b"user-7"), None), // a tombstone
//!     ])?;
//!     assert_eq!((appended.first_offset, appended.last_offset), (0, 1));
//!     assert!(log.durable_offset() > appended.last_offset);
//!
//!     // A read returns whole batches, byte for byte as they lie in the .log file.
//!     let fetch = log.read(0, 1024 * 1024, ReadBound::Durable)?;
//!     let mut scratch = Vec::new();
//!     let mut values = Vec::new();
//!     for batch in fetch.batches() {
//!         for record in batch?.records(&mut scratch)? {
//!             let record = record?;
//!             values.push((record.offset, record.value.map(<[u8]>::to_vec)));
//!         }
//!     }
//!     assert_eq!(values, [(0, Some(b"signed up".to_vec())), (1, None)]);
//!     log.close()?; // the final fsync and the clean-shutdown record
//!     drop(log); // close() released partlog.lock already; the handle only answers Error::Closed
//!
//!     // After a clean close, reopening scans nothing and offsets go on where they stopped.
//!     let log = Log::open(dir.path(), config)?;
//!     assert!(log.recovery_report().clean_shutdown);
//!     let next = log.append(&[NewRecord::new(1_700_000_000_002, None, Some(b"hi"))])?;
//!     assert_eq!(next.first_offset, 2);
//!     log.close()?;
//!     Ok(())
//! }
//! ```
//!
//! # The public API
//!
//! The modules are private: the stable API is the one `pub use` block of this file.
//!
//! | item | what it is |
//! | --- | --- |
//! | [`Log`] | one partition directory: [`open`](Log::open) / [`open_read_only`](Log::open_read_only), [`append`](Log::append) / [`append_refs`](Log::append_refs) / [`append_batch`](Log::append_batch), [`read`](Log::read) / [`read_into`](Log::read_into) / [`records`](Log::records) / [`records_until`](Log::records_until) / [`tail`](Log::tail), [`wait_durable`](Log::wait_durable), [`sync`](Log::sync), [`roll`](Log::roll), [`truncate_to`](Log::truncate_to), [`delete_records_before`](Log::delete_records_before), [`enforce_retention`](Log::enforce_retention), [`compact`](Log::compact), [`close`](Log::close). `Send + Sync`: share it with an `Arc`. |
//! | [`LogConfig`], [`LogConfigBuilder`] | every setting, under its Kafka name with Kafka's default; [`CleanupPolicy`], [`CompressionType`], [`RecoveryMode`] |
//! | [`FlushPolicy`] | when appends are fsynced without being asked (Kafka's `flush.messages` / `flush.ms`); the default leaves it to the OS, as Kafka does |
//! | [`ReadBound`], [`ReadEnd`] | how far a read may go: [`LogEnd`](ReadBound::LogEnd), only what is [`Durable`](ReadBound::Durable), or below the [`HighWatermark`](ReadBound::HighWatermark); where [`Log::records_until`] stops: an offset or a timestamp |
//! | replication hooks on [`Log`], [`EpochEntry`] | what a replication layer such as [`replica`] drives: [`become_leader`](Log::become_leader) / [`become_follower`](Log::become_follower), [`append_as_follower`](Log::append_as_follower), [`truncate_fully_and_start_at`](Log::truncate_fully_and_start_at), [`set_high_watermark`](Log::set_high_watermark) / [`high_watermark`](Log::high_watermark), and the leader-epoch cache ([`end_offset_for_epoch`](Log::end_offset_for_epoch), [`leader_epoch_entries`](Log::leader_epoch_entries)) |
//! | [`FetchData`], [`FetchBatches`] | what [`Log::read`] returns: whole, CRC-checked batches, with their segment pinned |
//! | [`RecordRead`], [`VerifiedBatchCache`] | point reads: [`Log::read_record_into`]'s reusable buffers, and the bounded, process-wide cache of the batches they checked |
//! | [`LogRecord`], [`LogRecords`], [`LogTail`] | owned records, the iterator of [`Log::records`] across segments, and the one of [`Log::tail`], which waits for new records; with feature `stream`, `LogTailStream` ([`Log::tail_stream`](Log)) is the same as an async `Stream` |
//! | [`ConsumerPosition`] | a consumer's committed position, kept durably in a file of its own |
//! | [`LogAppendInfo`], [`LogStats`], [`RecoveryReport`], [`Discarded`], [`DiscardReason`] | what an append stored, the log's counters, what the last open found and did (and what it cut, why, and how many records) |
//! | [`RetentionReport`], [`DeletedSegment`], [`RetentionRule`] | what a retention pass deleted, and by which rule |
//! | [`CompactionOptions`], [`CompactionStats`], [`CompactionSchedule`], [`PRODUCER_ID_EXPIRATION_MS`] | one compaction pass's settings and what it did (transactions included: it cleans below the last stable offset); whether a pass is due ([`Log::compaction_schedule`]); Kafka's default `producer.id.expiration.ms` |
//! | [`Observer`], [`LogEvent`] | a hook that hears rolls, fsyncs, recoveries, retention and compaction passes as they happen (metrics, aimed fault tests) |
//! | [`Producer`], [`ProducerConfig`], [`ProducerConfigBuilder`], [`ProducerMode`], [`Acks`], [`SendHandle`] | the batching writer: `send` one record at a time, appended in batches by a background thread; the handle resolves per `acks` (0, 1, all), blocking or as a future; idempotent and transactional modes (`begin`, `commit`, `abort`) |
//! | [`WaitDurable`], [`WaitForData`] | the future forms of [`Log::wait_durable`] and [`Log::wait_for_data`]: [`Log::durable`], [`Log::data_available`] |
//! | [`replica`] | Kafka's `Partition` rules over a log (leader and follower roles, the ISR, the high watermark, `acks=all` appends) and the follower's truncation protocol, driven by the caller's calls: partlog moves no bytes between machines |
//! | [`Error`], [`Corruption`], [`Result`] | the one error type, and the kinds of bad bytes |
//! | [`BatchBuilder`], [`NewRecord`], [`RecordRef`] | records in (owning or borrowing their bytes), one RecordBatch v2 out (none, lz4 or zstd), for [`Log::append_batch`] |
//! | [`BatchView`], [`BatchHeader`], [`BatchIter`], [`Record`], [`RecordIter`], [`Header`], [`HeaderIter`] | borrowed, validated views of batch bytes; records decode lazily |
//! | [`Batch`], [`AnyBatchIter`], [`BatchRecords`], [`LegacyBatchView`], [`LegacyHeader`], [`LegacyRecordIter`] | either kind of batch a log may hold: v2, or legacy (magic 0/1) messages, as [`FetchData::batches`] yields them |
//! | [`Compression`], [`TimestampType`], [`ControlRecordType`], [`EndTransactionMarker`] | the codec, timestamp-type and control-record fields of the format |
//! | [`verify_dir`], [`VerifyReport`], [`Finding`], [`Severity`], [`SegmentSummary`], [`repair_dir`], [`RepairPlan`] | a full, read-only check of a directory, legacy messages included, and the repair of what it found (what `partlog verify` and `--repair` run) |
//! | [`upgrade_dir`], [`UpgradeOptions`], [`UpgradeReport`], [`UpgradedSegment`], [`GROUPED_RECORDS_BYTES`] | rewrites a directory of legacy (magic 0/1) messages or gzip/snappy batches as v2, same offsets (what `partlog upgrade` runs) |
//! | [`unstable`] | the lower layers (segments, indexes, the storage seam, the clock, `partlog.checkpoint`, and with feature `sim` the crash simulator); may change before 1.0 |
//!
//! **Durability in one paragraph.** [`Log::append`] returns once its batch is in the file and
//! visible to readers: it then survives a crash of the process. It survives a crash of the
//! machine once [`Log::durable_offset`] has passed it, which [`Log::wait_durable`] (acks=all)
//! or [`FlushPolicy::EveryAppend`] bring about with one shared fsync (group commit).
//! [`Producer`]'s docs map Kafka's `acks` to these calls.
//!
//! **Which calls block.** `append` blocks on the write (and on the fsync under `EveryAppend`);
//! `wait_durable` and [`Log::wait_for_data`] block until their condition holds, as does the
//! `next` of a [`LogTail`] until a record comes; [`Log::sync`] and `close` block on an fsync,
//! [`Log::roll`] on creating the new segment's files. [`Producer::send`] blocks only while `buffer.memory` is full;
//! [`Producer::flush`] and [`Producer::close`] block until what was sent is stored. The
//! futures ([`SendHandle`], [`Log::durable`], [`Log::data_available`]) never block: they need
//! no runtime and wake through the task's `Waker`.
//!
//! # Files in a log directory
//!
//! Every name is Kafka's where Kafka has the file; `<base>` is a segment's first offset in 20
//! digits. A backup copies the whole directory and must keep the files' mtimes: a sealed
//! segment's `.log` mtime is its append time, which time retention reads.
//!
//! | file | what it holds |
//! | --- | --- |
//! | `<base>.log` | the segment's record batches, RecordBatch v2 ([`BatchHeader`]), or legacy messages (read only) |
//! | `<base>.index`, `<base>.timeindex` | Kafka's sparse offset and time indexes ([`unstable::OffsetIndex`], [`unstable::TimeIndex`]): derived data, rebuilt from the `.log` when wrong |
//! | `<base>.txnindex` | the aborted transactions whose ABORT marker lies in the segment ([`AbortedTxn`], [`unstable::TransactionIndex`]) |
//! | `<offset>.snapshot` | the producer state at an offset ([`unstable::producer_snapshot`]) |
//! | `leader-epoch-checkpoint` | which leader epoch began at which offset ([`unstable::leader_epoch`]) |
//! | `partlog.checkpoint` | the recovery point, the log start offset and the clean-shutdown record ([`unstable::checkpoint`]) |
//! | `partlog.cleaner-checkpoint` | compaction's first dirty offset ([`Log::compact`]) |
//! | `partlog.properties` | the per-log settings stored with the log ([`LogConfig`], [`unstable::read_stored_settings`]) |
//! | `partlog.lock` | locked by the writer (exclusive) and by read-only opens (shared); empty |
//! | `*.deleted`, `*.cleaned`, `*.swap` | files on their way out (waiting for readers) or in (compaction); an open completes or removes them |

mod clock;
mod error;
mod format;
mod index;
mod log;
mod position;
mod producer;
pub mod replica;
mod rng;
mod segment;
mod storage;
mod sync;
mod upgrade;
mod verify;
mod workers;

#[cfg(feature = "stream")]
pub use crate::log::LogTailStream;
pub use crate::upgrade::{
    GROUPED_RECORDS_BYTES, UpgradeOptions, UpgradeReport, UpgradedSegment, upgrade_dir,
};
pub use crate::verify::{
    Finding, RepairPlan, SegmentSummary, Severity, VerifyReport, repair_dir, verify_dir,
};
pub use crate::{
    error::{Corruption, Error, Result},
    format::{
        AnyBatchIter, Batch, BatchBuilder, BatchHeader, BatchIter, BatchRecords, BatchView,
        Compression, ControlRecordType, EndTransactionMarker, Header, HeaderIter, LegacyBatchView,
        LegacyHeader, LegacyRecordIter, NewRecord, Record, RecordIter, RecordRef, TimestampType,
    },
    log::leader_epoch::EpochEntry,
    log::{
        CleanupPolicy, CommittedRecords, CompactionOptions, CompactionPolicy, CompactionPolicyInfo,
        CompactionSchedule, CompactionStats, CompressionType, DeletedSegment, DiscardReason,
        Discarded, FetchBatches, FetchData, FlushPolicy, Isolation, KafkaCompaction, Log,
        LogAppendInfo, LogConfig, LogConfigBuilder, LogEvent, LogRecord, LogRecords, LogStats,
        LogTail, Observer, PRODUCER_ID_EXPIRATION_MS, ProducerStateEntry, ReadBound, ReadEnd,
        ReadOptions, RecordRead, RecordVersion, RecoveryMode, RecoveryReport, RetentionReport,
        RetentionRule, VerifiedBatchCache, WaitDurable, WaitForData, compaction_policies,
    },
    position::ConsumerPosition,
    producer::{
        Acks, HeldBatchHook, Producer, ProducerConfig, ProducerConfigBuilder, ProducerMode,
        ProducerStats, SendHandle,
    },
    segment::AbortedTxn,
    workers::Workers,
};

/// The lower layers: segments, indexes, the storage seam, the clock and (feature `sim`) the
/// crash simulator. Public so that users can build on partlog's pieces and crash-test their own
/// code on it; unstable until 1.0.
pub mod unstable {
    /// The format layer: RecordBatch v2 header layout constants, frame peeking, in-place header
    /// edits, control batches, CRC-32C and varints; legacy (magic 0 and 1) message layout.
    pub mod format {
        pub use crate::format::*;
    }

    #[cfg(feature = "sim")]
    pub use crate::clock::ManualClock;
    pub use crate::clock::{Clock, SystemClock};
    pub use crate::index::{OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset};
    pub use crate::log::checkpoint;
    pub use crate::log::{
        PROPERTIES_FILE_NAME, per_log_setting_names, read_stored_settings, write_stored_settings,
    };
    pub use crate::rng::SplitMix64;
    pub use crate::segment::{
        ABORTED_TXN_VERSION, AbortedTxn, AppendInfo, InvalidBytes, RollReason, ScanReport, Segment,
        SegmentConfig, SegmentFileKind, SegmentFileName, SegmentRead, SegmentRole,
        TransactionIndex, TransientSuffix, TxnIndexSearchResult, list_segment_bases,
        parse_segment_file_name, segment_file_name, segment_file_path,
    };
    pub use crate::workers::{Lane, Next, Task, TaskHandle};

    /// Kafka's leader-epoch cache (`LeaderEpochFileCache`) and its file `leader-epoch-checkpoint`,
    /// text in Kafka's `LeaderEpochCheckpointFile` layout.
    pub mod leader_epoch {
        pub use crate::log::leader_epoch::*;
    }

    /// Kafka's producer-state snapshot files (`<offset>.snapshot`, `ProducerSnapshot` v1): the
    /// codec, the names, and the list of a directory's snapshots, byte for byte Kafka's.
    pub mod producer_snapshot {
        pub use crate::log::producer_snapshot::*;
    }
    #[cfg(feature = "sim")]
    pub use crate::storage::sim;
    pub use crate::storage::{
        Advice, CanonicalPath, FileId, FileLock, LockMode, Metadata, OpenMode, OsStorage,
        ReadMapping, Storage, StorageFile, create_dir_durably, replace_file_durably, transfer_to,
    };
    #[cfg(feature = "sim")]
    pub use crate::storage::{CrashConfig, SimStorage};
}
