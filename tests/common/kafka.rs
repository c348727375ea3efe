//! Runs Apache Kafka's own `DumpLogSegments` (Kafka 4.4.0, from Maven Central through
//! `.ci/pom.xml`) on segment files, so tests can show that Kafka reads what partlog writes.
//!
//! Include it from a test crate with
//!
//! ```text
//! #[path = "common/kafka.rs"]
//! mod kafka;
//! ```
//!
//! Then, for a partition directory `dir`:
//!
//! ```text
//! let Some(deep) = kafka::dump_deep(dir) else { return }; // None: Kafka tools unavailable, skipped
//! kafka::assert_clean_deep_dump(&deep);
//! let records = kafka::parse_records(&deep);             // match these against what was written
//! let Some(sanity) = kafka::index_sanity(dir) else { return };
//! kafka::assert_index_sanity_passed(&sanity);
//! ```
//!
//! Where the tools come from, first match wins:
//! - java: `$PARTLOG_JAVA`, else `java` on `PATH`;
//! - classpath: `$PARTLOG_KAFKA_CLASSPATH`, else the file `$HOME/.cache/partlog/kafka-classpath.txt`
//!   that `.ci/run` writes, else `.ci/kafka-classpath.sh` runs Maven to build that file;
//! - main class: `$PARTLOG_DUMP_LOG_SEGMENTS_CLASS`, else whichever of
//!   `org.apache.kafka.tools.DumpLogSegments` (Kafka 4.x) and `kafka.tools.DumpLogSegments` (older
//!   jars) the jars hold.
//!
//! When they cannot be had, the helpers print a `skipping: ...` line and return `None`, except
//! under `CI=true`, where a test that needs Kafka must not pass without it, so they panic.
//!
//! What DumpLogSegments 4.4.0 prints (read from its `DumpLogSegments.java` and the 4.4.0 jar's
//! string constants), which the parsers below rely on:
//! - per file `Dumping <path>`; per `.log` file `Log starting offset: <n>`;
//! - per batch (stdout) `baseOffset: .. lastOffset: .. count: .. ... position: .. <TimestampType>:
//!   <maxTimestamp> size: .. magic: .. compresscodec: .. crc: .. isvalid: <bool>`;
//! - per record (deep iteration) `| offset: .. <TimestampType>: .. keySize: .. valueSize: ..
//!   sequence: .. headerKeys: [k1,k2]`, then ` key: <utf8>` and ` payload: <utf8>` with
//!   `--print-data-log` (each left out when null; never for control batches, which print
//!   ` endTxnMarker: COMMIT coordinatorEpoch: 7` and the like instead). Header values are never
//!   printed. A payload holding a newline continues on the next line(s).
//! - problems: `Found <n> invalid bytes at the end of <name>` (stdout), and on stderr
//!   `Mismatches in :<path>`, `Found timestamp mismatch in :<path>`, `Found out of order timestamp
//!   in :<path>`, and `The following indexed offsets are not found in :<path>` (4.4.0 says "in
//!   :<path>"; newer sources say "in the log."). Also on stderr, and NOT a problem by itself:
//!   `Non-consecutive offsets in <path>` followed by `  <a> is followed by <b>` lines. Every `.log`
//!   file whose first offset is not 0 gets `-1 is followed by <first offset>`, and compacted
//!   batches have holes; [`non_consecutive_offsets`] returns them for tests to check exactly.
//! - `--index-sanity-check`: `<path> passed sanity check.` per index file, except an offset index
//!   with no entries, which prints `<path> is empty.` instead (Kafka's own small segments have an
//!   empty `.index`: it writes an entry only every `index.interval.bytes`).
//!
//! Nothing here is timed: a run only has to finish within [`DUMP_TIMEOUT`], which exists so a hung
//! JVM fails a test instead of stalling the suite.
#![allow(
    dead_code,
    reason = "every test crate that includes this module uses a different part of it"
)]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long one DumpLogSegments run may take before the test fails. A run over a few segments
/// takes about a second; the margin is for a loaded 2-core CI machine.
pub const DUMP_TIMEOUT: Duration = Duration::from_secs(180);

/// Markers of a line in which DumpLogSegments reports a broken file (matched case-insensitively,
/// on stdout and stderr). "not found in" covers 4.4.0's "The following indexed offsets are not
/// found in :<path>" and newer versions' "... not found in the log.".
pub const BAD_LINE_MARKERS: &[&str] = &[
    "isvalid: false",
    "invalid bytes",
    "Mismatches in",
    "timestamp mismatch",
    "out of order timestamp",
    "not found in",
];

