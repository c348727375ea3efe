//! The records of `__transaction_state`, byte for byte Kafka's `TransactionLogKey` and
//! `TransactionLogValue` (versions 0 and 1), and which partition of the topic holds an id.
//!
//! A record's key is `i16 version 0 | string transactionalId`. Its value is a version (`i16`)
//! then the fields of that version: version 0 with Kafka's classic encoding (`i16`-length
//! strings, `i32`-count arrays, a null array as count −1), version 1 "flexible" (lengths and
//! counts as unsigned varints of n + 1, 0 for null, and a tagged-field section closing each
//! struct). A null value is a tombstone: the id expired (`Dead`).
//!
//! Kafka writes version 1 once `transaction.version` ≥ 1 (a 4.x cluster's default is 2), with
//! the tagged fields `PreviousProducerId` (tag 0) and `NextProducerId` (1) when they are not −1,
//! and `ClientTransactionVersion` (2) when it is not 0; `NextProducerEpoch` (3) is read, never
//! written by Kafka 4.4. Within a value Kafka writes the topics and partitions in its hash
//! sets' order; this encoder writes them in the order given, and readers must not depend on it.

// The design of record: FORMAT.md §17.

use std::fmt;

use partlog::Error;

use super::state::TransactionState;

/// The internal topic of the transaction coordinator.
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

/// Kafka's default `transaction.state.log.num.partitions`.
pub const DEFAULT_TRANSACTION_STATE_PARTITIONS: i32 = 50;

/// Kafka's `transaction.state.log.segment.bytes` default: 100 MiB.
pub const TRANSACTION_STATE_SEGMENT_BYTES: i32 = 104_857_600;

/// Java's `String.hashCode`: `h = 31·h + c` over the UTF-16 code units, wrapping.
pub fn java_string_hash(text: &str) -> i32 {
    text.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// Kafka's `Utils.abs`: the absolute value, with `abs(i32::MIN) = 0`.
pub fn java_abs(value: i32) -> i32 {
    if value == i32::MIN { 0 } else { value.abs() }
}

/// The partition of `__transaction_state` that holds `transactional_id`: Kafka's
/// `partitionFor`, `abs(java_string_hash(id)) % num_partitions`. The same rule places a group
/// in `__consumer_offsets`.
///
/// # Errors
/// `InvalidArgument` when `num_partitions` is not positive.
pub fn transaction_state_partition(
    transactional_id: &str,
    num_partitions: i32,
) -> Result<i32, Error> {
    if num_partitions <= 0 {
        return Err(Error::InvalidArgument {
            why: format!(
                "{TRANSACTION_STATE_TOPIC} needs at least one partition, not {num_partitions}"
            ),
        });
    }
    Ok(java_abs(java_string_hash(transactional_id)) % num_partitions)
}

/// The value version Kafka writes at a `transaction.version` feature level: 1 from level 1 on
/// (Kafka's `TransactionVersion.transactionLogValueVersion`), else 0.
pub fn value_version_for(transaction_version: i16) -> i16 {
    if transaction_version >= 1 { 1 } else { 0 }
}

/// A decoded key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransactionLogKey {
    /// Version 0: the transactional id whose state the value holds.
    Transaction {
        /// The transactional id.
        transactional_id: String,
    },
    /// A key of a version this code does not know. Kafka's coordinator skips such records with
    /// a warning (a leftover of an aborted upgrade) rather than failing its load.
    Unknown {
        /// The version read.
        version: i16,
    },
}

/// The partitions of one topic in a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnTopicPartitions {
    /// The topic.
    pub topic: String,
    /// Its partitions in the transaction.
    pub partitions: Vec<i32>,
}

