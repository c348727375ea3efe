//! Reads of a damaged log (issue 29, item 7): a sealed segment whose `.log` was cut short reads as
//! what it is, never as a log with nothing missing.
//!
//! - A cut inside a batch: a read that reaches the bytes after the segment's last whole batch
//!   fails with `Error::Corrupt` naming the file and the first byte of the cut batch. A
//!   read-only log (the tool's) returns every record before it first; a writable log refuses
//!   the segment at its first read (its open finds the damage).
//! - A cut at a batch boundary: in a log whose cleanup policy does not include compact, a read
//!   that moves from the short segment to the next one finds offsets missing between them:
//!   `Error::Corrupt` with `Corruption::MissingOffsets`, naming where the segment ends.
//! - Gaps that compaction leaves between segments are no corruption: the log knows its records
//!   were compacted from the `COMPACTED` flag of `partlog.checkpoint` (set by a compaction pass
//!   or a follower's roll past a gap), whatever its cleanup policy says now, and from the policy
//!   alone where there is no partlog checkpoint.

use std::path::{Path, PathBuf};

use partlog::unstable::OsStorage;
use partlog::unstable::checkpoint::CheckpointFile;
use partlog::{
    BatchBuilder, CleanupPolicy, Compression, Corruption, Error, Isolation, Log, LogConfig,
    NewRecord, ReadBound, ReadOptions, RecoveryMode, RepairPlan, repair_dir, verify_dir,
};

const T0: i64 = 1_700_000_000_000;
/// Records per appended batch.
const PER_BATCH: i64 = 3;

fn config() -> LogConfig {
    LogConfig::builder_for_tests()
        .segment_bytes(4096)
        .index_interval_bytes(512)
        .build()
        .unwrap()
}

/// The tool's open: read-only, following a live writer, stopping at corruption in its own view.
fn live_config() -> LogConfig {
    LogConfig::builder()
        .allow_live_writer(true)
        .recovery_mode(RecoveryMode::TruncateAtCorruption)
        .build()
        .unwrap()
}

fn value(offset: i64) -> String {
    format!("value {offset} {}", "x".repeat((offset % 17) as usize))
}

/// A cleanly closed, never-compacted log of `batches` batches of three records (record `o` has
/// timestamp `T0 + o` and the value [`value`]`(o)`) over several segments. Returns the sorted
/// `.log` files.
fn closed_log(dir: &Path, batches: i64) -> Vec<PathBuf> {
    let log = Log::open(dir, config()).unwrap();
    append_batches(&log, batches);
    log.close().unwrap();
    drop(log);
    segment_files(dir)
}

/// Appends `batches` batches of three records to `log`, which is empty (its start at 0).
fn append_batches(log: &Log, batches: i64) {
    for batch in 0..batches {
        let first = batch * PER_BATCH;
        let records: Vec<String> = (first..first + PER_BATCH).map(value).collect();
        let records: Vec<NewRecord> = records
            .iter()
            .zip(first..)
            .map(|(v, offset)| NewRecord::new(T0 + offset, Some(b"key"), Some(v.as_bytes())))
            .collect();
        log.append(&records).unwrap();
    }
}

fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    logs
}

