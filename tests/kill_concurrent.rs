//! A real kernel kill under concurrency: a child process (this test binary, re-executed with
//! `PARTLOG_KILL_CHILD` naming the log directory) runs at once, on a real directory,
//!
//! - three writer threads appending one record at a time and waiting for it to be durable
//!   (`Log::wait_durable`), with keys of their own (`w<thread>-<n>`, never repeated);
//! - a `Producer` with acks=all sending groups of records with 16 repeating keys (`p<k>`);
//! - an operations thread alternating `truncate_to` and `delete_records_before`;
//! - a compaction thread running `Log::compact` passes;
//!
//! and prints to stdout each acknowledged-durable record (`ack <offset> <key> <value>`) as it is
//! acknowledged, each operation as it starts (`truncating <offset>`, `deleting <offset>`,
//! `compacting`) and as it completes (`truncate <new end>`, `delete <offset>`, `compact`). The
//! parent SIGKILLs it once it has seen a number of acknowledgements and at least one of each
//! completed operation (a condition, not a sleep), reopens the log under `RecoveryMode::Fail`,
//! and checks that every acknowledged record is there with its key and value, unless a completed
//! operation removed it: a truncation below it or a deletion above it printed after its
//! acknowledgement, or, for the repeating keys only, a compaction pass printed after it.
//!
//! An operation the kill caught between its two lines may have taken effect or not: a
//! truncation to `t` may have removed what lies at or above `t` (or the reopened log end, if
//! lower: a batch that straddles `t` goes whole), a deletion before `d` what lies below `d`, and
//! a compaction pass any record of a repeating key. Every record the log holds, acknowledged or
//! not, must be one the child wrote, whole. Each round continues the directory the last one
//! left, so later children also start from a recovered log; the records found at the start of a
//! round count as acknowledged.
//!
//! Why a lock: a truncation reuses offsets, so the order of the lines must be the order of the
//! events. Writers and the producer hold a read lock from append to print, truncation and
//! deletion a write lock through their print. Appends, acknowledgements and compaction passes
//! still run at the same time; only truncation and deletion exclude appends.
//!
//! Rounds: 4, or `PARTLOG_KILL_ROUNDS`; the kill points come from a seed printed at the start
//! (`PARTLOG_KILL_SEED`).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use partlog::unstable::SplitMix64;
use partlog::{
    Acks, CleanupPolicy, Log, LogConfig, NewRecord, Producer, ProducerConfig, ReadBound,
    RecoveryMode,
};

/// The environment variable that turns the test binary into the child, naming its directory.
const CHILD_ENV: &str = "PARTLOG_KILL_CHILD";
/// The round number, passed to the child so that its keys differ from earlier rounds'.
const ROUND_ENV: &str = "PARTLOG_KILL_CHILD_ROUND";
/// This test's name, which the child is re-executed to run.
const TEST_NAME: &str = "acknowledged_records_survive_sigkill_under_concurrent_writes_and_ops";
const DEFAULT_ROUNDS: u64 = 4;
const WRITER_THREADS: u64 = 3;
/// The producer's keys repeat over this many, so that compaction has records to remove.
const PRODUCER_KEYS: u64 = 16;
/// Acknowledgements between two operations of the operations thread, and between two passes.
const ACKS_PER_OP: u64 = 25;

/// The config both processes use: small segments so that rolls, compaction groups and
/// truncations across segments happen, compaction on, no maintenance thread (the child runs
/// passes itself), and recovery that fails rather than truncates on corruption.
fn config() -> LogConfig {
    LogConfig::builder_for_tests()
        .segment_bytes(16 * 1024)
        .cleanup_policy(CleanupPolicy::COMPACT)
        .min_compaction_lag_ms(0)
        .min_cleanable_dirty_ratio(0.0)
        .retention_check_interval_ms(-1)
        .recovery_mode(RecoveryMode::Fail)
        .build()
        .expect("a valid config")
}

/// A value that names its record, with a length that varies so that batches differ in size.
fn value_for(key: &str, n: u64) -> String {
    format!("{key}:{n}:{}", "v".repeat((n % 97) as usize))
}

