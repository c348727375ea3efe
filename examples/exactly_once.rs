//! cargo run --release --example exactly_once -- [RECORDS [SEED]]
//!
//! Kafka's exactly-once loop on a partlog-engine `Engine`, in process: an app consumes topic
//! `in` (2 partitions) with `read_committed` in group `eos`, transforms each record, produces
//! the result to `out` in a transaction of a transactional `TopicProducer`, and commits its
//! input offsets in the same transaction (`send_offsets_to_transaction`): the output and the
//! input's progress commit together or not at all.
//!
//! The app runs on partlog's crash simulator (`SimStorage`) on a manual clock, and is killed
//! three times by a machine crash at a random storage operation; each restart reopens the
//! engine, the group layer, the consumer and the producer (whose `init_transactions` aborts
//! the transaction the crash left open) and goes on from the committed offsets. At the end a
//! `read_committed` reader of `out` must find every input exactly once. RECORDS defaults to
//! 300 (CI runs 100). Exits non-zero if a check fails.

use std::collections::BTreeMap;
use std::error::Error as StdError;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use partlog::unstable::sim::{FaultOp, FaultRule};
use partlog::unstable::{Clock, ManualClock, SimStorage, SplitMix64, Storage};
use partlog::{NewRecord, ReadBound};
use partlog_engine::engine::{Engine, EngineConfig, TopicConfig};
use partlog_engine::producer::TopicProducer;
use partlog_engine::producer::config::TopicProducerConfig;
use partlog_groups::assignor::TopicPartition;
use partlog_groups::consumer::{
    AutoOffsetReset, Consumer, ConsumerConfig, IsolationLevel, SendOffsetsToTransaction,
};
use partlog_groups::router::{GroupRouter, GroupRouterConfig};

type Result<T> = std::result::Result<T, Box<dyn StdError>>;

const T0: i64 = 1_700_000_000_000;
const PARTITIONS: i32 = 2;
const CRASHES: usize = 3;
const TXN_TIMEOUT_MS: i32 = 10_000;
/// Polls without the app finishing after which the run fails (a healthy run needs far fewer).
const STUCK_ROUNDS: usize = 5_000;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("exactly_once: FAILED: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    let records: usize = match std::env::args().nth(1) {
        Some(text) => text.parse()?,
        None => 300,
    };
    let seed = match std::env::args().nth(2) {
        Some(text) => text.parse()?,
        None => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_nanos() as u64,
    };
    println!("seed {seed}");
    let mut random = SplitMix64::new(seed);
    let sim = SimStorage::new(seed);
    let clock = Arc::new(ManualClock::new(T0));
    let root = Path::new("/engine");
    {
        let engine = Engine::open(root, config(&sim, &clock))?;
        engine.create_topic("in", PARTITIONS, TopicConfig::new())?;
        engine.create_topic("out", 1, TopicConfig::new())?;
        let input = engine.topic("in")?;
        for n in 0..records {
            let log = input.partition(n as i32 % PARTITIONS)?;
            let value = format!("record-{n}");
            let appended = log.append(&[NewRecord::new(T0, None, Some(value.as_bytes()))])?;
            log.wait_durable(appended.last_offset)?;
        }
        engine.close()?;
    }
    for round in 1..=CRASHES + 1 {
        let crash = (round <= CRASHES).then(|| {
            let op = if random.below(2) == 0 {
                FaultOp::Write
            } else {
                FaultOp::Sync
            };
            let nth = random.below(6 * records as u64 / CRASHES as u64) + 1;
            sim.inject(FaultRule::crash(op, nth));
            (op, nth)
        });
        let outcome = run_app(root, &sim, &clock);
        sim.clear_faults();
        match (crash, outcome) {
            (_, Ok(done)) => {
                println!("run {round}: the app finished ({done} transactions committed)");
                break;
            }
            (Some((op, nth)), Err(error)) => {
                println!("run {round}: killed by a crash before {op:?} #{nth} ({error})");
            }
            (None, Err(error)) => return Err(error),
        }
    }
    check(root, &sim, &clock, records)?;
    println!("seed {seed}: `out` holds each of the {records} inputs exactly once");
    Ok(())
}

fn config(sim: &SimStorage, clock: &Arc<ManualClock>) -> EngineConfig {
    let mut config = EngineConfig::default();
    config.storage = Arc::new(sim.clone()) as Arc<dyn Storage>;
    config.clock = Arc::clone(clock) as Arc<dyn Clock>;
    config
}

