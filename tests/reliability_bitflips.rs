//! Bit flips: every bit of a small, cleanly closed log's first segment (`.log`,
//! `.index`, `.timeindex`) and of `partlog.checkpoint`'s fields and CRCs, and one bit of every
//! other byte (the other segments' files, the checkpoint's zero padding), is flipped in turn;
//! the log is reopened under `RecoveryMode::Fail`, every offset is read, and
//! `offset_for_timestamp` is asked for every record's timestamp.
//!
//! Each flip must land in exactly one class (ARCHITECTURE.md §3, invariants 5 and 6; FORMAT.md §7):
//! - **repaired**: an index failed a check and was rebuilt; every answer is right afterwards;
//! - **reported**: `Error::Corrupt { file, position }` at open or at the first read touching the
//!   flipped batch, naming the flipped `.log` and a position at or before that batch (or the
//!   next one, for a damaged baseOffset or batchLength, whose own batch still frames); an index
//!   or checkpoint flip is never reported in a writable log: it is repaired or harmless;
//! - **no effect**: every read and every `offset_for_timestamp` answer is right;
//! - **unprotected**: the flip lies in a field FORMAT.md §7 leaves unprotected
//!   (partitionLeaderEpoch; baseOffset), and only that field's answers changed.
//!
//! `PARTLOG_FLIP=<file>:<byte>:<bit>` replays one flip; `PARTLOG_FLIP_VERBOSE=1` prints what
//! each renumbering flip returned.
//!
//! Nothing may return wrong data silently. The summary line printed at the end is quoted by the
//! README.
#![cfg(feature = "sim")] // the simulator and the manual clock: `cargo test --all-features`

#[path = "common/sim_files.rs"]
mod sim_files;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use partlog::unstable::{Clock, ManualClock, OpenMode, SimStorage, Storage};
use partlog::{
    BatchBuilder, Compression, CompressionType, Error, Log, LogConfig, LogRecord, NewRecord,
    ReadBound, ReadOptions, RecoveryMode, VerifiedBatchCache,
};

const DIR: &str = "/data/topic-0";
const T0: i64 = 1_700_000_000_000;
const SEGMENT_MS: i64 = 10_000;

fn config(sim: &SimStorage, clock: &Arc<ManualClock>) -> LogConfig {
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    LogConfig::builder_for_tests()
        .segment_bytes(1024)
        .segment_ms(SEGMENT_MS)
        .index_interval_bytes(48)
        .compression_type(CompressionType::Producer)
        .recovery_mode(RecoveryMode::Fail)
        .storage(storage)
        .clock(Arc::clone(clock) as _)
        .build()
        .unwrap()
}

/// The files of the pristine log, by name.
use sim_files::{Files, batch_spans};

/// Builds three time-rolled segments of small batches in none, lz4 and zstd, closes the log
/// cleanly and returns its files.
fn build_log() -> Files {
    let sim = SimStorage::new(7);
    let clock = Arc::new(ManualClock::new(T0));
    let log = Log::open(DIR, config(&sim, &clock)).unwrap();
    let codecs = [Compression::None, Compression::Lz4, Compression::Zstd];
    let mut n = 0u32;
    for segment in 0..3 {
        for batch in 0..4 {
            let codec = codecs[(segment + batch) % codecs.len()];
            let mut builder = BatchBuilder::new(codec);
            for _ in 0..(1 + n % 3) {
                let key = format!("k{}", n % 5);
                let value = format!("value-{n}");
                // Timestamps go back now and then, so the time index is not just the offsets.
                let timestamp = clock.now_ms() + i64::from(n % 4) * 3 - 4;
                let record =
                    NewRecord::new(timestamp, Some(key.as_bytes()), Some(value.as_bytes()));
                let record = if n % 4 == 1 {
                    record.with_header("h", Some(b"x"))
                } else {
                    record
                };
                builder.push(&record);
                n += 1;
            }
            log.append_batch(&builder.build().unwrap()).unwrap();
            clock.advance(10);
        }
        // The next append rolls: the active segment is older than segment.ms.
        clock.advance(SEGMENT_MS + 1);
    }
    log.close().unwrap();
    drop(log);
    let files = sim_files::snapshot(&sim, DIR);
    for (name, bytes) in &files {
        if name.ends_with(".log") {
            let whole = batch_spans(bytes).last().map_or(0, |&(_, end)| end);
            assert_eq!(whole, bytes.len(), "the pristine {name} is whole");
        }
    }
    files
}

