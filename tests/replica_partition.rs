//! Kafka's `PartitionTest`, ported: the leader's rules of `partlog::replica::Partition` (the
//! diverging-epoch check of a follower fetch, ISR expansion and shrink, the high watermark
//! under `min.insync.replicas`, `acks=all` appends) and their bad input.
#![cfg(feature = "sim")]

#[path = "common/replica.rs"]
mod replica_fixture;

use std::sync::Arc;
use std::time::Duration;

use partlog::replica::{
    FollowerFetch, FollowerRead, IsrChangeKind, Partition, ReplicaConfig, UNKNOWN_OFFSET,
};
use partlog::{Acks, BatchBuilder, Compression, Error, NewRecord};
use replica_fixture::*;

#[test]
fn replica_last_fetched_offset_validation() {
    let f = fixture(ReplicaConfig::default());
    // Leader epochs 0@0, 3@2, 4@8, 7@13, 9@14, log end 17.
    for (base, epoch, records) in [(0, 0, 2), (2, 3, 6), (8, 4, 5), (13, 7, 1), (14, 9, 3)] {
        f.log
            .append_as_follower(&replicated_batch(base, epoch, records))
            .expect("seed");
    }
    assert_eq!(f.log.log_end_offset(), 17);
    f.partition
        .become_leader(10, 1, &[LEADER, FOLLOWER1], &[LEADER, FOLLOWER1])
        .expect("leader");

    let read = |last_fetched_epoch: i32, fetch_offset: i64| {
        let fetch = FollowerFetch {
            last_fetched_epoch: Some(last_fetched_epoch),
            ..fetch_at(FOLLOWER1, fetch_offset)
        };
        f.partition.read_for_follower(&fetch).expect("fetch")
    };
    let assert_diverging = |last_fetched_epoch, fetch_offset, expected: (i32, i64)| match read(
        last_fetched_epoch,
        fetch_offset,
    ) {
        FollowerRead::Diverging { epoch, end_offset } => assert_eq!(
            (epoch, end_offset),
            expected,
            "({last_fetched_epoch}, {fetch_offset})"
        ),
        other => panic!("({last_fetched_epoch}, {fetch_offset}): {other:?}"),
    };
    assert_diverging(2, 5, (0, 2));
    assert_diverging(0, 4, (0, 2));
    assert_diverging(6, 6, (4, 13));
    assert_diverging(5, 9, (4, 13));
    assert_diverging(10, 18, (10, 17));
    for (epoch, offset) in [(0, 2), (7, 14), (9, 17), (10, 17)] {
        assert!(
            matches!(read(epoch, offset), FollowerRead::Records { .. }),
            "({epoch}, {offset}) must not diverge"
        );
    }
    assert!(matches!(
        read(11, 5),
        FollowerRead::OffsetOutOfRange {
            log_start_offset: 0,
            log_end_offset: 17
        }
    ));
}

#[test]
fn replica_isr_expansion() {
    let f = fixture(ReplicaConfig::default());
    f.log.append_batch(&client_batch(10)).expect("seed");
    f.partition
        .become_leader(5, 1, &[LEADER, FOLLOWER1], &[LEADER])
        .expect("leader");
    assert_eq!(
        f.partition.high_watermark(),
        10,
        "an ISR of the leader alone"
    );
    let state = f
        .partition
        .replica_state(FOLLOWER1)
        .expect("follower state");
    assert_eq!(state.last_caught_up_time_ms, 0);
    assert_eq!(state.log_end_offset, UNKNOWN_OFFSET);

    assert_eq!(fetch_follower(&f.partition, FOLLOWER1, 3), None);
    assert_eq!(f.partition.isr(), [LEADER]);
    let state = f
        .partition
        .replica_state(FOLLOWER1)
        .expect("follower state");
    assert_eq!((state.last_caught_up_time_ms, state.log_end_offset), (0, 3));

    let change = fetch_follower(&f.partition, FOLLOWER1, 10).expect("an expansion");
    assert_eq!(change.kind, IsrChangeKind::Expand);
    assert_eq!(change.new_isr, [LEADER, FOLLOWER1]);
    assert_eq!(f.partition.isr(), [LEADER], "not committed yet");
    assert_eq!(f.partition.maximal_isr(), [LEADER, FOLLOWER1]);
    let state = f
        .partition
        .replica_state(FOLLOWER1)
        .expect("follower state");
    assert_eq!(state.last_caught_up_time_ms, START_MS);
    assert_eq!(state.log_end_offset, 10);

    f.partition
        .complete_isr_change(&change, true)
        .expect("complete");
    assert_eq!(f.partition.isr(), [LEADER, FOLLOWER1]);
    assert_eq!(f.partition.partition_epoch(), 2);
    assert_eq!(f.partition.isr_change_in_flight(), None);
}

