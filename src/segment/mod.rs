//! A segment: one `.log` file with its offset, time and aborted-transaction indexes, and
//! Kafka's file names.

mod append;
mod epochs;
mod files;
mod log_segment;
mod lookup;
mod open;
mod positions;
mod read;
mod rebuild;
mod scan;
mod syncs;
mod transactions;
mod txn_index;
pub(crate) mod verified;
mod walker;

pub(crate) use append::AppendBytes;
pub(crate) use epochs::{FrameEpoch, RisingEpochs};
pub(crate) use files::transient_segment_file_path;
pub use files::{
    CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX, SegmentFileKind, SegmentFileName, TransientSuffix,
    list_segment_bases, parse_segment_file_name, rename_segment_files, segment_file_name,
    segment_file_path,
};
pub use log_segment::{
    AppendInfo, InvalidBytes, RollReason, ScanReport, Segment, SegmentConfig, SegmentRead,
    SegmentRole,
};
pub(crate) use transactions::Marker;
pub use txn_index::{ABORTED_TXN_VERSION, AbortedTxn, TransactionIndex, TxnIndexSearchResult};
pub(crate) use walker::{BatchWalker, Step};
#[cfg(test)]
mod tests;
