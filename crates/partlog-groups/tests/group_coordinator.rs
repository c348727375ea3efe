//! The classic group coordinator (issue 34, Kafka ports 6–14), on a real `partlog::Log` in a
//! temporary directory and partlog's manual clock: no sleeps, the tests move the clock and call
//! `tick`. Tests are named after Kafka's (`ClassicGroupTest`, `GroupMetadataManagerTest`), in
//! snake case; delays are Kafka's test delays in ms.

use std::sync::Arc;

use partlog::unstable::{Clock, ManualClock};
use partlog::{Log, LogConfig, ReadBound};
use partlog_groups::Error;
use partlog_groups::group::GroupCoordinator;
use partlog_groups::group::classic::{ClassicGroup, ClassicMember, GroupState};
use partlog_groups::group::coordinator::{
    GroupConfig, JoinGroupRequest, LeavingMember, SyncGroupRequest,
};
use partlog_groups::group::pending::{JoinGroupResponse, Pending, SyncGroupResponse};
use partlog_groups::offsets::log::offsets_log_config;
use partlog_groups::offsets::records::{GroupMetadataValue, OffsetsKey};
use partlog_groups::offsets::store::{OffsetStore, OffsetStoreConfig};

const T0: i64 = 1_700_000_000_000;
const DELAY: i64 = 3_000;

struct Context {
    _dir: tempfile::TempDir,
    clock: Arc<ManualClock>,
    log: Arc<Log>,
    coordinator: GroupCoordinator<Arc<Log>>,
}

impl Context {
    fn new() -> Self {
        Self::with(GroupConfig::default())
    }

    fn with(config: GroupConfig) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(T0));
        let log_config = offsets_log_config(LogConfig::builder().clock(clock.clone())).unwrap();
        let log = Arc::new(Log::open(dir.path(), log_config).unwrap());
        let store = OffsetStore::open(
            Arc::clone(&log),
            OffsetStoreConfig::default(),
            clock.clone(),
        )
        .unwrap();
        Context {
            _dir: dir,
            clock,
            log,
            coordinator: GroupCoordinator::new(store, config, 7),
        }
    }

    fn sleep(&mut self, ms: i64) {
        self.clock.advance(ms);
        self.coordinator.tick().unwrap();
    }

    /// Lets the initial delayed join of members that joined together complete: the delay,
    /// then its re-armed remainder (the rebalance timeout 5000 less the delay).
    fn settle(&mut self) {
        self.sleep(DELAY);
        self.sleep(5_000 - DELAY);
    }

    fn join(&mut self, request: JoinGroupRequest) -> Pending<JoinGroupResponse> {
        self.coordinator.join(request)
    }

    fn group(&self) -> &ClassicGroup {
        self.coordinator
            .store()
            .group("group-id")
            .expect("the group")
    }

    /// The group records in the log, decoded (`None`: a tombstone).
    fn group_records(&self) -> Vec<Option<GroupMetadataValue>> {
        self.log
            .records(0, ReadBound::LogEnd)
            .filter_map(|r| {
                let r = r.unwrap();
                match OffsetsKey::decode(&r.key.unwrap()).unwrap() {
                    OffsetsKey::GroupMetadata { .. } => {
                        Some(r.value.map(|v| GroupMetadataValue::decode(&v).unwrap()))
                    }
                    _ => None,
                }
            })
            .collect()
    }

    fn sync(
        &mut self,
        member_id: &str,
        generation: i32,
        assignments: Vec<(String, Vec<u8>)>,
    ) -> Pending<SyncGroupResponse> {
        self.coordinator.sync(SyncGroupRequest {
            group_id: "group-id".into(),
            member_id: member_id.into(),
            instance_id: None,
            generation,
            protocol_type: None,
            protocol: None,
            assignments,
        })
    }

    fn heartbeat(&mut self, member_id: &str, generation: i32) -> Result<(), Error> {
        self.coordinator
            .heartbeat("group-id", member_id, None, generation)
    }

    /// `n` dynamic members join an empty group and complete the initial delayed join; the
    /// leader syncs. Returns the member ids (leader first) and the generation.
    fn stable_group(&mut self, n: usize) -> (Vec<String>, i32) {
        let joins: Vec<_> = (0..n).map(|_| self.join(request())).collect();
        self.settle();
        let responses: Vec<JoinGroupResponse> = joins
            .iter()
            .map(|j| j.try_take().expect("joined"))
            .collect();
        let leader = responses[0].leader.clone();
        let generation = responses[0].generation;
        let mut ids: Vec<String> = responses.iter().map(|r| r.member_id.clone()).collect();
        ids.sort_by_key(|id| *id != leader);
        let assignments = ids
            .iter()
            .map(|id| (id.clone(), format!("a-{id}").into_bytes()))
            .collect();
        let synced = self.sync(&leader, generation, assignments);
        assert_eq!(synced.try_take().unwrap().error, None);
        assert_eq!(self.group().state, GroupState::Stable);
        (ids, generation)
    }
}

