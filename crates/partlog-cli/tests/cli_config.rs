//! The settings stored with a log, as the `partlog` tool meets them: `produce --cleanup-policy
//! compact` is remembered by the next `produce` and by `retention`; `partlog config` prints and
//! changes them; and `retention` with no flags keeps every record, whatever its timestamp
//! (partlog's default retention.ms is -1).

#[path = "common/cli.rs"]
mod cli;

use std::path::Path;
use std::process::Output;

use cli::{partlog, run, run_with_input, text};
use partlog::{Log, LogConfig, NewRecord, ReadBound};

fn assert_ok(output: &Output, context: &str) -> String {
    assert!(
        output.status.success(),
        "{context}: {:?}, stderr {}",
        output.status,
        text(&output.stderr)
    );
    text(&output.stdout)
}

/// A record's key and value.
type KeyValue = (Option<Vec<u8>>, Option<Vec<u8>>);

fn records(dir: &Path) -> Vec<KeyValue> {
    let log = Log::open_read_only(dir, LogConfig::default()).unwrap();
    log.records(log.log_start_offset(), ReadBound::LogEnd)
        .map(|record| {
            let record = record.unwrap();
            (record.key, record.value)
        })
        .collect()
}

#[test]
fn a_compacted_log_made_by_produce_stays_compacted_for_produce_and_retention() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("users-0");
    let input: String = (0..200).map(|i| format!("user{i}=v{i}\n")).collect();
    let output = run_with_input(
        partlog().arg("produce").arg(&dir).args([
            "--key-separator",
            "=",
            "--cleanup-policy",
            "compact",
            "--segment-bytes",
            "4096",
            "--allow-small-segments",
        ]),
        input.as_bytes(),
    );
    assert_ok(&output, "the first produce");

    // No --cleanup-policy: the stored one still holds, and an unkeyed record is refused.
    let output = run_with_input(partlog().arg("produce").arg(&dir), b"no key here\n");
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    assert!(
        text(&output.stderr).contains("without a key"),
        "{}",
        text(&output.stderr)
    );
    assert_eq!(records(&dir).len(), 200);

    // A compacted log has no time retention, whatever --retention-ms says.
    let output = run(partlog()
        .arg("retention")
        .arg(&dir)
        .args(["--retention-ms", "1"]));
    let stdout = assert_ok(&output, "retention");
    assert!(stdout.contains("0 segments deleted"), "{stdout}");
    assert_eq!(records(&dir).len(), 200);

    let output = run(partlog().arg("config").arg(&dir));
    let stdout = assert_ok(&output, "config");
    assert!(stdout.contains("cleanup.policy=compact\n"), "{stdout}");
    assert!(stdout.contains("segment.bytes=4096\n"), "{stdout}");
    assert!(
        !stdout.contains("retention.ms"),
        "a one-off flag was stored: {stdout}"
    );
}

#[test]
fn config_set_changes_a_setting_as_kafka_configs_alter_does() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("orders-0");
    let output = run_with_input(partlog().arg("produce").arg(&dir), b"one\ntwo\n");
    assert_ok(&output, "produce");
    let stdout = assert_ok(&run(partlog().arg("config").arg(&dir)), "config");
    assert_eq!(stdout, "", "a log at the defaults stores nothing");

    let output = run(partlog().arg("config").arg(&dir).args([
        "--set",
        "cleanup.policy=compact,delete",
        "--set",
        "retention.ms=60000",
    ]));
    let stdout = assert_ok(&output, "config --set");
    assert_eq!(
        stdout,
        "cleanup.policy=compact,delete\nretention.ms=60000\n"
    );
    let log = Log::open_read_only(&dir, LogConfig::default()).unwrap();
    assert_eq!(log.config().retention_ms, 60_000);
    assert!(log.config().cleanup_policy.compacts());
    drop(log);

    let output = run(partlog()
        .arg("config")
        .arg(&dir)
        .args(["--delete", "cleanup.policy"]));
    assert_eq!(
        assert_ok(&output, "config --delete"),
        "retention.ms=60000\n"
    );

    let output = run(partlog().arg("config").arg(&dir).arg("--all"));
    let stdout = assert_ok(&output, "config --all");
    assert!(stdout.contains("retention.ms=60000 (stored)\n"), "{stdout}");
    assert!(
        stdout.contains("cleanup.policy=delete (default)\n"),
        "{stdout}"
    );

    for (bad, expected) in [
        ("retention.hours=1", "not a per-log setting"),
        ("retention.ms=soon", "retention.ms"),
        ("cleanup.policy=shred", "cleanup.policy"),
    ] {
        let output = run(partlog().arg("config").arg(&dir).args(["--set", bad]));
        assert_eq!(output.status.code(), Some(2), "{bad}");
        let stderr = text(&output.stderr);
        assert!(stderr.contains(expected), "{bad}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{bad}: {stderr}");
    }
    let stdout = assert_ok(&run(partlog().arg("config").arg(&dir)), "config");
    assert_eq!(
        stdout, "retention.ms=60000\n",
        "a refused --set changed nothing"
    );
}

/// Events of 2023 in a log made with the crate's defaults: `partlog retention` with no flags
/// keeps them all (Kafka's 7-day default would delete every one).
#[test]
fn retention_without_flags_keeps_old_records_by_default() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("events-0");
    let log = Log::open(&dir, LogConfig::default()).unwrap();
    for i in 0..10_i64 {
        log.append(&[NewRecord::new(
            1_680_000_000_000 + i,
            None,
            Some(b"an event of 2023"),
        )])
        .unwrap();
    }
    log.close().unwrap();
    let stdout = assert_ok(&run(partlog().arg("retention").arg(&dir)), "retention");
    assert!(stdout.contains("0 segments deleted"), "{stdout}");
    assert_eq!(records(&dir).len(), 10);
}
