//! The table of expected outputs, each produced by Kafka 4.4's own assignor classes: one
//! test per row (`assignor_<row id>`), with Kafka's default `MapOrder::JavaHashMap`.

mod common;

use std::collections::BTreeMap;

use common::{assert_assignment, member, next_round, owner, static_member, topics, tps};
use partlog_groups::assignor::{
    Assignor, CooperativeAssignment, CooperativeStickyAssignor, GroupAssignment, MapOrder,
    MemberSubscription, PartitionsPerTopic, RangeAssignor, RoundRobinAssignor, StickyAssignor,
    TopicPartition,
};

fn range(t: &PartitionsPerTopic, m: &[MemberSubscription]) -> GroupAssignment {
    RangeAssignor.assign(t, m).expect("range assigns")
}

fn round_robin(t: &PartitionsPerTopic, m: &[MemberSubscription]) -> GroupAssignment {
    RoundRobinAssignor.assign(t, m).expect("roundrobin assigns")
}

fn sticky(t: &PartitionsPerTopic, m: &[MemberSubscription]) -> GroupAssignment {
    StickyAssignor::new().assign(t, m).expect("sticky assigns")
}

fn cooperative(t: &PartitionsPerTopic, m: &[MemberSubscription]) -> CooperativeAssignment {
    CooperativeStickyAssignor::new()
        .assign_with_transfers(t, m)
        .expect("cooperative-sticky assigns")
}

fn moving(default_topic: &str, list: &[(&str, &str)]) -> BTreeMap<TopicPartition, String> {
    list.iter()
        .map(|(p, m)| (tps(default_topic, p)[0].clone(), m.to_string()))
        .collect()
}

/// Two topics of two partitions and two members subscribed to both.
#[test]
fn assignor_r1() {
    let t = topics(&[("t0", 3), ("t1", 3)]);
    let m = [member("C0", &["t0", "t1"]), member("C1", &["t0", "t1"])];
    assert_assignment(
        &range(&t, &m),
        &[
            ("C0", tps("", "t0-0,t0-1,t1-0,t1-1")),
            ("C1", tps("", "t0-2,t1-2")),
        ],
    );
}

#[test]
fn assignor_r2() {
    let t = topics(&[("topic1", 3), ("topic2", 2)]);
    let m = [
        member("consumer1", &["topic1"]),
        member("consumer2", &["topic1", "topic2"]),
        member("consumer3", &["topic1"]),
    ];
    assert_assignment(
        &range(&t, &m),
        &[
            ("consumer1", tps("", "topic1-0")),
            ("consumer2", tps("", "topic1-1,topic2-0,topic2-1")),
            ("consumer3", tps("", "topic1-2")),
        ],
    );
}

#[test]
fn assignor_r3() {
    let t = topics(&[("t", 7)]);
    let m = [
        member("c0", &["t"]),
        member("c1", &["t"]),
        member("c2", &["t"]),
    ];
    assert_assignment(
        &range(&t, &m),
        &[
            ("c0", tps("t", "0,1,2")),
            ("c1", tps("t", "3,4")),
            ("c2", tps("t", "5,6")),
        ],
    );
}

fn two_topics_of_three() -> PartitionsPerTopic {
    topics(&[("topic1", 3), ("topic2", 3)])
}

/// Static members order by instance id, not member id.
#[test]
fn assignor_r4() {
    let m = [
        static_member("consumer-b", "instance1", &["topic1", "topic2"]),
        static_member("consumer-a", "instance2", &["topic1", "topic2"]),
    ];
    assert_assignment(
        &range(&two_topics_of_three(), &m),
        &[
            ("consumer-b", tps("", "topic1-0,topic1-1,topic2-0,topic2-1")),
            ("consumer-a", tps("", "topic1-2,topic2-2")),
        ],
    );
}

