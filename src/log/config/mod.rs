//! Owns [`LogConfig`] and its builder, checks and policy types, and the settings stored with a
//! log (`properties.rs`, `partlog.properties`). Uses `observe` (the [`Observer`] a config holds).
//!
//! [`LogConfig`]: every setting of a log, with Kafka's names, Kafka's defaults and Kafka's limits.
//!
//! A setting that Kafka has keeps Kafka's name in its docs and in every error about it, so that a
//! topic's configuration carries over as it is. partlog's own settings (the recovery-point cadence,
//! the recovery mode, the storage and the clock) say so in their docs.
//!
//! The fields are public so that users can read them; because users can also write them,
//! `Log::open` validates the config again instead of trusting the builder's check.
//!
//! The folder splits the config by owner: this file holds the settings themselves and what is
//! derived from them; `builder.rs` the builder, `validate.rs` the checks, `policies.rs` the
//! policy types that settings take.

mod builder;
pub(in crate::log) mod compaction_policy;
mod policies;
pub(in crate::log) mod properties;
mod validate;

use std::sync::Arc;
use std::time::Duration;

use crate::clock::{Clock, SystemClock};
#[cfg(doc)]
use crate::error::Error;
use crate::format::TimestampType;
use crate::segment::SegmentConfig;
use crate::segment::verified::VerifiedBatchCache;
use crate::storage::{OsStorage, Storage};

use crate::log::observe::Observer;
use properties::ExplicitSettings;

pub use builder::LogConfigBuilder;
pub use policies::{CleanupPolicy, CompressionType, FlushPolicy, RecoveryMode};

/// Kafka's `max.message.bytes` default: 1 MiB of batch plus the 12-byte log overhead.
const DEFAULT_MAX_MESSAGE_BYTES: u32 = 1_048_588;

/// Every setting of a log. Build one with [`LogConfig::builder`], or start from
/// [`LogConfig::default`] (Kafka's defaults) and change fields.
///
/// Each field's docs name the Kafka topic config it mirrors (the broker-wide name is given where it
/// differs) and end with the default. Invalid values are rejected by [`LogConfigBuilder::build`],
/// by [`LogConfig::validate`] and again when a log opens, with
/// [`Error::InvalidConfig`] naming the setting as Kafka spells it.
///
/// **Per-log settings are stored with the log.** The settings Kafka has as topic configs
/// (`cleanup.policy`, `compression.type`, `delete.retention.ms`, `index.interval.bytes`,
/// `max.compaction.lag.ms`, `max.message.bytes`, `message.timestamp.*`,
/// `min.cleanable.dirty.ratio`, `min.compaction.lag.ms`, `preallocate`, `retention.bytes`,
/// `retention.ms`, `segment.*`), and KIP-280's `compaction.strategy` and
/// `compaction.strategy.header`, are kept in the log's `partlog.properties` when they differ from
/// the defaults. An open takes the stored value for each of them the caller left unset (not
/// given to the builder, and at its default); one the caller set is applied and, by a writable
/// open, stored in place of the old value, as `kafka-configs --alter` would. See
/// [`store_settings`](Self::store_settings) and [`LogConfig::setting`]. The other fields are
/// the opener's own and are never stored.
///
/// **Time retention is opt-in:** unlike Kafka's brokers (7 days), partlog's default
/// `retention.ms` is -1, so a log deletes nothing by age until asked to.
#[non_exhaustive]
#[derive(Clone, Debug)]
pub struct LogConfig {
    /// `segment.bytes` (broker: `log.segment.bytes`): the size at which the active segment rolls.
    /// A batch that would take the segment past this size goes into a new segment.
    ///
    /// Range: [`LogConfig::MIN_SEGMENT_BYTES`] (1 MiB, Kafka 4's floor) to `i32::MAX`, since
    /// Kafka's segment files are at most 2 GiB. A config from [`LogConfig::for_tests`] or
    /// [`LogConfig::builder_for_tests`] accepts down to [`LogConfig::MIN_SEGMENT_BYTES_FOR_TESTS`].
    /// Default: 1073741824 (1 GiB).
    pub segment_bytes: u32,

    /// `segment.ms` (broker: `log.roll.ms`): the age at which the active segment rolls even if it
    /// is not full, so that retention and compaction, which work a segment at a time, can reach its
    /// records. Age is measured as Kafka measures it: from the first batch's timestamp, or from the
    /// segment's creation when that batch has none.
    ///
    /// Range: at least 1. Default: 604800000 (7 days).
    pub segment_ms: i64,

