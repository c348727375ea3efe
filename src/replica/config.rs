//! [`ReplicaConfig`]: the settings of the replica layer, under Kafka's names and defaults.

use crate::error::{Error, Result};

/// Kafka's `replica.lag.time.max.ms`: how long a follower may go without catching up to the
/// leader's log end offset before the leader proposes to drop it from the ISR.
pub const REPLICA_LAG_TIME_MAX_MS_CONFIG: &str = "replica.lag.time.max.ms";
/// Kafka's default for [`REPLICA_LAG_TIME_MAX_MS_CONFIG`]: 30 seconds.
pub const REPLICA_LAG_TIME_MAX_MS_DEFAULT: i64 = 30_000;
/// Kafka's `min.insync.replicas`: the ISR size an `acks=all` append needs (capped at the
/// replication factor), and below which the high watermark does not move (KIP-966).
pub const MIN_IN_SYNC_REPLICAS_CONFIG: &str = "min.insync.replicas";
/// Kafka's default for [`MIN_IN_SYNC_REPLICAS_CONFIG`]: 1.
pub const MIN_IN_SYNC_REPLICAS_DEFAULT: usize = 1;
/// Kafka's `unclean.leader.election.enable`: whether a replica outside the last ISR (and, once
/// the ISR is empty, outside its eligible leader replicas) may become the leader. Its log may
/// lack committed records, which the followers then truncate away.
pub const UNCLEAN_LEADER_ELECTION_ENABLE_CONFIG: &str = "unclean.leader.election.enable";
/// Kafka's default for [`UNCLEAN_LEADER_ELECTION_ENABLE_CONFIG`]: false.
pub const UNCLEAN_LEADER_ELECTION_ENABLE_DEFAULT: bool = false;

/// The settings of a [`Partition`](super::Partition), each under its Kafka name with Kafka's
/// default.
///
/// ```
/// use partlog::replica::ReplicaConfig;
///
/// let config = ReplicaConfig { min_insync_replicas: 2, ..ReplicaConfig::default() };
/// assert_eq!(config.replica_lag_time_max_ms, 30_000);
/// config.validate()?;
/// # Ok::<(), partlog::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaConfig {
    /// `replica.lag.time.max.ms` (default 30000).
    pub replica_lag_time_max_ms: i64,
    /// `min.insync.replicas` (default 1).
    pub min_insync_replicas: usize,
    /// `unclean.leader.election.enable` (default false): see
    /// [`Partition::become_leader`](super::Partition::become_leader).
    pub unclean_leader_election_enable: bool,
}

impl Default for ReplicaConfig {
    fn default() -> Self {
        ReplicaConfig {
            replica_lag_time_max_ms: REPLICA_LAG_TIME_MAX_MS_DEFAULT,
            min_insync_replicas: MIN_IN_SYNC_REPLICAS_DEFAULT,
            unclean_leader_election_enable: UNCLEAN_LEADER_ELECTION_ENABLE_DEFAULT,
        }
    }
}

impl ReplicaConfig {
    /// Checks the ranges Kafka enforces: a lag of at least 0 ms and a minimum ISR of at least 1.
    pub fn validate(&self) -> Result<()> {
        if self.replica_lag_time_max_ms < 0 {
            return Err(Error::InvalidConfig {
                setting: REPLICA_LAG_TIME_MAX_MS_CONFIG,
                why: format!("{} is negative", self.replica_lag_time_max_ms),
            });
        }
        if self.min_insync_replicas < 1 {
            return Err(Error::InvalidConfig {
                setting: MIN_IN_SYNC_REPLICAS_CONFIG,
                why: "must be at least 1".into(),
            });
        }
        Ok(())
    }

    /// `min.insync.replicas` capped at the replication factor, as Kafka's `effectiveMinIsr`:
    /// a partition with fewer replicas than the setting asks for is not forever unwritable.
    pub fn effective_min_isr(&self, replication_factor: usize) -> usize {
        self.min_insync_replicas.min(replication_factor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_kafkas() {
        let config = ReplicaConfig::default();
        assert_eq!(config.replica_lag_time_max_ms, 30_000);
        assert_eq!(config.min_insync_replicas, 1);
        assert!(!config.unclean_leader_election_enable);
        assert!(config.validate().is_ok());
    }

    #[test]
    fn out_of_range_values_are_rejected_under_their_kafka_names() {
        let negative_lag = ReplicaConfig {
            replica_lag_time_max_ms: -1,
            ..ReplicaConfig::default()
        };
        assert!(matches!(
            negative_lag.validate(),
            Err(Error::InvalidConfig {
                setting: "replica.lag.time.max.ms",
                ..
            })
        ));
        let zero_isr = ReplicaConfig {
            min_insync_replicas: 0,
            ..ReplicaConfig::default()
        };
        assert!(matches!(
            zero_isr.validate(),
            Err(Error::InvalidConfig {
                setting: "min.insync.replicas",
                ..
            })
        ));
    }

    #[test]
    fn effective_min_isr_is_capped_at_the_replication_factor() {
        let config = ReplicaConfig {
            min_insync_replicas: 3,
            ..ReplicaConfig::default()
        };
        assert_eq!(config.effective_min_isr(2), 2);
        assert_eq!(config.effective_min_isr(5), 3);
    }
}
