//! [`Consumer`]: Kafka's consumer over a [`GroupRouter`]'s engine: `subscribe` (the classic
//! group protocol, the client's assignors run by the leader) or `assign`, `poll`, commits,
//! positions, and [`GroupMetadata`] for `send_offsets_to_transaction`.
//!
//! No thread runs behind a consumer: `poll` sends its heartbeats, its auto-commits, its joins
//! and syncs, and checks `max.poll.interval.ms`, on the engine's clock. A consumer that stops
//! polling is removed by the coordinator's timers (session, rebalance timeout), which the
//! router runs on the engine's pool. `poll(timeout)` waits in real time for records or for the
//! group's answer; with a manual clock, move the clock and call the router's `tick`.
//!
//! | module | what it owns |
//! | --- | --- |
//! | [`config`] | [`ConsumerConfig`] |
//! | `membership` | join, sync, heartbeat, leave, and the rebalance listener's calls |
//! | `leader` | the leader's assignment, and its check of a cooperative one |
//! | `fetch` | positions (committed, reset), reads, commits |
//! | `transactional` | [`SendOffsetsToTransaction`] for the engine's producer |

pub mod config;
mod fetch;
mod leader;
mod membership;
mod transactional;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use partlog::unstable::Clock;

pub use self::config::{AutoOffsetReset, ConsumerConfig, IsolationLevel};
pub use self::leader::validate_cooperative_assignment;
use self::membership::Phase;
pub use self::transactional::SendOffsetsToTransaction;
use crate::Error;
use crate::assignor::{
    Assignor, CooperativeStickyAssignor, RangeAssignor, RebalanceProtocol, TopicPartition,
};
use crate::router::GroupRouter;

/// A consumer's group membership, as `send_offsets_to_transaction` fences by it (KIP-447):
/// Kafka's `ConsumerGroupMetadata`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadata {
    /// The group.
    pub group_id: String,
    /// The generation the consumer joined, −1 when none.
    pub generation: i32,
    /// Its member id, empty when none.
    pub member_id: String,
    /// Its `group.instance.id`.
    pub group_instance_id: Option<String>,
}

impl GroupMetadata {
    /// A group with no member: the commit is checked as an admin's (generation −1).
    pub fn new(group_id: impl Into<String>) -> Self {
        GroupMetadata {
            group_id: group_id.into(),
            generation: -1,
            member_id: String::new(),
            group_instance_id: None,
        }
    }
}

/// What a consumer tells the application when its partitions change (Kafka's
/// `ConsumerRebalanceListener`). Every method defaults to nothing.
pub trait RebalanceListener: Send {
    /// These partitions stop being the consumer's; they were committed first when auto-commit
    /// is on. EAGER revokes everything before each rebalance, COOPERATIVE only what moved.
    fn on_partitions_revoked(&mut self, partitions: &[TopicPartition]) {
        let _ = partitions;
    }

    /// These partitions are the consumer's now (only the added ones under COOPERATIVE).
    fn on_partitions_assigned(&mut self, partitions: &[TopicPartition]) {
        let _ = partitions;
    }

    /// These partitions were lost without a revocation (the member was removed, or
    /// `max.poll.interval.ms` passed): another member may own them already, so nothing was
    /// committed.
    fn on_partitions_lost(&mut self, partitions: &[TopicPartition]) {
        let _ = partitions;
    }
}

/// A listener that does nothing.
impl RebalanceListener for () {}

/// One record `poll` returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerRecord {
    /// Its topic.
    pub topic: String,
    /// Its partition.
    pub partition: i32,
    /// Its offset.
    pub offset: i64,
    /// Its timestamp.
    pub timestamp: i64,
    /// Its key.
    pub key: Option<Vec<u8>>,
    /// Its value.
    pub value: Option<Vec<u8>>,
    /// Its headers.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