/// The main class of DumpLogSegments in Kafka 4.x (`kafka-tools` jar).
const TOOLS_MAIN_CLASS: &str = "org.apache.kafka.tools.DumpLogSegments";
/// The main class of DumpLogSegments in older Kafka (`kafka_2.13` jar).
const CORE_MAIN_CLASS: &str = "kafka.tools.DumpLogSegments";

/// A Java runtime and Kafka's jars, found once per test process.
#[derive(Debug, Clone)]
pub struct KafkaTools {
    /// The `java` executable.
    pub java: PathBuf,
    /// The classpath: Kafka's jars and their dependencies, `:`-separated.
    pub classpath: String,
    /// DumpLogSegments' main class in these jars.
    pub main_class: String,
}

/// Whether this is a CI run, where a missing Kafka must fail tests instead of skipping them.
pub fn running_in_ci() -> bool {
    std::env::var("CI").is_ok_and(|value| value == "true")
}

/// The Kafka tools, or `None` (after a `skipping: ...` line on stderr) when they cannot be had.
///
/// # Panics
/// Under `CI=true`, when the tools cannot be had.
pub fn kafka_tools() -> Option<&'static KafkaTools> {
    static TOOLS: OnceLock<Result<KafkaTools, String>> = OnceLock::new();
    match TOOLS.get_or_init(locate_tools) {
        Ok(tools) => Some(tools),
        Err(why) if running_in_ci() => {
            panic!("Kafka's DumpLogSegments is required under CI=true, but: {why}")
        }
        Err(why) => {
            eprintln!("skipping: Kafka's DumpLogSegments is unavailable: {why}");
            None
        }
    }
}

fn env_nonempty(name: &str) -> Option<OsString> {
    std::env::var_os(name).filter(|value| !value.is_empty())
}

fn locate_tools() -> Result<KafkaTools, String> {
    let java = env_nonempty("PARTLOG_JAVA").map_or_else(|| PathBuf::from("java"), PathBuf::from);
    let probe = Command::new(&java)
        .arg("-version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match probe {
        Ok(status) if status.success() => {}
        Ok(status) => return Err(format!("`{} -version` failed: {status}", java.display())),
        Err(error) => {
            return Err(format!(
                "cannot run `{}` ({error}); install Java 17+ or set PARTLOG_JAVA",
                java.display()
            ));
        }
    }
    let classpath = locate_classpath()?;
    let main_class = match env_nonempty("PARTLOG_DUMP_LOG_SEGMENTS_CLASS") {
        Some(class) => class.to_string_lossy().into_owned(),
        None => detect_main_class(&classpath)?.to_owned(),
    };
    Ok(KafkaTools {
        java,
        classpath,
        main_class,
    })
}

/// The repository's root, where `.ci/` is: the including package's directory (the root package)
/// or the nearest ancestor of it that holds `.ci/` (crates/partlog-cli, whose tests include this
/// file by path).
pub fn repository_root() -> PathBuf {
    let package = Path::new(env!("CARGO_MANIFEST_DIR"));
    package
        .ancestors()
        .find(|dir| dir.join(".ci").is_dir())
        .unwrap_or(package)
        .to_path_buf()
}

/// The classpath file that `.ci/run` and `.ci/kafka-classpath.sh` write.
fn classpath_file() -> Option<PathBuf> {
    let cache = match env_nonempty("PARTLOG_CACHE") {
        Some(cache) => PathBuf::from(cache),
        None => PathBuf::from(env_nonempty("HOME")?).join(".cache/partlog"),
    };
    Some(cache.join("kafka-classpath.txt"))
}

/// A classpath whose jars all exist; a stale one (its Maven cache deleted) would only fail later
/// with a confusing `ClassNotFoundException`.
fn usable_classpath(classpath: &str) -> Result<String, String> {
    let classpath = classpath.trim();
    if classpath.is_empty() {
        return Err("the classpath is empty".to_owned());
    }
    if let Some(missing) = classpath.split(':').find(|jar| !Path::new(jar).exists()) {
        return Err(format!(
            "the classpath names {missing}, which does not exist"
        ));
    }
    Ok(classpath.to_owned())
}

