//! The transaction coordinator against Kafka's `TransactionCoordinatorTest` (issue 33, items
//! 1–8), each test named after Kafka's, on a simulated disk: the coordinator's records are read
//! back from `__transaction_state`, its markers from the data partitions.

mod common;

use std::sync::Arc;

use partlog::unstable::sim::{FaultOp, FaultRule, SimEvent};
use partlog_engine::txn::log_records::{TransactionLogValue, TxnTopicPartitions};
use partlog_engine::txn::state::TransactionState;
use partlog_engine::txn::{
    ProducerIdAndEpoch, TopicPartition, TransactionCoordinatorConfig, TransactionResult, TxnLogs,
};

use common::txn_harness::*;

const TXN: &str = "txn-1";
const TIMEOUT: i32 = 60_000;

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition::new(topic, partition)
}

fn code(error: partlog::Error) -> Option<i16> {
    error.kafka_code()
}

/// A value for `seed`: `state` at `pid`/`epoch`, with `partitions` of topic `t`.
fn value(
    pid: i64,
    epoch: i16,
    state: TransactionState,
    topic: &str,
    parts: &[i32],
) -> TransactionLogValue {
    let mut value = TransactionLogValue::new(pid, epoch, TIMEOUT, state);
    if state != TransactionState::Empty {
        value.partitions = vec![TxnTopicPartitions {
            topic: topic.into(),
            partitions: parts.to_vec(),
        }];
        value.start_timestamp_ms = T0;
    }
    value.last_update_timestamp_ms = T0;
    value.client_transaction_version = 2;
    value
}

/// A coordinator whose `TXN` is in `state`, decided but unable to write its markers (the
/// topic of its partitions is unavailable), so that it stays there.
fn stuck_in(state: TransactionState) -> Harness {
    let sim = partlog::unstable::SimStorage::new(3);
    let clock = Arc::new(partlog::unstable::ManualClock::new(T0));
    let h = Harness::open(
        sim,
        clock,
        TransactionCoordinatorConfig::default(),
        |logs| {
            logs.unavailable.lock().unwrap().insert("down".into());
            seed(logs, TXN, &value(500, 7, state, "down", &[0]));
        },
    );
    let metadata = h.coordinator.transaction_metadata(TXN).unwrap();
    assert_eq!(metadata.state, state, "the markers cannot be written");
    h
}

/// `init_producer_id`, `add_partitions` of `parts`, a batch on each: an open transaction.
fn begin(h: &Harness, parts: &[TopicPartition]) -> ProducerIdAndEpoch {
    let ids = h
        .coordinator
        .init_producer_id(Some(TXN), TIMEOUT, None)
        .unwrap();
    h.coordinator
        .add_partitions(TXN, ids.producer_id, ids.epoch, parts)
        .unwrap();
    for p in parts {
        write_txn(
            &h.data_log(&p.topic, p.partition),
            ids.producer_id,
            ids.epoch,
            0,
            &["a"],
        );
    }
    ids
}

// Item 1.

#[test]
fn txn_coordinator_should_return_invalid_request_when_transactional_id_is_empty() {
    let h = Harness::new(1);
    let error = h
        .coordinator
        .init_producer_id(Some(""), TIMEOUT, None)
        .unwrap_err();
    assert_eq!(code(error), Some(42));
    let error = h
        .coordinator
        .add_partitions("", 0, 0, &[tp("t", 0)])
        .unwrap_err();
    assert_eq!(code(error), Some(42));
}

#[test]
fn txn_coordinator_should_accept_init_pid_and_return_next_pid_when_transactional_id_is_null() {
    let h = Harness::new(1);
    let first = h.coordinator.init_producer_id(None, TIMEOUT, None).unwrap();
    let second = h.coordinator.init_producer_id(None, TIMEOUT, None).unwrap();
    assert_eq!((first.producer_id, first.epoch), (0, 0));
    assert_eq!((second.producer_id, second.epoch), (1, 0));
}

#[test]
fn txn_coordinator_invalid_transaction_timeouts_are_refused() {
    let h = Harness::new(1);
    for timeout in [0, -1, 900_001] {
        let error = h
            .coordinator
            .init_producer_id(Some(TXN), timeout, None)
            .unwrap_err();
        assert_eq!(code(error), Some(50), "{timeout}");
    }
    assert!(h.coordinator.transaction_metadata(TXN).is_none());
}

