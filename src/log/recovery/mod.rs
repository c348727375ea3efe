//! Owns nothing once the log is open: the open's scan of the directory (this file), the derived
//! state it rebuilds (`derived.rs`) and the producer state it loads (`producer_load.rs`), handed to
//! the owners as a `Recovered`. Uses every folder below it, `maintenance` included (the completion
//! of an interrupted compaction swap).
//!
//! Opening a log directory: tidying leftovers, then recovering (ARCHITECTURE.md §3, invariant 5;
//! §7; Kafka's `LogLoader`).
//!
//! - **After a clean shutdown** the checkpoint's clean-shutdown fields name the active segment,
//!   its size and the log end offset. If all three match the directory, open reads the active
//!   segment's tail and nothing else: sealed segments stay closed until a reader needs them.
//! - **After a crash** every segment from the one holding the offset before the recovery point
//!   on is validated batch by batch (index entries below the point are kept after a check), and
//!   its indexes are rebuilt. An invalid byte that a crash explains is a torn write: the segment
//!   is truncated there and later segments are deleted. A crash explains it above the recovery
//!   point, unless it is a whole batch whose CRC is right, and, without a valid checkpoint (the
//!   durable point unknown), only in the last segment. Any other is corruption, and
//!   [`RecoveryMode`] decides. An offset gap between segments is a lost tail (the log is cut
//!   there) at or above the recovery point of a valid checkpoint; elsewhere it is legal when
//!   the checkpoint says the log's records were compacted or the cleanup policy includes
//!   compact ([`gaps_between_segments_are_legal`]), and corruption otherwise.
//! - **Before any cut** what it takes is counted ([`Discarded`]): a refusal says it, and so does
//!   the report of an open that cut.
//! - **An interrupted compaction** is finished first: a leftover `.swap` replaces every segment
//!   whose base lies in `[its base, its next offset)`.
//! - **A repair** (`rescan_from`) validates every segment from the damaged one on from byte 0,
//!   whatever the checkpoint says.
//!
//! A read-only open never writes: it validates the same way, but keeps rebuilt indexes in memory
//! and simply stops reading at the first invalid byte.

pub(in crate::log) mod derived;
pub(in crate::log) mod producer_load;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::log::files::checkpoint::{
    CheckpointFile, CheckpointRecord, gaps_between_segments_are_legal,
};
use crate::log::files::dir_listing::DirListing;
use crate::log::observe::discarded::{CutPlan, DiscardReason, Discarded};
use crate::log::observe::stats::RecoveryReport;
use crate::log::segments::snapshot::SegmentHandle;
use crate::log::{LogConfig, RecoveryMode};
use crate::rng::SplitMix64;
use crate::segment::{
    BatchWalker, InvalidBytes, RisingEpochs, ScanReport, Segment, SegmentFileKind, SegmentRole,
    Step, TransientSuffix, parse_segment_file_name, segment_file_path,
};
use crate::storage::{OpenMode, Storage, drop_cached_tail};

/// What recovery hands to the log.
pub(crate) struct Recovered {
    pub handles: Vec<Arc<SegmentHandle>>,
    pub active: Arc<Segment>,
    pub checkpoint: Option<CheckpointFile>,
    pub recovery_point: i64,
    pub log_start_offset: i64,
    pub durable_offset: i64,
    /// The base of the first segment an unclean recovery scanned (`None` after a clean
    /// shutdown): the `.txnindex` files from there on are rebuilt with the producer state.
    pub first_recovered_base: Option<i64>,
    /// The log ended below its start offset and restarted empty there (Kafka then clears the
    /// leader-epoch cache and the producer state).
    pub restarted_at_log_start: bool,
    /// The epochs an unclean recovery's scan found rising through the segments from
    /// `first_recovered_base` on (empty when it scanned none), for the epoch cache's load.
    pub scanned_epochs: RisingEpochs,
    pub report: RecoveryReport,
    /// The directory as recovery listed and tidied it, when recovery created, renamed and
    /// removed nothing else after that (a trusted clean shutdown); `None` when the next step
    /// must list it anew.
    pub listing: Option<DirListing>,
    /// The checkpoint's `COMPACTED` flag: the log's records have been compacted.
    pub compacted: bool,
}