fn locate_classpath() -> Result<String, String> {
    if let Some(classpath) = env_nonempty("PARTLOG_KAFKA_CLASSPATH") {
        return usable_classpath(&classpath.to_string_lossy())
            .map_err(|why| format!("PARTLOG_KAFKA_CLASSPATH: {why}"));
    }
    let file = classpath_file();
    if let Some(Ok(classpath)) = file.as_deref().map(std::fs::read_to_string)
        && let Ok(classpath) = usable_classpath(&classpath)
    {
        return Ok(classpath);
    }
    // Neither is there: resolve the jars now (needs mvn and the network, once).
    let script = repository_root().join(".ci/kafka-classpath.sh");
    let output = Command::new("bash")
        .arg(&script)
        .stdin(Stdio::null())
        .output()
        .map_err(|error| format!("cannot run {}: {error}", script.display()))?;
    if !output.status.success() {
        return Err(format!(
            "no PARTLOG_KAFKA_CLASSPATH, no usable {}, and {} failed ({}): {}",
            file.as_deref()
                .map_or_else(|| "classpath file".to_owned(), |f| f.display().to_string()),
            script.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let written = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    let classpath = std::fs::read_to_string(&written)
        .map_err(|error| format!("cannot read {}: {error}", written.display()))?;
    usable_classpath(&classpath)
}

/// Finds which DumpLogSegments the jars hold. A jar's central directory stores entry names
/// uncompressed, so a byte search of Kafka's own jars is enough: no unzip needed.
fn detect_main_class(classpath: &str) -> Result<&'static str, String> {
    let mut core_has_it = false;
    for jar in classpath.split(':') {
        let is_kafka_jar = Path::new(jar)
            .file_name()
            .is_some_and(|name| name.to_string_lossy().starts_with("kafka"));
        if !is_kafka_jar {
            continue;
        }
        let bytes = std::fs::read(jar).map_err(|error| format!("cannot read {jar}: {error}"))?;
        if contains(&bytes, b"org/apache/kafka/tools/DumpLogSegments.class") {
            return Ok(TOOLS_MAIN_CLASS);
        }
        // "kafka/tools/..." at the start of an entry name, not inside "org/apache/kafka/tools/...".
        core_has_it |= bytes
            .windows(b"/kafka/tools/DumpLogSegments.class".len())
            .any(|window| {
                window.get(1..) == Some(b"kafka/tools/DumpLogSegments.class") && window[0] != b'/'
            });
    }
    if core_has_it {
        Ok(CORE_MAIN_CLASS)
    } else {
        Err(format!(
            "no jar on the classpath holds {TOOLS_MAIN_CLASS} or {CORE_MAIN_CLASS}"
        ))
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

/// What one DumpLogSegments run printed.
#[derive(Clone)]
pub struct Output {
    /// The command line, for failure messages.
    pub command: String,
    /// The files handed to `--files`, as absolute paths (DumpLogSegments prints them as given).
    pub files: Vec<PathBuf>,
    /// The exit status: DumpLogSegments exits 1 when it throws (after printing the stack trace).
    pub status: ExitStatus,
    /// Standard output, decoded as UTF-8 (the JVM is told to write UTF-8).
    pub stdout: String,
    /// Standard error, decoded as UTF-8.
    pub stderr: String,
}

impl fmt::Debug for Output {
    /// The whole run, readable in a failed assertion's message.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "$ {}\n({})", self.command, self.status)?;
        writeln!(f, "--- stdout ---\n{}", self.stdout.trim_end())?;
        write!(f, "--- stderr ---\n{}", self.stderr.trim_end())
    }
}

impl Output {
    /// Lines of stdout then stderr.
    pub fn lines(&self) -> impl Iterator<Item = &str> {
        self.stdout.lines().chain(self.stderr.lines())
    }
}

/// Runs `DumpLogSegments <args> --files <files>` in one JVM (a JVM start costs about a second, so
/// hand it every file of a directory at once). `None` when the tools are unavailable (see
/// [`kafka_tools`]).
///
/// # Panics
/// If a path holds a comma (`--files` is comma-separated), if the JVM cannot be started, or if it
/// runs longer than [`DUMP_TIMEOUT`].
pub fn dump_log_segments<P: AsRef<Path>>(files: &[P], args: &[&str]) -> Option<Output> {
    let tools = kafka_tools()?;
    assert!(!files.is_empty(), "dump_log_segments: no files given");
    let files: Vec<PathBuf> = files
        .iter()
        .map(|file| std::path::absolute(file.as_ref()).expect("absolute path"))
        .collect();
    let file_list = files
        .iter()
        .map(|file| {
            let file = file.to_str().expect("DumpLogSegments takes UTF-8 paths");
            assert!(!file.contains(','), "`--files` is comma-separated: {file}");
            file
        })
        .collect::<Vec<_>>()
        .join(",");
    let mut command = Command::new(&tools.java);
    command
        // JDK 17 encodes stdout in the locale's charset (ASCII when LANG is unset, as on many CI
        // machines), which would print every non-ASCII key or payload as '?'. JDK 18+ reads the
        // stdout.* names, JDK 17 the sun.* ones.
        .args([
            "-Dfile.encoding=UTF-8",
            "-Dsun.stdout.encoding=UTF-8",
            "-Dsun.stderr.encoding=UTF-8",
            "-Dstdout.encoding=UTF-8",
            "-Dstderr.encoding=UTF-8",
        ])
        // Kafka's warnings and errors on stderr, nothing chattier (.ci/pom.xml adds slf4j-simple).
        .arg("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")
        // A short-lived tool: skip the optimizing compiler and the parallel collector's threads.
        .args(["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"])
        .arg("-cp")
        .arg(&tools.classpath)
        .arg(&tools.main_class)
        .args(args)
        .arg("--files")
        .arg(&file_list);
    let command_line = format!(
        "{} -cp $KAFKA_CLASSPATH {} {} --files {file_list}",
        tools.java.display(),
        tools.main_class,
        args.join(" ")
    );
    let (status, stdout, stderr) =
        run_with_timeout(command, None, DUMP_TIMEOUT, &format!("`{command_line}`"));
    Some(Output {
        command: command_line,
        files,
        status,
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    })
}

/// Runs `command`, feeding it `stdin` (or nothing), with stdout and stderr captured; kills it
/// after `timeout` and panics naming `what`. Shared with `common/broker.rs`.
pub fn run_with_timeout(
    mut command: Command,
    stdin: Option<&str>,
    timeout: Duration,
    what: &str,
) -> (ExitStatus, Vec<u8>, Vec<u8>) {
    let mut child = command
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start {what}: {error}"));
    // Fed and drained on their own threads: a child blocked on a full pipe would never exit.
    let feeder = child.stdin.take().map(|mut pipe| {
        let input = stdin.unwrap_or_default().to_owned();
        std::thread::spawn(move || {
            // A child that exits early closes the pipe; its exit status tells why.
            let _ = pipe.write_all(input.as_bytes());
        })
    });
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                pipe.read_to_end(&mut bytes)
                    .expect("read the child's output");
            }
            bytes
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for a child process") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} ran longer than {timeout:?} and was killed");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    if let Some(feeder) = feeder {
        feeder.join().expect("stdin feeder");
    }
    (
        status,
        stdout.join().expect("stdout reader"),
        stderr.join().expect("stderr reader"),
    )
}

/// The files of a partition directory with one of `extensions`, ordered as Kafka names them:
/// by base offset (the 20-digit name), then in the order of `extensions`.
pub fn segment_files(dir: &Path, extensions: &[&str]) -> Vec<PathBuf> {
    let mut files: Vec<(String, usize, PathBuf)> = std::fs::read_dir(dir)
        .unwrap_or_else(|error| panic!("cannot list {}: {error}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter_map(|path| {
            let rank = extensions
                .iter()
                .position(|ext| path.extension().is_some_and(|e| e == *ext))?;
            let stem = path.file_stem()?.to_string_lossy().into_owned();
            Some((stem, rank, path))
        })
        .collect();
    files.sort();
    files.into_iter().map(|(_, _, path)| path).collect()
}

/// `--deep-iteration --print-data-log` over every `.log`, `.index` and `.timeindex` file of `dir`,
/// in one run: records with keys and payloads, and every index entry checked against the log.
///
/// # Panics
/// If `dir` holds none of those files.
pub fn dump_deep(dir: &Path) -> Option<Output> {
    let files = segment_files(dir, &["log", "index", "timeindex"]);
    assert!(!files.is_empty(), "no segment files in {}", dir.display());
    dump_log_segments(&files, &["--deep-iteration", "--print-data-log"])
}

/// `--index-sanity-check` over every `.index` and `.timeindex` file of `dir`: the check a broker
/// runs at startup to decide whether to rebuild an index.
///
/// # Panics
/// If `dir` holds no index files.
pub fn index_sanity(dir: &Path) -> Option<Output> {
    let files = segment_files(dir, &["index", "timeindex"]);
    assert!(!files.is_empty(), "no index files in {}", dir.display());
    dump_log_segments(&files, &["--index-sanity-check"])
}

/// The lines (stdout and stderr) that hold one of [`BAD_LINE_MARKERS`].
pub fn bad_lines(output: &Output) -> Vec<String> {
    let markers: Vec<String> = BAD_LINE_MARKERS.iter().map(|m| m.to_lowercase()).collect();
    output
        .lines()
        .filter(|line| {
            let line = line.to_lowercase();
            markers.iter().any(|marker| line.contains(marker))
        })
        .map(str::to_owned)
        .collect()
}

/// Asserts that a deep dump found nothing wrong: exit status 0, no line with a
/// [`BAD_LINE_MARKERS`] marker, a `Dumping` line for every file, and nothing on stderr but the
/// `Non-consecutive offsets` report (check that one with [`non_consecutive_offsets`]).
///
/// # Panics
/// When any of that fails, with the whole output in the message.
pub fn assert_clean_deep_dump(output: &Output) {
    assert!(
        output.status.success(),
        "DumpLogSegments failed:\n{output:?}"
    );
    let bad = bad_lines(output);
    assert!(
        bad.is_empty(),
        "DumpLogSegments reported problems: {bad:#?}\n{output:?}"
    );
    assert_dumped_every_file(output);
    let mut in_non_consecutive_report = false;
    for line in output.stderr.lines() {
        if line.starts_with("Non-consecutive offsets in ") {
            in_non_consecutive_report = true;
        } else if !(in_non_consecutive_report && parse_followed_by(line).is_some()) {
            panic!("unexpected line on DumpLogSegments' stderr: {line:?}\n{output:?}");
        }
    }
}

/// Asserts that an `--index-sanity-check` run printed `<file> passed sanity check.` for every
/// file it was given, exited 0, and printed no [`BAD_LINE_MARKERS`] line. An offset index with no
/// entries fails this: DumpLogSegments prints `<file> is empty.` for it and skips the check.
///
/// # Panics
/// When any of that fails, with the whole output in the message.
pub fn assert_index_sanity_passed(output: &Output) {
    assert!(
        output.status.success(),
        "DumpLogSegments failed:\n{output:?}"
    );
    let bad = bad_lines(output);
    assert!(
        bad.is_empty(),
        "DumpLogSegments reported problems: {bad:#?}\n{output:?}"
    );
    assert_dumped_every_file(output);
    for file in &output.files {
        let passed = format!("{} passed sanity check.", file.display());
        assert!(
            output.stdout.lines().any(|line| line == passed),
            "no {passed:?} line for {}\n{output:?}",
            file.display()
        );
    }
}

fn assert_dumped_every_file(output: &Output) {
    for file in &output.files {
        let dumping = format!("Dumping {}", file.display());
        assert!(
            output.stdout.lines().any(|line| line == dumping),
            "DumpLogSegments did not dump {}\n{output:?}",
            file.display()
        );
    }
}

/// A `Mismatches in :<index>` entry: an offset-index entry whose offset is not the last offset of
/// the batch at its position.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct IndexMismatch {
    /// The `.index` file, as an absolute path.
    pub index_file: PathBuf,
    /// The offset the index entry holds.
    pub index_offset: i64,
    /// The last offset of the batch at the entry's position.
    pub log_offset: i64,
}

