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
use super::varint::{VarintScratch, varint_size, varlong_size, write_varint};
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

    /// A record stamped with the system's current time (milliseconds since the epoch), as a
    /// Kafka producer stamps a record sent without a timestamp.
    ///
    /// The log checks the timestamp against its own clock (`message.timestamp.before.max.ms`,
    /// `message.timestamp.after.max.ms`): a log opened with a manual clock may refuse it.
    pub fn now(key: Option<&[u8]>, value: Option<&[u8]>) -> NewRecord {
        NewRecord::new(
            crate::clock::Clock::now_ms(&crate::clock::SystemClock),
            key,
            value,
        )
    }

    /// Adds a header.
    #[must_use]
    pub fn with_header(mut self, key: impl Into<String>, value: Option<&[u8]>) -> NewRecord {
        self.headers.push((key.into(), value.map(<[u8]>::to_vec)));
        self
    }
}

/// A record to append, borrowing its bytes: [`Log::append_refs`](crate::Log::append_refs) and
/// [`BatchBuilder::push_ref`] encode it straight into the batch, with no copy before. The
/// form for callers whose bytes live elsewhere already (a benchmark's payloads, a decoded
/// request); [`NewRecord`] owns its bytes instead.
///
/// ```
/// use partlog::{Log, LogConfig, RecordRef};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = tempfile::tempdir()?;
/// let log = Log::open(dir.path(), LogConfig::default())?;
/// let payload = vec![7u8; 100];
/// let records: Vec<RecordRef<'_>> = (0..10)
///     .map(|n| RecordRef::new(1_700_000_000_000 + n, None, Some(&payload)))
///     .collect();
/// let appended = log.append_refs(&records)?;
/// assert_eq!(appended.records, 10);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RecordRef<'a> {
    /// Create time in milliseconds since the epoch.
    pub timestamp: i64,
    /// The key; `None` writes a null key.
    pub key: Option<&'a [u8]>,
    /// The value; `None` writes a null value (a tombstone).
    pub value: Option<&'a [u8]>,
    /// Headers in order: a UTF-8 key and a nullable value.
    pub headers: &'a [(&'a str, Option<&'a [u8]>)],
}

impl<'a> RecordRef<'a> {
    /// A record with the given timestamp, key and value, and no headers.
    pub fn new(timestamp: i64, key: Option<&'a [u8]>, value: Option<&'a [u8]>) -> RecordRef<'a> {
        RecordRef {
            timestamp,
            key,
            value,
            headers: &[],
        }
    }

    /// The same record with these headers.
    #[must_use]
    pub fn with_headers(self, headers: &'a [(&'a str, Option<&'a [u8]>)]) -> RecordRef<'a> {
        RecordRef { headers, ..self }
    }
}

/// What a record's encoding needs that does not depend on its batch: its field lengths, checked
/// to fit the format, and the size of everything after its two deltas. Measured once, it gives
/// both the batching writer's upper bound and the exact encoding
/// ([`BatchBuilder::push_shaped`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecordShape {
    /// -1 for a null key.
    key_len: i32,
    /// -1 for a null value.
    value_len: i32,
    header_count: i32,
    /// Key, value and headers with their length prefixes, and the header count.
    tail_size: usize,
}

