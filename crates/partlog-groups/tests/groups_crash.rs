//! Crash safety of the group layer on the engine (SimStorage): a crash before each storage
//! operation of a consumer's `commit_sync`, and of a group's leader `sync` (the group record),
//! in turn. After a reopen the store returns the last acknowledged commit or a later one,
//! never an older one; a group whose sync was acknowledged comes back with its generation,
//! protocol, leader and the member's assignment.

#[path = "../../../tests/common/crash_points.rs"]
mod crash_points;

use std::sync::Arc;
use std::time::Duration;

use partlog::LogConfig;
use partlog::unstable::sim::FaultRule;
use partlog::unstable::{Clock, ManualClock, SimStorage, Storage};
use partlog_engine::engine::{Engine, EngineConfig, TopicConfig};
use partlog_groups::assignor::TopicPartition;
use partlog_groups::consumer::{Consumer, ConsumerConfig};
use partlog_groups::group::classic::GroupState;
use partlog_groups::group::coordinator::{JoinGroupRequest, SyncGroupRequest};
use partlog_groups::router::{GroupRouter, GroupRouterConfig};

const ROOT: &str = "/engine";
const T0: i64 = 1_700_000_000_000;

fn config(sim: &SimStorage, clock: &Arc<ManualClock>) -> EngineConfig {
    let mut config = EngineConfig::default();
    config.storage = Arc::new(sim.clone()) as Arc<dyn Storage>;
    config.clock = Arc::clone(clock) as Arc<dyn Clock>;
    config.log_config = Arc::new(LogConfig::builder_for_tests);
    config.worker_threads = 2;
    config
}

fn open(sim: &SimStorage, clock: &Arc<ManualClock>) -> (Arc<Engine>, Arc<GroupRouter>) {
    let engine = Arc::new(Engine::open(ROOT, config(sim, clock)).unwrap());
    let mut groups = GroupRouterConfig::default();
    groups.group.initial_rebalance_delay_ms = 0;
    groups.tick_interval_ms = 3_600_000;
    let router = GroupRouter::open(&engine, groups).unwrap();
    (engine, router)
}

fn tp() -> TopicPartition {
    TopicPartition::new("t", 0)
}

/// A stable consumer of `t` in group `g` that has committed offset 1.
fn prepare(
    sim: &SimStorage,
    clock: &Arc<ManualClock>,
) -> (Arc<Engine>, Arc<GroupRouter>, Consumer) {
    let (engine, router) = open(sim, clock);
    engine.create_topic("t", 1, TopicConfig::new()).unwrap();
    let mut consumer_config = ConsumerConfig::with_group("g");
    consumer_config.enable_auto_commit = false;
    let mut consumer = Consumer::new(&router, consumer_config).unwrap();
    consumer.subscribe(&["t"], ()).unwrap();
    for _ in 0..5 {
        router.tick().unwrap();
        consumer.poll(Duration::ZERO).unwrap();
    }
    assert_eq!(consumer.assignment(), [tp()]);
    consumer.commit_sync(Some(&[(tp(), 1)])).unwrap();
    (engine, router, consumer)
}

fn committed_after_reopen(sim: &SimStorage, clock: &Arc<ManualClock>, context: &str) -> i64 {
    let (_engine, router) = open(sim, clock);
    router
        .with_group("g", |s| {
            let mut fetched = s.store().fetch("g", &[tp()], true)?;
            fetched.remove(0).1.map(|f| f.offset)
        })
        .unwrap_or_else(|e| panic!("{context}: fetch after reopen: {e}"))
}

