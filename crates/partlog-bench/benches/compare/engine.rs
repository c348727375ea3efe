//! The engine rows (issue 33's performance list), each against partlog without the feature in
//! the same run (`cargo bench --bench compare -- engine`):
//!
//! - `engine_topic_producer`: `TopicProducer::send` of 100 B keyed records to 8 partitions
//!   (acks=1, until flush) against the same records sent straight to each partition's
//!   `Producer`, the partition computed beforehand: the cost of partitioning and routing.
//! - `engine_idempotent`: the same with `enable.idempotence=true` against `false`.
//! - `engine_transactional`: a transactional producer committing every 100 ms (8 partitions)
//!   against an idempotent one at acks=all (Kafka's default producer), records/s.
//! - `engine_commit_latency`: a transaction of 4 partitions × 100 records of 100 B, sent and
//!   committed durably, against one durable `append` of 400 such records to one log.
//! - `engine_coordinator_recovery`: `Engine::open` replaying 10,000 transactional ids against
//!   opening the same `__transaction_state` partitions and reading every record.
//! - `engine_1000_partitions` (acks=1, acks=all, and acks=all on a pool that gathers syncs):
//!   8 threads sending 100 B keyed records to 1,000 partitions of 10 topics against the same
//!   to 8 partitions, [`MANY_RECORDS`] a rep; the process's threads are reported beside it.
//!
//! Each engine is set up once per row, outside the timed region, and every partition written
//! once before the first rep, so reps time the steady state.

use std::sync::Arc;
use std::time::Instant;

use partlog::{Acks, Log, LogConfig, NewRecord, Producer, ProducerConfig, ReadBound};
use partlog_engine::engine::{Engine, EngineConfig, TopicConfig};
use partlog_engine::partitioner::partition_for_key;
use partlog_engine::producer::TopicProducer;
use partlog_engine::producer::config::TopicProducerConfig;
use partlog_engine::txn::log_records::{
    TRANSACTION_STATE_TOPIC, TransactionLogValue, encode_key, encode_value,
    transaction_state_partition,
};
use partlog_engine::txn::state::TransactionState;

use super::{Ctx, Measured, Outcome, Rep, SMALL_VALUE, TIMESTAMP, pairs, throughput_row};

/// Records of one rep of the throughput rows.
pub(super) const RECORDS: usize = 200_000;

/// Records of one rep of the 1,000-partition rows. Each rep ends with a flush, which at
/// acks=all waits for the last batch of every partition to be synced: 1,000 syncs (110 to 210
/// ms in a probe, benches/README.md), about half of a rep of 200,000 records (30 to 300 ms),
/// so that row measured one flush as much as the throughput. A million records a rep measure
/// the steady state.
const MANY_RECORDS: usize = 1_000_000;
/// Distinct keys the records cycle through.
pub(super) const KEYS: usize = 10_000;

fn records() -> Vec<NewRecord> {
    (0..KEYS)
        .map(|i| {
            NewRecord::new(
                TIMESTAMP,
                Some(format!("key-{i}").as_bytes()),
                Some(&SMALL_VALUE),
            )
        })
        .collect()
}

fn open_engine(ctx: &Ctx, name: &str) -> Engine {
    let dir = ctx.fresh_dir(name);
    let config = EngineConfig::default();
    Engine::open(dir, config).expect("open the engine")
}

/// The fewest partitions waiting for a sync that the gathered rows' pool syncs with one
/// `syncfs` (`Workers::gather_file_system_syncs`).
const GATHER_MIN_LOGS: usize = 16;

/// An engine whose pool (4 threads, as the default engine's) gathers its partitions' syncs.
fn open_gathering_engine(ctx: &Ctx, name: &str) -> Engine {
    let dir = ctx.fresh_dir(name);
    let workers = partlog::Workers::new(4)
        .and_then(|workers| workers.gather_file_system_syncs(GATHER_MIN_LOGS))
        .expect("the pool");
    let mut config = EngineConfig::default();
    config.workers = Some(workers);
    Engine::open(dir, config).expect("open the engine")
}

fn producer_config(idempotent: bool, acks: Acks) -> TopicProducerConfig {
    let mut config = TopicProducerConfig::default();
    config.enable_idempotence = idempotent;
    config.producer.acks = acks;
    config
}

