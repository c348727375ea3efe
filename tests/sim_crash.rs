//! Crash semantics of the simulator, checked against the model its docs state: synced state
//! always survives; each unsynced write is kept, lost or torn at a 512-byte boundary; lengths
//! fall back to a length the file had; each directory keeps a prefix of its unsynced changes.
//!
//! The legal images are enumerated here independently of the simulator, and every image a
//! seeded crash produces must be one of them; over many seeds every class of outcome must occur.
//! Random workloads are run on the simulator and on this file's own model of them
//! ([`Workload`]), and each crash must show one of the directory's states with legal files.
#![cfg(feature = "sim")]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use partlog::unstable::sim::{CrashConfig, CrashMode, SimSnapshot, SimStorage};
use partlog::unstable::{OpenMode, Storage, StorageFile};
use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, RngSeed};

const SEEDS: u64 = 300;

/// An unsynced file operation, for the scenarios and the oracle.
#[derive(Debug, Clone)]
enum Op {
    Write(u64, Vec<u8>),
    SetLen(u64),
}

fn put(data: &mut Vec<u8>, offset: u64, bytes: &[u8]) {
    let start = offset as usize;
    if data.len() < start + bytes.len() {
        data.resize(start + bytes.len(), 0);
    }
    data[start..start + bytes.len()].copy_from_slice(bytes);
}

/// Every surviving prefix length a write may have: none, whole, or cut at each 512-byte
/// boundary of the file strictly inside it.
fn surviving_prefixes(offset: u64, len: u64) -> Vec<u64> {
    let mut prefixes = vec![0, len];
    let mut boundary = (offset / 512 + 1) * 512;
    while boundary < offset + len {
        prefixes.push(boundary - offset);
        boundary += 512;
    }
    prefixes
}

/// The lengths a file synced as `synced` and then changed by `ops` had: the synced one, then
/// the one after each operation. A crash leaves one of them.
fn lengths_after(synced: &[u8], ops: &[Op]) -> Vec<u64> {
    let mut lengths = vec![synced.len() as u64];
    for op in ops {
        let before = *lengths.last().unwrap();
        lengths.push(match op {
            Op::Write(offset, bytes) => before.max(offset + bytes.len() as u64),
            Op::SetLen(len) => *len,
        });
    }
    lengths
}

/// How many combinations of write fates `ops` allow: the product of each write's choices.
fn fate_count(ops: &[Op]) -> u64 {
    ops.iter()
        .map(|op| match op {
            Op::Write(offset, bytes) => {
                surviving_prefixes(*offset, bytes.len() as u64).len() as u64
            }
            Op::SetLen(_) => 1,
        })
        .fold(1, u64::saturating_mul)
}

/// Every combination of write fates, as a list of surviving prefix lengths (one per write).
fn fates(ops: &[Op]) -> Vec<Vec<u64>> {
    let mut fates: Vec<Vec<u64>> = vec![Vec::new()];
    for op in ops {
        if let Op::Write(offset, bytes) = op {
            let choices = surviving_prefixes(*offset, bytes.len() as u64);
            fates = fates
                .iter()
                .flat_map(|fate| {
                    choices.iter().map(move |&c| {
                        let mut next = fate.clone();
                        next.push(c);
                        next
                    })
                })
                .collect();
        }
    }
    fates
}

/// The image in which the first `persisted` operations' length survived and each write kept
/// the prefix `fate` gives it.
fn image(synced: &[u8], ops: &[Op], persisted: usize, final_len: u64, fate: &[u64]) -> Vec<u8> {
    let mut data = synced.to_vec();
    let mut writes = fate.iter();
    for (position, op) in ops.iter().enumerate() {
        match op {
            Op::SetLen(len) if position < persisted => data.resize(*len as usize, 0),
            Op::SetLen(_) => {}
            Op::Write(offset, bytes) => {
                let kept = *writes.next().unwrap() as usize;
                put(&mut data, *offset, &bytes[..kept]);
            }
        }
    }
    data.resize(final_len as usize, 0);
    data
}

