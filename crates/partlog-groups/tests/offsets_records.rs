//! The `__consumer_offsets` records and the consumer-protocol blobs (issue 34): the issue's
//! golden bytes, printed by Kafka 4.4's generated classes, byte for byte; round trips of random
//! values at every version; and damaged bytes, which give an error and never a panic.

use partlog_groups::assignor::TopicPartition;
use partlog_groups::assignor::user_data::{encode_cooperative, encode_sticky};
use partlog_groups::group::consumer_protocol::{Assignment, Subscription, TopicPartitions};
use partlog_groups::offsets::records::{
    GroupMetadataValue, MemberMetadata, OffsetCommitValue, OffsetsKey, group_partition,
};
use proptest::prelude::*;

const TS: i64 = 1_700_000_000_000;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn commit_key() -> OffsetsKey {
    OffsetsKey::OffsetCommit {
        group: "g1".into(),
        topic: "t".into(),
        partition: 0,
    }
}

fn golden_subscription_v1() -> Subscription {
    let mut s = Subscription::new(["t"]);
    s.owned_partitions = vec![TopicPartitions::new("t", [0])];
    s
}

fn golden_group() -> GroupMetadataValue {
    GroupMetadataValue {
        protocol_type: "consumer".into(),
        generation: 1,
        protocol: Some("range".into()),
        leader: Some("c-1".into()),
        current_state_timestamp: TS,
        members: vec![MemberMetadata {
            member_id: "c-1".into(),
            group_instance_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            rebalance_timeout: 300_000,
            session_timeout: 45_000,
            subscription: golden_subscription_v1().encode(1).unwrap(),
            assignment: Assignment {
                assigned_partitions: vec![TopicPartitions::new("t", [0])],
                user_data: None,
            }
            .encode(3)
            .unwrap(),
        }],
    }
}

#[test]
fn group_partition_is_abs_java_string_hash_mod_50() {
    assert_eq!(group_partition("g1", 50), 42);
    assert_eq!(group_partition("my-group", 50), 12);
    assert_eq!(group_partition("polygenelubricants", 50), 0);
}

#[test]
fn offset_commit_key_v1_golden_bytes() {
    let bytes = commit_key().encode().unwrap();
    assert_eq!(hex(&bytes), "00010002673100017400000000");
    assert_eq!(bytes.len(), 13);
    assert_eq!(OffsetsKey::decode(&bytes).unwrap(), commit_key());
    // Record type 0 is the same key.
    let mut v0 = bytes.clone();
    v0[1] = 0;
    assert_eq!(OffsetsKey::decode(&v0).unwrap(), commit_key());
}

#[test]
fn offset_commit_value_v3_golden_bytes() {
    let value = OffsetCommitValue::new(42, "", TS);
    let bytes = value.encode().unwrap();
    assert_eq!(
        hex(&bytes),
        "0003000000000000002affffffff00000000018bcfe56800"
    );
    assert_eq!(bytes.len(), 24);
    assert_eq!(OffsetCommitValue::decode(&bytes).unwrap(), value);
}

#[test]
fn offset_commit_value_v1_with_expire_golden_bytes() {
    let mut value = OffsetCommitValue::new(42, "", TS);
    value.expire_timestamp = Some(TS + 86_400_000);
    let bytes = value.encode().unwrap();
    assert_eq!(
        hex(&bytes),
        "0001000000000000002a00000000018bcfe568000000018bd50bc400"
    );
    assert_eq!(bytes.len(), 28);
    assert_eq!(OffsetCommitValue::decode(&bytes).unwrap(), value);
}

/// What Kafka 4.4's `GroupCoordinatorRecordHelpers.newOffsetCommitRecord` writes without an
/// expire timestamp: v4, flexible, the topic id as tagged field 0 when it has one.
#[test]
fn offset_commit_value_v4_as_kafka_4_4_writes_it() {
    let plain = unhex("0004000000000000002affffffff010000018bcfe5680000");
    let value = OffsetCommitValue::decode(&plain).unwrap();
    assert_eq!(value, OffsetCommitValue::new(42, "", TS));
    assert_eq!(value.encode_version(4).unwrap(), plain);
    let tagged = unhex(
        "0004000000000000002affffffff010000018bcfe568000100106f7f25f7a091442b8e23c0758a9af712",
    );
    let value = OffsetCommitValue::decode(&tagged).unwrap();
    assert_eq!(hex(&value.topic_id), "6f7f25f7a091442b8e23c0758a9af712");
    assert_eq!(value.encode_version(4).unwrap(), tagged);
}

#[test]
fn group_metadata_key_v2_golden_bytes() {
    let key = OffsetsKey::GroupMetadata { group: "g1".into() };
    let bytes = key.encode().unwrap();
    assert_eq!(hex(&bytes), "000200026731");
    assert_eq!(OffsetsKey::decode(&bytes).unwrap(), key);
}

