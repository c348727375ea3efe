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
