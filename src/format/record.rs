//! Records and headers inside a v2 batch, decoded lazily and without allocation.
//!
//! Each record in the (decompressed) records section is:
//!
//! ```text
//! length          varint   bytes of everything after this field (the body)
//! attributes      i8       unused, written as 0
//! timestampDelta  varlong  record timestamp - batch baseTimestamp
//! offsetDelta     varint   record offset - batch baseOffset
//! keyLength       varint   -1 = null key
//! key             bytes
//! valueLength     varint   -1 = null value (a tombstone)
//! value           bytes
//! headerCount     varint   >= 0, and no more than the bytes left in the record
//! headers         headerKeyLength varint (>= 0; keys are never null) | headerKey bytes |
//!                 headerValueLength varint (-1 = null) | headerValue bytes
//! ```
//!
//! All varints are zig-zag ([`super::varint`]). A record's fields must use exactly `length`
//! bytes, and after `recordsCount` records the section must be exhausted.
//!
//! Headers are checked when their record is decoded, so that [`HeaderIter`] can walk them again
//! later without failing and without having collected them anywhere.

use super::batch::{BatchHeader, TimestampType};
use super::varint::{read_varint, read_varlong};
use crate::error::{Corruption, Error, Result};

/// One record of a batch, borrowing its key, value and headers from the batch (or from the
/// scratch buffer a compressed batch was decompressed into).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// `baseOffset + offsetDelta`.
    pub offset: i64,
    /// Under CreateTime `baseTimestamp + timestampDelta` (also when a delete horizon is set:
    /// the cleaner re-bases the deltas on it); under LogAppendTime the batch `maxTimestamp`.
    /// A legacy record: its message's timestamp (a LogAppendTime wrapper's, for an inner
    /// message), or -1 for magic 0.
    pub timestamp: i64,
    /// The key; `None` is a null key (length -1), distinct from an empty one.
    pub key: Option<&'a [u8]>,
    /// The value; `None` is a null value, a tombstone in a compacted log.
    pub value: Option<&'a [u8]>,
    headers: HeaderIter<'a>,
}

impl<'a> Record<'a> {
    /// A record without headers: what a legacy (magic 0 or 1) message holds.
    pub(crate) fn without_headers(
        offset: i64,
        timestamp: i64,
        key: Option<&'a [u8]>,
        value: Option<&'a [u8]>,
    ) -> Record<'a> {
        Record {
            offset,
            timestamp,
            key,
            value,
            headers: HeaderIter::empty(),
        }
    }

    /// The record's headers, in order (keys may repeat); none for a legacy message.
    pub fn headers(&self) -> HeaderIter<'a> {
        self.headers
    }

    /// How many headers the record has.
    pub fn header_count(&self) -> usize {
        self.headers.len()
    }
}

/// One record header. Kafka header keys are UTF-8 strings on the producer side; here they are
/// the bytes as stored ([`Header::key_str`] checks them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Header<'a> {
    /// The header key (never null).
    pub key: &'a [u8],
    /// The header value; `None` is a null value.
    pub value: Option<&'a [u8]>,
}

impl<'a> Header<'a> {
    /// The key as UTF-8, or `None` if it is not valid UTF-8.
    pub fn key_str(&self) -> Option<&'a str> {
        std::str::from_utf8(self.key).ok()
    }
}

/// Iterates the headers of one record. They were validated when the record was decoded, so
/// iteration cannot fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderIter<'a> {
    bytes: &'a [u8],
    pos: usize,
    remaining: usize,
}

impl<'a> HeaderIter<'a> {
    fn empty() -> HeaderIter<'a> {
        HeaderIter {
            bytes: &[],
            pos: 0,
            remaining: 0,
        }
    }
}

impl<'a> Iterator for HeaderIter<'a> {
    type Item = Header<'a>;

    fn next(&mut self) -> Option<Header<'a>> {
        if self.remaining == 0 {
            return None;
        }
        // Validated in `parse_headers`; a failure here cannot happen, and would end the walk.
        let header = read_header(self.bytes, &mut self.pos).ok();
        self.remaining = if header.is_some() {
            self.remaining - 1
        } else {
            0
        };
        header
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for HeaderIter<'_> {}

/// The batch fields every record of the batch needs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RecordContext {
    base_offset: i64,
    base_timestamp: i64,
    /// `Some(maxTimestamp)` under LogAppendTime: every record reports it.
    log_append_time: Option<i64>,
}

impl RecordContext {
    pub(crate) fn new(header: &BatchHeader) -> RecordContext {
        RecordContext {
            base_offset: header.base_offset,
            base_timestamp: header.base_timestamp,
            log_append_time: (header.timestamp_type() == TimestampType::LogAppendTime)
                .then_some(header.max_timestamp),
        }
    }
}