fn protocols(names: &[&str]) -> Vec<(String, Vec<u8>)> {
    names
        .iter()
        .map(|n| ((*n).to_owned(), vec![0, 1]))
        .collect()
}

fn request() -> JoinGroupRequest {
    let mut r = JoinGroupRequest::new("group-id", "consumer", protocols(&["range"]));
    r.session_timeout_ms = 10_000;
    r.rebalance_timeout_ms = 5_000;
    r
}

fn rejoin(member_id: &str) -> JoinGroupRequest {
    JoinGroupRequest {
        member_id: member_id.into(),
        ..request()
    }
}

/// A rejoin with changed metadata, which starts a rebalance in a Stable group.
fn changed(member_id: &str) -> JoinGroupRequest {
    JoinGroupRequest {
        protocols: vec![("range".into(), vec![7])],
        ..rejoin(member_id)
    }
}

fn static_request(instance: &str) -> JoinGroupRequest {
    JoinGroupRequest {
        instance_id: Some(instance.into()),
        ..request()
    }
}

fn error_of(pending: &Pending<JoinGroupResponse>) -> Option<Error> {
    pending.try_take().expect("answered").error
}

// 6. State transitions.

#[test]
fn test_state_transitions() {
    use GroupState::*;
    let legal = [
        (Stable, PreparingRebalance),
        (Stable, Dead),
        (CompletingRebalance, PreparingRebalance),
        (PreparingRebalance, Dead),
        (PreparingRebalance, Empty),
        (Empty, Dead),
        (CompletingRebalance, Stable),
        (Empty, PreparingRebalance),
        (PreparingRebalance, CompletingRebalance),
        (Dead, Dead),
    ];
    let illegal = [
        (Empty, Stable),
        (Stable, Stable),
        (Empty, CompletingRebalance),
        (PreparingRebalance, PreparingRebalance),
        (PreparingRebalance, Stable),
        (CompletingRebalance, CompletingRebalance),
        (Dead, Stable),
        (Dead, Empty),
        (Dead, PreparingRebalance),
        (Dead, CompletingRebalance),
    ];
    for (from, to) in legal {
        assert!(from.can_transition_to(to), "{from:?} -> {to:?}");
    }
    for (from, to) in illegal {
        assert!(!from.can_transition_to(to), "{from:?} -> {to:?}");
    }
    let mut g = ClassicGroup::new("g");
    assert!(
        !g.transition_to(Stable, 0),
        "refused, and the group stays Empty"
    );
    assert_eq!(g.state, Empty);
}

#[test]
fn test_can_rebalance() {
    let mut g = ClassicGroup::new("g");
    g.add(ClassicMember::new("m", "consumer", protocols(&["range"])));
    assert!(g.transition_to(GroupState::PreparingRebalance, 0));
    assert!(!g.can_rebalance(), "PreparingRebalance");
    g.init_next_generation(0);
    assert!(g.can_rebalance(), "CompletingRebalance");
    assert!(g.transition_to(GroupState::Stable, 0));
    assert!(g.can_rebalance(), "Stable");
    assert!(g.transition_to(GroupState::Dead, 0));
    assert!(!g.can_rebalance(), "Dead");
}

// 7. Protocol selection.

#[test]
fn test_select_protocol() {
    let mut g = ClassicGroup::new("g");
    g.add(ClassicMember::new(
        "m1",
        "consumer",
        protocols(&["range", "roundrobin"]),
    ));
    g.add(ClassicMember::new(
        "m2",
        "consumer",
        protocols(&["roundrobin", "range"]),
    ));
    let either = g.select_protocol().unwrap();
    assert!(either == "range" || either == "roundrobin", "{either}");
    g.add(ClassicMember::new(
        "m3",
        "consumer",
        protocols(&["roundrobin", "range"]),
    ));
    assert_eq!(g.select_protocol().as_deref(), Some("roundrobin"));
}

