//! Kafka's sparse indexes: `OffsetIndex` (`.index`) and `TimeIndex` (`.timeindex`).
