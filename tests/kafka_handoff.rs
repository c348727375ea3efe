//! The hand-off to a real Apache Kafka 4.4 broker (FORMAT.md §2, ARCHITECTURE.md §7): a
//! partition that Kafka created, appended to by partlog while the broker is stopped, then served
//! again by the broker.
//!
//! The procedure: create the topic in Kafka, stop the broker (cleanly), `Log::open` the partition
//! directory `<log dir>/<topic>-0`, append, `close`, restart the broker. The tests check the
//! contract of ARCHITECTURE.md §7, "Opening inside a Kafka log dir", against the broker itself:
//! - while the broker runs, opening its partition for writing fails with `Error::Locked` and
//!   creates nothing, and while partlog writes, the broker cannot start (the OFD lock on `.lock`
//!   conflicts with the broker's `FileChannel.tryLock`);
//! - after a clean hand-off the broker starts as after its own clean shutdown (the clean-load
//!   line; no recovery of the log dir, no unclean registration), the partition has a leader, and a
//!   real consumer reads the broker's records and partlog's, with their offsets, keys, values,
//!   headers and timestamps, in `read_uncommitted` and `read_committed`; the broker's own
//!   appends go on from partlog's log end offset;
//! - Kafka's loader leaves `partlog.lock`, `partlog.checkpoint`, `partlog.properties` (the
//!   settings stored with the log, here the topic's own `max.message.bytes`) and the log dir's
//!   `.kafka_cleanshutdown.partlog` alone, byte for byte, and warns about none of them;
//! - a partition directory that partlog created on its own is not adopted: Kafka's metadata
//!   knows no such topic, so the broker renames the directory a stray and serves nothing of it;
//! - after partlog is killed mid-append (a copy of this test binary, SIGKILLed), the marker stays
//!   aside, the broker recovers the log dir and truncates the torn tail instead of serving it,
//!   and a consumer reads every record partlog acknowledged and nothing past the tear.
//!
//! **Leader epochs.** Every batch a bare log appends carries `partitionLeaderEpoch` -1, Kafka's
//! `NO_PARTITION_LEADER_EPOCH`, even a producer's batch that came with an epoch (a Kafka leader
//! overwrites it with its own). The broker needs no epoch from partlog: its epoch cache
//! (`leader-epoch-checkpoint`) is loaded from the file, a recovery adds an entry only for a batch
//! whose epoch is >= 0 and above the latest, and when the broker becomes leader again it starts a
//! new epoch at its log end offset, which is partlog's. So partlog's records fall in the last
//! epoch before the hand-off, and consumers read them. The clean hand-off test asserts exactly
//! that. An epoch passed through would instead enter the cache at the broker's next recovery, as
//! an election that never happened. A log opened as the leader of a new epoch
//! (`Log::become_leader`) stamps that epoch instead and records it in `leader-epoch-checkpoint`,
//! which the restarted broker accepts: the `leader_epoch_` test.
//!
//! Runs only with `PARTLOG_BROKER=1` (`tests/kafka/run.sh`); skipped otherwise, with the reason
//! printed. Each test starts its own broker (about 5 s, and 4 s a restart).

#[path = "common/broker.rs"]
mod broker;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use broker::{Broker, ClientRecord, Isolation, PartitionLeader, ProduceOptions};
use partlog::{
    BatchBuilder, BatchHeader, BatchView, Compression, ControlRecordType, Error, FlushPolicy, Log,
    LogConfig, LogRecord, NewRecord, ReadBound,
};

const TOPIC: &str = "handoff";
const CRASH_TOPIC: &str = "handoff-crash";
const TXN_TOPIC: &str = "handoff-txn";
const LEADER_EPOCH_TOPIC: &str = "handoff-leader-epoch";
/// partlog's producer ids in the transactions test: far above the blocks of 1,000 that the
/// broker's controller hands out from 0, so that they never meet an id the broker allocates
/// (docs/kafka-handoff.md, "Producer ids belong to the broker").
const PARTLOG_PIDS: [i64; 2] = [1 << 40, (1 << 40) + 1];
const MARKER: &str = ".kafka_cleanshutdown";
const SET_ASIDE: &str = ".kafka_cleanshutdown.partlog";
const PARTLOG_LOCK: &str = "partlog.lock";
const PARTLOG_CHECKPOINT: &str = "partlog.checkpoint";
const PARTLOG_PROPERTIES: &str = "partlog.properties";
/// The topic's `max.message.bytes`, given to the broker and to partlog alike: a setting that
/// differs from partlog's default, so that partlog stores it in `partlog.properties`.
const MAX_MESSAGE_BYTES: &str = "2097164";
/// A partition directory partlog creates without Kafka: topic `stranger`, which Kafka's metadata
/// never heard of.
const STRANGER_DIR: &str = "stranger-0";
/// Logged (WARN) by the broker's LogManager for a log whose topic its metadata does not know:
/// `Log in <dir> marked stray and renamed to <dir>.<uuid>-stray`.
const STRAY_LINE: &str = "marked stray and renamed to";
const LEADER_EPOCH_CHECKPOINT: &str = "leader-epoch-checkpoint";
/// The partition's one segment: Kafka's `segment.bytes` and partlog's are both 1 GiB.
const SEGMENT: &str = "00000000000000000000.log";
/// Record timestamps: fixed, so that consumers' timestamps can be compared exactly. The topics
/// keep data forever (`retention.ms=-1`), so their age does not matter.
const T0: i64 = 1_767_225_600_000;
/// Set in the child copy of this binary: the partition directory it appends to until killed.
const CHILD_DIR_VAR: &str = "PARTLOG_HANDOFF_CHILD_WRITER";
/// What the child prints after each acknowledged (durable) append: `ACKED <offset>`.
const ACKED: &str = "ACKED ";
/// How many acknowledged appends the parent waits for before it kills the child.
const ACKS_BEFORE_KILL: usize = 100;

