//! Ports of Kafka's `TransactionMetadataTest`, named after its tests.

use super::*;

const PRODUCER_ID: i64 = 23423;
const TXN_ID: &str = "txnlId";
const NOW: i64 = 1_700_000_000_000;

fn metadata(epoch: i16, last_epoch: i16, state: TransactionState) -> TransactionMetadata {
    let mut metadata = TransactionMetadata::new_empty(TXN_ID, PRODUCER_ID, 30_000, NOW);
    metadata.producer_epoch = epoch;
    metadata.last_producer_epoch = last_epoch;
    metadata.state = state;
    if state != TransactionState::Empty {
        metadata.txn_start_timestamp = NOW;
    }
    metadata
}

fn increment(metadata: &mut TransactionMetadata, expected: Option<i16>) {
    let transit = metadata
        .prepare_increment_producer_epoch(30_000, expected, NOW + 1)
        .unwrap();
    metadata.complete_transition_to(&transit).unwrap();
}

#[test]
fn test_initialize_epoch() {
    let mut m = metadata(
        NO_PRODUCER_EPOCH,
        NO_PRODUCER_EPOCH,
        TransactionState::Empty,
    );
    increment(&mut m, None);
    assert_eq!((m.producer_id, m.producer_epoch), (PRODUCER_ID, 0));
    assert_eq!(m.last_producer_epoch, NO_PRODUCER_EPOCH);
    assert_eq!(m.pending_state, None);
}

#[test]
fn test_normal_epoch_bump() {
    let mut m = metadata(735, NO_PRODUCER_EPOCH, TransactionState::Empty);
    increment(&mut m, None);
    assert_eq!((m.producer_id, m.producer_epoch), (PRODUCER_ID, 736));
    assert_eq!(m.last_producer_epoch, NO_PRODUCER_EPOCH);
}

#[test]
fn test_bump_epoch_not_allowed_if_epochs_exhausted() {
    let mut m = metadata(i16::MAX - 1, NO_PRODUCER_EPOCH, TransactionState::Empty);
    assert!(m.is_producer_epoch_exhausted());
    let error = m
        .prepare_increment_producer_epoch(30_000, None, NOW)
        .unwrap_err();
    assert_eq!(error.kafka_code(), Some(48), "{error}");
    assert_eq!(
        m.pending_state, None,
        "a refused transition leaves nothing pending"
    );
}

#[test]
fn test_tolerate_time_shift_during_add_partitions() {
    let mut m = metadata(1, NO_PRODUCER_EPOCH, TransactionState::Empty);
    m.txn_start_timestamp = -1;
    // The clock went back: the transition is still taken, at the earlier time.
    let added = BTreeSet::from([TopicPartition::new("topic1", 0)]);
    let transit = m.prepare_add_partitions(&added, NOW - 1, 0).unwrap();
    m.complete_transition_to(&transit).unwrap();
    assert_eq!(m.state, TransactionState::Ongoing);
    assert_eq!(m.txn_start_timestamp, NOW - 1);
    assert_eq!(m.txn_last_update_timestamp, NOW - 1);
    let added = BTreeSet::from([TopicPartition::new("topic2", 0)]);
    let transit = m.prepare_add_partitions(&added, NOW - 2, 0).unwrap();
    m.complete_transition_to(&transit).unwrap();
    assert_eq!(m.partitions.len(), 2);
    assert_eq!(m.txn_start_timestamp, NOW - 1, "the start stays");
    assert_eq!(m.txn_last_update_timestamp, NOW - 2);
}

