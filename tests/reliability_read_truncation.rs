//! Readers racing `Log::truncate_to` (bug 3): a read that overlaps a truncation ends in
//! `Error::Truncated` or in valid data, never in `Error::Corrupt` or `Error::Io`, and it never
//! makes the reader rebuild an index.
//!
//! The deterministic tests wrap the OS storage in a [`GateStorage`] that stops one chosen
//! reader thread at its first `.log` read, after the read took the segment's size and looked
//! the offset up in the index, while the test truncates (and refills) the log; then it lets the
//! reader go on. The stress test runs a truncating writer against several readers on real files.

use std::collections::HashSet;
use std::fmt;
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, ThreadId};

use partlog::unstable::{
    Advice, CanonicalPath, FileId, FileLock, LockMode, Metadata, OpenMode, OsStorage, ReadMapping,
    Storage, StorageFile,
};
use partlog::{
    BatchBuilder, Compression, Error, Log, LogConfig, NewRecord, ReadBound, VerifiedBatchCache,
};

/// Where the stopped reader is.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum GateState {
    /// No reader is stopped (yet).
    #[default]
    Open,
    /// The armed reader is inside a `.log` read, waiting.
    Holding,
    /// The test let the reader go.
    Released,
}

/// When the armed thread stops in its first `.log` read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Moment {
    /// Before the bytes are read: the reader has its size and index entry, not the bytes.
    BeforeRead,
    /// After: the reader holds the bytes, and has not checked or returned them yet.
    AfterRead,
}

/// Stops the armed thread in its first `.log` read, and counts index changes once watching.
#[derive(Debug, Default)]
struct Gate {
    armed: Mutex<Option<(ThreadId, Moment)>>,
    state: Mutex<GateState>,
    changed: Condvar,
    /// Counting index changes (after the test's own writes are done).
    watching: AtomicBool,
    /// Mutating calls on `.index` / `.timeindex` files (and their temporary copies) while
    /// watching: the only writer is then an index rebuild.
    index_changes: AtomicU64,
}

impl Gate {
    fn arm(&self, reader: ThreadId, moment: Moment) {
        *self.armed.lock().unwrap() = Some((reader, moment));
    }

    /// Blocks the calling thread if it is the armed one and this is its moment (once).
    fn maybe_hold(&self, now: Moment) {
        {
            let mut armed = self.armed.lock().unwrap();
            if *armed != Some((thread::current().id(), now)) {
                return;
            }
            *armed = None;
        }
        let mut state = self.state.lock().unwrap();
        *state = GateState::Holding;
        self.changed.notify_all();
        while *state != GateState::Released {
            state = self.changed.wait(state).unwrap();
        }
    }

    fn wait_until_holding(&self) {
        let mut state = self.state.lock().unwrap();
        while *state != GateState::Holding {
            state = self.changed.wait(state).unwrap();
        }
    }

    fn release(&self) {
        *self.state.lock().unwrap() = GateState::Released;
        self.changed.notify_all();
    }

    fn note_change(&self, path: &Path) {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let is_index = name.is_some_and(|n| n.contains(".index") || n.contains(".timeindex"));
        if is_index && self.watching.load(Ordering::Acquire) {
            self.index_changes.fetch_add(1, Ordering::AcqRel);
        }
    }
}

/// [`OsStorage`] behind a [`Gate`].
#[derive(Debug)]
struct GateStorage {
    inner: OsStorage,
    gate: Arc<Gate>,
}

struct GateFile {
    inner: Arc<dyn StorageFile>,
    gate: Arc<Gate>,
    is_log: bool,
}

impl fmt::Debug for GateFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GateFile({:?})", self.inner)
    }
}