/// partlog's settings for a Kafka partition: the topic's configs, and every append fsynced (the
/// acknowledgement the crash test counts on).
fn config() -> LogConfig {
    LogConfig::builder()
        .flush_policy(FlushPolicy::EveryAppend)
        .set("max.message.bytes", MAX_MESSAGE_BYTES)
        .unwrap()
        .build()
        .unwrap()
}

fn topic_configs() -> [(&'static str, &'static str); 2] {
    [
        ("retention.ms", "-1"),
        ("max.message.bytes", MAX_MESSAGE_BYTES),
    ]
}

/// What the broker is given before the hand-off: keys, a null key, a tombstone, headers with a
/// null value; sent as one lz4 batch.
fn records_for_the_broker() -> Vec<ClientRecord> {
    let mut first = ClientRecord::new(b"user-1", b"signed up");
    first.timestamp = Some(T0);
    first.headers = vec![
        ("source".to_owned(), Some(b"kafka".to_vec())),
        ("trace".to_owned(), None),
    ];
    let mut tombstone = ClientRecord::new(b"user-1", b"");
    tombstone.timestamp = Some(T0 + 1);
    tombstone.value = None;
    let mut unkeyed = ClientRecord::new(b"", b"no key");
    unkeyed.timestamp = Some(T0 + 2);
    unkeyed.key = None;
    vec![first, tombstone, unkeyed]
}

/// A record as a consumer returns it: the comparison form for everything read back.
fn client_record(
    offset: i64,
    timestamp: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: Vec<(String, Option<Vec<u8>>)>,
) -> ClientRecord {
    ClientRecord {
        offset: Some(offset),
        timestamp: Some(timestamp),
        key: key.map(<[u8]>::to_vec),
        value: value.map(<[u8]>::to_vec),
        headers,
    }
}

fn from_partlog(record: &LogRecord) -> ClientRecord {
    client_record(
        record.offset,
        record.timestamp,
        record.key.as_deref(),
        record.value.as_deref(),
        record.headers.clone(),
    )
}

fn expected_from(offset: i64, record: &NewRecord) -> ClientRecord {
    client_record(
        offset,
        record.timestamp,
        record.key.as_deref(),
        record.value.as_deref(),
        record.headers.clone(),
    )
}

fn read_all(log: &Log) -> Vec<ClientRecord> {
    log.records(log.log_start_offset(), ReadBound::LogEnd)
        .map(|record| from_partlog(&record.unwrap()))
        .collect()
}

/// The contents of `dir/name`, or `None` if there is no such file.
fn read(dir: &Path, name: &str) -> Option<Vec<u8>> {
    match std::fs::read(dir.join(name)) {
        Ok(bytes) => Some(bytes),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        Err(error) => panic!("reading {name} in {}: {error}", dir.display()),
    }
}

/// Every file of a directory with its bytes (subdirectories by name only).
fn dir_contents(dir: &Path) -> BTreeMap<String, Option<Vec<u8>>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            let name = entry.file_name().into_string().unwrap();
            let bytes = entry
                .file_type()
                .unwrap()
                .is_file()
                .then(|| std::fs::read(entry.path()).unwrap());
            (name, bytes)
        })
        .collect()
}

/// Kafka's own files of a partition directory, which partlog must leave as they are: the
/// producer-state snapshots, `leader-epoch-checkpoint` and `partition.metadata`.
fn kafka_metadata_files(partition: &Path) -> BTreeMap<String, Option<Vec<u8>>> {
    dir_contents(partition)
        .into_iter()
        .filter(|(name, _)| {
            name.ends_with(".snapshot")
                || name == LEADER_EPOCH_CHECKPOINT
                || name == "partition.metadata"
        })
        .collect()
}

/// The entries `(epoch, start offset)` of a `leader-epoch-checkpoint` (version 0: a version
/// line, a count line, then one `epoch offset` line per entry).
fn leader_epochs(partition: &Path) -> Vec<(i32, i64)> {
    let text = String::from_utf8(read(partition, LEADER_EPOCH_CHECKPOINT).unwrap()).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("0"), "version of {text:?}");
    let count: usize = lines.next().unwrap().parse().unwrap();
    let entries: Vec<(i32, i64)> = lines
        .map(|line| {
            let (epoch, offset) = line.split_once(' ').unwrap();
            (epoch.parse().unwrap(), offset.parse().unwrap())
        })
        .collect();
    assert_eq!(entries.len(), count, "{text:?}");
    entries
}

/// The whole, CRC-valid batches at the start of a segment file, and the byte position where
/// they end: what a recovery keeps.
fn whole_batches(segment: &[u8]) -> (Vec<BatchHeader>, usize) {
    let mut headers = Vec::new();
    let mut position = 0;
    while let Some(header) = segment
        .get(position..)
        .and_then(|rest| BatchHeader::parse(rest).ok())
    {
        let end = position + header.total_size();
        let whole = segment
            .get(position..end)
            .is_some_and(|bytes| BatchView::new(bytes).is_ok());
        if !whole {
            break;
        }
        headers.push(header);
        position = end;
    }
    (headers, position)
}

