//! The records of `__transaction_state` (issue 33): the golden bytes of the issue (produced by
//! Kafka's own generated classes, and checked against them again by `kafka_classes.rs`),
//! round trips, Kafka's `TransactionLogTest` cases, the partition of a transactional id, and
//! decode errors that are typed, never panics.

use partlog::Error;
use partlog_engine::txn::log_records::{
    RecordPart, TransactionLogKey, TransactionLogValue, TxnLogRecord, TxnTopicPartitions,
    decode_key, decode_value, encode_key, encode_value, java_abs, java_string_hash, read_record,
    transaction_state_partition, value_version_for,
};
use partlog_engine::txn::state::TransactionState;
use proptest::prelude::*;

fn hex(text: &str) -> Vec<u8> {
    let digits: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    (0..digits.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&digits[i..i + 2], 16).unwrap())
        .collect()
}

const T: i64 = 1_700_000_000_000;

fn ongoing() -> TransactionLogValue {
    let mut value = TransactionLogValue::new(1000, 0, 60_000, TransactionState::Ongoing);
    value.partitions = vec![TxnTopicPartitions {
        topic: "t".into(),
        partitions: vec![0, 1],
    }];
    value.last_update_timestamp_ms = T;
    value.start_timestamp_ms = T;
    value
}

fn empty() -> TransactionLogValue {
    let mut value = TransactionLogValue::new(1000, 0, 60_000, TransactionState::Empty);
    value.last_update_timestamp_ms = T;
    value
}

#[test]
fn transaction_log_golden_key() {
    let key = encode_key("txn-1").unwrap();
    assert_eq!(key, hex("0000 0005 74786e2d31"));
    assert_eq!(
        decode_key(&key).unwrap(),
        TransactionLogKey::Transaction {
            transactional_id: "txn-1".into()
        }
    );
}

#[test]
fn transaction_log_golden_value_v0_ongoing() {
    let golden = hex(
        "0000 00000000000003e8 0000 0000ea60 01 00000001 0001 74 00000002 00000000 00000001 \
         0000018bcfe56800 0000018bcfe56800",
    );
    assert_eq!(golden.len(), 52);
    assert_eq!(encode_value(&ongoing(), 0).unwrap(), golden);
    assert_eq!(decode_value(Some(&golden)).unwrap(), Some(ongoing()));
}

#[test]
fn transaction_log_golden_value_v0_empty() {
    let golden =
        hex("0000 00000000000003e8 0000 0000ea60 00 ffffffff 0000018bcfe56800 ffffffffffffffff");
    assert_eq!(golden.len(), 37);
    assert_eq!(encode_value(&empty(), 0).unwrap(), golden);
    assert_eq!(decode_value(Some(&golden)).unwrap(), Some(empty()));
}

#[test]
fn transaction_log_golden_value_v1_ongoing() {
    let golden = hex(
        "0001 00000000000003e8 0000 0000ea60 01 02 0274 03 00000000 00000001 00 \
         0000018bcfe56800 0000018bcfe56800 00",
    );
    assert_eq!(golden.len(), 47);
    assert_eq!(encode_value(&ongoing(), 1).unwrap(), golden);
    assert_eq!(decode_value(Some(&golden)).unwrap(), Some(ongoing()));
}

/// Version 1 with every tagged field off its default, in tag order: PreviousProducerId (0),
/// NextProducerId (1), ClientTransactionVersion (2), NextProducerEpoch (3). The bytes are
/// Kafka's (`kafka_classes.rs` has its generated class write the same value).
#[test]
fn transaction_log_golden_value_v1_tagged_fields() {
    let mut value = empty();
    value.previous_producer_id = 999;
    value.next_producer_id = 2000;
    value.client_transaction_version = 2;
    value.next_producer_epoch = 0;
    let golden = hex(
        "0001 00000000000003e8 0000 0000ea60 00 00 0000018bcfe56800 ffffffffffffffff \
         04 00 08 00000000000003e7 01 08 00000000000007d0 02 02 0002 03 02 0000",
    );
    assert_eq!(encode_value(&value, 1).unwrap(), golden);
    assert_eq!(decode_value(Some(&golden)).unwrap(), Some(value));
}

