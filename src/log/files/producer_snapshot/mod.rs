//! Kafka's producer-state snapshot file, `<20-digit offset>.snapshot` (`ProducerSnapshot` v1),
//! and the list of those files in a partition directory.
//!
//! The file holds, per producer id, the newest batch the log has of it, so that an open need not
//! replay the whole log to rebuild the producer state: it loads the newest snapshot at or below
//! the offset it recovers from and replays only what follows. The name's offset is the log end
//! offset the state covers (the replay starts there).
//!
//! Layout, big-endian: `i16 version (1) | u32 CRC-32C of bytes [6, end) | i32 count |` count ×
//! 46-byte entries. Kafka writes the entries in `HashMap` order and reads any order; partlog
//! writes them in the order given (the manager sorts them by producer id) and reads any order.
//!
//! A snapshot is derived data: a bad one is reported as [`Error::Corrupt`] and the caller
//! deletes it and falls back to an older one, never trusting a torn file. Writes are durable
//! and atomic (a temporary file, fsynced, renamed, then the directory fsynced), so a crash
//! leaves either no snapshot at that offset or a whole one.

// FORMAT.md §9 is the file's byte layout; ARCHITECTURE.md §9 how the log uses it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Corruption, Error, Result};
use crate::format::{crc32c, crc32c_append};
use crate::storage::{OpenMode, Storage};

/// The suffix of a producer-state snapshot file.
pub const SNAPSHOT_SUFFIX: &str = ".snapshot";
/// The suffix of a snapshot being written, before its rename. Not Kafka's: Kafka writes the
/// final name directly and trusts its CRC to catch a torn file; partlog never exposes one.
const SNAPSHOT_TEMP_SUFFIX: &str = ".snapshot.tmp";
/// The only `ProducerSnapshot` version Kafka has written since 0.11.
pub const PRODUCER_SNAPSHOT_VERSION: i16 = 1;
/// The bytes before the first entry: version, CRC and count.
pub const SNAPSHOT_HEADER_BYTES: usize = 10;
/// Where the CRC's coverage starts: the count, then the entries.
const CRC_COVERAGE_START: usize = 6;
/// The bytes of one entry.
pub const SNAPSHOT_ENTRY_BYTES: usize = 46;

/// One producer's entry in a snapshot: its epoch, its newest batch and its transaction state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SnapshotEntry {
    /// The producer id.
    pub producer_id: i64,
    /// The producer's current epoch.
    pub producer_epoch: i16,
    /// The last sequence of the producer's newest batch (-1 when it has none, after a marker).
    pub last_sequence: i32,
    /// The last offset of the producer's newest batch.
    pub last_offset: i64,
    /// That batch's `lastOffsetDelta`: its first offset is `last_offset - offset_delta`.
    pub offset_delta: i32,
    /// The producer's last timestamp (a marker updates it); expiration reads it.
    pub timestamp: i64,
    /// The coordinator epoch of the producer's last marker (-1 when none).
    pub coordinator_epoch: i32,
    /// The first offset of the producer's open transaction, -1 when none is open.
    pub current_txn_first_offset: i64,
}

impl SnapshotEntry {
    /// The first sequence of the newest batch, as Kafka derives it: `last_sequence -
    /// offset_delta`, wrapping below 0 to just under `i32::MAX + 1` (sequences wrap to 0 after
    /// `i32::MAX`).
    pub fn first_sequence(&self) -> i32 {
        let (last, delta) = (i64::from(self.last_sequence), i64::from(self.offset_delta));
        if last < delta {
            // The batch's sequences wrapped: its first one lies below i32::MAX.
            i32::try_from(i64::from(i32::MAX) - (delta - last) + 1).unwrap_or(i32::MAX)
        } else {
            i32::try_from(last - delta).unwrap_or(0)
        }
    }

    /// The current transaction's first offset, `None` when the producer has none open.
    pub fn open_transaction(&self) -> Option<i64> {
        (self.current_txn_first_offset >= 0).then_some(self.current_txn_first_offset)
    }