/// Iterates the records of one batch, yielding each or the first error (after which it ends).
///
/// Errors are [`Error::InvalidBatch`] carrying a [`Corruption`]: `BadVarint` for a varint too
/// long or running off its record; `BadRecord` for framing (a record length that disagrees with
/// its fields or runs past the section, a negative length other than -1, a bad header count);
/// `RecordCount` when the section ends before `recordsCount` records, or bytes remain after
/// them.
#[derive(Debug, Clone)]
pub struct RecordIter<'a> {
    data: &'a [u8],
    pos: usize,
    context: RecordContext,
    declared: i32,
    read: i32,
    done: bool,
}

impl<'a> RecordIter<'a> {
    pub(crate) fn new(data: &'a [u8], context: RecordContext, declared: i32) -> RecordIter<'a> {
        RecordIter {
            data,
            pos: 0,
            context,
            declared,
            read: 0,
            done: false,
        }
    }

    /// Records still expected according to the batch's `recordsCount`.
    pub fn remaining(&self) -> usize {
        usize::try_from(self.declared.saturating_sub(self.read)).unwrap_or(0)
    }

    /// Steps over the records whose offset is below `offset`, reading of each only its length
    /// and its offset delta: a reader that wants one record of a large batch does not decode
    /// the keys, values and headers of the records before it. Those records are not returned,
    /// so they need not pass the checks [`next`](Iterator::next) makes (the batch's CRC covers
    /// their bytes); the record it stops at gets them all. Anything unexpected in the framing
    /// stops the skip at that record, and `next` then reports it. A batch whose base offset is
    /// at or above `offset` steps over nothing.
    pub fn skip_below(&mut self, offset: i64) {
        if self.context.base_offset >= offset {
            // Nothing to step over: the common case of a read that starts at a batch.
            return;
        }
        let data = self.data;
        while !self.done && self.read < self.declared {
            let mut pos = self.pos;
            let Ok(body_len) = read_varint(data, &mut pos) else {
                return;
            };
            let Some(end) = usize::try_from(body_len)
                .ok()
                .and_then(|len| pos.checked_add(len))
                .filter(|&end| end <= data.len())
            else {
                return;
            };
            // The body: attributes (one byte), timestampDelta (read, unused), offsetDelta.
            let mut at = pos + 1;
            let delta = match (read_varlong(data, &mut at), read_varint(data, &mut at)) {
                (Ok(_), Ok(delta)) if at <= end => delta,
                _ => return,
            };
            match self.context.base_offset.checked_add(i64::from(delta)) {
                Some(record_offset) if record_offset < offset => {
                    self.pos = end;
                    self.read += 1;
                }
                _ => return,
            }
        }
    }

    /// Moves the iterator to the record that starts at byte `pos` of the records section, the
    /// `index`-th of the batch (0-based), as found by [`record_starts`]: a point read goes to
    /// its record without stepping over the ones before it. The record there gets every check
    /// [`next`](Iterator::next) makes.
    pub(crate) fn seek(&mut self, pos: usize, index: i32) {
        if !self.done && pos <= self.data.len() && (0..self.declared).contains(&index) {
            self.pos = pos;
            self.read = index;
        }
    }

    /// Where each record of the section starts (byte positions), read from the length of each:
    /// `None` when a length is not a whole varint inside the section, or when the section does
    /// not hold exactly `recordsCount` records. Built once for a batch whose bytes are kept
    /// (a point read's cache), so that a later read of record `i` is one lookup.
    pub(crate) fn record_starts(&self) -> Option<Vec<u32>> {
        let data = self.data;
        let mut starts = Vec::with_capacity(self.remaining());
        let mut pos = self.pos;
        while pos < data.len() {
            starts.push(u32::try_from(pos).ok()?);
            let body_len = usize::try_from(read_varint(data, &mut pos).ok()?).ok()?;
            pos = pos.checked_add(body_len).filter(|&end| end <= data.len())?;
        }
        (starts.len() == self.remaining()).then_some(starts)
    }

    fn fail(&mut self, what: Corruption) -> Option<Result<Record<'a>>> {
        self.done = true;
        Some(Err(Error::InvalidBatch { what }))
    }
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Result<Record<'a>>;

    #[inline]
    fn next(&mut self) -> Option<Result<Record<'a>>> {
        if self.done {
            return None;
        }
        if self.read >= self.declared {
            self.done = true;
            if self.pos < self.data.len() {
                return self.fail(Corruption::RecordCount {
                    declared: self.declared,
                    found: -1,
                });
            }
            return None;
        }
        if self.pos >= self.data.len() {
            return self.fail(Corruption::RecordCount {
                declared: self.declared,
                found: i64::from(self.read),
            });
        }
        match parse_record(self.data, &mut self.pos, &self.context) {
            Ok(record) => {
                self.read += 1;
                Some(Ok(record))
            }
            Err(what) => self.fail(what),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.done {
            (0, Some(0))
        } else {
            // One more item is possible: the error for leftover bytes.
            (0, Some(self.remaining().saturating_add(1)))
        }
    }
}

