//! Read-only inspection of a damaged log: `dump`, `consume` and `stats` on a log whose second
//! half is garbage print every valid batch and record before the garbage, then one line naming
//! the file and the byte where it starts (exit status 1), as DumpLogSegments reports invalid
//! bytes after the valid ones. They never write. Only `verify` and the writers refuse. A sealed
//! segment the open did not scan ends the output the same way when a read meets it.

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

// Issue 29, items 8 to 11: verify, its repair and the writing commands on damaged logs.

/// How many records [`thousands_segmented_log`] writes.
const RECORDS: i64 = 6000;

/// A cleanly closed log of `RECORDS` records (`line 0` ...) in batches of 100 over segments of
/// 20 KB.
/// Returns the directory and its `.log` files, in order.
fn thousands_segmented_log(root: &Path) -> (PathBuf, Vec<PathBuf>) {
    let dir = root.join("orders-0");
    let input: String = (0..RECORDS).map(|i| format!("line {i}\n")).collect();
    let output = run_with_input(
        partlog().arg("produce").arg(&dir).args([
            "--batch",
            "100",
            "--segment-bytes",
            "20000",
            "--allow-small-segments",
        ]),
        input.as_bytes(),
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let mut logs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    assert!(logs.len() >= 4, "{logs:?}");
    (dir, logs)
}

/// Flips a bit of the stored CRC of the fourth batch of `log`; returns where that batch starts.
fn flip_fourth_crc(log: &Path) -> u64 {
    let at = batch_positions(log)[3];
    let mut bytes = std::fs::read(log).unwrap();
    bytes[at as usize + 17] ^= 0x40;
    std::fs::write(log, &bytes).unwrap();
    at
}

/// The bytes of every `.log` file of `dir`, by name.
fn log_files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    files.sort();
    files
}

/// Item 8: in a cleanly closed log, a flipped CRC 300 records into a sealed segment is
/// corruption; `verify --repair` refuses to cut it and says what a cut takes, and with
/// `--truncate-at-corruption` it says so first, then cuts the log there.
#[test]
fn item8_repair_truncate_at_corruption_cuts_a_cleanly_closed_log_at_its_corruption() {
    let temp = tempfile::tempdir().unwrap();
    let (dir, logs) = thousands_segmented_log(temp.path());
    let at = flip_fourth_crc(&logs[1]);
    let cut = base_of(&logs[1]) + 300;
    let lost = RECORDS - cut;
    let before = log_files(&dir);

    let output = run(partlog().arg("verify").arg(&dir));
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains(&format!(
            "CORRUPT: {} at byte {at}: crc mismatch",
            logs[1].display()
        )),
        "{stdout}"
    );

    let output = run(partlog().arg("verify").arg(&dir).arg("--repair"));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stdout));
    let stderr = text(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("partlog: not repairing: CORRUPT: ")
            && stderr.contains(&format!(
                "would discard {lost} records (offsets [{cut}, {RECORDS}))"
            ))
            && stderr.contains("--truncate-at-corruption"),
        "{stderr}"
    );
    assert_eq!(log_files(&dir), before);

    let output = run(partlog()
        .arg("verify")
        .arg(&dir)
        .args(["--repair", "--truncate-at-corruption"]));
    let stdout = text(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        text(&output.stderr)
    );
    let announced = stdout
        .find(&format!(
            "repair: cutting the log at its first corruption discards {lost} records (offsets \
             [{cut}, {RECORDS}))"
        ))
        .unwrap_or_else(|| panic!("{stdout}"));
    let done = stdout
        .find(&format!("repair: cut {} at byte {at}", logs[1].display()))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(announced < done, "{stdout}");
    assert!(
        stdout.contains(&format!("result: ok: offsets [0, {cut})")),
        "{stdout}"
    );
    let output = run(partlog().arg("consume").arg(&dir));
    assert!(output.status.success(), "{}", text(&output.stderr));
    let expected: String = (0..cut).map(|i| format!("line {i}\n")).collect();
    assert_eq!(text(&output.stdout), expected);
}

