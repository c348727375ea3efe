//! The Kafka log-dir contract (ARCHITECTURE.md §7, "Opening inside a Kafka log dir"), without a
//! broker: a log opened for writing in a partition of a Kafka log directory (its parent holds
//! `meta.properties`)
//! - takes an OFD write lock on the parent's `.lock`, shared by every log of that directory in
//!   this process and released when the last one closes; it conflicts with a classic POSIX lock
//!   held by another process (Python's `fcntl.lockf`, Java's `FileChannel.tryLock`) both ways;
//! - renames `.kafka_cleanshutdown` to `.kafka_cleanshutdown.partlog` (durably) before writing,
//!   and puts it back byte for byte when the last log closes cleanly;
//! - leaves it aside after a crash, a poisoned close, or when a set-aside file from an earlier
//!   crash is all it finds (the broker must recover then).
//!
//! Read-only opens, and logs whose parent is not a Kafka log directory, do none of this.
//!
//! Other processes: `python3` (`fcntl.lockf`, a classic `F_SETLK` lock), `java` (`$PARTLOG_JAVA`
//! or `java` on `PATH`, running a one-file program that calls `FileChannel.tryLock`, which OpenJDK
//! implements as `fcntl(F_SETLK)` on the whole file), and this test binary itself, re-run as a
//! partlog writer that is killed with SIGKILL. A missing `python3` or `java` skips its test with a
//! printed reason, except under `CI=true`, where it fails.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};

use partlog::unstable::{OsStorage, Storage};
use partlog::{Error, Log, LogConfig, NewRecord, ReadBound};

const MARKER: &str = ".kafka_cleanshutdown";
const SET_ASIDE: &str = ".kafka_cleanshutdown.partlog";
const BROKER_LOCK: &str = ".lock";
/// What a broker writes at a clean shutdown.
const MARKER_BYTES: &[u8] = br#"{"version":0,"brokerEpoch":42}"#;
const META_PROPERTIES: &str = "#\n#Written by a test\nnode.id=1\ndirectory.id=J8iy8zDnRBKhDDCH0Ty7rA\nversion=1\ncluster.id=4L6g3nShT-eMCtK--X86sw\n";
/// Set in the child copy of this binary: the partition directory it writes and then hangs in.
const CHILD_DIR_VAR: &str = "PARTLOG_KAFKA_DIR_CHILD_WRITER";
const CHILD_READY: &str = "PARTLOG_CHILD_READY";

fn config() -> LogConfig {
    LogConfig::builder_for_tests()
        .segment_bytes(4096)
        .build()
        .unwrap()
}

/// A record without a timestamp (-1), which every clock accepts.
fn record(i: i64) -> NewRecord {
    NewRecord::new(-1, Some(b"key"), Some(format!("value {i}").as_bytes()))
}

fn append_n(log: &Log, n: i64) {
    let start = log.log_end_offset();
    for i in start..start + n {
        assert_eq!(log.append(&[record(i)]).unwrap().first_offset, i);
    }
}

fn values(log: &Log) -> Vec<String> {
    log.records(log.log_start_offset(), ReadBound::LogEnd)
        .map(|r| String::from_utf8(r.unwrap().value.unwrap()).unwrap())
        .collect()
}

/// A temporary Kafka log directory: `meta.properties`, a clean-shutdown marker, and the empty
/// partition directory `topic-0`.
fn kafka_log_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("meta.properties"), META_PROPERTIES).unwrap();
    std::fs::write(dir.path().join(MARKER), MARKER_BYTES).unwrap();
    std::fs::create_dir(dir.path().join("topic-0")).unwrap();
    dir
}

/// The contents of `log_dir/name`, or `None` if there is no such file.
fn read(log_dir: &Path, name: &str) -> Option<Vec<u8>> {
    match std::fs::read(log_dir.join(name)) {
        Ok(bytes) => Some(bytes),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        Err(error) => panic!("reading {name}: {error}"),
    }
}

/// Whether an OFD lock on `.lock` can be had right now. The probe is another open file
/// description, so it conflicts with the lock partlog holds in this process too.
fn broker_lock_is_free(log_dir: &Path) -> bool {
    match OsStorage::new().lock_foreign_ofd(&log_dir.join(BROKER_LOCK)) {
        Ok(_released_at_once) => true,
        Err(Error::Locked { .. }) => false,
        Err(error) => panic!("probing the broker lock: {error}"),
    }
}

