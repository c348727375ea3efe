//! Fault injection: a small table of armed rules, each failing the Nth matching operation.
//!
//! Every simulated operation that reaches the file system asks the table first
//! ([`FaultTable::on_operation`]). A rule counts the operations it matches from the moment it is
//! armed; at its Nth it fires once and is spent. What firing does is the rule's
//! [`FaultEffect`]: fail with an errno, write only part of the buffer, or crash the machine. New
//! kinds of fault are new effects; the counting and matching stay as they are.

use std::io;

use super::crash::CrashConfig;

/// The kinds of simulated operation a [`FaultRule`] can aim at.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultOp {
    /// Every operation below.
    Any,
    /// `open` of a file that already exists (any mode).
    Open,
    /// `open` (or an exclusive `lock`) that creates a new file.
    Create,
    /// A directory made by `create_dir_all`, one per new directory.
    CreateDir,
    /// `read_at` and `map_read`.
    Read,
    /// `write_all_at`.
    Write,
    /// `set_len`.
    SetLen,
    /// `sync_data` and `sync_all`.
    Sync,
    /// `sync_dir`.
    SyncDir,
    /// `sync_file_system`.
    SyncFileSystem,
    /// `rename`.
    Rename,
    /// `remove`.
    Remove,
    /// `set_mtime`.
    SetMtime,
}

/// The error an injected fault returns.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FaultError {
    /// EIO, what a failing disk reports. `raw_os_error()` is `Some(5)`, as for a real one.
    #[default]
    Eio,
    /// ENOSPC: the disk is full (`ErrorKind::StorageFull`).
    Enospc,
    /// Any other kind, with the message "injected fault".
    Kind(io::ErrorKind),
}

impl FaultError {
    /// The `std::io::Error` a caller sees, built like the OS's own so that `kind()` and
    /// `raw_os_error()` tell faults apart exactly as they would on a real disk.
    pub(super) fn to_io_error(self) -> io::Error {
        match self {
            FaultError::Eio => rustix::io::Errno::IO.into(),
            FaultError::Enospc => rustix::io::Errno::NOSPC.into(),
            FaultError::Kind(kind) => io::Error::new(kind, "injected fault"),
        }
    }
}

/// What a rule does when it fires.
#[derive(Debug, Clone)]
pub(super) enum FaultEffect {
    /// The operation fails without effect, except that a failed sync drops the file's unsynced
    /// data (see the module docs of the simulator).
    Fail(FaultError),
    /// A write stores only its first `written` bytes, then fails: what `write_all_at` reports
    /// when the disk fills in the middle of a buffer.
    ShortWrite {
        /// How many bytes of the buffer reach the file.
        written: u64,
        /// The error returned after them.
        error: FaultError,
    },
    /// The machine crashes just before the operation, which therefore never happens.
    Crash(CrashConfig),
}

/// One armed fault: "the Nth operation of this kind (on these paths) fails like this".
///
/// Build it with [`fail`](Self::fail), [`short_write`](Self::short_write) or
/// [`crash`](Self::crash), refine it with the other methods, and arm it with
/// `SimStorage::inject`.
#[derive(Debug, Clone)]
pub struct FaultRule {
    op: FaultOp,
    nth: u64,
    path_suffix: Option<String>,
    effect: FaultEffect,
    /// Fires at every matching operation from the Nth on, until cancelled.
    persistent: bool,
}

impl FaultRule {
    /// The `nth` matching operation (1 is the next one; 0 counts as 1) fails with EIO.
    pub fn fail(op: FaultOp, nth: u64) -> Self {
        FaultRule {
            op,
            nth: nth.max(1),
            path_suffix: None,
            persistent: false,
            effect: FaultEffect::Fail(FaultError::Eio),
        }
    }

    /// The `nth` write stores only its first `written` bytes, then fails with ENOSPC.
    pub fn short_write(nth: u64, written: u64) -> Self {
        FaultRule {
            op: FaultOp::Write,
            nth: nth.max(1),
            path_suffix: None,
            persistent: false,
            effect: FaultEffect::ShortWrite {
                written,
                error: FaultError::Enospc,
            },
        }
    }

    /// The machine crashes just before the `nth` matching operation, with a random crash image
    /// drawn from the simulator's own generator (change it with
    /// [`crash_config`](Self::crash_config)). The operation fails, as every later call on a
    /// handle from before the crash does.
    pub fn crash(op: FaultOp, nth: u64) -> Self {
        FaultRule {
            op,
            nth: nth.max(1),
            path_suffix: None,
            persistent: false,
            effect: FaultEffect::Crash(CrashConfig::default()),
        }
    }

    /// The error to return, for [`fail`](Self::fail) and [`short_write`](Self::short_write)
    /// rules (a crash rule ignores it).
    pub fn error(mut self, error: FaultError) -> Self {
        match &mut self.effect {
            FaultEffect::Fail(e) | FaultEffect::ShortWrite { error: e, .. } => *e = error,
            FaultEffect::Crash(_) => {}
        }
        self
    }

    /// How a [`crash`](Self::crash) rule crashes (other rules ignore it).
    pub fn crash_config(mut self, config: CrashConfig) -> Self {
        if let FaultEffect::Crash(c) = &mut self.effect {
            *c = config;
        }
        self
    }