/// Decodes the record at `*pos` and moves `*pos` past it.
#[inline]
fn parse_record<'a>(
    data: &'a [u8],
    pos: &mut usize,
    context: &RecordContext,
) -> Result<Record<'a>, Corruption> {
    let body_len = read_varint(data, pos)?;
    let body_len =
        usize::try_from(body_len).map_err(|_| Corruption::BadRecord("negative record length"))?;
    let body = pos
        .checked_add(body_len)
        .and_then(|end| data.get(*pos..end))
        .ok_or(Corruption::BadRecord(
            "record length runs past the end of the batch",
        ))?;
    *pos += body_len;

    // Attributes: one unused byte.
    let mut at = 1;
    if body.is_empty() {
        return Err(Corruption::BadRecord(
            "record length does not match its fields",
        ));
    }
    let timestamp_delta = read_varlong(body, &mut at)?;
    let offset_delta = read_varint(body, &mut at)?;
    let key = read_nullable(
        body,
        &mut at,
        "negative key length",
        "key runs past its record",
    )?;
    let value = read_nullable(
        body,
        &mut at,
        "negative value length",
        "value runs past its record",
    )?;
    // Most records have no headers: a count of 0 is the single byte 0.
    let headers = if body.get(at) == Some(&0) {
        at += 1;
        HeaderIter::empty()
    } else {
        parse_headers(body, &mut at)?
    };
    if at != body.len() {
        return Err(Corruption::BadRecord(
            "record length does not match its fields",
        ));
    }

    let offset = context
        .base_offset
        .checked_add(i64::from(offset_delta))
        .ok_or(Corruption::BadRecord("record offset overflows i64"))?;
    let timestamp = context
        .log_append_time
        .unwrap_or_else(|| context.base_timestamp.wrapping_add(timestamp_delta));
    Ok(Record {
        offset,
        timestamp,
        key,
        value,
        headers,
    })
}

/// Reads a varint length then that many bytes; length -1 is `None`.
#[inline(always)]
fn read_nullable<'a>(
    bytes: &'a [u8],
    at: &mut usize,
    negative: &'static str,
    overrun: &'static str,
) -> Result<Option<&'a [u8]>, Corruption> {
    let len = read_varint(bytes, at)?;
    if len == -1 {
        return Ok(None);
    }
    // Kafka reads any negative length as null; only -1 is ever written, so partlog calls the
    // rest what they are: corruption.
    let len = usize::try_from(len).map_err(|_| Corruption::BadRecord(negative))?;
    take(bytes, at, len)
        .map(Some)
        .ok_or(Corruption::BadRecord(overrun))
}

#[inline(always)]
fn take<'a>(bytes: &'a [u8], at: &mut usize, len: usize) -> Option<&'a [u8]> {
    let slice = bytes.get(*at..at.checked_add(len)?)?;
    *at += len;
    Some(slice)
}

/// Validates the header count and every header, returning an iterator over them.
fn parse_headers<'a>(body: &'a [u8], at: &mut usize) -> Result<HeaderIter<'a>, Corruption> {
    let count = read_varint(body, at)?;
    let count =
        usize::try_from(count).map_err(|_| Corruption::BadRecord("negative header count"))?;
    if count == 0 {
        return Ok(HeaderIter::empty());
    }
    // Each header takes at least two bytes, so a larger count cannot fit; Kafka checks the
    // weaker `count <= remaining` before allocating its array.
    if count > body.len().saturating_sub(*at) {
        return Err(Corruption::BadRecord(
            "header count exceeds the bytes left in the record",
        ));
    }
    let start = *at;
    for _ in 0..count {
        read_header(body, at)?;
    }
    Ok(HeaderIter {
        bytes: body.get(start..*at).unwrap_or_default(),
        pos: 0,
        remaining: count,
    })
}

