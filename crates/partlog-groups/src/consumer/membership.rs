//! The consumer's side of the classic protocol, one step per call from `poll`: join, sync,
//! heartbeat, leave, `max.poll.interval.ms`, and the rebalance listener's calls (Kafka's
//! `ConsumerCoordinator` and `AbstractCoordinator`, without their heartbeat thread).

use std::collections::BTreeSet;

use super::{Consumer, Source};
use crate::Error;
use crate::assignor::{RebalanceProtocol, TopicPartition};
use crate::group::consumer_protocol::{Assignment, Subscription, TopicPartitions};
use crate::group::coordinator::{JoinGroupRequest, LeavingMember, SyncGroupRequest};
use crate::group::pending::{JoinGroupResponse, Pending, SyncGroupResponse};

/// The consumer protocol's version partlog writes (Kafka's current one).
pub(super) const CONSUMER_PROTOCOL_VERSION: i16 = 3;

/// Where the consumer stands in the group.
#[derive(Debug, Default)]
pub(super) enum Phase {
    /// Not in a join or sync; member of the group when `generation >= 0`.
    #[default]
    Unjoined,
    /// Its JoinGroup is parked at the coordinator.
    Joining(Pending<JoinGroupResponse>),
    /// Its SyncGroup is parked at the coordinator.
    Syncing(Pending<SyncGroupResponse>),
}

impl Consumer {
    /// `max.poll.interval.ms` checked client-side: a consumer that did not poll for that long
    /// leaves the group (its partitions are lost, not revoked), and rejoins now.
    pub(super) fn check_poll_interval(&mut self) -> Result<(), Error> {
        let now = self.clock.now_ms();
        let idle = now.saturating_sub(self.last_poll_ms);
        self.last_poll_ms = now;
        if matches!(self.source, Source::Subscribed(_))
            && self.generation >= 0
            && idle > i64::from(self.config.max_poll_interval_ms)
        {
            log::warn!(
                "consumer {:?}: {idle} ms since the last poll, more than max.poll.interval.ms \
                 ({}): leaving the group and rejoining",
                self.member_id,
                self.config.max_poll_interval_ms
            );
            self.lose_partitions();
            self.leave_group()?;
            self.rejoin_needed = true;
        }
        Ok(())
    }

    /// Moves the membership on as far as the coordinator's answers allow, without waiting.
    pub(super) fn advance_membership(&mut self) -> Result<(), Error> {
        // A join may complete at once, then the leader's sync: a few steps per call.
        for _ in 0..4 {
            match std::mem::take(&mut self.phase) {
                Phase::Unjoined if self.rejoin_needed => self.send_join()?,
                Phase::Unjoined => return Ok(()),
                Phase::Joining(pending) => match pending.try_take() {
                    Some(response) => self.on_join_response(response)?,
                    None => {
                        self.phase = Phase::Joining(pending);
                        return Ok(());
                    }
                },
                Phase::Syncing(pending) => match pending.try_take() {
                    Some(response) => self.on_sync_response(response)?,
                    None => {
                        self.phase = Phase::Syncing(pending);
                        return Ok(());
                    }
                },
            }
        }
        Ok(())
    }

    fn send_join(&mut self) -> Result<(), Error> {
        let Source::Subscribed(topics) = &self.source else {
            return Ok(());
        };
        let topics = topics.clone();
        if self.protocol == RebalanceProtocol::Eager && !self.assigned.is_empty() {
            let all: Vec<TopicPartition> = self.assigned.iter().cloned().collect();
            self.revoke(&all);
        }
        let owned = group_by_topic(&self.assigned);
        let mut protocols = Vec::with_capacity(self.assignors.len());
        for assignor in &self.assignors {
            let subscription = Subscription {
                topics: topics.clone(),
                user_data: assignor.subscription_user_data(&topics),
                owned_partitions: owned.clone(),
                generation_id: self.generation,
                rack_id: None,
            };
            protocols.push((
                assignor.name().to_owned(),
                subscription.encode(CONSUMER_PROTOCOL_VERSION)?,
            ));
        }
        let group = self.group_id()?.to_owned();
        let request = JoinGroupRequest {
            group_id: group.clone(),
            member_id: self.member_id.clone(),
            instance_id: self.config.group_instance_id.clone(),
            protocol_type: "consumer".to_owned(),
            protocols,
            session_timeout_ms: self.config.session_timeout_ms,
            rebalance_timeout_ms: self.config.max_poll_interval_ms,
            client_id: self.config.client_id.clone(),
            client_host: "/127.0.0.1".to_owned(),
        };
        self.rejoin_needed = false;
        self.phase = Phase::Joining(self.router.with_group(&group, |s| Ok(s.join(request)))?);
        Ok(())
    }