fn base_of(segment: &Path) -> i64 {
    segment
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// The first byte of each batch of a `.log` file, read from the length fields.
fn batch_positions(log: &Path) -> Vec<u64> {
    let bytes = std::fs::read(log).unwrap();
    let mut positions = Vec::new();
    let mut at = 0usize;
    while at + 12 <= bytes.len() {
        positions.push(at as u64);
        let length = i32::from_be_bytes(bytes[at + 8..at + 12].try_into().unwrap());
        at += 12 + length as usize;
    }
    positions
}

fn cut(file: &Path, len: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(file)
        .unwrap()
        .set_len(len)
        .unwrap();
}

/// Every record `records(0)` returns until its first error, and that error.
fn read_all(log: &Log) -> (Vec<i64>, Option<Error>) {
    let mut offsets = Vec::new();
    let mut records = log.records(0, ReadBound::LogEnd);
    for record in records.by_ref() {
        match record {
            Ok(record) => {
                assert_eq!(
                    record.value.as_deref(),
                    Some(value(record.offset).as_bytes())
                );
                offsets.push(record.offset);
            }
            Err(error) => {
                assert!(
                    records.next().is_none(),
                    "the iterator goes on after {error}"
                );
                return (offsets, Some(error));
            }
        }
    }
    (offsets, None)
}

fn assert_corrupt_at(error: Option<Error>, file: &Path, at: u64, context: &str) -> Corruption {
    match error {
        Some(Error::Corrupt {
            file: named,
            position,
            what,
        }) => {
            assert_eq!(named, file, "{context}");
            assert_eq!(position, at, "{context}: {what}");
            what
        }
        other => panic!(
            "{context}: expected Error::Corrupt in {}, got {other:?}",
            file.display()
        ),
    }
}

/// Issue 29, item 7: `truncate -s` of a sealed `.log` inside a batch, in a cleanly closed,
/// never-compacted log. Before the fix, a read-only reader skipped from the cut to the next
/// segment's base without a word.
#[test]
fn item7_a_sealed_segment_cut_inside_a_batch_fails_the_read_that_reaches_the_cut() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path();
    let segments = closed_log(dir, 200);
    assert!(segments.len() >= 5, "{segments:?}");
    let damaged = &segments[2];
    let base = base_of(damaged);
    let positions = batch_positions(damaged);
    let kept_batches = positions.len() / 2;
    let cut_batch_at = positions[kept_batches];
    cut(damaged, cut_batch_at + 30);
    let last_before_cut = base + kept_batches as i64 * PER_BATCH;

    // The tool's reader: every record before the cut batch, then the error at its first byte.
    let log = Log::open_read_only(dir, live_config()).unwrap();
    let (offsets, error) = read_all(&log);
    assert_eq!(offsets, (0..last_before_cut).collect::<Vec<_>>());
    let what = assert_corrupt_at(error, damaged, cut_batch_at, "live reader");
    assert!(matches!(what, Corruption::Truncated { .. }), "{what}");
    // A read in the missing range, and a read_committed one, and a lookup by a timestamp
    // there, meet it too; a read past the damage, in the next segment, does not.
    let read = log.read(last_before_cut + 1, 1 << 20, ReadBound::LogEnd);
    assert_corrupt_at(read.err(), damaged, cut_batch_at, "read in the cut range");
    let committed = log.read_with(
        last_before_cut,
        1 << 20,
        ReadOptions::default().isolation(Isolation::ReadCommitted),
    );
    assert_corrupt_at(committed.err(), damaged, cut_batch_at, "read_committed");
    let lookup = log.offset_for_timestamp(T0 + last_before_cut + 1);
    assert_corrupt_at(lookup.err(), damaged, cut_batch_at, "offset_for_timestamp");
    let next_base = base_of(&segments[3]);
    let fetch = log.read(next_base, 1 << 20, ReadBound::LogEnd).unwrap();
    assert_eq!(
        fetch
            .batches()
            .next()
            .unwrap()
            .unwrap()
            .base_offset(&mut Vec::new())
            .unwrap(),
        next_base
    );
    drop(log);

    // A writable open after the clean close opens no sealed segment; the first read of the
    // damaged one refuses it, naming the same byte, and nothing after it is returned.
    let log = Log::open(dir, config()).unwrap();
    let (offsets, error) = read_all(&log);
    assert_eq!(offsets, (0..base).collect::<Vec<_>>());
    assert_corrupt_at(error, damaged, cut_batch_at, "writable log");
    drop(log);
    assert!(verify_dir(dir, &config()).unwrap().is_corrupt());
}

/// Issue 29, item 7: a sealed `.log` cut at a batch boundary leaves no torn batch, only a segment
/// that ends below the next one's base. In a log that is not compacted, the read that moves on
/// from it reports the missing offsets.
#[test]
fn item7_a_sealed_segment_cut_at_a_batch_boundary_reports_the_missing_offsets() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path();
    let segments = closed_log(dir, 200);
    let damaged = &segments[2];
    let base = base_of(damaged);
    let next_base = base_of(&segments[3]);
    let positions = batch_positions(damaged);
    let kept_batches = positions.len() / 2;
    let cut_at = positions[kept_batches];
    cut(damaged, cut_at);
    let ends_at = base + kept_batches as i64 * PER_BATCH;

    let expected = Corruption::MissingOffsets {
        from: ends_at,
        to: next_base,
    };
    for (open, context) in [
        (
            Log::open_read_only(dir, live_config()).unwrap(),
            "live reader",
        ),
        (Log::open(dir, config()).unwrap(), "writable log"),
    ] {
        let (offsets, error) = read_all(&open);
        assert_eq!(offsets, (0..ends_at).collect::<Vec<_>>(), "{context}");
        let what = assert_corrupt_at(error, damaged, cut_at, context);
        assert_eq!(what, expected, "{context}");
        let in_the_gap = open.read(ends_at + 1, 1 << 20, ReadBound::LogEnd);
        assert_corrupt_at(in_the_gap.err(), damaged, cut_at, context);
        // The segments on either side still read alone.
        assert!(
            !open
                .read(base, 1 << 20, ReadBound::LogEnd)
                .unwrap()
                .is_empty()
        );
        assert!(
            !open
                .read(next_base, 1 << 20, ReadBound::LogEnd)
                .unwrap()
                .is_empty()
        );
    }
}

