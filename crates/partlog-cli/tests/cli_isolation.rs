//! Issue 32, item 1: transactions as the tool shows them. On the broker fixture (a Kafka 4.4
//! partition with a committed transaction at offsets 11-13 and an aborted one at 15-16),
//! `consume --isolation-level read_committed` (or `-X isolation.level=read_committed`) prints no
//! aborted record, and `dump --txn-state` marks each transactional record committed, aborted or
//! open, while `dump --records` stays exactly kafka-dump-log's lines. A transaction left open
//! holds a read_committed `consume --follow` back until its marker comes.

#[expect(
    dead_code,
    reason = "the shared runner's run_with_input is not needed here"
)]
#[path = "common/cli.rs"]
mod cli;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use cli::{partlog, run, text};
use partlog::{BatchBuilder, Compression, ControlRecordType, Log, LogConfig, NewRecord};

/// The broker fixture, copied: partlog is never handed the committed files.
fn broker_fixture(temp: &Path) -> PathBuf {
    let source =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/broker/partlog-fixture-0");
    let dir = temp.join("partlog-fixture-0");
    std::fs::create_dir(&dir).unwrap();
    for entry in std::fs::read_dir(&source).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
    }
    dir
}

fn stdout_of(output: &Output) -> String {
    assert!(
        output.status.success(),
        "{:?}: {}",
        output.status,
        text(&output.stderr)
    );
    text(&output.stdout)
}

/// The offsets `consume` prints with `args`.
fn consumed_offsets(dir: &Path, args: &[&str]) -> Vec<i64> {
    let output = run(partlog()
        .arg("consume")
        .arg(dir)
        .args(["-f", "%o\\n"])
        .args(args));
    stdout_of(&output)
        .lines()
        .map(|line| line.parse().unwrap())
        .collect()
}

/// Offsets of the fixture's data records: 0-10 outside transactions, 11-13 committed, 15-16
/// aborted (tests/fixtures/broker/expected.tsv); 14 and 17 are the COMMIT and ABORT markers.
const COMMITTED: [i64; 14] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13];
const ABORTED: [i64; 2] = [15, 16];

#[test]
fn issue32_item1_read_committed_prints_no_aborted_record_of_the_broker_fixture() {
    let temp = tempfile::tempdir().unwrap();
    let dir = broker_fixture(temp.path());

    let mut everything = COMMITTED.to_vec();
    everything.extend(ABORTED);
    assert_eq!(
        consumed_offsets(&dir, &[]),
        everything,
        "read_uncommitted, Kafka's default, prints the aborted records too"
    );
    assert_eq!(
        consumed_offsets(&dir, &["--isolation-level", "read_uncommitted"]),
        everything
    );
    for args in [
        &["--isolation-level", "read_committed"][..],
        &["-X", "isolation.level=read_committed"],
        &[
            "-X",
            "isolation.level=read_committed",
            "--isolation-level",
            "read_committed",
        ],
    ] {
        assert_eq!(consumed_offsets(&dir, args), COMMITTED, "{args:?}");
    }
    // The JSON a read_committed consumer prints has no record of the aborted transaction (its
    // keys are order-3).
    let json = stdout_of(&run(partlog().arg("consume").arg(&dir).args([
        "--format",
        "json",
        "--isolation-level",
        "read_committed",
    ])));
    assert_eq!(json.lines().count(), COMMITTED.len(), "{json}");
    assert!(!json.contains("order-3"), "{json}");
    // From inside the aborted transaction, nothing is left to print.
    assert_eq!(
        consumed_offsets(&dir, &["-o", "15", "--isolation-level", "read_committed"]),
        Vec::<i64>::new()
    );
}

#[test]
fn issue32_item1_bad_isolation_levels_are_one_line_errors() {
    let temp = tempfile::tempdir().unwrap();
    let dir = broker_fixture(temp.path());
    for (args, expected) in [
        (
            &["--isolation-level", "committed"][..],
            "possible values: read_uncommitted, read_committed",
        ),
        (
            &["-X", "isolation.level=serializable"],
            "expected read_uncommitted or read_committed",
        ),
        (
            &["-X", "fetch.max.bytes=1"],
            "consume takes one property, isolation.level",
        ),
        (&["-X", "isolation.level"], "is not PROP=VALUE"),
        (
            &[
                "-X",
                "isolation.level=read_committed",
                "--isolation-level",
                "read_uncommitted",
            ],
            "disagree",
        ),
    ] {
        let output = run(partlog().arg("consume").arg(&dir).args(args));
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(output.stdout.is_empty(), "{args:?}");
    }
}

/// The record lines of `dump` output, without the batch lines.
fn record_lines(dump: &str) -> Vec<&str> {
    dump.lines()
        .filter(|l| l.starts_with("| offset: "))
        .collect()
}

