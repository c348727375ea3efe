//! Many segments: descriptors stay O(1) in the number of segments, and an open after a
//! clean shutdown reads no sealed segment (ARCHITECTURE.md §3, invariant 10).
//!
//! - On the real file system, a child process (this test binary, run again) lives under
//!   `RLIMIT_NOFILE` = 256. It writes 1,000 segments, closes the log, reopens it and reads every
//!   record back. A log that kept its segments open would need about 3,000 descriptors (a `.log`,
//!   an `.index` and a `.timeindex` each), so the child could not get through without the lazy
//!   opening and the LRU closing of idle segments.
//! - On the simulator (feature `sim`), its per-path counters prove that the reopen touched no
//!   sealed segment, and that reading one record opens exactly the segment that holds it.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use partlog::unstable::{
    FileLock, LockMode, Metadata, OpenMode, ReadMapping, Storage, StorageFile,
};
use partlog::{Log, LogConfig, NewRecord, ReadBound};

/// How many segments the log gets, the active one included.
const SEGMENTS: usize = 1000;
/// The descriptor limit of the child: far below one descriptor per segment file.
const NOFILE_LIMIT: u64 = 256;
/// `MAX_OPEN_SEGMENTS` in `src/log/open.rs`: how many segments the log keeps open unpinned.
const MAX_OPEN_SEGMENTS: usize = 64;
/// What `stats().open_segments` may reach: the LRU's bound, plus the active segment and the one
/// segment a reader pins beyond it.
const OPEN_SEGMENTS_BOUND: usize = MAX_OPEN_SEGMENTS + 2;
/// `MAX_UNSYNCED_SEALED` in `src/log/write/append.rs`: how many sealed segments may wait for their
/// fsync, open, whether or not the LRU still counts them.
const MAX_UNSYNCED_SEALED: usize = 8;
/// Records per appended batch: a few batches fill a 1 KiB segment.
const RECORDS_PER_BATCH: i64 = 3;

/// Tells the re-executed test binary to play the child, and where its log lives.
const CHILD_DIR_ENV: &str = "PARTLOG_MANY_SEGMENTS_DIR";
/// The child's test name (`--exact` matches the whole name).
const CHILD_TEST: &str = "many_segments_child_under_a_descriptor_limit";
/// The line the child prints last, so that the parent knows the child ran to its end rather
/// than matching no test and exiting 0.
const CHILD_DONE: &str = "many-segments child: done";

fn new_record(timestamp_base: i64, i: i64) -> NewRecord {
    NewRecord::new(
        timestamp_base + i,
        Some(format!("key-{i}").as_bytes()),
        Some(format!("value {i} {}", "x".repeat((i % 40) as usize)).as_bytes()),
    )
    .with_header("i", Some(&i.to_be_bytes()))
}

fn config_builder() -> partlog::LogConfigBuilder {
    // Small segments and small preallocated indexes: 1,000 segments of a few batches each.
    LogConfig::builder_for_tests()
        .segment_bytes(1024)
        .segment_index_bytes(1024)
        .index_interval_bytes(256)
}

/// Appends batches until the log has [`SEGMENTS`] segments; returns the log end offset.
///
/// The log's own back-pressure keeps the sealed segments awaiting their fsync bounded (see
/// `a_writer_outrunning_a_slow_flusher_keeps_a_bounded_number_of_descriptors`).
fn write_segments(log: &Log, timestamp_base: i64) -> i64 {
    let mut next = 0;
    let mut segments = log.stats().segments;
    while segments < SEGMENTS {
        let batch: Vec<NewRecord> = (next..next + RECORDS_PER_BATCH)
            .map(|i| new_record(timestamp_base, i))
            .collect();
        let info = log.append(&batch).unwrap();
        assert_eq!(
            (info.first_offset, info.last_offset),
            (next, next + RECORDS_PER_BATCH - 1)
        );
        next += RECORDS_PER_BATCH;
        let now_segments = log.stats().segments;
        if now_segments > segments {
            segments = now_segments;
        }
        // The writer alone must not pile up open segments either: it seals one per roll.
        let open = log.stats().open_segments;
        assert!(
            open <= OPEN_SEGMENTS_BOUND,
            "{open} segments open after a roll"
        );
    }
    assert_eq!(log.stats().segments, SEGMENTS);
    assert_eq!(log.log_end_offset(), next);
    next
}

