//! Leader elections and controller state in the replica layer: the ISR and election cases of
//! Kafka's `PartitionTest` that `partlog::replica::Partition` can express, ported under Kafka's
//! names, and the rules of issue 30: epoch checks before the role check (item 5), stale
//! partition epochs ignored (item 5), and unclean leader election refused unless
//! `unclean.leader.election.enable` is set, then with the followers truncated to the new
//! leader's log (item 4).
//!
//! Not expressible here: reassignment's adding and removing replicas, broker fencing and
//! controlled shutdown (the caller's controller handles them), the AlterPartition manager's
//! retries (the caller's transport), and a follower serving consumers (`fetchOnlyFromLeader =
//! false`).
#![cfg(feature = "sim")]

#[path = "common/replica.rs"]
mod replica_fixture;

use std::sync::Arc;

use partlog::replica::{
    FetchOutcome, FollowerFetch, IsrChangeKind, Partition, ReplicaConfig, ReplicaFetcher, Role,
    UNKNOWN_OFFSET,
};
use partlog::unstable::ManualClock;
use partlog::{Acks, EpochEntry, Error, Log, LogConfig};
use replica_fixture::*;
use tempfile::TempDir;

const LAG_PAST: i64 = 30_001;

/// Kafka's `seedLogData`: `records` records of `epoch` in the log, whose checkpointed high
/// watermark is 0.
fn seed_log_data(f: &Fixture, records: usize, epoch: i32) {
    f.log
        .append_as_follower(&replicated_batch(0, epoch, records))
        .expect("seed");
    f.log.set_high_watermark(0).expect("high watermark 0");
}

fn assert_code(result: Result<impl std::fmt::Debug, Error>, code: i16, what: &str) {
    match result {
        Err(error) => assert_eq!(error.kafka_code(), Some(code), "{what}: {error}"),
        Ok(value) => panic!("{what}: expected error code {code}, got {value:?}"),
    }
}

/// Kafka's `testReplicaFetchToFollower`: a follower answers a fetch carrying another leader
/// epoch by the epoch first, FENCED_LEADER_EPOCH (74) or UNKNOWN_LEADER_EPOCH (75), and only a
/// fetch of its own epoch (or none) with NOT_LEADER_OR_FOLLOWER (6). Issue 30, item 5.
#[test]
fn replica_fetch_to_follower() {
    let f = fixture(ReplicaConfig::default());
    let replicas = [LEADER, FOLLOWER1, FOLLOWER2];
    assert!(
        f.partition
            .become_follower(8, 1, &replicas, &replicas)
            .expect("follower")
    );
    let fetch = |epoch: Option<i32>| {
        f.partition.read_for_follower(&FollowerFetch {
            current_leader_epoch: epoch,
            ..fetch_at(FOLLOWER1, 0)
        })
    };
    assert_code(fetch(None), 6, "no epoch");
    assert_code(fetch(Some(8)), 6, "the follower's own epoch");
    assert_code(fetch(Some(9)), 75, "a newer epoch");
    assert_code(fetch(Some(7)), 74, "an older epoch");
}

/// Kafka's `testOffsetForLeaderEpochValidationForFollower`, its `fetchOnlyFromLeader = true`
/// half (partlog answers `OffsetsForLeaderEpoch` as a leader only). Issue 30, item 5.
#[test]
fn replica_offset_for_leader_epoch_validation_for_follower() {
    let f = fixture(ReplicaConfig::default());
    f.partition
        .become_follower(5, 1, &[LEADER, FOLLOWER1], &[LEADER, FOLLOWER1])
        .expect("follower");
    let ask = |epoch| f.partition.last_offset_for_leader_epoch(epoch, 0);
    assert_code(ask(None), 6, "no epoch");
    assert_code(ask(Some(5)), 6, "the current epoch");
    assert_code(ask(Some(4)), 74, "an older epoch");
    assert_code(ask(Some(6)), 75, "a newer epoch");
}

