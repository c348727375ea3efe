//! [`OffsetStore`]: the committed offsets and the classic groups of one `__consumer_offsets`
//! partition (Kafka's coordinator shard: `OffsetMetadataManager` with the groups of
//! `GroupMetadataManager`), kept in memory and written through its [`OffsetsLog`].
//!
//! Every change is a record: the store appends it durably, then applies it with the same
//! function that replays the log on open, so what the store answers is what a reopened store
//! answers. Group records are the exception while the store runs: the coordinator's in-memory
//! group (with its parked joins and timers) is ahead of its record, so the store writes the
//! record and applies it only on replay.

use std::collections::BTreeMap;
use std::sync::Arc;

use partlog::unstable::Clock;

use super::group_offsets::{GroupOffsets, OffsetsByGroup, Stored};
use super::log::{OffsetsLog, OffsetsRecord, Replayed};
use super::records::{GroupMetadataValue, OffsetCommitValue, OffsetsKey, OffsetsKeyRef};
use crate::Error;
use crate::assignor::TopicPartition;
use crate::group::classic::{ClassicGroup, GroupState};

/// The offset store's settings, with Kafka's names and defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetStoreConfig {
    /// `offset.metadata.max.bytes` (4096): longer metadata is refused for its partition.
    pub offset_metadata_max_bytes: usize,
    /// `offsets.retention.minutes` (10080, 7 days), in milliseconds.
    pub offsets_retention_ms: i64,
    /// `offsets.retention.check.interval.ms` (600000).
    pub offsets_retention_check_interval_ms: i64,
}

impl Default for OffsetStoreConfig {
    fn default() -> Self {
        OffsetStoreConfig {
            offset_metadata_max_bytes: 4096,
            offsets_retention_ms: 10_080 * 60 * 1000,
            offsets_retention_check_interval_ms: 600_000,
        }
    }
}

/// Who commits: the member id, generation and instance id a consumer sends with a commit.
/// An admin client or a consumer that assigns its own partitions sends [`MemberRef::none`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberRef {
    /// The member id, empty for none.
    pub member_id: String,
    /// The generation, −1 for none.
    pub generation: i32,
    /// The `group.instance.id` of a static member.
    pub instance_id: Option<String>,
}

impl MemberRef {
    /// No member and no generation.
    pub fn none() -> Self {
        MemberRef {
            member_id: String::new(),
            generation: -1,
            instance_id: None,
        }
    }

    /// `member_id` in `generation`.
    pub fn new(member_id: impl Into<String>, generation: i32) -> Self {
        MemberRef {
            member_id: member_id.into(),
            generation,
            instance_id: None,
        }
    }
}

/// One partition's offset in a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionOffset {
    /// The partition.
    pub partition: TopicPartition,
    /// The next offset to read.
    pub offset: i64,
    /// The leader epoch of the last record read, −1 when unknown.
    pub leader_epoch: i32,
    /// The client's metadata.
    pub metadata: String,
}

impl PartitionOffset {
    /// `offset` for `topic`-`partition`, without epoch or metadata.
    pub fn new(topic: impl Into<String>, partition: i32, offset: i64) -> Self {
        PartitionOffset {
            partition: TopicPartition::new(topic, partition),
            offset,
            leader_epoch: -1,
            metadata: String::new(),
        }
    }
}

/// A committed offset as a fetch returns it: offset −1 and empty metadata when none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedOffset {
    /// The next offset to read, −1 for none.
    pub offset: i64,
    /// Its leader epoch, −1 when unknown.
    pub leader_epoch: i32,
    /// Its metadata.
    pub metadata: String,
}

/// Each partition's answer to a commit, fetch or delete, in request order.
pub type PartitionResults<T> = Vec<(TopicPartition, Result<T, Error>)>;

/// The offsets and groups of one `__consumer_offsets` partition.
pub struct OffsetStore<L: OffsetsLog> {
    log: L,
    config: OffsetStoreConfig,
    clock: Arc<dyn Clock>,
    state: State,
    next_expiry_check_ms: i64,
}

