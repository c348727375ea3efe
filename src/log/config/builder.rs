//! [`LogConfigBuilder`]: builds a [`LogConfig`] from Kafka's defaults, one setter per setting,
//! and records which settings the caller set, so that an open knows which stored values to keep.

use std::sync::Arc;
use std::time::Duration;

use crate::clock::Clock;
#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;
use crate::format::TimestampType;
use crate::segment::verified::VerifiedBatchCache;
use crate::storage::Storage;

use super::{
    CleanupPolicy, CompressionType, DEFAULT_MAX_MESSAGE_BYTES, FlushPolicy, LogConfig, RecoveryMode,
};
use crate::log::observe::Observer;

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
    /// Sets [`LogConfig::compaction_strategy`] (`compaction.strategy`): the compaction policy,
    /// by its name in [`compaction_policies`](crate::compaction_policies).
    pub fn compaction_strategy(mut self, name: impl Into<String>) -> Self {
        self.config.compaction_strategy = name.into();
        self.config.explicit.mark_field("compaction_strategy");
        self
    }

    /// Sets [`LogConfig::compaction_strategy_header`] (`compaction.strategy.header`): the
    /// header a header-ordered compaction policy reads versions from.
    pub fn compaction_strategy_header(mut self, header: impl Into<String>) -> Self {
        self.config.compaction_strategy_header = header.into();
        self.config
            .explicit
            .mark_field("compaction_strategy_header");
        self
    }

    /// A builder whose settings start as `config`'s, with `max_message_bytes` not yet set.
    pub(super) fn starting_from(config: LogConfig) -> Self {
        LogConfigBuilder {
            config,
            max_message_bytes_set: false,
        }
    }

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
        /// Sets [`LogConfig::cleaner_io_max_bytes_per_second`]
        /// (`log.cleaner.io.max.bytes.per.second`).
        cleaner_io_max_bytes_per_second: f64;
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
        /// Sets [`LogConfig::map_active_segment`] (partlog's `map.active.segment`).
        map_active_segment: bool;
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
        /// Sets [`LogConfig::verified_batch_cache`].
        verified_batch_cache: Arc<VerifiedBatchCache>;
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

    /// Sets [`LogConfig::workers`]: the log's background work runs on `workers`.
    pub fn workers(mut self, workers: crate::Workers) -> Self {
        self.config.workers = Some(workers);
        self
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

/// Whole milliseconds of `duration`, rounded down and capped at `i64::MAX`.
fn duration_to_ms(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}
