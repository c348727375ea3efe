//! Rolling the active segment: [`Log::roll`], and the rolls that appends, a follower's gap and
//! the segment limits ask for (`Shared::roll`, `Shared::roll_at`), with the random draw of the
//! roll jitter. A roll seals the active segment, starts the next one at the log end, and leaves
//! the sealed one to the flusher to sync.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::segment::Segment;

use crate::log::observe;
use crate::log::segments::snapshot::{SegmentHandle, SegmentList};
use crate::log::{LogEvent, Shared, Writer};

impl Shared {
    /// See [`Log::roll`](crate::Log::roll).
    pub(in crate::log) fn roll_now(&self) -> Result<i64> {
        self.check_writable()?;
        let shared = self;
        let mut writer = shared.writer.lock();
        // Again under the writer lock: a close or a poison may have come while it was taken.
        self.check_writable()?;
        shared.roll(&mut writer, shared.clock.now_ms())?;
        Ok(writer.tail.active().base_offset())
    }

    /// Rolls to a new active segment at the log end offset. All or nothing: if the new segment
    /// cannot be created or the old one sealed, the old one stays active and the error returns.
    pub(in crate::log) fn roll(&self, writer: &mut Writer, now_ms: i64) -> Result<()> {
        self.roll_at(writer, writer.tail.log_end_offset(), now_ms)
    }

    /// [`roll`](Self::roll) to a new active segment at `base`, or at the log end offset if
    /// that is higher: a follower's call rolls at its first offset (Kafka's `maybeRoll`), so
    /// that a batch past a compacted leader's gap fits the new segment's 32-bit relative
    /// offsets. A gap moves the log end (and the producer state's map end) to `base` with the
    /// roll, before its producer snapshot: the log is then what an open of its files finds
    /// (the empty segment at `base` ends it), whether or not the append that rolled is written.
    pub(in crate::log) fn roll_at(
        &self,
        writer: &mut Writer,
        base: i64,
        now_ms: i64,
    ) -> Result<()> {
        let base = base.max(writer.tail.log_end_offset());
        let old = Arc::clone(writer.tail.active());
        if old.base_offset() == base && old.size() == 0 {
            return Ok(());
        }
        self.consume_clean_shutdown(writer)?;
        let jitter = self.config.draw_roll_jitter(writer.tail.next_jitter());
        let segment_config = self.config.segment_config(jitter);
        let new = Arc::new(Segment::create(
            &self.storage,
            &self.dir,
            base,
            segment_config,
            now_ms,
        )?);
        if let Err(error) = old.seal() {
            for path in new.file_paths() {
                if let Err(cleanup) = self.storage.remove(&path) {
                    log::warn!("removing {} after a failed roll: {cleanup}", path.display());
                }
            }
            if let Err(unseal) = old.unseal() {
                log::error!(
                    "could not reactivate {}: {unseal}",
                    old.log_path().display()
                );
                self.durability.poison();
            }
            return Err(error);
        }
        // The sealed `.log`'s mtime is its append time for time retention, from the log's clock;
        // the flusher's sync of the sealed segment makes it durable.
        match self.storage.set_mtime(&old.log_path(), now_ms) {
            Ok(()) => {}
            Err(Error::Unsupported { .. }) => {}
            Err(error) => log::warn!(
                "{}: could not set its mtime (time retention falls back to the file system's): {error}",
                old.log_path().display()
            ),
        }
        let list = self.view.segments().load();
        let mut handles = list.handles().to_vec();
        handles.push(SegmentHandle::opened(Arc::clone(&new)));
        self.view.segments().swap(SegmentList::new(handles), &[]);
        self.view.segments().note_opened();
        let old_base = old.base_offset();
        writer.tail.rolled(new);
        self.counters.note_roll();
        if base > writer.tail.log_end_offset() {
            writer.tail.set_log_end_offset(base);
            writer.producers.update_map_end_offset(base);
            self.view.advance_log_end(base);
        }
        observe::notify(
            self.config.observer.as_ref(),
            LogEvent::Roll {
                old_base,
                new_base: base,
            },
        );
        // Kafka's snapshot at every roll, at the new segment's base: recovery replays the
        // producer state from the newest snapshot at or below where it starts scanning, so
        // this bounds that replay to about a segment. Written in place without its fsyncs,
        // which the flusher's next sync makes (`take_roll_snapshot`), as Kafka defers them to
        // its scheduler. A failure fails the append that rolled (the roll itself stands), as
        // it does in Kafka.
        self.take_roll_snapshot(writer)?;
        self.durability.signal_roll();
        log::debug!("rolled {} to a new segment at {base}", self.dir.display());
        Ok(())
    }
}
