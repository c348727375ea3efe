//! A property test: any sequence of appends, markers, high-watermark moves and head
//! truncations keeps the producer state's invariants.

use proptest::prelude::*;

use super::*;

/// One step of the property test.
#[derive(Debug, Clone)]
enum Op {
    /// A data batch of `records` records from producer `pid`, in or out of sequence.
    Data {
        pid: i64,
        records: i64,
        transactional: bool,
        in_sequence: bool,
    },
    /// A marker for producer `pid`.
    Marker { pid: i64, abort: bool },
    /// The high watermark moves `by` offsets towards the log end.
    HighWatermark { by: i64 },
    /// The log start moves up to the high watermark.
    TruncateHead,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..4i64, 1..4i64, any::<bool>(), prop::bool::weighted(0.9)).prop_map(
            |(pid, records, transactional, in_sequence)| Op::Data {
                pid,
                records,
                transactional,
                in_sequence,
            }
        ),
        2 => (0..4i64, any::<bool>()).prop_map(|(pid, abort)| Op::Marker { pid, abort }),
        2 => (0..20i64).prop_map(|by| Op::HighWatermark { by }),
        1 => Just(Op::TruncateHead),
    ]
}

proptest! {
    /// Any mix of appends, markers, high-watermark moves and head truncations keeps the
    /// invariants: LSO ≤ HW, the first unstable offset is the lowest first offset of the open
    /// transactions and the ended ones whose marker is not below the HW (checked against a
    /// model), at most 5 batches per producer, and a refused batch changes nothing.
    #[test]
    fn producer_state_invariants_hold_for_any_sequence_of_appends_and_markers(
        ops in prop::collection::vec(op(), 1..80)
    ) {
        let mut m = manager();
        let mut log_end = 0i64;
        let mut high_watermark = 0i64;
        let mut log_start = 0i64;
        let mut next_seq = [0i32; 4];
        // The model: open transactions (pid → first offset), ended ones (first, marker).
        let mut open: [Option<i64>; 4] = [None; 4];
        let mut ended: Vec<(i64, i64)> = Vec::new();
        for op in ops {
            match op {
                Op::Data { pid, records, transactional, in_sequence } => {
                    let slot = usize::try_from(pid).unwrap();
                    let seq = if in_sequence { next_seq[slot] } else { next_seq[slot] + 7 };
                    let batch = data(pid, 0, seq, log_end, log_end + records - 1, NOW, transactional);
                    let before = format!("{m:?}");
                    match m.analyze(&batch, AppendOrigin::Client) {
                        Ok(ProducerAppendCheck::Append(info)) => {
                            prop_assert!(open[slot].is_none() || transactional);
                            log_end += records;
                            prop_assert!(m.commit(info, log_end).is_empty());
                            next_seq[slot] = seq + i32::try_from(records).unwrap();
                            if transactional && open[slot].is_none() {
                                open[slot] = Some(batch.first_offset);
                            }
                        }
                        Ok(ProducerAppendCheck::Duplicate { .. }) => {
                            prop_assert_eq!(format!("{m:?}"), before);
                        }
                        Err(_) => prop_assert_eq!(format!("{m:?}"), before),
                    }
                }
                Op::Marker { pid, abort } => {
                    let slot = usize::try_from(pid).unwrap();
                    let batch = marker(pid, 0, log_end, abort, 0, NOW);
                    let ProducerAppendCheck::Append(info) =
                        m.analyze(&batch, AppendOrigin::Coordinator).unwrap()
                    else {
                        panic!("a marker is never a duplicate");
                    };
                    log_end += 1;
                    let finished = m.commit(info, log_end);
                    match open[slot].take() {
                        Some(first) => {
                            prop_assert_eq!(finished.len(), 1);
                            let txn = finished[0].txn;
                            prop_assert_eq!((txn.first_offset, txn.last_offset), (first, log_end - 1));
                            let other_open = open.iter().flatten().min().copied();
                            prop_assert_eq!(
                                finished[0].last_stable_offset,
                                other_open.unwrap_or(log_end)
                            );
                            ended.push((first, log_end - 1));
                        }
                        None => prop_assert!(finished.is_empty()),
                    }
                }
                Op::HighWatermark { by } => {
                    high_watermark = (high_watermark + by).min(log_end);
                    m.on_high_watermark_updated(high_watermark);
                    ended.retain(|&(_, marker)| marker >= high_watermark);
                }
                Op::TruncateHead => {
                    log_start = high_watermark;
                    let producers = m.entries().len();
                    m.on_log_start_incremented(log_start);
                    ended.retain(|&(_, marker)| marker >= log_start);
                    // A start move forgets no producer (KIP-360): only expiration does.
                    prop_assert_eq!(m.entries().len(), producers);
                }
            }
            let expected_fuo = open
                .iter()
                .flatten()
                .copied()
                .chain(ended.iter().map(|&(first, _)| first))
                .min();
            prop_assert_eq!(m.first_unstable_offset(), expected_fuo);
            let lso = m.lso(high_watermark, log_start);
            prop_assert!(lso <= high_watermark.max(log_start));
            prop_assert!(lso >= log_start);
            prop_assert_eq!(
                lso,
                expected_fuo.map_or(high_watermark, |fuo| fuo.min(high_watermark)).max(log_start)
            );
            // A high watermark at the log end that nobody announced yet: ended transactions
            // with a marker below it no longer count.
            let unannounced = open
                .iter()
                .flatten()
                .copied()
                .chain(ended.iter().filter(|&&(_, marker)| marker >= log_end).map(|&(first, _)| first))
                .min();
            prop_assert_eq!(
                m.lso(log_end, log_start),
                unannounced.map_or(log_end, |fuo| fuo.min(log_end)).max(log_start)
            );
            for (_, e) in m.entries() {
                prop_assert!(e.batches.len() <= NUM_BATCHES_TO_RETAIN);
            }
            prop_assert_eq!(m.map_end_offset(), log_end.max(log_start));
        }
    }
}
