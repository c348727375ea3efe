//! The 61-byte batch header, the 17-byte frame every log-format shares, and [`BatchView`], a
//! validated, borrowed batch.
//!
//! ```text
//! off  size  field                  covered by the CRC?
//!   0     8  baseOffset     i64     no  (the log assigns it in place)
//!   8     4  batchLength    i32     no  (bytes after this field: total size - 12)
//!  12     4  partitionLeaderEpoch   no  (the leader stamps it in place)
//!  16     1  magic          i8      no  (2; bytes 0..17 are common to all formats)
//!  17     4  crc            u32         CRC-32C of bytes [21, end)
//!  21     2  attributes     i16     yes (codec, timestamp type, transactional, control,
//!                                        delete horizon)
//!  23     4  lastOffsetDelta i32    yes
//!  27     8  baseTimestamp  i64     yes (the delete horizon when attribute bit 6 is set)
//!  35     8  maxTimestamp   i64     yes (the append time under LogAppendTime)
//!  43     8  producerId     i64     yes (-1: no producer)
//!  51     2  producerEpoch  i16     yes
//!  53     4  baseSequence   i32     yes (-1: no sequence)
//!  57     4  recordsCount   i32     yes (never compressed)
//!  61     …  records                yes (compressed as one stream if the codec says so)
//! ```
//!
//! All integers are big-endian.

use super::compression::{self, Compression};
use super::crc::crc32c;
use super::legacy::{LEGACY_V0_MIN_MESSAGE_SIZE, LEGACY_V1_MIN_MESSAGE_SIZE};
use super::record::{RecordContext, RecordIter};
use crate::error::{Corruption, Error, Result};

/// Bytes before a batch's `magic`-dependent part: baseOffset (8) and batchLength (4). Kafka's
/// `LOG_OVERHEAD`; a batch's total size is `batchLength + LOG_OVERHEAD`.
pub const LOG_OVERHEAD: usize = 12;
/// The size of a v2 batch header, and so of the smallest v2 batch (one with no records).
pub const RECORD_BATCH_OVERHEAD: usize = 61;
/// Bytes up to and including `magic`: the prefix all message formats (v0, v1, v2) share.
pub const HEADER_SIZE_UP_TO_MAGIC: usize = 17;
/// The only magic partlog reads and writes: RecordBatch v2.
pub const CURRENT_MAGIC: i8 = 2;
/// Smallest legal `batchLength` for magic 2: a header with no records.
pub const MIN_BATCH_LENGTH: i32 = (RECORD_BATCH_OVERHEAD - LOG_OVERHEAD) as i32;

// Byte positions of the header fields (see the module docs).
pub(crate) const BASE_OFFSET_AT: usize = 0;
pub(crate) const BATCH_LENGTH_AT: usize = 8;
pub(crate) const PARTITION_LEADER_EPOCH_AT: usize = 12;
pub(crate) const MAGIC_AT: usize = 16;
pub(crate) const CRC_AT: usize = 17;
pub(crate) const ATTRIBUTES_AT: usize = 21;
pub(crate) const LAST_OFFSET_DELTA_AT: usize = 23;
pub(crate) const BASE_TIMESTAMP_AT: usize = 27;
pub(crate) const MAX_TIMESTAMP_AT: usize = 35;
pub(crate) const PRODUCER_ID_AT: usize = 43;
pub(crate) const PRODUCER_EPOCH_AT: usize = 51;
pub(crate) const BASE_SEQUENCE_AT: usize = 53;
pub(crate) const RECORDS_COUNT_AT: usize = 57;
/// The CRC covers everything from the attributes to the end of the batch.
pub(crate) const CRC_COVERED_FROM: usize = ATTRIBUTES_AT;

// Attribute bits (only the low byte is used; bits 7..15 are written as 0).
pub(crate) const COMPRESSION_MASK: i16 = 0x07;
pub(crate) const TIMESTAMP_TYPE_BIT: i16 = 0x08;
pub(crate) const TRANSACTIONAL_BIT: i16 = 0x10;
pub(crate) const CONTROL_BIT: i16 = 0x20;
pub(crate) const DELETE_HORIZON_BIT: i16 = 0x40;