/// The same cut, in a log whose cleanup policy includes compact: there a gap between segments
/// is what compaction leaves, and reads go on across it (only `verify` and recovery judge it).
#[test]
fn item7_gaps_between_the_segments_of_a_compacted_log_read_through() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path();
    let compacted = || {
        LogConfig::builder_for_tests()
            .segment_bytes(1024)
            .cleanup_policy(CleanupPolicy::COMPACT)
            .retention_check_interval_ms(-1)
            .build()
            .unwrap()
    };
    let log = Log::open(dir, compacted()).unwrap();
    append_keyed_records(&log);
    log.roll().unwrap();
    log.compact().unwrap();
    log.close().unwrap();
    drop(log);
    assert_gaps_between_segments(dir, &compacted());
    let log = Log::open(dir, compacted()).unwrap();
    assert_eq!(offsets_of(&log), COMPACTED_OFFSETS);
}

/// What compaction keeps of [`append_keyed_records`].
const COMPACTED_OFFSETS: [i64; 7] = [0, 2, 4, 6, 8, 10, 11];

/// 1 KiB segments, no maintenance thread, and the given cleanup policy.
fn small_segments(policy: CleanupPolicy) -> LogConfig {
    LogConfig::builder_for_tests()
        .segment_bytes(1024)
        .cleanup_policy(policy)
        .retention_check_interval_ms(-1)
        .build()
        .unwrap()
}

/// Two records a segment of 1 KiB: one of its own key, then one of a key every segment
/// repeats. Compaction keeps the first and removes the second (but the last): each sealed
/// segment then ends one offset below the next one's base.
fn append_keyed_records(log: &Log) {
    let big = "v".repeat(300);
    for i in 0..12i64 {
        let key = if i % 2 == 0 {
            format!("own {i}")
        } else {
            "repeated".to_owned()
        };
        log.append(&[NewRecord::new(
            T0 + i,
            Some(key.as_bytes()),
            Some(big.as_bytes()),
        )])
        .unwrap();
    }
}

/// Asserts that some segment of the log in `dir` ends below the next one's base.
fn assert_gaps_between_segments(dir: &Path, config: &LogConfig) {
    let ends: Vec<(i64, i64)> = verify_dir(dir, config)
        .unwrap()
        .segments
        .iter()
        .map(|s| (s.base_offset, s.next_offset))
        .collect();
    let gap = ends.windows(2).any(|pair| pair[0].1 < pair[1].0);
    assert!(gap, "no gap between segments to read across: {ends:?}");
}

/// Every record's offset from 0, failing on any error.
fn offsets_of(log: &Log) -> Vec<i64> {
    log.records(0, ReadBound::LogEnd)
        .map(|record| record.unwrap().offset)
        .collect()
}

/// Whether the newest record of the log's `partlog.checkpoint` carries the `COMPACTED` flag.
fn checkpoint_says_compacted(dir: &Path) -> bool {
    let storage: std::sync::Arc<dyn partlog::unstable::Storage> =
        std::sync::Arc::new(OsStorage::new());
    CheckpointFile::read(&storage, dir)
        .unwrap()
        .is_some_and(|record| record.compacted)
}

