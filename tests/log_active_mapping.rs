//! Issue 35: reads served from a mapping of the active segment (`map.active.segment`). Point
//! reads and sequential reads return every record on every `ReadBound` without a `.log` read;
//! the mapping moves with a rolled segment; reads racing `truncate_to` and
//! `truncate_fully_and_start_at` get written records, `Truncated` or out of range, never
//! `Corrupt` (or a SIGBUS); and bit flips under the mapping are caught by the CRC checks.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;

use partlog::unstable::{
    FileLock, LockMode, Metadata, OpenMode, OsStorage, ReadMapping, Storage, StorageFile,
};
use partlog::{
    BatchBuilder, Compression, Error, FetchData, FlushPolicy, Log, LogConfig, LogRecord, NewRecord,
    ReadBound, ReadOptions, VerifiedBatchCache,
};

const T0: i64 = 1_700_000_000_000;

fn value_of(offset: i64) -> Vec<u8> {
    format!("value {offset}").into_bytes()
}

/// The OS storage, counting the positional reads of `.log` files: a read served from a mapping
/// makes none.
#[derive(Debug, Default)]
struct CountingStorage {
    inner: OsStorage,
    log_reads: Arc<AtomicU64>,
}

#[derive(Debug)]
struct CountingFile {
    inner: Arc<dyn StorageFile>,
    /// The counter, for a `.log` file.
    log_reads: Option<Arc<AtomicU64>>,
}

