//! The `Consumer` on an engine, on a manual clock: the group driven from `poll` and the
//! router's `tick`, commits, resets, isolation; ports of Kafka's `ConsumerCoordinatorTest`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use partlog::unstable::ManualClock;
use partlog::{BatchBuilder, Compression, NewRecord};
use partlog_engine::engine::{Engine, EngineConfig, TopicConfig};
use partlog_groups::Error;
use partlog_groups::assignor::{
    Assignor, GroupAssignment, MemberSubscription, PartitionsPerTopic, RebalanceProtocol,
    TopicPartition,
};
use partlog_groups::consumer::{
    AutoOffsetReset, Consumer, ConsumerConfig, IsolationLevel, RebalanceListener,
};
use partlog_groups::group::classic::GroupState;
use partlog_groups::router::{GroupRouter, GroupRouterConfig};

const T0: i64 = 1_700_000_000_000;

struct Fixture {
    _dir: tempfile::TempDir,
    clock: Arc<ManualClock>,
    engine: Arc<Engine>,
    router: Arc<GroupRouter>,
}

impl Fixture {
    /// An engine with topic `t` of `partitions` partitions, `records` records in each.
    fn new(partitions: i32, records: usize) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(T0));
        let mut config = EngineConfig::default();
        config.clock = clock.clone();
        config.worker_threads = 1;
        let engine = Arc::new(Engine::open(dir.path(), config).unwrap());
        let mut groups = GroupRouterConfig::default();
        groups.group.initial_rebalance_delay_ms = 0;
        // The pool's task stays out of the way: the tests tick by hand.
        groups.tick_interval_ms = 3_600_000;
        let router = GroupRouter::open(&engine, groups).unwrap();
        let topic = engine
            .create_topic("t", partitions, TopicConfig::new())
            .unwrap();
        for p in 0..partitions {
            let log = topic.partition(p).unwrap();
            for n in 0..records {
                let value = format!("{p}-{n}");
                log.append(&[NewRecord::new(T0, None, Some(value.as_bytes()))])
                    .unwrap();
            }
        }
        Fixture {
            _dir: dir,
            clock,
            engine,
            router,
        }
    }

    fn config(&self) -> ConsumerConfig {
        let mut config = ConsumerConfig::with_group("g");
        config.auto_offset_reset = AutoOffsetReset::Earliest;
        config.enable_auto_commit = false;
        config.heartbeat_interval_ms = HEARTBEAT_MS;
        config
    }

    fn consumer(&self, config: ConsumerConfig) -> Consumer {
        Consumer::new(&self.router, config).unwrap()
    }

    /// Polls every consumer and ticks the coordinator, moving the clock one heartbeat
    /// interval a round while a rebalance is under way, until the group is Stable in every
    /// consumer's generation; returns the records they read meanwhile.
    fn settle(&self, consumers: &mut [&mut Consumer]) -> Vec<Vec<String>> {
        let mut read = vec![Vec::new(); consumers.len()];
        for _ in 0..30 {
            self.router.tick().unwrap();
            for (i, c) in consumers.iter_mut().enumerate() {
                for r in c.poll(Duration::ZERO).unwrap() {
                    read[i].push(String::from_utf8(r.value.unwrap()).unwrap());
                }
            }
            let group = self
                .router
                .with_group("g", |s| {
                    Ok(s.store().group("g").map(|g| (g.state, g.generation)))
                })
                .unwrap();
            let settled = consumers.iter().all(|c| {
                Some((GroupState::Stable, c.group_metadata().unwrap().generation)) == group
            });
            if settled {
                // One more round: a follower's parked sync answer is taken at its next poll.
                for (i, c) in consumers.iter_mut().enumerate() {
                    for r in c.poll(Duration::ZERO).unwrap() {
                        read[i].push(String::from_utf8(r.value.unwrap()).unwrap());
                    }
                }
                return read;
            }
            self.clock.advance(HEARTBEAT_MS);
        }
        panic!("the group did not settle");
    }
}

const HEARTBEAT_MS: i64 = 1_000;

fn tp(p: i32) -> TopicPartition {
    TopicPartition::new("t", p)
}

#[derive(Clone, Default)]
struct Recorded(Arc<Mutex<Vec<String>>>);