#[test]
fn test_select_protocol_chooses_compatible_protocol() {
    let mut g = ClassicGroup::new("g");
    g.add(ClassicMember::new(
        "m1",
        "consumer",
        protocols(&["range", "roundrobin"]),
    ));
    g.add(ClassicMember::new(
        "m2",
        "consumer",
        protocols(&["roundrobin", "foo"]),
    ));
    assert_eq!(g.select_protocol().as_deref(), Some("roundrobin"));
}

// 8. Generations and leaders.

#[test]
fn test_init_next_generation() {
    let mut g = ClassicGroup::new("g");
    let mut m = ClassicMember::new("m", "consumer", protocols(&["roundrobin"]));
    m.rebalance_timeout_ms = 1000;
    g.add(m);
    assert!(g.transition_to(GroupState::PreparingRebalance, 0));
    g.init_next_generation(0);
    assert_eq!(g.generation, 1);
    assert_eq!(g.protocol.as_deref(), Some("roundrobin"));
    assert_eq!(g.state, GroupState::CompletingRebalance);

    let mut empty = ClassicGroup::new("e");
    assert!(empty.transition_to(GroupState::PreparingRebalance, 0));
    empty.init_next_generation(0);
    assert_eq!(empty.generation, 1);
    assert_eq!(empty.protocol, None);
    assert_eq!(empty.state, GroupState::Empty);
}

#[test]
fn test_elect_new_joined_leader() {
    let mut ctx = Context::new();
    let (ids, generation) = ctx.stable_group(2);
    // Only the follower rejoins (with new metadata, which starts a rebalance): it becomes the
    // leader of the next generation.
    let follower = ctx.join(changed(&ids[1]));
    assert_eq!(ctx.group().state, GroupState::PreparingRebalance);
    assert_eq!(
        ctx.heartbeat(&ids[0], generation),
        Err(Error::RebalanceInProgress)
    );
    ctx.sleep(5_000);
    let response = follower.try_take().unwrap();
    assert_eq!(response.leader, ids[1]);
    assert_eq!(response.generation, generation + 1);
    assert_eq!(
        ctx.group().members.len(),
        1,
        "the leader did not rejoin and left"
    );
}

// 9. The initial delay.

#[test]
fn test_delay_initial_rebalance_by_group_initial_rebalance_delay_on_empty_group() {
    let mut ctx = Context::new();
    let first = ctx.join(request());
    ctx.sleep(DELAY / 2);
    assert!(!first.is_completed());
    ctx.sleep(DELAY / 2 + 1);
    assert_eq!(error_of(&first), None);
}

#[test]
fn test_reset_rebalance_delay_when_new_member_joins_group_during_initial_rebalance() {
    let mut ctx = Context::new();
    let r = JoinGroupRequest {
        rebalance_timeout_ms: (3 * DELAY) as i32,
        ..request()
    };
    let first = ctx.join(r.clone());
    ctx.sleep(DELAY - 1);
    let second = ctx.join(r);
    ctx.sleep(2);
    ctx.sleep(DELAY / 2 + 1);
    assert!(
        !first.is_completed() && !second.is_completed(),
        "waiting at 1.5 x delay + 2"
    );
    ctx.sleep(DELAY / 2);
    assert!(
        first.is_completed() && second.is_completed(),
        "done at 2 x delay + 2"
    );
}

#[test]
fn test_delay_rebalance_upto_rebalance_timeout() {
    let mut ctx = Context::new();
    let r = JoinGroupRequest {
        rebalance_timeout_ms: (2 * DELAY) as i32,
        ..request()
    };
    let first = ctx.join(r.clone());
    let second = ctx.join(r.clone());
    ctx.sleep(DELAY + 1);
    let third = ctx.join(r);
    ctx.sleep(DELAY - 1);
    assert!(
        !first.is_completed() && !second.is_completed() && !third.is_completed(),
        "waiting at 2 x delay"
    );
    ctx.sleep(1);
    for p in [first, second, third] {
        assert_eq!(error_of(&p), None, "done at 2 x delay + 1");
    }
}

// 10. Join errors and capacity.

#[test]
fn test_join_group_unknown_member_new_group() {
    let mut ctx = Context::new();
    assert_eq!(
        error_of(&ctx.join(rejoin("member-id"))),
        Some(Error::UnknownMemberId)
    );
}

