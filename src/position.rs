//! [`ConsumerPosition`]: a consumer's committed position in a log, kept durably in a file of
//! its own until partlog has an offsets store (Kafka's `__consumer_offsets`).
//!
//! The file is replaced as `partlog.checkpoint`'s neighbours are (the cleaner checkpoint,
//! ARCHITECTURE.md §7): a temporary file, fsynced, renamed over the old one, and the directory
//! fsynced, all through the [`Storage`] seam. A crash leaves the old position or the new one,
//! never a torn file. The text is Kafka's checkpoint-file shape: a version line, then the
//! value.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Corruption, Error, Result};
use crate::log::Log;
use crate::storage::{OpenMode, OsStorage, Storage};

/// The format version, the file's first line.
const VERSION: &str = "0";
/// A valid file is a few dozen bytes; more is not a position file.
const MAX_FILE_BYTES: usize = 64;

/// A consumer's committed position: the next offset it will process, kept durably in one file.
///
/// [`commit`](Self::commit) returns once the new position is on disk: after a crash, of the
/// process or of the machine, [`open`](Self::open) finds the last committed position. Commit
/// after processing (at-least-once: a crash between the two replays what came after the last
/// commit).
///
/// ```
/// use partlog::{ConsumerPosition, Log, LogConfig, NewRecord, ReadBound};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let temp = tempfile::tempdir()?;
/// let log = Log::open(temp.path().join("events-0"), LogConfig::default())?;
/// log.append(&[NewRecord::now(None, Some(b"one")), NewRecord::now(None, Some(b"two"))])?;
///
/// let mut position = ConsumerPosition::open(temp.path().join("reporting.position"))?;
/// assert_eq!(position.committed(), None); // a new consumer starts at the log start
/// for record in log.records(position.resume_offset(&log), ReadBound::Durable) {
///     let record = record?;
///     // ... process the record, then:
///     position.commit(record.offset + 1)?;
/// }
/// let reopened = ConsumerPosition::open(position.path())?;
/// assert_eq!(reopened.committed(), position.committed());
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct ConsumerPosition {
    storage: Arc<dyn Storage>,
    path: PathBuf,
    committed: Option<i64>,
}

impl ConsumerPosition {
    /// Reads the position kept in the file at `path` (none yet if the file does not exist;
    /// nothing is created until the first commit). Its directory must exist.
    ///
    /// Fails with [`Error::Corrupt`] when the file holds anything but a position, and with
    /// [`Error::Io`] when it cannot be read.
    pub fn open(path: impl AsRef<Path>) -> Result<ConsumerPosition> {
        ConsumerPosition::open_with(Arc::new(OsStorage::new()), path)
    }

    /// [`open`](Self::open) on the given storage (for example the crash simulator).
    pub fn open_with(storage: Arc<dyn Storage>, path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let committed = read_position(&*storage, &path)?;
        Ok(ConsumerPosition {
            storage,
            path,
            committed,
        })
    }

    /// The file the position is kept in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The last committed position: the next offset to process. `None` before the first
    /// commit.
    pub fn committed(&self) -> Option<i64> {
        self.committed
    }

    /// Where to resume reading `log`: the committed position, moved up to the log start offset
    /// if retention or `delete_records_before` removed it meanwhile, and down to the log end
    /// offset if a truncation cut the log below it. The log start offset without a committed
    /// position (Kafka's `auto.offset.reset=earliest`).
    pub fn resume_offset(&self, log: &Log) -> i64 {
        let start = log.log_start_offset();
        match self.committed {
            Some(committed) => committed.max(start).min(log.log_end_offset().max(start)),
            None => start,
        }
    }

