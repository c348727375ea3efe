//! A classic group's state and the rules Kafka's `ClassicGroup` keeps about it: the state
//! machine, protocol selection, generations, and which commits it accepts. No I/O and no clock:
//! the offset store and the coordinator pass the time in.

use std::collections::BTreeSet;

use crate::Error;
use crate::assignor::java_string_map::JavaStringMap;
use crate::group::consumer_protocol::Subscription;
use crate::group::pending::{JoinGroupResponse, Pending, SyncGroupResponse};
use crate::offsets::records::{GroupMetadataValue, MemberMetadata};

/// The consumer protocol's protocol type.
pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// A classic group's state (Kafka's `ClassicGroupState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupState {
    /// No members (a simple group, or one whose members all left); offsets may expire.
    Empty,
    /// Members are (re)joining; the join completes when all have, or on the rebalance timeout.
    PreparingRebalance,
    /// The join completed; waiting for the leader's assignment.
    CompletingRebalance,
    /// Every member has its assignment.
    Stable,
    /// Deleted or unloaded: answers COORDINATOR_NOT_AVAILABLE.
    Dead,
}

impl GroupState {
    /// The states a group may enter this one from (Kafka's `validPreviousStates`).
    fn valid_previous(self) -> &'static [GroupState] {
        use GroupState::*;
        match self {
            Empty => &[PreparingRebalance],
            PreparingRebalance => &[Stable, CompletingRebalance, Empty],
            CompletingRebalance => &[PreparingRebalance],
            Stable => &[CompletingRebalance],
            Dead => &[Stable, PreparingRebalance, CompletingRebalance, Empty, Dead],
        }
    }

    /// Whether a group may go from `self` to `next`.
    pub fn can_transition_to(self, next: GroupState) -> bool {
        next.valid_previous().contains(&self)
    }

    /// Kafka's name for the state, as `describe` reports it.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

/// One member of a classic group.
#[derive(Debug, Clone)]
pub struct ClassicMember {
    /// The id the coordinator gave it.
    pub member_id: String,
    /// Its `group.instance.id`, for a static member.
    pub instance_id: Option<String>,
    /// Its `client.id`.
    pub client_id: String,
    /// Its host.
    pub client_host: String,
    /// Its rebalance timeout (`max.poll.interval.ms`).
    pub rebalance_timeout_ms: i32,
    /// Its session timeout.
    pub session_timeout_ms: i32,
    /// Its protocol type (`consumer`).
    pub protocol_type: String,
    /// Its protocols in preference order, each with its metadata (a consumer's subscription).
    pub protocols: Vec<(String, Vec<u8>)>,
    /// What the leader assigned it in the current generation.
    pub assignment: Vec<u8>,
    /// When its session expires unless it heartbeats, commits or rejoins.
    pub session_deadline_ms: i64,
    /// Whether it joined in the current rebalance and has not yet completed a join (Kafka's
    /// `isNew`: it expires on the new-member join timeout).
    pub is_new: bool,
    /// Its parked JoinGroup, while the join phase runs.
    pub(crate) awaiting_join: Option<Pending<JoinGroupResponse>>,
    /// Its parked SyncGroup, while the leader's assignment is awaited.
    pub(crate) awaiting_sync: Option<Pending<SyncGroupResponse>>,
}

impl ClassicMember {
    /// A dynamic member with these protocols; client id and host empty, Kafka's default
    /// timeouts (session 45 s, rebalance 5 min), its session counted from time 0.
    pub fn new(
        member_id: impl Into<String>,
        protocol_type: impl Into<String>,
        protocols: Vec<(String, Vec<u8>)>,
    ) -> Self {
        ClassicMember {
            member_id: member_id.into(),
            instance_id: None,
            client_id: String::new(),
            client_host: String::new(),
            rebalance_timeout_ms: 300_000,
            session_timeout_ms: 45_000,
            protocol_type: protocol_type.into(),
            protocols,
            assignment: Vec::new(),
            session_deadline_ms: 45_000,
            is_new: false,
            awaiting_join: None,
            awaiting_sync: None,
        }
    }

    /// The metadata it gave for `protocol`.
    pub fn metadata(&self, protocol: &str) -> Option<&[u8]> {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, m)| m.as_slice())
    }

    /// Whether it is parked in a join.
    pub fn is_awaiting_join(&self) -> bool {
        self.awaiting_join.is_some()
    }

    /// Whether it is parked in a sync.
    pub fn is_awaiting_sync(&self) -> bool {
        self.awaiting_sync.is_some()
    }

    /// Its first protocol among `candidates` (Kafka's `vote`).
    fn vote<'a>(&'a self, candidates: &BTreeSet<&str>) -> Option<&'a str> {
        self.protocols
            .iter()
            .map(|(name, _)| name.as_str())
            .find(|name| candidates.contains(name))
    }

    /// Whether its protocols equal `protocols` (names and metadata, in order).
    pub fn matches(&self, protocols: &[(String, Vec<u8>)]) -> bool {
        self.protocols == protocols
    }
}

