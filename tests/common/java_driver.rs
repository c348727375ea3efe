//! A driver of Kafka's own Java classes for the differential tests of the workspace crates
//! (`crates/partlog-engine/tests/kafka_classes.rs`, `crates/partlog-groups/tests/kafka_classes.rs`):
//! a `.java` file compiled once per test binary against the jars `tests/common/kafka.rs` finds,
//! then fed one command per line, answering one line each. Include it beside `kafka.rs`:
//!
//! ```text
//! #[path = "../../../tests/common/kafka.rs"]
//! mod kafka;
//! #[path = "../../../tests/common/java_driver.rs"]
//! mod java_driver;
//! ```
//!
//! Without Java, `javac` or the jars the tests skip with a message, except under `CI=true`,
//! where they fail.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use partlog::unstable::SplitMix64;

use crate::kafka;

/// A compiled driver: the `java` to run it with, its classpath (its classes, then Kafka's
/// jars) and its class name.
#[derive(Debug)]
pub struct JavaDriver {
    java: PathBuf,
    classpath: String,
    class: &'static str,
}

/// Compiles `source`, the driver `class`, into this test binary's temporary directory the
/// first time `cell` is asked; `None` to skip.
pub fn compile(
    cell: &'static OnceLock<Result<JavaDriver, String>>,
    class: &'static str,
    source: &Path,
    temp_dir: &Path,
) -> Option<&'static JavaDriver> {
    let tools = kafka::kafka_tools()?;
    let compiled = cell.get_or_init(|| {
        let javac = match std::env::var_os("PARTLOG_JAVAC").filter(|v| !v.is_empty()) {
            Some(javac) => PathBuf::from(javac),
            None => tools
                .java
                .parent()
                .filter(|dir| !dir.as_os_str().is_empty())
                .map_or_else(|| PathBuf::from("javac"), |dir| dir.join("javac")),
        };
        // Per process: test binaries of one package share `temp_dir`, and a javac rewriting a
        // class file that another binary's JVM is loading fails that JVM.
        let classes = temp_dir.join(format!("{class}-{}", std::process::id()));
        std::fs::create_dir_all(&classes).map_err(|e| e.to_string())?;
        let output = Command::new(&javac)
            .arg("-d")
            .arg(&classes)
            .arg("-cp")
            .arg(&tools.classpath)
            .arg(source)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| {
                format!(
                    "cannot run {} ({e}); install a JDK or set PARTLOG_JAVAC",
                    javac.display()
                )
            })?;
        if !output.status.success() {
            return Err(format!(
                "javac failed: {}",
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        Ok(JavaDriver {
            java: tools.java.clone(),
            classpath: format!("{}:{}", classes.display(), tools.classpath),
            class,
        })
    });
    match compiled {
        Ok(driver) => Some(driver),
        Err(why) if kafka::running_in_ci() => {
            panic!("the Kafka driver {class} is required under CI=true: {why}")
        }
        Err(why) => {
            eprintln!("skipping: cannot compile the Kafka driver {class}: {why}");
            None
        }
    }
}

impl JavaDriver {
    /// Runs the driver on `commands`; one answer per command.
    pub fn ask(&self, commands: &[String]) -> Vec<String> {
        let mut child = Command::new(&self.java)
            .args([
                "-XX:TieredStopAtLevel=1",
                "-XX:+UseSerialGC",
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=off",
            ])
            .arg("-cp")
            .arg(&self.classpath)
            .arg(self.class)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the Java driver");
        let input: String = commands.iter().map(|c| format!("{c}\n")).collect();
        let mut stdin = child.stdin.take().expect("stdin");
        let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
        let output = child.wait_with_output().expect("the Java driver's output");
        writer
            .join()
            .expect("writer thread")
            .expect("write the commands");
        assert!(
            output.status.success(),
            "the Java driver {} failed ({}): {}",
            self.class,
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        let lines: Vec<String> = String::from_utf8(output.stdout)
            .expect("UTF-8 output")
            .lines()
            .map(str::to_owned)
            .collect();
        assert_eq!(lines.len(), commands.len(), "one answer per command");
        lines
    }
}

/// Lowercase hex, as the drivers take bytes.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The tests' reproducible random inputs, on the crate's one generator.
pub struct Random(SplitMix64);

#[allow(dead_code, reason = "each including test uses its own part")]
impl Random {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Random {
        Random(SplitMix64::new(seed))
    }

    /// 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// A number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0.below(n)
    }

    /// Up to `max` pieces of text, ASCII and multi-byte UTF-8 (two-unit UTF-16 too).
    pub fn text(&mut self, max: u64) -> String {
        const PIECES: [&str; 12] = ["a", "Z", "9", "-", "_", ".", "é", "ß", "😀", "中", " ", "~"];
        (0..self.below(max + 1))
            .map(|_| PIECES[self.below(12) as usize])
            .collect()
    }

    /// Up to `max` random bytes.
    pub fn blob(&mut self, max: u64) -> Vec<u8> {
        (0..self.below(max + 1))
            .map(|_| self.next() as u8)
            .collect()
    }

    /// True one time in three.
    pub fn maybe(&mut self) -> bool {
        self.below(3) == 0
    }
}
