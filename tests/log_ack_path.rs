//! The acknowledgement path (ARCHITECTURE.md §6): every offset acknowledged under
//! [`FlushPolicy::EveryAppend`] was preceded by a sync of its file and, for a new segment, by a
//! sync of its directory.
//!
//! A [`RecordingStorage`] wraps the OS storage and logs, in order, every call that creates,
//! changes or syncs a file or a directory. The test replays the produce tool's loop (append one
//! batch, then acknowledge its offsets) and pushes each acknowledgement into the same log. The
//! proof then reads the log alone, so it holds for whatever the implementation does inside.
//!
//! A sync only covers a write that finished before the sync *started*: a sync that was already
//! running when the write landed may have flushed the file before the write reached it. So each
//! sync is logged when it returns, with the position the log had when it began.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use partlog::unstable::{
    Clock, FileLock, LockMode, Metadata, OpenMode, OsStorage, ReadMapping, Storage, StorageFile,
    SystemClock,
};
use partlog::{BatchHeader, FlushPolicy, Log, LogConfig, NewRecord, ReadBound};

/// One batch found in a write to a `.log` file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct BatchAt {
    /// Its first and last offsets.
    offsets: Range<i64>,
    /// Where its bytes lie in the file.
    bytes: Range<u64>,
}

/// One entry of the recording: what the log did to the file system, or an acknowledgement.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Event {
    /// A file was created, by an open or by an exclusive lock.
    Created { path: PathBuf },
    /// A write finished. For a `.log` file, `batches` are the whole batches the written bytes
    /// hold (empty if they are not whole batches).
    Wrote {
        path: PathBuf,
        bytes: Range<u64>,
        batches: Vec<BatchAt>,
    },
    /// `set_len` finished.
    SetLen { path: PathBuf, len: u64 },
    /// A `sync_data` or `sync_all` of a file returned successfully. It began when the recording
    /// held `started_at` events.
    Synced {
        path: PathBuf,
        data_only: bool,
        started_at: usize,
    },
    /// A `sync_dir` returned successfully; it began when the recording held `started_at` events.
    SyncedDir { path: PathBuf, started_at: usize },
    /// A rename finished.
    Renamed { from: PathBuf, to: PathBuf },
    /// A remove finished.
    Removed { path: PathBuf },
    /// The producer acknowledged `offsets` (end exclusive) after `append` returned.
    Acked { offsets: Range<i64> },
}

/// The ordered event log, shared by the storage, its files and the producer loop.
#[derive(Debug, Clone, Default)]
struct Recording {
    events: Arc<Mutex<Vec<Event>>>,
}

impl Recording {
    fn push(&self, event: Event) {
        self.events.lock().unwrap().push(event);
    }

    fn len(&self) -> usize {
        self.events.lock().unwrap().len()
    }

    fn events(&self) -> Vec<Event> {
        self.events.lock().unwrap().clone()
    }
}

/// [`OsStorage`] with every mutating and syncing call logged to a [`Recording`].
#[derive(Debug)]
struct RecordingStorage {
    inner: OsStorage,
    recording: Recording,
}

/// A file of a [`RecordingStorage`].
struct RecordingFile {
    inner: Arc<dyn StorageFile>,
    recording: Recording,
}

impl fmt::Debug for RecordingFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RecordingFile({:?})", self.inner)
    }
}

fn is_log_file(path: &Path) -> bool {
    path.extension().is_some_and(|ext| ext == "log")
}

/// The whole batches in `buf`, written at `position`; empty if `buf` is anything else.
fn batches_in(buf: &[u8], position: u64) -> Vec<BatchAt> {
    let mut batches = Vec::new();
    let mut at = 0;
    while at < buf.len() {
        let Ok(header) = BatchHeader::parse(&buf[at..]) else {
            return Vec::new();
        };
        let end = at + header.total_size();
        if end > buf.len() {
            return Vec::new();
        }
        batches.push(BatchAt {
            offsets: header.base_offset..header.next_offset(),
            bytes: position + at as u64..position + end as u64,
        });
        at = end;
    }
    batches
}

