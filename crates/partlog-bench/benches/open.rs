//! Opening a log of 1,000 segments after a clean shutdown (close untimed).
//!
//! ```sh
//! cargo bench --bench open
//! ```
//!
//! With `PARTLOG_BENCH_UNCLEAN_TAIL_MIB=<n>` set it instead measures, once, what dropping the
//! cached tail costs the open of a log holding `n` MiB above its recovery point
//! (ARCHITECTURE.md §7): clean and unclean opens, each with the library's advice and with a
//! storage that ignores it, on files whose pages are all cached and clean (a process that died
//! in this boot, after the kernel wrote its pages back). Too slow for criterion's samples.
//!
//! ```sh
//! PARTLOG_BENCH_UNCLEAN_TAIL_MIB=256 cargo bench --bench open
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};
use partlog::unstable::{
    Advice, CanonicalPath, FileId, FileLock, LockMode, Metadata, OpenMode, OsStorage, ReadMapping,
    Storage, StorageFile,
};
use partlog::{BatchBuilder, Compression, Log, LogConfig, NewRecord};

fn config() -> LogConfig {
    LogConfig::builder_for_tests()
        .segment_bytes(4096)
        .max_message_bytes(4096)
        .build()
        .expect("config")
}

fn open(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let log = Log::open(dir.path(), config()).expect("open");
        let mut builder = BatchBuilder::new(Compression::None);
        for _ in 0..30 {
            builder.push(&NewRecord::new(1_700_000_000_000, None, Some(&[b'v'; 100])));
        }
        let batch = builder.build().expect("batch");
        while log.stats().segments < 1_000 {
            log.append_batch(&batch).expect("append");
        }
        log.close().expect("close");
    }
    c.bench_function("open/1000_segments_clean", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let started = Instant::now();
                let log = Log::open(dir.path(), config()).expect("open");
                total += started.elapsed();
                log.close().expect("close");
            }
            total
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    targets = open
}

fn main() {
    match std::env::var("PARTLOG_BENCH_UNCLEAN_TAIL_MIB") {
        Ok(mib) => unclean_tail_once(mib.parse().expect("PARTLOG_BENCH_UNCLEAN_TAIL_MIB: MiB")),
        Err(_) => {
            benches();
            Criterion::default().configure_from_args().final_summary();
        }
    }
}

/// The OS storage with `advise` ignored: the open as it was before recovery dropped the tail.
#[derive(Debug)]
struct NoAdvice;

#[derive(Debug)]
struct NoAdviceFile(Arc<dyn StorageFile>);

