//! Kafka's leader-epoch cache (`LeaderEpochFileCache`) and its file `leader-epoch-checkpoint`:
//! which leader epoch started at which offset, the answer a leader gives a
//! follower that asks where its log diverges (OffsetsForLeaderEpoch).
//!
//! The cache holds entries `(epoch, start_offset)` whose epochs and start offsets both strictly
//! increase. Every change is written to the file before the call returns (temporary file, fsync,
//! rename, directory fsync), so the file on disk never lags what a caller was told. Kafka writes
//! the file synchronously on `assign` and asynchronously on truncation (its loader fixes a stale
//! file); partlog writes synchronously each time, which costs one small file write per epoch
//! change or truncation and never leaves an entry on disk that the log no longer holds.
//!
//! The file is derived data: a broker and partlog both rebuild it from the batches'
//! `partitionLeaderEpoch` when it does not parse. [`read_checkpoint`] therefore returns a typed
//! [`Error::Corrupt`] for a bad file, and the log's open logs it and rebuilds the cache in memory
//! (`epoch_load.rs`), then writes it once.
//!
//! How the log layer calls it (the replication hooks, the load at open, and the append,
//! truncation and retention paths):
//! - every appended v2 batch with `partitionLeaderEpoch ≥ 0` calls [`LeaderEpochFileCache::assign`]
//!   with its base offset, before its write; `become_leader` assigns its epoch at the log end;
//! - `truncate_to(n)` calls [`LeaderEpochFileCache::truncate_from_end`] with the new end inside
//!   its durable sequence, and moving the log start to `s` calls
//!   [`LeaderEpochFileCache::truncate_from_start`]`(s)`; `truncate_fully_and_start_at` calls
//!   [`LeaderEpochFileCache::clear`];
//! - at load, after recovery: the scanned batches' epochs under Kafka's recovery rule, then
//!   `truncate_from_end(LEO)` and `truncate_from_start(log start)`; a rebuild replays the
//!   append rules, where a legacy (magic 0/1) message clears the cache.

// FORMAT.md §12 is the file's layout; ARCHITECTURE.md §11 the hooks that call the cache.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Corruption, Error, Result};
use crate::storage::{OpenMode, Storage};

use crate::storage::replace_file_durably;

/// The file name of the cache in a partition directory, Kafka's `LeaderEpochCheckpointFile`.
pub const LEADER_EPOCH_CHECKPOINT_FILE_NAME: &str = "leader-epoch-checkpoint";

/// The temporary name a new file is written under before its rename; Kafka's own
/// (`CheckpointFile` appends `.tmp`), so a broker taking the directory over knows it.
pub const LEADER_EPOCH_CHECKPOINT_TEMP_NAME: &str = "leader-epoch-checkpoint.tmp";

/// The only version of the file's text format.
pub const LEADER_EPOCH_CHECKPOINT_VERSION: i32 = 0;

/// Kafka's `UNDEFINED_EPOCH`: no epoch (a bare log stamps it, and `end_offset_for` answers it).
pub const UNDEFINED_EPOCH: i32 = -1;

/// Kafka's `UNDEFINED_EPOCH_OFFSET`: no offset.
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;

/// One entry of the cache: leader epoch `epoch` wrote its first batch at `start_offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EpochEntry {
    /// The leader epoch (≥ 0).
    pub epoch: i32,
    /// The base offset of the first batch that epoch wrote (≥ 0).
    pub start_offset: i64,
}

impl EpochEntry {
    /// An entry; no check (the cache and the parser check).
    pub fn new(epoch: i32, start_offset: i64) -> Self {
        EpochEntry {
            epoch,
            start_offset,
        }
    }
}

impl fmt::Display for EpochEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.epoch, self.start_offset)
    }
}

/// The file's bytes for `entries`: `0\n<N>\n` then one `<epoch> <startOffset>\n` per entry.
pub fn encode_checkpoint(entries: &[EpochEntry]) -> Vec<u8> {
    let mut text = format!("{LEADER_EPOCH_CHECKPOINT_VERSION}\n{}\n", entries.len());
    for entry in entries {
        text.push_str(&format!("{entry}\n"));
    }
    text.into_bytes()
}

