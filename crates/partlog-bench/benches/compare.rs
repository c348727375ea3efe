//! partlog beside a reference measured in the same run: every row of benches/README.md's table.
//!
//! ```sh
//! cargo bench --bench compare                    # the full run (7 pairs a row)
//! COMPARE_QUICK=1 cargo bench --bench compare    # same per-rep sizes, 3 pairs a row (< 3 min)
//! COMPARE_ROWS=append,read cargo bench --bench compare   # only rows whose name has one of these
//! cargo bench --bench compare -- engine         # the same, as words after `--`
//! COMPARE_QUICK=1 cargo bench -p partlog-bench --bench compare -- broker   # the Kafka-broker rows
//! ```
//!
//! The method (benches/README.md): runs alternate A B A B (A is partlog, B the reference), at least
//! five pairs in the full run, and a row's ratio is the median of the per-pair ratios, normalised
//! so that higher is better. Each write rep starts after `sync(2)` and the deletion of the
//! previous rep's files, and writes at most 1 GiB. Throughput is counted in records/s and user
//! bytes (keys + values) per second. Whether roll fsyncs and `close()` fall inside the timed
//! region is each row's "roll and close timed" column, on both sides alike.
//!
//! The table goes to stdout; the same rows go to `target/compare.jsonl` as JSON lines with the
//! fields `workload`, `unit`, `partlog`, `reference`, `reference_name`, `ratio` and `target`
//! (plus a few extra, such as user bytes per second and latency percentiles).
//!
//! Adding a row: write one function `fn row_name(ctx: &Ctx) -> Outcome` and list it in
//! [`ROWS`].

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "compare/broker.rs"]
mod broker;
/// The tests' Kafka broker harness (a single-node KRaft broker on 127.0.0.1), for `broker`.
#[path = "../../../tests/common/broker.rs"]
mod broker_harness;
#[path = "common/compaction_log.rs"]
mod compaction_log;
#[path = "compare/curves.rs"]
mod curves;
#[path = "compare/engine.rs"]
mod engine;
#[path = "compare/groups.rs"]
mod groups;
#[path = "kafka/harness.rs"]
mod harness;
#[path = "compare/kafka.rs"]
mod kafka;
#[path = "compare/point.rs"]
mod point;
#[path = "compare/producer_state.rs"]
mod producer_state;
#[path = "compare/reads.rs"]
mod reads;
#[path = "compare/replication.rs"]
mod replication;
#[path = "compare/workers.rs"]
mod workers;

use commitlog::message::MessageSet;
use partlog::{
    Acks, BatchBuilder, Compression, CompressionType, FetchData, FlushPolicy, Log, LogConfig,
    NewRecord, Producer, ProducerConfig, ReadBound,
};

/// One row of benches/README.md's table: its name, and the function that measures it.
type RowFn = fn(&Ctx) -> Outcome;

/// Every row, in benches/README.md's order. The hook for new rows: add `(name, function)` here.
const ROWS: &[(&str, RowFn)] = &[
    ("append_batch", row_append_batch),
    ("append_records", row_append_records),
    ("append_batch_durable", row_append_batch_durable),
    ("append_records_durable", row_append_records_durable),
    ("unbatched", row_unbatched),
    ("batching_writer", row_batching_writer),
    ("append_records_100", row_append_records_100),
    ("sequential_read", row_sequential_read),
    ("sequential_read_mapped", row_sequential_read_mapped),
    ("random_read", row_random_read),
    ("random_read_mapped", row_random_read_mapped),
    ("read_one_record_of_100", reads::row_read_one_record_of_100),
    (
        "read_sequential_1_record_batches",
        reads::row_read_sequential_1_record_batches,
    ),
    ("read_random_cold", reads::row_read_random_cold),
    ("point_read_100b_1_a_batch", point::row_100b_1_a_batch),
    ("point_read_100b_100_a_batch", point::row_100b_100_a_batch),
    ("point_read_1kib_100_a_batch", point::row_1kib_100_a_batch),
    ("point_read_cold", point::row_cold),
    ("durable_1_thread", row_durable_one_thread),
    ("durable_8_threads", row_durable_eight_threads),
    ("open_1000_segments", row_open),
    ("compaction", row_compaction),
    ("producer_state_idempotent", producer_state::row_idempotent),
    ("producer_state_1000_pids", producer_state::row_many_pids),
    (
        "producer_state_read_committed",
        producer_state::row_read_committed,
    ),
    ("producer_state_open_100k", producer_state::row_open_100k),
    (
        "producer_state_unclean_recovery",
        producer_state::row_unclean_recovery,
    ),
    (
        "replication_append_as_follower",
        replication::row_append_as_follower,
    ),
    ("replication_leader_epoch", replication::row_leader_epoch),
    (
        "replication_read_for_follower",
        replication::row_read_for_follower,
    ),
    ("workers_threads", workers::row_threads),
    ("workers_durable", workers::row_durable),
    ("workers_compaction", workers::row_compaction_latency),
    ("kafka_append_batch", kafka::row_append_batch),
    ("kafka_append_small", kafka::row_append_small),
    ("kafka_append_fsync", kafka::row_append_fsync),
    ("kafka_durable_8_writers", kafka::row_durable_8_writers),
    ("kafka_read_sequential", kafka::row_read_sequential),
    ("kafka_read_random", kafka::row_read_random),
    ("kafka_open_1000_segments", kafka::row_open),
    ("kafka_recovery", kafka::row_recovery),
    ("kafka_compaction", kafka::row_compaction),
    ("engine_topic_producer", engine::row_topic_producer),
    ("engine_idempotent", engine::row_idempotent),
    ("engine_transactional", engine::row_transactional),
    ("engine_commit_latency", engine::row_commit_latency),
    (
        "engine_coordinator_recovery",
        engine::row_coordinator_recovery,
    ),
    ("engine_1000_partitions", engine::row_many_partitions),
    ("broker_producer", broker::row_producer),
    ("broker_groups", broker::row_groups),
    ("groups_commit_sync", groups::row_commit_sync),
    ("groups_fetch_1000", groups::row_fetch_1000),
    ("groups_open_1m", groups::row_open_1m),
];

/// A fixed CreateTime inside partlog's timestamp bounds.
const TIMESTAMP: i64 = 1_700_000_000_000;
/// Segment size for the write rows: several rolls per rep.
const SEGMENT_BYTES: u32 = 64 << 20;
/// Bytes of user data (values) per rep in the page-cache write rows: 2 segments' worth.
const WRITE_REP_BYTES: usize = 128 << 20;
/// The chunk both sides read with in the sequential-read row.
const READ_CHUNK: usize = 1 << 20;