#[test]
fn acknowledged_records_survive_sigkill_under_concurrent_writes_and_ops() {
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        run_child(Path::new(&dir));
    }
    let rounds = env_number("PARTLOG_KILL_ROUNDS").unwrap_or(DEFAULT_ROUNDS);
    let seed = env_number("PARTLOG_KILL_SEED").unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("a clock after 1970")
            .as_nanos() as u64
    });
    eprintln!("kill_concurrent: {rounds} rounds, PARTLOG_KILL_SEED={seed}");
    let mut rng = SplitMix64::new(seed);
    let temp = tempfile::tempdir().expect("a temporary directory");
    let dir = temp.path().join("topic-0");
    let mut totals = (0usize, 0usize);
    for round in 0..rounds {
        // The records a previous round left: acknowledged, and durable since the parent's close.
        let mut acked = match Log::open(&dir, config()) {
            Ok(log) if round > 0 => {
                let held = read_all(&log);
                log.close().expect("close after reading");
                held
            }
            Ok(log) => {
                log.close().expect("close a new log");
                BTreeMap::new()
            }
            Err(error) => panic!("round {round}: the log fails to open: {error}"),
        };
        let acks_wanted = 100 + rng.next_u64() % 300;
        let lines = run_and_kill(&dir, round, acks_wanted);
        let mut acks = 0usize;
        for line in &lines {
            apply_line(&mut acked, line);
            acks += usize::from(line.starts_with("ack "));
        }
        let log = match Log::open(&dir, config()) {
            Ok(log) => log,
            Err(error) => panic!(
                "round {round} (seed {seed}): the log fails to open under RecoveryMode::Fail \
                 after the kill: {error}"
            ),
        };
        let held = read_all(&log);
        apply_in_flight(&mut acked, in_flight(&lines), log.log_end_offset());
        // Acknowledged or not, every record is one the child wrote, whole.
        for (offset, (key, value)) in &held {
            let n = value
                .split(':')
                .nth(1)
                .and_then(|n| n.parse().ok())
                .unwrap_or(u64::MAX);
            assert!(
                *value == value_for(key, n),
                "round {round} (seed {seed}): record {offset} ({key}) holds {value:?}, which the \
                 child never wrote"
            );
        }
        for (offset, (key, value)) in &acked {
            assert_eq!(
                held.get(offset),
                Some(&(key.clone(), value.clone())),
                "round {round} (seed {seed}): acknowledged record {offset} {key} is not there \
                 ({} lines, the last: {:?})",
                lines.len(),
                lines.last()
            );
        }
        totals.0 += acks;
        totals.1 += acked.len();
        log.close().expect("close after checking");
    }
    eprintln!(
        "kill_concurrent: {} acknowledgements over {rounds} kills; {} records checked present",
        totals.0, totals.1
    );
}

/// Applies one line of the child's output to the records that must be in the log.
fn apply_line(acked: &mut BTreeMap<i64, (String, String)>, line: &str) {
    let mut words = line.split(' ');
    match (words.next(), words.next(), words.next(), words.next()) {
        (Some("ack"), Some(offset), Some(key), Some(value)) => {
            let offset = offset.parse().expect("an offset");
            acked.insert(offset, (key.to_owned(), value.to_owned()));
        }
        (Some("truncate"), Some(end), None, None) => {
            let end: i64 = end.parse().expect("an offset");
            acked.retain(|&offset, _| offset < end);
        }
        (Some("delete"), Some(start), None, None) => {
            let start: i64 = start.parse().expect("an offset");
            acked.retain(|&offset, _| offset >= start);
        }
        // A pass may have removed any record of a repeating key acknowledged before it, never
        // one of a key written once.
        (Some("compact"), None, None, None) => acked.retain(|_, (key, _)| !key.starts_with('p')),
        // An operation starting: only its completion removes anything for certain.
        (Some("truncating" | "deleting"), Some(_), None, None) | (Some("compacting"), None, ..) => {
        }
        _ => panic!("an unexpected line from the child: {line:?}"),
    }
}

