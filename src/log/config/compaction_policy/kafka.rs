//! Kafka's compaction policy: the record with the highest offset of each key wins
//! (`compaction.strategy=offset`, the default), with Kafka's eligibility and tombstone rules.

use std::sync::Arc;

use super::{CompactionPolicy, CompactionPolicyInfo, RecordVersion};

/// Kafka's policy (`compaction.strategy=offset`): the latest record of each key, by offset,
/// stays; the trait's provided methods (Kafka's rules) decide the rest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KafkaCompaction;

impl CompactionPolicy for KafkaCompaction {
    fn name(&self) -> &'static str {
        "offset"
    }

    fn prefers(&self, candidate: RecordVersion, current: RecordVersion) -> bool {
        candidate.offset > current.offset
    }
}

pub(super) const POLICIES: &[CompactionPolicyInfo] = &[CompactionPolicyInfo::new(
    "offset",
    "Kafka's: the record with the highest offset of each key stays (the default)",
    |_| Ok(Arc::new(KafkaCompaction)),
)];
