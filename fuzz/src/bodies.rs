//! The bodies of partlog's fuzz targets, one `pub fn` per target.
//!
//! This file is compiled twice: as a module of the fuzz crate's lib (`fuzz/src/lib.rs`), which
//! the libFuzzer targets in `fuzz/fuzz_targets/` call, and by `tests/fuzz_replay.rs` through
//! `#[path]`, which replays the committed corpus and artifacts in plain `cargo test`. One copy of
//! each body means a regression input checks exactly what the fuzzer checked.
//!
//! partlog must never panic on these inputs: every bad byte is a typed error. The bodies panic
//! (via `assert!`) only when partlog breaks a promise it makes about good input: a batch it
//! accepted yields no record, a recovered segment has an inconsistent index, or a log returns
//! something other than what was appended.

use std::path::Path;
use std::sync::Arc;

use partlog::unstable::checkpoint::{
    CHECKPOINT_FILE_NAME, CHECKPOINT_FILE_SIZE, CHECKPOINT_SLOT_SIZE, CheckpointFile,
    CheckpointRecord, decode_slot, encode_slot,
};
use partlog::unstable::format::KAFKA_LZ4_FRAME_HEADER;
use partlog::unstable::{
    Clock, ManualClock, OffsetIndex, OpenMode, SegmentConfig, SegmentFileKind, SimStorage, Storage,
    TimeIndex, segment_file_path,
};
use partlog::{
    AnyBatchIter, Batch, BatchView, CleanupPolicy, Error, LegacyBatchView, LegacyHeader, Log,
    LogConfig, NewRecord, ReadBound, Record, RecoveryMode, TimestampType,
};

/// A target's body: takes any bytes, panics only on a bug in partlog.
pub type Body = fn(&[u8]);

/// The fuzz targets by name: the directory names under `fuzz/corpus/` and `fuzz/artifacts/`.
pub const TARGETS: [(&str, Body); 7] = [
    ("batch_decode", batch_decode),
    ("index_open", index_open),
    ("segment_recover", segment_recover),
    ("log_ops", log_ops),
    ("checkpoint_decode", checkpoint_decode),
    ("legacy_message_set", legacy_message_set),
    ("producer_snapshot_decode", producer_snapshot_decode),
];

/// Reads the next byte of a fuzz input, 0 once it is used up (so every input decodes).
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&first, rest)) => {
                self.0 = rest;
                first
            }
            None => 0,
        }
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Target `batch_decode`: the bytes as a run of batches (v2 and legacy), and as one batch of
/// each kind; every record of every accepted batch is decoded, decompression included.
pub fn batch_decode(data: &[u8]) {
    let mut scratch = Vec::new();
    for (_position, batch) in AnyBatchIter::new(data) {
        let Ok(batch) = batch else { break };
        decode_records(&batch, &mut scratch);
    }
    if let Ok(batch) = Batch::new(data) {
        assert!(
            batch.total_size() <= data.len(),
            "a batch larger than its bytes"
        );
        decode_records(&batch, &mut scratch);
    }
    if let Ok(view) = BatchView::new(data)
        && let Ok(records) = view.records(&mut scratch)
    {
        let full = offsets_keys_values(records);
        // A skip to a target past the base offset yields what the full walk yields from its
        // first record at or above the target, when that walk met no error.
        let base_offset = view.header().base_offset;
        let target = base_offset.saturating_add(1 + (data.len() % 64) as i64);
        if full.iter().all(Result::is_ok) {
            let mut scratch = Vec::new();
            if let Ok(mut skipped) = view.records(&mut scratch) {
                skipped.skip_below(target);
                let skipped = offsets_keys_values(skipped);
                let from = full
                    .iter()
                    .position(|r| r.as_ref().is_ok_and(|(offset, _, _)| *offset >= target))
                    .unwrap_or(full.len());
                assert_eq!(skipped[..], full[from..], "skip_below({target})");
            }
        }
    }
    if let Ok(view) = LegacyBatchView::new(data)
        && let Ok(records) = view.records(&mut scratch)
    {
        for record in records {
            if record.is_err() {
                break;
            }
        }
    }
}

/// What a walk over records yields, comparable: each record's offset, key and value, or the
/// error that ended it.
type Walked<'a> = Vec<std::result::Result<(i64, Option<&'a [u8]>, Option<&'a [u8]>), String>>;

fn offsets_keys_values<'a>(
    records: impl Iterator<Item = partlog::Result<Record<'a>>>,
) -> Walked<'a> {
    records
        .map(|record| {
            record
                .map(|r| (r.offset, r.key, r.value))
                .map_err(|e| e.to_string())
        })
        .collect()
}

/// Decodes every record of `batch`, headers included, and checks the offsets it claims.
fn decode_records(batch: &Batch<'_>, scratch: &mut Vec<u8>) {
    let last_offset = batch.last_offset();
    let _ = batch.base_offset(scratch);
    let Ok(records) = batch.records(scratch) else {
        return;
    };
    for record in records {
        let Ok(record) = record else { break };
        for header in record.headers() {
            let _ = (header.key, header.value);
        }
        // A record above the batch's own last offset would reach a reader past the log end.
        assert!(
            record.offset <= last_offset,
            "record offset {} above the batch's last offset {last_offset}",
            record.offset
        );
    }
}

