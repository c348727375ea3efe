//! The segments' position cache (batch positions learned from reads' index walks) never serves
//! a batch that is no longer there: after `truncate_to` and new appends at the same file
//! positions (same sizes, other bytes; or other sizes), after retention and after compaction,
//! every random read still returns the batch that holds its offset (or, in a gap, the next one).

use std::collections::BTreeMap;

use partlog::{CleanupPolicy, FetchData, Log, LogConfig, NewRecord, ReadBound};

/// A small xorshift: reproducible shuffles, no dependency.
fn shuffled(from: i64, to: i64, seed: u64) -> Vec<i64> {
    let mut offsets: Vec<i64> = (from..to).collect();
    let mut state = seed | 1;
    for i in (1..offsets.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        offsets.swap(i, (state % (i as u64 + 1)) as usize);
    }
    offsets
}

/// Record timestamps: now, so that time-based retention keeps every segment.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn config(cleanup_policy: CleanupPolicy) -> LogConfig {
    LogConfig::builder_for_tests()
        .segment_bytes(16 * 1024)
        .index_interval_bytes(512)
        .cleanup_policy(cleanup_policy)
        .build()
        .unwrap()
}

/// The value of the record at `offset` in round `round`: it names both, padded to a size that
/// depends only on the offset (so that a later round puts batches of the same sizes at the same
/// file positions).
fn value(offset: i64, round: u32) -> Vec<u8> {
    let mut value = format!("{offset}/{round}/").into_bytes();
    value.resize(10 + (offset as usize * 37) % 150, b'.');
    value
}

/// Appends single-record batches (and every seventh a three-record batch) from the log end to
/// `to`, recording each record's value in `expected`.
fn append_until(log: &Log, to: i64, round: u32, expected: &mut BTreeMap<i64, Vec<u8>>) {
    while log.log_end_offset() < to {
        let first = log.log_end_offset();
        let count = if first % 7 == 0 { 3 } else { 1 };
        let values: Vec<Vec<u8>> = (first..first + count).map(|o| value(o, round)).collect();
        let keys: Vec<Vec<u8>> = (first..first + count)
            .map(|o| format!("key-{}", o % 40).into_bytes())
            .collect();
        let records: Vec<NewRecord> = values
            .iter()
            .zip(&keys)
            .map(|(value, key)| NewRecord::new(now_ms(), Some(key), Some(value)))
            .collect();
        log.append(&records).unwrap();
        for (offset, value) in (first..).zip(values) {
            expected.insert(offset, value);
        }
    }
}

/// Reads every offset of the log in a shuffled order, one batch each, and checks the batch
/// returned first: it holds the offset when `present` has it, and otherwise (a gap) it is the
/// first batch after it; every record in it has its value in `values`.
fn check_random_reads(
    log: &Log,
    values: &BTreeMap<i64, Vec<u8>>,
    present: &BTreeMap<i64, Vec<u8>>,
    seed: u64,
) {
    let mut fetch = FetchData::new();
    let mut scratch = Vec::new();
    for offset in shuffled(log.log_start_offset(), log.log_end_offset(), seed) {
        log.read_into(offset, 1, ReadBound::LogEnd, &mut fetch)
            .unwrap();
        let batch = fetch
            .batches()
            .next()
            .unwrap_or_else(|| panic!("offset {offset}: no batch"))
            .unwrap();
        let mut found = false;
        let mut offsets = Vec::new();
        for record in batch.records(&mut scratch).unwrap() {
            let record = record.unwrap();
            assert_eq!(
                values.get(&record.offset).map(Vec::as_slice),
                record.value,
                "offset {offset}: record {} has a stale value",
                record.offset
            );
            found |= record.offset == offset;
            offsets.push(record.offset);
        }
        let last = batch.last_offset();
        assert!(last >= offset, "offset {offset}: batch ends at {last}");
        if !found {
            // A gap: nothing expected between the offset and the batch's first record.
            let first = offsets.first().copied().unwrap_or(last);
            assert!(
                present.range(offset..first).next().is_none(),
                "offset {offset}: read the batch at {first}, skipping an expected record"
            );
        }
    }
}

/// Both maps in one.
fn expected_all(
    first: &BTreeMap<i64, Vec<u8>>,
    second: &BTreeMap<i64, Vec<u8>>,
) -> BTreeMap<i64, Vec<u8>> {
    first
        .iter()
        .chain(second)
        .map(|(o, v)| (*o, v.clone()))
        .collect()
}

#[test]
fn random_reads_after_truncate_to_never_see_the_cut_batches() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config(CleanupPolicy::default())).unwrap();
    let mut expected = BTreeMap::new();
    append_until(&log, 600, 0, &mut expected);
    assert!(log.stats().segments > 2, "the truncations cross segments");
    // Twice: the first pass learns the positions, the second is served by them.
    check_random_reads(&log, &expected, &expected, 1);
    check_random_reads(&log, &expected, &expected, 2);

    // The same sizes again from inside the active segment: the same positions, other bytes.
    let cut = log.log_end_offset() - 40;
    let cut = log.truncate_to(cut).unwrap();
    expected.retain(|&offset, _| offset < cut);
    append_until(&log, 600, 1, &mut expected);
    check_random_reads(&log, &expected, &expected, 3);
    check_random_reads(&log, &expected, &expected, 4);

    // Back into a sealed segment, then batches of other sizes (one record each).
    let cut = log.truncate_to(150).unwrap();
    expected.retain(|&offset, _| offset < cut);
    while log.log_end_offset() < 500 {
        let offset = log.log_end_offset();
        let value = value(offset + 3, 2);
        log.append(&[NewRecord::new(now_ms(), Some(b"k"), Some(&value))])
            .unwrap();
        expected.insert(offset, value);
    }
    check_random_reads(&log, &expected, &expected, 5);
    check_random_reads(&log, &expected, &expected, 6);
}

#[test]
fn random_reads_after_retention_and_compaction_see_the_new_segments() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config(CleanupPolicy::COMPACT_DELETE)).unwrap();
    let mut expected = BTreeMap::new();
    append_until(&log, 800, 0, &mut expected);
    let segments = log.stats().segments;
    check_random_reads(&log, &expected, &expected, 7);
    check_random_reads(&log, &expected, &expected, 8);

    log.delete_records_before(400).unwrap();
    log.enforce_retention().unwrap();
    assert!(
        log.stats().segments < segments,
        "retention deleted segments"
    );
    // The batch holding the log start offset may begin below it.
    let present = expected.split_off(&log.log_start_offset());
    let all_values = expected_all(&expected, &present);
    check_random_reads(&log, &all_values, &present, 9);
    let expected = present;

    let stats = log.compact().unwrap();
    // Which records survive is compaction's business: learn it from a sequential read, then
    // check that random reads agree with it.
    let mut survivors = BTreeMap::new();
    for record in log.records(log.log_start_offset(), ReadBound::LogEnd) {
        let record = record.unwrap();
        assert_eq!(record.value.as_ref(), expected.get(&record.offset));
        survivors.insert(record.offset, record.value.unwrap());
    }
    assert!(
        survivors.len() < expected.len(),
        "compaction removed records: {stats:?}"
    );
    check_random_reads(&log, &all_values, &survivors, 10);
    check_random_reads(&log, &all_values, &survivors, 11);
}
