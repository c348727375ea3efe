//! KIP-280's compaction orders: of each key, the record with the highest version stays, the
//! version being a record header (`compaction.strategy=header`, the header that
//! `compaction.strategy.header` names, an 8-byte big-endian long, its last occurrence) or the
//! record's timestamp (`compaction.strategy=timestamp`). As KIP-280 says, a record with a
//! version wins over one without, and offset order decides between equal versions and between
//! records that have none, so a log whose records carry no version compacts as Kafka's does.
//!
//! A version order keeps the highest version even against later records: a record that
//! earlier passes kept can win over the dirty records of its key, and the key map keeps each
//! key's version beside its offset (8 bytes a key more than Kafka's order). Eligibility and
//! tombstones follow Kafka's rules: a tombstone is a null value that wins by version, and goes
//! once its delete horizon has passed.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::Record;
use crate::log::LogConfig;

use super::{CompactionPolicy, CompactionPolicyInfo, RecordVersion};

/// Where a [`VersionOrder`] reads a record's version.
#[derive(Clone, Debug, PartialEq, Eq)]
enum VersionSource {
    /// The last header with this key, when its value is 8 bytes (a big-endian long).
    Header(Vec<u8>),
    /// The record's timestamp.
    Timestamp,
}

/// KIP-280's `header` and `timestamp` orders: the highest version of each key wins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionOrder {
    source: VersionSource,
}

impl CompactionPolicy for VersionOrder {
    fn name(&self) -> &'static str {
        match self.source {
            VersionSource::Header(_) => "header",
            VersionSource::Timestamp => "timestamp",
        }
    }

    /// Higher version, then higher offset; a version beats none (`None` orders first).
    fn prefers(&self, candidate: RecordVersion, current: RecordVersion) -> bool {
        (candidate.version, candidate.offset) > (current.version, current.offset)
    }

    fn reads_versions(&self) -> bool {
        true
    }

    fn record_version(&self, record: &Record<'_>) -> Option<i64> {
        match &self.source {
            VersionSource::Header(name) => record
                .headers()
                .filter(|header| header.key == name.as_slice())
                .last()
                .and_then(|header| header.value)
                .and_then(|value| <[u8; 8]>::try_from(value).ok())
                .map(i64::from_be_bytes),
            VersionSource::Timestamp => Some(record.timestamp),
        }
    }
}

fn header_order(config: &LogConfig) -> Result<Arc<dyn CompactionPolicy>> {
    let header = config.compaction_strategy_header.trim();
    if header.is_empty() {
        return Err(Error::InvalidConfig {
            setting: "compaction.strategy.header",
            why: "compaction.strategy=header needs the name of the header that holds each \
                  record's version (an 8-byte big-endian long)"
                .into(),
        });
    }
    Ok(Arc::new(VersionOrder {
        source: VersionSource::Header(header.as_bytes().to_vec()),
    }))
}

pub(super) const POLICIES: &[CompactionPolicyInfo] = &[
    CompactionPolicyInfo::new(
        "header",
        "KIP-280: the record with the highest version in the header compaction.strategy.header \
         names (a big-endian long) stays; no version or a tie: the highest offset",
        header_order,
    ),
    CompactionPolicyInfo::new(
        "timestamp",
        "KIP-280: the record with the highest timestamp stays; a tie: the highest offset",
        |_| {
            Ok(Arc::new(VersionOrder {
                source: VersionSource::Timestamp,
            }))
        },
    ),
];