#[test]
fn transaction_log_golden_tombstone() {
    let key = encode_key("txn-1").unwrap();
    assert_eq!(decode_value(None).unwrap(), None);
    assert_eq!(
        read_record(Some(&key), None).unwrap(),
        TxnLogRecord::Tombstone {
            transactional_id: "txn-1".into()
        }
    );
    let value = encode_value(&ongoing(), 1).unwrap();
    assert_eq!(
        read_record(Some(&key), Some(&value)).unwrap(),
        TxnLogRecord::Value {
            transactional_id: "txn-1".into(),
            value: ongoing()
        }
    );
}

/// The vectors: `"g1"` → 3242 → 42, `"txn-1"` → 110810510 → 10, `"my-group"` →
/// −1906497762 → 12, `"polygenelubricants"` → i32::MIN → 0 (Java is asked again by
/// `kafka_classes.rs`).
#[test]
fn transaction_log_java_string_hash_and_partition_vectors() {
    for (id, hash, partition) in [
        ("g1", 3242, 42),
        ("txn-1", 110_810_510, 10),
        ("my-group", -1_906_497_762, 12),
        ("polygenelubricants", i32::MIN, 0),
        ("", 0, 0),
    ] {
        assert_eq!(java_string_hash(id), hash, "{id}");
        assert_eq!(
            transaction_state_partition(id, 50).unwrap(),
            partition,
            "{id}"
        );
    }
    assert_eq!(java_abs(i32::MIN), 0);
    assert_eq!(java_abs(-5), 5);
    // UTF-16 code units: U+1F600 is a surrogate pair, hashed unit by unit.
    assert_eq!(java_string_hash("😀"), 31 * 0xd83d + 0xde00);
    assert!(transaction_state_partition("x", 0).is_err());
}

/// TransactionLogTest.testSerializeTransactionLogValueToHighestNonFlexibleVersion and
/// ToFlexibleVersion: transaction.version 0 writes version 0, 1 and 2 write version 1.
#[test]
fn transaction_log_value_version_follows_transaction_version() {
    assert_eq!(value_version_for(0), 0);
    assert_eq!(value_version_for(1), 1);
    assert_eq!(value_version_for(2), 1);
    let mut value = TransactionLogValue::new(1, 1, 1000, TransactionState::CompleteCommit);
    value.last_update_timestamp_ms = 500;
    value.start_timestamp_ms = 500;
    for (tv, version) in [(0, [0, 0]), (2, [0, 1])] {
        let bytes = encode_value(&value, value_version_for(tv)).unwrap();
        assert_eq!(bytes[..2], version);
    }
}

