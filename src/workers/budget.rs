//! [`SegmentBudget`]: how many sealed segments the logs of one [`Workers`](crate::Workers) keep
//! open together (each holds its `.log`, `.index` and `.timeindex`), in place of each log's own
//! bound. A log that opens one beyond the budget closes the least recently used idle one of
//! whichever log holds it; one refused a descriptor (`EMFILE`) closes idle ones and retries.

use crate::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use crate::sync::{Arc, Mutex, Weak};

/// One log's open segments, as the budget sees them.
pub(crate) trait IdleSegments: Send + Sync {
    /// The use epoch of its least recently used open sealed segment nobody reads (`None`:
    /// none is open).
    fn oldest_idle(&self) -> Option<u64>;
    /// Closes that segment; false if there was none.
    fn close_oldest_idle(&self) -> bool;
}

/// See the [module docs](self).
pub(crate) struct SegmentBudget {
    /// Sealed segments the logs may keep open together, beyond each log's active one.
    limit: usize,
    /// Segments open across the logs, the active ones included.
    open: AtomicUsize,
    /// The use clock every log's segments are stamped from, so that their ages compare.
    use_clock: Arc<AtomicU64>,
    members: Mutex<Vec<Weak<dyn IdleSegments>>>,
}

impl std::fmt::Debug for SegmentBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SegmentBudget")
            .field("limit", &self.limit)
            .field("open", &self.open.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl SegmentBudget {
    /// A budget of `limit` sealed segments (at least 2).
    pub(crate) fn new(limit: usize) -> SegmentBudget {
        SegmentBudget {
            limit: limit.max(2),
            open: AtomicUsize::new(0),
            use_clock: Arc::new(AtomicU64::new(0)),
            members: Mutex::new(Vec::new()),
        }
    }

    /// The shared use clock.
    pub(crate) fn use_clock(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.use_clock)
    }

    /// Adds a log's segments; they leave when the log's state drops.
    pub(crate) fn join(&self, member: Weak<dyn IdleSegments>) {
        let mut members = self.members.lock();
        members.retain(|member| member.strong_count() > 0);
        members.push(member);
    }

    /// `count` more segments are open.
    pub(crate) fn opened(&self, count: usize) {
        self.open.fetch_add(count, Ordering::Relaxed);
    }

    /// `count` fewer segments are open.
    pub(crate) fn closed(&self, count: usize) {
        self.open.fetch_sub(count, Ordering::Relaxed);
    }

    /// Closes least recently used idle segments, of any log, while more are open than the
    /// budget (each member's active segment aside).
    pub(crate) fn close_excess(&self) {
        loop {
            let members = self.live_members();
            if self.open.load(Ordering::Relaxed) <= self.limit + members.len() {
                return;
            }
            if !close_oldest(&members) {
                return;
            }
        }
    }

    /// Closes the least recently used idle segment of any log (after `EMFILE`); false if none
    /// is open.
    pub(crate) fn close_one(&self) -> bool {
        close_oldest(&self.live_members())
    }

    fn live_members(&self) -> Vec<Arc<dyn IdleSegments>> {
        self.members
            .lock()
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
    }
}

/// Closes the oldest idle segment among `members`' (taking no member's lock while holding
/// another's).
fn close_oldest(members: &[Arc<dyn IdleSegments>]) -> bool {
    let oldest = members
        .iter()
        .filter_map(|member| Some((member.oldest_idle()?, member)))
        .min_by_key(|(epoch, _)| *epoch);
    oldest.is_some_and(|(_, member)| member.close_oldest_idle())
}
