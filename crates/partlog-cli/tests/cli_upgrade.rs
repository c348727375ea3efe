//! `partlog upgrade SRC DST`: every legacy fixture (magic
//! 0 and 1, kafka-python's legacy builder), every foreign v2 fixture (gzip and snappy among the
//! codecs) and the broker's own directory are upgraded, and the destination is read back record
//! for record against the source, both read through partlog's `Batch`; the shared validators'
//! `check.sh` and Kafka 4.4's DumpLogSegments accept every destination `.log`; `partlog verify`
//! passes on the destination and on a legacy source; the destination opens cleanly.
//!
//! The tool reads gzip and snappy (its partlog dependency has both features), which the fixtures
//! (the root's `tests/fixtures`) need. Under `CI=true`, a missing validator kit or Java fails the
//! test; elsewhere that part is skipped with a `skipping:` line.

#[path = "../../../tests/common/kafka.rs"]
mod kafka;
#[path = "../../../tests/common/validators.rs"]
mod validators;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use partlog::unstable::{SegmentFileKind, parse_segment_file_name};
use partlog::{
    Batch, BatchHeader, CleanupPolicy, Compression, Log, LogConfig, ReadBound, TimestampType,
};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

fn partlog() -> Command {
    Command::new(env!("CARGO_BIN_EXE_partlog"))
}

fn run(command: &mut Command) -> Output {
    let output = command.output().expect("run partlog");
    assert!(
        output.status.success(),
        "{command:?} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Runs `partlog upgrade SRC DST [extra...]`, which must succeed; returns its stdout.
fn upgrade(src: &Path, dst: &Path, extra: &[&str]) -> String {
    let output = run(partlog().arg("upgrade").arg(src).arg(dst).args(extra));
    String::from_utf8(output.stdout).unwrap()
}

/// A record as partlog reads it, with what its batch says about it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rec {
    offset: i64,
    timestamp: i64,
    timestamp_type: TimestampType,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    control: bool,
}

/// A batch as partlog reads it.
#[derive(Debug, Clone)]
struct SeenBatch {
    bytes: Vec<u8>,
    magic: i8,
    codec: u8,
    last_offset: i64,
    max_timestamp: i64,
    timestamp_type: TimestampType,
    /// The v2 header; `None` for a legacy message.
    header: Option<BatchHeader>,
    records: Vec<Rec>,
}

/// What a read-only open of a directory serves.
#[derive(Debug)]
struct SeenLog {
    log_start: i64,
    log_end: i64,
    batches: Vec<SeenBatch>,
}

impl SeenLog {
    fn records(&self) -> Vec<Rec> {
        self.batches
            .iter()
            .flat_map(|b| b.records.iter().cloned())
            .collect()
    }
}

/// Gaps between segments are legal in a compacted log: read like the upgrade reads.
fn read_config() -> LogConfig {
    LogConfig::builder()
        .cleanup_policy(CleanupPolicy::COMPACT)
        .build()
        .unwrap()
}

/// Every batch and record of `dir`, through `Log::open_read_only` and `Batch`.
fn read_log(dir: &Path) -> SeenLog {
    let log = Log::open_read_only(dir, read_config()).unwrap();
    let (log_start, log_end) = (log.log_start_offset(), log.log_end_offset());
    let mut batches = Vec::new();
    let mut scratch = Vec::new();
    let mut offset = log_start;
    loop {
        let fetch = log.read(offset, 1 << 20, ReadBound::LogEnd).unwrap();
        if fetch.is_empty() {
            break;
        }
        for batch in fetch.batches() {
            let batch: Batch<'_> = batch.unwrap();
            let timestamp_type = batch.timestamp_type();
            let control = batch.is_control();
            let records = batch
                .records(&mut scratch)
                .unwrap()
                .map(|record| {
                    let record = record.unwrap();
                    Rec {
                        offset: record.offset,
                        timestamp: record.timestamp,
                        timestamp_type,
                        key: record.key.map(<[u8]>::to_vec),
                        value: record.value.map(<[u8]>::to_vec),
                        headers: record
                            .headers()
                            .map(|h| (h.key.to_vec(), h.value.map(<[u8]>::to_vec)))
                            .collect(),
                        control,
                    }
                })
                .collect();
            batches.push(SeenBatch {
                bytes: batch.as_bytes().to_vec(),
                magic: batch.magic(),
                codec: batch.compression_id(),
                last_offset: batch.last_offset(),
                max_timestamp: batch.max_timestamp(),
                timestamp_type,
                header: batch.header().copied(),
                records,
            });
        }
        offset = fetch.next_offset();
    }
    SeenLog {
        log_start,
        log_end,
        batches,
    }
}

/// The base offsets of the `.log` files in `dir`, in order.
fn segment_bases(dir: &Path) -> Vec<i64> {
    let mut bases: Vec<i64> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|entry| {
            let name = entry.unwrap().file_name().into_string().unwrap();
            parse_segment_file_name(&name)
                .filter(|p| p.kind == SegmentFileKind::Log && p.transient.is_none())
                .map(|p| p.base_offset)
        })
        .collect();
    bases.sort_unstable();
    bases
}

