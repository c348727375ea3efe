//! `verify_dir`'s checks of Kafka's producer-state files (FORMAT.md §9 and §10), on copies of
//! the broker-written fixture `tests/fixtures/broker/partlog-fixture-0`: its `.txnindex` holds
//! one aborted transaction (producer 1, offsets 15 to the ABORT marker at 17, LSO 18) and its
//! `00000000000000000018.snapshot` two producers.

use std::path::{Path, PathBuf};

use partlog::unstable::AbortedTxn;
use partlog::{Finding, LogConfig, Severity, verify_dir};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/broker/partlog-fixture-0"
);
const TXN_INDEX: &str = "00000000000000000000.txnindex";
const SNAPSHOT: &str = "00000000000000000018.snapshot";

fn fixture_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(FIXTURE).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
    }
    dir
}

fn findings_about(dir: &Path, file: &str) -> Vec<Finding> {
    let report = verify_dir(dir, &LogConfig::default()).unwrap();
    let path: PathBuf = dir.join(file);
    report
        .findings
        .into_iter()
        .filter(|finding| finding.file == path)
        .collect()
}

fn write_txn_index(dir: &Path, entries: &[AbortedTxn]) {
    let bytes: Vec<u8> = entries.iter().flat_map(|txn| txn.to_bytes()).collect();
    std::fs::write(dir.join(TXN_INDEX), bytes).unwrap();
}

fn txn(producer_id: i64, first: i64, last: i64, lso: i64) -> AbortedTxn {
    AbortedTxn {
        producer_id,
        first_offset: first,
        last_offset: last,
        last_stable_offset: lso,
    }
}

#[test]
fn producer_state_files_of_the_broker_fixture_pass_verify() {
    let dir = fixture_copy();
    assert_eq!(findings_about(dir.path(), TXN_INDEX), vec![]);
    assert_eq!(findings_about(dir.path(), SNAPSHOT), vec![]);
}

#[test]
fn txn_index_entry_without_its_abort_marker_is_reported_by_verify() {
    let dir = fixture_copy();
    // Offset 14 is a COMMIT marker, 10 a data batch, and 17 is producer 1's ABORT, not 2's.
    write_txn_index(
        dir.path(),
        &[txn(1, 9, 10, 11), txn(1, 11, 14, 15), txn(2, 15, 17, 18)],
    );
    let findings = findings_about(dir.path(), TXN_INDEX);
    assert_eq!(findings.len(), 4, "{findings:#?}");
    // Without partlog.checkpoint the next open recovers the segment, which rebuilds the index.
    assert!(findings.iter().all(|f| f.severity == Severity::CrashState));
    assert_eq!(
        findings.iter().map(|f| f.position).collect::<Vec<_>>(),
        vec![Some(0), Some(34), Some(68), None]
    );
    // And producer 1's real abort at 17 is listed nowhere.
    assert!(
        findings[3].what.contains(
            "the ABORT marker of producer 1 at offset 17 (its transaction began at 15) has no entry"
        ),
        "{findings:#?}"
    );
    assert!(
        findings[0].what.contains("no ABORT marker"),
        "{findings:#?}"
    );
    assert!(findings[2].what.contains("producer 1's"), "{findings:#?}");
    assert!(
        findings[0].what.contains("rebuilds its .txnindex"),
        "{findings:#?}"
    );
}

/// Below the recovery point of a cleanly closed partlog log, nothing rebuilds a bad
/// `.txnindex`: it is corruption.
#[test]
fn txn_index_problem_in_a_trusted_segment_is_corruption_in_verify() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path();
    let log = partlog::Log::open(dir, LogConfig::default()).unwrap();
    log.append(&[partlog::NewRecord::new(1_700_000_000_000, None, Some(b"v"))])
        .unwrap();
    log.close().unwrap();
    drop(log);
    write_txn_index(dir, &[txn(1, 0, 0, 1)]);
    let findings = findings_about(dir, TXN_INDEX);
    assert_eq!(findings.len(), 1, "{findings:#?}");
    assert_eq!(findings[0].severity, Severity::Corruption);
}