/// Every offset-index mismatch reported on stderr, in the order printed.
pub fn index_mismatches(output: &Output) -> Vec<IndexMismatch> {
    let mut mismatches = Vec::new();
    let mut index_file: Option<PathBuf> = None;
    for line in output.stderr.lines() {
        if let Some(file) = line.strip_prefix("Mismatches in :") {
            index_file = Some(PathBuf::from(file));
        } else if let Some(rest) = line.strip_prefix("  Index offset: ") {
            let file = index_file.clone().expect("mismatch line before its file");
            let (index_offset, log_offset) = rest
                .split_once(", log offset: ")
                .unwrap_or_else(|| panic!("unexpected mismatch line {line:?}"));
            mismatches.push(IndexMismatch {
                index_file: file,
                index_offset: parse_number(index_offset, line),
                log_offset: parse_number(log_offset, line),
            });
        } else if !line.starts_with("  ") {
            index_file = None;
        }
    }
    mismatches
}

/// `Non-consecutive offsets in <log>` reports: (log file, an offset, the offset that follows it).
/// Each `.log` file's first record is compared with -1, so a file starting at offset `n > 0`
/// always reports `(file, -1, n)`.
pub fn non_consecutive_offsets(output: &Output) -> Vec<(PathBuf, i64, i64)> {
    let mut pairs = Vec::new();
    let mut log_file: Option<PathBuf> = None;
    for line in output.stderr.lines() {
        if let Some(file) = line.strip_prefix("Non-consecutive offsets in ") {
            log_file = Some(PathBuf::from(file));
        } else if let (Some(file), Some((before, after))) = (&log_file, parse_followed_by(line)) {
            pairs.push((file.clone(), before, after));
        } else {
            log_file = None;
        }
    }
    pairs
}

