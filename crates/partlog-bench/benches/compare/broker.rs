//! The rows against what a user would run instead of partlog: a real Kafka 4.4 broker on
//! 127.0.0.1 (the tests' harness, `tests/common/broker.rs`), driven by Kafka's own Java client
//! (kafka-clients 4.4, `benches/kafka/BrokerClientDriver.java`, compiled once per process and
//! kept alive for the row), with partlog's engine and groups in this process beside it
//! (`cargo bench --bench compare -- broker`):
//!
//! - `broker_producer` (issue 33): a transaction of 4 partitions × 100 records of 100 B,
//!   committed and durable, median and p99 latency of 200 transactions (partlog's
//!   `TopicProducer` against a `KafkaProducer` with a `transactional.id`, the broker at
//!   `flush.messages=1`); idempotent sends of 100 B keyed records to 8 partitions, records/s,
//!   page cache (partlog acks=1 against the broker's acks=all on one replica, no flush) and
//!   durable (partlog acks=all, an fsync; the broker at `flush.messages=1`).
//! - `broker_groups` (issue 34): a group of 3 members on a 12-partition topic, a 4th joining
//!   with cooperative-sticky, `group.initial.rebalance.delay.ms` 0 on both sides: time from
//!   the join to every member's assignment in force (the last listener call that completes
//!   4 × 3 distinct partitions), median of 50; `commitSync` of one offset, median of 200.
//!
//! Fairness: every member on both sides polls in its own thread, every [`POLL_MS`], so no
//! rebalance waits on another member's poll; both sides use the same `heartbeat.interval.ms`
//! ([`heartbeat_ms`], 100 unless `COMPARE_BROKER_HEARTBEAT_MS` says otherwise), and auto-commit
//! is off on both. In the classic protocol a member learns of a rebalance from its heartbeat's
//! answer, so on both sides the join is bounded by the heartbeat: the old members' next beats
//! (round one), then the new member's (round two, after the others revoked what moves).
//!
//! The broker runs with Kafka's own start-script JVM options (`benches/kafka/broker-jvm.options`)
//! instead of the tests' C1-only ones, its thread pools at Kafka's defaults (`num.io.threads` 8,
//! `num.network.threads` 3) and `flush.messages=1` as a cluster-wide default (checked on every
//! topic the rows use, `__transaction_state` and `__consumer_offsets` included), except on the
//! page-cache producer topic.
//!
//! Beside the targets, the transaction rows report `commitTransaction`'s own time, and the
//! commit row partlog's floor: a durable append of one 60-byte record to a log of its own.
//!
//! Broker start, JVM start and the client objects' construction are outside the timed
//! regions; each side runs untimed warm-ups first. Without Java, `javac` or Kafka's jars the
//! rows are skipped with a message (these rows are not part of `.ci/run`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use partlog::{Acks, Log, LogConfig, NewRecord};
use partlog_engine::engine::{Engine, EngineConfig, TopicConfig};
use partlog_engine::producer::TopicProducer;
use partlog_engine::producer::config::TopicProducerConfig;
use partlog_groups::assignor::{Assignor, CooperativeStickyAssignor, TopicPartition};
use partlog_groups::consumer::{Consumer, ConsumerConfig, RebalanceListener};
use partlog_groups::group::coordinator::GroupConfig;
use partlog_groups::router::{GroupRouter, GroupRouterConfig};

use super::broker_harness::kafka::KafkaTools;
use super::broker_harness::{Broker, BrokerEnv};
use super::harness::{self, KafkaHarness, Measurement};
use super::kafka::java_and_classpath;
use super::{Ctx, Measured, Outcome, Rep, SMALL_VALUE, TIMESTAMP, engine, pairs, percentile};

/// The driver's source, embedded (the bench may run from anywhere) and compiled once a process.
const DRIVER_SOURCE: &str = include_str!("../kafka/BrokerClientDriver.java");
const DRIVER_CLASS: &str = "BrokerClientDriver";
/// The broker's JVM options (see the module docs).
const BROKER_JVM_OPTIONS: &str = include_str!("../kafka/broker-jvm.options");
const REFERENCE: &str = "Kafka 4.4 broker on 127.0.0.1, Java client";

