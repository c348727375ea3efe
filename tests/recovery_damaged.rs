//! Opening, verifying and repairing damaged directories (issue 29, items 8 to 12 and 16;
//! ARCHITECTURE.md §7): nothing is lost without a word, and every derived file that a crash or a
//! user lost is rebuilt from the log.
//!
//! - a log without a valid checkpoint has no known durable point, so recovery cuts only the
//!   torn tail of its last segment and refuses, saying what would go, to cut anything more;
//! - every open that discards data says so in its report and in the `Recovery` event;
//! - a batch whose CRC is right is never taken for a torn write;
//! - a lost `.index` or `.txnindex` is rebuilt by a writable open, and a repair rebuilds what
//!   `verify` finds wrong in the derived files without touching a `.log` byte;
//! - a read-only open of a directory that needs recovery knows the aborted transactions a lost
//!   `.txnindex` held, and `upgrade_dir` writes them out before it marks the copy clean.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use partlog::unstable::format::set_base_offset;
use partlog::{
    BatchBuilder, Compression, ControlRecordType, DiscardReason, Discarded, Error, Log, LogConfig,
    LogEvent, NewRecord, Observer, ReadBound, RecoveryMode, Severity, UpgradeOptions, repair_dir,
    upgrade_dir, verify_dir,
};

/// Now, on the wall clock the logs run on (producers idle for `producer.id.expiration.ms` are
/// dropped at load, measured from their batches' timestamps).
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn small_segments() -> LogConfig {
    LogConfig::builder_for_tests()
        .segment_bytes(2048)
        .build()
        .unwrap()
}

fn truncating(mut config: LogConfig) -> LogConfig {
    config.recovery_mode = RecoveryMode::TruncateAtCorruption;
    config
}

/// A batch of `count` records from producer `pid` (epoch 0) from sequence `base_seq`, or of
/// plain records with `pid` < 0.
fn batch(pid: i64, base_seq: i32, count: usize, transactional: bool) -> Vec<u8> {
    let mut builder = BatchBuilder::new(Compression::None);
    if pid >= 0 {
        builder = builder
            .producer(pid, 0, base_seq)
            .transactional(transactional);
    }
    for i in 0..count {
        let value = format!("p{pid}s{}", base_seq + i as i32);
        builder.push(&NewRecord::new(
            now_ms(),
            Some(b"k"),
            Some(value.as_bytes()),
        ));
    }
    builder.build().unwrap()
}

fn files_with_suffix(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    files.sort();
    files
}

/// The byte positions of the batches of a `.log` file, read from their length fields.
fn batch_positions(log: &Path) -> Vec<usize> {
    let bytes = std::fs::read(log).unwrap();
    let mut positions = Vec::new();
    let mut at = 0usize;
    while at + 12 <= bytes.len() {
        positions.push(at);
        let length = i32::from_be_bytes(bytes[at + 8..at + 12].try_into().unwrap());
        at += 12 + length as usize;
    }
    positions
}

