//! `partlog produce` as kafka-console-producer's users expect it: records batched by the crate's
//! `Producer` by default (no bigger on disk than explicit batches of 1000; `stats --batches`
//! shows the batching), a one-line summary on standard error, a record over the limit named by
//! its setting, `--max-message-bytes` stored with the log, and clear refusals of a directory of
//! other files and of a missing parent without `--create`.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn partlog() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_partlog"));
    command.env("RUST_BACKTRACE", "1");
    command
}

fn produce(dir: &Path, args: &[&str], input: &[u8]) -> Output {
    let mut child = partlog()
        .arg("produce")
        .arg(dir)
        .args(args)
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

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn log_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "log"))
        .map(|path| std::fs::metadata(path).unwrap().len())
        .sum()
}

#[test]
fn produce_batches_by_default_and_says_what_it_wrote() {
    let temp = tempfile::tempdir().unwrap();
    let input: String = (1..=200_000).map(|i| format!("{i}\n")).collect();
    let batched = temp.path().join("batched-0");
    let output = produce(&batched, &[], input.as_bytes());
    assert!(output.status.success(), "{}", text(&output.stderr));
    let summary = text(&output.stderr);
    assert_eq!(summary.lines().count(), 1, "{summary}");
    assert!(
        summary.starts_with("partlog: produced 200000 records to ")
            && summary.contains("offsets [0, 199999]")
            && summary.contains(&format!("{} bytes in ", log_bytes(&batched))),
        "{summary}"
    );

    let explicit = temp.path().join("explicit-0");
    let output = produce(&explicit, &["--batch", "1000", "--quiet"], input.as_bytes());
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        output.stderr.is_empty(),
        "--quiet: {}",
        text(&output.stderr)
    );

    let (ours, reference) = (log_bytes(&batched), log_bytes(&explicit));
    assert!(
        ours * 10 <= reference * 12,
        "batched by default: {ours} bytes, against {reference} with --batch 1000"
    );

    let stats = partlog()
        .arg("stats")
        .arg(&batched)
        .arg("--batches")
        .output()
        .unwrap();
    let stats = text(&stats.stdout);
    let line = stats
        .lines()
        .find(|l| l.starts_with("batches: "))
        .unwrap_or_else(|| panic!("{stats}"));
    let batches: u64 = line["batches: ".len()..line.find(',').unwrap()]
        .parse()
        .unwrap();
    assert!(
        (50..2_000).contains(&batches),
        "200000 records in {batches} batches: {line}"
    );
    assert!(line.contains(", 200000 records, "), "{line}");

    // The producer's offsets print in input order, each once acknowledged.
    let output = produce(&batched, &["--print-offsets", "-q"], b"a\nb\nc\n");
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), "200000\n200001\n200002\n");
}

#[test]
fn a_record_over_the_limit_names_max_message_bytes_and_the_flag_raises_it() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("big-0");
    let mut input = vec![b'a'; 1_200_000];
    input.push(b'\n');
    let output = produce(&dir, &[], &input);
    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("cannot append line 1")
            && stderr.contains("max.message.bytes (1048588)")
            && stderr.contains("--max-message-bytes"),
        "{stderr}"
    );

    let output = produce(&dir, &["--max-message-bytes", "2097152"], &input);
    assert!(output.status.success(), "{}", text(&output.stderr));
    // Stored with the log: the next produce needs no flag.
    let output = produce(&dir, &[], &input);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let config = partlog().arg("config").arg(&dir).output().unwrap();
    assert_eq!(text(&config.stdout), "max.message.bytes=2097152\n");
}

#[test]
fn produce_refuses_a_directory_of_other_files_and_a_missing_parent() {
    let temp = tempfile::tempdir().unwrap();
    let other = temp.path().join("photos");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("cat.jpg"), b"not a log").unwrap();
    let output = produce(&other, &[], b"x\n");
    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output.stderr);
    assert!(stderr.contains("holds files but no log"), "{stderr}");
    let names: Vec<_> = std::fs::read_dir(&other)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["cat.jpg"], "produce wrote into the directory");

    let deep = temp.path().join("a/b/orders-0");
    let output = produce(&deep, &[], b"x\n");
    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "no such directory: {}",
            temp.path().join("a/b").display()
        )) && stderr.contains("--create"),
        "{stderr}"
    );
    assert!(!temp.path().join("a").exists());
    let output = produce(&deep, &["--create"], b"x\n");
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(deep.join("00000000000000000000.log").exists());
}
