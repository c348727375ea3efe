//! partlog's assignors against Kafka's own (`kafka-clients` 4.4, through
//! `tests/kafka/AssignorDriver.java`).
//!
//! `assignors_match_kafka_on_random_groups` runs the seeded random groups of
//! `tests/common/scenario.rs` over several rebalance rounds. Every assignment must equal Kafka's
//! member by member *as a list*, in Kafka's order (it travels in the SyncGroup response and is
//! what the sticky user data encodes), and so must the cooperative assignor's recorded ownership
//! transfers. Every other scenario is chained: partlog plays each member's client side across
//! the rounds, and the user data each member sends must equal, byte for byte, what Kafka's client
//! side sends after the same assignments.
//!
//! The other tests check the user data and the range assignor's order on topic names built to
//! collide in Java's `HashMap`: names sharing a bucket, names sharing a whole hash code (trees),
//! and enough topics that the table doubles at a call that depends on the list's order.
//!
//! `PARTLOG_ASSIGNOR_CASES` sets the number of cases compared per assignor (default 5,000; the
//! run goes on until every assignor has that many); `PARTLOG_ASSIGNOR_SEED` the base seed
//! (default 17). A failure names the scenario's seed, which `PARTLOG_ASSIGNOR_SEED=<seed>
//! PARTLOG_ASSIGNOR_CASES=3` replays first. Without Java or Kafka's jars the tests are skipped
//! with a message, except under `CI=true`, where they fail.
//!
//! The long run is `PARTLOG_ASSIGNOR_CASES=100000 cargo test --release -p partlog-groups --test
//! differential -- --nocapture assignors_match`: scenarios go to Kafka in waves of a bounded
//! size, so memory stays flat (about 0.7 GiB) however many cases run; it takes about half an
//! hour on a busy 2-core machine.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Instant;

use common::driver::{KafkaDriver, hex, partitions_from_json, partitions_json, running_in_ci};
use common::scenario::{Rng, Scenario};
use partlog_groups::Error;
use partlog_groups::assignor::user_data::encode_sticky;
use partlog_groups::assignor::{
    Assignor, CooperativeStickyAssignor, GroupAssignment, MemberSubscription, PartitionsPerTopic,
    RangeAssignor, RoundRobinAssignor, StickyAssignor, TopicPartition,
};
use serde_json::{Value, json};

const ASSIGNORS: [&str; 4] = ["range", "roundrobin", "sticky", "cooperative-sticky"];
/// Rebalance rounds per scenario: each round's members own what the previous round gave them.
const ROUNDS: usize = 3;
/// Scenarios per assignor sent to Kafka at once: bounds memory on long runs.
const WAVE: usize = 2_000;
/// A run stops starting new waves after this many failures.
const ENOUGH_FAILURES: usize = 50;

/// The driver, or why the test skips (outside CI).
fn driver_or_skip(test: &str) -> Option<KafkaDriver> {
    match KafkaDriver::locate(Path::new(env!("CARGO_TARGET_TMPDIR"))) {
        Ok(driver) => Some(driver),
        Err(why) if running_in_ci() => {
            panic!("{test} needs Java and Kafka's jars under CI=true: {why}")
        }
        Err(why) => {
            eprintln!("skipping: {test} needs Java and Kafka's jars: {why}");
            None
        }
    }
}

/// What partlog answered for one case.
struct Ours {
    result: Result<GroupAssignment, Error>,
    transfers: Option<BTreeMap<TopicPartition, String>>,
}

fn assign_ours(
    assignor: &str,
    topics: &PartitionsPerTopic,
    members: &[MemberSubscription],
) -> Ours {
    let plain = |result| Ours {
        result,
        transfers: None,
    };
    match assignor {
        "range" => plain(RangeAssignor.assign(topics, members)),
        "roundrobin" => plain(RoundRobinAssignor.assign(topics, members)),
        "sticky" => plain(StickyAssignor::new().assign(topics, members)),
        _ => match CooperativeStickyAssignor::new().assign_with_transfers(topics, members) {
            Ok(round) => Ours {
                result: Ok(round.assignment),
                transfers: Some(round.transferring),
            },
            Err(e) => plain(Err(e)),
        },
    }
}

