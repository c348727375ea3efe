//! [`Log::append_as_follower`]: Kafka's `appendAsFollower`. The batches come from a leader with
//! their offsets and `partitionLeaderEpoch` already set, and are written byte for byte: a
//! follower's `.log` is a copy of the leader's over the offsets it fetched (ARCHITECTURE.md
//! §11).
//!
//! Everything is checked before anything is written, so a refused call writes nothing: every
//! frame must be a whole v2 batch with a valid CRC (no decompression and no size limit, as a
//! Kafka follower trusts its leader's validation), the first base offset must be at or above
//! the log end offset, and each batch must start after the previous one ends. The producer
//! state is checked with Kafka's REPLICATION rules (no duplicate detection, no sequence checks,
//! an older producer epoch only warned about) and applied once the bytes are written. Each
//! batch with an epoch ≥ 0 assigns it in the leader-epoch cache before the write, as Kafka does
//! (only the first of a run of one epoch is passed on: the others could not change the cache).
//! The whole call is one write, after at most one roll.
//!
//! A roll starts the new segment at the log end, so a compacted leader's gap lies inside it,
//! except where the call's last offset lies more than `i32::MAX` past the log end: no segment
//! beginning there could hold it in its 32-bit relative offsets, and the new segment begins at
//! the call's first offset instead, as Kafka's `maybeRoll` does (KAFKA-6264), with the gap
//! between the two segments ([`Shared::roll_past_gap`]), whatever the log's cleanup policy: the
//! leader's records were compacted (its topic may since have switched to delete). A gap between
//! segments is legal only below the recovery point, and only in a log whose checkpoint says its
//! records were compacted or whose policy includes compact (ARCHITECTURE.md §3, invariant 5),
//! so that roll first makes everything below the gap durable and records the recovery point at
//! the new segment's base, with the checkpoint's `COMPACTED` flag, in a synced slot, as a
//! compaction pass does before it makes gaps. A call whose own batches span more than
//! `i32::MAX` offsets fits no segment and is refused.
//!
//! The producer state is committed once for the whole call: every producer's changes, then
//! the transactions its markers end, in batch order, with the `.txnindex` entries a leader's
//! appends of the same batches would write ([`ProducerStateManager::commit_all`]).
//!
//! [`ProducerStateManager::commit_all`]: crate::log::txn::producer_state::ProducerStateManager::commit_all

use std::collections::HashMap;

use crate::error::{Corruption, Error, Result};
use crate::format::{BatchHeader, BatchView};
use crate::segment::AppendBytes;

use super::append::transaction_marker;
use crate::log::txn::producer_state::{AppendOrigin, BatchSummary, ProducerAppendInfo};
use crate::log::{LogAppendInfo, Shared, Writer};

/// One checked batch of a follower append.
struct FollowerBatch {
    header: BatchHeader,
    /// Its bytes' position in the call's buffer.
    position: usize,
}

impl Shared {
    /// See [`Log::append_as_follower`](crate::Log::append_as_follower).
    pub(in crate::log) fn append_as_follower(&self, batches: &[u8]) -> Result<LogAppendInfo> {
        self.check_writable()?;
        let checked = check_follower_batches(batches)?;
        let (Some(first), Some(last)) = (checked.first(), checked.last()) else {
            return Err(Error::InvalidArgument {
                why: "a follower append needs at least one batch".into(),
            });
        };
        let first_offset = first.header.base_offset;
        let last_offset = last.header.last_offset();
        if last_offset - first_offset > i64::from(i32::MAX) {
            let split_at = checked
                .iter()
                .find(|batch| batch.header.last_offset() - first_offset > i64::from(i32::MAX))
                .map_or(last_offset, |batch| batch.header.base_offset);
            return Err(Error::InvalidArgument {
                why: format!(
                    "a follower append of offsets {first_offset}..={last_offset} spans more than \
                     a segment's 32-bit relative offsets: append the batches from offset \
                     {split_at} on in a second call"
                ),
            });
        }
        let max_timestamp = checked
            .iter()
            .map(|batch| batch.header.max_timestamp)
            .max()
            .unwrap_or(-1);
        let records: u32 = checked
            .iter()
            .map(|batch| u32::try_from(batch.header.records_count).unwrap_or(0))
            .fold(0, u32::saturating_add);
        // Markers are read before the lock: only their control record needs parsing.
        let mut summaries = Vec::new();
        for batch in checked.iter().filter(|b| b.header.producer_id >= 0) {
            let bytes = &batches[batch.position..batch.position + batch.header.total_size()];
            let marker = if batch.header.is_control() {
                transaction_marker(bytes)?
            } else {
                None
            };
            summaries.push(BatchSummary::from_header(&batch.header, marker)?);
        }

        let shared = self;
        let now = shared.clock.now_ms();
        let mut writer = shared.lock_writer_for_append()?;
        self.check_writable()?;
        let log_end_offset = writer.tail.log_end_offset();
        if first_offset < log_end_offset {
            return Err(Error::UnexpectedAppendOffset {
                log_end_offset,
                found: first_offset,
            });
        }
        // No segment beginning at the log end could hold the last offset.
        let past_gap = last_offset - log_end_offset > i64::from(i32::MAX);
        // Kafka's `analyzeAndValidateProducerState`: one append info per producer, fed every
        // batch of the call in order, all committed at once after the write.
        let mut producers: Vec<ProducerAppendInfo> = Vec::new();
        let mut index_of: HashMap<i64, usize> = HashMap::new();
        for summary in &summaries {
            let index = *index_of.entry(summary.producer_id).or_insert_with(|| {
                producers.push(
                    writer
                        .producers
                        .prepare_update(summary.producer_id, AppendOrigin::Replication),
                );
                producers.len() - 1
            });
            producers[index].append(summary)?;
        }
        // Within a run of batches of one epoch only the first can change the cache (a later
        // start of the latest epoch is a no-op in `assign`), so each run takes the cache's lock
        // once. Batches without an epoch neither assign nor end a run.
        let mut run_epoch = None;
        for batch in &checked {
            let epoch = batch.header.partition_leader_epoch;
            if epoch >= 0 && run_epoch != Some(epoch) {
                shared
                    .replication
                    .assign_epoch(epoch, batch.header.base_offset)?;
                run_epoch = Some(epoch);
            }
        }
        let roll_if_due = if past_gap {
            shared.roll_past_gap(&mut writer, first_offset, now)?;
            None
        } else {
            Some((max_timestamp, now))
        };
        shared.write_and_publish(
            &mut writer,
            AppendBytes::whole(batches),
            last_offset,
            roll_if_due,
            producers,
            "follower append",
        )?;
        shared.account_append(writer, records, batches.len(), last_offset)?;
        Ok(LogAppendInfo {
            first_offset,
            last_offset,
            records,
            max_timestamp,
            log_append_time: None,
            bytes: batches.len(),
            duplicate: false,
        })
    }