impl RebalanceListener for Recorded {
    fn on_partitions_revoked(&mut self, partitions: &[TopicPartition]) {
        self.push("revoked", partitions);
    }
    fn on_partitions_assigned(&mut self, partitions: &[TopicPartition]) {
        self.push("assigned", partitions);
    }
    fn on_partitions_lost(&mut self, partitions: &[TopicPartition]) {
        self.push("lost", partitions);
    }
}

impl Recorded {
    fn push(&self, what: &str, partitions: &[TopicPartition]) {
        let list: Vec<String> = partitions.iter().map(ToString::to_string).collect();
        self.0
            .lock()
            .unwrap()
            .push(format!("{what} {}", list.join(",")));
    }
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut self.0.lock().unwrap())
    }
}

#[test]
fn a_group_of_two_splits_the_partitions_reads_each_record_once_and_resumes_from_commits() {
    let f = Fixture::new(4, 3);
    let mut a = f.consumer(f.config());
    let mut b = f.consumer(f.config());
    a.subscribe(&["t"], ()).unwrap();
    b.subscribe(&["t"], ()).unwrap();
    let read = f.settle(&mut [&mut a, &mut b]);
    assert_eq!(a.assignment().len() + b.assignment().len(), 4);
    assert_eq!(a.assignment().len(), 2);
    let mut all: Vec<String> = read.concat();
    all.sort();
    assert_eq!(all.len(), 12, "{all:?}");
    all.dedup();
    assert_eq!(all.len(), 12);
    a.commit_sync(None).unwrap();
    b.commit_sync(None).unwrap();
    a.close().unwrap();
    b.close().unwrap();
    f.topic_append(0, "0-new");
    let mut c = f.consumer(f.config());
    c.subscribe(&["t"], ()).unwrap();
    let read = f.settle(&mut [&mut c]);
    assert_eq!(read[0], ["0-new"]);
    assert_eq!(c.committed(&[tp(0)]).unwrap()[&tp(0)], Some(3));
}

impl Fixture {
    fn topic_append(&self, p: i32, value: &str) {
        let log = self.engine.topic("t").unwrap().partition(p).unwrap();
        log.append(&[NewRecord::new(T0, None, Some(value.as_bytes()))])
            .unwrap();
    }
}

#[test]
fn test_commit_offset_illegal_generation() {
    let f = Fixture::new(1, 1);
    let mut a = f.consumer(f.config());
    a.subscribe(&["t"], ()).unwrap();
    f.settle(&mut [&mut a]);
    let generation = a.group_metadata().unwrap().generation;
    assert!(generation >= 1);
    f.router
        .with_group("g", |s| {
            s.store_mut().group_mut("g").unwrap().generation += 1;
            Ok(())
        })
        .unwrap();
    match a.commit_sync(None) {
        Err(Error::CommitFailed { cause }) => assert_eq!(*cause, Error::IllegalGeneration),
        other => panic!("{other:?}"),
    }
    // The generation is reset, and the next polls rejoin.
    assert_eq!(a.group_metadata().unwrap().generation, -1);
    f.settle(&mut [&mut a]);
    assert!(a.group_metadata().unwrap().generation > generation);
    a.commit_sync(None).unwrap();
}

#[test]
fn test_commit_offset_rebalance_in_progress() {
    let f = Fixture::new(1, 1);
    let mut a = f.consumer(f.config());
    a.subscribe(&["t"], ()).unwrap();
    f.settle(&mut [&mut a]);
    f.router
        .with_group("g", |s| {
            let now = s.store().now_ms();
            let group = s.store_mut().group_mut("g").unwrap();
            assert!(group.transition_to(GroupState::PreparingRebalance, now));
            assert!(group.transition_to(GroupState::CompletingRebalance, now));
            Ok(())
        })
        .unwrap();
    assert_eq!(a.commit_sync(None), Err(Error::RebalanceInProgress));
}

