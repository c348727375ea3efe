//! [`GroupCoordinator`]: Kafka's classic group protocol (JoinGroup, SyncGroup, Heartbeat,
//! LeaveGroup, DescribeGroups) over the groups of one [`OffsetStore`], as Kafka's
//! `GroupMetadataManager` runs it, with every timer on the store's injected clock: nothing
//! happens between calls, and [`tick`](GroupCoordinator::tick) fires what is due (the engine's
//! maintenance scheduler calls it). Parked joins and syncs are [`Pending`] answers.

use std::collections::BTreeMap;

use partlog::unstable::SplitMix64;

use super::classic::{ClassicGroup, ClassicMember, GroupState};
use super::pending::{JoinGroupResponse, JoinedMember, Pending, SyncGroupResponse};
use crate::Error;
use crate::offsets::log::OffsetsLog;
use crate::offsets::store::OffsetStore;

/// The coordinator's settings, with Kafka's names and defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupConfig {
    /// `group.min.session.timeout.ms` (6000).
    pub min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms` (1800000).
    pub max_session_timeout_ms: i32,
    /// `group.initial.rebalance.delay.ms` (3000).
    pub initial_rebalance_delay_ms: i64,
    /// `group.max.size` (`i32::MAX`).
    pub max_size: usize,
    /// How long a new member may wait in its first join (Kafka's 5 minutes).
    pub new_member_join_timeout_ms: i64,
    /// Kafka's two-step join for dynamic members (MEMBER_ID_REQUIRED, 79): off in process.
    pub require_member_id: bool,
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            min_session_timeout_ms: 6_000,
            max_session_timeout_ms: 1_800_000,
            initial_rebalance_delay_ms: 3_000,
            max_size: i32::MAX as usize,
            new_member_join_timeout_ms: 300_000,
            require_member_id: false,
        }
    }
}

/// A JoinGroup request (Kafka's `JoinGroupRequestData`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupRequest {
    /// The group.
    pub group_id: String,
    /// The member's id, empty for a new member.
    pub member_id: String,
    /// Its `group.instance.id`, for a static member.
    pub instance_id: Option<String>,
    /// Its protocol type (`consumer`).
    pub protocol_type: String,
    /// Its protocols in preference order, each with its metadata.
    pub protocols: Vec<(String, Vec<u8>)>,
    /// `session.timeout.ms` (45000).
    pub session_timeout_ms: i32,
    /// `max.poll.interval.ms` (300000).
    pub rebalance_timeout_ms: i32,
    /// Its `client.id`.
    pub client_id: String,
    /// Its host.
    pub client_host: String,
}

impl JoinGroupRequest {
    /// A new dynamic member's join with Kafka's client defaults.
    pub fn new(
        group_id: impl Into<String>,
        protocol_type: impl Into<String>,
        protocols: Vec<(String, Vec<u8>)>,
    ) -> Self {
        JoinGroupRequest {
            group_id: group_id.into(),
            member_id: String::new(),
            instance_id: None,
            protocol_type: protocol_type.into(),
            protocols,
            session_timeout_ms: 45_000,
            rebalance_timeout_ms: 300_000,
            client_id: "client".into(),
            client_host: "/127.0.0.1".into(),
        }
    }
}

/// A SyncGroup request (Kafka's `SyncGroupRequestData`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncGroupRequest {
    /// The group.
    pub group_id: String,
    /// The member's id.
    pub member_id: String,
    /// Its `group.instance.id`.
    pub instance_id: Option<String>,
    /// The generation it joined.
    pub generation: i32,
    /// The protocol type it expects (`None`: not checked).
    pub protocol_type: Option<String>,
    /// The protocol it expects (`None`: not checked).
    pub protocol: Option<String>,
    /// The leader's assignment: each member's blob (empty for followers).
    pub assignments: Vec<(String, Vec<u8>)>,
}

/// A member leaving (Kafka's `MemberIdentity`): by member id, or by instance id (an admin's
/// removal of a static member).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeavingMember {
    /// The member id, empty to name the member by its instance id.
    pub member_id: String,
    /// Its `group.instance.id`.
    pub instance_id: Option<String>,
}

/// Each leaving member's answer, in request order.
pub type LeaveResults = Vec<(LeavingMember, Result<(), Error>)>;

/// A group as DescribeGroups reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedGroup {
    /// Its state (Dead for a group that does not exist).
    pub state: GroupState,
    /// Its protocol type.
    pub protocol_type: Option<String>,
    /// Its protocol.
    pub protocol: Option<String>,
    /// Its generation.
    pub generation: i32,
    /// Its leader.
    pub leader: Option<String>,
    /// Its members: id, instance id, client id, host, metadata for the protocol, assignment.
    pub members: Vec<DescribedMember>,
}

/// A member as DescribeGroups reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedMember {
    /// Its member id.
    pub member_id: String,
    /// Its `group.instance.id`.
    pub instance_id: Option<String>,
    /// Its `client.id`.
    pub client_id: String,
    /// Its host.
    pub client_host: String,
    /// Its metadata for the group's protocol.
    pub metadata: Vec<u8>,
    /// Its assignment.
    pub assignment: Vec<u8>,
}

/// The join phase's timer of a group: its deadline, and for the initial delayed join from
/// Empty, the delay and what is left of the rebalance timeout.
#[derive(Debug, Clone, Copy)]
struct JoinTimer {
    deadline_ms: i64,
    initial: Option<(i64, i64)>,
}

/// The classic group coordinator of one `__consumer_offsets` partition.
pub struct GroupCoordinator<L: OffsetsLog> {
    store: OffsetStore<L>,
    config: GroupConfig,
    join_timers: BTreeMap<String, JoinTimer>,
    /// The sync-expiry timer of a group: the generation it was set for, and its deadline.
    sync_timers: BTreeMap<String, (i32, i64)>,
    /// Two-step joins waiting for their second join, by group and member: their deadline.
    pending_member_deadlines: BTreeMap<(String, String), i64>,
    ids: SplitMix64,
    /// Join phases started so far, in any group of this coordinator (see
    /// [`rebalances_started`](Self::rebalances_started)).
    rebalances_started: u64,
}

impl<L: OffsetsLog> std::fmt::Debug for GroupCoordinator<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCoordinator")
            .field("store", &self.store)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<L: OffsetsLog> GroupCoordinator<L> {
    /// A coordinator over `store`'s groups (as replayed: a group with members is Stable, its
    /// sessions counted from the open). `seed` seeds the member ids' random part.
    pub fn new(store: OffsetStore<L>, config: GroupConfig, seed: u64) -> Self {
        GroupCoordinator {
            store,
            config,
            join_timers: BTreeMap::new(),
            sync_timers: BTreeMap::new(),
            pending_member_deadlines: BTreeMap::new(),
            ids: SplitMix64::new(seed),
            rebalances_started: 0,
        }
    }

    /// How many join phases have started in this coordinator's groups since it was made. It
    /// only grows: an in-process member that sees it change since its last heartbeat
    /// heartbeats at once, and so learns of a rebalance without waiting for
    /// `heartbeat.interval.ms` (a Kafka member learns at its next heartbeat).
    pub fn rebalances_started(&self) -> u64 {
        self.rebalances_started
    }

    /// The offset store (commits, fetches, expiry).
    pub fn store(&self) -> &OffsetStore<L> {
        &self.store
    }

    /// The offset store, to commit through it.
    pub fn store_mut(&mut self) -> &mut OffsetStore<L> {
        &mut self.store
    }

    /// The settings.
    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    fn now(&self) -> i64 {
        self.store.now_ms()
    }

    /// A new member id: `prefix-` and a random UUID, as Kafka makes them.
    fn new_member_id(&mut self, prefix: &str) -> String {
        let hi = self.ids.next_u64();
        let lo = self.ids.next_u64();
        // Version 4, variant 10, as `UUID.randomUUID`.
        let hi = (hi & !0xf000) | 0x4000;
        let lo = (lo & !(0xc << 60)) | (0x8 << 60);
        format!(
            "{prefix}-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            hi >> 32,
            (hi >> 16) & 0xffff,
            hi & 0xffff,
            lo >> 48,
            lo & 0xffff_ffff_ffff
        )
    }

    /// JoinGroup. The answer is parked until the join phase completes (all members rejoined,
    /// or a timer in [`tick`](Self::tick)), or given at once.
    pub fn join(&mut self, request: JoinGroupRequest) -> Pending<JoinGroupResponse> {
        let member_id = request.member_id.clone();
        match self.try_join(request) {
            Ok(pending) => pending,
            Err(error) => Pending::ready(JoinGroupResponse::error(member_id, error)),
        }
    }

    fn try_join(&mut self, request: JoinGroupRequest) -> Result<Pending<JoinGroupResponse>, Error> {
        if request.group_id.is_empty() {
            return Err(Error::InvalidGroupId);
        }
        if request.session_timeout_ms < self.config.min_session_timeout_ms
            || request.session_timeout_ms > self.config.max_session_timeout_ms
        {
            return Err(Error::InvalidSessionTimeout);
        }
        let unknown = request.member_id.is_empty();
        if self.store.group(&request.group_id).is_none() {
            if !unknown {
                return Err(Error::UnknownMemberId);
            }
            self.store.get_or_create_group(&request.group_id);
        }
        let max_size = self.config.max_size;
        let group = self.group(&request.group_id)?;
        if group.is_in(GroupState::Dead) {
            return Err(Error::CoordinatorNotAvailable);
        }
        if !group.supports_protocols(&request.protocol_type, &request.protocols) {
            return Err(Error::InconsistentGroupProtocol);
        }
        let accepted = match group.state {
            GroupState::Empty | GroupState::Dead => true,
            GroupState::PreparingRebalance => {
                group
                    .member(&request.member_id)
                    .is_some_and(ClassicMember::is_awaiting_join)
                    || group
                        .members
                        .iter()
                        .filter(|m| m.is_awaiting_join())
                        .count()
                        < max_size
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                group.has_member(&request.member_id) || group.members.len() < max_size
            }
        };
        if !accepted {
            // The last joiners are refused, and leave the group.
            if !unknown {
                self.remove_member(
                    &request.group_id,
                    &request.member_id,
                    Error::GroupMaxSizeReached,
                );
            }
            return Err(Error::GroupMaxSizeReached);
        }
        if unknown {
            self.join_new_member(request)
        } else {
            self.join_existing_member(request)
        }
    }

    fn group(&mut self, group_id: &str) -> Result<&mut ClassicGroup, Error> {
        self.store.group_mut(group_id).ok_or(Error::UnknownMemberId)
    }

    fn join_new_member(
        &mut self,
        request: JoinGroupRequest,
    ) -> Result<Pending<JoinGroupResponse>, Error> {
        let prefix = request
            .instance_id
            .clone()
            .unwrap_or_else(|| request.client_id.clone());
        let member_id = self.new_member_id(&prefix);
        if let Some(instance) = &request.instance_id {
            let existing = self
                .group(&request.group_id)?
                .static_member_id(instance)
                .map(str::to_owned);
            return match existing {
                Some(old) => self.replace_static_member(request, &old, member_id),
                None => Ok(self.add_member_and_rebalance(request, member_id)),
            };
        }
        if self.config.require_member_id {
            let deadline = self
                .now()
                .saturating_add(i64::from(request.session_timeout_ms));
            self.group(&request.group_id)?
                .pending_members
                .insert(member_id.clone());
            self.pending_member_deadlines
                .insert((request.group_id.clone(), member_id.clone()), deadline);
            return Ok(Pending::ready(JoinGroupResponse::error(
                member_id,
                Error::MemberIdRequired,
            )));
        }
        Ok(self.add_member_and_rebalance(request, member_id))
    }

    fn join_existing_member(
        &mut self,
        request: JoinGroupRequest,
    ) -> Result<Pending<JoinGroupResponse>, Error> {
        let group_id = request.group_id.clone();
        let member_id = request.member_id.clone();
        let group = self.group(&group_id)?;
        if group.pending_members.remove(&member_id) {
            self.pending_member_deadlines
                .remove(&(group_id, member_id.clone()));
            return Ok(self.add_member_and_rebalance(request, member_id));
        }
        group.validate_member(&member_id, request.instance_id.as_deref())?;
        let member = group.member(&member_id).ok_or(Error::UnknownMemberId)?;
        let unchanged = member.matches(&request.protocols);
        let is_leader = group.leader.as_deref() == Some(member_id.as_str());
        match group.state {
            GroupState::PreparingRebalance => Ok(self.update_member_and_rebalance(request)),
            GroupState::CompletingRebalance if unchanged => Ok(Pending::ready(current_generation(
                group, &member_id, is_leader, false,
            ))),
            GroupState::Stable if unchanged && !is_leader => Ok(Pending::ready(
                current_generation(group, &member_id, false, false),
            )),
            GroupState::CompletingRebalance | GroupState::Stable => {
                Ok(self.update_member_and_rebalance(request))
            }
            GroupState::Empty => Err(Error::UnknownMemberId),
            GroupState::Dead => Err(Error::CoordinatorNotAvailable),
        }
    }

    fn add_member_and_rebalance(
        &mut self,
        request: JoinGroupRequest,
        member_id: String,
    ) -> Pending<JoinGroupResponse> {
        let now = self.now();
        let timeout = self.config.new_member_join_timeout_ms;
        let pending = Pending::new();
        let Some(group) = self.store.group_mut(&request.group_id) else {
            return Pending::ready(JoinGroupResponse::error(member_id, Error::UnknownMemberId));
        };
        if group.is_in(GroupState::PreparingRebalance) && group.previous_state == GroupState::Empty
        {
            group.new_member_added = true;
        }
        let mut member = ClassicMember::new(member_id, request.protocol_type, request.protocols);
        member.instance_id = request.instance_id;
        member.client_id = request.client_id;
        member.client_host = request.client_host;
        member.session_timeout_ms = request.session_timeout_ms;
        member.rebalance_timeout_ms = request.rebalance_timeout_ms;
        member.is_new = true;
        member.session_deadline_ms = now.saturating_add(timeout);
        member.awaiting_join = Some(pending.clone());
        group.add(member);
        self.maybe_prepare_rebalance_or_complete_join(&request.group_id);
        pending
    }

    fn update_member_and_rebalance(
        &mut self,
        request: JoinGroupRequest,
    ) -> Pending<JoinGroupResponse> {
        let pending = Pending::new();
        if let Some(member) = self
            .store
            .group_mut(&request.group_id)
            .and_then(|g| g.member_mut(&request.member_id))
        {
            member.protocols = request.protocols;
            member.session_timeout_ms = request.session_timeout_ms;
            member.rebalance_timeout_ms = request.rebalance_timeout_ms;
            if let Some(old) = member.awaiting_join.replace(pending.clone()) {
                // A member that joins twice gets the second answer on both.
                drop(old);
            }
        }
        self.maybe_prepare_rebalance_or_complete_join(&request.group_id);
        pending
    }

    /// A static member rejoins with a new member id: the old id is fenced, and in a Stable
    /// group whose protocol would not change nothing rebalances.
    fn replace_static_member(
        &mut self,
        request: JoinGroupRequest,
        old_member_id: &str,
        new_member_id: String,
    ) -> Result<Pending<JoinGroupResponse>, Error> {
        let now = self.now();
        let group_id = request.group_id.clone();
        let pending = Pending::new();
        let group = self.group(&group_id)?;
        let old_leader = group.leader.clone();
        let member = group
            .member_mut(old_member_id)
            .ok_or(Error::UnknownMemberId)?;
        if let Some(join) = member.awaiting_join.take() {
            join.complete(JoinGroupResponse::error(
                old_member_id,
                Error::FencedInstanceId,
            ));
        }
        if let Some(sync) = member.awaiting_sync.take() {
            sync.complete(SyncGroupResponse::error(Error::FencedInstanceId));
        }
        let old_protocols = std::mem::replace(&mut member.protocols, request.protocols);
        member.member_id = new_member_id.clone();
        member.session_timeout_ms = request.session_timeout_ms;
        member.rebalance_timeout_ms = request.rebalance_timeout_ms;
        member.session_deadline_ms = now.saturating_add(i64::from(request.session_timeout_ms));
        member.awaiting_join = Some(pending.clone());
        if group.leader.as_deref() == Some(old_member_id) {
            group.leader = Some(new_member_id.clone());
        }
        if group.pending_sync.remove(old_member_id) {
            group.pending_sync.insert(new_member_id.clone());
        }
        match group.state {
            GroupState::Stable => {
                if group.protocol.is_some() && group.protocol == group.select_protocol() {
                    let is_leader = group.leader.as_deref() == Some(new_member_id.as_str());
                    if let Err(error) = self.store.write_group(&group_id) {
                        // Put the old member back as it was.
                        let group = self.group(&group_id)?;
                        if let Some(m) = group.member_mut(&new_member_id) {
                            m.member_id = old_member_id.to_owned();
                            m.protocols = old_protocols;
                            m.awaiting_join = None;
                        }
                        group.leader = old_leader;
                        return Err(map_append_error(error));
                    }
                    let group = self.group(&group_id)?;
                    // KIP-814 (JoinGroup v9+, Kafka's current answer): the returning static
                    // leader is named leader, with every member, and told to skip the
                    // assignment, which a Stable group would not broadcast.
                    let response = current_generation(group, &new_member_id, is_leader, is_leader);
                    if let Some(m) = group.member_mut(&new_member_id) {
                        m.awaiting_join = None;
                    }
                    pending.complete(response);
                } else {
                    self.maybe_prepare_rebalance_or_complete_join(&group_id);
                }
            }
            GroupState::CompletingRebalance => self.prepare_rebalance(&group_id),
            _ => self.maybe_complete_join_phase(&group_id),
        }
        Ok(pending)
    }

    fn maybe_prepare_rebalance_or_complete_join(&mut self, group_id: &str) {
        match self.store.group(group_id) {
            Some(g) if g.can_rebalance() => self.prepare_rebalance(group_id),
            Some(_) => self.maybe_complete_join_phase(group_id),
            None => {}
        }
    }

    /// Starts a join phase (Kafka's `prepareRebalance`): parked syncs get
    /// REBALANCE_IN_PROGRESS, and the phase's timer starts (the initial delay from Empty).
    fn prepare_rebalance(&mut self, group_id: &str) {
        let now = self.now();
        let delay = self.config.initial_rebalance_delay_ms;
        let Some(group) = self.store.group_mut(group_id) else {
            return;
        };
        if group.is_in(GroupState::CompletingRebalance) {
            for m in &mut group.members {
                m.assignment.clear();
                if let Some(sync) = m.awaiting_sync.take() {
                    sync.complete(SyncGroupResponse::error(Error::RebalanceInProgress));
                }
            }
        }
        self.sync_timers.remove(group_id);
        let initial = group.is_in(GroupState::Empty);
        let rebalance_timeout = group.rebalance_timeout_ms();
        group.transition_to(GroupState::PreparingRebalance, now);
        self.rebalances_started += 1;
        let timer = if initial {
            JoinTimer {
                deadline_ms: now.saturating_add(delay),
                initial: Some((delay, rebalance_timeout.saturating_sub(delay).max(0))),
            }
        } else {
            JoinTimer {
                deadline_ms: now.saturating_add(rebalance_timeout),
                initial: None,
            }
        };
        self.join_timers.insert(group_id.to_owned(), timer);
        self.maybe_complete_join_phase(group_id);
    }

    /// Completes the join phase once every member rejoined, unless it started from Empty
    /// (then only its timer completes it).
    fn maybe_complete_join_phase(&mut self, group_id: &str) {
        let ready = self.store.group(group_id).is_some_and(|g| {
            g.is_in(GroupState::PreparingRebalance)
                && g.has_all_members_joined()
                && g.previous_state != GroupState::Empty
        });
        if ready {
            self.complete_join(group_id);
        }
    }

    /// Completes the join phase (Kafka's `completeClassicGroupJoin`).
    fn complete_join(&mut self, group_id: &str) {
        let now = self.now();
        self.join_timers.remove(group_id);
        let Some(group) = self.store.group_mut(group_id) else {
            return;
        };
        if group.is_in(GroupState::Dead) {
            return;
        }
        // Dynamic members that did not rejoin leave; static ones stay.
        let gone: Vec<String> = group
            .members
            .iter()
            .filter(|m| !m.is_awaiting_join() && m.instance_id.is_none())
            .map(|m| m.member_id.clone())
            .collect();
        for id in &gone {
            group.remove(id);
        }
        if !group.maybe_elect_new_joined_leader() && !group.members.is_empty() {
            // Nobody rejoined: wait another rebalance timeout for the sessions to expire.
            let deadline = now.saturating_add(group.rebalance_timeout_ms());
            self.join_timers.insert(
                group_id.to_owned(),
                JoinTimer {
                    deadline_ms: deadline,
                    initial: None,
                },
            );
            return;
        }
        group.new_member_added = false;
        group.init_next_generation(now);
        if group.is_in(GroupState::Empty) {
            if let Err(error) = self.store.write_group(group_id) {
                log::warn!("writing the empty group record of {group_id} failed: {error}");
            }
            return;
        }
        let leader = group.leader.clone().unwrap_or_default();
        let all: Vec<JoinedMember> = group
            .members
            .iter()
            .map(|m| JoinedMember {
                member_id: m.member_id.clone(),
                instance_id: m.instance_id.clone(),
                metadata: m
                    .metadata(group.protocol.as_deref().unwrap_or_default())
                    .unwrap_or_default()
                    .to_vec(),
            })
            .collect();
        let (generation, protocol_type, protocol) = (
            group.generation,
            group.protocol_type.clone(),
            group.protocol.clone(),
        );
        for m in &mut group.members {
            let is_leader = m.member_id == leader;
            let response = JoinGroupResponse {
                error: None,
                generation,
                protocol_type: protocol_type.clone(),
                protocol: protocol.clone(),
                leader: leader.clone(),
                skip_assignment: false,
                member_id: m.member_id.clone(),
                members: if is_leader { all.clone() } else { Vec::new() },
            };
            if let Some(join) = m.awaiting_join.take() {
                join.complete(response);
            }
            m.is_new = false;
            m.session_deadline_ms = now.saturating_add(i64::from(m.session_timeout_ms));
        }
        let deadline = now.saturating_add(group.rebalance_timeout_ms());
        self.sync_timers
            .insert(group_id.to_owned(), (generation, deadline));
    }

    /// Removes a member (Kafka's `removeMemberAndUpdateClassicGroup`): its parked join gets
    /// `join_error`, and the group rebalances or completes its join phase.
    fn remove_member(&mut self, group_id: &str, member_id: &str, join_error: Error) {
        let Some(group) = self.store.group_mut(group_id) else {
            return;
        };
        let Some(member) = group.remove(member_id) else {
            return;
        };
        if let Some(join) = member.awaiting_join {
            join.complete(JoinGroupResponse::error(member_id, join_error));
        }
        if let Some(sync) = member.awaiting_sync {
            sync.complete(SyncGroupResponse::error(Error::UnknownMemberId));
        }
        match group.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.prepare_rebalance(group_id)
            }
            GroupState::PreparingRebalance => self.maybe_complete_join_phase(group_id),
            GroupState::Empty | GroupState::Dead => {}
        }
    }
}

/// The answer a member gets for the generation in force, without a rebalance.
fn current_generation(
    group: &ClassicGroup,
    member_id: &str,
    with_members: bool,
    skip_assignment: bool,
) -> JoinGroupResponse {
    let protocol = group.protocol.as_deref().unwrap_or_default();
    JoinGroupResponse {
        error: None,
        generation: group.generation,
        protocol_type: group.protocol_type.clone(),
        protocol: group.protocol.clone(),
        leader: group.leader.clone().unwrap_or_default(),
        skip_assignment,
        member_id: member_id.to_owned(),
        members: if with_members {
            group
                .members
                .iter()
                .map(|m| JoinedMember {
                    member_id: m.member_id.clone(),
                    instance_id: m.instance_id.clone(),
                    metadata: m.metadata(protocol).unwrap_or_default().to_vec(),
                })
                .collect()
        } else {
            Vec::new()
        },
    }
}

/// What a failed group-record append answers (Kafka maps its append errors the same way).
fn map_append_error(error: Error) -> Error {
    match error.kafka_code() {
        Some(16) => Error::NotCoordinator,
        _ => Error::CoordinatorNotAvailable,
    }
}

mod sync;
