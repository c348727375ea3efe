//! The records of `__consumer_offsets`, byte for byte Kafka's (`OffsetCommitKey`,
//! `OffsetCommitValue`, `GroupMetadataKey`, `GroupMetadataValue`, with Kafka's version prefix).
//!
//! A key starts with an `i16` that is the record type: 0 and 1 are an offset commit, 2 is a
//! group's metadata, 3 and up are the records of the new consumer protocol (KIP-848), share
//! groups and streams groups, which partlog does not load and skips as Kafka skips record types
//! its coordinator does not own. A value starts with its own `i16` version; a null value is a
//! tombstone.

// The design of record: FORMAT.md §18 lays every version out.

use std::borrow::Cow;

use crate::assignor::java_string_hash;
use crate::wire::{DecodeError, EncodeError, Reader, Writer, check_bytes, check_string};

/// The topic that holds committed offsets and group records.
pub const CONSUMER_OFFSETS_TOPIC: &str = "__consumer_offsets";
/// Kafka's `offsets.topic.num.partitions` default.
pub const OFFSETS_TOPIC_PARTITIONS: i32 = 50;
/// Kafka's `offsets.topic.segment.bytes` default.
pub const OFFSETS_TOPIC_SEGMENT_BYTES: u32 = 104_857_600;

/// The partition of `__consumer_offsets` that holds `group_id`'s records:
/// `abs(javaStringHash(group_id)) % partitions`, with Kafka's `Utils.abs` (`abs(i32::MIN) = 0`).
/// `partitions` below 1 is treated as 1.
pub fn group_partition(group_id: &str, partitions: i32) -> i32 {
    let hash = java_string_hash(group_id);
    let abs = if hash == i32::MIN { 0 } else { hash.abs() };
    abs % partitions.max(1)
}

/// A decoded key of `__consumer_offsets`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OffsetsKey {
    /// The committed offset of one partition for one group (record type 0 or 1).
    OffsetCommit {
        /// The group.
        group: String,
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
    },
    /// A group's metadata (record type 2).
    GroupMetadata {
        /// The group.
        group: String,
    },
    /// A record type partlog does not load (3 and up: KIP-848 consumer groups, share and
    /// streams groups). The store skips it.
    Other {
        /// The record type (the key's version prefix).
        record_type: i16,
    },
}

impl OffsetsKey {
    /// The key's bytes: record type 1 for an offset commit, 2 for group metadata, as Kafka 4.4
    /// writes them.
    ///
    /// # Errors
    /// A name longer than Kafka's `STRING` holds; an [`OffsetsKey::Other`] key, which partlog
    /// never writes.
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        let mut w = Writer::default();
        match self {
            OffsetsKey::OffsetCommit {
                group,
                topic,
                partition,
            } => {
                check_string(group, "the group id")?;
                check_string(topic, "the topic")?;
                w.i16(1);
                w.string(group);
                w.string(topic);
                w.i32(*partition);
            }
            OffsetsKey::GroupMetadata { group } => {
                check_string(group, "the group id")?;
                w.i16(2);
                w.string(group);
            }
            OffsetsKey::Other { record_type } => {
                return Err(EncodeError {
                    what: format!("record type {record_type} is not written by partlog"),
                });
            }
        }
        Ok(w.out)
    }

    /// Reads a key. Record types 3 and up come back as [`OffsetsKey::Other`] without further
    /// reading; a negative type is an error.
    ///
    /// # Errors
    /// Bytes that do not hold the record type's schema.
    pub fn decode(bytes: &[u8]) -> Result<OffsetsKey, DecodeError> {
        Ok(match OffsetsKeyRef::decode(bytes)? {
            OffsetsKeyRef::OffsetCommit {
                group,
                topic,
                partition,
            } => OffsetsKey::OffsetCommit {
                group: group.into_owned(),
                topic: topic.into_owned(),
                partition,
            },
            OffsetsKeyRef::GroupMetadata { group } => OffsetsKey::GroupMetadata {
                group: group.into_owned(),
            },
            OffsetsKeyRef::Other { record_type } => OffsetsKey::Other { record_type },
        })
    }
}

/// An [`OffsetsKey`] whose names borrow the key's bytes: what a replay reads for each record,
/// so that a key already known costs no allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OffsetsKeyRef<'a> {
    OffsetCommit {
        group: Cow<'a, str>,
        topic: Cow<'a, str>,
        partition: i32,
    },
    GroupMetadata {
        group: Cow<'a, str>,
    },
    Other {
        record_type: i16,
    },
}

