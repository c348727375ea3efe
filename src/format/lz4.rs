//! Kafka's LZ4 framing: the LZ4 frame format (v1.5.1) exactly as Kafka writes and reads it.
//!
//! The compressed records of an lz4 batch (codec 3) are one LZ4 *frame*, little-endian inside:
//!
//! ```text
//! 04 22 4D 18   magic 0x184D2204
//! 60            FLG: version 01, blocks independent, no block checksum, no content size,
//!               no content checksum
//! 40            BD: largest block 64 KiB (id 4)
//! 82            HC: (xxh32(FLG BD, seed 0) >> 8) & 0xFF
//! then blocks:  u32 size (high bit set = stored uncompressed) + data [+ u32 xxh32 of the data]
//! 00 00 00 00   end mark
//! ```
//!
//! partlog writes exactly Kafka's header, so every lz4 payload starts `04 22 4D 18 60 40 82`, and
//! stores a block uncompressed when compression would not shrink it, as Kafka does.
//!
//! The same frame wraps a legacy lz4 wrapper's message set, with one quirk: Kafka 0.8 and 0.9
//! computed HC over the frame magic too, so for magic 0 Kafka's reader skips the HC check
//! ([`HeaderChecksum::IgnoreForMagic0`]).
//!
//! The frame envelope is written and parsed here, with lz4_flex's *block* codec doing the
//! (de)compression, rather than through lz4_flex's frame module. Three reasons: the reader must
//! accept exactly what Kafka's `Lz4BlockInputStream` accepts (it rejects linked blocks and the
//! dictionary-id bit, which lz4_flex accepts, and does not verify content checksums, which
//! lz4_flex does); blocks decompress straight into the caller's scratch buffer and compress
//! straight into the output batch, with no intermediate copies; and every length in the envelope
//! is checked here against the bytes present, so corrupt input is an error, never a panic.

use super::xxhash::xxh32;
use crate::error::Corruption;

/// The first seven bytes of every LZ4 payload Kafka (and partlog) writes.
pub const KAFKA_LZ4_FRAME_HEADER: [u8; 7] = [0x04, 0x22, 0x4D, 0x18, 0x60, 0x40, 0x82];

const MAGIC: u32 = 0x184D_2204;
/// Largest block partlog writes: BD id 4, as Kafka.
const WRITE_BLOCK_SIZE: usize = 64 * 1024;
/// Block-size word flag: the block is stored, not compressed.
const UNCOMPRESSED_BIT: u32 = 0x8000_0000;

const FLG_VERSION_MASK: u8 = 0b1100_0000;
const FLG_VERSION_01: u8 = 0b0100_0000;
const FLG_BLOCK_INDEPENDENCE: u8 = 0b0010_0000;
const FLG_BLOCK_CHECKSUM: u8 = 0b0001_0000;
const FLG_CONTENT_SIZE: u8 = 0b0000_1000;
const FLG_CONTENT_CHECKSUM: u8 = 0b0000_0100;
/// Bit 1 is reserved and bit 0 is the dictionary id; Kafka treats both as reserved (must be 0).
const FLG_RESERVED: u8 = 0b0000_0011;
const BD_RESERVED: u8 = 0b1000_1111;

/// Appends `input` to `out` as one Kafka-style LZ4 frame.
pub(crate) fn compress_frame(input: &[u8], out: &mut Vec<u8>) -> Result<(), Corruption> {
    out.extend_from_slice(&KAFKA_LZ4_FRAME_HEADER);
    for block in input.chunks(WRITE_BLOCK_SIZE) {
        let size_at = out.len();
        let data_at = size_at + 4;
        out.resize(
            data_at + lz4_flex::block::get_maximum_output_size(block.len()),
            0,
        );
        let target = out.get_mut(data_at..).unwrap_or_default();
        let compressed_len = lz4_flex::block::compress_into(block, target)
            .map_err(|err| Corruption::BadCompression(format!("lz4 compression failed: {err}")))?;
        let size_word = if compressed_len < block.len() {
            out.truncate(data_at + compressed_len);
            compressed_len as u32
        } else {
            // Incompressible: store it, as Kafka's Lz4BlockOutputStream does.
            out.truncate(data_at);
            out.extend_from_slice(block);
            block.len() as u32 | UNCOMPRESSED_BIT
        };
        if let Some(slot) = out.get_mut(size_at..data_at) {
            slot.copy_from_slice(&size_word.to_le_bytes());
        }
    }
    out.extend_from_slice(&0u32.to_le_bytes());
    Ok(())
}

/// Whether the frame descriptor's checksum byte (HC) is verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeaderChecksum {
    /// Verify it: every frame of magic 1 and 2.
    Verify,
    /// Skip it: Kafka's writer for magic 0 (0.8 to 0.9) hashed the 4 magic bytes too, so its HC
    /// byte is wrong by the spec, and Kafka's reader skips the check for magic 0 messages.
    IgnoreForMagic0,
}