/// Opens and recovers the log in `dir`. See the [module docs](self).
///
/// In phases, as Kafka's `LogLoader.load()`: tidy the directory, read the checkpoint, then
/// either start a new log, trust a clean shutdown, or scan from the recovery point; then apply
/// the log start offset, and record what recovery made durable.
///
/// `rescan_from` (a repair's open) distrusts everything from the segment holding that offset on:
/// the clean-shutdown record is ignored, and every segment from there is validated from byte 0
/// with its indexes rebuilt (and, by the producer-state load, its `.txnindex`). The recovery
/// point still decides what is corruption.
pub(crate) fn recover(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    config: &LogConfig,
    read_only: bool,
    rescan_from: Option<i64>,
    now_ms: i64,
    jitter: &mut SplitMix64,
) -> Result<Recovered> {
    let mut report = RecoveryReport::default();
    let live = read_only && config.allow_live_writer;
    // Phase 1: finish or undo what interrupted operations left, and list the segments.
    let mut listing = DirListing::read(&**storage, dir)?;
    let bases = tidy_directory(storage, dir, &mut listing, read_only, live, &mut report)?;
    // Phase 2: the checkpoint, which a writable open keeps open to write.
    let (mut checkpoint, record) = open_checkpoint(storage, dir, read_only)?;
    let active_config = config.segment_config(config.draw_roll_jitter(jitter.next_u64()));
    let checkpoint_start = record.map_or(0, |r| r.log_start_offset).max(0);

    let Some(&first_base) = bases.first() else {
        // Phase 3, a directory without segments: a new log at the checkpoint's start offset.
        if read_only {
            return Err(Error::InvalidArgument {
                why: format!("{} holds no log segments", dir.display()),
            });
        }
        let mut recovered = start_empty_log(
            storage,
            dir,
            checkpoint_start,
            active_config,
            now_ms,
            checkpoint,
            report,
        )?;
        recovered.compacted = record.is_some_and(|r| r.compacted);
        return Ok(recovered);
    };
    let last_base = bases[bases.len() - 1];
    let role = if read_only {
        SegmentRole::ReadOnly
    } else {
        SegmentRole::Active
    };

    // Phase 3: trust a clean shutdown whose record matches the directory, or scan from the
    // recovery point. A live writer may append to the segment that the clean-shutdown record
    // names: its tail must be indexed in memory, which only the recovery scan does.
    let clean_active = if live || rescan_from.is_some() {
        None
    } else {
        match clean_shutdown_active(
            storage,
            dir,
            record,
            last_base,
            role,
            &active_config,
            now_ms,
        ) {
            Ok(active) => active,
            Err(error) => {
                log::warn!(
                    "{}: the clean-shutdown record does not hold ({error}); recovering",
                    dir.display()
                );
                None
            }
        }
    };
    let mut recovered = if let Some(active) = clean_active {
        let mut recovered = recovered_clean(&bases, active, report);
        recovered.listing = Some(listing);
        recovered
    } else {
        recover_unclean(
            storage,
            dir,
            config,
            &bases,
            UncleanOpen {
                record,
                read_only,
                rescan_from,
                now_ms,
            },
            active_config,
            report,
        )?
    };

    // Phase 4: the log start offset; a log that ends below it starts over there.
    recovered.log_start_offset = checkpoint_start.max(first_base);
    if recovered.active.next_offset() < recovered.log_start_offset && !read_only {
        recovered.listing = None;
        restart_at_log_start(storage, dir, config, now_ms, &mut recovered)?;
    }

    // Phase 5: record what recovery made durable. After a clean shutdown that the open
    // changed nothing of, the clean-shutdown record stands: the log consumes it before its
    // first change (`Shared::consume_clean_shutdown`), so an open that is only read, or closed
    // again, writes and syncs nothing here.
    recovered.report.log_end_offset = recovered.active.next_offset();
    let clean_record_stands = recovered.report.clean_shutdown && !recovered.restarted_at_log_start;
    if let Some(file) = checkpoint.as_mut().filter(|_| !clean_record_stands) {
        // Consumes any clean-shutdown fields (a crash from now on must not look clean), and
        // records what recovery made durable.
        file.write(
            recovered.recovery_point,
            recovered.log_start_offset,
            None,
            true,
        )?;
    }
    recovered.compacted = record.is_some_and(|r| r.compacted);
    if config.cleanup_policy.compacts()
        && let Some(file) = checkpoint.as_mut()
    {
        // The segments may hold a cleaner's gaps already: the next record says so, so that a
        // later open under `delete` still reads across them (`carry_compacted`).
        file.carry_compacted();
        recovered.compacted = true;
    }
    recovered.checkpoint = checkpoint;
    Ok(recovered)
}

