//! `partlog.checkpoint`: the log's recovery point, log start offset and clean-shutdown fields,
//! in the layout below.
//!
//! # Layout
//! The file is two 512-byte slots, 1024 bytes in all. Each slot is a complete record, big-endian:
//!
//! | bytes      | field                | type  | notes                                                   |
//! |------------|----------------------|-------|---------------------------------------------------------|
//! | [0, 4)     | magic                | bytes | `b"PLCK"`                                               |
//! | [4, 6)     | version              | u16   | 1                                                       |
//! | [6, 8)     | flags                | u16   | bit 0: clean-shutdown fields present; bit 1: compacted; |
//! |            |                      |       | other bits 0                                            |
//! | [8, 16)    | sequence             | u64   | strictly increases from one write to the next           |
//! | [16, 24)   | recovery_point       | i64   |                                                         |
//! | [24, 32)   | log_start_offset     | i64   |                                                         |
//! | [32, 40)   | active_segment_base  | i64   | zero when flag bit 0 is clear                           |
//! | [40, 48)   | active_segment_size  | u64   | zero when flag bit 0 is clear                           |
//! | [48, 56)   | log_end_offset       | i64   | zero when flag bit 0 is clear                           |
//! | [56, 508)  | padding              | zeros |                                                         |
//! | [508, 512) | CRC-32C of [0, 508)  | u32   |                                                         |
//!
//! A slot is valid only if every rule of the table holds: a reader that meets a bit it does not
//! understand (another version, an unknown flag, nonzero padding) treats the slot as invalid
//! rather than guessing, and the log then falls back to the other slot or to its segments.
//!
//! # The compacted flag
//! Flag bit 1 (`COMPACTED`) says that this log's records have been compacted, by a compaction
//! pass here or by the leader a follower copies, so that offsets may be missing between one
//! segment and the next ([`gaps_between_segments_are_legal`]). It is set in the synced slot
//! that records a recovery point before the first gap can exist on disk (a compaction pass,
//! before its first swap; a follower's roll past a gap of more than `i32::MAX` offsets), and
//! from then on every record this file writes carries it, whatever it writes. A writable open
//! whose cleanup policy includes compact sets it for its next write, since its segments may
//! hold a cleaner's gaps already (a Kafka directory opened for the first time). Only
//! `truncate_fully_and_start_at` clears it, in its last write, once the directory holds
//! nothing but the new empty segment.
//!
//! # Reading
//! The newest record is the valid slot with the higher sequence (slot 0 on a tie, which partlog
//! never writes). A slot whose bytes are missing, because the file is shorter than 1024 bytes,
//! is invalid. If neither slot is valid there is no record, and the log recovers from its
//! segments.
//!
//! # Writing
//! A write always goes to the slot that does NOT hold the newest *synced* record, so that a
//! crash in the middle of any write, durable or not, can tear only a slot whose loss is allowed:
//! the newest synced record survives every crash. A durable write fsyncs (`sync_data`) before it
//! returns, and its slot then becomes the one holding the newest synced record. Non-durable
//! writes (the recovery-point cadence) keep landing in the same slot until a durable one moves
//! the synced record there.
//!
//! An open syncs nothing. The first write after it first syncs the file and its directory, so
//! that the record the open read back (a crashed process may have written it without a sync)
//! really is the newest synced record before anything is written beside it. A clean-shutdown
//! record stands until a durable record replaces it; while it stands, every record without its
//! fields is written durably.

// FORMAT.md §6 is this file's byte layout; ARCHITECTURE.md §6 and §7 how the log uses it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::log::config::CleanupPolicy;
use crate::storage::{OpenMode, Storage, StorageFile};

/// The checkpoint's file name inside a log directory. No rule of Kafka's loader matches it.
pub const CHECKPOINT_FILE_NAME: &str = "partlog.checkpoint";

/// The size of one slot in bytes.
pub const CHECKPOINT_SLOT_SIZE: usize = 512;

/// The size of the whole file: two slots.
pub const CHECKPOINT_FILE_SIZE: usize = 2 * CHECKPOINT_SLOT_SIZE;

const MAGIC: [u8; 4] = *b"PLCK";
const VERSION: u16 = 1;
const FLAG_CLEAN_SHUTDOWN: u16 = 1;
const FLAG_COMPACTED: u16 = 2;
/// The CRC covers everything before it.
const CRC_POSITION: usize = CHECKPOINT_SLOT_SIZE - 4;
/// Where the clean-shutdown fields start and end; zero when the flag is clear.
const CLEAN_SHUTDOWN_FIELDS: std::ops::Range<usize> = 32..56;

/// The fields `close()` records so that the next open can skip recovery. Open trusts them only if
/// all three match the directory, and consumes them before its first write.
// ARCHITECTURE.md §3, invariant 21.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CleanShutdown {
    /// Base offset of the active segment at close.
    pub active_segment_base: i64,
    /// Size in bytes of the active segment's `.log` file at close.
    pub active_segment_size: u64,
    /// The log end offset at close (the offset the next append would get).
    pub log_end_offset: i64,
}

/// One record of `partlog.checkpoint`: the contents of a valid slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CheckpointRecord {
    /// Orders the two slots: the valid slot with the higher sequence is the newest record.
    pub sequence: u64,
    /// A lower bound on the durable offset: recovery scans the active segment from here, and an
    /// invalid byte below it is corruption rather than a torn tail.
    pub recovery_point: i64,
    /// The log start offset, made durable by `delete_records_before` and `truncate_to`.
    pub log_start_offset: i64,
    /// Present only in a record written by a clean `close()`.
    pub clean_shutdown: Option<CleanShutdown>,
    /// Flag bit 1, `COMPACTED`: the log's records have been compacted (by a pass of its own,
    /// or by the leader it copies), so offsets may be missing between segments.
    pub compacted: bool,
}

/// Whether offsets may be missing between one segment and the next without anything being
/// lost: when the log's checkpoint says its records have
/// been compacted (`compacted`, from [`CheckpointRecord::compacted`]), or when its
/// cleanup policy includes compact (the only sign there is in a Kafka directory opened for
/// the first time, which has no partlog checkpoint). Reads that move from one segment to the
/// next, recovery and `verify` all judge a gap by it. Recovery and `verify` still take a gap
/// at or above the recovery point for a lost tail, whatever this says.
// ARCHITECTURE.md §3, invariant 5.
pub fn gaps_between_segments_are_legal(compacted: bool, policy: CleanupPolicy) -> bool {
    compacted || policy.compacts()
}

/// Encodes `record` as one 512-byte slot, CRC included.
pub fn encode_slot(record: &CheckpointRecord) -> [u8; CHECKPOINT_SLOT_SIZE] {
    let mut slot = [0u8; CHECKPOINT_SLOT_SIZE];
    let (mut flags, clean) = match record.clean_shutdown {
        Some(clean) => (FLAG_CLEAN_SHUTDOWN, clean),
        // Zeros, so that a record without the fields has one encoding only.
        None => (
            0,
            CleanShutdown {
                active_segment_base: 0,
                active_segment_size: 0,
                log_end_offset: 0,
            },
        ),
    };
    if record.compacted {
        flags |= FLAG_COMPACTED;
    }
    slot[0..4].copy_from_slice(&MAGIC);
    slot[4..6].copy_from_slice(&VERSION.to_be_bytes());
    slot[6..8].copy_from_slice(&flags.to_be_bytes());
    slot[8..16].copy_from_slice(&record.sequence.to_be_bytes());
    slot[16..24].copy_from_slice(&record.recovery_point.to_be_bytes());
    slot[24..32].copy_from_slice(&record.log_start_offset.to_be_bytes());
    slot[32..40].copy_from_slice(&clean.active_segment_base.to_be_bytes());
    slot[40..48].copy_from_slice(&clean.active_segment_size.to_be_bytes());
    slot[48..56].copy_from_slice(&clean.log_end_offset.to_be_bytes());
    let crc = crc32c::crc32c(&slot[..CRC_POSITION]);
    slot[CRC_POSITION..].copy_from_slice(&crc.to_be_bytes());
    slot
}

