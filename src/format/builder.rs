//! [`BatchBuilder`]: records in, one encoded v2 batch out.
//!
//! Records are encoded straight into one buffer that starts with 61 bytes reserved for the
//! header. For an uncompressed batch that buffer *is* the batch: `build` fills in the header and
//! the CRC and returns it, with no copy. For lz4 and zstd, `build` compresses the records once,
//! straight into the output after its header.

use super::batch::{
    BatchHeader, CONTROL_BIT, CRC_AT, CRC_COVERED_FROM, CURRENT_MAGIC, DELETE_HORIZON_BIT,
    LOG_OVERHEAD, RECORD_BATCH_OVERHEAD, TIMESTAMP_TYPE_BIT, TRANSACTIONAL_BIT, TimestampType,
};
use super::compression::{self, Compression, DEFAULT_ZSTD_LEVEL};
use super::crc::crc32c;
use super::record::Record;
use super::varint::{varint_size, varlong_size, write_varint, write_varlong};
use crate::error::{Error, Result};

/// A record to append, owning its bytes: the convenient form for callers.
/// [`BatchBuilder::push_parts`] takes borrowed parts instead.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct NewRecord {
    /// Create time in milliseconds since the epoch (ignored for reads under LogAppendTime).
    pub timestamp: i64,
    /// The key; `None` writes a null key.
    pub key: Option<Vec<u8>>,
    /// The value; `None` writes a null value (a tombstone).
    pub value: Option<Vec<u8>>,
    /// Headers in order: a UTF-8 key and a nullable value.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

impl NewRecord {
    /// A record with the given timestamp, key and value, and no headers.
    pub fn new(timestamp: i64, key: Option<&[u8]>, value: Option<&[u8]>) -> NewRecord {
        NewRecord {
            timestamp,
            key: key.map(<[u8]>::to_vec),
            value: value.map(<[u8]>::to_vec),
            headers: Vec::new(),
        }
    }

    /// Adds a header.
    #[must_use]
    pub fn with_header(mut self, key: impl Into<String>, value: Option<&[u8]>) -> NewRecord {
        self.headers.push((key.into(), value.map(<[u8]>::to_vec)));
        self
    }
}

/// Builds one RecordBatch v2.
///
/// Configure with the by-value setters, [`push`](BatchBuilder::push) records, then
/// [`build`](BatchBuilder::build). Offsets inside the batch are consecutive from
/// `base_offset` (0 unless set: the log assigns real offsets in place later), except for records
/// pushed at their own offset ([`push_record_at_offset`](BatchBuilder::push_record_at_offset)).
/// `baseTimestamp` is the first record's timestamp (or the delete horizon) and `maxTimestamp`
/// the largest, as in Kafka.
///
/// Pushing never fails: a record that cannot be encoded (a field over `i32::MAX` bytes, more
/// than `i32::MAX` records) is remembered and reported by `build`.
#[derive(Debug)]
pub struct BatchBuilder {
    compression: Compression,
    zstd_level: i32,
    base_offset: i64,
    partition_leader_epoch: i32,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    transactional: bool,
    timestamp_type: TimestampType,
    log_append_time: Option<i64>,
    /// 61 reserved header bytes, then the encoded records.
    buffer: Vec<u8>,
    record_count: i32,
    /// Offset delta of the last record pushed, -1 before the first.
    last_pushed_delta: i32,
    /// `lastOffsetDelta` to write if larger than `last_pushed_delta` (compaction keeps the
    /// original range).
    last_offset_delta: Option<i32>,
    /// The base of the timestamp deltas: the first record's timestamp, or the delete horizon.
    first_timestamp: i64,
    delete_horizon_ms: Option<i64>,
    max_timestamp: i64,
    error: Option<Error>,
}

impl BatchBuilder {
    /// A builder for a batch compressed with `compression`; no producer, CreateTime, base
    /// offset 0, partition leader epoch -1 (unknown, as a Kafka producer sends it).
    pub fn new(compression: Compression) -> BatchBuilder {
        BatchBuilder::with_capacity(compression, 1024)
    }

    /// As [`BatchBuilder::new`], reserving room for about `records_bytes` of encoded records.
    pub fn with_capacity(compression: Compression, records_bytes: usize) -> BatchBuilder {
        BatchBuilder::with_buffer(
            compression,
            Vec::with_capacity(RECORD_BATCH_OVERHEAD + records_bytes),
        )
    }

