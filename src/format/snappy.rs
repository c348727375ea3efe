//! snappy (codec 2), read-only: the xerial (snappy-java) stream format Kafka writes, or one
//! raw snappy block, which snappy-java's reader falls back to when the stream header is absent.
//!
//! ```text
//! 82 53 4E 41 50 50 59 00   magic "\x82SNAPPY\0"
//! i32 version, i32 minimum compatible version (both 1 as snappy-java writes them)
//! then chunks:  i32 length | raw snappy block (snappy-java compresses 32 KiB per block)
//! ```
//!
//! All lengths are big-endian. As in snappy-java's `SnappyInputStream`: a payload that does not
//! start with the 8-byte magic (or is shorter than the 16-byte header) is one raw snappy block;
//! a version below 1 is rejected; the compatible-version field is not checked (kafka-python
//! notes that some writers store both fields little-endian); and a stream header in place of a
//! chunk length starts a concatenated stream. Unlike snappy-java, which stops reading quietly at
//! a chunk it cannot finish, a short chunk here is corruption.

use crate::error::Corruption;

/// The first 8 bytes of snappy-java's stream header.
const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
/// Magic, version and compatible version.
const XERIAL_HEADER_LEN: usize = 16;
/// Snappy's densest element is a 3-byte copy of 64 bytes; no valid block expands further, so a
/// block that claims more is rejected before any buffer is reserved for it.
const MAX_EXPANSION: usize = 22;

fn bad(why: &str) -> Corruption {
    Corruption::BadCompression(format!("snappy: {why}"))
}

/// Appends the plaintext of `payload` (a xerial stream, or one raw snappy block) to `out`,
/// failing if `out` would grow beyond `limit` bytes.
pub(crate) fn decompress(
    payload: &[u8],
    out: &mut Vec<u8>,
    limit: usize,
) -> Result<(), Corruption> {
    if payload.len() < XERIAL_HEADER_LEN || !payload.starts_with(&XERIAL_MAGIC) {
        return decompress_block(payload, out, limit);
    }
    let mut rest = payload;
    while !rest.is_empty() {
        if rest.starts_with(&XERIAL_MAGIC) {
            let version = rest
                .get(8..12)
                .and_then(|bytes| <[u8; 4]>::try_from(bytes).ok())
                .map(i32::from_be_bytes)
                .ok_or_else(|| bad("truncated stream header"))?;
            if version < 1 {
                return Err(bad("stream header version below 1"));
            }
            rest = rest
                .get(XERIAL_HEADER_LEN..)
                .ok_or_else(|| bad("truncated stream header"))?;
            continue;
        }
        let length = rest
            .get(..4)
            .and_then(|bytes| <[u8; 4]>::try_from(bytes).ok())
            .map(i32::from_be_bytes)
            .ok_or_else(|| bad("truncated chunk length"))?;
        let length = usize::try_from(length).map_err(|_| bad("negative chunk length"))?;
        let chunk = 4usize
            .checked_add(length)
            .and_then(|end| rest.get(4..end))
            .ok_or_else(|| bad("chunk runs past the end of the payload"))?;
        decompress_block(chunk, out, limit)?;
        rest = rest.get(4 + length..).unwrap_or_default();
    }
    Ok(())
}

/// Appends the plaintext of one raw snappy block to `out`.
fn decompress_block(block: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), Corruption> {
    let declared = snap::raw::decompress_len(block).map_err(|error| bad(&error.to_string()))?;
    if declared > block.len().saturating_mul(MAX_EXPANSION) {
        return Err(bad(
            "block claims more plaintext than snappy can encode in its size",
        ));
    }
    let start = out.len();
    if declared > limit.saturating_sub(start) {
        return Err(bad("decompressed size exceeds the limit"));
    }
    out.resize(start + declared, 0);
    let target = out.get_mut(start..).unwrap_or_default();
    match snap::raw::Decoder::new().decompress(block, target) {
        Ok(written) if written == declared => Ok(()),
        Ok(_) => {
            out.truncate(start);
            Err(bad("block decompresses to another length than it declares"))
        }
        Err(error) => {
            out.truncate(start);
            Err(bad(&error.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A xerial stream as snappy-java writes it, with `block` bytes of plaintext per chunk.
    fn xerial(data: &[u8], block: usize) -> Vec<u8> {
        let mut out = XERIAL_MAGIC.to_vec();
        out.extend_from_slice(&1i32.to_be_bytes());
        out.extend_from_slice(&1i32.to_be_bytes());
        for chunk in data.chunks(block) {
            let compressed = snap::raw::Encoder::new().compress_vec(chunk).unwrap();
            out.extend_from_slice(&(compressed.len() as i32).to_be_bytes());
            out.extend_from_slice(&compressed);
        }
        out
    }

    #[test]
    fn reads_xerial_streams_raw_blocks_and_concatenations() {
        let text: Vec<u8> = (0..100_000u32).map(|i| (i % 97) as u8).collect();
        let stream = xerial(&text, 32 * 1024);
        let mut out = vec![7];
        decompress(&stream, &mut out, usize::MAX).unwrap();
        assert_eq!(&out[1..], &text[..]);

        let raw = snap::raw::Encoder::new().compress_vec(&text).unwrap();
        let mut out = Vec::new();
        decompress(&raw, &mut out, usize::MAX).unwrap();
        assert_eq!(out, text);

        let mut two = stream.clone();
        two.extend_from_slice(&xerial(b"more", 32));
        let mut out = Vec::new();
        decompress(&two, &mut out, usize::MAX).unwrap();
        assert_eq!(out.len(), text.len() + 4);

        // A header with no chunks is an empty stream.
        let mut out = Vec::new();
        decompress(&xerial(b"", 32), &mut out, usize::MAX).unwrap();
        assert!(out.is_empty());
    }

    #[test]
    fn rejects_bad_framing() {
        let text = b"some records, some records, some records";
        let stream = xerial(text, 16);
        // Cut at a chunk boundary the stream is valid and shorter; anywhere else it is corrupt.
        let mut boundaries = vec![XERIAL_HEADER_LEN];
        let mut at = XERIAL_HEADER_LEN;
        while at < stream.len() {
            at += 4 + i32::from_be_bytes(stream[at..at + 4].try_into().unwrap()) as usize;
            boundaries.push(at);
        }
        assert_eq!(boundaries.len(), 4, "three chunks");
        for len in XERIAL_HEADER_LEN..stream.len() {
            let mut out = Vec::new();
            let result = decompress(&stream[..len], &mut out, usize::MAX);
            if boundaries.contains(&len) {
                assert!(text.starts_with(&out), "{len}");
            } else {
                assert!(result.is_err(), "{len}");
            }
        }
        let mut version_zero = stream.clone();
        version_zero[11] = 0;
        assert!(decompress(&version_zero, &mut Vec::new(), usize::MAX).is_err());
        let mut negative = stream.clone();
        negative[16] = 0x80;
        assert!(decompress(&negative, &mut Vec::new(), usize::MAX).is_err());
        // A raw block that claims 4 GiB from a few bytes.
        assert!(
            decompress(
                &[0xff, 0xff, 0xff, 0xff, 0x0f, 0],
                &mut Vec::new(),
                usize::MAX
            )
            .is_err()
        );
        assert!(decompress(&[], &mut Vec::new(), usize::MAX).is_err());
    }

    #[test]
    fn limit_is_enforced() {
        let stream = xerial(&[1u8; 10_000], 4096);
        assert!(decompress(&stream, &mut Vec::new(), 9_999).is_err());
        assert!(decompress(&stream, &mut Vec::new(), 10_000).is_ok());
    }
}
