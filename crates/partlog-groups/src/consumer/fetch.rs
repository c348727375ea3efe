//! Positions (committed offsets, `auto.offset.reset`), reads, and commits.

use std::collections::BTreeMap;
use std::sync::Arc;

use partlog::{Log, ReadBound};

use super::{AutoOffsetReset, Consumer, ConsumerRecord, IsolationLevel, OffsetReset, Source};
use crate::Error;
use crate::assignor::TopicPartition;
use crate::offsets::store::{MemberRef, PartitionOffset};

impl Consumer {
    /// Commits the positions of every assigned partition (`None`), or `offsets` (each the next
    /// offset to read), durably: when it returns, a reopened store returns them.
    ///
    /// # Errors
    /// `CommitFailed` when the group rebalanced or removed this member (the generation is
    /// reset: poll to rejoin); `RebalanceInProgress` while the group completes a rebalance
    /// (poll to finish it, then commit again); a partition's refusal
    /// (`OffsetMetadataTooLarge`); the store's errors.
    pub fn commit_sync(&mut self, offsets: Option<&[(TopicPartition, i64)]>) -> Result<(), Error> {
        self.check_open()?;
        let offsets: Vec<PartitionOffset> = match offsets {
            Some(given) => given
                .iter()
                .map(|(tp, o)| PartitionOffset::new(tp.topic.clone(), tp.partition, *o))
                .collect(),
            None => self.position_offsets(None),
        };
        self.commit_offsets(&offsets)
    }

    /// Kafka's `commitAsync`: one attempt, never retried; `callback` gets its outcome once it
    /// is durable (here before the call returns: the commit runs in process).
    pub fn commit_async(
        &mut self,
        offsets: Option<&[(TopicPartition, i64)]>,
        callback: impl FnOnce(Result<(), Error>),
    ) {
        callback(self.commit_sync(offsets));
    }

    /// Commits the positions of `partitions` (revocation, auto-commit).
    pub(super) fn commit_positions_of(
        &mut self,
        partitions: &[TopicPartition],
    ) -> Result<(), Error> {
        let offsets = self.position_offsets(Some(partitions));
        self.commit_offsets(&offsets)
    }

    fn position_offsets(&self, only: Option<&[TopicPartition]>) -> Vec<PartitionOffset> {
        self.positions
            .iter()
            .filter(|(tp, _)| self.assigned.contains(*tp) && only.is_none_or(|o| o.contains(tp)))
            .map(|(tp, o)| PartitionOffset::new(tp.topic.clone(), tp.partition, *o))
            .collect()
    }

    fn commit_offsets(&mut self, offsets: &[PartitionOffset]) -> Result<(), Error> {
        if offsets.is_empty() {
            return Ok(());
        }
        if matches!(self.source, Source::Subscribed(_))
            && !matches!(self.phase, super::membership::Phase::Unjoined)
        {
            // Kafka's `generationIfStable`: a member in a join or sync has no generation to
            // commit with; the commit before the revocation that ends the rebalance covers it.
            return Err(Error::RebalanceInProgress);
        }
        let group = self.group_id()?.to_owned();
        let member = match self.source {
            Source::Subscribed(_) => MemberRef {
                member_id: self.member_id.clone(),
                generation: self.generation,
                instance_id: self.config.group_instance_id.clone(),
            },
            _ => MemberRef::none(),
        };
        let committed = self.router.with_group(&group, |s| {
            s.store_mut().commit(&group, &member, None, offsets)
        });
        match committed {
            Ok(results) => results.into_iter().try_for_each(|(_, r)| r),
            Err(error @ (Error::IllegalGeneration | Error::UnknownMemberId))
                if matches!(self.source, Source::Subscribed(_)) =>
            {
                // Kafka's testCommitOffsetIllegalGeneration: the generation is gone, rejoin.
                self.reset_generation(matches!(error, Error::UnknownMemberId));
                self.rejoin_needed = true;
                Err(Error::CommitFailed {
                    cause: Box::new(error),
                })
            }
            Err(Error::RebalanceInProgress) => {
                self.rejoin_needed = true;
                Err(Error::RebalanceInProgress)
            }
            Err(error) => Err(error),
        }
    }

    /// Auto-commit from `poll`: every `auto.commit.interval.ms`, or `retry.backoff.ms` after a
    /// failed one.
    pub(super) fn maybe_auto_commit(&mut self) {
        let now = self.clock.now_ms();
        if !self.config.enable_auto_commit || now < self.next_auto_commit_ms {
            return;
        }
        let offsets = self.position_offsets(None);
        match self.commit_offsets(&offsets) {
            Ok(()) => {
                self.next_auto_commit_ms = now.saturating_add(self.config.auto_commit_interval_ms);
            }
            Err(error) => {
                log::warn!(
                    "consumer {:?}: an auto-commit failed, retried after retry.backoff.ms: {error}",
                    self.member_id
                );
                self.next_auto_commit_ms = now.saturating_add(self.config.retry_backoff_ms);
            }
        }
    }

