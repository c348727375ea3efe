//! Consumer groups: the consumer protocol's blobs ([`consumer_protocol`]), and (feature
//! `coordinator`) Kafka's classic group coordinator.

pub mod consumer_protocol;