/// Transactions a side times in the commit-latency row.
const TRANSACTIONS: usize = 200;
/// Partitions and records a partition in one transaction.
const TXN_PARTITIONS: i32 = 4;
const TXN_RECORDS: usize = 100;
/// Joins a side times in the rebalance row.
const JOINS: usize = 50;
/// Commits a side times in the commit row.
const COMMITS: usize = 200;
/// Partitions of the group's topic, and members before the join.
const GROUP_PARTITIONS: usize = 12;
const MEMBERS: usize = 3;
/// Each member's poll timeout: the most a member's own loop adds to a rebalance step.
const POLL_MS: u64 = 10;
/// How long a group may take to settle before the row fails.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(120);
/// Kafka's `flush.messages` for "never" (`Long.MAX_VALUE`): the page-cache producer topic.
const NO_FLUSH: i64 = i64::MAX;

/// `heartbeat.interval.ms` of every member on both sides: `COMPARE_BROKER_HEARTBEAT_MS`, else
/// 100 (Kafka's default of 3000 would make 50 joins take minutes a side, and bounds both sides
/// alike).
fn heartbeat_ms() -> i64 {
    std::env::var("COMPARE_BROKER_HEARTBEAT_MS")
        .ok()
        .map(|ms| {
            ms.parse()
                .expect("COMPARE_BROKER_HEARTBEAT_MS: milliseconds")
        })
        .unwrap_or(100)
}

// ---------------------------------------------------------------------------------------------
// The broker and its client driver.

/// What the rows need, found once a process: the broker's environment (its `java` is a wrapper
/// that swaps the tests' JVM options for [`BROKER_JVM_OPTIONS`]), the real `java`, Kafka's
/// classpath and the compiled driver's class directory.
struct Setup {
    env: BrokerEnv,
    java: PathBuf,
    classpath: String,
    classes: PathBuf,
}

/// The process's [`Setup`], made in `ctx`'s scratch (deleted with it) by the first row.
fn setup(ctx: &Ctx) -> Result<&'static Setup, String> {
    static SETUP: OnceLock<Result<Setup, String>> = OnceLock::new();
    SETUP
        .get_or_init(|| find_setup(&ctx.root.join("broker-client")))
        .as_ref()
        .map_err(Clone::clone)
}

fn find_setup(dir: &Path) -> Result<Setup, String> {
    let (java, classpath) = java_and_classpath()?;
    let probe = Command::new(&java)
        .arg("-version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run {} ({e}); install Java 17+", java.display()))?;
    if !probe.success() {
        return Err(format!("`{} -version` failed: {probe}", java.display()));
    }
    let classes = dir.join("classes");
    harness::compile(&java, &classpath, &classes, DRIVER_CLASS, DRIVER_SOURCE)?;
    let wrapper = broker_java_wrapper(dir, &java)?;
    let tools: &'static KafkaTools = Box::leak(Box::new(KafkaTools {
        java: wrapper,
        classpath: classpath.clone(),
        main_class: "org.apache.kafka.tools.DumpLogSegments".to_owned(),
    }));
    Ok(Setup {
        env: BrokerEnv {
            tools,
            // The rows create topics with the Java driver's Admin client, not client.py.
            python: PathBuf::from("python3"),
        },
        java,
        classpath,
        classes,
    })
}

