//! The producer-state rows (issue 14's performance targets): each compares partlog with the
//! feature against partlog without it, in the same run.
//!
//! - `producer_state_idempotent`: `append_batch` of 100 × 1 KiB batches from one idempotent
//!   producer (consecutive sequences) against the same batches without a producer id.
//! - `producer_state_1000_pids`: the same batches from 1,000 producers in turn, against no
//!   producer id. Each producer has state before the timer starts (one warm-up batch each, on
//!   both sides), so the row measures the steady state, not 1,000 first appends.
//! - `producer_state_read_committed`: a `read_committed` read of a log of one-batch
//!   transactions of two producers, against a `read_uncommitted` read of the same log, with no
//!   aborted transaction and with 1% of them aborted. Both sides read with
//!   `Log::read_with_into` (only the isolation differs) and decode every record they return; the
//!   `read_committed` side also applies Kafka's consumer filter (the aborted list).
//! - `producer_state_open_100k`: open after a clean shutdown of a log whose snapshot holds
//!   100,000 producers, against reading the snapshot file and checking its CRC-32C.
//! - `producer_state_unclean_recovery`: an unclean open of a tail of idempotent batches (1,000
//!   producers) against the same tail without producer ids. The tail is 1 GiB;
//!   `PARTLOG_BENCH_UNCLEAN_TAIL_MIB` sizes it (as for `benches/open.rs`).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::fs;
use std::path::Path;
use std::time::Instant;

use partlog::unstable::format::control_record_type;
use partlog::{
    BatchBuilder, Compression, ControlRecordType, FetchData, FlushPolicy, Isolation, Log,
    LogConfig, NewRecord, ReadOptions,
};

use super::{
    Ctx, Measured, Outcome, READ_CHUNK, Rep, TIMESTAMP, config, pairs, throughput_row,
    write_rep_batches,
};

/// A batch of 100 records of 1 KiB values (no keys): from `producer` (`(id, sequence)`) when
/// given, transactional or not.
fn kib_batch(producer: Option<(i64, i32)>, transactional: bool) -> Vec<u8> {
    let value = [b'x'; 1024];
    let mut builder = BatchBuilder::new(Compression::None);
    if let Some((producer_id, base_sequence)) = producer {
        builder = builder
            .producer(producer_id, 0, base_sequence)
            .transactional(transactional);
    }
    for _ in 0..100 {
        builder.push(&NewRecord::new(TIMESTAMP, None, Some(&value)));
    }
    builder.build().expect("a valid batch")
}

/// A batch of one record: the first (sequence 0) of `producer_id` when given.
fn one_record_batch(producer_id: Option<i64>, timestamp: i64, value: &[u8]) -> Vec<u8> {
    let mut builder = BatchBuilder::new(Compression::None);
    if let Some(producer_id) = producer_id {
        builder = builder.producer(producer_id, 0, 0);
    }
    builder.push(&NewRecord::new(timestamp, None, Some(value)));
    builder.build().expect("a valid batch")
}

/// Appends `warm_up` untimed, then `batches` timed, to a fresh log; checks every batch was
/// written (none taken for a duplicate).
fn append_prebuilt_rep(ctx: &Ctx, warm_up: &[Vec<u8>], batches: &[Vec<u8>]) -> Rep {
    let dir = ctx.fresh_dir("partlog");
    let log = Log::open(&dir, config(FlushPolicy::OsDecides)).expect("open");
    for batch in warm_up {
        log.append_batch(batch).expect("warm-up append_batch");
    }
    let start = log.log_end_offset();
    let started = Instant::now();
    for batch in batches {
        log.append_batch(batch).expect("append_batch");
    }
    let seconds = started.elapsed().as_secs_f64();
    assert_eq!(
        log.log_end_offset() - start,
        batches.len() as i64 * 100,
        "every batch was written"
    );
    drop(log);
    Rep {
        seconds,
        records: batches.len() as u64 * 100,
        user_bytes: batches.len() as u64 * 100 * 1024,
    }
}

/// One batch per producer, each of one record: gives `producers` producers state.
fn warm_up_batches(producers: Option<i64>) -> Vec<Vec<u8>> {
    let Some(producers) = producers else {
        return Vec::new();
    };
    (0..producers)
        .map(|producer_id| one_record_batch(Some(producer_id), TIMESTAMP, b"warm-up"))
        .collect()
}

