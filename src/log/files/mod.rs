//! The log directory's own files beside its segments: `partlog.lock` and the Kafka log dir's
//! lock (`dir_lock`, `kafka_dir`), `partlog.checkpoint` (`checkpoint`), compaction's
//! `partlog.cleaner-checkpoint` (`cleaner_checkpoint`), Kafka's producer snapshots
//! (`producer_snapshot`), and one listing of the directory for an open (`dir_listing`).
//!
//! Uses `observe` and `config`, and the crate's storage and segment layers.

pub mod checkpoint;
pub(in crate::log) mod cleaner_checkpoint;
pub(in crate::log) mod dir_listing;
pub(in crate::log) mod dir_lock;
pub(crate) mod kafka_dir;
pub mod producer_snapshot;
