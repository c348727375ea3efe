//! The coordinator's timers and its recovery (issue 33, item 7 and the crash atomicity of a
//! commit), on a simulated disk.

mod common;

use std::sync::{Arc, Barrier};

use partlog::unstable::sim::{FaultOp, FaultRule};
use partlog::unstable::{ManualClock, SimStorage};
use partlog_engine::txn::state::TransactionState;
use partlog_engine::txn::{
    ProducerIdAndEpoch, TopicPartition, TransactionCoordinator, TransactionCoordinatorConfig,
    TransactionResult, TxnLogs,
};

use common::txn_harness::*;

const TXN: &str = "txn-1";
const TIMEOUT: i32 = 60_000;

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition::new(topic, partition)
}

fn begin(
    coordinator: &TransactionCoordinator,
    logs: &Arc<DirTxnLogs>,
    parts: &[TopicPartition],
) -> ProducerIdAndEpoch {
    let ids = coordinator
        .init_producer_id(Some(TXN), TIMEOUT, None)
        .unwrap();
    coordinator
        .add_partitions(TXN, ids.producer_id, ids.epoch, parts)
        .unwrap();
    for p in parts {
        let log = logs.partition_log(&p.topic, p.partition).unwrap();
        write_txn(&log, ids.producer_id, ids.epoch, 0, &["a"]);
    }
    ids
}

// Item 7.

#[test]
fn txn_coordinator_should_abort_expired_transactions_in_ongoing_state_and_bump_epoch() {
    for (version, bumps) in [(0, 1), (2, 2)] {
        let mut config = TransactionCoordinatorConfig::default();
        config.transaction_version = version;
        let h = Harness::with_config(1, config);
        let ids = begin(&h.coordinator, &h.logs, &[tp("t", 0), tp("u", 0)]);
        // Not yet: the timeout has not passed.
        let report = h.coordinator.tick(T0 + i64::from(TIMEOUT));
        assert!(report.aborted.is_empty(), "{report:?}");
        // The abort timer's interval has not passed either.
        h.clock.advance(i64::from(TIMEOUT) + 1);
        assert!(h.coordinator.tick(h.now()).aborted.is_empty());
        h.clock.advance(10_000);
        let report = h.coordinator.tick(h.now());
        assert_eq!(report.aborted, [TXN], "version {version}: {report:?}");
        assert!(report.failed.is_empty(), "{report:?}");
        let metadata = h.coordinator.transaction_metadata(TXN).unwrap();
        assert_eq!(metadata.state, TransactionState::CompleteAbort);
        assert_eq!(
            metadata.producer_epoch,
            ids.epoch + bumps,
            "version {version}"
        );
        for (topic, p) in [("t", 0), ("u", 0)] {
            let log = h.data_log(topic, p);
            assert!(committed(&log).is_empty());
            assert_eq!(log.first_unstable_offset(), None);
        }
        // The producer that timed out is fenced.
        let error = h
            .coordinator
            .end_txn(TXN, ids.producer_id, ids.epoch, TransactionResult::Commit)
            .unwrap_err();
        assert_eq!(error.kafka_code(), Some(90), "version {version}");
    }
}

#[test]
fn txn_coordinator_should_not_abort_expired_transactions_that_have_a_pending_state_transition() {
    let h = Harness::new(1);
    let ids = begin(&h.coordinator, &h.logs, &[tp("t", 0)]);
    let pause = Arc::new((Barrier::new(2), Barrier::new(2)));
    *h.logs.pause_state_log.lock().unwrap() = Some(Arc::clone(&pause));
    std::thread::scope(|scope| {
        let adding = scope.spawn(|| {
            h.coordinator
                .add_partitions(TXN, ids.producer_id, ids.epoch, &[tp("t", 1)])
        });
        // The add's record is being written: Ongoing, with Ongoing pending.
        pause.0.wait();
        let metadata = h.coordinator.transaction_metadata(TXN).unwrap();
        assert_eq!(metadata.pending_state, Some(TransactionState::Ongoing));
        let report = h.coordinator.tick(T0 + 10 * i64::from(TIMEOUT));
        assert!(report.aborted.is_empty(), "{report:?}");
        assert!(report.failed.is_empty(), "{report:?}");
        pause.1.wait();
        adding.join().unwrap().unwrap();
    });
    let metadata = h.coordinator.transaction_metadata(TXN).unwrap();
    assert_eq!(metadata.state, TransactionState::Ongoing);
    assert_eq!(metadata.producer_epoch, ids.epoch, "not bumped");
    assert_eq!(metadata.partitions.len(), 2);
    // The next run aborts it.
    let report = h.coordinator.tick(T0 + 20 * i64::from(TIMEOUT));
    assert_eq!(report.aborted, [TXN], "{report:?}");
}