/// What the records say: the store's state, apart from its log so that a replay can fill it
/// while it reads the log.
#[derive(Debug, Default)]
struct State {
    groups: BTreeMap<String, ClassicGroup>,
    offsets: OffsetsByGroup,
    /// Transactional offsets by producer, then group: a group entry stays (perhaps emptied by
    /// a tombstone) until the producer's marker, as the group's open transaction.
    pending: BTreeMap<i64, OffsetsByGroup>,
}

impl State {
    /// Applies one replayed record. `loading`: group records are applied (on open); while
    /// running, the coordinator's group is ahead of its record.
    fn apply_record(
        &mut self,
        offset: i64,
        producer: Option<i64>,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        loading: bool,
        now: i64,
    ) -> Result<(), crate::DecodeError> {
        let Some(key) = key else {
            return Ok(());
        };
        // Borrowed: a replay reads mostly keys already known, which then cost no allocation.
        match OffsetsKeyRef::decode(key)? {
            OffsetsKeyRef::OffsetCommit {
                group,
                topic,
                partition,
            } => match value {
                Some(value) => {
                    let stored = Stored {
                        value: OffsetCommitValue::decode(value)?,
                        record_offset: offset,
                    };
                    // A group that commits without membership is a simple group.
                    if !self.groups.contains_key(&*group) {
                        self.groups
                            .insert(group.to_string(), ClassicGroup::new(group.to_string()));
                    }
                    let by_group = match producer {
                        Some(pid) => self.pending.entry(pid).or_default(),
                        None => &mut self.offsets,
                    };
                    match by_group.get_mut(&*group) {
                        Some(offsets) => offsets.insert(&topic, partition, stored),
                        None => {
                            let mut offsets = GroupOffsets::default();
                            offsets.insert(&topic, partition, stored);
                            by_group.insert(group.into_owned(), offsets);
                        }
                    }
                }
                None => {
                    // A tombstone drops the committed value and any pending one.
                    if let Some(offsets) = self.offsets.get_mut(&*group) {
                        offsets.remove(&topic, partition);
                        if offsets.is_empty() {
                            self.offsets.remove(&*group);
                        }
                    }
                    for by_group in self.pending.values_mut() {
                        if let Some(offsets) = by_group.get_mut(&*group) {
                            offsets.remove(&topic, partition);
                        }
                    }
                }
            },
            OffsetsKeyRef::GroupMetadata { group } => match value {
                Some(value) => {
                    let value = GroupMetadataValue::decode(value)?;
                    if loading {
                        let loaded = ClassicGroup::from_record(&group, &value, now);
                        self.groups.insert(group.into_owned(), loaded);
                    }
                }
                None => {
                    self.groups.remove(&*group);
                }
            },
            OffsetsKeyRef::Other { record_type } => {
                log_skipped(record_type, offset);
            }
        }
        Ok(())
    }

    /// Applies the marker that ends `producer_id`'s transaction at `marker_offset`: on COMMIT
    /// its pending offsets take effect where they are newer (by record offset) than the
    /// committed value; on ABORT they are dropped. For markers written by the transaction
    /// coordinator into this partition.
    fn apply_marker(&mut self, producer_id: i64, commit: bool, _marker_offset: i64) {
        let Some(by_group) = self.pending.remove(&producer_id) else {
            return;
        };
        if !commit {
            return;
        }
        for (group, offsets) in by_group {
            let committed = self.offsets.entry(group).or_default();
            for (topic, partition, stored) in offsets.into_entries() {
                let newer = committed
                    .get(&topic, partition)
                    .is_none_or(|c| c.record_offset < stored.record_offset);
                if newer {
                    committed.insert(&topic, partition, stored);
                }
            }
        }
        self.offsets.retain(|_, o| !o.is_empty());
    }

    /// Whether an open transaction holds an offset for `group_id`'s `tp`.
    fn has_pending(&self, group_id: &str, tp: &TopicPartition) -> bool {
        self.pending
            .values()
            .any(|by_group| by_group.get(group_id).is_some_and(|o| o.contains(tp)))
    }

    /// Whether `group_id` has an open transaction.
    pub fn has_open_transaction(&self, group_id: &str) -> bool {
        self.pending.values().any(|g| g.contains_key(group_id))
    }
}

impl<L: OffsetsLog> std::fmt::Debug for OffsetStore<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OffsetStore")
            .field("log", &self.log.name())
            .field("groups", &self.state.groups.len())
            .field("pending_producers", &self.state.pending.len())
            .finish_non_exhaustive()
    }
}

