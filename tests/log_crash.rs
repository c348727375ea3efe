//! Crash tests on the simulator: random sequences of appends, flushes, rolls, truncations,
//! start-offset moves, durable reads and reopens, with simulated machine crashes between and
//! inside operations. After every crash the log must reopen under `RecoveryMode::Fail` and:
//! - hold every record it had reported durable;
//! - hold no torn or corrupt batch (every read is CRC-checked);
//! - hold nothing a `Durable` reader saw beyond its new end;
//! - never bring back a record removed by a completed `truncate_to`;
//! - keep a log start offset that a returned `delete_records_before` set;
//! - hold the producer state of the batches that survived (ARCHITECTURE.md §9): idempotent and
//!   transactional batches of four producers and COMMIT/ABORT markers are in the mix, the
//!   first unstable and last stable offsets, the aborted transactions of each `read_committed`
//!   read and the committed records equal a replay of the surviving batches, a re-send of each
//!   producer's newest batch is a duplicate with its original offsets, and the next batch of
//!   each producer is accepted at the sequence after its newest surviving one.
//!
//! Every record's value names its offset and the "epoch" it was written in (the epoch moves at
//! every truncation), so a resurrected record cannot pass for a new one at the same offset.
//!
//! `PARTLOG_CRASH_SEEDS=N` runs N seeds (default 128; seeds 66, 70, 75, 98 and 103 once found
//! bugs, before producer operations joined the mix and changed every seed's sequence); a
//! failure prints its seed, and
//! `PARTLOG_CRASH_SEED=S` replays that one.
#![cfg(feature = "sim")] // the simulator and the manual clock: `cargo test --all-features`

use std::collections::BTreeMap;

#[path = "common/fenced.rs"]
mod fenced_storage;
#[path = "common/rng.rs"]
mod rng;
use std::num::NonZeroU64;
use std::path::Path;
use std::sync::Arc;

use partlog::unstable::sim::{CrashConfig, FaultOp, FaultRule};
use partlog::unstable::{ManualClock, SimStorage, Storage};
use partlog::{
    BatchBuilder, Compression, CompressionType, ControlRecordType, Error, FlushPolicy, Isolation,
    Log, LogConfig, NewRecord, ReadBound, ReadOptions, RecoveryMode,
};
use rng::Rng;

const T0: i64 = 1_700_000_000_000;

fn value(offset: i64, epoch: u32) -> Vec<u8> {
    format!("{offset}/{epoch}/{}", "v".repeat((offset % 23) as usize)).into_bytes()
}

/// What the test knows the log must hold.
#[derive(Debug, Default)]
struct Model {
    /// The epoch each acknowledged offset was written in; index = offset.
    epoch_of: Vec<u32>,
    /// Offsets of appends that failed in a crash: they may or may not have survived.
    pending: BTreeMap<i64, u32>,
    /// The first offset of every acknowledged (or pending) batch: a truncation removes the
    /// batch that straddles its target whole.
    batch_starts: std::collections::BTreeSet<i64>,
    /// Every offset below this must survive a crash (the log said so).
    durable: i64,
    /// The log start offset may not go below this.
    start: i64,
    epoch: u32,
    /// The highest offset a `Durable` read returned.
    max_durable_read: i64,
    /// The batches with a producer id and the markers, acknowledged or pending, by base offset.
    producer_batches: BTreeMap<i64, ProducerBatch>,
}

/// What a batch with a producer id is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Idempotent,
    Transactional,
    Commit,
    Abort,
}

/// A batch with a producer id, or a marker, as the model knows it.
#[derive(Debug, Clone, Copy)]
struct ProducerBatch {
    kind: Kind,
    producer_id: i64,
    /// -1 for a marker.
    base_sequence: i32,
    last_offset: i64,
}

impl ProducerBatch {
    fn is_data(&self) -> bool {
        matches!(self.kind, Kind::Idempotent | Kind::Transactional)
    }
}

