//! partlog-engine against Kafka 4.4's own classes (issue 33): `String.hashCode` and
//! `Utils.abs` for the partition of a transactional id, `Utils.murmur2` and
//! `BuiltInPartitioner.partitionForKey` for keys, and the generated `TransactionLogKey` /
//! `TransactionLogValue` classes and `TransactionLog.read` / `valueToBytes` for the records of
//! `__transaction_state`: the golden bytes, random values byte for byte, and Kafka's
//! reader on valid and damaged bytes.
//!
//! `tests/kafka/EngineDriver.java` is compiled against the jars `.ci/kafka-classpath.sh`
//! resolves and fed one command per line. Java and the jars are found as
//! `tests/common/kafka.rs` finds them; without them the tests skip with a message, except
//! under `CI=true`, where they fail.

#[path = "../../../tests/common/java_driver.rs"]
mod java_driver;
#[path = "../../../tests/common/kafka.rs"]
mod kafka;

use std::path::Path;
use std::sync::OnceLock;

use java_driver::{JavaDriver, Random, hex};

use partlog_engine::partitioner::{murmur2, partition_for_key, to_positive};
use partlog_engine::txn::log_records::{
    TransactionLogValue, TxnLogRecord, TxnTopicPartitions, encode_key, encode_value,
    java_string_hash, read_record, transaction_state_partition,
};
use partlog_engine::txn::state::TransactionState;

/// Kafka's classes behind `EngineDriver`, compiled at first use; `None` to skip.
fn driver() -> Option<&'static JavaDriver> {
    static DRIVER: OnceLock<Result<JavaDriver, String>> = OnceLock::new();
    java_driver::compile(
        &DRIVER,
        "EngineDriver",
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kafka/EngineDriver.java"),
        Path::new(env!("CARGO_TARGET_TMPDIR")),
    )
}

/// Runs the driver on `commands`; one answer per command, or `None` to skip.
fn ask(commands: &[String]) -> Option<Vec<String>> {
    Some(driver()?.ask(commands))
}

#[test]
fn transaction_log_java_string_hash_matches_java() {
    let mut random = Random::new(0x5eed);
    let mut ids: Vec<String> = ["g1", "txn-1", "my-group", "polygenelubricants", ""]
        .iter()
        .map(|s| s.to_string())
        .collect();
    ids.extend((0..300).map(|_| random.text(24)));
    let commands: Vec<String> = ids
        .iter()
        .map(|id| format!("hash {}", hex(id.as_bytes())))
        .collect();
    let Some(answers) = ask(&commands) else {
        return;
    };
    for (id, answer) in ids.iter().zip(answers) {
        let ours = format!(
            "{} {}",
            java_string_hash(id),
            transaction_state_partition(id, 50).unwrap()
        );
        assert_eq!(ours, answer, "{id:?}");
    }
}

#[test]
fn murmur2_matches_kafkas_utils() {
    let mut random = Random::new(0xbeef);
    let mut keys: Vec<Vec<u8>> = [
        &b"21"[..],
        b"foobar",
        b"",
        b"a",
        b"key",
        &[0, 0, 0, 1],
        &[0xff; 5],
        "café".as_bytes(),
    ]
    .iter()
    .map(|k| k.to_vec())
    .collect();
    keys.extend((0..300).map(|_| (0..random.below(40)).map(|_| random.next() as u8).collect()));
    let commands: Vec<String> = keys.iter().map(|k| format!("murmur2 {}", hex(k))).collect();
    let Some(answers) = ask(&commands) else {
        return;
    };
    for (key, answer) in keys.iter().zip(answers) {
        let hash = murmur2(key);
        let mut ours = format!("{hash} {}", to_positive(hash));
        for n in [3, 6, 10, 12, 50, 100] {
            ours.push_str(&format!(" {}", partition_for_key(key, n).unwrap()));
        }
        assert_eq!(ours, answer, "key {}", hex(key));
    }
}

