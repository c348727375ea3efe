//! The log store under machine crashes (partlog's simulator): a workload of appends, votes,
//! purges and truncations is crashed at one sync point per seed, spread over all of them, then
//! reopened. openraft's suite crashes nothing, so this is what shows that
//! - every entry whose `log_io_completed` fired survives (unless purged or truncated since);
//! - the vote read back is the last one `save_vote` returned from (or the one being saved);
//! - the last purged log id never goes backwards.

use std::path::Path;
use std::sync::Arc;

use openraft::storage::{RaftLogReader, RaftLogStorage, RaftLogStorageExt};
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, Vote};
use partlog::LogConfig;
use partlog::unstable::sim::{FaultOp, FaultRule};
use partlog::unstable::{SimStorage, Storage};
use partlog_openraft::PartlogLogStore;
use partlog_openraft::raft_state::RAFT_STATE_FILE_NAME;
use partlog_openraft::testing::{KvConfig, KvRequest};

const SEEDS: u64 = 64;
const STEPS: u64 = 48;
const DIR: &str = "/raft";

fn config(storage: Arc<dyn Storage>) -> LogConfig {
    LogConfig::builder_for_tests()
        .storage(storage)
        .segment_bytes(2048)
        .max_message_bytes(1024)
        .build()
        .expect("a valid test config")
}

fn open(sim: &SimStorage) -> PartlogLogStore<KvConfig> {
    PartlogLogStore::open(Path::new(DIR), config(Arc::new(sim.clone())))
        .expect("the store reopens after a crash")
}

fn log_id(term: u64, index: u64) -> LogId<u64> {
    LogId::new(CommittedLeaderId::new(term, term % 3), index)
}

fn entry(id: LogId<u64>) -> Entry<KvConfig> {
    let payload = if id.index.is_multiple_of(2) {
        EntryPayload::Blank
    } else {
        EntryPayload::Normal(KvRequest::Set {
            key: format!("k{}", id.index % 7),
            value: format!("v{}", id.index),
        })
    };
    Entry {
        log_id: id,
        payload,
    }
}

/// The operation that was under way when the crash came, whose effect may or may not be there.
#[derive(Debug, Clone, Copy, PartialEq)]
enum InFlight {
    None,
    Append,
    Vote(Vote<u64>),
    Purge(LogId<u64>),
    Truncate(u64),
}

/// What the workload was told had happened.
#[derive(Debug, Default)]
struct Model {
    /// The entries whose append completed (callback fired), by index, minus those truncated.
    acked: Vec<LogId<u64>>,
    vote: Option<Vote<u64>>,
    purged: Option<LogId<u64>>,
}

/// Runs the workload until an operation fails (the crash) or it ends; returns the model and
/// the operation in flight at the failure.
async fn workload(store: &mut PartlogLogStore<KvConfig>) -> (Model, InFlight) {
    let mut model = Model::default();
    let mut next_index = 0u64;
    for step in 0..STEPS {
        let term = 1 + step / 8;
        match step % 10 {
            3 => {
                let vote = Vote::new(term, step % 3);
                if store.save_vote(&vote).await.is_err() {
                    return (model, InFlight::Vote(vote));
                }
                model.vote = Some(vote);
            }
            7 => {
                let Some(&target) = model.acked.get(model.acked.len() / 2) else {
                    continue;
                };
                if store.purge(target).await.is_err() {
                    return (model, InFlight::Purge(target));
                }
                model.purged = Some(target);
                model.acked.retain(|id| id.index > target.index);
            }
            9 => {
                let Some(&last) = model.acked.last() else {
                    continue;
                };
                if store.truncate(last).await.is_err() {
                    return (model, InFlight::Truncate(last.index));
                }
                model.acked.pop();
                next_index = last.index;
            }
            _ => {
                let count = 1 + step % 3;
                let ids: Vec<_> = (next_index..next_index + count)
                    .map(|i| log_id(term, i))
                    .collect();
                if store
                    .blocking_append(ids.iter().map(|&id| entry(id)))
                    .await
                    .is_err()
                {
                    return (model, InFlight::Append);
                }
                model.acked.extend(ids);
                next_index += count;
            }
        }
    }
    (model, InFlight::None)
}

/// Where a seed crashes: the Nth of some kind of sync.
#[derive(Debug, Clone, Copy)]
enum SyncKind {
    /// Any file's data sync (segments, indexes, checkpoints, `partlog.raft-state`).
    Data,
    /// A directory sync (segment creation and deletion, renames).
    Dir,
    /// A sync of `partlog.raft-state` alone (votes and purge points).
    RaftState,
}