/// Kafka's assignment, each member's list in Kafka's order.
fn kafka_lists(value: &Value) -> Option<BTreeMap<String, Vec<TopicPartition>>> {
    value
        .as_object()?
        .iter()
        .map(|(m, list)| Some((m.clone(), partitions_from_json(list)?)))
        .collect()
}

fn show(list: Option<&Vec<TopicPartition>>) -> String {
    match list {
        None => "nothing".into(),
        Some(list) => {
            let items: Vec<String> = list.iter().map(ToString::to_string).collect();
            format!("[{}]", items.join(", "))
        }
    }
}

/// Compares one case; `None` if partlog agrees with Kafka: the same lists in the same order, the
/// same transfers, and, for a chained case, the same user data from every member's client side.
fn compare(ours: &Ours, kafka: &Value, members: &[MemberSubscription]) -> Option<String> {
    if let Some(error) = kafka.get("error") {
        return match &ours.result {
            Err(_) => None,
            Ok(a) => Some(format!("Kafka threw {error}; partlog assigned {a:?}")),
        };
    }
    if let Some(Value::Object(sent)) = kafka.get("userData") {
        for m in members {
            let theirs = sent.get(&m.member_id).and_then(Value::as_str);
            let mine = m.user_data.as_deref().map(hex);
            if theirs != mine.as_deref() {
                return Some(format!(
                    "the user data of {} differs: Kafka's client sends {theirs:?}, partlog's {mine:?}",
                    m.member_id
                ));
            }
        }
    }
    let Some(theirs) = kafka.get("assignment").and_then(kafka_lists) else {
        return Some(format!("unreadable driver output {kafka}"));
    };
    let mine = match &ours.result {
        Ok(a) => a,
        Err(e) => return Some(format!("partlog failed ({e}); Kafka assigned {theirs:?}")),
    };
    if *mine != theirs {
        let differing: Vec<String> = theirs
            .keys()
            .chain(mine.keys())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .filter(|m| mine.get(*m) != theirs.get(*m))
            .map(|m| {
                fn as_set(l: Option<&Vec<TopicPartition>>) -> Option<BTreeSet<&TopicPartition>> {
                    l.map(|l| l.iter().collect())
                }
                let how = if as_set(mine.get(m)) == as_set(theirs.get(m)) {
                    "the same partitions in another order"
                } else {
                    "other partitions"
                };
                format!(
                    "{m}: {how}: Kafka {}, partlog {}",
                    show(theirs.get(m)),
                    show(mine.get(m))
                )
            })
            .collect();
        return Some(format!("assignments differ: {}", differing.join("; ")));
    }
    if let (Some(Value::Object(theirs)), Some(mine)) = (kafka.get("transfers"), &ours.transfers) {
        let theirs: BTreeMap<String, String> = theirs
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
            .collect();
        let mine: BTreeMap<String, String> = mine
            .iter()
            .map(|(tp, m)| (tp.to_string(), m.clone()))
            .collect();
        if mine != theirs {
            return Some(format!(
                "transfers differ: Kafka {theirs:?}, partlog {mine:?}"
            ));
        }
    }
    None
}

fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(value) => value
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value} is not a number")),
        Err(_) => default,
    }
}

/// What a run compared and found.
#[derive(Default)]
struct Tally {
    /// Cases compared per assignor, and how many of them were chained.
    compared: BTreeMap<&'static str, (usize, usize)>,
    /// Members whose user data from the two client sides was compared.
    user_data_compared: usize,
    both_failed: BTreeMap<String, usize>,
    failures: Vec<String>,
    cycles: Vec<String>,
}

impl Tally {
    fn count(&self, assignor: &str) -> usize {
        self.compared.get(assignor).map_or(0, |c| c.0)
    }

    /// Counts a case where both threw, by Kafka's exception class and partlog's reason.
    fn count_both_failed(&mut self, kafka: &Value, ours: &Ours) {
        let (Some(error), Err(ours)) = (kafka.get("error").and_then(Value::as_str), &ours.result)
        else {
            return;
        };
        let class = error
            .split(':')
            .next()
            .unwrap_or(error)
            .rsplit('.')
            .next()
            .unwrap_or(error);
        let ours = match ours {
            Error::InconsistentAssignment { reason, .. } => *reason,
            _ => "another error",
        };
        *self
            .both_failed
            .entry(format!("Kafka {class} / partlog \"{ours}\""))
            .or_default() += 1;
    }
}