/// A position moved by `auto.offset.reset` because the committed offset was out of the log's
/// range: reported by [`Consumer::take_offset_resets`], never silent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetReset {
    /// The partition.
    pub partition: TopicPartition,
    /// The committed offset, out of range.
    pub from: i64,
    /// Where the consumer starts instead.
    pub to: i64,
}

/// What the consumer reads.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Source {
    None,
    Subscribed(Vec<String>),
    Assigned,
}

/// Kafka's consumer over an engine's topics and groups. See the module docs.
pub struct Consumer {
    router: Arc<GroupRouter>,
    config: ConsumerConfig,
    clock: Arc<dyn Clock>,
    assignors: Vec<Box<dyn Assignor + Send>>,
    protocol: RebalanceProtocol,
    source: Source,
    listener: Box<dyn RebalanceListener>,
    member_id: String,
    generation: i32,
    group_protocol: Option<String>,
    phase: Phase,
    rejoin_needed: bool,
    assigned: BTreeSet<TopicPartition>,
    positions: BTreeMap<TopicPartition, i64>,
    resets: Vec<OffsetReset>,
    last_poll_ms: i64,
    next_heartbeat_ms: i64,
    /// The group shard's rebalance notice at the last heartbeat: a change means a join phase
    /// started since, and the member heartbeats at once.
    seen_rebalance_notice: u64,
    next_auto_commit_ms: i64,
    next_partition: usize,
    closed: bool,
}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer")
            .field("config", &self.config)
            .field("member_id", &self.member_id)
            .field("generation", &self.generation)
            .field("assigned", &self.assigned)
            .finish_non_exhaustive()
    }
}

impl Consumer {
    /// A consumer with Kafka's default `partition.assignment.strategy`, `[range,
    /// cooperative-sticky]` (so EAGER: range supports nothing else).
    ///
    /// # Errors
    /// As [`with_assignors`](Self::with_assignors).
    pub fn new(router: &Arc<GroupRouter>, config: ConsumerConfig) -> Result<Consumer, Error> {
        Self::with_assignors(
            router,
            config,
            vec![
                Box::new(RangeAssignor),
                Box::new(CooperativeStickyAssignor::new()),
            ],
        )
    }

    /// A consumer with the assignors `assignors` (`partition.assignment.strategy`, preferred
    /// first). The rebalance protocol is the highest one every assignor supports.
    ///
    /// # Errors
    /// `IllegalState` for no assignor, or assignors with no protocol in common.
    pub fn with_assignors(
        router: &Arc<GroupRouter>,
        config: ConsumerConfig,
        assignors: Vec<Box<dyn Assignor + Send>>,
    ) -> Result<Consumer, Error> {
        let protocol = common_protocol(&assignors)?;
        let clock = Arc::clone(router.engine().clock());
        let now = clock.now_ms();
        Ok(Consumer {
            router: Arc::clone(router),
            next_auto_commit_ms: now.saturating_add(config.auto_commit_interval_ms),
            config,
            clock,
            assignors,
            protocol,
            source: Source::None,
            listener: Box::new(()),
            member_id: String::new(),
            generation: -1,
            group_protocol: None,
            phase: Phase::Unjoined,
            rejoin_needed: false,
            assigned: BTreeSet::new(),
            positions: BTreeMap::new(),
            resets: Vec::new(),
            last_poll_ms: now,
            next_heartbeat_ms: now,
            seen_rebalance_notice: 0,
            next_partition: 0,
            closed: false,
        })
    }

    /// The settings.
    pub fn config(&self) -> &ConsumerConfig {
        &self.config
    }

    /// The rebalance protocol the assignors agree on.
    pub fn rebalance_protocol(&self) -> RebalanceProtocol {
        self.protocol
    }

