//! [`OsStorage`]: the real file system.

use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use std::num::NonZeroU64;
use std::os::fd::{AsFd, BorrowedFd};

use super::{
    Advice, CanonicalPath, FileId, FileLock, LockMode, Metadata, OpenMode, ReadMapping, Storage,
    StorageFile,
};
use crate::error::{Error, Result};

/// The operating system's file system, through std and rustix.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsStorage;

impl OsStorage {
    /// The OS storage. It has no state; every `OsStorage` is the same.
    pub fn new() -> Self {
        OsStorage
    }
}

#[derive(Debug)]
struct OsFile {
    path: PathBuf,
    file: File,
}

impl OsFile {
    /// A write that made no progress (`pwrite` returned 0): std's `write_all` error.
    fn wrote_nothing(&self) -> Error {
        Error::io(
            &self.path,
            std::io::Error::new(
                std::io::ErrorKind::WriteZero,
                "failed to write whole buffer",
            ),
        )
    }
}

impl StorageFile for OsFile {
    fn path(&self) -> &Path {
        &self.path
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        // rustix makes the system call itself: libc's pread is a thread-cancellation point,
        // whose bookkeeping around each call cost as much as a small read's copy.
        loop {
            match rustix::io::pread(&self.file, &mut *buf, offset) {
                Ok(n) => return Ok(n),
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(Error::io(&self.path, e.into())),
            }
        }
    }