    fn partition_log(&self, tp: &TopicPartition) -> Result<Arc<Log>, Error> {
        Ok(self
            .router
            .engine()
            .topic(&tp.topic)?
            .partition(tp.partition)?)
    }

    /// Where a partition starts by `auto.offset.reset`; `None` for `none`.
    fn reset_offset(&self, log: &Log) -> Option<i64> {
        match self.config.auto_offset_reset {
            AutoOffsetReset::Earliest => Some(log.log_start_offset()),
            AutoOffsetReset::Latest => Some(match self.config.isolation_level {
                IsolationLevel::ReadCommitted => log.last_stable_offset(),
                IsolationLevel::ReadUncommitted => log.log_end_offset(),
            }),
            AutoOffsetReset::None => None,
        }
    }

    /// Gives every assigned partition without a position one: its committed offset, else
    /// `auto.offset.reset`. A partition an open transaction holds an offset for
    /// (`read_committed`) waits for a later poll.
    pub(super) fn resolve_positions(&mut self) -> Result<(), Error> {
        let missing: Vec<TopicPartition> = self
            .assigned
            .iter()
            .filter(|tp| !self.positions.contains_key(*tp))
            .cloned()
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let committed: BTreeMap<TopicPartition, Result<i64, Error>> = match self.config.group_id {
            Some(_) => {
                let group = self.group_id()?.to_owned();
                let stable = self.config.isolation_level == IsolationLevel::ReadCommitted;
                self.router
                    .with_group(&group, |s| s.store().fetch(&group, &missing, stable))?
                    .into_iter()
                    .map(|(tp, r)| (tp, r.map(|f| f.offset)))
                    .collect()
            }
            None => missing.iter().map(|tp| (tp.clone(), Ok(-1))).collect(),
        };
        let mut no_offset = Vec::new();
        for (tp, result) in committed {
            let offset = match result {
                Ok(offset) => offset,
                Err(Error::UnstableOffsetCommit) => continue,
                Err(error) => return Err(error),
            };
            let log = self.partition_log(&tp)?;
            let in_range = (log.log_start_offset()..=log.log_end_offset()).contains(&offset);
            if offset >= 0 && in_range {
                self.positions.insert(tp, offset);
                continue;
            }
            match self.reset_offset(&log) {
                Some(to) => {
                    if offset >= 0 {
                        log::warn!(
                            "{tp}: committed offset {offset} is out of range; reset to {to}"
                        );
                        self.resets.push(OffsetReset {
                            partition: tp.clone(),
                            from: offset,
                            to,
                        });
                    }
                    self.positions.insert(tp, to);
                }
                None => no_offset.push(tp),
            }
        }
        if no_offset.is_empty() {
            Ok(())
        } else {
            Err(Error::NoOffsetForPartition {
                partitions: no_offset,
            })
        }
    }

    /// Up to `max.poll.records` records from the assigned partitions with a position, starting
    /// one partition further each poll so that none starves.
    pub(super) fn fetch_records(&mut self) -> Result<Vec<ConsumerRecord>, Error> {
        if !matches!(self.phase, super::membership::Phase::Unjoined) && self.protocol_is_eager() {
            // EAGER: nothing is owned while the group rebalances.
            return Ok(Vec::new());
        }
        self.resolve_positions()?;
        let partitions: Vec<TopicPartition> = self.assigned.iter().cloned().collect();
        let mut records = Vec::new();
        let count = partitions.len();
        for i in 0..count {
            let room = self.config.max_poll_records.saturating_sub(records.len());
            if room == 0 {
                break;
            }
            let tp = &partitions[(self.next_partition + i) % count];
            let Some(&position) = self.positions.get(tp) else {
                continue;
            };
            let log = self.partition_log(tp)?;
            let mut next = position;
            let read: Box<dyn Iterator<Item = partlog::Result<partlog::LogRecord>>> =
                match self.config.isolation_level {
                    IsolationLevel::ReadCommitted => {
                        Box::new(log.committed_records(position, ReadBound::LogEnd))
                    }
                    IsolationLevel::ReadUncommitted => {
                        Box::new(log.records(position, ReadBound::LogEnd))
                    }
                };
            for record in read.take(room) {
                let record = record?;
                next = record.offset + 1;
                records.push(ConsumerRecord {
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                    offset: record.offset,
                    timestamp: record.timestamp,
                    key: record.key,
                    value: record.value,
                    headers: record.headers,
                });
            }
            self.positions.insert(tp.clone(), next);
        }
        if count > 0 {
            self.next_partition = (self.next_partition + 1) % count;
        }
        Ok(records)
    }

    fn protocol_is_eager(&self) -> bool {
        self.protocol == crate::assignor::RebalanceProtocol::Eager
    }
}
