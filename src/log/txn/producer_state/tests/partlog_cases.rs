//! partlog's own cases: the integration's API (commit, replay, snapshot view, truncation), KIP-890
//! registration, and input from files.

use super::*;

#[test]
fn producer_state_take_snapshot_only_when_the_map_moved() {
    // Kafka's testTakeSnapshot and testSkipSnapshotIfOffsetUnchanged, at the manager level:
    // the file is the integration's, the decision is the manager's.
    let mut m = manager();
    assert!(
        !m.needs_snapshot(),
        "an empty map at the log start needs no snapshot"
    );
    append_client_entry(&mut m, PRODUCER_ID, EPOCH, 0, 0, false).unwrap();
    append_client_entry(&mut m, PRODUCER_ID, EPOCH, 1, 1, false).unwrap();
    assert!(m.needs_snapshot());
    assert_eq!(m.map_end_offset(), 2);
    m.snapshot_written(m.map_end_offset());
    assert!(
        !m.needs_snapshot(),
        "nothing changed: no second snapshot at 2"
    );
    assert_eq!(m.last_snapshot_offset(), 2);
    let entries = m.entries();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].0, PRODUCER_ID);
}

#[test]
fn producer_state_entries_are_sorted_and_reload_keeps_only_the_newest_batch() {
    let mut m = manager();
    for pid in [9, 3, 7] {
        for seq in 0..3 {
            let offset = m.map_end_offset();
            append_client_entry(&mut m, pid, EPOCH, seq, offset, false).unwrap();
        }
    }
    let pids: Vec<i64> = m.entries().iter().map(|&(pid, _)| pid).collect();
    assert_eq!(pids, vec![3, 7, 9]);
    assert_eq!(entry(&m, 3).batches.len(), 3);

    let mut reloaded = manager();
    reloaded.load_entries(snapshot_round_trip(&m), m.map_end_offset(), NOW);
    assert_eq!(reloaded.map_end_offset(), 9);
    assert!(!reloaded.needs_snapshot());
    // After a reload, only the newest batch of each producer is recognised as a duplicate.
    let newest = data(3, EPOCH, 2, 5, 5, NOW, false);
    assert!(matches!(
        reloaded.analyze(&newest, AppendOrigin::Client).unwrap(),
        ProducerAppendCheck::Duplicate {
            first_offset: 5,
            last_offset: 5
        }
    ));
    let older = data(3, EPOCH, 1, 9, 9, NOW, false);
    assert_eq!(
        kafka_code(reloaded.analyze(&older, AppendOrigin::Client)),
        45
    );
    // Replaying more batches rebuilds the window.
    let next = data(3, EPOCH, 3, 9, 9, NOW, false);
    reloaded.replay(&next).unwrap();
    assert!(matches!(
        reloaded.analyze(&newest, AppendOrigin::Client).unwrap(),
        ProducerAppendCheck::Duplicate { .. }
    ));
}

