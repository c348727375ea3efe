//! The index rebuild that a read falls back on when an index entry fails its check
//! ([`Segment::rebuild_indexes_for_read`]).
//!
//! Kept apart from `scan.rs` because it owns no end: a scan validates a file nothing has
//! vouched for and publishes the valid prefix as the segment's end (an open, recovery or a
//! read-only segment's catch-up decide that), while this rebuild runs on a live segment whose
//! published bytes were acknowledged. Bytes below the published end that fail their check are
//! corruption to report, never a reason to move the end (ARCHITECTURE.md §3, invariant 6).

use super::log_segment::{Segment, note_max_timestamp};
use super::scan::IndexRewrite;
use super::walker::{BatchWalker, Step};
use crate::error::{Corruption, Result};
use crate::index::{OffsetPosition, TimestampOffset};

/// The index entries derived from a segment's published bytes, every one of them valid.
struct DerivedEntries {
    /// The offset-index entries, in order.
    offsets: Vec<OffsetPosition>,
    /// The largest timestamp so far at each offset-index entry (the time index's entries).
    times: Vec<TimestampOffset>,
    /// The largest timestamp of the published bytes: a sealed time index's final entry.
    max_timestamp: Option<TimestampOffset>,
}

impl Segment {
    /// Rebuilds both indexes from the bytes the segment has published, for a read whose index
    /// entry failed its check.
    ///
    /// Every published batch is checked first (framing, CRC, offset order and range, and no
    /// offset at or past the published next offset), and the indexes are replaced only if all
    /// pass. A batch that fails is corruption: `Error::Corrupt` naming the `.log` and the
    /// batch's position, and nothing changes. The indexes are left as they were rather than
    /// rebuilt up to the damage because an entry at or past the damage is not known to be
    /// wrong (the damage is usually what made it look so), and a sealed segment's time index
    /// cut there would lose its final entry, which retention reads. Never changes the
    /// segment's size, next offset or anything else its writer owns: those are the log's
    /// acknowledged end, and the next append goes after it.
    pub(super) fn rebuild_indexes_for_read(&self) -> Result<()> {
        if self.indexes_sealed() {
            // Sealed: no append moves the end while the indexes are written and synced, which
            // happens without the writer lock (as every fsync does).
            let entries = {
                let writer = self.writer.lock();
                self.derive_index_entries(writer.size, writer.next_offset)?
            };
            return self.rewrite_sealed_indexes(|| {
                self.offset_index.reset()?;
                self.time_index.reset()?;
                self.append_derived(&entries)?;
                Ok(IndexRewrite::Keep {
                    answer: (),
                    final_time_entry: entries.max_timestamp,
                })
            });
        }
        // Active: the writer lock keeps appends, and their index entries, out until the
        // indexes describe every published batch again.
        let mut writer = self.writer.lock();
        let entries = self.derive_index_entries(writer.size, writer.next_offset)?;
        writer.index_room = None;
        self.offset_index.reset()?;
        self.time_index.reset()?;
        self.append_derived(&entries)
    }

    /// Checks every batch of the first `end` bytes and derives the index entries a scan would
    /// write for them; a batch that fails its check, or holds an offset at or above
    /// `next_offset` (the published next offset), fails it with `Error::Corrupt`.
    fn derive_index_entries(&self, end: u64, next_offset: i64) -> Result<DerivedEntries> {
        // A segment's positions fit an index entry's 32 bits (Kafka's limit, as in `scan`).
        let mut walker = BatchWalker::new(&self.log, &self.log_path, end.min(i32::MAX as u64));
        let mut entries = DerivedEntries {
            offsets: Vec::new(),
            times: Vec::new(),
            max_timestamp: None,
        };
        let mut position = 0;
        let mut follows = self.base_offset;
        let mut bytes_since = 0u64;
        loop {
            let frame = match walker.frame_at(position)? {
                Step::Batch(frame) => frame,
                Step::End => return Ok(entries),
                // The published end lies on a batch boundary: a frame running past it is a
                // damaged length.
                Step::Partial { available, needed } => {
                    return Err(self.corrupt(position, Corruption::Truncated { needed, available }));
                }
            };
            let summary = match self.check_scanned_batch(&mut walker, &frame, follows)? {
                Ok((summary, _)) if summary.last_offset >= next_offset => {
                    let what = Corruption::OffsetOrder {
                        offset: summary.last_offset,
                        bound: next_offset,
                    };
                    return Err(self.corrupt(position, what));
                }
                Ok((summary, _)) => summary,
                Err(what) => return Err(self.corrupt(position, what)),
            };
            note_max_timestamp(&mut entries.max_timestamp, &summary);
            if bytes_since > u64::from(self.config.index_interval_bytes) {
                entries.offsets.push(OffsetPosition {
                    offset: summary.last_offset,
                    // Below the walker's bound, `i32::MAX`.
                    position: position as u32,
                });
                entries.times.extend(entries.max_timestamp);
                bytes_since = 0;
            }
            bytes_since += frame.total_size;
            follows = summary.next_offset();
            position += frame.total_size;
        }
    }

    /// Appends `entries` to the (empty, writable) indexes, as far as they take them.
    fn append_derived(&self, entries: &DerivedEntries) -> Result<()> {
        for entry in &entries.offsets {
            if self.offset_index.is_full() {
                break;
            }
            self.offset_index.append(entry.offset, entry.position)?;
        }
        for max in &entries.times {
            if self.time_index.is_full() {
                break;
            }
            self.time_index
                .maybe_append(max.timestamp, max.offset, false)?;
        }
        Ok(())
    }
}
