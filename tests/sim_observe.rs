//! What tests can observe: counters, the ordered event log (enough to prove an
//! acknowledgement protocol), live and durable images, clocks, and sharing across threads.
#![cfg(feature = "sim")]

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use partlog::unstable::sim::{CrashConfig, SimEvent, SimStorage};
use partlog::unstable::{ManualClock, OpenMode, Storage};

#[test]
fn counters_count_each_kind_and_each_path() {
    let sim = SimStorage::new(0);
    sim.create_dir_all(Path::new("/d/e")).unwrap();
    let a = sim.open(Path::new("/d/a"), OpenMode::CreateNew).unwrap();
    a.write_all_at(b"0123456789", 0).unwrap();
    a.write_all_at(b"!", 10).unwrap();
    a.sync_data().unwrap();
    a.sync_all().unwrap();
    let again = sim.open(Path::new("d/a"), OpenMode::Read).unwrap();
    let mut buf = [0u8; 8];
    assert_eq!(again.read_at(&mut buf, 0).unwrap(), 8);
    assert_eq!(again.read_at(&mut buf, 8).unwrap(), 3);
    let mapped = again.map_read().unwrap().unwrap();
    assert_eq!(&*mapped, b"0123456789!");
    a.set_len(4).unwrap();
    assert_eq!(mapped.len(), 11, "a mapping is a stable copy");
    sim.sync_dir(Path::new("/d")).unwrap();
    sim.rename(Path::new("/d/a"), Path::new("/d/b")).unwrap();
    sim.remove(Path::new("/d/b")).unwrap();
    assert!(sim.open(Path::new("/d/missing"), OpenMode::Read).is_err());

    let stats = sim.stats();
    assert_eq!(
        (stats.opens, stats.creates, stats.dirs_created),
        (2, 1, 2),
        "a failed open is not counted"
    );
    assert_eq!((stats.reads, stats.read_bytes, stats.maps), (2, 11, 1));
    assert_eq!(
        (stats.writes, stats.written_bytes, stats.set_lens),
        (2, 11, 1)
    );
    assert_eq!((stats.syncs, stats.sync_dirs), (2, 1));
    assert_eq!(
        (stats.renames, stats.removes, stats.crashes, stats.faults),
        (1, 1, 0, 0)
    );
    let per_path = &stats.per_path[Path::new("/d/a")];
    assert_eq!(
        (
            per_path.opens,
            per_path.reads,
            per_path.read_bytes,
            per_path.maps
        ),
        (2, 2, 11, 1),
        "both spellings of the path count as /d/a"
    );
    assert_eq!((per_path.writes, per_path.syncs), (2, 2));
    assert_eq!(stats.per_path.len(), 1);
    sim.reset_stats();
    assert_eq!(sim.stats().opens, 0);
}

/// A toy log writer: appends fixed-size records to segments of `per_segment` records and
/// acknowledges each after its sync. Returns (record, event position of the acknowledgement).
fn toy_writer(
    sim: &SimStorage,
    records: u64,
    per_segment: u64,
    sync_dir: bool,
) -> Vec<(u64, usize)> {
    let dir = Path::new("/log");
    sim.create_dir_all(dir).unwrap();
    sim.sync_dir(Path::new("/")).unwrap();
    let mut acks = Vec::new();
    let mut segment = None;
    for record in 0..records {
        if record % per_segment == 0 {
            let path = dir.join(format!("{record:020}.log"));
            segment = Some(sim.open(&path, OpenMode::CreateNew).unwrap());
            if sync_dir {
                sim.sync_dir(dir).unwrap();
            }
        }
        let file = segment.as_ref().unwrap();
        file.write_all_at(&record.to_be_bytes(), (record % per_segment) * 8)
            .unwrap();
        file.sync_data().unwrap();
        acks.push((record, sim.event_count()));
    }
    acks
}

/// The acknowledgement rule: before each acknowledgement, the record's write was followed by a
/// sync of its file, and its segment's creation by a sync of its directory.
fn check_acks(events: &[SimEvent], acks: &[(u64, usize)], per_segment: u64) -> Result<(), String> {
    for &(record, position) in acks {
        let before = &events[..position];
        let segment = PathBuf::from(format!("/log/{:020}.log", record - record % per_segment));
        let offset = (record % per_segment) * 8;
        let written = before
            .iter()
            .rposition(|e| matches!(e, SimEvent::Write { path, offset: o, .. } if *path == segment && *o == offset))
            .ok_or(format!("record {record} never written"))?;
        if !before[written..]
            .iter()
            .any(|e| matches!(e, SimEvent::Sync { path, .. } if *path == segment))
        {
            return Err(format!(
                "record {record} acknowledged before its file was synced"
            ));
        }
        let created = before
            .iter()
            .position(|e| matches!(e, SimEvent::Create { path } if *path == segment))
            .ok_or(format!("segment of record {record} never created"))?;
        if !before[created..]
            .iter()
            .any(|e| matches!(e, SimEvent::SyncDir { path } if path == Path::new("/log")))
        {
            return Err(format!(
                "record {record} acknowledged before its directory was synced"
            ));
        }
    }
    Ok(())
}