/// Reads the log from offset 0 to `end` and checks every record. `check_bounds` runs every
/// few records, while the iterator is mid-way through the log.
fn read_and_check_all(log: &Log, timestamp_base: i64, end: i64, mut check_bounds: impl FnMut()) {
    let mut expected_offset = 0;
    for record in log.records(0, ReadBound::LogEnd) {
        let record = record.unwrap();
        let expected = new_record(timestamp_base, expected_offset);
        assert_eq!(record.offset, expected_offset);
        assert_eq!(
            record.timestamp, expected.timestamp,
            "offset {expected_offset}"
        );
        assert_eq!(record.key, expected.key, "offset {expected_offset}");
        assert_eq!(record.value, expected.value, "offset {expected_offset}");
        assert_eq!(record.headers, expected.headers, "offset {expected_offset}");
        if expected_offset % 50 == 0 {
            check_bounds();
        }
        expected_offset += 1;
    }
    assert_eq!(expected_offset, end, "the read stopped early");
}

/// The bases of the segments in `names` (a directory listing), sorted.
fn segment_bases(names: &[String]) -> Vec<i64> {
    let mut bases: Vec<i64> = names
        .iter()
        .filter_map(|name| partlog::unstable::parse_segment_file_name(name))
        .filter(|parsed| {
            parsed.kind == partlog::unstable::SegmentFileKind::Log && parsed.transient.is_none()
        })
        .map(|parsed| parsed.base_offset)
        .collect();
    bases.sort_unstable();
    bases
}

