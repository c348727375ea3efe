//! Runs Kafka's own assignors (`tests/kafka/AssignorDriver.java`, compiled against Kafka 4.4's
//! jars from `.ci/pom.xml`) on JSON cases.
//!
//! Where the tools come from, first match wins:
//! - java: `$PARTLOG_JAVA`, else `java` on `PATH`; javac: `$PARTLOG_JAVAC`, else the `javac` next
//!   to `$PARTLOG_JAVA`, else `javac` on `PATH`;
//! - classpath: `$PARTLOG_KAFKA_CLASSPATH`, else `$PARTLOG_CACHE/kafka-classpath.txt` (default
//!   `$HOME/.cache/partlog/kafka-classpath.txt`), which `.ci/run` writes.
//!
//! Without them, [`KafkaDriver::locate`] says why; callers skip with a message, except under
//! `CI=true`, where they must fail.
#![allow(
    dead_code,
    reason = "the differential test and the benchmark use different parts"
)]

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{OnceLock, mpsc};
use std::time::Duration;

use partlog_groups::assignor::{MemberSubscription, PartitionsPerTopic, TopicPartition};
use serde_json::{Value, json};

/// How long one driver run may take before the caller fails: a batch of thousands of sticky
/// cases takes seconds; the margin is for a loaded 2-core machine.
pub const DRIVER_TIMEOUT: Duration = Duration::from_secs(900);

/// Whether this is a CI run, where a missing Java must fail instead of skipping.
pub fn running_in_ci() -> bool {
    std::env::var("CI").is_ok_and(|value| value == "true")
}

fn env_nonempty(name: &str) -> Option<OsString> {
    std::env::var_os(name).filter(|value| !value.is_empty())
}

/// A compiled driver, ready to run.
#[derive(Clone)]
pub struct KafkaDriver {
    java: PathBuf,
    classpath: String,
}

impl KafkaDriver {
    /// Finds Java and Kafka's jars and compiles the driver into `out_dir`, once per process:
    /// tests of one binary run in parallel, and a javac writing the class file while another
    /// test's JVM loads it fails that JVM with "Truncated class file". The class directory is
    /// per process too, since test binaries and benchmarks share `out_dir`.
    pub fn locate(out_dir: &Path) -> Result<KafkaDriver, String> {
        static COMPILED: OnceLock<Result<KafkaDriver, String>> = OnceLock::new();
        COMPILED.get_or_init(|| Self::compile(out_dir)).clone()
    }

    fn compile(out_dir: &Path) -> Result<KafkaDriver, String> {
        let java =
            env_nonempty("PARTLOG_JAVA").map_or_else(|| PathBuf::from("java"), PathBuf::from);
        let javac = match env_nonempty("PARTLOG_JAVAC") {
            Some(javac) => PathBuf::from(javac),
            None => match java.parent().filter(|dir| !dir.as_os_str().is_empty()) {
                Some(dir) => dir.join("javac"),
                None => PathBuf::from("javac"),
            },
        };
        let classpath = locate_classpath()?;
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kafka/AssignorDriver.java");
        let classes = out_dir.join(format!("assignor-driver-{}", std::process::id()));
        std::fs::create_dir_all(&classes)
            .map_err(|e| format!("cannot create {}: {e}", classes.display()))?;
        let output = Command::new(&javac)
            .arg("-d")
            .arg(&classes)
            .arg("-cp")
            .arg(&classpath)
            .arg(&source)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| {
                format!(
                    "cannot run `{}` ({e}); install a JDK 17+ or set PARTLOG_JAVAC",
                    javac.display()
                )
            })?;
        if !output.status.success() {
            return Err(format!(
                "javac failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        Ok(KafkaDriver {
            java,
            classpath: format!("{}:{}", classes.display(), classpath),
        })
    }

    /// Runs the driver on `cases` (one JSON object per line) and returns its output lines.
    pub fn run(&self, cases: &[String]) -> Result<Vec<String>, String> {
        let mut child = Command::new(&self.java)
            .arg("-Dorg.slf4j.simpleLogger.defaultLogLevel=off")
            .arg("-cp")
            .arg(&self.classpath)
            .arg("AssignorDriver")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run `{}`: {e}", self.java.display()))?;
        let mut stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let stderr = child.stderr.take().ok_or("no stderr")?;
        let input: String = cases.iter().map(|c| format!("{c}\n")).collect();
        let writer = std::thread::spawn(move || {
            // A failed write shows up as missing output lines below.
            let _ = stdin.write_all(input.as_bytes());
        });
        let err_reader =
            std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let lines: Result<Vec<String>, _> = BufReader::new(stdout).lines().collect();
            let _ = tx.send(lines);
        });
        let lines = match rx.recv_timeout(DRIVER_TIMEOUT) {
            Ok(lines) => lines.map_err(|e| format!("reading the driver's output: {e}"))?,
            Err(_) => {
                let _ = child.kill();
                return Err(format!(
                    "the Java driver did not finish within {DRIVER_TIMEOUT:?}"
                ));
            }
        };
        let _ = writer.join();
        let status = child.wait().map_err(|e| e.to_string())?;
        let stderr = err_reader.join().unwrap_or_default();
        if !status.success() || lines.len() != cases.len() {
            return Err(format!(
                "the Java driver exited with {status} after {} of {} cases: {stderr}",
                lines.len(),
                cases.len()
            ));
        }
        Ok(lines)
    }
}