/// Kafka's `testOffsetForLeaderEpochValidationForLeader`.
#[test]
fn replica_offset_for_leader_epoch_validation_for_leader() {
    let f = fixture(ReplicaConfig::default());
    f.partition
        .become_leader(5, 1, &[LEADER, FOLLOWER1], &[LEADER, FOLLOWER1])
        .expect("leader");
    let ask = |epoch| f.partition.last_offset_for_leader_epoch(epoch, 0);
    assert!(ask(None).is_ok());
    assert!(ask(Some(5)).is_ok());
    assert_code(ask(Some(4)), 74, "an older epoch");
    assert_code(ask(Some(6)), 75, "a newer epoch");
}

/// Kafka's `testMakeLeaderUpdatesEpochCache`.
#[test]
fn replica_make_leader_updates_epoch_cache() {
    let f = fixture(ReplicaConfig::default());
    f.log
        .append_as_follower(&replicated_batch(0, 0, 2))
        .expect("epoch 0");
    f.log
        .append_as_follower(&replicated_batch(2, 5, 2))
        .expect("epoch 5");
    assert_eq!(f.log.log_end_offset(), 4);
    f.partition
        .become_leader(8, 1, &[LEADER, FOLLOWER1], &[LEADER, FOLLOWER1])
        .expect("leader");
    assert_eq!(
        f.partition
            .last_offset_for_leader_epoch(Some(8), 8)
            .expect("answer"),
        (8, 4)
    );
}

/// Kafka's `testIgnoreLeaderPartitionStateChangeWithOlderPartitionEpoch`.
#[test]
fn replica_ignore_leader_partition_state_change_with_older_partition_epoch() {
    let f = fixture(ReplicaConfig::default());
    assert!(
        f.partition
            .become_leader(8, 1, &[LEADER], &[LEADER])
            .expect("leader")
    );
    assert_eq!(f.partition.partition_epoch(), 1);
    assert!(
        !f.partition
            .become_leader(8, 0, &[LEADER], &[LEADER])
            .expect("ignored")
    );
    assert_eq!(f.partition.partition_epoch(), 1);
    assert_eq!(f.partition.leader_epoch(), 8);
}

/// Issue 30, item 5: after an ISR expansion committed at partition epoch 2, the controller's
/// older state (partition epoch 1, ISR [0]) arriving late changes nothing. It shrank the ISR
/// back to [0] at epoch 1 before.
#[test]
fn replica_a_stale_leader_state_does_not_undo_a_committed_isr_expansion() {
    let f = fixture(ReplicaConfig::default());
    let replicas = [LEADER, FOLLOWER1];
    f.partition
        .become_leader(8, 1, &replicas, &[LEADER])
        .expect("leader");
    append_unreplicated(&f.partition, 3, Acks::One);
    let change = fetch_follower(&f.partition, FOLLOWER1, 3).expect("an expansion");
    f.partition
        .complete_isr_change(&change, true)
        .expect("committed");
    assert_eq!(f.partition.isr(), replicas);
    assert_eq!(f.partition.partition_epoch(), 2);

    let applied = f
        .partition
        .become_leader(8, 1, &replicas, &[LEADER])
        .expect("a stale state is no error");
    assert!(!applied);
    assert_eq!(f.partition.isr(), replicas, "the ISR is not shrunk back");
    assert_eq!(f.partition.partition_epoch(), 2);
    assert_eq!(f.partition.last_isr(), replicas);
}

/// Kafka's `testIgnoreFollowerPartitionStateChangeWithOlderPartitionEpoch`, and an older
/// partition epoch ignored even with a newer leader epoch, as Kafka's `makeFollower` does.
#[test]
fn replica_ignore_follower_partition_state_change_with_older_partition_epoch() {
    let f = fixture(ReplicaConfig::default());
    let replicas = [LEADER, FOLLOWER1];
    assert!(
        f.partition
            .become_follower(8, 1, &replicas, &replicas)
            .expect("follower")
    );
    assert_eq!(
        (f.partition.partition_epoch(), f.partition.leader_epoch()),
        (1, 8)
    );
    assert!(
        !f.partition
            .become_follower(8, 1, &replicas, &replicas)
            .expect("the same state")
    );
    assert!(
        !f.partition
            .become_follower(9, 0, &replicas, &[FOLLOWER1])
            .expect("ignored")
    );
    assert_eq!(
        (f.partition.partition_epoch(), f.partition.leader_epoch()),
        (1, 8)
    );
    assert_eq!(
        f.partition.last_isr(),
        replicas,
        "the stale ISR is not learned"
    );
}

