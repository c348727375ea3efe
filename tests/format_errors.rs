//! Each kind of bad input is its own clear, typed error: truncation, bad varints, record
//! framing, counts, unknown and unsupported codecs, legacy magics, and caller mistakes.

use std::path::Path;

use partlog::unstable::format::{
    BatchBuilder, BatchHeader, BatchIter, BatchView, Compression, ControlRecordType,
    EndTransactionMarker, Record, build_control_batch, control_record_type, corruption_in_file,
    crc32c, locate_error, peek_batch_frame, peek_magic, set_base_offset, set_log_append_time,
    set_partition_leader_epoch,
};
use partlog::{Corruption, Error};

/// A hand-made batch: the given records section, count and attributes, correctly sealed.
fn raw_batch(
    records: &[u8],
    records_count: i32,
    last_offset_delta: i32,
    attributes: i16,
) -> Vec<u8> {
    let header = BatchHeader {
        base_offset: 100,
        batch_length: (61 + records.len() - 12) as i32,
        partition_leader_epoch: 0,
        magic: 2,
        crc: 0,
        attributes,
        last_offset_delta,
        base_timestamp: 1_000,
        max_timestamp: 1_000,
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
        records_count,
    };
    let mut batch = header.encode().to_vec();
    batch.extend_from_slice(records);
    let crc = crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    batch
}

/// The record "k" -> "v" with no headers: length 8, attributes, deltas 0, key, value, 0 headers.
const KV_RECORD: [u8; 9] = [0x10, 0x00, 0x00, 0x00, 0x02, b'k', 0x02, b'v', 0x00];

fn record_errors(batch: &[u8]) -> Vec<Result<i64, Error>> {
    let view = BatchView::new(batch).expect("valid frame and CRC");
    let mut scratch = Vec::new();
    view.records(&mut scratch)
        .expect("records section readable")
        .map(|record| record.map(|r| r.offset))
        .collect()
}

fn last_corruption(batch: &[u8]) -> Corruption {
    match record_errors(batch).pop() {
        Some(Err(Error::InvalidBatch { what })) => what,
        other => panic!("expected an InvalidBatch error, got {other:?}"),
    }
}

#[test]
fn the_hand_made_batch_is_valid() {
    let batch = raw_batch(&KV_RECORD, 1, 0, 0);
    let offsets: Vec<i64> = record_errors(&batch)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(offsets, [100]);
}

#[test]
fn truncated_input() {
    let batch = raw_batch(&KV_RECORD, 1, 0, 0);
    assert_eq!(
        BatchView::new(&batch[..10]).unwrap_err(),
        Corruption::Truncated {
            needed: 17,
            available: 10
        }
    );
    assert_eq!(
        BatchView::new(&batch[..65]).unwrap_err(),
        Corruption::Truncated {
            needed: 70,
            available: 65
        }
    );
    assert_eq!(
        BatchHeader::parse(&batch[..60]).unwrap_err(),
        Corruption::Truncated {
            needed: 61,
            available: 60
        }
    );
    assert_eq!(peek_batch_frame(&batch[..16]), Ok(None));
    assert_eq!(peek_magic(&batch[..16]), None);
    assert_eq!(peek_magic(&batch), Some(2));
    assert!(matches!(
        BatchView::decode(&batch[..65]),
        Err(Error::InvalidBatch {
            what: Corruption::Truncated { .. }
        })
    ));
}

#[test]
fn bytes_after_the_batch_are_rejected() {
    let mut batch = raw_batch(&KV_RECORD, 1, 0, 0);
    batch.push(0);
    assert_eq!(
        BatchView::new(&batch).unwrap_err(),
        Corruption::BadHeader("bytes follow the batch: the buffer holds more than one batch")
    );
}

#[test]
fn bad_varints() {
    // A record length of six bytes all with continuation bits: longer than any i32 varint.
    let batch = raw_batch(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01], 1, 0, 0);
    assert_eq!(last_corruption(&batch), Corruption::BadVarint);
    // A key length varint that runs off the end of its record.
    let batch = raw_batch(&[0x08, 0x00, 0x00, 0x00, 0x80], 1, 0, 0);
    assert_eq!(last_corruption(&batch), Corruption::BadVarint);
    // A timestamp delta longer than ten bytes.
    let mut record = vec![0x1a, 0x00];
    record.extend_from_slice(&[0xff; 11]);
    record.push(0x00);
    let batch = raw_batch(&record, 1, 0, 0);
    assert_eq!(last_corruption(&batch), Corruption::BadVarint);
}

