//! Kafka's client-side partition assignors: `range`, `roundrobin`, `sticky` and
//! `cooperative-sticky`.
//!
//! Each one returns, for the same topics and member subscriptions, the same assignment as the
//! Java class of the same name in `kafka-clients`, each member's list in Kafka's order, and its
//! client side sends the same user data (checked case by case against Kafka 4.4's jar by
//! `tests/differential.rs`, over chained rebalances). Kafka's sticky assignors break some ties by the iteration order
//! of a Java `HashMap`; [`MapOrder::JavaHashMap`] (the default) reproduces that order, and
//! [`MapOrder::Sorted`] replaces it with sorted order for callers who want an assignment that
//! does not depend on hash codes.
//!
//! What the sticky assignors read from and write to a subscription's user data is documented
//! and implemented in [`user_data`].
//!
//! # Where partlog and Kafka part
//!
//! Only where Kafka's class gives no assignment, or where its own order is undefined:
//! - Kafka's sticky balance loop never returns on some groups with unequal subscriptions (it
//!   comes back to a state it was in, and spins); partlog notices the repeat and returns
//!   [`Error::BalanceLoopCycles`].
//! - Where Kafka's class throws (an `IllegalStateException` or `NullPointerException` on
//!   inconsistent claims), partlog returns [`Error::InconsistentAssignment`]; a group without
//!   members, on which Kafka divides by zero, gets an empty assignment.
//! - Owned partition ids more than `i32::MAX` apart (from bad user data): Kafka's comparator
//!   overflows and is no order at all; partlog compares the ids.
//! - Names are compared as UTF-8 bytes, Java compares UTF-16 units: the orders differ only
//!   between characters above U+FFFF and those in U+E000–U+FFFF.
//! - A Java `HashMap` bucket of more than eight keys doubles a small table, or else becomes a
//!   red-black tree. For string keys (member ids, topic names) partlog models both exactly. For
//!   the sets of topic-partitions of the sticky assignor's movement records it models neither:
//!   Java orders such a tree by identity hash codes, which no other process can reproduce. It
//!   takes nine partitions of one movement record in one bucket.
//! - A Kafka sticky assignor instance remembers the highest generation it has seen across
//!   rebalances; partlog's assign calls are independent, as a fresh Kafka instance's are. They
//!   agree whenever generations only grow, as they do in a live group.
//! - Racks are carried but unused: without replica placement Kafka does not assign by rack
//!   either.

use std::collections::BTreeMap;
use std::fmt;

mod constrained;
mod cooperative_sticky;
pub(crate) mod fast_hash;
mod general;
mod java_hash_map;
pub(crate) mod java_string_map;
mod member_order;
mod owned;
mod partition_movements;
mod range;
mod round_robin;
mod sticky;
mod sticky_common;
pub mod user_data;

pub use cooperative_sticky::{CooperativeAssignment, CooperativeStickyAssignor};
pub use java_hash_map::{java_string_hash, topic_partition_hash};
pub use range::RangeAssignor;
pub use round_robin::RoundRobinAssignor;
pub use sticky::StickyAssignor;

use crate::Error;

/// A member's id in the group, as the group coordinator hands it out (`member.id`).
pub type MemberId = String;

/// The partition count of each topic the cluster metadata knows. Topics nobody subscribes to and
/// topics with no partitions are ignored, as Kafka's `AbstractPartitionAssignor` ignores them.
pub type PartitionsPerTopic = BTreeMap<String, i32>;

/// Each member's assigned partitions. Every member of the input has an entry, possibly empty.
pub type GroupAssignment = BTreeMap<MemberId, Vec<TopicPartition>>;

/// One partition of one topic. Orders by topic, then partition id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    /// The topic's name.
    pub topic: String,
    /// The partition's id within the topic.
    pub partition: i32,
}

impl TopicPartition {
    /// The partition `partition` of `topic`.
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// The rebalance protocols a consumer can follow (KIP-429).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RebalanceProtocol {
    /// Every member revokes everything before each rebalance.
    Eager,
    /// Members keep what they own and revoke only what moves, in a second rebalance.
    Cooperative,
}

/// How the sticky assignors order the members, and the partitions of one movement record, where
/// Kafka iterates a Java `HashMap` or `HashSet`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MapOrder {
    /// Java's `HashMap` iteration order (ascending bucket, then insertion order): exactly
    /// Kafka's output, including its hash-dependent tie-breaks.
    #[default]
    JavaHashMap,
    /// Sorted order (member id; topic then partition): the same algorithm, with ties broken by
    /// name rather than by hash code.
    Sorted,
}

