//! Legacy message sets (magic 0 and 1) written by kafka-python's legacy builder
//! (tests/fixtures/legacy/make_legacy.py): every outer message and record decodes to exactly
//! what the script asked for (offsets, timestamps, keys, values), through the format layer and
//! through a log whose segments hold them. gzip and snappy need their features
//! (`cargo test --all-features`); without them those wrappers must be `UnsupportedCompression`.

use std::collections::BTreeSet;
use std::path::PathBuf;

use partlog::unstable::format::{
    AnyBatchIter, Compression, KAFKA_LZ4_FRAME_HEADER, LegacyBatchView, Record, TimestampType,
};
use partlog::{Error, Log, LogConfig};

const FILES: &[&str] = &["v0.log", "v1.log", "v1_high_offsets.log"];

#[derive(Debug, Clone, PartialEq, Eq)]
struct ExpectedRecord {
    offset: i64,
    timestamp: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
}

#[derive(Debug, Clone)]
struct ExpectedBatch {
    file: String,
    position: usize,
    size: usize,
    magic: i8,
    codec: Compression,
    last_offset: i64,
    timestamp_type: TimestampType,
    max_timestamp: i64,
    records: Vec<ExpectedRecord>,
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/legacy")
        .join(name)
}

fn hex(text: &str) -> Vec<u8> {
    assert!(text.len().is_multiple_of(2), "{text}");
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&text[at..at + 2], 16).unwrap())
        .collect()
}

/// `-` is null, `xHEX` bytes, `COUNT*xHEX` a unit repeated.
fn bytes_field(text: &str) -> Option<Vec<u8>> {
    if text == "-" {
        return None;
    }
    if let Some((count, unit)) = text.split_once("*x") {
        return Some(hex(unit).repeat(count.parse().unwrap()));
    }
    Some(hex(text.strip_prefix('x').unwrap()))
}

fn expected() -> Vec<ExpectedBatch> {
    let text = std::fs::read_to_string(fixture("expected.txt")).unwrap();
    let mut batches: Vec<ExpectedBatch> = Vec::new();
    for line in text.lines().filter(|line| !line.starts_with('#')) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields[0] {
            "batch" => {
                assert_eq!(fields.len(), 10, "{line}");
                batches.push(ExpectedBatch {
                    file: fields[1].to_string(),
                    position: fields[2].parse().unwrap(),
                    size: fields[3].parse().unwrap(),
                    magic: fields[4].parse().unwrap(),
                    codec: fields[5].parse().unwrap(),
                    last_offset: fields[6].parse().unwrap(),
                    timestamp_type: match fields[7] {
                        "create" => TimestampType::CreateTime,
                        "log_append" => TimestampType::LogAppendTime,
                        other => panic!("{other}"),
                    },
                    max_timestamp: fields[8].parse().unwrap(),
                    records: Vec::with_capacity(fields[9].parse().unwrap()),
                });
            }
            "record" => {
                assert_eq!(fields.len(), 5, "{line}");
                batches.last_mut().unwrap().records.push(ExpectedRecord {
                    offset: fields[1].parse().unwrap(),
                    timestamp: fields[2].parse().unwrap(),
                    key: bytes_field(fields[3]),
                    value: bytes_field(fields[4]),
                });
            }
            other => panic!("unknown line kind {other}"),
        }
    }
    for batch in &batches {
        assert_eq!(batch.records.len(), batch.records.capacity(), "{batch:?}");
    }
    batches
}

fn owned(record: &Record<'_>) -> ExpectedRecord {
    assert_eq!(record.header_count(), 0, "legacy records have no headers");
    ExpectedRecord {
        offset: record.offset,
        timestamp: record.timestamp,
        key: record.key.map(<[u8]>::to_vec),
        value: record.value.map(<[u8]>::to_vec),
    }
}