/// Reads the checkpoint; a writable open also keeps the file open, to write it.
fn open_checkpoint(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    read_only: bool,
) -> Result<(Option<CheckpointFile>, Option<CheckpointRecord>)> {
    if read_only {
        Ok((None, CheckpointFile::read(storage, dir)?))
    } else {
        let (file, record) = CheckpointFile::open(storage, dir)?;
        Ok((Some(file), record))
    }
}

/// Starts a new, empty log at `start` in a directory without segments.
fn start_empty_log(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    checkpoint_start: i64,
    active_config: crate::segment::SegmentConfig,
    now_ms: i64,
    mut checkpoint: Option<CheckpointFile>,
    mut report: RecoveryReport,
) -> Result<Recovered> {
    let active = Arc::new(Segment::create(
        storage,
        dir,
        checkpoint_start,
        active_config,
        now_ms,
    )?);
    storage.sync_dir(dir)?;
    if let Some(file) = checkpoint.as_mut() {
        // Every writable open leaves a valid record, even for a brand-new log.
        file.write(checkpoint_start, checkpoint_start, None, true)?;
    }
    report.log_end_offset = checkpoint_start;
    report.recovery_point = checkpoint_start;
    report.clean_shutdown = true;
    Ok(Recovered {
        handles: vec![SegmentHandle::opened(Arc::clone(&active))],
        active,
        checkpoint,
        recovery_point: checkpoint_start,
        log_start_offset: checkpoint_start,
        durable_offset: checkpoint_start,
        first_recovered_base: None,
        restarted_at_log_start: false,
        scanned_epochs: RisingEpochs::default(),
        listing: None,
        report,
        compacted: false,
    })
}

/// The log after a clean shutdown: the active segment `active`, already open, and every other
/// segment closed until a reader needs it.
fn recovered_clean(bases: &[i64], active: Arc<Segment>, mut report: RecoveryReport) -> Recovered {
    report.clean_shutdown = true;
    let end = active.next_offset();
    report.recovery_point = end;
    let mut handles: Vec<_> = bases[..bases.len() - 1]
        .iter()
        .map(|&base| SegmentHandle::closed(base))
        .collect();
    handles.push(SegmentHandle::opened(Arc::clone(&active)));
    Recovered {
        handles,
        active,
        checkpoint: None,
        recovery_point: end,
        log_start_offset: 0,
        durable_offset: end,
        first_recovered_base: None,
        restarted_at_log_start: false,
        scanned_epochs: RisingEpochs::default(),
        listing: None,
        report,
        compacted: false,
    }
}

