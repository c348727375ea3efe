//! Recovery on open ([`TransactionCoordinator::open`]): the coordinator's state is replayed
//! from every existing `__transaction_state` partition (Kafka's
//! `loadTransactionsForTxnTopicPartition`), then the transactions that were decided but not
//! completed are completed.
//!
//! The last record of an id wins (a tombstone removes it). A record whose key or value does not
//! decode is `Error::Corrupt`, naming the segment file and the byte of its batch: the
//! coordinator does not start with part of its state. Records of versions this code does not
//! know are skipped, as Kafka skips them.
//!
//! `PrepareCommit` and `PrepareAbort` were decided before the crash: their markers are written
//! again (a marker that was already written ends nothing the second time) and they complete.
//! An `Ongoing` transaction is left to its timeout ([`tick`](TransactionCoordinator::tick)),
//! which aborts it unless its producer ends it first.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use partlog::unstable::Clock;
use partlog::{Corruption, Error, Log, ReadBound};

use super::config::TransactionCoordinatorConfig;
use super::coordinator::TransactionCoordinator;
use super::log_records::{TransactionLogValue, TxnLogRecord, read_record};
use super::logs::TxnLogs;
use super::metadata::TransactionMetadata;
use super::state::TransactionState;
use super::timers::TimerReport;
use crate::engine::producer_ids::ProducerIdManager;

impl TransactionCoordinator {
    /// Opens the coordinator over `logs`: replays every existing `__transaction_state`
    /// partition, then completes the transactions that were decided (see the module docs). A
    /// decided transaction whose markers cannot be written now stays decided, and the next
    /// [`tick`](Self::tick) tries again.
    ///
    /// # Errors
    /// `InvalidConfig` for a setting out of range; `Corrupt` for a record that does not decode;
    /// the logs' open and read errors.
    pub fn open(
        logs: Arc<dyn TxnLogs>,
        producer_ids: Arc<ProducerIdManager>,
        clock: Arc<dyn Clock>,
        config: TransactionCoordinatorConfig,
    ) -> Result<(TransactionCoordinator, TimerReport), Error> {
        let coordinator =
            TransactionCoordinator::new_unloaded(Arc::clone(&logs), producer_ids, clock, config)?;
        let mut partitions = logs.transaction_state_partitions()?;
        partitions.sort_unstable();
        for partition in partitions {
            let log = logs.transaction_state_log(partition)?;
            for (id, value) in load_partition(&log)? {
                match value {
                    Some(value) if value.state != TransactionState::Dead => coordinator
                        .state
                        .put(TransactionMetadata::from_log_value(&id, &value)),
                    _ => coordinator.state.remove(&id),
                }
            }
        }
        let mut report = TimerReport::default();
        coordinator.complete_decided_transactions(&mut report);
        Ok((coordinator, report))
    }
}

/// The last value of each id in one partition; `None` for a tombstone.
pub(crate) fn load_partition(
    log: &Log,
) -> Result<HashMap<String, Option<TransactionLogValue>>, Error> {
    let mut last = HashMap::new();
    for record in log.records(log.log_start_offset(), ReadBound::LogEnd) {
        let record = record?;
        match read_record(record.key.as_deref(), record.value.as_deref()) {
            Ok(TxnLogRecord::Value {
                transactional_id,
                value,
            }) => {
                last.insert(transactional_id, Some(value));
            }
            Ok(TxnLogRecord::Tombstone { transactional_id }) => {
                last.insert(transactional_id, None);
            }
            Ok(
                TxnLogRecord::UnknownKeyVersion { .. } | TxnLogRecord::UnknownValueVersion { .. },
            ) => {}
            Err(error) => {
                let (file, position) = batch_position(log, record.offset);
                return Err(Error::Corrupt {
                    file,
                    position,
                    what: Corruption::BadRecord(error.what),
                });
            }
        }
    }
    Ok(last)
}

/// The segment file that holds `offset`, and the byte where its batch starts (0 when the file
/// cannot be walked: the error still names the file).
fn batch_position(log: &Log, offset: i64) -> (PathBuf, u64) {
    let storage = &log.config().storage;
    let dir = log.dir();
    let base = storage
        .list(dir)
        .unwrap_or_default()
        .iter()
        .filter_map(|name| name.strip_suffix(".log")?.parse::<i64>().ok())
        .filter(|&base| base <= offset)
        .max()
        .unwrap_or(0);
    let file = dir.join(format!("{base:020}.log"));
    let position = (|| {
        let segment = storage
            .open(&file, partlog::unstable::OpenMode::Read)
            .ok()?;
        let len = segment.len().ok()?;
        let mut position = 0u64;
        let mut header = [0u8; 27];
        while position + 27 <= len {
            segment.read_at(&mut header, position).ok()?;
            let base_offset = i64::from_be_bytes(header[0..8].try_into().ok()?);
            let length = i32::from_be_bytes(header[8..12].try_into().ok()?);
            let last_delta = i32::from_be_bytes(header[23..27].try_into().ok()?);
            if base_offset + i64::from(last_delta) >= offset {
                return Some(position);
            }
            position += 12 + u64::try_from(length).ok()?;
        }
        None
    })();
    (file, position.unwrap_or(0))
}
