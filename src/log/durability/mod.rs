//! Durability (ARCHITECTURE.md §6). Owns `Durability` (`state.rs`: the group commit, the flusher's
//! signal, the bytes the last recovery point covered) and `DurablePoints` (`points.rs`:
//! `partlog.checkpoint`, the recovery point and the flush policy's counts, in the writer mutex).
//! The syncs (`sync.rs`), the recovery points and checkpoint writes (`checkpoints.rs`), the
//! durability waits (`wait.rs`), the file-system syncs a pool gathers for many logs (`gather.rs`), and the flusher's work as one round with its schedule
//! (`flusher.rs`: `Shared::flusher_round`, `FlusherSchedule::next_due`), which the flusher thread
//! runs in a loop. Uses `observe`, `config`, `files` and `segments`.

pub(in crate::log) mod checkpoints;
pub(in crate::log) mod flusher;
pub(crate) mod gather;
pub(in crate::log) mod group_commit;
pub(in crate::log) mod points;
pub(in crate::log) mod state;
pub(in crate::log) mod sync;
pub(in crate::log) mod wait;
