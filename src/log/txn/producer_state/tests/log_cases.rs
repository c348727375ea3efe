//! The producer-state cases of Kafka's `UnifiedLogTest`, ported over a minimal leader log that
//! assigns offsets and answers duplicates as `Log` will.

use super::*;

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