impl<'a> OffsetsKeyRef<'a> {
    /// Reads a key as [`OffsetsKey::decode`] does.
    pub(crate) fn decode(bytes: &'a [u8]) -> Result<OffsetsKeyRef<'a>, DecodeError> {
        let mut r = Reader::new(bytes);
        let record_type = r.i16("the key's record type")?;
        match record_type {
            0 | 1 => Ok(OffsetsKeyRef::OffsetCommit {
                group: r.str("the key's group")?,
                topic: r.str("the key's topic")?,
                partition: r.i32("the key's partition")?,
            }),
            2 => Ok(OffsetsKeyRef::GroupMetadata {
                group: r.str("the key's group")?,
            }),
            t if t < 0 => Err(DecodeError {
                what: format!("negative record type {t}"),
                position: 0,
            }),
            t => Ok(OffsetsKeyRef::Other { record_type: t }),
        }
    }
}

/// A committed offset: Kafka's `OffsetCommitValue`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitValue {
    /// The next offset to read (the last processed + 1).
    pub offset: i64,
    /// The leader epoch of the last processed record, −1 when unknown (v3+; older versions
    /// read as −1).
    pub leader_epoch: i32,
    /// The client's metadata string.
    pub metadata: String,
    /// When the coordinator accepted the commit.
    pub commit_timestamp: i64,
    /// When the offset expires, for a commit that gave a retention (v1 only).
    pub expire_timestamp: Option<i64>,
    /// The topic's id (v4's tagged field 0), all zeros when not set.
    pub topic_id: [u8; 16],
}

impl OffsetCommitValue {
    /// A value without a leader epoch, expiry or topic id.
    pub fn new(offset: i64, metadata: impl Into<String>, commit_timestamp: i64) -> Self {
        OffsetCommitValue {
            offset,
            leader_epoch: -1,
            metadata: metadata.into(),
            commit_timestamp,
            expire_timestamp: None,
            topic_id: [0; 16],
        }
    }

    /// The version partlog writes: 1 when the value has an expire timestamp (only v1 holds
    /// one), else 3. (Kafka 4.4's coordinator writes v4, the flexible form of v3, which every
    /// reader of v3 also reads.)
    pub fn write_version(&self) -> i16 {
        if self.expire_timestamp.is_some() {
            1
        } else {
            3
        }
    }

    /// The value's bytes at [`write_version`](Self::write_version).
    ///
    /// # Errors
    /// See [`encode_version`](Self::encode_version).
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        self.encode_version(self.write_version())
    }

    /// The value's bytes at `version` (0–4). Fields the version lacks are left out; v1 writes
    /// an absent expire timestamp as −1.
    ///
    /// # Errors
    /// A version outside 0–4; metadata longer than Kafka's `STRING` holds.
    pub fn encode_version(&self, version: i16) -> Result<Vec<u8>, EncodeError> {
        check_string(&self.metadata, "the offset's metadata")?;
        let mut w = Writer::default();
        w.i16(version);
        w.i64(self.offset);
        match version {
            0 | 2 => {
                w.string(&self.metadata);
                w.i64(self.commit_timestamp);
            }
            1 => {
                w.string(&self.metadata);
                w.i64(self.commit_timestamp);
                w.i64(self.expire_timestamp.unwrap_or(-1));
            }
            3 => {
                w.i32(self.leader_epoch);
                w.string(&self.metadata);
                w.i64(self.commit_timestamp);
            }
            4 => {
                w.i32(self.leader_epoch);
                w.compact_nullable_string(Some(&self.metadata));
                w.i64(self.commit_timestamp);
                if self.topic_id == [0; 16] {
                    w.uvarint(0);
                } else {
                    w.uvarint(1);
                    w.uvarint(0);
                    w.uvarint(16);
                    w.out.extend_from_slice(&self.topic_id);
                }
            }
            v => {
                return Err(EncodeError {
                    what: format!("OffsetCommitValue has versions 0 to 4, not {v}"),
                });
            }
        }
        Ok(w.out)
    }

    /// Reads a value of any version 0–4. Bytes after the schema's end are ignored, as Kafka's
    /// generated readers ignore them.
    ///
    /// # Errors
    /// An unknown version, or bytes that do not hold the version's schema.
    pub fn decode(bytes: &[u8]) -> Result<OffsetCommitValue, DecodeError> {
        let mut r = Reader::new(bytes);
        let version = r.i16("the offset value's version")?;
        let offset = r.i64("the offset")?;
        let mut value = OffsetCommitValue::new(offset, String::new(), -1);
        match version {
            0 | 2 => {
                value.metadata = r.string("the offset's metadata")?;
                value.commit_timestamp = r.i64("the commit timestamp")?;
            }
            1 => {
                value.metadata = r.string("the offset's metadata")?;
                value.commit_timestamp = r.i64("the commit timestamp")?;
                value.expire_timestamp = Some(r.i64("the expire timestamp")?);
            }
            3 => {
                value.leader_epoch = r.i32("the leader epoch")?;
                value.metadata = r.string("the offset's metadata")?;
                value.commit_timestamp = r.i64("the commit timestamp")?;
            }
            4 => {
                value.leader_epoch = r.i32("the leader epoch")?;
                value.metadata = r.compact_string("the offset's metadata")?;
                value.commit_timestamp = r.i64("the commit timestamp")?;
                let mut topic_id = [0u8; 16];
                r.tagged_fields(|tag, r| {
                    if tag != 0 {
                        return Ok(false);
                    }
                    topic_id = r.fixed("the topic id")?;
                    Ok(true)
                })?;
                value.topic_id = topic_id;
            }
            v => {
                return Err(DecodeError {
                    what: format!("OffsetCommitValue version {v} is unknown (0 to 4)"),
                    position: 0,
                });
            }
        }
        Ok(value)
    }
}

