//! The topic producer (issue 33, "TopicProducer"): routing as Kafka's client routes, the
//! idempotent producer's ids and epoch bump (KIP-360), Kafka's transactional client state
//! machine over the engine's coordinator, and zombie fencing end to end (coordinator item 9).
//! Ports of Kafka's `TransactionManagerTest` are named after it.

use std::sync::Arc;

use partlog::{BatchBuilder, Compression, Error, Log, LogConfig, NewRecord, ReadBound};
use partlog_engine::engine::{Engine, EngineConfig, TopicConfig};
use partlog_engine::partitioner::SequentialRandom;
use partlog_engine::producer::config::TopicProducerConfig;
use partlog_engine::producer::idempotence::{EpochBump, IdempotenceState};
use partlog_engine::producer::state::ProducerTransactionState;
use partlog_engine::producer::{TopicProducer, TopicSendHandle};
use partlog_engine::txn::log_records::{TxnLogRecord, read_record};
use partlog_engine::txn::state::TransactionState;
use partlog_engine::txn::{ProducerIdAndEpoch, TopicPartition};

const T0: i64 = 1_700_000_000_000;

fn engine(dir: &std::path::Path) -> Engine {
    let mut config = EngineConfig::default();
    config.log_config = Arc::new(LogConfig::builder_for_tests);
    config.worker_threads = 2;
    Engine::open(dir, config).unwrap()
}

fn record(key: Option<&str>, value: &str) -> NewRecord {
    NewRecord::new(T0, key.map(str::as_bytes), Some(value.as_bytes()))
}

fn committed(log: &Log) -> Vec<String> {
    log.committed_records(0, ReadBound::LogEnd)
        .map(|r| String::from_utf8(r.unwrap().value.unwrap()).unwrap())
        .collect()
}

fn all(log: &Log) -> Vec<String> {
    log.records(0, ReadBound::LogEnd)
        .map(|r| r.unwrap())
        .filter_map(|r| r.value.map(|v| String::from_utf8(v).unwrap()))
        .collect()
}

fn fast() -> TopicProducerConfig {
    let mut config = TopicProducerConfig::default();
    config.producer.linger_ms = 0;
    config
}