    fn encode_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.producer_id.to_be_bytes());
        out.extend_from_slice(&self.producer_epoch.to_be_bytes());
        out.extend_from_slice(&self.last_sequence.to_be_bytes());
        out.extend_from_slice(&self.last_offset.to_be_bytes());
        out.extend_from_slice(&self.offset_delta.to_be_bytes());
        out.extend_from_slice(&self.timestamp.to_be_bytes());
        out.extend_from_slice(&self.coordinator_epoch.to_be_bytes());
        out.extend_from_slice(&self.current_txn_first_offset.to_be_bytes());
    }

    fn decode(bytes: &[u8; SNAPSHOT_ENTRY_BYTES]) -> SnapshotEntry {
        let mut fields = Fields { bytes, at: 0 };
        SnapshotEntry {
            producer_id: i64::from_be_bytes(fields.take()),
            producer_epoch: i16::from_be_bytes(fields.take()),
            last_sequence: i32::from_be_bytes(fields.take()),
            last_offset: i64::from_be_bytes(fields.take()),
            offset_delta: i32::from_be_bytes(fields.take()),
            timestamp: i64::from_be_bytes(fields.take()),
            coordinator_epoch: i32::from_be_bytes(fields.take()),
            current_txn_first_offset: i64::from_be_bytes(fields.take()),
        }
    }
}

/// Reads consecutive fixed-size fields of one entry, whose length the caller has checked.
struct Fields<'a> {
    bytes: &'a [u8; SNAPSHOT_ENTRY_BYTES],
    at: usize,
}

impl Fields<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut field = [0u8; N];
        // The entry layout sums to SNAPSHOT_ENTRY_BYTES, so every field is in range; the
        // zero fallback is never reached.
        if let Some(bytes) = self.bytes.get(self.at..self.at + N) {
            field.copy_from_slice(bytes);
        }
        self.at += N;
        field
    }
}

