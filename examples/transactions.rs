//! cargo run --release --example transactions -- [TRANSFERS]
//!
//! Money moving between accounts, atomically across topics, on a partlog-engine `Engine`. Two
//! topics: `accounts` (4 partitions, each record an account's new balance, keyed by account)
//! and `ledger` (2 partitions, one record per transfer). Each transfer is one transaction of a
//! transactional `TopicProducer`: the debit, the credit and the ledger entry, on up to three
//! partitions of two topics. One transfer in ten is aborted. After each commit a
//! `read_committed` reader folds the accounts into balances and checks that they sum to the
//! opening total and equal what the writer committed.
//!
//! Then the demo runs again on partlog's crash simulator (`SimStorage`) with a crash at a
//! random storage operation, reopens the engine (the coordinator completes a transaction
//! decided before the crash, and its timeout aborts one that was not), and checks the same
//! invariant: the total is intact and no transfer is half applied. TRANSFERS defaults to 1000
//! (CI runs 200). Exits non-zero if a check fails.

mod scratch;

use std::collections::BTreeMap;
use std::error::Error as StdError;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use partlog::unstable::sim::{FaultOp, FaultRule};
use partlog::unstable::{Clock, ManualClock, SimStorage, SplitMix64, Storage};
use partlog::{LogConfig, NewRecord, ReadBound};
use partlog_engine::engine::{Engine, EngineConfig, TopicConfig};
use partlog_engine::producer::TopicProducer;
use partlog_engine::producer::config::TopicProducerConfig;

type Result<T> = std::result::Result<T, Box<dyn StdError>>;

const ACCOUNTS: usize = 10;
const OPENING_BALANCE: i64 = 1_000;
const TOTAL: i64 = ACCOUNTS as i64 * OPENING_BALANCE;
const TIMEOUT_MS: i32 = 10_000;
const T0: i64 = 1_700_000_000_000;

type Balances = BTreeMap<String, i64>;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("transactions: FAILED: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    let transfers: usize = match std::env::args().nth(1) {
        Some(text) => text.parse()?,
        None => 1000,
    };
    let scratch = scratch::ScratchDir::new("transactions")?;
    let engine = Engine::open(scratch.path().join("engine"), EngineConfig::default())?;
    let (committed, aborted) = transfer(&engine, transfers, 1, &mut Balances::new())?;
    engine.close()?;
    println!(
        "on disk: {committed} transfers committed, {aborted} aborted; the total stayed {TOTAL}"
    );
    crash_run(transfers)
}

/// Creates the topics if needed, opens the accounts, then runs `transfers` transfers from a
/// random generator seeded with `seed`, checking the invariant after each commit. `balances`
/// holds what the writer committed, kept by the caller if a storage error stops the run.
fn transfer(
    engine: &Engine,
    transfers: usize,
    seed: u64,
    balances: &mut Balances,
) -> Result<(usize, usize)> {
    engine.create_topic("accounts", 4, TopicConfig::new())?;
    engine.create_topic("ledger", 2, TopicConfig::new())?;
    let mut config = TopicProducerConfig::transactional("mover");
    config.transaction_timeout_ms = TIMEOUT_MS;
    let producer = TopicProducer::new(engine, config)?;
    producer.init_transactions()?;
    let opening: Balances = (0..ACCOUNTS)
        .map(|i| (format!("account-{i}"), OPENING_BALANCE))
        .collect();
    producer.begin_transaction()?;
    for (account, balance) in &opening {
        send_balance(&producer, account, *balance)?;
    }
    producer.commit_transaction()?;
    *balances = opening;
    check(engine, balances)?;
    let mut random = SplitMix64::new(seed);
    let (mut committed, mut aborted) = (0, 0);
    for n in 0..transfers {
        let from = format!("account-{}", random.below(ACCOUNTS as u64));
        let to = format!("account-{}", random.below(ACCOUNTS as u64));
        if from == to {
            continue;
        }
        let amount = i64::try_from(random.below(100))? + 1;
        let mut next = balances.clone();
        *next.entry(from.clone()).or_default() -= amount;
        *next.entry(to.clone()).or_default() += amount;
        producer.begin_transaction()?;
        send_balance(&producer, &from, next[&from])?;
        send_balance(&producer, &to, next[&to])?;
        let entry = format!("{from}->{to}:{amount}");
        producer.send(
            "ledger",
            &NewRecord::new(
                T0,
                Some(format!("transfer-{n}").as_bytes()),
                Some(entry.as_bytes()),
            ),
        )?;
        if random.below(10) == 0 {
            producer.abort_transaction()?;
            aborted += 1;
        } else {
            producer.commit_transaction()?;
            *balances = next;
            committed += 1;
        }
        check(engine, balances)?;
    }
    producer.close()?;
    Ok((committed, aborted))
}