/// The run's settings and scratch space.
struct Ctx {
    pairs: usize,
    root: PathBuf,
}

impl Ctx {
    /// A fresh directory for one rep, after the previous rep's files are deleted and `sync`ed.
    fn fresh_dir(&self, name: &str) -> PathBuf {
        let dir = self.root.join(name);
        if dir.exists() {
            fs::remove_dir_all(&dir).expect("delete the previous rep's files");
        }
        sync_all_filesystems();
        fs::create_dir_all(&dir).expect("create a rep directory");
        dir
    }
}

fn sync_all_filesystems() {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
}

/// One timed run of one side.
#[derive(Clone, Copy, Debug, Default)]
struct Rep {
    seconds: f64,
    records: u64,
    user_bytes: u64,
}

impl Rep {
    fn records_per_second(&self) -> f64 {
        self.records as f64 / self.seconds
    }
    fn user_bytes_per_second(&self) -> f64 {
        self.user_bytes as f64 / self.seconds
    }
}

/// What a row measured.
enum Outcome {
    /// A measured row.
    Measured(Measured),
    /// A row measured in several variants (compaction: one per codec), one table line each.
    MeasuredMany(Vec<Measured>),
    /// A row that could not run here (Kafka's rows without Java); it printed why.
    Skipped,
}

struct Measured {
    workload: String,
    unit: &'static str,
    partlog: f64,
    reference: f64,
    reference_name: String,
    /// Median of the per-pair ratios, higher is better.
    ratio: f64,
    /// The target as a ratio on the same scale.
    target: f64,
    /// Shown as text: "≥ 0.7", "≤ 3x its time".
    target_text: &'static str,
    roll_and_close_timed: &'static str,
    /// Extra figures for the table's notes and the JSON line.
    extra: Vec<(String, f64)>,
}

/// Runs `pairs` A B pairs and returns (median A, median B, median of the per-pair A/B ratios of
/// `score`, higher is better).
fn pairs<A, B>(ctx: &Ctx, mut a: A, mut b: B, score: fn(&Rep) -> f64) -> (Rep, Rep, f64, Vec<f64>)
where
    A: FnMut() -> Rep,
    B: FnMut() -> Rep,
{
    let mut ratios = Vec::new();
    let mut a_reps = Vec::new();
    let mut b_reps = Vec::new();
    for _ in 0..ctx.pairs {
        let rep_a = a();
        let rep_b = b();
        ratios.push(score(&rep_a) / score(&rep_b));
        a_reps.push(rep_a);
        b_reps.push(rep_b);
    }
    let median_rep = |reps: &mut Vec<Rep>| {
        reps.sort_by(|x, y| score(x).total_cmp(&score(y)));
        reps[reps.len() / 2]
    };
    let raw = ratios.clone();
    (
        median_rep(&mut a_reps),
        median_rep(&mut b_reps),
        median(&mut ratios),
        raw,
    )
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

#[allow(
    clippy::too_many_arguments,
    reason = "one call site per row; a struct would only rename the arguments"
)]
fn throughput_row(
    workload: &str,
    reference_name: &str,
    a: Rep,
    b: Rep,
    ratio: f64,
    target: f64,
    target_text: &'static str,
    roll_and_close_timed: &'static str,
) -> Outcome {
    Outcome::Measured(Measured {
        workload: workload.to_string(),
        unit: "records/s",
        partlog: a.records_per_second(),
        reference: b.records_per_second(),
        reference_name: reference_name.to_string(),
        ratio,
        target,
        target_text,
        roll_and_close_timed,
        extra: vec![
            ("partlog_user_bytes_per_s".into(), a.user_bytes_per_second()),
            (
                "reference_user_bytes_per_s".into(),
                b.user_bytes_per_second(),
            ),
        ],
    })
}

// ---------------------------------------------------------------------------------------------
// Data shared by the rows.

/// 100 records of 1 KiB values (no keys), as one pre-built batch.
fn one_kib_batch() -> Vec<u8> {
    let value = [b'x'; 1024];
    let mut builder = BatchBuilder::new(Compression::None);
    for _ in 0..100 {
        builder.push(&NewRecord::new(TIMESTAMP, None, Some(&value)));
    }
    builder.build().expect("a valid batch")
}

fn config(flush_policy: FlushPolicy) -> LogConfig {
    mapping_from_env(
        LogConfig::builder()
            .segment_bytes(SEGMENT_BYTES)
            .flush_policy(flush_policy)
            .build()
            .expect("a valid config"),
    )
}

/// `config` with the mapping settings `PARTLOG_BENCH_MAP` names, for measuring them only (the
/// rows' configurations are what they say): `sealed` sets `map.sealed.segments`, `all` sets
/// `map.active.segment` as well; unset or `none` leaves `config` as it is.
fn mapping_from_env(mut config: LogConfig) -> LogConfig {
    match std::env::var("PARTLOG_BENCH_MAP").as_deref() {
        Ok("all") => {
            config.map_sealed_segments = true;
            config.map_active_segment = true;
        }
        Ok("sealed") => config.map_sealed_segments = true,
        Ok("none") | Err(_) => {}
        Ok(other) => panic!("PARTLOG_BENCH_MAP={other}: expected none, sealed or all"),
    }
    config
}

/// The reference writer: the identical byte stream in identical chunks with `write()`, one file
/// per segment, rolling where partlog rolls (when the next chunk would pass `segment.bytes`).
struct RawSegments {
    dir: PathBuf,
    file: File,
    written: u64,
    sealed: Vec<File>,
    fdatasync_at_roll: bool,
}

impl RawSegments {
    fn create(dir: &Path, fdatasync_at_roll: bool) -> RawSegments {
        RawSegments {
            dir: dir.to_path_buf(),
            file: Self::segment_file(dir, 0),
            written: 0,
            sealed: Vec::new(),
            fdatasync_at_roll,
        }
    }

    fn segment_file(dir: &Path, index: usize) -> File {
        OpenOptions::new()
            .create_new(true)
            .write(true)
            .open(dir.join(format!("{index:020}.log")))
            .expect("create a raw segment")
    }

    fn write(&mut self, chunk: &[u8]) {
        if self.written > 0 && self.written + chunk.len() as u64 > u64::from(SEGMENT_BYTES) {
            let next = Self::segment_file(&self.dir, self.sealed.len() + 1);
            let old = std::mem::replace(&mut self.file, next);
            if self.fdatasync_at_roll {
                old.sync_data().expect("fdatasync");
            }
            self.sealed.push(old);
            self.written = 0;
        }
        self.file.write_all(chunk).expect("write");
        self.written += chunk.len() as u64;
    }