/// What the fixtures as a whole must exercise, so that a regenerated set cannot lose coverage.
#[derive(Debug, Default)]
struct Coverage {
    decoded: BTreeSet<(i8, &'static str)>,
    unsupported: BTreeSet<(i8, &'static str)>,
    log_append_wrappers: usize,
    log_append_plain: usize,
    wrappers_with_gaps: usize,
    null_keys: usize,
    tombstones: usize,
    empty_values: usize,
    large_values: usize,
    magic0_lz4_with_kafka08_checksum: usize,
    offsets_above_2_pow_32: usize,
    records: usize,
}

#[test]
fn fixtures_decode_to_what_kafka_python_was_asked_to_write() {
    let expected = expected();
    let mut coverage = Coverage::default();
    let mut scratch = Vec::new();
    for name in FILES {
        let bytes = std::fs::read(fixture(name)).unwrap();
        let mut want = expected.iter().filter(|batch| batch.file == *name);
        let mut walk = AnyBatchIter::new(&bytes);
        for (position, batch) in walk.by_ref() {
            let context = format!("{name} @ {position}");
            let batch = batch.unwrap_or_else(|err| panic!("{context}: {err}"));
            let want = want.next().expect("more batches than expected");
            assert_eq!(position, want.position, "{context}");
            assert_eq!(batch.total_size(), want.size, "{context}");
            assert_eq!(batch.magic(), want.magic, "{context}");
            assert!(batch.header().is_none() && !batch.is_control(), "{context}");
            assert_eq!(batch.compression_id(), want.codec.id(), "{context}");
            assert_eq!(batch.last_offset(), want.last_offset, "{context}");
            assert_eq!(batch.next_offset(), want.last_offset + 1, "{context}");
            assert_eq!(batch.timestamp_type(), want.timestamp_type, "{context}");
            assert_eq!(batch.max_timestamp(), want.max_timestamp, "{context}");
            let legacy: LegacyBatchView<'_> = *batch.as_legacy().unwrap();
            assert_eq!(
                legacy.header().is_compressed(),
                want.codec != Compression::None
            );
            let codec_name = want.codec.name();

            if !want.codec.is_readable() {
                assert!(
                    matches!(
                        batch.records(&mut scratch),
                        Err(Error::UnsupportedCompression { codec }) if codec == want.codec.id()
                    ),
                    "{context}"
                );
                coverage.unsupported.insert((want.magic, codec_name));
                continue;
            }
            let records: Vec<ExpectedRecord> = batch
                .records(&mut scratch)
                .unwrap_or_else(|err| panic!("{context}: {err}"))
                .map(|record| owned(&record.unwrap_or_else(|err| panic!("{context}: {err}"))))
                .collect();
            assert_eq!(records, want.records, "{context}");
            // The view and the any-kind batch agree, and a wrapper knows its first offset.
            let mut again = Vec::new();
            let direct = legacy.records(&mut again).unwrap();
            assert_eq!(direct.remaining(), want.records.len(), "{context}");
            assert_eq!(
                direct.map(|r| owned(&r.unwrap())).collect::<Vec<_>>(),
                records
            );
            assert_eq!(
                batch.base_offset(&mut again).unwrap(),
                want.records[0].offset,
                "{context}"
            );

            coverage.decoded.insert((want.magic, codec_name));
            let is_wrapper = want.codec != Compression::None;
            let log_append = want.timestamp_type == TimestampType::LogAppendTime;
            coverage.log_append_wrappers += usize::from(log_append && is_wrapper);
            coverage.log_append_plain += usize::from(log_append && !is_wrapper);
            coverage.wrappers_with_gaps += usize::from(
                records.last().unwrap().offset - records[0].offset + 1 > records.len() as i64,
            );
            if want.magic == 0 && want.codec == Compression::Lz4 {
                // Kafka 0.8/0.9's frame: no content size, and a header checksum over the magic.
                let frame = legacy.value().unwrap();
                assert_eq!(frame[..6], KAFKA_LZ4_FRAME_HEADER[..6], "{context}");
                assert_ne!(frame[6], KAFKA_LZ4_FRAME_HEADER[6], "{context}");
                coverage.magic0_lz4_with_kafka08_checksum += 1;
            }
            for record in &records {
                coverage.records += 1;
                coverage.null_keys += usize::from(record.key.is_none());
                coverage.tombstones += usize::from(record.value.is_none());
                coverage.empty_values += usize::from(record.value.as_deref() == Some(&[][..]));
                coverage.large_values +=
                    usize::from(record.value.as_ref().is_some_and(|v| v.len() > 16 * 1024));
                coverage.offsets_above_2_pow_32 += usize::from(record.offset > 1 << 32);
                if want.magic == 0 {
                    assert_eq!(record.timestamp, -1, "{context}");
                }
            }
        }
        assert!(want.next().is_none(), "{name}: fewer batches than expected");
        assert!(walk.remainder().is_empty(), "{name}");
        assert_eq!(walk.position(), bytes.len());
    }
    println!("{coverage:#?}");

    for magic in [0, 1] {
        for codec in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
        ] {
            let seen = if codec.is_readable() {
                &coverage.decoded
            } else {
                &coverage.unsupported
            };
            assert!(
                seen.contains(&(magic, codec.name())),
                "magic {magic} {codec}"
            );
        }
    }
    assert!(coverage.magic0_lz4_with_kafka08_checksum >= 2);
    assert!(coverage.log_append_plain >= 1);
    assert!(coverage.null_keys >= 3);
    assert!(coverage.tombstones >= 3);
    assert!(coverage.records >= 15);
    if Compression::Gzip.is_readable() && Compression::Snappy.is_readable() {
        assert!(coverage.records >= 60);
        assert!(coverage.log_append_wrappers >= 4);
        assert!(coverage.wrappers_with_gaps >= 3);
        assert!(coverage.empty_values >= 2);
        assert!(coverage.large_values >= 6);
        assert!(coverage.offsets_above_2_pow_32 >= 6);
    }
}

/// A log over legacy segments (it needs every codec the fixtures use).
#[cfg(all(feature = "gzip", feature = "snappy"))]
mod log_over_legacy_segments {
    use super::*;
    use partlog::unstable::format::Batch;
    use partlog::{LogRecord, ReadBound};

