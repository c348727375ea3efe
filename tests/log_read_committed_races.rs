//! `read_committed` reads racing maintenance (issue 29, item 15): a fetch lists the aborted
//! transactions from the same view of the log its batches came from, so a compaction pass or a
//! retention pass that swaps segments out under it never makes it return aborted data.
//!
//! Deterministic: a storage wrapper stops the reader thread inside its read of the first
//! segment's `.log` (after it pinned the segment, before it has the bytes), the test runs the
//! pass to its end, then lets the reader go on.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use partlog::unstable::{
    CanonicalPath, FileId, FileLock, LockMode, Metadata, OpenMode, OsStorage, ReadMapping, Storage,
    StorageFile,
};
use partlog::{
    BatchBuilder, CleanupPolicy, Compression, ControlRecordType, Error, Log, LogConfig, LogRecord,
    NewRecord, ReadBound,
};

const T0: i64 = 1_700_000_000_000;
/// The thread the gate stops.
const READER: &str = "read-committed-reader";
/// The first segment's `.log`, whose read the gate stops.
const FIRST_SEGMENT: &str = "00000000000000000000.log";
/// The aborted transaction's producer.
const PRODUCER: i64 = 7;

/// Where the reader stands.
#[derive(Debug, Default)]
struct GateState {
    paused: bool,
    released: bool,
}

/// Stops the first read of [`FIRST_SEGMENT`] by the [`READER`] thread once armed, until
/// released.
#[derive(Debug, Default)]
struct Gate {
    armed: AtomicBool,
    state: Mutex<GateState>,
    changed: Condvar,
}

impl Gate {
    /// Called by every read of a gated file.
    fn on_read(&self) {
        if std::thread::current().name() != Some(READER)
            || !self.armed.swap(false, Ordering::SeqCst)
        {
            return;
        }
        let mut state = self.state.lock().unwrap();
        state.paused = true;
        self.changed.notify_all();
        while !state.released {
            state = self.changed.wait(state).unwrap();
        }
    }

    /// Waits until the reader stopped at the gate. The deadline only turns a reader that never
    /// comes into a failure instead of a hang.
    fn wait_paused(&self) {
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut state = self.state.lock().unwrap();
        while !state.paused {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "the reader never read {FIRST_SEGMENT}");
            state = self.changed.wait_timeout(state, left).unwrap().0;
        }
    }

    fn release(&self) {
        self.state.lock().unwrap().released = true;
        self.changed.notify_all();
    }
}

/// The OS storage, with the reads of [`FIRST_SEGMENT`] files going through the [`Gate`].
#[derive(Debug)]
struct Gated {
    inner: OsStorage,
    gate: Arc<Gate>,
}

#[derive(Debug)]
struct GatedFile {
    inner: Arc<dyn StorageFile>,
    gate: Option<Arc<Gate>>,
}