// Item 2.

#[test]
fn txn_coordinator_should_init_pid_with_epoch_zero_for_new_transactional_id() {
    let h = Harness::new(1);
    let ids = h
        .coordinator
        .init_producer_id(Some(TXN), TIMEOUT, None)
        .unwrap();
    assert_eq!((ids.producer_id, ids.epoch), (0, 0));
    let records = h.txn_records(TXN);
    assert_eq!(records.len(), 1, "one durable record: {records:?}");
    let written = records[0].as_ref().unwrap();
    assert_eq!(written.state, TransactionState::Empty);
    assert_eq!((written.producer_id, written.producer_epoch), (0, 0));
    assert_eq!(written.transaction_timeout_ms, TIMEOUT);
    let partition = h.coordinator.partition_for(TXN).unwrap();
    let log = h.logs.transaction_state_log(partition).unwrap();
    assert_eq!(log.durable_offset(), log.log_end_offset(), "acks=all");
}

#[test]
fn txn_coordinator_should_generate_new_producer_id_if_epochs_exhausted() {
    let sim = partlog::unstable::SimStorage::new(2);
    let clock = Arc::new(partlog::unstable::ManualClock::new(T0));
    let h = Harness::open(
        sim,
        clock,
        TransactionCoordinatorConfig::default(),
        |logs| {
            seed(
                logs,
                TXN,
                &value(500, i16::MAX - 1, TransactionState::Empty, "t", &[]),
            );
        },
    );
    let ids = h
        .coordinator
        .init_producer_id(Some(TXN), TIMEOUT, None)
        .unwrap();
    assert_ne!(ids.producer_id, 500);
    assert_eq!(ids.epoch, 0);
    let metadata = h.coordinator.transaction_metadata(TXN).unwrap();
    assert_eq!(metadata.previous_producer_id, 500);
    let last = h.txn_records(TXN).pop().unwrap().unwrap();
    assert_eq!(
        (last.producer_id, last.producer_epoch),
        (ids.producer_id, 0)
    );
    assert_eq!(last.previous_producer_id, 500);
}

// Item 3.

#[test]
fn txn_coordinator_should_respond_with_concurrent_transactions_on_add_partitions_when_state_is_prepare_commit()
 {
    let h = stuck_in(TransactionState::PrepareCommit);
    let error = h
        .coordinator
        .add_partitions(TXN, 500, 7, &[tp("t", 1)])
        .unwrap_err();
    assert_eq!(code(error), Some(51));
}

#[test]
fn txn_coordinator_should_respond_with_concurrent_transaction_on_add_partitions_when_state_is_prepare_abort()
 {
    let h = stuck_in(TransactionState::PrepareAbort);
    let error = h
        .coordinator
        .add_partitions(TXN, 500, 7, &[tp("t", 1)])
        .unwrap_err();
    assert_eq!(code(error), Some(51));
}

#[test]
fn txn_coordinator_should_respond_with_producer_fenced_on_add_partitions_when_epochs_are_different()
{
    let h = Harness::new(1);
    let ids = h
        .coordinator
        .init_producer_id(Some(TXN), TIMEOUT, None)
        .unwrap();
    let error = h
        .coordinator
        .add_partitions(TXN, ids.producer_id, ids.epoch + 1, &[tp("t", 0)])
        .unwrap_err();
    assert_eq!(code(error), Some(90));
    let error = h
        .coordinator
        .add_partitions(TXN, ids.producer_id + 1, ids.epoch, &[tp("t", 0)])
        .unwrap_err();
    assert_eq!(code(error), Some(49), "another producer id");
    let error = h
        .coordinator
        .add_partitions("unknown", 0, 0, &[tp("t", 0)])
        .unwrap_err();
    assert_eq!(code(error), Some(49), "an unknown id");
}

#[test]
fn txn_coordinator_should_respond_with_errors_none_on_add_partition_when_no_errors_and_partitions_the_same()
 {
    let h = Harness::new(1);
    let ids = begin(&h, &[tp("t", 0), tp("t", 1)]);
    let end = h.txn_log_end(TXN);
    h.coordinator
        .add_partitions(TXN, ids.producer_id, ids.epoch, &[tp("t", 1), tp("t", 0)])
        .unwrap();
    h.coordinator
        .add_partitions(TXN, ids.producer_id, ids.epoch, &[tp("t", 0)])
        .unwrap();
    assert_eq!(h.txn_log_end(TXN), end, "no record written");
    // A new partition is written, with the union.
    h.coordinator
        .add_partitions(TXN, ids.producer_id, ids.epoch, &[tp("u", 0)])
        .unwrap();
    assert_eq!(h.txn_log_end(TXN), end + 1);
    let last = h.txn_records(TXN).pop().unwrap().unwrap();
    assert_eq!(last.partitions.len(), 2, "{last:?}");
    assert_eq!(last.start_timestamp_ms, T0, "the start stays");
}

