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
use partlog_engine::txn::dump_text::kafka_decoder_text;
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
    let mut stored = Vec::new();
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
        stored.push((key, bytes));
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
        // What partlog's own decoder prints for the stored bytes (`partlog dump
        // --transaction-log-decoder`), which must be Kafka's line, and must say what was written.
        let (key_bytes, value_bytes) = &stored[offset];
        let (key, payload) =
            kafka_decoder_text(offset as i64, Some(key_bytes), value_bytes.as_deref());
        let (key, payload) = (key.unwrap(), payload.unwrap());
        assert!(
            key.contains(&format!("\"transactionalId\":\"{}\"", record.id)),
            "{key}"
        );
        match &record.value {
            Some(value) => assert!(
                payload.contains(&format!("\"transactionStatus\":\"{}\"", value.state.name()))
                    && payload.starts_with(&format!("{{\"version\":\"{}\"", record.version)),
                "{payload}"
            ),
            None => assert_eq!(payload, "<DELETE>"),
        }
        let printed = line.split_once(" key: ").map(|(_, rest)| rest);
        assert_eq!(
            printed,
            Some(format!("{key} payload: {payload}").as_str()),
            "offset {offset}"
        );
    }
}