/// What the timestamps of a batch mean (attribute bit 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TimestampType {
    /// Each record carries the producer's timestamp: `baseTimestamp + timestampDelta`.
    #[default]
    CreateTime,
    /// The broker's append time, stored once as the batch `maxTimestamp`; every record reports it.
    LogAppendTime,
}

impl std::fmt::Display for TimestampType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TimestampType::CreateTime => "CreateTime",
            TimestampType::LogAppendTime => "LogAppendTime",
        })
    }
}

/// The decoded 61-byte header of a v2 batch. Plain data: no invariant beyond what
/// [`BatchHeader::parse`] checks (length and magic) is implied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BatchHeader {
    /// Offset of the first record slot (bytes 0..8).
    pub base_offset: i64,
    /// Bytes after this field, `total_size - 12` (bytes 8..12).
    pub batch_length: i32,
    /// Leader epoch stamped at append, -1 if unknown (bytes 12..16; not CRC-covered).
    pub partition_leader_epoch: i32,
    /// Format version, 2 (byte 16).
    pub magic: i8,
    /// Stored CRC-32C of bytes `[21, end)` (bytes 17..21).
    pub crc: u32,
    /// Codec, timestamp type, transactional, control and delete-horizon bits (bytes 21..23).
    pub attributes: i16,
    /// `lastOffset - baseOffset` (bytes 23..27). Keeps spanning the original range after
    /// compaction removes records, so that producer sequences survive.
    pub last_offset_delta: i32,
    /// Base of the record timestamp deltas (bytes 27..35); the delete horizon if bit 6 is set.
    pub base_timestamp: i64,
    /// Largest record timestamp, or the append time under LogAppendTime (bytes 35..43).
    pub max_timestamp: i64,
    /// Idempotent/transactional producer id, -1 for none (bytes 43..51).
    pub producer_id: i64,
    /// Producer epoch, -1 for none (bytes 51..53).
    pub producer_epoch: i16,
    /// Sequence number of the first record, -1 for none (bytes 53..57).
    pub base_sequence: i32,
    /// Records actually present (bytes 57..61); below `last_offset_delta + 1` after compaction.
    pub records_count: i32,
}

impl BatchHeader {
    /// Decodes the header from the first 61 bytes of `bytes` (more may follow).
    ///
    /// Checks only what is needed to trust the layout: at least 61 bytes, magic 2, and a
    /// `batchLength` of at least 49. The CRC and the counts are [`BatchView::new`]'s business.
    /// For a legacy batch (magic 0 or 1) the error is `BadMagic(0|1)`; [`peek_batch_frame`]
    /// tells the magic apart without failing.
    #[inline]
    pub fn parse(bytes: &[u8]) -> Result<BatchHeader, Corruption> {
        let header: &[u8; RECORD_BATCH_OVERHEAD] = bytes
            .get(..RECORD_BATCH_OVERHEAD)
            .and_then(|prefix| prefix.try_into().ok())
            .ok_or(Corruption::Truncated {
                needed: RECORD_BATCH_OVERHEAD as u64,
                available: bytes.len() as u64,
            })?;
        let magic = i8::from_be_bytes(field(header, MAGIC_AT));
        if magic != CURRENT_MAGIC {
            return Err(Corruption::BadMagic(magic));
        }
        let batch_length = i32::from_be_bytes(field(header, BATCH_LENGTH_AT));
        if batch_length < MIN_BATCH_LENGTH {
            return Err(Corruption::BadBatchLength(batch_length));
        }
        Ok(BatchHeader::decode(header))
    }