impl RecordShape {
    /// Measures a record's parts. Fails with [`Error::InvalidArgument`] for a field longer than
    /// `i32::MAX` bytes or a record too large to encode.
    #[inline]
    pub(crate) fn measure<'h>(
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: impl Iterator<Item = (&'h [u8], Option<&'h [u8]>)>,
    ) -> Result<RecordShape> {
        let key_len = nullable_len(key)?;
        let value_len = nullable_len(value)?;
        let mut header_count: i32 = 0;
        let mut headers_size: usize = 0;
        for (header_key, header_value) in headers {
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
        let tail_size = [
            nullable_size(key),
            nullable_size(value),
            varint_size(header_count),
            headers_size,
        ]
        .into_iter()
        .try_fold(0usize, usize::checked_add)
        .ok_or_else(|| invalid("record size overflows"))?;
        let shape = RecordShape {
            key_len,
            value_len,
            header_count,
            tail_size,
        };
        // A record must stay encodable whatever its deltas turn out to be.
        shape.size_upper_bound()?;
        Ok(shape)
    }

    /// The body's size (everything after the length prefix) with these deltas.
    #[inline]
    fn body_size(&self, timestamp_delta: i64, offset_delta: i32) -> Result<usize> {
        (1 + varlong_size(timestamp_delta) + varint_size(offset_delta)) // attributes, deltas
            .checked_add(self.tail_size)
            .ok_or_else(|| invalid("record size overflows"))
    }

    /// An upper bound of the record's encoded size in any batch, whatever its timestamp and
    /// offset deltas (Kafka's `DefaultRecord.estimateSizeInBytesUpperBound`).
    #[inline]
    pub(crate) fn size_upper_bound(&self) -> Result<usize> {
        let body = self.body_size(i64::MIN, i32::MIN)?;
        Ok(varint_size(len_i32(body)?) + body)
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

    /// As [`BatchBuilder::new`], encoding into `buffer`, a batch buffer used before (the
    /// batching writer keeps a few; an appender that hands the built batch's buffer back here
    /// allocates nothing per batch). Its old bytes are dropped first, its capacity kept: nothing
    /// of them can reach the new batch, whose header is zeroed until `build` writes it.
    pub fn with_buffer(compression: Compression, mut buffer: Vec<u8>) -> BatchBuilder {
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

    /// Appends a borrowed record: its bytes are copied once, into the batch.
    pub fn push_ref(&mut self, record: &RecordRef<'_>) {
        self.push_encoded(
            None,
            record.timestamp,
            record.key,
            record.value,
            record
                .headers
                .iter()
                .map(|(key, value)| (key.as_bytes(), *value)),
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

    /// Appends a record from borrowed parts that [`RecordShape::measure`] has measured: the
    /// batching writer measures each record once, for its memory reservation and its encoding.
    /// `shape` must be the shape of exactly these parts; if it is not, `build` fails.
    pub(crate) fn push_shaped<K: AsRef<[u8]>>(
        &mut self,
        shape: &RecordShape,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(K, Option<&[u8]>)],
    ) {
        if self.error.is_some() {
            return;
        }
        let headers = headers.iter().map(|(key, value)| (key.as_ref(), *value));
        if let Err(error) = self.encode_shaped(None, timestamp, shape, key, value, headers) {
            self.error = Some(error);
        }
    }

    /// [`push_shaped`](Self::push_shaped) of an owned record.
    pub(crate) fn push_shaped_record(&mut self, shape: &RecordShape, record: &NewRecord) {
        if self.error.is_some() {
            return;
        }
        let headers = record
            .headers
            .iter()
            .map(|(key, value)| (key.as_bytes(), value.as_deref()));
        if let Err(error) = self.encode_shaped(
            None,
            record.timestamp,
            shape,
            record.key.as_deref(),
            record.value.as_deref(),
            headers,
        ) {
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
        let shape = RecordShape::measure(key, value, headers.clone())?;
        self.encode_shaped(offset_delta, timestamp, &shape, key, value, headers)
    }

    fn encode_shaped<'h, I>(
        &mut self,
        offset_delta: Option<i32>,
        timestamp: i64,
        shape: &RecordShape,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: I,
    ) -> Result<()>
    where
        I: Iterator<Item = (&'h [u8], Option<&'h [u8]>)>,
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
        let first_timestamp = if self.record_count == 0 {
            self.delete_horizon_ms.unwrap_or(timestamp)
        } else {
            self.first_timestamp
        };
        // Kafka subtracts with Java long arithmetic, which wraps; the reader adds back the same.
        let timestamp_delta = timestamp.wrapping_sub(first_timestamp);

        // The body length precedes the body, so it is sized first (as Kafka's
        // `DefaultRecord.sizeOfBodyInBytes`), then written once with no back-patching.
        let body_size = shape.body_size(timestamp_delta, offset_delta)?;
        let body_len = len_i32(body_size)?;
        let start = self.buffer.len();
        self.buffer.reserve(varint_size(body_len) + body_size);
        // The framing up to the key's length (at most 26 bytes), then the value's length, each
        // gathered on the stack and appended with one copy.
        let mut framing = VarintScratch::new();
        framing.push_varint(body_len);
        framing.push(0); // attributes
        framing.push_varlong(timestamp_delta);
        framing.push_varint(offset_delta);
        framing.push_varint(shape.key_len);
        if let Some(key) = key {
            self.buffer.extend_from_slice(framing.as_slice());
            self.buffer.extend_from_slice(key);
            framing.clear();
        }
        framing.push_varint(shape.value_len);
        self.buffer.extend_from_slice(framing.as_slice());
        if let Some(value) = value {
            self.buffer.extend_from_slice(value);
        }
        write_varint(&mut self.buffer, shape.header_count);
        let mut header_count = 0;
        for (header_key, header_value) in headers {
            write_varint(&mut self.buffer, len_i32(header_key.len())?);
            self.buffer.extend_from_slice(header_key);
            write_nullable(&mut self.buffer, header_value, nullable_len(header_value)?);
            header_count += 1;
        }
        let written = self.buffer.len() - start;
        if written != varint_size(body_len) + body_size || header_count != shape.header_count {
            // Only a shape measured from other parts gets here: drop the bad bytes, fail the batch.
            self.buffer.truncate(start);
            return Err(invalid(
                "a record was encoded with the shape of another record",
            ));
        }

        if self.record_count == 0 {
            self.first_timestamp = first_timestamp;
            self.max_timestamp = timestamp;
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
        // A let-else, not `ok_or`: an eagerly built `Error` is dropped on every batch that fits.
        let Some(batch_length) = batch
            .len()
            .checked_sub(LOG_OVERHEAD)
            .and_then(|len| i32::try_from(len).ok())
        else {
            return Err(Error::RecordTooLarge {
                size: batch.len() as u64,
                max: i32::MAX as u64,
                limit: crate::error::FORMAT_BATCH_LIMIT,
            });
        };

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

#[cfg(test)]
mod tests {
    use super::*;

    fn records() -> Vec<NewRecord> {
        vec![
            NewRecord::new(1_700_000_000_000, None, Some(&[7u8; 100])),
            NewRecord::new(5, Some(b"key"), None),
            NewRecord::new(-1, None, None),
            // A timestamp far below the first: a negative 10-byte delta.
            NewRecord::new(i64::MIN, Some(&[1u8; 200]), Some(&[2u8; 70_000]))
                .with_header("h", Some(b"v"))
                .with_header("", None),
            NewRecord::new(i64::MAX, Some(b""), Some(b"")),
        ]
    }

    #[test]
    fn a_shaped_push_encodes_as_a_plain_push() {
        let mut plain = BatchBuilder::new(Compression::None);
        let mut shaped = BatchBuilder::new(Compression::None);
        let mut parts = BatchBuilder::new(Compression::None);
        for record in records() {
            plain.push(&record);
            let shape = RecordShape::measure(
                record.key.as_deref(),
                record.value.as_deref(),
                record
                    .headers
                    .iter()
                    .map(|(k, v)| (k.as_bytes(), v.as_deref())),
            )
            .unwrap();
            shaped.push_shaped_record(&shape, &record);
            let headers: Vec<(&str, Option<&[u8]>)> = record
                .headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_deref()))
                .collect();
            parts.push_shaped(
                &shape,
                record.timestamp,
                record.key.as_deref(),
                record.value.as_deref(),
                &headers,
            );
            let encoded = shaped.uncompressed_size();
            assert_eq!(encoded, plain.uncompressed_size());
            assert!(shape.size_upper_bound().unwrap() <= encoded);
        }
        let plain = plain.build().unwrap();
        assert_eq!(shaped.build().unwrap(), plain);
        assert_eq!(parts.build().unwrap(), plain);
        // And the bytes are the records: decoded back field by field.
        let view = super::super::BatchView::new(&plain).unwrap();
        let mut scratch = Vec::new();
        let decoded: Vec<_> = view
            .records(&mut scratch)
            .unwrap()
            .collect::<Result<_>>()
            .unwrap();
        let expected = records();
        assert_eq!(decoded.len(), expected.len());
        for (index, (record, expected)) in decoded.iter().zip(&expected).enumerate() {
            assert_eq!(record.offset, index as i64);
            assert_eq!(record.timestamp, expected.timestamp);
            assert_eq!(record.key, expected.key.as_deref());
            assert_eq!(record.value, expected.value.as_deref());
            let headers: Vec<(&[u8], Option<&[u8]>)> =
                record.headers().map(|h| (h.key, h.value)).collect();
            let expected_headers: Vec<(&[u8], Option<&[u8]>)> = expected
                .headers
                .iter()
                .map(|(k, v)| (k.as_bytes(), v.as_deref()))
                .collect();
            assert_eq!(headers, expected_headers);
        }
    }

    #[test]
    fn a_shape_of_other_parts_fails_the_batch_and_writes_nothing() {
        let mut builder = BatchBuilder::new(Compression::None);
        builder.push(&NewRecord::new(0, None, Some(b"first")));
        let before = builder.uncompressed_size();
        let shape = RecordShape::measure(None, Some(b"short"), std::iter::empty()).unwrap();
        builder.push_shaped_record(&shape, &NewRecord::new(0, None, Some(b"much longer")));
        assert_eq!(builder.uncompressed_size(), before);
        assert!(matches!(
            builder.build(),
            Err(Error::InvalidArgument { .. })
        ));
    }

    #[test]
    fn a_reused_buffer_leaks_nothing_of_its_last_batch() {
        let record = NewRecord::new(1_700_000_000_000, Some(b"k"), Some(b"v"));
        let mut fresh = BatchBuilder::new(Compression::None);
        fresh.push(&record);
        let fresh = fresh.build().unwrap();
        // A buffer that held a larger batch, and garbage in its spare capacity.
        let mut old = BatchBuilder::new(Compression::None);
        for _ in 0..50 {
            old.push(&NewRecord::new(7, Some(&[0xab; 100]), Some(&[0xcd; 100])));
        }
        let mut buffer = old.build().unwrap();
        buffer.resize(buffer.capacity(), 0xee);
        let mut reused = BatchBuilder::with_buffer(Compression::None, buffer);
        assert_eq!(reused.uncompressed_size(), RECORD_BATCH_OVERHEAD);
        reused.push(&record);
        assert_eq!(reused.build().unwrap(), fresh);
    }
}