/// The bytes of a snapshot holding `entries`, in the order given.
pub fn encode_snapshot(entries: &[SnapshotEntry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(SNAPSHOT_HEADER_BYTES + entries.len() * SNAPSHOT_ENTRY_BYTES);
    out.extend_from_slice(&PRODUCER_SNAPSHOT_VERSION.to_be_bytes());
    out.extend_from_slice(&[0u8; 4]);
    // More entries than i32::MAX would need a 98 GiB file: there are never that many producers.
    let count = i32::try_from(entries.len()).unwrap_or(i32::MAX);
    out.extend_from_slice(&count.to_be_bytes());
    for entry in entries {
        entry.encode_into(&mut out);
    }
    let crc = crc32c(&out[CRC_COVERAGE_START..]);
    out[2..CRC_COVERAGE_START].copy_from_slice(&crc.to_be_bytes());
    out
}

/// Decodes the bytes of a snapshot read from `file` (named in errors), checking, in Kafka's
/// order, the length of the header, the version and the CRC, then that the count matches the
/// bytes exactly.
///
/// Every failure is [`Error::Corrupt`] with the position of the bad field: an empty or short
/// file [`Corruption::Truncated`], another version [`Corruption::BadHeader`], a CRC mismatch
/// [`Corruption::CrcMismatch`], and a count that disagrees with the length (negative, too large,
/// or with bytes left over) [`Corruption::RecordCount`]. Kafka ignores bytes after the counted
/// entries; partlog writes none and so refuses them.
pub fn decode_snapshot(file: &Path, bytes: &[u8]) -> Result<Vec<SnapshotEntry>> {
    check_snapshot_bytes(file, bytes)?;
    Ok(entries_of(bytes).collect())
}

/// The checks of [`decode_snapshot`], without decoding an entry. Returns whether any entry
/// has an open transaction (a current transaction first offset at or above 0), learned in the
/// CRC's pass: the entries are checksummed a block at a time, and each block's sign bits read
/// while it is in the cache, so that an open whose snapshot holds no open transaction need not
/// read the entries again.
fn check_snapshot_bytes(file: &Path, bytes: &[u8]) -> Result<bool> {
    let corrupt = |position: u64, what: Corruption| Error::Corrupt {
        file: file.to_path_buf(),
        position,
        what,
    };
    let Some(header) = bytes.get(..SNAPSHOT_HEADER_BYTES) else {
        return Err(corrupt(
            0,
            Corruption::Truncated {
                needed: SNAPSHOT_HEADER_BYTES as u64,
                available: bytes.len() as u64,
            },
        ));
    };
    let version = i16::from_be_bytes([header[0], header[1]]);
    if version != PRODUCER_SNAPSHOT_VERSION {
        return Err(corrupt(
            0,
            Corruption::BadHeader("the producer snapshot's version is not 1"),
        ));
    }
    let stored = u32::from_be_bytes([header[2], header[3], header[4], header[5]]);
    let mut computed = crc32c(&bytes[CRC_COVERAGE_START..SNAPSHOT_HEADER_BYTES]);
    let mut open_transaction = false;
    for block in bytes[SNAPSHOT_HEADER_BYTES..].chunks(CHECK_BLOCK_ENTRIES * SNAPSHOT_ENTRY_BYTES) {
        computed = crc32c_append(computed, block);
        open_transaction |= block
            .chunks_exact(SNAPSHOT_ENTRY_BYTES)
            .any(|entry| entry[CURRENT_TXN_FIRST_OFFSET_AT] & 0x80 == 0);
    }
    if stored != computed {
        return Err(corrupt(2, Corruption::CrcMismatch { stored, computed }));
    }
    let declared = i32::from_be_bytes([header[6], header[7], header[8], header[9]]);
    let body = &bytes[SNAPSHOT_HEADER_BYTES..];
    let found = body.len() / SNAPSHOT_ENTRY_BYTES;
    let exact = body.len().is_multiple_of(SNAPSHOT_ENTRY_BYTES);
    if declared < 0 || !exact || usize::try_from(declared).ok() != Some(found) {
        return Err(corrupt(
            CRC_COVERAGE_START as u64,
            Corruption::RecordCount {
                declared,
                found: if exact { found as i64 } else { -1 },
            },
        ));
    }
    Ok(open_transaction)
}

/// Entries checksummed at a time by [`check_snapshot_bytes`]: 46 KiB, well inside a core's
/// L2 cache.
const CHECK_BLOCK_ENTRIES: usize = 1024;

/// The entries of snapshot bytes, decoded one by one (after the entries' header; a partial
/// entry at the end is not one).
fn entries_of(bytes: &[u8]) -> impl ExactSizeIterator<Item = SnapshotEntry> + '_ {
    bytes
        .get(SNAPSHOT_HEADER_BYTES..)
        .unwrap_or_default()
        .chunks_exact(SNAPSHOT_ENTRY_BYTES)
        .map(|chunk| {
            let mut entry = [0u8; SNAPSHOT_ENTRY_BYTES];
            entry.copy_from_slice(chunk);
            SnapshotEntry::decode(&entry)
        })
}

/// The bytes of a snapshot file that passed every check of [`decode_snapshot`]: its entries
/// decode on demand, so a caller can check a snapshot at once and build its state later. An
/// open of a log whose snapshot holds 100,000 producers checks it in about the time of reading
/// it, and the producer table is built on its first use.
// ARCHITECTURE.md §9.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedSnapshot {
    /// Shared: the log's producer state holds them until its table is built, and a clone of
    /// that state copies nothing.
    bytes: Arc<Vec<u8>>,
    /// Whether any entry has an open transaction.
    open_transaction: bool,
}

impl CheckedSnapshot {
    /// Checks `bytes` as [`decode_snapshot`] does; `file` names the snapshot in the error.
    pub fn check(file: &Path, bytes: Vec<u8>) -> Result<CheckedSnapshot> {
        let open_transaction = check_snapshot_bytes(file, &bytes)?;
        Ok(CheckedSnapshot {
            bytes: Arc::new(bytes),
            open_transaction,
        })
    }

    /// Whether any entry has an open transaction (a current transaction first offset at or
    /// above 0), expired or not. Without one the log has no open transaction to load.
    pub fn has_open_transaction(&self) -> bool {
        self.open_transaction
    }