    /// Subscribes to `topics` through the group (`group.id` needed); the group's assignment
    /// arrives from `poll`, and `listener` hears of every change.
    ///
    /// # Errors
    /// `IllegalState` without a `group.id`, or once closed.
    pub fn subscribe(
        &mut self,
        topics: &[&str],
        listener: impl RebalanceListener + 'static,
    ) -> Result<(), Error> {
        self.check_open()?;
        self.group_id()?;
        if self.source == Source::Assigned {
            self.assigned.clear();
            self.positions.clear();
        }
        self.source = Source::Subscribed(topics.iter().map(|t| (*t).to_owned()).collect());
        self.listener = Box::new(listener);
        self.rejoin_needed = true;
        Ok(())
    }

    /// Reads `partitions` without a group (Kafka's `assign`): commits, if any, go as an
    /// admin's (generation −1). Leaves the group first when subscribed.
    ///
    /// # Errors
    /// `IllegalState` once closed; the leave's errors.
    pub fn assign(&mut self, partitions: &[TopicPartition]) -> Result<(), Error> {
        self.check_open()?;
        if matches!(self.source, Source::Subscribed(_)) {
            self.leave_group()?;
        }
        self.source = Source::Assigned;
        let wanted: BTreeSet<TopicPartition> = partitions.iter().cloned().collect();
        self.positions.retain(|tp, _| wanted.contains(tp));
        self.assigned = wanted;
        Ok(())
    }

