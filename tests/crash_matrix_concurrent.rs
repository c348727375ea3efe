//! The concurrent crash matrix: the operations of tests/crash_matrix.rs, run by several threads at
//! once on one log, with a simulated machine crash at a random storage operation.
//!
//! A case (one seed) picks a variant (a compacted log, or a delete-policy one with or without
//! `retention.bytes`), a flush policy and a segment size, and gives each thread a seeded list of
//! operations:
//! - the appender: `append` of 1 to 3 records, then, half the time, `wait_durable` of the last;
//! - the producer: bursts of 1 to 4 `send`s through a `Producer` with `acks=all`, a `flush`, then
//!   a wait on every handle (`linger.ms` is far beyond anything the manual clock reaches, so a
//!   burst is exactly one batch);
//! - the durable reader: `records(position, ReadBound::Durable)`, noting every record it sees;
//! - the truncator: `truncate_to` near the end or deep into sealed segments, and
//!   `delete_records_before`;
//! - the maintainer: `compact` (compacted variant), `enforce_retention`, and clock steps that
//!   roll segments by `segment.ms` and move the flusher's recovery-point timer;
//! - the follower (delete-policy variants): `append_as_follower` calls at the log end, each
//!   holding two transactional producers' batches, COMMITs and ABORTs and plain records
//!   interleaved ([`follower`]); after the crash the committed records must be what a replay of
//!   the surviving batches leaves ([`check_follower_transactions`]);
//! - the holder: bursts of 1 to 3 `send`s through a second `acks=all` `Producer`, each flushed,
//!   whose handles it first polls only after the truncator's next truncation (or once the
//!   truncator is done): a truncation that cut above them, or one before their append, must
//!   leave them acknowledged (issue 29, item 13);
//! - and the log's own flusher thread, always running.
//!
//! A dry run counts the simulator's state-changing operations (creates, writes, `set_len`s,
//! syncs, directory syncs, renames, removes); then the case runs three more times, each crashing
//! just before one of them drawn from the seed (a random legal crash image). The dry run itself
//! ends with a crash too, after every thread is done. The threads' log runs on [`Fenced`]
//! storage, which fails every operation from the crash on: the simulator kills only handles,
//! and a dead log that went on renaming and removing files by path would change the image the
//! next open recovers, which no crashed machine does (the finding of seed 8172). After each
//! crash `verify_dir` must find no corruption, the log must open under `RecoveryMode::Fail`,
//! and:
//! - every acknowledged record (its `wait_durable` or its `acks=all` handle returned `Ok`, or its
//!   append did under `FlushPolicy::EveryAppend`) is at its offset with its bytes;
//! - every record the durable reader saw is at the offset it saw it at, with the same bytes;
//! - ... unless an operation that may have taken effect after the record was appended (for a
//!   seen record: after the read began) can have removed it: a truncation that returned a new
//!   end at or below it, or one that had not returned (cut short by the crash) whose target is at
//!   or below its batch's last offset (a straddling batch goes whole); a `delete_records_before`
//!   above it or a retention pass, with the record below the recovered log start; a compaction
//!   pass, when a record of its key was appended before the pass ended at a higher (or unknown)
//!   offset, or the record is a tombstone (`delete.retention.ms` is 0). An operation that had not
//!   returned at the crash may or may not have happened, so it may excuse a loss but never
//!   demands one;
//! - every record there is one that some thread appended, at the offset its append reported
//!   (nothing truncated comes back at another offset, nothing torn: every read is CRC-checked),
//!   and without compaction the offsets run gap-free from the log start to the end;
//! - the log start offset is no higher than a `delete_records_before` or a retention pass that
//!   started could have set it;
//! - no operation failed before the crash with an error its race does not explain (a reader
//!   racing a truncation gets `Error::Truncated`, or `OffsetOutOfRange` below a moved start; a
//!   durability wait and a producer `flush` may get either when a truncation took an offset
//!   they wait for, a flush only when it took the burst's batch; a compaction pass whose reads
//!   meet a truncation gets `Error::Truncated`), and the log takes an append at its end and
//!   closes into a state that `verify_dir` finds clean;
//! - every `Error::Truncated { at }` a durability wait, an `acks=all` handle or a `flush` met
//!   before the crash names a truncation that ran while it waited (from the append, for a
//!   handle) and cut the log at `at`, at or below the wait's offset where it is known: a
//!   truncation that cut above it never fails it.
//!
//! Ordering comes from one global sequence counter: every operation takes a number when it starts
//! and another when it returns, so "returned before that append started" is exact, and the op
//! log printed on a failure is the interleaving that happened.
//!
//! Replay: a failure prints `PARTLOG_CRASH_MATRIX_CONCURRENT_SEED=<seed>` and
//! `PARTLOG_CRASH_MATRIX_CONCURRENT_CRASH_AT=<kind>:<n>`; setting both runs just that case and
//! crash point (the seed alone re-runs the whole case, whose crash points are then drawn
//! against the new dry run's counts). Deterministic from the seed: the variant, every thread's
//! operations and records, and the crash image's random choices; with `CRASH_AT`, the crash
//! point as a kind of operation and its ordinal. Not deterministic: how the threads interleave
//! (real threads on a real scheduler), so the state the nth operation meets, and which thread
//! makes it, vary from run to run. A replay reproduces the race only as often as the scheduler
//! does; the op log shows the interleaving that failed, which is usually enough to write a
//! deterministic test (as the scripted ones below are).
//!
//! Scale: `PARTLOG_CRASH_MATRIX_CONCURRENT_CASES` (default 24) cases from seed
//! `PARTLOG_CRASH_MATRIX_CONCURRENT_FIRST_SEED` (default 0), or as many as fit in
//! `PARTLOG_CRASH_MATRIX_CONCURRENT_SECS` seconds; each case is a dry run and
//! three crashes. `PARTLOG_CRASH_MATRIX_CONCURRENT_VERBOSE` prints every run's op log.
//!
//! The scripted tests at the end put operations together on purpose: a storage hook runs a
//! truncation, a refill, `delete_records_before` and a retention pass inside a compaction pass
//! while `acks=all` handles are outstanding, and the scenario is crashed at every
//! state-changing operation of its dry run, as tests/crash_matrix.rs does.
#![cfg(feature = "sim")] // the simulator and the manual clock: `cargo test --all-features`

#[path = "common/fenced.rs"]
mod fenced_storage;
#[path = "common/rng.rs"]
mod rng;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use fenced_storage::Fenced;
use rng::Rng;

use partlog::unstable::format::build_control_batch;
use partlog::unstable::sim::{CrashConfig, FaultOp, FaultRule, SimStats};
use partlog::unstable::{
    CanonicalPath, FileLock, LockMode, ManualClock, Metadata, OpenMode, SimStorage, Storage,
    StorageFile,
};
use partlog::{
    Acks, BatchBuilder, CleanupPolicy, Compression, ControlRecordType, Error, FlushPolicy, Log,
    LogConfig, LogRecord, NewRecord, Producer, ProducerConfig, ReadBound, RecoveryMode, SendHandle,
    Severity, Workers, verify_dir,
};

const T0: i64 = 1_700_000_000_000;
const DIR: &str = "/concurrent/topic-0";
const SEGMENT_MS: i64 = 60_000;
const KEYS: u64 = 5;
/// The most records one append or one producer burst holds: the farthest a record can lie below
/// the last offset of its batch.
const MAX_GROUP: i64 = 4;
/// Longer than any case moves the manual clock: the producer seals a batch only at `flush`.
const LINGER_MS: u64 = 1 << 40;
/// Crash runs after each dry run.
const CRASHES_PER_CASE: usize = 3;

/// A case's generator for one stream of draws (a thread, a phase): seeded from the case's seed
/// and the stream, its first draw skipped.
fn seeded(seed: u64, stream: u64) -> Rng {
    let mut rng = Rng::new(seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03));
    rng.next();
    rng
}

/// The threads of a case (the log's flusher runs besides them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    Appender,
    Producer,
    Reader,
    Truncator,
    Maintainer,
    Follower,
    Holder,
}

impl Who {
    fn stream(self) -> u64 {
        self as u64 + 1
    }
}

/// One case: everything a seed decides.
#[derive(Debug, Clone)]
struct Case {
    seed: u64,
    compacted: bool,
    /// 0: OS decides, 1: every append, 2: every 3 messages.
    flush: u8,
    segment_bytes: u32,
    /// -1, or a size that makes retention delete acknowledged records (delete variant).
    retention_bytes: i64,
    appends: usize,
    bursts: usize,
    cuts: usize,
    passes: usize,
    /// The flusher runs on a shared `Workers` pool (the pooled variant), not its own thread.
    pooled: bool,
}

/// The pool of the pooled variant, shared by every log it opens, as in a process of many logs.
fn shared_workers() -> Workers {
    static WORKERS: std::sync::OnceLock<Workers> = std::sync::OnceLock::new();
    WORKERS
        .get_or_init(|| Workers::new(2).expect("a pool"))
        .clone()
}

impl Case {
    fn from_seed(seed: u64) -> Case {
        let mut rng = seeded(seed, 0);
        let compacted = rng.chance(50);
        Case {
            seed,
            compacted,
            flush: rng.below(3) as u8,
            segment_bytes: [1024, 1536][rng.below(2) as usize],
            retention_bytes: if !compacted && rng.chance(50) {
                3072
            } else {
                -1
            },
            appends: 12 + rng.below(16) as usize,
            bursts: 4 + rng.below(8) as usize,
            cuts: 3 + rng.below(5) as usize,
            passes: 4 + rng.below(8) as usize,
            pooled: false,
        }
    }

    fn config(&self, sim: &SimStorage, clock: &Arc<ManualClock>) -> LogConfig {
        self.config_on(Arc::new(sim.clone()), clock)
    }

    fn config_on(&self, storage: Arc<dyn Storage>, clock: &Arc<ManualClock>) -> LogConfig {
        let builder = LogConfig::builder_for_tests();
        let builder = if self.pooled {
            builder.workers(shared_workers())
        } else {
            builder
        };
        builder
            .segment_bytes(self.segment_bytes)
            .segment_ms(SEGMENT_MS)
            .index_interval_bytes(128)
            .segment_index_bytes(96)
            .cleanup_policy(if self.compacted {
                CleanupPolicy::COMPACT
            } else {
                CleanupPolicy::DELETE
            })
            .retention_ms(-1)
            .retention_bytes(self.retention_bytes)
            .delete_retention_ms(0)
            .flush_policy(match self.flush {
                0 => FlushPolicy::OsDecides,
                1 => FlushPolicy::EveryAppend,
                _ => FlushPolicy::EveryMessages(std::num::NonZeroU64::new(3).unwrap()),
            })
            .recovery_point_ms(1)
            .recovery_mode(RecoveryMode::Fail)
            .storage(storage)
            .clock(clock.clone())
            .build()
            .unwrap()
    }
}

/// One record as the test wrote it. The timestamp is unique per record (thread and sequence
/// number), so it names the record; it is far enough in the past that no time rule applies.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rec {
    key: Vec<u8>,
    value: Option<Vec<u8>>,
    timestamp: i64,
}

impl Rec {
    fn make(who: Who, n: u64, rng: &mut Rng, compacted: bool) -> Rec {
        let tombstone = compacted && rng.chance(10);
        Rec {
            key: format!("k{}", rng.below(KEYS)).into_bytes(),
            value: (!tombstone)
                .then(|| format!("{who:?}/{n}/{}", "v".repeat((n % 23) as usize)).into_bytes()),
            timestamp: T0 - 1_000_000 + (n as i64) * 8 + who as i64,
        }
    }

    fn from_log(record: LogRecord) -> Rec {
        Rec {
            key: record.key.unwrap_or_default(),
            value: record.value,
            timestamp: record.timestamp,
        }
    }

    fn new_record(&self) -> NewRecord {
        NewRecord::new(self.timestamp, Some(&self.key), self.value.as_deref())
    }

    fn describe(&self) -> String {
        match &self.value {
            Some(value) => String::from_utf8_lossy(value).chars().take(16).collect(),
            None => format!("tombstone {}", String::from_utf8_lossy(&self.key)),
        }
    }
}

/// A record some thread tried to append.
#[derive(Debug, Clone)]
struct Attempt {
    rec: Rec,
    /// The sequence number its append (or send) started at.
    start: u64,
    /// Its offset, once an append or a handle reported it.
    offset: Option<i64>,
    /// The last offset of its batch, when known.
    group_last: Option<i64>,
}

/// A record that must survive: acknowledged durable, or seen by the durable reader.
#[derive(Debug, Clone)]
struct Durable {
    offset: i64,
    rec: Rec,
    /// Operations that ended before this sequence number cannot have removed it.
    since: u64,
    group_last: Option<i64>,
    /// How it came to be required: which acknowledgement, or the durable reader.
    how: &'static str,
}

/// An operation that may remove records.
#[derive(Debug, Clone)]
enum CutKind {
    /// `truncate_to(to)`: `new_end` if it returned.
    Truncate {
        to: i64,
        new_end: Option<i64>,
    },
    DeleteBefore {
        to: i64,
    },
    /// `enforce_retention`: the log start it reported, if it returned.
    Retention {
        start: Option<i64>,
    },
    Compact,
}

#[derive(Debug, Clone)]
struct Cut {
    kind: CutKind,
    start: u64,
    end: u64,
}

/// One line of the op log.
#[derive(Debug, Clone)]
struct Entry {
    start: u64,
    end: u64,
    who: Who,
    index: usize,
    what: String,
    outcome: String,
}

/// What one thread did.
#[derive(Debug, Default)]
struct Journal {
    entries: Vec<Entry>,
    attempts: Vec<Attempt>,
    durable: Vec<Durable>,
    cuts: Vec<Cut>,
    /// Errors no race explains, met before the crash.
    failures: Vec<String>,
    /// The `Truncated` errors of durability waits met before the crash, to match against the
    /// truncations ([`History::check_claims`]).
    claims: Vec<Claim>,
}

/// A durability wait (or an `acks=all` handle, or a `flush`) that ended in
/// `Error::Truncated { at }` before the crash: some truncation that ran between `since` (its
/// append began, or the wait, for `wait_durable`) and `until` must have cut the log at `at`,
/// and at or below `offset` when it is known.
#[derive(Debug, Clone)]
struct Claim {
    what: String,
    at: i64,
    offset: Option<i64>,
    since: u64,
    until: u64,
}

/// Notes `error` of a durability wait as a [`Claim`] if it is `Truncated` and the machine has
/// not crashed.
fn claim(
    journal: &mut Journal,
    ctx: &Ctx<'_>,
    what: &str,
    error: &Error,
    offset: Option<i64>,
    since: u64,
) {
    if let Error::Truncated { at } = error
        && !ctx.crashed()
    {
        journal.claims.push(Claim {
            what: what.to_string(),
            at: *at,
            offset,
            since,
            until: ctx.tick(),
        });
    }
}

