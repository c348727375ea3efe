//! The offset store's rules (issue 34, Kafka ports 1–5), each on a real `partlog::Log` in a
//! temporary directory behind the `OffsetsLog` port, on partlog's manual clock. Tests are named
//! after Kafka's (`OffsetMetadataManagerTest`, `ClassicGroupTest`), in snake case.

use std::sync::Arc;

use partlog::unstable::{Clock, ManualClock};
use partlog::{Log, LogConfig, ReadBound};
use partlog_groups::Error;
use partlog_groups::assignor::TopicPartition;
use partlog_groups::group::classic::{ClassicMember, GroupState};
use partlog_groups::group::consumer_protocol::Subscription;
use partlog_groups::offsets::log::offsets_log_config;
use partlog_groups::offsets::records::{OffsetCommitValue, OffsetsKey};
use partlog_groups::offsets::store::{
    FetchedOffset, MemberRef, OffsetStore, OffsetStoreConfig, PartitionOffset,
};

const T0: i64 = 1_700_000_000_000;

struct Context {
    _dir: tempfile::TempDir,
    clock: Arc<ManualClock>,
    store: OffsetStore<Arc<Log>>,
    log: Arc<Log>,
    config: OffsetStoreConfig,
}

impl Context {
    fn new() -> Self {
        Self::with(OffsetStoreConfig::default())
    }

    fn with(config: OffsetStoreConfig) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(T0));
        let log = open_log(dir.path(), &clock);
        let store = OffsetStore::open(Arc::clone(&log), config.clone(), clock.clone()).unwrap();
        Context {
            _dir: dir,
            clock,
            store,
            log,
            config,
        }
    }

    /// Closes the log and opens the store again from what it holds.
    fn reopen(&mut self) {
        self.log.close().unwrap();
        let dir = self.log.dir().to_path_buf();
        self.log = open_log(&dir, &self.clock);
        self.store = OffsetStore::open(
            Arc::clone(&self.log),
            self.config.clone(),
            self.clock.clone(),
        )
        .unwrap();
    }

    /// The records in the log: decoded key, and value (`None` for a tombstone).
    fn records(&self) -> Vec<(OffsetsKey, Option<Vec<u8>>)> {
        self.log
            .records(0, ReadBound::LogEnd)
            .map(|r| {
                let r = r.unwrap();
                (OffsetsKey::decode(&r.key.unwrap()).unwrap(), r.value)
            })
            .collect()
    }

    fn commit(
        &mut self,
        group: &str,
        member: &MemberRef,
        offsets: &[PartitionOffset],
    ) -> Result<(), Error> {
        let results = self.store.commit(group, member, None, offsets)?;
        for (_, r) in results {
            r?;
        }
        Ok(())
    }

    fn fetch(&self, group: &str, tps: &[TopicPartition], stable: bool) -> Vec<Result<i64, Error>> {
        self.store
            .fetch(group, tps, stable)
            .unwrap()
            .into_iter()
            .map(|(_, r)| r.map(|f| f.offset))
            .collect()
    }
}

fn open_log(dir: &std::path::Path, clock: &Arc<ManualClock>) -> Arc<Log> {
    let config = offsets_log_config(LogConfig::builder().clock(clock.clone())).unwrap();
    Arc::new(Log::open(dir, config).unwrap())
}

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition::new(topic, partition)
}

fn member(id: &str, instance: Option<&str>, topics: &[&str]) -> ClassicMember {
    let mut m = ClassicMember::new(
        id,
        "consumer",
        vec![(
            "range".into(),
            Subscription::new(topics.iter().copied()).encode(3).unwrap(),
        )],
    );
    m.instance_id = instance.map(str::to_owned);
    m
}

/// A classic `consumer` group with one member in `generation`, in `state`.
fn group_with_member(ctx: &mut Context, group: &str, topics: &[&str], state: GroupState) {
    let now = ctx.clock.now_ms();
    let g = ctx.store.get_or_create_group(group);
    g.add(member("member", Some("instance"), topics));
    assert!(g.transition_to(GroupState::PreparingRebalance, now));
    g.init_next_generation(now);
    match state {
        GroupState::CompletingRebalance => {}
        GroupState::Stable => assert!(g.transition_to(GroupState::Stable, now)),
        GroupState::PreparingRebalance => {
            assert!(g.transition_to(GroupState::PreparingRebalance, now))
        }
        GroupState::Dead => assert!(g.transition_to(GroupState::Dead, now)),
        GroupState::Empty => unreachable!(),
    }
}