/// Kafka's rule: a log that ends below its start offset lost what it held; start over, with
/// an empty log at the start offset.
fn restart_at_log_start(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    config: &LogConfig,
    now_ms: i64,
    recovered: &mut Recovered,
) -> Result<()> {
    // Only at a base a segment can have: a start offset no segment can begin at comes from
    // a damaged checkpoint, and is refused before any segment goes.
    if recovered.log_start_offset > i64::MAX - i64::from(i32::MAX) {
        return Err(Error::Unsupported {
            what: format!(
                "{} names log start offset {}, above any segment's base offset (at most \
                 i64::MAX - i32::MAX); remove the file to recover from the segments",
                crate::log::files::checkpoint::checkpoint_path(dir).display(),
                recovered.log_start_offset
            ),
        });
    }
    log::warn!(
        "{}: the log ends at {} below its start offset {}; starting an empty log there",
        dir.display(),
        recovered.active.next_offset(),
        recovered.log_start_offset
    );
    let first_base = recovered.handles.first().map_or(0, |h| h.base_offset());
    let mut discarded = Discarded {
        reason: DiscardReason::BelowLogStart,
        file: segment_file_path(dir, first_base, SegmentFileKind::Log),
        position: 0,
        cut_offset: recovered.log_start_offset,
        end_offset: recovered.active.next_offset(),
        records: 0,
        bytes: 0,
        deleted_segments: Vec::with_capacity(recovered.handles.len()),
    };
    for handle in &recovered.handles {
        let log_path = segment_file_path(dir, handle.base_offset(), SegmentFileKind::Log);
        discarded.bytes += storage.metadata(&log_path).map_or(0, |m| m.len);
        remove_segment_files(&**storage, dir, handle.base_offset())?;
        discarded.deleted_segments.push(log_path);
        recovered.report.segments_deleted += 1;
    }
    recovered.report.discarded = Some(discarded);
    let active = Arc::new(Segment::create(
        storage,
        dir,
        recovered.log_start_offset,
        config.segment_config(0),
        now_ms,
    )?);
    storage.sync_dir(dir)?;
    recovered.handles = vec![SegmentHandle::opened(Arc::clone(&active))];
    recovered.active = active;
    recovered.recovery_point = recovered.log_start_offset;
    recovered.durable_offset = recovered.log_start_offset;
    recovered.first_recovered_base = None;
    recovered.scanned_epochs = RisingEpochs::default();
    recovered.restarted_at_log_start = true;
    Ok(())
}

/// Removes what an interrupted operation left behind and lists the segments' base offsets.
fn tidy_directory(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    listing: &mut DirListing,
    read_only: bool,
    live: bool,
    report: &mut RecoveryReport,
) -> Result<Vec<i64>> {
    if !read_only {
        // An interrupted compaction: finish or undo it before anything reads the segments.
        if crate::log::maintenance::compaction::complete_swaps(storage, dir, listing.names())? {
            *listing = DirListing::read(&**storage, dir)?;
        }
    }
    let names = listing.names();
    let mut bases = Vec::new();
    let mut indexes: Vec<(String, i64)> = Vec::new();
    let mut strays = Vec::new();
    for name in names {
        if name.ends_with(crate::segment::DELETED_SUFFIX) && looks_like_segment_file(name) {
            // A deletion or an index rewrite that did not finish: Kafka removes these unread.
            strays.push(name.clone());
            continue;
        }
        let Some(parsed) = parse_segment_file_name(name) else {
            continue;
        };
        match (parsed.transient, parsed.kind) {
            (None, SegmentFileKind::Log) => bases.push(parsed.base_offset),
            (None, _) => indexes.push((name.clone(), parsed.base_offset)),
            (Some(TransientSuffix::Cleaned), _) => strays.push(name.clone()),
            // A live writer is completing its compaction swap: the old segments are still there.
            (Some(TransientSuffix::Swap), _) if live => {}
            (Some(TransientSuffix::Swap), _) => {
                return Err(Error::Unsupported {
                    what: format!(
                        "{} holds {name}, an unfinished compaction swap; a read-only open \
                         cannot complete it (open the log for writing once)",
                        dir.display()
                    ),
                });
            }
            (Some(TransientSuffix::Deleted), _) => strays.push(name.clone()),
        }
    }
    bases.sort_unstable();
    for (name, base) in indexes {
        if bases.binary_search(&base).is_err() {
            strays.push(name);
        }
    }
    if !read_only && !strays.is_empty() {
        for name in &strays {
            match storage.remove(&dir.join(name)) {
                // Already gone (a reaper of this process finished it): the goal is met.
                Err(error) if error.io_kind() == Some(std::io::ErrorKind::NotFound) => {}
                other => other?,
            }
        }
        storage.sync_dir(dir)?;
        listing.forget_all(&strays);
        report.stray_files_removed = strays;
    }
    Ok(bases)
}

