//! The consumer protocol's blobs, byte for byte Kafka's `ConsumerProtocolSubscription` and
//! `ConsumerProtocolAssignment` with their `i16` version prefix: what a consumer puts in its
//! JoinGroup metadata and what the leader hands back through SyncGroup.

// The design of record: FORMAT.md §18.4.

use crate::wire::{DecodeError, EncodeError, Reader, Writer, check_bytes, check_string};

/// The highest version of either blob that Kafka 4.4 writes.
pub const CONSUMER_PROTOCOL_VERSION: i16 = 3;

/// One topic's partitions in a blob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicPartitions {
    /// The topic.
    pub topic: String,
    /// Its partitions, in the order written.
    pub partitions: Vec<i32>,
}

impl TopicPartitions {
    /// `topic` with `partitions`.
    pub fn new(topic: impl Into<String>, partitions: impl Into<Vec<i32>>) -> Self {
        TopicPartitions {
            topic: topic.into(),
            partitions: partitions.into(),
        }
    }
}

/// A consumer's JoinGroup metadata: Kafka's `ConsumerProtocolSubscription`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    /// The topics it subscribes to.
    pub topics: Vec<String>,
    /// The assignor's user data.
    pub user_data: Option<Vec<u8>>,
    /// The partitions it owns (v1+).
    pub owned_partitions: Vec<TopicPartitions>,
    /// The generation of its owned partitions (v2+; −1 when older or unknown).
    pub generation_id: i32,
    /// Its rack (v3+).
    pub rack_id: Option<String>,
}

impl Subscription {
    /// A subscription to `topics` with nothing owned, generation −1.
    pub fn new(topics: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Subscription {
            topics: topics.into_iter().map(Into::into).collect(),
            user_data: None,
            owned_partitions: Vec::new(),
            generation_id: -1,
            rack_id: None,
        }
    }

    /// The blob at `version` (0–3); fields the version lacks are left out.
    ///
    /// # Errors
    /// A version outside 0–3; a name longer than Kafka's `STRING` holds.
    pub fn encode(&self, version: i16) -> Result<Vec<u8>, EncodeError> {
        if !(0..=CONSUMER_PROTOCOL_VERSION).contains(&version) {
            return Err(EncodeError {
                what: format!("ConsumerProtocolSubscription has versions 0 to 3, not {version}"),
            });
        }
        let mut w = Writer::default();
        w.i16(version);
        w.i32(self.topics.len() as i32);
        for topic in &self.topics {
            check_string(topic, "a topic")?;
            w.string(topic);
        }
        if let Some(data) = &self.user_data {
            check_bytes(data, "the user data")?;
        }
        w.nullable_bytes(self.user_data.as_deref());
        if version >= 1 {
            write_topic_partitions(&mut w, &self.owned_partitions)?;
        }
        if version >= 2 {
            w.i32(self.generation_id);
        }
        if version >= 3 {
            if let Some(rack) = &self.rack_id {
                check_string(rack, "the rack id")?;
            }
            w.nullable_string(self.rack_id.as_deref());
        }
        Ok(w.out)
    }

    /// Reads a blob. A version above 3 is read as 3, as Kafka's `ConsumerProtocol` reads a
    /// newer client's subscription by its own highest version.
    ///
    /// # Errors
    /// A negative version, or bytes that do not hold the schema.
    pub fn decode(bytes: &[u8]) -> Result<Subscription, DecodeError> {
        let mut r = Reader::new(bytes);
        let version = read_version(&mut r)?;
        let count = r.array_len("the topics", 2)?;
        let mut topics = Vec::with_capacity(count);
        for _ in 0..count {
            topics.push(r.string("a topic")?);
        }
        let user_data = r.nullable_bytes("the user data")?;
        let owned_partitions = if version >= 1 {
            read_topic_partitions(&mut r)?
        } else {
            Vec::new()
        };
        let generation_id = if version >= 2 {
            r.i32("the generation")?
        } else {
            -1
        };
        let rack_id = if version >= 3 {
            r.nullable_string("the rack id")?
        } else {
            None
        };
        Ok(Subscription {
            topics,
            user_data,
            owned_partitions,
            generation_id,
            rack_id,
        })
    }
}

/// What the leader assigned one member: Kafka's `ConsumerProtocolAssignment`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Assignment {
    /// The partitions, by topic.
    pub assigned_partitions: Vec<TopicPartitions>,
    /// The assignor's user data.
    pub user_data: Option<Vec<u8>>,
}

impl Assignment {
    /// The blob at `version` (0–3: every version has the same fields).
    ///
    /// # Errors
    /// A version outside 0–3; a topic longer than Kafka's `STRING` holds.
    pub fn encode(&self, version: i16) -> Result<Vec<u8>, EncodeError> {
        if !(0..=CONSUMER_PROTOCOL_VERSION).contains(&version) {
            return Err(EncodeError {
                what: format!("ConsumerProtocolAssignment has versions 0 to 3, not {version}"),
            });
        }
        let mut w = Writer::default();
        w.i16(version);
        write_topic_partitions(&mut w, &self.assigned_partitions)?;
        if let Some(data) = &self.user_data {
            check_bytes(data, "the user data")?;
        }
        w.nullable_bytes(self.user_data.as_deref());
        Ok(w.out)
    }

    /// Reads a blob (any version: they share one layout).
    ///
    /// # Errors
    /// A negative version, or bytes that do not hold the schema.
    pub fn decode(bytes: &[u8]) -> Result<Assignment, DecodeError> {
        let mut r = Reader::new(bytes);
        read_version(&mut r)?;
        Ok(Assignment {
            assigned_partitions: read_topic_partitions(&mut r)?,
            user_data: r.nullable_bytes("the user data")?,
        })
    }
}

fn read_version(r: &mut Reader<'_>) -> Result<i16, DecodeError> {
    let version = r.i16("the blob's version")?;
    if version < 0 {
        return Err(DecodeError {
            what: format!("negative consumer protocol version {version}"),
            position: 0,
        });
    }
    Ok(version.min(CONSUMER_PROTOCOL_VERSION))
}

fn write_topic_partitions(w: &mut Writer, topics: &[TopicPartitions]) -> Result<(), EncodeError> {
    w.i32(topics.len() as i32);
    for t in topics {
        check_string(&t.topic, "a topic")?;
        w.string(&t.topic);
        w.i32(t.partitions.len() as i32);
        for p in &t.partitions {
            w.i32(*p);
        }
    }
    Ok(())
}

fn read_topic_partitions(r: &mut Reader<'_>) -> Result<Vec<TopicPartitions>, DecodeError> {
    let count = r.array_len("the topic partitions", 6)?;
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let topic = r.string("a topic")?;
        let n = r.array_len("the partitions", 4)?;
        let mut partitions = Vec::with_capacity(n);
        for _ in 0..n {
            partitions.push(r.i32("a partition")?);
        }
        out.push(TopicPartitions { topic, partitions });
    }
    Ok(out)
}
