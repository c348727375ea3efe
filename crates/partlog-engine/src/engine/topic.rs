//! Topic names, partition directory names and topic ids, by Kafka's rules.

use std::fmt;
use std::str::FromStr;

use partlog::Error;

use crate::partitioner::random_u64;

/// The longest topic name Kafka accepts (`Topic.MAX_NAME_LENGTH`): a partition directory name
/// (`<topic>-<partition>`, plus Kafka's `.<uuid>-delete` suffix) must stay under 255 bytes.
pub const MAX_TOPIC_NAME_LENGTH: usize = 249;

/// Kafka's `Topic.validate`: a name of 1 to 249 characters out of `[a-zA-Z0-9._-]`, neither
/// `.` nor `..`.
///
/// # Errors
/// `InvalidArgument` saying why, in Kafka's words.
pub fn validate_topic_name(name: &str) -> Result<(), Error> {
    let why = if name.is_empty() {
        "the empty string is not allowed".to_owned()
    } else if name == "." {
        "'.' is not allowed".to_owned()
    } else if name == ".." {
        "'..' is not allowed".to_owned()
    } else if name.len() > MAX_TOPIC_NAME_LENGTH {
        format!(
            "the length of '{name}' is longer than the max allowed length {MAX_TOPIC_NAME_LENGTH}"
        )
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        format!(
            "'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
        )
    } else {
        return Ok(());
    };
    Err(Error::InvalidArgument {
        why: format!("Topic name is invalid: {why}"),
    })
}

/// Kafka's `Topic.hasCollision`: whether two names differ only in `.` against `_` at the same
/// places (Kafka's metric names would collide, so its controller refuses the second topic).
pub fn topics_collide(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .all(|(x, y)| x == y || matches!((x, y), (b'.', b'_') | (b'_', b'.')))
}

/// The directory of a partition: `<topic>-<partition>`, Kafka's name, internal topics included
/// (`__transaction_state-7`).
pub fn partition_dir_name(topic: &str, partition: i32) -> String {
    format!("{topic}-{partition}")
}

/// Parses a partition directory name back into topic and partition: the text after the last
/// `-` must be a partition number (decimal, no sign, no leading zero) and the rest a valid
/// topic name. `None` for anything else, Kafka's `-delete`, `-future` and `-stray`
/// directories included.
pub fn parse_partition_dir_name(name: &str) -> Option<(&str, i32)> {
    let (topic, partition) = name.rsplit_once('-')?;
    let canonical = partition == "0" || !partition.starts_with('0');
    if !canonical || !partition.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let partition: i32 = partition.parse().ok()?;
    validate_topic_name(topic).ok()?;
    Some((topic, partition))
}

/// A topic id: Kafka's `Uuid`, 16 bytes, shown as 22 characters of unpadded base64url
/// (`partition.metadata`, `kafka-topics.sh --describe`).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicId(pub [u8; 16]);

const BASE64URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

impl TopicId {
    /// Kafka's `Uuid.ZERO_UUID`, which no topic may have.
    pub const ZERO: TopicId = TopicId([0; 16]);
    /// Kafka's `Uuid.METADATA_TOPIC_ID` (`ONE_UUID`), reserved for `__cluster_metadata`.
    pub const METADATA: TopicId = TopicId([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);

    /// A random version-4 id, as Kafka's `Uuid.randomUuid`: never a reserved id, and never one
    /// whose text starts with `-` (which a command line would take for an option).
    pub fn random() -> TopicId {
        loop {
            let mut bytes = [0u8; 16];
            bytes[..8].copy_from_slice(&random_u64().to_be_bytes());
            bytes[8..].copy_from_slice(&random_u64().to_be_bytes());
            // java.util.UUID.randomUUID: version 4, IETF variant.
            bytes[6] = (bytes[6] & 0x0f) | 0x40;
            bytes[8] = (bytes[8] & 0x3f) | 0x80;
            let id = TopicId(bytes);
            if !id.is_reserved() && !id.to_string().starts_with('-') {
                return id;
            }
        }
    }

    /// Whether Kafka reserves this id (`Uuid.RESERVED`: zero and the metadata topic's).
    pub fn is_reserved(&self) -> bool {
        *self == TopicId::ZERO || *self == TopicId::METADATA
    }
}

impl fmt::Display for TopicId {
    /// Unpadded base64url, Java's `Base64.getUrlEncoder().withoutPadding()`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = String::with_capacity(22);
        for chunk in self.0.chunks(3) {
            let mut group = [0u8; 3];
            group[..chunk.len()].copy_from_slice(chunk);
            let bits = u32::from_be_bytes([0, group[0], group[1], group[2]]);
            let chars = chunk.len() + 1;
            for index in 0..chars {
                let sextet = (bits >> (18 - 6 * index)) & 0x3f;
                text.push(char::from(BASE64URL[sextet as usize]));
            }
        }
        f.write_str(&text)
    }
}

impl fmt::Debug for TopicId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TopicId({self})")
    }
}

impl FromStr for TopicId {
    type Err = Error;

    /// Kafka's `Uuid.fromString`: base64url decoding to exactly 16 bytes (22 characters, or 24
    /// with `==` padding). Like Java's decoder, it ignores the 4 unused low bits of the last
    /// character.
    fn from_str(text: &str) -> Result<TopicId, Error> {
        let invalid = |why: &str| Error::InvalidArgument {
            why: format!("topic id {text:?} is not a base64url UUID: {why}"),
        };
        let digits = text.strip_suffix("==").unwrap_or(text);
        if digits.len() != 22 {
            return Err(invalid("it does not decode to 16 bytes"));
        }
        let mut bits: u128 = 0;
        for (index, byte) in digits.bytes().enumerate() {
            let value = BASE64URL
                .iter()
                .position(|&c| c == byte)
                .ok_or_else(|| invalid("a character outside base64url"))?;
            let value = value as u128;
            // 21 characters carry 126 bits; the 22nd adds its top 2 (the rest is padding).
            bits = if index < 21 {
                (bits << 6) | value
            } else {
                (bits << 2) | (value >> 4)
            };
        }
        Ok(TopicId(bits.to_be_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_ids_are_version_4_and_print_as_22_characters() {
        for _ in 0..100 {
            let id = TopicId::random();
            assert_eq!(id.0[6] >> 4, 4);
            let text = id.to_string();
            assert_eq!(text.len(), 22);
            assert!(!text.starts_with('-'));
            assert_eq!(text.parse::<TopicId>().unwrap(), id);
        }
    }
}