    fn read_exact_to_vec(&self, len: usize, offset: u64) -> Result<Vec<u8>> {
        let mut bytes = Vec::with_capacity(len);
        while bytes.len() < len {
            let at = offset + bytes.len() as u64;
            // Reads into the spare capacity, which `spare_capacity` then counts as initialized:
            // no zero-filling first. The capacity may exceed `len`; the excess is cut below.
            let read =
                match rustix::io::pread(&self.file, rustix::buffer::spare_capacity(&mut bytes), at)
                {
                    Ok(read) => read,
                    Err(rustix::io::Errno::INTR) => continue,
                    Err(e) => return Err(Error::io(&self.path, e.into())),
                };
            if read == 0 {
                return Err(Error::io(
                    &self.path,
                    std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        format!(
                            "wanted {len} bytes at offset {offset}, file ends after {}",
                            bytes.len()
                        ),
                    ),
                ));
            }
        }
        bytes.truncate(len);
        Ok(bytes)
    }

    fn write_all_at(&self, mut buf: &[u8], mut offset: u64) -> Result<()> {
        // One pwrite per call in the common case, without libc's cancellation-point wrapper
        // (see read_at); a short write continues where it stopped, as std's write_all_at does.
        while !buf.is_empty() {
            match rustix::io::pwrite(&self.file, buf, offset) {
                Ok(0) => return Err(self.wrote_nothing()),
                Ok(n) => {
                    buf = buf.get(n..).unwrap_or_default();
                    offset += n as u64;
                }
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(Error::io(&self.path, e.into())),
            }
        }
        Ok(())
    }

    fn write_all_pair_at(&self, mut head: &[u8], mut tail: &[u8], mut offset: u64) -> Result<()> {
        // One pwritev while both parts have bytes left; a short write continues from where it
        // stopped, and once the head is done the rest is an ordinary write_all_at.
        while !head.is_empty() {
            let parts = [
                rustix::io::IoSlice::new(head),
                rustix::io::IoSlice::new(tail),
            ];
            match rustix::io::pwritev(&self.file, &parts, offset) {
                Ok(0) => return Err(self.wrote_nothing()),
                Ok(written) => {
                    offset += written as u64;
                    let from_head = written.min(head.len());
                    head = head.get(from_head..).unwrap_or_default();
                    tail = tail.get(written - from_head..).unwrap_or_default();
                }
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(Error::io(&self.path, e.into())),
            }
        }
        self.write_all_at(tail, offset)
    }

    fn len(&self) -> Result<u64> {
        self.file
            .metadata()
            .map(|m| m.len())
            .map_err(|e| Error::io(&self.path, e))
    }

    fn file_id(&self) -> Result<Option<FileId>> {
        let meta = self.file.metadata().map_err(|e| Error::io(&self.path, e))?;
        Ok(Some(file_id(&meta)))
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.file.set_len(len).map_err(|e| Error::io(&self.path, e))
    }

    fn sync_data(&self) -> Result<()> {
        self.file.sync_data().map_err(|e| Error::io(&self.path, e))
    }

    fn sync_all(&self) -> Result<()> {
        self.file.sync_all().map_err(|e| Error::io(&self.path, e))
    }

    fn advise(&self, offset: u64, len: u64, advice: Advice) -> Result<()> {
        let advice = match advice {
            Advice::Sequential => rustix::fs::Advice::Sequential,
            Advice::Random => rustix::fs::Advice::Random,
            Advice::WillNeed => rustix::fs::Advice::WillNeed,
            Advice::DontNeed => rustix::fs::Advice::DontNeed,
        };
        rustix::fs::fadvise(&self.file, offset, NonZeroU64::new(len), advice)
            .map_err(|errno| Error::io(&self.path, std::io::Error::from(errno)))
    }

    fn as_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.file.as_fd())
    }

    fn map_read(&self) -> Result<Option<ReadMapping>> {
        let len = self.len()?;
        if len == 0 {
            // A zero-length mapping is an error on Linux; an empty image needs no mapping.
            return Ok(Some(ReadMapping::new(Box::new(Vec::new()))));
        }
        // SAFETY: the mapping is read-only, and partlog maps only files it never shrinks while
        // mapped: sealed index files (ARCHITECTURE.md §3, invariant 17: a truncation into a sealed
        // segment writes new index files instead), and, with `map_sealed_segments`, sealed `.log`
        // files, whose segment drops the mapping under a lock that waits for every reader before
        // any truncation or unseal. A shrink by another process would raise SIGBUS on access;
        // partlog's lock on the directory excludes other partlog writers, and a foreign writer of
        // a live Kafka directory is excluded by the Kafka log-dir lock.
        let map =
            unsafe { memmap2::Mmap::map(&self.file) }.map_err(|e| Error::io(&self.path, e))?;
        Ok(Some(ReadMapping::new(Box::new(map))))
    }

    fn map_read_reserved(&self, reserve: u64) -> Result<Option<ReadMapping>> {
        let len = self.len()?.max(reserve);
        if len == 0 {
            return Ok(Some(ReadMapping::new(Box::new(Vec::new()))));
        }
        let Ok(len) = usize::try_from(len) else {
            // More than the address space holds: positional reads.
            return Ok(None);
        };
        // SAFETY: the mapping is read-only and shared, so it sees the file's later writes; the
        // pages past the file's end are mapped but never touched: partlog's active segment reads
        // only below its published size, which the file holds, and drops the mapping under a lock
        // that waits for every reader before any cut of published bytes (invariant 17). The
        // other-process risk is the one `map_read` states.
        let map = unsafe { memmap2::MmapOptions::new().len(len).map(&self.file) }
            .map_err(|e| Error::io(&self.path, e))?;
        Ok(Some(ReadMapping::new(Box::new(map))))
    }
}

/// Which kind of lock a [`HeldLock`] holds.
#[derive(Clone, Copy)]
enum LockKind {
    Flock,
    Ofd,
}

/// Holds a lock's descriptor. Dropping it unlocks explicitly before the descriptor closes:
/// both kinds belong to the open file description, which a child forked by another thread
/// shares until it execs, so a mere close could leave the lock held for a moment (a reopen in
/// this process would then see `Error::Locked`). Unlocking releases it for every sharer.
struct HeldLock {
    file: File,
    kind: LockKind,
}

impl Drop for HeldLock {
    fn drop(&mut self) {
        let result = match self.kind {
            LockKind::Flock => rustix::fs::flock(&self.file, rustix::fs::FlockOperation::Unlock)
                .map_err(std::io::Error::from),
            LockKind::Ofd => ofd_lock(&self.file, libc::F_UNLCK).map(drop),
        };
        if let Err(error) = result {
            log::warn!("unlocking a lock file failed (closing it releases the lock): {error}");
        }
    }
}

/// Tries the whole-file OFD write lock on `file`: `Ok(false)` if another holder conflicts.
#[cfg(target_os = "linux")]
fn try_ofd_write_lock(file: &File) -> std::io::Result<bool> {
    ofd_lock(file, libc::F_WRLCK)
}

