//! Kafka's `AbstractFetcherThreadTest`, ported: a follower `Log` driven by
//! `partlog::replica::ReplicaFetcher` against a leader `Partition`, in process: the truncation
//! protocol (`OffsetsForLeaderEpoch` rounds), truncation on a diverging fetch, and the fallback
//! to the high watermark.
#![cfg(feature = "sim")]

#[path = "common/replica.rs"]
mod replica_fixture;

use std::sync::Arc;

use partlog::replica::{
    FetchOutcome, Partition, ReplicaConfig, ReplicaFetcher, Truncation, truncation_point,
};
use partlog::unstable::ManualClock;
use partlog::{BatchBuilder, Compression, Log, LogConfig, NewRecord};
use replica_fixture::{FOLLOWER1 as FOLLOWER, LEADER, START_MS, assert_same_log};
use tempfile::TempDir;

/// A one-record batch as a leader of `epoch` wrote it at `offset`.
fn batch(offset: i64, epoch: i32, value: &str) -> Vec<u8> {
    let mut builder = BatchBuilder::new(Compression::None)
        .base_offset(offset)
        .partition_leader_epoch(epoch);
    builder.push(&NewRecord::new(START_MS, None, Some(value.as_bytes())));
    builder.build().expect("build")
}

/// A log holding one-record batches at offsets 0, 1, ... with these epochs.
fn log_with_epochs(epochs: &[i32], tag: &str) -> (TempDir, Arc<Log>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Arc::new(Log::open(dir.path(), LogConfig::default()).expect("open"));
    for (offset, &epoch) in epochs.iter().enumerate() {
        let offset = i64::try_from(offset).expect("offset");
        log.append_as_follower(&batch(offset, epoch, &format!("{tag}{offset}")))
            .expect("append");
    }
    (dir, log)
}

/// A leader `Partition` over one-record batches with `epochs`, its high watermark at
/// `high_watermark`, the follower in the ISR.
fn leader(epochs: &[i32], high_watermark: i64) -> (TempDir, Partition) {
    let (dir, log) = log_with_epochs(epochs, "leader");
    log.set_high_watermark(high_watermark).expect("leader HW");
    let partition = Partition::new(
        log,
        LEADER,
        ReplicaConfig::default(),
        Arc::new(ManualClock::new(START_MS)),
    )
    .expect("partition");
    let latest = *epochs.last().expect("epochs");
    partition
        .become_leader(latest, 1, &[LEADER, FOLLOWER], &[LEADER, FOLLOWER])
        .expect("leader");
    assert_eq!(partition.high_watermark(), high_watermark);
    (dir, partition)
}

#[test]
fn fetcher_truncation() {
    let (_follower_dir, follower) = log_with_epochs(&[0, 2, 4], "follower");
    let (_leader_dir, leader) = leader(&[1, 3, 5], 2);
    let mut fetcher = ReplicaFetcher::new(Arc::clone(&follower), FOLLOWER, 5).expect("fetcher");
    fetcher.begin_truncation();

    // Round 1: the follower's epoch 4; the leader answers (3, 2); the follower's own
    // end_offset_for(3) is (2, 2): another epoch, so truncate to 2 and ask again.
    assert_eq!(
        leader
            .last_offset_for_leader_epoch(Some(5), 4)
            .expect("ask"),
        (3, 2)
    );
    assert_eq!(follower.end_offset_for_epoch(3), (2, 2));
    assert_eq!(
        fetcher.fetch_once(&leader).expect("round 1"),
        FetchOutcome::Truncated { to: 2, done: false }
    );
    // Round 2: epoch 2; the leader answers (1, 1); the follower has (0, 1): truncate to 1.
    assert_eq!(
        leader
            .last_offset_for_leader_epoch(Some(5), 2)
            .expect("ask"),
        (1, 1)
    );
    assert_eq!(
        fetcher.fetch_once(&leader).expect("round 2"),
        FetchOutcome::Truncated { to: 1, done: false }
    );
    // Round 3: epoch 0; the leader answers (0, 0); the follower has (0, 1), the same epoch:
    // truncate to 0, done.
    assert_eq!(
        leader
            .last_offset_for_leader_epoch(Some(5), 0)
            .expect("ask"),
        (0, 0)
    );
    assert_eq!(
        fetcher.fetch_once(&leader).expect("round 3"),
        FetchOutcome::Truncated { to: 0, done: true }
    );
    assert!(!fetcher.is_truncating());

    match fetcher.fetch_once(&leader).expect("fetch") {
        FetchOutcome::Appended {
            first_offset: 0,
            log_end_offset: 3,
            high_watermark: 2,
            ..
        } => {}
        other => panic!("expected the leader's three batches: {other:?}"),
    }
    assert_same_log(&follower, leader.log());
    assert_eq!(follower.high_watermark(), 2);
    assert_eq!(
        leader.high_watermark(),
        2,
        "the follower has not reported its new end yet"
    );
}

