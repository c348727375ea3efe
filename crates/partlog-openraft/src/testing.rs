//! A small in-memory key-value state machine and its type config, for openraft's storage
//! conformance suite (which needs a `RaftStateMachine` beside the log store), the crash test
//! and the `raft_kv` example. Not a production state machine: nothing of it is on disk.

use std::collections::BTreeMap;
use std::io::Cursor;
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    AnyError, Entry, EntryPayload, ErrorSubject, ErrorVerb, LogId, OptionalSend,
    RaftSnapshotBuilder, SnapshotMeta, StorageError, StorageIOError, StoredMembership,
};
use serde::{Deserialize, Serialize};

openraft::declare_raft_types!(
    /// The type config of the key-value tests: `u64` node ids, openraft's `BasicNode` and
    /// `Entry`, snapshots as bytes in memory, tokio.
    pub KvConfig:
        D = KvRequest,
        R = KvResponse,
);

/// A write to the key-value map.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum KvRequest {
    /// Sets `key` to `value`.
    Set {
        /// The key.
        key: String,
        /// The new value.
        value: String,
    },
}

/// What applying a request answered.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct KvResponse {
    /// The key's value before the write, if it had one.
    pub previous: Option<String>,
}

/// What a snapshot holds, serialized as JSON into the snapshot bytes.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct KvImage {
    last_applied: Option<LogId<u64>>,
    last_membership: StoredMembership<u64, openraft::BasicNode>,
    data: BTreeMap<String, String>,
}

#[derive(Debug, Default)]
struct KvInner {
    image: KvImage,
    snapshot: Option<(SnapshotMeta<u64, openraft::BasicNode>, Vec<u8>)>,
    snapshots_built: u64,
}

/// The in-memory key-value state machine. Clones share one map.
#[derive(Debug, Clone, Default)]
pub struct KvStateMachine {
    inner: Arc<Mutex<KvInner>>,
}

fn sm_error(verb: ErrorVerb, why: impl std::fmt::Display) -> StorageError<u64> {
    StorageIOError::new(
        ErrorSubject::StateMachine,
        verb,
        AnyError::error(why.to_string()),
    )
    .into()
}

impl KvStateMachine {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, KvInner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The value of `key`, if set.
    pub fn get(&self, key: &str) -> Option<String> {
        self.lock().image.data.get(key).cloned()
    }

    /// A copy of the whole map.
    pub fn data(&self) -> BTreeMap<String, String> {
        self.lock().image.data.clone()
    }

    /// The last applied log id.
    pub fn last_applied(&self) -> Option<LogId<u64>> {
        self.lock().image.last_applied
    }
}

impl RaftSnapshotBuilder<KvConfig> for KvStateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<KvConfig>, StorageError<u64>> {
        let mut inner = self.lock();
        let bytes = serde_json::to_vec(&inner.image)
            .map_err(|e| sm_error(ErrorVerb::Write, format!("snapshot encoding: {e}")))?;
        inner.snapshots_built += 1;
        let snapshot_id = match inner.image.last_applied {
            Some(id) => format!("{}-{}-{}", id.leader_id, id.index, inner.snapshots_built),
            None => format!("empty-{}", inner.snapshots_built),
        };
        let meta = SnapshotMeta {
            last_log_id: inner.image.last_applied,
            last_membership: inner.image.last_membership.clone(),
            snapshot_id,
        };
        inner.snapshot = Some((meta.clone(), bytes.clone()));
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(bytes)),
        })
    }
}

impl RaftStateMachine<KvConfig> for KvStateMachine {
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> Result<
        (
            Option<LogId<u64>>,
            StoredMembership<u64, openraft::BasicNode>,
        ),
        StorageError<u64>,
    > {
        let inner = self.lock();
        Ok((
            inner.image.last_applied,
            inner.image.last_membership.clone(),
        ))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<KvResponse>, StorageError<u64>>
    where
        I: IntoIterator<Item = Entry<KvConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut inner = self.lock();
        let mut responses = Vec::new();
        for entry in entries {
            inner.image.last_applied = Some(entry.log_id);
            let response = match entry.payload {
                EntryPayload::Blank => KvResponse::default(),
                EntryPayload::Normal(KvRequest::Set { key, value }) => KvResponse {
                    previous: inner.image.data.insert(key, value),
                },
                EntryPayload::Membership(membership) => {
                    inner.image.last_membership =
                        StoredMembership::new(Some(entry.log_id), membership);
                    KvResponse::default()
                }
            };
            responses.push(response);
        }
        Ok(responses)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<u64>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, openraft::BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<u64>> {
        let bytes = snapshot.into_inner();
        let image: KvImage = serde_json::from_slice(&bytes)
            .map_err(|e| sm_error(ErrorVerb::Read, format!("snapshot decoding: {e}")))?;
        let mut inner = self.lock();
        inner.image = KvImage {
            last_applied: meta.last_log_id,
            last_membership: meta.last_membership.clone(),
            data: image.data,
        };
        inner.snapshot = Some((meta.clone(), bytes));
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<KvConfig>>, StorageError<u64>> {
        Ok(self.lock().snapshot.clone().map(|(meta, bytes)| Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(bytes)),
        }))
    }
}