#[test]
fn replica_isr_not_expanded_if_update_fails() {
    let f = fixture(ReplicaConfig::default());
    f.log.append_batch(&client_batch(10)).expect("seed");
    f.partition
        .become_leader(5, 1, &[LEADER, FOLLOWER1], &[LEADER])
        .expect("leader");
    let change = fetch_follower(&f.partition, FOLLOWER1, 10).expect("an expansion");
    assert_eq!(
        fetch_follower(&f.partition, FOLLOWER1, 10),
        None,
        "one change in flight at a time"
    );
    f.partition
        .complete_isr_change(&change, false)
        .expect("reject");
    assert_eq!(f.partition.isr(), [LEADER]);
    assert_eq!(f.partition.maximal_isr(), [LEADER]);
    assert_eq!(f.partition.partition_epoch(), 1);
    assert!(matches!(
        f.partition.complete_isr_change(&change, true),
        Err(Error::InvalidArgument { .. })
    ));
}

#[test]
fn replica_follower_does_not_join_isr_until_caught_up_to_offset_within_current_leader_epoch() {
    let f = fixture(ReplicaConfig::default());
    let replicas = [LEADER, FOLLOWER1, FOLLOWER2];
    let isr = [LEADER, FOLLOWER2];
    assert!(
        f.partition
            .become_leader(8, 1, &replicas, &isr)
            .expect("leader")
    );
    let first = f
        .partition
        .append_as_leader(&client_batch(2), Acks::Zero)
        .expect("batch 1")
        .wait(GENEROUS)
        .expect("acks=0");
    append_unreplicated(&f.partition, 3, Acks::Zero);
    assert_eq!(
        f.partition.high_watermark(),
        0,
        "the HW waits for follower 2"
    );

    fetch_follower(&f.partition, FOLLOWER2, 0);
    fetch_follower(&f.partition, FOLLOWER2, first.last_offset + 1);
    assert_eq!(f.partition.high_watermark(), first.last_offset + 1);

    // The leader becomes a follower, then leader again, with nothing appended in between.
    f.partition
        .become_follower(9, 1, &replicas, &isr)
        .expect("follower");
    assert!(
        f.partition
            .become_leader(10, 1, &replicas, &isr)
            .expect("leader again")
    );
    let epoch_start = f.log.log_end_offset();
    append_unreplicated(&f.partition, 2, Acks::Zero);

    // Below the high watermark: no.
    assert_eq!(fetch_follower(&f.partition, FOLLOWER1, 0), None);
    assert_eq!(
        fetch_follower(&f.partition, FOLLOWER1, first.last_offset),
        None
    );
    // At the high watermark but before the current epoch's start: no either.
    assert!(epoch_start > f.partition.high_watermark());
    assert_eq!(
        fetch_follower(&f.partition, FOLLOWER1, epoch_start - 1),
        None
    );
    assert_eq!(f.partition.isr(), isr);

    let change = fetch_follower(&f.partition, FOLLOWER1, epoch_start).expect("an expansion");
    assert_eq!(change.new_isr, [LEADER, FOLLOWER1, FOLLOWER2]);
    assert_eq!(
        f.partition.isr(),
        isr,
        "expansion does not change the committed ISR"
    );
    assert_eq!(f.partition.maximal_isr(), [LEADER, FOLLOWER1, FOLLOWER2]);
}

