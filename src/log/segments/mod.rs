//! The segments as the log's threads share them. Owns `ReadView` (`view.rs`: the segment list
//! readers pin, the log start and end, the cuts and the truncation record, the compacted flag,
//! closed) and `Tail` (`tail.rs`: the active segment, the log end and what rolls left unsynced, in
//! the writer mutex), with the types they are built of: `snapshot` (the segment list and its
//! pins), `watermark` (offsets threads and futures wait on), `truncations`. Uses `observe`,
//! `config` and `files`.

pub(in crate::log) mod snapshot;
pub(in crate::log) mod tail;
pub(in crate::log) mod truncations;
pub(in crate::log) mod view;
pub(in crate::log) mod watermark;
