//! Legacy message sets (magic 0 and 1, Kafka before 0.11), read-only.
//!
//! Before RecordBatch v2, a `.log` file was a concatenation of *messages*, each framed like this
//! (big-endian):
//!
//! ```text
//!  off  size  field
//!    0     8  offset      i64  the message's offset (a compressed wrapper: its LAST inner offset)
//!    8     4  size        i32  bytes after this field
//!   12     4  crc         u32  CRC-32 (IEEE, not Castagnoli) of bytes [16, end)
//!   16     1  magic       i8   0 or 1
//!   17     1  attributes  i8   bits 0-2 codec, bit 3 timestamp type (magic 1 only)
//!   18     8  timestamp   i64  magic 1 only
//! 18/26    4  key length  i32  -1 = null key
//!          …  key
//!          4  value length i32 -1 = null value
//!          …  value
//! ```
//!
//! The first 17 bytes line up with a v2 batch's (offset, length, then the magic at byte 16), which
//! is how a reader tells the formats apart ([`super::peek_batch_frame`]).
//!
//! A message with codec bits set is a *wrapper*: its value is a compressed message set of *inner*
//! messages (same layout, never compressed themselves). Kafka's rules, from its
//! `AbstractLegacyRecordBatch`, which this module follows:
//!
//! - Magic 0: inner offsets are absolute. Magic 1: they are relative, and the absolute offset is
//!   `wrapper offset - last inner offset + inner offset`; a wrapper offset of 0 (some producers
//!   sent that) means the inner offsets are used as they are.
//! - Timestamps: magic 0 has none (-1). A magic 1 inner message reports the wrapper's timestamp
//!   when the wrapper says LogAppendTime, else its own.
//! - The LZ4 frame of a magic 0 wrapper may carry a wrong header checksum (Kafka 0.8/0.9 hashed
//!   the frame magic too); Kafka skips that check for magic 0, and so does partlog.
//! - zstd needs magic 2, so a legacy wrapper cannot use it.
//!
//! For the log, one legacy *batch* is one outer message: a wrapper with its inner messages, or a
//! single uncompressed message. Its last offset is the outer offset (what Kafka's indexes use),
//! and its max timestamp the outer timestamp (-1 for magic 0).
//!
//! partlog is stricter than Kafka's reader in a few places, since a CRC-valid file Kafka wrote
//! never needs the leniency: inner messages must fill the decompressed set exactly (Kafka stops
//! quietly at a partial one), their CRCs must match, their offsets must increase and not pass the
//! wrapper's offset, and a message's key and value must fill it exactly.

use super::batch::{
    HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD, TimestampType, array_at, peek_batch_frame,
};
use super::compression::{self, Compression};
use super::lz4::HeaderChecksum;
use super::record::Record;
use crate::error::{Corruption, Error, Result};

/// Bytes of a magic 0 message up to and including its attributes (offset, size, crc, magic,
/// attributes).
pub const LEGACY_V0_HEADER_SIZE: usize = 18;
/// Bytes of a magic 1 message up to and including its timestamp.
pub const LEGACY_V1_HEADER_SIZE: usize = 26;
/// The smallest `size` of a magic 0 message: crc, magic, attributes and two lengths.
pub const LEGACY_V0_MIN_MESSAGE_SIZE: i32 = 14;
/// The smallest `size` of a magic 1 message: magic 0's plus the timestamp.
pub const LEGACY_V1_MIN_MESSAGE_SIZE: i32 = 22;

const OFFSET_AT: usize = 0;
const SIZE_AT: usize = 8;
const CRC_AT: usize = 12;
const MAGIC_AT: usize = 16;
const ATTRIBUTES_AT: usize = 17;
const TIMESTAMP_AT: usize = 18;
/// The CRC-32 covers the magic byte to the end of the message.
const CRC_COVERED_FROM: usize = MAGIC_AT;
const CODEC_MASK: i8 = 0x07;
const TIMESTAMP_TYPE_BIT: i8 = 0x08;