impl StorageFile for CountingFile {
    fn path(&self) -> &Path {
        self.inner.path()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> partlog::Result<usize> {
        if let Some(reads) = &self.log_reads {
            reads.fetch_add(1, Ordering::Relaxed);
        }
        self.inner.read_at(buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> partlog::Result<()> {
        self.inner.write_all_at(buf, offset)
    }
    fn len(&self) -> partlog::Result<u64> {
        self.inner.len()
    }
    fn set_len(&self, len: u64) -> partlog::Result<()> {
        self.inner.set_len(len)
    }
    fn sync_data(&self) -> partlog::Result<()> {
        self.inner.sync_data()
    }
    fn sync_all(&self) -> partlog::Result<()> {
        self.inner.sync_all()
    }
    fn map_read(&self) -> partlog::Result<Option<ReadMapping>> {
        self.inner.map_read()
    }
    fn map_read_reserved(&self, reserve: u64) -> partlog::Result<Option<ReadMapping>> {
        self.inner.map_read_reserved(reserve)
    }
}

impl Storage for CountingStorage {
    fn open(&self, path: &Path, mode: OpenMode) -> partlog::Result<Arc<dyn StorageFile>> {
        let is_log = path.extension().is_some_and(|ext| ext == "log");
        Ok(Arc::new(CountingFile {
            inner: self.inner.open(path, mode)?,
            log_reads: is_log.then(|| Arc::clone(&self.log_reads)),
        }))
    }
    fn create_dir_all(&self, path: &Path) -> partlog::Result<()> {
        self.inner.create_dir_all(path)
    }
    fn sync_dir(&self, dir: &Path) -> partlog::Result<()> {
        self.inner.sync_dir(dir)
    }
    fn rename(&self, from: &Path, to: &Path) -> partlog::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> partlog::Result<()> {
        self.inner.remove(path)
    }
    fn list(&self, dir: &Path) -> partlog::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn metadata(&self, path: &Path) -> partlog::Result<Metadata> {
        self.inner.metadata(path)
    }
    fn lock(&self, path: &Path, mode: LockMode) -> partlog::Result<FileLock> {
        self.inner.lock(path, mode)
    }
}

/// A log over a [`CountingStorage`], whose point reads always read their batch (no kept
/// copies), with the active segment mapped when `mapped`; returns the `.log` read counter.
fn counted_log(
    dir: &Path,
    segment_bytes: u32,
    preallocate: bool,
    mapped: bool,
) -> (Log, Arc<AtomicU64>) {
    let storage = CountingStorage::default();
    let log_reads = Arc::clone(&storage.log_reads);
    let config = LogConfig::builder_for_tests()
        .segment_bytes(segment_bytes)
        .index_interval_bytes(256)
        .preallocate(preallocate)
        .map_active_segment(mapped)
        .flush_policy(FlushPolicy::OsDecides)
        .verified_batch_cache(VerifiedBatchCache::new(0))
        .storage(Arc::new(storage))
        .build()
        .unwrap();
    (Log::open(dir, config).unwrap(), log_reads)
}

/// Appends a batch of `count` records whose values name their offsets; returns its last offset.
fn append_named(log: &Log, count: i64) -> i64 {
    let first = log.log_end_offset();
    let mut builder = BatchBuilder::new(Compression::None);
    for offset in first..first + count {
        builder.push(&NewRecord::new(
            T0 + offset,
            Some(b"k"),
            Some(&value_of(offset)),
        ));
    }
    log.append_batch(&builder.build().unwrap())
        .unwrap()
        .last_offset
}

/// Reads `[0, end)` with point reads and with sequential reads of one batch at a time (one
/// fetch, so that each resumes where the last ended) under `bound`, whose offset is `upper`;
/// checks every record below `upper` is returned and nothing at or above it.
fn check_reads_below(log: &Log, bound: ReadBound, upper: i64) {
    let end = log.log_end_offset();
    for offset in (0..end).rev().chain(0..end) {
        let found = log
            .read_record(offset, ReadOptions::default().bound(bound))
            .unwrap();
        if offset < upper {
            let record = found.unwrap_or_else(|| panic!("{bound:?}: nothing at {offset}"));
            assert_eq!(record.offset, offset);
            assert_eq!(
                record.value,
                Some(value_of(offset)),
                "{bound:?} at {offset}"
            );
        } else {
            assert_eq!(
                found, None,
                "{bound:?}: a record at {offset}, above {upper}"
            );
        }
    }
    let (mut fetch, mut scratch) = (FetchData::new(), Vec::new());
    let mut next = 0;
    while next < end {
        log.read_into(next, 1, bound, &mut fetch).unwrap();
        let mut returned = 0;
        for batch in fetch.batches() {
            for record in batch.unwrap().records(&mut scratch).unwrap() {
                let record = record.unwrap();
                assert_eq!(record.offset, next, "{bound:?}: sequential");
                assert_eq!(record.value, Some(&value_of(next)[..]));
                next += 1;
                returned += 1;
            }
        }
        if returned == 0 {
            break;
        }
    }
    assert_eq!(
        next, upper,
        "{bound:?}: the sequential reads stopped at the bound"
    );
    let all: Vec<LogRecord> = log
        .records(0, bound)
        .collect::<partlog::Result<_>>()
        .unwrap();
    assert_eq!(all.len() as i64, upper, "{bound:?}: records()");
}

#[test]
fn point_and_sequential_reads_of_the_active_segment_come_from_its_mapping_on_every_bound() {
    for mapped in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (log, log_reads) = counted_log(dir.path(), 1 << 20, false, mapped);
        let mut boundaries = Vec::new();
        for n in 0..60 {
            boundaries.push(append_named(&log, 1 + n % 5) + 1);
        }
        log.sync().unwrap();
        let durable = log.log_end_offset();
        for n in 0..40 {
            append_named(&log, 1 + n % 3);
        }
        // Whole batches only: each bound lies on a batch boundary.
        let high_watermark = boundaries[30];
        log.set_high_watermark(high_watermark).unwrap();
        assert_eq!(log.durable_offset(), durable);
        let before = log_reads.load(Ordering::Relaxed);
        for (bound, upper) in [
            (ReadBound::LogEnd, log.log_end_offset()),
            (ReadBound::HighWatermark, high_watermark),
            (ReadBound::Durable, durable),
        ] {
            check_reads_below(&log, bound, upper);
        }
        let reads = log_reads.load(Ordering::Relaxed) - before;
        if mapped {
            assert_eq!(reads, 0, "reads of the active segment read its .log");
        } else {
            assert!(reads > 0, "unmapped reads read the .log");
        }
    }
}

#[test]
fn the_mapping_moves_with_a_rolled_segment_and_survives_the_trim_of_preallocated_space() {
    for preallocate in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (log, log_reads) = counted_log(dir.path(), 4096, preallocate, true);
        // Each append is read at once (mapping the active segment), then the log rolls on.
        for n in 0..150 {
            let last = append_named(&log, 1 + n % 3);
            let record = log.read_record(last, ReadOptions::default()).unwrap();
            assert_eq!(record.map(|r| r.value), Some(Some(value_of(last))));
        }
        let segments = std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|entry| {
                let name = entry.as_ref().unwrap().file_name();
                name.to_string_lossy().ends_with(".log")
            })
            .count();
        assert!(segments > 3, "the log rolled: {segments} segments");
        let before = log_reads.load(Ordering::Relaxed);
        check_reads_below(&log, ReadBound::LogEnd, log.log_end_offset());
        assert_eq!(log_reads.load(Ordering::Relaxed), before, "a .log was read");
        log.close().unwrap();
    }
}

