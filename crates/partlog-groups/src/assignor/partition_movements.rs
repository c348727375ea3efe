//! The sticky general path's record of partition movements (Kafka's `PartitionMovements`): which
//! partitions moved from which member to which, so that a later move of the same topic in the
//! opposite direction moves one of those partitions back rather than a fresh one.

use super::fast_hash::FastMap;
use std::hash::{Hash, Hasher};

use super::java_hash_map::{JavaHashSet, topic_partition_hash};
use super::{MapOrder, TopicPartition};

/// A move from member `src` to member `dst` (indices into the group's members).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct MemberPair {
    src: usize,
    dst: usize,
}

#[derive(Debug)]
pub(crate) struct PartitionMovements {
    order: MapOrder,
    by_topic: FastMap<String, FastMap<MemberPair, JavaHashSet<TopicPartition>>>,
    by_partition: FastMap<TopicPartition, MemberPair>,
}

impl PartitionMovements {
    pub(crate) fn new(order: MapOrder) -> Self {
        PartitionMovements {
            order,
            by_topic: FastMap::default(),
            by_partition: FastMap::default(),
        }
    }

    fn remove_record(&mut self, partition: &TopicPartition) -> Option<MemberPair> {
        let pair = self.by_partition.remove(partition)?;
        if let Some(pairs) = self.by_topic.get_mut(&partition.topic) {
            if let Some(set) = pairs.get_mut(&pair) {
                set.remove(partition);
                if set.is_empty() {
                    pairs.remove(&pair);
                }
            }
            if pairs.is_empty() {
                self.by_topic.remove(&partition.topic);
            }
        }
        Some(pair)
    }

    fn add_record(&mut self, partition: &TopicPartition, pair: MemberPair) {
        self.by_partition.insert(partition.clone(), pair);
        let order = self.order;
        self.by_topic
            .entry(partition.topic.clone())
            .or_default()
            .entry(pair)
            .or_insert_with(|| JavaHashSet::new(order))
            .insert(partition.clone(), topic_partition_hash(partition));
    }

    /// Records that `partition` moves from `old` to `new`; a partition moving back to where it
    /// started has no record left.
    pub(crate) fn move_partition(&mut self, partition: &TopicPartition, old: usize, new: usize) {
        match self.remove_record(partition) {
            Some(existing) => {
                if existing.src != new {
                    self.add_record(
                        partition,
                        MemberPair {
                            src: existing.src,
                            dst: new,
                        },
                    );
                }
            }
            None => self.add_record(partition, MemberPair { src: old, dst: new }),
        }
    }

    /// Feeds everything that decides later moves into `state`: each partition's move record,
    /// and each record set's iteration order and table size (which decide its first element).
    pub(crate) fn fingerprint(&self, state: &mut impl Hasher) {
        let mut records: Vec<(&TopicPartition, &MemberPair)> = self.by_partition.iter().collect();
        records.sort_by(|a, b| a.0.cmp(b.0));
        for (tp, pair) in records {
            tp.hash(state);
            pair.hash(state);
        }
        let mut sets: Vec<(&String, &MemberPair, &JavaHashSet<TopicPartition>)> = self
            .by_topic
            .iter()
            .flat_map(|(topic, pairs)| pairs.iter().map(move |(pair, set)| (topic, pair, set)))
            .collect();
        sets.sort_by(|a, b| {
            a.0.cmp(b.0)
                .then((a.1.src, a.1.dst).cmp(&(b.1.src, b.1.dst)))
        });
        for (topic, pair, set) in sets {
            topic.hash(state);
            pair.hash(state);
            set.fingerprint(state);
        }
    }

    /// The partition to move from `old` to `new` in place of `partition`: one of the same topic
    /// that earlier moved from `new` to (what was originally) `old`, if any, so the earlier move
    /// is undone instead of a second partition changing hands.
    pub(crate) fn partition_to_move(
        &self,
        partition: &TopicPartition,
        old: usize,
        new: usize,
    ) -> TopicPartition {
        let Some(pairs) = self.by_topic.get(&partition.topic) else {
            return partition.clone();
        };
        let old = self
            .by_partition
            .get(partition)
            .map_or(old, |pair| pair.src);
        match pairs
            .get(&MemberPair { src: new, dst: old })
            .and_then(|set| set.first())
        {
            Some(reverse) => reverse.clone(),
            None => partition.clone(),
        }
    }
}