/// One member in a group record: Kafka's `GroupMetadataValue.MemberMetadata`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberMetadata {
    /// The member id the coordinator gave it.
    pub member_id: String,
    /// Its `group.instance.id` (static membership), v3+.
    pub group_instance_id: Option<String>,
    /// Its `client.id`.
    pub client_id: String,
    /// Its host, as the broker saw it (`/127.0.0.1`).
    pub client_host: String,
    /// Its rebalance timeout (v1+; v0 reads as the session timeout, as Kafka reads it).
    pub rebalance_timeout: i32,
    /// Its session timeout.
    pub session_timeout: i32,
    /// Its metadata for the group's protocol (a consumer's subscription).
    pub subscription: Vec<u8>,
    /// What the leader assigned it (a consumer's assignment).
    pub assignment: Vec<u8>,
}

/// A classic group's record: Kafka's `GroupMetadataValue`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadataValue {
    /// The protocol type (`consumer`, or empty for a simple group).
    pub protocol_type: String,
    /// The generation.
    pub generation: i32,
    /// The chosen protocol (assignor name), `None` for an empty group.
    pub protocol: Option<String>,
    /// The leader's member id, `None` for an empty group.
    pub leader: Option<String>,
    /// When the group entered its current state (v2+; −1 when older).
    pub current_state_timestamp: i64,
    /// The members.
    pub members: Vec<MemberMetadata>,
}

/// The version of `GroupMetadataValue` partlog writes, as Kafka 4.4 does.
pub const GROUP_METADATA_WRITE_VERSION: i16 = 3;

