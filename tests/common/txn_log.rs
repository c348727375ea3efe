//! What the transaction-aware compaction tests share (`tests/log_compaction_txn.rs` and
//! `tests/log_compaction_txn_model.rs`): a log on the manual clock, Kafka's test producers and
//! markers, and readers of the segment files as Kafka's `LogCleanerTest` reads them.
//!
//! Kafka's helpers map as follows: `appendTransactionalAsLeader` / `appendIdempotentAsLeader`
//! are [`Producer`] (one sequence counter per producer, every record's key and value its
//! number), `commitMarker` / `abortMarker` are [`Log::append_marker`], `log.roll()` is
//! [`Log::roll`], a cleaning at a given time is a pass on the log's [`ManualClock`], and
//! Kafka's `FakeOffsetMap(slots)` at the cleaner's 0.75 load factor is a key map of
//! `slots * 3 / 4` keys.
#![allow(
    dead_code,
    reason = "each test crate that includes this module uses a different part of it"
)]

use std::path::Path;
use std::sync::Arc;

use partlog::unstable::ManualClock;
use partlog::{
    AbortedTxn, AnyBatchIter, Batch, BatchBuilder, CleanupPolicy, CompactionOptions, Compression,
    ControlRecordType, Log, LogAppendInfo, LogConfig, NewRecord, ReadBound,
};

pub const T0: i64 = 1_700_000_000_000;

/// Kafka's `log.cleaner.delete.retention.ms` default, which the ported tests leave in place.
pub const DAY_MS: i64 = 24 * 60 * 60 * 1000;

pub fn config(clock: &Arc<ManualClock>, delete_retention_ms: i64) -> LogConfig {
    LogConfig::builder_for_tests()
        .segment_bytes(64 * 1024)
        // Rolls only where the tests roll.
        .segment_ms(i64::MAX / 4)
        .cleanup_policy(CleanupPolicy::COMPACT)
        .delete_retention_ms(delete_retention_ms)
        // Kafka's cleaner tests never expire a producer, whatever time the cleaner is given.
        .producer_id_expiration_ms(365 * DAY_MS)
        // No maintenance thread: every pass is one the test runs.
        .retention_check_interval_ms(-1)
        .clock(Arc::clone(clock) as Arc<dyn partlog::unstable::Clock>)
        .build()
        .unwrap()
}

/// One producer's appends, as Kafka's `append(Transactional|Idempotent)AsLeader` makes them.
pub struct Producer {
    pub id: i64,
    pub epoch: i16,
    pub transactional: bool,
    pub sequence: i32,
}

impl Producer {
    pub fn transactional(id: i64) -> Producer {
        Producer {
            id,
            epoch: 0,
            transactional: true,
            sequence: 0,
        }
    }

    pub fn idempotent(id: i64) -> Producer {
        Producer {
            transactional: false,
            ..Producer::transactional(id)
        }
    }

    /// One batch, a record per key (key and value both the key's number).
    pub fn append(&mut self, log: &Log, clock: &ManualClock, keys: &[i32]) -> LogAppendInfo {
        let mut builder = BatchBuilder::new(Compression::None)
            .producer(self.id, self.epoch, self.sequence)
            .transactional(self.transactional);
        for key in keys {
            let bytes = key.to_string();
            builder.push(&NewRecord::new(
                now(clock),
                Some(bytes.as_bytes()),
                Some(bytes.as_bytes()),
            ));
        }
        self.sequence += keys.len() as i32;
        log.append_batch(&builder.build().unwrap()).unwrap()
    }
}

pub fn now(clock: &ManualClock) -> i64 {
    partlog::unstable::Clock::now_ms(clock)
}

pub fn commit(log: &Log, producer_id: i64) {
    log.append_marker(producer_id, 0, ControlRecordType::Commit, 0)
        .unwrap();
}

pub fn abort(log: &Log, producer_id: i64) {
    log.append_marker(producer_id, 0, ControlRecordType::Abort, 0)
        .unwrap();
}

