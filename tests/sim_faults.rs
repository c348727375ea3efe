//! Fault injection: the Nth operation of a kind fails, and a failed sync drops the data it
//! could not write, so that no later success can make it look durable.
#![cfg(feature = "sim")]

use std::io::ErrorKind;
use std::path::Path;

use partlog::Error;
use partlog::unstable::sim::{CrashConfig, FaultError, FaultOp, FaultRule, SimEvent, SimStorage};
use partlog::unstable::{OpenMode, Storage, StorageFile};

fn raw_os_error(err: &Error) -> Option<i32> {
    match err {
        Error::Io { source, .. } => source.raw_os_error(),
        _ => None,
    }
}

fn contents(file: &dyn StorageFile) -> Vec<u8> {
    let mut buf = vec![0u8; file.len().unwrap() as usize];
    file.read_exact_at(&mut buf, 0).unwrap();
    buf
}

/// A simulator with the durable, empty file `/d/f` open.
fn setup(seed: u64) -> (SimStorage, std::sync::Arc<dyn StorageFile>) {
    let sim = SimStorage::new(seed);
    sim.create_dir_all(Path::new("/d")).unwrap();
    sim.sync_dir(Path::new("/")).unwrap();
    let file = sim.open(Path::new("/d/f"), OpenMode::CreateNew).unwrap();
    sim.sync_dir(Path::new("/d")).unwrap();
    (sim, file)
}

#[test]
fn the_nth_sync_fails_and_what_it_could_not_write_never_becomes_durable() {
    for seed in 0..60 {
        let (sim, file) = setup(seed);
        sim.fail_nth(FaultOp::Sync, 2, FaultError::Eio);
        file.write_all_at(b"durable ", 0).unwrap();
        file.sync_data().unwrap(); // the first sync since the rule: fine

        file.write_all_at(b"LOST DATA", 8).unwrap();
        let err = file.sync_data().unwrap_err();
        assert_eq!(raw_os_error(&err), Some(5), "EIO, like the kernel's: {err}");
        assert!(matches!(&err, Error::Io { path, .. } if path == Path::new("/d/f")));
        // As on Linux, the pages stay cached, clean, and are never written.
        assert_eq!(contents(&*file), b"durable LOST DATA");
        let state = sim.file_state(Path::new("/d/f")).unwrap();
        assert_eq!(
            (state.synced, state.unsynced_ops, state.lost_pages),
            (b"durable ".to_vec(), 0, 1)
        );

        // A retry succeeds, and makes durable only what was durable before. (A write into the
        // lost page would write it back whole: reliability_fsyncgate.rs covers that.)
        file.sync_all().unwrap();
        let later = 2 * partlog::unstable::sim::PAGE_SIZE;
        file.write_all_at(b"later", later).unwrap();
        file.sync_data().unwrap();
        assert_eq!(sim.stats().faults, 1);

        sim.crash_with(&CrashConfig::random().seed(seed));
        let image = &sim.snapshot().files[Path::new("/d/f")];
        let mut expected = b"durable ".to_vec();
        expected.resize(later as usize, 0);
        expected.extend_from_slice(b"later");
        assert_eq!(image, &expected, "seed {seed}");
        assert!(!image.windows(4).any(|w| w == b"LOST"));
    }
}

#[test]
fn rules_count_from_when_they_are_armed_and_only_matching_operations() {
    let sim = SimStorage::new(1);
    sim.create_dir_all(Path::new("/d")).unwrap();
    let log = sim
        .open(Path::new("/d/0.log"), OpenMode::CreateNew)
        .unwrap();
    let index = sim
        .open(Path::new("/d/0.index"), OpenMode::CreateNew)
        .unwrap();
    for _ in 0..3 {
        log.sync_data().unwrap();
    }
    sim.inject(FaultRule::fail(FaultOp::Sync, 2).on_paths_ending_with(".log"));
    assert_eq!(sim.armed_faults(), 1);
    index.sync_all().unwrap();
    index.sync_data().unwrap();
    log.sync_all().unwrap(); // the first matching one
    sim.sync_dir(Path::new("/d")).unwrap();
    assert!(
        log.sync_data().is_err(),
        "the second .log sync since arming"
    );
    assert_eq!(sim.armed_faults(), 0);
    log.sync_data().unwrap();

    let events = sim.events();
    let fault = events
        .iter()
        .position(|e| {
            matches!(
                e,
                SimEvent::Fault {
                    op: FaultOp::Sync,
                    ..
                }
            )
        })
        .unwrap();
    assert_eq!(
        events[fault],
        SimEvent::Fault {
            op: FaultOp::Sync,
            path: "/d/0.log".into()
        }
    );

    let id = sim.fail_nth(FaultOp::Any, 1, FaultError::Eio);
    assert!(sim.cancel_fault(id));
    assert!(!sim.cancel_fault(id));
    sim.fail_nth(FaultOp::Read, 1, FaultError::Eio);
    sim.clear_faults();
    assert_eq!(sim.armed_faults(), 0);
    log.read_at(&mut [0u8; 1], 0).unwrap();
}

