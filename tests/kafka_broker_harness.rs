//! The broker harness (`tests/common/broker.rs`) against a real Apache Kafka 4.4 broker, and the
//! broker behaviour the hand-off tests rely on: what a clean and an unclean shutdown leave in
//! the log dir, and which lines the next start logs. Every constant the harness documents for
//! those lines is checked here, so a Kafka upgrade that rewords one fails this test rather than
//! silently weakening a hand-off assertion.
//!
//! Runs only with `PARTLOG_BROKER=1` (`tests/kafka/run.sh`); skipped otherwise.

#[path = "common/broker.rs"]
mod broker;

use std::io::Write;
use std::path::Path;

use broker::{Broker, ClientRecord, Isolation, PartitionLeader, ProduceOptions};

const TOPIC: &str = "harness";
const CRC_TOPIC: &str = "harness-crc";

fn records_to_send() -> Vec<ClientRecord> {
    let mut first = ClientRecord::new(b"k1", b"one");
    first.headers = vec![
        ("h".to_owned(), Some(b"v".to_vec())),
        ("n".to_owned(), None),
    ];
    let mut tombstone = ClientRecord::new(b"k1", b"");
    tombstone.value = None;
    let mut unkeyed = ClientRecord::new(b"", b"three");
    unkeyed.key = None;
    unkeyed.timestamp = Some(1_767_225_600_000);
    vec![first, tombstone, unkeyed]
}

/// The record as the broker should return it: what was sent, with the acked offset and
/// timestamp.
fn same_data(got: &ClientRecord, sent: &ClientRecord) {
    assert_eq!(
        (&got.key, &got.value, &got.headers),
        (&sent.key, &sent.value, &sent.headers)
    );
}

fn assert_has_leader(kafka: &Broker) {
    assert_eq!(
        kafka.leaders(TOPIC),
        [PartitionLeader {
            partition: 0,
            leader: 1,
            isr: vec![1]
        }]
    );
}

fn clean_shutdown_file(log_dir: &Path) -> std::path::PathBuf {
    log_dir.join(".kafka_cleanshutdown")
}