#[test]
fn producer_state_refuses_a_batch_without_a_producer_id() {
    let mut m = manager();
    let batch = data(-1, -1, -1, 0, 0, NOW, false);
    assert!(matches!(
        m.analyze(&batch, AppendOrigin::Client),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(matches!(
        m.replay(&batch),
        Err(Error::InvalidArgument { .. })
    ));
    assert_eq!(m.producer_count(), 0);
    assert_eq!(m.map_end_offset(), 0);
}

#[test]
fn producer_state_batch_summary_from_header() {
    use crate::format::{BatchHeader, ControlRecordType, EndTransactionMarker};
    let header = BatchHeader {
        base_offset: 2000,
        batch_length: 0,
        partition_leader_epoch: 0,
        magic: 2,
        crc: 0,
        attributes: 0x10,
        last_offset_delta: 20,
        base_timestamp: 5,
        max_timestamp: 9,
        producer_id: 7,
        producer_epoch: 3,
        base_sequence: i32::MAX - 10,
        records_count: 21,
    };
    let summary = BatchSummary::from_header(&header, None).unwrap();
    assert_eq!(summary.kind, BatchKind::Data);
    assert!(summary.is_transactional);
    assert_eq!((summary.first_offset, summary.last_offset), (2000, 2020));
    assert_eq!(
        (summary.base_sequence, summary.last_sequence),
        (i32::MAX - 10, 9)
    );
    assert_eq!(summary.timestamp, 9);

    let control = BatchHeader {
        attributes: 0x30,
        last_offset_delta: 0,
        base_sequence: -1,
        records_count: 1,
        ..header
    };
    let abort = (
        ControlRecordType::Abort,
        EndTransactionMarker {
            coordinator_epoch: 4,
        },
    );
    let summary = BatchSummary::from_header(&control, Some(abort)).unwrap();
    assert_eq!(
        summary.kind,
        BatchKind::Marker {
            is_abort: true,
            coordinator_epoch: 4
        }
    );
    let emptied = BatchSummary::from_header(&control, None).unwrap();
    assert_eq!(emptied.kind, BatchKind::EmptyControl);
    let leader_change = (ControlRecordType::LeaderChange, abort.1);
    assert_eq!(
        kafka_code(BatchSummary::from_header(&control, Some(leader_change))),
        2
    );
}

#[test]
fn producer_state_verification_refuses_a_late_write_after_the_marker() {
    let mut log = LeaderLog::new(config(true));
    let pid = 5;
    log.state.register_transaction(pid, 0, NOW);
    log.append(pid, 0, 0, 1, true, AppendOrigin::Client)
        .unwrap();
    // The registration is used up by the first write; later writes of the open transaction
    // need none.
    log.append(pid, 0, 1, 1, true, AppendOrigin::Client)
        .unwrap();
    let mut info = log.state.prepare_update(pid, AppendOrigin::Coordinator);
    info.append(&marker(pid, 0, 2, true, 0, NOW)).unwrap();
    log.state.commit(info, 3);
    log.log_end_offset = 3;
    // A late write of the aborted transaction would open a transaction no marker closes.
    assert_eq!(
        kafka_code(log.append(pid, 0, 2, 1, true, AppendOrigin::Client)),
        48
    );
    // Replication keeps what the leader wrote.
    log.append(pid, 0, 2, 1, true, AppendOrigin::Replication)
        .unwrap();
    // Registrations expire as producers do.
    log.state.register_transaction(7, 0, NOW);
    log.state.remove_expired_producers(NOW + EXPIRATION_MS);
    assert_eq!(
        kafka_code(log.append(7, 0, 0, 1, true, AppendOrigin::Client)),
        48
    );
}

#[test]
fn producer_state_commit_reports_the_txn_index_entry() {
    // Producer 1000's aborted transaction ends at 106 while another producer's, opened at 100,
    // is still open: its `.txnindex` entry's lastStableOffset is 100.
    let mut m = ProducerStateManager::new(config(false), 100);
    m.replay(&data(2000, 0, 0, 100, 100, NOW, true)).unwrap();
    m.replay(&data(1000, 0, 0, 101, 105, NOW, true)).unwrap();
    let finished = m.replay(&marker(1000, 0, 106, true, 0, NOW)).unwrap();
    assert_eq!(
        finished,
        vec![FinishedTxn {
            txn: CompletedTxn {
                producer_id: 1000,
                first_offset: 101,
                last_offset: 106,
                is_aborted: true
            },
            last_stable_offset: 100
        }]
    );
    let finished = m.replay(&marker(2000, 0, 107, true, 0, NOW)).unwrap();
    assert_eq!(
        finished[0].last_stable_offset, 108,
        "no other open txn: marker + 1"
    );
    assert_eq!(m.map_end_offset(), 108);
}

#[test]
fn producer_state_failed_validation_leaves_the_state_untouched() {
    let mut m = manager();
    append_client_entry(&mut m, PRODUCER_ID, EPOCH, 0, 0, true).unwrap();
    let before = format!("{m:?}");
    assert!(
        m.analyze(
            &data(PRODUCER_ID, EPOCH, 1, 1, 1, NOW, false),
            AppendOrigin::Client
        )
        .is_err()
    );
    assert!(
        m.replay(&data(PRODUCER_ID, EPOCH, 1, 1, 1, NOW, false))
            .is_err()
    );
    // An analysis whose write never happens is simply dropped.
    let _ = m
        .analyze(
            &data(PRODUCER_ID, EPOCH, 1, 1, 1, NOW, true),
            AppendOrigin::Client,
        )
        .unwrap();
    assert_eq!(format!("{m:?}"), before);
}

/// Issue 29, item 5: a move of the log start forgets no producer (Kafka's
/// `onLogStartOffsetIncremented`, KIP-360): one whose data lies wholly below it keeps its
/// sequence, its epoch and its duplicate window until it expires.
#[test]
fn producer_state_a_log_start_move_keeps_every_producer_until_it_expires() {
    let mut m = manager();
    append_client_entry(&mut m, 1, EPOCH, 0, 0, false).unwrap();
    append_client_entry(&mut m, 2, EPOCH, 0, 1, true).unwrap();
    append_client_entry(&mut m, 3, EPOCH, 0, 2, false).unwrap();
    append_client_entry(&mut m, 4, EPOCH, 0, 3, false).unwrap();
    append_end_txn_marker(&mut m, 4, EPOCH + 1, true, 4, 0).unwrap();
    append_client_entry(&mut m, 5, EPOCH, 0, 5, true).unwrap();
    append_end_txn_marker(&mut m, 5, EPOCH, true, 6, 0).unwrap();
    m.on_log_start_incremented(3);
    for producer_id in 1..=5 {
        assert!(
            m.last_entry(producer_id).is_some(),
            "producer {producer_id}"
        );
    }
    assert_eq!(
        m.first_unstable_offset(),
        Some(1),
        "pid 2's open transaction"
    );
    assert_eq!(m.lso(7, 3), 3, "the LSO is never below the log start");
    // Producer 1's data is below the start, and its sequence still counts: a gap is refused,
    // a re-send of its batch is a duplicate with the original offsets, the next one follows.
    assert_eq!(
        kafka_code(append_client_entry(&mut m, 1, EPOCH, 42, 7, false)),
        45
    );
    let resend = m
        .analyze(&data(1, EPOCH, 0, 9, 9, NOW, false), AppendOrigin::Client)
        .unwrap();
    assert!(matches!(
        resend,
        ProducerAppendCheck::Duplicate {
            first_offset: 0,
            last_offset: 0
        }
    ));
    append_client_entry(&mut m, 1, EPOCH, 1, 7, false).unwrap();
    m.on_log_start_incremented(7);
    assert_eq!(
        m.first_unstable_offset(),
        Some(1),
        "the open transaction holds the LSO"
    );
    assert_eq!(m.map_end_offset(), 8);
    // Expiration is what forgets them (not pid 2, whose transaction is open).
    m.remove_expired_producers(NOW + EXPIRATION_MS);
    let left: Vec<i64> = m.entries().into_iter().map(|(pid, _)| pid).collect();
    assert_eq!(left, [2]);
}

#[test]
fn producer_state_truncate_fully_forgets_everything() {
    let mut m = manager();
    append_client_entry(&mut m, 1, EPOCH, 0, 0, true).unwrap();
    append_end_txn_marker(&mut m, 1, EPOCH, false, 1, 0).unwrap();
    append_client_entry(&mut m, 2, EPOCH, 0, 2, true).unwrap();
    m.truncate_fully(50);
    assert_eq!(m.producer_count(), 0);
    assert_eq!(m.first_unstable_offset(), None);
    assert_eq!(m.map_end_offset(), 50);
    assert!(!m.needs_reload(50));
    assert!(m.needs_reload(51));
}

#[test]
fn producer_state_load_entries_reopens_transactions() {
    let mut m = manager();
    m.load_entries(
        [
            (
                1,
                ProducerStateEntry::from_snapshot(0, 4, 10, 4, NOW, 0, -1),
            ),
            (
                2,
                ProducerStateEntry::from_snapshot(3, -1, -1, 0, NOW, 5, 12),
            ),
            // A damaged snapshot that lists a producer twice: the later entry wins.
            (
                3,
                ProducerStateEntry::from_snapshot(0, 0, 14, 0, NOW, 0, 14),
            ),
            (
                3,
                ProducerStateEntry::from_snapshot(0, 1, 15, 0, NOW, 0, -1),
            ),
        ],
        18,
        NOW,
    );
    assert_eq!(m.map_end_offset(), 18);
    assert_eq!(m.first_unstable_offset(), Some(12));
    let first = entry(&m, 1);
    assert_eq!((first.first_seq(), first.last_seq()), (0, 4));
    assert_eq!(
        (first.first_data_offset(), first.last_data_offset()),
        (6, 10)
    );
    let second = entry(&m, 2);
    assert!(second.is_empty());
    assert_eq!(second.coordinator_epoch, 5);
    assert_eq!(second.current_txn_first_offset, Some(12));
    assert_eq!(m.lso(18, 0), 12);
    let finished = m.replay(&marker(2, 3, 18, true, 5, NOW)).unwrap();
    assert_eq!(finished[0].txn.first_offset, 12);
    m.on_high_watermark_updated(19);
    assert_eq!(
        m.first_unstable_offset(),
        None,
        "producer 3's dropped entry left no txn behind"
    );
}

#[test]
fn producer_state_marker_from_snapshot_of_any_values_never_panics() {
    // A snapshot entry is file data: odd sequences and deltas must not overflow.
    let odd = ProducerStateEntry::from_snapshot(0, -1, 5, i32::MAX, NOW, 0, -1);
    let _ = odd.first_seq();
    let _ = odd.first_data_offset();
    let odd = ProducerStateEntry::from_snapshot(0, i32::MIN, 0, i32::MAX, NOW, 0, -1);
    let _ = odd.first_seq();
    let _ = odd.first_data_offset();
}

/// The broker fixture's files, written by a Kafka 4.4 broker.
const FIXTURE_LOG: &[u8] = include_bytes!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/broker/partlog-fixture-0/00000000000000000000.log"
));
const FIXTURE_SNAPSHOT: &[u8] = include_bytes!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/broker/partlog-fixture-0/00000000000000000018.snapshot"
));
const FIXTURE_TXN_INDEX: &[u8] = include_bytes!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/broker/partlog-fixture-0/00000000000000000000.txnindex"
));

