//! Crashes during appends of produced batches large enough to be written from the producer's
//! own bytes beside a stamped copy of their header (`Log::append_batch` of 8 KiB and more, in
//! two slices: `StorageFile::write_all_pair_at`, which the simulator performs as two writes, so
//! a crash can fall between a header and its records). The machine crashes before each write,
//! `set_len`, sync, mtime change and directory operation in turn (the crash points of
//! `tests/common/crash_points.rs`, shared with the crash matrix), with a random legal crash
//! image, in a log
//! with CreateTime and one with LogAppendTime (whose CRC the log computes over both slices).
//! After each crash `verify_dir` finds no corruption, the log reopens under
//! `RecoveryMode::Fail`, and:
//! - every batch acknowledged durable is there;
//! - what is there is a prefix of the appended batches, each one the producer's bytes after
//!   its header, at the offsets its append returned, with a valid CRC (every read checks it).
#![cfg(feature = "sim")] // the simulator and the manual clock: `cargo test --all-features`

#[path = "common/crash_points.rs"]
mod crash_points;
#[path = "common/fenced.rs"]
mod fenced_storage;

use std::sync::Arc;

use fenced_storage::Fenced;
use partlog::unstable::sim::{CrashConfig, FaultOp, FaultRule, SimEvent};
use partlog::unstable::{ManualClock, SimStorage, Storage};
use partlog::{
    BatchBuilder, BatchHeader, Compression, FlushPolicy, Log, LogConfig, NewRecord, ReadBound,
    RecoveryMode, Severity, TimestampType, verify_dir,
};

const T0: i64 = 1_700_000_000_000;
const DIR: &str = "/large/topic-0";
/// Appends per run; a `sync` follows every third.
const BATCHES: usize = 9;
const RECORDS_PER_BATCH: usize = 12;
/// The size of a record's value: 12 of them make a batch of about 12.5 KiB.
const VALUE_BYTES: usize = 1024;
/// The records of a batch start after its 61-byte header.
const HEADER_BYTES: usize = 61;

/// Producer batch `n`: values the codec cannot shrink, different in every batch.
fn produced_batch(n: usize) -> Vec<u8> {
    let mut noise = 0x9e37_79b9_7f4a_7c15u64 ^ (n as u64).wrapping_mul(0xff51_afd7_ed55_8ccd);
    let mut builder = BatchBuilder::new(Compression::None);
    for i in 0..RECORDS_PER_BATCH {
        let value: Vec<u8> = (0..VALUE_BYTES)
            .map(|_| {
                noise ^= noise << 13;
                noise ^= noise >> 7;
                noise ^= noise << 17;
                noise as u8
            })
            .collect();
        let key = format!("batch-{n}-record-{i}");
        builder.push(&NewRecord::new(
            T0 + i as i64,
            Some(key.as_bytes()),
            Some(&value),
        ));
    }
    let batch = builder.build().expect("a valid batch");
    assert!(batch.len() > 8 * 1024, "batch {n} is {} bytes", batch.len());
    batch
}

fn config(storage: Arc<dyn Storage>, clock: &Arc<ManualClock>, log_append_time: bool) -> LogConfig {
    LogConfig::builder_for_tests()
        // Three batches a segment, so that appends roll.
        .segment_bytes(40 * 1024)
        .index_interval_bytes(4096)
        .message_timestamp_type(if log_append_time {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        })
        .flush_policy(FlushPolicy::OsDecides)
        .recovery_mode(RecoveryMode::Fail)
        .storage(storage)
        .clock(clock.clone())
        .build()
        .expect("a valid config")
}