#[test]
fn replica_maybe_shrink_isr() {
    let f = fixture(ReplicaConfig::default());
    f.partition
        .become_leader(
            5,
            1,
            &[LEADER, FOLLOWER1, FOLLOWER2],
            &[LEADER, FOLLOWER1, FOLLOWER2],
        )
        .expect("leader");
    append_unreplicated(&f.partition, 10, Acks::One);
    assert_eq!(f.partition.high_watermark(), 0);
    fetch_follower(&f.partition, FOLLOWER1, 10);
    assert_eq!(f.partition.high_watermark(), 0, "follower 2 never fetched");

    assert_eq!(f.partition.maybe_shrink_isr(), None, "within the lag");
    f.clock.advance(30_001);
    let change = f.partition.maybe_shrink_isr().expect("a shrink");
    assert_eq!(change.kind, IsrChangeKind::Shrink);
    assert_eq!(change.new_isr, [LEADER, FOLLOWER1]);
    assert_eq!(
        f.partition.high_watermark(),
        0,
        "the leaving member counts until committed"
    );
    f.partition
        .complete_isr_change(&change, true)
        .expect("commit");
    assert_eq!(f.partition.isr(), [LEADER, FOLLOWER1]);
    assert_eq!(f.partition.partition_epoch(), 2);
    assert_eq!(f.partition.high_watermark(), 10);
}

#[test]
fn replica_should_not_shrink_isr_if_previous_fetch_is_caught_up() {
    let config = ReplicaConfig {
        replica_lag_time_max_ms: 10_000,
        ..ReplicaConfig::default()
    };
    let f = fixture(config);
    f.partition
        .become_leader(5, 1, &[LEADER, FOLLOWER1], &[LEADER, FOLLOWER1])
        .expect("leader");
    append_unreplicated(&f.partition, 10, Acks::One);
    let initialize_ms = START_MS;

    // A short delay, then a fetch that does not reach the log end.
    let first_fetch_ms = f.clock.advance(5_000);
    fetch_follower(&f.partition, FOLLOWER1, 5);
    let state = f.partition.replica_state(FOLLOWER1).expect("state");
    assert_eq!(
        (state.last_caught_up_time_ms, state.log_end_offset),
        (initialize_ms, 5)
    );
    assert_eq!(f.partition.high_watermark(), 5);

    // New data; the follower reaches the end as of its first fetch. More than the lag has
    // passed since the leader started, but not since that first fetch.
    f.clock.advance(5_001);
    append_unreplicated(&f.partition, 5, Acks::One);
    fetch_follower(&f.partition, FOLLOWER1, 10);
    let state = f.partition.replica_state(FOLLOWER1).expect("state");
    assert_eq!(
        (state.last_caught_up_time_ms, state.log_end_offset),
        (first_fetch_ms, 10)
    );
    assert_eq!(f.partition.high_watermark(), 10);
    assert_eq!(f.partition.maybe_shrink_isr(), None);
    assert_eq!(f.partition.isr(), [LEADER, FOLLOWER1]);
}

#[test]
fn replica_should_not_shrink_isr_if_follower_caught_up_to_log_end() {
    let f = fixture(ReplicaConfig::default());
    f.partition
        .become_leader(5, 1, &[LEADER, FOLLOWER1], &[LEADER, FOLLOWER1])
        .expect("leader");
    append_unreplicated(&f.partition, 10, Acks::One);
    fetch_follower(&f.partition, FOLLOWER1, 10);
    let state = f.partition.replica_state(FOLLOWER1).expect("state");
    assert_eq!(
        (state.last_caught_up_time_ms, state.log_end_offset),
        (START_MS, 10)
    );
    assert_eq!(f.partition.high_watermark(), 10);
    f.clock.advance(30_001);
    assert_eq!(
        f.partition.maybe_shrink_isr(),
        None,
        "at the log end, however long ago"
    );
}

#[test]
fn replica_high_watermark_advance_should_not_advance_when_under_min_isr() {
    let f = fixture(ReplicaConfig {
        min_insync_replicas: 3,
        ..ReplicaConfig::default()
    });
    f.partition
        .become_leader(5, 1, &[LEADER, FOLLOWER1, FOLLOWER2], &[LEADER, FOLLOWER1])
        .expect("leader");
    append_unreplicated(&f.partition, 6, Acks::One);
    assert!(f.partition.is_under_min_isr());
    assert_eq!(fetch_follower(&f.partition, FOLLOWER1, 6), None);
    assert_eq!(f.partition.high_watermark(), 0, "under min ISR");
    let change = fetch_follower(&f.partition, FOLLOWER2, 6).expect("an expansion");
    assert_eq!(f.partition.maximal_isr(), [LEADER, FOLLOWER1, FOLLOWER2]);
    assert_eq!(
        f.partition.high_watermark(),
        0,
        "the committed ISR is still under min ISR"
    );
    f.partition
        .complete_isr_change(&change, true)
        .expect("commit");
    assert!(!f.partition.is_under_min_isr());
    assert_eq!(f.partition.high_watermark(), 6);
}

