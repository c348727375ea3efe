//! In-place header edits, the three a Kafka leader makes to a producer's batch on append.
//!
//! `baseOffset` (bytes 0..8) and `partitionLeaderEpoch` (12..16) lie outside the CRC, so the log
//! stamps them without re-checksumming. Switching to LogAppendTime changes the attributes
//! (21..23) and `maxTimestamp` (35..43), both covered, so the CRC is recomputed: one pass over
//! the batch, as Kafka's `DefaultRecordBatch.setMaxTimestamp`.

use super::batch::{
    ATTRIBUTES_AT, BASE_OFFSET_AT, COMPRESSION_MASK, CONTROL_BIT, CRC_AT, CRC_COVERED_FROM,
    CURRENT_MAGIC, DELETE_HORIZON_BIT, MAX_TIMESTAMP_AT, PARTITION_LEADER_EPOCH_AT,
    RECORD_BATCH_OVERHEAD, TIMESTAMP_TYPE_BIT, TRANSACTIONAL_BIT, array_at, peek_batch_frame,
};
use super::crc::{crc32c, crc32c_append};
use crate::error::{Corruption, Error, Result};

/// Sets `baseOffset`. Record offsets are deltas from it, so this moves the whole batch.
/// The CRC is unaffected.
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) -> Result<()> {
    require_header(batch)?;
    write_at(batch, BASE_OFFSET_AT, &base_offset.to_be_bytes())
}

/// Sets `partitionLeaderEpoch`. The CRC is unaffected.
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) -> Result<()> {
    require_header(batch)?;
    write_at(batch, PARTITION_LEADER_EPOCH_AT, &epoch.to_be_bytes())
}

/// Switches the batch to LogAppendTime at `timestamp_ms`: sets attribute bit 3 and
/// `maxTimestamp`, then recomputes the CRC. Readers then report `timestamp_ms` for every
/// record. As in Kafka, the attributes are rebuilt from their known bits, so unused bits 7..15
/// come out 0.
///
/// `batch` must be exactly one whole v2 batch (its length is what the CRC covers).
pub fn set_log_append_time(batch: &mut [u8], timestamp_ms: i64) -> Result<()> {
    set_log_append_time_in_parts(batch, &[], timestamp_ms)
}

/// [`set_log_append_time`] for a batch held in two parts, `head` (at least its 61 header bytes)
/// and then `tail`, as the log appends a produced batch without copying its records: the header
/// is stamped in `head` and the CRC computed over both parts.
pub(crate) fn set_log_append_time_in_parts(
    head: &mut [u8],
    tail: &[u8],
    timestamp_ms: i64,
) -> Result<()> {
    require_header(head)?;
    let Some(frame) = peek_batch_frame(head).map_err(|what| Error::InvalidBatch { what })? else {
        return Err(Error::InvalidBatch {
            what: Corruption::Truncated {
                needed: RECORD_BATCH_OVERHEAD as u64,
                available: head.len() as u64,
            },
        });
    };
    if frame.magic != CURRENT_MAGIC {
        return Err(Error::InvalidBatch {
            what: Corruption::BadMagic(frame.magic),
        });
    }
    let len = head.len() + tail.len();
    if frame.total_size() > len {
        return Err(Error::InvalidBatch {
            what: Corruption::Truncated {
                needed: frame.total_size() as u64,
                available: len as u64,
            },
        });
    }
    if frame.total_size() < len {
        return Err(Error::InvalidBatch {
            what: Corruption::BadHeader(
                "bytes follow the batch: the buffer holds more than one batch",
            ),
        });
    }
    let attributes = array_at::<2>(head, ATTRIBUTES_AT).map_or(0, i16::from_be_bytes);
    let known = COMPRESSION_MASK | TRANSACTIONAL_BIT | CONTROL_BIT | DELETE_HORIZON_BIT;
    let attributes = (attributes & known) | TIMESTAMP_TYPE_BIT;
    write_at(head, ATTRIBUTES_AT, &attributes.to_be_bytes())?;
    write_at(head, MAX_TIMESTAMP_AT, &timestamp_ms.to_be_bytes())?;
    let crc = crc32c_append(
        crc32c(head.get(CRC_COVERED_FROM..).unwrap_or_default()),
        tail,
    );
    write_at(head, CRC_AT, &crc.to_be_bytes())
}

fn require_header(batch: &[u8]) -> Result<()> {
    if batch.len() < RECORD_BATCH_OVERHEAD {
        return Err(Error::InvalidBatch {
            what: Corruption::Truncated {
                needed: RECORD_BATCH_OVERHEAD as u64,
                available: batch.len() as u64,
            },
        });
    }
    Ok(())
}

fn write_at(batch: &mut [u8], at: usize, bytes: &[u8]) -> Result<()> {
    let available = batch.len() as u64;
    // A let-else, not `ok_or`: an eagerly built `Error` is dropped on every append that fits.
    let Some(slot) = batch.get_mut(at..at + bytes.len()) else {
        return Err(Error::InvalidBatch {
            what: Corruption::Truncated {
                needed: (at + bytes.len()) as u64,
                available,
            },
        });
    };
    slot.copy_from_slice(bytes);
    Ok(())
}
