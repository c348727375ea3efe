//! How a segment comes to be: [`Segment::create`] (all of its files or none),
//! [`Segment::open`] (trusting the files up to their length, the tail found from the last
//! offset-index entry, a bad index rebuilt or, read-only, refused) and
//! [`Segment::open_for_recovery`] (nothing trusted until a scan), with the checks of a
//! [`SegmentConfig`] they share.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::sync::atomic::{AtomicBool, AtomicI64, AtomicU64};
use crate::sync::{Mutex, RwLock};

use super::files::{SegmentFileKind, segment_file_path};
use super::log_segment::{Segment, SegmentConfig, SegmentRole, WriterState, note_max_timestamp};
use super::positions::PositionCache;
use super::read::MappingState;
use super::syncs::SegmentSyncs;
use super::txn_index::TransactionIndex;
use super::walker::{BatchWalker, Step};
use crate::error::{Corruption, Error, Result};
use crate::index::{OffsetIndex, TimeIndex};
use crate::storage::{OpenMode, Storage, StorageFile};

impl Segment {
    /// Creates a new, empty segment at `base_offset` in `dir`: its `.log`, `.index` and
    /// `.timeindex` files (the `.txnindex` comes with the first aborted transaction; a stale one
    /// left at that name belongs to a segment that is gone, and is removed). All or nothing: if
    /// any file cannot be created, the ones already created are removed and the error is
    /// returned. Directory durability is the log's job.
    pub fn create(
        storage: &Arc<dyn Storage>,
        dir: &Path,
        base_offset: i64,
        config: SegmentConfig,
        now_ms: i64,
    ) -> Result<Segment> {
        validate_config(&config)?;
        if base_offset < 0 {
            return Err(Error::InvalidArgument {
                why: format!("segment base offset {base_offset} is negative"),
            });
        }
        let log_path = segment_file_path(dir, base_offset, SegmentFileKind::Log);
        let index_path = segment_file_path(dir, base_offset, SegmentFileKind::OffsetIndex);
        let time_path = segment_file_path(dir, base_offset, SegmentFileKind::TimeIndex);
        let txn_path = segment_file_path(dir, base_offset, SegmentFileKind::TxnIndex);
        let mut created: Vec<&Path> = Vec::new();
        let result = (|| {
            let log = storage.open(&log_path, OpenMode::CreateNew)?;
            created.push(&log_path);
            if config.preallocate {
                log.set_len(u64::from(config.segment_bytes))?;
            }
            let offset_index = OffsetIndex::create(
                storage,
                &index_path,
                base_offset,
                config.segment_index_bytes,
            )?;
            created.push(&index_path);
            let time_index =
                TimeIndex::create(storage, &time_path, base_offset, config.segment_index_bytes)?;
            created.push(&time_path);
            if storage.exists(&txn_path)? {
                storage.remove(&txn_path)?;
                log::warn!(
                    "removed the stale {} of a segment that no longer exists",
                    txn_path.display()
                );
            }
            let txn_index = TransactionIndex::new_empty(storage, &txn_path, base_offset);
            Ok((log, offset_index, time_index, txn_index))
        })();
        let (log, offset_index, time_index, txn_index) = match result {
            Ok(files) => files,
            Err(error) => {
                for path in created {
                    if let Err(cleanup) = storage.remove(path) {
                        log::warn!(
                            "could not remove {} after a failed create: {cleanup}",
                            path.display()
                        );
                    }
                }
                return Err(error);
            }
        };
        Ok(Segment::assemble(
            storage,
            base_offset,
            log_path,
            log,
            offset_index,
            time_index,
            txn_index,
            config,
            SegmentRole::Active,
            now_ms,
        ))
    }

