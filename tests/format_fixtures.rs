//! Foreign fixtures: `.log` files written by kafka-python, the Rust kafka-protocol crate and
//! librdkafka (tests/fixtures/make_foreign.sh), each with the JSON-lines dump of an independent
//! reader (kafka-python's `DefaultRecordBatch`). partlog decodes every batch and must agree on
//! every field of every batch and record. gzip and snappy batches decode fully with the `gzip`
//! and `snappy` features (`cargo test --all-features`) and are a clear `UnsupportedCompression`
//! without them.

use std::collections::BTreeSet;
use std::path::PathBuf;

use partlog::Error;
use partlog::unstable::format::{
    BatchIter, BatchView, Compression, ControlRecordType, EndTransactionMarker, Record,
    TimestampType, control_record_type, crc32c,
};

const FIXTURES: &[&str] = &[
    "kafka_python",
    "kafka_python_gaps_high_offsets",
    "kafka_protocol",
    "librdkafka",
];

/// What the fixtures as a whole must exercise, so that a regenerated set cannot silently lose
/// coverage.
#[derive(Default, Debug)]
struct Coverage {
    codecs_decoded: BTreeSet<&'static str>,
    codecs_unsupported: BTreeSet<&'static str>,
    null_keys: usize,
    tombstones: usize,
    empty_values: usize,
    null_header_values: usize,
    headers: usize,
    idempotent_batches: usize,
    transactional_batches: usize,
    commit_markers: usize,
    abort_markers: usize,
    log_append_time_batches: usize,
    offsets_above_2_pow_32: usize,
    batches_with_gaps: usize,
    nonzero_leader_epochs: usize,
    records: usize,
}

#[test]
fn foreign_fixtures_decode_to_the_independent_readers_dump() {
    let mut coverage = Coverage::default();
    for name in FIXTURES {
        check_fixture(name, &mut coverage);
    }
    println!("{coverage:#?}");
    for codec in ["none", "lz4", "zstd"] {
        assert!(coverage.codecs_decoded.contains(codec), "no {codec} batch");
    }
    for codec in [Compression::Gzip, Compression::Snappy] {
        let seen = if codec.is_readable() {
            &coverage.codecs_decoded
        } else {
            &coverage.codecs_unsupported
        };
        assert!(seen.contains(codec.name()), "no {codec} batch");
    }
    assert!(
        coverage
            .codecs_unsupported
            .is_disjoint(&coverage.codecs_decoded),
        "{coverage:?}"
    );
    assert!(coverage.null_keys > 0);
    assert!(coverage.tombstones > 0);
    assert!(coverage.empty_values > 0);
    assert!(coverage.headers > 0);
    assert!(coverage.null_header_values > 0);
    assert!(coverage.idempotent_batches > 0);
    assert!(coverage.transactional_batches > 0);
    assert!(coverage.commit_markers >= 3);
    assert!(coverage.abort_markers >= 2);
    assert!(coverage.log_append_time_batches > 0);
    assert!(coverage.offsets_above_2_pow_32 > 0);
    assert!(coverage.batches_with_gaps > 0);
    assert!(coverage.nonzero_leader_epochs > 0);
    assert!(coverage.records > 100);
}

fn fixture_path(name: &str, extension: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/foreign")
        .join(format!("{name}.{extension}"))
}

fn check_fixture(name: &str, coverage: &mut Coverage) {
    let log = std::fs::read(fixture_path(name, "log")).unwrap();
    let dump = std::fs::read_to_string(fixture_path(name, "jsonl")).unwrap();
    let lines: Vec<Json> = dump.lines().map(Json::parse).collect();
    let mut expected = lines.iter().peekable();
    let mut scratch = Vec::new();
    let mut batches = BatchIter::new(&log);
    let mut batch_count = 0;

    for (position, view) in batches.by_ref() {
        let view = view.unwrap_or_else(|err| panic!("{name} @ {position}: {err}"));
        let batch = expected.next().expect("more batches than the dump");
        assert_eq!(batch.str("type"), "batch", "{name} @ {position}");
        let context = format!("{name}, batch at {position}");
        check_batch(&view, position, batch, &context, coverage);

        let mut record_lines = Vec::new();
        while let Some(line) = expected.next_if(|line| line.str("type") == "record") {
            record_lines.push(line);
        }
        match view.records(&mut scratch) {
            Err(Error::UnsupportedCompression { codec }) => {
                let codec_name = batch.str("compression");
                assert!(
                    (codec == 1 && codec_name == "gzip") || (codec == 2 && codec_name == "snappy"),
                    "{context}: unexpected unsupported codec {codec}"
                );
                assert!(
                    !Compression::from_id(codec).unwrap().is_readable(),
                    "{context}: {codec_name} is readable in this build"
                );
                coverage.codecs_unsupported.insert(static_name(codec_name));
            }
            Err(err) => panic!("{context}: {err}"),
            Ok(records) => {
                let records: Vec<Record<'_>> = records
                    .collect::<Result<_, _>>()
                    .unwrap_or_else(|err| panic!("{context}: {err}"));
                assert_eq!(records.len(), record_lines.len(), "{context}: record count");
                for (record, line) in records.iter().zip(&record_lines) {
                    let context = format!("{context}, offset {}", record.offset);
                    check_record(&view, record, line, &context, coverage);
                }
                coverage
                    .codecs_decoded
                    .insert(static_name(batch.str("compression")));
            }
        }
        batch_count += 1;
    }
    assert!(
        batches.remainder().is_empty(),
        "{name}: trailing bytes at {}",
        batches.position()
    );
    assert_eq!(batches.position(), log.len());
    assert!(expected.next().is_none(), "{name}: the dump has more lines");
    assert!(batch_count > 5, "{name}: only {batch_count} batches");
}