/// The same warm-up without producer ids: the reference side writes the same bytes' worth.
fn plain_warm_up(count: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|_| one_record_batch(None, TIMESTAMP, b"warm-up"))
        .collect()
}

/// `producers` producers in turn, one batch each turn, each continuing its sequence after
/// `first_sequence`.
fn round_robin_batches(producers: i64, first_sequence: i32, count: usize) -> Vec<Vec<u8>> {
    let mut next_sequence = vec![first_sequence; producers as usize];
    (0..count)
        .map(|i| {
            let producer = i % producers as usize;
            let sequence = next_sequence[producer];
            next_sequence[producer] += 100;
            kib_batch(Some((producer as i64, sequence)), false)
        })
        .collect()
}

pub(super) fn row_idempotent(ctx: &Ctx) -> Outcome {
    let n = write_rep_batches();
    let idempotent = round_robin_batches(1, 0, n);
    let plain: Vec<Vec<u8>> = (0..n).map(|_| kib_batch(None, false)).collect();
    let (a, b, ratio, _) = pairs(
        ctx,
        || append_prebuilt_rep(ctx, &[], &idempotent),
        || append_prebuilt_rep(ctx, &[], &plain),
        Rep::records_per_second,
    );
    throughput_row(
        "producer_state: append_batch, idempotent 100 x 1 KiB batches, one pid",
        "partlog, the same batches without a pid",
        a,
        b,
        ratio,
        0.9,
        ">= 0.9",
        "no",
    )
}

/// Producers of the round-robin row.
const ROUND_ROBIN_PRODUCERS: i64 = 1_000;

pub(super) fn row_many_pids(ctx: &Ctx) -> Outcome {
    let n = write_rep_batches();
    let warm_up = warm_up_batches(Some(ROUND_ROBIN_PRODUCERS));
    let plain_warm = plain_warm_up(ROUND_ROBIN_PRODUCERS as usize);
    // The warm-up gave every producer sequence 0.
    let idempotent = round_robin_batches(ROUND_ROBIN_PRODUCERS, 1, n);
    let plain: Vec<Vec<u8>> = (0..n).map(|_| kib_batch(None, false)).collect();
    let (a, b, ratio, _) = pairs(
        ctx,
        || append_prebuilt_rep(ctx, &warm_up, &idempotent),
        || append_prebuilt_rep(ctx, &plain_warm, &plain),
        Rep::records_per_second,
    );
    throughput_row(
        "producer_state: append_batch, 1,000 pids round-robin, 100 x 1 KiB batches",
        "partlog, the same batches without a pid",
        a,
        b,
        ratio,
        0.85,
        ">= 0.85",
        "no",
    )
}

// ---------------------------------------------------------------------------------------------
// read_committed against read_uncommitted.

/// One transaction in this many is aborted in the row's second variant: with one-batch
/// transactions, 1% of the data batches.
const ABORT_EVERY: usize = 100;

/// A log of `write_rep_batches()` one-batch transactions of producers 1 and 2 in turn (both
/// batches, then both markers); with `abort`, one transaction in [`ABORT_EVERY`] is aborted.
/// Returns the data records a `read_committed` reader sees.
fn build_transactional_log(dir: &Path, abort: bool) -> u64 {
    let log = Log::open(dir, config(FlushPolicy::OsDecides)).expect("open");
    let mut committed_records = 0u64;
    let mut next_sequence = [0i32; 2];
    let mut txn = 0usize;
    while txn < write_rep_batches() {
        let mut open = Vec::new();
        for (producer, sequence) in next_sequence.iter_mut().enumerate() {
            let producer_id = producer as i64 + 1;
            let batch = kib_batch(Some((producer_id, *sequence)), true);
            log.append_batch(&batch).expect("append_batch");
            *sequence += 100;
            open.push((producer_id, txn));
            txn += 1;
        }
        for (producer_id, txn) in open {
            let marker = if abort && txn % ABORT_EVERY == ABORT_EVERY / 2 {
                ControlRecordType::Abort
            } else {
                committed_records += 100;
                ControlRecordType::Commit
            };
            log.append_marker(producer_id, 0, marker, 0)
                .expect("append_marker");
        }
    }
    assert_eq!(log.first_unstable_offset(), None, "every transaction ended");
    log.close().expect("close");
    committed_records
}