    /// Opens an existing segment, trusting its contents up to the file's length (the log calls
    /// [`scan`](Self::scan) when it does not).
    ///
    /// The work is O(1) plus a walk of the batches after the last offset-index entry (at most
    /// about `index.interval.bytes`), which finds the next offset. Each index gets Kafka's O(1)
    /// check; an index that is missing or fails it is rebuilt from the log, never trusted. For a
    /// [`SegmentRole::ReadOnly`] segment a bad index is an error instead, since nothing may be written.
    pub fn open(
        storage: &Arc<dyn Storage>,
        dir: &Path,
        base_offset: i64,
        config: SegmentConfig,
        role: SegmentRole,
        now_ms: i64,
    ) -> Result<Segment> {
        validate_config(&config)?;
        let log_path = segment_file_path(dir, base_offset, SegmentFileKind::Log);
        let index_path = segment_file_path(dir, base_offset, SegmentFileKind::OffsetIndex);
        let time_path = segment_file_path(dir, base_offset, SegmentFileKind::TimeIndex);
        let (mode, writable_indexes) = match role {
            SegmentRole::Active => (OpenMode::ReadWrite, true),
            SegmentRole::Sealed => (OpenMode::ReadWrite, false),
            SegmentRole::ReadOnly => (OpenMode::Read, false),
        };
        let log = storage.open(&log_path, mode)?;
        let size = log.len()?;
        if size > i32::MAX as u64 {
            return Err(Error::Corrupt {
                file: log_path,
                position: i32::MAX as u64,
                what: Corruption::Truncated {
                    needed: i32::MAX as u64,
                    available: size,
                },
            });
        }
        let (offset_index, time_index, created) = open_indexes(
            storage,
            [&index_path, &time_path],
            base_offset,
            config.segment_index_bytes,
            role,
            writable_indexes,
        )?;
        let txn_index = TransactionIndex::open(
            storage,
            &segment_file_path(dir, base_offset, SegmentFileKind::TxnIndex),
            base_offset,
            role != SegmentRole::ReadOnly,
        )?;
        let offset_index_ok = offset_index.quick_check(size).is_ok();
        let time_index_ok = time_index.quick_check().is_ok();
        let rebuild = !created.is_empty() || !offset_index_ok || !time_index_ok;
        let segment = Segment::assemble(
            storage,
            base_offset,
            log_path,
            log,
            offset_index,
            time_index,
            txn_index,
            config,
            role,
            now_ms,
        );
        // Loaded lazily from the first batch when a roll check needs it.
        segment.writer.lock().rolling_based_timestamp = None;
        // The tail is found from the last index entry: if what lies there is no valid batch,
        // the entry may be what is wrong, and a full scan (which rebuilds the indexes) tells.
        let rebuild = rebuild
            || match segment.load_tail(size) {
                Ok(()) => false,
                Err(Error::Corrupt { .. }) if role != SegmentRole::ReadOnly => true,
                Err(error) => return Err(error),
            };
        if rebuild {
            if role == SegmentRole::ReadOnly {
                // Name the index that failed, so that the user knows which file to look at.
                let bad_index = if !created.is_empty() || !offset_index_ok {
                    segment.offset_index.path()
                } else {
                    segment.time_index.path()
                };
                return Err(Error::Corrupt {
                    file: bad_index,
                    position: 0,
                    what: Corruption::BadIndexEntry(
                        "the index is missing or fails its check, and a read-only open may not rebuild it"
                            .into(),
                    ),
                });
            }
            log::info!("rebuilding the indexes of {}", segment.log_path().display());
            let failure = match segment.rescan() {
                Ok(report) => report.first_invalid.map(|invalid| Error::Corrupt {
                    file: segment.log_path(),
                    position: invalid.position,
                    what: invalid.what,
                }),
                Err(error) => Some(error),
            };
            if let Some(error) = failure {
                drop(segment);
                // The rescan left the indexes as they were, and an index this open created
                // (its file was missing) holds no entry: at its name, it would pass the next
                // open's check once the damage is gone and never be rebuilt. Removed, it is
                // missing again, and that open rebuilds it.
                for path in &created {
                    if let Err(cleanup) = storage.remove(path) {
                        log::warn!("could not remove {}: {cleanup}", path.display());
                    }
                }
                return Err(error);
            }
        }
        Ok(segment)
    }