    const T0: i64 = 1_500_000_000_000;

    /// A log directory with the fixtures as its segments: `v0.log` then `v1.log` as one segment
    /// at 0, as in a log upgraded from Kafka 0.9 to 0.10; or `v1_high_offsets.log` alone.
    fn legacy_log_dir(high_offsets: bool) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        if high_offsets {
            std::fs::copy(
                fixture("v1_high_offsets.log"),
                dir.path().join("00000000005000000000.log"),
            )
            .unwrap();
        } else {
            let mut segment = std::fs::read(fixture("v0.log")).unwrap();
            segment.extend(std::fs::read(fixture("v1.log")).unwrap());
            std::fs::write(dir.path().join("00000000000000000000.log"), segment).unwrap();
        }
        dir
    }

    fn config() -> LogConfig {
        // Index entries every few messages, so that lookups land inside legacy segments.
        LogConfig::builder()
            .index_interval_bytes(100)
            .build()
            .unwrap()
    }

    /// The expected records of some fixture files, in order, with their batch's timestamp type.
    fn expected_records(files: &[&str]) -> Vec<(ExpectedRecord, TimestampType)> {
        let expected = expected();
        files
            .iter()
            .flat_map(|name| expected.iter().filter(move |batch| batch.file == *name))
            .flat_map(|batch| {
                batch
                    .records
                    .iter()
                    .map(move |record| (record.clone(), batch.timestamp_type))
            })
            .collect()
    }

    fn as_expected(record: &LogRecord) -> (ExpectedRecord, TimestampType) {
        assert!(record.headers.is_empty());
        (
            ExpectedRecord {
                offset: record.offset,
                timestamp: record.timestamp,
                key: record.key.clone(),
                value: record.value.clone(),
            },
            record.timestamp_type,
        )
    }

    fn read_from(log: &Log, offset: i64) -> Vec<LogRecord> {
        log.records(offset, ReadBound::LogEnd)
            .collect::<partlog::Result<Vec<_>>>()
            .unwrap()
    }