/// Item 8: a writing command that meets corruption at open names the repair that cuts the log
/// there.
#[test]
fn item8_a_writing_command_refusing_corruption_names_the_repair() {
    let temp = tempfile::tempdir().unwrap();
    let (dir, _, at) = garbage_tailed_log(temp.path());
    let output = run_with_input(partlog().arg("produce").arg(&dir), b"more\n");
    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains(&format!("at byte {at}"))
            && stderr.contains(&format!(
                "'partlog verify {} --repair --truncate-at-corruption' cuts the log there",
                dir.display()
            )),
        "{stderr}"
    );
}

/// Item 9: without `partlog.checkpoint`, the same damage is still corruption for `verify`, and
/// `produce` refuses to open the log, naming the records and the files that would go and the
/// option that accepts it, and changes nothing; the repair with that option then cuts it.
#[test]
fn item9_without_a_checkpoint_produce_refuses_and_verify_reports_corruption() {
    let temp = tempfile::tempdir().unwrap();
    let (dir, logs) = thousands_segmented_log(temp.path());
    let at = flip_fourth_crc(&logs[1]);
    std::fs::remove_file(dir.join("partlog.checkpoint")).unwrap();
    let cut = base_of(&logs[1]) + 300;
    let lost = RECORDS - cut;
    let before = log_files(&dir);

    let output = run(partlog().arg("verify").arg(&dir));
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("the durable point is unknown") && stdout.contains("result: CORRUPT"),
        "{stdout}"
    );

    let output = run_with_input(partlog().arg("produce").arg(&dir), b"hello\n");
    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let later = logs.len() - 2;
    assert!(
        stderr.contains(&format!("{} at byte {at}", logs[1].display()))
            && stderr.contains(&format!(
                "would discard {lost} records (offsets [{cut}, {RECORDS}))"
            ))
            && stderr.contains(&format!(
                "and the {later} segments after it, {} to {}",
                logs[2].file_name().unwrap().to_str().unwrap(),
                logs.last().unwrap().file_name().unwrap().to_str().unwrap()
            ))
            && stderr.contains("--truncate-at-corruption"),
        "{stderr}"
    );
    assert!(!stderr.contains("produced"), "{stderr}");
    assert_eq!(log_files(&dir), before);

    let output = run(partlog()
        .arg("verify")
        .arg(&dir)
        .args(["--repair", "--truncate-at-corruption"]));
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains(&format!("result: ok: offsets [0, {cut})")),
        "{stdout}"
    );
}

/// Item 9: every writing command says on standard error what its open discarded: here the torn
/// tail a crash left at the end of the active segment.
#[test]
fn item9_every_writing_command_reports_what_its_open_discarded() {
    let commands: [&[&str]; 6] = [
        &["produce"],
        &["roll"],
        &["retention"],
        &["delete-records", "--before", "1"],
        &["config", "--set", "retention.ms=86400000"],
        &["perf-produce", "--records", "1", "--record-size", "10"],
    ];
    for command in commands {
        let temp = tempfile::tempdir().unwrap();
        let (dir, logs) = thousands_segmented_log(temp.path());
        let active = logs.last().unwrap();
        let mut bytes = std::fs::read(active).unwrap();
        let clean_len = bytes.len();
        // Half a batch header: what a crash mid-append leaves.
        bytes.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0x17, 0x70, 0, 0, 0, 90, 0, 0]);
        std::fs::write(active, &bytes).unwrap();
        let output = run_with_input(
            partlog().arg(command[0]).arg(&dir).args(&command[1..]),
            b"hello\n",
        );
        let stderr = text(&output.stderr);
        assert!(output.status.success(), "{command:?}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "partlog: opening {} discarded 0 records, 14 bytes: {} from byte {clean_len}; \
                 why: a torn tail",
                dir.display(),
                active.display()
            )),
            "{command:?}: {stderr}"
        );
    }
}