/// The transactions of the model's batches.
#[derive(Debug, Default)]
struct Transactions {
    /// Producer id → the first offset of its open transaction.
    open: BTreeMap<i64, i64>,
    /// (producer id, first offset, marker offset) of each aborted transaction, in marker order.
    aborted: Vec<(i64, i64, i64)>,
    /// (first offset, marker offset) of each ended transaction.
    ended: Vec<(i64, i64)>,
}

/// The idempotent producers, then the transactional ones.
const PRODUCERS: [i64; 4] = [1000, 1001, 2000, 2001];

impl Model {
    fn end(&self) -> i64 {
        self.epoch_of.len() as i64
    }

    fn is_marker(&self, offset: i64) -> bool {
        self.producer_batches
            .get(&offset)
            .is_some_and(|b| matches!(b.kind, Kind::Commit | Kind::Abort))
    }

    /// The newest data batch of `producer_id`.
    fn newest_data_batch(&self, producer_id: i64) -> Option<(i64, ProducerBatch)> {
        self.producer_batches
            .iter()
            .rev()
            .find(|(_, b)| b.is_data() && b.producer_id == producer_id)
            .map(|(base, b)| (*base, *b))
    }

    /// The sequence after `producer_id`'s newest batch.
    fn next_sequence(&self, producer_id: i64) -> i32 {
        self.newest_data_batch(producer_id).map_or(0, |(base, b)| {
            b.base_sequence + i32::try_from(b.last_offset - base).unwrap() + 1
        })
    }

    /// The transactions of the batches, replayed in offset order. A marker without an open
    /// transaction ends nothing.
    fn transactions(&self) -> Transactions {
        let mut txns = Transactions::default();
        for (base, b) in &self.producer_batches {
            match b.kind {
                Kind::Transactional => {
                    txns.open.entry(b.producer_id).or_insert(*base);
                }
                Kind::Commit | Kind::Abort => {
                    if let Some(first) = txns.open.remove(&b.producer_id) {
                        txns.ended.push((first, *base));
                        if b.kind == Kind::Abort {
                            txns.aborted.push((b.producer_id, first, *base));
                        }
                    }
                }
                Kind::Idempotent => {}
            }
        }
        txns
    }

    /// `offset`, or lower, so that no transaction begins below it and ends (or is still open)
    /// at or above it: a log start inside a transaction leaves its beginning to whatever state
    /// the log last loaded (a snapshot knows it, a replay of what is left does not), which this
    /// model does not follow.
    fn below_transactions(&self, offset: i64) -> i64 {
        let Transactions { open, ended, .. } = self.transactions();
        let spans: Vec<(i64, Option<i64>)> = ended
            .into_iter()
            .map(|(first, marker)| (first, Some(marker)))
            .chain(open.values().map(|first| (*first, None)))
            .collect();
        let mut to = offset;
        while let Some(first) = spans
            .iter()
            .filter(|(first, marker)| *first < to && marker.is_none_or(|m| m >= to))
            .map(|(first, _)| *first)
            .min()
        {
            to = first;
        }
        to
    }
}

struct Harness {
    sim: SimStorage,
    dir: &'static Path,
    config: LogConfig,
    log: Option<Log>,
    model: Model,
    rng: Rng,
    seed: u64,
}

impl Harness {
    fn new(seed: u64) -> Self {
        let sim = SimStorage::new(seed);
        let mut rng = Rng::new(seed);
        let flush_policy = match rng.below(3) {
            0 => FlushPolicy::OsDecides,
            1 => FlushPolicy::EveryAppend,
            _ => FlushPolicy::EveryMessages(NonZeroU64::new(1 + rng.below(8)).unwrap()),
        };
        let compression_type = match rng.below(3) {
            0 => CompressionType::Producer,
            1 => CompressionType::Lz4,
            _ => CompressionType::Zstd,
        };
        let storage: Arc<dyn Storage> = Arc::new(sim.clone());
        let config = LogConfig::builder_for_tests()
            .segment_bytes(1024 + 512 * rng.below(3) as u32)
            .index_interval_bytes(64 + 64 * rng.below(4) as u32)
            .segment_index_bytes(24 + 8 * rng.below(10) as u32)
            .flush_policy(flush_policy)
            .compression_type(compression_type)
            .preallocate(rng.chance(30))
            .recovery_mode(RecoveryMode::Fail)
            .recovery_point_ms(1)
            .storage(storage)
            .clock(Arc::new(ManualClock::new(T0)))
            .build()
            .unwrap();
        let mut harness = Harness {
            sim,
            dir: Path::new("/data/topic-0"),
            config,
            log: None,
            model: Model {
                max_durable_read: -1,
                ..Model::default()
            },
            rng,
            seed,
        };
        harness.log = Some(Log::open(harness.dir, harness.process_config()).unwrap());
        harness
    }