/// The operations the kill may have caught between their start and completion lines: the last
/// `truncating` or `deleting` line if no completion follows it (one runs at a time), and the last
/// `compacting` likewise.
fn in_flight(lines: &[String]) -> Vec<&str> {
    let mut ops = Vec::new();
    for (started, done) in [("truncating ", "truncate "), ("deleting ", "delete ")] {
        let last_start = lines.iter().rposition(|line| line.starts_with(started));
        let last_done = lines.iter().rposition(|line| line.starts_with(done));
        if let Some(start) = last_start
            && last_done.is_none_or(|done| done < start)
        {
            ops.push(lines[start].as_str());
        }
    }
    let last_start = lines.iter().rposition(|line| line == "compacting");
    let last_done = lines.iter().rposition(|line| line == "compact");
    if last_start.is_some_and(|start| last_done.is_none_or(|done| done < start)) {
        ops.push("compacting");
    }
    ops
}

/// Applies operations the kill caught half-way: what they may have removed need not be there.
/// `end` is the reopened log's end offset.
fn apply_in_flight(acked: &mut BTreeMap<i64, (String, String)>, ops: Vec<&str>, end: i64) {
    for op in ops {
        let mut words = op.split(' ');
        match (words.next(), words.next().map(|word| word.parse::<i64>())) {
            (Some("truncating"), Some(Ok(to))) => {
                let from = to.min(end);
                acked.retain(|&offset, _| offset < from);
            }
            (Some("deleting"), Some(Ok(to))) => acked.retain(|&offset, _| offset >= to),
            (Some("compacting"), None) => acked.retain(|_, (key, _)| !key.starts_with('p')),
            _ => panic!("not an operation: {op:?}"),
        }
    }
}

/// Every record of the log by offset: key and value.
fn read_all(log: &Log) -> BTreeMap<i64, (String, String)> {
    log.records(log.log_start_offset(), ReadBound::LogEnd)
        .map(|record| {
            let record = record.expect("a readable record");
            let text = |bytes: Option<Vec<u8>>| {
                String::from_utf8(bytes.unwrap_or_default()).expect("text written by this test")
            };
            (record.offset, (text(record.key), text(record.value)))
        })
        .collect()
}