/// One member's JoinGroup subscription, as the group leader sees it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberSubscription {
    /// The member's id (`member.id`).
    pub member_id: MemberId,
    /// Its static membership id (`group.instance.id`), if it has one.
    pub instance_id: Option<String>,
    /// The topics it subscribes to.
    pub topics: Vec<String>,
    /// The partitions it owns now (consumer protocol v1 and later).
    pub owned: Vec<TopicPartition>,
    /// The generation it last joined (consumer protocol v2 and later). Negative means none, as
    /// in Kafka's `Subscription`.
    pub generation: Option<i32>,
    /// The assignor's opaque user data (the sticky assignors': [`user_data`]).
    pub user_data: Option<Vec<u8>>,
    /// Its rack (`client.rack`). Without replica placement in [`PartitionsPerTopic`], Kafka
    /// (and partlog) never assign by rack, so this is carried but unused.
    pub rack: Option<String>,
}

impl MemberSubscription {
    /// A dynamic member with no history, subscribed to `topics`.
    pub fn new<T: Into<String>>(
        member_id: impl Into<String>,
        topics: impl IntoIterator<Item = T>,
    ) -> Self {
        MemberSubscription {
            member_id: member_id.into(),
            topics: topics.into_iter().map(Into::into).collect(),
            ..MemberSubscription::default()
        }
    }

    /// The subscription's generation as Kafka's `Subscription.generationId()` sees it: a
    /// negative value is no generation.
    pub(crate) fn generation_id(&self) -> Option<i32> {
        self.generation.filter(|g| *g >= 0)
    }
}

/// A partition assignor, as Kafka's `ConsumerPartitionAssignor`.
pub trait Assignor {
    /// The assignor's protocol name (`partition.assignment.strategy`), e.g. `range`.
    fn name(&self) -> &'static str;

    /// The rebalance protocols it supports, preferred first.
    fn supported_protocols(&self) -> &'static [RebalanceProtocol];

    /// The user data this member puts in its next subscription, if any ([`user_data`]).
    fn subscription_user_data(&self, topics: &[String]) -> Option<Vec<u8>>;

    /// Splits the partitions of the subscribed topics among `members`.
    ///
    /// Members are given in JoinGroup order (the order the coordinator lists them), which Kafka's
    /// hash-order tie-breaks depend on. A member id given twice keeps its first position and
    /// its last subscription, as a Java `Map.put` would.
    fn assign(
        &self,
        partitions_per_topic: &PartitionsPerTopic,
        members: &[MemberSubscription],
    ) -> Result<GroupAssignment, Error>;

    /// Records this member's assignment of `generation`, for its next subscription's user data.
    fn on_assignment(&mut self, assignment: &[TopicPartition], generation: i32);
}

/// The input every assignor starts from: the subscribed topics that have at least one partition,
/// and the members without duplicate ids.
pub(crate) struct GroupInput<'a> {
    /// Subscribed topics with metadata and at least one partition.
    pub topics: BTreeMap<&'a str, i32>,
    /// One subscription per member id, in JoinGroup order.
    pub members: Vec<&'a MemberSubscription>,
}

impl<'a> GroupInput<'a> {
    pub(crate) fn new(
        partitions_per_topic: &'a PartitionsPerTopic,
        members: &'a [MemberSubscription],
    ) -> Self {
        let mut position: BTreeMap<&str, usize> = BTreeMap::new();
        let mut unique: Vec<&MemberSubscription> = Vec::with_capacity(members.len());
        for member in members {
            match position.get(member.member_id.as_str()) {
                Some(&at) => unique[at] = member,
                None => {
                    position.insert(&member.member_id, unique.len());
                    unique.push(member);
                }
            }
        }
        let topics = unique
            .iter()
            .flat_map(|m| m.topics.iter())
            .filter_map(|t| partitions_per_topic.get_key_value(t.as_str()))
            .filter(|(_, count)| **count > 0)
            .map(|(t, count)| (t.as_str(), *count))
            .collect();
        GroupInput {
            topics,
            members: unique,
        }
    }

    /// Every member with an empty assignment.
    pub(crate) fn empty_assignment(&self) -> GroupAssignment {
        self.members
            .iter()
            .map(|m| (m.member_id.clone(), Vec::new()))
            .collect()
    }
}