    fn finish(self, fdatasync: bool) {
        if fdatasync {
            self.file.sync_data().expect("fdatasync");
            File::open(&self.dir)
                .and_then(|dir| dir.sync_all())
                .expect("directory fsync");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Rows 1-3: page-cache and durable appends of 100 x 1 KiB batches.

fn append_batch_rep(ctx: &Ctx, batch: &[u8], batches: usize, durable: bool) -> Rep {
    let dir = ctx.fresh_dir("partlog");
    let log = Log::open(&dir, config(FlushPolicy::OsDecides)).expect("open");
    let started = Instant::now();
    for _ in 0..batches {
        log.append_batch(batch).expect("append_batch");
    }
    if durable {
        log.close().expect("close");
    }
    let seconds = started.elapsed().as_secs_f64();
    drop(log);
    Rep {
        seconds,
        records: batches as u64 * 100,
        user_bytes: batches as u64 * 100 * 1024,
    }
}

fn append_records_rep(ctx: &Ctx, batches: usize, durable: bool) -> Rep {
    let dir = ctx.fresh_dir("partlog");
    let value = [b'x'; 1024];
    let records: Vec<NewRecord> = (0..100)
        .map(|_| NewRecord::new(TIMESTAMP, None, Some(&value)))
        .collect();
    let log = Log::open(&dir, config(FlushPolicy::OsDecides)).expect("open");
    let started = Instant::now();
    for _ in 0..batches {
        log.append(&records).expect("append");
    }
    if durable {
        log.close().expect("close");
    }
    let seconds = started.elapsed().as_secs_f64();
    drop(log);
    Rep {
        seconds,
        records: batches as u64 * 100,
        user_bytes: batches as u64 * 100 * 1024,
    }
}

fn raw_write_rep(ctx: &Ctx, batch: &[u8], batches: usize, durable: bool) -> Rep {
    let dir = ctx.fresh_dir("reference");
    let started = Instant::now();
    let mut raw = RawSegments::create(&dir, durable);
    for _ in 0..batches {
        raw.write(batch);
    }
    raw.finish(durable);
    Rep {
        seconds: started.elapsed().as_secs_f64(),
        records: batches as u64 * 100,
        user_bytes: batches as u64 * 100 * 1024,
    }
}

fn write_rep_batches() -> usize {
    WRITE_REP_BYTES / (100 * 1024)
}

fn row_append_batch(ctx: &Ctx) -> Outcome {
    let batch = one_kib_batch();
    let n = write_rep_batches();
    let (a, b, ratio, _) = pairs(
        ctx,
        || append_batch_rep(ctx, &batch, n, false),
        || raw_write_rep(ctx, &batch, n, false),
        Rep::records_per_second,
    );
    throughput_row(
        "append_batch, pre-built 100 x 1 KiB batches, page cache",
        "raw write(), same chunks",
        a,
        b,
        ratio,
        0.7,
        ">= 0.7",
        "no",
    )
}

fn row_append_records(ctx: &Ctx) -> Outcome {
    let batch = one_kib_batch();
    let n = write_rep_batches();
    let (a, b, ratio, _) = pairs(
        ctx,
        || append_records_rep(ctx, n, false),
        || raw_write_rep(ctx, &batch, n, false),
        Rep::records_per_second,
    );
    throughput_row(
        "append(records), 100 x 1 KiB a call, page cache",
        "raw write(), same chunks",
        a,
        b,
        ratio,
        0.55,
        ">= 0.55",
        "no",
    )
}

fn row_append_batch_durable(ctx: &Ctx) -> Outcome {
    let batch = one_kib_batch();
    let n = write_rep_batches();
    let (a, b, ratio, _) = pairs(
        ctx,
        || append_batch_rep(ctx, &batch, n, true),
        || raw_write_rep(ctx, &batch, n, true),
        Rep::records_per_second,
    );
    throughput_row(
        "append_batch + final fdatasync of every file",
        "raw write() + fdatasync",
        a,
        b,
        ratio,
        0.9,
        ">= 0.9",
        "yes",
    )
}

fn row_append_records_durable(ctx: &Ctx) -> Outcome {
    let batch = one_kib_batch();
    let n = write_rep_batches();
    let (a, b, ratio, _) = pairs(
        ctx,
        || append_records_rep(ctx, n, true),
        || raw_write_rep(ctx, &batch, n, true),
        Rep::records_per_second,
    );
    throughput_row(
        "append(records) + final fdatasync of every file",
        "raw write() + fdatasync",
        a,
        b,
        ratio,
        0.9,
        ">= 0.9",
        "yes",
    )
}

// ---------------------------------------------------------------------------------------------
// Rows 4-5: unbatched 100 B records against the commitlog crate, same guarantee.
//
// The guarantee both sides give on return: the record is in the kernel (it survives a SIGKILL
// of the process), not fsynced. partlog's `append` writes with pwrite before it returns;
// commitlog's `append` writes the message with write(2) and its index into a shared mapping.

const UNBATCHED_RECORDS: usize = 200_000;
const SMALL_VALUE: [u8; 100] = [b'v'; 100];

fn commitlog_options(dir: &Path) -> commitlog::LogOptions {
    let mut options = commitlog::LogOptions::new(dir);
    options.segment_max_bytes(SEGMENT_BYTES as usize);
    options
}

fn partlog_unbatched_rep(ctx: &Ctx, records: usize) -> Rep {
    let dir = ctx.fresh_dir("partlog");
    let log = Log::open(&dir, config(FlushPolicy::OsDecides)).expect("open");
    let record = [NewRecord::new(TIMESTAMP, None, Some(&SMALL_VALUE))];
    let started = Instant::now();
    for _ in 0..records {
        log.append(&record).expect("append");
    }
    let seconds = started.elapsed().as_secs_f64();
    drop(log);
    Rep {
        seconds,
        records: records as u64,
        user_bytes: (records * SMALL_VALUE.len()) as u64,
    }
}

fn commitlog_unbatched_rep(ctx: &Ctx, records: usize) -> Rep {
    let dir = ctx.fresh_dir("reference");
    let mut log = commitlog::CommitLog::new(commitlog_options(&dir)).expect("open commitlog");
    let started = Instant::now();
    for _ in 0..records {
        log.append_msg(SMALL_VALUE).expect("append_msg");
    }
    let seconds = started.elapsed().as_secs_f64();
    drop(log);
    Rep {
        seconds,
        records: records as u64,
        user_bytes: (records * SMALL_VALUE.len()) as u64,
    }
}

fn row_unbatched(ctx: &Ctx) -> Outcome {
    let (a, b, ratio, _) = pairs(
        ctx,
        || partlog_unbatched_rep(ctx, UNBATCHED_RECORDS),
        || commitlog_unbatched_rep(ctx, UNBATCHED_RECORDS),
        Rep::records_per_second,
    );
    throughput_row(
        "unbatched 100 B records, survive SIGKILL on return",
        "commitlog 0.2, append_msg",
        a,
        b,
        ratio,
        1.0,
        ">= 1.0",
        "no",
    )
}

/// Records a rep of the batching-writer row sends (and commitlog appends in 100-record batches).
const BATCHING_WRITER_RECORDS: usize = UNBATCHED_RECORDS * 5;

/// The batching writer, one `send()` per 100 B record, against commitlog's pre-built
/// 100-record batches. Both sides end with the records in the kernel (they survive SIGKILL):
/// the producer runs at acks=1 and the timed region ends when `flush()` returns, after which
/// every batch is appended; commitlog's `append` writes before it returns. The producer is
/// created before and closed after the timed region (commitlog's open and drop are untimed too);
/// its settings are Kafka 4's defaults (`batch.size` 16384, `linger.ms` 5).
fn row_batching_writer(ctx: &Ctx) -> Outcome {
    let records = BATCHING_WRITER_RECORDS;
    let rep = |ctx: &Ctx| {
        let dir = ctx.fresh_dir("partlog");
        let log = Arc::new(Log::open(&dir, config(FlushPolicy::OsDecides)).expect("open"));
        let producer_config = ProducerConfig::builder()
            .acks(Acks::One)
            .build()
            .expect("a valid producer config");
        let producer = Producer::new(Arc::clone(&log), producer_config).expect("producer");
        let record = NewRecord::new(TIMESTAMP, None, Some(&SMALL_VALUE));
        let started = Instant::now();
        for _ in 0..records {
            // acks=1 resolves on append; flush() below waits for every batch, so the handle
            // itself is not needed.
            drop(producer.send(&record).expect("send"));
        }
        producer.flush().expect("flush");
        let seconds = started.elapsed().as_secs_f64();
        producer.close().expect("close");
        drop(producer);
        assert_eq!(
            log.log_end_offset(),
            records as i64,
            "every record appended"
        );
        drop(log);
        Rep {
            seconds,
            records: records as u64,
            user_bytes: (records * SMALL_VALUE.len()) as u64,
        }
    };
    let (a, b, ratio, _) = pairs(
        ctx,
        || rep(ctx),
        || commitlog_batched_rep(ctx, records),
        Rep::records_per_second,
    );
    throughput_row(
        "batching writer, one send() per 100 B record (acks=1, until flush)",
        "commitlog 0.2, pre-built 100-message batches",
        a,
        b,
        ratio,
        1.0,
        ">= 1.0",
        "no",
    )
}

/// commitlog's side of the batching-writer row: pre-built 100-record `MessageBuf`s.
fn commitlog_batched_rep(ctx: &Ctx, records: usize) -> Rep {
    let dir = ctx.fresh_dir("reference");
    let mut log = commitlog::CommitLog::new(commitlog_options(&dir)).expect("open commitlog");
    let mut prebuilt = Vec::new();
    for _ in 0..records / 100 {
        let mut buf = commitlog::message::MessageBuf::default();
        for _ in 0..100 {
            buf.push(SMALL_VALUE).expect("push");
        }
        prebuilt.push(buf);
    }
    let started = Instant::now();
    for buf in &mut prebuilt {
        log.append(buf).expect("append");
    }
    let seconds = started.elapsed().as_secs_f64();
    drop(log);
    Rep {
        seconds,
        records: (records / 100 * 100) as u64,
        user_bytes: (records / 100 * 100 * SMALL_VALUE.len()) as u64,
    }
}

/// partlog's own 100-record `append(records)`, reported beside the batching writer's row.
fn row_append_records_100(ctx: &Ctx) -> Outcome {
    let records = BATCHING_WRITER_RECORDS;
    let rep = |ctx: &Ctx| {
        let dir = ctx.fresh_dir("partlog");
        let batch: Vec<NewRecord> = (0..100)
            .map(|_| NewRecord::new(TIMESTAMP, None, Some(&SMALL_VALUE)))
            .collect();
        let log = Log::open(&dir, config(FlushPolicy::OsDecides)).expect("open");
        let started = Instant::now();
        for _ in 0..records / 100 {
            log.append(&batch).expect("append");
        }
        let seconds = started.elapsed().as_secs_f64();
        drop(log);
        Rep {
            seconds,
            records: records as u64,
            user_bytes: (records * SMALL_VALUE.len()) as u64,
        }
    };
    let (a, b, ratio, _) = pairs(
        ctx,
        || rep(ctx),
        || commitlog_batched_rep(ctx, records),
        Rep::records_per_second,
    );
    throughput_row(
        "append(records), 100 x 100 B a call (beside the batching writer)",
        "commitlog 0.2, pre-built 100-message batches",
        a,
        b,
        ratio,
        // No target of its own: benches/README.md reports it beside the batching writer's row.
        f64::NAN,
        "- (beside batching writer)",
        "no",
    )
}

// ---------------------------------------------------------------------------------------------
// Row 6: sequential read of row 1's log.

fn row_sequential_read(ctx: &Ctx) -> Outcome {
    sequential_read(ctx, false)
}

/// The sequential-read row with `map_sealed_segments`: sealed segments are read from a
/// mapping (the option's measurement; benches/README.md's row is the default above).
fn row_sequential_read_mapped(ctx: &Ctx) -> Outcome {
    sequential_read(ctx, true)
}

fn mapped_config(segment_bytes: u32) -> LogConfig {
    LogConfig::builder()
        .segment_bytes(segment_bytes)
        .map_sealed_segments(true)
        .build()
        .expect("a valid config")
}

fn sequential_read(ctx: &Ctx, mapped: bool) -> Outcome {
    // Row 1's log: pre-built 100 x 1 KiB batches, written once and read from the page cache.
    let dir = ctx.fresh_dir("sequential");
    let batch = one_kib_batch();
    let read_config = || {
        if mapped {
            mapped_config(SEGMENT_BYTES)
        } else {
            config(FlushPolicy::OsDecides)
        }
    };
    {
        let log = Log::open(&dir, config(FlushPolicy::OsDecides)).expect("open");
        for _ in 0..write_rep_batches() {
            log.append_batch(&batch).expect("append_batch");
        }
        log.close().expect("close");
    }
    let log = Log::open(&dir, read_config()).expect("reopen");
    let mut segment_files: Vec<PathBuf> = fs::read_dir(&dir)
        .expect("list")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "log"))
        .collect();
    segment_files.sort();
    let total_bytes: u64 = segment_files
        .iter()
        .map(|path| fs::metadata(path).expect("stat").len())
        .sum();

    let mut fetch = FetchData::new();
    let mut scratch = Vec::new();
    let mut partlog_read = || {
        let started = Instant::now();
        let mut offset = log.log_start_offset();
        let (mut records, mut user_bytes) = (0u64, 0u64);
        loop {
            log.read_into(offset, READ_CHUNK, ReadBound::LogEnd, &mut fetch)
                .expect("read");
            if fetch.is_empty() {
                break;
            }
            for batch in fetch.batches() {
                let batch = batch.expect("batch");
                for record in batch.records(&mut scratch).expect("records") {
                    let record = record.expect("record");
                    records += 1;
                    user_bytes += (record.key.map_or(0, <[u8]>::len)
                        + record.value.map_or(0, <[u8]>::len))
                        as u64;
                }
            }
            offset = fetch.next_offset();
        }
        Rep {
            seconds: started.elapsed().as_secs_f64(),
            records,
            user_bytes,
        }
    };
    let mut chunk = vec![0u8; READ_CHUNK];
    let expected_records = write_rep_batches() as u64 * 100;
    let mut raw_read = || {
        let started = Instant::now();
        let mut crc = 0u32;
        for path in &segment_files {
            let mut file = File::open(path).expect("open");
            loop {
                let n = file.read(&mut chunk).expect("read");
                if n == 0 {
                    break;
                }
                crc = crc32c::crc32c_append(crc, &chunk[..n]);
            }
        }
        std::hint::black_box(crc);
        Rep {
            seconds: started.elapsed().as_secs_f64(),
            records: expected_records,
            user_bytes: expected_records * 1024,
        }
    };
    let (a, b, ratio, _) = pairs(
        ctx,
        &mut partlog_read,
        &mut raw_read,
        Rep::records_per_second,
    );
    assert_eq!(a.records, expected_records, "the read saw every record");
    let mut outcome = throughput_row(
        if mapped {
            "sequential read, map_sealed_segments (option)"
        } else {
            "sequential read of row 1's log, CRC per batch, key+value lengths summed"
        },
        "raw read() + CRC-32C",
        a,
        b,
        ratio,
        0.8,
        ">= 0.8",
        "-",
    );
    if let Outcome::Measured(measured) = &mut outcome {
        measured.extra.push((
            "file_bytes_per_s_partlog".into(),
            total_bytes as f64 / a.seconds,
        ));
    }
    drop(log);
    fs::remove_dir_all(&dir).ok();
    outcome
}

// ---------------------------------------------------------------------------------------------
// Row 7: random reads of single 100 B records.

const RANDOM_LOG_RECORDS: usize = 200_000;
const RANDOM_READS: usize = 100_000;

/// A small xorshift: the same offsets for both sides, no dependency.
fn random_offsets(count: usize, below: u64, seed: u64) -> Vec<u64> {
    let mut state = seed | 1;
    (0..count)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % below
        })
        .collect()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