/// The oracle: every post-crash image of a file synced as `synced` and then changed by `ops`.
fn legal_images(synced: &[u8], ops: &[Op]) -> BTreeSet<Vec<u8>> {
    let fates = fates(ops);
    let mut images = BTreeSet::new();
    for (persisted, &final_len) in lengths_after(synced, ops).iter().enumerate() {
        for fate in &fates {
            images.insert(image(synced, ops, persisted, final_len, fate));
        }
    }
    images
}

/// Beyond this many combinations of write fates, [`is_legal_image`] checks only the length.
const MAX_FATES: u64 = 4096;

/// Whether `candidate` is one of [`legal_images`]`(synced, ops)`, without building the set.
fn is_legal_image(synced: &[u8], ops: &[Op], candidate: &[u8]) -> bool {
    let lengths = lengths_after(synced, ops);
    let persisted: Vec<usize> = (0..lengths.len())
        .filter(|&p| lengths[p] == candidate.len() as u64)
        .collect();
    if persisted.is_empty() {
        return false;
    }
    if fate_count(ops) > MAX_FATES {
        // Too many to enumerate (rare: many unsynced writes to one file); the length is legal.
        return true;
    }
    let fates = fates(ops);
    persisted.iter().any(|&p| {
        fates
            .iter()
            .any(|fate| image(synced, ops, p, lengths[p], fate) == candidate)
    })
}

/// A simulator with a durable directory `/d`.
fn sim_with_dir(seed: u64) -> SimStorage {
    let sim = SimStorage::new(seed);
    sim.create_dir_all(Path::new("/d")).unwrap();
    sim.sync_dir(Path::new("/")).unwrap();
    sim
}

/// Syncs `synced` into the durable file `/d/f`, applies `ops` unsynced, crashes with `seed`
/// and returns the file's bytes after the crash.
fn crash_scenario(seed: u64, synced: &[u8], ops: &[Op]) -> Vec<u8> {
    let sim = sim_with_dir(seed);
    let file = sim.open(Path::new("/d/f"), OpenMode::CreateNew).unwrap();
    file.write_all_at(synced, 0).unwrap();
    file.sync_data().unwrap();
    sim.sync_dir(Path::new("/d")).unwrap();
    for op in ops {
        match op {
            Op::Write(offset, bytes) => file.write_all_at(bytes, *offset).unwrap(),
            Op::SetLen(len) => file.set_len(*len).unwrap(),
        }
    }
    sim.crash_with(&CrashConfig::random().seed(seed));
    sim.snapshot()
        .files
        .remove(Path::new("/d/f"))
        .expect("a synced file with a synced name survives every crash")
}

fn names(sim: &SimStorage, dir: &str) -> BTreeSet<String> {
    sim.list(Path::new(dir)).unwrap().into_iter().collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| n.to_string()).collect()
}

#[test]
fn synced_data_always_survives() {
    let synced: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
    for seed in 0..SEEDS {
        let image = crash_scenario(
            seed,
            &synced,
            &[Op::Write(3000, vec![7; 900]), Op::Write(4100, vec![8; 10])],
        );
        assert!(
            image.len() >= synced.len(),
            "seed {seed}: length {}",
            image.len()
        );
        assert_eq!(&image[..synced.len()], &synced[..], "seed {seed}");
    }
}

#[test]
fn unsynced_writes_are_kept_lost_or_torn_at_sector_boundaries() {
    let synced = vec![b'a'; 1000];
    let ops = [
        Op::Write(700, vec![b'b'; 1500]), // crosses 1024, 1536 and 2048
        Op::SetLen(2500),
        Op::Write(3100, vec![b'c'; 100]), // inside one sector: kept or lost, never torn
    ];
    let legal = legal_images(&synced, &ops);
    let mut lengths = BTreeSet::new();
    let mut tears = BTreeSet::new();
    let (mut kept, mut lost, mut small_kept, mut small_lost) = (0, 0, 0, 0);
    for seed in 0..SEEDS {
        let image = crash_scenario(seed, &synced, &ops);
        assert!(
            legal.contains(&image),
            "seed {seed}: illegal image of {} bytes",
            image.len()
        );
        lengths.insert(image.len());
        if image.len() >= 2200 {
            let surviving = image[700..2200].iter().take_while(|&&b| b == b'b').count();
            match surviving {
                0 => lost += 1,
                1500 => kept += 1,
                n => {
                    assert_eq!((700 + n) % 512, 0, "seed {seed}: torn at {}", 700 + n);
                    tears.insert(700 + n);
                }
            }
        }
        if image.len() == 3200 {
            match image[3100] {
                b'c' => small_kept += 1,
                0 => small_lost += 1,
                other => panic!("seed {seed}: byte {other}"),
            }
        }
    }
    assert!(kept > 0 && lost > 0, "kept {kept}, lost {lost}");
    assert_eq!(
        tears,
        BTreeSet::from([1024, 1536, 2048]),
        "every tear point occurs"
    );
    assert!(small_kept > 0 && small_lost > 0);
    assert_eq!(
        lengths,
        BTreeSet::from([1000, 2200, 2500, 3200]),
        "every length occurs"
    );
}