/// Decompresses one LZ4 frame, appending the plaintext to `out`.
///
/// Accepts what Kafka's reader accepts: version 01, independent blocks, reserved bits clear,
/// block size ids 4 to 7, a correct header checksum (unless `header_checksum` says to skip it);
/// an optional content size (skipped), block checksums (verified) and content checksum (present
/// but, as in Kafka, not verified). Fails if the plaintext would grow `out` beyond `limit` bytes,
/// or if bytes follow the frame.
pub(crate) fn decompress_frame(
    frame: &[u8],
    out: &mut Vec<u8>,
    limit: usize,
    header_checksum: HeaderChecksum,
) -> Result<(), Corruption> {
    let bad = |why: &str| Corruption::BadCompression(format!("lz4: {why}"));
    let mut reader = Reader {
        bytes: frame,
        pos: 0,
    };

    let magic = reader
        .u32_le()
        .ok_or_else(|| bad("frame shorter than its magic"))?;
    if magic != MAGIC {
        return Err(bad("not an lz4 frame (bad magic)"));
    }
    let descriptor_start = reader.pos;
    let flg = reader
        .u8()
        .ok_or_else(|| bad("truncated frame descriptor"))?;
    let bd = reader
        .u8()
        .ok_or_else(|| bad("truncated frame descriptor"))?;
    if flg & FLG_VERSION_MASK != FLG_VERSION_01 {
        return Err(bad("unsupported frame version"));
    }
    if flg & FLG_RESERVED != 0 || bd & BD_RESERVED != 0 {
        return Err(bad("reserved descriptor bits are set"));
    }
    if flg & FLG_BLOCK_INDEPENDENCE == 0 {
        return Err(bad("dependent blocks are not supported (as in Kafka)"));
    }
    let block_size_id = (bd >> 4) & 0x07;
    if block_size_id < 4 {
        return Err(bad("block size id below 4"));
    }
    // Ids 4..=7 mean 64 KiB, 256 KiB, 1 MiB, 4 MiB.
    let max_block = 1usize << (2 * usize::from(block_size_id) + 8);
    if flg & FLG_CONTENT_SIZE != 0 {
        reader
            .take(8)
            .ok_or_else(|| bad("truncated content size"))?;
    }
    let descriptor = frame
        .get(descriptor_start..reader.pos)
        .ok_or_else(|| bad("truncated frame descriptor"))?;
    let stored_checksum = reader
        .u8()
        .ok_or_else(|| bad("truncated frame descriptor"))?;
    if header_checksum == HeaderChecksum::Verify
        && stored_checksum != (xxh32(descriptor, 0) >> 8) as u8
    {
        return Err(bad("frame descriptor checksum mismatch"));
    }

    loop {
        let size_word = reader
            .u32_le()
            .ok_or_else(|| bad("frame ends before its end mark"))?;
        if size_word == 0 {
            break;
        }
        let stored = size_word & UNCOMPRESSED_BIT != 0;
        let block_len = (size_word & !UNCOMPRESSED_BIT) as usize;
        if block_len > max_block {
            return Err(bad("block larger than the frame's maximum block size"));
        }
        let block = reader
            .take(block_len)
            .ok_or_else(|| bad("block runs past the end of the frame"))?;
        if flg & FLG_BLOCK_CHECKSUM != 0 {
            let checksum = reader
                .u32_le()
                .ok_or_else(|| bad("truncated block checksum"))?;
            if checksum != xxh32(block, 0) {
                return Err(bad("block checksum mismatch"));
            }
        }
        let start = out.len();
        if stored {
            if start + block.len() > limit {
                return Err(bad("decompressed size exceeds the limit"));
            }
            out.extend_from_slice(block);
        } else {
            // LZ4 expands at most ~255x, so a small block never needs a whole 4 MiB window.
            let needed = max_block.min(block.len().saturating_mul(256).saturating_add(64));
            let room = needed.min(limit.saturating_sub(start));
            out.resize(start + room, 0);
            let target = out.get_mut(start..).unwrap_or_default();
            let written = lz4_flex::block::decompress_into(block, target);
            match written {
                Ok(written) => out.truncate(start + written),
                Err(_) if room < needed => {
                    out.truncate(start);
                    return Err(bad("decompressed size exceeds the limit"));
                }
                Err(err) => {
                    out.truncate(start);
                    return Err(bad(&format!("corrupt block: {err}")));
                }
            }
        }
    }
    if flg & FLG_CONTENT_CHECKSUM != 0 {
        reader
            .take(4)
            .ok_or_else(|| bad("truncated content checksum"))?;
    }
    if reader.pos != frame.len() {
        return Err(bad("bytes follow the end of the frame"));
    }
    Ok(())
}