fn read_header<'a>(bytes: &'a [u8], at: &mut usize) -> Result<Header<'a>, Corruption> {
    let key_len = read_varint(bytes, at)?;
    let key_len = usize::try_from(key_len)
        .map_err(|_| Corruption::BadRecord("negative header key length"))?;
    let key =
        take(bytes, at, key_len).ok_or(Corruption::BadRecord("header key runs past its record"))?;
    let value = read_nullable(
        bytes,
        at,
        "negative header value length",
        "header value runs past its record",
    )?;
    Ok(Header { key, value })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::varint::{write_varint, write_varlong};
    use super::*;

    const BASE_OFFSET: i64 = 1000;

    /// One record for the records section: its offset delta, key, value and header count.
    type Spec = (i32, Option<Vec<u8>>, Option<Vec<u8>>, usize);

    fn encode(records: &[Spec]) -> Vec<u8> {
        let mut out = Vec::new();
        for (delta, key, value, headers) in records {
            let mut body = vec![0u8];
            write_varlong(&mut body, i64::from(*delta) * 7 - 3);
            write_varint(&mut body, *delta);
            for field in [key, value] {
                match field {
                    Some(bytes) => {
                        write_varint(&mut body, bytes.len() as i32);
                        body.extend_from_slice(bytes);
                    }
                    None => write_varint(&mut body, -1),
                }
            }
            write_varint(&mut body, *headers as i32);
            for _ in 0..*headers {
                write_varint(&mut body, 1);
                body.push(b'h');
                write_varint(&mut body, -1);
            }
            write_varint(&mut out, body.len() as i32);
            out.extend_from_slice(&body);
        }
        out
    }

    type Item = std::result::Result<(i64, Vec<u8>), String>;

    fn records_of(data: &[u8], declared: i32, skip_to: Option<i64>) -> Vec<Item> {
        let context = RecordContext {
            base_offset: BASE_OFFSET,
            base_timestamp: 0,
            log_append_time: None,
        };
        let mut iter = RecordIter::new(data, context, declared);
        if let Some(offset) = skip_to {
            iter.skip_below(offset);
        }
        iter.map(|record| {
            record
                .map(|record| (record.offset, record.value.unwrap_or_default().to_vec()))
                .map_err(|error| error.to_string())
        })
        .collect()
    }

    fn specs() -> impl Strategy<Value = Vec<Spec>> {
        let bytes = || proptest::option::of(proptest::collection::vec(any::<u8>(), 0..80));
        proptest::collection::vec((1i32..40, bytes(), bytes(), 0usize..3), 0..12).prop_map(
            |mut records| {
                // Offsets increase, with gaps (a compacted batch keeps its deltas).
                let mut delta = -1;
                for record in &mut records {
                    delta += record.0;
                    record.0 = delta;
                }
                records
            },
        )
    }

    proptest! {
        /// Skipping to an offset yields exactly what the full walk yields from the first record
        /// at or above it, errors included.
        #[test]
        fn skip_below_matches_the_full_walk(records in specs(), target in 990i64..1500) {
            let data = encode(&records);
            let declared = records.len() as i32;
            let full = records_of(&data, declared, None);
            prop_assert!(full.iter().all(Result::is_ok));
            let from: Vec<_> = full
                .iter()
                .filter(|r| r.as_ref().is_ok_and(|(offset, _)| *offset >= target))
                .cloned()
                .collect();
            prop_assert_eq!(records_of(&data, declared, Some(target)), from);
        }

        /// On damaged bytes (a flipped byte, a cut, a wrong count) a skip never yields a record
        /// below its target first, and up to the first record the full walk fails on, it
        /// yields what the full walk yields.
        #[test]
        fn skip_below_on_damaged_records(
            records in specs(),
            target in 990i64..1500,
            flip in any::<(prop::sample::Index, u8)>(),
            cut in any::<prop::sample::Index>(),
            damage in 0..3u8,
            extra in -1i32..2,
        ) {
            let mut data = encode(&records);
            let mut declared = records.len() as i32;
            match damage {
                0 if !data.is_empty() => {
                    let at = flip.0.index(data.len());
                    data[at] ^= flip.1 | 1;
                }
                1 if !data.is_empty() => data.truncate(cut.index(data.len())),
                _ => declared = (declared + extra).max(0),
            }
            let full = records_of(&data, declared, None);
            let skipped = records_of(&data, declared, Some(target));
            // A skip to at or below the batch's base offset steps over nothing (a damaged,
            // negative offset delta may then put a record below it, as in the full walk).
            if let (Some(Ok((offset, _))), true) = (skipped.first(), target > BASE_OFFSET) {
                prop_assert!(*offset >= target, "the skip stopped below its target");
            }
            // Where the skip's output starts in the full walk: the first record at or above the
            // target, or the first record of all when the skip steps over nothing.
            let first_at_target = if target > BASE_OFFSET {
                full.iter()
                    .position(|r| r.as_ref().map_or(true, |(offset, _)| *offset >= target))
                    .unwrap_or(full.len())
            } else {
                0
            };
            if full[..first_at_target].iter().all(Result::is_ok)
                && full.get(first_at_target).is_none_or(Result::is_ok)
            {
                prop_assert_eq!(&skipped[..], &full[first_at_target..]);
            }
        }
    }
}