/// One rep of a topic producer sending `RECORDS` records to `topic`, until flush.
pub(super) fn topic_producer_rep(engine: &Engine, topic: &str, config: TopicProducerConfig) -> Rep {
    let records = records();
    let producer = TopicProducer::new(engine, config).expect("producer");
    // Every partition's producer exists before the timer starts.
    for record in records.iter().take(KEYS) {
        drop(producer.send(topic, record).expect("send"));
    }
    producer.flush().expect("flush");
    let started = Instant::now();
    for i in 0..RECORDS {
        drop(producer.send(topic, &records[i % KEYS]).expect("send"));
    }
    producer.flush().expect("flush");
    let seconds = started.elapsed().as_secs_f64();
    producer.close().expect("close");
    Rep {
        seconds,
        records: RECORDS as u64,
        user_bytes: (RECORDS * SMALL_VALUE.len()) as u64,
    }
}

pub(super) fn row_topic_producer(ctx: &Ctx) -> Outcome {
    let engine = open_engine(ctx, "engine");
    let topic = engine
        .create_topic("t", 8, TopicConfig::new())
        .expect("topic");
    let records = records();
    let partitions: Vec<usize> = records
        .iter()
        .map(|r| partition_for_key(r.key.as_deref().unwrap_or_default(), 8).expect("key") as usize)
        .collect();
    let straight = || {
        let producers: Vec<Producer> = (0..8)
            .map(|p| {
                let config = ProducerConfig::builder()
                    .acks(Acks::One)
                    .build()
                    .expect("config");
                Producer::new(topic.partition(p).expect("partition"), config).expect("producer")
            })
            .collect();
        let started = Instant::now();
        for i in 0..RECORDS {
            let k = i % KEYS;
            drop(producers[partitions[k]].send(&records[k]).expect("send"));
        }
        for producer in &producers {
            producer.flush().expect("flush");
        }
        let seconds = started.elapsed().as_secs_f64();
        for producer in &producers {
            producer.close().expect("close");
        }
        Rep {
            seconds,
            records: RECORDS as u64,
            user_bytes: (RECORDS * SMALL_VALUE.len()) as u64,
        }
    };
    let (a, b, ratio, _) = pairs(
        ctx,
        || topic_producer_rep(&engine, "t", producer_config(false, Acks::One)),
        straight,
        Rep::records_per_second,
    );
    throughput_row(
        "TopicProducer::send, 100 B keyed records to 8 partitions (acks=1, until flush)",
        "each partition's Producer, partition computed beforehand",
        a,
        b,
        ratio,
        0.9,
        ">= 0.9",
        "no",
    )
}

pub(super) fn row_idempotent(ctx: &Ctx) -> Outcome {
    let engine = open_engine(ctx, "engine");
    engine
        .create_topic("t", 8, TopicConfig::new())
        .expect("topic");
    let (a, b, ratio, _) = pairs(
        ctx,
        || topic_producer_rep(&engine, "t", producer_config(true, Acks::One)),
        || topic_producer_rep(&engine, "t", producer_config(false, Acks::One)),
        Rep::records_per_second,
    );
    throughput_row(
        "idempotent TopicProducer, 100 B keyed records to 8 partitions (acks=1)",
        "the same, enable.idempotence=false",
        a,
        b,
        ratio,
        0.9,
        ">= 0.9",
        "no",
    )
}

/// How many records the transactional row sends between reads of the clock: at the row's
/// 2 to 3 M records a second, well under a millisecond, so it still commits every 100 ms.
const CLOCK_EVERY: usize = 1_024;

pub(super) fn row_transactional(ctx: &Ctx) -> Outcome {
    let engine = open_engine(ctx, "engine");
    engine
        .create_topic("t", 8, TopicConfig::new())
        .expect("topic");
    let records = records();
    let transactional = || {
        let mut config = TopicProducerConfig::transactional("bench");
        config.producer.acks = Acks::All;
        let producer = TopicProducer::new(&engine, config).expect("producer");
        producer.init_transactions().expect("init");
        let started = Instant::now();
        producer.begin_transaction().expect("begin");
        let mut began = Instant::now();
        for i in 0..RECORDS {
            drop(producer.send("t", &records[i % KEYS]).expect("send"));
            // The clock every `CLOCK_EVERY` records, not every record: a read costs about
            // as much as a fifth of a send, which the reference side does not pay.
            if i % CLOCK_EVERY == CLOCK_EVERY - 1 && began.elapsed().as_millis() >= 100 {
                producer.commit_transaction().expect("commit");
                producer.begin_transaction().expect("begin");
                began = Instant::now();
            }
        }
        producer.commit_transaction().expect("commit");
        let seconds = started.elapsed().as_secs_f64();
        producer.close().expect("close");
        Rep {
            seconds,
            records: RECORDS as u64,
            user_bytes: (RECORDS * SMALL_VALUE.len()) as u64,
        }
    };
    let (a, b, ratio, _) = pairs(
        ctx,
        transactional,
        || topic_producer_rep(&engine, "t", producer_config(true, Acks::All)),
        Rep::records_per_second,
    );
    throughput_row(
        "transactional TopicProducer committing every 100 ms, 100 B records, 8 partitions",
        "idempotent TopicProducer, acks=all (Kafka's default producer)",
        a,
        b,
        ratio,
        0.85,
        ">= 0.85",
        "no",
    )
}

