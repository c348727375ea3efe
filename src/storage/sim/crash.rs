//! What a simulated crash leaves behind: the choice of a post-crash image.
//!
//! A crash keeps every node's durable state and then, for what was not yet durable, draws one
//! of the images a real machine could have written before it lost power:
//!
//! - **Directories.** Each directory keeps a random *prefix* of the entry changes made since its
//!   last `sync_dir` (see [`FsState::crash`] for why a prefix).
//! - **File lengths.** A file's length is its synced length or a length it had after one of its
//!   later writes or `set_len` calls.
//! - **File data.** Each unsynced write independently survives whole, is lost, or is torn: a
//!   prefix of it survives, ending at a 512-byte sector boundary of the file. Bytes no surviving
//!   write covers read as they were synced, or as zeros beyond the synced length.

use std::collections::BTreeSet;

use super::node::{FileOp, Node, NodeId, ROOT, len_u64, resize, write_into};
use super::observe::SimEvent;
use super::state::FsState;
use crate::rng::SplitMix64;

/// The size of a disk sector: the unit a torn write is torn in.
///
/// Disks promise that a sector is written whole or not at all (512 bytes on the drives Linux
/// assumes for atomicity), never that a multi-sector write is.
pub const SECTOR_SIZE: u64 = 512;

/// Which family of images a crash draws from.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashMode {
    /// Any legal image, drawn from the seed with the probabilities of the [`CrashConfig`].
    Random,
    /// The strictest image: every unsynced write, length change and directory operation is lost.
    /// What is left is exactly `SimStorage::durable_snapshot`.
    LoseUnsynced,
    /// The kindest image: everything survives, as if the machine had flushed all before dying.
    /// What is left is exactly the live `SimStorage::snapshot`, except the bytes of pages a
    /// failed sync lost (`SimFileState::lost_pages`), which no crash brings back; only handles and
    /// locks die.
    KeepUnsynced,
}

/// How a simulated crash treats unsynced state. Build it with the methods; the default is a
/// [`CrashMode::Random`] crash seeded from the simulator's own generator, where each unsynced
/// write is kept, torn or lost with equal probability.
#[derive(Debug, Clone, PartialEq)]
pub struct CrashConfig {
    seed: Option<u64>,
    mode: CrashMode,
    keep_write: f64,
    tear_write: f64,
}

impl Default for CrashConfig {
    fn default() -> Self {
        CrashConfig {
            seed: None,
            mode: CrashMode::Random,
            keep_write: 1.0 / 3.0,
            tear_write: 1.0 / 3.0,
        }
    }
}

impl CrashConfig {
    /// A random crash (the default).
    pub fn random() -> Self {
        CrashConfig::default()
    }

    /// A crash that loses everything unsynced ([`CrashMode::LoseUnsynced`]).
    pub fn lose_unsynced() -> Self {
        CrashConfig {
            mode: CrashMode::LoseUnsynced,
            ..CrashConfig::default()
        }
    }

    /// A crash that keeps everything unsynced ([`CrashMode::KeepUnsynced`]).
    pub fn keep_unsynced() -> Self {
        CrashConfig {
            mode: CrashMode::KeepUnsynced,
            ..CrashConfig::default()
        }
    }

    /// Draws this crash's choices from `seed` instead of from the simulator's generator, so that
    /// one image can be reproduced (every crash reports its seed in `CrashReport::seed`).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// The chances that an unsynced write survives whole (`keep`) and survives torn (`tear`);
    /// the rest of the time it is lost. Each is clamped to `[0, 1]`, and `tear` is lowered when
    /// the two add up to more than 1.
    pub fn write_outcomes(mut self, keep: f64, tear: f64) -> Self {
        let clamp = |p: f64| if p.is_nan() { 0.0 } else { p.clamp(0.0, 1.0) };
        self.keep_write = clamp(keep);
        self.tear_write = clamp(tear).min(1.0 - self.keep_write);
        self
    }

    /// No torn writes: each unsynced write survives whole or is lost, in the same proportion
    /// as before.
    pub fn without_tearing(mut self) -> Self {
        let whole = self.keep_write + (1.0 - self.keep_write - self.tear_write);
        self.keep_write = if whole > 0.0 {
            self.keep_write / whole
        } else {
            0.5
        };
        self.tear_write = 0.0;
        self
    }

    /// The mode.
    pub fn mode(&self) -> CrashMode {
        self.mode
    }
}

/// What one crash did, for test diagnostics. `seed` reproduces it.
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CrashReport {
    /// The seed the crash drew its choices from; `CrashConfig::random().seed(seed)` on the same
    /// state draws the same image.
    pub seed: u64,
    /// Unsynced writes (in files that survived) kept whole.
    pub writes_kept: u64,
    /// Unsynced writes kept in part, cut at a sector boundary.
    pub writes_torn: u64,
    /// Unsynced writes lost.
    pub writes_lost: u64,
    /// Files whose length fell back to an earlier one (their synced length or an intermediate).
    pub lengths_reverted: u64,
    /// Unsynced directory operations (in directories that survived) kept.
    pub dir_ops_kept: u64,
    /// Unsynced directory operations undone.
    pub dir_ops_undone: u64,
}

