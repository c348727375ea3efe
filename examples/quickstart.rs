//! Open a log, append, read back, close, reopen: the first ten minutes with partlog.
//!
//! ```sh
//! cargo run --release --example quickstart            # in a temporary directory
//! cargo run --release --example quickstart -- /tmp/quickstart-0   # in a directory of yours
//! ```
//!
//! The directory is a Kafka partition directory afterwards: `partlog dump DIR --records` (or
//! Kafka's `kafka-dump-log.sh --files DIR/00000000000000000000.log --print-data-log`) shows it.

mod scratch;

use partlog::{FlushPolicy, Log, LogConfig, NewRecord, ReadBound};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let temp = scratch::ScratchDir::new("quickstart")?;
    let dir = std::env::args_os()
        .nth(1)
        .map_or_else(|| temp.path().join("quickstart-0"), Into::into);

    // Kafka's defaults, except that each append is fsynced before it returns (acks=all).
    let config = LogConfig::builder()
        .flush_policy(FlushPolicy::EveryAppend)
        .build()?;
    let log = Log::open(&dir, config.clone())?;
    let first = log.log_end_offset();

    // One append is one batch: its records get consecutive offsets.
    let appended = log.append(&[
        NewRecord::new(1_700_000_000_000, Some(b"user-1"), Some(b"signed up")),
        NewRecord::new(1_700_000_000_001, Some(b"user-2"), Some(b"signed up"))
            .with_header("source", Some(b"web")),
        NewRecord::new(1_700_000_000_002, Some(b"user-1"), None), // a tombstone
    ])?;
    println!(
        "appended offsets {}..={} ({} bytes); durable up to {}",
        appended.first_offset,
        appended.last_offset,
        appended.bytes,
        log.durable_offset()
    );

    // Records, across batches and segments, from an offset on.
    for record in log.records(first, ReadBound::Durable) {
        let record = record?;
        println!(
            "offset {} key {:?} value {:?} headers {}",
            record.offset,
            record.key.as_deref().map(String::from_utf8_lossy),
            record.value.as_deref().map(String::from_utf8_lossy),
            record.headers.len()
        );
    }
    log.close()?;
    drop(log);

    // A clean close means the next open scans nothing; offsets go on where they stopped.
    let log = Log::open(&dir, config)?;
    assert!(log.recovery_report().clean_shutdown);
    let next = log.append(&[NewRecord::new(1_700_000_000_003, None, Some(b"again"))])?;
    assert_eq!(next.first_offset, appended.last_offset + 1);
    println!(
        "reopened {}: the log holds offsets [{}, {})",
        dir.display(),
        log.log_start_offset(),
        log.log_end_offset()
    );
    log.close()?;
    Ok(())
}