#[test]
fn test_join_group_with_empty_group_protocol() {
    let mut ctx = Context::new();
    let r = JoinGroupRequest {
        protocols: Vec::new(),
        ..request()
    };
    assert_eq!(
        error_of(&ctx.join(r)),
        Some(Error::InconsistentGroupProtocol)
    );
}

#[test]
fn test_join_group_inconsistent_group_protocol() {
    let mut ctx = Context::new();
    let first = ctx.join(request());
    let other = JoinGroupRequest {
        protocols: protocols(&["roundrobin"]),
        ..request()
    };
    assert_eq!(
        error_of(&ctx.join(other)),
        Some(Error::InconsistentGroupProtocol)
    );
    let other_type = JoinGroupRequest {
        protocol_type: "connect".into(),
        ..request()
    };
    assert_eq!(
        error_of(&ctx.join(other_type)),
        Some(Error::InconsistentGroupProtocol)
    );
    assert_eq!(
        error_of(&ctx.join(JoinGroupRequest {
            group_id: String::new(),
            ..request()
        })),
        Some(Error::InvalidGroupId)
    );
    assert_eq!(
        error_of(&ctx.join(JoinGroupRequest {
            session_timeout_ms: 5_999,
            ..request()
        })),
        Some(Error::InvalidSessionTimeout)
    );
    ctx.settle();
    assert_eq!(error_of(&first), None);
}

#[test]
fn test_last_joining_members_are_kicked_out_when_rejoining_group_with_max_size() {
    let mut ctx = Context::new();
    let (ids, _) = ctx.stable_group(12);
    // group.max.size drops to 10 under a group of 12: a coordinator with the new limit over
    // the same log loads the group Stable with its 12 members.
    let store = OffsetStore::open(
        Arc::clone(&ctx.log),
        OffsetStoreConfig::default(),
        ctx.clock.clone(),
    )
    .unwrap();
    ctx.coordinator = GroupCoordinator::new(
        store,
        GroupConfig {
            max_size: 10,
            ..GroupConfig::default()
        },
        1,
    );
    assert_eq!(ctx.group().members.len(), 12);
    let joins: Vec<_> = ids.iter().map(|id| ctx.join(rejoin(id))).collect();
    for (i, j) in joins.iter().enumerate() {
        let expected = if i < 10 {
            None
        } else {
            Some(Error::GroupMaxSizeReached)
        };
        assert_eq!(error_of(j), expected, "joiner {i}");
    }
    assert_eq!(ctx.group().members.len(), 10);
    assert_eq!(ctx.group().state, GroupState::CompletingRebalance);
}

// 11. Completing the join phase.

#[test]
fn test_complete_join_remove_not_yet_rejoined_dynamic_members() {
    let mut ctx = Context::new();
    let (ids, _) = ctx.stable_group(2);
    let second = ctx.join(changed(&ids[1]));
    ctx.sleep(5_000);
    let response = second.try_take().unwrap();
    assert_eq!(response.generation, 2);
    assert_eq!(
        ctx.group()
            .members
            .iter()
            .map(|m| m.member_id.clone())
            .collect::<Vec<_>>(),
        vec![ids[1].clone()]
    );
}

#[test]
fn test_complete_join_phase_no_members_rejoined_extends_join_phase() {
    let mut ctx = Context::new();
    let r = |instance: &str| JoinGroupRequest {
        instance_id: Some(instance.into()),
        ..request()
    };
    let a = ctx.join(r("a"));
    let b = ctx.join(r("b"));
    ctx.settle();
    let (a, b) = (a.try_take().unwrap(), b.try_take().unwrap());
    ctx.sync(
        &a.leader,
        a.generation,
        vec![(a.member_id.clone(), vec![]), (b.member_id.clone(), vec![])],
    );
    // A static member triggers a rebalance by changing its protocols, then nobody rejoins.
    let changed = JoinGroupRequest {
        member_id: b.member_id.clone(),
        protocols: vec![("range".into(), vec![9])],
        ..r("b")
    };
    let b2 = ctx.join(changed);
    assert_eq!(ctx.group().state, GroupState::PreparingRebalance);
    // b's join is parked: b rejoined. Leave b so that nobody waits, keeping a (static).
    ctx.coordinator
        .leave(
            "group-id",
            &[LeavingMember {
                member_id: b.member_id.clone(),
                instance_id: None,
            }],
        )
        .unwrap();
    assert_eq!(error_of(&b2), Some(Error::UnknownMemberId));
    ctx.sleep(5_000);
    assert_eq!(
        ctx.group().state,
        GroupState::PreparingRebalance,
        "the join phase is extended"
    );
    assert_eq!(ctx.group().members.len(), 1, "the static member stays");
}

