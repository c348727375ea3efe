//! Writes and errors as a library user meets them (issue 15): `NewRecord::now`, the borrowed
//! record form (`RecordRef`), `Log::sync`, `Log::roll`, a second open in the same process, and
//! errors that name the setting to change.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use partlog::{
    Error, FlushPolicy, Log, LogConfig, NewRecord, Producer, ProducerConfig, ReadBound, RecordRef,
    verify_dir,
};

const T0: i64 = 1_700_000_000_000;

fn system_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}
fn value(n: i64) -> Vec<u8> {
    format!("value {n}").into_bytes()
}
/// `count` records, one batch each, stamped T0 + n seconds.
fn log_with(dir: &std::path::Path, config: LogConfig, count: i64) -> Log {
    let log = Log::open(dir, config).unwrap();
    for n in 0..count {
        log.append(&[NewRecord::new(T0 + n * 1000, None, Some(&value(n)))])
            .unwrap();
    }
    log
}
fn offsets(records: impl Iterator<Item = partlog::Result<partlog::LogRecord>>) -> Vec<i64> {
    records.map(|record| record.unwrap().offset).collect()
}
#[test]
fn new_record_now_is_stamped_with_the_system_time() {
    let before = system_ms();
    let record = NewRecord::now(Some(b"k"), Some(b"v"));
    let after = system_ms();
    assert!(
        (before..=after).contains(&record.timestamp),
        "{before} <= {} <= {after}",
        record.timestamp
    );
    assert_eq!(record.key.as_deref(), Some(&b"k"[..]));
    // A log with the default timestamp bounds takes it.
    let temp = tempfile::tempdir().unwrap();
    let log = Log::open(temp.path(), LogConfig::default()).unwrap();
    log.append(&[record]).unwrap();
}
#[test]
fn record_refs_append_the_same_batch_as_new_records() {
    let headers: &[(&str, Option<&[u8]>)] = &[("h", Some(b"x")), ("none", None)];
    let payloads: Vec<Vec<u8>> = (0..5).map(value).collect();
    let owned: Vec<NewRecord> = payloads
        .iter()
        .enumerate()
        .map(|(n, payload)| {
            NewRecord::new(T0 + n as i64, Some(b"k"), Some(payload))
                .with_header("h", Some(b"x"))
                .with_header("none", None)
        })
        .collect();
    let borrowed: Vec<RecordRef<'_>> = payloads
        .iter()
        .enumerate()
        .map(|(n, payload)| {
            RecordRef::new(T0 + n as i64, Some(b"k"), Some(payload)).with_headers(headers)
        })
        .collect();
    let temp = tempfile::tempdir().unwrap();
    let from_owned = Log::open(temp.path().join("owned"), LogConfig::default()).unwrap();
    let from_borrowed = Log::open(temp.path().join("borrowed"), LogConfig::default()).unwrap();
    assert_eq!(
        from_owned.append(&owned).unwrap(),
        from_borrowed.append_refs(&borrowed).unwrap()
    );
    let bytes = |log: &Log| {
        log.read(0, 1 << 20, ReadBound::LogEnd)
            .unwrap()
            .bytes()
            .to_vec()
    };
    assert_eq!(bytes(&from_owned), bytes(&from_borrowed));
    // The same checks: an empty append, and a timestamp out of bounds.
    assert!(matches!(
        from_borrowed.append_refs(&[]),
        Err(Error::InvalidArgument { .. })
    ));
    let ahead = RecordRef::new(system_ms() + 2 * 3_600_000, None, Some(b"v"));
    assert!(matches!(
        from_borrowed.append_refs(&[ahead]),
        Err(Error::InvalidTimestamp { .. })
    ));
}

