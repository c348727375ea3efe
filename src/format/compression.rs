//! Compression codecs: how the records section of a batch is wrapped.
//!
//! The codec lives in bits 0-2 of the batch attributes. When it is not `none`, bytes
//! `[61, end)` of the batch are ONE compressed stream whose plaintext is the concatenated
//! records; the 61-byte header (including `recordsCount`) stays uncompressed, and the CRC covers
//! the compressed bytes.
//!
//! | id | codec | partlog |
//! | --- | --- | --- |
//! | 0 | none | reads and writes |
//! | 1 | gzip | reads with the `gzip` feature, never writes |
//! | 2 | snappy (xerial stream format) | reads with the `snappy` feature, never writes |
//! | 3 | lz4 (LZ4 frame, Kafka's header) | reads and writes |
//! | 4 | zstd (standard frame, level 3 by default) | reads and writes (magic 2 only) |
//! | 5-7 | unknown | [`Error::UnsupportedCompression`] |
//!
//! A codec partlog cannot read in this build (gzip or snappy without its feature, ids 5-7) is
//! [`Error::UnsupportedCompression`]; so is any attempt to write gzip or snappy. The same
//! streams wrap the inner message set of a legacy (magic 0 or 1) wrapper message.

use std::cell::RefCell;
use std::fmt;
use std::str::FromStr;

use zstd::zstd_safe::{self, CCtx, CParameter, DCtx, InBuffer, OutBuffer, ResetDirective};

#[cfg(feature = "gzip")]
use super::gzip;
use super::lz4::{self, HeaderChecksum};
#[cfg(feature = "snappy")]
use super::snappy;
use crate::error::{Corruption, Error, Result};

/// Largest plaintext partlog will decompress one batch into.
///
/// Kafka itself streams records out of a compressed batch and has no such bound; partlog
/// decompresses a batch into one buffer, so a corrupt (or hostile) payload that claims an
/// enormous expansion must stop somewhere. No batch Kafka can produce comes near this: record
/// and batch sizes are `i32`.
pub const MAX_DECOMPRESSED_BATCH_SIZE: usize = i32::MAX as usize;

/// zstd's level when none is chosen: Kafka's default (`compression.zstd.level` = 3).
pub const DEFAULT_ZSTD_LEVEL: i32 = 3;

/// The compression codec of a batch (attribute bits 0-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Compression {
    /// Records stored as they are (id 0).
    #[default]
    None,
    /// gzip (id 1). Read with the `gzip` feature; never written.
    Gzip,
    /// Snappy in the xerial stream format (id 2). Read with the `snappy` feature; never written.
    Snappy,
    /// The LZ4 frame format with Kafka's header (id 3).
    Lz4,
    /// A zstd frame (id 4).
    Zstd,
}

impl Compression {
    /// The codec id as stored in attribute bits 0-2.
    pub const fn id(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }

    /// The codec for an id from attribute bits 0-2; ids 5 to 7 (and anything larger) are
    /// [`Error::UnsupportedCompression`], as Kafka's "Unknown compression type id".
    pub fn from_id(id: u8) -> Result<Compression> {
        match id {
            0 => Ok(Compression::None),
            1 => Ok(Compression::Gzip),
            2 => Ok(Compression::Snappy),
            3 => Ok(Compression::Lz4),
            4 => Ok(Compression::Zstd),
            codec => Err(Error::UnsupportedCompression { codec }),
        }
    }

