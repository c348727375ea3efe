//! The engine (issue 33, "Where it lives" and "Bad input"): its directory and lock, topics
//! created, grown, listed and deleted durably, partitions opened at first use with partition
//! verification on, directories it does not list reported and kept, and the coordinator wired
//! to its logs, its timers run by the engine's workers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use partlog::unstable::{Clock, ManualClock, OsStorage, Storage};
use partlog::{BatchBuilder, Compression, Error, LogConfig, NewRecord, ReadBound};
use partlog_engine::engine::partition_metadata::read_partition_metadata;
use partlog_engine::engine::{Engine, EngineConfig, TopicConfig};
use partlog_engine::txn::state::TransactionState;
use partlog_engine::txn::{TopicPartition, TransactionResult};

const T0: i64 = 1_700_000_000_000;

fn config() -> EngineConfig {
    let mut config = EngineConfig::default();
    config.log_config = Arc::new(LogConfig::builder_for_tests);
    config.worker_threads = 2;
    config
}

fn os() -> Arc<dyn Storage> {
    Arc::new(OsStorage::new())
}

fn no_config() -> TopicConfig {
    TopicConfig::new()
}

fn invalid_argument<T: std::fmt::Debug>(result: Result<T, Error>, needle: &str) {
    match result {
        Err(Error::InvalidArgument { why }) => {
            assert!(why.contains(needle), "{why:?} does not mention {needle:?}")
        }
        other => panic!("expected InvalidArgument about {needle:?}, got {other:?}"),
    }
}

#[test]
fn engine_open_creates_its_directory_takes_its_lock_and_writes_no_meta_properties() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("a/b/engine");
    let engine = Engine::open(&dir, config()).unwrap();
    assert!(dir.join("partlog.lock").exists());
    assert!(dir.join("partlog.topics").exists());
    assert!(!dir.join("meta.properties").exists());
    match Engine::open(&dir, config()) {
        Err(Error::Locked { .. }) => {}
        other => panic!("a second engine on the directory: {other:?}"),
    }
    drop(engine);
    Engine::open(&dir, config()).expect("the lock is released with the engine");
}

#[test]
fn engine_refuses_a_kafka_log_directory() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("meta.properties"), "version=1\n").unwrap();
    invalid_argument(Engine::open(root.path(), config()), "meta.properties");
}

#[test]
fn engine_topics_are_created_durably_and_partitions_open_at_first_use() {
    let root = tempfile::tempdir().unwrap();
    let engine = Engine::open(root.path(), config()).unwrap();
    let orders = engine.create_topic("orders", 3, no_config()).unwrap();
    assert_eq!(orders.partitions(), 3);
    assert_eq!(
        engine.open_partition_count(),
        0,
        "nothing opens before its first use"
    );
    for p in 0..3 {
        let metadata = read_partition_metadata(&os(), &root.path().join(format!("orders-{p}")))
            .unwrap()
            .expect("each partition has partition.metadata");
        assert_eq!(metadata.topic_id, orders.topic_id());
    }
    let log = orders.partition(1).unwrap();
    assert!(log.config().transaction_partition_verification_enable);
    assert!(
        engine
            .workers()
            .same_pool(log.config().workers.as_ref().unwrap())
    );
    assert!(Arc::ptr_eq(
        &log,
        &engine.topic("orders").unwrap().partition(1).unwrap()
    ));
    assert_eq!(engine.open_partition_count(), 1);
    log.append(&[NewRecord::new(T0, Some(b"k"), Some(b"v"))])
        .unwrap();

    let grown = engine.add_partitions("orders", 5).unwrap();
    assert_eq!(grown.partitions(), 5);
    grown.partition(4).unwrap();
    engine.close().unwrap();
    drop((orders, grown, log, engine));

    let engine = Engine::open(root.path(), config()).unwrap();
    assert!(engine.open_report().unlisted_partition_dirs.is_empty());
    assert_eq!(engine.topic_names(), ["orders"]);
    let orders = engine.topic("orders").unwrap();
    assert_eq!(orders.partitions(), 5);
    let log = orders.partition(1).unwrap();
    assert_eq!(log.log_end_offset(), 1, "the record survived the reopen");
}

#[test]
fn engine_topic_configs_apply_to_every_partition() {
    let root = tempfile::tempdir().unwrap();
    let engine = Engine::open(root.path(), config()).unwrap();
    let mut overrides = TopicConfig::new();
    overrides.insert("cleanup.policy".into(), "compact".into());
    overrides.insert("segment.bytes".into(), "4096".into());
    let topic = engine.create_topic("state", 2, overrides).unwrap();
    let config = topic.partition(1).unwrap().config().clone();
    assert!(config.cleanup_policy.compacts());
    assert_eq!(config.segment_bytes, 4096);
}