fn assert_logged(kafka: &Broker, needle: &str) {
    assert!(
        kafka.server_log().contains(needle),
        "the broker did not log {needle:?}; its log ends:\n{}",
        kafka.server_log_tail(40)
    );
}

fn assert_not_logged(kafka: &Broker, needle: &str) {
    let lines = kafka.server_log_lines(needle);
    assert!(lines.is_empty(), "the broker logged {needle:?}: {lines:#?}");
}

/// The WARN and ERROR lines of the current start that mention `needle`.
fn warnings_about(kafka: &Broker, needle: &str) -> Vec<String> {
    kafka
        .server_log_lines(needle)
        .into_iter()
        .filter(|line| line.contains(" WARN ") || line.contains(" ERROR "))
        .collect()
}

fn assert_has_leader(kafka: &Broker, topic: &str) {
    assert_eq!(
        kafka.leaders(topic),
        [PartitionLeader {
            partition: 0,
            leader: 1,
            isr: vec![1]
        }]
    );
}

/// A consumer reads exactly `expected` from offset 0, in both isolation levels (there are no
/// transactions, so both see everything).
fn assert_consumed(kafka: &Broker, topic: &str, expected: &[ClientRecord]) {
    for isolation in [Isolation::ReadUncommitted, Isolation::ReadCommitted] {
        let consumed = kafka.consume(topic, 0, 0, isolation);
        assert_eq!(consumed, expected, "{isolation:?}");
    }
}