/// A decoded value: a transactional id's state as the coordinator persisted it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionLogValue {
    /// The producer id in use.
    pub producer_id: i64,
    /// The producer id of the last committed transaction before an epoch overflow moved to a new
    /// one (tagged field 0, version 1; −1 when none).
    pub previous_producer_id: i64,
    /// The producer id handed to the client for after the current transaction (tagged 1; −1).
    pub next_producer_id: i64,
    /// The epoch of `producer_id`.
    pub producer_epoch: i16,
    /// The epoch that goes with `next_producer_id` (tagged 3; −1). Kafka 4.4 reads, never writes it.
    pub next_producer_epoch: i16,
    /// `transaction.timeout.ms` of the producer.
    pub transaction_timeout_ms: i32,
    /// The state.
    pub state: TransactionState,
    /// The partitions of the transaction; written as null, and ignored when read, for `Empty`.
    pub partitions: Vec<TxnTopicPartitions>,
    /// When the state last changed.
    pub last_update_timestamp_ms: i64,
    /// When the transaction started; −1 when none did.
    pub start_timestamp_ms: i64,
    /// The client's `transaction.version` (tagged 2; 0).
    pub client_transaction_version: i16,
}

impl TransactionLogValue {
    /// A value with the tagged fields at their defaults (−1, −1, −1 and 0).
    pub fn new(
        producer_id: i64,
        producer_epoch: i16,
        transaction_timeout_ms: i32,
        state: TransactionState,
    ) -> TransactionLogValue {
        TransactionLogValue {
            producer_id,
            previous_producer_id: -1,
            next_producer_id: -1,
            producer_epoch,
            next_producer_epoch: -1,
            transaction_timeout_ms,
            state,
            partitions: Vec::new(),
            last_update_timestamp_ms: -1,
            start_timestamp_ms: -1,
            client_transaction_version: 0,
        }
    }

    /// Whether every tagged field is at its default: the only values version 0 can carry.
    pub fn tagged_fields_are_default(&self) -> bool {
        self.previous_producer_id == -1
            && self.next_producer_id == -1
            && self.next_producer_epoch == -1
            && self.client_transaction_version == 0
    }
}

/// What one record of `__transaction_state` says: Kafka's `TransactionLog.ReadResult`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnLogRecord {
    /// The state of a transactional id.
    Value {
        /// The transactional id.
        transactional_id: String,
        /// Its state.
        value: TransactionLogValue,
    },
    /// A tombstone: the id expired (`Dead`) and compaction will remove it.
    Tombstone {
        /// The transactional id.
        transactional_id: String,
    },
    /// A key of a version this code does not know. Kafka 4.4's coordinator skips such a record
    /// with a warning (a leftover of an aborted upgrade) instead of failing its load.
    UnknownKeyVersion {
        /// The key's version.
        version: i16,
    },
    /// A value of a version this code does not know, skipped as Kafka 4.4 skips it.
    UnknownValueVersion {
        /// The transactional id of the key.
        transactional_id: String,
        /// The value's version.
        version: i16,
    },
}

/// Reads one record as Kafka's `TransactionLog.read` does: the key, then (for a known key)
/// the value, a missing value being a tombstone.
///
/// # Errors
/// A missing key, and whatever [`decode_key`] or [`decode_value`] refuse, except unknown
/// versions, which are [`TxnLogRecord`] variants.
pub fn read_record(
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) -> Result<TxnLogRecord, TxnLogDecodeError> {
    let Some(key) = key else {
        return Err(TxnLogDecodeError {
            part: RecordPart::Key,
            position: 0,
            what: "a record without a key",
        });
    };
    let transactional_id = match decode_key(key)? {
        TransactionLogKey::Transaction { transactional_id } => transactional_id,
        TransactionLogKey::Unknown { version } => {
            return Ok(TxnLogRecord::UnknownKeyVersion { version });
        }
    };
    let Some(bytes) = value else {
        return Ok(TxnLogRecord::Tombstone { transactional_id });
    };
    match bytes.first_chunk::<2>().map(|v| i16::from_be_bytes(*v)) {
        Some(version) if version != 0 && version != 1 => Ok(TxnLogRecord::UnknownValueVersion {
            transactional_id,
            version,
        }),
        _ => match decode_value(Some(bytes))? {
            Some(value) => Ok(TxnLogRecord::Value {
                transactional_id,
                value,
            }),
            None => Ok(TxnLogRecord::Tombstone { transactional_id }),
        },
    }
}