/// A static member comes before a dynamic one whatever their member ids.
#[test]
fn assignor_r5() {
    let m = [
        static_member("consumer-b", "instance1", &["topic1", "topic2"]),
        member("consumer-a", &["topic1", "topic2"]),
    ];
    assert_assignment(
        &range(&two_topics_of_three(), &m),
        &[
            ("consumer-b", tps("", "topic1-0,topic1-1,topic2-0,topic2-1")),
            ("consumer-a", tps("", "topic1-2,topic2-2")),
        ],
    );
}

fn three_static_one_dynamic() -> (PartitionsPerTopic, Vec<MemberSubscription>) {
    let both = ["topic1", "topic2"];
    (
        topics(&[("topic1", 5), ("topic2", 4)]),
        vec![
            static_member("consumer1", "instance1", &both),
            static_member("consumer2", "instance2", &both),
            static_member("consumer3", "instance3", &both),
            member("consumer4", &both),
        ],
    )
}

#[test]
fn assignor_r6() {
    let (t, m) = three_static_one_dynamic();
    assert_assignment(
        &range(&t, &m),
        &[
            ("consumer1", tps("", "topic1-0,topic1-1,topic2-0")),
            ("consumer2", tps("", "topic1-2,topic2-1")),
            ("consumer3", tps("", "topic1-3,topic2-2")),
            ("consumer4", tps("", "topic1-4,topic2-3")),
        ],
    );
}

#[test]
fn assignor_rr1() {
    let m = [
        member("consumer1", &["topic1", "topic2"]),
        member("consumer2", &["topic1", "topic2"]),
    ];
    assert_assignment(
        &round_robin(&two_topics_of_three(), &m),
        &[
            ("consumer1", tps("", "topic1-0,topic1-2,topic2-1")),
            ("consumer2", tps("", "topic1-1,topic2-0,topic2-2")),
        ],
    );
}

/// The cursor skips members not subscribed to a partition's topic.
#[test]
fn assignor_rr2() {
    let t = topics(&[("t0", 1), ("t1", 2), ("t2", 3)]);
    let m = [
        member("C0", &["t0"]),
        member("C1", &["t0", "t1"]),
        member("C2", &["t0", "t1", "t2"]),
    ];
    assert_assignment(
        &round_robin(&t, &m),
        &[
            ("C0", tps("", "t0-0")),
            ("C1", tps("", "t1-0")),
            ("C2", tps("", "t1-1,t2-0,t2-1,t2-2")),
        ],
    );
}

#[test]
fn assignor_rr3() {
    let t = topics(&[("topic1", 3), ("topic2", 2)]);
    let m = [
        member("consumer1", &["topic1"]),
        member("consumer2", &["topic1", "topic2"]),
        member("consumer3", &["topic1"]),
    ];
    assert_assignment(
        &round_robin(&t, &m),
        &[
            ("consumer1", tps("", "topic1-0")),
            ("consumer2", tps("", "topic1-1,topic2-0,topic2-1")),
            ("consumer3", tps("", "topic1-2")),
        ],
    );
}

#[test]
fn assignor_rr4() {
    let m = [
        static_member("consumer-b", "instance1", &["topic1", "topic2"]),
        static_member("consumer-a", "instance2", &["topic1", "topic2"]),
    ];
    assert_assignment(
        &round_robin(&two_topics_of_three(), &m),
        &[
            ("consumer-b", tps("", "topic1-0,topic1-2,topic2-1")),
            ("consumer-a", tps("", "topic1-1,topic2-0,topic2-2")),
        ],
    );
}

#[test]
fn assignor_rr5() {
    let (t, m) = three_static_one_dynamic();
    assert_assignment(
        &round_robin(&t, &m),
        &[
            ("consumer1", tps("", "topic1-0,topic1-4,topic2-3")),
            ("consumer2", tps("", "topic1-1,topic2-0")),
            ("consumer3", tps("", "topic1-2,topic2-1")),
            ("consumer4", tps("", "topic1-3,topic2-2")),
        ],
    );
}

