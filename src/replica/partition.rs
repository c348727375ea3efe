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
use crate::log::{Log, LogAppendInfo};
use crate::producer::Acks;
use crate::sync::Mutex;

use super::ReplicaConfig;
use super::ack::{AckFuture, AckSlot, PendingAck};
use super::election::Eligibility;
use super::isr::{IsrChange, IsrState};
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
    pub(super) log: Arc<Log>,
    pub(super) local_replica_id: i32,
    pub(super) config: ReplicaConfig,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) state: Mutex<State>,
}

#[derive(Debug)]
pub(super) struct State {
    pub(super) role: Role,
    /// -1 before the first `become_leader` or `become_follower`.
    pub(super) leader_epoch: i32,
    pub(super) partition_epoch: i32,
    /// Where the current leader epoch starts in the log (Kafka's `leaderEpochStartOffsetOpt`):
    /// a follower joins the ISR only once it has reached it.
    pub(super) leader_epoch_start_offset: Option<i64>,
    /// The assignment, the local replica included.
    pub(super) replicas: Vec<i32>,
    pub(super) isr: IsrState,
    /// The followers' fetch state, while leading.
    pub(super) remotes: BTreeMap<i32, ReplicaState>,
    pub(super) pending_acks: Vec<PendingAck>,
    /// Who may lead cleanly, from the last ISR told.
    pub(super) eligibility: Eligibility,
}