/// Sets (`F_WRLCK`) or releases (`F_UNLCK`) the whole-file OFD lock on `file`: `Ok(false)` if
/// another holder conflicts.
#[cfg(target_os = "linux")]
fn ofd_lock(file: &File, lock_type: libc::c_int) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;

    // SAFETY: `struct flock` is plain integers, for which all-zero bytes are a valid value; OFD
    // requests must have `l_pid` 0, and zero `l_start`/`l_len` from `SEEK_SET` is the whole file,
    // however it grows (Java's `tryLock()` asks for the same range).
    let mut request: libc::flock = unsafe { std::mem::zeroed() };
    request.l_type = lock_type as libc::c_short;
    request.l_whence = libc::SEEK_SET as libc::c_short;
    loop {
        // SAFETY: `file` keeps its descriptor open for the whole call, and `request` is an
        // initialised `struct flock` that lives across it; F_OFD_SETLK only reads it.
        let status = unsafe {
            libc::fcntl(
                file.as_raw_fd(),
                libc::F_OFD_SETLK,
                &request as *const libc::flock,
            )
        };
        if status == 0 {
            return Ok(true);
        }
        let error = std::io::Error::last_os_error();
        match error.raw_os_error() {
            Some(libc::EINTR) => continue,
            // fcntl(2): a conflicting lock is reported as EAGAIN or EACCES.
            Some(libc::EAGAIN | libc::EACCES) => return Ok(false),
            _ => return Err(error),
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn try_ofd_write_lock(file: &File) -> std::io::Result<bool> {
    ofd_lock(file, 0)
}

#[cfg(not(target_os = "linux"))]
fn ofd_lock(_file: &File, _lock_type: i32) -> std::io::Result<bool> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "OFD locks (F_OFD_SETLK) exist only on Linux",
    ))
}

impl Storage for OsStorage {
    fn open(&self, path: &Path, mode: OpenMode) -> Result<Arc<dyn StorageFile>> {
        let mut options = OpenOptions::new();
        options.read(true);
        match mode {
            OpenMode::Read => {}
            OpenMode::ReadWrite => {
                options.write(true);
            }
            OpenMode::CreateNew => {
                options.write(true).create_new(true);
            }
            OpenMode::Create => {
                options.write(true).create(true);
            }
        }
        let file = options.open(path).map_err(|e| Error::io(path, e))?;
        Ok(Arc::new(OsFile {
            path: path.to_path_buf(),
            file,
        }))
    }

    fn create_dir_all(&self, path: &Path) -> Result<()> {
        fs::create_dir_all(path).map_err(|e| Error::io(path, e))
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let handle = File::open(dir).map_err(|e| Error::io(dir, e))?;
        handle.sync_all().map_err(|e| Error::io(dir, e))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        fs::rename(from, to).map_err(|e| Error::io(from, e))
    }

    fn sync_file_system(&self, path: &Path) -> Result<()> {
        check_syncfs_reports_errors(path)?;
        let handle = File::open(path).map_err(|e| Error::io(path, e))?;
        rustix::fs::syncfs(&handle).map_err(|errno| Error::io(path, std::io::Error::from(errno)))
    }

    fn file_system_id(&self, path: &Path) -> Result<u64> {
        use std::os::unix::fs::MetadataExt;
        check_syncfs_reports_errors(path)?;
        Ok(fs::metadata(path).map_err(|e| Error::io(path, e))?.dev())
    }