/// What the threads share while a run goes.
struct Ctx<'a> {
    case: &'a Case,
    log: &'a Arc<Log>,
    sim: &'a SimStorage,
    clock: &'a ManualClock,
    seq: AtomicU64,
    /// Appender and producer threads still going: the others pace themselves on them.
    writers: AtomicUsize,
    /// Held by the follower across its read of the log end and its call, and by the truncator
    /// across `truncate_to`: a call built at an end a truncation then lowered would land above
    /// the new end and leave a gap.
    follower_gate: std::sync::Mutex<()>,
    /// `truncate_to` calls the truncator has finished, and whether it is done: the holder
    /// waits on them.
    truncations_done: AtomicUsize,
    truncator_done: std::sync::atomic::AtomicBool,
}

impl Ctx<'_> {
    fn tick(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::SeqCst)
    }

    fn crashed(&self) -> bool {
        self.sim.stats().crashes > 0
    }

    /// Blocks until the log end reaches `target`, the writers are done, or a crash or
    /// truncation makes it moot. The timeout only bounds each wait between re-checks.
    fn pace(&self, target: i64) {
        while self.writers.load(Ordering::SeqCst) > 0 && self.log.log_end_offset() < target {
            match self.log.wait_for_data(target - 1, Duration::from_millis(5)) {
                Ok(true) => return,
                Ok(false) if !self.crashed() => {}
                _ => return,
            }
        }
    }
}

impl Journal {
    fn entry(&mut self, who: Who, index: usize, span: (u64, u64), what: String, outcome: String) {
        self.entries.push(Entry {
            start: span.0,
            end: span.1,
            who,
            index,
            what,
            outcome,
        });
    }

    /// Notes `error` from `what`; true if the thread should stop (a crash, or a failure).
    fn error(&mut self, ctx: &Ctx<'_>, what: &str, error: &Error, allowed: bool) -> bool {
        if ctx.crashed() {
            return true;
        }
        if allowed {
            return false;
        }
        self.failures
            .push(format!("{what} failed without a crash: {error:?}"));
        true
    }
}

/// The errors a race with a truncation (or a moved start) explains.
fn raced(error: &Error) -> bool {
    matches!(
        error,
        Error::Truncated { .. } | Error::OffsetOutOfRange { .. }
    )
}

fn appender(ctx: &Ctx<'_>) -> Journal {
    let who = Who::Appender;
    let mut rng = seeded(ctx.case.seed, who.stream());
    let mut journal = Journal::default();
    let mut n = 0;
    for index in 0..ctx.case.appends {
        let recs: Vec<Rec> = (0..1 + rng.below(3))
            .map(|_| {
                n += 1;
                Rec::make(who, n, &mut rng, ctx.case.compacted)
            })
            .collect();
        let wait = rng.chance(50);
        let records: Vec<NewRecord> = recs.iter().map(Rec::new_record).collect();
        let start = ctx.tick();
        let result = ctx.log.append(&records);
        let end = ctx.tick();
        let what = format!("append {}", recs.len());
        let info = match result {
            Ok(info) => info,
            Err(error) => {
                for rec in recs {
                    journal.attempts.push(Attempt {
                        rec,
                        start,
                        offset: None,
                        group_last: None,
                    });
                }
                journal.entry(who, index, (start, end), what, format!("{error}"));
                // A flush policy that syncs on append waits for durability like wait_durable.
                if journal.error(ctx, "append", &error, raced(&error)) {
                    break;
                }
                continue;
            }
        };
        let synced = ctx.case.flush == 1;
        for (i, rec) in recs.iter().enumerate() {
            let offset = info.first_offset + i as i64;
            journal.attempts.push(Attempt {
                rec: rec.clone(),
                start,
                offset: Some(offset),
                group_last: Some(info.last_offset),
            });
            if synced {
                journal.durable.push(Durable {
                    offset,
                    rec: rec.clone(),
                    since: start,
                    group_last: Some(info.last_offset),
                    how: "acknowledged (EveryAppend)",
                });
            }
        }
        journal.entry(
            who,
            index,
            (start, end),
            what,
            format!("{}..={}", info.first_offset, info.last_offset),
        );
        if !wait {
            continue;
        }
        let wait_start = ctx.tick();
        let result = ctx.log.wait_durable(info.last_offset);
        let wait_end = ctx.tick();
        let what = format!("wait_durable {}", info.last_offset);
        match result {
            Ok(()) => {
                for (i, rec) in recs.iter().enumerate() {
                    journal.durable.push(Durable {
                        offset: info.first_offset + i as i64,
                        rec: rec.clone(),
                        since: start,
                        group_last: Some(info.last_offset),
                        how: "acknowledged (wait_durable)",
                    });
                }
                journal.entry(who, index, (wait_start, wait_end), what, "ok".into());
            }
            Err(error) => {
                claim(
                    &mut journal,
                    ctx,
                    &what,
                    &error,
                    Some(info.last_offset),
                    wait_start,
                );
                journal.entry(who, index, (wait_start, wait_end), what, format!("{error}"));
                if journal.error(ctx, "wait_durable", &error, raced(&error)) {
                    break;
                }
            }
        }
    }
    ctx.writers.fetch_sub(1, Ordering::SeqCst);
    journal
}

fn producer(ctx: &Ctx<'_>, producer: &Producer) -> Journal {
    let who = Who::Producer;
    let mut rng = seeded(ctx.case.seed, who.stream());
    let mut journal = Journal::default();
    let mut n = 0;
    'bursts: for index in 0..ctx.case.bursts {
        let recs: Vec<Rec> = (0..1 + rng.below(MAX_GROUP as u64))
            .map(|_| {
                n += 1;
                Rec::make(who, n, &mut rng, ctx.case.compacted)
            })
            .collect();
        let start = ctx.tick();
        let mut handles: Vec<(Rec, SendHandle)> = Vec::new();
        let mut stop = false;
        for rec in &recs {
            match producer.send(&rec.new_record()) {
                Ok(handle) => handles.push((rec.clone(), handle)),
                Err(error) => {
                    journal.attempts.push(Attempt {
                        rec: rec.clone(),
                        start,
                        offset: None,
                        group_last: None,
                    });
                    stop |= journal.error(ctx, "send", &error, false);
                    break;
                }
            }
        }
        let flushed = producer.flush();
        let sent = handles.len() as i64;
        let mut outcomes = Vec::new();
        let mut results = Vec::new();
        for (rec, handle) in handles {
            let result = handle.wait();
            outcomes.push(match &result {
                Ok(offset) => offset.to_string(),
                Err(error) => format!("{error}"),
            });
            results.push((rec, result));
        }
        let end = ctx.tick();
        // A burst is one batch, the producer's latest: `flush` waits for its last offset, so
        // only a truncation that took the batch (and so fails its handles) explains a failed
        // flush.
        let burst_cut = results
            .iter()
            .any(|(_, result)| result.as_ref().is_err_and(raced));
        for (i, (rec, result)) in results.into_iter().enumerate() {
            match result {
                Ok(offset) => {
                    // One burst is one batch: its first offset is this one's less its index.
                    let group_last = offset - i as i64 + sent - 1;
                    journal.attempts.push(Attempt {
                        rec: rec.clone(),
                        start,
                        offset: Some(offset),
                        group_last: Some(group_last),
                    });
                    journal.durable.push(Durable {
                        offset,
                        rec,
                        since: start,
                        group_last: Some(group_last),
                        how: "acknowledged (acks=all handle)",
                    });
                }
                Err(error) => {
                    claim(&mut journal, ctx, "a send handle", &error, None, start);
                    journal.attempts.push(Attempt {
                        rec,
                        start,
                        offset: None,
                        group_last: None,
                    });
                    stop |= journal.error(ctx, "a send handle", &error, raced(&error));
                }
            }
        }
        let flush_outcome = match &flushed {
            Ok(()) => "ok".to_string(),
            Err(error) => format!("{error}"),
        };
        if let Err(error) = &flushed {
            claim(&mut journal, ctx, "producer flush", error, None, start);
            stop |= journal.error(ctx, "producer flush", error, burst_cut && raced(error));
        }
        journal.entry(
            who,
            index,
            (start, end),
            format!("send {} + flush + wait", recs.len()),
            format!("flush {flush_outcome}; handles [{}]", outcomes.join(", ")),
        );
        if stop {
            break 'bursts;
        }
    }
    ctx.writers.fetch_sub(1, Ordering::SeqCst);
    journal
}

/// The holder (issue 29, item 13): bursts through its own `acks=all` producer, each flushed,
/// whose handles it polls only once the truncator has finished another truncation (or is
/// done). A handle fails only if a truncation since its append cut at or below it
/// ([`History::check_claims`]); one that cut above it, or came before it, leaves it
/// acknowledged, and then it must survive like any acknowledged record.
fn holder(ctx: &Ctx<'_>, producer: &Producer) -> Journal {
    let who = Who::Holder;
    let mut rng = seeded(ctx.case.seed, who.stream());
    let mut journal = Journal::default();
    let mut n = 0;
    for index in 0..ctx.case.bursts {
        let recs: Vec<Rec> = (0..1 + rng.below(3))
            .map(|_| {
                n += 1;
                Rec::make(who, n, &mut rng, ctx.case.compacted)
            })
            .collect();
        let start = ctx.tick();
        let mut handles: Vec<(Rec, SendHandle)> = Vec::new();
        let mut stop = false;
        for rec in &recs {
            match producer.send(&rec.new_record()) {
                Ok(handle) => handles.push((rec.clone(), handle)),
                Err(error) => {
                    journal.attempts.push(Attempt {
                        rec: rec.clone(),
                        start,
                        offset: None,
                        group_last: None,
                    });
                    stop |= journal.error(ctx, "send (holder)", &error, false);
                    break;
                }
            }
        }
        let flushed = producer.flush();
        if let Err(error) = &flushed {
            claim(&mut journal, ctx, "holder flush", error, None, start);
            stop |= journal.error(ctx, "holder flush", error, raced(error));
        }
        // Hold the handles across the truncator's next truncation.
        let seen = ctx.truncations_done.load(Ordering::SeqCst);
        while ctx.truncations_done.load(Ordering::SeqCst) == seen
            && !ctx.truncator_done.load(Ordering::SeqCst)
            && !ctx.crashed()
        {
            std::thread::yield_now();
        }
        let sent = handles.len() as i64;
        let mut outcomes = Vec::new();
        for (i, (rec, handle)) in handles.into_iter().enumerate() {
            match handle.wait() {
                Ok(offset) => {
                    outcomes.push(offset.to_string());
                    let group_last = offset - i as i64 + sent - 1;
                    journal.attempts.push(Attempt {
                        rec: rec.clone(),
                        start,
                        offset: Some(offset),
                        group_last: Some(group_last),
                    });
                    journal.durable.push(Durable {
                        offset,
                        rec,
                        since: start,
                        group_last: Some(group_last),
                        how: "acknowledged (held acks=all handle)",
                    });
                }
                Err(error) => {
                    outcomes.push(format!("{error}"));
                    claim(&mut journal, ctx, "a held send handle", &error, None, start);
                    journal.attempts.push(Attempt {
                        rec,
                        start,
                        offset: None,
                        group_last: None,
                    });
                    stop |= journal.error(ctx, "a held send handle", &error, raced(&error));
                }
            }
        }
        let end = ctx.tick();
        let flush_outcome = match &flushed {
            Ok(()) => "ok".to_string(),
            Err(error) => format!("{error}"),
        };
        journal.entry(
            who,
            index,
            (start, end),
            format!(
                "send {} + flush, hold across a truncation, wait",
                recs.len()
            ),
            format!("flush {flush_outcome}; handles [{}]", outcomes.join(", ")),
        );
        if stop {
            break;
        }
    }
    journal
}

fn reader(ctx: &Ctx<'_>) -> Journal {
    let who = Who::Reader;
    let mut journal = Journal::default();
    let mut position = ctx.log.log_start_offset();
    let mut index = 0;
    // Bounds the spinning of a reader whose position is not durable yet.
    for _ in 0..20_000 {
        let writers_done = ctx.writers.load(Ordering::SeqCst) == 0;
        let start = ctx.tick();
        let mut got = Vec::new();
        let mut failed = None;
        for record in ctx.log.records(position, ReadBound::Durable).take(8) {
            match record {
                Ok(record) => got.push(record),
                Err(error) => {
                    failed = Some(error);
                    break;
                }
            }
        }
        let end = ctx.tick();
        let read_from = position;
        if let (Some(first), Some(last)) = (got.first(), got.last()) {
            journal.entry(
                who,
                index,
                (start, end),
                format!("records({read_from}, Durable)"),
                format!("{}..={}", first.offset, last.offset),
            );
            index += 1;
            position = last.offset + 1;
        }
        for record in got {
            let offset = record.offset;
            journal.durable.push(Durable {
                offset,
                rec: Rec::from_log(record),
                since: start,
                group_last: None,
                how: "seen by the durable reader",
            });
        }
        match failed {
            None => {}
            Some(error) => {
                journal.entry(
                    who,
                    index,
                    (start, end),
                    format!("records({read_from}, Durable)"),
                    format!("{error}"),
                );
                index += 1;
                if journal.error(ctx, "a durable read", &error, raced(&error)) {
                    break;
                }
                // Raced a truncation or a moved start: go on from where the log is now.
                let (log_start, log_end) = (ctx.log.log_start_offset(), ctx.log.log_end_offset());
                position = position.min(log_end).max(log_start);
                continue;
            }
        }
        if writers_done && position >= ctx.log.durable_offset().min(ctx.log.log_end_offset()) {
            break;
        }
        if ctx.log.log_end_offset() > position {
            // Written but not durable yet: the flusher or a writer's wait will sync it.
            std::thread::yield_now();
        } else if let Err(error) = ctx.log.wait_for_data(position, Duration::from_millis(5)) {
            journal.error(ctx, "wait_for_data", &error, false);
            break;
        }
    }
    journal
}

fn truncator(ctx: &Ctx<'_>) -> Journal {
    let who = Who::Truncator;
    let mut rng = seeded(ctx.case.seed, who.stream());
    let mut journal = Journal::default();
    let mut last_end = 0;
    for index in 0..ctx.case.cuts {
        ctx.pace(last_end + 4 + rng.below(12) as i64);
        let (log_start, end) = (ctx.log.log_start_offset(), ctx.log.log_end_offset());
        last_end = end;
        let choice = rng.below(10);
        let start = ctx.tick();
        if choice < 8 {
            let to = if choice < 5 {
                (end - rng.below(12) as i64).max(log_start)
            } else {
                log_start + rng.below((end - log_start + 1) as u64) as i64
            };
            let result = {
                let _gate = ctx.follower_gate.lock().unwrap_or_else(|e| e.into_inner());
                ctx.log.truncate_to(to)
            };
            let finish = ctx.tick();
            journal.cuts.push(Cut {
                kind: CutKind::Truncate {
                    to,
                    new_end: result.as_ref().ok().copied(),
                },
                start,
                end: finish,
            });
            let outcome = match &result {
                Ok(new_end) => format!("new end {new_end}"),
                Err(error) => format!("{error}"),
            };
            journal.entry(
                who,
                index,
                (start, finish),
                format!("truncate_to {to}"),
                outcome,
            );
            ctx.truncations_done.fetch_add(1, Ordering::SeqCst);
            if let Err(error) = result
                && journal.error(ctx, "truncate_to", &error, false)
            {
                break;
            }
        } else {
            let to = log_start + (end - log_start) * rng.below(9) as i64 / 8;
            let result = ctx.log.delete_records_before(to);
            let finish = ctx.tick();
            journal.cuts.push(Cut {
                kind: CutKind::DeleteBefore { to },
                start,
                end: finish,
            });
            let outcome = match &result {
                Ok(()) => "ok".to_string(),
                Err(error) => format!("{error}"),
            };
            journal.entry(
                who,
                index,
                (start, finish),
                format!("delete_records_before {to}"),
                outcome,
            );
            // A truncation may have taken the end below `to` since it was read.
            if let Err(error) = result
                && journal.error(ctx, "delete_records_before", &error, raced(&error))
            {
                break;
            }
        }
    }
    ctx.truncator_done.store(true, Ordering::SeqCst);
    journal
}