#[test]
fn test_auto_commit_awaits_interval() {
    let f = Fixture::new(1, 2);
    let mut config = f.config();
    config.enable_auto_commit = true;
    config.auto_commit_interval_ms = 5_000;
    let mut a = f.consumer(config);
    a.subscribe(&["t"], ()).unwrap();
    f.settle(&mut [&mut a]);
    assert_eq!(a.position(&tp(0)).unwrap(), 2);
    // The interval counts from the consumer's creation at T0.
    f.clock.set(T0 + 4_999);
    a.poll(Duration::ZERO).unwrap();
    assert_eq!(a.committed(&[tp(0)]).unwrap()[&tp(0)], None);
    f.clock.advance(1);
    a.poll(Duration::ZERO).unwrap();
    assert_eq!(a.committed(&[tp(0)]).unwrap()[&tp(0)], Some(2));
}

#[test]
fn test_auto_commit_retry_backoff() {
    let f = Fixture::new(1, 2);
    let mut config = f.config();
    config.enable_auto_commit = true;
    config.auto_commit_interval_ms = 5_000;
    config.retry_backoff_ms = 100;
    let mut a = f.consumer(config);
    a.subscribe(&["t"], ()).unwrap();
    f.settle(&mut [&mut a]);
    assert_eq!(a.position(&tp(0)).unwrap(), 2);
    let set_state = |state: GroupState| {
        f.router
            .with_group("g", |s| {
                s.store_mut().group_mut("g").unwrap().state = state;
                Ok(())
            })
            .unwrap();
    };
    // The coordinator is unavailable (15) for the first auto-commit.
    set_state(GroupState::Dead);
    f.clock.set(T0 + 5_000);
    a.poll(Duration::ZERO).unwrap();
    set_state(GroupState::Stable);
    assert_eq!(a.committed(&[tp(0)]).unwrap()[&tp(0)], None);
    // Not retried before retry.backoff.ms, then retried at once (not a whole interval later).
    f.clock.set(T0 + 5_099);
    a.poll(Duration::ZERO).unwrap();
    assert_eq!(a.committed(&[tp(0)]).unwrap()[&tp(0)], None);
    f.clock.set(T0 + 5_100);
    a.poll(Duration::ZERO).unwrap();
    assert_eq!(a.committed(&[tp(0)]).unwrap()[&tp(0)], Some(2));
}

/// A cooperative assignor that moves every partition one member on at each rebalance: what
/// Kafka's test's custom assignor does to an owned partition.
struct Rotating(AtomicUsize);

impl Assignor for Rotating {
    fn name(&self) -> &'static str {
        "rotating"
    }
    fn supported_protocols(&self) -> &'static [RebalanceProtocol] {
        &[RebalanceProtocol::Cooperative]
    }
    fn subscription_user_data(&self, _: &[String]) -> Option<Vec<u8>> {
        None
    }
    fn assign(
        &self,
        partitions: &PartitionsPerTopic,
        members: &[MemberSubscription],
    ) -> Result<GroupAssignment, partlog_groups::Error> {
        let shift = self.0.fetch_add(1, Ordering::SeqCst);
        let mut out: GroupAssignment = members
            .iter()
            .map(|m| (m.member_id.clone(), Vec::new()))
            .collect();
        let ids: Vec<String> = out.keys().cloned().collect();
        for (topic, count) in partitions {
            for p in 0..*count {
                let member = &ids[(p as usize + shift) % ids.len()];
                out.get_mut(member)
                    .unwrap()
                    .push(TopicPartition::new(topic, p));
            }
        }
        Ok(out)
    }
    fn on_assignment(&mut self, _: &[TopicPartition], _: i32) {}
}

#[test]
fn test_perform_assignment_should_validate_cooperative_assignment() {
    let f = Fixture::new(2, 0);
    let rotating =
        || -> Vec<Box<dyn Assignor + Send>> { vec![Box::new(Rotating(AtomicUsize::new(0)))] };
    let mut a = Consumer::with_assignors(&f.router, f.config(), rotating()).unwrap();
    let mut b = Consumer::with_assignors(&f.router, f.config(), rotating()).unwrap();
    assert_eq!(a.rebalance_protocol(), RebalanceProtocol::Cooperative);
    a.subscribe(&["t"], ()).unwrap();
    f.settle(&mut [&mut a]);
    assert_eq!(a.assignment(), [tp(0), tp(1)]);
    b.subscribe(&["t"], ()).unwrap();
    // b's join starts a rebalance; a (the leader) rejoins owning both, and its assignor moves
    // one of them to b directly.
    let mut failed = None;
    for _ in 0..10 {
        f.router.tick().unwrap();
        for c in [&mut a, &mut b] {
            if let Err(error) = c.poll(Duration::ZERO) {
                failed = Some(error);
            }
        }
        if failed.is_some() {
            break;
        }
        f.clock.advance(HEARTBEAT_MS);
    }
    assert!(
        matches!(
            failed,
            Some(Error::InconsistentAssignment {
                assignor: "cooperative",
                ..
            })
        ),
        "{failed:?}"
    );
}

