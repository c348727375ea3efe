//! The storage seam: every byte partlog reads or writes goes through [`Storage`].
//!
//! Two implementations exist:
//! - [`OsStorage`], the real file system (std, plus rustix for `flock`, libc for the OFD lock of
//!   the Kafka hand-off, and memmap2 for read-only mappings of sealed index files);
//! - `SimStorage` (feature `sim`), an in-memory, seeded file system that can crash: unsynced
//!   writes survive, vanish or tear, and unsynced directory operations may be undone.
//!
//! No code outside this module touches `std::fs`, memmap2 or a file descriptor (ARCHITECTURE.md
//! §1). The trait grows only through provided methods with defaults, so that an implementation
//! written against an older partlog keeps compiling.

mod durable;
mod os;
#[cfg(any(test, feature = "sim"))]
pub mod sim;

use std::fmt;
use std::ops::Deref;
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};

pub use durable::{create_dir_durably, replace_file_durably};
pub use os::OsStorage;
#[cfg(any(test, feature = "sim"))]
pub use sim::{CrashConfig, SimStorage};

/// How [`Storage::open`] opens a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// Read only; the file must exist.
    Read,
    /// Read and write; the file must exist.
    ReadWrite,
    /// Read and write; the file must not exist yet, and is created empty.
    CreateNew,
    /// Read and write; the file is created empty if it does not exist.
    Create,
}

/// Shared or exclusive, for [`Storage::lock`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockMode {
    /// Many holders at once, none exclusive (readers).
    Shared,
    /// One holder, no shared holders (the writer).
    Exclusive,
}

/// Which file a path or an open file is (the device and inode numbers on Linux). Two ids are
/// equal for the same file, and differ for a file that replaced another under the same name
/// while the old one is still open (an open file's inode number cannot be reused). A live
/// read-only log compares its active segment's with the one its path names, to see a writer
/// that deleted and recreated the segment between two looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileId {
    /// The device (file system) the file is on.
    pub device: u64,
    /// The file's number on that device.
    pub inode: u64,
}

/// What [`Storage::metadata`] reports about a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metadata {
    /// Length in bytes.
    pub len: u64,
    /// Whether the path is a directory.
    pub is_dir: bool,
    /// Last modification time, in milliseconds since the Unix epoch.
    pub modified_ms: i64,
    /// Which file the path names; `None` if the storage cannot tell.
    pub file_id: Option<FileId>,
}

/// A held advisory lock; dropping it releases the lock.
pub struct FileLock {
    _held: Box<dyn Send + Sync>,
}

impl FileLock {
    /// Wraps whatever keeps an implementation's lock alive (a descriptor, a registry entry).
    pub fn new(held: Box<dyn Send + Sync>) -> Self {
        FileLock { _held: held }
    }
}

impl fmt::Debug for FileLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FileLock")
    }
}

/// A path in canonical form, tagged with the file system that resolves it: what
/// [`Storage::canonical_path`] returns.
///
/// Two spellings of one directory (relative, through `..` or a symbolic link) give equal values,
/// and paths of two different file systems (two simulators, or one simulator before and after a
/// crash) never do. partlog keys process-wide state by it: the Kafka log-dir lock (see
/// [`lock_foreign_ofd`](Storage::lock_foreign_ofd)), which every log in one Kafka log directory
/// shares.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CanonicalPath {
    file_system: u64,
    path: PathBuf,
}