fn be_i16(bytes: &[u8], at: usize) -> i16 {
    i16::from_be_bytes(bytes[at..at + 2].try_into().unwrap())
}

fn be_i32(bytes: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(bytes[at..at + 4].try_into().unwrap())
}

fn be_i64(bytes: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(bytes[at..at + 8].try_into().unwrap())
}

/// The fields of a 46-byte snapshot entry: (pid, epoch, lastSeq, lastOffset, offsetDelta,
/// timestamp, coordinatorEpoch, currentTxnFirstOffset).
type SnapshotFields = (i64, i16, i32, i64, i32, i64, i32, i64);

/// The broker's snapshot entries, checked against the file's CRC.
fn broker_snapshot_entries() -> Vec<SnapshotFields> {
    let bytes = FIXTURE_SNAPSHOT;
    assert_eq!(be_i16(bytes, 0), 1, "ProducerSnapshot version 1");
    let crc = u32::from_be_bytes(bytes[2..6].try_into().unwrap());
    assert_eq!(crc, crate::format::crc32c(&bytes[6..]));
    let count = usize::try_from(be_i32(bytes, 6)).unwrap();
    assert_eq!(bytes.len(), 10 + 46 * count);
    (0..count)
        .map(|i| {
            let e = &bytes[10 + 46 * i..];
            (
                be_i64(e, 0),
                be_i16(e, 8),
                be_i32(e, 10),
                be_i64(e, 14),
                be_i32(e, 22),
                be_i64(e, 26),
                be_i32(e, 34),
                be_i64(e, 38),
            )
        })
        .collect()
}

