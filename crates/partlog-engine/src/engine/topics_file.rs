//! `partlog.topics`: the engine's topic list, each topic's id, partition count and config
//! overrides, in a two-slot CRC-32C file.
//!
//! The payload of a slot (big-endian; names and keys in strictly increasing byte order, so a
//! list has one encoding):
//!
//! ```text
//! u32 topic count
//!   per topic:
//!   u16 name length, name        (Kafka's topic-name rule: ASCII [a-zA-Z0-9._-], 1..=249)
//!   16  topic id                 (not the zero or the metadata id)
//!   i32 partition count          (≥ 1)
//!   u32 config count
//!     per config:
//!     u16 key length, key        (UTF-8, not empty)
//!     u32 value length, value    (UTF-8)
//! ```

// The design of record: FORMAT.md §15.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use partlog::unstable::Storage;
use partlog::{Corruption, Error};

use super::slot_file::{SlotFile, SlotFileKind};
use super::topic::{TopicId, validate_topic_name};

/// The file's name inside the engine directory.
pub const TOPICS_FILE_NAME: &str = "partlog.topics";

pub(crate) const KIND: SlotFileKind = SlotFileKind {
    name: TOPICS_FILE_NAME,
    temp_name: "partlog.topics.tmp",
    magic: *b"PLTP",
    version: 1,
};

/// One topic as `partlog.topics` records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicEntry {
    /// The topic's id, also in each of its partitions' `partition.metadata`.
    pub topic_id: TopicId,
    /// How many partitions it has (it only grows).
    pub partitions: i32,
    /// The topic-level config overrides, by Kafka's names (`cleanup.policy`, `segment.bytes`).
    pub configs: BTreeMap<String, String>,
}

/// The topics of an engine, by name.
pub type Topics = BTreeMap<String, TopicEntry>;

/// Encodes `topics` as the file's payload.
///
/// # Errors
/// `InvalidArgument` for an invalid topic name, a reserved topic id, a partition count below 1,
/// an empty config key, or a length its field cannot hold.
pub fn encode_topics(topics: &Topics) -> Result<Vec<u8>, Error> {
    let invalid = |why: String| Error::InvalidArgument { why };
    let mut out = Vec::new();
    put_len32(&mut out, topics.len()).ok_or_else(|| invalid("too many topics".into()))?;
    for (name, entry) in topics {
        validate_topic_name(name)?;
        if entry.topic_id.is_reserved() {
            return Err(invalid(format!(
                "topic {name} has the reserved id {}",
                entry.topic_id
            )));
        }
        if entry.partitions < 1 {
            return Err(invalid(format!(
                "topic {name} has {} partitions",
                entry.partitions
            )));
        }
        put_len16(&mut out, name.len()).ok_or_else(|| invalid("name too long".into()))?;
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&entry.topic_id.0);
        out.extend_from_slice(&entry.partitions.to_be_bytes());
        put_len32(&mut out, entry.configs.len())
            .ok_or_else(|| invalid(format!("topic {name} has too many configs")))?;
        for (key, value) in &entry.configs {
            if key.is_empty() {
                return Err(invalid(format!(
                    "topic {name} has a config with an empty key"
                )));
            }
            put_len16(&mut out, key.len())
                .ok_or_else(|| invalid(format!("config key {key:?} is too long")))?;
            out.extend_from_slice(key.as_bytes());
            put_len32(&mut out, value.len())
                .ok_or_else(|| invalid(format!("the value of {key} is too long")))?;
            out.extend_from_slice(value.as_bytes());
        }
    }
    Ok(out)
}

fn put_len16(out: &mut Vec<u8>, len: usize) -> Option<()> {
    out.extend_from_slice(&u16::try_from(len).ok()?.to_be_bytes());
    Some(())
}

fn put_len32(out: &mut Vec<u8>, len: usize) -> Option<()> {
    out.extend_from_slice(&u32::try_from(len).ok()?.to_be_bytes());
    Some(())
}

/// A cursor over the payload's bytes.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        if self.bytes.len() < n {
            return Err("the topic list ends inside a field");
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], &'static str> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn string(&mut self, len: usize) -> Result<String, &'static str> {
        String::from_utf8(self.take(len)?.to_vec()).map_err(|_| "a string is not UTF-8")
    }

    fn len16(&mut self) -> Result<usize, &'static str> {
        Ok(usize::from(u16::from_be_bytes(self.array()?)))
    }

    fn len32(&mut self) -> Result<usize, &'static str> {
        usize::try_from(u32::from_be_bytes(self.array()?)).map_err(|_| "a length is too large")
    }
}