/// The codec `upgrade` gives a rewritten batch by default.
fn default_codec(source: u8) -> u8 {
    match source {
        1 => Compression::Zstd.id(),
        2 => Compression::Lz4.id(),
        other => other,
    }
}

/// A v2 header with the fields a recompression may change set to zero.
fn kept_fields(header: &BatchHeader) -> BatchHeader {
    BatchHeader {
        batch_length: 0,
        crc: 0,
        attributes: header.attributes & !0x07,
        ..*header
    }
}

/// Checks that `dst` holds exactly what `src` held, in v2 batches partlog writes, with
/// `codec_of` mapping a rewritten batch's source codec to the codec it must have now.
fn assert_upgraded(src: &Path, dst: &Path, codec_of: impl Fn(u8) -> u8) -> SeenLog {
    let before = read_log(src);
    let after = read_log(dst);
    assert_eq!(
        (after.log_start, after.log_end),
        (before.log_start, before.log_end)
    );
    assert!(!before.records().is_empty());
    assert_eq!(after.records(), before.records(), "{}", src.display());
    assert_eq!(segment_bases(dst), segment_bases(src));
    for batch in &after.batches {
        assert_eq!(batch.magic, 2);
        assert!(
            Compression::from_id(batch.codec).unwrap().is_supported(),
            "{batch:?}"
        );
    }
    let by_last: BTreeMap<i64, &SeenBatch> =
        after.batches.iter().map(|b| (b.last_offset, b)).collect();
    for batch in &before.batches {
        match batch.header {
            Some(header) => {
                // Every v2 batch keeps its place and its header; only what partlog cannot
                // write is recompressed.
                let upgraded = by_last[&batch.last_offset];
                let new_header = upgraded.header.unwrap();
                assert_eq!(kept_fields(&new_header), kept_fields(&header));
                if Compression::from_id(batch.codec).unwrap().is_supported() {
                    assert_eq!(upgraded.bytes, batch.bytes, "copied byte for byte");
                } else {
                    assert_eq!(upgraded.codec, codec_of(batch.codec), "{new_header:?}");
                }
                assert_eq!(upgraded.records, batch.records);
            }
            None if batch.codec != 0 => {
                // A compressed wrapper: one batch ending at its offset, of its records.
                let upgraded = by_last[&batch.last_offset];
                assert_eq!(upgraded.records, batch.records);
                assert_eq!(upgraded.codec, codec_of(batch.codec));
                assert_eq!(upgraded.timestamp_type, batch.timestamp_type);
                if batch.timestamp_type == TimestampType::LogAppendTime {
                    assert_eq!(upgraded.max_timestamp, batch.max_timestamp);
                }
            }
            None => {}
        }
    }
    after
}

/// A partition directory in `parent/name` holding `segments` (base offset, fixture file).
fn partition(parent: &Path, name: &str, segments: &[(i64, &str)]) -> PathBuf {
    let dir = parent.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    for (base, file) in segments {
        std::fs::copy(fixtures().join(file), dir.join(format!("{base:020}.log"))).unwrap();
    }
    dir
}

/// `partlog verify DIR` exits 0 and says the log is ok.
/// Every upgraded `.log` keeps its source's mtime (time retention counts age from it).
fn assert_same_log_mtimes(src: &Path, dst: &Path) {
    for entry in std::fs::read_dir(dst).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "log") {
            continue;
        }
        let source = src.join(path.file_name().unwrap());
        // Milliseconds: the storage seam's unit, as Kafka's.
        let mtime_ms = |p: &Path| {
            let modified = std::fs::metadata(p).unwrap().modified().unwrap();
            modified
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis()
        };
        assert_eq!(mtime_ms(&path), mtime_ms(&source), "{}", path.display());
    }
}