    /// `segment.jitter.ms` (broker: `log.roll.jitter.ms`): the largest random amount taken off each
    /// segment's roll age, so that many logs created together do not all roll at once. Each segment
    /// draws its own jitter ([`LogConfig::draw_roll_jitter`]).
    ///
    /// Range: at least 0. Default: 0 (no jitter).
    pub segment_jitter_ms: i64,

    /// `segment.index.bytes` (broker: `log.index.size.max.bytes`): the largest size of each index
    /// file of the active segment, rounded down to whole entries. A full index rolls the segment.
    ///
    /// Range: 24 (two 12-byte time-index entries: one entry plus the slot that Kafka reserves for
    /// the entry written at roll) to `i32::MAX` (Kafka's type is an `int`).
    /// Default: 10485760 (10 MiB).
    pub segment_index_bytes: u32,

    /// `index.interval.bytes` (broker: `log.index.interval.bytes`): how many bytes of batches are
    /// appended between two index entries. Smaller means denser indexes and shorter scans per read.
    ///
    /// Any value is valid; 0 indexes every append but a segment's first. Default: 4096.
    pub index_interval_bytes: u32,

    /// `retention.ms` (broker: `log.retention.ms`): how long a segment is kept after its newest
    /// record, when [`cleanup_policy`](Self::cleanup_policy) includes `delete`.
    ///
    /// **partlog's default is -1: no time retention unless asked for.** Kafka's default,
    /// 604800000 (7 days), belongs to Kafka's brokers; an embedded log whose records carry old
    /// timestamps (an import, a replay) would lose them all at its first retention pass. Set it
    /// to Kafka's value explicitly to get Kafka's behaviour; it is then stored with the log
    /// (`partlog.properties`).
    ///
    /// Range: -1 (keep forever) or at least 0. Default: -1 (Kafka's: 604800000, 7 days).
    pub retention_ms: i64,

    /// `retention.bytes` (broker: `log.retention.bytes`): the size the log may grow to before its
    /// oldest segments are deleted, when [`cleanup_policy`](Self::cleanup_policy) includes
    /// `delete`. In Kafka it is per partition; here, per log.
    ///
    /// Range: -1 (no size limit) or at least 0. Default: -1.
    pub retention_bytes: i64,

    /// `retention.timestamp.skew.ms`, partlog's own setting (Kafka has none like it): how far a
    /// segment's largest record timestamp may lie after its append time before time retention
    /// stops trusting it. A sealed segment's age counts from the smaller of its largest
    /// timestamp and its append time (the `.log` file's mtime, set at roll) plus this skew, so a
    /// record stamped far in the future cannot keep its segment, and every later one, forever
    /// (Kafka's KAFKA-20609). A segment without timestamps ages from its mtime, as in Kafka.
    ///
    /// The default equals `message.timestamp.after.max.ms`'s: a timestamp that passed that check
    /// is at most that far after its append time, so its segment ages exactly as in Kafka.
    ///
    /// Range: at least 0. Default: 3600000 (1 hour).
    pub retention_timestamp_skew_ms: i64,

    /// `retention.check.interval.ms` (broker: `log.retention.check.interval.ms`): how often a
    /// writable log's background maintenance thread runs retention
    /// ([`Log::enforce_retention`](crate::Log::enforce_retention)) and, in a compacted log, a
    /// compaction pass when one is due. The thread runs when the log has something to keep
    /// short: `retention_ms` or `retention_bytes` at least 0, or a cleanup policy with
    /// `compact`; or when this interval was given to a [`LogConfigBuilder`] (for producer expiry
    /// alone). A log without either runs no thread, and retention runs only when called. -1
    /// turns the thread off: retention and compaction then run only when called.
    ///
    /// [`LogConfig::for_tests`] starts from -1, so that a test's own calls are the only passes.
    ///
    /// Range: -1 (no maintenance thread) or at least 1. Default: 300000 (5 minutes, Kafka's).
    pub retention_check_interval_ms: i64,

    /// `cleanup.policy` (broker: `log.cleanup.policy`): whether old segments are deleted,
    /// compacted, both, or neither. See [`CleanupPolicy`]. Default: `delete`.
    pub cleanup_policy: CleanupPolicy,