impl<L: OffsetsLog> OffsetStore<L> {
    /// Opens the store on `log`, replaying it: the last value of every key, transactional
    /// offsets pending until their producer's marker, and the groups' records (a group with
    /// members loads Stable, its sessions counted from now).
    ///
    /// # Errors
    /// The log's read errors; [`Error::CorruptRecord`] for a record of a known type that does
    /// not parse. Records of the types partlog does not load (3 and up) are skipped.
    pub fn open(log: L, config: OffsetStoreConfig, clock: Arc<dyn Clock>) -> Result<Self, Error> {
        let now = clock.now_ms();
        let mut store = OffsetStore {
            log,
            next_expiry_check_ms: now.saturating_add(config.offsets_retention_check_interval_ms),
            config,
            clock,
            state: State::default(),
        };
        let name = store.log.name();
        let state = &mut store.state;
        store.log.replay(&mut |entry| {
            match entry {
                Replayed::Record {
                    offset,
                    transactional_producer,
                    key,
                    value,
                } => state
                    .apply_record(offset, transactional_producer, key, value, true, now)
                    .map_err(|what| Error::CorruptRecord {
                        log: name.clone(),
                        offset,
                        what,
                    })?,
                Replayed::Marker {
                    offset,
                    producer_id,
                    commit,
                } => state.apply_marker(producer_id, commit, offset),
            }
            Ok(())
        })?;
        Ok(store)
    }

    /// The settings.
    pub fn config(&self) -> &OffsetStoreConfig {
        &self.config
    }

    /// The clock's time.
    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// The log.
    pub fn log(&self) -> &L {
        &self.log
    }

    /// The group `group_id`.
    pub fn group(&self, group_id: &str) -> Option<&ClassicGroup> {
        self.state.groups.get(group_id)
    }

    /// The group `group_id`, to change it (the coordinator's access; tests use it to set a
    /// group up as Kafka's tests do).
    pub fn group_mut(&mut self, group_id: &str) -> Option<&mut ClassicGroup> {
        self.state.groups.get_mut(group_id)
    }

    /// The group `group_id`, created Empty (in memory only, as Kafka's
    /// `getOrMaybeCreateClassicGroup`) when missing.
    pub fn get_or_create_group(&mut self, group_id: &str) -> &mut ClassicGroup {
        self.state
            .groups
            .entry(group_id.to_owned())
            .or_insert_with(|| ClassicGroup::new(group_id))
    }

    /// The ids of the groups the store holds.
    pub fn group_ids(&self) -> Vec<String> {
        self.state.groups.keys().cloned().collect()
    }

    /// Applies the marker that ends `producer_id`'s transaction at `marker_offset`: on COMMIT
    /// its pending offsets take effect where they are newer (by record offset) than the
    /// committed value; on ABORT they are dropped. For markers the transaction coordinator
    /// writes into this partition itself.
    pub fn apply_marker(&mut self, producer_id: i64, commit: bool, marker_offset: i64) {
        self.state.apply_marker(producer_id, commit, marker_offset);
    }

    /// Whether `group_id` has an open transaction.
    pub fn has_open_transaction(&self, group_id: &str) -> bool {
        self.state.has_open_transaction(group_id)
    }

    /// Appends records durably and applies them.
    fn write(&mut self, records: Vec<OffsetsRecord>, txn: Option<(i64, i16)>) -> Result<(), Error> {
        if records.is_empty() {
            return Ok(());
        }
        let now = self.now_ms();
        let base = match txn {
            None => self.log.append(&records, now)?,
            Some((pid, epoch)) => self.log.append_transactional(pid, epoch, &records, now)?,
        };
        for (i, record) in records.iter().enumerate() {
            let offset = base + i as i64;
            self.state
                .apply_record(
                    offset,
                    txn.map(|(pid, _)| pid),
                    Some(&record.key),
                    record.value.as_deref(),
                    false,
                    now,
                )
                .map_err(|what| Error::CorruptRecord {
                    log: self.log.name(),
                    offset,
                    what,
                })?;
        }
        Ok(())
    }