/// A `java` for the broker harness that runs `java` with [`BROKER_JVM_OPTIONS`] where the
/// harness passes the tests' `@.../tests/kafka/jvm.options`.
fn broker_java_wrapper(dir: &Path, java: &Path) -> Result<PathBuf, String> {
    let options = dir.join("broker-jvm.options");
    std::fs::write(&options, BROKER_JVM_OPTIONS)
        .map_err(|e| format!("cannot write {}: {e}", options.display()))?;
    let quote = |path: &Path| format!("'{}'", path.display().to_string().replace('\'', "'\\''"));
    let script = format!(
        "#!/bin/bash\n\
         # The bench's broker: Kafka's start-script JVM options instead of the tests'.\n\
         args=()\n\
         for arg in \"$@\"; do\n\
         \x20 case \"$arg\" in\n\
         \x20   @*/tests/kafka/jvm.options) args+=(@{options}) ;;\n\
         \x20   *) args+=(\"$arg\") ;;\n\
         \x20 esac\n\
         done\n\
         exec {java} \"${{args[@]}}\"\n",
        options = quote(&options),
        java = quote(java),
    );
    let wrapper = dir.join("java");
    std::fs::write(&wrapper, script)
        .map_err(|e| format!("cannot write {}: {e}", wrapper.display()))?;
    let made_executable = Command::new("chmod")
        .arg("+x")
        .arg(&wrapper)
        .status()
        .map_err(|e| format!("cannot run chmod: {e}"))?;
    if !made_executable.success() {
        return Err(format!("chmod +x {} failed", wrapper.display()));
    }
    Ok(wrapper)
}

/// A running broker and a driver connected to it. The driver goes first when dropped (it
/// closes its clients while the broker still answers); the broker is then killed.
struct Session {
    driver: KafkaHarness,
    broker: Broker,
}

impl Session {
    /// Runs one driver command; panics with the driver's error and the broker log's tail.
    fn run(&mut self, command: &str) -> Vec<Measurement> {
        match self.driver.run(command) {
            Ok(measurements) => measurements,
            Err(why) => panic!(
                "the Kafka client driver failed: {why}\nbroker log ends:\n{}",
                self.broker.server_log_tail(30)
            ),
        }
    }

    /// Nanoseconds of each measurement of `command`, as milliseconds.
    fn latencies_ms(&mut self, command: &str) -> Vec<f64> {
        self.run(command)
            .iter()
            .map(|m| m.nanos as f64 / 1e6)
            .collect()
    }

    /// Checks that the topic's `flush.messages` is `expected`, as the broker reports it.
    fn check_flush(&mut self, topic: &str, expected: i64) {
        let seen = self.run(&format!("topic-config name={topic} key=flush.messages"));
        let value = seen.first().map(|m| m.items);
        assert_eq!(
            value.and_then(|v| i64::try_from(v).ok()),
            Some(expected),
            "{topic}: flush.messages"
        );
    }
}

/// Starts the broker (in `ctx`'s scratch) and the driver, connected and configured; `None`
/// after a message when Java or the jars are missing.
fn start_session(ctx: &Ctx, row: &str) -> Option<Session> {
    let setup = match setup(ctx) {
        Ok(setup) => setup,
        Err(why) => {
            // javac's whole output can run to pages: its first line names the problem.
            let first_line = why.lines().next().unwrap_or_default();
            println!("  {row}: skipped, no Kafka broker can run here: {first_line}");
            return None;
        }
    };
    let env: &'static BrokerEnv = &setup.env;
    let work = ctx.fresh_dir(&format!("{row}-broker"));
    let started = Instant::now();
    let broker = Broker::start(env, &work);
    let driver = KafkaHarness::spawn(&setup.java, &setup.classpath, &setup.classes, DRIVER_CLASS)
        .unwrap_or_else(|why| panic!("cannot start the Kafka client driver: {why}"));
    let mut session = Session { driver, broker };
    let bootstrap = session.broker.bootstrap();
    session.run(&format!("connect bootstrap={bootstrap}"));
    // Kafka's defaults for the pools the tests' config shrinks; a dynamic update may at most
    // double a pool, so num.io.threads goes 2, 4, 8.
    session
        .run("broker-config log.flush.interval.messages=1 num.io.threads=4 num.network.threads=3");
    session.run("broker-config num.io.threads=8");
    println!(
        "  {row}: broker and client driver up in {:.1} s (not timed)",
        started.elapsed().as_secs_f64()
    );
    Some(session)
}

fn open_engine(ctx: &Ctx, name: &str) -> Arc<Engine> {
    let dir = ctx.fresh_dir(name);
    Arc::new(Engine::open(dir, EngineConfig::default()).expect("open the engine"))
}