    /// How many entries it holds.
    pub fn len(&self) -> usize {
        self.bytes.len().saturating_sub(SNAPSHOT_HEADER_BYTES) / SNAPSHOT_ENTRY_BYTES
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Its entries, in file order.
    pub fn entries(&self) -> impl ExactSizeIterator<Item = SnapshotEntry> + '_ {
        entries_of(&self.bytes)
    }

    /// What an open needs of each entry at once, in file order, read without decoding the
    /// rest: the producer id, its last timestamp and its open transaction's first offset (-1
    /// when none). The open's scan for open transactions reads these three of 46 bytes.
    pub(crate) fn transaction_fields(&self) -> impl Iterator<Item = (i64, i64, i64)> + '_ {
        let field = |entry: &[u8], at: usize| {
            entry
                .get(at..at + 8)
                .and_then(|bytes| <[u8; 8]>::try_from(bytes).ok())
                .map_or(-1, i64::from_be_bytes)
        };
        self.bytes
            .get(SNAPSHOT_HEADER_BYTES..)
            .unwrap_or_default()
            .chunks_exact(SNAPSHOT_ENTRY_BYTES)
            .map(move |entry| {
                (
                    field(entry, PRODUCER_ID_AT),
                    field(entry, TIMESTAMP_AT),
                    field(entry, CURRENT_TXN_FIRST_OFFSET_AT),
                )
            })
    }
}

/// Where an entry's fields start (Kafka's snapshot v1 layout, FORMAT.md): producer id (i64),
/// epoch (i16), last sequence (i32), last offset (i64), offset delta (i32), timestamp (i64),
/// coordinator epoch (i32), current transaction's first offset (i64).
const PRODUCER_ID_AT: usize = 0;
const TIMESTAMP_AT: usize = 8 + 2 + 4 + 8 + 4;
const CURRENT_TXN_FIRST_OFFSET_AT: usize = TIMESTAMP_AT + 8 + 4;
const _: () = assert!(CURRENT_TXN_FIRST_OFFSET_AT + 8 == SNAPSHOT_ENTRY_BYTES);

/// The name of the snapshot at `offset`: `format!("{offset:020}.snapshot")`.
pub fn snapshot_file_name(offset: i64) -> String {
    format!("{offset:020}{SNAPSHOT_SUFFIX}")
}

/// The path of the snapshot at `offset` in `dir`.
pub fn snapshot_path(dir: &Path, offset: i64) -> PathBuf {
    dir.join(snapshot_file_name(offset))
}