fn running_in_ci() -> bool {
    std::env::var("CI").is_ok_and(|value| value == "true")
}

/// Skips (returns `None` after printing why) when `program` is missing, except under `CI=true`.
fn spawn_or_skip(command: &mut Command, program: &str) -> Option<Child> {
    match command.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn() {
        Ok(child) => Some(child),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound && !running_in_ci() => {
            eprintln!("skipping: {program} is not installed ({error})");
            None
        }
        Err(error) => panic!("starting {program}: {error}"),
    }
}

/// Reads the child's stdout until a line contains one of `wanted`, and returns that one.
fn wait_for_line(stdout: &mut BufReader<ChildStdout>, wanted: &[&'static str]) -> &'static str {
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        let n = stdout.read_line(&mut line).unwrap();
        assert!(
            n > 0,
            "the child exited before printing any of {wanted:?}; it printed:\n{seen}"
        );
        if let Some(found) = wanted.iter().find(|w| line.contains(*w)) {
            return found;
        }
        seen.push_str(&line);
    }
}

/// Lets a child that waits for the end of its stdin exit, and checks that it succeeded.
fn finish(mut child: Child) {
    drop(child.stdin.take());
    let status = child.wait().unwrap();
    assert!(status.success(), "the child failed: {status}");
}

#[test]
fn a_writer_sets_the_marker_aside_and_shares_one_lock_per_log_dir_until_the_last_close() {
    let kafka = kafka_log_dir();
    let log_dir = kafka.path();
    assert!(broker_lock_is_free(log_dir));

    let first = Log::open(log_dir.join("topic-0"), config()).unwrap();
    assert_eq!(read(log_dir, MARKER), None, "set aside before any write");
    assert_eq!(read(log_dir, SET_ASIDE).as_deref(), Some(MARKER_BYTES));
    assert!(log_dir.join(BROKER_LOCK).exists());
    assert!(!broker_lock_is_free(log_dir));

    // A second partition of the same log directory shares the lock instead of conflicting.
    let second = Log::open(log_dir.join("topic-1"), config()).unwrap();
    append_n(&first, 20);
    append_n(&second, 5);
    first.close().unwrap();
    assert!(!broker_lock_is_free(log_dir), "topic-1 still holds it");
    assert_eq!(read(log_dir, MARKER), None, "topic-1 may still write");

    second.close().unwrap();
    assert!(broker_lock_is_free(log_dir));
    assert_eq!(read(log_dir, MARKER).as_deref(), Some(MARKER_BYTES));
    assert_eq!(read(log_dir, SET_ASIDE), None);

    // The next writer does the same again.
    let again = Log::open(log_dir.join("topic-0"), config()).unwrap();
    assert!(again.recovery_report().clean_shutdown);
    assert_eq!(values(&again).len(), 20);
    assert_eq!(read(log_dir, MARKER), None);
    assert!(!broker_lock_is_free(log_dir));
    drop(again);
    assert_eq!(read(log_dir, MARKER).as_deref(), Some(MARKER_BYTES));
    assert!(broker_lock_is_free(log_dir));
}

#[test]
fn a_failed_open_in_the_log_dir_does_not_spoil_the_clean_close_of_the_others() {
    let kafka = kafka_log_dir();
    let log_dir = kafka.path();
    let log = Log::open(log_dir.join("topic-0"), config()).unwrap();
    // The same partition twice in one process: partlog.lock refuses the second.
    let twice = Log::open(log_dir.join("topic-0"), config());
    assert!(matches!(twice, Err(Error::Locked { ref path, .. }) if path.ends_with("partlog.lock")));
    append_n(&log, 3);
    log.close().unwrap();
    assert_eq!(read(log_dir, MARKER).as_deref(), Some(MARKER_BYTES));
    assert!(broker_lock_is_free(log_dir));
}

#[test]
fn read_only_opens_leave_the_marker_and_the_lock_alone() {
    let kafka = kafka_log_dir();
    let log_dir = kafka.path();
    let writer = Log::open(log_dir.join("topic-0"), config()).unwrap();
    append_n(&writer, 4);
    writer.close().unwrap();

    let reader = Log::open_read_only(log_dir.join("topic-0"), config()).unwrap();
    assert_eq!(values(&reader).len(), 4);
    assert_eq!(read(log_dir, MARKER).as_deref(), Some(MARKER_BYTES));
    assert_eq!(read(log_dir, SET_ASIDE), None);
    assert!(broker_lock_is_free(log_dir));
    drop(reader);
    assert_eq!(read(log_dir, MARKER).as_deref(), Some(MARKER_BYTES));
}

#[test]
fn a_parent_without_meta_properties_is_not_a_kafka_log_dir() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(MARKER), MARKER_BYTES).unwrap();
    let log = Log::open(dir.path().join("topic-0"), config()).unwrap();
    append_n(&log, 2);
    assert_eq!(read(dir.path(), MARKER).as_deref(), Some(MARKER_BYTES));
    assert!(!dir.path().join(BROKER_LOCK).exists());
    log.close().unwrap();
    assert_eq!(read(dir.path(), MARKER).as_deref(), Some(MARKER_BYTES));
    assert_eq!(read(dir.path(), SET_ASIDE), None);
}

