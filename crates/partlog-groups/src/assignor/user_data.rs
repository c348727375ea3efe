//! The subscription user data of the sticky assignors, written and read as Kafka's
//! `StickyAssignor` and `CooperativeStickyAssignor` do: [`encode_sticky`] and
//! [`encode_cooperative`] give each layout.
//!
//! All integers are big-endian. Decoding never fails: user data that does not parse means
//! "nothing owned, generation −1", as in Kafka. Bytes after a parsed structure are ignored, as
//! Kafka's `Schema.read` ignores them.

use super::TopicPartition;
use super::java_string_map::JavaStringMap;

/// The generation Kafka reports for a member whose user data does not parse.
pub const DEFAULT_GENERATION: i32 = -1;

/// What a member's sticky user data says it owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StickyMemberData {
    /// The partitions it owned, in the order the user data lists them.
    pub partitions: Vec<TopicPartition>,
    /// The generation they belong to: `None` for V0 user data (or none at all).
    pub generation: Option<i32>,
}

/// Encodes the `sticky` assignor's V1 user data: `[i32 count]{i16 topic length, topic (UTF-8),
/// [i32 count]{i32 partition}}`, then `i32 generation`. The bytes equal Kafka's: topics in the
/// order Kafka's `CollectionUtils.groupPartitionsByTopic` leaves them (a Java `HashMap`'s
/// order of the topic names, which [`StickyAssignor`](super::StickyAssignor) reproduces), each
/// topic's partitions in the order given.
pub fn encode_sticky(partitions: &[TopicPartition], generation: i32) -> Vec<u8> {
    let mut out = encode_sticky_v0(partitions);
    out.extend_from_slice(&generation.to_be_bytes());
    out
}

/// Encodes the `sticky` assignor's V0 user data: V1 without the generation (what clients before
/// Kafka 2.3 sent).
pub fn encode_sticky_v0(partitions: &[TopicPartition]) -> Vec<u8> {
    // Kafka groups with `HashMap.computeIfAbsent`, one call per partition: the map's table,
    // and so the topics' order, depend on every call, not just on the set of topics.
    let mut by_topic = JavaStringMap::new();
    let mut grouped: Vec<Vec<i32>> = Vec::new();
    for tp in partitions {
        let at = by_topic.compute_if_absent(&tp.topic);
        if at == grouped.len() {
            grouped.push(Vec::new());
        }
        grouped[at].push(tp.partition);
    }
    let mut out = Vec::new();
    out.extend_from_slice(&(by_topic.len() as i32).to_be_bytes());
    for at in by_topic.iteration_order() {
        let name = by_topic.key(at).as_bytes();
        // Kafka's STRING type holds at most i16::MAX bytes; Kafka's topic names are at most 249.
        let len = name.len().min(i16::MAX as usize);
        out.extend_from_slice(&(len as i16).to_be_bytes());
        out.extend_from_slice(&name[..len]);
        out.extend_from_slice(&(grouped[at].len() as i32).to_be_bytes());
        for p in &grouped[at] {
            out.extend_from_slice(&p.to_be_bytes());
        }
    }
    out
}

/// Decodes the `sticky` assignor's user data: V1, else V0, else nothing owned with generation
/// −1. No user data, or an empty one, is nothing owned and no generation.
pub fn decode_sticky(data: Option<&[u8]>) -> StickyMemberData {
    let Some(data) = data.filter(|d| !d.is_empty()) else {
        return StickyMemberData {
            partitions: Vec::new(),
            generation: None,
        };
    };
    let mut reader = Reader { data, at: 0 };
    let Some(partitions) = reader.topic_partitions() else {
        return StickyMemberData {
            partitions: Vec::new(),
            generation: Some(DEFAULT_GENERATION),
        };
    };
    // V1 is V0 followed by the generation; when it is missing the V0 reading stands.
    StickyMemberData {
        partitions,
        generation: reader.i32(),
    }
}

/// Encodes the `cooperative-sticky` assignor's user data: the `i32` generation.
pub fn encode_cooperative(generation: i32) -> Vec<u8> {
    generation.to_be_bytes().to_vec()
}

