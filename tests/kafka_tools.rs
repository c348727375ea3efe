//! Proves the DumpLogSegments harness (`tests/common/kafka.rs`) on bytes partlog did not write,
//! so that when it later runs on partlog's own segments, a pass means something.
//!
//! The `.log` files are committed fixtures from kafka-python's writer
//! (`tests/fixtures/kafka_tools/generate.py` regenerates them, with the records the writer was
//! asked to write). The `.index` and `.timeindex` files are built here from the batch headers,
//! with Kafka's semantics (FORMAT.md §4): an offset-index entry
//! holds the batch's LAST offset relative to the segment's base offset and the byte position where
//! the batch starts; a time-index entry holds the largest timestamp so far and the last offset of
//! the batch that set it, written only when that timestamp grows. Every batch gets an entry (as if
//! `index.interval.bytes` were 0), so DumpLogSegments checks every batch.
//!
//! Nothing here is timed.

#[path = "common/kafka.rs"]
mod kafka;
#[path = "common/producer_state_samples.rs"]
mod producer_state_samples;

use std::path::{Path, PathBuf};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/kafka_tools");

/// The fixture directories, with the base offset their `.log` file is named after.
const PLAIN: (&str, i64) = ("plain", 0);
/// Offsets above 2^32, leader epoch 7, and a batch with holes in its offsets.
const GAPS_HIGH_OFFSETS: (&str, i64) = ("gaps-high-offsets", 5_000_000_000);

/// The size of a RecordBatch v2 header: everything before the first record.
const BATCH_HEADER_SIZE: usize = 61;
/// baseOffset (8 bytes) and batchLength (4): the part of a batch that batchLength does not count.
const LOG_OVERHEAD: usize = 12;

/// The fields of a batch header this test needs, read with big-endian decoding.
#[derive(Debug, Clone)]
struct BatchHeader {
    position: usize,
    size: usize,
    base_offset: i64,
    partition_leader_epoch: i32,
    magic: i8,
    crc: u32,
    attributes: i16,
    last_offset_delta: i32,
    base_timestamp: i64,
    max_timestamp: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    records_count: i32,
}

impl BatchHeader {
    fn last_offset(&self) -> i64 {
        self.base_offset + i64::from(self.last_offset_delta)
    }

    fn compression(&self) -> &'static str {
        ["none", "gzip", "snappy", "lz4", "zstd"][usize::try_from(self.attributes & 0x7).unwrap()]
    }

    fn timestamp_type(&self) -> &'static str {
        if self.attributes & 0x8 == 0 {
            "CreateTime"
        } else {
            "LogAppendTime"
        }
    }

    fn is_transactional(&self) -> bool {
        self.attributes & 0x10 != 0
    }

    fn is_control(&self) -> bool {
        self.attributes & 0x20 != 0
    }
}

fn be<const N: usize>(bytes: &[u8], at: usize) -> [u8; N] {
    bytes[at..at + N].try_into().unwrap()
}

/// Walks the batches of a `.log` file by their length fields.
fn batch_headers(log: &[u8]) -> Vec<BatchHeader> {
    let mut headers = Vec::new();
    let mut position = 0;
    while position < log.len() {
        let batch = &log[position..];
        assert!(batch.len() >= BATCH_HEADER_SIZE, "torn batch at {position}");
        let batch_length = usize::try_from(i32::from_be_bytes(be(batch, 8))).unwrap();
        let header = BatchHeader {
            position,
            size: LOG_OVERHEAD + batch_length,
            base_offset: i64::from_be_bytes(be(batch, 0)),
            partition_leader_epoch: i32::from_be_bytes(be(batch, 12)),
            magic: i8::from_be_bytes(be(batch, 16)),
            crc: u32::from_be_bytes(be(batch, 17)),
            attributes: i16::from_be_bytes(be(batch, 21)),
            last_offset_delta: i32::from_be_bytes(be(batch, 23)),
            base_timestamp: i64::from_be_bytes(be(batch, 27)),
            max_timestamp: i64::from_be_bytes(be(batch, 35)),
            producer_id: i64::from_be_bytes(be(batch, 43)),
            producer_epoch: i16::from_be_bytes(be(batch, 51)),
            base_sequence: i32::from_be_bytes(be(batch, 53)),
            records_count: i32::from_be_bytes(be(batch, 57)),
        };
        assert_eq!(header.magic, 2, "fixture batch at {position} is not v2");
        position += header.size;
        headers.push(header);
    }
    assert_eq!(position, log.len());
    headers
}