/// The log in `dir`, compacted and closed, opened with the delete policy: `verify` finds
/// nothing, every kind of open reads across its gaps, and a repair that rescans every segment
/// from byte 0 (recovery's judgment of each gap) cuts nothing.
fn assert_a_delete_policy_open_reads_and_verifies_across_the_gaps(dir: &Path) {
    let delete = small_segments(CleanupPolicy::DELETE);
    assert!(checkpoint_says_compacted(dir));
    assert_gaps_between_segments(dir, &delete);
    let report = verify_dir(dir, &delete).unwrap();
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    let reader = Log::open_read_only(dir, delete.clone()).unwrap();
    assert_eq!(offsets_of(&reader), COMPACTED_OFFSETS, "read-only");
    drop(reader);
    let live = Log::open_read_only(
        dir,
        LogConfig::builder()
            .cleanup_policy(CleanupPolicy::DELETE)
            .allow_live_writer(true)
            .build()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(offsets_of(&live), COMPACTED_OFFSETS, "live reader");
    drop(live);
    let log = Log::open(dir, delete.clone()).unwrap();
    assert_eq!(log.config().cleanup_policy, CleanupPolicy::DELETE);
    assert_eq!(offsets_of(&log), COMPACTED_OFFSETS, "writable");
    log.close().unwrap();
    drop(log);
    let mut rescan_all = RepairPlan::default();
    rescan_all.rescan_from = Some(0);
    let recovery = repair_dir(dir, &delete, &rescan_all).unwrap();
    assert_eq!(recovery.discarded, None);
    let log = Log::open(dir, delete).unwrap();
    assert_eq!(offsets_of(&log), COMPACTED_OFFSETS, "after a full rescan");
}

/// Issue 29, item 7, with the log's cleanup policy switched: a log compacted while its policy
/// was compact, then reopened with the delete policy (a topic switched from compact to delete).
/// Gaps used to be legal only under the compact policy, so every read across them failed with
/// `MissingOffsets`, `verify` reported corruption and a rescan refused to open. The pass set
/// the checkpoint's `COMPACTED` flag, which the log keeps whatever its policy.
#[test]
fn item7_a_compacted_log_switched_to_the_delete_policy_reads_and_verifies_across_its_gaps() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path();
    let log = Log::open(dir, small_segments(CleanupPolicy::COMPACT)).unwrap();
    append_keyed_records(&log);
    log.roll().unwrap();
    log.compact().unwrap();
    assert_eq!(offsets_of(&log), COMPACTED_OFFSETS);
    log.close().unwrap();
    drop(log);
    assert_a_delete_policy_open_reads_and_verifies_across_the_gaps(dir);
}

/// Issue 29, item 7: a log whose stored policy is delete, compacted by a pass run by hand (as
/// `partlog compact` runs one: the compact policy for that open only, nothing stored), then
/// reopened with its own policy. It used to read as damaged after the pass.
#[test]
fn item7_a_delete_policy_log_compacted_by_hand_reads_and_verifies_across_its_gaps() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path();
    let log = Log::open(dir, small_segments(CleanupPolicy::DELETE)).unwrap();
    append_keyed_records(&log);
    log.roll().unwrap();
    log.close().unwrap();
    drop(log);
    let by_hand = LogConfig::builder_for_tests()
        .segment_bytes(1024)
        .cleanup_policy(CleanupPolicy::COMPACT)
        .retention_check_interval_ms(-1)
        .store_settings(false)
        .build()
        .unwrap();
    let log = Log::open(dir, by_hand).unwrap();
    log.compact().unwrap();
    log.close().unwrap();
    drop(log);
    assert_a_delete_policy_open_reads_and_verifies_across_the_gaps(dir);
}

/// Issue 29, item 7: a reader that follows a live writer, with the delete policy, reads across
/// the gaps a compaction pass makes while it watches: each poll takes in the checkpoint's
/// `COMPACTED` flag before it lists the segments the pass swapped in. (The pass merges pairs
/// of segments, so that the reader's poll sees segments go.)
#[test]
fn item7_a_live_reader_with_the_delete_policy_reads_across_gaps_made_while_it_watches() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path();
    let log = Log::open(dir, small_segments(CleanupPolicy::DELETE)).unwrap();
    append_keyed_records(&log);
    log.roll().unwrap();
    log.close().unwrap();
    drop(log);
    let reader = Log::open_read_only(
        dir,
        LogConfig::builder()
            .cleanup_policy(CleanupPolicy::DELETE)
            .allow_live_writer(true)
            .build()
            .unwrap(),
    )
    .unwrap();
    assert!(!checkpoint_says_compacted(dir));
    let merging = LogConfig::builder_for_tests()
        .segment_bytes(1600)
        .cleanup_policy(CleanupPolicy::COMPACT)
        .retention_check_interval_ms(-1)
        .build()
        .unwrap();
    let writer = Log::open(dir, merging).unwrap();
    writer.compact().unwrap();
    assert_gaps_between_segments_of(&writer);
    assert!(reader.refresh().unwrap());
    assert_eq!(offsets_of(&reader), COMPACTED_OFFSETS);
}