/// Which half of a record failed to decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordPart {
    /// The key.
    Key,
    /// The value.
    Value,
}

/// Why the key or value of a `__transaction_state` record does not decode. The caller knows
/// the record's partition and offset, and names them in the error it reports
/// (`Error::Corrupt`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnLogDecodeError {
    /// The key or the value.
    pub part: RecordPart,
    /// The byte of the key or value where the problem was found.
    pub position: usize,
    /// What is wrong.
    pub what: &'static str,
}

impl fmt::Display for TxnLogDecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let part = match self.part {
            RecordPart::Key => "key",
            RecordPart::Value => "value",
        };
        write!(
            f,
            "the {part} of a {TRANSACTION_STATE_TOPIC} record does not decode at byte {}: {}",
            self.position, self.what
        )
    }
}

impl std::error::Error for TxnLogDecodeError {}

/// Encodes the key of `transactional_id`'s records: `0000`, then the id as an `i16`-length
/// string. `"txn-1"` → `0000 0005 74786e2d31`.
///
/// # Errors
/// `InvalidArgument` for an id longer than 32767 bytes of UTF-8.
pub fn encode_key(transactional_id: &str) -> Result<Vec<u8>, Error> {
    let mut out = Vec::with_capacity(4 + transactional_id.len());
    out.extend_from_slice(&0i16.to_be_bytes());
    put_string16(&mut out, transactional_id)?;
    Ok(out)
}

/// Decodes a key as Kafka's `TransactionLog.read` does: version 0, or
/// [`TransactionLogKey::Unknown`] for another version. Bytes after the id are ignored, and
/// bytes that are not UTF-8 become U+FFFD, as Kafka's reader takes them.
///
/// # Errors
/// When the bytes end early or the id is null.
pub fn decode_key(key: &[u8]) -> Result<TransactionLogKey, TxnLogDecodeError> {
    let mut reader = Reader::new(key, RecordPart::Key);
    let version = reader.i16()?;
    if version != 0 {
        return Ok(TransactionLogKey::Unknown { version });
    }
    let transactional_id = reader.string(false)?;
    Ok(TransactionLogKey::Transaction { transactional_id })
}

/// Encodes `value` as a value of `version` (0 or 1; see [`value_version_for`]).
///
/// # Errors
/// `InvalidArgument` for an `Empty` state with partitions (Kafka's `IllegalStateException`),
/// tagged fields off their defaults at version 0 (Kafka's `UnsupportedVersionException`), a
/// string or array too long for its field; `Unsupported` for another version.
pub fn encode_value(value: &TransactionLogValue, version: i16) -> Result<Vec<u8>, Error> {
    let invalid = |why: String| Error::InvalidArgument { why };
    if value.state == TransactionState::Empty && !value.partitions.is_empty() {
        return Err(invalid(format!(
            "a transaction in state Empty has no partitions, but {} topics were given",
            value.partitions.len()
        )));
    }
    if version == 0 && !value.tagged_fields_are_default() {
        return Err(invalid(
            "value version 0 cannot hold PreviousProducerId, NextProducerId, NextProducerEpoch \
             or ClientTransactionVersion: write version 1 (transaction.version >= 1)"
                .to_owned(),
        ));
    }
    if version != 0 && version != 1 {
        return Err(Error::Unsupported {
            what: format!("{TRANSACTION_STATE_TOPIC} value version {version} (0 and 1 exist)"),
        });
    }
    let flexible = version == 1;
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&version.to_be_bytes());
    out.extend_from_slice(&value.producer_id.to_be_bytes());
    out.extend_from_slice(&value.producer_epoch.to_be_bytes());
    out.extend_from_slice(&value.transaction_timeout_ms.to_be_bytes());
    out.push(value.state.id() as u8);
    if value.state == TransactionState::Empty {
        put_count(&mut out, None, flexible)?;
    } else {
        put_count(&mut out, Some(value.partitions.len()), flexible)?;
        for topic in &value.partitions {
            if flexible {
                put_compact_string(&mut out, &topic.topic)?;
            } else {
                put_string16(&mut out, &topic.topic)?;
            }
            put_count(&mut out, Some(topic.partitions.len()), flexible)?;
            for partition in &topic.partitions {
                out.extend_from_slice(&partition.to_be_bytes());
            }
            if flexible {
                // No tagged fields in PartitionsSchema.
                out.push(0);
            }
        }
    }
    out.extend_from_slice(&value.last_update_timestamp_ms.to_be_bytes());
    out.extend_from_slice(&value.start_timestamp_ms.to_be_bytes());
    if flexible {
        put_tagged_fields(&mut out, value);
    }
    Ok(out)
}

