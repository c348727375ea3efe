//! [`ProducerIdManager`]: producer ids handed out in blocks of [`PRODUCER_ID_BLOCK_SIZE`],
//! each block reserved durably in `partlog.producer-ids` before its first id is handed out,
//! so that no id is ever handed out twice, whatever crashes.
//!
//! Kafka's controller hands brokers blocks of 1000 ids (`ProducerIdsBlock`) and records the
//! next free id in its metadata log before it answers; here the engine is its own controller,
//! and the record is the last id of the reserved block, in a two-slot CRC-32C file.

// The design of record: FORMAT.md §14.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use partlog::Error;
use partlog::unstable::Storage;

use super::slot_file::{SlotFile, SlotFileKind};

/// The file's name inside the engine directory.
pub const PRODUCER_IDS_FILE_NAME: &str = "partlog.producer-ids";

/// How many ids one reservation covers: Kafka's `ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE`.
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;

pub(crate) const KIND: SlotFileKind = SlotFileKind {
    name: PRODUCER_IDS_FILE_NAME,
    temp_name: "partlog.producer-ids.tmp",
    magic: *b"PLPI",
    version: 1,
};

/// The payload of `partlog.producer-ids`: the last id of the newest reserved block, big-endian
/// (−1 before the first reservation).
pub fn encode_reserved_through(last_reserved: i64) -> [u8; 8] {
    last_reserved.to_be_bytes()
}

/// Decodes the payload; `None` unless it is exactly 8 bytes holding an id ≥ −1.
pub fn decode_reserved_through(payload: &[u8]) -> Option<i64> {
    let bytes: [u8; 8] = payload.try_into().ok()?;
    Some(i64::from_be_bytes(bytes)).filter(|&id| id >= -1)
}

/// Hands out producer ids that are never reused, across crashes and restarts.
///
/// Ids come from the current block; when it is used up, the next block's last id is written
/// and fsynced to `partlog.producer-ids` before the first id of it is returned. After a
/// restart, ids resume after the last reserved block, so the unused rest of a block is skipped,
/// never handed out twice. Thread-safe.
#[derive(Debug)]
pub struct ProducerIdManager {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    file: SlotFile,
    /// The next id to hand out.
    next: i64,
    /// The last id of the reserved block: every id up to it may have been handed out.
    reserved_through: i64,
}

impl ProducerIdManager {
    /// Opens `dir/partlog.producer-ids`, creating it (nothing reserved yet) if it does not
    /// exist. The first id handed out is the one after the last block the file records.
    ///
    /// Only a new engine directory may lack the file: the engine creates it when it creates the
    /// directory. An existing file is never replaced, and one that cannot be read is an error.
    ///
    /// # Errors
    /// `Corrupt` when the file exists but neither slot holds a valid record (the ids are never
    /// restarted from 0); I/O errors.
    pub fn open(storage: &Arc<dyn Storage>, dir: &Path) -> Result<ProducerIdManager, Error> {
        let (file, reserved_through) = match SlotFile::open(KIND, storage, dir)? {
            Some((file, payload)) => {
                let Some(reserved) = decode_reserved_through(&payload) else {
                    return Err(Error::Corrupt {
                        file: file.path().to_path_buf(),
                        position: 0,
                        what: partlog::Corruption::BadRecord(
                            "the newest record is not a producer id of 8 bytes; restore the file \
                             from a backup (removing it would reuse producer ids)",
                        ),
                    });
                };
                (file, reserved)
            }
            None => (
                SlotFile::create(KIND, storage, dir, &encode_reserved_through(-1))?,
                -1,
            ),
        };
        Ok(ProducerIdManager {
            state: Mutex::new(State {
                file,
                next: reserved_through.saturating_add(1),
                reserved_through,
            }),
        })
    }

    /// Reads the last reserved id of `dir/partlog.producer-ids` without writing: `None` when
    /// the file does not exist, −1 when nothing was reserved yet.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub fn read_reserved_through(
        storage: &Arc<dyn Storage>,
        dir: &Path,
    ) -> Result<Option<i64>, Error> {
        let Some(payload) = SlotFile::read(&KIND, storage, dir)? else {
            return Ok(None);
        };
        decode_reserved_through(&payload)
            .map(Some)
            .ok_or_else(|| Error::Corrupt {
                file: dir.join(PRODUCER_IDS_FILE_NAME),
                position: 0,
                what: partlog::Corruption::BadRecord("the newest record is not a producer id"),
            })
    }

    /// A producer id no one has had: the next of the current block, after reserving a new
    /// block durably when this one is used up.
    ///
    /// # Errors
    /// The reservation's I/O errors (nothing is handed out; a later call tries again);
    /// `Unsupported` once ids up to `i64::MAX` are used up.
    pub fn generate_producer_id(&self) -> Result<i64, Error> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.next > state.reserved_through {
            let end = state
                .reserved_through
                .checked_add(PRODUCER_ID_BLOCK_SIZE)
                .ok_or_else(|| Error::Unsupported {
                    what: format!(
                        "every producer id up to {} is used up",
                        state.reserved_through
                    ),
                })?;
            state.file.write(&encode_reserved_through(end))?;
            state.reserved_through = end;
        }
        let id = state.next;
        state.next += 1;
        Ok(id)
    }

    /// The last id of the reserved block: the highest id that may have been handed out.
    pub fn reserved_through(&self) -> i64 {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .reserved_through
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_payload_is_one_big_endian_id() {
        assert_eq!(
            encode_reserved_through(1999),
            [0, 0, 0, 0, 0, 0, 0x07, 0xcf]
        );
        assert_eq!(
            decode_reserved_through(&encode_reserved_through(-1)),
            Some(-1)
        );
        assert_eq!(decode_reserved_through(&encode_reserved_through(-2)), None);
        assert_eq!(decode_reserved_through(&[0; 7]), None);
    }
}