    /// Rolls to a new active segment at `base`, more than `i32::MAX` offsets past the log end
    /// (a compacted leader's gap: Kafka's `maybeRoll` at the batch's first offset). Before the
    /// new segment takes a byte, every offset below the gap is made durable (the sealed
    /// segments, the old active one among them, data and indexes, then the directory with the
    /// new segment's name) and the recovery point is recorded at `base` in a synced checkpoint
    /// slot that sets the `COMPACTED` flag: the gap then lies below the recovery point in a log
    /// whose records are known to be compacted, where recovery and `verify` take it for legal
    /// (ARCHITECTURE.md §3, invariant 5), as they do compaction's. Without that, a crash would
    /// find the gap above the recovery point and cut the new segment off as a lost tail, with
    /// whatever was acknowledged in it; until then, a crash finds just that, and the new
    /// segment is still empty.
    ///
    /// The log end moves to `base` with the roll ([`Shared::roll_at`]). If anything after the
    /// roll fails, the log is poisoned: the new segment must take no byte until the gap lies
    /// below a recorded recovery point.
    fn roll_past_gap(&self, writer: &mut Writer, base: i64, now_ms: i64) -> Result<()> {
        // Before the roll publishes the new segment: a reader that moves across the gap must
        // find it legal. If the roll fails, the flag only spares this process's readers a
        // check of gaps the log does not have.
        self.view.mark_compacted();
        let rolled = self.roll_at(writer, base, now_ms);
        if writer.tail.active().base_offset() != base {
            // Nothing rolled: the old segment is still active, and the log as it was.
            return rolled;
        }
        // Also when the roll's producer snapshot failed: the roll itself stands.
        if let Err(error) = self.record_recovery_point_past_gap(writer, base) {
            if self.durability.is_poisoned() {
                return Err(error);
            }
            let what = format!("recording the recovery point past the gap at {base}");
            return Err(self.poison_after_failed_sync(&what, error));
        }
        rolled
    }

    /// The durable steps of [`roll_past_gap`](Self::roll_past_gap) once the new segment at
    /// `base` is active and empty.
    fn record_recovery_point_past_gap(&self, writer: &mut Writer, base: i64) -> Result<()> {
        let sealed = writer.tail.unsynced_sealed().to_vec();
        if let Err(error) = self.flush_sealed_alone(&sealed) {
            return Err(self.poison_after_failed_sync("syncing a sealed segment", error));
        }
        writer.tail.forget_synced(&sealed);
        if let Err(error) = self.storage.sync_dir(&self.dir) {
            return Err(self.poison_after_failed_sync("syncing the directory", error));
        }
        let log_start = self.view.log_start();
        self.write_checkpoint_compacted(writer, base, log_start)?;
        writer.points.set_recovery_point(base);
        // Every offset below the gap is synced, and none lies in it.
        self.durability.durable_mark().advance(base);
        Ok(())
    }
}

/// Splits `bytes` into whole v2 batches, each CRC-checked, whose offsets strictly increase.
fn check_follower_batches(bytes: &[u8]) -> Result<Vec<FollowerBatch>> {
    let mut checked: Vec<FollowerBatch> = Vec::new();
    let mut position = 0usize;
    while position < bytes.len() {
        let rest = &bytes[position..];
        let invalid = |what| Error::InvalidBatch { what };
        let header = BatchHeader::parse(rest).map_err(invalid)?;
        let size = header.total_size();
        let Some(frame) = rest.get(..size) else {
            return Err(invalid(Corruption::Truncated {
                needed: size as u64,
                available: rest.len() as u64,
            }));
        };
        BatchView::new(frame).map_err(invalid)?;
        if header.last_offset_delta < 0 {
            return Err(invalid(Corruption::BadHeader(
                "lastOffsetDelta is negative",
            )));
        }
        if let Some(previous) = checked.last() {
            let previous_last = previous.header.last_offset();
            if header.base_offset <= previous_last {
                return Err(Error::OffsetsOutOfOrder {
                    previous_last,
                    found: header.base_offset,
                });
            }
        }
        checked.push(FollowerBatch { header, position });
        position += size;
    }
    Ok(checked)
}