    fn on_join_response(&mut self, response: JoinGroupResponse) -> Result<(), Error> {
        if let Some(error) = response.error {
            return self.on_group_error(error, Some(&response.member_id));
        }
        self.member_id = response.member_id.clone();
        self.generation = response.generation;
        self.group_protocol = response.protocol.clone();
        let assignments = if response.leader == self.member_id && !response.skip_assignment {
            match self.perform_assignment(&response) {
                Ok(assignments) => assignments,
                Err(error) => {
                    self.rejoin_needed = true;
                    return Err(error);
                }
            }
        } else {
            Vec::new()
        };
        let group = self.group_id()?.to_owned();
        let request = SyncGroupRequest {
            group_id: group.clone(),
            member_id: self.member_id.clone(),
            instance_id: self.config.group_instance_id.clone(),
            generation: self.generation,
            protocol_type: Some("consumer".to_owned()),
            protocol: response.protocol,
            assignments,
        };
        self.phase = Phase::Syncing(self.router.with_group(&group, |s| Ok(s.sync(request)))?);
        Ok(())
    }

    fn on_sync_response(&mut self, response: SyncGroupResponse) -> Result<(), Error> {
        if let Some(error) = response.error {
            return self.on_group_error(error, None);
        }
        // A blob that does not parse assigns nothing; the next rebalance tries again.
        let assignment = Assignment::decode(&response.assignment).unwrap_or_else(|error| {
            log::warn!(
                "consumer {:?}: an assignment that does not parse ({error}): none",
                self.member_id
            );
            self.rejoin_needed = true;
            Assignment::default()
        });
        let new: BTreeSet<TopicPartition> = assignment
            .assigned_partitions
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| TopicPartition::new(&t.topic, *p))
            })
            .collect();
        let revoked: Vec<TopicPartition> = self.assigned.difference(&new).cloned().collect();
        let added: Vec<TopicPartition> = new.difference(&self.assigned).cloned().collect();
        if !revoked.is_empty() {
            // COOPERATIVE: give up what moved, then rejoin at once so it can be reassigned.
            self.revoke(&revoked);
            self.rejoin_needed = true;
        }
        self.assigned = new;
        let generation = self.generation;
        let list: Vec<TopicPartition> = self.assigned.iter().cloned().collect();
        let chosen = self.group_protocol.clone();
        if let Some(assignor) = self
            .assignors
            .iter_mut()
            .find(|a| Some(a.name()) == chosen.as_deref())
        {
            assignor.on_assignment(&list, generation);
        }
        self.listener.on_partitions_assigned(&added);
        self.next_heartbeat_ms = self
            .clock
            .now_ms()
            .saturating_add(self.config.heartbeat_interval_ms);
        Ok(())
    }

    /// What a group error means for the member (Kafka's handlers of join, sync, heartbeat).
    fn on_group_error(&mut self, error: Error, member_id: Option<&str>) -> Result<(), Error> {
        self.phase = Phase::Unjoined;
        self.rejoin_needed = true;
        match error {
            Error::RebalanceInProgress => Ok(()),
            Error::MemberIdRequired => {
                self.member_id = member_id.unwrap_or_default().to_owned();
                Ok(())
            }
            Error::UnknownMemberId | Error::IllegalGeneration => {
                self.lose_partitions();
                self.reset_generation(matches!(error, Error::UnknownMemberId));
                Ok(())
            }
            // The group is being loaded or unloaded: retry. NOT_COORDINATOR means the shard's
            // log failed, which no retry mends: the application hears of it.
            Error::CoordinatorNotAvailable => Ok(()),
            other => Err(other),
        }
    }

    /// Heartbeats when `heartbeat.interval.ms` has passed, or at once when a join phase
    /// started in the group's shard since the last heartbeat (the answer then says whether it
    /// is this group's), for a member in a generation.
    pub(super) fn heartbeat_if_due(&mut self) -> Result<(), Error> {
        let now = self.clock.now_ms();
        if !matches!(self.phase, Phase::Unjoined) || self.generation < 0 {
            return Ok(());
        }
        let group = self.group_id()?.to_owned();
        let notice = self.router.rebalance_notice(&group);
        if now < self.next_heartbeat_ms && notice == self.seen_rebalance_notice {
            return Ok(());
        }
        self.seen_rebalance_notice = notice;
        let (member, generation) = (self.member_id.clone(), self.generation);
        let instance = self.config.group_instance_id.clone();
        let beat = self.router.with_group(&group, |s| {
            s.heartbeat(&group, &member, instance.as_deref(), generation)
        });
        self.next_heartbeat_ms = now.saturating_add(self.config.heartbeat_interval_ms);
        match beat {
            Ok(()) => Ok(()),
            Err(error) => self.on_group_error(error, None),
        }
    }

    /// Sends LeaveGroup for this member, and forgets its id and generation.
    pub(super) fn leave_group(&mut self) -> Result<(), Error> {
        self.phase = Phase::Unjoined;
        if self.member_id.is_empty() {
            return Ok(());
        }
        let group = self.group_id()?.to_owned();
        let leaving = LeavingMember {
            member_id: self.member_id.clone(),
            instance_id: self.config.group_instance_id.clone(),
        };
        let left = self
            .router
            .with_group(&group, |s| s.leave(&group, &[leaving]));
        self.reset_generation(true);
        match left {
            // Already gone (removed by a timer): nothing to leave.
            Ok(_) | Err(Error::UnknownMemberId) | Err(Error::GroupIdNotFound) => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// Kafka's `resetGenerationOnResponseError`: the generation is gone; the member id too when
    /// the coordinator no longer knows it.
    pub(super) fn reset_generation(&mut self, forget_member: bool) {
        self.generation = -1;
        if forget_member {
            self.member_id.clear();
        }
    }

    /// Commits (auto-commit on) and revokes `partitions`.
    fn revoke(&mut self, partitions: &[TopicPartition]) {
        if self.config.enable_auto_commit
            && let Err(error) = self.commit_positions_of(partitions)
        {
            log::warn!(
                "consumer {:?}: the commit before a revocation failed: {error}",
                self.member_id
            );
        }
        self.listener.on_partitions_revoked(partitions);
        for tp in partitions {
            self.assigned.remove(tp);
            self.positions.remove(tp);
        }
    }

    /// Drops every partition without a commit.
    fn lose_partitions(&mut self) {
        let lost: Vec<TopicPartition> = self.assigned.iter().cloned().collect();
        self.assigned.clear();
        self.positions.clear();
        if !lost.is_empty() {
            self.listener.on_partitions_lost(&lost);
        }
    }
}

/// Partitions by topic, as the consumer protocol lists them.
pub(super) fn group_by_topic<'a>(
    partitions: impl IntoIterator<Item = &'a TopicPartition>,
) -> Vec<TopicPartitions> {
    let mut out: Vec<TopicPartitions> = Vec::new();
    for tp in partitions {
        match out.last_mut() {
            Some(last) if last.topic == tp.topic => last.partitions.push(tp.partition),
            _ => out.push(TopicPartitions::new(tp.topic.clone(), vec![tp.partition])),
        }
    }
    out
}