/// Everything a reader can observe of the log.
#[derive(Debug, Clone, Default, PartialEq)]
struct Observed {
    /// `records(0)` in full.
    records: Vec<LogRecord>,
    /// For each expected offset, the bytes of the first batch `read(offset, 1)` returned.
    batches: Vec<Vec<u8>>,
    /// For each expected offset, what the point read `read_record(offset)` returned.
    points: Vec<Option<LogRecord>>,
    /// `offset_for_timestamp` for each probe.
    by_time: Vec<Option<(i64, i64)>>,
}

/// Runs every read, in order, into `seen`; stops at the first error and returns it, so that
/// what was returned before an error can still be checked.
fn observe(log: &Log, offsets: &[i64], probes: &[i64], seen: &mut Observed) -> Result<(), Error> {
    for record in log.records(0, ReadBound::LogEnd) {
        seen.records.push(record?);
    }
    for &offset in offsets {
        let fetch = log.read(offset, 1, ReadBound::LogEnd)?;
        let first = fetch.batches().next();
        let bytes = match first {
            Some(batch) => batch?.as_bytes().to_vec(),
            None => Vec::new(),
        };
        seen.batches.push(bytes);
    }
    for &offset in offsets {
        seen.points
            .push(log.read_record(offset, ReadOptions::default())?);
    }
    for &probe in probes {
        seen.by_time.push(log.offset_for_timestamp(probe)?);
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Class {
    Repaired,
    Reported,
    NoEffect,
    /// Only partitionLeaderEpoch changed in what reads return.
    UnprotectedEpoch,
    /// Records renumbered by a baseOffset that still keeps the order (FORMAT.md §7).
    UnprotectedBaseOffset,
}

struct Flip<'a> {
    file: &'a str,
    byte: usize,
    bit: u8,
    /// Reopen with `Log::open_read_only`, which may not rebuild an index.
    read_only: bool,
}

fn segment_base(name: &str) -> &str {
    name.split('.').next().unwrap()
}

/// Flips one bit, reopens and classifies; panics on a silent wrong answer.
fn classify(
    files: &Files,
    pristine: &Observed,
    offsets: &[i64],
    probes: &[i64],
    flip: &Flip<'_>,
) -> Class {
    let sim = SimStorage::new(1);
    let clock = Arc::new(ManualClock::new(T0 + 10 * SEGMENT_MS));
    sim.create_dir_all(Path::new(DIR)).unwrap();
    let mut flipped = Vec::new();
    for (name, bytes) in files {
        let mut bytes = bytes.clone();
        if name == flip.file {
            bytes[flip.byte] ^= 1 << flip.bit;
            flipped = bytes.clone();
        }
        let file = sim
            .open(&Path::new(DIR).join(name), OpenMode::CreateNew)
            .unwrap();
        file.write_all_at(&bytes, 0).unwrap();
        file.sync_all().unwrap();
    }
    sim.sync_dir(Path::new(DIR)).unwrap();
    let what = format!(
        "flip of bit {} of byte {} of {}",
        flip.bit, flip.byte, flip.file
    );

    // Where the flipped byte's batch starts (for a .log), or the byte itself (an index).
    let batch_start = if flip.file.ends_with(".log") {
        batch_spans(&files[flip.file])
            .into_iter()
            .find(|&(start, end)| (start..end).contains(&flip.byte))
            .map(|(start, _)| start)
            .unwrap()
    } else {
        flip.byte
    };
    let field_in_batch = flip.byte - batch_start;
    // A damaged baseOffset leaves its own batch consistent: the order check fails at the batch
    // after it, which the report may name. A damaged batchLength misframes the batch: the
    // report may name where the next frame was looked for.
    let next_batch = if flip.file.ends_with(".log") && field_in_batch < 12 {
        batch_spans(&files[flip.file])
            .into_iter()
            .find(|&(start, _)| start == batch_start)
            .map_or(batch_start, |(_, end)| end)
    } else {
        batch_start
    };
    let check_corrupt = |error: Error| -> Class {
        let error_text = error.to_string();
        match error {
            Error::Corrupt { file, position, .. } => {
                if flip.read_only && !flip.file.ends_with(".log") {
                    // A read-only log may not rebuild: it names the index (FORMAT.md §7).
                    assert_eq!(
                        file,
                        Path::new(DIR).join(flip.file),
                        "{what}: read-only, reported in another file ({error_text})"
                    );
                    return Class::Reported;
                }
                // Indexes are derived data and the checkpoint has two CRC'd slots: in a
                // writable log their damage is repaired or harmless, never an error.
                assert!(
                    flip.file.ends_with(".log"),
                    "{what}: reported ({error_text}) instead of repaired"
                );
                assert_eq!(
                    file,
                    Path::new(DIR).join(flip.file),
                    "{what}: reported in another file ({error_text})"
                );
                assert!(
                    position <= next_batch as u64,
                    "{what}: reported at {position} ({error_text}), after the flipped batch at {batch_start}"
                );
                Class::Reported
            }
            // `partlog.properties` is text with no checksum (FORMAT.md §7): a flip that breaks
            // it is a clear error naming the file (and the line); one that keeps it well formed
            // changes a setting, which the open's own settings then overwrite.
            Error::InvalidConfig { why, .. } if flip.file == "partlog.properties" => {
                assert!(why.contains("partlog.properties"), "{what}: {why}");
                Class::Reported
            }
            other => panic!("{what}: not Corrupt but {other:?}"),
        }
    };
    let mut seen = Observed::default();
    let opened = if flip.read_only {
        Log::open_read_only(DIR, config(&sim, &clock))
    } else {
        Log::open(DIR, config(&sim, &clock))
    };
    let log = match opened {
        Ok(log) => log,
        Err(error) => return check_corrupt(error),
    };
    let result = observe(&log, offsets, probes, &mut seen);
    if std::env::var_os("PARTLOG_FLIP").is_some() {
        let read: Vec<i64> = seen.records.iter().map(|r| r.offset).collect();
        eprintln!(
            "{what}: {result:?}; records at {read:?}; {:?}",
            log.recovery_report()
        );
    }
    let index_rewritten = (flip.file.ends_with(".index") || flip.file.ends_with(".timeindex")) && {
        let file = sim
            .open(&PathBuf::from(DIR).join(flip.file), OpenMode::Read)
            .unwrap();
        let mut now = vec![0; usize::try_from(file.len().unwrap()).unwrap()];
        file.read_exact_at(&mut now, 0).unwrap();
        now != flipped
    };
    drop(log);
    let changed = check_answers(&seen, pristine, flip, field_in_batch, &what);
    match result {
        Err(error) => check_corrupt(error),
        Ok(()) if changed && field_in_batch < 8 => {
            if std::env::var_os("PARTLOG_FLIP_VERBOSE").is_some() {
                let read: Vec<i64> = seen.records.iter().map(|r| r.offset).collect();
                eprintln!("{what}: renumbered to {read:?}");
            }
            Class::UnprotectedBaseOffset
        }
        Ok(()) if changed => Class::UnprotectedEpoch,
        Ok(()) => {
            assert_eq!(seen, *pristine, "{what}");
            if index_rewritten {
                Class::Repaired
            } else {
                Class::NoEffect
            }
        }
    }
}

/// Compares what was read (all of it, or what came before an error) with the pristine answers.
/// Returns whether anything differs; panics unless every difference lies in the unprotected
/// field the flip hit.
fn check_answers(
    seen: &Observed,
    pristine: &Observed,
    flip: &Flip<'_>,
    field_in_batch: usize,
    what: &str,
) -> bool {
    let records_same = seen
        .records
        .iter()
        .zip(&pristine.records)
        .all(|(a, b)| a == b);
    let batches_same = seen
        .batches
        .iter()
        .zip(&pristine.batches)
        .all(|(a, b)| a == b);
    let points_same = seen
        .points
        .iter()
        .zip(&pristine.points)
        .all(|(a, b)| a == b);
    let time_same = seen
        .by_time
        .iter()
        .zip(&pristine.by_time)
        .all(|(a, b)| a == b);
    let lengths_ok = seen.records.len() <= pristine.records.len()
        && seen.batches.len() <= pristine.batches.len()
        && seen.points.len() <= pristine.points.len()
        && seen.by_time.len() <= pristine.by_time.len();
    if records_same && batches_same && points_same && time_same && lengths_ok {
        return false;
    }
    // Something changed: it must be an unprotected field of a batch, and nothing else.
    assert!(
        flip.file.ends_with(".log"),
        "{what}: wrong answers {seen:?}"
    );
    match field_in_batch {
        // partitionLeaderEpoch: only those four bytes of a batch differ in what read returns.
        12..16 => {
            assert!(
                records_same && points_same && time_same && lengths_ok,
                "{what}: {seen:?}"
            );
            for (got, want) in seen.batches.iter().zip(&pristine.batches) {
                assert_eq!(got.len(), want.len(), "{what}");
                for (i, (a, b)) in got.iter().zip(want).enumerate() {
                    assert!(
                        a == b || (12..16).contains(&i),
                        "{what}: byte {i} of a batch changed"
                    );
                }
            }
        }
        // baseOffset (FORMAT.md §7: a change that keeps the order inside a segment renumbers
        // the batch's records): record contents and their order stay; only offsets may move.
        0..8 => {
            assert!(lengths_ok, "{what}: {seen:?}");
            for (got, want) in seen.records.iter().zip(&pristine.records) {
                assert_eq!(
                    (&got.key, &got.value, got.timestamp, &got.headers),
                    (&want.key, &want.value, want.timestamp, &want.headers),
                    "{what}"
                );
            }
            // A point read agrees with the records the iterator renumbered.
            for point in seen.points.iter().flatten() {
                assert!(
                    seen.records.contains(point),
                    "{what}: a point read returned {point:?}, which the iterator did not"
                );
            }
        }
        _ => panic!("{what}: silently wrong answers {seen:?}"),
    }
    true
}

#[test]
fn every_bit_flip_is_repaired_reported_harmless_or_in_an_unprotected_field() {
    let files = build_log();
    let logs: Vec<&String> = files.keys().filter(|name| name.ends_with(".log")).collect();
    assert_eq!(logs.len(), 3, "three segments: {:?}", files.keys());
    let first_base = segment_base(logs[0]).to_owned();
    for name in files.keys().filter(|n| n.ends_with("index")) {
        assert!(!files[name].is_empty(), "{name} has entries");
    }

    // The pristine answers, checked against the records written.
    let sim = SimStorage::new(1);
    let clock = Arc::new(ManualClock::new(T0 + 10 * SEGMENT_MS));
    sim.create_dir_all(Path::new(DIR)).unwrap();
    for (name, bytes) in &files {
        let file = sim
            .open(&Path::new(DIR).join(name), OpenMode::CreateNew)
            .unwrap();
        file.write_all_at(bytes, 0).unwrap();
    }
    let log = Log::open(DIR, config(&sim, &clock)).unwrap();
    let all = log
        .records(0, ReadBound::LogEnd)
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let offsets: Vec<i64> = all.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, (0..offsets.len() as i64).collect::<Vec<_>>());
    let mut probes: Vec<i64> = all.iter().map(|r| r.timestamp).collect();
    probes.sort_unstable();
    probes.dedup();
    probes.push(probes[probes.len() - 1] + 1);
    let mut pristine = Observed::default();
    observe(&log, &offsets, &probes, &mut pristine).unwrap();
    for (probe, answer) in probes.iter().zip(&pristine.by_time) {
        let want = all
            .iter()
            .find(|r| r.timestamp >= *probe)
            .map(|r| (r.offset, r.timestamp));
        assert_eq!(*answer, want, "offset_for_timestamp({probe})");
    }
    drop(log);

    let mut counts: BTreeMap<Class, u64> = BTreeMap::new();
    let mut by_file: BTreeMap<(String, Class), u64> = BTreeMap::new();
    let mut flips = 0u64;
    for (name, bytes) in &files {
        for byte in 0..bytes.len() {
            // The checkpoint's fields and CRC get every bit; its zero padding one bit a byte.
            let every_bit = segment_base(name) == first_base
                || (name == "partlog.checkpoint" && !(56..508).contains(&(byte % 512)));
            let bits: Vec<u8> = if every_bit {
                (0..8).collect()
            } else {
                vec![(byte % 8) as u8]
            };
            for bit in bits {
                if let Ok(only) = std::env::var("PARTLOG_FLIP") {
                    // Replays one flip: `file:byte:bit`.
                    if only != format!("{name}:{byte}:{bit}") {
                        continue;
                    }
                }
                let flip = Flip {
                    file: name,
                    byte,
                    bit,
                    read_only: false,
                };
                let class = classify(&files, &pristine, &offsets, &probes, &flip);
                *counts.entry(class).or_default() += 1;
                let kind = name.rsplit('.').next().unwrap().to_owned();
                *by_file.entry((kind, class)).or_default() += 1;
                flips += 1;
            }
        }
    }
    println!("bit flips: {flips} flips over {} files", files.len());
    for (class, count) in &counts {
        println!("  {class:?}: {count}");
    }
    for ((kind, class), count) in &by_file {
        println!("  .{kind} {class:?}: {count}");
    }
    assert_eq!(counts.values().sum::<u64>(), flips);
    // The checks must bite: CRC-covered bytes are reported, and the epoch escapes.
    assert!(counts.get(&Class::Reported).copied().unwrap_or(0) > 0);
    assert!(counts.get(&Class::UnprotectedEpoch).copied().unwrap_or(0) > 0);
}

