//! `verify` and `partlog dump --leader-epochs` on a partition directory's
//! `leader-epoch-checkpoint` (FORMAT.md §12), on copies of the broker-written fixture
//! `tests/fixtures/broker/partlog-fixture-0` (the root's), whose file is `0\n1\n0 0\n` and whose
//! log ends at offset 20.

#[expect(
    dead_code,
    reason = "the shared runner's run_with_input is not needed here"
)]
#[path = "common/cli.rs"]
mod cli;

use std::path::{Path, PathBuf};

use partlog::{Finding, LogConfig, Severity, verify_dir};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/broker/partlog-fixture-0"
);
const EPOCH_FILE: &str = "leader-epoch-checkpoint";

fn fixture_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(FIXTURE).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
    }
    dir
}

fn epoch_findings(dir: &Path) -> (i64, Vec<Finding>) {
    let report = verify_dir(dir, &LogConfig::default()).unwrap();
    let path: PathBuf = dir.join(EPOCH_FILE);
    let findings = report
        .findings
        .into_iter()
        .filter(|finding| finding.file == path)
        .collect();
    (report.log_end_offset, findings)
}

#[test]
fn leader_epoch_checkpoint_of_the_broker_fixture_passes_verify() {
    let dir = fixture_copy();
    let (_, findings) = epoch_findings(dir.path());
    assert_eq!(findings, vec![]);
}

#[test]
fn leader_epoch_checkpoint_that_does_not_parse_is_corruption_in_verify() {
    for bad in [
        &b"1\n1\n0 0\n"[..],
        b"0\n2\n0 0\n",
        b"0\n1\n0 x\n",
        b"0\n2\n3 0\n1 5\n",
    ] {
        let dir = fixture_copy();
        std::fs::write(dir.path().join(EPOCH_FILE), bad).unwrap();
        let (_, findings) = epoch_findings(dir.path());
        assert_eq!(
            findings.len(),
            1,
            "{:?}: {findings:?}",
            String::from_utf8_lossy(bad)
        );
        assert_eq!(findings[0].severity, Severity::Corruption);
        assert!(
            findings[0].what.contains("leader-epoch-checkpoint"),
            "{}",
            findings[0]
        );
    }
}

#[test]
fn leader_epoch_entry_beyond_the_log_end_is_reported_by_verify() {
    let dir = fixture_copy();
    let (end, _) = epoch_findings(dir.path());
    // An entry at the log end is a leader that has not written yet: no finding.
    let at_end = format!("0\n2\n0 0\n1 {end}\n");
    std::fs::write(dir.path().join(EPOCH_FILE), at_end).unwrap();
    assert_eq!(epoch_findings(dir.path()).1, vec![]);

    let beyond = format!("0\n3\n0 0\n1 {end}\n2 {}\n", end + 1);
    std::fs::write(dir.path().join(EPOCH_FILE), beyond).unwrap();
    let (_, findings) = epoch_findings(dir.path());
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(findings[0].severity, Severity::CrashState);
    assert!(
        findings[0].what.contains("leader epoch 2"),
        "{}",
        findings[0]
    );
}

#[test]
fn leader_epoch_dump_prints_the_checkpoint_entries() {
    let dir = fixture_copy();
    let output = cli::run(
        cli::partlog()
            .args(["dump", "--leader-epochs"])
            .arg(dir.path()),
    );
    let stdout = cli::text(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        cli::text(&output.stderr)
    );
    let path = dir.path().join(EPOCH_FILE);
    let expected = format!(
        "Dumping {}\nversion: 0 entries: 1\nleaderEpoch: 0 startOffset: 0\n",
        path.display()
    );
    assert!(stdout.ends_with(&expected), "{stdout}");
}

#[test]
fn leader_epoch_dump_of_a_bad_checkpoint_names_it_and_exits_1() {
    let dir = fixture_copy();
    std::fs::write(dir.path().join(EPOCH_FILE), b"0\n1\nzero 0\n").unwrap();
    let output = cli::run(
        cli::partlog()
            .args(["dump", "--leader-epochs"])
            .arg(dir.path()),
    );
    let stdout = cli::text(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("Error: corrupt data in"), "{stdout}");
    assert!(stdout.contains(EPOCH_FILE), "{stdout}");
}
