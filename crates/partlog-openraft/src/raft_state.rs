//! `partlog.raft-state`: the Raft vote, the committed log id and the last purged log id of one
//! log directory, in two CRC-32C slots.
//!
//! The file is built like partlog's `partlog.checkpoint` ([`partlog::unstable::checkpoint`]):
//! two 512-byte slots,
//! each a complete record with a sequence number and a CRC, so that a crash in the middle of a
//! write can tear only the slot that does not hold the newest synced record. Every write here is
//! durable: it fsyncs before it returns, since openraft's `save_vote` must not return before the
//! vote is on disk. A slot is 512 bytes, the simulator's and a disk's sector, so a torn write of
//! one slot never touches the other.
//!
//! | bytes      | field                   | type  | notes                                       |
//! |------------|-------------------------|-------|---------------------------------------------|
//! | [0, 4)     | magic                   | bytes | `b"PLRS"`                                   |
//! | [4, 6)     | version                 | u16   | 1                                           |
//! | [6, 8)     | flags                   | u16   | see [`RaftStateRecord`]; other bits 0        |
//! | [8, 16)    | sequence                | u64   | strictly increases from write to write      |
//! | [16, 24)   | vote term               | u64   | zero unless flag bit 0                      |
//! | [24, 32)   | vote node id            | u64   | zero unless flag bit 0                      |
//! | [32, 56)   | committed log id        | 3×u64 | term, node id, index; zero unless bit 2     |
//! | [56, 80)   | last purged log id      | 3×u64 | term, node id, index; zero unless bit 3     |
//! | [80, 508)  | padding                 | zeros |                                             |
//! | [508, 512) | CRC-32C of [0, 508)     | u32   |                                             |
//!
//! Flags: bit 0 a vote is present, bit 1 the vote is committed (only with bit 0), bit 2 a
//! committed log id is present, bit 3 a last purged log id is present.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use partlog::unstable::{OpenMode, Storage, StorageFile};
use partlog::{Corruption, Error};

/// The file's name inside a log directory. No rule of Kafka's log loader matches it, and
/// partlog's recovery leaves names it does not know alone.
pub const RAFT_STATE_FILE_NAME: &str = "partlog.raft-state";

/// The size of one slot in bytes.
pub const RAFT_STATE_SLOT_SIZE: usize = 512;

/// The size of the whole file: two slots.
pub const RAFT_STATE_FILE_SIZE: usize = 2 * RAFT_STATE_SLOT_SIZE;

const MAGIC: [u8; 4] = *b"PLRS";
const VERSION: u16 = 1;
const FLAG_VOTE: u16 = 1;
const FLAG_VOTE_COMMITTED: u16 = 1 << 1;
const FLAG_COMMITTED: u16 = 1 << 2;
const FLAG_PURGED: u16 = 1 << 3;
const KNOWN_FLAGS: u16 = FLAG_VOTE | FLAG_VOTE_COMMITTED | FLAG_COMMITTED | FLAG_PURGED;
const CRC_POSITION: usize = RAFT_STATE_SLOT_SIZE - 4;
const FIELDS_END: usize = 80;

/// A vote as the file stores it: openraft's `Vote<u64>` without the type parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StoredVote {
    /// The term voted in.
    pub term: u64,
    /// The node voted for.
    pub node_id: u64,
    /// Whether a quorum granted the vote (the node is the established leader of the term).
    pub committed: bool,
}

/// A log id as the file stores it: openraft's `LogId<u64>` (term, leader node id, index).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StoredLogId {
    /// The term of the leader that proposed the entry.
    pub term: u64,
    /// The node id of that leader.
    pub node_id: u64,
    /// The entry's index.
    pub index: u64,
}

/// The contents of one valid slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RaftStateRecord {
    /// Orders the two slots: the valid slot with the higher sequence is the newest record.
    pub sequence: u64,
    /// The last vote saved, if any.
    pub vote: Option<StoredVote>,
    /// The last committed log id saved, if any.
    pub committed: Option<StoredLogId>,
    /// The last purged log id, if any: saved before the log's entries are removed.
    pub last_purged: Option<StoredLogId>,
}

fn put_u64(slot: &mut [u8], at: usize, value: u64) {
    if let Some(field) = slot.get_mut(at..at + 8) {
        field.copy_from_slice(&value.to_be_bytes());
    }
}

fn get_u64(slot: &[u8], at: usize) -> Option<u64> {
    slot.get(at..)?
        .first_chunk::<8>()
        .map(|b| u64::from_be_bytes(*b))
}

fn put_log_id(slot: &mut [u8], at: usize, id: Option<StoredLogId>) {
    let id = id.unwrap_or(StoredLogId {
        term: 0,
        node_id: 0,
        index: 0,
    });
    put_u64(slot, at, id.term);
    put_u64(slot, at + 8, id.node_id);
    put_u64(slot, at + 16, id.index);
}

