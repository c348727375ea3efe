//! Shorthands for building groups and checking assignments in the assignor tests.
#![allow(dead_code, reason = "each test crate uses a different part of it")]

pub mod driver;
pub mod scenario;

use std::collections::{BTreeMap, BTreeSet};

use partlog_groups::assignor::user_data::encode_sticky;
use partlog_groups::assignor::{
    GroupAssignment, MemberSubscription, PartitionsPerTopic, TopicPartition,
};

/// Topic metadata from `(name, partition count)` pairs.
pub fn topics(list: &[(&str, i32)]) -> PartitionsPerTopic {
    list.iter().map(|(t, n)| (t.to_string(), *n)).collect()
}

/// Partitions written `t1-0, t1-1`; a bare number is a partition of `default_topic`.
pub fn tps(default_topic: &str, list: &str) -> Vec<TopicPartition> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| match s.rsplit_once('-') {
            Some((topic, p)) => TopicPartition::new(topic, p.parse().expect("partition id")),
            None => TopicPartition::new(default_topic, s.parse().expect("partition id")),
        })
        .collect()
}

/// A fresh dynamic member.
pub fn member(id: &str, subscribed: &[&str]) -> MemberSubscription {
    MemberSubscription::new(id, subscribed.iter().copied())
}

/// A static member (`group.instance.id`).
pub fn static_member(id: &str, instance: &str, subscribed: &[&str]) -> MemberSubscription {
    MemberSubscription {
        instance_id: Some(instance.to_string()),
        ..member(id, subscribed)
    }
}

/// A member that owns `owned` in `generation`, reported both ways: in the subscription (what
/// `cooperative-sticky` reads) and in sticky V1 user data (what `sticky` reads).
pub fn owner(
    id: &str,
    subscribed: &[&str],
    owned: Vec<TopicPartition>,
    generation: i32,
) -> MemberSubscription {
    MemberSubscription {
        user_data: Some(encode_sticky(&owned, generation)),
        owned,
        generation: Some(generation),
        ..member(id, subscribed)
    }
}

/// The members of the next rebalance: each keeps its subscription and owns what `assignment`
/// gave it, in `generation`.
pub fn next_round(
    members: &[MemberSubscription],
    assignment: &GroupAssignment,
    generation: i32,
) -> Vec<MemberSubscription> {
    members
        .iter()
        .map(|m| {
            let owned = assignment.get(&m.member_id).cloned().unwrap_or_default();
            let topics: Vec<&str> = m.topics.iter().map(String::as_str).collect();
            MemberSubscription {
                instance_id: m.instance_id.clone(),
                ..owner(&m.member_id, &topics, owned, generation)
            }
        })
        .collect()
}

/// Asserts that `actual` gives exactly these members exactly these partitions (as sets).
pub fn assert_assignment(actual: &GroupAssignment, expected: &[(&str, Vec<TopicPartition>)]) {
    let actual_sets: BTreeMap<&str, BTreeSet<&TopicPartition>> = actual
        .iter()
        .map(|(m, list)| (m.as_str(), list.iter().collect()))
        .collect();
    let expected_sets: BTreeMap<&str, BTreeSet<&TopicPartition>> = expected
        .iter()
        .map(|(m, list)| (*m, list.iter().collect()))
        .collect();
    assert_eq!(actual_sets, expected_sets, "assignment differs");
    for (m, list) in actual {
        assert_eq!(
            list.len(),
            actual_sets[m.as_str()].len(),
            "{m} got a partition twice"
        );
    }
}