/// The fixed fields of one legacy message. Plain data: [`LegacyHeader::parse`] checks only the
/// magic and that `message_size` is at least the smallest message of that magic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LegacyHeader {
    /// The message's offset; for a compressed wrapper, the offset of its last inner message
    /// (bytes 0..8).
    pub offset: i64,
    /// Bytes after this field (bytes 8..12): the message's total size is `message_size + 12`.
    pub message_size: i32,
    /// Stored CRC-32 (IEEE) of bytes `[16, end)` (bytes 12..16).
    pub crc: u32,
    /// 0 or 1 (byte 16).
    pub magic: i8,
    /// Codec (bits 0-2) and, for magic 1, timestamp type (bit 3) (byte 17).
    pub attributes: i8,
    /// The stored timestamp for magic 1 (bytes 18..26); -1 for magic 0, which has none.
    pub timestamp: i64,
}

impl LegacyHeader {
    /// Decodes the fixed fields at the start of `bytes` (18 bytes for magic 0, 26 for magic 1;
    /// more may follow). Fails with `BadMagic` for a magic other than 0 or 1, `BadBatchLength`
    /// for a size below the smallest message of its magic, and `Truncated` when `bytes` is
    /// shorter than the fixed fields.
    pub fn parse(bytes: &[u8]) -> Result<LegacyHeader, Corruption> {
        let truncated = |needed: usize| Corruption::Truncated {
            needed: needed as u64,
            available: bytes.len() as u64,
        };
        let [magic] = array_at::<1>(bytes, MAGIC_AT).ok_or(truncated(HEADER_SIZE_UP_TO_MAGIC))?;
        let magic = magic as i8;
        let (header_size, min_size) = match magic {
            0 => (LEGACY_V0_HEADER_SIZE, LEGACY_V0_MIN_MESSAGE_SIZE),
            1 => (LEGACY_V1_HEADER_SIZE, LEGACY_V1_MIN_MESSAGE_SIZE),
            other => return Err(Corruption::BadMagic(other)),
        };
        let (Some(offset), Some(size), Some(crc), Some([attributes])) = (
            array_at::<8>(bytes, OFFSET_AT),
            array_at::<4>(bytes, SIZE_AT),
            array_at::<4>(bytes, CRC_AT),
            array_at::<1>(bytes, ATTRIBUTES_AT),
        ) else {
            return Err(truncated(header_size));
        };
        let message_size = i32::from_be_bytes(size);
        if message_size < min_size {
            return Err(Corruption::BadBatchLength(message_size));
        }
        let timestamp = if magic == 1 {
            i64::from_be_bytes(array_at::<8>(bytes, TIMESTAMP_AT).ok_or(truncated(header_size))?)
        } else {
            -1
        };
        Ok(LegacyHeader {
            offset: i64::from_be_bytes(offset),
            message_size,
            crc: u32::from_be_bytes(crc),
            magic,
            attributes: attributes as i8,
            timestamp,
        })
    }

    /// Bytes before the key length: 18 for magic 0, 26 for magic 1.
    pub fn header_size(&self) -> usize {
        if self.magic == 0 {
            LEGACY_V0_HEADER_SIZE
        } else {
            LEGACY_V1_HEADER_SIZE
        }
    }

    /// Total bytes of the message: `message_size + 12` (a negative size counts as 0).
    pub fn total_size(&self) -> usize {
        usize::try_from(self.message_size).unwrap_or(0) + LOG_OVERHEAD
    }

    /// The message's offset, which is the last offset it holds (Kafka's `lastOffset`, what its
    /// indexes store).
    pub fn last_offset(&self) -> i64 {
        self.offset
    }

    /// `last_offset() + 1`, wrapping on overflow.
    pub fn next_offset(&self) -> i64 {
        self.offset.wrapping_add(1)
    }

    /// The raw codec id of attribute bits 0-2.
    pub fn compression_id(&self) -> u8 {
        (self.attributes & CODEC_MASK) as u8
    }

    /// The codec; ids 5 to 7 are [`Error::UnsupportedCompression`].
    pub fn compression(&self) -> Result<Compression> {
        Compression::from_id(self.compression_id())
    }

    /// Whether the message is a wrapper around a compressed message set.
    pub fn is_compressed(&self) -> bool {
        self.compression_id() != 0
    }

