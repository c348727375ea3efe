//! [`PartlogLogStore`]: openraft 0.9's `RaftLogStorage` (storage-v2) on a partlog [`Log`].
//!
//! Entries are batches of the log (one per entry, [`crate::entry_codec`]); the vote, the
//! committed log id and the last purged log id live in `partlog.raft-state`
//! ([`crate::raft_state`]) in the same directory.

#![allow(
    clippy::result_large_err,
    reason = "openraft's traits return its StorageError by value; the helpers here build it"
)]

use std::fmt::Debug;
use std::io;
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::{LogFlushed, LogState, RaftLogReader, RaftLogStorage};
use openraft::{
    AnyError, AsyncRuntime, CommittedLeaderId, Entry, ErrorSubject, ErrorVerb, LeaderId, LogId,
    OptionalSend, RaftTypeConfig, StorageError, StorageIOError, Vote,
};
use partlog::{Log, LogConfig, ReadBound};

use crate::entry_codec::{CodecError, EntryEncoder, decode_entry};
use crate::raft_state::{RaftStateFile, RaftStateRecord, StoredLogId, StoredVote, raft_state_path};

/// How many bytes one read of entries asks the log for; a read returns at least one whole
/// batch whatever this is, so it only sets how many entries come per call of `Log::read`.
const READ_CHUNK_BYTES: usize = 1 << 20;

/// The most an append reserves ahead for its batches: a guess from its first entry.
const RESERVE_CAP: usize = 1 << 20;

/// The state a store and its readers share.
#[derive(Debug)]
struct Shared {
    log: Log,
    state: Mutex<RaftStateFile>,
}

/// An openraft log store whose entries are the batches of a partlog [`Log`] in one directory,
/// which is therefore also a Kafka partition directory ([`entry_codec`](crate::entry_codec),
/// [`raft_state`](crate::raft_state)).
///
/// `C` is any type config with `u64` node ids and openraft's own [`Entry`]; the payload is
/// serialized with serde (openraft's `serde` feature). The store is its own log reader: clones
/// share one log and one `partlog.raft-state`.
pub struct PartlogLogStore<C> {
    shared: Arc<Shared>,
    _config: PhantomData<fn() -> C>,
}

impl<C> Clone for PartlogLogStore<C> {
    fn clone(&self) -> Self {
        PartlogLogStore {
            shared: Arc::clone(&self.shared),
            _config: PhantomData,
        }
    }
}

impl<C> Debug for PartlogLogStore<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartlogLogStore")
            .field("dir", &self.shared.log.dir())
            .finish_non_exhaustive()
    }
}

fn io_error(
    subject: ErrorSubject<u64>,
    verb: ErrorVerb,
    e: impl Into<AnyError>,
) -> StorageError<u64> {
    StorageIOError::new(subject, verb, e).into()
}

fn partlog_error(
    subject: ErrorSubject<u64>,
    verb: ErrorVerb,
    e: partlog::Error,
) -> StorageError<u64> {
    io_error(subject, verb, AnyError::new(&e))
}

fn codec_error(verb: ErrorVerb, e: CodecError) -> StorageError<u64> {
    io_error(ErrorSubject::LogIndex(e.index), verb, AnyError::new(&e))
}

fn to_stored(id: &LogId<u64>) -> StoredLogId {
    StoredLogId {
        term: id.leader_id.term,
        node_id: id.leader_id.node_id,
        index: id.index,
    }
}

fn from_stored(id: StoredLogId) -> LogId<u64> {
    LogId::new(CommittedLeaderId::new(id.term, id.node_id), id.index)
}

/// `index` as a partlog offset; an index above `i64::MAX` is no offset.
fn offset_of(index: u64) -> Result<i64, StorageError<u64>> {
    i64::try_from(index).map_err(|_| {
        io_error(
            ErrorSubject::LogIndex(index),
            ErrorVerb::Write,
            AnyError::error(format!(
                "index {index} is above i64::MAX, the largest Kafka offset"
            )),
        )
    })
}

