//! Round trip through the `partlog` tool:
//! `partlog produce` then `partlog dump --json` gives back 100,000 lines exactly, with each codec;
//! the shared validators' `check.sh` and Kafka's own DumpLogSegments accept every file; the
//! human dump's positions are the files' real byte positions; `partlog verify` passes; and the
//! directory reopens, cleanly, with the same end offset.
//!
//! The JSON is read back by a small parser written here (the crate has no JSON dependency), so
//! that the test checks the tool's escaping instead of repeating it.
//!
//! Under `CI=true`, a missing validator kit, Python package or Java fails the test; elsewhere it
//! skips that part with a `skipping:` line.

#[path = "../../../tests/common/kafka.rs"]
mod kafka;
#[path = "../../../tests/common/validators.rs"]
mod validators;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use partlog::{Log, LogConfig};

const LINES: usize = 100_000;
const BATCH: usize = 100;
/// Small segments (a test-only size), so that every codec makes several and rolls are crossed.
const SEGMENT_BYTES: u32 = 256 * 1024;

fn partlog() -> Command {
    Command::new(env!("CARGO_BIN_EXE_partlog"))
}

fn run(command: &mut Command) -> Output {
    let output = command.output().expect("run partlog");
    assert!(
        output.status.success(),
        "{command:?} failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// The input: a mix of keyed and unkeyed lines, empty keys and values, a second separator in
/// the value, non-ASCII text, JSON's special characters, a control character, and now and then
/// bytes that are not UTF-8.
fn input_lines() -> Vec<Vec<u8>> {
    (0..LINES)
        .map(|i| match i % 10 {
            0 => format!("key{}=value number {i}", i % 97).into_bytes(),
            1 => Vec::new(),
            2 => format!("k=v=w {i}").into_bytes(),
            3 => format!("={i}").into_bytes(),
            4 => format!("{i}=").into_bytes(),
            5 => format!("ünïcödé ✓ line {i}").into_bytes(),
            6 => format!("quote \" backslash \\ tab \t ctrl \x01 / {i}").into_bytes(),
            7 if i % 1000 == 7 => {
                let mut line = b"raw \xff\xfe bytes ".to_vec();
                line.extend_from_slice(i.to_string().as_bytes());
                line
            }
            _ => format!("plain line {i} without a separator").into_bytes(),
        })
        .collect()
}

/// What `--key-separator =` makes of a line: split at the first '=', else a null key.
fn expected(line: &[u8]) -> (Option<Vec<u8>>, Vec<u8>) {
    match line.iter().position(|&b| b == b'=') {
        Some(at) => (Some(line[..at].to_vec()), line[at + 1..].to_vec()),
        None => (None, line.to_vec()),
    }
}

fn now_ms() -> i64 {
    i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

fn round_trip(codec: &str) {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("topic-0");
    let lines = input_lines();
    let input_path = temp.path().join("input.txt");
    std::fs::write(&input_path, lines.join(&b'\n')).unwrap();

    let before = now_ms();
    let produced = run(partlog()
        .arg("produce")
        .arg(&dir)
        .args(["--key-separator", "=", "--compression", codec])
        .args(["--batch", &BATCH.to_string()])
        .args([
            "--segment-bytes",
            &SEGMENT_BYTES.to_string(),
            "--allow-small-segments",
        ])
        .stdin(std::fs::File::open(&input_path).unwrap())
        .stdout(Stdio::piped()));
    let after = now_ms();
    assert!(
        produced.stdout.is_empty(),
        "produce printed without --print-offsets"
    );

    check_json_dump(&dir, &lines, before, after);
    let logs = kafka::segment_files(&dir, &["log"]);
    assert!(logs.len() >= 3, "{codec}: only {} segments", logs.len());
    check_human_dump(&dir, codec, &logs);
    check_from(&dir, &lines);

    let verified = run(partlog().arg("verify").arg(&dir));
    let verify_text = String::from_utf8(verified.stdout).unwrap();
    assert!(
        verify_text.contains(&format!("result: ok: offsets [0, {LINES})")),
        "{verify_text}"
    );

    validators::check(&logs);
    kafka_check(&dir, &lines);

    // Last, since opening for writing rewrites the checkpoint.
    let log = Log::open(&dir, LogConfig::default()).unwrap();
    assert!(
        log.recovery_report().clean_shutdown,
        "{codec}: produce did not close cleanly"
    );
    assert_eq!(log.log_end_offset(), LINES as i64);
    log.close().unwrap();
}

#[test]
fn round_trip_uncompressed() {
    round_trip("none");
}

#[test]
fn round_trip_lz4() {
    round_trip("lz4");
}

#[test]
fn round_trip_zstd() {
    round_trip("zstd");
}

/// `dump --json`: one object per line of input, in order, with offset, key, value, no headers,
/// and a timestamp taken while `produce` ran.
fn check_json_dump(dir: &Path, lines: &[Vec<u8>], before: i64, after: i64) {
    let dumped = run(partlog().arg("dump").arg(dir).arg("--json"));
    let text = String::from_utf8(dumped.stdout).expect("the JSON dump is UTF-8");
    let objects: Vec<&str> = text.lines().collect();
    assert_eq!(objects.len(), lines.len(), "records dumped");
    for (i, (object, line)) in objects.iter().zip(lines).enumerate() {
        let json = Json::parse(object);
        let (key, value) = expected(line);
        assert_eq!(json.get("offset").number(), i as i64, "{object}");
        let timestamp = json.get("timestamp").number();
        assert!(
            (before..=after).contains(&timestamp),
            "timestamp {timestamp} outside [{before}, {after}]: {object}"
        );
        assert_eq!(json.get("key").bytes(), key, "line {i}: {object}");
        assert_eq!(json.get("value").bytes(), Some(value), "line {i}: {object}");
        assert_eq!(json.get("headers"), &Json::Array(Vec::new()), "{object}");
    }
}

/// The human dump: one batch line per batch of `BATCH` records with the codec, one record line
/// per record, and batch positions that are the real byte positions: they start at 0 in each
/// file, each is the previous one plus its size, and the last batch ends at the file's end.
fn check_human_dump(dir: &Path, codec: &str, logs: &[PathBuf]) {
    let dumped = run(partlog().arg("dump").arg(dir).arg("--records"));
    let text = String::from_utf8(dumped.stdout).unwrap();
    let mut files = Vec::new();
    let mut next_position = 0u64;
    let mut batches = 0usize;
    let mut records = 0usize;
    for line in text.lines() {
        if let Some(file) = line.strip_prefix("Dumping ") {
            if let Some(previous) = files.last() {
                assert_eq!(std::fs::metadata(previous).unwrap().len(), next_position);
            }
            files.push(PathBuf::from(file));
            next_position = 0;
        } else if line.starts_with("baseOffset: ") {
            let fields: Vec<&str> = line.split(' ').collect();
            let field = |name: &str| -> &str {
                let at = fields.iter().position(|f| *f == name).unwrap();
                fields[at + 1]
            };
            assert_eq!(field("count:"), BATCH.to_string(), "{line}");
            assert_eq!(field("compresscodec:"), codec, "{line}");
            assert_eq!(field("position:"), next_position.to_string(), "{line}");
            next_position += field("size:").parse::<u64>().unwrap();
            batches += 1;
        } else if line.starts_with("| offset: ") {
            records += 1;
        }
    }
    assert_eq!(
        std::fs::metadata(files.last().unwrap()).unwrap().len(),
        next_position
    );
    assert_eq!(files, logs, "one Dumping line per segment, in order");
    assert_eq!(batches, LINES / BATCH);
    assert_eq!(records, LINES);
}

/// `dump --from`: starts at the record asked for, in the middle of a batch and of a segment.
fn check_from(dir: &Path, lines: &[Vec<u8>]) {
    let from = LINES - 250 - 1;
    let dumped = run(partlog()
        .arg("dump")
        .arg(dir)
        .args(["--json", "--from", &from.to_string()]));
    let text = String::from_utf8(dumped.stdout).unwrap();
    let offsets: Vec<i64> = text
        .lines()
        .map(|object| Json::parse(object).get("offset").number())
        .collect();
    assert_eq!(offsets, (from as i64..LINES as i64).collect::<Vec<_>>());
    let first = Json::parse(text.lines().next().unwrap());
    assert_eq!(first.get("value").bytes(), Some(expected(&lines[from]).1));
}

/// Kafka's DumpLogSegments: a clean deep dump with every record's key and payload as written,
/// and the index sanity check on every index with entries.
fn kafka_check(dir: &Path, lines: &[Vec<u8>]) {
    let Some(deep) = kafka::dump_deep(dir) else {
        return;
    };
    kafka::assert_clean_deep_dump(&deep);
    let records = kafka::parse_records(&deep);
    assert_eq!(records.len(), lines.len());
    for (i, (record, line)) in records.iter().zip(lines).enumerate() {
        let (key, value) = expected(line);
        assert_eq!(record.offset, i as i64);
        assert_eq!(record.key, key.map(|k| kafka::as_dumped(&k)), "offset {i}");
        assert_eq!(record.payload, Some(kafka::as_dumped(&value)), "offset {i}");
    }
    // DumpLogSegments prints "is empty." instead of a sanity verdict for an offset index without
    // entries. partlog indexes a batch only after index.interval.bytes (4096) of log, so only a
    // segment with less than that before its last batch may have one.
    let mut indexes = Vec::new();
    for index in kafka::segment_files(dir, &["index", "timeindex"]) {
        if std::fs::metadata(&index).unwrap().len() == 0 {
            let log = index.with_extension("log");
            let log_bytes = std::fs::metadata(&log).unwrap().len();
            assert!(
                log_bytes < 4096 + 64 * 1024,
                "{} is empty but its segment holds {log_bytes} bytes",
                index.display()
            );
        } else {
            indexes.push(index);
        }
    }
    let Some(sanity) = kafka::dump_log_segments(&indexes, &["--index-sanity-check"]) else {
        return;
    };
    kafka::assert_index_sanity_passed(&sanity);
}

/// Just enough JSON to read the dump back: objects, arrays, strings with every escape,
/// integers, true, false and null.
#[derive(Debug, Clone, PartialEq)]
enum Json {
    Null,
    Bool(bool),
    Number(i64),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    fn parse(text: &str) -> Json {
        let mut parser = Parser {
            chars: text.chars().collect(),
            at: 0,
        };
        let value = parser.value();
        parser.skip_space();
        assert_eq!(parser.at, parser.chars.len(), "trailing text in {text}");
        value
    }

    fn get(&self, name: &str) -> &Json {
        let Json::Object(fields) = self else {
            panic!("not an object: {self:?}")
        };
        let found: Vec<_> = fields.iter().filter(|(k, _)| k == name).collect();
        assert_eq!(found.len(), 1, "field {name} in {self:?}");
        &found[0].1
    }

    fn number(&self) -> i64 {
        match self {
            Json::Number(n) => *n,
            other => panic!("not a number: {other:?}"),
        }
    }

    /// A key or value as the tool writes it: null, a string, or `{"base64": ...}`.
    fn bytes(&self) -> Option<Vec<u8>> {
        match self {
            Json::Null => None,
            Json::String(s) => Some(s.clone().into_bytes()),
            Json::Object(_) => match self.get("base64") {
                Json::String(encoded) => Some(base64_decode(encoded)),
                other => panic!("base64 is not a string: {other:?}"),
            },
            other => panic!("not bytes: {other:?}"),
        }
    }
}

struct Parser {
    chars: Vec<char>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> char {
        *self.chars.get(self.at).expect("unexpected end of JSON")
    }

    fn next(&mut self) -> char {
        let c = self.peek();
        self.at += 1;
        c
    }

    fn expect(&mut self, expected: char) {
        let c = self.next();
        assert_eq!(c, expected, "at {}", self.at);
    }

    fn skip_space(&mut self) {
        while self.chars.get(self.at).is_some_and(|c| c.is_whitespace()) {
            self.at += 1;
        }
    }

    fn value(&mut self) -> Json {
        self.skip_space();
        match self.peek() {
            '{' => {
                self.next();
                let mut fields = Vec::new();
                self.skip_space();
                if self.peek() == '}' {
                    self.next();
                    return Json::Object(fields);
                }
                loop {
                    self.skip_space();
                    let Json::String(name) = self.value() else {
                        panic!("object key is not a string")
                    };
                    self.skip_space();
                    self.expect(':');
                    fields.push((name, self.value()));
                    self.skip_space();
                    match self.next() {
                        ',' => continue,
                        '}' => return Json::Object(fields),
                        other => panic!("unexpected {other:?} in object"),
                    }
                }
            }
            '[' => {
                self.next();
                let mut items = Vec::new();
                self.skip_space();
                if self.peek() == ']' {
                    self.next();
                    return Json::Array(items);
                }
                loop {
                    items.push(self.value());
                    self.skip_space();
                    match self.next() {
                        ',' => continue,
                        ']' => return Json::Array(items),
                        other => panic!("unexpected {other:?} in array"),
                    }
                }
            }
            '"' => Json::String(self.string()),
            't' => self.word("true", Json::Bool(true)),
            'f' => self.word("false", Json::Bool(false)),
            'n' => self.word("null", Json::Null),
            _ => {
                let start = self.at;
                while self
                    .chars
                    .get(self.at)
                    .is_some_and(|c| *c == '-' || c.is_ascii_digit())
                {
                    self.at += 1;
                }
                let digits: String = self.chars[start..self.at].iter().collect();
                Json::Number(
                    digits
                        .parse()
                        .unwrap_or_else(|_| panic!("bad number {digits:?}")),
                )
            }
        }
    }

    fn word(&mut self, word: &str, value: Json) -> Json {
        for expected in word.chars() {
            self.expect(expected);
        }
        value
    }

    fn string(&mut self) -> String {
        self.expect('"');
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
                        let unit = self.hex4();
                        let code = if (0xD800..0xDC00).contains(&unit) {
                            self.expect('\\');
                            self.expect('u');
                            let low = self.hex4();
                            0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                        } else {
                            unit
                        };
                        out.push(char::from_u32(code).expect("a valid code point"));
                    }
                    other => panic!("bad escape \\{other}"),
                },
                c => {
                    assert!(
                        u32::from(c) >= 0x20,
                        "raw control character {c:?} in a string"
                    );
                    out.push(c);
                }
            }
        }
    }

    fn hex4(&mut self) -> u32 {
        (0..4).fold(0, |acc, _| {
            acc * 16 + self.next().to_digit(16).expect("a hex digit")
        })
    }
}

fn base64_decode(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    assert_eq!(text.len() % 4, 0, "unpadded base64 {text:?}");
    let mut out = Vec::new();
    for quad in text.as_bytes().chunks(4) {
        let mut group = 0u32;
        let mut pads = 0;
        for &c in quad {
            group <<= 6;
            if c == b'=' {
                pads += 1;
            } else {
                group |= ALPHABET.iter().position(|&a| a == c).expect("base64 digit") as u32;
            }
        }
        let bytes = group.to_be_bytes();
        out.extend_from_slice(&bytes[1..4 - pads]);
    }
    out
}
