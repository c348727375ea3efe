//! Kafka's per-partition producer state. For now only its files: the `<offset>.snapshot`
//! codec and the list of a directory's snapshots (`snapshot_file`); the in-memory
//! `ProducerStateManager` joins them here.

pub(crate) mod snapshot_file;