/// Reads the whole log with `isolation` and decodes every record a Kafka consumer at that
/// isolation level returns: control batches are skipped, and a `read_committed` reader skips
/// the aborted transactions' batches with Kafka's consumer filter (a min-heap of the listed
/// aborted transactions by first offset, and the set of producers whose batches are aborted).
struct ConsumerRead {
    fetch: FetchData,
    scratch: Vec<u8>,
    aborted: BinaryHeap<Reverse<(i64, i64)>>,
    aborted_producers: HashSet<i64>,
}

impl ConsumerRead {
    fn new() -> Self {
        ConsumerRead {
            fetch: FetchData::new(),
            scratch: Vec::new(),
            aborted: BinaryHeap::new(),
            aborted_producers: HashSet::new(),
        }
    }

    fn read_all(&mut self, log: &Log, isolation: Isolation, log_bytes: u64) -> Rep {
        let started = Instant::now();
        let options = ReadOptions::default().isolation(isolation);
        let mut offset = log.log_start_offset();
        let (mut records, mut user_bytes) = (0u64, 0u64);
        self.aborted.clear();
        self.aborted_producers.clear();
        loop {
            log.read_with_into(offset, READ_CHUNK, options, &mut self.fetch)
                .expect("read");
            if self.fetch.is_empty() {
                break;
            }
            for txn in self.fetch.aborted_transactions() {
                self.aborted
                    .push(Reverse((txn.first_offset, txn.producer_id)));
            }
            for batch in self.fetch.batches() {
                let batch = batch.expect("batch");
                let header = *batch.header().expect("a v2 batch");
                if header.producer_id >= 0 {
                    while let Some(&Reverse((first_offset, producer_id))) = self.aborted.peek() {
                        if first_offset > header.last_offset() {
                            break;
                        }
                        self.aborted.pop();
                        self.aborted_producers.insert(producer_id);
                    }
                }
                if header.is_control() {
                    let mut control = batch.records(&mut self.scratch).expect("records");
                    let record = control.next().expect("a control record").expect("record");
                    if control_record_type(&record).expect("a control type")
                        == ControlRecordType::Abort
                    {
                        self.aborted_producers.remove(&header.producer_id);
                    }
                    continue;
                }
                if header.is_transactional() && self.aborted_producers.contains(&header.producer_id)
                {
                    continue;
                }
                for record in batch.records(&mut self.scratch).expect("records") {
                    let record = record.expect("record");
                    records += 1;
                    user_bytes += (record.key.map_or(0, <[u8]>::len)
                        + record.value.map_or(0, <[u8]>::len))
                        as u64;
                }
            }
            offset = self.fetch.next_offset();
        }
        // Both sides read the same log: its bytes per second is the row's unit, so the ratio
        // is the inverse ratio of the times.
        let seconds = started.elapsed().as_secs_f64();
        std::hint::black_box(user_bytes);
        Rep {
            seconds,
            records,
            user_bytes: log_bytes,
        }
    }
}

pub(super) fn row_read_committed(ctx: &Ctx) -> Outcome {
    let mut rows = Vec::new();
    for (abort, workload) in [
        (
            false,
            "producer_state: read_committed sequential read, no aborted data",
        ),
        (
            true,
            "producer_state: read_committed sequential read, 1% of batches aborted",
        ),
    ] {
        let dir = ctx.fresh_dir("read-committed");
        let committed = build_transactional_log(&dir, abort);
        let log_bytes: u64 = fs::read_dir(&dir)
            .expect("list")
            .map(|entry| entry.expect("entry").path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "log"))
            .map(|path| fs::metadata(path).expect("stat").len())
            .sum();
        let log = Log::open(&dir, config(FlushPolicy::OsDecides)).expect("reopen");
        let all_records = write_rep_batches() as u64 * 100;
        let mut committed_read = ConsumerRead::new();
        let mut uncommitted_read = ConsumerRead::new();
        let (a, b, ratio, _) = pairs(
            ctx,
            || committed_read.read_all(&log, Isolation::ReadCommitted, log_bytes),
            || uncommitted_read.read_all(&log, Isolation::ReadUncommitted, log_bytes),
            Rep::user_bytes_per_second,
        );
        assert_eq!(
            a.records, committed,
            "read_committed saw the committed records"
        );
        assert_eq!(b.records, all_records, "read_uncommitted saw every record");
        let (target, target_text) = if abort {
            (0.85, ">= 0.85")
        } else {
            (0.95, ">= 0.95")
        };
        rows.push(Measured {
            workload: workload.into(),
            unit: "log MB/s",
            partlog: a.user_bytes_per_second() / 1e6,
            reference: b.user_bytes_per_second() / 1e6,
            reference_name: "partlog, read_uncommitted, same log".into(),
            ratio,
            target,
            target_text,
            roll_and_close_timed: "-",
            extra: vec![
                ("records_read_committed".into(), a.records as f64),
                ("records_read_uncommitted".into(), b.records as f64),
            ],
        });
        drop(log);
        fs::remove_dir_all(&dir).ok();
    }
    Outcome::MeasuredMany(rows)
}

