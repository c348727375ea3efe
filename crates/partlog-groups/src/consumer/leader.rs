//! The leader's assignment (Kafka's `ConsumerCoordinator.onLeaderElected`): the members'
//! subscriptions decoded, the chosen assignor run over the engine's topics, a cooperative
//! assignment checked, and each member's blob encoded.

use std::collections::{BTreeMap, BTreeSet};

use super::Consumer;
use super::membership::{CONSUMER_PROTOCOL_VERSION, group_by_topic};
use crate::Error;
use crate::assignor::{
    GroupAssignment, MemberSubscription, PartitionsPerTopic, RebalanceProtocol, TopicPartition,
};
use crate::group::consumer_protocol::{Assignment, Subscription};
use crate::group::pending::JoinGroupResponse;

impl Consumer {
    /// Each member's assignment blob, computed by the assignor the group chose.
    pub(super) fn perform_assignment(
        &mut self,
        response: &JoinGroupResponse,
    ) -> Result<Vec<(String, Vec<u8>)>, Error> {
        let chosen = response.protocol.clone().unwrap_or_default();
        let members: Vec<MemberSubscription> = response
            .members
            .iter()
            .map(|m| {
                // A blob that does not parse: nothing owned, generation −1, no topics.
                let subscription = Subscription::decode(&m.metadata).unwrap_or_else(|error| {
                    log::warn!(
                        "member {:?}: a subscription that does not parse ({error})",
                        m.member_id
                    );
                    Subscription::new(Vec::<String>::new())
                });
                MemberSubscription {
                    member_id: m.member_id.clone(),
                    instance_id: m.instance_id.clone(),
                    topics: subscription.topics,
                    owned: subscription
                        .owned_partitions
                        .iter()
                        .flat_map(|t| {
                            t.partitions
                                .iter()
                                .map(|p| TopicPartition::new(&t.topic, *p))
                        })
                        .collect(),
                    generation: Some(subscription.generation_id),
                    user_data: subscription.user_data,
                    rack: subscription.rack_id,
                }
            })
            .collect();
        let mut partitions_per_topic = PartitionsPerTopic::new();
        for topic in members.iter().flat_map(|m| m.topics.iter()) {
            if let Ok(handle) = self.router.engine().topic(topic) {
                partitions_per_topic.insert(topic.clone(), handle.partitions());
            }
        }
        let assignor = self
            .assignors
            .iter()
            .find(|a| a.name() == chosen)
            .ok_or_else(|| Error::IllegalState {
                why: format!(
                    "the group chose protocol {chosen:?}, which this consumer does not have"
                ),
            })?;
        let assignment = assignor.assign(&partitions_per_topic, &members)?;
        if self.protocol == RebalanceProtocol::Cooperative {
            validate_cooperative_assignment(&members, &assignment)?;
        }
        let mut blobs = Vec::with_capacity(assignment.len());
        for (member, mut partitions) in assignment {
            partitions.sort();
            let blob = Assignment {
                assigned_partitions: group_by_topic(&partitions),
                user_data: None,
            };
            blobs.push((member, blob.encode(CONSUMER_PROTOCOL_VERSION)?));
        }
        Ok(blobs)
    }
}

/// Kafka's `validateCooperativeAssignment`: under COOPERATIVE a partition may not move from
/// its owner to another member in one rebalance (it must be revoked first, then assigned in
/// the next), else two members would read it at once.
///
/// # Errors
/// `InconsistentAssignment` naming the check.
pub fn validate_cooperative_assignment(
    members: &[MemberSubscription],
    assignment: &GroupAssignment,
) -> Result<(), Error> {
    let mut revoked: BTreeSet<&TopicPartition> = BTreeSet::new();
    let mut added: BTreeMap<&str, BTreeSet<&TopicPartition>> = BTreeMap::new();
    for member in members {
        let assigned: BTreeSet<&TopicPartition> = assignment
            .get(&member.member_id)
            .map(|p| p.iter().collect())
            .unwrap_or_default();
        let owned: BTreeSet<&TopicPartition> = member.owned.iter().collect();
        revoked.extend(owned.difference(&assigned).copied());
        added.insert(
            &member.member_id,
            assigned.difference(&owned).copied().collect(),
        );
    }
    if added.values().flatten().any(|tp| revoked.contains(tp)) {
        return Err(Error::InconsistentAssignment {
            assignor: "cooperative",
            reason: "the assignor moved an owned partition to another member in one rebalance; \
                     a cooperative assignor must revoke it first and assign it in the next",
        });
    }
    Ok(())
}
