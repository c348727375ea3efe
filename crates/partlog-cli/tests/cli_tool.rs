//! The `partlog` commands, end to end through the binary: `consume` (from an offset,
//! a timestamp or the end; text and JSON; `--follow` tailing a `partlog produce` in another
//! process, with and without `--durable-only`), `dump --records --index` and its index check,
//! `verify --repair` (a torn tail, a bad index, and corruption it refuses to cut without
//! `--truncate-at-corruption`), `stats`, `perf-produce` / `perf-consume` (small runs),
//! `delete-records` and `retention`.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn partlog() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_partlog"));
    command.env("RUST_BACKTRACE", "1");
    command
}

fn run(command: &mut Command) -> Output {
    command.stdin(Stdio::null()).output().expect("run partlog")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn ok(output: Output) -> String {
    assert!(
        output.status.success(),
        "exit {:?}: {}{}",
        output.status.code(),
        text(&output.stdout),
        text(&output.stderr)
    );
    text(&output.stdout)
}

/// `lines` into a new log at `dir` through `partlog produce`, keys split at '=', in small
/// segments (about 1 KiB each).
fn produce(dir: &Path, lines: &str) {
    produce_in_segments_of(dir, lines, 1024);
}

/// One record per batch (`--batch 1`), as these tests count batches and segments.
fn produce_in_segments_of(dir: &Path, lines: &str, segment_bytes: u32) {
    let mut child = partlog()
        .arg("produce")
        .arg(dir)
        .args(["--key-separator", "=", "--batch", "1"])
        .args(["--segment-bytes", &segment_bytes.to_string()])
        .arg("--allow-small-segments")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(lines.as_bytes())
        .unwrap();
    ok(child.wait_with_output().unwrap());
}

fn numbered(n: usize) -> String {
    (0..n)
        .map(|i| format!("key{}=value-{i}\n", i % 7))
        .collect()
}

fn segment_logs(dir: &Path) -> Vec<PathBuf> {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    logs
}

#[test]
fn consume_from_an_offset_a_timestamp_or_the_end() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("t-0");
    produce(&dir, &numbered(100));
    let all = ok(run(partlog().arg("consume").arg(&dir)));
    let expected: String = (0..100).map(|i| format!("value-{i}\n")).collect();
    assert_eq!(all, expected);
    let keyed = ok(run(partlog().arg("consume").arg(&dir).args([
        "--offset",
        "98",
        "--key-separator",
        ":",
    ])));
    assert_eq!(keyed, "key0:value-98\nkey1:value-99\n");
    let json = ok(run(partlog()
        .arg("consume")
        .arg(&dir)
        .args(["--offset", "40", "--count", "1", "--format", "json"])));
    assert!(
        json.starts_with("{\"offset\":40,\"timestamp\":")
            && json.ends_with(",\"key\":\"key5\",\"value\":\"value-40\",\"headers\":[]}\n"),
        "{json}"
    );
    // By timestamp: everything was produced after 0, nothing after the far future.
    let from_zero = ok(run(partlog().arg("consume").arg(&dir).args([
        "--timestamp",
        "0",
        "--count",
        "2",
    ])));
    assert_eq!(from_zero, "value-0\nvalue-1\n");
    let future = ok(run(partlog()
        .arg("consume")
        .arg(&dir)
        .args(["--timestamp", "99999999999999"])));
    assert_eq!(future, "");
    assert_eq!(ok(run(partlog().arg("consume").arg(&dir).arg("--end"))), "");
    // kcat's -o -N: N records before the end, never before the start.
    let last_two = ok(run(partlog()
        .arg("consume")
        .arg(&dir)
        .args(["--offset", "-2"])));
    assert_eq!(last_two, "value-98\nvalue-99\n");
    let all_again = ok(run(partlog()
        .arg("consume")
        .arg(&dir)
        .args(["--offset", "-1000"])));
    assert_eq!(all_again, expected);
    // Out of range, and two starting points at once: one line, exit 2.
    let output = run(partlog().arg("consume").arg(&dir).args(["--offset", "101"]));
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("out of range"));
    let output = run(partlog()
        .arg("consume")
        .arg(&dir)
        .args(["--end", "--offset", "1"]));
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(text(&output.stderr).lines().count(), 1);
}