#[test]
fn test_join_group_existing_member_does_not_trigger_rebalance_in_stable_state() {
    let mut ctx = Context::new();
    let (ids, generation) = ctx.stable_group(2);
    let follower = ctx
        .join(rejoin(&ids[1]))
        .try_take()
        .expect("answered at once");
    assert_eq!(follower.error, None);
    assert_eq!(follower.generation, generation);
    assert_eq!(ctx.group().state, GroupState::Stable);
}

#[test]
fn test_join_group_as_existing_leader_triggers_rebalance_in_stable_state() {
    let mut ctx = Context::new();
    let (ids, _) = ctx.stable_group(2);
    let leader = ctx.join(rejoin(&ids[0]));
    assert!(!leader.is_completed());
    assert_eq!(ctx.group().state, GroupState::PreparingRebalance);
}

#[test]
fn test_generation_id_increments_on_rebalance() {
    let mut ctx = Context::new();
    let (ids, generation) = ctx.stable_group(1);
    assert_eq!(generation, 1);
    let again = ctx.join(rejoin(&ids[0]));
    let response = again
        .try_take()
        .expect("the only member rejoined: the join completes");
    assert_eq!(response.generation, 2);
}

// 12. Heartbeats and sessions.

#[test]
fn test_heartbeat_errors() {
    let mut ctx = Context::new();
    assert_eq!(
        ctx.heartbeat("unknown", 1),
        Err(Error::UnknownMemberId),
        "no group"
    );
    let (ids, generation) = ctx.stable_group(2);
    assert_eq!(ctx.heartbeat(&ids[1], generation), Ok(()));
    assert_eq!(
        ctx.heartbeat(&ids[1], generation + 1),
        Err(Error::IllegalGeneration)
    );
    assert_eq!(
        ctx.heartbeat("unknown", generation),
        Err(Error::UnknownMemberId)
    );
    assert_eq!(
        ctx.heartbeat("", generation).unwrap_err().kafka_code(),
        Some(25)
    );
    let _leader = ctx.join(rejoin(&ids[0]));
    assert_eq!(
        ctx.heartbeat(&ids[1], generation),
        Err(Error::RebalanceInProgress)
    );
    ctx.coordinator
        .store_mut()
        .group_mut("group-id")
        .unwrap()
        .transition_to(GroupState::Dead, 0);
    assert_eq!(
        ctx.heartbeat(&ids[1], generation),
        Err(Error::CoordinatorNotAvailable)
    );
}

#[test]
fn test_classic_group_member_session_timeout() {
    let mut ctx = Context::new();
    let (ids, generation) = ctx.stable_group(1);
    ctx.sleep(10_000);
    assert_eq!(
        ctx.heartbeat(&ids[0], generation),
        Err(Error::UnknownMemberId)
    );
}

#[test]
fn test_classic_group_member_heartbeat_maintains_session() {
    let mut ctx = Context::new();
    let (ids, generation) = ctx.stable_group(1);
    for _ in 0..6 {
        ctx.sleep(5_000);
        assert_eq!(ctx.heartbeat(&ids[0], generation), Ok(()));
    }
}

#[test]
fn test_rebalance_times_out_when_sync_request_is_not_received_from_followers() {
    let mut ctx = Context::new();
    let joins: Vec<_> = (0..3).map(|_| ctx.join(request())).collect();
    ctx.settle();
    let responses: Vec<_> = joins.iter().map(|j| j.try_take().unwrap()).collect();
    let leader = responses[0].leader.clone();
    let generation = responses[0].generation;
    let followers: Vec<String> = responses
        .iter()
        .map(|r| r.member_id.clone())
        .filter(|m| *m != leader)
        .collect();
    let synced = ctx.sync(&leader, generation, vec![]);
    assert_eq!(synced.try_take().unwrap().error, None);
    ctx.sleep(5_000);
    assert_eq!(
        ctx.heartbeat(&leader, generation),
        Err(Error::RebalanceInProgress)
    );
    for f in &followers {
        assert_eq!(ctx.heartbeat(f, generation), Err(Error::UnknownMemberId));
    }
}

