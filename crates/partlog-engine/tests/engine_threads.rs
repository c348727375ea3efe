//! The engine's threads do not grow with its partitions (issue 33, "Where it lives"): 1,000
//! partitions of 10 topics, all open and written durably, on an engine whose pool has 4
//! threads, add at most the pool's threads plus a fixed few to the process. One test in this
//! binary, so that no other test's threads are counted.

use std::sync::Arc;

use partlog::{LogConfig, NewRecord};
use partlog_engine::engine::{Engine, EngineConfig, TopicConfig};

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
    let added = threads() - before;
    println!("an engine of 1,000 partitions on Workers(4): {added} threads added");
    assert!(
        added <= 4 + 4,
        "{added} threads for 1,000 partitions and a pool of 4"
    );
    engine.close().unwrap();
}
