//! The Rust side of `UnifiedLogHarness.java` (beside this file): compiles the harness against Kafka
//! 4.4's jars, keeps one JVM alive across commands (so that A B A B pairs do not pay JVM start or
//! lose the JIT's warm-up), and parses the JSON line each measurement prints. The broker rows'
//! client driver (`BrokerClientDriver.java`, `benches/compare/broker.rs`) speaks the same
//! protocol and runs through [`compile`] and [`KafkaHarness::spawn`].
//!
//! Included by path from `compare.rs` here and from partlog's `tests/kafka_harness.rs`:
//!
//! ```text
//! #[path = "../crates/partlog-bench/benches/kafka/harness.rs"]
//! mod harness;
//! ```
//!
//! javac comes from `$PARTLOG_JAVAC`, else the `javac` beside the given `java`, else `PATH`.

#![allow(dead_code, reason = "each includer uses part of it")]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// The harness's Java source, next to this file: embedded, since this file is compiled into
/// crates of two packages (the bench crate's `compare` and partlog's `tests/kafka_harness.rs`),
/// and written into the class directory for javac.
const SOURCE: &str = include_str!("UnifiedLogHarness.java");

/// One measurement line: the fields every workload prints, and the rest by name.
#[derive(Debug, Clone)]
pub struct Measurement {
    /// `append`, `read_seq`, `read_random`, `open`, `recover` or `compact`.
    pub workload: String,
    /// Wall time of the timed region.
    pub nanos: u64,
    /// Batches appended or read, segments opened, batches recovered.
    pub items: u64,
    /// Bytes of batches appended or read (0 where it means nothing).
    pub bytes: u64,
    /// Every numeric field, the four above included (`log_end_offset`, `p50_ns`, ...).
    pub fields: BTreeMap<String, i64>,
}

impl Measurement {
    /// A numeric field, or an error naming it.
    pub fn field(&self, name: &str) -> Result<i64, String> {
        self.fields
            .get(name)
            .copied()
            .ok_or_else(|| format!("{} measurement has no field {name}", self.workload))
    }
}

/// A running harness JVM.
pub struct KafkaHarness {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl KafkaHarness {
    /// Compiles the harness into `classes` and starts it, quietly (Kafka's log4j output goes to
    /// a file in `classes`, where a failure can be read).
    pub fn start(java: &Path, classpath: &str, classes: &Path) -> Result<KafkaHarness, String> {
        compile(java, classpath, classes, "UnifiedLogHarness", SOURCE)?;
        KafkaHarness::spawn(java, classpath, classes, "UnifiedLogHarness")
    }

    /// Starts the driver `class`, already compiled into `classes` by [`compile`], with the same
    /// protocol as the harness: one command a line, JSON lines back, `{"done":..}` last. Its
    /// stderr goes to `<classes>/<class>-<n>.stderr`, one file per start.
    pub fn spawn(
        java: &Path,
        classpath: &str,
        classes: &Path,
        class: &str,
    ) -> Result<KafkaHarness, String> {
        let stderr_path = (1..)
            .map(|n| classes.join(format!("{class}-{n}.stderr")))
            .find(|path| !path.exists())
            .ok_or("no free stderr file name")?;
        let stderr = std::fs::File::create(&stderr_path)
            .map_err(|e| format!("cannot create {}: {e}", stderr_path.display()))?;
        let mut child = Command::new(java)
            .arg("-cp")
            .arg(format!("{}:{classpath}", classes.display()))
            .arg(class)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("cannot start {} ({e})", java.display()))?;
        let stdin = child.stdin.take().ok_or("the harness has no stdin")?;
        let stdout = BufReader::new(child.stdout.take().ok_or("the harness has no stdout")?);
        Ok(KafkaHarness {
            child,
            stdin,
            stdout,
        })
    }

    /// Runs one command (`append dir=... input=...`) and returns its measurements.
    pub fn run(&mut self, command: &str) -> Result<Vec<Measurement>, String> {
        writeln!(self.stdin, "{command}")
            .and_then(|()| self.stdin.flush())
            .map_err(|e| format!("the harness stopped reading commands: {e}"))?;
        let mut measurements = Vec::new();
        loop {
            let mut line = String::new();
            let read = self
                .stdout
                .read_line(&mut line)
                .map_err(|e| format!("cannot read the harness's output: {e}"))?;
            if read == 0 {
                return Err(format!("the harness exited during `{command}`"));
            }
            let object = parse_flat_json(line.trim())
                .map_err(|why| format!("harness printed {line:?}: {why}"))?;
            if let Some(Value::Text(error)) = object.get("error") {
                return Err(format!("`{command}` failed in the harness: {error}"));
            }
            if object.contains_key("done") {
                return Ok(measurements);
            }
            measurements.push(measurement(object)?);
        }
    }
}

