//! The user data the sticky assignors put in a member's next subscription, byte for byte what
//! Kafka 4.4's `StickyAssignor` and `CooperativeStickyAssignor` return from
//! `subscriptionUserData` after the same `onAssignment` (the hex strings were printed by Kafka's
//! classes; FORMAT.md §11 walks through the first).

use partlog_groups::assignor::user_data::encode_sticky;
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

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition::new(topic, partition)
}

/// Issue 30, item 2: topics that share a `HashMap` bucket ("t1" and "t19", bucket 13 of 16) come
/// out newest first, since Kafka groups with `computeIfAbsent`, which puts a new key at the head
/// of its bucket. Kafka's bytes start with "t19".
#[test]
fn sticky_user_data_lists_topics_sharing_a_bucket_newest_first() {
    let expected = "000000020003743139000000010000000000027431000000010000000000000001";
    assert_eq!(
        hex(&encode_sticky(&[tp("t1", 0), tp("t19", 0)], 1)),
        expected
    );
    let mut sticky = StickyAssignor::new();
    sticky.on_assignment(&[tp("t1", 0), tp("t19", 0)], 1);
    assert_eq!(
        sticky.subscription_user_data(&[]).map(|d| hex(&d)),
        Some(expected.into())
    );
}

/// Sixteen topics of one hash code in one assignment: the bucket becomes a red-black tree in a
/// 64-bucket table, whose root leads the iteration (Kafka's bytes).
#[test]
fn sticky_user_data_of_a_tree_bucket_equals_kafkas_bytes() {
    let order = [
        "BBAaBBAa", "AaAaBBBB", "AaAaAaAa", "BBAaAaBB", "BBBBAaAa", "AaBBBBBB", "BBBBBBAa",
        "BBAaAaAa", "AaBBAaBB", "BBBBBBBB", "AaBBAaAa", "AaAaAaBB", "BBBBAaBB", "AaAaBBAa",
        "BBAaBBBB", "AaBBBBAa",
    ];
    let list: Vec<TopicPartition> = order.iter().map(|t| tp(t, 0)).collect();
    let expected = concat!(
        "00000010",
        "0008424241614161416100000001000000000008424242424242424200000001000000000008416142424161",
        "4242000000010000000000084242424242424161000000010000000000084161424242424242000000010000",
        "0000000841614242424241610000000100000000000842424242416141610000000100000000000842424161",
        "4242424200000001000000000008424242424161424200000001000000000008424241614161424200000001",
        "0000000000084161416141614161000000010000000000084161416141614242000000010000000000084161",
        "4161424241610000000100000000000841614161424242420000000100000000000841614242416141610000",
        "000100000000000842424161424241610000000100000000",
        "00000002"
    );
    assert_eq!(hex(&encode_sticky(&list, 2)), expected);
}

/// What a member receives through SyncGroup is the leader's list grouped by topic. With 13
/// topics, that decides whether Kafka's `computeIfAbsent` doubles its table (on a call after the
/// 13th topic), so the client side records the list as received: Kafka's bytes either way.
#[test]
fn sticky_client_user_data_encodes_the_assignment_as_syncgroup_delivers_it() {
    let mut leader_list: Vec<TopicPartition> = (0..13).map(|i| tp(&format!("t{i}"), 0)).collect();
    leader_list.push(tp("t0", 1));
    let expected = concat!(
        "0000000d",
        "000274340000000100000000000274350000000100000000000374313000000001000000000002743600000001",
        "000000000002743700000001000000000003743132000000010000000000027438000000010000000000037431",
        "310000000100000000000274390000000100000000000274300000000200000000000000010002743100000001",
        "00000000000274320000000100000000000274330000000100000000",
        "00000004"
    );
    let mut sticky = StickyAssignor::new();
    sticky.on_assignment(&leader_list, 4);
    assert_eq!(
        sticky.subscription_user_data(&[]).map(|d| hex(&d)),
        Some(expected.into())
    );
    assert_ne!(
        hex(&encode_sticky(&leader_list, 4)),
        expected,
        "encoded as the leader listed it, the 14th call doubles the table and reorders"
    );
}