/// Completions found under the state mutex, delivered after it is released.
pub(super) type Completions = Vec<(Arc<AckSlot>, Result<LogAppendInfo>)>;

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
                eligibility: Eligibility::default(),
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

    /// The committed ISR, sorted. Empty on a follower, as in Kafka: a follower keeps no ISR of
    /// its own; the last one it was told is [`last_isr`](Self::last_isr).
    pub fn isr(&self) -> Vec<i32> {
        self.state.lock().isr.committed().iter().copied().collect()
    }

    /// The assignment (replicas) last told, in the order given.
    pub fn replicas(&self) -> Vec<i32> {
        self.state.lock().replicas.clone()
    }

    /// The last ISR this replica was told, by `become_leader`, by `become_follower` or by a
    /// committed ISR change, sorted: who may lead cleanly (see
    /// [`become_leader`](Self::become_leader)). Empty before the first.
    pub fn last_isr(&self) -> Vec<i32> {
        self.state.lock().eligibility.isr()
    }

    /// The eligible leader replicas (KIP-966) implied by the ISRs told, sorted: the members that
    /// left the ISR while it was below `min.insync.replicas`. They may lead cleanly once the
    /// ISR is empty.
    pub fn eligible_leader_replicas(&self) -> Vec<i32> {
        self.state.lock().eligibility.elr()
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

    pub(super) fn effective_min_isr(&self, state: &State) -> usize {
        self.config.effective_min_isr(state.replicas.len())
    }

    /// Makes this replica the leader in `leader_epoch` (Kafka's `makeLeader`), with the
    /// controller's `partition_epoch`, assignment `replicas` and `isr` (both include this
    /// replica). Returns whether this was a leader change: the same epoch again only takes the
    /// new assignment and ISR (a controller's ISR update), and keeps the followers' state.
    ///
    /// A `partition_epoch` older than the partition's is a stale controller state: ignored, as
    /// Kafka ignores it, and `Ok(false)` with nothing changed (an ISR change committed since
    /// already moved the epoch past it). A new epoch tells the log ([`Log::become_leader`]),
    /// which records it in its epoch cache at the log end offset; an epoch below the current
    /// one fails with [`Error::FencedLeaderEpoch`].
    ///
    /// A replica becoming the leader must be eligible: in the last ISR it was told (by
    /// `become_leader`, [`become_follower`](Self::become_follower) or a committed ISR change)
    /// or, once that ISR is empty, one of its eligible leader replicas (KIP-966). Otherwise this
    /// is an unclean election, which fails with [`Error::UncleanLeaderElection`] unless
    /// `unclean.leader.election.enable` is set. With it set, the new leader's log is the truth,
    /// as in Kafka: its ISR must be itself alone, and followers that hold more truncate to it
    /// when they fetch (their diverging epochs say where), committed records included. A
    /// partition never told an ISR since it was created cannot judge and accepts.
    pub fn become_leader(
        &self,
        leader_epoch: i32,
        partition_epoch: i32,
        replicas: &[i32],
        isr: &[i32],
    ) -> Result<bool> {
        self.check_assignment(replicas, isr, true)?;
        let now = self.clock.now_ms();
        let mut state = self.state.lock();
        if partition_epoch < state.partition_epoch {
            return Ok(false);
        }
        if leader_epoch < state.leader_epoch {
            return Err(Error::FencedLeaderEpoch {
                current: state.leader_epoch,
                found: leader_epoch,
            });
        }
        let was_leader = state.role == Role::Leader;
        if !was_leader {
            self.check_election(&state, isr)?;
        }
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
        let min_isr = self.effective_min_isr(&state);
        state.eligibility.learn(isr.iter().copied(), min_isr);
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

    /// Kafka's controller rule for a replica about to lead: clean if eligible (see
    /// [`become_leader`](Self::become_leader)); unclean only with the setting, and then with
    /// itself alone as the ISR, as Kafka's controller records it.
    fn check_election(&self, state: &State, isr: &[i32]) -> Result<()> {
        let local = self.local_replica_id;
        if state.eligibility.may_lead_cleanly(local) {
            return Ok(());
        }
        if !self.config.unclean_leader_election_enable {
            return Err(Error::UncleanLeaderElection {
                replica: local,
                isr: state.eligibility.isr(),
                elr: state.eligibility.elr(),
            });
        }
        if isr != [local] {
            return Err(Error::InvalidArgument {
                why: format!(
                    "replica {local} leads after an unclean election (it is not in the last ISR \
                     {:?}): its ISR must be itself alone, not {isr:?}, since the others' logs \
                     may hold records it lacks until they truncate and catch up",
                    state.eligibility.isr()
                ),
            });
        }
        Ok(())
    }

    /// Makes this replica a follower in `leader_epoch` (Kafka's `makeFollower`), with the
    /// controller's `partition_epoch`, assignment `replicas` (which include this replica) and
    /// `isr` (which may be empty, or leave this replica out). The log takes no more client
    /// appends ([`Log::become_follower`]), waiting `acks=all` appends fail with
    /// [`Error::NotLeaderOrFollower`], and the followers' state and the ISR are dropped (a
    /// follower keeps no ISR, as in Kafka); `isr` is remembered as the last ISR, which decides
    /// whether a later [`become_leader`](Self::become_leader) is a clean election. Call it again
    /// with the same leader epoch whenever the controller's ISR changes.
    ///
    /// Returns whether the epoch or role changed. A `partition_epoch` older than the
    /// partition's is ignored (`Ok(false)`, nothing changed), as Kafka ignores it; an epoch
    /// below the current one fails with [`Error::FencedLeaderEpoch`].
    pub fn become_follower(
        &self,
        leader_epoch: i32,
        partition_epoch: i32,
        replicas: &[i32],
        isr: &[i32],
    ) -> Result<bool> {
        self.check_assignment(replicas, isr, false)?;
        let mut state = self.state.lock();
        if partition_epoch < state.partition_epoch {
            return Ok(false);
        }
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
        state.replicas = replicas.to_vec();
        state.isr = IsrState::default();
        let min_isr = self.effective_min_isr(&state);
        state.eligibility.learn(isr.iter().copied(), min_isr);
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

    /// This replica is in `replicas`, every ISR member too, and a leader is in its `isr`.
    fn check_assignment(&self, replicas: &[i32], isr: &[i32], leading: bool) -> Result<()> {
        if !replicas.contains(&self.local_replica_id) {
            return Err(Error::InvalidArgument {
                why: format!(
                    "replica {} is not in the assignment {replicas:?}",
                    self.local_replica_id
                ),
            });
        }
        if leading && !isr.contains(&self.local_replica_id) {
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
    pub(super) fn committed_outcome(
        &self,
        state: &State,
        info: LogAppendInfo,
    ) -> Result<LogAppendInfo> {
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

    pub(super) fn check_leader(&self, state: &State) -> Result<()> {
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
}

pub(super) fn deliver(completions: Completions) {
    for (slot, outcome) in completions {
        slot.complete(outcome);
    }
}