#[test]
fn groups_crash_commit_sync_never_loses_an_acknowledged_commit() {
    let dry = SimStorage::new(7);
    let clock = Arc::new(ManualClock::new(T0));
    let (engine, router, mut consumer) = prepare(&dry, &clock);
    let before = dry.event_count();
    consumer.commit_sync(Some(&[(tp(), 2)])).unwrap();
    let points = crash_points::crash_points(&dry.events_since(before));
    drop((consumer, router, engine));
    assert!(!points.is_empty(), "commit_sync does no storage operation");

    let (mut kept, mut lost_unacknowledged) = (0, 0);
    for (op, nth) in points {
        for seed in 0..2 {
            let context = format!("crash before {op:?} #{nth} of commit_sync, seed {seed}");
            let sim = SimStorage::new(seed * 1000 + nth);
            let clock = Arc::new(ManualClock::new(T0));
            let (engine, router, mut consumer) = prepare(&sim, &clock);
            sim.inject(FaultRule::crash(op, nth));
            let acknowledged = consumer.commit_sync(Some(&[(tp(), 2)])).is_ok();
            drop((consumer, router, engine));
            sim.clear_faults();
            match committed_after_reopen(&sim, &clock, &context) {
                2 => kept += 1,
                1 if !acknowledged => lost_unacknowledged += 1,
                other => panic!("{context}: acknowledged {acknowledged}, reopened at {other}"),
            }
        }
    }
    assert!(
        kept > 0 && lost_unacknowledged > 0,
        "{kept} kept, {lost_unacknowledged} lost"
    );
}

/// Joins member `c` to group `g` by hand and returns its id; the leader's sync is next.
fn joined(router: &GroupRouter) -> String {
    let request = JoinGroupRequest::new("g", "consumer", vec![("range".into(), vec![0, 1])]);
    let pending = router.with_group("g", |s| Ok(s.join(request))).unwrap();
    router.tick().unwrap();
    let response = pending.try_take().expect("the join completes on the tick");
    assert_eq!((response.error, response.generation), (None, 1));
    response.member_id
}

fn sync(router: &GroupRouter, member: &str) -> bool {
    let request = SyncGroupRequest {
        group_id: "g".into(),
        member_id: member.to_owned(),
        instance_id: None,
        generation: 1,
        protocol_type: Some("consumer".into()),
        protocol: Some("range".into()),
        assignments: vec![(member.to_owned(), vec![9, 9])],
    };
    let pending = router.with_group("g", |s| Ok(s.sync(request))).unwrap();
    pending.try_take().is_some_and(|r| r.error.is_none())
}

#[test]
fn groups_crash_sync_never_loses_an_acknowledged_group_record() {
    let dry = SimStorage::new(7);
    let clock = Arc::new(ManualClock::new(T0));
    let (engine, router) = open(&dry, &clock);
    let member = joined(&router);
    let before = dry.event_count();
    assert!(sync(&router, &member));
    let points = crash_points::crash_points(&dry.events_since(before));
    drop((router, engine));
    assert!(!points.is_empty(), "sync does no storage operation");
    // Without a crash the record is there after a reopen.
    let (_engine, router) = open(&dry, &clock);
    let group = router.with_group("g", |s| Ok(s.describe("g"))).unwrap();
    assert_eq!((group.generation, group.state), (1, GroupState::Stable));
    drop(router);

    let (mut kept, mut lost_unacknowledged) = (0, 0);
    for (op, nth) in points {
        for seed in 0..2 {
            let context = format!("crash before {op:?} #{nth} of sync, seed {seed}");
            let sim = SimStorage::new(seed * 1000 + nth);
            let clock = Arc::new(ManualClock::new(T0));
            let (engine, router) = open(&sim, &clock);
            let member = joined(&router);
            sim.inject(FaultRule::crash(op, nth));
            let acknowledged = sync(&router, &member);
            drop((router, engine));
            sim.clear_faults();
            let (_engine, router) = open(&sim, &clock);
            let group = router
                .with_group("g", |s| Ok(s.describe("g")))
                .unwrap_or_else(|e| panic!("{context}: reopen: {e}"));
            if group.generation == 1 {
                assert_eq!(group.state, GroupState::Stable, "{context}");
                assert_eq!(group.protocol.as_deref(), Some("range"), "{context}");
                assert_eq!(group.leader.as_deref(), Some(member.as_str()), "{context}");
                assert_eq!(group.members.len(), 1, "{context}");
                assert_eq!(group.members[0].assignment, [9, 9], "{context}");
                kept += 1;
            } else {
                assert!(
                    !acknowledged,
                    "{context}: sync acknowledged, then lost: {group:?}"
                );
                lost_unacknowledged += 1;
            }
        }
    }
    // The record's last operation is its fsync: a crash before any of them loses it.
    assert!(
        lost_unacknowledged > 0,
        "{kept} kept, {lost_unacknowledged} lost"
    );
}