fn median_and_p99(values: &[f64]) -> (f64, f64) {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    (percentile(&sorted, 0.5), percentile(&sorted, 0.99))
}

/// Splits `total` timed operations into `ctx.pairs` A B turns and returns each side's values:
/// `a(n)` and `b(n)` each time `n` operations and return one value each.
fn alternate<T>(
    ctx: &Ctx,
    total: usize,
    mut a: impl FnMut(usize) -> Vec<T>,
    mut b: impl FnMut(usize) -> Vec<T>,
) -> (Vec<T>, Vec<T>) {
    let turn = total.div_ceil(ctx.pairs);
    let (mut a_values, mut b_values) = (Vec::new(), Vec::new());
    while a_values.len() < total {
        let n = turn.min(total - a_values.len());
        a_values.extend(a(n));
        b_values.extend(b(n));
    }
    (a_values, b_values)
}

/// A latency row: partlog's and the broker's values at `quantile` (lower is better), the ratio
/// broker ÷ partlog (higher is better) against `target`.
#[allow(
    clippy::too_many_arguments,
    reason = "one call per latency row; a struct would only rename the arguments"
)]
fn latency_row(
    workload: String,
    unit: &'static str,
    partlog: f64,
    reference: f64,
    reference_name: &str,
    target: f64,
    target_text: &'static str,
    extra: Vec<(String, f64)>,
) -> Measured {
    Measured {
        workload,
        unit,
        partlog,
        reference,
        reference_name: reference_name.to_owned(),
        ratio: reference / partlog,
        target,
        target_text,
        roll_and_close_timed: "no",
        extra,
    }
}

// ---------------------------------------------------------------------------------------------
// Issue 33: transactions and idempotent sends.

pub(super) fn row_producer(ctx: &Ctx) -> Outcome {
    let Some(mut kafka) = start_session(ctx, "broker_producer") else {
        return Outcome::Skipped;
    };
    let engine = open_engine(ctx, "broker-producer-engine");
    for (topic, partitions, flush) in [
        ("txn", TXN_PARTITIONS, 1),
        ("idem-durable", 8, 1),
        ("idem-cache", 8, NO_FLUSH),
    ] {
        let config = if flush == NO_FLUSH {
            format!(" flush.messages={NO_FLUSH}")
        } else {
            String::new()
        };
        kafka.run(&format!(
            "create-topic name={topic} partitions={partitions}{config}"
        ));
        kafka.check_flush(topic, flush);
        engine
            .create_topic(topic, partitions, TopicConfig::new())
            .expect("topic");
    }
    let mut rows = transaction_rows(ctx, &mut kafka, &engine);
    rows.extend(idempotent_rows(ctx, &mut kafka, &engine));
    engine.close().expect("close the engine");
    Outcome::MeasuredMany(rows)
}

/// One transaction's milliseconds: begin to `commit_transaction`'s return, and the commit alone.
type TxnTimes = (f64, f64);

