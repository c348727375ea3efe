//! The sticky assignors' path for a group whose members subscribe to different topics (Kafka's
//! `GeneralAssignmentBuilder`): keep every valid owned partition, give each unassigned one to the
//! least loaded subscriber, then move partitions while that improves the balance.

use super::fast_hash::{FastMap, FastSet};
use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};

use super::owned::{MemberData, remove_first};
use super::partition_movements::PartitionMovements;
use super::user_data::DEFAULT_GENERATION;
use super::{MapOrder, MemberSubscription, TopicPartition};
use crate::Error;

fn error(reason: &'static str) -> Error {
    Error::InconsistentAssignment {
        assignor: "sticky",
        reason,
    }
}

struct Builder<'a> {
    members: &'a [&'a MemberSubscription],
    topics: &'a BTreeMap<&'a str, i32>,
    /// Each topic's subscribers, in the order Kafka visits the members.
    topic_subscribers: BTreeMap<&'a str, Vec<usize>>,
    /// Each member's subscribed topics that exist, in subscription order.
    member_topics: Vec<Vec<&'a str>>,
    /// Each member's current assignment; `None` once set aside as unable to take part in
    /// reassignment (Kafka removes it from its map).
    current: Vec<Option<Vec<TopicPartition>>>,
    owner: FastMap<TopicPartition, usize>,
    /// Members by (assignment size, member id): Kafka's `sortedCurrentSubscriptions`.
    by_load: BTreeSet<(usize, &'a str, usize)>,
    /// All partitions, topics ordered by (subscriber count, name).
    sorted_partitions: Vec<TopicPartition>,
    movements: PartitionMovements,
    revocation_required: bool,
}

/// Runs the general path. `owned` is each member's resolved previous assignment; `data` what
/// each member claimed; `iteration` the order Kafka visits the members in.
pub(crate) fn assign(
    topics: &BTreeMap<&str, i32>,
    members: &[&MemberSubscription],
    iteration: &[usize],
    owned: Vec<Vec<TopicPartition>>,
    data: &[MemberData],
    max_generation: i32,
    order: MapOrder,
) -> Result<Vec<Vec<TopicPartition>>, Error> {
    let mut topic_subscribers: BTreeMap<&str, Vec<usize>> =
        topics.keys().map(|&t| (t, Vec::new())).collect();
    let mut member_topics: Vec<Vec<&str>> = vec![Vec::new(); members.len()];
    for &m in iteration {
        for topic in &members[m].topics {
            if let Some((&t, _)) = topics.get_key_value(topic.as_str()) {
                member_topics[m].push(t);
                topic_subscribers.entry(t).or_default().push(m);
            }
        }
    }
    let mut owner = FastMap::default();
    for &m in iteration {
        for tp in &owned[m] {
            owner.insert(tp.clone(), m);
        }
    }
    let mut topic_order: Vec<&str> = topics.keys().copied().collect();
    topic_order.sort_by_key(|t| (topic_subscribers[t].len(), *t));
    let sorted_partitions = topic_order
        .iter()
        .flat_map(|&t| (0..topics[t]).map(move |p| TopicPartition::new(t, p)))
        .collect();

    let mut b = Builder {
        members,
        topics,
        topic_subscribers,
        member_topics,
        current: owned.into_iter().map(Some).collect(),
        owner,
        by_load: BTreeSet::new(),
        sorted_partitions,
        movements: PartitionMovements::new(order),
        revocation_required: false,
    };
    let previous = previous_owners(iteration, data, max_generation);
    let assigned = b.keep_subscribed(iteration);
    let unassigned = b.unassigned(assigned);
    for m in 0..members.len() {
        let key = b.key(m)?;
        b.by_load.insert(key);
    }
    b.balance(&previous, unassigned)?;
    Ok(b.current
        .into_iter()
        .map(Option::unwrap_or_default)
        .collect())
}

