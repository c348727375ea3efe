//! A producer thread and a consumer thread on one log. The consumer long-polls for records the
//! log has made durable (`ReadBound::Durable`), so nothing it processes can vanish in a machine
//! crash, and it keeps its position in a file of its own, replaced atomically (a temporary file,
//! fsynced, then renamed over the old one), so that a restart resumes exactly after the last
//! record it processed.
//!
//! ```sh
//! cargo run --release --example tail_consumer            # 20000 records
//! cargo run --release --example tail_consumer -- 500     # fewer (CI runs it so)
//! ```
//!
//! The consumer commits its position every 100 records and at the end; then the example
//! "restarts" it, and the restarted consumer finds nothing left to do.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use partlog::{FlushPolicy, Log, LogConfig, NewRecord, ReadBound};

/// Reads the committed position: the next offset to process (0 when there is none yet).
fn load_position(path: &Path) -> std::io::Result<i64> {
    match std::fs::read_to_string(path) {
        Ok(text) => text
            .trim()
            .parse()
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(e),
    }
}

/// Replaces the position file atomically: a crash leaves the old position or the new one,
/// never a torn file. The rename is made durable by syncing the directory.
fn commit_position(path: &Path, next_offset: i64) -> std::io::Result<()> {
    let temporary = path.with_extension("tmp");
    let mut file = File::create(&temporary)?;
    writeln!(file, "{next_offset}")?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)?;
    if let Some(parent) = path.parent() {
        File::open(parent)?.sync_all()?;
    }
    Ok(())
}

/// Consumes from the committed position until `until` (exclusive) is processed. Returns the
/// sum of the values processed, so the caller can check none was skipped or repeated.
fn consume(log: &Log, position_file: &Path, until: i64) -> Result<u64, Box<dyn std::error::Error>> {
    let mut position = load_position(position_file)?;
    let mut sum = 0u64;
    let mut since_commit = 0;
    while position < until {
        // Long poll: block until the log holds `position` (or a second passes), then read
        // what is durable. A record that is written but not yet fsynced waits for the flush.
        if !log.wait_for_data(position, Duration::from_secs(1))? || log.durable_offset() <= position
        {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        for record in log.records(position, ReadBound::Durable) {
            let record = record?;
            let value = record.value.unwrap_or_default();
            sum += std::str::from_utf8(&value)?.parse::<u64>()?;
            position = record.offset + 1;
            since_commit += 1;
            if since_commit == 100 {
                commit_position(position_file, position)?;
                since_commit = 0;
            }
        }
    }
    commit_position(position_file, position)?;
    Ok(sum)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let records: u64 = std::env::args().nth(1).map_or(Ok(20_000), |n| n.parse())?;
    let temp = tempfile::tempdir()?;
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
        load_position(&position_file)?,
        position_file.display()
    );

    // A restarted consumer resumes from its committed position: nothing is left to process.
    let again = consume(&log, &position_file, records as i64)?;
    assert_eq!(again, 0);
    println!("after a restart: nothing to reprocess");
    log.close()?;
    Ok(())
}
