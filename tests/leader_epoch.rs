//! The leader-epoch cache (`LeaderEpochFileCache`) and its file `leader-epoch-checkpoint`
//! (FORMAT.md §12): Kafka's `LeaderEpochFileCacheTest` cases with their numbers, the broker
//! fixture's file, every way the file can be bad, crashes during a write, and a model check of
//! the cache's invariants.

use std::path::Path;
use std::sync::Arc;

use partlog::unstable::leader_epoch::{
    EpochEntry, LEADER_EPOCH_CHECKPOINT_FILE_NAME, LeaderEpochFileCache, encode_checkpoint,
    parse_checkpoint, read_checkpoint, write_checkpoint,
};
use partlog::unstable::{OsStorage, Storage};
use partlog::{Corruption, Error};
use proptest::prelude::*;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/broker/partlog-fixture-0"
);

fn entries(pairs: &[(i32, i64)]) -> Vec<EpochEntry> {
    pairs
        .iter()
        .map(|&(epoch, start)| EpochEntry::new(epoch, start))
        .collect()
}

fn cache_with(pairs: &[(i32, i64)]) -> LeaderEpochFileCache {
    let mut cache = LeaderEpochFileCache::detached();
    for &(epoch, start) in pairs {
        cache.assign(epoch, start).unwrap();
    }
    cache
}

/// Kafka: `shouldNotOverwriteOffsetForALeaderEpochOnceItHasBeenAssigned`.
#[test]
fn leader_epoch_assign_does_not_overwrite_the_start_of_an_assigned_epoch() {
    let mut cache = cache_with(&[(2, 6)]);
    assert!(!cache.assign(2, 10).unwrap());
    assert_eq!(cache.entries(), entries(&[(2, 6)]));
}

/// Kafka: `shouldTruncateIfMatchingEpochButEarlierStartingOffset`.
#[test]
fn leader_epoch_assign_of_the_same_epoch_at_an_earlier_offset_truncates() {
    let mut cache = cache_with(&[(5, 11), (6, 12), (7, 13)]);
    assert!(cache.assign(7, 12).unwrap());
    assert_eq!(cache.entries(), entries(&[(5, 11), (7, 12)]));
    assert_eq!(cache.end_offset_for(5, 100), (5, 12));
    assert_eq!(cache.end_offset_for(6, 100), (5, 12));
}

/// Kafka: `shouldEnforceMonotonicallyIncreasingEpochs`.
#[test]
fn leader_epoch_assign_enforces_monotonically_increasing_epochs() {
    let mut cache = cache_with(&[(1, 5), (2, 6)]);
    cache.assign(1, 7).unwrap();
    assert_eq!(cache.entries(), entries(&[(1, 7)]));
    assert_eq!(cache.end_offset_for(1, 8), (1, 8));
    assert_eq!(cache.end_offset_for(2, 8), (-1, -1));
}

/// Kafka: `shouldReturnNextAvailableEpochIfThereIsNoExactEpochForTheOneRequested`.
#[test]
fn leader_epoch_end_offset_for_a_missing_epoch_is_the_next_epochs_start() {
    let cache = cache_with(&[(0, 10), (2, 13), (4, 17)]);
    assert_eq!(cache.end_offset_for(1, 20), (0, 13));
    assert_eq!(cache.end_offset_for(2, 20), (2, 17));
    assert_eq!(cache.end_offset_for(3, 20), (2, 17));
    assert_eq!(cache.end_offset_for(4, 20), (4, 20));
    assert_eq!(cache.end_offset_for(5, 20), (-1, -1));
    assert_eq!(cache.end_offset_for(-1, 20), (-1, -1));
}

/// Kafka: `shouldReturnFirstEpochIfRequestedEpochLessThanFirstEpoch`.
#[test]
fn leader_epoch_end_offset_for_an_epoch_below_all_is_the_first_start() {
    let cache = cache_with(&[(5, 11), (6, 12), (7, 13)]);
    assert_eq!(cache.end_offset_for(4, 14), (4, 11));
}

/// Kafka: `shouldGetFirstOffsetOfSubsequentEpochWhenOffsetRequestedForPreviousEpoch`.
#[test]
fn leader_epoch_end_offset_for_a_previous_epoch_is_the_start_of_the_next() {
    let mut cache = LeaderEpochFileCache::detached();
    for (epoch, start) in [(1, 11), (1, 12), (2, 13), (2, 14), (3, 15), (3, 16)] {
        cache.assign(epoch, start).unwrap();
    }
    assert_eq!(cache.entries(), entries(&[(1, 11), (2, 13), (3, 15)]));
    assert_eq!(cache.end_offset_for(2, 17), (2, 15));
}

