//! [`LogConfig`]: every setting of a log, with Kafka's names, Kafka's defaults and Kafka's limits.
//!
//! A setting that Kafka has keeps Kafka's name in its docs and in every error about it, so that a
//! topic's configuration carries over as it is. partlog's own settings (the recovery-point cadence,
//! the recovery mode, the storage and the clock) say so in their docs.
//!
//! The fields are public so that users can read them; because users can also write them,
//! `Log::open` validates the config again instead of trusting the builder's check.

use std::fmt;
use std::num::NonZeroU64;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::{Clock, SystemClock};
use crate::error::{Error, Result};
use crate::format::{Compression, TimestampType};
use crate::segment::SegmentConfig;
use crate::storage::{OsStorage, Storage};

use super::observer::Observer;

/// Kafka's `max.message.bytes` default: 1 MiB of batch plus the 12-byte log overhead.
const DEFAULT_MAX_MESSAGE_BYTES: u32 = 1_048_588;

/// Kafka's `Long.MAX_VALUE`, the "not set" value of `flush.messages` and `flush.ms`.
const KAFKA_LONG_MAX: i64 = i64::MAX;

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
/// `retention.ms`, `segment.*`) are kept in the log's `partlog.properties` when they differ from
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
    /// Range: [`LogConfig::MIN_SEGMENT_BYTES`] (1 MiB, Kafka 4's floor) to `i32::MAX`, since Kafka's
    /// segment files are at most 2 GiB. A config from [`LogConfig::for_tests`] or
    /// [`LogConfig::builder_for_tests`] accepts down to [`LogConfig::MIN_SEGMENT_BYTES_FOR_TESTS`].
    /// Default: 1073741824 (1 GiB).
    pub segment_bytes: u32,

    /// `segment.ms` (broker: `log.roll.ms`): the age at which the active segment rolls even if it is
    /// not full, so that retention and compaction, which work a segment at a time, can reach its
    /// records. Age is measured as Kafka measures it: from the first batch's timestamp, or from
    /// the segment's creation when that batch has none.
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
    /// oldest segments are deleted, when [`cleanup_policy`](Self::cleanup_policy) includes `delete`.
    /// In Kafka it is per partition; here, per log.
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

    /// `retention.check.interval.ms` (broker: `log.retention.check.interval.ms`, 300000 in Kafka):
    /// how often a background maintenance thread runs retention (`Log::enforce_retention`). partlog
    /// runs no such thread unless this is set: by default retention runs only when called.
    ///
    /// Range: -1 (no maintenance thread) or at least 1. Default: -1.
    pub retention_check_interval_ms: i64,

    /// `cleanup.policy` (broker: `log.cleanup.policy`): whether old segments are deleted, compacted,
    /// both, or neither. See [`CleanupPolicy`]. Default: `delete`.
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

    /// `max.compaction.lag.ms` (broker: `log.cleaner.max.compaction.lag.ms`): the most time a record
    /// stays ineligible for compaction. On a compacted log it also caps the segment's roll age
    /// ([`LogConfig::max_segment_ms`]), as in Kafka.
    ///
    /// Range: at least 1. Default: 9223372036854775807 (`i64::MAX`, no limit).
    pub max_compaction_lag_ms: i64,

    /// `min.cleanable.dirty.ratio` (broker: `log.cleaner.min.cleanable.ratio`): the share of the log
    /// that must be uncompacted before compaction runs. Higher means fewer, cheaper passes and more
    /// duplicates on disk.
    ///
    /// Range: 0.0 to 1.0. Default: 0.5.
    pub min_cleanable_dirty_ratio: f64,

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
    /// log may be written meanwhile by another process (ARCHITECTURE.md §5, "Reading a log another
    /// process writes"). The read-only open then takes no lock at all (the writer holds
    /// `partlog.lock` exclusively), never trusts the clean-shutdown record, and follows the writer:
    /// at most every [`poll_interval`](Self::poll_interval) it re-reads `partlog.checkpoint`,
    /// re-lists the directory and re-checks the active segment's length, and reads up to the last
    /// complete batch. A batch still being written is not an error, and `ReadBound::Durable` reads
    /// stop at the recovery point the writer last recorded. A writable open ignores it. Default:
    /// false.
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
    /// yield). `cargo bench --bench compare` reports its effect on 8 writers (crates/partlog-bench/benches/README.md).
    /// The cost is CPU time: 8 durable writers on 2 cores of a VM used about 1.8 cores instead
    /// of 0.7 and twice the CPU time a record, for a third more records a second. Where the CPU
    /// is metered or capped (a cgroup quota), set it to zero. A lone writer never spins.
    /// `Duration::ZERO` turns spinning off. Range: at most 10 ms. Default: 250 µs.
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
    /// producers idle for [`producer_id_expiration_ms`](Self::producer_id_expiration_ms). The
    /// maintenance thread runs only with
    /// [`retention_check_interval_ms`](Self::retention_check_interval_ms) set; without it,
    /// producers expire at the next open.
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

    /// Which per-log settings the builder was given: they win over stored ones at open.
    pub(crate) explicit: super::properties::ExplicitSettings,

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
            retention_check_interval_ms: -1,
            cleanup_policy: CleanupPolicy::DELETE,
            delete_retention_ms: 24 * 60 * 60 * 1000,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            min_cleanable_dirty_ratio: 0.5,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            compression_type: CompressionType::Producer,
            message_timestamp_type: TimestampType::CreateTime,
            message_timestamp_before_max_ms: i64::MAX,
            message_timestamp_after_max_ms: 60 * 60 * 1000,
            preallocate: false,
            map_sealed_segments: false,
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
            observer: None,
            store_settings: true,
            explicit: super::properties::ExplicitSettings::default(),
            segment_bytes_floor: LogConfig::MIN_SEGMENT_BYTES,
        }
    }
}

impl LogConfig {
    /// The smallest `segment.bytes` Kafka 4 accepts (KIP-1030), and so the smallest partlog accepts.
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

    /// A builder that starts from Kafka's defaults.
    pub fn builder() -> LogConfigBuilder {
        LogConfigBuilder {
            config: LogConfig::default(),
            max_message_bytes_set: false,
        }
    }

    /// A builder like [`LogConfig::builder`] whose `segment_bytes` may go down to
    /// [`LogConfig::MIN_SEGMENT_BYTES_FOR_TESTS`] (1 KiB) instead of 1 MiB.
    ///
    /// For tests only: tiny segments make a test exercise rolls, many segments and retention with
    /// little data. Kafka's own tests lower the floor the same way (`internal.segment.bytes`).
    pub fn builder_for_tests() -> LogConfigBuilder {
        LogConfigBuilder {
            config: LogConfig::for_tests(),
            max_message_bytes_set: false,
        }
    }

    /// Kafka's defaults, except that `segment_bytes` may later be set as low as
    /// [`LogConfig::MIN_SEGMENT_BYTES_FOR_TESTS`] (1 KiB); see [`LogConfig::builder_for_tests`].
    ///
    /// The defaults themselves are unchanged: set `segment_bytes` (and `max_message_bytes`, which
    /// may not exceed it) on the result.
    pub fn for_tests() -> LogConfig {
        LogConfig {
            segment_bytes_floor: LogConfig::MIN_SEGMENT_BYTES_FOR_TESTS,
            ..LogConfig::default()
        }
    }

    /// Lets `segment_bytes` go down to [`LogConfig::MIN_SEGMENT_BYTES_FOR_TESTS`]: a stored
    /// `segment.bytes` passed validation when it was stored, perhaps by a test-sized config.
    pub(crate) fn allow_small_segments(&mut self) {
        self.segment_bytes_floor = LogConfig::MIN_SEGMENT_BYTES_FOR_TESTS;
    }

