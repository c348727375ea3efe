//! Kafka's `RoundRobinAssignor` (`roundrobin`): all partitions dealt in turn.

use super::member_order::sorted_members;
use super::{
    Assignor, GroupAssignment, GroupInput, MemberSubscription, PartitionsPerTopic,
    RebalanceProtocol, TopicPartition,
};
use crate::Error;

/// Kafka's `roundrobin` assignor. All partitions of all subscribed topics, sorted by topic and
/// id, are dealt by a cursor that circles the members in member order: it skips members not
/// subscribed to the partition's topic, assigns the partition, and moves on by one.
#[derive(Debug, Clone, Copy, Default)]
pub struct RoundRobinAssignor;

impl Assignor for RoundRobinAssignor {
    fn name(&self) -> &'static str {
        "roundrobin"
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
        let mut cursor = 0usize;
        for (&topic, &count) in &input.topics {
            // Every topic in the input has a subscriber, so the skip below ends within a lap.
            for partition in 0..count {
                let mut skipped = 0;
                while !ordered[cursor].topics.iter().any(|t| t == topic) {
                    cursor = (cursor + 1) % ordered.len();
                    skipped += 1;
                    if skipped > ordered.len() {
                        return Err(Error::InconsistentAssignment {
                            assignor: "roundrobin",
                            reason: "a topic without subscribers",
                        });
                    }
                }
                let member = ordered[cursor];
                cursor = (cursor + 1) % ordered.len();
                assignment
                    .entry(member.member_id.clone())
                    .or_default()
                    .push(TopicPartition::new(topic, partition));
            }
        }
        Ok(assignment)
    }

    fn on_assignment(&mut self, _assignment: &[TopicPartition], _generation: i32) {}
}
