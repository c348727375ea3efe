//! A read-only log that follows a writer in another process (`allow_live_writer`):
//! [`Log::refresh`], the rate-limited poll that reads and getters run first, the wait for data
//! that polls, and the reloads of the log's view from the writer's files.
//!
//! They are apart from the writer's code because they run only in a log that never writes:
//! there the writer mutex guards nothing but the view these reloads rebuild (ARCHITECTURE.md §5,
//! "Reading a log another process writes").

use std::sync::Arc;
use std::time::Instant;

use crate::error::Result;
use crate::segment::Segment;

use crate::log::files::checkpoint::{self, CheckpointFile};
use crate::log::recovery;
use crate::log::segments::snapshot::{SegmentHandle, SegmentList};
use crate::log::{Shared, Writer};

impl Shared {
    /// See [`Log::refresh`](crate::Log::refresh).
    pub(in crate::log) fn refresh(&self) -> Result<bool> {
        self.check_open()?;
        let Some(live) = &self.live else {
            return Ok(false);
        };
        live.poll_now(|| self.refresh_live())
    }

    /// [`refresh`](Self::refresh) when the poll interval has passed and no other thread is
    /// polling. A failed poll keeps the old view (the next one tries again): a reader must not
    /// fail because the writer was half-way through a roll when it looked.
    pub(in crate::log) fn poll_live(&self) {
        let Some(live) = &self.live else {
            return;
        };
        live.poll_if_due(
            || self.view.is_closed(),
            || {
                if let Err(error) = self.refresh_live() {
                    log::debug!(
                        "{}: polling the live writer's files: {error}",
                        self.dir.display()
                    );
                }
            },
        );
    }

    /// [`wait_for_data`](Self::wait_for_data) on a log another process writes: no append here
    /// moves the log end, so the wait polls, once per poll interval.
    pub(in crate::log) fn wait_for_live_data(
        &self,
        offset: i64,
        deadline: Option<Instant>,
    ) -> bool {
        let shared = self;
        loop {
            self.poll_live();
            let end = shared.view.log_end();
            if end > offset || shared.view.is_closed() {
                return end > offset;
            }
            let now = Instant::now();
            if deadline.is_some_and(|deadline| now >= deadline) {
                return false;
            }
            let next_poll = now + shared.config.poll_interval;
            let wake = deadline.map_or(next_poll, |deadline| deadline.min(next_poll));
            // Woken early only by close (or a truncation the poll saw).
            shared
                .view
                .log_end_mark()
                .wait_above(offset, Some(wake), || shared.view.is_closed());
        }
    }

    /// The log start offset, after a live reader's poll when one is due.
    pub(in crate::log) fn log_start_offset(&self) -> i64 {
        self.poll_live();
        self.view.log_start()
    }

    /// The log end offset, after a live reader's poll when one is due.
    pub(in crate::log) fn log_end_offset(&self) -> i64 {
        self.poll_live();
        self.view.log_end()
    }

    /// The durable offset, after a live reader's poll when one is due.
    pub(in crate::log) fn durable_offset(&self) -> i64 {
        self.poll_live();
        self.durability.durable_offset()
    }