/// Kafka's `testMakeFollowerWithNoLeaderIdChange`.
#[test]
fn replica_make_follower_with_no_leader_id_change() {
    let f = fixture(ReplicaConfig::default());
    let replicas = [FOLLOWER1, FOLLOWER2, LEADER];
    assert!(
        f.partition
            .become_follower(1, 1, &replicas, &replicas)
            .expect("follower")
    );
    assert!(
        f.partition
            .become_follower(4, 1, &replicas, &replicas)
            .expect("a new epoch")
    );
    assert!(
        !f.partition
            .become_follower(4, 1, &replicas, &replicas)
            .expect("the same epoch")
    );
}

/// Kafka's `testFollowerShouldNotHaveAnyRemoteReplicaStates`.
#[test]
fn replica_follower_should_not_have_any_remote_replica_states() {
    let f = fixture(ReplicaConfig::default());
    let replicas = [LEADER, FOLLOWER1, FOLLOWER2];
    assert!(
        f.partition
            .become_leader(1, 1, &replicas, &replicas)
            .expect("leader")
    );
    assert_eq!(f.partition.isr(), replicas);
    assert!(f.partition.replica_state(FOLLOWER1).is_some());
    assert!(f.partition.replica_state(FOLLOWER2).is_some());

    assert!(
        f.partition
            .become_follower(2, 2, &replicas, &replicas)
            .expect("follower")
    );
    assert_eq!(
        (f.partition.partition_epoch(), f.partition.leader_epoch()),
        (2, 2)
    );
    assert!(f.partition.isr().is_empty(), "a follower keeps no ISR");
    assert!(f.partition.replica_state(FOLLOWER1).is_none());
    assert!(f.partition.replica_state(FOLLOWER2).is_none());
    assert_eq!(f.partition.replicas(), replicas);
    assert_eq!(f.partition.last_isr(), replicas);
}

/// Kafka's `testUpdateAssignmentAndIsr`, without reassignment's adding and removing replicas:
/// the leader tracks the followers of the assignment it was last given; a follower none.
#[test]
fn replica_update_assignment_and_isr() {
    let f = fixture(ReplicaConfig::default());
    f.partition
        .become_leader(1, 1, &[0, 1, 2, 3], &[0, 1, 2, 3])
        .expect("leader");
    let followers = |p: &Partition| -> Vec<i32> {
        (0..8).filter(|&id| p.replica_state(id).is_some()).collect()
    };
    assert_eq!(followers(&f.partition), [1, 2, 3]);
    f.partition
        .become_leader(1, 2, &[0, 3, 4, 5], &[0, 3, 4, 5])
        .expect("the same epoch, a new assignment");
    assert_eq!(f.partition.replicas(), [0, 3, 4, 5]);
    assert_eq!(f.partition.isr(), [0, 3, 4, 5]);
    assert_eq!(followers(&f.partition), [3, 4, 5]);
    f.partition
        .become_follower(2, 3, &[1, 2, 3, 0], &[1, 2, 3])
        .expect("follower");
    assert_eq!(f.partition.replicas(), [1, 2, 3, 0]);
    assert!(f.partition.isr().is_empty());
    assert!(followers(&f.partition).is_empty());
}

