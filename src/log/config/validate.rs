//! [`LogConfig::validate`]: every setting's range and the rules between settings, one step per
//! group of settings, and the range checks the policy parsers share.
//!
//! The steps run in a fixed order and the first invalid value is the error, so that a config
//! with several mistakes always reports the same one.

use std::time::Duration;

use crate::error::{Error, Result};

use super::LogConfig;

impl LogConfig {
    /// Checks every setting, and the rules between settings.
    ///
    /// The first invalid value found is returned as [`Error::InvalidConfig`], naming the setting as
    /// Kafka spells it. A rule between two settings names the one it asks to change: for example,
    /// a `max_message_bytes` above `segment_bytes` is an error about `max.message.bytes`.
    pub fn validate(&self) -> Result<()> {
        self.check_segment_settings()?;
        self.check_retention_settings()?;
        self.check_compaction_settings()?;
        self.check_timestamp_settings()?;
        self.check_durability_settings()?;
        self.check_read_settings()?;
        self.check_group_commit_settings()?;
        self.check_producer_state_settings()?;
        // Rules between settings come last, so that a bad value on its own is reported as such.
        self.check_rules_between_settings()
    }

    /// `segment.bytes` (against the floor of this config), `segment.ms`, `segment.jitter.ms` and
    /// `segment.index.bytes`.
    fn check_segment_settings(&self) -> Result<()> {
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
        Ok(())
    }

    /// `retention.ms`, `retention.bytes`, `retention.timestamp.skew.ms` and
    /// `retention.check.interval.ms`.
    fn check_retention_settings(&self) -> Result<()> {
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
        Ok(())
    }

    /// `delete.retention.ms`, the compaction lags, `min.cleanable.dirty.ratio` and the cleaner's
    /// I/O cap.
    fn check_compaction_settings(&self) -> Result<()> {
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
        // Not above 0, or NaN (which is not ordered against 0).
        if self.cleaner_io_max_bytes_per_second.partial_cmp(&0.0)
            != Some(std::cmp::Ordering::Greater)
        {
            return Err(invalid(
                "log.cleaner.io.max.bytes.per.second",
                format!(
                    "{} is not above 0 (leave it at f64::MAX for no cap)",
                    self.cleaner_io_max_bytes_per_second
                        .to_string()
                        .to_lowercase()
                ),
            ));
        }
        self.compaction_policy().map(|_| ())
    }

    /// `message.timestamp.before.max.ms` and `message.timestamp.after.max.ms`.
    fn check_timestamp_settings(&self) -> Result<()> {
        at_least(
            "message.timestamp.before.max.ms",
            self.message_timestamp_before_max_ms,
            0,
        )?;
        at_least(
            "message.timestamp.after.max.ms",
            self.message_timestamp_after_max_ms,
            0,
        )
    }

    /// The flush policy and the recovery-point cadence.
    fn check_durability_settings(&self) -> Result<()> {
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
        Ok(())
    }

    /// The live reader's `poll.interval` and `position.cache.bytes`.
    fn check_read_settings(&self) -> Result<()> {
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
        Ok(())
    }

    /// How long a group commit may gather appends, and spin before it sleeps.
    fn check_group_commit_settings(&self) -> Result<()> {
        at_most_duration(
            "group.commit.max.gather",
            self.group_commit_max_gather,
            Duration::from_secs(1),
        )?;
        at_most_duration(
            "group.commit.max.spin",
            self.group_commit_max_spin,
            Duration::from_millis(10),
        )
    }

    /// `producer.id.expiration.ms` and `producer.id.expiration.check.interval.ms`.
    fn check_producer_state_settings(&self) -> Result<()> {
        at_least(
            "producer.id.expiration.ms",
            self.producer_id_expiration_ms,
            1,
        )?;
        at_least(
            "producer.id.expiration.check.interval.ms",
            self.producer_id_expiration_check_interval_ms,
            1,
        )
    }

    /// A batch fits in one segment, and the compaction lags are in order.
    fn check_rules_between_settings(&self) -> Result<()> {
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
}

/// An [`Error::InvalidConfig`] about `setting`.
pub(super) fn invalid(setting: &'static str, why: impl Into<String>) -> Error {
    Error::InvalidConfig {
        setting,
        why: why.into(),
    }
}

/// `value` is at least `minimum`.
pub(super) fn at_least(setting: &'static str, value: i64, minimum: i64) -> Result<()> {
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