/// The soft `RLIMIT_NOFILE` of this process, from `/proc/self/limits` (partlog is Linux only).
fn nofile_soft_limit() -> u64 {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap();
    let line = limits
        .lines()
        .find(|line| line.starts_with("Max open files"))
        .unwrap();
    line["Max open files".len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// How many descriptors this process has open.
fn open_descriptors() -> usize {
    // The listing itself holds one descriptor, counted here and in every other count alike.
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// The descriptors this process holds on files under `dir`: a count no other test of this
/// binary, running beside the caller, can add to.
fn descriptors_under(dir: &Path) -> usize {
    let dir = dir.canonicalize().unwrap();
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .filter(|target| target.starts_with(&dir))
        .count()
}

#[test]
fn a_thousand_segments_are_written_reopened_and_read_under_256_descriptors() {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    // `ulimit` in a shell wrapper, so that the limit holds from the child's first instruction.
    let output = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -n {NOFILE_LIMIT} && exec \"$0\" \"$@\""))
        .arg(&exe)
        .args([
            CHILD_TEST,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DIR_ENV, dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the child failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    assert!(
        stdout.contains(CHILD_DONE),
        "the child did not run to its end:\n{stdout}\n{stderr}"
    );
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(segment_bases(&names).len(), SEGMENTS);
}

/// A storage whose file syncs from the flusher thread wait while a gate is shut: a disk whose
/// background fsyncs take as long as a test wants.
#[derive(Debug, Default)]
struct SlowSyncStorage {
    inner: partlog::unstable::OsStorage,
    gate: Arc<SyncGate>,
}

#[derive(Debug, Default)]
struct SyncGate {
    slow: AtomicBool,
}

impl SyncGate {
    fn set_shut(&self, slow: bool) {
        self.slow.store(slow, Ordering::SeqCst);
    }

    /// Makes the log's flusher thread a slow disk while the gate is "shut": each of its syncs
    /// takes 20 ms longer. The appender's own syncs (back-pressure) are not slowed, so the test
    /// shows the writer waiting on durability instead of piling up sealed segments.
    fn wait_open(&self) {
        let flusher = std::thread::current()
            .name()
            .is_some_and(|name| name.starts_with("partlog-flusher"));
        if flusher && self.slow.load(Ordering::SeqCst) {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

#[derive(Debug)]
struct SlowSyncFile {
    inner: Arc<dyn StorageFile>,
    gate: Arc<SyncGate>,
}

impl StorageFile for SlowSyncFile {
    fn path(&self) -> &Path {
        self.inner.path()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> partlog::Result<usize> {
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
        self.gate.wait_open();
        self.inner.sync_data()
    }
    fn sync_all(&self) -> partlog::Result<()> {
        self.gate.wait_open();
        self.inner.sync_all()
    }
    fn map_read(&self) -> partlog::Result<Option<ReadMapping>> {
        self.inner.map_read()
    }
}

impl Storage for SlowSyncStorage {
    fn open(&self, path: &Path, mode: OpenMode) -> partlog::Result<Arc<dyn StorageFile>> {
        Ok(Arc::new(SlowSyncFile {
            inner: self.inner.open(path, mode)?,
            gate: Arc::clone(&self.gate),
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

/// Under the default flush policy the flusher fsyncs each sealed segment off the append path.
/// When the disk is slower than the writer, sealed segments queue for their fsync, each keeping
/// its three descriptors until it gets it. The log bounds that queue (back-pressure: an append
/// waits for a covering sync once 8 sealed segments wait), so descriptors stay bounded however
/// far the writer gets ahead: here the flusher's fsyncs are slow while the writer rolls 150 times.
#[test]
fn a_writer_outrunning_a_slow_flusher_keeps_a_bounded_number_of_descriptors() {
    const ROLLS: usize = 150;
    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(SlowSyncStorage::default());
    let gate = Arc::clone(&storage.gate);
    let config = config_builder().storage(storage).build().unwrap();
    let log = Log::open(dir.path(), config).unwrap();
    gate.set_shut(true);
    let mut next = 0;
    while log.stats().segments <= ROLLS {
        let batch: Vec<NewRecord> = (next..next + RECORDS_PER_BATCH)
            .map(|i| new_record(0, i))
            .collect();
        log.append(&batch).unwrap();
        next += RECORDS_PER_BATCH;
    }
    // Only the log's own files: the process-wide count also moves with the tests beside this one.
    let held = descriptors_under(dir.path());
    // Open the gate before asserting: close (and the drop of a failed test) syncs.
    gate.set_shut(false);
    log.close().unwrap();
    let after_close = descriptors_under(dir.path());
    drop(log);
    assert_eq!(
        descriptors_under(dir.path()),
        0,
        "a dropped log holds no descriptor (closed: {after_close})"
    );
    // Three descriptors for each segment the LRU keeps and each sealed one awaiting its fsync
    // (the LRU may have let it go), and the lock and checkpoint files.
    let bound = 3 * (OPEN_SEGMENTS_BOUND + MAX_UNSYNCED_SEALED) + 2;
    assert!(
        held <= bound,
        "{held} descriptors held after {ROLLS} rolls (bound {bound})"
    );
}

/// The child of `a_thousand_segments_are_written_reopened_and_read_under_256_descriptors`, run in its own process under `RLIMIT_NOFILE` = 256. Ignored in a
/// normal run: the parent runs it with `--ignored` and tells it where to write.
#[test]
#[ignore = "the child role of a_thousand_segments_are_written_reopened_and_read_under_256_descriptors"]
fn many_segments_child_under_a_descriptor_limit() {
    let Some(dir) = std::env::var_os(CHILD_DIR_ENV) else {
        println!("{CHILD_DIR_ENV} is not set: nothing to do outside the parent test");
        return;
    };
    let dir = Path::new(&dir);
    assert_eq!(
        nofile_soft_limit(),
        NOFILE_LIMIT,
        "the child must run under the descriptor limit"
    );
    let timestamp_base = partlog::unstable::Clock::now_ms(&partlog::unstable::SystemClock);
    let config = config_builder().build().unwrap();
    let baseline = open_descriptors();

    let log = Log::open(dir, config.clone()).unwrap();
    let end = write_segments(&log, timestamp_base);
    log.close().unwrap();
    drop(log);
    assert_eq!(
        open_descriptors(),
        baseline,
        "a closed log holds no descriptor"
    );

    let log = Log::open(dir, config).unwrap();
    let report = log.recovery_report().clone();
    assert!(report.clean_shutdown, "{report:?}");
    assert_eq!(report.segments_scanned, 0, "{report:?}");
    assert_eq!(log.log_end_offset(), end);
    let stats = log.stats();
    assert_eq!(stats.segments, SEGMENTS);
    assert_eq!(stats.open_segments, 1, "only the active segment is open");
    // The active segment's three files, `partlog.lock` and `partlog.checkpoint`.
    let after_open = open_descriptors();
    assert!(
        after_open <= baseline + 5,
        "open took {} descriptors",
        after_open - baseline
    );

    let mut most_open = 0;
    let mut most_descriptors = 0;
    read_and_check_all(&log, timestamp_base, end, || {
        let open = log.stats().open_segments;
        assert!(open <= OPEN_SEGMENTS_BOUND, "{open} segments open");
        most_open = most_open.max(open);
        most_descriptors = most_descriptors.max(open_descriptors());
    });
    // The read went past the LRU's bound, so the bound, not the log's size, capped what it held.
    assert!(most_open >= MAX_OPEN_SEGMENTS, "at most {most_open} open");
    assert!(
        most_descriptors <= baseline + 3 * OPEN_SEGMENTS_BOUND + 2,
        "{most_descriptors} descriptors open"
    );
    log.close().unwrap();
    // A log kept after its close holds only what open held: the sealed segments the reads
    // opened are closed, and the directory lock is released.
    assert_eq!(
        log.stats().open_segments,
        1,
        "sealed segments open after close"
    );
    let after_close = open_descriptors();
    assert!(
        after_close < after_open,
        "{after_close} descriptors after close, {after_open} after open"
    );
    drop(log);
    assert_eq!(
        open_descriptors(),
        baseline,
        "a dropped log holds no descriptor"
    );
    println!(
        "{CHILD_DONE}: {end} records in {SEGMENTS} segments, at most {most_open} segments and \
         {most_descriptors} descriptors open"
    );
}

/// The same log on the simulator, whose per-path counters show which files each step touched.
#[cfg(feature = "sim")]
mod on_the_simulator {
    use std::collections::BTreeSet;
    use std::path::{Path, PathBuf};
    use std::sync::Arc;

    use partlog::unstable::sim::SimStats;
    use partlog::unstable::{
        ManualClock, SegmentFileKind, SimStorage, Storage, parse_segment_file_name,
        segment_file_path,
    };
    use partlog::{Log, LogConfig, ReadBound};

    use super::{
        MAX_OPEN_SEGMENTS, OPEN_SEGMENTS_BOUND, SEGMENTS, config_builder, new_record,
        read_and_check_all, segment_bases, write_segments,
    };

    const T0: i64 = 1_700_000_000_000;

    fn config(sim: &SimStorage) -> LogConfig {
        config_builder()
            .storage(Arc::new(sim.clone()))
            .clock(Arc::new(ManualClock::new(T0)))
            .build()
            .unwrap()
    }

    /// Every path the counters saw a file operation on (an open, a read, a map, a write or a
    /// sync), since the last reset.
    fn touched(stats: &SimStats) -> BTreeSet<PathBuf> {
        stats
            .per_path
            .iter()
            .filter(|(_, s)| s.opens + s.reads + s.maps + s.writes + s.syncs > 0)
            .map(|(path, _)| path.clone())
            .collect()
    }

    /// The segment bases among `paths`.
    fn segments_of(paths: &BTreeSet<PathBuf>) -> BTreeSet<i64> {
        paths
            .iter()
            .filter_map(|path| parse_segment_file_name(path.file_name()?.to_str()?))
            .map(|parsed| parsed.base_offset)
            .collect()
    }

    fn segment_files(dir: &Path, base: i64) -> [PathBuf; 3] {
        [
            SegmentFileKind::Log,
            SegmentFileKind::OffsetIndex,
            SegmentFileKind::TimeIndex,
        ]
        .map(|kind| segment_file_path(dir, base, kind))
    }

    /// Writes the 1,000-segment log and closes it; returns the end offset and the segment bases.
    fn build(sim: &SimStorage, dir: &Path) -> (i64, Vec<i64>) {
        let log = Log::open(dir, config(sim)).unwrap();
        let end = write_segments(&log, T0);
        log.close().unwrap();
        drop(log);
        let bases = segment_bases(&sim.list(dir).unwrap());
        assert_eq!(bases.len(), SEGMENTS);
        (end, bases)
    }

    #[test]
    fn a_clean_reopen_reads_no_sealed_segment_and_a_read_opens_only_its_own() {
        let sim = SimStorage::new(1);
        let dir = Path::new("/log");
        let (end, bases) = build(&sim, dir);
        let active_base = bases[SEGMENTS - 1];

        sim.reset_stats();
        let log = Log::open(dir, config(&sim)).unwrap();
        let report = log.recovery_report().clone();
        assert!(report.clean_shutdown, "{report:?}");
        assert_eq!(report.segments_scanned, 0, "{report:?}");
        assert_eq!(log.log_end_offset(), end);
        assert_eq!(log.stats().open_segments, 1);

        let opened = touched(&sim.stats());
        let mut allowed: BTreeSet<PathBuf> = segment_files(dir, active_base).into();
        allowed.insert(dir.join("partlog.lock"));
        allowed.insert(dir.join("partlog.checkpoint"));
        // The producer snapshot the close wrote at the log end, which replaces any replay.
        allowed.insert(dir.join(format!("{end:020}.snapshot")));
        // The settings stored with the log, which every open applies.
        allowed.insert(dir.join("partlog.properties"));
        let unexpected: Vec<&PathBuf> = opened.difference(&allowed).collect();
        assert!(
            unexpected.is_empty(),
            "the clean reopen touched {unexpected:?}"
        );
        assert_eq!(segments_of(&opened), BTreeSet::from([active_base]));
        // The counters are live: open did read the active segment's tail and the checkpoint.
        let per_path = &sim.stats().per_path;
        for path in [
            segment_file_path(dir, active_base, SegmentFileKind::Log),
            dir.join("partlog.checkpoint"),
        ] {
            let stats = per_path.get(&path).cloned().unwrap_or_default();
            assert!(stats.opens >= 1 && stats.reads >= 1, "{path:?}: {stats:?}");
        }

        // One record from an early segment opens that segment and nothing else.
        let early_base = bases[3];
        let offset = early_base + 1;
        assert!(offset < bases[4]);
        sim.reset_stats();
        let record = log
            .records(offset, ReadBound::LogEnd)
            .next()
            .unwrap()
            .unwrap();
        let expected = new_record(T0, offset);
        assert_eq!(record.offset, offset);
        assert_eq!(record.value, expected.value);
        let stats = sim.stats();
        let opened = touched(&stats);
        assert_eq!(segments_of(&opened), BTreeSet::from([early_base]));
        assert!(
            opened.iter().all(|path| path.parent() == Some(dir)
                && parse_segment_file_name(path.file_name().unwrap().to_str().unwrap()).is_some()),
            "the read touched {opened:?}"
        );
        let log_file = segment_file_path(dir, early_base, SegmentFileKind::Log);
        assert_eq!(stats.per_path[&log_file].opens, 1, "{stats:?}");
        assert_eq!(stats.writes, 0, "a read writes nothing: {stats:?}");
        assert_eq!(log.stats().open_segments, 2);
        log.close().unwrap();
    }

    #[test]
    fn a_full_read_opens_each_segment_once_and_keeps_at_most_the_lru_bound_open() {
        let sim = SimStorage::new(2);
        let dir = Path::new("/log");
        let (end, bases) = build(&sim, dir);

        let log = Log::open(dir, config(&sim)).unwrap();
        sim.reset_stats();
        let mut most_open = 0;
        read_and_check_all(&log, T0, end, || {
            let open = log.stats().open_segments;
            assert!(open <= OPEN_SEGMENTS_BOUND, "{open} segments open");
            most_open = most_open.max(open);
        });
        assert!(most_open >= MAX_OPEN_SEGMENTS, "at most {most_open} open");
        let stats = sim.stats();
        // A forward scan never comes back to a segment the LRU closed: one open per `.log`.
        for &base in &bases[..SEGMENTS - 1] {
            let log_file = segment_file_path(dir, base, SegmentFileKind::Log);
            let opens = stats.per_path.get(&log_file).map_or(0, |s| s.opens);
            assert_eq!(opens, 1, "{log_file:?} opened {opens} times");
        }
        assert_eq!(stats.writes, 0, "a read writes nothing");
        log.close().unwrap();
    }
}
