//! Lookups against a model (std's `partition_point` over the entries), through all three read paths: the active index's
//! memory mirror, a sealed index's mapping, and positional reads (a storage that cannot map).
//! Sizes go past the warm section (1024 offset entries, 682 time entries) so that both halves
//! of the warm/cold split are exercised.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use partlog::Result;
use partlog::unstable::{
    FileLock, LockMode, Metadata, OffsetIndex, OffsetPosition, OpenMode, OsStorage, Storage,
    StorageFile, TimeIndex, TimestampOffset,
};
use proptest::prelude::*;

/// The OS storage, minus mappings: sealed indexes fall back to positional reads.
#[derive(Debug)]
struct NoMapStorage(OsStorage);

struct NoMapFile(Arc<dyn StorageFile>);

impl fmt::Debug for NoMapFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NoMapFile({:?})", self.0)
    }
}

impl StorageFile for NoMapFile {
    fn path(&self) -> &Path {
        self.0.path()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        self.0.read_at(buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.0.write_all_at(buf, offset)
    }
    fn len(&self) -> Result<u64> {
        self.0.len()
    }
    fn set_len(&self, len: u64) -> Result<()> {
        self.0.set_len(len)
    }
    fn sync_data(&self) -> Result<()> {
        self.0.sync_data()
    }
    fn sync_all(&self) -> Result<()> {
        self.0.sync_all()
    }
}

impl Storage for NoMapStorage {
    fn open(&self, path: &Path, mode: OpenMode) -> Result<Arc<dyn StorageFile>> {
        Ok(Arc::new(NoMapFile(self.0.open(path, mode)?)))
    }
    fn create_dir_all(&self, path: &Path) -> Result<()> {
        self.0.create_dir_all(path)
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.0.sync_dir(dir)
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.0.rename(from, to)
    }
    fn remove(&self, path: &Path) -> Result<()> {
        self.0.remove(path)
    }
    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.0.list(dir)
    }
    fn metadata(&self, path: &Path) -> Result<Metadata> {
        self.0.metadata(path)
    }
    fn lock(&self, path: &Path, mode: LockMode) -> Result<FileLock> {
        self.0.lock(path, mode)
    }
}

const BASE: i64 = 50_000;

/// Entry counts: small ones for the edges, large ones across the warm boundary.
fn entry_count() -> impl Strategy<Value = usize> {
    prop_oneof![0usize..12, 1000usize..2600]
}

fn offset_model(gaps: &[(u16, u16)]) -> Vec<OffsetPosition> {
    let (mut offset, mut position) = (BASE, 0u32);
    gaps.iter()
        .map(|&(offset_gap, position_gap)| {
            offset += i64::from(offset_gap) + 1;
            position += u32::from(position_gap) + 1;
            OffsetPosition { offset, position }
        })
        .collect()
}

// The model answers with std's `partition_point`, an implementation independent of partlog's
// warm/cold search (which a unit test also checks against a plain linear scan); a linear scan
// here would make the property quadratic in 2600-entry indexes.
fn offset_floor(model: &[OffsetPosition], target: i64) -> OffsetPosition {
    let below_or_at = model.partition_point(|e| e.offset <= target);
    below_or_at
        .checked_sub(1)
        .map(|n| model[n])
        .unwrap_or(OffsetPosition {
            offset: BASE,
            position: 0,
        })
}

fn check_offset_index(index: &OffsetIndex, model: &[OffsetPosition], extra: &[i64]) {
    assert_eq!(index.entries(), model.len());
    let mut targets = vec![i64::MIN, BASE - 1, BASE, i64::MAX];
    targets.extend_from_slice(extra);
    for e in model {
        targets.extend([e.offset - 1, e.offset, e.offset + 1]);
    }
    for target in targets {
        assert_eq!(
            index.lookup(target).unwrap(),
            offset_floor(model, target),
            "lookup({target})"
        );
    }
    let mut positions = vec![0u64, u64::MAX];
    for e in model.iter().step_by(7) {
        positions.extend([u64::from(e.position) - 1, u64::from(e.position) + 1]);
    }
    for position in positions {
        let expected = model
            .get(model.partition_point(|e| u64::from(e.position) < position))
            .copied();
        assert_eq!(
            index.upper_bound_by_position(position).unwrap(),
            expected,
            "upper_bound_by_position({position})"
        );
    }
    for n in (0..model.len()).step_by(97) {
        assert_eq!(index.entry(n).unwrap(), model[n]);
    }
    if let Some(last) = model.last() {
        assert_eq!(index.last_entry().unwrap(), *last);
        index.quick_check(u64::from(last.position) + 1).unwrap();
        index.full_check(u64::from(last.position) + 1).unwrap();
    }
}

