//! One `__transaction_state` partition read from its files, as Kafka's
//! `kafka-dump-log --transaction-log-decoder` reads it but folded to the state each id ends in:
//! for a partlog engine's directory or a Kafka broker's, without a coordinator.

use std::collections::BTreeMap;
use std::path::Path;

use partlog::{Error, Log, LogConfig};

use super::log_records::TransactionLogValue;
use super::recovery::load_partition;

/// Kafka's `__transaction_state` topic, read from a partition directory.
#[derive(Debug, Clone, Copy)]
pub struct TransactionLog;

impl TransactionLog {
    /// The state each transactional id of the `__transaction_state-N` directory `dir` ends in:
    /// the last value written for it, as the coordinator's load on open replays it. An id whose
    /// last record is a tombstone (it expired) is absent. The directory is opened read-only
    /// (nothing in it changes, and a broker's or an engine's lock is respected as
    /// [`Log::open_read_only`] does).
    ///
    /// # Errors
    /// `Corrupt` for a record whose key or value does not decode, naming the segment file and
    /// the byte of its batch; the open and read errors of [`Log::open_read_only`].
    pub fn read_dir(dir: impl AsRef<Path>) -> Result<BTreeMap<String, TransactionLogValue>, Error> {
        let log = Log::open_read_only(dir.as_ref(), LogConfig::default())?;
        Ok(load_partition(&log)?
            .into_iter()
            .filter_map(|(id, value)| Some((id, value?)))
            .collect())
    }
}
