//! The two-slot CRC-32C file of the engine's own state (`partlog.producer-ids`,
//! `partlog.topics`), written as partlog's `partlog.checkpoint` is.
//!
//! The file is two slots of equal size `S` (a multiple of 512: one or more of the simulator's
//! and a disk's sectors), slot 0 at `[0, S)` and slot 1 at `[S, 2S)`; its length is exactly
//! `2S`, so a reader finds `S` from the length alone. Each slot holds one whole record:
//!
//! | bytes          | field                   | type  | notes                                  |
//! |----------------|-------------------------|-------|----------------------------------------|
//! | [0, 4)         | magic                   | bytes | one per file                           |
//! | [4, 6)         | version                 | u16   | one per file                           |
//! | [6, 8)         | flags                   | u16   | 0                                      |
//! | [8, 16)        | sequence                | u64   | +1 per write                           |
//! | [16, 20)       | payload length `n`      | u32   | at most `S − 24`                       |
//! | [20, 20 + n)   | payload                 | bytes | the file's own encoding                |
//! | [20 + n, S − 4)| padding                 | zeros |                                        |
//! | [S − 4, S)     | CRC-32C of [0, S − 4)   | u32   |                                        |
//!
//! **Writing.** A new file is written whole under a temporary name (`<name>.tmp`: slot 0 holds
//! the first record, slot 1 zeros), fsynced, renamed into place, and the directory fsynced, so
//! the name never shows a file without a valid record. Each later write goes to the slot that
//! does *not* hold the newest synced record and is fsynced before it returns: a torn write
//! spoils only the record being written. A record too big for its slot is written as a new,
//! larger file the same way as a new one (the rename replaces the old file whole).
//!
//! **Reading.** The newest record is the valid slot with the higher sequence (slot 0 on a tie,
//! never written). A file with no valid slot, or whose length is not two equal slots, is
//! `Error::Corrupt`: it was created with a valid record, so nothing but damage empties it, and
//! the state it held must not silently restart.

// The design of record: FORMAT.md §6.2 and §14.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use partlog::unstable::{OpenMode, Storage, StorageFile};
use partlog::{Corruption, Error};

/// The smallest slot, and the unit slots grow by: one sector.
pub(crate) const SECTOR: usize = 512;
/// Bytes of a slot that are not payload: the 20-byte head and the CRC.
const OVERHEAD: usize = 24;
const PAYLOAD_AT: usize = 20;

/// What one kind of slot file is: its name and the first bytes every slot of it carries.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SlotFileKind {
    /// The file name inside its directory.
    pub name: &'static str,
    /// The temporary name a new or grown file is written under.
    pub temp_name: &'static str,
    /// The four magic bytes.
    pub magic: [u8; 4],
    /// The version this code writes and reads.
    pub version: u16,
}

/// One decoded slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SlotRecord {
    /// Orders the slots: the valid one with the higher sequence is the newest.
    pub sequence: u64,
    /// The payload bytes.
    pub payload: Vec<u8>,
}

/// The slot size that holds `payload_len` bytes: the smallest power of two times 512 that
/// fits, so that a growing file is rewritten a logarithmic number of times.
pub(crate) fn slot_size_for(payload_len: usize) -> usize {
    let needed = payload_len.saturating_add(OVERHEAD);
    let mut size = SECTOR;
    while size < needed {
        size = size.saturating_mul(2);
    }
    size
}

