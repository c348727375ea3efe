//! A real Apache Kafka 4.4 broker for tests: one KRaft process that is both controller and
//! broker, on 127.0.0.1 only, with a real client (confluent-kafka, through
//! `tests/kafka/client.py`) to create topics, produce and consume.
//!
//! Include it from a test crate with
//!
//! ```text
//! #[path = "common/broker.rs"]
//! mod broker;
//! ```
//!
//! (it brings `common/kafka.rs` along as `broker::kafka`, for DumpLogSegments), then:
//!
//! ```text
//! let Some(env) = broker::broker_env() else { return }; // None: skipped, with the reason printed
//! let work = tempfile::tempdir().unwrap();
//! let mut kafka = broker::Broker::start(env, work.path());   // formats work/logs, waits until ready
//! kafka.create_topic("t", 1, &[]);
//! let acked = kafka.produce("t", 0, &[broker::ClientRecord::new(b"k", b"v")], &Default::default());
//! kafka.stop();                                              // SIGTERM: Kafka's clean shutdown
//! // ... partlog works on kafka.partition_dir("t", 0) ...
//! kafka.restart();
//! assert!(kafka.server_log().contains(broker::CLEAN_LOAD_LINE));
//! let records = kafka.consume("t", 0, 0, broker::Isolation::ReadUncommitted);
//! ```
//!
//! # When it runs
//! Only with `PARTLOG_BROKER=1` in the environment (`tests/kafka/run.sh` sets it): a broker takes
//! seconds to start, so `cargo test` alone skips these tests with a `skipping: ...` line. With
//! `PARTLOG_BROKER=1`, Java and Kafka's jars are found as `common/kafka.rs` finds them, and
//! `python3` must import `confluent_kafka`; when either is missing the tests skip, except under
//! `CI=true`, where they panic.
//!
//! # What the broker is
//! `kafka.Kafka` (the `kafka_2.13` jar) on `tests/kafka/server.properties.in` with the ports
//! and log dir filled in, JVM options from `tests/kafka/jvm.options`, storage formatted once by
//! `kafka.tools.StorageTool format` with the fixed cluster id [`CLUSTER_ID`]. Its stdout and
//! stderr (Kafka's log, at info, through slf4j-simple) go to `server-<n>.log` in the work dir,
//! one file per start. The ports are chosen free at the first start and kept across restarts:
//! the controller's address is part of the static voter set.
//!
//! # What a hand-off test can rely on (seen with Kafka 4.4.0 on this harness)
//! - While the broker runs, the log dir holds `.lock`, locked with `FileChannel.tryLock` (a
//!   POSIX record lock, which conflicts with an OFD lock). A clean shutdown releases the lock and
//!   deletes the file; a SIGKILL leaves the file (unlocked). A broker that cannot take the lock
//!   exits during startup ([`Broker::try_restart`], [`LOCK_FAILED_LINE`]).
//! - A clean shutdown writes `<log dir>/.kafka_cleanshutdown` (`{"version":0,"brokerEpoch":N}`);
//!   the next start deletes it as soon as it has read it.
//! - A clean shutdown trims the active segment's `.index`/`.timeindex` to their entries and writes
//!   `<LEO>.snapshot` (producer state) into each partition directory.
//! - Log lines: see [`CLEAN_LOAD_LINE`], [`UNCLEAN_LOAD_LINE`], [`UNCLEAN_DIRS_LINE`],
//!   [`UNCLEAN_REGISTRATION_LINE`], [`UNCLEAN_ELECTION_LINE`], [`RECOVERING_SEGMENT_LINE`],
//!   [`TRUNCATED_LINE`], [`INVALID_MESSAGES_LINE`], [`LOCK_FAILED_LINE`].
//! - Using the client creates internal topics: `__consumer_offsets-0` (consume assigns with a
//!   group id) and `__transaction_state-0` (transactional produce), one partition each. The log
//!   dir also holds `__cluster_metadata-0` (KRaft) and Kafka's checkpoint files.
//!
//! Nothing here is timed: the waits are bounded ([`ready_timeout`], [`stop_timeout`],
//! [`CLIENT_TIMEOUT`]) so a hung JVM fails a test instead of stalling the suite. Each start
//! prints how long it took (stderr: `--nocapture` shows it). A test that fails (panics) with a
//! `Broker` alive keeps its server logs (see [`KEPT_LOGS_DIR`]) and prints where, with the
//! current log's last lines. A `Broker` that
//! is dropped while running is killed (SIGKILL), so a failing test leaves no JVM behind; when
//! `PARTLOG_BROKER_PID_DIR` is set (run.sh sets it), each broker's pid is also recorded there, so
//! run.sh can kill what a killed test process left.
#![allow(
    dead_code,
    reason = "every test crate that includes this module uses a different part of it"
)]

#[path = "kafka.rs"]
pub mod kafka;