/// What a raced read may answer: records written at their offsets, or the offset gone.
fn check_raced(result: partlog::Result<Vec<(i64, Vec<u8>)>>, what: &str) -> u64 {
    match result {
        Ok(records) => {
            for (offset, value) in &records {
                assert_eq!(
                    value,
                    &value_of(*offset),
                    "{what}: a wrong record at {offset}"
                );
            }
            records.len() as u64
        }
        Err(Error::Truncated { .. } | Error::OffsetOutOfRange { .. }) => 0,
        Err(other) => panic!("{what} failed with {other:?}, not Truncated or out of range"),
    }
}

fn sequential(
    log: &Log,
    offset: i64,
    fetch: &mut FetchData,
) -> partlog::Result<Vec<(i64, Vec<u8>)>> {
    log.read_into(offset, 2048, ReadBound::LogEnd, fetch)?;
    let mut scratch = Vec::new();
    let mut records = Vec::new();
    for batch in fetch.batches() {
        for record in batch?.records(&mut scratch)? {
            let record = record?;
            records.push((record.offset, record.value.unwrap_or_default().to_vec()));
        }
    }
    Ok(records)
}

fn point(log: &Log, offset: i64) -> partlog::Result<Vec<(i64, Vec<u8>)>> {
    let record = log.read_record(offset, ReadOptions::default())?;
    Ok(record
        .map(|record| (record.offset, record.value.unwrap_or_default()))
        .into_iter()
        .collect())
}

#[test]
fn reads_of_the_mapped_active_segment_racing_truncations_get_the_record_or_truncated() {
    for segment_bytes in [1 << 20, 8192] {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig::builder_for_tests()
            .segment_bytes(segment_bytes)
            .index_interval_bytes(128)
            .map_active_segment(true)
            .preallocate(segment_bytes == 8192)
            .verified_batch_cache(VerifiedBatchCache::new(0))
            .build()
            .unwrap();
        let log = Log::open(dir.path(), config).unwrap();
        for n in 0..50 {
            append_named(&log, 1 + n % 4);
        }
        let done = AtomicBool::new(false);
        let read_records = AtomicU64::new(0);
        thread::scope(|scope| {
            for reader in 0..2u64 {
                let (log, done, read_records) = (&log, &done, &read_records);
                scope.spawn(move || {
                    let mut fetch = FetchData::new();
                    let mut n = reader;
                    // At least 2,000 reads each, then until the writer is done.
                    while n < 2_000 || !done.load(Ordering::Acquire) {
                        let end = log.log_end_offset().max(1);
                        let offset = (n.wrapping_mul(0x9E37_79B9) % end as u64) as i64;
                        let got = if n % 2 == 0 {
                            check_raced(point(log, offset), "a point read")
                        } else {
                            check_raced(sequential(log, offset, &mut fetch), "a sequential read")
                        };
                        read_records.fetch_add(got, Ordering::Relaxed);
                        n += 2;
                    }
                });
            }
            for round in 0..300 {
                for n in 0..5 {
                    append_named(&log, 1 + (round + n) % 4);
                }
                let end = log.log_end_offset();
                if round % 50 == 49 {
                    log.truncate_fully_and_start_at(0).unwrap();
                } else if round % 2 == 0 {
                    log.truncate_to(end - 1 - (round % 7)).unwrap();
                }
            }
            done.store(true, Ordering::Release);
        });
        assert!(
            read_records.load(Ordering::Relaxed) > 0,
            "the readers read records"
        );
    }
}

