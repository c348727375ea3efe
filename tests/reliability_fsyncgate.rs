//! "fsyncgate" on a reopen in the same boot (ARCHITECTURE.md §7): after a failed fsync, Linux
//! marks the pages it could not write clean and keeps them cached. They read fine, CRCs and all,
//! though the disk never got them, and a later fsync has nothing to write and succeeds. A log
//! reopened without a reboot must not recover its tail from those pages: recovery drops the
//! cached range above the recovery point first, so it validates what the disk holds.
//!
//! The simulator models the page cache for this (see `partlog::unstable::sim`): a failed sync
//! leaves its pages readable but "lost", and `Advice::DontNeed` or a crash drops them.
#![cfg(feature = "sim")] // the simulator and the manual clock: `cargo test --all-features`

#[path = "common/fenced.rs"]
mod fenced_storage;

use std::path::Path;
use std::sync::Arc;

use partlog::unstable::sim::{CrashConfig, FaultError, FaultOp, FaultRule, PAGE_SIZE, SimStorage};
use partlog::unstable::{Advice, ManualClock, OpenMode, Storage, StorageFile};
use partlog::{Error, FlushPolicy, Log, LogConfig, NewRecord, ReadBound};

const T0: i64 = 1_700_000_000_000;
const DIR: &str = "/fsyncgate/p-0";
const FIRST_LOG: &str = "/fsyncgate/p-0/00000000000000000000.log";

fn config(sim: &SimStorage) -> LogConfig {
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    LogConfig::builder_for_tests()
        .segment_bytes(1 << 20)
        .index_interval_bytes(256)
        // Appends are synced only when the test asks, so the test decides which sync fails.
        .flush_policy(FlushPolicy::OsDecides)
        .storage(storage)
        .clock(Arc::new(ManualClock::new(T0)))
        .build()
        .unwrap()
}

fn record(i: i64, what: &str) -> NewRecord {
    NewRecord::new(
        T0 + i,
        Some(format!("key {i}").as_bytes()),
        Some(format!("{what} {i}").as_bytes()),
    )
}

fn values(log: &Log) -> Vec<(i64, String)> {
    log.records(log.log_start_offset(), ReadBound::LogEnd)
        .map(|r| {
            r.map(|r| {
                (
                    r.offset,
                    String::from_utf8(r.value.unwrap_or_default()).unwrap(),
                )
            })
        })
        .collect::<partlog::Result<_>>()
        .unwrap()
}

fn expected(range: std::ops::Range<i64>, what: &str) -> Vec<(i64, String)> {
    range.map(|i| (i, format!("{what} {i}"))).collect()
}

/// Appends `durable` records and syncs them, then appends `lost` more whose sync fails, and
/// closes the poisoned log without a crash. Returns the simulator, still in the same "boot".
fn log_with_a_lost_tail(seed: u64, durable: i64, lost: i64) -> SimStorage {
    let sim = SimStorage::new(seed);
    let log = Log::open(DIR, config(&sim)).unwrap();
    for i in 0..durable {
        log.append(&[record(i, "durable")]).unwrap();
    }
    log.wait_durable(durable - 1).unwrap();
    assert_eq!(log.durable_offset(), durable);

    for i in durable..durable + lost {
        log.append(&[record(i, "lost")]).unwrap();
    }
    let lost_end = durable + lost;
    sim.inject(
        FaultRule::fail(FaultOp::Sync, 1)
            .on_paths_ending_with(".log")
            .error(FaultError::Eio),
    );
    let failed = log.wait_durable(lost_end - 1);
    assert!(matches!(failed, Err(Error::Io { .. })), "{failed:?}");
    assert!(log.stats().poisoned);
    assert_eq!(log.durable_offset(), durable);

    // The setup this test is about: the lost records are still readable from the cache.
    let state = sim.file_state(Path::new(FIRST_LOG)).unwrap();
    assert!(
        state.lost_pages > 0,
        "the failed sync must leave lost pages"
    );
    assert!(
        state.current.len() > state.synced.len(),
        "the cache holds the lost tail"
    );

    assert!(matches!(log.close(), Err(Error::Poisoned)));
    drop(log);
    sim
}

