//! Re-encoding a v2 batch with another codec, every other byte of it kept: how `upgrade` turns a
//! gzip or snappy batch, which partlog reads but never writes, into one it writes.

use super::batch::{BatchView, COMPRESSION_MASK, LOG_OVERHEAD, RECORD_BATCH_OVERHEAD};
use super::builder::seal;
use super::compression::{self, Compression};
use crate::error::{Error, Result};

/// Re-encodes `batch` with `codec`, returning the new batch.
///
/// Every record is decoded first (so that nothing corrupt is carried over under a fresh CRC);
/// then the plaintext records section, byte for byte, is compressed with `codec`. The header
/// keeps every field but the codec bits, `batchLength` and the CRC: the base offset, leader
/// epoch, `lastOffsetDelta` (offset gaps of a compacted batch), both timestamps, the producer
/// id, epoch and base sequence, the record count, and the timestamp-type, transactional,
/// control and delete-horizon bits. So the records keep what no decoded view shows, such as
/// the producer's own timestamps inside a LogAppendTime batch.
///
/// A batch without records (compaction keeps such batches for their producer state) gets an
/// empty records section in `codec`. `scratch` receives the plaintext.
///
/// Fails as [`BatchView::records`] and its iterator do, with [`Error::UnsupportedCompression`]
/// for a target codec partlog does not write (gzip, snappy), and with
/// [`Error::RecordTooLarge`] if the result would not fit a batch.
pub(crate) fn recompress(
    batch: &BatchView<'_>,
    codec: Compression,
    zstd_level: i32,
    scratch: &mut Vec<u8>,
) -> Result<Vec<u8>> {
    if !codec.is_supported() {
        return Err(Error::UnsupportedCompression { codec: codec.id() });
    }
    let mut header = *batch.header();
    let source_codec = header.compression()?;
    for record in batch.records(scratch)? {
        record?;
    }
    // Where the records iterator left the plaintext: in place for an uncompressed batch, in
    // `scratch` for a compressed one, nowhere for a batch without records.
    let plaintext: &[u8] = if header.records_count == 0 {
        &[]
    } else if source_codec == Compression::None {
        batch.payload()
    } else {
        scratch
    };
    let mut out = Vec::with_capacity(RECORD_BATCH_OVERHEAD + plaintext.len() / 2 + 64);
    out.resize(RECORD_BATCH_OVERHEAD, 0);
    compression::compress(codec, plaintext, &mut out, zstd_level)?;
    let Some(batch_length) = out
        .len()
        .checked_sub(LOG_OVERHEAD)
        .and_then(|len| i32::try_from(len).ok())
    else {
        return Err(Error::RecordTooLarge {
            size: out.len() as u64,
            max: i32::MAX as u64,
            limit: crate::error::FORMAT_BATCH_LIMIT,
        });
    };
    header.batch_length = batch_length;
    header.attributes = (header.attributes & !COMPRESSION_MASK) | i16::from(codec.id());
    seal(&mut out, &header);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{BatchBuilder, NewRecord, TimestampType};

    /// A record as a reader sees it: offset, timestamp, value and header count.
    type Seen = (i64, i64, Option<Vec<u8>>, usize);

    /// What a reader sees of a batch: the header minus codec, length and CRC, and each record.
    fn observed(bytes: &[u8]) -> (Vec<i64>, Vec<Seen>) {
        let view = BatchView::new(bytes).unwrap();
        let h = *view.header();
        let header = vec![
            h.base_offset,
            i64::from(h.partition_leader_epoch),
            i64::from(h.attributes & !COMPRESSION_MASK),
            i64::from(h.last_offset_delta),
            h.base_timestamp,
            h.max_timestamp,
            h.producer_id,
            i64::from(h.producer_epoch),
            i64::from(h.base_sequence),
            i64::from(h.records_count),
        ];
        let mut scratch = Vec::new();
        let records = view
            .records(&mut scratch)
            .unwrap()
            .map(|r| {
                let r = r.unwrap();
                (
                    r.offset,
                    r.timestamp,
                    r.value.map(<[u8]>::to_vec),
                    r.header_count(),
                )
            })
            .collect();
        (header, records)
    }

    fn source() -> Vec<u8> {
        let mut builder = BatchBuilder::new(Compression::Lz4)
            .base_offset(1_000)
            .partition_leader_epoch(7)
            .producer(42, 3, 17)
            .transactional(true)
            .log_append_time(1_700_000_000_500)
            .last_offset_delta(9);
        for (offset, value) in [(1_000, &b"a"[..]), (1_004, b"bb"), (1_006, b"ccc")] {
            let record = NewRecord::new(1_700_000_000_000 + offset, None, Some(value))
                .with_header("h", Some(b"v"));
            let bytes = {
                let mut single = BatchBuilder::new(Compression::None).base_offset(offset);
                single.push(&record);
                single.build().unwrap()
            };
            let view = BatchView::new(&bytes).unwrap();
            let mut scratch = Vec::new();
            let decoded = view.records(&mut scratch).unwrap().next().unwrap().unwrap();
            builder.push_record_at_offset(&decoded);
        }
        builder.build().unwrap()
    }

    #[test]
    fn every_field_but_the_codec_survives_each_target() {
        let source = source();
        let before = observed(&source);
        assert_eq!(before.1.len(), 3);
        for codec in [Compression::None, Compression::Lz4, Compression::Zstd] {
            let mut scratch = Vec::new();
            let view = BatchView::new(&source).unwrap();
            let out = recompress(&view, codec, 3, &mut scratch).unwrap();
            let view = BatchView::new(&out).unwrap();
            assert_eq!(view.header().compression().unwrap(), codec);
            assert_eq!(view.header().timestamp_type(), TimestampType::LogAppendTime);
            assert_eq!(observed(&out), before, "{codec}");
        }
    }

    #[test]
    fn the_raw_records_are_kept_byte_for_byte() {
        let source = source();
        let mut scratch = Vec::new();
        let view = BatchView::new(&source).unwrap();
        let out = recompress(&view, Compression::None, 3, &mut scratch).unwrap();
        let mut plain = Vec::new();
        crate::format::compression::decompress(Compression::Lz4, view.payload(), &mut plain)
            .unwrap();
        assert_eq!(out.get(RECORD_BATCH_OVERHEAD..).unwrap(), plain.as_slice());
    }

    #[test]
    fn gzip_and_snappy_are_not_targets() {
        let source = source();
        let view = BatchView::new(&source).unwrap();
        for codec in [Compression::Gzip, Compression::Snappy] {
            assert!(matches!(
                recompress(&view, codec, 3, &mut Vec::new()),
                Err(Error::UnsupportedCompression { .. })
            ));
        }
    }

    #[test]
    fn a_batch_without_records_stays_one() {
        let source = source();
        let mut header = *BatchView::new(&source).unwrap().header();
        header.records_count = 0;
        header.attributes &= !COMPRESSION_MASK;
        header.batch_length = (RECORD_BATCH_OVERHEAD - LOG_OVERHEAD) as i32;
        let mut empty = vec![0u8; RECORD_BATCH_OVERHEAD];
        seal(&mut empty, &header);
        let view = BatchView::new(&empty).unwrap();
        let out = recompress(&view, Compression::Zstd, 3, &mut Vec::new()).unwrap();
        let view = BatchView::new(&out).unwrap();
        assert_eq!(view.header().records_count, 0);
        assert_eq!(view.header().last_offset(), 1_009);
        assert_eq!(view.records(&mut Vec::new()).unwrap().count(), 0);
    }
}
