//! Kafka 4.4's own DumpLogSegments reads what partlog's segment layer writes: the records match
//! what was written, every index entry names the right batch, and every index passes Kafka's
//! sanity check. A negative test proves the check can fail: an index holding base offsets
//! instead of last offsets is reported as "Mismatches in".
//!
//! The segments come from `examples/write_segment.rs` (included here), so the example a user runs
//! is the one that is checked.

#[path = "common/kafka.rs"]
mod kafka;

#[path = "../examples/write_segment.rs"]
mod write_segment;

use std::path::Path;

use partlog::unstable::OffsetIndex;
use partlog::unstable::{OsStorage, Storage};
use std::sync::Arc;

fn text(bytes: &Option<Vec<u8>>) -> Option<String> {
    bytes
        .as_ref()
        .map(|b| String::from_utf8(b.clone()).unwrap())
}

#[test]
fn dump_log_segments_reads_partlog_segments_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let written = write_segment::write_demo(dir.path()).unwrap();
    let logs = kafka::segment_files(dir.path(), &["log"]);
    assert!(
        logs.len() >= 3,
        "the demo should roll into several segments: {logs:?}"
    );

    let Some(output) = kafka::dump_deep(dir.path()) else {
        return; // kafka_tools() printed why it skipped (never under CI=true)
    };
    kafka::assert_clean_deep_dump(&output);
    assert!(kafka::index_mismatches(&output).is_empty());
    let records = kafka::parse_records(&output);
    assert_eq!(records.len(), written.len(), "{output:?}");
    for (dumped, record) in records.iter().zip(&written) {
        assert_eq!(dumped.offset, record.offset);
        assert_eq!(dumped.timestamp, record.timestamp);
        assert_eq!(dumped.timestamp_type, "CreateTime");
        assert_eq!(dumped.key, text(&record.key), "key at {}", record.offset);
        assert_eq!(
            dumped.payload,
            text(&record.value),
            "value at {}",
            record.offset
        );
        assert_eq!(
            dumped.key_size,
            record.key.as_ref().map_or(-1, |k| k.len() as i32)
        );
        assert_eq!(
            dumped.value_size,
            record.value.as_ref().map_or(-1, |v| v.len() as i32)
        );
        let header_keys: Vec<String> = record.headers.iter().map(|(k, _)| k.clone()).collect();
        assert_eq!(
            dumped.header_keys, header_keys,
            "headers at {}",
            record.offset
        );
    }
    let batches = kafka::parse_batches(&output);
    let codecs: std::collections::BTreeSet<&str> =
        batches.iter().map(|b| b.compression.as_str()).collect();
    assert_eq!(
        codecs,
        ["lz4", "none", "zstd"].into_iter().collect(),
        "every codec partlog writes appears"
    );
    assert!(batches.iter().all(|b| b.is_valid && b.magic == 2));
}

#[test]
fn every_partlog_index_passes_kafkas_sanity_check() {
    let dir = tempfile::tempdir().unwrap();
    write_segment::write_demo(dir.path()).unwrap();
    let indexes = kafka::segment_files(dir.path(), &["index", "timeindex"]);
    assert!(!indexes.is_empty());
    let Some(output) = kafka::index_sanity(dir.path()) else {
        return;
    };
    kafka::assert_index_sanity_passed(&output);
}

#[test]
fn an_index_of_base_offsets_is_reported_as_mismatched() {
    let dir = tempfile::tempdir().unwrap();
    write_segment::write_demo(dir.path()).unwrap();
    let index_path = dir.path().join("00000000000000000000.index");
    rewrite_index_with_base_offsets(dir.path(), &index_path);
    let Some(output) = kafka::dump_log_segments(&[&index_path], &["--print-data-log"]) else {
        return;
    };
    let mismatches = kafka::index_mismatches(&output);
    assert!(
        output.stderr.contains("Mismatches in"),
        "Kafka should notice the base offsets: {output:?}"
    );
    assert!(!mismatches.is_empty());
    for mismatch in mismatches {
        assert!(mismatch.index_offset < mismatch.log_offset, "{mismatch:?}");
    }
}

/// Rewrites each entry's offset with the base offset of the batch at its position: the classic
/// mistake of indexing batches by their first offset.
fn rewrite_index_with_base_offsets(dir: &Path, index_path: &Path) {
    let storage: Arc<dyn Storage> = Arc::new(OsStorage::new());
    let index = OffsetIndex::open(&storage, index_path, 0, 10 << 20, false).unwrap();
    let entries: Vec<_> = (0..index.entries())
        .map(|n| index.entry(n).unwrap())
        .collect();
    drop(index);
    assert!(
        !entries.is_empty(),
        "the first segment must have index entries"
    );
    let log = std::fs::read(dir.join("00000000000000000000.log")).unwrap();
    let mut bytes = Vec::new();
    let mut changed = 0;
    for entry in entries {
        let position = entry.position as usize;
        let base = i64::from_be_bytes(log[position..position + 8].try_into().unwrap());
        changed += usize::from(base < entry.offset);
        bytes.extend_from_slice(&(base as i32).to_be_bytes());
        bytes.extend_from_slice(&(entry.position as i32).to_be_bytes());
    }
    assert!(changed > 0, "some indexed batch must hold several records");
    std::fs::write(index_path, bytes).unwrap();
}