    /// As [`BatchBuilder::new`], encoding into `buffer` (its contents are dropped, its
    /// capacity kept): an appender that hands the built batch's buffer back here allocates
    /// nothing per batch.
    pub(crate) fn with_buffer(compression: Compression, mut buffer: Vec<u8>) -> BatchBuilder {
        buffer.clear();
        // A fresh buffer starts as `new`'s does, not growing from nothing.
        buffer.reserve(RECORD_BATCH_OVERHEAD + 1024);
        buffer.resize(RECORD_BATCH_OVERHEAD, 0);
        BatchBuilder {
            compression,
            zstd_level: DEFAULT_ZSTD_LEVEL,
            base_offset: 0,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            transactional: false,
            timestamp_type: TimestampType::CreateTime,
            log_append_time: None,
            buffer,
            record_count: 0,
            last_pushed_delta: -1,
            last_offset_delta: None,
            first_timestamp: -1,
            delete_horizon_ms: None,
            max_timestamp: -1,
            error: None,
        }
    }

    /// The offset of the first record.
    #[must_use]
    pub fn base_offset(mut self, base_offset: i64) -> BatchBuilder {
        self.base_offset = base_offset;
        self
    }

    /// The partition leader epoch stamped in the header (not covered by the CRC).
    #[must_use]
    pub fn partition_leader_epoch(mut self, epoch: i32) -> BatchBuilder {
        self.partition_leader_epoch = epoch;
        self
    }

    /// Marks the batch as written by an idempotent producer: its id, epoch and the sequence
    /// number of the first record.
    #[must_use]
    pub fn producer(
        mut self,
        producer_id: i64,
        producer_epoch: i16,
        base_sequence: i32,
    ) -> BatchBuilder {
        self.producer_id = producer_id;
        self.producer_epoch = producer_epoch;
        self.base_sequence = base_sequence;
        self
    }

    /// Sets attribute bit 4: the batch belongs to a transaction of its producer.
    #[must_use]
    pub fn transactional(mut self, transactional: bool) -> BatchBuilder {
        self.transactional = transactional;
        self
    }

    /// Sets the timestamp type. Under LogAppendTime without
    /// [`log_append_time`](BatchBuilder::log_append_time), `maxTimestamp` is the largest record
    /// timestamp, to be overwritten by the log with `set_log_append_time`.
    #[must_use]
    pub fn timestamp_type(mut self, timestamp_type: TimestampType) -> BatchBuilder {
        self.timestamp_type = timestamp_type;
        if timestamp_type == TimestampType::CreateTime {
            self.log_append_time = None;
        }
        self
    }

    /// LogAppendTime with the given append time as `maxTimestamp`; records keep their own
    /// timestamp deltas on disk, and readers report `timestamp_ms` for every record.
    #[must_use]
    pub fn log_append_time(mut self, timestamp_ms: i64) -> BatchBuilder {
        self.timestamp_type = TimestampType::LogAppendTime;
        self.log_append_time = Some(timestamp_ms);
        self
    }

    /// Sets attribute bit 6 and writes `horizon_ms` as `baseTimestamp`, the time after which the
    /// cleaner may drop this batch's tombstones (KIP-534). Record timestamp deltas are then taken
    /// against the horizon (they may be negative), so record timestamps read back unchanged.
    /// Must be set before the first push; otherwise `build` fails.
    #[must_use]
    pub fn delete_horizon_ms(mut self, horizon_ms: i64) -> BatchBuilder {
        if self.record_count > 0 {
            self.error
                .get_or_insert_with(|| invalid("set the delete horizon before pushing records"));
        }
        self.delete_horizon_ms = Some(horizon_ms);
        self.first_timestamp = horizon_ms;
        self
    }

    /// Writes `delta` as `lastOffsetDelta` when it exceeds the last record's offset delta: a
    /// compacted batch keeps spanning its original offsets, so that producer sequence
    /// arithmetic (`baseSequence + lastOffsetDelta`) survives the removal of its last records.
    #[must_use]
    pub fn last_offset_delta(mut self, delta: i32) -> BatchBuilder {
        self.last_offset_delta = Some(delta);
        self
    }

    /// The zstd compression level (Kafka's `compression.zstd.level`, default 3). Ignored by the
    /// other codecs.
    #[must_use]
    pub fn compression_level(mut self, level: i32) -> BatchBuilder {
        self.zstd_level = level;
        self
    }

    /// Records pushed so far.
    pub fn record_count(&self) -> usize {
        usize::try_from(self.record_count).unwrap_or(0)
    }

    /// Whether no record has been pushed.
    pub fn is_empty(&self) -> bool {
        self.record_count == 0
    }

    /// Size of the batch if it were built uncompressed now: header plus encoded records. For
    /// callers that cap batch sizes: compression only adds a few bytes of framing to data it
    /// cannot shrink.
    pub fn uncompressed_size(&self) -> usize {
        self.buffer.len()
    }

    /// Appends an owned record.
    pub fn push(&mut self, record: &NewRecord) {
        self.push_encoded(
            None,
            record.timestamp,
            record.key.as_deref(),
            record.value.as_deref(),
            record
                .headers
                .iter()
                .map(|(key, value)| (key.as_bytes(), value.as_deref())),
        );
    }