/// Every file of `dir` with its bytes, by name.
fn contents(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().into_string().unwrap(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

/// A cleanly closed log of 600 plain records in batches of 10 over several small segments.
/// Returns its `.log` files.
fn write_plain_log(dir: &Path) -> Vec<PathBuf> {
    let log = Log::open(dir, small_segments()).unwrap();
    for round in 0..60 {
        log.append_batch(&batch(-1, round * 10, 10, false)).unwrap();
    }
    log.close().unwrap();
    let logs = files_with_suffix(dir, ".log");
    assert!(logs.len() >= 5, "{logs:?}");
    logs
}

/// Flips a bit of the CRC of the fourth batch of `log`.
fn flip_crc(log: &Path) -> u64 {
    let at = batch_positions(log)[3];
    let mut bytes = std::fs::read(log).unwrap();
    bytes[at + 17] ^= 0x40;
    std::fs::write(log, &bytes).unwrap();
    at as u64
}

/// Collects what the `Recovery` events said was discarded.
#[derive(Default)]
struct Discards(Mutex<Vec<Option<Discarded>>>);

impl Observer for Discards {
    fn on_event(&self, event: &LogEvent<'_>) {
        if let LogEvent::Recovery { report } = event {
            self.0.lock().unwrap().push(report.discarded.clone());
        }
    }
}

/// Item 9: without partlog's checkpoint the durable point is unknown, so a flipped CRC in a
/// sealed segment is not a torn tail. The writable open refuses, naming the records and files
/// that would go and changing nothing; `TruncateAtCorruption` accepts it, and the report and
/// the `Recovery` event say what went.
#[test]
fn item9_without_a_checkpoint_an_open_refuses_to_discard_more_than_a_torn_tail() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path();
    let logs = write_plain_log(dir);
    let damaged = &logs[1];
    let position = flip_crc(damaged);
    std::fs::remove_file(dir.join("partlog.checkpoint")).unwrap();
    let before = contents(dir);
    let damaged_base: i64 = damaged
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let cut_offset = damaged_base + 30;

    let error = Log::open(dir, small_segments()).expect_err("the open must refuse");
    let message = error.to_string();
    assert!(
        message.contains(&format!("{} at byte {position}", damaged.display()))
            && message.contains(&format!("{} records", 600 - cut_offset))
            && message.contains(&format!("offsets [{cut_offset}, 600)"))
            && message.contains("RecoveryMode::TruncateAtCorruption"),
        "{message}"
    );
    match error {
        Error::DamagedWithoutCheckpoint {
            file, discarded, ..
        } => {
            assert_eq!(file, *damaged);
            assert_eq!(discarded.records, (600 - cut_offset) as u64);
            assert_eq!(discarded.deleted_segments, logs[2..].to_vec());
        }
        other => panic!("{other:?}"),
    }
    // Nothing a reader needs changed: every .log and index file is as it was.
    let after = contents(dir);
    assert_eq!(
        after
            .iter()
            .filter(|(name, _)| name.ends_with(".log"))
            .collect::<Vec<_>>(),
        before
            .iter()
            .filter(|(name, _)| name.ends_with(".log"))
            .collect::<Vec<_>>()
    );

    // verify grades it as corruption, and plans the same cut.
    let report = verify_dir(dir, &small_segments()).unwrap();
    assert!(report.is_corrupt(), "{:#?}", report.findings);
    let planned = report.repair.cut.clone().unwrap();
    assert_eq!(planned.records, (600 - cut_offset) as u64);

    let discards = Arc::new(Discards::default());
    let mut config = truncating(small_segments());
    config.observer = Some(discards.clone());
    let log = Log::open(dir, config).unwrap();
    assert_eq!(log.log_end_offset(), cut_offset);
    let discarded = log.recovery_report().discarded.clone().unwrap();
    assert_eq!(discarded, planned);
    assert_eq!(discarded.reason, DiscardReason::Corruption);
    assert_eq!(discarded.position, position);
    assert_eq!(
        discards.0.lock().unwrap().as_slice(),
        &[Some(discarded.clone())]
    );
}

/// Item 9: what a crash leaves is still cut without a refusal, and reported: a torn tail of
/// the last segment without a checkpoint (a Kafka directory a broker crashed on), and a torn
/// tail with one.
#[test]
fn item9_a_torn_tail_is_still_cut_and_every_discard_is_reported() {
    for remove_checkpoint in [false, true] {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path();
        let logs = write_plain_log(dir);
        let last = logs.last().unwrap();
        let mut bytes = std::fs::read(last).unwrap();
        let clean_len = bytes.len() as u64;
        // Half a batch header: a write a crash cut short.
        bytes.extend_from_slice(&[0, 0, 0, 0, 0, 0, 2, 88, 0, 0, 0, 90, 0, 0]);
        std::fs::write(last, &bytes).unwrap();
        if remove_checkpoint {
            std::fs::remove_file(dir.join("partlog.checkpoint")).unwrap();
        }
        let discards = Arc::new(Discards::default());
        let mut config = small_segments();
        config.observer = Some(discards.clone());
        let log = Log::open(dir, config).unwrap();
        assert_eq!(log.log_end_offset(), 600);
        let discarded = log.recovery_report().discarded.clone().unwrap();
        assert_eq!(discarded.reason, DiscardReason::TornTail);
        assert_eq!(
            (&discarded.file, discarded.position, discarded.bytes),
            (last, clean_len, 14)
        );
        assert_eq!(discarded.records, 0);
        assert!(discarded.deleted_segments.is_empty());
        assert_eq!(
            discards.0.lock().unwrap().as_slice(),
            &[Some(discarded)],
            "checkpoint removed: {remove_checkpoint}"
        );
        log.close().unwrap();
    }
}

/// Item 12: a batch whose last offset is `i64::MAX`, with a right CRC, in a directory without a
/// checkpoint, is no torn tail: the open fails, naming the file and the byte, and leaves its
/// three records in place.
#[test]
fn item12_a_crc_valid_batch_ending_at_i64_max_is_not_truncated_as_a_torn_tail() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path();
    // The highest base a segment can have; the batch's three records end at i64::MAX.
    let base = i64::MAX - i64::from(i32::MAX);
    let mut bytes = batch(-1, 0, 3, false);
    set_base_offset(&mut bytes, i64::MAX - 2).unwrap();
    let path = dir.join(format!("{base:020}.log"));
    std::fs::write(&path, &bytes).unwrap();

    let error = Log::open(dir, LogConfig::default()).expect_err("the open must refuse");
    let message = error.to_string();
    assert!(
        message.contains(&format!("{} at byte 0", path.display())) && message.contains("i64::MAX"),
        "{message}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    let report = verify_dir(dir, &LogConfig::default()).unwrap();
    assert!(report.is_corrupt(), "{:#?}", report.findings);
}

/// A cleanly closed log with transactions: pid 1's aborted transaction `[0, 2)` with its ABORT
/// at 2, plain records, then pid 2's aborted one and pid 1's committed one, over small
/// segments. Returns the `.txnindex` files' bytes, by path, and the COMMIT's offset.
fn write_aborts(dir: &Path, last_is_commit: bool) -> (Vec<(PathBuf, Vec<u8>)>, Option<i64>) {
    let log = Log::open(dir, small_segments()).unwrap();
    log.append_batch(&batch(1, 0, 2, true)).unwrap();
    log.append_marker(1, 0, ControlRecordType::Abort, 0)
        .unwrap();
    for round in 0..10 {
        log.append_batch(&batch(-1, round * 10, 10, false)).unwrap();
    }
    log.append_batch(&batch(2, 0, 1, true)).unwrap();
    log.append_marker(2, 0, ControlRecordType::Abort, 0)
        .unwrap();
    let commit = last_is_commit.then(|| {
        log.append_batch(&batch(1, 2, 1, true)).unwrap();
        log.append_marker(1, 0, ControlRecordType::Commit, 0)
            .unwrap()
            .first_offset
    });
    log.append_batch(&batch(-1, 100, 5, false)).unwrap();
    log.close().unwrap();
    let indexes = files_with_suffix(dir, ".txnindex")
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    (indexes, commit)
}

/// The offsets `committed_records` returns.
fn committed_offsets(log: &Log) -> Vec<i64> {
    log.committed_records(0, ReadBound::LogEnd)
        .map(|r| r.unwrap().offset)
        .collect()
}

/// Item 10: a writable open after a clean shutdown that finds the ABORT of a producer's last
/// transaction unlisted (its `.txnindex` was deleted) rebuilds the index from the log, so that
/// `read_committed` reads leave the aborted records out.
#[test]
fn item10_a_writable_open_rebuilds_a_lost_txnindex_of_a_last_transaction() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path();
    let (indexes, _) = write_aborts(dir, false);
    assert_eq!(indexes.len(), 2, "{indexes:?}");
    for (path, _) in &indexes {
        std::fs::remove_file(path).unwrap();
    }
    let log = Log::open(dir, small_segments()).unwrap();
    let committed = committed_offsets(&log);
    assert!(
        !committed.contains(&0) && !committed.contains(&1),
        "{committed:?}"
    );
    assert_eq!(log.recovery_report().rebuilt_txn_indexes_from, Some(0));
    log.close().unwrap();
    for (path, bytes) in &indexes {
        assert_eq!(&std::fs::read(path).unwrap(), bytes, "{}", path.display());
    }
}

