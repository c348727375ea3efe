//! `__consumer_offsets`: its records ([`records`]), and (feature `coordinator`) the offset
//! store's rules over the log that holds them.

#[cfg(feature = "coordinator")]
pub mod log;
pub mod records;
#[cfg(feature = "coordinator")]
pub mod store;