#[test]
fn lengths_revert_and_persisted_truncations_stay() {
    // Shrink, then write again: the old bytes past 100 come back only if the shrink is undone.
    let synced = vec![b'A'; 1000];
    let ops = [Op::SetLen(100), Op::Write(100, vec![b'B'; 50])];
    let legal = legal_images(&synced, &ops);
    let mut seen = BTreeSet::new();
    for seed in 0..SEEDS {
        let image = crash_scenario(seed, &synced, &ops);
        assert!(
            legal.contains(&image),
            "seed {seed}: {:?}",
            &image[..image.len().min(160)]
        );
        seen.insert(image);
    }
    let mut with_zeros = vec![b'A'; 100];
    with_zeros.extend([0; 50]);
    let mut with_b = vec![b'A'; 100];
    with_b.extend([b'B'; 50]);
    let mut old_with_b = vec![b'A'; 1000];
    old_with_b[100..150].fill(b'B');
    for expected in [
        synced.clone(),
        old_with_b,
        vec![b'A'; 100],
        with_zeros,
        with_b,
    ] {
        assert!(
            seen.contains(&expected),
            "never saw an image of {} bytes",
            expected.len()
        );
    }

    // Overlapping writes on a new file: the later write wins where both survive.
    let ops = [
        Op::Write(0, vec![b'x'; 1024]),
        Op::Write(500, vec![b'y'; 600]),
    ];
    let legal = legal_images(&[], &ops);
    let mut seen = BTreeSet::new();
    for seed in 0..SEEDS {
        let image = crash_scenario(seed, &[], &ops);
        assert!(legal.contains(&image), "seed {seed}");
        seen.insert(image);
    }
    assert!(seen.len() >= 10, "only {} distinct images", seen.len());
}

#[test]
fn unsynced_creates_renames_and_removes_may_be_undone_synced_ones_never() {
    let (mut created, mut not_created) = (0, 0);
    let (mut renamed, mut not_renamed) = (0, 0);
    let (mut removed, mut not_removed) = (0, 0);
    for seed in 0..SEEDS {
        let sim = sim_with_dir(seed);
        let d = Path::new("/d");
        for (name, bytes) in [("old", b"OLD"), ("a", b"AAA"), ("b", b"BBB"), ("r", b"RRR")] {
            let file = sim.open(&d.join(name), OpenMode::CreateNew).unwrap();
            file.write_all_at(bytes, 0).unwrap();
            file.sync_data().unwrap();
        }
        sim.sync_dir(d).unwrap();
        // Unsynced directory operations (their files' data is synced).
        let new = sim.open(&d.join("new"), OpenMode::CreateNew).unwrap();
        new.write_all_at(b"NEW", 0).unwrap();
        new.sync_all().unwrap();
        sim.rename(&d.join("a"), &d.join("b")).unwrap();
        sim.remove(&d.join("r")).unwrap();

        sim.crash_with(&CrashConfig::random().seed(seed));
        let files = sim.snapshot().files;
        let get = |name: &str| files.get(&d.join(name)).map(Vec::as_slice);
        assert_eq!(get("old"), Some(&b"OLD"[..]), "seed {seed}");
        match get("new") {
            Some(bytes) => {
                assert_eq!(bytes, b"NEW", "synced data of a surviving create");
                created += 1;
            }
            None => not_created += 1,
        }
        match (get("a"), get("b")) {
            (None, Some(b"AAA")) => renamed += 1,
            (Some(b"AAA"), Some(b"BBB")) => not_renamed += 1,
            other => panic!("seed {seed}: a half-applied rename {other:?}"),
        }
        match get("r") {
            Some(bytes) => {
                assert_eq!(bytes, b"RRR", "an undone remove brings the data back");
                not_removed += 1;
            }
            None => removed += 1,
        }
    }
    for (what, count) in [
        ("created", created),
        ("not created", not_created),
        ("renamed", renamed),
        ("not renamed", not_renamed),
        ("removed", removed),
        ("not removed", not_removed),
    ] {
        assert!(count > 0, "outcome {what} never occurred");
    }

    // Synced by sync_dir: never undone.
    for seed in 0..50 {
        let sim = sim_with_dir(seed);
        let d = Path::new("/d");
        for name in ["a", "b", "r"] {
            let file = sim.open(&d.join(name), OpenMode::CreateNew).unwrap();
            file.write_all_at(name.as_bytes(), 0).unwrap();
            file.sync_data().unwrap();
        }
        sim.sync_dir(d).unwrap();
        sim.rename(&d.join("a"), &d.join("b")).unwrap();
        sim.remove(&d.join("r")).unwrap();
        drop(sim.open(&d.join("new"), OpenMode::CreateNew).unwrap());
        sim.sync_dir(d).unwrap();
        sim.crash();
        assert_eq!(names(&sim, "/d"), set(&["b", "new"]), "seed {seed}");
        assert_eq!(sim.snapshot().files[&d.join("b")], b"a");
    }
}

