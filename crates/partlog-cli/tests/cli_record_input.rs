//! Issue 32, item 2: records that are not lines of text. `consume --format json | produce
//! --format json` copies the broker fixture exactly; binary keys and values with `\0` and `\n`
//! round-trip through JSON and through `-D` delimiters; a bad input line stops `produce` with one
//! line that names it and says what was written.
//!
//! What a copy keeps and what it does not: every data record, in order, with its timestamp, key,
//! value and headers byte for byte (null keys, null values, null header values, repeated header
//! names) is equal, which `dump --json` shows exactly and `dump --records` shows in Kafka's
//! words. What differs is the log's own: offsets (the source's transaction markers take offsets,
//! the copy has no markers), and the batch lines (batch boundaries, producer id, epoch and
//! sequences, the transactional flag, codec, CRC and positions).

#[path = "common/cli.rs"]
mod cli;

use std::path::{Path, PathBuf};
use std::process::Output;

use cli::{partlog, run, run_with_input, text};

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

fn stdout_of(output: &Output) -> Vec<u8> {
    assert!(
        output.status.success(),
        "{:?}: {}",
        output.status,
        text(&output.stderr)
    );
    output.stdout.clone()
}

/// `partlog consume SOURCE ARGS | partlog produce COPY --format json`.
fn copy(source: &Path, copy: &Path, consume_args: &[&str]) {
    let json = stdout_of(&run(partlog()
        .arg("consume")
        .arg(source)
        .args(["--format", "json"])
        .args(consume_args)));
    stdout_of(&run_with_input(
        partlog()
            .arg("produce")
            .arg(copy)
            .args(["--format", "json", "--quiet"]),
        &json,
    ));
}

/// `dump --json` without the offsets: each data record's timestamp, key, value and headers,
/// exact bytes.
fn records_without_offsets(dir: &Path) -> Vec<String> {
    text(&stdout_of(&run(partlog()
        .arg("dump")
        .arg(dir)
        .arg("--json"))))
    .lines()
    .map(|line| {
        let rest = line
            .strip_prefix("{\"offset\":")
            .and_then(|rest| rest.split_once(','))
            .unwrap_or_else(|| panic!("{line}"))
            .1;
        rest.to_owned()
    })
    .collect()
}

/// `dump --records`'s data record lines without `offset:` and `sequence:`, which belong to the
/// log and its producer, not to the record; control records left out.
fn kafka_record_lines(dir: &Path) -> Vec<String> {
    text(&stdout_of(&run(partlog()
        .arg("dump")
        .arg(dir)
        .arg("--records"))))
    .lines()
    .filter(|line| line.starts_with("| offset: ") && !line.contains(" endTxnMarker: "))
    .map(|line| {
        let (_offset, rest) = line["| offset: ".len()..].split_once(' ').unwrap();
        let (before, after) = rest.split_once(" sequence: ").unwrap();
        let (_sequence, after) = after.split_once(' ').unwrap();
        format!("{before} {after}")
    })
    .collect()
}

#[test]
fn issue32_item2_consume_json_into_produce_json_copies_the_broker_fixture() {
    let temp = tempfile::tempdir().unwrap();
    let source = broker_fixture(temp.path());
    let target = temp.path().join("copy-0");
    copy(&source, &target, &[]);

    let original = records_without_offsets(&source);
    // 16 data records: nulls, tombstones, repeated and null-valued headers, an empty header
    // name, binary keys and values, the aborted transaction's two (read_uncommitted).
    assert_eq!(original.len(), 16, "{original:#?}");
    assert!(original.iter().any(|r| r.contains("\"key\":null")));
    assert!(original.iter().any(|r| r.contains("\"value\":null")));
    assert!(original.iter().any(|r| r.contains("{\"base64\":")));
    assert!(original.iter().any(|r| r.contains("[\"nullable\",null]")));
    assert_eq!(records_without_offsets(&target), original);
    let kafka_lines = kafka_record_lines(&source);
    assert_eq!(kafka_lines.len(), 16);
    assert!(
        kafka_lines[0].starts_with("CreateTime: 1767225600000 keySize: 6"),
        "{}",
        kafka_lines[0]
    );
    assert_eq!(kafka_record_lines(&target), kafka_lines);

    // A read_committed copy holds the committed records only, equal to the source's.
    let committed = temp.path().join("committed-0");
    copy(
        &source,
        &committed,
        &["--isolation-level", "read_committed"],
    );
    let copied = records_without_offsets(&committed);
    assert_eq!(copied.len(), 14);
    assert_eq!(copied, original[..14]);
    assert!(!copied.iter().any(|r| r.contains("order-3")));

    // The copy of the copy is the same again: nothing drifts (timestamps are the source's).
    let again = temp.path().join("again-0");
    copy(&target, &again, &[]);
    assert_eq!(records_without_offsets(&again), original);
}