/// Item 10: an abort that is not its producer's last transaction is what `verify` finds (every
/// ABORT marker needs its entry) and a repair rebuilds, without touching a `.log` byte. An
/// entry moved onto a COMMIT marker is repaired the same way.
#[test]
fn item10_verify_finds_an_unlisted_abort_and_a_repair_rebuilds_the_txnindex() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path();
    let (indexes, commit) = write_aborts(dir, true);
    let commit = commit.unwrap();
    let (first_index, first_bytes) = indexes[0].clone();
    std::fs::remove_file(&first_index).unwrap();
    let logs_before: Vec<_> = files_with_suffix(dir, ".log")
        .into_iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();

    let report = verify_dir(dir, &small_segments()).unwrap();
    let corrupt: Vec<_> = report.findings_of(Severity::Corruption).collect();
    assert_eq!(corrupt.len(), 1, "{:#?}", report.findings);
    assert_eq!(corrupt[0].file, first_index);
    assert!(
        corrupt[0].what.contains(
            "the ABORT marker of producer 1 at offset 2 (its transaction began at 0) has no entry"
        ),
        "{corrupt:?}"
    );
    assert_eq!(report.repair.rescan_from, Some(0));
    assert_eq!(report.repair.cut, None);

    repair_dir(dir, &small_segments(), &report.repair).unwrap();
    assert_eq!(std::fs::read(&first_index).unwrap(), first_bytes);
    let logs_after: Vec<_> = files_with_suffix(dir, ".log")
        .into_iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    assert_eq!(logs_after, logs_before);
    assert_eq!(verify_dir(dir, &small_segments()).unwrap().findings, []);

    // The entry's last offset moved onto pid 1's COMMIT marker: verify reports it, the repair
    // rebuilds the index from the log.
    let (last_index, last_bytes) = indexes.last().unwrap().clone();
    let mut bytes = last_bytes.clone();
    bytes[18..26].copy_from_slice(&commit.to_be_bytes());
    std::fs::write(&last_index, &bytes).unwrap();
    let report = verify_dir(dir, &small_segments()).unwrap();
    assert!(report.is_corrupt(), "{:#?}", report.findings);
    repair_dir(dir, &small_segments(), &report.repair).unwrap();
    assert_eq!(std::fs::read(&last_index).unwrap(), last_bytes);
    assert_eq!(verify_dir(dir, &small_segments()).unwrap().findings, []);
}

