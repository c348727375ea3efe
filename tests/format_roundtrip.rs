//! Property: any batch partlog builds decodes back to the same records and header fields, for
//! every codec, with null and empty keys/values, headers, producer fields, LogAppendTime, and
//! timestamps on both sides of the base (negative deltas). The in-place header edits keep the
//! batch valid, and re-encoding decoded records reproduces the batch byte for byte.

use partlog::unstable::format::{
    BatchBuilder, BatchView, Compression, NewRecord, TimestampType, set_base_offset,
    set_log_append_time, set_partition_leader_epoch,
};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Spec {
    compression: Compression,
    base_offset: i64,
    leader_epoch: i32,
    producer: Option<(i64, i16, i32)>,
    transactional: bool,
    log_append_time: Option<i64>,
    records: Vec<NewRecord>,
}

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..max),
        // Repetitive content, so that the codecs actually compress something.
        (any::<u8>(), 0..max).prop_map(|(byte, len)| vec![byte; len]),
    ]
}

fn record() -> impl Strategy<Value = NewRecord> {
    let timestamp = prop_oneof![
        4 => 1_700_000_000_000i64 - 1_000_000..1_700_000_000_000 + 1_000_000,
        1 => any::<i64>(),
        1 => Just(-1i64),
    ];
    let header = ("[a-z\u{e9}-]{0,12}", proptest::option::of(bytes(24)));
    (
        timestamp,
        proptest::option::of(bytes(40)),
        proptest::option::of(bytes(300)),
        proptest::collection::vec(header, 0..4),
    )
        .prop_map(|(timestamp, key, value, headers)| NewRecord {
            timestamp,
            key,
            value,
            headers,
        })
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        prop_oneof![
            Just(Compression::None),
            Just(Compression::Lz4),
            Just(Compression::Zstd)
        ],
        prop_oneof![0i64..1000, 0i64..i64::MAX / 2],
        any::<i32>(),
        proptest::option::of((0i64..i64::MAX, 0i16..i16::MAX, 0i32..i32::MAX)),
        any::<bool>(),
        proptest::option::of(any::<i64>()),
        proptest::collection::vec(record(), 1..24),
    )
        .prop_map(
            |(
                compression,
                base_offset,
                leader_epoch,
                producer,
                transactional,
                log_append_time,
                records,
            )| Spec {
                compression,
                base_offset,
                leader_epoch,
                transactional: transactional && producer.is_some(),
                producer,
                log_append_time,
                records,
            },
        )
}

fn configured(spec: &Spec) -> BatchBuilder {
    let mut builder = BatchBuilder::new(spec.compression)
        .base_offset(spec.base_offset)
        .partition_leader_epoch(spec.leader_epoch)
        .transactional(spec.transactional);
    if let Some((id, epoch, sequence)) = spec.producer {
        builder = builder.producer(id, epoch, sequence);
    }
    if let Some(time) = spec.log_append_time {
        builder = builder.log_append_time(time);
    }
    builder
}

fn build(spec: &Spec) -> Vec<u8> {
    let mut builder = configured(spec);
    for record in &spec.records {
        builder.push(record);
    }
    builder.build().unwrap()
}

