//! partlog-groups' `__consumer_offsets` records and consumer-protocol blobs against Kafka 4.4's
//! own classes (issue 34): `String.hashCode` and `Utils.abs` for a group's partition;
//! `GroupCoordinatorRecordHelpers.newOffsetCommitRecord` and `GroupCoordinatorRecordSerde` for
//! what Kafka writes; and Kafka's reader on partlog's bytes (valid and damaged), whose JSON must
//! say what partlog's decoder says, field for field.
//!
//! `tests/kafka/GroupsDriver.java` is compiled against the jars `.ci/kafka-classpath.sh`
//! resolves and fed one command per line, as partlog-engine's `tests/kafka_classes.rs` drives
//! its `EngineDriver`. Without Java and the jars the tests skip with a message, except under
//! `CI=true`, where they fail.

#[path = "../../../tests/common/kafka.rs"]
mod kafka;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use partlog_groups::assignor::java_string_hash;
use partlog_groups::group::consumer_protocol::{Assignment, Subscription, TopicPartitions};
use partlog_groups::offsets::records::{
    GroupMetadataValue, MemberMetadata, OffsetCommitValue, OffsetsKey, group_partition,
};

#[path = "common/offsets_json.rs"]
mod json;

/// The compiled driver's classpath (its classes, then Kafka's jars), or `None` to skip.
fn driver() -> Option<&'static (PathBuf, String)> {
    static DRIVER: OnceLock<Result<(PathBuf, String), String>> = OnceLock::new();
    let tools = kafka::kafka_tools()?;
    let compiled = DRIVER.get_or_init(|| {
        let javac = match std::env::var_os("PARTLOG_JAVAC").filter(|v| !v.is_empty()) {
            Some(javac) => PathBuf::from(javac),
            None => tools
                .java
                .parent()
                .filter(|dir| !dir.as_os_str().is_empty())
                .map_or_else(|| PathBuf::from("javac"), |dir| dir.join("javac")),
        };
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kafka/GroupsDriver.java");
        let classes = Path::new(env!("CARGO_TARGET_TMPDIR")).join("groups-driver");
        std::fs::create_dir_all(&classes).map_err(|e| e.to_string())?;
        let output = Command::new(&javac)
            .arg("-d")
            .arg(&classes)
            .arg("-cp")
            .arg(&tools.classpath)
            .arg(&source)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| {
                format!(
                    "cannot run {} ({e}); install a JDK or set PARTLOG_JAVAC",
                    javac.display()
                )
            })?;
        if !output.status.success() {
            return Err(format!(
                "javac failed: {}",
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        Ok((
            tools.java.clone(),
            format!("{}:{}", classes.display(), tools.classpath),
        ))
    });
    match compiled {
        Ok(driver) => Some(driver),
        Err(why) if kafka::running_in_ci() => {
            panic!("the Kafka driver is required under CI=true: {why}")
        }
        Err(why) => {
            eprintln!("skipping: cannot compile the Kafka driver: {why}");
            None
        }
    }
}

/// Runs the driver on `commands`; one answer per command.
fn ask(commands: &[String]) -> Option<Vec<String>> {
    let (java, classpath) = driver()?;
    let mut child = Command::new(java)
        .args([
            "-XX:TieredStopAtLevel=1",
            "-XX:+UseSerialGC",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=off",
        ])
        .arg("-cp")
        .arg(classpath)
        .arg("GroupsDriver")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the Java driver");
    let input: String = commands.iter().map(|c| format!("{c}\n")).collect();
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let output = child.wait_with_output().expect("the Java driver's output");
    writer
        .join()
        .expect("writer thread")
        .expect("write the commands");
    assert!(
        output.status.success(),
        "the Java driver failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<String> = String::from_utf8(output.stdout)
        .expect("UTF-8 output")
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(lines.len(), commands.len(), "one answer per command");
    Some(lines)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// xorshift64*: the tests' own reproducible random numbers.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn text(&mut self, max: u64) -> String {
        const PIECES: [&str; 12] = ["a", "Z", "9", "-", "_", ".", "é", "ß", "😀", "中", " ", "~"];
        (0..self.below(max + 1))
            .map(|_| PIECES[self.below(12) as usize])
            .collect()
    }

    fn blob(&mut self, max: u64) -> Vec<u8> {
        (0..self.below(max + 1))
            .map(|_| self.next() as u8)
            .collect()
    }

    fn maybe(&mut self) -> bool {
        self.below(3) == 0
    }
}

#[test]
fn group_partition_matches_kafkas_string_hash_and_utils_abs() {
    let mut random = Random(0x6e0);
    let mut ids: Vec<String> = ["g1", "my-group", "polygenelubricants", ""]
        .map(str::to_owned)
        .to_vec();
    ids.extend((0..300).map(|_| random.text(24)));
    let commands: Vec<String> = ids
        .iter()
        .map(|id| format!("hash {}", hex(id.as_bytes())))
        .collect();
    let Some(answers) = ask(&commands) else {
        return;
    };
    for (id, answer) in ids.iter().zip(answers) {
        assert_eq!(
            format!("{} {}", java_string_hash(id), group_partition(id, 50)),
            answer,
            "{id:?}"
        );
    }
}

/// Kafka 4.4's coordinator writes an offset commit as v1 with an expire timestamp, else v4;
/// partlog's encoder gives the same bytes at those versions, and its default v3 (the issue's
/// golden layout) reads back in Kafka as the same offset.
#[test]
fn offset_commit_records_equal_kafkas_record_helpers() {
    let mut random = Random(0x0ff5e7);
    let mut cases = Vec::new();
    for _ in 0..300 {
        let key = OffsetsKey::OffsetCommit {
            group: random.text(12),
            topic: random.text(12),
            partition: random.next() as i32,
        };
        let mut value = OffsetCommitValue::new(
            random.next() as i64 >> 1,
            random.text(20),
            random.next() as i64 >> 2,
        );
        if random.maybe() {
            value.expire_timestamp = Some(random.next() as i64 >> 2);
        } else if !random.maybe() {
            value.leader_epoch = (random.next() >> 34) as i32;
        }
        cases.push((key, value));
    }
    let commands: Vec<String> = cases
        .iter()
        .map(|(key, value)| {
            let OffsetsKey::OffsetCommit {
                group,
                topic,
                partition,
            } = key
            else {
                unreachable!()
            };
            format!(
                "commit {} {} {partition} {} {} {} {} {}",
                hex(group.as_bytes()),
                hex(topic.as_bytes()),
                value.offset,
                value.leader_epoch,
                hex(value.metadata.as_bytes()),
                value.commit_timestamp,
                value.expire_timestamp.unwrap_or(-1),
            )
        })
        .collect();
    let Some(answers) = ask(&commands) else {
        return;
    };
    for ((key, value), answer) in cases.iter().zip(answers) {
        let version = if value.expire_timestamp.is_some() {
            1
        } else {
            4
        };
        let ours = format!(
            "{} {}",
            hex(&key.encode().unwrap()),
            hex(&value.encode_version(version).unwrap())
        );
        assert_eq!(ours, answer, "{key:?} {value:?}");
    }
}

fn random_group(random: &mut Random) -> GroupMetadataValue {
    let members = (0..random.below(4))
        .map(|_| MemberMetadata {
            member_id: random.text(20),
            group_instance_id: random.maybe().then(|| random.text(8)),
            client_id: random.text(8),
            client_host: random.text(12),
            rebalance_timeout: random.next() as i32,
            session_timeout: random.next() as i32,
            subscription: random.blob(30),
            assignment: random.blob(30),
        })
        .collect();
    GroupMetadataValue {
        protocol_type: random.text(8),
        generation: random.next() as i32,
        protocol: (!random.maybe()).then(|| random.text(8)),
        leader: (!random.maybe()).then(|| random.text(8)),
        current_state_timestamp: random.next() as i64,
        members,
    }
}

/// What partlog's decoder makes of a record, in the driver's `read` answer's form.
fn describe(key: &[u8], value: Option<&[u8]>) -> String {
    let Ok(decoded_key) = OffsetsKey::decode(key) else {
        return "error".to_owned();
    };
    let (record_type, key_json) = match &decoded_key {
        OffsetsKey::OffsetCommit { .. } => (1, json::key(&decoded_key)),
        OffsetsKey::GroupMetadata { .. } => (2, json::key(&decoded_key)),
        OffsetsKey::Other { .. } => return "error".to_owned(),
    };
    let version = |v: &[u8]| i16::from_be_bytes([v[0], v[1]]);
    let value_part = match (value, &decoded_key) {
        (None, _) => "- <DELETE>".to_owned(),
        (Some(v), OffsetsKey::OffsetCommit { .. }) => match OffsetCommitValue::decode(v) {
            Ok(decoded) => format!(
                "{} {}",
                version(v),
                json::offset_value(&decoded, version(v))
            ),
            Err(_) => return "error".to_owned(),
        },
        (Some(v), _) => match GroupMetadataValue::decode(v) {
            Ok(decoded) => format!("{} {}", version(v), json::group_value(&decoded, version(v))),
            Err(_) => return "error".to_owned(),
        },
    };
    // Kafka writes a key back with the record type it read (0 stays 0).
    format!("{record_type} {key_json} {value_part}")
}

/// Kafka's `GroupCoordinatorRecordSerde` reads every record partlog writes, at every version,
/// as partlog's decoder reads it (field for field, through Kafka's JSON converters), writes it
/// back to the same bytes, and refuses exactly the damaged records partlog refuses.
#[test]
fn kafkas_serde_reads_partlog_records_as_partlog_does() {
    let mut random = Random(0x9a7e);
    let mut records: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
    for _ in 0..150 {
        let group = random.text(10);
        let g = random_group(&mut random);
        let version = random.below(5) as i16;
        records.push((
            OffsetsKey::GroupMetadata {
                group: group.clone(),
            }
            .encode()
            .unwrap(),
            Some(g.encode_version(version).unwrap()),
        ));
        let mut value =
            OffsetCommitValue::new(random.next() as i64, random.text(10), random.next() as i64);
        value.leader_epoch = random.next() as i32;
        value.expire_timestamp = Some(random.next() as i64);
        if random.maybe() {
            value.topic_id = random.next().to_be_bytes().repeat(2).try_into().unwrap();
        }
        let key = OffsetsKey::OffsetCommit {
            group,
            topic: random.text(6),
            partition: random.next() as i32,
        };
        records.push((
            key.encode().unwrap(),
            Some(value.encode_version(random.below(5) as i16).unwrap()),
        ));
        records.push((key.encode().unwrap(), None));
    }
    // Damaged copies: cut short, or one byte flipped.
    let intact = records.len();
    for i in 0..intact {
        let (key, value) = records[i].clone();
        let Some(mut value) = value else { continue };
        if random.maybe() {
            value.truncate(random.below(value.len() as u64) as usize);
        } else {
            let at = random.below(value.len() as u64) as usize;
            value[at] ^= 1 << random.below(8);
        }
        records.push((key, Some(value)));
    }
    let commands: Vec<String> = records
        .iter()
        .map(|(k, v)| {
            format!(
                "read {} {}",
                hex(k),
                v.as_deref().map_or("-".to_owned(), hex)
            )
        })
        .collect();
    let Some(answers) = ask(&commands) else {
        return;
    };
    for (i, ((key, value), answer)) in records.iter().zip(answers).enumerate() {
        let ours = describe(key, value.as_deref());
        if i < intact {
            let expected = format!(
                "{ours} {} {}",
                hex(key),
                value.as_deref().map_or("-".to_owned(), hex)
            );
            assert_eq!(expected, answer, "record {i}");
        } else if ours == "error" || answer.starts_with("error") {
            // Kafka's reader refuses a damaged record exactly when partlog's does, except
            // where partlog is stricter about what Java reads leniently (none so far).
            assert_eq!(
                ours == "error",
                answer.starts_with("error"),
                "record {i} ({}): ours {ours}, Kafka's {answer}",
                value.as_deref().map_or("-".to_owned(), hex)
            );
        } else {
            assert!(
                answer.starts_with(&ours),
                "record {i}: ours {ours}, Kafka's {answer}"
            );
        }
    }
}

#[test]
fn consumer_protocol_blobs_are_kafkas() {
    let mut random = Random(0xb10b);
    let mut commands = Vec::new();
    let mut expected = Vec::new();
    for _ in 0..200 {
        let topics = |r: &mut Random| -> Vec<TopicPartitions> {
            (0..r.below(3))
                .map(|_| {
                    TopicPartitions::new(
                        r.text(6),
                        (0..r.below(4)).map(|_| r.next() as i32).collect::<Vec<_>>(),
                    )
                })
                .collect()
        };
        let version = random.below(4) as i16;
        let mut s = Subscription::new(
            (0..random.below(3))
                .map(|_| random.text(6))
                .collect::<Vec<_>>(),
        );
        s.user_data = (!random.maybe()).then(|| random.blob(10));
        s.owned_partitions = topics(&mut random);
        s.generation_id = random.next() as i32;
        s.rack_id = random.maybe().then(|| random.text(4));
        let bytes = s.encode(version).unwrap();
        commands.push(format!("sub {}", hex(&bytes)));
        expected.push(format!("{version} {}", hex(&bytes)));
        let a = Assignment {
            assigned_partitions: topics(&mut random),
            user_data: random.maybe().then(|| random.blob(10)),
        };
        let bytes = a.encode(version).unwrap();
        commands.push(format!("asg {}", hex(&bytes)));
        expected.push(format!("{version} {}", hex(&bytes)));
    }
    let Some(answers) = ask(&commands) else {
        return;
    };
    assert_eq!(answers, expected);
}