fn maintainer(ctx: &Ctx<'_>) -> Journal {
    let who = Who::Maintainer;
    let mut rng = seeded(ctx.case.seed, who.stream());
    let mut journal = Journal::default();
    let mut last_end = 0;
    for index in 0..ctx.case.passes {
        ctx.pace(last_end + 3 + rng.below(10) as i64);
        last_end = ctx.log.log_end_offset();
        let choice = rng.below(8);
        let start = ctx.tick();
        let (what, kind, result) = if choice < 2 {
            // Rolls by segment.ms, or just moves the flusher's recovery-point timer on.
            let step = if rng.chance(50) { SEGMENT_MS + 1 } else { 5 };
            ctx.clock.advance(step);
            (format!("clock +{step}ms"), None, Ok("ok".to_string()))
        } else if choice < 5 || !ctx.case.compacted {
            let result = ctx.log.enforce_retention();
            let start = result.as_ref().ok().map(|report| report.log_start_offset);
            let result = result.map(|report| {
                format!(
                    "{} segments, start {}",
                    report.segments_deleted(),
                    report.log_start_offset
                )
            });
            (
                "enforce_retention".to_string(),
                Some(CutKind::Retention { start }),
                result,
            )
        } else {
            let result = ctx.log.compact().map(|stats| {
                format!(
                    "{} segments cleaned, up to {}",
                    stats.segments_cleaned, stats.cleaned_up_to
                )
            });
            ("compact".to_string(), Some(CutKind::Compact), result)
        };
        let finish = ctx.tick();
        let compacting = matches!(kind, Some(CutKind::Compact));
        if let Some(kind) = kind {
            journal.cuts.push(Cut {
                kind,
                start,
                end: finish,
            });
        }
        let outcome = match &result {
            Ok(outcome) => outcome.clone(),
            Err(error) => format!("{error}"),
        };
        journal.entry(who, index, (start, finish), what.clone(), outcome);
        // A pass whose reads meet a truncation of the segment they read fails with Truncated
        // (nothing was cleaned; the next pass retries). One overtaken during its recovery-point
        // sync returns Ok with nothing cleaned.
        let raced_pass = compacting && matches!(result, Err(Error::Truncated { .. }));
        if let Err(error) = result
            && journal.error(ctx, &what, &error, raced_pass)
        {
            break;
        }
    }
    journal
}

/// The follower thread's transactional producers.
const FOLLOWER_PIDS: [i64; 2] = [3000, 3001];

/// The follower (delete-policy variants; issue 29): `append_as_follower` calls at the log end,
/// each holding 2 to 7 batches: transactional batches of two producers, their COMMIT and ABORT
/// markers, and plain records, interleaved as a leader's fetch brings them, so that one call
/// completes several producers' transactions. A call that met another thread's append (the end
/// moved: `UnexpectedAppendOffset`) wrote nothing and is built again at the new end; a
/// truncation waits for a call to end (`Ctx::follower_gate`). Its records are acknowledged as
/// the appender's are (`EveryAppend`, or a `wait_durable` half the time).
fn follower(ctx: &Ctx<'_>) -> Journal {
    let who = Who::Follower;
    let mut rng = seeded(ctx.case.seed, who.stream());
    let mut journal = Journal::default();
    if ctx.case.compacted {
        // Compaction removes aborted data and markers, which these checks do not follow (as
        // in tests/crash_matrix.rs, transactions run in the delete-policy variants only).
        return journal;
    }
    let mut n = 0;
    let mut sequences = [0i32; 2];
    let calls = 3 + rng.below(6) as usize;
    for index in 0..calls {
        ctx.pace(ctx.log.log_end_offset() + 2 + rng.below(6) as i64);
        let gate = ctx.follower_gate.lock().unwrap_or_else(|e| e.into_inner());
        let base = ctx.log.log_end_offset();
        let mut at = base;
        let mut call = Vec::new();
        // (offset, record, its batch's last offset)
        let mut recs: Vec<(i64, Rec, i64)> = Vec::new();
        let mut shape = Vec::new();
        for _ in 0..2 + rng.below(6) {
            let producer = rng.below(2) as usize;
            let producer_id = FOLLOWER_PIDS[producer];
            let choice = rng.below(6);
            let (builder, count) = if choice < 3 {
                let count = 1 + rng.below(3) as i64;
                let builder = BatchBuilder::new(Compression::None)
                    .producer(producer_id, 0, sequences[producer])
                    .transactional(true);
                sequences[producer] += count as i32;
                shape.push(format!("txn({producer_id})x{count}"));
                (builder, count)
            } else if choice < 5 {
                let kind = if rng.chance(50) {
                    ControlRecordType::Commit
                } else {
                    ControlRecordType::Abort
                };
                n += 1;
                call.extend(build_control_batch(
                    kind,
                    producer_id,
                    0,
                    0,
                    at,
                    T0 - 1_000_000 + (n as i64) * 8 + who as i64,
                ));
                shape.push(format!("{kind:?}({producer_id})"));
                at += 1;
                continue;
            } else {
                let count = 1 + rng.below(2) as i64;
                shape.push(format!("plain x{count}"));
                (BatchBuilder::new(Compression::None), count)
            };
            let mut builder = builder.base_offset(at);
            for offset in at..at + count {
                n += 1;
                let rec = Rec::make(who, n, &mut rng, false);
                builder.push(&rec.new_record());
                recs.push((offset, rec, at + count - 1));
            }
            call.extend(builder.build().expect("a valid batch"));
            at += count;
        }
        let start = ctx.tick();
        let result = ctx.log.append_as_follower(&call);
        let end = ctx.tick();
        drop(gate);
        let what = format!("append_as_follower {base}: {}", shape.join(" "));
        match result {
            Ok(info) => {
                journal.entry(
                    who,
                    index,
                    (start, end),
                    what,
                    format!("{}..={}", info.first_offset, info.last_offset),
                );
            }
            Err(Error::UnexpectedAppendOffset { .. }) if !ctx.crashed() => {
                // Another thread appended between the read of the end and the call.
                journal.entry(who, index, (start, end), what, "raced an append".into());
                continue;
            }
            Err(error) => {
                journal.entry(who, index, (start, end), what, format!("{error}"));
                // Cut short by the crash: its records may be there, at the offsets it gave.
                for (offset, rec, last) in recs {
                    journal.attempts.push(Attempt {
                        rec,
                        start,
                        offset: Some(offset),
                        group_last: Some(last),
                    });
                }
                journal.error(ctx, "append_as_follower", &error, false);
                break;
            }
        }
        for (offset, rec, last) in &recs {
            journal.attempts.push(Attempt {
                rec: rec.clone(),
                start,
                offset: Some(*offset),
                group_last: Some(*last),
            });
        }
        let wait = rng.chance(50);
        let waited = if wait && at > base {
            let wait_start = ctx.tick();
            let result = ctx.log.wait_durable(at - 1);
            let wait_end = ctx.tick();
            let outcome = match &result {
                Ok(()) => "ok".to_string(),
                Err(error) => format!("{error}"),
            };
            journal.entry(
                who,
                index,
                (wait_start, wait_end),
                format!("wait_durable {}", at - 1),
                outcome,
            );
            match result {
                Ok(()) => true,
                Err(error) => {
                    if journal.error(ctx, "wait_durable", &error, raced(&error)) {
                        break;
                    }
                    false
                }
            }
        } else {
            false
        };
        let how = if ctx.case.flush == 1 {
            "acknowledged (EveryAppend)"
        } else if waited {
            "acknowledged (wait_durable)"
        } else {
            continue;
        };
        for (offset, rec, last) in recs {
            journal.durable.push(Durable {
                offset,
                rec,
                since: start,
                group_last: Some(last),
                how,
            });
        }
    }
    journal
}

/// Everything the threads did, merged.
#[derive(Debug, Default)]
struct History {
    entries: Vec<Entry>,
    attempts: HashMap<i64, Attempt>,
    durable: Vec<Durable>,
    cuts: Vec<Cut>,
    failures: Vec<String>,
    claims: Vec<Claim>,
}

impl History {
    fn merge(journals: Vec<Journal>) -> History {
        let mut history = History::default();
        for journal in journals {
            history.entries.extend(journal.entries);
            for attempt in journal.attempts {
                history.attempts.insert(attempt.rec.timestamp, attempt);
            }
            history.durable.extend(journal.durable);
            history.cuts.extend(journal.cuts);
            history.failures.extend(journal.failures);
            history.claims.extend(journal.claims);
        }
        history.entries.sort_by_key(|entry| entry.start);
        history
    }

    /// The interleaving, one operation a line.
    fn op_log(&self) -> String {
        let mut out = String::new();
        for e in &self.entries {
            out.push_str(&format!(
                "  [{:>5}..{:>5}] {:?}#{} {} -> {}\n",
                e.start, e.end, e.who, e.index, e.what, e.outcome
            ));
        }
        out
    }

    /// Why `record` may be missing from the recovered log, if it may be.
    fn excuse(
        &self,
        compacted: bool,
        record: &Durable,
        recovered_start: i64,
        recovered: &BTreeMap<i64, Rec>,
    ) -> Option<String> {
        let offset = record.offset;
        if compacted
            && recovered
                .range(offset + 1..)
                .any(|(_, later)| later.key == record.rec.key)
        {
            return Some("a later record of its key survives".into());
        }
        let group_last = record
            .group_last
            .or_else(|| {
                let attempt = self.attempts.get(&record.rec.timestamp)?;
                attempt
                    .group_last
                    .filter(|_| attempt.offset == Some(offset))
            })
            .unwrap_or(offset + MAX_GROUP - 1);
        for cut in self.cuts.iter().filter(|cut| cut.end >= record.since) {
            let excused = match &cut.kind {
                CutKind::Truncate {
                    new_end: Some(new_end),
                    ..
                } => offset >= *new_end,
                CutKind::Truncate { to, new_end: None } => group_last >= *to,
                CutKind::DeleteBefore { to } => offset < *to && offset < recovered_start,
                CutKind::Retention { start } => {
                    offset < recovered_start && start.is_none_or(|start| offset < start)
                }
                CutKind::Compact => {
                    compacted
                        && (record.rec.value.is_none()
                            || self.attempts.values().any(|other| {
                                other.rec.key == record.rec.key
                                    && other.rec.timestamp != record.rec.timestamp
                                    && other.start < cut.end
                                    && other.offset.is_none_or(|o| o > offset)
                            }))
                }
            };
            if excused {
                return Some(format!("{:?} [{}..{}]", cut.kind, cut.start, cut.end));
            }
        }
        None
    }

    /// Checks every [`Claim`]: a truncation that ran while it waited cut the log at its `at`
    /// (one cut short by the crash, at or below its target), at or below its offset if known.
    fn check_claims(&self) -> Result<(), Failure> {
        for claim in &self.claims {
            let explained = self.cuts.iter().any(|cut| {
                let cut_there = match cut.kind {
                    CutKind::Truncate {
                        new_end: Some(new_end),
                        ..
                    } => new_end == claim.at,
                    CutKind::Truncate { to, new_end: None } => claim.at <= to,
                    _ => false,
                };
                cut_there
                    && cut.start < claim.until
                    && cut.end > claim.since
                    && claim.offset.is_none_or(|offset| claim.at <= offset)
            });
            if !explained {
                return Err(format!(
                    "{} [{}..{}] ended in Truncated {{ at: {} }} (offset {:?}), but no \
                     truncation that ran meanwhile cut the log there",
                    claim.what, claim.since, claim.until, claim.at, claim.offset
                ));
            }
        }
        Ok(())
    }

    /// The highest log start the operations that started could have set.
    fn max_start(&self) -> i64 {
        let mut max = 0;
        for cut in &self.cuts {
            match cut.kind {
                CutKind::DeleteBefore { to } => max = max.max(to),
                CutKind::Retention { start: Some(start) } => max = max.max(start),
                // A pass cut short may have deleted segments and moved the start to any base.
                CutKind::Retention { start: None } => return i64::MAX,
                _ => {}
            }
        }
        max
    }
}

/// Why a run failed.
type Failure = String;

/// Totals over the runs of this process, for the summary line: how the checks were met.
static CRASHED_MID_RUN: AtomicU64 = AtomicU64::new(0);
static DURABLE_FOUND: AtomicU64 = AtomicU64::new(0);
static DURABLE_EXCUSED: AtomicU64 = AtomicU64::new(0);

macro_rules! check {
    ($cond:expr, $($arg:tt)*) => {
        if !$cond {
            return Err(format!($($arg)*));
        }
    };
}

/// Runs `case` (crashing just before the `nth` operation of kind `op`, or after everything when
/// `None`), then checks the recovered log. Returns the simulator's counters at the crash.
fn run_case(case: &Case, crash_at: Option<(FaultOp, u64)>) -> Result<SimStats, Failure> {
    let clock = Arc::new(ManualClock::new(T0));
    let sim = SimStorage::new(case.seed).with_clock(clock.clone());
    if let Some((op, nth)) = crash_at {
        let image = CrashConfig::random().seed(case.seed ^ nth.rotate_left(17) ^ op as u64);
        sim.inject(FaultRule::crash(op, nth).crash_config(image));
    }
    let config = case.config(&sim, &clock);
    // The threads' log dies with the machine: nothing it does after the crash reaches the disk.
    let fenced = Arc::new(Fenced::new(Arc::new(sim.clone()), sim.clone()));
    let history = match Log::open(DIR, case.config_on(fenced, &clock)) {
        Ok(log) => {
            let log = Arc::new(log);
            let history = run_threads(case, &log, &sim, &clock)?;
            if sim.stats().crashes > 0 {
                CRASHED_MID_RUN.fetch_add(1, Ordering::Relaxed);
            } else {
                sim.clear_faults();
                sim.crash_with(&CrashConfig::random().seed(case.seed.rotate_left(7)));
            }
            // The dead log's drop fails quietly: its handles died with the machine.
            drop(log);
            history
        }
        Err(error) => {
            check!(
                sim.stats().crashes > 0,
                "open failed without a crash: {error}"
            );
            History::default()
        }
    };
    sim.clear_faults();
    let stats = sim.stats();
    if std::env::var_os("PARTLOG_CRASH_MATRIX_CONCURRENT_VERBOSE").is_some() {
        println!(
            "seed {} crash {crash_at:?}: {} ops, {} durable records, {} writes, {} syncs\n{}",
            case.seed,
            history.entries.len(),
            history.durable.len(),
            stats.writes,
            stats.syncs,
            history.op_log()
        );
    }
    check_recovered(case, &config, &history).map_err(|failure| {
        format!(
            "{failure}\nop log (sequence numbers start..end):\n{}",
            history.op_log()
        )
    })?;
    Ok(stats)
}