/// Target `index_open`: the bytes (after a 2-byte prefix choosing the kind and the mode) as an
/// `.index` or `.timeindex` file, opened, checked and looked up in.
pub fn index_open(data: &[u8]) {
    let mut input = Bytes(data);
    let flags = input.byte();
    let base_offset = i64::from(input.byte()) * 1000;
    let file_bytes = input.0;
    let writable = flags & 1 == 1;
    let time_index = flags & 2 == 2;
    // Small enough that a fuzz input can fill it, so the full-index paths run too.
    let max_index_bytes = if flags & 4 == 4 { 64 } else { 4096 };
    let log_size = u64::from(flags >> 3) * 100;

    let storage: Arc<dyn Storage> = Arc::new(SimStorage::new(0));
    let dir = Path::new("/fuzz");
    let kind = if time_index {
        SegmentFileKind::TimeIndex
    } else {
        SegmentFileKind::OffsetIndex
    };
    let path = segment_file_path(dir, base_offset, kind);
    if !write_file(&storage, dir, &path, file_bytes) {
        return;
    }
    let targets = [
        i64::MIN,
        -1,
        0,
        base_offset,
        base_offset + 1,
        base_offset + 100,
        i64::MAX,
    ];
    if time_index {
        let Ok(index) = TimeIndex::open(&storage, &path, base_offset, max_index_bytes, writable)
        else {
            return;
        };
        let checked = index.quick_check().is_ok() && index.full_check().is_ok();
        let _ = index.last_entry();
        for n in [0, 1, index.entries().saturating_sub(1), index.entries()] {
            let _ = index.entry(n);
        }
        for timestamp in targets {
            let found = index.lookup(timestamp);
            if checked && let Ok(found) = found {
                // A checked index never answers with an offset below its segment.
                assert!(found.offset >= base_offset, "{found:?} below {base_offset}");
            }
        }
        if writable {
            let _ = index.maybe_append(i64::MAX, base_offset + 1_000_000, false);
            let _ = index.truncate_to(base_offset + 1);
        }
    } else {
        let Ok(index) = OffsetIndex::open(&storage, &path, base_offset, max_index_bytes, writable)
        else {
            return;
        };
        let checked = index.quick_check(log_size).is_ok() && index.full_check(log_size).is_ok();
        let _ = index.last_entry();
        for n in [0, 1, index.entries().saturating_sub(1), index.entries()] {
            let _ = index.entry(n);
        }
        for target in targets {
            let found = index.lookup(target);
            if checked && let Ok(found) = found {
                assert!(
                    found.offset >= base_offset && (target < base_offset || found.offset <= target),
                    "lookup({target}) = {found:?} in a checked index at base {base_offset}"
                );
                assert!(u64::from(found.position) <= log_size);
            }
        }
        for position in [0, 1, 100, log_size, u64::MAX] {
            let _ = index.upper_bound_by_position(position);
        }
        if writable {
            let _ = index.append(base_offset + 1_000_000, u32::MAX);
            let _ = index.truncate_to(base_offset + 1);
        }
    }
}

/// Creates `dir` and writes `bytes` as the file at `path`; false if the simulator refuses.
fn write_file(storage: &Arc<dyn Storage>, dir: &Path, path: &Path, bytes: &[u8]) -> bool {
    if storage.create_dir_all(dir).is_err() {
        return false;
    }
    let Ok(file) = storage.open(path, OpenMode::CreateNew) else {
        return false;
    };
    file.write_all_at(bytes, 0).is_ok()
}

/// Target `segment_recover`: the bytes (after a 1-byte prefix choosing the mode) as a segment's
/// `.log` with no indexes, opened for recovery and scanned, then read at a few offsets.
pub fn segment_recover(data: &[u8]) {
    let mut input = Bytes(data);
    let flags = input.byte();
    let read_only = flags & 1 == 1;
    let log_bytes = input.0;
    let storage: Arc<dyn Storage> = Arc::new(SimStorage::new(0));
    let dir = Path::new("/fuzz");
    let base_offset = 0;
    let log_path = segment_file_path(dir, base_offset, SegmentFileKind::Log);
    if !write_file(&storage, dir, &log_path, log_bytes) {
        return;
    }
    let config = SegmentConfig {
        segment_index_bytes: 1024,
        // Small, so that even a short input gets index entries to look up.
        index_interval_bytes: 64,
        ..SegmentConfig::default()
    };
    let Ok(segment) = partlog::unstable::Segment::open_for_recovery(
        &storage,
        dir,
        base_offset,
        config,
        0,
        read_only,
    ) else {
        return;
    };
    let Ok(report) = segment.scan() else {
        return;
    };
    assert!(report.valid_bytes <= log_bytes.len() as u64);
    if !read_only {
        // Recovery cuts the invalid tail: what remains is exactly the valid prefix.
        assert_eq!(segment.size(), report.valid_bytes, "{report:?}");
    }
    assert_eq!(segment.next_offset(), report.next_offset, "{report:?}");
    // The indexes recovery rebuilt must pass the checks a clean open runs on them.
    let size = segment.size();
    assert!(
        segment.offset_index().full_check(size).is_ok(),
        "rebuilt offset index fails its check: {report:?}"
    );
    assert!(
        segment.time_index().full_check().is_ok(),
        "rebuilt time index fails its check: {report:?}"
    );
    let mut buf = Vec::new();
    let mut scratch = Vec::new();
    for start in [
        0,
        1,
        report.next_offset / 2,
        report.next_offset - 1,
        report.next_offset,
    ] {
        let Ok(Some(read)) = segment.read(start, 1 << 20, None, &mut buf) else {
            continue;
        };
        assert_eq!(read.len, buf.len());
        assert!(read.next_offset > start, "{read:?} for start {start}");
        // What a read returns was validated by the scan: it must decode again.
        for (_position, batch) in AnyBatchIter::new(&buf) {
            let batch = match batch {
                Ok(batch) => batch,
                Err(error) => panic!("a read returned a batch that fails to decode: {error:?}"),
            };
            decode_records(&batch, &mut scratch);
        }
    }
}

