//! `partlog dump` against Kafka 4.4's DumpLogSegments on the same files: the diff of
//! `partlog dump DIR --records` and `--deep-iteration --print-data-log` shows no line at all on
//! standard output (keys, nulls, headers, lz4 and zstd batches, several segments, a compacted
//! log with gaps and tombstones that carry a delete horizon, `OptionalLong[..]`, and
//! transactions with their COMMIT and ABORT markers);
//! partlog's "Non-consecutive offsets" lines are Kafka's, less the -1 quirk. `partlog dump FILE`
//! and `--skip-record-metadata` and `--max-bytes` agree with Kafka's for single files, a
//! garbage-tailed `.log` included ("isvalid: false", "Found N invalid bytes"), and so do
//! `partlog dump --producer-state` for a `.snapshot` and a `.txnindex`.
//!
//! Runs when Java and Kafka's jars are present (tests/common/kafka.rs finds them), skips
//! otherwise with the reason printed, and fails under `CI=true` without them.

#[path = "../../../tests/common/kafka.rs"]
mod kafka;
#[path = "../../../tests/common/producer_state_samples.rs"]
mod producer_state_samples;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use partlog::unstable::producer_snapshot::write_snapshot;
use partlog::{BatchBuilder, Compression, ControlRecordType, Log, LogConfig, NewRecord};

use producer_state_samples::{os, snapshot_entries, write_txn_index};

fn partlog() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_partlog"));
    command.env("RUST_BACKTRACE", "1");
    command
}

fn produce(dir: &Path, args: &[&str], input: &str) {
    let mut child = partlog()
        .arg("produce")
        .arg(dir)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn run(command: &mut Command) -> Output {
    command.stdin(Stdio::null()).output().unwrap()
}

fn logs_of(dir: &Path) -> Vec<PathBuf> {
    kafka::segment_files(dir, &["log"])
}

/// Lines of `ours` not in `theirs` and of `theirs` not in `ours`, in order (a plain LCS diff).
fn diff(ours: &str, theirs: &str) -> Vec<String> {
    let a: Vec<&str> = ours.lines().collect();
    let b: Vec<&str> = theirs.lines().collect();
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            i += 1;
            j += 1;
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] >= lcs[i + 1][j]) {
            out.push(format!("> {}", b[j]));
            j += 1;
        } else {
            out.push(format!("< {}", a[i]));
            i += 1;
        }
    }
    out
}

/// A log of several segments: keyed, unkeyed, empty and null values, headers, lz4 and zstd.
fn mixed_log(root: &Path) -> PathBuf {
    let dir = root.join("mixed-0");
    let lines: String = (0..300)
        .map(|i| match i % 5 {
            0 => format!("h{i}:v,h2\tkey{i}=value {i}\n"),
            1 => format!("\tno key {i} é ü\n"),
            2 => format!("\tkey{i}=\n"),
            3 => format!("\tkey{i}=NULL\n"),
            _ => format!("a:b\tkey{i}={}\n", "x".repeat(i)),
        })
        .collect();
    let common = [
        "--key-separator",
        "=",
        "--header-separator",
        "\t",
        "--null-marker",
        "NULL",
        "--segment-bytes",
        "8192",
        "--allow-small-segments",
    ];
    for codec in ["none", "lz4", "zstd"] {
        let mut args = common.to_vec();
        args.extend(["--compression", codec, "--batch", "7"]);
        produce(&dir, &args, &lines);
    }
    dir
}

/// A compacted log: duplicates, then tombstones kept with a delete horizon by a pass with the
/// default delete.retention.ms, leaving gaps.
fn compacted_log(root: &Path) -> PathBuf {
    let dir = root.join("compacted-0");
    let mut lines = String::new();
    for round in 0..6 {
        for key in 0..40 {
            lines.push_str(&format!("user{key}=round {round}\n"));
        }
    }
    for key in 0..10 {
        lines.push_str(&format!("user{key}=DELETE\n"));
    }
    // More rounds of the other keys, so that the tombstones' segment is sealed and cleaned.
    for round in 6..9 {
        for key in 10..40 {
            lines.push_str(&format!("user{key}=round {round}\n"));
        }
    }
    produce(
        &dir,
        &[
            "--key-separator",
            "=",
            "--null-marker",
            "DELETE",
            "--cleanup-policy",
            "compact",
            "--segment-bytes",
            "2048",
            "--allow-small-segments",
            "--batch",
            "5",
        ],
        &lines,
    );
    let output = run(partlog().arg("compact").arg(&dir));
    assert!(output.status.success(), "{output:?}");
    dir
}