fn looks_like_segment_file(name: &str) -> bool {
    name.len() > 20
        && name.as_bytes()[..20].iter().all(u8::is_ascii_digit)
        && name.as_bytes()[20] == b'.'
}

/// Opens the active segment if the checkpoint's clean-shutdown fields match the directory:
/// the last segment's base, its `.log` size, and the log end offset found in its tail.
fn clean_shutdown_active(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    record: Option<CheckpointRecord>,
    last_base: i64,
    role: SegmentRole,
    config: &crate::segment::SegmentConfig,
    now_ms: i64,
) -> Result<Option<Arc<Segment>>> {
    let Some(clean) = record.and_then(|r| r.clean_shutdown) else {
        return Ok(None);
    };
    let log_path = segment_file_path(dir, last_base, SegmentFileKind::Log);
    if clean.active_segment_base != last_base
        || storage.metadata(&log_path)?.len != clean.active_segment_size
    {
        return Ok(None);
    }
    let active = Segment::open(storage, dir, last_base, config.clone(), role, now_ms)?;
    if active.next_offset() != clean.log_end_offset {
        return Ok(None);
    }
    Ok(Some(Arc::new(active)))
}

/// How an unclean recovery opens: the checkpoint's record, read-only or not, and from where a
/// repair rescans.
#[derive(Clone, Copy)]
struct UncleanOpen {
    record: Option<CheckpointRecord>,
    read_only: bool,
    rescan_from: Option<i64>,
    now_ms: i64,
}

/// Validates every segment from the one holding the recovery point on.
fn recover_unclean(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    config: &LogConfig,
    bases: &[i64],
    open: UncleanOpen,
    active_config: crate::segment::SegmentConfig,
    mut report: RecoveryReport,
) -> Result<Recovered> {
    let UncleanOpen {
        record,
        read_only,
        rescan_from,
        now_ms,
    } = open;
    // Phase 1: the recovery point, and the first segment to scan.
    let first_base = bases[0];
    let recovery_point = record
        .map_or(first_base, |r| r.recovery_point)
        .max(first_base);
    report.recovery_point = recovery_point;
    // From the segment holding the offset before the recovery point: a segment that ends
    // exactly at the point was sealed after it was recorded (its final time-index entry and
    // trimmed index lengths may not have reached the disk), so it is checked too. A repair
    // starts at the damaged segment if that lies lower, and trusts no index entry from there.
    let mut start = bases
        .partition_point(|&b| b < recovery_point)
        .saturating_sub(1);
    if let Some(from) = rescan_from {
        start = start.min(bases.partition_point(|&b| b <= from).saturating_sub(1));
    }
    let trust_point = match rescan_from {
        Some(_) => bases[start],
        None => recovery_point,
    };

    // Phase 2: scan each segment from there, up to the first invalid byte or lost tail.
    let scan = UncleanScan {
        storage,
        dir,
        config,
        bases,
        read_only,
        now_ms,
        recovery_point,
        trust_point,
        // Without partlog's checkpoint (missing, or neither slot valid) nothing says what was
        // durable: a Kafka directory opened for the first time, or a damaged one.
        durable_point_known: record.is_some(),
        gaps_legal: gaps_between_segments_are_legal(
            record.is_some_and(|r| r.compacted),
            config.cleanup_policy,
        ),
    };
    let mut scanned_epochs = RisingEpochs::default();
    let (mut scanned, deleted_from) =
        scan.scan_from(start, active_config, &mut report, &mut scanned_epochs)?;

    // Phase 3: the segments after the cut, if the scan cut the log, go.
    if let Some(from) = deleted_from {
        let later = &bases[from.min(bases.len())..];
        if !read_only {
            for &base in later {
                remove_segment_files(&**storage, dir, base)?;
            }
        }
        report.segments_deleted += later.len();
    }

    // Phase 4: a writable open seals and syncs what it scanned, the last segment staying active.
    let active = scanned.pop().ok_or_else(|| Error::InvalidArgument {
        why: "recovery found no segment to continue from".into(),
    })?;
    if !read_only {
        for segment in &scanned {
            segment.seal()?;
            segment.flush()?;
        }
        active.flush()?;
        storage.sync_dir(dir)?;
    }

    // Phase 5: the segment list (those below the scan closed until a reader needs them) and
    // the durable offset.
    let end = active.next_offset();
    let mut handles: Vec<_> = bases[..start]
        .iter()
        .map(|&b| SegmentHandle::closed(b))
        .collect();
    handles.extend(scanned.into_iter().map(SegmentHandle::opened));
    handles.push(SegmentHandle::opened(Arc::clone(&active)));
    // A writable log synced everything it recovered; a read-only one can only trust the point
    // the writer recorded.
    let durable = if read_only {
        recovery_point.min(end)
    } else {
        end
    };
    let first_recovered_base = handles.get(start).map(|handle| handle.base_offset());
    Ok(Recovered {
        handles,
        active,
        checkpoint: None,
        recovery_point: durable,
        log_start_offset: 0,
        durable_offset: durable,
        first_recovered_base,
        restarted_at_log_start: false,
        scanned_epochs,
        listing: None,
        report,
        compacted: false,
    })
}