/// The offset a snapshot file name encodes, or `None` for any other name (a `.deleted` or
/// temporary snapshot, a segment file). Like segment names, exactly 20 digits.
pub fn parse_snapshot_file_name(name: &str) -> Option<i64> {
    let digits = name.strip_suffix(SNAPSHOT_SUFFIX)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Reads and decodes the snapshot at `path` (see [`decode_snapshot`]).
pub fn read_snapshot(storage: &dyn Storage, path: &Path) -> Result<Vec<SnapshotEntry>> {
    Ok(read_checked_snapshot(storage, path)?.entries().collect())
}

/// Reads and checks the snapshot at `path`, decoding no entry (see [`CheckedSnapshot`]).
pub fn read_checked_snapshot(storage: &dyn Storage, path: &Path) -> Result<CheckedSnapshot> {
    let file = storage.open(path, OpenMode::Read)?;
    let len = usize::try_from(file.len()?).map_err(|_| Error::Corrupt {
        file: path.to_path_buf(),
        position: 0,
        what: Corruption::BadHeader("the producer snapshot is larger than memory"),
    })?;
    let bytes = file.read_exact_to_vec(len, 0)?;
    CheckedSnapshot::check(path, bytes)
}

/// Writes the snapshot of `entries` at `offset` in `dir` durably and atomically: the bytes go to
/// a temporary file, which is fsynced and renamed over `<offset>.snapshot`, then the directory
/// is fsynced. On an error the temporary file is removed (best effort) and any snapshot already
/// at that name is untouched unless the rename happened; the caller decides whether a failed
/// fsync must poison the log.
pub fn write_snapshot(
    storage: &dyn Storage,
    dir: &Path,
    offset: i64,
    entries: &[SnapshotEntry],
) -> Result<PathBuf> {
    let path = write_snapshot_file(storage, dir, offset, entries)?;
    storage.sync_dir(dir)?;
    Ok(path)
}

/// [`write_snapshot`] without the directory fsync, which the caller runs (and judges) itself:
/// a failure here touched only the temporary file, which is removed, while a failed fsync of
/// the directory may have lost other entries of it.
pub fn write_snapshot_file(
    storage: &dyn Storage,
    dir: &Path,
    offset: i64,
    entries: &[SnapshotEntry],
) -> Result<PathBuf> {
    let (temp, _) = write_snapshot_temp(storage, dir, offset, entries, true)?;
    rename_snapshot_temp(storage, dir, offset, &temp)
}

/// [`write_snapshot_file`] without its fsyncs, for a roll, under the writer lock: the snapshot's
/// bytes go to a temporary file, which is renamed into place at once, and
/// [`UnsyncedSnapshot::sync`] fsyncs them later, off the append path, before the directory fsync
/// that makes the name durable (Kafka's roll takes its snapshot the same way, and flushes it from
/// its scheduler). Until then a crash may leave the file torn, empty or missing, which is safe
/// because the load trusts no snapshot it has not checked: a torn or empty one fails its CRC and
/// is deleted, one above the recovered log end is deleted, and a missing one only lengthens the
/// replay. A truncation deletes the snapshots above its cut durably (`delete_snapshots_above`
/// and a directory fsync), so a deleted one cannot come back.
pub(crate) fn write_unsynced_snapshot(
    storage: &dyn Storage,
    dir: &Path,
    offset: i64,
    entries: &[SnapshotEntry],
) -> Result<UnsyncedSnapshot> {
    let (temp, _file) = write_snapshot_temp(storage, dir, offset, entries, false)?;
    let path = rename_snapshot_temp(storage, dir, offset, &temp)?;
    Ok(UnsyncedSnapshot { offset, path })
}

/// A snapshot [`write_unsynced_snapshot`] put in place. It keeps no descriptor while it waits
/// (a writer ahead of a slow disk would hold one a roll): [`sync`](Self::sync) opens the file
/// again, and an fsync of the file through any descriptor covers its written pages.
#[derive(Debug)]
pub(crate) struct UnsyncedSnapshot {
    /// Its offset.
    pub(crate) offset: i64,
    path: PathBuf,
}

impl UnsyncedSnapshot {
    /// Fsyncs the bytes written (the directory fsync that follows makes the name durable). A
    /// snapshot a truncation or a retention pass deleted since needs none.
    pub(crate) fn sync(&self, storage: &dyn Storage) -> Result<()> {
        match storage.open(&self.path, OpenMode::ReadWrite) {
            Ok(file) => file.sync_all(),
            Err(gone) if gone.io_kind() == Some(std::io::ErrorKind::NotFound) => Ok(()),
            Err(error) => Err(error),
        }
    }
}

/// Removes the temporary snapshot `temp` (best effort: the next open removes what is left).
pub(crate) fn discard_snapshot_temp(storage: &dyn Storage, temp: &Path) {
    match storage.remove(temp) {
        Ok(()) => {}
        Err(gone) if gone.io_kind() == Some(std::io::ErrorKind::NotFound) => {}
        Err(cleanup) => log::warn!("could not remove {}: {cleanup}", temp.display()),
    }
}

/// Writes the snapshot's bytes to its temporary file (fsynced when `sync`) and returns its path;
/// on an error the temporary file is removed.
fn write_snapshot_temp(
    storage: &dyn Storage,
    dir: &Path,
    offset: i64,
    entries: &[SnapshotEntry],
    sync: bool,
) -> Result<(PathBuf, std::sync::Arc<dyn crate::storage::StorageFile>)> {
    if offset < 0 {
        return Err(Error::InvalidArgument {
            why: format!("a producer snapshot offset cannot be negative ({offset})"),
        });
    }
    // A name of its own for every write, so that two writers of the same offset (a truncation
    // and a roll, say) never write through each other's temporary file.
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let write = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let temp = dir.join(format!("{offset:020}.{write}{SNAPSHOT_TEMP_SUFFIX}"));
    let bytes = encode_snapshot(entries);
    let written = storage.open(&temp, OpenMode::Create).and_then(|file| {
        file.set_len(0)?;
        file.write_all_at(&bytes, 0)?;
        if sync {
            file.sync_all()?;
        }
        Ok(file)
    });
    match written {
        Ok(file) => Ok((temp, file)),
        Err(error) => {
            discard_snapshot_temp(storage, &temp);
            Err(error)
        }
    }
}

/// Renames the temporary snapshot `temp` to `<offset>.snapshot` and returns the new path; on an
/// error the temporary file is removed.
fn rename_snapshot_temp(
    storage: &dyn Storage,
    dir: &Path,
    offset: i64,
    temp: &Path,
) -> Result<PathBuf> {
    let path = snapshot_path(dir, offset);
    if let Err(error) = storage.rename(temp, &path) {
        discard_snapshot_temp(storage, temp);
        return Err(error);
    }
    Ok(path)
}

/// The offsets of the `<offset>.snapshot` files in `dir`, ascending. Temporary and `.deleted`
/// snapshots are not listed.
pub fn list_snapshots(storage: &dyn Storage, dir: &Path) -> Result<Vec<i64>> {
    let mut offsets: Vec<i64> = storage
        .list(dir)?
        .iter()
        .filter_map(|name| parse_snapshot_file_name(name))
        .collect();
    offsets.sort_unstable();
    Ok(offsets)
}

/// The newest snapshot offset at or below `offset` (Kafka's `latestSnapshotFile` floor lookup).
pub fn latest_snapshot_at_or_below(
    storage: &dyn Storage,
    dir: &Path,
    offset: i64,
) -> Result<Option<i64>> {
    Ok(list_snapshots(storage, dir)?
        .into_iter()
        .rev()
        .find(|&snapshot| snapshot <= offset))
}

/// A snapshot that passed its checks: its offset and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedSnapshot {
    /// The offset in the file's name: the log end offset the state covers.
    pub offset: i64,
    /// The checked bytes; [`CheckedSnapshot::entries`] decodes them.
    pub snapshot: CheckedSnapshot,
}

