//! The log's view of its segments: an immutable list swapped atomically, with lazily opened,
//! pinned segments (ARCHITECTURE.md §3, invariant 10).
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
use crate::workers::{IdleSegments, SegmentBudget};

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
    segments: Arc<OpenSegments>,
    opener: SegmentOpener,
    /// The log's own bound on open sealed segments, when no shared budget bounds them.
    max_open: usize,
}

/// The list and what is open of it: shared with the [`SegmentBudget`] of the log's
/// [`Workers`](crate::Workers), when it has one, which may close its idle segments.
#[derive(Debug)]
struct OpenSegments {
    current: RwLock<Arc<SegmentList>>,
    opened: AtomicUsize,
    use_clock: Arc<AtomicU64>,
    budget: Option<Arc<SegmentBudget>>,
}

impl OpenSegments {
    fn load(&self) -> Arc<SegmentList> {
        Arc::clone(&self.current.read())
    }

    fn note_opened(&self) {
        self.opened.fetch_add(1, Ordering::Relaxed);
        if let Some(budget) = &self.budget {
            budget.opened(1);
        }
    }

    fn note_closed(&self) {
        self.opened.fetch_sub(1, Ordering::Relaxed);
        if let Some(budget) = &self.budget {
            budget.closed(1);
        }
    }

    /// The open sealed segments, least recently used first.
    fn open_sealed(list: &SegmentList) -> Vec<&Arc<SegmentHandle>> {
        let Some((_, sealed)) = list.handles().split_last() else {
            return Vec::new();
        };
        let mut open: Vec<&Arc<SegmentHandle>> =
            sealed.iter().filter(|h| h.if_open().is_some()).collect();
        open.sort_by_key(|h| h.last_used.load(Ordering::Relaxed));
        open
    }

    /// Closes `handle`'s segment, if open (a reader that pins it keeps its descriptors).
    fn close(&self, handle: &SegmentHandle) -> bool {
        let closed = handle.open.lock().take().is_some();
        if closed {
            self.note_closed();
        }
        closed
    }
}

impl IdleSegments for OpenSegments {
    fn oldest_idle(&self) -> Option<u64> {
        let list = self.load();
        OpenSegments::open_sealed(&list)
            .first()
            .map(|h| h.last_used.load(Ordering::Relaxed))
    }

    fn close_oldest_idle(&self) -> bool {
        let list = self.load();
        OpenSegments::open_sealed(&list)
            .first()
            .is_some_and(|h| self.close(h))
    }
}

impl Drop for OpenSegments {
    fn drop(&mut self) {
        if let Some(budget) = &self.budget {
            budget.closed(self.opened.load(Ordering::Relaxed));
        }
    }
}

impl Snapshot {
    /// A snapshot of `list`, keeping at most `max_open` sealed segments open, or as many as
    /// `budget` allows the logs sharing it together.
    pub fn new(
        list: Arc<SegmentList>,
        opener: SegmentOpener,
        max_open: usize,
        budget: Option<Arc<SegmentBudget>>,
    ) -> Self {
        let opened = list
            .handles()
            .iter()
            .filter(|h| h.if_open().is_some())
            .count();
        let use_clock = match &budget {
            Some(budget) => budget.use_clock(),
            None => Arc::new(AtomicU64::new(0)),
        };
        if let Some(budget) = &budget {
            budget.opened(opened);
        }
        let segments = Arc::new(OpenSegments {
            current: RwLock::new(list),
            opened: AtomicUsize::new(opened),
            use_clock,
            budget: budget.clone(),
        });
        if let Some(budget) = &budget {
            let member: Arc<dyn IdleSegments> = Arc::clone(&segments) as Arc<dyn IdleSegments>;
            budget.join(Arc::downgrade(&member));
        }
        Snapshot {
            segments,
            opener,
            max_open: max_open.max(2),
        }
    }