fn row_random_read(ctx: &Ctx) -> Outcome {
    random_read(ctx, None)
}

/// The random-read row with `map_sealed_segments` and 8 MiB segments on both sides, so that
/// most reads hit sealed segments (the option's measurement).
fn row_random_read_mapped(ctx: &Ctx) -> Outcome {
    random_read(ctx, Some(8 << 20))
}

/// `mapped_segment_bytes`: `None` for the default (pread) path with `SEGMENT_BYTES` segments;
/// `Some(n)` for `map_sealed_segments` with `n`-byte segments, on both sides.
fn random_read(ctx: &Ctx, mapped_segment_bytes: Option<u32>) -> Outcome {
    let partlog_dir = ctx.fresh_dir("random-partlog");
    let commitlog_dir = ctx.fresh_dir("random-commitlog");
    let partlog_config =
        || mapped_segment_bytes.map_or_else(|| config(FlushPolicy::OsDecides), mapped_config);
    let commitlog_options = |dir: &Path| {
        let mut options = commitlog::LogOptions::new(dir);
        options.segment_max_bytes(mapped_segment_bytes.unwrap_or(SEGMENT_BYTES) as usize);
        options
    };
    {
        let log = Log::open(&partlog_dir, partlog_config()).expect("open");
        for _ in 0..RANDOM_LOG_RECORDS {
            log.append(&[NewRecord::new(TIMESTAMP, None, Some(&SMALL_VALUE))])
                .expect("append");
        }
        log.close().expect("close");
        let mut log = commitlog::CommitLog::new(commitlog_options(&commitlog_dir)).expect("open");
        for _ in 0..RANDOM_LOG_RECORDS {
            log.append_msg(SMALL_VALUE).expect("append_msg");
        }
        log.flush().expect("flush");
    }
    let log = Log::open(&partlog_dir, partlog_config()).expect("reopen");
    let reference = commitlog::CommitLog::new(commitlog_options(&commitlog_dir)).expect("reopen");
    // commitlog returns whole messages up to the limit: one message's size reads exactly one.
    let first_messages = reference
        .read(0, commitlog::ReadLimit::max_bytes(4096))
        .expect("read");
    let one_message = first_messages.bytes().len() / first_messages.len();
    assert_eq!(
        reference
            .read(7, commitlog::ReadLimit::max_bytes(one_message))
            .expect("read")
            .len(),
        1,
        "the limit reads exactly one message"
    );
    // Less than two messages: exactly one, wherever it lies (one message's size exactly fails at
    // some positions with "Message exceeded max byte size").
    let limit = commitlog::ReadLimit::max_bytes(2 * one_message - 1);
    let offsets = random_offsets(RANDOM_READS, RANDOM_LOG_RECORDS as u64, 0x5eed);

    let mut partlog_latencies = Vec::with_capacity(RANDOM_READS);
    let mut reference_latencies = Vec::with_capacity(RANDOM_READS);
    let mut p_lat = Vec::new();
    let mut r_lat = Vec::new();
    let mut fetch = FetchData::new();
    let mut partlog_reads = || {
        partlog_latencies.clear();
        let started = Instant::now();
        let mut value_bytes = 0u64;
        for &offset in &offsets {
            let t = Instant::now();
            log.read_into(offset as i64, 1, ReadBound::LogEnd, &mut fetch)
                .expect("read");
            for batch in fetch.batches() {
                value_bytes += batch.expect("batch").total_size() as u64;
            }
            partlog_latencies.push(t.elapsed().as_secs_f64());
        }
        std::hint::black_box(value_bytes);
        p_lat.clone_from(&partlog_latencies);
        Rep {
            seconds: started.elapsed().as_secs_f64(),
            records: RANDOM_READS as u64,
            user_bytes: (RANDOM_READS * SMALL_VALUE.len()) as u64,
        }
    };
    let mut reference_reads = || {
        reference_latencies.clear();
        let started = Instant::now();
        let mut value_bytes = 0u64;
        for &offset in &offsets {
            let t = Instant::now();
            let messages = reference.read(offset, limit).expect("read");
            for message in messages.iter() {
                value_bytes += message.payload().len() as u64;
            }
            reference_latencies.push(t.elapsed().as_secs_f64());
        }
        std::hint::black_box(value_bytes);
        r_lat.clone_from(&reference_latencies);
        Rep {
            seconds: started.elapsed().as_secs_f64(),
            records: RANDOM_READS as u64,
            user_bytes: (RANDOM_READS * SMALL_VALUE.len()) as u64,
        }
    };
    let (a, b, ratio, _) = pairs(
        ctx,
        &mut partlog_reads,
        &mut reference_reads,
        Rep::records_per_second,
    );
    p_lat.sort_by(f64::total_cmp);
    r_lat.sort_by(f64::total_cmp);
    let micros = 1e6;
    let mut outcome = throughput_row(
        if mapped_segment_bytes.is_some() {
            "random read, map_sealed_segments, 8 MiB segments (option)"
        } else {
            "random read: the batch holding a random offset, 100 B records"
        },
        "commitlog 0.2, single-message read",
        a,
        b,
        ratio,
        1.0,
        ">= 1.0",
        "-",
    );
    if let Outcome::Measured(measured) = &mut outcome {
        measured.unit = "reads/s";
        measured.extra = vec![
            ("partlog_p50_us".into(), percentile(&p_lat, 0.5) * micros),
            ("partlog_p99_us".into(), percentile(&p_lat, 0.99) * micros),
            ("reference_p50_us".into(), percentile(&r_lat, 0.5) * micros),
            ("reference_p99_us".into(), percentile(&r_lat, 0.99) * micros),
        ];
    }
    drop(log);
    drop(reference);
    fs::remove_dir_all(&partlog_dir).ok();
    fs::remove_dir_all(&commitlog_dir).ok();
    outcome
}