/// Item 11: a writable open rebuilds a sealed segment's missing `.index` and `.timeindex` from
/// its log, as Kafka's loader does, and says so.
#[test]
fn item11_a_writable_open_rebuilds_a_missing_index_of_a_sealed_segment() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path();
    write_plain_log(dir);
    let indexes = files_with_suffix(dir, ".index");
    let time_indexes = files_with_suffix(dir, ".timeindex");
    let (index, time_index) = (&indexes[1], &time_indexes[2]);
    let (index_bytes, time_bytes) = (
        std::fs::read(index).unwrap(),
        std::fs::read(time_index).unwrap(),
    );
    std::fs::remove_file(index).unwrap();
    std::fs::remove_file(time_index).unwrap();

    let log = Log::open(dir, small_segments()).unwrap();
    let mut rebuilt = log.recovery_report().rebuilt_indexes.clone();
    rebuilt.sort();
    assert_eq!(rebuilt, [index.clone(), time_index.clone()]);
    log.close().unwrap();
    drop(log);
    assert_eq!(std::fs::read(index).unwrap(), index_bytes);
    assert_eq!(std::fs::read(time_index).unwrap(), time_bytes);
    assert_eq!(
        verify_dir(dir, &small_segments()).unwrap().findings,
        [],
        "no index is missing any more"
    );
}

/// Copies the broker-written fixture partition (one aborted transaction, records 15 and 16)
/// into `root` without its `.txnindex`: what a power loss before the broker flushed the lazily
/// created index leaves, and no clean-shutdown record (a partition directory has none).
fn broker_copy_without_txn_index(root: &Path) -> (PathBuf, Vec<u8>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/broker/partlog-fixture-0");
    let dir = root.join("partlog-fixture-0");
    std::fs::create_dir(&dir).unwrap();
    let mut txn_index = Vec::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        if name.ends_with(".txnindex") {
            txn_index = std::fs::read(entry.path()).unwrap();
            continue;
        }
        std::fs::copy(entry.path(), dir.join(&name)).unwrap();
    }
    assert!(!txn_index.is_empty());
    (dir, txn_index)
}

fn no_expiration() -> LogConfig {
    LogConfig::builder()
        .producer_id_expiration_ms(i64::from(i32::MAX))
        .build()
        .unwrap()
}

/// Item 16: a read-only open of a directory that needs recovery replays the segments it scans,
/// so the aborted records 15 and 16 stay out of `read_committed` reads though the `.txnindex`
/// is gone.
#[test]
fn item16_a_read_only_open_that_recovers_knows_the_aborts_of_a_lost_txnindex() {
    let temp = tempfile::tempdir().unwrap();
    let (dir, _) = broker_copy_without_txn_index(temp.path());
    let log = Log::open_read_only(&dir, no_expiration()).unwrap();
    let committed = committed_offsets(&log);
    assert!(
        !committed.contains(&15) && !committed.contains(&16),
        "{committed:?}"
    );
    assert!(committed.contains(&13), "{committed:?}");
}

/// Item 16: `upgrade_dir` of that directory writes the `.txnindex` from the source's replay
/// before it marks the destination clean: the destination's index is the broker's, and a
/// writable open of it reads the transaction as aborted.
#[test]
fn item16_upgrade_dir_writes_a_lost_txnindex_before_it_marks_the_destination_clean() {
    let temp = tempfile::tempdir().unwrap();
    let (src, broker_index) = broker_copy_without_txn_index(temp.path());
    let dst = temp.path().join("upgraded");
    let mut options = UpgradeOptions::default();
    options.config = no_expiration();
    let report = upgrade_dir(&src, &dst, &options).unwrap();
    assert_eq!(report.rebuilt_files, ["00000000000000000000.txnindex"]);
    assert_eq!(
        std::fs::read(dst.join("00000000000000000000.txnindex")).unwrap(),
        broker_index
    );
    assert_eq!(verify_dir(&dst, &no_expiration()).unwrap().findings, []);
    let log = Log::open(&dst, no_expiration()).unwrap();
    assert!(log.recovery_report().clean_shutdown);
    let committed = committed_offsets(&log);
    assert!(
        !committed.contains(&15) && !committed.contains(&16),
        "{committed:?}"
    );
}