/// Kafka: `shouldDropEntriesOnEpochBoundaryWhenRemovingLatestEntries`.
#[test]
fn leader_epoch_truncate_from_end_drops_entries_on_the_epoch_boundary() {
    let mut cache = cache_with(&[(2, 6), (3, 8), (4, 11)]);
    cache.truncate_from_end(8).unwrap();
    assert_eq!(cache.entries(), entries(&[(2, 6)]));
}

/// Kafka: `shouldUpdateSavedOffsetWhenOffsetToClearToIsBetweenEpochs`.
#[test]
fn leader_epoch_truncate_from_start_between_epochs_moves_the_start() {
    let mut cache = cache_with(&[(2, 6), (3, 8), (4, 11)]);
    cache.truncate_from_start(9).unwrap();
    assert_eq!(cache.entries(), entries(&[(3, 9), (4, 11)]));
}

#[test]
fn leader_epoch_truncate_from_start_on_an_epoch_boundary_keeps_starts_distinct() {
    let mut cache = cache_with(&[(2, 6), (3, 8), (4, 11)]);
    cache.truncate_from_start(8).unwrap();
    assert_eq!(cache.entries(), entries(&[(3, 8), (4, 11)]));
    cache.truncate_from_start(5).unwrap();
    assert_eq!(cache.entries(), entries(&[(3, 8), (4, 11)]));
}

/// Kafka: `shouldFetchEpochForGivenOffset`.
#[test]
fn leader_epoch_epoch_for_offset_is_the_epoch_that_wrote_it() {
    let cache = cache_with(&[(0, 10), (1, 20), (5, 30)]);
    assert_eq!(cache.epoch_for_offset(25), Some(1));
    assert_eq!(cache.epoch_for_offset(20), Some(1));
    assert_eq!(cache.epoch_for_offset(30), Some(5));
    assert_eq!(cache.epoch_for_offset(50), Some(5));
    assert_eq!(cache.epoch_for_offset(5), None);
}

#[test]
fn leader_epoch_assign_of_a_negative_epoch_or_offset_is_invalid_argument() {
    let mut cache = cache_with(&[(1, 0)]);
    assert!(matches!(
        cache.assign(-1, 5),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(matches!(
        cache.assign(2, -5),
        Err(Error::InvalidArgument { .. })
    ));
    assert_eq!(cache.entries(), entries(&[(1, 0)]));
}

#[test]
fn leader_epoch_clear_empties_the_cache_and_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(OsStorage::new());
    let mut cache = LeaderEpochFileCache::load(storage.clone(), dir.path()).unwrap();
    cache.assign(3, 7).unwrap();
    cache.clear().unwrap();
    assert!(cache.entries().is_empty());
    assert_eq!(
        read_checkpoint(&*storage, dir.path()).unwrap(),
        Some(vec![])
    );
    assert_eq!(
        std::fs::read(dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE_NAME)).unwrap(),
        b"0\n0\n"
    );
}

#[test]
fn leader_epoch_broker_fixture_parses_and_rewrites_to_identical_bytes() {
    let fixture = Path::new(FIXTURE);
    let original = std::fs::read(fixture.join(LEADER_EPOCH_CHECKPOINT_FILE_NAME)).unwrap();
    let storage = OsStorage::new();
    let parsed = read_checkpoint(&storage, fixture).unwrap().unwrap();
    assert_eq!(parsed, entries(&[(0, 0)]));

    let copy = tempfile::tempdir().unwrap();
    write_checkpoint(&storage, copy.path(), &parsed).unwrap();
    let rewritten = std::fs::read(copy.path().join(LEADER_EPOCH_CHECKPOINT_FILE_NAME)).unwrap();
    assert_eq!(rewritten, original);
    assert_eq!(encode_checkpoint(&parsed), original);
}

#[test]
fn leader_epoch_every_change_is_in_the_file_when_the_call_returns() {
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(OsStorage::new());
    let mut cache = LeaderEpochFileCache::load(storage.clone(), dir.path()).unwrap();
    assert!(read_checkpoint(&*storage, dir.path()).unwrap().is_none());
    let on_disk = |storage: &Arc<dyn Storage>| read_checkpoint(&**storage, dir.path()).unwrap();

    cache.assign(0, 0).unwrap();
    cache.assign(2, 10).unwrap();
    cache.assign(4, 20).unwrap();
    assert_eq!(
        on_disk(&storage),
        Some(entries(&[(0, 0), (2, 10), (4, 20)]))
    );
    cache.truncate_from_end(20).unwrap();
    assert_eq!(on_disk(&storage), Some(entries(&[(0, 0), (2, 10)])));
    cache.truncate_from_start(5).unwrap();
    assert_eq!(on_disk(&storage), Some(entries(&[(0, 5), (2, 10)])));

    let reloaded = LeaderEpochFileCache::load(storage, dir.path()).unwrap();
    assert_eq!(reloaded.entries(), cache.entries());
}

