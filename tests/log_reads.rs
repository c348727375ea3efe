//! The read path's promises: `read_into` reuses its buffer, record iteration and decompression
//! allocate nothing per record, and `FetchData::send_to` writes exactly the fetched bytes to a
//! pipe and to a file, through the kernel's zero-copy calls or the fallback. (And, since this
//! file counts allocations, one write-path promise: `append` reuses its thread's batch buffer.)

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Read;
use std::os::fd::AsFd;

use partlog::unstable::{Advice, OpenMode, OsStorage, Storage, transfer_to};
use partlog::{BatchBuilder, Compression, Log, LogConfig, NewRecord, ReadBound};

/// Counts this thread's allocations, so that tests running in parallel do not see each other's.
struct CountingAllocator;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded unchanged to the system allocator; the counter is a
// const-initialised thread-local `Cell`, whose access neither allocates nor re-enters.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|count| count.set(count.get() + 1));
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, passed through as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout, per the caller's contract.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|count| count.set(count.get() + 1));
        // SAFETY: the caller upholds `GlobalAlloc::realloc`'s contract, passed through as is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

fn log_with(dir: &std::path::Path, codec: Compression, batches: usize) -> Log {
    let log = Log::open(dir, LogConfig::default()).expect("open");
    let value = [b'v'; 100];
    for batch in 0..batches {
        let mut builder = BatchBuilder::new(codec);
        for i in 0..100 {
            let key = format!("key-{batch}-{i}");
            builder.push(&NewRecord::new(1_000, Some(key.as_bytes()), Some(&value)));
        }
        log.append_batch(&builder.build().expect("build"))
            .expect("append");
    }
    log
}

#[test]
fn record_iteration_and_decompression_allocate_nothing_per_record() {
    for codec in [Compression::None, Compression::Lz4, Compression::Zstd] {
        let dir = tempfile::tempdir().unwrap();
        let log = log_with(dir.path(), codec, 20);
        let mut fetch = partlog::FetchData::new();
        let mut scratch = Vec::new();
        let walk = |fetch: &mut partlog::FetchData, scratch: &mut Vec<u8>| {
            let mut offset = 0;
            let mut records = 0u64;
            let mut key_and_value_bytes = 0usize;
            while offset < log.log_end_offset() {
                log.read_into(offset, 4096, ReadBound::LogEnd, fetch)
                    .unwrap();
                for batch in fetch.batches() {
                    let batch = batch.unwrap();
                    for record in batch.records(scratch).unwrap() {
                        let record = record.unwrap();
                        records += 1;
                        key_and_value_bytes +=
                            record.key.map_or(0, <[u8]>::len) + record.value.map_or(0, <[u8]>::len);
                    }
                }
                offset = fetch.next_offset();
            }
            (records, key_and_value_bytes)
        };
        // The first pass grows the buffers (and zstd's context); the second must reuse them.
        let first = walk(&mut fetch, &mut scratch);
        let before = allocations();
        let second = walk(&mut fetch, &mut scratch);
        let made = allocations() - before;
        assert_eq!(first, second);
        assert_eq!(first.0, 2_000, "{codec:?}");
        // The reads themselves allocate a little per read (the segment pin, the path in the
        // walker); what must not grow with the records is bounded by the reads' count.
        let reads = 20 * 2;
        assert!(
            made <= reads * 4,
            "{codec:?}: {made} allocations for 2,000 records in about {reads} reads"
        );
    }
}

#[test]
fn read_into_reuses_its_buffer_and_matches_read() {
    let dir = tempfile::tempdir().unwrap();
    let log = log_with(dir.path(), Compression::None, 50);
    let mut fetch = partlog::FetchData::new();
    let mut offset = 0;
    let mut seen = 0;
    while offset < log.log_end_offset() {
        log.read_into(offset, 8192, ReadBound::LogEnd, &mut fetch)
            .unwrap();
        let fresh = log.read(offset, 8192, ReadBound::LogEnd).unwrap();
        assert_eq!(fetch.bytes(), fresh.bytes());
        assert_eq!(fetch.next_offset(), fresh.next_offset());
        assert!(!fetch.is_empty());
        seen += fetch.batches().count();
        offset = fetch.next_offset();
    }
    assert_eq!(seen, 50);
    log.read_into(offset, 8192, ReadBound::LogEnd, &mut fetch)
        .unwrap();
    assert!(fetch.is_empty());
    assert!(fetch.bytes().is_empty());
    // An error leaves the fetch empty, not holding the previous read.
    log.read_into(0, 8192, ReadBound::LogEnd, &mut fetch)
        .unwrap();
    assert!(
        log.read_into(offset + 5, 8192, ReadBound::LogEnd, &mut fetch)
            .is_err()
    );
    assert!(fetch.is_empty());
}

