//! Kafka's own `DumpLogSegments --offsets-decoder` on a `__consumer_offsets` partition that
//! partlog wrote (issue 34): every offset commit and group record, at every version partlog
//! reads, comes back with the values partlog wrote, with nothing on stderr.
//!
//! Java and Kafka's jars are found as `tests/common/kafka.rs` finds them; without them the
//! test skips with a message, except under `CI=true`, where it fails.

#[path = "../../../tests/common/kafka.rs"]
mod kafka;

use partlog::{CleanupPolicy, CompressionType, Log, LogConfig, NewRecord};
use partlog_groups::group::consumer_protocol::{Assignment, Subscription, TopicPartitions};
use partlog_groups::offsets::dump_text::kafka_decoder_text;
use partlog_groups::offsets::records::{
    CONSUMER_OFFSETS_TOPIC, GroupMetadataValue, MemberMetadata, OFFSETS_TOPIC_SEGMENT_BYTES,
    OffsetCommitValue, OffsetsKey, group_partition,
};

const T: i64 = 1_700_000_000_000;

enum Value {
    Offset(OffsetCommitValue, i16),
    Group(GroupMetadataValue, i16),
    Tombstone,
}

fn group_value(generation: i32) -> GroupMetadataValue {
    let mut subscription = Subscription::new(["orders"]);
    subscription.owned_partitions = vec![TopicPartitions::new("orders", [0])];
    GroupMetadataValue {
        protocol_type: "consumer".into(),
        generation,
        protocol: Some("range".into()),
        leader: Some("c-1".into()),
        current_state_timestamp: T,
        members: vec![MemberMetadata {
            member_id: "c-1".into(),
            group_instance_id: Some("static-1".into()),
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            rebalance_timeout: 300_000,
            session_timeout: 45_000,
            subscription: subscription.encode(3).unwrap(),
            assignment: Assignment {
                assigned_partitions: vec![TopicPartitions::new("orders", [0, 1])],
                user_data: None,
            }
            .encode(3)
            .unwrap(),
        }],
    }
}

fn records() -> Vec<(OffsetsKey, Value)> {
    let key = |partition| OffsetsKey::OffsetCommit {
        group: "g1".into(),
        topic: "orders".into(),
        partition,
    };
    let group = OffsetsKey::GroupMetadata { group: "g1".into() };
    let mut expiring = OffsetCommitValue::new(11, "meta", T + 1);
    expiring.expire_timestamp = Some(T + 86_400_000);
    let mut with_epoch = OffsetCommitValue::new(42, "", T + 2);
    with_epoch.leader_epoch = 3;
    vec![
        (
            group.clone(),
            Value::Group(
                GroupMetadataValue {
                    members: Vec::new(),
                    protocol: None,
                    leader: None,
                    ..group_value(0)
                },
                3,
            ),
        ),
        (key(0), Value::Offset(OffsetCommitValue::new(10, "", T), 3)),
        (key(1), Value::Offset(expiring, 1)),
        (key(0), Value::Offset(with_epoch.clone(), 4)),
        (
            key(2),
            Value::Offset(OffsetCommitValue::new(7, "old", T), 0),
        ),
        (
            key(2),
            Value::Offset(OffsetCommitValue::new(8, "old", T), 2),
        ),
        (group.clone(), Value::Group(group_value(1), 3)),
        (group.clone(), Value::Group(group_value(2), 2)),
        (key(1), Value::Tombstone),
        (group, Value::Tombstone),
    ]
}

