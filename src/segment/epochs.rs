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

impl Segment {
    /// Calls `visit` for every frame of the segment, in order, reading v2 headers only (no CRC
    /// is checked: the caller reads bytes that recovery, or an earlier open, validated).
    pub(crate) fn visit_leader_epochs(
        &self,
        visit: &mut dyn FnMut(FrameEpoch) -> Result<()>,
    ) -> Result<()> {
        let view = self.read_view();
        let mut walker = BatchWalker::new(&self.log, &self.log_path, view.end);
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