/// The newest snapshot at or below `offset` that passes its checks, trying older ones after a bad one.
///
/// A snapshot that is corrupt (empty, truncated, CRC-bad, another version, a wrong count) is
/// skipped with a log line, and deleted when `delete_bad` (a writable open; a read-only one
/// deletes nothing). One that vanished meanwhile is skipped. Any other I/O error is returned:
/// it says nothing about the file's bytes.
pub fn load_newest_valid_snapshot(
    storage: &dyn Storage,
    dir: &Path,
    offset: i64,
    delete_bad: bool,
) -> Result<Option<LoadedSnapshot>> {
    load_newest_valid_listed_snapshot(
        storage,
        dir,
        &list_snapshots(storage, dir)?,
        offset,
        delete_bad,
    )
}

/// [`load_newest_valid_snapshot`] among `candidates`, the snapshot offsets of a listing of `dir`
/// the caller took (ascending).
pub fn load_newest_valid_listed_snapshot(
    storage: &dyn Storage,
    dir: &Path,
    candidates: &[i64],
    offset: i64,
    delete_bad: bool,
) -> Result<Option<LoadedSnapshot>> {
    for &candidate in candidates.iter().rev().filter(|&&c| c <= offset) {
        let path = snapshot_path(dir, candidate);
        match read_checked_snapshot(storage, &path) {
            Ok(snapshot) => {
                return Ok(Some(LoadedSnapshot {
                    offset: candidate,
                    snapshot,
                }));
            }
            Err(error @ Error::Corrupt { .. }) => {
                log::warn!(
                    "{}: the producer snapshot is unusable ({error}); {}",
                    path.display(),
                    if delete_bad {
                        "deleting it and trying an older one"
                    } else {
                        "trying an older one"
                    }
                );
                if delete_bad {
                    remove_if_exists(storage, &path)?;
                }
            }
            Err(error) if error.io_kind() == Some(std::io::ErrorKind::NotFound) => {}
            Err(error) => return Err(error),
        }
    }
    Ok(None)
}

