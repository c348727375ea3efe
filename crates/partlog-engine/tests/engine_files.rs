//! The engine directory's files (issue 33, foundations): producer ids that are never reused,
//! crashed at every storage operation; `partlog.topics`; Kafka's `partition.metadata`; topic
//! names and ids by Kafka's rules.

#[path = "../../../tests/common/crash_points.rs"]
mod crash_points;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use partlog::Error;
use partlog::unstable::sim::{FaultOp, FaultRule};
use partlog::unstable::{OpenMode, OsStorage, SimStorage, Storage};
use partlog_engine::engine::partition_metadata::{
    PARTITION_METADATA_FILE_NAME, PartitionMetadata, read_partition_metadata,
    write_partition_metadata,
};
use partlog_engine::engine::producer_ids::{
    PRODUCER_ID_BLOCK_SIZE, PRODUCER_IDS_FILE_NAME, ProducerIdManager,
};
use partlog_engine::engine::topic::{
    TopicId, parse_partition_dir_name, partition_dir_name, topics_collide, validate_topic_name,
};
use partlog_engine::engine::topics_file::{
    TOPICS_FILE_NAME, TopicEntry, Topics, TopicsFile, decode_topics, encode_topics,
};

const DIR: &str = "/engine";

fn os() -> Arc<dyn Storage> {
    Arc::new(OsStorage::new())
}

fn sim_storage(sim: &SimStorage) -> Arc<dyn Storage> {
    Arc::new(sim.clone())
}

fn assert_corrupt<T: std::fmt::Debug>(result: Result<T, Error>, context: &str) {
    match result {
        Err(Error::Corrupt { .. }) => {}
        other => panic!("{context}: expected Error::Corrupt, got {other:?}"),
    }
}

#[test]
fn producer_ids_come_in_blocks_of_1000_reserved_before_use() {
    let storage = os();
    let dir = tempfile::tempdir().unwrap();
    let ids = ProducerIdManager::open(&storage, dir.path()).unwrap();
    assert_eq!(
        ids.reserved_through(),
        -1,
        "nothing reserved before the first id"
    );
    let first: Vec<i64> = (0..1500)
        .map(|_| ids.generate_producer_id().unwrap())
        .collect();
    assert_eq!(first, (0..1500).collect::<Vec<_>>());
    assert_eq!(ids.reserved_through(), 2 * PRODUCER_ID_BLOCK_SIZE - 1);
    assert_eq!(
        ProducerIdManager::read_reserved_through(&storage, dir.path()).unwrap(),
        Some(1999),
        "the file holds the end of the block in use"
    );
    drop(ids);
    // A restart skips the rest of the block: ids 1500..1999 may have been handed out.
    let ids = ProducerIdManager::open(&storage, dir.path()).unwrap();
    assert_eq!(ids.generate_producer_id().unwrap(), 2000);
    assert_eq!(
        std::fs::metadata(dir.path().join(PRODUCER_IDS_FILE_NAME))
            .unwrap()
            .len(),
        1024
    );
}

/// FORMAT.md §14's worked example: after ids 0 to 1000, slot 0 holds sequence 3, reserved
/// through 1999, with CRC 0x23B97B10; slot 1 holds sequence 2 (999).
#[test]
fn producer_ids_file_is_format_md_worked_example() {
    let storage = os();
    let dir = tempfile::tempdir().unwrap();
    let ids = ProducerIdManager::open(&storage, dir.path()).unwrap();
    for _ in 0..=1000 {
        ids.generate_producer_id().unwrap();
    }
    let file = std::fs::read(dir.path().join(PRODUCER_IDS_FILE_NAME)).unwrap();
    let mut head = b"PLPI\x00\x01\x00\x00".to_vec();
    head.extend_from_slice(&3u64.to_be_bytes());
    head.extend_from_slice(&8u32.to_be_bytes());
    head.extend_from_slice(&1999i64.to_be_bytes());
    assert_eq!(file[..28], head[..]);
    assert!(file[28..508].iter().all(|&b| b == 0));
    assert_eq!(file[508..512], [0x23, 0xb9, 0x7b, 0x10]);
    assert_eq!(slot_sequence(&file, 1), 2);
    assert_eq!(file[532..540], 999i64.to_be_bytes());
}

