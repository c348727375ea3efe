//! [`Fenced`]: a [`SimStorage`] as one process sees it, for the crash matrices
//! (`#[path = "common/fenced.rs"] mod fenced_storage;`).

use std::path::Path;
use std::sync::Arc;

use partlog::unstable::{
    CanonicalPath, FileLock, LockMode, Metadata, OpenMode, SimStorage, Storage, StorageFile,
};
use partlog::{Error, LogConfig};

/// A [`SimStorage`] as one process sees it: once the machine crashed, every operation fails, as
/// none runs on a real machine after it went down. The simulator kills only handles; without
/// this, a thread of the dead log could still rename and remove files by path in the post-crash
/// image that the next open recovers (the finding of seed 8172). Every operation runs under one
/// lock with its check, so none slips in between a crash and the check after it: the simulator
/// serializes its operations anyway, and none of them blocks.
#[derive(Debug)]
pub struct Fenced {
    inner: Arc<dyn Storage>,
    /// The machine whose crash ends this process.
    sim: SimStorage,
    /// Held across each operation and its check; shared with the files opened.
    gate: Arc<parking_lot::Mutex<()>>,
    /// The machine's crashes before this process began: a later one ends it.
    crashes_before: u64,
}

/// `config` on fenced storage over `sim`: for the process that is about to crash (the one that
/// recovers after it opens on `sim` itself).
#[allow(
    dead_code,
    reason = "not every test that includes this module builds its configs with it"
)]
pub fn fenced_config(mut config: LogConfig, sim: &SimStorage) -> LogConfig {
    config.storage = Arc::new(Fenced::new(Arc::new(sim.clone()), sim.clone()));
    config
}

/// A file of a [`Fenced`] storage.
#[derive(Debug)]
struct FencedFile {
    inner: Arc<dyn StorageFile>,
    sim: SimStorage,
    gate: Arc<parking_lot::Mutex<()>>,
    crashes_before: u64,
}

/// Runs `op` unless the machine of `sim` has crashed.
fn fenced<T>(
    sim: &SimStorage,
    (gate, crashes_before): (&parking_lot::Mutex<()>, u64),
    path: &Path,
    op: impl FnOnce() -> partlog::Result<T>,
) -> partlog::Result<T> {
    let _gate = gate.lock();
    if sim.stats().crashes > crashes_before {
        return Err(Error::Io {
            path: path.to_path_buf(),
            source: std::io::Error::other("the machine crashed: this process is gone"),
        });
    }
    op()
}

impl Fenced {
    pub fn new(inner: Arc<dyn Storage>, sim: SimStorage) -> Fenced {
        let crashes_before = sim.stats().crashes;
        Fenced {
            inner,
            sim,
            gate: Arc::new(parking_lot::Mutex::new(())),
            crashes_before,
        }
    }

    fn run<T>(&self, path: &Path, op: impl FnOnce() -> partlog::Result<T>) -> partlog::Result<T> {
        fenced(&self.sim, (&self.gate, self.crashes_before), path, op)
    }
}

impl FencedFile {
    fn run<T>(&self, op: impl FnOnce() -> partlog::Result<T>) -> partlog::Result<T> {
        fenced(
            &self.sim,
            (&self.gate, self.crashes_before),
            self.inner.path(),
            op,
        )
    }
}

impl StorageFile for FencedFile {
    fn path(&self) -> &Path {
        self.inner.path()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> partlog::Result<usize> {
        self.run(|| self.inner.read_at(buf, offset))
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> partlog::Result<()> {
        self.run(|| self.inner.write_all_at(buf, offset))
    }
    fn len(&self) -> partlog::Result<u64> {
        self.run(|| self.inner.len())
    }
    fn file_id(&self) -> partlog::Result<Option<partlog::unstable::FileId>> {
        self.run(|| self.inner.file_id())
    }
    fn set_len(&self, len: u64) -> partlog::Result<()> {
        self.run(|| self.inner.set_len(len))
    }
    fn sync_data(&self) -> partlog::Result<()> {
        self.run(|| self.inner.sync_data())
    }
    fn sync_all(&self) -> partlog::Result<()> {
        self.run(|| self.inner.sync_all())
    }
    fn map_read(&self) -> partlog::Result<Option<partlog::unstable::ReadMapping>> {
        self.run(|| self.inner.map_read())
    }
    fn advise(
        &self,
        offset: u64,
        len: u64,
        advice: partlog::unstable::Advice,
    ) -> partlog::Result<()> {
        self.run(|| self.inner.advise(offset, len, advice))
    }
}

impl Storage for Fenced {
    fn open(&self, path: &Path, mode: OpenMode) -> partlog::Result<Arc<dyn StorageFile>> {
        let inner = self.run(path, || self.inner.open(path, mode))?;
        Ok(Arc::new(FencedFile {
            inner,
            sim: self.sim.clone(),
            gate: Arc::clone(&self.gate),
            crashes_before: self.crashes_before,
        }))
    }
    fn create_dir_all(&self, path: &Path) -> partlog::Result<()> {
        self.run(path, || self.inner.create_dir_all(path))
    }
    fn sync_dir(&self, dir: &Path) -> partlog::Result<()> {
        self.run(dir, || self.inner.sync_dir(dir))
    }
    fn sync_file_system(&self, path: &Path) -> partlog::Result<()> {
        self.run(path, || self.inner.sync_file_system(path))
    }
    fn file_system_id(&self, path: &Path) -> partlog::Result<u64> {
        self.run(path, || self.inner.file_system_id(path))
    }
    fn rename(&self, from: &Path, to: &Path) -> partlog::Result<()> {
        self.run(from, || self.inner.rename(from, to))
    }
    fn remove(&self, path: &Path) -> partlog::Result<()> {
        self.run(path, || self.inner.remove(path))
    }
    fn list(&self, dir: &Path) -> partlog::Result<Vec<String>> {
        self.run(dir, || self.inner.list(dir))
    }
    fn metadata(&self, path: &Path) -> partlog::Result<Metadata> {
        self.run(path, || self.inner.metadata(path))
    }
    fn lock(&self, path: &Path, mode: LockMode) -> partlog::Result<FileLock> {
        self.run(path, || self.inner.lock(path, mode))
    }
    fn canonical_path(&self, path: &Path) -> partlog::Result<CanonicalPath> {
        self.run(path, || self.inner.canonical_path(path))
    }
    fn set_mtime(&self, path: &Path, mtime_ms: i64) -> partlog::Result<()> {
        self.run(path, || self.inner.set_mtime(path, mtime_ms))
    }
    fn lock_foreign_ofd(&self, path: &Path) -> partlog::Result<FileLock> {
        self.run(path, || self.inner.lock_foreign_ofd(path))
    }
}
