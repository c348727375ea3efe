//! [`TransactionCoordinatorConfig`]: the coordinator's settings, Kafka's broker settings of the
//! same names and defaults.

use partlog::Error;

/// The transaction coordinator's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TransactionCoordinatorConfig {
    /// `transaction.max.timeout.ms`: the largest `transaction.timeout.ms` a producer may ask
    /// for (900000, 15 minutes).
    pub transaction_max_timeout_ms: i32,
    /// `transaction.state.log.num.partitions` (50). Changing it moves ids to other partitions:
    /// keep it for the life of the engine directory.
    pub transaction_state_partitions: i32,
    /// `transaction.version`, the feature level (2, Kafka 4's default): from 1 the
    /// `__transaction_state` values are version 1; from 2 every end of a transaction bumps the
    /// producer epoch (KIP-890).
    pub transaction_version: i16,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms` (10000): how often
    /// [`tick`](super::TransactionCoordinator::tick) aborts the transactions past their timeout.
    pub abort_timed_out_transaction_cleanup_interval_ms: i64,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms` (3600000): how often `tick`
    /// expires idle transactional ids.
    pub remove_expired_transaction_cleanup_interval_ms: i64,
    /// `transactional.id.expiration.ms` (604800000, 7 days): how long an id with no
    /// transaction in progress is kept after its last change.
    pub transactional_id_expiration_ms: i64,
    /// `offsets.topic.num.partitions` (50): the partition of `__consumer_offsets` a group's
    /// offsets go to (`add_offsets`).
    pub offsets_topic_partitions: i32,
}

impl Default for TransactionCoordinatorConfig {
    fn default() -> Self {
        TransactionCoordinatorConfig {
            transaction_max_timeout_ms: 900_000,
            transaction_state_partitions: 50,
            transaction_version: 2,
            abort_timed_out_transaction_cleanup_interval_ms: 10_000,
            remove_expired_transaction_cleanup_interval_ms: 3_600_000,
            transactional_id_expiration_ms: 604_800_000,
            offsets_topic_partitions: 50,
        }
    }
}

impl TransactionCoordinatorConfig {
    /// Checks every setting against Kafka's bounds.
    ///
    /// # Errors
    /// `InvalidConfig` naming the first setting out of range.
    pub fn validate(&self) -> Result<(), Error> {
        let positive: [(&'static str, i64); 6] = [
            (
                "transaction.max.timeout.ms",
                i64::from(self.transaction_max_timeout_ms),
            ),
            (
                "transaction.state.log.num.partitions",
                i64::from(self.transaction_state_partitions),
            ),
            (
                "transaction.abort.timed.out.transaction.cleanup.interval.ms",
                self.abort_timed_out_transaction_cleanup_interval_ms,
            ),
            (
                "transaction.remove.expired.transaction.cleanup.interval.ms",
                self.remove_expired_transaction_cleanup_interval_ms,
            ),
            (
                "transactional.id.expiration.ms",
                self.transactional_id_expiration_ms,
            ),
            (
                "offsets.topic.num.partitions",
                i64::from(self.offsets_topic_partitions),
            ),
        ];
        for (setting, value) in positive {
            if value <= 0 {
                return Err(Error::InvalidConfig {
                    setting,
                    why: format!("must be at least 1, not {value}"),
                });
            }
        }
        if !(0..=2).contains(&self.transaction_version) {
            return Err(Error::InvalidConfig {
                setting: "transaction.version",
                why: format!("levels 0, 1 and 2 exist, not {}", self.transaction_version),
            });
        }
        Ok(())
    }
}
