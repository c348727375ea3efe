//! One Raft entry as one Kafka RecordBatch v2 of one record.
//!
//! - base offset = the entry's index, so partlog's offsets are Raft's indexes;
//! - `partitionLeaderEpoch` = the entry's term, so the directory's `leader-epoch-checkpoint`
//!   lists where each term starts, as a Kafka follower's would;
//! - a record header `openraft.leader` = the proposing leader's node id, 8 bytes big-endian,
//!   because openraft 0.9's committed leader id is (term, node id) and a term alone does not
//!   name it;
//! - the record's value = the entry's `EntryPayload`, serialized as JSON.
//!
//! One batch per entry, never one batch for many: Raft truncates at an exact index, and partlog
//! (like Kafka) truncates whole batches.

use std::time::{SystemTime, UNIX_EPOCH};

use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, RaftTypeConfig};
use partlog::{BatchBuilder, BatchView, Compression};

/// The record header that carries the leader's node id.
pub const LEADER_HEADER: &str = "openraft.leader";

/// Why an entry could not be encoded or a stored record decoded. The store turns it into
/// openraft's `StorageError`; the message names the index (offset) and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodecError {
    /// The entry's index, which is the record's offset.
    pub index: u64,
    /// What was wrong, for people.
    pub why: String,
}

impl std::fmt::Display for CodecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "raft entry at offset {}: {}", self.index, self.why)
    }
}

impl std::error::Error for CodecError {}

/// Appends the batch for `entry` to `out`, stamped with the time of this call. For many
/// entries, [`EntryEncoder`] reads the clock once and reuses its buffers.
///
/// Fails, writing nothing, for a term above `i32::MAX` (the batch field is an i32, and a wrap
/// would reorder terms) or an index above `i64::MAX` (Kafka offsets are i64).
pub fn encode_entry<C>(entry: &Entry<C>, out: &mut Vec<u8>) -> Result<(), CodecError>
where
    C: RaftTypeConfig<NodeId = u64>,
{
    EntryEncoder::new().encode(entry, out)
}

/// Encodes the entries of one append, one batch each, as [`encode_entry`] does: one clock read
/// for all of them, and one JSON buffer and one batch buffer reused from entry to entry, so that
/// an entry allocates nothing once the buffers have grown to its size.
#[derive(Debug)]
pub struct EntryEncoder {
    /// Every record's timestamp: the time the encoder was made.
    timestamp: i64,
    /// The JSON of the entry being encoded.
    payload: Vec<u8>,
    /// The previous entry's batch, whose buffer the next batch is built in.
    batch: Vec<u8>,
}

impl Default for EntryEncoder {
    fn default() -> Self {
        EntryEncoder::new()
    }
}

impl EntryEncoder {
    /// An encoder whose records carry the current time.
    pub fn new() -> Self {
        EntryEncoder::at(now_ms())
    }

    /// An encoder whose records carry `timestamp`.
    fn at(timestamp: i64) -> Self {
        EntryEncoder {
            timestamp,
            payload: Vec::new(),
            batch: Vec::new(),
        }
    }

    /// Appends the batch for `entry` to `out`. Fails, writing nothing, as [`encode_entry`].
    pub fn encode<C>(&mut self, entry: &Entry<C>, out: &mut Vec<u8>) -> Result<(), CodecError>
    where
        C: RaftTypeConfig<NodeId = u64>,
    {
        let index = entry.log_id.index;
        let fail = |why: String| CodecError { index, why };
        let offset = i64::try_from(index).map_err(|_| {
            fail(format!(
                "index {index} is above i64::MAX, the largest Kafka offset"
            ))
        })?;
        let term = entry.log_id.leader_id.term;
        let epoch = i32::try_from(term).map_err(|_| {
            fail(format!(
                "term {term} is above i32::MAX, the largest partitionLeaderEpoch a batch can hold"
            ))
        })?;
        self.payload.clear();
        serde_json::to_writer(&mut self.payload, &entry.payload)
            .map_err(|e| fail(format!("the payload does not serialize: {e}")))?;
        let leader = entry.log_id.leader_id.node_id.to_be_bytes();
        let mut builder =
            BatchBuilder::with_buffer(Compression::None, std::mem::take(&mut self.batch))
                .base_offset(offset)
                .partition_leader_epoch(epoch);
        builder.push_parts(
            self.timestamp,
            None,
            Some(&self.payload),
            &[(LEADER_HEADER, Some(&leader[..]))],
        );
        let batch = builder
            .build()
            .map_err(|e| fail(format!("the batch does not build: {e}")))?;
        out.extend_from_slice(&batch);
        self.batch = batch;
        Ok(())
    }
}