#[test]
fn each_directory_keeps_a_prefix_of_its_unsynced_operations() {
    // The directory's states after each of its operations; a crash must show one of them.
    let states = [
        set(&[]),
        set(&["f1"]),
        set(&["f1", "f2"]),
        set(&["f2", "g1"]),
        set(&["g1"]),
        set(&["f3", "g1"]),
    ];
    let mut seen = BTreeSet::new();
    for seed in 0..SEEDS {
        let sim = sim_with_dir(seed);
        sim.create_dir_all(Path::new("/q")).unwrap();
        sim.sync_dir(Path::new("/")).unwrap();
        let d = Path::new("/d");
        drop(sim.open(&d.join("f1"), OpenMode::CreateNew).unwrap());
        drop(sim.open(&d.join("f2"), OpenMode::CreateNew).unwrap());
        sim.rename(&d.join("f1"), &d.join("g1")).unwrap();
        sim.remove(&d.join("f2")).unwrap();
        drop(sim.open(&d.join("f3"), OpenMode::CreateNew).unwrap());
        // Another directory's operations, synced: independent of /d's fate.
        drop(sim.open(Path::new("/q/x"), OpenMode::CreateNew).unwrap());
        sim.sync_dir(Path::new("/q")).unwrap();

        sim.crash_with(&CrashConfig::random().seed(seed));
        let now = names(&sim, "/d");
        let state = states
            .iter()
            .position(|s| *s == now)
            .unwrap_or_else(|| panic!("seed {seed}: {now:?} is not a prefix state"));
        seen.insert(state);
        assert_eq!(names(&sim, "/q"), set(&["x"]), "seed {seed}");
    }
    assert_eq!(seen.len(), states.len(), "every prefix occurs: {seen:?}");
}

#[test]
fn an_undone_mkdir_takes_its_whole_subtree() {
    let (mut kept, mut gone) = (0, 0);
    for seed in 0..SEEDS / 2 {
        let sim = sim_with_dir(seed);
        sim.create_dir_all(Path::new("/d/sub")).unwrap();
        let file = sim
            .open(Path::new("/d/sub/f"), OpenMode::CreateNew)
            .unwrap();
        file.write_all_at(b"data", 0).unwrap();
        file.sync_data().unwrap();
        sim.sync_dir(Path::new("/d/sub")).unwrap();
        sim.crash_with(&CrashConfig::random().seed(seed));
        if sim.exists(Path::new("/d/sub")).unwrap() {
            assert_eq!(sim.snapshot().files[Path::new("/d/sub/f")], b"data");
            kept += 1;
        } else {
            assert!(!sim.exists(Path::new("/d/sub/f")).unwrap());
            gone += 1;
        }
    }
    assert!(kept > 0 && gone > 0, "kept {kept}, gone {gone}");
}

