//! Each thread's copies of the routes it sent through: per producer and topic, the generation
//! of the route table it was copied at, and the route (which shares the table's sticky
//! partitioner and producers). A `send` whose producer, topic and generation match a copy
//! routes with it and takes no lock and no reference count; any write to the table moves the
//! generation on, so the next `send` to a topic reads the table and copies its route again.
//! A thread keeps a copy per topic (up to [`MAX_COPIES`]), so sends that alternate between
//! topics hit their copies too instead of copying a route (a reference count per partition) at
//! every send.
//!
//! The copies hold their topics' partition producers, so a thread keeps them (and their logs)
//! until it replaces them or exits; `TopicProducer::close` drops the closing thread's copies. What an idle thread keeps that way holds nothing another engine
//! needs: the `TopicProducer` closes the producers (its `close`, its drop, a commit, an abort
//! and an epoch bump close the ones they take out of the table), and the engine closes their
//! logs (`Engine::close`, `delete_topic`, and the drop of the engine's last handle), which
//! releases each directory's lock and its sealed segments' files. A closed log keeps only its
//! active segment's and checkpoint's descriptors, and answers every append with `Closed`, so
//! a send through a stale copy fails, and never reaches a reopened engine's logs.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

use super::routes::Route;

/// The most routes a thread keeps copies of; past it, the copies start again from none.
pub(crate) const MAX_COPIES: usize = 64;

/// A thread's copied route.
#[derive(Debug)]
pub(crate) struct CachedRoute {
    /// The [`producer_id`] of the `TopicProducer` it belongs to.
    owner: u64,
    generation: u64,
    topic: Box<str>,
    route: Route,
}

impl CachedRoute {
    fn is_for(&self, owner: u64, topic: &str) -> bool {
        self.owner == owner && *self.topic == *topic
    }
}

/// A thread's copies, and which one the last send used (tried first: a thread that sends to
/// one topic finds its copy at once).
#[derive(Debug, Default)]
pub(crate) struct RouteCopies {
    copies: Vec<CachedRoute>,
    last: usize,
}

impl RouteCopies {
    #[inline(always)]
    fn find(&mut self, owner: u64, topic: &str) -> Option<&CachedRoute> {
        if let Some(copy) = self.copies.get(self.last)
            && copy.is_for(owner, topic)
        {
            return self.copies.get(self.last);
        }
        let found = self.copies.iter().position(|c| c.is_for(owner, topic))?;
        self.last = found;
        self.copies.get(found)
    }
}

thread_local! {
    static CACHED: RefCell<RouteCopies> = RefCell::new(RouteCopies::default());
}

/// A number no other `TopicProducer` of the process has (an address can be reused).
pub(crate) fn producer_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Runs `use_route` on this thread's copy of `owner`'s route to `topic` if it was copied at
/// `generation`, else `miss` (no such copy, or the copies are in use: a partitioner that sends
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
    // SAFETY: `try_with` answered, so this thread's copies are not being destroyed, and they
    // are destroyed only when this thread exits, which it cannot do during this call; the cell
    // is this thread's alone, and is used only through its `RefCell` borrows.
    let cell = unsafe { &*cell };
    if let Ok(mut copies) = cell.try_borrow_mut()
        && let Some(cached) = copies.find(owner, topic)
        && cached.generation == generation
    {
        return use_route(&cached.route);
    }
    miss()
}

/// Makes `route`, read from `owner`'s table at `generation`, this thread's copy of `owner`'s
/// route to `topic`, unless the copy is already that.
pub(crate) fn store(owner: u64, generation: u64, topic: &str, route: &Route) {
    let _ = CACHED.try_with(|cell| {
        let Ok(mut copies) = cell.try_borrow_mut() else {
            return;
        };
        let copies = &mut *copies;
        if let Some(at) = copies.copies.iter().position(|c| c.is_for(owner, topic)) {
            let copy = &mut copies.copies[at];
            if copy.generation != generation {
                copy.generation = generation;
                copy.route = route.clone();
            }
            copies.last = at;
            return;
        }
        if copies.copies.len() >= MAX_COPIES {
            copies.copies.clear();
        }
        copies.copies.push(CachedRoute {
            owner,
            generation,
            topic: topic.into(),
            route: route.clone(),
        });
        copies.last = copies.copies.len() - 1;
    });
}

/// Drops this thread's copies of `owner`'s routes.
pub(crate) fn forget(owner: u64) {
    let _ = CACHED.try_with(|cell| {
        if let Ok(mut copies) = cell.try_borrow_mut() {
            copies.copies.retain(|c| c.owner != owner);
            copies.last = 0;
        }
    });
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::partitioner::DefaultRandom;

    fn route(topic: &str, partitions: i32) -> Route {
        Route::new(topic, partitions, 16384, Arc::new(DefaultRandom::default())).unwrap()
    }

    fn hit(owner: u64, generation: u64, topic: &str) -> Option<i32> {
        with_cached(owner, generation, topic, |r| Some(r.partitions), || None)
    }

    /// Sends that alternate between topics keep a copy of each route: the 1,000-partition row
    /// (10 topics, a topic a record) copied a route of 100 producers at every send when a
    /// thread kept one copy.
    #[test]
    fn routing_copies_of_alternating_topics_all_hit() {
        let owner = producer_id();
        store(owner, 7, "a", &route("a", 3));
        store(owner, 7, "b", &route("b", 5));
        for _ in 0..3 {
            assert_eq!(hit(owner, 7, "a"), Some(3));
            assert_eq!(hit(owner, 7, "b"), Some(5));
        }
        // A new generation misses until stored again; the other topic's copy is kept.
        assert_eq!(hit(owner, 8, "a"), None);
        store(owner, 8, "a", &route("a", 4));
        assert_eq!(hit(owner, 8, "a"), Some(4));
        assert_eq!(hit(owner, 7, "b"), Some(5));
        // Another producer's copies are its own.
        assert_eq!(hit(producer_id(), 7, "b"), None);
        forget(owner);
        assert_eq!(hit(owner, 7, "b"), None);
    }

    #[test]
    fn routing_copies_past_the_limit_start_again() {
        let owner = producer_id();
        for t in 0..=MAX_COPIES {
            store(owner, 1, &format!("t{t}"), &route("t", 1));
        }
        assert_eq!(hit(owner, 1, &format!("t{MAX_COPIES}")), Some(1));
        assert_eq!(
            hit(owner, 1, "t0"),
            None,
            "the copies started again from none"
        );
        CACHED.with(|c| assert!(c.borrow().copies.len() <= MAX_COPIES));
        forget(owner);
    }
}