impl StorageFile for RecordingFile {
    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> partlog::Result<usize> {
        self.inner.read_at(buf, offset)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> partlog::Result<()> {
        self.inner.write_all_at(buf, offset)?;
        let batches = if is_log_file(self.path()) {
            batches_in(buf, offset)
        } else {
            Vec::new()
        };
        self.recording.push(Event::Wrote {
            path: self.path().to_path_buf(),
            bytes: offset..offset + buf.len() as u64,
            batches,
        });
        Ok(())
    }

    fn len(&self) -> partlog::Result<u64> {
        self.inner.len()
    }

    fn set_len(&self, len: u64) -> partlog::Result<()> {
        self.inner.set_len(len)?;
        self.recording.push(Event::SetLen {
            path: self.path().to_path_buf(),
            len,
        });
        Ok(())
    }

    fn sync_data(&self) -> partlog::Result<()> {
        let started_at = self.recording.len();
        self.inner.sync_data()?;
        self.recording.push(Event::Synced {
            path: self.path().to_path_buf(),
            data_only: true,
            started_at,
        });
        Ok(())
    }

    fn sync_all(&self) -> partlog::Result<()> {
        let started_at = self.recording.len();
        self.inner.sync_all()?;
        self.recording.push(Event::Synced {
            path: self.path().to_path_buf(),
            data_only: false,
            started_at,
        });
        Ok(())
    }

    fn map_read(&self) -> partlog::Result<Option<ReadMapping>> {
        self.inner.map_read()
    }
}

impl Storage for RecordingStorage {
    fn open(&self, path: &Path, mode: OpenMode) -> partlog::Result<Arc<dyn StorageFile>> {
        let creates = match mode {
            OpenMode::CreateNew => true,
            OpenMode::Create => !self.inner.exists(path)?,
            OpenMode::Read | OpenMode::ReadWrite => false,
        };
        let inner = self.inner.open(path, mode)?;
        if creates {
            self.recording.push(Event::Created {
                path: path.to_path_buf(),
            });
        }
        Ok(Arc::new(RecordingFile {
            inner,
            recording: self.recording.clone(),
        }))
    }

    fn create_dir_all(&self, path: &Path) -> partlog::Result<()> {
        self.inner.create_dir_all(path)
    }