#[test]
fn group_metadata_value_v3_golden_bytes() {
    let golden = "00030008636f6e73756d657200000001000572616e67650003632d310000018bcfe56800000000010003632d31ffff000163000a2f3132372e302e302e31000493e00000afc80000001c000100000001000174ffffffff00000001000174000000010000000000000019000300000001000174000000020000000000000001ffffffff";
    // The golden assignment is t:[0,1], the value's blob the Assignment v3 golden.
    let mut group = golden_group();
    group.members[0].assignment = golden_assignment().encode(3).unwrap();
    let bytes = group.encode().unwrap();
    assert_eq!(hex(&bytes), golden);
    assert_eq!(bytes.len(), 131);
    assert_eq!(GroupMetadataValue::decode(&bytes).unwrap(), group);
}

fn golden_assignment() -> Assignment {
    Assignment {
        assigned_partitions: vec![TopicPartitions::new("t", [0, 1])],
        user_data: None,
    }
}

#[test]
fn consumer_protocol_golden_bytes() {
    let v1 = golden_subscription_v1();
    assert_eq!(
        hex(&v1.encode(1).unwrap()),
        "000100000001000174ffffffff000000010001740000000100000000"
    );
    let mut v3 = v1.clone();
    v3.generation_id = 5;
    let bytes = v3.encode(3).unwrap();
    assert_eq!(
        hex(&bytes),
        "000300000001000174ffffffff00000001000174000000010000000000000005ffff"
    );
    assert_eq!(bytes.len(), 34);
    assert_eq!(Subscription::decode(&bytes).unwrap(), v3);
    assert_eq!(
        Subscription::decode(&v1.encode(1).unwrap()).unwrap(),
        v1,
        "v1 reads with generation -1"
    );
    let assignment = golden_assignment().encode(3).unwrap();
    assert_eq!(
        hex(&assignment),
        "00030000000100017400000002000000000000000 1ffffffff".replace(' ', "")
    );
    assert_eq!(assignment.len(), 25);
    assert_eq!(
        Assignment::decode(&assignment).unwrap(),
        golden_assignment()
    );
}

#[test]
fn assignor_user_data_golden_bytes() {
    let sticky = encode_sticky(
        &[TopicPartition::new("t0", 0), TopicPartition::new("t1", 1)],
        1,
    );
    assert_eq!(
        hex(&sticky),
        "00000002000274300000000100000000000274310000000100000001 00000001".replace(' ', "")
    );
    assert_eq!(hex(&encode_cooperative(5)), "00000005");
}

#[test]
fn offsets_key_record_types_3_and_up_are_other_and_negative_is_an_error() {
    assert_eq!(
        OffsetsKey::decode(&unhex("0003 0002 6731")).unwrap(),
        OffsetsKey::Other { record_type: 3 }
    );
    assert!(OffsetsKey::decode(&unhex("ffff 0002 6731")).is_err());
    assert!(OffsetsKey::Other { record_type: 3 }.encode().is_err());
}

#[test]
fn damaged_records_are_errors_that_say_where() {
    let key = commit_key().encode().unwrap();
    for cut in 0..key.len() {
        assert!(OffsetsKey::decode(&key[..cut]).is_err(), "key cut at {cut}");
    }
    let value = golden_group().encode().unwrap();
    for cut in 0..value.len() {
        let e = GroupMetadataValue::decode(&value[..cut]).unwrap_err();
        assert!(e.position <= cut, "{e}");
    }
    // A member count far beyond the bytes: refused before allocating.
    let mut huge = golden_group().encode().unwrap();
    let at = 2 + 10 + 4 + 7 + 5 + 8;
    huge[at..at + 4].copy_from_slice(&i32::MAX.to_be_bytes());
    let e = GroupMetadataValue::decode(&huge).unwrap_err();
    assert!(e.what.contains("does not fit"), "{e}");
    // Unknown versions.
    assert!(OffsetCommitValue::decode(&unhex("0005 0000000000000001")).is_err());
    assert!(GroupMetadataValue::decode(&unhex("0005")).is_err());
    // Malformed UTF-8 in a string field is replaced, as Java's decoder replaces it.
    let value = OffsetCommitValue::decode(&unhex(
        "0003 0000000000000001 ffffffff 0001 ff 0000000000000000",
    ))
    .unwrap();
    assert_eq!(value.metadata, "\u{fffd}");
}

#[test]
fn too_long_strings_are_encode_errors() {
    let long = "x".repeat(40_000);
    assert!(OffsetCommitValue::new(1, long.clone(), 0).encode().is_err());
    assert!(OffsetsKey::GroupMetadata { group: long }.encode().is_err());
}

fn text() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[a-zA-Z0-9._é😀-]{0,12}").unwrap()
}

fn blob() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..40)
}