/// The same group through range, round-robin and sticky: only sticky balances it.
#[test]
fn assignor_pr() {
    let t = topics(&[
        ("topic1", 2),
        ("topic2", 1),
        ("topic3", 2),
        ("topic4", 1),
        ("topic5", 2),
    ]);
    let all = ["topic1", "topic2", "topic3", "topic4", "topic5"];
    let odd = ["topic1", "topic3", "topic5"];
    let m = [
        member("consumer1", &all),
        member("consumer2", &odd),
        member("consumer3", &odd),
        member("consumer4", &all),
    ];
    assert_assignment(
        &range(&t, &m),
        &[
            (
                "consumer1",
                tps("", "topic1-0,topic2-0,topic3-0,topic4-0,topic5-0"),
            ),
            ("consumer2", tps("", "topic1-1,topic3-1,topic5-1")),
            ("consumer3", vec![]),
            ("consumer4", vec![]),
        ],
    );
    assert_assignment(
        &round_robin(&t, &m),
        &[
            ("consumer1", tps("", "topic1-0,topic3-0,topic5-0")),
            ("consumer2", tps("", "topic1-1,topic3-1,topic5-1")),
            ("consumer3", vec![]),
            ("consumer4", tps("", "topic2-0,topic4-0")),
        ],
    );
    assert_assignment(
        &sticky(&t, &m),
        &[
            ("consumer1", tps("", "topic2-0,topic3-0")),
            ("consumer2", tps("", "topic1-0,topic3-1")),
            ("consumer3", tps("", "topic1-1,topic5-0")),
            ("consumer4", tps("", "topic4-0,topic5-1")),
        ],
    );
}

fn four_topics_of_two() -> PartitionsPerTopic {
    topics(&[("t0", 2), ("t1", 2), ("t2", 2), ("t3", 2)])
}

const T0_T3: [&str; 4] = ["t0", "t1", "t2", "t3"];

#[test]
fn assignor_s1() {
    let m = [
        member("C0", &T0_T3),
        member("C1", &T0_T3),
        member("C2", &T0_T3),
    ];
    assert_assignment(
        &sticky(&four_topics_of_two(), &m),
        &[
            ("C0", tps("", "t0-0,t1-1,t3-0")),
            ("C1", tps("", "t0-1,t2-0,t3-1")),
            ("C2", tps("", "t1-0,t2-1")),
        ],
    );
}

/// A member leaves: the others keep what they had and split its partitions.
#[test]
fn assignor_s2() {
    let m = [
        owner("C0", &T0_T3, tps("", "t0-0,t1-1,t3-0"), 1),
        owner("C2", &T0_T3, tps("", "t1-0,t2-1"), 1),
    ];
    assert_assignment(
        &sticky(&four_topics_of_two(), &m),
        &[
            ("C0", tps("", "t0-0,t3-0,t1-1,t0-1")),
            ("C2", tps("", "t1-0,t2-1,t2-0,t3-1")),
        ],
    );
}

fn nested_topics() -> PartitionsPerTopic {
    topics(&[("t0", 1), ("t1", 2), ("t2", 3)])
}

#[test]
fn assignor_s3() {
    let m = [
        member("C0", &["t0"]),
        member("C1", &["t0", "t1"]),
        member("C2", &["t0", "t1", "t2"]),
    ];
    assert_assignment(
        &sticky(&nested_topics(), &m),
        &[
            ("C0", tps("", "t0-0")),
            ("C1", tps("", "t1-0,t1-1")),
            ("C2", tps("", "t2-0,t2-1,t2-2")),
        ],
    );
}

#[test]
fn assignor_s4() {
    let m = [
        owner("C1", &["t0", "t1"], tps("", "t1-0,t1-1"), 1),
        owner("C2", &["t0", "t1", "t2"], tps("", "t2-0,t2-1,t2-2"), 1),
    ];
    assert_assignment(
        &sticky(&nested_topics(), &m),
        &[
            ("C1", tps("", "t1-0,t1-1,t0-0")),
            ("C2", tps("", "t2-0,t2-1,t2-2")),
        ],
    );
}