impl StorageFile for GateFile {
    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> partlog::Result<usize> {
        if !self.is_log {
            return self.inner.read_at(buf, offset);
        }
        self.gate.maybe_hold(Moment::BeforeRead);
        let read = self.inner.read_at(buf, offset);
        self.gate.maybe_hold(Moment::AfterRead);
        read
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> partlog::Result<()> {
        self.gate.note_change(self.path());
        self.inner.write_all_at(buf, offset)
    }

    fn len(&self) -> partlog::Result<u64> {
        self.inner.len()
    }

    fn file_id(&self) -> partlog::Result<Option<FileId>> {
        self.inner.file_id()
    }

    fn set_len(&self, len: u64) -> partlog::Result<()> {
        self.gate.note_change(self.path());
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

    fn advise(&self, offset: u64, len: u64, advice: Advice) -> partlog::Result<()> {
        self.inner.advise(offset, len, advice)
    }

    fn as_fd(&self) -> Option<BorrowedFd<'_>> {
        self.inner.as_fd()
    }
}

impl Storage for GateStorage {
    fn open(&self, path: &Path, mode: OpenMode) -> partlog::Result<Arc<dyn StorageFile>> {
        if matches!(mode, OpenMode::Create | OpenMode::CreateNew) {
            self.gate.note_change(path);
        }
        let inner = self.inner.open(path, mode)?;
        Ok(Arc::new(GateFile {
            inner,
            gate: Arc::clone(&self.gate),
            is_log: path.extension().is_some_and(|ext| ext == "log"),
        }))
    }

    fn create_dir_all(&self, path: &Path) -> partlog::Result<()> {
        self.inner.create_dir_all(path)
    }

    fn sync_dir(&self, dir: &Path) -> partlog::Result<()> {
        self.inner.sync_dir(dir)
    }