/// Target `log_ops`: the bytes as a sequence of operations on a log on the simulator (append,
/// read, truncate, delete_records_before, reopen), checked against a model: the list of
/// `(offset, value)` the log must hold, and its start offset.
pub fn log_ops(data: &[u8]) {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let storage: Arc<dyn Storage> =
        Arc::new(SimStorage::new(0).with_clock(Arc::clone(&clock) as Arc<dyn Clock>));
    let config = LogConfig::builder_for_tests()
        // Small segments, so that a few appends roll and reads cross segments.
        .segment_bytes(1024)
        .max_message_bytes(1024)
        .index_interval_bytes(64)
        .retention_ms(-1)
        .retention_bytes(-1)
        .recovery_mode(RecoveryMode::Fail)
        .storage(Arc::clone(&storage))
        .clock(Arc::clone(&clock) as Arc<dyn Clock>)
        .build();
    let config = match config {
        Ok(config) => config,
        Err(error) => panic!("the fuzz config is invalid: {error}"),
    };
    let dir = Path::new("/fuzz/topic-0");
    let mut log = match Log::open(dir, config.clone()) {
        Ok(log) => log,
        Err(error) => panic!("a fresh log fails to open: {error}"),
    };
    let mut model: Vec<(i64, Vec<u8>)> = Vec::new();
    let mut start = 0i64;
    let mut end = 0i64;
    let mut input = Bytes(data);
    let mut steps = 0;
    while !input.is_empty() && steps < 64 {
        steps += 1;
        let op = input.byte();
        let arg = input.byte();
        match op % 6 {
            0 | 1 => {
                let count = usize::from(arg % 4) + 1;
                let size = usize::from(input.byte()) * 2;
                let values: Vec<Vec<u8>> = (0..count)
                    .map(|i| vec![arg.wrapping_add(i as u8); size])
                    .collect();
                let records: Vec<NewRecord> = values
                    .iter()
                    .map(|value| NewRecord::new(clock.now_ms(), None, Some(value)))
                    .collect();
                match log.append(&records) {
                    Ok(info) => {
                        assert_eq!(info.first_offset, end, "offsets are contiguous");
                        assert_eq!(info.last_offset, end + count as i64 - 1);
                        for value in values {
                            model.push((end, value));
                            end += 1;
                        }
                    }
                    // Too large for max.message.bytes: refused whole, nothing stored.
                    Err(partlog::Error::RecordTooLarge { .. }) => {}
                    Err(error) => panic!("append failed: {error}"),
                }
            }
            2 => {
                let from = pick_offset(arg, start, end);
                check_reads(&log, &model, from, start, end);
            }
            3 => {
                let to = pick_offset(arg, start, end);
                match log.truncate_to(to) {
                    Ok(new_end) => {
                        // A batch that straddles `to` goes whole, so the end may land below it.
                        if to >= end {
                            assert_eq!(new_end, end, "truncate_to({to}) above the end moved it");
                        } else {
                            assert!(
                                new_end <= to,
                                "truncate_to({to}) kept offsets up to {new_end}"
                            );
                        }
                        model.retain(|(offset, _)| *offset < new_end);
                        end = new_end;
                        assert_eq!(log.log_end_offset(), end);
                        start = log.log_start_offset();
                        model.retain(|(offset, _)| *offset >= start);
                    }
                    Err(error) => {
                        assert!(to < 0, "truncate_to({to}) failed: {error}");
                    }
                }
            }
            4 => {
                let to = pick_offset(arg, start, end);
                match log.delete_records_before(to) {
                    Ok(()) => {
                        assert!(to <= end);
                        start = start.max(to);
                        model.retain(|(offset, _)| *offset >= start);
                    }
                    Err(partlog::Error::OffsetOutOfRange { .. }) => {
                        assert!(
                            to > end,
                            "delete_records_before({to}) refused in [{start}, {end}]"
                        );
                    }
                    Err(error) => panic!("delete_records_before({to}) failed: {error}"),
                }
            }
            _ => {
                if let Err(error) = log.close() {
                    panic!("close failed: {error}");
                }
                drop(log);
                clock.advance(i64::from(arg));
                log = match Log::open(dir, config.clone()) {
                    Ok(log) => log,
                    Err(error) => panic!("reopen failed: {error}"),
                };
            }
        }
        assert_eq!((log.log_start_offset(), log.log_end_offset()), (start, end));
    }
    check_reads(&log, &model, start, start, end);
    if let Err(error) = log.close() {
        panic!("close failed: {error}");
    }
}

/// An offset around `[start, end]` chosen by `arg`: mostly inside, sometimes just outside.
fn pick_offset(arg: u8, start: i64, end: i64) -> i64 {
    match arg % 8 {
        0 => start - 1,
        1 => end + 1,
        2 => start,
        3 => end,
        _ => start + i64::from(arg) % (end - start + 1),
    }
}

/// Reads from `from` to the end and checks the records against the model.
fn check_reads(log: &Log, model: &[(i64, Vec<u8>)], from: i64, start: i64, end: i64) {
    let mut records = Vec::new();
    for record in log.records(from, ReadBound::LogEnd) {
        match record {
            Ok(record) => records.push((record.offset, record.value.unwrap_or_default())),
            Err(error) => {
                assert!(
                    from < start || from > end,
                    "records({from}) failed in [{start}, {end}]: {error}"
                );
                return;
            }
        }
    }
    let expected: Vec<(i64, Vec<u8>)> = model
        .iter()
        .filter(|(offset, _)| *offset >= from)
        .cloned()
        .collect();
    assert!(
        records == expected,
        "records({from}) in [{start}, {end}] returned offsets {:?}, the model holds {:?}",
        records.iter().map(|r| r.0).collect::<Vec<_>>(),
        expected.iter().map(|r| r.0).collect::<Vec<_>>()
    );
}

impl<'a> Bytes<'a> {
    /// The next `len` bytes, or fewer once the input is used up.
    fn take(&mut self, len: usize) -> &'a [u8] {
        let (taken, rest) = self.0.split_at(len.min(self.0.len()));
        self.0 = rest;
        taken
    }

    /// A nullable field: `None` for 255, else up to 15 bytes of the input.
    fn nullable(&mut self) -> Option<&'a [u8]> {
        match self.byte() {
            255 => None,
            len => Some(self.take(usize::from(len % 16))),
        }
    }
}

