//! Against a real Kafka 4.4 broker (issue 33): the `__transaction_state` partition a broker's
//! coordinator wrote reads with `TransactionLog::read_dir`, and the state it ends in for a
//! transactional id names the producer id and epoch that the data partition's producer state
//! (the broker's `.snapshot` and batches, read by partlog) holds for the same producer.
//!
//! Runs only with `PARTLOG_BROKER=1` (`tests/kafka/run.sh`, `.ci/run`'s kafka-broker stage);
//! see `tests/common/broker.rs`.

#[path = "../../../tests/common/broker.rs"]
mod broker;

use partlog::{Log, LogConfig};
use partlog_engine::txn::TransactionLog;
use partlog_engine::txn::log_records::transaction_state_partition;
use partlog_engine::txn::state::TransactionState;

#[test]
fn transaction_log_read_dir_reads_what_a_broker_coordinator_wrote() {
    let Some(env) = broker::broker_env() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let mut kafka = broker::Broker::start(env, work.path());
    kafka.create_topic("payments", 1, &[]);
    let records = [
        broker::ClientRecord::new(b"alice", b"-10"),
        broker::ClientRecord::new(b"bob", b"+10"),
    ];
    let committed = broker::ProduceOptions {
        transactional_id: Some("T"),
        ..broker::ProduceOptions::default()
    };
    assert_eq!(kafka.produce("payments", 0, &records, &committed).len(), 2);
    let aborted = broker::ProduceOptions {
        transactional_id: Some("T"),
        abort: true,
        ..broker::ProduceOptions::default()
    };
    assert_eq!(
        kafka.produce("payments", 0, &records[..1], &aborted).len(),
        1
    );
    let data_dir = kafka.partition_dir("payments", 0);
    // The test broker runs one __transaction_state partition
    // (tests/kafka/server.properties.in), so every id lands in partition 0.
    let state_dir = kafka.log_dir().join(format!(
        "__transaction_state-{}",
        transaction_state_partition("T", 1).unwrap()
    ));
    kafka.stop(); // a clean shutdown: the data partition gets its producer snapshot

    let ids = TransactionLog::read_dir(&state_dir).unwrap();
    let value = ids
        .get("T")
        .unwrap_or_else(|| panic!("no \"T\" in {}: {ids:?}", state_dir.display()));
    assert_eq!(value.state, TransactionState::CompleteAbort, "{value:?}");
    assert!(value.partitions.is_empty(), "{value:?}");

    let data = Log::open_read_only(&data_dir, LogConfig::default()).unwrap();
    let producers = data.active_producers();
    assert_eq!(producers.len(), 1, "{producers:?}");
    assert_eq!(producers[0].producer_id, value.producer_id, "{value:?}");
    assert_eq!(
        producers[0].producer_epoch, value.producer_epoch,
        "{value:?}"
    );
}