/// Decodes the `cooperative-sticky` assignor's user data: `None` without user data, the
/// generation if it has at least 4 bytes, else −1.
pub fn decode_cooperative_generation(data: Option<&[u8]>) -> Option<i32> {
    let data = data?;
    let mut reader = Reader { data, at: 0 };
    Some(reader.i32().unwrap_or(DEFAULT_GENERATION))
}

/// A cursor over user data; every read is `None` past the end or on a field Kafka rejects.
struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let end = self.at.checked_add(n)?;
        let bytes = self.data.get(self.at..end)?;
        self.at = end;
        Some(bytes)
    }

    fn i32(&mut self) -> Option<i32> {
        self.take(4)
            .and_then(|b| b.try_into().ok())
            .map(i32::from_be_bytes)
    }

    fn i16(&mut self) -> Option<i16> {
        self.take(2)
            .and_then(|b| b.try_into().ok())
            .map(i16::from_be_bytes)
    }

    fn remaining(&self) -> usize {
        self.data.len() - self.at
    }

    /// Kafka's non-nullable `ArrayOf` length: negative, or more than the bytes left, is an error.
    fn array_len(&mut self) -> Option<usize> {
        let n = usize::try_from(self.i32()?).ok()?;
        (n <= self.remaining()).then_some(n)
    }

    /// Kafka's `STRING`: an `i16` length (negative is an error), then UTF-8, malformed sequences
    /// replaced as Java's decoder replaces them.
    fn string(&mut self) -> Option<String> {
        let n = usize::try_from(self.i16()?).ok()?;
        Some(String::from_utf8_lossy(self.take(n)?).into_owned())
    }

    fn topic_partitions(&mut self) -> Option<Vec<TopicPartition>> {
        let topics = self.array_len()?;
        let mut out = Vec::new();
        for _ in 0..topics {
            let topic = self.string()?;
            let count = self.array_len()?;
            for _ in 0..count {
                out.push(TopicPartition::new(topic.clone(), self.i32()?));
            }
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sticky_v1_round_trips() {
        let owned = vec![
            TopicPartition::new("t0", 0),
            TopicPartition::new("t1", 1),
            TopicPartition::new("t0", 2),
        ];
        let decoded = decode_sticky(Some(&encode_sticky(&owned, 7)));
        assert_eq!(decoded.generation, Some(7));
        let mut partitions = decoded.partitions;
        partitions.sort();
        let mut expected = owned;
        expected.sort();
        assert_eq!(partitions, expected);
    }

    /// The worked example of FORMAT.md §11.1, byte for byte.
    #[test]
    fn sticky_v1_bytes_match_the_format_example() {
        let owned = vec![
            TopicPartition::new("t0", 0),
            TopicPartition::new("t0", 2),
            TopicPartition::new("t1", 1),
        ];
        let expected: Vec<u8> = [
            &[0, 0, 0, 2][..],
            &[0, 2, b't', b'0', 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 2],
            &[0, 2, b't', b'1', 0, 0, 0, 1, 0, 0, 0, 1],
            &[0, 0, 0, 3],
        ]
        .concat();
        assert_eq!(encode_sticky(&owned, 3), expected);
    }

    #[test]
    fn sticky_v0_has_no_generation() {
        let owned = vec![TopicPartition::new("t", 3)];
        assert_eq!(
            decode_sticky(Some(&encode_sticky_v0(&owned))),
            StickyMemberData {
                partitions: owned,
                generation: None
            }
        );
    }

    #[test]
    fn sticky_garbage_is_nothing_owned_generation_minus_one() {
        for bad in [&[0u8][..], &[0, 0, 0, 1, 0xff, 0xff], &[0x7f, 0, 0, 0]] {
            assert_eq!(
                decode_sticky(Some(bad)),
                StickyMemberData {
                    partitions: Vec::new(),
                    generation: Some(-1)
                }
            );
        }
        assert_eq!(decode_sticky(Some(&[])).generation, None);
        assert_eq!(decode_sticky(None).generation, None);
    }

    #[test]
    fn cooperative_generation_needs_four_bytes() {
        assert_eq!(
            decode_cooperative_generation(Some(&encode_cooperative(12))),
            Some(12)
        );
        assert_eq!(decode_cooperative_generation(Some(&[1, 2, 3])), Some(-1));
        assert_eq!(decode_cooperative_generation(None), None);
    }
}
