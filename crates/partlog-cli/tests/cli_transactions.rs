//! Idempotent and transactional writes from the tool (issue 32, item 3): `produce
//! --producer-id` continues the log's sequence run after run, `--transactional` makes the input
//! one transaction (committed at the end, aborted on an input error, left open with
//! `--no-commit`), and `partlog txn list|commit|abort` shows the producers and ends a
//! transaction left open, by the tool or by another writer. What `read_committed` readers see is
//! checked through the crate (`Log::committed_records`).

#[path = "common/cli.rs"]
mod cli;

use std::path::Path;

use cli::{partlog, run, run_with_input, text};
use partlog::{BatchBuilder, BatchHeader, Compression, Log, LogConfig, NewRecord, ReadBound};

fn produce(dir: &Path, args: &[&str], input: &str) -> std::process::Output {
    run_with_input(
        partlog().arg("produce").arg(dir).args(args),
        input.as_bytes(),
    )
}

fn txn(action: &str, dir: &Path, args: &[&str]) -> std::process::Output {
    run(partlog().arg("txn").arg(action).arg(dir).args(args))
}

fn assert_ok(output: &std::process::Output, context: &str) {
    assert!(
        output.status.success(),
        "{context}: {}",
        text(&output.stderr)
    );
}

/// Asserts exit status 2 and one line on standard error that contains `expected`.
fn assert_one_line_error(output: &std::process::Output, expected: &str) {
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("partlog: "), "{stderr}");
    assert!(stderr.contains(expected), "{stderr:?} lacks {expected:?}");
}

fn open(dir: &Path) -> Log {
    Log::open_read_only(dir, LogConfig::default()).unwrap()
}

fn headers(log: &Log) -> Vec<BatchHeader> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let fetch = log.read(offset, 1 << 20, ReadBound::LogEnd).unwrap();
        for batch in fetch.batches() {
            out.push(*batch.unwrap().header().unwrap());
        }
        offset = fetch.next_offset();
    }
    out
}

/// The values a `read_committed` consumer gets.
fn committed(log: &Log) -> Vec<String> {
    log.committed_records(log.log_start_offset(), ReadBound::LogEnd)
        .map(|r| text(&r.unwrap().value.unwrap_or_default()))
        .collect()
}

/// The values a `read_uncommitted` consumer gets.
fn uncommitted(log: &Log) -> Vec<String> {
    log.records(log.log_start_offset(), ReadBound::LogEnd)
        .map(|r| text(&r.unwrap().value.unwrap_or_default()))
        .collect()
}

fn lines(range: std::ops::Range<usize>) -> String {
    range.map(|i| format!("line {i}\n")).collect()
}

fn values(range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("line {i}")).collect()
}

#[test]
fn produce_with_a_producer_id_writes_idempotent_batches_that_continue_the_logs_sequence() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("ids-0");
    let args = ["--producer-id", "7", "--producer-epoch", "2"];
    assert_ok(&produce(&dir, &args, &lines(0..300)), "first run");
    assert_ok(&produce(&dir, &args, &lines(300..500)), "second run");
    let log = open(&dir);
    let batches = headers(&log);
    let mut next = 0;
    for header in &batches {
        assert_eq!((header.producer_id, header.producer_epoch), (7, 2));
        assert!(!header.is_transactional());
        assert_eq!(header.base_sequence, next, "{header:?}");
        next = header.last_sequence() + 1;
    }
    assert_eq!(next, 500, "one sequence across both runs");
    assert_eq!(log.producer_state(7).unwrap().last_sequence, 499);
    assert_eq!(uncommitted(&log), values(0..500));
    drop(log);
    // A lower epoch is fenced, and the error names the epoch to give.
    let fenced = produce(
        &dir,
        &["--producer-id", "7", "--producer-epoch", "1"],
        "x\n",
    );
    assert_one_line_error(&fenced, "--producer-epoch 2");
}

#[test]
fn produce_transactional_commits_the_whole_input_at_the_end() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("ledger-0");
    let output = produce(
        &dir,
        &["--producer-id", "9", "--transactional", "--print-offsets"],
        &lines(0..3),
    );
    assert_ok(&output, "transactional produce");
    assert_eq!(text(&output.stdout), "0\n1\n2\n");
    let summary = text(&output.stderr);
    assert!(
        summary.starts_with("partlog: produced 3 records to ")
            && summary.contains("offsets [0, 2], committed (COMMIT marker at 3)"),
        "{summary}"
    );
    let log = open(&dir);
    assert_eq!(committed(&log), values(0..3));
    let batches = headers(&log);
    assert!(
        batches
            .iter()
            .all(|h| h.is_transactional() && h.producer_id == 9)
    );
    assert!(batches.last().unwrap().is_control());
    assert_eq!(log.last_stable_offset(), log.log_end_offset());
}

#[test]
fn an_input_error_aborts_the_transaction() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("users-0");
    let args = [
        "--producer-id",
        "3",
        "--transactional",
        "--key-separator",
        "=",
        "--cleanup-policy",
        "compact",
    ];
    assert_ok(&produce(&dir, &args, "k=a\nk=b\n"), "the first transaction");
    // The third line has no key, which a compacted log refuses.
    let output = produce(&dir, &args, "k=c\nk=d\nno key\nk=e\n");
    assert_one_line_error(&output, "cannot append line 3");
    assert!(text(&output.stderr).contains("the transaction was aborted"));
    let log = open(&dir);
    assert_eq!(committed(&log), ["a", "b"]);
    // The records sent before the bad line are in the log, aborted; no transaction hangs.
    assert!(uncommitted(&log).starts_with(&["a".into(), "b".into(), "c".into()]));
    assert_eq!(log.first_unstable_offset(), None);
    assert!(headers(&log).last().unwrap().is_control());
}