    /// Kafka's name for the codec, as in `compression.type`.
    pub const fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }

    /// Whether partlog can write the codec (and read it): none, lz4 and zstd. gzip and snappy
    /// are never written, whatever the features.
    pub const fn is_supported(self) -> bool {
        matches!(
            self,
            Compression::None | Compression::Lz4 | Compression::Zstd
        )
    }

    /// Whether this build of partlog can read the codec: [`is_supported`](Self::is_supported)
    /// plus gzip and snappy when the `gzip` and `snappy` features are on.
    pub const fn is_readable(self) -> bool {
        match self {
            Compression::Gzip => cfg!(feature = "gzip"),
            Compression::Snappy => cfg!(feature = "snappy"),
            codec => codec.is_supported(),
        }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Compression {
    type Err = Error;

    /// Parses Kafka's names (`none`, `gzip`, `snappy`, `lz4`, `zstd`).
    fn from_str(name: &str) -> Result<Compression> {
        [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ]
        .into_iter()
        .find(|codec| codec.name() == name)
        .ok_or_else(|| Error::InvalidConfig {
            setting: "compression.type",
            why: format!("unknown codec {name:?}; expected none, gzip, snappy, lz4 or zstd"),
        })
    }
}

/// Appends the compressed form of `records` to `out`. `Compression::None` appends them as
/// they are. `zstd_level` applies to zstd only.
pub(crate) fn compress(
    compression: Compression,
    records: &[u8],
    out: &mut Vec<u8>,
    zstd_level: i32,
) -> Result<()> {
    match compression {
        Compression::None => {
            out.extend_from_slice(records);
            Ok(())
        }
        Compression::Lz4 => {
            lz4::compress_frame(records, out).map_err(|what| Error::InvalidBatch { what })
        }
        Compression::Zstd => zstd_compress(records, out, zstd_level),
        Compression::Gzip | Compression::Snappy => Err(Error::UnsupportedCompression {
            codec: compression.id(),
        }),
    }
}

/// Replaces the contents of `scratch` with the plaintext of a compressed records section.
/// Never called for `Compression::None`, whose records are read in place.
pub(crate) fn decompress(
    compression: Compression,
    payload: &[u8],
    scratch: &mut Vec<u8>,
) -> Result<()> {
    decompress_with(compression, payload, scratch, HeaderChecksum::Verify)
}

/// [`decompress`] with a choice about the LZ4 frame's header checksum, which a legacy magic 0
/// wrapper got wrong (see [`HeaderChecksum`]).
pub(crate) fn decompress_with(
    compression: Compression,
    payload: &[u8],
    scratch: &mut Vec<u8>,
    lz4_header_checksum: HeaderChecksum,
) -> Result<()> {
    scratch.clear();
    let limit = MAX_DECOMPRESSED_BATCH_SIZE;
    let outcome = match compression {
        Compression::None => {
            scratch.extend_from_slice(payload);
            Ok(())
        }
        Compression::Lz4 => lz4::decompress_frame(payload, scratch, limit, lz4_header_checksum),
        Compression::Zstd => zstd_decompress(payload, scratch, limit),
        #[cfg(feature = "gzip")]
        Compression::Gzip => gzip::decompress(payload, scratch, limit),
        #[cfg(feature = "snappy")]
        Compression::Snappy => snappy::decompress(payload, scratch, limit),
        #[cfg(not(feature = "gzip"))]
        Compression::Gzip => return Err(Error::UnsupportedCompression { codec: 1 }),
        #[cfg(not(feature = "snappy"))]
        Compression::Snappy => return Err(Error::UnsupportedCompression { codec: 2 }),
    };
    outcome.map_err(|what| Error::InvalidBatch { what })
}

// zstd contexts are expensive to create (hundreds of KiB of tables), so each thread keeps one
// compressor and one decompressor and reuses them for every batch.
thread_local! {
    static ZSTD_COMPRESSOR: RefCell<Option<CCtx<'static>>> = const { RefCell::new(None) };
    static ZSTD_DECOMPRESSOR: RefCell<Option<DCtx<'static>>> = const { RefCell::new(None) };
}

/// Runs `run` with this thread's cached zstd context, creating it on first use.
fn with_context<C: 'static, T>(
    cache: &'static std::thread::LocalKey<RefCell<Option<C>>>,
    create: fn() -> Option<C>,
    run: impl FnOnce(&mut C) -> std::result::Result<T, Corruption>,
) -> std::result::Result<T, Corruption> {
    let unavailable = || Corruption::BadCompression("cannot allocate a zstd context".into());
    cache.with(|cell| match cell.try_borrow_mut() {
        Ok(mut slot) => {
            if slot.is_none() {
                *slot = create();
            }
            slot.as_mut().map_or_else(|| Err(unavailable()), run)
        }
        // Only reachable through re-entrancy, which this module never does; stay correct anyway.
        Err(_) => create().map_or_else(|| Err(unavailable()), |mut context| run(&mut context)),
    })
}

