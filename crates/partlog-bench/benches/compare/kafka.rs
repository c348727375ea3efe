//! The rows against Kafka 4.4's own log (`UnifiedLog`), driven in the same run by the JVM harness
//! of `benches/kafka/` (benches/README.md, "Kafka's log in the same run").
//!
//! Both sides read the same input: batches built once by partlog's `BatchBuilder` and written to
//! a file, which the harness splits and appends as a producer would send them. One JVM serves
//! every row, so pairs run A B A B without JVM starts, and each row runs one untimed warm-up rep
//! of each side first (the JIT's and partlog's caches alike). Sizes scale with
//! `COMPARE_KAFKA_MB` (MiB of log for the read, recovery and compaction rows; default 1024).
//!
//! Without Java or Kafka's jars every row is skipped with a message.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use partlog::{
    BatchBuilder, Compression, CompressionType, FetchData, FlushPolicy, Log, LogConfig, NewRecord,
    ReadBound,
};

use super::harness::KafkaHarness;
use super::producer_state::{copy_log, recovery_config};
use super::{
    Ctx, Measured, Outcome, READ_CHUNK, Rep, SEGMENT_BYTES, SMALL_VALUE, TIMESTAMP, compaction_log,
    median, one_kib_batch, pairs, percentile, random_offsets, throughput_row, write_rep_batches,
};

const REFERENCE: &str = "Kafka 4.4 UnifiedLog";
/// 1-record batches in the small-append and random-read rows.
const SMALL_BATCHES: usize = 200_000;
/// Appends in the durable rows.
const DURABLE_BATCHES: usize = 2_000;
/// Random reads per rep.
const RANDOM_READS: usize = 100_000;
/// Segments in the open row.
const OPEN_SEGMENTS: usize = 1_000;

/// MiB of log for the read, recovery and compaction rows.
fn log_mib() -> u64 {
    std::env::var("COMPARE_KAFKA_MB")
        .ok()
        .map(|mib| mib.parse().expect("COMPARE_KAFKA_MB: MiB"))
        .unwrap_or(1024)
}

/// The one harness JVM of the run, started by the first Kafka row; `Err` says why there is none.
fn harness() -> &'static Mutex<Result<KafkaHarness, String>> {
    static HARNESS: std::sync::OnceLock<Mutex<Result<KafkaHarness, String>>> =
        std::sync::OnceLock::new();
    HARNESS.get_or_init(|| Mutex::new(start_harness()))
}

fn start_harness() -> Result<KafkaHarness, String> {
    let (java, classpath) = java_and_classpath()?;
    let classes =
        std::env::temp_dir().join(format!("partlog-kafka-harness-{}", std::process::id()));
    KafkaHarness::start(&java, &classpath, &classes)
}

/// The `java` to run (`$PARTLOG_JAVA`, else `java`) and Kafka 4.4's jars
/// (`$PARTLOG_KAFKA_CLASSPATH`, else the file `.ci/kafka-classpath.sh` writes), or why not.
pub(super) fn java_and_classpath() -> Result<(PathBuf, String), String> {
    let java = std::env::var_os("PARTLOG_JAVA")
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from("java"), PathBuf::from);
    let classpath = match std::env::var("PARTLOG_KAFKA_CLASSPATH") {
        Ok(classpath) if !classpath.is_empty() => classpath,
        _ => {
            let cache = std::env::var_os("PARTLOG_CACHE").map_or_else(
                || {
                    PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                        .join(".cache/partlog")
                },
                PathBuf::from,
            );
            let file = cache.join("kafka-classpath.txt");
            fs::read_to_string(&file)
                .map_err(|e| {
                    format!(
                        "no Kafka classpath at {} ({e}); run .ci/kafka-classpath.sh",
                        file.display()
                    )
                })?
                .trim()
                .to_owned()
        }
    };
    Ok((java, classpath))
}

/// Runs one harness command and returns its single measurement as a [`Rep`], or why not.
fn kafka_rep(
    command: &str,
    records: u64,
    user_bytes: u64,
) -> Result<(Rep, super::harness::Measurement), String> {
    let mut guard = harness().lock().expect("the harness lock");
    let harness = guard.as_mut().map_err(|why| why.clone())?;
    let measurement = harness
        .run(command)?
        .pop()
        .ok_or_else(|| format!("`{command}` printed no measurement"))?;
    Ok((
        Rep {
            seconds: measurement.nanos as f64 / 1e9,
            records,
            user_bytes,
        },
        measurement,
    ))
}