#[test]
fn a_read_only_log_reports_a_bad_index_entry_it_may_not_rebuild() {
    let files = build_log();
    let sim = SimStorage::new(1);
    let clock = Arc::new(ManualClock::new(T0 + 10 * SEGMENT_MS));
    sim.create_dir_all(Path::new(DIR)).unwrap();
    for (name, bytes) in &files {
        let file = sim
            .open(&Path::new(DIR).join(name), OpenMode::CreateNew)
            .unwrap();
        file.write_all_at(bytes, 0).unwrap();
    }
    let log = Log::open_read_only(DIR, config(&sim, &clock)).unwrap();
    let all = log
        .records(0, ReadBound::LogEnd)
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let offsets: Vec<i64> = all.iter().map(|r| r.offset).collect();
    let mut probes: Vec<i64> = all.iter().map(|r| r.timestamp).collect();
    probes.sort_unstable();
    probes.dedup();
    let mut pristine = Observed::default();
    observe(&log, &offsets, &probes, &mut pristine).unwrap();
    drop(log);

    let mut counts: BTreeMap<Class, u64> = BTreeMap::new();
    for (name, bytes) in files.iter().filter(|(name, _)| name.ends_with("index")) {
        for byte in 0..bytes.len() {
            let flip = Flip {
                file: name,
                byte,
                bit: (byte % 8) as u8,
                read_only: true,
            };
            let class = classify(&files, &pristine, &offsets, &probes, &flip);
            assert_ne!(class, Class::Repaired, "a read-only log rewrote {name}");
            *counts.entry(class).or_default() += 1;
        }
    }
    println!("read-only index flips: {counts:?}");
    assert!(counts.get(&Class::Reported).copied().unwrap_or(0) > 0);
}