/// Kafka's `testDoNotResetReplicaStateIfLeaderEpochIsNotBumped`.
#[test]
fn replica_do_not_reset_replica_state_if_leader_epoch_is_not_bumped() {
    let f = fixture(ReplicaConfig::default());
    let replicas = [LEADER, FOLLOWER1];
    assert!(
        f.partition
            .become_leader(8, 1, &replicas, &[LEADER])
            .expect("leader")
    );
    let state = f.partition.replica_state(FOLLOWER1).expect("state");
    assert_eq!(
        (
            state.last_caught_up_time_ms,
            state.log_start_offset,
            state.log_end_offset
        ),
        (0, UNKNOWN_OFFSET, UNKNOWN_OFFSET),
        "outside the ISR: never caught up"
    );
    fetch_follower(&f.partition, FOLLOWER1, 0);
    let fetched = f.partition.replica_state(FOLLOWER1).expect("state");
    assert_eq!(
        (
            fetched.last_caught_up_time_ms,
            fetched.log_start_offset,
            fetched.log_end_offset
        ),
        (START_MS, 0, 0)
    );
    assert!(
        !f.partition
            .become_leader(8, 2, &replicas, &[LEADER])
            .expect("a newer partition epoch, the same leader epoch")
    );
    assert_eq!(
        (f.partition.partition_epoch(), f.partition.leader_epoch()),
        (2, 8)
    );
    assert_eq!(f.partition.isr(), [LEADER]);
    assert_eq!(
        f.partition.replica_state(FOLLOWER1),
        Some(fetched),
        "not reset"
    );
}

/// Kafka's `testDoNotUpdateEpochStartOffsetIfLeaderEpochIsNotBumped`: the epoch cache keeps
/// the epoch where it started.
#[test]
fn replica_do_not_update_epoch_start_offset_if_leader_epoch_is_not_bumped() {
    let f = fixture(ReplicaConfig::default());
    let replicas = [LEADER, FOLLOWER1];
    f.partition
        .become_leader(8, 1, &replicas, &[LEADER])
        .expect("leader");
    assert_eq!(
        f.log.leader_epoch_entries().last().copied(),
        Some(EpochEntry::new(8, 0))
    );
    append_unreplicated(&f.partition, 2, Acks::One);
    assert!(
        !f.partition
            .become_leader(8, 2, &replicas, &[LEADER])
            .expect("the same epoch")
    );
    assert_eq!(f.partition.partition_epoch(), 2);
    assert_eq!(
        f.log.leader_epoch_entries().last().copied(),
        Some(EpochEntry::new(8, 0))
    );
    // The epoch still starts at 0 for the ISR rule: a follower at 2 joins.
    let change = fetch_follower(&f.partition, FOLLOWER1, 2).expect("an expansion");
    assert_eq!(change.new_isr, replicas);
}

/// Kafka's `testIsrNotShrunkIfUpdateFails`.
#[test]
fn replica_isr_not_shrunk_if_update_fails() {
    let f = fixture(ReplicaConfig::default());
    seed_log_data(&f, 10, 4);
    let replicas = [LEADER, FOLLOWER1];
    f.partition
        .become_leader(5, 1, &replicas, &replicas)
        .expect("leader");
    assert_eq!(f.partition.high_watermark(), 0);
    f.clock.advance(LAG_PAST);
    let shrink = f.partition.maybe_shrink_isr().expect("a shrink");
    assert_eq!(shrink.kind, IsrChangeKind::Shrink);
    assert_eq!(shrink.new_isr, [LEADER]);
    assert_eq!(f.partition.isr(), replicas);
    assert_eq!(f.partition.high_watermark(), 0);
    f.partition
        .complete_isr_change(&shrink, false)
        .expect("rejected");
    assert_eq!(f.partition.isr(), replicas);
    assert_eq!(f.partition.partition_epoch(), 1);
    assert_eq!(f.partition.high_watermark(), 0);
}

