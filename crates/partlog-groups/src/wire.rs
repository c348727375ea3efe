//! Kafka's message types as the coordinator records and the consumer-protocol blobs lay them
//! out: big-endian integers; non-flexible `STRING` (i16 length, −1 for null), `BYTES` (i32
//! length) and `ARRAY` (i32 count); and, for the flexible versions, the compact forms (unsigned
//! varint of length + 1, 0 for null) and tagged fields.
//!
//! The reader checks every length against the bytes left before it allocates, so hostile bytes
//! cost no more memory than they occupy.

use std::borrow::Cow;
use std::fmt;

/// Why bytes did not parse as the schema says: what was being read and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// The field or structure that could not be read.
    pub what: String,
    /// The byte position in the buffer where the read started.
    pub position: usize,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.what, self.position)
    }
}

impl std::error::Error for DecodeError {}

/// A cursor over one key, value or blob.
pub(crate) struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Reader { data, at: 0 }
    }

    fn error(&self, what: impl Into<String>) -> DecodeError {
        DecodeError {
            what: what.into(),
            position: self.at,
        }
    }

    /// The bytes not yet read.
    pub(crate) fn remaining(&self) -> usize {
        self.data.len() - self.at
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(self.error(format!(
                "{what}: needs {n} bytes, {} left",
                self.remaining()
            )));
        }
        let bytes = &self.data[self.at..self.at + n];
        self.at += n;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], DecodeError> {
        let bytes = self.take(N, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    pub(crate) fn i16(&mut self, what: &str) -> Result<i16, DecodeError> {
        self.array(what).map(i16::from_be_bytes)
    }

    pub(crate) fn i32(&mut self, what: &str) -> Result<i32, DecodeError> {
        self.array(what).map(i32::from_be_bytes)
    }

    pub(crate) fn i64(&mut self, what: &str) -> Result<i64, DecodeError> {
        self.array(what).map(i64::from_be_bytes)
    }

    /// Kafka's unsigned varint (at most 5 bytes for a 32-bit value).
    pub(crate) fn uvarint(&mut self, what: &str) -> Result<u32, DecodeError> {
        let start = self.at;
        let mut value: u32 = 0;
        for shift in (0..35).step_by(7) {
            let [byte] = self.array::<1>(what)?;
            value |= u32::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        self.at = start;
        Err(self.error(format!("{what}: varint longer than 5 bytes")))
    }

    fn utf8(&self, bytes: &[u8], _what: &str) -> Result<String, DecodeError> {
        // Malformed sequences replaced, as in `nullable_str`.
        Ok(String::from_utf8_lossy(bytes).into_owned())
    }

    /// `STRING` or `NULLABLE_STRING` (non-flexible).
    pub(crate) fn nullable_string(&mut self, what: &str) -> Result<Option<String>, DecodeError> {
        Ok(self.nullable_str(what)?.map(Cow::into_owned))
    }

    /// [`nullable_string`](Self::nullable_string) borrowed from the bytes read (copied only
    /// when they are not valid UTF-8).
    pub(crate) fn nullable_str(&mut self, what: &str) -> Result<Option<Cow<'a, str>>, DecodeError> {
        let n = self.i16(what)?;
        if n < 0 {
            return Ok(None);
        }
        // Kafka's generated readers decode with Java's UTF-8 decoder, which replaces malformed
        // sequences instead of refusing them.
        Ok(Some(String::from_utf8_lossy(self.take(n as usize, what)?)))
    }

    /// A non-nullable `STRING`: a null is an error, as in Kafka's generated readers.
    pub(crate) fn string(&mut self, what: &str) -> Result<String, DecodeError> {
        self.str(what).map(Cow::into_owned)
    }

    /// [`string`](Self::string) borrowed from the bytes read.
    pub(crate) fn str(&mut self, what: &str) -> Result<Cow<'a, str>, DecodeError> {
        let at = self.at;
        self.nullable_str(what)?.ok_or_else(|| DecodeError {
            what: format!("{what}: null in a non-nullable string"),
            position: at,
        })
    }

    /// `COMPACT_STRING` or `COMPACT_NULLABLE_STRING`.
    pub(crate) fn compact_nullable_string(
        &mut self,
        what: &str,
    ) -> Result<Option<String>, DecodeError> {
        let n = self.uvarint(what)?;
        if n == 0 {
            return Ok(None);
        }
        let bytes = self.take((n - 1) as usize, what)?;
        self.utf8(bytes, what).map(Some)
    }

    /// A non-nullable `COMPACT_STRING`.
    pub(crate) fn compact_string(&mut self, what: &str) -> Result<String, DecodeError> {
        let at = self.at;
        self.compact_nullable_string(what)?
            .ok_or_else(|| DecodeError {
                what: format!("{what}: null in a non-nullable string"),
                position: at,
            })
    }

    /// `BYTES` or `NULLABLE_BYTES` (i32 length, −1 for null).
    pub(crate) fn nullable_bytes(&mut self, what: &str) -> Result<Option<Vec<u8>>, DecodeError> {
        let n = self.i32(what)?;
        if n < 0 {
            return Ok(None);
        }
        self.take(n as usize, what).map(|b| Some(b.to_vec()))
    }

    /// A non-nullable `BYTES`.
    pub(crate) fn bytes(&mut self, what: &str) -> Result<Vec<u8>, DecodeError> {
        let at = self.at;
        self.nullable_bytes(what)?.ok_or_else(|| DecodeError {
            what: format!("{what}: null in non-nullable bytes"),
            position: at,
        })
    }

    /// A non-nullable `COMPACT_BYTES`.
    pub(crate) fn compact_bytes(&mut self, what: &str) -> Result<Vec<u8>, DecodeError> {
        let at = self.at;
        let n = self.uvarint(what)?;
        if n == 0 {
            return Err(DecodeError {
                what: format!("{what}: null in non-nullable bytes"),
                position: at,
            });
        }
        self.take((n - 1) as usize, what).map(<[u8]>::to_vec)
    }

    /// A non-nullable `ARRAY` count. Each element takes at least `min_element` bytes, so a
    /// count the bytes left cannot hold is refused before anything is allocated.
    pub(crate) fn array_len(
        &mut self,
        what: &str,
        min_element: usize,
    ) -> Result<usize, DecodeError> {
        let at = self.at;
        let n = self.i32(what)?;
        self.check_count(n as i64, min_element, what, at)
    }

    /// A non-nullable `COMPACT_ARRAY` count.
    pub(crate) fn compact_array_len(
        &mut self,
        what: &str,
        min_element: usize,
    ) -> Result<usize, DecodeError> {
        let at = self.at;
        let n = i64::from(self.uvarint(what)?) - 1;
        self.check_count(n, min_element, what, at)
    }

    fn check_count(
        &self,
        n: i64,
        min_element: usize,
        what: &str,
        at: usize,
    ) -> Result<usize, DecodeError> {
        let fits = usize::try_from(n)
            .ok()
            .filter(|&n| n.saturating_mul(min_element.max(1)) <= self.remaining());
        fits.ok_or_else(|| DecodeError {
            what: format!("{what}: array count {n} does not fit the bytes left"),
            position: at,
        })
    }

    /// The tagged fields of a flexible structure. `known` is called with each tag and the
    /// reader; it reads a field it knows by the field's type and returns `true`, or returns
    /// `false` for a tag it does not know, whose declared size is then skipped. As in Kafka's
    /// generated readers, a known field is read by its type whatever size it declares, and tags
    /// are not checked for order.
    pub(crate) fn tagged_fields(
        &mut self,
        mut known: impl FnMut(u32, &mut Reader<'a>) -> Result<bool, DecodeError>,
    ) -> Result<(), DecodeError> {
        let count = self.uvarint("tagged field count")?;
        for _ in 0..count {
            let tag = self.uvarint("tag")?;
            let size = self.uvarint("tagged field size")?;
            if !known(tag, self)? {
                self.take(size as usize, "tagged field")?;
            }
        }
        Ok(())
    }

    /// `n` raw bytes.
    pub(crate) fn fixed<const N: usize>(&mut self, what: &str) -> Result<[u8; N], DecodeError> {
        self.array(what)
    }
}

/// Appends fields to a buffer.
#[derive(Default)]
pub(crate) struct Writer {
    pub(crate) out: Vec<u8>,
}

impl Writer {
    pub(crate) fn i16(&mut self, v: i16) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }

    pub(crate) fn i32(&mut self, v: i32) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }

    pub(crate) fn i64(&mut self, v: i64) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }

    pub(crate) fn uvarint(&mut self, mut v: u32) {
        while v >= 0x80 {
            self.out.push((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        self.out.push(v as u8);
    }

    /// A `STRING` or `NULLABLE_STRING`; the caller has checked the length ([`check_string`]).
    pub(crate) fn nullable_string(&mut self, s: Option<&str>) {
        match s {
            None => self.i16(-1),
            Some(s) => {
                self.i16(s.len() as i16);
                self.out.extend_from_slice(s.as_bytes());
            }
        }
    }

    pub(crate) fn string(&mut self, s: &str) {
        self.nullable_string(Some(s));
    }

    pub(crate) fn compact_nullable_string(&mut self, s: Option<&str>) {
        match s {
            None => self.uvarint(0),
            Some(s) => {
                self.uvarint(s.len() as u32 + 1);
                self.out.extend_from_slice(s.as_bytes());
            }
        }
    }

    pub(crate) fn nullable_bytes(&mut self, b: Option<&[u8]>) {
        match b {
            None => self.i32(-1),
            Some(b) => {
                self.i32(b.len() as i32);
                self.out.extend_from_slice(b);
            }
        }
    }

    pub(crate) fn compact_bytes(&mut self, b: &[u8]) {
        self.uvarint(b.len() as u32 + 1);
        self.out.extend_from_slice(b);
    }
}

/// The longest string Kafka's `STRING` type holds.
pub(crate) const MAX_STRING_BYTES: usize = i16::MAX as usize;

/// Refuses a string Kafka's `STRING` type cannot hold (more than 32767 bytes of UTF-8).
pub(crate) fn check_string(s: &str, what: &str) -> Result<(), EncodeError> {
    if s.len() > MAX_STRING_BYTES {
        return Err(EncodeError {
            what: format!(
                "{what} is {} bytes of UTF-8; Kafka's STRING holds at most {MAX_STRING_BYTES}",
                s.len()
            ),
        });
    }
    Ok(())
}

/// Refuses bytes longer than an `i32` length can say.
pub(crate) fn check_bytes(b: &[u8], what: &str) -> Result<(), EncodeError> {
    if b.len() > i32::MAX as usize {
        return Err(EncodeError {
            what: format!(
                "{what} is {} bytes; Kafka's BYTES holds at most 2^31-1",
                b.len()
            ),
        });
    }
    Ok(())
}

/// Why a value cannot be written in Kafka's layout (a string or blob too long, a version the
/// schema does not have).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodeError {
    /// What cannot be written, and the limit.
    pub what: String,
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.what)
    }
}

impl std::error::Error for EncodeError {}
