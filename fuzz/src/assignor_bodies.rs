//! Fuzz target bodies for partlog-groups' assignor user-data decoders, shared by the libFuzzer
//! target `assignor_user_data` and by `crates/partlog-groups/tests/fuzz_replay.rs` (which
//! includes this file by path).

use partlog_groups::assignor::user_data::{
    decode_cooperative_generation, decode_sticky, encode_sticky,
};
use partlog_groups::assignor::{
    Assignor, CooperativeStickyAssignor, MemberSubscription, PartitionsPerTopic, StickyAssignor,
    TopicPartition,
};

/// A fuzz target's body: one input, a panic on a broken promise.
pub type Body = fn(&[u8]);

/// Every target in this file, by name: the directory names under `fuzz/corpus/` and
/// `fuzz/artifacts/`.
pub const TARGETS: [(&str, Body); 1] = [("assignor_user_data", assignor_user_data)];

/// Any bytes as sticky (V0/V1) and cooperative user data: the decoders never panic, what the
/// sticky decoder reads with a generation re-encodes to bytes that decode to the same, and both
/// sticky assignors assign a small group whose first member sends these bytes without panicking.
pub fn assignor_user_data(data: &[u8]) {
    let sticky = decode_sticky(Some(data));
    if let Some(generation) = sticky.generation {
        let again = decode_sticky(Some(&encode_sticky(&sticky.partitions, generation)));
        let mut before = sticky.partitions.clone();
        let mut after = again.partitions;
        before.sort();
        after.sort();
        // Topic names longer than i16::MAX bytes cannot be encoded; Kafka refuses them too.
        if sticky
            .partitions
            .iter()
            .all(|tp| tp.topic.len() <= i16::MAX as usize)
        {
            assert_eq!(before, after, "sticky user data does not round-trip");
            assert_eq!(again.generation, Some(generation));
        }
    }
    let cooperative = decode_cooperative_generation(Some(data));
    if data.len() >= 4 {
        assert_eq!(
            cooperative,
            Some(i32::from_be_bytes([data[0], data[1], data[2], data[3]]))
        );
    } else {
        assert_eq!(cooperative, Some(-1));
    }

    let topics: PartitionsPerTopic = [("t".to_string(), 4), ("u".to_string(), 3)]
        .into_iter()
        .collect();
    let fuzzed = MemberSubscription {
        user_data: Some(data.to_vec()),
        owned: sticky.partitions.clone(),
        ..MemberSubscription::new("fuzzed", ["t", "u"])
    };
    let other = MemberSubscription {
        user_data: Some(encode_sticky(
            &[TopicPartition::new("t", 0), TopicPartition::new("u", 1)],
            1,
        )),
        owned: vec![TopicPartition::new("t", 0), TopicPartition::new("u", 1)],
        generation: Some(1),
        ..MemberSubscription::new("other", ["t"])
    };
    let members = [fuzzed, other, MemberSubscription::new("third", ["t", "u"])];
    // Kafka's own algorithm can reach a state where Kafka throws; then an error is the answer.
    let _ = StickyAssignor::new().assign(&topics, &members);
    let _ = CooperativeStickyAssignor::new().assign(&topics, &members);
}
