//! Process crash: `partlog produce --flush always
//! --print-offsets --batch 1` runs as a child process fed through a pipe, and is killed with
//! SIGKILL at a random moment. Every offset it printed was acknowledged, so after the kill:
//!
//! - `partlog verify` passes (exit 0) on the directory as the kill left it, before anything
//!   repairs it;
//! - the log reopens, and holds every acknowledged line, with its key and value, at its offset;
//! - it holds nothing else: each record above the round's start offset is the line fed at that
//!   position (unacknowledged lines may or may not be there), and everything from earlier rounds
//!   is unchanged.
//!
//! Each round continues the same directory, so later rounds also kill a producer that opened a
//! log recovered from the previous kill, and small segments make rolls happen under the kill.
//! Rounds: 10, or `PARTLOG_KILL_ROUNDS`. The kill moment comes from a seed printed at the start
//! (`PARTLOG_KILL_SEED` repeats the choice of moments, not the scheduling around them). Nothing
//! here is timed: the waits only decide when to kill.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use partlog::unstable::SplitMix64;
use partlog::{Log, LogConfig, ReadBound};

const DEFAULT_ROUNDS: usize = 10;
/// Most acknowledgements a round waits for before its kill.
const MAX_ACKS_BEFORE_KILL: u64 = 1500;

/// A seeded source of kill moments: partlog's own generator.
struct Rng(SplitMix64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(SplitMix64::new(seed))
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.0.next_u64() % bound
    }
}

/// The line fed at position `n` of round `round`: key `r<round>n<n>`, then '=', then a value
/// of 0 to 299 letters, so that batches vary in size.
fn line(round: usize, n: u64) -> (Vec<u8>, Vec<u8>) {
    let mut rng = Rng::new((round as u64) << 40 ^ n);
    let len = rng.below(300) as usize;
    let value: Vec<u8> = (0..len).map(|_| b'a' + rng.below(26) as u8).collect();
    (format!("r{round}n{n}").into_bytes(), value)
}

fn env_number(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    Some(
        value
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value:?} is not a number")),
    )
}

#[test]
fn acknowledged_lines_survive_sigkill() {
    let rounds = env_number("PARTLOG_KILL_ROUNDS").map_or(DEFAULT_ROUNDS, |n| n as usize);
    let seed = env_number("PARTLOG_KILL_SEED").unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    });
    eprintln!("cli_kill: {rounds} rounds, PARTLOG_KILL_SEED={seed}");
    let mut rng = Rng::new(seed);
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("topic-0");
    // The log's records, (key, value) by offset, as of the last reopen.
    let mut records: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut acknowledged_total = 0usize;
    let mut torn_tails = 0usize;
    for round in 0..rounds {
        let start = records.len() as i64;
        let codec = ["none", "lz4", "zstd"][round % 3];
        let acks_wanted = rng.below(MAX_ACKS_BEFORE_KILL);
        let extra_wait = Duration::from_micros(rng.below(20_000));
        let printed = run_and_kill(&dir, round, codec, acks_wanted, extra_wait);

        // The offsets came out in order, one per line fed, from the log end at the start.
        let expected: Vec<i64> = (start..start + printed.len() as i64).collect();
        assert_eq!(printed, expected, "round {round}: printed offsets");
        acknowledged_total += printed.len();

        // verify sees the directory exactly as the kill left it.
        let verify = Command::new(env!("CARGO_BIN_EXE_partlog"))
            .arg("verify")
            .arg(&dir)
            .output()
            .expect("run partlog verify");
        let report = String::from_utf8_lossy(&verify.stdout);
        assert!(
            verify.status.success(),
            "round {round} (seed {seed}): verify failed ({}):\n{report}\n{}",
            verify.status,
            String::from_utf8_lossy(&verify.stderr)
        );
        if report.contains("torn tail") {
            torn_tails += 1;
        }

        let log = Log::open(&dir, LogConfig::default()).unwrap();
        let end = log.log_end_offset();
        assert!(
            end >= start + printed.len() as i64,
            "round {round} (seed {seed}): the log ends at {end}, but offsets up to {} were \
             acknowledged",
            start + printed.len() as i64 - 1
        );
        let mut found = Vec::new();
        for record in log.records(0, ReadBound::LogEnd) {
            let record = record.unwrap();
            assert_eq!(record.offset, found.len() as i64, "round {round}: a gap");
            found.push((
                record.key.unwrap_or_default(),
                record.value.unwrap_or_default(),
            ));
        }
        assert_eq!(found.len() as i64, end);
        assert_eq!(
            found[..records.len()],
            records[..],
            "round {round} (seed {seed}): records of earlier rounds changed"
        );
        for (offset, record) in found.iter().enumerate().skip(records.len()) {
            let n = offset as u64 - start as u64;
            assert_eq!(
                *record,
                line(round, n),
                "round {round} (seed {seed}): offset {offset} is not line {n} of the round"
            );
        }
        log.close().unwrap();
        records = found;
    }
    eprintln!(
        "cli_kill: {acknowledged_total} acknowledged lines over {rounds} kills, all found; \
         {} records in the log; verify saw a torn tail after {torn_tails} kills",
        records.len()
    );
}

