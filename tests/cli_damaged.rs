//! Read-only inspection of a damaged log: `dump`, `consume` and `stats` on a log whose second
//! half is garbage print every valid batch and record before the garbage, then one line naming
//! the file and the byte where it starts (exit status 1), as DumpLogSegments reports invalid
//! bytes after the valid ones. They never write. Only `verify` and the writers refuse. A sealed
//! segment the open did not scan ends the output the same way when a read meets it.
#![cfg(feature = "cli")]

#[path = "common/cli.rs"]
mod cli;

use std::path::{Path, PathBuf};
use std::process::Output;

use cli::{partlog, run, run_with_input, text};

/// The byte positions of the batches of a `.log` file, read from their length fields.
fn batch_positions(log: &Path) -> Vec<u64> {
    let bytes = std::fs::read(log).unwrap();
    let mut positions = Vec::new();
    let mut at = 0usize;
    while at + 12 <= bytes.len() {
        positions.push(at as u64);
        let length = i32::from_be_bytes(bytes[at + 8..at + 12].try_into().unwrap());
        at += 12 + length as usize;
    }
    positions
}

/// A cleanly closed log of 2000 records (`line 0` ...) in batches of 100, whose `.log` is
/// garbage from its eleventh batch on (the file keeps its length, so the checkpoint's recovery
/// point lies beyond the garbage: corruption, not a torn tail). Returns the directory, the
/// segment file and where the garbage starts.
fn garbage_tailed_log(root: &Path) -> (PathBuf, PathBuf, u64) {
    let dir = root.join("orders-0");
    let input: String = (0..2000).map(|i| format!("line {i}\n")).collect();
    let output = run_with_input(
        partlog().arg("produce").arg(&dir).args(["--batch", "100"]),
        input.as_bytes(),
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let segment = dir.join("00000000000000000000.log");
    let garbage_at = batch_positions(&segment)[10];
    let mut bytes = std::fs::read(&segment).unwrap();
    for (n, byte) in bytes[garbage_at as usize..].iter_mut().enumerate() {
        *byte = b"garbage!"[n % 8];
    }
    std::fs::write(&segment, &bytes).unwrap();
    (dir, segment, garbage_at)
}

/// Asserts the ending: exit status 1 and one line on standard error that names the file and
/// the byte where the garbage starts.
fn assert_ends_with_the_corruption(output: &Output, segment: &Path, at: u64, context: &str) {
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{context}: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{context}: {stderr}");
    assert!(
        lines[0].starts_with("partlog: corrupt data in ")
            && lines[0].contains(&segment.display().to_string())
            && lines[0].contains(&format!("at byte {at}:")),
        "{context}: {stderr}"
    );
}

#[test]
fn dump_prints_every_valid_batch_and_record_then_the_corruption() {
    let temp = tempfile::tempdir().unwrap();
    let (dir, segment, at) = garbage_tailed_log(temp.path());
    let files_before: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    let bytes_before = std::fs::read(&segment).unwrap();

    let output = run(partlog().arg("dump").arg(&dir).arg("--records"));
    assert_ends_with_the_corruption(&output, &segment, at, "dump --records");
    let stdout = text(&output.stdout);
    let batches: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("baseOffset:"))
        .collect();
    assert_eq!(batches.len(), 10, "{stdout}");
    assert!(batches[9].starts_with("baseOffset: 900 lastOffset: 999 "));
    let records = stdout
        .lines()
        .filter(|l| l.starts_with("| offset:"))
        .count();
    assert_eq!(records, 1000);
    assert!(stdout.contains("| offset: 999 ") && stdout.contains("payload: line 999"));

    let output = run(partlog().arg("dump").arg(&dir).arg("--json"));
    assert_ends_with_the_corruption(&output, &segment, at, "dump --json");
    assert_eq!(text(&output.stdout).lines().count(), 1000);

    // Read-only: not a byte changed, no file came or went.
    assert_eq!(std::fs::read(&segment).unwrap(), bytes_before);
    let files_after: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(files_after, files_before);
}