/// Counts the leader's assignments.
struct Counting(Arc<AtomicUsize>);

impl Assignor for Counting {
    fn name(&self) -> &'static str {
        "range"
    }
    fn supported_protocols(&self) -> &'static [RebalanceProtocol] {
        &[RebalanceProtocol::Eager]
    }
    fn subscription_user_data(&self, _: &[String]) -> Option<Vec<u8>> {
        None
    }
    fn assign(
        &self,
        partitions: &PartitionsPerTopic,
        members: &[MemberSubscription],
    ) -> Result<GroupAssignment, partlog_groups::Error> {
        self.0.fetch_add(1, Ordering::SeqCst);
        partlog_groups::assignor::RangeAssignor.assign(partitions, members)
    }
    fn on_assignment(&mut self, _: &[TopicPartition], _: i32) {}
}

#[test]
fn test_on_leader_elected_should_skip_assignment() {
    let f = Fixture::new(2, 0);
    let calls = Arc::new(AtomicUsize::new(0));
    let counting = || -> Vec<Box<dyn Assignor + Send>> { vec![Box::new(Counting(calls.clone()))] };
    let mut config = f.config();
    config.group_instance_id = Some("static-1".into());
    let mut a = Consumer::with_assignors(&f.router, config.clone(), counting()).unwrap();
    a.subscribe(&["t"], ()).unwrap();
    f.settle(&mut [&mut a]);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    // The static leader restarts: it rejoins with its instance id, the group stays Stable,
    // and the coordinator tells it to skip the assignment; it gets its old one back.
    a.close().unwrap();
    let mut restarted = Consumer::with_assignors(&f.router, config, counting()).unwrap();
    restarted.subscribe(&["t"], ()).unwrap();
    f.settle(&mut [&mut restarted]);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(restarted.assignment(), [tp(0), tp(1)]);
}

#[test]
fn max_poll_interval_passed_loses_the_partitions_and_the_next_poll_rejoins() {
    let f = Fixture::new(1, 0);
    let mut config = f.config();
    config.max_poll_interval_ms = 10_000;
    let mut a = f.consumer(config);
    let events = Recorded::default();
    a.subscribe(&["t"], events.clone()).unwrap();
    f.settle(&mut [&mut a]);
    assert_eq!(events.take(), ["assigned t-0"]);
    let before = a.group_metadata().unwrap();
    f.clock.advance(10_001);
    a.poll(Duration::ZERO).unwrap();
    assert_eq!(events.take()[0], "lost t-0");
    f.settle(&mut [&mut a]);
    assert_eq!(events.take(), ["assigned t-0"]);
    let after = a.group_metadata().unwrap();
    assert_ne!(
        after.member_id, before.member_id,
        "it left and joined as a new member"
    );
}

/// A member learns of a rebalance at its next poll, not after `heartbeat.interval.ms`: once
/// the first member holds everything, the clock never moves, yet a second member's join
/// rebalances the group to a new generation with both members in it.
#[test]
fn a_member_learns_of_a_rebalance_at_its_next_poll_without_waiting_for_a_heartbeat() {
    let f = Fixture::new(4, 0);
    let mut config = f.config();
    config.heartbeat_interval_ms = 3_600_000;
    let mut a = f.consumer(config.clone());
    a.subscribe(&["t"], ()).unwrap();
    f.settle(&mut [&mut a]);
    assert_eq!(a.assignment().len(), 4, "a alone holds every partition");
    let first = a.group_metadata().unwrap().generation;
    let mut b = f.consumer(config);
    b.subscribe(&["t"], ()).unwrap();
    let mut rounds = 0;
    while a.assignment().len() + b.assignment().len() != 4 || b.assignment().len() != 2 {
        rounds += 1;
        assert!(
            rounds <= 20,
            "the group did not rebalance without the clock moving"
        );
        b.poll(Duration::ZERO).unwrap();
        a.poll(Duration::ZERO).unwrap();
        f.router.tick().unwrap();
    }
    assert!(a.group_metadata().unwrap().generation > first);
    assert_eq!(
        a.group_metadata().unwrap().generation,
        b.group_metadata().unwrap().generation
    );
}

