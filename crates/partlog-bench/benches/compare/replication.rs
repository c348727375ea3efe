//! The replication rows (issue 16's performance targets): the follower append, appends at a
//! leader epoch, and the leader's read for a follower, each against the plain log path in the
//! same run.
//!
//! - `replication_append_as_follower`: the batches of a leader's log as its reads return them
//!   (`Log::read` of 1 MiB, Kafka's `replica.fetch.max.bytes`: about ten 100 × 1 KiB batches a
//!   call), appended with `append_as_follower`, one call per read; against
//!   `append_batch_trusted` of the same batches, one call per batch.
//! - `replication_leader_epoch`: `append_batch` of 100 × 1 KiB batches on a log that is leader
//!   of a fixed epoch (every batch stamped with it, the cache consulted per batch), against a
//!   bare log (stamps -1). The cost of one epoch change, `become_leader(e + 1)` (one
//!   synchronous rewrite of `leader-epoch-checkpoint`: temporary file, fsync, rename, directory
//!   fsync), is reported beside the row in µs.
//! - `replication_read_for_follower`: a follower's sequential fetches through
//!   `Partition::read_for_follower` (epoch check, fetch state, high watermark), against
//!   `Log::read` over the same range with the same max bytes.

use std::fs;
use std::sync::Arc;
use std::time::Instant;

use partlog::replica::{
    FollowerFetch, FollowerRead, Partition, REPLICA_FETCH_MAX_BYTES_DEFAULT, ReplicaConfig,
};
use partlog::unstable::SystemClock;
use partlog::{BatchHeader, FlushPolicy, Log, ReadBound};

use super::{
    Ctx, Outcome, Rep, config, median, one_kib_batch, pairs, sync_all_filesystems, throughput_row,
    write_rep_batches,
};

/// The leader epoch the leader logs of these rows are stamped with.
const LEADER_EPOCH: i32 = 3;
/// How many epoch changes the epoch-change figure times.
const EPOCH_CHANGES: i32 = 21;

/// Writes `write_rep_batches()` batches of 100 × 1 KiB to a fresh log that leads
/// [`LEADER_EPOCH`], and returns it.
fn leader_log(ctx: &Ctx, name: &str) -> Log {
    let dir = ctx.fresh_dir(name);
    let log = Log::open(&dir, config(FlushPolicy::OsDecides)).expect("open the leader");
    log.become_leader(LEADER_EPOCH).expect("become_leader");
    let batch = one_kib_batch();
    for _ in 0..write_rep_batches() {
        log.append_batch(&batch).expect("append_batch");
    }
    log
}

// ---------------------------------------------------------------------------------------------
// append_as_follower against append_batch_trusted.

/// What a follower fetched from the leader: each read's bytes, and where each batch lies in
/// them.
struct Fetched {
    reads: Vec<Vec<u8>>,
    /// `(read, start, end)` of every batch, in offset order.
    batches: Vec<(usize, usize, usize)>,
}

/// Reads the whole leader log as a follower's fetches would, `replica.fetch.max.bytes` a read.
fn fetch_everything(leader: &Log) -> Fetched {
    let mut fetched = Fetched {
        reads: Vec::new(),
        batches: Vec::new(),
    };
    let mut offset = leader.log_start_offset();
    loop {
        let data = leader
            .read(offset, REPLICA_FETCH_MAX_BYTES_DEFAULT, ReadBound::LogEnd)
            .expect("read the leader");
        if data.is_empty() {
            break;
        }
        let bytes = data.bytes().to_vec();
        let mut position = 0;
        while position < bytes.len() {
            let header = BatchHeader::parse(&bytes[position..]).expect("a whole batch");
            assert_eq!(
                header.partition_leader_epoch, LEADER_EPOCH,
                "the leader stamped its epoch"
            );
            let end = position + header.total_size();
            fetched.batches.push((fetched.reads.len(), position, end));
            position = end;
        }
        fetched.reads.push(bytes);
        offset = data.next_offset();
    }
    fetched
}