// 13. Sync and static membership.

#[test]
fn test_sync_group_follower_after_leader() {
    let mut ctx = Context::new();
    let a = ctx.join(request());
    let b = ctx.join(request());
    ctx.settle();
    let (a, b) = (a.try_take().unwrap(), b.try_take().unwrap());
    let (leader, follower) = if a.member_id == a.leader {
        (a, b)
    } else {
        (b, a)
    };
    let leader_sync = ctx.sync(
        &leader.member_id,
        1,
        vec![
            (leader.member_id.clone(), vec![1]),
            (follower.member_id.clone(), vec![2]),
        ],
    );
    assert_eq!(leader_sync.try_take().unwrap().assignment, vec![1]);
    let follower_sync = ctx.sync(&follower.member_id, 1, vec![]);
    assert_eq!(follower_sync.try_take().unwrap().assignment, vec![2]);
    // The assignment is the group's record.
    let record = ctx.group_records().pop().unwrap().unwrap();
    assert_eq!(record.generation, 1);
    assert_eq!(record.members.len(), 2);
    assert_eq!(
        record
            .members
            .iter()
            .find(|m| m.member_id == follower.member_id)
            .unwrap()
            .assignment,
        vec![2]
    );
}

#[test]
fn test_sync_group_leader_after_follower() {
    let mut ctx = Context::new();
    let a = ctx.join(request());
    let b = ctx.join(request());
    ctx.settle();
    let (a, b) = (a.try_take().unwrap(), b.try_take().unwrap());
    let (leader, follower) = if a.member_id == a.leader {
        (a, b)
    } else {
        (b, a)
    };
    let follower_sync = ctx.sync(&follower.member_id, 1, vec![]);
    assert!(
        !follower_sync.is_completed(),
        "parked until the leader's assignment"
    );
    ctx.sync(
        &leader.member_id,
        1,
        vec![(follower.member_id.clone(), vec![2])],
    );
    assert_eq!(follower_sync.try_take().unwrap().assignment, vec![2]);
    assert_eq!(ctx.group().state, GroupState::Stable);
}

#[test]
fn test_sync_group_from_illegal_generation() {
    let mut ctx = Context::new();
    let a = ctx.join(request());
    ctx.settle();
    let a = a.try_take().unwrap();
    assert_eq!(
        ctx.sync(&a.member_id, 2, vec![]).try_take().unwrap().error,
        Some(Error::IllegalGeneration)
    );
}

#[test]
fn test_sync_group_protocol_name_is_inconsistent() {
    let mut ctx = Context::new();
    let a = ctx.join(request());
    ctx.settle();
    let a = a.try_take().unwrap();
    let sync = ctx.coordinator.sync(SyncGroupRequest {
        group_id: "group-id".into(),
        member_id: a.member_id.clone(),
        instance_id: None,
        generation: 1,
        protocol_type: Some("consumer".into()),
        protocol: Some("roundrobin".into()),
        assignments: vec![],
    });
    assert_eq!(
        sync.try_take().unwrap().error,
        Some(Error::InconsistentGroupProtocol)
    );
}

/// A Stable group of two static members, "leader" and "follower"; their join responses.
fn static_group(ctx: &mut Context) -> (JoinGroupResponse, JoinGroupResponse) {
    let a = ctx.join(static_request("leader-instance"));
    let b = ctx.join(static_request("follower-instance"));
    ctx.settle();
    let (a, b) = (a.try_take().unwrap(), b.try_take().unwrap());
    assert_eq!(a.leader, a.member_id);
    ctx.sync(
        &a.member_id,
        a.generation,
        vec![
            (a.member_id.clone(), vec![1]),
            (b.member_id.clone(), vec![2]),
        ],
    );
    assert_eq!(ctx.group().state, GroupState::Stable);
    (a, b)
}

#[test]
fn test_static_member_rejoin_with_known_member_id() {
    let mut ctx = Context::new();
    let (_, follower) = static_group(&mut ctx);
    let again = ctx.join(JoinGroupRequest {
        member_id: follower.member_id.clone(),
        ..static_request("follower-instance")
    });
    let response = again.try_take().expect("answered at once");
    assert_eq!(response.error, None);
    assert_eq!(response.member_id, follower.member_id);
    assert_eq!(response.generation, follower.generation);
    assert_eq!(ctx.group().state, GroupState::Stable);
}

