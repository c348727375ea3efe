//! The write path. Owns no state of its own: its operations change the writer mutex's parts
//! together (`Tail`, `DurablePoints`, the producer state, `PendingDeletes`), in the orders that keep
//! a crash's leftovers a prefix of the log: appends (`append`, `follower`), rolls (`roll`),
//! truncation and the move of the log start (`truncate`), and the restart of an empty log at an
//! offset (`restart`). Uses every folder below it: `observe`, `config`, `files`, `segments`,
//! `durability`, `txn` and `replication`.

pub(in crate::log) mod append;
pub(in crate::log) mod follower;
pub(in crate::log) mod restart;
pub(in crate::log) mod roll;
pub(in crate::log) mod truncate;