    fn remove(&self, path: &Path) -> Result<()> {
        fs::remove_file(path).map_err(|e| Error::io(path, e))
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
            let entry = entry.map_err(|e| Error::io(dir, e))?;
            // Names that are not UTF-8 cannot be partlog's or Kafka's files; skip them.
            if let Ok(name) = entry.file_name().into_string() {
                names.push(name);
            }
        }
        Ok(names)
    }

    fn metadata(&self, path: &Path) -> Result<Metadata> {
        let meta = fs::metadata(path).map_err(|e| Error::io(path, e))?;
        let modified_ms = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        Ok(Metadata {
            len: meta.len(),
            is_dir: meta.is_dir(),
            modified_ms,
            file_id: Some(file_id(&meta)),
        })
    }

    fn lock(&self, path: &Path, mode: LockMode) -> Result<FileLock> {
        let file = match mode {
            LockMode::Exclusive => OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(path),
            LockMode::Shared => OpenOptions::new().read(true).open(path),
        }
        .map_err(|e| Error::io(path, e))?;
        let operation = match mode {
            LockMode::Exclusive => rustix::fs::FlockOperation::NonBlockingLockExclusive,
            LockMode::Shared => rustix::fs::FlockOperation::NonBlockingLockShared,
        };
        match rustix::fs::flock(&file, operation) {
            Ok(()) => Ok(FileLock::new(Box::new(HeldLock {
                file,
                kind: LockKind::Flock,
            }))),
            Err(rustix::io::Errno::WOULDBLOCK) => Err(Error::Locked {
                path: path.to_path_buf(),
                in_this_process: false,
            }),
            Err(errno) => Err(Error::io(path, errno.into())),
        }
    }

    fn canonical_path(&self, path: &Path) -> Result<CanonicalPath> {
        let canonical = fs::canonicalize(path).map_err(|e| Error::io(path, e))?;
        Ok(CanonicalPath::new(CanonicalPath::OS_FILE_SYSTEM, canonical))
    }

    fn set_mtime(&self, path: &Path, mtime_ms: i64) -> Result<()> {
        let since_epoch = Duration::from_millis(mtime_ms.unsigned_abs());
        let mtime = if mtime_ms >= 0 {
            UNIX_EPOCH.checked_add(since_epoch)
        } else {
            UNIX_EPOCH.checked_sub(since_epoch)
        }
        .ok_or_else(|| Error::InvalidArgument {
            why: format!("modification time {mtime_ms} ms is out of the system's range"),
        })?;
        // futimens(2) with explicit times needs the file's owner, not write access, so a
        // read-only descriptor is enough; the access time is left as it is (UTIME_OMIT).
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        file.set_modified(mtime).map_err(|e| Error::io(path, e))
    }

    fn lock_foreign_ofd(&self, path: &Path) -> Result<FileLock> {
        // Kafka's broker deletes `.lock` after unlocking it at shutdown. A lock won on a file that
        // was unlinked (or replaced) meanwhile would guard nothing: the next locker creates a new
        // file. So the lock counts only if the path still names the locked file; otherwise the
        // file is opened again. Each retry needs another unlink to race with, so few suffice.
        const ATTEMPTS: usize = 8;
        for _ in 0..ATTEMPTS {
            // A write lock needs a descriptor open for writing.
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)
                .map_err(|e| Error::io(path, e))?;
            if !try_ofd_write_lock(&file).map_err(|e| Error::io(path, e))? {
                return Err(Error::Locked {
                    path: path.to_path_buf(),
                    in_this_process: false,
                });
            }
            if still_named_by(&file, path)? {
                return Ok(FileLock::new(Box::new(HeldLock {
                    file,
                    kind: LockKind::Ofd,
                })));
            }
        }
        Err(Error::io(
            path,
            std::io::Error::other(format!(
                "the file was unlinked or replaced after each of {ATTEMPTS} locks"
            )),
        ))
    }
}