#[test]
fn send_to_a_pipe_and_to_a_file_writes_exactly_the_fetched_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let log = log_with(dir.path(), Compression::Lz4, 30);
    let fetch = log.read(500, 64 * 1024, ReadBound::LogEnd).unwrap();
    assert!(fetch.bytes().len() > 4096);

    let out_path = dir.path().join("copy.bin");
    let out = std::fs::File::create(&out_path).unwrap();
    let sent = fetch.send_to(out.as_fd()).unwrap();
    assert_eq!(sent, fetch.bytes().len() as u64);
    // A second send appends at the file's position.
    fetch.send_to(out.as_fd()).unwrap();
    drop(out);
    let copied = std::fs::read(&out_path).unwrap();
    assert_eq!(copied.len(), 2 * fetch.bytes().len());
    assert_eq!(&copied[..fetch.bytes().len()], fetch.bytes());
    assert_eq!(&copied[fetch.bytes().len()..], fetch.bytes());

    let (mut reader, writer) = std::io::pipe().unwrap();
    let expected = fetch.bytes().to_vec();
    let drain = std::thread::spawn(move || {
        let mut got = Vec::new();
        reader.read_to_end(&mut got).unwrap();
        got
    });
    let sent = fetch.send_to(writer.as_fd()).unwrap();
    drop(writer);
    assert_eq!(sent, expected.len() as u64);
    assert_eq!(drain.join().unwrap(), expected);
}

#[test]
fn transfer_without_a_source_file_writes_the_checked_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("out.bin");
    let out = std::fs::File::create(&out_path).unwrap();
    let bytes: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    assert_eq!(transfer_to(None, &bytes, out.as_fd()).unwrap(), 10_000);
    drop(out);
    assert_eq!(std::fs::read(&out_path).unwrap(), bytes);
}

#[test]
fn advise_is_accepted_by_the_os_storage() {
    let dir = tempfile::tempdir().unwrap();
    let storage = OsStorage::new();
    let file = storage
        .open(&dir.path().join("f"), OpenMode::Create)
        .unwrap();
    file.write_all_at(&[1; 8192], 0).unwrap();
    for advice in [
        Advice::Sequential,
        Advice::Random,
        Advice::WillNeed,
        Advice::DontNeed,
    ] {
        file.advise(0, 0, advice).unwrap();
    }
    assert!(file.as_fd().is_some());
}

fn small_segments(map_sealed_segments: bool) -> LogConfig {
    LogConfig::builder_for_tests()
        .segment_bytes(64 * 1024)
        .max_message_bytes(64 * 1024)
        .map_sealed_segments(map_sealed_segments)
        .build()
        .unwrap()
}

/// Every batch from `from` on, read `max_bytes` at a time, as (offset, bytes) per read.
fn read_all(log: &Log, from: i64, max_bytes: usize) -> Vec<(i64, Vec<u8>)> {
    let mut fetch = partlog::FetchData::new();
    let mut offset = from;
    let mut reads = Vec::new();
    loop {
        log.read_into(offset, max_bytes, ReadBound::LogEnd, &mut fetch)
            .unwrap();
        if fetch.is_empty() {
            return reads;
        }
        for batch in fetch.batches() {
            batch.unwrap();
        }
        reads.push((offset, fetch.bytes().to_vec()));
        offset = fetch.next_offset();
    }
}

#[test]
fn mapped_sealed_segments_read_the_same_bytes_and_survive_truncation() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = Log::open(dir.path(), small_segments(false)).unwrap();
        let value = [b'm'; 900];
        for i in 0..400 {
            let key = format!("k{i}");
            log.append(&[
                NewRecord::new(1_000, Some(key.as_bytes()), Some(&value)),
                NewRecord::new(1_000, None, Some(&value[..i % 100])),
            ])
            .unwrap();
        }
        log.close().unwrap();
    }
    let plain = {
        let log = Log::open(dir.path(), small_segments(false)).unwrap();
        assert!(log.stats().segments > 5);
        let reads = (
            read_all(&log, 0, 1),
            read_all(&log, 0, 20_000),
            read_all(&log, 333, 5_000),
        );
        log.close().unwrap();
        reads
    };
    let log = Log::open(dir.path(), small_segments(true)).unwrap();
    // Twice: the first read of a segment maps it, the second reads the mapping.
    for _ in 0..2 {
        assert_eq!(read_all(&log, 0, 1), plain.0);
        assert_eq!(read_all(&log, 0, 20_000), plain.1);
        assert_eq!(read_all(&log, 333, 5_000), plain.2);
    }
    // A truncation into a mapped sealed segment drops its mapping before cutting the file;
    // reads then see the shorter log, and new appends after it.
    // Batches hold two records: offset 100 starts one.
    log.truncate_to(100).unwrap();
    assert_eq!(log.log_end_offset(), 100);
    let reads = read_all(&log, 0, 20_000);
    let last = reads.last().unwrap();
    let fetch = log.read(last.0, 20_000, ReadBound::LogEnd).unwrap();
    assert_eq!(fetch.next_offset(), 100);
    log.append(&[NewRecord::new(1_000, Some(b"after"), Some(b"truncation"))])
        .unwrap();
    let mut records = log.records(95, ReadBound::LogEnd);
    let offsets: Vec<i64> = records.by_ref().map(|r| r.unwrap().offset).collect();
    assert_eq!(offsets, (95..101).collect::<Vec<_>>());
}

