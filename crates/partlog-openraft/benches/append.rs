//! The openraft row of crates/partlog-bench/benches/README.md ("Replication (issue 16)"): what
//! one entry per batch costs a Raft log store on partlog.
//!
//! ```sh
//! cargo bench -p partlog-openraft --bench append                    # 7 pairs a row
//! COMPARE_QUICK=1 cargo bench -p partlog-openraft --bench append    # 3 pairs a row
//! ```
//!
//! - `replication_openraft_append`: `PartlogLogStore::append` of 100 entries of 100 B, each
//!   call waiting for its `log_io_completed` callback (fired once the log's group commit made
//!   the last entry durable), against `Log::append_batch` of one batch of the same 100
//!   payloads plus `Log::wait_durable`, on the same kind of log (default `LogConfig`).
//! - `replication_openraft_append_flusher_led`: the same store appends against a reference
//!   that waits for durability as the store does (`Log::durable(..)` awaited, the log's flusher
//!   thread leading the fsync and waking the task) instead of leading the fsync on its own
//!   thread: what is left is the store's own work. No target; it explains the first row.
//! - `replication_openraft_batch_per_entry`: the same two without the fsync (page cache only):
//!   100 one-record batches (one `entry_codec::EntryEncoder` a call, as the store encodes them,
//!   then one `append_as_follower`) against one 100-record batch (`BatchBuilder`, then
//!   `append_batch`). This is the price of
//!   one batch per entry, which exact Raft truncation needs: partlog truncates whole batches.
//!
//! The method is compare.rs's (crates/partlog-bench/benches/README.md): runs alternate A B A B
//! (A is the store, B the plain log), each rep in a fresh directory after `sync`, and a row's
//! ratio is the median of the per-pair ratios, higher is better. Payloads are built before the
//! timer starts on both sides: the store's side times its own encoding (the JSON of each entry,
//! one batch each), the plain side its batch's building from the already serialized payloads.
//! It prints the table line format of compare.rs.

use std::path::PathBuf;
use std::time::Instant;

use openraft::storage::RaftLogStorageExt;
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId};
use partlog::{BatchBuilder, Compression, Log, LogConfig, NewRecord};
use partlog_openraft::PartlogLogStore;
use partlog_openraft::entry_codec::EntryEncoder;
use partlog_openraft::testing::{KvConfig, KvRequest};

/// Entries in one `append` call, and records in the reference's one batch.
const ENTRIES_PER_APPEND: u64 = 100;
/// Bytes of each entry's value.
const VALUE_BYTES: usize = 100;
/// `append` calls per rep of the durable row: each waits for an fsync.
const DURABLE_APPENDS: u64 = 300;
/// `append` calls per rep of the page-cache row.
const PAGE_CACHE_APPENDS: u64 = 3000;
/// A fixed CreateTime for the reference's records.
const TIMESTAMP: i64 = 1_700_000_000_000;

/// One timed run of one side.
#[derive(Clone, Copy, Debug)]
struct Rep {
    seconds: f64,
    records: u64,
}

impl Rep {
    fn records_per_second(&self) -> f64 {
        self.records as f64 / self.seconds
    }
}

/// The run's settings and scratch space.
struct Ctx {
    pairs: usize,
    root: PathBuf,
}

impl Ctx {
    /// A fresh directory for one rep, after the previous rep's files are deleted and synced.
    fn fresh_dir(&self, name: &str) -> PathBuf {
        let dir = self.root.join(name);
        if dir.exists() {
            std::fs::remove_dir_all(&dir).expect("delete the previous rep's files");
        }
        // sync(1) rather than a libc dependency for this crate: the call is outside the timer.
        let synced = std::process::Command::new("sync").status();
        assert!(synced.is_ok_and(|s| s.success()), "sync");
        std::fs::create_dir_all(&dir).expect("create a rep directory");
        dir
    }
}

