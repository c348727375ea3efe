//! The log's view of its segments: an immutable list swapped atomically, with lazily opened,
//! pinned segments (DESIGN §4, "The log's view of its segments").
//!
//! - A [`SegmentList`] never changes once built; a roll, a truncation or a deletion builds a new
//!   one and swaps it in under the write side of the snapshot lock.
//! - A reader pins a segment (an `Arc<Segment>` clone) under the read side of that lock, and
//!   only while its [`SegmentHandle`] is still in the current list, so a segment that has left
//!   the list is never reopened by path. A pinned segment keeps its descriptor even if its files
//!   are deleted meanwhile.
//! - Sealed segments are opened on first use and closed again, least recently used first, when
//!   more than `max_open` are open: descriptors stay O(1) in the number of segments.

use crate::sync::Arc;
use crate::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::path::PathBuf;

use crate::sync::{Mutex, RwLock};

use crate::error::{Corruption, Error, Result};
use crate::segment::{Segment, SegmentConfig, SegmentRole};
use crate::storage::Storage;

/// One segment's place in the log: its base offset and, when open, the segment itself.
#[derive(Debug)]
pub(crate) struct SegmentHandle {
    base_offset: i64,
    open: Mutex<Option<Arc<Segment>>>,
    /// Set (under the snapshot write lock) when the handle leaves the list for good.
    removed: AtomicBool,
    /// The log's use clock when the segment was last pinned (an epoch: the clock moves at each
    /// open), for closing the least recently used.
    last_used: AtomicU64,
}

impl SegmentHandle {
    /// A handle for a segment that is not open yet.
    pub fn closed(base_offset: i64) -> Arc<Self> {
        Arc::new(SegmentHandle {
            base_offset,
            open: Mutex::new(None),
            removed: AtomicBool::new(false),
            last_used: AtomicU64::new(0),
        })
    }

    /// A handle for a segment that is already open (the active one, or one recovery scanned).
    pub fn opened(segment: Arc<Segment>) -> Arc<Self> {
        Arc::new(SegmentHandle {
            base_offset: segment.base_offset(),
            open: Mutex::new(Some(segment)),
            removed: AtomicBool::new(false),
            last_used: AtomicU64::new(0),
        })
    }

    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }

    /// The segment if it is open, without opening it.
    pub fn if_open(&self) -> Option<Arc<Segment>> {
        self.open.lock().clone()
    }

    /// Marks the handle as gone from the log. Call under the snapshot write lock.
    pub fn mark_removed(&self) {
        self.removed.store(true, Ordering::Release);
    }
}

/// An immutable, sorted list of segment handles; the last one is the active segment.
#[derive(Debug)]
pub(crate) struct SegmentList {
    handles: Vec<Arc<SegmentHandle>>,
}

impl SegmentList {
    pub fn new(handles: Vec<Arc<SegmentHandle>>) -> Arc<Self> {
        debug_assert!(
            handles
                .windows(2)
                .all(|w| w[0].base_offset < w[1].base_offset)
        );
        Arc::new(SegmentList { handles })
    }

    pub fn handles(&self) -> &[Arc<SegmentHandle>] {
        &self.handles
    }

    pub fn len(&self) -> usize {
        self.handles.len()
    }

    /// The index of the segment that would hold `offset`: the last one whose base is at or
    /// below it (the first one when `offset` is below every base).
    pub fn floor_index(&self, offset: i64) -> usize {
        self.handles
            .partition_point(|h| h.base_offset <= offset)
            .saturating_sub(1)
    }

    pub fn active(&self) -> Option<&Arc<SegmentHandle>> {
        self.handles.last()
    }
}

/// What the snapshot needs to open a sealed segment lazily.
#[derive(Debug)]
pub(crate) struct SegmentOpener {
    pub storage: Arc<dyn Storage>,
    pub dir: PathBuf,
    pub config: SegmentConfig,
    pub role: SegmentRole,
    /// A read-only log following a writer in another process: a segment whose indexes the
    /// writer has not trimmed yet (it is sealing it right now) is scanned, and indexed in
    /// memory, instead of being refused.
    pub live: bool,
}

/// The current segment list plus the machinery to pin and lazily open segments.
#[derive(Debug)]
pub(crate) struct Snapshot {
    current: RwLock<Arc<SegmentList>>,
    opener: SegmentOpener,
    max_open: usize,
    opened: AtomicUsize,
    use_clock: AtomicU64,
}

impl Snapshot {
    pub fn new(list: Arc<SegmentList>, opener: SegmentOpener, max_open: usize) -> Self {
        let opened = list
            .handles()
            .iter()
            .filter(|h| h.if_open().is_some())
            .count();
        Snapshot {
            current: RwLock::new(list),
            opener,
            max_open: max_open.max(2),
            opened: AtomicUsize::new(opened),
            use_clock: AtomicU64::new(0),
        }
    }

    /// The current list.
    pub fn load(&self) -> Arc<SegmentList> {
        Arc::clone(&self.current.read())
    }

    /// Swaps in a new list. `removed` are the handles that leave the log for good: they are
    /// marked under the write lock, so no reader can open them afterwards. Returns, for each of
    /// them, the segment it had open: a reader may pin that one still, and no other.
    pub fn swap(
        &self,
        list: Arc<SegmentList>,
        removed: &[Arc<SegmentHandle>],
    ) -> Vec<Option<Arc<Segment>>> {
        let mut current = self.current.write();
        let mut taken = Vec::with_capacity(removed.len());
        for handle in removed {
            handle.mark_removed();
            let segment = handle.open.lock().take();
            if segment.is_some() {
                self.opened.fetch_sub(1, Ordering::Relaxed);
            }
            taken.push(segment);
        }
        *current = list;
        taken
    }

