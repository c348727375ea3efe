//! No panic on any input. Small batches of every codec (and a control batch) are truncated at
//! every length and have every bit flipped; every outcome must be `Ok` or a typed error. Flips
//! inside the CRC-covered range must all be caught by `BatchView::new`. Then the same flips are
//! re-sealed with a fresh CRC, so that the record decoder and the decompressors themselves see
//! the garbage.

use std::panic::{AssertUnwindSafe, catch_unwind};

use partlog::Corruption;
use partlog::unstable::format::{
    BatchBuilder, BatchIter, BatchView, Compression, ControlRecordType, EndTransactionMarker,
    build_control_batch, control_record_type, crc32c,
};

/// Bytes `[0, 21)` hold offset, length, epoch, magic and the CRC itself; the CRC covers the rest.
const CRC_COVERED_FROM: usize = 21;

fn sample_batches() -> Vec<(String, Vec<u8>)> {
    let mut batches = Vec::new();
    for codec in [Compression::None, Compression::Lz4, Compression::Zstd] {
        let mut builder = BatchBuilder::new(codec)
            .base_offset(1000)
            .producer(77, 2, 40);
        builder.push_parts(
            1_700_000_000_000,
            Some(b"key-0"),
            Some(b"value value value"),
            &[("trace", Some(&b"t-1"[..])), ("empty", None)],
        );
        builder.push_parts::<&str>(1_699_999_999_990, None, None, &[]);
        builder.push_parts(
            1_700_000_000_007,
            Some(b""),
            Some(b"x"),
            &[("h", Some(&b""[..]))],
        );
        batches.push((format!("{codec}"), builder.build().unwrap()));
    }
    let mut log_append = BatchBuilder::new(Compression::None).log_append_time(123);
    log_append.push_parts::<&str>(5, Some(b"a"), Some(b"b"), &[]);
    batches.push(("log-append-time".into(), log_append.build().unwrap()));
    batches.push((
        "commit-marker".into(),
        build_control_batch(ControlRecordType::Commit, 9, 1, 7, 55, 1_700_000_000_000),
    ));
    batches
}

/// Decodes everything decodable; returns whether the batch was accepted and all its records
/// decoded. Must never panic.
fn exercise(bytes: &[u8]) -> bool {
    let Ok(view) = BatchView::new(bytes) else {
        return false;
    };
    let header = *view.header();
    let _ = (
        header.compression(),
        header.last_offset(),
        header.next_offset(),
        header.last_sequence(),
        header.delete_horizon_ms(),
    );
    let mut scratch = Vec::new();
    let Ok(records) = view.records(&mut scratch) else {
        return false;
    };
    let mut all_ok = true;
    for record in records {
        match record {
            Ok(record) => {
                for header in record.headers() {
                    let _ = header.key_str();
                }
                if view.header().is_control() {
                    let _ = control_record_type(&record);
                    let _ = EndTransactionMarker::parse(&record);
                }
            }
            Err(_) => all_ok = false,
        }
    }
    // Walking the bytes as a file must not panic either.
    for (_, batch) in BatchIter::new(bytes) {
        let _ = batch;
    }
    all_ok
}

fn no_panic(what: &str, bytes: &[u8]) -> bool {
    catch_unwind(AssertUnwindSafe(|| exercise(bytes)))
        .unwrap_or_else(|_| panic!("panic on {what}: {bytes:02x?}"))
}

/// Rewrites batchLength and the CRC so that the bytes pass the frame and CRC checks.
fn reseal(bytes: &mut [u8]) {
    if bytes.len() < 61 {
        return;
    }
    let length = (bytes.len() - 12) as i32;
    bytes[8..12].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c(&bytes[CRC_COVERED_FROM..]);
    bytes[17..21].copy_from_slice(&crc.to_be_bytes());
}

#[test]
fn samples_are_valid() {
    for (name, batch) in sample_batches() {
        assert!(no_panic(&name, &batch), "{name} must decode");
    }
}

#[test]
fn every_truncation_is_a_typed_error() {
    for (name, batch) in sample_batches() {
        for len in 0..batch.len() {
            let cut = &batch[..len];
            assert!(!no_panic(&format!("{name} cut at {len}"), cut));
            let error = BatchView::new(cut).unwrap_err();
            let needed = if len < 17 { 17 } else { batch.len() as u64 };
            assert_eq!(
                error,
                Corruption::Truncated {
                    needed,
                    available: len as u64
                },
                "{name} cut at {len}"
            );
            // As a file tail, a cut batch is a remainder, not an error.
            let mut walk = BatchIter::new(cut);
            assert!(walk.next().is_none());
            assert_eq!(walk.remainder().len(), len);
        }
    }
}

#[test]
fn every_bit_flip_is_handled_and_covered_flips_fail_the_crc() {
    for (name, batch) in sample_batches() {
        for byte in 0..batch.len() {
            for bit in 0..8 {
                let mut flipped = batch.clone();
                flipped[byte] ^= 1 << bit;
                let what = format!("{name}, bit {bit} of byte {byte}");
                let accepted = no_panic(&what, &flipped);
                let result = BatchView::new(&flipped);
                match byte {
                    // baseOffset and partitionLeaderEpoch are outside the CRC, by design.
                    0..=7 | 12..=15 => assert!(accepted, "{what}"),
                    // batchLength and magic: the frame no longer fits.
                    8..=11 => assert!(
                        matches!(
                            result,
                            Err(Corruption::Truncated { .. }
                                | Corruption::BadBatchLength(_)
                                | Corruption::BadHeader(_))
                        ),
                        "{what}: {result:?}"
                    ),
                    16 => assert!(matches!(result, Err(Corruption::BadMagic(_))), "{what}"),
                    _ => assert!(
                        matches!(result, Err(Corruption::CrcMismatch { .. })),
                        "{what}: {result:?}"
                    ),
                }
            }
        }
    }
}

#[test]
fn resealed_garbage_never_panics_the_decoders() {
    let mut rejected = 0usize;
    let mut cases = 0usize;
    for (name, batch) in sample_batches() {
        for byte in CRC_COVERED_FROM..batch.len() {
            let mut variants = Vec::new();
            for bit in 0..8 {
                let mut flipped = batch.clone();
                flipped[byte] ^= 1 << bit;
                variants.push(flipped);
            }
            for value in [0x00, 0xff, 0x80, 0x7f] {
                let mut replaced = batch.clone();
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
    // Both paths were exercised: changed header fields, keys and values decode (the CRC is what
    // guards them), while broken lengths, varints, codecs and counts are rejected.
    assert!(
        rejected > cases / 5 && rejected < cases,
        "{rejected} of {cases} rejected"
    );
}

#[test]
fn a_short_records_section_is_always_an_error() {
    for (name, batch) in sample_batches() {
        for len in 61..batch.len() {
            let mut cut = batch[..len].to_vec();
            reseal(&mut cut);
            let what = format!("{name}, records section cut to {} bytes", len - 61);
            assert!(!no_panic(&what, &cut), "{what} decoded without error");
        }
    }
}