/// Removes temporary snapshots a crash left behind mid-write (never renamed, so never trusted).
/// Returns how many were removed; the caller fsyncs the directory if it must be durable.
pub fn remove_temporary_snapshots(storage: &dyn Storage, dir: &Path) -> Result<usize> {
    Ok(remove_listed_temporary_snapshots(storage, dir, &storage.list(dir)?)?.len())
}

/// [`remove_temporary_snapshots`] among `names`, a listing of `dir` the caller took. Returns
/// the names removed.
pub fn remove_listed_temporary_snapshots(
    storage: &dyn Storage,
    dir: &Path,
    names: &[String],
) -> Result<Vec<String>> {
    let mut removed = Vec::new();
    for name in names {
        if name.ends_with(SNAPSHOT_TEMP_SUFFIX) {
            remove_if_exists(storage, &dir.join(name))?;
            removed.push(name.clone());
        }
    }
    Ok(removed)
}

/// Deletes the snapshots above `offset` (a truncation to a new log end removes the state past
/// it) and returns their offsets. The caller fsyncs the directory.
pub fn delete_snapshots_above(storage: &dyn Storage, dir: &Path, offset: i64) -> Result<Vec<i64>> {
    delete_where(storage, dir, |snapshot| snapshot > offset)
}

/// Deletes the snapshots below `offset` (Kafka's `deleteSnapshotsBefore`: the state below a new
/// log start offset is no longer needed) and returns their offsets. The caller fsyncs the
/// directory.
pub fn delete_snapshots_below(storage: &dyn Storage, dir: &Path, offset: i64) -> Result<Vec<i64>> {
    delete_where(storage, dir, |snapshot| snapshot < offset)
}

/// Keeps only the snapshots in `(log_start_offset, log_end_offset]`, as Kafka's
/// `truncateAndReload` does before it reloads: one at the start offset itself goes too, since
/// its state covers nothing above the start that a replay from the start would not rebuild.
/// Returns the deleted offsets. The caller fsyncs the directory.
pub fn retain_snapshots_within(
    storage: &dyn Storage,
    dir: &Path,
    log_start_offset: i64,
    log_end_offset: i64,
) -> Result<Vec<i64>> {
    retain_listed_snapshots_within(
        storage,
        dir,
        &list_snapshots(storage, dir)?,
        log_start_offset,
        log_end_offset,
    )
}

/// [`retain_snapshots_within`] among `snapshots`, the snapshot offsets of a listing of `dir`
/// the caller took.
pub fn retain_listed_snapshots_within(
    storage: &dyn Storage,
    dir: &Path,
    snapshots: &[i64],
    log_start_offset: i64,
    log_end_offset: i64,
) -> Result<Vec<i64>> {
    delete_listed_where(storage, dir, snapshots, |snapshot| {
        snapshot <= log_start_offset || snapshot > log_end_offset
    })
}

/// Keeps, among `snapshots` (offsets of a listing of `dir`), only those in
/// `[first_segment_base, log_end_offset]`, as an open does: one below the first segment
/// describes records that are gone, one above the end records that never made it. Unlike
/// Kafka's `truncateAndReload` ([`retain_snapshots_within`]), one at or below the log start
/// stays while a segment begins at or below it: a producer whose data lies below the start
/// stays until it expires (KIP-360), and that snapshot may be all a reopen knows it by.
/// Returns the deleted offsets. The caller fsyncs the directory.
pub fn retain_listed_snapshots_of_segments(
    storage: &dyn Storage,
    dir: &Path,
    snapshots: &[i64],
    first_segment_base: i64,
    log_end_offset: i64,
) -> Result<Vec<i64>> {
    delete_listed_where(storage, dir, snapshots, |snapshot| {
        snapshot < first_segment_base || snapshot > log_end_offset
    })
}