// ---------------------------------------------------------------------------------------------
// Open after a clean shutdown with 100,000 producers in the snapshot.

const SNAPSHOT_PRODUCERS: i64 = 100_000;

pub(super) fn row_open_100k(ctx: &Ctx) -> Outcome {
    let dir = ctx.fresh_dir("open-producers");
    // Timestamps of now: producers idle for `producer.id.expiration.ms` would be dropped at load.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_millis() as i64;
    {
        let log = Log::open(&dir, config(FlushPolicy::OsDecides)).expect("open");
        for producer_id in 0..SNAPSHOT_PRODUCERS {
            let batch = one_record_batch(Some(producer_id), now, b"v");
            log.append_batch(&batch).expect("append_batch");
        }
        log.close().expect("close");
    }
    let snapshot = dir.join(format!("{SNAPSHOT_PRODUCERS:020}.snapshot"));
    let snapshot_bytes = fs::metadata(&snapshot).expect("the close snapshot").len();
    assert_eq!(snapshot_bytes, 10 + 46 * SNAPSHOT_PRODUCERS as u64);
    let open = || {
        let started = Instant::now();
        let log = Log::open(&dir, config(FlushPolicy::OsDecides)).expect("open");
        let seconds = started.elapsed().as_secs_f64();
        assert!(log.recovery_report().clean_shutdown, "a clean open");
        // Close is untimed; it writes the clean-shutdown record the next open trusts.
        log.close().expect("close");
        Rep {
            seconds,
            records: 1,
            user_bytes: 0,
        }
    };
    let read_and_check = || {
        let started = Instant::now();
        let bytes = fs::read(&snapshot).expect("read the snapshot");
        let stored = u32::from_be_bytes(bytes[2..6].try_into().expect("4 bytes"));
        assert_eq!(crc32c::crc32c(&bytes[6..]), stored, "the snapshot's CRC");
        Rep {
            seconds: started.elapsed().as_secs_f64(),
            records: 1,
            user_bytes: 0,
        }
    };
    let (a, b, ratio, _) = pairs(ctx, open, read_and_check, |rep| 1.0 / rep.seconds);
    // The producer table is built on its first use, not at the open (ARCHITECTURE.md §9): the
    // first append of a known producer after an open pays for it. Timed after the pairs, so
    // that the row's log stays the one the pairs opened; producer 0 goes on with its sequence.
    let mut first_append_ms: Vec<f64> = (1..=3)
        .map(|sequence| {
            let log = Log::open(&dir, config(FlushPolicy::OsDecides)).expect("open");
            let mut builder = BatchBuilder::new(Compression::None).producer(0, 0, sequence);
            builder.push(&NewRecord::new(now, None, Some(b"v")));
            let batch = builder.build().expect("a valid batch");
            let started = Instant::now();
            let info = log.append_batch(&batch).expect("append_batch");
            let ms = started.elapsed().as_secs_f64() * 1e3;
            assert!(!info.duplicate, "not taken for a duplicate");
            log.close().expect("close");
            ms
        })
        .collect();
    let log = Log::open(&dir, config(FlushPolicy::OsDecides)).expect("open");
    assert_eq!(
        log.active_producers().len(),
        SNAPSHOT_PRODUCERS as usize,
        "the open loaded every producer"
    );
    drop(log);
    fs::remove_dir_all(&dir).ok();
    Outcome::Measured(Measured {
        workload: "producer_state: open after clean shutdown, 100,000 producers in the snapshot"
            .into(),
        unit: "ms",
        partlog: a.seconds * 1e3,
        reference: b.seconds * 1e3,
        reference_name: "read() + CRC-32C of the snapshot file".into(),
        ratio,
        target: 0.5,
        target_text: "<= 2x its time",
        roll_and_close_timed: "-",
        extra: vec![
            ("snapshot_bytes".into(), snapshot_bytes as f64),
            (
                "first_append_after_open_ms".into(),
                super::median(&mut first_append_ms),
            ),
        ],
    })
}

// ---------------------------------------------------------------------------------------------
// Unclean recovery of a tail, with and without producer ids.

