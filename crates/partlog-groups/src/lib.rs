//! Consumer-group building blocks for partlog that match Apache Kafka's own behaviour.
//!
//! This crate holds Kafka's four client-side partition assignors ([`assignor`]): pure functions
//! that split a group's subscribed partitions among its members and return exactly what Kafka's
//! Java classes return for the same input, tie-breaks included. They need no I/O and nothing of
//! the storage crate, so they can assign partitions among any set of workers.
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
mod error;
pub mod group;
pub mod offsets;
mod wire;

pub use error::Error;
#[cfg(feature = "coordinator")]
pub use error::LogError;
pub use wire::{DecodeError, EncodeError};
