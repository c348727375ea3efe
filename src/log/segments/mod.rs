//! The log's segments as its threads share them: the list readers pin (`snapshot`), the
//! watermarks threads and futures wait on (`watermark`), and the record of truncations that
//! durability waits and passes consult (`truncations`).
//!
//! Uses `observe`, `config` and `files`.

pub(in crate::log) mod snapshot;
pub(in crate::log) mod tail;
pub(in crate::log) mod truncations;
pub(in crate::log) mod view;
pub(in crate::log) mod watermark;