#[test]
fn test_static_member_fence_duplicate_rejoined_follower() {
    let mut ctx = Context::new();
    let (_, follower) = static_group(&mut ctx);
    // A new instance of the follower joins with no member id: it replaces the old one.
    let replaced = ctx
        .join(static_request("follower-instance"))
        .try_take()
        .unwrap();
    assert_eq!(replaced.error, None);
    assert_ne!(replaced.member_id, follower.member_id);
    // The old one is fenced.
    let old = ctx.join(JoinGroupRequest {
        member_id: follower.member_id.clone(),
        ..static_request("follower-instance")
    });
    assert_eq!(error_of(&old), Some(Error::FencedInstanceId));
    assert_eq!(
        ctx.coordinator.heartbeat(
            "group-id",
            &follower.member_id,
            Some("follower-instance"),
            follower.generation
        ),
        Err(Error::FencedInstanceId)
    );
}

#[test]
fn test_replace_static_member_in_stable_state_no_error() {
    let mut ctx = Context::new();
    let (leader, _) = static_group(&mut ctx);
    let replaced = ctx
        .join(static_request("leader-instance"))
        .try_take()
        .unwrap();
    assert_eq!(replaced.error, None);
    assert_eq!(replaced.generation, leader.generation, "nothing rebalances");
    assert!(
        replaced.skip_assignment,
        "a returning static leader skips the assignment"
    );
    assert_eq!(replaced.members.len(), 2);
    assert_eq!(
        replaced.leader, replaced.member_id,
        "KIP-814: the returning static leader is named leader (and skips the assignment)"
    );
    assert_ne!(replaced.member_id, leader.member_id);
    assert_eq!(
        ctx.group().leader.as_deref(),
        Some(replaced.member_id.as_str())
    );
    assert_eq!(ctx.group().state, GroupState::Stable);
    let record = ctx.group_records().pop().unwrap().unwrap();
    assert!(
        record
            .members
            .iter()
            .any(|m| m.member_id == replaced.member_id),
        "the new id is persisted"
    );
}

// 14. Leave and expiry.

#[test]
fn test_valid_leave_group() {
    let mut ctx = Context::new();
    let (ids, _) = ctx.stable_group(1);
    let results = ctx
        .coordinator
        .leave(
            "group-id",
            &[LeavingMember {
                member_id: ids[0].clone(),
                instance_id: None,
            }],
        )
        .unwrap();
    assert_eq!(results[0].1, Ok(()));
    assert_eq!(
        ctx.group().state,
        GroupState::Empty,
        "the rebalance of no one completes at once"
    );
    assert_eq!(
        ctx.group_records().pop().unwrap().unwrap().members.len(),
        0,
        "the empty group's record"
    );
}

#[test]
fn test_leave_group_unknown_member_id_existing_group() {
    let mut ctx = Context::new();
    ctx.stable_group(1);
    let results = ctx
        .coordinator
        .leave(
            "group-id",
            &[LeavingMember {
                member_id: "unknown".into(),
                instance_id: None,
            }],
        )
        .unwrap();
    assert_eq!(results[0].1, Err(Error::UnknownMemberId));
    assert_eq!(
        ctx.coordinator.leave("missing", &[]),
        Err(Error::UnknownMemberId)
    );
}

#[test]
fn test_static_members_valid_batch_leave_group() {
    let mut ctx = Context::new();
    let (leader, follower) = static_group(&mut ctx);
    let results = ctx
        .coordinator
        .leave(
            "group-id",
            &[
                LeavingMember {
                    member_id: String::new(),
                    instance_id: Some("leader-instance".into()),
                },
                LeavingMember {
                    member_id: follower.member_id.clone(),
                    instance_id: Some("follower-instance".into()),
                },
                LeavingMember {
                    member_id: "other".into(),
                    instance_id: Some("unknown-instance".into()),
                },
            ],
        )
        .unwrap();
    assert_eq!(
        results.iter().map(|r| r.1.clone()).collect::<Vec<_>>(),
        vec![Ok(()), Ok(()), Err(Error::UnknownMemberId)]
    );
    assert!(ctx.group().member(&leader.member_id).is_none());
    assert_eq!(ctx.group().state, GroupState::Empty);
}