/// `value V PID PREV NEXT EPOCH NEXT_EPOCH TIMEOUT STATE LAST START CTV PARTS` for the driver.
fn value_command(value: &TransactionLogValue, version: i16) -> String {
    let parts = if value.state == TransactionState::Empty {
        "-".to_owned()
    } else {
        parts_field(&value.partitions)
    };
    format!(
        "value {version} {} {} {} {} {} {} {} {} {} {} {parts}",
        value.producer_id,
        value.previous_producer_id,
        value.next_producer_id,
        value.producer_epoch,
        value.next_producer_epoch,
        value.transaction_timeout_ms,
        value.state.id(),
        value.last_update_timestamp_ms,
        value.start_timestamp_ms,
        value.client_transaction_version,
    )
}

fn parts_field(partitions: &[TxnTopicPartitions]) -> String {
    if partitions.is_empty() {
        return ".".to_owned();
    }
    partitions
        .iter()
        .map(|t| {
            let ids: Vec<String> = t.partitions.iter().map(i32::to_string).collect();
            format!("{}:{}", hex(t.topic.as_bytes()), ids.join(","))
        })
        .collect::<Vec<_>>()
        .join(";")
}

const T: i64 = 1_700_000_000_000;

fn golden_values() -> Vec<(TransactionLogValue, i16, &'static str)> {
    let mut ongoing = TransactionLogValue::new(1000, 0, 60_000, TransactionState::Ongoing);
    ongoing.partitions = vec![TxnTopicPartitions {
        topic: "t".into(),
        partitions: vec![0, 1],
    }];
    ongoing.last_update_timestamp_ms = T;
    ongoing.start_timestamp_ms = T;
    let mut empty = TransactionLogValue::new(1000, 0, 60_000, TransactionState::Empty);
    empty.last_update_timestamp_ms = T;
    let mut tagged = empty.clone();
    tagged.previous_producer_id = 999;
    tagged.next_producer_id = 2000;
    tagged.client_transaction_version = 2;
    tagged.next_producer_epoch = 0;
    vec![
        (
            ongoing.clone(),
            0,
            "000000000000000003e800000000ea6001000000010001740000000200000000000000010000018bcfe568000000018bcfe56800",
        ),
        (
            empty,
            0,
            "000000000000000003e800000000ea6000ffffffff0000018bcfe56800ffffffffffffffff",
        ),
        (
            ongoing,
            1,
            "000100000000000003e800000000ea6001020274030000000000000001000000018bcfe568000000018bcfe5680000",
        ),
        (
            tagged,
            1,
            "000100000000000003e800000000ea6000000000018bcfe56800ffffffffffffffff04000800000000000003e7010800000000000007d00202000203020000",
        ),
    ]
}

/// The golden bytes of `transaction_log.rs` are what Kafka's generated classes write.
#[test]
fn transaction_log_golden_bytes_are_kafkas_generated_classes() {
    let values = golden_values();
    let mut commands = vec![format!("key {}", hex(b"txn-1"))];
    commands.extend(
        values
            .iter()
            .map(|(value, version, _)| value_command(value, *version)),
    );
    let Some(answers) = ask(&commands) else {
        return;
    };
    assert_eq!(answers[0], "0000000574786e2d31");
    assert_eq!(hex(&encode_key("txn-1").unwrap()), answers[0]);
    for ((value, version, golden), answer) in values.iter().zip(&answers[1..]) {
        assert_eq!(answer, golden, "Kafka's bytes for {value:?} v{version}");
        assert_eq!(&hex(&encode_value(value, *version).unwrap()), golden);
    }
}