fn run_threads(
    case: &Case,
    log: &Arc<Log>,
    sim: &SimStorage,
    clock: &Arc<ManualClock>,
) -> Result<History, Failure> {
    let producer_config = ProducerConfig::builder()
        .acks(Acks::All)
        .linger_ms(LINGER_MS)
        .build()
        .map_err(|e| e.to_string())?;
    let batching = Producer::new(Arc::clone(log), producer_config.clone())
        .map_err(|e| format!("Producer::new: {e}"))?;
    let holding = Producer::new(Arc::clone(log), producer_config)
        .map_err(|e| format!("Producer::new: {e}"))?;
    let ctx = Ctx {
        case,
        log,
        sim,
        clock,
        seq: AtomicU64::new(0),
        writers: AtomicUsize::new(2),
        follower_gate: std::sync::Mutex::new(()),
        truncations_done: AtomicUsize::new(0),
        truncator_done: std::sync::atomic::AtomicBool::new(false),
    };
    let journals = std::thread::scope(|scope| {
        let threads = [
            scope.spawn(|| appender(&ctx)),
            scope.spawn(|| producer(&ctx, &batching)),
            scope.spawn(|| reader(&ctx)),
            scope.spawn(|| truncator(&ctx)),
            scope.spawn(|| maintainer(&ctx)),
            scope.spawn(|| follower(&ctx)),
            scope.spawn(|| holder(&ctx, &holding)),
        ];
        threads
            .into_iter()
            .map(|thread| thread.join().expect("a case thread panicked"))
            .collect::<Vec<_>>()
    });
    // Every record they accepted was waited for; after a crash their close fails, quietly.
    drop(batching);
    drop(holding);
    Ok(History::merge(journals))
}

/// Everything the module docs promise of a log after a crash.
fn check_recovered(case: &Case, config: &LogConfig, history: &History) -> Result<(), Failure> {
    check!(
        history.failures.is_empty(),
        "before the crash: {}",
        history.failures.join("; ")
    );
    history.check_claims()?;
    match verify_dir(DIR, config) {
        Ok(report) => {
            let corrupt: Vec<_> = report.findings_of(Severity::Corruption).collect();
            check!(corrupt.is_empty(), "verify: {corrupt:?}");
        }
        // A crash inside the first open may leave no directory, or no segment.
        Err(error) => check!(history.durable.is_empty(), "verify: {error}"),
    }
    let log = Log::open(DIR, config.clone()).map_err(|e| format!("reopen: {e}"))?;
    let start = log.log_start_offset();
    let end = log.log_end_offset();
    let mut recovered: BTreeMap<i64, Rec> = BTreeMap::new();
    for record in log.records(start, ReadBound::LogEnd) {
        let record = record.map_err(|e| format!("read after recovery: {e}"))?;
        recovered.insert(record.offset, Rec::from_log(record));
    }
    // Point reads agree with the records: the record at exactly each offset, or none.
    for offset in start..end {
        let point = log
            .read_record(offset, partlog::ReadOptions::default())
            .map_err(|e| format!("point read at {offset} after recovery: {e}"))?
            .map(Rec::from_log);
        check!(
            point.as_ref() == recovered.get(&offset),
            "point read at {offset}: {point:?}, the records {:?}",
            recovered.get(&offset)
        );
    }
    for (offset, rec) in &recovered {
        let attempt = history.attempts.get(&rec.timestamp);
        check!(
            attempt.is_some_and(|a| a.rec == *rec),
            "offset {offset} holds {rec:?}, which no thread appended"
        );
        let attempt = attempt.expect("checked");
        check!(
            attempt.offset.is_none_or(|o| o == *offset),
            "offset {offset} holds {}, appended at {:?}",
            rec.describe(),
            attempt.offset
        );
    }
    if !case.compacted {
        let markers = check_follower_transactions(&log, start, end, &recovered)?;
        let offsets: Vec<i64> = recovered.keys().copied().collect();
        check!(
            offsets
                == (start..end)
                    .filter(|o| !markers.contains(o))
                    .collect::<Vec<_>>(),
            "records are not gap-free from the start {start} to the end {end}: {offsets:?}"
        );
    }
    let max_start = history.max_start();
    check!(
        start <= max_start.max(0) || recovered.is_empty() && history.durable.is_empty(),
        "log start {start} is above anything that could move it ({max_start})"
    );
    for record in &history.durable {
        if let Some(attempt) = history.attempts.get(&record.rec.timestamp) {
            check!(
                attempt.rec == record.rec,
                "offset {} was {} as {}, not what was appended there",
                record.offset,
                record.how,
                record.rec.describe()
            );
            check!(
                attempt.offset.is_none_or(|o| o == record.offset),
                "{} was {} at {} but appended at {:?}",
                record.rec.describe(),
                record.how,
                record.offset,
                attempt.offset
            );
        } else {
            return Err(format!(
                "offset {} was {} as {:?}, which no thread appended",
                record.offset, record.how, record.rec
            ));
        }
        if recovered.get(&record.offset) == Some(&record.rec) {
            DURABLE_FOUND.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        DURABLE_EXCUSED.fetch_add(1, Ordering::Relaxed);
        check!(
            history
                .excuse(case.compacted, record, start, &recovered)
                .is_some(),
            "offset {} ({}) was {} (since #{}), and after the crash it {} (log {start}..{end})",
            record.offset,
            record.rec.describe(),
            record.how,
            record.since,
            match recovered.get(&record.offset) {
                Some(other) => format!("holds {}", other.describe()),
                None => "is gone".to_string(),
            }
        );
    }
    // The log goes on at its end, and closes into a state that verifies clean.
    let next = Rec {
        key: b"k0".to_vec(),
        value: Some(b"after".to_vec()),
        timestamp: T0,
    };
    let info = log
        .append(&[next.new_record()])
        .map_err(|e| format!("append after recovery: {e}"))?;
    check!(
        info.first_offset == end,
        "append after recovery landed elsewhere"
    );
    log.close().map_err(|e| format!("close: {e}"))?;
    drop(log);
    let report = verify_dir(DIR, config).map_err(|e| format!("verify after close: {e}"))?;
    check!(
        report.findings.iter().all(|f| f.severity == Severity::Note),
        "after a clean close: {:?}",
        report.findings
    );
    Ok(())
}

/// The transactions of the surviving batches (delete-policy variants), replayed from the log
/// start: `committed_records` must return every record below the last stable offset except
/// the data of transactions whose ABORT survived, and the last stable offset must not pass an
/// open transaction. A `.txnindex` entry whose last stable offset ignored a transaction still
/// open at its marker (issue 29, item 1) makes a `read_committed` read stop its search early
/// and return aborted data. Returns the offsets of the markers there.
fn check_follower_transactions(
    log: &Log,
    start: i64,
    end: i64,
    recovered: &BTreeMap<i64, Rec>,
) -> Result<std::collections::BTreeSet<i64>, Failure> {
    let mut markers = std::collections::BTreeSet::new();
    // Producer id -> the first offset of its open transaction.
    let mut open: BTreeMap<i64, i64> = BTreeMap::new();
    // (producer id, first offset, marker offset) of each aborted transaction.
    let mut aborted: Vec<(i64, i64, i64)> = Vec::new();
    // (base, last offset, producer id) of each transactional data batch.
    let mut transactional: Vec<(i64, i64, i64)> = Vec::new();
    let mut at = start;
    while at < end {
        let fetch = log
            .read(at, 1 << 20, ReadBound::LogEnd)
            .map_err(|e| format!("scan at {at}: {e}"))?;
        if fetch.is_empty() {
            break;
        }
        for batch in fetch.batches() {
            let batch = batch.map_err(|e| format!("scan at {at}: {e}"))?;
            let header = *batch.header().expect("partlog writes v2 batches");
            let producer_id = header.producer_id;
            if header.is_control() {
                markers.insert(header.base_offset);
                let mut scratch = Vec::new();
                let marker = |e: Error| format!("marker at {}: {e}", header.base_offset);
                let record = batch
                    .records(&mut scratch)
                    .map_err(marker)?
                    .next()
                    .ok_or_else(|| format!("marker at {} has no record", header.base_offset))?
                    .map_err(marker)?;
                let is_abort = partlog::unstable::format::control_record_type(&record)
                    .map_err(marker)?
                    == ControlRecordType::Abort;
                if let Some(first) = open.remove(&producer_id)
                    && is_abort
                {
                    aborted.push((producer_id, first, header.base_offset));
                }
            } else if header.is_transactional() {
                open.entry(producer_id).or_insert(header.base_offset);
                transactional.push((header.base_offset, header.last_offset(), producer_id));
            }
        }
        at = fetch.next_offset();
    }
    let lso = log.last_stable_offset();
    let first_open = open.values().min().copied().unwrap_or(end).max(start);
    check!(
        lso <= first_open,
        "last stable offset {lso} passes the transaction open at {first_open}"
    );
    let in_aborted = |offset: i64| {
        transactional.iter().any(|&(base, last, producer_id)| {
            (base..=last).contains(&offset)
                && aborted.iter().any(|&(pid, first, marker)| {
                    pid == producer_id && (first..marker).contains(&offset)
                })
        })
    };
    let expected: Vec<i64> = recovered
        .range(..lso)
        .map(|(offset, _)| *offset)
        .filter(|offset| !in_aborted(*offset))
        .collect();
    let mut committed = Vec::new();
    for record in log.committed_records(start, ReadBound::LogEnd) {
        committed.push(
            record
                .map_err(|e| format!("committed_records: {e}"))?
                .offset,
        );
    }
    check!(
        committed == expected,
        "committed records {committed:?}, a replay of the surviving batches says {expected:?} \
         (aborted (pid, first, marker): {aborted:?})"
    );
    Ok(markers)
}

/// The state-changing operations of a dry run, by kind.
fn operation_counts(stats: &SimStats) -> [(FaultOp, u64); 7] {
    [
        (FaultOp::Create, stats.creates),
        (FaultOp::Write, stats.writes),
        (FaultOp::SetLen, stats.set_lens),
        (FaultOp::Sync, stats.syncs),
        (FaultOp::SyncDir, stats.sync_dirs),
        (FaultOp::Rename, stats.renames),
        (FaultOp::Remove, stats.removes),
    ]
}

/// A crash point drawn uniformly from the dry run's state-changing operations.
fn pick_crash_point(stats: &SimStats, rng: &mut Rng) -> (FaultOp, u64) {
    let counts = operation_counts(stats);
    let total: u64 = counts.iter().map(|(_, n)| n).sum();
    let mut pick = rng.below(total);
    for (op, n) in counts {
        if pick < n {
            return (op, pick + 1);
        }
        pick -= n;
    }
    (FaultOp::Write, 1)
}

fn parse_crash_point(text: &str) -> Option<(FaultOp, u64)> {
    let (kind, nth) = text.split_once(':')?;
    let op = operation_counts(&SimStats::default())
        .into_iter()
        .map(|(op, _)| op)
        .find(|op| format!("{op:?}") == kind)?;
    Some((op, nth.parse().ok()?))
}

/// A dry run of the case with seed `seed`, then crashes at points drawn from it (or at `fixed`).
/// Returns how many runs it made.
fn run_matrix_case(seed: u64, fixed: Option<(FaultOp, u64)>) -> Result<usize, Failure> {
    run_matrix_case_as(Case::from_seed(seed), fixed)
}

/// [`run_matrix_case`] on `case` (a seed's case, or its pooled variant).
fn run_matrix_case_as(case: Case, fixed: Option<(FaultOp, u64)>) -> Result<usize, Failure> {
    let seed = case.seed;
    let fail = |point: Option<(FaultOp, u64)>, failure: Failure| {
        let replay = match point {
            Some((op, nth)) => format!(" PARTLOG_CRASH_MATRIX_CONCURRENT_CRASH_AT={op:?}:{nth}"),
            None => " (the dry run: a crash after every thread was done)".to_string(),
        };
        format!("PARTLOG_CRASH_MATRIX_CONCURRENT_SEED={seed}{replay}\n{case:?}\n{failure}")
    };
    if let Some(point) = fixed {
        run_case(&case, Some(point)).map_err(|f| fail(Some(point), f))?;
        return Ok(1);
    }
    let stats = run_case(&case, None).map_err(|f| fail(None, f))?;
    let mut rng = seeded(seed, 99);
    for _ in 0..CRASHES_PER_CASE {
        let point = pick_crash_point(&stats, &mut rng);
        run_case(&case, Some(point)).map_err(|f| fail(Some(point), f))?;
    }
    Ok(1 + CRASHES_PER_CASE)
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[test]
fn threads_appending_reading_truncating_and_maintaining_survive_a_crash_anywhere() {
    if let Some(seed) = env_u64("PARTLOG_CRASH_MATRIX_CONCURRENT_SEED") {
        let fixed = std::env::var("PARTLOG_CRASH_MATRIX_CONCURRENT_CRASH_AT")
            .ok()
            .map(|text| parse_crash_point(&text).expect("CRASH_AT is <kind>:<n>, as printed"));
        if let Err(failure) = run_matrix_case(seed, fixed) {
            panic!("{failure}");
        }
        println!("concurrent crash matrix: replayed seed {seed}, recovered");
        return;
    }
    let cases = env_u64("PARTLOG_CRASH_MATRIX_CONCURRENT_CASES").unwrap_or(24);
    let deadline = env_u64("PARTLOG_CRASH_MATRIX_CONCURRENT_SECS")
        .map(|secs| Instant::now() + Duration::from_secs(secs));
    let first_seed = env_u64("PARTLOG_CRASH_MATRIX_CONCURRENT_FIRST_SEED").unwrap_or(0);
    let mut seed = first_seed;
    let mut runs = 0;
    loop {
        match deadline {
            Some(deadline) if Instant::now() >= deadline => break,
            None if seed - first_seed >= cases => break,
            _ => {}
        }
        match run_matrix_case(seed, None) {
            Ok(made) => runs += made,
            Err(failure) => panic!("{failure}"),
        }
        seed += 1;
    }
    println!(
        "concurrent crash matrix: {} cases (seeds {first_seed}..{seed}), {runs} crashes \
         ({} while the threads ran), all recovered; acknowledged or seen records found {} \
         times, gone through an operation that may remove them {} times",
        seed - first_seed,
        CRASHED_MID_RUN.load(Ordering::Relaxed),
        DURABLE_FOUND.load(Ordering::Relaxed),
        DURABLE_EXCUSED.load(Ordering::Relaxed),
    );
    assert!(runs > 0);
}

/// The matrix above with every log's flusher on one shared `Workers` pool (issue 31, section
/// 2): the same seeds, threads and checks. `PARTLOG_CRASH_MATRIX_CONCURRENT_POOLED_CASES`
/// (default 12) cases; a failure replays with this test's name and the seed it prints.
#[test]
fn threads_appending_reading_truncating_and_maintaining_survive_a_crash_anywhere_on_workers() {
    let pooled = |seed| Case {
        pooled: true,
        ..Case::from_seed(seed)
    };
    if let Some(seed) = env_u64("PARTLOG_CRASH_MATRIX_CONCURRENT_SEED") {
        let fixed = std::env::var("PARTLOG_CRASH_MATRIX_CONCURRENT_CRASH_AT")
            .ok()
            .map(|text| parse_crash_point(&text).expect("CRASH_AT is <kind>:<n>, as printed"));
        if let Err(failure) = run_matrix_case_as(pooled(seed), fixed) {
            panic!("{failure}");
        }
        return;
    }
    let cases = env_u64("PARTLOG_CRASH_MATRIX_CONCURRENT_POOLED_CASES").unwrap_or(12);
    let first_seed = env_u64("PARTLOG_CRASH_MATRIX_CONCURRENT_FIRST_SEED").unwrap_or(0);
    let mut runs = 0;
    for seed in first_seed..first_seed + cases {
        match run_matrix_case_as(pooled(seed), None) {
            Ok(made) => runs += made,
            Err(failure) => panic!("{failure}"),
        }
    }
    println!("concurrent crash matrix on Workers: {cases} cases, {runs} crashes, all recovered");
    assert!(runs > 0);
}

// ---------------------------------------------------------------------------------------------
// Operations together: a scripted scenario in which a truncation (with a refill and its own
// acknowledgements), retention and `delete_records_before` land inside a compaction pass, at a
// storage operation the pass makes, while `acks=all` handles are outstanding; then a crash at
// every state-changing operation of a dry run in turn, each checked as above. One thread runs
// the script (the hook runs on the compaction's thread), so the interleaving is the script's;
// only the flusher and the producer's sender run beside it.

/// The storage operation a [`Hooked`] storage runs its action at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum On {
    /// Before a `metadata`.
    Metadata,
    /// Before an `open`.
    Open,
    /// After the given number of `read_at`s through handles opened at the path (counted from
    /// when the hook is armed), that is, after the last of them.
    AfterReads(usize),
    /// Before a `sync_all` through a handle opened at the path.
    SyncAll,
    /// Before a `sync_data` through a handle opened at the path.
    SyncData,
    /// After a `rename` to the path returned.
    Renamed,
}

type Action = Box<dyn FnOnce() + Send>;

/// The armed action of a [`Hooked`] storage, shared with the files it opened.
type HookSlot = Arc<parking_lot::Mutex<Option<(On, String, Action)>>>;

/// A [`SimStorage`] that runs one action at the first operation of a kind on a path ending
/// with a suffix.
struct Hooked {
    inner: Arc<dyn Storage>,
    hook: HookSlot,
}

/// A file of a [`Hooked`] storage: its reads count towards an [`On::AfterReads`] hook.
struct HookedFile {
    inner: Arc<dyn StorageFile>,
    hook: HookSlot,
}

impl std::fmt::Debug for HookedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookedFile")
            .field("inner", &self.inner)
            .finish()
    }
}

