//! cargo run --release --example consumer_group -- [RECORDS]
//!
//! A consumer group in process, on a partlog-engine `Engine` and the group layer of
//! partlog-groups: topic `events` of 6 partitions; three consumer threads in group `workers`
//! with the `cooperative-sticky` assignor. A fourth consumer joins: the cooperative protocol
//! moves partitions in two rounds (the owners revoke, then the newcomer gets them), printed.
//! Then one thread stalls past `max.poll.interval.ms` on the manual clock, which the main
//! thread drives: the coordinator evicts it when its session ends and gives its partitions to
//! the others; when it polls again it finds its partitions lost, and rejoins.
//!
//! Records keep arriving throughout; every consumer commits after each batch (and, by
//! auto-commit, before a revocation). At the end every record must have been processed
//! exactly once across the run. RECORDS defaults to 3000 (CI runs 600). Exits non-zero if a
//! check fails.

mod scratch;

use std::collections::BTreeMap;
use std::error::Error as StdError;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use partlog::NewRecord;
use partlog::unstable::{Clock, ManualClock};
use partlog_engine::engine::{Engine, EngineConfig, TopicConfig};
use partlog_groups::assignor::{Assignor, CooperativeStickyAssignor, TopicPartition};
use partlog_groups::consumer::{AutoOffsetReset, Consumer, ConsumerConfig, RebalanceListener};
use partlog_groups::router::{GroupRouter, GroupRouterConfig};

type Result<T> = std::result::Result<T, Box<dyn StdError>>;

const T0: i64 = 1_700_000_000_000;
const PARTITIONS: i32 = 6;
const STEP_MS: i64 = 100;
const MAX_POLL_INTERVAL_MS: i32 = 10_000;
const SESSION_TIMEOUT_MS: i32 = 20_000;

/// Each processed value and how often it was processed.
type Processed = Arc<Mutex<BTreeMap<String, u32>>>;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("consumer_group: FAILED: {error}");
            ExitCode::FAILURE
        }
    }
}

/// What a consumer thread shares with the main thread.
struct Worker {
    name: String,
    polls: AtomicU64,
    stalled: AtomicBool,
    stop: AtomicBool,
    failed: Mutex<Option<String>>,
}

/// Prints each change of a worker's partitions.
struct Printer(String);

impl RebalanceListener for Printer {
    fn on_partitions_revoked(&mut self, partitions: &[TopicPartition]) {
        println!("  {}: revoked {}", self.0, list(partitions));
    }
    fn on_partitions_assigned(&mut self, partitions: &[TopicPartition]) {
        println!("  {}: assigned {}", self.0, list(partitions));
    }
    fn on_partitions_lost(&mut self, partitions: &[TopicPartition]) {
        println!("  {}: lost {}", self.0, list(partitions));
    }
}

fn list(partitions: &[TopicPartition]) -> String {
    let names: Vec<String> = partitions.iter().map(ToString::to_string).collect();
    if names.is_empty() {
        "nothing".to_owned()
    } else {
        names.join(" ")
    }
}

fn run() -> Result<()> {
    let records: usize = match std::env::args().nth(1) {
        Some(text) => text.parse()?,
        None => 3000,
    };
    let scratch = scratch::ScratchDir::new("consumer_group")?;
    let clock = Arc::new(ManualClock::new(T0));
    let mut config = EngineConfig::default();
    config.clock = Arc::clone(&clock) as Arc<dyn Clock>;
    let engine = Arc::new(Engine::open(scratch.path().join("engine"), config)?);
    let events = engine.create_topic("events", PARTITIONS, TopicConfig::new())?;
    let mut groups = GroupRouterConfig::default();
    groups.group.initial_rebalance_delay_ms = 0;
    let router = GroupRouter::open(&engine, groups)?;
    let processed: Processed = Arc::default();

    let mut workers = Vec::new();
    let mut threads = Vec::new();
    let mut produced = 0;
    for round in 0..4 {
        if round == 3 {
            println!("a fourth consumer joins:");
        }
        let worker = Arc::new(Worker {
            name: format!("consumer-{}", round + 1),
            polls: AtomicU64::new(0),
            stalled: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            failed: Mutex::new(None),
        });
        let consumer = new_consumer(&router)?;
        threads.push(spawn(consumer, Arc::clone(&worker), Arc::clone(&processed)));
        workers.push(worker);
        for _ in 0..40 {
            produced += produce(&events, produced, (records / 8 / 40).max(1))?;
            step(&clock, &router, &workers)?;
        }
    }
    let stalled = &workers[1];
    println!("{} stalls past max.poll.interval.ms:", stalled.name);
    stalled.stalled.store(true, Ordering::SeqCst);
    let stall_steps = i64::from(SESSION_TIMEOUT_MS.max(MAX_POLL_INTERVAL_MS)) / STEP_MS + 20;
    for _ in 0..stall_steps {
        produced += produce(&events, produced, records / 8 / stall_steps as usize + 1)?;
        step(&clock, &router, &workers)?;
    }
    println!("{} polls again:", stalled.name);
    stalled.stalled.store(false, Ordering::SeqCst);
    for i in 0..40 {
        let left = records.saturating_sub(produced);
        produced += produce(&events, produced, left.div_ceil(40 - i))?;
        step(&clock, &router, &workers)?;
    }
    // Until every record is processed.
    for _ in 0..10_000 {
        if processed.lock().map_err(|_| "poisoned")?.len() >= produced {
            break;
        }
        step(&clock, &router, &workers)?;
    }
    for worker in &workers {
        worker.stop.store(true, Ordering::SeqCst);
    }
    for thread in threads {
        thread.join().map_err(|_| "a consumer thread panicked")?;
    }
    router.close();
    engine.close()?;
    check(&processed, produced)
}

