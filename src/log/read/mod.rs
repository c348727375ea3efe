//! The read path. Owns `LivePoll` (`live_poll.rs`: a live reader's next poll); reads (`fetch`,
//! into `fetch_data`'s `FetchData`), point reads (`point`, through the process's cache of
//! checked batches, `crate::segment::verified`), record iterators and tails (`records`, `committed`,
//! `tail_stream`), the wait for data (`wait`), and the reader that follows a writer in another
//! process (`live`). Uses every folder below it, `recovery` included (a live reader reloads its
//! view).

pub(in crate::log) mod committed;
pub(in crate::log) mod fetch;
pub(in crate::log) mod fetch_data;
pub(in crate::log) mod live;
pub(in crate::log) mod live_poll;
pub(in crate::log) mod point;
pub(in crate::log) mod records;
#[cfg(feature = "stream")]
pub(in crate::log) mod tail_stream;
pub(in crate::log) mod wait;
