//! [`OffsetsLog`]: the port through which the offset store and the group coordinator write and
//! replay one `__consumer_offsets` partition, and its implementation on a partlog [`Log`].
//!
//! The store does not own its log: the engine opens `__consumer_offsets-N` on its shared
//! storage, clock and workers (configured with [`offsets_log_config`]) and hands it over, as it
//! hands the transaction coordinator its `__transaction_state` partitions. Tests hand over a
//! [`Log`] in a temporary directory.

use std::sync::Arc;

use partlog::unstable::format::control_record_type;
use partlog::{
    BatchBuilder, Compression, ControlRecordType, Log, LogConfig, LogConfigBuilder, NewRecord,
    ReadBound,
};

use crate::Error;

/// One record the store writes: a key and a value (`None`: a tombstone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetsRecord {
    /// The key's bytes.
    pub key: Vec<u8>,
    /// The value's bytes, `None` for a tombstone.
    pub value: Option<Vec<u8>>,
}

/// One entry of a replay, in offset order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replayed<'a> {
    /// A data record.
    Record {
        /// Its offset.
        offset: i64,
        /// The producer whose transaction holds it, or `None` outside a transaction.
        transactional_producer: Option<i64>,
        /// Its key.
        key: Option<&'a [u8]>,
        /// Its value, `None` for a tombstone.
        value: Option<&'a [u8]>,
    },
    /// A transaction marker.
    Marker {
        /// Its offset.
        offset: i64,
        /// The producer whose transaction it ends.
        producer_id: i64,
        /// COMMIT (`true`) or ABORT.
        commit: bool,
    },
}

/// What the offset store needs of its `__consumer_offsets` partition. Every append is durable
/// when it returns (the group commit's fsync has covered it), so that nothing the store answers
/// for can be lost in a crash.
pub trait OffsetsLog: Send + Sync {
    /// The log's name in errors (its directory).
    fn name(&self) -> String;

    /// Appends `records` as one batch written by the coordinator (no producer id, no sequence
    /// checks), durably; returns the offset of the first.
    ///
    /// # Errors
    /// The log's append and sync errors.
    fn append(&self, records: &[OffsetsRecord], timestamp: i64) -> Result<i64, Error>;

    /// Appends `records` as one batch of producer `producer_id`'s open transaction, durably;
    /// returns the offset of the first.
    ///
    /// # Errors
    /// The log's append and sync errors (a fenced epoch among them).
    fn append_transactional(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        records: &[OffsetsRecord],
        timestamp: i64,
    ) -> Result<i64, Error>;

    /// Appends the marker that ends `producer_id`'s transaction, durably; returns its offset.
    ///
    /// # Errors
    /// The log's append and sync errors.
    fn append_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
    ) -> Result<i64, Error>;

    /// Calls `visit` with every record and marker from the log start to its end, in order.
    ///
    /// # Errors
    /// The log's read errors, and the first error `visit` returns.
    fn replay(&self, visit: &mut dyn FnMut(Replayed<'_>) -> Result<(), Error>)
    -> Result<(), Error>;
}

/// The settings of a `__consumer_offsets` partition, on top of `builder`: Kafka's
/// `cleanup.policy=compact`, `offsets.topic.segment.bytes` (100 MiB) and no compression.
///
/// # Errors
/// What `builder` refuses.
pub fn offsets_log_config(builder: LogConfigBuilder) -> Result<LogConfig, partlog::Error> {
    // One definition: the engine opens the partitions the coordinator writes markers into.
    partlog_engine::txn::logs::consumer_offsets_log_config(builder)
}

/// The most bytes one replay read asks for; a larger batch still comes back whole.
const REPLAY_READ_BYTES: usize = 1 << 20;

impl OffsetsLog for Log {
    fn name(&self) -> String {
        self.dir().display().to_string()
    }

    fn append(&self, records: &[OffsetsRecord], timestamp: i64) -> Result<i64, Error> {
        let new: Vec<NewRecord> = records
            .iter()
            .map(|r| NewRecord::new(timestamp, Some(&r.key), r.value.as_deref()))
            .collect();
        let info = Log::append(self, &new)?;
        self.wait_durable(info.last_offset)?;
        Ok(info.first_offset)
    }

    fn append_transactional(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        records: &[OffsetsRecord],
        timestamp: i64,
    ) -> Result<i64, Error> {
        // The sequence continues the producer's last batch in this epoch, as its client's would.
        let sequence = self
            .producer_state(producer_id)
            .filter(|s| s.producer_epoch == producer_epoch && s.last_sequence >= 0)
            .map_or(0, |s| s.last_sequence.wrapping_add(1) & i32::MAX);
        let mut batch = BatchBuilder::new(Compression::None)
            .producer(producer_id, producer_epoch, sequence)
            .transactional(true);
        for r in records {
            batch.push(&NewRecord::new(timestamp, Some(&r.key), r.value.as_deref()));
        }
        let info = self.append_batch(&batch.build()?)?;
        self.wait_durable(info.last_offset)?;
        Ok(info.first_offset)
    }

    fn append_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
    ) -> Result<i64, Error> {
        let info = if commit {
            self.commit_transaction(producer_id, producer_epoch)?
        } else {
            self.abort_transaction(producer_id, producer_epoch)?
        };
        self.wait_durable(info.last_offset)?;
        Ok(info.first_offset)
    }

    fn replay(
        &self,
        visit: &mut dyn FnMut(Replayed<'_>) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let mut offset = self.log_start_offset();
        let mut scratch = Vec::new();
        loop {
            let fetch = self.read(offset, REPLAY_READ_BYTES, ReadBound::LogEnd)?;
            if fetch.is_empty() {
                return Ok(());
            }
            for batch in fetch.batches() {
                let batch = batch?;
                let header = batch.header().copied();
                let control = batch.is_control();
                let producer = header
                    .filter(|h| h.is_transactional())
                    .map(|h| h.producer_id);
                for record in batch.records(&mut scratch)? {
                    let record = record?;
                    if record.offset < offset {
                        continue;
                    }
                    if control {
                        let commit = match control_record_type(&record)? {
                            ControlRecordType::Commit => true,
                            ControlRecordType::Abort => false,
                            // Other control records (KRaft's) end no transaction.
                            _ => continue,
                        };
                        let producer_id = header.map_or(-1, |h| h.producer_id);
                        visit(Replayed::Marker {
                            offset: record.offset,
                            producer_id,
                            commit,
                        })?;
                    } else {
                        visit(Replayed::Record {
                            offset: record.offset,
                            transactional_producer: producer,
                            key: record.key,
                            value: record.value,
                        })?;
                    }
                }
            }
            offset = fetch.next_offset();
        }
    }
}

impl<T: OffsetsLog + ?Sized> OffsetsLog for Arc<T> {
    fn name(&self) -> String {
        (**self).name()
    }

    fn append(&self, records: &[OffsetsRecord], timestamp: i64) -> Result<i64, Error> {
        (**self).append(records, timestamp)
    }

    fn append_transactional(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        records: &[OffsetsRecord],
        timestamp: i64,
    ) -> Result<i64, Error> {
        (**self).append_transactional(producer_id, producer_epoch, records, timestamp)
    }

    fn append_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
    ) -> Result<i64, Error> {
        (**self).append_marker(producer_id, producer_epoch, commit)
    }

    fn replay(
        &self,
        visit: &mut dyn FnMut(Replayed<'_>) -> Result<(), Error>,
    ) -> Result<(), Error> {
        (**self).replay(visit)
    }
}
