//! In-memory indexes (`OffsetIndex::in_memory`, `TimeIndex::in_memory`): they answer every call
//! exactly as a file-backed active index does, and they never touch the file system.
//!
//! The model is the file-backed index itself: both receive the same random sequence of calls,
//! and every answer (values and errors, messages included) and every observable property must
//! match after each call. The file-backed index takes every path: mirror, mapping, positional
//! reads after sealing, and replace-by-rename truncation of a sealed or once-mapped file.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use partlog::unstable::{OffsetIndex, OsStorage, Storage, TimeIndex};
use proptest::prelude::*;

const BASE: i64 = 1000;
/// Six offset entries, or six time slots (five for ordinary appends): small enough that random
/// sequences fill the indexes and hit the full checks.
const OFFSET_INDEX_BYTES: u32 = 6 * 8 + 3;
const TIME_INDEX_BYTES: u32 = 6 * 12 + 5;

fn os() -> Arc<dyn Storage> {
    Arc::new(OsStorage::new())
}

/// The two paths an index moves between with `rename_to`.
fn paths(dir: &Path, suffix: &str) -> [PathBuf; 2] {
    let name = format!("00000000000000001000.{suffix}");
    [dir.join(&name), dir.join(format!("{name}.deleted"))]
}

/// Asserts that `a` and `b` render identically, naming the step.
fn same<T: std::fmt::Debug>(step: usize, what: &str, a: T, b: T) {
    assert_eq!(format!("{a:?}"), format!("{b:?}"), "step {step}: {what}");
}

#[derive(Debug, Clone)]
enum OffsetOp {
    /// Appends at the last entry's offset and position plus these deltas (negative ones and
    /// zeros are rejected, identically by both).
    Append(i64, i64),
    Lookup(i64),
    UpperBound(u64),
    Entry(usize),
    TruncateTo(i64),
    TruncateToEntries(usize),
    Reset,
    QuickCheck(u64),
    FullCheck(u64),
    Sync,
    Seal,
    MakeWritable,
    ReleaseMapping,
    SetMappingAllowed(bool),
    Rename(usize),
}

fn offset_op() -> impl Strategy<Value = OffsetOp> {
    prop_oneof![
        10 => (-1i64..5, -1i64..60).prop_map(|(o, p)| OffsetOp::Append(o, p)),
        3 => (BASE - 2..BASE + 30).prop_map(OffsetOp::Lookup),
        2 => (0u64..400).prop_map(OffsetOp::UpperBound),
        2 => (0usize..8).prop_map(OffsetOp::Entry),
        2 => (BASE - 2..BASE + 30).prop_map(OffsetOp::TruncateTo),
        1 => (0usize..8).prop_map(OffsetOp::TruncateToEntries),
        1 => Just(OffsetOp::Reset),
        2 => (0u64..400).prop_map(OffsetOp::QuickCheck),
        2 => (0u64..400).prop_map(OffsetOp::FullCheck),
        1 => Just(OffsetOp::Sync),
        2 => Just(OffsetOp::Seal),
        2 => Just(OffsetOp::MakeWritable),
        1 => Just(OffsetOp::ReleaseMapping),
        1 => any::<bool>().prop_map(OffsetOp::SetMappingAllowed),
        1 => (0usize..2).prop_map(OffsetOp::Rename),
    ]
}

/// Applies `op` to `index` and renders the answer; `None` for calls that answer nothing.
fn apply_offset(index: &OffsetIndex, op: &OffsetOp, paths: &[PathBuf; 2]) -> Option<String> {
    let answer = match op {
        OffsetOp::Append(offset_delta, position_delta) => {
            let last = index.last_entry().unwrap();
            let position = i64::from(last.position) + position_delta;
            let position = u32::try_from(position).unwrap_or(u32::MAX);
            format!("{:?}", index.append(last.offset + offset_delta, position))
        }
        OffsetOp::Lookup(offset) => format!("{:?}", index.lookup(*offset)),
        OffsetOp::UpperBound(position) => {
            format!("{:?}", index.upper_bound_by_position(*position))
        }
        OffsetOp::Entry(n) => format!("{:?}", index.entry(*n)),
        OffsetOp::TruncateTo(offset) => format!("{:?}", index.truncate_to(*offset)),
        OffsetOp::TruncateToEntries(n) => format!("{:?}", index.truncate_to_entries(*n)),
        OffsetOp::Reset => format!("{:?}", index.reset()),
        OffsetOp::QuickCheck(log_size) => format!("{:?}", index.quick_check(*log_size)),
        OffsetOp::FullCheck(log_size) => format!("{:?}", index.full_check(*log_size)),
        OffsetOp::Sync => format!("{:?}", index.sync()),
        OffsetOp::Seal => format!("{:?}", index.seal()),
        OffsetOp::MakeWritable => format!("{:?}", index.make_writable()),
        OffsetOp::ReleaseMapping => {
            index.release_mapping();
            return None;
        }
        OffsetOp::SetMappingAllowed(allowed) => {
            index.set_mapping_allowed(*allowed);
            return None;
        }
        OffsetOp::Rename(to) => format!("{:?}", index.rename_to(&paths[*to])),
    };
    Some(answer)
}