#[test]
fn sync_makes_everything_appended_durable_and_succeeds_on_an_empty_log() {
    let temp = tempfile::tempdir().unwrap();
    let config = LogConfig::builder()
        .flush_policy(FlushPolicy::Interval(Duration::from_secs(3600)))
        .build()
        .unwrap();
    let log = Log::open(temp.path(), config).unwrap();
    log.sync().unwrap();
    assert_eq!(log.durable_offset(), 0);
    // wait_durable has no offset to wait for on an empty log; sync does not need one.
    assert!(matches!(
        log.wait_durable(0),
        Err(Error::OffsetOutOfRange { .. })
    ));
    for n in 0..20 {
        log.append(&[NewRecord::new(T0 + n, None, Some(&value(n)))])
            .unwrap();
    }
    log.sync().unwrap();
    assert_eq!(log.durable_offset(), 20);
    // Durable already: nothing to do, still Ok.
    log.sync().unwrap();
    log.roll().unwrap();
    log.sync().unwrap();
    log.close().unwrap();
    assert!(matches!(log.sync(), Err(Error::Closed)));
    let reader = Log::open_read_only(temp.path(), LogConfig::default()).unwrap();
    assert!(matches!(reader.sync(), Err(Error::Unsupported { .. })));
}

#[test]
fn roll_starts_a_segment_at_the_log_end_and_an_empty_one_stays() {
    let temp = tempfile::tempdir().unwrap();
    let log = log_with(temp.path(), LogConfig::default(), 5);
    assert_eq!(log.stats().segments, 1);
    assert_eq!(log.roll().unwrap(), 5);
    assert_eq!(log.stats().segments, 2);
    assert_eq!(log.stats().rolls, 1);
    // The new active segment is empty and starts at the log end: a roll changes nothing.
    assert_eq!(log.roll().unwrap(), 5);
    assert_eq!(log.stats().segments, 2);
    assert_eq!(log.stats().rolls, 1);
    log.append(&[NewRecord::new(T0, None, Some(b"after"))])
        .unwrap();
    assert_eq!(log.roll().unwrap(), 6);
    assert_eq!(
        offsets(log.records(0, ReadBound::LogEnd)),
        (0..6).collect::<Vec<_>>()
    );
    log.close().unwrap();
    assert!(matches!(log.roll(), Err(Error::Closed)));
    let report = verify_dir(temp.path(), &LogConfig::default()).unwrap();
    assert_eq!(report.worst(), None, "{report:?}");
    let reopened = Log::open(temp.path(), LogConfig::default()).unwrap();
    assert_eq!(reopened.stats().segments, 3);
    assert_eq!(reopened.log_end_offset(), 6);
}

