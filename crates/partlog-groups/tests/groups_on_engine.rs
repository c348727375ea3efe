//! The group layer wired on the engine: `__consumer_offsets` partitions opened through it,
//! shards opened lazily with replay, `add_offsets` resolving the offsets partition, and the
//! transaction coordinator's markers reaching the offset store.

use std::sync::Arc;

use partlog::unstable::ManualClock;
use partlog_engine::engine::{Engine, EngineConfig};
use partlog_engine::txn::TransactionResult;
use partlog_groups::Error;
use partlog_groups::assignor::TopicPartition;
use partlog_groups::group::coordinator::JoinGroupRequest;
use partlog_groups::offsets::store::{MemberRef, PartitionOffset};
use partlog_groups::router::{GroupRouter, GroupRouterConfig};

const T0: i64 = 1_700_000_000_000;

fn open(dir: &std::path::Path, clock: &Arc<ManualClock>) -> (Arc<Engine>, Arc<GroupRouter>) {
    let mut config = EngineConfig::default();
    config.clock = clock.clone();
    config.worker_threads = 1;
    let engine = Arc::new(Engine::open(dir, config).unwrap());
    let router = GroupRouter::open(&engine, GroupRouterConfig::default()).unwrap();
    (engine, router)
}

fn fetch(
    router: &GroupRouter,
    group: &str,
    tp: &TopicPartition,
    stable: bool,
) -> Result<i64, Error> {
    router.with_group(group, |shard| {
        let mut results = shard
            .store()
            .fetch(group, std::slice::from_ref(tp), stable)?;
        results.remove(0).1.map(|f| f.offset)
    })
}

/// A txn id, its producer id and epoch after `init_producer_id`, and its open transaction with
/// `group`'s offsets partition added.
fn begin_with_offsets(engine: &Engine, txn_id: &str, group: &str) -> (i64, i16) {
    let coordinator = engine.coordinator();
    let ids = coordinator
        .init_producer_id(Some(txn_id), 60_000, None)
        .unwrap();
    coordinator
        .add_offsets(txn_id, ids.producer_id, ids.epoch, group)
        .unwrap();
    (ids.producer_id, ids.epoch)
}

#[test]
fn groups_live_in_their_offsets_partition_opened_lazily_and_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let tp = TopicPartition::new("t", 0);
    {
        let (engine, router) = open(dir.path(), &clock);
        assert_eq!(router.partition_for("g1"), 42);
        assert_eq!(router.partition_for("my-group"), 12);
        let before = engine.open_partition_count();
        router
            .with_group("g1", |shard| {
                shard.store_mut().commit(
                    "g1",
                    &MemberRef::none(),
                    None,
                    &[PartitionOffset::new("t", 0, 7)],
                )
            })
            .unwrap();
        assert_eq!(engine.open_partition_count(), before + 1);
        assert!(dir.path().join("__consumer_offsets-42").is_dir());
        router.close();
        engine.close().unwrap();
    }
    let (engine, router) = open(dir.path(), &clock);
    assert!(engine.open_report().unlisted_partition_dirs.is_empty());
    assert_eq!(fetch(&router, "g1", &tp, false).unwrap(), 7);
}

#[test]
fn transactional_offsets_take_effect_on_the_coordinators_commit_marker() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let (engine, router) = open(dir.path(), &clock);
    let tp = TopicPartition::new("in", 0);
    let (pid, epoch) = begin_with_offsets(&engine, "app-1", "g1");
    router
        .with_group("g1", |shard| {
            shard.store_mut().commit_transactional(
                "g1",
                &MemberRef::none(),
                pid,
                epoch,
                &[PartitionOffset::new("in", 0, 11)],
            )
        })
        .unwrap();
    assert_eq!(
        fetch(&router, "g1", &tp, true),
        Err(Error::UnstableOffsetCommit)
    );
    assert_eq!(fetch(&router, "g1", &tp, false).unwrap(), -1);
    engine
        .coordinator()
        .end_txn("app-1", pid, epoch, TransactionResult::Commit)
        .unwrap();
    assert_eq!(fetch(&router, "g1", &tp, true).unwrap(), 11);
    router.close();
    engine.close().unwrap();
    drop((router, engine));
    let (_engine, router) = open(dir.path(), &clock);
    assert_eq!(fetch(&router, "g1", &tp, true).unwrap(), 11);
}

#[test]
fn transactional_offsets_are_dropped_on_the_coordinators_abort_marker() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let (engine, router) = open(dir.path(), &clock);
    let tp = TopicPartition::new("in", 0);
    router
        .with_group("g1", |shard| {
            shard.store_mut().commit(
                "g1",
                &MemberRef::none(),
                None,
                &[PartitionOffset::new("in", 0, 5)],
            )
        })
        .unwrap();
    let (pid, epoch) = begin_with_offsets(&engine, "app-1", "g1");
    router
        .with_group("g1", |shard| {
            shard.store_mut().commit_transactional(
                "g1",
                &MemberRef::none(),
                pid,
                epoch,
                &[PartitionOffset::new("in", 0, 9)],
            )
        })
        .unwrap();
    engine
        .coordinator()
        .end_txn("app-1", pid, epoch, TransactionResult::Abort)
        .unwrap();
    assert_eq!(fetch(&router, "g1", &tp, true).unwrap(), 5);
}

#[test]
fn the_shards_timers_complete_a_join_on_the_engines_clock() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let (_engine, router) = open(dir.path(), &clock);
    let request = JoinGroupRequest::new("g1", "consumer", vec![("range".into(), vec![1])]);
    let joined = router
        .with_group("g1", |shard| Ok(shard.join(request)))
        .unwrap();
    router.tick().unwrap();
    assert!(
        !joined.is_completed(),
        "the initial rebalance delay holds the join"
    );
    clock.advance(3_000);
    router.tick().unwrap();
    let response = joined.try_take().expect("the delay passed");
    assert_eq!(response.error, None);
    assert_eq!(response.generation, 1);
}