fn new_consumer(router: &Arc<GroupRouter>) -> Result<Consumer> {
    let mut config = ConsumerConfig::with_group("workers");
    config.auto_offset_reset = AutoOffsetReset::Earliest;
    // Commits go after each batch; auto-commit commits before each revocation too.
    config.auto_commit_interval_ms = 3_600_000;
    config.max_poll_interval_ms = MAX_POLL_INTERVAL_MS;
    config.session_timeout_ms = SESSION_TIMEOUT_MS;
    config.max_poll_records = 20;
    let assignors: Vec<Box<dyn Assignor + Send>> = vec![Box::new(CooperativeStickyAssignor::new())];
    Ok(Consumer::with_assignors(router, config, assignors)?)
}

fn spawn(
    mut consumer: Consumer,
    worker: Arc<Worker>,
    processed: Processed,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let outcome = (|| -> Result<()> {
            consumer.subscribe(&["events"], Printer(worker.name.clone()))?;
            while !worker.stop.load(Ordering::SeqCst) {
                if worker.stalled.load(Ordering::SeqCst) {
                    std::thread::park_timeout(Duration::from_millis(1));
                    continue;
                }
                let batch = consumer.poll(Duration::from_millis(1))?;
                {
                    let mut seen = processed.lock().map_err(|_| "poisoned")?;
                    for record in &batch {
                        let value = String::from_utf8(record.value.clone().unwrap_or_default())?;
                        *seen.entry(value).or_default() += 1;
                    }
                }
                if !batch.is_empty() {
                    match consumer.commit_sync(None) {
                        // Committed before the revocation that ends this rebalance.
                        Ok(()) | Err(partlog_groups::Error::RebalanceInProgress) => {}
                        Err(error) => return Err(error.into()),
                    }
                }
                worker.polls.fetch_add(1, Ordering::SeqCst);
            }
            consumer.close()?;
            Ok(())
        })();
        if let Err(error) = outcome {
            if let Ok(mut failed) = worker.failed.lock() {
                *failed = Some(error.to_string());
            }
            worker.polls.store(u64::MAX, Ordering::SeqCst);
        }
    })
}

/// Appends `count` records (values `event-<n>`) round-robin over the partitions.
fn produce(events: &partlog_engine::engine::Topic, from: usize, count: usize) -> Result<usize> {
    for n in from..from + count {
        let log = events.partition(n as i32 % PARTITIONS)?;
        let value = format!("event-{n}");
        log.append(&[NewRecord::new(T0, None, Some(value.as_bytes()))])?;
    }
    Ok(count)
}

/// Moves the clock one step, runs the group's timers, and waits until every polling worker
/// has polled since: the clock never runs ahead of the consumers' heartbeats.
fn step(clock: &ManualClock, router: &GroupRouter, workers: &[Arc<Worker>]) -> Result<()> {
    clock.advance(STEP_MS);
    router.tick()?;
    for worker in workers {
        if let Some(error) = worker.failed.lock().map_err(|_| "poisoned")?.as_ref() {
            return Err(format!("{}: {error}", worker.name).into());
        }
        if worker.stalled.load(Ordering::SeqCst) {
            continue;
        }
        let seen = worker.polls.load(Ordering::SeqCst);
        while worker.polls.load(Ordering::SeqCst) < seen.saturating_add(2) {
            std::thread::yield_now();
        }
    }
    Ok(())
}

fn check(processed: &Processed, produced: usize) -> Result<()> {
    let seen = processed.lock().map_err(|_| "poisoned")?;
    for n in 0..produced {
        let value = format!("event-{n}");
        match seen.get(&value) {
            Some(1) => {}
            Some(times) => return Err(format!("{value} was processed {times} times").into()),
            None => return Err(format!("{value} was never processed").into()),
        }
    }
    println!("all {produced} records were processed and committed exactly once");
    Ok(())
}