    /// Writes `group_id`'s record (as the coordinator does after a sync, or when a group
    /// empties); a Dead or missing group writes its tombstone.
    ///
    /// # Errors
    /// The log's append errors.
    pub(crate) fn write_group(&mut self, group_id: &str) -> Result<(), Error> {
        let key = OffsetsKey::GroupMetadata {
            group: group_id.to_owned(),
        }
        .encode()?;
        let value = match self.state.groups.get(group_id) {
            Some(g) if !g.is_in(GroupState::Dead) => Some(g.to_record().encode()?),
            _ => None,
        };
        let now = self.now_ms();
        self.log.append(&[OffsetsRecord { key, value }], now)?;
        Ok(())
    }

    /// The group a commit goes to: created as a simple group when missing and the commit has
    /// no generation.
    fn commit_group(
        &mut self,
        group_id: &str,
        member: &MemberRef,
    ) -> Result<&mut ClassicGroup, Error> {
        if group_id.is_empty() {
            return Err(Error::InvalidGroupId);
        }
        if !self.state.groups.contains_key(group_id) {
            if member.generation >= 0 {
                return Err(Error::GroupIdNotFound);
            }
            self.state
                .groups
                .insert(group_id.to_owned(), ClassicGroup::new(group_id));
        }
        self.state
            .groups
            .get_mut(group_id)
            .ok_or(Error::GroupIdNotFound)
    }

    /// Commits `offsets` for `group_id` (Kafka's OffsetCommit), durably: the whole request is
    /// refused when the group refuses the member (see
    /// [`ClassicGroup::validate_offset_commit`]); a partition whose metadata is too long is
    /// refused alone. `retention_ms` (the v2–v4 request field) writes a v1 value that expires
    /// then. A valid commit resets the member's session.
    ///
    /// # Errors
    /// The group's refusal (15, 22, 25, 27, 69, 82), or the log's failure (16 or 15).
    pub fn commit(
        &mut self,
        group_id: &str,
        member: &MemberRef,
        retention_ms: Option<i64>,
        offsets: &[PartitionOffset],
    ) -> Result<PartitionResults<()>, Error> {
        self.commit_with(group_id, member, retention_ms, offsets, None)
    }

    /// Commits `offsets` inside producer `producer_id`'s transaction (Kafka's
    /// TxnOffsetCommit): they stay pending until the producer's marker
    /// ([`end_transaction`](Self::end_transaction) or [`apply_marker`](Self::apply_marker)).
    /// The group's checks are the non-transactional ones, except that a rebalance does not
    /// refuse them.
    ///
    /// # Errors
    /// As [`commit`](Self::commit).
    pub fn commit_transactional(
        &mut self,
        group_id: &str,
        member: &MemberRef,
        producer_id: i64,
        producer_epoch: i16,
        offsets: &[PartitionOffset],
    ) -> Result<PartitionResults<()>, Error> {
        self.commit_with(
            group_id,
            member,
            None,
            offsets,
            Some((producer_id, producer_epoch)),
        )
    }

    fn commit_with(
        &mut self,
        group_id: &str,
        member: &MemberRef,
        retention_ms: Option<i64>,
        offsets: &[PartitionOffset],
        txn: Option<(i64, i16)>,
    ) -> Result<PartitionResults<()>, Error> {
        let now = self.now_ms();
        let max = self.config.offset_metadata_max_bytes;
        let group = self.commit_group(group_id, member)?;
        group.validate_offset_commit(
            &member.member_id,
            member.instance_id.as_deref(),
            member.generation,
            txn.is_some(),
        )?;
        if let Some(m) = group.member_mut(&member.member_id) {
            m.session_deadline_ms = now.saturating_add(i64::from(m.session_timeout_ms));
        }
        let mut results = Vec::with_capacity(offsets.len());
        let mut records = Vec::new();
        for p in offsets {
            if p.metadata.len() > max {
                results.push((
                    p.partition.clone(),
                    Err(Error::OffsetMetadataTooLarge {
                        len: p.metadata.len(),
                        max,
                    }),
                ));
                continue;
            }
            let mut value = OffsetCommitValue::new(p.offset, p.metadata.clone(), now);
            value.leader_epoch = p.leader_epoch;
            value.expire_timestamp = retention_ms.map(|r| now.saturating_add(r));
            let key = OffsetsKey::OffsetCommit {
                group: group_id.to_owned(),
                topic: p.partition.topic.clone(),
                partition: p.partition.partition,
            };
            records.push(OffsetsRecord {
                key: key.encode()?,
                value: Some(value.encode()?),
            });
            results.push((p.partition.clone(), Ok(())));
        }
        self.write(records, txn)?;
        Ok(results)
    }

