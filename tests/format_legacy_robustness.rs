//! No panic on bad legacy input, nor on bad gzip and snappy payloads. Small legacy messages
//! (the kafka-python fixtures, every codec) and the foreign v2 gzip and snappy batches are
//! truncated at every length and have every bit flipped: each outcome is `Ok` or a typed error,
//! and flips the CRC covers are all caught by it. The same changes re-sealed with a fresh CRC
//! reach the decompressors and the message parsers; and garbage inside a wrapper's
//! decompressed message set reaches the inner-message parser.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;

use partlog::Corruption;
use partlog::unstable::format::{AnyBatchIter, Batch, BatchIter, crc32c};

/// Legacy messages up to this size are mutated byte by byte (the large ones add time, not
/// coverage).
const SMALL: usize = 400;

fn fixture(dir: &str, name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(dir)
        .join(name);
    std::fs::read(path).unwrap()
}

/// The small outer messages of the legacy fixtures.
fn legacy_samples() -> Vec<(String, Vec<u8>)> {
    let mut samples = Vec::new();
    for name in ["v0.log", "v1.log", "v1_high_offsets.log"] {
        let bytes = fixture("legacy", name);
        for (position, batch) in AnyBatchIter::new(&bytes) {
            let batch = batch.unwrap();
            if batch.total_size() <= SMALL {
                let codec = batch.compression_id();
                samples.push((
                    format!("{name} @ {position} (codec {codec})"),
                    batch.as_bytes().to_vec(),
                ));
            }
        }
    }
    assert!(samples.len() >= 20, "{}", samples.len());
    samples
}

/// The gzip and snappy v2 batches of the foreign fixtures.
fn v2_samples() -> Vec<(String, Vec<u8>)> {
    let mut samples = Vec::new();
    for name in ["kafka_python.log", "kafka_protocol.log", "librdkafka.log"] {
        let bytes = fixture("foreign", name);
        for (position, batch) in BatchIter::new(&bytes) {
            let batch = batch.unwrap();
            let codec = batch.header().compression_id();
            if (codec == 1 || codec == 2) && batch.total_size() <= 2_000 {
                samples.push((
                    format!("{name} @ {position} (codec {codec})"),
                    batch.as_bytes().to_vec(),
                ));
            }
        }
    }
    assert!(samples.len() >= 4, "{}", samples.len());
    samples
}

/// Decodes everything decodable; returns whether the batch was accepted and all its records
/// decoded. Must never panic.
fn exercise(bytes: &[u8]) -> bool {
    let mut all_ok = match Batch::new(bytes) {
        Ok(batch) => {
            let _ = (
                batch.last_offset(),
                batch.next_offset(),
                batch.max_timestamp(),
                batch.timestamp_type(),
            );
            let mut scratch = Vec::new();
            match batch.records(&mut scratch) {
                Ok(records) => {
                    let mut ok = true;
                    for record in records {
                        match record {
                            Ok(record) => {
                                let _ = (record.key, record.value, record.headers().count());
                            }
                            Err(_) => ok = false,
                        }
                    }
                    ok
                }
                Err(_) => false,
            }
        }
        Err(_) => false,
    };
    // Walking the bytes as a file must not panic either.
    for (_, batch) in AnyBatchIter::new(bytes) {
        all_ok &= batch.is_ok();
    }
    all_ok
}

fn no_panic(what: &str, bytes: &[u8]) -> bool {
    catch_unwind(AssertUnwindSafe(|| exercise(bytes)))
        .unwrap_or_else(|_| panic!("panic on {what}: {bytes:02x?}"))
}

/// Rewrites the length and the CRC so that the bytes pass the frame and CRC checks: CRC-32
/// of `[16, end)` for a legacy message, CRC-32C of `[21, end)` for v2.
fn reseal(bytes: &mut [u8]) {
    if bytes.len() < 26 {
        return;
    }
    let length = (bytes.len() - 12) as i32;
    bytes[8..12].copy_from_slice(&length.to_be_bytes());
    match bytes[16] {
        0 | 1 => {
            let crc = crc32fast::hash(&bytes[16..]);
            bytes[12..16].copy_from_slice(&crc.to_be_bytes());
        }
        _ if bytes.len() >= 61 => {
            let crc = crc32c(&bytes[21..]);
            bytes[17..21].copy_from_slice(&crc.to_be_bytes());
        }
        _ => {}
    }
}