/// Which offset an offset-index entry holds: Kafka's (the batch's last) or the wrong one.
#[derive(Clone, Copy)]
enum IndexedOffset {
    Last,
    Base,
}

fn relative(offset: i64, segment_base: i64) -> [u8; 4] {
    i32::try_from(offset - segment_base).unwrap().to_be_bytes()
}

/// An `.index` file: one 8-byte entry per batch, (relative offset, position), big-endian.
fn offset_index(batches: &[BatchHeader], segment_base: i64, indexed: IndexedOffset) -> Vec<u8> {
    let mut index = Vec::new();
    for batch in batches {
        let offset = match indexed {
            IndexedOffset::Last => batch.last_offset(),
            IndexedOffset::Base => batch.base_offset,
        };
        index.extend_from_slice(&relative(offset, segment_base));
        index.extend_from_slice(&i32::try_from(batch.position).unwrap().to_be_bytes());
    }
    index
}

/// A `.timeindex` file: 12-byte entries (timestamp, relative offset), big-endian, appended when
/// `timestamp_of(batch)` exceeds every earlier one; Kafka's is the batch's max timestamp.
fn time_index(
    batches: &[BatchHeader],
    segment_base: i64,
    timestamp_of: impl Fn(&BatchHeader) -> i64,
) -> Vec<u8> {
    let mut index = Vec::new();
    let mut largest_so_far = i64::MIN;
    for batch in batches {
        let timestamp = timestamp_of(batch);
        if timestamp > largest_so_far {
            largest_so_far = timestamp;
            index.extend_from_slice(&timestamp.to_be_bytes());
            index.extend_from_slice(&relative(batch.last_offset(), segment_base));
        }
    }
    index
}

/// A partition directory holding one fixture segment and the indexes built for it.
struct Segment {
    dir: tempfile::TempDir,
    base_offset: i64,
    log: Vec<u8>,
    batches: Vec<BatchHeader>,
}

impl Segment {
    /// The fixture's `.log` in a fresh directory, with Kafka-correct `.index` and `.timeindex`.
    fn from_fixture((name, base_offset): (&str, i64)) -> Segment {
        let log = std::fs::read(
            Path::new(FIXTURES)
                .join(name)
                .join(file_name(base_offset, "log")),
        )
        .unwrap();
        let batches = batch_headers(&log);
        let segment = Segment {
            dir: tempfile::tempdir().unwrap(),
            base_offset,
            log,
            batches,
        };
        segment.write("log", &segment.log);
        segment.write(
            "index",
            &offset_index(&segment.batches, base_offset, IndexedOffset::Last),
        );
        segment.write(
            "timeindex",
            &time_index(&segment.batches, base_offset, |b| b.max_timestamp),
        );
        segment
    }

    fn path(&self, extension: &str) -> PathBuf {
        self.dir.path().join(file_name(self.base_offset, extension))
    }

    fn write(&self, extension: &str, bytes: &[u8]) {
        std::fs::write(self.path(extension), bytes).unwrap();
    }
}

fn file_name(base_offset: i64, extension: &str) -> String {
    format!("{base_offset:020}.{extension}")
}

/// A record the writer was asked to write (a line of `expected-records.txt`).
#[derive(Debug)]
struct ExpectedRecord {
    offset: i64,
    timestamp_type: String,
    timestamp: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    header_keys: Vec<String>,
    control: bool,
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&text[at..at + 2], 16).unwrap())
        .collect()
}

fn expected_records(name: &str) -> Vec<ExpectedRecord> {
    let text = std::fs::read_to_string(Path::new(FIXTURES).join(name).join("expected-records.txt"))
        .unwrap();
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .map(|line| {
            let fields: Vec<&str> = line.split('\t').collect();
            assert_eq!(fields.len(), 7, "bad expected line {line:?}");
            let bytes = |field: &str| (field != "-").then(|| unhex(field));
            ExpectedRecord {
                offset: fields[0].parse().unwrap(),
                timestamp_type: fields[1].to_owned(),
                timestamp: fields[2].parse().unwrap(),
                key: bytes(fields[3]),
                value: bytes(fields[4]),
                header_keys: fields[5]
                    .split(',')
                    .filter(|key| !key.is_empty())
                    .map(|key| String::from_utf8(unhex(key)).unwrap())
                    .collect(),
                control: fields[6] == "1",
            }
        })
        .collect()
}

