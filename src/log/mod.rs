//! The log layer: one Kafka partition directory, built on segments (DESIGN §3, §3a, §4).

pub mod checkpoint;
