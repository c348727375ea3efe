//! Threads of many batching writers on one `Workers` pool: 1,000 producers on 1,000 logs that
//! share a pool of 4 threads add no thread beyond the pool's, and a producer whose log has no
//! pool keeps its own sender thread. One test in this binary, so that no other test's threads
//! are counted. `cargo test --all-features --test producer_threads`.

use std::sync::Arc;

use partlog::{Acks, Log, LogConfig, NewRecord, Producer, ProducerConfig, Workers};

/// The threads of this process, from `/proc/self/task` (partlog is Linux only).
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

fn config() -> ProducerConfig {
    ProducerConfig::builder().acks(Acks::All).build().unwrap()
}

#[test]
fn producer_a_thousand_pooled_producers_add_no_thread_beyond_the_pool() {
    let root = tempfile::tempdir().unwrap();

    // Without a pool: the log's flusher and the producer's sender, each a thread.
    let before = threads();
    let own: Vec<Producer> = (0..10)
        .map(|i| {
            let log = Log::open(root.path().join(format!("own-{i}")), LogConfig::default());
            Producer::new(Arc::new(log.unwrap()), config()).unwrap()
        })
        .collect();
    assert_eq!(
        threads(),
        before + 20,
        "a producer without Workers has its thread"
    );
    for producer in &own {
        producer.close().unwrap();
        producer.log().close().unwrap();
    }
    drop(own);
    assert_eq!(threads(), before, "close joins the sender thread");

    let workers = Workers::new(4).unwrap();
    let producers: Vec<Producer> = (0..1000)
        .map(|i| {
            let config = LogConfig::builder()
                .workers(workers.clone())
                .build()
                .unwrap();
            let log = Log::open(root.path().join(format!("pooled-{i}")), config).unwrap();
            Producer::new(Arc::new(log), self::config()).unwrap()
        })
        .collect();
    let handles: Vec<_> = producers
        .iter()
        .map(|producer| {
            producer
                .send(&NewRecord::new(1_700_000_000_000, None, Some(b"x")))
                .unwrap()
        })
        .collect();
    for handle in handles {
        assert_eq!(handle.wait().unwrap(), 0);
    }
    let added = threads() - before;
    println!("1,000 producers on Workers(4): {added} threads added");
    assert!(
        added <= workers.threads(),
        "{added} threads added by 1,000 pooled producers on Workers(4)"
    );
    for producer in &producers {
        producer.close().unwrap();
        producer.log().close().unwrap();
    }
}