/// Checks that `batch` decodes to exactly `spec`, with `log_append_time` overriding it.
fn assert_decodes_to(batch: &[u8], spec: &Spec, base_offset: i64, log_append_time: Option<i64>) {
    let view = BatchView::new(batch).unwrap();
    let header = view.header();
    let count = spec.records.len();
    assert_eq!(header.total_size(), batch.len());
    assert_eq!(header.base_offset, base_offset);
    assert_eq!(header.partition_leader_epoch, spec.leader_epoch);
    assert_eq!(header.magic, 2);
    assert_eq!(header.compression().unwrap(), spec.compression);
    assert_eq!(header.records_count as usize, count);
    assert_eq!(header.last_offset_delta as usize, count - 1);
    assert_eq!(header.last_offset(), base_offset + count as i64 - 1);
    assert_eq!(header.base_timestamp, spec.records[0].timestamp);
    let max_create_time = spec.records.iter().map(|r| r.timestamp).max().unwrap();
    match log_append_time {
        Some(time) => {
            assert_eq!(header.timestamp_type(), TimestampType::LogAppendTime);
            assert_eq!(header.max_timestamp, time);
        }
        None => {
            assert_eq!(header.timestamp_type(), TimestampType::CreateTime);
            assert_eq!(header.max_timestamp, max_create_time);
        }
    }
    assert_eq!(header.is_transactional(), spec.transactional);
    assert!(!header.is_control());
    assert_eq!(header.delete_horizon_ms(), None);
    let (producer_id, producer_epoch, base_sequence) = spec.producer.unwrap_or((-1, -1, -1));
    assert_eq!(header.producer_id, producer_id);
    assert_eq!(header.producer_epoch, producer_epoch);
    assert_eq!(header.base_sequence, base_sequence);
    assert_eq!(header.has_producer_id(), spec.producer.is_some());

    let mut scratch = Vec::new();
    let decoded: Vec<_> = view
        .records(&mut scratch)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(decoded.len(), count);
    for (index, (record, expected)) in decoded.iter().zip(&spec.records).enumerate() {
        assert_eq!(record.offset, base_offset + index as i64);
        assert_eq!(
            record.timestamp,
            log_append_time.unwrap_or(expected.timestamp)
        );
        assert_eq!(record.key, expected.key.as_deref());
        assert_eq!(record.value, expected.value.as_deref());
        let headers: Vec<(String, Option<Vec<u8>>)> = record
            .headers()
            .map(|header| {
                (
                    header.key_str().unwrap().to_string(),
                    header.value.map(<[u8]>::to_vec),
                )
            })
            .collect();
        assert_eq!(headers, expected.headers);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn built_batches_decode_to_what_was_pushed(spec in spec()) {
        let batch = build(&spec);
        assert_decodes_to(&batch, &spec, spec.base_offset, spec.log_append_time);
    }

    #[test]
    fn header_edits_keep_the_batch_valid(
        spec in spec(),
        new_base in 0i64..1 << 40,
        new_epoch in any::<i32>(),
        append_time in any::<i64>(),
    ) {
        let mut batch = build(&spec);
        let crc_before = BatchView::new(&batch).unwrap().header().crc;
        set_base_offset(&mut batch, new_base).unwrap();
        set_partition_leader_epoch(&mut batch, new_epoch).unwrap();
        let view = BatchView::new(&batch).unwrap();
        prop_assert_eq!(view.header().crc, crc_before, "offset and epoch are outside the CRC");
        let edited = Spec { leader_epoch: new_epoch, ..spec.clone() };
        assert_decodes_to(&batch, &edited, new_base, spec.log_append_time);

        set_log_append_time(&mut batch, append_time).unwrap();
        assert_decodes_to(&batch, &edited, new_base, Some(append_time));
    }

    #[test]
    fn re_encoding_decoded_records_is_byte_identical(spec in spec()) {
        // Under LogAppendTime decoded records report the append time, not their own.
        let spec = Spec { log_append_time: None, ..spec };
        let batch = build(&spec);
        let view = BatchView::new(&batch).unwrap();
        let mut scratch = Vec::new();
        let mut builder = configured(&spec);
        for record in view.records(&mut scratch).unwrap() {
            builder.push_record(&record.unwrap());
        }
        prop_assert_eq!(builder.build().unwrap(), batch);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// What the cleaner does: copy some records at their original offsets into a new batch that
    /// keeps the original offset range, optionally with a delete horizon.
    #[test]
    fn compaction_shaped_batches_round_trip(
        spec in spec(),
        keep in proptest::collection::vec(any::<bool>(), 24),
        horizon in proptest::option::of(any::<i64>()),
    ) {
        let spec = Spec { log_append_time: None, ..spec };
        let original = build(&spec);
        let view = BatchView::new(&original).unwrap();
        let mut scratch = Vec::new();
        let records: Vec<_> = view.records(&mut scratch).unwrap().map(Result::unwrap).collect();
        let kept: Vec<_> = records
            .iter()
            .zip(&keep)
            .filter(|(_, keep)| **keep)
            .map(|(record, _)| *record)
            .collect();
        prop_assume!(!kept.is_empty());

        let mut builder = configured(&spec).last_offset_delta(view.header().last_offset_delta);
        if let Some(horizon) = horizon {
            builder = builder.delete_horizon_ms(horizon);
        }
        for record in &kept {
            builder.push_record_at_offset(record);
        }
        let compacted = builder.build().unwrap();
        let compacted_view = BatchView::new(&compacted).unwrap();
        let header = compacted_view.header();
        prop_assert_eq!(header.base_offset, spec.base_offset);
        prop_assert_eq!(header.last_offset(), view.header().last_offset());
        prop_assert_eq!(header.records_count as usize, kept.len());
        prop_assert_eq!(header.delete_horizon_ms(), horizon);
        prop_assert_eq!(
            header.max_timestamp,
            kept.iter().map(|r| r.timestamp).max().unwrap()
        );
        let mut scratch2 = Vec::new();
        let decoded: Vec<_> = compacted_view
            .records(&mut scratch2)
            .unwrap()
            .map(Result::unwrap)
            .collect();
        prop_assert_eq!(decoded, kept);
    }
}

#[test]
fn offsets_pushed_out_of_order_fail_the_build() {
    let mut source = BatchBuilder::new(Compression::None).base_offset(10);
    source.push_parts::<&str>(1, None, Some(b"a"), &[]);
    source.push_parts::<&str>(2, None, Some(b"b"), &[]);
    let source = source.build().unwrap();
    let view = BatchView::new(&source).unwrap();
    let mut scratch = Vec::new();
    let records: Vec<_> = view
        .records(&mut scratch)
        .unwrap()
        .map(Result::unwrap)
        .collect();

    let mut backwards = BatchBuilder::new(Compression::None).base_offset(10);
    backwards.push_record_at_offset(&records[1]);
    backwards.push_record_at_offset(&records[0]);
    assert!(backwards.build().is_err());

    let mut below_base = BatchBuilder::new(Compression::None).base_offset(11);
    below_base.push_record_at_offset(&records[0]);
    assert!(below_base.build().is_err());

    let mut late_horizon = BatchBuilder::new(Compression::None);
    late_horizon.push_record(&records[0]);
    assert!(late_horizon.delete_horizon_ms(5).build().is_err());
}

#[test]
fn owned_and_borrowed_pushes_encode_identically() {
    let owned = NewRecord::new(42, Some(b"key"), None).with_header("h", Some(b"v"));
    let mut a = BatchBuilder::new(Compression::Zstd);
    a.push(&owned);
    let mut b = BatchBuilder::new(Compression::Zstd);
    b.push_parts(42, Some(b"key"), None, &[("h", Some(&b"v"[..]))]);
    let mut c = BatchBuilder::new(Compression::Zstd);
    c.push_parts(42, Some(b"key"), None, &[(b"h".to_vec(), Some(&b"v"[..]))]);
    let a = a.build().unwrap();
    assert_eq!(a, b.build().unwrap());
    assert_eq!(a, c.build().unwrap());
}

#[test]
fn scratch_is_reused_across_batches() {
    let mut scratch = Vec::new();
    let mut first = BatchBuilder::new(Compression::Lz4);
    first.push_parts::<&str>(1, None, Some(&[7; 5000]), &[]);
    let first = first.build().unwrap();
    let mut second = BatchBuilder::new(Compression::Zstd);
    second.push_parts::<&str>(2, Some(b"k"), Some(b"small"), &[]);
    let second = second.build().unwrap();

    let view = BatchView::new(&first).unwrap();
    let value_len = view
        .records(&mut scratch)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .value
        .unwrap()
        .len();
    assert_eq!(value_len, 5000);
    let capacity = scratch.capacity();
    let view = BatchView::new(&second).unwrap();
    let record = view.records(&mut scratch).unwrap().next().unwrap().unwrap();
    assert_eq!(record.value, Some(&b"small"[..]));
    assert_eq!(
        scratch.capacity(),
        capacity,
        "no reallocation for a smaller batch"
    );
}