/// Parses the file's bytes (`file` names it in errors). Every problem is an [`Error::Corrupt`]
/// at the byte where the bad line starts: a version other than 0 or a missing or non-numeric
/// count ([`Corruption::BadHeader`]), a count that differs from the lines present
/// ([`Corruption::RecordCount`], `found` −1 when lines remain), an entry that is not two
/// non-negative numbers ([`Corruption::BadRecord`]), and entries whose epochs or start offsets
/// do not strictly increase ([`Corruption::BadRecord`] and [`Corruption::OffsetOrder`]).
pub fn parse_checkpoint(file: &Path, bytes: &[u8]) -> Result<Vec<EpochEntry>> {
    let corrupt = |position: usize, what: Corruption| Error::Corrupt {
        file: file.to_path_buf(),
        position: position as u64,
        what,
    };
    let text = std::str::from_utf8(bytes).map_err(|error| {
        corrupt(
            error.valid_up_to(),
            Corruption::BadRecord("the leader-epoch-checkpoint is not text"),
        )
    })?;
    // Lines with the byte position each starts at; `\r\n` ends a line too, as Java's readLine.
    let mut lines = text
        .split_inclusive('\n')
        .scan(0usize, |position, line| {
            let start = *position;
            *position += line.len();
            let line = line.strip_suffix('\n').unwrap_or(line);
            Some((start, line.strip_suffix('\r').unwrap_or(line)))
        })
        .peekable();

    let (_, version) = lines.next().ok_or_else(|| {
        corrupt(
            0,
            Corruption::BadHeader("the leader-epoch-checkpoint is empty"),
        )
    })?;
    if version.parse::<i32>() != Ok(LEADER_EPOCH_CHECKPOINT_VERSION) {
        return Err(corrupt(
            0,
            Corruption::BadHeader("the leader-epoch-checkpoint's version is not 0"),
        ));
    }
    let (count_at, count) = lines.next().ok_or_else(|| {
        corrupt(
            text.len(),
            Corruption::BadHeader("the leader-epoch-checkpoint has no entry count"),
        )
    })?;
    let declared = count
        .parse::<i32>()
        .ok()
        .filter(|n| *n >= 0)
        .ok_or_else(|| {
            corrupt(
                count_at,
                Corruption::BadHeader(
                    "the leader-epoch-checkpoint's entry count is not a number ≥ 0",
                ),
            )
        })?;

    let mut entries: Vec<EpochEntry> = Vec::new();
    for _ in 0..declared {
        let Some((at, line)) = lines.next() else {
            return Err(corrupt(
                text.len(),
                Corruption::RecordCount {
                    declared,
                    found: entries.len() as i64,
                },
            ));
        };
        let entry = parse_entry(line).ok_or_else(|| {
            corrupt(
                at,
                Corruption::BadRecord(
                    "a leader-epoch-checkpoint entry is not `<epoch> <startOffset>` with both ≥ 0",
                ),
            )
        })?;
        if let Some(previous) = entries.last() {
            if entry.epoch <= previous.epoch {
                return Err(corrupt(
                    at,
                    Corruption::BadRecord("leader-epoch-checkpoint epochs do not increase"),
                ));
            }
            if entry.start_offset <= previous.start_offset {
                return Err(corrupt(
                    at,
                    Corruption::OffsetOrder {
                        offset: entry.start_offset,
                        bound: previous.start_offset,
                    },
                ));
            }
        }
        entries.push(entry);
    }
    if let Some((at, _)) = lines.next() {
        return Err(corrupt(
            at,
            Corruption::RecordCount {
                declared,
                found: -1,
            },
        ));
    }
    Ok(entries)
}

/// `<epoch> <startOffset>`, separated by white space as Kafka's `\s+` split, both ≥ 0.
fn parse_entry(line: &str) -> Option<EpochEntry> {
    let mut fields = line.split_whitespace();
    let epoch = fields.next()?.parse::<i32>().ok()?;
    let start_offset = fields.next()?.parse::<i64>().ok()?;
    if fields.next().is_some() || epoch < 0 || start_offset < 0 {
        return None;
    }
    Some(EpochEntry::new(epoch, start_offset))
}

/// Reads `dir/leader-epoch-checkpoint`: `None` when there is no such file, the entries when it
/// parses, and [`parse_checkpoint`]'s error when it does not.
pub fn read_checkpoint(storage: &dyn Storage, dir: &Path) -> Result<Option<Vec<EpochEntry>>> {
    let path = dir.join(LEADER_EPOCH_CHECKPOINT_FILE_NAME);
    if !storage.exists(&path)? {
        return Ok(None);
    }
    let file = storage.open(&path, OpenMode::Read)?;
    let len = usize::try_from(file.len()?).map_err(|_| Error::Corrupt {
        file: path.clone(),
        position: 0,
        what: Corruption::BadHeader("the leader-epoch-checkpoint is larger than memory"),
    })?;
    let mut bytes = vec![0; len];
    file.read_exact_at(&mut bytes, 0)?;
    parse_checkpoint(&path, &bytes).map(Some)
}

/// Writes `entries` as `dir/leader-epoch-checkpoint`, durable on return; a crash leaves the old
/// file or the new one.
pub fn write_checkpoint(storage: &dyn Storage, dir: &Path, entries: &[EpochEntry]) -> Result<()> {
    replace_file_durably(
        storage,
        dir,
        LEADER_EPOCH_CHECKPOINT_TEMP_NAME,
        LEADER_EPOCH_CHECKPOINT_FILE_NAME,
        &encode_checkpoint(entries),
    )
}