impl HookedFile {
    /// Runs the hook if it is armed for `on` at this file's path.
    fn before(&self, on: On) {
        let path = self.inner.path().to_string_lossy();
        let action = {
            let mut hook = self.hook.lock();
            let hit = hook
                .as_ref()
                .is_some_and(|(want, suffix, _)| *want == on && path.ends_with(suffix.as_str()));
            if hit { hook.take() } else { None }
        };
        if let Some((_, _, action)) = action {
            action();
        }
    }

    fn after_read(&self) {
        let path = self.inner.path().to_string_lossy();
        let action = {
            let mut hook = self.hook.lock();
            match hook.as_mut() {
                Some((On::AfterReads(left), suffix, _)) if path.ends_with(suffix.as_str()) => {
                    *left = left.saturating_sub(1);
                    if *left == 0 { hook.take() } else { None }
                }
                _ => None,
            }
        };
        if let Some((_, _, action)) = action {
            action();
        }
    }
}

impl StorageFile for HookedFile {
    fn path(&self) -> &Path {
        self.inner.path()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> partlog::Result<usize> {
        let read = self.inner.read_at(buf, offset);
        self.after_read();
        read
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> partlog::Result<()> {
        self.inner.write_all_at(buf, offset)
    }
    fn len(&self) -> partlog::Result<u64> {
        self.inner.len()
    }
    fn file_id(&self) -> partlog::Result<Option<partlog::unstable::FileId>> {
        self.inner.file_id()
    }
    fn set_len(&self, len: u64) -> partlog::Result<()> {
        self.inner.set_len(len)
    }
    fn sync_data(&self) -> partlog::Result<()> {
        self.before(On::SyncData);
        self.inner.sync_data()
    }
    fn sync_all(&self) -> partlog::Result<()> {
        self.before(On::SyncAll);
        self.inner.sync_all()
    }
    fn map_read(&self) -> partlog::Result<Option<partlog::unstable::ReadMapping>> {
        self.inner.map_read()
    }
    fn advise(
        &self,
        offset: u64,
        len: u64,
        advice: partlog::unstable::Advice,
    ) -> partlog::Result<()> {
        self.inner.advise(offset, len, advice)
    }
}

impl std::fmt::Debug for Hooked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooked")
            .field("inner", &self.inner)
            .finish()
    }
}

impl Hooked {
    fn arm(&self, on: On, suffix: String, action: Action) {
        *self.hook.lock() = Some((on, suffix, action));
    }

    fn at(&self, on: On, path: &Path) {
        let action = {
            let mut hook = self.hook.lock();
            let hit = hook.as_ref().is_some_and(|(want, suffix, _)| {
                *want == on && path.to_string_lossy().ends_with(suffix.as_str())
            });
            if hit { hook.take() } else { None }
        };
        if let Some((_, _, action)) = action {
            action();
        }
    }
}

impl Storage for Hooked {
    fn open(&self, path: &Path, mode: OpenMode) -> partlog::Result<Arc<dyn StorageFile>> {
        self.at(On::Open, path);
        Ok(Arc::new(HookedFile {
            inner: self.inner.open(path, mode)?,
            hook: Arc::clone(&self.hook),
        }))
    }
    fn create_dir_all(&self, path: &Path) -> partlog::Result<()> {
        self.inner.create_dir_all(path)
    }
    fn sync_dir(&self, dir: &Path) -> partlog::Result<()> {
        self.inner.sync_dir(dir)
    }
    fn rename(&self, from: &Path, to: &Path) -> partlog::Result<()> {
        self.inner.rename(from, to)?;
        self.at(On::Renamed, to);
        Ok(())
    }
    fn remove(&self, path: &Path) -> partlog::Result<()> {
        self.inner.remove(path)
    }
    fn list(&self, dir: &Path) -> partlog::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn metadata(&self, path: &Path) -> partlog::Result<Metadata> {
        self.at(On::Metadata, path);
        self.inner.metadata(path)
    }
    fn lock(&self, path: &Path, mode: LockMode) -> partlog::Result<FileLock> {
        self.inner.lock(path, mode)
    }
    fn canonical_path(&self, path: &Path) -> partlog::Result<CanonicalPath> {
        self.inner.canonical_path(path)
    }
    fn set_mtime(&self, path: &Path, mtime_ms: i64) -> partlog::Result<()> {
        self.inner.set_mtime(path, mtime_ms)
    }
    fn lock_foreign_ofd(&self, path: &Path) -> partlog::Result<FileLock> {
        self.inner.lock_foreign_ofd(path)
    }
}

/// One thread's scripted operations, recorded as the matrix's threads record theirs.
struct Script {
    log: Arc<Log>,
    sim: SimStorage,
    compacted: bool,
    seq: AtomicU64,
    records: AtomicU64,
    journal: parking_lot::Mutex<Journal>,
    /// Set once an operation failed with the crash: later ones are skipped.
    dead: std::sync::atomic::AtomicBool,
}

impl Script {
    fn tick(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::SeqCst)
    }

    fn live(&self) -> bool {
        !self.dead.load(Ordering::SeqCst)
    }

    fn rec(&self) -> Rec {
        let n = self.records.fetch_add(1, Ordering::SeqCst) + 1;
        let mut rng = seeded(n, 7);
        Rec::make(Who::Appender, n, &mut rng, self.compacted)
    }

    /// Notes an error; `allowed` if a race explains it.
    fn failed(&self, what: &str, error: &Error, allowed: bool) {
        if self.sim.stats().crashes > 0 {
            self.dead.store(true, Ordering::SeqCst);
        } else if !allowed {
            self.journal
                .lock()
                .failures
                .push(format!("{what} failed without a crash: {error:?}"));
        }
    }

    fn entry(&self, span: (u64, u64), what: String, outcome: String) {
        let mut journal = self.journal.lock();
        let index = journal.entries.len();
        journal.entry(Who::Appender, index, span, what, outcome);
    }

    /// `append` of `count` records, then `wait_durable` of the last.
    fn append(&self, count: usize) {
        if !self.live() {
            return;
        }
        let recs: Vec<Rec> = (0..count).map(|_| self.rec()).collect();
        let records: Vec<NewRecord> = recs.iter().map(Rec::new_record).collect();
        let start = self.tick();
        let appended = self.log.append(&records);
        let waited = appended
            .as_ref()
            .ok()
            .map(|info| self.log.wait_durable(info.last_offset));
        let end = self.tick();
        let mut journal = self.journal.lock();
        for (i, rec) in recs.iter().enumerate() {
            let placed = appended
                .as_ref()
                .ok()
                .map(|info| (info.first_offset + i as i64, info.last_offset));
            journal.attempts.push(Attempt {
                rec: rec.clone(),
                start,
                offset: placed.map(|(offset, _)| offset),
                group_last: placed.map(|(_, last)| last),
            });
            if let (Some((offset, last)), Some(Ok(()))) = (placed, &waited) {
                journal.durable.push(Durable {
                    offset,
                    rec: rec.clone(),
                    since: start,
                    group_last: Some(last),
                    how: "acknowledged (wait_durable)",
                });
            }
        }
        drop(journal);
        let outcome = match (&appended, &waited) {
            (Ok(info), Some(Ok(()))) => {
                format!("{}..={} durable", info.first_offset, info.last_offset)
            }
            (Err(error), _) | (_, Some(Err(error))) => format!("{error}"),
            (Ok(_), None) => unreachable!("a wait follows every append"),
        };
        self.entry(
            (start, end),
            format!("append {count} + wait_durable"),
            outcome,
        );
        match (appended, waited) {
            (Err(error), _) => self.failed("append", &error, false),
            (Ok(_), Some(Err(error))) => self.failed("wait_durable", &error, raced(&error)),
            _ => {}
        }
    }

    /// A maintenance or truncation operation.
    fn cut<T: std::fmt::Debug>(
        &self,
        what: String,
        kind: impl FnOnce(&partlog::Result<T>) -> CutKind,
        allowed: fn(&Error) -> bool,
        run: impl FnOnce(&Log) -> partlog::Result<T>,
    ) {
        if !self.live() {
            return;
        }
        let start = self.tick();
        let result = run(&self.log);
        let end = self.tick();
        let kind = kind(&result);
        self.journal.lock().cuts.push(Cut { kind, start, end });
        let outcome = match &result {
            Ok(value) => format!("{value:?}"),
            Err(error) => format!("{error}"),
        };
        self.entry((start, end), what.clone(), outcome);
        if let Err(error) = result {
            self.failed(&what, &error, allowed(&error));
        }
    }

    fn truncate(&self, to: i64) {
        self.cut(
            format!("truncate_to {to}"),
            |result| CutKind::Truncate {
                to,
                new_end: result.as_ref().ok().copied(),
            },
            |_| false,
            |log| log.truncate_to(to),
        );
    }

    fn delete_before(&self, to: i64) {
        self.cut(
            format!("delete_records_before {to}"),
            |_| CutKind::DeleteBefore { to },
            raced,
            |log| log.delete_records_before(to),
        );
    }

    fn retention(&self) {
        self.cut(
            "enforce_retention".into(),
            |result: &partlog::Result<i64>| CutKind::Retention {
                start: result.as_ref().ok().copied(),
            },
            |_| false,
            |log| {
                log.enforce_retention()
                    .map(|report| report.log_start_offset)
            },
        );
    }

    fn compact(&self) {
        self.cut(
            "compact".into(),
            |_| CutKind::Compact,
            raced,
            |log| {
                log.compact()
                    .map(|stats| (stats.segments_cleaned, stats.cleaned_up_to))
            },
        );
    }

    /// `send` of `count` records; the handles are settled later.
    fn send(
        &self,
        producer: &Producer,
        count: usize,
    ) -> Vec<(Rec, u64, partlog::Result<SendHandle>)> {
        let start = self.tick();
        let sent: Vec<_> = (0..count)
            .map(|_| {
                let rec = self.rec();
                let handle = producer.send(&rec.new_record());
                (rec, start, handle)
            })
            .collect();
        let flushed = producer.flush();
        let end = self.tick();
        self.entry(
            (start, end),
            format!("send {count} + flush (handles settled later)"),
            format!("{flushed:?}"),
        );
        if let Err(error) = flushed {
            self.failed("producer flush", &error, raced(&error));
        }
        sent
    }

    /// Waits for every handle of a burst.
    fn settle(&self, burst: Vec<(Rec, u64, partlog::Result<SendHandle>)>) {
        let count = burst.iter().filter(|(_, _, handle)| handle.is_ok()).count() as i64;
        let start = self.tick();
        let mut outcomes = Vec::new();
        for (index, (rec, sent_at, handle)) in burst.into_iter().enumerate() {
            let result = handle.and_then(SendHandle::wait);
            outcomes.push(format!("{result:?}"));
            let mut journal = self.journal.lock();
            let group_last = result
                .as_ref()
                .ok()
                .map(|offset| offset - index as i64 + count - 1);
            journal.attempts.push(Attempt {
                rec: rec.clone(),
                start: sent_at,
                offset: result.as_ref().ok().copied(),
                group_last,
            });
            match result {
                Ok(offset) => journal.durable.push(Durable {
                    offset,
                    rec,
                    since: sent_at,
                    group_last,
                    how: "acknowledged (acks=all handle)",
                }),
                Err(error) => {
                    drop(journal);
                    self.failed("a send handle", &error, raced(&error));
                }
            }
        }
        let end = self.tick();
        self.entry((start, end), "settle handles".into(), outcomes.join(", "));
    }
}

/// A scripted scenario: `fill` runs on a first open of the log, which then closes cleanly (so
/// that the second open's sealed segments are closed handles, sized by path); `meet` runs on
/// the second open, arming the storage hook where the operations are to meet.
struct Scenario {
    fill: fn(&Script),
    meet: fn(&Arc<Script>, &Hooked, &Producer),
}

