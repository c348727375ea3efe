//! The shared validator kit (`../shared/validators/check.sh`: kafka-python and the Rust
//! kafka-protocol crate) run on `.log` files, for the tests that include this module with
//! `#[path = "common/validators.rs"] mod validators;` (beside `common/kafka.rs` as `kafka`; the
//! tool's tests in crates/partlog-cli include both by their path from there).
//!
//! Under `CI=true`, a missing kit or Python package fails the test; elsewhere it skips with a
//! `skipping:` line.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use super::kafka;

/// The shared validators (kafka-python and the Rust kafka-protocol crate) on every `.log` file.
pub fn check(logs: &[PathBuf]) {
    let shared = std::env::var_os("PARTLOG_SHARED")
        .map_or_else(|| kafka::repository_root().join("../shared"), PathBuf::from);
    let check = shared.join("validators/check.sh");
    if !check.exists() {
        skip_or_fail(&format!("no validator kit at {}", check.display()));
        return;
    }
    let python_ready = Command::new("python3")
        .args(["-c", "import kafka, lz4, zstandard, crc32c"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !python_ready {
        skip_or_fail("python3 with kafka-python, lz4, zstandard and crc32c is not installed");
        return;
    }
    // kp-dump builds where .ci/run builds it, outside the target dir `cargo test` holds locked.
    let cache = std::env::var_os("PARTLOG_CACHE").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/partlog"),
        PathBuf::from,
    );
    let output = Command::new("bash")
        .arg(&check)
        .args(logs)
        .env("CARGO_TARGET_DIR", cache.join("kp-dump-target"))
        .output()
        .expect("run check.sh");
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "check.sh failed ({}):\n{printed}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        printed.lines().filter(|l| l.starts_with("PASS ")).count(),
        logs.len(),
        "{printed}"
    );
}

fn skip_or_fail(why: &str) {
    assert!(!kafka::running_in_ci(), "required under CI=true: {why}");
    eprintln!("skipping: {why}");
}
