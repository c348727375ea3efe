//! What a compaction pass decides, apart from how it runs: the [`CompactionPolicy`] trait, the
//! policies, and the registry that names them ([`compaction_policies`]).
//!
//! The mechanism (the pass in `compaction/`: the cleanable range, the key map, the rewrite and
//! the swap) asks the policy for every choice that is policy rather than correctness: which
//! segments may be cleaned and when a pass is due, which record of a key wins, what a tombstone
//! is and when it (or a discardable transaction marker) may go. What keeps the log correct stays
//! in the mechanism whatever the policy says: aborted data goes, markers whose transaction still
//! has data stay, a producer's last batch stays (RETAIN_EMPTY), nothing at or above the last
//! stable offset or the recovery point is cleaned, and a pass is crash-safe.
//!
//! A policy is one file here plus one line in the registry below; a log selects it by name with
//! [`LogConfigBuilder::compaction_strategy`](crate::LogConfigBuilder::compaction_strategy)
//! (KIP-280's `compaction.strategy`).

use std::fmt;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::Record;
use crate::log::LogConfig;

use crate::log::observe::reports::CompactionSchedule;

/// Where a record stands among the records of its key: its offset, and the version the policy
/// read from it ([`CompactionPolicy::record_version`]), `None` when it has none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordVersion {
    /// The record's offset.
    pub offset: i64,
    /// The record's version, `None` when the policy reads none from it.
    pub version: Option<i64>,
}

/// Compaction's choices. The provided methods are Kafka's rules (`LogCleanerManager`,
/// `LogCleaner`); a policy states which record of a key wins
/// ([`prefers`](Self::prefers)) and overrides what else it changes.
///
/// Methods are called while a pass runs, once per segment or record: they must be cheap and
/// must not fail or block.
pub trait CompactionPolicy: Send + Sync + fmt::Debug {
    /// The name the policy is selected by (`compaction.strategy`), as the registry lists it.
    fn name(&self) -> &'static str;

    /// Whether `candidate` wins over `current`, the record of the same key that wins so far.
    /// Records reach the key map in offset order, but a pass may also meet a record below the
    /// map's range (already cleaned) after the map is built, so `candidate.offset` may be lower
    /// than `current.offset`. The winner of each key stays; the other records of the key go.
    fn prefers(&self, candidate: RecordVersion, current: RecordVersion) -> bool;

    /// Whether [`record_version`](Self::record_version) reads anything: when `false` (Kafka's
    /// order) the key map keeps offsets only, 8 bytes a key fewer.
    fn reads_versions(&self) -> bool {
        false
    }

    /// The version of `record` that [`prefers`](Self::prefers) compares, `None` when it has
    /// none. Kafka's order reads none.
    fn record_version(&self, _record: &Record<'_>) -> Option<i64> {
        None
    }

    /// Whether a dirty segment whose newest record has `max_timestamp` may be cleaned at
    /// `now_ms` (`min.compaction.lag.ms`, or the pass's override). Kafka's rule applies the lag
    /// only when it is above 0: with 0, a timestamp in the future (which
    /// `message.timestamp.after.max.ms` admits) would hold this segment and every later one back.
    fn segment_cleanable(&self, now_ms: i64, max_timestamp: Option<i64>, min_lag_ms: i64) -> bool {
        min_lag_ms <= 0 || max_timestamp.is_none_or(|max| now_ms.saturating_sub(max) >= min_lag_ms)
    }

    /// Whether a dirty segment whose first batch has `first_batch_timestamp` waited longer than
    /// `max.compaction.lag.ms` (Kafka's KIP-354), which makes a pass due whatever the ratio.
    fn max_lag_exceeded(&self, now_ms: i64, first_batch_timestamp: i64, max_lag_ms: i64) -> bool {
        now_ms.saturating_sub(first_batch_timestamp) > max_lag_ms
    }

    /// Whether a pass is due by `schedule`'s figures: there are dirty bytes, and their share
    /// reaches `min.cleanable.dirty.ratio` or the max lag is exceeded.
    fn pass_due(&self, schedule: &CompactionSchedule, min_cleanable_dirty_ratio: f64) -> bool {
        schedule.dirty_bytes > 0
            && (schedule.dirty_ratio >= min_cleanable_dirty_ratio || schedule.max_lag_exceeded)
    }

    /// Whether `record` is a tombstone: a delete of its key, dropped once its delete horizon
    /// has passed. Kafka's: a null value.
    fn is_tombstone(&self, record: &Record<'_>) -> bool {
        record.value.is_none()
    }

    /// The delete horizon a pass at `now_ms` writes into a batch whose tombstones (or whose
    /// discardable marker) it first recopies: `now + delete.retention.ms`.
    fn delete_horizon_ms(&self, now_ms: i64, delete_retention_ms: i64) -> i64 {
        now_ms.saturating_add(delete_retention_ms)
    }

    /// Whether a batch's delete horizon (`None` when it has none yet) has passed at `now_ms`,
    /// so that its winning tombstones and, for a discardable marker, the marker may go.
    fn horizon_passed(&self, horizon_ms: Option<i64>, now_ms: i64) -> bool {
        horizon_ms.is_some_and(|horizon| horizon <= now_ms)
    }
}

/// One entry of the registry: a policy's name, what it does, and how a log's config builds it.
#[derive(Clone, Copy)]
pub struct CompactionPolicyInfo {
    /// The name (`compaction.strategy`), as [`CompactionPolicy::name`] gives it.
    pub name: &'static str,
    /// One line on what the policy keeps.
    pub doc: &'static str,
    build: fn(&LogConfig) -> Result<Arc<dyn CompactionPolicy>>,
}

impl CompactionPolicyInfo {
    /// An entry for the registry; `build` checks the settings the policy reads.
    pub const fn new(
        name: &'static str,
        doc: &'static str,
        build: fn(&LogConfig) -> Result<Arc<dyn CompactionPolicy>>,
    ) -> CompactionPolicyInfo {
        CompactionPolicyInfo { name, doc, build }
    }

    /// The policy for `config`, or [`Error::InvalidConfig`] about a setting it reads.
    pub fn build(&self, config: &LogConfig) -> Result<Arc<dyn CompactionPolicy>> {
        (self.build)(config)
    }
}

impl fmt::Debug for CompactionPolicyInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompactionPolicyInfo")
            .field("name", &self.name)
            .field("doc", &self.doc)
            .finish_non_exhaustive()
    }
}

/// Declares the policy files and lists each one's `POLICIES` in the registry, in this order:
/// adding a policy is its file and one line here.
macro_rules! policy_files {
    ($($file:ident,)*) => {
        $(mod $file;)*
        const POLICY_FILES: &[&[CompactionPolicyInfo]] = &[$($file::POLICIES),*];
    };
}

policy_files! {
    kafka,
    kip280,
}

pub use kafka::KafkaCompaction;

/// Every compaction policy the library has, by name, the default (`offset`, Kafka's) first.
pub fn compaction_policies() -> impl Iterator<Item = &'static CompactionPolicyInfo> {
    POLICY_FILES.iter().flat_map(|file| file.iter())
}

/// The registry's entry named `name`, or [`Error::InvalidConfig`] about `compaction.strategy`
/// listing the names there are.
pub fn compaction_policy(name: &str) -> Result<&'static CompactionPolicyInfo> {
    compaction_policies()
        .find(|info| info.name == name)
        .ok_or_else(|| Error::InvalidConfig {
            setting: "compaction.strategy",
            why: format!(
                "{name:?} is not a compaction policy; expected one of {}",
                compaction_policies()
                    .map(|info| info.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })
}