#[test]
fn test_simple_group_offset_commit() {
    let mut ctx = Context::new();
    ctx.commit(
        "foo",
        &MemberRef::none(),
        &[PartitionOffset::new("bar", 0, 100)],
    )
    .unwrap();
    let records = ctx.records();
    assert_eq!(records.len(), 1);
    assert_eq!(
        records[0].0,
        OffsetsKey::OffsetCommit {
            group: "foo".into(),
            topic: "bar".into(),
            partition: 0
        }
    );
    let value = records[0].1.as_deref().unwrap();
    assert_eq!(&value[..2], &[0, 3], "a v3 value");
    assert_eq!(
        OffsetCommitValue::decode(value).unwrap(),
        OffsetCommitValue::new(100, "", T0)
    );
    let group = ctx.store.group("foo").expect("a simple group");
    assert_eq!(group.state, GroupState::Empty);
    assert_eq!(group.protocol_type, None);
    assert_eq!(ctx.fetch("foo", &[tp("bar", 0)], false), [Ok(100)]);
}

#[test]
fn test_generic_group_offset_commit_with_dead_group() {
    let mut ctx = Context::new();
    group_with_member(&mut ctx, "foo", &["bar"], GroupState::Dead);
    let r = ctx.commit(
        "foo",
        &MemberRef::new("member", 1),
        &[PartitionOffset::new("bar", 0, 100)],
    );
    assert_eq!(r, Err(Error::CoordinatorNotAvailable));
    assert_eq!(r.unwrap_err().kafka_code(), Some(15));
}

#[test]
fn test_generic_group_offset_commit_with_unknown_group_and_generation() {
    let mut ctx = Context::new();
    let r = ctx.commit(
        "foo",
        &MemberRef::new("member", 10),
        &[PartitionOffset::new("bar", 0, 100)],
    );
    assert_eq!(r, Err(Error::GroupIdNotFound));
    assert!(ctx.records().is_empty());
}

#[test]
fn test_generic_group_offset_commit_with_unknown_member_id() {
    let mut ctx = Context::new();
    group_with_member(&mut ctx, "foo", &["bar"], GroupState::Stable);
    let r = ctx.commit(
        "foo",
        &MemberRef::new("unknown", 1),
        &[PartitionOffset::new("bar", 0, 100)],
    );
    assert_eq!(r, Err(Error::UnknownMemberId));
}

#[test]
fn test_generic_group_offset_commit_with_illegal_generation() {
    let mut ctx = Context::new();
    group_with_member(&mut ctx, "foo", &["bar"], GroupState::Stable);
    let r = ctx.commit(
        "foo",
        &MemberRef::new("member", 10),
        &[PartitionOffset::new("bar", 0, 100)],
    );
    assert_eq!(r, Err(Error::IllegalGeneration));
}

#[test]
fn test_generic_group_offset_commit_with_fenced_instance_id() {
    let mut ctx = Context::new();
    group_with_member(&mut ctx, "foo", &["bar"], GroupState::Stable);
    let mut who = MemberRef::new("other", 1);
    who.instance_id = Some("instance".into());
    let r = ctx.commit("foo", &who, &[PartitionOffset::new("bar", 0, 100)]);
    assert_eq!(r, Err(Error::FencedInstanceId));
}

#[test]
fn test_generic_group_offset_commit_while_in_completing_rebalance_state() {
    let mut ctx = Context::new();
    group_with_member(&mut ctx, "foo", &["bar"], GroupState::CompletingRebalance);
    let r = ctx.commit(
        "foo",
        &MemberRef::new("member", 1),
        &[PartitionOffset::new("bar", 0, 100)],
    );
    assert_eq!(r, Err(Error::RebalanceInProgress));
}