/// A Python child holding a classic POSIX lock (`lockf`, i.e. `fcntl(F_SETLK)`) on `.lock`, as a
/// running broker's `FileChannel.tryLock` does, until its stdin closes.
const PYTHON_HOLD: &str = "
import fcntl, sys
f = open(sys.argv[1], 'a+')
fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
print('HELD', flush=True)
sys.stdin.read()
";

/// A Python child that tries the same lock once, without blocking, and says how it went.
const PYTHON_TRY: &str = "
import fcntl, sys
f = open(sys.argv[1], 'a+')
try:
    fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print('ACQUIRED', flush=True)
except OSError:
    print('BUSY', flush=True)
";

fn python(script: &str, lock_path: &Path) -> Option<(Child, BufReader<ChildStdout>)> {
    let mut child = spawn_or_skip(
        Command::new("python3").arg("-c").arg(script).arg(lock_path),
        "python3",
    )?;
    let stdout = BufReader::new(child.stdout.take().unwrap());
    Some((child, stdout))
}

#[test]
fn the_lock_conflicts_with_a_posix_lockf_held_by_another_process_both_ways() {
    let kafka = kafka_log_dir();
    let log_dir = kafka.path();
    let lock_path = log_dir.join(BROKER_LOCK);

    // Another process holds it: the open fails before it changes anything.
    let Some((holder, mut out)) = python(PYTHON_HOLD, &lock_path) else {
        return;
    };
    assert_eq!(wait_for_line(&mut out, &["HELD"]), "HELD");
    let refused = Log::open(log_dir.join("topic-7"), config());
    assert!(
        matches!(refused, Err(Error::Locked { ref path, .. }) if path.ends_with(BROKER_LOCK)),
        "{refused:?}"
    );
    assert!(!log_dir.join("topic-7").exists(), "nothing is created");
    assert_eq!(read(log_dir, MARKER).as_deref(), Some(MARKER_BYTES));
    assert_eq!(read(log_dir, SET_ASIDE), None);
    finish(holder);

    // partlog holds it: the other process cannot lock until the log closes.
    let log = Log::open(log_dir.join("topic-7"), config()).unwrap();
    let (prober, mut out) = python(PYTHON_TRY, &lock_path).unwrap();
    assert_eq!(wait_for_line(&mut out, &["ACQUIRED", "BUSY"]), "BUSY");
    finish(prober);
    log.close().unwrap();
    let (prober, mut out) = python(PYTHON_TRY, &lock_path).unwrap();
    assert_eq!(wait_for_line(&mut out, &["ACQUIRED", "BUSY"]), "ACQUIRED");
    finish(prober);
}

/// The broker's own lock call: `FileChannel.tryLock()` on `.lock`, as Kafka's `FileLock` does.
/// `hold` keeps it until stdin closes; `try` reports and exits.
const JAVA_LOCK: &str = r#"
import java.io.RandomAccessFile;
import java.nio.channels.FileLock;

public class KafkaStyleLock {
    public static void main(String[] args) throws Exception {
        try (RandomAccessFile file = new RandomAccessFile(args[1], "rw")) {
            FileLock lock = file.getChannel().tryLock();
            System.out.println(lock == null ? "BUSY" : "ACQUIRED");
            System.out.flush();
            if (args[0].equals("hold")) {
                while (System.in.read() != -1) {}
            }
        }
    }
}
"#;