/// What the scan of an unclean recovery reads and decides by.
#[derive(Clone, Copy)]
struct UncleanScan<'a> {
    storage: &'a Arc<dyn Storage>,
    dir: &'a Path,
    config: &'a LogConfig,
    bases: &'a [i64],
    read_only: bool,
    now_ms: i64,
    /// Every offset below it was durable: an invalid byte below it is corruption.
    recovery_point: i64,
    /// Index entries below it are kept after a check (the recovery point, or a repair's first
    /// rescanned base).
    trust_point: i64,
    /// The log has a valid partlog checkpoint. Without one, only the torn tail of the last
    /// segment can be told from damage, and compaction's gaps may lie anywhere.
    durable_point_known: bool,
    /// Offsets may be missing between segments below the recovery point: the checkpoint says
    /// the log's records were compacted, or its cleanup policy includes compact.
    gaps_legal: bool,
}

/// How a cut of the log is judged.
enum CutKind {
    /// What a crash leaves: cut it, whatever the mode.
    Crash(DiscardReason),
    /// What no crash explains: [`RecoveryMode`] decides.
    Corruption,
}

impl UncleanScan<'_> {
    /// Validates the segments from the `start`th on, in order, noting the epochs their batches
    /// raise in `scanned_epochs`, and returns them with, if the
    /// log is cut after the last of them, the index of the first segment that goes.
    fn scan_from(
        &self,
        start: usize,
        active_config: crate::segment::SegmentConfig,
        report: &mut RecoveryReport,
        scanned_epochs: &mut RisingEpochs,
    ) -> Result<(Vec<Arc<Segment>>, Option<usize>)> {
        let UncleanScan {
            storage,
            dir,
            config,
            bases,
            read_only,
            now_ms,
            ..
        } = *self;
        let mut scanned: Vec<Arc<Segment>> = Vec::new();
        let mut deleted_from = None;
        for (i, &base) in bases.iter().enumerate().skip(start) {
            let segment_config = if i + 1 == bases.len() {
                active_config.clone()
            } else {
                config.segment_config(0)
            };
            if !read_only {
                // Opening for recovery reads the indexes, and recovery trusts their entries
                // below the point: read them from the disk (a read-only open rebuilds them in
                // memory).
                drop_cached_indexes(&**storage, dir, base)?;
            }
            let segment =
                Segment::open_for_recovery(storage, dir, base, segment_config, now_ms, read_only)?;
            let mut scan = segment.recover_noting_epochs(self.trust_point, scanned_epochs)?;
            report.segments_scanned += 1;
            report.bytes_scanned += scan.valid_bytes - scan.scanned_from;
            let next_base = bases.get(i + 1).copied();
            if let Some(invalid) = scan.first_invalid.take() {
                self.cut_at_invalid_bytes(i, &segment, &scan, invalid, report)?;
                scanned.push(Arc::new(segment));
                deleted_from = Some(i + 1);
                break;
            }
            if let Some(next) = next_base
                && scan.next_offset < next
                && self.cut_at_gap(i, &segment, &scan, next, report)?
            {
                scanned.push(Arc::new(segment));
                deleted_from = Some(i + 1);
                break;
            }
            if let Some(next) = next_base
                && scan.next_offset > next
            {
                return Err(Error::Corrupt {
                    file: segment.log_path(),
                    position: scan.valid_bytes,
                    what: crate::error::Corruption::OffsetOrder {
                        offset: scan.next_offset - 1,
                        bound: next,
                    },
                });
            }
            scanned.push(Arc::new(segment));
        }
        Ok((scanned, deleted_from))
    }

    /// Cuts the `i`th segment at the first invalid byte its scan found: a torn tail, or
    /// corruption, which [`RecoveryMode`] decides about. Invalid bytes are corruption below the
    /// recovery point, in a batch whose CRC is right (no torn write leaves one), and, when the
    /// durable point is unknown, anywhere but in the last segment.
    fn cut_at_invalid_bytes(
        &self,
        i: usize,
        segment: &Segment,
        scan: &ScanReport,
        invalid: InvalidBytes,
        report: &mut RecoveryReport,
    ) -> Result<()> {
        let is_last = i + 1 == self.bases.len();
        let crash_explains = scan.next_offset >= self.recovery_point
            && (self.durable_point_known || is_last)
            && !batch_crc_holds(segment, &invalid, scan.file_bytes)?;
        let kind = if crash_explains {
            CutKind::Crash(DiscardReason::TornTail)
        } else {
            CutKind::Corruption
        };
        self.cut(
            i,
            segment,
            scan,
            invalid.position,
            invalid.what,
            kind,
            report,
        )?;
        if !self.read_only {
            report.bytes_truncated += segment.truncate_tail(scan.valid_bytes)?;
        } else {
            report.bytes_truncated += scan.file_bytes - scan.valid_bytes;
        }
        Ok(())
    }

    /// Judges the gap between the `i`th segment, whose batches end at `scan.next_offset`, and
    /// the next one, at `next`; true if the log is cut there. Offsets are assigned without gaps
    /// until the log's records are compacted, and the gaps compaction (or a follower's roll
    /// past a gap) leaves lie below the recovery point recorded first, in the slot that set
    /// the checkpoint's `COMPACTED` flag: a gap above the point is a lost tail (the next
    /// segment's name reached the disk, this tail did not), and any other gap is legal only
    /// where [`gaps_between_segments_are_legal`] says so, corruption elsewhere. Without
    /// partlog's checkpoint, a log whose cleanup policy includes compact may have gaps wherever
    /// they lie (a Kafka directory opened for the first time: Kafka's cleaner leaves them).
    fn cut_at_gap(
        &self,
        i: usize,
        segment: &Segment,
        scan: &ScanReport,
        next: i64,
        report: &mut RecoveryReport,
    ) -> Result<bool> {
        let lost_tail = self.durable_point_known && scan.next_offset >= self.recovery_point;
        let kind = if lost_tail {
            CutKind::Crash(DiscardReason::LostTail)
        } else if self.gaps_legal {
            return Ok(false);
        } else {
            CutKind::Corruption
        };
        let what = crate::error::Corruption::MissingOffsets {
            from: scan.next_offset,
            to: next,
        };
        self.cut(i, segment, scan, scan.valid_bytes, what, kind, report)?;
        Ok(true)
    }

    /// Decides a cut of the `i`th segment at byte `position`, where `what` is wrong: counts
    /// what it takes, refuses it if it is corruption and the mode says so (changing nothing),
    /// and otherwise reports it. The caller truncates.
    #[allow(
        clippy::too_many_arguments,
        reason = "the two cuts' shared step; the parts are all distinct"
    )]
    fn cut(
        &self,
        i: usize,
        segment: &Segment,
        scan: &ScanReport,
        position: u64,
        what: crate::error::Corruption,
        kind: CutKind,
        report: &mut RecoveryReport,
    ) -> Result<()> {
        let plan = CutPlan {
            storage: self.storage,
            dir: self.dir,
            bases: self.bases,
            index: i,
            position,
            cut_offset: scan.next_offset,
            file_bytes: scan.file_bytes,
            dense: !self.gaps_legal,
        };
        let file = segment.log_path();
        let reason = match kind {
            CutKind::Crash(reason) => reason,
            CutKind::Corruption => match self.config.recovery_mode {
                RecoveryMode::Fail if self.durable_point_known => {
                    return Err(Error::Corrupt {
                        file,
                        position,
                        what,
                    });
                }
                RecoveryMode::Fail => {
                    return Err(Error::DamagedWithoutCheckpoint {
                        file,
                        position,
                        what,
                        discarded: Box::new(plan.count(DiscardReason::Corruption)?),
                    });
                }
                RecoveryMode::TruncateAtCorruption => {
                    report.corruption = Some((file, position, what));
                    DiscardReason::Corruption
                }
            },
        };
        let discarded = plan.count(reason)?;
        if self.read_only {
            log::warn!(
                "{}: a read-only open leaves out {discarded}",
                self.dir.display()
            );
        } else if reason == DiscardReason::Corruption {
            log::error!("{}: recovery discards {discarded}", self.dir.display());
        } else {
            log::warn!("{}: recovery discards {discarded}", self.dir.display());
        }
        report.discarded = Some(discarded);
        Ok(())
    }
}