#[test]
fn assignor_s5() {
    let t = topics(&[("topic1", 3), ("topic2", 2)]);
    let m = [
        member("consumer1", &["topic1"]),
        member("consumer2", &["topic1", "topic2"]),
        member("consumer3", &["topic1"]),
    ];
    assert_assignment(
        &sticky(&t, &m),
        &[
            ("consumer1", tps("", "topic1-0,topic1-2")),
            ("consumer2", tps("", "topic2-0,topic2-1")),
            ("consumer3", tps("", "topic1-1")),
        ],
    );
}

#[test]
fn assignor_s6() {
    let m = [
        member("consumer1", &["topic1", "topic2"]),
        member("consumer2", &["topic1", "topic2"]),
    ];
    let expected = [
        ("consumer1", tps("", "topic1-0,topic1-2,topic2-1")),
        ("consumer2", tps("", "topic1-1,topic2-0,topic2-2")),
    ];
    assert_assignment(&sticky(&two_topics_of_three(), &m), &expected);
    let round = cooperative(&two_topics_of_three(), &m);
    assert_assignment(&round.assignment, &expected);
    assert!(round.transferring.is_empty());
}

const TOPIC1_TOPIC2: [&str; 2] = ["topic1", "topic2"];

/// A new partition goes to the member below quota; nothing changes owner.
#[test]
fn assignor_s7() {
    let t = topics(&[("topic1", 2), ("topic2", 3)]);
    let m = [
        owner("consumer1", &TOPIC1_TOPIC2, tps("", "topic1-0,topic2-1"), 1),
        owner("consumer2", &TOPIC1_TOPIC2, tps("", "topic1-1,topic2-2"), 1),
    ];
    let round = cooperative(&t, &m);
    assert_assignment(
        &round.assignment,
        &[
            ("consumer1", tps("", "topic1-0,topic2-1,topic2-0")),
            ("consumer2", tps("", "topic1-1,topic2-2")),
        ],
    );
    assert!(round.transferring.is_empty());
}

/// A joining member waits a round for the partition taken from another; eager sticky gives it
/// at once.
#[test]
fn assignor_s8() {
    let t = topics(&[("topic1", 2), ("topic2", 2)]);
    let m = [
        owner("consumer1", &TOPIC1_TOPIC2, tps("", "topic1-0,topic2-0"), 1),
        owner("consumer2", &TOPIC1_TOPIC2, tps("", "topic1-1,topic2-1"), 1),
        owner("consumer3", &TOPIC1_TOPIC2, vec![], 1),
    ];
    let round1 = cooperative(&t, &m);
    assert_assignment(
        &round1.assignment,
        &[
            ("consumer1", tps("", "topic1-0")),
            ("consumer2", tps("", "topic1-1,topic2-1")),
            ("consumer3", vec![]),
        ],
    );
    assert_eq!(
        round1.transferring,
        moving("", &[("topic2-0", "consumer3")])
    );
    let round2 = cooperative(&t, &next_round(&m, &round1.assignment, 2));
    assert_assignment(
        &round2.assignment,
        &[
            ("consumer1", tps("", "topic1-0")),
            ("consumer2", tps("", "topic1-1,topic2-1")),
            ("consumer3", tps("", "topic2-0")),
        ],
    );
    assert_assignment(
        &sticky(&t, &m),
        &[
            ("consumer1", tps("", "topic1-0")),
            ("consumer2", tps("", "topic1-1,topic2-1")),
            ("consumer3", tps("", "topic2-0")),
        ],
    );
}

#[test]
fn assignor_s9() {
    let t = topics(&[("topic1", 2), ("topic2", 3)]);
    let m = [
        owner("consumer1", &TOPIC1_TOPIC2, tps("", "topic1-0"), 1),
        owner("consumer2", &TOPIC1_TOPIC2, tps("", "topic1-1"), 1),
        owner("consumer3", &TOPIC1_TOPIC2, vec![], 1),
    ];
    let round = cooperative(&t, &m);
    assert_assignment(
        &round.assignment,
        &[
            ("consumer1", tps("", "topic1-0,topic2-1")),
            ("consumer2", tps("", "topic1-1,topic2-2")),
            ("consumer3", tps("", "topic2-0")),
        ],
    );
    assert!(round.transferring.is_empty());
}