/// Decodes one slot. `None` means the slot is invalid: wrong length, bad CRC, bad magic, another
/// version, unknown flags (bits 2 to 15), nonzero padding, or clean-shutdown bytes without the
/// flag.
pub fn decode_slot(slot: &[u8]) -> Option<CheckpointRecord> {
    let slot: &[u8; CHECKPOINT_SLOT_SIZE] = slot.try_into().ok()?;
    let (covered, stored_crc) = slot.split_last_chunk::<4>()?;
    if crc32c::crc32c(covered) != u32::from_be_bytes(*stored_crc) {
        return None;
    }
    if slot.first_chunk::<4>()? != &MAGIC || be_u16(slot, 4)? != VERSION {
        return None;
    }
    let flags = be_u16(slot, 6)?;
    if flags & !(FLAG_CLEAN_SHUTDOWN | FLAG_COMPACTED) != 0 {
        return None;
    }
    if covered
        .get(CLEAN_SHUTDOWN_FIELDS.end..)?
        .iter()
        .any(|&b| b != 0)
    {
        return None;
    }
    let clean_shutdown = if flags & FLAG_CLEAN_SHUTDOWN != 0 {
        Some(CleanShutdown {
            active_segment_base: i64::from_be_bytes(*be_8(slot, 32)?),
            active_segment_size: u64::from_be_bytes(*be_8(slot, 40)?),
            log_end_offset: i64::from_be_bytes(*be_8(slot, 48)?),
        })
    } else if slot.get(CLEAN_SHUTDOWN_FIELDS)?.iter().any(|&b| b != 0) {
        return None;
    } else {
        None
    };
    Some(CheckpointRecord {
        sequence: u64::from_be_bytes(*be_8(slot, 8)?),
        recovery_point: i64::from_be_bytes(*be_8(slot, 16)?),
        log_start_offset: i64::from_be_bytes(*be_8(slot, 24)?),
        clean_shutdown,
        compacted: flags & FLAG_COMPACTED != 0,
    })
}

fn be_u16(bytes: &[u8], at: usize) -> Option<u16> {
    bytes
        .get(at..)?
        .first_chunk::<2>()
        .map(|b| u16::from_be_bytes(*b))
}

fn be_8(bytes: &[u8], at: usize) -> Option<&[u8; 8]> {
    bytes.get(at..)?.first_chunk::<8>()
}

/// The byte position of slot `slot` (0 or 1) in the file.
fn slot_position(slot: usize) -> u64 {
    if slot == 0 {
        0
    } else {
        CHECKPOINT_SLOT_SIZE as u64
    }
}

/// What the two slots of a file hold.
struct SlotScan {
    /// The decoded record of each slot, `None` where the slot is invalid or missing.
    slots: [Option<CheckpointRecord>; 2],
    file_len: u64,
}

impl SlotScan {
    fn read(file: &dyn StorageFile) -> Result<SlotScan> {
        let file_len = file.len()?;
        let mut image = [0u8; CHECKPOINT_FILE_SIZE];
        // A file torn at creation may be short; the slots it lacks are invalid, not an error.
        let present = usize::try_from(file_len)
            .map_or(CHECKPOINT_FILE_SIZE, |len| len.min(CHECKPOINT_FILE_SIZE));
        let (head, _) = image.split_at_mut(present);
        file.read_exact_at(head, 0)?;
        let decode = |slot: usize| {
            let start = slot * CHECKPOINT_SLOT_SIZE;
            let end = start + CHECKPOINT_SLOT_SIZE;
            if present < end {
                return None;
            }
            image.get(start..end).and_then(decode_slot)
        };
        Ok(SlotScan {
            slots: [decode(0), decode(1)],
            file_len,
        })
    }

    /// The newest valid record and its slot: the higher sequence, slot 0 on a tie.
    fn newest(&self) -> Option<(usize, CheckpointRecord)> {
        match self.slots {
            [Some(first), Some(second)] if second.sequence > first.sequence => Some((1, second)),
            [Some(first), _] => Some((0, first)),
            [None, Some(second)] => Some((1, second)),
            [None, None] => None,
        }
    }
}

/// `partlog.checkpoint` open for writing. See the [module docs](self) for the layout and the
/// write rule.
///
/// It owns the file handle, the sequence of the last record written (or read at open), and which
/// slot holds the newest synced record.
#[derive(Debug)]
pub struct CheckpointFile {
    file: Arc<dyn StorageFile>,
    /// The sequence of the last record written or, before the first write, of the newest record
    /// read at open (0 if none). The next write uses the one after it.
    sequence: u64,
    /// The slot (0 or 1) holding the newest synced record; `None` if neither slot holds one.
    synced_slot: Option<usize>,
    /// The file's length as far as this handle knows; below the full size until the first write
    /// repairs a file torn at creation.
    file_len: u64,
    /// What the first write must make durable before it writes: the record read at open (a
    /// crashed process may have written it without a sync) and the file's name in `dir`.
    read_back: ReadBack,
    /// The newest durable record carries clean-shutdown fields that no later durable write has
    /// replaced: the log must consume them before it changes ([`Self::consume_clean_shutdown`]).
    clean_shutdown_standing: bool,
    /// The `COMPACTED` flag every record written from now on carries: read at open, set by
    /// the first write that records it, cleared only by [`Self::forget_compaction`].
    compacted: bool,
}

/// Whether what an open read back is known to be durable yet.
#[derive(Debug)]
enum ReadBack {
    /// Not yet: the first write syncs the file's data and `dir`, then writes.
    Unsynced {
        storage: Arc<dyn Storage>,
        dir: PathBuf,
    },
    Durable,
}

impl CheckpointFile {
    /// Opens `dir/partlog.checkpoint`, creating it if missing, and returns the newest valid
    /// record (the valid slot with the higher sequence), or `None` if no slot is valid.
    ///
    /// A new file is 1024 zero bytes (both slots invalid). Open syncs nothing: the first
    /// [`write`](Self::write) syncs the file's data and the directory before it writes, in
    /// every case. A created file's name must be durable before recovery relies on it, and a
    /// record read back may have been written without a sync by a
    /// process that then crashed: it must really be the newest synced record before a write
    /// goes to the other slot. Nothing before the first write depends on either, so an open
    /// that writes nothing (a clean open, whose record stands until the log changes) costs no
    /// sync.
    // ARCHITECTURE.md §6 (durable names).
    pub fn open(
        storage: &Arc<dyn Storage>,
        dir: &Path,
    ) -> Result<(CheckpointFile, Option<CheckpointRecord>)> {
        let path = checkpoint_path(dir);
        let file = match storage.open(&path, OpenMode::ReadWrite) {
            Ok(file) => file,
            Err(e) if e.io_kind() == Some(std::io::ErrorKind::NotFound) => {
                let file = storage.open(&path, OpenMode::CreateNew)?;
                file.write_all_at(&[0u8; CHECKPOINT_FILE_SIZE], 0)?;
                file
            }
            Err(e) => return Err(e),
        };
        let scan = SlotScan::read(file.as_ref())?;
        let newest = scan.newest();
        let checkpoint = CheckpointFile {
            file,
            sequence: newest.map_or(0, |(_, record)| record.sequence),
            synced_slot: newest.map(|(slot, _)| slot),
            file_len: scan.file_len,
            read_back: ReadBack::Unsynced {
                storage: Arc::clone(storage),
                dir: dir.to_path_buf(),
            },
            clean_shutdown_standing: newest
                .is_some_and(|(_, record)| record.clean_shutdown.is_some()),
            compacted: newest.is_some_and(|(_, record)| record.compacted),
        };
        Ok((checkpoint, newest.map(|(_, record)| record)))
    }