/// Whether the invalid bytes at `invalid.position` of `segment` (a file of `file_bytes`) are a
/// whole batch whose CRC is right but whose header values fail a check (a last offset that
/// overflows, or that no offset can follow): a torn write cannot leave that. Other checks (an
/// offset out of order) can fail on stale bytes a crash exposes, and stay a torn tail.
fn batch_crc_holds(segment: &Segment, invalid: &InvalidBytes, file_bytes: u64) -> Result<bool> {
    if !matches!(invalid.what, crate::error::Corruption::BadHeader(_)) {
        return Ok(false);
    }
    let path = segment.log_path();
    let mut walker = BatchWalker::new(segment.log_file(), &path, file_bytes);
    let frame = match walker.frame_at(invalid.position) {
        Ok(Step::Batch(frame)) => frame,
        Ok(_) | Err(Error::Corrupt { .. }) => return Ok(false),
        Err(error) => return Err(error),
    };
    Ok(crate::format::frame_crc_holds(walker.batch_bytes(&frame)?))
}

/// Drops the cached pages of the segment's index files, as [`Segment::recover_from`] does for
/// its `.log` above the recovery point: pages a failed fsync of an earlier process in this boot
/// left clean but unwritten would otherwise be read as entries the disk holds. Whole files,
/// since where the point falls in them is known only after reading them; they are small.
fn drop_cached_indexes(storage: &dyn Storage, dir: &Path, base: i64) -> Result<()> {
    for kind in [SegmentFileKind::OffsetIndex, SegmentFileKind::TimeIndex] {
        let path = segment_file_path(dir, base, kind);
        match storage.open(&path, OpenMode::Read) {
            Ok(file) => drop_cached_tail(&*file, 0)?,
            // Recovery creates a missing index and rebuilds it from the log.
            Err(error) if error.io_kind() == Some(std::io::ErrorKind::NotFound) => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

/// Removes every file of the segment at `base` (recovery only: no reader can hold it yet).
fn remove_segment_files(storage: &dyn Storage, dir: &Path, base: i64) -> Result<()> {
    for kind in [
        SegmentFileKind::Log,
        SegmentFileKind::OffsetIndex,
        SegmentFileKind::TimeIndex,
        SegmentFileKind::TxnIndex,
    ] {
        let path: PathBuf = segment_file_path(dir, base, kind);
        match storage.remove(&path) {
            Ok(()) => {}
            Err(error) if error.io_kind() == Some(std::io::ErrorKind::NotFound) => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}
