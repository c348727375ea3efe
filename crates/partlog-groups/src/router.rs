//! [`GroupRouter`]: the group layer on an [`Engine`]: one [`GroupCoordinator`] (with its
//! [`OffsetStore`]) per `__consumer_offsets` partition, each opened at the first request for a
//! group it holds (`abs(javaStringHash(group)) % offsets.topic.num.partitions`) by replaying
//! its partition, which the engine opens; their timers as one task on the engine's pool, beside
//! the transaction coordinator's.
//!
//! The transaction coordinator writes the markers of a transaction that holds offsets
//! (`add_offsets`) into the offsets partition itself; the router listens for them
//! ([`OffsetsMarkerListener`]) and applies each to its shard's store, so transactional offsets
//! take effect on COMMIT and are dropped on ABORT. A shard not open yet replays the marker.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use partlog::Log;
use partlog::unstable::{Lane, Next, Task, TaskHandle};
use partlog_engine::engine::Engine;
use partlog_engine::txn::OffsetsMarkerListener;

use crate::Error;
use crate::group::GroupCoordinator;
use crate::group::coordinator::GroupConfig;
use crate::offsets::records::group_partition;
use crate::offsets::store::{OffsetStore, OffsetStoreConfig};

/// One shard: the coordinator of one `__consumer_offsets` partition, on the engine's log.
pub type Shard = GroupCoordinator<Arc<Log>>;

/// The router's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRouterConfig {
    /// The group coordinator's settings (Kafka's `group.*`).
    pub group: GroupConfig,
    /// The offset store's settings (Kafka's `offset.*`, `offsets.*`).
    pub offsets: OffsetStoreConfig,
    /// How often the pool task runs every open shard's `tick` (100 ms): the resolution of the
    /// join, sync and session timers on a real clock.
    pub tick_interval_ms: u64,
}

impl Default for GroupRouterConfig {
    fn default() -> Self {
        GroupRouterConfig {
            group: GroupConfig::default(),
            offsets: OffsetStoreConfig::default(),
            tick_interval_ms: 100,
        }
    }
}

/// The groups of an engine. `Send + Sync`: share it with an `Arc` (what
/// [`open`](Self::open) returns).
pub struct GroupRouter {
    engine: Arc<Engine>,
    config: GroupRouterConfig,
    shards: Vec<Mutex<Option<Shard>>>,
    /// Each shard's [`rebalances_started`](GroupCoordinator::rebalances_started), published
    /// after every call into the shard, so a consumer can look without taking its lock.
    rebalance_notices: Vec<AtomicU64>,
    timers: Mutex<Option<TaskHandle>>,
}

impl std::fmt::Debug for GroupRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupRouter")
            .field("config", &self.config)
            .field("shards", &self.shards.len())
            .finish_non_exhaustive()
    }
}

