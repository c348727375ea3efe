//! The maintenance commands as a new user meets them: `partlog roll` seals the active segment
//! (and says when there is nothing to roll), a compaction pass that cleans nothing says why and
//! what to do, and `delete-records --before -1` deletes everything, as Kafka's -1 does.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn partlog() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_partlog"));
    command.env("RUST_BACKTRACE", "1");
    command
}

fn run(args: &[&str], dir: &Path, input: &[u8]) -> Output {
    let mut child = partlog()
        .arg(args[0])
        .arg(dir)
        .args(&args[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    if let Err(error) = stdin.write_all(input) {
        assert_eq!(error.kind(), std::io::ErrorKind::BrokenPipe, "{error}");
    }
    drop(stdin);
    child.wait_with_output().unwrap()
}

fn ok(args: &[&str], dir: &Path) -> String {
    let output = run(args, dir, b"");
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn roll_then_compact_cleans_what_an_active_segment_kept_and_an_empty_pass_says_why() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("users-0");
    let output = run(
        &[
            "produce",
            "--key-separator",
            "=",
            "--cleanup-policy",
            "compact",
            "-q",
        ],
        &dir,
        b"user1=a\nuser2=b\nuser1=c\nuser2=d\n",
    );
    assert!(output.status.success());

    let report = ok(&["compact"], &dir);
    assert!(report.contains("records removed: 0"), "{report}");
    assert!(
        report.contains("nothing to clean: the log has only its active segment")
            && report.contains("partlog roll"),
        "{report}"
    );

    let rolled = ok(&["roll"], &dir);
    assert!(
        rolled.starts_with("rolled: 00000000000000000004.log is the new active segment"),
        "{rolled}"
    );
    let again = ok(&["roll"], &dir);
    assert!(again.starts_with("nothing to roll"), "{again}");

    let report = ok(&["compact"], &dir);
    assert!(report.contains("segments: 2 -> 2"), "{report}");
    assert!(report.contains("records removed: 2"), "{report}");
    assert!(!report.contains("nothing to clean"), "{report}");
    let records = ok(&["consume", "--key-separator", "="], &dir);
    assert_eq!(records, "user1=c\nuser2=d\n");

    // A second pass finds every sealed segment clean, and says so.
    let report = ok(&["compact"], &dir);
    assert!(
        report.contains("nothing to clean: the sealed segments are clean up to offset 4"),
        "{report}"
    );
}

#[test]
fn delete_records_before_minus_one_deletes_everything() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("orders-0");
    let input: String = (0..3000).map(|i| format!("line {i}\n")).collect();
    let output = run(
        &[
            "produce",
            "--segment-bytes",
            "4096",
            "--allow-small-segments",
            "-q",
        ],
        &dir,
        input.as_bytes(),
    );
    assert!(output.status.success());
    let report = ok(&["delete-records", "--before", "-1"], &dir);
    assert!(
        report.starts_with("log start offset: 0 -> 3000 (the log ends at 3000)"),
        "{report}"
    );
    assert_eq!(ok(&["consume"], &dir), "");

    let output = run(&["delete-records", "--before", "-2"], &dir, b"");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("-1 for the log end"), "{stderr}");
}