/// Target `checkpoint_decode`: after a 1-byte prefix, the bytes as `partlog.checkpoint`, or as
/// `partlog.cleaner-checkpoint` when bit 1 is set. Bit 0 recomputes the CRCs, so that mutations
/// reach the field
/// rules rather than stopping at the checksum. A valid slot re-encodes to its own bytes, the
/// file's reader picks the record FORMAT.md §6.2 names, and a log opens over any checkpoint
/// (bit 2: a log with segments; else the file alone) under `RecoveryMode::Fail`, keeps every
/// record the checkpoint's start offset leaves, and reopens to the same offsets.
pub fn checkpoint_decode(data: &[u8]) {
    let mut input = Bytes(data);
    let flags = input.byte();
    let mut file = input.0.to_vec();
    if flags & 2 == 2 {
        cleaner_checkpoint(flags, file);
        return;
    }
    if flags & 1 == 1 {
        for slot in file.chunks_exact_mut(CHECKPOINT_SLOT_SIZE) {
            let (covered, crc) = slot.split_at_mut(CHECKPOINT_SLOT_SIZE - 4);
            crc.copy_from_slice(&partlog::unstable::format::crc32c(covered).to_be_bytes());
        }
    }
    if file.len() != CHECKPOINT_SLOT_SIZE {
        assert!(
            decode_slot(&file).is_none(),
            "a slot of {} bytes",
            file.len()
        );
    }
    let slots = [0, 1].map(|n| {
        let bytes = file.get(n * CHECKPOINT_SLOT_SIZE..(n + 1) * CHECKPOINT_SLOT_SIZE)?;
        let record = decode_slot(bytes)?;
        // One encoding per record: a valid slot is exactly what the encoder writes for it.
        assert_eq!(
            &encode_slot(&record)[..],
            bytes,
            "slot {n} re-encodes differently"
        );
        Some(record)
    });
    let newest = match slots {
        [Some(first), Some(second)] if second.sequence > first.sequence => Some(second),
        [Some(first), _] => Some(first),
        [None, second] => second,
    };
    if flags & 4 == 4 {
        checkpoint_under_log(&file, newest);
        return;
    }
    let storage: Arc<dyn Storage> = Arc::new(SimStorage::new(0));
    let dir = Path::new("/fuzz/topic-0");
    let path = dir.join(CHECKPOINT_FILE_NAME);
    if !write_file(&storage, dir, &path, &file) {
        return;
    }
    match CheckpointFile::read(&storage, dir) {
        Ok(record) => assert_eq!(record, newest, "read picks another record"),
        Err(error) => panic!("reading a checkpoint failed: {error}"),
    }
    let (mut checkpoint, record) = match CheckpointFile::open(&storage, dir) {
        Ok(opened) => opened,
        Err(error) => panic!("opening a checkpoint failed: {error}"),
    };
    assert_eq!(record, newest, "open picks another record");
    let sequence = newest.map_or(0, |record| record.sequence);
    assert_eq!(checkpoint.sequence(), sequence);
    for round in 1..=2u64 {
        let written = checkpoint.write(7, 3, None, true);
        let Some(next) = sequence.checked_add(round) else {
            assert!(
                matches!(written, Err(Error::Unsupported { .. })),
                "a write after sequence {} gave {written:?}",
                u64::MAX
            );
            return;
        };
        assert_eq!(
            written.ok(),
            Some(next),
            "write {round} after sequence {sequence}"
        );
        let expected = CheckpointRecord {
            sequence: next,
            recovery_point: 7,
            log_start_offset: 3,
            clean_shutdown: None,
            // Carried from the newest record read: only a full truncation clears it.
            compacted: newest.is_some_and(|record| record.compacted),
        };
        match CheckpointFile::read(&storage, dir) {
            Ok(record) => assert_eq!(record, Some(expected), "write {round} not read back"),
            Err(error) => panic!("reading a written checkpoint failed: {error}"),
        }
    }
    let size = storage.metadata(&path).map(|metadata| metadata.len).ok();
    assert!(
        size.is_some_and(|size| size >= CHECKPOINT_FILE_SIZE as u64),
        "written checkpoint of {size:?} bytes"
    );
}

/// The values the checkpoint and cleaner-checkpoint logs hold: 12 records of 200 bytes, four
/// keys, in batches of three (each batch about fills a 1 KiB segment, so the log has several).
fn keyed_records() -> Vec<(i64, Vec<u8>, Vec<u8>)> {
    (0..12u8)
        .map(|n| (i64::from(n), vec![b'k', n % 4], vec![n; 200]))
        .collect()
}

/// A log on `storage` holding [`keyed_records`], closed cleanly.
fn write_keyed_log(dir: &Path, config: &LogConfig, clock: &ManualClock) {
    let log = match Log::open(dir, config.clone()) {
        Ok(log) => log,
        Err(error) => panic!("a fresh log fails to open: {error}"),
    };
    for batch in keyed_records().chunks(3) {
        let records: Vec<NewRecord> = batch
            .iter()
            .map(|(_, key, value)| NewRecord::new(clock.now_ms(), Some(key), Some(value)))
            .collect();
        if let Err(error) = log.append(&records) {
            panic!("append failed: {error}");
        }
    }
    if let Err(error) = log.close() {
        panic!("close failed: {error}");
    }
}

/// A config on `storage` for the checkpoint targets: 1 KiB segments, nothing deleted by time or
/// size, no maintenance thread, and recovery that fails rather than truncates on corruption.
fn keyed_config(
    storage: &Arc<dyn Storage>,
    clock: &Arc<ManualClock>,
    policy: CleanupPolicy,
) -> LogConfig {
    let config = LogConfig::builder_for_tests()
        .segment_bytes(1024)
        .retention_ms(-1)
        .retention_bytes(-1)
        .retention_check_interval_ms(-1)
        .cleanup_policy(policy)
        .min_compaction_lag_ms(0)
        .recovery_mode(RecoveryMode::Fail)
        .storage(Arc::clone(storage))
        .clock(Arc::clone(clock) as Arc<dyn Clock>)
        .build();
    match config {
        Ok(config) => config,
        Err(error) => panic!("the fuzz config is invalid: {error}"),
    }
}

/// Replaces `dir/name` with `bytes`.
fn replace_file(storage: &Arc<dyn Storage>, dir: &Path, name: &str, bytes: &[u8]) -> bool {
    let path = dir.join(name);
    match storage.remove(&path) {
        Err(error) if error.io_kind() != Some(std::io::ErrorKind::NotFound) => return false,
        _ => {}
    }
    write_file(storage, dir, &path, bytes)
}