fn follower_rep(ctx: &Ctx, fetched: &Fetched, as_follower: bool) -> Rep {
    let dir = ctx.fresh_dir(if as_follower { "follower" } else { "trusted" });
    let log = Log::open(&dir, config(FlushPolicy::OsDecides)).expect("open");
    let started = Instant::now();
    if as_follower {
        for read in &fetched.reads {
            log.append_as_follower(read).expect("append_as_follower");
        }
    } else {
        for &(read, start, end) in &fetched.batches {
            log.append_batch_trusted(&fetched.reads[read][start..end])
                .expect("append_batch_trusted");
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let batches = fetched.batches.len() as u64;
    assert_eq!(
        log.log_end_offset(),
        batches as i64 * 100,
        "every batch was written"
    );
    drop(log);
    Rep {
        seconds,
        records: batches * 100,
        user_bytes: batches * 100 * 1024,
    }
}

pub(super) fn row_append_as_follower(ctx: &Ctx) -> Outcome {
    let leader = leader_log(ctx, "leader");
    let fetched = fetch_everything(&leader);
    drop(leader);
    fs::remove_dir_all(ctx.root.join("leader")).ok();
    let reads = fetched.reads.len() as f64;
    let batches = fetched.batches.len() as f64;
    let (a, b, ratio, _) = pairs(
        ctx,
        || follower_rep(ctx, &fetched, true),
        || follower_rep(ctx, &fetched, false),
        Rep::records_per_second,
    );
    let mut outcome = throughput_row(
        "replication: append_as_follower of a leader's 1 MiB reads of 100 x 1 KiB batches",
        "append_batch_trusted, the same batches, one call each",
        a,
        b,
        ratio,
        0.9,
        ">= 0.9",
        "no",
    );
    if let Outcome::Measured(row) = &mut outcome {
        row.extra.push(("batches_per_call".into(), batches / reads));
    }
    outcome
}

// ---------------------------------------------------------------------------------------------
// Appends at a fixed leader epoch against a bare log, and the cost of an epoch change.

fn epoch_append_rep(ctx: &Ctx, batch: &[u8], leader: bool) -> Rep {
    let dir = ctx.fresh_dir(if leader { "leader" } else { "bare" });
    let log = Log::open(&dir, config(FlushPolicy::OsDecides)).expect("open");
    if leader {
        log.become_leader(LEADER_EPOCH).expect("become_leader");
    }
    let batches = write_rep_batches();
    let started = Instant::now();
    for _ in 0..batches {
        log.append_batch(batch).expect("append_batch");
    }
    let seconds = started.elapsed().as_secs_f64();
    let expected = if leader { vec![LEADER_EPOCH] } else { vec![] };
    let epochs: Vec<i32> = log
        .leader_epoch_entries()
        .iter()
        .map(|entry| entry.epoch)
        .collect();
    assert_eq!(epochs, expected, "one epoch entry, or none for a bare log");
    drop(log);
    Rep {
        seconds,
        records: batches as u64 * 100,
        user_bytes: batches as u64 * 100 * 1024,
    }
}

/// Times `become_leader(e)` for [`EPOCH_CHANGES`] new epochs, one batch appended between them
/// (each epoch starts at a new offset, as after a real election); returns (median, max) in µs.
fn epoch_change_micros(ctx: &Ctx, batch: &[u8]) -> (f64, f64) {
    let dir = ctx.fresh_dir("epoch-changes");
    let log = Log::open(&dir, config(FlushPolicy::OsDecides)).expect("open");
    let mut micros = Vec::new();
    for epoch in 0..EPOCH_CHANGES {
        log.append_batch(batch).expect("append_batch");
        let started = Instant::now();
        log.become_leader(epoch).expect("become_leader");
        micros.push(started.elapsed().as_secs_f64() * 1e6);
    }
    assert_eq!(
        log.leader_epoch_entries().len(),
        EPOCH_CHANGES as usize,
        "every change added an entry"
    );
    drop(log);
    fs::remove_dir_all(&dir).ok();
    let max = micros.iter().copied().fold(0.0, f64::max);
    (median(&mut micros), max)
}

pub(super) fn row_leader_epoch(ctx: &Ctx) -> Outcome {
    let batch = one_kib_batch();
    let (a, b, ratio, _) = pairs(
        ctx,
        || epoch_append_rep(ctx, &batch, true),
        || epoch_append_rep(ctx, &batch, false),
        Rep::records_per_second,
    );
    let (change_median, change_max) = epoch_change_micros(ctx, &batch);
    let mut outcome = throughput_row(
        "replication: append_batch after become_leader(e), fixed epoch, 100 x 1 KiB batches",
        "append_batch on a bare log (epoch -1)",
        a,
        b,
        ratio,
        0.98,
        ">= 0.98",
        "no",
    );
    if let Outcome::Measured(row) = &mut outcome {
        row.extra
            .push(("epoch_change_median_us".into(), change_median));
        row.extra.push(("epoch_change_max_us".into(), change_max));
    }
    outcome
}

// ---------------------------------------------------------------------------------------------
// Partition::read_for_follower against Log::read.

/// The follower that fetches in the read row.
const FOLLOWER_ID: i32 = 1;

/// Passes over the whole log in one rep of the read row: a pass of 128 MiB takes tens of ms.
const READ_PASSES: usize = 4;

/// Reads the whole log [`READ_PASSES`] times from its start: through a fresh leader
/// [`Partition`] as follower [`FOLLOWER_ID`] when `partition`, else with `Log::read`; same max
/// bytes, same range. Only the fetch loops are timed.
fn sequential_read_rep(log: &Arc<Log>, partition: bool) -> Rep {
    let mut rep = Rep::default();
    for _ in 0..READ_PASSES {
        let pass = sequential_read_pass(log, partition);
        rep.seconds += pass.seconds;
        rep.records += pass.records;
        rep.user_bytes += pass.user_bytes;
    }
    rep
}

fn sequential_read_pass(log: &Arc<Log>, partition: bool) -> Rep {
    // A fresh partition per pass, so that every pass starts from the same fetch state; making
    // it leader of the log's own epoch again leaves the log as it is.
    let leader = partition.then(|| {
        let leader = Partition::new(
            Arc::clone(log),
            0,
            ReplicaConfig::default(),
            Arc::new(SystemClock),
        )
        .expect("a partition");
        leader
            .become_leader(LEADER_EPOCH, 0, &[0, FOLLOWER_ID], &[0])
            .expect("become_leader");
        leader
    });
    let mut offset = log.log_start_offset();
    let mut last_fetched_epoch = None;
    let mut records = 0i64;
    let started = Instant::now();
    loop {
        let data = if let Some(leader) = &leader {
            let fetch = FollowerFetch {
                replica_id: FOLLOWER_ID,
                fetch_offset: offset,
                last_fetched_epoch,
                current_leader_epoch: Some(LEADER_EPOCH),
                log_start_offset: 0,
                max_bytes: REPLICA_FETCH_MAX_BYTES_DEFAULT,
            };
            match leader.read_for_follower(&fetch).expect("read_for_follower") {
                FollowerRead::Records { data, .. } => data,
                other => panic!("a follower of the leader's own log was answered {other:?}"),
            }
        } else {
            log.read(offset, REPLICA_FETCH_MAX_BYTES_DEFAULT, ReadBound::LogEnd)
                .expect("read")
        };
        if data.is_empty() {
            break;
        }
        records += data.next_offset() - offset;
        offset = data.next_offset();
        last_fetched_epoch = Some(LEADER_EPOCH);
    }
    let seconds = started.elapsed().as_secs_f64();
    assert_eq!(offset, log.log_end_offset(), "read to the log end");
    Rep {
        seconds,
        records: records as u64,
        user_bytes: records as u64 * 1024,
    }
}

pub(super) fn row_read_for_follower(ctx: &Ctx) -> Outcome {
    let log = Arc::new(leader_log(ctx, "read-for-follower"));
    // The log's pages are written back now, not during the first pair's A side.
    sync_all_filesystems();
    let (a, b, ratio, _) = pairs(
        ctx,
        || sequential_read_rep(&log, true),
        || sequential_read_rep(&log, false),
        Rep::records_per_second,
    );
    drop(log);
    fs::remove_dir_all(ctx.root.join("read-for-follower")).ok();
    throughput_row(
        "replication: Partition::read_for_follower, sequential, 1 MiB fetches",
        "Log::read, same range and max bytes",
        a,
        b,
        ratio,
        0.95,
        ">= 0.95",
        "-",
    )
}