fn get_log_id(slot: &[u8], at: usize, present: bool) -> Option<Option<StoredLogId>> {
    let id = StoredLogId {
        term: get_u64(slot, at)?,
        node_id: get_u64(slot, at + 8)?,
        index: get_u64(slot, at + 16)?,
    };
    if present {
        Some(Some(id))
    } else if id.term == 0 && id.node_id == 0 && id.index == 0 {
        Some(None)
    } else {
        // Bytes for an absent field: not a record this version writes.
        None
    }
}

/// Encodes `record` as one 512-byte slot, CRC included.
pub fn encode_slot(record: &RaftStateRecord) -> [u8; RAFT_STATE_SLOT_SIZE] {
    let mut slot = [0u8; RAFT_STATE_SLOT_SIZE];
    let mut flags = 0u16;
    if let Some(vote) = record.vote {
        flags |= FLAG_VOTE;
        if vote.committed {
            flags |= FLAG_VOTE_COMMITTED;
        }
        put_u64(&mut slot, 16, vote.term);
        put_u64(&mut slot, 24, vote.node_id);
    }
    if record.committed.is_some() {
        flags |= FLAG_COMMITTED;
    }
    if record.last_purged.is_some() {
        flags |= FLAG_PURGED;
    }
    slot[0..4].copy_from_slice(&MAGIC);
    slot[4..6].copy_from_slice(&VERSION.to_be_bytes());
    slot[6..8].copy_from_slice(&flags.to_be_bytes());
    put_u64(&mut slot, 8, record.sequence);
    put_log_id(&mut slot, 32, record.committed);
    put_log_id(&mut slot, 56, record.last_purged);
    let crc = crc32c_of(&slot[..CRC_POSITION]);
    slot[CRC_POSITION..].copy_from_slice(&crc.to_be_bytes());
    slot
}

/// Decodes one slot. `None` means the slot is invalid: wrong length, bad CRC, bad magic, another
/// version, unknown flags, nonzero padding, or bytes in a field its flag says is absent.
pub fn decode_slot(slot: &[u8]) -> Option<RaftStateRecord> {
    let slot: &[u8; RAFT_STATE_SLOT_SIZE] = slot.try_into().ok()?;
    let (covered, stored_crc) = slot.split_last_chunk::<4>()?;
    if crc32c_of(covered) != u32::from_be_bytes(*stored_crc) {
        return None;
    }
    if slot.first_chunk::<4>()? != &MAGIC {
        return None;
    }
    let version = u16::from_be_bytes(*slot.get(4..)?.first_chunk::<2>()?);
    let flags = u16::from_be_bytes(*slot.get(6..)?.first_chunk::<2>()?);
    if version != VERSION || flags & !KNOWN_FLAGS != 0 {
        return None;
    }
    if covered.get(FIELDS_END..)?.iter().any(|&b| b != 0) {
        return None;
    }
    let (term, node_id) = (get_u64(slot, 16)?, get_u64(slot, 24)?);
    let vote = if flags & FLAG_VOTE != 0 {
        Some(StoredVote {
            term,
            node_id,
            committed: flags & FLAG_VOTE_COMMITTED != 0,
        })
    } else if term != 0 || node_id != 0 || flags & FLAG_VOTE_COMMITTED != 0 {
        return None;
    } else {
        None
    };
    Some(RaftStateRecord {
        sequence: get_u64(slot, 8)?,
        vote,
        committed: get_log_id(slot, 32, flags & FLAG_COMMITTED != 0)?,
        last_purged: get_log_id(slot, 56, flags & FLAG_PURGED != 0)?,
    })
}

/// CRC-32C (Castagnoli), the checksum of Kafka's batches and of `partlog.checkpoint`.
fn crc32c_of(bytes: &[u8]) -> u32 {
    partlog::unstable::format::crc32c(bytes)
}

/// The newest valid record of a two-slot image and its slot: the higher sequence, slot 0 on a
/// tie (which this module never writes).
fn newest(slots: [Option<RaftStateRecord>; 2]) -> Option<(usize, RaftStateRecord)> {
    match slots {
        [Some(first), Some(second)] if second.sequence > first.sequence => Some((1, second)),
        [Some(first), _] => Some((0, first)),
        [None, Some(second)] => Some((1, second)),
        [None, None] => None,
    }
}