fn skipped(row: &str, why: &str) -> Outcome {
    println!("  {row}: skipped, Kafka's log is not available here: {why}");
    Outcome::Skipped
}

/// Writes `batches` back to back into `path`: the input both sides read.
fn write_input(path: &Path, batches: &[Vec<u8>]) {
    fs::write(path, batches.concat()).expect("write the harness input");
}

fn small_batch() -> Vec<u8> {
    let mut builder = BatchBuilder::new(Compression::None);
    builder.push(&NewRecord::new(TIMESTAMP, None, Some(&SMALL_VALUE)));
    builder.build().expect("a valid batch")
}

fn kafka_config() -> LogConfig {
    LogConfig::builder()
        .segment_bytes(SEGMENT_BYTES)
        .flush_policy(FlushPolicy::OsDecides)
        .build()
        .expect("a valid config")
}

/// An append row: the same batches appended by partlog (`append_batch`) and by Kafka
/// (`appendAsLeader`), at the guarantee `fsync` says, from `threads` threads.
#[allow(
    clippy::too_many_arguments,
    reason = "one call site per append row; a struct would only rename the arguments"
)]
fn append_row(
    ctx: &Ctx,
    row: &str,
    workload: &str,
    batches: Vec<Vec<u8>>,
    records_per_batch: u64,
    durable: bool,
    threads: usize,
    target: f64,
    target_text: &'static str,
) -> Outcome {
    let input = ctx.root.join(format!("{row}.input"));
    write_input(&input, &batches);
    let records = batches.len() as u64 * records_per_batch;
    let user_bytes = records * if records_per_batch == 1 { 100 } else { 1024 };
    let kafka_dir = ctx.root.join("kafka-0");
    let command = format!(
        "append dir={} input={} segment_bytes={SEGMENT_BYTES} fsync={} threads={threads}",
        kafka_dir.display(),
        input.display(),
        if durable { "per_batch" } else { "none" }
    );
    let partlog = || {
        let dir = ctx.fresh_dir("partlog");
        let config = LogConfig::builder()
            .segment_bytes(SEGMENT_BYTES)
            .flush_policy(if durable {
                FlushPolicy::EveryAppend
            } else {
                FlushPolicy::OsDecides
            })
            .build()
            .expect("a valid config");
        let log = Arc::new(Log::open(&dir, config).expect("open"));
        let started = Instant::now();
        std::thread::scope(|scope| {
            for first in 0..threads {
                let (log, batches) = (Arc::clone(&log), &batches);
                scope.spawn(move || {
                    for batch in batches.iter().skip(first).step_by(threads) {
                        log.append_batch(batch).expect("append_batch");
                    }
                });
            }
        });
        let seconds = started.elapsed().as_secs_f64();
        drop(log);
        Rep {
            seconds,
            records,
            user_bytes,
        }
    };
    if let Err(why) = kafka_rep(&command, records, user_bytes) {
        return skipped(row, &why);
    }
    partlog();
    let (a, b, ratio, _) = pairs(
        ctx,
        partlog,
        || {
            kafka_rep(&command, records, user_bytes)
                .expect("the harness")
                .0
        },
        Rep::records_per_second,
    );
    fs::remove_file(&input).ok();
    throughput_row(
        workload,
        REFERENCE,
        a,
        b,
        ratio,
        target,
        target_text,
        if durable { "yes" } else { "no" },
    )
}

pub(super) fn row_append_batch(ctx: &Ctx) -> Outcome {
    let batch = one_kib_batch();
    append_row(
        ctx,
        "kafka_append_batch",
        "Kafka: append pre-built 100 x 1 KiB batches, page cache",
        vec![batch; write_rep_batches()],
        100,
        false,
        1,
        1.5,
        ">= 1.5",
    )
}

pub(super) fn row_append_small(ctx: &Ctx) -> Outcome {
    append_row(
        ctx,
        "kafka_append_small",
        "Kafka: append 1-record 100 B batches, page cache",
        vec![small_batch(); SMALL_BATCHES],
        1,
        false,
        1,
        2.0,
        ">= 2",
    )
}

pub(super) fn row_append_fsync(ctx: &Ctx) -> Outcome {
    append_row(
        ctx,
        "kafka_append_fsync",
        "Kafka: append + fsync per 100 B batch, 1 writer",
        vec![small_batch(); DURABLE_BATCHES],
        1,
        true,
        1,
        1.0,
        ">= 1.0",
    )
}

