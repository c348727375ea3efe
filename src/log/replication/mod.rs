//! Owns `Replication` (`state.rs`: the leader-epoch cache, the role, the high watermark), with the
//! cache and its file (`leader_epoch.rs`) and its load at open (`epoch_load.rs`). Uses `observe`,
//! `config`, `files`, `segments`, `durability` and `txn` (the producer state hears of the high
//! watermark).
//!
//! The log-level replication hooks (ARCHITECTURE.md §11): the role that decides which epoch
//! client appends stamp, the high watermark, and the leader-epoch cache's accessors. The caller
//! (`partlog::replica`, a Raft adapter) supplies elections and transport; the log only keeps the
//! rules that decide what is committed and where a follower must truncate, as Kafka's
//! `UnifiedLog` does.
//!
//! - **Role.** A bare log stamps `partitionLeaderEpoch = -1` on client appends (no leader, so a
//!   broker's cache ignores them). [`Log::become_leader`] records `(epoch, LEO)` in the cache and
//!   makes client appends stamp that epoch; [`Log::become_follower`] refuses client appends
//!   ([`Error::NotLeaderOrFollower`]); follower appends ([`Log::append_as_follower`]) work in
//!   every role. The role lives in one atomic, written under the writer lock, so an append
//!   (which reads it under that lock) never mixes two roles.
//! - **High watermark.** It follows the log end offset until [`Log::set_high_watermark`] is first
//!   called (one replica, Kafka's ISR of the leader alone); from then on it moves only forward,
//!   except that a truncation below it lowers it to the new end, as Kafka's follower does. Reads
//!   with [`ReadBound::HighWatermark`](crate::log::ReadBound::HighWatermark) stop below it, the last
//!   stable offset is `min(HW, first unstable offset)`, and retention and
//!   `delete_records_before` never remove anything at or above it.
//! - **Epoch cache.** Under its own lock, taken after the writer lock and never before it.

pub(in crate::log) mod epoch_load;
pub mod leader_epoch;
pub(in crate::log) mod state;

use crate::error::{Error, Result};

use crate::log::segments::watermark::Watermark;
use crate::log::{Shared, Writer};
use leader_epoch::{
    EpochEntry, LeaderEpochFileCache, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, read_checkpoint,
};

impl Shared {
    /// See [`Log::become_leader`](crate::Log::become_leader).
    pub(in crate::log) fn become_leader(&self, leader_epoch: i32) -> Result<()> {
        self.check_writable()?;
        if leader_epoch < 0 {
            return Err(Error::InvalidArgument {
                why: format!("a leader epoch must be ≥ 0, got {leader_epoch}"),
            });
        }
        let shared = self;
        let writer = shared.writer.lock();
        self.check_writable()?;
        {
            let mut cache = shared.replication.epochs();
            if let Some(latest) = cache.latest_epoch()
                && leader_epoch < latest
            {
                return Err(Error::FencedLeaderEpoch {
                    current: latest,
                    found: leader_epoch,
                });
            }
            cache.assign(leader_epoch, writer.tail.log_end_offset())?;
        }
        shared.replication.lead(leader_epoch);
        drop(writer);
        Ok(())
    }

    /// See [`Log::become_follower`](crate::Log::become_follower).
    pub(in crate::log) fn become_follower(&self) -> Result<()> {
        self.check_writable()?;
        let shared = self;
        let _writer = shared.writer.lock();
        shared.replication.follow();
        Ok(())
    }

    /// See [`Log::leader_epoch`](crate::Log::leader_epoch).
    pub(in crate::log) fn leader_epoch(&self) -> Option<i32> {
        self.replication.leader_epoch()
    }

    /// See [`Log::set_high_watermark`](crate::Log::set_high_watermark).
    pub(in crate::log) fn set_high_watermark(&self, high_watermark: i64) -> Result<i64> {
        self.check_writable()?;
        let shared = self;
        let mut writer = shared.writer.lock();
        let end = writer.tail.log_end_offset();
        if high_watermark > end {
            return Err(Error::InvalidArgument {
                why: format!("high watermark {high_watermark} is above the log end offset {end}"),
            });
        }
        let start = shared.view.log_start();
        let mut new = high_watermark.max(start);
        if let Some(current) = shared.replication.high_watermark_if_set() {
            new = new.max(current);
        }
        shared.publish_high_watermark(&mut writer, new);
        Ok(new)
    }