impl StorageFile for NoAdviceFile {
    fn path(&self) -> &Path {
        self.0.path()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> partlog::Result<usize> {
        self.0.read_at(buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> partlog::Result<()> {
        self.0.write_all_at(buf, offset)
    }
    fn len(&self) -> partlog::Result<u64> {
        self.0.len()
    }
    fn file_id(&self) -> partlog::Result<Option<FileId>> {
        self.0.file_id()
    }
    fn set_len(&self, len: u64) -> partlog::Result<()> {
        self.0.set_len(len)
    }
    fn sync_data(&self) -> partlog::Result<()> {
        self.0.sync_data()
    }
    fn sync_all(&self) -> partlog::Result<()> {
        self.0.sync_all()
    }
    fn map_read(&self) -> partlog::Result<Option<ReadMapping>> {
        self.0.map_read()
    }
    fn advise(&self, _offset: u64, _len: u64, _advice: Advice) -> partlog::Result<()> {
        Ok(())
    }
    fn as_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.0.as_fd()
    }
}

impl Storage for NoAdvice {
    fn open(&self, path: &Path, mode: OpenMode) -> partlog::Result<Arc<dyn StorageFile>> {
        Ok(Arc::new(NoAdviceFile(OsStorage.open(path, mode)?)))
    }
    fn create_dir_all(&self, path: &Path) -> partlog::Result<()> {
        OsStorage.create_dir_all(path)
    }
    fn sync_dir(&self, dir: &Path) -> partlog::Result<()> {
        OsStorage.sync_dir(dir)
    }
    fn rename(&self, from: &Path, to: &Path) -> partlog::Result<()> {
        OsStorage.rename(from, to)
    }
    fn remove(&self, path: &Path) -> partlog::Result<()> {
        OsStorage.remove(path)
    }
    fn list(&self, dir: &Path) -> partlog::Result<Vec<String>> {
        OsStorage.list(dir)
    }
    fn metadata(&self, path: &Path) -> partlog::Result<Metadata> {
        OsStorage.metadata(path)
    }
    fn lock(&self, path: &Path, mode: LockMode) -> partlog::Result<FileLock> {
        OsStorage.lock(path, mode)
    }
    fn canonical_path(&self, path: &Path) -> partlog::Result<CanonicalPath> {
        OsStorage.canonical_path(path)
    }
    fn set_mtime(&self, path: &Path, mtime_ms: i64) -> partlog::Result<()> {
        OsStorage.set_mtime(path, mtime_ms)
    }
    fn lock_foreign_ofd(&self, path: &Path) -> partlog::Result<FileLock> {
        OsStorage.lock_foreign_ofd(path)
    }
}

fn tail_config(storage: Arc<dyn Storage>) -> LogConfig {
    LogConfig::builder_for_tests()
        .segment_bytes(1 << 30)
        .storage(storage)
        .build()
        .expect("config")
}

/// Copies the log files of `from` into a new `to`, then syncs them: their pages end up cached
/// and clean, as a dead process's are once the kernel has written them back.
fn copy_log(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        if entry.file_name() == "partlog.lock" {
            continue;
        }
        let target = to.join(entry.file_name());
        std::fs::copy(entry.path(), &target).expect("copy");
        std::fs::File::open(&target)
            .and_then(|file| file.sync_all())
            .expect("sync");
    }
}

fn unclean_tail_once(mib: u64) {
    let root = tempfile::tempdir().expect("tempdir");
    let (clean, unclean) = (root.path().join("clean"), root.path().join("unclean"));
    {
        let log = Log::open(&clean, tail_config(Arc::new(OsStorage))).expect("open");
        let mut builder = BatchBuilder::new(Compression::None);
        for i in 0..32 {
            builder.push(&NewRecord::new(
                1_700_000_000_000 + i,
                None,
                Some(&[b'v'; 1000]),
            ));
        }
        let batch = builder.build().expect("batch");
        while log.stats().appended_bytes < mib << 20 {
            log.append_batch(&batch).expect("append");
        }
        // Nothing was synced: copied now, the log looks like one whose process died.
        copy_log(&clean, &unclean);
        log.close().expect("close");
    }
    let run: PathBuf = root.path().join("run");
    let mut times = Vec::new();
    for (name, template) in [("clean", &clean), ("unclean", &unclean)] {
        for (variant, storage) in [
            ("advice", Arc::new(OsStorage) as Arc<dyn Storage>),
            ("no advice", Arc::new(NoAdvice) as Arc<dyn Storage>),
        ] {
            copy_log(template, &run);
            let started = Instant::now();
            let log = Log::open(&run, tail_config(storage)).expect("open");
            let elapsed = started.elapsed();
            assert_eq!(
                log.recovery_report().clean_shutdown,
                name == "clean",
                "{name} open"
            );
            log.close().expect("close");
            drop(log);
            std::fs::remove_dir_all(&run).expect("rm");
            println!("open/{mib}MiB_tail/{name}/{variant}: {elapsed:?}");
            times.push(elapsed.as_secs_f64());
        }
    }
    println!(
        "clean: advice / no advice = {:.2}; unclean: advice / no advice = {:.2}",
        times[0] / times[1],
        times[2] / times[3]
    );
}