    /// Checks every setting, and the rules between settings.
    ///
    /// The first invalid value found is returned as [`Error::InvalidConfig`], naming the setting as
    /// Kafka spells it. A rule between two settings names the one it asks to change: for example,
    /// a `max_message_bytes` above `segment_bytes` is an error about `max.message.bytes`.
    pub fn validate(&self) -> Result<()> {
        let floor = self.segment_bytes_floor;
        if self.segment_bytes < floor {
            let why = if floor == LogConfig::MIN_SEGMENT_BYTES {
                format!("{} is below the minimum of {floor}", self.segment_bytes)
            } else {
                format!(
                    "{} is below the minimum of {floor} (the floor of a test config)",
                    self.segment_bytes
                )
            };
            return Err(invalid("segment.bytes", why));
        }
        if self.segment_bytes > LogConfig::MAX_SEGMENT_BYTES {
            return Err(invalid(
                "segment.bytes",
                format!(
                    "{} exceeds the maximum of {} (i32::MAX: a Kafka segment file is at most 2 GiB)",
                    self.segment_bytes,
                    LogConfig::MAX_SEGMENT_BYTES
                ),
            ));
        }
        at_least("segment.ms", self.segment_ms, 1)?;
        at_least("segment.jitter.ms", self.segment_jitter_ms, 0)?;
        if self.segment_index_bytes < LogConfig::MIN_SEGMENT_INDEX_BYTES {
            return Err(invalid(
                "segment.index.bytes",
                format!(
                    "{} is below the minimum of {} (two 12-byte time-index entries: one entry \
                     and the slot reserved for the entry written at roll)",
                    self.segment_index_bytes,
                    LogConfig::MIN_SEGMENT_INDEX_BYTES
                ),
            ));
        }
        if self.segment_index_bytes > LogConfig::MAX_SEGMENT_BYTES {
            return Err(invalid(
                "segment.index.bytes",
                format!(
                    "{} exceeds the maximum of {} (i32::MAX, Kafka's limit)",
                    self.segment_index_bytes,
                    LogConfig::MAX_SEGMENT_BYTES
                ),
            ));
        }
        minus_one_or_at_least_zero(
            "retention.ms",
            self.retention_ms,
            "to keep segments forever",
        )?;
        minus_one_or_at_least_zero("retention.bytes", self.retention_bytes, "for no size limit")?;
        at_least(
            "retention.timestamp.skew.ms",
            self.retention_timestamp_skew_ms,
            0,
        )?;
        if self.retention_check_interval_ms != -1 && self.retention_check_interval_ms < 1 {
            return Err(invalid(
                "retention.check.interval.ms",
                format!(
                    "{} is invalid: use -1 for no maintenance thread, or a value of at least 1",
                    self.retention_check_interval_ms
                ),
            ));
        }
        at_least("delete.retention.ms", self.delete_retention_ms, 0)?;
        at_least("min.compaction.lag.ms", self.min_compaction_lag_ms, 0)?;
        at_least("max.compaction.lag.ms", self.max_compaction_lag_ms, 1)?;
        // `contains` is false for NaN, so NaN is rejected too; Rust prints it "NaN", hence the
        // lowercase spelling here.
        if !(0.0..=1.0).contains(&self.min_cleanable_dirty_ratio) {
            let value = if self.min_cleanable_dirty_ratio.is_nan() {
                "nan".to_string()
            } else {
                self.min_cleanable_dirty_ratio.to_string()
            };
            return Err(invalid(
                "min.cleanable.dirty.ratio",
                format!("{value} is outside the range 0.0 to 1.0"),
            ));
        }
        at_least(
            "message.timestamp.before.max.ms",
            self.message_timestamp_before_max_ms,
            0,
        )?;
        at_least(
            "message.timestamp.after.max.ms",
            self.message_timestamp_after_max_ms,
            0,
        )?;
        self.flush_policy.validate()?;
        if self.recovery_point_bytes == 0 {
            return Err(invalid(
                "recovery.point.bytes",
                "0 is below the minimum of 1",
            ));
        }
        if self.recovery_point_ms == 0 {
            return Err(invalid("recovery.point.ms", "0 is below the minimum of 1"));
        }
        if self.poll_interval < Duration::from_millis(1) {
            return Err(invalid(
                "poll.interval",
                format!("{:?} is below the minimum of 1 ms", self.poll_interval),
            ));
        }

        if self.position_cache_bytes > 1 << 30 {
            return Err(invalid(
                "position.cache.bytes",
                format!(
                    "{} is above the maximum of 1073741824 (1 GiB)",
                    self.position_cache_bytes
                ),
            ));
        }
        at_most_duration(
            "group.commit.max.gather",
            self.group_commit_max_gather,
            Duration::from_secs(1),
        )?;
        at_most_duration(
            "group.commit.max.spin",
            self.group_commit_max_spin,
            Duration::from_millis(10),
        )?;
        at_least(
            "producer.id.expiration.ms",
            self.producer_id_expiration_ms,
            1,
        )?;
        at_least(
            "producer.id.expiration.check.interval.ms",
            self.producer_id_expiration_check_interval_ms,
            1,
        )?;

        // Rules between settings come last, so that a bad value on its own is reported as such.
        if self.max_message_bytes > self.segment_bytes {
            return Err(invalid(
                "max.message.bytes",
                format!(
                    "{} exceeds segment.bytes ({}): a batch must fit in one segment",
                    self.max_message_bytes, self.segment_bytes
                ),
            ));
        }
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms {
            return Err(invalid(
                "min.compaction.lag.ms",
                format!(
                    "{} exceeds max.compaction.lag.ms ({})",
                    self.min_compaction_lag_ms, self.max_compaction_lag_ms
                ),
            ));
        }
        Ok(())
    }

    /// The age at which a segment rolls: `segment_ms`, or on a compacted log the smaller of
    /// `segment_ms` and `max_compaction_lag_ms`, so that no record waits in the active segment
    /// (which compaction never touches) longer than the compaction lag allows. Kafka's
    /// `maxSegmentMs`.
    pub fn max_segment_ms(&self) -> i64 {
        if self.cleanup_policy.compact && self.max_compaction_lag_ms > 0 {
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
            map_sealed_reads: self.map_sealed_segments,
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

/// Builds a [`LogConfig`], starting from Kafka's defaults. Every setter takes a plain value;
/// [`build`](Self::build) checks them all.
///
/// Each `*_ms` setter has a `*_duration` twin taking a [`Duration`], counted in whole
/// milliseconds (rounded down) and capped at `i64::MAX` milliseconds.
///
/// ```
/// # use partlog::{LogConfig, FlushPolicy};
/// let config = LogConfig::builder()
///     .segment_bytes(64 * 1024 * 1024)
///     .flush_policy(FlushPolicy::EveryAppend)
///     .build()
///     .unwrap();
/// assert_eq!(config.segment_bytes, 64 * 1024 * 1024);
/// ```
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct LogConfigBuilder {
    config: LogConfig,
    /// Whether `max_message_bytes` was set. If not, `build` lowers Kafka's default to
    /// `segment_bytes` when that is smaller: Kafka's default batch limit (1 MiB + 12) is larger
    /// than Kafka's smallest segment (1 MiB), and an unset default should not fail the build.
    max_message_bytes_set: bool,
}

impl Default for LogConfigBuilder {
    fn default() -> Self {
        LogConfig::builder()
    }
}

/// A setter that stores its argument in the field of the same name.
macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident: $ty:ty;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(mut self, $name: $ty) -> Self {
                self.config.$name = $name;
                self.config.explicit.mark_field(stringify!($name));
                self
            }
        )*
    };
}

/// A `Duration` setter that stores whole milliseconds (rounded down, capped at `i64::MAX`) in an
/// `i64` millisecond field.
macro_rules! duration_setters {
    ($($(#[$doc:meta])* $name:ident => $field:ident;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(mut self, $name: Duration) -> Self {
                self.config.$field = duration_to_ms($name);
                self.config.explicit.mark_field(stringify!($field));
                self
            }
        )*
    };
}