/// Issue 29, item 7: a directory whose segments hold a cleaner's gaps but no partlog checkpoint
/// (a Kafka directory of a compacted topic, opened for the first time), opened once under the
/// compact policy and then under delete (the topic switched). The compact policy makes the
/// gaps legal at the first open, and that open's checkpoint records the `COMPACTED` flag, so
/// the later delete-policy opens read and verify across them instead of reporting corruption.
#[test]
fn item7_a_kafka_directory_opened_once_under_compact_keeps_its_gaps_legal_under_delete() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path();
    let log = Log::open(dir, small_segments(CleanupPolicy::COMPACT)).unwrap();
    append_keyed_records(&log);
    log.roll().unwrap();
    log.compact().unwrap();
    log.close().unwrap();
    drop(log);
    // What Kafka's cleaner leaves: the gaps, and no partlog checkpoint.
    std::fs::remove_file(dir.join(partlog::unstable::checkpoint::CHECKPOINT_FILE_NAME)).unwrap();
    assert!(!checkpoint_says_compacted(dir));
    let compact = small_segments(CleanupPolicy::COMPACT);
    let log = Log::open(dir, compact).unwrap();
    assert_eq!(offsets_of(&log), COMPACTED_OFFSETS, "under compact");
    log.close().unwrap();
    drop(log);
    assert_a_delete_policy_open_reads_and_verifies_across_the_gaps(dir);
}

/// [`assert_gaps_between_segments`] for a log that is open: from its segment files.
fn assert_gaps_between_segments_of(log: &Log) {
    let bases: Vec<i64> = segment_files(log.dir())
        .iter()
        .map(|s| base_of(s))
        .collect();
    let gap = bases.windows(2).any(|pair| {
        let kept = COMPACTED_OFFSETS
            .iter()
            .filter(|&&o| o >= pair[0] && o < pair[1]);
        kept.max().is_some_and(|&last| last + 1 < pair[1])
    });
    assert!(gap, "no gap between the segments {bases:?}");
}

/// Issue 29, item 7: the `COMPACTED` flag goes with the records that were compacted. A
/// delete-policy follower that rolled past a leader's gap of more than `i32::MAX` offsets (which
/// sets it), then restarted empty with `truncate_fully_and_start_at`, holds no gap any more: a
/// sealed segment later cut at a batch boundary reports its missing offsets again.
#[test]
fn item7_after_a_full_truncation_a_never_compacted_log_reports_missing_offsets_again() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path();
    let log = Log::open(dir, config()).unwrap();
    let leader_batch = |base: i64| {
        let mut builder = BatchBuilder::new(Compression::None)
            .base_offset(base)
            .partition_leader_epoch(1);
        builder.push(&NewRecord::new(T0, None, Some(b"leader")));
        builder.build().unwrap()
    };
    log.append_as_follower(&leader_batch(0)).unwrap();
    log.append_as_follower(&leader_batch(2 + i64::from(i32::MAX)))
        .unwrap();
    assert!(checkpoint_says_compacted(dir));
    log.truncate_fully_and_start_at(0).unwrap();
    assert!(!checkpoint_says_compacted(dir));
    append_batches(&log, 200);
    log.close().unwrap();
    drop(log);
    assert!(!checkpoint_says_compacted(dir));

    let segments = segment_files(dir);
    let damaged = &segments[2];
    let positions = batch_positions(damaged);
    let cut_at = positions[positions.len() / 2];
    cut(damaged, cut_at);
    let ends_at = base_of(damaged) + (positions.len() / 2) as i64 * PER_BATCH;
    let log = Log::open(dir, config()).unwrap();
    let (offsets, error) = read_all(&log);
    assert_eq!(offsets, (0..ends_at).collect::<Vec<_>>());
    let what = assert_corrupt_at(error, damaged, cut_at, "after a full truncation");
    assert_eq!(
        what,
        Corruption::MissingOffsets {
            from: ends_at,
            to: base_of(&segments[3])
        }
    );
}