    /// Ends `producer_id`'s transaction in this partition: writes its marker durably and
    /// applies it (see [`apply_marker`](Self::apply_marker)).
    ///
    /// # Errors
    /// The log's append errors.
    pub fn end_transaction(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
    ) -> Result<(), Error> {
        let offset = self
            .log
            .append_marker(producer_id, producer_epoch, commit)?;
        self.apply_marker(producer_id, commit, offset);
        Ok(())
    }

    /// The committed offsets of `partitions` (Kafka's OffsetFetch): −1 for a partition with
    /// none. With `require_stable`, a partition an open transaction holds an offset for is
    /// UNSTABLE_OFFSET_COMMIT (88).
    ///
    /// # Errors
    /// GROUP_ID_NOT_FOUND (69) for a Dead group.
    pub fn fetch(
        &self,
        group_id: &str,
        partitions: &[TopicPartition],
        require_stable: bool,
    ) -> Result<PartitionResults<FetchedOffset>, Error> {
        if self
            .state
            .groups
            .get(group_id)
            .is_some_and(|g| g.is_in(GroupState::Dead))
        {
            return Err(Error::GroupIdNotFound);
        }
        let committed = self.state.offsets.get(group_id);
        Ok(partitions
            .iter()
            .map(|tp| {
                if require_stable && self.state.has_pending(group_id, tp) {
                    return (tp.clone(), Err(Error::UnstableOffsetCommit));
                }
                let fetched = committed
                    .and_then(|o| o.get(&tp.topic, tp.partition))
                    .map_or(
                        FetchedOffset {
                            offset: -1,
                            leader_epoch: -1,
                            metadata: String::new(),
                        },
                        |s| FetchedOffset {
                            offset: s.value.offset,
                            leader_epoch: s.value.leader_epoch,
                            metadata: s.value.metadata.clone(),
                        },
                    );
                (tp.clone(), Ok(fetched))
            })
            .collect())
    }

    /// Every partition `group_id` has a committed offset for, as [`fetch`](Self::fetch).
    ///
    /// # Errors
    /// As [`fetch`](Self::fetch).
    pub fn fetch_all(
        &self,
        group_id: &str,
        require_stable: bool,
    ) -> Result<PartitionResults<FetchedOffset>, Error> {
        let partitions: Vec<TopicPartition> = self
            .state
            .offsets
            .get(group_id)
            .map(|o| o.sorted().into_iter().map(|(tp, _)| tp).collect())
            .unwrap_or_default();
        self.fetch(group_id, &partitions, require_stable)
    }

    /// Deletes `group_id`'s offsets of `partitions` (Kafka's OffsetDelete): tombstones for
    /// those it has. A group with members refuses: NON_EMPTY_GROUP (68), or, for a `consumer`
    /// group, GROUP_SUBSCRIBED_TO_TOPIC (86) for each partition of a topic a member subscribes
    /// to.
    ///
    /// # Errors
    /// GROUP_ID_NOT_FOUND (69) for a missing or Dead group, NON_EMPTY_GROUP (68), the log's
    /// failure.
    pub fn delete(
        &mut self,
        group_id: &str,
        partitions: &[TopicPartition],
    ) -> Result<PartitionResults<()>, Error> {
        let group = self
            .state
            .groups
            .get(group_id)
            .ok_or(Error::GroupIdNotFound)?;
        let consumer =
            group.protocol_type.as_deref() == Some(crate::group::classic::CONSUMER_PROTOCOL_TYPE);
        match group.state {
            GroupState::Dead => return Err(Error::GroupIdNotFound),
            GroupState::Empty => {}
            _ if !consumer => return Err(Error::NonEmptyGroup),
            _ => {}
        }
        let mut results = Vec::with_capacity(partitions.len());
        let mut records = Vec::new();
        for tp in partitions {
            if !group.is_in(GroupState::Empty) && group.is_subscribed_to(&tp.topic) {
                results.push((tp.clone(), Err(Error::GroupSubscribedToTopic)));
                continue;
            }
            if self
                .state
                .offsets
                .get(group_id)
                .is_some_and(|o| o.contains(tp))
            {
                records.push(tombstone(group_id, tp)?);
            }
            results.push((tp.clone(), Ok(())));
        }
        self.write(records, None)?;
        Ok(results)
    }