fn size_of(bytes: Option<&Vec<u8>>) -> i32 {
    bytes.map_or(-1, |bytes| i32::try_from(bytes.len()).unwrap())
}

/// What DumpLogSegments prints for an end-transaction marker: the key is (version i16, type i16)
/// with type 0 = ABORT and 1 = COMMIT, the value (version i16, coordinator epoch i32).
fn control_text(key: &[u8], value: &[u8]) -> String {
    let marker = match i16::from_be_bytes(be(key, 2)) {
        0 => "ABORT",
        1 => "COMMIT",
        other => panic!("not an end-transaction marker: type {other}"),
    };
    let coordinator_epoch = i32::from_be_bytes(be(value, 2));
    format!("endTxnMarker: {marker} coordinatorEpoch: {coordinator_epoch}")
}

/// The deep dump of a fixture with correct indexes: clean, and its batches and records are
/// exactly the fixture's.
fn assert_deep_dump_matches_fixture(fixture: (&str, i64)) {
    let segment = Segment::from_fixture(fixture);
    let Some(dump) = kafka::dump_deep(segment.dir.path()) else {
        return;
    };
    kafka::assert_clean_deep_dump(&dump);
    let log_file = segment.path("log");

    let batches = kafka::parse_batches(&dump);
    assert_eq!(batches.len(), segment.batches.len(), "{dump:?}");
    for (dumped, header) in batches.iter().zip(&segment.batches) {
        let expected = kafka::DumpedBatch {
            file: log_file.clone(),
            base_offset: header.base_offset,
            last_offset: header.last_offset(),
            count: Some(header.records_count),
            base_sequence: header.base_sequence,
            last_sequence: if header.base_sequence < 0 {
                -1
            } else {
                header.base_sequence + header.last_offset_delta
            },
            producer_id: header.producer_id,
            producer_epoch: header.producer_epoch,
            partition_leader_epoch: header.partition_leader_epoch,
            is_transactional: header.is_transactional(),
            is_control: header.is_control(),
            delete_horizon_ms: None,
            position: i64::try_from(header.position).unwrap(),
            timestamp_type: header.timestamp_type().to_owned(),
            max_timestamp: header.max_timestamp,
            size: i32::try_from(header.size).unwrap(),
            magic: 2,
            compression: header.compression().to_owned(),
            crc: header.crc,
            is_valid: true,
        };
        assert_eq!(dumped, &expected);
    }

    let records = kafka::parse_records(&dump);
    let expected = expected_records(fixture.0);
    assert_eq!(records.len(), expected.len(), "{dump:?}");
    for (dumped, want) in records.iter().zip(&expected) {
        let batch = segment
            .batches
            .iter()
            .find(|b| (b.base_offset..=b.last_offset()).contains(&want.offset))
            .unwrap();
        let context = format!("record at offset {}: {dumped:#?}", want.offset);
        assert_eq!(dumped.file, log_file, "{context}");
        assert_eq!(dumped.batch_base_offset, batch.base_offset, "{context}");
        assert_eq!(dumped.offset, want.offset, "{context}");
        assert_eq!(dumped.timestamp_type, want.timestamp_type, "{context}");
        assert_eq!(dumped.timestamp, want.timestamp, "{context}");
        assert_eq!(dumped.key_size, size_of(want.key.as_ref()), "{context}");
        assert_eq!(dumped.value_size, size_of(want.value.as_ref()), "{context}");
        let sequence = if batch.base_sequence < 0 {
            -1
        } else {
            batch.base_sequence + i32::try_from(want.offset - batch.base_offset).unwrap()
        };
        assert_eq!(dumped.sequence, sequence, "{context}");
        assert_eq!(dumped.header_keys, want.header_keys, "{context}");
        if want.control {
            let marker = control_text(want.key.as_ref().unwrap(), want.value.as_ref().unwrap());
            assert_eq!(
                dumped.control.as_deref(),
                Some(marker.as_str()),
                "{context}"
            );
            assert_eq!((&dumped.key, &dumped.payload), (&None, &None), "{context}");
        } else {
            assert_eq!(dumped.control, None, "{context}");
            assert_eq!(
                dumped.key,
                want.key.as_deref().map(kafka::as_dumped),
                "{context}"
            );
            assert_eq!(
                dumped.payload,
                want.value.as_deref().map(kafka::as_dumped),
                "{context}"
            );
        }
    }

    // DumpLogSegments reports every offset that does not follow its predecessor, starting from -1.
    let mut expected_gaps = Vec::new();
    let mut previous = -1;
    for record in &expected {
        if record.offset != previous + 1 {
            expected_gaps.push((log_file.clone(), previous, record.offset));
        }
        previous = record.offset;
    }
    assert_eq!(kafka::non_consecutive_offsets(&dump), expected_gaps);
}