    /// One look at a live writer's directory; see [`Log::refresh`]. Runs under the writer
    /// mutex, which a read-only log uses for nothing else.
    fn refresh_live(&self) -> Result<bool> {
        let mut writer = self.writer.lock();
        let record = CheckpointFile::read(&self.storage, &self.dir)?;
        // Before any segment listed below reaches a reader: the writer sets the flag before it
        // makes a gap, so a listing taken after this read holds no gap the flag does not cover.
        self.note_live_compacted(record.is_some_and(|r| r.compacted));
        let bases = crate::segment::list_segment_bases(&*self.storage, &self.dir)?;
        let Some(&last_base) = bases.last() else {
            // Between a writer's deletion and its creation of a segment: look again later.
            return Ok(false);
        };
        let active = Arc::clone(writer.tail.active());
        let active_base = active.base_offset();
        let shrank = match active.file_len() {
            Ok(len) => len < active.size(),
            Err(error) if error.io_kind() == Some(std::io::ErrorKind::NotFound) => true,
            Err(error) => return Err(error),
        };
        // A writer that removed the segment and created another at the same base between two
        // looks (a truncation below it, then appends and a roll at the same offset): the name
        // is back, but it is another file.
        let replaced = match self.storage.metadata(&active.log_path()) {
            Ok(metadata) => match (metadata.file_id, active.log_file_id()?) {
                (Some(named), Some(open)) => named != open,
                _ => false,
            },
            Err(error) if error.io_kind() == Some(std::io::ErrorKind::NotFound) => true,
            Err(error) => return Err(error),
        };
        if shrank
            || replaced
            || bases.binary_search(&active_base).is_err()
            || last_base < active_base
        {
            self.reload_live(&mut writer)?;
            let end = writer.tail.log_end_offset();
            self.follow_live_producer_state(&mut writer, end, true)?;
            self.follow_live_leader_epochs(end);
            return Ok(true);
        }
        let old_end = writer.tail.log_end_offset();
        // The segments listed after the active one were created after its last batch was
        // written, so catching up now reads it to its end.
        active.catch_up()?;

        let list = self.view.segments().load();
        let mut changed = false;
        let mut handles = Vec::with_capacity(bases.len());
        let mut new_active = None;
        for &base in &bases {
            if let Some(handle) = list.handles().iter().find(|h| h.base_offset() == base) {
                handles.push(Arc::clone(handle));
                continue;
            }
            changed = true;
            if base == last_base {
                let segment = Segment::open_for_recovery(
                    &self.storage,
                    &self.dir,
                    base,
                    self.config.segment_config(0),
                    self.clock.now_ms(),
                    true,
                )?;
                // Up to the last complete batch: the rest is being written.
                segment.scan()?;
                let segment = Arc::new(segment);
                handles.push(SegmentHandle::opened(Arc::clone(&segment)));
                new_active = Some(segment);
            } else {
                // A segment sealed since the last look, or a compaction's output: opened on use.
                handles.push(SegmentHandle::closed(base));
            }
        }
        let removed: Vec<_> = list
            .handles()
            .iter()
            .filter(|h| bases.binary_search(&h.base_offset()).is_err())
            .cloned()
            .collect();
        if changed || !removed.is_empty() {
            drop(
                self.view
                    .segments()
                    .swap(SegmentList::new(handles), &removed),
            );
            if let Some(segment) = new_active {
                self.view.segments().note_opened();
                writer.tail.follow_active(segment);
            }
        }
        let new_end = writer.tail.active().next_offset();
        writer.tail.set_log_end_offset(new_end);
        // Before the new end is published: a `read_committed` reader must find a new
        // transaction unstable before it can find its data.
        self.follow_live_producer_state(&mut writer, new_end, false)?;
        self.publish_live_offsets(record, bases.first().copied(), new_end);
        self.follow_live_leader_epochs(new_end);
        Ok(changed || !removed.is_empty() || new_end != old_end)
    }

    /// Rebuilds a live read-only log's view from the directory, after its writer truncated the
    /// log (or crashed and recovered) under it.
    fn reload_live(&self, writer: &mut Writer) -> Result<()> {
        let now_ms = self.clock.now_ms();
        let mut jitter = writer.tail.jitter();
        let recovered = recovery::recover(
            &self.storage,
            &self.dir,
            &self.config,
            true,
            None,
            now_ms,
            &mut jitter,
        )?;
        self.note_live_compacted(recovered.compacted);
        let old_list = self.view.segments().load();
        drop(
            self.view
                .segments()
                .swap(SegmentList::new(recovered.handles), old_list.handles()),
        );
        let new_end = recovered.active.next_offset();
        let old_end = writer.tail.replace_active(recovered.active, new_end);
        if new_end < old_end {
            // Readers above the new end learn that it was cut, not that it is out of range.
            self.view.note_cut_from(old_end);
        }
        self.view.set_log_start(recovered.log_start_offset);
        self.durability
            .observe(recovered.durable_offset.min(new_end));
        self.view.set_log_end(new_end);
        log::info!(
            "{}: the active segment shrank or left the directory; view rebuilt, the log \
             ends at {new_end} (was {old_end})",
            self.dir.display()
        );
        Ok(())
    }

    /// Takes in the `COMPACTED` flag of a checkpoint the writer wrote. Never cleared here: a
    /// reader may still hold segments from before the writer's full truncation cleared it.
    fn note_live_compacted(&self, compacted: bool) {
        if compacted {
            self.view.mark_compacted();
        }
    }

    /// Publishes what a live poll found: the log start offset and the durable offset from the
    /// writer's checkpoint, and the new log end offset.
    fn publish_live_offsets(
        &self,
        record: Option<checkpoint::CheckpointRecord>,
        first_base: Option<i64>,
        end: i64,
    ) {
        if let Some(record) = record {
            let start = record.log_start_offset.max(first_base.unwrap_or(0));
            self.view.set_log_start(start.min(end));
            self.durability.observe(record.recovery_point.clamp(0, end));
        }
        let old_end = self.view.log_end();
        if end != old_end {
            if end < old_end {
                self.view.note_cut_from(old_end);
            }
            self.view.set_log_end(end);
        }
    }
}