    /// Commits `next_offset` (one past the last record processed) and returns once it is
    /// durable. On an error the committed position stays what it was, in the file and here.
    ///
    /// Fails with [`Error::InvalidArgument`] for a negative offset.
    pub fn commit(&mut self, next_offset: i64) -> Result<()> {
        if next_offset < 0 {
            return Err(Error::InvalidArgument {
                why: format!("a consumer position is an offset, at least 0 (got {next_offset})"),
            });
        }
        write_position(&*self.storage, &self.path, next_offset)?;
        self.committed = Some(next_offset);
        Ok(())
    }
}

fn temp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

fn read_position(storage: &dyn Storage, path: &Path) -> Result<Option<i64>> {
    if !storage.exists(path)? {
        return Ok(None);
    }
    let file = storage.open(path, OpenMode::Read)?;
    let mut bytes = [0u8; MAX_FILE_BYTES + 1];
    let mut got = 0;
    while got < bytes.len() {
        let n = file.read_at(&mut bytes[got..], got as u64)?;
        if n == 0 {
            break;
        }
        got += n;
    }
    let corrupt = || Error::Corrupt {
        file: path.to_path_buf(),
        position: 0,
        what: Corruption::BadHeader(
            "a consumer position file holds the version line 0, then an offset of at least 0",
        ),
    };
    let text = bytes
        .get(..got)
        .filter(|_| got <= MAX_FILE_BYTES)
        .and_then(|bytes| std::str::from_utf8(bytes).ok())
        .ok_or_else(corrupt)?;
    let mut lines = text.strip_suffix('\n').ok_or_else(corrupt)?.split('\n');
    match (lines.next(), lines.next(), lines.next()) {
        (Some(VERSION), Some(offset), None) => offset
            .parse::<i64>()
            .ok()
            .filter(|offset| *offset >= 0)
            .map(Some)
            .ok_or_else(corrupt),
        _ => Err(corrupt()),
    }
}

fn write_position(storage: &dyn Storage, path: &Path, next_offset: i64) -> Result<()> {
    let temp = temp_path(path);
    let file = storage.open(&temp, OpenMode::Create)?;
    let text = format!("{VERSION}\n{next_offset}\n");
    let written = file
        .set_len(0)
        .and_then(|()| file.write_all_at(text.as_bytes(), 0))
        .and_then(|()| file.sync_all());
    drop(file);
    if let Err(error) = written {
        // Never renamed into place: a new commit writes a new temporary file.
        if let Err(cleanup) = storage.remove(&temp) {
            log::warn!("removing {}: {cleanup}", temp.display());
        }
        return Err(error);
    }
    storage.rename(&temp, path)?;
    storage.sync_dir(parent_dir(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_position_survives_a_reopen_and_a_commit_replaces_it() {
        let temp = tempfile::tempdir().unwrap();
        let path = temp.path().join("c.position");
        let mut position = ConsumerPosition::open(&path).unwrap();
        assert_eq!(position.committed(), None);
        position.commit(7).unwrap();
        position.commit(42).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "0\n42\n");
        assert_eq!(ConsumerPosition::open(&path).unwrap().committed(), Some(42));
        assert!(!temp_path(&path).exists());
    }

    #[test]
    fn a_file_that_is_not_a_position_is_corrupt_not_zero() {
        let temp = tempfile::tempdir().unwrap();
        let path = temp.path().join("c.position");
        for bad in [
            "",
            "0\n",
            "1\n5\n",
            "0\n-3\n",
            "0\nabc\n",
            "0\n5",
            "0\n5\n6\n",
        ] {
            std::fs::write(&path, bad).unwrap();
            match ConsumerPosition::open(&path) {
                Err(Error::Corrupt { file, .. }) => assert_eq!(file, path, "{bad:?}"),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_negative_commit_is_refused_and_changes_nothing() {
        let temp = tempfile::tempdir().unwrap();
        let mut position = ConsumerPosition::open(temp.path().join("c.position")).unwrap();
        position.commit(3).unwrap();
        assert!(matches!(
            position.commit(-1),
            Err(Error::InvalidArgument { .. })
        ));
        assert_eq!(position.committed(), Some(3));
    }
}