/// The entries of one `append` call: indexes `first..first + 100`, term 1, leader 1.
fn entries(first: u64) -> Vec<Entry<KvConfig>> {
    (first..first + ENTRIES_PER_APPEND)
        .map(|index| Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
            payload: EntryPayload::Normal(KvRequest::Set {
                key: format!("k{index}"),
                value: "v".repeat(VALUE_BYTES),
            }),
        })
        .collect()
}

/// The serialized payloads of `entries`: what the store writes as each record's value.
fn payloads(entries: &[Entry<KvConfig>]) -> Vec<Vec<u8>> {
    entries
        .iter()
        .map(|entry| serde_json::to_vec(&entry.payload).expect("a payload serializes"))
        .collect()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// Appends `calls` × 100 entries through the store, each call waiting for its callback.
fn store_rep(ctx: &Ctx, calls: u64) -> Rep {
    let dir = ctx.fresh_dir("store");
    let mut store = PartlogLogStore::<KvConfig>::open(&dir, LogConfig::default()).expect("open");
    let all: Vec<Vec<Entry<KvConfig>>> = (0..calls)
        .map(|call| entries(call * ENTRIES_PER_APPEND))
        .collect();
    let runtime = runtime();
    let started = Instant::now();
    runtime.block_on(async {
        for batch in all {
            store.blocking_append(batch).await.expect("append");
        }
    });
    let seconds = started.elapsed().as_secs_f64();
    let records = calls * ENTRIES_PER_APPEND;
    assert!(
        store.log().durable_offset() >= records as i64,
        "every entry durable"
    );
    store.close().expect("close");
    Rep { seconds, records }
}

/// The records of one reference batch: the same payloads as values, no key.
fn reference_batch(payloads: &[Vec<u8>]) -> Vec<u8> {
    let mut builder = BatchBuilder::new(Compression::None);
    for payload in payloads {
        builder.push(&NewRecord::new(TIMESTAMP, None, Some(payload)));
    }
    builder.build().expect("a valid batch")
}

/// Appends `calls` batches of the same 100 payloads, each followed by `wait_durable` when
/// `durable`.
fn log_rep(ctx: &Ctx, calls: u64, durable: bool) -> Rep {
    let dir = ctx.fresh_dir("log");
    let log = Log::open(&dir, LogConfig::default()).expect("open");
    let all: Vec<Vec<Vec<u8>>> = (0..calls)
        .map(|call| payloads(&entries(call * ENTRIES_PER_APPEND)))
        .collect();
    let started = Instant::now();
    for payloads in &all {
        let appended = log
            .append_batch(&reference_batch(payloads))
            .expect("append_batch");
        if durable {
            log.wait_durable(appended.last_offset)
                .expect("wait_durable");
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let records = calls * ENTRIES_PER_APPEND;
    assert_eq!(
        log.log_end_offset(),
        records as i64,
        "every record appended"
    );
    log.close().expect("close");
    Rep { seconds, records }
}

/// [`log_rep`] with the durability wait the store uses: `Log::durable(..)` awaited on a tokio
/// runtime, so that the log's flusher thread leads the fsync and wakes the task.
fn log_rep_flusher_led(ctx: &Ctx, calls: u64) -> Rep {
    let dir = ctx.fresh_dir("log-async");
    let log = Log::open(&dir, LogConfig::default()).expect("open");
    let all: Vec<Vec<Vec<u8>>> = (0..calls)
        .map(|call| payloads(&entries(call * ENTRIES_PER_APPEND)))
        .collect();
    let runtime = runtime();
    let started = Instant::now();
    runtime.block_on(async {
        for payloads in &all {
            let appended = log
                .append_batch(&reference_batch(payloads))
                .expect("append_batch");
            log.durable(appended.last_offset).await.expect("durable");
        }
    });
    let seconds = started.elapsed().as_secs_f64();
    let records = calls * ENTRIES_PER_APPEND;
    assert!(
        log.durable_offset() >= records as i64,
        "every record durable"
    );
    log.close().expect("close");
    Rep { seconds, records }
}

/// Encodes `calls` × 100 entries one batch each, as the store does, and appends each call's
/// batches with one `append_as_follower`, without waiting for durability.
fn encoded_entries_rep(ctx: &Ctx, calls: u64) -> (Rep, f64) {
    let dir = ctx.fresh_dir("entries");
    let log = Log::open(&dir, LogConfig::default()).expect("open");
    let all: Vec<Vec<Entry<KvConfig>>> = (0..calls)
        .map(|call| entries(call * ENTRIES_PER_APPEND))
        .collect();
    let mut bytes = Vec::new();
    let mut written = 0usize;
    let started = Instant::now();
    for entries in &all {
        bytes.clear();
        let mut encoder = EntryEncoder::new();
        for entry in entries {
            encoder.encode(entry, &mut bytes).expect("encode");
        }
        written += log.append_as_follower(&bytes).expect("append").bytes;
    }
    let seconds = started.elapsed().as_secs_f64();
    let records = calls * ENTRIES_PER_APPEND;
    assert_eq!(log.log_end_offset(), records as i64, "every entry appended");
    log.close().expect("close");
    (Rep { seconds, records }, written as f64 / calls as f64)
}

/// One table line: A and B, pairs A B A B, the median of the per-pair ratios.
struct Row {
    workload: &'static str,
    reference_name: &'static str,
    a: Rep,
    b: Rep,
    ratio: f64,
    target: Option<f64>,
    notes: String,
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// Runs `pairs` A B pairs; returns (median A, median B, median of the per-pair ratios).
fn pairs(
    ctx: &Ctx,
    mut a: impl FnMut() -> Rep,
    mut b: impl FnMut() -> Rep,
) -> (Rep, Rep, f64, Vec<f64>) {
    let (mut a_reps, mut b_reps, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ctx.pairs {
        let rep_a = a();
        let rep_b = b();
        ratios.push(rep_a.records_per_second() / rep_b.records_per_second());
        a_reps.push(rep_a);
        b_reps.push(rep_b);
    }
    let median_rep = |reps: &mut Vec<Rep>| {
        reps.sort_by(|x, y| x.records_per_second().total_cmp(&y.records_per_second()));
        reps[reps.len() / 2]
    };
    let raw = ratios.clone();
    let ratio = median(&mut ratios);
    (median_rep(&mut a_reps), median_rep(&mut b_reps), ratio, raw)
}

fn human(value: f64) -> String {
    if value >= 1e6 {
        format!("{:.2} M", value / 1e6)
    } else if value >= 1e3 {
        format!("{:.1} k", value / 1e3)
    } else {
        format!("{value:.2}")
    }
}

fn ratios_text(ratios: &[f64]) -> String {
    let text: Vec<String> = ratios.iter().map(|r| format!("{r:.3}")).collect();
    format!("pair ratios {}", text.join(" "))
}

fn durable_row(ctx: &Ctx) -> Row {
    let (a, b, ratio, raw) = pairs(
        ctx,
        || store_rep(ctx, DURABLE_APPENDS),
        || log_rep(ctx, DURABLE_APPENDS, true),
    );
    let per_call_us = |rep: &Rep| rep.seconds * 1e6 / DURABLE_APPENDS as f64;
    Row {
        workload: "openraft: PartlogLogStore::append of 100 entries x 100 B, callback on durability",
        reference_name: "Log::append_batch of the 100 payloads as one batch + wait_durable",
        a,
        b,
        ratio,
        target: Some(0.8),
        notes: format!(
            "store {:.0} us a call; log {:.0} us a call; {}",
            per_call_us(&a),
            per_call_us(&b),
            ratios_text(&raw)
        ),
    }
}

fn flusher_led_row(ctx: &Ctx) -> Row {
    let (a, b, ratio, raw) = pairs(
        ctx,
        || store_rep(ctx, DURABLE_APPENDS),
        || log_rep_flusher_led(ctx, DURABLE_APPENDS),
    );
    let per_call_us = |rep: &Rep| rep.seconds * 1e6 / DURABLE_APPENDS as f64;
    Row {
        workload: "openraft: the same store appends, against a reference that waits as the store does",
        reference_name: "Log::append_batch of one batch + Log::durable(..).await (flusher-led fsync)",
        a,
        b,
        ratio,
        target: None,
        notes: format!(
            "store {:.0} us a call; log {:.0} us a call; {}",
            per_call_us(&a),
            per_call_us(&b),
            ratios_text(&raw)
        ),
    }
}

fn page_cache_row(ctx: &Ctx) -> Row {
    let mut entry_bytes = 0.0;
    let (a, b, ratio, raw) = pairs(
        ctx,
        || {
            let (rep, bytes) = encoded_entries_rep(ctx, PAGE_CACHE_APPENDS);
            entry_bytes = bytes;
            rep
        },
        || log_rep(ctx, PAGE_CACHE_APPENDS, false),
    );
    let entries = entries(0);
    let one_batch = reference_batch(&payloads(&entries)).len() as f64;
    Row {
        workload: "openraft: one batch per entry, 100 entries x 100 B encoded + append_as_follower, page cache",
        reference_name: "one 100-record batch built + append_batch",
        a,
        b,
        ratio,
        target: None,
        notes: format!(
            "bytes a call {entry_bytes:.0} (100 batches) vs {one_batch:.0} (one batch); {}",
            ratios_text(&raw)
        ),
    }
}

fn main() {
    let quick = std::env::var_os("COMPARE_QUICK").is_some_and(|v| v != "0");
    let scratch = tempfile::Builder::new()
        .prefix("partlog-openraft-bench-")
        .tempdir_in(std::env::var_os("COMPARE_DIR").map_or_else(std::env::temp_dir, PathBuf::from))
        .expect("a scratch directory");
    let ctx = Ctx {
        pairs: if quick { 3 } else { 7 },
        root: scratch.path().to_path_buf(),
    };
    println!(
        "partlog-openraft append: {} pairs a row (A = the store, B = a plain log), scratch in {}",
        ctx.pairs,
        ctx.root.display()
    );
    let started = Instant::now();
    let mut rows = Vec::new();
    for (name, row) in [
        (
            "replication_openraft_append",
            durable_row as fn(&Ctx) -> Row,
        ),
        ("replication_openraft_append_flusher_led", flusher_led_row),
        ("replication_openraft_batch_per_entry", page_cache_row),
    ] {
        let row_started = Instant::now();
        let row = row(&ctx);
        println!(
            "  {name}: ratio {:.3} (target {}), {:.1} s",
            row.ratio,
            row.target.map_or("-".into(), |t| format!(">= {t}")),
            row_started.elapsed().as_secs_f64()
        );
        rows.push(row);
    }
    println!();
    println!(
        "| workload | unit | partlog | reference | reference name | ratio (higher is better) | target | met | roll and close timed | notes |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for row in &rows {
        let (target, met) = match row.target {
            Some(target) if row.ratio >= target => (format!(">= {target}"), "yes"),
            Some(target) => (format!(">= {target}"), "NO"),
            None => ("- (measured, no target)".into(), "-"),
        };
        println!(
            "| {} | records/s | {} | {} | {} | {:.3} | {target} | {met} | no | {} |",
            row.workload,
            human(row.a.records_per_second()),
            human(row.b.records_per_second()),
            row.reference_name,
            row.ratio,
            row.notes
        );
    }
    println!(
        "\n{} rows measured in {:.0} s",
        rows.len(),
        started.elapsed().as_secs_f64()
    );
}
