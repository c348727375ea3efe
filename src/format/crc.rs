//! CRC-32C (Castagnoli), the checksum of a v2 batch.
//!
//! Polynomial 0x1EDC6F41 (reflected 0x82F63B78), initial value 0xFFFFFFFF, final xor
//! 0xFFFFFFFF: the checksum of iSCSI and ext4, which current x86 and ARM CPUs compute in
//! hardware. The `crc32c` crate uses those instructions when present, so a batch is checked in
//! one pass over one contiguous slice, never byte by byte.
//!
//! Short inputs take a loop of our own on x86-64. Most batches a log of small records holds are
//! 70 to 300 bytes, and below 768 bytes the crate runs the same serial chain of 8-byte CRC
//! instructions, but first aligns the slice one byte at a time and ends it the same way: up to
//! 14 single-byte steps around some 18 eight-byte ones for a 1-record batch of a 100 B value.
//! Unaligned 8-byte loads cost nothing extra on x86-64, so the loop here takes the slice as it
//! comes and ends with one 4-byte step and at most three single bytes. For 108 and 149 bytes it
//! runs in 11 and 15 ns against the crate's 29 and 31 (a loop over 2 million slices at varying
//! alignments, both in one run). From 768 bytes the crate interleaves three chains, which the
//! CPU runs in parallel, and it is used there. (The crate also called its interleaved step on
//! an empty slice for every short input.) In a sequential read of 1-record batches of 100 B
//! values the checksum went from 185 to 77 instructions a batch, and the whole read from 670 to
//! 577 a record (callgrind).

/// From this length the crate's three interleaved chains are used; below it, the serial loop.
#[cfg(target_arch = "x86_64")]
const INTERLEAVED_FROM: usize = 768;

/// CRC-32C of `bytes`, as stored in a v2 batch header at offset 17 (over bytes `[21, end)`).
#[inline]
pub fn crc32c(bytes: &[u8]) -> u32 {
    crc32c_append(0, bytes)
}

/// CRC-32C of the bytes `crc` covered followed by `bytes`: a checksum computed in parts.
// Small when inlined (a cached feature test and one call), so that the batch checks that call it
// stay small enough to be inlined into the segment walk themselves.
#[inline]
pub fn crc32c_append(crc: u32, bytes: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("sse4.2") {
        // SAFETY: `crc32c_sse42` only needs the SSE 4.2 CRC instructions, and the line above
        // checked at run time that this CPU has them.
        return unsafe { crc32c_sse42(crc, bytes) };
    }
    crc32c_portable(crc, bytes)
}

/// Without the x86-64 CRC instructions: the crate's own choice (ARM's CRC instructions, or
/// tables).
#[inline(never)]
fn crc32c_portable(crc: u32, bytes: &[u8]) -> u32 {
    ::crc32c::crc32c_append(crc, bytes)
}

/// With the x86-64 CRC instructions: the serial loop for short inputs, the crate's
/// interleaved chains for long ones.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
fn crc32c_sse42(crc: u32, bytes: &[u8]) -> u32 {
    if bytes.len() >= INTERLEAVED_FROM {
        return ::crc32c::crc32c_append(crc, bytes);
    }
    serial_sse42(crc, bytes)
}

/// The serial loop: 8 bytes a step, then 4, then single bytes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
#[inline]
fn serial_sse42(crc: u32, bytes: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u8, _mm_crc32_u32, _mm_crc32_u64};
    let mut words = bytes.chunks_exact(8);
    let mut state = u64::from(!crc);
    for word in &mut words {
        let word: [u8; 8] = word.try_into().unwrap_or_default();
        state = _mm_crc32_u64(state, u64::from_le_bytes(word));
    }
    // The 64-bit instruction leaves the 32-bit CRC in the low half.
    let mut state = state as u32;
    let mut rest = words.remainder();
    if let Some((four, tail)) = rest.split_first_chunk::<4>() {
        state = _mm_crc32_u32(state, u32::from_le_bytes(*four));
        rest = tail;
    }
    for &byte in rest {
        state = _mm_crc32_u8(state, byte);
    }
    !state
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checksum_in_parts_is_the_whole_one() {
        let bytes: Vec<u8> = (0..10_000u32).map(|i| (i * 13 % 256) as u8).collect();
        for split in [0, 1, 7, 4096, 9_999, 10_000] {
            let (head, tail) = bytes.split_at(split);
            assert_eq!(crc32c_append(crc32c(head), tail), crc32c(&bytes), "{split}");
        }
    }

    /// The serial loop against the crate, at every length around its steps and the switch to
    /// the crate, from every alignment, alone and appended to a checksum in parts.
    #[test]
    fn the_short_input_loop_agrees_with_the_crate() {
        let bytes: Vec<u8> = (0..2_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for len in (0..40).chain(100..160).chain(760..780) {
            for start in 0..8 {
                let slice = &bytes[start..start + len];
                assert_eq!(
                    crc32c(slice),
                    ::crc32c::crc32c(slice),
                    "len {len} at {start}"
                );
                let seed = ::crc32c::crc32c(&bytes[..start + 3]);
                assert_eq!(
                    crc32c_append(seed, slice),
                    ::crc32c::crc32c_append(seed, slice),
                    "appended, len {len} at {start}"
                );
            }
        }
    }

    use proptest::prelude::*;

    proptest! {
        /// Any bytes, split anywhere: the checksum equals the crate's, whole and in parts
        /// (each part may take either path).
        #[test]
        fn any_bytes_any_split_agree_with_the_crate(
            bytes in proptest::collection::vec(any::<u8>(), 0..1_600),
            split in any::<prop::sample::Index>(),
        ) {
            let whole = ::crc32c::crc32c(&bytes);
            prop_assert_eq!(crc32c(&bytes), whole);
            let (head, tail) = bytes.split_at(split.index(bytes.len() + 1));
            prop_assert_eq!(crc32c_append(crc32c(head), tail), whole);
        }
    }

    /// The sanity vector of Kafka's `Crc32CTest`.
    #[test]
    fn kafka_crc32c_vector() {
        assert_eq!(crc32c(b"Some String"), 608_512_271);
    }

    /// The check value of the Castagnoli CRC from the CRC catalogue.
    #[test]
    fn catalogue_check_value() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(b""), 0);
    }
}
