use std::fmt;
use std::num::NonZeroU64;

use super::*;
use crate::error::{Error, Result};
use crate::format::Compression;

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
    // Kafka's 5 minutes; the thread runs only for a log with retention or compaction set.
    assert_eq!(config.retention_check_interval_ms, 300_000);
    assert_eq!(config.cleanup_policy, CleanupPolicy::DELETE);
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
fn cleaner_io_cap_is_above_zero() {
    assert_eq!(
        LogConfig::default().cleaner_io_max_bytes_per_second,
        f64::MAX,
        "no cap, as Kafka's Double.MaxValue"
    );
    for bad in [0.0, -1.0, f64::NAN, f64::NEG_INFINITY] {
        rejects(
            LogConfig::builder().cleaner_io_max_bytes_per_second(bad),
            "log.cleaner.io.max.bytes.per.second",
        );
    }
    for good in [1.0, 50e6, f64::MAX, f64::INFINITY] {
        accepts(LogConfig::builder().cleaner_io_max_bytes_per_second(good));
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
        FlushPolicy::EveryMessages(NonZeroU64::new(u64::try_from(long_max - 1).unwrap()).unwrap())
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

/// Issue 31, section 3: `cleanup.policy` is a set, with set operations and an error that lists
/// the valid names.
#[test]
fn cleanup_policy_is_a_set() {
    let mut policy = CleanupPolicy::NONE;
    assert!(policy.is_empty() && !policy.deletes() && !policy.compacts());
    policy.insert(CleanupPolicy::DELETE);
    assert!(policy.contains(CleanupPolicy::DELETE) && !policy.contains(CleanupPolicy::COMPACT));
    policy.insert(CleanupPolicy::COMPACT);
    assert_eq!(policy, CleanupPolicy::COMPACT_DELETE);
    assert_eq!(
        CleanupPolicy::DELETE.union(CleanupPolicy::COMPACT),
        CleanupPolicy::COMPACT_DELETE
    );
    let names: Vec<&str> = policy.iter().map(|(_, name)| name).collect();
    assert_eq!(names, ["compact", "delete"]);
    policy.remove(CleanupPolicy::DELETE);
    assert_eq!(policy, CleanupPolicy::COMPACT);
    assert!(CleanupPolicy::NONE.iter().next().is_none());
    let Err(Error::InvalidConfig { why, .. }) = CleanupPolicy::from_kafka_str("remove") else {
        panic!("an unknown name is refused");
    };
    assert!(why.contains("compact, delete"), "{why}");
}

/// Issue 31, section 3: `compaction.strategy` names a policy of the registry; an unknown name is
/// refused with the names there are, and the default is Kafka's.
#[test]
fn compaction_strategy_names_a_registered_policy() {
    let config = accepts(LogConfig::builder());
    assert_eq!(config.compaction_strategy, "offset");
    assert_eq!(config.compaction_policy().unwrap().name(), "offset");
    assert_eq!(
        crate::compaction_policies().next().map(|info| info.name),
        Some("offset")
    );
    let Err(Error::InvalidConfig { setting, why }) = LogConfig::builder()
        .compaction_strategy("newest-wins")
        .build()
    else {
        panic!("an unknown compaction policy is refused");
    };
    assert_eq!(setting, "compaction.strategy");
    assert!(why.contains("offset"), "{why}");
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
            map_active_reads: false,
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
                .cleanup_policy(if compact { CleanupPolicy::COMPACT_DELETE } else { CleanupPolicy::DELETE }),
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