#[test]
fn txn_coordinator_add_partitions_registers_the_transaction_on_each_new_partition() {
    let h = Harness::new(1);
    let ids = h
        .coordinator
        .init_producer_id(Some(TXN), TIMEOUT, None)
        .unwrap();
    // Partition verification: an unregistered transactional batch is refused.
    let log = h.data_log("t", 0);
    let refused = try_write_txn(&log, ids.producer_id, ids.epoch, 0, &["x"]).unwrap_err();
    assert_eq!(
        refused.kafka_code(),
        Some(48),
        "an unregistered transaction: {refused}"
    );
    h.coordinator
        .add_partitions(TXN, ids.producer_id, ids.epoch, &[tp("t", 0)])
        .unwrap();
    write_txn(&log, ids.producer_id, ids.epoch, 0, &["x"]);
}

#[test]
fn txn_coordinator_add_offsets_adds_the_groups_offsets_partition() {
    let h = Harness::new(1);
    let ids = h
        .coordinator
        .init_producer_id(Some(TXN), TIMEOUT, None)
        .unwrap();
    h.coordinator
        .add_offsets(TXN, ids.producer_id, ids.epoch, "my-group")
        .unwrap();
    let metadata = h.coordinator.transaction_metadata(TXN).unwrap();
    // abs(javaStringHash("my-group")) % 50 = 12.
    assert!(
        metadata.partitions.contains(&tp("__consumer_offsets", 12)),
        "{metadata:?}"
    );
}

// Item 4.

#[test]
fn txn_coordinator_should_return_ok_on_end_txn_when_status_is_complete_commit_and_result_is_commit()
{
    let h = Harness::new(1);
    let ids = begin(&h, &[tp("t", 0)]);
    let after = h
        .coordinator
        .end_txn(TXN, ids.producer_id, ids.epoch, TransactionResult::Commit)
        .unwrap();
    assert_eq!(after.epoch, ids.epoch + 1, "transaction version 2 bumps");
    let end = h.txn_log_end(TXN);
    // The retry carries the epoch the producer had.
    let retried = h
        .coordinator
        .end_txn(TXN, ids.producer_id, ids.epoch, TransactionResult::Commit)
        .unwrap();
    assert_eq!(retried, after);
    assert_eq!(h.txn_log_end(TXN), end, "a retry writes nothing");
    // CompleteCommit + ABORT.
    let error = h
        .coordinator
        .end_txn(TXN, ids.producer_id, ids.epoch, TransactionResult::Abort)
        .unwrap_err();
    assert_eq!(code(error), Some(48));
}

#[test]
fn txn_coordinator_should_return_ok_on_end_txn_when_status_is_complete_abort_and_result_is_abort() {
    let h = Harness::new(1);
    let ids = begin(&h, &[tp("t", 0)]);
    let after = h
        .coordinator
        .end_txn(TXN, ids.producer_id, ids.epoch, TransactionResult::Abort)
        .unwrap();
    let retried = h
        .coordinator
        .end_txn(TXN, ids.producer_id, ids.epoch, TransactionResult::Abort)
        .unwrap();
    assert_eq!(retried, after);
    let error = h
        .coordinator
        .end_txn(TXN, ids.producer_id, ids.epoch, TransactionResult::Commit)
        .unwrap_err();
    assert_eq!(code(error), Some(48), "CompleteAbort + COMMIT");
    assert!(committed(&h.data_log("t", 0)).is_empty());
}

