//! Pinned bytes: the golden batches of the Kafka storage reference (§1.5), Kafka's CRC-32C and
//! varint vectors, and the LZ4 frame header Kafka writes. Each must match byte for byte.

use partlog::unstable::format::{
    self, BatchBuilder, BatchView, Compression, ControlRecordType, EndTransactionMarker,
    KAFKA_LZ4_FRAME_HEADER, TimestampType, build_control_batch, control_record_type,
    set_partition_leader_epoch,
};

const TS: i64 = 1_700_000_000_000;

fn hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text
        .bytes()
        .filter(|b| b.is_ascii_hexdigit())
        .map(|b| (b as char).to_digit(16).unwrap() as u8)
        .collect();
    assert!(digits.len().is_multiple_of(2));
    digits
        .chunks(2)
        .map(|pair| pair[0] << 4 | pair[1])
        .collect()
}

/// Reference §1.5: data batch, baseOffset 0, epoch 0, CreateTime, one record "k" -> "v".
const GOLDEN_DATA: &str = "
    00000000 00000000  0000003a  00000000  02  e99b8dd8  0000  00000000
    0000018bcfe56800  0000018bcfe56800  ffffffffffffffff  ffff  ffffffff  00000001
    10 00 00 00 02 6b 02 76 00";

/// Reference §1.5: COMMIT marker, baseOffset 5, leaderEpoch 3, pid 1000, epoch 0,
/// coordinatorEpoch 7.
const GOLDEN_COMMIT: &str = "
    0000000000000005 00000042 00000003 02 dbc180da 0030 00000000 0000018bcfe56800
    0000018bcfe56800 00000000000003e8 0000 ffffffff 00000001
    20 00 00 00 08 0000 0001 0c 0000 00000007 00";

#[test]
fn crc32c_kafka_vector() {
    assert_eq!(format::crc32c(b"Some String"), 608_512_271);
}

#[test]
fn varint_kafka_vectors_through_the_public_api() {
    use format::varint::{read_varint, read_varlong, write_varint, write_varlong};
    let cases: &[(i32, &[u8])] = &[
        (-1, &[0x01]),
        (1, &[0x02]),
        (64, &[0x80, 0x01]),
        (i32::MAX, &[0xfe, 0xff, 0xff, 0xff, 0x0f]),
        (i32::MIN, &[0xff, 0xff, 0xff, 0xff, 0x0f]),
    ];
    for &(value, bytes) in cases {
        let mut out = Vec::new();
        write_varint(&mut out, value);
        assert_eq!(out, bytes);
        assert_eq!(read_varint(bytes, &mut 0), Ok(value));
    }
    let long_cases: &[(i64, &[u8])] = &[
        (-1, &[0x01]),
        (64, &[0x80, 0x01]),
        (
            i64::MAX,
            &[0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
        ),
        (
            i64::MIN,
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
        ),
    ];
    for &(value, bytes) in long_cases {
        let mut out = Vec::new();
        write_varlong(&mut out, value);
        assert_eq!(out, bytes);
        assert_eq!(read_varlong(bytes, &mut 0), Ok(value));
    }
}

#[test]
fn golden_data_batch_is_built_byte_for_byte() {
    let expected = hex(GOLDEN_DATA);
    assert_eq!(expected.len(), 70);
    let mut builder = BatchBuilder::new(Compression::None).partition_leader_epoch(0);
    builder.push_parts::<&str>(TS, Some(b"k"), Some(b"v"), &[]);
    let built = builder.build().unwrap();
    assert_eq!(built, expected);

    let view = BatchView::new(&expected).unwrap();
    let header = view.header();
    assert_eq!(header.crc, 0xE99B_8DD8);
    assert_eq!(header.base_offset, 0);
    assert_eq!(header.total_size(), 70);
    assert_eq!(header.last_offset(), 0);
    assert_eq!(header.base_timestamp, TS);
    assert_eq!(header.max_timestamp, TS);
    assert_eq!(header.producer_id, -1);
    assert_eq!(header.producer_epoch, -1);
    assert_eq!(header.base_sequence, -1);
    assert_eq!(header.timestamp_type(), TimestampType::CreateTime);
    assert!(!header.is_control() && !header.is_transactional());
    let mut scratch = Vec::new();
    let records: Vec<_> = view
        .records(&mut scratch)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].offset, 0);
    assert_eq!(records[0].timestamp, TS);
    assert_eq!(records[0].key, Some(&b"k"[..]));
    assert_eq!(records[0].value, Some(&b"v"[..]));
    assert_eq!(records[0].headers().count(), 0);
}

