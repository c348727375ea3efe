//! `__consumer_offsets`: its records ([`records`]), the text Kafka's DumpLogSegments
//! `--offsets-decoder` prints for them ([`dump_text`]), and (feature `coordinator`) the offset
//! store's rules over the log that holds them.

pub mod dump_text;
#[cfg(feature = "coordinator")]
mod group_offsets;
#[cfg(feature = "coordinator")]
pub mod log;
pub mod records;
#[cfg(feature = "coordinator")]
pub mod store;