impl Drop for KafkaHarness {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.stdin.flush();
        if self.child.wait().is_err() {
            let _ = self.child.kill();
        }
    }
}

/// Writes `source` (the Java class `class`) into `classes` and compiles it there against
/// `classpath`. Callers give each process its own `classes`: a javac rewriting a class file that
/// another process's JVM is loading fails that JVM.
pub fn compile(
    java: &Path,
    classpath: &str,
    classes: &Path,
    class: &str,
    source: &str,
) -> Result<(), String> {
    std::fs::create_dir_all(classes)
        .map_err(|e| format!("cannot create {}: {e}", classes.display()))?;
    let source_path = classes.join(format!("{class}.java"));
    std::fs::write(&source_path, source)
        .map_err(|e| format!("cannot write {}: {e}", source_path.display()))?;
    let javac = javac_beside(java);
    let output = Command::new(&javac)
        .arg("-d")
        .arg(classes)
        .arg("-cp")
        .arg(classpath)
        .arg(&source_path)
        .output()
        .map_err(|e| format!("cannot run {} ({e}); install a JDK 17+", javac.display()))?;
    if !output.status.success() {
        return Err(format!(
            "javac failed on {}: {}",
            source_path.display(),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(())
}

fn javac_beside(java: &Path) -> PathBuf {
    if let Some(javac) = std::env::var_os("PARTLOG_JAVAC").filter(|v| !v.is_empty()) {
        return PathBuf::from(javac);
    }
    match java.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        Some(dir) => dir.join("javac"),
        None => PathBuf::from(OsString::from("javac")),
    }
}

enum Value {
    Number(i64),
    Text(String),
}

fn measurement(object: BTreeMap<String, Value>) -> Result<Measurement, String> {
    let workload = match object.get("workload") {
        Some(Value::Text(name)) => name.clone(),
        _ => return Err("a measurement without a workload".into()),
    };
    let fields: BTreeMap<String, i64> = object
        .into_iter()
        .filter_map(|(key, value)| match value {
            Value::Number(n) => Some((key, n)),
            Value::Text(_) => None,
        })
        .collect();
    let unsigned = |name: &str| -> Result<u64, String> {
        let value = fields
            .get(name)
            .copied()
            .ok_or_else(|| format!("{workload} measurement has no {name}"))?;
        u64::try_from(value).map_err(|_| format!("{workload}: negative {name} {value}"))
    };
    Ok(Measurement {
        nanos: unsigned("nanos")?,
        items: unsigned("items")?,
        bytes: unsigned("bytes")?,
        workload: workload.clone(),
        fields,
    })
}

/// The harness prints flat objects of integers and strings without escapes beyond `\\` and
/// `\"`; this reads exactly that, and says what else it met.
fn parse_flat_json(line: &str) -> Result<BTreeMap<String, Value>, String> {
    let body = line
        .strip_prefix('{')
        .and_then(|rest| rest.strip_suffix('}'))
        .ok_or("not a JSON object")?;
    let mut object = BTreeMap::new();
    let mut rest = body.trim();
    while !rest.is_empty() {
        let (key, after_key) = string(rest)?;
        let after_colon = after_key
            .trim_start()
            .strip_prefix(':')
            .ok_or("no ':' after a key")?
            .trim_start();
        let (value, after_value) = if after_colon.starts_with('"') {
            let (text, after) = string(after_colon)?;
            (Value::Text(text), after)
        } else {
            let end = after_colon.find(',').unwrap_or(after_colon.len());
            let number = after_colon[..end]
                .trim()
                .parse::<i64>()
                .map_err(|e| format!("value of {key}: {e}"))?;
            (Value::Number(number), &after_colon[end..])
        };
        object.insert(key, value);
        let after_value = after_value.trim_start();
        rest = match after_value.strip_prefix(',') {
            Some(next) => next.trim_start(),
            None if after_value.is_empty() => after_value,
            None => return Err(format!("unexpected {after_value:?}")),
        };
    }
    Ok(object)
}

fn string(text: &str) -> Result<(String, &str), String> {
    let inner = text.strip_prefix('"').ok_or("expected a string")?;
    let mut out = String::new();
    let mut chars = inner.char_indices();
    while let Some((at, c)) = chars.next() {
        match c {
            '"' => return Ok((out, &inner[at + 1..])),
            '\\' => match chars.next() {
                Some((_, escaped)) => out.push(escaped),
                None => return Err("a string ends in '\\'".into()),
            },
            c => out.push(c),
        }
    }
    Err("an unterminated string".into())
}