#[test]
fn eager_revokes_everything_cooperative_only_what_moves() {
    for strategy in ["eager", "cooperative"] {
        let f = Fixture::new(4, 0);
        let assignors = || -> Vec<Box<dyn Assignor + Send>> {
            if strategy == "eager" {
                vec![Box::new(partlog_groups::assignor::RangeAssignor)]
            } else {
                vec![Box::new(
                    partlog_groups::assignor::CooperativeStickyAssignor::new(),
                )]
            }
        };
        let mut a = Consumer::with_assignors(&f.router, f.config(), assignors()).unwrap();
        let events = Recorded::default();
        a.subscribe(&["t"], events.clone()).unwrap();
        f.settle(&mut [&mut a]);
        let mut b = Consumer::with_assignors(&f.router, f.config(), assignors()).unwrap();
        b.subscribe(&["t"], ()).unwrap();
        f.settle(&mut [&mut a, &mut b]);
        let events = events.take();
        assert_eq!(events[0], "assigned t-0,t-1,t-2,t-3", "{strategy}");
        let revoked: Vec<&String> = events.iter().filter(|e| e.starts_with("revoked")).collect();
        assert_eq!(revoked.len(), 1, "{strategy}: {events:?}");
        // EAGER gives everything up; COOPERATIVE only the two partitions that move to b.
        let count = revoked[0].split(',').count();
        assert_eq!(
            count,
            if strategy == "eager" { 4 } else { 2 },
            "{strategy}: {events:?}"
        );
        assert_eq!(a.assignment().len() + b.assignment().len(), 4, "{strategy}");
        assert_eq!(b.assignment().len(), 2, "{strategy}");
    }
}

#[test]
fn auto_offset_reset_none_names_the_partitions_and_an_out_of_range_commit_is_reported() {
    let f = Fixture::new(2, 2);
    let mut config = f.config();
    config.auto_offset_reset = AutoOffsetReset::None;
    let mut a = f.consumer(config);
    a.assign(&[tp(0), tp(1)]).unwrap();
    match a.poll(Duration::ZERO) {
        Err(Error::NoOffsetForPartition { partitions }) => assert_eq!(partitions, [tp(0), tp(1)]),
        other => panic!("{other:?}"),
    }
    a.commit_sync(Some(&[(tp(0), 1), (tp(1), 99)])).unwrap();
    let mut b = f.consumer(f.config());
    b.assign(&[tp(0), tp(1)]).unwrap();
    let read = b.poll(Duration::ZERO).unwrap();
    assert_eq!(read.len(), 1 + 2);
    let resets = b.take_offset_resets();
    assert_eq!(resets.len(), 1);
    assert_eq!(
        (resets[0].partition.clone(), resets[0].from, resets[0].to),
        (tp(1), 99, 0)
    );
}

#[test]
fn read_committed_skips_open_and_aborted_transactions() {
    let f = Fixture::new(1, 1);
    let log = f.engine.topic("t").unwrap().partition(0).unwrap();
    log.register_transaction(7, 0).unwrap();
    let mut batch = BatchBuilder::new(Compression::None)
        .producer(7, 0, 0)
        .transactional(true);
    batch.push(&NewRecord::new(T0, None, Some(b"open")));
    log.append_batch(&batch.build().unwrap()).unwrap();
    let mut config = f.config();
    config.isolation_level = IsolationLevel::ReadCommitted;
    let mut committed = f.consumer(config);
    committed.assign(&[tp(0)]).unwrap();
    let values = |records: Vec<partlog_groups::consumer::ConsumerRecord>| -> Vec<Vec<u8>> {
        records.into_iter().filter_map(|r| r.value).collect()
    };
    assert_eq!(
        values(committed.poll(Duration::ZERO).unwrap()),
        [b"0-0".to_vec()]
    );
    let mut uncommitted = f.consumer(f.config());
    uncommitted.assign(&[tp(0)]).unwrap();
    assert_eq!(uncommitted.poll(Duration::ZERO).unwrap().len(), 2);
    log.abort_transaction(7, 0).unwrap();
    f.topic_append(0, "after");
    assert_eq!(
        values(committed.poll(Duration::ZERO).unwrap()),
        [b"after".to_vec()]
    );
}