impl LogConfigBuilder {
    setters! {
        /// Sets [`LogConfig::segment_bytes`] (`segment.bytes`).
        segment_bytes: u32;
        /// Sets [`LogConfig::segment_ms`] (`segment.ms`).
        segment_ms: i64;
        /// Sets [`LogConfig::segment_jitter_ms`] (`segment.jitter.ms`).
        segment_jitter_ms: i64;
        /// Sets [`LogConfig::segment_index_bytes`] (`segment.index.bytes`).
        segment_index_bytes: u32;
        /// Sets [`LogConfig::index_interval_bytes`] (`index.interval.bytes`).
        index_interval_bytes: u32;
        /// Sets [`LogConfig::retention_ms`] (`retention.ms`; -1 keeps segments forever).
        retention_ms: i64;
        /// Sets [`LogConfig::retention_bytes`] (`retention.bytes`; -1 sets no size limit).
        retention_bytes: i64;
        /// Sets [`LogConfig::retention_timestamp_skew_ms`] (partlog's `retention.timestamp.skew.ms`).
        retention_timestamp_skew_ms: i64;
        /// Sets [`LogConfig::retention_check_interval_ms`] (`retention.check.interval.ms`; -1
        /// runs no maintenance thread).
        retention_check_interval_ms: i64;
        /// Sets [`LogConfig::cleanup_policy`] (`cleanup.policy`).
        cleanup_policy: CleanupPolicy;
        /// Sets [`LogConfig::delete_retention_ms`] (`delete.retention.ms`).
        delete_retention_ms: i64;
        /// Sets [`LogConfig::min_compaction_lag_ms`] (`min.compaction.lag.ms`).
        min_compaction_lag_ms: i64;
        /// Sets [`LogConfig::max_compaction_lag_ms`] (`max.compaction.lag.ms`).
        max_compaction_lag_ms: i64;
        /// Sets [`LogConfig::min_cleanable_dirty_ratio`] (`min.cleanable.dirty.ratio`).
        min_cleanable_dirty_ratio: f64;
        /// Sets [`LogConfig::compression_type`] (`compression.type`).
        compression_type: CompressionType;
        /// Sets [`LogConfig::message_timestamp_type`] (`message.timestamp.type`).
        message_timestamp_type: TimestampType;
        /// Sets [`LogConfig::message_timestamp_before_max_ms`] (`message.timestamp.before.max.ms`).
        message_timestamp_before_max_ms: i64;
        /// Sets [`LogConfig::message_timestamp_after_max_ms`] (`message.timestamp.after.max.ms`).
        message_timestamp_after_max_ms: i64;
        /// Sets [`LogConfig::preallocate`] (`preallocate`).
        preallocate: bool;
        /// Sets [`LogConfig::map_sealed_segments`] (partlog's `map.sealed.segments`).
        map_sealed_segments: bool;
        /// Sets [`LogConfig::position_cache_bytes`] (partlog's `position.cache.bytes`).
        position_cache_bytes: usize;
        /// Sets [`LogConfig::flush_policy`] (`flush.messages` / `flush.ms`).
        flush_policy: FlushPolicy;
        /// Sets [`LogConfig::recovery_point_bytes`] (partlog's `recovery.point.bytes`).
        recovery_point_bytes: u64;
        /// Sets [`LogConfig::recovery_point_ms`] (partlog's `recovery.point.ms`).
        recovery_point_ms: u64;
        /// Sets [`LogConfig::recovery_mode`].
        recovery_mode: RecoveryMode;
        /// Sets [`LogConfig::allow_live_writer`] (read-only opens of a log another process
        /// writes).
        allow_live_writer: bool;
        /// Sets [`LogConfig::poll_interval`] (how often a live read-only log looks for new data).
        poll_interval: Duration;
        /// Sets [`LogConfig::group_commit_max_gather`] (partlog's `group.commit.max.gather`).
        group_commit_max_gather: Duration;
        /// Sets [`LogConfig::group_commit_max_spin`] (partlog's `group.commit.max.spin`).
        group_commit_max_spin: Duration;
        /// Sets [`LogConfig::producer_id_expiration_ms`] (`producer.id.expiration.ms`).
        producer_id_expiration_ms: i64;
        /// Sets [`LogConfig::producer_id_expiration_check_interval_ms`]
        /// (`producer.id.expiration.check.interval.ms`).
        producer_id_expiration_check_interval_ms: i64;
        /// Sets [`LogConfig::transaction_partition_verification_enable`]
        /// (`transaction.partition.verification.enable`).
        transaction_partition_verification_enable: bool;
        /// Sets [`LogConfig::storage`].
        storage: Arc<dyn Storage>;
        /// Sets [`LogConfig::clock`].
        clock: Arc<dyn Clock>;
    }

    duration_setters! {
        /// Sets [`LogConfig::segment_ms`] from a `Duration`.
        segment_duration => segment_ms;
        /// Sets [`LogConfig::segment_jitter_ms`] from a `Duration`.
        segment_jitter_duration => segment_jitter_ms;
        /// Sets [`LogConfig::retention_ms`] from a `Duration` (use `retention_ms(-1)` to keep
        /// segments forever).
        retention_duration => retention_ms;
        /// Sets [`LogConfig::delete_retention_ms`] from a `Duration`.
        delete_retention_duration => delete_retention_ms;
        /// Sets [`LogConfig::retention_timestamp_skew_ms`] from a `Duration`.
        retention_timestamp_skew_duration => retention_timestamp_skew_ms;
        /// Sets [`LogConfig::retention_check_interval_ms`] from a `Duration` (use
        /// `retention_check_interval_ms(-1)` for no maintenance thread).
        retention_check_interval_duration => retention_check_interval_ms;
        /// Sets [`LogConfig::min_compaction_lag_ms`] from a `Duration`.
        min_compaction_lag_duration => min_compaction_lag_ms;
        /// Sets [`LogConfig::max_compaction_lag_ms`] from a `Duration`.
        max_compaction_lag_duration => max_compaction_lag_ms;
        /// Sets [`LogConfig::message_timestamp_before_max_ms`] from a `Duration`.
        message_timestamp_before_max_duration => message_timestamp_before_max_ms;
        /// Sets [`LogConfig::message_timestamp_after_max_ms`] from a `Duration`.
        message_timestamp_after_max_duration => message_timestamp_after_max_ms;
        /// Sets [`LogConfig::producer_id_expiration_ms`] from a `Duration`.
        producer_id_expiration_duration => producer_id_expiration_ms;
        /// Sets [`LogConfig::producer_id_expiration_check_interval_ms`] from a `Duration`.
        producer_id_expiration_check_interval_duration => producer_id_expiration_check_interval_ms;
    }

    /// Sets [`LogConfig::observer`].
    pub fn observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.config.observer = Some(observer);
        self
    }

    /// Sets [`LogConfig::recovery_point_ms`] from a `Duration`, in whole milliseconds (rounded
    /// down, capped at `u64::MAX`).
    pub fn recovery_point_duration(mut self, recovery_point_duration: Duration) -> Self {
        self.config.recovery_point_ms =
            u64::try_from(recovery_point_duration.as_millis()).unwrap_or(u64::MAX);
        self
    }

    /// Sets [`LogConfig::max_message_bytes`] (`max.message.bytes`). Once set, it is kept as given,
    /// and [`build`](Self::build) fails if it exceeds `segment_bytes`.
    pub fn max_message_bytes(mut self, max_message_bytes: u32) -> Self {
        self.config.max_message_bytes = max_message_bytes;
        self.config.explicit.mark_field("max_message_bytes");
        self.max_message_bytes_set = true;
        self
    }

    /// Sets the per-log setting `key` by its Kafka name from text, as `partlog.properties` and
    /// `kafka-configs --add-config` spell it: `builder.set("cleanup.policy", "compact")`. Fails
    /// with [`Error::InvalidArgument`] for a name that is not a per-log setting (see
    /// [`LogConfig::setting`]) and [`Error::InvalidConfig`] for a value that does not parse.
    pub fn set(mut self, key: &str, value: &str) -> Result<Self> {
        self.config.set_setting_text(key, value)?;
        if key == "max.message.bytes" {
            self.max_message_bytes_set = true;
        }
        Ok(self)
    }

    /// Sets [`LogConfig::store_settings`] (partlog's `store.settings`).
    pub fn store_settings(mut self, store_settings: bool) -> Self {
        self.config.store_settings = store_settings;
        self
    }

    /// Checks every setting ([`LogConfig::validate`]) and returns the config.
    ///
    /// If `max_message_bytes` was never set, it is Kafka's default (1048588) or `segment_bytes`,
    /// whichever is smaller.
    pub fn build(mut self) -> Result<LogConfig> {
        if !self.max_message_bytes_set {
            self.config.max_message_bytes =
                DEFAULT_MAX_MESSAGE_BYTES.min(self.config.segment_bytes);
        }
        self.config.validate()?;
        Ok(self.config)
    }
}

/// When appended data is fsynced (Kafka's `flush.messages` and `flush.ms`).
///
/// Whatever the policy, `Log::wait_durable` makes an offset durable on demand, and the
/// durable offset only moves forward. A policy chooses when fsyncs happen without being asked:
/// leaving it to the OS, as Kafka does by default and recommends (Kafka relies on replication for
/// durability, which a single partlog log does not have), or after a number of messages, a number
/// of bytes, a time, or every append.
///
/// Default: [`FlushPolicy::OsDecides`] (Kafka's).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FlushPolicy {
    /// No fsync unless asked for: the OS writes dirty pages back on its own schedule, and a
    /// machine crash may lose what it had not written. Segments are still synced at roll and at
    /// close. Kafka's default (`flush.messages` and `flush.ms` both `Long.MAX_VALUE`).
    #[default]
    OsDecides,
    /// An fsync once this many messages (records) have been appended since the last one.
    /// Kafka's `flush.messages`; `EveryMessages(1)` is close to [`FlushPolicy::EveryAppend`].
    EveryMessages(NonZeroU64),
    /// An fsync once this many bytes have been appended since the last one. partlog's own
    /// policy: it bounds what a machine crash can lose in bytes, whatever the record sizes.
    EveryBytes(NonZeroU64),
    /// An fsync at least this often while there are unsynced appends. Kafka's `flush.ms`.
    /// Must be non-zero and at most `i64::MAX` milliseconds.
    Interval(Duration),
    /// Every append is durable before it returns; concurrent appends share one fsync (group
    /// commit). The strongest policy and the slowest.
    EveryAppend,
}

