//! Kafka's own `DumpLogSegments --transaction-log-decoder` on a `__transaction_state`
//! partition that partlog wrote (issue 33): every record's transactional id, producer id,
//! epoch, state and partitions come back as partlog wrote them, with nothing on stderr.
//!
//! Java and Kafka's jars are found as `tests/common/kafka.rs` finds them; without them the
//! test skips with a message, except under `CI=true`, where it fails.

#[path = "../../../tests/common/kafka.rs"]
mod kafka;

use partlog::{CleanupPolicy, CompressionType, Log, LogConfig, NewRecord};
use partlog_engine::engine::topic::partition_dir_name;
use partlog_engine::txn::log_records::{
    TRANSACTION_STATE_SEGMENT_BYTES, TRANSACTION_STATE_TOPIC, TransactionLogValue,
    TxnTopicPartitions, encode_key, encode_value, transaction_state_partition,
};
use partlog_engine::txn::state::TransactionState;

const T: i64 = 1_700_000_000_000;

/// One record the test writes: a transactional id and its value (`None`: a tombstone).
struct Written {
    id: &'static str,
    value: Option<TransactionLogValue>,
    version: i16,
}

fn value(
    pid: i64,
    epoch: i16,
    state: TransactionState,
    partitions: &[(&str, &[i32])],
) -> TransactionLogValue {
    let mut value = TransactionLogValue::new(pid, epoch, 60_000, state);
    value.partitions = partitions
        .iter()
        .map(|(topic, ids)| TxnTopicPartitions {
            topic: (*topic).to_owned(),
            partitions: ids.to_vec(),
        })
        .collect();
    value.last_update_timestamp_ms = T + pid;
    value.start_timestamp_ms = if state == TransactionState::Empty {
        -1
    } else {
        T
    };
    value
}

/// The successive states of one transactional id as a coordinator writes them, in both value
/// versions, ending with its tombstone.
fn records() -> Vec<Written> {
    let mut tagged = value(4000, 7, TransactionState::CompleteCommit, &[]);
    tagged.client_transaction_version = 2;
    tagged.previous_producer_id = 3999;
    vec![
        Written {
            id: "txn-1",
            value: Some(value(1000, 0, TransactionState::Empty, &[])),
            version: 0,
        },
        Written {
            id: "txn-1",
            value: Some(value(
                1000,
                1,
                TransactionState::Ongoing,
                &[("orders", &[0, 3]), ("ledger", &[1])],
            )),
            version: 1,
        },
        Written {
            id: "txn-1",
            value: Some(value(
                1000,
                1,
                TransactionState::PrepareCommit,
                &[("orders", &[0, 3])],
            )),
            version: 1,
        },
        Written {
            id: "txn-1",
            value: Some(tagged),
            version: 1,
        },
        Written {
            id: "txn-1",
            value: Some(value(
                1000,
                2,
                TransactionState::PrepareAbort,
                &[("orders", &[2])],
            )),
            version: 0,
        },
        Written {
            id: "txn-1",
            value: Some(value(1000, 2, TransactionState::CompleteAbort, &[])),
            version: 0,
        },
        Written {
            id: "txn-1",
            value: None,
            version: 0,
        },
    ]
}

