//! [`Partition`]: Kafka's `Partition` rules over one [`Log`]: the leader and follower roles,
//! the followers' fetch state, the ISR, the high watermark, and `acks=all` appends.
//!
//! Everything is driven by the caller's calls and the injected [`Clock`]: no threads, no
//! network, no timers. The caller carries fetches between replicas and plays Kafka's
//! controller (who leads, and whether a proposed ISR change commits).
//!
//! Lock order (ARCHITECTURE.md §12): the partition's state mutex is taken before any log call
//! that takes the log's writer mutex, never while the log holds one. Outcomes of `acks=all`
//! appends are delivered after the state mutex is released.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::log::{Log, ReadBound};
use crate::producer::Acks;
use crate::sync::Mutex;

use super::ReplicaConfig;
use super::ack::{AckFuture, AckSlot, PendingAck};
use super::follower_fetch::{EpochCheck, FollowerFetch, FollowerRead, check_last_fetched_epoch};
use super::isr::{IsrChange, IsrChangeKind, IsrState};
use super::replica_state::ReplicaState;

/// Whether a [`Partition`] leads, follows, or has not been told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Neither `become_leader` nor `become_follower` was called yet.
    None,
    /// The leader: takes client appends and serves followers.
    Leader,
    /// A follower: its log is written by a fetcher only.
    Follower,
}

/// One replica of a partition, with Kafka's `Partition` rules. See the module documentation
/// of [`replica`](super).
#[derive(Debug)]
pub struct Partition {
    log: Arc<Log>,
    local_replica_id: i32,
    config: ReplicaConfig,
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    role: Role,
    /// -1 before the first `become_leader` or `become_follower`.
    leader_epoch: i32,
    partition_epoch: i32,
    /// Where the current leader epoch starts in the log (Kafka's `leaderEpochStartOffsetOpt`):
    /// a follower joins the ISR only once it has reached it.
    leader_epoch_start_offset: Option<i64>,
    /// The assignment, the local replica included.
    replicas: Vec<i32>,
    isr: IsrState,
    /// The followers' fetch state, while leading.
    remotes: BTreeMap<i32, ReplicaState>,
    pending_acks: Vec<PendingAck>,
}

/// Completions found under the state mutex, delivered after it is released.
type Completions = Vec<(Arc<AckSlot>, Result<crate::log::LogAppendInfo>)>;