/// Contract points 1, 2 and 4 on one broker: the lock while it runs, the clean hand-off, and
/// partlog's files after the broker ran on the directory; then the hand-back to partlog.
#[test]
fn a_clean_hand_off_is_served_by_the_restarted_broker_which_leaves_partlogs_files_alone() {
    let Some(env) = broker::broker_env() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let mut kafka = Broker::start(env, work.path());
    let log_dir = kafka.log_dir().to_path_buf();
    let partition = kafka.partition_dir(TOPIC, 0);

    // 1. Create the topic in Kafka, and produce with a real client.
    kafka.create_topic(TOPIC, 1, &topic_configs());
    let lz4 = ProduceOptions {
        compression: "lz4",
        ..ProduceOptions::default()
    };
    let from_broker = kafka.produce(TOPIC, 0, &records_for_the_broker(), &lz4);
    assert_eq!(
        from_broker.iter().map(|r| r.offset).collect::<Vec<_>>(),
        [Some(0), Some(1), Some(2)]
    );

    // While the broker runs, partlog may not write: the open fails before it creates anything.
    let partition_before = dir_contents(&partition);
    let log_dir_before: Vec<String> = dir_contents(&log_dir).into_keys().collect();
    let refused = Log::open(&partition, config());
    assert!(
        matches!(refused, Err(Error::Locked { ref path, .. }) if path.ends_with(".lock")),
        "{refused:?}"
    );
    assert_eq!(read(&partition, PARTLOG_LOCK), None);
    assert_eq!(read(&partition, PARTLOG_CHECKPOINT), None);
    assert_eq!(read(&partition, PARTLOG_PROPERTIES), None);
    assert_eq!(dir_contents(&partition), partition_before);
    assert_eq!(
        dir_contents(&log_dir).into_keys().collect::<Vec<_>>(),
        log_dir_before
    );

    // 2. Stop the broker: it writes the clean-shutdown marker and releases `.lock`.
    kafka.stop();
    let marker = read(&log_dir, MARKER).expect("a clean shutdown writes the marker");
    let epochs_before = leader_epochs(&partition);
    let last_epoch_before = epochs_before.last().unwrap().0;
    let kafka_files_before = kafka_metadata_files(&partition);

    // 3. Append with partlog. The open sets the marker aside and reads the broker's records.
    let log = Log::open(&partition, config()).unwrap();
    assert_eq!(read(&log_dir, MARKER), None);
    assert_eq!(read(&log_dir, SET_ASIDE).as_ref(), Some(&marker));
    assert_eq!(read_all(&log), from_broker);
    assert_eq!(log.log_end_offset(), 3);

    // One batch built by `append`, and one built as a producer builds it (zstd, through
    // `append_batch`), carrying an epoch this broker never had (from another cluster, say). Both
    // are stored with no leader epoch (-1): partlog leads no epoch, and must not pass one on.
    let appended = [
        NewRecord::new(T0 + 10, Some(b"user-2"), Some(b"written by partlog"))
            .with_header("source", Some(b"partlog")),
        NewRecord::new(T0 + 11, Some(b"user-2"), None),
    ];
    let info = log.append(&appended).unwrap();
    assert_eq!((info.first_offset, info.last_offset), (3, 4));
    let produced = [
        NewRecord::new(T0 + 12, None, Some(b"batch from a producer")),
        NewRecord::new(T0 + 13, Some(b"user-3"), Some(&[0, 255, 7][..])),
        NewRecord::new(T0 + 14, Some(b"user-3"), Some(b"last")).with_header("n", None),
    ];
    let mut builder =
        BatchBuilder::new(Compression::Zstd).partition_leader_epoch(last_epoch_before + 7);
    for record in &produced {
        builder.push(record);
    }
    let info = log.append_batch(&builder.build().unwrap()).unwrap();
    assert_eq!((info.first_offset, info.last_offset), (5, 7));
    let partlog_end = log.log_end_offset();
    let from_partlog: Vec<ClientRecord> = appended
        .iter()
        .chain(&produced)
        .zip(3..)
        .map(|(record, offset)| expected_from(offset, record))
        .collect();

    // 4. Close: the marker goes back unchanged and the lock is released.
    log.close().unwrap();
    assert_eq!(read(&log_dir, MARKER).as_ref(), Some(&marker));
    assert_eq!(read(&log_dir, SET_ASIDE), None);
    let partlog_lock = read(&partition, PARTLOG_LOCK).expect("partlog.lock");
    let partlog_checkpoint = read(&partition, PARTLOG_CHECKPOINT).expect("partlog.checkpoint");
    let partlog_properties = read(&partition, PARTLOG_PROPERTIES).expect("partlog.properties");
    assert!(
        String::from_utf8_lossy(&partlog_properties)
            .contains(&format!("\nmax.message.bytes={MAX_MESSAGE_BYTES}\n")),
        "{}",
        String::from_utf8_lossy(&partlog_properties)
    );
    // The broker's files are untouched; partlog's close added the producer snapshot at its log
    // end, as a broker's clean shutdown does (empty: partlog appended no producer's batch).
    let mut kafka_files_after = kafka_metadata_files(&partition);
    let partlog_snapshot = kafka_files_after
        .remove(&format!("{partlog_end:020}.snapshot"))
        .flatten()
        .expect("partlog's close writes the snapshot at its log end");
    assert_eq!(partlog_snapshot.len(), 10, "version, CRC and a count of 0");
    assert_eq!(
        (&partlog_snapshot[..2], &partlog_snapshot[6..]),
        (&[0, 1][..], &[0; 4][..])
    );
    assert_eq!(kafka_files_after, kafka_files_before);
    let segment = std::fs::read(partition.join(SEGMENT)).unwrap();
    let (batches, valid_end) = whole_batches(&segment);
    assert_eq!(valid_end, segment.len());
    let epochs_on_disk: Vec<(i64, i32)> = batches
        .iter()
        .map(|batch| (batch.base_offset, batch.partition_leader_epoch))
        .collect();
    assert_eq!(
        epochs_on_disk,
        [(0, last_epoch_before), (3, -1), (5, -1)],
        "the broker's batch carries its epoch, partlog's carry none"
    );

    // Meanwhile, a partition partlog creates on its own in the broker's log dir: Kafka's metadata
    // knows no such topic, so the broker will not adopt it.
    let stranger = Log::open(log_dir.join(STRANGER_DIR), config()).unwrap();
    stranger
        .append(&[NewRecord::new(T0, None, Some(b"unknown to Kafka"))])
        .unwrap();
    stranger.close().unwrap();

    // 5. Restart the broker: it loads the log dir as after its own clean shutdown.
    kafka.restart();
    assert_logged(&kafka, broker::CLEAN_LOAD_LINE);
    for unclean in [
        broker::UNCLEAN_LOAD_LINE,
        broker::UNCLEAN_DIRS_LINE,
        broker::UNCLEAN_REGISTRATION_LINE,
        broker::UNCLEAN_ELECTION_LINE,
    ] {
        assert_not_logged(&kafka, unclean);
    }
    let recovered_segments: Vec<String> = kafka
        .server_log_lines(broker::RECOVERING_SEGMENT_LINE)
        .into_iter()
        .filter(|line| line.contains(&format!("partition={TOPIC}-0")))
        .collect();
    assert!(recovered_segments.is_empty(), "{recovered_segments:#?}");
    assert_eq!(
        read(&log_dir, MARKER),
        None,
        "the start consumes the marker"
    );
    assert_eq!(read(&log_dir, SET_ASIDE), None);
    assert_has_leader(&kafka, TOPIC);

    // The stranger is a stray to the broker: renamed out of the way, its data not served.
    assert!(!log_dir.join(STRANGER_DIR).exists());
    let strays: Vec<String> = dir_contents(&log_dir)
        .into_keys()
        .filter(|name| name.starts_with(&format!("{STRANGER_DIR}.")) && name.ends_with("-stray"))
        .collect();
    assert_eq!(strays.len(), 1, "{:?}", dir_contents(&log_dir).keys());
    let stray_lines = kafka.server_log_lines(STRAY_LINE);
    assert!(
        stray_lines.len() == 1 && stray_lines[0].contains(STRANGER_DIR),
        "{stray_lines:#?}"
    );

    // A real consumer reads the broker's records and partlog's through the broker.
    let mut expected: Vec<ClientRecord> = from_broker.clone();
    expected.extend(from_partlog.iter().cloned());
    assert_consumed(&kafka, TOPIC, &expected);

    // The broker's own appends go on from partlog's log end offset.
    let mut more = ClientRecord::new(b"user-4", b"after the hand-off");
    more.timestamp = Some(T0 + 20);
    let after = kafka.produce(TOPIC, 0, &[more.clone(), more], &lz4);
    assert_eq!(
        after.iter().map(|r| r.offset).collect::<Vec<_>>(),
        [Some(partlog_end), Some(partlog_end + 1)]
    );
    expected.extend(after.iter().cloned());
    assert_consumed(&kafka, TOPIC, &expected);

    // The broker needed no epoch from partlog: it kept its epochs and started its new one at
    // partlog's log end offset, so partlog's records belong to the epoch before the hand-off.
    let epochs_after = leader_epochs(&partition);
    assert_eq!(epochs_after[..epochs_before.len()], epochs_before[..]);
    let new_epochs = &epochs_after[epochs_before.len()..];
    assert!(
        !new_epochs.is_empty()
            && new_epochs
                .iter()
                .all(|&(epoch, start)| epoch > last_epoch_before && start == partlog_end),
        "{epochs_after:?}"
    );
    let segment = std::fs::read(partition.join(SEGMENT)).unwrap();
    let (batches, _) = whole_batches(&segment);
    let newest = batches.last().unwrap();
    assert_eq!(newest.base_offset, partlog_end);
    assert_eq!(
        newest.partition_leader_epoch,
        epochs_after.last().unwrap().0
    );

    // Kafka's loader left partlog's files alone, and said nothing about them.
    assert_eq!(read(&partition, PARTLOG_LOCK), Some(partlog_lock.clone()));
    assert_eq!(
        read(&partition, PARTLOG_CHECKPOINT),
        Some(partlog_checkpoint.clone())
    );
    assert_eq!(
        read(&partition, PARTLOG_PROPERTIES),
        Some(partlog_properties.clone())
    );
    for name in [
        PARTLOG_LOCK,
        PARTLOG_CHECKPOINT,
        PARTLOG_PROPERTIES,
        SET_ASIDE,
    ] {
        assert_eq!(warnings_about(&kafka, name), Vec::<String>::new());
    }
    let about_the_partition = warnings_about(&kafka, &format!("{TOPIC}-0"));
    assert!(about_the_partition.is_empty(), "{about_the_partition:#?}");

    // Stopped again, the broker still has not touched them.
    kafka.stop();
    assert_eq!(read(&partition, PARTLOG_LOCK), Some(partlog_lock));
    assert_eq!(
        read(&partition, PARTLOG_CHECKPOINT),
        Some(partlog_checkpoint)
    );
    assert_eq!(
        read(&partition, PARTLOG_PROPERTIES),
        Some(partlog_properties)
    );
    let marker = read(&log_dir, MARKER).expect("a clean shutdown writes the marker");

    // And back to partlog: its checkpoint no longer matches the directory (the broker
    // appended), so it recovers from its recovery point instead of trusting it, and reads all.
    let log = Log::open(&partition, config()).unwrap();
    assert!(!log.recovery_report().clean_shutdown);
    assert_eq!(read_all(&log), expected);
    assert_eq!(log.log_end_offset(), partlog_end + 2);
    log.close().unwrap();
    assert_eq!(read(&log_dir, MARKER), Some(marker));
}