    /// See [`Log::end_offset_for_epoch`](crate::Log::end_offset_for_epoch).
    pub(in crate::log) fn end_offset_for_epoch(&self, epoch: i32) -> (i32, i64) {
        let shared = self;
        let cache = shared.replication.epochs();
        let answer = cache.end_offset_for(epoch, shared.view.log_end());
        if answer.0 == UNDEFINED_EPOCH {
            (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        } else {
            answer
        }
    }

    /// See [`Log::latest_epoch`](crate::Log::latest_epoch).
    pub(in crate::log) fn latest_epoch(&self) -> Option<i32> {
        self.replication.epochs().latest_epoch()
    }

    /// See [`Log::epoch_for_offset`](crate::Log::epoch_for_offset).
    pub(in crate::log) fn epoch_for_offset(&self, offset: i64) -> Option<i32> {
        self.replication.epochs().epoch_for_offset(offset)
    }

    /// See [`Log::leader_epoch_entries`](crate::Log::leader_epoch_entries).
    pub(in crate::log) fn leader_epoch_entries(&self) -> Vec<EpochEntry> {
        self.replication.epochs().entries().to_vec()
    }

    /// The high watermark: the set value, or the readable end until one is set.
    pub(in crate::log) fn high_watermark(&self) -> i64 {
        self.replication.high_watermark(self.readable_end())
    }

    /// What a reader bounded by the high watermark waits on: the log end until the high
    /// watermark is first set ([`publish_high_watermark`](Self::publish_high_watermark) then
    /// wakes those waiters).
    pub(in crate::log) fn high_watermark_mark(&self) -> &Watermark {
        self.replication.mark(self.view.log_end_mark())
    }

    /// The high watermark once the log ends at `next_offset` (under the writer lock).
    pub(in crate::log) fn high_watermark_at(&self, next_offset: i64) -> i64 {
        self.replication.high_watermark_at(next_offset)
    }

    /// Sets the high watermark to `value` (under the writer lock) and tells the producer state.
    pub(in crate::log) fn publish_high_watermark(&self, writer: &mut Writer, value: i64) {
        writer.producers.on_high_watermark_updated(value);
        self.txn.publish(&writer.producers);
        self.replication.publish(value);
        // A reader bounded by the high watermark may have waited on the log end before it was
        // first set.
        self.view.log_end_mark().wake_all();
    }

    /// A live read-only log's poll: the writer's `leader-epoch-checkpoint` again, cut to the
    /// view's `[log start, end)`. The writer replaces the file by a rename, so the read sees a
    /// whole file; one that does not parse (the writer is about to rebuild it) leaves the cache
    /// as it was, as does a missing one.
    pub(in crate::log) fn follow_live_leader_epochs(&self, end: i64) {
        let entries = match read_checkpoint(&*self.storage, &self.dir) {
            Ok(Some(entries)) => entries,
            Ok(None) => return,
            Err(error) => {
                log::debug!(
                    "{}: {error}; the leader epochs stay as they were",
                    self.dir.display()
                );
                return;
            }
        };
        let mut cache = LeaderEpochFileCache::detached_with(entries);
        let cut = cache
            .truncate_from_end(end)
            .and_then(|()| cache.truncate_from_start(self.view.log_start()));
        if cut.is_ok() {
            *self.replication.epochs() = cache;
        }
    }

    /// The last stable offset: the first unstable offset, or the high watermark when no
    /// transaction is unstable, and never below the log start. The first unstable offset is
    /// read before the log end: an append publishes it before it moves the end past a
    /// transactional batch.
    pub(in crate::log) fn last_stable_offset(&self) -> i64 {
        let first_unstable = self.txn.first_unstable();
        let high_watermark = self.high_watermark();
        let log_start = self.view.log_start();
        first_unstable.min(high_watermark).max(log_start)
    }
}