/// Encodes one slot of `slot_size` bytes, or `None` when the payload does not fit.
pub(crate) fn encode_slot(
    kind: &SlotFileKind,
    slot_size: usize,
    sequence: u64,
    payload: &[u8],
) -> Option<Vec<u8>> {
    let length = u32::try_from(payload.len()).ok()?;
    if !slot_size.is_multiple_of(SECTOR) || payload.len() > slot_size.checked_sub(OVERHEAD)? {
        return None;
    }
    let mut slot = vec![0u8; slot_size];
    slot[0..4].copy_from_slice(&kind.magic);
    slot[4..6].copy_from_slice(&kind.version.to_be_bytes());
    slot[8..16].copy_from_slice(&sequence.to_be_bytes());
    slot[16..20].copy_from_slice(&length.to_be_bytes());
    slot[PAYLOAD_AT..PAYLOAD_AT + payload.len()].copy_from_slice(payload);
    let crc_at = slot_size - 4;
    let crc = partlog::unstable::format::crc32c(&slot[..crc_at]);
    slot[crc_at..].copy_from_slice(&crc.to_be_bytes());
    Some(slot)
}

/// Decodes one slot: `None` when it is invalid (bad CRC, magic, version or flags, a length
/// past the slot, or nonzero padding).
pub(crate) fn decode_slot(kind: &SlotFileKind, slot: &[u8]) -> Option<SlotRecord> {
    let (covered, crc) = slot.split_last_chunk::<4>()?;
    if partlog::unstable::format::crc32c(covered) != u32::from_be_bytes(*crc) {
        return None;
    }
    let magic = covered.first_chunk::<4>()?;
    let version = u16::from_be_bytes(*covered.get(4..)?.first_chunk::<2>()?);
    let flags = u16::from_be_bytes(*covered.get(6..)?.first_chunk::<2>()?);
    if magic != &kind.magic || version != kind.version || flags != 0 {
        return None;
    }
    let sequence = u64::from_be_bytes(*covered.get(8..)?.first_chunk::<8>()?);
    let length = u32::from_be_bytes(*covered.get(16..)?.first_chunk::<4>()?);
    let end = PAYLOAD_AT.checked_add(usize::try_from(length).ok()?)?;
    let payload = covered.get(PAYLOAD_AT..end)?;
    if covered.get(end..)?.iter().any(|&b| b != 0) {
        return None;
    }
    Some(SlotRecord {
        sequence,
        payload: payload.to_vec(),
    })
}

/// The newest of two decoded slots and its index: the higher sequence, slot 0 on a tie.
fn newest(slots: [Option<SlotRecord>; 2]) -> Option<(usize, SlotRecord)> {
    match slots {
        [Some(first), Some(second)] if second.sequence > first.sequence => Some((1, second)),
        [Some(first), _] => Some((0, first)),
        [None, Some(second)] => Some((1, second)),
        [None, None] => None,
    }
}

fn corrupt(path: &Path, what: &'static str) -> Error {
    Error::Corrupt {
        file: path.to_path_buf(),
        position: 0,
        what: Corruption::BadHeader(what),
    }
}

/// Reads both slots of an open file: the newest valid record and its slot, and the slot size.
fn read_newest(
    kind: &SlotFileKind,
    file: &dyn StorageFile,
) -> Result<(usize, SlotRecord, usize), Error> {
    let len = file.len()?;
    let slot_size = usize::try_from(len / 2).unwrap_or(0);
    if !len.is_multiple_of(2) || slot_size < SECTOR || !slot_size.is_multiple_of(SECTOR) {
        return Err(corrupt(
            file.path(),
            "the file is not two equal slots of a multiple of 512 bytes: it was damaged (restore it from a backup)",
        ));
    }
    let image = file.read_exact_to_vec(slot_size * 2, 0)?;
    let (first, second) = image.split_at(slot_size);
    match newest([decode_slot(kind, first), decode_slot(kind, second)]) {
        Some((slot, record)) => Ok((slot, record, slot_size)),
        None => Err(corrupt(
            file.path(),
            "neither slot holds a valid record, though the file was created with one: it was damaged (restore it from a backup)",
        )),
    }
}