/// A writer with `preallocate` creates the next segment before its seal trims the old one's
/// `.log`: a live reader that opens the old segment in between finds zeros after its last batch,
/// and takes them for that. Zeros where batches were are then caught by the offsets they leave
/// missing.
#[test]
fn a_live_reader_takes_a_zero_filled_tail_of_a_sealed_segment_for_an_untrimmed_one() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path();
    let segments = closed_log(dir, 60);
    let sealed = &segments[1];
    let len = std::fs::metadata(sealed).unwrap().len();
    cut(sealed, len + 4096);
    let log = Log::open_read_only(dir, live_config()).unwrap();
    let (offsets, error) = read_all(&log);
    assert!(error.is_none(), "{error:?}");
    assert_eq!(offsets, (0..60 * PER_BATCH).collect::<Vec<_>>());
    drop(log);

    // The segment's last batch zeroed, as a lost write leaves it.
    cut(sealed, len);
    let last_batch_at = *batch_positions(sealed).last().unwrap();
    let mut bytes = std::fs::read(sealed).unwrap();
    bytes[last_batch_at as usize..].fill(0);
    std::fs::write(sealed, &bytes).unwrap();
    let next_base = base_of(&segments[2]);
    let log = Log::open_read_only(dir, live_config()).unwrap();
    let (offsets, error) = read_all(&log);
    assert_eq!(offsets, (0..next_base - PER_BATCH).collect::<Vec<_>>());
    let what = assert_corrupt_at(error, sealed, last_batch_at, "a zeroed last batch");
    assert_eq!(
        what,
        Corruption::MissingOffsets {
            from: next_base - PER_BATCH,
            to: next_base
        }
    );
}

/// The magic byte of a batch: a flip makes the batch unreadable (no v2 header) until it is
/// restored.
const MAGIC_AT: u64 = 16;

/// Flips every bit of the byte at `at` of `file` (the flip undoes itself).
fn flip_byte(file: &Path, at: u64) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(file)
        .unwrap();
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, at).unwrap();
    file.write_all_at(&[!byte[0]], at).unwrap();
}

/// Asserts that every offset in `offsets` reads back as the record written there.
fn assert_reads_back(log: &Log, offsets: std::ops::Range<i64>, context: &str) {
    for offset in offsets {
        let record = log
            .read_record(offset, ReadOptions::default())
            .unwrap_or_else(|error| panic!("{context}: the read of {offset} failed: {error}"))
            .unwrap_or_else(|| panic!("{context}: offset {offset} is missing"));
        assert_eq!(record.offset, offset, "{context}");
        assert_eq!(
            record.value.as_deref(),
            Some(value(offset).as_bytes()),
            "{context}: a wrong record at {offset}"
        );
    }
}

/// The repro of the rebuild-loss bug: four batches of three records with an index entry for
/// every batch, synced; the magic byte of batch 1 flipped outside partlog (in the active
/// segment, or in a sealed one when `sealed`), every offset read, the byte restored, one record
/// appended. A read's index rebuild met the damage and published the segment cut back to the
/// end of batch 0 while the log end stayed 12: the next append overwrote batches 2 and 3 (never
/// damaged, acknowledged), lost at the reopen. The rebuild a read falls back on must report
/// the damage and leave the segment's end, and what the writer owns, as they were.
fn a_read_rebuild_over_damage_keeps_the_segment_end(mapped: bool, sealed: bool) {
    let dir = tempfile::tempdir().unwrap();
    let config = || {
        LogConfig::builder_for_tests()
            .segment_bytes(4096)
            .index_interval_bytes(1)
            .map_active_segment(mapped)
            .build()
            .unwrap()
    };
    let context = format!("mapped {mapped}, sealed {sealed}");
    let log = Log::open(dir.path(), config()).unwrap();
    append_batches(&log, 4);
    if sealed {
        log.roll().unwrap();
    }
    log.sync().unwrap();
    let damaged = segment_files(dir.path()).remove(0);
    let positions = batch_positions(&damaged);
    assert_eq!(positions.len(), 4, "{context}");
    let magic = positions[1] + MAGIC_AT;
    flip_byte(&damaged, magic);

    let mut corrupt = Vec::new();
    for offset in 0..4 * PER_BATCH {
        match log.read_record(offset, ReadOptions::default()) {
            Ok(record) => {
                let record = record.unwrap_or_else(|| panic!("{context}: {offset} is missing"));
                assert_eq!(record.value.as_deref(), Some(value(offset).as_bytes()));
            }
            Err(error) => {
                let what = format!("{context}: the read of {offset}");
                let message = error.to_string();
                assert_corrupt_at(Some(error), &damaged, positions[1], &what);
                assert!(
                    message.contains("partlog verify"),
                    "{what}: the error says what to do: {message}"
                );
                corrupt.push(offset);
            }
        }
    }
    for offset in PER_BATCH..2 * PER_BATCH {
        assert!(
            corrupt.contains(&offset),
            "{context}: offset {offset} in the damaged batch read without an error"
        );
    }
    assert_eq!(log.log_end_offset(), 4 * PER_BATCH, "{context}");

    flip_byte(&damaged, magic);
    let end = 4 * PER_BATCH;
    let appended = log
        .append(&[NewRecord::new(
            T0 + end,
            Some(b"key"),
            Some(value(end).as_bytes()),
        )])
        .unwrap();
    assert_eq!(appended.first_offset, end, "{context}");
    assert_reads_back(&log, 0..end + 1, &format!("{context}, before the reopen"));
    log.sync().unwrap();
    log.close().unwrap();
    drop(log);

    let log = Log::open(dir.path(), config()).unwrap();
    assert_eq!(log.log_end_offset(), end + 1, "{context}, after the reopen");
    assert_reads_back(&log, 0..end + 1, &format!("{context}, after the reopen"));
    let (offsets, error) = read_all(&log);
    assert_eq!(
        offsets,
        (0..end + 1).collect::<Vec<_>>(),
        "{context}: {error:?}"
    );
    assert!(error.is_none(), "{context}: {error:?}");
    log.close().unwrap();
}