#[test]
fn deep_dump_of_kafka_python_segment_is_clean_and_matches_what_was_written() {
    assert_deep_dump_matches_fixture(PLAIN);
}

#[test]
fn deep_dump_with_high_offsets_and_gaps_is_clean_and_matches_what_was_written() {
    assert_deep_dump_matches_fixture(GAPS_HIGH_OFFSETS);
}

#[test]
fn kafka_semantics_indexes_pass_the_sanity_check() {
    for fixture in [PLAIN, GAPS_HIGH_OFFSETS] {
        let segment = Segment::from_fixture(fixture);
        let Some(sanity) = kafka::index_sanity(segment.dir.path()) else {
            return;
        };
        assert_eq!(
            sanity.files,
            [segment.path("index"), segment.path("timeindex")]
        );
        kafka::assert_index_sanity_passed(&sanity);
    }
}

#[test]
fn index_holding_base_offsets_is_reported_as_mismatches() {
    let segment = Segment::from_fixture(PLAIN);
    segment.write(
        "index",
        &offset_index(&segment.batches, segment.base_offset, IndexedOffset::Base),
    );
    let Some(dump) = kafka::dump_log_segments(&[segment.path("index")], &[]) else {
        return;
    };
    assert!(dump.status.success(), "{dump:?}");
    // Kafka 4.4.0 prints "Mismatches in :<absolute path>" on stderr, then one line per entry.
    let header = format!("Mismatches in :{}", segment.path("index").display());
    assert!(dump.stderr.lines().any(|line| line == header), "{dump:?}");
    assert!(kafka::bad_lines(&dump).contains(&header));
    // Every batch of more than one record is a mismatch: its entry names its base offset, and
    // the batch at that position ends later.
    let mut expected: Vec<kafka::IndexMismatch> = segment
        .batches
        .iter()
        .filter(|batch| batch.last_offset_delta > 0)
        .map(|batch| kafka::IndexMismatch {
            index_file: segment.path("index"),
            index_offset: batch.base_offset,
            log_offset: batch.last_offset(),
        })
        .collect();
    assert!(expected.len() > 10, "the fixture has multi-record batches");
    let mut reported = kafka::index_mismatches(&dump);
    expected.sort();
    reported.sort();
    assert_eq!(reported, expected);
}

#[test]
fn time_index_holding_first_timestamps_is_reported_as_timestamp_mismatch() {
    let segment = Segment::from_fixture(PLAIN);
    segment.write(
        "timeindex",
        &time_index(&segment.batches, segment.base_offset, |b| b.base_timestamp),
    );
    let Some(dump) = kafka::dump_deep(segment.dir.path()) else {
        return;
    };
    let bad = kafka::bad_lines(&dump);
    let header = format!(
        "Found timestamp mismatch in :{}",
        segment.path("timeindex").display()
    );
    assert!(bad.contains(&header), "{dump:?}");
    let clean = std::panic::catch_unwind(|| kafka::assert_clean_deep_dump(&dump));
    assert!(clean.is_err(), "assert_clean_deep_dump accepted {dump:?}");
}