/// Where a cache writes its file; `None` for a detached cache.
struct CheckpointLocation {
    storage: Arc<dyn Storage>,
    dir: PathBuf,
}

/// Kafka's `LeaderEpochFileCache`: the leader epochs of a partition and the offset each started
/// at, strictly increasing in both, with the file written before each change returns.
pub struct LeaderEpochFileCache {
    location: Option<CheckpointLocation>,
    entries: Vec<EpochEntry>,
}

impl fmt::Debug for LeaderEpochFileCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaderEpochFileCache")
            .field("dir", &self.location.as_ref().map(|at| &at.dir))
            .field("entries", &self.entries)
            .finish()
    }
}

impl LeaderEpochFileCache {
    /// The cache of the partition in `dir`, from its `leader-epoch-checkpoint` (empty when there
    /// is none). A file that does not parse is [`read_checkpoint`]'s typed error: the caller
    /// rebuilds with [`LeaderEpochFileCache::empty`] and the batches' epochs.
    pub fn load(storage: Arc<dyn Storage>, dir: &Path) -> Result<Self> {
        let entries = read_checkpoint(&*storage, dir)?.unwrap_or_default();
        Ok(LeaderEpochFileCache {
            location: Some(CheckpointLocation {
                storage,
                dir: dir.to_path_buf(),
            }),
            entries,
        })
    }

    /// An empty cache that writes `dir/leader-epoch-checkpoint` at its first change (the file on
    /// disk is not touched before that).
    pub fn empty(storage: Arc<dyn Storage>, dir: &Path) -> Self {
        LeaderEpochFileCache {
            location: Some(CheckpointLocation {
                storage,
                dir: dir.to_path_buf(),
            }),
            entries: Vec::new(),
        }
    }

    /// An empty cache that never writes a file: a read-only log's in-memory rebuild.
    pub fn detached() -> Self {
        LeaderEpochFileCache {
            location: None,
            entries: Vec::new(),
        }
    }

    /// A cache holding `entries` (already checked, as [`parse_checkpoint`] returns them) that
    /// writes no file until [`attach`](Self::attach): the log's open builds the cache in memory
    /// and writes it once.
    pub(crate) fn detached_with(entries: Vec<EpochEntry>) -> Self {
        LeaderEpochFileCache {
            location: None,
            entries,
        }
    }

    /// From now on every change writes `dir/leader-epoch-checkpoint`; the file is not written
    /// here.
    pub(crate) fn attach(&mut self, storage: Arc<dyn Storage>, dir: &Path) {
        self.location = Some(CheckpointLocation {
            storage,
            dir: dir.to_path_buf(),
        });
    }

    /// Writes the entries to the file now (a rebuilt or load-corrected cache); nothing for a
    /// detached cache.
    pub(crate) fn flush(&self) -> Result<()> {
        match &self.location {
            Some(location) => write_checkpoint(&*location.storage, &location.dir, &self.entries),
            None => Ok(()),
        }
    }

    /// Kafka's rule for a batch that recovery scanned (`LogSegment.recover`): its epoch is
    /// assigned only when above the latest one. Negative epochs are ignored.
    pub(crate) fn assign_recovered(&mut self, epoch: i32, start_offset: i64) -> Result<bool> {
        if epoch < 0 || self.latest_epoch().is_some_and(|latest| epoch <= latest) {
            return Ok(false);
        }
        self.assign(epoch, start_offset)
    }

    /// Moves the first entry's start down to `start_offset`, when it starts above it: the log
    /// start came back down into that epoch's batch (the open's repair after a crash inside a
    /// truncation; see `epoch_load.rs`).
    pub(crate) fn lower_first_start(&mut self, start_offset: i64) -> Result<()> {
        let Some(first) = self.earliest_entry() else {
            return Ok(());
        };
        if start_offset < 0 || first.start_offset <= start_offset {
            return Ok(());
        }
        let mut entries = self.entries.clone();
        entries[0] = EpochEntry::new(first.epoch, start_offset);
        self.replace(entries)
    }

