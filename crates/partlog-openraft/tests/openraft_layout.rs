//! What the store leaves on disk: one batch per entry with the term as its
//! `partitionLeaderEpoch`, a `leader-epoch-checkpoint` that lists where each term starts, a
//! directory partlog's verify finds clean, and a vote, committed id and purge point that a reopen
//! reads back.

use openraft::storage::{RaftLogReader, RaftLogStorage, RaftLogStorageExt};
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, Vote};
use partlog::{LogConfig, ReadBound, verify_dir};
use partlog_openraft::PartlogLogStore;
use partlog_openraft::entry_codec::LEADER_HEADER;
use partlog_openraft::raft_state::{RAFT_STATE_FILE_NAME, RAFT_STATE_FILE_SIZE};
use partlog_openraft::testing::{KvConfig, KvRequest};

fn entry(term: u64, leader: u64, index: u64) -> Entry<KvConfig> {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(term, leader), index),
        payload: EntryPayload::Normal(KvRequest::Set {
            key: format!("k{index}"),
            value: format!("v{index}"),
        }),
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

#[test]
fn each_entry_is_one_batch_stamped_with_its_term_and_the_epoch_file_lists_term_starts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("raft");
    let mut store = PartlogLogStore::<KvConfig>::open(&path, LogConfig::default()).unwrap();
    runtime().block_on(async {
        store
            .blocking_append([entry(1, 7, 0), entry(1, 7, 1), entry(2, 8, 2)])
            .await
            .unwrap();
        store.blocking_append([entry(4, 9, 3)]).await.unwrap();
    });
    let log = store.log();
    let fetch = log.read(0, 1 << 20, ReadBound::LogEnd).unwrap();
    let mut seen = Vec::new();
    let mut scratch = Vec::new();
    for batch in fetch.batches() {
        let batch = batch.unwrap();
        let view = batch.as_v2().expect("a v2 batch");
        let header = view.header();
        assert_eq!(header.records_count, 1, "one record per batch");
        let records: Vec<_> = view
            .records(&mut scratch)
            .unwrap()
            .map(Result::unwrap)
            .map(|r| {
                r.headers()
                    .find(|h| h.key == LEADER_HEADER.as_bytes())
                    .and_then(|h| h.value)
                    .map(<[u8]>::to_vec)
            })
            .collect();
        seen.push((view.base_offset(), header.partition_leader_epoch, records));
    }
    let leader = |id: u64| vec![Some(id.to_be_bytes().to_vec())];
    assert_eq!(
        seen,
        vec![
            (0, 1, leader(7)),
            (1, 1, leader(7)),
            (2, 2, leader(8)),
            (3, 4, leader(9)),
        ]
    );
    let epochs: Vec<_> = log
        .leader_epoch_entries()
        .iter()
        .map(|e| (e.epoch, e.start_offset))
        .collect();
    assert_eq!(epochs, vec![(1, 0), (2, 2), (4, 3)]);
    store.close().unwrap();
    let text = std::fs::read_to_string(path.join("leader-epoch-checkpoint")).unwrap();
    assert_eq!(text, "0\n3\n1 0\n2 2\n4 3\n");
    let report = verify_dir(&path, &LogConfig::default()).unwrap();
    assert_eq!(report.worst(), None, "{:?}", report.findings);
    assert_eq!(report.log_end_offset, 4);
}

#[test]
fn vote_committed_and_purge_point_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("raft");
    let runtime = runtime();
    let vote = Vote::new_committed(3, 2);
    let committed = LogId::new(CommittedLeaderId::new(3, 2), 5);
    let purged = LogId::new(CommittedLeaderId::new(2, 1), 2);
    {
        let mut store = PartlogLogStore::<KvConfig>::open(&path, LogConfig::default()).unwrap();
        runtime.block_on(async {
            let entries = (0..6).map(|i| entry(if i < 3 { 2 } else { 3 }, 1, i));
            store.blocking_append(entries).await.unwrap();
            store.save_vote(&vote).await.unwrap();
            store.save_committed(Some(committed)).await.unwrap();
            store.purge(purged).await.unwrap();
            // A purge below the saved one is ignored: the purge point never goes back.
            store
                .purge(LogId::new(CommittedLeaderId::new(1, 1), 1))
                .await
                .unwrap();
        });
        store.close().unwrap();
    }
    let raft_state = std::fs::metadata(path.join(RAFT_STATE_FILE_NAME)).unwrap();
    assert_eq!(raft_state.len(), RAFT_STATE_FILE_SIZE as u64);

    let mut store = PartlogLogStore::<KvConfig>::open(&path, LogConfig::default()).unwrap();
    runtime.block_on(async {
        assert_eq!(store.read_vote().await.unwrap(), Some(vote));
        assert_eq!(store.read_committed().await.unwrap(), Some(committed));
        let state = store.get_log_state().await.unwrap();
        assert_eq!(state.last_purged_log_id, Some(purged));
        assert_eq!(state.last_log_id.map(|id| id.index), Some(5));
        let indexes: Vec<_> = store
            .try_get_log_entries(0..)
            .await
            .unwrap()
            .iter()
            .map(|e| e.log_id.index)
            .collect();
        assert_eq!(indexes, vec![3, 4, 5]);
        // A snapshot installed beyond the log: the purge passes the last entry, the log restarts
        // empty after it, and the next append lands right there.
        let beyond = LogId::new(CommittedLeaderId::new(5, 3), 20);
        store.purge(beyond).await.unwrap();
        let state = store.get_log_state().await.unwrap();
        assert_eq!(state.last_purged_log_id, Some(beyond));
        assert_eq!(state.last_log_id, Some(beyond));
        assert!(store.try_get_log_entries(0..).await.unwrap().is_empty());
        store.blocking_append([entry(5, 3, 21)]).await.unwrap();
        assert_eq!(store.log().log_start_offset(), 21);
    });
    store.close().unwrap();
}