/// For each partition claimed by a member of an older generation, the newest such claim: the
/// owner a partition may move back to.
fn previous_owners(
    iteration: &[usize],
    data: &[MemberData],
    max_generation: i32,
) -> FastMap<TopicPartition, (usize, i32)> {
    let mut previous: FastMap<TopicPartition, (usize, i32)> = FastMap::default();
    for &m in iteration {
        let generation = match data[m].generation {
            Some(g) if g < max_generation => g,
            None if max_generation > DEFAULT_GENERATION => DEFAULT_GENERATION,
            _ => continue,
        };
        for tp in &data[m].partitions {
            match previous.get(tp) {
                Some(&(_, g)) if generation <= g => {}
                _ => {
                    previous.insert(tp.clone(), (m, generation));
                }
            }
        }
    }
    previous
}

impl<'a> Builder<'a> {
    fn size(&self, m: usize) -> Result<usize, Error> {
        self.current[m]
            .as_ref()
            .map(Vec::len)
            .ok_or_else(|| error("a member set aside from reassignment was consulted"))
    }

    fn key(&self, m: usize) -> Result<(usize, &'a str, usize), Error> {
        Ok((self.size(m)?, self.members[m].member_id.as_str(), m))
    }

    fn subscribes(&self, m: usize, topic: &str) -> bool {
        self.member_topics[m].contains(&topic)
    }

    /// Drops owned partitions of topics their owner no longer subscribes to; returns the kept ones.
    fn keep_subscribed(&mut self, iteration: &[usize]) -> Vec<TopicPartition> {
        let mut assigned = Vec::new();
        for &m in iteration {
            let Some(list) = self.current[m].as_mut() else {
                continue;
            };
            let member = self.members[m];
            list.retain(|tp| {
                if member.topics.contains(&tp.topic) {
                    assigned.push(tp.clone());
                    true
                } else {
                    self.revocation_required = true;
                    false
                }
            });
        }
        assigned
    }

    /// The partitions not in `assigned`, by Kafka's merge of two sorted lists.
    ///
    /// Kafka sorts partition ids by subtracting them, which overflows for ids (from bad user data)
    /// more than `i32::MAX` apart; that is no total order, and Java's sort may then throw or
    /// leave any order. partlog compares the ids, which agrees wherever Kafka's order is one.
    fn unassigned(&self, mut assigned: Vec<TopicPartition>) -> Vec<TopicPartition> {
        if assigned.is_empty() {
            return self.sorted_partitions.clone();
        }
        let subscribers = |tp: &TopicPartition| {
            self.topic_subscribers
                .get(tp.topic.as_str())
                .map_or(0, Vec::len)
        };
        assigned.sort_by(|a, b| {
            subscribers(a)
                .cmp(&subscribers(b))
                .then_with(|| a.topic.cmp(&b.topic))
                .then_with(|| a.partition.cmp(&b.partition))
        });
        let mut out = Vec::new();
        let mut pending = assigned.iter();
        let mut next = pending.next();
        for tp in &self.sorted_partitions {
            match next {
                Some(n) if n == tp => next = pending.next(),
                _ => out.push(tp.clone()),
            }
        }
        out
    }

    /// Gives `tp` to `m`, keeping `by_load` ordered.
    fn push(&mut self, m: usize, tp: TopicPartition) -> Result<(), Error> {
        let key = self.key(m)?;
        self.by_load.remove(&key);
        self.owner.insert(tp.clone(), m);
        self.current[m]
            .as_mut()
            .ok_or_else(|| error("assigning to a member set aside"))?
            .push(tp);
        let key = self.key(m)?;
        self.by_load.insert(key);
        Ok(())
    }

    fn least_loaded_subscriber(&self, topic: &str) -> Option<usize> {
        self.by_load
            .iter()
            .map(|&(_, _, m)| m)
            .find(|&m| self.subscribes(m, topic))
    }

    /// The most partitions `m` can hold (Kafka's `getMaxAssignmentSize`). Kafka takes the
    /// group's total when the member lists as many topics as exist, which differs from the sum
    /// only for a subscription naming a topic twice.
    fn total_of(&self, m: usize) -> usize {
        let topics = &self.member_topics[m];
        if topics.len() == self.topics.len() {
            self.topics.values().map(|&count| count as usize).sum()
        } else {
            topics.iter().map(|t| self.topics[t] as usize).sum()
        }
    }