/// The tail's size in MiB: `PARTLOG_BENCH_UNCLEAN_TAIL_MIB`, 1 GiB by default.
fn recovery_tail_mib() -> u64 {
    std::env::var("PARTLOG_BENCH_UNCLEAN_TAIL_MIB")
        .ok()
        .map(|mib| mib.parse().expect("PARTLOG_BENCH_UNCLEAN_TAIL_MIB: MiB"))
        .unwrap_or(1024)
}

/// One segment holds the whole tail, as in `benches/open.rs`: nothing below it was synced.
pub(super) fn recovery_config() -> LogConfig {
    LogConfig::builder()
        .segment_bytes(1 << 30)
        .flush_policy(FlushPolicy::OsDecides)
        .build()
        .expect("a valid config")
}

/// Copies the files of `from` (but the lock) into a new `to` and syncs them: their pages end up
/// cached and clean, as a dead process's are once the kernel has written them back.
pub(super) fn copy_log(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("mkdir");
    for entry in fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        if entry.file_name() == "partlog.lock" {
            continue;
        }
        let target = to.join(entry.file_name());
        fs::copy(entry.path(), &target).expect("copy");
        fs::File::open(&target)
            .and_then(|file| file.sync_all())
            .expect("sync");
    }
}

/// Writes a tail of `bytes` of 100 × 1 KiB batches (from [`ROUND_ROBIN_PRODUCERS`] producers
/// in turn, or without producer ids), and copies it to `crashed` before the log closes: the
/// copy has no clean-shutdown record.
fn build_crashed_tail(scratch: &Path, crashed: &Path, bytes: u64, with_pids: bool) {
    let log = Log::open(scratch, recovery_config()).expect("open");
    let mut next_sequence = vec![0i32; ROUND_ROBIN_PRODUCERS as usize];
    let mut written = 0u64;
    let mut i = 0usize;
    loop {
        let producer = i % ROUND_ROBIN_PRODUCERS as usize;
        let batch = if with_pids {
            kib_batch(Some((producer as i64, next_sequence[producer])), false)
        } else {
            kib_batch(None, false)
        };
        if written + batch.len() as u64 > bytes {
            break;
        }
        log.append_batch(&batch).expect("append_batch");
        next_sequence[producer] += 100;
        written += batch.len() as u64;
        i += 1;
    }
    copy_log(scratch, crashed);
    log.close().expect("close");
    drop(log);
    fs::remove_dir_all(scratch).ok();
}

pub(super) fn row_unclean_recovery(ctx: &Ctx) -> Outcome {
    let mib = recovery_tail_mib();
    let with_pids = ctx.fresh_dir("crashed-with-pids");
    let without_pids = ctx.fresh_dir("crashed-without-pids");
    build_crashed_tail(&ctx.fresh_dir("tail"), &with_pids, mib << 20, true);
    build_crashed_tail(&ctx.fresh_dir("tail"), &without_pids, mib << 20, false);
    let recover = |template: &Path| {
        let run = ctx.fresh_dir("recovery");
        copy_log(template, &run);
        let started = Instant::now();
        let log = Log::open(&run, recovery_config()).expect("open");
        let seconds = started.elapsed().as_secs_f64();
        let report = log.recovery_report();
        assert!(!report.clean_shutdown, "an unclean open");
        let scanned = report.bytes_scanned;
        log.close().expect("close");
        drop(log);
        Rep {
            seconds,
            records: 1,
            user_bytes: scanned,
        }
    };
    let (a, b, ratio, _) = pairs(
        ctx,
        || recover(&with_pids),
        || recover(&without_pids),
        |rep| 1.0 / rep.seconds,
    );
    assert!(
        a.user_bytes + (1 << 20) > mib << 20,
        "recovery scanned the whole tail"
    );
    fs::remove_dir_all(&with_pids).ok();
    fs::remove_dir_all(&without_pids).ok();
    Outcome::Measured(Measured {
        workload: format!(
            "producer_state: unclean recovery of a {mib} MiB tail, 1,000 idempotent producers"
        ),
        unit: "ms",
        partlog: a.seconds * 1e3,
        reference: b.seconds * 1e3,
        reference_name: "partlog, the same tail without pids".into(),
        ratio,
        target: 1.0 / 1.2,
        target_text: "<= 1.2x its time",
        roll_and_close_timed: "-",
        extra: vec![("tail_bytes_scanned".into(), a.user_bytes as f64)],
    })
}
