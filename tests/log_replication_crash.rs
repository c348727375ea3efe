//! Crash tests of the leader-epoch cache's hooks on the simulator: random follower appends (the
//! leader's epochs only grow, and a new leader takes over after each truncation), elections of
//! this log followed by client appends, truncations, moves of the log start and full
//! truncations, with machine crashes between and inside them. After every reopen the cache, and its file, must be exactly what Kafka's rules
//! give for the batches that survived: the epochs replayed from them with `assign`, cut to
//! `[log start, LEO)`. Nothing durable may be lost.
//!
//! `PARTLOG_EPOCH_CRASH_SEEDS=N` runs N seeds (default 48); a failure prints its seed, and
//! `PARTLOG_EPOCH_CRASH_SEED=S` replays that one.
#![cfg(feature = "sim")]

use std::path::Path;
use std::sync::Arc;

#[path = "common/fenced.rs"]
mod fenced_storage;
#[path = "common/rng.rs"]
mod rng;
use fenced_storage::fenced_config;
use rng::Rng;

use partlog::unstable::leader_epoch::{LeaderEpochFileCache, read_checkpoint};
use partlog::unstable::sim::{CrashConfig, FaultOp, FaultRule};
use partlog::unstable::{ManualClock, SimStorage, Storage};
use partlog::{
    BatchBuilder, Compression, EpochEntry, FlushPolicy, Log, LogConfig, NewRecord, ReadBound,
};

const T0: i64 = 1_700_000_000_000;

fn leader_batch(base: i64, epoch: i32, n: i64) -> Vec<u8> {
    let mut builder = BatchBuilder::new(Compression::None)
        .base_offset(base)
        .partition_leader_epoch(epoch);
    for i in 0..n {
        let value = format!("{}/{epoch}", base + i);
        builder.push(&NewRecord::new(T0 + base + i, None, Some(value.as_bytes())));
    }
    builder.build().unwrap()
}

/// `(base offset, epoch)` of every batch a read from the log start returns.
fn surviving_batches(log: &Log) -> Vec<(i64, i32)> {
    let mut batches = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let fetch = log.read(offset, 1 << 16, ReadBound::LogEnd).unwrap();
        for batch in fetch.batches() {
            let header = *batch.unwrap().header().unwrap();
            batches.push((header.base_offset, header.partition_leader_epoch));
        }
        offset = fetch.next_offset();
    }
    batches
}

/// Kafka's rules over the surviving batches: `assign` for each, then the open's cut.
fn expected_cache(log: &Log) -> Vec<EpochEntry> {
    let mut cache = LeaderEpochFileCache::detached();
    for (base, epoch) in surviving_batches(log) {
        if epoch >= 0 {
            cache.assign(epoch, base).unwrap();
        }
    }
    cache.truncate_from_end(log.log_end_offset()).unwrap();
    cache.truncate_from_start(log.log_start_offset()).unwrap();
    cache.entries().to_vec()
}

struct Harness {
    seed: u64,
    rng: Rng,
    sim: SimStorage,
    config: LogConfig,
    log: Option<Log>,
    /// The epoch the current leader stamps; a new leader (a higher epoch) follows a truncation.
    epoch: i32,
    /// Every offset below this must survive a crash.
    durable: i64,
}

const DIR: &str = "/data/topic-0";

impl Harness {
    fn new(seed: u64) -> Harness {
        let mut rng = Rng::new(seed);
        let sim = SimStorage::new(seed);
        let storage: Arc<dyn Storage> = Arc::new(sim.clone());
        let flush_policy = if rng.chance(50) {
            FlushPolicy::EveryAppend
        } else {
            FlushPolicy::OsDecides
        };
        let config = LogConfig::builder_for_tests()
            .segment_bytes(1024)
            .flush_policy(flush_policy)
            .storage(storage)
            .clock(Arc::new(ManualClock::new(T0)))
            .build()
            .unwrap();
        // Each process runs on fenced storage: once the machine crashes, none of its threads
        // (nor its drop) changes the image the next process recovers.
        let log = Log::open(Path::new(DIR), fenced_config(config.clone(), &sim)).unwrap();
        Harness {
            seed,
            rng,
            sim,
            config,
            log: Some(log),
            epoch: 0,
            durable: 0,
        }
    }

    fn log(&self) -> &Log {
        self.log.as_ref().unwrap()
    }