#[test]
fn fetcher_diverging_epochs() {
    let (_follower_dir, follower) = log_with_epochs(&[0, 2, 4], "same");
    let (_leader_dir, leader) = {
        // The leader shares the first two batches byte for byte, then has epoch 5 at 2.
        let (dir, log) = log_with_epochs(&[0, 2], "same");
        log.append_as_follower(&batch(2, 5, "leader2"))
            .expect("append");
        log.set_high_watermark(2).expect("HW");
        let partition = Partition::new(
            log,
            LEADER,
            ReplicaConfig::default(),
            Arc::new(ManualClock::new(START_MS)),
        )
        .expect("partition");
        partition
            .become_leader(5, 1, &[LEADER, FOLLOWER], &[LEADER, FOLLOWER])
            .expect("leader");
        (dir, partition)
    };
    let mut fetcher = ReplicaFetcher::new(Arc::clone(&follower), FOLLOWER, 5).expect("fetcher");

    // A fetch with last fetched epoch 4 at 3: the leader reports epoch 2 ending at 2.
    assert_eq!(
        fetcher.fetch_once(&leader).expect("diverging fetch"),
        FetchOutcome::Truncated { to: 2, done: true }
    );
    assert_eq!(follower.latest_epoch(), Some(2));
    // The next fetch copies the epoch-5 batch.
    match fetcher.fetch_once(&leader).expect("fetch") {
        FetchOutcome::Appended {
            first_offset: 2,
            log_end_offset: 3,
            ..
        } => {}
        other => panic!("expected the epoch-5 batch: {other:?}"),
    }
    assert_eq!(follower.epoch_for_offset(2), Some(5));
    assert_same_log(&follower, leader.log());
}

#[test]
fn fetcher_truncate_to_high_watermark_if_leader_epoch_info_not_available() {
    let (_follower_dir, follower) = log_with_epochs(&[0, 2, 4], "follower");
    follower.set_high_watermark(2).expect("follower HW");
    let mut fetcher = ReplicaFetcher::new(Arc::clone(&follower), FOLLOWER, 5).expect("fetcher");
    // A leader that keeps no epochs answers (-1, -1).
    assert_eq!(truncation_point(&follower, (-1, -1)), Truncation::Done(2));
    assert_eq!(
        fetcher.truncate_for((-1, -1)).expect("truncate"),
        Truncation::Done(2)
    );
    assert_eq!(follower.log_end_offset(), 2);
    assert_eq!(follower.latest_epoch(), Some(2));
}

#[test]
fn fetcher_takes_the_leaders_high_watermark_clamped_to_its_own_log_end() {
    let (_leader_dir, leader) = leader(&[0, 0, 0, 0], 4);
    let (_follower_dir, follower) = log_with_epochs(&[], "none");
    let mut fetcher = ReplicaFetcher::new(Arc::clone(&follower), FOLLOWER, 0).expect("fetcher");
    fetcher.set_max_bytes(1); // one batch per fetch
    match fetcher.fetch_once(&leader).expect("fetch") {
        FetchOutcome::Appended {
            log_end_offset: 1,
            high_watermark: 1,
            ..
        } => {}
        other => panic!("expected one batch, the HW clamped to 1: {other:?}"),
    }
    assert_eq!(follower.high_watermark(), 1, "the leader's is 4");
    for _ in 0..3 {
        fetcher.fetch_once(&leader).expect("fetch");
    }
    assert_same_log(&follower, leader.log());
    assert_eq!(follower.high_watermark(), 4);
}

#[test]
fn fetcher_below_the_leaders_log_start_restarts_there_and_a_stale_epoch_is_fenced() {
    let (_leader_dir, leader) = leader(&[0, 0, 0, 0], 4);
    leader
        .log()
        .delete_records_before(3)
        .expect("delete records");
    let (_follower_dir, follower) = log_with_epochs(&[], "none");
    let mut fetcher = ReplicaFetcher::new(Arc::clone(&follower), FOLLOWER, 0).expect("fetcher");
    assert_eq!(
        fetcher.fetch_once(&leader).expect("out of range"),
        FetchOutcome::Truncated { to: 3, done: true }
    );
    assert_eq!(follower.log_start_offset(), 3);
    fetcher.fetch_once(&leader).expect("fetch");
    assert_eq!(follower.log_end_offset(), 4);

    leader
        .become_leader(1, 2, &[LEADER, FOLLOWER], &[LEADER, FOLLOWER])
        .expect("epoch 1");
    let error = fetcher
        .fetch_once(&leader)
        .expect_err("the fetcher still says epoch 0");
    assert_eq!(error.kafka_code(), Some(74));
}