/// `consume --follow` in one process tails `produce` in another: every line fed to the producer
/// comes out of the consumer, in order, and the consumer stops after `--count`.
fn follow(durable_only: bool) {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("t-0");
    let mut producer = partlog()
        .arg("produce")
        .arg(&dir)
        .args(["--flush", "always", "--print-offsets"])
        .args(["--segment-bytes", "1024", "--allow-small-segments"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut feed = producer.stdin.take().unwrap();
    let mut acks = BufReader::new(producer.stdout.take().unwrap()).lines();
    writeln!(feed, "first").unwrap();
    feed.flush().unwrap();
    assert_eq!(acks.next().unwrap().unwrap(), "0");
    const LINES: usize = 200;
    let mut consumer = partlog()
        .arg("consume")
        .arg(&dir)
        .args(["--follow", "--poll-ms", "5", "--count", &LINES.to_string()])
        .args(durable_only.then_some("--durable-only"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    for n in 1..LINES {
        writeln!(feed, "line-{n}").unwrap();
        feed.flush().unwrap();
        assert_eq!(acks.next().unwrap().unwrap(), n.to_string());
    }
    let mut out = String::new();
    consumer
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let status = consumer.wait().unwrap();
    assert!(status.success());
    let expected: String = std::iter::once("first\n".to_owned())
        .chain((1..LINES).map(|n| format!("line-{n}\n")))
        .collect();
    assert_eq!(out, expected);
    drop(feed);
    assert!(producer.wait().unwrap().success());
}

#[test]
fn consume_follow_tails_a_producer_in_another_process() {
    follow(false);
}

#[test]
fn consume_follow_durable_only_tails_what_the_writer_made_durable() {
    follow(true);
}

#[test]
fn dump_records_and_a_checked_index() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("t-0");
    // Batches of ~370 bytes in 16 KiB segments: an index entry every 4096 bytes (Kafka's
    // index.interval.bytes), a few per segment.
    let lines: String = (0..60)
        .map(|i| format!("k{i}={}\n", "v".repeat(300)))
        .collect();
    produce_in_segments_of(&dir, &lines, 16384);
    let batches = ok(run(partlog().arg("dump").arg(&dir)));
    assert!(batches.contains("baseOffset: 0 lastOffset: 0 count: 1"));
    assert!(!batches.contains("| offset:"), "records without --records");
    let records = ok(run(partlog().arg("dump").arg(&dir).arg("--records")));
    assert_eq!(
        records
            .lines()
            .filter(|l| l.starts_with("| offset: "))
            .count(),
        60
    );
    let index = ok(run(partlog().arg("dump").arg(&dir).arg("--index")));
    assert!(index.contains(".index\noffset: "), "{index}");
    assert!(index.contains("timestamp: "), "{index}");
    assert!(index.contains(" 0 mismatches"), "{index}");

    // A sealed segment's first offset-index entry pointed one byte off: the check names it.
    let logs = segment_logs(&dir);
    let sealed = logs.iter().find(|log| {
        std::fs::metadata(log.with_extension("index"))
            .unwrap()
            .len()
            >= 8
    });
    let sealed = sealed.expect("no sealed segment with an index entry");
    let index_path = sealed.with_extension("index");
    let mut bytes = std::fs::read(&index_path).unwrap();
    bytes[7] ^= 1;
    std::fs::write(&index_path, &bytes).unwrap();
    let output = run(partlog().arg("dump").arg(&dir).arg("--index"));
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stdout));
    let printed = text(&output.stdout);
    assert!(printed.contains("Mismatches in :"), "{printed}");
    assert!(printed.contains(" 1 mismatches"), "{printed}");

    // verify agrees, and --repair rebuilds the index.
    let output = run(partlog().arg("verify").arg(&dir));
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stdout));
    let repaired = ok(run(partlog().arg("verify").arg(&dir).arg("--repair")));
    assert!(repaired.contains("will be rebuilt"), "{repaired}");
    assert!(repaired.contains("after the repair:"), "{repaired}");
    assert_eq!(std::fs::read(&index_path).unwrap().len(), bytes.len());
    assert_ne!(
        std::fs::read(&index_path).unwrap(),
        bytes,
        "the index was not rebuilt"
    );
    assert!(ok(run(partlog().arg("dump").arg(&dir).arg("--index"))).contains(" 0 mismatches"));
}

