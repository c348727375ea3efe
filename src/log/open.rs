//! Opening a log, in named phases: [`enter`] the directory (the locks, the stored settings),
//! [`recover`](crate::log::recovery::recover) its files, [`load`] what is derived from them (the
//! segment list, the producer state, the cleaner checkpoint, the leader epochs), [`assemble`]
//! the owners into the [`Shared`] state, then [`start`](Log::start) its background work
//! ([`Background`]: the log's own threads, or tasks on its [`Workers`](crate::Workers) pool,
//! which `close()` stops, waiting for a run under way, so that nothing runs on a closed log).

use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::rng::SplitMix64;
use crate::segment::SegmentRole;
use crate::sync::Mutex;
use crate::sync::thread::JoinHandle;
use crate::workers::{Task, TaskHandle};

use super::durability::flusher::{FlusherTask, flusher_loop};
use super::durability::points::DurablePoints;
use super::durability::state::Durability;
use super::files::cleaner_checkpoint::{CleanerCheckpoint, load_cleaner_checkpoint};
use super::files::deleted::PendingDeletes;
use super::files::dir_listing::DirListing;
use super::files::dir_lock::{DirLock, enter_dir};
use super::files::kafka_dir::KafkaDirMembership;
use super::files::log_files::LogFiles;
use super::leader_epoch::LeaderEpochFileCache;
use super::maintenance::schedule::{MaintenanceParts, MaintenanceTask, maintenance_loop};
use super::maintenance::state::Maintenance;
use super::observe::{self, stats::Counters};
use super::read::live_poll::LivePoll;
use super::recovery::{self, Recovered};
use super::replication::epoch_load::{EpochLoad, load_leader_epochs};
use super::replication::state::Replication;
use super::segments::snapshot::{SegmentList, SegmentOpener, Snapshot};
use super::segments::tail::Tail;
use super::segments::view::ReadView;
use super::txn::producer_state::ProducerStateManager;
use super::txn::transactions::last_txn_index_base;
use super::txn::view::TxnView;
use super::{Log, LogConfig, LogEvent, Shared, Writer};

/// How many sealed segments stay open at most (beyond those readers pin), in a log without a
/// [`Workers`](crate::Workers) pool, whose logs share a budget instead.
const MAX_OPEN_SEGMENTS: usize = 64;

/// What [`enter`] took: the directory's locks.
struct Entered {
    kafka_dir: Option<KafkaDirMembership>,
    lock: Option<DirLock>,
}

/// What [`load`] derived from the recovered files.
struct Loaded {
    snapshot: Snapshot,
    producers: ProducerStateManager,
    txn: TxnView,
    cleaner_checkpoint: CleanerCheckpoint,
    first_dirty: i64,
    leader_epochs: LeaderEpochFileCache,
}

impl Log {
    /// The open of [`open`](Log::open), [`open_read_only`](Log::open_read_only) and
    /// `open_rescanning`: its phases, in order.
    pub(super) fn open_inner(
        dir: &Path,
        config: LogConfig,
        read_only: bool,
        rescan_from: Option<i64>,
    ) -> Result<Log> {
        config.validate()?;
        let (entered, config) = enter(dir, config, read_only)?;
        let now_ms = config.clock.now_ms();
        let mut jitter = SplitMix64::new((now_ms as u64) ^ 0x9E37_79B9_7F4A_7C15);
        let mut recovered = recovery::recover(
            &config.storage,
            dir,
            &config,
            read_only,
            rescan_from,
            now_ms,
            &mut jitter,
        )?;
        let loaded = load(dir, &config, read_only, now_ms, &mut recovered)?;
        let shared = assemble(dir, config, read_only, entered, recovered, loaded, jitter);
        Log::start(Arc::new(shared))
    }

    /// Starts a log just opened on `shared`: tells the observer what the open found, and starts
    /// its background work ([`Background::start`]).
    fn start(shared: Arc<Shared>) -> Result<Log> {
        observe::notify(
            shared.config.observer.as_ref(),
            LogEvent::Recovery {
                report: &shared.report,
            },
        );
        let log = Log {
            shared,
            background: Background::default(),
        };
        // On failure the log drops, which closes it and stops what started.
        log.background.start(&log.shared)?;
        Ok(log)
    }
}