/// What Kafka's coordinator writes (`TransactionLog.valueToBytes` of a `TxnTransitMetadata`)
/// at transaction.version 0 and 2: version 0 without tagged fields, version 1 with the
/// client's transaction version and the previous and next producer ids when set. partlog's
/// encoder, given the same fields, writes the same bytes.
#[test]
fn transaction_log_values_of_kafkas_coordinator_at_each_transaction_version() {
    let cases = [
        // tv, pid, prev, next, epoch, state, partitions
        (0, 1000, -1, -1, 0, TransactionState::Ongoing, "74:0"),
        (2, 1000, -1, -1, 0, TransactionState::Ongoing, "74:0"),
        (2, 1000, 7, 2000, 5, TransactionState::CompleteCommit, "."),
        (2, 1000, -1, -1, 3, TransactionState::Empty, "-"),
        (
            1,
            42,
            -1,
            43,
            32767,
            TransactionState::PrepareAbort,
            "6162:3",
        ),
    ];
    let commands: Vec<String> = cases
        .iter()
        .map(|(tv, pid, prev, next, epoch, state, parts)| {
            format!(
                "transit {tv} {pid} {prev} {next} {epoch} -1 60000 {} {T} {T} {parts}",
                state.id()
            )
        })
        .collect();
    let Some(answers) = ask(&commands) else {
        return;
    };
    for ((tv, pid, prev, next, epoch, state, parts), answer) in cases.iter().zip(answers) {
        let mut value = TransactionLogValue::new(*pid, *epoch, 60_000, *state);
        value.partitions = match *parts {
            "74:0" => vec![TxnTopicPartitions {
                topic: "t".into(),
                partitions: vec![0],
            }],
            "6162:3" => vec![TxnTopicPartitions {
                topic: "ab".into(),
                partitions: vec![3],
            }],
            _ => Vec::new(),
        };
        value.last_update_timestamp_ms = T;
        value.start_timestamp_ms = T;
        let version = partlog_engine::txn::log_records::value_version_for(*tv);
        if version == 1 {
            (value.previous_producer_id, value.next_producer_id) = (*prev, *next);
            value.client_transaction_version = *tv;
        }
        assert_eq!(
            hex(&encode_value(&value, version).unwrap()),
            answer,
            "tv {tv}, {value:?}"
        );
    }
}

fn random_value(random: &mut Random) -> TransactionLogValue {
    let state = TransactionState::ALL[random.below(8) as usize];
    let mut value = TransactionLogValue::new(
        random.next() as i64 >> random.below(64),
        random.next() as i16,
        random.next() as i32,
        state,
    );
    if state != TransactionState::Empty {
        value.partitions = (0..random.below(4))
            .map(|_| TxnTopicPartitions {
                topic: random.text(12),
                partitions: (0..random.below(5))
                    .map(|_| random.next() as i32 >> random.below(32))
                    .collect(),
            })
            .collect();
    }
    value.last_update_timestamp_ms = random.next() as i64;
    value.start_timestamp_ms = if random.below(4) == 0 {
        -1
    } else {
        random.next() as i64
    };
    if random.below(2) == 0 {
        value.previous_producer_id = random.next() as i64 >> 20;
        value.next_producer_id = random.next() as i64 >> 20;
        value.next_producer_epoch = random.next() as i16;
        value.client_transaction_version = random.below(3) as i16;
    }
    value
}

/// Random values, both versions: partlog writes exactly the bytes of Kafka's generated
/// `TransactionLogValue`, and refuses exactly what it refuses (tagged fields at version 0).
#[test]
fn transaction_log_random_values_are_kafkas_bytes() {
    let mut random = Random::new(0xfeed_f00d);
    let cases: Vec<(TransactionLogValue, i16)> = (0..400)
        .map(|i| (random_value(&mut random), (i % 2) as i16))
        .collect();
    let commands: Vec<String> = cases
        .iter()
        .map(|(v, version)| value_command(v, *version))
        .collect();
    let Some(answers) = ask(&commands) else {
        return;
    };
    for ((value, version), answer) in cases.iter().zip(answers) {
        match encode_value(value, *version) {
            Ok(bytes) => assert_eq!(hex(&bytes), answer, "v{version} {value:?}"),
            Err(error) => assert!(
                answer.starts_with("error"),
                "partlog refused ({error}) what Kafka wrote: {value:?}"
            ),
        }
    }
}

