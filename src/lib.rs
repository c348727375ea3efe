//! partlog: the per-partition commit log of Apache Kafka, as an embeddable Rust library.
//!
//! A partlog directory is a Kafka partition directory: RecordBatch v2 `.log` files, `.index` and
//! `.timeindex` files in Kafka's layouts, and Kafka's 20-digit file names.
//!
//! This file is the table of contents: the modules are private, and the stable API is the one
//! `pub use` block below. [`unstable`] exposes the lower layers (segments, indexes, the storage
//! seam and the simulator) for users who build on them; it may change before 1.0.

mod clock;
mod error;
mod format;
mod index;
mod log;
mod segment;
mod storage;

pub use crate::{
    error::{Corruption, Error, Result},
    format::{
        AnyBatchIter, Batch, BatchBuilder, BatchHeader, BatchIter, BatchRecords, BatchView,
        Compression, ControlRecordType, EndTransactionMarker, Header, HeaderIter, LegacyBatchView,
        LegacyHeader, LegacyRecordIter, NewRecord, Record, RecordIter, TimestampType,
    },
    log::{
        CleanupPolicy, CompressionType, FetchBatches, FetchData, FlushPolicy, Log, LogAppendInfo,
        LogConfig, LogConfigBuilder, LogRecord, LogRecords, LogStats, ReadBound, RecoveryMode,
        RecoveryReport,
    },
};

/// The lower layers: segments, indexes, the storage seam, the clock and (feature `sim`) the
/// crash simulator. Public so that users can build on partlog's pieces and crash-test their own
/// code on it; unstable until 1.0.
pub mod unstable {
    /// The format layer: RecordBatch v2 header layout constants, frame peeking, in-place header
    /// edits, control batches, CRC-32C and varints; legacy (magic 0 and 1) message layout.
    pub mod format {
        pub use crate::format::*;
    }

    #[cfg(feature = "sim")]
    pub use crate::clock::ManualClock;
    pub use crate::clock::{Clock, SystemClock};
    pub use crate::index::{OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset};
    pub use crate::log::checkpoint;
    pub use crate::segment::{
        AppendInfo, InvalidBytes, RollReason, ScanReport, Segment, SegmentConfig, SegmentFileKind,
        SegmentFileName, SegmentRead, SegmentRole, TransientSuffix, parse_segment_file_name,
        segment_file_name, segment_file_path,
    };
    #[cfg(feature = "sim")]
    pub use crate::storage::sim;
    #[cfg(feature = "sim")]
    pub use crate::storage::{CrashConfig, SimStorage};
    pub use crate::storage::{
        FileLock, LockMode, Metadata, OpenMode, OsStorage, ReadMapping, Storage, StorageFile,
    };
}