pub(super) fn row_durable_8_writers(ctx: &Ctx) -> Outcome {
    append_row(
        ctx,
        "kafka_durable_8_writers",
        "Kafka: durable 100 B appends, 8 writers (Kafka: flush after each append under one lock)",
        vec![small_batch(); DURABLE_BATCHES],
        1,
        true,
        8,
        2.0,
        ">= 2",
    )
}

/// Builds a partlog log of `batches` in `dir` (closed), and returns its bytes.
fn build_partlog_log(dir: &Path, batches: &[Vec<u8>]) -> u64 {
    let log = Log::open(dir, kafka_config()).expect("open");
    let mut bytes = 0u64;
    for batch in batches {
        bytes += log.append_batch(batch).expect("append_batch").bytes as u64;
    }
    log.close().expect("close");
    bytes
}

pub(super) fn row_read_sequential(ctx: &Ctx) -> Outcome {
    let row = "kafka_read_sequential";
    let count = (log_mib() << 20) as usize / one_kib_batch().len();
    let batches = vec![one_kib_batch(); count];
    let input = ctx.root.join("kafka-read.input");
    write_input(&input, &batches);
    let kafka_dir = ctx.root.join("kafka-read-0");
    let (dir_arg, input_arg) = (kafka_dir.display(), input.display());
    let records = count as u64 * 100;
    // The first command builds Kafka's log; the timed ones reuse it.
    if let Err(why) = kafka_rep(
        &format!("read dir={dir_arg} input={input_arg} mode=seq max_bytes={READ_CHUNK}"),
        records,
        0,
    ) {
        return skipped(row, &why);
    }
    let dir = ctx.fresh_dir("partlog-read");
    let total = build_partlog_log(&dir, &batches);
    let log = Log::open(&dir, kafka_config()).expect("reopen");
    let mut fetch = FetchData::new();
    let mut partlog = || {
        let started = Instant::now();
        let (mut offset, mut read) = (0i64, 0u64);
        loop {
            log.read_into(offset, READ_CHUNK, ReadBound::LogEnd, &mut fetch)
                .expect("read");
            if fetch.is_empty() {
                break;
            }
            for batch in fetch.batches() {
                batch.expect("batch");
            }
            read += fetch.bytes().len() as u64;
            offset = fetch.next_offset();
        }
        assert_eq!(read, total, "partlog read the whole log");
        Rep {
            seconds: started.elapsed().as_secs_f64(),
            records,
            user_bytes: read,
        }
    };
    partlog();
    let command =
        format!("read dir={dir_arg} input={input_arg} mode=seq max_bytes={READ_CHUNK} reuse=true");
    let (a, b, ratio, _) = pairs(
        ctx,
        partlog,
        || kafka_rep(&command, records, total).expect("the harness").0,
        Rep::records_per_second,
    );
    drop(log);
    // The ceiling of any read that copies the bytes out of the page cache: plain 1 MiB
    // `read`s of partlog's own `.log` files, without and with the CRC-32C partlog checks.
    let raw_read = |crc: bool| {
        median_of(3, || {
            let seconds = read_log_files(&dir, crc);
            records as f64 / seconds
        })
    };
    let (raw, raw_crc) = (raw_read(false), raw_read(true));
    fs::remove_file(&input).ok();
    fs::remove_dir_all(&kafka_dir).ok();
    let mut outcome = throughput_row(
        &format!(
            "Kafka: sequential read of {} MiB from offset 0 (1 MiB fetches, batches walked)",
            log_mib()
        ),
        REFERENCE,
        a,
        b,
        ratio,
        1.5,
        ">= 1.5",
        "-",
    );
    if let Outcome::Measured(measured) = &mut outcome {
        measured.extra.push(("raw_read_records_per_s".into(), raw));
        measured
            .extra
            .push(("raw_read_crc32c_records_per_s".into(), raw_crc));
    }
    outcome
}

