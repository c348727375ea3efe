//! Issue 35: the active segment read through a mapping (`SegmentConfig::map_active_reads`), on
//! the OS storage in a temporary directory.

use std::sync::Arc;

use crate::format::{BatchBuilder, Compression};
use crate::segment::read::MappingState;
use crate::segment::*;
use crate::storage::{OsStorage, Storage};

const T0: i64 = 1_700_000_000_000;

fn storage() -> Arc<dyn Storage> {
    Arc::new(OsStorage::new())
}

fn batch(base: i64, count: usize, value_len: usize) -> Vec<u8> {
    let mut builder = BatchBuilder::new(Compression::None).base_offset(base);
    for i in 0..count {
        let value = vec![b'a' + (i % 26) as u8; value_len];
        builder.push_parts::<&str>(T0 + base + i as i64, None, Some(&value), &[]);
    }
    builder.build().unwrap()
}

fn mapped_config(segment_bytes: u32, preallocate: bool) -> SegmentConfig {
    SegmentConfig {
        segment_bytes,
        segment_index_bytes: 1 << 16,
        index_interval_bytes: 256,
        preallocate,
        map_sealed_reads: true,
        map_active_reads: true,
        ..SegmentConfig::default()
    }
}

/// The mapping's address and length, if the segment holds one.
fn mapping_of(segment: &Segment) -> Option<(usize, usize)> {
    match &*segment.mapping.read() {
        MappingState::Mapped(mapping) => Some((mapping.as_ptr() as usize, mapping.len())),
        MappingState::NotYet | MappingState::Unavailable => None,
    }
}

/// Reads the batch at `offset` alone and checks it is `expected`.
fn read_back(segment: &Segment, offset: i64, expected: &[u8]) {
    let mut buf = Vec::new();
    let read = segment.read(offset, 1, None, &mut buf).unwrap().unwrap();
    assert_eq!(read.first_offset, offset);
    assert_eq!(buf, expected, "the batch at {offset}");
}

#[test]
fn the_active_segment_is_read_through_one_mapping_at_its_reserved_length_as_it_grows() {
    let dir = tempfile::tempdir().unwrap();
    let segment =
        Segment::create(&storage(), dir.path(), 0, mapped_config(1 << 20, false), T0).unwrap();
    let first = batch(0, 3, 40);
    segment.append(&first).unwrap();
    read_back(&segment, 0, &first);
    let (address, len) = mapping_of(&segment).expect("the active segment is mapped");
    assert_eq!(len, 1 << 20, "mapped at segment.bytes, past the file's end");
    // Appends after the mapping are read through it: the same mapping, no new one.
    let mut written = vec![first];
    for n in 1..50 {
        let bytes = batch(n * 3, 3, 40);
        segment.append(&bytes).unwrap();
        read_back(&segment, n * 3, &bytes);
        written.push(bytes);
    }
    assert_eq!(mapping_of(&segment), Some((address, len)));
    // Sealed without preallocation the file is not cut: the mapping moves with the segment.
    segment.seal().unwrap();
    for (n, bytes) in written.iter().enumerate() {
        read_back(&segment, n as i64 * 3, bytes);
    }
    assert_eq!(mapping_of(&segment), Some((address, len)));
}

#[test]
fn an_active_segment_grown_past_its_reserved_length_is_mapped_again() {
    let dir = tempfile::tempdir().unwrap();
    // A fresh segment takes a batch larger than segment.bytes.
    let segment =
        Segment::create(&storage(), dir.path(), 0, mapped_config(4096, false), T0).unwrap();
    let small = batch(0, 1, 10);
    segment.append(&small).unwrap();
    read_back(&segment, 0, &small);
    assert_eq!(mapping_of(&segment).map(|(_, len)| len), Some(4096));
    let large = batch(1, 10, 1000);
    segment.append(&large).unwrap();
    read_back(&segment, 1, &large);
    let (_, len) = mapping_of(&segment).expect("mapped again");
    assert!(
        len as u64 >= segment.size(),
        "{len} covers {}",
        segment.size()
    );
}

/// A preallocated active segment of 20 three-record batches, read once (so mapped).
fn preallocated_and_mapped(dir: &std::path::Path) -> (Segment, Vec<Vec<u8>>) {
    let segment = Segment::create(&storage(), dir, 0, mapped_config(1 << 20, true), T0).unwrap();
    let mut written = Vec::new();
    for n in 0..20 {
        let bytes = batch(n * 3, 3, 40);
        segment.append(&bytes).unwrap();
        written.push(bytes);
    }
    assert_eq!(segment.file_len().unwrap(), 1 << 20, "preallocated");
    read_back(&segment, 30, &written[10]);
    assert!(mapping_of(&segment).is_some());
    (segment, written)
}

#[test]
fn a_truncation_of_the_active_segment_drops_its_mapping_first() {
    let dir = tempfile::tempdir().unwrap();
    let (segment, written) = preallocated_and_mapped(dir.path());
    segment.truncate_to(30, T0).unwrap();
    assert_eq!(
        mapping_of(&segment),
        None,
        "truncate_to dropped the mapping"
    );
    let rewritten = batch(30, 2, 70);
    segment.append(&rewritten).unwrap();
    read_back(&segment, 30, &rewritten);
    read_back(&segment, 27, &written[9]);
    assert!(mapping_of(&segment).is_some(), "mapped again");
}

#[test]
fn the_trim_of_preallocated_space_at_seal_drops_the_mapping_first() {
    let dir = tempfile::tempdir().unwrap();
    let (segment, written) = preallocated_and_mapped(dir.path());
    segment.seal().unwrap();
    assert_eq!(
        mapping_of(&segment),
        None,
        "the trim at seal dropped the mapping"
    );
    assert_eq!(segment.file_len().unwrap(), segment.size());
    read_back(&segment, 30, &written[10]);
    let (_, len) = mapping_of(&segment).expect("the sealed segment is mapped again");
    assert_eq!(len as u64, segment.size());
}
