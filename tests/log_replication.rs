//! The log-level replication hooks (ARCHITECTURE.md §11): the role and the epoch client
//! appends stamp, the leader-epoch cache hooked into appends, truncation, retention and open,
//! the high watermark, follower appends and `truncate_fully_and_start_at`.

use partlog::unstable::leader_epoch::LEADER_EPOCH_CHECKPOINT_FILE_NAME;
use partlog::{BatchBuilder, Compression, EpochEntry, Error, Log, LogConfig, NewRecord, ReadBound};

fn record(i: i64) -> NewRecord {
    NewRecord::new(
        1_700_000_000_000 + i,
        None,
        Some(format!("value-{i}").as_bytes()),
    )
}

fn entries(pairs: &[(i32, i64)]) -> Vec<EpochEntry> {
    pairs.iter().map(|&(e, s)| EpochEntry::new(e, s)).collect()
}

/// A leader's batch of `n` records at `base` stamped with `epoch`, as a fetch returns it.
fn leader_batch(base: i64, epoch: i32, n: i64) -> Vec<u8> {
    let mut builder = BatchBuilder::new(Compression::None)
        .base_offset(base)
        .partition_leader_epoch(epoch);
    for i in 0..n {
        builder.push(&record(base + i));
    }
    builder.build().unwrap()
}

#[test]
fn leader_epoch_client_appends_after_become_leader_stamp_the_epoch_and_assign_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    log.append(&[record(0)]).unwrap();
    assert_eq!(log.leader_epoch(), None);
    assert!(log.leader_epoch_entries().is_empty());
    log.become_leader(3).unwrap();
    assert_eq!(log.leader_epoch(), Some(3));
    log.append(&[record(1), record(2)]).unwrap();
    assert_eq!(log.leader_epoch_entries(), entries(&[(3, 1)]));
    assert_eq!(log.end_offset_for_epoch(3), (3, 3));
    let fetch = log.read(0, 1 << 20, ReadBound::LogEnd).unwrap();
    let epochs: Vec<i32> = fetch
        .batches()
        .map(|b| b.unwrap().header().unwrap().partition_leader_epoch)
        .collect();
    assert_eq!(epochs, vec![-1, 3]);
    let text = std::fs::read_to_string(dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE_NAME)).unwrap();
    assert_eq!(text, "0\n1\n3 1\n");
}

#[test]
fn follower_append_copies_batches_and_refuses_client_appends() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    log.become_follower().unwrap();
    assert!(matches!(
        log.append(&[record(0)]),
        Err(Error::NotLeaderOrFollower { .. })
    ));
    let mut bytes = leader_batch(0, 2, 3);
    bytes.extend(leader_batch(3, 5, 2));
    let info = log.append_as_follower(&bytes).unwrap();
    assert_eq!((info.first_offset, info.last_offset), (0, 4));
    assert_eq!(log.log_end_offset(), 5);
    assert_eq!(log.leader_epoch_entries(), entries(&[(2, 0), (5, 3)]));
    assert!(matches!(
        log.append_as_follower(&leader_batch(4, 5, 1)),
        Err(Error::UnexpectedAppendOffset {
            log_end_offset: 5,
            found: 4
        })
    ));
}

#[test]
fn high_watermark_follows_the_log_end_until_set_then_moves_forward_only() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    for i in 0..3 {
        log.append(&[record(i)]).unwrap();
    }
    assert_eq!(log.high_watermark(), 3);
    assert_eq!(log.set_high_watermark(1).unwrap(), 1);
    assert_eq!(log.set_high_watermark(0).unwrap(), 1);
    assert!(matches!(
        log.set_high_watermark(4),
        Err(Error::InvalidArgument { .. })
    ));
    assert_eq!(
        log.read(0, 1 << 20, ReadBound::HighWatermark)
            .unwrap()
            .next_offset(),
        1
    );
    log.truncate_to(0).unwrap();
    assert_eq!(log.high_watermark(), 0);
}

#[test]
fn follower_truncate_fully_and_start_at_restarts_the_log_empty() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = Log::open(dir.path(), LogConfig::default()).unwrap();
        log.become_leader(1).unwrap();
        log.append(&[record(0), record(1)]).unwrap();
        log.truncate_fully_and_start_at(10).unwrap();
        assert_eq!((log.log_start_offset(), log.log_end_offset()), (10, 10));
        assert!(log.leader_epoch_entries().is_empty());
        log.append(&[record(10)]).unwrap();
        log.close().unwrap();
    }
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (10, 11));
}
