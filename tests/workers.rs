//! Shared background workers (issue 31, section 2): the pool's tasks, their deregistration
//! when a log closes, and logs doing their background work on a shared pool.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use partlog::unstable::{Next, OsStorage, Storage, Task};
use partlog::{Log, LogConfig, NewRecord, Workers};

const T0: i64 = 1_700_000_000_000;

/// Polls `future` to completion on this thread, parking between polls.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    use std::task::{Context, Poll, Wake, Waker};

    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut context = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
        std::thread::park();
    }
}

/// A task that counts its runs and holds each at `gate` until the test lets it end.
struct Counting {
    runs: AtomicUsize,
    ended: AtomicBool,
    gate: Option<Arc<Barrier>>,
}

impl Task for Counting {
    fn run(&self) -> Next {
        self.runs.fetch_add(1, Ordering::SeqCst);
        if let Some(gate) = &self.gate {
            gate.wait(); // the run has started
            gate.wait(); // the test lets it end
        }
        self.ended.store(true, Ordering::SeqCst);
        // Not again unless woken: a second run would wait at the gate for ever.
        Next::After(Duration::from_secs(3600))
    }
}

#[test]
fn workers_cancel_waits_for_the_run_under_way_and_the_task_never_runs_again() {
    let workers = Workers::new(2).unwrap();
    let gate = Arc::new(Barrier::new(2));
    let task = Arc::new(Counting {
        runs: AtomicUsize::new(0),
        ended: AtomicBool::new(false),
        gate: Some(Arc::clone(&gate)),
    });
    let handle = workers.register(Arc::clone(&task) as Arc<dyn Task>, Duration::ZERO);
    gate.wait(); // the first run is under way
    let canceller = {
        let handle = handle.clone();
        let task = Arc::clone(&task);
        std::thread::spawn(move || {
            handle.cancel();
            // The run held at the gate had ended before cancel returned.
            assert!(task.ended.load(Ordering::SeqCst), "cancel returned mid-run");
        })
    };
    gate.wait(); // let the run end
    canceller.join().unwrap();
    // The pool dropped its reference: the test holds the only one left.
    assert_eq!(Arc::strong_count(&task), 1, "the pool still holds the task");
    assert_eq!(task.runs.load(Ordering::SeqCst), 1);
    handle.wake();
    handle.cancel();
    assert_eq!(Arc::strong_count(&task), 1);
}

#[test]
fn workers_a_task_that_cancels_itself_does_not_wait_for_its_own_run() {
    struct SelfCancelling {
        handle: Mutex<Option<partlog::unstable::TaskHandle>>,
        done: Mutex<Option<std::sync::mpsc::Sender<()>>>,
    }
    impl Task for SelfCancelling {
        fn run(&self) -> Next {
            if let Some(handle) = self.handle.lock().unwrap().take() {
                handle.cancel();
                if let Some(done) = self.done.lock().unwrap().take() {
                    done.send(()).unwrap();
                }
            }
            Next::After(Duration::from_millis(1))
        }
    }
    let workers = Workers::new(1).unwrap();
    let (sender, receiver) = std::sync::mpsc::channel();
    let task = Arc::new(SelfCancelling {
        handle: Mutex::new(None),
        done: Mutex::new(Some(sender)),
    });
    let handle = workers.register(
        Arc::clone(&task) as Arc<dyn Task>,
        Duration::from_secs(3600),
    );
    *task.handle.lock().unwrap() = Some(handle.clone());
    handle.wake();
    receiver.recv().unwrap();
    // The cancel done inside the run took effect once the run ended.
    handle.cancel();
    assert_eq!(Arc::strong_count(&task), 1);
}

#[test]
fn workers_zero_threads_is_a_config_error() {
    assert!(matches!(
        Workers::new(0),
        Err(partlog::Error::InvalidConfig { .. })
    ));
}

fn pooled_config(workers: &Workers, storage: Arc<dyn Storage>) -> LogConfig {
    LogConfig::builder_for_tests()
        .segment_bytes(1024)
        .retention_check_interval_ms(1)
        .storage(storage)
        .workers(workers.clone())
        .build()
        .unwrap()
}

