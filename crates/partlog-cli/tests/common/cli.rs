//! Running the `partlog` binary from a test: the commands and their output.
//! Included with `#[path = "common/cli.rs"] mod cli;` by the `cli_*` tests that share it.

use std::io::Write;
use std::process::{Command, Output, Stdio};

/// The `partlog` binary of this build.
pub fn partlog() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_partlog"));
    // A panic would print a backtrace with this set: the tool must never panic.
    command.env("RUST_BACKTRACE", "1");
    command
}

/// Runs `command` with `input` on its standard input and collects its output.
pub fn run_with_input(command: &mut Command, input: &[u8]) -> Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start partlog");
    let mut stdin = child.stdin.take().unwrap();
    // A child that fails early (a locked log) may exit before reading: EPIPE is its business.
    if let Err(error) = stdin.write_all(input) {
        assert_eq!(error.kind(), std::io::ErrorKind::BrokenPipe, "{error}");
    }
    drop(stdin);
    child.wait_with_output().unwrap()
}

/// Runs `command` with nothing on its standard input.
pub fn run(command: &mut Command) -> Output {
    command.stdin(Stdio::null()).output().expect("run partlog")
}

/// Output bytes as text, invalid UTF-8 replaced.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
