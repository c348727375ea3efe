//! The member order of the range and round-robin assignors (Kafka's `MemberInfo.compareTo`):
//! members with a `group.instance.id` first, by instance id, then the others by member id.

use std::cmp::Ordering;

use super::java_hash_map::member_iteration_order;
use super::{MapOrder, MemberSubscription};

fn compare(a: &MemberSubscription, b: &MemberSubscription) -> Ordering {
    match (&a.instance_id, &b.instance_id) {
        (Some(x), Some(y)) => x.cmp(y),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.member_id.cmp(&b.member_id),
    }
}

/// `members` (in JoinGroup order) as Kafka's range and round-robin assignors order them. Kafka
/// sorts stably from its `HashMap` iteration order, so two members with the same instance id
/// stay in that order.
pub(crate) fn sorted_members<'a>(
    members: &[&'a MemberSubscription],
) -> Vec<&'a MemberSubscription> {
    let ids: Vec<&str> = members.iter().map(|m| m.member_id.as_str()).collect();
    let mut ordered: Vec<&MemberSubscription> = member_iteration_order(&ids, MapOrder::JavaHashMap)
        .into_iter()
        .map(|i| members[i])
        .collect();
    ordered.sort_by(|a, b| compare(a, b));
    ordered
}
