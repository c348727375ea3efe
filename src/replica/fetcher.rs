//! [`ReplicaFetcher`]: a follower's side of replication, in process: Kafka's
//! `AbstractFetcherThread` for one partition, one step per call, with no thread of its own.
//!
//! It fetches with its last fetched epoch, so that the leader reports a divergence, and then
//! truncates (Kafka's truncation on fetch); or, after [`ReplicaFetcher::begin_truncation`], it
//! first runs `OffsetsForLeaderEpoch` rounds until [`Truncation::Done`].

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::log::Log;

use super::truncation::{Truncation, truncation_point};
use super::{FollowerFetch, FollowerRead, IsrChange, Partition};

/// How much a fetch asks for by default: Kafka's `replica.fetch.max.bytes` (1 MiB).
pub const REPLICA_FETCH_MAX_BYTES_DEFAULT: usize = 1024 * 1024;

/// What one [`ReplicaFetcher::fetch_once`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchOutcome {
    /// The follower's log was truncated to `to` (possibly a no-op); `done` is false when
    /// another truncation round follows.
    Truncated {
        /// The new log end offset.
        to: i64,
        /// Whether the follower now agrees with the leader.
        done: bool,
    },
    /// Batches were appended, from `first_offset` up to the new log end offset `log_end_offset`.
    Appended {
        /// The first appended offset.
        first_offset: i64,
        /// The follower's log end offset after the append.
        log_end_offset: i64,
        /// The high watermark the follower took from the leader.
        high_watermark: i64,
        /// An ISR expansion the fetch proposed, for the caller's controller.
        proposed_isr_change: Option<IsrChange>,
    },
    /// Nothing new: the follower is at the leader's end.
    UpToDate {
        /// The high watermark the follower took from the leader.
        high_watermark: i64,
        /// An ISR expansion the fetch proposed, for the caller's controller.
        proposed_isr_change: Option<IsrChange>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Truncating,
    Fetching,
}

/// One follower replica fetching from its leader, in process.
#[derive(Debug)]
pub struct ReplicaFetcher {
    log: Arc<Log>,
    replica_id: i32,
    leader_epoch: i32,
    max_bytes: usize,
    phase: Phase,
}

impl ReplicaFetcher {
    /// A fetcher for the follower `replica_id` whose log is `log`, following the leader of
    /// `leader_epoch`. It fetches with its last fetched epoch at once (Kafka's truncation on
    /// fetch); [`begin_truncation`](Self::begin_truncation) asks the leader first instead.
    ///
    /// The follower's high watermark is pinned where it is: from now on it moves only with the
    /// leader's (a log that never had one follows its log end offset until then).
    pub fn new(log: Arc<Log>, replica_id: i32, leader_epoch: i32) -> Result<ReplicaFetcher> {
        log.set_high_watermark(log.high_watermark())?;
        Ok(ReplicaFetcher {
            log,
            replica_id,
            leader_epoch,
            max_bytes: REPLICA_FETCH_MAX_BYTES_DEFAULT,
            phase: Phase::Fetching,
        })
    }

    /// The next steps ask the leader for the end of the follower's latest epoch
    /// (`OffsetsForLeaderEpoch`) and truncate, until the follower agrees with the leader, before
    /// fetching again (Kafka's fetcher without truncation on fetch).
    pub fn begin_truncation(&mut self) {
        self.phase = Phase::Truncating;
    }

    /// The follower's log.
    pub fn log(&self) -> &Arc<Log> {
        &self.log
    }

    /// Sets how many bytes a fetch asks for (a first batch larger than it comes whole).
    pub fn set_max_bytes(&mut self, max_bytes: usize) {
        self.max_bytes = max_bytes;
    }

    /// A new leader epoch. The next fetch's last fetched epoch lets the new leader report a
    /// divergence.
    pub fn set_leader_epoch(&mut self, leader_epoch: i32) {
        self.leader_epoch = leader_epoch;
    }

    /// Whether the next [`fetch_once`](Self::fetch_once) truncates rather than fetches.
    pub fn is_truncating(&self) -> bool {
        self.phase == Phase::Truncating
    }

    /// Truncates the follower's log for the leader's answer `(epoch, end_offset)` (see
    /// [`truncation_point`]) and returns the decision. After [`Truncation::AskAgain`] the
    /// fetcher truncates again at its next step.
    pub fn truncate_for(&mut self, leader_answer: (i32, i64)) -> Result<Truncation> {
        let truncation = truncation_point(&self.log, leader_answer);
        // Even at the log end: that drops an epoch entry that starts there.
        self.log.truncate_to(truncation.offset())?;
        self.phase = match truncation {
            Truncation::Done(_) => Phase::Fetching,
            Truncation::AskAgain(_) => Phase::Truncating,
        };
        Ok(truncation)
    }