#[test]
fn test_generic_group_offset_commit_without_member_id_and_generation() {
    let mut ctx = Context::new();
    group_with_member(&mut ctx, "foo", &["bar"], GroupState::Stable);
    let r = ctx.commit(
        "foo",
        &MemberRef::none(),
        &[PartitionOffset::new("bar", 0, 100)],
    );
    assert_eq!(r, Err(Error::UnknownMemberId));
}

#[test]
fn test_generic_group_offset_commit_with_retention_time() {
    let mut ctx = Context::new();
    group_with_member(&mut ctx, "foo", &["bar"], GroupState::Stable);
    let results = ctx
        .store
        .commit(
            "foo",
            &MemberRef::new("member", 1),
            Some(1234),
            &[PartitionOffset::new("bar", 0, 100)],
        )
        .unwrap();
    assert_eq!(results, vec![(tp("bar", 0), Ok(()))]);
    let value = ctx.records()[0].1.clone().unwrap();
    assert_eq!(&value[..2], &[0, 1], "a v1 value");
    let mut expected = OffsetCommitValue::new(100, "", T0);
    expected.expire_timestamp = Some(T0 + 1234);
    assert_eq!(OffsetCommitValue::decode(&value).unwrap(), expected);
}

#[test]
fn test_generic_group_offset_commit_with_offset_metadata_too_large() {
    let mut ctx = Context::with(OffsetStoreConfig {
        offset_metadata_max_bytes: 5,
        ..Default::default()
    });
    group_with_member(&mut ctx, "foo", &["bar"], GroupState::Stable);
    let mut big = PartitionOffset::new("bar", 0, 100);
    big.metadata = "toolarge".into();
    let mut small = PartitionOffset::new("bar", 1, 100);
    small.metadata = "small".into();
    let results = ctx
        .store
        .commit("foo", &MemberRef::new("member", 1), None, &[big, small])
        .unwrap();
    assert_eq!(
        results[0],
        (
            tp("bar", 0),
            Err(Error::OffsetMetadataTooLarge { len: 8, max: 5 })
        )
    );
    assert_eq!(results[0].1.as_ref().unwrap_err().kafka_code(), Some(12));
    assert_eq!(results[1], (tp("bar", 1), Ok(())));
    assert_eq!(
        ctx.records().len(),
        1,
        "only the partition that fits is written"
    );
    assert_eq!(
        ctx.fetch("foo", &[tp("bar", 0), tp("bar", 1)], false),
        [Ok(-1), Ok(100)]
    );
}

/// A valid commit resets the member's session timer.
#[test]
fn test_generic_group_offset_commit_maintains_session() {
    let mut ctx = Context::new();
    group_with_member(&mut ctx, "foo", &["bar"], GroupState::Stable);
    ctx.clock.advance(10_000);
    ctx.commit(
        "foo",
        &MemberRef::new("member", 1),
        &[PartitionOffset::new("bar", 0, 1)],
    )
    .unwrap();
    let m = ctx.store.group("foo").unwrap().member("member").unwrap();
    assert_eq!(m.session_deadline_ms, T0 + 10_000 + 45_000);
}

fn commit_txn(ctx: &mut Context, pid: i64, offsets: &[PartitionOffset]) {
    let results = ctx
        .store
        .commit_transactional("foo", &MemberRef::none(), pid, 0, offsets)
        .unwrap();
    assert!(results.iter().all(|(_, r)| r.is_ok()));
}

#[test]
fn test_fetch_offsets_with_pending_transactional_offsets() {
    let mut ctx = Context::new();
    ctx.commit(
        "foo",
        &MemberRef::none(),
        &[
            PartitionOffset::new("foo", 0, 100),
            PartitionOffset::new("foo", 1, 110),
            PartitionOffset::new("bar", 0, 200),
        ],
    )
    .unwrap();
    commit_txn(
        &mut ctx,
        10,
        &[
            PartitionOffset::new("foo", 1, 111),
            PartitionOffset::new("bar", 0, 201),
            PartitionOffset::new("bar", 1, 211),
        ],
    );
    let all = [tp("foo", 0), tp("foo", 1), tp("bar", 0), tp("bar", 1)];
    assert_eq!(
        ctx.fetch("foo", &all, true),
        [
            Ok(100),
            Err(Error::UnstableOffsetCommit),
            Err(Error::UnstableOffsetCommit),
            Err(Error::UnstableOffsetCommit)
        ]
    );
    assert_eq!(
        ctx.fetch("foo", &all, false),
        [Ok(100), Ok(110), Ok(200), Ok(-1)]
    );
    ctx.store.end_transaction(10, 0, true).unwrap();
    assert_eq!(
        ctx.fetch("foo", &all, true),
        [Ok(100), Ok(111), Ok(201), Ok(211)]
    );
    // The same after a replay of the log.
    ctx.reopen();
    assert_eq!(
        ctx.fetch("foo", &all, true),
        [Ok(100), Ok(111), Ok(201), Ok(211)]
    );
    let fetched = ctx.store.fetch("foo", &[tp("zzz", 0)], true).unwrap();
    assert_eq!(
        fetched[0].1,
        Ok(FetchedOffset {
            offset: -1,
            leader_epoch: -1,
            metadata: String::new()
        })
    );
}

