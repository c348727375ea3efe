//! Against a real Kafka 4.4 broker and a real client (issue 33): keyed records sent through
//! librdkafka's `murmur2_random` partitioner (the Java client's murmur2) land in the partition
//! partlog's `partition_for_key` computes; and the broker's finalized `transaction.version`,
//! which decides the `__transaction_state` value version, is the one partlog defaults to.
//!
//! Runs only with `PARTLOG_BROKER=1` (`tests/kafka/run.sh`, `.ci/run`'s kafka-broker stage);
//! see `tests/common/broker.rs`.

#[path = "../../../tests/common/broker.rs"]
mod broker;

use std::collections::BTreeMap;

use broker::kafka;
use partlog_engine::partitioner::partition_for_key;
use partlog_engine::txn::log_records::value_version_for;

/// The keys of the table (the empty key included: a key, hashed, not a null key), and
/// more, textual and binary.
fn keys() -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = [
        &b"21"[..],
        b"foobar",
        b"a-little-bit-long-string",
        b"a-little-bit-longer-string",
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
        b"abc",
        b"",
        b"a",
        b"key",
        b"key1",
        b"key2",
        b"hello",
        b"user-42",
        b"order-1001",
        &[0, 0, 0, 1],
        &[0xff; 5],
        "café".as_bytes(),
    ]
    .iter()
    .map(|key| key.to_vec())
    .collect();
    keys.extend((0..150).map(|i| format!("user-{i}").into_bytes()));
    keys.extend((0u32..50).map(|i| i.wrapping_mul(2_654_435_761).to_be_bytes().to_vec()));
    keys
}

#[test]
fn murmur2_librdkafka_murmur2_random_lands_each_key_where_partlog_computes() {
    let Some(env) = broker::broker_env() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let mut kafka = broker::Broker::start(env, work.path());
    let keys = keys();
    for (topic, partitions) in [("keyed-12", 12), ("keyed-7", 7)] {
        kafka.create_topic(topic, partitions, &[]);
        let records: Vec<broker::ClientRecord> = keys
            .iter()
            .map(|key| broker::ClientRecord::new(key, b"v"))
            .collect();
        let acked = kafka.produce_with_partitioner(topic, &records, "murmur2_random");
        assert_eq!(acked.len(), keys.len());
        let mut per_partition = BTreeMap::<u32, usize>::new();
        for (key, (record, partition)) in keys.iter().zip(&acked) {
            assert_eq!(record.key.as_deref(), Some(key.as_slice()));
            let ours = partition_for_key(key, partitions as i32).unwrap();
            assert_eq!(
                i64::from(*partition),
                i64::from(ours),
                "key {:?} in {topic}: the client chose {partition}, partlog {ours}",
                String::from_utf8_lossy(key)
            );
            *per_partition.entry(*partition).or_default() += 1;
        }
        assert_eq!(
            per_partition.len(),
            partitions as usize,
            "every partition got keys"
        );
        // What a consumer reads back from a partition is what was sent there.
        let first = acked
            .iter()
            .find(|(_, p)| *p == 0)
            .map(|(r, _)| r.key.clone());
        let read = kafka.consume(topic, 0, 0, broker::Isolation::ReadUncommitted);
        assert_eq!(read.len(), per_partition[&0]);
        assert_eq!(read.first().map(|r| r.key.clone()), first);
    }

    // `kafka-features.sh describe`: a 4.4 cluster formatted with the defaults finalizes
    // transaction.version 2, so its coordinator writes __transaction_state values of version 1.
    let mut command = std::process::Command::new(&env.tools.java);
    command
        .arg("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")
        .arg("-cp")
        .arg(&env.tools.classpath)
        .args([
            "org.apache.kafka.tools.FeatureCommand",
            "--bootstrap-server",
        ])
        .arg(kafka.bootstrap())
        .arg("describe");
    let (status, stdout, stderr) = kafka::run_with_timeout(
        command,
        None,
        broker::CLIENT_TIMEOUT,
        "FeatureCommand describe",
    );
    let stdout = String::from_utf8_lossy(&stdout);
    assert!(
        status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&stderr)
    );
    let line = stdout
        .lines()
        .find(|line| line.contains("Feature: transaction.version"))
        .unwrap_or_else(|| panic!("no transaction.version in:\n{stdout}"));
    let level: i16 = line
        .split_whitespace()
        .skip_while(|field| *field != "FinalizedVersionLevel:")
        .nth(1)
        .and_then(|level| level.parse().ok())
        .unwrap_or_else(|| panic!("no finalized level in {line:?}"));
    assert_eq!(level, 2, "{line}");
    assert_eq!(value_version_for(level), 1);
    kafka.stop();
}
