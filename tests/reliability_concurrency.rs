//! Races between the log's writers, its maintenance passes and its durability waits, and what a
//! failed fsync leaves answered, on the simulator (ARCHITECTURE.md §8, "The concurrency
//! contract"):
//! - a compaction pass that a truncation and a refill overtake never records a recovery point
//!   above what is synced, so a crash that tears the refill leaves a log that opens;
//! - an `acks=all` handle never acknowledges a record that a truncation removed, even when the
//!   handle is first polled after the truncation and a refill of the same offset;
//! - a batch whose last offset is `i64::MAX` is corruption, never a reason to delete a segment;
//! - a truncation that empties a segment restarts its roll clock (Kafka's
//!   `LogSegmentTest.testTruncateFull`);
//! - every failed fsync poisons the log, and a poisoned log answers nothing above its durable
//!   offset.
#![cfg(feature = "sim")] // the simulator and the manual clock: `cargo test --all-features`

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use partlog::unstable::checkpoint::CheckpointFile;
use partlog::unstable::sim::{FaultOp, FaultRule};
use partlog::unstable::{ManualClock, OpenMode, SimStorage, Storage};
use partlog::{
    Acks, BatchBuilder, CleanupPolicy, Compression, Error, FlushPolicy, Log, LogConfig, NewRecord,
    Producer, ProducerConfig, ReadBound, RecoveryMode,
};

#[cfg(target_os = "linux")]
#[path = "common/fenced.rs"]
mod fenced_storage;
#[cfg(target_os = "linux")]
#[path = "common/sim_files.rs"]
#[allow(dead_code, reason = "only its batch framing serves here")]
mod sim_files;

const T0: i64 = 1_700_000_000_000;

/// How long a test waits for a condition that must come before it gives up: only a broken
/// build gets near it, however loaded the machine.
const PATIENCE: Duration = Duration::from_secs(120);

fn record(key: &str, value: &str) -> NewRecord {
    NewRecord::new(T0, Some(key.as_bytes()), Some(value.as_bytes()))
}

/// Polls `condition` until it holds, failing the test after [`PATIENCE`].
fn wait_until(what: &str, condition: impl FnMut() -> bool) {
    assert!(eventually(condition), "gave up waiting until {what}");
}