#[test]
fn rebuild_loss_a_read_rebuild_over_damage_in_the_active_segment_keeps_its_end() {
    a_read_rebuild_over_damage_keeps_the_segment_end(false, false);
}

#[test]
fn rebuild_loss_a_read_rebuild_over_damage_in_a_sealed_segment_keeps_its_end() {
    a_read_rebuild_over_damage_keeps_the_segment_end(false, true);
}

#[test]
fn rebuild_loss_a_read_rebuild_over_damage_in_the_mapped_active_segment_keeps_its_end() {
    a_read_rebuild_over_damage_keeps_the_segment_end(true, false);
}

/// Overwrites `bytes` at `at` of `file`.
fn write_at(file: &Path, at: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    std::fs::OpenOptions::new()
        .write(true)
        .open(file)
        .unwrap()
        .write_all_at(bytes, at)
        .unwrap();
}

/// The last `size` bytes of `file`: its last index entry.
fn last_entry(file: &Path, size: usize) -> Vec<u8> {
    let bytes = std::fs::read(file).unwrap();
    assert!(bytes.len() >= size, "{} has no entry", file.display());
    bytes[bytes.len() - size..].to_vec()
}

/// The follow-up of the rebuild-loss fix: a sealed segment whose offset index fails its check
/// at the lazy open of a reopened log (its last entry points past the `.log`), and whose `.log`
/// has a damaged batch too. The open's rescan rebuilt both indexes up to the damage and renamed
/// them into place, then failed with `Corrupt`: once the damage went away (a transient read
/// error, a restored file), those indexes passed the next open's checks, the time index without
/// its final entry (the segment's largest timestamp) and the offset index without its tail. A
/// rescan over damage must leave a sealed segment's indexes as they were, and report the damage.
#[test]
fn reopen_rescan_over_damage_leaves_a_sealed_segments_indexes_as_they_were() {
    use partlog::unstable::ManualClock;
    use std::sync::Arc;

    const RETENTION_MS: i64 = 24 * 60 * 60 * 1000;
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let config = |retention_ms: i64| {
        LogConfig::builder_for_tests()
            .segment_bytes(4096)
            .index_interval_bytes(1)
            .retention_ms(retention_ms)
            .retention_bytes(-1)
            .message_timestamp_after_max_ms(i64::MAX)
            .recovery_mode(RecoveryMode::Fail)
            .clock(Arc::clone(&clock) as Arc<dyn partlog::unstable::Clock>)
            .build()
            .unwrap()
    };
    let log = Log::open(dir.path(), config(-1)).unwrap();
    append_batches(&log, 60);
    let end = log.log_end_offset();
    log.close().unwrap();
    drop(log);
    let logs = segment_files(dir.path());
    assert!(logs.len() >= 3, "the log needs sealed segments: {logs:?}");
    let damaged = logs[0].clone();
    let next_base = base_of(&logs[1]);
    let offset_index = damaged.with_extension("index");
    let time_index = damaged.with_extension("timeindex");
    let original_offset_entry = last_entry(&offset_index, 8);
    let original_time_entry = last_entry(&time_index, 12);
    // Its largest timestamp: that of its last record.
    assert_eq!(
        original_time_entry,
        [
            &(T0 + next_base - 1).to_be_bytes()[..],
            &((next_base - 1) as i32).to_be_bytes()[..]
        ]
        .concat(),
    );

    // The index's last entry points past the `.log`, and batch 5 of the `.log` is unreadable.
    let index_len = std::fs::metadata(&offset_index).unwrap().len();
    write_at(&offset_index, index_len - 4, &i32::MAX.to_be_bytes());
    let positions = batch_positions(&damaged);
    let magic = positions[5] + MAGIC_AT;
    flip_byte(&damaged, magic);
    let damaged_index = std::fs::read(&offset_index).unwrap();
    let time_index_bytes = std::fs::read(&time_index).unwrap();

    // A clean shutdown: the reopen opens segment 0 when a read reaches it.
    let log = Log::open(dir.path(), config(-1)).unwrap();
    let (offsets, error) = read_all(&log);
    assert!(offsets.is_empty(), "{offsets:?}");
    let message = error.as_ref().map(|error| error.to_string());
    assert_corrupt_at(error, &damaged, positions[5], "the lazy open over damage");
    assert!(
        message.is_some_and(|message| message.contains("partlog verify")),
        "the error says what to do"
    );
    // The rescan gave the indexes back as they were, and left no file of its own.
    assert_eq!(std::fs::read(&offset_index).unwrap(), damaged_index);
    assert_eq!(std::fs::read(&time_index).unwrap(), time_index_bytes);
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".deleted"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    log.close().unwrap();
    drop(log);

    // The damage goes away. Every record reads back, and the next lazy open rebuilds the
    // indexes whole: the time index ends with the segment's largest timestamp again.
    flip_byte(&damaged, magic);
    clock.set(T0 + next_base - 1 + RETENTION_MS);
    let log = Log::open(dir.path(), config(RETENTION_MS)).unwrap();
    let (offsets, error) = read_all(&log);
    assert!(error.is_none(), "{error:?}");
    assert_eq!(offsets, (0..end).collect::<Vec<_>>());
    assert_eq!(last_entry(&time_index, 12), original_time_entry);
    assert_eq!(last_entry(&offset_index, 8), original_offset_entry);
    // Exactly `retention.ms` old at its largest timestamp: segment 0 stays (an expiry by any
    // earlier timestamp would delete it).
    let report = log.enforce_retention().unwrap();
    assert_eq!(report.segments_deleted(), 0);
    assert_eq!(log.log_start_offset(), 0);
    clock.set(T0 + next_base + RETENTION_MS);
    assert_eq!(log.enforce_retention().unwrap().segments_deleted(), 1);
    assert_eq!(log.log_start_offset(), next_base);
    log.close().unwrap();
}

