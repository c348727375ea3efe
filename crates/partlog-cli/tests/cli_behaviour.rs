//! How the `partlog` tool behaves at its edges: help with an example on every command; bad
//! arguments, a missing directory and a locked log as one clear line and a non-zero exit, never
//! a backtrace; `verify` exiting 1 on corruption (a flipped CRC-covered bit below the recovery
//! point, a wrong index entry) and 0 on a genuine torn tail (a killed producer, then half a
//! batch appended to its active segment); and `dump` on a log whose start offset lies inside a
//! segment, with headers and bytes that are not UTF-8.

#[path = "common/cli.rs"]
mod cli;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use cli::{partlog, run, run_with_input, text};
use partlog::{Log, LogConfig, NewRecord};

/// Asserts the error contract: exit status 2, nothing on stdout, and exactly one line on stderr
/// that starts with `partlog: ` and contains `expected`.
fn assert_one_line_error(output: &Output, expected: &str, context: &str) {
    let stderr = text(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(2),
        "{context}: exit status; stderr: {stderr}"
    );
    assert!(
        output.stdout.is_empty(),
        "{context}: stdout {:?}",
        text(&output.stdout)
    );
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{context}: not one line: {stderr:?}");
    assert!(lines[0].starts_with("partlog: "), "{context}: {stderr:?}");
    assert!(
        lines[0].contains(expected),
        "{context}: {stderr:?} does not mention {expected:?}"
    );
    assert!(!stderr.contains("panicked"), "{context}: {stderr:?}");
}

#[test]
fn every_command_has_help_with_an_example() {
    for command in [
        None,
        Some("produce"),
        Some("consume"),
        Some("dump"),
        Some("verify"),
        Some("stats"),
        Some("perf-produce"),
        Some("perf-consume"),
        Some("delete-records"),
        Some("retention"),
        Some("upgrade"),
        Some("compact"),
        Some("config"),
        Some("roll"),
        Some("txn"),
    ] {
        let mut args: Vec<&str> = command.into_iter().collect();
        args.push("--help");
        let output = run(partlog().args(&args));
        let help = text(&output.stdout);
        assert!(
            output.status.success(),
            "{args:?}: {}",
            text(&output.stderr)
        );
        assert!(help.contains("Usage: partlog"), "{args:?}: {help}");
        assert!(help.contains("Examples:"), "{args:?}: {help}");
        let example = format!("partlog {}", command.unwrap_or("produce"));
        assert!(
            help.lines()
                .skip_while(|l| !l.starts_with("Examples:"))
                .any(|l| l.contains(&example)),
            "{args:?}: no example running {example:?}: {help}"
        );
    }
}

/// The commands and flags issue 15 added each show in an example of their command's help.
#[test]
fn the_new_commands_and_flags_have_examples_in_their_help() {
    for (command, example) in [
        (
            "config",
            "partlog config /tmp/users-0 --set cleanup.policy=compact",
        ),
        ("roll", "partlog roll /tmp/users-0"),
        ("consume", "-Z -f '%o %k %s %T %h\\n'"),
        ("consume", "-o s@1700000000000 -o e@1700003600000"),
        (
            "dump",
            "partlog dump /tmp/orders-0/00000000000000000000.log",
        ),
        ("dump", "--skip-record-metadata"),
        ("dump", "--max-bytes"),
        (
            "perf-produce",
            "--acks all --linger-ms 10 --batch-size 65536",
        ),
        ("perf-produce", "--throughput 20000 --payload-file"),
        ("perf-consume", "--csv"),
        ("produce", "--create --max-message-bytes"),
        ("stats", "--batches"),
        ("delete-records", "--before -1"),
        ("produce", "--producer-id 7 --producer-epoch 0"),
        ("produce", "--transactional"),
        (
            "txn",
            "partlog txn commit /tmp/ledger-0 --producer-id 7 --producer-epoch 0",
        ),
        ("txn", "--transactional --no-commit"),
    ] {
        let output = run(partlog().args([command, "--help"]));
        let help = text(&output.stdout);
        let examples: Vec<&str> = help
            .lines()
            .skip_while(|l| !l.starts_with("Examples:"))
            .filter(|l| l.trim_start().starts_with("partlog ") || l.contains("| partlog "))
            .collect();
        assert!(
            examples.iter().any(|l| l.contains(example)),
            "{command} --help has no example with {example:?}: {examples:#?}"
        );
    }
}