fn static_name(codec: &str) -> &'static str {
    codec
        .parse::<Compression>()
        .map(Compression::name)
        .unwrap_or("?")
}

fn check_batch(
    view: &BatchView<'_>,
    position: usize,
    batch: &Json,
    context: &str,
    coverage: &mut Coverage,
) {
    let header = view.header();
    assert_eq!(batch.int("file_position"), position as i64, "{context}");
    assert_eq!(batch.int("base_offset"), header.base_offset, "{context}");
    assert_eq!(
        batch.int("last_offset_delta"),
        i64::from(header.last_offset_delta),
        "{context}"
    );
    assert_eq!(batch.int("last_offset"), header.last_offset(), "{context}");
    assert_eq!(
        batch.int("batch_size"),
        header.total_size() as i64,
        "{context}"
    );
    assert_eq!(view.total_size(), header.total_size(), "{context}");
    assert_eq!(
        batch.int("partition_leader_epoch"),
        i64::from(header.partition_leader_epoch),
        "{context}"
    );
    assert_eq!(batch.int("magic"), i64::from(header.magic), "{context}");
    assert_eq!(batch.int("crc"), i64::from(header.crc), "{context}");
    assert_eq!(
        batch.int("attributes"),
        i64::from(header.attributes),
        "{context}"
    );
    assert_eq!(
        batch.str("compression"),
        Compression::from_id(header.compression_id())
            .unwrap()
            .to_string(),
        "{context}"
    );
    let timestamp_type = match header.timestamp_type() {
        TimestampType::CreateTime => "create",
        TimestampType::LogAppendTime => "log_append",
    };
    assert_eq!(batch.str("timestamp_type"), timestamp_type, "{context}");
    assert_eq!(
        batch.bool("transactional"),
        header.is_transactional(),
        "{context}"
    );
    assert_eq!(batch.bool("control"), header.is_control(), "{context}");
    assert_eq!(
        batch.int("first_timestamp"),
        header.base_timestamp,
        "{context}"
    );
    assert_eq!(
        batch.int("max_timestamp"),
        header.max_timestamp,
        "{context}"
    );
    assert_eq!(batch.int("producer_id"), header.producer_id, "{context}");
    assert_eq!(
        batch.int("producer_epoch"),
        i64::from(header.producer_epoch),
        "{context}"
    );
    assert_eq!(
        batch.int("base_sequence"),
        i64::from(header.base_sequence),
        "{context}"
    );
    assert_eq!(
        batch.int("records_count"),
        i64::from(header.records_count),
        "{context}"
    );
    assert_eq!(header.delete_horizon_ms(), None, "{context}");

    coverage.idempotent_batches += usize::from(header.has_producer_id() && !header.is_control());
    coverage.transactional_batches +=
        usize::from(header.is_transactional() && !header.is_control());
    coverage.log_append_time_batches +=
        usize::from(header.timestamp_type() == TimestampType::LogAppendTime);
    coverage.offsets_above_2_pow_32 += usize::from(header.base_offset > 1 << 32);
    coverage.batches_with_gaps +=
        usize::from(i64::from(header.records_count) < i64::from(header.last_offset_delta) + 1);
    coverage.nonzero_leader_epochs += usize::from(header.partition_leader_epoch > 0);
}

