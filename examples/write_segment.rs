//! Writes a few Kafka segments with partlog's segment layer, ready for Kafka's own tools.
//!
//! ```sh
//! cargo run --release --example write_segment -- /tmp/partlog-demo
//! ../shared/validators/check.sh /tmp/partlog-demo/*.log
//! kafka-dump-log.sh --deep-iteration --print-data-log --files /tmp/partlog-demo/00000000000000000000.log
//! ```
//!
//! The directory gets several segments (the example rolls on a small `segment.bytes`) whose
//! batches mix the codecs partlog writes (none, lz4, zstd) and records with keys, null keys,
//! tombstones (null values) and headers.

use std::path::Path;
use std::sync::Arc;

use partlog::unstable::{OsStorage, Segment, SegmentConfig, Storage};
use partlog::{BatchBuilder, Compression};

/// One record as written, for comparison with what a reader prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenRecord {
    /// The record's offset.
    pub offset: i64,
    /// Its CreateTime timestamp.
    pub timestamp: i64,
    /// Its key, if any.
    pub key: Option<Vec<u8>>,
    /// Its value; `None` is a tombstone.
    pub value: Option<Vec<u8>>,
    /// Its headers.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

/// Writes the demo segments into `dir` (which must not hold segments yet) and returns every
/// record written, in offset order.
pub fn write_demo(dir: &Path) -> partlog::Result<Vec<WrittenRecord>> {
    let storage: Arc<dyn Storage> = Arc::new(OsStorage::new());
    storage.create_dir_all(dir)?;
    let config = SegmentConfig {
        segment_bytes: 4 * 1024,
        index_interval_bytes: 512,
        ..SegmentConfig::default()
    };
    let start_ms = 1_700_000_000_000;
    let codecs = [Compression::None, Compression::Lz4, Compression::Zstd];
    let mut written = Vec::new();
    let mut segment = Segment::create(&storage, dir, 0, config.clone(), start_ms)?;
    let mut next_offset = 0i64;
    for batch_number in 0..90usize {
        let records_in_batch = 1 + batch_number % 9;
        let mut builder =
            BatchBuilder::new(codecs[batch_number % codecs.len()]).base_offset(next_offset);
        let mut batch_records = Vec::new();
        for i in 0..records_in_batch {
            let offset = next_offset + i as i64;
            let timestamp = start_ms + offset * 10;
            let key = (offset % 7 != 3).then(|| format!("user-{}", offset % 50).into_bytes());
            let value = (offset % 11 != 5).then(|| {
                format!(
                    "event {offset}: {}",
                    "payload ".repeat((offset % 13) as usize)
                )
                .into_bytes()
            });
            let headers = if offset % 5 == 0 {
                vec![
                    (
                        "trace-id".to_string(),
                        Some(format!("t-{offset}").into_bytes()),
                    ),
                    ("empty".to_string(), None),
                ]
            } else {
                Vec::new()
            };
            batch_records.push(WrittenRecord {
                offset,
                timestamp,
                key,
                value,
                headers,
            });
        }
        for record in &batch_records {
            let headers: Vec<(&str, Option<&[u8]>)> = record
                .headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_deref()))
                .collect();
            builder.push_parts(
                record.timestamp,
                record.key.as_deref(),
                record.value.as_deref(),
                &headers,
            );
        }
        let batch = builder.build()?;
        let last_offset = next_offset + records_in_batch as i64 - 1;
        let max_timestamp = batch_records.last().map_or(start_ms, |r| r.timestamp);
        if segment
            .should_roll(batch.len() as u64, max_timestamp, last_offset, start_ms)?
            .is_some()
        {
            segment.seal()?;
            segment.flush()?;
            segment = Segment::create(&storage, dir, next_offset, config.clone(), start_ms)?;
            storage.sync_dir(dir)?;
        }
        segment.append(&batch)?;
        written.extend(batch_records);
        next_offset = last_offset + 1;
    }
    segment.seal()?;
    segment.flush()?;
    storage.sync_dir(dir)?;
    Ok(written)
}

#[allow(
    dead_code,
    reason = "tests include this file for write_demo and never call main"
)]
fn main() {
    let Some(dir) = std::env::args_os().nth(1) else {
        eprintln!("usage: write_segment DIR");
        std::process::exit(2);
    };
    match write_demo(Path::new(&dir)) {
        Ok(records) => println!(
            "wrote {} records into {}",
            records.len(),
            Path::new(&dir).display()
        ),
        Err(error) => {
            eprintln!("write_segment: {error}");
            std::process::exit(1);
        }
    }
}