/// Replays every batch of the broker-written log with REPLICATION rules, as recovery will.
fn replay_fixture(m: &mut ProducerStateManager) -> Vec<FinishedTxn> {
    use crate::format::{BatchIter, EndTransactionMarker, control_record_type};
    let mut finished = Vec::new();
    let mut scratch = Vec::new();
    for (_, view) in BatchIter::new(FIXTURE_LOG) {
        let view = view.unwrap();
        let header = *view.header();
        if !header.has_producer_id() {
            continue;
        }
        let control = if header.is_control() {
            let record = view.records(&mut scratch).unwrap().next();
            record.map(|record| {
                let record = record.unwrap();
                (
                    control_record_type(&record).unwrap(),
                    EndTransactionMarker::parse(&record).unwrap(),
                )
            })
        } else {
            None
        };
        let batch = BatchSummary::from_header(&header, control).unwrap();
        finished.extend(m.replay(&batch).unwrap());
    }
    finished
}

#[test]
fn producer_state_replay_of_the_broker_fixture_equals_the_broker_snapshot() {
    let mut m = manager();
    let finished = replay_fixture(&mut m);
    assert_eq!(m.map_end_offset(), 18, "the broker's snapshot is at 18");
    let ours: Vec<_> = m
        .entries()
        .into_iter()
        .map(|(pid, e)| {
            (
                pid,
                e.producer_epoch,
                e.last_seq(),
                e.last_data_offset(),
                e.last_offset_delta(),
                e.last_timestamp,
                e.coordinator_epoch,
                e.current_txn_first_offset.unwrap_or(-1),
            )
        })
        .collect();
    let broker = broker_snapshot_entries();
    assert_eq!(ours, broker);
    assert_eq!(broker[0].0, 0, "pid 0");
    assert_eq!(
        (broker[0].1, broker[0].2, broker[0].3, broker[0].4),
        (0, 4, 10, 4)
    );
    assert_eq!(
        (broker[1].0, broker[1].6),
        (1, 0),
        "pid 1, coordinator epoch 0"
    );

    // The one aborted transaction is the broker's `.txnindex` entry.
    let aborted: Vec<_> = finished.iter().filter(|f| f.txn.is_aborted).collect();
    assert_eq!(aborted.len(), 1);
    assert_eq!(FIXTURE_TXN_INDEX.len(), 34);
    assert_eq!(be_i16(FIXTURE_TXN_INDEX, 0), 0);
    assert_eq!(
        (
            aborted[0].txn.producer_id,
            aborted[0].txn.first_offset,
            aborted[0].txn.last_offset,
            aborted[0].last_stable_offset
        ),
        (
            be_i64(FIXTURE_TXN_INDEX, 2),
            be_i64(FIXTURE_TXN_INDEX, 10),
            be_i64(FIXTURE_TXN_INDEX, 18),
            be_i64(FIXTURE_TXN_INDEX, 26)
        )
    );
    assert_eq!(m.first_undecided_offset(), None);
    assert_eq!(
        m.lso(18, 0),
        18,
        "every transaction of the fixture has ended"
    );
    assert_eq!(m.lso(17, 0), 15, "until the HW passes the ABORT at 17");
    m.on_high_watermark_updated(18);
    assert_eq!(m.first_unstable_offset(), None);
}

