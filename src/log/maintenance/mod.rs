//! Maintenance: retention (`retention`), compaction (`compaction`), producer expiry, and the
//! maintenance thread that runs them.
//!
//! Uses every folder below it, `write` included (a retention pass may roll).

pub(in crate::log) mod compaction;
pub(in crate::log) mod retention;
pub(in crate::log) mod schedule;
pub(in crate::log) mod state;