/// Issue 35: point reads over a sealed segment whose bits flip while the log is open, after
/// the reads checked (and cached) its batches. Every bit of every CRC-covered byte of the first
/// segment (its batches from the magic byte on) is flipped in turn under an open log; a point
/// read of each offset must then return the record written there or `Corrupt`, both while the
/// checked copies are cached and once they are evicted (the file is read, and checked, again).
#[test]
fn point_reads_after_a_flip_under_an_open_log_return_the_written_record_or_corrupt() {
    let files = build_log();
    let first = files
        .keys()
        .find(|name| name.ends_with(".log"))
        .unwrap()
        .clone();
    let spans = batch_spans(&files[&first]);
    let mut flips = 0u32;
    for &(start, end) in &spans {
        for byte in start + 16..end {
            for bit in 0..8u8 {
                point_reads_after_one_flip(&files, &first, byte, bit);
                flips += 1;
            }
        }
    }
    assert!(flips > 1000, "{flips} flips");
}

fn point_reads_after_one_flip(files: &Files, name: &str, byte: usize, bit: u8) {
    let sim = SimStorage::new(1);
    let clock = Arc::new(ManualClock::new(T0 + 10 * SEGMENT_MS));
    sim.create_dir_all(Path::new(DIR)).unwrap();
    for (file_name, bytes) in files {
        let file = sim
            .open(&Path::new(DIR).join(file_name), OpenMode::CreateNew)
            .unwrap();
        file.write_all_at(bytes, 0).unwrap();
    }
    // Its own cache: clearing it evicts this log's copies only.
    let cache = VerifiedBatchCache::new(1 << 20);
    let mut config = config(&sim, &clock);
    config.verified_batch_cache = Arc::clone(&cache);
    let log = Log::open(DIR, config).unwrap();
    let end = log.log_end_offset();
    let pristine: Vec<Option<LogRecord>> = (0..end)
        .map(|offset| log.read_record(offset, ReadOptions::default()).unwrap())
        .collect();
    assert!(pristine.iter().all(Option::is_some));
    assert!(cache.resident_bytes() > 0, "the reads kept their batches");
    let path = Path::new(DIR).join(name);
    let file = sim.open(&path, OpenMode::ReadWrite).unwrap();
    let mut one = [0u8];
    file.read_exact_at(&mut one, byte as u64).unwrap();
    one[0] ^= 1 << bit;
    file.write_all_at(&one, byte as u64).unwrap();
    let what = format!("flip of bit {bit} of byte {byte} of {name}");
    for evicted in [false, true] {
        if evicted {
            cache.clear();
        }
        for offset in 0..end {
            match log.read_record(offset, ReadOptions::default()) {
                Ok(found) => assert_eq!(
                    found, pristine[offset as usize],
                    "{what} (evicted: {evicted}): a wrong record at {offset}"
                ),
                Err(Error::Corrupt { file, .. }) => {
                    assert!(
                        evicted,
                        "{what}: a cached batch read as Corrupt at {offset}"
                    );
                    assert_eq!(file, path, "{what}: reported in another file");
                }
                Err(other) => panic!("{what}: read_record({offset}) failed with {other:?}"),
            }
        }
    }
}