fn transaction_rows(ctx: &Ctx, kafka: &mut Session, engine: &Engine) -> Vec<Measured> {
    let record = NewRecord::new(TIMESTAMP, None, Some(&SMALL_VALUE));
    let producer = TopicProducer::new(engine, TopicProducerConfig::transactional("bench-txn"))
        .expect("a transactional producer");
    producer.init_transactions().expect("init_transactions");
    let partlog = |count: usize| -> Vec<TxnTimes> {
        (0..count)
            .map(|_| {
                let started = Instant::now();
                producer.begin_transaction().expect("begin");
                for partition in 0..TXN_PARTITIONS {
                    for _ in 0..TXN_RECORDS {
                        drop(
                            producer
                                .send_to("txn", Some(partition), &record)
                                .expect("send"),
                        );
                    }
                }
                let committing = Instant::now();
                producer.commit_transaction().expect("commit");
                (
                    started.elapsed().as_secs_f64() * 1e3,
                    committing.elapsed().as_secs_f64() * 1e3,
                )
            })
            .collect()
    };
    let broker = |kafka: &mut Session, count: usize| -> Vec<TxnTimes> {
        kafka
            .run(&format!(
                "txn topic=txn partitions={TXN_PARTITIONS} records={TXN_RECORDS} count={count}"
            ))
            .iter()
            .map(|m| {
                let commit = m.field("commit_nanos").expect("commit_nanos");
                (m.nanos as f64 / 1e6, commit as f64 / 1e6)
            })
            .collect()
    };
    kafka.run("txn-init id=bench-txn");
    // Warm-up, untimed: the JIT, the coordinator lookups, `__transaction_state`'s creation.
    partlog(20);
    broker(kafka, 20);
    kafka.check_flush("__transaction_state", 1);
    let (a, b) = alternate(ctx, TRANSACTIONS, partlog, |n| broker(kafka, n));
    producer.close().expect("close");
    let (a_total, a_commit): (Vec<f64>, Vec<f64>) = a.into_iter().unzip();
    let (b_total, b_commit): (Vec<f64>, Vec<f64>) = b.into_iter().unzip();
    let (a_median, a_p99) = median_and_p99(&a_total);
    let (b_median, b_p99) = median_and_p99(&b_total);
    let (a_commit_median, a_commit_p99) = median_and_p99(&a_commit);
    let (b_commit_median, b_commit_p99) = median_and_p99(&b_commit);
    let reference = format!("{REFERENCE}: KafkaProducer, transactional.id, flush.messages=1");
    let workload = |what: &str| {
        format!(
            "transaction of 4 partitions x 100 records of 100 B, begin to committed and durable, \
             back to back (broker flush.messages=1), {what} of {TRANSACTIONS}"
        )
    };
    vec![
        latency_row(
            workload("median"),
            "ms",
            a_median,
            b_median,
            &reference,
            5.0,
            ">= 5x lower",
            vec![
                ("partlog_commit_call_median_ms".into(), a_commit_median),
                ("broker_commit_call_median_ms".into(), b_commit_median),
            ],
        ),
        latency_row(
            workload("p99"),
            "ms",
            a_p99,
            b_p99,
            &reference,
            5.0,
            ">= 5x lower",
            vec![
                ("partlog_commit_call_p99_ms".into(), a_commit_p99),
                ("broker_commit_call_p99_ms".into(), b_commit_p99),
            ],
        ),
    ]
}

fn idempotent_rows(ctx: &Ctx, kafka: &mut Session, engine: &Engine) -> Vec<Measured> {
    kafka.run("idem-init");
    let mut rows = Vec::new();
    for (name, acks, topic) in [
        (
            "page cache (partlog acks=1; broker acks=all, 1 replica, no flush)",
            Acks::One,
            "idem-cache",
        ),
        (
            "durable (partlog acks=all, fsync; broker flush.messages=1)",
            Acks::All,
            "idem-durable",
        ),
    ] {
        let config = || {
            let mut config = TopicProducerConfig::default();
            config.enable_idempotence = true;
            config.producer.acks = acks;
            config
        };
        let command = format!(
            "idem topic={topic} records={} keys={}",
            engine::RECORDS,
            engine::KEYS
        );
        let mut broker_rep = || {
            let measurement = kafka.run(&command).pop().expect("one measurement");
            Rep {
                seconds: measurement.nanos as f64 / 1e9,
                records: measurement.items,
                user_bytes: measurement.bytes,
            }
        };
        // Warm-up, untimed.
        engine::topic_producer_rep(engine, topic, config());
        broker_rep();
        let (a, b, ratio, _) = pairs(
            ctx,
            || engine::topic_producer_rep(engine, topic, config()),
            &mut broker_rep,
            Rep::records_per_second,
        );
        rows.push(Measured {
            workload: format!("idempotent sends, 100 B keyed records to 8 partitions, {name}"),
            unit: "records/s",
            partlog: a.records_per_second(),
            reference: b.records_per_second(),
            reference_name: format!("{REFERENCE}: KafkaProducer, enable.idempotence"),
            ratio,
            target: 2.0,
            target_text: ">= 2",
            roll_and_close_timed: "no",
            extra: vec![],
        });
    }
    rows
}

// ---------------------------------------------------------------------------------------------
// Issue 34: a group's rebalance and commitSync.