/// Polls `condition` until it holds (`true`) or [`PATIENCE`] runs out (`false`).
fn eventually(mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + PATIENCE;
    while !condition() {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

/// The writer-lock race of compaction and truncation. Telling a thread parked on a lock from a
/// running one takes Linux's `/proc`.
#[cfg(target_os = "linux")]
mod writer_lock_race {
    use std::sync::Arc;

    use parking_lot::{Condvar, Mutex};

    use partlog::unstable::sim::{CrashConfig, FaultOp, FaultRule};
    use partlog::unstable::{
        Advice, CanonicalPath, FileId, FileLock, LockMode, ManualClock, Metadata, OpenMode,
        ReadMapping, SimStorage, Storage, StorageFile, list_segment_bases,
    };
    use partlog::{CleanupPolicy, FlushPolicy, Log, LogConfig, NewRecord, ReadBound, RecoveryMode};

    use super::fenced_storage::Fenced;
    use super::{PATIENCE, Path, T0, record, sim_files, wait_until};

    /// A gate a [`GatedStorage`] holds one chosen sync at: the thread that makes it sleeps inside
    /// the sync, with whatever locks it holds, until the test opens the gate.
    #[derive(Debug, Default)]
    struct Gate {
        state: Mutex<GateState>,
        changed: Condvar,
    }

    #[derive(Debug, Default)]
    struct GateState {
        /// The next `sync_data` of a file whose path ends with this is held.
        armed: Option<String>,
        holding: bool,
        open: bool,
    }

    impl Gate {
        fn arm(&self, path_suffix: &str) {
            let mut state = self.state.lock();
            state.armed = Some(path_suffix.to_string());
            state.open = false;
        }

        /// Called by every sync: holds it if it is the armed one.
        fn pass(&self, path: &Path) {
            let mut state = self.state.lock();
            let armed = state
                .armed
                .as_deref()
                .is_some_and(|suffix| path.to_string_lossy().ends_with(suffix));
            if !armed {
                return;
            }
            state.armed = None;
            state.holding = true;
            self.changed.notify_all();
            // Bounded, so that a test that fails while the gate holds a sync (its `Log`'s drop
            // syncs too) ends in its failure rather than in a hang.
            while !state.open {
                if self.changed.wait_for(&mut state, PATIENCE).timed_out() {
                    break;
                }
            }
            state.holding = false;
        }

        fn wait_until_holding(&self) {
            let mut state = self.state.lock();
            while !state.holding {
                let timed_out = self.changed.wait_for(&mut state, PATIENCE).timed_out();
                assert!(!timed_out, "the armed sync never came");
            }
        }

        fn open(&self) {
            self.state.lock().open = true;
            self.changed.notify_all();
        }
    }

    /// The simulator, with a [`Gate`] on `sync_data`.
    #[derive(Debug)]
    struct GatedStorage {
        inner: Arc<dyn Storage>,
        gate: Arc<Gate>,
    }

    impl GatedStorage {
        /// The gate over fenced storage: the process that crashes runs on it, so that once the
        /// machine is down none of its threads (nor its drop) changes the image the next open
        /// recovers. The gate holds its sync outside the fence's lock.
        fn over_fenced(sim: &SimStorage, gate: &Arc<Gate>) -> GatedStorage {
            GatedStorage {
                inner: Arc::new(Fenced::new(Arc::new(sim.clone()), sim.clone())),
                gate: Arc::clone(gate),
            }
        }
    }

    #[derive(Debug)]
    struct GatedFile {
        inner: Arc<dyn StorageFile>,
        gate: Arc<Gate>,
    }

    impl StorageFile for GatedFile {
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
        fn file_id(&self) -> partlog::Result<Option<FileId>> {
            self.inner.file_id()
        }
        fn set_len(&self, len: u64) -> partlog::Result<()> {
            self.inner.set_len(len)
        }
        fn sync_data(&self) -> partlog::Result<()> {
            self.gate.pass(self.inner.path());
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
    }

    impl Storage for GatedStorage {
        fn open(&self, path: &Path, mode: OpenMode) -> partlog::Result<Arc<dyn StorageFile>> {
            Ok(Arc::new(GatedFile {
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
        fn canonical_path(&self, path: &Path) -> partlog::Result<CanonicalPath> {
            self.inner.canonical_path(path)
        }
        fn set_mtime(&self, path: &Path, mtime_ms: i64) -> partlog::Result<()> {
            self.inner.set_mtime(path, mtime_ms)
        }
    }

    /// The calling thread's kernel id, from `/proc/thread-self` (a link to `<pid>/task/<tid>`).
    fn current_tid() -> u64 {
        let link = std::fs::read_link("/proc/thread-self").expect("/proc/thread-self");
        link.file_name()
            .and_then(|name| name.to_str())
            .and_then(|name| name.parse().ok())
            .expect("a thread id")
    }

    /// Whether the thread `tid` of this process is asleep (state `S` in its `/proc` stat): for a
    /// thread whose next step is to take a mutex, asleep means parked in that mutex's queue.
    fn is_asleep(tid: u64) -> bool {
        let stat =
            std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap_or_default();
        // The state follows the command name, which is in parentheses and may hold spaces.
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('S'))
    }

    /// How many looks in a row, a millisecond apart, must find a thread asleep before it counts as
    /// parked on a lock held for good, rather than caught in a brief sleep on the way there (an
    /// allocator's lock, say).
    const ASLEEP_LOOKS: u32 = 50;

    /// Runs `work` on a new thread, and returns once that thread has stayed asleep (see
    /// [`is_asleep`]) for [`ASLEEP_LOOKS`] looks in a row, or has finished.
    fn spawn_until_parked<T: Send + 'static>(
        work: impl FnOnce() -> T + Send + 'static,
    ) -> std::thread::JoinHandle<T> {
        let (tid_sender, tid_receiver) = std::sync::mpsc::channel();
        let handle = std::thread::spawn(move || {
            tid_sender.send(current_tid()).unwrap();
            work()
        });
        let tid = tid_receiver.recv().unwrap();
        let mut asleep_looks = 0;
        wait_until("the thread parks", || {
            if handle.is_finished() {
                return true;
            }
            asleep_looks = if is_asleep(tid) { asleep_looks + 1 } else { 0 };
            asleep_looks >= ASLEEP_LOOKS
        });
        handle
    }

    /// Zeroes the batch whose base offset is `base_offset` in whichever segment of `dir` holds it,
    /// through the end of its file, and syncs: the image of a crash that lost the batch's write
    /// but kept the file length it made.
    fn lose_the_batch_at(sim: &SimStorage, dir: &Path, base_offset: i64) {
        for name in sim.list(dir).unwrap() {
            if !name.ends_with(".log") {
                continue;
            }
            let file = sim.open(&dir.join(&name), OpenMode::ReadWrite).unwrap();
            let mut bytes = vec![0; usize::try_from(file.len().unwrap()).unwrap()];
            file.read_exact_at(&mut bytes, 0).unwrap();
            for (start, end) in sim_files::batch_spans(&bytes) {
                let base = i64::from_be_bytes(bytes[start..start + 8].try_into().unwrap());
                if base == base_offset {
                    file.write_all_at(&vec![0; bytes.len() - start], start as u64)
                        .unwrap();
                    file.sync_data().unwrap();
                    assert_eq!(end, bytes.len(), "the batch is the file's last");
                    return;
                }
            }
        }
        panic!(
            "no segment of {} holds a batch at {base_offset}",
            dir.display()
        );
    }

    /// Compaction checks that `offset` is durable, then takes the writer lock to record it as the
    /// recovery point. A truncation below it and a refill past it that come in between must not
    /// make it record a point above the synced bytes: a crash that tears the refill would then put
    /// torn bytes below the recovery point, and the log would not open under `RecoveryMode::Fail`.
    ///
    /// Nor may the pass go on without the point: it would drop durable records for the
    /// refill's unsynced ones, and the crash then takes both.
    ///
    /// The three threads queue on the writer lock as truncate, refill, compact: the truncation is
    /// held at its checkpoint sync (with the writer lock, before it lowers the durable offset), the
    /// refill and then the compaction pass park behind it, and the lock's queue wakes them in that
    /// order.
    #[test]
    fn compaction_racing_truncation_never_records_an_unsynced_recovery_point() {
        let dir = Path::new("/race/compacted-0");
        let sim = SimStorage::new(11);
        let gate = Arc::new(Gate::default());
        let storage: Arc<dyn Storage> = Arc::new(GatedStorage::over_fenced(&sim, &gate));
        let config = LogConfig::builder_for_tests()
            .segment_bytes(1024)
            .cleanup_policy(CleanupPolicy::COMPACT)
            .flush_policy(FlushPolicy::OsDecides)
            // Only compaction records recovery points here: the flusher's would hide the race.
            .recovery_point_ms(3_600_000)
            .recovery_point_bytes(u64::MAX)
            .recovery_mode(RecoveryMode::Fail)
            .storage(Arc::clone(&storage))
            .clock(Arc::new(ManualClock::new(T0)))
            .build()
            .unwrap();
        let log = Arc::new(Log::open(dir, config.clone()).unwrap());
        let mut i = 0;
        while list_segment_bases(&*storage, dir).unwrap().len() < 3 {
            log.append(&[record(&format!("k{}", i % 4), &format!("v{i}"))])
                .unwrap();
            i += 1;
        }
        log.wait_durable(log.log_end_offset() - 1).unwrap();
        let bases = list_segment_bases(&*storage, dir).unwrap();
        // The pass records the active segment's base; the truncation cuts into the segment below.
        let active_base = bases[bases.len() - 1];
        let cut = bases[bases.len() - 2] + 1;
        assert!(log.durable_offset() >= active_base);
        // What the truncation keeps, all durable: each key's latest record below the cut must
        // outlive the race and the crash, whatever the pass cleaned.
        let mut latest_kept = std::collections::BTreeMap::new();
        for record in log.records(0, ReadBound::LogEnd) {
            let record = record.unwrap();
            if record.offset < cut {
                latest_kept.insert(record.key.clone(), (record.offset, record.value.clone()));
            }
        }

        gate.arm("partlog.checkpoint");
        let truncation = {
            let log = Arc::clone(&log);
            std::thread::spawn(move || log.truncate_to(cut))
        };
        gate.wait_until_holding();
        // One batch from the cut to past the pass's point, never synced.
        let refill: Vec<NewRecord> = (cut..active_base + 5)
            .map(|offset| record(&format!("k{}", offset % 4), "refill"))
            .collect();
        let refill = {
            let log = Arc::clone(&log);
            spawn_until_parked(move || log.append(&refill))
        };
        let pass = {
            let log = Arc::clone(&log);
            spawn_until_parked(move || log.compact())
        };
        gate.open();
        assert_eq!(truncation.join().unwrap().unwrap(), cut);
        let refilled = refill.join().unwrap().unwrap();
        assert_eq!(refilled.first_offset, cut);
        assert!(refilled.last_offset >= active_base);
        // The pass may fail or clean nothing: it raced a truncation. It must not lie about what
        // is durable.
        let _ = pass.join().unwrap();

        // A crash image in which the refill's write is lost but the file's new length survives:
        // the refill's bytes read as zeros (the simulator draws such images at random; this one is
        // built by hand so that every run meets it).
        sim.crash_with(&CrashConfig::keep_unsynced());
        drop(log);
        lose_the_batch_at(&sim, dir, cut);
        // The next process, on the machine itself.
        let mut config = config;
        config.storage = Arc::new(sim.clone());
        let reopened = Log::open(dir, config).unwrap_or_else(|error| {
            panic!("the log must open after the crash under RecoveryMode::Fail: {error}")
        });
        assert!(reopened.log_end_offset() >= cut);
        let values: Vec<_> = reopened
            .records(0, ReadBound::LogEnd)
            .collect::<partlog::Result<_>>()
            .unwrap();
        assert!(
            values
                .iter()
                .all(|r| r.offset < cut || r.value.as_deref() == Some(b"refill"))
        );
        for (key, (offset, value)) in latest_kept {
            assert!(
                values
                    .iter()
                    .any(|r| r.key == key && r.offset == offset && r.value == value),
                "the durable latest record of {key:?} (offset {offset}) was cleaned away"
            );
        }
    }

    /// A group-commit sync that a truncation overtakes must not take a sealed segment off the
    /// unsynced list when the truncation made that segment active again, appends refilled it and
    /// a roll sealed it anew (the same segment, unsynced): the next sync would skip it, the
    /// durable offset would pass its refilled batch, and a crash would take acknowledged
    /// records (found by tests/crash_matrix_concurrent.rs, seed 11129: offsets missing between a
    /// segment and the next). The flusher's sync is held at the new active `.log`, after it
    /// synced the sealed segment, while the test truncates, refills and rolls. (It cannot be
    /// held inside the sealed segment's own syncs: they run under the segment's sync lock, and
    /// the truncation's sync of that segment waits for them to end.)
    #[test]
    fn a_segment_resealed_during_its_sync_is_synced_again() {
        let dir = Path::new("/race/resealed-0");
        let sim = SimStorage::new(13);
        let gate = Arc::new(Gate::default());
        let storage: Arc<dyn Storage> = Arc::new(GatedStorage::over_fenced(&sim, &gate));
        let config = |storage: Arc<dyn Storage>| {
            LogConfig::builder_for_tests()
                .segment_bytes(1024)
                .flush_policy(FlushPolicy::OsDecides)
                .recovery_point_ms(3_600_000)
                .recovery_point_bytes(u64::MAX)
                .recovery_mode(RecoveryMode::Fail)
                .storage(storage)
                .clock(Arc::new(ManualClock::new(T0)))
                .build()
                .unwrap()
        };
        let value = |name: &str| format!("{name}-{}", "v".repeat(400));
        let log = Log::open(dir, config(Arc::clone(&storage))).unwrap();
        // Two records fill segment 0, unsynced, so that the flusher's sync at the roll is
        // always a group commit's (with nothing to make durable it would sync segment 0 alone,
        // and reach no point to hold it at before it takes segment 0 off the list).
        log.append(&[record("a", &value("a"))]).unwrap();
        log.append(&[record("b", &value("b"))]).unwrap();
        // The third rolls: the flusher syncs sealed segment 0, and is held at the active
        // segment's `.log` before it can take segment 0 off its unsynced list.
        gate.arm("00000000000000000002.log");
        let info = log.append(&[record("c", &value("c"))]).unwrap();
        assert_eq!(info.first_offset, 2);
        gate.wait_until_holding();
        assert_eq!(list_segment_bases(&*storage, dir).unwrap(), vec![0, 2]);
        // Truncate into segment 0 (active again), refill it and roll it again.
        assert_eq!(log.truncate_to(1).unwrap(), 1);
        log.append(&[record("b2", &value("b2"))]).unwrap();
        let info = log.append(&[record("c2", &value("c2"))]).unwrap();
        assert_eq!(info.first_offset, 2);
        assert_eq!(list_segment_bases(&*storage, dir).unwrap(), vec![0, 2]);
        gate.open();
        log.wait_durable(2).unwrap();
        sim.crash_with(&CrashConfig::lose_unsynced());
        drop(log);

        let log = Log::open(dir, config(Arc::new(sim.clone()))).unwrap();
        // Each value as the record's name, or the whole value if it is not one of this test's.
        let names: Vec<(i64, String)> = log
            .records(0, ReadBound::LogEnd)
            .map(|record| {
                let record = record.unwrap();
                let value = String::from_utf8_lossy(&record.value.unwrap_or_default()).into_owned();
                let name = value.split_once('-').map_or(value.clone(), |(name, rest)| {
                    if rest == "v".repeat(400) {
                        name.to_string()
                    } else {
                        value.clone()
                    }
                });
                (record.offset, name)
            })
            .collect();
        let expected: Vec<(i64, String)> =
            vec![(0, "a".into()), (1, "b2".into()), (2, "c2".into())];
        assert_eq!(names, expected, "records acknowledged durable were lost");
    }

    /// Holds the first failed sync's report (sent before the log poisons itself) until released:
    /// the moment after a sync failed and before the log knows.
    #[derive(Default)]
    struct HoldFirstFailedSync {
        state: Mutex<(bool, bool, bool)>,
        changed: Condvar,
    }

    impl HoldFirstFailedSync {
        fn wait_until_held(&self) {
            let mut state = self.state.lock();
            while !state.1 {
                let timed_out = self.changed.wait_for(&mut state, PATIENCE).timed_out();
                assert!(!timed_out, "no sync failed");
            }
        }
        fn release(&self) {
            self.state.lock().2 = true;
            self.changed.notify_all();
        }
    }

    impl partlog::Observer for HoldFirstFailedSync {
        fn on_event(&self, event: &partlog::LogEvent<'_>) {
            let partlog::LogEvent::Fsync { result: Err(_), .. } = event else {
                return;
            };
            let mut state = self.state.lock();
            if std::mem::replace(&mut state.0, true) {
                return;
            }
            state.1 = true;
            self.changed.notify_all();
            while !state.2 {
                if self.changed.wait_for(&mut state, PATIENCE).timed_out() {
                    break;
                }
            }
        }
    }

    /// A retention pass syncs a sealed segment the flusher has not synced yet, and that sync
    /// fails. Before the log knows, a caller's sync runs and syncs the same segment: its fsync
    /// would succeed with nothing to write (the failed one's pages are marked clean), so it must
    /// fail too, and report none of the lost records durable. The flusher is held at the active
    /// indexes' sync of a recovery-point checkpoint meanwhile, so it syncs nothing itself.
    #[test]
    fn a_sync_racing_a_failed_retention_sync_of_the_same_segment_vouches_for_nothing_lost() {
        let dir = Path::new("/race/retention-sync-0");
        let sim = SimStorage::new(29);
        let gate = Arc::new(Gate::default());
        let hold = Arc::new(HoldFirstFailedSync::default());
        let storage: Arc<dyn Storage> = Arc::new(GatedStorage::over_fenced(&sim, &gate));
        let config = |storage: Arc<dyn Storage>| {
            LogConfig::builder_for_tests()
                .segment_bytes(1024)
                .flush_policy(FlushPolicy::OsDecides)
                .recovery_point_bytes(1)
                .storage(storage)
                .clock(Arc::new(ManualClock::new(T0)))
                .observer(Arc::clone(&hold) as Arc<dyn partlog::Observer>)
                .build()
                .unwrap()
        };
        let value = |name: &str| format!("{name}-{}", "v".repeat(400));
        let log = Arc::new(Log::open(dir, config(Arc::clone(&storage))).unwrap());
        // Two records fill segment 0; the third rolls. The flusher syncs the roll, then the
        // active indexes for a recovery point, where it is held.
        gate.arm("00000000000000000002.index");
        for name in ["a", "b", "c"] {
            log.append(&[record(name, &value(name))]).unwrap();
        }
        gate.wait_until_holding();
        // Segment 2 fills and rolls unsynced: only the flusher would sync it.
        for name in ["d", "e"] {
            log.append(&[record(name, &value(name))]).unwrap();
        }
        assert_eq!(list_segment_bases(&*storage, dir).unwrap(), vec![0, 2, 4]);
        let end = log.log_end_offset();
        sim.inject(
            FaultRule::fail(FaultOp::Sync, 1).on_paths_ending_with("00000000000000000002.log"),
        );
        // Retention deletes segment 0, and before the directory sync makes that durable, syncs
        // segment 2, which fails.
        let retention = {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                log.delete_records_before(2)
                    .and_then(|_| log.enforce_retention().map(|_| ()))
            })
        };
        hold.wait_until_held();
        let synced = log.sync();
        hold.release();
        let retention = retention.join().unwrap();
        gate.open();
        wait_until("the log is poisoned", || log.stats().poisoned);
        let durable = log.durable_offset();
        sim.crash_with(&CrashConfig::lose_unsynced());
        drop(log);

        let log = Log::open(dir, config(Arc::new(sim.clone()))).unwrap();
        assert!(
            log.log_end_offset() >= durable,
            "the log said {durable} was durable ({synced:?} for a sync to {end}), and {} was \
             recovered",
            log.log_end_offset()
        );
        assert!(retention.is_err(), "{retention:?}");
        assert!(synced.is_err(), "{synced:?}");
        let recovered: Vec<i64> = log
            .records(log.log_start_offset(), ReadBound::LogEnd)
            .map(|record| record.unwrap().offset)
            .collect();
        assert_eq!(
            recovered,
            (log.log_start_offset()..log.log_end_offset()).collect::<Vec<_>>()
        );
    }
}

/// `SendHandle` docs: under `acks=all`, a truncation that removed the record fails its handle.
/// The handle is polled for the first time only after the truncation, a refill of the same
/// offset and a sync of the refill, so the truncation count must come from the append.
#[test]
fn an_acks_all_handle_never_acknowledges_a_record_that_a_truncation_removed() {
    let sim = SimStorage::new(21);
    let config = LogConfig::builder_for_tests()
        .storage(Arc::new(sim.clone()))
        .clock(Arc::new(ManualClock::new(T0)))
        .build()
        .unwrap();
    let log = Arc::new(Log::open("/acks/p-0", config).unwrap());
    let producer = Producer::new(
        Arc::clone(&log),
        ProducerConfig::builder().acks(Acks::All).build().unwrap(),
    )
    .unwrap();
    let handle = producer.send(&record("k", "removed")).unwrap();
    producer.flush().unwrap();
    assert_eq!(log.log_end_offset(), 1);
    assert_eq!(log.truncate_to(0).unwrap(), 0);
    let other = log.append(&[record("k", "other")]).unwrap();
    assert_eq!(other.first_offset, 0);
    log.wait_durable(0).unwrap();
    match handle.wait() {
        Err(Error::Truncated { .. }) => {}
        other => panic!("offset 0 now holds another record, yet the handle said {other:?}"),
    }
    producer.close().unwrap();
}

/// The highest base offset a segment may have: its relative offsets reach `i64::MAX`.
const TOP_SEGMENT_BASE: i64 = i64::MAX - i32::MAX as i64;

/// Writes `dir` with one segment, at [`TOP_SEGMENT_BASE`], holding one valid batch of ten
/// records whose last offset is `i64::MAX`, and, when `recovery_point` is set, a checkpoint
/// with that recovery point. Returns the segment's `.log` path and its length.
fn write_batch_ending_at_i64_max(
    sim: &SimStorage,
    dir: &Path,
    recovery_point: Option<i64>,
) -> (PathBuf, u64) {
    let mut builder = BatchBuilder::new(Compression::None);
    for i in 0..10 {
        builder.push(&record("k", &format!("v{i}")));
    }
    let mut batch = builder.build().unwrap();
    // The base offset is outside the CRC: the batch stays valid.
    partlog::unstable::format::set_base_offset(&mut batch, i64::MAX - 9).unwrap();
    let log_path: PathBuf = dir.join(format!("{TOP_SEGMENT_BASE:020}.log"));
    sim.create_dir_all(dir).unwrap();
    let file = sim.open(&log_path, OpenMode::CreateNew).unwrap();
    file.write_all_at(&batch, 0).unwrap();
    file.sync_data().unwrap();
    drop(file);
    if let Some(recovery_point) = recovery_point {
        let storage: Arc<dyn Storage> = Arc::new(sim.clone());
        let (mut checkpoint, _) = CheckpointFile::open(&storage, dir).unwrap();
        checkpoint
            .write(recovery_point, TOP_SEGMENT_BASE, None, true)
            .unwrap();
    }
    sim.sync_dir(dir).unwrap();
    (log_path, batch.len() as u64)
}

fn fail_mode_config(sim: &SimStorage) -> LogConfig {
    LogConfig::builder_for_tests()
        .recovery_mode(RecoveryMode::Fail)
        .storage(Arc::new(sim.clone()))
        .clock(Arc::new(ManualClock::new(T0)))
        .build()
        .unwrap()
}

/// A valid batch whose last offset is `i64::MAX` (only a damaged or hostile file holds one)
/// once made the walker's next offset wrap to `i64::MIN`: recovery took the log for one that
/// ends below its start and deleted every segment file, noting no corruption. Below the
/// recovery point the batch is corruption: verify says so and the open fails.
#[test]
fn a_batch_ending_at_i64_max_below_the_recovery_point_is_corruption() {
    let sim = SimStorage::new(31);
    let dir = Path::new("/max/p-0");
    let (log_path, len) = write_batch_ending_at_i64_max(&sim, dir, Some(i64::MAX));
    let config = fail_mode_config(&sim);
    let report = partlog::verify_dir(dir, &config).unwrap();
    assert!(
        report
            .findings_of(partlog::Severity::Corruption)
            .next()
            .is_some(),
        "verify must call the batch corrupt: {report:?}"
    );
    match Log::open(dir, config) {
        Err(Error::Corrupt { .. }) => {}
        Ok(log) => panic!(
            "the open must fail, not recover to {}: {:?}",
            log.log_end_offset(),
            log.recovery_report()
        ),
        Err(other) => panic!("expected corruption, got {other}"),
    }
    assert_eq!(
        sim.metadata(&log_path).unwrap().len,
        len,
        "the segment was touched"
    );
}

/// The same batch above the recovery point (no checkpoint) is no torn tail either: its CRC is
/// right, and no torn write leaves a whole batch (issue 29, item 12). The open refuses it,
/// naming the file and the byte, and leaves its records in place; verify calls it corrupt.
#[test]
fn a_batch_ending_at_i64_max_above_the_recovery_point_is_refused_and_kept() {
    let sim = SimStorage::new(32);
    let dir = Path::new("/max/p-1");
    let (log_path, len) = write_batch_ending_at_i64_max(&sim, dir, None);
    let config = fail_mode_config(&sim);
    let report = partlog::verify_dir(dir, &config).unwrap();
    assert!(report.is_corrupt(), "{report:?}");
    match Log::open(dir, config) {
        Err(Error::DamagedWithoutCheckpoint { file, position, .. }) => {
            assert_eq!((file, position), (log_path.clone(), 0))
        }
        Ok(log) => panic!(
            "the open must fail, not recover to {}: {:?}",
            log.log_end_offset(),
            log.recovery_report()
        ),
        Err(other) => panic!("expected a refusal, got {other}"),
    }
    assert_eq!(sim.metadata(&log_path).unwrap().len, len);
}

/// Kafka's `LogSegmentTest.testTruncateFull`: a segment emptied by a truncation is as young as
/// a new one. Its first batch has no timestamp, so it rolls on its creation time.
#[test]
fn emptying_a_segment_by_truncation_restarts_its_roll_clock() {
    let sim = SimStorage::new(41);
    let clock = Arc::new(ManualClock::new(T0));
    let config = LogConfig::builder_for_tests()
        .segment_ms(1000)
        .storage(Arc::new(sim.clone()))
        .clock(Arc::clone(&clock) as Arc<dyn partlog::unstable::Clock>)
        .build()
        .unwrap();
    let log = Log::open("/roll/p-0", config).unwrap();
    let untimed = NewRecord::new(-1, Some(b"k"), Some(b"v"));
    log.append(std::slice::from_ref(&untimed)).unwrap();
    clock.advance(1500);
    assert_eq!(log.truncate_to(0).unwrap(), 0);
    log.append(std::slice::from_ref(&untimed)).unwrap();
    log.append(std::slice::from_ref(&untimed)).unwrap();
    assert_eq!(
        log.stats().rolls,
        0,
        "the emptied segment rolled on its old age"
    );
    assert_eq!(log.log_end_offset(), 2);
}

/// One path whose failed fsync must poison the log.
struct FsyncPath {
    name: &'static str,
    /// The fault that fails the path's fsync.
    fault: FaultRule,
    /// Runs the operation whose fsync fails; whether it answered as it must (the error of the
    /// failed fsync, or success where only the fsync's own work failed).
    run: fn(&Log) -> bool,
    /// The fsync fails in the flusher thread: the test waits for the poison.
    in_background: bool,
}

fn fsync_paths() -> Vec<FsyncPath> {
    vec![
        FsyncPath {
            name: "delete_records_before's checkpoint",
            fault: FaultRule::fail(FaultOp::Sync, 1).on_paths_ending_with("partlog.checkpoint"),
            in_background: false,
            run: |log| matches!(log.delete_records_before(3), Err(Error::Io { .. })),
        },
        FsyncPath {
            name: "retention's checkpoint",
            fault: FaultRule::fail(FaultOp::Sync, 1).on_paths_ending_with("partlog.checkpoint"),
            in_background: false,
            run: |log| matches!(log.enforce_retention(), Err(Error::Io { .. })),
        },
        FsyncPath {
            name: "retention's directory sync",
            fault: FaultRule::fail(FaultOp::SyncDir, 1),
            in_background: false,
            run: |log| matches!(log.enforce_retention(), Err(Error::Io { .. })),
        },
        FsyncPath {
            name: "compaction's recovery-point checkpoint",
            fault: FaultRule::fail(FaultOp::Sync, 1).on_paths_ending_with("partlog.checkpoint"),
            in_background: false,
            run: |log| matches!(log.compact(), Err(Error::Io { .. })),
        },
        FsyncPath {
            name: "compaction's sync of the segment it swapped in",
            fault: FaultRule::fail(FaultOp::Sync, 1).on_paths_ending_with(".log"),
            in_background: false,
            run: |log| matches!(log.compact(), Err(Error::Io { .. })),
        },
        FsyncPath {
            name: "compaction's cleaner checkpoint",
            fault: FaultRule::fail(FaultOp::Sync, 1)
                .on_paths_ending_with("partlog.cleaner-checkpoint.tmp"),
            in_background: false,
            // The pass itself succeeds: the checkpoint only saves the next open some work.
            run: |log| log.compact().is_ok(),
        },
        FsyncPath {
            name: "the flusher's sync of the active offset index",
            fault: FaultRule::fail(FaultOp::Sync, 1)
                .on_paths_ending_with(".index")
                .until_cancelled(),
            // The flusher writes a recovery point once the durable offset moves.
            run: |log| log.wait_durable(log.log_end_offset() - 1).is_ok(),
            in_background: true,
        },
    ]
}

#[test]
fn every_failed_fsync_poisons_the_log() {
    let mut not_poisoned = Vec::new();
    let mut answered_wrong = Vec::new();
    for (seed, path) in fsync_paths().into_iter().enumerate() {
        let sim = SimStorage::new(50 + seed as u64);
        let config = LogConfig::builder_for_tests()
            .segment_bytes(1024)
            .cleanup_policy(CleanupPolicy::COMPACT_DELETE)
            .retention_bytes(1024)
            .flush_policy(FlushPolicy::OsDecides)
            .recovery_point_bytes(1)
            .recovery_point_ms(1)
            .storage(Arc::new(sim.clone()))
            .clock(Arc::new(ManualClock::new(T0)))
            .build()
            .unwrap();
        let log = Log::open(format!("/fsync/{seed}"), config).unwrap();
        let segments = if path.name.contains("flusher") { 1 } else { 4 };
        let mut i = 0;
        while log.stats().segments < segments || i < 5 {
            log.append(&[record(&format!("k{}", i % 3), &format!("v{i}"))])
                .unwrap();
            i += 1;
        }
        if segments > 1 {
            // Everything synced (the directory too), so that the only fsync left is the one
            // the path makes.
            log.wait_durable(log.log_end_offset() - 1).unwrap();
        }
        sim.inject(path.fault.clone());
        if !(path.run)(&log) {
            answered_wrong.push(path.name);
        }
        // A fsync the flusher makes fails in the background: its poison comes a little later.
        let poisoned = !path.in_background || eventually(|| log.stats().poisoned);
        if !poisoned || !matches!(log.append(&[record("k", "after")]), Err(Error::Poisoned)) {
            not_poisoned.push(path.name);
        }
        sim.clear_faults();
    }
    assert!(
        not_poisoned.is_empty() && answered_wrong.is_empty(),
        "failed fsyncs that left the log writable: {not_poisoned:?}; operations that answered \
         wrongly: {answered_wrong:?}"
    );
}

/// A poisoned log vouches for nothing above its durable offset (the failed sync may have
/// dropped those pages): `read`, `offset_for_timestamp`, `wait_for_data` and `data_available`
/// all stop there.
#[test]
fn a_poisoned_log_answers_nothing_above_its_durable_offset() {
    let sim = SimStorage::new(61);
    let config = LogConfig::builder_for_tests()
        .flush_policy(FlushPolicy::OsDecides)
        .storage(Arc::new(sim.clone()))
        .clock(Arc::new(ManualClock::new(T0)))
        .build()
        .unwrap();
    let log = Log::open("/poisoned/p-0", config).unwrap();
    for i in 0..5 {
        log.append(&[NewRecord::new(T0 + i, Some(b"k"), Some(b"synced"))])
            .unwrap();
    }
    log.wait_durable(4).unwrap();
    let late = T0 + 100;
    log.append(&[NewRecord::new(late, Some(b"k"), Some(b"unsynced"))])
        .unwrap();
    // A reader waiting for the next record when the poison comes learns it will never come.
    let log = Arc::new(log);
    let reader = {
        let log = Arc::clone(&log);
        std::thread::spawn(move || log.wait_for_data(6, PATIENCE))
    };
    sim.inject(FaultRule::fail(FaultOp::Sync, 1));
    assert!(log.wait_durable(5).is_err());
    assert!(matches!(reader.join().unwrap(), Err(Error::Poisoned)));
    assert!(log.stats().poisoned);
    assert_eq!(log.durable_offset(), 5);

    // Below the durable offset, everything answers as before.
    assert!(log.wait_for_data(4, Duration::ZERO).unwrap());
    assert_eq!(log.offset_for_timestamp(T0 + 4).unwrap(), Some((4, T0 + 4)));
    // Above it, nothing.
    assert_eq!(log.offset_for_timestamp(late).unwrap(), None);
    assert!(matches!(
        log.wait_for_data(5, Duration::ZERO),
        Err(Error::Poisoned)
    ));
    assert!(log.read(5, 1 << 20, ReadBound::LogEnd).unwrap().is_empty());
    let mut available = pin!(log.data_available(5));
    match available
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(Err(Error::Poisoned)) => {}
        other => panic!("data_available(5) on a poisoned log: {other:?}"),
    }
}