fn assert_verifies(dir: &Path, extra: &[&str]) {
    let output = run(partlog().arg("verify").arg(dir).args(extra));
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(stdout.contains("\nresult: ok"), "{stdout}");
    assert!(!stdout.contains("CORRUPT"), "{stdout}");
}

const LEGACY_CASES: &[(&str, &[(i64, &str)])] = &[
    ("v0", &[(0, "legacy/v0.log")]),
    // Its first message is at offset 25: the segment starts with a gap, as after compaction.
    ("v1", &[(0, "legacy/v1.log")]),
    (
        "v1_high_offsets",
        &[(5_000_000_000, "legacy/v1_high_offsets.log")],
    ),
    // A log upgraded in place from Kafka 0.9 to 0.10: two segments.
    ("v0_then_v1", &[(0, "legacy/v0.log"), (25, "legacy/v1.log")]),
    // A gap between segments, as compaction leaves it.
    (
        "v0_then_gap",
        &[
            (0, "legacy/v0.log"),
            (5_000_000_000, "legacy/v1_high_offsets.log"),
        ],
    ),
];

/// A gap between segments is legal only in a compacted log: these cases are verified with
/// `--cleanup-policy compact` (and, as a check that the flag matters, fail without it).
const GAP_BETWEEN_SEGMENTS: &[&str] = &["v0_then_gap"];

/// The `verify` flags for a case.
fn verify_flags(name: &str) -> &'static [&'static str] {
    if GAP_BETWEEN_SEGMENTS.contains(&name) {
        &["--cleanup-policy", "compact"]
    } else {
        &[]
    }
}

const FOREIGN_CASES: &[(&str, &[(i64, &str)])] = &[
    ("kafka_python", &[(0, "foreign/kafka_python.log")]),
    (
        "kafka_python_gaps_high_offsets",
        &[(5_000_000_000, "foreign/kafka_python_gaps_high_offsets.log")],
    ),
    ("kafka_protocol", &[(0, "foreign/kafka_protocol.log")]),
    ("librdkafka", &[(0, "foreign/librdkafka.log")]),
];

#[test]
fn every_fixture_upgrades_to_what_partlog_kafka_and_the_validators_read() {
    let temp = tempfile::tempdir().unwrap();
    let mut upgraded: Vec<(PathBuf, Vec<Rec>)> = Vec::new();
    for (legacy, cases) in [(true, LEGACY_CASES), (false, FOREIGN_CASES)] {
        for (name, segments) in cases {
            let src = partition(&temp.path().join("src"), name, segments);
            let dst = temp.path().join("dst").join(name);
            let stdout = upgrade(&src, &dst, &[]);
            assert!(stdout.contains("result: ok"), "{stdout}");
            let after = assert_upgraded(&src, &dst, default_codec);
            if legacy {
                assert!(
                    read_log(&src).batches.iter().all(|b| b.magic < 2),
                    "{name} is a legacy fixture"
                );
                assert_verifies(&src, verify_flags(name));
            } else {
                assert!(
                    read_log(&src)
                        .batches
                        .iter()
                        .any(|b| b.codec == 1 || b.codec == 2),
                    "{name} holds gzip or snappy"
                );
            }
            assert_verifies(&dst, verify_flags(name));
            assert_same_log_mtimes(&src, &dst);
            if GAP_BETWEEN_SEGMENTS.contains(name) {
                // DST closed cleanly, so without the flag its gap cannot be a lost tail.
                let strict = partlog().arg("verify").arg(&dst).output().unwrap();
                assert_eq!(
                    strict.status.code(),
                    Some(1),
                    "{name}: a gap is corruption uncompacted"
                );
            }
            upgraded.push((dst, after.records()));
        }
    }
    let logs: Vec<PathBuf> = upgraded
        .iter()
        .flat_map(|(dir, _)| {
            segment_bases(dir)
                .into_iter()
                .map(|base| dir.join(format!("{base:020}.log")))
        })
        .collect();
    validators::check(&logs);

    // The broker's own directory: Kafka's files travel with it. Its batches are copied byte
    // for byte, repeated header keys included, which kp-dump collapses (a known limit of the
    // validator kit), so check.sh is not asked about them: Kafka is.
    let src = fixtures().join("broker/partlog-fixture-0");
    let dst = temp.path().join("dst/broker-0");
    upgrade(&src, &dst, &[]);
    let after = assert_upgraded(&src, &dst, default_codec);
    assert!(after.records().iter().any(|r| r.control));
    assert_verifies(&dst, &[]);
    upgraded.push((dst, after.records()));
    kafka_check(&upgraded);

    // Last, since it writes: each destination opens without a scan, where it ended.
    for (dir, records) in &upgraded {
        let log = Log::open(dir, read_config()).unwrap();
        assert!(log.recovery_report().clean_shutdown, "{}", dir.display());
        assert_eq!(log.recovery_report().segments_scanned, 0);
        assert!(log.log_end_offset() > records.last().unwrap().offset);
        log.close().unwrap();
    }
}