    /// `delete.retention.ms` (broker: `log.cleaner.delete.retention.ms`): how long compaction keeps
    /// a tombstone (and a transaction marker) after the pass that first recopies it, so that a
    /// consumer reading from the start sees the delete.
    ///
    /// Range: at least 0. Default: 86400000 (1 day).
    pub delete_retention_ms: i64,

    /// `min.compaction.lag.ms` (broker: `log.cleaner.min.compaction.lag.ms`): the least time a
    /// record stays uncompacted.
    ///
    /// Range: 0 to [`max_compaction_lag_ms`](Self::max_compaction_lag_ms). Default: 0.
    pub min_compaction_lag_ms: i64,

    /// `max.compaction.lag.ms` (broker: `log.cleaner.max.compaction.lag.ms`): the most time a
    /// record stays ineligible for compaction. On a compacted log it also caps the segment's roll
    /// age ([`LogConfig::max_segment_ms`]), as in Kafka.
    ///
    /// Range: at least 1. Default: 9223372036854775807 (`i64::MAX`, no limit).
    pub max_compaction_lag_ms: i64,

    /// `log.cleaner.io.max.bytes.per.second` (broker: `log.cleaner.io.max.bytes.per.second`;
    /// the opener's setting, never stored with the log): the most bytes a second that this log's compaction passes
    /// read and write together. A pass over the cap sleeps until it is back under it, so that a
    /// long pass leaves the disk to the appends and syncs of the logs beside it, at the cost of a
    /// longer pass. Range: above 0. Default: `f64::MAX` (no cap, Kafka's default).
    pub cleaner_io_max_bytes_per_second: f64,

    /// `min.cleanable.dirty.ratio` (broker: `log.cleaner.min.cleanable.ratio`): the share of the
    /// log that must be uncompacted before compaction runs. Higher means fewer, cheaper passes and
    /// more duplicates on disk.
    ///
    /// Range: 0.0 to 1.0. Default: 0.5.
    pub min_cleanable_dirty_ratio: f64,

    /// `compaction.strategy` (Kafka's KIP-280 name; partlog's own setting, which Kafka's
    /// brokers do not have): the [`CompactionPolicy`](crate::CompactionPolicy) that decides which
    /// record of a key compaction keeps, by its name in
    /// [`compaction_policies`](crate::compaction_policies).
    ///
    /// Range: a name the registry lists. Default: `offset` (Kafka's: the latest offset wins).
    pub compaction_strategy: String,

    /// `compaction.strategy.header` (Kafka's KIP-280 name; partlog's own setting): the record
    /// header a policy that orders records by a header (`header`) reads the version from.
    /// Policies that read no header ignore it.
    ///
    /// Default: empty.
    pub compaction_strategy_header: String,

    /// `max.message.bytes` (broker: `message.max.bytes`): the largest batch an append accepts,
    /// counted with its 12-byte log overhead (the offset and length fields), which is why Kafka's
    /// default is 1 MiB plus 12. A larger batch fails with [`Error::RecordTooLarge`]; it is never
    /// split.
    ///
    /// Range: 0 to [`segment_bytes`](Self::segment_bytes), since a batch never spans two segments.
    /// Default: 1048588, or `segment_bytes` when a builder is given a smaller segment and no
    /// explicit `max_message_bytes`.
    pub max_message_bytes: u32,

    /// `compression.type`: the codec batches are stored with. See [`CompressionType`].
    /// Default: [`CompressionType::Producer`].
    pub compression_type: CompressionType,

    /// `message.timestamp.type` (broker: `log.message.timestamp.type`): whether records keep the
    /// producer's timestamps (`CreateTime`) or get the log's clock at append (`LogAppendTime`).
    /// Default: `CreateTime`.
    pub message_timestamp_type: TimestampType,

    /// `message.timestamp.before.max.ms` (broker: `log.message.timestamp.before.max.ms`): how far
    /// in the past a `CreateTime` timestamp may be, relative to the log's clock, before the append
    /// fails with [`Error::InvalidTimestamp`].
    ///
    /// Range: at least 0. Default: 9223372036854775807 (`i64::MAX`, no limit).
    pub message_timestamp_before_max_ms: i64,

