//! Bad input at the API: what a careless caller hands each public function. Every
//! case must come back as a typed error with a specific message (the variant and a key phrase
//! are asserted), never a panic.

use std::path::Path;
use std::time::Duration;

use partlog::unstable::format::crc32c;
use partlog::{
    BatchBuilder, CleanupPolicy, Compression, Error, FlushPolicy, Log, LogConfig, NewRecord,
    ReadBound,
};

const T0: i64 = 1_700_000_000_000;

fn now_ms() -> i64 {
    // The default timestamp bounds are Kafka's (no limit), so any recent time will do.
    T0
}

fn config() -> LogConfig {
    LogConfig::builder_for_tests()
        .segment_bytes(4096)
        .max_message_bytes(1024)
        .build()
        .unwrap()
}

/// A log with offsets [5, 10): ten records, then the first five deleted.
fn log_with_start_5(dir: &Path) -> Log {
    let log = Log::open(dir, config()).unwrap();
    for i in 0..10 {
        log.append(&[NewRecord::new(now_ms() + i, Some(b"k"), Some(b"v"))])
            .unwrap();
    }
    log.delete_records_before(5).unwrap();
    log
}

fn message(error: &Error) -> String {
    error.to_string()
}

#[track_caller]
fn assert_invalid_argument(result: Result<impl std::fmt::Debug, Error>, phrase: &str) {
    match result {
        Err(error @ Error::InvalidArgument { .. }) => {
            assert!(
                message(&error).contains(phrase),
                "{error}: wants {phrase:?}"
            );
        }
        other => panic!("wanted InvalidArgument ({phrase}), got {other:?}"),
    }
}

#[track_caller]
fn assert_out_of_range(result: Result<impl std::fmt::Debug, Error>, requested: i64) {
    match result {
        Err(Error::OffsetOutOfRange {
            requested: got,
            start,
            end,
        }) => {
            assert_eq!((got, start, end), (requested, 5, 10));
        }
        other => panic!("wanted OffsetOutOfRange({requested}), got {other:?}"),
    }
}