    fn rename(&self, from: &Path, to: &Path) -> partlog::Result<()> {
        self.gate.note_change(to);
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

    fn canonical_path(&self, path: &Path) -> partlog::Result<CanonicalPath> {
        self.inner.canonical_path(path)
    }

    fn set_mtime(&self, path: &Path, mtime_ms: i64) -> partlog::Result<()> {
        self.inner.set_mtime(path, mtime_ms)
    }
}

const TIMESTAMP: i64 = 1_700_000_000_000;

/// A value that names its offset and the generation (truncations before it) that wrote it.
fn value_for(offset: i64, generation: u64, pad: usize) -> Vec<u8> {
    let mut value = format!("{offset}:{generation}:").into_bytes();
    value.resize(value.len() + pad, b'x');
    value
}

/// `(offset, generation)` from a value written by [`value_for`].
fn parse_value(value: &[u8]) -> Option<(i64, u64)> {
    let text = std::str::from_utf8(value).ok()?;
    let mut parts = text.splitn(3, ':');
    let offset = parts.next()?.parse().ok()?;
    let generation = parts.next()?.parse().ok()?;
    Some((offset, generation))
}

/// Appends `batches` batches of `per_batch` records from the log end, each record's value
/// naming its offset and `generation`.
fn append_batches(log: &Log, batches: usize, per_batch: usize, generation: u64, pad: usize) {
    for _ in 0..batches {
        let first = log.log_end_offset();
        let values: Vec<Vec<u8>> = (0..per_batch)
            .map(|i| value_for(first + i as i64, generation, pad))
            .collect();
        let mut builder = BatchBuilder::new(Compression::None);
        for value in &values {
            builder.push(&NewRecord::new(TIMESTAMP, None, Some(value)));
        }
        let appended = log
            .append_batch(&builder.build().expect("build"))
            .expect("append");
        assert_eq!(appended.first_offset, first);
    }
}

fn gated_log(dir: &Path, segment_bytes: u32) -> (Log, Arc<Gate>) {
    let gate = Arc::new(Gate::default());
    let storage = GateStorage {
        inner: OsStorage,
        gate: Arc::clone(&gate),
    };
    let config = LogConfig::builder_for_tests()
        .segment_bytes(segment_bytes)
        .max_message_bytes(1024)
        .index_interval_bytes(200)
        // Every raced read goes through the index lookup and the walk from its entry (a point
        // read too: no kept copy answers it without reading the file).
        .position_cache_bytes(0)
        .verified_batch_cache(VerifiedBatchCache::new(0))
        // A recovery point writes the active indexes' pending entries; none during a race.
        .recovery_point_ms(3_600_000)
        .storage(Arc::new(storage))
        .build()
        .expect("config");
    (Log::open(dir, config).expect("open"), gate)
}

/// What a stopped read returned, checked: `Truncated` at the new end, or records whose values
/// were written at their offsets.
fn check_raced_read(result: partlog::Result<Vec<(i64, Vec<u8>)>>, new_end: i64, from: i64) {
    match result {
        Err(Error::Truncated { at }) => assert_eq!(at, new_end, "Truncated names the new end"),
        Err(other) => panic!("a read racing a truncation failed with {other:?}, not Truncated"),
        Ok(records) => {
            assert!(!records.is_empty(), "the read at {from} returned nothing");
            for (offset, value) in records {
                let written = parse_value(&value).map(|(at, _)| at);
                assert_eq!(
                    written,
                    Some(offset),
                    "a record returned at the wrong offset"
                );
            }
        }
    }
}

/// Reads once at `offset` and decodes what came back.
fn read_records(log: &Log, offset: i64) -> partlog::Result<Vec<(i64, Vec<u8>)>> {
    let fetch = log.read(offset, 4096, ReadBound::LogEnd)?;
    let mut records = Vec::new();
    let mut scratch = Vec::new();
    for batch in fetch.batches() {
        let batch = batch?;
        for record in batch.records(&mut scratch)? {
            let record = record?;
            records.push((record.offset, record.value.unwrap_or_default().to_vec()));
        }
    }
    Ok(records)
}

/// A point read at `offset`, as the one record it found (or none).
fn read_point(log: &Log, offset: i64) -> partlog::Result<Vec<(i64, Vec<u8>)>> {
    let record = log.read_record(offset, partlog::ReadOptions::default())?;
    Ok(record
        .map(|record| (record.offset, record.value.unwrap_or_default()))
        .into_iter()
        .collect())
}

/// Stops a reader at `moment` of its first `.log` read, runs `truncate` (which returns the
/// new log end), lets the reader go, and returns what it read with the new end.
fn race_one_read<T: Send + 'static>(
    log: &Arc<Log>,
    gate: &Arc<Gate>,
    moment: Moment,
    read: impl FnOnce(&Log) -> partlog::Result<T> + Send + 'static,
    truncate: impl FnOnce(&Log) -> i64,
) -> (partlog::Result<T>, i64) {
    let reader_log = Arc::clone(log);
    let armed = Arc::new((Mutex::new(false), Condvar::new()));
    let armed_by_test = Arc::clone(&armed);
    let reader = thread::spawn(move || {
        let (lock, cv) = &*armed_by_test;
        let mut ready = lock.lock().unwrap();
        while !*ready {
            ready = cv.wait(ready).unwrap();
        }
        drop(ready);
        read(&reader_log)
    });
    gate.arm(reader.thread().id(), moment);
    *armed.0.lock().unwrap() = true;
    armed.1.notify_all();
    gate.wait_until_holding();
    let new_end = truncate(log);
    // A roll leaves its sealed segment's last index entries for the flusher to write when it
    // syncs the segment, which can be after this point: synced here, before watching starts,
    // so that the only writer of an index left is a rebuild. (Without it, a CI run counted the
    // flusher's two writes as one.)
    log.sync().expect("sync");
    gate.watching.store(true, Ordering::Release);
    gate.release();
    (reader.join().expect("reader thread"), new_end)
}

#[test]
fn a_read_whose_file_is_cut_under_it_ends_in_truncated_not_an_io_error() {
    let dir = tempfile::tempdir().unwrap();
    let (log, gate) = gated_log(dir.path(), 1 << 20);
    let log = Arc::new(log);
    append_batches(&log, 50, 1, 0, 100);
    let (result, new_end) = race_one_read(
        &log,
        &gate,
        Moment::BeforeRead,
        |log| read_records(log, 40),
        |log| log.truncate_to(10).expect("truncate"),
    );
    assert_eq!(new_end, 10);
    check_raced_read(result, new_end, 40);
    assert_eq!(
        gate.index_changes.load(Ordering::Acquire),
        0,
        "an index was rebuilt"
    );
}

#[test]
fn a_read_whose_bytes_were_cut_and_rewritten_never_rebuilds_the_active_index() {
    let dir = tempfile::tempdir().unwrap();
    let (log, gate) = gated_log(dir.path(), 1 << 20);
    let log = Arc::new(log);
    append_batches(&log, 50, 1, 0, 100);
    let (result, new_end) = race_one_read(
        &log,
        &gate,
        Moment::BeforeRead,
        |log| read_records(log, 40),
        |log| {
            let new_end = log.truncate_to(10).expect("truncate");
            // Batches of another size: the old index entry now points inside one of them.
            append_batches(log, 40, 3, 1, 37);
            new_end
        },
    );
    check_raced_read(result, new_end, 40);
    assert_eq!(
        gate.index_changes.load(Ordering::Acquire),
        0,
        "an index was rebuilt"
    );
    // The log reads back whole: what the reader saw was no damage.
    let records = read_records(&log, 10).expect("read after the race");
    assert_eq!(records.first().map(|r| r.0), Some(10));
}

#[test]
fn a_read_of_a_sealed_segment_cut_and_rewritten_never_rebuilds_its_index() {
    let dir = tempfile::tempdir().unwrap();
    let (log, gate) = gated_log(dir.path(), 2048);
    let log = Arc::new(log);
    append_batches(&log, 60, 1, 0, 100);
    let bases = segment_bases(dir.path());
    assert!(bases.len() > 3, "the log rolled: {bases:?}");
    // The second segment is sealed; the read aims at its second-to-last offset, past an index
    // entry, and the truncation keeps only its first batch.
    let (base, next_base) = (bases[1], bases[2]);
    let target = next_base - 2;
    assert!(target > base + 3);
    // Opened before the race, so that the stopped read is the segment read itself.
    read_records(&log, target).expect("warm-up read");
    let (result, new_end) = race_one_read(
        &log,
        &gate,
        Moment::BeforeRead,
        move |log| read_records(log, target),
        move |log| {
            let new_end = log.truncate_to(base + 1).expect("truncate");
            append_batches(log, 30, 3, 1, 37);
            new_end
        },
    );
    assert_eq!(new_end, base + 1);
    check_raced_read(result, new_end, target);
    assert_eq!(
        gate.index_changes.load(Ordering::Acquire),
        0,
        "an index was rebuilt"
    );
}

/// Issue 35: a point read stopped inside its `.log` read (before the bytes, and after them)
/// while the log is cut below its offset and written again gets the record or `Truncated`,
/// never `Corrupt`, and never rebuilds an index.
#[test]
fn a_point_read_racing_a_truncation_gets_the_record_or_truncated() {
    for moment in [Moment::BeforeRead, Moment::AfterRead] {
        for segment_bytes in [1 << 20, 2048] {
            let dir = tempfile::tempdir().unwrap();
            let (log, gate) = gated_log(dir.path(), segment_bytes);
            let log = Arc::new(log);
            append_batches(&log, 60, 1, 0, 100);
            let target = 40;
            // Opened before the race, so that the stopped read is the segment read itself.
            read_point(&log, target).expect("warm-up read");
            let (result, new_end) = race_one_read(
                &log,
                &gate,
                moment,
                move |log| read_point(log, target),
                |log| {
                    let new_end = log.truncate_to(10).expect("truncate");
                    append_batches(log, 40, 3, 1, 37);
                    new_end
                },
            );
            check_raced_read(result, new_end, target);
            assert_eq!(
                gate.index_changes.load(Ordering::Acquire),
                0,
                "an index was rebuilt"
            );
            assert_eq!(read_point(&log, target).expect("read after").len(), 1);
        }
    }
}

/// The base offsets of the segments in `dir`, in order.
fn segment_bases(dir: &Path) -> Vec<i64> {
    let mut bases: Vec<i64> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".log")?.parse().ok()
        })
        .collect();
    bases.sort_unstable();
    bases
}