    /// Decodes the 61 header bytes as they are, checking nothing: for bytes whose magic and
    /// length a check already passed (a fetch's batches, which the read checked in full).
    /// Building the header in place, with no `Result` around it, keeps a reader's loop from
    /// copying it field by field through the stack.
    #[inline]
    pub(crate) fn decode(header: &[u8; RECORD_BATCH_OVERHEAD]) -> BatchHeader {
        BatchHeader {
            base_offset: i64::from_be_bytes(field(header, BASE_OFFSET_AT)),
            batch_length: i32::from_be_bytes(field(header, BATCH_LENGTH_AT)),
            partition_leader_epoch: i32::from_be_bytes(field(header, PARTITION_LEADER_EPOCH_AT)),
            magic: i8::from_be_bytes(field(header, MAGIC_AT)),
            crc: u32::from_be_bytes(field(header, CRC_AT)),
            attributes: i16::from_be_bytes(field(header, ATTRIBUTES_AT)),
            last_offset_delta: i32::from_be_bytes(field(header, LAST_OFFSET_DELTA_AT)),
            base_timestamp: i64::from_be_bytes(field(header, BASE_TIMESTAMP_AT)),
            max_timestamp: i64::from_be_bytes(field(header, MAX_TIMESTAMP_AT)),
            producer_id: i64::from_be_bytes(field(header, PRODUCER_ID_AT)),
            producer_epoch: i16::from_be_bytes(field(header, PRODUCER_EPOCH_AT)),
            base_sequence: i32::from_be_bytes(field(header, BASE_SEQUENCE_AT)),
            records_count: i32::from_be_bytes(field(header, RECORDS_COUNT_AT)),
        }
    }

    /// Encodes the header as it lies on disk, with the `crc` field as stored in `self` (the
    /// builder computes the CRC after the records are in place).
    pub fn encode(&self) -> [u8; RECORD_BATCH_OVERHEAD] {
        let mut out = [0u8; RECORD_BATCH_OVERHEAD];
        put(&mut out, BASE_OFFSET_AT, &self.base_offset.to_be_bytes());
        put(&mut out, BATCH_LENGTH_AT, &self.batch_length.to_be_bytes());
        put(
            &mut out,
            PARTITION_LEADER_EPOCH_AT,
            &self.partition_leader_epoch.to_be_bytes(),
        );
        put(&mut out, MAGIC_AT, &self.magic.to_be_bytes());
        put(&mut out, CRC_AT, &self.crc.to_be_bytes());
        put(&mut out, ATTRIBUTES_AT, &self.attributes.to_be_bytes());
        put(
            &mut out,
            LAST_OFFSET_DELTA_AT,
            &self.last_offset_delta.to_be_bytes(),
        );
        put(
            &mut out,
            BASE_TIMESTAMP_AT,
            &self.base_timestamp.to_be_bytes(),
        );
        put(
            &mut out,
            MAX_TIMESTAMP_AT,
            &self.max_timestamp.to_be_bytes(),
        );
        put(&mut out, PRODUCER_ID_AT, &self.producer_id.to_be_bytes());
        put(
            &mut out,
            PRODUCER_EPOCH_AT,
            &self.producer_epoch.to_be_bytes(),
        );
        put(
            &mut out,
            BASE_SEQUENCE_AT,
            &self.base_sequence.to_be_bytes(),
        );
        put(
            &mut out,
            RECORDS_COUNT_AT,
            &self.records_count.to_be_bytes(),
        );
        out
    }

    /// `base_offset + last_offset_delta`: the offset of the last record slot, which is what
    /// Kafka's `.index` entries and "next offset" arithmetic use. Wraps on overflow (a
    /// [`BatchView`] rejects such headers).
    pub fn last_offset(&self) -> i64 {
        self.base_offset
            .wrapping_add(i64::from(self.last_offset_delta))
    }

    /// The offset right after this batch: `last_offset() + 1`.
    pub fn next_offset(&self) -> i64 {
        self.last_offset().wrapping_add(1)
    }

    /// Total bytes of the batch on disk: `batch_length + 12`. A negative length (impossible
    /// after [`BatchHeader::parse`]) counts as 0.
    pub fn total_size(&self) -> usize {
        usize::try_from(self.batch_length).unwrap_or(0) + LOG_OVERHEAD
    }

    /// The codec of attribute bits 0-2; ids 5 to 7 are [`Error::UnsupportedCompression`].
    pub fn compression(&self) -> Result<Compression> {
        Compression::from_id((self.attributes & COMPRESSION_MASK) as u8)
    }

    /// The raw codec id of attribute bits 0-2, whether or not partlog knows it.
    pub fn compression_id(&self) -> u8 {
        (self.attributes & COMPRESSION_MASK) as u8
    }

