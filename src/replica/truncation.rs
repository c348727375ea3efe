//! The follower's truncation rule: where to cut its log, given the leader's end offset for
//! the follower's latest epoch (Kafka's `AbstractFetcherThread.getOffsetTruncationState`).

use crate::log::Log;

/// Where a follower truncates, and whether it must ask the leader again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Truncation {
    /// Truncate to this offset; the follower's log then agrees with the leader's.
    Done(i64),
    /// Truncate to this offset, then ask the leader again with the follower's new latest
    /// epoch: the leader answered with an epoch the follower does not have, so only a lower
    /// bound of the agreement is known.
    AskAgain(i64),
}

impl Truncation {
    /// The offset to truncate to.
    pub fn offset(self) -> i64 {
        match self {
            Truncation::Done(offset) | Truncation::AskAgain(offset) => offset,
        }
    }
}

/// The truncation point of `follower`'s log for the leader's answer
/// `(leader_epoch, end_offset)` to the follower's latest epoch (an `OffsetsForLeaderEpoch`
/// answer, or a fetch's diverging epoch):
/// - the leader's offset undefined: the follower's high watermark, all it knows to be committed;
/// - otherwise the follower's own `end_offset_for(leader_epoch) = (Ef, Of)`:
///   - undefined: `min(leader end, LEO)`;
///   - `Ef ≠ leader_epoch`: `min(Of, LEO)`, and ask again;
///   - otherwise `min(Of, leader end, LEO)`, done.
pub fn truncation_point(follower: &Log, leader_answer: (i32, i64)) -> Truncation {
    offset_truncation_state(
        leader_answer,
        |epoch| follower.end_offset_for_epoch(epoch),
        follower.log_end_offset(),
        follower.high_watermark(),
    )
}

/// [`truncation_point`] on plain values: `follower_end_offset_for` is the follower's
/// `end_offset_for_epoch`.
pub(crate) fn offset_truncation_state(
    leader_answer: (i32, i64),
    follower_end_offset_for: impl FnOnce(i32) -> (i32, i64),
    follower_log_end_offset: i64,
    follower_high_watermark: i64,
) -> Truncation {
    let (leader_epoch, leader_end_offset) = leader_answer;
    if leader_end_offset < 0 {
        return Truncation::Done(follower_high_watermark.min(follower_log_end_offset));
    }
    if leader_epoch < 0 {
        // A leader that keeps no epochs answers an offset alone.
        return Truncation::Done(leader_end_offset.min(follower_log_end_offset));
    }
    let (follower_epoch, follower_end_offset) = follower_end_offset_for(leader_epoch);
    if follower_epoch < 0 || follower_end_offset < 0 {
        // The follower has no epoch at or below the leader's: the leader's offset is all there is.
        return Truncation::Done(leader_end_offset.min(follower_log_end_offset));
    }
    if follower_epoch != leader_epoch {
        return Truncation::AskAgain(follower_end_offset.min(follower_log_end_offset));
    }
    Truncation::Done(
        follower_end_offset
            .min(leader_end_offset)
            .min(follower_log_end_offset),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::leader_epoch::LeaderEpochFileCache;

    fn cache(entries: &[(i32, i64)]) -> LeaderEpochFileCache {
        let mut cache = LeaderEpochFileCache::detached();
        for &(epoch, start) in entries {
            cache.assign(epoch, start).expect("assign");
        }
        cache
    }

    #[test]
    fn differing_epochs_truncate_to_the_followers_end_and_ask_again() {
        // AbstractFetcherThreadTest.testTruncation, round 1: follower 0@0, 2@1, 4@2, LEO 3.
        let follower = cache(&[(0, 0), (2, 1), (4, 2)]);
        let state = offset_truncation_state((3, 2), |e| follower.end_offset_for(e, 3), 3, 0);
        assert_eq!(state, Truncation::AskAgain(2));
    }

    #[test]
    fn the_same_epoch_truncates_to_the_lower_end_and_is_done() {
        let follower = cache(&[(0, 0)]);
        let state = offset_truncation_state((0, 0), |e| follower.end_offset_for(e, 1), 1, 0);
        assert_eq!(state, Truncation::Done(0));
    }

    #[test]
    fn an_undefined_leader_offset_truncates_to_the_high_watermark() {
        let state = offset_truncation_state((-1, -1), |_| unreachable!("not asked"), 3, 2);
        assert_eq!(state, Truncation::Done(2));
    }

    #[test]
    fn an_epoch_the_follower_cannot_place_truncates_to_the_leaders_offset() {
        let follower = cache(&[(5, 10)]);
        // The follower's first epoch is above 3: end_offset_for(3) = (3, 10), same epoch.
        let state = offset_truncation_state((3, 7), |e| follower.end_offset_for(e, 12), 12, 0);
        assert_eq!(state, Truncation::Done(7));
        let empty = LeaderEpochFileCache::detached();
        let state = offset_truncation_state((3, 7), |e| empty.end_offset_for(e, 12), 12, 0);
        assert_eq!(state, Truncation::Done(7));
        let state = offset_truncation_state((3, 20), |e| empty.end_offset_for(e, 12), 12, 0);
        assert_eq!(
            state,
            Truncation::Done(12),
            "never above the follower's LEO"
        );
    }
}