/// Reads every `.log` file of `dir` through with 1 MiB `read`s, CRC-32C over the bytes when
/// `crc` is set; returns the seconds it took.
fn read_log_files(dir: &Path, crc: bool) -> f64 {
    use std::io::Read;
    let paths = compaction_log::log_files(dir);
    let mut chunk = vec![0u8; READ_CHUNK];
    let started = Instant::now();
    let mut sum = 0u32;
    for path in &paths {
        let mut file = fs::File::open(path).expect("open");
        loop {
            let n = file.read(&mut chunk).expect("read");
            if n == 0 {
                break;
            }
            if crc {
                sum = crc32c::crc32c_append(sum, &chunk[..n]);
            }
        }
    }
    std::hint::black_box(sum);
    started.elapsed().as_secs_f64()
}

/// The median of `runs` measurements.
fn median_of(runs: usize, mut measure: impl FnMut() -> f64) -> f64 {
    let mut values: Vec<f64> = (0..runs).map(|_| measure()).collect();
    median(&mut values)
}

pub(super) fn row_read_random(ctx: &Ctx) -> Outcome {
    let row = "kafka_read_random";
    let batches = vec![small_batch(); SMALL_BATCHES];
    let input = ctx.root.join("kafka-random.input");
    write_input(&input, &batches);
    let kafka_dir = ctx.root.join("kafka-random-0");
    let (dir_arg, input_arg) = (kafka_dir.display(), input.display());
    if let Err(why) = kafka_rep(
        &format!("read dir={dir_arg} input={input_arg} mode=random count=1000"),
        1000,
        0,
    ) {
        return skipped(row, &why);
    }
    let dir = ctx.fresh_dir("partlog-random");
    build_partlog_log(&dir, &batches);
    let log = Log::open(&dir, kafka_config()).expect("reopen");
    let mut seed = 0u64;
    let mut partlog_p99 = Vec::new();
    let mut partlog = || {
        seed += 1;
        let offsets = random_offsets(RANDOM_READS, SMALL_BATCHES as u64, seed);
        let mut fetch = FetchData::new();
        let mut latencies = Vec::with_capacity(RANDOM_READS);
        let started = Instant::now();
        for &offset in &offsets {
            let began = Instant::now();
            log.read_into(offset as i64, 1, ReadBound::LogEnd, &mut fetch)
                .expect("read");
            assert!(!fetch.is_empty());
            latencies.push(began.elapsed().as_secs_f64() * 1e9);
        }
        let seconds = started.elapsed().as_secs_f64();
        latencies.sort_by(f64::total_cmp);
        partlog_p99.push((percentile(&latencies, 0.5), percentile(&latencies, 0.99)));
        Rep {
            seconds,
            records: RANDOM_READS as u64,
            user_bytes: 0,
        }
    };
    partlog();
    let mut kafka_p99 = Vec::new();
    let mut kafka_seed = 0u64;
    let (a, b, ratio, _) = pairs(
        ctx,
        partlog,
        || {
            kafka_seed += 1;
            let command = format!(
                "read dir={dir_arg} input={input_arg} mode=random count={RANDOM_READS} seed={kafka_seed} reuse=true"
            );
            let (rep, measurement) =
                kafka_rep(&command, RANDOM_READS as u64, 0).expect("the harness");
            kafka_p99.push((
                measurement.field("p50_ns").expect("p50") as f64,
                measurement.field("p99_ns").expect("p99") as f64,
            ));
            rep
        },
        Rep::records_per_second,
    );
    drop(log);
    fs::remove_file(&input).ok();
    fs::remove_dir_all(&kafka_dir).ok();
    let mid = |v: &mut Vec<(f64, f64)>, pick: fn(&(f64, f64)) -> f64| {
        let mut values: Vec<f64> = v.iter().map(pick).collect();
        median(&mut values)
    };
    let mut row = throughput_row(
        "Kafka: random read of one 1-record batch, 200,000-batch log",
        REFERENCE,
        a,
        b,
        ratio,
        2.0,
        ">= 2",
        "-",
    );
    if let Outcome::Measured(measured) = &mut row {
        measured.unit = "reads/s";
        measured.extra = vec![
            ("partlog_p50_ns".into(), mid(&mut partlog_p99, |p| p.0)),
            ("partlog_p99_ns".into(), mid(&mut partlog_p99, |p| p.1)),
            ("kafka_p50_ns".into(), mid(&mut kafka_p99, |p| p.0)),
            ("kafka_p99_ns".into(), mid(&mut kafka_p99, |p| p.1)),
        ];
    }
    row
}