    /// The config of a new process: on fenced storage, so that once the machine crashes none of
    /// its threads (nor its drop) changes the image the next process recovers.
    fn process_config(&self) -> LogConfig {
        fenced_storage::fenced_config(self.config.clone(), &self.sim)
    }

    fn log(&self) -> &Log {
        self.log.as_ref().expect("the log is open")
    }

    fn crashed_since(&self, crashes_before: u64) -> bool {
        self.sim.stats().crashes > crashes_before
    }

    /// Runs one random operation. Returns whether a crash happened inside it.
    fn step(&mut self) {
        let crashes_before = self.sim.stats().crashes;
        if self.rng.chance(6) {
            // Crash just before one of the next few storage operations, wherever it falls.
            let nth = 1 + self.rng.below(12);
            let config = CrashConfig::random().seed(self.rng.next());
            self.sim
                .inject(FaultRule::crash(FaultOp::Any, nth).crash_config(config));
        }
        let end = self.log().log_end_offset();
        let start = self.log().log_start_offset();
        // Whatever the log says is durable now must survive any crash from here on.
        self.model.durable = self.model.durable.max(self.log().durable_offset());
        let choice = self.rng.below(100);
        let outcome: Result<(), Error> = match choice {
            0..=37 => self.append(end),
            38..=44 => self.producer_operation(end),
            45..=54 => self.append_batch(end),
            55..=64 => {
                if end > start {
                    self.log().wait_durable(end - 1)
                } else {
                    Ok(())
                }
            }
            65..=71 => {
                let to = start + self.rng.below((end - start + 1) as u64) as i64;
                self.truncate(to)
            }
            72..=77 => {
                let to = start + self.rng.below((end - start + 1) as u64) as i64;
                let to = self.model.below_transactions(to).max(start);
                let result = self.log().delete_records_before(to);
                if result.is_ok() {
                    self.model.start = self.model.start.max(to);
                }
                result
            }
            78..=87 => self.durable_read(),
            88..=93 => self.clean_reopen(),
            _ => {
                let config = CrashConfig::random().seed(self.rng.next());
                self.sim.crash_with(&config);
                Err(Error::Closed)
            }
        };
        // Disarm before looking: the flusher thread may trip an armed crash at any moment.
        self.sim.clear_faults();
        let crashed = self.crashed_since(crashes_before);
        if std::env::var_os("PARTLOG_CRASH_TRACE").is_some() {
            eprintln!(
                "op {choice} end {end} start {start} -> {:?}; crashed {}; log end {:?} durable {:?}; model durable {} max read {}",
                outcome.as_ref().err(),
                crashed,
                self.log.as_ref().map(|l| l.log_end_offset()),
                self.log.as_ref().map(|l| l.durable_offset()),
                self.model.durable,
                self.model.max_durable_read
            );
        }
        if crashed {
            self.recover_after_crash();
            return;
        }
        if let Err(error) = outcome {
            panic!(
                "seed {}: operation {choice} failed without a crash: {error}",
                self.seed
            );
        }
        self.model.durable = self.model.durable.max(self.log().durable_offset());
    }

    fn records(&mut self, first: i64) -> Vec<NewRecord> {
        let n = 1 + self.rng.below(9) as i64;
        (first..first + n)
            .map(|o| {
                let key = (o % 5 != 0).then(|| format!("k{}", o % 13).into_bytes());
                let mut record =
                    NewRecord::new(T0 + o, key.as_deref(), Some(&value(o, self.model.epoch)));
                if o % 4 == 0 {
                    record = record.with_header("h", Some(b"x"));
                }
                record
            })
            .collect()
    }