#[test]
fn flipped_payload_byte_is_reported_as_invalid_batch() {
    let mut segment = Segment::from_fixture(PLAIN);
    // A byte of the first record's value in the first batch (uncompressed), so the records still
    // parse and only the CRC tells.
    let first = segment.batches[0].clone();
    assert_eq!(first.compression(), "none");
    let at = first.position
        + segment.log[first.position..]
            .windows(b"lorem".len())
            .position(|window| window == b"lorem")
            .unwrap();
    segment.log[at] ^= 0x01;
    segment.write("log", &segment.log.clone());
    let Some(dump) = kafka::dump_log_segments(&[segment.path("log")], &["--deep-iteration"]) else {
        return;
    };
    let batches = kafka::parse_batches(&dump);
    assert!(!batches[0].is_valid && batches[1..].iter().all(|b| b.is_valid));
    let bad = kafka::bad_lines(&dump);
    assert_eq!(bad.len(), 1, "{dump:?}");
    assert!(bad[0].starts_with("baseOffset: 0 "), "{dump:?}");
}

#[test]
fn torn_tail_is_reported_as_invalid_bytes() {
    let segment = Segment::from_fixture(PLAIN);
    let mut log = segment.log.clone();
    log.extend_from_slice(&[0; 5]);
    segment.write("log", &log);
    let Some(dump) = kafka::dump_log_segments(&[segment.path("log")], &["--deep-iteration"]) else {
        return;
    };
    let expected = format!(
        "Found 5 invalid bytes at the end of {}",
        file_name(segment.base_offset, "log")
    );
    assert_eq!(kafka::bad_lines(&dump), [expected], "{dump:?}");
}

/// The parsers on hand-written output, for what the fixtures do not hold: a key that contains
/// " payload: ", payloads with newlines, an empty key, a delete horizon, no `--print-data-log`.
#[test]
fn parsers_handle_tricky_output() {
    let stdout = "\
Dumping /p/00000000000000000100.log
Log starting offset: 100
baseOffset: 100 lastOffset: 102 count: 3 baseSequence: 0 lastSequence: 2 producerId: 9 producerEpoch: 1 partitionLeaderEpoch: 4 isTransactional: false isControl: false deleteHorizonMs: OptionalLong[1700000000123] position: 0 LogAppendTime: 1700000000999 size: 200 magic: 2 compresscodec: lz4 crc: 4294967295 isvalid: true
| offset: 100 LogAppendTime: 1700000000999 keySize: 13 valueSize: 11 sequence: 0 headerKeys: [a,b] key: k payload: k2 payload: line1
line2
| offset: 101 LogAppendTime: 1700000000999 keySize: 0 valueSize: 0 sequence: 1 headerKeys: [] key:  payload: 
| offset: 102 LogAppendTime: 1700000000999 keySize: -1 valueSize: 5 sequence: 2 headerKeys: [] payload: ends

Dumping /p/00000000000000000100.index
offset: 2 position: 0
Dumping /p/00000000000000000103.log
Log starting offset: 103
baseOffset: 103 lastOffset: 103 count: 1 baseSequence: -1 lastSequence: -1 producerId: 9 producerEpoch: 1 partitionLeaderEpoch: 4 isTransactional: true isControl: true deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 5 size: 78 magic: 2 compresscodec: none crc: 1 isvalid: false
| offset: 103 CreateTime: 5 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: ABORT coordinatorEpoch: 0
";
    let stderr = "\
Mismatches in :/p/00000000000000000100.index
  Index offset: 2, log offset: 102
Non-consecutive offsets in /p/00000000000000000100.log
  -1 is followed by 100
";
    let output = kafka::Output {
        command: "hand-written".to_owned(),
        files: Vec::new(),
        status: std::process::ExitStatus::default(),
        stdout: stdout.to_owned(),
        stderr: stderr.to_owned(),
    };
    let batches = kafka::parse_batches(&output);
    assert_eq!(batches.len(), 2);
    assert_eq!(batches[0].delete_horizon_ms, Some(1_700_000_000_123));
    assert_eq!(batches[0].crc, u32::MAX);
    assert_eq!(batches[0].timestamp_type, "LogAppendTime");
    assert!(batches[1].is_control && !batches[1].is_valid);

    let records = kafka::parse_records(&output);
    let texts: Vec<_> = records
        .iter()
        .map(|r| (r.offset, r.key.as_deref(), r.payload.as_deref()))
        .collect();
    assert_eq!(
        texts,
        [
            (100, Some("k payload: k2"), Some("line1\nline2")),
            (101, Some(""), Some("")),
            (102, None, Some("ends\n")),
            (103, None, None),
        ]
    );
    assert_eq!(records[0].header_keys, ["a", "b"]);
    assert_eq!(records[0].timestamp, 1_700_000_000_999);
    assert_eq!(records[2].sequence, 2);
    assert_eq!(
        records[3].control.as_deref(),
        Some("endTxnMarker: ABORT coordinatorEpoch: 0")
    );
    assert_eq!(records[3].batch_base_offset, 103);
    assert_eq!(
        records[3].file,
        PathBuf::from("/p/00000000000000000103.log")
    );

    assert_eq!(
        kafka::index_mismatches(&output),
        [kafka::IndexMismatch {
            index_file: PathBuf::from("/p/00000000000000000100.index"),
            index_offset: 2,
            log_offset: 102,
        }]
    );
    assert_eq!(
        kafka::non_consecutive_offsets(&output),
        [(PathBuf::from("/p/00000000000000000100.log"), -1, 100)]
    );
    assert_eq!(
        kafka::bad_lines(&output).len(),
        2,
        "isvalid: false and Mismatches in"
    );
}

