//! A real full disk: the log runs on a 4 MiB tmpfs until appends,
//! rolls and a compaction pass meet ENOSPC. The process must survive (no panic, no SIGBUS: the
//! only mappings are of sealed indexes, which are complete and never extended), every error must
//! be a typed `Io` error of kind `StorageFull`, every acknowledged record must read back, the log
//! must go on once space is freed, and after a reopen everything must verify.
//!
//! Mounting needs root and a kernel that allows it. Elsewhere the test prints why it skipped and
//! passes (the simulator's ENOSPC tests in `log_failure_matrix.rs` still run).
#![cfg(feature = "sim")] // the manual clock, to force a roll on the full disk

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use partlog::unstable::ManualClock;
use partlog::{
    CleanupPolicy, Error, FlushPolicy, Log, LogConfig, NewRecord, ReadBound, Severity, verify_dir,
};

const MOUNT_SIZE: &str = "size=4m";
const RECORD_BYTES: usize = 3000;
const T0: i64 = 1_700_000_000_000;
const SEGMENT_MS: i64 = 3_600_000;

/// Unmounts the tmpfs when the test ends, however it ends.
struct Mounted {
    dir: PathBuf,
    _parent: tempfile::TempDir,
}

impl Drop for Mounted {
    fn drop(&mut self) {
        // Lazy: a descriptor still open (a failed test's log) must not keep the mount alive.
        let status = Command::new("umount").arg("-l").arg(&self.dir).status();
        if !status.is_ok_and(|s| s.success()) {
            eprintln!("disk_full: could not unmount {}", self.dir.display());
        }
    }
}

