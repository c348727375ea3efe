//! What the coordinator tests share: [`DirTxnLogs`], a [`TxnLogs`] over one directory of a
//! [`SimStorage`] (partition directories `<topic>-<p>`, as the engine names them), a manual
//! clock, and readers of what the coordinator wrote.
#![allow(
    dead_code,
    reason = "each test crate that includes this module uses a different part of it"
)]

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier, Mutex};

use partlog::unstable::{Clock, ManualClock, SimStorage, Storage};
use partlog::{BatchBuilder, Compression, Error, Log, LogConfig, NewRecord, ReadBound};
use partlog_engine::engine::producer_ids::ProducerIdManager;
use partlog_engine::engine::topic::partition_dir_name;
use partlog_engine::txn::log_records::TransactionLogValue;
use partlog_engine::txn::log_records::{
    TRANSACTION_STATE_TOPIC, TxnLogRecord, encode_key, encode_value, read_record,
};
use partlog_engine::txn::logs::transaction_state_log_config;
use partlog_engine::txn::{TransactionCoordinator, TransactionCoordinatorConfig, TxnLogs};

pub const T0: i64 = 1_700_000_000_000;
pub const ROOT: &str = "/engine";

/// The logs of one engine directory on a simulated disk, opened at first use.
#[derive(Debug)]
pub struct DirTxnLogs {
    pub dir: PathBuf,
    pub sim: SimStorage,
    pub clock: Arc<ManualClock>,
    logs: Mutex<HashMap<String, Arc<Log>>>,
    /// Topics whose partitions cannot be opened: their markers fail.
    pub unavailable: Mutex<BTreeSet<String>>,
    /// When armed, the next `transaction_state_log` call waits on the first barrier (the
    /// caller is inside), then on the second (the test lets it go on).
    pub pause_state_log: Mutex<Option<Arc<(Barrier, Barrier)>>>,
}

impl DirTxnLogs {
    pub fn new(sim: &SimStorage, clock: &Arc<ManualClock>) -> Arc<DirTxnLogs> {
        Arc::new(DirTxnLogs {
            dir: PathBuf::from(ROOT),
            sim: sim.clone(),
            clock: Arc::clone(clock),
            logs: Mutex::new(HashMap::new()),
            unavailable: Mutex::new(BTreeSet::new()),
            pause_state_log: Mutex::new(None),
        })
    }

    fn storage(&self) -> Arc<dyn Storage> {
        Arc::new(self.sim.clone())
    }

    fn open(&self, name: String, config: LogConfig) -> Result<Arc<Log>, Error> {
        let mut logs = self.logs.lock().unwrap();
        if let Some(log) = logs.get(&name) {
            return Ok(Arc::clone(log));
        }
        let log = Arc::new(Log::open(self.dir.join(&name), config)?);
        logs.insert(name, Arc::clone(&log));
        Ok(log)
    }

    pub fn data_config(&self) -> LogConfig {
        LogConfig::builder_for_tests()
            .storage(self.storage())
            .clock(Arc::clone(&self.clock) as Arc<dyn Clock>)
            .retention_check_interval_ms(-1)
            .transaction_partition_verification_enable(true)
            .build()
            .unwrap()
    }

    /// Drops every handle (after a crash, before a reopen).
    pub fn forget(&self) {
        self.logs.lock().unwrap().clear();
    }
}

impl TxnLogs for DirTxnLogs {
    fn transaction_state_log(&self, partition: i32) -> Result<Arc<Log>, Error> {
        let pause = self.pause_state_log.lock().unwrap().take();
        if let Some(pause) = pause {
            pause.0.wait();
            pause.1.wait();
        }
        let config = transaction_state_log_config(
            LogConfig::builder()
                .storage(self.storage())
                .clock(Arc::clone(&self.clock) as Arc<dyn Clock>)
                .retention_check_interval_ms(-1),
        )?;
        self.open(
            partition_dir_name(TRANSACTION_STATE_TOPIC, partition),
            config,
        )
    }

    fn transaction_state_partitions(&self) -> Result<Vec<i32>, Error> {
        if !self.sim.exists(&self.dir)? {
            return Ok(Vec::new());
        }
        let prefix = format!("{TRANSACTION_STATE_TOPIC}-");
        Ok(self
            .sim
            .list(&self.dir)?
            .iter()
            .filter_map(|name| name.strip_prefix(&prefix)?.parse().ok())
            .collect())
    }

    fn partition_log(&self, topic: &str, partition: i32) -> Result<Arc<Log>, Error> {
        if self.unavailable.lock().unwrap().contains(topic) {
            return Err(Error::InvalidArgument {
                why: format!("topic {topic} is unavailable in this test"),
            });
        }
        self.open(partition_dir_name(topic, partition), self.data_config())
    }
}

/// An engine's coordinator on a simulated disk.
pub struct Harness {
    pub sim: SimStorage,
    pub clock: Arc<ManualClock>,
    pub logs: Arc<DirTxnLogs>,
    pub coordinator: TransactionCoordinator,
}