/// A classic group: Kafka's `ClassicGroup`, its members in the order they were added.
#[derive(Debug, Clone)]
pub struct ClassicGroup {
    /// The group's id.
    pub group_id: String,
    /// Its state.
    pub state: GroupState,
    /// The state before it (Empty for a new group): a join phase that started from Empty
    /// completes only on its timer.
    pub previous_state: GroupState,
    /// When it entered its state (`None` before it ever changed state).
    pub state_timestamp_ms: Option<i64>,
    /// Its generation.
    pub generation: i32,
    /// Its protocol type: `None` for a simple group (offsets only).
    pub protocol_type: Option<String>,
    /// The protocol chosen for the generation.
    pub protocol: Option<String>,
    /// The leader's member id.
    pub leader: Option<String>,
    /// The members, in the order they were added.
    pub members: Vec<ClassicMember>,
    /// Members that got MEMBER_ID_REQUIRED and have not joined yet (the two-step join).
    pub pending_members: BTreeSet<String>,
    /// Whether a member was added during the current join phase (Kafka's `newMemberAdded`).
    pub new_member_added: bool,
    /// Members that got the generation's join response and have not synced yet.
    pub pending_sync: BTreeSet<String>,
    /// The topics the members subscribe to, for a `consumer` group whose subscriptions parse.
    pub subscribed_topics: Option<BTreeSet<String>>,
}

impl ClassicGroup {
    /// A new, empty group (Kafka's state for a group created by its first join or commit).
    pub fn new(group_id: impl Into<String>) -> Self {
        ClassicGroup {
            group_id: group_id.into(),
            state: GroupState::Empty,
            previous_state: GroupState::Empty,
            state_timestamp_ms: None,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: Vec::new(),
            pending_members: BTreeSet::new(),
            new_member_added: false,
            pending_sync: BTreeSet::new(),
            subscribed_topics: None,
        }
    }

    /// Whether the group is in `state`.
    pub fn is_in(&self, state: GroupState) -> bool {
        self.state == state
    }

    /// Moves the group to `next` and returns `true`, or returns `false` and leaves it as it
    /// is when the move is illegal (where Kafka throws `IllegalStateException`: a bug in the
    /// caller).
    pub fn transition_to(&mut self, next: GroupState, now_ms: i64) -> bool {
        if !self.state.can_transition_to(next) {
            return false;
        }
        self.previous_state = self.state;
        self.state = next;
        self.state_timestamp_ms = Some(now_ms);
        true
    }

    /// Whether a rebalance may start (Kafka's `canRebalance`).
    pub fn can_rebalance(&self) -> bool {
        GroupState::PreparingRebalance
            .valid_previous()
            .contains(&self.state)
    }

    /// The member `member_id`.
    pub fn member(&self, member_id: &str) -> Option<&ClassicMember> {
        self.members.iter().find(|m| m.member_id == member_id)
    }

    /// The member `member_id`, to change it.
    pub fn member_mut(&mut self, member_id: &str) -> Option<&mut ClassicMember> {
        self.members.iter_mut().find(|m| m.member_id == member_id)
    }

    /// Whether `member_id` is a member.
    pub fn has_member(&self, member_id: &str) -> bool {
        self.member(member_id).is_some()
    }

    /// The member id that holds `instance_id`.
    pub fn static_member_id(&self, instance_id: &str) -> Option<&str> {
        self.members
            .iter()
            .find(|m| m.instance_id.as_deref() == Some(instance_id))
            .map(|m| m.member_id.as_str())
    }

    /// Adds a member; the first member of a group without a leader leads, and the first
    /// member of a group without a protocol type gives it its own.
    pub fn add(&mut self, member: ClassicMember) {
        if self.members.is_empty() && self.protocol_type.is_none() {
            self.protocol_type = Some(member.protocol_type.clone());
        }
        if self.leader.is_none() {
            self.leader = Some(member.member_id.clone());
        }
        self.members.push(member);
    }

