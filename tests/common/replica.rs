//! The fixture of the replica-layer tests that port Kafka's `PartitionTest`
//! (`#[path = "common/replica.rs"] mod replica_fixture;`): one `Partition` over a fresh log on a
//! manual clock, client and replicated batches, and follower fetches.
#![allow(dead_code, reason = "each test file uses a different part of it")]

use std::sync::Arc;
use std::time::Duration;

use partlog::replica::{FollowerFetch, FollowerRead, IsrChange, Partition, ReplicaConfig};
use partlog::unstable::ManualClock;
use partlog::{Acks, BatchBuilder, Compression, Log, LogConfig, NewRecord, ReadBound};
use tempfile::TempDir;

pub const LEADER: i32 = 0;
pub const FOLLOWER1: i32 = 1;
pub const FOLLOWER2: i32 = 2;
pub const START_MS: i64 = 1_700_000_000_000;
pub const GENEROUS: Duration = Duration::from_secs(120);

/// A partition of replica [`LEADER`] over a fresh log, on a manual clock.
pub struct Fixture {
    /// Keeps the log's directory.
    pub dir: TempDir,
    pub log: Arc<Log>,
    pub clock: Arc<ManualClock>,
    pub partition: Partition,
}

/// A fresh [`Fixture`] with `config`.
pub fn fixture(config: ReplicaConfig) -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Arc::new(Log::open(dir.path(), LogConfig::default()).expect("open"));
    let clock = Arc::new(ManualClock::new(START_MS));
    let partition =
        Partition::new(Arc::clone(&log), LEADER, config, clock.clone()).expect("partition");
    Fixture {
        dir,
        log,
        clock,
        partition,
    }
}

/// A client batch of `records` records (no offsets or epoch yet).
pub fn client_batch(records: usize) -> Vec<u8> {
    let mut builder = BatchBuilder::new(Compression::None);
    for i in 0..records {
        builder.push(&NewRecord::new(
            START_MS,
            None,
            Some(format!("v{i}").as_bytes()),
        ));
    }
    builder.build().expect("build")
}

/// A batch as a leader of `epoch` wrote it at `base_offset`.
pub fn replicated_batch(base_offset: i64, epoch: i32, records: usize) -> Vec<u8> {
    let mut builder = BatchBuilder::new(Compression::None)
        .base_offset(base_offset)
        .partition_leader_epoch(epoch);
    for i in 0..records {
        builder.push(&NewRecord::new(
            START_MS,
            None,
            Some(format!("r{i}").as_bytes()),
        ));
    }
    builder.build().expect("build")
}

/// An `acks=0` or `acks=1` append, which resolves at once whatever the followers do.
pub fn append_unreplicated(partition: &Partition, records: usize, acks: Acks) {
    partition
        .append_as_leader(&client_batch(records), acks)
        .expect("append")
        .wait(GENEROUS)
        .expect("acks=0 and acks=1 resolve at once");
}

/// A fetch from `replica_id` at `fetch_offset`, without epochs.
pub fn fetch_at(replica_id: i32, fetch_offset: i64) -> FollowerFetch {
    FollowerFetch {
        replica_id,
        fetch_offset,
        last_fetched_epoch: None,
        current_leader_epoch: None,
        log_start_offset: 0,
        max_bytes: 1024 * 1024,
    }
}

/// A follower fetch that must be served; returns the ISR change it proposed.
pub fn fetch_follower(
    partition: &Partition,
    replica_id: i32,
    fetch_offset: i64,
) -> Option<IsrChange> {
    match partition
        .read_for_follower(&fetch_at(replica_id, fetch_offset))
        .expect("fetch")
    {
        FollowerRead::Records {
            proposed_isr_change,
            ..
        } => proposed_isr_change,
        other => panic!("fetch at {fetch_offset} not served: {other:?}"),
    }
}

/// The follower's and the leader's batches, byte for byte, from the leader's log start.
pub fn assert_same_log(follower: &Log, leader: &Log) {
    assert_eq!(follower.log_end_offset(), leader.log_end_offset());
    let start = leader.log_start_offset();
    let read = |log: &Log| {
        log.read(start, 1024 * 1024, ReadBound::LogEnd)
            .expect("read")
            .bytes()
            .to_vec()
    };
    assert_eq!(read(follower), read(leader), "the batches differ");
    assert_eq!(
        follower.leader_epoch_entries(),
        leader.leader_epoch_entries(),
        "the epoch caches differ"
    );
}