use std::fmt::Write as _;
use std::fs::File;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long a start may take until the broker answers (JVM start, storage load, and after a
/// SIGKILL the expiry of the old broker session) on a machine that is not overloaded. About 5 s
/// on an idle 2-core machine. [`ready_timeout`] scales it with the load.
pub const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// The most [`ready_timeout`] allows, however loaded the machine: a broker that is not ready by
/// then hangs, and fails the test with its log.
pub const MAX_READY_TIMEOUT: Duration = Duration::from_secs(360);
/// How long a clean shutdown (SIGTERM) may take before [`Broker::stop`] gives up and kills,
/// on a machine that is not overloaded. About 2 s normally. [`stop_timeout`] scales it.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(60);
/// The most [`stop_timeout`] allows.
pub const MAX_STOP_TIMEOUT: Duration = Duration::from_secs(180);
/// Where a failed test's broker logs are kept: `$PARTLOG_CACHE/broker-logs` (.ci/run sets
/// `PARTLOG_CACHE`), else this directory under Cargo's target tmp dir.
pub const KEPT_LOGS_DIR: &str = "broker-logs";
/// How long one `client.py` run may take; it bounds its own waits at 60 s.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(120);

/// The cluster id every test cluster is formatted with: "partlog-tests-01" in Kafka's unpadded
/// base64url form.
pub const CLUSTER_ID: &str = "cGFydGxvZy10ZXN0cy0wMQ";

/// Logged once the broker is unfenced and its listeners accept connections
/// (`[KafkaRaftServer nodeId=1] Kafka Server started`).
pub const STARTED_LINE: &str = "Kafka Server started";
/// Logged at a start that found `.kafka_cleanshutdown` (LogManager):
/// `Skipping recovery of <n> logs from <dir> since clean shutdown file was found`.
pub const CLEAN_LOAD_LINE: &str = "since clean shutdown file was found";
/// Logged at a start that found no `.kafka_cleanshutdown` (LogManager):
/// `Recovering <n> logs from <dir> since no clean shutdown file was found`.
pub const UNCLEAN_LOAD_LINE: &str = "since no clean shutdown file was found";
/// The end of LogManager's load: `Loaded <n> logs in <ms>ms` after a clean shutdown, and
/// `Loaded <n> logs in <ms>ms (unclean log dirs = [<dir>])` otherwise.
pub const UNCLEAN_DIRS_LINE: &str = "unclean log dirs = [";
/// Logged by the controller when the broker registers without a clean-shutdown broker epoch
/// (`[QuorumController id=1] handleBrokerUncleanShutdown: changing <n> partition(s)`).
pub const UNCLEAN_REGISTRATION_LINE: &str = "handleBrokerUncleanShutdown";
/// Logged by the controller for each partition it re-elects after an unclean registration
/// (`Setting new leader for topicId <id>, partition <p> to 1 using an unclean election`).
pub const UNCLEAN_ELECTION_LINE: &str = "using an unclean election";
/// Logged by LogLoader for each segment it scans after an unclean shutdown
/// (`[LogLoader partition=<t-p>, dir=<dir>] Recovering unflushed segment <base>. <n> recovered
/// for <t-p>.`). The KRaft metadata log (`partition=__cluster_metadata-0`) logs it at every
/// start, clean or not: look for the topic partition's `partition=<topic>-<p>`.
pub const RECOVERING_SEGMENT_LINE: &str = "Recovering unflushed segment";
/// Logged by LogSegment.recover when it cuts a torn tail (at debug, which
/// `tests/kafka/jvm.options` enables for LogSegment):
/// `Truncated <n> invalid bytes at the end of segment <file> during recovery`.
pub const TRUNCATED_LINE: &str = "invalid bytes at the end of segment";
/// Logged (WARN) by LogSegment.recover when a complete batch fails its checks (a CRC mismatch,
/// say), before it truncates from there:
/// `Found invalid messages in log segment <file> at byte offset <n>: <why>. <cause>`.
/// A batch cut short (its length runs past the end of the file) is not "invalid": recovery just
/// stops there, and only [`TRUNCATED_LINE`] tells.
pub const INVALID_MESSAGES_LINE: &str = "Found invalid messages in log segment";

/// Logged (in a stack trace) when the broker cannot lock its log dir and exits during startup:
/// `Failed to acquire lock on file .lock in <dir>. A Kafka instance in another process or thread
/// is using this directory.` An OFD write lock (`F_OFD_SETLK`) on `.lock` held by another
/// process causes it; conversely, `F_OFD_SETLK` on `.lock` fails with EAGAIN while the broker
/// runs (its `FileChannel.tryLock` is a POSIX record lock, which conflicts with OFD locks).
pub const LOCK_FAILED_LINE: &str = "Failed to acquire lock on file .lock";

/// What running a broker needs, found once per test process.
#[derive(Debug)]
pub struct BrokerEnv {
    /// Java and Kafka's jars.
    pub tools: &'static kafka::KafkaTools,
    /// The Python that runs `tests/kafka/client.py` (it imports confluent_kafka).
    pub python: PathBuf,
}

/// Whether broker tests are asked for: `PARTLOG_BROKER=1`.
pub fn broker_requested() -> bool {
    std::env::var("PARTLOG_BROKER").is_ok_and(|value| value == "1")
}

/// What a broker test needs, or `None` (after a `skipping: ...` line on stderr) when it should
/// not run: without `PARTLOG_BROKER=1`, or when Java, Kafka's jars or the Python client are
/// missing.
///
/// # Panics
/// Under `CI=true` with `PARTLOG_BROKER=1`, when Java, the jars or the client are missing.
pub fn broker_env() -> Option<&'static BrokerEnv> {
    if !broker_requested() {
        eprintln!(
            "skipping: broker tests run only with PARTLOG_BROKER=1 (tests/kafka/run.sh sets it)"
        );
        return None;
    }
    static ENV: OnceLock<Result<BrokerEnv, String>> = OnceLock::new();
    let env = ENV.get_or_init(|| {
        let tools = kafka::kafka_tools().ok_or("Java or Kafka's jars are unavailable")?;
        let python = locate_python()?;
        Ok(BrokerEnv { tools, python })
    });
    match env {
        Ok(env) => Some(env),
        Err(why) if kafka::running_in_ci() => {
            panic!("the Kafka broker is required under CI=true with PARTLOG_BROKER=1, but: {why}")
        }
        Err(why) => {
            eprintln!("skipping: cannot run a Kafka broker: {why}");
            None
        }
    }
}