/// What the two slots of a file hold: each one's record, `None` where invalid or missing.
///
/// Fails when neither slot is valid yet both hold bytes. Zeros are a slot never written, and
/// only the first write of a file goes to a zeroed slot while the other holds nothing either; a
/// crash that tears it loses no vote that was acknowledged. Two written, invalid slots are
/// damage that may have taken a vote openraft was promised, which must not silently read as
/// "never voted".
fn read_slots(file: &dyn StorageFile) -> partlog::Result<[Option<RaftStateRecord>; 2]> {
    let file_len = file.len()?;
    let mut image = [0u8; RAFT_STATE_FILE_SIZE];
    // A file torn at creation may be short: the slots it lacks are invalid, not an error.
    let present =
        usize::try_from(file_len).map_or(RAFT_STATE_FILE_SIZE, |len| len.min(RAFT_STATE_FILE_SIZE));
    if let Some(head) = image.get_mut(..present) {
        file.read_exact_at(head, 0)?;
    }
    let slot_bytes = |slot: usize| {
        let range = slot * RAFT_STATE_SLOT_SIZE..(slot + 1) * RAFT_STATE_SLOT_SIZE;
        image.get(range).unwrap_or(&[])
    };
    let decode = |slot: usize| {
        if present < (slot + 1) * RAFT_STATE_SLOT_SIZE {
            return None;
        }
        decode_slot(slot_bytes(slot))
    };
    let slots = [decode(0), decode(1)];
    let written = |slot: usize| slot_bytes(slot).iter().any(|&b| b != 0);
    if slots == [None, None] && written(0) && written(1) {
        return Err(Error::Corrupt {
            file: file.path().to_path_buf(),
            position: 0,
            what: Corruption::BadHeader(
                "neither slot of partlog.raft-state is valid, and both were written: the vote \
                 and the purge point are lost (restore the file, or remove it only if this node \
                 may safely forget its vote)",
            ),
        });
    }
    Ok(slots)
}

/// `dir/partlog.raft-state`.
pub fn raft_state_path(dir: &Path) -> PathBuf {
    dir.join(RAFT_STATE_FILE_NAME)
}

/// `partlog.raft-state` open for writing. Every [`write`](Self::write) is durable on return.
#[derive(Debug)]
pub struct RaftStateFile {
    file: Arc<dyn StorageFile>,
    /// The newest record: the one read at open, then each one written.
    current: RaftStateRecord,
    /// The slot holding the newest synced record; the next write goes to the other.
    synced_slot: Option<usize>,
}

impl RaftStateFile {
    /// Opens `dir/partlog.raft-state`, creating it (1024 zero bytes: no valid slot) if missing.
    ///
    /// Before returning it syncs the file and the directory in every case: a created file's
    /// name must be durable, and a record read back may come from a write whose process died
    /// before its sync returned, so it is made durable before the write rule relies on it.
    pub fn open(storage: &Arc<dyn Storage>, dir: &Path) -> partlog::Result<RaftStateFile> {
        let path = raft_state_path(dir);
        let file = match storage.open(&path, OpenMode::ReadWrite) {
            Ok(file) => file,
            Err(e) if e.io_kind() == Some(std::io::ErrorKind::NotFound) => {
                let file = storage.open(&path, OpenMode::CreateNew)?;
                file.write_all_at(&[0u8; RAFT_STATE_FILE_SIZE], 0)?;
                file
            }
            Err(e) => return Err(e),
        };
        let slots = read_slots(file.as_ref())?;
        if file.len()? < RAFT_STATE_FILE_SIZE as u64 {
            // Torn at creation: the missing slots held nothing valid, so zeros lose nothing.
            let len = file.len()?;
            let missing = usize::try_from(RAFT_STATE_FILE_SIZE as u64 - len).unwrap_or(0);
            if let Some(zeros) = [0u8; RAFT_STATE_FILE_SIZE].get(..missing) {
                file.write_all_at(zeros, len)?;
            }
        }
        file.sync_data()?;
        storage.sync_dir(dir)?;
        let newest = newest(slots);
        Ok(RaftStateFile {
            file,
            current: newest.map(|(_, record)| record).unwrap_or_default(),
            synced_slot: newest.map(|(slot, _)| slot),
        })
    }

