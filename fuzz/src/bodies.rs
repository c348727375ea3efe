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

use partlog::unstable::{
    Clock, ManualClock, OffsetIndex, SegmentConfig, SegmentFileKind, SimStorage, Storage,
    TimeIndex, segment_file_path,
};
use partlog::{
    AnyBatchIter, Batch, BatchView, LegacyBatchView, Log, LogConfig, NewRecord, ReadBound,
    RecoveryMode,
};

/// A target's body: takes any bytes, panics only on a bug in partlog.
pub type Body = fn(&[u8]);

/// The fuzz targets by name: the directory names under `fuzz/corpus/` and `fuzz/artifacts/`.
pub const TARGETS: [(&str, Body); 4] = [
    ("batch_decode", batch_decode),
    ("index_open", index_open),
    ("segment_recover", segment_recover),
    ("log_ops", log_ops),
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
        for record in records {
            if record.is_err() {
                break;
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
    let Ok(file) = storage.open(path, partlog::unstable::OpenMode::CreateNew) else {
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
