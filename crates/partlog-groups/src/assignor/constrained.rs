//! The sticky assignors' path for a group whose members all subscribe to the same topics
//! (Kafka's `ConstrainedAssignmentBuilder`): keep what members own up to their quota, then deal
//! the rest round-robin.

use super::fast_hash::{FastMap, FastSet};
use std::collections::{BTreeMap, VecDeque};

use super::{MemberSubscription, TopicPartition};
use crate::Error;

/// The constrained path's result: each member's partitions (by index), and the partitions that
/// change owner (to their new owner's index).
pub(crate) struct Constrained {
    pub assignment: Vec<Vec<TopicPartition>>,
    pub transferring: BTreeMap<TopicPartition, usize>,
}

struct Builder<'a> {
    multiply_claimed: &'a FastSet<TopicPartition>,
    maybe_revoked: FastMap<TopicPartition, usize>,
    assignment: Vec<Vec<TopicPartition>>,
    transferring: BTreeMap<TopicPartition, usize>,
    min_quota: usize,
    max_quota: usize,
    expected_over: usize,
    over: usize,
    /// Members below `min_quota`.
    under: Vec<usize>,
    /// Members at `min_quota` that may still take one more.
    at_min: VecDeque<usize>,
}

fn error(reason: &'static str) -> Error {
    Error::InconsistentAssignment {
        assignor: "sticky",
        reason,
    }
}

/// Runs the constrained path. `owned` is each member's resolved previous assignment,
/// `iteration` the order Kafka visits the members in.
pub(crate) fn assign(
    topics: &BTreeMap<&str, i32>,
    members: &[&MemberSubscription],
    iteration: &[usize],
    owned: &[Vec<TopicPartition>],
    multiply_claimed: &FastSet<TopicPartition>,
) -> Result<Constrained, Error> {
    let total: usize = topics.values().map(|&c| c as usize).sum();
    let n = members.len();
    let mut b = Builder {
        multiply_claimed,
        maybe_revoked: FastMap::default(),
        assignment: vec![Vec::new(); n],
        transferring: BTreeMap::new(),
        min_quota: total / n,
        max_quota: total.div_ceil(n),
        expected_over: total % n,
        over: 0,
        under: Vec::new(),
        at_min: VecDeque::new(),
    };
    let assigned = b.keep_owned(iteration, owned);
    let unassigned = unassigned_partitions(topics, assigned);
    b.under
        .sort_by(|&x, &y| members[x].member_id.cmp(&members[y].member_id));
    b.at_min
        .make_contiguous()
        .sort_by(|&x, &y| members[x].member_id.cmp(&members[y].member_id));
    b.deal(&unassigned)?;
    b.verify()?;
    Ok(Constrained {
        assignment: b.assignment,
        transferring: b.transferring,
    })
}

impl Builder<'_> {
    /// Keeps each member's owned partitions, lowest partition id first, up to its quota.
    fn keep_owned(
        &mut self,
        iteration: &[usize],
        owned: &[Vec<TopicPartition>],
    ) -> Vec<TopicPartition> {
        let mut assigned = Vec::new();
        for &m in iteration {
            let mut own: Vec<TopicPartition> = owned[m]
                .iter()
                .filter(|tp| !self.multiply_claimed.contains(*tp))
                .cloned()
                .collect();
            own.sort_by(|a, b| {
                a.partition
                    .cmp(&b.partition)
                    .then_with(|| a.topic.cmp(&b.topic))
            });
            let keep = if own.len() < self.min_quota {
                self.under.push(m);
                own.len()
            } else if own.len() >= self.max_quota && self.over < self.expected_over {
                self.over += 1;
                if self.over == self.expected_over {
                    self.at_min.clear();
                }
                self.max_quota
            } else {
                if self.over < self.expected_over {
                    self.at_min.push_back(m);
                }
                self.min_quota
            };
            for tp in own.drain(keep..) {
                self.maybe_revoked.insert(tp, m);
            }
            assigned.extend(own.iter().cloned());
            self.assignment[m] = own;
        }
        assigned
    }

    fn give(&mut self, tp: &TopicPartition, m: usize) -> usize {
        self.assignment[m].push(tp.clone());
        let revoked_elsewhere = self.maybe_revoked.get(tp).is_some_and(|&owner| owner != m);
        if revoked_elsewhere || self.multiply_claimed.contains(tp) {
            self.transferring.insert(tp.clone(), m);
        }
        self.assignment[m].len()
    }

    /// Deals `unassigned` to the members under quota in turn, then one each to members at
    /// `min_quota`, as Kafka's `assignRoundRobin` walks its linked lists.
    fn deal(&mut self, unassigned: &[TopicPartition]) -> Result<(), Error> {
        // A cursor into `under` standing in for Kafka's list iterator: `next` is the index of
        // the element it returns next, `last` the one it returned last.
        let mut next = 0usize;
        let mut last: Option<usize>;
        for tp in unassigned {
            let m = if next < self.under.len() {
                last = Some(next);
                next += 1;
                self.under[next - 1]
            } else if self.under.is_empty() && self.at_min.is_empty() {
                return Err(error("no more unfilled members to assign partitions to"));
            } else if self.under.is_empty() {
                last = None;
                self.at_min
                    .pop_front()
                    .ok_or_else(|| error("no member at the minimum quota"))?
            } else {
                next = 1;
                last = Some(0);
                self.under[0]
            };
            let count = self.give(tp, m);
            if count == self.min_quota {
                let at = last
                    .take()
                    .ok_or_else(|| error("iterator removal without a current member"))?;
                self.under.remove(at);
                next = at;
                self.at_min.push_back(m);
            } else if count == self.max_quota {
                self.over += 1;
            }
        }
        Ok(())
    }

    fn verify(&self) -> Result<(), Error> {
        if self.under.is_empty() {
            return Ok(());
        }
        if self.over != self.expected_over {
            return Err(error(
                "fewer members than expected took more than the minimum quota",
            ));
        }
        if self
            .under
            .iter()
            .any(|&m| self.assignment[m].len() != self.min_quota)
        {
            return Err(error("a member ended below the minimum quota"));
        }
        Ok(())
    }
}

/// All partitions of `topics` (by topic name, then id) that `assigned` does not hold, found by
/// Kafka's merge of two sorted lists (which assumes `assigned` names only existing partitions).
fn unassigned_partitions(
    topics: &BTreeMap<&str, i32>,
    mut assigned: Vec<TopicPartition>,
) -> Vec<TopicPartition> {
    let mut out = Vec::new();
    assigned.sort();
    let mut pending = assigned.iter();
    let mut next = pending.next();
    for (&topic, &count) in topics {
        for p in 0..count {
            match next {
                Some(tp) if tp.topic == topic && tp.partition == p => next = pending.next(),
                _ => out.push(TopicPartition::new(topic, p)),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unassigned_skips_assigned_partitions_in_order() {
        let topics = BTreeMap::from([("a", 2), ("b", 2)]);
        let left = unassigned_partitions(
            &topics,
            vec![TopicPartition::new("b", 0), TopicPartition::new("a", 1)],
        );
        assert_eq!(
            left,
            vec![TopicPartition::new("a", 0), TopicPartition::new("b", 1)]
        );
    }
}