/// Reads every record from the log start; panics on an error.
fn read_all(log: &Log) -> Vec<(i64, Vec<u8>, Vec<u8>)> {
    log.records(log.log_start_offset(), ReadBound::LogEnd)
        .map(|record| match record {
            Ok(record) => (
                record.offset,
                record.key.unwrap_or_default(),
                record.value.unwrap_or_default(),
            ),
            Err(error) => panic!("reading the log failed: {error}"),
        })
        .collect()
}

/// `checkpoint_decode` with a log: `file` replaces the checkpoint of a closed log of
/// [`keyed_records`], which must then open under `RecoveryMode::Fail` with the start offset
/// the checkpoint names (Kafka's rule: above the end, an empty log there), keep every record
/// from the start, take an append, and reopen to the same offsets.
fn checkpoint_under_log(file: &[u8], newest: Option<CheckpointRecord>) {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let storage: Arc<dyn Storage> =
        Arc::new(SimStorage::new(0).with_clock(Arc::clone(&clock) as Arc<dyn Clock>));
    let config = keyed_config(&storage, &clock, CleanupPolicy::DELETE);
    let dir = Path::new("/fuzz/topic-0");
    write_keyed_log(dir, &config, &clock);
    if !replace_file(&storage, dir, CHECKPOINT_FILE_NAME, file) {
        return;
    }
    let written = keyed_records();
    let written_end = written.len() as i64;
    let checkpoint_start = newest.map_or(0, |record| record.log_start_offset).max(0);
    let files = storage.list(dir).ok();
    let log = match Log::open(dir, config.clone()) {
        Ok(log) => log,
        // No segment can begin at such a start offset, so the log cannot start over there: the
        // open is refused, and must not have removed anything first.
        Err(error) if checkpoint_start > i64::MAX - i64::from(i32::MAX) => {
            assert_eq!(
                storage.list(dir).ok(),
                files,
                "a refused open removed files"
            );
            assert!(matches!(error, Error::Unsupported { .. }), "{error:?}");
            return;
        }
        Err(error) => panic!("a log fails to open over checkpoint {newest:?}: {error}"),
    };
    let (start, end) = (log.log_start_offset(), log.log_end_offset());
    assert_eq!(start, checkpoint_start, "start offset for {newest:?}");
    let expected: Vec<_> = if checkpoint_start <= written_end {
        assert_eq!(end, written_end, "end offset for {newest:?}");
        written
            .into_iter()
            .filter(|(offset, _, _)| *offset >= start)
            .collect()
    } else {
        assert_eq!(end, checkpoint_start, "end offset for {newest:?}");
        Vec::new()
    };
    assert!(read_all(&log) == expected, "records lost for {newest:?}");
    let appended = end < i64::MAX / 2;
    if appended {
        let record = NewRecord::new(clock.now_ms(), Some(b"new"), Some(b"value"));
        match log.append(&[record]) {
            Ok(info) => assert_eq!(info.first_offset, end),
            Err(error) => panic!("append at {end} failed for {newest:?}: {error}"),
        }
    }
    if let Err(error) = log.close() {
        panic!("close failed for {newest:?}: {error}");
    }
    drop(log);
    let log = match Log::open(dir, config) {
        Ok(log) => log,
        Err(error) => panic!("a reopen fails after checkpoint {newest:?}: {error}"),
    };
    let end = end + i64::from(appended);
    assert_eq!(
        (log.log_start_offset(), log.log_end_offset()),
        (start, end),
        "reopen after checkpoint {newest:?}"
    );
    let _ = log.close();
}

/// `checkpoint_decode` for `partlog.cleaner-checkpoint`: `file` (CRC recomputed when bit 0 of
/// `flags` is set) in a closed compacted log of [`keyed_records`]. The log opens under
/// `RecoveryMode::Fail` with the first dirty offset FORMAT.md §6.3 says the file holds (0 for
/// none or one above the end), and a compaction pass keeps every key's latest record and
/// invents none, then and after a reopen.
fn cleaner_checkpoint(flags: u8, mut file: Vec<u8>) {
    const CLEANER_CHECKPOINT_FILE_NAME: &str = "partlog.cleaner-checkpoint";
    if flags & 1 == 1
        && let Some((covered, crc)) = file.split_at_mut_checked(16)
        && let Some(crc) = crc.get_mut(..4)
    {
        crc.copy_from_slice(&partlog::unstable::format::crc32c(covered).to_be_bytes());
    }
    // FORMAT.md §6.3's reading rules, written from the table.
    let recorded = (|| {
        if file.len() != 20 {
            return None;
        }
        let crc = u32::from_be_bytes(file.get(16..20)?.try_into().ok()?);
        if crc != partlog::unstable::format::crc32c(file.get(..16)?)
            || file.get(..8)? != b"PLCC\x00\x01\x00\x00"
        {
            return None;
        }
        let first_dirty = i64::from_be_bytes(file.get(8..16)?.try_into().ok()?);
        (first_dirty >= 0).then_some(first_dirty)
    })();
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let storage: Arc<dyn Storage> =
        Arc::new(SimStorage::new(0).with_clock(Arc::clone(&clock) as Arc<dyn Clock>));
    let config = keyed_config(&storage, &clock, CleanupPolicy::COMPACT);
    let dir = Path::new("/fuzz/topic-0");
    write_keyed_log(dir, &config, &clock);
    if !replace_file(&storage, dir, CLEANER_CHECKPOINT_FILE_NAME, &file) {
        return;
    }
    let written = keyed_records();
    let end = written.len() as i64;
    let mut latest: Vec<(i64, Vec<u8>, Vec<u8>)> = Vec::new();
    for record in written.iter().rev() {
        if !latest.iter().any(|(_, key, _)| *key == record.1) {
            latest.push(record.clone());
        }
    }
    let check = |log: &Log| {
        let held = read_all(log);
        for record in &held {
            assert!(written.contains(record), "{record:?} was never written");
        }
        for record in &latest {
            assert!(
                held.contains(record),
                "the latest record of a key, {record:?}, is gone (cleaner checkpoint \
                 {recorded:?})"
            );
        }
    };
    let log = match Log::open(dir, config.clone()) {
        Ok(log) => log,
        Err(error) => panic!("a log fails to open over cleaner checkpoint {recorded:?}: {error}"),
    };
    match log.compaction_schedule() {
        Ok(schedule) => assert_eq!(
            schedule.first_dirty_offset,
            recorded
                .filter(|&first_dirty| first_dirty <= end)
                .unwrap_or(0),
            "first dirty offset of cleaner checkpoint {recorded:?}"
        ),
        Err(error) => panic!("compaction_schedule failed: {error}"),
    }
    if let Err(error) = log.compact() {
        panic!("compaction failed over cleaner checkpoint {recorded:?}: {error}");
    }
    check(&log);
    if let Err(error) = log.close() {
        panic!("close failed: {error}");
    }
    drop(log);
    let log = match Log::open(dir, config) {
        Ok(log) => log,
        Err(error) => panic!("a reopen fails after cleaner checkpoint {recorded:?}: {error}"),
    };
    assert_eq!(log.log_end_offset(), end);
    check(&log);
    let _ = log.close();
}