/// The tagged-field section of a version 1 value: the fields off their defaults, by tag.
fn put_tagged_fields(out: &mut Vec<u8>, value: &TransactionLogValue) {
    let mut fields: Vec<(u32, Vec<u8>)> = Vec::new();
    if value.previous_producer_id != -1 {
        fields.push((0, value.previous_producer_id.to_be_bytes().to_vec()));
    }
    if value.next_producer_id != -1 {
        fields.push((1, value.next_producer_id.to_be_bytes().to_vec()));
    }
    if value.client_transaction_version != 0 {
        fields.push((2, value.client_transaction_version.to_be_bytes().to_vec()));
    }
    if value.next_producer_epoch != -1 {
        fields.push((3, value.next_producer_epoch.to_be_bytes().to_vec()));
    }
    put_uvarint(out, fields.len() as u32);
    for (tag, data) in fields {
        put_uvarint(out, tag);
        put_uvarint(out, data.len() as u32);
        out.extend_from_slice(&data);
    }
}

/// Decodes a value: `None` for a tombstone (no value: the id is `Dead`).
///
/// It reads what Kafka 4.4's `TransactionLog.read` reads and refuses what it refuses: the
/// generated `TransactionLogValue` reader (a negative array count is null, a known tagged field
/// is read whatever size it claims, unknown tags are skipped, bytes after the value are
/// ignored, strings are decoded as Java decodes them), then `TransactionState.fromId`,
/// `TransactionVersion.fromFeatureLevel` and the partitions of a state other than `Empty`.
///
/// # Errors
/// A version other than 0 and 1; bytes that end early; a null topic or partition list where
/// one is required; a count larger than the bytes left; an unknown state id; a client
/// transaction version other than 0, 1 and 2; null partitions with a state other than `Empty`.
pub fn decode_value(
    value: Option<&[u8]>,
) -> Result<Option<TransactionLogValue>, TxnLogDecodeError> {
    let Some(bytes) = value else {
        return Ok(None);
    };
    let mut reader = Reader::new(bytes, RecordPart::Value);
    let version = reader.i16()?;
    let flexible = match version {
        0 => false,
        1 => true,
        _ => return Err(reader.error(0, "an unknown value version (0 and 1 exist)")),
    };
    let producer_id = reader.i64()?;
    let producer_epoch = reader.i16()?;
    let transaction_timeout_ms = reader.i32()?;
    let state_at = reader.position;
    let state_id = reader.i8()?;
    let partitions = read_partitions(&mut reader, flexible)?;
    let last_update_timestamp_ms = reader.i64()?;
    let start_timestamp_ms = reader.i64()?;
    let mut decoded = TransactionLogValue::new(
        producer_id,
        producer_epoch,
        transaction_timeout_ms,
        TransactionState::Empty,
    );
    decoded.last_update_timestamp_ms = last_update_timestamp_ms;
    decoded.start_timestamp_ms = start_timestamp_ms;
    if flexible {
        read_value_tagged_fields(&mut reader, &mut decoded)?;
    }
    decoded.state = TransactionState::from_id(state_id)
        .ok_or_else(|| reader.error(state_at, "an unknown transaction state id"))?;
    if !(0..=2).contains(&decoded.client_transaction_version) {
        return Err(reader.error(
            state_at,
            "an unknown client transaction version (0, 1 and 2 exist)",
        ));
    }
    match (decoded.state, partitions) {
        // Kafka ignores what an Empty value lists.
        (TransactionState::Empty, _) => {}
        (_, Some(partitions)) => decoded.partitions = partitions,
        (_, None) => {
            return Err(reader.error(state_at, "a state other than Empty with null partitions"));
        }
    }
    Ok(Some(decoded))
}

