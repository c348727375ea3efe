//! `SimStorage`: the in-memory, seeded crash simulator. (Placeholder: being written.)

use std::path::Path;
use std::sync::Arc;

use super::{FileLock, LockMode, Metadata, OpenMode, Storage, StorageFile};
use crate::error::{Error, Result};

/// How a simulated crash treats unsynced state.
#[derive(Debug, Clone, Default)]
pub struct CrashConfig {}

/// The in-memory crash simulator.
#[derive(Debug, Default)]
pub struct SimStorage {}

fn unsupported() -> Error {
    Error::Unsupported {
        what: "the simulator is not written yet".into(),
    }
}

impl Storage for SimStorage {
    fn open(&self, _path: &Path, _mode: OpenMode) -> Result<Arc<dyn StorageFile>> {
        Err(unsupported())
    }
    fn create_dir_all(&self, _path: &Path) -> Result<()> {
        Err(unsupported())
    }
    fn sync_dir(&self, _dir: &Path) -> Result<()> {
        Err(unsupported())
    }
    fn rename(&self, _from: &Path, _to: &Path) -> Result<()> {
        Err(unsupported())
    }
    fn remove(&self, _path: &Path) -> Result<()> {
        Err(unsupported())
    }
    fn list(&self, _dir: &Path) -> Result<Vec<String>> {
        Err(unsupported())
    }
    fn metadata(&self, _path: &Path) -> Result<Metadata> {
        Err(unsupported())
    }
    fn lock(&self, _path: &Path, _mode: LockMode) -> Result<FileLock> {
        Err(unsupported())
    }
}