fn member() -> impl Strategy<Value = MemberMetadata> {
    (
        text(),
        proptest::option::of(text()),
        text(),
        text(),
        any::<i32>(),
        any::<i32>(),
        blob(),
        blob(),
    )
        .prop_map(
            |(member_id, group_instance_id, client_id, client_host, r, s, sub, a)| MemberMetadata {
                member_id,
                group_instance_id,
                client_id,
                client_host,
                rebalance_timeout: r,
                session_timeout: s,
                subscription: sub,
                assignment: a,
            },
        )
}

fn group() -> impl Strategy<Value = GroupMetadataValue> {
    (
        text(),
        any::<i32>(),
        proptest::option::of(text()),
        proptest::option::of(text()),
        any::<i64>(),
        proptest::collection::vec(member(), 0..4),
    )
        .prop_map(
            |(protocol_type, generation, protocol, leader, ts, members)| GroupMetadataValue {
                protocol_type,
                generation,
                protocol,
                leader,
                current_state_timestamp: ts,
                members,
            },
        )
}

fn topic_partitions() -> impl Strategy<Value = Vec<TopicPartitions>> {
    proptest::collection::vec(
        (text(), proptest::collection::vec(any::<i32>(), 0..5))
            .prop_map(|(t, p)| TopicPartitions::new(t, p)),
        0..4,
    )
}

/// What reading a value written at `version` gives back: the fields the version lacks at their
/// defaults.
fn as_read(mut g: GroupMetadataValue, version: i16) -> GroupMetadataValue {
    if version < 2 {
        g.current_state_timestamp = -1;
    }
    for m in &mut g.members {
        if version < 3 {
            m.group_instance_id = None;
        }
        if version < 1 {
            m.rebalance_timeout = m.session_timeout;
        }
    }
    g
}

proptest! {
    #[test]
    fn offset_commit_values_round_trip(
        offset in any::<i64>(), epoch in any::<i32>(), metadata in text(), ts in any::<i64>(),
        expire in proptest::option::of(any::<i64>()), topic_id in any::<[u8; 16]>(), version in 0i16..=4,
    ) {
        let value = OffsetCommitValue {
            offset, leader_epoch: epoch, metadata, commit_timestamp: ts,
            expire_timestamp: expire, topic_id,
        };
        let read = OffsetCommitValue::decode(&value.encode_version(version).unwrap()).unwrap();
        let mut expected = value.clone();
        if version < 3 { expected.leader_epoch = -1; }
        if version != 1 { expected.expire_timestamp = None; }
        if version == 1 { expected.expire_timestamp = Some(expire.unwrap_or(-1)); }
        if version != 4 { expected.topic_id = [0; 16]; }
        prop_assert_eq!(read, expected);
        // The default write version loses the topic id, and v1 (written for an expire
        // timestamp) the leader epoch, as Kafka's does.
        let mut plain = value.clone();
        plain.topic_id = [0; 16];
        if plain.expire_timestamp.is_some() { plain.leader_epoch = -1; }
        prop_assert_eq!(OffsetCommitValue::decode(&plain.encode().unwrap()).unwrap(), plain);
    }

    #[test]
    fn offset_commit_keys_round_trip(group in text(), topic in text(), partition in any::<i32>()) {
        let key = OffsetsKey::OffsetCommit { group: group.clone(), topic, partition };
        prop_assert_eq!(OffsetsKey::decode(&key.encode().unwrap()).unwrap(), key);
        let key = OffsetsKey::GroupMetadata { group };
        prop_assert_eq!(OffsetsKey::decode(&key.encode().unwrap()).unwrap(), key);
    }

    #[test]
    fn group_metadata_values_round_trip(g in group(), version in 0i16..=4) {
        let read = GroupMetadataValue::decode(&g.encode_version(version).unwrap()).unwrap();
        prop_assert_eq!(read, as_read(g, version));
    }

    #[test]
    fn subscriptions_round_trip(
        topics in proptest::collection::vec(text(), 0..4), user_data in proptest::option::of(blob()),
        owned in topic_partitions(), generation in any::<i32>(), rack in proptest::option::of(text()),
        version in 0i16..=3,
    ) {
        let s = Subscription { topics, user_data, owned_partitions: owned, generation_id: generation, rack_id: rack };
        let mut expected = s.clone();
        if version < 1 { expected.owned_partitions.clear(); }
        if version < 2 { expected.generation_id = -1; }
        if version < 3 { expected.rack_id = None; }
        prop_assert_eq!(Subscription::decode(&s.encode(version).unwrap()).unwrap(), expected);
    }

    #[test]
    fn assignments_round_trip(parts in topic_partitions(), user_data in proptest::option::of(blob()), version in 0i16..=3) {
        let a = Assignment { assigned_partitions: parts, user_data };
        prop_assert_eq!(Assignment::decode(&a.encode(version).unwrap()).unwrap(), a);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
        let _ = OffsetsKey::decode(&bytes);
        let _ = OffsetCommitValue::decode(&bytes);
        let _ = GroupMetadataValue::decode(&bytes);
        let _ = Subscription::decode(&bytes);
        let _ = Assignment::decode(&bytes);
    }
}