#[test]
fn assignor_c1() {
    let t = topics(&[("topic", 3)]);
    let m = [
        owner("consumer1", &["topic"], tps("topic", "0,1,2"), 1),
        owner("consumer2", &["topic"], vec![], 1),
    ];
    let round1 = cooperative(&t, &m);
    assert_assignment(
        &round1.assignment,
        &[("consumer1", tps("topic", "0,1")), ("consumer2", vec![])],
    );
    assert_eq!(round1.transferring, moving("topic", &[("2", "consumer2")]));
    let round2 = cooperative(&t, &next_round(&m, &round1.assignment, 2));
    assert_assignment(
        &round2.assignment,
        &[
            ("consumer1", tps("topic", "0,1")),
            ("consumer2", tps("topic", "2")),
        ],
    );
}

/// Two members of one generation claim the same partition: neither keeps it.
#[test]
fn assignor_c2() {
    let t = topics(&[("topic", 3)]);
    let m = [
        owner("consumer1", &["topic"], tps("topic", "0,1"), 1),
        owner("consumer2", &["topic"], tps("topic", "0,2"), 1),
        owner("consumer3", &["topic"], vec![], 1),
    ];
    let round1 = cooperative(&t, &m);
    assert_assignment(
        &round1.assignment,
        &[
            ("consumer1", tps("topic", "1")),
            ("consumer2", tps("topic", "2")),
            ("consumer3", vec![]),
        ],
    );
    assert_eq!(round1.transferring, moving("topic", &[("0", "consumer3")]));
    let round2 = cooperative(&t, &next_round(&m, &round1.assignment, 2));
    assert_assignment(
        &round2.assignment,
        &[
            ("consumer1", tps("topic", "1")),
            ("consumer2", tps("topic", "2")),
            ("consumer3", tps("topic", "0")),
        ],
    );
}

/// Of two claims in different generations, the higher generation's wins.
#[test]
fn assignor_c3() {
    let t = topics(&[("topic", 3), ("topic2", 3)]);
    let both = ["topic", "topic2"];
    let claimed = tps("", "topic-0,topic-2,topic2-1");
    let m = [
        owner("consumer1", &both, claimed.clone(), 10),
        owner("consumer2", &both, claimed.clone(), 9),
    ];
    let round = cooperative(&t, &m);
    assert_assignment(
        &round.assignment,
        &[
            ("consumer1", claimed),
            ("consumer2", tps("", "topic-1,topic2-0,topic2-2")),
        ],
    );
}

#[test]
fn assignor_c4() {
    let t = topics(&[("topic", 3), ("topic2", 3), ("topic3", 3)]);
    let all = ["topic", "topic2", "topic3"];
    let m = [
        owner("consumer1", &all, tps("", "topic-0,topic2-0,topic3-0"), 10),
        owner("consumer2", &all, tps("", "topic-1,topic2-1,topic3-1"), 9),
        owner("consumer3", &all, tps("", "topic2-1,topic3-0,topic3-2"), 8),
    ];
    let round = cooperative(&t, &m);
    assert_assignment(
        &round.assignment,
        &[
            ("consumer1", tps("", "topic-0,topic2-0,topic3-0")),
            ("consumer2", tps("", "topic-1,topic2-1,topic3-1")),
            ("consumer3", tps("", "topic3-2,topic-2,topic2-2")),
        ],
    );
}

/// Two members left: the remaining ones keep theirs and share the orphans.
#[test]
fn assignor_c5() {
    let t = topics(&[("t", 8)]);
    let m = [
        owner("consumer1", &["t"], tps("t", "0,1"), 1),
        owner("consumer2", &["t"], tps("t", "2,3"), 1),
    ];
    let round = cooperative(&t, &m);
    assert_assignment(
        &round.assignment,
        &[
            ("consumer1", tps("t", "0,1,4,6")),
            ("consumer2", tps("t", "2,3,5,7")),
        ],
    );
    assert!(round.transferring.is_empty());
}