/// CRC-32 (IEEE), which legacy messages and gzip trailers use; bit by bit, as inputs are small.
fn crc32_ieee(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0xEDB8_8320 & mask);
        }
    }
    !crc
}

/// Appends one legacy message (magic 0 or 1) as Kafka lays it out, CRC included.
fn legacy_message(
    out: &mut Vec<u8>,
    magic: u8,
    offset: i64,
    attributes: u8,
    timestamp: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) {
    let start = out.len();
    out.extend_from_slice(&offset.to_be_bytes());
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&[magic, attributes]);
    if magic == 1 {
        out.extend_from_slice(&timestamp.to_be_bytes());
    }
    for field in [key, value] {
        match field {
            Some(bytes) => {
                out.extend_from_slice(&(bytes.len() as i32).to_be_bytes());
                out.extend_from_slice(bytes);
            }
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }
    let size = (out.len() - start - 12) as i32;
    out[start + 8..start + 12].copy_from_slice(&size.to_be_bytes());
    let crc = crc32_ieee(&out[start + 16..]);
    out[start + 12..start + 16].copy_from_slice(&crc.to_be_bytes());
}

/// Recomputes the CRC of every whole legacy message of `set`, so that mutations reach what the
/// checksum would otherwise hide (v2 batches and a torn tail are left as they are).
fn fix_legacy_crcs(set: &mut [u8]) {
    let mut position = 0usize;
    while let Some(frame) = set.get(position..position + 17) {
        let size = i32::from_be_bytes([frame[8], frame[9], frame[10], frame[11]]);
        let magic = frame[16];
        let Some(end) = usize::try_from(size)
            .ok()
            .map(|size| position + 12 + size)
            .filter(|&end| end <= set.len() && size >= 4)
        else {
            return;
        };
        if magic <= 1 {
            let crc = crc32_ieee(&set[position + 16..end]);
            set[position + 12..position + 16].copy_from_slice(&crc.to_be_bytes());
        }
        position = end;
    }
}

/// `data` as one gzip member of stored (uncompressed) deflate blocks.
fn gzip_stored(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    let mut blocks = data.chunks(0xffff).peekable();
    if blocks.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(block) = blocks.next() {
        let len = block.len() as u16;
        out.push(u8::from(blocks.peek().is_none()));
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(block);
    }
    out.extend_from_slice(&crc32_ieee(data).to_le_bytes());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out
}

/// `data` as one raw snappy block of literals.
fn snappy_raw(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut len = data.len();
    while len >= 0x80 {
        out.push((len as u8) | 0x80);
        len >>= 7;
    }
    out.push(len as u8);
    for literal in data.chunks(0x1_0000) {
        let n = literal.len() - 1;
        if n < 60 {
            out.push((n as u8) << 2);
        } else if n < 0x100 {
            out.extend_from_slice(&[60 << 2, n as u8]);
        } else {
            out.push(61 << 2);
            out.extend_from_slice(&(n as u16).to_le_bytes());
        }
        out.extend_from_slice(literal);
    }
    out
}

/// `data` in snappy-java's xerial stream framing, 32 KiB per block.
fn snappy_xerial(data: &[u8]) -> Vec<u8> {
    let mut out = vec![
        0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1,
    ];
    for chunk in data.chunks(32 * 1024) {
        let block = snappy_raw(chunk);
        out.extend_from_slice(&(block.len() as i32).to_be_bytes());
        out.extend_from_slice(&block);
    }
    out
}

/// `data` as a Kafka-style LZ4 frame of stored (uncompressed) blocks.
fn lz4_stored(data: &[u8]) -> Vec<u8> {
    let mut out = KAFKA_LZ4_FRAME_HEADER.to_vec();
    for block in data.chunks(64 * 1024) {
        out.extend_from_slice(&(block.len() as u32 | 0x8000_0000).to_le_bytes());
        out.extend_from_slice(block);
    }
    out.extend_from_slice(&0u32.to_le_bytes());
    out
}

/// A decoded legacy record: offset, timestamp, key and value.
type LegacyRecord = (i64, i64, Option<Vec<u8>>, Option<Vec<u8>>);

/// The records of `view` up to the first error, and that error. Every error is typed
/// `InvalidBatch`, or `UnsupportedCompression` for a codec this build does not read.
fn legacy_records(view: &LegacyBatchView<'_>) -> (Vec<LegacyRecord>, Option<Error>) {
    let mut scratch = Vec::new();
    let mut records = Vec::new();
    let error = match view.records(&mut scratch) {
        Err(error) => Some(error),
        Ok(iter) => {
            let mut error = None;
            for record in iter {
                match record {
                    Ok(record) => records.push((
                        record.offset,
                        record.timestamp,
                        record.key.map(<[u8]>::to_vec),
                        record.value.map(<[u8]>::to_vec),
                    )),
                    Err(failed) => {
                        error = Some(failed);
                        break;
                    }
                }
            }
            error
        }
    };
    if let Some(error) = &error {
        assert!(
            matches!(
                error,
                Error::InvalidBatch { .. } | Error::UnsupportedCompression { .. }
            ),
            "an untyped legacy error: {error:?}"
        );
    }
    (records, error)
}

