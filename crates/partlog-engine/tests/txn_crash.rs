//! Crash atomicity through the engine (issue 33, "On-disk and interop proof"): a transaction
//! over 3 topics × 2 partitions, committed by a transactional `TopicProducer`, is crashed
//! before each storage operation of `commit_transaction` in turn (SimStorage). After reopen
//! and the coordinator's recovery, a `read_committed` read of all six partitions shows all of
//! the transaction or none of it, and no transaction hangs open: a crash after `PrepareCommit`
//! is completed by recovery, one before it is aborted by the timeout.

#[path = "../../../tests/common/crash_points.rs"]
mod crash_points;
#[path = "../../../tests/common/fenced.rs"]
mod fenced_storage;

use std::sync::Arc;

use partlog::unstable::sim::{FaultOp, FaultRule};
use partlog::unstable::{Clock, CrashConfig, ManualClock, SimStorage, Storage};
use partlog::{Error, LogConfig, NewRecord, ReadBound};
use partlog_engine::engine::{Engine, EngineConfig, TopicConfig};
use partlog_engine::producer::TopicProducer;
use partlog_engine::producer::config::TopicProducerConfig;
use partlog_engine::txn::state::TransactionState;

const ROOT: &str = "/engine";
const T0: i64 = 1_700_000_000_000;
const TOPICS: [&str; 3] = ["accounts", "ledger", "audit"];
const TIMEOUT_MS: i32 = 10_000;

fn config(sim: &SimStorage, clock: &Arc<ManualClock>) -> EngineConfig {
    let mut config = EngineConfig::default();
    config.storage = Arc::new(sim.clone()) as Arc<dyn Storage>;
    config.clock = Arc::clone(clock) as Arc<dyn Clock>;
    config.log_config = Arc::new(LogConfig::builder_for_tests);
    config.worker_threads = 2;
    config
}

/// Creates the topics and opens a transaction with one record on each of the six partitions;
/// returns the engine and the producer, ready to commit.
fn prepare(sim: &SimStorage, clock: &Arc<ManualClock>) -> (Engine, TopicProducer) {
    prepare_on(config(sim, clock))
}

/// [`prepare`] on an engine of `config`.
fn prepare_on(config: EngineConfig) -> (Engine, TopicProducer) {
    let engine = Engine::open(ROOT, config).unwrap();
    for topic in TOPICS {
        engine.create_topic(topic, 2, TopicConfig::new()).unwrap();
    }
    let mut producer_config = TopicProducerConfig::transactional("mover");
    producer_config.transaction_timeout_ms = TIMEOUT_MS;
    producer_config.producer.linger_ms = 60_000;
    let producer = TopicProducer::new(&engine, producer_config).unwrap();
    producer.init_transactions().unwrap();
    producer.begin_transaction().unwrap();
    for topic in TOPICS {
        for partition in 0..2 {
            let value = format!("{topic}-{partition}");
            producer
                .send_to(
                    topic,
                    Some(partition),
                    &NewRecord::new(T0, None, Some(value.as_bytes())),
                )
                .unwrap();
        }
    }
    (engine, producer)
}

/// What a `read_committed` reader sees on each partition, and whether any transaction is
/// still open there.
fn committed_view(engine: &Engine) -> (Vec<Vec<String>>, bool) {
    let mut view = Vec::new();
    let mut open = false;
    for topic in TOPICS {
        let topic = engine.topic(topic).unwrap();
        for partition in 0..2 {
            let log = topic.partition(partition).unwrap();
            open |= log.first_unstable_offset().is_some();
            view.push(
                log.committed_records(0, ReadBound::LogEnd)
                    .map(|r| String::from_utf8(r.unwrap().value.unwrap()).unwrap())
                    .collect(),
            );
        }
    }
    (view, open)
}

fn run_commit(sim: &SimStorage, clock: &Arc<ManualClock>) -> Result<(), Error> {
    let (_engine, producer) = prepare(sim, clock);
    producer.commit_transaction()
}

#[test]
fn txn_crash_commit_across_three_topics_is_all_or_nothing_at_every_storage_operation() {
    // A dry run counts the storage operations of the commit alone.
    let dry = SimStorage::new(7);
    let clock = Arc::new(ManualClock::new(T0));
    let (engine, producer) = prepare(&dry, &clock);
    let before = dry.event_count();
    producer.commit_transaction().unwrap();
    let points = crash_points::crash_points(&dry.events_since(before));
    let (view, open) = committed_view(&engine);
    assert!(view.iter().all(|records| records.len() == 1) && !open);
    drop((producer, engine));
    assert!(
        points.len() >= 20,
        "too few crash points in a commit: {points:?}"
    );

    let (mut completed, mut aborted) = (0, 0);
    for (op, nth) in points {
        for seed in 0..2 {
            let context = format!("crash before {op:?} #{nth} of the commit, seed {seed}");
            let sim = SimStorage::new(seed * 1000 + nth);
            let clock = Arc::new(ManualClock::new(T0));
            let (engine, producer) = prepare(&sim, &clock);
            // Ordinals count from the injection on: the commit's operations alone.
            sim.inject(FaultRule::crash(op, nth));
            let committed = producer.commit_transaction();
            drop((producer, engine));
            sim.clear_faults();

            let engine = Engine::open(ROOT, config(&sim, &clock))
                .unwrap_or_else(|e| panic!("{context}: reopen: {e}"));
            // The timeout aborts what recovery did not decide.
            clock.advance(i64::from(TIMEOUT_MS) + 1);
            let report = engine.coordinator().tick(clock.now_ms());
            assert!(report.failed.is_empty(), "{context}: {:?}", report.failed);
            let (view, open) = committed_view(&engine);
            assert!(!open, "{context}: a transaction hangs open");
            let shown = view.iter().filter(|records| !records.is_empty()).count();
            match shown {
                6 => completed += 1,
                0 => {
                    assert!(
                        committed.is_err(),
                        "{context}: commit returned Ok, then lost"
                    );
                    aborted += 1;
                }
                _ => panic!("{context}: {shown} of 6 partitions show the transaction: {view:?}"),
            }
            assert!(
                view.iter().all(|records| records.len() <= 1),
                "{context}: {view:?}"
            );
        }
    }
    println!("crash points: {completed} runs completed the commit, {aborted} aborted it");
    assert!(
        completed > 0 && aborted > 0,
        "{completed} completed, {aborted} aborted"
    );
}