#[test]
fn record_framing_errors() {
    let mut negative_key = KV_RECORD;
    negative_key[4] = 0x03; // key length -2
    assert_eq!(
        last_corruption(&raw_batch(&negative_key, 1, 0, 0)),
        Corruption::BadRecord("negative key length")
    );

    let mut negative_headers = KV_RECORD;
    negative_headers[8] = 0x01; // header count -1
    assert_eq!(
        last_corruption(&raw_batch(&negative_headers, 1, 0, 0)),
        Corruption::BadRecord("negative header count")
    );

    let mut too_many_headers = KV_RECORD;
    too_many_headers[8] = 0x7e; // 63 headers in 0 bytes
    assert_eq!(
        last_corruption(&raw_batch(&too_many_headers, 1, 0, 0)),
        Corruption::BadRecord("header count exceeds the bytes left in the record")
    );

    let mut longer = KV_RECORD.to_vec();
    longer[0] = 0x12; // body of 9 bytes where the fields use 8
    longer.push(0x00);
    assert_eq!(
        last_corruption(&raw_batch(&longer, 1, 0, 0)),
        Corruption::BadRecord("record length does not match its fields")
    );

    let mut past_end = KV_RECORD;
    past_end[0] = 0x40; // body of 32 bytes
    assert_eq!(
        last_corruption(&raw_batch(&past_end, 1, 0, 0)),
        Corruption::BadRecord("record length runs past the end of the batch")
    );

    let mut negative_length = KV_RECORD;
    negative_length[0] = 0x01;
    assert_eq!(
        last_corruption(&raw_batch(&negative_length, 1, 0, 0)),
        Corruption::BadRecord("negative record length")
    );

    // A header with a negative key length.
    let record = [
        0x12, 0x00, 0x00, 0x00, 0x02, b'k', 0x02, b'v', 0x02, 0x01, 0x01,
    ];
    assert_eq!(
        last_corruption(&raw_batch(&record, 1, 0, 0)),
        Corruption::BadRecord("negative header key length")
    );
}

#[test]
fn record_count_mismatches() {
    // Declares two records, holds one.
    let batch = raw_batch(&KV_RECORD, 2, 1, 0);
    let results = record_errors(&batch);
    assert_eq!(results.len(), 2);
    assert!(results[0].is_ok());
    assert_eq!(
        last_corruption(&batch),
        Corruption::RecordCount {
            declared: 2,
            found: 1
        }
    );
    // Declares one record, holds two.
    let two = [KV_RECORD, KV_RECORD].concat();
    let batch = raw_batch(&two, 1, 1, 0);
    assert_eq!(
        last_corruption(&batch),
        Corruption::RecordCount {
            declared: 1,
            found: -1
        }
    );
    // The message says which.
    assert!(
        Corruption::RecordCount {
            declared: 1,
            found: -1
        }
        .to_string()
        .contains("remain")
    );
}

#[test]
fn header_invariants() {
    let batch = raw_batch(&KV_RECORD, 1, -1, 0);
    assert_eq!(
        BatchView::new(&batch).unwrap_err(),
        Corruption::BadHeader("lastOffsetDelta is negative")
    );
    let batch = raw_batch(&KV_RECORD, 3, 1, 0);
    assert_eq!(
        BatchView::new(&batch).unwrap_err(),
        Corruption::BadHeader("recordsCount exceeds lastOffsetDelta + 1")
    );
    let batch = raw_batch(&KV_RECORD, -1, 1, 0);
    assert_eq!(
        BatchView::new(&batch).unwrap_err(),
        Corruption::BadHeader("recordsCount is negative")
    );
    // Compaction shrinks the count below lastOffsetDelta + 1: legal.
    assert!(BatchView::new(&raw_batch(&KV_RECORD, 1, 5, 0)).is_ok());
    // An empty batch (count 0) has no records, as in Kafka.
    let empty = raw_batch(&[], 0, 3, 0);
    assert!(record_errors(&empty).is_empty());
}