    /// The entries, oldest first.
    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// The latest epoch, if any.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|entry| entry.epoch)
    }

    /// The latest entry, if any.
    pub fn latest_entry(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    /// The oldest entry, if any.
    pub fn earliest_entry(&self) -> Option<EpochEntry> {
        self.entries.first().copied()
    }

    /// Records that `epoch` starts at `start_offset`, Kafka's rule: an entry is added only when
    /// `epoch` differs from the latest entry's or `start_offset` is below the latest start;
    /// adding first removes every entry with an epoch ≥ `epoch` or a start ≥ `start_offset`.
    /// Returns whether the cache changed (and the file was rewritten). A negative epoch or offset
    /// is [`Error::InvalidArgument`]; on an I/O error the cache keeps its old entries.
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> Result<bool> {
        if epoch < 0 || start_offset < 0 {
            return Err(Error::InvalidArgument {
                why: format!(
                    "a leader epoch entry needs an epoch and a start offset ≥ 0, got epoch {epoch} at offset {start_offset}"
                ),
            });
        }
        let update_needed = self
            .latest_entry()
            .is_none_or(|latest| epoch != latest.epoch || start_offset < latest.start_offset);
        if !update_needed {
            return Ok(false);
        }
        let mut entries = self.entries.clone();
        let kept = entries
            .iter()
            .take_while(|entry| entry.epoch < epoch && entry.start_offset < start_offset)
            .count();
        let removed = entries.split_off(kept);
        let new_entry = EpochEntry::new(epoch, start_offset);
        entries.push(new_entry);
        self.replace(entries)?;
        // An entry replaced at its own start offset had no data: a re-election before any write.
        // Anything else drops epochs that wrote records, which Kafka reports the same way.
        if removed.len() > 1
            || removed
                .first()
                .is_some_and(|r| r.start_offset != start_offset)
        {
            log::warn!(
                "new leader epoch entry {new_entry} caused truncation of conflicting entries {removed:?}"
            );
        }
        Ok(true)
    }

    /// Kafka's `endOffsetFor`: for a follower whose latest epoch is `epoch`, the largest epoch
    /// ≤ it and the offset where the next higher epoch starts (`log_end_offset` for the latest
    /// epoch), or `(epoch, first start)` when every epoch is above it; `(−1, −1)` for
    /// [`UNDEFINED_EPOCH`] or when no epoch is above `epoch` and it is not the latest.
    pub fn end_offset_for(&self, epoch: i32, log_end_offset: i64) -> (i32, i64) {
        const UNDEFINED: (i32, i64) = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        if epoch == UNDEFINED_EPOCH {
            return UNDEFINED;
        }
        if self.latest_epoch() == Some(epoch) {
            return (epoch, log_end_offset);
        }
        let Some(higher) = self.entries.iter().find(|entry| entry.epoch > epoch) else {
            return UNDEFINED;
        };
        match self.entries.iter().rev().find(|entry| entry.epoch <= epoch) {
            Some(floor) => (floor.epoch, higher.start_offset),
            None => (epoch, higher.start_offset),
        }
    }

    /// The epoch that wrote `offset`: the epoch of the last entry starting at or before it;
    /// `None` when the offset is before the first entry (or the cache is empty).
    pub fn epoch_for_offset(&self, offset: i64) -> Option<i32> {
        self.entries
            .iter()
            .take_while(|entry| entry.start_offset <= offset)
            .last()
            .map(|entry| entry.epoch)
    }

    /// Removes every entry that starts at or after `end_offset` (the log was truncated to it).
    /// A negative `end_offset` changes nothing, as in Kafka.
    pub fn truncate_from_end(&mut self, end_offset: i64) -> Result<()> {
        if end_offset < 0
            || self
                .latest_entry()
                .is_none_or(|latest| latest.start_offset < end_offset)
        {
            return Ok(());
        }
        let entries = self
            .entries
            .iter()
            .copied()
            .filter(|entry| entry.start_offset < end_offset)
            .collect();
        self.replace(entries)
    }

    /// The log now starts at `start_offset`: entries starting at or before it are dropped, and
    /// the last of them comes back starting at `start_offset`, since its epoch wrote the
    /// offsets from there until the next entry.
    pub fn truncate_from_start(&mut self, start_offset: i64) -> Result<()> {
        let below = self
            .entries
            .iter()
            .take_while(|entry| entry.start_offset <= start_offset)
            .count();
        if below == 0 {
            return Ok(());
        }
        let last_below = self.entries[below - 1];
        if below == 1 && last_below.start_offset == start_offset {
            return Ok(());
        }
        let mut entries = Vec::with_capacity(self.entries.len() - below + 1);
        entries.push(EpochEntry::new(last_below.epoch, start_offset));
        entries.extend_from_slice(&self.entries[below..]);
        self.replace(entries)
    }

    /// Removes every entry (a legacy batch was appended, or the log restarts at a new offset).
    pub fn clear(&mut self) -> Result<()> {
        if self.entries.is_empty() {
            return Ok(());
        }
        self.replace(Vec::new())
    }

    /// Writes `entries` durably, then makes them the cache's; on an error nothing changes.
    fn replace(&mut self, entries: Vec<EpochEntry>) -> Result<()> {
        if let Some(location) = &self.location {
            write_checkpoint(&*location.storage, &location.dir, &entries)?;
        }
        self.entries = entries;
        Ok(())
    }
}