/// The fate of one unsynced write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WriteFate {
    Kept,
    /// The first `n` bytes survive; `offset + n` is a sector boundary strictly inside the write.
    Torn(u64),
    Lost,
}

/// Makes a crash's random choices, in a fixed order, from one seed.
struct Chooser {
    mode: CrashMode,
    keep_write: f64,
    tear_write: f64,
    rng: SplitMix64,
}

impl Chooser {
    /// How many of `pending` operations (the oldest) survive: a prefix length in `0..=pending`.
    fn surviving_prefix(&mut self, pending: usize) -> usize {
        match self.mode {
            CrashMode::Random => self.rng.up_to(pending),
            CrashMode::LoseUnsynced => 0,
            CrashMode::KeepUnsynced => pending,
        }
    }

    fn write_fate(&mut self, offset: u64, len: u64) -> WriteFate {
        match self.mode {
            CrashMode::LoseUnsynced => return WriteFate::Lost,
            CrashMode::KeepUnsynced => return WriteFate::Kept,
            CrashMode::Random => {}
        }
        let draw = self.rng.unit();
        if draw < self.keep_write {
            return WriteFate::Kept;
        }
        if draw >= self.keep_write + self.tear_write {
            return WriteFate::Lost;
        }
        // Sector boundaries strictly inside [offset, offset + len): where a tear can fall.
        let end = offset.saturating_add(len);
        let first = (offset / SECTOR_SIZE + 1) * SECTOR_SIZE;
        if first >= end {
            // A write inside one sector cannot tear: it is all or nothing.
            return WriteFate::Lost;
        }
        let boundaries = (end - 1) / SECTOR_SIZE - offset / SECTOR_SIZE;
        let boundary = first + self.rng.below(boundaries) * SECTOR_SIZE;
        WriteFate::Torn(boundary - offset)
    }

    /// A file's post-crash bytes, from its synced image and the operations since.
    fn file_image(
        &mut self,
        synced: &[u8],
        pending: &[FileOp],
        report: &mut CrashReport,
    ) -> Vec<u8> {
        // The lengths the file had: synced, then after each operation.
        let mut lengths = Vec::with_capacity(pending.len() + 1);
        let mut len = len_u64(synced);
        lengths.push(len);
        for op in pending {
            len = op.len_after(len);
            lengths.push(len);
        }
        // The length is the one after the first `persisted` operations: the inode's size is
        // metadata, and metadata reaches the journal in order.
        let persisted = self.surviving_prefix(pending.len());
        let final_len = lengths.get(persisted).copied().unwrap_or(len);
        if persisted < pending.len() && final_len != len {
            report.lengths_reverted += 1;
        }
        let mut data = synced.to_vec();
        for (position, op) in pending.iter().enumerate() {
            match op {
                // A truncation whose new size persisted also freed the blocks it cut: their old
                // bytes cannot come back.
                FileOp::SetLen(new_len) if position < persisted => resize(&mut data, *new_len),
                FileOp::SetLen(_) => {}
                FileOp::Write {
                    offset,
                    data: bytes,
                } => match self.write_fate(*offset, len_u64(bytes)) {
                    WriteFate::Kept => {
                        report.writes_kept += 1;
                        write_into(&mut data, *offset, bytes);
                    }
                    WriteFate::Torn(kept) => {
                        report.writes_torn += 1;
                        let prefix = usize::try_from(kept)
                            .ok()
                            .and_then(|n| bytes.get(..n))
                            .unwrap_or_default();
                        write_into(&mut data, *offset, prefix);
                    }
                    WriteFate::Lost => report.writes_lost += 1,
                },
            }
        }
        resize(&mut data, final_len);
        data
    }
}