/// A shard's state is left consistent by every step (a record is written before it applies):
/// take it as it is after a panic elsewhere.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl GroupRouter {
    /// The groups of `engine`: registers for its `__consumer_offsets` markers and puts the
    /// shards' timers on its pool. No partition opens before a request needs it.
    ///
    /// # Errors
    /// `InvalidConfig`-style refusal as [`Error::Log`] for a zero tick interval.
    pub fn open(engine: &Arc<Engine>, config: GroupRouterConfig) -> Result<Arc<Self>, Error> {
        if config.tick_interval_ms == 0 {
            return Err(Error::from(partlog::Error::InvalidConfig {
                setting: "group.router.tick.interval.ms",
                why: "the shards' timers need an interval of at least 1 ms".to_owned(),
            }));
        }
        let count = usize::try_from(engine.offsets_topic_partitions()).unwrap_or(1);
        let router = Arc::new(GroupRouter {
            engine: Arc::clone(engine),
            shards: (0..count).map(|_| Mutex::new(None)).collect(),
            rebalance_notices: (0..count).map(|_| AtomicU64::new(0)).collect(),
            config,
            timers: Mutex::new(None),
        });
        let listener: Weak<dyn OffsetsMarkerListener> =
            Arc::downgrade(&(Arc::clone(&router) as Arc<dyn OffsetsMarkerListener>));
        engine.set_offsets_marker_listener(listener);
        let every = Duration::from_millis(router.config.tick_interval_ms);
        let task = Arc::new(ShardTimers {
            router: Arc::downgrade(&router),
            every,
        });
        *lock(&router.timers) = Some(engine.workers().register(task as Arc<dyn Task>, every));
        Ok(router)
    }

    /// The engine.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The settings.
    pub fn config(&self) -> &GroupRouterConfig {
        &self.config
    }

    /// The `__consumer_offsets` partition that holds `group_id`.
    pub fn partition_for(&self, group_id: &str) -> i32 {
        group_partition(group_id, self.engine.offsets_topic_partitions())
    }

    /// Runs `call` on the shard that holds `group_id`, opening it first if needed (its
    /// partition replayed). Shards are locked one at a time; `call` must not call the router.
    ///
    /// # Errors
    /// The shard's open errors (the log's, a corrupt record), then `call`'s.
    pub fn with_group<R>(
        &self,
        group_id: &str,
        call: impl FnOnce(&mut Shard) -> Result<R, Error>,
    ) -> Result<R, Error> {
        let partition = self.partition_for(group_id);
        self.with_partition(partition, call)
    }

    /// Runs `call` on the shard of `partition`, opening it first if needed.
    ///
    /// # Errors
    /// As [`with_group`](Self::with_group).
    pub fn with_partition<R>(
        &self,
        partition: i32,
        call: impl FnOnce(&mut Shard) -> Result<R, Error>,
    ) -> Result<R, Error> {
        let slot = usize::try_from(partition)
            .ok()
            .and_then(|i| self.shards.get(i))
            .ok_or_else(|| {
                Error::from(partlog::Error::InvalidArgument {
                    why: format!(
                        "__consumer_offsets has {} partitions, not partition {partition}",
                        self.shards.len()
                    ),
                })
            })?;
        let mut shard = lock(slot);
        if shard.is_none() {
            let log = self.engine.consumer_offsets_log(partition)?;
            let clock = Arc::clone(self.engine.clock());
            // Member ids differ between shards and between runs.
            let seed = (clock.now_ms() as u64) ^ (u64::from(partition.unsigned_abs()) << 48);
            let store = OffsetStore::open(log, self.config.offsets.clone(), clock)?;
            *shard = Some(GroupCoordinator::new(
                store,
                self.config.group.clone(),
                seed,
            ));
        }
        match shard.as_mut() {
            Some(shard) => {
                let result = call(shard);
                self.publish_rebalance_notice(partition, shard);
                result
            }
            None => Err(Error::CoordinatorNotAvailable),
        }
    }

    /// How many join phases have started among the groups of `group_id`'s shard: a member
    /// that sees this change since its last heartbeat heartbeats at once (in process a
    /// heartbeat costs a lock, not a round trip, so a member need not wait
    /// `heartbeat.interval.ms` to learn of a rebalance). A lock-free read.
    pub fn rebalance_notice(&self, group_id: &str) -> u64 {
        usize::try_from(self.partition_for(group_id))
            .ok()
            .and_then(|i| self.rebalance_notices.get(i))
            .map_or(0, |notice| notice.load(Ordering::Acquire))
    }

    fn publish_rebalance_notice(&self, partition: i32, shard: &Shard) {
        if let Some(notice) = usize::try_from(partition)
            .ok()
            .and_then(|i| self.rebalance_notices.get(i))
        {
            notice.store(shard.rebalances_started(), Ordering::Release);
        }
    }

    /// Runs every open shard's timers now (the pool task calls this every
    /// [`tick_interval_ms`](GroupRouterConfig::tick_interval_ms); tests on a manual clock call
    /// it after moving the clock). Returns the first error, after every shard ran.
    ///
    /// # Errors
    /// A shard's log failure.
    pub fn tick(&self) -> Result<(), Error> {
        let mut first_error = None;
        for (partition, slot) in (0_i32..).zip(&self.shards) {
            if let Some(shard) = lock(slot).as_mut() {
                let ticked = shard.tick();
                self.publish_rebalance_notice(partition, shard);
                if let Err(error) = ticked {
                    first_error.get_or_insert(error);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Stops the pool task (the engine's `close` closes the logs). Dropping the last handle
    /// ends it too, at its next run.
    pub fn close(&self) {
        if let Some(timers) = lock(&self.timers).take() {
            timers.cancel();
        }
    }
}

impl OffsetsMarkerListener for GroupRouter {
    fn marker_written(&self, partition: i32, producer_id: i64, commit: bool, offset: i64) {
        let Some(slot) = usize::try_from(partition)
            .ok()
            .and_then(|i| self.shards.get(i))
        else {
            return;
        };
        if let Some(shard) = lock(slot).as_mut() {
            shard.store_mut().apply_marker(producer_id, commit, offset);
        }
    }
}

/// The shards' timers on the engine's pool; holds the router weakly, so its drop ends them.
struct ShardTimers {
    router: Weak<GroupRouter>,
    every: Duration,
}

impl Task for ShardTimers {
    fn run(&self) -> Next {
        let Some(router) = self.router.upgrade() else {
            return Next::Done;
        };
        if let Err(error) = router.tick() {
            log::warn!("a group coordinator timer failed, retried next run: {error}");
        }
        Next::After(self.every)
    }

    fn lane(&self) -> Lane {
        Lane::Periodic
    }
}