#[test]
fn engine_bad_input_gets_typed_errors_naming_what_is_wrong() {
    let root = tempfile::tempdir().unwrap();
    let engine = Engine::open(root.path(), config()).unwrap();
    for name in ["", ".", "..", "a/b", "caf\u{e9}", &"x".repeat(250)] {
        invalid_argument(
            engine.create_topic(name, 1, no_config()),
            "Topic name is invalid",
        );
    }
    invalid_argument(
        engine.create_topic("__transaction_state", 1, no_config()),
        "internal topic",
    );
    invalid_argument(engine.create_topic("t", 0, no_config()), "at least 1");
    invalid_argument(engine.create_topic("t", -3, no_config()), "at least 1");
    let mut bad = TopicConfig::new();
    bad.insert("segment.bytes".into(), "lots".into());
    match engine.create_topic("t", 1, bad) {
        Err(Error::InvalidConfig { setting, .. }) => assert_eq!(setting, "segment.bytes"),
        other => panic!("a bad value: {other:?}"),
    }
    let mut unknown = TopicConfig::new();
    unknown.insert("no.such.setting".into(), "1".into());
    invalid_argument(engine.create_topic("t", 1, unknown), "no.such.setting");
    assert!(engine.topic_names().is_empty(), "nothing was created");
    assert!(!root.path().join("t-0").exists());

    engine.create_topic("t.x", 2, no_config()).unwrap();
    invalid_argument(engine.create_topic("t.x", 2, no_config()), "already exists");
    invalid_argument(engine.create_topic("t_x", 2, no_config()), "collides");
    invalid_argument(engine.add_partitions("t.x", 1), "only grow");
    invalid_argument(engine.add_partitions("t.x", 2), "only grow");
    invalid_argument(engine.add_partitions("nope", 4), "does not exist");
    invalid_argument(engine.topic("nope"), "does not exist");
    invalid_argument(engine.delete_topic("nope"), "does not exist");
    let topic = engine.topic("t.x").unwrap();
    invalid_argument(topic.partition(2), "has 2 partitions");
    invalid_argument(topic.partition(-1), "has 2 partitions");
}

#[test]
fn engine_reports_unlisted_partition_directories_and_never_deletes_them() {
    let root = tempfile::tempdir().unwrap();
    {
        let engine = Engine::open(root.path(), config()).unwrap();
        engine.create_topic("kept", 1, no_config()).unwrap();
    }
    // A topic the list does not know, and a partition past a listed topic's count.
    for dir in ["stray-0", "kept-1"] {
        std::fs::create_dir(root.path().join(dir)).unwrap();
        std::fs::write(root.path().join(dir).join("00000000000000000000.log"), b"").unwrap();
    }
    let engine = Engine::open(root.path(), config()).unwrap();
    assert_eq!(
        engine.open_report().unlisted_partition_dirs,
        [root.path().join("kept-1"), root.path().join("stray-0")]
    );
    assert!(
        root.path()
            .join("stray-0/00000000000000000000.log")
            .exists()
    );
    assert!(root.path().join("kept-1/00000000000000000000.log").exists());
    // Growing over an unlisted directory is refused, not merged into.
    invalid_argument(engine.add_partitions("kept", 2), "does not list it");
    assert_eq!(engine.topic("kept").unwrap().partitions(), 1);
}

#[test]
fn engine_delete_topic_removes_it_and_its_files_and_the_name_can_be_reused() {
    let root = tempfile::tempdir().unwrap();
    let engine = Engine::open(root.path(), config()).unwrap();
    let old = engine.create_topic("gone", 2, no_config()).unwrap();
    let log = old.partition(0).unwrap();
    log.append(&[NewRecord::new(T0, None, Some(b"v"))]).unwrap();
    engine.delete_topic("gone").unwrap();
    assert!(matches!(
        log.append(&[NewRecord::new(T0, None, Some(b"v"))]),
        Err(Error::Closed)
    ));
    assert!(!root.path().join("gone-0").exists());
    invalid_argument(old.partition(0), "does not exist");
    let again = engine.create_topic("gone", 1, no_config()).unwrap();
    assert_ne!(again.topic_id(), old.topic_id());
    assert_eq!(again.partition(0).unwrap().log_end_offset(), 0);
    drop((log, old, again, engine));
    let engine = Engine::open(root.path(), config()).unwrap();
    assert!(engine.open_report().unlisted_partition_dirs.is_empty());
    assert_eq!(engine.open_report().deleted_dirs.len(), 2);
    for dir in &engine.open_report().deleted_dirs {
        let name = dir.file_name().unwrap().to_str().unwrap();
        assert!(
            name.starts_with("gone-") && name.ends_with("-delete"),
            "{name}"
        );
        assert_eq!(std::fs::read_dir(dir).unwrap().count(), 0);
    }
}

