//! Consumer groups: the consumer protocol's blobs ([`consumer_protocol`]), and (feature
//! `coordinator`) Kafka's classic group coordinator.

#[cfg(feature = "coordinator")]
pub mod classic;
pub mod consumer_protocol;
#[cfg(feature = "coordinator")]
pub mod coordinator;
#[cfg(feature = "coordinator")]
pub mod pending;

#[cfg(feature = "coordinator")]
pub use coordinator::GroupCoordinator;