/// A batch the read walks past on its way from the index entry to the target is skipped on its
/// lastOffsetDelta, which only its CRC protects. A damaged delta that makes the batch look
/// shorter must fail the read (the next batch's baseOffset does not continue it, so its CRC is
/// checked), never skip the records it hides.
#[test]
fn a_damaged_last_offset_delta_on_the_walk_fails_the_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut positions = Vec::new();
    {
        let log = Log::open(dir.path(), LogConfig::default()).unwrap();
        for i in 0..40 {
            let value = format!("value-{i}");
            let records: Vec<NewRecord> = (0..3)
                .map(|_| NewRecord::new(1_000, None, Some(value.as_bytes())))
                .collect();
            positions.push(log.append(&records).unwrap().first_offset);
        }
        log.close().unwrap();
    }
    // Every record of batch 5 (offsets 15-17) reads fine before the damage.
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let fetch = log.read(16, 1, ReadBound::LogEnd).unwrap();
    assert_eq!(
        fetch
            .batches()
            .next()
            .unwrap()
            .unwrap()
            .base_offset(&mut Vec::new())
            .unwrap(),
        15
    );
    log.close().unwrap();
    drop(log);

    // Batch 5's lastOffsetDelta (bytes 23..27 of the batch) from 2 to 0.
    let log_path = dir.path().join("00000000000000000000.log");
    let mut bytes = std::fs::read(&log_path).unwrap();
    let mut position = 0usize;
    for _ in 0..5 {
        let length = i32::from_be_bytes(bytes[position + 8..position + 12].try_into().unwrap());
        position += 12 + length as usize;
    }
    assert_eq!(&bytes[position + 23..position + 27], &2i32.to_be_bytes());
    bytes[position + 23..position + 27].copy_from_slice(&0i32.to_be_bytes());
    std::fs::write(&log_path, &bytes).unwrap();

    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    // The batch lies before the first index entry: the walk starts at position 0 and skips it
    // when asked for offset 16 (its damaged last offset is 15).
    match log.read(16, 1, ReadBound::LogEnd) {
        Err(partlog::Error::Corrupt { position: at, .. }) => assert_eq!(at, position as u64),
        other => panic!("a damaged lastOffsetDelta was read past: {other:?}"),
    }
    // Any read whose walk crosses it fails the same way; a read before it still works.
    assert!(log.read(30, 1, ReadBound::LogEnd).is_err());
    let before = log.read(10, 1, ReadBound::LogEnd).unwrap();
    assert_eq!(before.next_offset(), 12);
    assert_eq!(positions.len(), 40);
}

#[test]
fn appends_of_records_allocate_nothing_per_append_once_warm() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let value = [b'v'; 100];
    let record = [NewRecord::new(now_ms(), None, Some(&value))];
    for _ in 0..10 {
        log.append(&record).unwrap();
    }
    let before = allocations();
    for _ in 0..1_000 {
        log.append(&record).unwrap();
    }
    let made = allocations() - before;
    assert!(made < 10, "{made} allocations for 1,000 appends");
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// A batch stamped more than `segment.ms` after the active segment's first batch rolls it
/// (Kafka's `timeWaitedForRoll`: the batch's max timestamp against the segment's first), and a
/// read returns one segment's batches, as Kafka's fetch does: a read from before the roll stops
/// at its boundary, and `next_offset` takes the next read on from there. (A transaction marker
/// stamped now after records stamped long ago is the common way to meet this.)
#[test]
fn a_batch_stamped_past_segment_ms_rolls_and_a_read_stops_at_the_segment_boundary() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::builder().build().unwrap()).unwrap();
    let week_ms = 7 * 24 * 60 * 60 * 1000;
    let first = 1_000_000_000_000i64;
    let timestamps = [
        first,
        first + 1,
        first + week_ms - 1,
        first + week_ms + 1,
        first + week_ms + 2,
    ];
    for (i, timestamp) in timestamps.iter().enumerate() {
        let mut builder = BatchBuilder::new(Compression::None);
        builder.push(&NewRecord::new(
            *timestamp,
            None,
            Some(format!("v{i}").as_bytes()),
        ));
        log.append_batch(&builder.build().unwrap()).unwrap();
    }
    let mut segments: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".log"))
        .collect();
    segments.sort();
    assert_eq!(
        segments,
        ["00000000000000000000.log", "00000000000000000003.log"],
        "the batch a week and a millisecond after the first rolled; the one just below did not"
    );
    let fetch = log.read(0, 1 << 20, ReadBound::LogEnd).unwrap();
    assert_eq!(fetch.batches().count(), 3);
    assert_eq!(fetch.next_offset(), 3);
    let rest = log
        .read(fetch.next_offset(), 1 << 20, ReadBound::LogEnd)
        .unwrap();
    let offsets: Vec<i64> = rest
        .batches()
        .map(|batch| batch.unwrap().base_offset(&mut Vec::new()).unwrap())
        .collect();
    assert_eq!(offsets, [3, 4]);
    assert_eq!(rest.next_offset(), 5);
}