#[test]
fn test_fence_producer_after_epochs_exhausted() {
    let mut m = metadata(i16::MAX - 1, NO_PRODUCER_EPOCH, TransactionState::Ongoing);
    assert!(m.is_producer_epoch_exhausted());
    let fence = m.prepare_fence_producer_epoch().unwrap();
    assert_eq!(fence.producer_epoch, i16::MAX);
    assert_eq!(fence.last_producer_epoch, NO_PRODUCER_EPOCH);
    assert_eq!(m.pending_state, Some(TransactionState::PrepareEpochFence));
    let abort = m.prepare_fence_abort(&fence, 0, NOW).unwrap();
    m.complete_transition_to(&abort).unwrap();
    assert_eq!(abort.producer_id, PRODUCER_ID);
    assert_eq!(m.state, TransactionState::PrepareAbort);
    assert_eq!(m.producer_epoch, i16::MAX);
}

#[test]
fn test_fence_producer_not_allowed_if_it_would_overflow() {
    let mut m = metadata(i16::MAX, NO_PRODUCER_EPOCH, TransactionState::Ongoing);
    assert!(m.is_producer_epoch_exhausted());
    assert!(m.prepare_fence_producer_epoch().is_err());
    assert_eq!(m.pending_state, None);
}

#[test]
fn test_rotate_producer_id() {
    let mut m = metadata(i16::MAX - 1, NO_PRODUCER_EPOCH, TransactionState::Empty);
    let transit = m
        .prepare_producer_id_rotation(9893, 30_000, NOW, true)
        .unwrap();
    m.complete_transition_to(&transit).unwrap();
    assert_eq!(m.producer_id, 9893);
    assert_eq!(m.previous_producer_id, PRODUCER_ID);
    assert_eq!(m.producer_epoch, 0);
    assert_eq!(m.last_producer_epoch, i16::MAX - 1);
}

#[test]
fn test_epoch_bump_on_end_txn() {
    let mut m = metadata(10, NO_PRODUCER_EPOCH, TransactionState::Ongoing);
    let transit = m
        .prepare_abort_or_commit(TransactionState::PrepareCommit, 2, NO_PRODUCER_ID, NOW - 1)
        .unwrap();
    m.complete_transition_to(&transit).unwrap();
    assert_eq!((m.producer_id, m.producer_epoch), (PRODUCER_ID, 11));
    assert_eq!(m.client_transaction_version, 2);
    let transit = m.prepare_complete(NOW).unwrap();
    m.complete_transition_to(&transit).unwrap();
    assert_eq!((m.producer_id, m.producer_epoch), (PRODUCER_ID, 11));
    assert_eq!(m.state, TransactionState::CompleteCommit);
    assert_eq!(m.client_transaction_version, 2);
}

#[test]
fn test_epoch_bump_on_end_txn_overflow() {
    let mut m = metadata(i16::MAX - 1, NO_PRODUCER_EPOCH, TransactionState::Ongoing);
    assert!(m.is_producer_epoch_exhausted());
    let transit = m
        .prepare_abort_or_commit(TransactionState::PrepareCommit, 2, 9893, NOW - 1)
        .unwrap();
    m.complete_transition_to(&transit).unwrap();
    assert_eq!((m.producer_id, m.producer_epoch), (PRODUCER_ID, i16::MAX));
    assert_eq!(m.next_producer_id, 9893);
    let transit = m.prepare_complete(NOW).unwrap();
    m.complete_transition_to(&transit).unwrap();
    assert_eq!((m.producer_id, m.producer_epoch), (9893, 0));
    assert_eq!(m.previous_producer_id, PRODUCER_ID);
    assert_eq!(m.next_producer_id, NO_PRODUCER_ID);
    assert_eq!(m.client_transaction_version, 2);
}

#[test]
fn test_rotate_producer_id_in_ongoing_prepare_abort_and_prepare_commit_state() {
    for state in [
        TransactionState::Ongoing,
        TransactionState::PrepareAbort,
        TransactionState::PrepareCommit,
    ] {
        for version in [0, 2] {
            let mut m = metadata(i16::MAX - 1, NO_PRODUCER_EPOCH, state);
            m.client_transaction_version = version;
            assert!(
                m.prepare_producer_id_rotation(9893, 30_000, NOW, false)
                    .is_err(),
                "{state}"
            );
        }
    }
}