#[test]
fn partlog_dump_records_diffs_clean_against_dump_log_segments() {
    let temp = tempfile::tempdir().unwrap();
    for dir in [mixed_log(temp.path()), compacted_log(temp.path())] {
        let Some(theirs) =
            kafka::dump_log_segments(&logs_of(&dir), &["--deep-iteration", "--print-data-log"])
        else {
            return;
        };
        assert!(theirs.status.success(), "{theirs:?}");
        let ours = run(partlog().arg("dump").arg(&dir).arg("--records"));
        assert!(ours.status.success(), "{ours:?}");
        let stdout = String::from_utf8(ours.stdout).unwrap();
        assert!(stdout.lines().count() > 100, "{stdout}");
        let differences = diff(&stdout, &theirs.stdout);
        assert!(
            differences.is_empty(),
            "{}: partlog dump --records and DumpLogSegments differ:\n{}",
            dir.display(),
            differences.join("\n")
        );
        // Every gap partlog reports, Kafka reports too (Kafka adds each segment's first record
        // as following -1).
        let ours_gaps = kafka::non_consecutive_offsets(&kafka::Output {
            stderr: String::from_utf8(ours.stderr).unwrap(),
            stdout: String::new(),
            ..theirs.clone()
        });
        let theirs_gaps = kafka::non_consecutive_offsets(&theirs);
        for gap in &ours_gaps {
            assert!(theirs_gaps.contains(gap), "{gap:?} not in {theirs_gaps:?}");
        }
        let real_gaps: Vec<_> = theirs_gaps
            .iter()
            .filter(|(file, before, after)| {
                let base: i64 = file.file_stem().unwrap().to_str().unwrap().parse().unwrap();
                *before != -1 || *after != base
            })
            .collect();
        assert_eq!(
            ours_gaps.len(),
            real_gaps.len(),
            "{ours_gaps:?} vs {theirs_gaps:?}"
        );
        if dir.ends_with("compacted-0") {
            assert!(!ours_gaps.is_empty(), "compaction left no gap to report");
            assert!(
                stdout.contains("deleteHorizonMs: OptionalLong["),
                "no tombstone kept its horizon: {stdout}"
            );
        }
    }
}

#[test]
fn partlog_dump_file_matches_dump_log_segments_file_by_file() {
    let temp = tempfile::tempdir().unwrap();
    let dir = mixed_log(temp.path());
    let logs = logs_of(&dir);
    assert!(logs.len() >= 3, "{logs:?}");
    // The last segment gets a garbage tail, which both tools must report the same way.
    let damaged = logs.last().unwrap();
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(damaged)
        .unwrap();
    file.write_all(&[0x47; 100]).unwrap();
    drop(file);
    let cases: &[&[&str]] = &[
        &["--deep-iteration", "--print-data-log"],
        &[
            "--deep-iteration",
            "--print-data-log",
            "--skip-record-metadata",
        ],
        &["--max-bytes", "3000"],
        &[],
    ];
    for kafka_args in cases {
        let our_args: Vec<&str> = kafka_args
            .iter()
            .copied()
            .filter(|arg| *arg != "--deep-iteration")
            .map(|arg| {
                if arg == "--print-data-log" {
                    "--records"
                } else {
                    arg
                }
            })
            .collect();
        for log in [&logs[0], damaged] {
            let Some(theirs) = kafka::dump_log_segments(&[log], kafka_args) else {
                return;
            };
            let ours = run(partlog().arg("dump").arg(log).args(&our_args));
            let stdout = String::from_utf8(ours.stdout).unwrap();
            let differences = diff(&stdout, &theirs.stdout);
            assert!(
                differences.is_empty(),
                "partlog dump {} {our_args:?} vs DumpLogSegments {kafka_args:?}:\n{}",
                log.display(),
                differences.join("\n")
            );
            let expected_status = if log == damaged && !kafka_args.contains(&"--max-bytes") {
                1
            } else {
                0
            };
            assert_eq!(
                ours.status.code(),
                Some(expected_status),
                "{}",
                log.display()
            );
        }
    }
    assert!(
        String::from_utf8(run(partlog().arg("dump").arg(damaged)).stdout)
            .unwrap()
            .contains("Found 100 invalid bytes at the end of ")
    );
}

