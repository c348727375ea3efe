//! The examples' temporary directory. They depend on partlog alone (examples/Cargo.toml), so that
//! `cargo run --example quickstart` compiles nothing else, and so do without the `tempfile`
//! crate; in your own code `tempfile::tempdir()` does the same.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// A new, empty directory under the system's temporary directory, removed with its contents
/// when dropped.
pub struct ScratchDir {
    path: PathBuf,
}

impl ScratchDir {
    /// Creates `partlog-<name>-<process id>-<n>` under `std::env::temp_dir()`, with `n` the first
    /// number whose directory does not exist yet (a run killed earlier leaves its own behind).
    pub fn new(name: &str) -> io::Result<ScratchDir> {
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.subsec_nanos());
        let mut attempt = 0u32;
        loop {
            let path = std::env::temp_dir().join(format!(
                "partlog-{name}-{}-{}",
                std::process::id(),
                seed.wrapping_add(attempt)
            ));
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(ScratchDir { path }),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 1000 => {
                    attempt += 1
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        // Best effort, as tempfile's: what a failed removal leaves is under the temporary directory.
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