/// Everything observable about an offset index, entries included.
fn offset_state(index: &OffsetIndex) -> String {
    let entries: Vec<_> = (0..index.entries()).map(|n| index.entry(n)).collect();
    format!(
        "entries {:?} full {} sealed {} last {:?} size {} path {:?} max {} base {} all {entries:?}",
        index.entries(),
        index.is_full(),
        index.is_sealed(),
        index.last_entry(),
        index.size_bytes(),
        index.path(),
        index.max_entries(),
        index.base_offset(),
    )
}

#[derive(Debug, Clone)]
enum TimeOp {
    /// Appends at the last entry's timestamp and offset plus these deltas, with or without the
    /// full check.
    MaybeAppend(i64, i64, bool),
    Lookup(i64),
    Entry(usize),
    TruncateTo(i64),
    TruncateToEntries(usize),
    Reset,
    QuickCheck,
    FullCheck,
    Sync,
    Seal,
    MakeWritable,
    ReleaseMapping,
    SetMappingAllowed(bool),
    Rename(usize),
}

fn time_op() -> impl Strategy<Value = TimeOp> {
    prop_oneof![
        10 => (-1i64..6, -1i64..4, prop::bool::weighted(0.3))
            .prop_map(|(t, o, skip)| TimeOp::MaybeAppend(t, o, skip)),
        3 => (-3i64..40).prop_map(TimeOp::Lookup),
        2 => (0usize..8).prop_map(TimeOp::Entry),
        2 => (BASE - 2..BASE + 20).prop_map(TimeOp::TruncateTo),
        1 => (0usize..8).prop_map(TimeOp::TruncateToEntries),
        1 => Just(TimeOp::Reset),
        2 => Just(TimeOp::QuickCheck),
        2 => Just(TimeOp::FullCheck),
        1 => Just(TimeOp::Sync),
        2 => Just(TimeOp::Seal),
        2 => Just(TimeOp::MakeWritable),
        1 => Just(TimeOp::ReleaseMapping),
        1 => any::<bool>().prop_map(TimeOp::SetMappingAllowed),
        1 => (0usize..2).prop_map(TimeOp::Rename),
    ]
}

fn apply_time(index: &TimeIndex, op: &TimeOp, paths: &[PathBuf; 2]) -> Option<String> {
    let answer = match op {
        TimeOp::MaybeAppend(timestamp_delta, offset_delta, skip_full_check) => {
            let last = index.last_entry().unwrap();
            format!(
                "{:?}",
                index.maybe_append(
                    last.timestamp + timestamp_delta,
                    last.offset + offset_delta,
                    *skip_full_check,
                )
            )
        }
        TimeOp::Lookup(timestamp) => format!("{:?}", index.lookup(*timestamp)),
        TimeOp::Entry(n) => format!("{:?}", index.entry(*n)),
        TimeOp::TruncateTo(offset) => format!("{:?}", index.truncate_to(*offset)),
        TimeOp::TruncateToEntries(n) => format!("{:?}", index.truncate_to_entries(*n)),
        TimeOp::Reset => format!("{:?}", index.reset()),
        TimeOp::QuickCheck => format!("{:?}", index.quick_check()),
        TimeOp::FullCheck => format!("{:?}", index.full_check()),
        TimeOp::Sync => format!("{:?}", index.sync()),
        TimeOp::Seal => format!("{:?}", index.seal()),
        TimeOp::MakeWritable => format!("{:?}", index.make_writable()),
        TimeOp::ReleaseMapping => {
            index.release_mapping();
            return None;
        }
        TimeOp::SetMappingAllowed(allowed) => {
            index.set_mapping_allowed(*allowed);
            return None;
        }
        TimeOp::Rename(to) => format!("{:?}", index.rename_to(&paths[*to])),
    };
    Some(answer)
}