#[test]
fn unknown_and_unsupported_codecs() {
    for codec in [1u8, 2, 5, 6, 7] {
        let batch = raw_batch(&KV_RECORD, 1, 0, i16::from(codec));
        let view = BatchView::new(&batch).unwrap();
        let mut scratch = Vec::new();
        let error = view.records(&mut scratch).unwrap_err();
        assert_eq!(view.header().compression_id(), codec);
        assert_eq!(view.header().compression().is_err(), codec >= 5);
        if Compression::from_id(codec).is_ok_and(Compression::is_readable) {
            // gzip or snappy with its feature on: the records are no such stream.
            assert!(
                matches!(
                    error,
                    Error::InvalidBatch {
                        what: Corruption::BadCompression(_)
                    }
                ),
                "codec {codec}: {error}"
            );
            continue;
        }
        assert!(
            matches!(error, Error::UnsupportedCompression { codec: c } if c == codec),
            "codec {codec}: {error}"
        );
        assert!(error.to_string().contains(&codec.to_string()));
    }
    for codec in [Compression::Gzip, Compression::Snappy] {
        let mut builder = BatchBuilder::new(codec);
        builder.push_parts::<&str>(1, None, Some(b"v"), &[]);
        assert!(matches!(
            builder.build(),
            Err(Error::UnsupportedCompression { codec: c }) if c == codec.id()
        ));
    }
    assert!(matches!(
        Compression::from_id(6),
        Err(Error::UnsupportedCompression { codec: 6 })
    ));
}

#[test]
fn corrupt_compressed_payloads() {
    for codec in [Compression::Lz4, Compression::Zstd] {
        // The records section is not a valid frame of the codec.
        let batch = raw_batch(&KV_RECORD, 1, 0, i16::from(codec.id()));
        let view = BatchView::new(&batch).unwrap();
        let mut scratch = Vec::new();
        assert!(matches!(
            view.records(&mut scratch),
            Err(Error::InvalidBatch {
                what: Corruption::BadCompression(_)
            })
        ));
    }
}

/// A legacy v1 message: offset, size, crc, magic 1, attributes, timestamp, null key, value "abcd".
fn legacy_v1_message() -> Vec<u8> {
    let mut body = vec![1u8, 0];
    body.extend_from_slice(&1_000i64.to_be_bytes());
    body.extend_from_slice(&(-1i32).to_be_bytes());
    body.extend_from_slice(&4i32.to_be_bytes());
    body.extend_from_slice(b"abcd");
    let crc = arbitrary_crc(&body);
    let mut message = 0i64.to_be_bytes().to_vec();
    message.extend_from_slice(&((body.len() + 4) as i32).to_be_bytes());
    message.extend_from_slice(&crc.to_be_bytes());
    message.extend_from_slice(&body);
    message
}

/// The CRC value does not matter to partlog (it stops at the magic); any 32 bits do.
fn arbitrary_crc(bytes: &[u8]) -> u32 {
    bytes
        .iter()
        .fold(0u32, |acc, &b| acc.rotate_left(5) ^ u32::from(b))
}

#[test]
fn legacy_magic_is_unsupported_not_corrupt() {
    let legacy = legacy_v1_message();
    let frame = peek_batch_frame(&legacy).unwrap().unwrap();
    assert_eq!(frame.magic, 1);
    assert!(frame.is_legacy());
    assert_eq!(frame.total_size(), legacy.len());
    assert_eq!(
        BatchView::new(&legacy).unwrap_err(),
        Corruption::BadMagic(1)
    );
    match BatchView::decode(&legacy) {
        Err(Error::Unsupported { what }) => assert!(what.contains("magic 1"), "{what}"),
        other => panic!("{other:?}"),
    }
    match corruption_in_file(Corruption::BadMagic(0), Path::new("00.log"), 42) {
        Error::Unsupported { what } => {
            assert!(what.contains("magic 0") && what.contains("00.log") && what.contains("42"));
        }
        other => panic!("{other:?}"),
    }

    // A file mixing a legacy message and a v2 batch: the walk reports the first and goes on.
    let mut file = legacy.clone();
    file.extend_from_slice(&raw_batch(&KV_RECORD, 1, 0, 0));
    let results: Vec<_> = BatchIter::new(&file).collect();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0], (0, Err(Corruption::BadMagic(1))));
    assert_eq!(results[1].0, legacy.len());
    assert!(results[1].1.is_ok());
}

#[test]
fn other_magics_are_corruption() {
    let mut batch = raw_batch(&KV_RECORD, 1, 0, 0);
    batch[16] = 3;
    assert_eq!(BatchView::new(&batch).unwrap_err(), Corruption::BadMagic(3));
    assert_eq!(peek_batch_frame(&batch), Err(Corruption::BadMagic(3)));
    assert!(matches!(
        BatchView::decode(&batch),
        Err(Error::InvalidBatch {
            what: Corruption::BadMagic(3)
        })
    ));
    match corruption_in_file(Corruption::BadMagic(3), Path::new("x.log"), 7) {
        Error::Corrupt {
            position: 7,
            what: Corruption::BadMagic(3),
            ..
        } => {}
        other => panic!("{other:?}"),
    }
    // A bad frame stops a walk: the next batch cannot be found.
    let mut file = batch.clone();
    file.extend_from_slice(&raw_batch(&KV_RECORD, 1, 0, 0));
    let results: Vec<_> = BatchIter::new(&file).collect();
    assert_eq!(results, vec![(0, Err(Corruption::BadMagic(3)))]);
}