/// One life of the app: consume, transform, produce and commit the offsets in one transaction
/// per poll, until every input's offset is committed. Returns how many transactions
/// committed.
fn run_app(root: &Path, sim: &SimStorage, clock: &Arc<ManualClock>) -> Result<usize> {
    let engine = Arc::new(Engine::open(root, config(sim, clock))?);
    // A transaction the crash left open (the coordinator had not decided it) is aborted by its
    // timeout: move the manual clock past it, as real time would.
    clock.advance(i64::from(TXN_TIMEOUT_MS) + 1);
    engine.coordinator().tick(clock.now_ms());
    let mut groups = GroupRouterConfig::default();
    groups.group.initial_rebalance_delay_ms = 0;
    let router = GroupRouter::open(&engine, groups)?;
    let mut consumer_config = ConsumerConfig::with_group("eos");
    consumer_config.isolation_level = IsolationLevel::ReadCommitted;
    consumer_config.auto_offset_reset = AutoOffsetReset::Earliest;
    consumer_config.enable_auto_commit = false;
    // The member a crash left behind is removed after its session: a short one.
    consumer_config.session_timeout_ms = 6_000;
    consumer_config.max_poll_interval_ms = 10_000;
    consumer_config.heartbeat_interval_ms = 1_000;
    // Small transactions, so that the crashes fall between and inside them.
    consumer_config.max_poll_records = 7;
    let mut consumer = Consumer::new(&router, consumer_config)?;
    consumer.subscribe(&["in"], ())?;
    let mut producer_config = TopicProducerConfig::transactional("eos-app");
    producer_config.transaction_timeout_ms = TXN_TIMEOUT_MS;
    // A crash during the restart leaves the coordinator unable to finish the transaction it
    // recovered: `init_transactions` retries for max.block.ms, then reports it.
    producer_config.producer.max_block_ms = 1_000;
    let producer = TopicProducer::new(&engine, producer_config)?;
    producer.init_transactions()?;
    let ends: Vec<(TopicPartition, i64)> = (0..PARTITIONS)
        .map(|p| {
            Ok((
                TopicPartition::new("in", p),
                engine.topic("in")?.partition(p)?.log_end_offset(),
            ))
        })
        .collect::<Result<_>>()?;
    let mut transactions = 0;
    for round in 0..=STUCK_ROUNDS {
        if round == STUCK_ROUNDS {
            return Err(format!("no progress in {STUCK_ROUNDS} polls").into());
        }
        clock.advance(500);
        router.tick()?;
        let polled = consumer.poll(Duration::ZERO)?;
        if !polled.is_empty() {
            producer.begin_transaction()?;
            let mut next: BTreeMap<TopicPartition, i64> = BTreeMap::new();
            for record in &polled {
                let value = record.value.as_deref().unwrap_or_default();
                let out = [b"processed:", value].concat();
                producer.send("out", &NewRecord::new(T0, None, Some(&out)))?;
                next.insert(
                    TopicPartition::new(&record.topic, record.partition),
                    record.offset + 1,
                );
            }
            let offsets: Vec<(TopicPartition, i64)> = next.into_iter().collect();
            producer.send_offsets_to_transaction(&router, &offsets, &consumer.group_metadata()?)?;
            producer.commit_transaction()?;
            transactions += 1;
        }
        let partitions: Vec<TopicPartition> = ends.iter().map(|(tp, _)| tp.clone()).collect();
        let committed = match consumer.committed(&partitions) {
            Ok(committed) => committed,
            // An open transaction holds an offset: not done yet.
            Err(partlog_groups::Error::UnstableOffsetCommit) => continue,
            Err(error) => return Err(error.into()),
        };
        if ends.iter().all(|(tp, end)| committed[tp] == Some(*end)) {
            consumer.close()?;
            producer.close()?;
            router.close();
            engine.close()?;
            return Ok(transactions);
        }
    }
    Ok(transactions)
}

/// A `read_committed` reader of `out` finds every input once.
fn check(root: &Path, sim: &SimStorage, clock: &Arc<ManualClock>, records: usize) -> Result<()> {
    let engine = Engine::open(root, config(sim, clock))?;
    let out = engine.topic("out")?.partition(0)?;
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for record in out.committed_records(0, ReadBound::LogEnd) {
        let value = String::from_utf8(record?.value.unwrap_or_default())?;
        *seen.entry(value).or_default() += 1;
    }
    for n in 0..records {
        let expected = format!("processed:record-{n}");
        match seen.get(&expected) {
            Some(1) => {}
            Some(count) => return Err(format!("{expected} is in `out` {count} times").into()),
            None => return Err(format!("{expected} is missing from `out`").into()),
        }
    }
    if seen.len() != records {
        return Err(format!("`out` holds {} distinct values, not {records}", seen.len()).into());
    }
    engine.close()?;
    Ok(())
}