fn time_state(index: &TimeIndex) -> String {
    let entries: Vec<_> = (0..index.entries()).map(|n| index.entry(n)).collect();
    format!(
        "entries {:?} full {} sealed {} last {:?} size {} path {:?} max {} base {} all {entries:?}",
        index.entries(),
        index.is_full(),
        index.is_sealed(),
        index.last_entry(),
        index.size_bytes(),
        index.path(),
        index.max_entries(),
        index.base_offset(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn an_in_memory_offset_index_answers_as_a_file_backed_one(
        ops in prop::collection::vec(offset_op(), 1..80),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let paths = paths(dir.path(), "index");
        let on_file = OffsetIndex::create(&os(), &paths[0], BASE, OFFSET_INDEX_BYTES).unwrap();
        let in_memory = OffsetIndex::in_memory(&paths[0], BASE, OFFSET_INDEX_BYTES).unwrap();
        prop_assert!(in_memory.is_in_memory());
        prop_assert!(!on_file.is_in_memory());
        for (step, op) in ops.iter().enumerate() {
            let expected = apply_offset(&on_file, op, &paths);
            let got = apply_offset(&in_memory, op, &paths);
            same(step, &format!("answer to {op:?}"), expected, got);
            same(step, &format!("state after {op:?}"), offset_state(&on_file), offset_state(&in_memory));
        }
        // The file-backed index's file holds what both report, once its pending entries are
        // written (a sync).
        on_file.sync().unwrap();
        prop_assert_eq!(
            std::fs::metadata(on_file.path()).unwrap().len(),
            in_memory.size_bytes()
        );
        prop_assert!(in_memory.is_in_memory());
    }

    #[test]
    fn an_in_memory_time_index_answers_as_a_file_backed_one(
        ops in prop::collection::vec(time_op(), 1..80),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let paths = paths(dir.path(), "timeindex");
        let on_file = TimeIndex::create(&os(), &paths[0], BASE, TIME_INDEX_BYTES).unwrap();
        let in_memory = TimeIndex::in_memory(&paths[0], BASE, TIME_INDEX_BYTES).unwrap();
        prop_assert!(in_memory.is_in_memory());
        prop_assert!(!on_file.is_in_memory());
        for (step, op) in ops.iter().enumerate() {
            let expected = apply_time(&on_file, op, &paths);
            let got = apply_time(&in_memory, op, &paths);
            same(step, &format!("answer to {op:?}"), expected, got);
            same(step, &format!("state after {op:?}"), time_state(&on_file), time_state(&in_memory));
        }
        on_file.sync().unwrap();
        prop_assert_eq!(
            std::fs::metadata(on_file.path()).unwrap().len(),
            in_memory.size_bytes()
        );
    }
}

/// The names in `dir`.
fn listing(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// Every operation of an in-memory index succeeds with its path in a directory that does not
/// exist, so any file operation would fail; and nothing appears in the parent directory. The
/// constructor takes no `Storage`, so there is no other way for it to reach one.
#[test]
fn in_memory_indexes_touch_no_file_even_where_every_file_operation_would_fail() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let [path, renamed] = paths(&missing, "index");

    let offsets = OffsetIndex::in_memory(&path, BASE, 1024).unwrap();
    for n in 0..10u32 {
        offsets.append(BASE + i64::from(n) * 3, n * 100).unwrap();
    }
    offsets.sync().unwrap();
    offsets.quick_check(1000).unwrap();
    offsets.full_check(1000).unwrap();
    offsets.seal().unwrap();
    assert!(offsets.is_sealed());
    assert!(offsets.append(BASE + 100, 5000).is_err());
    // A sealed file-backed index truncates by writing a new file; this one writes none.
    offsets.truncate_to(BASE + 15).unwrap();
    assert_eq!(offsets.entries(), 5);
    assert_eq!(offsets.lookup(BASE + 13).unwrap().position, 400);
    assert_eq!(offsets.entry(4).unwrap().offset, BASE + 12);
    offsets.release_mapping();
    offsets.set_mapping_allowed(false);
    offsets.make_writable().unwrap();
    assert!(!offsets.is_sealed());
    offsets.append(BASE + 20, 2000).unwrap();
    offsets.rename_to(&renamed).unwrap();
    assert_eq!(offsets.path(), renamed);
    offsets.truncate_to_entries(2).unwrap();
    assert_eq!(offsets.size_bytes(), 16);
    offsets.reset().unwrap();
    assert_eq!(offsets.entries(), 0);
    offsets.quick_check(0).unwrap();

    let [path, renamed] = paths(&missing, "timeindex");
    let times = TimeIndex::in_memory(&path, BASE, 1200).unwrap();
    for n in 0..10i64 {
        assert!(times.maybe_append(100 + n * 10, BASE + n, false).unwrap());
    }
    assert!(!times.maybe_append(100, BASE + 10, false).unwrap());
    times.sync().unwrap();
    times.quick_check().unwrap();
    times.full_check().unwrap();
    times.seal().unwrap();
    times.truncate_to(BASE + 5).unwrap();
    assert_eq!(times.entries(), 5);
    assert_eq!(times.lookup(145).unwrap().offset, BASE + 4);
    times.make_writable().unwrap();
    assert!(times.maybe_append(500, BASE + 9, true).unwrap());
    times.rename_to(&renamed).unwrap();
    assert_eq!(times.path(), renamed);
    assert_eq!(times.size_bytes(), 6 * 12);
    times.reset().unwrap();

    assert!(!missing.exists());
    assert!(listing(dir.path()).is_empty(), "{:?}", listing(dir.path()));
}

/// An in-memory index refuses what a file-backed one refuses at construction, and its errors
/// name the path it was given.
#[test]
fn in_memory_indexes_validate_the_base_offset_and_name_their_path_in_errors() {
    let path = Path::new("/nowhere/00000000000000001000.index");
    assert!(OffsetIndex::in_memory(path, -1, 1024).is_err());
    assert!(TimeIndex::in_memory(path, i64::MAX, 1024).is_err());

    let index = OffsetIndex::in_memory(path, BASE, 1024).unwrap();
    index.seal().unwrap();
    let error = index.append(BASE, 0).unwrap_err().to_string();
    assert!(
        error.contains("/nowhere/00000000000000001000.index"),
        "{error}"
    );
}