#[test]
fn producer_state_load_of_the_broker_snapshot_equals_the_replay() {
    let mut replayed = manager();
    replay_fixture(&mut replayed);
    let mut loaded = manager();
    let entries = broker_snapshot_entries().into_iter().map(
        |(pid, epoch, last_seq, last_offset, delta, timestamp, coordinator_epoch, txn)| {
            (
                pid,
                ProducerStateEntry::from_snapshot(
                    epoch,
                    last_seq,
                    last_offset,
                    delta,
                    timestamp,
                    coordinator_epoch,
                    txn,
                ),
            )
        },
    );
    // On the fixture's own clock, at its older producer's last write: neither is idle for a day.
    let now = broker_snapshot_entries()[0].5;
    loaded.load_entries(entries, 18, now);
    assert_eq!(loaded.map_end_offset(), 18);
    assert_eq!(snapshot_round_trip(&loaded), snapshot_round_trip(&replayed));
}

#[test]
fn producer_state_config_comes_from_the_log_config() {
    let config = crate::LogConfig::builder()
        .producer_id_expiration_ms(1234)
        .transaction_partition_verification_enable(true)
        .build()
        .unwrap();
    assert_eq!(
        ProducerStateConfig::from_log_config(&config),
        ProducerStateConfig {
            producer_id_expiration_ms: 1234,
            transaction_verification_enabled: true
        }
    );
    let defaults = ProducerStateConfig::from_log_config(&crate::LogConfig::default());
    assert_eq!(defaults, config_with_defaults());
}

fn config_with_defaults() -> ProducerStateConfig {
    ProducerStateConfig {
        producer_id_expiration_ms: 86_400_000,
        transaction_verification_enabled: false,
    }
}

