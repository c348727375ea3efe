//! The RecordBatch v2 format (magic 2): encoding, decoding, CRC-32C, varints and codecs; and
//! reading the legacy message sets (magic 0 and 1) that Kafka wrote before 0.11.
//! No I/O happens here: everything works on byte slices.
//!
//! # The format in one page
//!
//! A Kafka `.log` file, and a fetch response, is a plain concatenation of *batches*, with no file
//! header and no padding. A batch is a 61-byte big-endian header followed by its records:
//!
//! ```text
//!  0  baseOffset i64 | 8 batchLength i32 | 12 partitionLeaderEpoch i32 | 16 magic i8 (= 2)
//! 17  crc u32  (CRC-32C of bytes [21, end))
//! 21  attributes i16 | 23 lastOffsetDelta i32 | 27 baseTimestamp i64 | 35 maxTimestamp i64
//! 43  producerId i64 | 51 producerEpoch i16 | 53 baseSequence i32 | 57 recordsCount i32
//! 61  records (one compressed stream when the codec bits say so)
//! ```
//!
//! - The first 17 bytes are common to every message format: [`peek_batch_frame`] reads them to
//!   step from batch to batch (total size = `batchLength + 12`).
//! - The CRC starts at byte 21, so the log can assign `baseOffset` and stamp
//!   `partitionLeaderEpoch` without re-checksumming ([`set_base_offset`],
//!   [`set_partition_leader_epoch`]); LogAppendTime rewrites covered fields and re-checksums
//!   ([`set_log_append_time`]).
//! - Attributes (low byte): bits 0-2 codec ([`Compression`]), bit 3 timestamp type
//!   ([`TimestampType`]), bit 4 transactional, bit 5 control, bit 6 delete horizon.
//! - Records hold zig-zag varint lengths and deltas against the header's base offset and base
//!   timestamp (see [`Record`] and the layout in `record.rs`; [`varint`] for the encoding).
//! - Control batches carry COMMIT/ABORT markers ([`build_control_batch`], [`ControlRecordType`]).
//!
//! Reading: [`BatchView::new`] validates one batch (frame, magic, length, CRC, counts) and
//! [`BatchView::records`] decodes its records lazily, borrowing keys, values and headers and
//! allocating nothing per record. [`BatchIter`] walks a buffer of batches. Writing:
//! [`BatchBuilder`].
//!
//! Legacy messages (magic 0 and 1, CRC-32 IEEE) are read only: [`LegacyBatchView`] validates
//! one outer message and yields its records (decompressing a wrapper's inner messages), with
//! Kafka's offset and timestamp rules (see `legacy.rs`). [`Batch`] is either kind behind one
//! interface, [`Batch::records`] the one way to read records of any batch, and
//! [`AnyBatchIter`] walks a buffer that may mix them, as a log upgraded over the years does.
//!
//! Codecs: none, lz4 and zstd are read and written; gzip and snappy (xerial framing) are read
//! with the `gzip` and `snappy` features and never written (see `compression.rs`).
//!
//! Errors: decoding caller bytes yields [`Error::InvalidBatch`]; a layer that read the bytes
//! from a file turns that into [`Error::Corrupt`] with the file and position
//! ([`locate_error`]). A codec this build cannot read is [`Error::UnsupportedCompression`].
//! The v2-only [`BatchView`] reports a legacy message as `BadMagic(0|1)`
//! ([`Error::Unsupported`] through [`BatchView::decode`]): use [`Batch`] to accept both.

mod any_batch;
mod batch;
mod builder;
mod compression;
mod control;
mod crc;
mod edit;
#[cfg(feature = "gzip")]
mod gzip;
mod legacy;
mod lz4;
mod recompress;
mod record;
#[cfg(feature = "snappy")]
mod snappy;
pub mod varint;
mod xxhash;

use std::path::Path;

pub use any_batch::{AnyBatchIter, Batch, BatchRecords};
pub use batch::{
    BatchFrame, BatchHeader, BatchIter, BatchView, CURRENT_MAGIC, HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD, MIN_BATCH_LENGTH, RECORD_BATCH_OVERHEAD, TimestampType, check_legacy_crc,
    legacy_magic_error, peek_batch_frame, peek_magic,
};
pub(crate) use batch::{frame_crc_holds, increment_sequence};
pub(crate) use builder::RecordShape;
pub use builder::{BatchBuilder, NewRecord, RecordRef};
pub use compression::{Compression, DEFAULT_ZSTD_LEVEL, MAX_DECOMPRESSED_BATCH_SIZE};
pub use control::{
    CONTROL_BATCH_SIZE, ControlRecordType, EndTransactionMarker, build_control_batch,
    control_record_type,
};
pub use crc::{crc32c, crc32c_append};
pub(crate) use edit::set_log_append_time_in_parts;
pub use edit::{set_base_offset, set_log_append_time, set_partition_leader_epoch};
pub use legacy::{
    LEGACY_V0_HEADER_SIZE, LEGACY_V0_MIN_MESSAGE_SIZE, LEGACY_V1_HEADER_SIZE,
    LEGACY_V1_MIN_MESSAGE_SIZE, LegacyBatchView, LegacyHeader, LegacyRecordIter,
};
pub use lz4::KAFKA_LZ4_FRAME_HEADER;
pub(crate) use recompress::recompress;
pub use record::{Header, HeaderIter, Record, RecordIter};

use crate::error::{Corruption, Error};

/// Re-labels an error from decoding batch bytes with the file and byte position they came
/// from: [`Error::InvalidBatch`] becomes [`Error::Corrupt`]; a legacy-magic error gains the
/// location in its message; anything else is returned unchanged.
pub fn locate_error(error: Error, file: &Path, position: u64) -> Error {
    match error {
        Error::InvalidBatch { what } => corruption_in_file(what, file, position),
        Error::Unsupported { what } => Error::Unsupported {
            what: format!("{what} (in {} at byte {position})", file.display()),
        },
        other => other,
    }
}

/// The error for a [`Corruption`] found at `position` in `file`, except that a legacy magic is
/// [`Error::Unsupported`] (with the location): it comes from a v2-only reader
/// ([`BatchView`]) meeting a valid legacy message, which [`Batch`] would have read.
pub fn corruption_in_file(what: Corruption, file: &Path, position: u64) -> Error {
    match what {
        Corruption::BadMagic(magic @ (0 | 1)) => {
            locate_error(legacy_magic_error(magic), file, position)
        }
        what => Error::Corrupt {
            file: file.to_path_buf(),
            position,
            what,
        },
    }
}