    /// Attribute bit 3 for magic 1. Magic 0 has no timestamps; it reports CreateTime (with
    /// timestamp -1), which is what Kafka writes when it converts magic 0 to v2.
    pub fn timestamp_type(&self) -> TimestampType {
        if self.magic == 1 && self.attributes & TIMESTAMP_TYPE_BIT != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    /// Kafka's `maxTimestamp` of a legacy batch: the outer message's timestamp (-1 for magic 0).
    /// A broker sets a CreateTime wrapper's timestamp to the largest inner one.
    pub fn max_timestamp(&self) -> i64 {
        self.timestamp
    }
}

/// A message's nullable key and value.
type KeyValue<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// Reads the key and value of the message `entry` (exactly one message), which must fill it.
fn key_and_value<'a>(entry: &'a [u8], header: &LegacyHeader) -> Result<KeyValue<'a>, Corruption> {
    let mut at = header.header_size();
    let key = read_bytes(
        entry,
        &mut at,
        "negative key length",
        "key runs past its message",
    )?;
    let value = read_bytes(
        entry,
        &mut at,
        "negative value length",
        "value runs past its message",
    )?;
    if at != entry.len() {
        return Err(Corruption::BadRecord(
            "message size does not match its key and value",
        ));
    }
    Ok((key, value))
}

/// An i32 length then that many bytes; -1 is `None`.
fn read_bytes<'a>(
    bytes: &'a [u8],
    at: &mut usize,
    negative: &'static str,
    overrun: &'static str,
) -> Result<Option<&'a [u8]>, Corruption> {
    let len = array_at::<4>(bytes, *at)
        .map(i32::from_be_bytes)
        .ok_or(Corruption::BadRecord(overrun))?;
    *at += 4;
    if len == -1 {
        return Ok(None);
    }
    // Kafka reads any negative length as null; only -1 is ever written.
    let len = usize::try_from(len).map_err(|_| Corruption::BadRecord(negative))?;
    let end = at.checked_add(len).ok_or(Corruption::BadRecord(overrun))?;
    let slice = bytes.get(*at..end).ok_or(Corruption::BadRecord(overrun))?;
    *at = end;
    Ok(Some(slice))
}

fn check_crc(entry: &[u8], header: &LegacyHeader) -> Result<(), Corruption> {
    let computed = crc32fast::hash(entry.get(CRC_COVERED_FROM..).unwrap_or_default());
    if computed == header.crc {
        Ok(())
    } else {
        Err(Corruption::CrcMismatch {
            stored: header.crc,
            computed,
        })
    }
}

/// A validated legacy message borrowed from a buffer: exactly one whole outer message (magic 0
/// or 1) with a matching CRC-32 and a key and value that fill it. A compressed wrapper is not
/// decompressed until [`LegacyBatchView::records`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LegacyBatchView<'a> {
    bytes: &'a [u8],
    header: LegacyHeader,
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
}

