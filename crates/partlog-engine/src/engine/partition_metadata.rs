//! `partition.metadata`: the topic id of a partition directory, in Kafka's text format
//! (`PartitionMetadataFile`).
//!
//! Kafka writes `version: 0\ntopic_id: <22-character base64url id>`, with no newline after the
//! id (a 4.4 broker's file is those 43 bytes exactly), under `partition.metadata.tmp`, fsynced
//! and renamed into place. Its reader splits each line at `:` followed by white space, and
//! accepts any version from 0 on.

// The design of record: FORMAT.md §16.

use std::path::Path;
use std::sync::Arc;

use partlog::unstable::{OpenMode, Storage};
use partlog::{Corruption, Error};

use super::topic::TopicId;

/// The file's name inside a partition directory.
pub const PARTITION_METADATA_FILE_NAME: &str = "partition.metadata";

/// The temporary name Kafka writes the file under before renaming it.
pub const PARTITION_METADATA_TEMP_NAME: &str = "partition.metadata.tmp";

/// What `partition.metadata` holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionMetadata {
    /// The file's version: 0 is the only one Kafka writes.
    pub version: i32,
    /// The id of the partition's topic.
    pub topic_id: TopicId,
}

impl PartitionMetadata {
    /// Version 0 with `topic_id`: what Kafka and the engine write.
    pub fn new(topic_id: TopicId) -> PartitionMetadata {
        PartitionMetadata {
            version: 0,
            topic_id,
        }
    }

    /// The file's bytes, as Kafka's `PartitionMetadata.encode` writes them.
    pub fn encode(&self) -> Vec<u8> {
        format!("version: {}\ntopic_id: {}", self.version, self.topic_id).into_bytes()
    }

    /// Parses the file's bytes as Kafka's `PartitionMetadataReadBuffer` does: two lines (`\n`,
    /// `\r\n` or `\r`), each `<name>:` then white space then the value; a version ≥ 0; a
    /// topic id that decodes to 16 bytes and is not zero. What follows the second line is
    /// ignored.
    ///
    /// # Errors
    /// Why the bytes are not such a file ([`read_partition_metadata`] names the file).
    pub fn parse(bytes: &[u8]) -> Result<PartitionMetadata, &'static str> {
        let text = std::str::from_utf8(bytes).map_err(|_| "the file is not UTF-8")?;
        let mut lines = java_lines(text);
        let version = lines
            .next()
            .and_then(field)
            .ok_or("the first line is not `version: <n>`")?;
        let version: i32 = version.parse().map_err(|_| "the version is not a number")?;
        if version < 0 {
            return Err("the version is below 0");
        }
        let second = lines.next().ok_or("the second line is missing")?;
        let topic_id: TopicId = field(second)
            .ok_or("the second line is not `topic_id: <id>`")?
            .parse()
            .map_err(|_| "the topic id is not a base64url UUID")?;
        if topic_id == TopicId::ZERO {
            return Err("the topic id is the zero UUID");
        }
        Ok(PartitionMetadata { version, topic_id })
    }
}

/// The lines of `text` as Java's `BufferedReader.readLine` returns them: ended by `\n`, `\r`
/// or `\r\n`.
fn java_lines(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let current = rest?;
        match current.find(['\n', '\r']) {
            Some(end) => {
                let skip = if current[end..].starts_with("\r\n") {
                    2
                } else {
                    1
                };
                rest = Some(&current[end + skip..]).filter(|r| !r.is_empty());
                Some(&current[..end])
            }
            None => {
                rest = None;
                Some(current)
            }
        }
    })
}

/// The value of a `name: value` line, as Java's `line.split(":\\s+")` finds it: the line must
/// split into exactly two parts (trailing empty parts dropped, as Java drops them).
fn field(line: &str) -> Option<&str> {
    let is_java_space = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
    let bytes = line.as_bytes();
    let mut parts = Vec::new();
    let (mut start, mut at) = (0, 0);
    while at < bytes.len() {
        if bytes[at] == b':' && bytes.get(at + 1).copied().is_some_and(is_java_space) {
            parts.push(&line[start..at]);
            at += 1;
            while bytes.get(at).copied().is_some_and(is_java_space) {
                at += 1;
            }
            start = at;
        } else {
            at += 1;
        }
    }
    parts.push(&line[start..]);
    while parts.last().is_some_and(|part| part.is_empty()) {
        parts.pop();
    }
    match parts[..] {
        [_, value] => Some(value),
        _ => None,
    }
}

/// Reads `dir/partition.metadata`: `None` when the file does not exist.
///
/// # Errors
/// `Corrupt` (naming the file) when it does not parse; I/O errors.
pub fn read_partition_metadata(
    storage: &Arc<dyn Storage>,
    dir: &Path,
) -> Result<Option<PartitionMetadata>, Error> {
    let path = dir.join(PARTITION_METADATA_FILE_NAME);
    let file = match storage.open(&path, OpenMode::Read) {
        Ok(file) => file,
        Err(e) if e.io_kind() == Some(std::io::ErrorKind::NotFound) => return Ok(None),
        Err(e) => return Err(e),
    };
    let len = usize::try_from(file.len()?).unwrap_or(usize::MAX);
    // The file is 43 bytes; a huge one is damage, not something to read into memory.
    if len > 4096 {
        return Err(Error::Corrupt {
            file: path,
            position: 0,
            what: Corruption::BadHeader("partition.metadata is longer than 4 KiB"),
        });
    }
    let bytes = file.read_exact_to_vec(len, 0)?;
    PartitionMetadata::parse(&bytes)
        .map(Some)
        .map_err(|why| Error::Corrupt {
            file: path,
            position: 0,
            what: Corruption::BadHeader(why),
        })
}

/// Writes `dir/partition.metadata` durably, as Kafka does: under the temporary name, fsynced,
/// renamed into place, then the directory fsynced.
///
/// # Errors
/// I/O errors; the old file, if any, is then still in place.
pub fn write_partition_metadata(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    metadata: &PartitionMetadata,
) -> Result<(), Error> {
    partlog::unstable::replace_file_durably(
        storage.as_ref(),
        dir,
        PARTITION_METADATA_TEMP_NAME,
        PARTITION_METADATA_FILE_NAME,
        &metadata.encode(),
    )
}
