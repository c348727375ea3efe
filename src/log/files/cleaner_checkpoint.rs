//! The cleaner checkpoint, `partlog.cleaner-checkpoint` (FORMAT.md): the first dirty offset
//! across opens. Its codec, its atomic write, its load at open, and its lowering before a
//! truncation reuses offsets below it.
//!
//! A lost or stale-low value costs a pass, never a record; a value above the log end is
//! ignored.

use std::path::Path;

use crate::error::Result;
use crate::format::crc32c;
use crate::storage::{OpenMode, Storage};

use crate::sync::Mutex;

use super::checkpoint::DurableWriteError;
use super::remove_quietly;

/// The file that keeps the cleaner's first dirty offset across opens (FORMAT.md). No rule of
/// Kafka's loader matches the name.
pub const CLEANER_CHECKPOINT_FILE_NAME: &str = "partlog.cleaner-checkpoint";

/// The temporary name a new cleaner checkpoint is written under before its rename.
const CLEANER_CHECKPOINT_TEMP_NAME: &str = "partlog.cleaner-checkpoint.tmp";

const CLEANER_CHECKPOINT_MAGIC: [u8; 4] = *b"PLCC";

const CLEANER_CHECKPOINT_VERSION: u16 = 1;

/// magic, version, flags, first dirty offset, CRC-32C of the 16 bytes before it.
const CLEANER_CHECKPOINT_SIZE: usize = 20;

/// `partlog.cleaner-checkpoint` as this log last wrote it, or read it at open.
#[derive(Debug)]
pub(in crate::log) struct CleanerCheckpoint {
    /// The first dirty offset in the file (`None`: no valid file). Taken after the writer
    /// mutex by a truncation, and under the compaction lock by a pass that persists.
    persisted: Mutex<Option<i64>>,
}

impl CleanerCheckpoint {
    /// Writes `first_dirty` to the file, unless `still_current` (asked under the file's lock,
    /// which a truncation takes after counting itself) says a truncation came since the pass
    /// began: a truncation either shows there or lowers what this writes. `Ok` when skipped.
    pub(in crate::log) fn persist(
        &self,
        storage: &dyn Storage,
        dir: &Path,
        first_dirty: i64,
        still_current: impl FnOnce() -> bool,
    ) -> std::result::Result<(), DurableWriteError> {
        let mut persisted = self.persisted.lock();
        if !still_current() {
            return Ok(());
        }
        write_cleaner_checkpoint(storage, dir, first_dirty)?;
        *persisted = Some(first_dirty);
        Ok(())
    }

    /// Called by a truncation to `new_end` under the writer mutex, before it changes anything:
    /// offsets from `new_end` on will be reused, so a persisted first dirty offset above it is
    /// lowered durably first.
    pub(in crate::log) fn lower_to(
        &self,
        storage: &dyn Storage,
        dir: &Path,
        new_end: i64,
    ) -> Result<()> {
        let mut persisted = self.persisted.lock();
        if let Some(first_dirty) = *persisted
            && first_dirty > new_end
        {
            // The truncation poisons the log on any error of its own.
            write_cleaner_checkpoint(storage, dir, new_end).map_err(
                |(DurableWriteError::Write(error) | DurableWriteError::Sync(error))| error,
            )?;
            *persisted = Some(new_end);
        }
        Ok(())
    }
}

/// Encodes the cleaner checkpoint (FORMAT.md): magic, version, flags, first dirty offset, and
/// the CRC-32C of those 16 bytes, all big-endian.
fn encode_cleaner_checkpoint(first_dirty: i64) -> [u8; CLEANER_CHECKPOINT_SIZE] {
    let mut bytes = [0u8; CLEANER_CHECKPOINT_SIZE];
    bytes[0..4].copy_from_slice(&CLEANER_CHECKPOINT_MAGIC);
    bytes[4..6].copy_from_slice(&CLEANER_CHECKPOINT_VERSION.to_be_bytes());
    bytes[8..16].copy_from_slice(&first_dirty.to_be_bytes());
    let crc = crc32c(&bytes[..16]);
    bytes[16..20].copy_from_slice(&crc.to_be_bytes());
    bytes
}

/// Decodes the cleaner checkpoint; `None` for anything but a valid one.
fn decode_cleaner_checkpoint(bytes: &[u8]) -> Option<i64> {
    let bytes: &[u8; CLEANER_CHECKPOINT_SIZE] = bytes.try_into().ok()?;
    let (covered, crc) = bytes.split_last_chunk::<4>()?;
    if crc32c(covered) != u32::from_be_bytes(*crc) {
        return None;
    }
    let magic = covered.get(0..4)?;
    let version = u16::from_be_bytes(covered.get(4..6)?.try_into().ok()?);
    let flags = u16::from_be_bytes(covered.get(6..8)?.try_into().ok()?);
    if magic != CLEANER_CHECKPOINT_MAGIC || version != CLEANER_CHECKPOINT_VERSION || flags != 0 {
        return None;
    }
    let first_dirty = i64::from_be_bytes(covered.get(8..16)?.try_into().ok()?);
    (first_dirty >= 0).then_some(first_dirty)
}