fn java(source: &Path, mode: &str, lock_path: &Path) -> Option<(Child, BufReader<ChildStdout>)> {
    let java = std::env::var_os("PARTLOG_JAVA").unwrap_or_else(|| "java".into());
    let mut child = spawn_or_skip(
        Command::new(&java).arg(source).arg(mode).arg(lock_path),
        "java",
    )?;
    let stdout = BufReader::new(child.stdout.take().unwrap());
    Some((child, stdout))
}

#[test]
fn the_lock_conflicts_with_javas_file_channel_try_lock_both_ways() {
    let kafka = kafka_log_dir();
    let log_dir = kafka.path();
    let lock_path = log_dir.join(BROKER_LOCK);
    let source_dir = tempfile::tempdir().unwrap();
    let source = source_dir.path().join("KafkaStyleLock.java");
    std::fs::write(&source, JAVA_LOCK).unwrap();

    let Some((holder, mut out)) = java(&source, "hold", &lock_path) else {
        return;
    };
    assert_eq!(wait_for_line(&mut out, &["ACQUIRED", "BUSY"]), "ACQUIRED");
    let refused = Log::open(log_dir.join("topic-0"), config());
    assert!(matches!(refused, Err(Error::Locked { .. })), "{refused:?}");
    assert_eq!(read(log_dir, MARKER).as_deref(), Some(MARKER_BYTES));
    finish(holder);

    let log = Log::open(log_dir.join("topic-0"), config()).unwrap();
    let (prober, mut out) = java(&source, "try", &lock_path).unwrap();
    assert_eq!(wait_for_line(&mut out, &["ACQUIRED", "BUSY"]), "BUSY");
    finish(prober);
    log.close().unwrap();
    assert!(broker_lock_is_free(log_dir));
}

/// Not a test on its own: the child role of
/// [`a_killed_writer_leaves_the_marker_aside_and_the_next_clean_run_keeps_it_there`]. Started
/// with [`CHILD_DIR_VAR`] set, it opens that partition for writing, appends, says so, and waits
/// to be killed; without it, it returns at once.
#[test]
fn child_process_role_writer_killed_mid_run() {
    let Some(dir) = std::env::var_os(CHILD_DIR_VAR) else {
        return;
    };
    let log = Log::open(PathBuf::from(dir), config()).unwrap();
    append_n(&log, 10);
    log.wait_durable(9).unwrap();
    println!("{CHILD_READY}");
    std::io::stdout().flush().unwrap();
    // Blocks until the parent kills this process; should the parent go away first, leak the
    // log so that nothing is closed cleanly.
    let _ = std::io::stdin().lines().count();
    std::mem::forget(log);
}

#[test]
fn a_killed_writer_leaves_the_marker_aside_and_the_next_clean_run_keeps_it_there() {
    let kafka = kafka_log_dir();
    let log_dir = kafka.path();
    let partition = log_dir.join("topic-0");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_process_role_writer_killed_mid_run",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DIR_VAR, &partition)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    wait_for_line(&mut out, &[CHILD_READY]);
    assert_eq!(read(log_dir, MARKER), None);
    assert_eq!(read(log_dir, SET_ASIDE).as_deref(), Some(MARKER_BYTES));
    assert!(matches!(
        Log::open(&partition, config()),
        Err(Error::Locked { ref path, .. }) if path.ends_with(BROKER_LOCK)
    ));

    child.kill().unwrap(); // SIGKILL: no close, no destructor.
    assert!(!child.wait().unwrap().success());
    assert_eq!(read(log_dir, MARKER), None, "a crash leaves it aside");
    assert!(broker_lock_is_free(log_dir), "the kernel released the lock");

    // The next run recovers, and even a clean close must not tell the broker all is well: the
    // crash may have torn partitions this run never opened.
    let log = Log::open(&partition, config()).unwrap();
    assert!(!log.recovery_report().clean_shutdown);
    assert_eq!(values(&log).len(), 10);
    append_n(&log, 1);
    log.close().unwrap();
    assert_eq!(read(log_dir, MARKER), None);
    assert_eq!(read(log_dir, SET_ASIDE).as_deref(), Some(MARKER_BYTES));
    assert!(broker_lock_is_free(log_dir));

    // The broker then starts, recovers and shuts down cleanly, writing a new marker; the stale
    // set-aside file no longer means anything, and the next hand-off works as usual.
    let new_marker = br#"{"version":0,"brokerEpoch":43}"#;
    std::fs::write(log_dir.join(MARKER), new_marker).unwrap();
    let log = Log::open(&partition, config()).unwrap();
    assert_eq!(read(log_dir, MARKER), None);
    assert_eq!(read(log_dir, SET_ASIDE).as_deref(), Some(&new_marker[..]));
    log.close().unwrap();
    assert_eq!(read(log_dir, MARKER).as_deref(), Some(&new_marker[..]));
    assert_eq!(read(log_dir, SET_ASIDE), None);
}