/// Decodes the file's payload, checking every rule of [`encode_topics`] and the order.
///
/// # Errors
/// What is wrong, for `Error::Corrupt` ([`TopicsFile::open`] names the file).
pub fn decode_topics(payload: &[u8]) -> Result<Topics, &'static str> {
    let mut reader = Reader { bytes: payload };
    let count = reader.len32()?;
    let mut topics = Topics::new();
    for _ in 0..count {
        let len = reader.len16()?;
        let name = reader.string(len)?;
        validate_topic_name(&name).map_err(|_| "a topic name breaks Kafka's rule")?;
        if topics
            .last_key_value()
            .is_some_and(|(last, _)| *last >= name)
        {
            return Err("topic names are not in increasing order");
        }
        let topic_id = TopicId(reader.array()?);
        if topic_id.is_reserved() {
            return Err("a topic has a reserved id");
        }
        let partitions = i32::from_be_bytes(reader.array()?);
        if partitions < 1 {
            return Err("a topic has fewer than one partition");
        }
        let config_count = reader.len32()?;
        let mut configs = BTreeMap::new();
        for _ in 0..config_count {
            let len = reader.len16()?;
            let key = reader.string(len)?;
            if key.is_empty() {
                return Err("a config key is empty");
            }
            if configs
                .last_key_value()
                .is_some_and(|(last, _): (&String, _)| *last >= key)
            {
                return Err("config keys are not in increasing order");
            }
            let len = reader.len32()?;
            let value = reader.string(len)?;
            configs.insert(key, value);
        }
        topics.insert(
            name,
            TopicEntry {
                topic_id,
                partitions,
                configs,
            },
        );
    }
    if !reader.bytes.is_empty() {
        return Err("bytes follow the topic list");
    }
    Ok(topics)
}

/// `partlog.topics` open for writing. Every write is durable when it returns.
#[derive(Debug)]
pub struct TopicsFile {
    file: SlotFile,
}

fn corrupt(dir: &Path, what: &'static str) -> Error {
    Error::Corrupt {
        file: dir.join(TOPICS_FILE_NAME),
        position: 0,
        what: Corruption::BadRecord(what),
    }
}

impl TopicsFile {
    /// Opens `dir/partlog.topics` and returns it with the topics it lists, or `None` when the
    /// file does not exist.
    ///
    /// # Errors
    /// `Corrupt` when no slot holds a valid record, or the newest does not decode; I/O errors.
    pub fn open(
        storage: &Arc<dyn Storage>,
        dir: &Path,
    ) -> Result<Option<(TopicsFile, Topics)>, Error> {
        let Some((file, payload)) = SlotFile::open(KIND, storage, dir)? else {
            return Ok(None);
        };
        let topics = decode_topics(&payload).map_err(|why| corrupt(dir, why))?;
        Ok(Some((TopicsFile { file }, topics)))
    }

    /// Reads `dir/partlog.topics` without writing: `None` when it does not exist.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub fn read(storage: &Arc<dyn Storage>, dir: &Path) -> Result<Option<Topics>, Error> {
        let Some(payload) = SlotFile::read(&KIND, storage, dir)? else {
            return Ok(None);
        };
        decode_topics(&payload)
            .map(Some)
            .map_err(|why| corrupt(dir, why))
    }

    /// Creates `dir/partlog.topics` listing `topics`, durably, replacing any file of that name.
    ///
    /// # Errors
    /// As [`encode_topics`]; I/O errors.
    pub fn create(
        storage: &Arc<dyn Storage>,
        dir: &Path,
        topics: &Topics,
    ) -> Result<TopicsFile, Error> {
        let payload = encode_topics(topics)?;
        Ok(TopicsFile {
            file: SlotFile::create(KIND, storage, dir, &payload)?,
        })
    }

    /// Records `topics` as the new list, durably (a larger list moves to a larger file, whole).
    ///
    /// # Errors
    /// As [`encode_topics`], with nothing written; I/O errors, after which every later write
    /// fails with `Poisoned` until the file is opened again.
    pub fn write(&mut self, topics: &Topics) -> Result<(), Error> {
        let payload = encode_topics(topics)?;
        self.file.write(&payload)
    }

    /// The size of one slot: 512 bytes, or more once the list outgrew it.
    pub fn slot_size(&self) -> usize {
        self.file.slot_size()
    }
}
