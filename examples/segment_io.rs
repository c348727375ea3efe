//! Segment-level I/O through `partlog::unstable`: one `.log` file and its two indexes, with no
//! log around them (no offsets assigned, no recovery, no fsync policy). For users who benchmark
//! segment I/O directly, or build their own log on Kafka's file formats.
//!
//! ```sh
//! cargo run --release --example segment_io             # 100000 records of 100 bytes
//! cargo run --release --example segment_io -- 2000     # fewer (CI runs it so)
//! ```
//!
//! It appends batches of 100 records, reads them all back batch by batch through the offset
//! index, looks one offset up by timestamp, seals the segment, and prints the rates. The
//! `unstable` module may change before 1.0.

mod scratch;

use std::sync::Arc;
use std::time::Instant;

use partlog::unstable::{OsStorage, Segment, SegmentConfig, Storage};
use partlog::{BatchBuilder, BatchIter, Compression, NewRecord};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let records: i64 = std::env::args().nth(1).map_or(Ok(100_000), |n| n.parse())?;
    let temp = scratch::ScratchDir::new("segment_io")?;
    let storage: Arc<dyn Storage> = Arc::new(OsStorage::new());
    let config = SegmentConfig {
        segment_bytes: 1 << 30,
        ..SegmentConfig::default()
    };
    let start_ms = 1_700_000_000_000;
    let segment = Segment::create(&storage, temp.path(), 0, config, start_ms)?;

    // Append: the caller assigns offsets (the base offset of each batch).
    let value = [b'x'; 100];
    let started = Instant::now();
    let mut offset = 0i64;
    while offset < records {
        let count = 100.min(records - offset);
        let mut builder = BatchBuilder::new(Compression::None).base_offset(offset);
        for n in 0..count {
            builder.push(&NewRecord::new(start_ms + offset + n, None, Some(&value)));
        }
        segment.append(&builder.build()?)?;
        offset += count;
    }
    segment.flush()?;
    let append_secs = started.elapsed().as_secs_f64();

    // Read: whole batches from an offset, about 1 MiB per read, CRC-checked.
    let started = Instant::now();
    let mut buf = Vec::new();
    let mut next = 0i64;
    let mut read_records = 0i64;
    while let Some(read) = segment.read(next, 1 << 20, None, &mut buf)? {
        for (_position, batch) in BatchIter::new(&buf) {
            let batch = batch.map_err(|what| format!("a bad batch: {what}"))?;
            read_records += i64::from(batch.header().records_count);
        }
        next = read.next_offset;
    }
    let read_secs = started.elapsed().as_secs_f64();
    assert_eq!(read_records, records);

    let found = segment.find_offset_by_timestamp(start_ms + records / 2, 0)?;
    assert_eq!(found.map(|f| f.offset), Some(records / 2));
    segment.seal()?;
    let mb = segment.size() as f64 / (1024.0 * 1024.0);
    println!(
        "{records} records, {mb:.1} MiB in {}: appended at {:.0} MiB/s, read at {:.0} MiB/s; \
         {} offset-index entries",
        segment.log_path().display(),
        mb / append_secs.max(1e-9),
        mb / read_secs.max(1e-9),
        segment.offset_index().entries()
    );
    Ok(())
}