/// Kafka 4.4's DumpLogSegments, in one JVM over every destination: a clean deep dump whose
/// records are the upgraded ones, offset gaps reported exactly where they are.
fn kafka_check(upgraded: &[(PathBuf, Vec<Rec>)]) {
    let files: Vec<PathBuf> = upgraded
        .iter()
        .flat_map(|(dir, _)| kafka::segment_files(dir, &["log", "index", "timeindex"]))
        .collect();
    let Some(deep) = kafka::dump_log_segments(&files, &["--deep-iteration", "--print-data-log"])
    else {
        return;
    };
    kafka::assert_clean_deep_dump(&deep);
    let mut dumped: BTreeMap<PathBuf, Vec<kafka::DumpedRecord>> = BTreeMap::new();
    for record in kafka::parse_records(&deep) {
        let dir = record.file.parent().unwrap().to_path_buf();
        dumped.entry(dir).or_default().push(record);
    }
    let mut expected_gaps = BTreeSet::new();
    for (dir, records) in upgraded {
        let dir = std::path::absolute(dir).unwrap();
        let got = dumped.remove(&dir).unwrap_or_default();
        assert_eq!(got.len(), records.len(), "{}", dir.display());
        for (got, want) in got.iter().zip(records) {
            let context = format!("{} offset {}", dir.display(), want.offset);
            assert_eq!(got.offset, want.offset, "{context}");
            assert_eq!(got.timestamp, want.timestamp, "{context}");
            let kind = match want.timestamp_type {
                TimestampType::CreateTime => "CreateTime",
                TimestampType::LogAppendTime => "LogAppendTime",
            };
            assert_eq!(got.timestamp_type, kind, "{context}");
            if want.control {
                assert!(got.control.is_some(), "{context}");
                continue;
            }
            assert_eq!(
                got.key,
                want.key.as_deref().map(kafka::as_dumped),
                "{context}"
            );
            assert_eq!(
                got.payload,
                want.value.as_deref().map(kafka::as_dumped),
                "{context}"
            );
            // Kafka prints the keys comma-separated, so one empty key prints as none: compare
            // the printed lists.
            let header_keys: Vec<String> = want
                .headers
                .iter()
                .map(|(key, _)| kafka::as_dumped(key))
                .collect();
            assert_eq!(
                got.header_keys.join(","),
                header_keys.join(","),
                "{context}"
            );
        }
        // DumpLogSegments compares each record's offset with the one before it in its file,
        // starting from -1.
        let mut previous: BTreeMap<PathBuf, i64> = BTreeMap::new();
        for (record, dumped) in records.iter().zip(&got) {
            let last = previous.entry(dumped.file.clone()).or_insert(-1);
            if record.offset != *last + 1 {
                expected_gaps.insert((dumped.file.clone(), *last, record.offset));
            }
            *last = record.offset;
        }
    }
    assert!(dumped.is_empty(), "records of unknown files: {dumped:?}");
    let gaps: BTreeSet<_> = kafka::non_consecutive_offsets(&deep).into_iter().collect();
    assert_eq!(gaps, expected_gaps);
}

