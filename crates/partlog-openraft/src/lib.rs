//! An [openraft](https://docs.rs/openraft/0.9.25) 0.9 log store on partlog.
//!
//! [`PartlogLogStore`] implements openraft's `RaftLogStorage` and `RaftLogReader` (feature
//! `storage-v2`) for any type config with `u64` node ids and openraft's own `Entry`. Its
//! directory is a partlog log, and therefore a Kafka partition directory:
//!
//! - one Raft entry is one RecordBatch v2 of one record ([`entry_codec`]): base offset = index,
//!   `partitionLeaderEpoch` = term, a header `openraft.leader` = the leader's node id, value =
//!   the serialized `EntryPayload`. One batch per entry, because Raft truncates at exact
//!   indexes and partlog truncates whole batches;
//! - the vote, the committed log id and the last purged log id are in `partlog.raft-state`
//!   ([`raft_state`]), two CRC-32C slots written durably;
//! - `append` writes all its entries in one follower append and calls openraft back once the
//!   log's group commit has made the last one durable, from a task of openraft's runtime.
//!
//! All file I/O goes through partlog's storage seam, so partlog's crash simulator (feature
//! `sim`) can crash the store at any sync point.
//!
//! ```no_run
//! use partlog::LogConfig;
//! use partlog_openraft::PartlogLogStore;
//! use partlog_openraft::testing::KvConfig;
//!
//! let store = PartlogLogStore::<KvConfig>::open("/var/lib/app/raft-0", LogConfig::default())?;
//! # Ok::<(), partlog::Error>(())
//! ```

pub mod entry_codec;
mod log_store;
pub mod raft_state;
pub mod testing;

pub use log_store::PartlogLogStore;