#[test]
fn rolls_concurrent_with_appends_lose_nothing() {
    let temp = tempfile::tempdir().unwrap();
    let log = Arc::new(Log::open(temp.path(), LogConfig::default()).unwrap());
    let writers: Vec<_> = (0..3)
        .map(|t| {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                (0..300)
                    .map(|n| {
                        let payload = format!("{t}/{n}");
                        let appended = log
                            .append(&[NewRecord::new(T0, None, Some(payload.as_bytes()))])
                            .unwrap();
                        (appended.first_offset, payload)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let roller = {
        let log = Arc::clone(&log);
        std::thread::spawn(move || {
            let mut bases = BTreeSet::new();
            for _ in 0..100 {
                bases.insert(log.roll().unwrap());
            }
            bases
        })
    };
    let mut expected = Vec::new();
    for writer in writers {
        expected.extend(writer.join().unwrap());
    }
    let bases = roller.join().unwrap();
    expected.sort();
    let read: Vec<(i64, String)> = log
        .records(0, ReadBound::LogEnd)
        .map(|record| {
            let record = record.unwrap();
            (
                record.offset,
                String::from_utf8(record.value.unwrap()).unwrap(),
            )
        })
        .collect();
    assert_eq!(read, expected);
    assert_eq!(read.len(), 900);
    // Every roll reported a segment the log lists (or one a later roll left empty: none here,
    // since a roll at an empty active segment is a no-op that reports the same base).
    assert!(log.stats().segments >= bases.len());
    Arc::into_inner(log).unwrap().close().unwrap();
    let report = verify_dir(temp.path(), &LogConfig::default()).unwrap();
    assert_eq!(report.worst(), None, "{report:?}");
}

#[test]
fn a_second_open_in_this_process_says_so() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("t-0");
    let first = Log::open(&dir, LogConfig::default()).unwrap();
    for second in [
        Log::open(&dir, LogConfig::default()),
        // The same directory by another spelling.
        Log::open(dir.join("."), LogConfig::default()),
        Log::open_read_only(&dir, LogConfig::default()),
    ] {
        match second {
            Err(
                error @ Error::Locked {
                    in_this_process: true,
                    ..
                },
            ) => {
                let message = error.to_string();
                assert!(message.contains("this process"), "{message}");
                assert!(message.contains("partlog.lock"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }
    first.close().unwrap();
    drop(first);
    // Released: a reader, then a writer beside nothing.
    let reader = Log::open_read_only(&dir, LogConfig::default()).unwrap();
    match Log::open(&dir, LogConfig::default()) {
        Err(Error::Locked {
            in_this_process: true,
            ..
        }) => {}
        other => panic!("a reader of this process holds it: {other:?}"),
    }
    drop(reader);
    Log::open(&dir, LogConfig::default())
        .unwrap()
        .close()
        .unwrap();
}

#[test]
fn a_lock_held_by_another_process_is_not_blamed_on_this_one() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("t-0");
    Log::open(&dir, LogConfig::default())
        .unwrap()
        .close()
        .unwrap();
    // util-linux flock(1) takes the same flock(2) lock partlog does.
    let child = Command::new("flock")
        .arg(dir.join("partlog.lock"))
        .args(["-c", "echo held; cat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn();
    let Ok(mut child) = child else {
        eprintln!("skipping: no flock(1) on this machine");
        return;
    };
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "held");
    let refused = Log::open(&dir, LogConfig::default());
    drop(child.stdin.take()); // cat ends, flock releases
    child.wait().unwrap();
    match refused {
        Err(
            error @ Error::Locked {
                in_this_process: false,
                ..
            },
        ) => assert!(!error.to_string().contains("this process"), "{error}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_timestamp_too_far_ahead_names_the_setting_and_how_to_raise_it() {
    let temp = tempfile::tempdir().unwrap();
    let log = Arc::new(Log::open(temp.path(), LogConfig::default()).unwrap());
    let ahead = system_ms() + 2 * 3_600_000;
    let producer = Producer::new(Arc::clone(&log), ProducerConfig::default()).unwrap();
    for refused in [
        log.append(&[NewRecord::new(ahead, None, Some(b"v"))])
            .map(drop),
        producer
            .send(&NewRecord::new(ahead, None, Some(b"v")))
            .map(drop),
    ] {
        match refused {
            Err(error @ Error::InvalidTimestamp { .. }) => {
                let message = error.to_string();
                assert!(
                    message.contains("message.timestamp.after.max.ms"),
                    "{message}"
                );
                assert!(
                    message.contains("message_timestamp_after_max_ms("),
                    "{message}"
                );
            }
            other => panic!("{other:?}"),
        }
    }
    producer.close().unwrap();
}

#[test]
fn a_record_over_the_limit_names_max_message_bytes_and_how_to_raise_it() {
    let temp = tempfile::tempdir().unwrap();
    let config = LogConfig::builder()
        .max_message_bytes(2000)
        .build()
        .unwrap();
    let log = Arc::new(Log::open(temp.path(), config).unwrap());
    let big = vec![0u8; 5000];
    let producer = Producer::new(Arc::clone(&log), ProducerConfig::default()).unwrap();
    for refused in [
        log.append(&[NewRecord::new(T0, None, Some(&big))])
            .map(drop),
        producer
            .send(&NewRecord::new(T0, None, Some(&big)))
            .map(drop),
    ] {
        match refused {
            Err(error @ Error::RecordTooLarge { max: 2000, .. }) => {
                let message = error.to_string();
                assert!(
                    message.contains("max.message.bytes (2000 bytes)"),
                    "{message}"
                );
                assert!(message.contains(".max_message_bytes("), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }
    producer.close().unwrap();
}