/// A bounds-checked cursor over the frame bytes.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(len)?;
        let slice = self.bytes.get(self.pos..end)?;
        self.pos = end;
        Some(slice)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).and_then(|b| b.first().copied())
    }

    fn u32_le(&mut self) -> Option<u32> {
        let bytes: [u8; 4] = self.take(4)?.try_into().ok()?;
        Some(u32::from_le_bytes(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(input: &[u8]) -> Vec<u8> {
        let mut frame = Vec::new();
        compress_frame(input, &mut frame).unwrap();
        assert_eq!(frame.get(..7), Some(&KAFKA_LZ4_FRAME_HEADER[..]));
        let mut plain = Vec::new();
        decompress_frame(&frame, &mut plain, usize::MAX, HeaderChecksum::Verify).unwrap();
        assert_eq!(plain, input);
        frame
    }

    #[test]
    fn round_trips_small_large_and_incompressible() {
        round_trip(b"");
        round_trip(b"hello hello hello hello hello");
        let text: Vec<u8> = b"lorem ipsum dolor sit amet "
            .iter()
            .copied()
            .cycle()
            .take(200_000)
            .collect();
        let frame = round_trip(&text);
        assert!(
            frame.len() < text.len() / 4,
            "repetitive text must compress"
        );
        // Pseudo-random bytes do not compress: blocks are stored, flagged by the high bit.
        let mut state = 0x1234_5678u32;
        let noise: Vec<u8> = (0..70_000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                state as u8
            })
            .collect();
        let frame = round_trip(&noise);
        let first_size = u32::from_le_bytes(frame[7..11].try_into().unwrap());
        assert_eq!(first_size, 65_536 | UNCOMPRESSED_BIT);
    }

    /// lz4_flex's own frame writer, with options Kafka's reader accepts (content size, block
    /// checksums, content checksum, 256 KiB blocks), is read back: an independent LZ4 writer.
    #[test]
    fn reads_frames_written_by_lz4_flex_frame_encoder() {
        use lz4_flex::frame::{BlockMode, BlockSize, FrameEncoder, FrameInfo};
        use std::io::Write;
        let text: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let info = FrameInfo::new()
            .block_mode(BlockMode::Independent)
            .block_size(BlockSize::Max256KB)
            .block_checksums(true)
            .content_checksum(true)
            .content_size(Some(text.len() as u64));
        let mut encoder = FrameEncoder::with_frame_info(info, Vec::new());
        encoder.write_all(&text).unwrap();
        let frame = encoder.finish().unwrap();
        let mut plain = Vec::new();
        decompress_frame(&frame, &mut plain, usize::MAX, HeaderChecksum::Verify).unwrap();
        assert_eq!(plain, text);
    }

    /// And lz4_flex's frame reader accepts partlog's frames.
    #[test]
    fn lz4_flex_frame_decoder_reads_partlog_frames() {
        use std::io::Read;
        let text: Vec<u8> = (0..150_000u32).map(|i| (i / 7) as u8).collect();
        let mut frame = Vec::new();
        compress_frame(&text, &mut frame).unwrap();
        let mut plain = Vec::new();
        lz4_flex::frame::FrameDecoder::new(&frame[..])
            .read_to_end(&mut plain)
            .unwrap();
        assert_eq!(plain, text);
    }

    #[test]
    fn rejects_what_kafka_rejects() {
        let mut frame = Vec::new();
        compress_frame(b"some records some records", &mut frame).unwrap();
        let decode = |bytes: &[u8]| {
            decompress_frame(bytes, &mut Vec::new(), usize::MAX, HeaderChecksum::Verify)
        };

        let mut linked = frame.clone();
        linked[4] &= !FLG_BLOCK_INDEPENDENCE; // HC no longer matters: rejected before it
        assert!(decode(&linked).is_err());

        let mut bad_hc = frame.clone();
        bad_hc[6] ^= 1;
        assert!(decode(&bad_hc).is_err());
        // Magic 0 messages skip the check, as Kafka's reader does.
        let mut plain = Vec::new();
        decompress_frame(
            &bad_hc,
            &mut plain,
            usize::MAX,
            HeaderChecksum::IgnoreForMagic0,
        )
        .unwrap();
        assert_eq!(plain, b"some records some records");

        let mut small_blocks = frame.clone();
        small_blocks[5] = 0x30; // id 3
        assert!(decode(&small_blocks).is_err());

        let mut trailing = frame.clone();
        trailing.push(0);
        assert!(decode(&trailing).is_err());

        for len in 0..frame.len() {
            assert!(decode(&frame[..len]).is_err(), "truncated at {len}");
        }
    }

    #[test]
    fn limit_is_enforced() {
        let mut frame = Vec::new();
        compress_frame(&[7u8; 10_000], &mut frame).unwrap();
        assert!(decompress_frame(&frame, &mut Vec::new(), 9_999, HeaderChecksum::Verify).is_err());
        assert!(decompress_frame(&frame, &mut Vec::new(), 10_000, HeaderChecksum::Verify).is_ok());
    }
}