/// The JSON DumpLogSegments' transaction-log decoder prints for a value: Kafka's
/// `TransactionLogValueJsonConverter`, fields in schema order, tagged fields only when set.
fn expected_payload(value: &TransactionLogValue, version: i16) -> String {
    let mut fields = vec![format!("\"producerId\":{}", value.producer_id)];
    let tagged = version >= 1;
    if tagged && value.previous_producer_id != -1 {
        fields.push(format!(
            "\"previousProducerId\":{}",
            value.previous_producer_id
        ));
    }
    if tagged && value.next_producer_id != -1 {
        fields.push(format!("\"nextProducerId\":{}", value.next_producer_id));
    }
    fields.push(format!("\"producerEpoch\":{}", value.producer_epoch));
    if tagged && value.next_producer_epoch != -1 {
        fields.push(format!(
            "\"nextProducerEpoch\":{}",
            value.next_producer_epoch
        ));
    }
    fields.push(format!(
        "\"transactionTimeoutMs\":{}",
        value.transaction_timeout_ms
    ));
    fields.push(format!("\"transactionStatus\":\"{}\"", value.state.name()));
    let partitions = if value.state == TransactionState::Empty {
        "null".to_owned()
    } else {
        let topics: Vec<String> = value
            .partitions
            .iter()
            .map(|t| {
                let ids: Vec<String> = t.partitions.iter().map(i32::to_string).collect();
                format!(
                    "{{\"topic\":\"{}\",\"partitionIds\":[{}]}}",
                    t.topic,
                    ids.join(",")
                )
            })
            .collect();
        format!("[{}]", topics.join(","))
    };
    fields.push(format!("\"transactionPartitions\":{partitions}"));
    fields.push(format!(
        "\"transactionLastUpdateTimestampMs\":{}",
        value.last_update_timestamp_ms
    ));
    fields.push(format!(
        "\"transactionStartTimestampMs\":{}",
        value.start_timestamp_ms
    ));
    if tagged && value.client_transaction_version != 0 {
        fields.push(format!(
            "\"clientTransactionVersion\":{}",
            value.client_transaction_version
        ));
    }
    format!(
        "{{\"version\":\"{version}\",\"data\":{{{}}}}}",
        fields.join(",")
    )
}

#[test]
fn transaction_log_dump_log_segments_decodes_partlog_records() {
    let root = tempfile::tempdir().unwrap();
    let partition = transaction_state_partition("txn-1", 50).unwrap();
    let dir = root
        .path()
        .join(partition_dir_name(TRANSACTION_STATE_TOPIC, partition));
    assert!(dir.ends_with("__transaction_state-10"));
    let config = LogConfig::builder()
        .cleanup_policy(CleanupPolicy::COMPACT)
        .segment_bytes(TRANSACTION_STATE_SEGMENT_BYTES as u32)
        .compression_type(CompressionType::Uncompressed)
        .build()
        .unwrap();
    let log = Log::open(&dir, config).unwrap();
    let written = records();
    for (i, record) in written.iter().enumerate() {
        let key = encode_key(record.id).unwrap();
        let bytes = record
            .value
            .as_ref()
            .map(|v| encode_value(v, record.version).unwrap());
        let appended = log
            .append(&[NewRecord::new(T + i as i64, Some(&key), bytes.as_deref())])
            .unwrap();
        assert_eq!(appended.first_offset, i as i64);
    }
    log.close().unwrap();
    drop(log);

    let files = kafka::segment_files(&dir, &["log"]);
    let Some(output) = kafka::dump_log_segments(
        &files,
        &[
            "--deep-iteration",
            "--print-data-log",
            "--transaction-log-decoder",
        ],
    ) else {
        return;
    };
    assert!(output.status.success(), "{output:?}");
    assert_eq!(output.stderr.trim(), "", "stderr is empty: {output:?}");
    assert!(kafka::bad_lines(&output).is_empty(), "{output:?}");
    let lines: Vec<&str> = output
        .stdout
        .lines()
        .filter(|l| l.starts_with("| offset: "))
        .collect();
    assert_eq!(lines.len(), written.len(), "{output:?}");
    for (offset, (record, line)) in written.iter().zip(&lines).enumerate() {
        assert!(
            line.starts_with(&format!(
                "| offset: {offset} CreateTime: {} ",
                T + offset as i64
            )),
            "{line}"
        );
        let key = format!(
            "{{\"type\":\"0\",\"data\":{{\"transactionalId\":\"{}\"}}}}",
            record.id
        );
        let payload = record.value.as_ref().map_or_else(
            || "<DELETE>".to_owned(),
            |v| expected_payload(v, record.version),
        );
        let printed = line.split_once(" key: ").map(|(_, rest)| rest);
        assert_eq!(
            printed,
            Some(format!("{key} payload: {payload}").as_str()),
            "offset {offset}"
        );
    }
}