#[test]
fn a_saved_vote_is_never_durable_before_the_entries_appended_ahead_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut store =
        PartlogLogStore::<KvConfig>::open(dir.path().join("raft"), LogConfig::default()).unwrap();
    // Entries in the log but not yet fsynced, as an append whose callback has not fired leaves
    // them (written here without the store, so that nothing waits for them).
    let mut batches = Vec::new();
    for index in 0..3 {
        partlog_openraft::entry_codec::encode_entry(&entry(1, 1, index), &mut batches).unwrap();
    }
    store.log().append_as_follower(&batches).unwrap();
    assert!(
        store.log().durable_offset() < 3,
        "the test needs unsynced entries"
    );
    runtime().block_on(async {
        store.save_vote(&Vote::new(2, 1)).await.unwrap();
    });
    assert_eq!(store.log().durable_offset(), 3);
}

/// Issue 30, item 3: a `partlog.raft-state` missing beside a non-empty log is refused with a
/// typed error naming it, and nothing is recreated: silently recreated, the node would forget
/// its vote (and could vote twice in one term) and its purge point. The caller may ask for a
/// fresh state explicitly. An empty log (a first open) gets a new file, as before.
#[test]
fn a_missing_raft_state_beside_a_non_empty_log_is_refused_unless_a_fresh_state_is_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("raft");
    let state_file = path.join(RAFT_STATE_FILE_NAME);
    let runtime = runtime();
    let vote = Vote::new(4, 2);
    let purged = LogId::new(CommittedLeaderId::new(2, 1), 1);
    {
        let mut store = PartlogLogStore::<KvConfig>::open(&path, LogConfig::default()).unwrap();
        runtime.block_on(async {
            store.save_vote(&vote).await.unwrap();
            store
                .blocking_append((0..4).map(|i| entry(2, 1, i)))
                .await
                .unwrap();
            store.purge(purged).await.unwrap();
        });
        store.close().unwrap();
    }
    std::fs::remove_file(&state_file).unwrap();

    let error = PartlogLogStore::<KvConfig>::open(&path, LogConfig::default())
        .expect_err("a non-empty log without its raft state must not open");
    match &error {
        partlog::Error::MissingFile { path: missing, .. } => assert_eq!(missing, &state_file),
        other => panic!("expected MissingFile, got {other}"),
    }
    let text = error.to_string();
    assert!(text.contains(RAFT_STATE_FILE_NAME), "{text}");
    assert!(text.contains("open_with_fresh_state"), "{text}");
    assert!(!state_file.exists(), "the refused open created nothing");

    // Asked for explicitly, the store opens with no vote and no purge point.
    let mut store =
        PartlogLogStore::<KvConfig>::open_with_fresh_state(&path, LogConfig::default()).unwrap();
    runtime.block_on(async {
        assert_eq!(store.read_vote().await.unwrap(), None);
        let state = store.get_log_state().await.unwrap();
        assert_eq!(state.last_purged_log_id, None);
        assert_eq!(state.last_log_id.map(|id| id.index), Some(3));
        store.save_vote(&Vote::new(5, 3)).await.unwrap();
    });
    store.close().unwrap();
    drop(store);
    // The file is there again: a plain open works and reads what was saved since.
    let mut store = PartlogLogStore::<KvConfig>::open(&path, LogConfig::default()).unwrap();
    runtime.block_on(async {
        assert_eq!(store.read_vote().await.unwrap(), Some(Vote::new(5, 3)));
    });
    store.close().unwrap();

    // An empty log cannot tell a first open from a lost file: it opens with a new one.
    let empty = dir.path().join("empty");
    PartlogLogStore::<KvConfig>::open(&empty, LogConfig::default())
        .unwrap()
        .close()
        .unwrap();
    std::fs::remove_file(empty.join(RAFT_STATE_FILE_NAME)).unwrap();
    PartlogLogStore::<KvConfig>::open(&empty, LogConfig::default())
        .unwrap()
        .close()
        .unwrap();
    assert!(empty.join(RAFT_STATE_FILE_NAME).exists());
}
