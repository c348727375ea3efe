//! A producer thread and a consumer thread on one log. The consumer tails the records the log
//! has made durable (`Log::tail` with `ReadBound::Durable`), so nothing it processes can vanish
//! in a machine crash, and it keeps its position in a `ConsumerPosition`: a file of its own,
//! replaced atomically and durably at each commit, so that a restart resumes exactly after the
//! last record it committed.
//!
//! ```sh
//! cargo run --release --example tail_consumer            # 20000 records
//! cargo run --release --example tail_consumer -- 500     # fewer (CI runs it so)
//! ```
//!
//! The consumer commits its position every 100 records and at the end; then the example
//! "restarts" it, and the restarted consumer finds nothing left to do.

mod scratch;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use partlog::{ConsumerPosition, FlushPolicy, Log, LogConfig, NewRecord, ReadBound};

/// Consumes from the committed position until `until` (exclusive) is processed. Returns the
/// sum of the values processed, so the caller can check none was skipped or repeated.
fn consume(log: &Log, position_file: &Path, until: i64) -> Result<u64, Box<dyn std::error::Error>> {
    let mut position = ConsumerPosition::open(position_file)?;
    let mut next = position.resume_offset(log);
    let mut sum = 0u64;
    let mut since_commit = 0;
    // Blocks for each record until the flusher has made it durable.
    let mut tail = log.tail(next, ReadBound::Durable);
    while next < until {
        let record = tail.next().ok_or("the log closed")??;
        let value = record.value.unwrap_or_default();
        sum += std::str::from_utf8(&value)?.parse::<u64>()?;
        next = record.offset + 1;
        since_commit += 1;
        if since_commit == 100 {
            position.commit(next)?;
            since_commit = 0;
        }
    }
    position.commit(next)?;
    Ok(sum)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let records: u64 = std::env::args().nth(1).map_or(Ok(20_000), |n| n.parse())?;
    let temp = scratch::ScratchDir::new("tail_consumer")?;
    let dir = temp.path().join("events-0");
    let position_file = temp.path().join("consumer.position");
    // Group commit every 5 ms: the producer never waits for a disk flush; the consumer sees
    // records once the flusher has made them durable.
    let config = LogConfig::builder()
        .flush_policy(FlushPolicy::Interval(Duration::from_millis(5)))
        .build()?;
    let log = Arc::new(Log::open(&dir, config)?);

    let producer = {
        let log = Arc::clone(&log);
        std::thread::Builder::new().name("producer".into()).spawn(
            move || -> partlog::Result<()> {
                for n in 0..records {
                    let value = n.to_string();
                    log.append(&[NewRecord::new(
                        1_700_000_000_000 + n as i64,
                        None,
                        Some(value.as_bytes()),
                    )])?;
                }
                Ok(())
            },
        )?
    };
    let consumer = {
        let log = Arc::clone(&log);
        let position_file = position_file.clone();
        std::thread::Builder::new()
            .name("consumer".into())
            .spawn(move || {
                consume(&log, &position_file, records as i64).map_err(|e| e.to_string())
            })?
    };
    producer.join().map_err(|_| "the producer panicked")??;
    let sum = consumer.join().map_err(|_| "the consumer panicked")??;
    assert_eq!(
        sum,
        records * records.saturating_sub(1) / 2,
        "a record was skipped or repeated"
    );
    println!(
        "consumed {records} durable records; position {} committed in {}",
        ConsumerPosition::open(&position_file)?
            .committed()
            .ok_or("no position committed")?,
        position_file.display()
    );

    // A restarted consumer resumes from its committed position: nothing is left to process.
    let again = consume(&log, &position_file, records as i64)?;
    assert_eq!(again, 0);
    println!("after a restart: nothing to reprocess");
    log.close()?;
    Ok(())
}
