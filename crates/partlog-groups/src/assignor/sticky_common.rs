//! What the `sticky` and `cooperative-sticky` assignors share (Kafka's `AbstractStickyAssignor`):
//! resolve what members owned, then take the constrained path when all subscriptions are equal
//! and the general path otherwise.

use super::fast_hash::FastSet;
use std::collections::BTreeMap;

use super::java_hash_map::member_iteration_order;
use super::owned::{Flavor, resolve};
use super::{
    GroupAssignment, GroupInput, MapOrder, MemberId, MemberSubscription, PartitionsPerTopic,
    TopicPartition, constrained, general,
};
use crate::Error;

/// A sticky assignment before the cooperative adjustment.
pub(crate) struct StickyOutcome {
    pub assignment: GroupAssignment,
    /// The constrained path's record of partitions changing owner (new owner by id); `None`
    /// after the general path, which does not keep one.
    pub transferring: Option<BTreeMap<TopicPartition, MemberId>>,
}

pub(crate) fn sticky_assign(
    flavor: Flavor,
    order: MapOrder,
    partitions_per_topic: &PartitionsPerTopic,
    members: &[MemberSubscription],
) -> Result<StickyOutcome, Error> {
    let input = GroupInput::new(partitions_per_topic, members);
    if input.members.is_empty() {
        return Ok(StickyOutcome {
            assignment: GroupAssignment::new(),
            transferring: Some(BTreeMap::new()),
        });
    }
    let ids: Vec<&str> = input.members.iter().map(|m| m.member_id.as_str()).collect();
    let iteration = member_iteration_order(&ids, order);
    let resolved = resolve(flavor, &input.topics, &input.members, &iteration);
    let by_id = |lists: Vec<Vec<TopicPartition>>| -> GroupAssignment {
        ids.iter()
            .zip(lists)
            .map(|(id, list)| (id.to_string(), list))
            .collect()
    };
    if resolved.all_equal {
        let result = constrained::assign(
            &input.topics,
            &input.members,
            &iteration,
            &resolved.owned,
            &resolved.multiply_claimed,
        )?;
        let transferring = result
            .transferring
            .into_iter()
            .map(|(tp, m)| (tp, ids[m].to_string()))
            .collect();
        Ok(StickyOutcome {
            assignment: by_id(result.assignment),
            transferring: Some(transferring),
        })
    } else {
        let lists = general::assign(
            &input.topics,
            &input.members,
            &iteration,
            resolved.owned,
            &resolved.data,
            resolved.max_generation,
            order,
        )?;
        Ok(StickyOutcome {
            assignment: by_id(lists),
            transferring: None,
        })
    }
}

/// The partitions that change owner between what members own (their subscriptions'
/// `owned`) and `assignment`: added to one member and revoked from another.
pub(crate) fn computed_transfers(
    input_members: &[MemberSubscription],
    assignment: &GroupAssignment,
) -> BTreeMap<TopicPartition, MemberId> {
    let mut owned_by: BTreeMap<&str, &[TopicPartition]> = BTreeMap::new();
    for m in input_members {
        owned_by.insert(&m.member_id, &m.owned);
    }
    let mut added: BTreeMap<TopicPartition, MemberId> = BTreeMap::new();
    let mut revoked: FastSet<&TopicPartition> = FastSet::default();
    for (member, assigned) in assignment {
        let owned: &[TopicPartition] = owned_by.get(member.as_str()).copied().unwrap_or(&[]);
        let owned_set: FastSet<&TopicPartition> = owned.iter().collect();
        let assigned_set: FastSet<&TopicPartition> = assigned.iter().collect();
        for tp in assigned {
            if !owned_set.contains(tp) {
                added.insert(tp.clone(), member.clone());
            }
        }
        revoked.extend(owned.iter().filter(|tp| !assigned_set.contains(*tp)));
    }
    added.retain(|tp, _| revoked.contains(tp));
    added
}