fn locate_python() -> Result<PathBuf, String> {
    let python = PathBuf::from("python3");
    let probe = Command::new(&python)
        .args(["-c", "import confluent_kafka"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|error| format!("cannot run python3: {error}"))?;
    if probe.status.success() {
        Ok(python)
    } else {
        Err(format!(
            "python3 cannot import confluent_kafka (pip install confluent-kafka): {}",
            String::from_utf8_lossy(&probe.stderr).trim()
        ))
    }
}

/// The repository's `tests/kafka` directory: the broker's config template, JVM options and the
/// client script. Found from the repository root, so that a workspace crate's tests that
/// include this file by path (crates/partlog-engine) find it too.
pub fn kafka_test_dir() -> PathBuf {
    kafka::repository_root().join("tests/kafka")
}

/// A single-node KRaft broker on 127.0.0.1 that this test started. Dropping it kills the
/// process if it still runs.
#[derive(Debug)]
pub struct Broker {
    env: &'static BrokerEnv,
    work_dir: PathBuf,
    log_dir: PathBuf,
    broker_port: u16,
    controller_port: u16,
    child: Option<Child>,
    starts: u32,
    /// Broker settings that override `server.properties.in`'s ([`Broker::start_with_settings`]).
    settings: Vec<(String, String)>,
}

impl Broker {
    /// Starts a broker whose log dir is `work_dir/logs`; see [`Broker::start_with_log_dir`].
    pub fn start(env: &'static BrokerEnv, work_dir: &Path) -> Broker {
        Broker::start_with_log_dir(env, work_dir, &work_dir.join("logs"))
    }

    /// Starts a broker on two free loopback ports with `log_dir` as its one log dir (formatted
    /// first if it holds no `meta.properties`), and waits until it is ready (see
    /// [`Broker::restart`]). Its config and logs go to `work_dir`.
    ///
    /// # Panics
    /// When formatting fails, or the broker exits or is not ready within [`ready_timeout`]
    /// (with the tail of its log in the message).
    pub fn start_with_log_dir(env: &'static BrokerEnv, work_dir: &Path, log_dir: &Path) -> Broker {
        Broker::start_configured(env, work_dir, log_dir, &[])
    }

    /// Starts a broker whose log dir is `work_dir/logs`, as [`Broker::start`] does, with
    /// `settings` overriding `server.properties.in`'s (for example
    /// `offsets.topic.num.partitions`, one there, 50 in Kafka's default), at every start.
    pub fn start_with_settings(
        env: &'static BrokerEnv,
        work_dir: &Path,
        settings: &[(&str, &str)],
    ) -> Broker {
        Broker::start_configured(env, work_dir, &work_dir.join("logs"), settings)
    }

    fn start_configured(
        env: &'static BrokerEnv,
        work_dir: &Path,
        log_dir: &Path,
        settings: &[(&str, &str)],
    ) -> Broker {
        std::fs::create_dir_all(work_dir).expect("create the broker's work dir");
        std::fs::create_dir_all(log_dir).expect("create the broker's log dir");
        let broker_port = free_port();
        let controller_port = loop {
            let port = free_port();
            if port != broker_port {
                break port;
            }
        };
        let mut broker = Broker {
            env,
            work_dir: work_dir.canonicalize().expect("canonical work dir"),
            log_dir: log_dir.canonicalize().expect("canonical log dir"),
            broker_port,
            controller_port,
            child: None,
            starts: 0,
            settings: settings
                .iter()
                .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
                .collect(),
        };
        broker.write_config();
        if !broker.log_dir.join("meta.properties").exists() {
            broker.format();
        }
        broker.restart();
        broker
    }

    fn config_path(&self) -> PathBuf {
        self.work_dir.join("server.properties")
    }

    fn write_config(&self) {
        let template_path = kafka_test_dir().join("server.properties.in");
        let template = std::fs::read_to_string(&template_path)
            .unwrap_or_else(|error| panic!("cannot read {}: {error}", template_path.display()));
        let log_dir = self.log_dir.to_str().expect("a UTF-8 log dir path");
        let mut config = template
            .replace("@BROKER_PORT@", &self.broker_port.to_string())
            .replace("@CONTROLLER_PORT@", &self.controller_port.to_string())
            .replace("@LOG_DIR@", log_dir);
        // A later line of a properties file overrides an earlier one.
        for (key, value) in &self.settings {
            writeln!(config, "{key}={value}").expect("write to a String");
        }
        std::fs::write(self.config_path(), config).expect("write server.properties");
    }

    fn java(&self) -> Command {
        let tools = self.env.tools;
        let mut command = Command::new(&tools.java);
        command
            .arg(format!(
                "@{}",
                kafka_test_dir().join("jvm.options").display()
            ))
            .arg("-cp")
            .arg(&tools.classpath)
            .stdin(Stdio::null());
        command
    }

    /// `kafka-storage.sh format`: writes `meta.properties` and the bootstrap metadata snapshot.
    fn format(&self) {
        let mut command = self.java();
        command
            .arg("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")
            .args([
                "kafka.tools.StorageTool",
                "format",
                "--cluster-id",
                CLUSTER_ID,
            ])
            .arg("--config")
            .arg(self.config_path());
        let (status, stdout, stderr) =
            run_with_timeout(command, None, ready_timeout(), "StorageTool");
        assert!(
            status.success(),
            "formatting {} failed ({status}):\n{stdout}\n{stderr}",
            self.log_dir.display()
        );
    }

    /// Starts the broker again (or for the first time) on the same ports and log dir, and waits
    /// until it is ready: it logged [`STARTED_LINE`] (after it was unfenced) and answers an
    /// ApiVersions request. Its log goes to a new `server-<n>.log`.
    ///
    /// # Panics
    /// If the broker is running, or it exits or is not ready within [`ready_timeout`].
    pub fn restart(&mut self) {
        if let Err(exited) = self.try_restart() {
            panic!(
                "the broker exited during startup ({}); its log ends:\n{}",
                exited.status, exited.log_tail
            );
        }
    }

    /// Like [`Broker::restart`], but a broker that exits during startup is an `Err`, for tests
    /// that expect Kafka to refuse to start: for example while another process holds the log
    /// dir's `.lock` (see [`LOCK_FAILED_LINE`]). [`Broker::server_log`] then has its whole log.
    ///
    /// # Panics
    /// If the broker is running, or it neither exits nor is ready within [`ready_timeout`]
    /// (re-read while waiting, so a load that rises during the start extends it).
    pub fn try_restart(&mut self) -> Result<(), StartupExit> {
        assert!(!self.is_running(), "restart of a broker that is running");
        self.starts += 1;
        let log_path = self.server_log_path();
        let log = File::create(&log_path).expect("create the server log");
        let mut command = self.java();
        command
            .arg("kafka.Kafka")
            .arg(self.config_path())
            .stdout(log.try_clone().expect("clone the server log handle"))
            .stderr(log);
        let child = command
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start the broker: {error}"));
        record_pid(child.id());
        self.child = Some(child);
        let started = Instant::now();
        let mut limit = ready_timeout();
        loop {
            if let Some(status) = self.child_mut().try_wait().expect("poll the broker") {
                let pid = self.child_mut().id();
                self.child = None;
                forget_pid(pid);
                self.report_start(started, limit, &format!("exited ({status})"));
                return Err(StartupExit {
                    status,
                    log_tail: self.server_log_tail(60),
                });
            }
            if self.server_log().contains(STARTED_LINE) && self.answers() {
                self.report_start(started, limit, "ready");
                return Ok(());
            }
            limit = limit.max(ready_timeout());
            if started.elapsed() >= limit {
                self.kill();
                self.report_start(started, limit, "NOT READY (killed)");
                panic!(
                    "the broker was not ready within {limit:?} ({}); its log ends:\n{}",
                    load_description(),
                    self.server_log_tail(60)
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Prints how start number `self.starts` went and how long it took, so that the broker
    /// stage's output shows how close each start came to its limit.
    fn report_start(&self, started: Instant, limit: Duration, outcome: &str) {
        let took = started.elapsed();
        let slow = if took > READY_TIMEOUT {
            format!(", over the {READY_TIMEOUT:?} an unloaded machine allows")
        } else {
            String::new()
        };
        eprintln!(
            "broker: start {} {outcome} after {:.1} s (limit {:.0} s{slow}; {}); log {}",
            self.starts,
            took.as_secs_f64(),
            limit.as_secs_f64(),
            load_description(),
            self.server_log_path().display()
        );
    }

    /// Copies every server log of this broker, and its config, out of the test's work dir
    /// (which the test's temporary directory takes with it) into a directory of their own under
    /// [`KEPT_LOGS_DIR`], and prints where, with the last 50 lines of the current log. Never
    /// panics: it runs while a failing test unwinds.
    pub fn keep_logs(&self) {
        let root = std::env::var_os("PARTLOG_CACHE")
            .filter(|dir| !dir.is_empty())
            .map_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")), PathBuf::from)
            .join(KEPT_LOGS_DIR);
        let binary = std::env::current_exe()
            .ok()
            .and_then(|exe| {
                exe.file_stem()
                    .map(|stem| stem.to_string_lossy().into_owned())
            })
            .unwrap_or_else(|| "test".into());
        let thread = std::thread::current()
            .name()
            .unwrap_or("main")
            .replace("::", ".");
        let stamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_secs());
        let dir = root.join(format!("{binary}-{thread}-{stamp}-{}", std::process::id()));
        if let Err(error) = std::fs::create_dir_all(&dir) {
            eprintln!(
                "broker: cannot keep the server logs in {}: {error}",
                dir.display()
            );
            return;
        }
        let mut files = vec![self.config_path()];
        files.extend((1..=self.starts).map(|start| self.server_log_path_of(start)));
        for file in files {
            let Some(name) = file.file_name() else {
                continue;
            };
            if let Err(error) = std::fs::copy(&file, dir.join(name)) {
                eprintln!("broker: cannot keep {}: {error}", file.display());
            }
        }
        let log = std::fs::read(self.server_log_path())
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        eprintln!(
            "broker: the test failed; its broker's server logs are kept in {}\nbroker: the \
             last 50 lines of server-{}.log:\n{}",
            dir.display(),
            self.starts,
            lines[lines.len().saturating_sub(50)..].join("\n")
        );
    }

    fn child_mut(&mut self) -> &mut Child {
        self.child.as_mut().expect("a running broker")
    }

    /// Whether the broker process is alive.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut().map(Child::try_wait) {
            Some(Ok(None)) => true,
            Some(Ok(Some(_))) => {
                if let Some(child) = self.child.take() {
                    forget_pid(child.id());
                }
                false
            }
            Some(Err(error)) => panic!("cannot poll the broker: {error}"),
            None => false,
        }
    }

    /// Stops the broker as an operator does: SIGTERM, then Kafka's shutdown hook flushes and
    /// closes every log and writes `.kafka_cleanshutdown`. Returns the exit status.
    ///
    /// # Panics
    /// If the broker is not running, or does not exit within [`stop_timeout`] (it is then
    /// killed, and the message holds the tail of its log).
    pub fn stop(&mut self) -> ExitStatus {
        let pid = self.child_mut().id();
        let sent = Command::new("kill")
            .args(["-s", "TERM", &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -s TERM {pid} failed: {sent}");
        let started = Instant::now();
        let mut limit = stop_timeout();
        loop {
            if let Some(status) = self.child_mut().try_wait().expect("poll the broker") {
                self.child = None;
                forget_pid(pid);
                return status;
            }
            limit = limit.max(stop_timeout());
            if started.elapsed() >= limit {
                self.kill();
                panic!(
                    "the broker did not shut down within {limit:?} ({}); its log ends:\n{}",
                    load_description(),
                    self.server_log_tail(60)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills the broker with SIGKILL: an unclean shutdown (no flush, no `.kafka_cleanshutdown`).
    /// Does nothing if it is not running.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let pid = child.id();
            // An error means it already exited; wait() reaps it either way.
            let _ = child.kill();
            let _ = child.wait();
            forget_pid(pid);
        }
    }

    /// The address clients connect to: `127.0.0.1:<port>`.
    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.broker_port)
    }

    /// The broker's log dir (`log.dirs`; also its metadata log dir).
    pub fn log_dir(&self) -> &Path {
        &self.log_dir
    }

    /// The work dir: `server.properties` and the server logs.
    pub fn work_dir(&self) -> &Path {
        &self.work_dir
    }

    /// The directory of one partition: `<log dir>/<topic>-<partition>`.
    pub fn partition_dir(&self, topic: &str, partition: u32) -> PathBuf {
        self.log_dir.join(format!("{topic}-{partition}"))
    }

    /// How many times the broker was started.
    pub fn starts(&self) -> u32 {
        self.starts
    }

    /// The log file of the current (or last) start: `server-<n>.log`.
    pub fn server_log_path(&self) -> PathBuf {
        self.server_log_path_of(self.starts)
    }

    /// The log file of the `start`-th start (1-based).
    pub fn server_log_path_of(&self, start: u32) -> PathBuf {
        self.work_dir.join(format!("server-{start}.log"))
    }

    /// Kafka's log of the current (or last) start, as text.
    pub fn server_log(&self) -> String {
        read_lossy(&self.server_log_path())
    }

    /// The lines of the current start's log that contain `needle`.
    pub fn server_log_lines(&self, needle: &str) -> Vec<String> {
        self.server_log()
            .lines()
            .filter(|line| line.contains(needle))
            .map(str::to_owned)
            .collect()
    }

    /// The last `lines` lines of the current start's log, for failure messages.
    pub fn server_log_tail(&self, lines: usize) -> String {
        let log = self.server_log();
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Waits until the current start's log contains `needle`, or `timeout` passes; returns
    /// whether it did.
    pub fn wait_for_log(&self, needle: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.server_log().contains(needle) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Whether the broker answers an ApiVersions request on its client port.
    pub fn answers(&self) -> bool {
        api_versions_answered(self.broker_port)
    }

    /// Runs `tests/kafka/client.py <command> <bootstrap> <topic> <args>`, feeding `stdin`, and
    /// returns its stdout.
    ///
    /// # Panics
    /// If it fails or runs longer than [`CLIENT_TIMEOUT`], with its stderr in the message.
    pub fn client(&self, command: &str, topic: &str, args: &[&str], stdin: Option<&str>) -> String {
        let mut process = Command::new(&self.env.python);
        process
            .arg(kafka_test_dir().join("client.py"))
            .arg(command)
            .arg(self.bootstrap())
            .arg(topic)
            .args(args);
        let line = format!("client.py {command} {topic} {}", args.join(" "));
        let (status, stdout, stderr) = run_with_timeout(process, stdin, CLIENT_TIMEOUT, &line);
        assert!(
            status.success(),
            "`{line}` failed ({status}):\n{stderr}\nbroker log ends:\n{}",
            self.server_log_tail(30)
        );
        stdout
    }

    /// Creates a topic (replication factor 1) with topic-level `configs`, and waits until every
    /// partition has a leader.
    pub fn create_topic(&self, topic: &str, partitions: u32, configs: &[(&str, &str)]) {
        let partitions = partitions.to_string();
        let mut args = vec!["--partitions".to_owned(), partitions];
        for (key, value) in configs {
            args.push("--config".to_owned());
            args.push(format!("{key}={value}"));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.client("create-topic", topic, &args, None);
    }

    /// Each partition of `topic` with its leader (-1 when it has none) and ISR, from the
    /// broker's metadata.
    pub fn leaders(&self, topic: &str) -> Vec<PartitionLeader> {
        self.client("leaders", topic, &[], None)
            .lines()
            .map(|line| {
                let fields: Vec<&str> = line.split('\t').collect();
                let [partition, leader, isr] = fields[..] else {
                    panic!("bad `leaders` line {line:?}");
                };
                PartitionLeader {
                    partition: partition.parse().expect("partition id"),
                    leader: leader.parse().expect("leader id"),
                    isr: match isr {
                        "-" => Vec::new(),
                        isr => isr
                            .split(',')
                            .map(|id| id.parse().expect("isr id"))
                            .collect(),
                    },
                }
            })
            .collect()
    }

    /// Produces `records` to one partition (in one batch where the client can; `offset` is
    /// ignored and a `timestamp` of `None` means "now") and returns them as the broker
    /// acknowledged them: with their offsets and timestamps.
    pub fn produce(
        &self,
        topic: &str,
        partition: u32,
        records: &[ClientRecord],
        options: &ProduceOptions,
    ) -> Vec<ClientRecord> {
        let mut input = String::new();
        for record in records {
            input.push_str(&record.to_line());
            input.push('\n');
        }
        let partition = partition.to_string();
        let mut args = vec![
            "--partition",
            &partition,
            "--compression",
            options.compression,
        ];
        if let Some(id) = options.transactional_id {
            args.extend(["--transactional-id", id]);
            if options.abort {
                args.push("--abort");
            }
        }
        if options.idempotent {
            args.push("--idempotent");
        }
        parse_record_lines(&self.client("produce", topic, &args, Some(&input)))
    }

    /// Produces `records` (keys and values; `offset` ignored) naming no partition, so that the
    /// client's librdkafka `partitioner` (e.g. `murmur2_random`, the Java client's) places
    /// them; returns each as the broker acknowledged it, with the partition it went to.
    pub fn produce_with_partitioner(
        &self,
        topic: &str,
        records: &[ClientRecord],
        partitioner: &str,
    ) -> Vec<(ClientRecord, u32)> {
        let mut input = String::new();
        for record in records {
            input.push_str(&record.to_line());
            input.push('\n');
        }
        let output = self.client(
            "produce",
            topic,
            &["--partitioner", partitioner],
            Some(&input),
        );
        record_lines(&output)
            .map(|line| {
                let (record, extra) = ClientRecord::parse_line(line);
                let partition = extra
                    .first()
                    .and_then(|field| field.parse().ok())
                    .unwrap_or_else(|| panic!("no partition after the record in {line:?}"));
                (record, partition)
            })
            .collect()
    }

    /// Every record of one partition from `from` to its end, as a consumer sees it: control
    /// records skipped, and under [`Isolation::ReadCommitted`] aborted records too.
    pub fn consume(
        &self,
        topic: &str,
        partition: u32,
        from: i64,
        isolation: Isolation,
    ) -> Vec<ClientRecord> {
        let partition = partition.to_string();
        let from = from.to_string();
        let args = [
            "--partition",
            &partition,
            "--from",
            &from,
            "--isolation",
            isolation.as_str(),
        ];
        parse_record_lines(&self.client("consume", topic, &args, None))
    }

    /// Reads `count` records of `topic` as a member of the classic consumer group `group`
    /// (client id `client_id`), commits synchronously, and returns the committed
    /// `(partition, next offset)` pairs. With `stay`, the client exits without leaving the
    /// group: the broker keeps it as a member (for 5 minutes of session).
    pub fn consume_in_group(
        &self,
        topic: &str,
        group: &str,
        count: usize,
        client_id: &str,
        stay: bool,
    ) -> Vec<(i32, i64)> {
        let count = count.to_string();
        let mut args = vec![
            "--group",
            group,
            "--count",
            &count,
            "--client-id",
            client_id,
        ];
        if stay {
            args.push("--stay");
        }
        record_lines(&self.client("consume-group", topic, &args, None))
            .map(|line| {
                let (partition, offset) = line
                    .split_once('\t')
                    .unwrap_or_else(|| panic!("bad consume-group line {line:?}"));
                (
                    partition.parse().expect("a partition"),
                    offset.parse().expect("an offset"),
                )
            })
            .collect()
    }

    /// Runs `kafka-consumer-groups.sh` (Kafka's `ConsumerGroupCommand`) against this broker
    /// with `args` and returns its stdout.
    ///
    /// # Panics
    /// If it fails or runs longer than [`CLIENT_TIMEOUT`], with its stderr in the message.
    pub fn consumer_groups(&self, args: &[&str]) -> String {
        let mut command = self.java();
        command
            .arg("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")
            .arg("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand")
            .arg("--bootstrap-server")
            .arg(self.bootstrap())
            .args(args);
        let line = format!("kafka-consumer-groups.sh {}", args.join(" "));
        let (status, stdout, stderr) = run_with_timeout(command, None, CLIENT_TIMEOUT, &line);
        assert!(
            status.success(),
            "`{line}` failed ({status}):\n{stdout}\n{stderr}\nbroker log ends:\n{}",
            self.server_log_tail(30)
        );
        stdout
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.kill();
        // A failing test: its work dir goes with its temporary directory, so the logs that
        // explain the failure are copied out first.
        if std::thread::panicking() && self.starts > 0 {
            self.keep_logs();
        }
    }
}

/// The 1-minute load average per CPU, at least 1: how many times slower than on an unloaded
/// machine a start can be expected to be.
fn load_factor() -> f64 {
    (load_average() / cpus() as f64).max(1.0)
}

/// The 1-minute load average (0 where `/proc/loadavg` cannot be read).
fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
}

/// "load 15.2 on 2 CPUs", for messages.
fn load_description() -> String {
    format!("load {:.1} on {} CPUs", load_average(), cpus())
}

/// `base` times [`load_factor`], at most `max`; `PARTLOG_BROKER_TIMEOUT_SCALE` (a number)
/// replaces the load factor, to reproduce a loaded machine's limits.
fn scaled_timeout(base: Duration, max: Duration) -> Duration {
    let factor = std::env::var("PARTLOG_BROKER_TIMEOUT_SCALE")
        .ok()
        .and_then(|scale| scale.parse::<f64>().ok())
        .filter(|scale| scale.is_finite() && *scale > 0.0)
        .unwrap_or_else(load_factor);
    base.mul_f64(factor).min(max)
}

/// How long a start may take now: [`READY_TIMEOUT`] times the load per CPU, at most
/// [`MAX_READY_TIMEOUT`]. Under load average 15 on 2 cores the broker tests took 255-280 s in
/// all, and a fixed 120 s per start was the suspect of a failure seen once; the cap still
/// fails a start that hangs.
pub fn ready_timeout() -> Duration {
    scaled_timeout(READY_TIMEOUT, MAX_READY_TIMEOUT)
}

/// How long a clean shutdown may take now: [`STOP_TIMEOUT`] scaled as [`ready_timeout`] is,
/// at most [`MAX_STOP_TIMEOUT`].
pub fn stop_timeout() -> Duration {
    scaled_timeout(STOP_TIMEOUT, MAX_STOP_TIMEOUT)
}

/// A broker that exited during startup ([`Broker::try_restart`]).
#[derive(Debug)]
pub struct StartupExit {
    /// Its exit status.
    pub status: ExitStatus,
    /// The last 60 lines of its log.
    pub log_tail: String,
}

/// A partition's leadership, from [`Broker::leaders`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionLeader {
    /// The partition id.
    pub partition: u32,
    /// The leader's node id; -1 when the partition has no leader.
    pub leader: i32,
    /// The in-sync replicas.
    pub isr: Vec<i32>,
}

/// How [`Broker::produce`] sends.
#[derive(Debug, Clone, Copy)]
pub struct ProduceOptions<'a> {
    /// `compression.type`: none, gzip, snappy, lz4 or zstd.
    pub compression: &'a str,
    /// Send the records as one transaction of this transactional id.
    pub transactional_id: Option<&'a str>,
    /// With a transactional id: abort the transaction (after the records reached the log)
    /// instead of committing it.
    pub abort: bool,
    /// An idempotent producer (a producer id and sequence numbers in the batch).
    pub idempotent: bool,
}

impl Default for ProduceOptions<'_> {
    fn default() -> Self {
        ProduceOptions {
            compression: "none",
            transactional_id: None,
            abort: false,
            idempotent: false,
        }
    }
}

/// Which records a consumer sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// Every data record up to the high watermark, aborted ones included.
    ReadUncommitted,
    /// Only committed records, up to the last stable offset.
    ReadCommitted,
}

impl Isolation {
    fn as_str(self) -> &'static str {
        match self {
            Isolation::ReadUncommitted => "read_uncommitted",
            Isolation::ReadCommitted => "read_committed",
        }
    }
}

/// A record as `client.py` reads and prints it: one tab-separated line
/// `offset timestamp key value headers`, bytes in lowercase hex, `-` for null (and for "none":
/// no offset yet, no timestamp, no headers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientRecord {
    /// The offset the broker acknowledged (or a consumer read); `None` before producing.
    pub offset: Option<i64>,
    /// The record's timestamp; `None` before producing means "now".
    pub timestamp: Option<i64>,
    /// The key; `None` is a null key.
    pub key: Option<Vec<u8>>,
    /// The value; `None` is a tombstone.
    pub value: Option<Vec<u8>>,
    /// The headers, in order; a header value may be null.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

impl ClientRecord {
    /// A record to produce, with a key and a value, no headers, timestamped "now".
    pub fn new(key: &[u8], value: &[u8]) -> ClientRecord {
        ClientRecord {
            offset: None,
            timestamp: None,
            key: Some(key.to_vec()),
            value: Some(value.to_vec()),
            headers: Vec::new(),
        }
    }

    /// The record as one `client.py` line (no newline).
    pub fn to_line(&self) -> String {
        let number = |n: Option<i64>| n.map_or_else(|| "-".to_owned(), |n| n.to_string());
        let headers = if self.headers.is_empty() {
            "-".to_owned()
        } else {
            self.headers
                .iter()
                .map(|(key, value)| format!("{}={}", hex(key.as_bytes()), hex_or_null(value)))
                .collect::<Vec<_>>()
                .join(",")
        };
        format!(
            "{}\t{}\t{}\t{}\t{}",
            number(self.offset),
            number(self.timestamp),
            hex_or_null(&self.key),
            hex_or_null(&self.value),
            headers
        )
    }

    /// Parses the first five fields of a `client.py` line; returns the record and the fields
    /// after them (the broker fixture's `expected.tsv` adds codec and transaction state).
    ///
    /// # Panics
    /// On a malformed line.
    pub fn parse_line(line: &str) -> (ClientRecord, Vec<String>) {
        let fields: Vec<&str> = line.split('\t').collect();
        let [offset, timestamp, key, value, headers, extra @ ..] = fields.as_slice() else {
            panic!("expected at least 5 tab-separated fields in {line:?}");
        };
        let number = |text: &str| match text {
            "-" => None,
            text => Some(
                text.parse()
                    .unwrap_or_else(|_| panic!("bad number {text:?} in {line:?}")),
            ),
        };
        let headers = match *headers {
            "-" => Vec::new(),
            headers => headers
                .split(',')
                .map(|header| {
                    let (key, value) = header
                        .split_once('=')
                        .unwrap_or_else(|| panic!("bad header {header:?} in {line:?}"));
                    let key = unhex(key, line);
                    let key = String::from_utf8(key)
                        .unwrap_or_else(|_| panic!("non-UTF-8 header key in {line:?}"));
                    (key, unhex_or_null(value, line))
                })
                .collect(),
        };
        let record = ClientRecord {
            offset: number(offset),
            timestamp: number(timestamp),
            key: unhex_or_null(key, line),
            value: unhex_or_null(value, line),
            headers,
        };
        let extra = extra.iter().map(|field| (*field).to_owned()).collect();
        (record, extra)
    }
}

/// Every record line of `text`, skipping empty lines and `#` comments.
pub fn parse_record_lines(text: &str) -> Vec<ClientRecord> {
    record_lines(text)
        .map(|line| ClientRecord::parse_line(line).0)
        .collect()
}

/// The record lines of `text`: not empty, not a `#` comment.
pub fn record_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
}