/// Runs `scenarios` for `ROUNDS` rounds against Kafka, adding to `tally`.
fn run_wave(driver: &KafkaDriver, mut scenarios: Vec<Scenario>, tally: &mut Tally) {
    let trace = std::env::var_os("PARTLOG_ASSIGNOR_TRACE").is_some();
    for round in 0..ROUNDS {
        let ours: Vec<Ours> = scenarios
            .iter()
            .map(|s| {
                if trace {
                    eprintln!(
                        "{} seed {} round {round}: {}",
                        s.assignor,
                        s.seed,
                        s.case(0)
                    );
                }
                assign_ours(s.assignor, &s.topics, &s.members)
            })
            .collect();
        // Where partlog finds Kafka's balance loop cycling, Kafka's class would spin forever:
        // those cases are not sent to it (and their scenarios end here).
        let cycling: BTreeSet<usize> = ours
            .iter()
            .enumerate()
            .filter(|(_, o)| matches!(o.result, Err(Error::BalanceLoopCycles { .. })))
            .map(|(i, _)| i)
            .collect();
        let sent: Vec<usize> = (0..scenarios.len())
            .filter(|i| !cycling.contains(i))
            .collect();
        let cases: Vec<String> = sent
            .iter()
            .map(|&i| scenarios[i].case(i).to_string())
            .collect();
        let kafka = driver
            .run(&cases)
            .unwrap_or_else(|why| panic!("round {round}: {why}"));
        let mut failed = cycling.clone();
        for &i in &cycling {
            let s = &scenarios[i];
            tally
                .cycles
                .push(format!("{} seed {} round {round}", s.assignor, s.seed));
        }
        let mut kafka_assignments: BTreeMap<usize, BTreeMap<String, Vec<TopicPartition>>> =
            BTreeMap::new();
        for (&i, line) in sent.iter().zip(&kafka) {
            let value: Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("driver output {line}: {e}"));
            let s = &scenarios[i];
            let counts = tally.compared.entry(s.assignor).or_default();
            counts.0 += 1;
            if s.chained {
                counts.1 += 1;
                tally.user_data_compared += s.members.len();
            }
            tally.count_both_failed(&value, &ours[i]);
            match compare(&ours[i], &value, &s.members) {
                Some(why) => {
                    failed.insert(i);
                    tally.failures.push(format!(
                        "{} seed {} round {round}{}: {why}\n  case: {}",
                        s.assignor,
                        s.seed,
                        if s.chained { " (chained)" } else { "" },
                        s.case(i)
                    ));
                }
                None => {
                    if let Some(lists) = value.get("assignment").and_then(kafka_lists) {
                        kafka_assignments.insert(i, lists);
                    }
                }
            }
        }
        // Failed scenarios stop here; the others go on to their next round from their (agreed)
        // assignments.
        let mut next = Vec::new();
        for (i, (mut scenario, ours)) in scenarios.into_iter().zip(ours).enumerate() {
            if let (false, Ok(assignment), Some(theirs)) =
                (failed.contains(&i), &ours.result, kafka_assignments.get(&i))
            {
                scenario.advance(assignment, theirs);
                next.push(scenario);
            }
        }
        scenarios = next;
    }
}

