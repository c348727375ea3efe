//! Kafka's `ProducerStateManagerTest` and the producer-state cases of `UnifiedLogTest`, ported at
//! the manager level, plus a property test of the invariants.

use proptest::prelude::*;

use super::entry::NUM_BATCHES_TO_RETAIN;
use super::*;
use crate::error::Error;

const PRODUCER_ID: i64 = 1;
const EPOCH: i16 = 0;
const DEFAULT_SEQUENCE: i32 = 0;
/// Kafka's `PRODUCER_ID_EXPIRATION_MS_DEFAULT`.
const EXPIRATION_MS: i64 = 86_400_000;
/// The tests' clock: Kafka's `MockTime` starts at an arbitrary wall-clock time too.
const NOW: i64 = 1_700_000_000_000;

fn config(verification: bool) -> ProducerStateConfig {
    ProducerStateConfig {
        producer_id_expiration_ms: EXPIRATION_MS,
        transaction_verification_enabled: verification,
    }
}

fn manager() -> ProducerStateManager {
    ProducerStateManager::new(config(false), 0)
}

/// `seq + delta` with Kafka's wrap after `i32::MAX`.
fn add_sequence(seq: i32, delta: i32) -> i32 {
    if seq > i32::MAX - delta {
        delta - (i32::MAX - seq) - 1
    } else {
        seq + delta
    }
}

fn data(
    producer_id: i64,
    epoch: i16,
    base_sequence: i32,
    first_offset: i64,
    last_offset: i64,
    timestamp: i64,
    is_transactional: bool,
) -> BatchSummary {
    let delta = i32::try_from(last_offset - first_offset).unwrap();
    BatchSummary {
        producer_id,
        producer_epoch: epoch,
        base_sequence,
        last_sequence: add_sequence(base_sequence, delta),
        first_offset,
        last_offset,
        timestamp,
        is_transactional,
        kind: BatchKind::Data,
    }
}

fn marker(
    producer_id: i64,
    epoch: i16,
    offset: i64,
    is_abort: bool,
    coordinator_epoch: i32,
    timestamp: i64,
) -> BatchSummary {
    BatchSummary {
        producer_id,
        producer_epoch: epoch,
        base_sequence: -1,
        last_sequence: -1,
        first_offset: offset,
        last_offset: offset,
        timestamp,
        is_transactional: true,
        kind: BatchKind::Marker {
            is_abort,
            coordinator_epoch,
        },
    }
}

/// Kafka's `appendEntry`, with its parameters: one single-record batch at `offset`, validated at the
/// `ProducerAppendInfo` level (no duplicate check), applied, and the map end moved past it.
#[allow(
    clippy::too_many_arguments,
    reason = "the parameters of Kafka's appendEntry, so that ported cases read as Kafka's"
)]
fn append_entry(
    manager: &mut ProducerStateManager,
    producer_id: i64,
    epoch: i16,
    seq: i32,
    offset: i64,
    timestamp: i64,
    origin: AppendOrigin,
    is_transactional: bool,
) -> Result<()> {
    let mut info = manager.prepare_update(producer_id, origin);
    info.append_data_batch(&data(
        producer_id,
        epoch,
        seq,
        offset,
        offset,
        timestamp,
        is_transactional,
    ))?;
    manager.update(info);
    manager.update_map_end_offset(offset + 1);
    Ok(())
}

fn append_client_entry(
    manager: &mut ProducerStateManager,
    producer_id: i64,
    epoch: i16,
    seq: i32,
    offset: i64,
    is_transactional: bool,
) -> Result<()> {
    append_entry(
        manager,
        producer_id,
        epoch,
        seq,
        offset,
        NOW,
        AppendOrigin::Client,
        is_transactional,
    )
}

fn append_replication_entry(manager: &mut ProducerStateManager, epoch: i16, seq: i32, offset: i64) {
    append_entry(
        manager,
        PRODUCER_ID,
        epoch,
        seq,
        offset,
        NOW,
        AppendOrigin::Replication,
        false,
    )
    .unwrap();
}

/// Kafka's `appendEndTxnMarker`: a marker from the coordinator, applied, its transaction
/// completed, the map end moved past it.
fn append_end_txn_marker(
    manager: &mut ProducerStateManager,
    producer_id: i64,
    epoch: i16,
    is_abort: bool,
    offset: i64,
    coordinator_epoch: i32,
) -> Result<Option<CompletedTxn>> {
    let mut info = manager.prepare_update(producer_id, AppendOrigin::Coordinator);
    let completed = info.append(&marker(
        producer_id,
        epoch,
        offset,
        is_abort,
        coordinator_epoch,
        NOW,
    ))?;
    manager.update(info);
    if let Some(txn) = completed {
        manager.complete_txn(txn);
    }
    manager.update_map_end_offset(offset + 1);
    Ok(completed)
}

fn entry(manager: &ProducerStateManager, producer_id: i64) -> &ProducerStateEntry {
    manager
        .last_entry(producer_id)
        .unwrap_or_else(|| panic!("producer {producer_id} should have an entry"))
}

/// What a snapshot keeps of the state: the 46-byte entry fields, through the getters the
/// snapshot writer uses and the constructor its reader uses.
fn snapshot_round_trip(manager: &ProducerStateManager) -> Vec<(i64, ProducerStateEntry)> {
    manager
        .entries()
        .into_iter()
        .map(|(pid, e)| {
            (
                pid,
                ProducerStateEntry::from_snapshot(
                    e.producer_epoch,
                    e.last_seq(),
                    e.last_data_offset(),
                    e.last_offset_delta(),
                    e.last_timestamp,
                    e.coordinator_epoch,
                    e.current_txn_first_offset.unwrap_or(-1),
                ),
            )
        })
        .collect()
}

fn kafka_code<T: std::fmt::Debug>(result: Result<T>) -> i16 {
    match result {
        Err(error) => error.kafka_code().unwrap_or(-1),
        Ok(value) => panic!("expected an error, got {value:?}"),
    }
}

#[test]
fn producer_state_basic_id_mapping() {
    let mut m = manager();
    append_client_entry(&mut m, PRODUCER_ID, EPOCH, DEFAULT_SEQUENCE, 0, false).unwrap();
    append_client_entry(&mut m, PRODUCER_ID, EPOCH, 1, 1, false).unwrap();
    // Duplicates are caught one level up, by `analyze`: here a re-send is out of order.
    assert_eq!(
        kafka_code(append_client_entry(&mut m, PRODUCER_ID, EPOCH, 1, 1, false)),
        45
    );
    let error = append_client_entry(&mut m, PRODUCER_ID, EPOCH, 5, 2, false).unwrap_err();
    assert!(
        matches!(
            error,
            Error::OutOfOrderSequence {
                producer_id: PRODUCER_ID,
                expected: 2,
                found: 5
            }
        ),
        "{error}"
    );
    append_client_entry(&mut m, PRODUCER_ID, EPOCH + 1, DEFAULT_SEQUENCE, 3, false).unwrap();
    let error =
        append_client_entry(&mut m, PRODUCER_ID, EPOCH, DEFAULT_SEQUENCE, 4, false).unwrap_err();
    assert!(
        matches!(
            error,
            Error::InvalidProducerEpoch {
                producer_id: PRODUCER_ID,
                current: 1,
                found: 0
            }
        ),
        "{error}"
    );
}