/// `  <a> is followed by <b>`.
fn parse_followed_by(line: &str) -> Option<(i64, i64)> {
    let (before, after) = line.strip_prefix("  ")?.split_once(" is followed by ")?;
    Some((before.parse().ok()?, after.parse().ok()?))
}

fn parse_number<T: std::str::FromStr>(text: &str, line: &str) -> T {
    text.trim()
        .parse()
        .unwrap_or_else(|_| panic!("expected a number, got {text:?} in {line:?}"))
}

/// A batch line of a `.log` dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpedBatch {
    /// The `.log` file, as printed after `Dumping`.
    pub file: PathBuf,
    /// `baseOffset`.
    pub base_offset: i64,
    /// `lastOffset`.
    pub last_offset: i64,
    /// `count` (the record count; `None` where Kafka prints `null`, for legacy batches).
    pub count: Option<i32>,
    /// `baseSequence`.
    pub base_sequence: i32,
    /// `lastSequence`.
    pub last_sequence: i32,
    /// `producerId`.
    pub producer_id: i64,
    /// `producerEpoch`.
    pub producer_epoch: i16,
    /// `partitionLeaderEpoch`.
    pub partition_leader_epoch: i32,
    /// `isTransactional`.
    pub is_transactional: bool,
    /// `isControl`.
    pub is_control: bool,
    /// `deleteHorizonMs` (`OptionalLong.empty` is `None`).
    pub delete_horizon_ms: Option<i64>,
    /// `position`: the batch's byte position in the file.
    pub position: i64,
    /// `CreateTime` or `LogAppendTime` (or `NoTimestampType`).
    pub timestamp_type: String,
    /// The batch's max timestamp (the number after the timestamp type).
    pub max_timestamp: i64,
    /// `size`: the whole batch in bytes, log overhead included.
    pub size: i32,
    /// `magic`.
    pub magic: i8,
    /// `compresscodec`: none, gzip, snappy, lz4 or zstd.
    pub compression: String,
    /// `crc`, the stored CRC-32C.
    pub crc: u32,
    /// `isvalid`: whether the stored CRC matches.
    pub is_valid: bool,
}