/// The `.log` file names of the log, oldest first.
fn log_files(sim: &SimStorage) -> Vec<String> {
    let mut names: Vec<String> = sim
        .list(Path::new(DIR))
        .unwrap_or_default()
        .into_iter()
        .filter(|name| name.ends_with(".log"))
        .collect();
    names.sort();
    names
}

fn base_of(name: &str) -> i64 {
    name.trim_end_matches(".log")
        .parse()
        .expect("a segment file name")
}

/// Runs `scenario`, crashing just before `crash_at` (after everything when `None`), and checks
/// the recovered log. Returns the simulator's counters and whether the hook ran.
fn run_scripted(
    scenario: &Scenario,
    crash_at: Option<(FaultOp, u64)>,
) -> Result<(SimStats, bool), Failure> {
    let case = Case {
        seed: 11,
        compacted: true,
        flush: 0,
        segment_bytes: 1024,
        retention_bytes: -1,
        appends: 0,
        bursts: 0,
        cuts: 0,
        passes: 0,
        pooled: false,
    };
    let clock = Arc::new(ManualClock::new(T0));
    let sim = SimStorage::new(case.seed).with_clock(clock.clone());
    if let Some((op, nth)) = crash_at {
        let image = CrashConfig::random().seed(nth.rotate_left(17) ^ op as u64);
        sim.inject(FaultRule::crash(op, nth).crash_config(image));
    }
    // Fenced inside: the hook's actions run outside the fence's gate, which they take again.
    let hooked = Arc::new(Hooked {
        inner: Arc::new(Fenced::new(Arc::new(sim.clone()), sim.clone())),
        hook: Arc::new(parking_lot::Mutex::new(None)),
    });
    let config = case.config_on(hooked.clone(), &clock);
    let mut journal = Journal::default();
    let mut seq = 0;
    for phase in 0..2 {
        let log = match Log::open(DIR, config.clone()) {
            Ok(log) => Arc::new(log),
            Err(error) => {
                check!(
                    sim.stats().crashes > 0,
                    "open failed without a crash: {error}"
                );
                break;
            }
        };
        let script = Arc::new(Script {
            log: Arc::clone(&log),
            sim: sim.clone(),
            compacted: case.compacted,
            seq: AtomicU64::new(seq),
            records: AtomicU64::new(journal.attempts.len() as u64),
            journal: parking_lot::Mutex::new(std::mem::take(&mut journal)),
            dead: std::sync::atomic::AtomicBool::new(false),
        });
        if phase == 0 {
            (scenario.fill)(&script);
            if let Err(error) = log.close() {
                script.failed("close", &error, false);
            }
        } else {
            let producer_config = ProducerConfig::builder()
                .acks(Acks::All)
                .linger_ms(LINGER_MS)
                .build()
                .map_err(|e| e.to_string())?;
            let producer = Producer::new(Arc::clone(&log), producer_config)
                .map_err(|e| format!("Producer::new: {e}"))?;
            (scenario.meet)(&script, &hooked, &producer);
            drop(producer);
        }
        *hooked.hook.lock() = None;
        let dead = !script.live();
        seq = script.seq.load(Ordering::SeqCst);
        journal = std::mem::take(&mut *script.journal.lock());
        drop(script);
        drop(log);
        if dead || sim.stats().crashes > 0 {
            break;
        }
    }
    let fired = journal.entries.iter().any(|e| e.what.starts_with("hook: "));
    if sim.stats().crashes == 0 {
        sim.clear_faults();
        sim.crash_with(&CrashConfig::random().seed(3));
    }
    sim.clear_faults();
    let stats = sim.stats();
    let history = History::merge(vec![journal]);
    // The next process's storage: the fenced one died with the machine.
    let config = case.config(&sim, &clock);
    check_recovered(&case, &config, &history).map_err(|failure| {
        format!(
            "crash {crash_at:?}: {failure}\nop log (sequence numbers start..end):\n{}",
            history.op_log()
        )
    })?;
    Ok((stats, fired))
}

/// A dry run of `scenario` (whose hook must run), then a crash at every state-changing
/// operation it made.
fn run_scripted_matrix(scenario: &Scenario) {
    let (stats, fired) = run_scripted(scenario, None).unwrap_or_else(|failure| panic!("{failure}"));
    assert!(
        fired,
        "the scenario's hook never ran: the operations did not meet"
    );
    let mut points = 0;
    for (op, count) in operation_counts(&stats) {
        for nth in 1..=count {
            if let Err(failure) = run_scripted(scenario, Some((op, nth))) {
                panic!("{failure}");
            }
            points += 1;
        }
    }
    assert!(points > 50, "only {points} crash points");
}

/// Twenty appends of three records, each waited durable: four segments.
fn fill_segments(script: &Script) {
    for _ in 0..20 {
        script.append(3);
    }
}

/// Marks in the op log that the hook ran, with what it does.
fn hook_entry(script: &Script, what: &str) {
    let at = script.tick();
    script.entry((at, at), format!("hook: {what}"), String::new());
}

/// Inside the hook: a truncation into the segment below `base`, which takes the segment at
/// `base` out of the log, a refill acknowledged durable, `delete_records_before` and a
/// retention pass.
fn truncate_refill_and_retain(script: &Script, base: i64) {
    hook_entry(script, &format!("truncate below {base}, refill, retain"));
    script.truncate(base - 2);
    script.append(2);
    script.delete_before(script.log.log_start_offset() + 1);
    script.retention();
}

/// The hook, on a weak reference to the script: the log holds the storage, which holds the
/// hook, and the script holds the log.
fn hook(script: &Arc<Script>, run: fn(&Script, i64), base: i64) -> Action {
    let script = Arc::downgrade(script);
    Box::new(move || {
        if let Some(script) = script.upgrade() {
            run(&script, base);
        }
    })
}

/// The case that found a bug: a compaction pass sizes the closed sealed segments it plans on
/// by path, and a truncation that renamed one meanwhile failed the pass with `Io` NotFound
/// (retention's planning already re-planned on it). Here the truncation, with a refill and
/// acknowledgements, lands just before the pass sizes its last sealed segment, while
/// `acks=all` handles are outstanding.
#[test]
fn a_truncation_meets_a_compaction_pass_while_it_plans() {
    run_scripted_matrix(&Scenario {
        fill: fill_segments,
        meet: |script, hooked, producer| {
            // Closed since the reopen (the burst may roll, sealing an open one after it).
            let files = log_files(&script.sim);
            let last_sealed = files[files.len() - 2].clone();
            let burst = script.send(producer, 3);
            let base = base_of(&last_sealed);
            hooked.arm(
                On::Metadata,
                last_sealed,
                hook(script, truncate_refill_and_retain, base),
            );
            script.compact();
            script.settle(burst);
            script.append(2);
            script.compact();
        },
    });
}

/// The case that found a bug: a compaction pass read a group of segments, and a truncation
/// renamed the group's last segment before the pass read its mtime for the cleaned copy: the
/// pass failed with `Io` NotFound instead of finding the group gone. Here the truncation lands
/// there, with the segments open (a reader read them all) and `acks=all` handles outstanding.
#[test]
fn a_truncation_meets_a_compaction_pass_after_it_read_a_group() {
    run_scripted_matrix(&Scenario {
        fill: fill_segments,
        meet: |script, hooked, producer| {
            // Opens every segment: the pass then sizes them from memory, and the first
            // `metadata` of the last sealed `.log` is the cleaned copy's mtime.
            let start = script.log.log_start_offset();
            let read = script.log.records(start, ReadBound::LogEnd).count();
            assert!(read > 30);
            let burst = script.send(producer, 3);
            let files = log_files(&script.sim);
            let last_sealed = files[files.len() - 2].clone();
            let base = base_of(&last_sealed);
            hooked.arm(
                On::Metadata,
                last_sealed,
                hook(script, truncate_refill_and_retain, base),
            );
            script.compact();
            script.settle(burst);
            script.append(2);
            script.compact();
        },
    });
}

/// Acknowledgements, truncation and maintenance together: while a compaction pass writes its
/// first cleaned copy, a truncation takes the tail (and the producer's outstanding burst),
/// records are appended and acknowledged, and `delete_records_before` and a retention pass run;
/// then the burst settles, and a second pass runs over what the first left.
#[test]
fn acknowledgements_truncation_and_maintenance_meet_inside_a_compaction_pass() {
    run_scripted_matrix(&Scenario {
        fill: fill_segments,
        meet: |script, hooked, producer| {
            let burst = script.send(producer, 3);
            let end = script.log.log_end_offset();
            hooked.arm(
                On::Open,
                ".log.cleaned".into(),
                hook(
                    script,
                    |script, end| {
                        hook_entry(
                            script,
                            "truncate into the outstanding burst, refill, retain",
                        );
                        script.truncate(end - 2);
                        script.append(3);
                        script.delete_before(script.log.log_start_offset() + 2);
                        script.retention();
                    },
                    end,
                ),
            );
            script.compact();
            script.settle(burst);
            script.append(1);
            script.compact();
            script.retention();
        },
    });
}

/// A bug this matrix found (PARTLOG_CRASH_MATRIX_CONCURRENT_SEED=2224, crash at Rename:4), as
/// tests/crash_matrix.rs did at the same time: a compaction pass renames each old segment's
/// `.log` to `.deleted`, then its indexes, then the `.swap` to the `.log`. A crash after the
/// `.log` rename but before the `.timeindex` one left the old time index under the base the swap
/// then took; open completed the swap, keeping that index (it looked for the segments to replace
/// by their `.log` files only), and the cleaned segment's time index named offsets that were no
/// longer the ends of batches. Here the crash is exactly there, with every rename before it kept.
#[test]
fn a_crash_inside_a_compaction_swap_leaves_no_old_index_behind() {
    let case = Case {
        seed: 5,
        compacted: true,
        flush: 0,
        segment_bytes: 1024,
        retention_bytes: -1,
        appends: 0,
        bursts: 0,
        cuts: 0,
        passes: 0,
        pooled: false,
    };
    let clock = Arc::new(ManualClock::new(T0));
    let sim = SimStorage::new(case.seed).with_clock(clock.clone());
    let config = case.config(&sim, &clock);
    let log = Log::open(DIR, config.clone()).unwrap();
    let mut rng = seeded(case.seed, 1);
    let mut written = Vec::new();
    for n in 0..60 {
        let rec = Rec::make(Who::Appender, n, &mut rng, false);
        log.append(&[rec.new_record()]).unwrap();
        written.push(rec);
    }
    log.wait_durable(log.log_end_offset() - 1).unwrap();
    assert!(log_files(&sim).len() >= 3);
    // Just before the first old `.timeindex` is renamed; the renames before it are kept.
    sim.inject(
        FaultRule::crash(FaultOp::Rename, 1)
            .on_paths_ending_with(".timeindex")
            .crash_config(CrashConfig::keep_unsynced()),
    );
    assert!(log.compact().is_err(), "the pass crashed");
    assert_eq!(sim.stats().crashes, 1);
    drop(log);
    sim.clear_faults();
    // Open completes the swap; the segment at 0 stays closed (nothing reads it) until the
    // clean close, so its index files are what open left.
    Log::open(DIR, config.clone()).unwrap().close().unwrap();
    let report = verify_dir(DIR, &config).unwrap();
    assert!(
        report.findings.iter().all(|f| f.severity == Severity::Note),
        "{:?}",
        report.findings
    );
    let log = Log::open(DIR, config.clone()).unwrap();
    let records: Vec<LogRecord> = log
        .records(log.log_start_offset(), ReadBound::LogEnd)
        .collect::<partlog::Result<_>>()
        .unwrap();
    assert!(!records.is_empty());
    // Each record's own timestamp finds it (the timestamps increase with the offsets).
    for record in &records {
        assert_eq!(
            log.offset_for_timestamp(record.timestamp).unwrap(),
            Some((record.offset, record.timestamp))
        );
    }
}

/// A bug this matrix found (PARTLOG_CRASH_MATRIX_CONCURRENT_SEED=17841, in about 17,800
/// cases): a compaction pass copies a segment alone in its group only from its first change
/// on, re-reading the unchanged batches before it then; a truncation that cut and refilled the
/// segment between the pass's read and that re-read failed the pass with `Error::Corrupt`
/// ("the segment changed while compaction copied it"), which tells an operator the data is bad,
/// for a race that leaves nothing wrong: it is `Error::Truncated` now, as when the pass's own
/// reads meet the truncation. Here the truncation and refill run just after each of the pass's first
/// reads of the segment in turn, so that one of them lands between the read and the re-read;
/// each pass must end in `Ok` or `Error::Truncated`.
#[test]
fn a_truncation_between_a_compaction_passs_read_and_its_re_read_is_no_corruption() {
    let case = Case {
        seed: 13,
        compacted: true,
        flush: 0,
        segment_bytes: 1024,
        retention_bytes: -1,
        appends: 0,
        bursts: 0,
        cuts: 0,
        passes: 0,
        pooled: false,
    };
    let mut raced = 0;
    // (From the fifth read on the hook would run inside a read that holds a lock the
    // truncation needs; the first four cover the map, the copy and the re-read.)
    for reads in 1..=4 {
        let clock = Arc::new(ManualClock::new(T0));
        let sim = SimStorage::new(case.seed).with_clock(clock.clone());
        let hooked = Arc::new(Hooked {
            inner: Arc::new(sim.clone()),
            hook: Arc::new(parking_lot::Mutex::new(None)),
        });
        let config = case.config_on(hooked.clone(), &clock);
        let log = Arc::new(Log::open(DIR, config.clone()).unwrap());
        let record = |n: i64, key: &str, value: &str| Rec {
            key: key.as_bytes().to_vec(),
            value: Some(value.as_bytes().to_vec()),
            timestamp: T0 - 1_000_000 + n,
        };
        // Three batches that stay (unique keys), then one that a later record supersedes,
        // then enough unique ones to roll, and the superseding record in the next segment,
        // which rolls too.
        let mut n = 0;
        for key in ["u0", "u1", "u2", "dup"] {
            log.append(&[record(n, key, "first").new_record()]).unwrap();
            n += 1;
        }
        while log_files(&sim).len() < 2 {
            log.append(&[record(n, &format!("fill{n}"), "filler").new_record()])
                .unwrap();
            n += 1;
        }
        log.append(&[record(n, "dup", "latest").new_record()])
            .unwrap();
        n += 1;
        // The superseding record must be in a sealed segment: the pass maps only those.
        while log_files(&sim).len() < 3 {
            log.append(&[record(n, &format!("fill{n}"), "filler").new_record()])
                .unwrap();
            n += 1;
        }
        log.wait_durable(log.log_end_offset() - 1).unwrap();
        let weak = Arc::downgrade(&log);
        hooked.hook.lock().replace((
            On::AfterReads(reads),
            "00000000000000000000.log".into(),
            Box::new(move || {
                if let Some(log) = weak.upgrade() {
                    // Cut inside the unchanged batches, and refill with other bytes.
                    log.truncate_to(1).unwrap();
                    log.append(
                        &[record(1_000, "other", "a longer value than before").new_record()],
                    )
                    .unwrap();
                }
            }),
        ));
        let result = log.compact();
        let fired = hooked.hook.lock().is_none();
        *hooked.hook.lock() = None;
        assert!(fired, "the hook never ran after {reads} reads");
        // A pass that meets a truncation fails with Truncated or goes on without the group.
        assert!(
            matches!(result, Ok(_) | Err(Error::Truncated { .. })),
            "a truncation after {reads} reads: the pass failed with {result:?}"
        );
        raced += usize::from(result.is_err());
        // What the pass left reads back whole.
        let start = log.log_start_offset();
        for record in log.records(start, ReadBound::LogEnd) {
            record.unwrap();
        }
        drop(log);
    }
    assert!(raced > 0, "no truncation landed inside a pass");
}

