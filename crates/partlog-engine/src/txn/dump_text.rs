//! The text Kafka's `DumpLogSegments --transaction-log-decoder` prints for a
//! `__transaction_state` record, for `partlog dump --transaction-log-decoder`: the key and the
//! value as the JSON of Kafka's generated `TransactionLogKey` / `TransactionLogValue`
//! converters (fields in schema order, tagged fields only when set), `<DELETE>` for a
//! tombstone.

use super::log_records::{TransactionLogValue, TxnLogRecord, read_record};
use super::state::TransactionState;

/// The key and payload texts DumpLogSegments' transaction-log decoder prints for the record at
/// `offset` with `key` and `value`. A record that does not decode gets Kafka's "skipping" line
/// as its key text and no payload, so a dump of a damaged partition goes on.
pub fn kafka_decoder_text(
    offset: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) -> (Option<String>, Option<String>) {
    match read_record(key, value) {
        Ok(TxnLogRecord::Value {
            transactional_id,
            value: decoded,
        }) => {
            let version = value
                .and_then(|bytes| bytes.first_chunk::<2>())
                .map_or(0, |version| i16::from_be_bytes(*version));
            (
                Some(key_json(&transactional_id)),
                Some(value_json(&decoded, version)),
            )
        }
        Ok(TxnLogRecord::Tombstone { transactional_id }) => (
            Some(key_json(&transactional_id)),
            Some("<DELETE>".to_owned()),
        ),
        Ok(TxnLogRecord::UnknownKeyVersion { version }) => (
            Some(format!(
                "Unknown record type {version} at offset {offset}, skipping."
            )),
            None,
        ),
        Ok(TxnLogRecord::UnknownValueVersion { version, .. }) => (
            Some(format!(
                "Error at offset {offset}, skipping. Unknown value version {version}."
            )),
            None,
        ),
        Err(error) => (
            Some(format!("Error at offset {offset}, skipping. {error}")),
            None,
        ),
    }
}

fn key_json(transactional_id: &str) -> String {
    format!(
        "{{\"type\":\"0\",\"data\":{{\"transactionalId\":{}}}}}",
        json_string(transactional_id)
    )
}

fn value_json(value: &TransactionLogValue, version: i16) -> String {
    let tagged = version >= 1;
    let mut fields = vec![format!("\"producerId\":{}", value.producer_id)];
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
    // Kafka writes an Empty transaction's partitions as null.
    let partitions = if value.state == TransactionState::Empty {
        "null".to_owned()
    } else {
        let topics: Vec<String> = value
            .partitions
            .iter()
            .map(|topic| {
                let ids: Vec<String> = topic.partitions.iter().map(i32::to_string).collect();
                format!(
                    "{{\"topic\":{},\"partitionIds\":[{}]}}",
                    json_string(&topic.topic),
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

/// A JSON string as Jackson writes one: `"` and `\` escaped, the short escapes for the usual
/// control characters and `\u00XX` for the others; everything else as it is.
fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::log_records::{encode_key, encode_value};

    #[test]
    fn a_tombstone_and_an_undecodable_record_print_as_kafka_prints_them() {
        let key = encode_key("t\"1").unwrap();
        assert_eq!(
            kafka_decoder_text(3, Some(&key), None),
            (
                Some(r#"{"type":"0","data":{"transactionalId":"t\"1"}}"#.to_owned()),
                Some("<DELETE>".to_owned())
            )
        );
        let (text, payload) = kafka_decoder_text(4, Some(&[0, 0, 0]), None);
        assert!(
            text.as_deref()
                .is_some_and(|text| text.starts_with("Error at offset 4, skipping.")),
            "{text:?}"
        );
        assert_eq!(payload, None);
        assert_eq!(
            kafka_decoder_text(5, Some(&[0, 9, 0, 0]), None)
                .0
                .as_deref(),
            Some("Unknown record type 9 at offset 5, skipping.")
        );
    }

    #[test]
    fn an_empty_state_has_null_partitions() {
        let mut value = TransactionLogValue::new(1000, 0, 60_000, TransactionState::Empty);
        value.last_update_timestamp_ms = 1;
        let bytes = encode_value(&value, 0).unwrap();
        let (_, payload) = kafka_decoder_text(0, Some(&encode_key("a").unwrap()), Some(&bytes));
        assert_eq!(
            payload.as_deref(),
            Some(
                r#"{"version":"0","data":{"producerId":1000,"producerEpoch":0,"transactionTimeoutMs":60000,"transactionStatus":"Empty","transactionPartitions":null,"transactionLastUpdateTimestampMs":1,"transactionStartTimestampMs":-1}}"#
            )
        );
    }
}