/// A record line of a deep `.log` dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpedRecord {
    /// The `.log` file, as printed after `Dumping`.
    pub file: PathBuf,
    /// The base offset of the record's batch.
    pub batch_base_offset: i64,
    /// `offset`.
    pub offset: i64,
    /// `CreateTime` or `LogAppendTime` (the batch's timestamp type).
    pub timestamp_type: String,
    /// The record's timestamp (for LogAppendTime, the batch's max timestamp).
    pub timestamp: i64,
    /// `keySize` (-1 for a null key).
    pub key_size: i32,
    /// `valueSize` (-1 for a null value: a tombstone).
    pub value_size: i32,
    /// `sequence` (-1 without an idempotent producer).
    pub sequence: i32,
    /// `headerKeys` (header values are not printed). Split at commas, so a key holding a comma
    /// comes back as two.
    pub header_keys: Vec<String>,
    /// `key:` as UTF-8 text (see [`as_dumped`]); `None` when not printed: a null key, a control
    /// record, or a dump without `--print-data-log`.
    pub key: Option<String>,
    /// `payload:` as UTF-8 text; `None` when not printed, as for `key`.
    pub payload: Option<String>,
    /// What a control record prints instead of key and payload, e.g.
    /// `endTxnMarker: COMMIT coordinatorEpoch: 7`.
    pub control: Option<String>,
}

