//! The user data the sticky assignors put in a member's next subscription, byte for byte what
//! Kafka 4.4's `StickyAssignor` and `CooperativeStickyAssignor` return from
//! `subscriptionUserData` after the same `onAssignment` (the hex strings were printed by Kafka's
//! classes; FORMAT.md §11 walks through the first).

use partlog_groups::assignor::{
    Assignor, CooperativeStickyAssignor, StickyAssignor, TopicPartition,
};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn assigned() -> Vec<TopicPartition> {
    vec![
        TopicPartition::new("t0", 0),
        TopicPartition::new("t0", 2),
        TopicPartition::new("t1", 1),
    ]
}

#[test]
fn sticky_user_data_equals_kafkas_bytes() {
    let mut sticky = StickyAssignor::new();
    assert_eq!(
        sticky.subscription_user_data(&[]),
        None,
        "no user data before the first assignment"
    );
    sticky.on_assignment(&assigned(), 3);
    let data = sticky
        .subscription_user_data(&["t0".into(), "t1".into()])
        .expect("user data");
    assert_eq!(
        hex(&data),
        "000000020002743000000002000000000000000200027431000000010000000100000003"
    );
}

#[test]
fn cooperative_user_data_is_the_generation() {
    let mut cooperative = CooperativeStickyAssignor::new();
    assert_eq!(
        cooperative.subscription_user_data(&[]).map(|d| hex(&d)),
        Some("ffffffff".into())
    );
    cooperative.on_assignment(&assigned(), 7);
    assert_eq!(
        cooperative.subscription_user_data(&[]).map(|d| hex(&d)),
        Some("00000007".into())
    );
}
