//! The ISR's changes and the high watermark: `maybe_shrink_isr`, `complete_isr_change`, and
//! Kafka's `maybeIncrementLeaderHW`, which completes the `acks=all` appends it passes.

use crate::error::{Error, Result};

use super::Partition;
use super::isr::{IsrChange, IsrChangeKind};
use super::partition::{Completions, Role, State, deliver};

impl Partition {
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
    /// [`Error::NotEnoughReplicasAfterAppend`] (their records stay; Kafka 3.7+ keeps them
    /// waiting instead, see the module docs of [`replica`](super)). A rejected change is
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
            state
                .eligibility
                .learn(change.new_isr.iter().copied(), min_isr);
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
    pub(super) fn maybe_increment_high_watermark(
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