mod send_offsets {
    use super::*;
    use partlog::ReadBound;
    use partlog_engine::producer::TopicProducer;
    use partlog_engine::producer::config::TopicProducerConfig;
    use partlog_engine::producer::state::ProducerTransactionState;
    use partlog_groups::consumer::{GroupMetadata, SendOffsetsToTransaction};

    fn producer(f: &Fixture) -> TopicProducer {
        f.engine.create_topic("out", 1, TopicConfig::new()).unwrap();
        let producer =
            TopicProducer::new(&f.engine, TopicProducerConfig::transactional("app")).unwrap();
        producer.init_transactions().unwrap();
        producer
    }

    fn read_committed(f: &Fixture) -> Consumer {
        let mut config = f.config();
        config.isolation_level = IsolationLevel::ReadCommitted;
        let mut consumer = f.consumer(config);
        consumer.subscribe(&["t"], ()).unwrap();
        f.settle(&mut [&mut consumer]);
        consumer
    }

    #[test]
    fn the_offsets_commit_with_the_transaction_and_are_dropped_with_its_abort() {
        let f = Fixture::new(1, 3);
        let producer = producer(&f);
        let mut consumer = read_committed(&f);
        let offsets = [(tp(0), consumer.position(&tp(0)).unwrap())];
        assert_eq!(offsets[0].1, 3);
        let group = consumer.group_metadata().unwrap();

        producer.begin_transaction().unwrap();
        producer
            .send("out", &NewRecord::new(T0, None, Some(b"x")))
            .unwrap();
        producer
            .send_offsets_to_transaction(&f.router, &[(tp(0), 2)], &group)
            .unwrap();
        assert_eq!(
            consumer.committed(&[tp(0)]),
            Err(Error::UnstableOffsetCommit)
        );
        producer.abort_transaction().unwrap();
        assert_eq!(consumer.committed(&[tp(0)]).unwrap()[&tp(0)], None);

        producer.begin_transaction().unwrap();
        producer
            .send("out", &NewRecord::new(T0, None, Some(b"y")))
            .unwrap();
        producer
            .send_offsets_to_transaction(&f.router, &offsets, &group)
            .unwrap();
        producer.commit_transaction().unwrap();
        assert_eq!(consumer.committed(&[tp(0)]).unwrap()[&tp(0)], Some(3));
        let out = f.engine.topic("out").unwrap().partition(0).unwrap();
        let values: Vec<Option<Vec<u8>>> = out
            .committed_records(0, ReadBound::LogEnd)
            .map(|r| r.unwrap().value)
            .collect();
        assert_eq!(values, [Some(b"y".to_vec())]);
    }

    #[test]
    fn a_stale_generation_is_fenced_and_the_transaction_becomes_abortable() {
        let f = Fixture::new(1, 1);
        let producer = producer(&f);
        let consumer = read_committed(&f);
        let current = consumer.group_metadata().unwrap();
        for (group, expected) in [
            (
                GroupMetadata {
                    generation: current.generation - 1,
                    ..current.clone()
                },
                Error::IllegalGeneration,
            ),
            (
                GroupMetadata {
                    member_id: "zombie".into(),
                    ..current.clone()
                },
                Error::UnknownMemberId,
            ),
        ] {
            producer.begin_transaction().unwrap();
            assert_eq!(
                producer.send_offsets_to_transaction(&f.router, &[(tp(0), 1)], &group),
                Err(expected)
            );
            assert_eq!(
                producer.transaction_state(),
                ProducerTransactionState::AbortableError
            );
            assert!(producer.commit_transaction().is_err());
            producer.abort_transaction().unwrap();
        }
        assert_eq!(consumer.committed(&[tp(0)]).unwrap()[&tp(0)], None);
    }
}