/// Transactions (or appends) a rep of the commit-latency row times.
const COMMITS: usize = 100;

pub(super) fn row_commit_latency(ctx: &Ctx) -> Outcome {
    let engine = open_engine(ctx, "engine");
    let topic = engine
        .create_topic("t", 4, TopicConfig::new())
        .expect("topic");
    let record = NewRecord::new(TIMESTAMP, None, Some(&SMALL_VALUE));
    let mut config = TopicProducerConfig::transactional("latency");
    config.producer.linger_ms = 1000;
    let producer = TopicProducer::new(&engine, config).expect("producer");
    producer.init_transactions().expect("init");
    let mut latencies = Vec::new();
    let mut transactions = || {
        let started = Instant::now();
        for _ in 0..COMMITS {
            let one = Instant::now();
            producer.begin_transaction().expect("begin");
            for partition in 0..4 {
                for _ in 0..100 {
                    drop(
                        producer
                            .send_to("t", Some(partition), &record)
                            .expect("send"),
                    );
                }
            }
            producer.commit_transaction().expect("commit");
            latencies.push(one.elapsed().as_secs_f64());
        }
        Rep {
            seconds: started.elapsed().as_secs_f64(),
            records: COMMITS as u64,
            user_bytes: (COMMITS * 400 * SMALL_VALUE.len()) as u64,
        }
    };
    let log = topic.partition(0).expect("a log to append to");
    let batch: Vec<NewRecord> = (0..400).map(|_| record.clone()).collect();
    let appends = || append_rep(&log, &batch);
    let (a, b, ratio, _) = pairs(ctx, &mut transactions, appends, Rep::records_per_second);
    latencies.sort_by(f64::total_cmp);
    let p99 = latencies[(latencies.len() * 99 / 100).min(latencies.len() - 1)];
    Outcome::Measured(Measured {
        workload: "commit_transaction, 4 partitions x 100 records of 100 B, durable".into(),
        unit: "transactions/s",
        partlog: a.records_per_second(),
        reference: b.records_per_second(),
        reference_name: "one durable append of 400 records to one log".into(),
        ratio,
        target: 0.25,
        target_text: "<= 4x its time",
        roll_and_close_timed: "no",
        extra: vec![("partlog_p99_ms".into(), p99 * 1000.0)],
    })
}

fn append_rep(log: &Log, batch: &[NewRecord]) -> Rep {
    let started = Instant::now();
    for _ in 0..COMMITS {
        let appended = log.append(batch).expect("append");
        log.wait_durable(appended.last_offset).expect("durable");
    }
    Rep {
        seconds: started.elapsed().as_secs_f64(),
        records: COMMITS as u64,
        user_bytes: (COMMITS * 400 * SMALL_VALUE.len()) as u64,
    }
}

/// Transactional ids of the recovery row.
const IDS: usize = 10_000;

pub(super) fn row_coordinator_recovery(ctx: &Ctx) -> Outcome {
    let dir = ctx.fresh_dir("engine");
    // 10,000 ids, each in CompleteCommit, written as a coordinator writes them.
    {
        let engine = Engine::open(&dir, EngineConfig::default()).expect("open");
        engine.close().expect("close");
    }
    let mut by_partition: Vec<Vec<NewRecord>> = vec![Vec::new(); 50];
    for i in 0..IDS {
        let id = format!("txn-{i}");
        let partition = transaction_state_partition(&id, 50).expect("partition") as usize;
        let mut value =
            TransactionLogValue::new(i as i64, 3, 60_000, TransactionState::CompleteCommit);
        value.last_update_timestamp_ms = TIMESTAMP;
        value.start_timestamp_ms = TIMESTAMP;
        let key = encode_key(&id).expect("key");
        let value = encode_value(&value, 1).expect("value");
        by_partition[partition].push(NewRecord::new(TIMESTAMP, Some(&key), Some(&value)));
    }
    let state_dirs: Vec<_> = (0..50)
        .map(|p| dir.join(format!("{TRANSACTION_STATE_TOPIC}-{p}")))
        .collect();
    for (records, state_dir) in by_partition.iter().zip(&state_dirs) {
        let log = Log::open(state_dir, LogConfig::default()).expect("open");
        for chunk in records.chunks(100) {
            log.append(chunk).expect("append");
        }
        log.close().expect("close");
    }
    let recovery = || {
        let started = Instant::now();
        let engine = Engine::open(&dir, EngineConfig::default()).expect("open");
        let seconds = started.elapsed().as_secs_f64();
        assert!(engine.coordinator().transaction_metadata("txn-7").is_some());
        engine.close().expect("close");
        Rep {
            seconds,
            records: IDS as u64,
            user_bytes: 0,
        }
    };
    let read = || {
        let started = Instant::now();
        let mut count = 0;
        for state_dir in &state_dirs {
            let log = Log::open(state_dir, LogConfig::default()).expect("open");
            for record in log.records(0, ReadBound::LogEnd) {
                record.expect("record");
                count += 1;
            }
            log.close().expect("close");
        }
        assert_eq!(count, IDS);
        Rep {
            seconds: started.elapsed().as_secs_f64(),
            records: IDS as u64,
            user_bytes: 0,
        }
    };
    let (a, b, ratio, _) = pairs(ctx, recovery, read, Rep::records_per_second);
    throughput_row(
        "coordinator recovery (Engine::open), 10,000 transactional ids",
        "open the 50 __transaction_state logs and read every record",
        a,
        b,
        ratio,
        0.5,
        "<= 2x its time",
        "yes",
    )
}

