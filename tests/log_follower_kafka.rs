//! The on-disk proof of follower appends (ARCHITECTURE.md §11): a leader `Log` that led two
//! epochs and a follower that fetched everything from it with [`Log::append_as_follower`].
//! - `cmp` finds each of the follower's `.log` files identical to the leader's of the same name,
//!   when it fetched one batch at a time (so that both rolled at the same batches), and a
//!   follower that fetched many batches per call holds the same bytes in the same order;
//! - Kafka 4.4's DumpLogSegments (`--deep-iteration`) reads the follower's segments cleanly and
//!   prints the leader's `partitionLeaderEpoch` for every batch, and its indexes pass Kafka's
//!   sanity check;
//! - the shared validators' `check.sh` (kafka-python and the kafka-protocol crate) accept them.
//!
//! Kafka's tools are skipped with a `skipping:` line where they are not installed (required
//! under `CI=true`).

#[path = "common/kafka.rs"]
mod kafka;
#[path = "common/validators.rs"]
mod validators;

use std::path::{Path, PathBuf};
use std::process::Command;

use partlog::{BatchBuilder, Compression, ControlRecordType, Log, LogConfig, NewRecord, ReadBound};

const T0: i64 = 1_700_000_000_000;

fn config() -> LogConfig {
    LogConfig::builder_for_tests()
        .segment_bytes(2048)
        .index_interval_bytes(128)
        .build()
        .unwrap()
}

fn record(i: i64) -> NewRecord {
    NewRecord::new(
        T0 + i,
        Some(format!("key-{}", i % 7).as_bytes()),
        Some(format!("value {i} {}", "x".repeat((i % 40) as usize)).as_bytes()),
    )
    .with_header("i", Some(&i.to_be_bytes()))
}

/// A leader that wrote epoch 5 then epoch 7: plain appends, a producer's zstd batch, and a
/// transaction with its COMMIT marker, across several segments. Returns `(base, epoch)` of every
/// batch.
fn write_leader(dir: &Path) -> Vec<(i64, i32)> {
    let leader = Log::open(dir, config()).unwrap();
    leader.become_leader(5).unwrap();
    let mut next = 0;
    for _ in 0..30 {
        let n = 1 + next % 3;
        let records: Vec<NewRecord> = (next..next + n).map(record).collect();
        next = leader.append(&records).unwrap().last_offset + 1;
    }
    leader.become_leader(7).unwrap();
    let mut produced = BatchBuilder::new(Compression::Zstd).producer(11, 0, 0);
    for i in next..next + 4 {
        produced.push(&record(i));
    }
    next = leader
        .append_batch(&produced.build().unwrap())
        .unwrap()
        .last_offset
        + 1;
    let mut txn = BatchBuilder::new(Compression::None)
        .producer(12, 0, 0)
        .transactional(true);
    txn.push(&record(next));
    leader.append_batch(&txn.build().unwrap()).unwrap();
    leader
        .append_marker(12, 0, ControlRecordType::Commit, 3)
        .unwrap();
    for _ in 0..20 {
        let records = [record(leader.log_end_offset())];
        leader.append(&records).unwrap();
    }
    let epochs = batch_epochs(&leader);
    assert!(leader.stats().segments >= 3, "{:?}", leader.stats());
    leader.close().unwrap();
    epochs
}

/// `(base offset, partitionLeaderEpoch)` of every batch of `log`, read one batch at a time.
fn batch_epochs(log: &Log) -> Vec<(i64, i32)> {
    let mut epochs = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let fetch = log.read(offset, 1, ReadBound::LogEnd).unwrap();
        for batch in fetch.batches() {
            let header = *batch.unwrap().header().unwrap();
            epochs.push((header.base_offset, header.partition_leader_epoch));
        }
        offset = fetch.next_offset();
    }
    epochs
}

/// Copies the leader's log into a new follower in `dir`, fetching up to `max_bytes` at a time.
fn follow(leader_dir: &Path, dir: &Path, max_bytes: usize) {
    let leader = Log::open_read_only(leader_dir, config()).unwrap();
    let follower = Log::open(dir, config()).unwrap();
    follower.become_follower().unwrap();
    while follower.log_end_offset() < leader.log_end_offset() {
        let fetch = leader
            .read(follower.log_end_offset(), max_bytes, ReadBound::LogEnd)
            .unwrap();
        follower.append_as_follower(fetch.bytes()).unwrap();
    }
    assert_eq!(
        follower.leader_epoch_entries(),
        leader.leader_epoch_entries()
    );
    follower.close().unwrap();
}

fn log_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "log"))
        .collect();
    files.sort();
    files
}

fn concatenated(files: &[PathBuf]) -> Vec<u8> {
    files
        .iter()
        .flat_map(|f| std::fs::read(f).unwrap())
        .collect()
}

#[test]
fn follower_log_files_are_byte_for_byte_the_leaders() {
    let leader = tempfile::tempdir().unwrap();
    write_leader(leader.path());
    let follower = tempfile::tempdir().unwrap();
    follow(leader.path(), follower.path(), 1);

    let leader_logs = log_files(leader.path());
    let follower_logs = log_files(follower.path());
    let names = |files: &[PathBuf]| -> Vec<String> {
        files
            .iter()
            .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    };
    assert_eq!(names(&follower_logs), names(&leader_logs));
    for (ours, theirs) in follower_logs.iter().zip(&leader_logs) {
        let status = Command::new("cmp").arg(ours).arg(theirs).status().unwrap();
        assert!(
            status.success(),
            "cmp {} {}",
            ours.display(),
            theirs.display()
        );
    }

    // Many batches per fetch: one write per call, rolls at other batches, the same bytes.
    let bulk = tempfile::tempdir().unwrap();
    follow(leader.path(), bulk.path(), 3000);
    assert_eq!(
        concatenated(&log_files(bulk.path())),
        concatenated(&leader_logs)
    );
}

#[test]
fn follower_segments_carry_the_leaders_epochs_for_kafkas_dump_and_the_validators() {
    let leader = tempfile::tempdir().unwrap();
    let leader_epochs = write_leader(leader.path());
    assert!(leader_epochs.iter().any(|&(_, e)| e == 5));
    assert!(leader_epochs.iter().any(|&(_, e)| e == 7));
    let follower = tempfile::tempdir().unwrap();
    follow(leader.path(), follower.path(), 3000);

    let Some(deep) = kafka::dump_deep(follower.path()) else {
        return;
    };
    kafka::assert_clean_deep_dump(&deep);
    let dumped: Vec<(i64, i32)> = kafka::parse_batches(&deep)
        .iter()
        .map(|batch| (batch.base_offset, batch.partition_leader_epoch))
        .collect();
    assert_eq!(dumped, leader_epochs);
    let Some(sanity) = kafka::index_sanity(follower.path()) else {
        return;
    };
    kafka::assert_index_sanity_passed(&sanity);
    validators::check(&log_files(follower.path()));
}
