//! The engine's threads do not grow with its partitions (issue 33, "Where it lives"): 1,000
//! partitions of 10 topics, all open and written durably, then written again through a
//! `TopicProducer` (one batching writer per partition, each its sender a pool task), on an
//! engine whose pool has 4 threads, add at most the pool's threads plus a fixed few to the
//! process. One test in this binary, so that no other test's threads are counted.

use std::sync::Arc;

use partlog::{LogConfig, NewRecord};
use partlog_engine::engine::{Engine, EngineConfig, TopicConfig};
use partlog_engine::producer::TopicProducer;
use partlog_engine::producer::config::TopicProducerConfig;

/// The threads of this process, from `/proc/self/task` (partlog is Linux only).
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

#[test]
fn engine_a_thousand_partitions_run_on_the_pool_threads_plus_a_fixed_few() {
    // On tmpfs when there is one: 1,000 directories' fsyncs say nothing about threads.
    let root = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let before = threads();
    let mut config = EngineConfig::default();
    config.log_config =
        Arc::new(|| LogConfig::builder_for_tests().retention_check_interval_ms(60_000));
    config.worker_threads = 4;
    let engine = Engine::open(root.path(), config).unwrap();
    for t in 0..10 {
        let topic = engine
            .create_topic(&format!("topic{t}"), 100, TopicConfig::new())
            .unwrap();
        for p in 0..100 {
            let log = topic.partition(p).unwrap();
            let appended = log
                .append(&[NewRecord::new(1_700_000_000_000, Some(b"k"), Some(b"v"))])
                .unwrap();
            if p % 10 == 0 {
                log.wait_durable(appended.last_offset).unwrap();
            }
        }
    }
    assert_eq!(engine.open_partition_count(), 1000);
    // A producer on every partition: explicit partitions, so each of the 1,000 gets its own.
    let producer = TopicProducer::new(&engine, TopicProducerConfig::default()).unwrap();
    let handles: Vec<_> = (0..10)
        .flat_map(|t| (0..100).map(move |p: i32| (t, p)))
        .map(|(t, p)| {
            let record = NewRecord::new(1_700_000_000_000, Some(b"k"), Some(b"v"));
            producer
                .send_to(&format!("topic{t}"), Some(p), &record)
                .unwrap()
        })
        .collect();
    for handle in handles {
        assert_eq!(handle.wait().unwrap().offset, 1);
    }
    let added = threads() - before;
    println!("an engine of 1,000 partitions on Workers(4): {added} threads added");
    assert!(
        added <= 4 + 4,
        "{added} threads for 1,000 partitions and a pool of 4"
    );
    producer.close().unwrap();
    engine.close().unwrap();
}