fn send_balance(producer: &TopicProducer, account: &str, balance: i64) -> Result<()> {
    let value = balance.to_string();
    producer.send(
        "accounts",
        &NewRecord::new(T0, Some(account.as_bytes()), Some(value.as_bytes())),
    )?;
    Ok(())
}

/// The balances a `read_committed` reader folds out of the accounts topic.
fn read_balances(engine: &Engine) -> Result<Balances> {
    let accounts = engine.topic("accounts")?;
    let mut balances = Balances::new();
    for partition in 0..accounts.partitions() {
        let log = accounts.partition(partition)?;
        for record in log.committed_records(0, ReadBound::LogEnd) {
            let record = record?;
            let key = String::from_utf8(record.key.unwrap_or_default())?;
            let value: i64 = String::from_utf8(record.value.unwrap_or_default())?.parse()?;
            balances.insert(key, value);
        }
    }
    Ok(balances)
}

/// The invariant: the committed balances sum to the opening total and are the writer's.
fn check(engine: &Engine, expected: &Balances) -> Result<()> {
    let balances = read_balances(engine)?;
    let sum: i64 = balances.values().sum();
    if sum != TOTAL {
        return Err(format!("the balances sum to {sum}, not {TOTAL}: {balances:?}").into());
    }
    if &balances != expected {
        return Err(format!("read {balances:?}, the writer committed {expected:?}").into());
    }
    Ok(())
}

fn sim_config(sim: &SimStorage, clock: &Arc<ManualClock>) -> EngineConfig {
    let mut config = EngineConfig::default();
    config.storage = Arc::new(sim.clone()) as Arc<dyn Storage>;
    config.clock = Arc::clone(clock) as Arc<dyn Clock>;
    config.log_config = Arc::new(LogConfig::builder);
    config
}

/// The same transfers on the crash simulator, crashed at a random storage operation; the
/// invariant must hold after recovery.
fn crash_run(transfers: usize) -> Result<()> {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_nanos() as u64;
    let mut random = SplitMix64::new(seed);
    let sim = SimStorage::new(seed);
    let clock = Arc::new(ManualClock::new(T0));
    let root = Path::new("/engine");
    let (op, ops) = match random.below(2) {
        0 => (FaultOp::Write, 8 * transfers as u64),
        _ => (FaultOp::Sync, 6 * transfers as u64),
    };
    let nth = random.below(ops.max(1)) + 1;
    sim.inject(FaultRule::crash(op, nth));
    let mut balances = Balances::new();
    let outcome = {
        let engine = Engine::open(root, sim_config(&sim, &clock))?;
        transfer(&engine, transfers, seed, &mut balances)
    };
    sim.clear_faults();
    let engine = Engine::open(root, sim_config(&sim, &clock))?;
    clock.advance(i64::from(TIMEOUT_MS) + 1);
    let report = engine.coordinator().tick(clock.now_ms());
    if let Some((id, error)) = report.failed.first() {
        return Err(format!("the coordinator could not end {id}'s transaction: {error}").into());
    }
    if engine.topic_names().is_empty() {
        println!("crash run (seed {seed}): crashed before the topics existed; nothing to check");
        return Ok(());
    }
    let read = read_balances(&engine)?;
    let sum: i64 = read.values().sum();
    if !read.is_empty() && sum != TOTAL {
        return Err(format!("after the crash the balances sum to {sum}: {read:?}").into());
    }
    // The last commit may have been decided before the crash and completed by recovery: the
    // balances are the writer's last committed ones, or those and the transfer in flight.
    let differing = read
        .iter()
        .filter(|(account, balance)| balances.get(*account) != Some(balance))
        .count();
    if !balances.is_empty() && differing > 2 {
        return Err(format!("after the crash read {read:?}, committed {balances:?}").into());
    }
    let accounts = engine.topic("accounts")?;
    for partition in 0..accounts.partitions() {
        if let Some(offset) = accounts.partition(partition)?.first_unstable_offset() {
            return Err(
                format!("accounts-{partition}: a transaction hangs open at {offset}").into(),
            );
        }
    }
    let total = if read.is_empty() {
        "no balance was committed yet".to_owned()
    } else {
        format!("the total is {sum}")
    };
    println!(
        "crash run (seed {seed}, crash before {op:?} #{nth}): {}; after recovery {total} and no \
         transfer is half applied",
        match outcome {
            Ok(_) => "the crash came after the last transfer".to_owned(),
            Err(error) => format!("stopped by the crash ({error})"),
        }
    );
    Ok(())
}