/// Not a test on its own: the child role of
/// [`a_partlog_crash_mid_append_makes_the_broker_recover_and_cut_the_torn_tail`]. Started with
/// [`CHILD_DIR_VAR`] set, it appends to that partition one durable record at a time, printing
/// each acknowledged offset, until it is killed; without it, it returns at once.
#[test]
fn child_process_role_partlog_writer_killed_mid_append() {
    let Some(dir) = std::env::var_os(CHILD_DIR_VAR) else {
        return;
    };
    let log = Log::open(PathBuf::from(dir), config()).unwrap();
    let mut stdout = std::io::stdout();
    for _ in 0..1_000_000 {
        let offset = log.log_end_offset();
        let info = log.append(&[crash_record(offset)]).unwrap();
        assert_eq!(info.first_offset, offset);
        // EveryAppend: the record is durable now. A parent that went away ends the child
        // without closing the log, as a crash would.
        if writeln!(stdout, "{ACKED}{offset}")
            .and_then(|()| stdout.flush())
            .is_err()
        {
            std::process::exit(1);
        }
    }
    // Never reached in a passing run: the parent kills the child long before.
    std::process::exit(2);
}

/// The offset of an `ACKED <offset>` line of the child. The test harness prints its own
/// `test <name> ... ` in front of the first one.
fn acked_offset(line: &str) -> Option<i64> {
    let (_, offset) = line.trim_end().split_once(ACKED)?;
    Some(offset.parse().unwrap())
}

/// The record the crashing writer appends at `offset`.
fn crash_record(offset: i64) -> NewRecord {
    let value = format!("appended by partlog at {offset}");
    NewRecord::new(T0 + offset, Some(b"crash"), Some(value.as_bytes()))
}