/// The `TransactionPartitions` array: `None` when null.
fn read_partitions(
    reader: &mut Reader<'_>,
    flexible: bool,
) -> Result<Option<Vec<TxnTopicPartitions>>, TxnLogDecodeError> {
    let Some(count) = reader.count(flexible)? else {
        return Ok(None);
    };
    let mut topics = Vec::with_capacity(count);
    for _ in 0..count {
        let topic = reader.string(flexible)?;
        let at = reader.position;
        let count = reader
            .count(flexible)?
            .ok_or_else(|| reader.error(at, "null partition ids"))?;
        let mut partitions = Vec::with_capacity(count);
        for _ in 0..count {
            partitions.push(reader.i32()?);
        }
        if flexible {
            reader.skip_tagged_fields()?;
        }
        topics.push(TxnTopicPartitions { topic, partitions });
    }
    Ok(Some(topics))
}

/// The value's tagged fields, as Kafka's generated reader takes them: a known tag is read as
/// its type, an unknown one skipped by its size.
fn read_value_tagged_fields(
    reader: &mut Reader<'_>,
    value: &mut TransactionLogValue,
) -> Result<(), TxnLogDecodeError> {
    // Java's `int`: a count past i32::MAX is negative, and reads no field.
    let count = reader.uvarint()? as i32;
    for _ in 0..count.max(0) {
        let tag = reader.uvarint()?;
        let size = reader.uvarint()? as i32;
        match tag {
            0 => value.previous_producer_id = reader.i64()?,
            1 => value.next_producer_id = reader.i64()?,
            2 => value.client_transaction_version = reader.i16()?,
            3 => value.next_producer_epoch = reader.i16()?,
            _ => reader.skip(size)?,
        }
    }
    Ok(())
}

fn too_long(what: &str, len: usize) -> Error {
    Error::InvalidArgument {
        why: format!("{what} of {len} is too long for a {TRANSACTION_STATE_TOPIC} record"),
    }
}

fn put_string16(out: &mut Vec<u8>, text: &str) -> Result<(), Error> {
    let len = i16::try_from(text.len()).map_err(|_| too_long("a string", text.len()))?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(text.as_bytes());
    Ok(())
}

fn put_compact_string(out: &mut Vec<u8>, text: &str) -> Result<(), Error> {
    // Kafka's generated writers refuse strings longer than 0x7fff bytes in every version.
    if text.len() > i16::MAX as usize {
        return Err(too_long("a string", text.len()));
    }
    put_uvarint(out, text.len() as u32 + 1);
    out.extend_from_slice(text.as_bytes());
    Ok(())
}

/// An array's count: `i32` (−1 null) in version 0, unsigned varint of n + 1 (0 null) in 1.
fn put_count(out: &mut Vec<u8>, count: Option<usize>, flexible: bool) -> Result<(), Error> {
    let count = match count {
        Some(n) => Some(i32::try_from(n).map_err(|_| too_long("an array", n))?),
        None => None,
    };
    if flexible {
        put_uvarint(out, count.map_or(0, |n| n as u32 + 1));
    } else {
        out.extend_from_slice(&count.unwrap_or(-1).to_be_bytes());
    }
    Ok(())
}

