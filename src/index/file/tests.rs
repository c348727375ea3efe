use super::*;
use crate::index::offset_index::OffsetEntry;
use crate::storage::OsStorage;

fn offset_entry(relative_offset: i32, position: i32) -> OffsetEntry {
    let mut bytes = relative_offset.to_be_bytes().to_vec();
    bytes.extend_from_slice(&position.to_be_bytes());
    OffsetEntry::decode(&bytes).unwrap()
}

#[test]
fn a_mapping_held_across_a_truncation_keeps_reading_the_old_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("00000000000000000000.index");
    let storage: Arc<dyn Storage> = Arc::new(OsStorage::new());
    let index = IndexFile::<OffsetEntry>::create(&storage, &path, 1000).unwrap();
    for n in 0..100 {
        index
            .append_with(|_, _| Ok(Some(offset_entry(n, n * 10))))
            .unwrap();
    }
    index.seal().unwrap();
    let held = index.source(true);
    assert!(matches!(held.kind, SourceKind::Mapped { .. }));

    index.truncate_to_entries(10).unwrap();

    // The held view still sees all 100 old entries, byte for byte.
    assert_eq!(held.len(), 100);
    for n in 0..100 {
        assert_eq!(held.get(n as usize).unwrap(), offset_entry(n, n * 10));
    }
    // The index and the file at the path hold the 10 kept ones.
    assert_eq!(index.entries(), 10);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 80);
    let fresh = index.source(true);
    assert_eq!(fresh.len(), 10);
    assert_eq!(fresh.get(9).unwrap(), offset_entry(9, 90));
    assert!(fresh.get(10).is_err());
}

fn file_mapped<E: Entry>(index: &IndexFile<E>) -> bool {
    index
        .state
        .read()
        .view
        .backing()
        .is_some_and(|backing| backing.mapped)
}

#[test]
fn sealed_open_maps_nothing_until_the_first_lookup() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("00000000000000000000.index");
    let storage: Arc<dyn Storage> = Arc::new(OsStorage::new());
    let index = IndexFile::<OffsetEntry>::create(&storage, &path, 1000).unwrap();
    index
        .append_with(|_, _| Ok(Some(offset_entry(1, 1))))
        .unwrap();
    drop(index);
    let sealed = IndexFile::<OffsetEntry>::open(&storage, &path, 1000, false).unwrap();
    assert!(matches!(
        sealed.state.read().view,
        View::Sealed {
            mapping: MapState::NotYet,
            ..
        }
    ));
    assert!(!file_mapped(&sealed));
    // Mutations and checks read without mapping.
    assert!(matches!(
        sealed.source(false).kind,
        SourceKind::Positional { .. }
    ));
    assert!(!file_mapped(&sealed));
    assert!(matches!(
        sealed.source(true).kind,
        SourceKind::Mapped { .. }
    ));
    assert!(file_mapped(&sealed));
    sealed.release_mapping();
    assert!(matches!(
        sealed.state.read().view,
        View::Sealed {
            mapping: MapState::NotYet,
            ..
        }
    ));
    // Forbidden, lookups read positionally and map nothing.
    sealed.source(true);
    sealed.set_mapping_allowed(false);
    assert!(matches!(
        sealed.state.read().view,
        View::Sealed {
            mapping: MapState::NotYet,
            ..
        }
    ));
    assert!(matches!(
        sealed.source(true).kind,
        SourceKind::Positional { .. }
    ));
    sealed.set_mapping_allowed(true);
    assert!(matches!(
        sealed.source(true).kind,
        SourceKind::Mapped { .. }
    ));
}

/// An index of `n` entries at `path`, sealed.
fn sealed_index(storage: &Arc<dyn Storage>, path: &Path, n: i32) -> IndexFile<OffsetEntry> {
    let index = IndexFile::<OffsetEntry>::create(storage, path, 1000).unwrap();
    for k in 0..n {
        index
            .append_with(|_, _| Ok(Some(offset_entry(k, k * 10))))
            .unwrap();
    }
    index.seal().unwrap();
    index
}

#[test]
fn an_abandoned_restart_gives_back_the_old_index_and_removes_the_new_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("00000000000000000000.index");
    let temp = truncation_temp_path(&path);
    let storage: Arc<dyn Storage> = Arc::new(OsStorage::new());
    let index = sealed_index(&storage, &path, 5);
    let before = std::fs::read(&path).unwrap();

    index.restart_at(&temp).unwrap();
    index
        .append_with(|_, _| Ok(Some(offset_entry(0, 0))))
        .unwrap();
    assert_eq!(index.entries(), 1);
    index.abandon_restart().unwrap();

    assert_eq!(index.path(), path);
    assert_eq!(index.entries(), 5);
    assert_eq!(index.source(true).get(4).unwrap(), offset_entry(4, 40));
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert!(!temp.exists(), "the rebuild's file is left");
    // Nothing to give back any more.
    index.abandon_restart().unwrap();
    assert_eq!(index.entries(), 5);
}

#[test]
fn a_finished_restart_replaces_the_old_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("00000000000000000000.index");
    let temp = truncation_temp_path(&path);
    let storage: Arc<dyn Storage> = Arc::new(OsStorage::new());
    let index = sealed_index(&storage, &path, 5);

    index.restart_at(&temp).unwrap();
    index
        .append_with(|_, _| Ok(Some(offset_entry(7, 70))))
        .unwrap();
    index.sync().unwrap();
    index.finish_restart(&path).unwrap();
    // Kept: an abandon after it changes nothing.
    index.abandon_restart().unwrap();

    assert_eq!(index.path(), path);
    assert_eq!(index.entries(), 1);
    assert_eq!(std::fs::read(&path).unwrap().len(), OffsetEntry::SIZE);
    assert!(!temp.exists());
}

#[test]
fn an_abandoned_restart_in_memory_gives_back_the_entries_and_the_seal() {
    let path = Path::new("00000000000000000000.index");
    let index = IndexFile::<OffsetEntry>::in_memory(path, 1000);
    index
        .append_with(|_, _| Ok(Some(offset_entry(3, 30))))
        .unwrap();
    index.seal().unwrap();

    index.restart_at(&truncation_temp_path(path)).unwrap();
    assert_eq!(index.entries(), 0);
    index.abandon_restart().unwrap();

    assert_eq!(index.path(), path);
    assert_eq!(index.entries(), 1);
    assert!(
        index
            .append_with(|_, _| Ok(Some(offset_entry(4, 40))))
            .is_err(),
        "the seal is given back"
    );
}