fn all_samples() -> Vec<(String, Vec<u8>)> {
    let mut samples = legacy_samples();
    samples.extend(v2_samples());
    samples
}

#[test]
fn samples_decode_exactly_when_their_codec_is_readable() {
    for (name, bytes) in all_samples() {
        let decoded = no_panic(&name, &bytes);
        let batch = Batch::new(&bytes).unwrap();
        let readable = partlog::Compression::from_id(batch.compression_id())
            .is_ok_and(partlog::Compression::is_readable);
        assert_eq!(decoded, readable, "{name}");
        // A legacy wrapper's first offset is inside its compressed set; v2's is in the header.
        assert_eq!(
            batch.base_offset(&mut Vec::new()).is_ok(),
            readable || batch.magic() == 2,
            "{name}"
        );
    }
}

#[test]
fn every_truncation_is_a_typed_error() {
    for (name, bytes) in all_samples() {
        for len in 0..bytes.len() {
            let cut = &bytes[..len];
            assert!(!no_panic(&format!("{name} cut at {len}"), cut));
            let needed = if len < 17 { 17 } else { bytes.len() as u64 };
            assert_eq!(
                Batch::new(cut).unwrap_err(),
                Corruption::Truncated {
                    needed,
                    available: len as u64
                },
                "{name} cut at {len}"
            );
            // As a file tail, a cut batch is a remainder, not an error.
            let mut walk = AnyBatchIter::new(cut);
            assert!(walk.next().is_none());
            assert_eq!(walk.remainder().len(), len);
        }
    }
}

#[test]
fn every_bit_flip_is_handled_and_covered_flips_fail_the_crc() {
    for (name, bytes) in all_samples() {
        let legacy = bytes[16] < 2;
        let crc_from = if legacy { 16 } else { 21 };
        for byte in 0..bytes.len() {
            for bit in 0..8 {
                let mut flipped = bytes.clone();
                flipped[byte] ^= 1 << bit;
                let what = format!("{name}, bit {bit} of byte {byte}");
                no_panic(&what, &flipped);
                let result = Batch::new(&flipped);
                match byte {
                    // The offset (and v2's leader epoch) are outside the CRC, by design.
                    0..=7 => assert!(result.is_ok(), "{what}"),
                    12..=15 if !legacy => assert!(result.is_ok(), "{what}"),
                    // The length: the frame no longer fits.
                    8..=11 => assert!(
                        matches!(
                            result,
                            Err(Corruption::Truncated { .. }
                                | Corruption::BadBatchLength(_)
                                | Corruption::BadHeader(_))
                        ),
                        "{what}: {result:?}"
                    ),
                    // The magic: another format, or a CRC that no longer matches.
                    16 => assert!(result.is_err(), "{what}"),
                    _ if byte >= crc_from || legacy => assert!(
                        matches!(result, Err(Corruption::CrcMismatch { .. })),
                        "{what}: {result:?}"
                    ),
                    _ => assert!(result.is_err(), "{what}"),
                }
            }
        }
    }
}

