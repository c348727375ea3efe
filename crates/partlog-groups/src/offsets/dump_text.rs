//! The text Kafka's `DumpLogSegments --offsets-decoder` prints for a `__consumer_offsets`
//! record, for `partlog dump --offsets-decoder`: the key and the value as the JSON of Kafka's
//! generated `*JsonConverter` classes (fields in schema order, bytes as base64, tagged fields
//! only when set), wrapped as `{"type":"T","data":..}` and `{"version":"V","data":..}`, and
//! `<DELETE>` for a tombstone. In a `consumer` group's record the members' subscription and
//! assignment blobs are decoded too, as the decoder does; a blob that does not parse stays
//! base64, as it does there.
//!
//! The pieces are public so that tests comparing partlog's records with Kafka's JSON
//! converters use this rendering, not a second one.

use super::records::{GroupMetadataValue, MemberMetadata, OffsetCommitValue, OffsetsKey};
use crate::group::consumer_protocol::{
    Assignment, CONSUMER_PROTOCOL_VERSION, Subscription, TopicPartitions,
};

/// How a group record's member blobs are rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberBlobs {
    /// Base64, as `GroupMetadataValueJsonConverter` writes every `bytes` field.
    Base64,
    /// For a group whose protocol type is `consumer`, decoded as DumpLogSegments'
    /// `--offsets-decoder` prints them (`ConsumerProtocolSubscription` and
    /// `ConsumerProtocolAssignment` JSON); base64 otherwise, or when a blob does not parse.
    ConsumerProtocol,
}

/// The key and payload texts DumpLogSegments' offsets decoder prints for the record at
/// `offset` with `key` and `value`. A record that does not decode gets Kafka's "skipping" line
/// as its key text and no payload, so a dump of a damaged partition goes on.
pub fn kafka_decoder_text(
    offset: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) -> (Option<String>, Option<String>) {
    let Some(key) = key else {
        // Kafka 4.4's decoder throws here with these words; the dump goes on instead.
        return (
            Some(format!(
                "Failed to decode message at offset {offset} using the specified decoder \
                 (message had a missing key)"
            )),
            None,
        );
    };
    match decoded_texts(key, value) {
        Ok(Decoded::Texts(key, payload)) => (Some(key), Some(payload)),
        Ok(Decoded::UnknownType(record_type)) => (
            Some(format!(
                "Unknown record type {record_type} at offset {offset}, skipping."
            )),
            None,
        ),
        Err(error) => (
            Some(format!("Error at offset {offset}, skipping. {error}")),
            None,
        ),
    }
}

enum Decoded {
    Texts(String, String),
    UnknownType(i16),
}

fn decoded_texts(key: &[u8], value: Option<&[u8]>) -> Result<Decoded, crate::DecodeError> {
    let decoded_key = OffsetsKey::decode(key)?;
    let Some(key_data) = key_json(&decoded_key) else {
        let record_type = key
            .first_chunk::<2>()
            .map_or(-1, |t| i16::from_be_bytes(*t));
        return Ok(Decoded::UnknownType(record_type));
    };
    // Kafka prints the record type it read: a key of type 0 stays 0.
    let record_type = key.first_chunk::<2>().map_or(0, |t| i16::from_be_bytes(*t));
    let key_text = format!("{{\"type\":\"{record_type}\",\"data\":{key_data}}}");
    let Some(value) = value else {
        return Ok(Decoded::Texts(key_text, "<DELETE>".to_owned()));
    };
    let version = value
        .first_chunk::<2>()
        .map_or(0, |v| i16::from_be_bytes(*v));
    let data = match decoded_key {
        OffsetsKey::GroupMetadata { .. } => group_metadata_value_json(
            &GroupMetadataValue::decode(value)?,
            version,
            MemberBlobs::ConsumerProtocol,
        ),
        _ => offset_commit_value_json(&OffsetCommitValue::decode(value)?, version),
    };
    Ok(Decoded::Texts(
        key_text,
        format!("{{\"version\":\"{version}\",\"data\":{data}}}"),
    ))
}

/// A key's fields as `OffsetCommitKeyJsonConverter` / `GroupMetadataKeyJsonConverter` write
/// them; `None` for a record type partlog does not decode.
pub fn key_json(key: &OffsetsKey) -> Option<String> {
    match key {
        OffsetsKey::OffsetCommit {
            group,
            topic,
            partition,
        } => Some(format!(
            "{{\"group\":{},\"topic\":{},\"partition\":{partition}}}",
            json_string(group),
            json_string(topic)
        )),
        OffsetsKey::GroupMetadata { group } => {
            Some(format!("{{\"group\":{}}}", json_string(group)))
        }
        OffsetsKey::Other { .. } => None,
    }
}

