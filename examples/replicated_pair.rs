//! cargo run --release --example replicated_pair
//!
//! Two replicas of one partition in one process. Replica 1 leads and replica 2 follows, each in its own directory, with a fetch loop on a
//! thread carrying the follower's fetches to the leader (partlog moves no bytes between
//! machines: this loop stands in for the caller's transport, and `main` for the controller).
//! `acks=all` appends resolve once the follower has fetched them. Then the leader writes a
//! tail nobody fetches, loses the leadership to replica 2, and becomes its follower: the
//! truncation protocol cuts the tail, and both logs end equal, byte for byte. Prints each
//! step; exits non-zero if a check fails.

mod scratch;

use std::error::Error as StdError;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use partlog::replica::{FetchOutcome, IsrChange, Partition, ReplicaConfig, ReplicaFetcher};
use partlog::unstable::SystemClock;
use partlog::{Acks, BatchBuilder, Compression, Log, LogConfig, NewRecord, ReadBound};

type Result<T> = std::result::Result<T, Box<dyn StdError + Send + Sync>>;

/// How long an acks=all append may wait: generous, for a loaded machine.
const ACK_TIMEOUT: Duration = Duration::from_secs(120);
/// How long an idle fetch waits for new data on the leader before it looks at the stop flag.
const FETCH_WAIT: Duration = Duration::from_millis(100);

fn main() -> ExitCode {
    match run() {
        Ok(()) => {
            println!("replicated_pair: every check passed");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("replicated_pair: FAILED: {error}");
            ExitCode::FAILURE
        }
    }
}

fn check(ok: bool, what: String) -> Result<()> {
    if ok {
        println!("  check: {what}");
        Ok(())
    } else {
        Err(format!("check failed: {what}").into())
    }
}

fn batch(text: &str) -> Result<Vec<u8>> {
    let mut builder = BatchBuilder::new(Compression::None);
    builder.push(&NewRecord::now(None, Some(text.as_bytes())));
    Ok(builder.build()?)
}

/// The follower's fetch loop: fetch, append, and (as the controller) commit every ISR change
/// a fetch proposes; when up to date, wait for the leader's next append.
fn spawn_fetcher(
    leader: Arc<Partition>,
    follower: Arc<Partition>,
    leader_epoch: i32,
    stop: Arc<AtomicBool>,
) -> JoinHandle<Result<ReplicaFetcher>> {
    thread::spawn(move || {
        let id = follower.local_replica_id();
        let mut fetcher = ReplicaFetcher::new(Arc::clone(follower.log()), id, leader_epoch)?;
        while !stop.load(Ordering::Acquire) {
            let proposed = match fetcher.fetch_once(&leader)? {
                FetchOutcome::Truncated { to, done } => {
                    println!("  replica {id}: truncated to {to} (done: {done})");
                    None
                }
                FetchOutcome::Appended {
                    first_offset,
                    log_end_offset,
                    high_watermark,
                    proposed_isr_change,
                } => {
                    println!(
                        "  replica {id}: fetched [{first_offset}, {log_end_offset}), high watermark {high_watermark}"
                    );
                    proposed_isr_change
                }
                FetchOutcome::UpToDate {
                    proposed_isr_change,
                    ..
                } => {
                    let end = fetcher.log().log_end_offset();
                    leader.log().wait_for_data(end, FETCH_WAIT)?;
                    proposed_isr_change
                }
            };
            if let Some(change) = proposed {
                commit(&leader, &change)?;
            }
        }
        Ok(fetcher)
    })
}

fn commit(leader: &Partition, change: &IsrChange) -> Result<()> {
    leader.complete_isr_change(change, true)?;
    println!(
        "  controller: ISR change {:?} to {:?} committed (partition epoch {})",
        change.kind,
        change.new_isr,
        leader.partition_epoch()
    );
    Ok(())
}

fn join(handle: JoinHandle<Result<ReplicaFetcher>>) -> Result<ReplicaFetcher> {
    handle
        .join()
        .map_err(|_| "the fetch thread panicked".to_string())?
}

fn whole_log(log: &Log) -> Result<Vec<u8>> {
    Ok(log
        .read(0, 64 * 1024 * 1024, ReadBound::LogEnd)?
        .bytes()
        .to_vec())
}