impl<'a> LegacyBatchView<'a> {
    /// Validates `bytes` as one whole legacy message.
    ///
    /// Checks, in order: the 17-byte frame; magic 0 or 1 (`BadMagic` otherwise, 2 included);
    /// `bytes.len()` equal to the message's total size (`Truncated` if shorter, `BadHeader` if
    /// longer); the CRC-32 of bytes `[16, end)`; key and value lengths that fill the message
    /// exactly; and a non-null value for a compressed wrapper.
    pub fn new(bytes: &'a [u8]) -> Result<LegacyBatchView<'a>, Corruption> {
        let frame = peek_batch_frame(bytes)?.ok_or(Corruption::Truncated {
            needed: HEADER_SIZE_UP_TO_MAGIC as u64,
            available: bytes.len() as u64,
        })?;
        if !frame.is_legacy() {
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
                "bytes follow the message: the buffer holds more than one message",
            ));
        }
        // The frame's minimum lengths guarantee the fixed fields are all there.
        let header = LegacyHeader::parse(bytes)?;
        check_crc(bytes, &header)?;
        let (key, value) = key_and_value(bytes, &header)?;
        if header.is_compressed() && value.is_none() {
            return Err(Corruption::BadRecord(
                "a compressed wrapper message has a null value",
            ));
        }
        Ok(LegacyBatchView {
            bytes,
            header,
            key,
            value,
        })
    }

    /// [`LegacyBatchView::new`] for bytes a caller handed in: the error is
    /// [`Error::InvalidBatch`].
    pub fn decode(bytes: &'a [u8]) -> Result<LegacyBatchView<'a>> {
        LegacyBatchView::new(bytes).map_err(|what| Error::InvalidBatch { what })
    }

    /// The outer message's fixed fields.
    pub fn header(&self) -> &LegacyHeader {
        &self.header
    }

    /// The whole message, exactly as validated.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The message's size in bytes, offset and size fields included.
    pub fn total_size(&self) -> usize {
        self.bytes.len()
    }

    /// The outer message's key (null for a wrapper as Kafka writes it).
    pub fn key(&self) -> Option<&'a [u8]> {
        self.key
    }

    /// The outer message's value: the record's value, or a wrapper's compressed message set.
    pub fn value(&self) -> Option<&'a [u8]> {
        self.value
    }

    /// Shorthand for `header().last_offset()`.
    pub fn last_offset(&self) -> i64 {
        self.header.last_offset()
    }

    /// Shorthand for `header().next_offset()`.
    pub fn next_offset(&self) -> i64 {
        self.header.next_offset()
    }

    /// The offset of the first record (Kafka's `baseOffset()` of a legacy batch): the message's
    /// own offset, or for a wrapper its first inner message's, which takes decompressing it
    /// into `scratch`.
    pub fn base_offset(&self, scratch: &mut Vec<u8>) -> Result<i64> {
        if !self.header.is_compressed() {
            return Ok(self.header.offset);
        }
        match self.records(scratch)?.next() {
            Some(first) => first.map(|record| record.offset),
            // `records` fails on a wrapper without inner messages; stay typed anyway.
            None => Err(Error::InvalidBatch {
                what: Corruption::BadRecord("a compressed wrapper holds no inner messages"),
            }),
        }
    }

    /// Iterates the records: the message itself, or a wrapper's inner messages with absolute
    /// offsets and Kafka's timestamps (this module's docs give the rules). Legacy records have no
    /// headers.
    ///
    /// A wrapper is decompressed once, into `scratch` (cleared first), and its inner messages'
    /// framing and offsets are walked up front, since magic 1's absolute offsets depend on the
    /// last one. Fails up front with [`Error::UnsupportedCompression`] for a codec this build
    /// cannot read, or [`Error::InvalidBatch`] for zstd, a payload that does not decompress, or
    /// a decompressed set that is not whole messages. Errors inside an inner message (its CRC,
    /// lengths, a nested codec, an offset out of order) come from the iterator.
    pub fn records<'s>(&'s self, scratch: &'s mut Vec<u8>) -> Result<LegacyRecordIter<'s>> {
        LegacyBatchView::into_records(*self, scratch)
    }

    /// [`records`](Self::records) that borrow the message's bytes (or `scratch`) rather than
    /// the view.
    pub(crate) fn into_records(self, scratch: &'a mut Vec<u8>) -> Result<LegacyRecordIter<'a>> {
        let header = self.header;
        if !header.is_compressed() {
            let record =
                Record::without_headers(header.offset, header.timestamp, self.key, self.value);
            return Ok(LegacyRecordIter {
                state: State::Single(Some(record)),
            });
        }
        let invalid = |what| Error::InvalidBatch { what };
        let codec = header.compression()?;
        if codec == Compression::Zstd {
            return Err(invalid(Corruption::BadHeader(
                "zstd needs magic 2: a legacy wrapper cannot use it",
            )));
        }
        let header_checksum = if header.magic == 0 {
            HeaderChecksum::IgnoreForMagic0
        } else {
            HeaderChecksum::Verify
        };
        let payload = self.value.unwrap_or_default();
        compression::decompress_with(codec, payload, scratch, header_checksum)?;
        let data: &'a [u8] = scratch.as_slice();
        let (count, last_inner_offset) = walk_inner_messages(data).map_err(invalid)?;
        let absolute_base = match header.magic {
            0 => None,
            // Some producers sent wrapper offset 0; Kafka then uses the inner offsets as they are.
            _ if header.offset == 0 => Some(0),
            _ if header.offset < last_inner_offset => {
                return Err(invalid(Corruption::OffsetOrder {
                    offset: header.offset,
                    bound: last_inner_offset,
                }));
            }
            _ => Some(header.offset.checked_sub(last_inner_offset).ok_or(invalid(
                Corruption::BadRecord("an inner offset puts the batch outside i64"),
            ))?),
        };
        let log_append_time = (header.magic == 1
            && header.timestamp_type() == TimestampType::LogAppendTime)
            .then_some(header.timestamp);
        Ok(LegacyRecordIter {
            state: State::Deep(Deep {
                data,
                pos: 0,
                remaining: count,
                absolute_base,
                wrapper_offset: header.offset,
                log_append_time,
                previous: None,
            }),
        })
    }
}

