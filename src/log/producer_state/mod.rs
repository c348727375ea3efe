//! Kafka's per-partition producer state (ARCHITECTURE.md §3): the snapshot files here; the
//! in-memory `ProducerStateManager` joins them.

pub(crate) mod snapshot_file;