#[test]
fn bad_arguments_are_one_clear_line() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("log");
    let dir = dir.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["produce"], "<DIR>"),
        (&["frobnicate"], "frobnicate"),
        (&["produce", dir, "--compression", "gzip"], "gzip"),
        (
            &["produce", dir, "--flush", "sometimes"],
            "always, never or interval:MS",
        ),
        (&["produce", dir, "--flush", "interval:0"], "interval:0"),
        (&["produce", dir, "--batch", "0"], "at least 1"),
        (
            &["produce", dir, "--key-separator", ""],
            "must not be empty",
        ),
        (
            &["produce", dir, "--segment-bytes", "1000"],
            "segment.bytes",
        ),
        (&["dump", dir, "--bogus"], "--bogus"),
        (&["dump", dir, "--from", "ten"], "ten"),
    ];
    for (args, expected) in cases {
        let output = run(partlog().args(*args));
        assert_one_line_error(&output, expected, &format!("{args:?}"));
    }
    assert!(
        !Path::new(dir).exists(),
        "a rejected command created the log"
    );
}

#[test]
fn a_missing_or_wrong_directory_is_one_clear_line() {
    let temp = tempfile::tempdir().unwrap();
    let missing = temp.path().join("missing");
    for command in ["dump", "verify"] {
        let output = run(partlog().arg(command).arg(&missing));
        assert_one_line_error(&output, "no such directory", command);
    }
    let file = temp.path().join("a-file");
    std::fs::write(&file, b"not a log").unwrap();
    let output = run(partlog().arg("verify").arg(&file));
    assert_one_line_error(&output, "is not a directory", "verify");
    // dump takes a single segment file too, and says what it takes.
    let output = run(partlog().arg("dump").arg(&file));
    assert_one_line_error(&output, "is not a segment file", "dump");
    let output = run_with_input(partlog().arg("produce").arg(&file), b"x\n");
    assert_one_line_error(&output, "is not a directory", "produce into a file");
    let output = run(partlog().arg("dump").arg(temp.path()));
    assert_one_line_error(
        &output,
        "holds no log segments",
        "dump of an empty directory",
    );
    assert!(
        !temp.path().join("partlog.lock").exists(),
        "dump wrote a file"
    );
}

#[test]
fn a_log_another_process_writes_is_refused_in_one_line() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("log");
    let log = Log::open(&dir, LogConfig::default()).unwrap();
    log.append(&[NewRecord::new(0, None, Some(b"held"))])
        .unwrap();
    // verify needs the shared lock; writing commands the exclusive one.
    let output = run(partlog().arg("verify").arg(&dir));
    assert_one_line_error(&output, "locked", "verify");
    // ... and says which commands read a live log.
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("partlog dump and partlog consume read a live log"),
        "{stderr}"
    );
    let output = run_with_input(partlog().arg("produce").arg(&dir), b"x\n");
    assert_one_line_error(&output, "locked", "produce");
    for command in [&["retention"][..], &["delete-records", "--before", "1"]] {
        let output = run(partlog().arg(command[0]).arg(&dir).args(&command[1..]));
        assert_one_line_error(&output, "locked", command[0]);
    }
    // Reading commands take no lock: they read what the live writer appended.
    let output = run(partlog().arg("consume").arg(&dir));
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), "held\n");
    let output = run(partlog().arg("dump").arg(&dir));
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(text(&output.stdout).contains("baseOffset: 0 lastOffset: 0 count: 1"));
    log.close().unwrap();
}

#[test]
fn a_line_too_large_stops_produce_with_its_line_number() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("log");
    let mut input = b"small\n".to_vec();
    input.extend(std::iter::repeat_n(b'x', 2 << 20));
    input.extend_from_slice(b"\nnever appended\n");
    let output = run_with_input(
        partlog().arg("produce").arg(&dir).arg("--print-offsets"),
        &input,
    );
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with("partlog: cannot append line 2: ") && stderr.lines().count() == 1,
        "{stderr:?}"
    );
    assert_eq!(
        text(&output.stdout),
        "0\n",
        "the first line was acknowledged"
    );
    let dumped = run(partlog().arg("dump").arg(&dir).arg("--json"));
    assert_eq!(
        text(&dumped.stdout).lines().count(),
        1,
        "{}",
        text(&dumped.stderr)
    );
}

