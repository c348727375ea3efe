//! [`ReplicaState`]: what a leader knows of one follower (Kafka's `Replica` and `ReplicaState`).

/// An offset the leader has not learned yet (Kafka's `UnifiedLog.UNKNOWN_OFFSET`).
pub const UNKNOWN_OFFSET: i64 = -1;

/// A follower's fetch state, as its leader tracks it from the follower's fetches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaState {
    /// The follower's log end offset: the offset of its last fetch ([`UNKNOWN_OFFSET`] before
    /// its first fetch under this leader).
    pub log_end_offset: i64,
    /// The follower's log start offset, as its last fetch reported it.
    pub log_start_offset: i64,
    /// The leader's log end offset when the follower last fetched.
    pub last_fetch_leader_log_end_offset: i64,
    /// When the follower last fetched, on the leader's clock.
    pub last_fetch_time_ms: i64,
    /// The last time the follower was known to be caught up with the leader's log end offset.
    pub last_caught_up_time_ms: i64,
}

impl ReplicaState {
    /// The state of a follower the leader has not heard from.
    pub(crate) fn unknown() -> Self {
        ReplicaState {
            log_end_offset: UNKNOWN_OFFSET,
            log_start_offset: UNKNOWN_OFFSET,
            last_fetch_leader_log_end_offset: UNKNOWN_OFFSET,
            last_fetch_time_ms: 0,
            last_caught_up_time_ms: 0,
        }
    }

    /// Kafka's `resetReplicaState`, on a leader change. A new leader trusts the controller's
    /// ISR: its members count as caught up now, the others as never, so that a member is not
    /// shrunk away before it had a chance to fetch from the new leader.
    pub(crate) fn reset(
        &mut self,
        now_ms: i64,
        leader_end_offset: i64,
        is_new_leader: bool,
        in_sync: bool,
    ) {
        let last_caught_up_time_ms = if is_new_leader {
            if in_sync { now_ms } else { 0 }
        } else {
            self.last_caught_up_time_ms
        };
        *self = ReplicaState {
            log_end_offset: UNKNOWN_OFFSET,
            log_start_offset: UNKNOWN_OFFSET,
            last_fetch_leader_log_end_offset: leader_end_offset,
            last_fetch_time_ms: now_ms,
            last_caught_up_time_ms,
        };
    }

    /// Kafka's `updateFetchStateOrThrow`: a fetch at `fetch_offset` at `now_ms`, when the
    /// leader's log end offset was `leader_end_offset`.
    ///
    /// A fetch at the leader's end proves the follower caught up now. A fetch that reaches the
    /// leader's end as of the previous fetch proves it was caught up at that previous fetch:
    /// it has everything the leader had then.
    pub(crate) fn update_fetch_state(
        &mut self,
        fetch_offset: i64,
        follower_start_offset: i64,
        now_ms: i64,
        leader_end_offset: i64,
    ) {
        if fetch_offset >= leader_end_offset {
            self.last_caught_up_time_ms = self.last_caught_up_time_ms.max(now_ms);
        } else if fetch_offset >= self.last_fetch_leader_log_end_offset {
            self.last_caught_up_time_ms = self.last_caught_up_time_ms.max(self.last_fetch_time_ms);
        }
        self.log_end_offset = fetch_offset;
        self.log_start_offset = follower_start_offset;
        self.last_fetch_leader_log_end_offset = leader_end_offset;
        self.last_fetch_time_ms = now_ms;
    }

    /// Kafka's `isCaughtUp`: at the leader's end, or caught up within the last
    /// `replica_lag_time_max_ms`.
    pub fn is_caught_up(
        &self,
        leader_end_offset: i64,
        now_ms: i64,
        replica_lag_time_max_ms: i64,
    ) -> bool {
        self.log_end_offset == leader_end_offset
            || now_ms.saturating_sub(self.last_caught_up_time_ms) <= replica_lag_time_max_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fetch_below_the_leader_end_keeps_last_caught_up_and_a_fetch_at_it_sets_it() {
        let mut state = ReplicaState::unknown();
        state.reset(1_000, 6, true, true);
        assert_eq!(state.last_caught_up_time_ms, 1_000);
        state.update_fetch_state(3, 0, 1_500, 6);
        assert_eq!(state.last_caught_up_time_ms, 1_000);
        assert_eq!(state.log_end_offset, 3);
        state.update_fetch_state(6, 0, 2_000, 6);
        assert_eq!(state.last_caught_up_time_ms, 2_000);
    }

    #[test]
    fn reaching_the_previous_fetchs_leader_end_counts_as_caught_up_at_that_fetch() {
        let mut state = ReplicaState::unknown();
        state.reset(0, 0, true, false);
        state.update_fetch_state(0, 0, 100, 10); // the leader had 10
        state.update_fetch_state(10, 0, 200, 20); // it now has those 10, the leader 20
        assert_eq!(state.last_caught_up_time_ms, 100);
    }

    #[test]
    fn a_new_leader_trusts_the_isr_and_a_continuing_one_keeps_the_time() {
        let mut state = ReplicaState::unknown();
        state.reset(500, 4, true, true);
        assert_eq!(state.last_caught_up_time_ms, 500);
        state.reset(900, 4, false, false);
        assert_eq!(state.last_caught_up_time_ms, 500);
        state.reset(900, 4, true, false);
        assert_eq!(state.last_caught_up_time_ms, 0);
        assert_eq!(state.log_end_offset, UNKNOWN_OFFSET);
    }

    #[test]
    fn caught_up_means_at_the_leader_end_or_within_the_lag() {
        let mut state = ReplicaState::unknown();
        state.reset(0, 10, true, true);
        assert!(state.is_caught_up(10, 30_000, 30_000));
        assert!(!state.is_caught_up(10, 30_001, 30_000));
        state.update_fetch_state(10, 0, 30_001, 10);
        assert!(state.is_caught_up(10, 100_000, 30_000), "at the leader end");
    }
}
