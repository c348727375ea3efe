//! The public methods of [`Log`](crate::Log) for replication; see the [`api`](super) module.

use crate::error::Result;
use crate::log::Log;
use crate::log::leader_epoch::EpochEntry;

impl Log {
    /// Makes this log the leader of `leader_epoch`: client appends ([`append`](Self::append),
    /// [`append_batch`](Self::append_batch), markers, the batching writer) stamp it into every
    /// batch's `partitionLeaderEpoch`, and the cache records `(leader_epoch, LEO)` (Kafka's
    /// `maybeAssignEpochStartOffset` in `makeLeader`), durably before this returns.
    ///
    /// An epoch below the cache's latest is
    /// [`Error::FencedLeaderEpoch`](crate::Error::FencedLeaderEpoch); a negative one is
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument). Becoming leader of the latest
    /// epoch again changes nothing in the cache.
    pub fn become_leader(&self, leader_epoch: i32) -> Result<()> {
        self.shared.become_leader(leader_epoch)
    }

    /// Makes this log a follower: client appends fail with
    /// [`Error::NotLeaderOrFollower`](crate::Error::NotLeaderOrFollower) from now on, while
    /// [`append_as_follower`](Self::append_as_follower), truncation and the high watermark work as
    /// before. The cache is left as it is.
    pub fn become_follower(&self) -> Result<()> {
        self.shared.become_follower()
    }

    /// The epoch client appends stamp: `None` for a bare log (which stamps -1) or a follower.
    pub fn leader_epoch(&self) -> Option<i32> {
        self.shared.leader_epoch()
    }

    /// Sets the high watermark (Kafka's `updateHighWatermark` as a leader's ISR or a follower's
    /// fetch moves it) and returns it. It only moves forward: a value below the current one leaves
    /// it. It is clamped up to the log start offset; a value above the log end offset is
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument). Before the first call the high
    /// watermark is the log end offset; the first call may set it anywhere in `[log start, LEO]`.
    ///
    /// Transactions whose marker falls below it stop holding the last stable offset back.
    pub fn set_high_watermark(&self, high_watermark: i64) -> Result<i64> {
        self.shared.set_high_watermark(high_watermark)
    }

    /// The high watermark: what [`set_high_watermark`](Self::set_high_watermark) last set (or
    /// a truncation lowered it to), or, until it is first called, the log end offset (one
    /// replica).
    pub fn high_watermark(&self) -> i64 {
        self.shared.poll_live();
        self.shared.high_watermark()
    }

    /// Kafka's `endOffsetForEpoch` (the leader's answer to OffsetsForLeaderEpoch): the largest
    /// epoch ≤ `epoch` the cache holds and the offset where the next higher epoch starts (the
    /// log end offset for the latest epoch); `(-1, -1)` when undefined.
    pub fn end_offset_for_epoch(&self, epoch: i32) -> (i32, i64) {
        self.shared.poll_live();
        self.shared.end_offset_for_epoch(epoch)
    }

    /// The cache's latest epoch, if any.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.shared.poll_live();
        self.shared.latest_epoch()
    }

    /// The epoch that wrote `offset` according to the cache, if any.
    pub fn epoch_for_offset(&self, offset: i64) -> Option<i32> {
        self.shared.poll_live();
        self.shared.epoch_for_offset(offset)
    }

    /// A copy of the cache's entries, oldest first.
    pub fn leader_epoch_entries(&self) -> Vec<EpochEntry> {
        self.shared.poll_live();
        self.shared.leader_epoch_entries()
    }
}
