//! The records of `__transaction_state`, byte for byte Kafka's `TransactionLogKey` and
//! `TransactionLogValue` (versions 0 and 1), and which partition of the topic holds an id
//! (FORMAT.md §17).
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

/// Decodes a key: version 0, or [`TransactionLogKey::Unknown`] for another version.
///
/// # Errors
/// When the bytes end early, the id is null or not UTF-8, or bytes follow it.
pub fn decode_key(key: &[u8]) -> Result<TransactionLogKey, TxnLogDecodeError> {
    let mut reader = Reader::new(key, RecordPart::Key);
    let version = reader.i16()?;
    if version != 0 {
        return Ok(TransactionLogKey::Unknown { version });
    }
    let transactional_id = reader.string16()?;
    reader.finish()?;
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
/// # Errors
/// When the version is neither 0 nor 1, the state id is unknown, a length or count is out of
/// range, a known tagged field has the wrong size, the bytes end early, or bytes follow the
/// value.
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
    let state = TransactionState::from_id(reader.i8()?)
        .ok_or_else(|| reader.error(state_at, "an unknown transaction state id"))?;
    let partitions = read_partitions(&mut reader, flexible)?;
    let mut decoded = TransactionLogValue {
        producer_id,
        producer_epoch,
        transaction_timeout_ms,
        state,
        last_update_timestamp_ms: reader.i64()?,
        start_timestamp_ms: reader.i64()?,
        ..TransactionLogValue::new(producer_id, producer_epoch, transaction_timeout_ms, state)
    };
    match (state, partitions) {
        // Kafka ignores what an Empty value lists.
        (TransactionState::Empty, _) => {}
        (_, Some(partitions)) => decoded.partitions = partitions,
        (_, None) => {
            return Err(reader.error(state_at, "a state other than Empty with null partitions"));
        }
    }
    if flexible {
        read_value_tagged_fields(&mut reader, &mut decoded)?;
    }
    reader.finish()?;
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
    let mut topics = Vec::with_capacity(count.min(1024));
    for _ in 0..count {
        let topic = if flexible {
            reader.compact_string()?
        } else {
            reader.string16()?
        };
        let at = reader.position;
        let count = reader
            .count(flexible)?
            .ok_or_else(|| reader.error(at, "null partition ids"))?;
        let mut partitions = Vec::with_capacity(count.min(1024));
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

/// The value's tagged fields: the four it knows, each of its exact size; unknown tags skipped,
/// as Kafka keeps them aside.
fn read_value_tagged_fields(
    reader: &mut Reader<'_>,
    value: &mut TransactionLogValue,
) -> Result<(), TxnLogDecodeError> {
    let count = reader.uvarint()?;
    for _ in 0..count {
        let tag = reader.uvarint()?;
        let size_at = reader.position;
        let size = reader.uvarint()? as usize;
        let expected = match tag {
            0..=1 => 8,
            2..=3 => 2,
            _ => {
                reader.take(size)?;
                continue;
            }
        };
        if size != expected {
            return Err(reader.error(size_at, "a known tagged field has the wrong size"));
        }
        match tag {
            0 => value.previous_producer_id = reader.i64()?,
            1 => value.next_producer_id = reader.i64()?,
            2 => value.client_transaction_version = reader.i16()?,
            _ => value.next_producer_epoch = reader.i16()?,
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

/// A cursor over a key or value, failing with [`TxnLogDecodeError`].
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

    fn uvarint(&mut self) -> Result<u32, TxnLogDecodeError> {
        let start = self.position;
        let mut value: u32 = 0;
        for shift in (0..35).step_by(7) {
            let [byte] = self.array::<1>()?;
            value |= u32::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                if shift == 28 && byte > 0x0f {
                    break;
                }
                return Ok(value);
            }
        }
        Err(self.error(start, "an unsigned varint longer than 32 bits"))
    }

    fn utf8(&mut self, len: usize) -> Result<String, TxnLogDecodeError> {
        let at = self.position;
        let bytes = self.take(len)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| self.error(at, "a string is not UTF-8"))
    }

    fn string16(&mut self) -> Result<String, TxnLogDecodeError> {
        let at = self.position;
        let len = self.i16()?;
        let len =
            usize::try_from(len).map_err(|_| self.error(at, "a null or negative string length"))?;
        self.utf8(len)
    }

    fn compact_string(&mut self) -> Result<String, TxnLogDecodeError> {
        let at = self.position;
        let len = self.uvarint()?;
        let len = len
            .checked_sub(1)
            .ok_or_else(|| self.error(at, "a null string where one is required"))?;
        if len > i16::MAX as u32 {
            return Err(self.error(at, "a string longer than 32767 bytes"));
        }
        self.utf8(len as usize)
    }

    /// An array count: `None` when null.
    fn count(&mut self, flexible: bool) -> Result<Option<usize>, TxnLogDecodeError> {
        let at = self.position;
        let count = if flexible {
            match self.uvarint()? {
                0 => return Ok(None),
                n => i64::from(n) - 1,
            }
        } else {
            match self.i32()? {
                -1 => return Ok(None),
                n => i64::from(n),
            }
        };
        // Each element takes at least one byte: a count past the bytes left is damage, and must
        // not make the reader reserve memory for it.
        match usize::try_from(count) {
            Ok(n) if n <= self.bytes.len() - self.position => Ok(Some(n)),
            _ => Err(self.error(at, "an array count out of range")),
        }
    }

    fn skip_tagged_fields(&mut self) -> Result<(), TxnLogDecodeError> {
        let count = self.uvarint()?;
        for _ in 0..count {
            self.uvarint()?;
            let size = self.uvarint()?;
            self.take(size as usize)?;
        }
        Ok(())
    }

    fn finish(&self) -> Result<(), TxnLogDecodeError> {
        if self.position == self.bytes.len() {
            Ok(())
        } else {
            Err(self.error(self.position, "bytes follow the end of the record"))
        }
    }
}
