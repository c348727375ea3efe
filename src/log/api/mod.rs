//! The public methods of [`Log`](crate::Log), grouped by what a caller does: writes
//! (`write`), reads and their waits (`read`), durability (`durability`), transactions
//! (`transactions`), replication (`replication`) and maintenance (`maintenance`). Each method
//! checks what the call needs (the log open, writable) and hands the work to the folder that
//! owns it; `mod.rs` keeps open, close and the getters.
//!
//! Uses every folder.

mod durability;
mod maintenance;
mod read;
mod replication;
mod transactions;
mod write;