#[test]
fn uncompressed_legacy_messages_are_grouped_and_append_times_kept() {
    let temp = tempfile::tempdir().unwrap();
    let src = partition(temp.path(), "src", &[(25, "legacy/v1.log")]);
    let dst = temp.path().join("dst");
    upgrade(&src, &dst, &[]);
    let after = assert_upgraded(&src, &dst, default_codec);
    let shape: Vec<(i64, i64, usize, TimestampType, i64, u8)> = after
        .batches
        .iter()
        .map(|b| {
            let header = b.header.unwrap();
            (
                header.base_offset,
                b.last_offset,
                b.records.len(),
                b.timestamp_type,
                b.max_timestamp,
                b.codec,
            )
        })
        .collect();
    let create = TimestampType::CreateTime;
    let append = TimestampType::LogAppendTime;
    let (none, lz4, zstd) = (0, 3, 4);
    assert_eq!(
        shape,
        [
            // Three uncompressed CreateTime messages: one batch, whose max is the largest.
            (25, 27, 3, create, 1_500_000_000_005, none),
            // A LogAppendTime message cannot join them; it keeps its append time.
            (28, 28, 1, append, 1_500_000_000_900, none),
            // gzip, snappy and lz4 wrappers, then the same under LogAppendTime.
            (29, 32, 4, create, 1_500_000_000_019, zstd),
            (33, 35, 3, create, 1_500_000_000_030, lz4),
            (36, 38, 3, create, 1_500_000_000_042, lz4),
            (39, 41, 3, append, 1_500_000_001_000, zstd),
            (42, 43, 2, append, 1_500_000_001_001, lz4),
            (44, 46, 3, append, 1_500_000_001_002, lz4),
            // A wrapper with compaction gaps (47, 49, 52) keeps them.
            (47, 52, 3, create, 1_500_000_000_084, zstd),
            (53, 54, 2, create, 1_500_000_000_091, lz4),
            (55, 57, 3, create, 1_500_000_000_097, lz4),
            (58, 58, 1, create, 1_500_000_000_099, zstd),
            // After a wrapper, the next uncompressed message starts a batch of its own.
            (59, 59, 1, create, 1_500_000_000_100, none),
        ]
    );
    let gapped: Vec<i64> = after.batches[8].records.iter().map(|r| r.offset).collect();
    assert_eq!(gapped, [47, 49, 52]);
}

#[test]
fn compression_applies_to_rewritten_batches_only() {
    let temp = tempfile::tempdir().unwrap();
    let src = partition(temp.path(), "src", &[(0, "foreign/kafka_python.log")]);
    for (flag, codec) in [
        ("none", Compression::None),
        ("lz4", Compression::Lz4),
        ("zstd", Compression::Zstd),
    ] {
        let dst = temp.path().join(flag);
        upgrade(&src, &dst, &["--compression", flag]);
        // gzip and snappy batches get the codec asked for; the others stay byte for byte.
        assert_upgraded(&src, &dst, |_| codec.id());
    }
    let legacy = partition(temp.path(), "legacy", &[(0, "legacy/v0.log")]);
    let dst = temp.path().join("legacy-zstd");
    upgrade(&legacy, &dst, &["--compression", "zstd"]);
    let after = assert_upgraded(&legacy, &dst, |_| Compression::Zstd.id());
    assert!(
        after
            .batches
            .iter()
            .all(|b| b.codec == Compression::Zstd.id())
    );

    let output = partlog()
        .args(["upgrade", "--compression", "gzip"])
        .arg(&legacy)
        .arg(temp.path().join("gzip"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(!temp.path().join("gzip").exists());
}

#[test]
fn kafkas_files_are_copied_and_the_segment_bytes_kept_when_nothing_needs_rewriting() {
    let temp = tempfile::tempdir().unwrap();
    let src = fixtures().join("broker/partlog-fixture-0");
    let dst = temp.path().join("partlog-fixture-0");
    let stdout = upgrade(&src, &dst, &[]);
    for name in [
        "00000000000000000000.log",
        "00000000000000000000.txnindex",
        "00000000000000000018.snapshot",
        "leader-epoch-checkpoint",
        "partition.metadata",
    ] {
        assert_eq!(
            std::fs::read(dst.join(name)).unwrap(),
            std::fs::read(src.join(name)).unwrap(),
            "{name}"
        );
    }
    assert!(
        stdout.contains(
            "copied: 00000000000000000018.snapshot leader-epoch-checkpoint partition.metadata"
        ),
        "{stdout}"
    );
    // A partition directory has no partlog checkpoint: its open recovers every segment, so the
    // .txnindex is written from that recovery's replay, byte for byte the broker's.
    assert!(
        stdout.contains(
            "rebuilt from the log (the source was not closed cleanly): \
             00000000000000000000.txnindex"
        ),
        "{stdout}"
    );
    assert!(!stdout.contains("not copied"), "{stdout}");
}

#[test]
fn leftovers_and_unknown_files_are_named_and_not_copied() {
    let temp = tempfile::tempdir().unwrap();
    let src = partition(temp.path(), "src", &[(0, "legacy/v0.log")]);
    std::fs::write(src.join("00000000000000000000.log.deleted"), b"old").unwrap();
    std::fs::write(src.join("notes.txt"), b"mine").unwrap();
    let dst = temp.path().join("dst");
    let stdout = upgrade(&src, &dst, &[]);
    assert!(
        stdout.contains("not copied: 00000000000000000000.log.deleted notes.txt"),
        "{stdout}"
    );
    let mut names: Vec<String> = std::fs::read_dir(&dst)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "00000000000000000000.index",
            "00000000000000000000.log",
            "00000000000000000000.timeindex",
            "partlog.checkpoint",
            "partlog.lock",
        ]
    );
}