    /// Appends a record from borrowed parts. Header keys may be `&str`, `String` or `&[u8]`.
    pub fn push_parts<K: AsRef<[u8]>>(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(K, Option<&[u8]>)],
    ) {
        self.push_encoded(
            None,
            timestamp,
            key,
            value,
            headers.iter().map(|(key, value)| (key.as_ref(), *value)),
        );
    }

    /// Appends a copy of a decoded record (its timestamp as read, key, value and headers; its
    /// offset is re-assigned), for re-encoding batches. From a LogAppendTime batch the
    /// timestamp read is the append time.
    pub fn push_record(&mut self, record: &Record<'_>) {
        self.push_encoded(
            None,
            record.timestamp,
            record.key,
            record.value,
            record.headers().map(|header| (header.key, header.value)),
        );
    }

    /// Appends a copy of a decoded record at its own offset, which must lie above the previous
    /// record's and within `i32::MAX` of `base_offset`: how compaction copies the records it
    /// keeps, leaving gaps where it dropped others.
    pub fn push_record_at_offset(&mut self, record: &Record<'_>) {
        let delta = record
            .offset
            .checked_sub(self.base_offset)
            .and_then(|delta| i32::try_from(delta).ok());
        match delta {
            Some(delta) => self.push_encoded(
                Some(delta),
                record.timestamp,
                record.key,
                record.value,
                record.headers().map(|header| (header.key, header.value)),
            ),
            None => {
                self.error.get_or_insert_with(|| {
                    invalid("a record offset must lie within i32::MAX above the base offset")
                });
            }
        }
    }

    fn push_encoded<'h, I>(
        &mut self,
        offset_delta: Option<i32>,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: I,
    ) where
        I: Iterator<Item = (&'h [u8], Option<&'h [u8]>)> + Clone,
    {
        if self.error.is_some() {
            return;
        }
        if let Err(error) = self.encode_record(offset_delta, timestamp, key, value, headers) {
            self.error = Some(error);
        }
    }

    fn encode_record<'h, I>(
        &mut self,
        offset_delta: Option<i32>,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: I,
    ) -> Result<()>
    where
        I: Iterator<Item = (&'h [u8], Option<&'h [u8]>)> + Clone,
    {
        if self.record_count == i32::MAX {
            return Err(invalid("a batch holds at most i32::MAX records"));
        }
        let offset_delta = match offset_delta {
            Some(delta) if delta > self.last_pushed_delta => delta,
            Some(_) => return Err(invalid("record offsets must increase within a batch")),
            None => self
                .last_pushed_delta
                .checked_add(1)
                .ok_or_else(|| invalid("a batch spans at most i32::MAX offsets"))?,
        };
        if self.record_count == 0 {
            self.first_timestamp = self.delete_horizon_ms.unwrap_or(timestamp);
            self.max_timestamp = timestamp;
        }
        // Kafka subtracts with Java long arithmetic, which wraps; the reader adds back the same.
        let timestamp_delta = timestamp.wrapping_sub(self.first_timestamp);

        // The body length precedes the body, so size everything first (as Kafka's
        // `DefaultRecord.sizeOfBodyInBytes`), then write once with no back-patching.
        let key_len = nullable_len(key)?;
        let value_len = nullable_len(value)?;
        let mut header_count: i32 = 0;
        let mut headers_size: usize = 0;
        for (header_key, header_value) in headers.clone() {
            let header_key_len = len_i32(header_key.len())?;
            nullable_len(header_value)?;
            headers_size = headers_size
                .checked_add(varint_size(header_key_len) + header_key.len())
                .and_then(|size| size.checked_add(nullable_size(header_value)))
                .ok_or_else(|| invalid("record headers overflow"))?;
            header_count = header_count
                .checked_add(1)
                .ok_or_else(|| invalid("a record holds at most i32::MAX headers"))?;
        }
        let body_size = [
            1, // attributes
            varlong_size(timestamp_delta),
            varint_size(offset_delta),
            nullable_size(key),
            nullable_size(value),
            varint_size(header_count),
            headers_size,
        ]
        .into_iter()
        .try_fold(0usize, usize::checked_add)
        .ok_or_else(|| invalid("record size overflows"))?;
        let body_len = len_i32(body_size)?;

        self.buffer.reserve(varint_size(body_len) + body_size);
        write_varint(&mut self.buffer, body_len);
        self.buffer.push(0);
        write_varlong(&mut self.buffer, timestamp_delta);
        write_varint(&mut self.buffer, offset_delta);
        write_nullable(&mut self.buffer, key, key_len);
        write_nullable(&mut self.buffer, value, value_len);
        write_varint(&mut self.buffer, header_count);
        for (header_key, header_value) in headers {
            write_varint(&mut self.buffer, len_i32(header_key.len())?);
            self.buffer.extend_from_slice(header_key);
            write_nullable(&mut self.buffer, header_value, nullable_len(header_value)?);
        }

        self.record_count += 1;
        self.last_pushed_delta = offset_delta;
        self.max_timestamp = self.max_timestamp.max(timestamp);
        Ok(())
    }

    /// Encodes the batch: header, (compressed) records and CRC.
    ///
    /// Fails with [`Error::InvalidArgument`] for an empty batch or a record that could not be
    /// encoded, [`Error::UnsupportedCompression`] for gzip and snappy (partlog reads them with
    /// their features, but never writes them), and
    /// [`Error::RecordTooLarge`] when the batch would exceed `i32::MAX` bytes.
    pub fn build(self) -> Result<Vec<u8>> {
        if let Some(error) = self.error {
            return Err(error);
        }
        if self.record_count == 0 {
            return Err(invalid("a batch needs at least one record"));
        }
        if !self.compression.is_supported() {
            return Err(Error::UnsupportedCompression {
                codec: self.compression.id(),
            });
        }
        let mut batch = match self.compression {
            Compression::None => self.buffer,
            codec => {
                let records = self.buffer.get(RECORD_BATCH_OVERHEAD..).unwrap_or_default();
                let mut out = Vec::with_capacity(RECORD_BATCH_OVERHEAD + records.len() / 2 + 64);
                out.resize(RECORD_BATCH_OVERHEAD, 0);
                compression::compress(codec, records, &mut out, self.zstd_level)?;
                out
            }
        };
        let batch_length = batch
            .len()
            .checked_sub(LOG_OVERHEAD)
            .and_then(|len| i32::try_from(len).ok())
            .ok_or(Error::RecordTooLarge {
                size: batch.len() as u64,
                max: i32::MAX as u64,
            })?;

        let mut attributes = i16::from(self.compression.id());
        if self.timestamp_type == TimestampType::LogAppendTime {
            attributes |= TIMESTAMP_TYPE_BIT;
        }
        if self.transactional {
            attributes |= TRANSACTIONAL_BIT;
        }
        if self.delete_horizon_ms.is_some() {
            attributes |= DELETE_HORIZON_BIT;
        }
        let header = BatchHeader {
            base_offset: self.base_offset,
            batch_length,
            partition_leader_epoch: self.partition_leader_epoch,
            magic: CURRENT_MAGIC,
            crc: 0,
            attributes,
            last_offset_delta: self
                .last_offset_delta
                .unwrap_or(0)
                .max(self.last_pushed_delta),
            base_timestamp: self.first_timestamp,
            max_timestamp: self.log_append_time.unwrap_or(self.max_timestamp),
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
            base_sequence: self.base_sequence,
            records_count: self.record_count,
        };
        seal(&mut batch, &header);
        Ok(batch)
    }
}

