//! Kafka's variable-length integers: zig-zag + LEB128, as protobuf's `sint32`/`sint64`.
//!
//! Every length and delta inside a v2 record is one of these, so their exact edge behaviour is
//! part of the on-disk format:
//!
//! - **Zig-zag** maps signed to unsigned so that small magnitudes stay small: `0 -> 0`,
//!   `-1 -> 1`, `1 -> 2`, `-2 -> 3`, ... That is why a null key (length `-1`) is the single byte
//!   `0x01`, and a length of `1` is `0x02`.
//! - **LEB128** then writes 7 bits per byte, least significant group first, with the high bit set
//!   on every byte but the last: `64` zig-zags to `128` and is written `0x80 0x01`.
//! - A varint (`i32`) takes at most 5 bytes and a varlong (`i64`) at most 10. A longer encoding
//!   is an error, as in Kafka's `ByteUtils`. Like Kafka, the unused high bits of the final byte
//!   are ignored rather than rejected (`ByteUtils.readVarint` shifts them out).

use crate::error::Corruption;

/// Longest legal encoding of an `i32` varint, in bytes.
pub const MAX_VARINT_SIZE: usize = 5;
/// Longest legal encoding of an `i64` varlong, in bytes.
pub const MAX_VARLONG_SIZE: usize = 10;

/// Zig-zag encodes an `i32`: the sign moves to bit 0 so that small negative numbers stay short.
#[inline]
pub const fn zigzag32(value: i32) -> u32 {
    ((value << 1) ^ (value >> 31)) as u32
}

/// Zig-zag encodes an `i64`.
#[inline]
pub const fn zigzag64(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

/// Appends `value` as a zig-zag varint (1 to 5 bytes).
#[inline]
pub fn write_varint(out: &mut Vec<u8>, value: i32) {
    write_unsigned(out, u64::from(zigzag32(value)));
}

/// Appends `value` as a zig-zag varlong (1 to 10 bytes).
#[inline]
pub fn write_varlong(out: &mut Vec<u8>, value: i64) {
    write_unsigned(out, zigzag64(value));
}

/// The number of bytes [`write_varint`] writes for `value`.
#[inline]
pub const fn varint_size(value: i32) -> usize {
    unsigned_size(zigzag32(value) as u64)
}

/// The number of bytes [`write_varlong`] writes for `value`.
#[inline]
pub const fn varlong_size(value: i64) -> usize {
    unsigned_size(zigzag64(value))
}

/// Reads a zig-zag varint at `*pos` and advances `*pos` past it.
///
/// Fails with [`Corruption::BadVarint`] when the encoding is longer than 5 bytes or runs past the
/// end of `bytes`; `*pos` is then unspecified.
#[inline]
pub fn read_varint(bytes: &[u8], pos: &mut usize) -> Result<i32, Corruption> {
    // Unrolled over the five bytes a varint may take: most lengths and deltas in a batch take
    // one or two (a 100-byte value's length is two), and a loop with a running shift and an
    // early exit per byte costs more than the varint.
    let mut raw = 0u32;
    for shift in [0, 7, 14, 21, 28] {
        let &byte = bytes.get(*pos).ok_or(Corruption::BadVarint)?;
        *pos += 1;
        // Bits above 32 can only come from the fifth byte; Kafka drops them, and so do we.
        raw |= u32::from(byte & 0x7f).wrapping_shl(shift);
        if byte & 0x80 == 0 {
            return Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32));
        }
    }
    Err(Corruption::BadVarint)
}

/// Reads a zig-zag varlong at `*pos` and advances `*pos` past it.
///
/// Fails with [`Corruption::BadVarint`] when the encoding is longer than 10 bytes or runs past
/// the end of `bytes`.
#[inline(always)]
pub fn read_varlong(bytes: &[u8], pos: &mut usize) -> Result<i64, Corruption> {
    // Fast path: a record's timestamp delta is most often 0 or small.
    if let Some(&byte) = bytes.get(*pos)
        && byte & 0x80 == 0
    {
        *pos += 1;
        let raw = i64::from(byte);
        return Ok((raw >> 1) ^ -(raw & 1));
    }
    let raw = read_unsigned(bytes, pos, MAX_VARLONG_SIZE)?;
    Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
}