/// The finding of PARTLOG_CRASH_MATRIX_CONCURRENT_SEED=4924 (CRASH_AT=Sync:43): after a crash
/// inside a compaction pass, the recovered `.index` of a segment named offset 17 (an all-zero
/// entry) at byte 0, where the batch ends at 20. A sync for an acknowledgement syncs the active
/// segment's `.log` only; when the next append rolls, the durable offset already reaches the
/// new segment's base while the segment just sealed has unsynced index entries until the next
/// sync. A pass planned then recorded its recovery point at that base without syncing, and
/// recovery trusts the index entries below the point: a crash that kept the index's later
/// entries but not its first left a zero entry that no check catches. Here the pass runs at the
/// first sync of the sealed segment (just before it), and crashes while writing its cleaned copy,
/// with each unsynced write kept or lost as the crash seed draws. (The pass now syncs the sealed
/// segments itself, and no recovery point passes one whose sync has not completed.)
#[test]
fn a_compaction_pass_records_a_recovery_point_only_over_synced_indexes() {
    let case = Case {
        seed: 4924,
        compacted: true,
        flush: 0,
        segment_bytes: 1024,
        retention_bytes: -1,
        appends: 0,
        bursts: 0,
        cuts: 0,
        passes: 0,
        pooled: false,
    };
    let mut corrupt = Vec::new();
    for crash_seed in 0..32u64 {
        let clock = Arc::new(ManualClock::new(T0));
        let sim = SimStorage::new(case.seed).with_clock(clock.clone());
        let hooked = Arc::new(Hooked {
            inner: Arc::new(sim.clone()),
            hook: Arc::new(parking_lot::Mutex::new(None)),
        });
        let config = case.config_on(hooked.clone(), &clock);
        let log = Arc::new(Log::open(DIR, config.clone()).unwrap());
        // Timestamps near the clock's: only the record that moves them `segment.ms` on rolls.
        let record = |n: i64, key: &str| Rec {
            key: key.as_bytes().to_vec(),
            value: Some(format!("value {n}").into_bytes()),
            timestamp: T0 + n,
        };
        // Batches of two whose keys repeat (a pass rewrites the segment, and a zero offset-index
        // entry names no batch's last offset), with several index entries.
        let mut acknowledged = Vec::new();
        for n in 0..8 {
            let batch = [
                record(2 * n, ["a", "b", "c"][n as usize % 3]),
                record(2 * n + 1, "e"),
            ];
            log.append(&[batch[0].new_record(), batch[1].new_record()])
                .unwrap();
            acknowledged.extend(batch);
        }
        log.wait_durable(log.log_end_offset() - 1).unwrap();
        assert_eq!(log_files(&sim).len(), 1, "segment 0 is still active");
        let outcome = Arc::new(parking_lot::Mutex::new(None));
        let weak = Arc::downgrade(&log);
        let seen = Arc::clone(&outcome);
        hooked.arm(
            On::SyncAll,
            "00000000000000000000.log".into(),
            Box::new(move || {
                if let Some(log) = weak.upgrade() {
                    *seen.lock() = Some(log.compact().map(|stats| stats.segments_cleaned));
                }
            }),
        );
        sim.inject(
            FaultRule::crash(FaultOp::Sync, 1)
                .on_paths_ending_with(".cleaned")
                .crash_config(CrashConfig::random().seed(crash_seed).without_tearing()),
        );
        clock.advance(2 * SEGMENT_MS);
        let end = log.log_end_offset();
        let rolls = log.stats().rolls;
        log.append(&[record(2 * SEGMENT_MS, "d").new_record()])
            .unwrap();
        // Asked of the log, not of the files: the roll's sync of the sealed segment may already
        // have run the pass and crashed the machine, whose image may have lost the new file.
        assert_eq!(log.stats().rolls, rolls + 1, "the append rolled");
        // The first sync of the sealed segment (this wait's or the flusher's) runs the pass. The
        // flusher's may be its roll's sync of the sealed segments alone, outside the group
        // commit this wait joins: wait for the pass itself.
        let _ = log.wait_durable(end);
        let deadline = Instant::now() + Duration::from_secs(120);
        while outcome.lock().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(hooked.hook.lock().is_none(), "the pass never ran");
        assert!(
            outcome.lock().as_ref().is_some_and(Result::is_err),
            "crash seed {crash_seed}: the pass did not crash: {:?}",
            outcome.lock()
        );
        assert_eq!(sim.stats().crashes, 1);
        drop(log);
        sim.clear_faults();
        let reopened = Log::open(DIR, config.clone()).unwrap();
        let records: Vec<LogRecord> = reopened
            .records(0, ReadBound::LogEnd)
            .collect::<partlog::Result<_>>()
            .unwrap();
        for (offset, rec) in acknowledged.iter().enumerate() {
            assert!(
                records
                    .iter()
                    .any(|r| r.offset == offset as i64 && Rec::from_log(r.clone()) == *rec),
                "crash seed {crash_seed}: acknowledged record {offset} is lost"
            );
        }
        reopened.close().unwrap();
        let report = verify_dir(DIR, &config).unwrap();
        if report.findings.iter().any(|f| f.severity != Severity::Note) {
            corrupt.push((crash_seed, report.findings));
        }
    }
    assert!(corrupt.is_empty(), "{corrupt:#?}");
}

/// A compaction pass first makes everything below its cleanable range durable; a truncation
/// that took offsets of that range while the pass's sync ran failed the pass with
/// `Error::Truncated` (PARTLOG_CRASH_MATRIX_CONCURRENT_SEED=35), where a truncation noticed a
/// moment later makes it return `Ok` with nothing cleaned. Overtaken either way, it returns `Ok`
/// now. The flusher is held inside its recovery-point work so that the pass's sync is the one
/// that syncs the sealed segment, and the truncation runs just before that sync.
#[test]
fn a_truncation_during_a_compaction_passs_recovery_point_sync_cleans_nothing_and_is_no_error() {
    let case = Case {
        seed: 35,
        compacted: true,
        flush: 0,
        segment_bytes: 1024,
        retention_bytes: -1,
        appends: 0,
        bursts: 0,
        cuts: 0,
        passes: 0,
        pooled: false,
    };
    let clock = Arc::new(ManualClock::new(T0));
    let sim = SimStorage::new(case.seed).with_clock(clock.clone());
    let hooked = Arc::new(Hooked {
        inner: Arc::new(sim.clone()),
        hook: Arc::new(parking_lot::Mutex::new(None)),
    });
    let config = case.config_on(hooked.clone(), &clock);
    let log = Arc::new(Log::open(DIR, config.clone()).unwrap());
    let record = |n: i64, key: &str| Rec {
        key: key.as_bytes().to_vec(),
        value: Some(format!("value {n}").into_bytes()),
        timestamp: T0 + n,
    };
    for n in 0..5 {
        log.append(&[record(n, ["a", "b"][n as usize % 2]).new_record()])
            .unwrap();
    }
    // Hold the flusher in its next recovery-point checkpoint, which syncs the active indexes
    // first (outside the writer lock), until the pass is done.
    let gate = Arc::new((
        parking_lot::Mutex::new((false, false)),
        parking_lot::Condvar::new(),
    ));
    let held = Arc::clone(&gate);
    hooked.arm(
        On::SyncData,
        "00000000000000000000.index".into(),
        Box::new(move || {
            let (state, changed) = &*held;
            let mut state = state.lock();
            state.0 = true;
            changed.notify_all();
            while !state.1 {
                changed.wait(&mut state);
            }
        }),
    );
    // A durable offset above the recorded point, and the clock past `recovery.point.ms`: the
    // flusher's next checkpoint is due.
    log.append(&[record(5, "b").new_record()]).unwrap();
    log.wait_durable(5).unwrap();
    {
        let (state, changed) = &*gate;
        let mut state = state.lock();
        while !state.0 {
            // The flusher looks at the manual clock on its own ticks: move it on until then.
            clock.advance(5);
            changed.wait_for(&mut state, Duration::from_millis(10));
        }
    }
    // Unsynced records, then a roll: the segment at 0 is sealed with them, not yet synced.
    for n in 6..9 {
        log.append(&[record(n, ["a", "b"][n as usize % 2]).new_record()])
            .unwrap();
    }
    clock.advance(2 * SEGMENT_MS);
    log.append(&[record(2 * SEGMENT_MS, "c").new_record()])
        .unwrap();
    assert_eq!(log_files(&sim).len(), 2, "the append rolled");
    assert!(log.durable_offset() < 9);
    let weak = Arc::downgrade(&log);
    hooked.arm(
        On::SyncAll,
        "00000000000000000000.log".into(),
        Box::new(move || {
            if let Some(log) = weak.upgrade() {
                assert_eq!(log.truncate_to(1).unwrap(), 1);
            }
        }),
    );
    let result = log.compact();
    let ran = hooked.hook.lock().is_none();
    {
        let (state, changed) = &*gate;
        state.lock().1 = true;
        changed.notify_all();
    }
    assert!(ran, "the pass never synced the sealed segment");
    let stats = result.expect("a pass overtaken by a truncation is no error");
    assert_eq!(stats.segments_cleaned, 0);
    assert_eq!(log.log_end_offset(), 1);
    let records: Vec<LogRecord> = log
        .records(0, ReadBound::LogEnd)
        .collect::<partlog::Result<_>>()
        .unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(Rec::from_log(records[0].clone()), record(0, "a"));
}

/// The finding of PARTLOG_CRASH_MATRIX_CONCURRENT_SEED=8172 (CRASH_AT=Sync:40): after a crash
/// inside a compaction pass's swap, the reopened log started at 21, the cleaned segment 0 gone.
/// Another thread's file sync crashed the machine just after the pass renamed `0.log.cleaned` to
/// `.swap` and before its directory fsync; the crash image undid that rename. The dead process
/// then went on, since the simulator kills handles but not path operations: its directory fsync
/// succeeded on the post-crash image, it renamed the old segment 0 `.deleted`, and its rename of
/// the `.swap` failed with NotFound. The next open reaped `0.log.deleted` and the `.cleaned`
/// copy. No machine runs code after it crashed: the matrix runs the log on [`Fenced`] storage,
/// which fails every operation from the crash on. Here the crash comes just after that rename.
#[test]
fn nothing_the_log_does_after_a_crash_reaches_the_recovered_image() {
    let case = Case {
        seed: 8172,
        compacted: true,
        flush: 0,
        segment_bytes: 1024,
        retention_bytes: -1,
        appends: 0,
        bursts: 0,
        cuts: 0,
        passes: 0,
        pooled: false,
    };
    let clock = Arc::new(ManualClock::new(T0));
    let sim = SimStorage::new(case.seed).with_clock(clock.clone());
    let hooked = Arc::new(Hooked {
        inner: Arc::new(Fenced::new(Arc::new(sim.clone()), sim.clone())),
        hook: Arc::new(parking_lot::Mutex::new(None)),
    });
    let log = Log::open(DIR, case.config_on(hooked.clone(), &clock)).unwrap();
    let mut rng = seeded(case.seed, 1);
    let mut latest: BTreeMap<Vec<u8>, (i64, Rec)> = BTreeMap::new();
    for n in 0..60 {
        let rec = Rec::make(Who::Appender, n, &mut rng, false);
        let offset = log.append(&[rec.new_record()]).unwrap().first_offset;
        latest.insert(rec.key.clone(), (offset, rec));
    }
    log.wait_durable(log.log_end_offset() - 1).unwrap();
    assert!(log_files(&sim).len() >= 3);
    let crashed = sim.clone();
    hooked.arm(
        On::Renamed,
        "00000000000000000000.log.swap".into(),
        Box::new(move || {
            crashed.crash_with(&CrashConfig::lose_unsynced());
        }),
    );
    assert!(log.compact().is_err(), "the pass crashed");
    assert!(hooked.hook.lock().is_none(), "the swap never began");
    assert_eq!(sim.stats().crashes, 1);
    drop(log);
    let config = case.config(&sim, &clock);
    let reopened = Log::open(DIR, config.clone()).unwrap();
    assert_eq!(reopened.log_start_offset(), 0, "the log start moved");
    let records: BTreeMap<i64, Rec> = reopened
        .records(0, ReadBound::LogEnd)
        .map(|r| r.map(|r| (r.offset, Rec::from_log(r))))
        .collect::<partlog::Result<_>>()
        .unwrap();
    for (offset, rec) in latest.values() {
        assert_eq!(
            records.get(offset),
            Some(rec),
            "the latest value of a key, at {offset}, is lost"
        );
    }
    reopened.close().unwrap();
    let report = verify_dir(DIR, &config).unwrap();
    assert!(
        report.findings.iter().all(|f| f.severity == Severity::Note),
        "{:?}",
        report.findings
    );
}

// ---------------------------------------------------------------------------------------------
// `read_committed` readers while compaction passes and retention swap segments out (issue 29,
// item 15), crashed at a random storage operation as the matrix above is.

/// The `read_committed` workload: a writer of interleaved transactions (each a fresh producer,
/// committed or aborted as the seed decides, the fate written into every record's value) and
/// plain records; one or two readers looping over `committed_records`; a maintainer running
/// compaction passes (a compacted log) or retention by `retention.bytes` (a delete-policy log),
/// rolls, and clock steps. A reader must never be handed a record of an aborted transaction,
/// and must fail only as a moved log start explains (`OffsetOutOfRange`). After the crash the
/// recovered log must verify, open under `RecoveryMode::Fail`, and serve no aborted record to
/// `committed_records` either.
///
/// Scale and replay as the matrix above (`PARTLOG_CRASH_MATRIX_CONCURRENT_CASES`, `_SECS`,
/// `_FIRST_SEED`, `_SEED` with `_CRASH_AT`); run it alone with the filter `read_committed_matrix`.
mod read_committed_matrix {
    use super::*;
    use partlog::{BatchBuilder, Compression, ControlRecordType};
    use std::sync::atomic::AtomicBool;

    /// A record's fate, the first byte of its value.
    const ABORTED: u8 = b'A';
    const COMMITTED: u8 = b'C';
    const PLAIN: u8 = b'P';

    /// Everything a seed decides.
    #[derive(Debug, Clone)]
    struct TxnCase {
        seed: u64,
        compacted: bool,
        segment_bytes: u32,
        transactions: usize,
        passes: usize,
        readers: usize,
    }