pub(super) fn row_open(ctx: &Ctx) -> Outcome {
    let row = "kafka_open_1000_segments";
    let batches = vec![small_batch(); OPEN_SEGMENTS * 10];
    let input = ctx.root.join("kafka-open.input");
    write_input(&input, &batches);
    let command = format!(
        "open dir={} input={} segments={OPEN_SEGMENTS}",
        ctx.root.join("kafka-open-0").display(),
        input.display()
    );
    if let Err(why) = kafka_rep(&command, 1, 0) {
        return skipped(row, &why);
    }
    let dir = ctx.fresh_dir("partlog-open");
    {
        let log = Log::open(&dir, kafka_config()).expect("open");
        for (i, batch) in batches.iter().enumerate() {
            if i > 0 && i % 10 == 0 {
                log.roll().expect("roll");
            }
            log.append_batch(batch).expect("append_batch");
        }
        assert_eq!(log.stats().segments, OPEN_SEGMENTS);
        log.close().expect("close");
    }
    let partlog = || {
        let started = Instant::now();
        let log = Log::open(&dir, kafka_config()).expect("open");
        let seconds = started.elapsed().as_secs_f64();
        assert_eq!(log.stats().segments, OPEN_SEGMENTS);
        log.close().expect("close");
        Rep {
            seconds,
            records: 1,
            user_bytes: 0,
        }
    };
    let row = time_ratio_row(
        ctx,
        "Kafka: open after clean shutdown, 1,000 segments".into(),
        partlog,
        || kafka_rep(&command, 1, 0).expect("the harness").0,
        (3.0, ">= 3 (time ratio inverted)"),
        Vec::new(),
    );
    fs::remove_file(&input).ok();
    row
}

pub(super) fn row_recovery(ctx: &Ctx) -> Outcome {
    let row = "kafka_recovery";
    let count = (log_mib() << 20) as usize / one_kib_batch().len();
    let batches = vec![one_kib_batch(); count];
    let input = ctx.root.join("kafka-recovery.input");
    write_input(&input, &batches);
    // Kafka's crashed tail: built once by the harness (which then recovers it from the page
    // cache, untimed here: the warm-up, reported as an extra figure). Each timed rep copies it,
    // syncs the copy and drops its pages, so that Kafka's recovery reads the disk, as partlog's
    // does (it drops the cached pages above its recovery point, which a failed writeback of an
    // earlier process could have left clean but unwritten).
    let template = ctx.root.join("kafka-recovery-0");
    let warm_up = format!(
        "recover dir={} input={} flushed=0",
        template.display(),
        input.display()
    );
    let kafka_page_cache_ms = match kafka_rep(&warm_up, 1, 0) {
        Ok((rep, _)) => rep.seconds * 1e3,
        Err(why) => return skipped(row, &why),
    };
    let records = count as i64 * 100;
    let kafka = || {
        let run = ctx.fresh_dir("kafka-recovery-run-0");
        copy_log(&template, &run);
        drop_cached_pages(&run);
        let command = format!("recover dir={} reuse=true recovery_point=0", run.display());
        let (rep, measurement) = kafka_rep(&command, 1, 0).expect("the harness");
        assert_eq!(measurement.field("log_end_offset"), Ok(records));
        rep
    };
    // partlog's crashed tail: the files copied before the log closed, so no clean-shutdown
    // record; every batch is past the recovery point.
    let crashed = ctx.fresh_dir("partlog-crashed");
    {
        let scratch = ctx.fresh_dir("partlog-tail");
        let log = Log::open(&scratch, recovery_config()).expect("open");
        for batch in &batches {
            log.append_batch(batch).expect("append_batch");
        }
        copy_log(&scratch, &crashed);
        log.close().expect("close");
    }
    let partlog = || {
        let run = ctx.fresh_dir("partlog-recovery");
        copy_log(&crashed, &run);
        let started = Instant::now();
        let log = Log::open(&run, recovery_config()).expect("open");
        let seconds = started.elapsed().as_secs_f64();
        assert!(!log.recovery_report().clean_shutdown, "an unclean open");
        assert_eq!(log.log_end_offset(), records);
        log.close().expect("close");
        Rep {
            seconds,
            records: 1,
            user_bytes: 0,
        }
    };
    // The floor of any recovery that reads the tail from the disk: the crashed copy's `.log`
    // files read through once, from a dropped cache, with plain 1 MiB `read`s.
    let mut disk_read = || {
        let run = ctx.fresh_dir("partlog-disk-read");
        copy_log(&crashed, &run);
        drop_cached_pages(&run);
        read_log_files(&run, false) * 1e3
    };
    let row = time_ratio_row(
        ctx,
        format!(
            "Kafka: recovery of a {} MiB unflushed tail, read from the disk",
            log_mib()
        ),
        partlog,
        kafka,
        (1.5, ">= 1.5 (time ratio inverted)"),
        vec![("kafka_from_page_cache_ms".into(), kafka_page_cache_ms)],
    );
    let disk_read_ms = median_of(3, &mut disk_read);
    let row = match row {
        Outcome::Measured(mut measured) => {
            measured
                .extra
                .push(("disk_read_of_the_tail_ms".into(), disk_read_ms));
            Outcome::Measured(measured)
        }
        other => other,
    };
    fs::remove_file(&input).ok();
    fs::remove_dir_all(&template).ok();
    row
}

