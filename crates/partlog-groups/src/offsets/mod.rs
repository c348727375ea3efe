//! `__consumer_offsets`: its records ([`records`]), and (feature `coordinator`) the offset
//! store's rules over the log that holds them.

pub mod records;