/// How DumpLogSegments prints key or payload bytes: its default `StringDecoder` decodes them as
/// UTF-8, replacing each malformed sequence by U+FFFD, which `from_utf8_lossy` also does.
pub fn as_dumped(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Every batch line of the `.log` files in a dump, in order.
pub fn parse_batches(output: &Output) -> Vec<DumpedBatch> {
    parse_log_dump(output).0
}

/// Every record line of the `.log` files in a deep dump, in order.
pub fn parse_records(output: &Output) -> Vec<DumpedRecord> {
    parse_log_dump(output).1
}

/// Starts of every line DumpLogSegments prints itself; any other line continues the record
/// before it, whose key or payload held a newline.
const LINE_STARTS: &[&str] = &[
    "Dumping ",
    "Log starting offset: ",
    "baseOffset: ",
    "| offset: ",
    "offset: ",
    "timestamp: ",
    "Found ",
    "Snapshot end offset: ",
    "KRaft bootstrap snapshot",
];

fn parse_log_dump(output: &Output) -> (Vec<DumpedBatch>, Vec<DumpedRecord>) {
    let mut batches: Vec<DumpedBatch> = Vec::new();
    // Each record's text with its continuation lines, and the index of its batch.
    let mut record_texts: Vec<(usize, String)> = Vec::new();
    let mut file = PathBuf::new();
    let mut record_open = false;
    // Every line ends in '\n'; dropping the last one keeps a payload's own final newline.
    let stdout = output.stdout.strip_suffix('\n').unwrap_or(&output.stdout);
    for line in stdout.split('\n') {
        if record_open && !LINE_STARTS.iter().any(|start| line.starts_with(start)) {
            let (_, text) = record_texts.last_mut().expect("an open record");
            text.push('\n');
            text.push_str(line);
            continue;
        }
        record_open = false;
        if let Some(path) = line.strip_prefix("Dumping ") {
            file = PathBuf::from(path);
        } else if line.starts_with("baseOffset: ") {
            batches.push(parse_batch_line(line, &file));
        } else if let Some(rest) = line.strip_prefix("| ") {
            let batch = batches
                .len()
                .checked_sub(1)
                .filter(|&last| batches[last].file == file)
                .unwrap_or_else(|| panic!("record line before any batch line: {line:?}"));
            record_texts.push((batch, rest.to_owned()));
            record_open = true;
        }
    }
    let records = record_texts
        .iter()
        .map(|(batch, text)| parse_record(text, &batches[*batch]))
        .collect();
    (batches, records)
}

/// `name: value` pairs of a line whose values hold no spaces.
fn fields(text: &str) -> BTreeMap<&str, &str> {
    let mut map = BTreeMap::new();
    let mut tokens = text.split(' ').filter(|token| !token.is_empty());
    while let Some(name) = tokens.next() {
        if let Some(name) = name.strip_suffix(':') {
            map.insert(name, tokens.next().unwrap_or(""));
        }
    }
    map
}

fn field<T: std::str::FromStr>(fields: &BTreeMap<&str, &str>, name: &str, line: &str) -> T {
    let text = fields
        .get(name)
        .unwrap_or_else(|| panic!("no `{name}:` in {line:?}"));
    parse_number(text, line)
}

const TIMESTAMP_TYPES: &[&str] = &["CreateTime", "LogAppendTime", "NoTimestampType"];

fn timestamp_of(fields: &BTreeMap<&str, &str>, line: &str) -> (String, i64) {
    let kind = TIMESTAMP_TYPES
        .iter()
        .find(|kind| fields.contains_key(**kind))
        .unwrap_or_else(|| panic!("no timestamp type in {line:?}"));
    ((*kind).to_owned(), field(fields, kind, line))
}

fn parse_batch_line(line: &str, file: &Path) -> DumpedBatch {
    let fields = fields(line);
    let (timestamp_type, max_timestamp) = timestamp_of(&fields, line);
    let flag = |name: &str| match fields.get(name) {
        Some(&"true") => true,
        Some(&"false") => false,
        _ => panic!("no boolean `{name}:` in {line:?}"),
    };
    let delete_horizon_ms = match fields.get("deleteHorizonMs") {
        Some(&"OptionalLong.empty") => None,
        Some(text) => Some(parse_number(
            text.strip_prefix("OptionalLong[")
                .and_then(|t| t.strip_suffix(']'))
                .unwrap_or(text),
            line,
        )),
        None => panic!("no `deleteHorizonMs:` in {line:?}"),
    };
    DumpedBatch {
        file: file.to_path_buf(),
        base_offset: field(&fields, "baseOffset", line),
        last_offset: field(&fields, "lastOffset", line),
        count: match fields.get("count") {
            Some(&"null") => None,
            _ => Some(field(&fields, "count", line)),
        },
        base_sequence: field(&fields, "baseSequence", line),
        last_sequence: field(&fields, "lastSequence", line),
        producer_id: field(&fields, "producerId", line),
        producer_epoch: field(&fields, "producerEpoch", line),
        partition_leader_epoch: field(&fields, "partitionLeaderEpoch", line),
        is_transactional: flag("isTransactional"),
        is_control: flag("isControl"),
        delete_horizon_ms,
        position: field(&fields, "position", line),
        timestamp_type,
        max_timestamp,
        size: field(&fields, "size", line),
        magic: field(&fields, "magic", line),
        compression: fields
            .get("compresscodec")
            .unwrap_or_else(|| panic!("no `compresscodec:` in {line:?}"))
            .to_string(),
        crc: field(&fields, "crc", line),
        is_valid: flag("isvalid"),
    }
}

/// Parses `offset: .. <TimestampType>: .. keySize: .. valueSize: .. sequence: .. headerKeys: [..]`
/// and what follows: ` key: K`, ` payload: P` (each absent when null) for data records, or the
/// control marker for control records.
fn parse_record(line: &str, batch: &DumpedBatch) -> DumpedRecord {
    let (metadata, after_headers_start) = line
        .split_once(" headerKeys: [")
        .unwrap_or_else(|| panic!("no `headerKeys:` in {line:?}"));
    let fields = fields(metadata);
    let (timestamp_type, timestamp) = timestamp_of(&fields, line);
    let key_size: i32 = field(&fields, "keySize", line);
    let value_size: i32 = field(&fields, "valueSize", line);

    // Where the header list ends: at the first "]" that the printed contents can follow. Header
    // keys holding "] key: " or "] payload: " would confuse this; nothing here writes such keys.
    let (header_text, contents) = if batch.is_control {
        let (headers, control) = after_headers_start
            .split_once(']')
            .unwrap_or_else(|| panic!("unterminated headerKeys in {line:?}"));
        (headers, Contents::Control(control.trim_start()))
    } else {
        let marker = if key_size >= 0 {
            "] key: "
        } else {
            "] payload: "
        };
        match after_headers_start.split_once(marker) {
            Some((headers, printed)) if key_size >= 0 => {
                (headers, Contents::KeyThenMaybePayload(printed))
            }
            Some((headers, printed)) => (headers, Contents::PayloadOnly(printed)),
            None => (
                after_headers_start
                    .strip_suffix(']')
                    .unwrap_or_else(|| panic!("unterminated headerKeys in {line:?}")),
                Contents::NotPrinted,
            ),
        }
    };
    let header_keys = if header_text.is_empty() {
        Vec::new()
    } else {
        header_text.split(',').map(str::to_owned).collect()
    };
    let (key, payload, control) = match contents {
        Contents::NotPrinted => (None, None, None),
        Contents::Control(text) => (None, None, Some(text.to_owned()).filter(|t| !t.is_empty())),
        Contents::PayloadOnly(payload) => (None, Some(payload.to_owned()), None),
        Contents::KeyThenMaybePayload(printed) => {
            let (key, payload) = split_key_and_payload(printed, key_size, value_size);
            (Some(key), payload, None)
        }
    };
    DumpedRecord {
        file: batch.file.clone(),
        batch_base_offset: batch.base_offset,
        offset: field(&fields, "offset", line),
        timestamp_type,
        timestamp,
        key_size,
        value_size,
        sequence: field(&fields, "sequence", line),
        header_keys,
        key,
        payload,
        control,
    }
}

enum Contents<'a> {
    NotPrinted,
    Control(&'a str),
    PayloadOnly(&'a str),
    KeyThenMaybePayload(&'a str),
}

/// Splits `K payload: P` (or just `K` for a null value). A key may itself hold " payload: ", so
/// among the candidate split points the one whose key has `key_size` UTF-8 bytes wins; when the
/// key was not valid UTF-8 (so its printed length differs), the first candidate.
fn split_key_and_payload(
    printed: &str,
    key_size: i32,
    value_size: i32,
) -> (String, Option<String>) {
    const SEPARATOR: &str = " payload: ";
    if value_size < 0 {
        return (printed.to_owned(), None);
    }
    let candidates: Vec<usize> = printed.match_indices(SEPARATOR).map(|(at, _)| at).collect();
    let at = candidates
        .iter()
        .copied()
        .find(|&at| usize::try_from(key_size).is_ok_and(|size| size == at))
        .or_else(|| candidates.first().copied());
    match at {
        Some(at) => (
            printed[..at].to_owned(),
            Some(printed[at + SEPARATOR.len()..].to_owned()),
        ),
        None => panic!("a non-null value but no ` payload: ` in {printed:?}"),
    }
}