#[test]
fn a_timestamp_lookup_racing_a_truncation_ends_in_truncated_or_an_answer() {
    let dir = tempfile::tempdir().unwrap();
    let (log, gate) = gated_log(dir.path(), 1 << 20);
    let log = Arc::new(log);
    append_batches(&log, 50, 1, 0, 100);
    let (result, new_end) = race_one_read(
        &log,
        &gate,
        Moment::BeforeRead,
        |log| log.offset_for_timestamp(TIMESTAMP),
        |log| log.truncate_to(0).expect("truncate"),
    );
    match result {
        Ok(found) => assert!(
            found.is_none() || found == Some((0, TIMESTAMP)),
            "a lookup found {found:?}"
        ),
        Err(Error::Truncated { at }) => assert_eq!(at, new_end),
        Err(other) => panic!("a lookup racing a truncation failed with {other:?}"),
    }
    assert_eq!(
        gate.index_changes.load(Ordering::Acquire),
        0,
        "an index was rebuilt"
    );
}

/// A small, seeded xorshift generator: the stress test needs no crate for its dice.
struct Dice(u64);

impl Dice {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// What the stress test's writer wrote: every `(offset, generation)` pair, recorded before
/// its append.
#[derive(Default)]
struct Written {
    pairs: Mutex<HashSet<(i64, u64)>>,
}

/// Appends `batches` batches of 1 to 4 records of varied sizes from the log end; each
/// record's timestamp is `TIMESTAMP + offset` in every generation.
fn append_stress_batches(log: &Log, written: &Written, dice: &mut Dice, generation: u64) {
    for _ in 0..=dice.below(4) {
        let first = log.log_end_offset();
        let count = 1 + dice.below(4) as i64;
        let values: Vec<Vec<u8>> = (0..count)
            .map(|i| value_for(first + i, generation, dice.below(120) as usize))
            .collect();
        {
            let mut pairs = written.pairs.lock().unwrap();
            pairs.extend((0..count).map(|i| (first + i, generation)));
        }
        let mut builder = BatchBuilder::new(Compression::None);
        for (i, value) in values.iter().enumerate() {
            builder.push(&NewRecord::new(
                TIMESTAMP + first + i as i64,
                None,
                Some(value),
            ));
        }
        let appended = log
            .append_batch(&builder.build().expect("build"))
            .expect("append");
        assert_eq!(
            appended.first_offset, first,
            "one writer assigns the offsets"
        );
    }
}

/// One reader's tally: what it read and every answer that broke the contract.
#[derive(Default)]
struct Tally {
    records: u64,
    truncated: u64,
    violations: Vec<String>,
}

/// Reads `reads` times at random offsets (sometimes going on from the last read), checking
/// every answer against the contract.
fn stress_reader(log: &Log, written: &Written, seed: u64, reads: u32) -> Tally {
    let mut dice = Dice(seed);
    let mut tally = Tally::default();
    let mut fetch = partlog::FetchData::new();
    let mut scratch = Vec::new();
    let mut next = None;
    for _ in 0..reads {
        let end = log.log_end_offset();
        if dice.below(8) == 0 {
            let timestamp = TIMESTAMP + dice.below(end as u64 + 2) as i64;
            match log.offset_for_timestamp(timestamp) {
                Ok(None) => {}
                // Every generation wrote offset o at TIMESTAMP + o.
                Ok(Some((offset, found))) if found == TIMESTAMP + offset && found >= timestamp => {}
                Ok(Some(found)) => tally
                    .violations
                    .push(format!("offset_for_timestamp({timestamp}) found {found:?}")),
                Err(Error::Truncated { .. }) => tally.truncated += 1,
                Err(error) => tally
                    .violations
                    .push(format!("offset_for_timestamp({timestamp}) failed: {error}")),
            }
            continue;
        }
        let offset = match next.take() {
            Some(offset) => offset,
            None => dice.below(end as u64 + 3) as i64,
        };
        if dice.below(4) == 0 {
            point_read(log, written, offset, &mut tally);
            continue;
        }
        let max_bytes = [100, 1000, 20_000][dice.below(3) as usize];
        match log.read_into(offset, max_bytes, ReadBound::LogEnd, &mut fetch) {
            // Below the end it saw, a read up to the log end has a batch to return.
            Ok(()) if fetch.is_empty() && offset < fetch.log_end_offset() => {
                tally.violations.push(format!(
                    "read({offset}) returned nothing below the end {}",
                    fetch.log_end_offset()
                ));
            }
            Ok(()) => {
                let mut last = None;
                for batch in fetch.batches() {
                    let batch = match batch {
                        Ok(batch) => batch,
                        Err(error) => {
                            tally.violations.push(format!("read({offset}): {error}"));
                            break;
                        }
                    };
                    let Ok(records) = batch.records(&mut scratch) else {
                        tally
                            .violations
                            .push(format!("read({offset}): bad records"));
                        break;
                    };
                    for record in records {
                        let Ok(record) = record else {
                            tally.violations.push(format!("read({offset}): bad record"));
                            break;
                        };
                        tally.records += 1;
                        last = Some(record.offset);
                        let pair = record.value.and_then(parse_value);
                        let known = pair.is_some_and(|(at, generation)| {
                            at == record.offset
                                && written.pairs.lock().unwrap().contains(&(at, generation))
                        });
                        if !known {
                            tally.violations.push(format!(
                                "read({offset}) returned offset {} holding {pair:?}",
                                record.offset
                            ));
                        }
                    }
                }
                if last.is_some() && dice.below(2) == 0 {
                    next = Some(fetch.next_offset());
                }
            }
            Err(Error::Truncated { .. }) => tally.truncated += 1,
            // Above the log end (the log start never moves here).
            Err(Error::OffsetOutOfRange {
                requested,
                start,
                end,
            }) if requested > end && start == 0 => {}
            Err(error) => tally
                .violations
                .push(format!("read({offset}) failed: {error}")),
        }
    }
    tally
}

/// A point read in the stress: a record written at its offset, nothing, `Truncated`, or
/// `OffsetOutOfRange` above the end.
fn point_read(log: &Log, written: &Written, offset: i64, tally: &mut Tally) {
    match log.read_record(offset, partlog::ReadOptions::default()) {
        Ok(None) => {}
        Ok(Some(record)) => {
            tally.records += 1;
            let pair = record.value.as_deref().and_then(parse_value);
            let known = record.offset == offset
                && pair.is_some_and(|(at, generation)| {
                    at == offset && written.pairs.lock().unwrap().contains(&(at, generation))
                });
            if !known {
                tally.violations.push(format!(
                    "read_record({offset}) returned offset {} holding {pair:?}",
                    record.offset
                ));
            }
        }
        Err(Error::Truncated { .. }) => tally.truncated += 1,
        Err(Error::OffsetOutOfRange {
            requested,
            start,
            end,
        }) if requested > end && start == 0 => {}
        Err(error) => tally
            .violations
            .push(format!("read_record({offset}) failed: {error}")),
    }
}

/// One writer appends and truncates at random points while three readers each make
/// `reads` reads; every answer must be records written at their offsets (at least one batch
/// when the offset is below the end the read saw), `Truncated`, or `OffsetOutOfRange` above
/// the end.
fn readers_racing_a_truncating_writer(map_sealed_segments: bool, map_active: bool, reads: u32) {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig::builder_for_tests()
        .segment_bytes(4096)
        .max_message_bytes(1024)
        .index_interval_bytes(128)
        .map_sealed_segments(map_sealed_segments)
        .map_active_segment(map_active)
        .build()
        .expect("config");
    let log = Log::open(dir.path(), config).expect("open");
    let written = Written::default();
    let readers_left = AtomicU64::new(3);
    let mut dice = Dice(0x9E37_79B9_7F4A_7C15);
    append_stress_batches(&log, &written, &mut dice, 0);
    let (tallies, truncations) = thread::scope(|scope| {
        let readers: Vec<_> = (0..3u64)
            .map(|n| {
                let (log, written, readers_left) = (&log, &written, &readers_left);
                scope.spawn(move || {
                    let tally = stress_reader(log, written, 0x2545_F491_4F6C_DD1D + n, reads);
                    readers_left.fetch_sub(1, Ordering::AcqRel);
                    tally
                })
            })
            .collect();
        // The writer runs as long as a reader reads: bounded by the readers' counts.
        let mut generation = 0;
        while readers_left.load(Ordering::Acquire) > 0 {
            append_stress_batches(&log, &written, &mut dice, generation);
            let end = log.log_end_offset();
            if dice.below(2) == 0 || end > 600 {
                let back = 1 + dice.below(if end > 600 { end as u64 } else { 12 });
                let new_end = log
                    .truncate_to(end.saturating_sub(back as i64).max(0))
                    .expect("truncate");
                assert!(new_end < end || end == 0);
                generation += 1;
            }
        }
        let tallies: Vec<Tally> = readers
            .into_iter()
            .map(|reader| reader.join().expect("reader"))
            .collect();
        (tallies, generation)
    });
    let violations: Vec<&String> = tallies.iter().flat_map(|t| &t.violations).collect();
    let records: u64 = tallies.iter().map(|t| t.records).sum();
    let truncated: u64 = tallies.iter().map(|t| t.truncated).sum();
    assert!(
        violations.is_empty(),
        "{} answers broke the contract ({records} records read, {truncated} Truncated, \
         {truncations} truncations), the first: {:?}",
        violations.len(),
        violations.iter().take(5).collect::<Vec<_>>()
    );
    assert!(records > 0, "the readers read records");
    assert!(truncations > 0, "the writer truncated");
}

#[test]
fn readers_racing_a_truncating_writer_see_written_records_or_truncated() {
    readers_racing_a_truncating_writer(false, false, 8000);
}

#[test]
fn mapped_readers_racing_a_truncating_writer_see_written_records_or_truncated() {
    readers_racing_a_truncating_writer(true, false, 4000);
}

/// Issue 35: the same with the active segment read through its mapping too.
#[test]
fn readers_of_the_mapped_active_segment_racing_a_truncating_writer_see_written_records_or_truncated()
 {
    readers_racing_a_truncating_writer(true, true, 4000);
}

#[test]
fn send_to_after_a_read_that_a_truncation_overtook_sends_the_checked_bytes_or_fails() {
    let dir = tempfile::tempdir().unwrap();
    let (log, gate) = gated_log(dir.path(), 1 << 20);
    let log = Arc::new(log);
    append_batches(&log, 50, 1, 0, 100);
    // The reader holds the bytes of generation 0; meanwhile the log is cut and written again
    // in the same layout (same batch sizes, same index entries), with other values.
    let (fetch, _) = race_one_read(
        &log,
        &gate,
        Moment::AfterRead,
        |log| log.read(40, 4096, ReadBound::LogEnd),
        |log| {
            let new_end = log.truncate_to(10).expect("truncate");
            append_batches(log, 40, 1, 1, 100);
            new_end
        },
    );
    let fetch = fetch.expect("the read checked bytes no truncation had cut yet");
    let mut scratch = Vec::new();
    let batch = fetch.batches().next().expect("a batch").expect("valid");
    let first = batch
        .records(&mut scratch)
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    assert_eq!(
        first.value.and_then(parse_value),
        Some((40, 0)),
        "the read returned the data as it was"
    );
    let mut out = tempfile::tempfile().unwrap();
    match fetch.send_to(out.as_fd()) {
        Ok(sent) => {
            assert_eq!(sent, fetch.bytes().len() as u64);
            let mut copy = Vec::new();
            out.seek(SeekFrom::Start(0)).unwrap();
            out.read_to_end(&mut copy).unwrap();
            assert!(
                copy == fetch.bytes(),
                "send_to sent bytes the read never checked"
            );
        }
        Err(Error::Truncated { .. }) => {}
        Err(other) => panic!("send_to failed with {other:?}"),
    }
}
