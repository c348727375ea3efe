//! [`SendOffsetsToTransaction`]: Kafka's `KafkaProducer.sendOffsetsToTransaction` for the
//! engine's [`TopicProducer`], the step that closes the exactly-once loop (consume,
//! transform, produce, and commit the input's offsets in the same transaction).
//!
//! It is a trait of this crate because the engine does not depend on the group layer: the
//! producer adds the group's offsets partition to its transaction (`AddOffsetsToTxn`), then
//! the group's shard writes the offsets inside the transaction (`TxnOffsetCommit`), checked
//! against the consumer's generation (KIP-447), so a zombie whose group moved on cannot commit.

use partlog_engine::producer::TopicProducer;

use super::GroupMetadata;
use crate::Error;
use crate::assignor::TopicPartition;
use crate::offsets::store::{MemberRef, PartitionOffset};
use crate::router::GroupRouter;

/// `send_offsets_to_transaction` on a transactional producer.
pub trait SendOffsetsToTransaction {
    /// Commits `offsets` (each the next offset to read) for `group` inside the producer's open
    /// transaction: they take effect when it commits, and are dropped if it aborts. `groups`
    /// is the engine's group layer.
    ///
    /// # Errors
    /// The producer's errors (outside a transaction, fenced); the group's refusal
    /// (`FencedInstanceId` (82), `UnknownMemberId` (25), `IllegalGeneration` (22), a
    /// partition's `OffsetMetadataTooLarge`): each makes the transaction abortable, so
    /// `abort_transaction` and rejoin.
    fn send_offsets_to_transaction(
        &self,
        groups: &GroupRouter,
        offsets: &[(TopicPartition, i64)],
        group: &GroupMetadata,
    ) -> Result<(), Error>;
}

impl SendOffsetsToTransaction for TopicProducer {
    fn send_offsets_to_transaction(
        &self,
        groups: &GroupRouter,
        offsets: &[(TopicPartition, i64)],
        group: &GroupMetadata,
    ) -> Result<(), Error> {
        let ids = self.add_offsets_to_transaction(&group.group_id)?;
        let member = MemberRef {
            member_id: group.member_id.clone(),
            generation: group.generation,
            instance_id: group.group_instance_id.clone(),
        };
        let offsets: Vec<PartitionOffset> = offsets
            .iter()
            .map(|(tp, o)| PartitionOffset::new(tp.topic.clone(), tp.partition, *o))
            .collect();
        let committed = groups
            .with_group(&group.group_id, |shard| {
                shard.store_mut().commit_transactional(
                    &group.group_id,
                    &member,
                    ids.producer_id,
                    ids.epoch,
                    &offsets,
                )
            })
            .and_then(|results| results.into_iter().try_for_each(|(_, r)| r));
        if let Err(error) = &committed {
            self.fail_transaction_with(partlog::Error::InvalidRequest {
                why: format!(
                    "the transactional offset commit of group {:?} was refused: {error}",
                    group.group_id
                ),
            });
        }
        committed
    }
}
