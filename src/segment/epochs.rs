//! The leader epochs a segment's batches carry, for the log's rebuild of its leader-epoch cache
//! (`log/epoch_load.rs`): the 61-byte v2 headers only, and a note of every legacy (magic 0 or
//! 1) message, whose appends clear Kafka's cache.

use super::log_segment::Segment;
use super::walker::{BatchWalker, Step, WINDOW_BYTES};
use crate::error::{Corruption, Result};
use crate::format::{BatchHeader, RECORD_BATCH_OVERHEAD};

/// What one frame of a segment says about leader epochs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FrameEpoch {
    /// A v2 batch: its `partitionLeaderEpoch` and base offset.
    V2 { epoch: i32, base_offset: i64 },
    /// A legacy (magic 0 or 1) message.
    Legacy,
}

/// The v2 epochs that Kafka's recovery rule (`LogSegment.recover`: an epoch is assigned only
/// when above the latest one) can assign, from batches in offset order: each epoch above every
/// earlier one, with the base offset of its first batch. Replaying only these under that rule
/// gives the cache that replaying every batch gives, as a batch left out carries an epoch at or
/// below one replayed before it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RisingEpochs {
    /// (epoch, base offset) pairs, in offset order, epochs strictly rising.
    starts: Vec<(i32, i64)>,
}

impl RisingEpochs {
    /// Notes a batch's epoch, if it rises above all noted so far.
    pub(crate) fn note(&mut self, epoch: i32, base_offset: i64) {
        if epoch >= 0 && self.starts.last().is_none_or(|&(latest, _)| epoch > latest) {
            self.starts.push((epoch, base_offset));
        }
    }

    /// The (epoch, base offset) pairs, in offset order.
    pub(crate) fn starts(&self) -> &[(i32, i64)] {
        &self.starts
    }
}

impl Segment {
    /// Calls `visit` for every frame of the segment, in order, reading v2 headers only (no CRC
    /// is checked: the caller reads bytes that recovery, or an earlier open, validated).
    pub(crate) fn visit_leader_epochs(
        &self,
        visit: &mut dyn FnMut(FrameEpoch) -> Result<()>,
    ) -> Result<()> {
        self.visit_leader_epochs_below(self.read_view().end, visit)
    }

    /// [`visit_leader_epochs`](Self::visit_leader_epochs) for the frames before byte `end`, a
    /// frame boundary.
    pub(crate) fn visit_leader_epochs_below(
        &self,
        end: u64,
        visit: &mut dyn FnMut(FrameEpoch) -> Result<()>,
    ) -> Result<()> {
        let mut walker = BatchWalker::new(&self.log, &self.log_path, end);
        walker.set_read_ahead(WINDOW_BYTES);
        let mut position = 0;
        loop {
            let frame = match walker.frame_at(position)? {
                Step::Batch(frame) => frame,
                Step::End => return Ok(()),
                Step::Partial { available, needed } => {
                    return Err(self.corrupt(position, Corruption::Truncated { needed, available }));
                }
            };
            position = frame.position + frame.total_size;
            if frame.magic != 2 {
                visit(FrameEpoch::Legacy)?;
                continue;
            }
            let header = BatchHeader::parse(walker.fill(frame.position, RECORD_BATCH_OVERHEAD)?)
                .map_err(|what| self.corrupt(frame.position, what))?;
            visit(FrameEpoch::V2 {
                epoch: header.partition_leader_epoch,
                base_offset: header.base_offset,
            })?;
        }
    }
}