/// `partlog dump --producer-state` prints both files exactly as DumpLogSegments does.
#[test]
fn partlog_dump_prints_snapshot_and_txnindex_like_kafka_dump_log_segments() {
    let dir = tempfile::tempdir().unwrap();
    let dir = std::path::absolute(dir.path()).unwrap();
    let log = Log::open(&dir, LogConfig::default()).unwrap();
    log.append(&[NewRecord::new(1_700_000_000_000, None, Some(b"v"))])
        .unwrap();
    log.close().unwrap();
    drop(log);
    let txn_index = write_txn_index(&dir, 0);
    let snapshot = write_snapshot(&*os(), &dir, 1, &snapshot_entries()).unwrap();
    let output = partlog()
        .arg("dump")
        .arg(&dir)
        .arg("--producer-state")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let ours = String::from_utf8(output.stdout).unwrap();
    let from = ours
        .find("Dumping ")
        .and_then(|first| ours[first..].find(".txnindex").map(|_| first))
        .unwrap_or_else(|| panic!("{ours}"));
    let ours: Vec<&str> = ours[from..]
        .lines()
        .skip_while(|line| !line.ends_with(".txnindex"))
        .collect();
    let Some(dump) = kafka::dump_log_segments(&[&txn_index, &snapshot], &[]) else {
        return;
    };
    assert!(dump.status.success(), "{dump:?}");
    assert_eq!(dump.stderr, "", "{dump:?}");
    let kafka: Vec<&str> = dump.stdout.lines().collect();
    assert_eq!(ours, kafka, "{dump:?}");
}

/// Issue 32, item 1: a log with a committed and an aborted transaction and their markers (one
/// written with coordinator epoch 3): `partlog dump --records` diffs clean against
/// DumpLogSegments, markers included (`endTxnMarker: COMMIT coordinatorEpoch: 3`), and
/// `--txn-state` only adds its field to the transactional records' lines.
#[test]
fn partlog_dump_of_transactions_diffs_clean_and_txn_state_only_adds_its_field() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("transactions-0");
    let log = Log::open(&dir, LogConfig::default()).unwrap();
    let t0 = 1_700_000_000_000;
    log.append(&[NewRecord::new(t0, Some(b"k"), Some(b"plain"))])
        .unwrap();
    let mut sequence = 0;
    for (values, marker, coordinator_epoch) in [
        (&["c1", "c2"][..], ControlRecordType::Commit, 3),
        (&["a1", "a2", "a3"], ControlRecordType::Abort, 4),
    ] {
        let mut batch = BatchBuilder::new(Compression::None)
            .producer(5, 0, sequence)
            .transactional(true);
        for value in values {
            batch.push(
                &NewRecord::new(t0, Some(b"k"), Some(value.as_bytes())).with_header("h", None),
            );
        }
        log.append_batch(&batch.build().unwrap()).unwrap();
        log.append_marker(5, 0, marker, coordinator_epoch).unwrap();
        sequence += values.len() as i32;
    }
    log.close().unwrap();
    drop(log);
    let Some(theirs) =
        kafka::dump_log_segments(&logs_of(&dir), &["--deep-iteration", "--print-data-log"])
    else {
        return;
    };
    assert!(theirs.status.success(), "{theirs:?}");
    assert!(
        theirs
            .stdout
            .contains("endTxnMarker: COMMIT coordinatorEpoch: 3"),
        "{theirs:?}"
    );
    for (flag, marks) in [("--records", 0), ("--txn-state", 5)] {
        let ours = run(partlog().arg("dump").arg(&dir).arg(flag));
        assert!(ours.status.success(), "{ours:?}");
        let stdout = String::from_utf8(ours.stdout).unwrap();
        assert_eq!(stdout.matches(" txnState: ").count(), marks, "{stdout}");
        assert_eq!(
            stdout.matches(" txnState: aborted").count(),
            marks * 3 / 5,
            "{stdout}"
        );
        let unmarked = stdout
            .replace(" txnState: committed", "")
            .replace(" txnState: aborted", "");
        let differences = diff(&unmarked, &theirs.stdout);
        assert!(
            differences.is_empty(),
            "partlog dump {flag} and DumpLogSegments differ:\n{}",
            differences.join("\n")
        );
    }
}