    fn sync_dir(&self, dir: &Path) -> partlog::Result<()> {
        let started_at = self.recording.len();
        self.inner.sync_dir(dir)?;
        self.recording.push(Event::SyncedDir {
            path: dir.to_path_buf(),
            started_at,
        });
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> partlog::Result<()> {
        self.inner.rename(from, to)?;
        self.recording.push(Event::Renamed {
            from: from.to_path_buf(),
            to: to.to_path_buf(),
        });
        Ok(())
    }

    fn remove(&self, path: &Path) -> partlog::Result<()> {
        self.inner.remove(path)?;
        self.recording.push(Event::Removed {
            path: path.to_path_buf(),
        });
        Ok(())
    }

    fn list(&self, dir: &Path) -> partlog::Result<Vec<String>> {
        self.inner.list(dir)
    }

    fn metadata(&self, path: &Path) -> partlog::Result<Metadata> {
        self.inner.metadata(path)
    }

    fn lock(&self, path: &Path, mode: LockMode) -> partlog::Result<FileLock> {
        let creates = mode == LockMode::Exclusive && !self.inner.exists(path)?;
        let lock = self.inner.lock(path, mode)?;
        if creates {
            self.recording.push(Event::Created {
                path: path.to_path_buf(),
            });
        }
        Ok(lock)
    }
}

/// Why an acknowledged offset was not safe when it was acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Violation {
    /// No write before the acknowledgement holds the offset's batch.
    NeverWritten { offset: i64 },
    /// No sync of the file began after the last change to the batch's bytes and returned
    /// before the acknowledgement.
    FileNotSynced { offset: i64, file: PathBuf },
    /// The file was created during the run, and no sync of its directory began after the
    /// create and returned before the acknowledgement.
    DirectoryNotSynced { offset: i64, file: PathBuf },
}

/// Checks every acknowledgement in `events` and returns every offset that was acknowledged
/// unsafely, with the reason. It reads the events alone.
///
/// Files are identified by path, which holds when nothing renamed a `.log` file before the
/// last acknowledgement (the test asserts that of its runs).
fn check_acknowledgements(events: &[Event]) -> Vec<Violation> {
    let mut violations = Vec::new();
    for (ack_at, event) in events.iter().enumerate() {
        let Event::Acked { offsets } = event else {
            continue;
        };
        let before_ack = &events[..ack_at];
        for offset in offsets.clone() {
            if let Some(violation) = check_offset(before_ack, offset) {
                violations.push(violation);
            }
        }
    }
    violations
}

/// Checks one offset against the events before its acknowledgement.
fn check_offset(before_ack: &[Event], offset: i64) -> Option<Violation> {
    // The batch holding `offset`: the last write of it before the acknowledgement.
    let found = before_ack
        .iter()
        .enumerate()
        .rev()
        .find_map(|(at, event)| match event {
            Event::Wrote { path, batches, .. } => batches
                .iter()
                .find(|batch| batch.offsets.contains(&offset))
                .map(|batch| (at, path.clone(), batch.bytes.clone())),
            _ => None,
        });
    let Some((written_at, file, batch_bytes)) = found else {
        return Some(Violation::NeverWritten { offset });
    };

    // (a) The last change to those bytes (a write over them, or a truncation into them) came
    // before the start of a sync of the file that returned before the acknowledgement.
    let last_change = before_ack.iter().rposition(|event| match event {
        Event::Wrote { path, bytes, .. } => {
            *path == file && bytes.start < batch_bytes.end && batch_bytes.start < bytes.end
        }
        Event::SetLen { path, len } => *path == file && *len < batch_bytes.end,
        _ => false,
    });
    let last_change = last_change.unwrap_or(written_at).max(written_at);
    let file_synced = before_ack.iter().any(|event| match event {
        Event::Synced {
            path, started_at, ..
        } => *path == file && *started_at > last_change,
        _ => false,
    });
    if !file_synced {
        return Some(Violation::FileNotSynced { offset, file });
    }

    // (b) A file created during the run needs its directory entry synced as well.
    let created = before_ack
        .iter()
        .rposition(|event| matches!(event, Event::Created { path } if *path == file));
    if let Some(created) = created {
        let dir = file.parent();
        let dir_synced = before_ack.iter().any(|event| match event {
            Event::SyncedDir { path, started_at } => {
                Some(path.as_path()) == dir && *started_at > created
            }
            _ => false,
        });
        if !dir_synced {
            return Some(Violation::DirectoryNotSynced { offset, file });
        }
    }
    None
}

/// What a run of the producer loop recorded.
struct Run {
    events: Vec<Event>,
    /// Every offset the loop acknowledged, in order.
    acked: Vec<i64>,
    /// The `.log` files the run created.
    created_logs: Vec<PathBuf>,
}

/// The lines the produce tool would read from standard input.
fn lines() -> Vec<String> {
    (0..600)
        .map(|i| format!("line {i} {}", "y".repeat(i % 37)))
        .collect()
}

/// Replays `partlog produce --flush ... --batch N --print-offsets` on a recording OS storage:
/// append one batch of lines, and once `append` returns, acknowledge (print) its offsets.
/// Batch sizes cycle through 1 to 7 lines. Reads the log back before closing it.
fn run_producer(flush_policy: FlushPolicy) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let recording = Recording::default();
    let storage = Arc::new(RecordingStorage {
        inner: OsStorage::new(),
        recording: recording.clone(),
    });
    let config = LogConfig::builder_for_tests()
        .segment_bytes(1024)
        .segment_index_bytes(1024)
        .index_interval_bytes(256)
        .flush_policy(flush_policy)
        .storage(storage)
        .build()
        .unwrap();
    let log = Log::open(dir.path(), config).unwrap();
    let now = SystemClock.now_ms();
    let lines = lines();
    let mut acked = Vec::new();
    let mut next_line = 0;
    let mut batch_size = 1;
    while next_line < lines.len() {
        let end = (next_line + batch_size).min(lines.len());
        let records: Vec<NewRecord> = lines[next_line..end]
            .iter()
            .map(|line| NewRecord::new(now, None, Some(line.as_bytes())))
            .collect();
        let info = log.append(&records).unwrap();
        let offsets = info.first_offset..info.last_offset + 1;
        recording.push(Event::Acked {
            offsets: offsets.clone(),
        });
        acked.extend(offsets);
        next_line = end;
        batch_size = batch_size % 7 + 1;
    }
    // What was acknowledged is what the log holds, line for line.
    let read: Vec<Vec<u8>> = log
        .records(0, ReadBound::LogEnd)
        .map(|record| record.unwrap().value.unwrap())
        .collect();
    assert_eq!(read.len(), lines.len());
    for (value, line) in read.iter().zip(&lines) {
        assert_eq!(value, line.as_bytes());
    }
    log.close().unwrap();
    drop(log);

    let events = recording.events();
    let last_ack = events
        .iter()
        .rposition(|event| matches!(event, Event::Acked { .. }))
        .unwrap();
    assert!(
        !events[..last_ack].iter().any(|event| matches!(
            event,
            Event::Renamed { from, to } if is_log_file(from) || is_log_file(to)
        )),
        "the checker identifies files by path: no .log file may be renamed during the run"
    );
    let created_logs = events[..last_ack]
        .iter()
        .filter_map(|event| match event {
            Event::Created { path } if is_log_file(path) => Some(path.clone()),
            _ => None,
        })
        .collect();
    Run {
        events,
        acked,
        created_logs,
    }
}