#[test]
fn replica_at_min_isr() {
    let f = fixture(ReplicaConfig::default());
    assert!(!f.partition.is_at_min_isr(), "not leading");
    f.partition
        .become_leader(8, 1, &[LEADER, FOLLOWER1, FOLLOWER2], &[LEADER])
        .expect("leader");
    assert!(f.partition.is_at_min_isr());
}

#[test]
fn replica_is_under_min_isr() {
    let f = fixture(ReplicaConfig {
        min_insync_replicas: 2,
        ..ReplicaConfig::default()
    });
    f.partition
        .become_leader(0, 1, &[LEADER, FOLLOWER1], &[LEADER, FOLLOWER1])
        .expect("leader");
    assert!(!f.partition.is_under_min_isr());
    f.partition
        .become_leader(1, 2, &[LEADER, FOLLOWER1], &[LEADER])
        .expect("leader");
    assert!(f.partition.is_under_min_isr());
}

#[test]
fn replica_update_follower_fetch_state() {
    let f = fixture(ReplicaConfig::default());
    f.log.append_batch(&client_batch(6)).expect("seed");
    f.partition
        .become_leader(5, 1, &[LEADER, FOLLOWER1], &[LEADER, FOLLOWER1])
        .expect("leader");
    let state = f.partition.replica_state(FOLLOWER1).expect("state");
    assert_eq!(state.last_caught_up_time_ms, START_MS);
    assert_eq!(state.log_start_offset, UNKNOWN_OFFSET);
    assert_eq!(state.log_end_offset, UNKNOWN_OFFSET);

    f.clock.advance(500);
    fetch_follower(&f.partition, FOLLOWER1, 3);
    let state = f.partition.replica_state(FOLLOWER1).expect("state");
    assert_eq!(state.last_caught_up_time_ms, START_MS, "3 < the leader's 6");
    assert_eq!((state.log_start_offset, state.log_end_offset), (0, 3));

    let now = f.clock.advance(500);
    fetch_follower(&f.partition, FOLLOWER1, 6);
    let state = f.partition.replica_state(FOLLOWER1).expect("state");
    assert_eq!(state.last_caught_up_time_ms, now);
    assert_eq!(state.log_end_offset, 6);
}

#[test]
fn replica_acks_all_under_min_isr_fails_with_not_enough_replicas_and_writes_nothing() {
    let f = fixture(ReplicaConfig {
        min_insync_replicas: 2,
        ..ReplicaConfig::default()
    });
    f.partition
        .become_leader(1, 1, &[LEADER, FOLLOWER1], &[LEADER])
        .expect("leader");
    let error = f
        .partition
        .append_as_leader(&client_batch(3), Acks::All)
        .expect_err("under min ISR");
    assert!(matches!(
        error,
        Error::NotEnoughReplicas {
            in_sync: 1,
            required: 2
        }
    ));
    assert_eq!(error.kafka_code(), Some(19));
    assert_eq!(f.log.log_end_offset(), 0);
    // acks=1 does not need the ISR.
    let info = f
        .partition
        .append_as_leader(&client_batch(3), Acks::One)
        .expect("acks=1")
        .wait(GENEROUS)
        .expect("acks=1 resolves at once");
    assert_eq!(info.last_offset, 2);
}

#[test]
fn replica_acks_all_completes_once_every_isr_member_has_fetched_the_batch() {
    let f = fixture(ReplicaConfig {
        min_insync_replicas: 2,
        ..ReplicaConfig::default()
    });
    f.partition
        .become_leader(1, 1, &[LEADER, FOLLOWER1], &[LEADER, FOLLOWER1])
        .expect("leader");
    let ack = f
        .partition
        .append_as_leader(&client_batch(3), Acks::All)
        .expect("append");
    assert_eq!(ack.required_offset(), 3);
    fetch_follower(&f.partition, FOLLOWER1, 0);
    assert!(!ack.is_done(), "the follower has not got the batch yet");
    fetch_follower(&f.partition, FOLLOWER1, 3);
    assert!(ack.is_done());
    assert_eq!(ack.wait(GENEROUS).expect("committed").last_offset, 2);
    assert_eq!(f.partition.high_watermark(), 3);
}