impl FsState {
    /// Crashes the machine: every handle and lock dies, and the file system becomes one
    /// post-crash image chosen by `config`.
    ///
    /// Directory operations survive as a prefix, per directory. Journalling file systems (ext4,
    /// XFS) commit metadata changes to their journal in the order they were made, so a crash
    /// can cut the sequence of a directory's changes but not reorder it: a later create never
    /// survives while an earlier one is lost. Only the directory's own `sync_dir` is taken as
    /// making its changes durable, as POSIX promises; on ext4 an unrelated fsync often commits
    /// them too, which the simulator never relies on, so code that passes here does not depend
    /// on that luck. A rename between two directories is two changes, one in each (the name
    /// leaving and the name arriving), so it is durable once both directories are synced, and a
    /// crash before that can show the file under both names or under neither.
    ///
    /// Files are decided after the tree, so a file that no surviving name reaches (its creation
    /// undone, or its removal kept) is simply forgotten.
    pub(super) fn crash(&mut self, config: &CrashConfig) -> CrashReport {
        let seed = config.seed.unwrap_or_else(|| self.rng.next_u64());
        let mut chooser = Chooser {
            mode: config.mode,
            keep_write: config.keep_write,
            tear_write: config.tear_write,
            rng: SplitMix64::new(seed),
        };
        let mut report = CrashReport {
            seed,
            ..CrashReport::default()
        };
        self.generation += 1;
        self.locks.clear();
        self.ofd_locks.clear();
        self.file_system = crate::storage::CanonicalPath::unique_file_system();

        // The tree, from the root down, in name order so that the choices are reproducible.
        let mut reachable = BTreeSet::from([ROOT]);
        let mut files: BTreeSet<NodeId> = BTreeSet::new();
        let mut dirs = vec![ROOT];
        while let Some(dir_id) = dirs.pop() {
            let Some(Node::Dir(dir)) = self.nodes.get_mut(&dir_id) else {
                continue;
            };
            let kept = chooser.surviving_prefix(dir.pending.len());
            report.dir_ops_kept += u64::try_from(kept).unwrap_or(u64::MAX);
            report.dir_ops_undone += u64::try_from(dir.pending.len() - kept).unwrap_or(u64::MAX);
            let mut entries = std::mem::take(&mut dir.durable);
            for op in dir.pending.iter().take(kept) {
                op.apply(&mut entries);
            }
            dir.pending.clear();
            dir.live.clone_from(&entries);
            dir.durable = entries;
            let children: Vec<NodeId> = dir.live.values().copied().collect();
            for child in children {
                if reachable.insert(child) {
                    match self.nodes.get(&child) {
                        Some(Node::Dir(_)) => dirs.push(child),
                        Some(Node::File(_)) => {
                            files.insert(child);
                        }
                        None => {}
                    }
                }
            }
        }

        // The contents of every file that is still reachable, in node order.
        for id in files {
            if let Some(Node::File(file)) = self.nodes.get_mut(&id) {
                let image = chooser.file_image(&file.synced, &file.pending, &mut report);
                file.live.clone_from(&image);
                file.synced = image;
                file.pending.clear();
                // The page cache is gone: what a lost page held was never in `synced`.
                file.lost_pages.clear();
                if config.mode != CrashMode::KeepUnsynced {
                    // The modification time is metadata that only `sync_all` persists.
                    file.modified_ms = file.synced_modified_ms;
                }
                file.open_handles = 0;
            }
        }

        self.nodes.retain(|id, _| reachable.contains(id));
        self.stats.crashes += 1;
        self.record(SimEvent::Crash { seed });
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chooser(seed: u64) -> Chooser {
        let config = CrashConfig::default();
        Chooser {
            mode: config.mode,
            keep_write: config.keep_write,
            tear_write: config.tear_write,
            rng: SplitMix64::new(seed),
        }
    }

    #[test]
    fn tears_fall_only_on_sector_boundaries_inside_the_write() {
        let mut seen = BTreeSet::new();
        for seed in 0..500 {
            match chooser(seed).write_fate(100, 1000) {
                WriteFate::Torn(kept) => {
                    let boundary = 100 + kept;
                    assert_eq!(boundary % SECTOR_SIZE, 0);
                    assert!(boundary > 100 && boundary < 1100);
                    seen.insert(boundary);
                }
                WriteFate::Kept | WriteFate::Lost => {}
            }
        }
        assert_eq!(seen, BTreeSet::from([512, 1024]));
        for seed in 0..200 {
            // Inside one sector, or exactly one sector: nothing to tear at.
            assert_ne!(
                std::mem::discriminant(&chooser(seed).write_fate(600, 300)),
                std::mem::discriminant(&WriteFate::Torn(0))
            );
            assert!(!matches!(
                chooser(seed).write_fate(512, 512),
                WriteFate::Torn(_)
            ));
        }
    }

    #[test]
    fn outcome_probabilities_are_clamped_and_normalised() {
        let config = CrashConfig::random().write_outcomes(0.8, 0.5);
        assert_eq!(config.keep_write, 0.8);
        assert!((config.tear_write - 0.2).abs() < 1e-12);
        let config = CrashConfig::random().write_outcomes(f64::NAN, 2.0);
        assert_eq!((config.keep_write, config.tear_write), (0.0, 1.0));
        let config = CrashConfig::random()
            .write_outcomes(0.2, 0.4)
            .without_tearing();
        assert!(
            (config.keep_write - 1.0 / 3.0).abs() < 1e-12,
            "keep:lose stays 0.2:0.4"
        );
        assert_eq!(config.tear_write, 0.0);
    }
}