#[test]
fn fetcher_a_former_leader_that_wrote_nothing_in_its_epoch_converges() {
    // Replica 1 led epoch 3 from offset 2 and wrote nothing; replica 0 never had epoch 3 and
    // now leads epoch 4 from the same offset. The follower's epoch-3 entry sits at its log
    // end: Kafka's truncateTo(LEO) drops it, or every fetch would diverge again.
    let (_follower_dir, follower) = log_with_epochs(&[0, 2], "same");
    follower.become_leader(3).expect("epoch 3, no appends");
    follower.become_follower().expect("follower");
    assert_eq!(follower.latest_epoch(), Some(3));
    let (_leader_dir, leader) = {
        let (dir, log) = log_with_epochs(&[0, 2], "same");
        log.set_high_watermark(2).expect("HW");
        let partition = Partition::new(
            log,
            LEADER,
            ReplicaConfig::default(),
            Arc::new(ManualClock::new(START_MS)),
        )
        .expect("partition");
        partition
            .become_leader(4, 1, &[LEADER, FOLLOWER], &[LEADER, FOLLOWER])
            .expect("leader");
        (dir, partition)
    };
    let ack = leader
        .append_as_leader(
            &{
                let mut builder = BatchBuilder::new(Compression::None);
                builder.push(&NewRecord::new(START_MS, None, Some(b"epoch 4")));
                builder.build().expect("build")
            },
            partlog::Acks::One,
        )
        .expect("append");
    ack.wait(std::time::Duration::from_secs(120))
        .expect("acks=1");

    let mut fetcher = ReplicaFetcher::new(Arc::clone(&follower), FOLLOWER, 4).expect("fetcher");
    // Diverging (2, 2): the follower's end for epoch 2 is 2, its log end: nothing to cut but
    // the epoch-3 entry.
    assert_eq!(
        fetcher.fetch_once(&leader).expect("diverging fetch"),
        FetchOutcome::Truncated { to: 2, done: true }
    );
    assert_eq!(
        follower.latest_epoch(),
        Some(2),
        "the empty epoch 3 is gone"
    );
    assert!(matches!(
        fetcher.fetch_once(&leader).expect("fetch"),
        FetchOutcome::Appended {
            log_end_offset: 3,
            ..
        }
    ));
    assert_same_log(&follower, leader.log());
}

#[test]
fn fetcher_a_leader_log_start_inside_a_batch_restarts_the_empty_follower_at_the_batch_base() {
    // The leader: one batch of offsets 0..=2, one at 3; deleteRecords moved its start to 1.
    let (_leader_dir, leader) = {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = Arc::new(Log::open(dir.path(), LogConfig::default()).expect("open"));
        let mut builder = BatchBuilder::new(Compression::None).partition_leader_epoch(0);
        for value in ["a", "b", "c"] {
            builder.push(&NewRecord::new(START_MS, None, Some(value.as_bytes())));
        }
        log.append_as_follower(&builder.build().expect("build"))
            .expect("append");
        log.append_as_follower(&batch(3, 0, "d")).expect("append");
        log.set_high_watermark(4).expect("HW");
        log.delete_records_before(1).expect("delete records");
        let partition = Partition::new(
            log,
            LEADER,
            ReplicaConfig::default(),
            Arc::new(ManualClock::new(START_MS)),
        )
        .expect("partition");
        partition
            .become_leader(0, 1, &[LEADER, FOLLOWER], &[LEADER, FOLLOWER])
            .expect("leader");
        (dir, partition)
    };
    let (_follower_dir, follower) = log_with_epochs(&[], "none");
    let mut fetcher = ReplicaFetcher::new(Arc::clone(&follower), FOLLOWER, 0).expect("fetcher");
    assert_eq!(
        fetcher.fetch_once(&leader).expect("out of range"),
        FetchOutcome::Truncated { to: 1, done: true }
    );
    // The read at 1 returns the batch based at 0: the empty follower restarts there.
    match fetcher.fetch_once(&leader).expect("fetch") {
        FetchOutcome::Appended {
            first_offset: 0,
            log_end_offset: 4,
            high_watermark: 4,
            ..
        } => {}
        other => panic!("expected both batches from 0: {other:?}"),
    }
    assert_same_log(&follower, leader.log());
    assert_eq!(
        follower.log_start_offset(),
        1,
        "the leader's log start, followed up"
    );
}