/// Runs `partlog upgrade` expecting exit status 2 and one line on stderr; returns that line.
fn upgrade_fails(src: &Path, dst: &Path) -> String {
    let output = partlog().arg("upgrade").arg(src).arg(dst).output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(output.stdout.is_empty(), "{output:?}");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("partlog: "), "{stderr}");
    stderr
}

#[test]
fn bad_arguments_are_one_line_and_exit_2_with_nothing_written() {
    let temp = tempfile::tempdir().unwrap();
    let src = partition(temp.path(), "src", &[(0, "legacy/v0.log")]);

    let dst = temp.path().join("full");
    std::fs::create_dir(&dst).unwrap();
    std::fs::write(dst.join("keep.me"), b"x").unwrap();
    let line = upgrade_fails(&src, &dst);
    assert!(line.contains("is not empty (it holds keep.me)"), "{line}");
    assert_eq!(std::fs::read_dir(&dst).unwrap().count(), 1);

    let missing = temp.path().join("no-such-src");
    let line = upgrade_fails(&missing, &temp.path().join("dst1"));
    assert_eq!(
        line.trim_end(),
        format!("partlog: no such directory: {}", missing.display())
    );
    assert!(!temp.path().join("dst1").exists());

    let file = temp.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let line = upgrade_fails(&src, &file);
    assert!(line.contains("exists and is not a directory"), "{line}");

    let empty = temp.path().join("empty-src");
    std::fs::create_dir(&empty).unwrap();
    let line = upgrade_fails(&empty, &temp.path().join("dst2"));
    assert!(line.contains("holds no log segments"), "{line}");
    assert!(!temp.path().join("dst2").exists());

    // An empty destination is fine.
    let empty_dst = temp.path().join("empty-dst");
    std::fs::create_dir(&empty_dst).unwrap();
    upgrade(&src, &empty_dst, &[]);
    assert_verifies(&empty_dst, &[]);
}

#[test]
fn inside_a_kafka_log_dir_the_clean_shutdown_marker_is_set_aside_and_put_back() {
    let temp = tempfile::tempdir().unwrap();
    let src = partition(temp.path(), "src", &[(0, "legacy/v0.log")]);
    let log_dir = temp.path().join("kafka-logs");
    std::fs::create_dir(&log_dir).unwrap();
    std::fs::write(log_dir.join("meta.properties"), b"version=1\n").unwrap();
    std::fs::write(log_dir.join(".kafka_cleanshutdown"), b"{}").unwrap();
    let dst = log_dir.join("orders-0");
    upgrade(&src, &dst, &[]);
    assert_eq!(
        std::fs::read(log_dir.join(".kafka_cleanshutdown")).unwrap(),
        b"{}"
    );
    assert!(!log_dir.join(".kafka_cleanshutdown.partlog").exists());
    assert!(log_dir.join(".lock").exists());
    assert_upgraded(&src, &dst, default_codec);
}