impl StorageFile for GatedFile {
    fn path(&self) -> &Path {
        self.inner.path()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> partlog::Result<usize> {
        if let Some(gate) = &self.gate {
            gate.on_read();
        }
        self.inner.read_at(buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> partlog::Result<()> {
        self.inner.write_all_at(buf, offset)
    }
    fn len(&self) -> partlog::Result<u64> {
        self.inner.len()
    }
    fn file_id(&self) -> partlog::Result<Option<FileId>> {
        self.inner.file_id()
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
    fn advise(
        &self,
        offset: u64,
        len: u64,
        advice: partlog::unstable::Advice,
    ) -> partlog::Result<()> {
        self.inner.advise(offset, len, advice)
    }
}

impl Storage for Gated {
    fn open(&self, path: &Path, mode: OpenMode) -> partlog::Result<Arc<dyn StorageFile>> {
        let inner = self.inner.open(path, mode)?;
        let gated = path.file_name().is_some_and(|name| name == FIRST_SEGMENT);
        Ok(Arc::new(GatedFile {
            inner,
            gate: gated.then(|| Arc::clone(&self.gate)),
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
    fn canonical_path(&self, path: &Path) -> partlog::Result<CanonicalPath> {
        self.inner.canonical_path(path)
    }
    fn set_mtime(&self, path: &Path, mtime_ms: i64) -> partlog::Result<()> {
        self.inner.set_mtime(path, mtime_ms)
    }
    fn lock_foreign_ofd(&self, path: &Path) -> partlog::Result<FileLock> {
        self.inner.lock_foreign_ofd(path)
    }
}

fn open(dir: &Path, policy: CleanupPolicy, gate: &Arc<Gate>) -> Log {
    let config = LogConfig::builder_for_tests()
        .segment_bytes(64 * 1024)
        // Rolls only where the test rolls.
        .segment_ms(i64::MAX / 4)
        .cleanup_policy(policy)
        // No maintenance thread: every pass is the test's.
        .retention_check_interval_ms(-1)
        .storage(Arc::new(Gated {
            inner: OsStorage::new(),
            gate: Arc::clone(gate),
        }))
        .build()
        .unwrap();
    Log::open(dir, config).unwrap()
}

fn plain(log: &Log, offset_hint: i64, key: &str, value: &str) {
    log.append(&[NewRecord::new(
        T0 + offset_hint,
        Some(key.as_bytes()),
        Some(value.as_bytes()),
    )])
    .unwrap();
}

/// The aborted transaction's one record, `key` = "a", value "aborted".
fn aborted_data(log: &Log) {
    let mut builder = BatchBuilder::new(Compression::None)
        .producer(PRODUCER, 0, 0)
        .transactional(true);
    builder.push(&NewRecord::new(T0, Some(b"a"), Some(b"aborted")));
    log.append_batch(&builder.build().unwrap()).unwrap();
}

fn abort(log: &Log) {
    log.append_marker(PRODUCER, 0, ControlRecordType::Abort, 0)
        .unwrap();
}

/// Segment 0: the aborted transaction's data at 0 and `b0` at 1; segment 2: its ABORT marker at
/// 2 and `c` at 3; segment 4: `a1` and `b1`, superseding the keys of segment 0; the active
/// segment 6: `z`.
fn three_segments_and_an_active_one(log: &Log) {
    aborted_data(log);
    plain(log, 1, "b", "b0");
    log.roll().unwrap();
    abort(log);
    plain(log, 3, "c", "c");
    log.roll().unwrap();
    plain(log, 4, "a", "a1");
    plain(log, 5, "b", "b1");
    log.roll().unwrap();
    plain(log, 6, "z", "z");
}

/// Runs `committed_records(0)` on a reader thread that the gate stops inside its read of the
/// first segment, runs `meanwhile` while it waits there, then lets it finish. The first
/// segment is opened beforehand, so that the reader stops in its read, not in the segment's
/// open (which holds the snapshot lock that every swap takes).
fn read_committed_around(
    log: &Log,
    gate: &Gate,
    meanwhile: impl FnOnce(),
) -> Vec<partlog::Result<LogRecord>> {
    assert!(!log.read(0, 1, ReadBound::LogEnd).unwrap().is_empty());
    gate.armed.store(true, Ordering::SeqCst);
    std::thread::scope(|scope| {
        let reader = std::thread::Builder::new()
            .name(READER.into())
            .spawn_scoped(scope, || {
                log.committed_records(0, ReadBound::LogEnd)
                    .collect::<Vec<_>>()
            })
            .unwrap();
        gate.wait_paused();
        meanwhile();
        gate.release();
        reader.join().unwrap()
    })
}

fn segment_bases(dir: &Path) -> Vec<i64> {
    let mut bases: Vec<i64> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| PathBuf::from(e.unwrap().file_name()))
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .map(|p| p.file_stem().unwrap().to_str().unwrap().parse().unwrap())
        .collect();
    bases.sort_unstable();
    bases
}

/// Issue 29, item 15: an aborted transaction in one segment, its ABORT marker in the next, keys
/// superseding its data in a third; a compaction pass merges the three while a `read_committed`
/// reader has read the first one's batches but not yet listed the aborted transactions. Before
/// the fix the listing pinned the segments again, found them swapped out, skipped them, and the
/// aborted record came back as committed.
#[test]
fn item15_read_committed_lists_the_aborts_of_the_view_it_read_while_compaction_swaps_segments() {
    let temp = tempfile::tempdir().unwrap();
    let gate = Arc::new(Gate::default());
    let log = open(temp.path(), CleanupPolicy::COMPACT, &gate);
    three_segments_and_an_active_one(&log);
    assert_eq!(segment_bases(temp.path()), [0, 2, 4, 6]);

    let records = read_committed_around(&log, &gate, || {
        let stats = log.compact().unwrap();
        assert_eq!(stats.segments_cleaned, 3, "{stats:?}");
        assert_eq!(segment_bases(temp.path()), [0, 6]);
    });
    let records: Vec<LogRecord> = records.into_iter().map(Result::unwrap).collect();
    let values: Vec<(i64, &[u8])> = records
        .iter()
        .map(|r| (r.offset, r.value.as_deref().unwrap()))
        .collect();
    assert!(
        values.iter().all(|(_, value)| *value != b"aborted"),
        "aborted data read as committed: {values:?}"
    );
    // Everything committed that compaction kept, read from the cleaned segment.
    assert_eq!(
        values,
        [
            (3, &b"c"[..]),
            (4, &b"a1"[..]),
            (5, &b"b1"[..]),
            (6, &b"z"[..])
        ]
    );
}

/// Issue 29, item 15, the retention side: the segments holding the aborted data and its marker
/// are deleted while the reader waits inside its read of the first one. It must not return the
/// aborted record; the data is gone from the log, so the read fails as any read below the new
/// log start does.
#[test]
fn item15_read_committed_never_returns_aborted_data_while_retention_deletes_its_segments() {
    let temp = tempfile::tempdir().unwrap();
    let gate = Arc::new(Gate::default());
    let log = open(temp.path(), CleanupPolicy::DELETE, &gate);
    three_segments_and_an_active_one(&log);

    let records = read_committed_around(&log, &gate, || {
        log.delete_records_before(4).unwrap();
        let report = log.enforce_retention().unwrap();
        assert_eq!(report.segments_deleted(), 2, "{report:?}");
        assert_eq!(segment_bases(temp.path()), [4, 6]);
    });
    for record in records.iter().flatten() {
        assert_ne!(
            record.value.as_deref(),
            Some(&b"aborted"[..]),
            "aborted data read as committed: {records:?}"
        );
    }
    assert!(
        matches!(
            records.first(),
            Some(Err(Error::OffsetOutOfRange {
                requested: 0,
                start: 4,
                ..
            }))
        ),
        "{records:?}"
    );
}