    /// One step against `leader`: a truncation round while truncating, else one fetch and its
    /// append. A follower without leader epochs truncates to its high watermark (Kafka's rule
    /// for partitions without epochs), then fetches.
    ///
    /// Errors: the leader's ([`Error::FencedLeaderEpoch`], [`Error::UnknownLeaderEpoch`],
    /// [`Error::NotLeaderOrFollower`]), the follower log's, and [`Error::OffsetOutOfRange`]
    /// when the leader cannot place the follower's last epoch and no truncation helps.
    pub fn fetch_once(&mut self, leader: &Partition) -> Result<FetchOutcome> {
        if self.phase == Phase::Truncating {
            return self.truncation_round(leader);
        }
        let fetch = FollowerFetch {
            replica_id: self.replica_id,
            fetch_offset: self.log.log_end_offset(),
            last_fetched_epoch: self.log.latest_epoch(),
            current_leader_epoch: Some(self.leader_epoch),
            log_start_offset: self.log.log_start_offset(),
            max_bytes: self.max_bytes,
        };
        match leader.read_for_follower(&fetch)? {
            FollowerRead::Records {
                data,
                high_watermark,
                log_start_offset,
                proposed_isr_change,
            } => {
                let first_offset = if data.is_empty() {
                    fetch.fetch_offset
                } else {
                    self.append(data.bytes())?
                };
                let high_watermark = self.take_high_watermark(high_watermark)?;
                self.take_log_start_offset(log_start_offset)?;
                let log_end_offset = self.log.log_end_offset();
                Ok(if log_end_offset > fetch.fetch_offset {
                    FetchOutcome::Appended {
                        first_offset,
                        log_end_offset,
                        high_watermark,
                        proposed_isr_change,
                    }
                } else {
                    FetchOutcome::UpToDate {
                        high_watermark,
                        proposed_isr_change,
                    }
                })
            }
            FollowerRead::Diverging { epoch, end_offset } => {
                let truncation = self.truncate_for((epoch, end_offset))?;
                Ok(FetchOutcome::Truncated {
                    to: self.log.log_end_offset(),
                    done: matches!(truncation, Truncation::Done(_)),
                })
            }
            FollowerRead::OffsetOutOfRange {
                log_start_offset,
                log_end_offset,
            } => {
                // Kafka's handleOutOfRangeError: a leader that ends below the follower cuts
                // the follower back; one that starts above it restarts the follower there.
                let follower_end = self.log.log_end_offset();
                if log_end_offset < follower_end {
                    self.log.truncate_to(log_end_offset)?;
                } else if follower_end < log_start_offset {
                    self.log.truncate_fully_and_start_at(log_start_offset)?;
                } else {
                    self.phase = Phase::Truncating;
                    return Err(Error::OffsetOutOfRange {
                        requested: follower_end,
                        start: log_start_offset,
                        end: log_end_offset,
                    });
                }
                Ok(FetchOutcome::Truncated {
                    to: self.log.log_end_offset(),
                    done: true,
                })
            }
        }
    }

    fn truncation_round(&mut self, leader: &Partition) -> Result<FetchOutcome> {
        let done = match self.log.latest_epoch() {
            None => {
                let high_watermark = self.log.high_watermark();
                if high_watermark < self.log.log_end_offset() {
                    self.log.truncate_to(high_watermark)?;
                }
                self.phase = Phase::Fetching;
                true
            }
            Some(latest) => {
                let before = latest;
                let answer =
                    leader.last_offset_for_leader_epoch(Some(self.leader_epoch), latest)?;
                let truncation = self.truncate_for(answer)?;
                if let Truncation::AskAgain(_) = truncation
                    && self.log.latest_epoch().is_some_and(|now| now >= before)
                {
                    // The cut removed no epoch, so asking again would get the same answer:
                    // fetch, and let the leader's divergence check take over.
                    self.phase = Phase::Fetching;
                }
                self.phase == Phase::Fetching
            }
        };
        Ok(FetchOutcome::Truncated {
            to: self.log.log_end_offset(),
            done,
        })
    }

    /// Appends the leader's batches; returns the first appended offset.
    ///
    /// An empty log whose start the leader moved into the middle of a batch (Kafka's
    /// `deleteRecords`) gets that whole batch, which starts below its log end: as Kafka's
    /// `appendRecordsToFollowerOrFutureReplica` does, the log restarts at the batch's base.
    fn append(&self, batches: &[u8]) -> Result<i64> {
        match self.log.append_as_follower(batches) {
            Ok(info) => Ok(info.first_offset),
            Err(Error::UnexpectedAppendOffset {
                log_end_offset,
                found,
            }) if log_end_offset == self.log.log_start_offset() && found < log_end_offset => {
                self.log.truncate_fully_and_start_at(found)?;
                Ok(self.log.append_as_follower(batches)?.first_offset)
            }
            Err(error) => Err(error),
        }
    }

    /// Follows the leader's log start offset up (Kafka's `maybeIncrementLogStartOffset` on a
    /// fetch), as far as the follower's own high watermark: a follower deletes nothing it has
    /// not seen committed.
    fn take_log_start_offset(&self, leader_log_start_offset: i64) -> Result<()> {
        let target = leader_log_start_offset.min(self.log.high_watermark());
        if target > self.log.log_start_offset() {
            self.log.delete_records_before(target)?;
        }
        Ok(())
    }

    /// The leader's high watermark, clamped to the follower's log end (Kafka's follower takes
    /// `min(leader HW, own LEO)`), and never moved back: on purpose unlike Kafka, whose
    /// follower takes a new leader's lower one (see the module docs of [`replica`](super)).
    fn take_high_watermark(&self, leader_high_watermark: i64) -> Result<i64> {
        let target = leader_high_watermark.min(self.log.log_end_offset());
        if target > self.log.high_watermark() {
            return self.log.set_high_watermark(target);
        }
        Ok(self.log.high_watermark())
    }
}