#[test]
fn txn_coordinator_end_txn_retries_at_transaction_version_0_keep_the_epoch() {
    let mut config = TransactionCoordinatorConfig::default();
    config.transaction_version = 0;
    let h = Harness::with_config(1, config);
    let ids = begin(&h, &[tp("t", 0)]);
    let after = h
        .coordinator
        .end_txn(TXN, ids.producer_id, ids.epoch, TransactionResult::Commit)
        .unwrap();
    assert_eq!(after, ids, "no bump before version 2");
    assert_eq!(
        h.coordinator
            .end_txn(TXN, ids.producer_id, ids.epoch, TransactionResult::Commit)
            .unwrap(),
        ids
    );
    // Version 0 values carry no tagged fields.
    assert!(
        h.txn_records(TXN)
            .iter()
            .all(|v| v.as_ref().unwrap().tagged_fields_are_default())
    );
}

#[test]
fn txn_coordinator_should_return_concurrent_transactions_on_end_txn_request_when_status_is_prepare_commit()
 {
    let h = stuck_in(TransactionState::PrepareCommit);
    // The decided end bumped 7 to 8 at version 2: the producer's retry carries 7.
    let error = h
        .coordinator
        .end_txn(TXN, 500, 6, TransactionResult::Commit)
        .unwrap_err();
    assert_eq!(code(error), Some(51));
}

#[test]
fn txn_coordinator_should_return_invalid_txn_request_on_end_txn_request_when_status_is_prepare_abort()
 {
    let h = stuck_in(TransactionState::PrepareAbort);
    let error = h
        .coordinator
        .end_txn(TXN, 500, 6, TransactionResult::Commit)
        .unwrap_err();
    assert_eq!(code(error), Some(48));
    let error = h
        .coordinator
        .end_txn(TXN, 500, 6, TransactionResult::Abort)
        .unwrap_err();
    assert_eq!(code(error), Some(51));
}

#[test]
fn txn_coordinator_end_txn_errors_for_unknown_ids_wrong_producers_and_empty_state() {
    let h = Harness::new(1);
    let error = h
        .coordinator
        .end_txn(TXN, 0, 0, TransactionResult::Commit)
        .unwrap_err();
    assert_eq!(code(error), Some(49));
    let ids = h
        .coordinator
        .init_producer_id(Some(TXN), TIMEOUT, None)
        .unwrap();
    let error = h
        .coordinator
        .end_txn(
            TXN,
            ids.producer_id + 1,
            ids.epoch,
            TransactionResult::Commit,
        )
        .unwrap_err();
    assert_eq!(code(error), Some(49));
    let error = h
        .coordinator
        .end_txn(
            TXN,
            ids.producer_id,
            ids.epoch + 1,
            TransactionResult::Commit,
        )
        .unwrap_err();
    assert_eq!(code(error), Some(90));
    let error = h
        .coordinator
        .end_txn(TXN, ids.producer_id, ids.epoch, TransactionResult::Commit)
        .unwrap_err();
    assert_eq!(code(error), Some(48), "Empty");
}

// Item 5.

#[test]
fn txn_coordinator_should_append_prepare_commit_to_log_on_end_txn_when_status_is_ongoing_and_result_is_commit()
 {
    let h = Harness::new(1);
    let parts = [tp("a", 0), tp("a", 1), tp("b", 0)];
    let ids = begin(&h, &parts);
    assert!(
        parts
            .iter()
            .all(|p| committed(&h.data_log(&p.topic, p.partition)).is_empty())
    );
    let events_before = h.sim.event_count();
    let after = h
        .coordinator
        .end_txn(TXN, ids.producer_id, ids.epoch, TransactionResult::Commit)
        .unwrap();
    // The order of the writes: PrepareCommit, the three markers, CompleteCommit.
    let writes: Vec<String> = h
        .sim
        .events_since(events_before)
        .into_iter()
        .filter_map(|event| match event {
            SimEvent::Write { path, .. } if path.extension().is_some_and(|e| e == "log") => {
                Some(path.parent()?.file_name()?.to_str()?.to_owned())
            }
            _ => None,
        })
        .collect();
    let state_dir = format!(
        "__transaction_state-{}",
        h.coordinator.partition_for(TXN).unwrap()
    );
    assert_eq!(writes.len(), 5, "{writes:?}");
    assert_eq!(writes[0], state_dir, "{writes:?}");
    let mut markers = writes[1..4].to_vec();
    markers.sort();
    assert_eq!(markers, ["a-0", "a-1", "b-0"], "{writes:?}");
    assert_eq!(writes[4], state_dir, "{writes:?}");
    let states: Vec<TransactionState> = h
        .txn_records(TXN)
        .into_iter()
        .map(|v| v.unwrap().state)
        .collect();
    assert_eq!(
        states,
        [
            TransactionState::Empty,
            TransactionState::Ongoing,
            TransactionState::PrepareCommit,
            TransactionState::CompleteCommit
        ]
    );
    let records = h.txn_records(TXN);
    let prepare = records[2].as_ref().unwrap();
    assert_eq!(
        prepare
            .partitions
            .iter()
            .map(|t| t.partitions.len())
            .sum::<usize>(),
        3
    );
    assert_eq!(
        prepare.producer_epoch,
        ids.epoch + 1,
        "the bump is in PrepareCommit"
    );
    assert!(records[3].as_ref().unwrap().partitions.is_empty());
    // Every marker is durable, and the data is visible when end_txn returns.
    for p in &parts {
        let log = h.data_log(&p.topic, p.partition);
        assert_eq!(committed(&log), ["a"]);
        assert_eq!(log.durable_offset(), log.log_end_offset());
        let state = log.producer_state(ids.producer_id).unwrap();
        assert_eq!(
            state.producer_epoch, after.epoch,
            "the marker carries the bumped epoch"
        );
    }
    let metadata = h.coordinator.transaction_metadata(TXN).unwrap();
    assert_eq!(metadata.state, TransactionState::CompleteCommit);
    assert!(metadata.partitions.is_empty());
}