#[test]
fn producer_ids_file_with_both_slots_bad_is_corrupt_and_never_restarts_at_zero() {
    let storage = os();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(PRODUCER_IDS_FILE_NAME);
    let ids = ProducerIdManager::open(&storage, dir.path()).unwrap();
    for _ in 0..2500 {
        ids.generate_producer_id().unwrap();
    }
    drop(ids);
    let good = std::fs::read(&path).unwrap();

    // One slot damaged (the newer one, as a torn write leaves it): the other one is used.
    let mut one_bad = good.clone();
    let newer = if slot_sequence(&good, 1) > slot_sequence(&good, 0) {
        1
    } else {
        0
    };
    one_bad[newer * 512 + 100] ^= 0xff;
    std::fs::write(&path, &one_bad).unwrap();
    let ids = ProducerIdManager::open(&storage, dir.path()).unwrap();
    let next = ids.generate_producer_id().unwrap();
    assert!(
        next >= 2000,
        "an older block's end still lies past every id handed out: {next}"
    );
    drop(ids);

    // Both slots bad, a wrong length, an empty file: Corrupt, at open and at read.
    let mut both_bad = good.clone();
    both_bad[100] ^= 0xff;
    both_bad[612] ^= 0xff;
    for (case, bytes) in [
        ("both slots bad", both_bad),
        ("zeros", vec![0; 1024]),
        ("short", good[..700].to_vec()),
        ("empty", Vec::new()),
    ] {
        std::fs::write(&path, &bytes).unwrap();
        assert_corrupt(ProducerIdManager::open(&storage, dir.path()), case);
        assert_corrupt(
            ProducerIdManager::read_reserved_through(&storage, dir.path()),
            case,
        );
        assert_eq!(
            std::fs::read(&path).unwrap(),
            bytes,
            "{case}: the file is left as it was"
        );
    }
}

fn slot_sequence(file: &[u8], slot: usize) -> u64 {
    let at = slot * 512 + 8;
    u64::from_be_bytes(file[at..at + 8].try_into().unwrap())
}

#[test]
fn producer_ids_a_failed_reservation_hands_out_nothing_and_poisons_until_reopened() {
    let sim = SimStorage::new(7);
    let storage = sim_storage(&sim);
    let dir = Path::new(DIR);
    storage.create_dir_all(dir).unwrap();
    let ids = ProducerIdManager::open(&storage, dir).unwrap();
    assert_eq!(ids.generate_producer_id().unwrap(), 0);
    for _ in 1..PRODUCER_ID_BLOCK_SIZE {
        ids.generate_producer_id().unwrap();
    }
    sim.inject(FaultRule::fail(FaultOp::Sync, 1).on_paths_ending_with(PRODUCER_IDS_FILE_NAME));
    let error = ids.generate_producer_id().unwrap_err();
    assert!(matches!(error, Error::Io { .. }), "{error}");
    assert!(matches!(ids.generate_producer_id(), Err(Error::Poisoned)));
    drop(ids);
    let ids = ProducerIdManager::open(&storage, dir).unwrap();
    let next = ids.generate_producer_id().unwrap();
    assert!(
        next >= PRODUCER_ID_BLOCK_SIZE,
        "no id below the last handed out: {next}"
    );
}

/// Opens the engine directory's producer ids as an engine would: the directory made first.
fn open_ids(storage: &Arc<dyn Storage>) -> Result<ProducerIdManager, Error> {
    storage.create_dir_all(Path::new(DIR))?;
    storage.sync_dir(Path::new("/"))?;
    ProducerIdManager::open(storage, Path::new(DIR))
}

/// Hands out ids over several blocks, with a restart in between; returns every id handed out
/// before the first error.
fn producer_id_workload(storage: &Arc<dyn Storage>, handed: &mut Vec<i64>) -> Result<(), Error> {
    let ids = open_ids(storage)?;
    for _ in 0..2500 {
        handed.push(ids.generate_producer_id()?);
    }
    drop(ids);
    let ids = open_ids(storage)?;
    for _ in 0..1200 {
        handed.push(ids.generate_producer_id()?);
    }
    Ok(())
}