/// As [`reopen_rescan_over_damage_leaves_a_sealed_segments_indexes_as_they_were`], with the
/// sealed segment's `.timeindex` missing instead of a bad offset-index entry: the log's open
/// creates it to rebuild it, meets the damage, and must not leave the new, empty file behind (it
/// would pass the next open's check once the damage is gone, and never be rebuilt).
#[test]
fn reopen_rescan_over_damage_leaves_a_missing_index_missing() {
    let dir = tempfile::tempdir().unwrap();
    let config = || {
        LogConfig::builder_for_tests()
            .segment_bytes(4096)
            .index_interval_bytes(1)
            .build()
            .unwrap()
    };
    let log = Log::open(dir.path(), config()).unwrap();
    append_batches(&log, 60);
    let end = log.log_end_offset();
    log.close().unwrap();
    drop(log);
    let logs = segment_files(dir.path());
    assert!(logs.len() >= 3, "the log needs sealed segments: {logs:?}");
    let damaged = logs[0].clone();
    let time_index = damaged.with_extension("timeindex");
    let original_time_entry = last_entry(&time_index, 12);
    std::fs::remove_file(&time_index).unwrap();
    let positions = batch_positions(&damaged);
    let magic = positions[5] + MAGIC_AT;
    flip_byte(&damaged, magic);

    // A writable open rebuilds a missing index at once, opening its segment.
    let error = Log::open(dir.path(), config()).err();
    assert_corrupt_at(error, &damaged, positions[5], "the open over damage");
    assert!(!time_index.exists(), "the open left an empty time index");

    flip_byte(&damaged, magic);
    let log = Log::open(dir.path(), config()).unwrap();
    let (offsets, error) = read_all(&log);
    assert!(error.is_none(), "{error:?}");
    assert_eq!(offsets, (0..end).collect::<Vec<_>>());
    assert_eq!(last_entry(&time_index, 12), original_time_entry);
    log.close().unwrap();
}