#[test]
fn a_transaction_left_open_is_continued_then_committed_with_txn_commit() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("ledger-0");
    let args = ["--producer-id", "7", "--transactional", "--no-commit"];
    let first = produce(&dir, &args, &lines(0..3));
    assert_ok(&first, "first part");
    let stderr = text(&first.stderr);
    assert!(
        stderr.contains(&format!(
            "'partlog txn commit {} --producer-id 7 --producer-epoch 0'",
            dir.display()
        )),
        "{stderr}"
    );
    {
        let log = open(&dir);
        assert_eq!(log.first_unstable_offset(), Some(0));
        assert!(committed(&log).is_empty());
    }
    let list = txn("list", &dir, &[]);
    assert_ok(&list, "txn list");
    let listed = text(&list.stdout);
    assert!(
        listed.starts_with("ProducerId\tProducerEpoch\t")
            && listed.lines().nth(1).unwrap().starts_with("7\t0\t")
            && listed.lines().nth(1).unwrap().ends_with("\t0"),
        "{listed}"
    );
    // An idempotent produce of the id waits for the end, and says how to end it.
    let refused = produce(&dir, &["--producer-id", "7"], "x\n");
    assert_one_line_error(&refused, "'partlog txn commit");
    let second = produce(&dir, &args, &lines(3..5));
    assert_ok(&second, "second part");
    assert!(
        text(&second.stderr)
            .contains("continuing the transaction producer 7 (epoch 0) left open at offset 0"),
        "{}",
        text(&second.stderr)
    );
    let commit = txn(
        "commit",
        &dir,
        &["--producer-id", "7", "--producer-epoch", "0"],
    );
    assert_ok(&commit, "txn commit");
    assert_eq!(
        text(&commit.stdout),
        "committed producer 7's transaction (epoch 0, open since offset 0): COMMIT marker at \
         offset 5\n"
    );
    let log = open(&dir);
    assert_eq!(committed(&log), values(0..5));
    drop(log);
    // Nothing is open any more: an error, and nothing written.
    let again = txn("commit", &dir, &["--producer-id", "7"]);
    assert_one_line_error(&again, "no open transaction");
    assert_eq!(open(&dir).log_end_offset(), 6);
    // The same with abort: the records stay in the log, unseen by read_committed.
    assert_ok(&produce(&dir, &args, &lines(5..7)), "third part");
    assert_ok(&txn("abort", &dir, &["--producer-id", "7"]), "txn abort");
    let log = open(&dir);
    assert_eq!(committed(&log), values(0..5));
    assert_eq!(uncommitted(&log), values(0..7));
    assert_eq!(log.first_unstable_offset(), None);
}

/// A transaction another writer left open (here hand-built batches of producer 42 at epoch 3):
/// `txn commit` needs its epoch, `txn abort` takes a higher one, which fences that writer.
#[test]
fn txn_ends_a_transaction_another_writer_left_open() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("other-0");
    {
        let log = Log::open(&dir, LogConfig::default()).unwrap();
        let mut builder = BatchBuilder::new(Compression::None)
            .producer(42, 3, 0)
            .transactional(true);
        builder.push(&NewRecord::now(None, Some(b"hanging")));
        log.append_batch(&builder.build().unwrap()).unwrap();
        log.close().unwrap();
    }
    let wrong = txn("commit", &dir, &["--producer-id", "42"]);
    assert_one_line_error(&wrong, "--producer-epoch 3");
    let higher = txn(
        "commit",
        &dir,
        &["--producer-id", "42", "--producer-epoch", "4"],
    );
    assert_one_line_error(&higher, "a higher epoch may only abort it");
    let unknown = txn("abort", &dir, &["--producer-id", "41"]);
    assert_one_line_error(&unknown, "no state for producer 41");
    let abort = txn(
        "abort",
        &dir,
        &["--producer-id", "42", "--producer-epoch", "4"],
    );
    assert_ok(&abort, "txn abort at a higher epoch");
    assert!(text(&abort.stdout).contains("ABORT marker at offset 1"));
    let log = open(&dir);
    assert!(committed(&log).is_empty());
    assert_eq!(log.first_unstable_offset(), None);
    assert_eq!(log.producer_state(42).unwrap().producer_epoch, 4);
}

#[test]
fn producer_mode_flags_need_a_producer_id_and_no_fixed_batches() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("flags-0");
    let dir = dir.to_str().unwrap();
    for (args, expected) in [
        (vec!["--transactional"], "--producer-id"),
        (vec!["--producer-epoch", "1"], "--producer-id"),
        (vec!["--producer-id", "1", "--no-commit"], "--transactional"),
        (vec!["--producer-id", "1", "--batch", "10"], "--batch"),
    ] {
        let output = run(partlog().arg("produce").arg(dir).args(&args));
        assert_one_line_error(&output, expected);
    }
}
