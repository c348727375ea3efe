//! Each thread's copy of the last route it sent through: the topic, the generation of the
//! route table it was copied at, and the route (which shares the table's sticky partitioner and
//! producers). A `send` whose producer, topic and generation match routes with it and takes no
//! lock and no reference count; any write to the table moves the generation on, so the next
//! `send` reads the table and copies the route again.
//!
//! The copy holds the topic's partition producers, so a thread keeps them (and their logs)
//! until it sends through another route or producer, or exits; `TopicProducer::close` drops
//! the closing thread's copy. What an idle thread keeps that way holds nothing another engine
//! needs: the `TopicProducer` closes the producers (its `close`, its drop, a commit, an abort
//! and an epoch bump close the ones they take out of the table), and the engine closes their
//! logs (`Engine::close`, `delete_topic`, and the drop of the engine's last handle), which
//! releases each directory's lock and its sealed segments' files. A closed log keeps only its
//! active segment's and checkpoint's descriptors, and answers every append with `Closed`, so
//! a send through a stale copy fails, and never reaches a reopened engine's logs.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

use super::routes::Route;

/// A thread's copied route.
#[derive(Debug)]
pub(crate) struct CachedRoute {
    /// The [`producer_id`] of the `TopicProducer` it belongs to.
    owner: u64,
    generation: u64,
    topic: Box<str>,
    route: Route,
}

thread_local! {
    static CACHED: RefCell<Option<CachedRoute>> = const { RefCell::new(None) };
}

/// A number no other `TopicProducer` of the process has (an address can be reused).
pub(crate) fn producer_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Runs `use_route` on this thread's copy of `owner`'s route to `topic` if it was copied at
/// `generation`, else `miss` (no such copy, or the copy is in use: a partitioner that sends
/// from inside `send`), after the copy is let go so that `miss` may replace it. Either one's
/// result is returned as it is, built in the caller's place: a result passed out of
/// `LocalKey::try_with` is copied once more, and the send's handle is copied right after the
/// partition producer wrote it (a store-forwarding stall each time).
#[inline(always)]
pub(crate) fn with_cached<T>(
    owner: u64,
    generation: u64,
    topic: &str,
    use_route: impl FnOnce(&Route) -> T,
    miss: impl Fn() -> T,
) -> T {
    let Ok(cell) = CACHED.try_with(std::ptr::from_ref) else {
        return miss();
    };
    // SAFETY: `try_with` answered, so this thread's copy is not being destroyed, and it is
    // destroyed only when this thread exits, which it cannot do during this call; the cell is
    // this thread's alone, and is used only through its `RefCell` borrows.
    let cell = unsafe { &*cell };
    if let Ok(cached) = cell.try_borrow()
        && let Some(cached) = cached.as_ref()
        && cached.owner == owner
        && cached.generation == generation
        && *cached.topic == *topic
    {
        return use_route(&cached.route);
    }
    miss()
}

/// Makes `route`, read from `owner`'s table at `generation`, this thread's copy, unless the
/// copy is already that.
pub(crate) fn store(owner: u64, generation: u64, topic: &str, route: &Route) {
    let _ = CACHED.try_with(|cell| {
        let Ok(mut cached) = cell.try_borrow_mut() else {
            return;
        };
        if let Some(current) = cached.as_ref()
            && current.owner == owner
            && current.generation == generation
            && *current.topic == *topic
        {
            return;
        }
        *cached = Some(CachedRoute {
            owner,
            generation,
            topic: topic.into(),
            route: route.clone(),
        });
    });
}

/// Drops this thread's copy if it is `owner`'s.
pub(crate) fn forget(owner: u64) {
    let _ = CACHED.try_with(|cell| {
        if let Ok(mut cached) = cell.try_borrow_mut()
            && cached.as_ref().is_some_and(|c| c.owner == owner)
        {
            *cached = None;
        }
    });
}
