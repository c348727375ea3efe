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

#[path = "../../../tests/common/java_driver.rs"]
mod java_driver;
#[path = "../../../tests/common/kafka.rs"]
mod kafka;

use std::path::Path;
use std::sync::OnceLock;

use java_driver::{JavaDriver, Random, hex};

use partlog_groups::assignor::java_string_hash;
use partlog_groups::group::consumer_protocol::{Assignment, Subscription, TopicPartitions};
use partlog_groups::offsets::dump_text::{
    self as dump_text, MemberBlobs, group_metadata_value_json, offset_commit_value_json,
};
use partlog_groups::offsets::records::{
    GroupMetadataValue, MemberMetadata, OffsetCommitValue, OffsetsKey, group_partition,
};

/// Kafka's classes behind `GroupsDriver`, compiled at first use; `None` to skip.
fn driver() -> Option<&'static JavaDriver> {
    static DRIVER: OnceLock<Result<JavaDriver, String>> = OnceLock::new();
    java_driver::compile(
        &DRIVER,
        "GroupsDriver",
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kafka/GroupsDriver.java"),
        Path::new(env!("CARGO_TARGET_TMPDIR")),
    )
}

/// Runs the driver on `commands`; one answer per command, or `None` to skip.
fn ask(commands: &[String]) -> Option<Vec<String>> {
    Some(driver()?.ask(commands))
}

#[test]
fn group_partition_matches_kafkas_string_hash_and_utils_abs() {
    let mut random = Random::new(0x6e0);
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
    let mut random = Random::new(0x0ff5e7);
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
        OffsetsKey::OffsetCommit { .. } => (1, dump_text::key_json(&decoded_key).unwrap()),
        OffsetsKey::GroupMetadata { .. } => (2, dump_text::key_json(&decoded_key).unwrap()),
        OffsetsKey::Other { .. } => return "error".to_owned(),
    };
    let version = |v: &[u8]| i16::from_be_bytes([v[0], v[1]]);
    let value_part = match (value, &decoded_key) {
        (None, _) => "- <DELETE>".to_owned(),
        (Some(v), OffsetsKey::OffsetCommit { .. }) => match OffsetCommitValue::decode(v) {
            Ok(decoded) => format!(
                "{} {}",
                version(v),
                offset_commit_value_json(&decoded, version(v))
            ),
            Err(_) => return "error".to_owned(),
        },
        (Some(v), _) => match GroupMetadataValue::decode(v) {
            Ok(decoded) => format!(
                "{} {}",
                version(v),
                group_metadata_value_json(&decoded, version(v), MemberBlobs::Base64)
            ),
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
    let mut random = Random::new(0x9a7e);
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
    let mut random = Random::new(0xb10b);
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