impl<C> PartlogLogStore<C>
where
    C: RaftTypeConfig<NodeId = u64, Entry = Entry<C>>,
{
    /// Opens (creating if needed) the log in `dir` with `config` (its storage included) and its
    /// `partlog.raft-state`, then finishes a purge a crash interrupted: the last purged log id
    /// is saved before entries are removed, so entries at or below it may still be there.
    ///
    /// A log that has held an entry (its end offset is above 0) was written by a node that
    /// voted, so its `partlog.raft-state` must be there: if it is missing, opening fails with
    /// [`partlog::Error::MissingFile`] naming it. Recreated empty, it would make the node forget
    /// its vote (and vote twice in one term, which breaks Raft's safety) and its purge point.
    /// [`open_with_fresh_state`](Self::open_with_fresh_state) asks for that explicitly. An empty
    /// log cannot tell a first open from a lost file, and gets a new empty file.
    pub fn open(dir: impl AsRef<Path>, config: LogConfig) -> partlog::Result<Self> {
        Self::open_inner(dir.as_ref(), config, false)
    }

    /// Opens like [`open`](Self::open), except that a missing `partlog.raft-state` beside a
    /// non-empty log is created empty instead of failing: the node starts with no vote, no
    /// committed log id and no purge point. Only for a node that may forget its vote, for
    /// example one whose id has left the cluster's membership and rejoins as a new learner, or
    /// a whole cluster restarted from a copy of this log.
    pub fn open_with_fresh_state(
        dir: impl AsRef<Path>,
        config: LogConfig,
    ) -> partlog::Result<Self> {
        Self::open_inner(dir.as_ref(), config, true)
    }

    fn open_inner(dir: &Path, config: LogConfig, fresh_state: bool) -> partlog::Result<Self> {
        let storage = Arc::clone(&config.storage);
        let log = Log::open(dir, config)?;
        let path = raft_state_path(dir);
        if !fresh_state && log.log_end_offset() > 0 && !storage.exists(&path)? {
            return Err(partlog::Error::MissingFile {
                path,
                why: format!(
                    "the log beside it holds entries (log start {}, log end {}), so this node \
                     voted: without the file it would forget its vote and purge point, and \
                     could vote twice in one term. Restore the file from a backup, or open \
                     with PartlogLogStore::open_with_fresh_state only if this node may forget \
                     its vote",
                    log.log_start_offset(),
                    log.log_end_offset()
                ),
            });
        }
        let state = RaftStateFile::open(&storage, dir)?;
        let purged = state.current().last_purged;
        let store = PartlogLogStore {
            shared: Arc::new(Shared {
                log,
                state: Mutex::new(state),
            }),
            _config: PhantomData,
        };
        if let Some(purged) = purged {
            let next = i64::try_from(purged.index)
                .ok()
                .and_then(|i| i.checked_add(1))
                .ok_or_else(|| partlog::Error::InvalidArgument {
                    why: format!(
                        "partlog.raft-state names purged index {}, above the largest offset",
                        purged.index
                    ),
                })?;
            store.remove_through(next)?;
        }
        Ok(store)
    }

    /// The partlog log that holds the entries.
    pub fn log(&self) -> &Log {
        &self.shared.log
    }

    /// Closes the log (its final fsync and clean-shutdown record). Later calls fail.
    pub fn close(&self) -> partlog::Result<()> {
        self.shared.log.close()
    }

    fn state(&self) -> MutexGuard<'_, RaftStateFile> {
        // A panic while the lock was held left the file as its last write made it: still valid.
        self.shared
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn current_state(&self) -> RaftStateRecord {
        *self.state().current()
    }

    /// Makes every appended entry durable before a `partlog.raft-state` write, which is durable
    /// on return: openraft's storage contract lets no write take effect before an earlier one,
    /// and an append's entries become durable later, through the group commit. (openraft 0.9.25
    /// waits for each append's callback before its next write, so this rarely finds any.)
    fn sync_appended(&self) -> partlog::Result<()> {
        let log = &self.shared.log;
        if log.durable_offset() < log.log_end_offset() {
            log.sync()?;
        }
        Ok(())
    }

    /// Removes every entry below `next`: moves the log start there, or, when `next` is past the
    /// last entry (a snapshot installed beyond the log), starts the log afresh at `next`.
    fn remove_through(&self, next: i64) -> partlog::Result<()> {
        let log = &self.shared.log;
        if next > log.log_end_offset() {
            log.truncate_fully_and_start_at(next)
        } else {
            log.delete_records_before(next)
        }
    }

    /// The log id of the entry at `offset`, read from its batch.
    fn log_id_at(&self, offset: i64) -> Result<LogId<u64>, StorageError<u64>> {
        let index = u64::try_from(offset).unwrap_or(0);
        let entries = self.read_entries(offset, offset + 1)?;
        entries.into_iter().next().map(|e| e.log_id).ok_or_else(|| {
            io_error(
                ErrorSubject::LogIndex(index),
                ErrorVerb::Read,
                AnyError::error(format!("no entry at offset {offset}")),
            )
        })
    }

    /// The entries in `[start, end)` that the log holds.
    fn read_entries(&self, start: i64, end: i64) -> Result<Vec<Entry<C>>, StorageError<u64>> {
        let log = &self.shared.log;
        let mut offset = start.max(log.log_start_offset());
        let end = end.min(log.log_end_offset());
        // The range is the caller's: reserve for a read's worth, not for all of it at once.
        let wanted = usize::try_from(end.saturating_sub(offset)).unwrap_or(0);
        let mut entries = Vec::with_capacity(wanted.min(1024));
        let mut scratch = Vec::new();
        let read_error = |offset: i64, e: partlog::Error| {
            partlog_error(
                ErrorSubject::LogIndex(u64::try_from(offset).unwrap_or(0)),
                ErrorVerb::Read,
                e,
            )
        };
        while offset < end {
            let fetch = log
                .read(offset, READ_CHUNK_BYTES, ReadBound::LogEnd)
                .map_err(|e| read_error(offset, e))?;
            if fetch.is_empty() {
                break;
            }
            for batch in fetch.batches() {
                let batch = batch.map_err(|e| read_error(offset, e))?;
                let Some(view) = batch.as_v2() else {
                    return Err(codec_error(
                        ErrorVerb::Read,
                        CodecError {
                            index: u64::try_from(offset).unwrap_or(0),
                            why: "a legacy (magic 0 or 1) message, not an entry".into(),
                        },
                    ));
                };
                if view.base_offset() >= end {
                    break;
                }
                // A batch that starts below the offset but reaches it is no entry of this
                // store (its batches hold one record each): decoding it reports that.
                if view.last_offset() >= offset {
                    entries.push(
                        decode_entry::<C>(view, &mut scratch)
                            .map_err(|e| codec_error(ErrorVerb::Read, e))?,
                    );
                }
            }
            if fetch.next_offset() <= offset {
                break;
            }
            offset = fetch.next_offset();
        }
        Ok(entries)
    }
}

