//! `Log::open_read_only` with `allow_live_writer` (ARCHITECTURE.md §5, "Reading a log another
//! process writes") following `partlog produce` in a process of its own: the reader shares nothing
//! with the writer but the files. The same reader against a writer in this process is
//! tests/log_live_reader.rs at the root.
//!
//! Nothing is timed: waits are `wait_for_data` calls with generous timeouts.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use partlog::{Log, LogConfig, ReadBound};

const TIMEOUT: Duration = Duration::from_secs(30);

fn live_config() -> LogConfig {
    LogConfig::builder_for_tests()
        .allow_live_writer(true)
        .poll_interval(Duration::from_millis(5))
        .build()
        .unwrap()
}

/// The test: the writer is `partlog produce` in a process of its own, acknowledging
/// each line once it is fsynced; this process tails the log and must read every acknowledged
/// line, in order, with nothing else in between.
#[test]
fn a_reader_tails_a_writer_in_another_process() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("t-0");
    let mut child = Command::new(env!("CARGO_BIN_EXE_partlog"))
        .arg("produce")
        .arg(&dir)
        .args(["--flush", "always", "--print-offsets"])
        .args(["--segment-bytes", "4096", "--allow-small-segments"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take();
    let mut acks = BufReader::new(child.stdout.take().unwrap()).lines();
    const LINES: u64 = 300;
    // The first line creates the log; the reader opens once it is acknowledged.
    let pipe = stdin.as_mut().unwrap();
    writeln!(pipe, "line-0").unwrap();
    pipe.flush().unwrap();
    assert_eq!(acks.next().unwrap().unwrap(), "0");
    let reader = Log::open_read_only(&dir, live_config()).unwrap();
    let mut position = 0;
    for n in 1..=LINES {
        if n < LINES {
            let pipe = stdin.as_mut().unwrap();
            writeln!(pipe, "line-{n}").unwrap();
            pipe.flush().unwrap();
            assert_eq!(acks.next().unwrap().unwrap(), n.to_string());
        } else {
            // End of input: the producer closes the log cleanly and exits.
            drop(stdin.take());
        }
        // Read whatever is there now, as a tailing consumer does.
        while reader.wait_for_data(position, Duration::ZERO).unwrap() {
            for r in reader.records(position, ReadBound::LogEnd) {
                let r = r.unwrap();
                assert_eq!(r.offset, position);
                assert_eq!(r.value.unwrap(), format!("line-{position}").into_bytes());
                position += 1;
            }
        }
    }
    assert!(child.wait().unwrap().success());
    assert!(reader.wait_for_data(LINES as i64 - 1, TIMEOUT).unwrap());
    for r in reader.records(position, ReadBound::Durable) {
        let r = r.unwrap();
        assert_eq!(r.value.unwrap(), format!("line-{}", r.offset).into_bytes());
        position = r.offset + 1;
    }
    assert_eq!(position, LINES as i64);
    assert!(reader.stats().segments > 2, "the writer never rolled");
}