/// An offset commit value as `OffsetCommitValueJsonConverter` writes it at `version`.
pub fn offset_commit_value_json(value: &OffsetCommitValue, version: i16) -> String {
    let mut fields = vec![format!("\"offset\":{}", value.offset)];
    if version >= 3 {
        fields.push(format!("\"leaderEpoch\":{}", value.leader_epoch));
    }
    fields.push(format!("\"metadata\":{}", json_string(&value.metadata)));
    fields.push(format!("\"commitTimestamp\":{}", value.commit_timestamp));
    if version == 1 {
        fields.push(format!(
            "\"expireTimestamp\":{}",
            value.expire_timestamp.unwrap_or(-1)
        ));
    }
    if version >= 4 && value.topic_id != [0; 16] {
        fields.push(format!("\"topicId\":\"{}\"", kafka_uuid(&value.topic_id)));
    }
    format!("{{{}}}", fields.join(","))
}

/// A group value as `GroupMetadataValueJsonConverter` writes it at `version`, with the member
/// blobs as `blobs` says.
pub fn group_metadata_value_json(
    value: &GroupMetadataValue,
    version: i16,
    blobs: MemberBlobs,
) -> String {
    let decode_blobs = blobs == MemberBlobs::ConsumerProtocol && value.protocol_type == "consumer";
    let mut fields = vec![
        format!("\"protocolType\":{}", json_string(&value.protocol_type)),
        format!("\"generation\":{}", value.generation),
        format!(
            "\"protocol\":{}",
            nullable_string(value.protocol.as_deref())
        ),
        format!("\"leader\":{}", nullable_string(value.leader.as_deref())),
    ];
    if version >= 2 {
        fields.push(format!(
            "\"currentStateTimestamp\":{}",
            value.current_state_timestamp
        ));
    }
    let members: Vec<String> = value
        .members
        .iter()
        .map(|member| member_json(member, version, decode_blobs))
        .collect();
    fields.push(format!("\"members\":[{}]", members.join(",")));
    format!("{{{}}}", fields.join(","))
}

fn member_json(member: &MemberMetadata, version: i16, decode_blobs: bool) -> String {
    let mut fields = vec![format!("\"memberId\":{}", json_string(&member.member_id))];
    if version >= 3 {
        fields.push(format!(
            "\"groupInstanceId\":{}",
            nullable_string(member.group_instance_id.as_deref())
        ));
    }
    fields.push(format!("\"clientId\":{}", json_string(&member.client_id)));
    fields.push(format!(
        "\"clientHost\":{}",
        json_string(&member.client_host)
    ));
    if version >= 1 {
        fields.push(format!("\"rebalanceTimeout\":{}", member.rebalance_timeout));
    }
    fields.push(format!("\"sessionTimeout\":{}", member.session_timeout));
    let subscription = decode_blobs
        .then(|| subscription_json(&member.subscription))
        .flatten()
        .unwrap_or_else(|| format!("\"{}\"", base64(&member.subscription)));
    let assignment = decode_blobs
        .then(|| assignment_json(&member.assignment))
        .flatten()
        .unwrap_or_else(|| format!("\"{}\"", base64(&member.assignment)));
    fields.push(format!("\"subscription\":{subscription}"));
    fields.push(format!("\"assignment\":{assignment}"));
    format!("{{{}}}", fields.join(","))
}

/// A `ConsumerProtocolSubscription` blob as its JSON converter writes it at the blob's
/// version; `None` when the blob does not parse.
pub fn subscription_json(blob: &[u8]) -> Option<String> {
    let version = blob_version(blob)?;
    let subscription = Subscription::decode(blob).ok()?;
    let topics: Vec<String> = subscription.topics.iter().map(|t| json_string(t)).collect();
    let mut fields = vec![
        format!("\"topics\":[{}]", topics.join(",")),
        format!(
            "\"userData\":{}",
            nullable_base64(subscription.user_data.as_deref())
        ),
    ];
    if version >= 1 {
        fields.push(format!(
            "\"ownedPartitions\":{}",
            topic_partitions_json(&subscription.owned_partitions)
        ));
    }
    if version >= 2 {
        fields.push(format!("\"generationId\":{}", subscription.generation_id));
    }
    if version >= 3 {
        fields.push(format!(
            "\"rackId\":{}",
            nullable_string(subscription.rack_id.as_deref())
        ));
    }
    Some(format!("{{{}}}", fields.join(",")))
}