/// A few varints gathered on the stack, to be appended to a buffer with one copy instead of a
/// `Vec::push` per byte: a record's framing before its key is up to 26 bytes.
#[derive(Debug)]
pub(crate) struct VarintScratch {
    bytes: [u8; 32],
    len: usize,
}

impl VarintScratch {
    pub(crate) const fn new() -> VarintScratch {
        VarintScratch {
            bytes: [0; 32],
            len: 0,
        }
    }

    /// Appends one byte. Callers push at most 32 bytes between two `clear`s: the index wraps
    /// (it is never out of bounds), and `as_slice` of an overfull scratch is empty.
    #[inline]
    pub(crate) fn push(&mut self, byte: u8) {
        self.bytes[self.len & 31] = byte;
        self.len += 1;
    }

    /// Appends `value` as a zig-zag varint.
    #[inline]
    pub(crate) fn push_varint(&mut self, value: i32) {
        self.push_unsigned(u64::from(zigzag32(value)));
    }

    /// Appends `value` as a zig-zag varlong.
    #[inline]
    pub(crate) fn push_varlong(&mut self, value: i64) {
        self.push_unsigned(zigzag64(value));
    }

    #[inline]
    fn push_unsigned(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.push((value as u8) | 0x80);
            value >>= 7;
        }
        self.push(value as u8);
    }

    /// The bytes pushed since the last `clear`.
    #[inline]
    pub(crate) fn as_slice(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or_default()
    }

    #[inline]
    pub(crate) fn clear(&mut self) {
        self.len = 0;
    }
}

