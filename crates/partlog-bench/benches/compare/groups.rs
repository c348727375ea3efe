//! The consumer-group rows (issue 34's in-process performance list), each against its reference
//! in the same run (`cargo bench --bench compare -- groups`):
//!
//! - `groups_commit_sync`: `Consumer::commit_sync` of one offset (an `assign()`ed consumer on
//!   an `Engine`, through the `GroupRouter` to the group's `__consumer_offsets` partition,
//!   durable) against one durable `append` of one 60-byte keyed record to the same log: the
//!   two alternate one operation at a time, and a rep compares their median latencies.
//! - `groups_fetch_1000`: `OffsetStore::fetch` of 1,000 committed partitions against 1,000
//!   `HashMap` lookups of the same partitions, each answer cloned into a `Vec` as fetch returns
//!   them (in memory, no I/O).
//! - `groups_open_1m`: `OffsetStore::open` replaying 1,000,000 offset commit records (50,000
//!   live keys) against a `Log::records` pass over the same partition; both open the log.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use partlog::unstable::SystemClock;
use partlog::{Log, LogConfig, NewRecord, ReadBound};
use partlog_engine::engine::{Engine, EngineConfig};
use partlog_groups::assignor::TopicPartition;
use partlog_groups::consumer::{Consumer, ConsumerConfig};
use partlog_groups::offsets::log::offsets_log_config;
use partlog_groups::offsets::records::{OffsetCommitValue, OffsetsKey};
use partlog_groups::offsets::store::{
    FetchedOffset, MemberRef, OffsetStore, OffsetStoreConfig, PartitionOffset,
};
use partlog_groups::router::{GroupRouter, GroupRouterConfig};

use super::{Ctx, Measured, Outcome, Rep, TIMESTAMP, pairs, throughput_row};

/// Commits (and as many appends) a rep of the commit row times.
const COMMITS: usize = 200;

pub(super) fn row_commit_sync(ctx: &Ctx) -> Outcome {
    let dir = ctx.fresh_dir("groups-engine");
    let engine = Arc::new(Engine::open(&dir, EngineConfig::default()).expect("open the engine"));
    let router = GroupRouter::open(&engine, GroupRouterConfig::default()).expect("router");
    let mut consumer =
        Consumer::new(&router, ConsumerConfig::with_group("bench")).expect("consumer");
    let partition = TopicPartition::new("orders", 0);
    consumer
        .assign(std::slice::from_ref(&partition))
        .expect("assign");
    // The group's shard (and its log) open before the first rep.
    consumer
        .commit_sync(Some(&[(partition.clone(), 0)]))
        .expect("commit");
    let log = engine
        .consumer_offsets_log(router.partition_for("bench"))
        .expect("the group's __consumer_offsets partition");
    // 60 bytes of key and value: about what one offset commit record holds.
    let key = [b'k'; 20];
    let value = [b'v'; 40];
    let record = [NewRecord::new(TIMESTAMP, Some(&key), Some(&value))];
    // A B A B one operation at a time, each timed alone, the order swapped every other
    // operation: both sides meet the same disk (fsync times drift by more than the difference
    // measured), and a rep's ratio is that of the median latencies.
    let mut next = 1;
    // Per rep: (ratio, median commit latency, median append latency).
    let mut reps: Vec<(f64, f64, f64)> = Vec::new();
    for _ in 0..ctx.pairs {
        let mut commit_latencies = Vec::with_capacity(COMMITS);
        let mut append_latencies = Vec::with_capacity(COMMITS);
        for i in 0..COMMITS {
            for side in [i % 2, 1 - i % 2] {
                let started = Instant::now();
                if side == 0 {
                    consumer
                        .commit_sync(Some(&[(partition.clone(), next)]))
                        .expect("commit_sync");
                    next += 1;
                    commit_latencies.push(started.elapsed().as_secs_f64());
                } else {
                    let appended = log.append(&record).expect("append");
                    log.wait_durable(appended.last_offset).expect("durable");
                    append_latencies.push(started.elapsed().as_secs_f64());
                }
            }
        }
        let commit = super::median(&mut commit_latencies);
        let append = super::median(&mut append_latencies);
        reps.push((append / commit, commit, append));
    }
    drop(consumer);
    router.close();
    // The rep of the median ratio gives the row's figures, so that they agree with its ratio.
    reps.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (ratio, commit, append) = reps[reps.len() / 2];
    Outcome::Measured(Measured {
        workload: "Consumer::commit_sync of one offset, durable (median latency)".into(),
        unit: "commits/s",
        partlog: 1.0 / commit,
        reference: 1.0 / append,
        reference_name: "one durable append of one 60 B keyed record to the same log".into(),
        ratio,
        target: 1.0 / 1.1,
        target_text: "<= 1.1x its time",
        roll_and_close_timed: "no",
        extra: Vec::new(),
    })
}

/// Partitions of the fetch row.
const FETCH_PARTITIONS: i32 = 1_000;
/// Fetches (or rounds of lookups) a rep of the fetch row times.
const FETCHES: usize = 2_000;