/// Kafka's `testRetryShrinkIsr`: the shrink fails, is proposed again (partlog's caller retries
/// by asking again), and commits.
#[test]
fn replica_retry_shrink_isr() {
    let f = fixture(ReplicaConfig::default());
    seed_log_data(&f, 10, 4);
    let replicas = [LEADER, FOLLOWER1];
    f.partition
        .become_leader(5, 1, &replicas, &replicas)
        .expect("leader");
    f.clock.advance(LAG_PAST);
    let first = f.partition.maybe_shrink_isr().expect("a shrink");
    assert_eq!(f.partition.maximal_isr(), replicas);
    f.partition
        .complete_isr_change(&first, false)
        .expect("failed");
    assert_eq!(f.partition.high_watermark(), 0);
    let retry = f.partition.maybe_shrink_isr().expect("proposed again");
    assert_eq!(retry.new_isr, [LEADER]);
    f.partition
        .complete_isr_change(&retry, true)
        .expect("committed");
    assert_eq!(f.partition.partition_epoch(), 2);
    assert_eq!(f.partition.isr(), [LEADER]);
    assert_eq!(f.partition.maximal_isr(), [LEADER]);
    assert_eq!(f.partition.high_watermark(), f.log.log_end_offset());
}

/// Kafka's `testSingleInFlightAlterIsr`.
#[test]
fn replica_single_in_flight_alter_isr() {
    let f = fixture(ReplicaConfig::default());
    seed_log_data(&f, 10, 4);
    let follower3 = 3;
    f.partition
        .become_leader(
            5,
            1,
            &[LEADER, FOLLOWER1, FOLLOWER2, follower3],
            &[LEADER, FOLLOWER1, FOLLOWER2],
        )
        .expect("leader");
    fetch_follower(&f.partition, follower3, 10).expect("an expansion");
    assert_eq!(f.partition.isr(), [LEADER, FOLLOWER1, FOLLOWER2]);
    assert_eq!(
        f.partition.maximal_isr(),
        [LEADER, FOLLOWER1, FOLLOWER2, follower3]
    );
    f.clock.advance(LAG_PAST);
    assert_eq!(f.partition.maybe_shrink_isr(), None, "one change at a time");
}