#[test]
fn a_rename_between_directories_is_durable_once_both_are_synced() {
    let mut outcomes = BTreeSet::new();
    for seed in 0..SEEDS {
        let sim = SimStorage::new(seed);
        for dir in ["/p", "/q"] {
            sim.create_dir_all(Path::new(dir)).unwrap();
        }
        sim.sync_dir(Path::new("/")).unwrap();
        let file = sim.open(Path::new("/p/x"), OpenMode::CreateNew).unwrap();
        file.write_all_at(b"x", 0).unwrap();
        file.sync_data().unwrap();
        sim.sync_dir(Path::new("/p")).unwrap();
        sim.rename(Path::new("/p/x"), Path::new("/q/x")).unwrap();
        let synced_both = seed % 2 == 0;
        if synced_both {
            sim.sync_dir(Path::new("/p")).unwrap();
            sim.sync_dir(Path::new("/q")).unwrap();
        }
        sim.crash_with(&CrashConfig::random().seed(seed));
        let where_now = (
            sim.exists(Path::new("/p/x")).unwrap(),
            sim.exists(Path::new("/q/x")).unwrap(),
        );
        if synced_both {
            assert_eq!(where_now, (false, true), "seed {seed}");
        } else {
            outcomes.insert(where_now);
        }
    }
    // The documented halves: before both syncs, a crash may show either, both or neither name.
    assert_eq!(outcomes.len(), 4, "{outcomes:?}");
}

/// A busy scenario: files in two directories, synced and not, renamed, removed, truncated.
fn busy(sim: &SimStorage) -> Vec<std::sync::Arc<dyn StorageFile>> {
    sim.create_dir_all(Path::new("/t/u")).unwrap();
    sim.sync_dir(Path::new("/")).unwrap();
    let mut handles = Vec::new();
    for (i, name) in ["/t/a", "/t/b", "/t/u/c", "/t/u/d"].iter().enumerate() {
        let file = sim.open(Path::new(name), OpenMode::CreateNew).unwrap();
        file.write_all_at(&vec![b'0' + i as u8; 700 * (i + 1)], 0)
            .unwrap();
        if i % 2 == 0 {
            file.sync_data().unwrap();
        }
        handles.push(file);
    }
    sim.sync_dir(Path::new("/t")).unwrap();
    handles[0].write_all_at(&[b'z'; 1300], 400).unwrap();
    handles[1].set_len(100).unwrap();
    handles[2].sync_all().unwrap();
    handles[2].write_all_at(b"tail", 2100).unwrap();
    sim.rename(Path::new("/t/a"), Path::new("/t/b")).unwrap();
    sim.remove(Path::new("/t/u/d")).unwrap();
    drop(sim.open(Path::new("/t/e"), OpenMode::CreateNew).unwrap());
    handles
}

#[test]
fn keep_and_lose_modes_give_the_live_and_durable_images() {
    let sim = SimStorage::new(11);
    let _handles = busy(&sim);
    let live = sim.snapshot();
    let durable = sim.durable_snapshot();
    assert_ne!(live, durable, "the scenario leaves unsynced state");
    let report = sim.crash_with(&CrashConfig::keep_unsynced());
    assert_eq!(sim.snapshot(), live);
    assert!(
        report.writes_kept > 0 && report.dir_ops_kept > 0,
        "{report:?}"
    );
    assert_eq!(
        (
            report.writes_lost,
            report.writes_torn,
            report.dir_ops_undone,
            report.lengths_reverted
        ),
        (0, 0, 0, 0)
    );
    assert_eq!(
        sim.durable_snapshot(),
        live,
        "after a crash, what is left is durable"
    );

    let sim = SimStorage::new(11);
    let _handles = busy(&sim);
    let durable = sim.durable_snapshot();
    let report = sim.crash_with(&CrashConfig::lose_unsynced());
    assert_eq!(sim.snapshot(), durable);
    assert!(
        report.writes_lost > 0 && report.dir_ops_undone > 0,
        "{report:?}"
    );
    assert_eq!((report.writes_kept, report.dir_ops_kept), (0, 0));
    assert_eq!(CrashConfig::lose_unsynced().mode(), CrashMode::LoseUnsynced);
}

