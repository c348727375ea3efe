//! The compaction benchmarks' log, shared by `benches/compaction.rs` and the compaction rows of
//! `benches/compare.rs` so that both measure the same bytes: batches of 100 records, keys
//! cycling through [`KEYS`] names, 1 KiB values half random, half a repeated pattern (lz4
//! shrinks them to a bit over half).

use std::io::Read;
use std::path::{Path, PathBuf};

use partlog::{CleanupPolicy, CompressionType, Log, LogConfig, NewRecord};

/// Distinct keys: every key recurs about every 4 MiB of log.
pub const KEYS: u64 = 4_096;
/// Records per appended batch.
const RECORDS_PER_BATCH: u64 = 100;
/// Bytes per value.
const VALUE_BYTES: usize = 1_024;
/// Every record's timestamp.
const TIMESTAMP: i64 = 1_700_000_000_000;

/// A compacted log's config with `segment_bytes` segments and `codec`.
pub fn config(codec: CompressionType, segment_bytes: u32) -> LogConfig {
    LogConfig::builder()
        .segment_bytes(segment_bytes)
        .cleanup_policy(CleanupPolicy::COMPACT)
        .compression_type(codec)
        .build()
        .expect("a valid config")
}

/// A value half random (xorshift from `state`), half a repeated pattern.
fn value(state: &mut u64) -> Vec<u8> {
    let mut value = Vec::with_capacity(VALUE_BYTES);
    while value.len() < VALUE_BYTES / 2 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        value.extend_from_slice(&state.to_be_bytes());
    }
    value.resize(VALUE_BYTES, b'v');
    value
}

/// Builds the log in `dir`: appends until at least `bytes` of batches are in it.
pub fn build(dir: &Path, codec: CompressionType, segment_bytes: u32, bytes: u64) {
    let log = Log::open(dir, config(codec, segment_bytes)).expect("open");
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut record = 0u64;
    let mut appended = 0u64;
    while appended < bytes {
        let keys: Vec<Vec<u8>> = (0..RECORDS_PER_BATCH)
            .map(|i| format!("key-{:05}", (record + i) % KEYS).into_bytes())
            .collect();
        let values: Vec<Vec<u8>> = (0..RECORDS_PER_BATCH).map(|_| value(&mut state)).collect();
        let batch: Vec<NewRecord> = keys
            .iter()
            .zip(&values)
            .map(|(key, value)| NewRecord::new(TIMESTAMP, Some(key), Some(value)))
            .collect();
        appended += log.append(&batch).expect("append").bytes as u64;
        record += RECORDS_PER_BATCH;
    }
    log.close().expect("close");
}

/// The `.log` files of `dir`, in offset order.
pub fn log_files(dir: &Path) -> Vec<PathBuf> {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("list")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    logs
}

/// The bytes of `dir`'s `.log` files.
pub fn log_bytes(dir: &Path) -> u64 {
    log_files(dir)
        .iter()
        .map(|path| std::fs::metadata(path).map_or(0, |m| m.len()))
        .sum()
}

/// Copies the log in `from` (all but its lock file) into `to`, created if needed.
pub fn copy_log(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("list") {
        let path = entry.expect("entry").path();
        let name = path.file_name().expect("a file name");
        if name == "partlog.lock" {
            continue;
        }
        std::fs::copy(&path, to.join(name)).expect("copy");
    }
}

/// The reference side of the compaction rows: reads every byte of `files` with `read()` in
/// 1 MiB chunks; returns the bytes read.
pub fn read_files(files: &[PathBuf]) -> u64 {
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    for path in files {
        let mut file = std::fs::File::open(path).expect("open");
        loop {
            let n = file.read(&mut buf).expect("read");
            if n == 0 {
                break;
            }
            total += n as u64;
        }
        std::hint::black_box(&buf);
    }
    total
}
