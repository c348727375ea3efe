//! cargo run --release --example log_transactions -- [TRANSFERS]
//!
//! An account ledger on one log. Each transfer is one transaction of a transactional
//! [`Producer`]: a debit record and a credit record, keyed by account, the signed amount as
//! their value. One transfer in ten is aborted after both its records are in the log. A
//! `read_committed` reader ([`Log::committed_records`]) folds the log into balances after every
//! transaction, and checks that they sum to the opening total and equal what the writer
//! computed from its committed transfers; while a transfer is open, that it stops before the
//! debit already in the log. Then the log is reopened and read again from the start: the same
//! checks, and `read_committed` reads ([`ReadOptions`] with [`Isolation::ReadCommitted`]) list
//! every aborted transfer. TRANSFERS defaults to 1000 (CI runs 200). Exits non-zero if a check
//! fails.

mod scratch;

use std::collections::{BTreeMap, BTreeSet};
use std::error::Error as StdError;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use partlog::{
    FetchData, Isolation, Log, LogConfig, NewRecord, Producer, ProducerConfig, ReadBound,
    ReadOptions, SendHandle,
};

type Result<T> = std::result::Result<T, Box<dyn StdError>>;

const ACCOUNTS: usize = 10;
const OPENING_BALANCE: i64 = 1_000;
const TOTAL: i64 = ACCOUNTS as i64 * OPENING_BALANCE;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("log_transactions: FAILED: {error}");
            ExitCode::FAILURE
        }
    }
}

fn account(n: usize) -> String {
    format!("account-{n:02}")
}

/// Sends one ledger record: the account as its key, the signed amount as its value.
fn send(producer: &Producer, account: &str, amount: i64) -> partlog::Result<SendHandle> {
    let amount = amount.to_string();
    producer.send(&NewRecord::now(
        Some(account.as_bytes()),
        Some(amount.as_bytes()),
    ))
}

/// Every account's balance, and the offset the next read starts at.
struct Ledger {
    balances: BTreeMap<String, i64>,
    position: i64,
}

impl Ledger {
    fn opening() -> Ledger {
        let balances = (0..ACCOUNTS)
            .map(|n| (account(n), OPENING_BALANCE))
            .collect();
        Ledger {
            balances,
            position: 0,
        }
    }

    fn apply(&mut self, account: &str, amount: i64) -> Result<()> {
        *self
            .balances
            .get_mut(account)
            .ok_or("a record of an unknown account")? += amount;
        Ok(())
    }

    /// Applies the committed records from `position` on: those of aborted transactions are
    /// skipped, and the read stops before a transaction still open. Returns how many it applied.
    fn catch_up(&mut self, log: &Log) -> Result<usize> {
        let mut records = log.committed_records(self.position, ReadBound::LogEnd);
        let mut applied = 0;
        for record in records.by_ref() {
            let record = record?;
            let key = record.key.ok_or("a record without an account")?;
            let value = record.value.ok_or("a record without an amount")?;
            self.apply(
                std::str::from_utf8(&key)?,
                std::str::from_utf8(&value)?.parse()?,
            )?;
            applied += 1;
        }
        self.position = records.position();
        Ok(applied)
    }

    /// Fails unless the balances sum to the opening total and equal the writer's.
    fn check(&self, writer: &Ledger, when: &str) -> Result<()> {
        let total: i64 = self.balances.values().sum();
        if total != TOTAL {
            return Err(format!("{when}: the balances sum to {total}, not {TOTAL}").into());
        }
        if self.balances != writer.balances {
            let (ours, theirs) = (&self.balances, &writer.balances);
            return Err(format!("{when}: balances {ours:?}, the writer's {theirs:?}").into());
        }
        Ok(())
    }
}

fn run() -> Result<()> {
    let transfers: usize = std::env::args()
        .nth(1)
        .map_or(Ok(1_000), |n| n.parse())
        .map_err(|_| "usage: log_transactions [TRANSFERS], a number of transfers")?;
    let temp = scratch::ScratchDir::new("log_transactions")?;
    let dir = temp.path().join("ledger-0");
    let (writer, aborted) = write_transfers(&dir, transfers)?;
    println!(
        "{transfers} transfers, {aborted} of them aborted: after each, the read_committed \
         balances summed to {TOTAL} and equalled the writer's"
    );
    reopen_and_check(&dir, &writer, transfers - aborted, aborted)?;
    println!("reopened: the same balances re-read, {aborted} aborted transactions listed");
    Ok(())
}

/// Writes the transfers, checking a read_committed reader's view during and after each.
/// Returns the writer's balances and how many transfers it aborted.
fn write_transfers(dir: &Path, transfers: usize) -> Result<(Ledger, usize)> {
    let log = Arc::new(Log::open(dir, LogConfig::default())?);
    // Producer id 1, epoch 0: a log-level user picks them (Kafka's coordinator hands them out).
    let config = ProducerConfig::transactional(1, 0).build()?;
    let producer = Producer::new(Arc::clone(&log), config)?;
    let mut writer = Ledger::opening(); // the transfers the writer committed
    let mut reader = Ledger::opening(); // what a read_committed consumer sees
    let mut aborted = 0;
    for n in 0..transfers {
        let from = account(n % ACCOUNTS);
        let to = account((n + 1 + n / ACCOUNTS % (ACCOUNTS - 1)) % ACCOUNTS);
        let amount = 1 + (n as i64 * 37) % 200;
        producer.begin()?;
        let debit = send(&producer, &from, -amount)?;
        // The debit alone is in the log now, and the reader must stop before it.
        producer.flush()?;
        let debit_offset = debit.wait()?;
        if reader.catch_up(&log)? != 0 || reader.position > debit_offset {
            return Err(format!("transfer {n}: read_committed read its debit").into());
        }
        let credit = send(&producer, &to, amount)?;
        if n % 10 == 9 {
            producer.abort()?;
            aborted += 1;
        } else {
            producer.commit()?;
            writer.apply(&from, -amount)?;
            writer.apply(&to, amount)?;
        }
        // Aborted or committed, the credit was appended: its handle has its offset.
        credit.wait()?;
        reader.catch_up(&log)?;
        reader.check(&writer, &format!("after transfer {n}"))?;
    }
    producer.close()?;
    log.close()?;
    Ok((writer, aborted))
}

/// Reopens the log and reads it all again, with the two read_committed APIs.
fn reopen_and_check(dir: &Path, writer: &Ledger, committed: usize, aborted: usize) -> Result<()> {
    let log = Log::open(dir, LogConfig::default())?;
    let mut reread = Ledger::opening();
    let records = reread.catch_up(&log)?;
    if records != 2 * committed {
        return Err(format!("after the reopen: {records} records, not {}", 2 * committed).into());
    }
    reread.check(writer, "after the reopen")?;
    // Whole batches through Log::read_with: each read stops at the last stable offset and
    // lists the aborted transactions in its range, for the reader to skip.
    let options = ReadOptions::default().isolation(Isolation::ReadCommitted);
    let mut fetch = FetchData::new();
    let mut listed = BTreeSet::new();
    let mut offset = log.log_start_offset();
    while offset < log.last_stable_offset() {
        log.read_with_into(offset, 1 << 20, options, &mut fetch)?;
        for txn in fetch.aborted_transactions() {
            listed.insert(txn.first_offset);
        }
        offset = fetch.next_offset();
    }
    if listed.len() != aborted {
        return Err(format!(
            "{} aborted transactions listed, not {aborted}",
            listed.len()
        )
        .into());
    }
    log.close()?;
    Ok(())
}