/// Writes `header` over the first 61 bytes of `batch`, then the CRC of `[21, end)`.
pub(crate) fn seal(batch: &mut [u8], header: &BatchHeader) {
    if let Some(slot) = batch.get_mut(..RECORD_BATCH_OVERHEAD) {
        slot.copy_from_slice(&header.encode());
    }
    let crc = crc32c(batch.get(CRC_COVERED_FROM..).unwrap_or_default());
    if let Some(slot) = batch.get_mut(CRC_AT..CRC_COVERED_FROM) {
        slot.copy_from_slice(&crc.to_be_bytes());
    }
}

/// The attribute bits of a control (marker) batch, for [`super::control`].
pub(crate) const CONTROL_BATCH_ATTRIBUTES: i16 = CONTROL_BIT | TRANSACTIONAL_BIT;

fn invalid(why: &str) -> Error {
    Error::InvalidArgument {
        why: why.to_string(),
    }
}

fn len_i32(len: usize) -> Result<i32> {
    i32::try_from(len).map_err(|_| invalid("a key, value or header is larger than i32::MAX bytes"))
}

fn nullable_len(bytes: Option<&[u8]>) -> Result<i32> {
    bytes.map_or(Ok(-1), |bytes| len_i32(bytes.len()))
}

/// Encoded size of a length-prefixed nullable field (1 byte for null). Lengths above
/// `i32::MAX` are rejected before this is used for writing.
fn nullable_size(bytes: Option<&[u8]>) -> usize {
    match bytes {
        None => 1,
        Some(bytes) => varint_size(i32::try_from(bytes.len()).unwrap_or(i32::MAX)) + bytes.len(),
    }
}

fn write_nullable(out: &mut Vec<u8>, bytes: Option<&[u8]>, len: i32) {
    write_varint(out, len);
    if let Some(bytes) = bytes {
        out.extend_from_slice(bytes);
    }
}