fn check_record(
    view: &BatchView<'_>,
    record: &Record<'_>,
    line: &Json,
    context: &str,
    coverage: &mut Coverage,
) {
    let header = view.header();
    assert_eq!(line.int("offset"), record.offset, "{context}");
    assert_eq!(line.int("timestamp"), record.timestamp, "{context}");
    if header.timestamp_type() == TimestampType::LogAppendTime {
        assert_eq!(record.timestamp, header.max_timestamp, "{context}");
    }
    assert_eq!(
        line.int("batch_base_offset"),
        header.base_offset,
        "{context}"
    );
    assert_eq!(
        line.opt_str("key_hex"),
        record.key.map(to_hex).as_deref(),
        "{context}"
    );
    let key_utf8 = record.key.and_then(|key| std::str::from_utf8(key).ok());
    assert_eq!(line.opt_str("key_utf8"), key_utf8, "{context}");
    assert_eq!(
        line.opt_int("value_len"),
        record.value.map(|value| value.len() as i64),
        "{context}"
    );
    assert_eq!(
        line.opt_int("value_crc32c"),
        record.value.map(|value| i64::from(crc32c(value))),
        "{context}"
    );
    let expected_headers: Vec<(String, Option<String>)> = line
        .array("headers")
        .iter()
        .map(|pair| match pair {
            Json::Array(items) => (
                items[0].as_str().unwrap().to_string(),
                items[1].as_str().map(str::to_string),
            ),
            other => panic!("{context}: header {other:?}"),
        })
        .collect();
    let headers: Vec<(String, Option<String>)> = record
        .headers()
        .map(|header| {
            (
                header.key_str().unwrap().to_string(),
                header.value.map(to_hex),
            )
        })
        .collect();
    assert_eq!(headers, expected_headers, "{context}");
    assert_eq!(record.header_count(), headers.len(), "{context}");

    assert_eq!(
        line.str("compression"),
        Compression::from_id(header.compression_id())
            .unwrap()
            .to_string()
    );
    assert_eq!(line.bool("transactional"), header.is_transactional());
    assert_eq!(line.bool("control"), header.is_control());
    assert_eq!(line.int("producer_id"), header.producer_id);
    assert_eq!(line.int("producer_epoch"), i64::from(header.producer_epoch));
    assert_eq!(line.int("base_sequence"), i64::from(header.base_sequence));

    if header.is_control() {
        let kind = control_record_type(record).unwrap();
        let expected = match line.get("control_type") {
            Some(Json::Str(name)) if name == "commit" => ControlRecordType::Commit,
            Some(Json::Str(name)) if name == "abort" => ControlRecordType::Abort,
            Some(Json::Int(id)) => ControlRecordType::from_id(*id as i16),
            other => panic!("{context}: control_type {other:?}"),
        };
        assert_eq!(kind, expected, "{context}");
        assert_eq!(line.int("control_version"), 0, "{context}");
        let marker = EndTransactionMarker::parse(record).unwrap();
        // The Python and kafka-protocol writers use coordinator epoch 7; librdkafka's mock
        // broker writes its markers itself, with epoch 0.
        let coordinator_epoch = if context.starts_with("librdkafka") {
            0
        } else {
            7
        };
        assert_eq!(marker.coordinator_epoch, coordinator_epoch, "{context}");
        coverage.commit_markers += usize::from(kind == ControlRecordType::Commit);
        coverage.abort_markers += usize::from(kind == ControlRecordType::Abort);
    } else {
        assert!(line.get("control_type").is_none(), "{context}");
    }

    coverage.records += 1;
    coverage.null_keys += usize::from(record.key.is_none());
    coverage.tombstones += usize::from(record.value.is_none());
    coverage.empty_values += usize::from(record.value == Some(&[][..]));
    coverage.headers += record.header_count();
    coverage.null_header_values += record.headers().filter(|h| h.value.is_none()).count();
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Just enough JSON for the dump: one flat object per line, integers, strings with escapes,
/// arrays, booleans and null.
#[derive(Debug, Clone, PartialEq)]
enum Json {
    Null,
    Bool(bool),
    Int(i64),
    Str(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    fn parse(text: &str) -> Json {
        let mut parser = Parser {
            chars: text.chars().collect(),
            pos: 0,
        };
        let value = parser.value();
        parser.skip_whitespace();
        assert_eq!(parser.pos, parser.chars.len(), "trailing text in {text}");
        value
    }

    fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(fields) => fields.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn field(&self, key: &str) -> &Json {
        self.get(key)
            .unwrap_or_else(|| panic!("missing field {key} in {self:?}"))
    }

    fn as_str(&self) -> Option<&str> {
        match self {
            Json::Str(text) => Some(text),
            _ => None,
        }
    }

    fn str(&self, key: &str) -> &str {
        self.field(key)
            .as_str()
            .unwrap_or_else(|| panic!("{key} is not a string"))
    }

    fn opt_str(&self, key: &str) -> Option<&str> {
        match self.field(key) {
            Json::Null => None,
            Json::Str(text) => Some(text),
            other => panic!("{key}: {other:?}"),
        }
    }

    fn int(&self, key: &str) -> i64 {
        match self.field(key) {
            Json::Int(value) => *value,
            other => panic!("{key}: {other:?}"),
        }
    }

    fn opt_int(&self, key: &str) -> Option<i64> {
        match self.field(key) {
            Json::Null => None,
            Json::Int(value) => Some(*value),
            other => panic!("{key}: {other:?}"),
        }
    }

    fn bool(&self, key: &str) -> bool {
        match self.field(key) {
            Json::Bool(value) => *value,
            other => panic!("{key}: {other:?}"),
        }
    }

    fn array(&self, key: &str) -> &[Json] {
        match self.field(key) {
            Json::Array(items) => items,
            other => panic!("{key}: {other:?}"),
        }
    }
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
}

impl Parser {
    fn skip_whitespace(&mut self) {
        while self.chars.get(self.pos).is_some_and(|c| c.is_whitespace()) {
            self.pos += 1;
        }
    }

    fn next(&mut self) -> char {
        let c = self.chars[self.pos];
        self.pos += 1;
        c
    }

    fn expect(&mut self, literal: &str) {
        for expected in literal.chars() {
            assert_eq!(self.next(), expected);
        }
    }

    fn value(&mut self) -> Json {
        self.skip_whitespace();
        match self.chars[self.pos] {
            'n' => {
                self.expect("null");
                Json::Null
            }
            't' => {
                self.expect("true");
                Json::Bool(true)
            }
            'f' => {
                self.expect("false");
                Json::Bool(false)
            }
            '"' => Json::Str(self.string()),
            '[' => {
                self.pos += 1;
                let mut items = Vec::new();
                self.skip_whitespace();
                if self.chars[self.pos] == ']' {
                    self.pos += 1;
                    return Json::Array(items);
                }
                loop {
                    items.push(self.value());
                    self.skip_whitespace();
                    match self.next() {
                        ',' => continue,
                        ']' => return Json::Array(items),
                        other => panic!("unexpected {other:?} in array"),
                    }
                }
            }
            '{' => {
                self.pos += 1;
                let mut fields = Vec::new();
                self.skip_whitespace();
                if self.chars[self.pos] == '}' {
                    self.pos += 1;
                    return Json::Object(fields);
                }
                loop {
                    self.skip_whitespace();
                    let key = self.string();
                    self.skip_whitespace();
                    self.expect(":");
                    fields.push((key, self.value()));
                    self.skip_whitespace();
                    match self.next() {
                        ',' => continue,
                        '}' => return Json::Object(fields),
                        other => panic!("unexpected {other:?} in object"),
                    }
                }
            }
            _ => {
                let start = self.pos;
                while self
                    .chars
                    .get(self.pos)
                    .is_some_and(|c| *c == '-' || c.is_ascii_digit())
                {
                    self.pos += 1;
                }
                let text: String = self.chars[start..self.pos].iter().collect();
                Json::Int(
                    text.parse()
                        .unwrap_or_else(|_| panic!("bad number {text:?}")),
                )
            }
        }
    }

    fn string(&mut self) -> String {
        self.expect("\"");
        let mut out = String::new();
        loop {
            match self.next() {
                '"' => return out,
                '\\' => match self.next() {
                    '"' => out.push('"'),
                    '\\' => out.push('\\'),
                    '/' => out.push('/'),
                    'b' => out.push('\u{8}'),
                    'f' => out.push('\u{c}'),
                    'n' => out.push('\n'),
                    'r' => out.push('\r'),
                    't' => out.push('\t'),
                    'u' => {
                        let high = self.hex4();
                        let code = if (0xD800..0xDC00).contains(&high) {
                            self.expect("\\u");
                            let low = self.hex4();
                            0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
                        } else {
                            high
                        };
                        out.push(char::from_u32(code).expect("valid code point"));
                    }
                    other => panic!("bad escape \\{other}"),
                },
                c => out.push(c),
            }
        }
    }

    fn hex4(&mut self) -> u32 {
        (0..4).fold(0, |acc, _| {
            acc * 16 + self.next().to_digit(16).expect("hex digit")
        })
    }
}

#[test]
fn the_json_reader_handles_what_the_dump_writes() {
    let line = r#"{"a":-12,"b":null,"c":"x\u00e9\"\\y","d":[["k",null],[]],"e":true,"f":"biné"}"#;
    let json = Json::parse(line);
    assert_eq!(json.int("a"), -12);
    assert_eq!(json.opt_str("b"), None);
    assert_eq!(json.str("c"), "xé\"\\y");
    assert_eq!(json.array("d").len(), 2);
    assert!(json.bool("e"));
    assert_eq!(json.str("f"), "biné");
}