#[test]
fn replica_acks_all_without_progress_times_out_and_keeps_the_records() {
    let f = fixture(ReplicaConfig::default());
    f.partition
        .become_leader(1, 1, &[LEADER, FOLLOWER1], &[LEADER, FOLLOWER1])
        .expect("leader");
    let ack = f
        .partition
        .append_as_leader(&client_batch(1), Acks::All)
        .expect("append");
    let error = ack
        .wait(Duration::from_millis(1))
        .expect_err("nobody fetches");
    assert!(matches!(error, Error::RequestTimedOut { .. }));
    assert_eq!(error.kafka_code(), Some(7));
    assert_eq!(f.log.log_end_offset(), 1);
}

#[test]
fn replica_isr_shrinking_below_min_isr_fails_waiting_appends_after_append_and_a_retry_is_deduplicated()
 {
    let f = fixture(ReplicaConfig {
        min_insync_replicas: 2,
        ..ReplicaConfig::default()
    });
    f.partition
        .become_leader(1, 1, &[LEADER, FOLLOWER1], &[LEADER, FOLLOWER1])
        .expect("leader");
    let idempotent = || {
        let mut builder = BatchBuilder::new(Compression::None).producer(7, 0, 0);
        builder.push(&NewRecord::new(START_MS, None, Some(b"once")));
        builder.build().expect("build")
    };
    let ack = f
        .partition
        .append_as_leader(&idempotent(), Acks::All)
        .expect("append");
    f.clock.advance(30_001);
    let shrink = f.partition.maybe_shrink_isr().expect("follower 1 lags");
    assert!(
        !ack.is_done(),
        "the leaving member counts until the shrink commits"
    );
    f.partition
        .complete_isr_change(&shrink, true)
        .expect("commit");
    let error = ack.wait(GENEROUS).expect_err("the ISR shrank below 2");
    assert!(matches!(
        error,
        Error::NotEnoughReplicasAfterAppend {
            in_sync: 1,
            required: 2
        }
    ));
    assert_eq!(error.kafka_code(), Some(20));
    assert_eq!(f.log.log_end_offset(), 1, "the records stay");
    let retry = f
        .partition
        .append_as_leader(&idempotent(), Acks::One)
        .expect("retry")
        .wait(GENEROUS)
        .expect("acks=1");
    assert!(retry.duplicate);
    assert_eq!(f.log.log_end_offset(), 1);
}

#[test]
fn replica_requests_with_an_older_leader_epoch_are_fenced_and_newer_ones_unknown() {
    let f = fixture(ReplicaConfig::default());
    f.partition
        .become_leader(5, 1, &[LEADER, FOLLOWER1], &[LEADER, FOLLOWER1])
        .expect("leader");
    let with_epoch = |epoch| FollowerFetch {
        current_leader_epoch: Some(epoch),
        ..fetch_at(FOLLOWER1, 0)
    };
    let fenced = f
        .partition
        .read_for_follower(&with_epoch(4))
        .expect_err("older");
    assert!(matches!(
        fenced,
        Error::FencedLeaderEpoch {
            current: 5,
            found: 4
        }
    ));
    assert_eq!(fenced.kafka_code(), Some(74));
    let unknown = f
        .partition
        .read_for_follower(&with_epoch(6))
        .expect_err("newer");
    assert!(matches!(
        unknown,
        Error::UnknownLeaderEpoch {
            current: 5,
            found: 6
        }
    ));
    assert_eq!(unknown.kafka_code(), Some(75));
    assert!(f.partition.read_for_follower(&with_epoch(5)).is_ok());
    assert!(matches!(
        f.partition.last_offset_for_leader_epoch(Some(4), 5),
        Err(Error::FencedLeaderEpoch { .. })
    ));
    assert!(matches!(
        f.partition
            .become_leader(4, 1, &[LEADER, FOLLOWER1], &[LEADER]),
        Err(Error::FencedLeaderEpoch {
            current: 5,
            found: 4
        })
    ));
}

#[test]
fn replica_a_follower_partition_refuses_client_appends_and_follower_fetches() {
    let f = fixture(ReplicaConfig::default());
    f.partition
        .become_follower(3, 1, &[LEADER, FOLLOWER1], &[LEADER, FOLLOWER1])
        .expect("follower");
    let append = f
        .partition
        .append_as_leader(&client_batch(1), Acks::One)
        .expect_err("not the leader");
    assert_eq!(append.kafka_code(), Some(6));
    let fetch = f
        .partition
        .read_for_follower(&fetch_at(FOLLOWER1, 0))
        .expect_err("not the leader");
    assert!(matches!(fetch, Error::NotLeaderOrFollower { .. }));
    assert!(
        matches!(
            f.log.append(&[NewRecord::new(START_MS, None, Some(b"x"))]),
            Err(Error::NotLeaderOrFollower { .. })
        ),
        "the log refuses client appends too"
    );
}