impl FlushPolicy {
    /// The policy for Kafka's `flush.messages` and `flush.ms`, where `Long.MAX_VALUE`
    /// (9223372036854775807, Kafka's default for both) means "not set".
    ///
    /// - both at `Long.MAX_VALUE`: [`FlushPolicy::OsDecides`];
    /// - `flush.messages = n`: [`FlushPolicy::EveryMessages`]`(n)`;
    /// - `flush.ms = 0`: [`FlushPolicy::EveryAppend`] (nothing may stay unsynced for any time);
    /// - `flush.ms = ms`: [`FlushPolicy::Interval`]`(ms)`.
    ///
    /// Errors name the Kafka setting: `flush.messages` below 1 and `flush.ms` below 0 are invalid,
    /// as in Kafka. Kafka applies both settings when both are set; a `FlushPolicy` is one policy,
    /// so setting both is an error about `flush.ms`.
    pub fn from_kafka(flush_messages: i64, flush_ms: i64) -> Result<FlushPolicy> {
        at_least("flush.messages", flush_messages, 1)?;
        at_least("flush.ms", flush_ms, 0)?;
        match (flush_messages, flush_ms) {
            (KAFKA_LONG_MAX, KAFKA_LONG_MAX) => Ok(FlushPolicy::OsDecides),
            (messages, KAFKA_LONG_MAX) => u64::try_from(messages)
                .ok()
                .and_then(NonZeroU64::new)
                .map(FlushPolicy::EveryMessages)
                .ok_or_else(|| {
                    invalid(
                        "flush.messages",
                        format!("{messages} is below the minimum of 1"),
                    )
                }),
            (KAFKA_LONG_MAX, 0) => Ok(FlushPolicy::EveryAppend),
            (KAFKA_LONG_MAX, ms) => Ok(FlushPolicy::Interval(Duration::from_millis(
                ms.unsigned_abs(),
            ))),
            (messages, _) => Err(invalid(
                "flush.ms",
                format!(
                    "cannot be set together with flush.messages ({messages}): partlog takes one \
                     flush policy, so leave one of them at {KAFKA_LONG_MAX} (Long.MAX_VALUE, \
                     Kafka's default)"
                ),
            )),
        }
    }

    /// Checks the one policy that can be out of range: an interval must be non-zero (a zero
    /// interval would fsync without pause; [`FlushPolicy::EveryAppend`] says what it means) and
    /// at most `i64::MAX` milliseconds, Kafka's `flush.ms` limit.
    fn validate(&self) -> Result<()> {
        if let FlushPolicy::Interval(interval) = *self {
            if interval.is_zero() {
                return Err(invalid(
                    "flush.ms",
                    "an interval of 0 would fsync without pause; use FlushPolicy::EveryAppend \
                     to fsync every append",
                ));
            }
            if interval.as_millis() > i64::MAX.unsigned_abs().into() {
                return Err(invalid(
                    "flush.ms",
                    format!(
                        "an interval of {} ms exceeds the maximum of {} ms",
                        interval.as_millis(),
                        i64::MAX
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// What opening a log does with an invalid byte (a bad CRC, a torn length, a broken record)
/// found BELOW the recovery point, where every byte was durable before the crash.
///
/// An invalid byte ABOVE the recovery point is always a torn tail, the normal result of a crash
/// during a write: it is truncated whatever the mode, and the recovery report says how many bytes
/// went. Below the recovery point the bytes were synced, so an invalid one means the disk or
/// something outside partlog damaged them: that is corruption, and this policy decides.
///
/// Default: [`RecoveryMode::Fail`].
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RecoveryMode {
    /// Refuse to open: return [`Error::Corrupt`] with the file and position, and change nothing,
    /// so that an operator can look at the damage (or copy the data) before anything is lost.
    #[default]
    Fail,
    /// Truncate the log at the first invalid byte, dropping everything after it (durable records
    /// included), report it, and open. Choose it where availability matters more than the records
    /// after the damage, as Kafka's recovery does.
    TruncateAtCorruption,
}

/// Kafka's `cleanup.policy`: which ways of removing old data run on the log.
///
/// Kafka writes it as a comma-separated list ([`CleanupPolicy::from_kafka_str`]). The empty list,
/// which Kafka also accepts, sets neither: the log keeps every segment, and only
/// `delete_records_before` and `truncate_to` remove data.
///
/// Default: [`CleanupPolicy::DELETE`] (Kafka's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CleanupPolicy {
    /// `delete`: segments past `retention.ms` or `retention.bytes` are deleted.
    pub delete: bool,
    /// `compact`: compaction keeps the latest record of each key, and records need keys.
    pub compact: bool,
}

impl Default for CleanupPolicy {
    /// `delete`, Kafka's default.
    fn default() -> Self {
        CleanupPolicy::DELETE
    }
}

impl CleanupPolicy {
    /// `cleanup.policy=delete`, the default.
    pub const DELETE: CleanupPolicy = CleanupPolicy {
        delete: true,
        compact: false,
    };
    /// `cleanup.policy=compact`.
    pub const COMPACT: CleanupPolicy = CleanupPolicy {
        delete: false,
        compact: true,
    };
    /// `cleanup.policy=compact,delete`: compaction, and retention on top of it.
    pub const COMPACT_DELETE: CleanupPolicy = CleanupPolicy {
        delete: true,
        compact: true,
    };
    /// `cleanup.policy=` (the empty list): neither; the log keeps every segment.
    pub const NONE: CleanupPolicy = CleanupPolicy {
        delete: false,
        compact: false,
    };

    /// Parses Kafka's list syntax: comma-separated `delete` and `compact`, in any order, with
    /// spaces around items allowed, as Kafka's config parser allows them. The empty (or blank)
    /// string is the empty list, [`CleanupPolicy::NONE`]. Names are lowercase, as Kafka spells
    /// them; an unknown or empty item is [`Error::InvalidConfig`] about `cleanup.policy`.
    pub fn from_kafka_str(value: &str) -> Result<CleanupPolicy> {
        let mut policy = CleanupPolicy::NONE;
        if value.trim().is_empty() {
            return Ok(policy);
        }
        for item in value.split(',').map(str::trim) {
            match item {
                "delete" => policy.delete = true,
                "compact" => policy.compact = true,
                "" => {
                    return Err(invalid(
                        "cleanup.policy",
                        format!(
                            "{value:?} has an empty item; expected a list of delete and compact"
                        ),
                    ));
                }
                other => {
                    return Err(invalid(
                        "cleanup.policy",
                        format!(
                            "{other:?} is not a cleanup policy; expected a list of delete and compact"
                        ),
                    ));
                }
            }
        }
        Ok(policy)
    }

    /// The policy as Kafka writes it: `delete`, `compact`, `compact,delete`, or the empty string.
    pub const fn as_kafka_str(self) -> &'static str {
        match (self.compact, self.delete) {
            (false, true) => "delete",
            (true, false) => "compact",
            (true, true) => "compact,delete",
            (false, false) => "",
        }
    }
}

impl fmt::Display for CleanupPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_kafka_str())
    }
}

impl FromStr for CleanupPolicy {
    type Err = Error;

    fn from_str(value: &str) -> Result<Self> {
        CleanupPolicy::from_kafka_str(value)
    }
}

/// Kafka's `compression.type`: the codec batches are stored with.
///
/// partlog writes batches uncompressed, with LZ4 or with zstd. Kafka's `gzip` and `snappy` are
/// not offered, so [`CompressionType::from_kafka_str`] rejects them.
///
/// Default: [`CompressionType::Producer`] (Kafka's).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum CompressionType {
    /// `producer`: a producer-built batch (`append_batch`) keeps its codec, and `append(records)`
    /// writes uncompressed batches. Kafka's default.
    #[default]
    Producer,
    /// `uncompressed`: every batch is stored uncompressed; compressed input is recompressed.
    Uncompressed,
    /// `lz4`: every batch is stored as an LZ4 frame in Kafka's layout.
    Lz4,
    /// `zstd`: every batch is stored as a zstd frame.
    Zstd,
}

impl CompressionType {
    /// Parses Kafka's name: `producer`, `uncompressed` (or `none`, the producer-side spelling),
    /// `lz4` or `zstd`, lowercase as Kafka spells them, with surrounding spaces allowed. `gzip`
    /// and `snappy` are valid in Kafka but not here, and like any other name they are
    /// [`Error::InvalidConfig`] about `compression.type`.
    pub fn from_kafka_str(value: &str) -> Result<CompressionType> {
        match value.trim() {
            "producer" => Ok(CompressionType::Producer),
            "uncompressed" | "none" => Ok(CompressionType::Uncompressed),
            "lz4" => Ok(CompressionType::Lz4),
            "zstd" => Ok(CompressionType::Zstd),
            codec @ ("gzip" | "snappy") => Err(invalid(
                "compression.type",
                format!("{codec} is not supported: partlog writes none, lz4 and zstd"),
            )),
            other => Err(invalid(
                "compression.type",
                format!(
                    "{other:?} is not a compression type; expected producer, uncompressed (or \
                     none), lz4 or zstd"
                ),
            )),
        }
    }