/// The source of [`CanonicalPath::unique_file_system`]; 0 is the OS's own. `std`'s atomic even
/// under shuttle: a process-wide static outlives the model-checked execution that would own a
/// shuttle atomic, and tests running at the same time share it.
static NEXT_FILE_SYSTEM: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl CanonicalPath {
    /// The tag of the operating system's file system (every [`OsStorage`] shares it).
    pub const OS_FILE_SYSTEM: u64 = 0;

    /// `path` (already canonical on its file system) tagged with `file_system`.
    pub fn new(file_system: u64, path: PathBuf) -> Self {
        CanonicalPath { file_system, path }
    }

    /// A file-system tag that no other call in this process returns, and that is never
    /// [`OS_FILE_SYSTEM`](Self::OS_FILE_SYSTEM): for storages whose files are their own.
    pub fn unique_file_system() -> u64 {
        NEXT_FILE_SYSTEM.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// The file system's tag.
    pub fn file_system(&self) -> u64 {
        self.file_system
    }

    /// The canonical path, usable with the storage that returned it.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Read-only bytes of a file mapped into memory (or any stable in-memory image of it).
///
/// The bytes stay valid while this value lives, even if the file is renamed or unlinked. A
/// mapped file must never be shrunk, since a mapped page with no file behind it is a SIGBUS, not
/// an error: partlog writes new index files instead, and drops a segment's mapping before it
/// cuts the segment's `.log`.
pub struct ReadMapping {
    bytes: Box<dyn Deref<Target = [u8]> + Send + Sync>,
}

impl ReadMapping {
    /// Wraps an implementation's mapping.
    pub fn new(bytes: Box<dyn Deref<Target = [u8]> + Send + Sync>) -> Self {
        ReadMapping { bytes }
    }
}

impl Deref for ReadMapping {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl fmt::Debug for ReadMapping {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ReadMapping({} bytes)", self.bytes.len())
    }
}

/// Access-pattern hints for [`StorageFile::advise`] (`posix_fadvise`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Advice {
    /// The range will be read front to back: read ahead aggressively.
    Sequential,
    /// The range will be read at random positions: do not read ahead.
    Random,
    /// The range will be read soon: start reading it into the page cache.
    WillNeed,
    /// The range will not be read again soon: its clean pages may be dropped.
    DontNeed,
}

/// What [`drop_cached_tail`] rounds its start down to: 2 MiB, the largest page-cache folio on
/// x86-64 with 4 KiB pages (a PMD). `posix_fadvise(POSIX_FADV_DONTNEED)` drops only the pages
/// and folios wholly inside its range, so a range starting inside one would keep it, and with it
/// the bytes just past the start.
pub(crate) const CACHE_DROP_ALIGNMENT: u64 = 2 << 20;

/// Asks the kernel to drop the cached pages of `file` from `position` (rounded down to
/// [`CACHE_DROP_ALIGNMENT`]) to its end, so that reads there return what the disk holds rather
/// than pages a failed writeback left clean but unwritten (ARCHITECTURE.md §7). Dirty pages are
/// not dropped: they are still to be written, and the next sync writes them or fails.
pub(crate) fn drop_cached_tail(file: &dyn StorageFile, position: u64) -> Result<()> {
    let start = position - position % CACHE_DROP_ALIGNMENT;
    file.advise(start, 0, Advice::DontNeed)
}

/// An open file. Positional I/O only: there is no cursor, so a handle can be shared by threads.
pub trait StorageFile: Send + Sync + fmt::Debug {
    /// The path the file was opened at (it may since have been renamed).
    fn path(&self) -> &Path;

    /// Reads up to `buf.len()` bytes at `offset`; returns how many were read (0 at end of file).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize>;

    /// Writes all of `buf` at `offset`, extending the file if needed.
    fn write_all_at(&self, buf: &[u8], offset: u64) -> Result<()>;

    /// Writes `head` and then `tail` at `offset`, as if they were one buffer: the log's append
    /// of a produced batch, whose header it has stamped in a copy and whose records it writes
    /// from the producer's bytes, so that a large batch is never copied whole.
    ///
    /// The default is two [`write_all_at`](Self::write_all_at)s, which keeps every wrapper's
    /// fault injection in force; the OS file makes it one `pwritev`. Either way a crash can
    /// leave any prefix of the pair on disk, as with one large write.
    fn write_all_pair_at(&self, head: &[u8], tail: &[u8], offset: u64) -> Result<()> {
        self.write_all_at(head, offset)?;
        self.write_all_at(tail, offset + head.len() as u64)
    }

    /// The current length of the file.
    fn len(&self) -> Result<u64>;

    /// Which file this is (see [`FileId`]); `None` if the storage cannot tell, the default.
    fn file_id(&self) -> Result<Option<FileId>> {
        Ok(None)
    }

    /// Whether the file is empty.
    fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Truncates or extends (with zeros) the file to `len` bytes.
    fn set_len(&self, len: u64) -> Result<()>;

    /// Makes the file's data and length durable (`fdatasync`).
    fn sync_data(&self) -> Result<()>;

    /// Makes the file's data and all its metadata durable (`fsync`).
    fn sync_all(&self) -> Result<()>;

    /// Reads exactly `buf.len()` bytes at `offset`, or fails with `UnexpectedEof`.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let mut done = 0;
        while done < buf.len() {
            let n = self.read_at(&mut buf[done..], offset + done as u64)?;
            if n == 0 {
                return Err(Error::io(
                    self.path(),
                    std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        format!(
                            "wanted {} bytes at offset {offset}, file ends after {done}",
                            buf.len()
                        ),
                    ),
                ));
            }
            done += n;
        }
        Ok(())
    }

    /// Reads exactly `len` bytes at `offset` into a new vector, or fails as
    /// [`read_exact_at`](Self::read_exact_at) does. The default zero-fills the vector, then
    /// reads; an implementation may read into the vector's spare capacity instead (zero-filling
    /// took a fifth of the open of a log whose producer snapshot holds 100,000 producers).
    fn read_exact_to_vec(&self, len: usize, offset: u64) -> Result<Vec<u8>> {
        let mut bytes = vec![0u8; len];
        self.read_exact_at(&mut bytes, offset)?;
        Ok(bytes)
    }

    /// Maps the whole file read-only, if the implementation supports it. `Ok(None)` means
    /// "use [`read_at`](Self::read_at)". Only call this on files that are never shrunk while mapped.
    fn map_read(&self) -> Result<Option<ReadMapping>> {
        Ok(None)
    }

    /// Maps the file read-only at a length of at least `reserve` bytes (its own length if that
    /// is larger), as a live view: bytes written to the file later, below the mapping's length,
    /// are read through it. For a file that still grows (the active segment), mapped once at
    /// its largest expected size. The caller touches only bytes the file holds: a page past the
    /// file's end is a SIGBUS. `Ok(None)` (the default) means the implementation has no live
    /// view (a copy would miss later writes): use [`read_at`](Self::read_at).
    fn map_read_reserved(&self, reserve: u64) -> Result<Option<ReadMapping>> {
        let _ = reserve;
        Ok(None)
    }

    /// Tells the implementation how `[offset, offset + len)` will be read (`len` 0: to the end
    /// of the file). A hint only: the default ignores it, and so may any implementation.
    fn advise(&self, offset: u64, len: u64, advice: Advice) -> Result<()> {
        let _ = (offset, len, advice);
        Ok(())
    }

    /// The file's descriptor, for zero-copy transfers (`sendfile`, `copy_file_range`) by
    /// [`transfer_to`]. `None` (the default) means the file has none, and transfers write
    /// bytes the caller read.
    fn as_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }
}