#[test]
fn test_replay_transaction_end_marker_keeps_the_most_recent_committed_offset() {
    let mut ctx = Context::new();
    // Pending transactional offset, then a regular commit written after it: the regular one
    // wins when the transaction commits.
    commit_txn(
        &mut ctx,
        5,
        &[
            PartitionOffset::new("bar", 0, 100),
            PartitionOffset::new("bar", 1, 101),
        ],
    );
    ctx.commit(
        "foo",
        &MemberRef::none(),
        &[PartitionOffset::new("bar", 0, 200)],
    )
    .unwrap();
    ctx.store.end_transaction(5, 0, true).unwrap();
    let both = [tp("bar", 0), tp("bar", 1)];
    assert_eq!(ctx.fetch("foo", &both, true), [Ok(200), Ok(101)]);
    ctx.reopen();
    assert_eq!(ctx.fetch("foo", &both, true), [Ok(200), Ok(101)]);
}

#[test]
fn test_replay_transaction_abort_drops_pending_offsets() {
    let mut ctx = Context::new();
    ctx.commit(
        "foo",
        &MemberRef::none(),
        &[PartitionOffset::new("bar", 0, 50)],
    )
    .unwrap();
    commit_txn(&mut ctx, 5, &[PartitionOffset::new("bar", 0, 100)]);
    ctx.store.end_transaction(5, 0, false).unwrap();
    assert_eq!(ctx.fetch("foo", &[tp("bar", 0)], true), [Ok(50)]);
    ctx.reopen();
    assert_eq!(ctx.fetch("foo", &[tp("bar", 0)], true), [Ok(50)]);
}

#[test]
fn test_replay_with_tombstone_and_pending_transactional_offsets() {
    let mut ctx = Context::new();
    commit_txn(
        &mut ctx,
        10,
        &[
            PartitionOffset::new("bar", 0, 100),
            PartitionOffset::new("bar", 1, 101),
        ],
    );
    ctx.commit(
        "foo",
        &MemberRef::none(),
        &[PartitionOffset::new("bar", 0, 1)],
    )
    .unwrap();
    // An offset delete writes the tombstone of bar-0: its pending offset goes too.
    ctx.store.delete("foo", &[tp("bar", 0)]).unwrap();
    assert_eq!(
        ctx.fetch("foo", &[tp("bar", 0), tp("bar", 1)], true),
        [Ok(-1), Err(Error::UnstableOffsetCommit)]
    );
    assert!(ctx.store.has_open_transaction("foo"));
    ctx.store.end_transaction(10, 0, true).unwrap();
    assert_eq!(
        ctx.fetch("foo", &[tp("bar", 0), tp("bar", 1)], true),
        [Ok(-1), Ok(101)]
    );
    ctx.reopen();
    assert_eq!(
        ctx.fetch("foo", &[tp("bar", 0), tp("bar", 1)], true),
        [Ok(-1), Ok(101)]
    );
}

