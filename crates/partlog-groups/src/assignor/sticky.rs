//! Kafka's `StickyAssignor` (`sticky`): balanced, and moving as few partitions as it can.

use super::fast_hash::FastMap;
use super::owned::Flavor;
use super::sticky_common::sticky_assign;
use super::user_data::encode_sticky;
use super::{
    Assignor, GroupAssignment, MapOrder, MemberSubscription, PartitionsPerTopic, RebalanceProtocol,
    TopicPartition,
};
use crate::Error;

/// Kafka's `sticky` assignor (eager protocol). Members report what they owned, and in which
/// generation, in their [`user_data`](super::user_data); the assignment is as balanced as
/// Kafka's, and keeps as many owned partitions in place as Kafka's does — the same partitions.
#[derive(Debug, Clone, Default)]
pub struct StickyAssignor {
    order: MapOrder,
    /// This member's last assignment and its generation, for its next user data.
    last: Option<(Vec<TopicPartition>, i32)>,
}

impl StickyAssignor {
    /// The assignor with Kafka's own tie-breaks ([`MapOrder::JavaHashMap`]).
    pub fn new() -> Self {
        StickyAssignor::default()
    }

    /// The assignor with the given tie-break order.
    pub fn with_map_order(order: MapOrder) -> Self {
        StickyAssignor { order, last: None }
    }
}

impl Assignor for StickyAssignor {
    fn name(&self) -> &'static str {
        "sticky"
    }

    fn supported_protocols(&self) -> &'static [RebalanceProtocol] {
        &[RebalanceProtocol::Eager]
    }

    fn subscription_user_data(&self, _topics: &[String]) -> Option<Vec<u8>> {
        self.last
            .as_ref()
            .map(|(partitions, generation)| encode_sticky(partitions, *generation))
    }

    fn assign(
        &self,
        partitions_per_topic: &PartitionsPerTopic,
        members: &[MemberSubscription],
    ) -> Result<GroupAssignment, Error> {
        Ok(sticky_assign(Flavor::Eager, self.order, partitions_per_topic, members)?.assignment)
    }

    /// Records the assignment as a Kafka consumer receives it: Kafka's SyncGroup encoding
    /// (`ConsumerProtocol.serializeAssignment`) groups a leader's list by topic, in the order
    /// each topic first appears, each topic's partitions in the order given. The user data
    /// depends on that order ([`encode_sticky`](super::user_data::encode_sticky)), so
    /// `assignment` may be the leader's list or what came through the SyncGroup response: the
    /// bytes are Kafka's either way.
    fn on_assignment(&mut self, assignment: &[TopicPartition], generation: i32) {
        self.last = Some((as_received(assignment), generation));
    }
}

/// `assignment` grouped by topic in the order each topic first appears, each topic's partitions
/// in the order given: what Kafka's consumer protocol makes of a leader's list.
fn as_received(assignment: &[TopicPartition]) -> Vec<TopicPartition> {
    let mut grouped: Vec<Vec<&TopicPartition>> = Vec::new();
    let mut position: FastMap<&str, usize> = FastMap::default();
    for tp in assignment {
        let at = *position.entry(tp.topic.as_str()).or_insert_with(|| {
            grouped.push(Vec::new());
            grouped.len() - 1
        });
        grouped[at].push(tp);
    }
    grouped.into_iter().flatten().cloned().collect()
}