    /// Counts only operations on paths ending with `suffix` (for example `".log"`). The path is
    /// the absolute form of the path the file was opened at (for a rename, the source).
    pub fn on_paths_ending_with(mut self, suffix: impl Into<String>) -> Self {
        self.path_suffix = Some(suffix.into());
        self
    }

    /// Keeps firing at every matching operation from the Nth on, until
    /// `SimStorage::cancel_fault` or `SimStorage::clear_faults`: a disk that stays full until
    /// space is freed, rather than one failed call.
    pub fn until_cancelled(mut self) -> Self {
        self.persistent = true;
        self
    }

    fn matches(&self, op: FaultOp, path: &str) -> bool {
        (self.op == FaultOp::Any || self.op == op)
            && self
                .path_suffix
                .as_deref()
                .is_none_or(|suffix| path.ends_with(suffix))
    }
}

/// Names an armed rule, for `SimStorage::cancel_fault`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FaultId(u64);

#[derive(Debug)]
struct ArmedRule {
    id: FaultId,
    rule: FaultRule,
    seen: u64,
}

/// The armed rules, in the order they were armed.
#[derive(Debug, Default)]
pub(super) struct FaultTable {
    armed: Vec<ArmedRule>,
    next_id: u64,
}

impl FaultTable {
    pub(super) fn arm(&mut self, rule: FaultRule) -> FaultId {
        let id = FaultId(self.next_id);
        self.next_id += 1;
        self.armed.push(ArmedRule { id, rule, seen: 0 });
        id
    }

    pub(super) fn cancel(&mut self, id: FaultId) -> bool {
        let before = self.armed.len();
        self.armed.retain(|armed| armed.id != id);
        self.armed.len() != before
    }

    pub(super) fn clear(&mut self) {
        self.armed.clear();
    }

    pub(super) fn armed(&self) -> usize {
        self.armed.len()
    }

    /// Counts `op` on `path` against every armed rule, and returns the effect of the first rule
    /// that reaches its count (removing that rule). A rule whose count is reached while another
    /// fires keeps waiting and fires at the next matching operation, so no armed fault is lost.
    pub(super) fn on_operation(&mut self, op: FaultOp, path: &str) -> Option<FaultEffect> {
        let mut fired = None;
        for (index, armed) in self.armed.iter_mut().enumerate() {
            if armed.rule.matches(op, path) {
                armed.seen = armed.seen.saturating_add(1);
                if fired.is_none() && armed.seen >= armed.rule.nth {
                    fired = Some(index);
                }
            }
        }
        let index = fired?;
        if self.armed.get(index)?.rule.persistent {
            return self.armed.get(index).map(|armed| armed.rule.effect.clone());
        }
        let armed = self.armed.remove(index);
        Some(armed.rule.effect)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fires(table: &mut FaultTable, op: FaultOp, path: &str) -> bool {
        table.on_operation(op, path).is_some()
    }

    #[test]
    fn a_rule_fires_once_at_its_nth_matching_operation() {
        let mut table = FaultTable::default();
        table.arm(FaultRule::fail(FaultOp::Sync, 3).on_paths_ending_with(".log"));
        assert!(!fires(&mut table, FaultOp::Sync, "/d/a.log"));
        assert!(
            !fires(&mut table, FaultOp::Write, "/d/a.log"),
            "other kinds do not count"
        );
        assert!(
            !fires(&mut table, FaultOp::Sync, "/d/a.index"),
            "other paths do not count"
        );
        assert!(!fires(&mut table, FaultOp::Sync, "/d/b.log"));
        assert!(fires(&mut table, FaultOp::Sync, "/d/a.log"));
        assert!(
            !fires(&mut table, FaultOp::Sync, "/d/a.log"),
            "a fired rule is spent"
        );
        assert_eq!(table.armed(), 0);
    }

    #[test]
    fn a_persistent_rule_fires_until_cancelled() {
        let mut table = FaultTable::default();
        let id = table.arm(FaultRule::fail(FaultOp::Write, 2).until_cancelled());
        assert!(!fires(&mut table, FaultOp::Write, "/a"));
        for _ in 0..3 {
            assert!(fires(&mut table, FaultOp::Write, "/a"));
        }
        assert!(!fires(&mut table, FaultOp::Sync, "/a"));
        assert!(table.cancel(id));
        assert!(!fires(&mut table, FaultOp::Write, "/a"));
    }

    #[test]
    fn colliding_rules_fire_one_after_the_other() {
        let mut table = FaultTable::default();
        table.arm(FaultRule::fail(FaultOp::Any, 1));
        let second = table.arm(FaultRule::fail(FaultOp::Write, 1));
        assert!(fires(&mut table, FaultOp::Write, "/a"));
        assert_eq!(table.armed(), 1);
        assert!(fires(&mut table, FaultOp::Write, "/a"));
        assert!(!table.cancel(second), "already spent");
        let third = table.arm(FaultRule::fail(FaultOp::Read, 0));
        assert!(table.cancel(third));
        assert!(!fires(&mut table, FaultOp::Read, "/a"));
    }

    #[test]
    fn errors_look_like_the_operating_systems() {
        assert_eq!(FaultError::Eio.to_io_error().raw_os_error(), Some(5));
        assert_eq!(
            FaultError::Enospc.to_io_error().kind(),
            io::ErrorKind::StorageFull
        );
        assert_eq!(
            FaultError::Kind(io::ErrorKind::PermissionDenied)
                .to_io_error()
                .kind(),
            io::ErrorKind::PermissionDenied
        );
    }
}