// Item 6.

/// Kafka's test runs at transaction version 0: the fence bumps the epoch once, the retry
/// once more. At version 2 the abort that follows the fence bumps it too, as every end does
/// there, so the retry gets epoch + 3.
#[test]
fn txn_coordinator_should_abort_transaction_on_handle_init_pid_when_existing_transaction_in_ongoing_state()
 {
    for (version, abort_bumps) in [(0, 1), (2, 2)] {
        let mut config = TransactionCoordinatorConfig::default();
        config.transaction_version = version;
        let h = Harness::with_config(1, config);
        let ids = begin(&h, &[tp("t", 0), tp("t", 1)]);
        let error = h
            .coordinator
            .init_producer_id(Some(TXN), TIMEOUT, None)
            .unwrap_err();
        assert_eq!(code(error), Some(51), "version {version}");
        let metadata = h.coordinator.transaction_metadata(TXN).unwrap();
        assert_eq!(metadata.state, TransactionState::CompleteAbort);
        assert_eq!(
            metadata.producer_epoch,
            ids.epoch + abort_bumps,
            "version {version}"
        );
        let states: Vec<TransactionState> = h
            .txn_records(TXN)
            .into_iter()
            .map(|v| v.unwrap().state)
            .collect();
        assert_eq!(
            &states[2..],
            [
                TransactionState::PrepareAbort,
                TransactionState::CompleteAbort
            ]
        );
        for p in 0..2 {
            let log = h.data_log("t", p);
            assert!(committed(&log).is_empty());
            assert_eq!(log.first_unstable_offset(), None, "no hanging transaction");
        }
        // The old producer is fenced.
        let error = h
            .coordinator
            .end_txn(TXN, ids.producer_id, ids.epoch, TransactionResult::Commit)
            .unwrap_err();
        assert_eq!(code(error), Some(90), "version {version}");
        let error = h
            .coordinator
            .add_partitions(TXN, ids.producer_id, ids.epoch, &[tp("t", 2)])
            .unwrap_err();
        assert_eq!(code(error), Some(90), "version {version}");
        // The retry bumps again.
        let retried = h
            .coordinator
            .init_producer_id(Some(TXN), TIMEOUT, None)
            .unwrap();
        assert_eq!(retried.producer_id, ids.producer_id);
        assert_eq!(
            retried.epoch,
            ids.epoch + abort_bumps + 1,
            "version {version}"
        );
    }
}