/// Phase 1: the Kafka log dir's lock and `partlog.lock`, then the settings stored with the log
/// applied to `config` (ARCHITECTURE.md §7).
fn enter(dir: &Path, config: LogConfig, read_only: bool) -> Result<(Entered, LogConfig)> {
    let storage = Arc::clone(&config.storage);
    let (kafka_dir, lock, config) = enter_dir(&storage, dir, config, read_only)?;
    Ok((Entered { kafka_dir, lock }, config))
}

/// Phase 3: what is derived from the recovered files: the segment list readers pin, the
/// producer state (with the `.txnindex` checks and rebuilds), the cleaner checkpoint and the
/// leader-epoch cache.
fn load(
    dir: &Path,
    config: &LogConfig,
    read_only: bool,
    now_ms: i64,
    recovered: &mut Recovered,
) -> Result<Loaded> {
    let storage = &config.storage;
    // One listing serves every step of the open (the producer snapshots, the `.txnindex`
    // checks); recovery hands over its own unless it changed the directory since.
    let mut listing = match recovered.listing.take() {
        Some(listing) => listing,
        None => DirListing::read(&**storage, dir)?,
    };
    let opener = SegmentOpener {
        storage: Arc::clone(storage),
        dir: dir.to_path_buf(),
        config: config.segment_config(0),
        role: if read_only {
            SegmentRole::ReadOnly
        } else {
            SegmentRole::Sealed
        },
        live: read_only && config.allow_live_writer,
    };
    let snapshot = Snapshot::new(
        SegmentList::new(std::mem::take(&mut recovered.handles)),
        opener,
        MAX_OPEN_SEGMENTS,
        config.workers.as_ref().map(crate::Workers::segment_budget),
    );
    let log_end_offset = recovered.active.next_offset();
    let (producers, replayed_aborted) = recovery::derived::load_derived_state(
        storage,
        dir,
        config,
        &snapshot,
        &mut listing,
        recovered,
        read_only,
        now_ms,
    )?;
    let txn = TxnView::new(&producers, last_txn_index_base(&listing), replayed_aborted);
    let (cleaner_checkpoint, first_dirty) =
        load_cleaner_checkpoint(&**storage, dir, log_end_offset, read_only);
    let leader_epochs = load_leader_epochs(
        storage,
        dir,
        &snapshot,
        EpochLoad {
            first_recovered_base: recovered.first_recovered_base,
            restarted_at_log_start: recovered.restarted_at_log_start,
            scanned_epochs: std::mem::take(&mut recovered.scanned_epochs),
            log_start_offset: recovered.log_start_offset,
            log_end_offset,
            read_only,
        },
    )?;
    Ok(Loaded {
        snapshot,
        producers,
        txn,
        cleaner_checkpoint,
        first_dirty,
        leader_epochs,
    })
}

/// Phase 4: the owners, each from what the phases before it found.
fn assemble(
    dir: &Path,
    config: LogConfig,
    read_only: bool,
    entered: Entered,
    recovered: Recovered,
    loaded: Loaded,
    jitter: SplitMix64,
) -> Shared {
    let log_end_offset = recovered.active.next_offset();
    Shared {
        dir: dir.to_path_buf(),
        storage: Arc::clone(&config.storage),
        clock: Arc::clone(&config.clock),
        read_only,
        files: LogFiles::new(entered.lock, entered.kafka_dir, loaded.cleaner_checkpoint),
        view: ReadView::new(
            loaded.snapshot,
            recovered.log_start_offset,
            log_end_offset,
            recovered.compacted,
        ),
        writer: Mutex::new(Writer {
            tail: Tail::new(recovered.active, log_end_offset, jitter),
            points: DurablePoints::new(recovered.checkpoint, recovered.recovery_point),
            producers: loaded.producers,
            deletes: PendingDeletes::default(),
        }),
        durability: Durability::new(
            recovered.durable_offset,
            config.group_commit_max_gather,
            config.group_commit_max_spin,
        ),
        counters: Counters::default(),
        report: recovered.report,
        maintenance: Maintenance::new(loaded.first_dirty, config.cleaner_io_max_bytes_per_second),
        txn: loaded.txn,
        live: (read_only && config.allow_live_writer).then(|| LivePoll::new(config.poll_interval)),
        replication: Replication::new(loaded.leader_epochs, log_end_offset),
        config,
    }
}

