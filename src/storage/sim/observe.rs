//! What tests can see of the simulator: operation counters, the event log, and snapshots of the
//! live and durable file systems.
//!
//! Paths here are always absolute (`/dir/file`), whatever spelling the caller used, and a handle's
//! operations are reported under the path it was opened at, even after a rename.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use super::fault::FaultOp;

/// Counts of the operations that reached the simulated file system.
///
/// Operations refused for a bad argument (a missing file, a dead handle) are not counted;
/// operations failed by an injected fault are.
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Files opened (including the ones created by the open).
    pub opens: u64,
    /// Files created, by `open` or by an exclusive `lock`.
    pub creates: u64,
    /// Directories created by `create_dir_all`.
    pub dirs_created: u64,
    /// `read_at` calls.
    pub reads: u64,
    /// Bytes returned by `read_at`.
    pub read_bytes: u64,
    /// `map_read` calls (each one copies the file).
    pub maps: u64,
    /// `write_all_at` calls.
    pub writes: u64,
    /// Bytes stored by `write_all_at`.
    pub written_bytes: u64,
    /// `set_len` calls.
    pub set_lens: u64,
    /// `sync_data` and `sync_all` calls.
    pub syncs: u64,
    /// `sync_dir` calls.
    pub sync_dirs: u64,
    /// `sync_file_system` calls.
    pub file_system_syncs: u64,
    /// `rename` calls.
    pub renames: u64,
    /// `remove` calls.
    pub removes: u64,
    /// `set_mtime` calls.
    pub set_mtimes: u64,
    /// `advise` calls, of any kind.
    pub advises: u64,
    /// Pages a failed sync had left "clean but not on disk" that an `Advice::DontNeed` dropped
    /// from the simulated page cache, so that reads return what the disk holds.
    pub lost_pages_dropped: u64,
    /// Simulated crashes.
    pub crashes: u64,
    /// Injected faults that fired.
    pub faults: u64,
    /// The same file counters per path (the absolute path each handle was opened at).
    pub per_path: BTreeMap<PathBuf, PathStats>,
}

/// Per-path operation counts, in [`SimStats::per_path`].
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PathStats {
    /// Opens of this path.
    pub opens: u64,
    /// `read_at` calls through handles opened at this path.
    pub reads: u64,
    /// Bytes those reads returned.
    pub read_bytes: u64,
    /// `map_read` calls.
    pub maps: u64,
    /// `write_all_at` calls.
    pub writes: u64,
    /// `sync_data` and `sync_all` calls.
    pub syncs: u64,
    /// `advise` calls, of any kind.
    pub advises: u64,
}

/// One entry of the simulator's event log: the operations that change or persist state, in the
/// order they happened. Reads are only counted (see [`SimStats`]), not logged.
///
/// The log lets a test prove ordering claims, such as "every acknowledged offset was preceded by
/// a sync of its file and, for a new segment, of its directory".
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SimEvent {
    /// A file was created (by `open` or an exclusive `lock`).
    Create {
        /// The new file.
        path: PathBuf,
    },
    /// `create_dir_all` made a directory.
    CreateDir {
        /// The new directory.
        path: PathBuf,
    },
    /// `write_all_at` stored bytes (all of them, or the first `len` of a short write).
    Write {
        /// The path the handle was opened at.
        path: PathBuf,
        /// Where the write started.
        offset: u64,
        /// How many bytes it stored.
        len: u64,
    },
    /// `set_len` changed a file's length.
    SetLen {
        /// The path the handle was opened at.
        path: PathBuf,
        /// The new length.
        len: u64,
    },
    /// `sync_data` (`data_only`) or `sync_all` succeeded: the file's data and length are durable.
    Sync {
        /// The path the handle was opened at.
        path: PathBuf,
        /// True for `sync_data`.
        data_only: bool,
    },
    /// `sync_dir` succeeded: the directory's entries are durable.
    SyncDir {
        /// The directory.
        path: PathBuf,
    },
    /// `sync_file_system` succeeded: every file and directory is durable.
    SyncFileSystem {
        /// The path it was asked for.
        path: PathBuf,
    },
    /// `rename` succeeded.
    Rename {
        /// The old name.
        from: PathBuf,
        /// The new name.
        to: PathBuf,
    },
    /// `remove` succeeded.
    Remove {
        /// The removed name.
        path: PathBuf,
    },
    /// `set_mtime` set a file's modification time (durable only after a `sync_all` of it).
    SetMtime {
        /// The file's name.
        path: PathBuf,
        /// The new modification time, in milliseconds since the Unix epoch.
        mtime_ms: i64,
    },
    /// An injected fault fired on an operation, which did not happen (or, for a short write,
    /// happened in part: a `Write` event for the stored prefix follows this one).
    Fault {
        /// The kind of operation that failed.
        op: FaultOp,
        /// The path it was on.
        path: PathBuf,
    },
    /// The machine crashed; `seed` reproduces the crash image with `CrashConfig::seed`.
    Crash {
        /// The seed the crash drew its choices from.
        seed: u64,
    },
}

/// The files and directories of one image of the file system, with their contents.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimSnapshot {
    /// Every directory, the root included.
    pub dirs: BTreeSet<PathBuf>,
    /// Every file and its bytes.
    pub files: BTreeMap<PathBuf, Vec<u8>>,
}

/// The live and durable state of one file, from `SimStorage::file_state`.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimFileState {
    /// What a read returns now.
    pub current: Vec<u8>,
    /// What the last successful sync made durable (empty if it was never synced).
    pub synced: Vec<u8>,
    /// Writes and length changes since that sync.
    pub unsynced_ops: usize,
    /// Pages whose bytes in `current` a failed sync never wrote: reads return them, the disk
    /// does not hold them, until an `Advice::DontNeed` or a crash drops them.
    pub lost_pages: usize,
    /// Whether the file is reachable under this path in the durable directory entries, that is,
    /// whether its name survives a crash that loses every unsynced directory operation.
    ///
    /// Not that it survives every crash: a crash keeps a prefix of each directory's unsynced
    /// operations, and one of those may have moved the name away. A durable name renamed to
    /// another and back is durable here, yet a crash between the two renames' journal commits
    /// shows the file under the other name only. A name is safe from every crash once its
    /// directory, and every directory above it, has been synced since its last change.
    pub name_durable: bool,
}
