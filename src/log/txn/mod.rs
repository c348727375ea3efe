//! Producer state and transactions (ARCHITECTURE.md §9). Owns the `ProducerStateManager`
//! (`producer_state/`: Kafka's rules, no I/O; in the writer mutex as `Writer::producers`) and
//! `TxnView` (`view.rs`: what readers need of it without the writer mutex); `transactions.rs`
//! feeds the manager batches and writes what it decides (the `.txnindex` entries, the snapshots),
//! and `replay.rs` rebuilds it from the segments. Uses `observe`, `config`, `files`, `segments` and
//! `durability`.

pub(crate) mod producer_state;
pub(in crate::log) mod replay;
pub(in crate::log) mod transactions;
pub(in crate::log) mod view;