    fn topic_movable(&self, topic: &str) -> bool {
        self.topic_subscribers
            .get(topic)
            .is_some_and(|s| s.len() >= 2)
    }

    fn member_movable(&self, m: usize) -> Result<bool, Error> {
        let list = self.current[m]
            .as_ref()
            .ok_or_else(|| error("a member set aside twice"))?;
        Ok(list.len() < self.total_of(m) || list.iter().any(|tp| self.topic_movable(&tp.topic)))
    }

    fn balance(
        &mut self,
        previous: &FastMap<TopicPartition, (usize, i32)>,
        mut unassigned: Vec<TopicPartition>,
    ) -> Result<(), Error> {
        let initializing = match self.by_load.last() {
            Some(&(size, _, _)) => size == 0,
            None => true,
        };
        for tp in &unassigned {
            if let Some(m) = self.least_loaded_subscriber(&tp.topic) {
                self.push(m, tp.clone())?;
            }
        }

        let fixed_topics: FastSet<&str> = self
            .topics
            .keys()
            .copied()
            .filter(|t| !self.topic_movable(t))
            .collect();
        self.sorted_partitions
            .retain(|tp| !fixed_topics.contains(tp.topic.as_str()));
        unassigned.retain(|tp| !fixed_topics.contains(tp.topic.as_str()));

        let mut fixed: Vec<(usize, Vec<TopicPartition>)> = Vec::new();
        for m in 0..self.members.len() {
            if !self.member_movable(m)? {
                let key = self.key(m)?;
                self.by_load.remove(&key);
                let list = self.current[m].take().unwrap_or_default();
                fixed.push((m, list));
            }
        }

        let before = self.current.clone();
        let owners_before = self.owner.clone();
        if !self.revocation_required {
            self.reassign_while_unbalanced(&unassigned, previous)?;
        }
        let sorted = std::mem::take(&mut self.sorted_partitions);
        let moved = self.reassign_while_unbalanced(&sorted, previous)?;
        self.sorted_partitions = sorted;

        if !initializing && moved && balance_score(&self.current) >= balance_score(&before) {
            self.current = before;
            self.owner = owners_before;
        }
        for (m, list) in fixed {
            self.current[m] = Some(list);
        }
        Ok(())
    }

    /// Kafka's `performReassignments`: sweeps `partitions` while the assignment is unbalanced,
    /// until a sweep moves nothing. Returns whether anything moved.
    fn reassign_while_unbalanced(
        &mut self,
        partitions: &[TopicPartition],
        previous: &FastMap<TopicPartition, (usize, i32)>,
    ) -> Result<bool, Error> {
        let mut moved_any = false;
        // Kafka's loop runs until a sweep moves nothing, and on some groups it never gets there:
        // its state comes back round. The loop is deterministic, so a repeated state at the start
        // of a sweep proves it, and partlog stops where Kafka would spin.
        let mut seen: FastSet<u64> = FastSet::default();
        loop {
            if !seen.insert(self.fingerprint()) {
                return Err(Error::BalanceLoopCycles {
                    assignor: "sticky",
                    sweeps: seen.len(),
                });
            }
            let mut moved = false;
            for tp in partitions {
                if self.is_balanced()? {
                    break;
                }
                let holder = *self
                    .owner
                    .get(tp)
                    .ok_or_else(|| error("a partition without an owner"))?;
                let holder_size = self.size(holder)?;
                if let Some(&(prev, _)) = previous.get(tp)
                    && holder_size > self.size(prev)? + 1
                {
                    self.reassign_to(tp, prev)?;
                    moved = true;
                    continue;
                }
                let mut lighter_exists = false;
                for &other in &self.topic_subscribers[tp.topic.as_str()] {
                    if holder_size > self.size(other)? + 1 {
                        lighter_exists = true;
                        break;
                    }
                }
                if lighter_exists {
                    let target = self
                        .least_loaded_subscriber(&tp.topic)
                        .ok_or_else(|| error("no subscriber to move to"))?;
                    self.reassign_to(tp, target)?;
                    moved = true;
                }
            }
            moved_any |= moved;
            if !moved {
                return Ok(moved_any);
            }
        }
    }