    /// Runs the expiry when `offsets.retention.check.interval.ms` has passed since the last
    /// run (see [`expire_offsets`](Self::expire_offsets)); returns how many offsets expired.
    ///
    /// # Errors
    /// The log's failure.
    pub fn tick(&mut self) -> Result<usize, Error> {
        let now = self.now_ms();
        if now < self.next_expiry_check_ms {
            return Ok(0);
        }
        self.next_expiry_check_ms =
            now.saturating_add(self.config.offsets_retention_check_interval_ms);
        self.expire_offsets()
    }

    /// Expires offsets now (Kafka's `cleanupGroupMetadata`): an Empty group's offsets
    /// `offsets.retention` after it became Empty, a simple group's after their commit, a Stable
    /// `consumer` group's offsets of topics no member subscribes to after their commit, a v1
    /// value at its expire timestamp; never an offset a transaction holds. An Empty group left
    /// with no offsets and no open transaction gets its tombstone and is gone. Returns how many
    /// offsets expired.
    ///
    /// # Errors
    /// The log's failure.
    pub fn expire_offsets(&mut self) -> Result<usize, Error> {
        let now = self.now_ms();
        let retention = self.config.offsets_retention_ms;
        let mut records = Vec::new();
        let mut expired = 0;
        let mut deletable = Vec::new();
        for (group_id, group) in &self.state.groups {
            // Kafka's `offsetExpirationCondition`: from when an offset's retention counts
            // (`Some(since)`: from when the group became Empty), or `None`: never.
            let base: Option<Option<i64>> = match (&group.protocol_type, group.state) {
                (None, _) => Some(None),
                (Some(_), GroupState::Empty) => Some(group.state_timestamp_ms),
                (Some(t), GroupState::Stable)
                    if t == crate::group::classic::CONSUMER_PROTOCOL_TYPE
                        && group.subscribed_topics.is_some() =>
                {
                    Some(None)
                }
                _ => None,
            };
            let mut all_expired = true;
            if let Some(offsets) = self.state.offsets.get(group_id) {
                for (tp, stored) in &offsets.sorted() {
                    let is_expired = base.is_some_and(|since| {
                        !group.is_subscribed_to(&tp.topic)
                            && !self.state.has_pending(group_id, tp)
                            && match stored.value.expire_timestamp {
                                Some(at) => now >= at,
                                None => {
                                    let from = since.unwrap_or(stored.value.commit_timestamp);
                                    now.saturating_sub(from) >= retention
                                }
                            }
                    });
                    if is_expired {
                        records.push(tombstone(group_id, tp)?);
                        expired += 1;
                    } else {
                        all_expired = false;
                    }
                }
            }
            if all_expired
                && !self.state.has_open_transaction(group_id)
                && group.is_in(GroupState::Empty)
            {
                deletable.push(group_id.clone());
            }
        }
        for group_id in &deletable {
            records.push(OffsetsRecord {
                key: OffsetsKey::GroupMetadata {
                    group: group_id.clone(),
                }
                .encode()?,
                value: None,
            });
        }
        self.write(records, None)?;
        Ok(expired)
    }
}

fn tombstone(group_id: &str, tp: &TopicPartition) -> Result<OffsetsRecord, Error> {
    Ok(OffsetsRecord {
        key: OffsetsKey::OffsetCommit {
            group: group_id.to_owned(),
            topic: tp.topic.clone(),
            partition: tp.partition,
        }
        .encode()?,
        value: None,
    })
}

/// Kafka skips record types its group coordinator does not load (KIP-848 consumer groups,
/// share and streams groups); so does partlog, with a log line.
fn log_skipped(record_type: i16, offset: i64) {
    log::info!(
        "__consumer_offsets record at offset {offset} has record type {record_type}, which partlog does not load: skipped"
    );
}