#[test]
fn verify_repair_truncates_a_torn_tail_and_refuses_to_cut_corruption() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("t-0");
    produce(&dir, &numbered(30));
    let active = segment_logs(&dir).pop().unwrap();
    let mut bytes = std::fs::read(&active).unwrap();
    let clean_len = bytes.len();
    // Half a batch header: what a crash mid-append leaves.
    bytes.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 30, 0, 0, 0, 90, 0, 0]);
    std::fs::write(&active, &bytes).unwrap();
    let repaired = ok(run(partlog().arg("verify").arg(&dir).arg("--repair")));
    assert!(
        repaired.contains("repair: truncated 14 bytes at the end of the log"),
        "{repaired}"
    );
    assert_eq!(
        std::fs::metadata(&active).unwrap().len() as usize,
        clean_len
    );
    assert_eq!(
        ok(run(partlog().arg("consume").arg(&dir))).lines().count(),
        30
    );

    // A flipped byte inside the first segment's first record: corruption, not a torn tail.
    let first = segment_logs(&dir).remove(0);
    let mut bytes = std::fs::read(&first).unwrap();
    bytes[70] ^= 0x55;
    std::fs::write(&first, &bytes).unwrap();
    let output = run(partlog().arg("verify").arg(&dir).arg("--repair"));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stdout));
    let stderr = text(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--truncate-at-corruption"), "{stderr}");
    assert!(
        !stderr.contains("  "),
        "a run of spaces in the message: {stderr:?}"
    );
    assert_eq!(
        std::fs::read(&first).unwrap(),
        bytes,
        "a refused repair wrote"
    );
}

#[test]
fn stats_perf_delete_records_and_retention() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("t-0");
    produce(&dir, &numbered(100));
    let segments = segment_logs(&dir).len();
    assert!(segments > 3);
    let stats = ok(run(partlog()
        .arg("stats")
        .arg(&dir)
        .args(["--json", "--superseded"])));
    assert!(stats.contains("\"log_start_offset\":0,\"log_end_offset\":100,\"durable_offset\":100"));
    // Seven keys: all but the last record of each are superseded.
    assert!(
        stats.contains("\"records\":100,\"superseded_records\":93"),
        "{stats}"
    );
    let human = ok(run(partlog().arg("stats").arg(&dir)));
    assert!(human.contains(&format!("{segments} segments")), "{human}");

    let output = run(partlog()
        .arg("delete-records")
        .arg(&dir)
        .args(["--before", "101"]));
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("above the log end offset 100"));
    let deleted = ok(run(partlog()
        .arg("delete-records")
        .arg(&dir)
        .args(["--before", "50"])));
    assert!(deleted.contains("log start offset: 0 -> 50"), "{deleted}");
    assert!(
        deleted.contains("(below the log start offset)"),
        "{deleted}"
    );
    assert!(segment_logs(&dir).len() < segments);
    let rest = ok(run(partlog().arg("consume").arg(&dir)));
    assert_eq!(rest.lines().next(), Some("value-50"));
    assert_eq!(rest.lines().count(), 50);

    // retention.bytes of 2 KiB keeps about two segments.
    let retained = ok(run(partlog().arg("retention").arg(&dir).args([
        "--retention-bytes",
        "2048",
        "--retention-ms",
        "-1",
    ])));
    assert!(retained.contains("(over retention.bytes)"), "{retained}");
    let left: u64 = segment_logs(&dir)
        .iter()
        .map(|l| std::fs::metadata(l).unwrap().len())
        .sum();
    // Kafka's rule: a segment goes only if the log stays at or above the limit without it, so
    // less than one segment (1 KiB) more than the limit is left.
    assert!(left > 0 && left < 2048 + 1024, "{left} bytes left");

    let perf_dir = temp.path().join("perf-0");
    let produced = ok(run(partlog().arg("perf-produce").arg(&perf_dir).args([
        "--records",
        "2000",
        "--record-size",
        "64",
        "--batch",
        "10",
        "--json",
    ])));
    for field in ["\"records\":2000", "\"records_per_sec\":", "\"p999_ms\":"] {
        assert!(produced.contains(field), "{produced}");
    }
    let consumed = ok(run(partlog().arg("perf-consume").arg(&perf_dir).args([
        "--fetch-bytes",
        "4096",
        "--json",
    ])));
    assert!(
        consumed.starts_with("{\"records\":2000,\"bytes\":128000,"),
        "{consumed}"
    );
    let human = ok(run(partlog()
        .arg("perf-produce")
        .arg(&perf_dir)
        .args(["--records", "10"])));
    assert!(human.starts_with("10 records sent, "), "{human}");
    assert!(human.contains("ms 99.9th."), "{human}");
}