fn zstd_error(action: &str, code: usize) -> Corruption {
    Corruption::BadCompression(format!(
        "zstd {action} failed: {}",
        zstd_safe::get_error_name(code)
    ))
}

fn zstd_compress(input: &[u8], out: &mut Vec<u8>, level: i32) -> Result<()> {
    let run = |cctx: &mut CCtx<'static>| -> std::result::Result<(), Corruption> {
        cctx.set_parameter(CParameter::CompressionLevel(level))
            .map_err(|code| zstd_error("level setting", code))?;
        let start = out.len();
        out.resize(start + zstd_safe::compress_bound(input.len()), 0);
        let target = out.get_mut(start..).unwrap_or_default();
        match cctx.compress2(target, input) {
            Ok(written) => {
                out.truncate(start + written);
                Ok(())
            }
            Err(code) => {
                out.truncate(start);
                Err(zstd_error("compression", code))
            }
        }
    };
    with_context(&ZSTD_COMPRESSOR, CCtx::try_create, run)
        .map_err(|what| Error::InvalidBatch { what })
}

/// Streams one or more concatenated zstd frames into `out` (as zstd-jni's input stream does),
/// growing `out` as needed up to `limit` bytes.
fn zstd_decompress(
    payload: &[u8],
    out: &mut Vec<u8>,
    limit: usize,
) -> std::result::Result<(), Corruption> {
    let run = |dctx: &mut DCtx<'static>| -> std::result::Result<(), Corruption> {
        dctx.reset(ResetDirective::SessionOnly)
            .map_err(|code| zstd_error("reset", code))?;
        // The frame header may declare the plaintext size (zstd's one-shot API writes it);
        // otherwise start from a guess and grow.
        // A declared size is only a hint: a corrupt header must not make us reserve gigabytes.
        let guess = payload.len().saturating_mul(4).max(64);
        let hint = match zstd_safe::get_frame_content_size(payload) {
            Ok(Some(size)) => usize::try_from(size)
                .unwrap_or(limit)
                .min(payload.len().saturating_mul(64).max(64 * 1024)),
            _ => guess,
        };
        out.reserve(hint.min(limit));
        let mut input = InBuffer::around(payload);
        loop {
            if out.len() == out.capacity() {
                if out.len() >= limit {
                    return Err(Corruption::BadCompression(
                        "zstd: decompressed size exceeds the limit".into(),
                    ));
                }
                let grow = out.len().max(64 * 1024).min(limit - out.len());
                out.reserve(grow);
            }
            let (in_before, out_before) = (input.pos(), out.len());
            // The output buffer sets `out`'s length as zstd writes into its spare capacity.
            let (hint, out_after) = {
                let mut output = OutBuffer::around_pos(out, out_before);
                let hint = dctx
                    .decompress_stream(&mut output, &mut input)
                    .map_err(|code| zstd_error("decompression", code))?;
                (hint, output.pos())
            };
            if out.len() > limit {
                return Err(Corruption::BadCompression(
                    "zstd: decompressed size exceeds the limit".into(),
                ));
            }
            let frame_done = hint == 0;
            let made_progress = input.pos() != in_before || out_after != out_before;
            if !made_progress && !frame_done {
                return Err(Corruption::BadCompression(
                    "zstd: the payload ends inside a frame".into(),
                ));
            }
            if frame_done && input.pos() == payload.len() {
                return Ok(());
            }
        }
    };
    with_context(&ZSTD_DECOMPRESSOR, DCtx::try_create, run)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_names_and_unknown_codecs() {
        for codec in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            assert_eq!(Compression::from_id(codec.id()).unwrap(), codec);
            assert_eq!(codec.to_string().parse::<Compression>().unwrap(), codec);
        }
        for id in 5..=7 {
            assert!(matches!(
                Compression::from_id(id),
                Err(Error::UnsupportedCompression { codec }) if codec == id
            ));
        }
        assert!("brotli".parse::<Compression>().is_err());
    }

    #[test]
    fn zstd_round_trip_and_garbage() {
        let text: Vec<u8> = b"the quick brown fox ".repeat(10_000);
        let mut compressed = Vec::new();
        compress(
            Compression::Zstd,
            &text,
            &mut compressed,
            DEFAULT_ZSTD_LEVEL,
        )
        .unwrap();
        assert!(compressed.len() < text.len() / 20);
        // An independent reader: the zstd crate's streaming decoder.
        assert_eq!(zstd::stream::decode_all(&compressed[..]).unwrap(), text);
        let mut scratch = vec![1, 2, 3];
        decompress(Compression::Zstd, &compressed, &mut scratch).unwrap();
        assert_eq!(scratch, text);

        // A frame written by zstd's streaming encoder (no content size, like zstd-jni) reads back.
        let streamed = zstd::stream::encode_all(&text[..], 3).unwrap();
        decompress(Compression::Zstd, &streamed, &mut scratch).unwrap();
        assert_eq!(scratch, text);

        // Two concatenated frames are one stream, as for zstd-jni.
        let mut two = streamed.clone();
        two.extend_from_slice(&streamed);
        decompress(Compression::Zstd, &two, &mut scratch).unwrap();
        assert_eq!(scratch.len(), text.len() * 2);

        for len in 0..compressed.len() {
            assert!(decompress(Compression::Zstd, &compressed[..len], &mut scratch).is_err());
        }
        let mut trailing = compressed.clone();
        trailing.push(0);
        assert!(decompress(Compression::Zstd, &trailing, &mut scratch).is_err());
    }

    #[test]
    fn zstd_limit_is_enforced() {
        let zeros = vec![0u8; 1 << 20];
        let compressed = zstd::stream::encode_all(&zeros[..], 3).unwrap();
        let mut out = Vec::new();
        assert!(zstd_decompress(&compressed, &mut out, 1000).is_err());
        out.clear();
        assert!(zstd_decompress(&compressed, &mut out, 1 << 20).is_ok());
    }

    #[test]
    fn gzip_and_snappy_are_never_written() {
        for codec in [Compression::Gzip, Compression::Snappy] {
            assert!(!codec.is_supported());
            let error = compress(codec, b"x", &mut Vec::new(), 3).unwrap_err();
            assert!(matches!(error, Error::UnsupportedCompression { .. }));
            let message = error.to_string();
            assert!(
                message.contains(codec.name()) && message.contains("never writes"),
                "{message}"
            );
        }
    }

    #[cfg(not(feature = "gzip"))]
    #[test]
    fn gzip_is_unsupported_without_its_feature() {
        assert!(!Compression::Gzip.is_readable());
        assert!(matches!(
            decompress(Compression::Gzip, b"x", &mut Vec::new()),
            Err(Error::UnsupportedCompression { codec: 1 })
        ));
    }

    #[cfg(not(feature = "snappy"))]
    #[test]
    fn snappy_is_unsupported_without_its_feature() {
        assert!(!Compression::Snappy.is_readable());
        assert!(matches!(
            decompress(Compression::Snappy, b"x", &mut Vec::new()),
            Err(Error::UnsupportedCompression { codec: 2 })
        ));
    }

    #[cfg(feature = "gzip")]
    #[test]
    fn gzip_is_read_with_its_feature() {
        use std::io::Write;
        assert!(Compression::Gzip.is_readable());
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(b"records").unwrap();
        let payload = encoder.finish().unwrap();
        let mut scratch = vec![1, 2];
        decompress(Compression::Gzip, &payload, &mut scratch).unwrap();
        assert_eq!(scratch, b"records");
        assert!(matches!(
            decompress(Compression::Gzip, b"x", &mut scratch),
            Err(Error::InvalidBatch {
                what: Corruption::BadCompression(_)
            })
        ));
    }

    #[cfg(feature = "snappy")]
    #[test]
    fn snappy_is_read_with_its_feature() {
        assert!(Compression::Snappy.is_readable());
        let payload = snap::raw::Encoder::new().compress_vec(b"records").unwrap();
        let mut scratch = vec![1, 2];
        decompress(Compression::Snappy, &payload, &mut scratch).unwrap();
        assert_eq!(scratch, b"records");
        assert!(matches!(
            decompress(Compression::Snappy, b"\xff", &mut scratch),
            Err(Error::InvalidBatch {
                what: Corruption::BadCompression(_)
            })
        ));
    }
}