/// A cleanly closed log with pid 1's aborted transaction at [0, 2) (ABORT at 2), plain records
/// over small segments, then pid 1's committed transaction, written through the library.
/// Returns the directory, the `.txnindex` file and its bytes, and the COMMIT's offset.
fn log_with_an_abort(root: &Path) -> (PathBuf, PathBuf, Vec<u8>, i64) {
    use partlog::{BatchBuilder, Compression, ControlRecordType, Log, LogConfig, NewRecord};
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let batch = |pid: i64, seq: i32, count: usize| {
        let mut builder = BatchBuilder::new(Compression::None);
        if pid >= 0 {
            builder = builder.producer(pid, 0, seq).transactional(true);
        }
        for i in 0..count {
            builder.push(&NewRecord::new(
                now,
                None,
                Some(format!("p{pid} {}", seq + i as i32).as_bytes()),
            ));
        }
        builder.build().unwrap()
    };
    let dir = root.join("txns-0");
    let config = LogConfig::builder_for_tests()
        .segment_bytes(2048)
        .build()
        .unwrap();
    let log = Log::open(&dir, config).unwrap();
    log.append_batch(&batch(1, 0, 2)).unwrap();
    log.append_marker(1, 0, ControlRecordType::Abort, 0)
        .unwrap();
    for round in 0..10 {
        log.append_batch(&batch(-1, round * 10, 10)).unwrap();
    }
    log.append_batch(&batch(1, 2, 1)).unwrap();
    let commit = log
        .append_marker(1, 0, ControlRecordType::Commit, 0)
        .unwrap()
        .first_offset;
    log.close().unwrap();
    let index = dir.join("00000000000000000000.txnindex");
    let bytes = std::fs::read(&index).unwrap();
    (dir, index, bytes, commit)
}

/// Item 10: a lost `.txnindex` is found by `verify` (an ABORT marker without its entry) and
/// rebuilt by `verify --repair`, without `--truncate-at-corruption` and without touching a
/// `.log` byte; so is an entry moved onto a COMMIT marker.
#[test]
fn item10_verify_repair_rebuilds_a_lost_or_wrong_txnindex_from_the_log() {
    let temp = tempfile::tempdir().unwrap();
    let (dir, index, bytes, commit) = log_with_an_abort(temp.path());
    let logs = log_files(&dir);
    std::fs::remove_file(&index).unwrap();

    let output = run(partlog().arg("verify").arg(&dir));
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "CORRUPT: {}: missing: the ABORT marker of producer 1 at offset 2 (its transaction \
             began at 0) has no entry",
            index.display()
        )),
        "{stdout}"
    );
    let output = run(partlog().arg("verify").arg(&dir).arg("--repair"));
    let stdout = text(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        text(&output.stderr)
    );
    assert!(stdout.contains("will be rebuilt from the log"), "{stdout}");
    assert_eq!(std::fs::read(&index).unwrap(), bytes);
    assert_eq!(log_files(&dir), logs);

    // The entry's last offset moved onto the COMMIT marker.
    let mut wrong = bytes.clone();
    wrong[18..26].copy_from_slice(&commit.to_be_bytes());
    std::fs::write(&index, &wrong).unwrap();
    let output = run(partlog().arg("verify").arg(&dir));
    assert_eq!(output.status.code(), Some(1));
    let output = run(partlog().arg("verify").arg(&dir).arg("--repair"));
    let stdout = text(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        text(&output.stderr)
    );
    assert!(
        stdout.contains(&format!("result: ok: offsets [0, {})", commit + 1)),
        "{stdout}"
    );
    assert_eq!(std::fs::read(&index).unwrap(), bytes);
    assert_eq!(log_files(&dir), logs);
}

/// Item 11: a sealed segment's missing `.index` is rebuilt by the next writable open, as
/// `verify` says it will be.
#[test]
fn item11_a_writing_command_rebuilds_a_missing_index() {
    let temp = tempfile::tempdir().unwrap();
    let (dir, logs) = thousands_segmented_log(temp.path());
    let index = logs[1].with_extension("index");
    let bytes = std::fs::read(&index).unwrap();
    std::fs::remove_file(&index).unwrap();

    let output = run(partlog().arg("verify").arg(&dir));
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "note: {}: missing; the next writable open rebuilds it from the log",
            index.display()
        )),
        "{stdout}"
    );
    let output = run_with_input(partlog().arg("produce").arg(&dir), b"more\n");
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(std::fs::read(&index).unwrap(), bytes);
    let output = run(partlog().arg("verify").arg(&dir));
    let stdout = text(&output.stdout);
    assert!(!stdout.contains("missing"), "{stdout}");
    assert!(
        stdout.contains(&format!("result: ok: offsets [0, {})", RECORDS + 1)),
        "{stdout}"
    );
}
