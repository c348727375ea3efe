//! What the log store does with input it cannot store or bytes it cannot read: a typed
//! `StorageError` with a clear message, nothing written, never a panic or a wrapped term.

use openraft::storage::{RaftLogReader, RaftLogStorage, RaftLogStorageExt};
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, StorageError};
use partlog::{BatchBuilder, Compression, LogConfig, NewRecord};
use partlog_openraft::PartlogLogStore;
use partlog_openraft::entry_codec::LEADER_HEADER;
use partlog_openraft::testing::KvConfig;

fn blank(term: u64, index: u64) -> Entry<KvConfig> {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(term, 1), index),
        payload: EntryPayload::Blank,
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

fn open(dir: &tempfile::TempDir) -> PartlogLogStore<KvConfig> {
    PartlogLogStore::open(dir.path().join("raft"), LogConfig::default()).expect("the store opens")
}

/// A batch at `offset` with one record, as a foreign writer might have put it in the log.
fn foreign_batch(offset: i64, epoch: i32, records: &[NewRecord]) -> Vec<u8> {
    let mut builder = BatchBuilder::new(Compression::None)
        .base_offset(offset)
        .partition_leader_epoch(epoch);
    for record in records {
        builder.push(record);
    }
    builder.build().expect("a valid batch")
}

fn message(error: StorageError<u64>) -> String {
    error.to_string()
}

#[test]
fn a_term_above_i32_max_is_a_storage_error_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(&dir);
    runtime().block_on(async {
        store.blocking_append([blank(1, 0)]).await.unwrap();
        let too_big = u64::try_from(i32::MAX).unwrap() + 1;
        let error = store
            .blocking_append([blank(2, 1), blank(too_big, 2)])
            .await
            .expect_err("a term above i32::MAX cannot be a partitionLeaderEpoch");
        let text = message(error);
        assert!(text.contains(&format!("term {too_big}")), "{text}");
        assert!(text.contains("i32::MAX"), "{text}");
        // The whole call failed before anything was written, the valid first entry included.
        assert_eq!(store.log().log_end_offset(), 1);
        let state = store.get_log_state().await.unwrap();
        assert_eq!(state.last_log_id.map(|id| id.index), Some(0));
        // The largest term that fits is stored and read back as it was.
        let largest = u64::try_from(i32::MAX).unwrap();
        store.blocking_append([blank(largest, 1)]).await.unwrap();
        let read = store.try_get_log_entries(1..2).await.unwrap();
        assert_eq!(read[0].log_id.leader_id.term, largest);
    });
}

#[test]
fn an_index_above_i64_max_is_a_storage_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(&dir);
    runtime().block_on(async {
        let index = u64::try_from(i64::MAX).unwrap() + 1;
        let text = message(
            store
                .blocking_append([blank(1, index)])
                .await
                .expect_err("no Kafka offset above i64::MAX"),
        );
        assert!(text.contains(&format!("index {index}")), "{text}");
        assert!(text.contains("i64::MAX"), "{text}");
        assert_eq!(store.log().log_end_offset(), 0);
        let text = message(
            store
                .truncate(LogId::new(CommittedLeaderId::new(1, 1), index))
                .await
                .expect_err("truncate at an index above i64::MAX"),
        );
        assert!(text.contains("i64::MAX"), "{text}");
    });
}

#[test]
fn a_record_that_is_no_entry_is_a_storage_error_naming_its_offset() {
    let leader = 1u64.to_be_bytes();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "a value that is not JSON",
            foreign_batch(
                2,
                1,
                &[NewRecord::new(0, None, Some(b"\xffnot json"))
                    .with_header(LEADER_HEADER, Some(&leader))],
            ),
            "not an openraft EntryPayload",
        ),
        (
            "no leader header",
            foreign_batch(2, 1, &[NewRecord::new(0, None, Some(b"\"Blank\""))]),
            "no openraft.leader header",
        ),
        (
            "a leader header of 4 bytes",
            foreign_batch(
                2,
                1,
                &[NewRecord::new(0, None, Some(b"\"Blank\""))
                    .with_header(LEADER_HEADER, Some(&[0, 0, 0, 1]))],
            ),
            "is not 8 bytes",
        ),
        (
            "a batch of two records",
            foreign_batch(
                2,
                1,
                &[
                    NewRecord::new(0, None, Some(b"\"Blank\""))
                        .with_header(LEADER_HEADER, Some(&leader)),
                    NewRecord::new(0, None, Some(b"\"Blank\""))
                        .with_header(LEADER_HEADER, Some(&leader)),
                ],
            ),
            "a batch of 2 records",
        ),
        (
            "a negative partitionLeaderEpoch",
            foreign_batch(
                2,
                -1,
                &[NewRecord::new(0, None, Some(b"\"Blank\""))
                    .with_header(LEADER_HEADER, Some(&leader))],
            ),
            "is not a Raft term",
        ),
    ];
    for (what, batch, expected) in cases {
        let dir = tempfile::tempdir().unwrap();
        let mut store = open(&dir);
        runtime().block_on(async {
            store
                .blocking_append([blank(1, 0), blank(1, 1)])
                .await
                .unwrap();
            store.log().append_as_follower(&batch).unwrap();
            let text = message(
                store
                    .try_get_log_entries(0..)
                    .await
                    .expect_err("an undecodable record"),
            );
            assert!(text.contains("offset 2"), "{what}: {text}");
            assert!(text.contains(expected), "{what}: {text}");
            // The entries before it still read, and the log state names the bad offset too.
            let good = store.try_get_log_entries(0..2).await.unwrap();
            assert_eq!(good.len(), 2, "{what}");
            let text = message(
                store
                    .get_log_state()
                    .await
                    .expect_err("the last entry is bad"),
            );
            assert!(text.contains("offset 2"), "{what}: {text}");
        });
    }
}
