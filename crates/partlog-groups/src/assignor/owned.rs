//! What each member owned before this rebalance, as Kafka's sticky assignors work it out
//! (`memberData` and `allSubscriptionsEqual` of Kafka's `AbstractStickyAssignor`).

use super::fast_hash::{FastMap, FastSet};
use std::collections::BTreeMap;

use super::user_data::{DEFAULT_GENERATION, decode_cooperative_generation, decode_sticky};
use super::{MemberSubscription, TopicPartition};

/// Where a sticky assignor reads a member's previous assignment from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavor {
    /// `sticky`: the user data's partitions and generation (FORMAT.md §11).
    Eager,
    /// `cooperative-sticky`: the subscription's owned partitions, with its generation field, or
    /// else the generation in the user data.
    Cooperative,
}

/// A member's claimed previous assignment.
#[derive(Debug, Clone)]
pub(crate) struct MemberData {
    pub partitions: Vec<TopicPartition>,
    pub generation: Option<i32>,
}

pub(crate) fn member_data(flavor: Flavor, member: &MemberSubscription) -> MemberData {
    match flavor {
        Flavor::Eager => {
            let decoded = decode_sticky(member.user_data.as_deref());
            MemberData {
                partitions: decoded.partitions,
                generation: decoded.generation,
            }
        }
        Flavor::Cooperative => {
            let generation = match member.generation_id() {
                Some(g) => Some(g),
                None => decode_cooperative_generation(member.user_data.as_deref()),
            };
            MemberData {
                partitions: member.owned.clone(),
                generation,
            }
        }
    }
}

/// The previous assignment after conflicting claims are resolved.
#[derive(Debug)]
pub(crate) struct ResolvedOwnership {
    /// Whether every member subscribes to the same topics (Kafka's test, quirks included).
    pub all_equal: bool,
    /// Each member's (by index) kept claims on existing topics, in claim order.
    pub owned: Vec<Vec<TopicPartition>>,
    /// Partitions claimed by two members of the same generation: nobody keeps them.
    pub multiply_claimed: FastSet<TopicPartition>,
    /// The highest generation any member claims (−1 if none).
    pub max_generation: i32,
    /// Each member's claimed previous assignment, as decoded.
    pub data: Vec<MemberData>,
}

/// Resolves the members' claims, visiting them in `iteration` order (indices into `members`).
pub(crate) fn resolve(
    flavor: Flavor,
    topics: &BTreeMap<&str, i32>,
    members: &[&MemberSubscription],
    iteration: &[usize],
) -> ResolvedOwnership {
    let data: Vec<MemberData> = members.iter().map(|m| member_data(flavor, m)).collect();
    let mut owned: Vec<Vec<TopicPartition>> = vec![Vec::new(); members.len()];
    let mut multiply_claimed = FastSet::default();
    let mut claimed_by: FastMap<&TopicPartition, usize> = FastMap::default();
    let mut max_generation = DEFAULT_GENERATION;
    let mut all_equal = true;
    // Kafka starts from the first non-empty subscription: an empty one counts as equal to any.
    let mut first_topics: FastSet<&str> = FastSet::default();

    for &m in iteration {
        let member = members[m];
        if first_topics.is_empty() {
            first_topics.extend(member.topics.iter().map(String::as_str));
        } else if all_equal
            && !(member.topics.len() == first_topics.len()
                && member
                    .topics
                    .iter()
                    .all(|t| first_topics.contains(t.as_str())))
        {
            all_equal = false;
        }

        let generation = data[m].generation.unwrap_or(DEFAULT_GENERATION);
        max_generation = max_generation.max(generation);
        for tp in &data[m].partitions {
            if !topics.contains_key(tp.topic.as_str()) {
                continue;
            }
            match claimed_by.get(tp).copied() {
                None => {
                    owned[m].push(tp.clone());
                    claimed_by.insert(tp, m);
                }
                Some(other) => {
                    // Kafka compares with the other member's subscription generation, not the
                    // one decoded from its user data.
                    let other_generation =
                        members[other].generation_id().unwrap_or(DEFAULT_GENERATION);
                    if generation == other_generation {
                        multiply_claimed.insert(tp.clone());
                        remove_first(&mut owned[other], tp);
                        claimed_by.insert(tp, m);
                    } else if generation > other_generation {
                        owned[m].push(tp.clone());
                        remove_first(&mut owned[other], tp);
                        claimed_by.insert(tp, m);
                    }
                }
            }
        }
    }
    ResolvedOwnership {
        all_equal,
        owned,
        multiply_claimed,
        max_generation,
        data,
    }
}

/// Java's `List.remove(Object)`: the first equal element, if any.
pub(crate) fn remove_first(list: &mut Vec<TopicPartition>, tp: &TopicPartition) {
    if let Some(at) = list.iter().position(|x| x == tp) {
        list.remove(at);
    }
}