/// The same contract on the simulator: machine crashes, fsync failures, and a "broker" that is
/// an OFD lock the test holds itself.
#[cfg(feature = "sim")]
mod simulated {
    use super::*;
    use std::sync::Arc;

    use partlog::FlushPolicy;
    use partlog::unstable::sim::{CrashConfig, FaultError, FaultOp, FaultRule};
    use partlog::unstable::{ManualClock, SimStorage};

    const LOG_DIR: &str = "/kafka";

    fn sim_config(sim: &SimStorage) -> LogConfig {
        let storage: Arc<dyn Storage> = Arc::new(sim.clone());
        LogConfig::builder_for_tests()
            .segment_bytes(4096)
            .flush_policy(FlushPolicy::EveryAppend)
            .storage(storage)
            .clock(Arc::new(ManualClock::new(1_700_000_000_000)))
            .build()
            .unwrap()
    }

    fn write_durably(sim: &SimStorage, path: &str, bytes: &[u8]) {
        let file = sim
            .open(Path::new(path), partlog::unstable::OpenMode::Create)
            .unwrap();
        file.set_len(0).unwrap();
        file.write_all_at(bytes, 0).unwrap();
        file.sync_all().unwrap();
        sim.sync_dir(Path::new(LOG_DIR)).unwrap();
    }

    /// A simulated Kafka log directory at `/kafka` with an empty partition directory `topic-0`,
    /// all of it durable (so that creating the partition directory does not happen to sync the
    /// log directory).
    fn sim_log_dir(seed: u64) -> SimStorage {
        let sim = SimStorage::new(seed);
        sim.create_dir_all(Path::new("/kafka/topic-0")).unwrap();
        sim.sync_dir(Path::new("/")).unwrap();
        write_durably(&sim, "/kafka/meta.properties", META_PROPERTIES.as_bytes());
        write_durably(&sim, "/kafka/.kafka_cleanshutdown", MARKER_BYTES);
        sim
    }

    fn sim_read(sim: &SimStorage, name: &str) -> Option<Vec<u8>> {
        let path = Path::new(LOG_DIR).join(name);
        match sim.file_state(&path) {
            Ok(state) => Some(state.current),
            Err(error) if error.io_kind() == Some(std::io::ErrorKind::NotFound) => None,
            Err(error) => panic!("{error}"),
        }
    }

    fn sim_lock_is_free(sim: &SimStorage) -> bool {
        match sim.lock_foreign_ofd(&Path::new(LOG_DIR).join(BROKER_LOCK)) {
            Ok(_released_at_once) => true,
            Err(Error::Locked { .. }) => false,
            Err(error) => panic!("{error}"),
        }
    }

    #[test]
    fn a_running_broker_makes_the_open_fail_before_anything_is_created() {
        let sim = sim_log_dir(1);
        let broker = sim
            .lock_foreign_ofd(&Path::new(LOG_DIR).join(BROKER_LOCK))
            .unwrap();
        let refused = Log::open("/kafka/topic-1", sim_config(&sim));
        assert!(matches!(refused, Err(Error::Locked { .. })), "{refused:?}");
        assert!(!sim.exists(Path::new("/kafka/topic-1")).unwrap());
        assert_eq!(sim_read(&sim, MARKER).as_deref(), Some(MARKER_BYTES));
        drop(broker);
        let log = Log::open("/kafka/topic-1", sim_config(&sim)).unwrap();
        assert!(!sim_lock_is_free(&sim));
        log.close().unwrap();
        assert!(sim_lock_is_free(&sim));
    }