#[test]
fn test_pending_member_batch_leave_group() {
    let mut ctx = Context::with(GroupConfig {
        require_member_id: true,
        ..GroupConfig::default()
    });
    let (ids, _) = ctx.stable_group_two_step(1);
    let pending = ctx.join(request()).try_take().unwrap();
    assert_eq!(pending.error, Some(Error::MemberIdRequired));
    assert_eq!(pending.error.as_ref().unwrap().kafka_code(), Some(79));
    let results = ctx
        .coordinator
        .leave(
            "group-id",
            &[LeavingMember {
                member_id: pending.member_id.clone(),
                instance_id: None,
            }],
        )
        .unwrap();
    assert_eq!(results[0].1, Ok(()));
    assert_eq!(
        ctx.group().state,
        GroupState::Stable,
        "no rebalance for a pending member"
    );
    assert!(ctx.group().pending_members.is_empty());
    assert!(ctx.group().has_member(&ids[0]));
}

impl Context {
    /// As `stable_group`, with the two-step join on.
    fn stable_group_two_step(&mut self, n: usize) -> (Vec<String>, i32) {
        let ids: Vec<String> = (0..n)
            .map(|_| {
                let first = self.join(request()).try_take().unwrap();
                assert_eq!(first.error, Some(Error::MemberIdRequired));
                first.member_id
            })
            .collect();
        let joins: Vec<_> = ids.iter().map(|id| self.join(rejoin(id))).collect();
        self.settle();
        let responses: Vec<_> = joins.iter().map(|j| j.try_take().unwrap()).collect();
        self.sync(&responses[0].leader, responses[0].generation, vec![]);
        (ids, responses[0].generation)
    }
}

#[test]
fn test_new_member_join_expiration() {
    let mut ctx = Context::new();
    let (ids, _) = ctx.stable_group(1);
    // The member rejoins (rebalance timeout 5 min) and a new one joins, then never rejoins
    // after the first member leaves it waiting: the new member expires at the join timeout.
    let long = |r: JoinGroupRequest| JoinGroupRequest {
        rebalance_timeout_ms: 600_000,
        session_timeout_ms: 10_000,
        ..r
    };
    let new_member = ctx.join(long(request()));
    assert_eq!(ctx.group().state, GroupState::PreparingRebalance);
    let new_id = ctx
        .group()
        .members
        .iter()
        .find(|m| m.is_new)
        .unwrap()
        .member_id
        .clone();
    // Keep the old member alive without rejoining.
    for _ in 0..59 {
        ctx.sleep(5_000);
        let _ = ctx.heartbeat(&ids[0], 1);
    }
    assert!(!new_member.is_completed());
    ctx.sleep(5_000);
    assert_eq!(
        error_of(&new_member),
        Some(Error::UnknownMemberId),
        "expired at 5 min"
    );
    assert!(!ctx.group().has_member(&new_id));
}

#[test]
fn test_heartbeat_expiration_should_remove_pending_member() {
    let mut ctx = Context::with(GroupConfig {
        require_member_id: true,
        ..GroupConfig::default()
    });
    let first = ctx.join(request()).try_take().unwrap();
    assert_eq!(first.error, Some(Error::MemberIdRequired));
    assert!(ctx.group().pending_members.contains(&first.member_id));
    ctx.sleep(10_000);
    assert!(ctx.group().pending_members.is_empty());
    assert_eq!(
        error_of(&ctx.join(rejoin(&first.member_id))),
        Some(Error::UnknownMemberId)
    );
}

/// The group record written at a sync is what a reopened store loads: the members, protocol
/// and generation, Stable.
#[test]
fn group_record_is_replayed_on_open() {
    let mut ctx = Context::new();
    let (ids, generation) = ctx.stable_group(2);
    let store = OffsetStore::open(
        Arc::clone(&ctx.log),
        OffsetStoreConfig::default(),
        ctx.clock.clone(),
    )
    .unwrap();
    let group = store.group("group-id").unwrap();
    assert_eq!(group.state, GroupState::Stable);
    assert_eq!(group.generation, generation);
    assert_eq!(group.protocol.as_deref(), Some("range"));
    let mut loaded: Vec<_> = group
        .members
        .iter()
        .map(|m| (m.member_id.clone(), m.assignment.clone()))
        .collect();
    loaded.sort();
    let mut expected: Vec<_> = ids
        .iter()
        .map(|id| (id.clone(), format!("a-{id}").into_bytes()))
        .collect();
    expected.sort();
    assert_eq!(loaded, expected);
    assert_eq!(ctx.clock.now_ms(), T0 + 5_000);
}
