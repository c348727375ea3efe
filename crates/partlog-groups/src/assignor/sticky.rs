//! Kafka's `StickyAssignor` (`sticky`): balanced, and moving as few partitions as it can.

use super::owned::Flavor;
use super::sticky_common::sticky_assign;
use super::user_data::encode_sticky;
use super::{
    Assignor, GroupAssignment, MapOrder, MemberSubscription, PartitionsPerTopic, RebalanceProtocol,
    TopicPartition,
};
use crate::Error;

/// Kafka's `sticky` assignor (eager protocol). Members report what they owned, and in which
/// generation, in their user data (FORMAT.md §11); the assignment is as balanced as Kafka's, and
/// keeps as many owned partitions in place as Kafka's does — the same partitions.
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

    fn on_assignment(&mut self, assignment: &[TopicPartition], generation: i32) {
        self.last = Some((assignment.to_vec(), generation));
    }
}