#[test]
fn empty_input_makes_an_empty_log() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("log");
    let output = run_with_input(partlog().arg("produce").arg(&dir), b"");
    assert!(output.status.success(), "{}", text(&output.stderr));
    let dumped = run(partlog().arg("dump").arg(&dir).arg("--json"));
    assert!(dumped.status.success() && dumped.stdout.is_empty());
    let verified = run(partlog().arg("verify").arg(&dir));
    assert!(verified.status.success(), "{}", text(&verified.stdout));
    assert!(text(&verified.stdout).contains("result: ok: offsets [0, 0)"));
}

/// Writes `lines` lines of about 100 bytes, in batches of 10, and closes the log cleanly.
fn produce_lines(dir: &Path, lines: usize) {
    let input: String = (0..lines)
        .map(|i| format!("key{i}=value {i} {}\n", "v".repeat(80)))
        .collect();
    let output = run_with_input(
        partlog()
            .arg("produce")
            .arg(dir)
            .args(["--key-separator", "=", "--batch", "10"]),
        input.as_bytes(),
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
}

/// The byte positions of the batches of a `.log` file, read from their length fields.
fn batch_positions(log: &Path) -> Vec<u64> {
    let bytes = std::fs::read(log).unwrap();
    let mut positions = Vec::new();
    let mut at = 0usize;
    while at + 12 <= bytes.len() {
        positions.push(at as u64);
        let length = i32::from_be_bytes(bytes[at + 8..at + 12].try_into().unwrap());
        at += 12 + usize::try_from(length).unwrap();
    }
    assert_eq!(at, bytes.len(), "{} does not end on a batch", log.display());
    positions
}

fn flip_bit(path: &Path, position: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[usize::try_from(position).unwrap()] ^= 0x10;
    std::fs::write(path, bytes).unwrap();
}

fn first_segment(dir: &Path, extension: &str) -> PathBuf {
    dir.join(format!("{:020}.{extension}", 0))
}

#[test]
fn verify_fails_on_a_flipped_bit_below_the_recovery_point() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("log");
    produce_lines(&dir, 300);
    let clean = run(partlog().arg("verify").arg(&dir));
    assert!(clean.status.success(), "{}", text(&clean.stdout));
    assert!(text(&clean.stdout).contains("last shutdown: clean"));

    // A value byte of the 5th batch: covered by the CRC, and below the recovery point, which a
    // clean close puts at the log end.
    let log_file = first_segment(&dir, "log");
    let position = batch_positions(&log_file)[4] + 61 + 20;
    flip_bit(&log_file, position);
    let output = run(partlog().arg("verify").arg(&dir));
    let report = text(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{report}");
    let batch_position = batch_positions(&log_file)[4];
    assert!(
        report.contains(&format!(
            "CORRUPT: {} at byte {batch_position}: crc mismatch",
            log_file.display()
        )),
        "{report}"
    );
    assert!(report.contains("result: CORRUPT"), "{report}");
    assert!(!report.contains("torn tail"), "{report}");

    // A reader meets it too: it shows the four batches before it, then says so in one line.
    let dumped = run(partlog().arg("dump").arg(&dir));
    assert_eq!(dumped.status.code(), Some(1));
    let batches = text(&dumped.stdout)
        .lines()
        .filter(|line| line.starts_with("baseOffset:"))
        .count();
    assert_eq!(batches, 4, "{}", text(&dumped.stdout));
    let stderr = text(&dumped.stderr);
    assert!(
        stderr.lines().count() == 1 && stderr.contains("corrupt data") && stderr.contains("crc"),
        "{stderr:?}"
    );
}

#[test]
fn verify_fails_on_an_index_entry_that_names_the_wrong_batch() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("log");
    produce_lines(&dir, 1000);
    let index = first_segment(&dir, "index");
    let entries = std::fs::metadata(&index).unwrap().len() / 8;
    assert!(entries >= 3, "only {entries} index entries");

    // Entry 1's relative offset, one lower: still increasing, so only the batch check sees it.
    let mut bytes = std::fs::read(&index).unwrap();
    let offset = i32::from_be_bytes(bytes[8..12].try_into().unwrap());
    bytes[8..12].copy_from_slice(&(offset - 1).to_be_bytes());
    std::fs::write(&index, bytes).unwrap();
    let output = run(partlog().arg("verify").arg(&dir));
    let report = text(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{report}");
    assert!(
        report.contains(&format!(
            "CORRUPT: {} at byte 8: 1 of {entries} entries",
            index.display()
        )),
        "{report}"
    );
    assert!(
        report.contains(&format!("entry 1 holds offset {}", offset - 1)),
        "{report}"
    );

    // The time index: the first entry's timestamp, one lower (still below the next entry's).
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("log");
    produce_lines(&dir, 1000);
    let time_index = first_segment(&dir, "timeindex");
    let mut bytes = std::fs::read(&time_index).unwrap();
    let timestamp = i64::from_be_bytes(bytes[0..8].try_into().unwrap());
    bytes[0..8].copy_from_slice(&(timestamp - 1).to_be_bytes());
    std::fs::write(&time_index, bytes).unwrap();
    let output = run(partlog().arg("verify").arg(&dir));
    let report = text(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{report}");
    assert!(
        report.contains(&format!(
            "entry 0 holds timestamp {} for offset",
            timestamp - 1
        )),
        "{report}"
    );
}

#[test]
fn verify_accepts_a_torn_tail_after_a_kill_and_open_truncates_it() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("log");
    // A producer that acknowledges 50 lines, then dies without closing the log.
    let mut child = partlog()
        .arg("produce")
        .arg(&dir)
        .args(["--flush", "always", "--print-offsets", "--batch", "1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for i in 0..50 {
        writeln!(stdin, "line {i}").unwrap();
    }
    stdin.flush().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    for expected in 0..50 {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line, format!("{expected}\n"));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    drop(stdin);

    // The start of a batch whose end never reached the file: what a write cut short leaves.
    let log_file = first_segment(&dir, "log");
    let bytes = std::fs::read(&log_file).unwrap();
    let last = *batch_positions(&log_file).last().unwrap() as usize;
    let half = &bytes[last..last + (bytes.len() - last) / 2];
    std::fs::OpenOptions::new()
        .append(true)
        .open(&log_file)
        .unwrap()
        .write_all(half)
        .unwrap();

    let output = run(partlog().arg("verify").arg(&dir));
    let report = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{report}");
    // Not clean; a log this young may not have written its first checkpoint record yet.
    assert!(!report.contains("last shutdown: clean"), "{report}");
    assert!(
        report.contains(&format!(
            "crash state: {} at byte {}: torn tail: {} bytes",
            log_file.display(),
            bytes.len(),
            half.len()
        )),
        "{report}"
    );
    assert!(
        report.contains("result: ok, with what a crash leaves behind")
            && report.contains("end at offset 50"),
        "{report}"
    );
    assert_eq!(
        std::fs::read(&log_file).unwrap().len(),
        bytes.len() + half.len(),
        "verify wrote"
    );

    let log = Log::open(&dir, LogConfig::default()).unwrap();
    assert_eq!(log.recovery_report().bytes_truncated, half.len() as u64);
    assert_eq!(log.log_end_offset(), 50);
    log.close().unwrap();
    // The lock goes with the handle.
    drop(log);
    let output = run(partlog().arg("verify").arg(&dir));
    let report = text(&output.stdout);
    assert!(output.status.success(), "{report}");
    assert!(
        report.contains("result: ok: offsets [0, 50)") && !report.contains("torn"),
        "{report}"
    );
}

#[test]
fn dump_starts_at_the_log_start_offset_and_shows_every_field() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("log");
    let log = Log::open(&dir, LogConfig::default()).unwrap();
    for i in 0..10u8 {
        let record = NewRecord::new(1_000 + i64::from(i), Some(&[0xff, i]), Some(b"v"))
            .with_header("h", Some(b"x"))
            .with_header("h", None);
        log.append(&[record.clone(), record]).unwrap();
    }
    log.delete_records_before(5).unwrap();
    log.close().unwrap();
    drop(log);

    let dumped = run(partlog().arg("dump").arg(&dir).arg("--json"));
    let json = text(&dumped.stdout);
    let lines: Vec<&str> = json.lines().collect();
    assert_eq!(lines.len(), 15, "{json}{}", text(&dumped.stderr));
    assert_eq!(
        lines[0],
        r#"{"offset":5,"timestamp":1002,"key":{"base64":"/wI="},"value":"v","headers":[["h","x"],["h",null]]}"#
    );
    // Bytes below the start offset cannot be read, so the first segment's positions are not known.
    let dumped = run(partlog().arg("dump").arg(&dir).arg("--records"));
    let human = text(&dumped.stdout);
    assert!(
        human.contains("baseOffset: 4 lastOffset: 5 count: 2"),
        "{human}"
    );
    assert!(human.contains("position: unknown"), "{human}");
    assert!(!human.contains("| offset: 4 "), "{human}");
    assert!(
        human.contains("headerKeys: [h,h] key: \u{fffd}\\x02 payload: v"),
        "{human}"
    );

    let output = run(partlog().arg("dump").arg(&dir).args(["--from", "3"]));
    assert_one_line_error(&output, "out of range", "dump below the start");
}

/// Runs `partlog args` with standard output connected to `stdout`.
fn run_with_stdout(args: &[&str], stdout: Stdio) -> Output {
    partlog()
        .args(args)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .output()
        .expect("run partlog")
}

/// `partlog stats DIR | grep -q ...` closes the pipe after the first match: the tool must finish
/// quietly with status 0 (as `dump` and `consume` always did), not report an internal error.
/// A stdout that fails otherwise (`/dev/full`) is one clear line and status 2.
#[test]
fn a_closed_or_full_stdout_is_handled_by_every_reporting_command() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("log");
    produce_lines(&dir, 50);
    let dir = dir.to_str().unwrap();
    let commands: &[&[&str]] = &[
        &["stats", dir],
        &["stats", dir, "--json"],
        &["verify", dir],
        &["dump", dir, "--records"],
        &["dump", dir, "--index"],
        &["consume", dir],
        &["perf-consume", dir],
        &["retention", dir],
        &["delete-records", dir, "--before", "0"],
        &["compact", dir],
        &["config", dir, "--all"],
    ];
    for args in commands {
        let (reader, writer) = std::io::pipe().unwrap();
        // The reader is gone before the tool starts: its first write meets EPIPE.
        drop(reader);
        let output = run_with_stdout(args, Stdio::from(writer));
        let stderr = text(&output.stderr);
        assert!(
            output.status.success(),
            "{args:?} with a closed stdout: {:?}, stderr {stderr:?}",
            output.status
        );
        assert!(
            stderr.is_empty(),
            "{args:?} with a closed stdout: {stderr:?}"
        );

        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("Linux has /dev/full");
        let output = run_with_stdout(args, Stdio::from(full));
        assert_one_line_error(
            &output,
            "No space left on device",
            &format!("{args:?} > /dev/full"),
        );
    }
}