#[test]
fn test_cleanup_expired_offsets() {
    let mut ctx = Context::with(OffsetStoreConfig {
        offsets_retention_ms: 60_000,
        ..Default::default()
    });
    group_with_member(&mut ctx, "group-id", &["firstTopic"], GroupState::Stable);
    let m = MemberRef::new("member", 1);
    let results = ctx.store.commit(
        "group-id",
        &m,
        None,
        &[
            PartitionOffset::new("firstTopic", 0, 100),
            PartitionOffset::new("secondTopic", 0, 100),
        ],
    );
    assert!(results.is_ok());
    ctx.clock.advance(500);
    ctx.store
        .commit(
            "group-id",
            &m,
            None,
            &[PartitionOffset::new("secondTopic", 1, 100)],
        )
        .unwrap();
    let all = [
        tp("firstTopic", 0),
        tp("secondTopic", 0),
        tp("secondTopic", 1),
    ];
    // Nothing expired yet.
    ctx.clock.set(T0 + 59_999);
    assert_eq!(ctx.store.expire_offsets().unwrap(), 0);
    // secondTopic-0 expires at t + 1 min; the subscribed topic never does.
    ctx.clock.set(T0 + 60_000);
    assert_eq!(ctx.store.expire_offsets().unwrap(), 1);
    assert_eq!(
        ctx.fetch("group-id", &all, false),
        [Ok(100), Ok(-1), Ok(100)]
    );
    ctx.clock.set(T0 + 60_500);
    assert_eq!(ctx.store.expire_offsets().unwrap(), 1);
    assert_eq!(
        ctx.fetch("group-id", &all, false),
        [Ok(100), Ok(-1), Ok(-1)]
    );
    ctx.clock.set(T0 + 10 * 60_000);
    assert_eq!(
        ctx.store.expire_offsets().unwrap(),
        0,
        "the subscribed topic's offset stays"
    );
    // The group empties: its offsets expire retention after it became Empty, then it goes.
    let now = ctx.clock.now_ms();
    let g = ctx.store.group_mut("group-id").unwrap();
    g.remove("member");
    assert!(g.transition_to(GroupState::PreparingRebalance, now));
    g.init_next_generation(now);
    assert_eq!(g.state, GroupState::Empty);
    ctx.clock.advance(59_999);
    assert_eq!(ctx.store.expire_offsets().unwrap(), 0);
    ctx.clock.advance(1);
    assert_eq!(ctx.store.expire_offsets().unwrap(), 1);
    assert!(
        ctx.store.group("group-id").is_none(),
        "the empty group is deleted"
    );
    let last = ctx.records().pop().unwrap();
    assert_eq!(
        last,
        (
            OffsetsKey::GroupMetadata {
                group: "group-id".into()
            },
            None
        )
    );
    ctx.reopen();
    assert!(ctx.store.group("group-id").is_none());
    assert_eq!(ctx.fetch("group-id", &all, false), [Ok(-1), Ok(-1), Ok(-1)]);
}

#[test]
fn test_cleanup_expired_offsets_with_pending_transactional_offsets() {
    let mut ctx = Context::with(OffsetStoreConfig {
        offsets_retention_ms: 60_000,
        ..Default::default()
    });
    ctx.commit(
        "foo",
        &MemberRef::none(),
        &[PartitionOffset::new("bar", 0, 100)],
    )
    .unwrap();
    commit_txn(&mut ctx, 10, &[PartitionOffset::new("bar", 1, 101)]);
    ctx.clock.advance(60_000);
    // The committed offset expires; the group stays while its transaction is open.
    assert_eq!(ctx.store.expire_offsets().unwrap(), 1);
    assert!(ctx.store.group("foo").is_some());
    ctx.store.end_transaction(10, 0, true).unwrap();
    assert_eq!(ctx.fetch("foo", &[tp("bar", 1)], true), [Ok(101)]);
    ctx.clock.advance(60_000);
    assert_eq!(ctx.store.expire_offsets().unwrap(), 1);
    assert!(ctx.store.group("foo").is_none());
}

/// `tick` expires at `offsets.retention.check.interval.ms`, not before.
#[test]
fn test_cleanup_runs_on_the_retention_check_interval() {
    let mut ctx = Context::with(OffsetStoreConfig {
        offsets_retention_ms: 1_000,
        ..Default::default()
    });
    ctx.commit(
        "foo",
        &MemberRef::none(),
        &[PartitionOffset::new("bar", 0, 100)],
    )
    .unwrap();
    ctx.clock.advance(599_999);
    assert_eq!(ctx.store.tick().unwrap(), 0);
    ctx.clock.advance(1);
    assert_eq!(ctx.store.tick().unwrap(), 1);
}