impl GroupMetadataValue {
    /// The value's bytes at [`GROUP_METADATA_WRITE_VERSION`].
    ///
    /// # Errors
    /// See [`encode_version`](Self::encode_version).
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        self.encode_version(GROUP_METADATA_WRITE_VERSION)
    }

    /// The value's bytes at `version` (0–4); fields the version lacks are left out.
    ///
    /// # Errors
    /// A version outside 0–4; a string or blob longer than Kafka's types hold.
    pub fn encode_version(&self, version: i16) -> Result<Vec<u8>, EncodeError> {
        if !(0..=4).contains(&version) {
            return Err(EncodeError {
                what: format!("GroupMetadataValue has versions 0 to 4, not {version}"),
            });
        }
        self.check_lengths()?;
        let flexible = version >= 4;
        let mut w = Writer::default();
        let string = |w: &mut Writer, s: Option<&str>| {
            if flexible {
                w.compact_nullable_string(s);
            } else {
                w.nullable_string(s);
            }
        };
        w.i16(version);
        string(&mut w, Some(&self.protocol_type));
        w.i32(self.generation);
        string(&mut w, self.protocol.as_deref());
        string(&mut w, self.leader.as_deref());
        if version >= 2 {
            w.i64(self.current_state_timestamp);
        }
        if flexible {
            w.uvarint(self.members.len() as u32 + 1);
        } else {
            w.i32(self.members.len() as i32);
        }
        for m in &self.members {
            string(&mut w, Some(&m.member_id));
            if version >= 3 {
                string(&mut w, m.group_instance_id.as_deref());
            }
            string(&mut w, Some(&m.client_id));
            string(&mut w, Some(&m.client_host));
            if version >= 1 {
                w.i32(m.rebalance_timeout);
            }
            w.i32(m.session_timeout);
            if flexible {
                w.compact_bytes(&m.subscription);
                w.compact_bytes(&m.assignment);
                w.uvarint(0);
            } else {
                w.nullable_bytes(Some(&m.subscription));
                w.nullable_bytes(Some(&m.assignment));
            }
        }
        if flexible {
            w.uvarint(0);
        }
        Ok(w.out)
    }

    fn check_lengths(&self) -> Result<(), EncodeError> {
        check_string(&self.protocol_type, "the protocol type")?;
        for s in self.protocol.iter().chain(&self.leader) {
            check_string(s, "the protocol or leader")?;
        }
        for m in &self.members {
            for s in [&m.member_id, &m.client_id, &m.client_host]
                .into_iter()
                .chain(&m.group_instance_id)
            {
                check_string(s, "a member's id, client id or host")?;
            }
            check_bytes(&m.subscription, "a member's subscription")?;
            check_bytes(&m.assignment, "a member's assignment")?;
        }
        Ok(())
    }

    /// Reads a value of any version 0–4; bytes after the schema's end are ignored.
    ///
    /// # Errors
    /// An unknown version, or bytes that do not hold the version's schema.
    pub fn decode(bytes: &[u8]) -> Result<GroupMetadataValue, DecodeError> {
        let mut r = Reader::new(bytes);
        let version = r.i16("the group value's version")?;
        if !(0..=4).contains(&version) {
            return Err(DecodeError {
                what: format!("GroupMetadataValue version {version} is unknown (0 to 4)"),
                position: 0,
            });
        }
        let flexible = version >= 4;
        let string = |r: &mut Reader<'_>, what: &str| {
            if flexible {
                r.compact_string(what)
            } else {
                r.string(what)
            }
        };
        let nullable = |r: &mut Reader<'_>, what: &str| {
            if flexible {
                r.compact_nullable_string(what)
            } else {
                r.nullable_string(what)
            }
        };
        let protocol_type = string(&mut r, "the protocol type")?;
        let generation = r.i32("the generation")?;
        let protocol = nullable(&mut r, "the protocol")?;
        let leader = nullable(&mut r, "the leader")?;
        let current_state_timestamp = if version >= 2 {
            r.i64("the state timestamp")?
        } else {
            -1
        };
        // A member takes at least 16 bytes (three empty strings, two i32s, two empty blobs).
        let count = if flexible {
            r.compact_array_len("the members", 8)?
        } else {
            r.array_len("the members", 16)?
        };
        let mut members = Vec::with_capacity(count);
        for _ in 0..count {
            let member_id = string(&mut r, "a member id")?;
            let group_instance_id = if version >= 3 {
                nullable(&mut r, "a group instance id")?
            } else {
                None
            };
            let client_id = string(&mut r, "a client id")?;
            let client_host = string(&mut r, "a client host")?;
            let rebalance_timeout = if version >= 1 {
                Some(r.i32("a rebalance timeout")?)
            } else {
                None
            };
            let session_timeout = r.i32("a session timeout")?;
            let (subscription, assignment) = if flexible {
                let s = r.compact_bytes("a subscription")?;
                let a = r.compact_bytes("an assignment")?;
                r.tagged_fields(|_, _| Ok(false))?;
                (s, a)
            } else {
                (r.bytes("a subscription")?, r.bytes("an assignment")?)
            };
            members.push(MemberMetadata {
                member_id,
                group_instance_id,
                client_id,
                client_host,
                rebalance_timeout: rebalance_timeout.unwrap_or(session_timeout),
                session_timeout,
                subscription,
                assignment,
            });
        }
        if flexible {
            r.tagged_fields(|_, _| Ok(false))?;
        }
        Ok(GroupMetadataValue {
            protocol_type,
            generation,
            protocol,
            leader,
            current_state_timestamp,
            members,
        })
    }
}