fn run() -> Result<()> {
    let (dir1, dir2) = (
        scratch::ScratchDir::new("replica-1")?,
        scratch::ScratchDir::new("replica-2")?,
    );
    let config = ReplicaConfig {
        min_insync_replicas: 2,
        ..ReplicaConfig::default()
    };
    let replica1 = Arc::new(Partition::new(
        Arc::new(Log::open(dir1.path(), LogConfig::default())?),
        1,
        config,
        Arc::new(SystemClock),
    )?);
    let replica2 = Arc::new(Partition::new(
        Arc::new(Log::open(dir2.path(), LogConfig::default())?),
        2,
        config,
        Arc::new(SystemClock),
    )?);

    println!(
        "step 1: replica 1 leads epoch 1, replica 2 follows; ISR [1, 2], min.insync.replicas 2"
    );
    replica1.become_leader(1, 1, &[1, 2], &[1, 2])?;
    replica2.become_follower(1, 1, &[1, 2], &[1, 2])?;
    let stop = Arc::new(AtomicBool::new(false));
    let fetch_thread = spawn_fetcher(
        Arc::clone(&replica1),
        Arc::clone(&replica2),
        1,
        Arc::clone(&stop),
    );
    for i in 0..5 {
        let ack = replica1.append_as_leader(&batch(&format!("committed {i}"))?, Acks::All)?;
        let info = ack.wait(ACK_TIMEOUT)?;
        println!(
            "  acks=all append {i}: offset {} committed, leader high watermark {}",
            info.last_offset,
            replica1.high_watermark()
        );
        check(
            replica1.high_watermark() > info.last_offset,
            format!("the high watermark passed offset {}", info.last_offset),
        )?;
    }
    stop.store(true, Ordering::Release);
    join(fetch_thread)?;
    let committed_end = replica1.log().log_end_offset();
    check(
        replica2.log().log_end_offset() == committed_end,
        format!("the follower holds all {committed_end} committed records"),
    )?;

    println!("step 2: replica 1 writes a tail nobody fetches (acks=1)");
    for i in 0..2 {
        let info = replica1
            .append_as_leader(&batch(&format!("lost {i}"))?, Acks::One)?
            .wait(ACK_TIMEOUT)?;
        println!(
            "  acks=1 append: offset {} (not replicated)",
            info.last_offset
        );
    }
    let divergent_end = replica1.log().log_end_offset();

    println!("step 3: the controller moves the leadership to replica 2 (epoch 2)");
    replica2.become_leader(2, 2, &[1, 2], &[1, 2])?;
    replica1.become_follower(2, 2, &[1, 2], &[1, 2])?;
    let ack = replica2.append_as_leader(&batch("new leader 0")?, Acks::All)?;
    println!(
        "  replica 2 appended at {} in epoch 2; replica 1 ends at {divergent_end}",
        ack.required_offset() - 1
    );

    println!("step 4: replica 1 fetches from replica 2: its tail diverges and is truncated");
    let stop = Arc::new(AtomicBool::new(false));
    let fetch_thread = spawn_fetcher(
        Arc::clone(&replica2),
        Arc::clone(&replica1),
        2,
        Arc::clone(&stop),
    );
    let info = ack.wait(ACK_TIMEOUT)?;
    println!("  acks=all append at {} committed", info.last_offset);
    stop.store(true, Ordering::Release);
    let mut fetcher = join(fetch_thread)?;
    // One more fetch carries the leader's latest high watermark to the follower.
    fetcher.fetch_once(&replica2)?;

    println!("step 5: both logs end equal");
    let (log1, log2) = (replica1.log(), replica2.log());
    check(
        log1.log_end_offset() == log2.log_end_offset(),
        format!(
            "log end offsets {} and {}",
            log1.log_end_offset(),
            log2.log_end_offset()
        ),
    )?;
    check(
        whole_log(log1)? == whole_log(log2)?,
        "the batches are identical, byte for byte".into(),
    )?;
    check(
        log1.leader_epoch_entries() == log2.leader_epoch_entries(),
        format!("the epoch caches agree: {:?}", log2.leader_epoch_entries()),
    )?;
    check(
        log1.high_watermark() == log2.high_watermark(),
        format!(
            "high watermarks {} and {}",
            log1.high_watermark(),
            log2.high_watermark()
        ),
    )?;
    check(
        divergent_end == committed_end + 2 && log1.log_end_offset() == committed_end + 1,
        format!(
            "replica 1's unreplicated tail [{committed_end}, {divergent_end}) gave way to epoch 2's batch"
        ),
    )?;
    log1.close()?;
    log2.close()?;
    Ok(())
}