#[test]
fn producer_state_append_txn_marker_with_no_producer_state() {
    let mut m = manager();
    let producer_epoch = 2;
    append_end_txn_marker(&mut m, PRODUCER_ID, producer_epoch, false, 27, 0).unwrap();
    let first = entry(&m, PRODUCER_ID);
    assert_eq!(first.producer_epoch, producer_epoch);
    assert_eq!(first.last_seq(), -1);
    // Fencing works when the marker is all that is left of the producer.
    assert_eq!(
        kafka_code(append_client_entry(
            &mut m,
            PRODUCER_ID,
            0,
            DEFAULT_SEQUENCE,
            4,
            false
        )),
        47
    );
    // A non-zero sequence after the marker asks the producer to reset its sequence.
    assert_eq!(
        kafka_code(append_client_entry(
            &mut m,
            PRODUCER_ID,
            producer_epoch,
            17,
            4,
            false
        )),
        45
    );
    append_entry(
        &mut m,
        PRODUCER_ID,
        producer_epoch,
        DEFAULT_SEQUENCE,
        4,
        39,
        AppendOrigin::Client,
        false,
    )
    .unwrap();
    let second = entry(&m, PRODUCER_ID);
    assert_eq!(second.producer_epoch, producer_epoch);
    assert_eq!(second.last_seq(), 0);
}

#[test]
fn producer_state_producer_sequence_wrap_around() {
    let mut m = manager();
    let epoch = 15;
    let offset = 735;
    append_replication_entry(&mut m, epoch, i32::MAX, offset);
    append_client_entry(&mut m, PRODUCER_ID, epoch, 0, offset + 500, false).unwrap();
    let last = entry(&m, PRODUCER_ID);
    assert_eq!(last.producer_epoch, epoch);
    assert_eq!(last.first_seq(), i32::MAX);
    assert_eq!(last.last_seq(), 0);
}

#[test]
fn producer_state_producer_sequence_invalid_wrap_around() {
    let mut m = manager();
    let epoch = 15;
    let offset = 735;
    append_replication_entry(&mut m, epoch, i32::MAX, offset);
    let error =
        append_client_entry(&mut m, PRODUCER_ID, epoch, 1, offset + 500, false).unwrap_err();
    assert!(
        matches!(
            error,
            Error::OutOfOrderSequence {
                expected: 0,
                found: 1,
                ..
            }
        ),
        "{error}"
    );
}

#[test]
fn producer_state_producer_sequence_with_wrap_around_batch_record() {
    let mut m = manager();
    let epoch = 15;
    let first_sequence = i32::MAX - 10;
    let mut info = m.prepare_update(PRODUCER_ID, AppendOrigin::Replication);
    let batch = data(PRODUCER_ID, epoch, first_sequence, 2000, 2020, NOW, false);
    assert_eq!(batch.last_sequence, 9, "the batch's sequences wrap");
    info.append_data_batch(&batch).unwrap();
    assert!(
        m.last_entry(PRODUCER_ID).is_none(),
        "validation changes nothing"
    );
    m.update(info);
    let last = entry(&m, PRODUCER_ID);
    assert_eq!(last.first_seq(), first_sequence);
    assert_eq!(last.last_seq(), 9);
    assert_eq!(last.first_data_offset(), 2000);
    assert_eq!(last.last_data_offset(), 2020);
}

#[test]
fn producer_state_no_validation_on_first_entry_when_loading_log() {
    let mut m = manager();
    let (epoch, sequence, offset) = (5, 16, 735);
    append_replication_entry(&mut m, epoch, sequence, offset);
    let last = entry(&m, PRODUCER_ID);
    assert_eq!(last.producer_epoch, epoch);
    assert_eq!(last.first_seq(), sequence);
    assert_eq!(last.last_seq(), sequence);
    assert_eq!(last.last_data_offset(), offset);
    assert_eq!(last.first_data_offset(), offset);
}

#[test]
fn producer_state_control_record_bumps_producer_epoch() {
    let mut m = manager();
    append_client_entry(&mut m, PRODUCER_ID, EPOCH, DEFAULT_SEQUENCE, 0, false).unwrap();
    let bumped = 1;
    append_end_txn_marker(&mut m, PRODUCER_ID, bumped, true, 1, 0).unwrap();
    let last = entry(&m, PRODUCER_ID);
    assert_eq!(last.producer_epoch, bumped);
    assert_eq!(last.current_txn_first_offset, None);
    assert_eq!(last.first_seq(), -1);
    assert_eq!(last.last_seq(), -1);
    append_client_entry(&mut m, PRODUCER_ID, bumped, 0, 2, false).unwrap();
    assert_eq!(entry(&m, PRODUCER_ID).first_seq(), DEFAULT_SEQUENCE);
}

#[test]
fn producer_state_out_of_sequence_after_control_record_epoch_bump() {
    let mut m = manager();
    append_client_entry(&mut m, PRODUCER_ID, EPOCH, DEFAULT_SEQUENCE, 0, true).unwrap();
    append_client_entry(&mut m, PRODUCER_ID, EPOCH, 1, 1, true).unwrap();
    let bumped = 1;
    append_end_txn_marker(&mut m, PRODUCER_ID, bumped, true, 1, 0).unwrap();
    assert_eq!(
        kafka_code(append_client_entry(&mut m, PRODUCER_ID, bumped, 2, 2, true)),
        45
    );
    assert_eq!(
        kafka_code(append_client_entry(
            &mut m,
            PRODUCER_ID,
            bumped + 1,
            2,
            2,
            true
        )),
        45
    );
    append_client_entry(&mut m, PRODUCER_ID, bumped, DEFAULT_SEQUENCE, 0, true).unwrap();
    let last = entry(&m, PRODUCER_ID);
    assert_eq!(last.producer_epoch, bumped);
    assert_eq!(last.last_seq(), 0);
}

#[test]
fn producer_state_non_transactional_append_with_ongoing_transaction() {
    let mut m = manager();
    append_client_entry(&mut m, PRODUCER_ID, EPOCH, DEFAULT_SEQUENCE, 0, true).unwrap();
    assert_eq!(
        kafka_code(append_client_entry(&mut m, PRODUCER_ID, EPOCH, 1, 1, false)),
        48
    );
}