/// The `.log` of the log's one segment.
fn only_log_file(dir: &Path) -> PathBuf {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "log"))
        .collect();
    assert_eq!(logs.len(), 1, "{logs:?}");
    logs.remove(0)
}

/// Copies the files of `from` into `to`.
fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            std::fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
        }
    }
}

/// Every bit of every byte the CRC covers (and the magic and CRC) of an active segment is
/// flipped in turn, in a fresh copy of the log opened with the mapping and read once (so
/// mapped, and each batch checked): point reads and a sequential read through the mapping
/// must then return the record written or fail; never a wrong record.
#[test]
fn bit_flips_in_the_active_segment_under_its_mapping_never_read_as_a_wrong_record() {
    let pristine_dir = tempfile::tempdir().unwrap();
    let mut spans = Vec::new();
    let (end, pristine) = {
        let (log, _) = counted_log(pristine_dir.path(), 1 << 20, false, true);
        let mut start = 0;
        for n in 0..4 {
            append_named(&log, 1 + n % 3);
            let end = log.stats().active_segment_bytes;
            spans.push((start, end));
            start = end;
        }
        let end = log.log_end_offset();
        let pristine: Vec<LogRecord> = (0..end)
            .map(|offset| {
                log.read_record(offset, ReadOptions::default())
                    .unwrap()
                    .unwrap()
            })
            .collect();
        log.close().unwrap();
        (end, pristine)
    };
    let mut caught = 0u32;
    for &(start, end_byte) in &spans {
        for byte in start + 16..end_byte {
            for bit in 0..8u8 {
                let dir = tempfile::tempdir().unwrap();
                copy_dir(pristine_dir.path(), dir.path());
                let (log, _) = counted_log(dir.path(), 1 << 20, false, true);
                for offset in 0..end {
                    log.read_record(offset, ReadOptions::default()).unwrap();
                }
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(only_log_file(dir.path()))
                    .unwrap();
                let mut one = [0u8];
                file.read_exact_at(&mut one, byte).unwrap();
                file.write_all_at(&[one[0] ^ (1 << bit)], byte).unwrap();
                let what = format!("flip of bit {bit} of byte {byte}");
                let mut answers = (0..end)
                    .map(|offset| (offset, point(&log, offset)))
                    .collect::<Vec<_>>();
                answers.push((0, sequential(&log, 0, &mut FetchData::new())));
                for (offset, answer) in answers {
                    match answer {
                        Ok(records) => {
                            for (at, value) in records {
                                assert_eq!(
                                    Some(&value),
                                    pristine[at as usize].value.as_ref(),
                                    "{what}: a wrong record at {at} (read at {offset})"
                                );
                            }
                        }
                        Err(Error::Corrupt { .. }) => caught += 1,
                        // Not even `Truncated`: the index rebuild a bad entry starts never moves
                        // the segment's end, so nothing a reader asks for goes.
                        Err(other) => panic!("{what}: the read at {offset} failed: {other:?}"),
                    }
                }
            }
        }
    }
    assert!(caught > 500, "the flips were caught: {caught} Corrupt");
}