fn append_one(log: &Log, i: i64) -> i64 {
    let value = format!("value {i}");
    log.append(&[NewRecord::new(T0 + i, Some(b"key"), Some(value.as_bytes()))])
        .unwrap()
        .last_offset
}

#[test]
fn workers_closing_a_log_deregisters_its_tasks() {
    let root = tempfile::tempdir().unwrap();
    let workers = Workers::new(2).unwrap();
    let storage: Arc<dyn Storage> = Arc::new(OsStorage::new());
    let baseline = Arc::strong_count(&storage);
    for round in 0..20 {
        let log = Log::open(
            root.path().join(format!("log-{}", round % 3)),
            pooled_config(&workers, Arc::clone(&storage)),
        )
        .unwrap();
        // The pool's flusher leads the sync a future asks for, while retention passes run.
        let last = append_one(&log, round);
        block_on(log.durable(last)).unwrap();
        assert!(log.durable_offset() > last);
        log.close().unwrap();
        drop(log);
        // Nothing of the log is left in the pool: the flusher and maintenance tasks, which
        // hold the log's state and its config, are gone, and none runs on the closed log.
        assert_eq!(
            Arc::strong_count(&storage),
            baseline,
            "the pool still holds the closed log (round {round})"
        );
    }
}

#[test]
fn workers_a_dropped_log_deregisters_its_tasks() {
    let root = tempfile::tempdir().unwrap();
    let workers = Workers::new(1).unwrap();
    let storage: Arc<dyn Storage> = Arc::new(OsStorage::new());
    let baseline = Arc::strong_count(&storage);
    let log = Log::open(root.path(), pooled_config(&workers, Arc::clone(&storage))).unwrap();
    append_one(&log, 0);
    drop(log);
    assert_eq!(Arc::strong_count(&storage), baseline);
    let reopened = Log::open(root.path(), pooled_config(&workers, Arc::clone(&storage))).unwrap();
    assert_eq!(reopened.log_end_offset(), 1);
    assert!(reopened.recovery_report().clean_shutdown);
}

#[test]
fn workers_pooled_logs_sync_roll_and_enforce_retention() {
    let root = tempfile::tempdir().unwrap();
    let workers = Workers::new(3).unwrap();
    let logs: Vec<Log> = (0..8)
        .map(|i| {
            let config = LogConfig::builder_for_tests()
                .segment_bytes(1024)
                .retention_bytes(2048)
                .retention_check_interval_ms(1)
                .workers(workers.clone())
                .build()
                .unwrap();
            Log::open(root.path().join(format!("log-{i}")), config).unwrap()
        })
        .collect();
    for (n, log) in logs.iter().enumerate() {
        let mut last = 0;
        for i in 0..200 {
            last = append_one(log, i + n as i64);
        }
        block_on(log.durable(last)).unwrap();
    }
    // Retention on the pool deletes the oldest segments of each log beyond 2 KiB.
    for log in &logs {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while log.log_start_offset() == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "retention never ran on {}",
                log.dir().display()
            );
            std::thread::yield_now();
        }
        // Retention may still be running: the end is what was appended, all of it durable.
        assert_eq!(log.durable_offset(), log.log_end_offset());
    }
    for log in &logs {
        log.close().unwrap();
    }
}

/// The real file system, with a gate that holds every compaction pass where it creates its
/// `.cleaned` file, until the test opens the gate.
#[derive(Debug, Default)]
struct GatedCompaction {
    inner: OsStorage,
    /// How many passes are held, and whether the gate is open.
    state: Mutex<(usize, bool)>,
    changed: std::sync::Condvar,
}

impl GatedCompaction {
    fn held(&self) -> usize {
        self.state.lock().unwrap().0
    }

    fn open_gate(&self) {
        self.state.lock().unwrap().1 = true;
        self.changed.notify_all();
    }
}