/// TransactionLogTest.shouldThrowExceptionWriteInvalidTxn, and the other values Kafka refuses
/// to write.
#[test]
fn transaction_log_refuses_to_write_what_kafka_refuses() {
    let mut value = empty();
    value.partitions = ongoing().partitions;
    assert!(matches!(
        encode_value(&value, 1),
        Err(Error::InvalidArgument { .. })
    ));
    let mut value = empty();
    value.client_transaction_version = 2;
    assert!(matches!(
        encode_value(&value, 0),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(encode_value(&value, 1).is_ok());
    assert!(matches!(
        encode_value(&empty(), 2),
        Err(Error::Unsupported { .. })
    ));
    let long = "x".repeat(32_768);
    assert!(encode_key(&long).is_err());
    assert!(encode_key(&long[1..]).is_ok());
    let mut value = ongoing();
    value.partitions[0].topic = long;
    assert!(encode_value(&value, 0).is_err() && encode_value(&value, 1).is_err());
}

/// TransactionLogTest.shouldReadWriteMessages: six ids in six states, five partitions over two
/// topics, written at transaction.version 2 and read back.
#[test]
fn transaction_log_should_read_write_messages() {
    let states = [
        ("zero", TransactionState::Empty),
        ("one", TransactionState::Ongoing),
        ("two", TransactionState::PrepareCommit),
        ("three", TransactionState::CompleteCommit),
        ("four", TransactionState::PrepareAbort),
        ("five", TransactionState::CompleteAbort),
    ];
    for (pid, (id, state)) in states.into_iter().enumerate() {
        let mut value = TransactionLogValue::new(pid as i64, 0, 1000, state);
        if state != TransactionState::Empty {
            value.partitions = vec![
                TxnTopicPartitions {
                    topic: "topic1".into(),
                    partitions: vec![0, 1],
                },
                TxnTopicPartitions {
                    topic: "topic2".into(),
                    partitions: vec![0, 1, 2],
                },
            ];
        }
        let key = encode_key(id).unwrap();
        let bytes = encode_value(&value, value_version_for(2)).unwrap();
        match read_record(Some(&key), Some(&bytes)).unwrap() {
            TxnLogRecord::Value {
                transactional_id,
                value: read,
            } => {
                assert_eq!(transactional_id, id);
                assert_eq!(read, value);
            }
            other => panic!("{other:?}"),
        }
    }
}

/// TransactionLogTest.testReadTxnRecordKeyCanReadUnknownMessage, and a value of an unknown
/// version: both are skipped, as Kafka 4.4's load skips them, not errors.
#[test]
fn transaction_log_unknown_versions_are_reported_not_failed() {
    let unknown_key = hex("7fff");
    assert_eq!(
        decode_key(&unknown_key).unwrap(),
        TransactionLogKey::Unknown { version: i16::MAX }
    );
    assert_eq!(
        read_record(Some(&unknown_key), None).unwrap(),
        TxnLogRecord::UnknownKeyVersion { version: i16::MAX }
    );
    let key = encode_key("t").unwrap();
    assert_eq!(
        read_record(Some(&key), Some(&hex("0002 ffff"))).unwrap(),
        TxnLogRecord::UnknownValueVersion {
            transactional_id: "t".into(),
            version: 2
        }
    );
    assert!(
        decode_value(Some(&hex("0002"))).is_err(),
        "decode_value alone refuses it"
    );
}

/// TransactionLogTest.testDeserializeFutureTransactionLogValue: unknown tagged fields (100,
/// 101) in the value and in a partitions struct are skipped.
#[test]
fn transaction_log_deserialize_future_transaction_log_value() {
    let bytes = hex("0001 00000000000003e8 0064 000003e8 04 \
         02 06746f706963 02 00000001 \
           02 64 04 03666f6f 65 04 00000fa0 \
         00000000000007d0 0000000000000bb8 \
         02 64 04 03666f6f 65 04 00000fa0");
    let value = decode_value(Some(&bytes)).unwrap().unwrap();
    assert_eq!(value.producer_id, 1000);
    assert_eq!(value.producer_epoch, 100);
    assert_eq!(value.transaction_timeout_ms, 1000);
    assert_eq!(value.state, TransactionState::CompleteCommit);
    assert_eq!(
        value.partitions,
        vec![TxnTopicPartitions {
            topic: "topic".into(),
            partitions: vec![1]
        }]
    );
    assert_eq!(value.last_update_timestamp_ms, 2000);
    assert_eq!(value.start_timestamp_ms, 3000);
}

#[test]
fn transaction_log_decode_errors_are_typed() {
    let key = encode_key("txn-1").unwrap();
    let value = encode_value(&ongoing(), 1).unwrap();
    // Every truncation of a key or value is an error, never a panic.
    for cut in 0..key.len() {
        let error = decode_key(&key[..cut]).unwrap_err();
        assert_eq!(error.part, RecordPart::Key);
    }
    for version in [0, 1] {
        let value = encode_value(&ongoing(), version).unwrap();
        for cut in 0..value.len() {
            let error = decode_value(Some(&value[..cut])).unwrap_err();
            assert_eq!(error.part, RecordPart::Value);
            assert!(error.to_string().contains("__transaction_state"), "{error}");
        }
    }
    // An unknown state id (at byte 16), a client version Kafka does not know, null partitions
    // in a state other than Empty, a null topic, a count past the end.
    let mut bad_state = value.clone();
    bad_state[16] = 8;
    let error = decode_value(Some(&bad_state)).unwrap_err();
    assert_eq!(
        (error.position, error.what),
        (16, "an unknown transaction state id")
    );
    let mut bad_client = empty();
    bad_client.client_transaction_version = 3;
    assert!(decode_value(Some(&encode_value(&bad_client, 1).unwrap())).is_err());
    let null_partitions =
        hex("0000 00000000000003e8 0000 0000ea60 01 ffffffff 0000018bcfe56800 ffffffffffffffff");
    assert!(decode_value(Some(&null_partitions)).is_err());
    let null_topic = hex(
        "0001 00000000000003e8 0000 0000ea60 01 02 00 01 00 0000018bcfe56800 0000018bcfe56800 00",
    );
    assert!(decode_value(Some(&null_topic)).is_err());
    let huge_count = hex("0000 00000000000003e8 0000 0000ea60 01 7fffffff");
    assert!(decode_value(Some(&huge_count)).is_err());
    assert!(
        read_record(None, Some(&value)).is_err(),
        "a record without a key"
    );
    // Kafka's reader ignores what follows a value and reads an Empty value's partitions as
    // none, and so does this one.
    let mut trailing = encode_value(&empty(), 0).unwrap();
    trailing.push(0);
    assert_eq!(decode_value(Some(&trailing)).unwrap(), Some(empty()));
    let empty_with_list = hex(
        "0000 00000000000003e8 0000 0000ea60 00 00000001 0001 74 00000000 0000018bcfe56800 ffffffffffffffff",
    );
    assert_eq!(decode_value(Some(&empty_with_list)).unwrap(), Some(empty()));
}

fn arb_state() -> impl Strategy<Value = TransactionState> {
    proptest::sample::select(TransactionState::ALL.to_vec())
}

fn arb_value(tagged: bool) -> impl Strategy<Value = TransactionLogValue> {
    (
        (any::<i64>(), any::<i16>(), any::<i32>(), arb_state()),
        proptest::collection::vec(
            (
                "[a-zA-Z0-9._-]{1,20}",
                proptest::collection::vec(any::<i32>(), 0..5),
            ),
            0..4,
        ),
        (any::<i64>(), any::<i64>()),
        (any::<i64>(), any::<i64>(), any::<i16>(), 0..=2i16),
    )
        .prop_map(
            move |((pid, epoch, timeout, state), parts, (last, start), tags)| {
                let mut value = TransactionLogValue::new(pid, epoch, timeout, state);
                if state != TransactionState::Empty {
                    value.partitions = parts
                        .into_iter()
                        .map(|(topic, partitions)| TxnTopicPartitions { topic, partitions })
                        .collect();
                }
                value.last_update_timestamp_ms = last;
                value.start_timestamp_ms = start;
                if tagged {
                    (
                        value.previous_producer_id,
                        value.next_producer_id,
                        value.next_producer_epoch,
                        value.client_transaction_version,
                    ) = tags;
                }
                value
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn transaction_log_keys_round_trip(id in "\\PC{0,40}") {
        let key = encode_key(&id).unwrap();
        prop_assert_eq!(decode_key(&key).unwrap(), TransactionLogKey::Transaction { transactional_id: id });
    }

    #[test]
    fn transaction_log_values_v0_round_trip(value in arb_value(false)) {
        let bytes = encode_value(&value, 0).unwrap();
        prop_assert_eq!(decode_value(Some(&bytes)).unwrap(), Some(value));
    }

    #[test]
    fn transaction_log_values_v1_round_trip(value in arb_value(true)) {
        let bytes = encode_value(&value, 1).unwrap();
        prop_assert_eq!(decode_value(Some(&bytes)).unwrap(), Some(value));
    }

    #[test]
    fn transaction_log_any_bytes_decode_or_fail_without_panicking(
        key in proptest::collection::vec(any::<u8>(), 0..40),
        value in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..80)),
    ) {
        let _ = read_record(Some(&key), value.as_deref());
        let _ = decode_value(value.as_deref());
    }
}