/// Issue 33: `partlog dump --transaction-log-decoder` on a `__transaction_state` partition
/// prints what DumpLogSegments' `--transaction-log-decoder` prints: every state of a
/// transactional id as Kafka's JSON, versions 0 and 1 (tagged fields included), partitions,
/// names that need escaping, and `<DELETE>` for a tombstone. The diff shows no line at all.
#[test]
fn partlog_dump_transaction_log_decoder_diffs_clean_against_dump_log_segments() {
    use partlog_engine::txn::log_records::{
        TransactionLogValue, TxnTopicPartitions, encode_key, encode_value,
    };
    use partlog_engine::txn::state::TransactionState;

    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("__transaction_state-0");
    let log = Log::open(&dir, LogConfig::default()).unwrap();
    let t0 = 1_700_000_000_000;
    let states = [
        (TransactionState::Empty, &[][..], 0),
        (
            TransactionState::Ongoing,
            &[("orders", &[0, 3][..]), ("ledger", &[1])][..],
            1,
        ),
        (
            TransactionState::PrepareCommit,
            &[("orders", &[0, 3][..])],
            1,
        ),
        (TransactionState::CompleteCommit, &[], 1),
        (TransactionState::PrepareAbort, &[("a\"b\\c", &[2][..])], 0),
        (TransactionState::CompleteAbort, &[], 0),
    ];
    for (i, (state, partitions, version)) in states.into_iter().enumerate() {
        let mut value = TransactionLogValue::new(1000, i as i16, 60_000, state);
        value.partitions = partitions
            .iter()
            .map(|(topic, ids)| TxnTopicPartitions {
                topic: (*topic).to_owned(),
                partitions: ids.to_vec(),
            })
            .collect();
        value.last_update_timestamp_ms = t0 + i as i64;
        value.start_timestamp_ms = if state == TransactionState::Empty {
            -1
        } else {
            t0
        };
        if version == 1 && state == TransactionState::CompleteCommit {
            value.next_producer_id = 1001;
            value.client_transaction_version = 2;
        }
        let bytes = encode_value(&value, version).unwrap();
        let key = encode_key(if i % 2 == 0 { "txn-1" } else { "payments\ttx" }).unwrap();
        log.append(&[NewRecord::new(t0 + i as i64, Some(&key), Some(&bytes))])
            .unwrap();
    }
    let key = encode_key("txn-1").unwrap();
    log.append(&[NewRecord::new(t0 + 9, Some(&key), None)])
        .unwrap();
    log.close().unwrap();
    drop(log);

    let Some(theirs) = kafka::dump_log_segments(
        &logs_of(&dir),
        &[
            "--deep-iteration",
            "--print-data-log",
            "--transaction-log-decoder",
        ],
    ) else {
        return;
    };
    assert!(theirs.status.success(), "{theirs:?}");
    assert_eq!(theirs.stderr.trim(), "", "{theirs:?}");
    let ours = run(partlog()
        .arg("dump")
        .arg(&dir)
        .arg("--transaction-log-decoder"));
    assert!(ours.status.success(), "{ours:?}");
    let stdout = String::from_utf8(ours.stdout).unwrap();
    assert!(stdout.contains("payload: <DELETE>"), "{stdout}");
    assert!(
        stdout.contains("\"transactionStatus\":\"CompleteCommit\""),
        "{stdout}"
    );
    let differences = diff(&stdout, &theirs.stdout);
    assert!(
        differences.is_empty(),
        "partlog dump --transaction-log-decoder and DumpLogSegments differ:\n{}",
        differences.join("\n")
    );
}