#[test]
fn golden_commit_marker_is_built_byte_for_byte() {
    let expected = hex(GOLDEN_COMMIT);
    assert_eq!(expected.len(), 78);
    let mut built = build_control_batch(ControlRecordType::Commit, 1000, 0, 7, 5, TS);
    assert_eq!(built.len(), 78);
    set_partition_leader_epoch(&mut built, 3).unwrap();
    assert_eq!(built, expected);

    let view = BatchView::new(&expected).unwrap();
    let header = view.header();
    assert_eq!(header.crc, 0xDBC1_80DA);
    assert_eq!(header.attributes, 0x30);
    assert!(header.is_control() && header.is_transactional());
    assert_eq!(header.partition_leader_epoch, 3);
    assert_eq!(header.producer_id, 1000);
    let mut scratch = Vec::new();
    let record = view.records(&mut scratch).unwrap().next().unwrap().unwrap();
    assert_eq!(record.offset, 5);
    assert_eq!(
        control_record_type(&record).unwrap(),
        ControlRecordType::Commit
    );
    assert_eq!(
        EndTransactionMarker::parse(&record).unwrap(),
        EndTransactionMarker {
            coordinator_epoch: 7
        }
    );

    let abort = build_control_batch(ControlRecordType::Abort, 1000, 0, 7, 5, TS);
    let view = BatchView::new(&abort).unwrap();
    let record = view.records(&mut scratch).unwrap().next().unwrap().unwrap();
    assert_eq!(
        control_record_type(&record).unwrap(),
        ControlRecordType::Abort
    );
}

#[test]
fn every_lz4_payload_starts_with_kafkas_frame_header() {
    assert_eq!(
        KAFKA_LZ4_FRAME_HEADER,
        [0x04, 0x22, 0x4D, 0x18, 0x60, 0x40, 0x82]
    );
    for records in [1usize, 3, 50, 2000] {
        let mut builder = BatchBuilder::new(Compression::Lz4);
        for i in 0..records {
            let value = format!("value {i} ").repeat(i % 13 + 1);
            builder.push_parts::<&str>(TS + i as i64, None, Some(value.as_bytes()), &[]);
        }
        let batch = builder.build().unwrap();
        let view = BatchView::new(&batch).unwrap();
        assert_eq!(view.header().compression().unwrap(), Compression::Lz4);
        assert_eq!(&view.payload()[..7], &KAFKA_LZ4_FRAME_HEADER);
        // ... and ends with the end mark, with no content checksum after it.
        assert_eq!(&view.payload()[view.payload().len() - 4..], &[0, 0, 0, 0]);
        let mut scratch = Vec::new();
        assert_eq!(view.records(&mut scratch).unwrap().count(), records);
    }
}

#[test]
fn zstd_payload_is_a_standard_zstd_frame() {
    let mut builder = BatchBuilder::new(Compression::Zstd);
    builder.push_parts::<&str>(TS, Some(b"key"), Some(&[b'x'; 1000]), &[]);
    let batch = builder.build().unwrap();
    let view = BatchView::new(&batch).unwrap();
    // The zstd frame magic 0xFD2FB528, little-endian.
    assert_eq!(&view.payload()[..4], &[0x28, 0xB5, 0x2F, 0xFD]);
}