    /// Kafka's name for the setting: `producer`, `uncompressed`, `lz4` or `zstd`.
    pub const fn as_kafka_str(self) -> &'static str {
        match self {
            CompressionType::Producer => "producer",
            CompressionType::Uncompressed => "uncompressed",
            CompressionType::Lz4 => "lz4",
            CompressionType::Zstd => "zstd",
        }
    }

    /// The codec every stored batch must have, or `None` for [`CompressionType::Producer`], where
    /// a producer-built batch keeps its own.
    pub const fn codec(self) -> Option<Compression> {
        match self {
            CompressionType::Producer => None,
            CompressionType::Uncompressed => Some(Compression::None),
            CompressionType::Lz4 => Some(Compression::Lz4),
            CompressionType::Zstd => Some(Compression::Zstd),
        }
    }
}

impl fmt::Display for CompressionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_kafka_str())
    }
}

impl FromStr for CompressionType {
    type Err = Error;

    fn from_str(value: &str) -> Result<Self> {
        CompressionType::from_kafka_str(value)
    }
}

fn invalid(setting: &'static str, why: impl Into<String>) -> Error {
    Error::InvalidConfig {
        setting,
        why: why.into(),
    }
}

fn at_least(setting: &'static str, value: i64, minimum: i64) -> Result<()> {
    if value < minimum {
        return Err(invalid(
            setting,
            format!("{value} is below the minimum of {minimum}"),
        ));
    }
    Ok(())
}

fn at_most_duration(setting: &'static str, value: Duration, maximum: Duration) -> Result<()> {
    if value > maximum {
        return Err(invalid(
            setting,
            format!("{value:?} is above the maximum of {maximum:?}"),
        ));
    }
    Ok(())
}

/// The rule of `retention.ms` and `retention.bytes`: -1 means "no limit", other negatives are
/// mistakes.
fn minus_one_or_at_least_zero(
    setting: &'static str,
    value: i64,
    minus_one_means: &str,
) -> Result<()> {
    if value < -1 {
        return Err(invalid(
            setting,
            format!("{value} is invalid: use -1 {minus_one_means}, or a value of at least 0"),
        ));
    }
    Ok(())
}