/// Walks the framing (offset and size) of the inner messages of a decompressed set: their count
/// and the last one's stored offset.
fn walk_inner_messages(data: &[u8]) -> Result<(usize, i64), Corruption> {
    let mut pos = 0usize;
    let mut count = 0usize;
    let mut last_offset = 0i64;
    while pos < data.len() {
        let (Some(offset), Some(size)) = (
            array_at::<8>(data, pos + OFFSET_AT),
            array_at::<4>(data, pos + SIZE_AT),
        ) else {
            return Err(Corruption::BadRecord(
                "the decompressed message set ends inside a message's offset and size",
            ));
        };
        let size = i32::from_be_bytes(size);
        if size < LEGACY_V0_MIN_MESSAGE_SIZE {
            return Err(Corruption::BadRecord(
                "an inner message is smaller than the smallest message",
            ));
        }
        let end = usize::try_from(size)
            .ok()
            .and_then(|size| (pos + LOG_OVERHEAD).checked_add(size))
            .filter(|&end| end <= data.len())
            .ok_or(Corruption::BadRecord(
                "an inner message runs past the decompressed message set",
            ))?;
        count += 1;
        last_offset = i64::from_be_bytes(offset);
        pos = end;
    }
    if count == 0 {
        return Err(Corruption::BadRecord(
            "a compressed wrapper holds no inner messages",
        ));
    }
    Ok((count, last_offset))
}

/// Iterates the records of one legacy batch, yielding each or the first error (after which it
/// ends). Records borrow from the message, or from the scratch buffer a wrapper was
/// decompressed into.
#[derive(Debug, Clone)]
pub struct LegacyRecordIter<'a> {
    state: State<'a>,
}

#[derive(Debug, Clone)]
enum State<'a> {
    Single(Option<Record<'a>>),
    Deep(Deep<'a>),
    Done,
}

/// The walk over a wrapper's inner messages.
#[derive(Debug, Clone)]
struct Deep<'a> {
    data: &'a [u8],
    pos: usize,
    remaining: usize,
    /// Magic 1: what to add to an inner offset. Magic 0: `None`, the offsets are absolute.
    absolute_base: Option<i64>,
    wrapper_offset: i64,
    /// The wrapper's timestamp when it is magic 1 and says LogAppendTime.
    log_append_time: Option<i64>,
    /// The previous record's offset.
    previous: Option<i64>,
}

impl<'a> Deep<'a> {
    fn next_record(&mut self) -> Result<Record<'a>, Corruption> {
        // The framing was walked before iteration started; stay checked anyway.
        let entry = array_at::<4>(self.data, self.pos + SIZE_AT)
            .and_then(|size| usize::try_from(i32::from_be_bytes(size)).ok())
            .and_then(|size| self.data.get(self.pos..self.pos + LOG_OVERHEAD + size))
            .ok_or(Corruption::BadRecord(
                "an inner message runs past the decompressed message set",
            ))?;
        self.pos += entry.len();
        self.remaining -= 1;
        let header = LegacyHeader::parse(entry)?;
        check_crc(entry, &header)?;
        let (key, value) = key_and_value(entry, &header)?;
        if header.is_compressed() {
            return Err(Corruption::BadRecord(
                "an inner message is compressed itself",
            ));
        }
        let offset = match self.absolute_base {
            Some(base) => base
                .checked_add(header.offset)
                .ok_or(Corruption::BadRecord("an inner offset overflows i64"))?,
            None => header.offset,
        };
        if let Some(previous) = self.previous
            && offset <= previous
        {
            return Err(Corruption::OffsetOrder {
                offset,
                bound: previous.saturating_add(1),
            });
        }
        if offset > self.wrapper_offset {
            return Err(Corruption::OffsetOrder {
                offset,
                bound: self.wrapper_offset,
            });
        }
        self.previous = Some(offset);
        let timestamp = match header.magic {
            0 => -1,
            _ => self.log_append_time.unwrap_or(header.timestamp),
        };
        Ok(Record::without_headers(offset, timestamp, key, value))
    }
}