/// The members' partitions as their listeners last reported them, and what a wait expects.
#[derive(Default)]
struct Owned {
    by_member: BTreeMap<usize, BTreeSet<TopicPartition>>,
    want_members: usize,
    want_each: usize,
    met_at: Option<Instant>,
}

impl Owned {
    /// Records the first moment the expected number of members hold their equal shares.
    fn check(&mut self) {
        if self.met_at.is_some() || self.by_member.len() != self.want_members {
            return;
        }
        let mut all = BTreeSet::new();
        for owned in self.by_member.values() {
            if owned.len() != self.want_each {
                return;
            }
            all.extend(owned.iter().cloned());
        }
        if all.len() == self.want_members * self.want_each {
            self.met_at = Some(Instant::now());
        }
    }
}

#[derive(Default)]
struct Shared {
    owned: Mutex<Owned>,
    settled: Condvar,
}

impl Shared {
    fn change(&self, member: usize, change: impl FnOnce(&mut Owned)) {
        let mut owned = self.owned.lock().expect("the group's lock");
        owned.by_member.entry(member).or_default();
        change(&mut owned);
        owned.check();
        if owned.met_at.is_some() {
            self.settled.notify_all();
        }
    }

    fn expect(&self, members: usize) {
        let mut owned = self.owned.lock().expect("the group's lock");
        owned.want_members = members;
        owned.want_each = GROUP_PARTITIONS / members;
        owned.met_at = None;
        owned.check();
    }

    fn await_settled(&self) -> Instant {
        let owned = self.owned.lock().expect("the group's lock");
        let (owned, timeout) = self
            .settled
            .wait_timeout_while(owned, SETTLE_TIMEOUT, |owned| owned.met_at.is_none())
            .expect("the group's lock");
        assert!(
            !timeout.timed_out(),
            "partlog's group did not settle on {} members of {} partitions within {:?}: {:?}",
            owned.want_members,
            owned.want_each,
            SETTLE_TIMEOUT,
            owned.by_member
        );
        owned.met_at.expect("settled")
    }
}

/// A member's listener: reports each change to the shared view.
struct Listener {
    shared: Arc<Shared>,
    member: usize,
}

impl RebalanceListener for Listener {
    fn on_partitions_revoked(&mut self, partitions: &[TopicPartition]) {
        self.shared.change(self.member, |owned| {
            if let Some(set) = owned.by_member.get_mut(&self.member) {
                for tp in partitions {
                    set.remove(tp);
                }
            }
        });
    }

    fn on_partitions_assigned(&mut self, partitions: &[TopicPartition]) {
        self.shared.change(self.member, |owned| {
            if let Some(set) = owned.by_member.get_mut(&self.member) {
                set.extend(partitions.iter().cloned());
            }
        });
    }

    fn on_partitions_lost(&mut self, partitions: &[TopicPartition]) {
        self.on_partitions_revoked(partitions);
    }
}

/// A member polling in its own thread until told to stop.
struct Member {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Result<(), partlog_groups::Error>>,
}

/// partlog's side of the rebalance row: consumers of one group, each in its own thread.
struct PartlogGroup {
    router: Arc<GroupRouter>,
    shared: Arc<Shared>,
    members: Vec<Member>,
    next_id: usize,
}

impl PartlogGroup {
    fn consumer(&self) -> Consumer {
        let mut config = ConsumerConfig::with_group("bench-group");
        config.client_id = format!("member-{}", self.next_id);
        config.heartbeat_interval_ms = heartbeat_ms();
        config.enable_auto_commit = false;
        let assignors: Vec<Box<dyn Assignor + Send>> =
            vec![Box::new(CooperativeStickyAssignor::new())];
        Consumer::with_assignors(&self.router, config, assignors).expect("a consumer")
    }