#[test]
fn empty_appends_and_oversized_records_are_refused() {
    let temp = tempfile::tempdir().unwrap();
    let log = Log::open(temp.path(), config()).unwrap();
    assert_invalid_argument(log.append(&[]), "at least one record");
    let big = vec![7u8; 2000];
    match log.append(&[NewRecord::new(now_ms(), None, Some(&big))]) {
        Err(error @ Error::RecordTooLarge { max: 1024, .. }) => {
            // The limit by its Kafka name, and how to raise it.
            assert!(
                message(&error).contains("exceeds max.message.bytes (1024 bytes)"),
                "{error}"
            );
            assert!(
                message(&error).contains("LogConfig::builder().max_message_bytes("),
                "{error}"
            );
        }
        other => panic!("{other:?}"),
    }
    let mut builder = BatchBuilder::new(Compression::None);
    builder.push(&NewRecord::new(now_ms(), None, Some(&big)));
    let batch = builder.build().unwrap();
    assert!(matches!(
        log.append_batch(&batch),
        Err(Error::RecordTooLarge { max: 1024, .. })
    ));
    assert!(matches!(
        log.append_batch_trusted(&batch),
        Err(Error::RecordTooLarge { max: 1024, .. })
    ));
    // Empty bytes are no batch at all.
    match log.append_batch(&[]) {
        Err(error @ Error::InvalidBatch { .. }) => {
            assert!(message(&error).contains("truncated"), "{error}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(log.log_end_offset(), 0, "nothing was appended");
    log.close().unwrap();
}

#[test]
fn offsets_below_the_start_and_above_the_end() {
    let temp = tempfile::tempdir().unwrap();
    let log = log_with_start_5(temp.path());
    for offset in [-1, 0, 4, 11, i64::MAX, i64::MIN] {
        assert_out_of_range(log.read(offset, 100, ReadBound::LogEnd), offset);
        let mut records = log.records(offset, ReadBound::LogEnd);
        assert_out_of_range(records.next().unwrap(), offset);
        assert!(records.next().is_none(), "records stops after its error");
    }
    // The end itself is a legal, empty read (a consumer caught up).
    assert!(log.read(10, 100, ReadBound::LogEnd).unwrap().is_empty());
    assert!(log.records(10, ReadBound::LogEnd).next().is_none());

    for offset in [-1, 10, 11, i64::MAX, i64::MIN] {
        match log.wait_durable(offset) {
            Err(Error::OffsetOutOfRange { requested, .. }) => assert_eq!(requested, offset),
            other => panic!("wait_durable({offset}): {other:?}"),
        }
    }
    log.wait_durable(9).unwrap();

    for offset in [11, i64::MAX] {
        match log.delete_records_before(offset) {
            Err(Error::OffsetOutOfRange { requested, .. }) => assert_eq!(requested, offset),
            other => panic!("delete_records_before({offset}): {other:?}"),
        }
    }
    // Below the start, it is a no-op (Kafka's deleteRecords never moves the start back).
    log.delete_records_before(2).unwrap();
    log.delete_records_before(i64::MIN).unwrap();
    assert_eq!(log.log_start_offset(), 5);

    // Timestamps far outside the log: nothing at or after, or the first record.
    assert_eq!(log.offset_for_timestamp(i64::MAX).unwrap(), None);
    assert_eq!(log.offset_for_timestamp(i64::MIN).unwrap().unwrap().0, 5);
    assert_eq!(log.offset_for_timestamp(-1).unwrap().unwrap().0, 5);

    for offset in [-1, i64::MIN] {
        assert_invalid_argument(log.truncate_to(offset), "negative offset");
    }
    // At or above the end there is nothing to remove.
    assert_eq!(log.truncate_to(i64::MAX).unwrap(), 10);
    assert_eq!(log.truncate_to(10).unwrap(), 10);
    assert_eq!(log.log_end_offset(), 10);
    // The end is past a negative offset, so there is "data"; the read then says out of range.
    assert!(log.wait_for_data(-5, Duration::ZERO).unwrap());
    assert!(!log.wait_for_data(10, Duration::ZERO).unwrap());
    log.close().unwrap();
}

#[test]
fn a_directory_that_is_a_file_or_unreadable() {
    let temp = tempfile::tempdir().unwrap();
    let file = temp.path().join("not-a-dir");
    std::fs::write(&file, b"x").unwrap();
    for result in [
        Log::open(&file, config()),
        Log::open_read_only(&file, config()),
        Log::open(file.join("below"), config()),
    ] {
        match result {
            Err(error @ Error::Io { .. }) => {
                assert!(message(&error).contains("not-a-dir"), "{error}");
            }
            other => panic!("{other:?}"),
        }
    }
    // A read-only open of a directory that does not exist creates nothing.
    let missing = temp.path().join("missing");
    assert!(matches!(
        Log::open_read_only(&missing, config()),
        Err(Error::Io { .. })
    ));
    assert!(!missing.exists());

    let locked_out = temp.path().join("locked-out");
    drop(Log::open(&locked_out, config()).unwrap());
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&locked_out, std::fs::Permissions::from_mode(0o000)).unwrap();
    if std::fs::read_dir(&locked_out).is_ok() {
        // Root (as in CI containers) reads a mode-000 directory anyway.
        println!("skipped: this process can read a mode-000 directory (it runs as root)");
    } else {
        for result in [
            Log::open(&locked_out, config()),
            Log::open_read_only(&locked_out, config()),
        ] {
            match result {
                Err(error @ Error::Io { .. }) => {
                    assert!(message(&error).contains("locked-out"), "{error}")
                }
                other => panic!("{other:?}"),
            }
        }
    }
    std::fs::set_permissions(&locked_out, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn a_closed_log_answers_closed_everywhere() {
    let temp = tempfile::tempdir().unwrap();
    let log = log_with_start_5(temp.path());
    log.close().unwrap();
    log.close().unwrap(); // a second close is harmless
    let record = NewRecord::new(now_ms(), None, Some(b"v"));
    let mut builder = BatchBuilder::new(Compression::None);
    builder.push(&record);
    let batch = builder.build().unwrap();
    let results: Vec<(&str, Result<(), Error>)> = vec![
        ("append", log.append(&[record]).map(drop)),
        ("append_batch", log.append_batch(&batch).map(drop)),
        (
            "append_batch_trusted",
            log.append_batch_trusted(&batch).map(drop),
        ),
        ("read", log.read(5, 100, ReadBound::LogEnd).map(drop)),
        (
            "records",
            log.records(5, ReadBound::LogEnd).next().unwrap().map(drop),
        ),
        ("wait_durable", log.wait_durable(5)),
        (
            "offset_for_timestamp",
            log.offset_for_timestamp(0).map(drop),
        ),
        ("truncate_to", log.truncate_to(6).map(drop)),
        ("delete_records_before", log.delete_records_before(6)),
        ("enforce_retention", log.enforce_retention().map(drop)),
    ];
    for (call, result) in results {
        match result {
            Err(error @ Error::Closed) => assert_eq!(message(&error), "the log is closed"),
            other => panic!("{call} on a closed log: {other:?}"),
        }
    }
}

#[test]
fn two_writers_on_one_directory() {
    let temp = tempfile::tempdir().unwrap();
    let first = Log::open(temp.path(), config()).unwrap();
    match Log::open(temp.path(), config()) {
        Err(error @ Error::Locked { .. }) => {
            assert!(message(&error).contains("partlog.lock"), "{error}");
            assert!(
                message(&error).contains("locked by another user"),
                "{error}"
            );
            // The other user is this process: the message must say so.
            assert!(message(&error).contains("this process"), "{error}");
        }
        other => panic!("{other:?}"),
    }
    // A reader may not share a directory with a writer either (the lock is exclusive).
    assert!(matches!(
        Log::open_read_only(temp.path(), config()),
        Err(Error::Locked { .. })
    ));
    first.close().unwrap();
    Log::open(temp.path(), config()).unwrap().close().unwrap();
}

#[test]
fn every_setting_out_of_range_names_itself() {
    let cases: Vec<(&str, partlog::LogConfigBuilder)> = vec![
        ("segment.bytes", LogConfig::builder().segment_bytes(100)),
        (
            "segment.bytes",
            LogConfig::builder().segment_bytes(u32::MAX),
        ),
        ("segment.ms", LogConfig::builder().segment_ms(0)),
        (
            "segment.jitter.ms",
            LogConfig::builder().segment_jitter_ms(-1),
        ),
        (
            "segment.index.bytes",
            LogConfig::builder().segment_index_bytes(23),
        ),
        (
            "segment.index.bytes",
            LogConfig::builder().segment_index_bytes(u32::MAX),
        ),
        ("retention.ms", LogConfig::builder().retention_ms(-2)),
        ("retention.bytes", LogConfig::builder().retention_bytes(-2)),
        (
            "retention.timestamp.skew.ms",
            LogConfig::builder().retention_timestamp_skew_ms(-1),
        ),
        (
            "retention.check.interval.ms",
            LogConfig::builder().retention_check_interval_ms(0),
        ),
        (
            "delete.retention.ms",
            LogConfig::builder().delete_retention_ms(-1),
        ),
        (
            "min.compaction.lag.ms",
            LogConfig::builder().min_compaction_lag_ms(-1),
        ),
        (
            "max.compaction.lag.ms",
            LogConfig::builder().max_compaction_lag_ms(0),
        ),
        (
            "min.cleanable.dirty.ratio",
            LogConfig::builder().min_cleanable_dirty_ratio(1.5),
        ),
        (
            "min.cleanable.dirty.ratio",
            LogConfig::builder().min_cleanable_dirty_ratio(f64::NAN),
        ),
        (
            "message.timestamp.before.max.ms",
            LogConfig::builder().message_timestamp_before_max_ms(-1),
        ),
        (
            "message.timestamp.after.max.ms",
            LogConfig::builder().message_timestamp_after_max_ms(-1),
        ),
        (
            "recovery.point.bytes",
            LogConfig::builder().recovery_point_bytes(0),
        ),
        (
            "recovery.point.ms",
            LogConfig::builder().recovery_point_ms(0),
        ),
        (
            "max.message.bytes",
            LogConfig::builder()
                .segment_bytes(1 << 20)
                .max_message_bytes((1 << 20) + 1),
        ),
        (
            "min.compaction.lag.ms",
            LogConfig::builder()
                .min_compaction_lag_ms(10)
                .max_compaction_lag_ms(5),
        ),
        (
            "flush.ms",
            LogConfig::builder().flush_policy(FlushPolicy::Interval(Duration::ZERO)),
        ),
    ];
    for (setting, builder) in cases {
        match builder.build() {
            Err(error @ Error::InvalidConfig { setting: named, .. }) => {
                assert_eq!(named, setting, "{error}");
                assert!(message(&error).starts_with(&format!("invalid value for {setting}: ")));
            }
            other => panic!("{setting}: {other:?}"),
        }
    }
    // A config built by hand, without the builder, is checked at open.
    let temp = tempfile::tempdir().unwrap();
    let mut config = LogConfig::default();
    config.segment_ms = -5;
    assert!(matches!(
        Log::open(temp.path(), config),
        Err(Error::InvalidConfig {
            setting: "segment.ms",
            ..
        })
    ));
    assert_eq!(
        std::fs::read_dir(temp.path()).unwrap().count(),
        0,
        "open created nothing"
    );
    // Kafka's flush settings.
    assert!(matches!(
        FlushPolicy::from_kafka(0, i64::MAX),
        Err(Error::InvalidConfig {
            setting: "flush.messages",
            ..
        })
    ));
    assert!(matches!(
        FlushPolicy::from_kafka(i64::MAX, -1),
        Err(Error::InvalidConfig {
            setting: "flush.ms",
            ..
        })
    ));
    assert!(matches!(
        CleanupPolicy::from_kafka_str("sometimes"),
        Err(Error::InvalidConfig { .. })
    ));
}

/// A valid producer batch of `n` records.
fn producer_batch(n: usize) -> Vec<u8> {
    let mut builder = BatchBuilder::new(Compression::None);
    for i in 0..n {
        builder.push(&NewRecord::new(
            now_ms() + i as i64,
            Some(b"key"),
            Some(b"value"),
        ));
    }
    builder.build().unwrap()
}

/// Recomputes the CRC after an edit to a CRC-covered field.
fn fix_crc(batch: &mut [u8]) {
    let crc = crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

fn edited(edit: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut batch = producer_batch(2);
    edit(&mut batch);
    fix_crc(&mut batch);
    batch
}

#[test]
fn append_batch_refuses_each_leader_check_violation() {
    let temp = tempfile::tempdir().unwrap();
    let log = Log::open(temp.path(), config()).unwrap();
    let valid = producer_batch(2);

    // Not one batch: two batches back to back, and a batch with trailing bytes.
    let mut two = valid.clone();
    two.extend_from_slice(&valid);
    let mut trailing = valid.clone();
    trailing.push(0);
    // Bad framing: cut short, and a batch length below the header.
    let short = valid[..valid.len() - 1].to_vec();
    let mut tiny_length = valid.clone();
    tiny_length[8..12].copy_from_slice(&10i32.to_be_bytes());
    let mut bad_crc = valid.clone();
    bad_crc[17] ^= 0xff;
    let mut magic_1 = valid.clone();
    magic_1[16] = 1;
    let mut magic_3 = valid.clone();
    magic_3[16] = 3;

    let framing: Vec<(&str, Vec<u8>, &str)> = vec![
        ("two batches", two, "more than one batch"),
        ("trailing byte", trailing, "bytes follow the batch"),
        ("cut short", short, "truncated: needs 91 bytes, 90 present"),
        (
            "batch length 10",
            tiny_length,
            "batch length 10 is out of range",
        ),
        ("bad crc", bad_crc, "crc mismatch"),
        ("magic 1", magic_1, "magic byte 1 is not supported"),
        ("magic 3", magic_3, "magic byte 3 is not supported"),
    ];
    for (case, batch, phrase) in &framing {
        for result in [log.append_batch(batch), log.append_batch_trusted(batch)] {
            match result {
                Err(error @ Error::InvalidBatch { .. }) => {
                    assert!(message(&error).contains(phrase), "{case}: {error}");
                }
                other => panic!("{case}: {other:?}"),
            }
        }
    }

    let header_cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "records count 0",
            edited(|b| b[57..61].copy_from_slice(&0i32.to_be_bytes())),
            "at least one record",
        ),
        (
            "lastOffsetDelta + 1 != count",
            edited(|b| b[23..27].copy_from_slice(&5i32.to_be_bytes())),
            "lastOffsetDelta + 1",
        ),
        (
            "producer id without base sequence",
            edited(|b| b[43..51].copy_from_slice(&77i64.to_be_bytes())),
            "base sequence",
        ),
        ("control bit", edited(|b| b[22] |= 0x20), "control"),
        (
            "delete-horizon bit",
            edited(|b| b[22] |= 0x40),
            "delete-horizon",
        ),
        (
            "LogAppendTime bit",
            edited(|b| b[22] |= 0x08),
            "LogAppendTime",
        ),
    ];
    for (case, batch, phrase) in &header_cases {
        for result in [log.append_batch(batch), log.append_batch_trusted(batch)] {
            match result {
                Err(error @ Error::InvalidArgument { .. }) => {
                    assert!(message(&error).contains(phrase), "{case}: {error}");
                }
                other => panic!("{case}: {other:?}"),
            }
        }
    }

    // A records count that disagrees with the records present (recordsCount 3, two records,
    // lastOffsetDelta 2): caught by the record-framing check of append_batch.
    let miscounted = edited(|b| {
        b[57..61].copy_from_slice(&3i32.to_be_bytes());
        b[23..27].copy_from_slice(&2i32.to_be_bytes());
    });
    match log.append_batch(&miscounted) {
        Err(error @ Error::InvalidBatch { .. }) => {
            assert!(message(&error).contains("declares 3 records"), "{error}")
        }
        other => panic!("{other:?}"),
    }
    // Codec ids 5 to 7 are no codec at all.
    let bad_codec = edited(|b| b[22] |= 0x07);
    assert!(matches!(
        log.append_batch(&bad_codec),
        Err(Error::UnsupportedCompression { codec: 7 })
    ));
    assert_eq!(log.log_end_offset(), 0, "nothing was appended");
    log.append_batch(&valid).unwrap();
    assert_eq!(log.log_end_offset(), 2);
    log.close().unwrap();

    // Unkeyed records in a compacted log.
    let temp = tempfile::tempdir().unwrap();
    let compacted = LogConfig::builder_for_tests()
        .segment_bytes(4096)
        .cleanup_policy(CleanupPolicy::from_kafka_str("compact").unwrap())
        .build()
        .unwrap();
    let log = Log::open(temp.path(), compacted).unwrap();
    let mut builder = BatchBuilder::new(Compression::None);
    builder.push(&NewRecord::new(now_ms(), None, Some(b"v")));
    let unkeyed = builder.build().unwrap();
    for result in [
        log.append_batch(&unkeyed).map(drop),
        log.append_batch_trusted(&unkeyed).map(drop),
        log.append(&[NewRecord::new(now_ms(), None, Some(b"v"))])
            .map(drop),
    ] {
        match result {
            Err(error) => assert!(message(&error).contains("key"), "{error}"),
            Ok(()) => panic!("an unkeyed record entered a compacted log"),
        }
    }
    log.close().unwrap();
}