#[test]
fn producer_state_old_epoch_for_control_record() {
    let mut m = manager();
    let epoch = 5;
    assert_eq!(m.first_undecided_offset(), None);
    append_client_entry(&mut m, PRODUCER_ID, epoch, DEFAULT_SEQUENCE, 99, true).unwrap();
    let error = append_end_txn_marker(&mut m, PRODUCER_ID, 3, false, 100, 0).unwrap_err();
    assert!(
        matches!(
            error,
            Error::InvalidProducerEpoch {
                current: 5,
                found: 3,
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(
        m.first_undecided_offset(),
        Some(99),
        "the refused marker ended nothing"
    );
}

#[test]
fn producer_state_coordinator_fencing() {
    let mut m = manager();
    let epoch = 5;
    append_client_entry(&mut m, PRODUCER_ID, epoch, DEFAULT_SEQUENCE, 99, true).unwrap();
    append_end_txn_marker(&mut m, PRODUCER_ID, epoch, false, 100, 1).unwrap();
    assert_eq!(entry(&m, PRODUCER_ID).coordinator_epoch, 1);
    // The current coordinator epoch is allowed, and so is a newer one.
    append_end_txn_marker(&mut m, PRODUCER_ID, epoch, false, 101, 1).unwrap();
    append_end_txn_marker(&mut m, PRODUCER_ID, epoch, false, 102, 2).unwrap();
    let error = append_end_txn_marker(&mut m, PRODUCER_ID, epoch, false, 103, 1).unwrap_err();
    assert!(
        matches!(
            error,
            Error::TransactionCoordinatorFenced {
                current: 2,
                found: 1,
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(error.kafka_code(), Some(52));
}

#[test]
fn producer_state_coordinator_fenced_after_reload() {
    let mut m = manager();
    append_client_entry(&mut m, PRODUCER_ID, EPOCH, DEFAULT_SEQUENCE, 99, true).unwrap();
    append_end_txn_marker(&mut m, PRODUCER_ID, EPOCH, false, 100, 1).unwrap();
    let mut recovered = manager();
    recovered.load_entries(snapshot_round_trip(&m), m.map_end_offset(), 70_000);
    // Kafka's test asserts on the original manager by mistake; the reloaded one must fence.
    assert_eq!(
        kafka_code(append_end_txn_marker(
            &mut recovered,
            PRODUCER_ID,
            EPOCH,
            false,
            100,
            0
        )),
        52
    );
}

#[test]
fn producer_state_zombie_coordinator_fenced_empty_transaction() {
    let mut m = manager();
    let epoch = 0;
    // Empty transactions (no data before the marker) are still fenced by coordinator epoch.
    let first = append_end_txn_marker(&mut m, PRODUCER_ID, epoch, true, 0, 2).unwrap();
    assert_eq!(first, None, "an empty transaction completes nothing");
    append_end_txn_marker(&mut m, PRODUCER_ID, epoch, true, 1, 2).unwrap();
    assert_eq!(
        kafka_code(append_end_txn_marker(
            &mut m,
            PRODUCER_ID,
            epoch,
            true,
            2,
            1
        )),
        52
    );
}

#[test]
fn producer_state_pid_expiration_timeout() {
    let mut m = manager();
    let epoch = 5;
    append_client_entry(&mut m, PRODUCER_ID, epoch, DEFAULT_SEQUENCE, 1, false).unwrap();
    m.remove_expired_producers(NOW + EXPIRATION_MS - 1);
    assert_eq!(m.producer_count(), 1, "not yet idle for the whole timeout");
    m.remove_expired_producers(NOW + EXPIRATION_MS + 1);
    assert_eq!(m.producer_count(), 0);
    // With its state gone, any sequence is accepted.
    append_client_entry(&mut m, PRODUCER_ID, epoch, DEFAULT_SEQUENCE + 1, 2, false).unwrap();
    assert_eq!(m.producer_count(), 1);
    assert_eq!(entry(&m, PRODUCER_ID).last_seq(), DEFAULT_SEQUENCE + 1);
    assert_eq!(m.map_end_offset(), 3);
}

#[test]
fn producer_state_producers_with_ongoing_transactions_dont_expire() {
    let mut m = manager();
    let epoch = 5;
    append_client_entry(&mut m, PRODUCER_ID, epoch, DEFAULT_SEQUENCE, 99, true).unwrap();
    assert_eq!(m.first_undecided_offset(), Some(99));
    m.remove_expired_producers(NOW + EXPIRATION_MS + 1);
    assert!(m.last_entry(PRODUCER_ID).is_some());
    assert_eq!(m.first_undecided_offset(), Some(99));
}

#[test]
fn producer_state_after_fencing_abort_marker_keeps_the_epoch() {
    let mut m = manager();
    append_client_entry(&mut m, PRODUCER_ID, EPOCH, DEFAULT_SEQUENCE, 0, true).unwrap();
    append_end_txn_marker(&mut m, PRODUCER_ID, EPOCH + 1, true, 1, 0).unwrap();
    let last = entry(&m, PRODUCER_ID);
    assert_eq!(last.current_txn_first_offset, None);
    assert_eq!(last.last_data_offset(), -1);
    assert_eq!(last.first_data_offset(), -1);
    m.remove_expired_producers(NOW);
    assert!(
        m.last_entry(PRODUCER_ID).is_some(),
        "the fencing epoch stays"
    );
}

#[test]
fn producer_state_remove_expired_pids_on_reload() {
    let mut m = manager();
    append_entry(&mut m, 1, EPOCH, 0, 0, 0, AppendOrigin::Client, false).unwrap();
    append_entry(&mut m, 2, EPOCH, 0, 1, 1, AppendOrigin::Client, false).unwrap();
    let mut reloaded = manager();
    reloaded.load_entries(snapshot_round_trip(&m), 1, EXPIRATION_MS);
    // Producer 1 wrote at 0 and is idle for exactly the timeout; producer 2 is not.
    assert!(reloaded.last_entry(1).is_none());
    let second = entry(&reloaded, 2);
    assert_eq!(second.last_seq(), 0);
    assert_eq!(second.last_data_offset(), 1);
}

#[test]
fn producer_state_first_unstable_offset() {
    let mut m = manager();
    let epoch = 5;
    assert_eq!(m.first_undecided_offset(), None);
    append_client_entry(&mut m, PRODUCER_ID, epoch, DEFAULT_SEQUENCE, 99, true).unwrap();
    assert_eq!(m.first_undecided_offset(), Some(99));
    assert_eq!(m.first_unstable_offset(), Some(99));
    let another = 2;
    append_client_entry(&mut m, another, epoch, DEFAULT_SEQUENCE, 105, true).unwrap();
    assert_eq!(m.first_undecided_offset(), Some(99));
    assert_eq!(m.first_unstable_offset(), Some(99));
    append_end_txn_marker(&mut m, PRODUCER_ID, epoch, false, 109, 0).unwrap();
    assert_eq!(m.first_undecided_offset(), Some(105));
    assert_eq!(m.first_unstable_offset(), Some(99));
    m.on_high_watermark_updated(100);
    assert_eq!(m.first_unstable_offset(), Some(99));
    assert_eq!(m.lso(100, 0), 99);
    m.on_high_watermark_updated(110);
    assert_eq!(m.first_unstable_offset(), Some(105));
    assert_eq!(m.lso(110, 0), 105);
    append_end_txn_marker(&mut m, another, epoch, true, 112, 0).unwrap();
    assert_eq!(m.first_undecided_offset(), None);
    assert_eq!(m.first_unstable_offset(), Some(105));
    m.on_high_watermark_updated(113);
    assert_eq!(m.first_unstable_offset(), None);
    assert_eq!(
        m.lso(113, 0),
        113,
        "with no transaction the LSO is the high watermark"
    );
    assert_eq!(m.lso(113, 120), 120, "the LSO is never below the log start");
}

#[test]
fn producer_state_last_stable_offset_completed_txn() {
    let mut m = manager();
    let begin = |m: &mut ProducerStateManager, producer_id: i64, offset: i64| {
        append_client_entry(m, producer_id, EPOCH, 0, offset, true).unwrap();
    };
    let start1 = 992_342;
    let (pid1, pid2, pid3) = (PRODUCER_ID, PRODUCER_ID + 1, PRODUCER_ID + 2);
    begin(&mut m, pid1, start1);
    let start2 = start1 + 25;
    begin(&mut m, pid2, start2);
    let start3 = start1 + 57;
    begin(&mut m, pid3, start3);

    let last1 = start3 + 15;
    let txn1 = CompletedTxn {
        producer_id: pid1,
        first_offset: start1,
        last_offset: last1,
        is_aborted: false,
    };
    assert_eq!(m.last_stable_offset(&txn1), start2);
    m.complete_txn(txn1);
    m.on_high_watermark_updated(last1 + 1);
    assert_eq!(m.first_unstable_offset(), Some(start2));

    let last3 = last1 + 20;
    let txn3 = CompletedTxn {
        producer_id: pid3,
        first_offset: start3,
        last_offset: last3,
        is_aborted: false,
    };
    assert_eq!(m.last_stable_offset(&txn3), start2);
    m.complete_txn(txn3);
    m.on_high_watermark_updated(last3 + 1);
    assert_eq!(m.first_unstable_offset(), Some(start2));

    let last2 = last3 + 78;
    let txn2 = CompletedTxn {
        producer_id: pid2,
        first_offset: start2,
        last_offset: last2,
        is_aborted: false,
    };
    assert_eq!(m.last_stable_offset(&txn2), last2 + 1);
    m.complete_txn(txn2);
    m.on_high_watermark_updated(last2 + 1);
    assert_eq!(m.first_unstable_offset(), None);
}

#[test]
fn producer_state_skip_empty_transactions() {
    let mut m = manager();
    let mut seq = DEFAULT_SEQUENCE;
    let mut append_data = |info: &mut ProducerAppendInfo, start: i64, end: i64| {
        let count = i32::try_from(end - start).unwrap();
        info.append_data_batch(&data(PRODUCER_ID, EPOCH, seq, start, end, NOW, true))
            .unwrap();
        seq += count + 1;
    };
    let end_txn = |info: &mut ProducerAppendInfo, is_abort: bool, offset: i64| {
        info.append_end_txn_marker(EPOCH, offset, NOW, is_abort, 27)
            .unwrap()
    };

    let mut first = m.prepare_update(PRODUCER_ID, AppendOrigin::Client);
    append_data(&mut first, 16, 20);
    assert_eq!(first.started_transactions(), &[16]);
    m.update(first);
    m.on_high_watermark_updated(21);
    assert_eq!(m.first_unstable_offset(), Some(16));

    // One append ends the old transaction, mixes in empty transactions, one complete
    // transaction and one left open.
    let mut second = m.prepare_update(PRODUCER_ID, AppendOrigin::Client);
    let first_completed = end_txn(&mut second, false, 21);
    assert_eq!(
        first_completed,
        Some(CompletedTxn {
            producer_id: PRODUCER_ID,
            first_offset: 16,
            last_offset: 21,
            is_aborted: false
        })
    );
    assert_eq!(end_txn(&mut second, false, 22), None);
    assert_eq!(end_txn(&mut second, true, 23), None);
    append_data(&mut second, 24, 27);
    let second_completed = end_txn(&mut second, true, 28);
    assert!(second_completed.is_some());
    assert_eq!(end_txn(&mut second, true, 29), None);
    append_data(&mut second, 30, 31);
    assert_eq!(second.started_transactions(), &[24, 30]);
    let finished = m.commit(second, 32);
    assert_eq!(
        finished.iter().map(|f| f.txn).collect::<Vec<_>>(),
        vec![first_completed.unwrap(), second_completed.unwrap()]
    );
    m.on_high_watermark_updated(32);
    assert_eq!(m.first_unstable_offset(), Some(30));
}

#[test]
fn producer_state_take_snapshot_only_when_the_map_moved() {
    // Kafka's testTakeSnapshot and testSkipSnapshotIfOffsetUnchanged, at the manager level:
    // the file is the integration's, the decision is the manager's.
    let mut m = manager();
    assert!(
        !m.needs_snapshot(),
        "an empty map at the log start needs no snapshot"
    );
    append_client_entry(&mut m, PRODUCER_ID, EPOCH, 0, 0, false).unwrap();
    append_client_entry(&mut m, PRODUCER_ID, EPOCH, 1, 1, false).unwrap();
    assert!(m.needs_snapshot());
    assert_eq!(m.map_end_offset(), 2);
    m.snapshot_written(m.map_end_offset());
    assert!(
        !m.needs_snapshot(),
        "nothing changed: no second snapshot at 2"
    );
    assert_eq!(m.last_snapshot_offset(), 2);
    let entries = m.entries();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].0, PRODUCER_ID);
}

#[test]
fn producer_state_entries_are_sorted_and_reload_keeps_only_the_newest_batch() {
    let mut m = manager();
    for pid in [9, 3, 7] {
        for seq in 0..3 {
            let offset = m.map_end_offset();
            append_client_entry(&mut m, pid, EPOCH, seq, offset, false).unwrap();
        }
    }
    let pids: Vec<i64> = m.entries().iter().map(|&(pid, _)| pid).collect();
    assert_eq!(pids, vec![3, 7, 9]);
    assert_eq!(entry(&m, 3).batches.len(), 3);

    let mut reloaded = manager();
    reloaded.load_entries(snapshot_round_trip(&m), m.map_end_offset(), NOW);
    assert_eq!(reloaded.map_end_offset(), 9);
    assert!(!reloaded.needs_snapshot());
    // After a reload, only the newest batch of each producer is recognised as a duplicate.
    let newest = data(3, EPOCH, 2, 5, 5, NOW, false);
    assert!(matches!(
        reloaded.analyze(&newest, AppendOrigin::Client).unwrap(),
        ProducerAppendCheck::Duplicate {
            first_offset: 5,
            last_offset: 5
        }
    ));
    let older = data(3, EPOCH, 1, 9, 9, NOW, false);
    assert_eq!(
        kafka_code(reloaded.analyze(&older, AppendOrigin::Client)),
        45
    );
    // Replaying more batches rebuilds the window.
    let next = data(3, EPOCH, 3, 9, 9, NOW, false);
    reloaded.replay(&next).unwrap();
    assert!(matches!(
        reloaded.analyze(&newest, AppendOrigin::Client).unwrap(),
        ProducerAppendCheck::Duplicate { .. }
    ));
}

#[test]
fn producer_state_prepare_update_does_not_mutate() {
    let mut m = manager();
    let mut info = m.prepare_update(PRODUCER_ID, AppendOrigin::Client);
    info.append_data_batch(&data(PRODUCER_ID, EPOCH, 0, 15, 20, NOW, false))
        .unwrap();
    assert!(m.last_entry(PRODUCER_ID).is_none());
    m.update(info);
    let mut next = m.prepare_update(PRODUCER_ID, AppendOrigin::Client);
    next.append_data_batch(&data(PRODUCER_ID, EPOCH, 6, 26, 30, NOW, false))
        .unwrap();
    let last = entry(&m, PRODUCER_ID);
    assert_eq!((last.first_seq(), last.last_seq()), (0, 5));
    assert_eq!(last.last_data_offset(), 20);
    m.update(next);
    let last = entry(&m, PRODUCER_ID);
    assert_eq!((last.first_seq(), last.last_seq()), (0, 10));
    assert_eq!(last.last_data_offset(), 30);
}

#[test]
fn producer_state_update_producer_transaction_state() {
    let mut m = manager();
    let coordinator_epoch = 15;
    append_client_entry(&mut m, PRODUCER_ID, EPOCH, DEFAULT_SEQUENCE, 9, false).unwrap();
    let mut info = m.prepare_update(PRODUCER_ID, AppendOrigin::Client);
    let check = |info: &ProducerAppendInfo, last_seq: i32, last_offset: i64, txn: Option<i64>| {
        let updated = info.updated_entry();
        assert_eq!(updated.producer_epoch, EPOCH);
        assert_eq!((updated.first_seq(), updated.last_seq()), (1, last_seq));
        assert_eq!(
            (updated.first_data_offset(), updated.last_data_offset()),
            (16, last_offset)
        );
        assert_eq!(updated.current_txn_first_offset, txn);
        assert_eq!(info.started_transactions(), &[16]);
    };
    info.append_data_batch(&data(PRODUCER_ID, EPOCH, 1, 16, 20, NOW, true))
        .unwrap();
    check(&info, 5, 20, Some(16));
    info.append_data_batch(&data(PRODUCER_ID, EPOCH, 6, 26, 30, NOW, true))
        .unwrap();
    check(&info, 10, 30, Some(16));
    let completed = info
        .append_end_txn_marker(EPOCH, 40, NOW, false, coordinator_epoch)
        .unwrap()
        .expect("the transaction should be completed");
    assert_eq!(
        completed,
        CompletedTxn {
            producer_id: PRODUCER_ID,
            first_offset: 16,
            last_offset: 40,
            is_aborted: false
        }
    );
    // The marker leaves the remembered batches as they were.
    check(&info, 10, 30, None);
    m.commit(info, 41);
    let last = entry(&m, PRODUCER_ID);
    assert_eq!(last.coordinator_epoch, coordinator_epoch);
    assert_eq!(last.current_txn_first_offset, None);
    assert_eq!((last.first_seq(), last.last_seq()), (0, 10));
    assert_eq!(m.first_undecided_offset(), None);
    assert_eq!(m.first_unstable_offset(), Some(16));
}

#[test]
fn producer_state_recover_from_snapshot_unfinished_transaction() {
    let mut m = manager();
    append_client_entry(&mut m, PRODUCER_ID, EPOCH, 0, 0, true).unwrap();
    append_client_entry(&mut m, PRODUCER_ID, EPOCH, 1, 1, true).unwrap();
    let mut recovered = manager();
    recovered.load_entries(snapshot_round_trip(&m), m.map_end_offset(), NOW);
    // The snapshot keeps only the newest batch.
    let loaded = entry(&recovered, PRODUCER_ID);
    assert_eq!(
        (loaded.first_data_offset(), loaded.last_data_offset()),
        (1, 1)
    );
    assert_eq!((loaded.first_seq(), loaded.last_seq()), (1, 1));
    assert_eq!(loaded.current_txn_first_offset, Some(0));
    assert_eq!(recovered.first_unstable_offset(), Some(0));
    append_client_entry(&mut recovered, PRODUCER_ID, EPOCH, 2, 2, true).unwrap();
}

#[test]
fn producer_state_recover_from_snapshot_finished_transaction() {
    let mut m = manager();
    append_client_entry(&mut m, PRODUCER_ID, EPOCH, 0, 0, true).unwrap();
    append_client_entry(&mut m, PRODUCER_ID, EPOCH, 1, 1, true).unwrap();
    append_end_txn_marker(&mut m, PRODUCER_ID, EPOCH, true, 2, 0).unwrap();
    let mut recovered = manager();
    recovered.load_entries(snapshot_round_trip(&m), m.map_end_offset(), NOW);
    let loaded = entry(&recovered, PRODUCER_ID);
    assert_eq!(
        (loaded.first_data_offset(), loaded.last_data_offset()),
        (1, 1)
    );
    assert_eq!((loaded.first_seq(), loaded.last_seq()), (1, 1));
    assert_eq!(loaded.current_txn_first_offset, None);
    assert_eq!(recovered.first_unstable_offset(), None);
    assert_eq!(recovered.map_end_offset(), 3);
}

#[test]
fn producer_state_recover_from_snapshot_empty_transaction() {
    let mut m = manager();
    let append_timestamp = NOW - 5;
    let mut info = m.prepare_update(PRODUCER_ID, AppendOrigin::Coordinator);
    info.append(&marker(PRODUCER_ID, EPOCH, 0, true, 0, append_timestamp))
        .unwrap();
    m.commit(info, 1);
    let mut recovered = manager();
    recovered.load_entries(snapshot_round_trip(&m), 1, NOW);
    let last = entry(&recovered, PRODUCER_ID);
    assert_eq!(
        last.last_timestamp, append_timestamp,
        "a marker sets the timestamp"
    );
    assert_eq!(last.current_txn_first_offset, None);
}

#[test]
fn producer_state_accept_append_without_producer_state_on_replica() {
    let mut m = manager();
    append_entry(
        &mut m,
        PRODUCER_ID,
        EPOCH,
        0,
        0,
        0,
        AppendOrigin::Client,
        false,
    )
    .unwrap();
    append_entry(
        &mut m,
        PRODUCER_ID,
        EPOCH,
        1,
        1,
        1,
        AppendOrigin::Client,
        false,
    )
    .unwrap();
    // Expired at the reload: gone from the state.
    let mut recovered = ProducerStateManager::new(
        ProducerStateConfig {
            producer_id_expiration_ms: 60_000,
            transaction_verification_enabled: false,
        },
        0,
    );
    recovered.load_entries(snapshot_round_trip(&m), 1, 70_000);
    assert!(recovered.last_entry(PRODUCER_ID).is_none());
    let sequence = 2;
    append_entry(
        &mut recovered,
        PRODUCER_ID,
        EPOCH,
        sequence,
        2,
        70_001,
        AppendOrigin::Replication,
        false,
    )
    .unwrap();
    let loaded = entry(&recovered, PRODUCER_ID);
    assert_eq!(loaded.producer_epoch, EPOCH);
    assert_eq!(
        (loaded.first_seq(), loaded.last_seq()),
        (sequence, sequence)
    );
}

#[test]
fn producer_state_accept_append_with_sequence_gaps_on_replica() {
    let mut m = manager();
    append_client_entry(&mut m, PRODUCER_ID, EPOCH, DEFAULT_SEQUENCE, 0, false).unwrap();
    let out_of_order = 3;
    assert_eq!(
        kafka_code(append_client_entry(
            &mut m,
            PRODUCER_ID,
            EPOCH,
            out_of_order,
            1,
            false
        )),
        45
    );
    assert_eq!(entry(&m, PRODUCER_ID).last_seq(), 0);
    append_replication_entry(&mut m, EPOCH, out_of_order, 1);
    assert_eq!(entry(&m, PRODUCER_ID).last_seq(), out_of_order);
}

#[test]
fn producer_state_first_unstable_offset_after_truncation() {
    // Kafka's truncateAndReload(0, end), with the snapshots kept in memory: load the newest
    // snapshot at or below `end`.
    let mut m = manager();
    let mut snapshots: Vec<(i64, Vec<(i64, ProducerStateEntry)>)> = Vec::new();
    let take_snapshot = |m: &mut ProducerStateManager, snapshots: &mut Vec<_>| {
        if m.needs_snapshot() {
            snapshots.push((m.map_end_offset(), snapshot_round_trip(m)));
            m.snapshot_written(m.map_end_offset());
        }
    };
    let truncate_and_reload =
        |m: &mut ProducerStateManager, snapshots: &mut Vec<(i64, Vec<_>)>, end: i64| {
            snapshots.retain(|&(offset, _)| offset <= end);
            if m.needs_reload(end) {
                match snapshots.last() {
                    Some((offset, entries)) => m.load_entries(entries.clone(), *offset, NOW),
                    None => m.load_entries([], 0, NOW),
                }
            } else {
                m.truncate_head(0);
            }
        };
    append_client_entry(&mut m, PRODUCER_ID, EPOCH, DEFAULT_SEQUENCE, 99, true).unwrap();
    assert_eq!(m.first_unstable_offset(), Some(99));
    take_snapshot(&mut m, &mut snapshots);
    append_end_txn_marker(&mut m, PRODUCER_ID, EPOCH, false, 105, 0).unwrap();
    m.on_high_watermark_updated(106);
    assert_eq!(m.first_unstable_offset(), None);
    take_snapshot(&mut m, &mut snapshots);
    append_client_entry(&mut m, PRODUCER_ID, EPOCH, DEFAULT_SEQUENCE + 1, 106, false).unwrap();
    truncate_and_reload(&mut m, &mut snapshots, 106);
    assert_eq!(m.first_unstable_offset(), None);
    truncate_and_reload(&mut m, &mut snapshots, 100);
    assert_eq!(m.first_unstable_offset(), Some(99));
}

#[test]
fn producer_state_load_from_snapshot_retains_non_expired_producers() {
    let mut m = manager();
    append_client_entry(&mut m, 1, EPOCH, DEFAULT_SEQUENCE, 0, false).unwrap();
    append_client_entry(&mut m, 2, EPOCH, DEFAULT_SEQUENCE, 1, false).unwrap();
    let mut reloaded = manager();
    reloaded.load_entries(snapshot_round_trip(&m), 2, NOW);
    assert_eq!(reloaded.producer_count(), 2);
    let first = entry(&reloaded, 1);
    assert_eq!((first.last_seq(), first.last_data_offset()), (0, 0));
    let second = entry(&reloaded, 2);
    assert_eq!((second.last_seq(), second.last_data_offset()), (0, 1));
}

#[test]
fn producer_state_append_empty_control_batch() {
    let mut m = manager();
    let producer_id = 23_423;
    let batch = BatchSummary {
        kind: BatchKind::EmptyControl,
        ..marker(producer_id, EPOCH, 15, true, 0, NOW)
    };
    let finished = m.replay(&batch).unwrap();
    assert!(finished.is_empty());
    assert_eq!(entry(&m, producer_id).current_txn_first_offset, None);
    assert_eq!(m.first_unstable_offset(), None);
    assert_eq!(m.map_end_offset(), 16);
}

#[test]
fn producer_state_refuses_a_batch_without_a_producer_id() {
    let mut m = manager();
    let batch = data(-1, -1, -1, 0, 0, NOW, false);
    assert!(matches!(
        m.analyze(&batch, AppendOrigin::Client),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(matches!(
        m.replay(&batch),
        Err(Error::InvalidArgument { .. })
    ));
    assert_eq!(m.producer_count(), 0);
    assert_eq!(m.map_end_offset(), 0);
}

#[test]
fn producer_state_sequence_not_validated_for_coordinator_data() {
    // Kafka's testSequenceNotValidatedForGroupMetadataTopic: the coordinator's own
    // transactional writes carry no sequence.
    let mut m = manager();
    append_entry(
        &mut m,
        PRODUCER_ID,
        EPOCH,
        -1,
        99,
        NOW,
        AppendOrigin::Coordinator,
        true,
    )
    .unwrap();
    append_entry(
        &mut m,
        PRODUCER_ID,
        EPOCH,
        -1,
        100,
        NOW,
        AppendOrigin::Coordinator,
        true,
    )
    .unwrap();
}

#[test]
fn producer_state_batch_summary_from_header() {
    use crate::format::{BatchHeader, ControlRecordType, EndTransactionMarker};
    let header = BatchHeader {
        base_offset: 2000,
        batch_length: 0,
        partition_leader_epoch: 0,
        magic: 2,
        crc: 0,
        attributes: 0x10,
        last_offset_delta: 20,
        base_timestamp: 5,
        max_timestamp: 9,
        producer_id: 7,
        producer_epoch: 3,
        base_sequence: i32::MAX - 10,
        records_count: 21,
    };
    let summary = BatchSummary::from_header(&header, None).unwrap();
    assert_eq!(summary.kind, BatchKind::Data);
    assert!(summary.is_transactional);
    assert_eq!((summary.first_offset, summary.last_offset), (2000, 2020));
    assert_eq!(
        (summary.base_sequence, summary.last_sequence),
        (i32::MAX - 10, 9)
    );
    assert_eq!(summary.timestamp, 9);

    let control = BatchHeader {
        attributes: 0x30,
        last_offset_delta: 0,
        base_sequence: -1,
        records_count: 1,
        ..header
    };
    let abort = (
        ControlRecordType::Abort,
        EndTransactionMarker {
            coordinator_epoch: 4,
        },
    );
    let summary = BatchSummary::from_header(&control, Some(abort)).unwrap();
    assert_eq!(
        summary.kind,
        BatchKind::Marker {
            is_abort: true,
            coordinator_epoch: 4
        }
    );
    let emptied = BatchSummary::from_header(&control, None).unwrap();
    assert_eq!(emptied.kind, BatchKind::EmptyControl);
    let leader_change = (ControlRecordType::LeaderChange, abort.1);
    assert_eq!(
        kafka_code(BatchSummary::from_header(&control, Some(leader_change))),
        2
    );
}

/// A leader's log over the manager: offsets assigned at the log end, duplicates answered with
/// the original offsets, the state applied only after the (here, infallible) write.
struct LeaderLog {
    state: ProducerStateManager,
    log_end_offset: i64,
}

impl LeaderLog {
    fn new(config: ProducerStateConfig) -> Self {
        LeaderLog {
            state: ProducerStateManager::new(config, 0),
            log_end_offset: 0,
        }
    }

    fn append(
        &mut self,
        producer_id: i64,
        epoch: i16,
        base_sequence: i32,
        records: i64,
        is_transactional: bool,
        origin: AppendOrigin,
    ) -> Result<(i64, i64)> {
        let first = self.log_end_offset;
        let last = first + records - 1;
        let batch = data(
            producer_id,
            epoch,
            base_sequence,
            first,
            last,
            NOW,
            is_transactional,
        );
        match self.state.analyze(&batch, origin)? {
            ProducerAppendCheck::Duplicate {
                first_offset,
                last_offset,
            } => Ok((first_offset, last_offset)),
            ProducerAppendCheck::Append(info) => {
                self.log_end_offset = last + 1;
                self.state.commit(info, last + 1);
                Ok((first, last))
            }
        }
    }

    fn append_as_leader(
        &mut self,
        producer_id: i64,
        epoch: i16,
        seq: i32,
        records: i64,
    ) -> Result<(i64, i64)> {
        self.append(
            producer_id,
            epoch,
            seq,
            records,
            false,
            AppendOrigin::Client,
        )
    }
}

#[test]
fn producer_state_duplicate_appends() {
    let mut log = LeaderLog::new(config(false));
    let (pid, epoch) = (1, 0);
    for seq in 0..6 {
        log.append_as_leader(pid, epoch, seq, 1).unwrap();
    }
    let multi = log.append_as_leader(pid, epoch, 6, 3).unwrap();
    assert_eq!(multi, (6, 8), "should have appended 3 entries");
    let duplicate = log.append_as_leader(pid, epoch, 6, 3).unwrap();
    assert_eq!(
        duplicate, multi,
        "a re-send of the tail returns the original offsets"
    );
    assert_eq!(log.log_end_offset, 9, "and writes nothing");

    // A partial duplicate of the tail (sequences 7..=8) is out of order.
    assert_eq!(kafka_code(log.append_as_leader(pid, epoch, 7, 2)), 45);
    // The batch 4th from the tail (sequence 2) is among the last 5: a duplicate.
    assert_eq!(log.append_as_leader(pid, epoch, 2, 1).unwrap(), (2, 2));
    // Sequence 1 is older than the last 5: out of order.
    assert_eq!(kafka_code(log.append_as_leader(pid, epoch, 1, 1)), 45);

    let original = log.append_as_leader(pid, epoch, 9, 1).unwrap();
    let resent = log.append_as_leader(pid, epoch, 9, 1).unwrap();
    assert_eq!(original, (9, 9));
    assert_eq!(resent, original);
    assert_eq!(log.log_end_offset, 10);
}

#[test]
fn producer_state_multiple_producers_with_duplicates_in_single_append() {
    // A follower (origin REPLICATION) takes every batch as the leader wrote it, duplicates too.
    let mut log = LeaderLog::new(config(false));
    let epoch = 0;
    for (pid, seq) in [(1, 0), (2, 0), (1, 1), (2, 1), (1, 1)] {
        log.append(pid, epoch, seq, 1, false, AppendOrigin::Replication)
            .unwrap();
    }
    assert_eq!(log.log_end_offset, 5);
}

#[test]
fn producer_state_old_producer_epoch() {
    let mut log = LeaderLog::new(config(false));
    log.append_as_leader(1, 1, 0, 1).unwrap();
    assert_eq!(kafka_code(log.append_as_leader(1, 0, 0, 1)), 47);
}

#[test]
fn producer_state_allow_non_zero_sequence_on_first_append_non_zero_epoch() {
    let mut log = LeaderLog::new(config(true));
    let (pid, epoch, sequence) = (23, 1, 3);
    assert_eq!(log.state.first_undecided_offset(), None);
    // With verification on, an unregistered transaction is refused.
    assert_eq!(
        kafka_code(log.append(pid, epoch, sequence, 2, true, AppendOrigin::Client)),
        48
    );
    log.state.register_transaction(pid, epoch, NOW);
    assert_eq!(
        log.append(pid, epoch, sequence, 2, true, AppendOrigin::Client)
            .unwrap(),
        (0, 1)
    );
    assert_eq!(log.state.first_undecided_offset(), Some(0));
}

#[test]
fn producer_state_verification_refuses_a_late_write_after_the_marker() {
    let mut log = LeaderLog::new(config(true));
    let pid = 5;
    log.state.register_transaction(pid, 0, NOW);
    log.append(pid, 0, 0, 1, true, AppendOrigin::Client)
        .unwrap();
    // The registration is used up by the first write; later writes of the open transaction
    // need none.
    log.append(pid, 0, 1, 1, true, AppendOrigin::Client)
        .unwrap();
    let mut info = log.state.prepare_update(pid, AppendOrigin::Coordinator);
    info.append(&marker(pid, 0, 2, true, 0, NOW)).unwrap();
    log.state.commit(info, 3);
    log.log_end_offset = 3;
    // A late write of the aborted transaction would open a transaction no marker closes.
    assert_eq!(
        kafka_code(log.append(pid, 0, 2, 1, true, AppendOrigin::Client)),
        48
    );
    // Replication keeps what the leader wrote.
    log.append(pid, 0, 2, 1, true, AppendOrigin::Replication)
        .unwrap();
    // Registrations expire as producers do.
    log.state.register_transaction(7, 0, NOW);
    log.state.remove_expired_producers(NOW + EXPIRATION_MS);
    assert_eq!(
        kafka_code(log.append(7, 0, 0, 1, true, AppendOrigin::Client)),
        48
    );
}

#[test]
fn producer_state_commit_reports_the_txn_index_entry() {
    // Producer 1000's aborted transaction ends at 106 while another producer's, opened at 100,
    // is still open: its `.txnindex` entry's lastStableOffset is 100.
    let mut m = ProducerStateManager::new(config(false), 100);
    m.replay(&data(2000, 0, 0, 100, 100, NOW, true)).unwrap();
    m.replay(&data(1000, 0, 0, 101, 105, NOW, true)).unwrap();
    let finished = m.replay(&marker(1000, 0, 106, true, 0, NOW)).unwrap();
    assert_eq!(
        finished,
        vec![FinishedTxn {
            txn: CompletedTxn {
                producer_id: 1000,
                first_offset: 101,
                last_offset: 106,
                is_aborted: true
            },
            last_stable_offset: 100
        }]
    );
    let finished = m.replay(&marker(2000, 0, 107, true, 0, NOW)).unwrap();
    assert_eq!(
        finished[0].last_stable_offset, 108,
        "no other open txn: marker + 1"
    );
    assert_eq!(m.map_end_offset(), 108);
}

#[test]
fn producer_state_failed_validation_leaves_the_state_untouched() {
    let mut m = manager();
    append_client_entry(&mut m, PRODUCER_ID, EPOCH, 0, 0, true).unwrap();
    let before = format!("{m:?}");
    assert!(
        m.analyze(
            &data(PRODUCER_ID, EPOCH, 1, 1, 1, NOW, false),
            AppendOrigin::Client
        )
        .is_err()
    );
    assert!(
        m.replay(&data(PRODUCER_ID, EPOCH, 1, 1, 1, NOW, false))
            .is_err()
    );
    // An analysis whose write never happens is simply dropped.
    let _ = m
        .analyze(
            &data(PRODUCER_ID, EPOCH, 1, 1, 1, NOW, true),
            AppendOrigin::Client,
        )
        .unwrap();
    assert_eq!(format!("{m:?}"), before);
}

#[test]
fn producer_state_truncate_head_drops_producers_below_the_log_start() {
    let mut m = manager();
    append_client_entry(&mut m, 1, EPOCH, 0, 0, false).unwrap();
    append_client_entry(&mut m, 2, EPOCH, 0, 1, true).unwrap();
    append_client_entry(&mut m, 3, EPOCH, 0, 2, false).unwrap();
    append_client_entry(&mut m, 4, EPOCH, 0, 3, false).unwrap();
    append_end_txn_marker(&mut m, 4, EPOCH + 1, true, 4, 0).unwrap();
    append_client_entry(&mut m, 5, EPOCH, 0, 5, true).unwrap();
    append_end_txn_marker(&mut m, 5, EPOCH, true, 6, 0).unwrap();
    m.truncate_head(3);
    assert!(m.last_entry(1).is_none(), "all its data is below the start");
    assert!(m.last_entry(2).is_some(), "an open transaction stays");
    assert!(m.last_entry(3).is_none());
    assert!(
        m.last_entry(4).is_some(),
        "a marker-only entry keeps fencing"
    );
    assert!(m.last_entry(5).is_some());
    assert_eq!(
        m.first_unstable_offset(),
        Some(1),
        "pid 2's open transaction"
    );
    assert_eq!(m.lso(7, 3), 3, "the LSO is never below the log start");
    // KIP-360: producer 1's next batch is accepted with any sequence.
    append_client_entry(&mut m, 1, EPOCH, 42, 7, false).unwrap();
    m.truncate_head(7);
    assert_eq!(
        m.first_unstable_offset(),
        Some(1),
        "the open transaction holds the LSO"
    );
    assert_eq!(m.map_end_offset(), 8);
}

#[test]
fn producer_state_truncate_fully_forgets_everything() {
    let mut m = manager();
    append_client_entry(&mut m, 1, EPOCH, 0, 0, true).unwrap();
    append_end_txn_marker(&mut m, 1, EPOCH, false, 1, 0).unwrap();
    append_client_entry(&mut m, 2, EPOCH, 0, 2, true).unwrap();
    m.truncate_fully(50);
    assert_eq!(m.producer_count(), 0);
    assert_eq!(m.first_unstable_offset(), None);
    assert_eq!(m.map_end_offset(), 50);
    assert!(!m.needs_reload(50));
    assert!(m.needs_reload(51));
}

#[test]
fn producer_state_load_entries_reopens_transactions() {
    let mut m = manager();
    m.load_entries(
        [
            (
                1,
                ProducerStateEntry::from_snapshot(0, 4, 10, 4, NOW, 0, -1),
            ),
            (
                2,
                ProducerStateEntry::from_snapshot(3, -1, -1, 0, NOW, 5, 12),
            ),
            // A damaged snapshot that lists a producer twice: the later entry wins.
            (
                3,
                ProducerStateEntry::from_snapshot(0, 0, 14, 0, NOW, 0, 14),
            ),
            (
                3,
                ProducerStateEntry::from_snapshot(0, 1, 15, 0, NOW, 0, -1),
            ),
        ],
        18,
        NOW,
    );
    assert_eq!(m.map_end_offset(), 18);
    assert_eq!(m.first_unstable_offset(), Some(12));
    let first = entry(&m, 1);
    assert_eq!((first.first_seq(), first.last_seq()), (0, 4));
    assert_eq!(
        (first.first_data_offset(), first.last_data_offset()),
        (6, 10)
    );
    let second = entry(&m, 2);
    assert!(second.is_empty());
    assert_eq!(second.coordinator_epoch, 5);
    assert_eq!(second.current_txn_first_offset, Some(12));
    assert_eq!(m.lso(18, 0), 12);
    let finished = m.replay(&marker(2, 3, 18, true, 5, NOW)).unwrap();
    assert_eq!(finished[0].txn.first_offset, 12);
    m.on_high_watermark_updated(19);
    assert_eq!(
        m.first_unstable_offset(),
        None,
        "producer 3's dropped entry left no txn behind"
    );
}

#[test]
fn producer_state_marker_from_snapshot_of_any_values_never_panics() {
    // A snapshot entry is file data: odd sequences and deltas must not overflow.
    let odd = ProducerStateEntry::from_snapshot(0, -1, 5, i32::MAX, NOW, 0, -1);
    let _ = odd.first_seq();
    let _ = odd.first_data_offset();
    let odd = ProducerStateEntry::from_snapshot(0, i32::MIN, 0, i32::MAX, NOW, 0, -1);
    let _ = odd.first_seq();
    let _ = odd.first_data_offset();
}

/// One step of the property test.
#[derive(Debug, Clone)]
enum Op {
    /// A data batch of `records` records from producer `pid`, in or out of sequence.
    Data {
        pid: i64,
        records: i64,
        transactional: bool,
        in_sequence: bool,
    },
    /// A marker for producer `pid`.
    Marker { pid: i64, abort: bool },
    /// The high watermark moves `by` offsets towards the log end.
    HighWatermark { by: i64 },
    /// The log start moves up to the high watermark.
    TruncateHead,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..4i64, 1..4i64, any::<bool>(), prop::bool::weighted(0.9)).prop_map(
            |(pid, records, transactional, in_sequence)| Op::Data {
                pid,
                records,
                transactional,
                in_sequence,
            }
        ),
        2 => (0..4i64, any::<bool>()).prop_map(|(pid, abort)| Op::Marker { pid, abort }),
        2 => (0..20i64).prop_map(|by| Op::HighWatermark { by }),
        1 => Just(Op::TruncateHead),
    ]
}

proptest! {
    /// Any mix of appends, markers, high-watermark moves and head truncations keeps the
    /// invariants: LSO ≤ HW, the first unstable offset is the lowest first offset of the open
    /// transactions and the ended ones whose marker is not below the HW (checked against a
    /// model), at most 5 batches per producer, and a refused batch changes nothing.
    #[test]
    fn producer_state_invariants_hold_for_any_sequence_of_appends_and_markers(
        ops in prop::collection::vec(op(), 1..80)
    ) {
        let mut m = manager();
        let mut log_end = 0i64;
        let mut high_watermark = 0i64;
        let mut log_start = 0i64;
        let mut next_seq = [0i32; 4];
        // The model: open transactions (pid → first offset), ended ones (first, marker).
        let mut open: [Option<i64>; 4] = [None; 4];
        let mut ended: Vec<(i64, i64)> = Vec::new();
        for op in ops {
            match op {
                Op::Data { pid, records, transactional, in_sequence } => {
                    let slot = usize::try_from(pid).unwrap();
                    let seq = if in_sequence { next_seq[slot] } else { next_seq[slot] + 7 };
                    let batch = data(pid, 0, seq, log_end, log_end + records - 1, NOW, transactional);
                    let before = format!("{m:?}");
                    match m.analyze(&batch, AppendOrigin::Client) {
                        Ok(ProducerAppendCheck::Append(info)) => {
                            prop_assert!(open[slot].is_none() || transactional);
                            log_end += records;
                            prop_assert!(m.commit(info, log_end).is_empty());
                            next_seq[slot] = seq + i32::try_from(records).unwrap();
                            if transactional && open[slot].is_none() {
                                open[slot] = Some(batch.first_offset);
                            }
                        }
                        Ok(ProducerAppendCheck::Duplicate { .. }) => {
                            prop_assert_eq!(format!("{m:?}"), before);
                        }
                        Err(_) => prop_assert_eq!(format!("{m:?}"), before),
                    }
                }
                Op::Marker { pid, abort } => {
                    let slot = usize::try_from(pid).unwrap();
                    let batch = marker(pid, 0, log_end, abort, 0, NOW);
                    let ProducerAppendCheck::Append(info) =
                        m.analyze(&batch, AppendOrigin::Coordinator).unwrap()
                    else {
                        panic!("a marker is never a duplicate");
                    };
                    log_end += 1;
                    let finished = m.commit(info, log_end);
                    match open[slot].take() {
                        Some(first) => {
                            prop_assert_eq!(finished.len(), 1);
                            let txn = finished[0].txn;
                            prop_assert_eq!((txn.first_offset, txn.last_offset), (first, log_end - 1));
                            let other_open = open.iter().flatten().min().copied();
                            prop_assert_eq!(
                                finished[0].last_stable_offset,
                                other_open.unwrap_or(log_end)
                            );
                            ended.push((first, log_end - 1));
                        }
                        None => prop_assert!(finished.is_empty()),
                    }
                }
                Op::HighWatermark { by } => {
                    high_watermark = (high_watermark + by).min(log_end);
                    m.on_high_watermark_updated(high_watermark);
                    ended.retain(|&(_, marker)| marker >= high_watermark);
                }
                Op::TruncateHead => {
                    log_start = high_watermark;
                    m.truncate_head(log_start);
                    ended.retain(|&(_, marker)| marker >= log_start);
                    for (pid, open_txn) in (0i64..).zip(open.iter()) {
                        if m.last_entry(pid).is_none() {
                            // Only a producer without an open transaction may be dropped.
                            prop_assert!(open_txn.is_none());
                        }
                    }
                }
            }
            let expected_fuo = open
                .iter()
                .flatten()
                .copied()
                .chain(ended.iter().map(|&(first, _)| first))
                .min();
            prop_assert_eq!(m.first_unstable_offset(), expected_fuo);
            let lso = m.lso(high_watermark, log_start);
            prop_assert!(lso <= high_watermark.max(log_start));
            prop_assert!(lso >= log_start);
            for (_, e) in m.entries() {
                prop_assert!(e.batches.len() <= NUM_BATCHES_TO_RETAIN);
            }
            prop_assert_eq!(m.map_end_offset(), log_end.max(log_start));
        }
    }
}