/// Drops the cached pages of every file in `dir` (they are clean: `copy_files` synced them).
fn drop_cached_pages(dir: &Path) {
    use std::os::fd::AsRawFd;
    for entry in fs::read_dir(dir).expect("read_dir") {
        let file = fs::File::open(entry.expect("entry").path()).expect("open");
        // SAFETY: posix_fadvise only reads its arguments; the descriptor is open for the call.
        let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        assert_eq!(rc, 0, "posix_fadvise(DONTNEED)");
    }
}

pub(super) fn row_compaction(ctx: &Ctx) -> Outcome {
    let row = "kafka_compaction";
    let bytes = log_mib() << 20;
    let segment_bytes = (bytes / 8) as u32;
    let template = ctx.fresh_dir("kafka-compaction-template");
    compaction_log::build(
        &template,
        CompressionType::Uncompressed,
        segment_bytes,
        bytes,
    );
    let input = ctx.root.join("kafka-compaction.input");
    let mut all = Vec::new();
    for file in compaction_log::log_files(&template) {
        all.extend_from_slice(&fs::read(file).expect("read a segment"));
    }
    fs::write(&input, &all).expect("write the input");
    drop(all);
    let command = format!(
        "compact dir={} input={} segment_bytes={segment_bytes}",
        ctx.root.join("kafka-compaction-0").display(),
        input.display()
    );
    if let Err(why) = kafka_rep(&command, 1, 0) {
        return skipped(row, &why);
    }
    let partlog = || {
        let dir = ctx.fresh_dir("partlog-compaction");
        compaction_log::copy_log(&template, &dir);
        let log = Log::open(
            &dir,
            compaction_log::config(CompressionType::Uncompressed, segment_bytes),
        )
        .expect("open");
        // Kafka's pass cleans up to the active segment, which the harness rolls first; so does
        // this one, so that both clean the whole log.
        log.roll().expect("roll");
        let started = Instant::now();
        let stats = log.compact().expect("compact");
        let seconds = started.elapsed().as_secs_f64();
        log.close().expect("close");
        assert!(stats.records_removed > 0);
        Rep {
            seconds,
            records: stats.bytes_read,
            user_bytes: stats.bytes_read,
        }
    };
    let row = time_ratio_row(
        ctx,
        format!(
            "Kafka: compaction of a {} MiB log, {} keys",
            log_mib(),
            compaction_log::KEYS
        ),
        partlog,
        || kafka_rep(&command, 1, 0).expect("the harness").0,
        (1.0, ">= 1.0 (time ratio inverted)"),
        Vec::new(),
    );
    fs::remove_file(&input).ok();
    row
}

/// A row scored by time (the ratio inverted, so higher is better): one untimed warm-up rep of
/// partlog (Kafka's ran when the row checked the harness), then the pairs.
fn time_ratio_row(
    ctx: &Ctx,
    workload: String,
    mut partlog: impl FnMut() -> Rep,
    kafka: impl FnMut() -> Rep,
    (target, target_text): (f64, &'static str),
    extra: Vec<(String, f64)>,
) -> Outcome {
    partlog();
    let (a, b, ratio, _) = pairs(ctx, partlog, kafka, |rep| 1.0 / rep.seconds);
    Outcome::Measured(Measured {
        workload,
        unit: "ms",
        partlog: a.seconds * 1e3,
        reference: b.seconds * 1e3,
        reference_name: REFERENCE.into(),
        ratio,
        target,
        target_text,
        roll_and_close_timed: "-",
        extra,
    })
}