#[test]
fn assignor_c6() {
    let t = topics(&[("t", 6)]);
    let mut fresh = member("c", &["t"]);
    fresh.generation = Some(-1);
    let m = [
        owner("a", &["t"], tps("t", "0,1,2,3,4,5"), 5),
        owner("b", &["t"], vec![], 5),
        fresh,
    ];
    let round1 = cooperative(&t, &m);
    assert_assignment(
        &round1.assignment,
        &[("a", tps("t", "0,1")), ("b", vec![]), ("c", vec![])],
    );
    assert_eq!(
        round1.transferring,
        moving("t", &[("2", "b"), ("3", "c"), ("4", "b"), ("5", "c")])
    );
    let round2 = cooperative(&t, &next_round(&m, &round1.assignment, 6));
    assert_assignment(
        &round2.assignment,
        &[
            ("a", tps("t", "0,1")),
            ("b", tps("t", "2,4")),
            ("c", tps("t", "3,5")),
        ],
    );
}

/// General path: a member that subscribes to less hands over a topic in two rounds.
#[test]
fn assignor_c7() {
    let t = topics(&[("t1", 3), ("t2", 3)]);
    let m = [
        owner(
            "a",
            &["t1", "t2"],
            tps("", "t1-0,t1-1,t1-2,t2-0,t2-1,t2-2"),
            4,
        ),
        owner("b", &["t1"], vec![], 4),
    ];
    let round1 = cooperative(&t, &m);
    assert_assignment(
        &round1.assignment,
        &[("a", tps("", "t2-0,t2-1,t2-2")), ("b", vec![])],
    );
    let round2 = cooperative(&t, &next_round(&m, &round1.assignment, 5));
    assert_assignment(
        &round2.assignment,
        &[
            ("a", tps("", "t2-0,t2-1,t2-2")),
            ("b", tps("", "t1-0,t1-1,t1-2")),
        ],
    );
}

#[test]
fn assignor_g1() {
    let t = topics(&[("t1", 2), ("t2", 2)]);
    let m = [
        owner("c1", &["t1", "t2"], tps("", "t1-0,t1-1"), 2),
        owner("c2", &["t2"], tps("", "t2-0,t2-1"), 2),
    ];
    assert_assignment(
        &sticky(&t, &m),
        &[("c1", tps("", "t1-0,t1-1")), ("c2", tps("", "t2-0,t2-1"))],
    );
}

#[test]
fn assignor_g2() {
    let t = topics(&[("t1", 4), ("t2", 2)]);
    let m = [
        owner("c1", &["t1", "t2"], tps("", "t1-0,t1-1"), 1),
        owner("c2", &["t1"], tps("", "t1-2,t1-3"), 1),
    ];
    let round1 = cooperative(&t, &m);
    assert_assignment(
        &round1.assignment,
        &[
            ("c1", tps("", "t1-1,t2-0,t2-1")),
            ("c2", tps("", "t1-2,t1-3")),
        ],
    );
    assert_eq!(round1.transferring, moving("", &[("t1-0", "c2")]));
    let round2 = cooperative(&t, &next_round(&m, &round1.assignment, 2));
    assert_assignment(
        &round2.assignment,
        &[
            ("c1", tps("", "t1-1,t2-0,t2-1")),
            ("c2", tps("", "t1-0,t1-2,t1-3")),
        ],
    );
}

/// An owner of everything keeps the lowest partition ids when a second member joins.
#[test]
fn assignor_tb() {
    let t = topics(&[("t1", 12), ("t2", 12)]);
    let both = ["t1", "t2"];
    let all: Vec<TopicPartition> = (0..12)
        .flat_map(|p| [TopicPartition::new("t1", p), TopicPartition::new("t2", p)])
        .collect();
    let m = [owner("c1", &both, all, 1), owner("c2", &both, vec![], 1)];
    let low: Vec<TopicPartition> = (0..6)
        .flat_map(|p| [TopicPartition::new("t1", p), TopicPartition::new("t2", p)])
        .collect();
    let high: Vec<TopicPartition> = (6..12)
        .flat_map(|p| [TopicPartition::new("t1", p), TopicPartition::new("t2", p)])
        .collect();
    assert_assignment(
        &sticky(&t, &m),
        &[("c1", low.clone()), ("c2", high.clone())],
    );
    let round1 = cooperative(&t, &m);
    assert_assignment(&round1.assignment, &[("c1", low.clone()), ("c2", vec![])]);
    let round2 = cooperative(&t, &next_round(&m, &round1.assignment, 2));
    assert_assignment(&round2.assignment, &[("c1", low), ("c2", high)]);
}