/// Decodes the entry a batch of this crate holds. Anything else, a batch of several records, a
/// missing or malformed `openraft.leader` header, a negative epoch or a value that is not an
/// `EntryPayload`, is a [`CodecError`] naming the offset.
pub fn decode_entry<C>(batch: &BatchView<'_>, scratch: &mut Vec<u8>) -> Result<Entry<C>, CodecError>
where
    C: RaftTypeConfig<NodeId = u64>,
{
    let base = batch.base_offset();
    let index = u64::try_from(base).map_err(|_| CodecError {
        index: 0,
        why: format!("negative base offset {base}"),
    })?;
    let fail = |why: String| CodecError { index, why };
    let header = batch.header();
    let term = u64::try_from(header.partition_leader_epoch).map_err(|_| {
        fail(format!(
            "partitionLeaderEpoch {} is not a Raft term",
            header.partition_leader_epoch
        ))
    })?;
    if header.records_count != 1 || header.last_offset_delta != 0 {
        return Err(fail(format!(
            "a batch of {} records (last offset delta {}), not one entry",
            header.records_count, header.last_offset_delta
        )));
    }
    let mut records = batch
        .records(scratch)
        .map_err(|e| fail(format!("the records do not decode: {e}")))?;
    let record = match records.next() {
        Some(Ok(record)) => record,
        Some(Err(e)) => return Err(fail(format!("the record does not decode: {e}"))),
        None => return Err(fail("the batch holds no record".into())),
    };
    let mut leader = None;
    for header in record.headers() {
        if header.key == LEADER_HEADER.as_bytes() {
            let bytes = header
                .value
                .and_then(|v| <[u8; 8]>::try_from(v).ok())
                .ok_or_else(|| fail(format!("header {LEADER_HEADER} is not 8 bytes")))?;
            leader = Some(u64::from_be_bytes(bytes));
        }
    }
    let node_id = leader.ok_or_else(|| fail(format!("no {LEADER_HEADER} header")))?;
    let value = record
        .value
        .ok_or_else(|| fail("the record has no value".into()))?;
    let payload: EntryPayload<C> = serde_json::from_slice(value)
        .map_err(|e| fail(format!("the value is not an openraft EntryPayload: {e}")))?;
    Ok(Entry {
        log_id: LogId::new(CommittedLeaderId::new(term, node_id), index),
        payload,
    })
}

/// The record timestamp: the time of the write, as a Kafka producer's CreateTime. Time-based
/// retention reads it, so it must not be a constant such as 0.
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .ok()
        .and_then(|d| i64::try_from(d.as_millis()).ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use openraft::Membership;
    use partlog::BatchIter;

    use super::*;
    use crate::testing::{KvConfig, KvRequest};

    fn entry(index: u64, payload: EntryPayload<KvConfig>) -> Entry<KvConfig> {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(3, 7), index),
            payload,
        }
    }

    fn set(value_bytes: usize) -> EntryPayload<KvConfig> {
        EntryPayload::Normal(KvRequest::Set {
            key: "k\"quoted\"".into(),
            value: "v".repeat(value_bytes),
        })
    }

    /// The encoder hands each batch's buffer to the next entry: a large entry followed by
    /// smaller ones must leave nothing of its bytes in theirs.
    #[test]
    fn a_reused_encoder_writes_the_bytes_a_fresh_one_writes_for_every_entry() {
        let membership = Membership::<u64, openraft::BasicNode>::new(vec![[1u64, 2].into()], None);
        let entries = vec![
            entry(10, set(5000)),
            entry(11, set(3)),
            entry(12, EntryPayload::Blank),
            entry(13, EntryPayload::Membership(membership)),
            entry(14, set(100)),
        ];
        let mut reused = EntryEncoder::at(1_700_000_000_000);
        let mut together = Vec::new();
        let mut one_by_one = Vec::new();
        for entry in &entries {
            reused.encode(entry, &mut together).unwrap();
            EntryEncoder::at(1_700_000_000_000)
                .encode(entry, &mut one_by_one)
                .unwrap();
        }
        assert_eq!(together, one_by_one);
        let mut scratch = Vec::new();
        let mut decoded = Vec::new();
        for (_, batch) in BatchIter::new(&together) {
            let batch = batch.unwrap();
            assert_eq!(batch.header().max_timestamp, 1_700_000_000_000);
            decoded.push(decode_entry::<KvConfig>(&batch, &mut scratch).unwrap());
        }
        assert_eq!(decoded, entries);
    }
}
