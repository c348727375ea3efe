//! A follower's fetch from its leader: the request ([`FollowerFetch`]), the answer
//! ([`FollowerRead`]), and Kafka's diverging-epoch rule that decides between them.

use crate::log::FetchData;

use super::IsrChange;

/// One partition of a follower's fetch request (Kafka's `FetchRequest` partition data).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerFetch {
    /// The fetching follower's replica id.
    pub replica_id: i32,
    /// Where the follower's log ends: the offset it wants next.
    pub fetch_offset: i64,
    /// The epoch of the follower's last batch (its epoch cache's latest), if it has one: the
    /// leader checks that the follower's log does not diverge from its own.
    pub last_fetched_epoch: Option<i32>,
    /// The leader epoch the follower believes current, if it sends one: an older one is
    /// fenced, a newer one unknown.
    pub current_leader_epoch: Option<i32>,
    /// The follower's log start offset, recorded in its fetch state.
    pub log_start_offset: i64,
    /// At most this many bytes, except that a first batch larger than it comes whole.
    pub max_bytes: usize,
}

/// The leader's answer to a [`FollowerFetch`].
#[derive(Debug)]
pub enum FollowerRead {
    /// Whole batches from the fetch offset, as they lie in the leader's `.log` file, to be
    /// appended with [`Log::append_as_follower`](crate::Log::append_as_follower).
    Records {
        /// The batches (empty when the follower is at the leader's end).
        data: FetchData,
        /// The leader's high watermark after this fetch counted.
        high_watermark: i64,
        /// The leader's log start offset.
        log_start_offset: i64,
        /// An ISR expansion this fetch proposed (the follower caught up), for the caller's
        /// controller to commit.
        proposed_isr_change: Option<IsrChange>,
    },
    /// The follower's log diverges from the leader's: it must truncate (see
    /// [`truncation_point`](super::truncation_point)) and fetch again. Nothing was read and the
    /// follower's fetch state is unchanged.
    Diverging {
        /// The largest leader epoch at or below the follower's last fetched epoch.
        epoch: i32,
        /// Where that epoch ends in the leader's log.
        end_offset: i64,
    },
    /// The fetch offset is outside the leader's log, or the leader cannot place the follower's
    /// last fetched epoch (Kafka's `OFFSET_OUT_OF_RANGE`, code 1).
    OffsetOutOfRange {
        /// The leader's log start offset.
        log_start_offset: i64,
        /// The leader's log end offset.
        log_end_offset: i64,
    },
}

/// What the diverging-epoch check decided, before any read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EpochCheck {
    /// The follower's log agrees with the leader's up to the fetch offset: read.
    Read,
    /// The follower's log diverges: truncate to (at most) this epoch's end.
    Diverging {
        /// The leader's epoch at or below the follower's last fetched epoch.
        epoch: i32,
        /// Where it ends in the leader's log.
        end_offset: i64,
    },
    /// OFFSET_OUT_OF_RANGE.
    OutOfRange,
}

/// Kafka's check of a follower fetch (`Partition.readRecords`), with `epoch_end` the leader's
/// `end_offset_for(last_fetched_epoch)`:
/// - an epoch the leader cannot place is OFFSET_OUT_OF_RANGE;
/// - so is a fetch offset below the log start, whether or not the epochs diverge;
/// - the follower diverges when the leader's epoch is older than its last fetched one (the
///   leader never had that epoch) or the epoch ends before the fetch offset in the leader's log.
pub(crate) fn check_last_fetched_epoch(
    epoch_end: (i32, i64),
    last_fetched_epoch: i32,
    fetch_offset: i64,
    log_start_offset: i64,
) -> EpochCheck {
    let (epoch, end_offset) = epoch_end;
    if epoch < 0 || end_offset < 0 {
        return EpochCheck::OutOfRange;
    }
    if fetch_offset < log_start_offset {
        return EpochCheck::OutOfRange;
    }
    if epoch < last_fetched_epoch || end_offset < fetch_offset {
        return EpochCheck::Diverging { epoch, end_offset };
    }
    EpochCheck::Read
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::leader_epoch::LeaderEpochFileCache;

    /// PartitionTest.testLastFetchedOffsetValidation's leader: epochs 0@0, 3@2, 4@8, 7@13,
    /// 9@14, LEO 17, then leader epoch 10 from 17.
    fn check(last_fetched_epoch: i32, fetch_offset: i64) -> EpochCheck {
        let mut cache = LeaderEpochFileCache::detached();
        for (epoch, start) in [(0, 0), (3, 2), (4, 8), (7, 13), (9, 14), (10, 17)] {
            cache.assign(epoch, start).expect("assign");
        }
        let epoch_end = cache.end_offset_for(last_fetched_epoch, 17);
        check_last_fetched_epoch(epoch_end, last_fetched_epoch, fetch_offset, 0)
    }

    fn diverging(epoch: i32, end_offset: i64) -> EpochCheck {
        EpochCheck::Diverging { epoch, end_offset }
    }

    #[test]
    fn last_fetched_offset_validation_finds_kafkas_divergences() {
        assert_eq!(check(2, 5), diverging(0, 2));
        assert_eq!(check(0, 4), diverging(0, 2));
        assert_eq!(check(6, 6), diverging(4, 13));
        assert_eq!(check(5, 9), diverging(4, 13));
        assert_eq!(check(10, 18), diverging(10, 17));
        for (epoch, offset) in [(0, 2), (7, 14), (9, 17), (10, 17)] {
            assert_eq!(
                check(epoch, offset),
                EpochCheck::Read,
                "({epoch}, {offset})"
            );
        }
        assert_eq!(check(11, 5), EpochCheck::OutOfRange);
    }

    #[test]
    fn a_fetch_below_the_log_start_is_out_of_range_even_when_the_epochs_diverge() {
        assert_eq!(
            check_last_fetched_epoch((0, 2), 2, 5, 6),
            EpochCheck::OutOfRange
        );
        assert_eq!(
            check_last_fetched_epoch((-1, -1), 0, 0, 0),
            EpochCheck::OutOfRange
        );
    }
}