pub(super) fn row_fetch_1000(ctx: &Ctx) -> Outcome {
    let dir = ctx.fresh_dir("groups-store");
    let log = Log::open(
        &dir,
        offsets_log_config(LogConfig::builder()).expect("config"),
    )
    .expect("open");
    let mut store =
        OffsetStore::open(log, OffsetStoreConfig::default(), Arc::new(SystemClock)).expect("store");
    let partitions: Vec<TopicPartition> = (0..FETCH_PARTITIONS)
        .map(|p| TopicPartition::new(format!("topic-{}", p % 10), p / 10))
        .collect();
    let offsets: Vec<PartitionOffset> = partitions
        .iter()
        .map(|tp| {
            PartitionOffset::new(
                tp.topic.clone(),
                tp.partition,
                1_000 + i64::from(tp.partition),
            )
        })
        .collect();
    store
        .commit("bench", &MemberRef::none(), None, &offsets)
        .expect("commit");
    let map: HashMap<TopicPartition, FetchedOffset> = store
        .fetch("bench", &partitions, false)
        .expect("fetch")
        .into_iter()
        .map(|(tp, fetched)| (tp, fetched.expect("an offset")))
        .collect();
    let fetches = || {
        let started = Instant::now();
        for _ in 0..FETCHES {
            let fetched = store.fetch("bench", &partitions, false).expect("fetch");
            assert_eq!(fetched.len(), partitions.len());
            std::hint::black_box(fetched);
        }
        Rep {
            seconds: started.elapsed().as_secs_f64(),
            records: (FETCHES * partitions.len()) as u64,
            user_bytes: 0,
        }
    };
    let lookups = || {
        let started = Instant::now();
        for _ in 0..FETCHES {
            let found: Vec<(TopicPartition, FetchedOffset)> = partitions
                .iter()
                .map(|tp| {
                    let fetched = map.get(tp).cloned().unwrap_or(FetchedOffset {
                        offset: -1,
                        leader_epoch: -1,
                        metadata: String::new(),
                    });
                    (tp.clone(), fetched)
                })
                .collect();
            assert_eq!(found.len(), partitions.len());
            std::hint::black_box(found);
        }
        Rep {
            seconds: started.elapsed().as_secs_f64(),
            records: (FETCHES * partitions.len()) as u64,
            user_bytes: 0,
        }
    };
    let (a, b, ratio, _) = pairs(ctx, fetches, lookups, Rep::records_per_second);
    Outcome::Measured(Measured {
        workload: "OffsetStore::fetch of 1,000 partitions (in memory)".into(),
        unit: "partitions/s",
        partlog: a.records_per_second(),
        reference: b.records_per_second(),
        reference_name: "1,000 HashMap lookups, answers cloned into a Vec".into(),
        ratio,
        target: 0.5,
        target_text: ">= 0.5",
        roll_and_close_timed: "no",
        extra: Vec::new(),
    })
}

/// Commit records of the open row, and the keys they cycle through.
const OPEN_RECORDS: usize = 1_000_000;
const OPEN_KEYS: usize = 50_000;
/// Records a batch: one consumer's commit of that many partitions.
const OPEN_BATCH: usize = 50;

pub(super) fn row_open_1m(ctx: &Ctx) -> Outcome {
    let dir = ctx.fresh_dir("groups-open");
    let config = || offsets_log_config(LogConfig::builder()).expect("config");
    // 500 groups of 100 partitions; every key committed 20 times.
    let keys: Vec<Vec<u8>> = (0..OPEN_KEYS)
        .map(|k| {
            OffsetsKey::OffsetCommit {
                group: format!("group-{}", k / 100),
                topic: "orders".into(),
                partition: (k % 100) as i32,
            }
            .encode()
            .expect("key")
        })
        .collect();
    {
        let log = Log::open(&dir, config()).expect("open");
        let mut batch = Vec::with_capacity(OPEN_BATCH);
        let mut values = Vec::with_capacity(OPEN_BATCH);
        for start in (0..OPEN_RECORDS).step_by(OPEN_BATCH) {
            values.clear();
            for i in start..start + OPEN_BATCH {
                let value = OffsetCommitValue::new(i as i64, "", TIMESTAMP + i as i64);
                values.push(value.encode().expect("value"));
            }
            batch.clear();
            for (i, value) in (start..start + OPEN_BATCH).zip(&values) {
                batch.push(NewRecord::new(
                    TIMESTAMP,
                    Some(&keys[i % OPEN_KEYS]),
                    Some(value),
                ));
            }
            log.append(&batch).expect("append");
        }
        log.close().expect("close");
    }
    let open = || {
        let started = Instant::now();
        let log = Log::open(&dir, config()).expect("open");
        let store = OffsetStore::open(log, OffsetStoreConfig::default(), Arc::new(SystemClock))
            .expect("store");
        let seconds = started.elapsed().as_secs_f64();
        assert_eq!(store.group_ids().len(), OPEN_KEYS / 100);
        store.log().close().expect("close");
        Rep {
            seconds,
            records: OPEN_RECORDS as u64,
            user_bytes: 0,
        }
    };
    let read = || {
        let started = Instant::now();
        let log = Log::open(&dir, config()).expect("open");
        let mut count = 0;
        for record in log.records(0, ReadBound::LogEnd) {
            std::hint::black_box(record.expect("record"));
            count += 1;
        }
        let seconds = started.elapsed().as_secs_f64();
        assert_eq!(count, OPEN_RECORDS);
        log.close().expect("close");
        Rep {
            seconds,
            records: OPEN_RECORDS as u64,
            user_bytes: 0,
        }
    };
    let (a, b, ratio, _) = pairs(ctx, open, read, Rep::records_per_second);
    throughput_row(
        "OffsetStore::open, 1,000,000 commit records (50,000 live keys)",
        "Log::open and a Log::records pass over the same partition",
        a,
        b,
        ratio,
        1.0 / 1.5,
        "<= 1.5x its time",
        "no",
    )
}