    /// Attribute bit 3.
    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes & TIMESTAMP_TYPE_BIT != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    /// Attribute bit 4: the batch belongs to a transaction.
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_BIT != 0
    }

    /// Attribute bit 5: the batch holds control records (commit/abort markers), never shown to
    /// applications.
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_BIT != 0
    }

    /// The delete horizon (KIP-534): when attribute bit 6 is set, `baseTimestamp` holds the time
    /// after which the cleaner may drop this batch's tombstones and markers.
    pub fn delete_horizon_ms(&self) -> Option<i64> {
        (self.attributes & DELETE_HORIZON_BIT != 0).then_some(self.base_timestamp)
    }

    /// Whether the batch names a producer (`producer_id >= 0`), i.e. is idempotent or
    /// transactional.
    pub fn has_producer_id(&self) -> bool {
        self.producer_id >= 0
    }

    /// The sequence number of the last record slot, `base_sequence + last_offset_delta`,
    /// wrapping past `i32::MAX` to 0 as Kafka's `DefaultRecordBatch.incrementSequence`; -1 when
    /// the batch has no sequence.
    pub fn last_sequence(&self) -> i32 {
        increment_sequence(self.base_sequence, self.last_offset_delta)
    }
}

/// Kafka's sequence arithmetic: sequences live in `[0, i32::MAX]` and wrap to 0. -1 stays -1.
pub(crate) fn increment_sequence(sequence: i32, increment: i32) -> i32 {
    if sequence < 0 {
        return -1;
    }
    if sequence > i32::MAX - increment {
        increment - (i32::MAX - sequence) - 1
    } else {
        sequence + increment
    }
}

/// The `N` bytes at `at`, or `None` if `bytes` is too short. The one way this module reads a
/// fixed-size field out of a slice it does not control.
#[inline]
pub(crate) fn array_at<const N: usize>(bytes: &[u8], at: usize) -> Option<[u8; N]> {
    bytes.get(at..at.checked_add(N)?)?.try_into().ok()
}

/// A field of a header already known to be 61 bytes long; `at` is one of our constants.
#[inline]
fn field<const N: usize>(header: &[u8; RECORD_BATCH_OVERHEAD], at: usize) -> [u8; N] {
    array_at(header, at).unwrap_or([0; N])
}

#[inline]
fn put(header: &mut [u8; RECORD_BATCH_OVERHEAD], at: usize, bytes: &[u8]) {
    if let Some(slot) = header.get_mut(at..at + bytes.len()) {
        slot.copy_from_slice(bytes);
    }
}

/// The first 17 bytes of any batch or legacy message set entry: enough to step over it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BatchFrame {
    /// baseOffset (v2) or the message offset (v0/v1) (bytes 0..8).
    pub base_offset: i64,
    /// Bytes after the length field (bytes 8..12).
    pub batch_length: i32,
    /// The format version (byte 16): 2, or 0/1 for a legacy message.
    pub magic: i8,
}

impl BatchFrame {
    /// Total bytes on disk: `batch_length + 12`.
    pub fn total_size(&self) -> usize {
        usize::try_from(self.batch_length).unwrap_or(0) + LOG_OVERHEAD
    }

    /// Whether this is a legacy (magic 0 or 1) message: read it with
    /// [`LegacyBatchView`](super::LegacyBatchView) or [`Batch`](super::Batch).
    pub fn is_legacy(&self) -> bool {
        self.magic < CURRENT_MAGIC
    }
}

/// Reads the frame of the batch at the start of `bytes`: how a segment walks its file.
///
/// Returns `Ok(None)` when fewer than 17 bytes are present (a torn tail, or the end). Fails with
/// `BadMagic` for a magic other than 0, 1 or 2, and `BadBatchLength` when the length is below
/// the smallest entry of that format (49 for v2). Says nothing about whether the whole batch is
/// present: compare [`BatchFrame::total_size`] with what follows.
#[inline]
pub fn peek_batch_frame(bytes: &[u8]) -> Result<Option<BatchFrame>, Corruption> {
    let (Some(base_offset), Some(batch_length), Some([magic])) = (
        array_at::<8>(bytes, BASE_OFFSET_AT),
        array_at::<4>(bytes, BATCH_LENGTH_AT),
        array_at::<1>(bytes, MAGIC_AT),
    ) else {
        return Ok(None);
    };
    let frame = BatchFrame {
        base_offset: i64::from_be_bytes(base_offset),
        batch_length: i32::from_be_bytes(batch_length),
        magic: magic as i8,
    };
    let min_length = match frame.magic {
        2 => MIN_BATCH_LENGTH,
        1 => LEGACY_V1_MIN_MESSAGE_SIZE,
        0 => LEGACY_V0_MIN_MESSAGE_SIZE,
        other => return Err(Corruption::BadMagic(other)),
    };
    if frame.batch_length < min_length {
        return Err(Corruption::BadBatchLength(frame.batch_length));
    }
    Ok(Some(frame))
}