/// Whole milliseconds of `duration`, rounded down and capped at `i64::MAX`.
fn duration_to_ms(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The setting named by an `InvalidConfig` error, after checking that its message is specific
    /// and reads as the tail of a lowercase sentence.
    fn rejected_setting<T: fmt::Debug>(result: Result<T>) -> &'static str {
        match result {
            Err(Error::InvalidConfig { setting, why }) => {
                assert!(!why.is_empty(), "{setting}: empty message");
                assert!(
                    !why.starts_with(|c: char| c.is_uppercase()),
                    "{setting}: message not lowercase: {why}"
                );
                setting
            }
            other => panic!("expected InvalidConfig, got {other:?}"),
        }
    }

    fn rejects(builder: LogConfigBuilder, setting: &str) {
        assert_eq!(rejected_setting(builder.build()), setting);
    }

    fn accepts(builder: LogConfigBuilder) -> LogConfig {
        match builder.build() {
            Ok(config) => config,
            Err(error) => panic!("expected a valid config, got {error}"),
        }
    }

    const MIB: u32 = 1024 * 1024;

    #[test]
    fn defaults_are_kafkas() {
        let config = LogConfig::default();
        assert_eq!(config.segment_bytes, 1_073_741_824);
        assert_eq!(config.segment_ms, 604_800_000);
        assert_eq!(config.segment_jitter_ms, 0);
        assert_eq!(config.segment_index_bytes, 10_485_760);
        assert_eq!(config.index_interval_bytes, 4096);
        // Kafka's is 7 days; an embedded log deletes nothing by age unless asked to.
        assert_eq!(config.retention_ms, -1);
        assert_eq!(config.retention_bytes, -1);
        assert_eq!(config.retention_timestamp_skew_ms, 3_600_000);
        assert_eq!(config.retention_check_interval_ms, -1);
        assert_eq!(
            config.cleanup_policy,
            CleanupPolicy {
                delete: true,
                compact: false
            }
        );
        assert_eq!(config.delete_retention_ms, 86_400_000);
        assert_eq!(config.min_compaction_lag_ms, 0);
        assert_eq!(config.max_compaction_lag_ms, 9_223_372_036_854_775_807);
        assert_eq!(config.min_cleanable_dirty_ratio, 0.5);
        assert_eq!(config.max_message_bytes, 1_048_588);
        assert_eq!(config.compression_type, CompressionType::Producer);
        assert_eq!(config.message_timestamp_type, TimestampType::CreateTime);
        assert_eq!(
            config.message_timestamp_before_max_ms,
            9_223_372_036_854_775_807
        );
        assert_eq!(config.message_timestamp_after_max_ms, 3_600_000);
        assert!(!config.preallocate);
        assert_eq!(config.flush_policy, FlushPolicy::OsDecides);
        assert_eq!(config.recovery_point_bytes, 16_777_216);
        assert_eq!(config.recovery_point_ms, 1000);
        assert_eq!(config.recovery_mode, RecoveryMode::Fail);
        assert!(format!("{:?}", config.storage).contains("OsStorage"));
        assert!(format!("{:?}", config.clock).contains("SystemClock"));
        config.validate().unwrap();
    }

    #[test]
    fn the_builder_starts_from_the_defaults() {
        let built = accepts(LogConfig::builder());
        let default = LogConfig::default();
        // LogConfig holds trait objects and so has no PartialEq; Debug shows every field.
        assert_eq!(format!("{built:?}"), format!("{default:?}"));
        let built = accepts(LogConfigBuilder::default());
        assert_eq!(format!("{built:?}"), format!("{default:?}"));
    }

    #[test]
    fn each_setter_sets_its_field() {
        // A fresh Arc, so that pointer equality shows this very one was stored.
        let storage: Arc<dyn Storage> = Arc::new(OsStorage::new());
        let clock: Arc<dyn Clock> = Arc::new(crate::clock::ManualClock::new(42));
        let config = accepts(
            LogConfig::builder()
                .segment_bytes(2 * MIB)
                .segment_ms(10)
                .segment_jitter_ms(3)
                .segment_index_bytes(4096)
                .index_interval_bytes(0)
                .retention_ms(-1)
                .retention_bytes(5)
                .cleanup_policy(CleanupPolicy::COMPACT)
                .delete_retention_ms(6)
                .min_compaction_lag_ms(7)
                .max_compaction_lag_ms(8)
                .min_cleanable_dirty_ratio(0.25)
                .max_message_bytes(1000)
                .compression_type(CompressionType::Zstd)
                .message_timestamp_type(TimestampType::LogAppendTime)
                .message_timestamp_before_max_ms(9)
                .message_timestamp_after_max_ms(11)
                .preallocate(true)
                .flush_policy(FlushPolicy::EveryAppend)
                .recovery_point_bytes(12)
                .recovery_point_ms(13)
                .recovery_mode(RecoveryMode::TruncateAtCorruption)
                .storage(storage.clone())
                .clock(clock.clone()),
        );
        assert_eq!(config.segment_bytes, 2 * MIB);
        assert_eq!(config.segment_ms, 10);
        assert_eq!(config.segment_jitter_ms, 3);
        assert_eq!(config.segment_index_bytes, 4096);
        assert_eq!(config.index_interval_bytes, 0);
        assert_eq!(config.retention_ms, -1);
        assert_eq!(config.retention_bytes, 5);
        assert_eq!(config.cleanup_policy, CleanupPolicy::COMPACT);
        assert_eq!(config.delete_retention_ms, 6);
        assert_eq!(config.min_compaction_lag_ms, 7);
        assert_eq!(config.max_compaction_lag_ms, 8);
        assert_eq!(config.min_cleanable_dirty_ratio, 0.25);
        assert_eq!(config.max_message_bytes, 1000);
        assert_eq!(config.compression_type, CompressionType::Zstd);
        assert_eq!(config.message_timestamp_type, TimestampType::LogAppendTime);
        assert_eq!(config.message_timestamp_before_max_ms, 9);
        assert_eq!(config.message_timestamp_after_max_ms, 11);
        assert!(config.preallocate);
        assert_eq!(config.flush_policy, FlushPolicy::EveryAppend);
        assert_eq!(config.recovery_point_bytes, 12);
        assert_eq!(config.recovery_point_ms, 13);
        assert_eq!(config.recovery_mode, RecoveryMode::TruncateAtCorruption);
        assert!(Arc::ptr_eq(&config.storage, &storage));
        assert!(Arc::ptr_eq(&config.clock, &clock));
        assert_eq!(config.clock.now_ms(), 42);
    }

    #[test]
    fn duration_setters_count_whole_milliseconds() {
        let config = accepts(
            LogConfig::builder()
                .segment_duration(Duration::from_secs(60))
                .segment_jitter_duration(Duration::from_micros(2_999))
                .retention_duration(Duration::from_secs(3600))
                .delete_retention_duration(Duration::from_millis(5))
                .min_compaction_lag_duration(Duration::from_millis(6))
                .max_compaction_lag_duration(Duration::MAX)
                .message_timestamp_before_max_duration(Duration::from_millis(8))
                .message_timestamp_after_max_duration(Duration::from_millis(9))
                .recovery_point_duration(Duration::from_millis(250)),
        );
        assert_eq!(config.segment_ms, 60_000);
        assert_eq!(
            config.segment_jitter_ms, 2,
            "sub-millisecond rest is dropped"
        );
        assert_eq!(config.retention_ms, 3_600_000);
        assert_eq!(config.delete_retention_ms, 5);
        assert_eq!(config.min_compaction_lag_ms, 6);
        assert_eq!(config.max_compaction_lag_ms, i64::MAX, "saturates");
        assert_eq!(config.message_timestamp_before_max_ms, 8);
        assert_eq!(config.message_timestamp_after_max_ms, 9);
        assert_eq!(config.recovery_point_ms, 250);
        assert_eq!(
            LogConfig::builder()
                .recovery_point_duration(Duration::MAX)
                .build()
                .unwrap()
                .recovery_point_ms,
            u64::MAX
        );
        // A sub-millisecond segment age rounds to 0, which segment.ms rejects.
        rejects(
            LogConfig::builder().segment_duration(Duration::from_micros(999)),
            "segment.ms",
        );
    }

    #[test]
    fn segment_bytes_range() {
        rejects(LogConfig::builder().segment_bytes(0), "segment.bytes");
        rejects(LogConfig::builder().segment_bytes(MIB - 1), "segment.bytes");
        rejects(LogConfig::builder().segment_bytes(1 << 31), "segment.bytes");
        rejects(
            LogConfig::builder().segment_bytes(u32::MAX),
            "segment.bytes",
        );
        assert_eq!(
            accepts(LogConfig::builder().segment_bytes(MIB)).segment_bytes,
            MIB
        );
        let max = i32::MAX.unsigned_abs();
        assert_eq!(
            accepts(LogConfig::builder().segment_bytes(max)).segment_bytes,
            max
        );
    }

    #[test]
    fn the_test_builder_lowers_only_the_segment_bytes_floor() {
        rejects(
            LogConfig::builder_for_tests().segment_bytes(1023),
            "segment.bytes",
        );
        rejects(
            LogConfig::builder_for_tests().segment_bytes(0),
            "segment.bytes",
        );
        rejects(
            LogConfig::builder_for_tests().segment_bytes(1 << 31),
            "segment.bytes",
        );
        let config = accepts(LogConfig::builder_for_tests().segment_bytes(1024));
        assert_eq!(config.segment_bytes, 1024);
        // Other rules stay as they are.
        rejects(
            LogConfig::builder_for_tests().segment_index_bytes(23),
            "segment.index.bytes",
        );
        // A test config keeps its floor when its fields are changed by hand.
        let mut config = LogConfig::for_tests();
        config.segment_bytes = 1024;
        config.max_message_bytes = 1024;
        config.validate().unwrap();
        config.segment_bytes = 1023;
        assert_eq!(rejected_setting(config.validate()), "segment.bytes");
        // And an ordinary config does not get the test floor.
        let config = LogConfig {
            segment_bytes: 1024,
            max_message_bytes: 1024,
            ..LogConfig::default()
        };
        assert_eq!(rejected_setting(config.validate()), "segment.bytes");
    }

    #[test]
    fn segment_ms_and_jitter_ranges() {
        rejects(LogConfig::builder().segment_ms(0), "segment.ms");
        rejects(LogConfig::builder().segment_ms(-1), "segment.ms");
        rejects(LogConfig::builder().segment_ms(i64::MIN), "segment.ms");
        accepts(LogConfig::builder().segment_ms(1));
        accepts(LogConfig::builder().segment_ms(i64::MAX));
        rejects(
            LogConfig::builder().segment_jitter_ms(-1),
            "segment.jitter.ms",
        );
        rejects(
            LogConfig::builder().segment_jitter_ms(i64::MIN),
            "segment.jitter.ms",
        );
        accepts(LogConfig::builder().segment_jitter_ms(0));
        // Jitter may exceed segment.ms: the draw is bounded by the smaller of the two.
        accepts(
            LogConfig::builder()
                .segment_ms(1)
                .segment_jitter_ms(i64::MAX),
        );
    }

    #[test]
    fn segment_index_bytes_range() {
        rejects(
            LogConfig::builder().segment_index_bytes(0),
            "segment.index.bytes",
        );
        rejects(
            LogConfig::builder().segment_index_bytes(23),
            "segment.index.bytes",
        );
        rejects(
            LogConfig::builder().segment_index_bytes(1 << 31),
            "segment.index.bytes",
        );
        accepts(LogConfig::builder().segment_index_bytes(24));
        accepts(LogConfig::builder().segment_index_bytes(i32::MAX.unsigned_abs()));
    }

    #[test]
    fn index_interval_bytes_takes_any_value() {
        accepts(LogConfig::builder().index_interval_bytes(0));
        accepts(LogConfig::builder().index_interval_bytes(u32::MAX));
    }

    #[test]
    fn retention_ranges() {
        for setter in [
            LogConfigBuilder::retention_ms,
            LogConfigBuilder::retention_bytes,
        ] {
            accepts(setter(LogConfig::builder(), -1));
            accepts(setter(LogConfig::builder(), 0));
            accepts(setter(LogConfig::builder(), i64::MAX));
        }
        rejects(LogConfig::builder().retention_ms(-2), "retention.ms");
        rejects(LogConfig::builder().retention_ms(i64::MIN), "retention.ms");
        rejects(LogConfig::builder().retention_bytes(-2), "retention.bytes");
        rejects(
            LogConfig::builder().retention_bytes(i64::MIN),
            "retention.bytes",
        );
        accepts(LogConfig::builder().retention_timestamp_skew_ms(0));
        rejects(
            LogConfig::builder().retention_timestamp_skew_ms(-1),
            "retention.timestamp.skew.ms",
        );
        for interval in [-1, 1, i64::MAX] {
            accepts(LogConfig::builder().retention_check_interval_ms(interval));
        }
        for interval in [0, -2, i64::MIN] {
            rejects(
                LogConfig::builder().retention_check_interval_ms(interval),
                "retention.check.interval.ms",
            );
        }
        let config = accepts(
            LogConfig::builder()
                .retention_timestamp_skew_duration(Duration::from_secs(2))
                .retention_check_interval_duration(Duration::from_millis(250)),
        );
        assert_eq!(config.retention_timestamp_skew_ms, 2_000);
        assert_eq!(config.retention_check_interval_ms, 250);
    }

    #[test]
    fn compaction_ranges() {
        rejects(
            LogConfig::builder().delete_retention_ms(-1),
            "delete.retention.ms",
        );
        accepts(LogConfig::builder().delete_retention_ms(0));
        rejects(
            LogConfig::builder().min_compaction_lag_ms(-1),
            "min.compaction.lag.ms",
        );
        accepts(LogConfig::builder().min_compaction_lag_ms(0));
        rejects(
            LogConfig::builder().max_compaction_lag_ms(0),
            "max.compaction.lag.ms",
        );
        rejects(
            LogConfig::builder().max_compaction_lag_ms(-1),
            "max.compaction.lag.ms",
        );
        accepts(LogConfig::builder().max_compaction_lag_ms(1));
        // The lags must be ordered; the minimum is the one reported.
        rejects(
            LogConfig::builder()
                .min_compaction_lag_ms(11)
                .max_compaction_lag_ms(10),
            "min.compaction.lag.ms",
        );
        accepts(
            LogConfig::builder()
                .min_compaction_lag_ms(10)
                .max_compaction_lag_ms(10),
        );
    }

    #[test]
    fn dirty_ratio_range() {
        for bad in [
            -0.01,
            1.01,
            -1.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ] {
            rejects(
                LogConfig::builder().min_cleanable_dirty_ratio(bad),
                "min.cleanable.dirty.ratio",
            );
        }
        for good in [0.0, 1.0, 0.5] {
            accepts(LogConfig::builder().min_cleanable_dirty_ratio(good));
        }
    }

    #[test]
    fn max_message_bytes_must_fit_in_a_segment() {
        rejects(
            LogConfig::builder()
                .segment_bytes(2 * MIB)
                .max_message_bytes(2 * MIB + 1),
            "max.message.bytes",
        );
        accepts(
            LogConfig::builder()
                .segment_bytes(2 * MIB)
                .max_message_bytes(2 * MIB),
        );
        accepts(LogConfig::builder().max_message_bytes(0));
        // Set on the struct, validate is strict too.
        let mut config = LogConfig::default();
        config.max_message_bytes = config.segment_bytes + 1;
        assert_eq!(rejected_setting(config.validate()), "max.message.bytes");
        // A bad segment.bytes is reported as itself, not as a max.message.bytes conflict.
        rejects(
            LogConfig::builder()
                .segment_bytes(10)
                .max_message_bytes(100),
            "segment.bytes",
        );
    }

    #[test]
    fn an_unset_max_message_bytes_shrinks_to_the_segment() {
        // Kafka's smallest segment (1 MiB) is below Kafka's default batch limit (1 MiB + 12).
        let config = accepts(LogConfig::builder().segment_bytes(MIB));
        assert_eq!(config.max_message_bytes, MIB);
        let config = accepts(LogConfig::builder_for_tests().segment_bytes(4096));
        assert_eq!(config.max_message_bytes, 4096);
        // Above it, the default stands.
        let config = accepts(LogConfig::builder().segment_bytes(2 * MIB));
        assert_eq!(config.max_message_bytes, 1_048_588);
    }

    #[test]
    fn timestamp_bounds_ranges() {
        rejects(
            LogConfig::builder().message_timestamp_before_max_ms(-1),
            "message.timestamp.before.max.ms",
        );
        rejects(
            LogConfig::builder().message_timestamp_after_max_ms(-1),
            "message.timestamp.after.max.ms",
        );
        accepts(LogConfig::builder().message_timestamp_before_max_ms(0));
        accepts(LogConfig::builder().message_timestamp_after_max_ms(0));
    }

    #[test]
    fn recovery_point_ranges() {
        rejects(
            LogConfig::builder().recovery_point_bytes(0),
            "recovery.point.bytes",
        );
        rejects(
            LogConfig::builder().recovery_point_ms(0),
            "recovery.point.ms",
        );
        rejects(
            LogConfig::builder().recovery_point_duration(Duration::from_micros(999)),
            "recovery.point.ms",
        );
        accepts(LogConfig::builder().recovery_point_bytes(1));
        accepts(LogConfig::builder().recovery_point_ms(1));
        accepts(
            LogConfig::builder()
                .recovery_point_bytes(u64::MAX)
                .recovery_point_ms(u64::MAX),
        );
    }

    #[test]
    fn position_cache_bytes_range() {
        rejects(
            LogConfig::builder().position_cache_bytes((1 << 30) + 1),
            "position.cache.bytes",
        );
        accepts(LogConfig::builder().position_cache_bytes(0));
        accepts(LogConfig::builder().position_cache_bytes(1 << 30));
        assert_eq!(LogConfig::default().position_cache_bytes, 2 << 20);
    }

    #[test]
    fn producer_state_settings_defaults_setters_and_ranges() {
        let config = LogConfig::default();
        assert_eq!(config.producer_id_expiration_ms, 86_400_000);
        assert_eq!(config.producer_id_expiration_check_interval_ms, 600_000);
        assert!(!config.transaction_partition_verification_enable);

        let config = accepts(
            LogConfig::builder()
                .producer_id_expiration_ms(1)
                .producer_id_expiration_check_interval_ms(1)
                .transaction_partition_verification_enable(true),
        );
        assert_eq!(config.producer_id_expiration_ms, 1);
        assert_eq!(config.producer_id_expiration_check_interval_ms, 1);
        assert!(config.transaction_partition_verification_enable);
        let config = accepts(
            LogConfig::builder()
                .producer_id_expiration_duration(Duration::from_secs(2))
                .producer_id_expiration_check_interval_duration(Duration::from_millis(3)),
        );
        assert_eq!(config.producer_id_expiration_ms, 2000);
        assert_eq!(config.producer_id_expiration_check_interval_ms, 3);

        rejects(
            LogConfig::builder().producer_id_expiration_ms(0),
            "producer.id.expiration.ms",
        );
        rejects(
            LogConfig::builder().producer_id_expiration_check_interval_ms(0),
            "producer.id.expiration.check.interval.ms",
        );
    }

    /// A group-commit duration setting: zero (off) and `maximum` are accepted, a nanosecond
    /// more is refused with the setting's name.
    fn group_commit_duration_range(
        set: fn(LogConfigBuilder, Duration) -> LogConfigBuilder,
        get: fn(&LogConfig) -> Duration,
        setting: &str,
        maximum: Duration,
    ) {
        rejects(
            set(LogConfig::builder(), maximum + Duration::from_nanos(1)),
            setting,
        );
        let off = accepts(set(LogConfig::builder(), Duration::ZERO));
        assert_eq!(get(&off), Duration::ZERO);
        let most = accepts(set(LogConfig::builder(), maximum));
        assert_eq!(get(&most), maximum);
    }

    #[test]
    fn group_commit_max_spin_range() {
        group_commit_duration_range(
            LogConfigBuilder::group_commit_max_spin,
            |config| config.group_commit_max_spin,
            "group.commit.max.spin",
            Duration::from_millis(10),
        );
        assert_eq!(
            LogConfig::default().group_commit_max_spin,
            Duration::from_micros(250)
        );
    }

    #[test]
    fn group_commit_max_gather_range() {
        group_commit_duration_range(
            LogConfigBuilder::group_commit_max_gather,
            |config| config.group_commit_max_gather,
            "group.commit.max.gather",
            Duration::from_secs(1),
        );
        assert_eq!(
            LogConfig::default().group_commit_max_gather,
            Duration::from_millis(1)
        );
    }

    #[test]
    fn flush_interval_range() {
        rejects(
            LogConfig::builder().flush_policy(FlushPolicy::Interval(Duration::ZERO)),
            "flush.ms",
        );
        rejects(
            LogConfig::builder().flush_policy(FlushPolicy::Interval(Duration::MAX)),
            "flush.ms",
        );
        let largest = Duration::from_millis(i64::MAX.unsigned_abs());
        accepts(LogConfig::builder().flush_policy(FlushPolicy::Interval(largest)));
        rejects(
            LogConfig::builder()
                .flush_policy(FlushPolicy::Interval(largest + Duration::from_millis(1))),
            "flush.ms",
        );
        accepts(LogConfig::builder().flush_policy(FlushPolicy::Interval(Duration::from_nanos(1))));
        let one = NonZeroU64::MIN;
        accepts(LogConfig::builder().flush_policy(FlushPolicy::EveryMessages(one)));
        accepts(LogConfig::builder().flush_policy(FlushPolicy::EveryBytes(one)));
    }

    #[test]
    fn messages_are_specific() {
        let error = LogConfig::builder().segment_bytes(100).build().unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid value for segment.bytes: 100 is below the minimum of 1048576"
        );
        let error = LogConfig::builder()
            .segment_bytes(2 * MIB)
            .max_message_bytes(3 * MIB)
            .build()
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid value for max.message.bytes: 3145728 exceeds segment.bytes (2097152): a batch \
             must fit in one segment"
        );
        let error = LogConfig::builder().retention_ms(-5).build().unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid value for retention.ms: -5 is invalid: use -1 to keep segments forever, or a \
             value of at least 0"
        );
    }

    #[test]
    fn flush_policy_from_kafka() {
        let long_max = i64::MAX;
        assert_eq!(
            FlushPolicy::from_kafka(long_max, long_max).unwrap(),
            FlushPolicy::OsDecides
        );
        assert_eq!(
            FlushPolicy::from_kafka(1, long_max).unwrap(),
            FlushPolicy::EveryMessages(NonZeroU64::MIN)
        );
        assert_eq!(
            FlushPolicy::from_kafka(long_max - 1, long_max).unwrap(),
            FlushPolicy::EveryMessages(
                NonZeroU64::new(u64::try_from(long_max - 1).unwrap()).unwrap()
            )
        );
        assert_eq!(
            FlushPolicy::from_kafka(long_max, 0).unwrap(),
            FlushPolicy::EveryAppend
        );
        assert_eq!(
            FlushPolicy::from_kafka(long_max, 1000).unwrap(),
            FlushPolicy::Interval(Duration::from_secs(1))
        );
        assert_eq!(
            FlushPolicy::from_kafka(long_max, long_max - 1).unwrap(),
            FlushPolicy::Interval(Duration::from_millis(u64::try_from(long_max - 1).unwrap()))
        );
        assert_eq!(
            rejected_setting(FlushPolicy::from_kafka(0, long_max)),
            "flush.messages"
        );
        assert_eq!(
            rejected_setting(FlushPolicy::from_kafka(-1, long_max)),
            "flush.messages"
        );
        assert_eq!(
            rejected_setting(FlushPolicy::from_kafka(long_max, -1)),
            "flush.ms"
        );
        assert_eq!(
            rejected_setting(FlushPolicy::from_kafka(5, 1000)),
            "flush.ms"
        );
        assert_eq!(rejected_setting(FlushPolicy::from_kafka(5, 0)), "flush.ms");
        // Every policy from_kafka returns passes the config's own check.
        for (messages, ms) in [
            (long_max, long_max),
            (1, long_max),
            (long_max, 0),
            (long_max, 1),
        ] {
            let policy = FlushPolicy::from_kafka(messages, ms).unwrap();
            accepts(LogConfig::builder().flush_policy(policy));
        }
    }

    #[test]
    fn cleanup_policy_from_kafka_str() {
        let parse = CleanupPolicy::from_kafka_str;
        assert_eq!(parse("delete").unwrap(), CleanupPolicy::DELETE);
        assert_eq!(parse("compact").unwrap(), CleanupPolicy::COMPACT);
        assert_eq!(
            parse("delete,compact").unwrap(),
            CleanupPolicy::COMPACT_DELETE
        );
        assert_eq!(
            parse("compact,delete").unwrap(),
            CleanupPolicy::COMPACT_DELETE
        );
        assert_eq!(
            parse(" compact , delete ").unwrap(),
            CleanupPolicy::COMPACT_DELETE
        );
        assert_eq!(parse("delete,delete").unwrap(), CleanupPolicy::DELETE);
        assert_eq!(parse("").unwrap(), CleanupPolicy::NONE);
        assert_eq!(parse("  ").unwrap(), CleanupPolicy::NONE);
        for bad in [
            "delete,",
            ",compact",
            "delete,,compact",
            "Delete",
            "remove",
            "delete;compact",
        ] {
            assert_eq!(rejected_setting(parse(bad)), "cleanup.policy", "{bad:?}");
        }
        assert_eq!(
            "compact".parse::<CleanupPolicy>().unwrap(),
            CleanupPolicy::COMPACT
        );
        for policy in [
            CleanupPolicy::DELETE,
            CleanupPolicy::COMPACT,
            CleanupPolicy::COMPACT_DELETE,
            CleanupPolicy::NONE,
        ] {
            assert_eq!(parse(policy.as_kafka_str()).unwrap(), policy);
            assert_eq!(policy.to_string(), policy.as_kafka_str());
        }
        assert_eq!(CleanupPolicy::default(), CleanupPolicy::DELETE);
        accepts(LogConfig::builder().cleanup_policy(CleanupPolicy::NONE));
    }

    #[test]
    fn compression_type_from_kafka_str() {
        let parse = CompressionType::from_kafka_str;
        assert_eq!(parse("producer").unwrap(), CompressionType::Producer);
        assert_eq!(
            parse("uncompressed").unwrap(),
            CompressionType::Uncompressed
        );
        assert_eq!(parse("none").unwrap(), CompressionType::Uncompressed);
        assert_eq!(parse("lz4").unwrap(), CompressionType::Lz4);
        assert_eq!(parse(" zstd ").unwrap(), CompressionType::Zstd);
        for unsupported in ["gzip", "snappy"] {
            let error = parse(unsupported).unwrap_err();
            assert!(
                error
                    .to_string()
                    .contains("partlog writes none, lz4 and zstd"),
                "{error}"
            );
            assert_eq!(rejected_setting(parse(unsupported)), "compression.type");
        }
        for bad in ["", "LZ4", "brotli", "lz4,zstd"] {
            assert_eq!(rejected_setting(parse(bad)), "compression.type", "{bad:?}");
        }
        for codec in [
            CompressionType::Producer,
            CompressionType::Uncompressed,
            CompressionType::Lz4,
            CompressionType::Zstd,
        ] {
            assert_eq!(parse(codec.as_kafka_str()).unwrap(), codec);
            assert_eq!(codec.to_string().parse::<CompressionType>().unwrap(), codec);
        }
        assert_eq!(CompressionType::Producer.codec(), None);
        assert_eq!(
            CompressionType::Uncompressed.codec(),
            Some(Compression::None)
        );
        assert_eq!(CompressionType::Lz4.codec(), Some(Compression::Lz4));
        assert_eq!(CompressionType::Zstd.codec(), Some(Compression::Zstd));
    }

    #[test]
    fn segment_config_carries_the_segment_settings() {
        let config = accepts(
            LogConfig::builder_for_tests()
                .segment_bytes(4096)
                .segment_index_bytes(240)
                .index_interval_bytes(100)
                .segment_ms(5000),
        );
        assert_eq!(
            config.segment_config(123),
            SegmentConfig {
                segment_bytes: 4096,
                segment_index_bytes: 240,
                index_interval_bytes: 100,
                segment_ms: 5000,
                roll_jitter_ms: 123,
                preallocate: false,
                map_sealed_reads: false,
                position_cache_bytes: 2 << 20,
            }
        );
    }

    #[test]
    fn a_compacted_log_rolls_by_the_compaction_lag() {
        let builder = LogConfig::builder()
            .segment_ms(5000)
            .max_compaction_lag_ms(2000);
        let deleting = accepts(builder.clone());
        assert_eq!(
            deleting.max_segment_ms(),
            5000,
            "the lag applies only to compaction"
        );
        let compacted = accepts(builder.cleanup_policy(CleanupPolicy::COMPACT));
        assert_eq!(compacted.max_segment_ms(), 2000);
        assert_eq!(compacted.segment_config(0).segment_ms, 2000);
        let lag_above = accepts(
            LogConfig::builder()
                .segment_ms(5000)
                .max_compaction_lag_ms(9000)
                .cleanup_policy(CleanupPolicy::COMPACT_DELETE),
        );
        assert_eq!(lag_above.max_segment_ms(), 5000);
    }

    #[test]
    fn roll_jitter_examples() {
        let no_jitter = LogConfig::default();
        assert_eq!(no_jitter.draw_roll_jitter(u64::MAX), 0);
        assert_eq!(no_jitter.draw_roll_jitter(12345), 0);
        let config = accepts(LogConfig::builder().segment_ms(1000).segment_jitter_ms(100));
        assert_eq!(config.draw_roll_jitter(0), 0);
        assert_eq!(config.draw_roll_jitter(99), 99);
        assert_eq!(config.draw_roll_jitter(100), 0);
        assert_eq!(config.draw_roll_jitter(1234), 34);
        // segment.ms below the jitter bounds the draw.
        let config = accepts(LogConfig::builder().segment_ms(10).segment_jitter_ms(100));
        assert_eq!(config.draw_roll_jitter(1234), 4);
        // A config that failed validation still draws without panicking.
        let mut invalid_config = LogConfig {
            segment_jitter_ms: -5,
            ..LogConfig::default()
        };
        assert_eq!(invalid_config.draw_roll_jitter(77), 0);
        invalid_config.segment_jitter_ms = 5;
        invalid_config.segment_ms = 0;
        assert_eq!(invalid_config.draw_roll_jitter(77), 0);
    }

    #[test]
    fn log_config_is_send_sync_clone_debug() {
        fn assert_traits<T: Send + Sync + Clone + fmt::Debug + 'static>() {}
        assert_traits::<LogConfig>();
        assert_traits::<LogConfigBuilder>();
        assert_traits::<FlushPolicy>();
        assert_traits::<RecoveryMode>();
        assert_traits::<CleanupPolicy>();
        assert_traits::<CompressionType>();
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        #[test]
        fn roll_jitter_stays_below_jitter_and_roll_age(
            segment_ms in 1..=i64::MAX,
            jitter_ms in 0..=i64::MAX,
            max_compaction_lag_ms in 1..=i64::MAX,
            compact: bool,
            random: u64,
        ) {
            let config = accepts(
                LogConfig::builder()
                    .segment_ms(segment_ms)
                    .segment_jitter_ms(jitter_ms)
                    .max_compaction_lag_ms(max_compaction_lag_ms)
                    .cleanup_policy(CleanupPolicy { delete: true, compact }),
            );
            let jitter = config.draw_roll_jitter(random);
            proptest::prop_assert!(jitter >= 0);
            if jitter_ms == 0 {
                proptest::prop_assert_eq!(jitter, 0);
            } else {
                proptest::prop_assert!(jitter < jitter_ms.min(segment_ms));
                proptest::prop_assert!(jitter < config.max_segment_ms());
            }
            // The segment layer requires jitter < its segment_ms.
            let segment = config.segment_config(jitter);
            proptest::prop_assert!(segment.roll_jitter_ms < segment.segment_ms);
        }

        #[test]
        fn small_jitter_bounds_reach_every_value(bound in 1..=64i64, random: u64) {
            // With a small bound, the draw is exactly random % bound: every value is reachable.
            let config = accepts(LogConfig::builder().segment_ms(1000).segment_jitter_ms(bound));
            let expected = i64::try_from(random % bound.unsigned_abs()).unwrap();
            proptest::prop_assert_eq!(config.draw_roll_jitter(random), expected);
        }
    }
}