/// The promises a validated legacy message keeps, whatever its bytes: it parses again to the
/// same view; an uncompressed one re-encodes to its own bytes and is exactly one record; a
/// wrapper's records increase, stay at or below its offset and carry Kafka's timestamps; and
/// the base offset is the first record's.
fn check_legacy_view(view: &LegacyBatchView<'_>) -> (Vec<LegacyRecord>, Option<Error>) {
    let header = *view.header();
    assert_eq!(LegacyHeader::parse(view.as_bytes()), Ok(header));
    assert_eq!(LegacyBatchView::new(view.as_bytes()), Ok(*view));
    let (records, error) = legacy_records(view);
    if header.is_compressed() {
        for pair in records.windows(2) {
            assert!(
                pair[0].0 < pair[1].0,
                "inner offsets out of order: {pair:?}"
            );
        }
        for record in &records {
            assert!(
                record.0 <= header.offset,
                "inner offset {} above the wrapper's {}",
                record.0,
                header.offset
            );
            if header.magic == 0 {
                assert_eq!(record.1, -1, "a magic 0 record with a timestamp");
            } else if header.timestamp_type() == TimestampType::LogAppendTime {
                assert_eq!(record.1, header.timestamp, "LogAppendTime not applied");
            }
        }
    } else {
        let mut again = Vec::new();
        legacy_message(
            &mut again,
            header.magic as u8,
            header.offset,
            header.attributes as u8,
            header.timestamp,
            view.key(),
            view.value(),
        );
        assert_eq!(again, view.as_bytes(), "a message re-encodes differently");
        let only = (
            header.offset,
            header.timestamp,
            view.key().map(<[u8]>::to_vec),
            view.value().map(<[u8]>::to_vec),
        );
        assert!(error.is_none(), "an uncompressed message fails: {error:?}");
        assert_eq!(records, [only]);
    }
    let base = view.base_offset(&mut Vec::new());
    match records.first() {
        Some(first) => assert_eq!(base.ok(), Some(first.0), "base offset"),
        None => assert!(base.is_err(), "a base offset without a first record"),
    }
    (records, error)
}

/// Target `legacy_message_set`: legacy (magic 0/1) messages, read by `LegacyHeader`,
/// `LegacyBatchView` and `AnyBatchIter`. Bit 0 of the first byte chooses the form:
///
/// - 0, a message set as in a `.log` (bit 1 recomputes each message's CRC, so that mutations
///   reach the key, value and compressed payload), checked by [`check_legacy_view`];
/// - 1, a compressed wrapper built here (bit 1 magic, bits 2-3 gzip / raw snappy / xerial
///   snappy / lz4, bit 4 LogAppendTime, bit 5 inner messages from raw bytes, bits 6-7 how the
///   wrapper's offset is chosen) whose records must be exactly what Kafka's rules give for the
///   inner messages encoded, or an error where those rules refuse them.
pub fn legacy_message_set(data: &[u8]) {
    let mut input = Bytes(data);
    let mode = input.byte();
    if mode & 1 == 1 {
        legacy_wrapper(mode, &mut input);
        return;
    }
    let mut set = input.0.to_vec();
    if mode & 2 == 2 {
        fix_legacy_crcs(&mut set);
    }
    let _ = LegacyHeader::parse(&set);
    if let Err(error) = LegacyBatchView::decode(&set) {
        assert!(matches!(error, Error::InvalidBatch { .. }), "{error:?}");
    }
    for (_position, batch) in AnyBatchIter::new(&set) {
        let Ok(batch) = batch else { break };
        if let Some(view) = batch.as_legacy() {
            check_legacy_view(view);
        }
    }
}

/// An inner message `legacy_message_set` encoded into a wrapper.
struct InnerMessage<'a> {
    /// The offset stored in the message (absolute for magic 0, relative for magic 1).
    stored: i64,
    timestamp: i64,
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
    /// Marked compressed itself, which no reader may accept inside a wrapper.
    nested: bool,
}