/// Issue 34: `partlog dump --offsets-decoder` on a `__consumer_offsets` partition prints what
/// DumpLogSegments' `--offsets-decoder` prints: offset commits at every value version (v1's
/// expire timestamp, v4's topic id), a key of record type 0, group records at every version
/// with a consumer group's blobs decoded, another protocol type's blobs and a blob that does
/// not parse left as base64, names that need escaping, and `<DELETE>` for tombstones. The diff
/// shows no line at all.
#[test]
fn partlog_dump_offsets_decoder_diffs_clean_against_dump_log_segments() {
    use partlog_groups::group::consumer_protocol::{Assignment, Subscription, TopicPartitions};
    use partlog_groups::offsets::records::{
        GroupMetadataValue, MemberMetadata, OffsetCommitValue, OffsetsKey,
    };

    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("__consumer_offsets-42");
    let log = Log::open(&dir, LogConfig::default()).unwrap();
    let t0 = 1_700_000_000_000_i64;
    let commit_key = |group: &str, partition| {
        OffsetsKey::OffsetCommit {
            group: group.into(),
            topic: "orders".into(),
            partition,
        }
        .encode()
        .unwrap()
    };
    let group_key = |group: &str| {
        OffsetsKey::GroupMetadata {
            group: group.into(),
        }
        .encode()
        .unwrap()
    };
    let mut subscription = Subscription::new(["orders", "pay\"ments"]);
    subscription.owned_partitions = vec![TopicPartitions::new("orders", [0])];
    subscription.generation_id = 4;
    subscription.user_data = Some(vec![0, 0, 0, 5]);
    let member = |id: &str, version: i16, subscription_blob: Vec<u8>| MemberMetadata {
        member_id: id.into(),
        group_instance_id: (version >= 3).then(|| "static-1".to_owned()),
        client_id: "c\tlient".into(),
        client_host: "/127.0.0.1".into(),
        rebalance_timeout: 300_000,
        session_timeout: 45_000,
        subscription: subscription_blob,
        assignment: Assignment {
            assigned_partitions: vec![TopicPartitions::new("orders", [0, 1])],
            user_data: None,
        }
        .encode(version.min(3))
        .unwrap(),
    };
    let group = |protocol_type: &str, generation, members| GroupMetadataValue {
        protocol_type: protocol_type.into(),
        generation,
        protocol: Some("range".into()),
        leader: Some("c-1".into()),
        current_state_timestamp: t0,
        members,
    };
    let mut records: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
    for version in 0..=4_i16 {
        let mut value = OffsetCommitValue::new(10 + i64::from(version), "meta\"", t0);
        value.leader_epoch = 3;
        if version == 1 {
            value.expire_timestamp = Some(t0 + 86_400_000);
        }
        if version == 4 {
            value.topic_id = *b"0123456789abcdef";
        }
        records.push((
            commit_key("g1", i32::from(version)),
            Some(value.encode_version(version).unwrap()),
        ));
        let blob = subscription.encode(version.min(3)).unwrap();
        let members = vec![member("c-1", version, blob)];
        records.push((
            group_key("g1"),
            Some(
                group("consumer", i32::from(version), members)
                    .encode_version(version)
                    .unwrap(),
            ),
        ));
    }
    // Record type 0: Kafka's oldest offset commit key.
    let mut old_key = commit_key("g1", 9);
    old_key[1] = 0;
    records.push((
        old_key,
        Some(OffsetCommitValue::new(7, "", t0).encode_version(0).unwrap()),
    ));
    // Another protocol type's blobs, and a consumer blob that does not parse, stay base64.
    let connect = group("connect", 2, vec![member("w-1", 3, b"opaque".to_vec())]);
    records.push((group_key("connect-g"), Some(connect.encode().unwrap())));
    let broken = group("consumer", 3, vec![member("c-2", 3, vec![0, 1, 0])]);
    records.push((group_key("g2"), Some(broken.encode().unwrap())));
    // An empty group, then tombstones.
    let mut empty = group("consumer", 5, Vec::new());
    empty.protocol = None;
    empty.leader = None;
    records.push((group_key("g1"), Some(empty.encode().unwrap())));
    records.push((commit_key("g1", 0), None));
    records.push((group_key("g1"), None));
    for (i, (key, value)) in records.iter().enumerate() {
        log.append(&[NewRecord::new(t0 + i as i64, Some(key), value.as_deref())])
            .unwrap();
    }
    log.close().unwrap();
    drop(log);

    let Some(theirs) = kafka::dump_log_segments(
        &logs_of(&dir),
        &["--deep-iteration", "--print-data-log", "--offsets-decoder"],
    ) else {
        return;
    };
    assert!(theirs.status.success(), "{theirs:?}");
    assert_eq!(theirs.stderr.trim(), "", "{theirs:?}");
    let ours = run(partlog().arg("dump").arg(&dir).arg("--offsets-decoder"));
    assert!(ours.status.success(), "{ours:?}");
    let stdout = String::from_utf8(ours.stdout).unwrap();
    assert!(stdout.contains("payload: <DELETE>"), "{stdout}");
    assert!(
        stdout.contains(r#""assignment":{"assignedPartitions":[{"topic":"orders","partitions":[0,1]}],"userData":null}"#),
        "{stdout}"
    );
    assert!(stdout.contains(r#""subscription":"AAEA""#), "{stdout}");
    let differences = diff(&stdout, &theirs.stdout);
    assert!(
        differences.is_empty(),
        "partlog dump --offsets-decoder and DumpLogSegments differ:\n{}",
        differences.join("\n")
    );
}