#[test]
fn resealed_garbage_never_panics_the_decoders() {
    let mut rejected = 0usize;
    let mut cases = 0usize;
    for (name, bytes) in all_samples() {
        let crc_from = if bytes[16] < 2 { 17 } else { 21 };
        for byte in crc_from..bytes.len() {
            // A few changes per byte: decompressing garbage is slow in debug builds.
            let mut variants = Vec::new();
            for bit in [0, 4, 7] {
                let mut flipped = bytes.clone();
                flipped[byte] ^= 1 << bit;
                variants.push(flipped);
            }
            for value in [0x00, 0xff] {
                let mut replaced = bytes.clone();
                replaced[byte] = value;
                variants.push(replaced);
            }
            for mut variant in variants {
                reseal(&mut variant);
                cases += 1;
                if !no_panic(&format!("{name}, resealed change at byte {byte}"), &variant) {
                    rejected += 1;
                }
            }
        }
    }
    // Both paths ran: changed keys, values and timestamps decode (the CRC guards them), while
    // broken lengths, codecs and compressed streams are rejected.
    assert!(
        rejected > cases / 10 && rejected < cases,
        "{rejected} of {cases} rejected"
    );
}

/// A legacy message, laid out as Kafka does, with a correct CRC-32.
fn message(
    magic: u8,
    offset: i64,
    attributes: u8,
    timestamp: i64,
    key: Option<&[u8]>,
    value: &[u8],
) -> Vec<u8> {
    let mut body = vec![magic, attributes];
    if magic == 1 {
        body.extend_from_slice(&timestamp.to_be_bytes());
    }
    match key {
        Some(key) => {
            body.extend_from_slice(&(key.len() as i32).to_be_bytes());
            body.extend_from_slice(key);
        }
        None => body.extend_from_slice(&(-1i32).to_be_bytes()),
    }
    body.extend_from_slice(&(value.len() as i32).to_be_bytes());
    body.extend_from_slice(value);
    let mut out = offset.to_be_bytes().to_vec();
    out.extend_from_slice(&((body.len() + 4) as i32).to_be_bytes());
    out.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// An lz4 wrapper (every build reads lz4) around `inner`, Kafka's frame with a correct header
/// checksum.
fn lz4_wrapper(magic: u8, offset: i64, inner: &[u8]) -> Vec<u8> {
    use lz4_flex::frame::{BlockMode, FrameEncoder, FrameInfo};
    use std::io::Write;
    let mut encoder = FrameEncoder::with_frame_info(
        FrameInfo::new().block_mode(BlockMode::Independent),
        Vec::new(),
    );
    encoder.write_all(inner).unwrap();
    let frame = encoder.finish().unwrap();
    message(magic, offset, 3, 1_000, None, &frame)
}

#[test]
fn garbage_inside_a_wrapper_never_panics_the_inner_parser() {
    let mut rejected = 0usize;
    let mut cases = 0usize;
    for magic in [0u8, 1] {
        let mut inner = message(magic, 0, 0, 10, Some(b"key"), b"first value");
        inner.extend(message(magic, 1, 0, 11, None, b""));
        inner.extend(message(magic, 2, 8, 12, Some(b""), b"third"));
        let wrapper = lz4_wrapper(magic, 2, &inner);
        assert!(no_panic("clean wrapper", &wrapper), "magic {magic}");
        for byte in 0..inner.len() {
            for change in [0x01u8, 0x02, 0x10, 0x80, 0xff] {
                let mut bad = inner.clone();
                bad[byte] ^= change;
                // Raw, and with every inner CRC made right again where the framing allows.
                let mut resealed = bad.clone();
                let mut at = 0;
                while let Some(size) = resealed
                    .get(at + 8..at + 12)
                    .map(|s| i32::from_be_bytes(s.try_into().unwrap()))
                {
                    let end = at + 12 + usize::try_from(size).unwrap_or(usize::MAX / 2);
                    if size < 14 || end > resealed.len() {
                        break;
                    }
                    let crc = crc32fast::hash(&resealed[at + 16..end]);
                    resealed[at + 12..at + 16].copy_from_slice(&crc.to_be_bytes());
                    at = end;
                }
                for set in [bad, resealed] {
                    let wrapped = lz4_wrapper(magic, 2, &set);
                    cases += 1;
                    if !no_panic(&format!("magic {magic}, inner byte {byte}"), &wrapped) {
                        rejected += 1;
                    }
                }
            }
        }
    }
    assert!(
        rejected > cases / 2 && rejected < cases,
        "{rejected} of {cases} rejected"
    );
}