#[test]
fn test_attempted_epoch_bump_with_newly_created_metadata() {
    let mut m = metadata(
        NO_PRODUCER_EPOCH,
        NO_PRODUCER_EPOCH,
        TransactionState::Empty,
    );
    increment(&mut m, Some(735));
    assert_eq!((m.producer_id, m.producer_epoch), (PRODUCER_ID, 0));
    assert_eq!(m.last_producer_epoch, NO_PRODUCER_EPOCH);
}

#[test]
fn test_epoch_bump_with_current_epoch_provided() {
    let mut m = metadata(735, NO_PRODUCER_EPOCH, TransactionState::Empty);
    increment(&mut m, Some(735));
    assert_eq!((m.producer_epoch, m.last_producer_epoch), (736, 735));
}

#[test]
fn test_attempted_epoch_bump_with_last_epoch() {
    let mut m = metadata(735, 734, TransactionState::Empty);
    increment(&mut m, Some(734));
    assert_eq!((m.producer_epoch, m.last_producer_epoch), (735, 734));
}

#[test]
fn test_attempted_epoch_bump_with_fenced_epoch() {
    let mut m = metadata(735, 734, TransactionState::Empty);
    let error = m
        .prepare_increment_producer_epoch(30_000, Some(733), NOW)
        .unwrap_err();
    assert_eq!(error.kafka_code(), Some(90), "{error}");
    assert_eq!(m.pending_state, None);
}

#[test]
fn a_second_transition_while_one_is_pending_is_refused() {
    let mut m = metadata(1, NO_PRODUCER_EPOCH, TransactionState::Empty);
    m.prepare_increment_producer_epoch(30_000, None, NOW)
        .unwrap();
    let added = BTreeSet::from([TopicPartition::new("t", 0)]);
    assert!(m.prepare_add_partitions(&added, NOW, 0).is_err());
    m.roll_back_pending();
    assert_eq!(
        m.producer_epoch, 1,
        "a rolled back transition changed nothing"
    );
    assert!(m.prepare_add_partitions(&added, NOW, 0).is_ok());
}

#[test]
fn complete_checks_the_transit_against_the_metadata() {
    let mut m = metadata(5, NO_PRODUCER_EPOCH, TransactionState::Ongoing);
    m.partitions.insert(TopicPartition::new("t", 0));
    let mut transit = m
        .prepare_abort_or_commit(TransactionState::PrepareCommit, 0, NO_PRODUCER_ID, NOW)
        .unwrap();
    transit.partitions.clear();
    assert!(m.complete_transition_to(&transit).is_err());
    assert_eq!(m.state, TransactionState::Ongoing);
}

#[test]
fn transit_values_are_the_log_values() {
    let mut m = metadata(3, NO_PRODUCER_EPOCH, TransactionState::Empty);
    m.txn_start_timestamp = -1;
    let added = BTreeSet::from([
        TopicPartition::new("b", 1),
        TopicPartition::new("a", 2),
        TopicPartition::new("b", 0),
    ]);
    let transit = m.prepare_add_partitions(&added, NOW, 2).unwrap();
    let (value, version) = transit.to_log_value(2);
    assert_eq!(version, 1);
    assert_eq!(value.state, TransactionState::Ongoing);
    assert_eq!(
        value.partitions,
        vec![
            TxnTopicPartitions {
                topic: "a".into(),
                partitions: vec![2]
            },
            TxnTopicPartitions {
                topic: "b".into(),
                partitions: vec![0, 1]
            },
        ]
    );
    assert_eq!(value.client_transaction_version, 2);
    let back = TransactionMetadata::from_log_value(TXN_ID, &value);
    assert_eq!(back.partitions, transit.partitions);
    assert_eq!(back.producer_epoch, 3);
    // Version 0 has no tagged fields.
    let (value, version) = transit.to_log_value(0);
    assert_eq!(version, 0);
    assert!(value.tagged_fields_are_default());
}