#[test]
fn a_reopen_in_the_same_boot_does_not_recover_what_a_failed_fsync_lost() {
    // A tail inside the page that also holds the durable records, and one over many pages.
    for (seed, durable, lost) in [(1, 5, 5), (2, 5, 300), (3, 40, 1), (4, 200, 400)] {
        let sim = log_with_a_lost_tail(seed, durable, lost);
        let advises_before = sim.stats().advises;

        let log = Log::open(DIR, config(&sim)).unwrap();
        assert!(!log.recovery_report().clean_shutdown);
        // The records end where the disk's do, and so does what the log calls durable.
        assert_eq!(log.log_end_offset(), durable, "seed {seed}");
        assert_eq!(log.durable_offset(), durable, "seed {seed}");
        assert_eq!(values(&log), expected(0..durable, "durable"), "seed {seed}");
        assert!(sim.stats().advises > advises_before);
        assert!(sim.stats().lost_pages_dropped > 0);
        assert_eq!(
            sim.file_state(Path::new(FIRST_LOG)).unwrap().lost_pages,
            0,
            "seed {seed}: recovery must drop every lost page before reading it"
        );

        // New records take the lost ones' offsets; once synced, they are what a crash keeps.
        for i in durable..durable + 3 {
            log.append(&[record(i, "after")]).unwrap();
        }
        log.wait_durable(durable + 2).unwrap();
        let acknowledged = log.durable_offset();
        assert_eq!(acknowledged, durable + 3);
        drop(log);

        sim.crash_with(&CrashConfig::lose_unsynced());
        let log = Log::open(DIR, config(&sim)).unwrap();
        let mut want = expected(0..durable, "durable");
        want.extend(expected(durable..durable + 3, "after"));
        assert_eq!(values(&log), want, "seed {seed}");
        assert!(log.log_end_offset() >= acknowledged);
    }
}

#[test]
fn a_flush_after_the_reopen_never_makes_the_lost_records_durable() {
    let sim = log_with_a_lost_tail(7, 10, 50);
    let log = Log::open(DIR, config(&sim)).unwrap();
    // Nothing above the durable records is left to sync; a flush succeeds and covers only them.
    log.wait_durable(log.log_end_offset() - 1).unwrap();
    let durable = log.durable_offset();
    assert_eq!(durable, 10);
    drop(log);
    // The strictest crash: only what reached the disk is left, and it holds all the log said.
    sim.crash_with(&CrashConfig::lose_unsynced());
    let log = Log::open(DIR, config(&sim)).unwrap();
    assert_eq!(log.log_end_offset(), durable);
    assert_eq!(values(&log), expected(0..durable, "durable"));
}

#[test]
fn a_clean_reopen_gives_no_advice() {
    let sim = SimStorage::new(11);
    let log = Log::open(DIR, config(&sim)).unwrap();
    for i in 0..20 {
        log.append(&[record(i, "durable")]).unwrap();
    }
    log.close().unwrap();
    drop(log);

    let advises = sim.stats().advises;
    // On fenced storage: the drop after the crash below changes nothing in the image.
    let log = Log::open(DIR, fenced_storage::fenced_config(config(&sim), &sim)).unwrap();
    assert!(log.recovery_report().clean_shutdown);
    assert_eq!(
        sim.stats().advises,
        advises,
        "the clean path must not advise"
    );
    assert_eq!(log.log_end_offset(), 20);

    // The counter does see recovery's advice: the same log after a crash is recovered.
    log.append(&[record(20, "durable")]).unwrap();
    sim.crash_with(&CrashConfig::keep_unsynced());
    drop(log);
    let advises = sim.stats().advises;
    let log = Log::open(DIR, config(&sim)).unwrap();
    assert!(!log.recovery_report().clean_shutdown);
    assert!(sim.stats().advises > advises);
}

/// The simulator's model of a failed writeback, which the tests above rely on.
mod page_cache_model {
    use super::*;

    fn setup(seed: u64) -> (SimStorage, Arc<dyn StorageFile>) {
        let sim = SimStorage::new(seed);
        sim.create_dir_all(Path::new("/d")).unwrap();
        sim.sync_dir(Path::new("/")).unwrap();
        let file = sim.open(Path::new("/d/f"), OpenMode::CreateNew).unwrap();
        sim.sync_dir(Path::new("/d")).unwrap();
        (sim, file)
    }