    fn note_append(&mut self, first: i64, count: usize, result: &Result<(), Error>) {
        let epoch = self.model.epoch;
        match result {
            Ok(()) => {
                assert_eq!(
                    first,
                    self.model.end(),
                    "seed {}: offsets are assigned in order",
                    self.seed
                );
                self.model
                    .epoch_of
                    .extend(std::iter::repeat_n(epoch, count));
                self.model.batch_starts.insert(first);
            }
            Err(_) => {
                for offset in first..first + count as i64 {
                    self.model.pending.insert(offset, epoch);
                }
                self.model.batch_starts.insert(first);
            }
        }
    }

    fn append(&mut self, end: i64) -> Result<(), Error> {
        let records = self.records(end);
        let result = self.log().append(&records).map(|info| {
            assert_eq!(info.first_offset, end);
        });
        self.note_append(end, records.len(), &result);
        result
    }

    fn append_batch(&mut self, end: i64) -> Result<(), Error> {
        let records = self.records(end);
        let codec =
            [Compression::None, Compression::Lz4, Compression::Zstd][self.rng.below(3) as usize];
        let mut builder = BatchBuilder::new(codec);
        for record in &records {
            builder.push(record);
        }
        let batch = builder.build().unwrap();
        let result = self.log().append_batch(&batch).map(|_| ());
        self.note_append(end, records.len(), &result);
        result
    }

    /// An idempotent or transactional batch, a marker, or a re-send of a producer's newest
    /// batch, which must be a duplicate with its original offsets.
    fn producer_operation(&mut self, end: i64) -> Result<(), Error> {
        let producer_id = PRODUCERS[self.rng.below(4) as usize];
        let transactional = producer_id >= 2000;
        match self.rng.below(4) {
            0 if transactional => {
                let (marker, kind) = if self.rng.chance(50) {
                    (ControlRecordType::Commit, Kind::Commit)
                } else {
                    (ControlRecordType::Abort, Kind::Abort)
                };
                let result = self
                    .log()
                    .append_marker(producer_id, 0, marker, 0)
                    .map(|info| assert_eq!(info.first_offset, end, "seed {}", self.seed));
                self.note_producer_batch(end, kind, producer_id, -1, 1, &result);
                result
            }
            0 => self.resend_newest(producer_id),
            _ => {
                let records = self.records(end);
                let base_sequence = self.model.next_sequence(producer_id);
                let mut builder = BatchBuilder::new(Compression::None)
                    .producer(producer_id, 0, base_sequence)
                    .transactional(transactional);
                for record in &records {
                    builder.push(record);
                }
                let result = self
                    .log()
                    .append_batch(&builder.build().unwrap())
                    .map(|info| {
                        assert!(!info.duplicate, "seed {}: {info:?}", self.seed);
                        assert_eq!(info.first_offset, end, "seed {}", self.seed);
                    });
                let kind = if transactional {
                    Kind::Transactional
                } else {
                    Kind::Idempotent
                };
                self.note_producer_batch(
                    end,
                    kind,
                    producer_id,
                    base_sequence,
                    records.len(),
                    &result,
                );
                result
            }
        }
    }

    fn note_producer_batch(
        &mut self,
        first: i64,
        kind: Kind,
        producer_id: i64,
        base_sequence: i32,
        count: usize,
        result: &Result<(), Error>,
    ) {
        self.note_append(first, count, result);
        let batch = ProducerBatch {
            kind,
            producer_id,
            base_sequence,
            last_offset: first + count as i64 - 1,
        };
        self.model.producer_batches.insert(first, batch);
    }