/// The peek of the magic byte alone: `None` if `bytes` is shorter than 17.
pub fn peek_magic(bytes: &[u8]) -> Option<i8> {
    bytes.get(MAGIC_AT).map(|&byte| byte as i8)
}

/// The error for a legacy (magic 0/1) message met by a reader of v2 batches only (such as
/// [`BatchView`] or appends): partlog reads legacy messages through
/// [`LegacyBatchView`](super::LegacyBatchView) and [`Batch`](super::Batch), and never writes them.
pub fn legacy_magic_error(magic: i8) -> Error {
    Error::Unsupported {
        what: format!(
            "legacy message format (magic {magic}, Kafka before 0.11) where only RecordBatch v2 \
             (magic 2) is accepted; partlog reads legacy messages but never writes them"
        ),
    }
}

/// Checks the CRC-32 (IEEE, as Kafka's magic 0 and 1 messages use) of one whole legacy message:
/// offset (8 bytes), size (4), crc (4), then the bytes the CRC covers, from the magic byte on.
///
/// A quick check that needs no parsing: [`LegacyBatchView::new`](super::LegacyBatchView::new)
/// checks the same CRC and the message's structure.
pub fn check_legacy_crc(message: &[u8]) -> Result<(), Corruption> {
    let (Some(stored), Some(covered)) = (array_at::<4>(message, 12), message.get(16..)) else {
        return Err(Corruption::Truncated {
            needed: HEADER_SIZE_UP_TO_MAGIC as u64,
            available: message.len() as u64,
        });
    };
    let stored = u32::from_be_bytes(stored);
    let computed = crc32fast::hash(covered);
    if stored == computed {
        Ok(())
    } else {
        Err(Corruption::CrcMismatch { stored, computed })
    }
}

/// Whether `frame`, the bytes of one whole batch or legacy message, carries a CRC that matches
/// them (CRC-32C for magic 2, CRC-32 for magic 0 and 1). Recovery asks it of a batch whose
/// header values fail a check: a torn write cannot leave a whole batch with a right CRC, so such
/// a batch is damage, not a torn tail.
pub(crate) fn frame_crc_holds(frame: &[u8]) -> bool {
    match peek_magic(frame) {
        Some(CURRENT_MAGIC) => {
            match (array_at::<4>(frame, CRC_AT), frame.get(CRC_COVERED_FROM..)) {
                (Some(stored), Some(covered)) => u32::from_be_bytes(stored) == crc32c(covered),
                _ => false,
            }
        }
        Some(_) => check_legacy_crc(frame).is_ok(),
        None => false,
    }
}

/// A validated v2 batch borrowed from a buffer: exactly one whole batch with a matching CRC.
///
/// Records are decoded lazily by [`BatchView::records`], which allocates nothing per record.
/// For buffers that may hold legacy messages too, use [`Batch`](super::Batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchView<'a> {
    bytes: &'a [u8],
    header: BatchHeader,
}