/// How many syncs of each kind the workload makes on a simulator that never crashes, so that
/// the seeds can spread their crash points over all of them.
fn count_sync_points(runtime: &tokio::runtime::Runtime) -> [(SyncKind, u64); 3] {
    let sim = SimStorage::new(0);
    let mut store = open(&sim);
    sim.reset_stats();
    let (_, failed) = runtime.block_on(workload(&mut store));
    assert_eq!(failed, InFlight::None, "the workload fails without a crash");
    let stats = sim.stats();
    let raft_state = stats
        .per_path
        .iter()
        .filter(|(path, _)| path.ends_with(RAFT_STATE_FILE_NAME))
        .map(|(_, path_stats)| path_stats.syncs)
        .sum();
    [
        (SyncKind::Data, stats.syncs),
        (SyncKind::Dir, stats.sync_dirs),
        (SyncKind::RaftState, raft_state),
    ]
}

#[test]
fn acknowledged_entries_votes_and_purges_survive_a_crash_at_any_sync_point() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let points = count_sync_points(&runtime);
    assert!(
        points.iter().all(|&(_, count)| count > 3),
        "too few sync points to spread the seeds over: {points:?}"
    );
    let mut crashed_in = std::collections::BTreeMap::<String, u64>::new();
    for seed in 0..SEEDS {
        let sim = SimStorage::new(seed);
        let mut store = open(&sim);
        // The seeds take the three kinds in turn, and spread over each kind's sync points.
        let kinds = points.len() as u64;
        let (kind, count) = points[(seed % kinds) as usize];
        let nth = 1 + (seed / kinds) * count / SEEDS.div_ceil(kinds);
        let rule = match kind {
            SyncKind::Data => FaultRule::crash(FaultOp::Sync, nth),
            SyncKind::Dir => FaultRule::crash(FaultOp::SyncDir, nth),
            SyncKind::RaftState => {
                FaultRule::crash(FaultOp::Sync, nth).on_paths_ending_with(RAFT_STATE_FILE_NAME)
            }
        };
        sim.inject(rule);
        let (model, in_flight) = runtime.block_on(workload(&mut store));
        if in_flight == InFlight::None {
            // The crash point lay beyond this run's syncs: crash at the end instead.
            sim.crash();
        }
        *crashed_in
            .entry(
                format!("{in_flight:?}")
                    .split('(')
                    .next()
                    .unwrap_or("")
                    .to_string(),
            )
            .or_default() += 1;
        sim.clear_faults();
        drop(store);

        let mut store = open(&sim);
        let context = format!("seed {seed}, crash at {kind:?} sync #{nth} during {in_flight:?}");
        runtime.block_on(async {
            let vote = store.read_vote().await.expect("read_vote");
            match in_flight {
                InFlight::Vote(saving) => assert!(
                    vote == model.vote || vote == Some(saving),
                    "{context}: vote {vote:?}, saved {:?}",
                    model.vote
                ),
                _ => assert_eq!(vote, model.vote, "{context}: the vote"),
            }

            let state = store.get_log_state().await.expect("get_log_state");
            let purged = state.last_purged_log_id;
            assert!(
                purged >= model.purged,
                "{context}: purged went back to {purged:?}"
            );
            match in_flight {
                InFlight::Purge(target) => assert!(purged <= Some(target), "{context}"),
                _ => assert_eq!(purged, model.purged, "{context}: the last purged id"),
            }

            let first_kept = purged.map_or(0, |p| p.index + 1);
            for id in &model.acked {
                if id.index < first_kept {
                    continue;
                }
                if let InFlight::Truncate(at) = in_flight
                    && id.index >= at
                {
                    continue;
                }
                let found = store
                    .try_get_log_entries(id.index..=id.index)
                    .await
                    .expect("try_get_log_entries");
                assert_eq!(
                    found.first().map(|e| e.log_id),
                    Some(*id),
                    "{context}: acknowledged entry {id} lost"
                );
            }

            // The store takes appends again where its log ends.
            let last = state.last_log_id;
            let next = last.map_or(0, |l| l.index + 1);
            let id = log_id(STEPS, next);
            store
                .blocking_append([entry(id)])
                .await
                .unwrap_or_else(|e| panic!("{context}: append after reopen: {e}"));
            let state = store.get_log_state().await.expect("get_log_state");
            assert_eq!(state.last_log_id, Some(id), "{context}");
        });
        store.close().expect("a clean close");
    }
    println!("{SEEDS} seeds; crashes by operation in flight: {crashed_in:?}");
    for kind in ["Append", "Vote", "Purge", "Truncate"] {
        assert!(
            crashed_in.contains_key(kind),
            "no seed crashed during a {kind}: {crashed_in:?}"
        );
    }
}