/// Writes `checked` to `out` and returns how many bytes were written, where `checked` holds
/// the bytes of `source`'s file from the given offset on, as the caller read them.
///
/// When there is a source file with a descriptor ([`StorageFile::as_fd`]) the kernel moves the
/// bytes without copying them through user space: `copy_file_range` to a regular file,
/// `sendfile` to anything else (a socket, a pipe). Otherwise, or when the kernel refuses both
/// calls for this pair (`EINVAL`, `ENOSYS`, `EXDEV`, `EOPNOTSUPP`), or when the file ends early,
/// the rest of `checked` is written instead. Writes go to `out`'s current file position; pass a
/// blocking descriptor (a non-blocking one that would block fails with kind `WouldBlock`).
pub fn transfer_to(
    source: Option<(&dyn StorageFile, u64)>,
    checked: &[u8],
    out: BorrowedFd<'_>,
) -> Result<u64> {
    use rustix::io::Errno;
    let path = source.map_or(Path::new(""), |(file, _)| file.path());
    let io_error = |errno: Errno| Error::io(path, std::io::Error::from(errno));
    let mut sent = 0usize;
    if let Some((descriptor, offset)) =
        source.and_then(|(file, offset)| Some((file.as_fd()?, offset)))
    {
        let out_is_file = rustix::fs::fstat(out)
            .map(|stat| rustix::fs::FileType::from_raw_mode(stat.st_mode).is_file())
            .unwrap_or(false);
        let mut use_copy_range = out_is_file;
        while sent < checked.len() {
            let mut position = offset + sent as u64;
            let remaining = checked.len() - sent;
            let result = if use_copy_range {
                rustix::fs::copy_file_range(descriptor, Some(&mut position), out, None, remaining)
            } else {
                rustix::fs::sendfile(out, descriptor, Some(&mut position), remaining)
            };
            match result {
                // The file ended early (truncated meanwhile): write the checked bytes instead.
                Ok(0) => break,
                Ok(n) => sent += n,
                Err(Errno::INTR) => {}
                Err(Errno::INVAL | Errno::NOSYS | Errno::XDEV | Errno::OPNOTSUPP)
                    if use_copy_range =>
                {
                    use_copy_range = false;
                }
                Err(Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP) => break,
                Err(errno) => return Err(io_error(errno)),
            }
        }
    }
    while let Some(rest) = checked.get(sent..).filter(|rest| !rest.is_empty()) {
        match rustix::io::write(out, rest) {
            Ok(0) => {
                return Err(Error::io(
                    path,
                    std::io::Error::new(
                        std::io::ErrorKind::WriteZero,
                        "the output took no more bytes",
                    ),
                ));
            }
            Ok(n) => sent += n,
            Err(Errno::INTR) => {}
            Err(errno) => return Err(io_error(errno)),
        }
    }
    Ok(sent as u64)
}