    /// Reads `dir/partlog.raft-state` without creating or writing anything: the newest valid
    /// record, or `None` if the file is absent or holds no valid slot.
    pub fn read(
        storage: &Arc<dyn Storage>,
        dir: &Path,
    ) -> partlog::Result<Option<RaftStateRecord>> {
        let file = match storage.open(&raft_state_path(dir), OpenMode::Read) {
            Ok(file) => file,
            Err(e) if e.io_kind() == Some(std::io::ErrorKind::NotFound) => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(newest(read_slots(file.as_ref())?).map(|(_, record)| record))
    }

    /// The newest record: read at open, or the last one written.
    pub fn current(&self) -> &RaftStateRecord {
        &self.current
    }

    /// Writes `change` applied to the current record as the next record (sequence + 1) into the
    /// slot that does not hold the newest synced record, and syncs it before returning.
    ///
    /// On an error nothing changes in memory; the slot written may be torn, never the synced
    /// one. The sequence is used up either way, so one number never names two contents.
    pub fn write(&mut self, change: impl FnOnce(&mut RaftStateRecord)) -> partlog::Result<()> {
        let mut next = self.current;
        change(&mut next);
        next.sequence = self
            .current
            .sequence
            .checked_add(1)
            .ok_or_else(|| Error::Unsupported {
                what: format!(
                    "{} holds sequence number {}, which cannot be followed",
                    self.file.path().display(),
                    self.current.sequence
                ),
            })?;
        let target = match self.synced_slot {
            Some(0) => 1,
            Some(_) | None => 0,
        };
        let position = if target == 0 {
            0
        } else {
            RAFT_STATE_SLOT_SIZE as u64
        };
        let burned = RaftStateRecord {
            sequence: next.sequence,
            ..self.current
        };
        let result = self
            .file
            .write_all_at(&encode_slot(&next), position)
            .and_then(|()| self.file.sync_data());
        match result {
            Ok(()) => {
                self.current = next;
                self.synced_slot = Some(target);
                Ok(())
            }
            Err(e) => {
                // The sequence is spent; the record stays what was last made durable.
                self.current = burned;
                Err(e)
            }
        }
    }

    /// The path of the file.
    pub fn path(&self) -> &Path {
        self.file.path()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use partlog::unstable::OsStorage;

    fn record(sequence: u64) -> RaftStateRecord {
        RaftStateRecord {
            sequence,
            vote: Some(StoredVote {
                term: 0x0102_0304_0506_0708,
                node_id: 0x1112_1314_1516_1718,
                committed: true,
            }),
            committed: Some(StoredLogId {
                term: 3,
                node_id: 4,
                index: 5,
            }),
            last_purged: None,
        }
    }

    #[test]
    fn a_slot_round_trips_and_any_flipped_byte_invalidates_it() {
        let slot = encode_slot(&record(9));
        assert_eq!(decode_slot(&slot), Some(record(9)));
        for at in [0, 5, 7, 9, 17, 40, 60, 100, 509] {
            let mut bad = slot;
            bad[at] ^= 0x40;
            assert_eq!(decode_slot(&bad), None, "byte {at} flipped");
        }
        assert_eq!(decode_slot(&slot[..511]), None);
    }

    #[test]
    fn an_absent_field_with_bytes_is_an_invalid_slot() {
        let mut slot = encode_slot(&RaftStateRecord::default());
        slot[60] = 1;
        let crc = crc32c_of(&slot[..CRC_POSITION]);
        slot[CRC_POSITION..].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(decode_slot(&slot), None);
    }

    #[test]
    fn two_written_invalid_slots_are_corruption_but_one_torn_first_write_is_no_record() {
        let storage: Arc<dyn Storage> = Arc::new(OsStorage::new());
        let dir = tempfile::tempdir().unwrap();
        let path = raft_state_path(dir.path());
        let mut torn = [0u8; RAFT_STATE_FILE_SIZE];
        torn[..100].copy_from_slice(&encode_slot(&record(1))[..100]);
        std::fs::write(&path, torn).unwrap();
        assert_eq!(RaftStateFile::read(&storage, dir.path()).unwrap(), None);
        let file = RaftStateFile::open(&storage, dir.path()).unwrap();
        assert_eq!(file.current(), &RaftStateRecord::default());
        drop(file);
        torn[600] = 1;
        std::fs::write(&path, torn).unwrap();
        let error = RaftStateFile::open(&storage, dir.path()).unwrap_err();
        assert!(matches!(error, Error::Corrupt { .. }), "{error}");
        assert!(RaftStateFile::read(&storage, dir.path()).is_err());
    }

    #[test]
    fn writes_alternate_slots_and_reopen_returns_the_newest() {
        let storage: Arc<dyn Storage> = Arc::new(OsStorage::new());
        let dir = tempfile::tempdir().unwrap();
        let mut file = RaftStateFile::open(&storage, dir.path()).unwrap();
        assert_eq!(file.current(), &RaftStateRecord::default());
        for term in 1..=5 {
            file.write(|r| {
                r.vote = Some(StoredVote {
                    term,
                    node_id: 7,
                    committed: false,
                });
            })
            .unwrap();
        }
        file.write(|r| {
            r.last_purged = Some(StoredLogId {
                term: 5,
                node_id: 7,
                index: 10,
            });
        })
        .unwrap();
        let expected = *file.current();
        assert_eq!(expected.sequence, 6);
        assert_eq!(expected.vote.map(|v| v.term), Some(5));
        drop(file);
        assert_eq!(
            RaftStateFile::read(&storage, dir.path()).unwrap(),
            Some(expected)
        );
        let reopened = RaftStateFile::open(&storage, dir.path()).unwrap();
        assert_eq!(reopened.current(), &expected);
    }
}