fn hex(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        write!(text, "{byte:02x}").expect("write to a String");
    }
    text
}

fn hex_or_null(bytes: &Option<Vec<u8>>) -> String {
    bytes.as_deref().map_or_else(|| "-".to_owned(), hex)
}

fn unhex(text: &str, line: &str) -> Vec<u8> {
    assert!(
        text.len().is_multiple_of(2),
        "odd-length hex {text:?} in {line:?}"
    );
    (0..text.len())
        .step_by(2)
        .map(|at| {
            u8::from_str_radix(&text[at..at + 2], 16)
                .unwrap_or_else(|_| panic!("bad hex {text:?} in {line:?}"))
        })
        .collect()
}

fn unhex_or_null(text: &str, line: &str) -> Option<Vec<u8>> {
    (text != "-").then(|| unhex(text, line))
}

/// A port that was free on 127.0.0.1 a moment ago (the OS picks it).
fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("bind an ephemeral loopback port")
}

/// Sends ApiVersions v0 (request header v1: api key 18, version 0, a correlation id, a client
/// id; no body) and checks the response's correlation id and error code 0.
fn api_versions_answered(port: u16) -> bool {
    const CORRELATION_ID: i32 = 0x7061_726c; // "parl"
    let client_id = b"partlog-probe";
    let mut request = Vec::new();
    request.extend_from_slice(&18_i16.to_be_bytes());
    request.extend_from_slice(&0_i16.to_be_bytes());
    request.extend_from_slice(&CORRELATION_ID.to_be_bytes());
    request.extend_from_slice(&(client_id.len() as i16).to_be_bytes());
    request.extend_from_slice(client_id);
    let mut frame = (request.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&request);

    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let timeout = Duration::from_secs(5);
    let Ok(mut stream) = TcpStream::connect_timeout(&address, timeout) else {
        return false;
    };
    let mut response = [0_u8; 10]; // size i32, correlation id i32, error code i16
    stream.set_read_timeout(Some(timeout)).is_ok()
        && stream.set_write_timeout(Some(timeout)).is_ok()
        && stream.write_all(&frame).is_ok()
        && stream.read_exact(&mut response).is_ok()
        && response[4..8] == CORRELATION_ID.to_be_bytes()
        && response[8..10] == 0_i16.to_be_bytes()
}

fn read_lossy(path: &Path) -> String {
    match std::fs::read(path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(error) => panic!("cannot read {}: {error}", path.display()),
    }
}

/// Where run.sh wants broker pids recorded: `$PARTLOG_BROKER_PID_DIR/<pid>`.
fn pid_file(pid: u32) -> Option<PathBuf> {
    let dir = std::env::var_os("PARTLOG_BROKER_PID_DIR").filter(|dir| !dir.is_empty())?;
    Some(PathBuf::from(dir).join(pid.to_string()))
}

fn record_pid(pid: u32) {
    if let Some(file) = pid_file(pid) {
        // Best effort: the registry only helps run.sh clean up after a killed test process.
        let _ = std::fs::write(file, "");
    }
}

fn forget_pid(pid: u32) {
    if let Some(file) = pid_file(pid) {
        let _ = std::fs::remove_file(file);
    }
}

/// [`kafka::run_with_timeout`], with the output as text.
fn run_with_timeout(
    command: Command,
    stdin: Option<&str>,
    timeout: Duration,
    what: &str,
) -> (ExitStatus, String, String) {
    let (status, stdout, stderr) = kafka::run_with_timeout(command, stdin, timeout, what);
    (
        status,
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}