/// Contract point 3: partlog killed mid-append leaves the marker aside, and the broker
/// recovers, truncating the torn tail rather than serving it. Also the other side of point 1:
/// while partlog writes, the broker cannot start.
#[test]
fn a_partlog_crash_mid_append_makes_the_broker_recover_and_cut_the_torn_tail() {
    let Some(env) = broker::broker_env() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let mut kafka = Broker::start(env, work.path());
    let log_dir = kafka.log_dir().to_path_buf();
    let partition = kafka.partition_dir(CRASH_TOPIC, 0);
    kafka.create_topic(CRASH_TOPIC, 1, &topic_configs());
    let from_broker = kafka.produce(
        CRASH_TOPIC,
        0,
        &records_for_the_broker(),
        &ProduceOptions::default(),
    );
    let broker_end = i64::try_from(from_broker.len()).unwrap();
    kafka.stop();
    let marker = read(&log_dir, MARKER).expect("a clean shutdown writes the marker");

    // partlog appends durably in another process, which is killed mid-append.
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_process_role_partlog_writer_killed_mid_append",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DIR_VAR, &partition)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut acked = Vec::new();
    let mut line = String::new();
    while acked.len() < ACKS_BEFORE_KILL {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the writer exited after {} acknowledgements",
            acked.len()
        );
        if let Some(offset) = acked_offset(&line) {
            acked.push(offset);
        }
    }
    // While partlog writes, the broker cannot start: partlog's lock on `.lock` keeps it out.
    let refused = kafka
        .try_restart()
        .expect_err("the broker started while partlog was writing");
    assert!(!refused.status.success());
    assert_logged(&kafka, broker::LOCK_FAILED_LINE);
    assert_eq!(read(&log_dir, MARKER), None);

    child.kill().unwrap(); // SIGKILL: no close, no destructor, mid-append.
    assert!(!child.wait().unwrap().success());
    // What it printed before it died was acknowledged too.
    for line in out.lines() {
        if let Some(offset) = acked_offset(&line.unwrap()) {
            acked.push(offset);
        }
    }
    let expected_acks: Vec<i64> = (broker_end..broker_end + acked.len() as i64).collect();
    assert_eq!(acked, expected_acks);
    let last_acked = *acked.last().unwrap();

    // The crash left the marker aside and partlog's files in place.
    assert_eq!(read(&log_dir, MARKER), None);
    assert_eq!(read(&log_dir, SET_ASIDE).as_ref(), Some(&marker));
    let partlog_lock = read(&partition, PARTLOG_LOCK).expect("partlog.lock");
    let partlog_checkpoint = read(&partition, PARTLOG_CHECKPOINT).expect("partlog.checkpoint");
    let partlog_properties = read(&partition, PARTLOG_PROPERTIES).expect("partlog.properties");

    // Make the torn tail certain: the first half of the next batch, as a write cut short leaves
    // it. Everything up to the last whole batch is what a recovery must keep.
    let segment_path = partition.join(SEGMENT);
    let segment = std::fs::read(&segment_path).unwrap();
    let (batches, valid_end) = whole_batches(&segment);
    let recovered_end = batches.last().unwrap().next_offset();
    assert!(recovered_end > last_acked, "an acknowledged record is torn");
    let mut builder = BatchBuilder::new(Compression::None).base_offset(recovered_end);
    builder.push(&NewRecord::new(T0, Some(b"torn"), Some(&[b'x'; 300][..])));
    let torn_batch = builder.build().unwrap();
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&segment_path)
        .unwrap();
    file.write_all(&torn_batch[..torn_batch.len() / 2]).unwrap();
    drop(file);
    let torn_bytes = segment.len() - valid_end + torn_batch.len() / 2;

    // The broker finds no marker: it recovers the log dir and cuts the tail.
    kafka.restart();
    for unclean in [
        broker::UNCLEAN_LOAD_LINE,
        broker::UNCLEAN_DIRS_LINE,
        broker::UNCLEAN_REGISTRATION_LINE,
    ] {
        assert_logged(&kafka, unclean);
    }
    assert_not_logged(&kafka, broker::CLEAN_LOAD_LINE);
    let recovered_segments = kafka.server_log_lines(broker::RECOVERING_SEGMENT_LINE);
    assert!(
        recovered_segments
            .iter()
            .any(|line| line.contains(&format!("partition={CRASH_TOPIC}-0"))),
        "{recovered_segments:#?}"
    );
    let truncated = kafka.server_log_lines(broker::TRUNCATED_LINE);
    assert!(
        truncated.iter().any(|line| {
            line.contains(&format!("Truncated {torn_bytes} invalid bytes"))
                && line.contains(segment_path.to_str().unwrap())
        }),
        "expected {torn_bytes} bytes cut from {}: {truncated:#?}",
        segment_path.display()
    );
    assert_eq!(
        std::fs::metadata(&segment_path).unwrap().len(),
        valid_end as u64
    );
    assert_has_leader(&kafka, CRASH_TOPIC);

    // A consumer reads every acknowledged record, and nothing past the tear.
    let mut expected = from_broker;
    expected.extend(
        (broker_end..recovered_end).map(|offset| expected_from(offset, &crash_record(offset))),
    );
    assert_consumed(&kafka, CRASH_TOPIC, &expected);
    let next = kafka.produce(
        CRASH_TOPIC,
        0,
        &[ClientRecord::new(b"after", b"the crash")],
        &ProduceOptions::default(),
    );
    assert_eq!(next[0].offset, Some(recovered_end));

    // The broker's recovery left partlog's files and the set-aside marker alone.
    assert_eq!(read(&partition, PARTLOG_LOCK), Some(partlog_lock));
    assert_eq!(
        read(&partition, PARTLOG_CHECKPOINT),
        Some(partlog_checkpoint)
    );
    assert_eq!(
        read(&partition, PARTLOG_PROPERTIES),
        Some(partlog_properties)
    );
    assert_eq!(read(&log_dir, SET_ASIDE), Some(marker));
    for name in [
        PARTLOG_LOCK,
        PARTLOG_CHECKPOINT,
        PARTLOG_PROPERTIES,
        SET_ASIDE,
    ] {
        assert_eq!(warnings_about(&kafka, name), Vec::<String>::new());
    }
}

