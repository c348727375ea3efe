//! Producer state and transactions (ARCHITECTURE.md §9): Kafka's `ProducerStateManager`
//! (`producer_state`, no I/O) and its use by the log (`transactions`).
//!
//! Uses `observe`, `config`, `files`, `segments` and `durability`.

pub(crate) mod producer_state;
pub(in crate::log) mod replay;
pub(in crate::log) mod transactions;
pub(in crate::log) mod view;