/// The `legacy_message_set` form that builds a compressed wrapper (see there for `mode`).
fn legacy_wrapper(mode: u8, input: &mut Bytes<'_>) {
    let magic = (mode >> 1) & 1;
    let codec = (mode >> 2) & 3;
    let log_append_time = mode & 0x10 != 0;
    let raw_inner = mode & 0x20 != 0;
    let wrapper_timestamp = i64::from(input.byte()) * 1000 - 1000;
    let first_offset = match input.byte() {
        255 => i64::MAX - 200,
        254 => -5,
        high => i64::from(high) << 24,
    };
    let offset_choice = input.byte();
    let mut inner: Vec<InnerMessage<'_>> = Vec::new();
    let mut set = Vec::new();
    if raw_inner {
        set = input.0.to_vec();
        fix_legacy_crcs(&mut set);
    } else {
        let count = input.byte() % 8;
        let mut stored = if magic == 0 { first_offset } else { 0 };
        for n in 0..count {
            let step = input.byte();
            if n > 0 {
                // Mostly increasing, with gaps as compaction leaves them; sometimes repeated or
                // going back, which a reader must refuse.
                stored = match step % 8 {
                    0 => stored,
                    1 => stored.wrapping_sub(1),
                    2..=5 => stored.wrapping_add(1),
                    _ => stored.wrapping_add(i64::from(step)),
                };
            }
            let timestamp = i64::from(input.byte()) * 10 - 10;
            let key = input.nullable();
            let value = input.nullable();
            let nested = step == 0xff;
            let attributes = if nested { 3 } else { 0 };
            legacy_message(&mut set, magic, stored, attributes, timestamp, key, value);
            inner.push(InnerMessage {
                stored,
                timestamp,
                key,
                value,
                nested,
            });
        }
    }
    let last_stored = inner.last().map_or(0, |message| message.stored);
    let kafka_offset = if magic == 0 {
        last_stored
    } else {
        first_offset.wrapping_add(last_stored)
    };
    let wrapper_offset = match offset_choice % 4 {
        0 | 1 => kafka_offset,
        // Some producers sent wrapper offset 0.
        2 => 0,
        _ => kafka_offset.wrapping_add(i64::from(offset_choice >> 2) - 32),
    };
    let (codec_id, payload) = match codec {
        0 => (1, gzip_stored(&set)),
        1 => (2, snappy_raw(&set)),
        2 => (2, snappy_xerial(&set)),
        _ => (3, lz4_stored(&set)),
    };
    let attributes = codec_id | if log_append_time { 8 } else { 0 };
    let mut message = Vec::new();
    legacy_message(
        &mut message,
        magic,
        wrapper_offset,
        attributes,
        wrapper_timestamp,
        None,
        Some(&payload),
    );
    let view = match LegacyBatchView::new(&message) {
        Ok(view) => view,
        Err(error) => panic!("a well-formed wrapper is refused: {error:?}"),
    };
    assert_eq!(view.last_offset(), wrapper_offset);
    let batches: Vec<_> = AnyBatchIter::new(&message).collect();
    assert!(
        matches!(batches.as_slice(), [(0, Ok(batch))] if batch.as_legacy() == Some(&view)),
        "AnyBatchIter reads the wrapper differently"
    );
    let (records, error) = check_legacy_view(&view);
    if matches!(error, Some(Error::UnsupportedCompression { .. })) {
        assert!(codec_id != 3, "lz4 is always supported");
        return;
    }
    if raw_inner {
        return;
    }
    // Kafka's rules (src/format/legacy.rs), applied to what was encoded: the records they give,
    // up to the first message they refuse.
    let absolute_base = match magic {
        0 => Some(0),
        _ if inner.is_empty() => None,
        _ if wrapper_offset == 0 => Some(0),
        _ if wrapper_offset < last_stored => None,
        _ => wrapper_offset.checked_sub(last_stored),
    };
    let mut expected = Vec::new();
    let mut refused = inner.is_empty() || absolute_base.is_none();
    if let Some(base) = absolute_base {
        for message in &inner {
            let offset = if magic == 0 {
                Some(message.stored)
            } else {
                base.checked_add(message.stored)
            };
            let Some(offset) = offset.filter(|&offset| {
                !message.nested
                    && offset <= wrapper_offset
                    && expected
                        .last()
                        .is_none_or(|last: &LegacyRecord| offset > last.0)
            }) else {
                refused = true;
                break;
            };
            let timestamp = match (magic, log_append_time) {
                (0, _) => -1,
                (_, true) => wrapper_timestamp,
                (_, false) => message.timestamp,
            };
            expected.push((
                offset,
                timestamp,
                message.key.map(<[u8]>::to_vec),
                message.value.map(<[u8]>::to_vec),
            ));
        }
    }
    assert!(
        records == expected && error.is_some() == refused,
        "wrapper (magic {magic}, codec {codec_id}, offset {wrapper_offset}) read as {records:?} \
         then {error:?}; Kafka's rules give {expected:?}, refused: {refused}"
    );
}

/// Fuzz target `producer_snapshot_decode`: Kafka's producer-state snapshot (FORMAT.md §9).
///
/// The first byte is flags, the rest the file. Bit 0 recomputes the CRC over bytes [6, end), so
/// that mutations reach the count and entry checks rather than stopping at the checksum. The
/// decoder must return the entries or `Error::Corrupt`, never panic; a file it accepts has
/// exactly the length its count gives and re-encodes to its own bytes (one encoding per state).
/// Bit 1 also stores the file as the newest of two snapshots in a simulated directory: loading
/// the newest valid one must give this file's entries when it decodes, and otherwise the older
/// snapshot, with this one deleted.
pub fn producer_snapshot_decode(data: &[u8]) {
    use partlog::unstable::producer_snapshot::{
        SnapshotEntry, decode_snapshot, encode_snapshot, list_snapshots,
        load_newest_valid_snapshot, snapshot_path, write_snapshot,
    };
    let mut input = Bytes(data);
    let flags = input.byte();
    let mut file = input.0.to_vec();
    if flags & 1 == 1 && file.len() >= 6 {
        let crc = partlog::unstable::format::crc32c(&file[6..]);
        file[2..6].copy_from_slice(&crc.to_be_bytes());
    }
    let path = Path::new("/fuzz/00000000000000000009.snapshot");
    let decoded = match decode_snapshot(path, &file) {
        Ok(entries) => {
            assert_eq!(
                file.len(),
                10 + 46 * entries.len(),
                "accepted a wrong length"
            );
            assert_eq!(encode_snapshot(&entries), file, "re-encodes differently");
            Some(entries)
        }
        Err(Error::Corrupt { .. }) => None,
        Err(other) => panic!("untyped error from the snapshot decoder: {other}"),
    };
    if flags & 2 == 0 {
        return;
    }
    let sim = SimStorage::new(u64::from(flags));
    let storage: Arc<dyn Storage> = Arc::new(sim);
    let dir = Path::new("/fuzz");
    storage.create_dir_all(dir).expect("create the directory");
    let older = vec![SnapshotEntry {
        producer_id: 1,
        producer_epoch: 0,
        last_sequence: 4,
        last_offset: 4,
        offset_delta: 4,
        timestamp: 1_700_000_000_000,
        coordinator_epoch: -1,
        current_txn_first_offset: -1,
    }];
    write_snapshot(&*storage, dir, 5, &older).expect("write the older snapshot");
    let newest = storage
        .open(&snapshot_path(dir, 9), OpenMode::CreateNew)
        .expect("create the newest snapshot");
    newest
        .write_all_at(&file, 0)
        .expect("write the newest snapshot");
    let loaded = load_newest_valid_snapshot(&*storage, dir, 9, true)
        .expect("load")
        .map(|loaded| (loaded.offset, loaded.snapshot.entries().collect::<Vec<_>>()));
    let listed = list_snapshots(&*storage, dir).expect("list");
    match decoded {
        Some(entries) => {
            assert_eq!(loaded, Some((9, entries)));
            assert_eq!(listed, vec![5, 9]);
        }
        None => {
            assert_eq!(loaded, Some((5, older)));
            assert_eq!(listed, vec![5], "the bad snapshot was not deleted");
        }
    }
}
