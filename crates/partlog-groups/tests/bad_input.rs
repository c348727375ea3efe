//! Bad input gets Kafka's behaviour, never a panic: unknown topics, duplicate member ids, owned
//! partitions of deleted topics, unparsable user data, and the group on which Kafka's own sticky
//! balance loop never returns.

mod common;

use common::driver::parse_case;
use common::{assert_assignment, member, owner, topics, tps};
use partlog_groups::Error;
use partlog_groups::assignor::{
    Assignor, CooperativeStickyAssignor, MemberSubscription, RangeAssignor, RoundRobinAssignor,
    StickyAssignor,
};

fn all_assignors() -> Vec<Box<dyn Assignor>> {
    vec![
        Box::new(RangeAssignor),
        Box::new(RoundRobinAssignor),
        Box::new(StickyAssignor::new()),
        Box::new(CooperativeStickyAssignor::new()),
    ]
}

#[test]
fn a_topic_missing_from_metadata_gives_nothing() {
    let t = topics(&[("t", 2), ("empty", 0)]);
    let m = [member("a", &["t", "ghost", "empty"]), member("b", &["t"])];
    for assignor in all_assignors() {
        let got = assignor.assign(&t, &m).expect("assigns");
        assert_assignment(&got, &[("a", tps("t", "0")), ("b", tps("t", "1"))]);
    }
}

/// As a Java `Map.put`: the last subscription under an id wins, and there is one member.
#[test]
fn a_duplicate_member_id_keeps_its_last_subscription() {
    let t = topics(&[("t", 2), ("u", 2)]);
    let m = [
        member("a", &["t"]),
        member("b", &["t"]),
        member("a", &["u"]),
    ];
    for assignor in all_assignors() {
        let got = assignor.assign(&t, &m).expect("assigns");
        assert_assignment(&got, &[("a", tps("u", "0,1")), ("b", tps("t", "0,1"))]);
    }
}

#[test]
fn owned_partitions_of_a_deleted_topic_are_dropped() {
    let t = topics(&[("t", 2)]);
    let m = [
        owner("a", &["t"], tps("", "gone-0,t-0"), 1),
        owner("b", &["t"], tps("t", "1"), 1),
    ];
    assert_assignment(
        &StickyAssignor::new().assign(&t, &m).expect("sticky"),
        &[("a", tps("t", "0")), ("b", tps("t", "1"))],
    );
    let round = CooperativeStickyAssignor::new()
        .assign_with_transfers(&t, &m)
        .expect("cooperative");
    assert_assignment(
        &round.assignment,
        &[("a", tps("t", "0")), ("b", tps("t", "1"))],
    );
    assert!(round.transferring.is_empty());
}

/// Sticky user data that does not parse is "nothing owned": the member's claims are ignored.
#[test]
fn unparsable_sticky_user_data_owns_nothing() {
    let t = topics(&[("t", 4)]);
    let garbled = MemberSubscription {
        user_data: Some(vec![0xff, 0xff, 0xff, 0xff, 1]),
        ..member("a", &["t"])
    };
    let m = [garbled, owner("b", &["t"], tps("t", "2,3"), 1)];
    assert_assignment(
        &StickyAssignor::new().assign(&t, &m).expect("sticky"),
        &[("a", tps("t", "0,1")), ("b", tps("t", "2,3"))],
    );
}

/// A cooperative member whose generation does not parse is of generation −1, and still owns
/// what its subscription lists.
#[test]
fn unparsable_cooperative_generation_is_minus_one_and_keeps_owned() {
    let t = topics(&[("t", 4)]);
    let garbled = MemberSubscription {
        owned: tps("t", "0,1,2,3"),
        user_data: Some(vec![7]),
        ..member("a", &["t"])
    };
    let m = [garbled, member("b", &["t"])];
    let round = CooperativeStickyAssignor::new()
        .assign_with_transfers(&t, &m)
        .expect("cooperative");
    assert_assignment(&round.assignment, &[("a", tps("t", "0,1")), ("b", vec![])]);
    assert_eq!(round.transferring.len(), 2);
}

/// Found by the differential test (seed 2735, round 2): Kafka 4.4's `StickyAssignor` spins in
/// its balance loop for good on this group (2 minutes without returning); partlog says so.
#[test]
fn sticky_balance_loop_that_never_returns_in_kafka_is_an_error() {
    let fixture = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/sticky_balance_loop_cycles.json"
    ))
    .expect("the committed fixture");
    let (assignor, t, m) = parse_case(fixture.trim()).expect("a driver case");
    assert_eq!(assignor, "sticky");
    match StickyAssignor::new().assign(&t, &m) {
        Err(Error::BalanceLoopCycles {
            assignor: "sticky", ..
        }) => {}
        other => panic!("expected the balance loop to be reported as cycling, got {other:?}"),
    }
}