/// `partlog dump DIR --index | grep -m3 '^offset:'`: the reader leaves in the middle of the
/// index entries, with far more than a pipe holds still to come. Every report command ends
/// quietly then (status 0, nothing on standard error), the index dump included.
#[test]
fn a_reader_that_leaves_mid_output_ends_every_report_command_quietly() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("log");
    // An index entry for every batch: tens of thousands of index lines, megabytes of output.
    let config = LogConfig::builder()
        .index_interval_bytes(0)
        .build()
        .unwrap();
    let log = Log::open(&dir, config).unwrap();
    for i in 0..20_000_i64 {
        log.append(&[NewRecord::new(1_700_000_000_000 + i, None, Some(b"record"))])
            .unwrap();
    }
    log.close().unwrap();
    let dir = dir.to_str().unwrap();
    let commands: &[(&[&str], &str)] = &[
        (&["dump", dir, "--index"], "offset:"),
        (&["dump", dir, "--records", "--index"], "offset:"),
        (&["dump", dir, "--records"], "| offset:"),
        (&["consume", dir], "record"),
    ];
    for (args, prefix) in commands {
        let mut child = partlog()
            .args(*args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut matches = 0;
        for line in stdout.lines() {
            if line.unwrap().starts_with(prefix) {
                matches += 1;
                if matches == 3 {
                    break;
                }
            }
        }
        // `grep -m3` exits here, and the pipe closes under the tool.
        assert_eq!(matches, 3, "{args:?}");
        let output = child.wait_with_output().unwrap();
        let stderr = text(&output.stderr);
        assert!(
            output.status.success(),
            "{args:?} after the reader left: {:?}, stderr {stderr:?}",
            output.status
        );
        assert!(stderr.is_empty(), "{args:?}: {stderr:?}");
    }
}