// Kafka's producer-state files, written by partlog's codecs and read by DumpLogSegments
// (FORMAT.md §9 and §10).

mod producer_state_files {
    use std::collections::BTreeMap;

    use partlog::unstable::AbortedTxn;
    use partlog::unstable::producer_snapshot::{SnapshotEntry, decode_snapshot, write_snapshot};
    use partlog::{Corruption, Error, Log, LogConfig, NewRecord};

    use super::kafka;
    use super::producer_state_samples::{aborted_txns, os, snapshot_entries, write_txn_index};

    /// `key: value` pairs of a DumpLogSegments line (values hold no spaces here).
    fn fields(line: &str) -> BTreeMap<String, String> {
        let words: Vec<&str> = line.split(' ').collect();
        words
            .chunks(2)
            .map(|pair| {
                let key = pair[0]
                    .strip_suffix(':')
                    .unwrap_or_else(|| panic!("{line}"));
                (key.to_owned(), pair.get(1).unwrap_or(&"").to_string())
            })
            .collect()
    }

    /// What DumpLogSegments must print for `entry`, field by field.
    fn expected_snapshot_fields(entry: &SnapshotEntry) -> BTreeMap<String, String> {
        let txn = if entry.current_txn_first_offset >= 0 {
            format!("OptionalLong[{}]", entry.current_txn_first_offset)
        } else {
            "OptionalLong.empty".to_owned()
        };
        [
            ("producerId", entry.producer_id.to_string()),
            ("producerEpoch", entry.producer_epoch.to_string()),
            ("coordinatorEpoch", entry.coordinator_epoch.to_string()),
            ("currentTxnFirstOffset", txn),
            ("lastTimestamp", entry.timestamp.to_string()),
            ("firstSequence", entry.first_sequence().to_string()),
            ("lastSequence", entry.last_sequence.to_string()),
            ("lastOffset", entry.last_offset.to_string()),
            ("offsetDelta", entry.offset_delta.to_string()),
            ("timestamp", entry.timestamp.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }

    fn expected_txn_fields(txn: &AbortedTxn) -> BTreeMap<String, String> {
        [
            ("version", "0".to_owned()),
            ("producerId", txn.producer_id.to_string()),
            ("firstOffset", txn.first_offset.to_string()),
            ("lastOffset", txn.last_offset.to_string()),
            ("lastStableOffset", txn.last_stable_offset.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }

    fn assert_clean_run(dump: &kafka::Output) {
        assert!(dump.status.success(), "{dump:?}");
        assert_eq!(dump.stderr, "", "{dump:?}");
    }

    #[test]
    fn partlog_snapshot_values_match_kafka_dump_log_segments() {
        let dir = tempfile::tempdir().unwrap();
        let entries = snapshot_entries();
        let path = write_snapshot(&*os(), dir.path(), 42, &entries).unwrap();
        let Some(dump) = kafka::dump_log_segments(&[&path], &[]) else {
            return;
        };
        assert_clean_run(&dump);
        let lines: Vec<&str> = dump.stdout.lines().collect();
        assert_eq!(
            lines[0],
            format!("Dumping {}", dump.files[0].display()),
            "{dump:?}"
        );
        assert_eq!(lines.len(), 1 + entries.len(), "{dump:?}");
        for (line, entry) in lines[1..].iter().zip(&entries) {
            assert_eq!(fields(line), expected_snapshot_fields(entry), "{line}");
        }
    }

    #[test]
    fn empty_partlog_snapshot_is_read_by_kafka_dump_log_segments() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_snapshot(&*os(), dir.path(), 0, &[]).unwrap();
        let Some(dump) = kafka::dump_log_segments(&[&path], &[]) else {
            return;
        };
        assert_clean_run(&dump);
        assert_eq!(dump.stdout.lines().count(), 1, "{dump:?}");
    }

    #[test]
    fn partlog_txnindex_values_match_kafka_dump_log_segments() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_txn_index(dir.path(), 100);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(
            bytes[..34],
            [
                0x00, 0x00, 0, 0, 0, 0, 0, 0, 0x03, 0xe8, 0, 0, 0, 0, 0, 0, 0, 0x64, 0, 0, 0, 0, 0,
                0, 0, 0x6a, 0, 0, 0, 0, 0, 0, 0, 0x64
            ]
        );
        let Some(dump) = kafka::dump_log_segments(&[&path], &[]) else {
            return;
        };
        assert_clean_run(&dump);
        let lines: Vec<&str> = dump.stdout.lines().collect();
        assert_eq!(lines.len(), 1 + aborted_txns().len(), "{dump:?}");
        for (line, txn) in lines[1..].iter().zip(&aborted_txns()) {
            assert_eq!(fields(line), expected_txn_fields(txn), "{line}");
        }
    }

    /// A flipped byte in a snapshot: DumpLogSegments reports the CRC failure on stderr, with
    /// the same stored and computed CRCs as partlog's decoder.
    #[test]
    fn flipped_snapshot_byte_is_reported_by_kafka_dump_log_segments() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_snapshot(&*os(), dir.path(), 42, &snapshot_entries()).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[20] ^= 0x01;
        std::fs::write(&path, &bytes).unwrap();
        let Err(Error::Corrupt {
            what: Corruption::CrcMismatch { stored, computed },
            ..
        }) = decode_snapshot(&path, &bytes)
        else {
            panic!("partlog's decoder accepted a flipped byte");
        };
        let Some(dump) = kafka::dump_log_segments(&[&path], &[]) else {
            return;
        };
        let expected = format!(
            "Snapshot is corrupt (CRC is no longer valid). Stored crc: {stored}. Computed crc: \
             {computed}"
        );
        assert!(dump.stderr.contains(&expected), "{expected}\n{dump:?}");
        assert_eq!(dump.stdout.lines().count(), 1, "no entry printed: {dump:?}");
    }

    /// `--deep-iteration` reads the COMMIT and ABORT control batches `Log::append_marker`
    /// writes as Kafka's end-transaction markers, with their coordinator epochs, and the
    /// transactional batches as transactional.
    #[test]
    fn deep_iteration_prints_partlog_markers_as_end_txn_markers() {
        use partlog::{BatchBuilder, Compression, ControlRecordType};

        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), LogConfig::default()).unwrap();
        for (pid, marker, coordinator_epoch) in [
            (3000, ControlRecordType::Commit, 5),
            (3001, ControlRecordType::Abort, 7),
        ] {
            let mut builder = BatchBuilder::new(Compression::None)
                .producer(pid, 0, 0)
                .transactional(true);
            builder.push(&NewRecord::new(1_700_000_000_000, None, Some(b"v")));
            log.append_batch(&builder.build().unwrap()).unwrap();
            log.append_marker(pid, 0, marker, coordinator_epoch)
                .unwrap();
        }
        log.close().unwrap();
        drop(log);
        let Some(dump) = kafka::dump_deep(dir.path()) else {
            return;
        };
        kafka::assert_clean_deep_dump(&dump);
        let lines: Vec<&str> = dump.stdout.lines().collect();
        for (offset, expected) in [
            (1, "endTxnMarker: COMMIT coordinatorEpoch: 5"),
            (3, "endTxnMarker: ABORT coordinatorEpoch: 7"),
        ] {
            let line = lines
                .iter()
                .find(|line| line.contains(&format!("| offset: {offset} ")))
                .unwrap_or_else(|| panic!("no record at {offset}: {dump:?}"));
            assert!(line.contains(expected), "{line}\n{dump:?}");
        }
        let transactional = lines
            .iter()
            .filter(|line| line.contains("isTransactional: true"))
            .count();
        assert_eq!(transactional, 4, "every batch is transactional: {dump:?}");
    }
}