/// Transactions both ways: the broker writes a committed and an aborted transaction (and a
/// record outside any), partlog opens the partition, writes its own transactions with its own
/// producer ids (one committed, one aborted, interleaved with a plain record) and closes
/// cleanly; the restarted broker loads partlog's producer snapshot without a word, and a
/// `read_committed` consumer reads exactly the committed records of both writers.
#[test]
fn transactions_of_the_broker_and_of_partlog_are_served_read_committed_after_a_hand_off() {
    let Some(env) = broker::broker_env() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let mut kafka = Broker::start(env, work.path());
    let partition = kafka.partition_dir(TXN_TOPIC, 0);
    kafka.create_topic(TXN_TOPIC, 1, &topic_configs());
    let record = |key: &[u8], value: &[u8], at: i64| {
        let mut record = ClientRecord::new(key, value);
        record.timestamp = Some(T0 + at);
        record
    };
    let transaction = |abort| ProduceOptions {
        transactional_id: Some("broker-txn"),
        abort,
        ..ProduceOptions::default()
    };
    let committed = kafka.produce(
        TXN_TOPIC,
        0,
        &[
            record(b"b", b"broker committed 1", 0),
            record(b"b", b"broker committed 2", 1),
        ],
        &transaction(false),
    );
    let aborted = kafka.produce(
        TXN_TOPIC,
        0,
        &[record(b"b", b"broker aborted", 2)],
        &transaction(true),
    );
    let plain = kafka.produce(
        TXN_TOPIC,
        0,
        &[record(b"b", b"broker plain", 3)],
        &ProduceOptions::default(),
    );
    let mut expected_committed: Vec<ClientRecord> =
        committed.iter().chain(&plain).cloned().collect();
    let mut expected_all: Vec<ClientRecord> = committed
        .iter()
        .chain(&aborted)
        .chain(&plain)
        .cloned()
        .collect();
    kafka.stop();

    // partlog reads the broker's transactions as a read_committed consumer does.
    let log = Log::open(&partition, config()).unwrap();
    let committed_by_partlog = |log: &Log| -> Vec<ClientRecord> {
        log.committed_records(log.log_start_offset(), ReadBound::LogEnd)
            .map(|record| from_partlog(&record.unwrap()))
            .collect()
    };
    assert_eq!(committed_by_partlog(&log), expected_committed);
    assert_eq!(read_all(&log), expected_all);
    assert_eq!(log.first_unstable_offset(), None);
    let broker_pids: Vec<i64> = log
        .active_producers()
        .iter()
        .map(|p| p.producer_id)
        .collect();
    assert!(
        !broker_pids.is_empty(),
        "the broker's producer state was loaded"
    );
    assert!(
        broker_pids.iter().all(|pid| !PARTLOG_PIDS.contains(pid)),
        "{broker_pids:?}"
    );

    // partlog's transactions: the first is committed, the second aborted, a plain record
    // between them.
    let [kept, dropped] = PARTLOG_PIDS;
    let batch = |pid: i64, values: &[&str], at: i64| {
        let records: Vec<NewRecord> = values
            .iter()
            .zip(at..)
            .map(|(value, at)| NewRecord::new(T0 + at, Some(b"p"), Some(value.as_bytes())))
            .collect();
        let mut builder = BatchBuilder::new(Compression::None)
            .producer(pid, 0, 0)
            .transactional(true);
        for record in &records {
            builder.push(record);
        }
        (builder.build().unwrap(), records)
    };
    let (kept_batch, kept_records) =
        batch(kept, &["partlog committed 1", "partlog committed 2"], 10);
    let (dropped_batch, dropped_records) = batch(dropped, &["partlog aborted"], 12);
    let kept_info = log.append_batch(&kept_batch).unwrap();
    let dropped_info = log.append_batch(&dropped_batch).unwrap();
    let plain_record = NewRecord::new(T0 + 13, Some(b"p"), Some(b"partlog plain"));
    let plain_info = log.append(std::slice::from_ref(&plain_record)).unwrap();
    log.append_marker(dropped, 0, ControlRecordType::Abort, 0)
        .unwrap();
    log.append_marker(kept, 0, ControlRecordType::Commit, 0)
        .unwrap();
    let from = |offset: i64, records: &[NewRecord]| -> Vec<ClientRecord> {
        records
            .iter()
            .zip(offset..)
            .map(|(record, offset)| expected_from(offset, record))
            .collect()
    };
    let kept_expected = from(kept_info.first_offset, &kept_records);
    let dropped_expected = from(dropped_info.first_offset, &dropped_records);
    let plain_expected = from(plain_info.first_offset, std::slice::from_ref(&plain_record));
    expected_committed.extend(kept_expected.iter().chain(&plain_expected).cloned());
    expected_all.extend(
        kept_expected
            .iter()
            .chain(&dropped_expected)
            .chain(&plain_expected)
            .cloned(),
    );
    assert_eq!(committed_by_partlog(&log), expected_committed);
    assert_eq!(log.first_unstable_offset(), None);
    let partlog_end = log.log_end_offset();
    log.close().unwrap();

    // The broker loads the log as after its own clean shutdown, producer snapshot included.
    kafka.restart();
    assert_logged(&kafka, broker::CLEAN_LOAD_LINE);
    assert_not_logged(&kafka, broker::UNCLEAN_LOAD_LINE);
    let recovered_segments: Vec<String> = kafka
        .server_log_lines(broker::RECOVERING_SEGMENT_LINE)
        .into_iter()
        .filter(|line| line.contains(&format!("partition={TXN_TOPIC}-0")))
        .collect();
    assert!(recovered_segments.is_empty(), "{recovered_segments:#?}");
    for needle in ["snapshot", "Snapshot", "corrupt", &format!("{TXN_TOPIC}-0")] {
        assert_eq!(
            warnings_about(&kafka, needle),
            Vec::<String>::new(),
            "{needle}"
        );
    }
    assert_has_leader(&kafka, TXN_TOPIC);
    assert_eq!(
        kafka.consume(TXN_TOPIC, 0, 0, Isolation::ReadCommitted),
        expected_committed
    );
    assert_eq!(
        kafka.consume(TXN_TOPIC, 0, 0, Isolation::ReadUncommitted),
        expected_all
    );
    // The broker's own transactions go on after partlog's markers.
    let after = kafka.produce(
        TXN_TOPIC,
        0,
        &[record(b"b", b"broker after the hand-off", 20)],
        &transaction(false),
    );
    assert!(after[0].offset.is_some_and(|offset| offset >= partlog_end));
    expected_committed.extend(after);
    assert_eq!(
        kafka.consume(TXN_TOPIC, 0, 0, Isolation::ReadCommitted),
        expected_committed
    );
}