/// `read_record` as the driver's canonical line of `TransactionLog.read`.
fn describe(key: &[u8], value: Option<&[u8]>) -> String {
    match read_record(Some(key), value) {
        Err(_) => "error".to_owned(),
        Ok(TxnLogRecord::Tombstone { transactional_id }) => {
            format!("tombstone {}", hex(transactional_id.as_bytes()))
        }
        Ok(TxnLogRecord::UnknownKeyVersion { version }) => format!("unknown-key {version}"),
        Ok(TxnLogRecord::UnknownValueVersion { version, .. }) => format!("unknown-value {version}"),
        Ok(TxnLogRecord::Value {
            transactional_id,
            value: v,
        }) => {
            let mut set: std::collections::BTreeMap<String, std::collections::BTreeSet<i32>> =
                Default::default();
            // Kafka keeps a set of topic-partitions: a topic listed without partitions adds none.
            for topic in v.partitions.iter().filter(|t| !t.partitions.is_empty()) {
                set.entry(hex(topic.topic.as_bytes()))
                    .or_default()
                    .extend(&topic.partitions);
            }
            let parts = if set.is_empty() {
                ".".to_owned()
            } else {
                set.iter()
                    .map(|(topic, ids)| {
                        let ids: Vec<String> = ids.iter().map(i32::to_string).collect();
                        format!("{topic}:{}", ids.join(","))
                    })
                    .collect::<Vec<_>>()
                    .join(";")
            };
            format!(
                "txn {} {} {} {} {} {} {} {} {} {} {parts}",
                hex(transactional_id.as_bytes()),
                v.producer_id,
                v.previous_producer_id,
                v.next_producer_id,
                v.producer_epoch,
                v.transaction_timeout_ms,
                v.state.id(),
                v.last_update_timestamp_ms,
                v.start_timestamp_ms,
                v.client_transaction_version,
            )
        }
    }
}

/// Kafka's `TransactionLog.read` and partlog's `read_record` agree on every record: partlog's
/// own, and the same bytes cut short, with a byte changed, or random. Where Kafka throws,
/// partlog returns an error; where Kafka reads, partlog reads the same fields.
#[test]
fn transaction_log_kafkas_reader_agrees_on_valid_and_damaged_records() {
    let mut random = Random::new(0xdead_beef);
    let mut records: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
    for i in 0..300 {
        let id = random.text(10);
        let key = encode_key(&id).unwrap();
        let mut value = random_value(&mut random);
        let version = (i % 2) as i16;
        if version == 0 {
            value.previous_producer_id = -1;
            value.next_producer_id = -1;
            value.next_producer_epoch = -1;
            value.client_transaction_version = 0;
        }
        let bytes = encode_value(&value, version).unwrap();
        let damaged = match i % 6 {
            0 | 1 => bytes,
            2 => bytes[..random.below(bytes.len() as u64) as usize].to_vec(),
            3 | 4 => {
                let mut b = bytes;
                let at = random.below(b.len() as u64) as usize;
                b[at] = random.next() as u8;
                b
            }
            _ => (0..random.below(60)).map(|_| random.next() as u8).collect(),
        };
        records.push((key.clone(), Some(damaged)));
        if i % 25 == 0 {
            records.push((key, None));
            records.push((
                (0..random.below(8)).map(|_| random.next() as u8).collect(),
                None,
            ));
        }
    }
    let commands: Vec<String> = records
        .iter()
        .map(|(key, value)| {
            format!(
                "read {} {}",
                hex(key),
                value.as_deref().map_or("-".to_owned(), hex)
            )
        })
        .collect();
    let Some(answers) = ask(&commands) else {
        return;
    };
    let mut errors = 0;
    for ((key, value), answer) in records.iter().zip(answers) {
        let ours = describe(key, value.as_deref());
        let theirs = if answer.starts_with("error") {
            "error".to_owned()
        } else {
            answer
        };
        errors += usize::from(ours == "error");
        assert_eq!(
            ours,
            theirs,
            "key {} value {:?}",
            hex(key),
            value.as_deref().map(hex)
        );
    }
    assert!(
        errors > 20 && errors < records.len() / 2,
        "{errors} of {} refused",
        records.len()
    );
}
