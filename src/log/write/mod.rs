//! The write path: appends (`append`, `follower`), rolls (`roll`), truncation and the move of the
//! log start (`truncate`), and the restart of an empty log at an offset (`restart`).
//!
//! Uses every folder below it: `observe`, `config`, `files`, `segments`, `durability`, `txn`
//! and `replication`.

pub(in crate::log) mod append;
pub(in crate::log) mod follower;
pub(in crate::log) mod restart;
pub(in crate::log) mod roll;
pub(in crate::log) mod truncate;