    /// `message.timestamp.after.max.ms` (broker: `log.message.timestamp.after.max.ms`): how far in
    /// the future a `CreateTime` timestamp may be before the append fails with
    /// [`Error::InvalidTimestamp`]. Kafka 4 lowered the default from no limit to one hour
    /// (KIP-1030), because one far-future timestamp pins its segment against time retention.
    ///
    /// Range: at least 0. Default: 3600000 (1 hour).
    pub message_timestamp_after_max_ms: i64,

    /// `preallocate` (broker: `log.preallocate`): whether a new segment's `.log` file is created at
    /// its full `segment_bytes` length and trimmed to its real size at roll and at close, as Kafka
    /// does. Like Kafka's `RandomAccessFile.setLength`, this is a sparse `ftruncate`, not
    /// `fallocate`: no blocks are reserved, but the file's size no longer changes with each
    /// append, so an `fdatasync` has no size update to commit. Measured on the build machine
    /// (ext4), durable 100-byte appends (`FlushPolicy::EveryAppend`) ran 1.29x and 1.69x faster
    /// with it (medians of 7 A/B pairs, two runs of `cargo bench --bench preallocate`). After a
    /// crash the active segment ends in zeros, which recovery reads as a torn tail and trims.
    /// Default: false.
    pub preallocate: bool,

    /// `map.sealed.segments`, partlog's own setting (Kafka has none): serve reads of sealed
    /// segments from a read-only memory mapping of their `.log` files instead of positional
    /// reads (`pread`). The walk from an index entry to the batch then costs no system call and
    /// no copy, and only the returned batches are copied into the [`FetchData`](crate::FetchData).
    ///
    /// The risk is SIGBUS: touching a mapped page whose file range no longer exists, or that
    /// the disk fails to read, kills the process with a signal instead of returning an error.
    /// partlog never shrinks a mapped file under a reader (truncations wait for readers and drop
    /// the mapping first), but another process that truncates a segment file, or a media error
    /// in a sealed segment, brings the process down where a `pread` would have returned `EIO`.
    /// Default: false.
    pub map_sealed_segments: bool,

    /// `map.active.segment`, partlog's own setting (Kafka has none): serve reads of the active
    /// segment from a read-only memory mapping too, and so of every segment (a segment keeps its
    /// mapping when it is sealed), whatever `map.sealed.segments` says. The active `.log` is
    /// mapped once at `segment.bytes` (or its length, if larger), so appends need no new
    /// mapping; reads touch only bytes below the published end, which the file holds. A point
    /// read then checks its batch in place and copies only what it returns; a sequential read
    /// copies only the returned batches.
    ///
    /// The risk is that of `map.sealed.segments`, over the active segment as well: a media
    /// error or a truncation by another process is a SIGBUS. Each log being read reserves
    /// `segment.bytes` of address space (not memory) for its active segment. Storages without a
    /// live mapping (the simulator) read with `pread`. Default: false.
    pub map_active_segment: bool,

    /// `position.cache.bytes`, partlog's own setting (Kafka has none): the most memory each
    /// open segment may spend remembering where batches start, learned from the index walks of
    /// reads (4 bytes a batch). Kafka's offset index is sparse, so a read of a random offset
    /// walks the batch headers from the index entry; a read of an offset the cache covers reads
    /// just its batch, checked as any. A full cache drops the older half of what it learned.
    /// A log keeps at most 65 segments open (64 sealed and the active one), so random reads
    /// over all of them can hold 65 times this much. 0 turns the cache off. Range: at most 1 GiB.
    /// Default: 2097152 (2 MiB).
    pub position_cache_bytes: usize,

    /// `flush.messages` and `flush.ms` (broker: `log.flush.interval.messages`,
    /// `log.flush.interval.ms`): when appended data is fsynced. See [`FlushPolicy`] and
    /// [`FlushPolicy::from_kafka`]. Default: [`FlushPolicy::OsDecides`] (both Kafka settings at
    /// their default, `Long.MAX_VALUE`).
    pub flush_policy: FlushPolicy,

    /// `recovery.point.bytes`, partlog's own setting (Kafka has none like it): once the durable
    /// offset has moved this many bytes past the last recorded recovery point, the flusher syncs
    /// the active indexes and records a new recovery point in `partlog.checkpoint`. Recovery after
    /// a crash scans the log from the recovery point, so a smaller value means a shorter scan and
    /// more checkpoint writes. (Kafka records its recovery point on a broker-wide timer,
    /// `log.flush.offset.checkpoint.interval.ms`.)
    ///
    /// Range: at least 1. Default: 16777216 (16 MiB).
    pub recovery_point_bytes: u64,

