//! One group's committed (or pending) offsets, by topic and then by partition id.
//!
//! Hashed, not ordered, and the topic stored once: a fetch and the replay of every commit
//! record look partitions up one by one, and a B-tree keyed by `(topic, partition)` made the
//! fetch of 1,000 partitions slower than half of a `HashMap`'s lookups and the replay of a
//! partition twice as slow as reading it (benches/README.md). The few places that walk the
//! offsets get them sorted, so that what they write and return stays in order.

use crate::assignor::TopicPartition;
use crate::assignor::fast_hash::FastMap;
use crate::offsets::records::OffsetCommitValue;

/// A committed value and the offset of the record that holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stored {
    pub(crate) value: OffsetCommitValue,
    pub(crate) record_offset: i64,
}

/// Each group's offsets, by group id (hashed too: the replay looks a group up for every
/// record; what walks every group walks the ordered group list instead).
pub(crate) type OffsetsByGroup = FastMap<String, GroupOffsets>;

/// One group's offsets.
#[derive(Debug, Clone, Default)]
pub(crate) struct GroupOffsets {
    topics: FastMap<String, FastMap<i32, Stored>>,
}

impl GroupOffsets {
    /// The offset of `topic`-`partition`.
    #[inline]
    pub(crate) fn get(&self, topic: &str, partition: i32) -> Option<&Stored> {
        self.topics.get(topic)?.get(&partition)
    }

    /// Whether `tp` has an offset.
    pub(crate) fn contains(&self, tp: &TopicPartition) -> bool {
        self.get(&tp.topic, tp.partition).is_some()
    }

    /// Sets the offset of `topic`-`partition` (the topic's name is copied only the first time).
    pub(crate) fn insert(&mut self, topic: &str, partition: i32, stored: Stored) {
        match self.topics.get_mut(topic) {
            Some(partitions) => {
                partitions.insert(partition, stored);
            }
            None => {
                let mut partitions = FastMap::default();
                partitions.insert(partition, stored);
                self.topics.insert(topic.to_owned(), partitions);
            }
        }
    }

    /// Drops the offset of `topic`-`partition`.
    pub(crate) fn remove(&mut self, topic: &str, partition: i32) {
        if let Some(partitions) = self.topics.get_mut(topic) {
            partitions.remove(&partition);
            if partitions.is_empty() {
                self.topics.remove(topic);
            }
        }
    }

    /// Whether no partition has an offset.
    pub(crate) fn is_empty(&self) -> bool {
        self.topics.is_empty()
    }

    /// Every offset, ordered by topic and then partition.
    pub(crate) fn sorted(&self) -> Vec<(TopicPartition, &Stored)> {
        let mut all: Vec<(TopicPartition, &Stored)> = self
            .topics
            .iter()
            .flat_map(|(topic, partitions)| {
                partitions
                    .iter()
                    .map(|(p, stored)| (TopicPartition::new(topic.clone(), *p), stored))
            })
            .collect();
        all.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// Every offset, consumed, in no particular order.
    pub(crate) fn into_entries(self) -> impl Iterator<Item = (String, i32, Stored)> {
        self.topics.into_iter().flat_map(|(topic, partitions)| {
            partitions
                .into_iter()
                .map(move |(p, stored)| (topic.clone(), p, stored))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(offset: i64) -> Stored {
        Stored {
            value: OffsetCommitValue::new(offset, "", 0),
            record_offset: offset,
        }
    }

    #[test]
    fn offsets_are_found_replaced_removed_and_listed_in_order() {
        let mut offsets = GroupOffsets::default();
        for (topic, partition) in [("b", 2), ("a", 7), ("b", 0), ("a", 1)] {
            offsets.insert(topic, partition, stored(i64::from(partition)));
        }
        offsets.insert("b", 2, stored(20));
        assert_eq!(offsets.get("b", 2).map(|s| s.value.offset), Some(20));
        assert!(offsets.contains(&TopicPartition::new("a", 7)));
        assert_eq!(offsets.get("c", 0), None);
        let listed: Vec<(String, i32, i64)> = offsets
            .sorted()
            .into_iter()
            .map(|(tp, s)| (tp.topic, tp.partition, s.value.offset))
            .collect();
        assert_eq!(
            listed,
            [
                ("a".to_owned(), 1, 1),
                ("a".to_owned(), 7, 7),
                ("b".to_owned(), 0, 0),
                ("b".to_owned(), 2, 20)
            ]
        );
        offsets.remove("a", 1);
        offsets.remove("a", 7);
        offsets.remove("b", 0);
        offsets.remove("b", 2);
        assert!(offsets.is_empty());
    }
}