impl Harness {
    pub fn new(seed: u64) -> Harness {
        Harness::with_config(seed, TransactionCoordinatorConfig::default())
    }

    pub fn with_config(seed: u64, config: TransactionCoordinatorConfig) -> Harness {
        let sim = SimStorage::new(seed);
        let clock = Arc::new(ManualClock::new(T0));
        Harness::open(sim, clock, config, |_| {})
    }

    /// Opens the coordinator over `sim`, after `before` ran on the logs (to seed records).
    pub fn open(
        sim: SimStorage,
        clock: Arc<ManualClock>,
        config: TransactionCoordinatorConfig,
        before: impl FnOnce(&Arc<DirTxnLogs>),
    ) -> Harness {
        let logs = DirTxnLogs::new(&sim, &clock);
        before(&logs);
        let coordinator = open_coordinator(&sim, &clock, &logs, config).unwrap();
        Harness {
            sim,
            clock,
            logs,
            coordinator,
        }
    }

    pub fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Every value written for `id` to its `__transaction_state` partition, in order (`None`
    /// for a tombstone).
    pub fn txn_records(&self, id: &str) -> Vec<Option<TransactionLogValue>> {
        txn_records(&self.logs, &self.coordinator, id)
    }

    pub fn txn_log_end(&self, id: &str) -> i64 {
        let partition = self.coordinator.partition_for(id).unwrap();
        self.logs
            .transaction_state_log(partition)
            .unwrap()
            .log_end_offset()
    }

    pub fn data_log(&self, topic: &str, partition: i32) -> Arc<Log> {
        self.logs.partition_log(topic, partition).unwrap()
    }
}

pub fn open_coordinator(
    sim: &SimStorage,
    clock: &Arc<ManualClock>,
    logs: &Arc<DirTxnLogs>,
    config: TransactionCoordinatorConfig,
) -> Result<TransactionCoordinator, Error> {
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    // The engine directory survives a crash, as the engine makes it.
    storage.create_dir_all(Path::new(ROOT))?;
    storage.sync_dir(Path::new("/"))?;
    let ids = Arc::new(ProducerIdManager::open(&storage, Path::new(ROOT))?);
    TransactionCoordinator::open(
        Arc::clone(logs) as Arc<dyn TxnLogs>,
        ids,
        Arc::clone(clock) as Arc<dyn Clock>,
        config,
    )
    .map(|(coordinator, _)| coordinator)
}

pub fn txn_records(
    logs: &Arc<DirTxnLogs>,
    coordinator: &TransactionCoordinator,
    id: &str,
) -> Vec<Option<TransactionLogValue>> {
    let partition = coordinator.partition_for(id).unwrap();
    let log = logs.transaction_state_log(partition).unwrap();
    log.records(0, ReadBound::LogEnd)
        .map(|r| r.unwrap())
        .filter_map(
            |r| match read_record(r.key.as_deref(), r.value.as_deref()).unwrap() {
                TxnLogRecord::Value {
                    transactional_id,
                    value,
                } if transactional_id == id => Some(Some(value)),
                TxnLogRecord::Tombstone { transactional_id } if transactional_id == id => {
                    Some(None)
                }
                _ => None,
            },
        )
        .collect()
}

/// Appends `value` for `id` to its partition, as an earlier coordinator would have (`version`
/// 1), durably.
pub fn seed(logs: &Arc<DirTxnLogs>, id: &str, value: &TransactionLogValue) {
    let partition = partlog_engine::txn::log_records::transaction_state_partition(id, 50).unwrap();
    let log = logs.transaction_state_log(partition).unwrap();
    let key = encode_key(id).unwrap();
    let value = encode_value(value, 1).unwrap();
    let appended = log
        .append(&[NewRecord::new(T0, Some(&key), Some(&value))])
        .unwrap();
    log.wait_durable(appended.last_offset).unwrap();
}

/// A transactional batch of `values` from producer `(pid, epoch)` at `sequence`, made durable.
pub fn write_txn(log: &Log, pid: i64, epoch: i16, sequence: i32, values: &[&str]) {
    try_write_txn(log, pid, epoch, sequence, values).unwrap();
}

/// [`write_txn`], returning the log's refusal.
pub fn try_write_txn(
    log: &Log,
    pid: i64,
    epoch: i16,
    sequence: i32,
    values: &[&str],
) -> Result<(), Error> {
    let mut builder = BatchBuilder::new(Compression::None)
        .producer(pid, epoch, sequence)
        .transactional(true);
    for value in values {
        builder.push(&NewRecord::new(T0, None, Some(value.as_bytes())));
    }
    let appended = log.append_batch(&builder.build()?)?;
    log.wait_durable(appended.last_offset)
}

/// The values a `read_committed` reader sees.
pub fn committed(log: &Log) -> Vec<String> {
    log.committed_records(0, ReadBound::LogEnd)
        .map(|r| String::from_utf8(r.unwrap().value.unwrap()).unwrap())
        .collect()
}
