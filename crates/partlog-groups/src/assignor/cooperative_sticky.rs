//! Kafka's `CooperativeStickyAssignor` (`cooperative-sticky`): the sticky assignment, spread
//! over two rebalances so that no partition is owned by two members at once (KIP-429).

use std::collections::BTreeMap;

use super::owned::Flavor;
use super::sticky_common::{computed_transfers, sticky_assign};
use super::user_data::{DEFAULT_GENERATION, encode_cooperative};
use super::{
    Assignor, GroupAssignment, MapOrder, MemberId, MemberSubscription, PartitionsPerTopic,
    RebalanceProtocol, TopicPartition,
};
use crate::Error;

/// Kafka's `cooperative-sticky` assignor. Members report what they own in their subscriptions
/// (`owned` and `generation`, or the generation in their [`user_data`](super::user_data)). A
/// partition that changes owner is left out of this round: its old owner revokes it, and the
/// next rebalance gives it to its new owner.
#[derive(Debug, Clone)]
pub struct CooperativeStickyAssignor {
    order: MapOrder,
    generation: i32,
}

impl Default for CooperativeStickyAssignor {
    fn default() -> Self {
        CooperativeStickyAssignor {
            order: MapOrder::default(),
            generation: DEFAULT_GENERATION,
        }
    }
}

/// One cooperative round: what each member gets now, and what changes owner next round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CooperativeAssignment {
    /// Each member's partitions for this round.
    pub assignment: GroupAssignment,
    /// The partitions their owners must revoke, each with the member that will get it in the
    /// next round.
    pub transferring: BTreeMap<TopicPartition, MemberId>,
}

impl CooperativeStickyAssignor {
    /// The assignor with Kafka's own tie-breaks ([`MapOrder::JavaHashMap`]).
    pub fn new() -> Self {
        CooperativeStickyAssignor::default()
    }

    /// The assignor with the given tie-break order.
    pub fn with_map_order(order: MapOrder) -> Self {
        CooperativeStickyAssignor {
            order,
            generation: DEFAULT_GENERATION,
        }
    }

    /// Assigns, and also says which partitions change owner.
    pub fn assign_with_transfers(
        &self,
        partitions_per_topic: &PartitionsPerTopic,
        members: &[MemberSubscription],
    ) -> Result<CooperativeAssignment, Error> {
        let outcome = sticky_assign(
            Flavor::Cooperative,
            self.order,
            partitions_per_topic,
            members,
        )?;
        let mut assignment = outcome.assignment;
        let transferring = match outcome.transferring {
            Some(recorded) => recorded,
            None => computed_transfers(members, &assignment),
        };
        for (tp, member) in &transferring {
            if let Some(list) = assignment.get_mut(member)
                && let Some(at) = list.iter().position(|x| x == tp)
            {
                list.remove(at);
            }
        }
        Ok(CooperativeAssignment {
            assignment,
            transferring,
        })
    }
}

impl Assignor for CooperativeStickyAssignor {
    fn name(&self) -> &'static str {
        "cooperative-sticky"
    }

    fn supported_protocols(&self) -> &'static [RebalanceProtocol] {
        &[RebalanceProtocol::Cooperative, RebalanceProtocol::Eager]
    }

    fn subscription_user_data(&self, _topics: &[String]) -> Option<Vec<u8>> {
        Some(encode_cooperative(self.generation))
    }

    fn assign(
        &self,
        partitions_per_topic: &PartitionsPerTopic,
        members: &[MemberSubscription],
    ) -> Result<GroupAssignment, Error> {
        Ok(self
            .assign_with_transfers(partitions_per_topic, members)?
            .assignment)
    }

    fn on_assignment(&mut self, _assignment: &[TopicPartition], generation: i32) {
        self.generation = generation;
    }
}