/// Kafka's `testAlterIsrLeaderAndIsrRace`: the controller's newer state (same leader epoch,
/// partition epoch 2) replaces the shrink in flight; the committed ISR is the controller's, and
/// a late answer to the replaced shrink is refused. (Kafka's AlterPartition manager also holds
/// back a new request until the old one is answered; that is the caller's transport here.)
#[test]
fn replica_alter_isr_leader_and_isr_race() {
    let f = fixture(ReplicaConfig::default());
    seed_log_data(&f, 10, 4);
    let replicas = [LEADER, FOLLOWER1];
    f.partition
        .become_leader(5, 1, &replicas, &replicas)
        .expect("leader");
    let state = f.partition.replica_state(FOLLOWER1).expect("state");
    assert_eq!(state.last_caught_up_time_ms, START_MS);
    f.clock.advance(LAG_PAST);
    let shrink = f.partition.maybe_shrink_isr().expect("a shrink");
    assert!(
        !f.partition
            .become_leader(5, 2, &replicas, &replicas)
            .expect("the controller's state")
    );
    assert_eq!(f.partition.high_watermark(), 0);
    assert_eq!(f.partition.isr_change_in_flight(), None);
    assert_eq!(f.partition.isr(), replicas);
    assert!(matches!(
        f.partition.complete_isr_change(&shrink, true),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(
        f.partition.maybe_shrink_isr().is_some(),
        "pending a shrink again"
    );
}

/// Issue 30, item 4: a replica outside the last ISR it was told is refused the leadership
/// while `unclean.leader.election.enable` is off (Kafka's default): a typed error naming the
/// setting, and nothing changes.
#[test]
fn replica_unclean_leader_election_is_refused_by_default() {
    let f = fixture(ReplicaConfig::default());
    let replicas = [LEADER, FOLLOWER1, FOLLOWER2];
    f.partition
        .become_follower(1, 1, &replicas, &[FOLLOWER1, FOLLOWER2])
        .expect("follower");
    assert_eq!(f.partition.last_isr(), [FOLLOWER1, FOLLOWER2]);
    let error = f
        .partition
        .become_leader(2, 2, &replicas, &[LEADER])
        .expect_err("LEADER is not in the last ISR");
    assert!(
        matches!(&error, Error::UncleanLeaderElection { replica: LEADER, isr, .. } if isr == &[FOLLOWER1, FOLLOWER2]),
        "{error}"
    );
    assert!(
        error.to_string().contains("unclean.leader.election.enable"),
        "{error}"
    );
    assert_eq!(error.kafka_code(), Some(83));
    assert_eq!(f.partition.role(), Role::Follower);
    assert_eq!(
        (f.partition.leader_epoch(), f.partition.partition_epoch()),
        (1, 1)
    );
    assert_eq!(f.log.leader_epoch(), None, "the log was not made a leader");
    assert!(f.log.leader_epoch_entries().is_empty());

    // Told a newer ISR with it, the same replica leads cleanly.
    f.partition
        .become_follower(1, 2, &replicas, &[LEADER, FOLLOWER1])
        .expect("the controller's newer ISR");
    assert!(
        f.partition
            .become_leader(2, 3, &replicas, &[LEADER, FOLLOWER1])
            .expect("clean")
    );
}

/// Issue 30, item 4 (KIP-966): members that left the ISR while it was below
/// `min.insync.replicas` may lead cleanly once it is empty; a member that left it earlier may
/// not.
#[test]
fn replica_eligible_leader_replicas_lead_cleanly_once_the_isr_is_empty() {
    let config = ReplicaConfig {
        min_insync_replicas: 2,
        ..ReplicaConfig::default()
    };
    let replicas = [LEADER, FOLLOWER1, FOLLOWER2];
    let told = |local_is_leader_id: bool| {
        let f = fixture(config);
        for (epoch, isr) in [
            (1, &[LEADER, FOLLOWER1, FOLLOWER2][..]),
            (2, &[FOLLOWER1, FOLLOWER2][..]),
            (3, &[FOLLOWER1][..]),
            (4, &[][..]),
        ] {
            let isr: Vec<i32> = if local_is_leader_id {
                isr.to_vec()
            } else {
                // The same history with the local replica leaving first.
                isr.iter()
                    .map(|&id| {
                        if id == LEADER {
                            FOLLOWER2
                        } else if id == FOLLOWER2 {
                            LEADER
                        } else {
                            id
                        }
                    })
                    .collect()
            };
            f.partition
                .become_follower(1, epoch, &replicas, &isr)
                .expect("follower");
        }
        f
    };
    // LEADER left while the ISR was at min.insync.replicas (3 → 2): not eligible.
    let early = told(true);
    assert_eq!(
        early.partition.eligible_leader_replicas(),
        [FOLLOWER1, FOLLOWER2]
    );
    assert!(matches!(
        early.partition.become_leader(2, 5, &replicas, &[LEADER]),
        Err(Error::UncleanLeaderElection { ref elr, .. }) if elr == &[FOLLOWER1, FOLLOWER2]
    ));
    // LEADER left when the ISR went below it (2 → 1): eligible once the ISR is empty.
    let late = told(false);
    assert_eq!(
        late.partition.eligible_leader_replicas(),
        [LEADER, FOLLOWER1]
    );
    assert!(
        late.partition
            .become_leader(2, 5, &replicas, &[LEADER])
            .expect("an eligible leader replica")
    );
    assert_eq!(late.partition.eligible_leader_replicas(), [FOLLOWER1]);
}

/// One replica's log, partition and (when following) fetcher.
struct Node {
    _dir: TempDir,
    partition: Partition,
}

fn node(id: i32, config: ReplicaConfig, clock: &Arc<ManualClock>) -> Node {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Arc::new(Log::open(dir.path(), LogConfig::default()).expect("open"));
    let partition = Partition::new(log, id, config, clock.clone()).expect("partition");
    Node {
        _dir: dir,
        partition,
    }
}

fn fetch_until_caught_up(fetcher: &mut ReplicaFetcher, leader: &Partition) {
    for _ in 0..10 {
        if let FetchOutcome::UpToDate { .. } = fetcher.fetch_once(leader).expect("fetch") {
            return;
        }
    }
    panic!("the follower did not catch up in 10 fetches");
}

/// Issue 30, item 4, with the setting on: the new leader's log end is the truth, as in Kafka.
/// Replica 2 fell out of the ISR at offset 5; replicas 0 and 1 committed 10. Elected uncleanly,
/// replica 2 leads with itself as the ISR; replica 1, back as its follower, truncates below its
/// own high watermark to 5 when its fetch finds the epochs diverging, then copies the new
/// leader's records: the two logs end equal.
#[test]
fn replica_unclean_leader_election_when_enabled_truncates_followers_to_the_new_leader() {
    let clock = Arc::new(ManualClock::new(START_MS));
    let unclean = ReplicaConfig {
        unclean_leader_election_enable: true,
        ..ReplicaConfig::default()
    };
    let (n0, n1, n2) = (
        node(0, ReplicaConfig::default(), &clock),
        node(1, ReplicaConfig::default(), &clock),
        node(2, unclean, &clock),
    );
    let replicas = [0, 1, 2];
    n0.partition
        .become_leader(1, 1, &replicas, &replicas)
        .expect("leader");
    for n in [&n1, &n2] {
        n.partition
            .become_follower(1, 1, &replicas, &replicas)
            .expect("follower");
    }
    let mut f1 = ReplicaFetcher::new(Arc::clone(n1.partition.log()), 1, 1).expect("fetcher");
    let mut f2 = ReplicaFetcher::new(Arc::clone(n2.partition.log()), 2, 1).expect("fetcher");
    append_unreplicated(&n0.partition, 5, Acks::One);
    fetch_until_caught_up(&mut f1, &n0.partition);
    fetch_until_caught_up(&mut f2, &n0.partition);
    assert_eq!(n0.partition.high_watermark(), 5);

    // Replica 2 stops fetching: five more records wait for it, until it leaves the ISR and
    // the controller tells the followers.
    append_unreplicated(&n0.partition, 5, Acks::One);
    fetch_until_caught_up(&mut f1, &n0.partition);
    assert_eq!(n0.partition.high_watermark(), 5);
    clock.advance(LAG_PAST);
    let shrink = n0.partition.maybe_shrink_isr().expect("replica 2 lags");
    assert_eq!(shrink.new_isr, [0, 1]);
    n0.partition
        .complete_isr_change(&shrink, true)
        .expect("committed");
    assert_eq!(n0.partition.high_watermark(), 10);
    for n in [&n1, &n2] {
        n.partition
            .become_follower(1, 2, &replicas, &[0, 1])
            .expect("the new ISR");
    }
    fetch_until_caught_up(&mut f1, &n0.partition);
    assert_eq!(n1.partition.log().high_watermark(), 10);
    assert_eq!(n2.partition.log().log_end_offset(), 5);

    // Replicas 0 and 1 are gone; the controller elects replica 2 uncleanly.
    assert!(matches!(
        n2.partition.become_leader(2, 3, &replicas, &[1, 2]),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(
        n2.partition
            .become_leader(2, 3, &replicas, &[2])
            .expect("unclean, allowed")
    );
    assert_eq!(n2.partition.isr(), [2]);
    append_unreplicated(&n2.partition, 2, Acks::One);
    assert_eq!(n2.partition.high_watermark(), 7);

    // Replica 1 returns as a follower of epoch 2 and truncates to the new leader's log.
    n1.partition
        .become_follower(2, 3, &replicas, &[2])
        .expect("follower");
    f1.set_leader_epoch(2);
    match f1.fetch_once(&n2.partition).expect("fetch") {
        FetchOutcome::Truncated { to, done } => assert_eq!((to, done), (5, true)),
        other => panic!("expected a truncation, got {other:?}"),
    }
    assert_eq!(
        n1.partition.log().high_watermark(),
        5,
        "records 5..10 were committed and are gone"
    );
    fetch_until_caught_up(&mut f1, &n2.partition);
    assert_same_log(n1.partition.log(), n2.partition.log());
    assert_eq!(n1.partition.log().high_watermark(), 7);
}