#[test]
fn the_batch_window_keeps_the_newest_five_in_order_across_the_ring_wrapping() {
    use crate::log::txn::producer_state::entry::{BatchMetadata, RecentBatches};
    let batch = |last_seq: i32| BatchMetadata {
        last_seq,
        last_offset: i64::from(last_seq) * 10,
        offset_delta: 0,
        timestamp: NOW,
    };
    let mut window = RecentBatches::new();
    assert!(window.is_empty() && window.front().is_none() && window.back().is_none());
    for pushed in 0..13 {
        window.push_back(batch(pushed));
        let kept: Vec<i32> = window.iter().map(|b| b.last_seq).collect();
        let first = (pushed + 1 - NUM_BATCHES_TO_RETAIN as i32).max(0);
        assert_eq!(
            kept,
            (first..=pushed).collect::<Vec<_>>(),
            "after pushing {pushed}"
        );
        assert_eq!(window.front().map(|b| b.last_seq), Some(first));
        assert_eq!(window.back().map(|b| b.last_seq), Some(pushed));
    }
    // Two windows of the same batches are equal whatever slot each starts at.
    let mut fresh = RecentBatches::new();
    for pushed in 8..13 {
        fresh.push_back(batch(pushed));
    }
    assert_eq!(window, fresh);
    fresh.push_back(batch(13));
    assert_ne!(window, fresh);
    window.clear();
    assert!(window.is_empty() && window.iter().next().is_none());
    assert_ne!(window, fresh);
    // A cleared ring holding one batch equals the inline form of that batch.
    window.push_back(batch(20));
    let mut inline = RecentBatches::new();
    inline.push_back(batch(20));
    assert_eq!(window, inline);
    assert_eq!(window.len(), 1);
    // The entry stays small: a snapshot of many producers is a table of them.
    assert!(std::mem::size_of::<ProducerStateEntry>() <= 64);
}

#[test]
fn a_loaded_snapshot_builds_its_table_on_first_use_with_the_open_transactions_known_at_once() {
    // Entries with repeated producer ids (a damaged snapshot), open transactions and expired
    // producers, from a fixed pseudo-random sequence.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |bound: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % bound
    };
    let mut entries = Vec::new();
    for offset in 0..400i64 {
        let producer_id = next(60) as i64;
        let idle = if next(4) == 0 { EXPIRATION_MS } else { 0 };
        let open_txn = if next(3) == 0 { offset } else { -1 };
        entries.push((
            producer_id,
            ProducerStateEntry::from_snapshot(0, 0, offset, 0, NOW - idle, 0, open_txn),
        ));
    }
    // The model: entries applied one by one, the later winning, the expired skipped.
    let mut model: HashMap<i64, &ProducerStateEntry> = HashMap::new();
    for (producer_id, entry) in &entries {
        let expired =
            entry.current_txn_first_offset.is_none() && NOW - entry.last_timestamp >= EXPIRATION_MS;
        if !expired {
            model.insert(*producer_id, entry);
        }
    }
    let first_unstable = model
        .values()
        .filter_map(|entry| entry.current_txn_first_offset)
        .min();

    let mut m = manager();
    m.load_entries(entries.clone(), 400, NOW);
    assert!(m.producers.table.get().is_none(), "not built by the load");
    assert_eq!(m.first_unstable_offset(), first_unstable);
    assert_eq!(m.lso(400, 0), first_unstable.unwrap_or(400));
    assert!(m.producers.table.get().is_none(), "not built by the LSO");
    assert_eq!(m.producer_count(), model.len());
    for (producer_id, expected) in &model {
        assert_eq!(
            m.last_entry(*producer_id),
            Some(*expected),
            "producer {producer_id}"
        );
    }
    // A change after the build lets the snapshot's bytes go.
    m.remove_expired_producers(NOW);
    assert!(m.producers.pending.is_none());
    assert_eq!(m.producer_count(), model.len());
}