fn time_model(gaps: &[(u16, u8)]) -> Vec<TimestampOffset> {
    let (mut timestamp, mut offset) = (1_700_000_000_000i64, BASE);
    gaps.iter()
        .map(|&(timestamp_gap, offset_gap)| {
            timestamp += i64::from(timestamp_gap) + 1;
            offset += i64::from(offset_gap % 4);
            TimestampOffset { timestamp, offset }
        })
        .collect()
}

fn time_floor(model: &[TimestampOffset], target: i64) -> TimestampOffset {
    let below_or_at = model.partition_point(|e| e.timestamp <= target);
    below_or_at
        .checked_sub(1)
        .map(|n| model[n])
        .unwrap_or(TimestampOffset {
            timestamp: -1,
            offset: BASE,
        })
}

fn check_time_index(index: &TimeIndex, model: &[TimestampOffset], extra: &[i64]) {
    assert_eq!(index.entries(), model.len());
    let mut targets = vec![i64::MIN, -1, 0, i64::MAX];
    targets.extend_from_slice(extra);
    for e in model {
        targets.extend([e.timestamp - 1, e.timestamp, e.timestamp + 1]);
    }
    for target in targets {
        assert_eq!(
            index.lookup(target).unwrap(),
            time_floor(model, target),
            "lookup({target})"
        );
    }
    for n in (0..model.len()).step_by(89) {
        assert_eq!(index.entry(n).unwrap(), model[n]);
    }
    if let Some(last) = model.last() {
        assert_eq!(index.last_entry().unwrap(), *last);
    }
    index.quick_check().unwrap();
    index.full_check().unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn offset_lookups_match_the_model_in_every_read_path(
        gaps in entry_count().prop_flat_map(|n| prop::collection::vec((0u16..40, 0u16..9000), n)),
        extra in prop::collection::vec(BASE - 10..BASE + 200_000, 0..50),
    ) {
        let model = offset_model(&gaps);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000050000.index");
        let os: Arc<dyn Storage> = Arc::new(OsStorage::new());
        let index = OffsetIndex::create(&os, &path, BASE, 10 << 20).unwrap();
        for e in &model {
            index.append(e.offset, e.position).unwrap();
        }
        check_offset_index(&index, &model, &extra); // memory mirror
        index.seal().unwrap();
        check_offset_index(&index, &model, &extra); // mapping
        let no_map: Arc<dyn Storage> = Arc::new(NoMapStorage(OsStorage::new()));
        let sealed = OffsetIndex::open(&no_map, &path, BASE, 10 << 20, false).unwrap();
        check_offset_index(&sealed, &model, &extra); // positional reads

        // Truncation agrees with the model in every path too.
        if let Some(cut) = model.get(model.len() / 2) {
            let kept: Vec<_> = model.iter().copied().filter(|e| e.offset < cut.offset).collect();
            sealed.truncate_to(cut.offset).unwrap();
            check_offset_index(&sealed, &kept, &extra);
            index.truncate_to(cut.offset).unwrap();
            check_offset_index(&index, &kept, &extra);
            index.make_writable().unwrap();
            check_offset_index(&index, &kept, &extra);
        }
    }

    #[test]
    fn time_lookups_match_the_model_in_every_read_path(
        gaps in entry_count().prop_flat_map(|n| prop::collection::vec((0u16..3000, any::<u8>()), n)),
        extra in prop::collection::vec(1_700_000_000_000i64..1_700_010_000_000, 0..50),
    ) {
        let model = time_model(&gaps);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000050000.timeindex");
        let os: Arc<dyn Storage> = Arc::new(OsStorage::new());
        let index = TimeIndex::create(&os, &path, BASE, 10 << 20).unwrap();
        for e in &model {
            prop_assert!(index.maybe_append(e.timestamp, e.offset, false).unwrap());
        }
        check_time_index(&index, &model, &extra);
        index.seal().unwrap();
        check_time_index(&index, &model, &extra);
        let no_map: Arc<dyn Storage> = Arc::new(NoMapStorage(OsStorage::new()));
        let sealed = TimeIndex::open(&no_map, &path, BASE, 10 << 20, false).unwrap();
        check_time_index(&sealed, &model, &extra);

        if let Some(cut) = model.get(model.len() / 2) {
            let kept: Vec<_> = model.iter().copied().filter(|e| e.offset < cut.offset).collect();
            sealed.truncate_to(cut.offset).unwrap();
            check_time_index(&sealed, &kept, &extra);
            index.make_writable().unwrap();
            index.truncate_to(cut.offset).unwrap();
            check_time_index(&index, &kept, &extra);
        }
    }
}