    /// Starts `consumer` as the next member: it subscribes and polls in its own thread.
    fn start(&mut self, mut consumer: Consumer) {
        let id = self.next_id;
        self.next_id += 1;
        let shared = Arc::clone(&self.shared);
        shared.change(id, |_| {});
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let listener = Listener {
                shared: Arc::clone(&shared),
                member: id,
            };
            let run = || {
                consumer.subscribe(&["members"], listener)?;
                while !stopped.load(Ordering::Relaxed) {
                    consumer.poll(Duration::from_millis(POLL_MS))?;
                }
                consumer.close()
            };
            let result = run();
            shared.change(id, |owned| {
                owned.by_member.remove(&id);
            });
            result
        });
        self.members.push(Member { stop, thread });
    }

    /// Milliseconds from a new member's start to every member's assignment in force.
    fn join(&mut self) -> f64 {
        let consumer = self.consumer();
        self.shared.expect(self.members.len() + 1);
        let started = Instant::now();
        self.start(consumer);
        (self.shared.await_settled() - started).as_secs_f64() * 1e3
    }

    /// Milliseconds from the last member's stop to the others holding its partitions.
    fn leave(&mut self) -> f64 {
        let member = self.members.pop().expect("a member");
        self.shared.expect(self.members.len());
        let started = Instant::now();
        member.stop.store(true, Ordering::Relaxed);
        let took = (self.shared.await_settled() - started).as_secs_f64() * 1e3;
        member
            .thread
            .join()
            .expect("the member's thread")
            .expect("the member's poll loop");
        took
    }

    fn stop(self) {
        for member in &self.members {
            member.stop.store(true, Ordering::Relaxed);
        }
        for member in self.members {
            member
                .thread
                .join()
                .expect("the member's thread")
                .expect("the member's poll loop");
        }
    }
}

pub(super) fn row_groups(ctx: &Ctx) -> Outcome {
    let Some(mut kafka) = start_session(ctx, "broker_groups") else {
        return Outcome::Skipped;
    };
    let engine = open_engine(ctx, "broker-groups-engine");
    let config = GroupRouterConfig {
        group: GroupConfig {
            initial_rebalance_delay_ms: 0,
            ..GroupConfig::default()
        },
        ..GroupRouterConfig::default()
    };
    let router = GroupRouter::open(&engine, config).expect("the group router");
    for (topic, partitions) in [("members", GROUP_PARTITIONS), ("commits", 1)] {
        let partitions = i32::try_from(partitions).expect("partitions");
        kafka.run(&format!(
            "create-topic name={topic} partitions={partitions}"
        ));
        kafka.check_flush(topic, 1);
        engine
            .create_topic(topic, partitions, TopicConfig::new())
            .expect("topic");
    }
    let mut rows = vec![rebalance_row(ctx, &mut kafka, &router)];
    rows.push(commit_row(ctx, &mut kafka, &router));
    router.close();
    engine.close().expect("close the engine");
    Outcome::MeasuredMany(rows)
}

fn rebalance_row(ctx: &Ctx, kafka: &mut Session, router: &Arc<GroupRouter>) -> Measured {
    let heartbeat = heartbeat_ms();
    let mut group = PartlogGroup {
        router: Arc::clone(router),
        shared: Arc::default(),
        members: Vec::new(),
        next_id: 0,
    };
    group.shared.expect(MEMBERS);
    for _ in 0..MEMBERS {
        let consumer = group.consumer();
        group.start(consumer);
    }
    group.shared.await_settled();
    kafka.run(&format!(
        "group-start group=bench-group topic=members members={MEMBERS} heartbeat_ms={heartbeat} \
         poll_ms={POLL_MS}"
    ));
    // Each turn: (join, leave) milliseconds.
    let mut partlog = |n: usize| -> Vec<(f64, f64)> {
        (0..n)
            .map(|_| {
                let joined = group.join();
                (joined, group.leave())
            })
            .collect()
    };
    let mut broker = |n: usize| -> Vec<(f64, f64)> {
        (0..n)
            .map(|_| {
                let joined = kafka.latencies_ms("group-join")[0];
                (joined, kafka.latencies_ms("group-leave")[0])
            })
            .collect()
    };
    // Warm-up, untimed.
    partlog(2);
    broker(2);
    let (partlog_turns, broker_turns) = alternate(ctx, JOINS, partlog, broker);
    kafka.run("group-stop");
    group.stop();
    let (a, partlog_leaves): (Vec<f64>, Vec<f64>) = partlog_turns.into_iter().unzip();
    let (b, broker_leaves): (Vec<f64>, Vec<f64>) = broker_turns.into_iter().unzip();
    let (a_median, a_p99) = median_and_p99(&a);
    let (b_median, b_p99) = median_and_p99(&b);
    latency_row(
        format!(
            "a 4th member joins a group of 3 on 12 partitions (cooperative-sticky, initial \
             rebalance delay 0, heartbeat.interval.ms {heartbeat}): until every assignment is \
             in force, median of {JOINS}"
        ),
        "ms",
        a_median,
        b_median,
        &format!("{REFERENCE}: KafkaConsumer + ConsumerRebalanceListener, a thread a member"),
        5.0,
        ">= 5x lower",
        vec![
            ("partlog_p99_ms".into(), a_p99),
            ("broker_p99_ms".into(), b_p99),
            (
                "partlog_leave_median_ms".into(),
                median_and_p99(&partlog_leaves).0,
            ),
            (
                "broker_leave_median_ms".into(),
                median_and_p99(&broker_leaves).0,
            ),
        ],
    )
}