    /// The partitions the consumer reads now.
    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.assigned.iter().cloned().collect()
    }

    /// Kafka's `poll`: heartbeats, auto-commits, rejoins as needed, then returns up to
    /// `max.poll.records` records of the assigned partitions, waiting up to `timeout` (real
    /// time) for some.
    ///
    /// # Errors
    /// `IllegalState` without a subscription or assignment; `NoOffsetForPartition`;
    /// `FencedInstanceId`; an assignor's error for the leader (a cooperative assignment that
    /// moves an owned partition at once among them); the logs' errors.
    pub fn poll(&mut self, timeout: Duration) -> Result<Vec<ConsumerRecord>, Error> {
        self.check_open()?;
        if self.source == Source::None {
            return Err(Error::IllegalState {
                why: "poll without a subscription or an assignment: subscribe or assign first"
                    .to_owned(),
            });
        }
        let deadline = Instant::now() + timeout;
        self.check_poll_interval()?;
        loop {
            if matches!(self.source, Source::Subscribed(_)) {
                self.maybe_auto_commit();
                self.heartbeat_if_due()?;
                self.advance_membership()?;
            }
            let records = self.fetch_records()?;
            if !records.is_empty() {
                return Ok(records);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(records);
            }
            // Nothing to wake on across logs and the group: look again shortly.
            std::thread::park_timeout((deadline - now).min(Duration::from_millis(5)));
        }
    }

    /// Moves `partition`'s position to `offset`: the next `poll` reads from there.
    ///
    /// # Errors
    /// `IllegalState` for a partition not assigned.
    pub fn seek(&mut self, partition: &TopicPartition, offset: i64) -> Result<(), Error> {
        if !self.assigned.contains(partition) {
            return Err(not_assigned(partition));
        }
        self.positions.insert(partition.clone(), offset);
        Ok(())
    }

    /// The offset of the next record `poll` returns for `partition`, resolved now (committed
    /// offset or `auto.offset.reset`) if it has none yet.
    ///
    /// # Errors
    /// `IllegalState` for a partition not assigned; the resolution's errors.
    pub fn position(&mut self, partition: &TopicPartition) -> Result<i64, Error> {
        if !self.assigned.contains(partition) {
            return Err(not_assigned(partition));
        }
        if let Some(position) = self.positions.get(partition) {
            return Ok(*position);
        }
        self.resolve_positions()?;
        self.positions
            .get(partition)
            .copied()
            .ok_or(Error::UnstableOffsetCommit)
    }

    /// The group's committed offsets of `partitions` (`None`: none committed); fetched with
    /// `require_stable` under `read_committed`.
    ///
    /// # Errors
    /// `IllegalState` without a `group.id`; `UnstableOffsetCommit` (88) while a transaction
    /// holds one; the store's errors.
    pub fn committed(
        &self,
        partitions: &[TopicPartition],
    ) -> Result<BTreeMap<TopicPartition, Option<i64>>, Error> {
        let group = self.group_id()?.to_owned();
        let stable = self.config.isolation_level == IsolationLevel::ReadCommitted;
        let fetched = self.router.with_group(&group, |shard| {
            shard.store().fetch(&group, partitions, stable)
        })?;
        fetched
            .into_iter()
            .map(|(tp, result)| Ok((tp, result.map(|f| (f.offset >= 0).then_some(f.offset))?)))
            .collect()
    }

    /// The consumer's group membership, for `send_offsets_to_transaction`.
    ///
    /// # Errors
    /// `IllegalState` without a `group.id`.
    pub fn group_metadata(&self) -> Result<GroupMetadata, Error> {
        Ok(GroupMetadata {
            group_id: self.group_id()?.to_owned(),
            generation: self.generation,
            member_id: self.member_id.clone(),
            group_instance_id: self.config.group_instance_id.clone(),
        })
    }

    /// The positions moved by `auto.offset.reset` from an out-of-range committed offset since
    /// the last call.
    pub fn take_offset_resets(&mut self) -> Vec<OffsetReset> {
        std::mem::take(&mut self.resets)
    }

    /// Commits (auto-commit on), revokes, and leaves the group (a static member stays, as in
    /// Kafka, until its session ends). Later calls fail with `IllegalState`.
    ///
    /// # Errors
    /// The final commit's or the leave's error; the consumer is closed either way.
    pub fn close(&mut self) -> Result<(), Error> {
        if self.closed {
            return Ok(());
        }
        let mut result = Ok(());
        if matches!(self.source, Source::Subscribed(_)) {
            if self.config.enable_auto_commit && self.generation >= 0 {
                result = self.commit_sync(None);
            }
            let revoked: Vec<TopicPartition> = self.assigned.iter().cloned().collect();
            if !revoked.is_empty() {
                self.listener.on_partitions_revoked(&revoked);
            }
            if self.config.group_instance_id.is_none() {
                let left = self.leave_group();
                result = result.and(left);
            }
        }
        self.closed = true;
        result
    }

    fn check_open(&self) -> Result<(), Error> {
        if self.closed {
            return Err(Error::IllegalState {
                why: "the consumer is closed: create a new one".to_owned(),
            });
        }
        Ok(())
    }

    fn group_id(&self) -> Result<&str, Error> {
        self.config
            .group_id
            .as_deref()
            .ok_or_else(|| Error::IllegalState {
                why: "the consumer has no group.id: set it to subscribe, commit or fetch offsets"
                    .to_owned(),
            })
    }
}

fn not_assigned(partition: &TopicPartition) -> Error {
    Error::IllegalState {
        why: format!("{partition} is not assigned to this consumer"),
    }
}

/// The highest protocol every assignor supports.
fn common_protocol(assignors: &[Box<dyn Assignor + Send>]) -> Result<RebalanceProtocol, Error> {
    if assignors.is_empty() {
        return Err(Error::IllegalState {
            why: "partition.assignment.strategy is empty: give at least one assignor".to_owned(),
        });
    }
    let all = |p: RebalanceProtocol| {
        assignors
            .iter()
            .all(|a| a.supported_protocols().contains(&p))
    };
    if all(RebalanceProtocol::Cooperative) {
        Ok(RebalanceProtocol::Cooperative)
    } else if all(RebalanceProtocol::Eager) {
        Ok(RebalanceProtocol::Eager)
    } else {
        Err(Error::IllegalState {
            why: "the assignors of partition.assignment.strategy support no rebalance protocol \
                  in common"
                .to_owned(),
        })
    }
}