    /// A hash of everything that decides the balance loop's next moves: who holds what, and the
    /// movement records.
    fn fingerprint(&self) -> u64 {
        let mut state = DefaultHasher::new();
        let mut holders: Vec<(&TopicPartition, &usize)> = self.owner.iter().collect();
        holders.sort();
        holders.hash(&mut state);
        for list in &self.current {
            list.as_ref().map(Vec::len).hash(&mut state);
        }
        self.movements.fingerprint(&mut state);
        state.finish()
    }

    fn reassign_to(&mut self, tp: &TopicPartition, new: usize) -> Result<(), Error> {
        let holder = *self
            .owner
            .get(tp)
            .ok_or_else(|| error("a partition without an owner"))?;
        let to_move = self.movements.partition_to_move(tp, holder, new);
        let old = *self
            .owner
            .get(&to_move)
            .ok_or_else(|| error("a moved partition without an owner"))?;
        let old_key = self.key(old)?;
        let new_key = self.key(new)?;
        self.by_load.remove(&old_key);
        self.by_load.remove(&new_key);
        self.movements.move_partition(&to_move, old, new);
        remove_first(
            self.current[old]
                .as_mut()
                .ok_or_else(|| error("moving from a member set aside"))?,
            &to_move,
        );
        self.current[new]
            .as_mut()
            .ok_or_else(|| error("moving to a member set aside"))?
            .push(to_move.clone());
        self.owner.insert(to_move, new);
        let new_key = self.key(new)?;
        let old_key = self.key(old)?;
        self.by_load.insert(new_key);
        self.by_load.insert(old_key);
        Ok(())
    }

    /// Kafka's `isBalanced`: loads differ by at most one, or no member could take a partition
    /// from a member with at least two more.
    fn is_balanced(&self) -> Result<bool, Error> {
        let (Some(&(min, _, _)), Some(&(max, _, _))) = (self.by_load.first(), self.by_load.last())
        else {
            return Ok(true);
        };
        if min + 1 >= max {
            return Ok(true);
        }
        let mut holder_of: FastMap<&TopicPartition, usize> = FastMap::default();
        for (m, list) in self.current.iter().enumerate() {
            for tp in list.iter().flatten() {
                holder_of.insert(tp, m);
            }
        }
        for &(count, _, m) in &self.by_load {
            if count == self.total_of(m) {
                continue;
            }
            let mine = self.current[m]
                .as_ref()
                .ok_or_else(|| error("a member set aside is ranked"))?;
            for &topic in &self.member_topics[m] {
                for p in 0..self.topics[topic] {
                    let tp = TopicPartition::new(topic, p);
                    if mine.contains(&tp) {
                        continue;
                    }
                    let other = *holder_of
                        .get(&tp)
                        .ok_or_else(|| error("a subscribed partition is unassigned"))?;
                    if count + 1 < self.size(other)? {
                        return Ok(false);
                    }
                }
            }
        }
        Ok(true)
    }
}

/// Kafka's balance score: the sum over member pairs of their load difference (lower is better).
fn balance_score(assignment: &[Option<Vec<TopicPartition>>]) -> usize {
    let mut sizes: Vec<usize> = assignment.iter().flatten().map(Vec::len).collect();
    sizes.sort_unstable();
    // With sorted sizes, sum_{i<j} (s_j - s_i) = sum_j s_j * (2j - n + 1).
    let n = sizes.len() as i64;
    let score: i64 = sizes
        .iter()
        .enumerate()
        .map(|(j, &s)| s as i64 * (2 * j as i64 - n + 1))
        .sum();
    score as usize
}