    #[test]
    fn the_marker_is_durably_aside_before_any_write_and_durably_back_after_a_clean_close() {
        for seed in 0..16 {
            let sim = sim_log_dir(seed);
            let log = Log::open("/kafka/topic-0", sim_config(&sim)).unwrap();
            append_n(&log, 3);
            // Whatever image a crash now leaves, the broker must not find the marker.
            let crash = if seed % 2 == 0 {
                CrashConfig::lose_unsynced()
            } else {
                CrashConfig::random()
            };
            sim.crash_with(&crash);
            assert_eq!(sim_read(&sim, MARKER), None, "seed {seed}");
            assert_eq!(
                sim_read(&sim, SET_ASIDE).as_deref(),
                Some(MARKER_BYTES),
                "seed {seed}"
            );
            // The dead run's close fails, so it puts nothing back.
            assert!(log.close().is_err(), "seed {seed}");
            assert_eq!(sim_read(&sim, MARKER), None, "seed {seed}");

            // The next run recovers and, finding only a set-aside file, keeps it aside.
            let log = Log::open("/kafka/topic-0", sim_config(&sim)).unwrap();
            assert!(!log.recovery_report().clean_shutdown, "seed {seed}");
            assert_eq!(
                values(&log).len(),
                3,
                "seed {seed}: every append was durable"
            );
            log.close().unwrap();
            sim.crash_with(&CrashConfig::lose_unsynced());
            assert_eq!(sim_read(&sim, MARKER), None, "seed {seed}");

            // After the broker's own clean shutdown, a clean run puts its marker back durably.
            write_durably(&sim, "/kafka/.kafka_cleanshutdown", b"{\"brokerEpoch\":43}");
            let log = Log::open("/kafka/topic-0", sim_config(&sim)).unwrap();
            append_n(&log, 1);
            log.close().unwrap();
            sim.crash_with(&CrashConfig::lose_unsynced());
            assert_eq!(
                sim_read(&sim, MARKER).as_deref(),
                Some(&b"{\"brokerEpoch\":43}"[..]),
                "seed {seed}"
            );
            assert_eq!(sim_read(&sim, SET_ASIDE), None, "seed {seed}");
        }
    }

    #[test]
    fn a_poisoned_log_keeps_the_marker_aside_even_if_another_closes_cleanly_last() {
        let sim = sim_log_dir(7);
        let poisoned = Log::open("/kafka/topic-0", sim_config(&sim)).unwrap();
        let healthy = Log::open("/kafka/topic-1", sim_config(&sim)).unwrap();
        append_n(&healthy, 2);
        sim.inject(
            FaultRule::fail(FaultOp::Sync, 1)
                .error(FaultError::Eio)
                .on_paths_ending_with(".log"),
        );
        assert!(poisoned.append(&[record(0)]).is_err());
        assert!(poisoned.stats().poisoned);
        assert!(matches!(poisoned.close(), Err(Error::Poisoned)));
        assert!(!sim_lock_is_free(&sim), "topic-1 still holds it");
        healthy.close().unwrap();
        assert!(sim_lock_is_free(&sim));
        assert_eq!(sim_read(&sim, MARKER), None);
        assert_eq!(sim_read(&sim, SET_ASIDE).as_deref(), Some(MARKER_BYTES));
    }

    #[test]
    fn a_poisoned_log_alone_puts_nothing_back() {
        let sim = sim_log_dir(8);
        let log = Log::open("/kafka/topic-0", sim_config(&sim)).unwrap();
        sim.fail_nth(FaultOp::Sync, 1, FaultError::Eio);
        assert!(log.append(&[record(0)]).is_err());
        drop(log);
        assert!(sim_lock_is_free(&sim));
        assert_eq!(sim_read(&sim, MARKER), None);
        assert_eq!(sim_read(&sim, SET_ASIDE).as_deref(), Some(MARKER_BYTES));
    }

    #[test]
    fn a_log_dir_without_a_marker_gets_none_at_close() {
        let sim = sim_log_dir(9);
        sim.remove(Path::new("/kafka/.kafka_cleanshutdown"))
            .unwrap();
        let log = Log::open("/kafka/topic-0", sim_config(&sim)).unwrap();
        assert!(!sim_lock_is_free(&sim));
        append_n(&log, 2);
        log.close().unwrap();
        assert_eq!(sim_read(&sim, MARKER), None);
        assert_eq!(sim_read(&sim, SET_ASIDE), None);
    }
}