/// Mounts a 4 MiB tmpfs, or says why it cannot.
fn mount_small_tmpfs() -> Result<Mounted, String> {
    let uid = Command::new("id")
        .arg("-u")
        .output()
        .map_err(|e| format!("cannot run `id -u`: {e}"))?;
    let uid = String::from_utf8_lossy(&uid.stdout).trim().to_owned();
    if uid != "0" {
        return Err(format!(
            "mounting a tmpfs needs root, and this runs as uid {uid}"
        ));
    }
    let parent = tempfile::tempdir().map_err(|e| format!("no temporary directory: {e}"))?;
    let dir = parent.path().join("full");
    std::fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let output = Command::new("mount")
        .args(["-t", "tmpfs", "-o", MOUNT_SIZE, "tmpfs"])
        .arg(&dir)
        .output()
        .map_err(|e| format!("cannot run `mount`: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "`mount -t tmpfs -o {MOUNT_SIZE} tmpfs {}` was refused: {}",
            dir.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(Mounted {
        dir,
        _parent: parent,
    })
}

fn config(clock: &Arc<ManualClock>) -> LogConfig {
    LogConfig::builder_for_tests()
        .segment_bytes(256 * 1024)
        .segment_ms(SEGMENT_MS)
        .clock(clock.clone())
        .cleanup_policy(CleanupPolicy::COMPACT)
        .flush_policy(FlushPolicy::EveryMessages(
            std::num::NonZeroU64::new(8).unwrap(),
        ))
        .build()
        .unwrap()
}

/// Few keys, so a compaction pass has much to remove once there is room to run it; the first
/// records' keys are unique, so the first segment's cleaned copy needs space to be written.
fn key_of(i: u64) -> String {
    if i < 24 {
        format!("kept-{i}")
    } else {
        format!("key-{}", i % 16)
    }
}

fn record(i: u64) -> (Vec<u8>, Vec<u8>) {
    let key = key_of(i).into_bytes();
    let mut value = format!("value {i} ").into_bytes();
    value.resize(RECORD_BYTES, b'.');
    (key, value)
}

fn append(log: &Log, i: u64) -> partlog::Result<i64> {
    let (key, value) = record(i);
    let now = T0 + i as i64;
    log.append(&[NewRecord::new(now, Some(&key), Some(&value))])
        .map(|info| info.first_offset)
}

fn assert_full(error: &Error, during: &str) {
    assert!(
        matches!(error, Error::Io { .. }),
        "{during}: not an I/O error: {error}"
    );
    assert_eq!(
        error.io_kind(),
        Some(ErrorKind::StorageFull),
        "{during}: {error}"
    );
}

/// The records the log holds, offset -> value, checked against what was acknowledged.
fn check_acknowledged(log: &Log, acknowledged: &[(i64, u64)], compacted: bool) {
    let held: std::collections::BTreeMap<i64, Vec<u8>> = log
        .records(log.log_start_offset(), ReadBound::LogEnd)
        .map(|r| r.map(|r| (r.offset, r.value.unwrap_or_default())))
        .collect::<partlog::Result<_>>()
        .expect("every record reads back");
    let mut latest = std::collections::BTreeMap::new();
    for &(offset, i) in acknowledged {
        latest.insert(key_of(i), offset);
    }
    for &(offset, i) in acknowledged {
        let must = !compacted || latest.get(&key_of(i)) == Some(&offset);
        match held.get(&offset) {
            Some(value) => assert_eq!(value, &record(i).1, "offset {offset}"),
            None => assert!(!must, "acknowledged offset {offset} is gone"),
        }
    }
}

fn verify_clean(dir: &Path, clock: &Arc<ManualClock>) {
    let report = verify_dir(dir, &config(clock)).unwrap();
    let bad: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.severity != Severity::Note)
        .collect();
    assert!(bad.is_empty(), "{bad:?}");
}

/// Takes every free byte of the file system into `path`.
fn fill_to_the_last_byte(path: &Path) {
    use std::io::Write;
    let mut file = std::fs::File::create(path).unwrap();
    for chunk in [4096usize, 512, 1] {
        let bytes = vec![0u8; chunk];
        while file.write_all(&bytes).is_ok() {}
    }
    let _ = file.sync_all();
}

#[test]
fn appends_rolls_and_compaction_on_a_full_tmpfs() {
    let mounted = match mount_small_tmpfs() {
        Ok(mounted) => mounted,
        Err(why) => {
            eprintln!("disk_full: SKIPPED: {why}");
            return;
        }
    };
    // Room to free later: a filler file the test deletes once the disk is full.
    let filler = mounted.dir.join("filler");
    std::fs::write(&filler, vec![0u8; 768 * 1024]).unwrap();
    let dir = mounted.dir.join("topic-0");
    let clock = Arc::new(ManualClock::new(T0 + 100_000));
    let log = Log::open(&dir, config(&clock)).unwrap();

    let mut acknowledged = Vec::new();
    let mut i = 0u64;
    let first_error = loop {
        match append(&log, i) {
            Ok(offset) => acknowledged.push((offset, i)),
            Err(error) => break error,
        }
        i += 1;
        assert!(i < 10_000, "a 4 MiB file system never filled");
    };
    assert_full(&first_error, "the first append that did not fit");
    let rolls_when_full = log.stats().rolls;
    assert!(rolls_when_full > 3, "the log rolled on its way to full");
    // Full stays full: more appends fail alike, whether they would roll or not, and nothing
    // acknowledged moves. A failed append publishes nothing.
    let end = log.log_end_offset();
    for attempt in 0..20 {
        match append(&log, i) {
            Ok(offset) => {
                // A smaller leftover gap may still take one: it is acknowledged like any.
                acknowledged.push((offset, i));
                i += 1;
            }
            Err(error) => assert_full(&error, &format!("append {attempt} on a full disk")),
        }
    }
    assert!(log.log_end_offset() <= end + 2);
    // A roll on the full disk (segment.ms has passed): creating the new segment's files takes
    // no data blocks on tmpfs, but the append after it does. Typed, and nothing published.
    clock.advance(SEGMENT_MS + 1);
    let end = log.log_end_offset();
    let error = append(&log, i).expect_err("an append that rolls on a full disk");
    assert_full(&error, "an append that rolls on a full disk");
    assert_eq!(log.log_end_offset(), end);
    assert!(
        !log.stats().poisoned,
        "a full disk is not a failed fsync: it must not poison"
    );
    check_acknowledged(&log, &acknowledged, false);

    // Compaction writes its cleaned copies first: on a disk without one free byte that fails,
    // typed, and the log is untouched.
    let top_up = mounted.dir.join("top-up");
    fill_to_the_last_byte(&top_up);
    let error = log.compact().expect_err("compaction on a full disk");
    assert_full(&error, "compaction on a full disk");
    assert!(!log.stats().poisoned);
    check_acknowledged(&log, &acknowledged, false);

    // Space returns.
    std::fs::remove_file(&top_up).unwrap();
    std::fs::remove_file(&filler).unwrap();
    for _ in 0..64 {
        let offset = append(&log, i).expect("an append once space returned");
        acknowledged.push((offset, i));
        i += 1;
    }
    log.wait_durable(log.log_end_offset() - 1).unwrap();
    assert!(log.stats().rolls > rolls_when_full, "it rolled again");
    let stats = log.compact().expect("compaction once space returned");
    assert!(stats.segments_cleaned > 0);
    check_acknowledged(&log, &acknowledged, true);
    log.close().unwrap();
    drop(log);

    verify_clean(&dir, &clock);
    let log = Log::open(&dir, config(&clock)).unwrap();
    assert!(log.recovery_report().clean_shutdown);
    check_acknowledged(&log, &acknowledged, true);
    let offset = append(&log, i).unwrap();
    assert_eq!(offset + 1, log.log_end_offset());
    log.close().unwrap();
    drop(log);
    verify_clean(&dir, &clock);
}