fn busy_crash(seed: u64, crashes: usize) -> (SimSnapshot, Vec<u64>) {
    let sim = SimStorage::new(seed);
    let mut seeds = Vec::new();
    for round in 0..crashes {
        let _handles = busy(&sim);
        seeds.push(sim.crash().seed);
        // Make room for the next round, which recreates the same names.
        let moved = PathBuf::from(format!("/old{round}"));
        sim.rename(Path::new("/t"), &moved).unwrap();
    }
    (sim.snapshot(), seeds)
}

#[test]
fn the_same_seed_and_operations_give_the_same_image() {
    let mut images = BTreeSet::new();
    for seed in 0..10 {
        let (first, seeds) = busy_crash(seed, 3);
        let (second, seeds_again) = busy_crash(seed, 3);
        assert_eq!(first, second, "seed {seed}");
        assert_eq!(seeds, seeds_again);
        images.insert(format!("{first:?}"));
    }
    assert!(
        images.len() > 5,
        "seeds give different images: {}",
        images.len()
    );

    // A crash's reported seed reproduces its image on the same state.
    let sim = SimStorage::new(99);
    let _handles = busy(&sim);
    let report = sim.crash();
    let image = sim.snapshot();
    let again = SimStorage::new(12345);
    let _handles = busy(&again);
    again.crash_with(&CrashConfig::random().seed(report.seed));
    assert_eq!(again.snapshot(), image);
}

/// One step of a random workload in the directory `/w`, on the files `/w/f0` to `/w/f2`.
#[derive(Debug, Clone)]
enum Step {
    Create(usize),
    Write(usize, u64, usize),
    SetLen(usize, u64),
    Sync(usize),
    SyncDir,
    Rename(usize, usize),
    Remove(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..3usize).prop_map(Step::Create),
        (0..3usize, 0..2048u64, 1..1200usize).prop_map(|(f, o, l)| Step::Write(f, o, l)),
        (0..3usize, 0..3000u64).prop_map(|(f, l)| Step::SetLen(f, l)),
        (0..3usize).prop_map(Step::Sync),
        Just(Step::SyncDir),
        (0..3usize, 0..3usize).prop_map(|(a, b)| Step::Rename(a, b)),
        (0..3usize).prop_map(Step::Remove),
    ]
}

/// One file of a [`Workload`]: what its last sync made durable and the changes since.
#[derive(Debug, Default)]
struct ModelFile {
    synced: Vec<u8>,
    pending: Vec<Op>,
}

impl ModelFile {
    fn live(&self) -> Vec<u8> {
        let lengths = lengths_after(&self.synced, &self.pending);
        let all_kept: Vec<u64> = self
            .pending
            .iter()
            .filter_map(|op| match op {
                Op::Write(_, bytes) => Some(bytes.len() as u64),
                Op::SetLen(_) => None,
            })
            .collect();
        let persisted = self.pending.len();
        image(
            &self.synced,
            &self.pending,
            persisted,
            lengths[persisted],
            &all_kept,
        )
    }
}

/// The test's own account of what a workload did to `/w`, kept apart from the simulator: the
/// oracle the crash images are checked against.
#[derive(Debug, Default)]
struct Workload {
    /// Every file ever created, by creation order (its identity: an inode).
    files: Vec<ModelFile>,
    /// `/w`'s entries now: name to file.
    live: BTreeMap<String, usize>,
    /// `/w`'s entries as of its last `sync_dir`, then after each change since. The directory
    /// keeps a prefix of its changes across a crash, so it shows one of these states.
    states: Vec<BTreeMap<String, usize>>,
}

impl Workload {
    /// Whether `name` refers to one file, with no unsynced change, in every state a crash can
    /// show: only then must the crash keep it exactly. A durable name is not enough: renamed
    /// away and back, it is missing from the state between (as the regression test shows).
    fn survives_every_crash(&self, name: &str) -> Option<usize> {
        let file = *self.states.first()?.get(name)?;
        let everywhere = self.states.iter().all(|s| s.get(name) == Some(&file));
        (everywhere && self.files[file].pending.is_empty()).then_some(file)
    }