/// Kafka's unsigned varint: 7 bits a byte, least significant first.
fn put_uvarint(out: &mut Vec<u8>, mut value: u32) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// A cursor over a key or value, reading as Kafka's `ByteBufferAccessor` and generated readers
/// do, failing with [`TxnLogDecodeError`].
struct Reader<'a> {
    bytes: &'a [u8],
    position: usize,
    part: RecordPart,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8], part: RecordPart) -> Self {
        Reader {
            bytes,
            position: 0,
            part,
        }
    }

    fn error(&self, position: usize, what: &'static str) -> TxnLogDecodeError {
        TxnLogDecodeError {
            part: self.part,
            position,
            what,
        }
    }

    fn remaining(&self) -> usize {
        self.bytes.len() - self.position
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], TxnLogDecodeError> {
        let end = self.position.checked_add(n);
        match end.and_then(|end| self.bytes.get(self.position..end)) {
            Some(taken) => {
                self.position += n;
                Ok(taken)
            }
            None => Err(self.error(self.position, "the bytes end inside a field")),
        }
    }

    /// Skips `size` bytes of an unknown tagged field; a negative size is an error, as Java's
    /// `new byte[size]` is.
    fn skip(&mut self, size: i32) -> Result<(), TxnLogDecodeError> {
        let size = usize::try_from(size)
            .map_err(|_| self.error(self.position, "a negative tagged field size"))?;
        self.take(size).map(|_| ())
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], TxnLogDecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn i8(&mut self) -> Result<i8, TxnLogDecodeError> {
        Ok(i8::from_be_bytes(self.array()?))
    }

    fn i16(&mut self) -> Result<i16, TxnLogDecodeError> {
        Ok(i16::from_be_bytes(self.array()?))
    }

    fn i32(&mut self) -> Result<i32, TxnLogDecodeError> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    fn i64(&mut self) -> Result<i64, TxnLogDecodeError> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    /// Kafka's `readUnsignedVarint`: at most 5 bytes, the fifth's high bits shifted out of the
    /// `int`; a fifth byte that continues is an error.
    fn uvarint(&mut self) -> Result<u32, TxnLogDecodeError> {
        let start = self.position;
        let mut value: u32 = 0;
        for shift in (0..35).step_by(7) {
            let [byte] = self.array::<1>()?;
            value |= u32::from(byte & 0x7f).wrapping_shl(shift);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(self.error(start, "an unsigned varint longer than 5 bytes"))
    }

    /// A non-nullable string: `i16` length (version 0) or unsigned varint of length + 1
    /// (version 1). Bytes that are not UTF-8 become U+FFFD, as in Java.
    fn string(&mut self, flexible: bool) -> Result<String, TxnLogDecodeError> {
        let at = self.position;
        let length = if flexible {
            (self.uvarint()? as i32).wrapping_sub(1)
        } else {
            i32::from(self.i16()?)
        };
        let length = usize::try_from(length)
            .map_err(|_| self.error(at, "a null string where one is required"))?;
        if length > i16::MAX as usize {
            return Err(self.error(at, "a string longer than 32767 bytes"));
        }
        Ok(String::from_utf8_lossy(self.take(length)?).into_owned())
    }

    /// An array count: `i32` (version 0) or unsigned varint of count + 1 (version 1); `None`
    /// when negative (null). A count past the bytes left is an error, as Kafka refuses to
    /// allocate for it.
    fn count(&mut self, flexible: bool) -> Result<Option<usize>, TxnLogDecodeError> {
        let at = self.position;
        let count = if flexible {
            (self.uvarint()? as i32).wrapping_sub(1)
        } else {
            self.i32()?
        };
        let Ok(count) = usize::try_from(count) else {
            return Ok(None);
        };
        if count > self.remaining() {
            return Err(self.error(at, "an array count larger than the bytes left"));
        }
        Ok(Some(count))
    }

    fn skip_tagged_fields(&mut self) -> Result<(), TxnLogDecodeError> {
        let count = self.uvarint()? as i32;
        for _ in 0..count.max(0) {
            self.uvarint()?;
            let size = self.uvarint()? as i32;
            self.skip(size)?;
        }
        Ok(())
    }
}
