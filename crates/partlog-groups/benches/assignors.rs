//! The assignors on large groups, and Kafka's own classes on the same input:
//! `cargo bench -p partlog-groups --bench assignors`.
//!
//! - `uniform`: 1,000 members subscribed to 10 topics of 1,000 partitions (10,000 partitions),
//!   each owning a balanced share (generation 1), and one member joining. Range, sticky and
//!   cooperative-sticky (the constrained path).
//! - `general`: 200 members, each subscribed to a seeded random half of 20 topics of 100
//!   partitions (2,000 partitions), owning what sticky gave the group before the last member
//!   joined (the general path, with its balance loop).
//!
//! After criterion, the Kafka 4.4 driver (`tests/kafka/AssignorDriver.java`) times Kafka's
//! `RangeAssignor`, `StickyAssignor` and `CooperativeStickyAssignor` on the same groups, after
//! warm-up, and both times are printed side by side. Without Java the comparison is skipped.

#[path = "../tests/common/driver.rs"]
mod driver;

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::Criterion;
use partlog_groups::assignor::user_data::encode_sticky;
use partlog_groups::assignor::{
    Assignor, CooperativeStickyAssignor, GroupAssignment, MemberSubscription, PartitionsPerTopic,
    RangeAssignor, StickyAssignor, TopicPartition,
};

fn owning(
    mut member: MemberSubscription,
    owned: Vec<TopicPartition>,
    generation: i32,
) -> MemberSubscription {
    member.user_data = Some(encode_sticky(&owned, generation));
    member.owned = owned;
    member.generation = Some(generation);
    member
}

/// 1,000 members owning 10 partitions each of 10 × 1,000, and member 1,000 joining.
fn uniform_group() -> (PartitionsPerTopic, Vec<MemberSubscription>) {
    let topics: PartitionsPerTopic = (0..10).map(|t| (format!("topic-{t}"), 1_000)).collect();
    let names: Vec<String> = topics.keys().cloned().collect();
    let all: Vec<TopicPartition> = names
        .iter()
        .flat_map(|t| (0..1_000).map(move |p| TopicPartition::new(t.clone(), p)))
        .collect();
    let mut members: Vec<MemberSubscription> = all
        .chunks(10)
        .enumerate()
        .map(|(i, share)| {
            owning(
                MemberSubscription::new(format!("consumer-{i}"), names.clone()),
                share.to_vec(),
                1,
            )
        })
        .collect();
    members.push(MemberSubscription::new("consumer-1000", names));
    (topics, members)
}

/// 200 members on random halves of 20 × 100 partitions, owning sticky's assignment of the first
/// 199, and member 199 joining.
fn general_group() -> (PartitionsPerTopic, Vec<MemberSubscription>) {
    let topics: PartitionsPerTopic = (0..20).map(|t| (format!("topic-{t}"), 100)).collect();
    let names: Vec<String> = topics.keys().cloned().collect();
    let mut state = 17u64;
    let mut next = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        state >> 33
    };
    let mut members: Vec<MemberSubscription> = (0..200)
        .map(|i| {
            let mut subscribed: Vec<String> =
                names.iter().filter(|_| next() % 2 == 0).cloned().collect();
            if subscribed.is_empty() {
                subscribed.push(names[i % names.len()].clone());
            }
            MemberSubscription::new(format!("consumer-{i}"), subscribed)
        })
        .collect();
    let before: GroupAssignment = StickyAssignor::new()
        .assign(&topics, &members[..199])
        .expect("the setup group assigns");
    for m in members.iter_mut().take(199) {
        let owned = before.get(&m.member_id).cloned().unwrap_or_default();
        *m = owning(m.clone(), owned, 1);
    }
    (topics, members)
}

/// One benchmarked assignment: a group, an assignor, and the input.
struct BenchCase<'a> {
    group: &'static str,
    name: &'static str,
    assignor: &'a dyn Assignor,
    topics: &'a PartitionsPerTopic,
    members: &'a [MemberSubscription],
}

fn case<'a>(
    group: &'static str,
    name: &'static str,
    assignor: &'a dyn Assignor,
    topics: &'a PartitionsPerTopic,
    members: &'a [MemberSubscription],
) -> BenchCase<'a> {
    BenchCase {
        group,
        name,
        assignor,
        topics,
        members,
    }
}

fn time_ours(
    assignor: &dyn Assignor,
    topics: &PartitionsPerTopic,
    members: &[MemberSubscription],
    runs: u32,
) -> Duration {
    let start = Instant::now();
    for _ in 0..runs {
        black_box(assignor.assign(topics, members).expect("assigns"));
    }
    start.elapsed() / runs
}

fn main() {
    let (uniform_topics, uniform_members) = uniform_group();
    let (general_topics, general_members) = general_group();
    let (sticky, cooperative) = (StickyAssignor::new(), CooperativeStickyAssignor::new());
    let cases = [
        case(
            "uniform",
            "range",
            &RangeAssignor,
            &uniform_topics,
            &uniform_members,
        ),
        case(
            "uniform",
            "sticky",
            &sticky,
            &uniform_topics,
            &uniform_members,
        ),
        case(
            "uniform",
            "cooperative-sticky",
            &cooperative,
            &uniform_topics,
            &uniform_members,
        ),
        case(
            "general",
            "sticky",
            &sticky,
            &general_topics,
            &general_members,
        ),
        case(
            "general",
            "cooperative-sticky",
            &cooperative,
            &general_topics,
            &general_members,
        ),
    ];

    let mut criterion = Criterion::default().sample_size(10).configure_from_args();
    for BenchCase {
        group,
        name,
        assignor,
        topics,
        members,
    } in &cases
    {
        criterion.bench_function(&format!("{group}/{name}"), |b| {
            b.iter(|| black_box(assignor.assign(topics, members).expect("assigns")))
        });
    }
    criterion.final_summary();

    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let kafka = match driver::KafkaDriver::locate(out_dir) {
        Ok(kafka) => kafka,
        Err(why) => {
            println!("Kafka comparison skipped: {why}");
            return;
        }
    };
    println!(
        "\n{:<8} {:<20} {:>14} {:>14}",
        "group", "assignor", "partlog", "Kafka 4.4"
    );
    let mut uniform_range = None;
    for (
        i,
        BenchCase {
            group,
            name,
            assignor,
            topics,
            members,
        },
    ) in cases.iter().enumerate()
    {
        let (group, name, assignor, topics, members) =
            (*group, *name, *assignor, *topics, *members);
        let runs = if group == "uniform" { 10 } else { 3 };
        let ours = time_ours(assignor, topics, members, runs);
        let line = driver::case_json(i, name, topics, members, runs);
        let theirs = match kafka.run(&[line]) {
            Ok(lines) => serde_json::from_str::<serde_json::Value>(&lines[0])
                .ok()
                .and_then(|v| v.get("nanosPerRun").and_then(serde_json::Value::as_u64))
                .map_or_else(
                    || "failed".to_owned(),
                    |n| format!("{:.2?}", Duration::from_nanos(n)),
                ),
            Err(why) => format!("failed: {why}"),
        };
        if (group, name) == ("uniform", "range") {
            uniform_range = Some(ours);
        }
        let ratio = match (group, uniform_range) {
            ("uniform", Some(range)) if name != "range" => {
                format!("  ({:.1}x range)", ours.as_secs_f64() / range.as_secs_f64())
            }
            _ => String::new(),
        };
        println!(
            "{group:<8} {name:<20} {:>14} {theirs:>14}{ratio}",
            format!("{ours:.2?}")
        );
    }
}