#[test]
fn broker_starts_serves_and_shuts_down_clean_and_unclean() {
    let Some(env) = broker::broker_env() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let mut kafka = Broker::start(env, work.path());
    let log_dir = kafka.log_dir().to_path_buf();
    let partition = kafka.partition_dir(TOPIC, 0);

    // A running broker holds `.lock` and has consumed any clean-shutdown marker.
    assert!(log_dir.join("meta.properties").is_file());
    assert!(
        log_dir.join(".lock").is_file(),
        "a running broker has .lock"
    );
    assert!(!clean_shutdown_file(&log_dir).exists());
    assert!(kafka.answers());

    kafka.create_topic(TOPIC, 1, &[("retention.ms", "-1")]);
    assert_has_leader(&kafka);
    assert!(partition.is_dir());

    let sent = records_to_send();
    let options = ProduceOptions {
        compression: "lz4",
        ..ProduceOptions::default()
    };
    let acked = kafka.produce(TOPIC, 0, &sent, &options);
    assert_eq!(
        acked.iter().map(|r| r.offset).collect::<Vec<_>>(),
        [Some(0), Some(1), Some(2)]
    );
    for (acked, sent) in acked.iter().zip(&sent) {
        same_data(acked, sent);
    }
    assert_eq!(acked[2].timestamp, Some(1_767_225_600_000));

    // A transaction aborted after its records reached the log: read_uncommitted sees them,
    // read_committed does not, and neither sees the ABORT marker.
    let aborted = kafka.produce(
        TOPIC,
        0,
        &[ClientRecord::new(b"t", b"aborted")],
        &ProduceOptions {
            transactional_id: Some("harness-txn"),
            abort: true,
            ..ProduceOptions::default()
        },
    );
    assert_eq!(aborted[0].offset, Some(3));
    let uncommitted = kafka.consume(TOPIC, 0, 0, Isolation::ReadUncommitted);
    assert_eq!(uncommitted.len(), 4, "{uncommitted:#?}");
    assert_eq!(&uncommitted[..3], &acked[..]);
    assert_eq!(uncommitted[3], aborted[0]);
    let committed = kafka.consume(TOPIC, 0, 0, Isolation::ReadCommitted);
    assert_eq!(committed, acked);

    // Clean shutdown: the marker file is written, the lock file removed, the producer state
    // snapshotted, the active segment's index files trimmed to their entries.
    let status = kafka.stop();
    assert!(!kafka.is_running());
    let marker = std::fs::read_to_string(clean_shutdown_file(&log_dir)).unwrap();
    assert!(
        marker.starts_with(r#"{"version":0,"brokerEpoch":"#),
        "{marker:?} (exit status {status})"
    );
    assert!(
        !log_dir.join(".lock").exists(),
        "a clean shutdown deletes .lock"
    );
    // Records 0-3 and the ABORT marker at 4: the snapshot is named by the log end offset.
    assert!(partition.join("00000000000000000005.snapshot").is_file());
    let index_len = std::fs::metadata(partition.join("00000000000000000000.index"))
        .unwrap()
        .len();
    assert!(
        index_len < 1024 && index_len.is_multiple_of(8),
        "untrimmed .index: {index_len}"
    );

    // A start after a clean shutdown: no recovery, no unclean registration.
    kafka.restart();
    assert_eq!(kafka.starts(), 2);
    let log = kafka.server_log();
    assert!(log.contains(broker::CLEAN_LOAD_LINE), "no clean load line");
    for unclean in [
        broker::UNCLEAN_LOAD_LINE,
        broker::UNCLEAN_DIRS_LINE,
        broker::UNCLEAN_REGISTRATION_LINE,
        broker::UNCLEAN_ELECTION_LINE,
    ] {
        assert!(
            !log.contains(unclean),
            "clean restart logged {unclean:?}: {:?}",
            kafka.server_log_lines(unclean)
        );
    }
    // The KRaft metadata log is recovered at every start; a topic partition only after an
    // unclean shutdown.
    let recovering = kafka.server_log_lines(broker::RECOVERING_SEGMENT_LINE);
    assert!(
        recovering
            .iter()
            .all(|line| line.contains("partition=__cluster_metadata-0")),
        "clean restart recovered a topic partition: {recovering:#?}"
    );
    assert!(
        !clean_shutdown_file(&log_dir).exists(),
        "the start consumes the marker"
    );
    assert_has_leader(&kafka);
    assert_eq!(kafka.consume(TOPIC, 0, 0, Isolation::ReadCommitted), acked);

    // SIGKILL: the lock file stays behind (unlocked), and no marker is written.
    kafka.kill();
    assert!(!kafka.is_running());
    assert!(log_dir.join(".lock").exists());
    assert!(!clean_shutdown_file(&log_dir).exists());

    // A start after an unclean shutdown: every log is recovered and the controller handles the
    // unclean registration; the data is all there.
    kafka.restart();
    let log = kafka.server_log();
    for unclean in [
        broker::UNCLEAN_LOAD_LINE,
        broker::UNCLEAN_DIRS_LINE,
        broker::UNCLEAN_REGISTRATION_LINE,
        broker::UNCLEAN_ELECTION_LINE,
    ] {
        assert!(
            log.contains(unclean),
            "unclean restart did not log {unclean:?}"
        );
    }
    assert!(!log.contains(broker::CLEAN_LOAD_LINE));
    let recovering = kafka.server_log_lines(broker::RECOVERING_SEGMENT_LINE);
    assert!(
        recovering
            .iter()
            .any(|line| line.contains(&format!("partition={TOPIC}-0"))),
        "no segment recovery of {TOPIC}-0: {recovering:#?}"
    );
    assert_has_leader(&kafka);
    assert_eq!(kafka.consume(TOPIC, 0, 0, Isolation::ReadCommitted), acked);

    // Torn tails, with the marker set aside, as after a partlog crash. In `harness-0`, the
    // start of a batch whose length runs past the end of the file (a write cut short); in
    // `harness-crc-0`, a complete batch with a wrong CRC. The broker truncates both and serves
    // only the complete batches.
    kafka.create_topic(CRC_TOPIC, 1, &[]);
    let crc_acked = kafka.produce(CRC_TOPIC, 0, &[ClientRecord::new(b"c", b"crc")], &options);
    kafka.stop();
    let segment = partition.join("00000000000000000000.log");
    let crc_segment = kafka
        .partition_dir(CRC_TOPIC, 0)
        .join("00000000000000000000.log");
    let clean_sizes = [&segment, &crc_segment].map(|file| std::fs::metadata(file).unwrap().len());
    let mut cut_short = Vec::new();
    cut_short.extend_from_slice(&5_i64.to_be_bytes()); // baseOffset
    cut_short.extend_from_slice(&1000_i32.to_be_bytes()); // batchLength: past the end
    cut_short.extend_from_slice(&[0; 20]);
    append(&segment, &cut_short);
    let mut bad_crc = Vec::new();
    bad_crc.extend_from_slice(&1_i64.to_be_bytes()); // baseOffset
    bad_crc.extend_from_slice(&49_i32.to_be_bytes()); // batchLength: a 61-byte batch, 0 records
    bad_crc.extend_from_slice(&0_i32.to_be_bytes()); // partitionLeaderEpoch
    bad_crc.push(2); // magic
    bad_crc.extend_from_slice(&0xdead_beef_u32.to_be_bytes()); // crc: wrong
    bad_crc.extend_from_slice(&[0; 40]);
    assert_eq!(bad_crc.len(), 61);
    append(&crc_segment, &bad_crc);
    std::fs::remove_file(clean_shutdown_file(&log_dir)).unwrap();

    kafka.restart();
    let truncated = kafka.server_log_lines(broker::TRUNCATED_LINE);
    let truncated_in = |file: &Path, bytes: usize| {
        truncated.iter().any(|line| {
            line.contains(&format!("Truncated {bytes} invalid bytes"))
                && line.contains(file.to_str().unwrap())
        })
    };
    assert!(truncated_in(&segment, 32), "{truncated:#?}");
    assert!(truncated_in(&crc_segment, 61), "{truncated:#?}");
    let invalid = kafka.server_log_lines(broker::INVALID_MESSAGES_LINE);
    assert_eq!(
        invalid.len(),
        1,
        "only the bad CRC is invalid: {invalid:#?}"
    );
    assert!(invalid[0].contains(crc_segment.to_str().unwrap()));
    let sizes = [&segment, &crc_segment].map(|file| std::fs::metadata(file).unwrap().len());
    assert_eq!(sizes, clean_sizes);
    assert_eq!(kafka.consume(TOPIC, 0, 0, Isolation::ReadCommitted), acked);
    assert_eq!(
        kafka.consume(CRC_TOPIC, 0, 0, Isolation::ReadCommitted),
        crc_acked
    );
    kafka.stop();

    // Another process's lock on `.lock` (here a POSIX record lock, which conflicts with Kafka's
    // `FileChannel.tryLock` as an OFD lock does): the broker refuses to start.
    let lock_file = std::fs::File::create(log_dir.join(".lock")).unwrap();
    rustix::fs::fcntl_lock(
        &lock_file,
        rustix::fs::FlockOperation::NonBlockingLockExclusive,
    )
    .unwrap();
    let exited = kafka
        .try_restart()
        .expect_err("the broker started on a locked log dir");
    assert!(
        kafka.server_log().contains(broker::LOCK_FAILED_LINE),
        "{exited:?}"
    );
    assert!(!exited.status.success());
    drop(lock_file);
}

fn append(file: &Path, bytes: &[u8]) {
    let mut file = std::fs::OpenOptions::new().append(true).open(file).unwrap();
    file.write_all(bytes).unwrap();
}
