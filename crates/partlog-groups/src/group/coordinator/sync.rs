//! The rest of [`GroupCoordinator`]'s requests: SyncGroup, Heartbeat, LeaveGroup,
//! DescribeGroups, and the timers [`tick`](GroupCoordinator::tick) fires.

use super::{
    DescribedGroup, DescribedMember, GroupCoordinator, JoinTimer, LeaveResults, LeavingMember,
    SyncGroupRequest, map_append_error,
};
use crate::Error;
use crate::group::classic::{ClassicMember, GroupState};
use crate::group::pending::{JoinGroupResponse, Pending, SyncGroupResponse};
use crate::offsets::log::OffsetsLog;

impl<L: OffsetsLog> GroupCoordinator<L> {
    /// SyncGroup. A follower's answer is parked until the leader's assignment is persisted
    /// (as the group's record); the leader's sync persists it and answers everyone.
    pub fn sync(&mut self, request: SyncGroupRequest) -> Pending<SyncGroupResponse> {
        match self.try_sync(request) {
            Ok(pending) => pending,
            Err(error) => Pending::ready(SyncGroupResponse::error(error)),
        }
    }

    fn try_sync(&mut self, request: SyncGroupRequest) -> Result<Pending<SyncGroupResponse>, Error> {
        if request.group_id.is_empty() {
            return Err(Error::InvalidGroupId);
        }
        let group = self.group(&request.group_id)?;
        if group.is_in(GroupState::Dead) {
            return Err(Error::CoordinatorNotAvailable);
        }
        group.validate_member(&request.member_id, request.instance_id.as_deref())?;
        if request.generation != group.generation {
            return Err(Error::IllegalGeneration);
        }
        let inconsistent =
            |asked: &Option<String>, have: &Option<String>| asked.is_some() && asked != have;
        if inconsistent(&request.protocol_type, &group.protocol_type)
            || inconsistent(&request.protocol, &group.protocol)
        {
            return Err(Error::InconsistentGroupProtocol);
        }
        match group.state {
            GroupState::Empty => Err(Error::UnknownMemberId),
            GroupState::PreparingRebalance => Err(Error::RebalanceInProgress),
            GroupState::Dead => Err(Error::CoordinatorNotAvailable),
            GroupState::Stable => {
                group.pending_sync.remove(&request.member_id);
                let member = group
                    .member(&request.member_id)
                    .ok_or(Error::UnknownMemberId)?;
                Ok(Pending::ready(SyncGroupResponse {
                    error: None,
                    protocol_type: group.protocol_type.clone(),
                    protocol: group.protocol.clone(),
                    assignment: member.assignment.clone(),
                }))
            }
            GroupState::CompletingRebalance => {
                group.pending_sync.remove(&request.member_id);
                let pending = Pending::new();
                let is_leader = group.leader.as_deref() == Some(request.member_id.as_str());
                if let Some(m) = group.member_mut(&request.member_id) {
                    m.awaiting_sync = Some(pending.clone());
                }
                if is_leader {
                    self.complete_sync(&request.group_id, request.assignments);
                }
                Ok(pending)
            }
        }
    }

    /// The leader's assignment: persisted as the group's record, then every parked sync gets
    /// its member's assignment and the group is Stable; if the append fails, everyone gets the
    /// mapped error and the group rebalances.
    fn complete_sync(&mut self, group_id: &str, assignments: Vec<(String, Vec<u8>)>) {
        let now = self.now();
        let Some(group) = self.store.group_mut(group_id) else {
            return;
        };
        let previous: Vec<Vec<u8>> = group.members.iter().map(|m| m.assignment.clone()).collect();
        for m in &mut group.members {
            // A member the leader left out gets an empty assignment.
            m.assignment = assignments
                .iter()
                .find(|(id, _)| *id == m.member_id)
                .map(|(_, a)| a.clone())
                .unwrap_or_default();
        }
        // The record says Stable's time: the group is Stable once it is durable.
        let state_timestamp = group.state_timestamp_ms;
        group.state_timestamp_ms = Some(now);
        let written = self.store.write_group(group_id);
        let Some(group) = self.store.group_mut(group_id) else {
            return;
        };
        match written {
            Ok(()) => {
                group.state_timestamp_ms = state_timestamp;
                group.transition_to(GroupState::Stable, now);
                let (protocol_type, protocol) =
                    (group.protocol_type.clone(), group.protocol.clone());
                for m in &mut group.members {
                    if let Some(sync) = m.awaiting_sync.take() {
                        sync.complete(SyncGroupResponse {
                            error: None,
                            protocol_type: protocol_type.clone(),
                            protocol: protocol.clone(),
                            assignment: m.assignment.clone(),
                        });
                    }
                }
            }
            Err(error) => {
                group.state_timestamp_ms = state_timestamp;
                let error = map_append_error(error);
                for (m, old) in group.members.iter_mut().zip(previous) {
                    m.assignment = old;
                    if let Some(sync) = m.awaiting_sync.take() {
                        sync.complete(SyncGroupResponse::error(error.clone()));
                    }
                }
                self.prepare_rebalance(group_id);
            }
        }
    }