#[inline]
fn write_unsigned(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

#[inline]
const fn unsigned_size(value: u64) -> usize {
    // Bits needed (at least 1), rounded up to whole 7-bit groups.
    let bits = 64 - (value | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// LEB128 decode of at most `max_bytes` bytes. Bits shifted past 64 are dropped, as in Kafka.
#[inline]
fn read_unsigned(bytes: &[u8], pos: &mut usize, max_bytes: usize) -> Result<u64, Corruption> {
    let mut value: u64 = 0;
    let mut shift: u32 = 0;
    for _ in 0..max_bytes {
        let byte = *bytes.get(*pos).ok_or(Corruption::BadVarint)?;
        *pos += 1;
        value |= u64::from(byte & 0x7f).wrapping_shl(shift);
        if byte & 0x80 == 0 {
            return Ok(value);
        }
        shift += 7;
    }
    Err(Corruption::BadVarint)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint_bytes(value: i32) -> Vec<u8> {
        let mut out = Vec::new();
        write_varint(&mut out, value);
        out
    }

    fn varlong_bytes(value: i64) -> Vec<u8> {
        let mut out = Vec::new();
        write_varlong(&mut out, value);
        out
    }

    /// Vectors from Kafka's `ByteUtilsTest.testVarintSerde` / `testVarlongSerde`.
    #[test]
    fn kafka_varint_vectors() {
        let cases: &[(i32, &[u8])] = &[
            (0, &[0x00]),
            (-1, &[0x01]),
            (1, &[0x02]),
            (63, &[0x7e]),
            (-64, &[0x7f]),
            (64, &[0x80, 0x01]),
            (-65, &[0x81, 0x01]),
            (8191, &[0xfe, 0x7f]),
            (-8192, &[0xff, 0x7f]),
            (8192, &[0x80, 0x80, 0x01]),
            (-8193, &[0x81, 0x80, 0x01]),
            (1_048_575, &[0xfe, 0xff, 0x7f]),
            (-1_048_576, &[0xff, 0xff, 0x7f]),
            (1_048_576, &[0x80, 0x80, 0x80, 0x01]),
            (-1_048_577, &[0x81, 0x80, 0x80, 0x01]),
            (134_217_727, &[0xfe, 0xff, 0xff, 0x7f]),
            (-134_217_728, &[0xff, 0xff, 0xff, 0x7f]),
            (134_217_728, &[0x80, 0x80, 0x80, 0x80, 0x01]),
            (-134_217_729, &[0x81, 0x80, 0x80, 0x80, 0x01]),
            (i32::MAX, &[0xfe, 0xff, 0xff, 0xff, 0x0f]),
            (i32::MIN, &[0xff, 0xff, 0xff, 0xff, 0x0f]),
        ];
        for &(value, encoded) in cases {
            assert_eq!(varint_bytes(value), encoded, "encode {value}");
            assert_eq!(varint_size(value), encoded.len(), "size {value}");
            let mut pos = 0;
            assert_eq!(read_varint(encoded, &mut pos), Ok(value), "decode {value}");
            assert_eq!(pos, encoded.len());
        }
    }

    #[test]
    fn kafka_varlong_vectors() {
        let cases: &[(i64, &[u8])] = &[
            (0, &[0x00]),
            (-1, &[0x01]),
            (1, &[0x02]),
            (63, &[0x7e]),
            (-64, &[0x7f]),
            (64, &[0x80, 0x01]),
            (-65, &[0x81, 0x01]),
            (8191, &[0xfe, 0x7f]),
            (-8192, &[0xff, 0x7f]),
            (8192, &[0x80, 0x80, 0x01]),
            (-8193, &[0x81, 0x80, 0x01]),
            (1_048_575, &[0xfe, 0xff, 0x7f]),
            (-1_048_576, &[0xff, 0xff, 0x7f]),
            (1_048_576, &[0x80, 0x80, 0x80, 0x01]),
            (-1_048_577, &[0x81, 0x80, 0x80, 0x01]),
            (134_217_727, &[0xfe, 0xff, 0xff, 0x7f]),
            (-134_217_728, &[0xff, 0xff, 0xff, 0x7f]),
            (134_217_728, &[0x80, 0x80, 0x80, 0x80, 0x01]),
            (-134_217_729, &[0x81, 0x80, 0x80, 0x80, 0x01]),
            (i32::MAX as i64, &[0xfe, 0xff, 0xff, 0xff, 0x0f]),
            (i32::MIN as i64, &[0xff, 0xff, 0xff, 0xff, 0x0f]),
            (17_179_869_183, &[0xfe, 0xff, 0xff, 0xff, 0x7f]),
            (-17_179_869_184, &[0xff, 0xff, 0xff, 0xff, 0x7f]),
            (17_179_869_184, &[0x80, 0x80, 0x80, 0x80, 0x80, 0x01]),
            (-17_179_869_185, &[0x81, 0x80, 0x80, 0x80, 0x80, 0x01]),
            (
                i64::MAX,
                &[0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            ),
            (
                i64::MIN,
                &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            ),
        ];
        for &(value, encoded) in cases {
            assert_eq!(varlong_bytes(value), encoded, "encode {value}");
            assert_eq!(varlong_size(value), encoded.len(), "size {value}");
            let mut pos = 0;
            assert_eq!(read_varlong(encoded, &mut pos), Ok(value), "decode {value}");
            assert_eq!(pos, encoded.len());
        }
    }

    /// Kafka's `testInvalidVarint`/`testInvalidVarlong`: a continuation bit on the last legal
    /// byte is an error, and so is running out of input.
    #[test]
    fn too_long_or_truncated_is_bad_varint() {
        let six = [0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(read_varint(&six, &mut 0), Err(Corruption::BadVarint));
        let eleven = [
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        ];
        assert_eq!(read_varlong(&eleven, &mut 0), Err(Corruption::BadVarint));
        assert_eq!(read_varint(&[0x80], &mut 0), Err(Corruption::BadVarint));
        assert_eq!(read_varint(&[], &mut 0), Err(Corruption::BadVarint));
        assert_eq!(
            read_varlong(&[0x80, 0x80], &mut 0),
            Err(Corruption::BadVarint)
        );
        // Reading at a position past the end is the same error, never a panic.
        assert_eq!(read_varint(&[0x02], &mut 7), Err(Corruption::BadVarint));
    }

    /// As in Kafka, the unused high bits of a fifth varint byte are dropped, not rejected.
    #[test]
    fn high_bits_of_last_byte_are_dropped_like_kafka() {
        let mut pos = 0;
        assert_eq!(
            read_varint(&[0xfe, 0xff, 0xff, 0xff, 0x7f], &mut pos),
            Ok(i32::MAX)
        );
        assert_eq!(pos, 5);
    }

    #[test]
    fn round_trip_edges() {
        for value in [0, 1, -1, 127, 128, -129, i32::MAX, i32::MIN, 1 << 20] {
            let bytes = varint_bytes(value);
            assert_eq!(read_varint(&bytes, &mut 0), Ok(value));
        }
        for value in [0, -1, i64::MAX, i64::MIN, 1 << 40, -(1 << 50)] {
            let bytes = varlong_bytes(value);
            assert_eq!(read_varlong(&bytes, &mut 0), Ok(value));
        }
    }
}