/// Issue 33: "No id is ever reused after a crash". The workload is crashed before each of its
/// storage operations in turn (several crash images each); after the restart, the next id lies
/// above every id handed out before the crash, and the file always opens.
#[test]
fn producer_ids_are_never_reused_after_a_crash_at_any_storage_operation() {
    let dry = SimStorage::new(0);
    let mut handed = Vec::new();
    producer_id_workload(&sim_storage(&dry), &mut handed).unwrap();
    assert_eq!(handed.len(), 3700);
    let points = crash_points::crash_points(&dry.events());
    assert!(points.len() > 15, "too few crash points: {points:?}");
    let mut runs = 0;
    for (op, nth) in points {
        for seed in 0..4 {
            let sim = SimStorage::new(seed * 1000 + nth);
            let storage = sim_storage(&sim);
            sim.inject(FaultRule::crash(op, nth));
            let mut handed = Vec::new();
            let crashed = producer_id_workload(&storage, &mut handed).is_err();
            assert!(
                crashed,
                "{op:?} #{nth}: the workload ran past its crash point"
            );
            sim.clear_faults();
            let context = format!("crash before {op:?} #{nth}, seed {seed}");
            let ids = open_ids(&storage).unwrap_or_else(|e| panic!("{context}: reopen: {e}"));
            let next = ids.generate_producer_id().unwrap();
            if let Some(&last) = handed.iter().max() {
                assert!(
                    next > last,
                    "{context}: id {next} handed out again (last {last})"
                );
            }
            runs += 1;
        }
    }
    assert!(runs > 60);
}