    /// Issue 35: a point read of a legacy segment answers every offset as the iterator does
    /// (an inner message of a compressed wrapper included), and nothing in a compaction gap.
    #[test]
    fn point_reads_of_legacy_segments_agree_with_the_iterator() {
        for high_offsets in [false, true] {
            let dir = legacy_log_dir(high_offsets);
            let log = Log::open_read_only(dir.path(), config()).unwrap();
            let start = log.log_start_offset();
            let all = read_from(&log, start);
            // Each record's offset and its neighbours (the high offsets' gaps are wide).
            let mut offsets: Vec<i64> = all
                .iter()
                .flat_map(|record| [record.offset - 1, record.offset, record.offset + 1])
                .filter(|&offset| offset >= start && offset < log.log_end_offset())
                .collect();
            offsets.dedup();
            for offset in offsets {
                let found = log
                    .read_record(offset, partlog::ReadOptions::default())
                    .unwrap();
                let want = all.iter().find(|record| record.offset == offset);
                assert_eq!(found.as_ref(), want, "at {offset}");
            }
        }
    }

    #[test]
    fn a_log_reads_legacy_segments_read_only() {
        let dir = legacy_log_dir(false);
        let log = Log::open_read_only(dir.path(), config()).unwrap();
        let want = expected_records(&["v0.log", "v1.log"]);
        assert_eq!(log.log_end_offset(), 60);
        let got: Vec<_> = read_from(&log, 0).iter().map(as_expected).collect();
        assert_eq!(got, want);

        // From inside a compressed wrapper, and from a compaction gap inside one.
        assert_eq!(read_from(&log, 4)[0].offset, 4);
        assert_eq!(read_from(&log, 14)[0].offset, 15);
        assert_eq!(read_from(&log, 48)[0].offset, 49);

        // A fetch returns whole outer messages, as Kafka serves them.
        let fetch = log.read(4, 1, ReadBound::LogEnd).unwrap();
        let batches: Vec<Batch<'_>> = fetch.batches().collect::<partlog::Result<_>>().unwrap();
        assert_eq!(batches.len(), 1);
        assert_eq!(batches[0].magic(), 0);
        assert_eq!(batches[0].last_offset(), 6);
        assert_eq!(fetch.next_offset(), 7);
        let fetch = log.read(0, 1 << 20, ReadBound::LogEnd).unwrap();
        assert_eq!(
            fetch.bytes().len() as u64,
            std::fs::metadata(dir.path().join("00000000000000000000.log"))
                .unwrap()
                .len()
        );

        // ListOffsets by timestamp: magic 0 has no timestamps; an uncompressed LogAppendTime
        // message and LogAppendTime wrappers report the append time.
        assert_eq!(log.offset_for_timestamp(0).unwrap(), Some((25, T0)));
        assert_eq!(
            log.offset_for_timestamp(T0 + 95).unwrap(),
            Some((28, T0 + 900))
        );
        assert_eq!(
            log.offset_for_timestamp(T0 + 1_000).unwrap(),
            Some((39, T0 + 1_000))
        );
        assert_eq!(
            log.offset_for_timestamp(T0 + 1_002).unwrap(),
            Some((44, T0 + 1_002))
        );
        assert_eq!(log.offset_for_timestamp(T0 + 1_003).unwrap(), None);
        assert!(
            !dir.path().join("00000000000000000000.index").exists(),
            "a read-only open writes nothing"
        );

        // Offsets above 2^32, with gaps inside a wrapper.
        let dir = legacy_log_dir(true);
        let log = Log::open_read_only(dir.path(), config()).unwrap();
        let high = 5_000_000_000;
        assert_eq!(log.log_start_offset(), high);
        assert_eq!(log.log_end_offset(), high + 16);
        let got: Vec<_> = read_from(&log, high).iter().map(as_expected).collect();
        assert_eq!(got, expected_records(&["v1_high_offsets.log"]));
        assert_eq!(read_from(&log, high + 6)[0].offset, high + 11);
    }

