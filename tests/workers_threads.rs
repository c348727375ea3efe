//! Threads of many logs on one `Workers` pool (issue 31, section 2): 1,000 logs open with one
//! pool of 4 threads add at most 8 threads to the process, and logs without a pool keep their
//! own threads as before. One test in this binary, so that no other test's threads are counted.

use partlog::{Log, LogConfig, Workers};

/// The threads of this process, from `/proc/self/task` (partlog is Linux only).
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

/// The descriptors this process has open.
fn descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn workers_a_thousand_logs_on_four_threads_add_at_most_eight_threads() {
    let root = tempfile::tempdir().unwrap();

    // Without a pool: a flusher and a maintenance thread each, as before.
    let before = threads();
    let own: Vec<Log> = (0..10)
        .map(|i| {
            let config = LogConfig::builder_for_tests()
                .retention_check_interval_ms(60_000)
                .build()
                .unwrap();
            Log::open(root.path().join(format!("own-{i}")), config).unwrap()
        })
        .collect();
    assert_eq!(
        threads(),
        before + 20,
        "a log without Workers has its threads"
    );
    for log in &own {
        log.close().unwrap();
    }
    drop(own);
    assert_eq!(threads(), before, "close joins a log's own threads");

    let (threads_before, descriptors_before) = (threads(), descriptors());
    let workers = Workers::new(4).unwrap();
    let logs: Vec<Log> = (0..1000)
        .map(|i| {
            let config = LogConfig::builder_for_tests()
                .retention_check_interval_ms(60_000)
                .cleanup_policy(partlog::CleanupPolicy::COMPACT_DELETE)
                .workers(workers.clone())
                .build()
                .unwrap();
            Log::open(root.path().join(format!("pooled-{i}")), config).unwrap()
        })
        .collect();
    for (i, log) in logs.iter().enumerate() {
        log.append(&[partlog::NewRecord::new(
            1_700_000_000_000,
            Some(b"k"),
            Some(b"x"),
        )])
        .unwrap();
        if i % 10 == 0 {
            block_on(log.durable(0)).unwrap();
        }
    }
    let added = threads() - threads_before;
    println!(
        "1,000 logs on Workers(4): {added} threads added, {} descriptors held",
        descriptors() - descriptors_before
    );
    assert!(
        added <= 8,
        "{added} threads added by 1,000 logs on Workers(4)"
    );
    for log in &logs {
        log.close().unwrap();
    }
}

/// Polls `future` to completion on this thread, parking between polls.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    use std::sync::Arc;
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
