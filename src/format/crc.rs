//! CRC-32C (Castagnoli), the checksum of a v2 batch.
//!
//! Polynomial 0x1EDC6F41 (reflected 0x82F63B78), initial value 0xFFFFFFFF, final xor
//! 0xFFFFFFFF: the checksum of iSCSI and ext4, which current x86 and ARM CPUs compute in
//! hardware. The `crc32c` crate uses those instructions when present, so a batch is checked in
//! one pass over one contiguous slice, never byte by byte.

/// CRC-32C of `bytes`, as stored in a v2 batch header at offset 17 (over bytes `[21, end)`).
#[inline]
pub fn crc32c(bytes: &[u8]) -> u32 {
    ::crc32c::crc32c(bytes)
}

/// CRC-32C of the bytes `crc` covered followed by `bytes`: a checksum computed in parts.
#[inline]
pub fn crc32c_append(crc: u32, bytes: &[u8]) -> u32 {
    ::crc32c::crc32c_append(crc, bytes)
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