impl LegacyRecordIter<'_> {
    /// Records not yet yielded.
    pub fn remaining(&self) -> usize {
        match &self.state {
            State::Single(record) => usize::from(record.is_some()),
            State::Deep(deep) => deep.remaining,
            State::Done => 0,
        }
    }
}

impl<'a> Iterator for LegacyRecordIter<'a> {
    type Item = Result<Record<'a>>;

    fn next(&mut self) -> Option<Result<Record<'a>>> {
        match &mut self.state {
            State::Single(record) => {
                let record = record.take();
                self.state = State::Done;
                record.map(Ok)
            }
            State::Deep(deep) if deep.remaining > 0 => match deep.next_record() {
                Ok(record) => Some(Ok(record)),
                Err(what) => {
                    self.state = State::Done;
                    Some(Err(Error::InvalidBatch { what }))
                }
            },
            State::Deep(_) | State::Done => {
                self.state = State::Done;
                None
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.remaining()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A legacy message as Kafka lays it out, with a correct CRC.
    fn message(
        magic: i8,
        offset: i64,
        attributes: i8,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> Vec<u8> {
        let mut body = vec![magic as u8, attributes as u8];
        if magic == 1 {
            body.extend_from_slice(&timestamp.to_be_bytes());
        }
        for field in [key, value] {
            match field {
                Some(bytes) => {
                    body.extend_from_slice(&(bytes.len() as i32).to_be_bytes());
                    body.extend_from_slice(bytes);
                }
                None => body.extend_from_slice(&(-1i32).to_be_bytes()),
            }
        }
        let mut out = offset.to_be_bytes().to_vec();
        out.extend_from_slice(&((body.len() + 4) as i32).to_be_bytes());
        out.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// Offset, timestamp, key and value.
    type Owned = (i64, i64, Option<Vec<u8>>, Option<Vec<u8>>);

    fn collect(view: &LegacyBatchView<'_>) -> Result<Vec<Owned>> {
        let mut scratch = Vec::new();
        view.records(&mut scratch)?
            .map(|record| {
                record.map(|r| {
                    (
                        r.offset,
                        r.timestamp,
                        r.key.map(<[u8]>::to_vec),
                        r.value.map(<[u8]>::to_vec),
                    )
                })
            })
            .collect()
    }

    /// An lz4 wrapper (the one codec every build reads) around `inner`.
    fn lz4_wrapper(
        magic: i8,
        offset: i64,
        attributes: i8,
        timestamp: i64,
        inner: &[u8],
    ) -> Vec<u8> {
        let mut frame = Vec::new();
        super::super::lz4::compress_frame(inner, &mut frame).unwrap();
        message(magic, offset, attributes | 3, timestamp, None, Some(&frame))
    }

    #[test]
    fn uncompressed_messages() {
        let v0 = message(0, 7, 0, 0, Some(b"k"), None);
        let view = LegacyBatchView::new(&v0).unwrap();
        assert_eq!(view.header().magic, 0);
        assert_eq!(view.header().timestamp, -1);
        assert_eq!(view.header().timestamp_type(), TimestampType::CreateTime);
        assert_eq!(view.last_offset(), 7);
        assert_eq!(view.base_offset(&mut Vec::new()).unwrap(), 7);
        assert_eq!(
            collect(&view).unwrap(),
            vec![(7, -1, Some(b"k".to_vec()), None)]
        );

        let v1 = message(1, 8, 0x08, 1234, None, Some(b""));
        let view = LegacyBatchView::new(&v1).unwrap();
        assert_eq!(view.header().timestamp_type(), TimestampType::LogAppendTime);
        assert_eq!(view.header().max_timestamp(), 1234);
        assert_eq!(collect(&view).unwrap(), vec![(8, 1234, None, Some(vec![]))]);
    }

    #[test]
    fn v1_wrapper_offsets_are_relative_and_log_append_time_wins() {
        let mut inner = message(1, 0, 0, 100, Some(b"a"), Some(b"1"));
        inner.extend(message(1, 2, 0, 300, Some(b"b"), Some(b"2")));
        let create = lz4_wrapper(1, 1002, 0, 300, &inner);
        let view = LegacyBatchView::new(&create).unwrap();
        let records = collect(&view).unwrap();
        assert_eq!(
            records.iter().map(|r| (r.0, r.1)).collect::<Vec<_>>(),
            [(1000, 100), (1002, 300)]
        );
        assert_eq!(view.base_offset(&mut Vec::new()).unwrap(), 1000);

        let append = lz4_wrapper(1, 1002, 0x08, 999, &inner);
        let records = collect(&LegacyBatchView::new(&append).unwrap()).unwrap();
        assert_eq!(
            records.iter().map(|r| (r.0, r.1)).collect::<Vec<_>>(),
            [(1000, 999), (1002, 999)]
        );

        // Wrapper offset 0: the inner offsets as they are, which here pass the wrapper's.
        let zero = lz4_wrapper(1, 0, 0, 300, &inner);
        let view = LegacyBatchView::new(&zero).unwrap();
        let mut scratch = Vec::new();
        let mut records = view.records(&mut scratch).unwrap();
        assert_eq!(records.next().unwrap().unwrap().offset, 0);
        assert!(matches!(
            records.next(),
            Some(Err(Error::InvalidBatch {
                what: Corruption::OffsetOrder {
                    offset: 2,
                    bound: 0
                }
            }))
        ));
        assert!(records.next().is_none());

        // A wrapper offset below the last inner offset.
        let below = lz4_wrapper(1, 1, 0, 300, &inner);
        assert!(matches!(
            collect(&LegacyBatchView::new(&below).unwrap()),
            Err(Error::InvalidBatch {
                what: Corruption::OffsetOrder {
                    offset: 1,
                    bound: 2
                }
            })
        ));
    }

    #[test]
    fn v0_wrapper_offsets_are_absolute_and_lz4_header_checksum_is_not_checked() {
        let mut inner = message(0, 40, 0, 0, None, Some(b"x"));
        inner.extend(message(0, 41, 0, 0, Some(b"k"), None));
        let mut wrapper = lz4_wrapper(0, 41, 0, 0, &inner);
        // Spoil the frame's header checksum byte (26 = 18 + key length 4 + value length 4;
        // the frame's HC is its 7th byte) and re-seal the message CRC.
        let hc_at = 26 + 6;
        wrapper[hc_at] ^= 0x55;
        let crc = crc32fast::hash(&wrapper[16..]);
        wrapper[12..16].copy_from_slice(&crc.to_be_bytes());
        let records = collect(&LegacyBatchView::new(&wrapper).unwrap()).unwrap();
        assert_eq!(
            records,
            vec![
                (40, -1, None, Some(b"x".to_vec())),
                (41, -1, Some(b"k".to_vec()), None)
            ]
        );
        // The same frame in a magic 1 wrapper fails its header checksum.
        let mut v1_inner = message(1, 0, 0, 5, None, Some(b"x"));
        v1_inner.extend(message(1, 1, 0, 6, None, Some(b"y")));
        let mut v1 = lz4_wrapper(1, 1, 0, 6, &v1_inner);
        v1[34 + 6] ^= 0x55;
        let crc = crc32fast::hash(&v1[16..]);
        v1[12..16].copy_from_slice(&crc.to_be_bytes());
        assert!(matches!(
            LegacyBatchView::new(&v1).unwrap().records(&mut Vec::new()),
            Err(Error::InvalidBatch {
                what: Corruption::BadCompression(_)
            })
        ));
    }

    #[test]
    fn wrapper_rules() {
        // A null wrapper value.
        let null = message(1, 5, 3, 0, None, None);
        assert_eq!(
            LegacyBatchView::new(&null),
            Err(Corruption::BadRecord(
                "a compressed wrapper message has a null value"
            ))
        );
        // zstd and codecs 5-7.
        let zstd = message(1, 5, 4, 0, None, Some(b"x"));
        assert!(matches!(
            LegacyBatchView::new(&zstd)
                .unwrap()
                .records(&mut Vec::new()),
            Err(Error::InvalidBatch {
                what: Corruption::BadHeader(_)
            })
        ));
        let unknown = message(1, 5, 6, 0, None, Some(b"x"));
        assert!(matches!(
            LegacyBatchView::new(&unknown)
                .unwrap()
                .records(&mut Vec::new()),
            Err(Error::UnsupportedCompression { codec: 6 })
        ));
        // Nested compression.
        let nested_inner = message(1, 0, 3, 0, None, Some(b"x"));
        let nested = lz4_wrapper(1, 9, 0, 0, &nested_inner);
        assert!(matches!(
            collect(&LegacyBatchView::new(&nested).unwrap()),
            Err(Error::InvalidBatch {
                what: Corruption::BadRecord("an inner message is compressed itself")
            })
        ));
        // No inner messages, and a partial one after a whole one.
        let empty = lz4_wrapper(1, 9, 0, 0, &[]);
        assert!(
            LegacyBatchView::new(&empty)
                .unwrap()
                .records(&mut Vec::new())
                .is_err()
        );
        let mut partial = message(1, 0, 0, 0, None, Some(b"x"));
        partial.extend_from_slice(&[0; 13]);
        let partial = lz4_wrapper(1, 9, 0, 0, &partial);
        assert!(
            LegacyBatchView::new(&partial)
                .unwrap()
                .records(&mut Vec::new())
                .is_err()
        );
        // An inner message with a bad CRC.
        let mut bad_crc = message(1, 0, 0, 0, None, Some(b"x"));
        let last = bad_crc.len() - 1;
        bad_crc[last] ^= 1;
        let bad_crc = lz4_wrapper(1, 9, 0, 0, &bad_crc);
        assert!(matches!(
            collect(&LegacyBatchView::new(&bad_crc).unwrap()),
            Err(Error::InvalidBatch {
                what: Corruption::CrcMismatch { .. }
            })
        ));
        // Inner offsets that do not increase (magic 0: absolute).
        let mut repeated = message(0, 3, 0, 0, None, Some(b"x"));
        repeated.extend(message(0, 3, 0, 0, None, Some(b"y")));
        let repeated = lz4_wrapper(0, 3, 0, 0, &repeated);
        let view = LegacyBatchView::new(&repeated).unwrap();
        let mut scratch = Vec::new();
        let results: Vec<_> = view.records(&mut scratch).unwrap().collect();
        assert_eq!(results.len(), 2);
        assert!(results[0].is_ok());
        assert!(matches!(
            results[1],
            Err(Error::InvalidBatch {
                what: Corruption::OffsetOrder {
                    offset: 3,
                    bound: 4
                }
            })
        ));
    }

    #[test]
    fn framing_errors() {
        let good = message(1, 5, 0, 7, Some(b"key"), Some(b"value"));
        assert!(LegacyBatchView::new(&good).is_ok());
        for len in 0..good.len() {
            assert!(LegacyBatchView::new(&good[..len]).is_err(), "{len}");
        }
        let mut longer = good.clone();
        longer.push(0);
        assert!(matches!(
            LegacyBatchView::new(&longer),
            Err(Corruption::BadHeader(_))
        ));
        let mut bad_crc = good.clone();
        bad_crc[20] ^= 1;
        assert!(matches!(
            LegacyBatchView::new(&bad_crc),
            Err(Corruption::CrcMismatch { .. })
        ));
        // A key length that runs past the message, re-sealed with a valid CRC.
        let mut long_key = good.clone();
        long_key[29] = 100;
        let crc = crc32fast::hash(&long_key[16..]);
        long_key[12..16].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(
            LegacyBatchView::new(&long_key),
            Err(Corruption::BadRecord("key runs past its message"))
        );
        // A v2 batch is not a legacy message.
        let mut v2 = good.clone();
        v2[16] = 2;
        assert!(LegacyBatchView::new(&v2).is_err());
        assert!(matches!(
            LegacyBatchView::decode(&bad_crc),
            Err(Error::InvalidBatch { .. })
        ));
        assert_eq!(
            LegacyHeader::parse(&message(1, 0, 0, 0, None, None)[..20]),
            Err(Corruption::Truncated {
                needed: 26,
                available: 20
            })
        );
    }
}