/// Issue 29, item 5: a snapshot loads every producer it holds that has not expired, whatever
/// the log start: the live log kept them when the start moved, so the reopened one does too.
#[test]
fn a_snapshot_loads_producers_whose_data_lies_below_the_log_start() {
    let entries: Vec<_> = [
        // Data wholly below any start past 4.
        (1, ProducerStateEntry::from_snapshot(0, 2, 4, 2, NOW, 0, -1)),
        (
            2,
            ProducerStateEntry::from_snapshot(0, 0, 10, 0, NOW, 0, -1),
        ),
        // An open transaction.
        (3, ProducerStateEntry::from_snapshot(0, 0, 5, 0, NOW, 0, 5)),
        // No data of its epoch (its last write a marker): its epoch still fences.
        (
            4,
            ProducerStateEntry::from_snapshot(3, -1, -1, 0, NOW, 7, -1),
        ),
    ]
    .into_iter()
    .map(|(producer_id, entry)| {
        crate::log::txn::producer_state::snapshot_entry_of(producer_id, &entry)
    })
    .collect();
    let bytes = crate::log::files::producer_snapshot::encode_snapshot(&entries);
    let snapshot = CheckedSnapshot::check(std::path::Path::new("test.snapshot"), bytes).unwrap();
    let mut m = manager();
    m.load_snapshot(snapshot, 12, NOW);
    assert_eq!(m.first_unstable_offset(), Some(5));
    assert_eq!(
        m.last_entry(1)
            .map(|e| (e.last_seq(), e.last_data_offset())),
        Some((2, 4))
    );
    assert!(m.last_entry(2).is_some());
    assert_eq!(
        m.last_entry(3).and_then(|e| e.current_txn_first_offset),
        Some(5)
    );
    assert_eq!(m.last_entry(4).map(|e| e.producer_epoch), Some(3));
    // Producer 1 goes on from its sequence: a re-send of its last batch is a duplicate.
    let resend = m
        .analyze(&data(1, 0, 0, 12, 14, NOW, false), AppendOrigin::Client)
        .unwrap();
    assert!(matches!(
        resend,
        ProducerAppendCheck::Duplicate {
            first_offset: 2,
            last_offset: 4
        }
    ));
    append_client_entry(&mut m, 1, 0, 3, 12, false).unwrap();
}

/// Issue 29, item 1, at the manager: one call's appends of several producers (a follower's),
/// committed at once, end the same transactions with the same `lastStableOffset`s, in batch
/// order, as the same batches replayed one at a time (a leader's appends, recovery). The call
/// is `[txn(1)@0, txn(2)@1, ABORT(2)@2, ABORT(1)@3, txn(3)@5]`, with a plain batch at 4.
#[test]
fn commit_all_of_one_call_ends_transactions_as_one_batch_at_a_time_does() {
    let batches = [
        data(1, EPOCH, 0, 0, 0, NOW, true),
        data(2, EPOCH, 0, 1, 1, NOW, true),
        marker(2, EPOCH, 2, true, 0, NOW),
        marker(1, EPOCH, 3, true, 0, NOW),
        data(3, EPOCH, 0, 5, 5, NOW, true),
    ];
    let mut one_by_one = manager();
    let mut expected = Vec::new();
    for batch in &batches {
        expected.extend(one_by_one.replay(batch).unwrap());
    }
    one_by_one.update_map_end_offset(6);
    let lsos: Vec<(i64, i64)> = expected
        .iter()
        .map(|done| (done.txn.producer_id, done.last_stable_offset))
        .collect();
    // Producer 3's transaction begins after the second ABORT, so it does not count.
    assert_eq!(lsos, [(2, 0), (1, 4)]);

    let mut one_call = manager();
    let mut infos: Vec<ProducerAppendInfo> = Vec::new();
    for batch in &batches {
        match infos
            .iter_mut()
            .find(|info| info.producer_id() == batch.producer_id)
        {
            Some(info) => {
                info.append(batch).unwrap();
            }
            None => {
                let mut info =
                    one_call.prepare_update(batch.producer_id, AppendOrigin::Replication);
                info.append(batch).unwrap();
                infos.push(info);
            }
        }
    }
    assert_eq!(one_call.commit_all(infos, 6), expected);
    assert_eq!(one_call.entries(), one_by_one.entries());
    one_call.on_high_watermark_updated(6);
    one_by_one.on_high_watermark_updated(6);
    assert_eq!(one_call.first_unstable_offset(), Some(5));
    assert_eq!(
        one_call.first_unstable_offset(),
        one_by_one.first_unstable_offset()
    );
}