/// A transactional batch of one record from `(pid, epoch)`.
fn txn_batch(pid: i64, epoch: i16, sequence: i32, value: &str) -> partlog::BatchBuilder {
    let mut builder = BatchBuilder::new(Compression::None)
        .producer(pid, epoch, sequence)
        .transactional(true);
    builder.push(&NewRecord::new(T0, None, Some(value.as_bytes())));
    builder
}

#[test]
fn engine_coordinator_commits_across_topics_and_recovers_its_ids_on_reopen() {
    let root = tempfile::tempdir().unwrap();
    let engine = Engine::open(root.path(), config()).unwrap();
    engine.create_topic("a", 2, no_config()).unwrap();
    engine.create_topic("b", 1, no_config()).unwrap();
    let coordinator = engine.coordinator();
    let ids = coordinator
        .init_producer_id(Some("t"), 60_000, None)
        .unwrap();
    let partitions = [TopicPartition::new("a", 1), TopicPartition::new("b", 0)];
    coordinator
        .add_partitions("t", ids.producer_id, ids.epoch, &partitions)
        .unwrap();
    for tp in &partitions {
        let log = engine
            .topic(&tp.topic)
            .unwrap()
            .partition(tp.partition)
            .unwrap();
        log.append_batch(
            &txn_batch(ids.producer_id, ids.epoch, 0, "x")
                .build()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(log.committed_records(0, ReadBound::LogEnd).count(), 0);
    }
    // Partition verification: a partition the transaction did not add refuses its batch.
    let other = engine.topic("a").unwrap().partition(0).unwrap();
    assert!(
        other
            .append_batch(
                &txn_batch(ids.producer_id, ids.epoch, 0, "x")
                    .build()
                    .unwrap()
            )
            .is_err()
    );
    coordinator
        .end_txn("t", ids.producer_id, ids.epoch, TransactionResult::Commit)
        .unwrap();
    for tp in &partitions {
        let log = engine
            .topic(&tp.topic)
            .unwrap()
            .partition(tp.partition)
            .unwrap();
        assert_eq!(log.committed_records(0, ReadBound::LogEnd).count(), 1);
    }
    let pid = ids.producer_id;
    drop(engine);
    let engine = Engine::open(root.path(), config()).unwrap();
    let metadata = engine.coordinator().transaction_metadata("t").unwrap();
    assert_eq!(metadata.state, TransactionState::CompleteCommit);
    assert_eq!(metadata.producer_id, pid);
    assert!(
        engine.producer_ids().generate_producer_id().unwrap() >= 1000,
        "the ids of the first block are never handed out again"
    );
}

#[test]
fn engine_runs_the_coordinator_timers_on_its_workers() {
    timers_abort_a_timed_out_transaction_on_a_pool_of(4);
}

/// On a pool of one thread the timers task holds the only thread while it waits for its
/// markers to be durable: it must lead their syncs, not wait for a flusher task that cannot run
/// (it hung before).
#[test]
fn engine_timers_on_a_one_thread_pool_make_their_markers_durable_themselves() {
    timers_abort_a_timed_out_transaction_on_a_pool_of(1);
}

fn timers_abort_a_timed_out_transaction_on_a_pool_of(threads: usize) {
    let root = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let mut config = config();
    config.worker_threads = threads;
    config.clock = Arc::clone(&clock) as Arc<dyn Clock>;
    config
        .coordinator
        .abort_timed_out_transaction_cleanup_interval_ms = 1;
    let engine = Engine::open(root.path(), config).unwrap();
    engine.create_topic("a", 1, no_config()).unwrap();
    let coordinator = engine.coordinator();
    let ids = coordinator
        .init_producer_id(Some("slow"), 1_000, None)
        .unwrap();
    coordinator
        .add_partitions(
            "slow",
            ids.producer_id,
            ids.epoch,
            &[TopicPartition::new("a", 0)],
        )
        .unwrap();
    // Past the transaction's timeout on the engine's clock: the pool's next run aborts it.
    clock.advance(10_000);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let state = coordinator.transaction_metadata("slow").unwrap().state;
        if state == TransactionState::CompleteAbort {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still {state:?}: the timers task did not run"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let log = engine.topic("a").unwrap().partition(0).unwrap();
    assert_eq!(log.log_end_offset(), 1, "the abort marker");
}