#[test]
fn the_event_log_proves_or_refutes_an_acknowledgement_protocol() {
    let sim = SimStorage::new(0);
    let acks = toy_writer(&sim, 10, 4, true);
    check_acks(&sim.events(), &acks, 4).unwrap();
    // And what the rule promises holds: a crash keeps every acknowledged record.
    sim.crash();
    let files = sim.snapshot().files;
    for (record, _) in acks {
        let segment = PathBuf::from(format!("/log/{:020}.log", record - record % 4));
        let at = ((record % 4) * 8) as usize;
        assert_eq!(files[&segment][at..at + 8], record.to_be_bytes());
    }

    let buggy = SimStorage::new(0);
    let acks = toy_writer(&buggy, 10, 4, false);
    let err = check_acks(&buggy.events(), &acks, 4).unwrap_err();
    assert!(err.contains("directory was synced"), "{err}");

    let start = buggy.event_count();
    buggy.sync_dir(Path::new("/log")).unwrap();
    assert_eq!(
        buggy.events_since(start),
        [SimEvent::SyncDir {
            path: "/log".into()
        }]
    );
    buggy.clear_events();
    assert_eq!(buggy.event_count(), 0);
    assert!(buggy.events_since(5).is_empty());
}

#[test]
fn snapshots_show_the_live_and_the_durable_images() {
    let sim = SimStorage::new(0);
    sim.create_dir_all(Path::new("/d")).unwrap();
    let file = sim.open(Path::new("/d/f"), OpenMode::CreateNew).unwrap();
    file.write_all_at(b"synced", 0).unwrap();
    file.sync_data().unwrap();
    file.write_all_at(b" and not", 6).unwrap();

    let live = sim.snapshot();
    assert_eq!(live.files[Path::new("/d/f")], b"synced and not");
    assert!(live.dirs.contains(Path::new("/d")));
    let durable = sim.durable_snapshot();
    assert!(
        durable.files.is_empty() && durable.dirs.len() == 1,
        "only the root is durable"
    );

    sim.sync_dir(Path::new("/")).unwrap();
    sim.sync_dir(Path::new("/d")).unwrap();
    let durable = sim.durable_snapshot();
    assert_eq!(durable.files[Path::new("/d/f")], b"synced");
    let state = sim.file_state(Path::new("/d/f")).unwrap();
    assert_eq!(state.synced, b"synced");
    assert_eq!(state.current, b"synced and not");
    assert_eq!(state.unsynced_ops, 1);
    assert!(state.name_durable);
    assert!(sim.file_state(Path::new("/d")).is_err());
}

#[test]
fn modification_times_come_from_the_clock_and_only_sync_all_persists_them() {
    let clock = Arc::new(ManualClock::new(1_000));
    let sim = SimStorage::new(0).with_clock(clock.clone());
    let file = sim.open(Path::new("/f"), OpenMode::CreateNew).unwrap();
    sim.sync_dir(Path::new("/")).unwrap();
    clock.set(2_000);
    file.write_all_at(b"a", 0).unwrap();
    file.sync_all().unwrap();
    clock.set(3_000);
    file.write_all_at(b"b", 1).unwrap();
    file.sync_data().unwrap();
    assert_eq!(sim.metadata(Path::new("/f")).unwrap().modified_ms, 3_000);
    sim.crash_with(&CrashConfig::lose_unsynced());
    let meta = sim.metadata(Path::new("/f")).unwrap();
    assert_eq!(
        (meta.len, meta.modified_ms),
        (2, 2_000),
        "fdatasync kept the data, not the time"
    );

    // Without a clock, a counter orders the changes.
    let sim = SimStorage::default();
    drop(sim.open(Path::new("/x"), OpenMode::CreateNew).unwrap());
    drop(sim.open(Path::new("/y"), OpenMode::CreateNew).unwrap());
    let x = sim.metadata(Path::new("/x")).unwrap().modified_ms;
    let y = sim.metadata(Path::new("/y")).unwrap().modified_ms;
    assert!(y > x);
}

#[test]
fn one_simulator_is_shared_by_clones_arcs_and_threads() {
    let sim = Arc::new(SimStorage::new(0));
    let storage: Arc<dyn Storage> = sim.clone();
    storage.create_dir_all(Path::new("/t")).unwrap();
    let threads: Vec<_> = (0..4u8)
        .map(|t| {
            let storage = Arc::clone(&storage);
            std::thread::spawn(move || {
                let path = PathBuf::from(format!("/t/{t}"));
                let file = storage.open(&path, OpenMode::CreateNew).unwrap();
                for i in 0..100u64 {
                    file.write_all_at(&[t], i).unwrap();
                }
                file.sync_data().unwrap();
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let clone = (*sim).clone();
    assert_eq!(clone.stats().writes, 400);
    let files: BTreeMap<_, _> = clone.snapshot().files;
    for t in 0..4u8 {
        assert_eq!(files[&PathBuf::from(format!("/t/{t}"))], vec![t; 100]);
    }
}

#[test]
fn files_past_the_size_limit_are_efbig() {
    let sim = SimStorage::new(0);
    sim.set_max_file_len(1 << 20);
    let file = sim.open(Path::new("/f"), OpenMode::CreateNew).unwrap();
    file.set_len(1 << 20).unwrap();
    let err = file.set_len((1 << 20) + 1).unwrap_err();
    assert_eq!(err.io_kind(), Some(ErrorKind::FileTooLarge));
    assert!(file.write_all_at(b"x", 1 << 20).is_err());
    assert!(
        file.write_all_at(b"x", u64::MAX).is_err(),
        "offset overflow is EFBIG too"
    );
    assert_eq!(file.len().unwrap(), 1 << 20);
}