    /// The current list.
    pub fn load(&self) -> Arc<SegmentList> {
        Arc::clone(&self.segments.current.read())
    }

    /// Swaps in a new list. `removed` are the handles that leave the log for good: they are
    /// marked under the write lock, so no reader can open them afterwards. Returns, for each of
    /// them, the segment it had open: a reader may pin that one still, and no other.
    pub fn swap(
        &self,
        list: Arc<SegmentList>,
        removed: &[Arc<SegmentHandle>],
    ) -> Vec<Option<Arc<Segment>>> {
        let mut current = self.segments.current.write();
        let mut taken = Vec::with_capacity(removed.len());
        for handle in removed {
            handle.mark_removed();
            let segment = handle.open.lock().take();
            if segment.is_some() {
                self.segments.note_closed();
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
        let mut current = self.segments.current.write();
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
                self.segments.note_closed();
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
        let tick = self.segments.use_clock.load(Ordering::Relaxed);
        if handle.last_used.load(Ordering::Relaxed) != tick {
            handle.last_used.store(tick, Ordering::Relaxed);
        }
        let newly_opened = loop {
            let list = self.segments.current.read();
            if handle.removed.load(Ordering::Acquire) {
                return Ok(None);
            }
            let mut open = handle.open.lock();
            if let Some(segment) = open.as_ref() {
                return Ok(Some(Arc::clone(segment)));
            }
            let segment = match self.open_segment(handle.base_offset) {
                Ok(segment) => Arc::new(segment),
                // Out of descriptors: close an idle segment (of any log sharing the budget)
                // and try again, outside the locks; fail only when none is left to close.
                Err(error) if out_of_descriptors(&error) => {
                    drop(open);
                    drop(list);
                    if self.close_one_idle() {
                        continue;
                    }
                    return Err(error);
                }
                Err(error) => return Err(error),
            };
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
            self.segments.note_opened();
            // A new epoch, which the segment just opened starts: it is the most recently used.
            let epoch = self.segments.use_clock.fetch_add(1, Ordering::Relaxed) + 1;
            handle.last_used.store(epoch, Ordering::Relaxed);
            break segment;
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
                // The writer appended the segment's last batch before it created the next
                // segment, which made this one sealed: its `.log` ends on a batch boundary, and
                // bytes after the last valid batch are damage (ARCHITECTURE.md §8, "Reading a
                // damaged log"), unless they are the zeros a preallocated file holds until the
                // seal trims it, just after the next segment was created. A read that reaches
                // them reports them.
                let report = segment.scan()?;
                if let Some(invalid) = report.first_invalid
                    && !segment.is_zero_from(invalid.position)?
                {
                    // The valid batches before them stay readable, up to the damage.
                    segment.note_damage(invalid);
                }
                Ok(segment)
            }
            other => other,
        }
    }

    /// Closes least recently used sealed segments while more than `max_open` are open, or,
    /// under a shared budget, while the logs sharing it hold more than it allows. A closed
    /// segment's descriptor lives on in any reader that still pins it.
    fn close_idle(&self) {
        if let Some(budget) = &self.segments.budget {
            budget.close_excess();
            return;
        }
        if self.segments.opened.load(Ordering::Relaxed) <= self.max_open {
            return;
        }
        let list = self.load();
        let excess = self
            .segments
            .opened
            .load(Ordering::Relaxed)
            .saturating_sub(self.max_open);
        for handle in OpenSegments::open_sealed(&list).into_iter().take(excess) {
            self.segments.close(handle);
        }
    }

    /// Closes one idle segment, of this log or (under a shared budget) of any: after the
    /// system refused a descriptor. False if none is open.
    fn close_one_idle(&self) -> bool {
        match &self.segments.budget {
            Some(budget) => budget.close_one(),
            None => self.segments.close_oldest_idle(),
        }
    }

    /// Closes every sealed segment, as [`close_idle`](Self::close_idle) closes the least
    /// recently used: for a closed log, whose reads have ended. A reader that still pins one
    /// keeps its descriptors until it lets go. The active segment stays open: the writer state
    /// holds it until the log is dropped.
    pub fn close_sealed(&self) {
        let list = self.load();
        let Some((_, sealed)) = list.handles().split_last() else {
            return;
        };
        for handle in sealed {
            self.segments.close(handle);
        }
    }

    /// How many segments are open (for stats and the descriptor test).
    pub fn open_count(&self) -> usize {
        self.segments.opened.load(Ordering::Relaxed)
    }

    /// Records that a handle was opened outside [`pin`](Self::pin) (a new active segment), and
    /// closes idle sealed segments as `pin` does: a writer that only rolls, with no reader,
    /// would otherwise keep every segment it sealed open, one descriptor per file.
    pub fn note_opened(&self) {
        self.segments.note_opened();
        self.close_idle();
    }
}

/// Whether `error` is the system refusing a descriptor: this process's (`EMFILE`) or the
/// system's (`ENFILE`) limit.
fn out_of_descriptors(error: &Error) -> bool {
    matches!(
        error,
        Error::Io { source, .. }
            if matches!(source.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
    )
}

#[cfg(test)]
mod tests {
    /// Model-checked with shuttle (`RUSTFLAGS="--cfg shuttle"`, see `crate::sync`).
    #[cfg(shuttle)]
    mod shuttle_tests {
        use std::path::Path;

        use super::super::*;
        use crate::format::{BatchBuilder, BatchHeader, Compression};
        use crate::log::files::deleted::PendingDeletes;
        use crate::segment::{
            DELETED_SUFFIX, SegmentFileKind, rename_segment_files, segment_file_path,
        };
        use crate::storage::SimStorage;
        use crate::sync::thread;

        const T0: i64 = 1_700_000_000_000;

        fn config() -> SegmentConfig {
            SegmentConfig {
                segment_bytes: 1 << 20,
                segment_index_bytes: 1 << 12,
                index_interval_bytes: 256,
                ..SegmentConfig::default()
            }
        }

        /// A segment at `base` holding one batch of 3 records.
        fn segment(storage: &Arc<dyn Storage>, dir: &Path, base: i64) -> Segment {
            let segment = Segment::create(storage, dir, base, config(), T0).unwrap();
            let mut builder = BatchBuilder::new(Compression::None).base_offset(base);
            for i in 0..3 {
                builder.push_parts::<&str>(T0 + base + i, Some(b"key"), Some(b"value"), &[]);
            }
            segment.append(&builder.build().unwrap()).unwrap();
            segment
        }

        fn exists(storage: &Arc<dyn Storage>, path: &Path) -> bool {
            storage.exists(path).unwrap()
        }

        /// The `.log` file of the segment at `base`, under its own name or renamed `.deleted`.
        fn log_file_exists(storage: &Arc<dyn Storage>, dir: &Path, base: i64) -> bool {
            let log = segment_file_path(dir, base, SegmentFileKind::Log);
            let mut deleted = log.clone().into_os_string();
            deleted.push(DELETED_SUFFIX);
            exists(storage, &log) || exists(storage, Path::new(&deleted))
        }

        #[test]
        fn shuttle_a_deleted_segments_files_outlive_every_pin_and_go_after_the_last() {
            crate::sync::check(
                "shuttle_a_deleted_segments_files_outlive_every_pin_and_go_after_the_last",
                || {
                    const READERS: usize = 2;
                    let dir = Path::new("/log/topic-0");
                    let storage: Arc<dyn Storage> = Arc::new(SimStorage::new(7));
                    storage.create_dir_all(dir).unwrap();
                    // Sealed segments at 0 and 3, the active one at 6.
                    for base in [0, 3] {
                        segment(&storage, dir, base).seal().unwrap();
                    }
                    let active = Arc::new(segment(&storage, dir, 6));
                    let first = SegmentHandle::closed(0);
                    let list = SegmentList::new(vec![
                        Arc::clone(&first),
                        SegmentHandle::closed(3),
                        SegmentHandle::opened(active),
                    ]);
                    let opener = SegmentOpener {
                        storage: Arc::clone(&storage),
                        dir: dir.to_path_buf(),
                        config: config(),
                        role: SegmentRole::Sealed,
                        live: false,
                    };
                    // At most two open: pins close idle segments while the writer deletes one.
                    let snapshot = Arc::new(Snapshot::new(list, opener, 2, None));
                    // The instance of segment 0 the deletion took from its handle, once taken.
                    let taken: Arc<Mutex<Option<std::sync::Weak<Segment>>>> =
                        Arc::new(Mutex::new(None));

                    let readers: Vec<_> = (0..READERS)
                        .map(|_| {
                            let (snapshot, storage, taken) = (
                                Arc::clone(&snapshot),
                                Arc::clone(&storage),
                                Arc::clone(&taken),
                            );
                            thread::spawn(move || {
                                for _ in 0..2 {
                                    // Offset 0, or the first offset left once segment 0 is gone.
                                    let pinned = loop {
                                        let list = snapshot.load();
                                        let handle = &list.handles()[list.floor_index(0)];
                                        match snapshot.pin(handle) {
                                            Ok(Some(segment)) => break segment,
                                            Ok(None) => continue,
                                            Err(error) => panic!("pin failed: {error}"),
                                        }
                                    };
                                    let base = pinned.base_offset();
                                    let mut buf = Vec::new();
                                    let read = pinned
                                        .read(base, 1 << 16, None, &mut buf)
                                        .unwrap_or_else(|e| {
                                            panic!("read of pinned {base} failed: {e}")
                                        })
                                        .unwrap_or_else(|| panic!("pinned {base} read nothing"));
                                    assert_eq!(read.len, buf.len());
                                    assert_eq!(BatchHeader::parse(&buf).unwrap().base_offset, base);
                                    let deleted_instance = taken
                                        .lock()
                                        .as_ref()
                                        .and_then(std::sync::Weak::upgrade)
                                        .is_some_and(|t| Arc::ptr_eq(&t, &pinned));
                                    if deleted_instance {
                                        assert!(
                                            log_file_exists(&storage, dir, 0),
                                            "segment 0's file was removed while a reader pins it"
                                        );
                                    }
                                    drop(pinned);
                                }
                            })
                        })
                        .collect();

                    // The writer: segment 0 leaves the list, its files are renamed `.deleted`, and
                    // are removed once no reader pins it (as a truncation or retention does).
                    let current = snapshot.load();
                    let kept = SegmentList::new(current.handles()[1..].to_vec());
                    let open_removed = snapshot.swap(kept, std::slice::from_ref(&first));
                    let segment = open_removed.into_iter().next().flatten();
                    *taken.lock() = segment.as_ref().map(Arc::downgrade);
                    let paths = rename_segment_files(&*storage, dir, 0, DELETED_SUFFIX).unwrap();
                    let mut pending = PendingDeletes::default();
                    pending.push(paths, segment);
                    while !pending.is_empty() {
                        for ready in pending.take_unpinned(false) {
                            for path in ready.paths() {
                                storage.remove(path).unwrap();
                            }
                        }
                        thread::yield_now();
                    }

                    for reader in readers {
                        reader.join().unwrap();
                    }
                    assert!(
                        !log_file_exists(&storage, dir, 0),
                        "segment 0's file outlived its pins"
                    );
                    for kind in [SegmentFileKind::OffsetIndex, SegmentFileKind::TimeIndex] {
                        assert!(!exists(&storage, &segment_file_path(dir, 0, kind)));
                    }
                    assert!(exists(
                        &storage,
                        &segment_file_path(dir, 3, SegmentFileKind::Log)
                    ));
                    assert!(first.removed.load(Ordering::SeqCst));
                },
            );
        }
    }
}