/// One kind of background work of a log: a thread, pool tasks, or nothing.
#[derive(Debug, Default)]
enum Runner {
    #[default]
    None,
    Thread(JoinHandle<()>),
    Pool(Vec<TaskHandle>),
}

/// What runs a log's work off the caller's threads: without a pool, its own flusher thread (a
/// writable log) and maintenance thread (with `retention.check.interval.ms`); with one, the same
/// work as pool tasks: the flusher, retention with producer expiry, and compaction.
#[derive(Debug, Default)]
pub(super) struct Background {
    flusher: Mutex<Runner>,
    maintenance: Mutex<Runner>,
}

impl Background {
    /// Starts the flusher (a writable log) and maintenance (when
    /// [`LogConfig::runs_maintenance`](crate::LogConfig::runs_maintenance) says so) of `shared`, on its pool or on threads of their own. On failure what started
    /// is left for [`stop`](Self::stop_flusher) to stop.
    pub(super) fn start(&self, shared: &Arc<Shared>) -> Result<()> {
        if shared.read_only {
            return Ok(());
        }
        let dir = shared.dir.as_path();
        // The first interval counts from the open, not from whenever the work first runs: on a
        // loaded machine that can be after the clock has moved on.
        let opened_ms = shared.clock.now_ms();
        let maintained = shared.config.runs_maintenance();
        if let Some(workers) = &shared.config.workers {
            if let Some(gather) = workers.sync_gather() {
                gather.register(shared);
            }
            let flusher = Arc::new(FlusherTask::new(Arc::clone(shared)));
            let first = flusher.first_run();
            let handle = workers.register(flusher as Arc<dyn Task>, first);
            shared.durability.set_pool_flusher(handle.clone());
            *self.flusher.lock() = Runner::Pool(vec![handle]);
            if maintained {
                let mut parts = vec![MaintenanceParts::Retention];
                if shared.config.cleanup_policy.compacts() {
                    parts.push(MaintenanceParts::Compaction);
                }
                let handles = parts
                    .into_iter()
                    .map(|part| {
                        let task =
                            Arc::new(MaintenanceTask::new(Arc::clone(shared), part, opened_ms));
                        let first = task.first_run();
                        workers.register(task as Arc<dyn Task>, first)
                    })
                    .collect();
                *self.maintenance.lock() = Runner::Pool(handles);
            }
            return Ok(());
        }
        let flusher_shared = Arc::clone(shared);
        let flusher = crate::sync::thread::Builder::new()
            .name(format!("partlog-flusher:{}", dir.display()))
            .spawn(move || flusher_loop(&flusher_shared))
            .map_err(|e| Error::io(dir, e))?;
        *self.flusher.lock() = Runner::Thread(flusher);
        if maintained {
            let maintenance_shared = Arc::clone(shared);
            let maintenance = crate::sync::thread::Builder::new()
                .name(format!("partlog-maintenance:{}", dir.display()))
                .spawn(move || maintenance_loop(&maintenance_shared, opened_ms))
                .map_err(|e| Error::io(dir, e))?;
            *self.maintenance.lock() = Runner::Thread(maintenance);
        }
        Ok(())
    }

    /// Stops maintenance and waits for a pass under way.
    pub(super) fn stop_maintenance(&self, shared: &Shared) {
        shared.maintenance.stop();
        stop(&self.maintenance, shared, "maintenance");
    }

    /// Stops the flusher and waits for a round under way.
    pub(super) fn stop_flusher(&self, shared: &Shared) {
        shared.durability.stop_flusher();
        stop(&self.flusher, shared, "flusher");
    }
}

/// Joins `runner`'s thread or cancels its tasks (each waits for a run under way).
fn stop(runner: &Mutex<Runner>, shared: &Shared, what: &str) {
    let taken = std::mem::take(&mut *runner.lock());
    match taken {
        Runner::None => {}
        Runner::Thread(handle) => {
            if handle.join().is_err() {
                log::error!("the {what} thread of {} panicked", shared.dir.display());
            }
        }
        Runner::Pool(tasks) => tasks.iter().for_each(TaskHandle::cancel),
    }
}