    /// Opens an existing segment as the active one without trusting anything in it: the indexes
    /// are opened (created when missing) but not checked, and nothing is published until the
    /// caller runs [`scan`](Self::scan), which validates every batch and rebuilds the indexes.
    /// This is how recovery opens the segments above the recovery point.
    ///
    /// With `read_only`, nothing is written: the `.log` opens read-only and the indexes are
    /// rebuilt in memory only.
    // ARCHITECTURE.md §3, invariant 22.
    pub fn open_for_recovery(
        storage: &Arc<dyn Storage>,
        dir: &Path,
        base_offset: i64,
        config: SegmentConfig,
        now_ms: i64,
        read_only: bool,
    ) -> Result<Segment> {
        validate_config(&config)?;
        let log_path = segment_file_path(dir, base_offset, SegmentFileKind::Log);
        let index_path = segment_file_path(dir, base_offset, SegmentFileKind::OffsetIndex);
        let time_path = segment_file_path(dir, base_offset, SegmentFileKind::TimeIndex);
        // Kept as it is: rebuilding it needs the producer state, which is the log's.
        let txn_index = TransactionIndex::open(
            storage,
            &segment_file_path(dir, base_offset, SegmentFileKind::TxnIndex),
            base_offset,
            !read_only,
        )?;
        if read_only {
            let log = storage.open(&log_path, OpenMode::Read)?;
            let offset_index =
                OffsetIndex::in_memory(&index_path, base_offset, config.segment_index_bytes)?;
            let time_index =
                TimeIndex::in_memory(&time_path, base_offset, config.segment_index_bytes)?;
            return Ok(Segment::assemble(
                storage,
                base_offset,
                log_path,
                log,
                offset_index,
                time_index,
                txn_index,
                config,
                SegmentRole::ReadOnly,
                now_ms,
            ));
        }
        let log = storage.open(&log_path, OpenMode::ReadWrite)?;
        let role = SegmentRole::Active;
        let (offset_index, time_index, _) = open_indexes(
            storage,
            [&index_path, &time_path],
            base_offset,
            config.segment_index_bytes,
            role,
            true,
        )?;
        Ok(Segment::assemble(
            storage,
            base_offset,
            log_path,
            log,
            offset_index,
            time_index,
            txn_index,
            config,
            role,
            now_ms,
        ))
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "a private constructor that names every part"
    )]
    fn assemble(
        storage: &Arc<dyn Storage>,
        base_offset: i64,
        log_path: PathBuf,
        log: Arc<dyn StorageFile>,
        offset_index: OffsetIndex,
        time_index: TimeIndex,
        txn_index: TransactionIndex,
        config: SegmentConfig,
        role: SegmentRole,
        now_ms: i64,
    ) -> Segment {
        let position_cache_bytes = config.position_cache_bytes;
        // Unique for the process's life: a cache keyed by it never mistakes a new segment
        // (a reopen, a compaction's swap) for an old one at the same address.
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Segment {
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            storage: Arc::clone(storage),
            base_offset,
            log_path,
            log,
            offset_index,
            time_index,
            txn_index,
            config,
            role: RwLock::new(role),
            published_size: AtomicU64::new(0),
            published_next_offset: AtomicI64::new(base_offset),
            sealed: AtomicBool::new(role != SegmentRole::Active),
            truncation_seq: AtomicU64::new(0),
            truncated_to: AtomicI64::new(i64::MAX),
            mapping: RwLock::new(MappingState::NotYet),
            positions: PositionCache::new(position_cache_bytes),
            writer: Mutex::new(WriterState {
                size: 0,
                next_offset: base_offset,
                bytes_since_last_index_entry: 0,
                max_timestamp_so_far: None,
                rolling_based_timestamp: Some(None),
                created_ms: now_ms,
                broken: false,
                index_room: None,
            }),
            syncs: SegmentSyncs::default(),
            damage: std::sync::OnceLock::new(),
        }
    }

    /// Finds the next offset, the largest timestamp and the index counter from the last index
    /// entries and a walk of the batches after them.
    fn load_tail(&self, size: u64) -> Result<()> {
        let mut writer = self.writer.lock();
        writer.index_room = None;
        let last_entry = self.offset_index.last_entry()?;
        let mut max_so_far = self.time_index_max()?;
        let mut next_offset = self.base_offset;
        let mut walker = BatchWalker::new(&self.log, &self.log_path, size);
        let mut position = u64::from(last_entry.position);
        loop {
            match walker.frame_at(position)? {
                Step::End => break,
                Step::Partial { available, needed } => {
                    return Err(Error::Corrupt {
                        file: self.log_path(),
                        position,
                        what: Corruption::Truncated { needed, available },
                    });
                }
                Step::Batch(frame) => {
                    let summary = walker.summary(&frame)?;
                    // The tail sets the segment's end: a damaged baseOffset or lastOffsetDelta
                    // here would move it, and hide or invent offsets without an error.
                    if summary.order_floor() < next_offset
                        || summary.last_offset < summary.order_floor()
                        || summary.last_offset - self.base_offset > i32::MAX as i64
                    {
                        return Err(Error::Corrupt {
                            file: self.log_path(),
                            position,
                            what: Corruption::OffsetOrder {
                                offset: summary.order_floor(),
                                bound: next_offset,
                            },
                        });
                    }
                    next_offset = summary.next_offset();
                    note_max_timestamp(&mut max_so_far, &summary);
                    position += frame.total_size;
                }
            }
        }
        writer.size = size;
        writer.next_offset = next_offset;
        writer.bytes_since_last_index_entry = size - u64::from(last_entry.position);
        writer.max_timestamp_so_far = max_so_far;
        self.publish(&writer);
        Ok(())
    }
}