/// Issue 16's hand-off as a leader: partlog opens the broker's partition as the leader of the
/// broker's latest epoch + 1 (as a controller would have elected it), appends, and closes. Every
/// batch it wrote carries that epoch, `leader-epoch-checkpoint` gains `(epoch, first offset)` in
/// Kafka's text format, and the restarted broker loads the file without a word about it, serves
/// the records, and starts its own next epoch after partlog's.
#[test]
fn leader_epoch_hand_off_as_the_broker_epochs_next_leader_is_accepted_and_served() {
    let Some(env) = broker::broker_env() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let mut kafka = Broker::start(env, work.path());
    let partition = kafka.partition_dir(LEADER_EPOCH_TOPIC, 0);
    kafka.create_topic(LEADER_EPOCH_TOPIC, 1, &topic_configs());
    let from_broker = kafka.produce(
        LEADER_EPOCH_TOPIC,
        0,
        &records_for_the_broker(),
        &ProduceOptions::default(),
    );
    kafka.stop();
    let epochs_before = leader_epochs(&partition);
    let broker_epoch = epochs_before.last().unwrap().0;
    let our_epoch = broker_epoch + 1;

    let log = Log::open(&partition, config()).unwrap();
    let start = log.log_end_offset();
    assert_eq!(start, 3);
    let before: Vec<_> = epochs_before
        .iter()
        .map(|&(e, s)| partlog::EpochEntry::new(e, s))
        .collect();
    assert_eq!(log.leader_epoch_entries(), before);
    log.become_leader(our_epoch).unwrap();
    assert_eq!(
        log.end_offset_for_epoch(broker_epoch),
        (broker_epoch, start)
    );
    assert_eq!(log.end_offset_for_epoch(our_epoch), (our_epoch, start));
    let appended = [
        NewRecord::new(T0 + 10, Some(b"user-5"), Some(b"written by the new leader")),
        NewRecord::new(T0 + 11, None, Some(b"second")),
    ];
    log.append(&appended).unwrap();
    let mut builder = BatchBuilder::new(Compression::Zstd).partition_leader_epoch(99);
    let produced = [NewRecord::new(
        T0 + 12,
        Some(b"user-6"),
        Some(b"a producer's batch"),
    )];
    builder.push(&produced[0]);
    log.append_batch(&builder.build().unwrap()).unwrap();
    let partlog_end = log.log_end_offset();
    log.close().unwrap();

    let mut expected_epochs = epochs_before.clone();
    expected_epochs.push((our_epoch, start));
    assert_eq!(leader_epochs(&partition), expected_epochs);
    let segment = std::fs::read(partition.join(SEGMENT)).unwrap();
    let (batches, _) = whole_batches(&segment);
    let stamped: Vec<(i64, i32)> = batches
        .iter()
        .map(|batch| (batch.base_offset, batch.partition_leader_epoch))
        .collect();
    assert_eq!(
        stamped,
        [(0, broker_epoch), (3, our_epoch), (5, our_epoch)],
        "partlog stamps its epoch over the producer's"
    );

    kafka.restart();
    assert_logged(&kafka, broker::CLEAN_LOAD_LINE);
    for needle in [
        LEADER_EPOCH_CHECKPOINT,
        "caused truncation of conflicting entries",
    ] {
        assert_eq!(warnings_about(&kafka, needle), Vec::<String>::new());
    }
    assert_not_logged(&kafka, "caused truncation of conflicting entries");
    let about_the_partition = warnings_about(&kafka, &format!("{LEADER_EPOCH_TOPIC}-0"));
    assert!(about_the_partition.is_empty(), "{about_the_partition:#?}");
    assert_has_leader(&kafka, LEADER_EPOCH_TOPIC);
    let mut expected: Vec<ClientRecord> = from_broker;
    expected.extend(
        appended
            .iter()
            .chain(&produced)
            .zip(start..)
            .map(|(record, offset)| expected_from(offset, record)),
    );
    assert_consumed(&kafka, LEADER_EPOCH_TOPIC, &expected);

    // The broker kept partlog's entry and started its own next epoch at partlog's end.
    let epochs_after = leader_epochs(&partition);
    assert_eq!(epochs_after[..expected_epochs.len()], expected_epochs[..]);
    let new_epochs = &epochs_after[expected_epochs.len()..];
    assert!(
        new_epochs
            .iter()
            .all(|&(epoch, start)| epoch > our_epoch && start == partlog_end),
        "{epochs_after:?}"
    );
    kafka.stop();
}