#[test]
fn txn_coordinator_idle_ids_expire_with_a_tombstone() {
    let h = Harness::new(1);
    let ids = h
        .coordinator
        .init_producer_id(Some(TXN), TIMEOUT, None)
        .unwrap();
    let expiration = h.coordinator.config().transactional_id_expiration_ms;
    assert!(h.coordinator.tick(T0 + expiration - 1).expired.is_empty());
    let report = h.coordinator.tick(T0 + expiration + 3_600_000);
    assert_eq!(report.expired, [TXN], "{report:?}");
    assert!(h.coordinator.transaction_metadata(TXN).is_none());
    assert_eq!(h.txn_records(TXN).pop(), Some(None), "a tombstone");
    // The id is unknown now; a new init gets a new producer id.
    let error = h
        .coordinator
        .end_txn(TXN, ids.producer_id, ids.epoch, TransactionResult::Commit)
        .unwrap_err();
    assert_eq!(error.kafka_code(), Some(49));
    // And after a restart too.
    drop(h.coordinator);
    h.logs.forget();
    let reopened = open_coordinator(&h.sim, &h.clock, &h.logs, Default::default()).unwrap();
    assert!(reopened.transaction_metadata(TXN).is_none());
}

// Recovery.

#[test]
fn txn_coordinator_recovery_completes_decided_transactions_and_replays_the_last_value() {
    let sim = SimStorage::new(4);
    let clock = Arc::new(ManualClock::new(T0));
    let logs = DirTxnLogs::new(&sim, &clock);
    let coordinator = open_coordinator(&sim, &clock, &logs, Default::default()).unwrap();
    let ids = begin(&coordinator, &logs, &[tp("t", 0), tp("t", 1)]);
    // The commit's markers fail: PrepareCommit stays.
    logs.unavailable.lock().unwrap().insert("t".into());
    assert!(
        coordinator
            .end_txn(TXN, ids.producer_id, ids.epoch, TransactionResult::Commit)
            .is_err()
    );
    assert_eq!(
        coordinator.transaction_metadata(TXN).unwrap().state,
        TransactionState::PrepareCommit
    );
    drop(coordinator);
    logs.forget();
    logs.unavailable.lock().unwrap().clear();
    let reopened = open_coordinator(&sim, &clock, &logs, Default::default()).unwrap();
    let metadata = reopened.transaction_metadata(TXN).unwrap();
    assert_eq!(metadata.state, TransactionState::CompleteCommit);
    assert_eq!(metadata.producer_epoch, ids.epoch + 1);
    for p in 0..2 {
        assert_eq!(committed(&logs.partition_log("t", p).unwrap()), ["a"]);
    }
}