    fn step(&mut self) {
        let crashes_before = self.sim.stats().crashes;
        // Read before a crash is armed: reads are storage operations too.
        let bases: Vec<i64> = surviving_batches(self.log())
            .iter()
            .map(|&(base, _)| base)
            .collect();
        if self.rng.chance(8) {
            let nth = 1 + self.rng.below(10);
            let config = CrashConfig::random().seed(self.rng.next());
            self.sim
                .inject(FaultRule::crash(FaultOp::Any, nth).crash_config(config));
        }
        self.durable = self.durable.max(self.log().durable_offset());
        let end = self.log().log_end_offset();
        let start = self.log().log_start_offset();
        let choice = self.rng.below(100);
        let outcome = match choice {
            0..=11 => {
                // Elected: the log leads the next epoch and appends as a leader.
                self.epoch += 1;
                let records: Vec<NewRecord> = (0..1 + self.rng.below(3) as i64)
                    .map(|i| NewRecord::new(T0 + end + i, None, Some(b"led")))
                    .collect();
                self.log()
                    .become_leader(self.epoch)
                    .and_then(|()| self.log().append(&records).map(|_| ()))
            }
            12..=59 => {
                if self.rng.chance(10) {
                    self.epoch += 1;
                }
                let mut bytes = Vec::new();
                let mut base = end;
                for _ in 0..1 + self.rng.below(3) {
                    let n = 1 + self.rng.below(4) as i64;
                    bytes.extend(leader_batch(base, self.epoch, n));
                    base += n;
                }
                self.log().append_as_follower(&bytes).map(|_| ())
            }
            60..=69 if end > start => self.log().wait_durable(end - 1),
            70..=81 => {
                let to = start + self.rng.below((end - start + 1) as u64) as i64;
                // The batch that straddles `to` goes whole: the log may end at its base.
                let new_end = bases
                    .iter()
                    .copied()
                    .filter(|&base| base <= to)
                    .max()
                    .unwrap_or(to)
                    .min(to);
                self.durable = self.durable.min(new_end);
                let truncated = self.log().truncate_to(to).map(|_| ());
                // The next leader's epoch is above every epoch the log has seen.
                self.epoch += 1;
                truncated
            }
            82..=89 => {
                let to = start + self.rng.below((end - start + 1) as u64) as i64;
                self.log().delete_records_before(to)
            }
            90..=92 => {
                let to = end + self.rng.below(20) as i64;
                let restarted = self.log().truncate_fully_and_start_at(to);
                if restarted.is_ok() {
                    self.durable = to;
                }
                self.epoch += 1;
                restarted
            }
            _ => {
                self.sim
                    .crash_with(&CrashConfig::random().seed(self.rng.next()));
                Ok(())
            }
        };
        self.sim.clear_faults();
        let crashed = self.sim.stats().crashes > crashes_before;
        if crashed && std::env::var_os("PARTLOG_EPOCH_CRASH_TRACE").is_some() {
            eprintln!("choice {choice} start {start} end {end} -> {outcome:?}; crashed");
        } else if std::env::var_os("PARTLOG_EPOCH_CRASH_TRACE").is_some() {
            eprintln!(
                "choice {choice} start {start} end {end} -> {outcome:?}; now {}..{} cache {:?} batches {:?}",
                self.log().log_start_offset(),
                self.log().log_end_offset(),
                self.log().leader_epoch_entries(),
                surviving_batches(self.log())
                    .iter()
                    .rev()
                    .take(3)
                    .collect::<Vec<_>>()
            );
        }
        if crashed {
            self.reopen();
        } else {
            self.check("no crash");
        }
    }

    fn reopen(&mut self) {
        drop(self.log.take());
        let log = Log::open(
            Path::new(DIR),
            fenced_config(self.config.clone(), &self.sim),
        )
        .unwrap_or_else(|e| panic!("seed {}: reopen failed: {e}", self.seed));
        self.log = Some(log);
        let end = self.log().log_end_offset();
        assert!(
            end >= self.durable || self.log().log_start_offset() >= self.durable,
            "seed {}: lost durable records: end {end} < {}",
            self.seed,
            self.durable
        );
        // A truncation may have lowered the log since; only what is still there counts.
        self.durable = self.log().durable_offset();
        self.check("after a crash");
    }

    fn check(&self, when: &str) {
        let log = self.log();
        let expected = expected_cache(log);
        let end = log.log_end_offset();
        // An entry at the log end is an epoch that has not written yet (here: the last one's
        // start moved up to a log start at the end); the next open drops it, as Kafka's does.
        let cache: Vec<EpochEntry> = log
            .leader_epoch_entries()
            .into_iter()
            .filter(|entry| entry.start_offset < end)
            .collect();
        assert_eq!(
            cache, expected,
            "seed {}: {when}: the cache differs from the surviving batches' epochs",
            self.seed
        );
        if let Some(on_disk) = read_checkpoint(&self.sim, Path::new(DIR)).unwrap() {
            // The file may still hold an entry at or after the log end (a crash after an
            // assign, before its batch): the next open drops it.
            let kept: Vec<EpochEntry> = on_disk
                .into_iter()
                .filter(|entry| entry.start_offset < end)
                .collect();
            assert_eq!(kept, expected, "seed {}: {when}: the file", self.seed);
        }
    }
}

#[test]
fn leader_epoch_cache_matches_the_surviving_batches_after_every_crash() {
    let seeds: Vec<u64> = match std::env::var("PARTLOG_EPOCH_CRASH_SEED") {
        Ok(seed) => vec![seed.parse().unwrap()],
        Err(_) => {
            let count = std::env::var("PARTLOG_EPOCH_CRASH_SEEDS")
                .ok()
                .and_then(|n| n.parse().ok())
                .unwrap_or(48);
            (0..count).collect()
        }
    };
    for seed in seeds {
        let mut harness = Harness::new(seed);
        for _ in 0..120 {
            harness.step();
        }
    }
}