impl Partition {
    /// A partition over `log`, for the replica `local_replica_id`, with the rules of `config`,
    /// reading time from `clock`. It neither leads nor follows until told.
    pub fn new(
        log: Arc<Log>,
        local_replica_id: i32,
        config: ReplicaConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Partition> {
        config.validate()?;
        Ok(Partition {
            log,
            local_replica_id,
            config,
            clock,
            state: Mutex::new(State {
                role: Role::None,
                leader_epoch: -1,
                partition_epoch: -1,
                leader_epoch_start_offset: None,
                replicas: Vec::new(),
                isr: IsrState::default(),
                remotes: BTreeMap::new(),
                pending_acks: Vec::new(),
            }),
        })
    }

    /// The log.
    pub fn log(&self) -> &Arc<Log> {
        &self.log
    }

    /// This replica's id.
    pub fn local_replica_id(&self) -> i32 {
        self.local_replica_id
    }

    /// The settings.
    pub fn config(&self) -> &ReplicaConfig {
        &self.config
    }

    /// Whether this replica leads, follows, or neither yet.
    pub fn role(&self) -> Role {
        self.state.lock().role
    }

    /// The current leader epoch (-1 before the first role change).
    pub fn leader_epoch(&self) -> i32 {
        self.state.lock().leader_epoch
    }

    /// The partition epoch: the controller's, moved up by one by each committed ISR change.
    pub fn partition_epoch(&self) -> i32 {
        self.state.lock().partition_epoch
    }

    /// The committed ISR, sorted.
    pub fn isr(&self) -> Vec<i32> {
        self.state.lock().isr.committed().iter().copied().collect()
    }

    /// The committed ISR plus the members whose addition is in flight, sorted: the set the
    /// high watermark waits for.
    pub fn maximal_isr(&self) -> Vec<i32> {
        self.state.lock().isr.maximal().into_iter().collect()
    }

    /// The ISR change in flight, if any.
    pub fn isr_change_in_flight(&self) -> Option<IsrChange> {
        self.state.lock().isr.in_flight().cloned()
    }

    /// A follower's fetch state, while leading.
    pub fn replica_state(&self, replica_id: i32) -> Option<ReplicaState> {
        self.state.lock().remotes.get(&replica_id).copied()
    }

    /// The log's high watermark.
    pub fn high_watermark(&self) -> i64 {
        self.log.high_watermark()
    }

    /// Kafka's `isUnderMinIsr`: leading with a committed ISR smaller than
    /// `min.insync.replicas` (capped at the replication factor). The high watermark does not
    /// move then, and `acks=all` appends fail with [`Error::NotEnoughReplicas`].
    pub fn is_under_min_isr(&self) -> bool {
        let state = self.state.lock();
        state.role == Role::Leader && state.isr.committed().len() < self.effective_min_isr(&state)
    }

    /// Kafka's `isAtMinIsr`: leading with a committed ISR exactly `min.insync.replicas`
    /// (capped at the replication factor) large: one more loss stops `acks=all` appends.
    pub fn is_at_min_isr(&self) -> bool {
        let state = self.state.lock();
        state.role == Role::Leader && state.isr.committed().len() == self.effective_min_isr(&state)
    }

    fn effective_min_isr(&self, state: &State) -> usize {
        self.config.effective_min_isr(state.replicas.len())
    }

    /// Makes this replica the leader in `leader_epoch` (Kafka's `makeLeader`), with the
    /// controller's `partition_epoch`, assignment `replicas` and `isr` (both include this
    /// replica). Returns whether this was a leader change: the same epoch again only takes the
    /// new assignment and ISR (a controller's ISR update), and keeps the followers' state.
    ///
    /// A new epoch tells the log ([`Log::become_leader`]), which records it in its epoch cache
    /// at the log end offset; an epoch below the current one fails with
    /// [`Error::FencedLeaderEpoch`].
    pub fn become_leader(
        &self,
        leader_epoch: i32,
        partition_epoch: i32,
        replicas: &[i32],
        isr: &[i32],
    ) -> Result<bool> {
        self.check_assignment(replicas, isr)?;
        let now = self.clock.now_ms();
        let mut state = self.state.lock();
        if leader_epoch < state.leader_epoch {
            return Err(Error::FencedLeaderEpoch {
                current: state.leader_epoch,
                found: leader_epoch,
            });
        }
        let was_leader = state.role == Role::Leader;
        let new_epoch = leader_epoch > state.leader_epoch || !was_leader;
        if new_epoch {
            self.log.become_leader(leader_epoch)?;
            if !was_leader {
                // A log that never had a high watermark follows its end (replication factor
                // 1): what it holds counts as committed, as it did for its bare writers.
                self.log.set_high_watermark(self.log.high_watermark())?;
            }
            state.leader_epoch_start_offset = Some(self.log.log_end_offset());
        }
        state.role = Role::Leader;
        state.leader_epoch = leader_epoch;
        state.partition_epoch = partition_epoch;
        state.replicas = replicas.to_vec();
        state.isr = IsrState::new(isr.iter().copied());
        let leader_end = self.log.log_end_offset();
        let remotes: BTreeMap<i32, ReplicaState> = replicas
            .iter()
            .copied()
            .filter(|&id| id != self.local_replica_id)
            .map(|id| {
                let mut replica = state
                    .remotes
                    .get(&id)
                    .copied()
                    .unwrap_or_else(ReplicaState::unknown);
                if new_epoch {
                    replica.reset(now, leader_end, !was_leader, isr.contains(&id));
                }
                (id, replica)
            })
            .collect();
        state.remotes = remotes;
        let mut completions = Completions::new();
        self.maybe_increment_high_watermark(&mut state, &mut completions)?;
        drop(state);
        deliver(completions);
        Ok(new_epoch)
    }

    /// Makes this replica a follower in `leader_epoch` (Kafka's `makeFollower`): the log takes
    /// no more client appends ([`Log::become_follower`]), waiting `acks=all` appends fail with
    /// [`Error::NotLeaderOrFollower`], and the followers' state is dropped. Returns whether the
    /// epoch or role changed; an epoch below the current one fails with
    /// [`Error::FencedLeaderEpoch`].
    pub fn become_follower(&self, leader_epoch: i32, partition_epoch: i32) -> Result<bool> {
        let mut state = self.state.lock();
        if leader_epoch < state.leader_epoch {
            return Err(Error::FencedLeaderEpoch {
                current: state.leader_epoch,
                found: leader_epoch,
            });
        }
        let changed = state.role != Role::Follower || leader_epoch > state.leader_epoch;
        self.log.become_follower()?;
        state.role = Role::Follower;
        state.leader_epoch = leader_epoch;
        state.partition_epoch = partition_epoch;
        state.leader_epoch_start_offset = None;
        state.isr = IsrState::default();
        state.remotes.clear();
        let completions: Completions = std::mem::take(&mut state.pending_acks)
            .into_iter()
            .filter_map(|pending| pending.slot.upgrade())
            .map(|slot| {
                (
                    slot,
                    Err(Error::NotLeaderOrFollower {
                        why: format!(
                            "the partition became a follower in leader epoch {leader_epoch} before the append was committed"
                        ),
                    }),
                )
            })
            .collect();
        drop(state);
        deliver(completions);
        Ok(changed)
    }

    fn check_assignment(&self, replicas: &[i32], isr: &[i32]) -> Result<()> {
        if !replicas.contains(&self.local_replica_id) {
            return Err(Error::InvalidArgument {
                why: format!(
                    "replica {} is not in the assignment {replicas:?}",
                    self.local_replica_id
                ),
            });
        }
        if !isr.contains(&self.local_replica_id) {
            return Err(Error::InvalidArgument {
                why: format!(
                    "the leader {} is not in the ISR {isr:?}",
                    self.local_replica_id
                ),
            });
        }
        if let Some(stranger) = isr.iter().find(|id| !replicas.contains(id)) {
            return Err(Error::InvalidArgument {
                why: format!("ISR member {stranger} is not in the assignment {replicas:?}"),
            });
        }
        Ok(())
    }

    /// Appends a client batch as the leader (Kafka's `appendRecordsToLeader`). The log stamps
    /// the leader epoch into it. Under [`Acks::All`] the returned future resolves once the high
    /// watermark passes the batch (every member of the maximal ISR has fetched it); under
    /// `acks=0` and `acks=1` it resolves at once.
    ///
    /// Fails at once, writing nothing, with [`Error::NotLeaderOrFollower`] when not leading,
    /// with [`Error::NotEnoughReplicas`] under `acks=all` when the ISR is smaller than
    /// `min.insync.replicas` (capped at the replication factor), and with the log's errors.
    pub fn append_as_leader(&self, batch: &[u8], acks: Acks) -> Result<AckFuture> {
        let mut state = self.state.lock();
        self.check_leader(&state)?;
        let min_isr = self.effective_min_isr(&state);
        let in_sync = state.isr.committed().len();
        if acks == Acks::All && in_sync < min_isr {
            return Err(Error::NotEnoughReplicas {
                in_sync,
                required: min_isr,
            });
        }
        let info = self.log.append_batch(batch)?;
        let required_offset = info.last_offset.saturating_add(1);
        let mut completions = Completions::new();
        self.maybe_increment_high_watermark(&mut state, &mut completions)?;
        let future = if acks != Acks::All {
            AckFuture::ready(Ok(info), required_offset)
        } else if self.log.high_watermark() >= required_offset {
            AckFuture::ready(self.committed_outcome(&state, info), required_offset)
        } else {
            let slot = Arc::new(AckSlot::default());
            state.pending_acks.push(PendingAck {
                required_offset,
                info,
                slot: Arc::downgrade(&slot),
            });
            AckFuture::pending(slot, required_offset)
        };
        drop(state);
        deliver(completions);
        Ok(future)
    }

    /// Kafka's `checkEnoughReplicasReachOffset` for an append the high watermark has passed:
    /// committed, unless the maximal ISR is by now below `min.insync.replicas`.
    fn committed_outcome(
        &self,
        state: &State,
        info: crate::log::LogAppendInfo,
    ) -> Result<crate::log::LogAppendInfo> {
        let min_isr = self.effective_min_isr(state);
        let maximal = state.isr.maximal().len();
        if maximal < min_isr {
            return Err(Error::NotEnoughReplicasAfterAppend {
                in_sync: maximal,
                required: min_isr,
            });
        }
        Ok(info)
    }

    fn check_leader(&self, state: &State) -> Result<()> {
        if state.role != Role::Leader {
            return Err(Error::NotLeaderOrFollower {
                why: format!(
                    "replica {} is not the leader (role {:?}, leader epoch {})",
                    self.local_replica_id, state.role, state.leader_epoch
                ),
            });
        }
        Ok(())
    }

    /// A request's current leader epoch against this partition's: older is fenced, newer unknown.
    fn check_request_epoch(state: &State, current_leader_epoch: Option<i32>) -> Result<()> {
        match current_leader_epoch {
            Some(found) if found < state.leader_epoch => Err(Error::FencedLeaderEpoch {
                current: state.leader_epoch,
                found,
            }),
            Some(found) if found > state.leader_epoch => Err(Error::UnknownLeaderEpoch {
                current: state.leader_epoch,
                found,
            }),
            _ => Ok(()),
        }
    }

    /// Kafka's `lastOffsetForLeaderEpoch` as the leader (an `OffsetsForLeaderEpoch` answer):
    /// `(epoch, end offset)` of the largest epoch at or below `leader_epoch`, (-1, -1) when
    /// undefined. The request's `current_leader_epoch` is checked as a fetch's is.
    pub fn last_offset_for_leader_epoch(
        &self,
        current_leader_epoch: Option<i32>,
        leader_epoch: i32,
    ) -> Result<(i32, i64)> {
        let state = self.state.lock();
        self.check_leader(&state)?;
        Self::check_request_epoch(&state, current_leader_epoch)?;
        Ok(self.log.end_offset_for_epoch(leader_epoch))
    }

    /// Serves a follower's fetch as the leader (Kafka's `fetchRecords` for a follower):
    /// checks the leader epoch and the follower's last fetched epoch (see [`FollowerRead`]),
    /// reads whole batches from the fetch offset up to the log end, and counts the fetch in the
    /// follower's state. That may propose an ISR expansion (returned, and kept in flight) and
    /// may move the high watermark, completing `acks=all` appends.
    ///
    /// Errors: [`Error::NotLeaderOrFollower`] when not leading or for a replica outside the
    /// assignment, [`Error::FencedLeaderEpoch`] / [`Error::UnknownLeaderEpoch`] for an older or
    /// newer `current_leader_epoch`, and the log's read errors.
    pub fn read_for_follower(&self, fetch: &FollowerFetch) -> Result<FollowerRead> {
        let now = self.clock.now_ms();
        let mut state = self.state.lock();
        self.check_leader(&state)?;
        Self::check_request_epoch(&state, fetch.current_leader_epoch)?;
        if !state.remotes.contains_key(&fetch.replica_id) {
            return Err(Error::NotLeaderOrFollower {
                why: format!(
                    "replica {} is not a follower of this partition (assignment {:?})",
                    fetch.replica_id, state.replicas
                ),
            });
        }
        let log_start_offset = self.log.log_start_offset();
        let log_end_offset = self.log.log_end_offset();
        let out_of_range = FollowerRead::OffsetOutOfRange {
            log_start_offset,
            log_end_offset,
        };
        if let Some(last_fetched_epoch) = fetch.last_fetched_epoch {
            let epoch_end = self.log.end_offset_for_epoch(last_fetched_epoch);
            match check_last_fetched_epoch(
                epoch_end,
                last_fetched_epoch,
                fetch.fetch_offset,
                log_start_offset,
            ) {
                EpochCheck::Read => {}
                EpochCheck::OutOfRange => return Ok(out_of_range),
                EpochCheck::Diverging { epoch, end_offset } => {
                    return Ok(FollowerRead::Diverging { epoch, end_offset });
                }
            }
        }
        if fetch.fetch_offset < log_start_offset || fetch.fetch_offset > log_end_offset {
            return Ok(out_of_range);
        }
        let data = self
            .log
            .read(fetch.fetch_offset, fetch.max_bytes, ReadBound::LogEnd)?;
        let leader_end = data.log_end_offset();
        let previous_end = state
            .remotes
            .get(&fetch.replica_id)
            .map(|replica| replica.log_end_offset);
        if let Some(replica) = state.remotes.get_mut(&fetch.replica_id) {
            replica.update_fetch_state(fetch.fetch_offset, fetch.log_start_offset, now, leader_end);
        }
        let proposed_isr_change = self.maybe_expand_isr(&mut state, fetch.replica_id);
        let mut completions = Completions::new();
        if previous_end != Some(fetch.fetch_offset) || proposed_isr_change.is_some() {
            self.maybe_increment_high_watermark(&mut state, &mut completions)?;
        }
        let high_watermark = self.log.high_watermark();
        drop(state);
        deliver(completions);
        Ok(FollowerRead::Records {
            data,
            high_watermark,
            log_start_offset,
            proposed_isr_change,
        })
    }

    /// Kafka's `maybeExpandIsr`: a follower outside the ISR joins once it has reached both the
    /// high watermark and the start of the current leader epoch (so it holds this leader's
    /// view of the log, not a diverging tail of an older one). One change in flight at a time.
    fn maybe_expand_isr(&self, state: &mut State, replica_id: i32) -> Option<IsrChange> {
        if state.isr.in_flight().is_some() || state.isr.committed().contains(&replica_id) {
            return None;
        }
        let follower_end = state.remotes.get(&replica_id)?.log_end_offset;
        let epoch_start = state.leader_epoch_start_offset?;
        if follower_end < self.log.high_watermark() || follower_end < epoch_start {
            return None;
        }
        let mut new_isr: Vec<i32> = state.isr.committed().iter().copied().collect();
        new_isr.push(replica_id);
        new_isr.sort_unstable();
        let change = IsrChange {
            kind: IsrChangeKind::Expand,
            new_isr,
            leader_epoch: state.leader_epoch,
            partition_epoch: state.partition_epoch,
        };
        state.isr.propose(change.clone());
        Some(change)
    }

    /// Kafka's `maybeShrinkIsr`: proposes to drop the ISR followers that are not caught up
    /// (not at the leader's end, and not caught up within `replica.lag.time.max.ms`), unless a
    /// change is in flight already. The proposal is kept in flight; the leaving members count
    /// for the high watermark until it commits.
    pub fn maybe_shrink_isr(&self) -> Option<IsrChange> {
        let now = self.clock.now_ms();
        let mut state = self.state.lock();
        if state.role != Role::Leader || state.isr.in_flight().is_some() {
            return None;
        }
        let leader_end = self.log.log_end_offset();
        let lag = self.config.replica_lag_time_max_ms;
        let out_of_sync: Vec<i32> = state
            .isr
            .committed()
            .iter()
            .copied()
            .filter(|&id| id != self.local_replica_id)
            .filter(|id| {
                state
                    .remotes
                    .get(id)
                    .is_none_or(|replica| !replica.is_caught_up(leader_end, now, lag))
            })
            .collect();
        if out_of_sync.is_empty() {
            return None;
        }
        let new_isr: Vec<i32> = state
            .isr
            .committed()
            .iter()
            .copied()
            .filter(|id| !out_of_sync.contains(id))
            .collect();
        let change = IsrChange {
            kind: IsrChangeKind::Shrink,
            new_isr,
            leader_epoch: state.leader_epoch,
            partition_epoch: state.partition_epoch,
        };
        state.isr.propose(change.clone());
        Some(change)
    }

    /// Reports the controller's answer to the change in flight (Kafka's `AlterPartition`
    /// response). A committed change becomes the ISR and moves the partition epoch up by one;
    /// then the high watermark may move (a shrink can leave only caught-up members), and a
    /// shrink below `min.insync.replicas` fails the waiting `acks=all` appends with
    /// [`Error::NotEnoughReplicasAfterAppend`] (their records stay). A rejected change is
    /// dropped, and the ISR stays as it was.
    ///
    /// [`Error::InvalidArgument`] when `change` is not the change in flight.
    pub fn complete_isr_change(&self, change: &IsrChange, committed: bool) -> Result<()> {
        let mut state = self.state.lock();
        if !state.isr.complete(change, committed) {
            return Err(Error::InvalidArgument {
                why: format!(
                    "no such ISR change in flight: {change:?} (in flight: {:?})",
                    state.isr.in_flight()
                ),
            });
        }
        let mut completions = Completions::new();
        if committed {
            state.partition_epoch = state.partition_epoch.saturating_add(1);
            let min_isr = self.effective_min_isr(&state);
            let maximal = state.isr.maximal().len();
            if maximal < min_isr {
                for pending in std::mem::take(&mut state.pending_acks) {
                    if let Some(slot) = pending.slot.upgrade() {
                        completions.push((
                            slot,
                            Err(Error::NotEnoughReplicasAfterAppend {
                                in_sync: maximal,
                                required: min_isr,
                            }),
                        ));
                    }
                }
            }
            self.maybe_increment_high_watermark(&mut state, &mut completions)?;
        }
        drop(state);
        deliver(completions);
        Ok(())
    }

    /// Kafka's `maybeIncrementLeaderHW`: the high watermark moves forward to the lowest log
    /// end offset over the maximal ISR and over the caught-up followers outside it (Kafka 4:
    /// they are about to join, and a high watermark that passed them would commit records
    /// they lack), unless the committed ISR is below `min.insync.replicas` (KIP-966: a high
    /// watermark committed by too few replicas could be lost with them). Appends it passes
    /// complete.
    fn maybe_increment_high_watermark(
        &self,
        state: &mut State,
        completions: &mut Completions,
    ) -> Result<()> {
        if state.role != Role::Leader || state.isr.committed().len() < self.effective_min_isr(state)
        {
            return Ok(());
        }
        let now = self.clock.now_ms();
        let leader_end = self.log.log_end_offset();
        let lag = self.config.replica_lag_time_max_ms;
        let maximal = state.isr.maximal();
        let mut new_high_watermark = leader_end;
        for &id in maximal.iter().filter(|&&id| id != self.local_replica_id) {
            let follower_end = state
                .remotes
                .get(&id)
                .map_or(super::UNKNOWN_OFFSET, |replica| replica.log_end_offset);
            new_high_watermark = new_high_watermark.min(follower_end);
        }
        for (id, replica) in &state.remotes {
            if !maximal.contains(id) && replica.is_caught_up(leader_end, now, lag) {
                new_high_watermark = new_high_watermark.min(replica.log_end_offset);
            }
        }
        if new_high_watermark <= self.log.high_watermark() {
            return Ok(());
        }
        let high_watermark = self.log.set_high_watermark(new_high_watermark)?;
        let mut waiting = Vec::with_capacity(state.pending_acks.len());
        for pending in std::mem::take(&mut state.pending_acks) {
            let Some(slot) = pending.slot.upgrade() else {
                continue;
            };
            if high_watermark >= pending.required_offset {
                let outcome = self.committed_outcome(state, pending.info);
                completions.push((slot, outcome));
            } else {
                waiting.push(pending);
            }
        }
        state.pending_acks = waiting;
        Ok(())
    }
}

fn deliver(completions: Completions) {
    for (slot, outcome) in completions {
        slot.complete(outcome);
    }
}
