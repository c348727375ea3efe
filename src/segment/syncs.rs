//! [`SegmentSyncs`]: a segment's syncs, one at a time, and none after a failed one.
//!
//! After a failed fsync Linux may have dropped the pages it could not write and marked them
//! clean, so a later fsync of the file finds nothing to write and succeeds ("fsyncgate",
//! ARCHITECTURE.md §8, "Failed fsyncs"). Two threads may sync one segment: a group commit's
//! leader, and the flusher or a retention pass syncing sealed segments alone. If the second
//! sync ran while the first was failing, it could report success for the very bytes the first
//! lost, before the log learned it was poisoned. So a segment's syncs run one at a time, and
//! once one has failed, every later one fails without asking the OS.

use crate::error::{Error, Result};
use crate::sync::thread::{self, ThreadId};
use crate::sync::{Condvar, Mutex};

/// Serializes the syncs of one segment's files and remembers a failure (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct SegmentSyncs {
    state: Mutex<SyncsState>,
    released: Condvar,
}

#[derive(Debug, Default)]
struct SyncsState {
    /// The thread running a sync, and how many it has entered. Re-entrant for that thread: a
    /// storage seam may call back into the log from inside a sync (the concurrent crash
    /// tests' hooks run a truncation there), and a plain lock would wait on itself.
    owner: Option<(ThreadId, u32)>,
    /// A sync of the segment failed: the log is poisoned, and nothing more of it is vouched for.
    failed: bool,
}

impl SegmentSyncs {
    /// Runs `sync` once no other thread is syncing the segment, unless a sync has failed
    /// before: then it returns [`Error::Poisoned`] and does not run it.
    pub(crate) fn run(&self, sync: impl FnOnce() -> Result<()>) -> Result<()> {
        let me = thread::current().id();
        {
            let mut state = self.state.lock();
            while state.owner.is_some_and(|(owner, _)| owner != me) {
                self.released.wait(&mut state);
            }
            if state.failed {
                return Err(Error::Poisoned);
            }
            let depth = state.owner.map_or(0, |(_, depth)| depth);
            state.owner = Some((me, depth + 1));
        }
        // Released however `sync` ends, a panic included, or the next sync would wait forever.
        let entered = Entered { syncs: self };
        let result = sync();
        if result.is_err() {
            self.state.lock().failed = true;
        }
        drop(entered);
        result
    }
}

/// One entry into [`SegmentSyncs::run`]; leaving it releases the segment at the outermost.
struct Entered<'a> {
    syncs: &'a SegmentSyncs,
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        let mut state = self.syncs.state.lock();
        state.owner = match state.owner {
            Some((owner, depth)) if depth > 1 => Some((owner, depth - 1)),
            _ => None,
        };
        if state.owner.is_none() {
            drop(state);
            self.syncs.released.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn io_error() -> Error {
        Error::Io {
            path: "/p-0/00000000000000000000.log".into(),
            source: std::io::Error::other("EIO"),
        }
    }

    #[test]
    fn a_failure_fails_every_later_sync_without_running_it() {
        let syncs = SegmentSyncs::default();
        syncs.run(|| Ok(())).unwrap();
        assert!(matches!(
            syncs.run(|| Err(io_error())),
            Err(Error::Io { .. })
        ));
        let ran = AtomicBool::new(false);
        let later = syncs.run(|| {
            ran.store(true, Ordering::Relaxed);
            Ok(())
        });
        assert!(matches!(later, Err(Error::Poisoned)));
        assert!(!ran.load(Ordering::Relaxed));
    }

    #[test]
    fn the_thread_inside_a_sync_may_enter_another() {
        let syncs = SegmentSyncs::default();
        syncs.run(|| syncs.run(|| Ok(()))).unwrap();
        // And a failure inside fails the rest of the outer sync's successors too.
        let nested = syncs.run(|| {
            let _ = syncs.run(|| Err(io_error()));
            Ok(())
        });
        assert!(nested.is_ok());
        assert!(matches!(syncs.run(|| Ok(())), Err(Error::Poisoned)));
    }

    /// A second thread's sync waits for the first to end, and then sees its failure.
    #[test]
    fn a_sync_waiting_on_a_failing_one_fails_too() {
        let syncs = Arc::new(SegmentSyncs::default());
        let (entered_tx, entered_rx) = std::sync::mpsc::channel();
        let (fail_tx, fail_rx) = std::sync::mpsc::channel::<()>();
        let first = {
            let syncs = Arc::clone(&syncs);
            std::thread::spawn(move || {
                syncs.run(|| {
                    entered_tx.send(()).unwrap();
                    fail_rx.recv().unwrap();
                    Err(io_error())
                })
            })
        };
        entered_rx.recv().unwrap();
        let second = {
            let syncs = Arc::clone(&syncs);
            std::thread::spawn(move || syncs.run(|| Ok(())))
        };
        // Whether the second thread has reached the wait or not, it cannot pass before the
        // first sync ends, and the first fails.
        fail_tx.send(()).unwrap();
        assert!(matches!(first.join().unwrap(), Err(Error::Io { .. })));
        assert!(matches!(second.join().unwrap(), Err(Error::Poisoned)));
    }
}