    fn contents(file: &dyn StorageFile) -> Vec<u8> {
        let mut buf = vec![0u8; file.len().unwrap() as usize];
        file.read_exact_at(&mut buf, 0).unwrap();
        buf
    }

    const PAGE: usize = PAGE_SIZE as usize;

    #[test]
    fn a_failed_sync_leaves_its_pages_readable_until_dont_need_drops_them() {
        let (sim, file) = setup(1);
        file.write_all_at(&[b'd'; 100], 0).unwrap();
        file.sync_data().unwrap();
        // Lost: the rest of page 0, all of page 1, part of page 2.
        file.write_all_at(&[b'L'; 2 * PAGE + 100], 100).unwrap();
        sim.fail_nth(FaultOp::Sync, 1, FaultError::Eio);
        assert!(file.sync_data().is_err());

        let live = contents(&*file);
        assert_eq!(live.len(), 2 * PAGE + 200);
        assert!(live[100..].iter().all(|&b| b == b'L'), "still cached");
        assert_eq!(sim.file_state(Path::new("/d/f")).unwrap().lost_pages, 3);
        // A retry succeeds without writing them; the size it persists covers zeros.
        file.sync_data().unwrap();
        let state = sim.file_state(Path::new("/d/f")).unwrap();
        assert_eq!(state.current, live, "a retried sync changes nothing cached");
        assert_eq!(&state.synced[..100], &[b'd'; 100][..]);
        assert!(state.synced[100..].iter().all(|&b| b == 0));

        // Only pages wholly inside the range go: page 1 here, not the pages it cuts.
        file.advise(100, 2 * PAGE as u64, Advice::DontNeed).unwrap();
        let now = contents(&*file);
        assert!(now[100..PAGE].iter().all(|&b| b == b'L'));
        assert!(now[PAGE..2 * PAGE].iter().all(|&b| b == 0));
        assert!(now[2 * PAGE..].iter().all(|&b| b == b'L'));
        // Other advice drops nothing; DontNeed to the end drops the rest.
        file.advise(0, 0, Advice::WillNeed).unwrap();
        assert_eq!(contents(&*file), now);
        file.advise(0, 0, Advice::DontNeed).unwrap();
        let mut disk = vec![b'd'; 100];
        disk.resize(2 * PAGE + 200, 0);
        assert_eq!(contents(&*file), disk);
        let state = sim.file_state(Path::new("/d/f")).unwrap();
        assert_eq!((state.lost_pages, state.synced), (0, disk));
        assert_eq!(sim.stats().lost_pages_dropped, 3);
    }

    #[test]
    fn writing_into_a_lost_page_writes_the_whole_page_back() {
        // Linux writes back whole pages: a write into a lost page makes its lost bytes durable
        // after all. This is why recovery drops the pages before it writes anything there.
        for seed in 0..20 {
            let (sim, file) = setup(seed);
            file.write_all_at(b"durable ", 0).unwrap();
            file.sync_data().unwrap();
            file.write_all_at(b"LOST", 8).unwrap();
            file.write_all_at(b"LOST", PAGE as u64 + 8).unwrap();
            sim.fail_nth(FaultOp::Sync, 1, FaultError::Eio);
            assert!(file.sync_data().is_err());

            file.write_all_at(b"x", 100).unwrap();
            file.sync_data().unwrap();
            sim.crash_with(&CrashConfig::random().seed(seed));
            let image = &sim.snapshot().files[Path::new("/d/f")];
            assert_eq!(
                &image[..12],
                b"durable LOST",
                "seed {seed}: page 0 was rewritten"
            );
            assert_eq!(image[100], b'x');
            assert_eq!(
                &image[PAGE + 8..PAGE + 12],
                &[0u8; 4],
                "seed {seed}: page 1 was not"
            );
        }
    }

    #[test]
    fn a_crash_forgets_the_lost_pages() {
        let (sim, file) = setup(3);
        file.write_all_at(b"durable ", 0).unwrap();
        file.sync_data().unwrap();
        file.write_all_at(b"LOST", 8).unwrap();
        sim.fail_nth(FaultOp::Sync, 1, FaultError::Eio);
        assert!(file.sync_data().is_err());
        sim.crash_with(&CrashConfig::keep_unsynced());
        let state = sim.file_state(Path::new("/d/f")).unwrap();
        assert_eq!(state.current, b"durable ");
        assert_eq!(state.lost_pages, 0);
    }
}