#[test]
fn test_generic_group_offset_delete() {
    let mut ctx = Context::new();
    ctx.commit(
        "foo",
        &MemberRef::none(),
        &[PartitionOffset::new("bar", 0, 100)],
    )
    .unwrap();
    assert_eq!(
        ctx.store.delete("foo", &[tp("bar", 0)]).unwrap(),
        vec![(tp("bar", 0), Ok(()))]
    );
    assert_eq!(ctx.fetch("foo", &[tp("bar", 0)], false), [Ok(-1)]);
    assert_eq!(ctx.records().last().unwrap().1, None, "a tombstone");
    assert_eq!(
        ctx.store.delete("missing", &[tp("bar", 0)]),
        Err(Error::GroupIdNotFound)
    );
}

#[test]
fn test_generic_group_offset_delete_with_errors() {
    let mut ctx = Context::new();
    let now = ctx.clock.now_ms();
    let g = ctx.store.get_or_create_group("foo");
    let mut m = member("member", None, &["bar"]);
    m.protocol_type = "connect".into();
    g.add(m);
    assert!(g.transition_to(GroupState::PreparingRebalance, now));
    let r = ctx.store.delete("foo", &[tp("bar", 0)]);
    assert_eq!(r, Err(Error::NonEmptyGroup));
    assert_eq!(r.unwrap_err().kafka_code(), Some(68));
    // A Stable consumer group refuses its subscribed topics, partition by partition.
    let mut ctx = Context::new();
    group_with_member(&mut ctx, "foo", &["bar"], GroupState::Stable);
    ctx.commit(
        "foo",
        &MemberRef::new("member", 1),
        &[
            PartitionOffset::new("bar", 0, 1),
            PartitionOffset::new("baz", 0, 1),
        ],
    )
    .unwrap();
    let results = ctx
        .store
        .delete("foo", &[tp("bar", 0), tp("baz", 0)])
        .unwrap();
    assert_eq!(
        results,
        vec![
            (tp("bar", 0), Err(Error::GroupSubscribedToTopic)),
            (tp("baz", 0), Ok(()))
        ]
    );
}

/// `ClassicGroupTest.testValidateOffsetCommit`, the whole matrix.
#[test]
fn test_validate_offset_commit() {
    let mut ctx = Context::new();
    let now = ctx.clock.now_ms();
    let g = ctx.store.get_or_create_group("group-id");
    // An admin client without any parameters, on an Empty group.
    assert_eq!(g.validate_offset_commit("", None, -1, false), Ok(()));
    g.add(member("member-id", Some("instance-id"), &["t"]));
    assert!(g.transition_to(GroupState::PreparingRebalance, now));
    // No parameters and the group is not empty.
    assert_eq!(
        g.validate_offset_commit("", None, -1, false),
        Err(Error::UnknownMemberId)
    );
    // A transactional commit without parameters is accepted.
    assert_eq!(g.validate_offset_commit("", None, -1, true), Ok(()));
    // The member id does not exist.
    assert_eq!(
        g.validate_offset_commit("unknown", None, -1, false),
        Err(Error::UnknownMemberId)
    );
    // The instance id does not exist.
    assert_eq!(
        g.validate_offset_commit("member-id", Some("unknown"), -1, false),
        Err(Error::UnknownMemberId)
    );
    // The generation is not the group's.
    assert_eq!(
        g.validate_offset_commit("member-id", Some("instance-id"), 1, false),
        Err(Error::IllegalGeneration)
    );
    // PreparingRebalance, current generation: accepted.
    assert_eq!(
        g.validate_offset_commit("member-id", Some("instance-id"), 0, false),
        Ok(())
    );
    g.init_next_generation(now);
    assert_eq!(g.state, GroupState::CompletingRebalance);
    assert_eq!(
        g.validate_offset_commit("member-id", Some("instance-id"), 1, false),
        Err(Error::RebalanceInProgress)
    );
    assert_eq!(
        g.validate_offset_commit("member-id", Some("instance-id"), 1, true),
        Ok(())
    );
    assert!(g.transition_to(GroupState::Stable, now));
    assert_eq!(
        g.validate_offset_commit("member-id", Some("instance-id"), 1, false),
        Ok(())
    );
    assert_eq!(
        g.validate_offset_commit("member-id", None, 1, false),
        Ok(())
    );
    // Another member claiming the instance id is fenced.
    assert_eq!(
        g.validate_offset_commit("other-id", Some("instance-id"), 1, false),
        Err(Error::FencedInstanceId)
    );
    assert!(g.transition_to(GroupState::Dead, now));
    assert_eq!(
        g.validate_offset_commit("member-id", Some("instance-id"), 1, false),
        Err(Error::CoordinatorNotAvailable)
    );
}