    /// `recovery.point.ms`, partlog's own setting: the time after which a durable offset past the
    /// last recorded recovery point is recorded, whatever the bytes; see
    /// [`recovery_point_bytes`](Self::recovery_point_bytes).
    ///
    /// Range: at least 1. Default: 1000 (1 second).
    pub recovery_point_ms: u64,

    /// partlog's own setting: what opening the log does when it finds an invalid byte below the
    /// recovery point. See [`RecoveryMode`]. Default: [`RecoveryMode::Fail`].
    pub recovery_mode: RecoveryMode,

    /// partlog's own setting, for [`Log::open_read_only`](crate::Log::open_read_only) only: the
    /// log may be written meanwhile by another process. The read-only open then takes no lock at
    /// all (the writer holds
    /// `partlog.lock` exclusively), never trusts the clean-shutdown record, and follows the writer:
    /// at most every [`poll_interval`](Self::poll_interval) it re-reads `partlog.checkpoint`,
    /// re-lists the directory and re-checks the active segment's length, and reads up to the last
    /// complete batch. A batch still being written is not an error, and `ReadBound::Durable` reads
    /// stop at the recovery point the writer last recorded. A writable open ignores it. Default:
    /// false.
    // ARCHITECTURE.md §5, "Reading a log another process writes".
    pub allow_live_writer: bool,

    /// partlog's own setting: how often a read-only log opened with
    /// [`allow_live_writer`](Self::allow_live_writer) looks for what the writer added. Reads,
    /// `stats`, the offset getters and `wait_for_data` poll when this much time has passed since
    /// the last look, and never more often. Range: at least 1 ms. Default: 100 ms.
    pub poll_interval: Duration,

    /// `group.commit.max.gather`, partlog's own setting: the longest a group-commit leader waits
    /// before its `fdatasync` for the writers of the last round to append again, so that one
    /// sync covers them all. The leader waits only for as many writers as took part in the last
    /// round and for at most a quarter of the last sync's duration, so a lone writer never
    /// waits, and writers that stopped cost one shortened round. `cargo bench --bench compare`
    /// reports the records each sync covered with 8 threads, with gathering on and off (README,
    /// Performance). `Duration::ZERO` turns gathering off (PostgreSQL's `commit_delay` = 0).
    /// Range: at most 1 s. Default: 1 ms.
    pub group_commit_max_gather: Duration,

    /// `group.commit.max.spin`, partlog's own setting: the longest a writer waiting for a
    /// group-commit sync yields the CPU in a loop, watching for the sync to end, before it
    /// sleeps until woken; a gathering leader watches for writers the same way. Waking a
    /// sleeping thread costs a few microseconds on each side, which on a fast disk is a good
    /// part of a sync, and the writers a sync releases wake one another in turn. Waiters spin
    /// only when the last sync took at most this long: on a slower disk, sleeping costs little
    /// beside the sync. A spinning waiter gives the CPU to any other runnable thread at each
    /// yield, so it delays others by a system call, not a time slice (RocksDB's adaptive
    /// yield). `cargo bench --bench compare` in the workspace reports its effect on 8 writers.
    /// The cost is CPU time: 8 durable writers on 2 cores of a VM used about 1.8 cores instead
    /// of 0.7 and twice the CPU time a record, for a third more records a second. Where the CPU
    /// is metered or capped (a cgroup quota), set it to zero. A lone writer never spins.
    /// `Duration::ZERO` turns spinning off. Range: at most 10 ms. Default: 250 µs.
    // The runs: crates/partlog-bench/benches/README.md.
    pub group_commit_max_spin: Duration,

    /// `producer.id.expiration.ms` (broker: `producer.id.expiration.ms`, Kafka's
    /// `TransactionLogConfig`): how long the log keeps an idle producer's state (its epoch and
    /// its last 5 batches, for duplicate detection) after the producer's last write, measured on
    /// the log's [`clock`](Self::clock) against the timestamp of that write. A producer with an
    /// open transaction never expires. Once expired, the producer's next batch is accepted with
    /// any sequence, as for a new producer.
    ///
    /// Range: at least 1. Default: 86400000 (1 day).
    pub producer_id_expiration_ms: i64,