pub fn plain(log: &Log, clock: &ManualClock, key: i32) {
    let bytes = key.to_string();
    log.append(&[NewRecord::new(
        now(clock),
        Some(bytes.as_bytes()),
        Some(bytes.as_bytes()),
    )])
    .unwrap();
}

/// A pass with a key map of `max_map_keys`; returns where it cleaned up to (Kafka's dirty
/// offset after the pass).
pub fn clean(log: &Log, max_map_keys: usize) -> i64 {
    log.compact_with(CompactionOptions::with_max_map_keys(max_map_keys))
        .unwrap()
        .cleaned_up_to
}

pub fn clean_all(log: &Log) -> i64 {
    clean(log, 1_000_000)
}

/// Every batch of every segment, in order (Kafka's `log.logSegments.flatMap(_.log.batches)`).
pub fn batches(dir: &Path) -> Vec<Vec<u8>> {
    let mut logs: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "log"))
        .collect();
    logs.sort();
    let mut all = Vec::new();
    for path in logs {
        let bytes = std::fs::read(&path).unwrap();
        for (_, batch) in AnyBatchIter::new(&bytes) {
            all.push(batch.unwrap().as_bytes().to_vec());
        }
    }
    all
}

pub fn with_batches<T>(dir: &Path, mut visit: impl FnMut(&Batch<'_>) -> Option<T>) -> Vec<T> {
    batches(dir)
        .iter()
        .filter_map(|bytes| {
            let (_, batch) = AnyBatchIter::new(bytes).next().unwrap();
            visit(&batch.unwrap())
        })
        .collect()
}

pub fn batch_base_offsets(dir: &Path) -> Vec<i64> {
    with_batches(dir, |batch| {
        Some(batch.as_v2().unwrap().header().base_offset)
    })
}

pub fn last_offsets_per_batch(dir: &Path) -> Vec<i64> {
    with_batches(dir, |batch| Some(batch.last_offset()))
}

/// Kafka's `offsetsInLog`: the offset of every record with a key and a value, control records
/// included.
pub fn offsets_in_log(dir: &Path) -> Vec<i64> {
    records_in_log(dir, true)
        .into_iter()
        .map(|(offset, _)| offset)
        .collect()
}

/// Kafka's `LogTestUtils.keysInLog`: the keys of the data records with a value.
pub fn keys_in_log(dir: &Path) -> Vec<i32> {
    records_in_log(dir, false)
        .into_iter()
        .map(|(_, key)| key)
        .collect()
}

pub fn records_in_log(dir: &Path, with_control: bool) -> Vec<(i64, i32)> {
    let mut scratch = Vec::new();
    with_batches(dir, |batch| {
        let view = batch.as_v2().unwrap();
        let control = view.header().is_control();
        if control && !with_control {
            return None;
        }
        let mut found = Vec::new();
        for record in view.records(&mut scratch).unwrap() {
            let record = record.unwrap();
            if let (Some(key), Some(_)) = (record.key, record.value) {
                let key = if control {
                    -1
                } else {
                    std::str::from_utf8(key).unwrap().parse().unwrap()
                };
                found.push((record.offset, key));
            }
        }
        Some(found)
    })
    .into_iter()
    .flatten()
    .collect()
}

/// Kafka's `lastSequencesInLog`: each producer's last data batch's last sequence.
pub fn last_sequences_in_log(dir: &Path) -> Vec<(i64, i32)> {
    let mut last = std::collections::BTreeMap::new();
    with_batches(dir, |batch| {
        let header = *batch.as_v2().unwrap().header();
        (!header.is_control() && header.producer_id >= 0).then_some(header)
    })
    .into_iter()
    .for_each(|header| {
        last.insert(header.producer_id, header.last_sequence());
    });
    last.into_iter().collect()
}

/// Every `.txnindex` entry of the log, segment by segment (Kafka's
/// `collectAbortedTransactions(0, logEndOffset)` on a log whose transactions are all decided).
pub fn aborted_txns(dir: &Path) -> Vec<AbortedTxn> {
    let mut indexes: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "txnindex"))
        .collect();
    indexes.sort();
    let mut all = Vec::new();
    for path in indexes {
        let bytes = std::fs::read(&path).unwrap();
        for chunk in bytes.chunks_exact(AbortedTxn::SIZE) {
            all.push(AbortedTxn::from_bytes(chunk.try_into().unwrap()).unwrap());
        }
    }
    all
}

