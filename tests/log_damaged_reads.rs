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
//! - Gaps that compaction leaves between segments are no corruption.

use std::path::{Path, PathBuf};

use partlog::{
    CleanupPolicy, Corruption, Error, Isolation, Log, LogConfig, NewRecord, ReadBound, ReadOptions,
    RecoveryMode, verify_dir,
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
    log.close().unwrap();
    drop(log);
    segment_files(dir)
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
    // Two records a segment: one of its own key, then one of a key every segment repeats.
    // Compaction keeps the first and removes the second (but the last): each sealed segment
    // then ends one offset below the next one's base.
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
    log.roll().unwrap();
    log.compact().unwrap();
    log.close().unwrap();
    drop(log);
    let ends: Vec<(i64, i64)> = verify_dir(dir, &compacted())
        .unwrap()
        .segments
        .iter()
        .map(|s| (s.base_offset, s.next_offset))
        .collect();
    let gap = ends.windows(2).any(|pair| pair[0].1 < pair[1].0);
    assert!(gap, "no gap between segments to read across: {ends:?}");
    let log = Log::open(dir, compacted()).unwrap();
    let offsets: Vec<i64> = log
        .records(0, ReadBound::LogEnd)
        .map(|record| record.unwrap().offset)
        .collect();
    assert_eq!(offsets, [0, 2, 4, 6, 8, 10, 11]);
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