    /// `producer.id.expiration.check.interval.ms` (broker:
    /// `producer.id.expiration.check.interval.ms`): how often the maintenance thread drops the
    /// producers idle for [`producer_id_expiration_ms`](Self::producer_id_expiration_ms). A log
    /// runs that thread only when [`runs_maintenance`](Self::runs_maintenance) says so; without
    /// it, producers expire at the next open.
    ///
    /// Range: at least 1. Default: 600000 (10 minutes).
    pub producer_id_expiration_check_interval_ms: i64,

    /// `transaction.partition.verification.enable` (broker:
    /// `transaction.partition.verification.enable`, KIP-890): whether a transactional batch that
    /// opens a transaction must have been registered by the transaction coordinator first
    /// (`Log::register_transaction`, the in-process form of Kafka's partition verification).
    /// With it, a late write from a fenced or aborted producer fails with
    /// [`Error::InvalidTxnState`] instead of opening a transaction that no marker will close.
    /// Kafka's broker default is `true`; a bare `Log` has no coordinator to register
    /// transactions, so partlog's default is `false`. Default: false.
    pub transaction_partition_verification_enable: bool,

    /// partlog's own setting: the file system the log lives on. Tests pass a simulator
    /// (`SimStorage`, feature `sim`) to crash the log at chosen points. Default: `OsStorage`.
    pub storage: Arc<dyn Storage>,

    /// partlog's own setting: the clock behind every time rule (`segment.ms`, retention,
    /// compaction lags, timestamp bounds, `LogAppendTime`, interval flushes). Tests pass a
    /// `ManualClock` (feature `sim`) instead of sleeping. Default: `SystemClock`.
    pub clock: Arc<dyn Clock>,

    /// partlog's own setting: the cache of batches point reads
    /// ([`Log::read_record`](crate::Log::read_record)) have checked, copied into memory
    /// ([`VerifiedBatchCache`]). Default: the process-wide one, [`VerifiedBatchCache::global`]
    /// (64 MiB, shared by every log that keeps the default).
    pub verified_batch_cache: Arc<VerifiedBatchCache>,

    /// partlog's own setting: an [`Observer`] that hears the log's events (roll, fsync,
    /// recovery, retention, compaction), for metrics or to aim faults in tests. Default: none.
    pub observer: Option<Arc<dyn Observer>>,

    /// `store.settings`, partlog's own setting: whether a writable open stores the per-log
    /// settings (Kafka's topic configs: `cleanup.policy`, `retention.ms`, `segment.bytes`...)
    /// in `partlog.properties` beside the data, so that the next open, the `partlog` tool and
    /// any other program see the same log.
    ///
    /// Every open, whatever this says, applies the stored settings to each per-log setting the
    /// caller left unset: one not given to the builder (or [`LogConfigBuilder::set`]) and equal
    /// to its default. A per-log setting the caller did set wins over the stored value: with
    /// `true` it is applied and stored, replacing the stored value (as `kafka-configs --alter`
    /// does), and a setting set back to its default leaves the file; with `false` it is applied
    /// for this open only and the file is left as it was (the tool's one-off passes, such as
    /// `partlog retention --retention-ms`). Read-only opens never write the file.
    /// [`LogConfig::setting`] names the per-log settings. Default: true.
    pub store_settings: bool,

    /// partlog's own setting: the [`Workers`](crate::Workers) pool that runs the log's
    /// background work (its flusher, retention, producer expiry and compaction), shared with
    /// the other logs given the same pool. Never stored in `partlog.properties`. Default: none,
    /// and the log starts its own flusher thread (and a maintenance thread when
    /// `retention.check.interval.ms` is set).
    pub workers: Option<crate::Workers>,

    /// Which per-log settings the builder was given: they win over stored ones at open.
    pub(crate) explicit: ExplicitSettings,

    /// The smallest `segment_bytes` that [`validate`](Self::validate) accepts: 1 MiB, or 1 KiB for
    /// a config made by [`for_tests`](Self::for_tests). Private so that only those constructors
    /// choose it.
    segment_bytes_floor: u32,
}