    /// The image of `/w` a crash keeping everything shows, as snapshot paths.
    fn live_files(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        self.live
            .iter()
            .map(|(name, &file)| (w(name), self.files[file].live()))
            .collect()
    }

    /// The image of `/w` a crash losing everything unsynced shows.
    fn durable_files(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        self.states[0]
            .iter()
            .map(|(name, &file)| (w(name), self.files[file].synced.clone()))
            .collect()
    }

    /// Whether `files` is a legal post-crash image of `/w`: the entries of one of its states,
    /// each file's bytes one of its legal images.
    fn is_legal_crash(&self, files: &BTreeMap<PathBuf, Vec<u8>>) -> bool {
        self.states.iter().any(|state| {
            state.len() == files.len()
                && state.iter().all(|(name, &file)| {
                    let model = &self.files[file];
                    files
                        .get(&w(name))
                        .is_some_and(|bytes| is_legal_image(&model.synced, &model.pending, bytes))
                })
        })
    }

    fn changed(&mut self) {
        self.states.push(self.live.clone());
    }
}

fn w(name: &str) -> PathBuf {
    Path::new("/w").join(name)
}

/// Runs `steps` on `sim` and on a [`Workload`], which it returns. A step on a missing file
/// fails, as it would for a workload generator; the simulator must agree on which steps fail.
fn run(sim: &SimStorage, steps: &[Step]) -> Workload {
    sim.create_dir_all(Path::new("/w")).unwrap();
    sim.sync_dir(Path::new("/")).unwrap();
    let mut model = Workload {
        states: vec![BTreeMap::new()],
        ..Workload::default()
    };
    let name = |i: usize| format!("f{i}");
    for (n, step) in steps.iter().enumerate() {
        let open = |i| sim.open(&w(&name(i)), OpenMode::ReadWrite);
        let result = match step {
            Step::Create(i) => sim.open(&w(&name(*i)), OpenMode::Create).map(drop),
            Step::Write(i, offset, len) => {
                open(*i).and_then(|f| f.write_all_at(&vec![n as u8 + 1; *len], *offset))
            }
            Step::SetLen(i, len) => open(*i).and_then(|f| f.set_len(*len)),
            Step::Sync(i) => open(*i).and_then(|f| f.sync_data()),
            Step::SyncDir => sim.sync_dir(Path::new("/w")),
            Step::Rename(a, b) => sim.rename(&w(&name(*a)), &w(&name(*b))),
            Step::Remove(i) => sim.remove(&w(&name(*i))),
        };
        let expected_ok = match step {
            Step::Create(i) => {
                if !model.live.contains_key(&name(*i)) {
                    model.files.push(ModelFile::default());
                    model.live.insert(name(*i), model.files.len() - 1);
                    model.changed();
                }
                Some(())
            }
            Step::Write(i, offset, len) => model.live.get(&name(*i)).map(|&file| {
                let bytes = vec![n as u8 + 1; *len];
                model.files[file].pending.push(Op::Write(*offset, bytes));
            }),
            Step::SetLen(i, len) => model.live.get(&name(*i)).map(|&file| {
                model.files[file].pending.push(Op::SetLen(*len));
            }),
            Step::Sync(i) => model.live.get(&name(*i)).map(|&file| {
                let file = &mut model.files[file];
                file.synced = file.live();
                file.pending.clear();
            }),
            Step::SyncDir => {
                model.states = vec![model.live.clone()];
                Some(())
            }
            Step::Rename(a, b) => model.live.get(&name(*a)).copied().map(|file| {
                // Renaming a name to itself does nothing (rename(2) on one file).
                if a != b {
                    model.live.remove(&name(*a));
                    model.live.insert(name(*b), file);
                    model.changed();
                }
            }),
            Step::Remove(i) => model.live.remove(&name(*i)).map(|_| model.changed()),
        }
        .is_some();
        assert_eq!(result.is_ok(), expected_ok, "step {n} {step:?}: {result:?}");
    }
    model
}

/// The property tests' configuration. A fixed case count and RNG seed make every run (in CI
/// above all) the same run; `PROPTEST_CASES` and `PROPTEST_RNG_SEED` choose a longer or a
/// different one for a soak. A failure is saved next to this file, in
/// `sim_crash.proptest-regressions` (committed), and replayed first by every later run.
fn config() -> ProptestConfig {
    let mut config = ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..ProptestConfig::default()
    };
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = 256;
    }
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        config.rng_seed = RngSeed::Fixed(0x5EED_C4A5);
    }
    config
}