/// The snapshots Kafka's `removeStraySnapshots` deletes, given the snapshot offsets and the
/// segment base offsets: every snapshot at a segment base stays; of the others (strays) only
/// the newest may stay, and only when it is not below the newest segment base (it is then the
/// log-end snapshot of the active segment). Returns the offsets to delete, ascending.
pub fn stray_snapshots(snapshots: &[i64], segment_bases: &[i64]) -> Vec<i64> {
    let mut sorted = snapshots.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut strays: Vec<i64> = sorted
        .into_iter()
        .filter(|snapshot| !segment_bases.contains(snapshot))
        .collect();
    let keep_newest = match (strays.last(), segment_bases.iter().max()) {
        (Some(&newest), Some(&max_base)) => newest >= max_base,
        (Some(_), None) => true,
        (None, _) => false,
    };
    if keep_newest {
        strays.pop();
    }
    strays
}

/// Deletes the stray snapshots of `dir` (see [`stray_snapshots`]) and returns their offsets.
/// The caller fsyncs the directory.
pub fn remove_stray_snapshots(
    storage: &dyn Storage,
    dir: &Path,
    segment_bases: &[i64],
) -> Result<Vec<i64>> {
    remove_listed_stray_snapshots(storage, dir, &list_snapshots(storage, dir)?, segment_bases)
}

/// [`remove_stray_snapshots`] among `snapshots`, the snapshot offsets of a listing of `dir`
/// the caller took.
pub fn remove_listed_stray_snapshots(
    storage: &dyn Storage,
    dir: &Path,
    snapshots: &[i64],
    segment_bases: &[i64],
) -> Result<Vec<i64>> {
    let strays = stray_snapshots(snapshots, segment_bases);
    for &offset in &strays {
        remove_if_exists(storage, &snapshot_path(dir, offset))?;
    }
    Ok(strays)
}

fn delete_where(
    storage: &dyn Storage,
    dir: &Path,
    doomed: impl Fn(i64) -> bool,
) -> Result<Vec<i64>> {
    delete_listed_where(storage, dir, &list_snapshots(storage, dir)?, doomed)
}

/// Deletes, among `snapshots` (offsets of a listing of `dir`), each one above `above` whose file
/// does not decode (a torn or empty snapshot a roll wrote and a crash caught before its fsync);
/// whole ones stay, a broker's among them. Returns the offsets deleted.
pub(crate) fn delete_listed_torn_above(
    storage: &dyn Storage,
    dir: &Path,
    snapshots: &[i64],
    above: i64,
) -> Result<Vec<i64>> {
    let mut deleted = Vec::new();
    for &offset in snapshots.iter().filter(|&&offset| offset > above) {
        let path = snapshot_path(dir, offset);
        match read_snapshot(storage, &path) {
            Ok(_) => {}
            Err(Error::Corrupt { what, .. }) => {
                log::warn!(
                    "{}: {what}; a crash caught it before its fsync, so it goes",
                    path.display()
                );
                remove_if_exists(storage, &path)?;
                deleted.push(offset);
            }
            Err(error) => return Err(error),
        }
    }
    Ok(deleted)
}

fn delete_listed_where(
    storage: &dyn Storage,
    dir: &Path,
    snapshots: &[i64],
    doomed: impl Fn(i64) -> bool,
) -> Result<Vec<i64>> {
    let mut deleted = Vec::new();
    for &offset in snapshots {
        if doomed(offset) {
            remove_if_exists(storage, &snapshot_path(dir, offset))?;
            deleted.push(offset);
        }
    }
    Ok(deleted)
}

fn remove_if_exists(storage: &dyn Storage, path: &Path) -> Result<()> {
    match storage.remove(path) {
        Ok(()) => Ok(()),
        Err(error) if error.io_kind() == Some(std::io::ErrorKind::NotFound) => Ok(()),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests;