/// Opens a segment's offset and time indexes (`paths` in that order), creating a missing one
/// when the role allows writing. Returns them and the paths of those created (if any, the pair
/// must be rebuilt from the log). A read-only role treats a missing index as corruption.
fn open_indexes(
    storage: &Arc<dyn Storage>,
    [index_path, time_path]: [&Path; 2],
    base_offset: i64,
    max_index_bytes: u32,
    role: SegmentRole,
    writable: bool,
) -> Result<(OffsetIndex, TimeIndex, Vec<PathBuf>)> {
    let missing = |path: &Path| -> Result<bool> {
        let missing = !storage.exists(path)?;
        if missing && role == SegmentRole::ReadOnly {
            return Err(Error::Corrupt {
                file: path.to_path_buf(),
                position: 0,
                what: Corruption::BadIndexEntry("the index file is missing".into()),
            });
        }
        Ok(missing)
    };
    let (index_missing, time_missing) = (missing(index_path)?, missing(time_path)?);
    let offset_index = if index_missing {
        OffsetIndex::create(storage, index_path, base_offset, max_index_bytes)?
    } else {
        OffsetIndex::open(storage, index_path, base_offset, max_index_bytes, writable)?
    };
    let time_index = if time_missing {
        TimeIndex::create(storage, time_path, base_offset, max_index_bytes)?
    } else {
        TimeIndex::open(storage, time_path, base_offset, max_index_bytes, writable)?
    };
    let created = [(index_missing, index_path), (time_missing, time_path)]
        .into_iter()
        .filter(|(missing, _)| *missing)
        .map(|(_, path)| path.to_path_buf())
        .collect();
    Ok((offset_index, time_index, created))
}

fn validate_config(config: &SegmentConfig) -> Result<()> {
    if config.segment_bytes == 0 || config.segment_bytes > i32::MAX as u32 {
        return Err(Error::InvalidConfig {
            setting: "segment.bytes",
            why: format!("{} is outside [1, {}]", config.segment_bytes, i32::MAX),
        });
    }
    if config.segment_index_bytes < 12 {
        return Err(Error::InvalidConfig {
            setting: "segment.index.bytes",
            why: format!(
                "{} is below one time-index entry (12 bytes)",
                config.segment_index_bytes
            ),
        });
    }
    if config.segment_ms <= 0 {
        return Err(Error::InvalidConfig {
            setting: "segment.ms",
            why: format!("{} is not positive", config.segment_ms),
        });
    }
    if config.roll_jitter_ms < 0 || config.roll_jitter_ms >= config.segment_ms {
        return Err(Error::InvalidConfig {
            setting: "segment.jitter.ms",
            why: format!(
                "the drawn jitter {} is outside [0, segment.ms)",
                config.roll_jitter_ms
            ),
        });
    }
    Ok(())
}
