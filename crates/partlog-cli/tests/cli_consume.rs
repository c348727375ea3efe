//! `partlog consume` as kcat's users expect it: `-Z` tells a null key or value from an empty one,
//! `-f` format strings, start and end bounds by offset and by timestamp (`-o s@MS`, `-o e@MS`,
//! `--end-offset`), and clear errors for a negative count and a bad offset.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use partlog::{Log, LogConfig, NewRecord};

fn partlog() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_partlog"));
    command.env("RUST_BACKTRACE", "1");
    command
}

fn run(command: &mut Command) -> Output {
    command.stdin(Stdio::null()).output().expect("run partlog")
}

fn stdout_of(output: &Output) -> String {
    assert!(
        output.status.success(),
        "{:?}: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).unwrap()
}

const T0: i64 = 1_700_000_000_000;

/// Offsets 0..4: a null key, an empty key with an empty value, a tombstone, a header with a null
/// value; timestamps T0, T0+1000, T0+2000, T0+3000.
fn make_log(dir: &Path) {
    let log = Log::open(dir, LogConfig::default()).unwrap();
    log.append(&[
        NewRecord::new(T0, None, Some(b"no key")),
        NewRecord::new(T0 + 1000, Some(b""), Some(b"")),
        NewRecord::new(T0 + 2000, Some(b"gone"), None),
        NewRecord::new(T0 + 3000, Some(b"k"), Some(b"v"))
            .with_header("h1", Some(b"x"))
            .with_header("h2", None),
    ])
    .unwrap();
    log.close().unwrap();
}

#[test]
fn print_null_tells_null_from_empty_in_text_and_format_strings() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("events-7");
    make_log(&dir);

    let plain = stdout_of(&run(partlog()
        .arg("consume")
        .arg(&dir)
        .args(["--key-separator", "="])));
    assert_eq!(
        plain, "=no key\n=\ngone=\nk=v\n",
        "without -Z, null prints as empty"
    );

    let with_z = stdout_of(&run(partlog().arg("consume").arg(&dir).args([
        "-Z",
        "--key-separator",
        "=",
    ])));
    assert_eq!(with_z, "NULL=no key\n=\ngone=NULL\nk=v\n");

    let formatted = stdout_of(&run(partlog().arg("consume").arg(&dir).args([
        "-Z",
        "-f",
        r"%t/%p %o %T [%k] [%s] %K %S {%h}\n",
    ])));
    assert_eq!(
        formatted,
        format!(
            "events/7 0 {T0} [NULL] [no key] -1 6 {{}}\n\
             events/7 1 {} [] [] 0 0 {{}}\n\
             events/7 2 {} [gone] [NULL] 4 -1 {{}}\n\
             events/7 3 {} [k] [v] 1 1 {{h1=x,h2=NULL}}\n",
            T0 + 1000,
            T0 + 2000,
            T0 + 3000
        )
    );

    let marker = stdout_of(&run(partlog().arg("consume").arg(&dir).args([
        "--null-marker",
        "<null>",
        "-f",
        r"%k\t%s\n",
        "-c",
        "1",
    ])));
    assert_eq!(marker, "<null>\tno key\n");
}

#[test]
fn start_and_end_bounds_by_offset_and_timestamp() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("events-0");
    make_log(&dir);
    let offsets = |args: &[&str]| {
        stdout_of(&run(partlog()
            .arg("consume")
            .arg(&dir)
            .args(args)
            .args(["-f", r"%o "])))
    };
    assert_eq!(offsets(&[]), "0 1 2 3 ");
    assert_eq!(offsets(&["-o", "1", "--end-offset", "3"]), "1 2 ");
    assert_eq!(offsets(&["-o", "beginning", "--end-offset", "0"]), "");
    assert_eq!(offsets(&["-o", "-2"]), "2 3 ");
    assert_eq!(offsets(&["-o", "end"]), "");
    let s = format!("s@{}", T0 + 1000);
    let e = format!("e@{}", T0 + 3000);
    assert_eq!(offsets(&["-o", &s]), "1 2 3 ");
    assert_eq!(offsets(&["-o", &s, "-o", &e]), "1 2 ");
    assert_eq!(offsets(&["-o", &e]), "0 1 2 ");
    let after_all = format!("e@{}", T0 + 60_000);
    assert_eq!(offsets(&["-o", &after_all]), "0 1 2 3 ");
    let end_ts = (T0 + 2000).to_string();
    assert_eq!(offsets(&["--end-timestamp", &end_ts]), "0 1 ");
}

#[test]
fn a_negative_count_or_a_bad_offset_is_a_clear_error_without_clap_tips() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("events-0");
    make_log(&dir);
    for (args, expected) in [
        (&["--count", "-1"][..], "a count is 0 or more"),
        (
            &["-o", "abc"][..],
            "expected N, -N (from the end), beginning, end, s@MS or e@MS",
        ),
        (&["--offset", "abc"][..], "is not an offset"),
        (
            &["-o", "5"][..],
            "out of range: the log holds offsets [0, 4)",
        ),
        (&["-o", "1", "-o", "2"][..], "two starts"),
        (&["-f", "%x"][..], "%x is not a format token"),
    ] {
        let output = run(partlog().arg("consume").arg(&dir).args(args));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(
            !stderr.contains("tip:") && !stderr.contains("'-- "),
            "{args:?}: a clap tip: {stderr}"
        );
        assert!(!stderr.contains("invalid digit"), "{args:?}: {stderr}");
    }
}

/// Issue 35: `-o N -c 1` is a point read; it prints the record at N in every format (a
/// tombstone too), counts `-o -1` from the end, and prints nothing at the end.
#[test]
fn one_record_by_offset_prints_that_record() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("events-7");
    make_log(&dir);
    let one = |offset: &str, extra: &[&str]| {
        stdout_of(&run(partlog()
            .arg("consume")
            .arg(&dir)
            .args(["-o", offset, "-c", "1"])
            .args(extra)))
    };
    assert_eq!(one("3", &[]), "v\n");
    assert_eq!(one("0", &["-f", "%o %k %s\\n"]), "0  no key\n");
    assert_eq!(one("3", &["-f", "%o %k=%s %h\\n"]), "3 k=v h1=x,h2=\n");
    assert_eq!(one("-1", &[]), "v\n", "the last record");
    assert_eq!(one("4", &[]), "", "at the end: nothing");
    // The first record at the log start, after deletion moved it.
    let log = Log::open(&dir, LogConfig::default()).unwrap();
    log.delete_records_before(2).unwrap();
    log.close().unwrap();
    drop(log);
    assert_eq!(one("2", &["-Z"]), "NULL\n");
}