    /// Sends `producer_id`'s newest batch again, if the log must still know it (some of the
    /// producer's data lies at or above the log start): a duplicate, nothing written.
    fn resend_newest(&self, producer_id: i64) -> Result<(), Error> {
        let Some((base, batch)) = self.model.newest_data_batch(producer_id) else {
            return Ok(());
        };
        if batch.last_offset < self.log().log_start_offset() {
            return Ok(());
        }
        let mut builder = BatchBuilder::new(Compression::None)
            .producer(producer_id, 0, batch.base_sequence)
            .transactional(batch.kind == Kind::Transactional);
        for offset in base..=batch.last_offset {
            let epoch = self.model.epoch_of[usize::try_from(offset).unwrap()];
            builder.push(&NewRecord::new(
                T0 + offset,
                None,
                Some(&value(offset, epoch)),
            ));
        }
        let info = self.log().append_batch(&builder.build().unwrap())?;
        assert!(
            info.duplicate && (info.first_offset, info.last_offset) == (base, batch.last_offset),
            "seed {}: re-send of producer {producer_id}'s batch {base}..={} answered {info:?}",
            self.seed,
            batch.last_offset
        );
        Ok(())
    }

    /// The producer-state checks of the module docs, on the log as it is now.
    fn check_transactions(&self) {
        let log = self.log();
        let seed = self.seed;
        let (start, end) = (log.log_start_offset(), log.log_end_offset());
        let Transactions { open, aborted, .. } = self.model.transactions();
        let first_unstable = open.values().min().copied();
        let lso = first_unstable.unwrap_or(i64::MAX).min(end).max(start);
        assert_eq!(log.first_unstable_offset(), first_unstable, "seed {seed}");
        assert_eq!(log.last_stable_offset(), lso, "seed {seed}");
        let options = ReadOptions::default().isolation(Isolation::ReadCommitted);
        let mut at = start;
        while at < lso {
            let fetch = log.read_with(at, 1 << 20, options).unwrap();
            if fetch.is_empty() {
                break;
            }
            let upper = fetch.next_offset();
            let listed: Vec<(i64, i64, i64)> = fetch
                .aborted_transactions()
                .iter()
                .map(|t| (t.producer_id, t.first_offset, t.last_offset))
                .collect();
            let expected: Vec<(i64, i64, i64)> = aborted
                .iter()
                .filter(|(_, first, marker)| *marker >= at && *first < upper)
                .copied()
                .collect();
            assert_eq!(
                listed, expected,
                "seed {seed}: read_committed {at}..{upper}"
            );
            at = upper;
        }
        let aborted_data = |offset: i64| {
            self.model
                .producer_batches
                .range(..=offset)
                .next_back()
                .is_some_and(|(_, b)| {
                    b.kind == Kind::Transactional
                        && b.last_offset >= offset
                        && aborted.iter().any(|(pid, first, marker)| {
                            *pid == b.producer_id && (*first..*marker).contains(&offset)
                        })
                })
        };
        let expected: Vec<i64> = (start..lso)
            .filter(|o| !self.model.is_marker(*o) && !aborted_data(*o))
            .collect();
        let committed: Vec<i64> = log
            .committed_records(start, ReadBound::LogEnd)
            .map(|r| r.unwrap().offset)
            .collect();
        assert_eq!(committed, expected, "seed {seed}: committed records");
        for producer_id in PRODUCERS {
            self.resend_newest(producer_id)
                .unwrap_or_else(|e| panic!("seed {seed}: re-send: {e}"));
        }
    }

    fn truncate(&mut self, to: i64) -> Result<(), Error> {
        let result = self.log().truncate_to(to);
        self.model.epoch += 1;
        match result {
            Ok(new_end) => {
                assert!(new_end <= to, "seed {}", self.seed);
                self.model.epoch_of.truncate(new_end as usize);
                self.model.batch_starts.retain(|&b| b < new_end);
                self.model.producer_batches.split_off(&new_end);
                self.model.durable = self.model.durable.min(new_end);
                // The start follows a truncation below it (ARCHITECTURE.md §3, invariant 15).
                self.model.start = self.model.start.min(new_end);
                self.model.max_durable_read = self.model.max_durable_read.min(new_end - 1);
                Ok(())
            }
            Err(error) => {
                // Interrupted: records from the batch holding `to` on may be gone, durable or not.
                let cut = if to < self.model.end() {
                    self.model
                        .batch_starts
                        .range(..=to)
                        .next_back()
                        .copied()
                        .unwrap_or(to)
                } else {
                    to
                };
                self.model.durable = self.model.durable.min(cut);
                self.model.start = self.model.start.min(cut);
                self.model.max_durable_read = self.model.max_durable_read.min(cut - 1);
                Err(error)
            }
        }
    }

