//! Tests of the producer state: Kafka's `ProducerStateManagerTest` and the producer-state cases of
//! `UnifiedLogTest`, ported at the manager level, partlog's own cases, and a property test of the
//! invariants. This file holds the helpers they share, named after Kafka's test helpers.

mod invariants;
mod log_cases;
mod manager_cases;
mod partlog_cases;

use super::*;
use crate::error::Error;
use crate::log::txn::producer_state::entry::NUM_BATCHES_TO_RETAIN;

const PRODUCER_ID: i64 = 1;
const EPOCH: i16 = 0;
const DEFAULT_SEQUENCE: i32 = 0;
/// Kafka's `PRODUCER_ID_EXPIRATION_MS_DEFAULT`.
const EXPIRATION_MS: i64 = 86_400_000;
/// The tests' clock: Kafka's `MockTime` starts at an arbitrary wall-clock time too.
const NOW: i64 = 1_700_000_000_000;

fn config(verification: bool) -> ProducerStateConfig {
    ProducerStateConfig {
        producer_id_expiration_ms: EXPIRATION_MS,
        transaction_verification_enabled: verification,
    }
}

fn manager() -> ProducerStateManager {
    ProducerStateManager::new(config(false), 0)
}

/// `seq + delta` with Kafka's wrap after `i32::MAX`.
fn add_sequence(seq: i32, delta: i32) -> i32 {
    if seq > i32::MAX - delta {
        delta - (i32::MAX - seq) - 1
    } else {
        seq + delta
    }
}

fn data(
    producer_id: i64,
    epoch: i16,
    base_sequence: i32,
    first_offset: i64,
    last_offset: i64,
    timestamp: i64,
    is_transactional: bool,
) -> BatchSummary {
    let delta = i32::try_from(last_offset - first_offset).unwrap();
    BatchSummary {
        producer_id,
        producer_epoch: epoch,
        base_sequence,
        last_sequence: add_sequence(base_sequence, delta),
        first_offset,
        last_offset,
        timestamp,
        is_transactional,
        kind: BatchKind::Data,
    }
}

fn marker(
    producer_id: i64,
    epoch: i16,
    offset: i64,
    is_abort: bool,
    coordinator_epoch: i32,
    timestamp: i64,
) -> BatchSummary {
    BatchSummary {
        producer_id,
        producer_epoch: epoch,
        base_sequence: -1,
        last_sequence: -1,
        first_offset: offset,
        last_offset: offset,
        timestamp,
        is_transactional: true,
        kind: BatchKind::Marker {
            is_abort,
            coordinator_epoch,
        },
    }
}

/// Kafka's `appendEntry`, with its parameters: one single-record batch at `offset`, validated at the
/// `ProducerAppendInfo` level (no duplicate check), applied, and the map end moved past it.
#[allow(
    clippy::too_many_arguments,
    reason = "the parameters of Kafka's appendEntry, so that ported cases read as Kafka's"
)]
fn append_entry(
    manager: &mut ProducerStateManager,
    producer_id: i64,
    epoch: i16,
    seq: i32,
    offset: i64,
    timestamp: i64,
    origin: AppendOrigin,
    is_transactional: bool,
) -> Result<()> {
    let mut info = manager.prepare_update(producer_id, origin);
    info.append_data_batch(&data(
        producer_id,
        epoch,
        seq,
        offset,
        offset,
        timestamp,
        is_transactional,
    ))?;
    manager.update(info);
    manager.update_map_end_offset(offset + 1);
    Ok(())
}

fn append_client_entry(
    manager: &mut ProducerStateManager,
    producer_id: i64,
    epoch: i16,
    seq: i32,
    offset: i64,
    is_transactional: bool,
) -> Result<()> {
    append_entry(
        manager,
        producer_id,
        epoch,
        seq,
        offset,
        NOW,
        AppendOrigin::Client,
        is_transactional,
    )
}

fn append_replication_entry(manager: &mut ProducerStateManager, epoch: i16, seq: i32, offset: i64) {
    append_entry(
        manager,
        PRODUCER_ID,
        epoch,
        seq,
        offset,
        NOW,
        AppendOrigin::Replication,
        false,
    )
    .unwrap();
}

/// Kafka's `appendEndTxnMarker`: a marker from the coordinator, applied, its transaction
/// completed, the map end moved past it.
fn append_end_txn_marker(
    manager: &mut ProducerStateManager,
    producer_id: i64,
    epoch: i16,
    is_abort: bool,
    offset: i64,
    coordinator_epoch: i32,
) -> Result<Option<CompletedTxn>> {
    let mut info = manager.prepare_update(producer_id, AppendOrigin::Coordinator);
    let completed = info.append(&marker(
        producer_id,
        epoch,
        offset,
        is_abort,
        coordinator_epoch,
        NOW,
    ))?;
    manager.update(info);
    if let Some(txn) = completed {
        manager.complete_txn(txn);
    }
    manager.update_map_end_offset(offset + 1);
    Ok(completed)
}

fn entry(manager: &ProducerStateManager, producer_id: i64) -> &ProducerStateEntry {
    manager
        .last_entry(producer_id)
        .unwrap_or_else(|| panic!("producer {producer_id} should have an entry"))
}

/// What a snapshot keeps of the state: the 46-byte entry fields, through the getters the
/// snapshot writer uses and the constructor its reader uses.
fn snapshot_round_trip(manager: &ProducerStateManager) -> Vec<(i64, ProducerStateEntry)> {
    manager
        .entries()
        .into_iter()
        .map(|(pid, e)| {
            (
                pid,
                ProducerStateEntry::from_snapshot(
                    e.producer_epoch,
                    e.last_seq(),
                    e.last_data_offset(),
                    e.last_offset_delta(),
                    e.last_timestamp,
                    e.coordinator_epoch,
                    e.current_txn_first_offset.unwrap_or(-1),
                ),
            )
        })
        .collect()
}

fn kafka_code<T: std::fmt::Debug>(result: Result<T>) -> i16 {
    match result {
        Err(error) => error.kafka_code().unwrap_or(-1),
        Ok(value) => panic!("expected an error, got {value:?}"),
    }
}

/// A leader's log over the manager: offsets assigned at the log end, duplicates answered with
/// the original offsets, the state applied only after the (here, infallible) write.
struct LeaderLog {
    state: ProducerStateManager,
    log_end_offset: i64,
}

impl LeaderLog {
    fn new(config: ProducerStateConfig) -> Self {
        LeaderLog {
            state: ProducerStateManager::new(config, 0),
            log_end_offset: 0,
        }
    }

    fn append(
        &mut self,
        producer_id: i64,
        epoch: i16,
        base_sequence: i32,
        records: i64,
        is_transactional: bool,
        origin: AppendOrigin,
    ) -> Result<(i64, i64)> {
        let first = self.log_end_offset;
        let last = first + records - 1;
        let batch = data(
            producer_id,
            epoch,
            base_sequence,
            first,
            last,
            NOW,
            is_transactional,
        );
        match self.state.analyze(&batch, origin)? {
            ProducerAppendCheck::Duplicate {
                first_offset,
                last_offset,
            } => Ok((first_offset, last_offset)),
            ProducerAppendCheck::Append(info) => {
                self.log_end_offset = last + 1;
                self.state.commit(info, last + 1);
                Ok((first, last))
            }
        }
    }

    fn append_as_leader(
        &mut self,
        producer_id: i64,
        epoch: i16,
        seq: i32,
        records: i64,
    ) -> Result<(i64, i64)> {
        self.append(
            producer_id,
            epoch,
            seq,
            records,
            false,
            AppendOrigin::Client,
        )
    }
}