    /// Reads `dir/partlog.checkpoint` without creating or writing anything (read-only logs):
    /// the newest valid record, or `None` if the file is absent or no slot is valid.
    pub fn read(storage: &Arc<dyn Storage>, dir: &Path) -> Result<Option<CheckpointRecord>> {
        let file = match storage.open(&checkpoint_path(dir), OpenMode::Read) {
            Ok(file) => file,
            Err(e) if e.io_kind() == Some(std::io::ErrorKind::NotFound) => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(SlotScan::read(file.as_ref())?
            .newest()
            .map(|(_, record)| record))
    }

    /// Writes the next record (sequence = last + 1) into the slot that does not hold the newest
    /// synced record, and returns its sequence. When `durable`, it syncs the file's data before
    /// returning, and that slot then holds the newest synced record. The first write after
    /// [`open`](Self::open) first makes what the open read durable (the file's data and the
    /// directory).
    ///
    /// A record without clean-shutdown fields written while a clean-shutdown record stands is
    /// written durably even when `durable` is false: a crash must not find the clean record
    /// newest once a later one exists.
    ///
    /// On an error, the slot being written may be torn, but never the synced one. The sequence
    /// is used up either way, so that one number never names two different contents. A file
    /// shorter than 1024 bytes is first extended with zeros.
    ///
    /// The record carries the `COMPACTED` flag when the newest record read at open did, or a
    /// write since set it ([`write_compacted`](Self::write_compacted)).
    pub fn write(
        &mut self,
        recovery_point: i64,
        log_start_offset: i64,
        clean_shutdown: Option<CleanShutdown>,
        durable: bool,
    ) -> Result<u64> {
        self.write_slot(recovery_point, log_start_offset, clean_shutdown, durable)
            .map_err(DurableWriteError::into_error)
    }

    /// Writes, durably, a record without clean-shutdown fields that sets the `COMPACTED` flag
    /// (the log's records have been compacted: offsets may be missing between segments), and
    /// returns its sequence. Every later record carries the flag. The log calls it before the
    /// first gap can exist on disk, so that a crash never finds a gap without the flag
    /// ([`write`](Self::write) for the rest).
    pub fn write_compacted(&mut self, recovery_point: i64, log_start_offset: i64) -> Result<u64> {
        self.write_durable_compacted(recovery_point, log_start_offset)
            .map_err(DurableWriteError::into_error)
    }

    /// [`write_compacted`](Self::write_compacted), telling a failed write from a failed sync as
    /// [`write_durable`](Self::write_durable) does.
    pub(crate) fn write_durable_compacted(
        &mut self,
        recovery_point: i64,
        log_start_offset: i64,
    ) -> std::result::Result<u64, DurableWriteError> {
        let compacted = std::mem::replace(&mut self.compacted, true);
        let written = self.write_slot(recovery_point, log_start_offset, None, true);
        if matches!(written, Err(DurableWriteError::Write(_))) {
            // The synced slot is untouched, and the caller makes no gap: later records need
            // not say more than before.
            self.compacted = compacted;
        }
        written
    }

    /// Whether the records this file writes carry the `COMPACTED` flag.
    pub fn compacted(&self) -> bool {
        self.compacted
    }

    /// Sets the `COMPACTED` flag from the next record on, without a write of its own: for a log
    /// whose cleanup policy includes compact, whose segments may already hold a cleaner's gaps
    /// (Kafka's, in a directory opened for the first time) that the policy makes legal now and
    /// the flag keeps legal if the policy later becomes `delete`.
    pub(crate) fn carry_compacted(&mut self) {
        self.compacted = true;
    }

    /// Clears the `COMPACTED` flag from the next record on. Only for a log that holds no gap
    /// on disk any more, and none that a crash could bring back: `truncate_fully_and_start_at`,
    /// once the old segments' renames to `.deleted` are durable and only the new empty segment
    /// is left.
    pub(crate) fn forget_compaction(&mut self) {
        self.compacted = false;
    }

    /// Consumes a standing clean-shutdown record: writes, durably, a record without its fields
    /// (`recovery_point` and `log_start_offset` as the log holds them), so that a crash from
    /// then on never looks clean. Does nothing when no clean-shutdown record stands. The log
    /// calls it before the first change to its segments after a clean open (ARCHITECTURE.md
    /// §7), not at the open, so that an open that changes nothing writes and syncs nothing.
    pub(crate) fn consume_clean_shutdown(
        &mut self,
        recovery_point: i64,
        log_start_offset: i64,
    ) -> std::result::Result<(), DurableWriteError> {
        if self.clean_shutdown_standing {
            self.write_slot(recovery_point, log_start_offset, None, true)?;
        }
        Ok(())
    }

    /// Whether the newest durable record carries clean-shutdown fields that no later durable
    /// write has replaced. The log consumes such a record, durably, before its first change
    /// after the open that read it.
    // FORMAT.md §6.2.
    pub fn clean_shutdown_standing(&self) -> bool {
        self.clean_shutdown_standing
    }

    /// [`write`](Self::write), telling a failed write from a failed sync.
    fn write_slot(
        &mut self,
        recovery_point: i64,
        log_start_offset: i64,
        clean_shutdown: Option<CleanShutdown>,
        durable: bool,
    ) -> std::result::Result<u64, DurableWriteError> {
        if let ReadBack::Unsynced { storage, dir } = &self.read_back {
            // A failed sync here leaves the read-back record's durability unknown: treated as
            // any failed sync (the log poisons itself), and retried by the next write.
            self.file.sync_data().map_err(DurableWriteError::Sync)?;
            storage.sync_dir(dir).map_err(DurableWriteError::Sync)?;
            self.read_back = ReadBack::Durable;
        }
        let durable = durable || (self.clean_shutdown_standing && clean_shutdown.is_none());
        let sequence = self
            .sequence
            .checked_add(1)
            .ok_or_else(|| Error::Unsupported {
                what: format!(
                    "{} holds sequence number {}, which cannot be followed; remove the file to \
                 recover from the segments",
                    self.file.path().display(),
                    self.sequence
                ),
            })
            .map_err(DurableWriteError::Write)?;
        self.sequence = sequence;
        let target = match self.synced_slot {
            Some(0) => 1,
            Some(_) | None => 0,
        };
        let slot = encode_slot(&CheckpointRecord {
            sequence,
            recovery_point,
            log_start_offset,
            clean_shutdown,
            compacted: self.compacted,
        });
        let full_size = CHECKPOINT_FILE_SIZE as u64;
        if self.file_len < full_size {
            // Only slots that were invalid (missing bytes) lie beyond the current end, so the
            // zeros never touch the synced record.
            let missing = usize::try_from(full_size - self.file_len).unwrap_or(0);
            let zeros = [0u8; CHECKPOINT_FILE_SIZE];
            if let Some(fill) = zeros.get(..missing) {
                self.file
                    .write_all_at(fill, self.file_len)
                    .map_err(DurableWriteError::Write)?;
            }
            self.file_len = full_size;
        }
        self.file
            .write_all_at(&slot, slot_position(target))
            .map_err(DurableWriteError::Write)?;
        if durable {
            self.file.sync_data().map_err(DurableWriteError::Sync)?;
            self.synced_slot = Some(target);
            self.clean_shutdown_standing = clean_shutdown.is_some();
        }
        Ok(sequence)
    }

    /// [`write`](Self::write) of a durable record without clean-shutdown fields, telling a
    /// failed write from a failed sync: after a failed sync the kernel may have dropped the
    /// slot's pages, which the log must treat as a poisoning failure, while a failed write left
    /// the synced slot untouched.
    pub(crate) fn write_durable(
        &mut self,
        recovery_point: i64,
        log_start_offset: i64,
    ) -> std::result::Result<u64, DurableWriteError> {
        self.write_slot(recovery_point, log_start_offset, None, true)
    }

    /// The sequence of the last record written, or of the newest record read at open (0 if
    /// none): the next write uses the one after it.
    pub fn sequence(&self) -> u64 {
        self.sequence
    }

    /// The slot (0 or 1) that holds the newest synced record, if any; the next write goes to
    /// the other one. For tests and diagnostics.
    pub fn synced_slot(&self) -> Option<usize> {
        self.synced_slot
    }

    /// The path of the file.
    pub fn path(&self) -> &Path {
        self.file.path()
    }
}

/// Why [`CheckpointFile::write_durable`] failed.
#[derive(Debug)]
pub(crate) enum DurableWriteError {
    /// Writing the slot failed; the synced slot is untouched.
    Write(Error),
    /// Syncing failed: the written slot, or, before the first write, what the open read back.
    Sync(Error),
}

impl DurableWriteError {
    fn into_error(self) -> Error {
        match self {
            DurableWriteError::Write(error) | DurableWriteError::Sync(error) => error,
        }
    }
}

/// `dir/partlog.checkpoint`.
pub fn checkpoint_path(dir: &Path) -> PathBuf {
    dir.join(CHECKPOINT_FILE_NAME)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::sync::Mutex;
    use proptest::prelude::*;

    use super::*;
    use crate::storage::{FileLock, LockMode, Metadata, OsStorage};

    fn os() -> Arc<dyn Storage> {
        Arc::new(OsStorage::new())
    }

    fn record(sequence: u64, clean: bool) -> CheckpointRecord {
        CheckpointRecord {
            sequence,
            recovery_point: 0x0102_0304_0506_0708,
            log_start_offset: -0x1112_1314_1516_1718,
            clean_shutdown: clean.then_some(CleanShutdown {
                active_segment_base: 0x2122_2324_2526_2728,
                active_segment_size: 0xF1F2_F3F4_F5F6_F7F8,
                log_end_offset: 0x3132_3334_3536_3738,
            }),
            compacted: false,
        }
    }

    /// Re-seals a hand-edited slot so that only the edit, not the CRC, can make it invalid.
    fn reseal(slot: &mut [u8; CHECKPOINT_SLOT_SIZE]) {
        let crc = crc32c::crc32c(&slot[..CRC_POSITION]);
        slot[CRC_POSITION..].copy_from_slice(&crc.to_be_bytes());
    }

    fn raw_file(storage: &Arc<dyn Storage>, dir: &Path) -> Vec<u8> {
        let file = storage.open(&checkpoint_path(dir), OpenMode::Read).unwrap();
        let mut bytes = vec![0u8; usize::try_from(file.len().unwrap()).unwrap()];
        file.read_exact_at(&mut bytes, 0).unwrap();
        bytes
    }

    fn overwrite(storage: &Arc<dyn Storage>, dir: &Path, position: u64, bytes: &[u8]) {
        let file = storage
            .open(&checkpoint_path(dir), OpenMode::ReadWrite)
            .unwrap();
        file.write_all_at(bytes, position).unwrap();
    }

    fn replace_file(storage: &Arc<dyn Storage>, dir: &Path, bytes: &[u8]) {
        let file = storage
            .open(&checkpoint_path(dir), OpenMode::ReadWrite)
            .unwrap();
        file.set_len(0).unwrap();
        file.write_all_at(bytes, 0).unwrap();
    }

    /// The decoded record of each slot as the file holds it now.
    fn slots_on_disk(storage: &Arc<dyn Storage>, dir: &Path) -> [Option<CheckpointRecord>; 2] {
        let bytes = raw_file(storage, dir);
        [0, 1].map(|slot| {
            bytes
                .get(slot * CHECKPOINT_SLOT_SIZE..(slot + 1) * CHECKPOINT_SLOT_SIZE)
                .and_then(decode_slot)
        })
    }

    #[test]
    fn each_field_lands_at_its_offset_big_endian() {
        let slot = encode_slot(&record(0xA1A2_A3A4_A5A6_A7A8, true));
        assert_eq!(&slot[0..4], b"PLCK");
        assert_eq!(&slot[4..6], &[0, 1]);
        assert_eq!(&slot[6..8], &[0, 1]);
        assert_eq!(
            &slot[8..16],
            &[0xA1, 0xA2, 0xA3, 0xA4, 0xA5, 0xA6, 0xA7, 0xA8]
        );
        assert_eq!(&slot[16..24], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&slot[24..32], &(-0x1112_1314_1516_1718i64).to_be_bytes());
        assert_eq!(
            &slot[24..32],
            &[0xEE, 0xED, 0xEC, 0xEB, 0xEA, 0xE9, 0xE8, 0xE8]
        );
        assert_eq!(
            &slot[32..40],
            &[0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28]
        );
        assert_eq!(
            &slot[40..48],
            &[0xF1, 0xF2, 0xF3, 0xF4, 0xF5, 0xF6, 0xF7, 0xF8]
        );
        assert_eq!(
            &slot[48..56],
            &[0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38]
        );
        assert!(slot[56..508].iter().all(|&b| b == 0));
        assert_eq!(
            &slot[508..512],
            &crc32c::crc32c(&slot[..508]).to_be_bytes(),
            "the CRC is CRC-32C of [0, 508), big-endian"
        );

        let without = encode_slot(&record(7, false));
        assert_eq!(&without[6..8], &[0, 0], "flag clear");
        assert!(without[32..56].iter().all(|&b| b == 0), "fields zeroed");
        let mut with_flag_cleared = encode_slot(&record(7, true));
        with_flag_cleared[7] = 0;
        assert_eq!(
            &without[..32],
            &with_flag_cleared[..32],
            "the other fields do not move"
        );
    }

    #[test]
    fn crc_is_castagnoli() {
        // The check value of CRC-32C, so that the crate cannot silently be another CRC.
        assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn round_trips_extremes_with_and_without_clean_shutdown() {
        for sequence in [0, 1, u64::MAX] {
            for value in [i64::MIN, -1, 0, 1, i64::MAX] {
                for size in [0, u64::MAX] {
                    for (clean, compacted) in
                        [(false, false), (true, false), (false, true), (true, true)]
                    {
                        let rec = CheckpointRecord {
                            sequence,
                            recovery_point: value,
                            log_start_offset: value.wrapping_add(1),
                            clean_shutdown: clean.then_some(CleanShutdown {
                                active_segment_base: value,
                                active_segment_size: size,
                                log_end_offset: value.wrapping_sub(1),
                            }),
                            compacted,
                        };
                        assert_eq!(decode_slot(&encode_slot(&rec)), Some(rec));
                    }
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn round_trips_any_record(
            sequence: u64,
            recovery_point: i64,
            log_start_offset: i64,
            clean in proptest::option::of((any::<i64>(), any::<u64>(), any::<i64>())),
            compacted: bool,
        ) {
            let rec = CheckpointRecord {
                sequence,
                recovery_point,
                log_start_offset,
                clean_shutdown: clean.map(|(base, size, end)| CleanShutdown {
                    active_segment_base: base,
                    active_segment_size: size,
                    log_end_offset: end,
                }),
                compacted,
            };
            prop_assert_eq!(decode_slot(&encode_slot(&rec)), Some(rec));
        }
    }

    #[test]
    fn every_single_bit_flip_makes_a_slot_invalid() {
        for clean in [false, true] {
            let slot = encode_slot(&record(42, clean));
            assert!(decode_slot(&slot).is_some());
            for bit in 0..CHECKPOINT_SLOT_SIZE * 8 {
                let mut flipped = slot;
                flipped[bit / 8] ^= 1 << (bit % 8);
                assert_eq!(decode_slot(&flipped), None, "bit {bit}, clean {clean}");
            }
        }
    }

    #[test]
    fn nonzero_padding_is_invalid_even_with_a_good_crc() {
        let good = encode_slot(&record(3, true));
        for position in 56..CRC_POSITION {
            let mut slot = good;
            slot[position] = 0x80;
            reseal(&mut slot);
            assert_eq!(decode_slot(&slot), None, "padding byte {position}");
        }
    }

    #[test]
    fn unknown_version_flags_and_magic_are_invalid_even_with_a_good_crc() {
        let good = encode_slot(&record(3, true));
        for version in [0u16, 2, 0x0100, u16::MAX] {
            let mut slot = good;
            slot[4..6].copy_from_slice(&version.to_be_bytes());
            reseal(&mut slot);
            assert_eq!(decode_slot(&slot), None, "version {version}");
        }
        for bit in 2..16 {
            for clean in [false, true] {
                let mut slot = encode_slot(&record(3, clean));
                let flags = u16::from(clean) | (1 << bit);
                slot[6..8].copy_from_slice(&flags.to_be_bytes());
                reseal(&mut slot);
                assert_eq!(decode_slot(&slot), None, "flag bit {bit}, clean {clean}");
            }
        }
        for magic in [*b"PLCk", *b"KCLP", [0; 4]] {
            let mut slot = good;
            slot[0..4].copy_from_slice(&magic);
            reseal(&mut slot);
            assert_eq!(decode_slot(&slot), None, "magic {magic:?}");
        }
    }

    #[test]
    fn clean_shutdown_bytes_without_the_flag_are_invalid() {
        let good = encode_slot(&record(3, false));
        for position in CLEAN_SHUTDOWN_FIELDS {
            let mut slot = good;
            slot[position] = 1;
            reseal(&mut slot);
            assert_eq!(decode_slot(&slot), None, "byte {position}");
        }
    }

    #[test]
    fn the_compacted_flag_is_bit_1_with_or_without_clean_shutdown() {
        for (clean, flags) in [(false, [0, 2]), (true, [0, 3])] {
            let rec = CheckpointRecord {
                compacted: true,
                ..record(9, clean)
            };
            let slot = encode_slot(&rec);
            assert_eq!(&slot[6..8], &flags, "clean {clean}");
            let without = encode_slot(&record(9, clean));
            assert_eq!(slot[..6], without[..6]);
            assert_eq!(slot[8..CRC_POSITION], without[8..CRC_POSITION]);
            assert_eq!(decode_slot(&slot), Some(rec));
        }
    }

    /// A compacted write is durable, and every record written after it carries the flag,
    /// durable or not, clean shutdown or not, through a reopen, until the log forgets it.
    #[test]
    fn the_compacted_flag_is_carried_by_every_later_record_until_forgotten() {
        let storage = os();
        let dir = tempfile::tempdir().unwrap();
        let (mut checkpoint, _) = CheckpointFile::open(&storage, dir.path()).unwrap();
        checkpoint.write(10, 0, None, true).unwrap();
        assert!(!checkpoint.compacted());
        let sequence = checkpoint.write_compacted(20, 0).unwrap();
        assert_eq!(checkpoint.synced_slot(), Some(1), "written durably");
        let newest = CheckpointFile::read(&storage, dir.path()).unwrap().unwrap();
        assert_eq!((newest.sequence, newest.compacted), (sequence, true));
        checkpoint.write(30, 0, None, false).unwrap();
        let clean = CleanShutdown {
            active_segment_base: 0,
            active_segment_size: 0,
            log_end_offset: 40,
        };
        checkpoint.write(40, 0, Some(clean), true).unwrap();
        assert_eq!(
            slots_on_disk(&storage, dir.path()).map(|slot| slot.map(|r| r.compacted)),
            [Some(true), Some(true)]
        );
        drop(checkpoint);

        let (mut checkpoint, newest) = CheckpointFile::open(&storage, dir.path()).unwrap();
        assert!(newest.unwrap().compacted && checkpoint.compacted());
        checkpoint.write(50, 0, None, true).unwrap();
        assert!(
            CheckpointFile::read(&storage, dir.path())
                .unwrap()
                .unwrap()
                .compacted
        );
        checkpoint.forget_compaction();
        checkpoint.write(60, 0, None, true).unwrap();
        let newest = CheckpointFile::read(&storage, dir.path()).unwrap().unwrap();
        assert_eq!((newest.recovery_point, newest.compacted), (60, false));
    }

    #[test]
    fn a_slice_of_the_wrong_length_is_invalid() {
        let slot = encode_slot(&record(3, true));
        assert_eq!(decode_slot(&[]), None);
        assert_eq!(decode_slot(&slot[..511]), None);
        let mut longer = slot.to_vec();
        longer.push(0);
        assert_eq!(decode_slot(&longer), None);
        assert_eq!(
            decode_slot(&[0u8; CHECKPOINT_SLOT_SIZE]),
            None,
            "zeroed slot"
        );
    }

    #[test]
    fn open_creates_two_invalid_slots_and_read_never_creates() {
        let storage = os();
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(CheckpointFile::read(&storage, dir.path()).unwrap(), None);
        assert!(!storage.exists(&checkpoint_path(dir.path())).unwrap());

        let (checkpoint, newest) = CheckpointFile::open(&storage, dir.path()).unwrap();
        assert_eq!(newest, None);
        assert_eq!(checkpoint.sequence(), 0);
        assert_eq!(checkpoint.synced_slot(), None);
        assert_eq!(
            raw_file(&storage, dir.path()),
            vec![0u8; CHECKPOINT_FILE_SIZE]
        );
        assert_eq!(CheckpointFile::read(&storage, dir.path()).unwrap(), None);
    }

    #[test]
    fn open_in_a_missing_directory_is_an_io_error_with_the_path() {
        let storage = os();
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("absent");
        match CheckpointFile::open(&storage, &missing) {
            Err(Error::Io { path, source }) => {
                assert_eq!(path, checkpoint_path(&missing));
                assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
            }
            other => panic!("expected an i/o error, got {other:?}"),
        }
    }

    #[test]
    fn writes_alternate_only_after_durable_writes() {
        let storage = os();
        let dir = tempfile::tempdir().unwrap();
        let (mut checkpoint, _) = CheckpointFile::open(&storage, dir.path()).unwrap();
        // (durable, slot the write must land in, synced slot afterwards)
        let plan = [
            (true, 0, Some(0)),
            (false, 1, Some(0)),
            (false, 1, Some(0)),
            (true, 1, Some(1)),
            (false, 0, Some(1)),
            (true, 0, Some(0)),
            (true, 1, Some(1)),
            (true, 0, Some(0)),
        ];
        for (step, (durable, slot, synced)) in plan.into_iter().enumerate() {
            let before = slots_on_disk(&storage, dir.path());
            let position = i64::try_from(step).unwrap() * 100;
            let sequence = checkpoint.write(position, 0, None, durable).unwrap();
            assert_eq!(sequence, u64::try_from(step).unwrap() + 1, "step {step}");
            let after = slots_on_disk(&storage, dir.path());
            let written = after[slot].expect("the written slot is valid");
            assert_eq!(written.sequence, sequence, "step {step}");
            assert_eq!(written.recovery_point, position, "step {step}");
            assert_eq!(
                after[1 - slot],
                before[1 - slot],
                "step {step}: other slot untouched"
            );
            assert_eq!(checkpoint.synced_slot(), synced, "step {step}");
            assert_eq!(
                CheckpointFile::read(&storage, dir.path()).unwrap(),
                Some(written),
                "step {step}: the reader sees the newest write"
            );
        }
    }

    #[test]
    fn the_first_non_durable_writes_of_a_fresh_file_share_one_slot() {
        let storage = os();
        let dir = tempfile::tempdir().unwrap();
        let (mut checkpoint, _) = CheckpointFile::open(&storage, dir.path()).unwrap();
        for sequence in 1..=3 {
            assert_eq!(checkpoint.write(10, 0, None, false).unwrap(), sequence);
            let slots = slots_on_disk(&storage, dir.path());
            assert_eq!(slots[0].map(|r| r.sequence), Some(sequence));
            assert_eq!(slots[1], None);
            assert_eq!(checkpoint.synced_slot(), None);
        }
    }

    #[test]
    fn a_torn_non_durable_write_leaves_the_newest_synced_record() {
        let storage = os();
        let dir = tempfile::tempdir().unwrap();
        let (mut checkpoint, _) = CheckpointFile::open(&storage, dir.path()).unwrap();
        checkpoint.write(100, 5, None, true).unwrap();
        checkpoint.write(200, 5, None, false).unwrap();
        let synced = checkpoint.write(300, 6, None, true).unwrap();
        assert_eq!(checkpoint.synced_slot(), Some(1));
        let newer = checkpoint.write(400, 6, None, false).unwrap();
        assert_eq!(newer, synced + 1);
        assert_eq!(
            CheckpointFile::read(&storage, dir.path())
                .unwrap()
                .map(|r| r.sequence),
            Some(newer)
        );
        drop(checkpoint);

        let expected = CheckpointRecord {
            sequence: synced,
            recovery_point: 300,
            log_start_offset: 6,
            clean_shutdown: None,
            compacted: false,
        };
        let good_image = raw_file(&storage, dir.path());
        // The non-durable write went to slot 0; tear it in the ways a crash can.
        let half_old = {
            let mut slot = encode_slot(&record(1, false));
            slot[256..].copy_from_slice(&good_image[256..512]);
            slot
        };
        let garbage: Vec<u8> = (0..CHECKPOINT_SLOT_SIZE)
            .map(|i| u8::try_from(i * 31 % 251).unwrap())
            .collect();
        let new_head_then_zeros = {
            let mut slot = [0u8; CHECKPOINT_SLOT_SIZE];
            slot[..200].copy_from_slice(&good_image[..200]);
            slot
        };
        for torn in [
            &[0u8; CHECKPOINT_SLOT_SIZE][..],
            &garbage,
            &half_old,
            &new_head_then_zeros,
        ] {
            replace_file(&storage, dir.path(), &good_image);
            overwrite(&storage, dir.path(), 0, torn);
            assert_eq!(
                CheckpointFile::read(&storage, dir.path()).unwrap(),
                Some(expected)
            );
            let (mut reopened, newest) = CheckpointFile::open(&storage, dir.path()).unwrap();
            assert_eq!(newest, Some(expected));
            assert_eq!(reopened.synced_slot(), Some(1));
            // The sequence continues from the newest valid record, into the torn slot.
            assert_eq!(reopened.write(500, 6, None, false).unwrap(), synced + 1);
            assert_eq!(
                slots_on_disk(&storage, dir.path())[0].map(|r| r.sequence),
                Some(synced + 1)
            );
        }
    }

    #[test]
    fn sequence_continues_after_reopen() {
        let storage = os();
        let dir = tempfile::tempdir().unwrap();
        let (mut checkpoint, _) = CheckpointFile::open(&storage, dir.path()).unwrap();
        for _ in 0..5 {
            checkpoint.write(1, 0, None, true).unwrap();
        }
        let clean = CleanShutdown {
            active_segment_base: 0,
            active_segment_size: 4096,
            log_end_offset: 77,
        };
        assert_eq!(checkpoint.write(77, 0, Some(clean), true).unwrap(), 6);
        drop(checkpoint);

        let (mut reopened, newest) = CheckpointFile::open(&storage, dir.path()).unwrap();
        let newest = newest.unwrap();
        assert_eq!(newest.sequence, 6);
        assert_eq!(newest.clean_shutdown, Some(clean));
        assert_eq!(reopened.sequence(), 6);
        // Slot 1 holds sequence 6, so the next write goes to slot 0.
        assert_eq!(reopened.synced_slot(), Some(1));
        assert_eq!(reopened.write(77, 0, None, true).unwrap(), 7);
        assert_eq!(
            slots_on_disk(&storage, dir.path()).map(|r| r.map(|r| r.sequence)),
            [Some(7), Some(6)]
        );
    }

    #[test]
    fn the_higher_sequence_wins_whichever_slot_holds_it() {
        let storage = os();
        let dir = tempfile::tempdir().unwrap();
        CheckpointFile::open(&storage, dir.path()).unwrap();
        for (first, second, newest_slot) in [(9, 4, 0), (4, 9, 1), (5, 5, 0)] {
            let mut image = encode_slot(&record(first, false)).to_vec();
            image.extend_from_slice(&encode_slot(&record(second, true)));
            replace_file(&storage, dir.path(), &image);
            let expected = if newest_slot == 0 {
                record(first, false)
            } else {
                record(second, true)
            };
            assert_eq!(
                CheckpointFile::read(&storage, dir.path()).unwrap(),
                Some(expected)
            );
            let (checkpoint, newest) = CheckpointFile::open(&storage, dir.path()).unwrap();
            assert_eq!(newest, Some(expected));
            assert_eq!(checkpoint.synced_slot(), Some(newest_slot));
        }
    }

    #[test]
    fn a_short_file_reads_as_missing_slots_and_is_repaired_by_the_next_write() {
        let storage = os();
        let valid = encode_slot(&record(12, false));
        for len in [0, 1, 300, 511, 512, 700, 1023] {
            let dir = tempfile::tempdir().unwrap();
            CheckpointFile::open(&storage, dir.path()).unwrap();
            let mut image = valid.to_vec();
            image.resize(CHECKPOINT_FILE_SIZE, 0xAB);
            image.truncate(len);
            replace_file(&storage, dir.path(), &image);

            let expected = (len >= CHECKPOINT_SLOT_SIZE).then_some(record(12, false));
            assert_eq!(
                CheckpointFile::read(&storage, dir.path()).unwrap(),
                expected,
                "{len}"
            );
            let (mut checkpoint, newest) = CheckpointFile::open(&storage, dir.path()).unwrap();
            assert_eq!(newest, expected, "{len}");
            let sequence = checkpoint.write(1, 2, None, false).unwrap();
            assert_eq!(sequence, if expected.is_some() { 13 } else { 1 }, "{len}");

            let bytes = raw_file(&storage, dir.path());
            assert_eq!(bytes.len(), CHECKPOINT_FILE_SIZE, "{len}");
            let slots = slots_on_disk(&storage, dir.path());
            if expected.is_some() {
                assert_eq!(slots[0], expected, "{len}: synced slot untouched");
                assert_eq!(slots[1].map(|r| r.sequence), Some(13), "{len}");
            } else {
                assert_eq!(slots[0].map(|r| r.sequence), Some(1), "{len}");
                assert_eq!(&bytes[512..], &[0u8; 512][..], "{len}: missing slot zeroed");
            }
        }
    }

    #[test]
    fn an_exhausted_sequence_is_an_error_that_writes_nothing() {
        let storage = os();
        let dir = tempfile::tempdir().unwrap();
        CheckpointFile::open(&storage, dir.path()).unwrap();
        let mut image = encode_slot(&record(u64::MAX, false)).to_vec();
        image.extend_from_slice(&[0u8; CHECKPOINT_SLOT_SIZE]);
        replace_file(&storage, dir.path(), &image);
        let (mut checkpoint, _) = CheckpointFile::open(&storage, dir.path()).unwrap();
        assert!(matches!(
            checkpoint.write(1, 1, None, true),
            Err(Error::Unsupported { .. })
        ));
        assert_eq!(raw_file(&storage, dir.path()), image);
    }

    /// What the recording storage saw, in order.
    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Event {
        Create,
        Write { position: u64, len: usize },
        SyncData,
        SyncDir,
    }

    /// OS storage that records the calls the checkpoint makes, and can fail `sync_data`.
    #[derive(Debug, Default)]
    struct Recording {
        events: Arc<Mutex<Vec<Event>>>,
        fail_syncs: Arc<Mutex<bool>>,
    }

    #[derive(Debug)]
    struct RecordingFile {
        inner: Arc<dyn StorageFile>,
        events: Arc<Mutex<Vec<Event>>>,
        fail_syncs: Arc<Mutex<bool>>,
    }

    impl Storage for Recording {
        fn open(&self, path: &Path, mode: OpenMode) -> Result<Arc<dyn StorageFile>> {
            let inner = OsStorage::new().open(path, mode)?;
            if mode == OpenMode::CreateNew {
                self.events.lock().push(Event::Create);
            }
            Ok(Arc::new(RecordingFile {
                inner,
                events: Arc::clone(&self.events),
                fail_syncs: Arc::clone(&self.fail_syncs),
            }))
        }
        fn create_dir_all(&self, path: &Path) -> Result<()> {
            OsStorage::new().create_dir_all(path)
        }
        fn sync_dir(&self, dir: &Path) -> Result<()> {
            self.events.lock().push(Event::SyncDir);
            OsStorage::new().sync_dir(dir)
        }
        fn rename(&self, from: &Path, to: &Path) -> Result<()> {
            OsStorage::new().rename(from, to)
        }
        fn remove(&self, path: &Path) -> Result<()> {
            OsStorage::new().remove(path)
        }
        fn list(&self, dir: &Path) -> Result<Vec<String>> {
            OsStorage::new().list(dir)
        }
        fn metadata(&self, path: &Path) -> Result<Metadata> {
            OsStorage::new().metadata(path)
        }
        fn lock(&self, path: &Path, mode: LockMode) -> Result<FileLock> {
            OsStorage::new().lock(path, mode)
        }
    }

    impl StorageFile for RecordingFile {
        fn path(&self) -> &Path {
            self.inner.path()
        }
        fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
            self.inner.read_at(buf, offset)
        }
        fn write_all_at(&self, buf: &[u8], offset: u64) -> Result<()> {
            self.events.lock().push(Event::Write {
                position: offset,
                len: buf.len(),
            });
            self.inner.write_all_at(buf, offset)
        }
        fn len(&self) -> Result<u64> {
            self.inner.len()
        }
        fn set_len(&self, len: u64) -> Result<()> {
            self.inner.set_len(len)
        }
        fn sync_data(&self) -> Result<()> {
            if *self.fail_syncs.lock() {
                return Err(Error::io(self.path(), std::io::Error::other("injected")));
            }
            self.events.lock().push(Event::SyncData);
            self.inner.sync_data()
        }
        fn sync_all(&self) -> Result<()> {
            self.inner.sync_all()
        }
    }

    #[test]
    fn the_first_write_syncs_what_open_read_and_only_durable_writes_sync() {
        let recording = Recording::default();
        let events = Arc::clone(&recording.events);
        let storage: Arc<dyn Storage> = Arc::new(recording);
        let dir = tempfile::tempdir().unwrap();
        let (mut checkpoint, _) = CheckpointFile::open(&storage, dir.path()).unwrap();
        // Creation writes the zeros and syncs nothing yet.
        assert_eq!(
            events.lock().drain(..).collect::<Vec<_>>(),
            [
                Event::Create,
                Event::Write {
                    position: 0,
                    len: CHECKPOINT_FILE_SIZE
                },
            ]
        );
        checkpoint.write(1, 0, None, false).unwrap();
        checkpoint.write(2, 0, None, true).unwrap();
        checkpoint.write(3, 0, None, true).unwrap();
        let slot = |position| Event::Write {
            position,
            len: CHECKPOINT_SLOT_SIZE,
        };
        assert_eq!(
            events.lock().drain(..).collect::<Vec<_>>(),
            [
                // The created name and the zeros, durable before the first slot is written.
                Event::SyncData,
                Event::SyncDir,
                slot(0),
                slot(0),
                Event::SyncData,
                slot(512),
                Event::SyncData
            ]
        );
        drop(checkpoint);

        // Reopening an existing file creates and syncs nothing; its first write makes what the
        // open read durable first, even a write that is not durable itself.
        let (mut reopened, _) = CheckpointFile::open(&storage, dir.path()).unwrap();
        assert_eq!(events.lock().drain(..).collect::<Vec<_>>(), []);
        reopened.write(4, 0, None, false).unwrap();
        assert_eq!(
            events.lock().drain(..).collect::<Vec<_>>(),
            [Event::SyncData, Event::SyncDir, slot(0)]
        );
    }

    #[test]
    fn a_failed_sync_of_what_open_read_writes_nothing_and_is_retried() {
        let recording = Recording::default();
        let fail_syncs = Arc::clone(&recording.fail_syncs);
        let storage: Arc<dyn Storage> = Arc::new(recording);
        let dir = tempfile::tempdir().unwrap();
        let (mut checkpoint, _) = CheckpointFile::open(&storage, dir.path()).unwrap();
        checkpoint.write(1, 0, None, true).unwrap();
        drop(checkpoint);
        let image = raw_file(&storage, dir.path());

        let (mut reopened, _) = CheckpointFile::open(&storage, dir.path()).unwrap();
        *fail_syncs.lock() = true;
        assert!(matches!(
            reopened.write_durable(2, 0),
            Err(DurableWriteError::Sync(Error::Io { .. }))
        ));
        assert_eq!(raw_file(&storage, dir.path()), image, "nothing written");
        *fail_syncs.lock() = false;
        assert_eq!(reopened.write(3, 0, None, true).unwrap(), 2);
        assert_eq!(
            slots_on_disk(&storage, dir.path()).map(|r| r.map(|r| r.sequence)),
            [Some(1), Some(2)]
        );
    }

    #[test]
    fn a_clean_shutdown_record_stands_until_a_durable_record_replaces_it() {
        let storage = os();
        let dir = tempfile::tempdir().unwrap();
        let clean = CleanShutdown {
            active_segment_base: 0,
            active_segment_size: 4096,
            log_end_offset: 77,
        };
        let (mut checkpoint, _) = CheckpointFile::open(&storage, dir.path()).unwrap();
        assert!(!checkpoint.clean_shutdown_standing(), "a new file");
        checkpoint.write(77, 0, None, true).unwrap();
        assert!(!checkpoint.clean_shutdown_standing());
        // Nothing stands: consuming writes nothing.
        checkpoint.consume_clean_shutdown(77, 0).unwrap();
        assert_eq!(checkpoint.sequence(), 1);
        checkpoint.write(77, 0, Some(clean), true).unwrap();
        assert!(checkpoint.clean_shutdown_standing(), "close's record");
        drop(checkpoint);

        // A clean open: the record stands, and open wrote nothing.
        let (mut reopened, newest) = CheckpointFile::open(&storage, dir.path()).unwrap();
        assert_eq!(newest.and_then(|r| r.clean_shutdown), Some(clean));
        assert!(reopened.clean_shutdown_standing());
        reopened.consume_clean_shutdown(77, 3).unwrap();
        assert!(!reopened.clean_shutdown_standing());
        let consumed = CheckpointFile::read(&storage, dir.path()).unwrap().unwrap();
        assert_eq!(
            (
                consumed.sequence,
                consumed.recovery_point,
                consumed.log_start_offset
            ),
            (3, 77, 3)
        );
        assert_eq!(consumed.clean_shutdown, None);
        assert_eq!(
            reopened.synced_slot(),
            Some(0),
            "durably: the synced slot moved"
        );
        reopened.consume_clean_shutdown(90, 3).unwrap();
        assert_eq!(reopened.sequence(), 3, "consumed once");
        drop(reopened);

        // A record without the fields is durable while a clean one stands, even when the
        // caller asked for a cadence write: the clean record must never be the newest synced
        // record once a later one exists.
        let (mut checkpoint, _) = CheckpointFile::open(&storage, dir.path()).unwrap();
        checkpoint.write(90, 3, Some(clean), true).unwrap();
        assert!(checkpoint.clean_shutdown_standing());
        let synced_before = checkpoint.synced_slot();
        checkpoint.write(91, 3, None, false).unwrap();
        assert!(!checkpoint.clean_shutdown_standing());
        let promoted = checkpoint.synced_slot();
        assert_ne!(promoted, synced_before, "written durably");
        checkpoint.write(92, 3, None, false).unwrap();
        assert_eq!(
            checkpoint.synced_slot(),
            promoted,
            "later cadence writes stay non-durable"
        );
    }

    #[test]
    fn a_failed_sync_keeps_the_synced_slot_and_never_reuses_a_sequence() {
        let recording = Recording::default();
        let fail_syncs = Arc::clone(&recording.fail_syncs);
        let storage: Arc<dyn Storage> = Arc::new(recording);
        let dir = tempfile::tempdir().unwrap();
        let (mut checkpoint, _) = CheckpointFile::open(&storage, dir.path()).unwrap();
        assert_eq!(checkpoint.write(1, 0, None, true).unwrap(), 1);
        assert_eq!(checkpoint.synced_slot(), Some(0));

        *fail_syncs.lock() = true;
        assert!(matches!(
            checkpoint.write(2, 0, None, true),
            Err(Error::Io { .. })
        ));
        assert_eq!(checkpoint.synced_slot(), Some(0), "slot 1 was never synced");
        *fail_syncs.lock() = false;

        assert_eq!(checkpoint.write(3, 0, None, true).unwrap(), 3);
        let slots = slots_on_disk(&storage, dir.path());
        assert_eq!(slots[0].map(|r| r.sequence), Some(1));
        assert_eq!(
            slots[1].map(|r| (r.sequence, r.recovery_point)),
            Some((3, 3))
        );
    }

    /// One step of the crash model.
    #[derive(Debug, Clone)]
    enum Step {
        Write {
            durable: bool,
            clean: bool,
        },
        /// [`CheckpointFile::write_compacted`]: durable, without clean-shutdown fields.
        WriteCompacted,
        /// Crash and reopen; the unsynced slot ends up as `CrashOutcome` says.
        Crash(CrashOutcome),
        /// The process dies and a new one reopens; the machine stays up, so the page cache
        /// keeps every write, synced or not.
        ProcessCrash,
    }

    #[derive(Debug, Clone, Copy)]
    enum CrashOutcome {
        /// The OS wrote everything back before the crash.
        AllWritten,
        /// Nothing since the last sync reached the disk.
        NothingWritten,
        /// The unsynced slot holds garbage.
        Garbage,
        /// The unsynced slot's first half is new, the rest old.
        HalfWritten,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => (any::<bool>(), any::<bool>())
                .prop_map(|(durable, clean)| Step::Write { durable, clean }),
            1 => Just(Step::WriteCompacted),
            1 => prop_oneof![
                Just(CrashOutcome::AllWritten),
                Just(CrashOutcome::NothingWritten),
                Just(CrashOutcome::Garbage),
                Just(CrashOutcome::HalfWritten),
            ]
            .prop_map(Step::Crash),
            1 => Just(Step::ProcessCrash),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// Models the disk as the image of the last sync: a crash may lose or tear anything
        /// written since, and the newest synced record must always survive. Once a compacted
        /// write returned, every record read back carries the flag.
        #[test]
        fn the_newest_synced_record_survives_every_crash(
            steps in proptest::collection::vec(step(), 1..24),
        ) {
            let storage = os();
            let dir = tempfile::tempdir().unwrap();
            let (mut checkpoint, _) = CheckpointFile::open(&storage, dir.path()).unwrap();
            let mut disk = raw_file(&storage, dir.path());
            let mut last_written: Option<CheckpointRecord> = None;
            let mut last_synced: Option<CheckpointRecord> = None;
            // A reopen syncs nothing: its first write makes what it read durable first.
            let mut read_back_unsynced = false;
            for (index, step) in steps.into_iter().enumerate() {
                let (durable, clean, set_compacted) = match step {
                    Step::Write { durable, clean } => (durable, clean, false),
                    Step::WriteCompacted => (true, false, true),
                    _ => (false, false, false),
                };
                match step {
                    Step::Write { .. } | Step::WriteCompacted => {
                        let synced_before = checkpoint.synced_slot();
                        let image_before = raw_file(&storage, dir.path());
                        if read_back_unsynced {
                            disk = image_before.clone();
                            last_synced = last_written;
                            read_back_unsynced = false;
                        }
                        let clean_stood = checkpoint.clean_shutdown_standing();
                        let position = i64::try_from(index).unwrap();
                        let clean_shutdown = clean.then_some(CleanShutdown {
                            active_segment_base: position,
                            active_segment_size: 10,
                            log_end_offset: position + 1,
                        });
                        let expected_sequence = checkpoint.sequence() + 1;
                        let compacted = set_compacted || last_written.is_some_and(|r| r.compacted);
                        let sequence = if set_compacted {
                            checkpoint.write_compacted(position, position / 2).unwrap()
                        } else {
                            checkpoint
                                .write(position, position / 2, clean_shutdown, durable)
                                .unwrap()
                        };
                        prop_assert_eq!(sequence, expected_sequence);
                        if let Some(slot) = synced_before {
                            let range = slot * CHECKPOINT_SLOT_SIZE..(slot + 1) * CHECKPOINT_SLOT_SIZE;
                            prop_assert_eq!(
                                &raw_file(&storage, dir.path())[range.clone()],
                                &image_before[range],
                                "a write touched the synced slot"
                            );
                        }
                        let written = CheckpointRecord {
                            sequence,
                            recovery_point: position,
                            log_start_offset: position / 2,
                            clean_shutdown,
                            compacted,
                        };
                        last_written = Some(written);
                        // A record without clean fields replacing a standing clean one is
                        // written durably whatever the caller asked.
                        if durable || (clean_stood && !clean) {
                            last_synced = Some(written);
                            disk = raw_file(&storage, dir.path());
                        }
                        prop_assert_eq!(CheckpointFile::read(&storage, dir.path()).unwrap(), last_written);
                    }
                    Step::Crash(outcome) => {
                        let current = raw_file(&storage, dir.path());
                        let mut crashed = current.clone();
                        for slot in 0..2 {
                            let range = slot * CHECKPOINT_SLOT_SIZE..(slot + 1) * CHECKPOINT_SLOT_SIZE;
                            if current[range.clone()] == disk[range.clone()] {
                                continue;
                            }
                            let unsynced = &mut crashed[range.clone()];
                            match outcome {
                                CrashOutcome::AllWritten => {}
                                CrashOutcome::NothingWritten => unsynced.copy_from_slice(&disk[range]),
                                CrashOutcome::Garbage => {
                                    for (i, byte) in unsynced.iter_mut().enumerate() {
                                        *byte = u8::try_from((i * 37 + index) % 256).unwrap();
                                    }
                                }
                                CrashOutcome::HalfWritten => unsynced[256..]
                                    .copy_from_slice(&disk[range.start + 256..range.end]),
                            }
                        }
                        drop(checkpoint);
                        replace_file(&storage, dir.path(), &crashed);
                        let expected = match outcome {
                            CrashOutcome::AllWritten => last_written,
                            _ => last_synced,
                        };
                        let (reopened, newest) = CheckpointFile::open(&storage, dir.path()).unwrap();
                        prop_assert_eq!(newest, expected);
                        prop_assert_eq!(reopened.sequence(), expected.map_or(0, |r| r.sequence));
                        checkpoint = reopened;
                        // What a crashed machine comes back with is on its disk.
                        disk = crashed;
                        last_written = expected;
                        last_synced = expected;
                        read_back_unsynced = false;
                    }
                    Step::ProcessCrash => {
                        drop(checkpoint);
                        let (reopened, newest) = CheckpointFile::open(&storage, dir.path()).unwrap();
                        prop_assert_eq!(newest, last_written, "the page cache's newest record");
                        checkpoint = reopened;
                        read_back_unsynced = true;
                    }
                }
            }
        }
    }
}
