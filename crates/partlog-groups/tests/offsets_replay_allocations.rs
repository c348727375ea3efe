//! Issue 34's open row (`OffsetStore::open` within 1.5x of a `Log::records` pass): counted,
//! not timed. Replaying a commit record of a key the store already holds allocates nothing,
//! and decoding a key allocates its two names and nothing else (no error text built on the
//! way).
//!
//! The counting allocator counts only the allocations of the thread that asked for them, so
//! the log's own threads do not disturb the counts. One test per file: the allocator is the
//! process's.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;

use partlog::unstable::ManualClock;
use partlog::{Log, LogConfig, NewRecord};
use partlog_groups::offsets::log::offsets_log_config;
use partlog_groups::offsets::records::{OffsetCommitValue, OffsetsKey};
use partlog_groups::offsets::store::{OffsetStore, OffsetStoreConfig};

struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: every call goes to `System` unchanged; the counters are const-initialized
// thread-locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCATIONS.with(|n| n.set(n.get() + 1));
        }
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCATIONS.with(|n| n.set(n.get() + 1));
        }
        // SAFETY: `ptr` came from `System` with `layout`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The allocations this thread makes in `run`.
fn allocations<R>(run: impl FnOnce() -> R) -> (R, usize) {
    ALLOCATIONS.with(|n| n.set(0));
    COUNTING.with(|c| c.set(true));
    let result = run();
    COUNTING.with(|c| c.set(false));
    (result, ALLOCATIONS.with(Cell::get))
}

const T0: i64 = 1_700_000_000_000;
/// Keys the commits cycle through: 4 groups of 5 partitions.
const KEYS: usize = 20;

fn key(i: usize) -> Vec<u8> {
    OffsetsKey::OffsetCommit {
        group: format!("group-{}", i % KEYS / 5),
        topic: "orders".into(),
        partition: (i % 5) as i32,
    }
    .encode()
    .unwrap()
}

/// The allocations of opening a store on a partition of `commits` commit records.
fn open_allocations(commits: usize) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let config = || offsets_log_config(LogConfig::builder()).unwrap();
    let log = Log::open(dir.path(), config()).unwrap();
    for chunk in (0..commits).collect::<Vec<_>>().chunks(50) {
        let keys: Vec<Vec<u8>> = chunk.iter().map(|&i| key(i)).collect();
        let values: Vec<Vec<u8>> = chunk
            .iter()
            .map(|&i| OffsetCommitValue::new(i as i64, "", T0).encode().unwrap())
            .collect();
        let records: Vec<NewRecord> = keys
            .iter()
            .zip(&values)
            .map(|(k, v)| NewRecord::new(T0, Some(k), Some(v)))
            .collect();
        log.append(&records).unwrap();
    }
    log.close().unwrap();
    drop(log);
    let log = Log::open(dir.path(), config()).unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let (store, counted) =
        allocations(|| OffsetStore::open(log, OffsetStoreConfig::default(), clock));
    let store = store.unwrap();
    assert_eq!(store.group_ids().len(), KEYS / 5);
    counted
}

#[test]
fn replaying_known_keys_and_decoding_keys_allocate_nothing_extra() {
    // Decoding a key: its group and its topic, nothing else.
    let bytes = key(7);
    let (decoded, counted) = allocations(|| OffsetsKey::decode(&bytes));
    assert!(decoded.is_ok());
    assert_eq!(counted, 2, "a key's decode allocates its two names only");

    // Twice the records of known keys, within one read of the log: no more allocations.
    let few = open_allocations(1_000);
    let many = open_allocations(2_000);
    assert!(
        many < few + 100,
        "1,000 more commit records of known keys cost {} allocations ({few} for 1,000, {many} for 2,000)",
        many.saturating_sub(few)
    );
}