#[test]
fn errors_are_located_in_their_file() {
    let error = Error::InvalidBatch {
        what: Corruption::BadVarint,
    };
    match locate_error(error, Path::new("/data/00000000000000000000.log"), 4096) {
        Error::Corrupt {
            file,
            position,
            what,
        } => {
            assert_eq!(file, Path::new("/data/00000000000000000000.log"));
            assert_eq!(position, 4096);
            assert_eq!(what, Corruption::BadVarint);
        }
        other => panic!("{other:?}"),
    }
    let unrelated = locate_error(Error::Closed, Path::new("x"), 0);
    assert!(matches!(unrelated, Error::Closed));
}

#[test]
fn batch_walk_reports_a_partial_tail() {
    let batch = raw_batch(&KV_RECORD, 1, 0, 0);
    let mut file = batch.clone();
    file.extend_from_slice(&batch[..30]);
    let mut walk = BatchIter::new(&file);
    let (position, first) = walk.next().unwrap();
    assert_eq!(position, 0);
    assert!(first.is_ok());
    assert!(walk.next().is_none());
    assert_eq!(walk.position(), batch.len());
    assert_eq!(walk.remainder(), &batch[..30]);
}

#[test]
fn caller_mistakes() {
    assert!(matches!(
        BatchBuilder::new(Compression::None).build(),
        Err(Error::InvalidArgument { .. })
    ));
    let mut short = [0u8; 60];
    assert!(set_base_offset(&mut short, 1).is_err());
    assert!(set_partition_leader_epoch(&mut short, 1).is_err());
    assert!(set_log_append_time(&mut short, 1).is_err());
    assert!(set_log_append_time(&mut [], 1).is_err());
    let mut legacy = legacy_v1_message();
    legacy.resize(70, 0);
    assert!(set_log_append_time(&mut legacy, 1).is_err());
    // A slice holding more than one batch: the CRC would cover the wrong bytes.
    let mut two = [
        raw_batch(&KV_RECORD, 1, 0, 0),
        raw_batch(&KV_RECORD, 1, 0, 0),
    ]
    .concat();
    assert!(set_log_append_time(&mut two, 1).is_err());
}

fn with_key<'a>(mut record: Record<'a>, key: Option<&'a [u8]>) -> Record<'a> {
    record.key = key;
    record
}

fn with_value<'a>(mut record: Record<'a>, value: Option<&'a [u8]>) -> Record<'a> {
    record.value = value;
    record
}

#[test]
fn control_record_errors() {
    let marker = build_control_batch(ControlRecordType::Commit, 1, 0, 3, 0, 0);
    let view = BatchView::new(&marker).unwrap();
    let mut scratch = Vec::new();
    let record = view.records(&mut scratch).unwrap().next().unwrap().unwrap();
    assert_eq!(
        EndTransactionMarker::parse(&record)
            .unwrap()
            .coordinator_epoch,
        3
    );

    let short_key = with_key(record, Some(&[0, 0, 0]));
    assert!(matches!(
        control_record_type(&short_key),
        Err(Error::InvalidBatch {
            what: Corruption::BadRecord(_)
        })
    ));
    let null_key = with_key(record, None);
    assert!(control_record_type(&null_key).is_err());
    let negative_version = with_key(record, Some(&[0xff, 0xff, 0, 1]));
    assert!(control_record_type(&negative_version).is_err());
    let future_version = with_key(record, Some(&[0, 5, 0, 0, 9]));
    assert_eq!(
        control_record_type(&future_version).unwrap(),
        ControlRecordType::Abort
    );
    let leader_change = with_key(record, Some(&[0, 0, 0, 2]));
    assert_eq!(
        control_record_type(&leader_change).unwrap(),
        ControlRecordType::LeaderChange
    );
    assert!(EndTransactionMarker::parse(&leader_change).is_err());
    let unknown = with_key(record, Some(&[0, 0, 0x01, 0x00]));
    assert_eq!(
        control_record_type(&unknown).unwrap(),
        ControlRecordType::Unknown(256)
    );
    let short_value = with_value(record, Some(&[0, 0, 0, 0, 7]));
    assert!(EndTransactionMarker::parse(&short_value).is_err());
}