/// Starts the child on `dir`, reads its lines until it has acknowledged `acks_wanted` records
/// and completed each kind of operation, SIGKILLs it, and returns every whole line it printed.
fn run_and_kill(dir: &Path, round: u64, acks_wanted: u64) -> Vec<String> {
    let mut child = Command::new(std::env::current_exe().expect("the test binary"))
        .args(["--exact", TEST_NAME, "--nocapture", "--test-threads", "1"])
        .env(CHILD_ENV, dir)
        .env(ROUND_ENV, round.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the child");
    let stdout = child.stdout.take().expect("the child's stdout");
    let mut stdout = BufReader::new(stdout);
    let mut lines = Vec::new();
    let (mut acks, mut truncates, mut deletes, mut compactions) = (0, 0, 0, 0);
    let mut killed = false;
    let mut text = String::new();
    loop {
        text.clear();
        match stdout.read_line(&mut text) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        // A line the kill cut is no acknowledgement; the test harness's own lines are skipped.
        let Some(line) = text.strip_suffix('\n') else {
            break;
        };
        let kind = line.split(' ').next().unwrap_or_default();
        match kind {
            "ack" => acks += 1,
            "truncate" => truncates += 1,
            "delete" => deletes += 1,
            "compact" => compactions += 1,
            "truncating" | "deleting" | "compacting" => {}
            _ => continue,
        }
        lines.push(line.to_owned());
        if !killed && acks >= acks_wanted && truncates > 0 && deletes > 0 && compactions > 0 {
            child.kill().expect("SIGKILL the child");
            killed = true;
        }
    }
    let status = child.wait().expect("the child's status");
    if !killed {
        let mut stderr = String::new();
        let _ = std::io::Read::read_to_string(
            &mut child.stderr.take().expect("the child's stderr"),
            &mut stderr,
        );
        panic!(
            "the child ended by itself ({status}) after {acks} acks, {truncates} truncations, \
             {deletes} deletions, {compactions} passes:\n{stderr}"
        );
    }
    lines
}

/// Prints one line with a single write, so that lines from different threads never mix.
fn say(line: &str) {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(format!("{line}\n").as_bytes())
        .and_then(|()| stdout.flush())
        .expect("the parent reads stdout");
}

/// Counts acknowledgements and wakes the threads that wait for a number of them.
struct AckCount {
    count: Mutex<u64>,
    changed: Condvar,
}

impl AckCount {
    fn add(&self, n: u64) {
        *self.count.lock().expect("ack count") += n;
        self.changed.notify_all();
    }

    fn wait_for(&self, at_least: u64) {
        let mut count = self.count.lock().expect("ack count");
        while *count < at_least {
            count = self.changed.wait(count).expect("ack count");
        }
    }
}

/// The child: runs the writers, the producer, the operations and compaction until killed.
fn run_child(dir: &Path) -> ! {
    let log = Arc::new(Log::open(dir, config()).expect("the child opens the log"));
    // Each round numbers its records from its own billion, so that no writer key repeats.
    let first = env_number(ROUND_ENV).expect("the round number") * 1_000_000_000;
    let order = Arc::new(RwLock::new(()));
    let acks = Arc::new(AckCount {
        count: Mutex::new(0),
        changed: Condvar::new(),
    });
    for thread in 0..WRITER_THREADS {
        let (log, order, acks) = (Arc::clone(&log), Arc::clone(&order), Arc::clone(&acks));
        std::thread::spawn(move || {
            for n in first.. {
                let key = format!("w{thread}-{n}");
                let value = value_for(&key, n);
                let _order = order.read().expect("order lock");
                let record = NewRecord::new(-1, Some(key.as_bytes()), Some(value.as_bytes()));
                let info = log
                    .append(&[record])
                    .unwrap_or_else(|error| fail("append", error));
                log.wait_durable(info.last_offset)
                    .unwrap_or_else(|error| fail("wait_durable", error));
                say(&format!("ack {} {key} {value}", info.first_offset));
                acks.add(1);
            }
        });
    }
    {
        let (log, order, acks) = (Arc::clone(&log), Arc::clone(&order), Arc::clone(&acks));
        std::thread::spawn(move || {
            let config = ProducerConfig::builder()
                .acks(Acks::All)
                .linger_ms(1)
                .build()
                .expect("a valid producer config");
            let producer = Producer::new(log, config).unwrap_or_else(|e| fail("producer", e));
            let sequence = AtomicU64::new(first);
            loop {
                let _order = order.read().expect("order lock");
                let sent: Vec<_> = (0..4)
                    .map(|_| {
                        let n = sequence.fetch_add(1, Ordering::Relaxed);
                        let key = format!("p{}", n % PRODUCER_KEYS);
                        let value = value_for(&key, n);
                        let record =
                            NewRecord::new(-1, Some(key.as_bytes()), Some(value.as_bytes()));
                        let handle = producer.send(&record).unwrap_or_else(|e| fail("send", e));
                        (key, value, handle)
                    })
                    .collect();
                for (key, value, handle) in sent {
                    let offset = handle.wait().unwrap_or_else(|e| fail("acks=all send", e));
                    say(&format!("ack {offset} {key} {value}"));
                    acks.add(1);
                }
            }
        });
    }
    {
        let (log, acks) = (Arc::clone(&log), Arc::clone(&acks));
        std::thread::spawn(move || {
            for pass in 1.. {
                acks.wait_for(pass * ACKS_PER_OP);
                say("compacting");
                log.compact().unwrap_or_else(|error| fail("compact", error));
                say("compact");
            }
        });
    }
    for op in 1.. {
        acks.wait_for(op * ACKS_PER_OP);
        let _order = order.write().expect("order lock");
        let (start, end) = (log.log_start_offset(), log.log_end_offset());
        if op % 2 == 1 {
            let to = (end - 1 - (op as i64 % 5)).max(start);
            say(&format!("truncating {to}"));
            let new_end = log
                .truncate_to(to)
                .unwrap_or_else(|error| fail("truncate_to", error));
            say(&format!("truncate {new_end}"));
        } else {
            let to = (start + 1 + (op as i64 % 7)).min(end);
            say(&format!("deleting {to}"));
            log.delete_records_before(to)
                .unwrap_or_else(|error| fail("delete_records_before", error));
            say(&format!("delete {to}"));
        }
    }
    unreachable!("the operations loop ends only when the parent kills the child")
}

/// Ends the child on an error: the parent then reports its stderr.
fn fail(what: &str, error: partlog::Error) -> ! {
    eprintln!("child: {what} failed: {error}");
    std::process::exit(3)
}

fn env_number(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    Some(
        value
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value:?} is not a number")),
    )
}
