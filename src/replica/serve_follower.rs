//! The leader's side of a follower's fetch: `read_for_follower` (Kafka's `fetchRecords` for a
//! follower, with its diverging-epoch check), `last_offset_for_leader_epoch`
//! (`OffsetsForLeaderEpoch`), and the ISR expansion a fetch may propose.

use crate::error::{Error, Result};
use crate::log::ReadBound;

use super::Partition;
use super::follower_fetch::{EpochCheck, FollowerFetch, FollowerRead, check_last_fetched_epoch};
use super::isr::{IsrChange, IsrChangeKind};
use super::partition::{Completions, State, deliver};

impl Partition {
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
    /// undefined. The request's `current_leader_epoch` is checked first, as a fetch's is: an
    /// older one is [`Error::FencedLeaderEpoch`] and a newer one [`Error::UnknownLeaderEpoch`]
    /// on a follower too; only a request of the current epoch (or none) reaching a replica
    /// that does not lead gets [`Error::NotLeaderOrFollower`].
    pub fn last_offset_for_leader_epoch(
        &self,
        current_leader_epoch: Option<i32>,
        leader_epoch: i32,
    ) -> Result<(i32, i64)> {
        let state = self.state.lock();
        Self::check_request_epoch(&state, current_leader_epoch)?;
        self.check_leader(&state)?;
        Ok(self.log.end_offset_for_epoch(leader_epoch))
    }

    /// Serves a follower's fetch as the leader (Kafka's `fetchRecords` for a follower):
    /// checks the leader epoch and the follower's last fetched epoch (see [`FollowerRead`]),
    /// reads whole batches from the fetch offset up to the log end, and counts the fetch in the
    /// follower's state. That may propose an ISR expansion (returned, and kept in flight) and
    /// may move the high watermark, completing `acks=all` appends.
    ///
    /// Errors, in the order Kafka checks them: [`Error::FencedLeaderEpoch`] /
    /// [`Error::UnknownLeaderEpoch`] for an older or newer `current_leader_epoch` (on a follower
    /// too), then [`Error::NotLeaderOrFollower`] when not leading, and for a replica outside the
    /// assignment, where Kafka answers [`Error::UnknownLeaderEpoch`] if the request carries the
    /// current epoch: partlog's caller sets the assignment before a new replica fetches, so a
    /// stranger is not one about to be added, and retrying would not help. Then the log's read
    /// errors.
    pub fn read_for_follower(&self, fetch: &FollowerFetch) -> Result<FollowerRead> {
        let now = self.clock.now_ms();
        let mut state = self.state.lock();
        Self::check_request_epoch(&state, fetch.current_leader_epoch)?;
        self.check_leader(&state)?;
        if !state.remotes.contains_key(&fetch.replica_id) {
            // Kafka answers UNKNOWN_LEADER_EPOCH (75) here when the request carries the current
            // epoch, because its leader may not have heard of a replica the controller just
            // added. partlog's caller tells the leader the assignment before it lets a new
            // replica fetch, so a stranger is a removed replica or a caller's mistake, and a
            // retry would not help: NOT_LEADER_OR_FOLLOWER (6) tells it to stop.
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
}