#[test]
fn topic_producer_routes_keys_by_murmur2_and_resolves_partition_and_offset() {
    let root = tempfile::tempdir().unwrap();
    let engine = engine(root.path());
    let topic = engine
        .create_topic("orders", 12, TopicConfig::new())
        .unwrap();
    for idempotent in [false, true] {
        let mut config = fast();
        config.enable_idempotence = idempotent;
        let producer = TopicProducer::new(&engine, config).unwrap();
        let handle = producer
            .send("orders", &record(Some("user-42"), "a"))
            .unwrap();
        assert_eq!(handle.partition(), 4, "Kafka's partition of user-42 in 12");
        let metadata = handle.wait().unwrap();
        assert_eq!(metadata.partition, 4);
        let explicit = producer
            .send_to("orders", Some(7), &record(Some("user-42"), "b"))
            .unwrap()
            .wait()
            .unwrap();
        assert_eq!(explicit.partition, 7);
        producer.close().unwrap();
        let log = topic.partition(4).unwrap();
        let ids = producer.producer_id_and_epoch();
        assert_eq!(ids.is_some(), idempotent);
        if let Some(ids) = ids {
            assert_eq!(ids.epoch, 0);
            assert!(
                log.producer_state(ids.producer_id).is_some(),
                "batches carry the id"
            );
        }
    }
    assert_eq!(all(&topic.partition(4).unwrap()), ["a", "a"]);
    let producer = TopicProducer::new(&engine, fast()).unwrap();
    assert!(matches!(
        producer.send("nope", &record(None, "x")),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(matches!(
        producer.send_to("orders", Some(12), &record(None, "x")),
        Err(Error::InvalidArgument { .. })
    ));
}

#[test]
fn topic_producer_sticks_unkeyed_records_to_one_partition_for_a_batch() {
    let root = tempfile::tempdir().unwrap();
    let engine = engine(root.path());
    engine.create_topic("logs", 3, TopicConfig::new()).unwrap();
    let mut config = fast();
    config.producer.batch_size = 1024;
    config.random = Arc::new(SequentialRandom::default());
    let producer = TopicProducer::new(&engine, config).unwrap();
    let value = "x".repeat(100);
    let partitions: Vec<i32> = (0..20)
        .map(|_| {
            producer
                .send("logs", &record(None, &value))
                .unwrap()
                .partition()
        })
        .collect();
    // 121 estimated bytes a record: 9 records fill the 1024-byte budget, then the next draw.
    assert_eq!(&partitions[..9], &[0; 9]);
    assert_eq!(&partitions[9..18], &[1; 9]);
    assert_eq!(partitions[18], 2);
}

/// Kafka's `TransactionManagerTest.testNoProducerIdResetAfterLastInFlightBatchSucceeds`.
#[test]
fn transaction_manager_test_no_producer_id_reset_after_last_in_flight_batch_succeeds() {
    let ids = ProducerIdAndEpoch {
        producer_id: 15,
        epoch: 5,
    };
    let mut manager = IdempotenceState::new(ids);
    let tp0 = TopicPartition::new("foo", 0);
    let b1 = manager.add_batch(&tp0, 1);
    let b2 = manager.add_batch(&tp0, 1);
    let b3 = manager.add_batch(&tp0, 1);
    assert_eq!(manager.sequence_number(&tp0), 3);

    manager.handle_failed_batch(&tp0, b1);
    assert!(manager.has_unresolved_sequences());
    // No reset until the sequences are resolved.
    assert_eq!(
        manager.bump_idempotent_epoch_and_reset_id_if_needed(),
        EpochBump::None
    );
    assert_eq!(manager.producer_id_and_epoch(), ids);
    assert!(manager.has_unresolved_sequences());

    manager.handle_failed_batch(&tp0, b2);
    assert_eq!(
        manager.bump_idempotent_epoch_and_reset_id_if_needed(),
        EpochBump::None
    );
    assert_eq!(manager.producer_id_and_epoch(), ids);
    assert!(manager.has_unresolved_sequences());

    // The third succeeds: the sequence resolves without a reset.
    manager.handle_completed_batch(&tp0, b3);
    manager.maybe_resolve_sequences();
    assert_eq!(manager.producer_id_and_epoch(), ids);
    assert!(!manager.has_unresolved_sequences());
    assert_eq!(manager.sequence_number(&tp0), 3);
}

/// Kafka's `TransactionManagerTest.testBumpEpochAfterTimeoutWithoutPendingInflightRequests`.
#[test]
fn transaction_manager_test_bump_epoch_after_timeout_without_pending_inflight_requests() {
    let ids = ProducerIdAndEpoch {
        producer_id: 15,
        epoch: 5,
    };
    let mut manager = IdempotenceState::new(ids);
    assert_eq!(
        manager.bump_idempotent_epoch_and_reset_id_if_needed(),
        EpochBump::None
    );
    assert_eq!(manager.producer_id_and_epoch(), ids);
    let tp0 = TopicPartition::new("foo", 0);
    assert_eq!(manager.sequence_number(&tp0), 0);

    let b1 = manager.add_batch(&tp0, 1);
    assert_eq!(manager.sequence_number(&tp0), 1);
    manager.handle_completed_batch(&tp0, b1);
    assert_eq!(manager.last_acked_sequence(&tp0), Some(0));

    // Unresolved without anything in flight: a no-op.
    manager.mark_sequence_unresolved(&tp0);
    manager.maybe_resolve_sequences();
    assert_eq!(manager.producer_id_and_epoch(), ids);
    assert!(!manager.has_unresolved_sequences());

    let b2 = manager.add_batch(&tp0, 1);
    assert_eq!(manager.sequence_number(&tp0), 2);
    manager.handle_failed_batch(&tp0, b2);
    assert!(manager.has_unresolved_sequences());
    manager.maybe_resolve_sequences();
    assert!(!manager.has_unresolved_sequences());
    assert_eq!(
        manager.bump_idempotent_epoch_and_reset_id_if_needed(),
        EpochBump::Bumped(ProducerIdAndEpoch {
            producer_id: 15,
            epoch: 6
        })
    );
    assert_eq!(manager.sequence_number(&tp0), 0);
}

#[test]
fn topic_producer_idempotent_bumps_its_epoch_after_a_sequence_gap() {
    let root = tempfile::tempdir().unwrap();
    let engine = engine(root.path());
    let topic = engine.create_topic("t", 1, TopicConfig::new()).unwrap();
    let producer = TopicProducer::new(&engine, fast()).unwrap();
    producer
        .send("t", &record(None, "a"))
        .unwrap()
        .wait()
        .unwrap();
    let ids = producer.producer_id_and_epoch().unwrap();
    // Someone writes under the producer's id: its next sequence is a gap for the log.
    let log = topic.partition(0).unwrap();
    let mut stolen = BatchBuilder::new(Compression::None).producer(ids.producer_id, ids.epoch, 1);
    for _ in 0..5 {
        stolen.push(&record(None, "stolen"));
    }
    log.append_batch(&stolen.build().unwrap()).unwrap();
    let failed = producer.send("t", &record(None, "b")).unwrap().wait();
    assert!(
        matches!(failed, Err(Error::OutOfOrderSequence { .. })),
        "{failed:?}"
    );
    // The next send bumps the epoch and restarts the sequence at 0.
    producer
        .send("t", &record(None, "c"))
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(
        producer.producer_id_and_epoch().unwrap(),
        ProducerIdAndEpoch {
            producer_id: ids.producer_id,
            epoch: 1
        }
    );
    assert_eq!(
        log.producer_state(ids.producer_id).unwrap().producer_epoch,
        1
    );
    assert_eq!(all(&log).last().unwrap(), "c");
}

fn transactional(engine: &Engine, id: &str) -> TopicProducer {
    let mut config = TopicProducerConfig::transactional(id);
    config.producer.linger_ms = 0;
    let producer = TopicProducer::new(engine, config).unwrap();
    producer.init_transactions().unwrap();
    producer
}

#[test]
fn topic_producer_transactions_commit_atomically_across_topics_and_abort() {
    let root = tempfile::tempdir().unwrap();
    let engine = engine(root.path());
    let a = engine.create_topic("a", 2, TopicConfig::new()).unwrap();
    let b = engine.create_topic("b", 1, TopicConfig::new()).unwrap();
    let producer = transactional(&engine, "tx");
    assert_eq!(
        producer.transaction_state(),
        ProducerTransactionState::Ready
    );
    let epoch0 = producer.producer_id_and_epoch().unwrap().epoch;

    producer.begin_transaction().unwrap();
    producer.send_to("a", Some(1), &record(None, "a1")).unwrap();
    producer.send_to("b", Some(0), &record(None, "b0")).unwrap();
    // The partitions are added before any batch reaches them (the flush has them added).
    producer.flush().unwrap();
    let metadata = engine.coordinator().transaction_metadata("tx").unwrap();
    assert_eq!(metadata.state, TransactionState::Ongoing);
    assert_eq!(metadata.partitions.len(), 2);
    assert!(committed(&a.partition(1).unwrap()).is_empty());
    producer.commit_transaction().unwrap();
    assert_eq!(committed(&a.partition(1).unwrap()), ["a1"]);
    assert_eq!(committed(&b.partition(0).unwrap()), ["b0"]);
    assert_eq!(
        producer.transaction_state(),
        ProducerTransactionState::Ready
    );
    assert_eq!(
        producer.producer_id_and_epoch().unwrap().epoch,
        epoch0 + 1,
        "v2 bumps"
    );

    producer.begin_transaction().unwrap();
    producer
        .send_to("a", Some(1), &record(None, "gone"))
        .unwrap();
    producer.abort_transaction().unwrap();
    assert_eq!(committed(&a.partition(1).unwrap()), ["a1"]);
    producer.begin_transaction().unwrap();
    producer.send_to("a", Some(1), &record(None, "a2")).unwrap();
    producer.commit_transaction().unwrap();
    assert_eq!(committed(&a.partition(1).unwrap()), ["a1", "a2"]);
    // An empty transaction needs no coordinator.
    producer.begin_transaction().unwrap();
    producer.commit_transaction().unwrap();
}

#[test]
fn topic_producer_illegal_transitions_name_both_states() {
    let root = tempfile::tempdir().unwrap();
    let engine = engine(root.path());
    engine.create_topic("a", 1, TopicConfig::new()).unwrap();
    let producer = TopicProducer::new(&engine, TopicProducerConfig::transactional("tx")).unwrap();
    let reason = |result: Result<(), Error>| match result {
        Err(Error::InvalidTxnState { reason, .. }) => reason,
        other => panic!("{other:?}"),
    };
    assert!(matches!(
        producer.send("a", &record(None, "x")),
        Err(Error::InvalidTxnState { .. })
    ));
    assert!(
        reason(producer.begin_transaction())
            .contains("from state UNINITIALIZED to state IN_TRANSACTION")
    );
    producer.init_transactions().unwrap();
    assert!(
        reason(producer.init_transactions()).contains("from state READY to state INITIALIZING")
    );
    assert!(
        reason(producer.commit_transaction())
            .contains("from state READY to state COMMITTING_TRANSACTION")
    );
    assert!(
        reason(producer.abort_transaction())
            .contains("from state READY to state ABORTING_TRANSACTION")
    );
    producer.begin_transaction().unwrap();
    assert!(
        reason(producer.begin_transaction())
            .contains("from state IN_TRANSACTION to state IN_TRANSACTION")
    );
    let plain = TopicProducer::new(&engine, fast()).unwrap();
    assert!(reason(plain.begin_transaction()).contains("non-transactional"));
    let mut bad = TopicProducerConfig::transactional("tx");
    bad.enable_idempotence = false;
    assert!(matches!(
        TopicProducer::new(&engine, bad),
        Err(Error::InvalidConfig {
            setting: "enable.idempotence",
            ..
        })
    ));
}

/// Kafka's `TransactionManagerTest.testInvalidProducerEpochConvertToProducerFencedInEndTxn`.
/// In process the INVALID_PRODUCER_EPOCH comes from the partition at the commit's flush: a
/// newer producer of the id bumped the epoch after this one's records were sent.
#[test]
fn transaction_manager_test_invalid_producer_epoch_convert_to_producer_fenced_in_end_txn() {
    let root = tempfile::tempdir().unwrap();
    let engine = engine(root.path());
    engine.create_topic("a", 1, TopicConfig::new()).unwrap();
    let mut config = TopicProducerConfig::transactional("tx");
    config.producer.linger_ms = 60_000;
    let old = TopicProducer::new(&engine, config).unwrap();
    old.init_transactions().unwrap();
    old.begin_transaction().unwrap();
    old.send("a", &record(None, "zombie")).unwrap();
    let _new = transactional(&engine, "tx");
    match old.commit_transaction() {
        Err(Error::ProducerFenced {
            transactional_id, ..
        }) => assert_eq!(transactional_id, "tx"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        old.transaction_state(),
        ProducerTransactionState::FatalError
    );
    for call in [
        old.begin_transaction(),
        old.commit_transaction(),
        old.abort_transaction(),
    ] {
        assert!(
            matches!(call, Err(Error::ProducerFenced { .. })),
            "{call:?}"
        );
    }
}

/// Kafka's `TransactionManagerTest.testAbortableErrorWhileAbortInProgress`: a batch that fails
/// with OUT_OF_ORDER_SEQUENCE_NUMBER while the abort runs does not stop it.
#[test]
fn transaction_manager_test_abortable_error_while_abort_in_progress() {
    let root = tempfile::tempdir().unwrap();
    let engine = engine(root.path());
    let topic = engine.create_topic("a", 1, TopicConfig::new()).unwrap();
    let mut config = TopicProducerConfig::transactional("tx");
    config.producer.linger_ms = 60_000;
    let producer = TopicProducer::new(&engine, config).unwrap();
    producer.init_transactions().unwrap();
    producer.begin_transaction().unwrap();
    let handle = producer.send("a", &record(None, "late")).unwrap();
    // A batch under the producer's id takes its sequence first: the producer's is out of order.
    // The coordinator adds the partition first, as the producer's own add (at the abort, its
    // batch still lingering) would have.
    let ids = producer.producer_id_and_epoch().unwrap();
    engine
        .coordinator()
        .add_partitions(
            "tx",
            ids.producer_id,
            ids.epoch,
            &[TopicPartition::new("a", 0)],
        )
        .unwrap();
    let mut first = BatchBuilder::new(Compression::None)
        .producer(ids.producer_id, ids.epoch, 0)
        .transactional(true);
    for _ in 0..3 {
        first.push(&record(None, "first"));
    }
    topic
        .partition(0)
        .unwrap()
        .append_batch(&first.build().unwrap())
        .unwrap();
    producer.abort_transaction().unwrap();
    assert!(matches!(
        handle.wait(),
        Err(Error::OutOfOrderSequence { .. })
    ));
    assert_eq!(
        producer.transaction_state(),
        ProducerTransactionState::Ready
    );
    assert_eq!(
        engine
            .coordinator()
            .transaction_metadata("tx")
            .unwrap()
            .state,
        TransactionState::CompleteAbort
    );
    assert!(committed(&topic.partition(0).unwrap()).is_empty());
}

/// Coordinator item 9: producer B's `init_transactions` fences producer A of the same id. A's
/// open transaction is aborted, A's next send and its commit fail with ProducerFenced, and a
/// late write from A straight to a log is refused by partition verification.
#[test]
fn txn_coordinator_zombie_fencing_end_to_end() {
    let root = tempfile::tempdir().unwrap();
    let engine = engine(root.path());
    let topic = engine.create_topic("a", 3, TopicConfig::new()).unwrap();
    let a = transactional(&engine, "t");
    a.begin_transaction().unwrap();
    a.send_to("a", Some(0), &record(None, "from-a"))
        .unwrap()
        .wait()
        .unwrap();
    let a_ids = a.producer_id_and_epoch().unwrap();

    let b = transactional(&engine, "t");
    let b_ids = b.producer_id_and_epoch().unwrap();
    assert_eq!(b_ids.producer_id, a_ids.producer_id);
    assert!(b_ids.epoch > a_ids.epoch);
    let p0 = topic.partition(0).unwrap();
    assert!(committed(&p0).is_empty(), "A's transaction was aborted");
    assert!(all(&p0).contains(&"from-a".to_owned()));

    // The add of a new partition is asynchronous, as in Kafka: the send's handle fails.
    assert!(matches!(
        a.send_to("a", Some(1), &record(None, "late"))
            .and_then(TopicSendHandle::wait),
        Err(Error::ProducerFenced { .. })
    ));
    assert!(matches!(
        a.commit_transaction(),
        Err(Error::ProducerFenced { .. })
    ));
    // Straight to a log: on a partition of A's aborted transaction (an older epoch), and on
    // one the coordinator never added (no registration).
    for partition in [0, 2] {
        let mut late = BatchBuilder::new(Compression::None)
            .producer(a_ids.producer_id, a_ids.epoch, 1)
            .transactional(true);
        late.push(&record(None, "late"));
        let refused = topic
            .partition(partition)
            .unwrap()
            .append_batch(&late.build().unwrap());
        assert!(
            refused.is_err(),
            "partition {partition} took a zombie's batch"
        );
    }
    b.begin_transaction().unwrap();
    b.send_to("a", Some(0), &record(None, "from-b")).unwrap();
    b.commit_transaction().unwrap();
    assert_eq!(committed(&p0), ["from-b"]);
}

/// The values written for `id` to its `__transaction_state` partition under `root`, in order
/// (the engine must be closed).
fn txn_state_values(root: &std::path::Path, partition: i32, id: &str) -> Vec<TransactionState> {
    let dir = root.join(format!("__transaction_state-{partition}"));
    let log = Log::open(dir, LogConfig::default()).unwrap();
    let states = log
        .records(0, ReadBound::LogEnd)
        .map(|r| r.unwrap())
        .filter_map(
            |r| match read_record(r.key.as_deref(), r.value.as_deref()).unwrap() {
                TxnLogRecord::Value {
                    transactional_id,
                    value,
                } if transactional_id == id => Some(value.state),
                _ => None,
            },
        )
        .collect();
    log.close().unwrap();
    states
}

/// Issue 33, the commit-latency row: the first sends of a transaction to 8 partitions are
/// added by the coordinator in one durable `Ongoing` write (as Kafka's sender sends one
/// `AddPartitionsToTxn` for every partition queued since its last), not one write each; no
/// batch reaches a partition before that write, and the commit shows every record.
#[test]
fn txn_commit_latency_first_sends_to_eight_partitions_make_one_ongoing_write() {
    let root = tempfile::tempdir().unwrap();
    let engine = engine(root.path());
    let topic = engine.create_topic("t", 8, TopicConfig::new()).unwrap();
    let mut config = TopicProducerConfig::transactional("batched");
    config.producer.linger_ms = 60_000;
    let producer = TopicProducer::new(&engine, config).unwrap();
    producer.init_transactions().unwrap();
    producer.begin_transaction().unwrap();
    for partition in 0..8 {
        producer
            .send_to(
                "t",
                Some(partition),
                &record(None, &format!("p{partition}")),
            )
            .unwrap();
    }
    // Nothing added, nothing appended yet: the batches are held.
    let metadata = engine
        .coordinator()
        .transaction_metadata("batched")
        .unwrap();
    assert_eq!(metadata.state, TransactionState::Empty);
    for partition in 0..8 {
        assert!(all(&topic.partition(partition).unwrap()).is_empty());
    }
    producer.commit_transaction().unwrap();
    for partition in 0..8 {
        assert_eq!(
            committed(&topic.partition(partition).unwrap()),
            [format!("p{partition}")]
        );
    }
    let state_partition = engine.coordinator().partition_for("batched").unwrap();
    drop(producer);
    engine.close().unwrap();
    drop(engine);
    let states = txn_state_values(root.path(), state_partition, "batched");
    let ongoing = states
        .iter()
        .filter(|s| **s == TransactionState::Ongoing)
        .count();
    assert_eq!(
        ongoing, 1,
        "one Ongoing write for 8 first sends: {states:?}"
    );
}

/// Routing item (issue 33, performance): a thread's copy of a route belongs to one producer.
/// Two producers of two engines, each with a topic of the same name, sending in turn from one
/// thread: each record lands in its own producer's engine.
#[test]
fn routing_route_copy_belongs_to_one_producer() {
    let (root_a, root_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (engine_a, engine_b) = (engine(root_a.path()), engine(root_b.path()));
    let a = engine_a.create_topic("t", 1, TopicConfig::new()).unwrap();
    let b = engine_b.create_topic("t", 1, TopicConfig::new()).unwrap();
    let producer_a = TopicProducer::new(&engine_a, fast()).unwrap();
    let producer_b = TopicProducer::new(&engine_b, fast()).unwrap();
    for i in 0..3 {
        producer_a
            .send("t", &record(Some("k"), &format!("a{i}")))
            .unwrap();
        producer_b
            .send("t", &record(Some("k"), &format!("b{i}")))
            .unwrap();
    }
    producer_a.close().unwrap();
    producer_b.close().unwrap();
    assert_eq!(all(&a.partition(0).unwrap()), ["a0", "a1", "a2"]);
    assert_eq!(all(&b.partition(0).unwrap()), ["b0", "b1", "b2"]);
}

/// Routing item (issue 33, performance): a write to the route table (a commit or an abort
/// taking the transaction's producers out) makes the sending thread's copy of the route stale,
/// so the next transaction's records go to new producers, not the closed ones. Sending to two
/// topics in turn makes a send copy its topic's route with the producers in it.
#[test]
fn routing_route_copy_refreshed_after_a_commit_takes_the_producers() {
    let root = tempfile::tempdir().unwrap();
    let engine = engine(root.path());
    let t = engine.create_topic("t", 1, TopicConfig::new()).unwrap();
    let u = engine.create_topic("u", 1, TopicConfig::new()).unwrap();
    let producer = transactional(&engine, "tx");
    let (mut expected_t, mut expected_u) = (Vec::new(), Vec::new());
    for round in 0..4 {
        producer.begin_transaction().unwrap();
        // Each round starts with the topic the last one ended with: its copy is the stale one.
        for (copy, topic) in ["t", "u", "t", "u", "t"].into_iter().enumerate() {
            let value = format!("r{round}c{copy}");
            producer.send(topic, &record(None, &value)).unwrap();
            if round != 2 {
                match topic {
                    "t" => expected_t.push(value),
                    _ => expected_u.push(value),
                }
            }
        }
        if round == 2 {
            producer.abort_transaction().unwrap();
        } else {
            producer.commit_transaction().unwrap();
        }
    }
    assert_eq!(committed(&t.partition(0).unwrap()), expected_t);
    assert_eq!(committed(&u.partition(0).unwrap()), expected_u);
    assert_eq!(
        producer.transaction_state(),
        ProducerTransactionState::Ready
    );
}

/// The transactional row's partition producers across transactions (issue 33, Performance,
/// third row): each transaction after a commit or an abort runs at the epoch its `EndTxn`
/// bumped to, and a producer that fenced the id at the next epoch; at each new epoch the
/// partition's sequences start again at 0, as Kafka's producer restarts them after an epoch
/// bump, and the log takes every batch (no `OutOfOrderSequence`, no fencing of the live one).
#[test]
fn txn_row_partition_sequences_restart_at_each_epoch_across_commit_abort_and_fence() {
    let root = tempfile::tempdir().unwrap();
    let engine = engine(root.path());
    let topic = engine.create_topic("t", 2, TopicConfig::new()).unwrap();
    let log = topic.partition(0).unwrap();
    let send = |producer: &TopicProducer, values: &[&str]| {
        let handles: Vec<TopicSendHandle> = values
            .iter()
            .map(|value| {
                producer
                    .send_to("t", Some(0), &record(None, value))
                    .unwrap()
            })
            .collect();
        // A second partition in every transaction: the add names both.
        producer
            .send_to("t", Some(1), &record(None, "other"))
            .unwrap();
        handles
    };
    let expect = |ids: ProducerIdAndEpoch, records: i32| {
        let entry = log.producer_state(ids.producer_id).unwrap();
        assert_eq!(entry.producer_epoch, ids.epoch, "{entry:?}");
        assert_eq!(entry.first_sequence, 0, "{entry:?}");
        assert_eq!(entry.last_sequence, records - 1, "{entry:?}");
    };

    let producer = transactional(&engine, "reused");
    let first = producer.producer_id_and_epoch().unwrap();
    producer.begin_transaction().unwrap();
    let handles = send(&producer, &["a", "b", "c"]);
    producer.flush().unwrap();
    expect(first, 3);
    producer.commit_transaction().unwrap();
    for handle in handles {
        handle.wait().unwrap();
    }

    // After the commit: the next epoch, from sequence 0.
    let second = producer.producer_id_and_epoch().unwrap();
    assert_eq!(second.epoch, first.epoch + 1);
    producer.begin_transaction().unwrap();
    let handles = send(&producer, &["gone-1", "gone-2"]);
    producer.flush().unwrap();
    expect(second, 2);
    producer.abort_transaction().unwrap();
    for handle in handles {
        handle.wait().unwrap();
    }

    // After the abort: the next epoch again, from sequence 0.
    let third = producer.producer_id_and_epoch().unwrap();
    assert_eq!(third.epoch, second.epoch + 1);
    producer.begin_transaction().unwrap();
    send(&producer, &["d"]);
    producer.flush().unwrap();
    expect(third, 1);
    producer.commit_transaction().unwrap();

    // A producer of the same id fences this one with the next epoch, from sequence 0.
    producer.begin_transaction().unwrap();
    send(&producer, &["zombie"]);
    producer.flush().unwrap();
    let successor = transactional(&engine, "reused");
    let fourth = successor.producer_id_and_epoch().unwrap();
    assert!(fourth.epoch > third.epoch, "{fourth:?} after {third:?}");
    assert!(matches!(
        producer.commit_transaction(),
        Err(Error::ProducerFenced { .. })
    ));
    successor.begin_transaction().unwrap();
    send(&successor, &["e", "f"]);
    successor.flush().unwrap();
    expect(fourth, 2);
    successor.commit_transaction().unwrap();
    assert_eq!(committed(&log), ["a", "b", "c", "d", "e", "f"]);
}

/// A thread that runs the jobs it is given one at a time and idles between them, parked on a
/// channel the test holds: its copy of the last route it sent through outlives each job.
struct IdleThread {
    jobs: Option<std::sync::mpsc::Sender<Box<dyn FnOnce() + Send>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl IdleThread {
    fn start() -> IdleThread {
        let (jobs, queue) = std::sync::mpsc::channel::<Box<dyn FnOnce() + Send>>();
        let thread = std::thread::spawn(move || {
            for job in queue {
                job();
            }
        });
        IdleThread {
            jobs: Some(jobs),
            thread: Some(thread),
        }
    }

    /// Runs `job` on the thread and returns its result; the thread then idles again.
    fn run<T: Send + 'static>(&self, job: impl FnOnce() -> T + Send + 'static) -> T {
        let (answer, answered) = std::sync::mpsc::channel();
        let job = move || {
            let _ = answer.send(job());
        };
        self.jobs.as_ref().unwrap().send(Box::new(job)).unwrap();
        answered.recv().expect("the job panicked")
    }
}

impl Drop for IdleThread {
    fn drop(&mut self) {
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Sends `values` keyed by themselves to `topic` and waits for each.
fn send_all(producer: &TopicProducer, topic: &str, values: &[String]) {
    let handles: Vec<TopicSendHandle> = values
        .iter()
        .map(|value| producer.send(topic, &record(Some(value), value)).unwrap())
        .collect();
    for handle in handles {
        handle.wait().unwrap();
    }
}

/// Every record of every partition of `topic`, sorted.
fn topic_records(engine: &Engine, topic: &str) -> Vec<String> {
    let topic = engine.topic(topic).unwrap();
    let mut values: Vec<String> = (0..topic.partitions())
        .flat_map(|p| all(&topic.partition(p).unwrap()))
        .collect();
    values.sort();
    values
}

fn values(prefix: &str, count: usize) -> Vec<String> {
    (0..count).map(|i| format!("{prefix}{i}")).collect()
}

/// Routing item (issue 33, performance): an idle thread's copy of a route does not keep an
/// engine from reopening. A thread sends through an engine's producer and idles; the engine
/// closes (or is only dropped), and the producer goes: the engine reopens in the same process
/// and reads every record, and the same thread's sends through a producer of the reopened
/// engine land there. Before the engine goes, a send through its producer fails with `Closed`
/// once the engine closed. Fails without the engine closing its logs when its last handle
/// goes: the copy kept a partition's `Log` open, and with it the directory's lock.
#[test]
fn routing_route_copy_of_an_idle_thread_lets_the_engine_reopen() {
    let idle = IdleThread::start();
    for close in [true, false] {
        let root = tempfile::tempdir().unwrap();
        let engine = engine(root.path());
        engine.create_topic("t", 4, TopicConfig::new()).unwrap();
        let producer = Arc::new(TopicProducer::new(&engine, fast()).unwrap());
        let first = values("a", 8);
        let (sender, sent) = (Arc::clone(&producer), first.clone());
        idle.run(move || send_all(&sender, "t", &sent));
        if close {
            engine.close().unwrap();
            let sender = Arc::clone(&producer);
            let late = idle.run(move || sender.send("t", &record(Some("a0"), "late")).map(drop));
            assert!(matches!(late, Err(Error::Closed)), "{late:?}");
        }
        drop((producer, engine));

        let engine = match Engine::open(root.path(), EngineConfig::default()) {
            Ok(engine) => engine,
            Err(error) => panic!("reopening (close: {close}): {error:?}"),
        };
        let opened = (0..4).map(|p| engine.topic("t").unwrap().partition(p));
        for (partition, log) in opened.enumerate() {
            if let Err(error) = log {
                panic!("partition {partition} of the reopened engine (close: {close}): {error:?}");
            }
        }
        assert_eq!(topic_records(&engine, "t"), first, "close: {close}");
        let producer = Arc::new(TopicProducer::new(&engine, fast()).unwrap());
        let second = values("b", 8);
        let (sender, sent) = (Arc::clone(&producer), second.clone());
        idle.run(move || send_all(&sender, "t", &sent));
        let mut expected = [first, second].concat();
        expected.sort();
        assert_eq!(topic_records(&engine, "t"), expected, "close: {close}");
    }
}

/// Routing item (issue 33, performance): an idle thread's copy of a route to a topic that is
/// deleted and created again neither keeps the deleted partitions' files nor reaches the new
/// ones. A send through the old producer fails with `Closed`; the same thread's sends through
/// a new producer land in the new topic, which after a reopen holds only them.
#[test]
fn routing_route_copy_of_an_idle_thread_across_delete_topic_and_recreate() {
    let idle = IdleThread::start();
    let root = tempfile::tempdir().unwrap();
    let engine = engine(root.path());
    engine.create_topic("t", 2, TopicConfig::new()).unwrap();
    let old = Arc::new(TopicProducer::new(&engine, fast()).unwrap());
    let sender = Arc::clone(&old);
    idle.run(move || send_all(&sender, "t", &values("a", 4)));

    engine.delete_topic("t").unwrap();
    for entry in std::fs::read_dir(root.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.to_string_lossy().ends_with("-delete") {
            let left: Vec<_> = std::fs::read_dir(&path).unwrap().collect();
            assert!(left.is_empty(), "{} still holds {left:?}", path.display());
        }
    }
    engine.create_topic("t", 2, TopicConfig::new()).unwrap();
    let sender = Arc::clone(&old);
    let late = idle.run(move || sender.send("t", &record(Some("a0"), "late")).map(drop));
    assert!(matches!(late, Err(Error::Closed)), "{late:?}");

    let new = Arc::new(TopicProducer::new(&engine, fast()).unwrap());
    let sender = Arc::clone(&new);
    idle.run(move || send_all(&sender, "t", &values("b", 4)));
    assert_eq!(topic_records(&engine, "t"), values("b", 4));
    engine.close().unwrap();
    drop((old, new, engine));
    let engine = Engine::open(root.path(), EngineConfig::default()).unwrap();
    assert_eq!(topic_records(&engine, "t"), values("b", 4));
}