/// A `ConsumerProtocolAssignment` blob as its JSON converter writes it; `None` when the blob
/// does not parse.
pub fn assignment_json(blob: &[u8]) -> Option<String> {
    let assignment = Assignment::decode(blob).ok()?;
    Some(format!(
        "{{\"assignedPartitions\":{},\"userData\":{}}}",
        topic_partitions_json(&assignment.assigned_partitions),
        nullable_base64(assignment.user_data.as_deref())
    ))
}

/// The blob's version as its reader takes it (a newer version reads as the newest known).
fn blob_version(blob: &[u8]) -> Option<i16> {
    let version = i16::from_be_bytes(*blob.first_chunk::<2>()?);
    Some(version.min(CONSUMER_PROTOCOL_VERSION))
}

fn topic_partitions_json(list: &[TopicPartitions]) -> String {
    let items: Vec<String> = list
        .iter()
        .map(|topic| {
            let ids: Vec<String> = topic.partitions.iter().map(i32::to_string).collect();
            format!(
                "{{\"topic\":{},\"partitions\":[{}]}}",
                json_string(&topic.topic),
                ids.join(",")
            )
        })
        .collect();
    format!("[{}]", items.join(","))
}

fn nullable_string(text: Option<&str>) -> String {
    text.map_or_else(|| "null".to_owned(), json_string)
}

fn nullable_base64(bytes: Option<&[u8]>) -> String {
    bytes.map_or_else(|| "null".to_owned(), |b| format!("\"{}\"", base64(b)))
}

/// A JSON string as Jackson writes one: `"` and `\` escaped, the short escapes for the usual
/// control characters and `\u00XX` for the others; everything else as it is.
pub fn json_string(text: &str) -> String {
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

/// RFC 4648 base64, standard alphabet, padded: how Jackson writes a `bytes` field.
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().fold(0u32, |n, b| (n << 8) | u32::from(*b)) << (8 * (3 - chunk.len()));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Kafka's `Uuid.toString`: URL-safe base64 without padding.
fn kafka_uuid(id: &[u8; 16]) -> String {
    base64(id)
        .trim_end_matches('=')
        .replace('+', "-")
        .replace('/', "_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_pads_as_rfc_4648_says() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(&[0xfb, 0xff]), "+/8=");
    }

    #[test]
    fn a_tombstone_an_unknown_type_and_a_bad_record_print_as_kafka_prints_them() {
        let key = OffsetsKey::GroupMetadata {
            group: "g\"1".into(),
        }
        .encode()
        .unwrap();
        assert_eq!(
            kafka_decoder_text(3, Some(&key), None),
            (
                Some(r#"{"type":"2","data":{"group":"g\"1"}}"#.to_owned()),
                Some("<DELETE>".to_owned())
            )
        );
        assert_eq!(
            kafka_decoder_text(4, Some(&[0, 5, 0, 0]), Some(b"x"))
                .0
                .as_deref(),
            Some("Unknown record type 5 at offset 4, skipping.")
        );
        let (text, payload) = kafka_decoder_text(5, Some(&[0, 1, 0]), None);
        assert!(
            text.as_deref()
                .is_some_and(|t| t.starts_with("Error at offset 5, skipping.")),
            "{text:?}"
        );
        assert_eq!(payload, None);
        assert_eq!(
            kafka_decoder_text(6, None, Some(b"x")),
            (
                Some(
                    "Failed to decode message at offset 6 using the specified decoder (message \
                     had a missing key)"
                        .to_owned()
                ),
                None
            )
        );
    }

    #[test]
    fn a_consumer_group_blob_that_does_not_parse_stays_base64() {
        let value = GroupMetadataValue {
            protocol_type: "consumer".into(),
            generation: 1,
            protocol: Some("range".into()),
            leader: Some("m".into()),
            current_state_timestamp: 5,
            members: vec![MemberMetadata {
                member_id: "m".into(),
                group_instance_id: None,
                client_id: "c".into(),
                client_host: "/h".into(),
                rebalance_timeout: 2,
                session_timeout: 1,
                subscription: vec![0, 0, 0],
                assignment: Assignment::default().encode(0).unwrap(),
            }],
        };
        let text = group_metadata_value_json(&value, 3, MemberBlobs::ConsumerProtocol);
        assert!(
            text.ends_with(
                r#""subscription":"AAAA","assignment":{"assignedPartitions":[],"userData":null}}]}"#
            ),
            "{text}"
        );
        let raw = group_metadata_value_json(&value, 3, MemberBlobs::Base64);
        assert!(
            raw.ends_with(r#""subscription":"AAAA","assignment":"AAAAAAAA/////w=="}]}"#),
            "{raw}"
        );
    }
}