/// Each bad file with the corruption it must give.
#[test]
fn leader_epoch_bad_checkpoint_files_give_typed_errors() {
    fn corruption(bytes: &[u8]) -> (u64, Corruption) {
        match parse_checkpoint(Path::new("leader-epoch-checkpoint"), bytes) {
            Err(Error::Corrupt { position, what, .. }) => (position, what),
            other => panic!(
                "{:?}: expected Corrupt, got {other:?}",
                String::from_utf8_lossy(bytes)
            ),
        }
    }
    let bad_header = |bytes: &[u8]| matches!(corruption(bytes).1, Corruption::BadHeader(_));
    let bad_entry = |bytes: &[u8]| matches!(corruption(bytes).1, Corruption::BadRecord(_));

    // The version.
    assert!(bad_header(b""));
    assert!(bad_header(b"1\n1\n0 0\n"));
    assert!(bad_header(b"x\n1\n0 0\n"));
    // The count.
    assert!(bad_header(b"0\n"));
    assert!(bad_header(b"0\nx\n0 0\n"));
    assert!(bad_header(b"0\n-1\n"));
    assert_eq!(
        corruption(b"0\n2\n0 0\n"),
        (
            8,
            Corruption::RecordCount {
                declared: 2,
                found: 1
            }
        )
    );
    assert_eq!(
        corruption(b"0\n1\n0 0\n1 5\n"),
        (
            8,
            Corruption::RecordCount {
                declared: 1,
                found: -1
            }
        )
    );
    // Non-numeric, negative or missing fields.
    assert_eq!(corruption(b"0\n1\nx 0\n").0, 4);
    assert!(bad_entry(b"0\n1\nx 0\n"));
    assert!(bad_entry(b"0\n1\n0 y\n"));
    assert!(bad_entry(b"0\n1\n0\n"));
    assert!(bad_entry(b"0\n1\n0 0 0\n"));
    assert!(bad_entry(b"0\n1\n-1 0\n"));
    assert!(bad_entry(b"0\n1\n0 -3\n"));
    assert!(bad_entry(b"0\n1\n\xff 0\n"));
    // Entries that do not strictly increase.
    assert_eq!(corruption(b"0\n2\n3 5\n2 9\n").0, 8);
    assert!(bad_entry(b"0\n2\n3 5\n3 9\n"));
    assert_eq!(
        corruption(b"0\n2\n3 5\n4 5\n"),
        (
            8,
            Corruption::OffsetOrder {
                offset: 5,
                bound: 5
            }
        )
    );

    // A good file, with Java's whitespace and line ends tolerated.
    assert_eq!(
        parse_checkpoint(Path::new("f"), b"0\r\n2\r\n1  3\r\n4\t9\n").unwrap(),
        entries(&[(1, 3), (4, 9)])
    );
}

#[test]
fn leader_epoch_load_of_a_bad_file_is_a_typed_error_and_leaves_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE_NAME);
    std::fs::write(&path, b"0\n2\n5 9\n4 10\n").unwrap();
    let storage: Arc<dyn Storage> = Arc::new(OsStorage::new());
    let error = LeaderEpochFileCache::load(storage, dir.path()).unwrap_err();
    assert!(
        matches!(&error, Error::Corrupt { file, .. } if *file == path),
        "{error:?}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), b"0\n2\n5 9\n4 10\n");
}