    #[test]
    fn a_writable_log_indexes_legacy_segments_and_appends_v2_after_them() {
        use partlog::NewRecord;

        let dir = legacy_log_dir(false);
        let mut want = expected_records(&["v0.log", "v1.log"]);
        {
            let log = Log::open(dir.path(), config()).unwrap();
            assert_eq!(log.log_end_offset(), 60);
            let info = log
                .append(&[NewRecord::new(T0 + 2_000, Some(b"v2"), Some(b"after"))])
                .unwrap();
            assert_eq!(info.first_offset, 60);
            want.push((
                ExpectedRecord {
                    offset: 60,
                    timestamp: T0 + 2_000,
                    key: Some(b"v2".to_vec()),
                    value: Some(b"after".to_vec()),
                },
                TimestampType::CreateTime,
            ));
            let got: Vec<_> = read_from(&log, 0).iter().map(as_expected).collect();
            assert_eq!(got, want);
            // The batch after the legacy messages is a v2 batch.
            let fetch = log.read(60, 1 << 20, ReadBound::LogEnd).unwrap();
            let batch = fetch.batches().next().unwrap().unwrap();
            assert_eq!(batch.magic(), 2);
        }
        // The rebuilt offset index names legacy messages by their last offset, as Kafka's does.
        {
            use partlog::unstable::{OffsetIndex, OsStorage, Storage};
            use std::sync::Arc;
            let storage: Arc<dyn Storage> = Arc::new(OsStorage::new());
            let index = OffsetIndex::open(
                &storage,
                &dir.path().join("00000000000000000000.index"),
                0,
                config().segment_index_bytes,
                false,
            )
            .unwrap();
            let v0_len = std::fs::metadata(fixture("v0.log")).unwrap().len() as usize;
            let outer: Vec<(usize, i64)> = expected()
                .iter()
                .filter(|batch| batch.file != "v1_high_offsets.log")
                .map(|batch| {
                    let shift = if batch.file == "v1.log" { v0_len } else { 0 };
                    (batch.position + shift, batch.last_offset)
                })
                .collect();
            assert!(index.entries() >= 10, "{} entries", index.entries());
            for n in 0..index.entries() {
                let entry = index.entry(n).unwrap();
                assert!(
                    outer.contains(&(entry.position as usize, entry.offset)),
                    "{entry:?}"
                );
            }
        }
        // A read-only open after the clean close trusts those indexes: a wrong entry would fail.
        {
            let reader = Log::open_read_only(dir.path(), config()).unwrap();
            for (record, _) in &want {
                assert_eq!(read_from(&reader, record.offset)[0].offset, record.offset);
            }
        }
        let log = Log::open(dir.path(), config()).unwrap();
        let got: Vec<_> = read_from(&log, 0).iter().map(as_expected).collect();
        assert_eq!(got, want);
        for (record, _) in &want {
            assert_eq!(read_from(&log, record.offset)[0].offset, record.offset);
        }

        // Truncating into a compressed magic 1 wrapper (offsets 47, 49, 52) removes it whole: the
        // new end is its first inner offset, found by decompressing it.
        assert_eq!(log.truncate_to(50).unwrap(), 47);
        assert_eq!(log.log_end_offset(), 47);
        let info = log
            .append(&[NewRecord::new(T0 + 3_000, Some(b"k"), Some(b"again"))])
            .unwrap();
        assert_eq!(info.first_offset, 47);
        drop(log);
        let log = Log::open(dir.path(), config()).unwrap();
        let after = read_from(&log, 0);
        let kept = want
            .iter()
            .take_while(|(record, _)| record.offset < 47)
            .count();
        assert_eq!(after.len(), kept + 1);
        assert_eq!(
            after[..kept].iter().map(as_expected).collect::<Vec<_>>(),
            want[..kept]
        );
        assert_eq!(after[kept].offset, 47);
        assert_eq!(after[kept].value.as_deref(), Some(&b"again"[..]));
    }
}

#[test]
fn appending_a_legacy_message_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let bytes = std::fs::read(fixture("v1.log")).unwrap();
    let (_, first) = AnyBatchIter::new(&bytes).next().unwrap();
    let first = first.unwrap();
    assert!(log.append_batch(first.as_bytes()).is_err());
    assert!(log.append_batch_trusted(first.as_bytes()).is_err());
    assert_eq!(log.log_end_offset(), 0);
}