/// The threads of this process.
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, Iterator::count)
}

/// 8 threads sending `RECORDS` keyed records through one producer to `topics` topics.
fn many_rep(engine: &Engine, topics: &[String], acks: Acks) -> (Rep, usize) {
    let records = Arc::new(records());
    let producer = Arc::new(TopicProducer::new(engine, producer_config(false, acks)).expect("p"));
    for topic in topics {
        for record in records.iter().take(KEYS) {
            drop(producer.send(topic, record).expect("send"));
        }
    }
    producer.flush().expect("flush");
    let started = Instant::now();
    std::thread::scope(|scope| {
        for t in 0..8 {
            let (producer, records) = (Arc::clone(&producer), Arc::clone(&records));
            scope.spawn(move || {
                for i in (t..MANY_RECORDS).step_by(8) {
                    let topic = &topics[i % topics.len()];
                    drop(producer.send(topic, &records[i % KEYS]).expect("send"));
                }
            });
        }
    });
    producer.flush().expect("flush");
    let seconds = started.elapsed().as_secs_f64();
    let threads = threads();
    producer.close().expect("close");
    let rep = Rep {
        seconds,
        records: MANY_RECORDS as u64,
        user_bytes: (MANY_RECORDS * SMALL_VALUE.len()) as u64,
    };
    (rep, threads)
}

pub(super) fn row_many_partitions(ctx: &Ctx) -> Outcome {
    let many_topics: Vec<String> = (0..10).map(|t| format!("topic{t}")).collect();
    let few_topics = vec!["t".to_owned()];
    let mut rows = Vec::new();
    let cases = [
        (Acks::One, false, "acks=1"),
        (Acks::All, false, "acks=all"),
        (Acks::All, true, "acks=all, syncs gathered"),
    ];
    for (acks, gathered, name) in cases {
        let open = if gathered {
            open_gathering_engine
        } else {
            open_engine
        };
        let many = open(ctx, &format!("engine-many-{name}"));
        for topic in &many_topics {
            many.create_topic(topic, 100, TopicConfig::new())
                .expect("topic");
        }
        let few = open(ctx, &format!("engine-few-{name}"));
        few.create_topic("t", 8, TopicConfig::new()).expect("topic");
        let mut peak_threads = 0;
        let (a, b, ratio, _) = pairs(
            ctx,
            || {
                let (rep, threads) = many_rep(&many, &many_topics, acks);
                peak_threads = peak_threads.max(threads);
                rep
            },
            || many_rep(&few, &few_topics, acks).0,
            Rep::records_per_second,
        );
        let mut extra = vec![
            ("process_threads".into(), peak_threads as f64),
            (
                "engine_pool_threads".into(),
                many.workers().threads() as f64,
            ),
        ];
        if let Some((rounds, covered)) = many.workers().gathered_syncs() {
            extra.push(("gather_min_logs".into(), GATHER_MIN_LOGS as f64));
            extra.push(("syncfs_rounds".into(), rounds as f64));
            extra.push((
                "partition_syncs_per_round".into(),
                covered as f64 / rounds.max(1) as f64,
            ));
        }
        rows.push(Measured {
            workload: format!(
                "1,000 partitions of 10 topics, 8 threads, 100 B keyed records, {name}"
            ),
            unit: "records/s",
            partlog: a.records_per_second(),
            reference: b.records_per_second(),
            reference_name: "the same records to 8 partitions".into(),
            ratio,
            target: 0.8,
            target_text: ">= 0.8",
            roll_and_close_timed: "no",
            extra,
        });
    }
    Outcome::MeasuredMany(rows)
}