impl<'a> BatchView<'a> {
    /// Validates `bytes` as one whole v2 batch.
    ///
    /// Checks, in order: the 17-byte frame (magic 0, 1 or 2, a legal length); magic 2
    /// (`BadMagic(0|1)` for legacy batches, see [`BatchView::decode`]); `bytes.len()` equal to
    /// the batch's total size (`Truncated` if shorter, `BadHeader` if longer); the CRC-32C
    /// of bytes `[21, end)`; `lastOffsetDelta >= 0` with a last offset that does not overflow;
    /// and `0 <= recordsCount <= lastOffsetDelta + 1` (compaction may shrink the count, never
    /// grow it). Records are not decoded here.
    pub fn new(bytes: &'a [u8]) -> Result<BatchView<'a>, Corruption> {
        BatchView::validate(bytes)
    }

    fn validate(bytes: &'a [u8]) -> Result<BatchView<'a>, Corruption> {
        let frame = peek_batch_frame(bytes)?.ok_or(Corruption::Truncated {
            needed: HEADER_SIZE_UP_TO_MAGIC as u64,
            available: bytes.len() as u64,
        })?;
        if frame.magic != CURRENT_MAGIC {
            return Err(Corruption::BadMagic(frame.magic));
        }
        let total = frame.total_size();
        if bytes.len() < total {
            return Err(Corruption::Truncated {
                needed: total as u64,
                available: bytes.len() as u64,
            });
        }
        if bytes.len() > total {
            return Err(Corruption::BadHeader(
                "bytes follow the batch: the buffer holds more than one batch",
            ));
        }
        let header = BatchHeader::parse(bytes)?;
        BatchView::check_parsed(bytes, header)
    }

    /// The checks [`BatchView::new`] makes after the header's parse, for `bytes` whose header
    /// the caller has just parsed (`header` is `BatchHeader::parse(bytes)`, which checked the
    /// magic and the length's floor): the size, the CRC and the header's fields. A segment read
    /// parses each header once, for its bound and order checks and for these.
    pub(crate) fn check_parsed_header(
        bytes: &[u8],
        header: &BatchHeader,
    ) -> Result<(), Corruption> {
        let total = header.total_size();
        if bytes.len() != total {
            return Err(if bytes.len() < total {
                Corruption::Truncated {
                    needed: total as u64,
                    available: bytes.len() as u64,
                }
            } else {
                Corruption::BadHeader(
                    "bytes follow the batch: the buffer holds more than one batch",
                )
            });
        }
        let computed = crc32c(bytes.get(CRC_COVERED_FROM..).unwrap_or_default());
        if computed != header.crc {
            return Err(Corruption::CrcMismatch {
                stored: header.crc,
                computed,
            });
        }
        if header.last_offset_delta < 0 {
            return Err(Corruption::BadHeader("lastOffsetDelta is negative"));
        }
        if header
            .base_offset
            .checked_add(i64::from(header.last_offset_delta))
            .is_none()
        {
            return Err(Corruption::BadHeader("the last offset overflows i64"));
        }
        if header.records_count < 0 {
            return Err(Corruption::BadHeader("recordsCount is negative"));
        }
        if i64::from(header.records_count) > i64::from(header.last_offset_delta) + 1 {
            return Err(Corruption::BadHeader(
                "recordsCount exceeds lastOffsetDelta + 1",
            ));
        }
        Ok(())
    }

    /// The view of a batch a segment read has checked in full ([`check_parsed_header`]) in
    /// this very buffer, with `header` parsed from `bytes` again: no check runs a second time.
    /// Only a [`FetchData`](crate::FetchData)'s batches, which no one can change between the
    /// read's check and the view, are built this way.
    ///
    /// [`check_parsed_header`]: BatchView::check_parsed_header
    #[inline]
    pub(crate) fn read_checked(bytes: &'a [u8], header: BatchHeader) -> BatchView<'a> {
        BatchView { bytes, header }
    }

    /// The checks of [`BatchView::new`] after the header's parse.
    fn check_parsed(bytes: &'a [u8], header: BatchHeader) -> Result<BatchView<'a>, Corruption> {
        BatchView::check_parsed_header(bytes, &header)?;
        Ok(BatchView { bytes, header })
    }

    /// [`BatchView::new`] for bytes a caller handed in: the error is
    /// [`Error::InvalidBatch`], or [`Error::Unsupported`] for a legacy (magic 0/1) batch.
    pub fn decode(bytes: &'a [u8]) -> Result<BatchView<'a>> {
        BatchView::new(bytes).map_err(|what| match what {
            Corruption::BadMagic(magic @ (0 | 1)) => legacy_magic_error(magic),
            what => Error::InvalidBatch { what },
        })
    }

    /// The decoded header.
    pub fn header(&self) -> &BatchHeader {
        &self.header
    }

    /// The whole batch, header included, exactly as validated.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The records section (bytes `[61, end)`), compressed if the codec says so.
    pub fn payload(&self) -> &'a [u8] {
        self.bytes.get(RECORD_BATCH_OVERHEAD..).unwrap_or_default()
    }

    /// Shorthand for `header().base_offset`.
    pub fn base_offset(&self) -> i64 {
        self.header.base_offset
    }

    /// Shorthand for `header().last_offset()`.
    pub fn last_offset(&self) -> i64 {
        self.header.last_offset()
    }

    /// Shorthand for `header().next_offset()`.
    pub fn next_offset(&self) -> i64 {
        self.header.next_offset()
    }

    /// The batch's size in bytes, header included.
    pub fn total_size(&self) -> usize {
        self.bytes.len()
    }

    /// Iterates the records.
    ///
    /// An uncompressed batch is read in place; a compressed one is decompressed once, into
    /// `scratch` (cleared first; reuse it across batches so that steady-state reads allocate
    /// nothing). Fails up front with [`Error::UnsupportedCompression`] for codecs 5-7 and for
    /// gzip and snappy without their features, or [`Error::InvalidBatch`] (`BadCompression`) for a payload that does not
    /// decompress. Errors inside the records come from the iterator, as
    /// [`Error::InvalidBatch`]; a caller reading a file re-wraps them as
    /// [`Error::Corrupt`] with the file and position.
    ///
    /// As in Kafka, a batch whose `recordsCount` is 0 (an empty batch kept by compaction) has
    /// no records, whatever its codec and payload.
    #[inline]
    pub fn records<'s>(&'s self, scratch: &'s mut Vec<u8>) -> Result<RecordIter<'s>> {
        BatchView::into_records(*self, scratch)
    }

    /// [`records`](Self::records) that borrow the batch's bytes (or `scratch`) rather than the
    /// view, so that a record can outlive the view it was found through (a point read's).
    #[inline]
    pub(crate) fn into_records(self, scratch: &'a mut Vec<u8>) -> Result<RecordIter<'a>> {
        let context = RecordContext::new(&self.header);
        if self.header.records_count == 0 {
            return Ok(RecordIter::new(&[], context, 0));
        }
        let data: &'a [u8] = match self.header.compression()? {
            Compression::None => self.payload(),
            codec => {
                compression::decompress(codec, self.payload(), scratch)?;
                let scratch: &'a Vec<u8> = scratch;
                scratch.as_slice()
            }
        };
        Ok(RecordIter::new(data, context, self.header.records_count))
    }
}

/// Iterates the batches of a buffer holding whole batches back to back (a `.log` file, or a
/// fetch response), yielding each batch's byte position with its validation result.
///
/// Stops at a trailing partial batch (fewer than 17 bytes, or fewer than the frame's total
/// size): those bytes are [`BatchIter::remainder`]. After a batch whose frame cannot be read
/// (bad magic or length) it yields that error and stops, since the next batch cannot be found;
/// after any other invalid batch (a CRC mismatch, a legacy magic) it steps over it and goes on.
#[derive(Debug, Clone)]
pub struct BatchIter<'a> {
    frames: FrameSplitter<'a>,
}

impl<'a> BatchIter<'a> {
    /// Iterates the batches in `bytes`, starting at position 0.
    pub fn new(bytes: &'a [u8]) -> BatchIter<'a> {
        BatchIter {
            frames: FrameSplitter::new(bytes),
        }
    }

    /// The position of the next batch to be read (after the iteration ends: where the valid
    /// prefix stops).
    pub fn position(&self) -> usize {
        self.frames.position
    }

    /// The bytes from [`BatchIter::position`] on: a partial trailing batch once the iteration
    /// has ended, empty if the buffer ended on a batch boundary.
    pub fn remainder(&self) -> &'a [u8] {
        self.frames.remainder()
    }
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = (usize, Result<BatchView<'a>, Corruption>);

    fn next(&mut self) -> Option<Self::Item> {
        let (start, frame) = self.frames.next()?;
        Some((start, frame.and_then(BatchView::new)))
    }
}

/// Splits a buffer of back-to-back batches (of any magic) into whole frames: the walking that
/// [`BatchIter`] and `AnyBatchIter` share. It stops at a trailing partial batch, and after a
/// frame that cannot be read (bad magic or length), which it yields as an error.
#[derive(Debug, Clone)]
pub(crate) struct FrameSplitter<'a> {
    bytes: &'a [u8],
    pub(crate) position: usize,
    stopped: bool,
}

impl<'a> FrameSplitter<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> FrameSplitter<'a> {
        FrameSplitter {
            bytes,
            position: 0,
            stopped: false,
        }
    }

    pub(crate) fn remainder(&self) -> &'a [u8] {
        self.bytes.get(self.position..).unwrap_or_default()
    }
}

impl<'a> Iterator for FrameSplitter<'a> {
    type Item = (usize, Result<&'a [u8], Corruption>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.stopped {
            return None;
        }
        let rest = self.remainder();
        let start = self.position;
        let frame = match peek_batch_frame(rest) {
            Ok(Some(frame)) => frame,
            Ok(None) => {
                self.stopped = true;
                return None;
            }
            Err(what) => {
                self.stopped = true;
                return Some((start, Err(what)));
            }
        };
        let Some(batch) = rest.get(..frame.total_size()) else {
            self.stopped = true;
            return None;
        };
        self.position = start + batch.len();
        Some((start, Ok(batch)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_arithmetic_wraps_like_kafka() {
        assert_eq!(increment_sequence(5, 3), 8);
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
        assert_eq!(increment_sequence(-1, 3), -1);
    }

    #[test]
    fn the_checks_after_a_parsed_header_still_check_the_crc_and_the_length() {
        let mut builder = crate::format::BatchBuilder::new(crate::format::Compression::None);
        builder.push(&crate::format::NewRecord::new(
            1_700_000_000_000,
            None,
            Some(b"v"),
        ));
        let mut bytes = builder.build().unwrap();
        let header = BatchHeader::parse(&bytes).unwrap();
        assert!(BatchView::check_parsed_header(&bytes, &header).is_ok());
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(matches!(
            BatchView::check_parsed_header(&longer, &header),
            Err(Corruption::BadHeader(_))
        ));
        assert!(matches!(
            BatchView::check_parsed_header(&bytes[..bytes.len() - 1], &header),
            Err(Corruption::Truncated { .. })
        ));
        *bytes.last_mut().unwrap() ^= 1;
        assert!(matches!(
            BatchView::check_parsed_header(&bytes, &header),
            Err(Corruption::CrcMismatch { .. })
        ));
    }

    #[test]
    fn header_encode_parse_round_trip() {
        let header = BatchHeader {
            base_offset: 5_000_000_000,
            batch_length: 49,
            partition_leader_epoch: 7,
            magic: 2,
            crc: 0xdead_beef,
            attributes: 0x0074,
            last_offset_delta: 9,
            base_timestamp: -5,
            max_timestamp: 1_700_000_000_000,
            producer_id: 1234,
            producer_epoch: 3,
            base_sequence: 77,
            records_count: 4,
        };
        let bytes = header.encode();
        assert_eq!(BatchHeader::parse(&bytes), Ok(header));
        assert_eq!(header.total_size(), 61);
        assert_eq!(header.last_offset(), 5_000_000_009);
        assert_eq!(header.next_offset(), 5_000_000_010);
        assert_eq!(header.compression().unwrap(), Compression::Zstd);
        assert_eq!(header.timestamp_type(), TimestampType::CreateTime);
        assert!(header.is_transactional());
        assert!(header.is_control());
        assert_eq!(header.delete_horizon_ms(), Some(-5));
        assert!(header.has_producer_id());
        assert_eq!(header.last_sequence(), 86);
    }

    #[test]
    fn frame_peek() {
        assert_eq!(peek_batch_frame(&[0; 16]), Ok(None));
        let mut bytes = [0u8; 17];
        bytes[11] = 49;
        bytes[16] = 2;
        let frame = peek_batch_frame(&bytes).unwrap().unwrap();
        assert_eq!(frame.total_size(), 61);
        bytes[11] = 48;
        assert_eq!(
            peek_batch_frame(&bytes),
            Err(Corruption::BadBatchLength(48))
        );
        bytes[16] = 1;
        assert!(peek_batch_frame(&bytes).unwrap().unwrap().is_legacy());
        bytes[16] = 3;
        assert_eq!(peek_batch_frame(&bytes), Err(Corruption::BadMagic(3)));
        bytes[8] = 0x80;
        bytes[16] = 2;
        assert!(matches!(
            peek_batch_frame(&bytes),
            Err(Corruption::BadBatchLength(len)) if len < 0
        ));
    }
}