fn entry(seed: u8, partitions: i32, configs: &[(&str, &str)]) -> TopicEntry {
    let mut id = [seed; 16];
    id[0] = 0x40 | (seed & 0x0f);
    TopicEntry {
        topic_id: TopicId(id),
        partitions,
        configs: configs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

fn topics(count: usize) -> Topics {
    (0..count)
        .map(|i| {
            let configs: &[(&str, &str)] = if i % 2 == 0 {
                &[("cleanup.policy", "compact"), ("segment.bytes", "1048576")]
            } else {
                &[]
            };
            (
                format!("topic-{i:03}"),
                entry(i as u8 + 1, 1 + i as i32, configs),
            )
        })
        .collect()
}

#[test]
fn topics_payload_round_trips_and_pins_its_layout() {
    let mut one = Topics::new();
    one.insert("t".to_owned(), entry(1, 3, &[("retention.ms", "-1")]));
    let bytes = encode_topics(&one).unwrap();
    assert_eq!(
        one["t"].topic_id.0,
        [0x41, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]
    );
    let mut expected = vec![0, 0, 0, 1, 0, 1, b't'];
    expected.extend_from_slice(&one["t"].topic_id.0);
    expected.extend_from_slice(&[0, 0, 0, 3, 0, 0, 0, 1, 0, 12]);
    expected.extend_from_slice(b"retention.ms");
    expected.extend_from_slice(&[0, 0, 0, 2, b'-', b'1']);
    assert_eq!(bytes, expected);
    assert_eq!(decode_topics(&bytes).unwrap(), one);
    let many = topics(40);
    assert_eq!(decode_topics(&encode_topics(&many).unwrap()).unwrap(), many);
    assert_eq!(decode_topics(&[0, 0, 0, 0]).unwrap(), Topics::new());

    // Every truncation fails, and so does every rule broken.
    for cut in 0..bytes.len() {
        assert!(decode_topics(&bytes[..cut]).is_err(), "cut at {cut}");
    }
    let mut trailing = bytes.clone();
    trailing.push(0);
    assert!(decode_topics(&trailing).is_err());
    let mut bad_name = bytes.clone();
    bad_name[6] = b'/';
    assert!(decode_topics(&bad_name).is_err());
    let mut zero_partitions = bytes.clone();
    zero_partitions[26] = 0;
    assert!(decode_topics(&zero_partitions).is_err());
    let mut two_topics = Topics::new();
    two_topics.insert("a".to_owned(), entry(1, 1, &[]));
    two_topics.insert("b".to_owned(), entry(2, 1, &[]));
    let mut two = encode_topics(&two_topics).unwrap();
    // The names sit at bytes 6 and 33 (4 + 27 + 2): swapped, the order breaks.
    assert_eq!((two[6], two[33]), (b'a', b'b'));
    two.swap(6, 33);
    assert!(decode_topics(&two).is_err(), "names out of order");

    for (name, bad) in [
        ("", entry(1, 1, &[])),
        ("a b", entry(1, 1, &[])),
        ("t", entry(1, 0, &[])),
        (
            "t",
            TopicEntry {
                topic_id: TopicId::ZERO,
                ..entry(1, 1, &[])
            },
        ),
        ("t", entry(1, 1, &[("", "x")])),
    ] {
        let mut list = Topics::new();
        list.insert(name.to_owned(), bad);
        assert!(
            matches!(encode_topics(&list), Err(Error::InvalidArgument { .. })),
            "{name:?}"
        );
    }
}

#[test]
fn topics_file_grows_past_its_slots_and_reopens_with_the_newest_list() {
    let storage = os();
    let dir = tempfile::tempdir().unwrap();
    assert!(TopicsFile::open(&storage, dir.path()).unwrap().is_none());
    let mut file = TopicsFile::create(&storage, dir.path(), &topics(1)).unwrap();
    assert_eq!(file.slot_size(), 512);
    for count in [2, 3, 20, 60, 61] {
        file.write(&topics(count)).unwrap();
    }
    assert!(file.slot_size() > 2048, "{}", file.slot_size());
    let len = std::fs::metadata(dir.path().join(TOPICS_FILE_NAME))
        .unwrap()
        .len();
    assert_eq!(len, 2 * file.slot_size() as u64);
    assert!(!dir.path().join("partlog.topics.tmp").exists());
    drop(file);
    let (mut file, read) = TopicsFile::open(&storage, dir.path()).unwrap().unwrap();
    assert_eq!(read, topics(61));
    file.write(&topics(5)).unwrap();
    assert_eq!(
        TopicsFile::read(&storage, dir.path()).unwrap(),
        Some(topics(5))
    );

    // Both slots damaged: Corrupt, never an empty list.
    let path = dir.path().join(TOPICS_FILE_NAME);
    let mut bytes = std::fs::read(&path).unwrap();
    let half = bytes.len() / 2;
    bytes[30] ^= 1;
    bytes[half + 30] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    assert_corrupt(TopicsFile::open(&storage, dir.path()), "both slots bad");
    assert_corrupt(TopicsFile::read(&storage, dir.path()), "both slots bad");
}

/// The lists a topics workload writes, in order: created with the first, then each written.
fn topic_lists() -> Vec<Topics> {
    [1, 2, 8, 30, 31, 3].into_iter().map(topics).collect()
}

fn topics_workload(storage: &Arc<dyn Storage>, acked: &mut usize) -> Result<(), Error> {
    let lists = topic_lists();
    storage.create_dir_all(Path::new(DIR))?;
    storage.sync_dir(Path::new("/"))?;
    let mut file = TopicsFile::create(storage, Path::new(DIR), &lists[0])?;
    *acked = 1;
    for list in &lists[1..] {
        file.write(list)?;
        *acked += 1;
    }
    Ok(())
}

/// A crash at any storage operation of a run of topic-list writes (growth by rename included)
/// leaves the last acknowledged list or the one being written, and never an unreadable file.
#[test]
fn topics_file_survives_a_crash_at_any_storage_operation() {
    let dry = SimStorage::new(0);
    let mut acked = 0;
    topics_workload(&sim_storage(&dry), &mut acked).unwrap();
    let lists = topic_lists();
    for (op, nth) in crash_points::crash_points(&dry.events()) {
        for seed in 0..3 {
            let sim = SimStorage::new(seed * 1000 + nth);
            let storage = sim_storage(&sim);
            sim.inject(FaultRule::crash(op, nth));
            let mut acked = 0;
            assert!(topics_workload(&storage, &mut acked).is_err());
            sim.clear_faults();
            let context = format!("crash before {op:?} #{nth}, seed {seed}, {acked} acked");
            let read = TopicsFile::open(&storage, Path::new(DIR))
                .unwrap_or_else(|e| panic!("{context}: {e}"))
                .map(|(_, topics)| topics);
            match acked {
                0 => assert!(
                    read.is_none() || read.as_ref() == Some(&lists[0]),
                    "{context}"
                ),
                n => {
                    let read = read.unwrap_or_else(|| panic!("{context}: the file is gone"));
                    assert!(
                        read == lists[n - 1] || lists.get(n) == Some(&read),
                        "{context}: read a list of {} topics",
                        read.len()
                    );
                }
            }
        }
    }
}

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/broker/partlog-fixture-0")
}

#[test]
fn partition_metadata_reads_and_rewrites_a_4_4_brokers_file_byte_for_byte() {
    let written = std::fs::read(fixture_dir().join(PARTITION_METADATA_FILE_NAME)).unwrap();
    assert_eq!(written, b"version: 0\ntopic_id: Gt6gIIVFQTmGKDxSEcpNZw");
    let metadata = PartitionMetadata::parse(&written).unwrap();
    assert_eq!(metadata.version, 0);
    assert_eq!(
        metadata.topic_id.0,
        [
            26, 222, 160, 32, 133, 69, 65, 57, 134, 40, 60, 82, 17, 202, 77, 103
        ],
        "the bytes Java's Base64 URL decoder gives"
    );
    assert_eq!(metadata.encode(), written);
    let read = read_partition_metadata(&os(), &fixture_dir()).unwrap();
    assert_eq!(read, Some(metadata));
}

#[test]
fn partition_metadata_follows_kafkas_reader() {
    let id = "Gt6gIIVFQTmGKDxSEcpNZw";
    let ok = |text: &str| PartitionMetadata::parse(text.as_bytes());
    for text in [
        format!("version: 0\ntopic_id: {id}\n"),
        format!("version: 0\r\ntopic_id: {id}\r\n"),
        format!("version:\t0\ntopic_id:   {id}"),
        format!("version: 3\ntopic_id: {id}\nextra line"),
        format!("anything: 0\nelse: {id}"),
        format!("version: 0\ntopic_id: {id}=="),
    ] {
        assert!(ok(&text).is_ok(), "{text:?}: {:?}", ok(&text));
    }
    // Java's decoder ignores the unused low bits of the last character.
    assert_eq!(
        ok(&format!("version: 0\ntopic_id: {}x", &id[..21]))
            .unwrap()
            .topic_id,
        ok(&format!("version: 0\ntopic_id: {id}")).unwrap().topic_id
    );
    for text in [
        String::new(),
        format!("version:0\ntopic_id: {id}"),
        format!("version: -1\ntopic_id: {id}"),
        format!("version: x\ntopic_id: {id}"),
        format!("version: 0\n\ntopic_id: {id}"),
        "version: 0\n".to_owned(),
        "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA".to_owned(),
        "version: 0\ntopic_id: Gt6gIIVFQTmGKDxSEcpNZ".to_owned(),
        "version: 0\ntopic_id: Gt6gIIVFQTmGKDxSEcpN!w".to_owned(),
        format!("version: 0: 1\ntopic_id: {id}"),
    ] {
        assert!(ok(&text).is_err(), "{text:?} parsed");
    }
}

#[test]
fn partition_metadata_is_written_durably_through_the_storage_seam() {
    let sim = SimStorage::new(3);
    let storage = sim_storage(&sim);
    let dir = Path::new("/engine/orders-0");
    storage.create_dir_all(dir).unwrap();
    storage.sync_dir(Path::new("/engine")).unwrap();
    storage.sync_dir(Path::new("/")).unwrap();
    assert_eq!(read_partition_metadata(&storage, dir).unwrap(), None);
    let metadata = PartitionMetadata::new(TopicId::random());
    write_partition_metadata(&storage, dir, &metadata).unwrap();
    sim.crash_with(&partlog::unstable::CrashConfig::lose_unsynced());
    assert_eq!(
        read_partition_metadata(&storage, dir).unwrap(),
        Some(metadata)
    );
    let file = storage
        .open(&dir.join(PARTITION_METADATA_FILE_NAME), OpenMode::ReadWrite)
        .unwrap();
    file.write_all_at(b"version: zero", 0).unwrap();
    assert_corrupt(read_partition_metadata(&storage, dir), "a damaged file");
}

#[test]
fn topic_names_follow_kafkas_topic_validate() {
    // TopicTest.shouldAcceptValidTopicNames and shouldThrowOnInvalidTopicNames.
    let longest = "a".repeat(249);
    for name in [
        "valid",
        "TOPIC",
        "nAmEs",
        "ar6",
        "VaL1d",
        "_0-9_.",
        "...",
        &longest,
        "__transaction_state",
    ] {
        validate_topic_name(name).unwrap_or_else(|e| panic!("{name:?}: {e}"));
    }
    let too_long = "a".repeat(250);
    for name in [
        "", "foo bar", "..", "foo:bar", "foo=bar", ".", &too_long, "café",
    ] {
        let error = validate_topic_name(name).unwrap_err();
        assert!(matches!(error, Error::InvalidArgument { .. }), "{name:?}");
        assert!(
            error.to_string().contains("Topic name is invalid"),
            "{error}"
        );
    }
    // TopicTest.shouldRecognizeInvalidCharactersInTopicNames.
    for c in [
        '/', '\\', ',', '\0', ':', '"', '\'', ';', '*', '?', ' ', '\t', '\r', '\n', '=',
    ] {
        assert!(
            validate_topic_name(&format!("Is {c}illegal")).is_err(),
            "{c:?}"
        );
    }
    // TopicTest.testTopicHasCollision.
    let periods = [".topic", "to.pic", "topic.", "topic"];
    let underscores = ["_topic", "to_pic", "topic_", "topic"];
    for (p, u) in periods.iter().zip(underscores) {
        assert!(topics_collide(p, p) && topics_collide(u, u) && topics_collide(p, u));
    }
    for (p, u) in periods.iter().zip(underscores.iter().rev()) {
        assert!(!topics_collide(p, u), "{p} {u}");
    }
}

#[test]
fn partition_directory_names_are_kafkas() {
    assert_eq!(
        partition_dir_name("__transaction_state", 7),
        "__transaction_state-7"
    );
    assert_eq!(
        parse_partition_dir_name("__transaction_state-7"),
        Some(("__transaction_state", 7))
    );
    assert_eq!(
        parse_partition_dir_name("my-topic-12"),
        Some(("my-topic", 12))
    );
    assert_eq!(parse_partition_dir_name("t-0"), Some(("t", 0)));
    assert_eq!(
        parse_partition_dir_name("t--1"),
        Some(("t-", 1)),
        "`t-` is a topic name"
    );
    for name in [
        "t",
        "t-",
        "-1",
        "t-01",
        "t-+1",
        "t-x",
        "t-2147483648",
        "a b-0",
        "t-0.abc-delete",
        "t-0-future",
    ] {
        assert_eq!(parse_partition_dir_name(name), None, "{name}");
    }
}

#[test]
fn topic_ids_print_as_kafkas_base64url() {
    let id: TopicId = "Gt6gIIVFQTmGKDxSEcpNZw".parse().unwrap();
    assert_eq!(id.to_string(), "Gt6gIIVFQTmGKDxSEcpNZw");
    assert_eq!(TopicId::ZERO.to_string(), "AAAAAAAAAAAAAAAAAAAAAA");
    assert_eq!(TopicId::METADATA.to_string(), "AAAAAAAAAAAAAAAAAAAAAQ");
    assert!(TopicId::ZERO.is_reserved() && TopicId::METADATA.is_reserved() && !id.is_reserved());
    assert_eq!(TopicId([0xff; 16]).to_string(), "_____________________w");
    let ids: BTreeMap<String, TopicId> = (0..200)
        .map(|_| TopicId::random())
        .map(|id| (id.to_string(), id))
        .collect();
    assert_eq!(ids.len(), 200, "random ids differ");
}
