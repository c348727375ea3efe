//! partlog's decoded `__consumer_offsets` records rendered as Kafka's
//! `CoordinatorRecordJsonConverters` render them (what `DumpLogSegments --offsets-decoder` and
//! the Java driver print): fields in schema order, bytes as base64.
#![allow(
    dead_code,
    reason = "each test crate that includes it uses a different part"
)]

use partlog_groups::group::consumer_protocol::{Assignment, Subscription, TopicPartitions};
use partlog_groups::offsets::records::{
    GroupMetadataValue, MemberMetadata, OffsetCommitValue, OffsetsKey,
};

pub fn string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            // Jackson's short escapes, then \u00XX for the other control characters.
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn nullable(s: Option<&str>) -> String {
    s.map_or_else(|| "null".to_owned(), string)
}

pub fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().fold(0u32, |n, b| n << 8 | u32::from(*b)) << (8 * (3 - chunk.len()));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

pub fn key(key: &OffsetsKey) -> String {
    match key {
        OffsetsKey::OffsetCommit {
            group,
            topic,
            partition,
        } => format!(
            "{{\"group\":{},\"topic\":{},\"partition\":{partition}}}",
            string(group),
            string(topic)
        ),
        OffsetsKey::GroupMetadata { group } => format!("{{\"group\":{}}}", string(group)),
        OffsetsKey::Other { .. } => unreachable!(),
    }
}

pub fn offset_value(v: &OffsetCommitValue, version: i16) -> String {
    let mut fields = vec![format!("\"offset\":{}", v.offset)];
    if version >= 3 {
        fields.push(format!("\"leaderEpoch\":{}", v.leader_epoch));
    }
    fields.push(format!("\"metadata\":{}", string(&v.metadata)));
    fields.push(format!("\"commitTimestamp\":{}", v.commit_timestamp));
    if version == 1 {
        fields.push(format!(
            "\"expireTimestamp\":{}",
            v.expire_timestamp.unwrap_or(-1)
        ));
    }
    if version >= 4 && v.topic_id != [0; 16] {
        fields.push(format!("\"topicId\":\"{}\"", uuid(&v.topic_id)));
    }
    format!("{{{}}}", fields.join(","))
}

/// Kafka's `Uuid.toString`: URL-safe base64 without padding.
fn uuid(id: &[u8; 16]) -> String {
    base64(id)
        .trim_end_matches('=')
        .replace('+', "-")
        .replace('/', "_")
}

/// As [`group_value`], with a `consumer` group's blobs decoded as DumpLogSegments'
/// `--offsets-decoder` prints them.
pub fn dumped_group_value(g: &GroupMetadataValue, version: i16) -> String {
    render_group(g, version, g.protocol_type == "consumer")
}

/// A group value as Kafka's JSON converter renders it (blobs as base64).
pub fn group_value(g: &GroupMetadataValue, version: i16) -> String {
    render_group(g, version, false)
}

fn render_group(g: &GroupMetadataValue, version: i16, blobs: bool) -> String {
    let mut fields = vec![
        format!("\"protocolType\":{}", string(&g.protocol_type)),
        format!("\"generation\":{}", g.generation),
        format!("\"protocol\":{}", nullable(g.protocol.as_deref())),
        format!("\"leader\":{}", nullable(g.leader.as_deref())),
    ];
    if version >= 2 {
        fields.push(format!(
            "\"currentStateTimestamp\":{}",
            g.current_state_timestamp
        ));
    }
    let members: Vec<String> = g
        .members
        .iter()
        .map(|m| member(m, version, blobs))
        .collect();
    fields.push(format!("\"members\":[{}]", members.join(",")));
    format!("{{{}}}", fields.join(","))
}

fn member(m: &MemberMetadata, version: i16, blobs: bool) -> String {
    let mut fields = vec![format!("\"memberId\":{}", string(&m.member_id))];
    if version >= 3 {
        fields.push(format!(
            "\"groupInstanceId\":{}",
            nullable(m.group_instance_id.as_deref())
        ));
    }
    fields.push(format!("\"clientId\":{}", string(&m.client_id)));
    fields.push(format!("\"clientHost\":{}", string(&m.client_host)));
    if version >= 1 {
        fields.push(format!("\"rebalanceTimeout\":{}", m.rebalance_timeout));
    }
    fields.push(format!("\"sessionTimeout\":{}", m.session_timeout));
    if blobs {
        fields.push(format!(
            "\"subscription\":{}",
            subscription(&m.subscription)
        ));
        fields.push(format!("\"assignment\":{}", assignment(&m.assignment)));
    } else {
        fields.push(format!("\"subscription\":\"{}\"", base64(&m.subscription)));
        fields.push(format!("\"assignment\":\"{}\"", base64(&m.assignment)));
    }
    format!("{{{}}}", fields.join(","))
}

fn nullable_bytes(b: Option<&[u8]>) -> String {
    b.map_or_else(|| "null".to_owned(), |b| format!("\"{}\"", base64(b)))
}

fn topic_partitions(list: &[TopicPartitions]) -> String {
    let items: Vec<String> = list
        .iter()
        .map(|t| {
            let ids: Vec<String> = t.partitions.iter().map(i32::to_string).collect();
            format!(
                "{{\"topic\":{},\"partitions\":[{}]}}",
                string(&t.topic),
                ids.join(",")
            )
        })
        .collect();
    format!("[{}]", items.join(","))
}

/// A `ConsumerProtocolSubscription` blob as Kafka's JSON converter renders it at its version.
pub fn subscription(blob: &[u8]) -> String {
    let version = i16::from_be_bytes([blob[0], blob[1]]);
    let s = Subscription::decode(blob).expect("a subscription");
    let topics: Vec<String> = s.topics.iter().map(|t| string(t)).collect();
    let mut fields = vec![
        format!("\"topics\":[{}]", topics.join(",")),
        format!("\"userData\":{}", nullable_bytes(s.user_data.as_deref())),
    ];
    if version >= 1 {
        fields.push(format!(
            "\"ownedPartitions\":{}",
            topic_partitions(&s.owned_partitions)
        ));
    }
    if version >= 2 {
        fields.push(format!("\"generationId\":{}", s.generation_id));
    }
    if version >= 3 {
        fields.push(format!("\"rackId\":{}", nullable(s.rack_id.as_deref())));
    }
    format!("{{{}}}", fields.join(","))
}

/// A `ConsumerProtocolAssignment` blob as Kafka's JSON converter renders it.
pub fn assignment(blob: &[u8]) -> String {
    let a = Assignment::decode(blob).expect("an assignment");
    format!(
        "{{\"assignedPartitions\":{},\"userData\":{}}}",
        topic_partitions(&a.assigned_partitions),
        nullable_bytes(a.user_data.as_deref())
    )
}
