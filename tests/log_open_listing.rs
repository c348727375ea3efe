//! An open after a clean shutdown lists the partition directory a fixed number of times,
//! however many segments the log has (ARCHITECTURE.md §3: open trusts a clean shutdown and
//! reads no sealed segment, so its cost should be one directory listing plus one lazy handle
//! per segment).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use partlog::unstable::{FileLock, LockMode, Metadata, OpenMode, OsStorage, Storage, StorageFile};
use partlog::{Log, LogConfig, NewRecord};

/// The real file system, counting the directory listings it serves.
#[derive(Debug, Default)]
struct ListCountingStorage {
    inner: OsStorage,
    lists: AtomicUsize,
}

impl Storage for ListCountingStorage {
    fn open(&self, path: &Path, mode: OpenMode) -> partlog::Result<Arc<dyn StorageFile>> {
        self.inner.open(path, mode)
    }
    fn create_dir_all(&self, path: &Path) -> partlog::Result<()> {
        self.inner.create_dir_all(path)
    }
    fn sync_dir(&self, dir: &Path) -> partlog::Result<()> {
        self.inner.sync_dir(dir)
    }
    fn rename(&self, from: &Path, to: &Path) -> partlog::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> partlog::Result<()> {
        self.inner.remove(path)
    }
    fn list(&self, dir: &Path) -> partlog::Result<Vec<String>> {
        self.lists.fetch_add(1, Ordering::SeqCst);
        self.inner.list(dir)
    }
    fn metadata(&self, path: &Path) -> partlog::Result<Metadata> {
        self.inner.metadata(path)
    }
    fn lock(&self, path: &Path, mode: LockMode) -> partlog::Result<FileLock> {
        self.inner.lock(path, mode)
    }
}

fn config(storage: Arc<dyn Storage>) -> LogConfig {
    LogConfig::builder_for_tests()
        .segment_bytes(1024)
        .segment_index_bytes(1024)
        .storage(storage)
        .build()
        .unwrap()
}

/// Writes a log of `segments` segments, closes it cleanly, lets `litter` add files to its
/// directory, and counts the listings of a reopen; returns them with the directory.
fn listings_of_a_clean_reopen(
    segments: usize,
    litter: impl FnOnce(&Path),
) -> (usize, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(ListCountingStorage::default());
    let log = Log::open(dir.path(), config(storage.clone())).unwrap();
    let mut i = 0i64;
    while log.stats().segments < segments {
        let value = format!("value {i} {}", "x".repeat(200));
        log.append(&[NewRecord::new(
            i,
            Some(b"k".as_slice()),
            Some(value.as_bytes()),
        )])
        .unwrap();
        i += 1;
    }
    let end = log.log_end_offset();
    log.close().unwrap();
    drop(log);
    litter(dir.path());
    storage.lists.store(0, Ordering::SeqCst);
    let reopened = Log::open(dir.path(), config(storage.clone())).unwrap();
    let lists = storage.lists.load(Ordering::SeqCst);
    assert!(
        reopened.recovery_report().clean_shutdown,
        "the reopen should find a clean shutdown"
    );
    assert_eq!(reopened.log_end_offset(), end);
    reopened.close().unwrap();
    (lists, dir)
}

#[test]
fn a_clean_reopen_lists_its_directory_a_fixed_number_of_times_whatever_the_segment_count() {
    let (few, _dir) = listings_of_a_clean_reopen(3, |_| {});
    let (many, _dir) = listings_of_a_clean_reopen(40, |_| {});
    assert_eq!(few, many, "listings grow with the segment count");
    assert_eq!(few, 1, "a clean reopen lists its directory more than once");
}

/// The single listing still finds what a crash or an interrupted deletion left beside a
/// cleanly closed log: a `.deleted` segment file, an index without its `.log`, a temporary
/// producer snapshot and a snapshot above the log end all go at the reopen.
#[test]
fn a_clean_reopen_with_one_listing_still_removes_leftover_files() {
    let leftovers = [
        "00000000000000000000.log.deleted",
        "00000000000000999999.index",
        "00000000000000000001.snapshot.tmp",
        "00000000000000999999.snapshot",
    ];
    let (lists, dir) = listings_of_a_clean_reopen(5, |dir| {
        for name in leftovers {
            std::fs::write(dir.join(name), b"left over").unwrap();
        }
    });
    assert_eq!(
        lists, 1,
        "a clean reopen lists its directory more than once"
    );
    assert!(dir.path().join("00000000000000000000.log").exists());
    for name in leftovers {
        assert!(
            !dir.path().join(name).exists(),
            "{name} survived the reopen"
        );
    }
}