fn locate_classpath() -> Result<String, String> {
    let classpath = match env_nonempty("PARTLOG_KAFKA_CLASSPATH") {
        Some(classpath) => classpath.to_string_lossy().into_owned(),
        None => {
            let cache = match env_nonempty("PARTLOG_CACHE") {
                Some(cache) => PathBuf::from(cache),
                None => {
                    PathBuf::from(env_nonempty("HOME").ok_or("no HOME")?).join(".cache/partlog")
                }
            };
            let file = cache.join("kafka-classpath.txt");
            std::fs::read_to_string(&file).map_err(|e| {
                format!("no PARTLOG_KAFKA_CLASSPATH and cannot read {} ({e}); run .ci/kafka-classpath.sh", file.display())
            })?
        }
    };
    let classpath = classpath.trim().to_owned();
    match classpath.split(':').find(|jar| !Path::new(jar).exists()) {
        _ if classpath.is_empty() => Err("the Kafka classpath is empty".to_owned()),
        Some(missing) => Err(format!(
            "the Kafka classpath names {missing}, which does not exist"
        )),
        None => Ok(classpath),
    }
}

/// One case in the driver's input format (`tests/kafka/AssignorDriver.java`). With `time_runs`
/// above zero, the driver also times `time_runs` assignments after as many warm-up runs.
pub fn case_json(
    id: usize,
    assignor: &str,
    topics: &PartitionsPerTopic,
    members: &[MemberSubscription],
    time_runs: u32,
) -> String {
    case_value(id, assignor, topics, members, time_runs).to_string()
}

/// [`case_json`] as a JSON value, for callers that add to it (a member's `history`).
pub fn case_value(
    id: usize,
    assignor: &str,
    topics: &PartitionsPerTopic,
    members: &[MemberSubscription],
    time_runs: u32,
) -> Value {
    let members: Vec<Value> = members
        .iter()
        .map(|m| {
            json!({
                "id": m.member_id,
                "instance": m.instance_id,
                "topics": m.topics,
                "owned": partitions_json(&m.owned),
                "generation": m.generation.unwrap_or(-1),
                "userData": m.user_data.as_deref().map(hex),
            })
        })
        .collect();
    json!({"id": id, "assignor": assignor, "topics": topics, "members": members, "timeRuns": time_runs})
}

/// Partitions as the driver writes them: `[["t", 0], ...]`, in order.
pub fn partitions_json(partitions: &[TopicPartition]) -> Value {
    partitions
        .iter()
        .map(|tp| json!([tp.topic, tp.partition]))
        .collect()
}

/// Partitions the driver wrote (`[["t", 0], ...]`), in order; `None` if malformed.
pub fn partitions_from_json(value: &Value) -> Option<Vec<TopicPartition>> {
    value
        .as_array()?
        .iter()
        .map(|tp| {
            Some(TopicPartition::new(
                tp.get(0)?.as_str()?,
                i32::try_from(tp.get(1)?.as_i64()?).ok()?,
            ))
        })
        .collect()
}

/// Bytes as lowercase hex, the driver's form of user data.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads a case written by [`case_json`] back: its assignor, topics and members.
pub fn parse_case(
    line: &str,
) -> Result<(String, PartitionsPerTopic, Vec<MemberSubscription>), String> {
    let case: Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
    let assignor = case["assignor"].as_str().ok_or("no assignor")?.to_owned();
    let topics = case["topics"]
        .as_object()
        .ok_or("no topics")?
        .iter()
        .map(|(t, n)| {
            Ok((
                t.clone(),
                n.as_i64()
                    .and_then(|n| i32::try_from(n).ok())
                    .ok_or("bad count")?,
            ))
        })
        .collect::<Result<PartitionsPerTopic, String>>()?;
    let members = case["members"]
        .as_array()
        .ok_or("no members")?
        .iter()
        .map(|m| {
            let text = |v: &Value| v.as_str().map(str::to_owned);
            let owned = m["owned"]
                .as_array()
                .ok_or("no owned")?
                .iter()
                .map(|tp| {
                    let topic = tp[0].as_str().ok_or("bad owned topic")?;
                    let id = tp[1]
                        .as_i64()
                        .and_then(|p| i32::try_from(p).ok())
                        .ok_or("bad owned id")?;
                    Ok(TopicPartition::new(topic, id))
                })
                .collect::<Result<Vec<_>, String>>()?;
            let user_data = match m["userData"].as_str() {
                Some(hex) => Some(
                    (0..hex.len() / 2)
                        .map(|i| {
                            u8::from_str_radix(&hex[2 * i..2 * i + 2], 16)
                                .map_err(|e| e.to_string())
                        })
                        .collect::<Result<Vec<u8>, String>>()?,
                ),
                None => None,
            };
            Ok(MemberSubscription {
                member_id: text(&m["id"]).ok_or("no id")?,
                instance_id: text(&m["instance"]),
                topics: m["topics"]
                    .as_array()
                    .ok_or("no topics")?
                    .iter()
                    .filter_map(text)
                    .collect(),
                owned,
                generation: m["generation"]
                    .as_i64()
                    .and_then(|g| i32::try_from(g).ok())
                    .filter(|g| *g >= 0),
                user_data,
                rack: None,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok((assignor, topics, members))
}
