//! The log: segments, offsets, durability and recovery (DESIGN §3, §4).

mod group_commit;
mod watermark;
