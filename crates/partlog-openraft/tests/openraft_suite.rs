//! openraft 0.9.25's own storage conformance suite (`openraft::testing::Suite::test_all`) on
//! `PartlogLogStore`, once on the real file system and once on partlog's crash simulator.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use openraft::StorageError;
use openraft::testing::{StoreBuilder, Suite};
use partlog::LogConfig;
use partlog::unstable::{OsStorage, Storage};
use partlog_openraft::PartlogLogStore;
use partlog_openraft::testing::{KvConfig, KvStateMachine};

/// The cases of openraft 0.9.25's `Suite::test_store`, counted in its source: every case builds
/// one store, except `transfer_snapshot`, which builds two (a leader's and a follower's) that
/// live at once.
const SUITE_CASES: usize = 35;

/// Small segments, so that the suite's few entries span several segments and purges delete
/// whole files.
fn config(storage: Arc<dyn Storage>) -> LogConfig {
    LogConfig::builder_for_tests()
        .storage(storage)
        .segment_bytes(1024)
        .max_message_bytes(900)
        .build()
        .expect("a valid test config")
}

/// What the suite counts as it runs: stores built, and cases (a build while no other store of
/// the suite is alive starts a case; a case's stores live until it ends).
#[derive(Debug, Default)]
struct Counts {
    builds: AtomicUsize,
    cases: AtomicUsize,
    alive: AtomicUsize,
}

/// Keeps a built store's directory alive until its case ends, and marks the end.
struct Guard {
    _dir: Option<tempfile::TempDir>,
    counts: Arc<Counts>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.counts.alive.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Makes the storage and the directory of one store.
type MakeStorage = fn() -> (Arc<dyn Storage>, Option<tempfile::TempDir>, PathBuf);

/// Builds each store in a directory of its own, and counts.
struct Builder {
    make_storage: MakeStorage,
    counts: Arc<Counts>,
}

impl StoreBuilder<KvConfig, PartlogLogStore<KvConfig>, KvStateMachine, Guard> for Builder {
    async fn build(
        &self,
    ) -> Result<(Guard, PartlogLogStore<KvConfig>, KvStateMachine), StorageError<u64>> {
        self.counts.builds.fetch_add(1, Ordering::SeqCst);
        if self.counts.alive.fetch_add(1, Ordering::SeqCst) == 0 {
            self.counts.cases.fetch_add(1, Ordering::SeqCst);
        }
        let (storage, dir, path) = (self.make_storage)();
        let guard = Guard {
            _dir: dir,
            counts: Arc::clone(&self.counts),
        };
        let store = PartlogLogStore::open(&path, config(storage)).expect("the store opens");
        Ok((guard, store, KvStateMachine::new()))
    }
}

/// Runs `Suite::test_all`, prints how many cases ran, and returns that count. The suite stops
/// at its first failing case, so every case it started passed when it returns.
fn run_counted(name: &str, make_storage: MakeStorage) -> usize {
    let counts = Arc::new(Counts::default());
    let builder = Builder {
        make_storage,
        counts: Arc::clone(&counts),
    };
    Suite::test_all(builder).unwrap_or_else(|e| panic!("openraft's suite failed on {name}: {e}"));
    let cases = counts.cases.load(Ordering::SeqCst);
    let builds = counts.builds.load(Ordering::SeqCst);
    println!(
        "openraft 0.9.25 suite on {name}: {cases} cases ran and passed ({builds} stores built)"
    );
    assert_eq!(
        counts.alive.load(Ordering::SeqCst),
        0,
        "a store outlived the suite"
    );
    cases
}

#[test]
fn openraft_suite_passes_every_case_on_os_storage() {
    let cases = run_counted("OsStorage", || {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("raft");
        (Arc::new(OsStorage::new()), Some(dir), path)
    });
    assert_eq!(
        cases, SUITE_CASES,
        "openraft 0.9.25's test_store has {SUITE_CASES} cases"
    );
}

#[test]
fn openraft_suite_passes_every_case_on_sim_storage() {
    let cases = run_counted("SimStorage", || {
        let sim = partlog::unstable::SimStorage::new(16);
        (Arc::new(sim), None, PathBuf::from("/raft"))
    });
    assert_eq!(
        cases, SUITE_CASES,
        "openraft 0.9.25's test_store has {SUITE_CASES} cases"
    );
}