    /// Removes a member and returns it; a leader that leaves hands over to the first member
    /// left (Kafka's `remove`).
    pub fn remove(&mut self, member_id: &str) -> Option<ClassicMember> {
        let at = self.members.iter().position(|m| m.member_id == member_id)?;
        let member = self.members.remove(at);
        self.pending_sync.remove(member_id);
        if self.leader.as_deref() == Some(member_id) {
            self.leader = self.members.first().map(|m| m.member_id.clone());
        }
        Some(member)
    }

    /// The protocols every member supports.
    fn candidate_protocols(&self) -> BTreeSet<&str> {
        let mut members = self.members.iter();
        let Some(first) = members.next() else {
            return BTreeSet::new();
        };
        let mut candidates: BTreeSet<&str> =
            first.protocols.iter().map(|(n, _)| n.as_str()).collect();
        for m in members {
            candidates.retain(|c| m.protocols.iter().any(|(n, _)| n == c));
        }
        candidates
    }

    /// Whether a member with these protocols may join (Kafka's `supportsProtocols`): an Empty
    /// group takes any non-empty type and list; otherwise the type must be the group's and one
    /// of the protocols one every member supports.
    pub fn supports_protocols(&self, protocol_type: &str, protocols: &[(String, Vec<u8>)]) -> bool {
        if self.is_in(GroupState::Empty) {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        let candidates = self.candidate_protocols();
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols
                .iter()
                .any(|(n, _)| candidates.contains(n.as_str()))
    }

    /// The protocol for the next generation (Kafka's `selectProtocol`): among those every
    /// member supports, the one most members list first; ties go to the first in the order of
    /// Kafka's `HashMap` of votes.
    pub fn select_protocol(&self) -> Option<String> {
        let candidates = self.candidate_protocols();
        let mut votes = JavaStringMap::new();
        let mut counts: Vec<usize> = Vec::new();
        for m in &self.members {
            if let Some(vote) = m.vote(&candidates) {
                let at = votes.compute_if_absent(vote);
                if at == counts.len() {
                    counts.push(0);
                }
                counts[at] += 1;
            }
        }
        let mut best: Option<usize> = None;
        for at in votes.iteration_order() {
            if best.is_none_or(|b| counts[at] > counts[b]) {
                best = Some(at);
            }
        }
        best.map(|at| votes.key(at).to_owned())
    }

    /// The topics the members subscribe to (Kafka's `computeSubscribedTopics`): only for a
    /// `consumer` group with a protocol; `None` when a subscription does not parse.
    fn compute_subscribed_topics(&self) -> Option<BTreeSet<String>> {
        let protocol = self.protocol.as_deref()?;
        if self.protocol_type.as_deref() != Some(CONSUMER_PROTOCOL_TYPE) {
            return None;
        }
        let mut topics = BTreeSet::new();
        for m in &self.members {
            let subscription = Subscription::decode(m.metadata(protocol)?).ok()?;
            topics.extend(subscription.topics);
        }
        Some(topics)
    }

    /// The largest rebalance timeout of the members (Kafka's `rebalanceTimeoutMs`).
    pub fn rebalance_timeout_ms(&self) -> i64 {
        self.members
            .iter()
            .map(|m| i64::from(m.rebalance_timeout_ms))
            .max()
            .unwrap_or(0)
    }

    /// Whether every member is parked in a join and no two-step join is pending.
    pub fn has_all_members_joined(&self) -> bool {
        self.pending_members.is_empty() && self.members.iter().all(ClassicMember::is_awaiting_join)
    }

    /// Keeps the leader if it rejoined, else elects the first member parked in a join;
    /// `false` when none is.
    pub fn maybe_elect_new_joined_leader(&mut self) -> bool {
        if let Some(leader) = self.leader.as_deref()
            && self
                .member(leader)
                .is_some_and(ClassicMember::is_awaiting_join)
        {
            return true;
        }
        match self.members.iter().find(|m| m.is_awaiting_join()) {
            Some(m) => {
                self.leader = Some(m.member_id.clone());
                true
            }
            None => {
                self.leader = None;
                false
            }
        }
    }

    /// Whether a member subscribes to `topic` (for offset expiry, KIP-496).
    pub fn is_subscribed_to(&self, topic: &str) -> bool {
        self.subscribed_topics
            .as_ref()
            .is_some_and(|t| t.contains(topic))
    }

    /// Starts the next generation (Kafka's `initNextGeneration`): with members, the protocol
    /// is chosen and the group awaits the leader's assignment; without, it is Empty.
    pub fn init_next_generation(&mut self, now_ms: i64) {
        self.generation = self.generation.wrapping_add(1);
        self.previous_state = self.state;
        self.pending_sync = self.members.iter().map(|m| m.member_id.clone()).collect();
        if self.members.is_empty() {
            self.protocol = None;
            self.subscribed_topics = self.compute_subscribed_topics();
            self.state = GroupState::Empty;
        } else {
            self.protocol = self.select_protocol();
            self.subscribed_topics = self.compute_subscribed_topics();
            self.state = GroupState::CompletingRebalance;
        }
        self.state_timestamp_ms = Some(now_ms);
    }

    /// Which commits the group accepts (Kafka's `ClassicGroup.validateOffsetCommit`).
    ///
    /// # Errors
    /// COORDINATOR_NOT_AVAILABLE for a Dead group; UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID or
    /// ILLEGAL_GENERATION for a commit from outside the generation; REBALANCE_IN_PROGRESS for a
    /// non-transactional commit while the leader's assignment is awaited.
    pub fn validate_offset_commit(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        transactional: bool,
    ) -> Result<(), Error> {
        if self.is_in(GroupState::Dead) {
            return Err(Error::CoordinatorNotAvailable);
        }
        if generation < 0 && self.is_in(GroupState::Empty) {
            // An admin client, or a consumer that assigns its own partitions.
            return Ok(());
        }
        if generation >= 0 || !member_id.is_empty() || instance_id.is_some() {
            self.validate_member(member_id, instance_id)?;
            if generation != self.generation {
                return Err(Error::IllegalGeneration);
            }
        } else if !transactional && !self.is_in(GroupState::Empty) {
            return Err(Error::UnknownMemberId);
        }
        if !transactional && self.is_in(GroupState::CompletingRebalance) {
            return Err(Error::RebalanceInProgress);
        }
        Ok(())
    }

    /// The member must exist, and an instance id must map to it (Kafka's `validateMember`).
    ///
    /// # Errors
    /// UNKNOWN_MEMBER_ID, or FENCED_INSTANCE_ID for an instance id held by another member.
    pub fn validate_member(&self, member_id: &str, instance_id: Option<&str>) -> Result<(), Error> {
        match instance_id {
            Some(instance) => match self.static_member_id(instance) {
                None => Err(Error::UnknownMemberId),
                Some(existing) if existing != member_id => Err(Error::FencedInstanceId),
                Some(_) => Ok(()),
            },
            None if self.has_member(member_id) => Ok(()),
            None => Err(Error::UnknownMemberId),
        }
    }

    /// The group's record (Kafka's `newGroupMetadataRecord`): each member's metadata for the
    /// chosen protocol and its assignment.
    pub fn to_record(&self) -> GroupMetadataValue {
        let protocol = self.protocol.as_deref().unwrap_or_default();
        GroupMetadataValue {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol: self.protocol.clone(),
            leader: self.leader.clone(),
            current_state_timestamp: self.state_timestamp_ms.unwrap_or(-1),
            members: self
                .members
                .iter()
                .map(|m| MemberMetadata {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout: m.rebalance_timeout_ms,
                    session_timeout: m.session_timeout_ms,
                    subscription: m.metadata(protocol).unwrap_or_default().to_vec(),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }

    /// A group as its record describes it (Kafka's `ClassicGroup.fromRecord`): Empty without
    /// members, else Stable, each member's session counted from `now_ms`.
    pub fn from_record(group_id: &str, value: &GroupMetadataValue, now_ms: i64) -> ClassicGroup {
        let mut group = ClassicGroup::new(group_id);
        group.protocol_type =
            (!value.protocol_type.is_empty()).then(|| value.protocol_type.clone());
        group.generation = value.generation;
        group.protocol = value.protocol.clone();
        group.leader = value.leader.clone();
        group.state_timestamp_ms =
            (value.current_state_timestamp >= 0).then_some(value.current_state_timestamp);
        let protocol = value.protocol.clone().unwrap_or_default();
        for m in &value.members {
            group.members.push(ClassicMember {
                member_id: m.member_id.clone(),
                instance_id: m.group_instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                rebalance_timeout_ms: m.rebalance_timeout,
                session_timeout_ms: m.session_timeout,
                protocol_type: value.protocol_type.clone(),
                protocols: vec![(protocol.clone(), m.subscription.clone())],
                assignment: m.assignment.clone(),
                session_deadline_ms: now_ms.saturating_add(i64::from(m.session_timeout)),
                is_new: false,
                awaiting_join: None,
                awaiting_sync: None,
            });
        }
        group.state = if group.members.is_empty() {
            GroupState::Empty
        } else {
            GroupState::Stable
        };
        group.subscribed_topics = group.compute_subscribed_topics();
        group
    }
}