#[test]
fn txn_coordinator_should_not_repeatedly_bump_epoch_due_to_init_pid_during_ongoing_txn_if_append_to_log_fails()
 {
    // Kafka's test runs at transaction version 0 (at 2 the abort bumps once more).
    let mut config = TransactionCoordinatorConfig::default();
    config.transaction_version = 0;
    let h = Harness::with_config(1, config);
    let ids = begin(&h, &[tp("t", 0)]);
    let state_dir = format!(
        "__transaction_state-{}",
        h.coordinator.partition_for(TXN).unwrap()
    );
    let records_before = h.txn_records(TXN).len();
    for attempt in 0..2 {
        // The PrepareAbort write fails.
        let fault = h
            .sim
            .inject(FaultRule::fail(FaultOp::Write, 1).on_paths_ending_with(".log"));
        let error = h
            .coordinator
            .init_producer_id(Some(TXN), TIMEOUT, None)
            .unwrap_err();
        h.sim.cancel_fault(fault);
        assert_eq!(error.kafka_code(), Some(56), "attempt {attempt}: {error}");
        let metadata = h.coordinator.transaction_metadata(TXN).unwrap();
        assert_eq!(metadata.state, TransactionState::Ongoing, "rolled back");
        assert_eq!(metadata.pending_state, None, "rolled back");
        assert_eq!(
            metadata.producer_epoch,
            ids.epoch + 1,
            "bumped once, attempt {attempt}"
        );
        assert!(metadata.has_failed_epoch_fence);
        assert_eq!(
            h.txn_records(TXN).len(),
            records_before,
            "{state_dir}: nothing written"
        );
    }
    let error = h
        .coordinator
        .init_producer_id(Some(TXN), TIMEOUT, None)
        .unwrap_err();
    assert_eq!(code(error), Some(51));
    let metadata = h.coordinator.transaction_metadata(TXN).unwrap();
    assert_eq!(metadata.producer_epoch, ids.epoch + 1, "not bumped further");
    assert!(!metadata.has_failed_epoch_fence);
    assert_eq!(metadata.state, TransactionState::CompleteAbort);
    assert!(committed(&h.data_log("t", 0)).is_empty());
}

#[test]
fn txn_coordinator_a_failed_prepare_commit_rolls_back_and_the_retry_commits() {
    let h = Harness::new(1);
    let ids = begin(&h, &[tp("t", 0)]);
    let fault = h
        .sim
        .inject(FaultRule::fail(FaultOp::Write, 1).on_paths_ending_with(".log"));
    let error = h
        .coordinator
        .end_txn(TXN, ids.producer_id, ids.epoch, TransactionResult::Commit)
        .unwrap_err();
    h.sim.cancel_fault(fault);
    assert_eq!(error.kafka_code(), Some(56), "{error}");
    let metadata = h.coordinator.transaction_metadata(TXN).unwrap();
    assert_eq!(
        (metadata.state, metadata.pending_state),
        (TransactionState::Ongoing, None)
    );
    assert_eq!(metadata.producer_epoch, ids.epoch, "nothing changed");
    h.coordinator
        .end_txn(TXN, ids.producer_id, ids.epoch, TransactionResult::Commit)
        .unwrap();
    assert_eq!(committed(&h.data_log("t", 0)), ["a"]);
}

// Item 8, through the coordinator.

#[test]
fn txn_coordinator_test_epoch_bump_on_end_txn_overflow() {
    let sim = partlog::unstable::SimStorage::new(2);
    let clock = Arc::new(partlog::unstable::ManualClock::new(T0));
    let h = Harness::open(
        sim,
        clock,
        TransactionCoordinatorConfig::default(),
        |logs| {
            seed(
                logs,
                TXN,
                &value(
                    500,
                    i16::MAX - 1,
                    TransactionState::CompleteCommit,
                    "t",
                    &[],
                ),
            );
        },
    );
    h.coordinator
        .add_partitions(TXN, 500, i16::MAX - 1, &[tp("t", 0)])
        .unwrap();
    write_txn(&h.data_log("t", 0), 500, i16::MAX - 1, 0, &["a"]);
    let after = h
        .coordinator
        .end_txn(TXN, 500, i16::MAX - 1, TransactionResult::Commit)
        .unwrap();
    assert_ne!(after.producer_id, 500);
    assert_eq!(after.epoch, 0);
    assert_eq!(committed(&h.data_log("t", 0)), ["a"]);
    let state = h.data_log("t", 0).producer_state(500).unwrap();
    assert_eq!(
        state.producer_epoch,
        i16::MAX,
        "the marker carries the last epoch"
    );
    let last = h.txn_records(TXN).pop().unwrap().unwrap();
    assert_eq!(
        (last.producer_id, last.producer_epoch),
        (after.producer_id, 0)
    );
    assert_eq!(last.previous_producer_id, 500);
    // The retry of the end that overflowed is recognised.
    let retried = h
        .coordinator
        .end_txn(TXN, 500, i16::MAX - 1, TransactionResult::Commit)
        .unwrap();
    assert_eq!(retried, after);
}