/// A value (and key) with `\0` and `\n` in it, one valid UTF-8 (a JSON string with escapes) and
/// one not (base64), round-trips through JSON; `-D '\0'` carries values with newlines as text.
#[test]
fn issue32_item2_binary_values_with_nul_and_newline_round_trip() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("binary-0");
    let input = concat!(
        r#"{"key":"k\u0000\n","value":"line 1\nline 2\u0000end","timestamp":1700000000000}"#,
        "\n",
        r#"{"key_b64":"AP8K","value_b64":"AAoNCv/+","headers":{"h":"\u0000\n"},"timestamp":1700000000001}"#,
        "\n",
        r#"{"key":{"base64":"/w=="},"value":null,"headers":[["h",null],["h",{"base64":"AP8="}]]}"#,
        "\n",
    );
    stdout_of(&run_with_input(
        partlog()
            .arg("produce")
            .arg(&dir)
            .args(["--format", "json"]),
        input.as_bytes(),
    ));
    let json = text(&stdout_of(&run(partlog()
        .arg("consume")
        .arg(&dir)
        .args(["--format", "json"]))));
    let lines: Vec<&str> = json.lines().collect();
    assert_eq!(
        lines[0],
        r#"{"offset":0,"timestamp":1700000000000,"key":"k\u0000\n","value":"line 1\nline 2\u0000end","headers":[]}"#
    );
    assert_eq!(
        lines[1],
        r#"{"offset":1,"timestamp":1700000000001,"key":{"base64":"AP8K"},"value":{"base64":"AAoNCv/+"},"headers":[["h","\u0000\n"]]}"#
    );
    assert!(
        lines[2].starts_with(r#"{"offset":2,"timestamp":"#)
            && lines[2].ends_with(r#","key":{"base64":"/w=="},"value":null,"headers":[["h",null],["h",{"base64":"AP8="}]]}"#),
        "{}",
        lines[2]
    );
    // The raw bytes, as a kcat format string prints them.
    let raw = stdout_of(&run(partlog()
        .arg("consume")
        .arg(&dir)
        .args(["-c", "2", "-f", "%k|%s\\0"])));
    assert_eq!(
        raw,
        b"k\0\n|line 1\nline 2\0end\0\x00\xff\n|\x00\n\r\n\xff\xfe\0"
    );

    // Text with -D: records end at a NUL, keys at a two-byte separator, values keep their
    // newlines; consume -D / -K print them back the same way.
    let text_dir = temp.path().join("text-0");
    let records = b"k1::line 1\nline 2\0k2::\r\n\0no key\n";
    stdout_of(&run_with_input(
        partlog()
            .arg("produce")
            .arg(&text_dir)
            .args(["-D", "\\0", "-K", "::"]),
        records,
    ));
    let back = stdout_of(&run(partlog()
        .arg("consume")
        .arg(&text_dir)
        .args(["-D", "\\x00", "-K", "::", "-Z"])));
    assert_eq!(back, b"k1::line 1\nline 2\0k2::\r\n\0NULL::no key\n\0");
    // A multi-byte delimiter with escapes.
    let multi = temp.path().join("multi-0");
    stdout_of(&run_with_input(
        partlog()
            .arg("produce")
            .arg(&multi)
            .args(["-D", "\\r\\n--\\r\\n", "--batch", "2"]),
        b"a\r\nb\r\n--\r\nc-\r\n--\r\n",
    ));
    assert_eq!(
        stdout_of(&run(partlog().arg("consume").arg(&multi).args(["-D", "|"]))),
        b"a\r\nb|c-|"
    );
}

#[test]
fn issue32_item2_a_bad_json_line_names_its_line_and_what_was_written() {
    let temp = tempfile::tempdir().unwrap();
    let input = b"{\"value\":\"a\"}\n\n{\"value\":\"b\"}\n{\"vaule\":\"c\"}\n{\"value\":\"d\"}\n";
    // The batching producer and --batch N both write the records before the bad line, and
    // none from it on.
    for (name, extra) in [
        ("batched-0", &[][..]),
        ("batch-of-10-0", &["--batch", "10"][..]),
    ] {
        let dir = temp.path().join(name);
        let output = run_with_input(
            partlog()
                .arg("produce")
                .arg(&dir)
                .args(["--format", "json"])
                .args(extra),
            input,
        );
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{name}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{name}: {stderr}");
        assert!(
            stderr.starts_with("partlog: line 4 of standard input: unknown member \"vaule\""),
            "{name}: {stderr}"
        );
        assert!(
            stderr.contains("2 records were written to") && stderr.contains("(offsets [0, 1])"),
            "{name}: {stderr}"
        );
        let values = stdout_of(&run(partlog().arg("consume").arg(&dir)));
        assert_eq!(values, b"a\nb\n", "{name}");
    }
    // The first line bad: nothing written, and said so.
    let dir = temp.path().join("first-0");
    let output = run_with_input(
        partlog()
            .arg("produce")
            .arg(&dir)
            .args(["--format", "json"]),
        b"{\"value\":\"a\",\"timestamp\":1.5}\n",
    );
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("line 1 of standard input: \"timestamp\" is 1.5")
            && stderr.trim_end().ends_with("nothing was written"),
        "{stderr}"
    );
    // With -D, a record is counted, not a line; non-UTF-8 JSON is named as such.
    let output = run_with_input(
        partlog()
            .arg("produce")
            .arg(&dir)
            .args(["--format", "json", "-D", "\\0"]),
        b"{\"value\":\"a\"}\0\xff\0",
    );
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("record 2 of standard input: not UTF-8 at byte 1")
            && stderr.contains("1 record was written to"),
        "{stderr}"
    );
    // Separators that make no sense are refused before anything is read.
    for (args, expected) in [
        (&["-D", ""][..], "must not be empty"),
        (&["-D", "\\q"], "\\q"),
        (&["-K", "\\x1"], "two hex digits"),
        (&["--format", "json", "-K", "="], "cannot be used with"),
    ] {
        let output = run_with_input(partlog().arg("produce").arg(&dir).args(args), b"x\n");
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}
