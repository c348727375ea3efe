//! gzip (codec 1), read-only: RFC 1952 as `java.util.zip.GZIPOutputStream` writes it.
//!
//! Kafka wraps the records of a gzip batch (v2) or the inner message set of a gzip wrapper
//! (magic 0 and 1) in one gzip stream. Java's reader accepts several concatenated members, so
//! this one does too. Each member's CRC-32 and length trailer is checked by flate2.
//!
//! One difference from Java: `GZIPInputStream` silently ignores bytes after the last member
//! that do not form a gzip header; here they are corruption, since no Kafka writer produces
//! them and the batch CRC would have covered them as written.

use std::io::Read;

use flate2::bufread::MultiGzDecoder;

use crate::error::Corruption;

/// Appends the plaintext of the gzip stream `payload` to `out`, failing if `out` would grow
/// beyond `limit` bytes.
pub(crate) fn decompress(
    payload: &[u8],
    out: &mut Vec<u8>,
    limit: usize,
) -> Result<(), Corruption> {
    let start = out.len();
    let budget = limit.saturating_sub(start);
    // One byte over the budget tells "exactly at the limit" from "over it".
    let allowed = u64::try_from(budget).unwrap_or(u64::MAX).saturating_add(1);
    let mut decoder = MultiGzDecoder::new(payload).take(allowed);
    match decoder.read_to_end(out) {
        Ok(_) if out.len() - start > budget => Err(Corruption::BadCompression(
            "gzip: decompressed size exceeds the limit".into(),
        )),
        Ok(_) => Ok(()),
        Err(error) => Err(Corruption::BadCompression(format!("gzip: {error}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(data).unwrap();
        encoder.finish().unwrap()
    }

    #[test]
    fn reads_one_and_several_members() {
        let text = b"records records records".repeat(100);
        let member = gzip(&text);
        let mut out = vec![9];
        decompress(&member, &mut out, usize::MAX).unwrap();
        assert_eq!(out[0], 9, "appends");
        assert_eq!(&out[1..], &text[..]);

        let mut two = member.clone();
        two.extend_from_slice(&gzip(b"tail"));
        let mut out = Vec::new();
        decompress(&two, &mut out, usize::MAX).unwrap();
        assert_eq!(out.len(), text.len() + 4);
        assert!(out.ends_with(b"tail"));
    }

    #[test]
    fn rejects_truncation_trailing_bytes_and_empty_input() {
        let member = gzip(b"some records");
        for len in 0..member.len() {
            assert!(
                decompress(&member[..len], &mut Vec::new(), usize::MAX).is_err(),
                "{len}"
            );
        }
        let mut trailing = member.clone();
        trailing.push(0);
        assert!(decompress(&trailing, &mut Vec::new(), usize::MAX).is_err());
        // A flipped bit in the deflate data or the trailer fails the member's CRC-32 or length.
        let mut flipped = member.clone();
        let last = flipped.len() - 1;
        flipped[last - 5] ^= 0x10;
        assert!(decompress(&flipped, &mut Vec::new(), usize::MAX).is_err());
    }

    #[test]
    fn limit_is_enforced() {
        let zeros = gzip(&[0u8; 10_000]);
        assert!(decompress(&zeros, &mut Vec::new(), 9_999).is_err());
        assert!(decompress(&zeros, &mut Vec::new(), 10_000).is_ok());
    }
}