// ---------------------------------------------------------------------------------------------
// Rows 8-9: durable appends.

const DURABLE_APPENDS: usize = 2_000;

/// Counts group-commit syncs and the offsets they covered.
#[derive(Default)]
struct SyncMeter {
    syncs: std::sync::atomic::AtomicU64,
    offsets: std::sync::atomic::AtomicU64,
}

impl partlog::Observer for SyncMeter {
    fn on_event(&self, event: &partlog::LogEvent<'_>) {
        use std::sync::atomic::Ordering::Relaxed;
        if let partlog::LogEvent::Fsync {
            offsets,
            result: Ok(()),
            ..
        } = event
        {
            self.syncs.fetch_add(1, Relaxed);
            self.offsets
                .fetch_add(offsets.end.saturating_sub(offsets.start) as u64, Relaxed);
        }
    }
}

/// `threads` threads append `DURABLE_APPENDS` 100 B records in all, each append durable before
/// it returns (group commit), with `group.commit.max.gather` at `max_gather`. Open, roll and
/// close are timed. Also returns the records each sync covered.
fn partlog_durable_rep(ctx: &Ctx, threads: usize, max_gather: Duration) -> (Rep, f64) {
    let dir = ctx.fresh_dir("partlog");
    let meter = Arc::new(SyncMeter::default());
    let config = LogConfig::builder()
        .segment_bytes(SEGMENT_BYTES)
        .flush_policy(FlushPolicy::EveryAppend)
        .group_commit_max_gather(max_gather)
        .observer(Arc::clone(&meter) as Arc<dyn partlog::Observer>)
        .build()
        .expect("a valid config");
    let started = Instant::now();
    let log = Arc::new(Log::open(&dir, config).expect("open"));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let log = Arc::clone(&log);
            scope.spawn(move || {
                let record = [NewRecord::new(TIMESTAMP, None, Some(&SMALL_VALUE))];
                for _ in 0..DURABLE_APPENDS / threads {
                    log.append(&record).expect("append");
                }
            });
        }
    });
    log.close().expect("close");
    let seconds = started.elapsed().as_secs_f64();
    let records = (DURABLE_APPENDS / threads * threads) as u64;
    let syncs = meter.syncs.load(std::sync::atomic::Ordering::Relaxed);
    let covered = meter.offsets.load(std::sync::atomic::Ordering::Relaxed);
    (
        Rep {
            seconds,
            records,
            user_bytes: records * SMALL_VALUE.len() as u64,
        },
        covered as f64 / syncs.max(1) as f64,
    )
}

