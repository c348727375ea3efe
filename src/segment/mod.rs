//! A segment: one `.log` file with its offset and time indexes.