    /// Replaces `old`, a run of consecutive sealed segments of the current list, by the one
    /// segment `new`, running `on_disk` (the file renames) under the write lock first, so that
    /// no reader opens any of the handles by path half-way. Returns `Ok(None)` when `old` is no
    /// longer such a run (nothing runs then), and otherwise, for each old handle, the segment it
    /// had open (readers may still pin those). If `on_disk` fails, the list is left unchanged
    /// and its error returned.
    pub fn replace(
        &self,
        old: &[Arc<SegmentHandle>],
        new: Arc<SegmentHandle>,
        on_disk: impl FnOnce() -> Result<()>,
    ) -> Result<Option<Vec<Option<Arc<Segment>>>>> {
        let mut current = self.current.write();
        let Some((_, sealed)) = current.handles().split_last() else {
            return Ok(None);
        };
        let Some(index) = (!old.is_empty())
            .then(|| {
                sealed
                    .windows(old.len())
                    .position(|run| run.iter().zip(old).all(|(now, was)| Arc::ptr_eq(now, was)))
            })
            .flatten()
        else {
            return Ok(None);
        };
        on_disk()?;
        let mut handles = current.handles().to_vec();
        handles.splice(index..index + old.len(), [new]);
        let mut taken = Vec::with_capacity(old.len());
        for handle in old {
            handle.mark_removed();
            let segment = handle.open.lock().take();
            if segment.is_some() {
                self.opened.fetch_sub(1, Ordering::Relaxed);
            }
            taken.push(segment);
        }
        *current = SegmentList::new(handles);
        Ok(Some(taken))
    }

    /// Pins the segment of `handle`, opening it if needed. `Ok(None)` means the handle has left
    /// the log: the caller retries on the current list.
    pub fn pin(&self, handle: &SegmentHandle) -> Result<Option<Arc<Segment>>> {
        // The use clock moves only when a segment is opened: recency in epochs between opens is
        // all closing needs, and a read then neither writes the shared clock nor, when the
        // handle was used in this epoch already, the handle (every read pins a segment, and
        // concurrent readers would otherwise bounce those cache lines between cores).
        let tick = self.use_clock.load(Ordering::Relaxed);
        if handle.last_used.load(Ordering::Relaxed) != tick {
            handle.last_used.store(tick, Ordering::Relaxed);
        }
        let newly_opened = {
            let list = self.current.read();
            if handle.removed.load(Ordering::Acquire) {
                return Ok(None);
            }
            let mut open = handle.open.lock();
            if let Some(segment) = open.as_ref() {
                return Ok(Some(Arc::clone(segment)));
            }
            let segment = Arc::new(self.open_segment(handle.base_offset)?);
            // A sealed segment's end comes from its own last batches, whose offsets no CRC
            // covers: one that runs into the next segment's base would hide that segment's
            // first offsets behind wrong ones (FORMAT.md §7).
            let next_base = list
                .handles()
                .iter()
                .find(|h| h.base_offset > handle.base_offset)
                .map(|h| h.base_offset);
            if let Some(next_base) = next_base
                && segment.next_offset() > next_base
            {
                return Err(Error::Corrupt {
                    file: segment.log_path(),
                    position: 0,
                    what: Corruption::OffsetOrder {
                        offset: segment.next_offset() - 1,
                        bound: next_base,
                    },
                });
            }
            *open = Some(Arc::clone(&segment));
            self.opened.fetch_add(1, Ordering::Relaxed);
            // A new epoch, which the segment just opened starts: it is the most recently used.
            let epoch = self.use_clock.fetch_add(1, Ordering::Relaxed) + 1;
            handle.last_used.store(epoch, Ordering::Relaxed);
            segment
        };
        self.close_idle();
        Ok(Some(newly_opened))
    }

    /// Opens the sealed segment at `base_offset` from its files.
    fn open_segment(&self, base_offset: i64) -> Result<Segment> {
        let opener = &self.opener;
        match Segment::open(
            &opener.storage,
            &opener.dir,
            base_offset,
            opener.config.clone(),
            opener.role,
            0,
        ) {
            Err(Error::Corrupt { .. }) if opener.live => {
                let segment = Segment::open_for_recovery(
                    &opener.storage,
                    &opener.dir,
                    base_offset,
                    opener.config.clone(),
                    0,
                    true,
                )?;
                // Only the valid prefix is published; the rest is the writer's to finish.
                segment.scan()?;
                Ok(segment)
            }
            other => other,
        }
    }

    /// Closes least recently used sealed segments while more than `max_open` are open. A
    /// closed segment's descriptor lives on in any reader that still pins it.
    fn close_idle(&self) {
        if self.opened.load(Ordering::Relaxed) <= self.max_open {
            return;
        }
        let list = self.load();
        let Some((_, sealed)) = list.handles().split_last() else {
            return;
        };
        let mut open: Vec<&Arc<SegmentHandle>> =
            sealed.iter().filter(|h| h.if_open().is_some()).collect();
        open.sort_by_key(|h| h.last_used.load(Ordering::Relaxed));
        let excess = self
            .opened
            .load(Ordering::Relaxed)
            .saturating_sub(self.max_open);
        for handle in open.into_iter().take(excess) {
            if handle.open.lock().take().is_some() {
                self.opened.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    /// How many segments are open (for stats and the descriptor test).
    pub fn open_count(&self) -> usize {
        self.opened.load(Ordering::Relaxed)
    }

    /// Records that a handle was opened outside [`pin`](Self::pin) (a new active segment), and
    /// closes idle sealed segments as `pin` does: a writer that only rolls, with no reader,
    /// would otherwise keep every segment it sealed open, one descriptor per file.
    pub fn note_opened(&self) {
        self.opened.fetch_add(1, Ordering::Relaxed);
        self.close_idle();
    }
}