fn raw_durable_rep(ctx: &Ctx, chunk: &[u8]) -> Rep {
    let dir = ctx.fresh_dir("reference");
    let started = Instant::now();
    let mut file = File::create_new(dir.join("00000000000000000000.log")).expect("create");
    File::open(&dir)
        .and_then(|dir| dir.sync_all())
        .expect("directory fsync");
    for _ in 0..DURABLE_APPENDS {
        file.write_all(chunk).expect("write");
        file.sync_data().expect("fdatasync");
    }
    drop(file);
    Rep {
        seconds: started.elapsed().as_secs_f64(),
        records: DURABLE_APPENDS as u64,
        user_bytes: (DURABLE_APPENDS * SMALL_VALUE.len()) as u64,
    }
}

fn row_durable_one_thread(ctx: &Ctx) -> Outcome {
    // The same bytes partlog writes per append: one single-record batch.
    let mut builder = BatchBuilder::new(Compression::None);
    builder.push(&NewRecord::new(TIMESTAMP, None, Some(&SMALL_VALUE)));
    let chunk = builder.build().expect("batch");
    let (a, b, ratio, _) = pairs(
        ctx,
        || partlog_durable_rep(ctx, 1, DEFAULT_MAX_GATHER).0,
        || raw_durable_rep(ctx, &chunk),
        Rep::records_per_second,
    );
    throughput_row(
        "durable, 1 thread, fdatasync on every append (100 B)",
        "raw write() + fdatasync of the same bytes",
        a,
        b,
        ratio,
        0.8,
        ">= 0.8",
        "yes",
    )
}