#[test]
fn issue32_item1_dump_txn_state_marks_aborted_records_and_records_stays_kafkas() {
    let temp = tempfile::tempdir().unwrap();
    let dir = broker_fixture(temp.path());
    let marked = stdout_of(&run(partlog().arg("dump").arg(&dir).arg("--txn-state")));
    let plain = stdout_of(&run(partlog().arg("dump").arg(&dir).arg("--records")));

    for line in record_lines(&marked) {
        let offset: i64 = line["| offset: ".len()..]
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let expected = match offset {
            11..=13 => Some("txnState: committed"),
            15 | 16 => Some("txnState: aborted"),
            _ => None,
        };
        match expected {
            Some(mark) => assert!(line.contains(&format!("] {mark} ")), "{line}"),
            None => assert!(!line.contains("txnState"), "{line}"),
        }
    }
    assert_eq!(marked.matches("txnState: aborted").count(), 2, "{marked}");
    // Without --txn-state, the lines are the ones kafka-dump-log prints (cli_dump_kafka.rs
    // diffs them against it): the mark is the only difference.
    assert!(!plain.contains("txnState"), "{plain}");
    let unmarked = marked
        .replace(" txnState: committed", "")
        .replace(" txnState: aborted", "");
    assert_eq!(unmarked, plain);

    // One segment file alone cannot tell: its markers may lie elsewhere.
    let file = dir.join("00000000000000000000.log");
    let output = run(partlog().arg("dump").arg(&file).arg("--txn-state"));
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("--txn-state needs a log directory"));
}

const T0: i64 = 1_700_000_000_000;

/// Appends a transactional batch of `values` for producer `pid` (epoch 0) from sequence
/// `sequence`.
fn append_transactional(log: &Log, pid: i64, sequence: i32, values: &[&str]) {
    let mut builder = BatchBuilder::new(Compression::None)
        .producer(pid, 0, sequence)
        .transactional(true);
    for value in values {
        builder.push(&NewRecord::new(T0, Some(b"k"), Some(value.as_bytes())));
    }
    log.append_batch(&builder.build().unwrap()).unwrap();
}

/// A transaction still open: read_committed stops before it, `dump --txn-state` calls it open,
/// and a read_committed `consume --follow` prints its records once the COMMIT marker comes (from
/// this process, which holds the log open for writing while the tool reads it live), never the
/// aborted transaction's.
#[test]
fn issue32_item1_read_committed_waits_for_an_open_transaction_and_follows_its_commit() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("txn-0");
    let log = Log::open(&dir, LogConfig::default()).unwrap();
    log.append(&[NewRecord::new(T0, None, Some(b"plain"))])
        .unwrap(); // 0
    append_transactional(&log, 7, 0, &["aborted-1", "aborted-2"]); // 1, 2
    log.append_marker(7, 0, ControlRecordType::Abort, 0)
        .unwrap(); // 3
    append_transactional(&log, 7, 2, &["open-1", "open-2"]); // 4, 5
    log.append(&[NewRecord::new(T0, None, Some(b"after"))])
        .unwrap(); // 6
    log.sync().unwrap();

    let values = |args: &[&str]| -> Vec<String> {
        stdout_of(&run(partlog().arg("consume").arg(&dir).args(args)))
            .lines()
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(
        values(&[]),
        [
            "plain",
            "aborted-1",
            "aborted-2",
            "open-1",
            "open-2",
            "after"
        ]
    );
    // The last stable offset is 4, the open transaction's first offset: the record after it
    // waits too, as a Kafka consumer's does.
    assert_eq!(values(&["--isolation-level", "read_committed"]), ["plain"]);
    assert_eq!(
        values(&[
            "--isolation-level",
            "read_committed",
            "-o",
            "end",
            "-f",
            "%o\\n"
        ]),
        Vec::<String>::new(),
        "-o end is the last stable offset under read_committed"
    );
    let dump = stdout_of(&run(partlog().arg("dump").arg(&dir).arg("--txn-state")));
    let states: Vec<&str> = record_lines(&dump)
        .iter()
        .filter_map(|line| line.split("txnState: ").nth(1))
        .map(|rest| rest.split(' ').next().unwrap())
        .collect();
    assert_eq!(states, ["aborted", "aborted", "open", "open"], "{dump}");

    // A follower from the start: it prints "plain", then waits at the open transaction.
    let mut follower = partlog()
        .arg("consume")
        .arg(&dir)
        .args([
            "--isolation-level",
            "read_committed",
            "--follow",
            "--poll-ms",
            "10",
        ])
        .args(["--count", "4"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut printed = BufReader::new(follower.stdout.take().unwrap());
    let mut first = String::new();
    printed.read_line(&mut first).unwrap();
    assert_eq!(first, "plain\n", "the follower's first line");
    // It is waiting at offset 4 now: the marker frees the transaction and the record after it.
    log.append_marker(7, 0, ControlRecordType::Commit, 0)
        .unwrap(); // 7
    log.sync().unwrap();
    // --count 4 ends it once they are printed (a follower that never sees the marker hangs
    // here, and CI's stage timeout names the test).
    let mut rest = String::new();
    printed.read_to_string(&mut rest).unwrap();
    let status = follower.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert_eq!(rest, "open-1\nopen-2\nafter\n");
    log.close().unwrap();
}
