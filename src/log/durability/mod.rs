//! Durability: the group commit, the syncs off the append path and the flusher thread, the
//! recovery points written to `partlog.checkpoint`, poisoning after a failed sync, and the
//! durability waits (ARCHITECTURE.md §6).
//!
//! Uses `observe`, `config`, `files` and `segments`.

pub(in crate::log) mod checkpoints;
pub(in crate::log) mod flusher;
pub(in crate::log) mod group_commit;
pub(in crate::log) mod points;
pub(in crate::log) mod state;
pub(in crate::log) mod sync;
pub(in crate::log) mod wait;