#[test]
fn txn_coordinator_a_corrupt_record_fails_the_open_naming_the_file() {
    let sim = SimStorage::new(5);
    let clock = Arc::new(ManualClock::new(T0));
    let logs = DirTxnLogs::new(&sim, &clock);
    let partition = partlog_engine::txn::log_records::transaction_state_partition(TXN, 50).unwrap();
    let log = logs.transaction_state_log(partition).unwrap();
    let key = partlog_engine::txn::log_records::encode_key(TXN).unwrap();
    // A value whose state id is 9.
    let mut value = partlog_engine::txn::log_records::encode_value(
        &partlog_engine::txn::log_records::TransactionLogValue::new(
            1,
            0,
            TIMEOUT,
            TransactionState::Empty,
        ),
        0,
    )
    .unwrap();
    value[16] = 9;
    for _ in 0..2 {
        log.append(&[partlog::NewRecord::new(T0, Some(&key), Some(&value))])
            .unwrap();
    }
    log.wait_durable(1).unwrap();
    drop(log);
    logs.forget();
    let error = open_coordinator(&sim, &clock, &logs, Default::default()).unwrap_err();
    match &error {
        partlog::Error::Corrupt { file, position, .. } => {
            assert!(
                file.ends_with(format!(
                    "__transaction_state-{partition}/00000000000000000000.log"
                )),
                "{error}"
            );
            assert_eq!(*position, 0, "the first batch");
        }
        other => panic!("{other}"),
    }
}

// Crash atomicity.

/// A transaction over 3 topics × 2 partitions, committed with a crash before each storage
/// operation of `end_txn` in turn. After reopening, recovery and a tick past the timeout, a
/// `read_committed` reader sees the transaction on all six partitions or on none, and no
/// transaction is left open.
#[test]
fn txn_crash_commit_is_all_or_nothing_across_six_partitions() {
    let parts: Vec<TopicPartition> = ["a", "b", "c"]
        .iter()
        .flat_map(|t| (0..2).map(move |p| tp(t, p)))
        .collect();
    let (mut committed_runs, mut aborted_runs) = (0, 0);
    for nth in 1.. {
        let sim = SimStorage::new(nth);
        let clock = Arc::new(ManualClock::new(T0));
        let logs = DirTxnLogs::new(&sim, &clock);
        let coordinator = open_coordinator(&sim, &clock, &logs, Default::default()).unwrap();
        let ids = begin(&coordinator, &logs, &parts);
        let crashes = sim.stats().crashes;
        sim.inject(FaultRule::crash(FaultOp::Any, nth));
        let outcome =
            coordinator.end_txn(TXN, ids.producer_id, ids.epoch, TransactionResult::Commit);
        sim.clear_faults();
        let crashed = sim.stats().crashes > crashes;
        if !crashed {
            outcome.unwrap();
            assert!(nth > 10, "a commit takes more than a few operations");
            break;
        }
        drop(coordinator);
        logs.forget();
        let logs = DirTxnLogs::new(&sim, &clock);
        let coordinator = open_coordinator(&sim, &clock, &logs, Default::default())
            .unwrap_or_else(|e| panic!("crash before operation {nth}: reopen: {e}"));
        clock.advance(i64::from(TIMEOUT) + 1);
        let report = coordinator.tick(partlog::unstable::Clock::now_ms(&*clock));
        assert!(
            report.failed.is_empty(),
            "crash before operation {nth}: {report:?}"
        );
        let seen: Vec<Vec<String>> = parts
            .iter()
            .map(|p| committed(&logs.partition_log(&p.topic, p.partition).unwrap()))
            .collect();
        let all = seen.iter().all(|s| s == &["a"]);
        let none = seen.iter().all(Vec::is_empty);
        assert!(all || none, "crash before operation {nth}: {seen:?}");
        for p in &parts {
            let log = logs.partition_log(&p.topic, p.partition).unwrap();
            assert_eq!(
                log.first_unstable_offset(),
                None,
                "crash before operation {nth}: {p:?} hangs"
            );
        }
        let state = coordinator.transaction_metadata(TXN).unwrap().state;
        if all {
            assert_eq!(
                state,
                TransactionState::CompleteCommit,
                "crash before operation {nth}"
            );
            committed_runs += 1;
        } else {
            assert_eq!(
                state,
                TransactionState::CompleteAbort,
                "crash before operation {nth}"
            );
            aborted_runs += 1;
        }
    }
    assert!(
        committed_runs > 0 && aborted_runs > 0,
        "{committed_runs} {aborted_runs}"
    );
}