impl Default for LogConfig {
    /// Kafka's defaults, on the OS file system and the system clock.
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 60 * 60 * 1000,
            segment_jitter_ms: 0,
            segment_index_bytes: 10 * 1024 * 1024,
            index_interval_bytes: 4096,
            retention_ms: -1,
            retention_bytes: -1,
            retention_timestamp_skew_ms: 60 * 60 * 1000,
            retention_check_interval_ms: 5 * 60 * 1000,
            cleanup_policy: CleanupPolicy::DELETE,
            delete_retention_ms: 24 * 60 * 60 * 1000,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            min_cleanable_dirty_ratio: 0.5,
            cleaner_io_max_bytes_per_second: f64::MAX,
            compaction_strategy: LogConfig::DEFAULT_COMPACTION_STRATEGY.to_string(),
            compaction_strategy_header: String::new(),
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            compression_type: CompressionType::Producer,
            message_timestamp_type: TimestampType::CreateTime,
            message_timestamp_before_max_ms: i64::MAX,
            message_timestamp_after_max_ms: 60 * 60 * 1000,
            preallocate: false,
            map_sealed_segments: false,
            map_active_segment: false,
            position_cache_bytes: 2 << 20,
            flush_policy: FlushPolicy::OsDecides,
            recovery_point_bytes: 16 * 1024 * 1024,
            recovery_point_ms: 1000,
            recovery_mode: RecoveryMode::Fail,
            allow_live_writer: false,
            poll_interval: Duration::from_millis(100),
            group_commit_max_gather: Duration::from_millis(1),
            group_commit_max_spin: Duration::from_micros(250),
            producer_id_expiration_ms: 24 * 60 * 60 * 1000,
            producer_id_expiration_check_interval_ms: 10 * 60 * 1000,
            transaction_partition_verification_enable: false,
            storage: Arc::new(OsStorage::new()),
            clock: Arc::new(SystemClock),
            verified_batch_cache: VerifiedBatchCache::global(),
            observer: None,
            store_settings: true,
            workers: None,
            explicit: ExplicitSettings::default(),
            segment_bytes_floor: LogConfig::MIN_SEGMENT_BYTES,
        }
    }
}

impl LogConfig {
    /// The smallest `segment.bytes` Kafka 4 accepts (KIP-1030), and so the smallest partlog
    /// accepts.
    pub const MIN_SEGMENT_BYTES: u32 = 1024 * 1024;

    /// The smallest `segment.bytes` of a config made by [`LogConfig::for_tests`] or
    /// [`LogConfig::builder_for_tests`], so that tests can roll many segments with few bytes.
    pub const MIN_SEGMENT_BYTES_FOR_TESTS: u32 = 1024;

    /// The largest `segment.bytes`, and the largest `segment.index.bytes`: Kafka's types for both
    /// are `int`, and a Kafka segment file is at most 2 GiB.
    pub const MAX_SEGMENT_BYTES: u32 = i32::MAX as u32;

    /// The smallest `segment.index.bytes`: two 12-byte time-index entries, since Kafka keeps the
    /// last slot of a time index for the entry written at roll.
    pub const MIN_SEGMENT_INDEX_BYTES: u32 = 24;

    /// The default `compaction.strategy`: `offset`, Kafka's policy
    /// ([`KafkaCompaction`](crate::KafkaCompaction)).
    pub const DEFAULT_COMPACTION_STRATEGY: &'static str = "offset";

    /// The [`CompactionPolicy`](crate::CompactionPolicy) that `compaction.strategy` names, built
    /// with this config's settings; [`Error::InvalidConfig`] for an unknown name or a setting
    /// the policy cannot take.
    pub fn compaction_policy(&self) -> crate::Result<Arc<dyn crate::CompactionPolicy>> {
        compaction_policy::compaction_policy(&self.compaction_strategy)?.build(self)
    }

    /// A builder that starts from Kafka's defaults.
    pub fn builder() -> LogConfigBuilder {
        LogConfigBuilder::starting_from(LogConfig::default())
    }

    /// A builder like [`LogConfig::builder`] whose `segment_bytes` may go down to
    /// [`LogConfig::MIN_SEGMENT_BYTES_FOR_TESTS`] (1 KiB) instead of 1 MiB.
    ///
    /// For tests only: tiny segments make a test exercise rolls, many segments and retention with
    /// little data. Kafka's own tests lower the floor the same way (`internal.segment.bytes`).
    pub fn builder_for_tests() -> LogConfigBuilder {
        LogConfigBuilder::starting_from(LogConfig::for_tests())
    }