#[test]
fn consume_and_stats_print_what_is_valid_then_the_corruption() {
    let temp = tempfile::tempdir().unwrap();
    let (dir, segment, at) = garbage_tailed_log(temp.path());

    let output = run(partlog().arg("consume").arg(&dir));
    assert_ends_with_the_corruption(&output, &segment, at, "consume");
    let expected: String = (0..1000).map(|i| format!("line {i}\n")).collect();
    assert_eq!(text(&output.stdout), expected);

    let output = run(partlog().arg("stats").arg(&dir));
    assert_ends_with_the_corruption(&output, &segment, at, "stats");
    let stdout = text(&output.stdout);
    assert!(stdout.contains("log end 1000"), "{stdout}");

    let output = run(partlog().arg("stats").arg(&dir).arg("--json"));
    assert_ends_with_the_corruption(&output, &segment, at, "stats --json");
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains(&format!(
            "\"corruption\":{{\"file\":\"{}\",\"position\":{at},",
            segment.display()
        )),
        "{stdout}"
    );
}

#[test]
fn verify_and_the_writers_still_refuse_a_corrupt_log() {
    let temp = tempfile::tempdir().unwrap();
    let (dir, segment, at) = garbage_tailed_log(temp.path());
    let bytes_before = std::fs::read(&segment).unwrap();

    let output = run(partlog().arg("verify").arg(&dir));
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));

    let output = run_with_input(partlog().arg("produce").arg(&dir), b"more\n");
    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("corrupt data in") && stderr.contains(&format!("at byte {at}")),
        "{stderr}"
    );
    assert_eq!(std::fs::read(&segment).unwrap(), bytes_before);
}

/// Corruption in a sealed segment below the recovery point, which a read-only open does not
/// scan: the reads meet it, and the commands end as they do for the open's: what came before,
/// then one line, exit status 1.
#[test]
fn corruption_in_an_unscanned_sealed_segment_ends_the_output_with_one_line() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("orders-0");
    let input: String = (0..600).map(|i| format!("order {i}\n")).collect();
    let output = run_with_input(
        partlog().arg("produce").arg(&dir).args([
            "--batch",
            "10",
            "--segment-bytes",
            "2048",
            "--allow-small-segments",
        ]),
        input.as_bytes(),
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let mut segments: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    segments.sort();
    assert!(segments.len() >= 4, "{segments:?}");
    // A value byte of the second segment's first batch.
    let second = &segments[1];
    let mut bytes = std::fs::read(second).unwrap();
    bytes[70] ^= 0x55;
    std::fs::write(second, &bytes).unwrap();
    let first_base: i64 = 0;
    let second_base: i64 = second
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();

    let output = run(partlog().arg("consume").arg(&dir));
    assert_ends_with_the_corruption(&output, second, 0, "consume");
    let expected: String = (first_base..second_base)
        .map(|i| format!("order {i}\n"))
        .collect();
    assert_eq!(text(&output.stdout), expected);

    let output = run(partlog().arg("dump").arg(&dir));
    assert_ends_with_the_corruption(&output, second, 0, "dump");
    assert!(text(&output.stdout).contains(&format!("Dumping {}", segments[0].display())));

    // stats reads only the first and the last batch, which are sound; --batches reads them all.
    let output = run(partlog().arg("stats").arg(&dir));
    assert!(output.status.success(), "{}", text(&output.stderr));
    let output = run(partlog().arg("stats").arg(&dir).arg("--batches"));
    assert_ends_with_the_corruption(&output, second, 0, "stats --batches");
    assert!(
        text(&output.stdout).contains("log end 600"),
        "{}",
        text(&output.stdout)
    );
}