/// A slot file open for writing. See the [module docs](self) for the layout and write rule.
#[derive(Debug)]
pub(crate) struct SlotFile {
    kind: SlotFileKind,
    storage: Arc<dyn Storage>,
    dir: PathBuf,
    file: Arc<dyn StorageFile>,
    slot_size: usize,
    /// The sequence of the last record written or read; the next write uses the one after.
    sequence: u64,
    /// The slot holding the newest synced record; the next write goes to the other.
    synced_slot: usize,
    /// A write failed: what the disk holds is unknown (a failed fsync may have dropped the
    /// slot's pages; a failed growth may have renamed the new file into place), so every
    /// later write fails until the file is opened again, as a log poisons itself.
    poisoned: bool,
}

impl SlotFile {
    /// Opens `dir/<name>` and returns it with its newest record, or `None` when the file does
    /// not exist.
    ///
    /// A record read back may come from a write whose process died before its fsync returned:
    /// it is fsynced here, with the directory, before the write rule relies on it.
    ///
    /// # Errors
    /// `Corrupt` when no slot is valid or the length is not two equal slots; I/O errors.
    pub(crate) fn open(
        kind: SlotFileKind,
        storage: &Arc<dyn Storage>,
        dir: &Path,
    ) -> Result<Option<(SlotFile, Vec<u8>)>, Error> {
        let path = dir.join(kind.name);
        let file = match storage.open(&path, OpenMode::ReadWrite) {
            Ok(file) => file,
            Err(e) if e.io_kind() == Some(std::io::ErrorKind::NotFound) => return Ok(None),
            Err(e) => return Err(e),
        };
        let (slot, record, slot_size) = read_newest(&kind, file.as_ref())?;
        file.sync_data()?;
        storage.sync_dir(dir)?;
        let slot_file = SlotFile {
            kind,
            storage: Arc::clone(storage),
            dir: dir.to_path_buf(),
            file,
            slot_size,
            sequence: record.sequence,
            synced_slot: slot,
            poisoned: false,
        };
        Ok(Some((slot_file, record.payload)))
    }

    /// Reads `dir/<name>` without writing anything: the newest record's payload, or `None`
    /// when the file does not exist.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub(crate) fn read(
        kind: &SlotFileKind,
        storage: &Arc<dyn Storage>,
        dir: &Path,
    ) -> Result<Option<Vec<u8>>, Error> {
        let file = match storage.open(&dir.join(kind.name), OpenMode::Read) {
            Ok(file) => file,
            Err(e) if e.io_kind() == Some(std::io::ErrorKind::NotFound) => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(Some(read_newest(kind, file.as_ref())?.1.payload))
    }

    /// Creates `dir/<name>` holding `payload` as its first record (sequence 1), durably:
    /// written under the temporary name, fsynced, renamed, and the directory fsynced. Replaces
    /// any file of that name.
    ///
    /// # Errors
    /// I/O errors; `InvalidArgument` for a payload beyond 4 GiB.
    pub(crate) fn create(
        kind: SlotFileKind,
        storage: &Arc<dyn Storage>,
        dir: &Path,
        payload: &[u8],
    ) -> Result<SlotFile, Error> {
        let slot_size = slot_size_for(payload.len());
        let file = write_whole(&kind, storage, dir, slot_size, 1, payload)?;
        Ok(SlotFile {
            kind,
            storage: Arc::clone(storage),
            dir: dir.to_path_buf(),
            file,
            slot_size,
            sequence: 1,
            synced_slot: 0,
            poisoned: false,
        })
    }

    /// Writes `payload` as the next record, durably: into the slot that does not hold the
    /// newest synced record, fsynced before returning; into a new, larger file when it does
    /// not fit the slots.
    ///
    /// On an error the newest synced record is untouched, the sequence is used up (one number
    /// never names two contents), and the file is poisoned: every later write fails with
    /// `Error::Poisoned` until it is opened again, which reads what the disk really holds.
    ///
    /// # Errors
    /// `Poisoned` after an earlier failure; I/O errors; `Unsupported` once the sequence cannot
    /// grow; `InvalidArgument` for a payload beyond 4 GiB.
    pub(crate) fn write(&mut self, payload: &[u8]) -> Result<(), Error> {
        if self.poisoned {
            return Err(Error::Poisoned);
        }
        let written = self.write_next(payload);
        // A record refused before any byte was written leaves nothing unknown.
        self.poisoned = matches!(&written, Err(e) if !matches!(e, Error::InvalidArgument { .. }));
        written
    }

    fn write_next(&mut self, payload: &[u8]) -> Result<(), Error> {
        let sequence = self
            .sequence
            .checked_add(1)
            .ok_or_else(|| Error::Unsupported {
                what: format!(
                    "{} holds sequence number {}, which cannot be followed",
                    self.file.path().display(),
                    self.sequence
                ),
            })?;
        self.sequence = sequence;
        let Some(slot) = encode_slot(&self.kind, self.slot_size, sequence, payload) else {
            let slot_size = slot_size_for(payload.len());
            self.file = write_whole(
                &self.kind,
                &self.storage,
                &self.dir,
                slot_size,
                sequence,
                payload,
            )?;
            self.slot_size = slot_size;
            self.synced_slot = 0;
            return Ok(());
        };
        let target = 1 - self.synced_slot;
        let position = (target * self.slot_size) as u64;
        self.file.write_all_at(&slot, position)?;
        self.file.sync_data()?;
        self.synced_slot = target;
        Ok(())
    }

    /// The slot size in bytes (half the file).
    pub(crate) fn slot_size(&self) -> usize {
        self.slot_size
    }

    /// The path of the file.
    pub(crate) fn path(&self) -> &Path {
        self.file.path()
    }
}

