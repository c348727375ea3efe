//! Kafka's `RangeAssignor` (`range`): each topic's partitions in consecutive ranges.

use super::member_order::sorted_members;
use super::{
    Assignor, GroupAssignment, GroupInput, MemberSubscription, PartitionsPerTopic,
    RebalanceProtocol, TopicPartition,
};
use crate::Error;

/// Kafka's `range` assignor. Per topic, with its `C` subscribers in member order and `P`
/// partitions, the first `P % C` members take `P / C + 1` consecutive partitions and the rest
/// take `P / C`. Co-partitioned topics thus land on the same members.
///
/// Kafka's rack-aware variant needs replica placement, which [`PartitionsPerTopic`] does not
/// carry; like Kafka without rack information, this assignor ignores racks.
#[derive(Debug, Clone, Copy, Default)]
pub struct RangeAssignor;

impl Assignor for RangeAssignor {
    fn name(&self) -> &'static str {
        "range"
    }

    fn supported_protocols(&self) -> &'static [RebalanceProtocol] {
        &[RebalanceProtocol::Eager]
    }

    fn subscription_user_data(&self, _topics: &[String]) -> Option<Vec<u8>> {
        None
    }

    fn assign(
        &self,
        partitions_per_topic: &PartitionsPerTopic,
        members: &[MemberSubscription],
    ) -> Result<GroupAssignment, Error> {
        let input = GroupInput::new(partitions_per_topic, members);
        let mut assignment = input.empty_assignment();
        let ordered = sorted_members(&input.members);
        for (&topic, &count) in &input.topics {
            let subscribers: Vec<&MemberSubscription> = ordered
                .iter()
                .copied()
                .filter(|m| m.topics.iter().any(|t| t == topic))
                .collect();
            if subscribers.is_empty() {
                continue;
            }
            let per_member = count / subscribers.len() as i32;
            let with_extra = count % subscribers.len() as i32;
            let mut next = 0;
            for (i, member) in subscribers.iter().enumerate() {
                let take = per_member + i32::from((i as i32) < with_extra);
                let list = assignment.entry(member.member_id.clone()).or_default();
                list.extend((next..next + take).map(|p| TopicPartition::new(topic, p)));
                next += take;
            }
        }
        Ok(assignment)
    }

    fn on_assignment(&mut self, _assignment: &[TopicPartition], _generation: i32) {}
}