/// A record type partlog does not load (3+: KIP-848 groups) is skipped on open; a damaged
/// record of a known type stops the open with `CorruptRecord`, naming the log and offset.
#[test]
fn unknown_record_types_are_skipped_and_damaged_ones_refused() {
    let mut ctx = Context::new();
    ctx.commit(
        "foo",
        &MemberRef::none(),
        &[PartitionOffset::new("bar", 0, 7)],
    )
    .unwrap();
    let now = ctx.clock.now_ms();
    ctx.log
        .append(&[partlog::NewRecord::new(
            now,
            Some(&[0, 3, 0, 1, b'x']),
            Some(&[0, 0]),
        )])
        .unwrap();
    ctx.reopen();
    assert_eq!(ctx.fetch("foo", &[tp("bar", 0)], false), [Ok(7)]);
    let key = OffsetsKey::OffsetCommit {
        group: "foo".into(),
        topic: "bar".into(),
        partition: 1,
    }
    .encode()
    .unwrap();
    ctx.log
        .append(&[partlog::NewRecord::new(now, Some(&key), Some(&[0, 3, 0]))])
        .unwrap();
    ctx.log.close().unwrap();
    let log = open_log(ctx.log.dir(), &ctx.clock);
    match OffsetStore::open(
        Arc::clone(&log),
        OffsetStoreConfig::default(),
        ctx.clock.clone(),
    ) {
        Err(Error::CorruptRecord {
            offset: 2,
            log: name,
            ..
        }) => assert!(name.contains(ctx.log.dir().to_str().unwrap())),
        other => panic!("expected CorruptRecord at offset 2, got {other:?}"),
    }
}

/// Issue 34's fetch row: the offsets are hashed for the fetch, yet `fetch_all` and the
/// expiry still list and tombstone them ordered by topic and partition, before and after a
/// reopen.
#[test]
fn fetch_all_and_expiry_keep_partition_order_with_hashed_offsets() {
    let mut ctx = Context::with(OffsetStoreConfig {
        offsets_retention_ms: 60_000,
        ..OffsetStoreConfig::default()
    });
    // Distinct partitions (13 is prime to 60), in an order neither sorted nor reversed.
    let offsets: Vec<PartitionOffset> = (0..60)
        .map(|i| {
            PartitionOffset::new(
                format!("topic-{}", (i * 7) % 5),
                (i * 13) % 60,
                i64::from(i),
            )
        })
        .collect();
    ctx.commit("simple", &MemberRef::none(), &offsets).unwrap();
    let mut expected: Vec<TopicPartition> = offsets.iter().map(|p| p.partition.clone()).collect();
    expected.sort();
    for reopened in [false, true] {
        if reopened {
            ctx.reopen();
        }
        let listed: Vec<TopicPartition> = ctx
            .store
            .fetch_all("simple", false)
            .unwrap()
            .into_iter()
            .map(|(tp, r)| {
                r.unwrap();
                tp
            })
            .collect();
        assert_eq!(listed, expected, "reopened: {reopened}");
    }
    let before = ctx.records().len();
    ctx.clock.advance(60_000);
    assert_eq!(ctx.store.expire_offsets().unwrap(), expected.len());
    let tombstones: Vec<TopicPartition> = ctx.records()[before..]
        .iter()
        .filter_map(|(key, value)| match key {
            OffsetsKey::OffsetCommit {
                topic, partition, ..
            } if value.is_none() => Some(tp(topic, *partition)),
            _ => None,
        })
        .collect();
    assert_eq!(tombstones, expected);
}