/// The offset a violation is about.
fn offset_of(violation: &Violation) -> i64 {
    match violation {
        Violation::NeverWritten { offset }
        | Violation::FileNotSynced { offset, .. }
        | Violation::DirectoryNotSynced { offset, .. } => *offset,
    }
}

#[test]
fn every_offset_acknowledged_under_every_append_was_synced_with_its_directory_first() {
    let run = run_producer(FlushPolicy::EveryAppend);
    assert_eq!(run.acked, (0..lines().len() as i64).collect::<Vec<_>>());
    // The run rolled many times, and acknowledged offsets in every segment it created, so the
    // directory rule was exercised on every new segment, not just the first.
    assert!(
        run.created_logs.len() >= 20,
        "only {} segments",
        run.created_logs.len()
    );
    for log_file in &run.created_logs {
        let holds_an_ack = run.events.iter().any(|event| match event {
            Event::Wrote { path, batches, .. } => path == log_file && !batches.is_empty(),
            _ => false,
        });
        assert!(holds_an_ack, "{log_file:?} got no batch");
    }

    let violations = check_acknowledgements(&run.events);
    assert!(
        violations.is_empty(),
        "{} offsets were acknowledged unsafely; the first: {:?}",
        violations.len(),
        &violations[..violations.len().min(5)]
    );
}

/// The checker is not vacuous: take the good run's recording and remove, or move, the syncs it
/// relies on; each clause must then report every offset it guards.
#[test]
fn the_checker_reports_each_missing_or_early_sync() {
    let run = run_producer(FlushPolicy::EveryAppend);
    let every_offset: Vec<i64> = run.acked.clone();

    // Without the file syncs, every offset lacks one.
    let no_file_syncs: Vec<Event> = run
        .events
        .iter()
        .filter(|event| !matches!(event, Event::Synced { path, .. } if is_log_file(path)))
        .cloned()
        .collect();
    let violations = check_acknowledgements(&no_file_syncs);
    assert!(
        violations
            .iter()
            .all(|v| matches!(v, Violation::FileNotSynced { .. }))
    );
    assert_eq!(
        violations.iter().map(offset_of).collect::<Vec<_>>(),
        every_offset
    );

    // A sync that began before the write does not cover it.
    let early_syncs: Vec<Event> = run
        .events
        .iter()
        .map(|event| match event {
            Event::Synced {
                path, data_only, ..
            } => Event::Synced {
                path: path.clone(),
                data_only: *data_only,
                started_at: 0,
            },
            other => other.clone(),
        })
        .collect();
    let violations = check_acknowledgements(&early_syncs);
    assert_eq!(
        violations.iter().map(offset_of).collect::<Vec<_>>(),
        every_offset
    );

    // Without the directory syncs, every offset lacks one: every segment is new in this run.
    let no_dir_syncs: Vec<Event> = run
        .events
        .iter()
        .filter(|event| !matches!(event, Event::SyncedDir { .. }))
        .cloned()
        .collect();
    let violations = check_acknowledgements(&no_dir_syncs);
    assert!(
        violations
            .iter()
            .all(|v| matches!(v, Violation::DirectoryNotSynced { .. }))
    );
    assert_eq!(
        violations.iter().map(offset_of).collect::<Vec<_>>(),
        every_offset
    );

    // Without the writes, nothing was ever written.
    let no_writes: Vec<Event> = run
        .events
        .iter()
        .filter(|event| !matches!(event, Event::Wrote { .. }))
        .cloned()
        .collect();
    let violations = check_acknowledgements(&no_writes);
    assert!(
        violations
            .iter()
            .all(|v| matches!(v, Violation::NeverWritten { .. }))
    );
    assert_eq!(violations.len(), every_offset.len());
}

/// A real run that acknowledges without syncing: under [`FlushPolicy::OsDecides`] `append`
/// returns once the OS has the bytes, so the checker must object.
#[test]
fn acknowledging_under_os_decides_fails_the_check() {
    let run = run_producer(FlushPolicy::OsDecides);
    let violations = check_acknowledgements(&run.events);
    let unsynced = violations
        .iter()
        .filter(|v| matches!(v, Violation::FileNotSynced { .. }))
        .count();
    // Only the flusher syncs here (at roll), so an offset can pass only if one of its syncs
    // happened to start between the append's write and the acknowledgement.
    assert!(
        unsynced >= run.acked.len() / 2,
        "only {unsynced} of {} offsets unsynced",
        run.acked.len()
    );
}
