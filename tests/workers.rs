//! Shared background workers (issue 31, section 2): the pool's tasks, their deregistration
//! when a log closes, and logs doing their background work on a shared pool.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use partlog::unstable::{Next, OsStorage, Storage, Task};
use partlog::{Log, LogConfig, NewRecord, ReadBound, Workers};

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

/// A task that counts its runs and, while `hold` is set, blocks its run on `gate`.
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
        Next::After(Duration::ZERO)
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
        let records = log
            .read(log.log_start_offset(), 1 << 20, ReadBound::Durable)
            .unwrap();
        assert!(records.next_offset() > log.log_start_offset());
    }
    for log in &logs {
        log.close().unwrap();
    }
}