impl Storage for GatedCompaction {
    fn open(
        &self,
        path: &std::path::Path,
        mode: partlog::unstable::OpenMode,
    ) -> partlog::Result<Arc<dyn partlog::unstable::StorageFile>> {
        if path.to_string_lossy().ends_with(".cleaned") {
            let mut state = self.state.lock().unwrap();
            state.0 += 1;
            while !state.1 {
                state = self.changed.wait(state).unwrap();
            }
            state.0 -= 1;
        }
        self.inner.open(path, mode)
    }
    fn create_dir_all(&self, path: &std::path::Path) -> partlog::Result<()> {
        self.inner.create_dir_all(path)
    }
    fn sync_dir(&self, dir: &std::path::Path) -> partlog::Result<()> {
        self.inner.sync_dir(dir)
    }
    fn rename(&self, from: &std::path::Path, to: &std::path::Path) -> partlog::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &std::path::Path) -> partlog::Result<()> {
        self.inner.remove(path)
    }
    fn list(&self, dir: &std::path::Path) -> partlog::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn metadata(&self, path: &std::path::Path) -> partlog::Result<partlog::unstable::Metadata> {
        self.inner.metadata(path)
    }
    fn lock(
        &self,
        path: &std::path::Path,
        mode: partlog::unstable::LockMode,
    ) -> partlog::Result<partlog::unstable::FileLock> {
        self.inner.lock(path, mode)
    }
}

/// Opens the gate when dropped.
struct OpenOnDrop(Arc<GatedCompaction>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open_gate();
    }
}

/// Waits (without asserting anything about time) until `done` holds; fails after a minute.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "gave up waiting until {what}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Polls `future` until it completes or a minute passes (`None`): a sync that never comes
/// fails the test instead of hanging it.
fn block_on_within<F: std::future::Future>(future: F) -> Option<F::Output> {
    use std::task::{Context, Poll, Wake, Waker};

    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut context = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    while std::time::Instant::now() < deadline {
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return Some(output);
        }
        std::thread::park_timeout(Duration::from_millis(10));
    }
    None
}

/// Fairness: compaction passes of other logs, held mid-pass by the storage for as long as the
/// test likes, take at most half the pool, so that another log's durable waits (the pool's
/// flusher leads their syncs) and its retention passes complete meanwhile. Four held passes on
/// four threads would otherwise take every thread.
#[test]
fn workers_held_compaction_passes_delay_no_other_logs_syncs_or_retention() {
    let root = tempfile::tempdir().unwrap();
    let workers = Workers::new(4).unwrap();
    let gated = Arc::new(GatedCompaction::default());
    let compacted: Vec<Log> = (0..4)
        .map(|i| {
            let config = LogConfig::builder_for_tests()
                .segment_bytes(1024)
                .cleanup_policy(partlog::CleanupPolicy::COMPACT)
                .retention_check_interval_ms(1)
                .storage(Arc::clone(&gated) as Arc<dyn Storage>)
                .workers(workers.clone())
                .build()
                .unwrap();
            let log = Log::open(root.path().join(format!("compacted-{i}")), config).unwrap();
            for i in 0..100 {
                let key = format!("key-{}", i % 3);
                log.append(&[NewRecord::new(T0 + i, Some(key.as_bytes()), Some(&[7; 64]))])
                    .unwrap();
            }
            log
        })
        .collect();
    // A failing assertion below must not leave passes held: the logs' drops wait for them.
    let _gate_opens_on_exit = OpenOnDrop(Arc::clone(&gated));
    // Every pass the long lane admits is held at the gate.
    wait_until("two compaction passes are held", || gated.held() >= 2);

    let other = Log::open(
        root.path().join("other"),
        LogConfig::builder_for_tests()
            .segment_bytes(1024)
            .retention_bytes(2048)
            .retention_check_interval_ms(1)
            .workers(workers.clone())
            .build()
            .unwrap(),
    )
    .unwrap();
    for i in 0..100 {
        let last = append_one(&other, i);
        if i % 10 == 0 {
            let synced = block_on_within(other.durable(last));
            assert!(
                matches!(synced, Some(Ok(()))),
                "a durable wait stalled behind the held compaction passes"
            );
        }
    }
    wait_until("retention deletes the other log's oldest segments", || {
        other.log_start_offset() > 0
    });
    assert!(other.durable_offset() > 0);
    assert_eq!(gated.held(), 2, "the long lane ran more than half the pool");

    gated.open_gate();
    for log in &compacted {
        wait_until("every held pass completes", || {
            log.stats().compaction_passes > 0
        });
    }
    for log in compacted.iter().chain([&other]) {
        log.close().unwrap();
    }
}