/// `group.commit.max.gather`'s default.
const DEFAULT_MAX_GATHER: Duration = Duration::from_millis(1);

/// The target row (the default config), then the same with gathering off, both against one
/// thread, with the records each sync covered in the notes.
fn row_durable_eight_threads(ctx: &Ctx) -> Outcome {
    let variants = [
        (
            DEFAULT_MAX_GATHER,
            "durable, 8 threads, every append durable (group commit)",
        ),
        (
            Duration::ZERO,
            "durable, 8 threads, group.commit.max.gather 0 (gathering off)",
        ),
    ];
    let mut rows = Vec::new();
    for (max_gather, workload) in variants {
        let mut per_sync = (Vec::new(), Vec::new());
        let (a, b, ratio, _) = pairs(
            ctx,
            || {
                let (rep, records_per_sync) = partlog_durable_rep(ctx, 8, max_gather);
                per_sync.0.push(records_per_sync);
                rep
            },
            || {
                let (rep, records_per_sync) = partlog_durable_rep(ctx, 1, max_gather);
                per_sync.1.push(records_per_sync);
                rep
            },
            Rep::records_per_second,
        );
        if let Outcome::Measured(mut row) = throughput_row(
            workload,
            "partlog, 1 thread",
            a,
            b,
            ratio,
            5.0,
            ">= 5",
            "yes",
        ) {
            row.extra
                .push(("partlog_records_per_sync".into(), median(&mut per_sync.0)));
            row.extra
                .push(("reference_records_per_sync".into(), median(&mut per_sync.1)));
            rows.push(row);
        }
    }
    Outcome::MeasuredMany(rows)
}

// ---------------------------------------------------------------------------------------------
// Row 10: open after a clean shutdown, 1,000 segments.

const OPEN_SEGMENTS: usize = 1_000;

fn row_open(ctx: &Ctx) -> Outcome {
    let dir = ctx.fresh_dir("open");
    let segment_bytes = 4096u32;
    let config = || {
        LogConfig::builder_for_tests()
            .segment_bytes(segment_bytes)
            .max_message_bytes(segment_bytes)
            .build()
            .expect("a valid config")
    };
    {
        let log = Log::open(&dir, config()).expect("open");
        let mut builder = BatchBuilder::new(Compression::None);
        for _ in 0..30 {
            builder.push(&NewRecord::new(TIMESTAMP, None, Some(&SMALL_VALUE)));
        }
        let batch = builder.build().expect("batch");
        // One batch (about 4 KiB) per segment: each append rolls.
        while log.stats().segments < OPEN_SEGMENTS {
            log.append_batch(&batch).expect("append_batch");
        }
        log.close().expect("close");
    }
    let open = || {
        let started = Instant::now();
        let log = Log::open(&dir, config()).expect("open");
        let seconds = started.elapsed().as_secs_f64();
        assert!(log.stats().segments >= OPEN_SEGMENTS);
        // Close is untimed, but it writes the clean-shutdown fields the next open trusts.
        log.close().expect("close");
        Rep {
            seconds,
            records: 1,
            user_bytes: 0,
        }
    };
    let list_and_stat = || {
        let started = Instant::now();
        let mut bytes = 0u64;
        for entry in fs::read_dir(&dir).expect("list") {
            bytes += entry.expect("entry").metadata().expect("stat").len();
        }
        std::hint::black_box(bytes);
        Rep {
            seconds: started.elapsed().as_secs_f64(),
            records: 1,
            user_bytes: 0,
        }
    };
    // Higher is better: the reference's time over partlog's. The target, "at most 3x its time",
    // is then a ratio of at least 1/3.
    let (a, b, ratio, _) = pairs(ctx, open, list_and_stat, |rep| 1.0 / rep.seconds);
    let outcome = Outcome::Measured(Measured {
        workload: "open after clean shutdown, 1,000 segments".into(),
        unit: "ms",
        partlog: a.seconds * 1e3,
        reference: b.seconds * 1e3,
        reference_name: "listing and stat'ing the directory".into(),
        ratio,
        target: 1.0 / 3.0,
        target_text: "<= 3x its time",
        roll_and_close_timed: "-",
        extra: Vec::new(),
    });
    fs::remove_dir_all(&dir).ok();
    outcome
}

// ---------------------------------------------------------------------------------------------
// Row 11: compaction, codec none and lz4.
//
// The log is benches/compaction.rs's: 100-record batches of 1 KiB values (half random, half a
// repeated pattern, so lz4 shrinks them to a bit over half) over 4,096 keys, in segments of an
// eighth of the log, so that each key has hundreds of superseded records. It is built once per
// codec, untimed; each partlog rep copies it into a fresh directory (untimed) and times one
// `Log::compact()`. Compaction's input is the bytes of the segments the pass reads, counting both
// phases (building the key map, then copying the survivors): `CompactionStats::bytes_read`. The
// reference reads the same segments' files with `read()` in 1 MiB chunks, from the page cache
// like the pass, and counts the bytes it read.

/// Bytes of `.log` data in the compaction row's log (benches/README.md: at least 1 GiB), in every
/// mode.
const COMPACTION_LOG_BYTES: u64 = 1 << 30;
/// An eighth of the log, as `benches/compaction.rs` cuts it.
const COMPACTION_SEGMENT_BYTES: u32 = (COMPACTION_LOG_BYTES / 8) as u32;