/// Whether `path` still names the open `file` (same device and inode).
fn still_named_by(file: &File, path: &Path) -> Result<bool> {
    use std::os::unix::fs::MetadataExt;

    let held = file.metadata().map_err(|e| Error::io(path, e))?;
    match fs::metadata(path) {
        Ok(named) => Ok(named.dev() == held.dev() && named.ino() == held.ino()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// The device and inode numbers of `meta`'s file.
fn file_id(meta: &fs::Metadata) -> FileId {
    use std::os::unix::fs::MetadataExt as _;
    FileId {
        device: meta.dev(),
        inode: meta.ino(),
    }
}

/// `syncfs(2)` reports a failed writeback only since Linux 5.8 (before, it returned 0 after
/// any error, so a log would report lost data durable): on an older kernel, or one whose
/// release cannot be read, the file system syncs are refused and the logs sync file by file.
fn check_syncfs_reports_errors(path: &Path) -> Result<()> {
    static REPORTS_ERRORS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let reports = *REPORTS_ERRORS.get_or_init(|| {
        let uname = rustix::system::uname();
        let release = uname.release().to_string_lossy();
        let mut numbers = release
            .split(|c: char| !c.is_ascii_digit())
            .map(|part| part.parse::<u32>().ok());
        match (numbers.next().flatten(), numbers.next().flatten()) {
            (Some(major), Some(minor)) => (major, minor) >= (5, 8),
            _ => false,
        }
    });
    if reports {
        Ok(())
    } else {
        Err(Error::Unsupported {
            what: format!(
                "syncfs on this kernel does not report failed writebacks (Linux 5.8 or later \
                 needed; asked for {})",
                path.display()
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pair write lands as one buffer would, over existing bytes and past the end, with
    /// either part empty.
    #[test]
    fn a_pair_write_is_the_write_of_its_concatenation() {
        let dir = tempfile::tempdir().unwrap();
        let storage = OsStorage::new();
        let vectored = storage
            .open(&dir.path().join("vectored"), OpenMode::CreateNew)
            .unwrap();
        let mut model = vec![7u8; 100];
        vectored.write_all_at(&model, 0).unwrap();
        let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        for (offset, head, tail) in [
            (10usize, &big[..61], &big[61..5_000]),
            (90, &big[..0], &big[..40]),
            (3, &big[..17], &big[..0]),
            (200, &big[..61], &big[61..]),
        ] {
            vectored
                .write_all_pair_at(head, tail, offset as u64)
                .unwrap();
            let end = offset + head.len() + tail.len();
            if model.len() < end {
                model.resize(end, 0);
            }
            model[offset..offset + head.len()].copy_from_slice(head);
            model[offset + head.len()..end].copy_from_slice(tail);
            let on_disk = vectored.read_exact_to_vec(model.len(), 0).unwrap();
            assert!(on_disk == model, "pair at {offset}");
            assert_eq!(vectored.len().unwrap(), model.len() as u64);
        }
    }

    #[test]
    fn set_mtime_sets_what_metadata_reads() {
        let dir = tempfile::tempdir().unwrap();
        let storage = OsStorage::new();
        let path = dir.path().join("00000000000000000000.log");
        let file = storage.open(&path, OpenMode::CreateNew).unwrap();
        file.write_all_at(b"batch", 0).unwrap();
        for mtime_ms in [1_600_000_000_123, 86_400_000, 0] {
            storage.set_mtime(&path, mtime_ms).unwrap();
            assert_eq!(storage.metadata(&path).unwrap().modified_ms, mtime_ms);
        }
        let missing = storage
            .set_mtime(&dir.path().join("missing.log"), 1)
            .unwrap_err();
        assert_eq!(missing.io_kind(), Some(std::io::ErrorKind::NotFound));
    }

    #[test]
    fn read_exact_to_vec_reads_exactly_or_fails_at_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let storage = OsStorage::new();
        let file = storage
            .open(&dir.path().join("bytes"), OpenMode::CreateNew)
            .unwrap();
        let content: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        file.write_all_at(&content, 0).unwrap();
        // The default (zero-fill, then read) and the spare-capacity read agree everywhere.
        for (len, offset) in [(0, 0), (1, 0), (100_000, 0), (4_096, 95_904), (10, 12_345)] {
            let read = file.read_exact_to_vec(len, offset).unwrap();
            let at = usize::try_from(offset).unwrap();
            assert_eq!(read, &content[at..at + len], "{len} at {offset}");
            assert_eq!(read.len(), len);
        }
        for (len, offset) in [(100_001, 0), (2, 99_999), (1, 100_000)] {
            let error = file.read_exact_to_vec(len, offset).unwrap_err();
            assert_eq!(
                error.io_kind(),
                Some(std::io::ErrorKind::UnexpectedEof),
                "{len} at {offset}"
            );
        }
    }

    #[test]
    fn write_read_and_lengths_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let storage = OsStorage::new();
        let path = dir.path().join("a.log");
        let file = storage.open(&path, OpenMode::CreateNew).unwrap();
        file.write_all_at(b"hello world", 0).unwrap();
        file.write_all_at(b"W", 6).unwrap();
        let mut buf = [0u8; 11];
        file.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"hello World");
        assert_eq!(file.len().unwrap(), 11);
        file.set_len(5).unwrap();
        assert_eq!(file.len().unwrap(), 5);
        let err = file.read_exact_at(&mut buf, 0).unwrap_err();
        assert_eq!(err.io_kind(), Some(std::io::ErrorKind::UnexpectedEof));
        assert!(storage.open(&path, OpenMode::CreateNew).is_err());
        assert_eq!(&*file.map_read().unwrap().unwrap(), b"hello");
    }

    #[test]
    fn exclusive_lock_excludes_shared_and_exclusive() {
        let dir = tempfile::tempdir().unwrap();
        let storage = OsStorage::new();
        let path = dir.path().join("partlog.lock");
        let held = storage.lock(&path, LockMode::Exclusive).unwrap();
        assert!(matches!(
            storage.lock(&path, LockMode::Exclusive),
            Err(Error::Locked { .. })
        ));
        assert!(matches!(
            storage.lock(&path, LockMode::Shared),
            Err(Error::Locked { .. })
        ));
        drop(held);
        let a = storage.lock(&path, LockMode::Shared).unwrap();
        let _b = storage.lock(&path, LockMode::Shared).unwrap();
        assert!(matches!(
            storage.lock(&path, LockMode::Exclusive),
            Err(Error::Locked { .. })
        ));
        drop(a);
    }

    #[test]
    fn ofd_locks_conflict_across_descriptions_but_not_with_flock() {
        let dir = tempfile::tempdir().unwrap();
        let storage = OsStorage::new();
        let path = dir.path().join(".lock");
        let held = storage.lock_foreign_ofd(&path).unwrap();
        assert!(path.exists(), "the lock file is created");
        // Another open file description of this very process conflicts, as another process would.
        assert!(matches!(
            storage.lock_foreign_ofd(&path),
            Err(Error::Locked { .. })
        ));
        // flock and fcntl locks do not see each other on Linux.
        drop(storage.lock(&path, LockMode::Exclusive).unwrap());
        drop(held);
        drop(storage.lock_foreign_ofd(&path).unwrap());
    }

    #[test]
    fn a_lock_counts_only_while_its_path_names_the_locked_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".lock");
        let file = File::create(&path).unwrap();
        assert!(still_named_by(&file, &path).unwrap());
        fs::remove_file(&path).unwrap();
        assert!(!still_named_by(&file, &path).unwrap(), "unlinked");
        File::create(&path).unwrap();
        assert!(!still_named_by(&file, &path).unwrap(), "replaced");
    }

    #[test]
    fn canonical_paths_resolve_spellings_and_need_an_existing_path() {
        let dir = tempfile::tempdir().unwrap();
        let storage = OsStorage::new();
        std::fs::create_dir(dir.path().join("a")).unwrap();
        let direct = storage.canonical_path(&dir.path().join("a")).unwrap();
        let dotted = storage
            .canonical_path(&dir.path().join("a/./../a"))
            .unwrap();
        assert_eq!(direct, dotted);
        assert_eq!(direct.file_system(), CanonicalPath::OS_FILE_SYSTEM);
        assert!(direct.path().is_absolute());
        let missing = storage.canonical_path(&dir.path().join("b")).unwrap_err();
        assert_eq!(missing.io_kind(), Some(std::io::ErrorKind::NotFound));
    }

    #[test]
    fn rename_replaces_and_list_sees_it() {
        let dir = tempfile::tempdir().unwrap();
        let storage = OsStorage::new();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        storage
            .open(&a, OpenMode::CreateNew)
            .unwrap()
            .write_all_at(b"1", 0)
            .unwrap();
        storage
            .open(&b, OpenMode::CreateNew)
            .unwrap()
            .write_all_at(b"22", 0)
            .unwrap();
        storage.rename(&a, &b).unwrap();
        storage.sync_dir(dir.path()).unwrap();
        assert_eq!(storage.list(dir.path()).unwrap(), vec!["b".to_string()]);
        assert_eq!(storage.metadata(&b).unwrap().len, 1);
        assert!(!storage.exists(&a).unwrap());
        storage.remove(&b).unwrap();
        assert!(!storage.exists(&b).unwrap());
    }
}
