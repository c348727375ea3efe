//! Kafka's `RangeAssignor` (`range`): each topic's partitions in consecutive ranges.

use super::java_hash_map::member_iteration_order;
use super::java_string_map::JavaStringMap;
use super::member_order::sorted_members;
use super::{
    Assignor, GroupAssignment, GroupInput, MapOrder, MemberSubscription, PartitionsPerTopic,
    RebalanceProtocol, TopicPartition,
};
use crate::Error;

/// Kafka's `range` assignor. Per topic, with its `C` subscribers in member order and `P`
/// partitions, the first `P % C` members take `P / C + 1` consecutive partitions and the rest
/// take `P / C`. Co-partitioned topics thus land on the same members.
///
/// A member's list holds its topics in the order Kafka visits them, which is a Java `HashMap`'s
/// order of the topic names, not sorted order: the list goes to the member as it is, in the
/// SyncGroup response.
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
        for topic in kafka_topic_order(&input) {
            let count = input.topics[topic];
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

/// The topics with partitions in the order Kafka's range assignor visits them. Kafka's
/// `AbstractPartitionAssignor.assign` adds every subscribed topic to a `HashSet`, member by
/// member in the subscription map's order and each member's topics in subscription order; then
/// it puts those the metadata has partitions for into a `HashMap`, in the set's order, and
/// assigns topic by topic in that map's order. Topics without partitions count too: they size
/// the set's table.
fn kafka_topic_order<'a>(input: &GroupInput<'a>) -> Vec<&'a str> {
    let ids: Vec<&str> = input.members.iter().map(|m| m.member_id.as_str()).collect();
    let mut subscribed = JavaStringMap::new();
    for at in member_iteration_order(&ids, MapOrder::JavaHashMap) {
        for topic in &input.members[at].topics {
            subscribed.put(topic);
        }
    }
    let mut with_partitions = JavaStringMap::new();
    for topic in subscribed.keys_in_order() {
        if input.topics.contains_key(topic) {
            with_partitions.put(topic);
        }
    }
    with_partitions.keys_in_order()
}