    impl TxnCase {
        fn from_seed(seed: u64) -> TxnCase {
            let mut rng = seeded(seed, 1000);
            TxnCase {
                seed,
                compacted: rng.chance(50),
                segment_bytes: [1024, 1536][rng.below(2) as usize],
                transactions: 6 + rng.below(10) as usize,
                passes: 4 + rng.below(8) as usize,
                readers: 1 + rng.below(2) as usize,
            }
        }

        fn config_on(&self, storage: Arc<dyn Storage>, clock: &Arc<ManualClock>) -> LogConfig {
            LogConfig::builder_for_tests()
                .segment_bytes(self.segment_bytes)
                .segment_ms(SEGMENT_MS)
                .index_interval_bytes(128)
                .segment_index_bytes(96)
                .cleanup_policy(if self.compacted {
                    CleanupPolicy::COMPACT
                } else {
                    CleanupPolicy::DELETE
                })
                .retention_ms(-1)
                .retention_bytes(if self.compacted { -1 } else { 2048 })
                .delete_retention_ms(0)
                .producer_id_expiration_ms(i64::MAX / 4)
                .flush_policy(FlushPolicy::EveryMessages(
                    std::num::NonZeroU64::new(3).unwrap(),
                ))
                .recovery_point_ms(1)
                .recovery_mode(RecoveryMode::Fail)
                .storage(storage)
                .clock(clock.clone())
                .build()
                .unwrap()
        }
    }

    /// What the threads share.
    struct TxnCtx<'a> {
        case: &'a TxnCase,
        log: &'a Arc<Log>,
        sim: &'a SimStorage,
        clock: &'a ManualClock,
        /// Set once the writer is done.
        written: AtomicBool,
        /// Errors no race explains, met before the crash, and aborted records read.
        failures: parking_lot::Mutex<Vec<String>>,
        /// `read_committed` records the readers were handed.
        records_read: AtomicU64,
    }

    impl TxnCtx<'_> {
        fn crashed(&self) -> bool {
            self.sim.stats().crashes > 0
        }

        /// Notes a failure unless the machine crashed; true if the thread should stop.
        fn failed(&self, what: String) -> bool {
            if !self.crashed() {
                self.failures.lock().push(what);
            }
            true
        }
    }

    /// An open transaction: its producer, its fate, its next sequence number.
    struct OpenTxn {
        producer_id: i64,
        aborts: bool,
        sequence: i32,
        number: usize,
    }

    fn value(fate: u8, number: usize, n: u64) -> Vec<u8> {
        let mut value = vec![fate];
        value.extend_from_slice(
            format!("/{number}/{n}/{}", "v".repeat((n % 19) as usize)).as_bytes(),
        );
        value
    }

    fn txn_writer(ctx: &TxnCtx<'_>) {
        let mut rng = seeded(ctx.case.seed, 1001);
        let mut open: Vec<OpenTxn> = Vec::new();
        let mut begun = 0;
        let mut n = 0u64;
        let timestamp = |n: u64| T0 - 1_000_000 + n as i64;
        while begun < ctx.case.transactions || !open.is_empty() {
            n += 1;
            let choice = rng.below(10);
            let result = if choice < 3 && begun < ctx.case.transactions && open.len() < 3 {
                open.push(OpenTxn {
                    producer_id: 1000 + begun as i64,
                    aborts: rng.chance(50),
                    sequence: 0,
                    number: begun,
                });
                begun += 1;
                Ok(())
            } else if choice < 7 && !open.is_empty() {
                let which = rng.below(open.len() as u64) as usize;
                let txn = &mut open[which];
                let fate = if txn.aborts { ABORTED } else { COMMITTED };
                let mut builder = BatchBuilder::new(Compression::None)
                    .producer(txn.producer_id, 0, txn.sequence)
                    .transactional(true);
                let count = 1 + rng.below(3);
                for i in 0..count {
                    let key = format!("k{}", rng.below(KEYS));
                    builder.push(&NewRecord::new(
                        timestamp(n * 4 + i),
                        Some(key.as_bytes()),
                        Some(&value(fate, txn.number, n * 4 + i)),
                    ));
                }
                txn.sequence += count as i32;
                builder
                    .build()
                    .and_then(|batch| ctx.log.append_batch(&batch))
                    .map(|_| ())
            } else if choice < 9 && !open.is_empty() {
                let txn = open.remove(rng.below(open.len() as u64) as usize);
                let marker = if txn.aborts {
                    ControlRecordType::Abort
                } else {
                    ControlRecordType::Commit
                };
                ctx.log
                    .append_marker(txn.producer_id, 0, marker, 0)
                    .map(|_| ())
            } else {
                let key = format!("k{}", rng.below(KEYS));
                ctx.log
                    .append(&[NewRecord::new(
                        timestamp(n * 4),
                        Some(key.as_bytes()),
                        Some(&value(PLAIN, 0, n * 4)),
                    )])
                    .map(|_| ())
            };
            if let Err(error) = result
                && ctx.failed(format!(
                    "the transactional writer failed without a crash: {error}"
                ))
            {
                break;
            }
        }
        ctx.written.store(true, Ordering::SeqCst);
    }

    fn committed_reader(ctx: &TxnCtx<'_>) {
        let mut position = ctx.log.log_start_offset();
        for _ in 0..20_000 {
            let written = ctx.written.load(Ordering::SeqCst);
            let mut progressed = false;
            let mut records = ctx.log.committed_records(position, ReadBound::LogEnd);
            for record in records.by_ref().take(16) {
                match record {
                    Ok(record) => {
                        let value = record.value.as_deref().unwrap_or_default();
                        if value.first() == Some(&ABORTED) {
                            ctx.failed(format!(
                                "read_committed from {position} returned offset {}, of an aborted \
                                 transaction: {}",
                                record.offset,
                                String::from_utf8_lossy(value)
                            ));
                            return;
                        }
                        if record.offset < position {
                            ctx.failed(format!(
                                "read_committed from {position} returned offset {} below it",
                                record.offset
                            ));
                            return;
                        }
                        position = record.offset + 1;
                        progressed = true;
                        ctx.records_read.fetch_add(1, Ordering::Relaxed);
                    }
                    // Retention moved the start past the reader: on from there.
                    Err(Error::OffsetOutOfRange { start, .. }) if position < start => {
                        position = start;
                        progressed = true;
                        break;
                    }
                    Err(error) => {
                        if ctx.crashed() {
                            return;
                        }
                        ctx.failed(format!("read_committed from {position} failed: {error:?}"));
                        return;
                    }
                }
            }
            // Past aborted data and markers, which it skipped without returning a record.
            if records.position() > position {
                position = records.position();
                progressed = true;
            }
            if ctx.crashed() || written && !progressed && position >= ctx.log.last_stable_offset() {
                return;
            }
            if !progressed {
                std::thread::yield_now();
            }
        }
    }

    fn txn_maintainer(ctx: &TxnCtx<'_>) {
        let mut rng = seeded(ctx.case.seed, 1002);
        for _ in 0..ctx.case.passes {
            // Paced on the writer: a pass every few appends while it writes.
            let target = ctx.log.log_end_offset() + 3 + rng.below(8) as i64;
            while !ctx.written.load(Ordering::SeqCst)
                && !ctx.crashed()
                && ctx.log.log_end_offset() < target
            {
                let _ = ctx.log.wait_for_data(target - 1, Duration::from_millis(5));
            }
            let choice = rng.below(8);
            let (what, result) = if choice < 2 {
                ctx.clock.advance(SEGMENT_MS + 1);
                ("a clock step", Ok(()))
            } else if choice < 3 {
                ("roll", ctx.log.roll().map(|_| ()))
            } else if ctx.case.compacted {
                ("compact", ctx.log.compact().map(|_| ()))
            } else {
                ("enforce_retention", ctx.log.enforce_retention().map(|_| ()))
            };
            if let Err(error) = result
                && ctx.failed(format!("{what} failed without a crash: {error}"))
            {
                return;
            }
        }
    }

    /// Runs `case`, crashing just before the `nth` operation of kind `op` (or after everything),
    /// then checks the recovered log. Returns the simulator's counters.
    fn run_txn_case(case: &TxnCase, crash_at: Option<(FaultOp, u64)>) -> Result<SimStats, Failure> {
        let clock = Arc::new(ManualClock::new(T0));
        let sim = SimStorage::new(case.seed).with_clock(clock.clone());
        if let Some((op, nth)) = crash_at {
            let image = CrashConfig::random().seed(case.seed ^ nth.rotate_left(17) ^ op as u64);
            sim.inject(FaultRule::crash(op, nth).crash_config(image));
        }
        let config = case.config_on(Arc::new(sim.clone()), &clock);
        let fenced = Arc::new(Fenced::new(Arc::new(sim.clone()), sim.clone()));
        let mut failures = Vec::new();
        let mut records_read = 0;
        match Log::open(DIR, case.config_on(fenced, &clock)) {
            Ok(log) => {
                let log = Arc::new(log);
                let ctx = TxnCtx {
                    case,
                    log: &log,
                    sim: &sim,
                    clock: &clock,
                    written: AtomicBool::new(false),
                    failures: parking_lot::Mutex::new(Vec::new()),
                    records_read: AtomicU64::new(0),
                };
                std::thread::scope(|scope| {
                    let mut threads = vec![
                        scope.spawn(|| txn_writer(&ctx)),
                        scope.spawn(|| txn_maintainer(&ctx)),
                    ];
                    for _ in 0..case.readers {
                        threads.push(scope.spawn(|| committed_reader(&ctx)));
                    }
                    for thread in threads {
                        thread.join().expect("a case thread panicked");
                    }
                });
                failures = ctx.failures.into_inner();
                records_read = ctx.records_read.load(Ordering::Relaxed);
                if sim.stats().crashes == 0 {
                    sim.clear_faults();
                    sim.crash_with(&CrashConfig::random().seed(case.seed.rotate_left(7)));
                }
                drop(log);
            }
            Err(error) => check!(
                sim.stats().crashes > 0,
                "open failed without a crash: {error}"
            ),
        }
        sim.clear_faults();
        let stats = sim.stats();
        check!(
            failures.is_empty(),
            "before the crash: {}",
            failures.join("; ")
        );
        READ_COMMITTED_RECORDS.fetch_add(records_read, Ordering::Relaxed);
        check_txn_recovered(&config)?;
        Ok(stats)
    }

    /// The recovered log verifies, opens under `RecoveryMode::Fail`, serves no aborted record to
    /// `committed_records`, and closes clean.
    fn check_txn_recovered(config: &LogConfig) -> Result<(), Failure> {
        match verify_dir(DIR, config) {
            Ok(report) => {
                let corrupt: Vec<_> = report.findings_of(Severity::Corruption).collect();
                check!(corrupt.is_empty(), "verify: {corrupt:?}");
            }
            // A crash inside the first open may leave no directory, or no segment.
            Err(_) => return Ok(()),
        }
        let log = Log::open(DIR, config.clone()).map_err(|e| format!("reopen: {e}"))?;
        for record in log.committed_records(log.log_start_offset(), ReadBound::LogEnd) {
            let record = record.map_err(|e| format!("read_committed after recovery: {e}"))?;
            let value = record.value.unwrap_or_default();
            check!(
                value.first() != Some(&ABORTED),
                "after recovery, read_committed returned offset {} of an aborted transaction: {}",
                record.offset,
                String::from_utf8_lossy(&value)
            );
        }
        log.close().map_err(|e| format!("close: {e}"))?;
        drop(log);
        let report = verify_dir(DIR, config).map_err(|e| format!("verify after close: {e}"))?;
        check!(
            report.findings.iter().all(|f| f.severity == Severity::Note),
            "after a clean close: {:?}",
            report.findings
        );
        Ok(())
    }

    /// A dry run of the case with seed `seed`, then crashes at points drawn from it (or at
    /// `fixed`). Returns how many runs it made.
    fn run_txn_matrix_case(seed: u64, fixed: Option<(FaultOp, u64)>) -> Result<usize, Failure> {
        let case = TxnCase::from_seed(seed);
        let fail = |point: Option<(FaultOp, u64)>, failure: Failure| {
            let replay = match point {
                Some((op, nth)) => {
                    format!(" PARTLOG_CRASH_MATRIX_CONCURRENT_CRASH_AT={op:?}:{nth}")
                }
                None => " (the dry run: a crash after every thread was done)".to_string(),
            };
            format!(
                "PARTLOG_CRASH_MATRIX_CONCURRENT_SEED={seed}{replay} (filter: \
                 read_committed_matrix)\n{case:?}\n{failure}"
            )
        };
        if let Some(point) = fixed {
            run_txn_case(&case, Some(point)).map_err(|f| fail(Some(point), f))?;
            return Ok(1);
        }
        let stats = run_txn_case(&case, None).map_err(|f| fail(None, f))?;
        let mut rng = seeded(seed, 1099);
        for _ in 0..CRASHES_PER_CASE {
            let point = pick_crash_point(&stats, &mut rng);
            run_txn_case(&case, Some(point)).map_err(|f| fail(Some(point), f))?;
        }
        Ok(1 + CRASHES_PER_CASE)
    }

    /// Records the readers were handed, over the runs of this process.
    static READ_COMMITTED_RECORDS: AtomicU64 = AtomicU64::new(0);

    #[test]
    fn read_committed_readers_never_see_aborted_data_while_compaction_and_retention_run_and_survive_a_crash()
     {
        if let Some(seed) = env_u64("PARTLOG_CRASH_MATRIX_CONCURRENT_SEED") {
            let fixed = std::env::var("PARTLOG_CRASH_MATRIX_CONCURRENT_CRASH_AT")
                .ok()
                .map(|text| parse_crash_point(&text).expect("CRASH_AT is <kind>:<n>, as printed"));
            if let Err(failure) = run_txn_matrix_case(seed, fixed) {
                panic!("{failure}");
            }
            return;
        }
        let cases = env_u64("PARTLOG_CRASH_MATRIX_CONCURRENT_CASES").unwrap_or(24);
        let deadline = env_u64("PARTLOG_CRASH_MATRIX_CONCURRENT_SECS")
            .map(|secs| Instant::now() + Duration::from_secs(secs));
        let first_seed = env_u64("PARTLOG_CRASH_MATRIX_CONCURRENT_FIRST_SEED").unwrap_or(0);
        let mut seed = first_seed;
        let mut runs = 0;
        loop {
            match deadline {
                Some(deadline) if Instant::now() >= deadline => break,
                None if seed - first_seed >= cases => break,
                _ => {}
            }
            match run_txn_matrix_case(seed, None) {
                Ok(made) => runs += made,
                Err(failure) => panic!("{failure}"),
            }
            seed += 1;
        }
        let read = READ_COMMITTED_RECORDS.load(Ordering::Relaxed);
        println!(
            "read_committed matrix: {} cases (seeds {first_seed}..{seed}), {runs} crashes, all \
             recovered; {read} committed records read while passes ran, none aborted",
            seed - first_seed
        );
        assert!(runs > 0 && read > 0);
    }
}