    /// Kafka's defaults, except that `segment_bytes` may later be set as low as
    /// [`LogConfig::MIN_SEGMENT_BYTES_FOR_TESTS`] (1 KiB); see [`LogConfig::builder_for_tests`].
    ///
    /// The other defaults are Kafka's too, but for one: no background maintenance thread
    /// (`retention_check_interval_ms` is -1), so that retention and compaction run only when a
    /// test calls them or sets the interval. Set `segment_bytes` (and `max_message_bytes`, which
    /// may not exceed it) on the result.
    pub fn for_tests() -> LogConfig {
        LogConfig {
            segment_bytes_floor: LogConfig::MIN_SEGMENT_BYTES_FOR_TESTS,
            retention_check_interval_ms: -1,
            ..LogConfig::default()
        }
    }

    /// Whether a writable log opened with this config runs a background maintenance thread
    /// (see [`retention_check_interval_ms`](Self::retention_check_interval_ms)): the interval
    /// is on, and the log has retention or compaction to run, or the interval was set
    /// explicitly.
    pub fn runs_maintenance(&self) -> bool {
        self.retention_check_interval_ms > 0
            && (self.retention_ms >= 0
                || self.retention_bytes >= 0
                || self.cleanup_policy.compacts()
                || self.explicit.retention_check_interval_set())
    }

    /// Lets `segment_bytes` go down to [`LogConfig::MIN_SEGMENT_BYTES_FOR_TESTS`]: a stored
    /// `segment.bytes` passed validation when it was stored, perhaps by a test-sized config.
    pub(crate) fn allow_small_segments(&mut self) {
        self.segment_bytes_floor = LogConfig::MIN_SEGMENT_BYTES_FOR_TESTS;
    }

    /// The age at which a segment rolls: `segment_ms`, or on a compacted log the smaller of
    /// `segment_ms` and `max_compaction_lag_ms`, so that no record waits in the active segment
    /// (which compaction never touches) longer than the compaction lag allows. Kafka's
    /// `maxSegmentMs`.
    pub fn max_segment_ms(&self) -> i64 {
        if self.cleanup_policy.compacts() && self.max_compaction_lag_ms > 0 {
            self.segment_ms.min(self.max_compaction_lag_ms)
        } else {
            self.segment_ms
        }
    }

    /// The settings of one segment, with the roll jitter drawn for it
    /// ([`LogConfig::draw_roll_jitter`]). Its `segment_ms` is [`LogConfig::max_segment_ms`], the
    /// roll age that applies to this log.
    pub fn segment_config(&self, roll_jitter_ms: i64) -> SegmentConfig {
        SegmentConfig {
            segment_bytes: self.segment_bytes,
            segment_index_bytes: self.segment_index_bytes,
            index_interval_bytes: self.index_interval_bytes,
            segment_ms: self.max_segment_ms(),
            roll_jitter_ms,
            preallocate: self.preallocate,
            map_sealed_reads: self.map_sealed_segments || self.map_active_segment,
            map_active_reads: self.map_active_segment,
            position_cache_bytes: self.position_cache_bytes,
        }
    }

    /// A segment's roll jitter, from `random`, a uniformly random number the caller draws per
    /// segment: `random % min(segment.jitter.ms, max_segment_ms)`, and 0 when `segment.jitter.ms`
    /// is 0. The result is always in `[0, min(segment.jitter.ms, segment.ms))`.
    ///
    /// Kafka draws `abs(randomInt) % min(segment.jitter.ms, segment.ms)`. partlog bounds the draw
    /// by [`max_segment_ms`](Self::max_segment_ms) instead of `segment.ms`; the two differ only on
    /// a compacted log whose `max.compaction.lag.ms` is below `segment.ms`, where Kafka's jitter
    /// could exceed the roll age and roll the segment on every append. Kafka's random number is a
    /// non-negative `int`, which caps its jitter near 25 days; a `u64` does not.
    pub fn draw_roll_jitter(&self, random: u64) -> i64 {
        let bound = self.segment_jitter_ms.min(self.max_segment_ms());
        // A bound of 0 or less (no jitter, or a config that failed validation) draws nothing.
        let Ok(bound) = u64::try_from(bound) else {
            return 0;
        };
        match random.checked_rem(bound) {
            // The remainder is below `bound`, which came from an i64, so it converts back.
            Some(jitter) => i64::try_from(jitter).unwrap_or(0),
            None => 0,
        }
    }
}

#[cfg(test)]
mod tests;