#[test]
fn offsets_decoder_reads_partlog_written_consumer_offsets() {
    let root = tempfile::tempdir().unwrap();
    let partition = group_partition("g1", 50);
    let dir = root
        .path()
        .join(format!("{CONSUMER_OFFSETS_TOPIC}-{partition}"));
    assert!(dir.ends_with("__consumer_offsets-42"));
    let config = LogConfig::builder()
        .cleanup_policy(CleanupPolicy::COMPACT)
        .segment_bytes(OFFSETS_TOPIC_SEGMENT_BYTES)
        .compression_type(CompressionType::Uncompressed)
        .build()
        .unwrap();
    let log = Log::open(&dir, config).unwrap();
    let written = records();
    let mut stored = Vec::new();
    for (i, (key, value)) in written.iter().enumerate() {
        let bytes = match value {
            Value::Offset(v, version) => Some(v.encode_version(*version).unwrap()),
            Value::Group(v, version) => Some(v.encode_version(*version).unwrap()),
            Value::Tombstone => None,
        };
        let key = key.encode().unwrap();
        log.append(&[NewRecord::new(T + i as i64, Some(&key), bytes.as_deref())])
            .unwrap();
        stored.push((key, bytes));
    }
    log.close().unwrap();
    drop(log);

    let files = kafka::segment_files(&dir, &["log"]);
    let Some(output) = kafka::dump_log_segments(
        &files,
        &["--deep-iteration", "--print-data-log", "--offsets-decoder"],
    ) else {
        return;
    };
    assert!(output.status.success(), "{output:?}");
    assert_eq!(output.stderr.trim(), "", "stderr is empty: {output:?}");
    assert!(kafka::bad_lines(&output).is_empty(), "{output:?}");
    let lines: Vec<&str> = output
        .stdout
        .lines()
        .filter(|l| l.starts_with("| offset: "))
        .collect();
    assert_eq!(lines.len(), written.len(), "{output:?}");
    for (offset, ((key, value), line)) in written.iter().zip(&lines).enumerate() {
        // What partlog's own decoder prints for the stored bytes (`partlog dump
        // --offsets-decoder`), which must be Kafka's line, and must say what was written.
        let (key_bytes, value_bytes) = &stored[offset];
        let (key_text, payload) =
            kafka_decoder_text(offset as i64, Some(key_bytes), value_bytes.as_deref());
        let (key_text, payload) = (key_text.unwrap(), payload.unwrap());
        match key {
            OffsetsKey::OffsetCommit {
                group,
                topic,
                partition,
            } => assert_eq!(
                key_text,
                format!(
                    "{{\"type\":\"1\",\"data\":{{\"group\":\"{group}\",\"topic\":\"{topic}\",\"partition\":{partition}}}}}"
                )
            ),
            OffsetsKey::GroupMetadata { group } => assert_eq!(
                key_text,
                format!("{{\"type\":\"2\",\"data\":{{\"group\":\"{group}\"}}}}")
            ),
            OffsetsKey::Other { .. } => unreachable!("the test writes no other type"),
        }
        match value {
            Value::Offset(v, version) => assert!(
                payload.starts_with(&format!(
                    "{{\"version\":\"{version}\",\"data\":{{\"offset\":{},",
                    v.offset
                )) && payload.contains(&format!("\"commitTimestamp\":{}", v.commit_timestamp)),
                "{payload}"
            ),
            Value::Group(v, version) => {
                assert!(
                    payload.starts_with(&format!(
                        "{{\"version\":\"{version}\",\"data\":{{\"protocolType\":\"consumer\",\"generation\":{},",
                        v.generation
                    )),
                    "{payload}"
                );
                // A consumer group's blobs print decoded.
                for m in &v.members {
                    assert!(
                        payload.contains(&format!("\"memberId\":\"{}\"", m.member_id))
                            && payload.contains(r#""assignment":{"assignedPartitions":[{"topic":"orders","partitions":[0,1]}]"#),
                        "{payload}"
                    );
                }
            }
            Value::Tombstone => assert_eq!(payload, "<DELETE>"),
        }
        let printed = line.split_once(" key: ").map(|(_, rest)| rest);
        assert_eq!(
            printed,
            Some(format!("{key_text} payload: {payload}").as_str()),
            "offset {offset}: {line}"
        );
    }
}