#[test]
fn replica_losing_leadership_fails_waiting_appends_with_not_leader_or_follower() {
    let f = fixture(ReplicaConfig::default());
    f.partition
        .become_leader(1, 1, &[LEADER, FOLLOWER1], &[LEADER, FOLLOWER1])
        .expect("leader");
    let ack = f
        .partition
        .append_as_leader(&client_batch(1), Acks::All)
        .expect("append");
    f.partition
        .become_follower(2, 2, &[LEADER, FOLLOWER1], &[FOLLOWER1])
        .expect("follower");
    let error = ack.wait(GENEROUS).expect_err("no longer leading");
    assert_eq!(error.kafka_code(), Some(6));
}

#[test]
fn replica_bad_assignment_and_unknown_replicas_are_typed_errors() {
    let f = fixture(ReplicaConfig::default());
    for (replicas, isr) in [
        (&[FOLLOWER1][..], &[FOLLOWER1][..]),
        (&[LEADER, FOLLOWER1][..], &[FOLLOWER1][..]),
        (&[LEADER][..], &[LEADER, FOLLOWER2][..]),
    ] {
        assert!(matches!(
            f.partition.become_leader(1, 1, replicas, isr),
            Err(Error::InvalidArgument { .. })
        ));
    }
    f.partition
        .become_leader(1, 1, &[LEADER, FOLLOWER1], &[LEADER])
        .expect("leader");
    assert!(matches!(
        f.partition.read_for_follower(&fetch_at(FOLLOWER2, 0)),
        Err(Error::NotLeaderOrFollower { .. })
    ));
    assert!(matches!(
        f.partition.read_for_follower(&fetch_at(FOLLOWER1, 5)),
        Ok(FollowerRead::OffsetOutOfRange {
            log_start_offset: 0,
            log_end_offset: 0
        })
    ));
    assert!(matches!(
        Partition::new(
            Arc::clone(&f.log),
            LEADER,
            ReplicaConfig {
                min_insync_replicas: 0,
                ..ReplicaConfig::default()
            },
            f.clock.clone()
        ),
        Err(Error::InvalidConfig {
            setting: "min.insync.replicas",
            ..
        })
    ));
}

#[test]
fn replica_set_high_watermark_above_the_log_end_is_invalid_argument() {
    let f = fixture(ReplicaConfig::default());
    f.partition
        .become_leader(1, 1, &[LEADER, FOLLOWER1], &[LEADER, FOLLOWER1])
        .expect("leader");
    append_unreplicated(&f.partition, 2, Acks::One);
    assert!(matches!(
        f.log.set_high_watermark(3),
        Err(Error::InvalidArgument { .. })
    ));
    assert_eq!(f.partition.high_watermark(), 0);
}

#[test]
fn replica_high_watermark_waits_for_a_caught_up_follower_outside_the_isr() {
    let f = fixture(ReplicaConfig::default());
    f.partition
        .become_leader(5, 1, &[LEADER, FOLLOWER1], &[LEADER])
        .expect("leader");
    append_unreplicated(&f.partition, 4, Acks::One);
    assert_eq!(
        f.partition.high_watermark(),
        4,
        "an ISR of the leader alone"
    );
    // The follower reaches the end: caught up, and proposed for the ISR.
    let change = fetch_follower(&f.partition, FOLLOWER1, 4).expect("an expansion");
    f.partition
        .complete_isr_change(&change, false)
        .expect("rejected");
    assert_eq!(f.partition.isr(), [LEADER]);
    // Outside the ISR, but caught up within the lag: the high watermark waits for it.
    append_unreplicated(&f.partition, 2, Acks::One);
    assert_eq!(f.partition.high_watermark(), 4);
    // Once it has lagged for longer than replica.lag.time.max.ms, the leader goes on alone.
    f.clock.advance(30_001);
    append_unreplicated(&f.partition, 1, Acks::One);
    assert_eq!(f.partition.high_watermark(), 7);
}