/// Runs one producer, feeds it the round's lines until it dies, and kills it once it has
/// printed `acks_wanted` offsets (or sooner, if it cannot) and `extra_wait` has passed. Returns
/// the offsets it printed: whole lines only, since the kill may cut the last one.
fn run_and_kill(
    dir: &Path,
    round: usize,
    codec: &str,
    acks_wanted: u64,
    extra_wait: Duration,
) -> Vec<i64> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_partlog"))
        .arg("produce")
        .arg(dir)
        .args(["--flush", "always", "--print-offsets", "--batch", "1"])
        .args(["--key-separator", "=", "--compression", codec])
        .args(["--segment-bytes", "65536", "--allow-small-segments"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start partlog produce");
    let stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let acks = Arc::new(AtomicUsize::new(0));

    let feeder: JoinHandle<()> = std::thread::spawn(move || {
        let mut stdin = std::io::BufWriter::new(stdin);
        for n in 0.. {
            let (key, value) = line(round, n);
            let fed = stdin
                .write_all(&key)
                .and_then(|()| stdin.write_all(b"="))
                .and_then(|()| stdin.write_all(&value))
                .and_then(|()| stdin.write_all(b"\n"))
                .and_then(|()| stdin.flush());
            if fed.is_err() {
                // The producer is gone: the pipe broke.
                return;
            }
        }
    });
    let reader = {
        let acks = Arc::clone(&acks);
        std::thread::spawn(move || {
            let mut printed = Vec::new();
            let mut stdout = BufReader::new(stdout);
            let mut text = String::new();
            loop {
                text.clear();
                match stdout.read_line(&mut text) {
                    Ok(0) | Err(_) => return printed,
                    Ok(_) => {}
                }
                let Some(offset) = text.strip_suffix('\n') else {
                    // Cut by the kill: never a complete acknowledgement.
                    return printed;
                };
                printed.push(offset.parse::<i64>().expect("an offset per line"));
                acks.store(printed.len(), Ordering::Release);
            }
        })
    };

    while (acks.load(Ordering::Acquire) as u64) < acks_wanted {
        if child_exited(&mut child) {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(extra_wait);
    let exited_by_itself = child_exited(&mut child);
    child.kill().expect("SIGKILL the producer");
    let status = child.wait().unwrap();
    let printed = reader.join().unwrap();
    feeder.join().unwrap();
    if exited_by_itself {
        let mut stderr = String::new();
        let _ = std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr);
        panic!("round {round}: the producer exited by itself ({status}): {stderr}");
    }
    printed
}

fn child_exited(child: &mut Child) -> bool {
    child.try_wait().expect("poll the producer").is_some()
}