fn row_compaction(ctx: &Ctx) -> Outcome {
    let mut rows = Vec::new();
    for (name, codec) in [
        ("none", CompressionType::Uncompressed),
        ("lz4", CompressionType::Lz4),
    ] {
        let template = ctx.fresh_dir("compaction-template");
        compaction_log::build(
            &template,
            codec,
            COMPACTION_SEGMENT_BYTES,
            COMPACTION_LOG_BYTES,
        );
        let template_bytes = compaction_log::log_bytes(&template);
        // The files the pass reads: every segment but the active one.
        let mut sealed = compaction_log::log_files(&template);
        sealed.pop();
        let mut passes = Vec::new();
        let compact_rep = || {
            let dir = ctx.fresh_dir("partlog");
            compaction_log::copy_log(&template, &dir);
            let log = Log::open(
                &dir,
                compaction_log::config(codec, COMPACTION_SEGMENT_BYTES),
            )
            .expect("open");
            let started = Instant::now();
            let stats = log.compact().expect("compact");
            let seconds = started.elapsed().as_secs_f64();
            log.close().expect("close");
            drop(log);
            assert!(
                stats.records_removed > 0,
                "the pass removed superseded records"
            );
            passes.push((stats.bytes_read, stats.bytes_written));
            Rep {
                seconds,
                records: stats.bytes_read,
                user_bytes: stats.bytes_read,
            }
        };
        let read_rep = || {
            let started = Instant::now();
            let bytes = compaction_log::read_files(&sealed);
            Rep {
                seconds: started.elapsed().as_secs_f64(),
                records: bytes,
                user_bytes: bytes,
            }
        };
        let (a, b, ratio, _) = pairs(ctx, compact_rep, read_rep, Rep::user_bytes_per_second);
        let (bytes_read, bytes_written) = passes.last().copied().unwrap_or_default();
        fs::remove_dir_all(&template).ok();
        rows.push(Measured {
            workload: format!(
                "compaction, codec {name}, {} keys, {:.2} GiB log",
                compaction_log::KEYS,
                template_bytes as f64 / f64::from(1u32 << 30)
            ),
            unit: "MB/s",
            partlog: a.user_bytes_per_second() / 1e6,
            reference: b.user_bytes_per_second() / 1e6,
            reference_name: "read() of the same segments' files".into(),
            ratio,
            target: 0.1,
            target_text: ">= 0.1",
            roll_and_close_timed: "-",
            extra: vec![
                ("log_bytes".into(), template_bytes as f64),
                ("pass_bytes_read_both_phases".into(), bytes_read as f64),
                ("pass_bytes_written".into(), bytes_written as f64),
            ],
        });
    }
    Outcome::MeasuredMany(rows)
}

// ---------------------------------------------------------------------------------------------
// Output.

fn json_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn json_number(value: f64) -> String {
    if value.is_finite() {
        format!("{value}")
    } else {
        "null".into()
    }
}

fn json_line(row: &Measured) -> String {
    let mut fields = vec![
        format!("\"workload\":{}", json_string(&row.workload)),
        format!("\"unit\":{}", json_string(row.unit)),
        format!("\"partlog\":{}", json_number(row.partlog)),
        format!("\"reference\":{}", json_number(row.reference)),
        format!("\"reference_name\":{}", json_string(&row.reference_name)),
        format!("\"ratio\":{}", json_number(row.ratio)),
        format!("\"target\":{}", json_number(row.target)),
        format!(
            "\"roll_and_close_timed\":{}",
            json_string(row.roll_and_close_timed)
        ),
    ];
    for (name, value) in &row.extra {
        fields.push(format!("{}:{}", json_string(name), json_number(*value)));
    }
    format!("{{{}}}", fields.join(","))
}

fn human(value: f64) -> String {
    if value >= 1e6 {
        format!("{:.2} M", value / 1e6)
    } else if value >= 1e3 {
        format!("{:.1} k", value / 1e3)
    } else {
        format!("{value:.2}")
    }
}

fn notes(row: &Measured) -> String {
    row.extra
        .iter()
        .map(|(name, value)| {
            if name.ends_with("bytes_per_s") {
                format!("{name} {:.0} MB/s", value / 1e6)
            } else {
                format!("{name} {value:.1}")
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Where the run's JSON lines (and the curves' plots) go: `$CARGO_TARGET_DIR`, else the
/// workspace's `target/` (cargo runs a bench in its package's directory, crates/partlog-bench).
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"),
        PathBuf::from,
    )
}

fn main() {
    if std::env::args().any(|arg| arg == "--curves")
        || std::env::var_os("CURVES_RSS_CHILD").is_some()
    {
        return curves::main();
    }
    let quick = std::env::var_os("COMPARE_QUICK").is_some_and(|v| v != "0");
    // COMPARE_ROWS, or the words after `--` (`cargo bench --bench compare -- engine`).
    let words: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with('-'))
        .collect();
    let only: Option<Vec<String>> = std::env::var("COMPARE_ROWS")
        .ok()
        .map(|rows| rows.split(',').map(str::to_string).collect())
        .or((!words.is_empty()).then_some(words));
    let target_dir = target_dir();
    let scratch = tempfile::Builder::new()
        .prefix("partlog-compare-")
        .tempdir_in(std::env::var_os("COMPARE_DIR").map_or_else(std::env::temp_dir, PathBuf::from))
        .expect("a scratch directory");
    let ctx = Ctx {
        pairs: if quick { 3 } else { 7 },
        root: scratch.path().to_path_buf(),
    };
    println!(
        "partlog compare: {} pairs a row (A = partlog, B = reference), scratch in {}",
        ctx.pairs,
        ctx.root.display()
    );
    let started = Instant::now();
    let mut measured = Vec::new();
    let mut lines = Vec::new();
    for (name, row) in ROWS {
        if only
            .as_ref()
            .is_some_and(|only| !only.iter().any(|want| name.contains(want.as_str())))
        {
            continue;
        }
        let row_started = Instant::now();
        let outcome = row(&ctx);
        let took = row_started.elapsed();
        let rows = match outcome {
            Outcome::Measured(row) => vec![row],
            Outcome::MeasuredMany(rows) => rows,
            Outcome::Skipped => Vec::new(),
        };
        for row in rows {
            println!(
                "  {name}: ratio {:.3} (target {}), {:.1} s",
                row.ratio,
                row.target_text,
                took.as_secs_f64()
            );
            lines.push(json_line(&row));
            measured.push(row);
        }
    }
    println!();
    println!(
        "| workload | unit | partlog | reference | reference name | ratio (higher is better) | target | met | roll and close timed | notes |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for row in &measured {
        println!(
            "| {} | {} | {} | {} | {} | {:.3} | {} | {} | {} | {} |",
            row.workload,
            row.unit,
            human(row.partlog),
            human(row.reference),
            row.reference_name,
            row.ratio,
            row.target_text,
            if row.target.is_nan() {
                "-"
            } else if row.ratio >= row.target {
                "yes"
            } else {
                "NO"
            },
            row.roll_and_close_timed,
            notes(row)
        );
    }
    let jsonl = target_dir.join("compare.jsonl");
    fs::create_dir_all(&target_dir).expect("create the target directory");
    let mut file = File::create(&jsonl).expect("create compare.jsonl");
    for line in &lines {
        writeln!(file, "{line}").expect("write compare.jsonl");
    }
    println!(
        "\n{} rows measured in {:.0} s; JSON lines in {}",
        lines.len(),
        started.elapsed().as_secs_f64(),
        jsonl.display()
    );
}
