//! The Kafka 4.4 `UnifiedLog` harness of the bench crate's `compare`
//! (crates/partlog-bench/benches/kafka/), run once, tiny, so that it cannot rot between the
//! quiet-machine runs that use it for real: it compiles against the 4.4 jars, every workload runs
//! and reports what it did, and the partition directory Kafka's own log writes from partlog-built
//! input reads back in partlog record for record.
//!
//! Without Java or Kafka's jars it skips with a message, except under `CI=true`, where it fails.
//! It is partlog's test, not the bench crate's: it finds Java and the jars as every Kafka test
//! here does (tests/common/kafka.rs), and runs in `cargo test` and CI's `tests` stage with them,
//! without compiling criterion.

#[path = "common/kafka.rs"]
mod kafka;

#[path = "../crates/partlog-bench/benches/kafka/harness.rs"]
mod harness;

use std::path::Path;

use harness::{KafkaHarness, Measurement};
use partlog::{BatchBuilder, Compression, Log, LogConfig, NewRecord, ReadBound};

const BATCHES: usize = 120;
const RECORDS_PER_BATCH: usize = 10;
const KEYS: usize = 32;

fn key(i: usize) -> Vec<u8> {
    format!("key-{}", i % KEYS).into_bytes()
}

fn value(i: usize) -> Vec<u8> {
    format!("value {i} {}", "x".repeat(i % 50)).into_bytes()
}

/// The input both sides read: whole v2 batches back to back, as partlog's BatchBuilder builds them.
fn write_input(path: &Path) {
    let mut bytes = Vec::new();
    for batch in 0..BATCHES {
        let mut builder = BatchBuilder::new(Compression::None);
        for r in 0..RECORDS_PER_BATCH {
            let i = batch * RECORDS_PER_BATCH + r;
            builder.push(&NewRecord::new(
                1_700_000_000_000 + i as i64,
                Some(&key(i)),
                Some(&value(i)),
            ));
        }
        bytes.extend_from_slice(&builder.build().expect("a valid batch"));
    }
    std::fs::write(path, bytes).expect("write the input");
}

fn only(measurements: Vec<Measurement>, workload: &str) -> Measurement {
    assert_eq!(
        measurements.len(),
        1,
        "{workload}: one measurement expected, got {measurements:?}"
    );
    let measurement = measurements.into_iter().next().expect("one measurement");
    assert_eq!(measurement.workload, workload);
    assert!(measurement.nanos > 0, "{measurement:?}");
    measurement
}

#[test]
fn kafka_harness_runs_every_workload_and_its_log_reads_back_in_partlog() {
    let Some(tools) = kafka::kafka_tools() else {
        return;
    };
    let scratch = tempfile::tempdir().expect("tempdir");
    let input = scratch.path().join("input.log");
    write_input(&input);
    let mut harness = KafkaHarness::start(
        &tools.java,
        &tools.classpath,
        &scratch.path().join("classes"),
    )
    .unwrap_or_else(|why| panic!("{why}"));
    let dir = scratch.path().join("bench-0");
    let (dir_arg, input_arg) = (dir.display(), input.display());
    let records = (BATCHES * RECORDS_PER_BATCH) as i64;

    for command in [
        format!("append dir={dir_arg} input={input_arg} threads=3 fsync=per_batch"),
        format!("append dir={dir_arg} input={input_arg}"),
    ] {
        let append = only(harness.run(&command).expect("append"), "append");
        assert_eq!(append.items, BATCHES as u64);
        assert_eq!(append.field("log_end_offset").unwrap(), records);
    }

    // The directory Kafka's log just wrote (and closed) from partlog's batches: partlog reads
    // every record back, at the offsets Kafka assigned.
    let log = Log::open_read_only(&dir, LogConfig::default()).expect("partlog opens Kafka's log");
    assert_eq!(log.log_end_offset(), records);
    let read_back: Vec<_> = log
        .records(0, ReadBound::LogEnd)
        .collect::<Result<_, _>>()
        .expect("every record reads");
    assert_eq!(read_back.len(), records as usize);
    for (i, record) in read_back.iter().enumerate() {
        assert_eq!(record.offset, i as i64);
        assert_eq!(record.key.as_deref(), Some(key(i).as_slice()), "offset {i}");
        assert_eq!(
            record.value.as_deref(),
            Some(value(i).as_slice()),
            "offset {i}"
        );
    }
    drop(log);

    let seq = only(
        harness
            .run(&format!(
                "read dir={dir_arg} input={input_arg} mode=seq max_bytes=4096"
            ))
            .expect("sequential read"),
        "read_seq",
    );
    assert_eq!(seq.items, BATCHES as u64, "every batch read once");
    let random = only(
        harness
            .run(&format!(
                "read dir={dir_arg} input={input_arg} mode=random count=200 reuse=true"
            ))
            .expect("random read"),
        "read_random",
    );
    assert_eq!(random.items, 200);
    assert!(random.field("p99_ns").unwrap() >= random.field("p50_ns").unwrap());

    let open = only(
        harness
            .run(&format!("open dir={dir_arg} input={input_arg} segments=12"))
            .expect("open"),
        "open",
    );
    assert_eq!(open.field("segments").unwrap(), 12);
    let recover = only(
        harness
            .run(&format!(
                "recover dir={dir_arg} input={input_arg} flushed=40"
            ))
            .expect("recover"),
        "recover",
    );
    assert_eq!(recover.items, (BATCHES - 40) as u64);
    assert_eq!(recover.field("log_end_offset").unwrap(), records);
    let compact = only(
        harness
            .run(&format!("compact dir={dir_arg} input={input_arg}"))
            .expect("compact"),
        "compact",
    );
    assert!(
        compact.field("bytes_after").unwrap() < compact.bytes as i64,
        "{KEYS} keys over {records} records: the pass shrinks the log ({compact:?})"
    );

    // A bad command is reported, and the harness goes on serving.
    let error = harness
        .run(&format!("append dir={dir_arg}"))
        .expect_err("no input");
    assert!(error.contains("input=FILE is required"), "{error}");
    assert_eq!(
        harness
            .run(&format!("append dir={dir_arg} input={input_arg}"))
            .expect("append after an error")
            .len(),
        1
    );
}