#[test]
fn txn_index_out_of_order_or_torn_is_reported_by_verify() {
    let dir = fixture_copy();
    write_txn_index(dir.path(), &[txn(1, 15, 17, 18), txn(1, 15, 17, 18)]);
    let findings = findings_about(dir.path(), TXN_INDEX);
    assert_eq!(findings.len(), 1, "{findings:#?}");
    assert_eq!(findings[0].position, Some(34));
    assert_eq!(findings[0].severity, Severity::CrashState);

    let mut torn = txn(1, 15, 17, 18).to_bytes().to_vec();
    torn.extend_from_slice(&[0, 0]);
    std::fs::write(dir.path().join(TXN_INDEX), torn).unwrap();
    let findings = findings_about(dir.path(), TXN_INDEX);
    assert_eq!(findings.len(), 1, "{findings:#?}");
    assert_eq!(findings[0].position, Some(34));
}

/// A damaged snapshot is crash state in a log that did not close cleanly (a roll writes its
/// snapshot in place and the flusher fsyncs it later, as Kafka's does, so a crash can tear one),
/// and corruption in one that did (close syncs every snapshot before its clean-shutdown record).
/// The broker fixture has no partlog clean-shutdown record; a partlog open and close gives it one.
#[test]
fn producer_state_snapshot_damage_is_crash_state_unless_the_log_closed_cleanly() {
    for closed_cleanly in [false, true] {
        let dir = fixture_copy();
        if closed_cleanly {
            let log = partlog::Log::open(dir.path(), LogConfig::default()).unwrap();
            log.close().unwrap();
        }
        let expected = if closed_cleanly {
            Severity::Corruption
        } else {
            Severity::CrashState
        };
        let path = dir.path().join(SNAPSHOT);
        let original = std::fs::read(&path).unwrap();
        let mut flipped = original.clone();
        flipped[30] ^= 0x10;
        let mut wrong_version = original.clone();
        wrong_version[1] = 2;
        for (bytes, what) in [
            (flipped, "crc mismatch"),
            (original[..original.len() - 3].to_vec(), "crc mismatch"),
            (Vec::new(), "truncated"),
            (wrong_version, "version"),
        ] {
            std::fs::write(&path, &bytes).unwrap();
            let findings = findings_about(dir.path(), SNAPSHOT);
            assert_eq!(findings.len(), 1, "{what}: {findings:#?}");
            assert_eq!(
                findings[0].severity, expected,
                "closed cleanly: {closed_cleanly}; {what}: {findings:#?}"
            );
            assert!(findings[0].what.contains(what), "{what}: {findings:#?}");
        }
    }
}

/// A `.txnindex` a broker left beside a segment is kept when partlog opens the log, and a
/// truncation into the segment removes exactly the entries whose marker it cuts (Kafka's
/// `truncateTo`); the later segments' go `.deleted` with them.
#[test]
fn txn_index_is_cut_with_its_segment_by_truncate_to() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path();
    let config = || {
        LogConfig::builder_for_tests()
            .segment_bytes(1024)
            .build()
            .unwrap()
    };
    let log = partlog::Log::open(dir, config()).unwrap();
    for i in 0..40 {
        log.append(&[partlog::NewRecord::new(
            1_700_000_000_000 + i,
            None,
            Some(&[b'v'; 100][..]),
        )])
        .unwrap();
    }
    log.close().unwrap();
    drop(log);
    let bases =
        partlog::unstable::list_segment_bases(&partlog::unstable::OsStorage::new(), dir).unwrap();
    assert!(bases.len() >= 3, "{bases:?}");
    let (first, second) = (bases[0], bases[1]);
    // Entries of the first segment whose markers end at first + 1 and second - 1.
    write_txn_index(
        dir,
        &[
            txn(7, first, first + 1, first + 2),
            txn(8, first, second - 1, second),
        ],
    );
    let later = dir.join(format!("{second:020}.txnindex"));
    std::fs::write(&later, txn(9, second, second, second + 1).to_bytes()).unwrap();

    let log = partlog::Log::open(dir, config()).unwrap();
    assert_eq!(log.truncate_to(second - 1).unwrap(), second - 1);
    log.close().unwrap();
    drop(log);
    let kept = std::fs::read(dir.join(TXN_INDEX)).unwrap();
    assert_eq!(kept, txn(7, first, first + 1, first + 2).to_bytes());
    assert!(!later.exists());
}
