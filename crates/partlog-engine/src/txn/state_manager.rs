//! [`TransactionStateManager`]: the coordinator's cache of [`TransactionMetadata`] and its
//! writes to `__transaction_state` (Kafka's `TransactionStateManager`).
//!
//! A transition is persisted by `append_and_complete`:
//! the record of the prepared values is appended to the id's partition and made durable
//! (`wait_durable`, acks=all), and only then applied to the cached metadata. A failed append or
//! fsync rolls the pending state back: the metadata is as it was, and the caller gets the error.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use partlog::unstable::Clock;
use partlog::{Error, NewRecord};

use super::config::TransactionCoordinatorConfig;
use super::log_records::{encode_key, encode_value, transaction_state_partition};
use super::logs::TxnLogs;
use super::metadata::{TransactionMetadata, TxnTransitMetadata};
use super::state::TransactionState;

/// One id's metadata, locked while it is read or a transition is prepared or completed, never
/// while a record is written.
pub(crate) type MetadataEntry = Arc<Mutex<TransactionMetadata>>;

/// Locks an id's metadata; a panic in another holder leaves the metadata as it was (every
/// change is made in one step under the lock).
pub(crate) fn lock(entry: &MetadataEntry) -> MutexGuard<'_, TransactionMetadata> {
    entry.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The cache of every transactional id's metadata and the writer of their records.
#[derive(Debug)]
pub struct TransactionStateManager {
    logs: Arc<dyn TxnLogs>,
    clock: Arc<dyn Clock>,
    config: TransactionCoordinatorConfig,
    cache: Mutex<HashMap<String, MetadataEntry>>,
}

impl TransactionStateManager {
    /// A manager with an empty cache.
    pub(crate) fn new(
        logs: Arc<dyn TxnLogs>,
        clock: Arc<dyn Clock>,
        config: TransactionCoordinatorConfig,
    ) -> Self {
        TransactionStateManager {
            logs,
            clock,
            config,
            cache: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn logs(&self) -> &Arc<dyn TxnLogs> {
        &self.logs
    }

    pub(crate) fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    fn cache(&self) -> MutexGuard<'_, HashMap<String, MetadataEntry>> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The partition of `__transaction_state` that holds `transactional_id`.
    pub fn partition_for(&self, transactional_id: &str) -> Result<i32, Error> {
        transaction_state_partition(transactional_id, self.config.transaction_state_partitions)
    }

    /// The metadata of `transactional_id`, if the coordinator knows the id.
    pub(crate) fn get(&self, transactional_id: &str) -> Option<MetadataEntry> {
        self.cache().get(transactional_id).cloned()
    }

    /// Caches `metadata` unless its id is cached already; returns the cached entry.
    pub(crate) fn put_if_not_exists(&self, metadata: TransactionMetadata) -> MetadataEntry {
        let mut cache = self.cache();
        Arc::clone(
            cache
                .entry(metadata.transactional_id.clone())
                .or_insert_with(|| Arc::new(Mutex::new(metadata))),
        )
    }

    /// Replaces whatever is cached for the id (recovery).
    pub(crate) fn put(&self, metadata: TransactionMetadata) {
        self.cache().insert(
            metadata.transactional_id.clone(),
            Arc::new(Mutex::new(metadata)),
        );
    }

    /// Forgets the id (recovery met its tombstone).
    pub(crate) fn remove(&self, transactional_id: &str) {
        self.cache().remove(transactional_id);
    }

    /// Every cached entry, for the timers.
    pub(crate) fn entries(&self) -> Vec<MetadataEntry> {
        self.cache().values().cloned().collect()
    }

    /// Appends `transit` for `transactional_id` to its `__transaction_state` partition, waits
    /// until it is durable, then completes the transition on the cached metadata (a `Dead` id
    /// leaves the cache). On failure the pending state is rolled back and the error returned.
    pub(crate) fn append_and_complete(
        &self,
        transactional_id: &str,
        entry: &MetadataEntry,
        transit: &TxnTransitMetadata,
    ) -> Result<(), Error> {
        self.append_and_complete_waiting(transactional_id, entry, transit, true)
    }

    /// [`append_and_complete`](Self::append_and_complete) for `Complete*`, which ends a
    /// transaction whose markers are already durable: the record is appended but not waited
    /// for. The decision was durable at `Prepare*`; if a crash loses this record, recovery
    /// finds `Prepare*`, writes the markers again (ending nothing the second time) and
    /// completes. Any later record of the id lies after it in the same log, so a transition
    /// that waits for its own record (the next `add_partitions`) makes this one durable too.
    pub(crate) fn append_and_complete_unawaited(
        &self,
        transactional_id: &str,
        entry: &MetadataEntry,
        transit: &TxnTransitMetadata,
    ) -> Result<(), Error> {
        self.append_and_complete_waiting(transactional_id, entry, transit, false)
    }

    fn append_and_complete_waiting(
        &self,
        transactional_id: &str,
        entry: &MetadataEntry,
        transit: &TxnTransitMetadata,
        wait_durable: bool,
    ) -> Result<(), Error> {
        if let Err(error) = self.append(transactional_id, transit, wait_durable) {
            lock(entry).roll_back_pending();
            return Err(error);
        }
        if transit.state == TransactionState::Dead {
            let mut cache = self.cache();
            if cache
                .get(transactional_id)
                .is_some_and(|cached| Arc::ptr_eq(cached, entry))
            {
                cache.remove(transactional_id);
            }
            lock(entry).roll_back_pending();
            return Ok(());
        }
        let mut metadata = lock(entry);
        let completed = metadata.complete_transition_to(transit);
        if completed.is_err() {
            metadata.roll_back_pending();
        }
        completed
    }

    /// The record of `transit` (a tombstone for `Dead`), appended, and durable if
    /// `wait_durable`.
    fn append(
        &self,
        transactional_id: &str,
        transit: &TxnTransitMetadata,
        wait_durable: bool,
    ) -> Result<(), Error> {
        let key = encode_key(transactional_id)?;
        let value = if transit.state == TransactionState::Dead {
            None
        } else {
            let (value, version) = transit.to_log_value(self.config.transaction_version);
            Some(encode_value(&value, version)?)
        };
        let log = self
            .logs
            .transaction_state_log(self.partition_for(transactional_id)?)?;
        let appended = log.append(&[NewRecord::new(
            self.clock.now_ms(),
            Some(&key),
            value.as_deref(),
        )])?;
        if wait_durable {
            log.wait_durable(appended.last_offset)?;
        }
        Ok(())
    }
}