/// One run, crashing before the `nth` operation of kind `op` when given (or after the last
/// append otherwise). Returns the simulator's events, for the dry run's crash points.
fn run(crash_at: Option<(FaultOp, u64)>, log_append_time: bool) -> Vec<SimEvent> {
    let label = format!("crash {crash_at:?}, LogAppendTime {log_append_time}");
    let seed = crash_at.map_or(7, |(op, nth)| nth.rotate_left(17) ^ op as u64);
    let sim = SimStorage::new(seed);
    let clock = Arc::new(ManualClock::new(T0));
    if let Some((op, nth)) = crash_at {
        sim.inject(FaultRule::crash(op, nth).crash_config(CrashConfig::random().seed(seed)));
    }
    let crashed = || sim.stats().crashes > 0;
    // The crashing process's storage fails everything from the crash on (`common/fenced.rs`).
    let fenced = Arc::new(Fenced::new(Arc::new(sim.clone()), sim.clone()));
    // What each acknowledged append returned: its first offset, and the producer's bytes.
    let mut appended: Vec<(i64, Vec<u8>)> = Vec::new();
    let mut durable = 0i64;
    match Log::open(DIR, config(fenced, &clock, log_append_time)) {
        Ok(log) => {
            for n in 0..BATCHES {
                let batch = produced_batch(n);
                match log.append_batch(&batch) {
                    Ok(info) => appended.push((info.first_offset, batch)),
                    Err(error) => {
                        assert!(crashed(), "{label}: append {n} failed: {error}");
                        break;
                    }
                }
                if n % 3 == 2 {
                    if let Err(error) = log.sync() {
                        assert!(crashed(), "{label}: sync after {n} failed: {error}");
                        break;
                    }
                    durable = durable.max(log.durable_offset());
                }
                if crashed() {
                    break;
                }
            }
            durable = durable.max(log.durable_offset());
            if !crashed() {
                sim.clear_faults();
                sim.crash_with(&CrashConfig::random().seed(seed));
            }
            // The dead log's drop fails quietly: its handles died with the machine.
            drop(log);
        }
        Err(error) => assert!(crashed(), "{label}: open failed: {error}"),
    }
    sim.clear_faults();
    let events = sim.events();

    let config = config(Arc::new(sim.clone()), &clock, log_append_time);
    match verify_dir(DIR, &config) {
        Ok(report) => {
            let corrupt: Vec<_> = report.findings_of(Severity::Corruption).collect();
            assert!(corrupt.is_empty(), "{label}: verify: {corrupt:?}");
        }
        // A crash inside the first open may leave no log at all.
        Err(error) => assert!(appended.is_empty(), "{label}: verify: {error}"),
    }
    let log = Log::open(DIR, config).unwrap_or_else(|e| panic!("{label}: reopen: {e}"));
    let end = log.log_end_offset();
    assert!(
        end >= durable,
        "{label}: log end {end} below the durable offset {durable}"
    );
    let mut offset = 0;
    let mut survivors = 0;
    while offset < end {
        let fetch = log
            .read(offset, 1 << 20, ReadBound::LogEnd)
            .unwrap_or_else(|e| panic!("{label}: read at {offset}: {e}"));
        for batch in fetch.batches() {
            let batch = batch.unwrap_or_else(|e| panic!("{label}: batch at {offset}: {e}"));
            let header: BatchHeader = *batch.header().expect("a v2 batch");
            let stored = batch.as_bytes();
            // A batch the crash cut off after its append returned is the next one appended:
            // its offsets are the next ones, and only acknowledged appends can be compared.
            let Some((first_offset, original)) = appended.get(survivors) else {
                let n = survivors;
                assert_eq!(header.base_offset, offset, "{label}: batch {n}");
                assert_eq!(&stored[HEADER_BYTES..], &produced_batch(n)[HEADER_BYTES..]);
                survivors += 1;
                offset = header.last_offset() + 1;
                continue;
            };
            assert_eq!(
                header.base_offset, *first_offset,
                "{label}: batch {survivors}"
            );
            assert_eq!(stored.len(), original.len(), "{label}: batch {survivors}");
            assert!(
                stored[HEADER_BYTES..] == original[HEADER_BYTES..],
                "{label}: batch {survivors}'s records are not the producer's"
            );
            assert_eq!(
                header.timestamp_type() == TimestampType::LogAppendTime,
                log_append_time,
                "{label}"
            );
            survivors += 1;
            offset = header.last_offset() + 1;
        }
    }
    assert_eq!(
        offset, end,
        "{label}: the batches end at {offset}, the log at {end}"
    );
    // Everything acknowledged durable came back.
    let durable_batches = appended
        .iter()
        .filter(|(first, _)| first + RECORDS_PER_BATCH as i64 <= durable)
        .count();
    assert!(
        survivors >= durable_batches,
        "{label}: {survivors} batches survive, {durable_batches} were durable"
    );
    // The log takes an append at its end, from the producer's bytes again.
    let next = produced_batch(BATCHES);
    let info = log
        .append_batch(&next)
        .unwrap_or_else(|e| panic!("{label}: append: {e}"));
    assert_eq!(info.first_offset, end, "{label}");
    log.close()
        .unwrap_or_else(|e| panic!("{label}: close: {e}"));
    events
}

#[test]
fn a_crash_at_any_point_of_large_batch_appends_keeps_a_durable_prefix() {
    for log_append_time in [false, true] {
        let points = crash_points::crash_points(&run(None, log_append_time));
        let writes = points
            .iter()
            .filter(|(op, _)| *op == FaultOp::Write)
            .count();
        // Each append writes its header and its records apart, besides the index entries.
        assert!(writes >= 2 * BATCHES, "{writes} writes in the dry run");
        for point in points {
            run(Some(point), log_append_time);
        }
    }
}