    fn durable_read(&mut self) -> Result<(), Error> {
        let start = self.log().log_start_offset();
        let mut last = None;
        for record in self.log().records(start, ReadBound::Durable) {
            let record = record?;
            self.check_record(record.offset, record.value.as_deref());
            last = Some(record.offset);
        }
        if let Some(last) = last {
            assert!(last < self.log().durable_offset(), "seed {}", self.seed);
            self.model.max_durable_read = self.model.max_durable_read.max(last);
        }
        Ok(())
    }

    fn check_record(&self, offset: i64, value_bytes: Option<&[u8]>) {
        let epoch = usize::try_from(offset)
            .ok()
            .and_then(|o| self.model.epoch_of.get(o).copied())
            .or_else(|| self.model.pending.get(&offset).copied())
            .unwrap_or_else(|| panic!("seed {}: offset {offset} was never appended", self.seed));
        assert_eq!(
            value_bytes,
            Some(value(offset, epoch).as_slice()),
            "seed {}: wrong record at offset {offset} (expected epoch {epoch})",
            self.seed
        );
    }

    /// Reads the whole log and checks it against the model: contiguous offsets from the start,
    /// each record the one the model expects.
    fn verify_contents(&self) -> i64 {
        let log = self.log();
        let start = log.log_start_offset();
        let mut expected = start;
        for record in log.records(start, ReadBound::LogEnd) {
            let record = record.unwrap_or_else(|e| panic!("seed {}: read failed: {e}", self.seed));
            // A marker holds an offset but no data record.
            while expected < record.offset && self.model.is_marker(expected) {
                expected += 1;
            }
            assert_eq!(record.offset, expected, "seed {}: gap or repeat", self.seed);
            self.check_record(record.offset, record.value.as_deref());
            expected += 1;
        }
        while expected < log.log_end_offset() && self.model.is_marker(expected) {
            expected += 1;
        }
        if expected != log.log_end_offset() {
            let fetch = log.read(expected, 1 << 20, ReadBound::LogEnd);
            let files: Vec<_> = self
                .sim
                .snapshot()
                .files
                .iter()
                .map(|(p, b)| (p.clone(), b.len()))
                .collect();
            panic!(
                "seed {}: records end at {expected}, log end is {}; read there: {:?}; stats {:?}; report {:?}; files {files:?}",
                self.seed,
                log.log_end_offset(),
                fetch.map(|f| (f.bytes().len(), f.next_offset())),
                log.stats(),
                log.recovery_report()
            );
        }
        expected
    }

    fn recover_after_crash(&mut self) {
        // The old log's handles are dead; dropping it must not panic.
        drop(self.log.take());
        let log = Log::open(self.dir, self.process_config()).unwrap_or_else(|e| {
            panic!(
                "seed {}: reopen after a crash failed under RecoveryMode::Fail: {e}",
                self.seed
            )
        });
        self.log = Some(log);
        let end = self.log().log_end_offset();
        let start = self.log().log_start_offset();
        assert!(
            end >= self.model.durable,
            "seed {}: lost durable records: end {end} < durable {}",
            self.seed,
            self.model.durable
        );
        assert!(
            end > self.model.max_durable_read,
            "seed {}: a Durable reader saw offset {} that the crash removed (end {end})",
            self.seed,
            self.model.max_durable_read
        );
        assert!(
            start >= self.model.start,
            "seed {}: log start went back",
            self.seed
        );
        self.verify_contents();
        // What survived is now the truth.
        let pending = std::mem::take(&mut self.model.pending);
        self.model.epoch_of.truncate(end as usize);
        self.model.batch_starts.retain(|&b| b < end);
        // A batch the end cuts is gone whole: a log that lost its data comes back empty at
        // its start, which a `delete_records_before` may have put inside a batch.
        self.model
            .producer_batches
            .retain(|_, batch| batch.last_offset < end);
        while self.model.end() < end {
            let offset = self.model.end();
            let epoch = pending[&offset];
            self.model.epoch_of.push(epoch);
        }
        self.model.start = start;
        self.model.durable = self.log().durable_offset();
        assert_eq!(
            self.model.durable, end,
            "seed {}: recovery syncs what it keeps",
            self.seed
        );
        self.model.max_durable_read = self.model.max_durable_read.min(end - 1);
        self.check_transactions();
    }