/// The file system partlog runs on: [`OsStorage`] in production, the seeded crash simulator
/// (`SimStorage`, feature `sim`) in tests. All of partlog's file I/O goes through it.
pub trait Storage: Send + Sync + fmt::Debug + 'static {
    /// Opens (or creates, per `mode`) the file at `path`.
    fn open(&self, path: &Path, mode: OpenMode) -> Result<Arc<dyn StorageFile>>;

    /// Creates a directory and its missing parents.
    fn create_dir_all(&self, path: &Path) -> Result<()>;

    /// Makes the directory's entries (creates, renames, removes) durable.
    fn sync_dir(&self, dir: &Path) -> Result<()>;

    /// Renames `from` to `to`, atomically replacing `to` if it exists.
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;

    /// Makes everything written to the file system that holds `path` durable, as one call:
    /// every file's data and metadata and every directory's entries (Linux `syncfs(2)`). One
    /// such sync stands for the syncs of many logs' files when a [`Workers`](crate::Workers)
    /// pool gathers them ([`Workers::gather_file_system_syncs`](crate::Workers::gather_file_system_syncs)),
    /// at the price of syncing whatever other writers left dirty on that file system too.
    ///
    /// The default fails with [`Error::Unsupported`], as does a storage whose call cannot
    /// report a failed writeback; the logs then sync their files one by one.
    fn sync_file_system(&self, path: &Path) -> Result<()> {
        Err(Error::Unsupported {
            what: format!(
                "this storage cannot sync a whole file system (asked for {})",
                path.display()
            ),
        })
    }

    /// Which file system holds `path`: paths with the same answer, through any storage, are
    /// covered by one [`sync_file_system`](Self::sync_file_system) of either. So two storages
    /// must answer alike only for the same file system (`OsStorage`: the device number;
    /// `SimStorage`: its machine, with the top bit set). Fails with [`Error::Unsupported`] (the
    /// default) when this storage cannot sync a whole file system.
    fn file_system_id(&self, path: &Path) -> Result<u64> {
        Err(Error::Unsupported {
            what: format!(
                "this storage cannot sync a whole file system (asked for {})",
                path.display()
            ),
        })
    }

    /// Removes a file. Open handles to it stay usable until dropped.
    fn remove(&self, path: &Path) -> Result<()>;

    /// The names of the entries in a directory, in no particular order.
    fn list(&self, dir: &Path) -> Result<Vec<String>>;

    /// Metadata of a path; an `Io` error of kind `NotFound` if it does not exist.
    fn metadata(&self, path: &Path) -> Result<Metadata>;

    /// Takes an advisory lock on `path`, creating the file first for [`LockMode::Exclusive`].
    /// Fails at once with [`Error::Locked`] when the lock is held elsewhere; never blocks.
    fn lock(&self, path: &Path, mode: LockMode) -> Result<FileLock>;

    /// Whether `path` exists.
    fn exists(&self, path: &Path) -> Result<bool> {
        match self.metadata(path) {
            Ok(_) => Ok(true),
            Err(e) if e.io_kind() == Some(std::io::ErrorKind::NotFound) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The canonical form of the existing `path` (absolute, with `.`, `..` and symbolic links
    /// resolved), tagged with the file system that resolves it (see [`CanonicalPath`]).
    ///
    /// The default fails with [`Error::Unsupported`]; a log then cannot be opened for writing
    /// inside a Kafka log directory.
    fn canonical_path(&self, path: &Path) -> Result<CanonicalPath> {
        Err(Error::Unsupported {
            what: format!(
                "this storage cannot canonicalize paths (asked for {})",
                path.display()
            ),
        })
    }

    /// Sets the modification time of the file at `path` to `mtime_ms` milliseconds since the Unix
    /// epoch (negative: before it), leaving its access time alone.
    ///
    /// Time retention reads a sealed segment's `.log` mtime as its append time, and the log sets
    /// it at roll from its own clock (so a backup's restore must preserve mtimes). Like any
    /// inode change, the new time is durable only after [`StorageFile::sync_all`] of the file
    /// (`fdatasync` does not persist it).
    ///
    /// The default fails with [`Error::Unsupported`]; the log then leaves the mtime as the file
    /// system set it (the time of the last write, close to the roll).
    fn set_mtime(&self, path: &Path, mtime_ms: i64) -> Result<()> {
        Err(Error::Unsupported {
            what: format!(
                "this storage cannot set modification times (asked for {} at {mtime_ms})",
                path.display()
            ),
        })
    }

    /// Takes an open-file-description write lock (Linux `fcntl(F_OFD_SETLK)`, `F_WRLCK`, the
    /// whole file) on `path`, a file of another program, creating it empty if it is missing.
    ///
    /// This is the lock of the Kafka hand-off (a log opened for writing inside a Kafka log dir
    /// takes it on the log dir's `.lock`): it conflicts with the lock a Kafka broker takes there
    /// (Java's `FileChannel.tryLock`, a classic POSIX record lock: `fcntl(F_SETLK)` on the whole
    /// file, as `strace` shows for OpenJDK 17), with `lockf`, and with any other OFD lock on the
    /// file, including one this process took through another call. Unlike a classic record lock,
    /// closing some other descriptor of the file does not release it. It is not an `flock` lock and
    /// does not conflict with [`lock`](Self::lock). Fails at once with [`Error::Locked`] when
    /// another holder has the file locked; never blocks. Dropping the [`FileLock`] releases it; the
    /// file is never removed.
    ///
    /// A lock on a file that is no longer at `path` guards nothing, and Kafka's broker deletes
    /// `.lock` right after unlocking it at shutdown: an implementation must make sure that `path`
    /// still names the file it locked (the OS one compares device and inode, and retries).
    ///
    /// The default fails with [`Error::Unsupported`].
    fn lock_foreign_ofd(&self, path: &Path) -> Result<FileLock> {
        Err(Error::Unsupported {
            what: format!(
                "this storage cannot take an OFD lock (asked for {})",
                path.display()
            ),
        })
    }
}