#[test]
fn assignors_match_kafka_on_random_groups() {
    let Some(driver) = driver_or_skip("assignors_match_kafka_on_random_groups") else {
        return;
    };
    let started = Instant::now();
    let target = env_number("PARTLOG_ASSIGNOR_CASES", 5_000) as usize;
    let base_seed = env_number("PARTLOG_ASSIGNOR_SEED", 17);
    let mut tally = Tally::default();
    let mut next_index = [0usize; ASSIGNORS.len()];
    while tally.failures.len() < ENOUGH_FAILURES {
        let mut wave = Vec::new();
        for (a, assignor) in ASSIGNORS.iter().enumerate() {
            let missing = target.saturating_sub(tally.count(assignor));
            let count = missing.div_ceil(ROUNDS).min(WAVE);
            for _ in 0..count {
                let i = next_index[a];
                next_index[a] += 1;
                let seed = base_seed + (i * ASSIGNORS.len() + a) as u64;
                wave.push(Scenario::new(seed, assignor, i % 2 == 1));
            }
        }
        if wave.is_empty() {
            break;
        }
        run_wave(&driver, wave, &mut tally);
    }
    let counts: Vec<String> = tally
        .compared
        .iter()
        .map(|(a, (n, chained))| format!("{a} {n} ({chained} chained)"))
        .collect();
    eprintln!(
        "assignor differential: cases compared with Kafka 4.4 per assignor, lists in order: {}; \
         members' user data compared: {} (base seed {base_seed}, {:.1} s; cases where Kafka threw \
         and partlog returned an error too: {:?}; {} where Kafka's sticky balance loop cycles \
         forever, not sent to Kafka: {})",
        counts.join(", "),
        tally.user_data_compared,
        started.elapsed().as_secs_f64(),
        tally.both_failed,
        tally.cycles.len(),
        tally.cycles.join(", ")
    );
    if !tally.failures.is_empty() {
        let shown: Vec<&String> = tally.failures.iter().take(5).collect();
        let record =
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("assignor-differential-failures.txt");
        let _ = std::fs::write(&record, tally.failures.join("\n"));
        panic!(
            "{} of the cases differ from Kafka (all in {}); the first:\n{}",
            tally.failures.len(),
            record.display(),
            shown
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    for assignor in ASSIGNORS {
        assert!(
            tally.count(assignor) >= target,
            "{assignor}: {} cases compared, {target} asked for",
            tally.count(assignor)
        );
    }
}

/// Topic names that collide in Java's `HashMap`, for one case: all of one hash code, sharing
/// buckets, or many (the table doubles at 13, 25 and 49 names).
fn colliding_topics(rng: &mut Rng) -> Vec<String> {
    let mut names = BTreeSet::new();
    let (count, style) = match rng.range(0, 3) {
        0 => (rng.range(2, 32), 2),
        1 => (rng.range(2, 20), 3),
        2 => (*rng.pick(&[12, 13, 14, 24, 25, 26, 48, 49, 50]), 3),
        _ => (rng.range(8, 40), 4),
    };
    let mut attempts = 0;
    while (names.len() as u64) < count && attempts < 10_000 {
        attempts += 1;
        let name = match style {
            2 => {
                let blocks = rng.range(3, 5);
                rng.same_hash_name(blocks)
            }
            3 => format!("t{}", rng.range(0, 299)),
            _ => {
                let blocks = rng.range(2, 4);
                format!("{}{}", rng.same_hash_name(blocks), rng.range(0, 2))
            }
        };
        names.insert(name);
    }
    let mut names: Vec<String> = names.into_iter().collect();
    rng.shuffle(&mut names);
    names
}

/// A member's assignment over `topics`, in an order a leader could send it: grouped by topic,
/// or interleaved.
fn random_assignment(rng: &mut Rng, topics: &[String]) -> Vec<TopicPartition> {
    let mut list: Vec<TopicPartition> = Vec::new();
    for t in topics {
        if rng.percent(80) {
            let partitions = rng.range(1, 4) as i32;
            list.extend((0..partitions).map(|p| TopicPartition::new(t.clone(), p)));
        }
    }
    if rng.percent(50) {
        rng.shuffle(&mut list);
    }
    list
}

#[test]
fn sticky_user_data_equals_kafkas_on_colliding_topic_names() {
    let Some(driver) = driver_or_skip("sticky_user_data_equals_kafkas_on_colliding_topic_names")
    else {
        return;
    };
    let mut rng = Rng(env_number("PARTLOG_ASSIGNOR_SEED", 17));
    let mut cases = Vec::new();
    let mut histories = Vec::new();
    for id in 0..2_000 {
        let topics = colliding_topics(&mut rng);
        let rounds = rng.range(1, 2);
        let history: Vec<(Vec<TopicPartition>, i32)> = (0..rounds)
            .map(|r| (random_assignment(&mut rng, &topics), 3 + r as i32))
            .collect();
        let json_history: Vec<Value> = history
            .iter()
            .map(|(list, g)| json!({"partitions": partitions_json(list), "generation": g}))
            .collect();
        cases.push(
            json!({"id": id, "client": "sticky", "topics": topics, "history": json_history})
                .to_string(),
        );
        histories.push((topics, history));
    }
    let kafka = driver.run(&cases).expect("the driver runs");
    let mut failures = Vec::new();
    for ((topics, history), line) in histories.iter().zip(&kafka) {
        let value: Value = serde_json::from_str(line).expect("driver output");
        let theirs = value["userData"].as_str().map(str::to_owned);
        let mut client = StickyAssignor::new();
        for (list, generation) in history {
            client.on_assignment(list, *generation);
        }
        let mine = client.subscription_user_data(topics).map(|d| hex(&d));
        if mine != theirs {
            failures.push(format!("{history:?}: Kafka {theirs:?}, partlog {mine:?}"));
        }
    }
    eprintln!(
        "sticky user data on colliding topic names: {} client histories compared with Kafka 4.4",
        cases.len()
    );
    assert!(
        failures.is_empty(),
        "{} differ; the first: {}",
        failures.len(),
        failures[0]
    );
}

#[test]
fn range_lists_equal_kafkas_on_colliding_topic_names() {
    let Some(driver) = driver_or_skip("range_lists_equal_kafkas_on_colliding_topic_names") else {
        return;
    };
    let mut rng = Rng(env_number("PARTLOG_ASSIGNOR_SEED", 17) ^ 0x5eed);
    let mut groups = Vec::new();
    for _ in 0..1_000 {
        let names = colliding_topics(&mut rng);
        let mut topics = PartitionsPerTopic::new();
        for t in &names {
            // Some subscribed topics the metadata lacks: they still size Kafka's HashSet.
            if rng.percent(90) {
                topics.insert(t.clone(), rng.range(1, 5) as i32);
            }
        }
        let members: Vec<MemberSubscription> = (0..rng.range(1, 4))
            .map(|m| {
                let mut subscribed: Vec<String> =
                    names.iter().filter(|_| rng.percent(70)).cloned().collect();
                rng.shuffle(&mut subscribed);
                MemberSubscription::new(format!("member-{m}"), subscribed)
            })
            .collect();
        groups.push((topics, members));
    }
    let cases: Vec<String> = groups
        .iter()
        .enumerate()
        .map(|(id, (topics, members))| common::driver::case_json(id, "range", topics, members, 0))
        .collect();
    let kafka = driver.run(&cases).expect("the driver runs");
    let mut failures = Vec::new();
    for ((topics, members), line) in groups.iter().zip(&kafka) {
        let value: Value = serde_json::from_str(line).expect("driver output");
        let ours = assign_ours("range", topics, members);
        if let Some(why) = compare(&ours, &value, members) {
            failures.push(format!("{why}\n  topics {topics:?}, members {members:?}"));
        }
    }
    eprintln!(
        "range on colliding topic names: {} groups compared with Kafka 4.4, lists in order",
        cases.len()
    );
    assert!(
        failures.is_empty(),
        "{} differ; the first: {}",
        failures.len(),
        failures[0]
    );
}

/// The bytes of `encode_sticky` itself, on a list already grouped by topic (what a member
/// receives), equal Kafka's client's for colliding names.
#[test]
fn encode_sticky_of_a_received_list_equals_kafkas_bytes() {
    let Some(driver) = driver_or_skip("encode_sticky_of_a_received_list_equals_kafkas_bytes")
    else {
        return;
    };
    let mut rng = Rng(99);
    let mut lists = Vec::new();
    let mut cases = Vec::new();
    for id in 0..500 {
        let topics = colliding_topics(&mut rng);
        let mut list = random_assignment(&mut rng, &topics);
        // Grouped by topic in first-appearance order, as the SyncGroup encoding leaves it.
        let mut first: Vec<&str> = Vec::new();
        for tp in &list {
            if !first.contains(&tp.topic.as_str()) {
                first.push(&tp.topic);
            }
        }
        let rank = |t: &str| first.iter().position(|f| *f == t);
        let mut grouped = list.clone();
        grouped.sort_by_key(|tp| rank(&tp.topic));
        list = grouped;
        let history = json!([{"partitions": partitions_json(&list), "generation": 7}]);
        cases.push(
            json!({"id": id, "client": "sticky", "topics": topics, "history": history}).to_string(),
        );
        lists.push(list);
    }
    let kafka = driver.run(&cases).expect("the driver runs");
    for (list, line) in lists.iter().zip(&kafka) {
        let value: Value = serde_json::from_str(line).expect("driver output");
        assert_eq!(
            value["userData"].as_str(),
            Some(hex(&encode_sticky(list, 7)).as_str()),
            "{list:?}"
        );
    }
}