#[test]
fn produce_reads_headers_and_tombstones() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("users-0");
    let mut child = partlog()
        .arg("produce")
        .arg(&dir)
        .args(["--header-separator", "\t", "--key-separator", "="])
        .args(["--null-marker", "NULL", "--header", "env=prod"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"src:web,trace\tuser1=hello\nsrc:app\tuser1=NULL\nplain=x\n")
        .unwrap();
    ok(child.wait_with_output().unwrap());
    let json = ok(run(partlog()
        .arg("consume")
        .arg(&dir)
        .args(["--format", "json"])));
    let lines: Vec<&str> = json.lines().collect();
    assert_eq!(lines.len(), 3, "{json}");
    assert!(lines[0].ends_with(
        r#""key":"user1","value":"hello","headers":[["env","prod"],["src","web"],["trace",null]]}"#
    ));
    assert!(
        lines[1]
            .ends_with(r#""key":"user1","value":null,"headers":[["env","prod"],["src","app"]]}"#)
    );
    assert!(lines[2].ends_with(r#""key":"plain","value":"x","headers":[["env","prod"]]}"#));
    let output = run(partlog()
        .arg("produce")
        .arg(&dir)
        .args(["--header", "novalue"]));
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("is not KEY=VALUE"));
}

/// `consume --follow` whose position retention deleted goes on from the new log start, with a
/// note on standard error, as a consumer with `auto.offset.reset=earliest` does. The writer is
/// this process; the consumer polls every 3 s, so the deletion almost always lands between two
/// of its polls; if it saw the records first, it must simply have printed them.
#[test]
fn consume_follow_goes_on_from_the_new_start_after_a_deletion() {
    use partlog::{Log, LogConfig, NewRecord};
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("t-0");
    let log = Log::open(&dir, LogConfig::default()).unwrap();
    let append = |n: usize| {
        let value = format!("value-{n}");
        log.append(&[NewRecord::new(
            1_700_000_000_000,
            None,
            Some(value.as_bytes()),
        )])
        .unwrap();
    };
    (0..5).for_each(append);
    let mut consumer = partlog()
        .arg("consume")
        .arg(&dir)
        .args(["--follow", "--poll-ms", "3000", "--count", "7"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(consumer.stdout.take().unwrap()).lines();
    for n in 0..5 {
        assert_eq!(lines.next().unwrap().unwrap(), format!("value-{n}"));
    }
    (5..10).for_each(append);
    log.delete_records_before(8).unwrap();
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    assert!(consumer.wait().unwrap().success());
    let mut stderr = String::new();
    consumer
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    if rest == ["value-8", "value-9"] {
        assert_eq!(
            stderr,
            "partlog: offsets [5, 8) were deleted meanwhile; going on from 8\n"
        );
    } else {
        assert_eq!(rest, ["value-5", "value-6"], "{stderr}");
    }
    log.close().unwrap();
}