#[test]
fn txn_crash_an_uncrashed_commit_survives_a_clean_reopen() {
    let sim = SimStorage::new(1);
    let clock = Arc::new(ManualClock::new(T0));
    run_commit(&sim, &clock).unwrap();
    let engine = Engine::open(ROOT, config(&sim, &clock)).unwrap();
    let (view, open) = committed_view(&engine);
    assert!(!open);
    assert!(view.iter().all(|records| records.len() == 1), "{view:?}");
}

/// `commit_transaction` returns once the markers are durable; `CompleteCommit` is appended but
/// not waited for. A crash right after the call returns (only what was synced survives) may lose
/// it: recovery finds `PrepareCommit`, writes the markers again (they end nothing) and
/// completes, so the commit the caller was told of stays, and the id goes on.
#[test]
fn txn_crash_right_after_a_commit_returns_keeps_the_commit() {
    let sim = SimStorage::new(3);
    let clock = Arc::new(ManualClock::new(T0));
    // The process that crashes runs on fenced storage: nothing it does after the crash reaches
    // the image the reopen recovers.
    let mut crashing = config(&sim, &clock);
    crashing.storage = Arc::new(fenced_storage::Fenced::new(
        Arc::new(sim.clone()),
        sim.clone(),
    ));
    let (engine, producer) = prepare_on(crashing);
    producer.commit_transaction().unwrap();
    sim.crash_with(&CrashConfig::lose_unsynced());
    drop((producer, engine));

    let engine = Engine::open(ROOT, config(&sim, &clock)).unwrap();
    // The crash lost the unawaited CompleteCommit: recovery completed the commit.
    assert_eq!(engine.open_report().coordinator.completed, ["mover"]);
    let (view, open) = committed_view(&engine);
    assert!(!open, "{view:?}");
    assert!(view.iter().all(|records| records.len() == 1), "{view:?}");
    let mut producer_config = TopicProducerConfig::transactional("mover");
    producer_config.transaction_timeout_ms = TIMEOUT_MS;
    let producer = TopicProducer::new(&engine, producer_config).unwrap();
    producer.init_transactions().unwrap();
    producer.begin_transaction().unwrap();
    producer
        .send_to(TOPICS[0], Some(0), &NewRecord::new(T0, None, Some(b"next")))
        .unwrap();
    producer.commit_transaction().unwrap();
    let (view, open) = committed_view(&engine);
    assert!(!open);
    assert_eq!(view[0], ["accounts-0", "next"]);
}

/// Issue 33, the commit-latency row: the commit adds the six partitions in one batched
/// `Ongoing` write, durable before any of their data is written. A crash just before the first
/// data write to one partition (others may have been written, not synced) leaves that
/// `Ongoing`, naming all six: after reopen the timeout aborts it, no partition shows the
/// transaction and none holds one open.
#[test]
fn txn_crash_between_the_batched_ongoing_write_and_the_data_leaves_nothing_hanging() {
    for seed in 0..4 {
        let context = format!("seed {seed}");
        let sim = SimStorage::new(seed + 40);
        let clock = Arc::new(ManualClock::new(T0));
        let (engine, producer) = prepare(&sim, &clock);
        sim.inject(
            FaultRule::crash(FaultOp::Write, 1)
                .on_paths_ending_with("accounts-1/00000000000000000000.log"),
        );
        assert!(producer.commit_transaction().is_err(), "{context}");
        drop((producer, engine));
        sim.clear_faults();

        let engine = Engine::open(ROOT, config(&sim, &clock))
            .unwrap_or_else(|e| panic!("{context}: reopen: {e}"));
        let metadata = engine.coordinator().transaction_metadata("mover").unwrap();
        assert_eq!(metadata.state, TransactionState::Ongoing, "{context}");
        assert_eq!(
            metadata.partitions.len(),
            6,
            "{context}: one write names all six"
        );
        clock.advance(i64::from(TIMEOUT_MS) + 1);
        let report = engine.coordinator().tick(clock.now_ms());
        assert!(report.failed.is_empty(), "{context}: {:?}", report.failed);
        let (view, open) = committed_view(&engine);
        assert!(!open, "{context}: a transaction hangs open");
        assert!(view.iter().all(Vec::is_empty), "{context}: {view:?}");
    }
}
