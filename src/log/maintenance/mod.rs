//! Maintenance: retention (`retention`), compaction (`compaction`), producer expiry. Owns
//! `Maintenance` (`state.rs`: the pass locks, the cleaner's memory, compaction's counters, the
//! thread's stop). Its background work is one round with a schedule (`schedule.rs`:
//! `Shared::maintenance_round`, `MaintenanceSchedule`'s due times), which the maintenance thread
//! runs in a loop. Uses every folder below it, `write` included (a retention pass may roll).

pub(in crate::log) mod compaction;
pub(in crate::log) mod retention;
pub(in crate::log) mod schedule;
pub(in crate::log) mod state;
