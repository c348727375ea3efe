//! partlog-engine: topics of partlog logs in one process, as a Kafka broker and its clients
//! keep them: Kafka's default partitioner bit for bit, producer ids that are never reused, and
//! the transaction coordinator's `__transaction_state` records byte for byte.
//!
//! An [`Engine`](engine::Engine) keeps topics of logs in one directory; a
//! [`TopicProducer`](producer::TopicProducer) writes to them as Kafka's producer does, and
//! commits transactions across them atomically:
//!
//! ```
//! use partlog::ReadBound;
//! use partlog::NewRecord;
//! use partlog_engine::engine::{Engine, EngineConfig, TopicConfig};
//! use partlog_engine::producer::TopicProducer;
//! use partlog_engine::producer::config::TopicProducerConfig;
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let dir = tempfile::tempdir()?;
//!     let engine = Engine::open(dir.path(), EngineConfig::default())?;
//!     let orders = engine.create_topic("orders", 12, TopicConfig::new())?;
//!     engine.create_topic("audit", 1, TopicConfig::new())?;
//!
//!     // Idempotent by default; the key decides the partition, as in Kafka.
//!     let producer = TopicProducer::new(&engine, TopicProducerConfig::default())?;
//!     let sent = producer.send("orders", &NewRecord::new(1_700_000_000_000, Some(b"user-42"), Some(b"book")))?;
//!     assert_eq!(sent.wait()?.partition, 4);
//!
//!     // A transaction across two topics: all of it or none of it.
//!     let txn = TopicProducer::new(&engine, TopicProducerConfig::transactional("checkout"))?;
//!     txn.init_transactions()?;
//!     txn.begin_transaction()?;
//!     txn.send("orders", &NewRecord::new(1_700_000_000_001, Some(b"user-42"), Some(b"pen")))?;
//!     txn.send("audit", &NewRecord::new(1_700_000_000_001, None, Some(b"user-42 bought a pen")))?;
//!     txn.commit_transaction()?; // read_committed readers see both records now
//!     let log = orders.partition(4)?;
//!     assert_eq!(log.committed_records(0, ReadBound::LogEnd).count(), 2);
//!     engine.close()?;
//!     Ok(())
//! }
//! ```
//!
//! The files of an engine directory, one by one:
//!
//! ```
//! use std::sync::Arc;
//!
//! use partlog::unstable::{OsStorage, Storage};
//! use partlog_engine::engine::producer_ids::ProducerIdManager;
//! use partlog_engine::partitioner::{
//!     BuiltInPartitioner, Partitions, RecordToRoute, SequentialRandom, partition_record,
//! };
//! use partlog_engine::txn::log_records::{self, TransactionLogValue, TxnTopicPartitions};
//! use partlog_engine::txn::state::TransactionState;
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     // A keyed record goes where Kafka's Java client sends it: murmur2 of the key.
//!     let keyed = RecordToRoute { topic: "orders", partition: None, key: Some(b"user-42"), value: None };
//!     assert_eq!(partition_record(&keyed, 12, None, false)?, Some(4));
//!
//!     // One without a key sticks to one partition for batch.size bytes (KIP-794).
//!     let unkeyed = RecordToRoute { key: None, ..keyed };
//!     assert_eq!(partition_record(&unkeyed, 12, None, false)?, None);
//!     let sticky = BuiltInPartitioner::with_random("orders", 16384, Arc::new(SequentialRandom::default()))?;
//!     let info = sticky.peek_current_partition_info(&Partitions::all(12));
//!     assert_eq!(info.partition(), 0); // the first random number drawn was 0
//!
//!     // Producer ids come in durably reserved blocks of 1000 and survive restarts.
//!     let dir = tempfile::tempdir()?;
//!     let storage: Arc<dyn Storage> = Arc::new(OsStorage::new());
//!     let ids = ProducerIdManager::open(&storage, dir.path())?;
//!     assert_eq!((ids.generate_producer_id()?, ids.generate_producer_id()?), (0, 1));
//!     drop(ids);
//!     let ids = ProducerIdManager::open(&storage, dir.path())?;
//!     assert_eq!(ids.generate_producer_id()?, 1000); // the rest of the first block is skipped
//!
//!     // A transactional id's state, as Kafka's coordinator writes it to __transaction_state-10.
//!     assert_eq!(log_records::transaction_state_partition("txn-1", 50)?, 10);
//!     let mut value = TransactionLogValue::new(1000, 0, 60_000, TransactionState::Ongoing);
//!     value.partitions = vec![TxnTopicPartitions { topic: "t".into(), partitions: vec![0, 1] }];
//!     value.last_update_timestamp_ms = 1_700_000_000_000;
//!     value.start_timestamp_ms = 1_700_000_000_000;
//!     let bytes = log_records::encode_value(&value, 0)?;
//!     assert_eq!(bytes.len(), 52);
//!     assert_eq!(log_records::decode_value(Some(&bytes))?, Some(value));
//!     Ok(())
//! }
//! ```
//!
//! # Contents
//!
//! | module | what it holds |
//! | --- | --- |
//! | [`partitioner`] | [`murmur2`](partitioner::murmur2), [`to_positive`](partitioner::to_positive), [`partition_record`](partitioner::partition_record) (Kafka's `KafkaProducer.partition`), the [`Partitioner`](partitioner::Partitioner) trait, and the sticky [`BuiltInPartitioner`](partitioner::BuiltInPartitioner) with its injectable [`RandomSource`](partitioner::RandomSource) and adaptive weights |
//! | [`engine`] | the [`Engine`](engine::Engine) (topics of logs on one `Workers` pool, the coordinator over them) and the engine directory's files: [`ProducerIdManager`](engine::producer_ids::ProducerIdManager) and `partlog.producer-ids`, the topic list `partlog.topics` ([`TopicsFile`](engine::topics_file::TopicsFile)), Kafka's `partition.metadata` ([`PartitionMetadata`](engine::partition_metadata::PartitionMetadata)), topic names and [`TopicId`](engine::topic::TopicId)s |
//! | [`producer`] | [`TopicProducer`](producer::TopicProducer): Kafka's producer over an engine, idempotent by default, transactional with `transactional.id` ([`ProducerTransactionState`](producer::state::ProducerTransactionState)) |
//! | [`txn`] | the [`TransactionCoordinator`](txn::TransactionCoordinator) over the engine's logs ([`TxnLogs`](txn::TxnLogs)): `init_producer_id`, `add_partitions`, `end_txn` with its markers, timers (`tick`) and recovery (`open`); [`TransactionState`](txn::state::TransactionState) and the `__transaction_state` records: keys, values v0 and v1, tombstones ([`log_records`](txn::log_records)), and the partition of a transactional id |
//!
//! Errors are partlog's [`Error`](partlog::Error): `InvalidArgument` and `InvalidConfig` for a
//! caller's input, `Corrupt` for an engine file that fails its checks, the coordinator's
//! errors with Kafka's codes (`kafka_code()`: 42, 47, 48, 49, 50, 51, 90), and the I/O errors of
//! the storage seam. Every file goes through [`partlog::unstable::Storage`], so the crash
//! simulator (feature `sim`) crashes the engine's files as it crashes a log's.

pub mod engine;
pub mod partitioner;
pub mod producer;
pub mod txn;
