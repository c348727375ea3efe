//! `partlog perf-produce` and `perf-consume` with kafka-producer-perf-test's and
//! kafka-consumer-perf-test's flags: the crate's Producer driven with `--acks`, `--linger-ms`,
//! `--batch-size`, `--throughput` and `--payload-file`; a window line every five seconds when
//! standard output is not a terminal; and perf-consume's CSV report.

use std::path::Path;
use std::process::{Command, Output, Stdio};

fn partlog() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_partlog"));
    command.env("RUST_BACKTRACE", "1");
    command
}

fn run(dir: &Path, args: &[&str]) -> String {
    let output: Output = partlog()
        .arg(args[0])
        .arg(dir)
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn perf_produce_drives_the_producer_with_kafkas_flags() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("perf-0");
    let report = run(
        &dir,
        &[
            "perf-produce",
            "--records",
            "20000",
            "--record-size",
            "50",
            "--acks",
            "all",
            "--linger-ms",
            "1",
            "--batch-size",
            "8192",
            "--json",
        ],
    );
    assert!(report.starts_with("{\"records\":20000,"), "{report}");
    let stats = run(&dir, &["stats", "--batches"]);
    let line = stats
        .lines()
        .find(|l| l.starts_with("batches: "))
        .unwrap_or_else(|| panic!("{stats}"));
    assert!(line.contains(", 20000 records, "), "{line}");
    let batches: u64 = line["batches: ".len()..line.find(',').unwrap()]
        .parse()
        .unwrap();
    // 8 KiB batches of 50-byte values: far fewer batches than records.
    assert!(batches < 2000, "{line}");

    let payloads = temp.path().join("payloads.txt");
    std::fs::write(&payloads, "alpha\nbeta\n\ngamma\n").unwrap();
    let other = temp.path().join("payloads-0");
    run(
        &other,
        &[
            "perf-produce",
            "--records",
            "300",
            "--payload-file",
            payloads.to_str().unwrap(),
            "--acks",
            "1",
        ],
    );
    let values = run(&other, &["consume"]);
    assert_eq!(values.lines().count(), 300);
    assert!(
        values
            .lines()
            .all(|v| ["alpha", "beta", "gamma"].contains(&v)),
        "{values}"
    );
    assert!(values.lines().any(|v| v == "gamma"), "{values}");
}

/// 600 records at 100 records/s take at least six seconds, so a window line comes at five.
#[test]
fn a_throttled_run_without_a_terminal_prints_a_line_every_five_seconds() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("slow-0");
    let report = run(
        &dir,
        &["perf-produce", "--records", "600", "--throughput", "100"],
    );
    let lines: Vec<&str> = report.lines().collect();
    assert!(lines.len() >= 2, "{report}");
    assert!(
        lines[0].ends_with("ms max latency.") && lines[0].contains(" records sent, "),
        "{report}"
    );
    let last = lines.last().unwrap();
    assert!(last.starts_with("600 records sent, "), "{report}");
    let rate: f64 = last["600 records sent, ".len()..last.find(" records/sec").unwrap()]
        .parse()
        .unwrap();
    assert!(rate <= 101.0, "--throughput 100 ran at {rate}/s");
}

#[test]
fn perf_consume_prints_kafkas_csv() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("perf-0");
    run(
        &dir,
        &["perf-produce", "--records", "5000", "--batch", "50"],
    );
    let csv = run(&dir, &["perf-consume", "--csv"]);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 2, "{csv}");
    assert_eq!(
        lines[0],
        "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, \
         rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
    );
    let fields: Vec<&str> = lines[1].split(", ").collect();
    assert_eq!(fields.len(), 10, "{csv}");
    assert_eq!(fields[4], "5000", "{csv}");
    // yyyy-MM-dd HH:mm:ss:SSS
    assert_eq!(fields[0].len(), 23, "{csv}");
    assert_eq!(&fields[0][4..5], "-", "{csv}");
    let bare = run(&dir, &["perf-consume", "--csv", "--hide-header"]);
    assert_eq!(bare.lines().count(), 1, "{bare}");
}