/// Writes a whole new file (slot 0 = the record, slot 1 zeros) durably under `dir/<name>`
/// through the temporary name, and returns it open.
fn write_whole(
    kind: &SlotFileKind,
    storage: &Arc<dyn Storage>,
    dir: &Path,
    slot_size: usize,
    sequence: u64,
    payload: &[u8],
) -> Result<Arc<dyn StorageFile>, Error> {
    let mut image =
        encode_slot(kind, slot_size, sequence, payload).ok_or_else(|| Error::InvalidArgument {
            why: format!(
                "{} cannot hold a record of {} bytes",
                kind.name,
                payload.len()
            ),
        })?;
    image.resize(slot_size * 2, 0);
    partlog::unstable::replace_file_durably(
        storage.as_ref(),
        dir,
        kind.temp_name,
        kind.name,
        &image,
    )?;
    storage.open(&dir.join(kind.name), OpenMode::ReadWrite)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIND: SlotFileKind = SlotFileKind {
        name: "test.slots",
        temp_name: "test.slots.tmp",
        magic: *b"PLTS",
        version: 1,
    };

    #[test]
    fn a_slot_round_trips_and_any_flipped_bit_invalidates_it() {
        let slot = encode_slot(&KIND, 512, 7, b"hello").unwrap();
        assert_eq!(slot.len(), 512);
        assert_eq!(
            decode_slot(&KIND, &slot),
            Some(SlotRecord {
                sequence: 7,
                payload: b"hello".to_vec()
            })
        );
        for at in [0, 4, 6, 8, 16, 20, 24, 300, 508, 511] {
            let mut bad = slot.clone();
            bad[at] ^= 0x10;
            assert_eq!(decode_slot(&KIND, &bad), None, "byte {at} flipped");
        }
    }

    #[test]
    fn slot_sizes_are_sector_multiples_that_fit() {
        assert_eq!(slot_size_for(0), 512);
        assert_eq!(slot_size_for(488), 512);
        assert_eq!(slot_size_for(489), 1024);
        assert_eq!(slot_size_for(5000), 8192);
        assert!(encode_slot(&KIND, 512, 1, &[1; 488]).is_some());
        assert!(encode_slot(&KIND, 512, 1, &[1; 489]).is_none());
    }
}
