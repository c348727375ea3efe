//! Consumer-group building blocks for partlog that match Apache Kafka's own behaviour.
//!
//! - [`assignor`]: Kafka's four client-side partition assignors, pure functions that split a
//!   group's subscribed partitions among its members and return exactly what Kafka's Java
//!   classes return for the same input, tie-breaks included. They need no I/O and nothing of the
//!   storage crate (build with `default-features = false` for them alone).
//! - [`offsets::records`] and [`group::consumer_protocol`]: the records of `__consumer_offsets`
//!   and the consumer protocol's blobs, byte for byte Kafka's.
//! - With the default feature `coordinator`: `offsets::store::OffsetStore`, the committed
//!   offsets and groups of one `__consumer_offsets` partition with Kafka's rules, and
//!   `group::GroupCoordinator`, Kafka's classic group protocol on an injected clock. Both write
//!   through the `offsets::log::OffsetsLog` port, which a partlog `Log` implements. On a
//!   partlog-engine `Engine`: `router::GroupRouter` (one of each per `__consumer_offsets`
//!   partition, timers on the engine's pool) and `consumer::Consumer`, with
//!   `send_offsets_to_transaction` for the engine's transactional producer.
//!
//! ```
//! use std::collections::BTreeMap;
//! use partlog_groups::assignor::{Assignor, MemberSubscription, RangeAssignor};
//!
//! let topics = BTreeMap::from([("orders".to_string(), 3)]);
//! let members = vec![
//!     MemberSubscription::new("worker-a", ["orders"]),
//!     MemberSubscription::new("worker-b", ["orders"]),
//! ];
//! let assignment = RangeAssignor.assign(&topics, &members).unwrap();
//! assert_eq!(assignment["worker-a"].len(), 2);
//! assert_eq!(assignment["worker-b"].len(), 1);
//! ```

pub mod assignor;
#[cfg(feature = "coordinator")]
pub mod consumer;
mod error;
pub mod group;
pub mod offsets;
#[cfg(feature = "coordinator")]
pub mod router;
mod wire;

pub use error::Error;
#[cfg(feature = "coordinator")]
pub use error::LogError;
pub use wire::{DecodeError, EncodeError};