/// How many random crashes each generated workload is put through.
const CRASHES_PER_WORKLOAD: u64 = 4;

proptest! {
    #![proptest_config(config())]

    #[test]
    fn random_workloads_crash_into_consistent_images(
        steps in prop::collection::vec(step(), 1..40),
        seed in any::<u64>(),
    ) {
        let root_and_w = BTreeSet::from([PathBuf::from("/"), PathBuf::from("/w")]);

        // Keep-all gives the live image, lose-all the durable one, as the model has them.
        let sim = SimStorage::new(seed);
        let model = run(&sim, &steps);
        let live = sim.snapshot();
        prop_assert_eq!(&live.files, &model.live_files());
        sim.crash_with(&CrashConfig::keep_unsynced());
        prop_assert_eq!(sim.snapshot(), live);

        let sim = SimStorage::new(seed);
        run(&sim, &steps);
        let durable = sim.durable_snapshot();
        prop_assert_eq!(&durable.files, &model.durable_files());
        sim.crash_with(&CrashConfig::lose_unsynced());
        prop_assert_eq!(sim.snapshot(), durable);

        // A random crash shows one of the directory's states with legal file images, and keeps
        // exactly every file that every such state holds under one name with nothing unsynced.
        for crash in 0..CRASHES_PER_WORKLOAD {
            let sim = SimStorage::new(seed.wrapping_add(crash));
            run(&sim, &steps);
            let report = sim.crash();
            let after = sim.snapshot();
            prop_assert_eq!(&after.dirs, &root_and_w);
            prop_assert!(
                model.is_legal_crash(&after.files),
                "crash seed {}: {:?} is no legal image of {:?}",
                report.seed,
                after.files.iter().map(|(p, b)| (p, b.len())).collect::<Vec<_>>(),
                model
            );
            for name in model.live.keys().chain(model.states[0].keys()) {
                if let Some(file) = model.survives_every_crash(name) {
                    prop_assert_eq!(
                        after.files.get(&w(name)),
                        Some(&model.files[file].synced),
                        "crash seed {}: {}", report.seed, name
                    );
                }
            }
        }
    }
}

/// The minimal failure proptest found (kept in `sim_crash.proptest-regressions`): a durable,
/// fully synced name renamed away and back, with no `sync_dir` after. The name is durable and
/// the file has nothing unsynced, yet a crash may keep only the first rename, as ext4 does when
/// a journal commit falls between the two: the file is then found under the other name. It is
/// never lost, and never under both names.
#[test]
fn a_durable_name_renamed_away_and_back_may_be_found_under_the_other_name() {
    let minimal = vec![
        Step::Create(2),
        Step::SyncDir,
        Step::Rename(2, 0),
        Step::Rename(0, 2),
    ];
    let mut with_data = vec![Step::Create(2), Step::Write(2, 100, 900), Step::Sync(2)];
    with_data.extend_from_slice(&minimal[1..]);
    for steps in [minimal, with_data] {
        let mut outcomes = BTreeSet::new();
        // The seed proptest reported first, then enough others to see both outcomes.
        for seed in [2930179582391495421].into_iter().chain(0..50) {
            let sim = SimStorage::new(seed);
            let model = run(&sim, &steps);
            let state = sim.file_state(&w("f2")).unwrap();
            assert!(state.name_durable && state.unsynced_ops == 0, "{state:?}");
            assert_eq!(model.survives_every_crash("f2"), None);
            let synced = state.synced;

            sim.crash();
            let files = sim.snapshot().files;
            assert!(model.is_legal_crash(&files), "seed {seed}: {files:?}");
            let names: Vec<PathBuf> = files.keys().cloned().collect();
            assert!(
                names == [w("f0")] || names == [w("f2")],
                "seed {seed}: {names:?}"
            );
            assert_eq!(files.values().next(), Some(&synced), "seed {seed}");
            outcomes.insert(names);
        }
        assert_eq!(outcomes.len(), 2, "both names occur: {outcomes:?}");
    }
}
