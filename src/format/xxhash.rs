//! XXH32, the checksum inside the LZ4 frame format.
//!
//! Kafka's LZ4 frames carry an XXH32-derived header checksum byte (HC), and optionally an XXH32
//! per block. lz4_flex hashes internally but does not export a hasher, so the ~40 lines of the
//! published algorithm live here. Little-endian lanes, as the LZ4 spec demands.

const PRIME1: u32 = 0x9E37_79B1;
const PRIME2: u32 = 0x85EB_CA77;
const PRIME3: u32 = 0xC2B2_AE3D;
const PRIME4: u32 = 0x27D4_EB2F;
const PRIME5: u32 = 0x1656_67B1;

/// XXH32 of `input` with `seed`.
pub(crate) fn xxh32(input: &[u8], seed: u32) -> u32 {
    let mut stripes = input.chunks_exact(16);
    let mut acc = if input.len() >= 16 {
        let mut lanes = [
            seed.wrapping_add(PRIME1).wrapping_add(PRIME2),
            seed.wrapping_add(PRIME2),
            seed,
            seed.wrapping_sub(PRIME1),
        ];
        for stripe in &mut stripes {
            for (lane, word) in lanes.iter_mut().zip(stripe.chunks_exact(4)) {
                *lane = round(*lane, le_u32(word));
            }
        }
        let [v1, v2, v3, v4] = lanes;
        v1.rotate_left(1)
            .wrapping_add(v2.rotate_left(7))
            .wrapping_add(v3.rotate_left(12))
            .wrapping_add(v4.rotate_left(18))
    } else {
        seed.wrapping_add(PRIME5)
    };
    // XXH32 folds the length in modulo 2^32 by definition.
    acc = acc.wrapping_add(input.len() as u32);

    let tail = stripes.remainder();
    let mut words = tail.chunks_exact(4);
    for word in &mut words {
        acc = acc
            .wrapping_add(le_u32(word).wrapping_mul(PRIME3))
            .rotate_left(17)
            .wrapping_mul(PRIME4);
    }
    for &byte in words.remainder() {
        acc = acc
            .wrapping_add(u32::from(byte).wrapping_mul(PRIME5))
            .rotate_left(11)
            .wrapping_mul(PRIME1);
    }

    acc ^= acc >> 15;
    acc = acc.wrapping_mul(PRIME2);
    acc ^= acc >> 13;
    acc = acc.wrapping_mul(PRIME3);
    acc ^ (acc >> 16)
}

#[inline]
fn round(lane: u32, word: u32) -> u32 {
    lane.wrapping_add(word.wrapping_mul(PRIME2))
        .rotate_left(13)
        .wrapping_mul(PRIME1)
}

/// Reads a little-endian u32 from a chunk of exactly four bytes (callers use `chunks_exact(4)`).
#[inline]
fn le_u32(word: &[u8]) -> u32 {
    let mut bytes = [0u8; 4];
    bytes.copy_from_slice(word);
    u32::from_le_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Published XXH32 test values (xxHash's sanity checks and the LZ4 frame spec).
    #[test]
    fn known_values() {
        assert_eq!(xxh32(b"", 0), 0x02CC_5D05);
        assert_eq!(xxh32(b"a", 0), 0x550D_7456);
        assert_eq!(xxh32(b"abc", 0), 0x32D1_53FF);
        assert_eq!(
            xxh32(b"Nobody inspects the spammish repetition", 0),
            0xE229_3B2F
        );
        // The LZ4 frame descriptor Kafka writes (FLG 0x60, BD 0x40) has HC byte 0x82.
        assert_eq!((xxh32(&[0x60, 0x40], 0) >> 8) as u8, 0x82);
    }
}
