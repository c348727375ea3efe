//! Against a real Kafka 4.4 broker (issue 34): the `__consumer_offsets` partition a broker's
//! group coordinator wrote opens as partlog's `OffsetStore`, whose `fetch` returns the offsets
//! `kafka-consumer-groups.sh --describe` printed before the broker stopped, and whose group
//! record decodes to the broker's member, protocol and generation.
//!
//! The broker runs with Kafka's default 50 offsets partitions, so that group "g1" lives where a
//! production cluster puts it: `__consumer_offsets-42`. A librdkafka consumer
//! (`tests/kafka/client.py consume-group`, the classic protocol) reads and commits, then exits
//! without leaving the group, so that the group's last record still holds it. partlog's
//! `--offsets-decoder` text of every broker-written record is DumpLogSegments' own.
//!
//! Runs only with `PARTLOG_BROKER=1` (`tests/kafka/run.sh`, `.ci/run`'s kafka-broker stage);
//! see `tests/common/broker.rs`.

#[path = "../../../tests/common/broker.rs"]
mod broker;

use std::collections::BTreeMap;
use std::sync::Arc;

use partlog::unstable::SystemClock;
use partlog::{Log, LogConfig, ReadBound};
use partlog_groups::assignor::TopicPartition;
use partlog_groups::group::consumer_protocol::{Assignment, Subscription};
use partlog_groups::offsets::dump_text::kafka_decoder_text;
use partlog_groups::offsets::log::offsets_log_config;
use partlog_groups::offsets::records::{CONSUMER_OFFSETS_TOPIC, group_partition};
use partlog_groups::offsets::store::{OffsetStore, OffsetStoreConfig};

const GROUP: &str = "g1";
const TOPIC: &str = "t";
const CLIENT_ID: &str = "partlog-g1";
/// Records produced to partitions 0, 1 and 2.
const RECORDS: [usize; 3] = [5, 3, 2];

/// The rows of a `kafka-consumer-groups.sh --describe` table that belong to [`GROUP`], split on
/// whitespace (the columns are space-padded; no value holds a space but the coordinator's).
fn group_rows(table: &str) -> Vec<Vec<&str>> {
    table
        .lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        .filter(|fields| fields.first() == Some(&GROUP))
        .collect()
}

/// The generation of the broker coordinator's last `Stabilized group g1 generation N with M
/// members.` line.
fn stabilized_generation(kafka: &broker::Broker) -> i32 {
    let needle = format!("Stabilized group {GROUP} generation ");
    let lines = kafka.server_log_lines(&needle);
    let line = lines
        .last()
        .unwrap_or_else(|| panic!("no {needle:?} in the broker's log"));
    let (_, rest) = line.split_once(&needle).unwrap();
    rest.split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no generation in {line:?}"))
}

