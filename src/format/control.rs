//! Control records: the transaction markers (COMMIT / ABORT) and KRaft's control types.
//!
//! A control batch has attribute bit 5 set and holds control records, which applications never
//! see. A control record's key is 4 bytes, `version i16` (0) then `type i16`; an end-transaction
//! marker's value is 6 bytes, `version i16` (0) then `coordinatorEpoch i32`. A marker batch is
//! always 78 bytes: the 61-byte header (attributes `0x0030`: transactional + control, no
//! compression, CreateTime; baseSequence -1) and one 17-byte record with offset and timestamp
//! deltas 0 and no headers.

use super::batch::{BatchHeader, CURRENT_MAGIC, LOG_OVERHEAD, RECORD_BATCH_OVERHEAD, array_at};
use super::builder::{CONTROL_BATCH_ATTRIBUTES, seal};
use super::record::Record;
use crate::error::{Corruption, Error, Result};

/// Size of a COMMIT/ABORT marker batch.
pub const CONTROL_BATCH_SIZE: usize = 78;

/// The type in a control record's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControlRecordType {
    /// 0: the producer's transaction was aborted.
    Abort,
    /// 1: the producer's transaction was committed.
    Commit,
    /// 2: KRaft leader change.
    LeaderChange,
    /// 3: KRaft snapshot header.
    SnapshotHeader,
    /// 4: KRaft snapshot footer.
    SnapshotFooter,
    /// 5: KRaft version.
    KraftVersion,
    /// 6: KRaft voters.
    KraftVoters,
    /// Any other type, which Kafka ignores.
    Unknown(i16),
}

impl ControlRecordType {
    /// The type id as stored in the key.
    pub const fn id(self) -> i16 {
        match self {
            ControlRecordType::Abort => 0,
            ControlRecordType::Commit => 1,
            ControlRecordType::LeaderChange => 2,
            ControlRecordType::SnapshotHeader => 3,
            ControlRecordType::SnapshotFooter => 4,
            ControlRecordType::KraftVersion => 5,
            ControlRecordType::KraftVoters => 6,
            ControlRecordType::Unknown(id) => id,
        }
    }

    /// The type for an id; unknown ids are kept as [`ControlRecordType::Unknown`].
    pub const fn from_id(id: i16) -> ControlRecordType {
        match id {
            0 => ControlRecordType::Abort,
            1 => ControlRecordType::Commit,
            2 => ControlRecordType::LeaderChange,
            3 => ControlRecordType::SnapshotHeader,
            4 => ControlRecordType::SnapshotFooter,
            5 => ControlRecordType::KraftVersion,
            6 => ControlRecordType::KraftVoters,
            other => ControlRecordType::Unknown(other),
        }
    }

    /// Whether this ends a transaction (COMMIT or ABORT).
    pub const fn is_transaction_marker(self) -> bool {
        matches!(self, ControlRecordType::Abort | ControlRecordType::Commit)
    }
}

/// The type of a control record, from its key.
///
/// As Kafka's `ControlRecordType.parse`: the key must hold at least 4 bytes and a non-negative
/// version; a newer version is read as version 0. Errors are [`Error::InvalidBatch`] with
/// `BadRecord`.
pub fn control_record_type(record: &Record<'_>) -> Result<ControlRecordType> {
    let key = record
        .key
        .ok_or_else(|| bad_record("control record has a null key"))?;
    let (Some(version), Some(kind)) = (array_at::<2>(key, 0), array_at::<2>(key, 2)) else {
        return Err(bad_record("control record key is shorter than 4 bytes"));
    };
    if i16::from_be_bytes(version) < 0 {
        return Err(bad_record("control record key has a negative version"));
    }
    Ok(ControlRecordType::from_id(i16::from_be_bytes(kind)))
}

/// The value of a COMMIT or ABORT control record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EndTransactionMarker {
    /// Epoch of the transaction coordinator that wrote the marker (fences zombie coordinators).
    pub coordinator_epoch: i32,
}

impl EndTransactionMarker {
    /// Reads the marker from a control record, which must be a COMMIT or ABORT (see
    /// [`control_record_type`] for which). As Kafka's `EndTransactionMarker.deserializeValue`:
    /// the value must hold at least 6 bytes and a non-negative version; newer versions are read
    /// as version 0.
    pub fn parse(record: &Record<'_>) -> Result<EndTransactionMarker> {
        if !control_record_type(record)?.is_transaction_marker() {
            return Err(bad_record("control record is not a COMMIT or ABORT marker"));
        }
        let value = record
            .value
            .ok_or_else(|| bad_record("end transaction marker has a null value"))?;
        let (Some(version), Some(epoch)) = (array_at::<2>(value, 0), array_at::<4>(value, 2))
        else {
            return Err(bad_record(
                "end transaction marker value is shorter than 6 bytes",
            ));
        };
        if i16::from_be_bytes(version) < 0 {
            return Err(bad_record("end transaction marker has a negative version"));
        }
        Ok(EndTransactionMarker {
            coordinator_epoch: i32::from_be_bytes(epoch),
        })
    }
}

fn bad_record(why: &'static str) -> Error {
    Error::InvalidBatch {
        what: Corruption::BadRecord(why),
    }
}

/// Encodes a 78-byte transaction marker batch, as a Kafka broker writes on behalf of the
/// transaction coordinator: attributes `0x0030`, the transaction's producer id and epoch,
/// baseSequence -1, `timestamp_ms` as both base and max timestamp, partition leader epoch -1
/// (set it with [`super::set_partition_leader_epoch`]), and one control record whose key is
/// `(0, marker)` and whose value is `(0, coordinator_epoch)`.
///
/// `marker` should be [`ControlRecordType::Commit`] or [`ControlRecordType::Abort`]; any other
/// type is written with its id, and an end-transaction value that only markers carry.
pub fn build_control_batch(
    marker: ControlRecordType,
    producer_id: i64,
    producer_epoch: i16,
    coordinator_epoch: i32,
    base_offset: i64,
    timestamp_ms: i64,
) -> Vec<u8> {
    let mut batch = Vec::with_capacity(CONTROL_BATCH_SIZE);
    batch.resize(RECORD_BATCH_OVERHEAD, 0);
    // The record: length 16, attributes 0, timestamp delta 0, offset delta 0,
    // key length 4, key, value length 6, value, header count 0 (all zig-zag varints).
    batch.extend_from_slice(&[0x20, 0x00, 0x00, 0x00, 0x08]);
    batch.extend_from_slice(&0i16.to_be_bytes());
    batch.extend_from_slice(&marker.id().to_be_bytes());
    batch.push(0x0c);
    batch.extend_from_slice(&0i16.to_be_bytes());
    batch.extend_from_slice(&coordinator_epoch.to_be_bytes());
    batch.push(0x00);

    let header = BatchHeader {
        base_offset,
        batch_length: (CONTROL_BATCH_SIZE - LOG_OVERHEAD) as i32,
        partition_leader_epoch: -1,
        magic: CURRENT_MAGIC,
        crc: 0,
        attributes: CONTROL_BATCH_ATTRIBUTES,
        last_offset_delta: 0,
        base_timestamp: timestamp_ms,
        max_timestamp: timestamp_ms,
        producer_id,
        producer_epoch,
        base_sequence: -1,
        records_count: 1,
    };
    seal(&mut batch, &header);
    batch
}