/// Which of two members owning a maximum share keeps it depends on Java's HashMap order.
#[test]
fn assignor_h1() {
    let t = topics(&[("t", 7)]);
    let m = [
        owner("a", &["t"], tps("t", "0,1,2"), 3),
        owner("p", &["t"], tps("t", "3,4,5"), 3),
        owner("z", &["t"], tps("t", "6"), 3),
    ];
    let round = cooperative(&t, &m);
    assert_assignment(
        &round.assignment,
        &[
            ("a", tps("t", "0,1")),
            ("p", tps("t", "3,4,5")),
            ("z", tps("t", "6")),
        ],
    );
    assert_eq!(round.transferring, moving("t", &[("2", "z")]));
}

#[test]
fn assignor_h2() {
    let t = topics(&[("t", 7)]);
    let m = [
        owner("a", &["t"], tps("t", "0,1,2"), 3),
        owner("b", &["t"], tps("t", "3,4,5"), 3),
        owner("z", &["t"], tps("t", "6"), 3),
    ];
    let round = cooperative(&t, &m);
    assert_assignment(
        &round.assignment,
        &[
            ("a", tps("t", "0,1,2")),
            ("b", tps("t", "3,4")),
            ("z", tps("t", "6")),
        ],
    );
    assert_eq!(round.transferring, moving("t", &[("5", "z")]));
}

/// Runs cooperative rounds until nothing moves; returns each round's result.
fn cooperative_rounds(
    t: &PartitionsPerTopic,
    members: &[MemberSubscription],
    generation: i32,
) -> Vec<CooperativeAssignment> {
    let mut rounds = Vec::new();
    let mut current = members.to_vec();
    let mut generation = generation;
    loop {
        let round = cooperative(t, &current);
        let done = round.transferring.is_empty();
        generation += 1;
        current = next_round(&current, &round.assignment, generation);
        rounds.push(round);
        if done || rounds.len() > 4 {
            return rounds;
        }
    }
}

#[test]
fn assignor_cw1() {
    let t = topics(&[("t", 6)]);
    let m = [
        owner("a", &["t"], tps("t", "0,1"), 3),
        owner("b", &["t"], tps("t", "2,3"), 3),
        owner("c", &["t"], tps("t", "4,5"), 3),
        member("d", &["t"]),
    ];
    let rounds = cooperative_rounds(&t, &m, 3);
    assert_eq!(rounds.len(), 2);
    assert_assignment(
        &rounds[0].assignment,
        &[
            ("a", tps("t", "0,1")),
            ("b", tps("t", "2,3")),
            ("c", tps("t", "4")),
            ("d", vec![]),
        ],
    );
    assert_eq!(rounds[0].transferring, moving("t", &[("5", "d")]));
    assert_assignment(
        &rounds[1].assignment,
        &[
            ("a", tps("t", "0,1")),
            ("b", tps("t", "2,3")),
            ("c", tps("t", "4")),
            ("d", tps("t", "5")),
        ],
    );
}

#[test]
fn assignor_cw2() {
    let t = topics(&[("t", 6)]);
    let m = [
        owner("a", &["t"], tps("t", "0,1,2"), 3),
        owner("b", &["t"], tps("t", "3,4,5"), 3),
        member("c", &["t"]),
    ];
    let rounds = cooperative_rounds(&t, &m, 3);
    assert_eq!(rounds.len(), 2);
    assert_assignment(
        &rounds[0].assignment,
        &[
            ("a", tps("t", "0,1")),
            ("b", tps("t", "3,4")),
            ("c", vec![]),
        ],
    );
    assert_assignment(
        &rounds[1].assignment,
        &[
            ("a", tps("t", "0,1")),
            ("b", tps("t", "3,4")),
            ("c", tps("t", "2,5")),
        ],
    );
}