#[test]
fn offset_store_reads_what_a_broker_group_coordinator_wrote() {
    let Some(env) = broker::broker_env() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let mut kafka = broker::Broker::start_with_settings(
        env,
        work.path(),
        &[("offsets.topic.num.partitions", "50")],
    );
    kafka.create_topic(TOPIC, RECORDS.len() as u32, &[]);
    for (partition, count) in RECORDS.iter().enumerate() {
        let records: Vec<broker::ClientRecord> = (0..*count)
            .map(|i| broker::ClientRecord::new(format!("k{i}").as_bytes(), b"v"))
            .collect();
        let acked = kafka.produce(TOPIC, partition as u32, &records, &Default::default());
        assert_eq!(acked.len(), *count);
    }
    let total = RECORDS.iter().sum();
    let committed = kafka.consume_in_group(TOPIC, GROUP, total, CLIENT_ID, true);
    let expected: Vec<(i32, i64)> = RECORDS
        .iter()
        .enumerate()
        .map(|(p, n)| (p as i32, *n as i64))
        .collect();
    assert_eq!(committed, expected, "what the client committed");

    // What Kafka's own tool says, before the stop.
    let offsets_table = kafka.consumer_groups(&["--describe", "--group", GROUP]);
    let described: BTreeMap<i32, i64> = group_rows(&offsets_table)
        .iter()
        .map(|row| {
            assert_eq!(row.get(1), Some(&TOPIC), "{offsets_table}");
            (
                row[2].parse().expect("PARTITION"),
                row[3].parse().expect("CURRENT-OFFSET"),
            )
        })
        .collect();
    assert_eq!(
        described,
        expected.iter().copied().collect(),
        "{offsets_table}"
    );
    let members_table = kafka.consumer_groups(&["--describe", "--group", GROUP, "--members"]);
    let members = group_rows(&members_table);
    // GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS (no GROUP-INSTANCE-ID: a dynamic member).
    let [member] = members.as_slice() else {
        panic!("one member expected: {members_table}");
    };
    let [_, member_id, host, client_id, partitions] = member.as_slice() else {
        panic!("unexpected member row: {members_table}");
    };
    assert_eq!(*client_id, CLIENT_ID, "{members_table}");
    assert_eq!(*partitions, RECORDS.len().to_string(), "{members_table}");
    let state_table = kafka.consumer_groups(&["--describe", "--group", GROUP, "--state"]);
    let state = group_rows(&state_table);
    // GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE #MEMBERS
    let [strategy, group_state, member_count] = state
        .first()
        .and_then(|row| row.get(row.len().saturating_sub(3)..))
        .unwrap_or_else(|| panic!("no state row: {state_table}"))
    else {
        panic!("no state row: {state_table}");
    };
    assert_eq!(
        (*group_state, *member_count),
        ("Stable", "1"),
        "{state_table}"
    );
    let generation = stabilized_generation(&kafka);

    let partition = group_partition(GROUP, 50);
    let dir = kafka
        .log_dir()
        .join(format!("{CONSUMER_OFFSETS_TOPIC}-{partition}"));
    assert!(dir.ends_with("__consumer_offsets-42"), "{}", dir.display());
    kafka.stop();

    let config = offsets_log_config(LogConfig::builder()).unwrap();
    let log = Log::open_read_only(&dir, config).unwrap();
    let store = OffsetStore::open(log, OffsetStoreConfig::default(), Arc::new(SystemClock))
        .unwrap_or_else(|error| panic!("{}: {error}", dir.display()));
    let partitions: Vec<TopicPartition> = (0..RECORDS.len() as i32)
        .map(|p| TopicPartition::new(TOPIC, p))
        .collect();
    let fetched: BTreeMap<i32, i64> = store
        .fetch(GROUP, &partitions, false)
        .unwrap()
        .into_iter()
        .map(|(tp, result)| (tp.partition, result.unwrap().offset))
        .collect();
    assert_eq!(
        fetched, described,
        "partlog's fetch against the broker's describe"
    );

    let group = store
        .group(GROUP)
        .unwrap_or_else(|| panic!("no group {GROUP} in {}", dir.display()))
        .to_record();
    assert_eq!(group.protocol_type, "consumer", "{group:?}");
    assert_eq!(group.protocol.as_deref(), Some(*strategy), "{group:?}");
    assert_eq!(group.generation, generation, "{group:?}");
    assert_eq!(group.leader.as_deref(), Some(*member_id), "{group:?}");
    let [recorded] = group.members.as_slice() else {
        panic!("one member expected: {group:?}");
    };
    assert_eq!(recorded.member_id, *member_id, "{group:?}");
    assert_eq!(recorded.client_id, CLIENT_ID, "{group:?}");
    assert_eq!(recorded.client_host, *host, "{group:?}");
    assert_eq!(
        recorded.session_timeout, 300_000,
        "client.py's session.timeout.ms"
    );
    let subscription = Subscription::decode(&recorded.subscription).unwrap();
    assert_eq!(subscription.topics, [TOPIC], "{subscription:?}");
    let assignment = Assignment::decode(&recorded.assignment).unwrap();
    let mut assigned: Vec<(String, i32)> = assignment
        .assigned_partitions
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.topic.clone(), *p)))
        .collect();
    assigned.sort();
    let all: Vec<(String, i32)> = (0..RECORDS.len() as i32)
        .map(|p| (TOPIC.to_owned(), p))
        .collect();
    assert_eq!(assigned, all, "{assignment:?}");

    assert_decoder_text_is_kafkas(store.log());
}

/// `partlog dump --offsets-decoder`'s text of each record of the broker's partition is what
/// DumpLogSegments' `--offsets-decoder` prints for it; the broker writes offset commit values
/// at version 4 (flexible), which partlog reads.
fn assert_decoder_text_is_kafkas(log: &Log) {
    let files = broker::kafka::segment_files(log.dir(), &["log"]);
    let Some(output) = broker::kafka::dump_log_segments(
        &files,
        &["--deep-iteration", "--print-data-log", "--offsets-decoder"],
    ) else {
        return;
    };
    assert!(output.status.success(), "{output:?}");
    assert_eq!(output.stderr.trim(), "", "{output:?}");
    let kafka_lines: BTreeMap<i64, &str> = output
        .stdout
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("| offset: ")?;
            let (offset, _) = rest.split_once(' ')?;
            Some((offset.parse().ok()?, line))
        })
        .collect();
    let mut records = 0;
    let mut commit_v4 = false;
    for record in log.records(0, ReadBound::LogEnd) {
        let record = record.unwrap();
        let (key, payload) = kafka_decoder_text(
            record.offset,
            record.key.as_deref(),
            record.value.as_deref(),
        );
        let (key, payload) = (key.unwrap(), payload.unwrap());
        commit_v4 |=
            key.starts_with("{\"type\":\"1\"") && payload.starts_with("{\"version\":\"4\"");
        let line = kafka_lines
            .get(&record.offset)
            .unwrap_or_else(|| panic!("no line for offset {}: {output:?}", record.offset));
        assert_eq!(
            line.split_once(" key: ").map(|(_, rest)| rest),
            Some(format!("{key} payload: {payload}").as_str()),
            "offset {}",
            record.offset
        );
        records += 1;
    }
    assert!(records > 0 && commit_v4, "{}", output.stdout);
}
