//! An unclean open reads its tail from the `.log` once: recovery's scan validates every byte
//! above the recovery point, and the leader-epoch cache's load takes the epochs of those
//! batches from the scan rather than walking their headers again (ARCHITECTURE.md §11).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use partlog::unstable::{
    Advice, FileLock, LockMode, Metadata, OpenMode, OsStorage, Storage, StorageFile,
};
use partlog::{BatchBuilder, Compression, Log, LogConfig, NewRecord};

/// The real file system, summing the bytes read from `.log` files. It maps nothing, so every
/// read goes through `read_at` and is counted.
#[derive(Debug, Default)]
struct LogReadCountingStorage {
    inner: OsStorage,
    log_bytes_read: Arc<AtomicU64>,
}

/// A file that adds what `read_at` returns to a shared count.
#[derive(Debug)]
struct CountedFile {
    inner: Arc<dyn StorageFile>,
    bytes_read: Arc<AtomicU64>,
}

impl StorageFile for CountedFile {
    fn path(&self) -> &Path {
        self.inner.path()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> partlog::Result<usize> {
        let read = self.inner.read_at(buf, offset)?;
        self.bytes_read.fetch_add(read as u64, Ordering::SeqCst);
        Ok(read)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> partlog::Result<()> {
        self.inner.write_all_at(buf, offset)
    }
    fn len(&self) -> partlog::Result<u64> {
        self.inner.len()
    }
    fn set_len(&self, len: u64) -> partlog::Result<()> {
        self.inner.set_len(len)
    }
    fn sync_data(&self) -> partlog::Result<()> {
        self.inner.sync_data()
    }
    fn sync_all(&self) -> partlog::Result<()> {
        self.inner.sync_all()
    }
    fn advise(&self, offset: u64, len: u64, advice: Advice) -> partlog::Result<()> {
        self.inner.advise(offset, len, advice)
    }
}

impl Storage for LogReadCountingStorage {
    fn open(&self, path: &Path, mode: OpenMode) -> partlog::Result<Arc<dyn StorageFile>> {
        let file = self.inner.open(path, mode)?;
        if path.extension().is_some_and(|extension| extension == "log") {
            return Ok(Arc::new(CountedFile {
                inner: file,
                bytes_read: Arc::clone(&self.log_bytes_read),
            }));
        }
        Ok(file)
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
        .segment_bytes(1 << 30)
        .storage(storage)
        .build()
        .unwrap()
}

/// Copies the files of a live log, as a process that died now would leave them.
fn copy_log(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() == "partlog.lock" {
            continue;
        }
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// 16 MiB of unsynced batches of about 100 KiB (the size at which the epoch load's 128 KiB
/// header windows used to read every byte again), under three leader epochs; the crashed copy
/// loses its `leader-epoch-checkpoint`, so the open assigns the epochs recovery scanned.
#[test]
fn an_unclean_open_reads_the_tail_of_the_log_once_and_recovers_its_epochs() {
    let root = tempfile::tempdir().unwrap();
    let (live, crashed) = (root.path().join("live"), root.path().join("crashed"));
    let log = Log::open(&live, config(Arc::new(OsStorage::new()))).unwrap();
    let mut builder = BatchBuilder::new(Compression::None);
    for i in 0..100 {
        builder.push(&NewRecord::new(
            1_700_000_000_000 + i,
            None,
            Some(&[b'v'; 1000]),
        ));
    }
    let batch = builder.build().unwrap();
    let tail_bytes = 16u64 << 20;
    for epoch in [3, 5, 8] {
        log.become_leader(epoch).unwrap();
        while log.stats().appended_bytes < tail_bytes * (epoch as u64) / 8 {
            log.append_batch(&batch).unwrap();
        }
    }
    let epochs_before = log.leader_epoch_entries();
    let end = log.log_end_offset();
    assert_eq!(epochs_before.len(), 3, "{epochs_before:?}");
    copy_log(&live, &crashed);
    log.close().unwrap();
    drop(log);
    std::fs::remove_file(crashed.join("leader-epoch-checkpoint")).unwrap();
    let log_file_bytes: u64 = std::fs::read_dir(&crashed)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "log"))
        .map(|path| std::fs::metadata(path).unwrap().len())
        .sum();
    assert!(log_file_bytes >= tail_bytes, "{log_file_bytes}");

    let storage = Arc::new(LogReadCountingStorage::default());
    let reopened = Log::open(&crashed, config(storage.clone())).unwrap();
    let read = storage.log_bytes_read.load(Ordering::SeqCst);
    let report = reopened.recovery_report();
    assert!(!report.clean_shutdown, "the copy should look crashed");
    assert_eq!(reopened.log_end_offset(), end);
    assert!(
        report.bytes_scanned >= log_file_bytes * 9 / 10,
        "recovery scanned {} of {log_file_bytes} bytes: the test needs a large tail",
        report.bytes_scanned
    );
    assert!(
        read >= report.bytes_scanned,
        "counted {read} bytes read, fewer than the {} scanned: the count misses reads",
        report.bytes_scanned
    );
    assert!(
        read <= log_file_bytes + log_file_bytes / 10,
        "the open read {read} bytes of a {log_file_bytes}-byte log: its tail more than once"
    );
    assert_eq!(reopened.leader_epoch_entries(), epochs_before);
    reopened.close().unwrap();
}
