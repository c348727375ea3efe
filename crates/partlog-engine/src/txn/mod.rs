//! The transaction coordinator's persistent side: the states of a transactional id
//! ([`state`]) and the records of its compacted log, `__transaction_state` ([`log_records`]),
//! byte for byte Kafka's.

pub mod log_records;
pub mod metadata;
pub mod state;
