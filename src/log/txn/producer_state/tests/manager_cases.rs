//! Kafka's `ProducerStateManagerTest`, ported: each test keeps the name and numbers of Kafka's.

use super::*;

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
                m.on_log_start_incremented(0);
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