/// Writes the cleaner checkpoint atomically: a temporary file, fsynced, renamed over the old
/// one, and the directory fsynced.
///
/// A failed fsync is told apart ([`DurableWriteError::Sync`]): it poisons the log.
fn write_cleaner_checkpoint(
    storage: &dyn Storage,
    dir: &Path,
    first_dirty: i64,
) -> std::result::Result<(), DurableWriteError> {
    let temp = dir.join(CLEANER_CHECKPOINT_TEMP_NAME);
    let file = storage
        .open(&temp, OpenMode::Create)
        .map_err(DurableWriteError::Write)?;
    let written = file
        .set_len(0)
        .and_then(|()| file.write_all_at(&encode_cleaner_checkpoint(first_dirty), 0))
        .map_err(DurableWriteError::Write)
        .and_then(|()| file.sync_all().map_err(DurableWriteError::Sync));
    drop(file);
    if let Err(error) = written {
        remove_quietly(storage, &temp);
        return Err(error);
    }
    storage
        .rename(&temp, &dir.join(CLEANER_CHECKPOINT_FILE_NAME))
        .map_err(DurableWriteError::Write)?;
    storage.sync_dir(dir).map_err(DurableWriteError::Sync)
}

/// Reads the cleaner checkpoint at open: what the file holds, and the first dirty offset to
/// start from (0 when the file is missing, invalid or names an offset above `log_end_offset`).
pub(in crate::log) fn load_cleaner_checkpoint(
    storage: &dyn Storage,
    dir: &Path,
    log_end_offset: i64,
    read_only: bool,
) -> (CleanerCheckpoint, i64) {
    let path = dir.join(CLEANER_CHECKPOINT_FILE_NAME);
    let read = (|| -> Result<Option<i64>> {
        if !storage.exists(&path)? {
            return Ok(None);
        }
        let file = storage.open(&path, OpenMode::Read)?;
        let mut bytes = [0u8; CLEANER_CHECKPOINT_SIZE + 1];
        let mut got = 0;
        while got < bytes.len() {
            let n = file.read_at(&mut bytes[got..], got as u64)?;
            if n == 0 {
                break;
            }
            got += n;
        }
        Ok(bytes.get(..got).and_then(decode_cleaner_checkpoint))
    })();
    let persisted = match read {
        Ok(persisted) => persisted,
        Err(error) => {
            log::warn!(
                "{}: could not read {CLEANER_CHECKPOINT_FILE_NAME}; the whole log counts as \
                 dirty: {error}",
                dir.display()
            );
            None
        }
    };
    // Above the log end, the offsets it covered were lost (a crash or a truncation at open):
    // they will be reused, so nothing of it can be trusted, now or after the log has grown
    // past it again: the file goes before the first append.
    let mut persisted = persisted;
    if let Some(stale) = persisted.filter(|&first_dirty| first_dirty > log_end_offset) {
        log::info!(
            "{}: {CLEANER_CHECKPOINT_FILE_NAME} names offset {stale}, above the log end \
             {log_end_offset}: the whole log counts as dirty",
            dir.display()
        );
        if !read_only {
            let removed = storage.remove(&path).and_then(|()| storage.sync_dir(dir));
            match removed {
                Ok(()) => persisted = None,
                Err(error) => log::warn!(
                    "{}: could not remove the stale {CLEANER_CHECKPOINT_FILE_NAME}: {error}",
                    dir.display()
                ),
            }
        }
    }
    let first_dirty_offset = persisted
        .filter(|&first_dirty| first_dirty <= log_end_offset)
        .unwrap_or(0);
    let checkpoint = CleanerCheckpoint {
        persisted: Mutex::new(persisted),
    };
    (checkpoint, first_dirty_offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cleaner_checkpoint_round_trips_and_rejects_damage() {
        for first_dirty in [0, 1, 4096, i64::MAX] {
            let bytes = encode_cleaner_checkpoint(first_dirty);
            assert_eq!(decode_cleaner_checkpoint(&bytes), Some(first_dirty));
        }
        // FORMAT.md §6.3's worked example.
        assert_eq!(
            encode_cleaner_checkpoint(4),
            [
                0x50, 0x4c, 0x43, 0x43, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0x8e, 0x2a, 0x3e, 0x7c
            ]
        );
        let bytes = encode_cleaner_checkpoint(42);
        assert_eq!(&bytes[..8], b"PLCC\x00\x01\x00\x00");
        assert_eq!(&bytes[8..16], &42i64.to_be_bytes());
        for bit in 0..bytes.len() * 8 {
            let mut flipped = bytes;
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(decode_cleaner_checkpoint(&flipped), None, "bit {bit}");
        }
        assert_eq!(decode_cleaner_checkpoint(&bytes[..19]), None);
        assert_eq!(
            decode_cleaner_checkpoint(&[bytes.as_slice(), &[0]].concat()),
            None
        );
        // A negative offset with a good CRC is still invalid.
        let mut negative = encode_cleaner_checkpoint(0);
        negative[8..16].copy_from_slice(&(-1i64).to_be_bytes());
        let crc = crc32c(&negative[..16]);
        negative[16..20].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(decode_cleaner_checkpoint(&negative), None);
    }
}