/// A crash at every storage operation of a write (before it, and with each crash image) leaves
/// the old file or the new one, never a torn one, and the next write succeeds.
#[cfg(feature = "sim")]
#[test]
fn leader_epoch_crash_at_every_operation_of_a_write_leaves_the_old_or_the_new_file() {
    use partlog::unstable::SimStorage;
    use partlog::unstable::sim::{CrashConfig, FaultOp, FaultRule};

    let dir = Path::new("/data/topic-0");
    let old = entries(&[(0, 0), (3, 10)]);
    let new = entries(&[(0, 0), (3, 10), (5, 20)]);
    let images = [
        CrashConfig::default(),
        CrashConfig::lose_unsynced(),
        CrashConfig::keep_unsynced(),
    ];
    for (image_index, image) in images.iter().enumerate() {
        let mut completed = false;
        let mut crash_points = 0;
        for crash_at in 1..64u64 {
            for seed in 0..4u64 {
                let sim = SimStorage::new(seed * 1_000 + crash_at * 10 + image_index as u64);
                sim.create_dir_all(dir).unwrap();
                // The directory itself is the caller's to make durable, before the cache's file.
                sim.sync_dir(Path::new("/")).unwrap();
                sim.sync_dir(Path::new("/data")).unwrap();
                let storage: Arc<dyn Storage> = Arc::new(sim.clone());
                let mut cache = LeaderEpochFileCache::load(storage.clone(), dir).unwrap();
                cache.assign(0, 0).unwrap();
                cache.assign(3, 10).unwrap();

                let crashes = sim.stats().crashes;
                sim.inject(FaultRule::crash(FaultOp::Any, crash_at).crash_config(image.clone()));
                let result = cache.assign(5, 20);
                if sim.stats().crashes == crashes {
                    sim.clear_faults();
                    result.unwrap();
                    assert_eq!(read_checkpoint(&sim, dir).unwrap(), Some(new.clone()));
                    completed = true;
                    continue;
                }
                drop(cache);
                if seed == 0 {
                    crash_points += 1;
                }
                let context = format!("{image:?}, seed {seed}: crash at operation {crash_at}");
                let on_disk =
                    read_checkpoint(&sim, dir).unwrap_or_else(|error| panic!("{context}: {error}"));
                assert!(
                    on_disk == Some(old.clone()) || on_disk == Some(new.clone()),
                    "{context}: {on_disk:?}"
                );
                let mut reloaded = LeaderEpochFileCache::load(storage, dir).unwrap();
                reloaded.assign(5, 20).unwrap();
                assert_eq!(read_checkpoint(&sim, dir).unwrap(), Some(new.clone()));
            }
            if completed {
                break;
            }
        }
        assert!(completed, "{image:?}: the write never completed");
        // Create the temporary file, set its length, write, fsync, rename, fsync the directory.
        assert!(
            crash_points >= 6,
            "{image:?}: only {crash_points} crash points"
        );
    }
}

/// The simplest model: the list of entries, with Kafka's rules spelled out.
#[derive(Debug, Clone)]
enum Op {
    Assign(i32, i64),
    TruncateFromEnd(i64),
    TruncateFromStart(i64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..12i32, 0..60i64).prop_map(|(e, o)| Op::Assign(e, o)),
        1 => (0..60i64).prop_map(Op::TruncateFromEnd),
        1 => (0..60i64).prop_map(Op::TruncateFromStart),
    ]
}

/// `end_offset_for` by brute force over the model's entries.
fn model_end_offset_for(model: &[(i32, i64)], epoch: i32, leo: i64) -> (i32, i64) {
    if epoch == -1 {
        return (-1, -1);
    }
    if model.last().map(|e| e.0) == Some(epoch) {
        return (epoch, leo);
    }
    let higher = model.iter().filter(|e| e.0 > epoch).min_by_key(|e| e.0);
    let floor = model.iter().filter(|e| e.0 <= epoch).max_by_key(|e| e.0);
    match (higher, floor) {
        (None, _) => (-1, -1),
        (Some(h), None) => (epoch, h.1),
        (Some(h), Some(f)) => (f.0, h.1),
    }
}

proptest! {
    #[test]
    fn leader_epoch_any_sequence_keeps_entries_increasing_and_matches_the_model(
        ops in proptest::collection::vec(op(), 0..40),
        query_epoch in -1..14i32,
    ) {
        let mut cache = LeaderEpochFileCache::detached();
        let mut model: Vec<(i32, i64)> = Vec::new();
        for op in &ops {
            match *op {
                Op::Assign(epoch, start) => {
                    let needed = model.last().is_none_or(|l| epoch != l.0 || start < l.1);
                    if needed {
                        model.retain(|e| e.0 < epoch && e.1 < start);
                        model.push((epoch, start));
                    }
                    prop_assert_eq!(cache.assign(epoch, start).unwrap(), needed);
                }
                Op::TruncateFromEnd(offset) => {
                    model.retain(|e| e.1 < offset);
                    cache.truncate_from_end(offset).unwrap();
                }
                Op::TruncateFromStart(offset) => {
                    if let Some(last_below) = model.iter().rev().find(|e| e.1 <= offset).copied() {
                        model.retain(|e| e.1 > offset);
                        model.insert(0, (last_below.0, offset));
                    }
                    cache.truncate_from_start(offset).unwrap();
                }
            }
            let got: Vec<(i32, i64)> =
                cache.entries().iter().map(|e| (e.epoch, e.start_offset)).collect();
            prop_assert_eq!(&got, &model);
            for pair in got.windows(2) {
                prop_assert!(pair[0].0 < pair[1].0 && pair[0].1 < pair[1].1, "{:?}", got);
            }
        }
        let leo = model.last().map_or(0, |e| e.1 + 5);
        prop_assert_eq!(
            cache.end_offset_for(query_epoch, leo),
            model_end_offset_for(&model, query_epoch, leo)
        );
        for offset in 0..60 {
            let expected = model.iter().rev().find(|e| e.1 <= offset).map(|e| e.0);
            prop_assert_eq!(cache.epoch_for_offset(offset), expected);
        }
    }
}