pub fn aborted(producer_id: i64, first_offset: i64, last_offset: i64, lso: i64) -> AbortedTxn {
    AbortedTxn {
        producer_id,
        first_offset,
        last_offset,
        last_stable_offset: lso,
    }
}

/// Kafka's `assertAllTransactionsComplete`.
pub fn assert_all_transactions_complete(log: &Log) {
    assert!(
        log.active_producers()
            .iter()
            .all(|p| p.current_txn_first_offset.is_none())
    );
    assert_eq!(log.first_unstable_offset(), None);
}

/// Kafka's `runTwoPassClean`: the first pass sets delete horizons, the second runs after them.
pub fn two_pass_clean(log: &Log, clock: &ManualClock) -> i64 {
    clean_all(log);
    clock.advance(DAY_MS + 1);
    clean_all(log)
}

pub fn reopen(dir: &Path, log: Log, clock: &Arc<ManualClock>) -> Log {
    log.close().unwrap();
    drop(log);
    Log::open(dir, config(clock, DAY_MS)).unwrap()
}

/// The records `read_committed` returns, as (offset, key, value).
pub fn committed(log: &Log) -> Vec<(i64, String, String)> {
    log.committed_records(log.log_start_offset(), ReadBound::LogEnd)
        .map(|record| {
            let record = record.unwrap();
            (
                record.offset,
                String::from_utf8(record.key.unwrap()).unwrap(),
                String::from_utf8(record.value.unwrap()).unwrap(),
            )
        })
        .collect()
}

/// What compaction may leave of `read_committed`'s records: for each key, its latest committed
/// record (aborted data supersedes nothing).
pub fn latest_committed_per_key(records: &[(i64, String, String)]) -> Vec<(i64, String, String)> {
    let mut latest = std::collections::BTreeMap::new();
    for record in records {
        latest.insert(record.1.clone(), record.clone());
    }
    let mut kept: Vec<_> = latest.into_values().collect();
    kept.sort();
    kept
}

/// The log of [`compaction_txn_multi_pass_segment_cleaning_with_aborted_transactions`], rolled.
pub fn multi_pass_log(dir: &Path, clock: &Arc<ManualClock>, delete_retention_ms: i64) -> Log {
    let log = Log::open(dir, config(clock, delete_retention_ms)).unwrap();
    let (mut p1, mut p2) = (Producer::transactional(1), Producer::transactional(2));
    p1.append(&log, clock, &[1, 2]); // [0, 1]
    p2.append(&log, clock, &[2, 3]); // [2, 3]
    p1.append(&log, clock, &[3, 4]); // [4, 5]
    commit(&log, 1); // 6
    commit(&log, 2); // 7
    p1.append(&log, clock, &[2, 3]); // [8, 9]
    abort(&log, 1); // 10
    p2.append(&log, clock, &[4, 5]); // [11, 12]
    p1.append(&log, clock, &[5, 6]); // [13, 14]
    commit(&log, 1); // 15
    abort(&log, 2); // 16
    p2.append(&log, clock, &[6, 7]); // [17, 18]
    commit(&log, 2); // 19
    log.roll().unwrap();
    log
}

/// Closes `log`, checks the directory with `verify_dir` (every `.txnindex` entry against the
/// ABORT markers of its `.log`, every snapshot), and reopens it.
pub fn verified_reopen(
    dir: &Path,
    log: Log,
    clock: &Arc<ManualClock>,
    delete_retention_ms: i64,
) -> Log {
    log.close().unwrap();
    drop(log);
    let config = config(clock, delete_retention_ms);
    let report = partlog::verify_dir(dir, &config).unwrap();
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    Log::open(dir, config).unwrap()
}
