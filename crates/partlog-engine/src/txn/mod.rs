//! The transaction coordinator ([`coordinator`]) and its persistent side: the states of a
//! transactional id ([`state`], [`metadata`]) and the records of its compacted log,
//! `__transaction_state` ([`log_records`]), byte for byte Kafka's.
//!
//! | module | what it owns |
//! | --- | --- |
//! | [`metadata`] | one id's [`TransactionMetadata`](metadata::TransactionMetadata) and its transitions |
//! | [`state_manager`] | the cache of every id's metadata, and the durable writes to `__transaction_state` |
//! | [`coordinator`] | the request handlers and the markers |
//! | [`timers`] | the timeout of transactions and the expiry of ids |
//! | [`recovery`] | replaying `__transaction_state` on open |
//! | [`dump_text`] | a record as Kafka's DumpLogSegments `--transaction-log-decoder` prints it |
//! | [`transaction_log`] | [`TransactionLog::read_dir`](transaction_log::TransactionLog::read_dir): one partition's ids, read from its files |
//! | [`logs`] | [`logs::TxnLogs`], the logs the engine hands the coordinator |
//! | [`config`] | [`config::TransactionCoordinatorConfig`] |

pub mod config;
pub mod coordinator;
pub mod dump_text;
pub mod log_records;
pub mod logs;
pub mod metadata;
pub mod recovery;
pub mod state;
pub mod state_manager;
pub mod timers;
pub mod transaction_log;

pub use config::TransactionCoordinatorConfig;
pub use coordinator::{ProducerIdAndEpoch, TransactionCoordinator, TransactionResult};
pub use logs::{OffsetsMarkerListener, TxnLogs};
pub use metadata::TopicPartition;
pub use timers::TimerReport;
pub use transaction_log::TransactionLog;