    /// Heartbeat: keeps the member's session. During a join phase it answers
    /// REBALANCE_IN_PROGRESS (27) so the member rejoins.
    ///
    /// # Errors
    /// 24 for an empty group id; 15 for a Dead group; 25, 82 or 22 for a member outside the
    /// generation; 27 while rebalancing.
    pub fn heartbeat(
        &mut self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Result<(), Error> {
        if group_id.is_empty() {
            return Err(Error::InvalidGroupId);
        }
        let now = self.now();
        let group = self.group(group_id)?;
        if group.is_in(GroupState::Dead) {
            return Err(Error::CoordinatorNotAvailable);
        }
        group.validate_member(member_id, instance_id)?;
        if generation != group.generation {
            return Err(Error::IllegalGeneration);
        }
        if group.is_in(GroupState::Empty) {
            return Err(Error::UnknownMemberId);
        }
        let state = group.state;
        if let Some(m) = group.member_mut(member_id) {
            m.session_deadline_ms = now.saturating_add(i64::from(m.session_timeout_ms));
        }
        if state == GroupState::PreparingRebalance {
            return Err(Error::RebalanceInProgress);
        }
        Ok(())
    }

    /// LeaveGroup for a batch of members: each is removed (a static one by its instance id),
    /// a two-step join still pending is dropped without a rebalance.
    ///
    /// # Errors
    /// 24, 25 for a missing group, 15 for a Dead one; each member's own answer otherwise.
    pub fn leave(
        &mut self,
        group_id: &str,
        members: &[LeavingMember],
    ) -> Result<LeaveResults, Error> {
        if group_id.is_empty() {
            return Err(Error::InvalidGroupId);
        }
        if self.group(group_id)?.is_in(GroupState::Dead) {
            return Err(Error::CoordinatorNotAvailable);
        }
        let mut results = Vec::with_capacity(members.len());
        for leaving in members {
            let group = self.group(group_id)?;
            let target = match &leaving.instance_id {
                Some(instance) => match group.static_member_id(instance) {
                    None => Err(Error::UnknownMemberId),
                    Some(existing)
                        if !leaving.member_id.is_empty() && existing != leaving.member_id =>
                    {
                        Err(Error::FencedInstanceId)
                    }
                    Some(existing) => Ok(existing.to_owned()),
                },
                None if group.pending_members.remove(&leaving.member_id) => {
                    self.pending_member_deadlines
                        .remove(&(group_id.to_owned(), leaving.member_id.clone()));
                    results.push((leaving.clone(), Ok(())));
                    continue;
                }
                None if group.has_member(&leaving.member_id) => Ok(leaving.member_id.clone()),
                None => Err(Error::UnknownMemberId),
            };
            match target {
                Ok(member_id) => {
                    self.remove_member(group_id, &member_id, Error::UnknownMemberId);
                    results.push((leaving.clone(), Ok(())));
                }
                Err(error) => results.push((leaving.clone(), Err(error))),
            }
        }
        Ok(results)
    }

    /// DescribeGroups for one group: Dead, without members, for a group that does not exist.
    pub fn describe(&self, group_id: &str) -> DescribedGroup {
        let Some(group) = self.store.group(group_id) else {
            return DescribedGroup {
                state: GroupState::Dead,
                protocol_type: None,
                protocol: None,
                generation: -1,
                leader: None,
                members: Vec::new(),
            };
        };
        let protocol = group.protocol.as_deref().unwrap_or_default();
        DescribedGroup {
            state: group.state,
            protocol_type: group.protocol_type.clone(),
            protocol: group.protocol.clone(),
            generation: group.generation,
            leader: group.leader.clone(),
            members: group
                .members
                .iter()
                .map(|m| DescribedMember {
                    member_id: m.member_id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: m.metadata(protocol).unwrap_or_default().to_vec(),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }

    /// Fires every timer due at the clock's time: join phases (the initial delay re-armed while
    /// new members arrive), sync expiry (members that never synced leave), sessions (a member
    /// not parked in a join or sync, or a new one past its join timeout, leaves), two-step joins
    /// that never came back; then the offset store's expiry check.
    ///
    /// # Errors
    /// The offset store's log failure.
    pub fn tick(&mut self) -> Result<(), Error> {
        let now = self.now();
        self.fire_join_timers(now);
        self.fire_sync_timers(now);
        self.expire_sessions(now);
        let due: Vec<(String, String)> = self
            .pending_member_deadlines
            .iter()
            .filter(|(_, deadline)| **deadline <= now)
            .map(|(key, _)| key.clone())
            .collect();
        for (group_id, member_id) in due {
            self.pending_member_deadlines
                .remove(&(group_id.clone(), member_id.clone()));
            if let Some(group) = self.store.group_mut(&group_id) {
                group.pending_members.remove(&member_id);
            }
            self.maybe_complete_join_phase(&group_id);
        }
        self.store.tick().map(|_| ())
    }

    fn fire_join_timers(&mut self, now: i64) {
        let due: Vec<(String, JoinTimer)> = self
            .join_timers
            .iter()
            .filter(|(_, t)| t.deadline_ms <= now)
            .map(|(g, t)| (g.clone(), *t))
            .collect();
        for (group_id, timer) in due {
            let new_member_added = self
                .store
                .group(&group_id)
                .is_some_and(|g| g.new_member_added);
            match timer.initial {
                Some((delay, remaining)) if new_member_added && remaining != 0 => {
                    if let Some(g) = self.store.group_mut(&group_id) {
                        g.new_member_added = false;
                    }
                    self.join_timers.insert(
                        group_id,
                        JoinTimer {
                            deadline_ms: now.saturating_add(delay.min(remaining)),
                            initial: Some((delay, remaining.saturating_sub(delay).max(0))),
                        },
                    );
                }
                _ => self.complete_join(&group_id),
            }
        }
    }

    fn fire_sync_timers(&mut self, now: i64) {
        let due: Vec<(String, i32)> = self
            .sync_timers
            .iter()
            .filter(|(_, (_, deadline))| *deadline <= now)
            .map(|(g, (generation, _))| (g.clone(), *generation))
            .collect();
        for (group_id, generation) in due {
            self.sync_timers.remove(&group_id);
            let Some(group) = self.store.group_mut(&group_id) else {
                continue;
            };
            let in_sync_phase = matches!(
                group.state,
                GroupState::CompletingRebalance | GroupState::Stable
            );
            if generation != group.generation || !in_sync_phase || group.pending_sync.is_empty() {
                continue;
            }
            let late: Vec<String> = group.pending_sync.iter().cloned().collect();
            for member_id in late {
                if let Some(group) = self.store.group_mut(&group_id)
                    && let Some(m) = group.remove(&member_id)
                {
                    drop_parked(m);
                }
            }
            self.prepare_rebalance(&group_id);
        }
    }

    fn expire_sessions(&mut self, now: i64) {
        let mut expired = Vec::new();
        for group_id in self.store.group_ids() {
            if let Some(group) = self.store.group(&group_id) {
                for m in &group.members {
                    let satisfied = !m.is_new && (m.is_awaiting_join() || m.is_awaiting_sync());
                    if m.session_deadline_ms <= now && !satisfied {
                        expired.push((group_id.clone(), m.member_id.clone()));
                    }
                }
            }
        }
        for (group_id, member_id) in expired {
            self.remove_member(&group_id, &member_id, Error::UnknownMemberId);
        }
    }
}

/// A member removed for not syncing: whatever it has parked gets UNKNOWN_MEMBER_ID.
fn drop_parked(member: ClassicMember) {
    if let Some(join) = member.awaiting_join {
        join.complete(JoinGroupResponse::error(
            member.member_id.clone(),
            Error::UnknownMemberId,
        ));
    }
    if let Some(sync) = member.awaiting_sync {
        sync.complete(SyncGroupResponse::error(Error::UnknownMemberId));
    }
}