fn bounds(range: &impl RangeBounds<u64>) -> (i64, i64) {
    let clamp = |i: u64| i64::try_from(i).unwrap_or(i64::MAX);
    let start = match range.start_bound() {
        Bound::Included(&i) => clamp(i),
        Bound::Excluded(&i) => clamp(i).saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&i) => clamp(i).saturating_add(1),
        Bound::Excluded(&i) => clamp(i),
        Bound::Unbounded => i64::MAX,
    };
    (start, end)
}

impl<C> RaftLogReader<C> for PartlogLogStore<C>
where
    C: RaftTypeConfig<NodeId = u64, Entry = Entry<C>>,
{
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<C::Entry>, StorageError<C::NodeId>> {
        let (start, end) = bounds(&range);
        self.read_entries(start, end)
    }
}

impl<C> RaftLogStorage<C> for PartlogLogStore<C>
where
    C: RaftTypeConfig<NodeId = u64, Entry = Entry<C>>,
{
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<C>, StorageError<C::NodeId>> {
        let last_purged = self.current_state().last_purged.map(from_stored);
        let log = &self.shared.log;
        let end = log.log_end_offset();
        let last_log_id = if end > log.log_start_offset() {
            Some(self.log_id_at(end - 1)?)
        } else {
            last_purged
        };
        Ok(LogState {
            last_purged_log_id: last_purged,
            last_log_id,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        let stored = StoredVote {
            term: vote.leader_id.term,
            node_id: vote.leader_id.node_id,
            committed: vote.committed,
        };
        self.sync_appended()
            .map_err(|e| partlog_error(ErrorSubject::Vote, ErrorVerb::Write, e))?;
        self.state()
            .write(|record| record.vote = Some(stored))
            .map_err(|e| partlog_error(ErrorSubject::Vote, ErrorVerb::Write, e))
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<C::NodeId>>, StorageError<C::NodeId>> {
        Ok(self.current_state().vote.map(|v| Vote {
            leader_id: LeaderId::new(v.term, v.node_id),
            committed: v.committed,
        }))
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogId<C::NodeId>>,
    ) -> Result<(), StorageError<C::NodeId>> {
        let stored = committed.as_ref().map(to_stored);
        // A committed id saved ahead of its entries would name entries a crash took away.
        self.sync_appended()
            .map_err(|e| partlog_error(ErrorSubject::Store, ErrorVerb::Write, e))?;
        self.state()
            .write(|record| record.committed = stored)
            .map_err(|e| partlog_error(ErrorSubject::Store, ErrorVerb::Write, e))
    }

    async fn read_committed(
        &mut self,
    ) -> Result<Option<LogId<C::NodeId>>, StorageError<C::NodeId>> {
        Ok(self.current_state().committed.map(from_stored))
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<C>,
    ) -> Result<(), StorageError<C::NodeId>>
    where
        I: IntoIterator<Item = C::Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries = entries.into_iter();
        let expected = entries.size_hint().0;
        let mut encoder = EntryEncoder::new();
        let mut batches = Vec::new();
        let mut first = None;
        let mut last = None;
        for entry in entries {
            encoder
                .encode(&entry, &mut batches)
                .map_err(|e| codec_error(ErrorVerb::Write, e))?;
            if first.is_none() {
                // Room for the rest guessed from the first, instead of doubling the buffer
                // about ten times a call; capped, so that one large entry does not reserve
                // for all.
                let guess = batches.len().saturating_mul(expected.saturating_sub(1));
                batches.reserve(guess.min(RESERVE_CAP));
            }
            first.get_or_insert(entry.log_id);
            last = Some(entry.log_id);
        }
        let (Some(first), Some(last)) = (first, last) else {
            callback.log_io_completed(Ok(()));
            return Ok(());
        };
        let log = &self.shared.log;
        let first_offset = offset_of(first.index)?;
        if first_offset < log.log_end_offset() {
            // openraft's engine truncates before it appends over a conflict, but an append may
            // also start below what a purge removed (the suite's
            // get_initial_state_membership_from_log_and_sm does, after get_initial_state purged
            // up to the state machine's last applied id). Either way the new entries replace
            // everything from their first index on, as an in-memory map's inserts would.
            let replaced = if first_offset < log.log_start_offset() {
                log.truncate_fully_and_start_at(first_offset)
            } else {
                log.truncate_to(first_offset).map(drop)
            };
            replaced.map_err(|e| partlog_error(ErrorSubject::Log(first), ErrorVerb::Write, e))?;
        }
        log.append_as_follower(&batches)
            .map_err(|e| partlog_error(ErrorSubject::Log(last), ErrorVerb::Write, e))?;
        // Group commit: the log's flusher thread leads the fsync, and this task only waits.
        let durable = log.durable(offset_of(last.index)?);
        drop(C::AsyncRuntime::spawn(async move {
            let result = durable.await.map_err(io::Error::other);
            callback.log_io_completed(result);
        }));
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        let offset = offset_of(log_id.index)?;
        self.shared
            .log
            .truncate_to(offset)
            .map(drop)
            .map_err(|e| partlog_error(ErrorSubject::Log(log_id), ErrorVerb::Delete, e))
    }

    async fn purge(&mut self, log_id: LogId<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        let next = offset_of(log_id.index)?.checked_add(1).ok_or_else(|| {
            io_error(
                ErrorSubject::Log(log_id),
                ErrorVerb::Delete,
                AnyError::error("the purge index has no successor offset"),
            )
        })?;
        let stored = to_stored(&log_id);
        {
            let mut state = self.state();
            if state
                .current()
                .last_purged
                .is_some_and(|p| p.index >= stored.index)
            {
                // Already purged this far: the last purged id never goes backwards.
                return Ok(());
            }
            // Saved first: a crash before the entries go leaves them below a saved mark, which
            // open removes, never a gap below an older one.
            state
                .write(|record| record.last_purged = Some(stored))
                .map_err(|e| partlog_error(ErrorSubject::Log(log_id), ErrorVerb::Delete, e))?;
        }
        self.remove_through(next)
            .map_err(|e| partlog_error(ErrorSubject::Log(log_id), ErrorVerb::Delete, e))
    }
}