fn commit_row(ctx: &Ctx, kafka: &mut Session, router: &Arc<GroupRouter>) -> Measured {
    let tp = TopicPartition::new("commits", 0);
    let mut config = ConsumerConfig::with_group("bench-commits");
    config.enable_auto_commit = false;
    let mut consumer = Consumer::new(router, config).expect("a consumer");
    consumer
        .assign(std::slice::from_ref(&tp))
        .expect("assign the partition");
    let mut next_offset = 0;
    let mut partlog = |n: usize| -> Vec<f64> {
        (0..n)
            .map(|_| {
                next_offset += 1;
                let offsets = [(tp.clone(), next_offset)];
                let started = Instant::now();
                consumer.commit_sync(Some(&offsets)).expect("commit_sync");
                started.elapsed().as_secs_f64() * 1e6
            })
            .collect()
    };
    kafka.run("commit-init group=bench-commits topic=commits");
    // Warm-up, untimed: the coordinator lookup and `__consumer_offsets`' creation.
    partlog(20);
    kafka.latencies_ms("commit count=20");
    kafka.check_flush("__consumer_offsets", 1);
    let broker = |n: usize| -> Vec<f64> {
        kafka
            .latencies_ms(&format!("commit count={n}"))
            .into_iter()
            .map(|ms| ms * 1e3)
            .collect()
    };
    let (a, b) = alternate(ctx, COMMITS, partlog, broker);
    consumer.close().expect("close the consumer");
    let (a_median, a_p99) = median_and_p99(&a);
    let (b_median, b_p99) = median_and_p99(&b);
    let floor = durable_append_floor_us(ctx);
    latency_row(
        format!("commitSync of one offset, durable (broker flush.messages=1), median of {COMMITS}"),
        "us",
        a_median,
        b_median,
        &format!("{REFERENCE}: KafkaConsumer.commitSync, assign()ed"),
        5.0,
        ">= 5x lower",
        vec![
            ("partlog_p99_us".into(), a_p99),
            ("broker_p99_us".into(), b_p99),
            ("durable_append_60b_median_us".into(), floor),
        ],
    )
}

/// What bounds partlog's commit: the median of [`COMMITS`] durable appends of one 60-byte keyed
/// record to a log of its own (append, then wait until it is durable), in microseconds.
fn durable_append_floor_us(ctx: &Ctx) -> f64 {
    let log =
        Log::open(ctx.fresh_dir("broker-commit-floor"), LogConfig::default()).expect("open a log");
    let value = [b'o'; 40];
    let record = NewRecord::new(TIMESTAMP, Some(b"group-and-partition!"), Some(&value));
    let times: Vec<f64> = (0..COMMITS)
        .map(|_| {
            let started = Instant::now();
            let appended = log.append(std::slice::from_ref(&record)).expect("append");
            log.wait_durable(appended.last_offset).expect("durable");
            started.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    log.close().expect("close the log");
    median_and_p99(&times).0
}
