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

/// Every case of `Suite::test_store` builds one store, except `transfer_snapshot`, which builds
/// two (a leader's and a follower's): 35 cases, 36 builds.
const SUITE_CASES: usize = 35;
const SUITE_BUILDS: usize = SUITE_CASES + 1;

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

/// What keeps a built store's directory alive until the case ends.
type Guard = Option<tempfile::TempDir>;

/// Makes the storage and the directory of one store.
type MakeStorage = fn() -> (Arc<dyn Storage>, Guard, PathBuf);

/// Builds each store in a directory of its own, and counts the builds.
struct Builder {
    make_storage: MakeStorage,
    builds: Arc<AtomicUsize>,
}

impl StoreBuilder<KvConfig, PartlogLogStore<KvConfig>, KvStateMachine, Guard> for Builder {
    async fn build(
        &self,
    ) -> Result<(Guard, PartlogLogStore<KvConfig>, KvStateMachine), StorageError<u64>> {
        self.builds.fetch_add(1, Ordering::SeqCst);
        let (storage, guard, dir) = (self.make_storage)();
        let store = PartlogLogStore::open(&dir, config(storage)).expect("the store opens");
        Ok((guard, store, KvStateMachine::new()))
    }
}

/// Runs `Suite::test_all` and returns how many stores it built.
fn run_counted(name: &str, make_storage: MakeStorage) -> usize {
    let builds = Arc::new(AtomicUsize::new(0));
    let builder = Builder {
        make_storage,
        builds: Arc::clone(&builds),
    };
    Suite::test_all(builder).unwrap_or_else(|e| panic!("openraft's suite failed on {name}: {e}"));
    let builds = builds.load(Ordering::SeqCst);
    println!("openraft 0.9.25 suite on {name}: {SUITE_CASES} passed ({builds} stores built)");
    builds
}

#[test]
fn openraft_suite_passes_every_case_on_os_storage() {
    let builds = run_counted("OsStorage", || {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("raft");
        (Arc::new(OsStorage::new()), Some(dir), path)
    });
    assert_eq!(builds, SUITE_BUILDS);
}

#[test]
fn openraft_suite_passes_every_case_on_sim_storage() {
    let builds = run_counted("SimStorage", || {
        let sim = partlog::unstable::SimStorage::new(16);
        (Arc::new(sim), None, PathBuf::from("/raft"))
    });
    assert_eq!(builds, SUITE_BUILDS);
}