#[test]
fn failed_operations_change_nothing() {
    let (sim, file) = setup(2);
    file.write_all_at(b"abc", 0).unwrap();

    sim.fail_nth(
        FaultOp::Write,
        1,
        FaultError::Kind(ErrorKind::PermissionDenied),
    );
    let err = file.write_all_at(b"xyz", 0).unwrap_err();
    assert_eq!(err.io_kind(), Some(ErrorKind::PermissionDenied));
    assert_eq!(contents(&*file), b"abc");

    sim.fail_nth(FaultOp::SetLen, 1, FaultError::Eio);
    assert!(file.set_len(0).is_err());
    assert_eq!(file.len().unwrap(), 3);

    sim.fail_nth(FaultOp::Read, 1, FaultError::Eio);
    assert_eq!(
        raw_os_error(&file.read_at(&mut [0u8; 3], 0).unwrap_err()),
        Some(5)
    );
    sim.fail_nth(FaultOp::Read, 1, FaultError::Eio);
    assert!(file.map_read().is_err(), "map_read counts as a read");

    let before = sim.snapshot();
    let durable_before = sim.durable_snapshot();
    sim.fail_nth(FaultOp::Create, 1, FaultError::Enospc);
    let err = sim.open(Path::new("/d/g"), OpenMode::Create).unwrap_err();
    assert_eq!(err.io_kind(), Some(ErrorKind::StorageFull));
    sim.fail_nth(FaultOp::CreateDir, 1, FaultError::Enospc);
    assert!(sim.create_dir_all(Path::new("/d/sub/deeper")).is_err());
    sim.fail_nth(FaultOp::Rename, 1, FaultError::Eio);
    assert!(sim.rename(Path::new("/d/f"), Path::new("/d/h")).is_err());
    sim.fail_nth(FaultOp::Remove, 1, FaultError::Eio);
    assert!(sim.remove(Path::new("/d/f")).is_err());
    sim.fail_nth(FaultOp::Open, 1, FaultError::Eio);
    assert!(sim.open(Path::new("/d/f"), OpenMode::Read).is_err());
    assert_eq!(sim.snapshot(), before);

    // A failed directory sync makes nothing durable; the operations stay pending.
    drop(sim.open(Path::new("/d/g"), OpenMode::Create).unwrap());
    sim.fail_nth(FaultOp::SyncDir, 1, FaultError::Eio);
    assert!(sim.sync_dir(Path::new("/d")).is_err());
    assert_eq!(sim.durable_snapshot(), durable_before);
    assert!(!sim.file_state(Path::new("/d/g")).unwrap().name_durable);
    sim.sync_dir(Path::new("/d")).unwrap();
    assert!(sim.file_state(Path::new("/d/g")).unwrap().name_durable);
    assert_eq!(sim.stats().faults, 10);
}

#[test]
fn a_short_write_stores_a_prefix_then_fails() {
    let (sim, file) = setup(3);
    sim.inject(FaultRule::short_write(2, 4));
    file.write_all_at(b"first", 0).unwrap();
    let err = file.write_all_at(b"0123456789", 5).unwrap_err();
    assert_eq!(err.io_kind(), Some(ErrorKind::StorageFull));
    assert_eq!(contents(&*file), b"first0123");
    let tail = &sim.events()[sim.event_count() - 2..];
    assert_eq!(
        tail,
        [
            SimEvent::Fault {
                op: FaultOp::Write,
                path: "/d/f".into()
            },
            SimEvent::Write {
                path: "/d/f".into(),
                offset: 5,
                len: 4
            }
        ]
    );
    sim.inject(FaultRule::short_write(1, 2).error(FaultError::Eio));
    assert_eq!(
        raw_os_error(&file.write_all_at(b"xyz", 9).unwrap_err()),
        Some(5)
    );
    assert_eq!(contents(&*file), b"first0123xy");
}

#[test]
fn a_crash_rule_crashes_just_before_the_nth_operation() {
    let (sim, file) = setup(4);
    sim.inject(FaultRule::crash(FaultOp::Write, 3).crash_config(CrashConfig::keep_unsynced()));
    file.write_all_at(b"one ", 0).unwrap();
    file.write_all_at(b"two ", 4).unwrap();
    let err = file.write_all_at(b"three", 8).unwrap_err();
    assert_eq!(err.io_kind(), Some(ErrorKind::Other));
    assert!(file.len().is_err(), "the handle died in the crash");
    assert_eq!(sim.stats().crashes, 1);
    assert!(matches!(sim.events().last(), Some(SimEvent::Crash { .. })));
    assert_eq!(sim.snapshot().files[Path::new("/d/f")], b"one two ");

    // With the default config the image is random but the synced part is kept.
    let (sim, file) = setup(5);
    file.write_all_at(b"synced", 0).unwrap();
    file.sync_data().unwrap();
    sim.inject(FaultRule::crash(FaultOp::Sync, 1));
    file.write_all_at(b"more", 6).unwrap();
    assert!(file.sync_data().is_err());
    assert!(sim.snapshot().files[Path::new("/d/f")].starts_with(b"synced"));
}