    /// Closes and reopens; a crash inside either is handled by the caller.
    fn clean_reopen(&mut self) -> Result<(), Error> {
        let log = self.log.take().expect("the log is open");
        let closed = log.close();
        drop(log);
        closed?;
        let log = Log::open(self.dir, self.process_config())?;
        assert!(log.recovery_report().clean_shutdown, "seed {}", self.seed);
        assert_eq!(log.log_end_offset(), self.model.end(), "seed {}", self.seed);
        self.log = Some(log);
        self.verify_contents();
        self.check_transactions();
        Ok(())
    }
}

fn run_seed(seed: u64, steps: usize) {
    let mut harness = Harness::new(seed);
    for _ in 0..steps {
        harness.step();
    }
    // A final crash that loses everything unsynced: the strictest image.
    harness.sim.crash_with(&CrashConfig::lose_unsynced());
    harness.recover_after_crash();
}

#[test]
fn random_operations_with_crashes_keep_every_guarantee() {
    if let Ok(seed) = std::env::var("PARTLOG_CRASH_SEED") {
        run_seed(seed.parse().unwrap(), 120);
        return;
    }
    let seeds: u64 = std::env::var("PARTLOG_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(128);
    for seed in 0..seeds {
        run_seed(seed, 120);
    }
}

#[test]
fn a_read_only_open_of_a_crashed_log_reads_the_valid_prefix_and_writes_nothing() {
    for seed in 0..20 {
        let sim = SimStorage::new(seed);
        let storage: Arc<dyn Storage> = Arc::new(sim.clone());
        let config = LogConfig::builder_for_tests()
            .segment_bytes(1024)
            .index_interval_bytes(64)
            .storage(storage)
            .clock(Arc::new(ManualClock::new(T0)))
            .build()
            .unwrap();
        let dir = Path::new("/ro/p-0");
        // On fenced storage: the drop after the crash below changes nothing in the image.
        let log = Log::open(dir, fenced_storage::fenced_config(config.clone(), &sim)).unwrap();
        for i in 0..40 {
            log.append(&[NewRecord::new(T0 + i, Some(b"k"), Some(&value(i, 0)))])
                .unwrap();
        }
        let durable = log.durable_offset();
        sim.crash_with(&CrashConfig::random().seed(seed));
        drop(log);

        let events_before = sim.event_count();
        let reader = Log::open_read_only(dir, config.clone()).unwrap();
        assert!(!reader.recovery_report().clean_shutdown);
        let end = reader.log_end_offset();
        assert!(end >= durable, "seed {seed}: {end} < {durable}");
        let records: Vec<_> = reader
            .records(0, ReadBound::LogEnd)
            .collect::<partlog::Result<Vec<_>>>()
            .unwrap();
        assert_eq!(records.len() as i64, end, "seed {seed}");
        for r in &records {
            assert_eq!(r.value.as_deref(), Some(value(r.offset, 0).as_slice()));
        }
        drop(reader);
        // The simulator logs every mutation and sync (reads are not events): there must be none.
        let changes = sim.events_since(events_before);
        assert!(
            changes.is_empty(),
            "seed {seed}: the read-only open changed the file system: {changes:?}"
        );
        // A writable open afterwards recovers the same records.
        let log = Log::open(dir, config).unwrap();
        assert_eq!(log.log_end_offset(), end, "seed {seed}");
    }
}