/// A member left: its partitions were nobody's, so they move in one round.
#[test]
fn assignor_cw3() {
    let t = topics(&[("t", 6)]);
    let m = [
        owner("b", &["t"], tps("t", "2,3"), 3),
        owner("c", &["t"], tps("t", "4,5"), 3),
    ];
    let rounds = cooperative_rounds(&t, &m, 3);
    assert_eq!(rounds.len(), 1);
    assert_assignment(
        &rounds[0].assignment,
        &[("b", tps("t", "2,3,0")), ("c", tps("t", "4,5,1"))],
    );
}

#[test]
fn assignor_cw4() {
    let t = topics(&[("t", 10)]);
    let m = [
        owner("c1", &["t"], tps("t", "0,1,2,3,4,5,6,7,8,9"), 3),
        member("c2", &["t"]),
    ];
    let rounds = cooperative_rounds(&t, &m, 3);
    assert_eq!(rounds.len(), 2);
    assert_assignment(
        &rounds[0].assignment,
        &[("c1", tps("t", "0,1,2,3,4")), ("c2", vec![])],
    );
    assert_assignment(
        &rounds[1].assignment,
        &[("c1", tps("t", "0,1,2,3,4")), ("c2", tps("t", "5,6,7,8,9"))],
    );
}

#[test]
fn assignor_cw5() {
    let t = topics(&[("t", 10)]);
    let m = [
        owner("c1", &["t"], tps("t", "1,3,5,7,9"), 3),
        owner("c2", &["t"], tps("t", "0,2,4,6,8"), 3),
        member("c3", &["t"]),
    ];
    let rounds = cooperative_rounds(&t, &m, 3);
    assert_eq!(rounds.len(), 2);
    assert_assignment(
        &rounds[0].assignment,
        &[
            ("c1", tps("t", "1,3,5,7")),
            ("c2", tps("t", "0,2,4")),
            ("c3", vec![]),
        ],
    );
    assert_assignment(
        &rounds[1].assignment,
        &[
            ("c1", tps("t", "1,3,5,7")),
            ("c2", tps("t", "0,2,4")),
            ("c3", tps("t", "6,8,9")),
        ],
    );
}

/// H1's tie is Java's `HashMap` order: with sorted order, `a` (first by name) keeps three and
/// `p` gives one up instead.
#[test]
fn h1_tie_follows_hash_order_not_names() {
    let t = topics(&[("t", 7)]);
    let m = [
        owner("a", &["t"], tps("t", "0,1,2"), 3),
        owner("p", &["t"], tps("t", "3,4,5"), 3),
        owner("z", &["t"], tps("t", "6"), 3),
    ];
    let sorted = CooperativeStickyAssignor::with_map_order(MapOrder::Sorted)
        .assign_with_transfers(&t, &m)
        .expect("assigns");
    assert_assignment(
        &sorted.assignment,
        &[
            ("a", tps("t", "0,1,2")),
            ("p", tps("t", "3,4")),
            ("z", tps("t", "6")),
        ],
    );
    assert_eq!(sorted.transferring, moving("t", &[("5", "z")]));
}

/// Issue 30, item 1: a member's range list holds its topics in Kafka's order, a Java `HashMap`'s
/// order of the topic names ("t4" is in bucket 0, "t0" in bucket 12), not sorted order. Kafka
/// 4.4 assigns `[t4-0, t0-0]`; the list goes to the member as it is.
#[test]
fn range_lists_topics_in_java_hash_map_order() {
    let t = topics(&[("t0", 1), ("t4", 1)]);
    let assignment = range(&t, &[member("m", &["t0", "t4"])]);
    assert_eq!(assignment["m"], tps("", "t4-0, t0-0"));
}