/// A cleanly closed log of 600 lines (`order 0` ...) in batches of 10 over small segments.
/// Returns the directory and its sorted `.log` files.
fn segmented_log(root: &Path) -> (PathBuf, Vec<PathBuf>) {
    let dir = root.join("orders-0");
    let input: String = (0..600).map(|i| format!("order {i}\n")).collect();
    let output = run_with_input(
        partlog().arg("produce").arg(&dir).args([
            "--batch",
            "10",
            "--segment-bytes",
            "2048",
            "--allow-small-segments",
        ]),
        input.as_bytes(),
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let mut segments: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    segments.sort();
    assert!(segments.len() >= 5, "{segments:?}");
    (dir, segments)
}

fn base_of(segment: &Path) -> i64 {
    segment
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// Runs every reading command on `dir` and checks that each shows what lies before
/// `records_before` (10 records a batch), then ends with one line naming `segment` and byte
/// `at`, exit status 1.
fn assert_reading_commands_stop_at(dir: &Path, segment: &Path, at: u64, records_before: i64) {
    let output = run(partlog().arg("consume").arg(dir));
    assert_ends_with_the_corruption(&output, segment, at, "consume");
    let expected: String = (0..records_before)
        .map(|i| format!("order {i}\n"))
        .collect();
    assert_eq!(text(&output.stdout), expected);

    let output = run(partlog().arg("dump").arg(dir).arg("--records"));
    assert_ends_with_the_corruption(&output, segment, at, "dump --records");
    let stdout = text(&output.stdout);
    let last = records_before - 1;
    assert!(
        stdout.contains(&format!("baseOffset: {} lastOffset: {last} ", last - 9)),
        "{stdout}"
    );
    assert!(
        !stdout.contains(&format!("| offset: {records_before} ")),
        "{stdout}"
    );

    let output = run(partlog().arg("stats").arg(dir));
    assert_ends_with_the_corruption(&output, segment, at, "stats");
    assert!(text(&output.stdout).contains("log end 600"));

    let output = run(partlog().arg("perf-consume").arg(dir).arg("--json"));
    assert_ends_with_the_corruption(&output, segment, at, "perf-consume");
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains(&format!("\"records\":{records_before},")),
        "{stdout}"
    );
}

/// Issue 29, item 7, through the tool: a sealed `.log` of a cleanly closed, never-compacted log
/// cut inside a batch (`truncate -s`). Every reading command shows the records before the cut
/// batch, then names the file and the batch's first byte, exit status 1; `verify` agrees.
/// Before the fix they skipped to the next segment and exited 0.
#[test]
fn item7_reading_commands_stop_at_a_sealed_segment_cut_inside_a_batch() {
    let temp = tempfile::tempdir().unwrap();
    let (dir, segments) = segmented_log(temp.path());
    let damaged = &segments[2];
    let positions = batch_positions(damaged);
    let kept = positions.len() / 2;
    let cut_batch_at = positions[kept];
    std::fs::OpenOptions::new()
        .write(true)
        .open(damaged)
        .unwrap()
        .set_len(cut_batch_at + 20)
        .unwrap();
    let records_before = base_of(damaged) + 10 * kept as i64;

    assert_reading_commands_stop_at(&dir, damaged, cut_batch_at, records_before);
    let output = run(partlog().arg("verify").arg(&dir));
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stdout));
}

/// The same cut at a batch boundary: no torn batch, but the segment ends below the next one's
/// base. The reading commands name the missing offsets and where the segment ends.
#[test]
fn item7_reading_commands_report_the_offsets_a_sealed_segment_cut_short_lost() {
    let temp = tempfile::tempdir().unwrap();
    let (dir, segments) = segmented_log(temp.path());
    let damaged = &segments[2];
    let positions = batch_positions(damaged);
    let kept = positions.len() / 2;
    let cut_at = positions[kept];
    std::fs::OpenOptions::new()
        .write(true)
        .open(damaged)
        .unwrap()
        .set_len(cut_at)
        .unwrap();
    let records_before = base_of(damaged) + 10 * kept as i64;

    assert_reading_commands_stop_at(&dir, damaged, cut_at, records_before);
    let output = run(partlog().arg("consume").arg(&dir));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "offsets [{records_before}, {}) are missing",
            base_of(&segments[3])
        )),
        "{stderr}"
    );
}
