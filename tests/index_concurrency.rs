//! One writer, several concurrent readers: readers must always see whole, consistent entries
//! and never lose one that was published, through appends, sealing, truncation by rewrite,
//! reactivation and syncs.
//!
//! Every entry the writer ever appends satisfies a relation readers can check on their own
//! (position = 7 × relative offset / 3), so a torn or mixed-up entry fails the check.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use partlog::unstable::{OffsetIndex, OffsetPosition, OsStorage, Storage, TimeIndex};

const BASE: i64 = 1 << 40;
const READERS: usize = 3;
const MIN_READS: usize = 2000;

/// A small deterministic generator, one per reader.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, bound: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % bound.max(1)
    }
}

fn offset_entry(n: i64) -> OffsetPosition {
    OffsetPosition {
        offset: BASE + 3 * n,
        position: (7 * n) as u32,
    }
}

fn assert_consistent(entry: OffsetPosition) {
    if entry.offset == BASE {
        assert_eq!(entry.position, 0, "the empty answer is (base, 0)");
        return;
    }
    let relative = entry.offset - BASE;
    assert_eq!(relative % 3, 0, "torn or foreign entry {entry:?}");
    assert_eq!(
        i64::from(entry.position),
        7 * relative / 3,
        "torn entry {entry:?}"
    );
}

#[test]
fn offset_lookups_see_whole_entries_while_one_writer_appends_seals_and_truncates() {
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(OsStorage::new());
    let path = dir.path().join("00000000001099511627776.index");
    let index = Arc::new(OffsetIndex::create(&storage, &path, BASE, 1 << 20).unwrap());
    let stop = Arc::new(AtomicBool::new(false));

    let readers: Vec<_> = (0..READERS)
        .map(|reader| {
            let index = Arc::clone(&index);
            let stop = Arc::clone(&stop);
            thread::spawn(move || {
                let mut rng = Lcg(reader as u64 + 1);
                let mut reads = 0;
                while !stop.load(Ordering::Acquire) || reads < MIN_READS {
                    reads += 1;
                    let published = index.entries() as i64;
                    let target = BASE + rng.next(3 * published as u64 + 10) as i64;
                    let found = index.lookup(target).unwrap();
                    assert_consistent(found);
                    assert!(found.offset <= target, "{found:?} above target {target}");
                    // Entries 1..=3999 are never truncated: once published, a lookup finds them.
                    let floor_n = (target - BASE) / 3;
                    if floor_n >= 1 && floor_n <= published.min(3999) {
                        assert_eq!(found, offset_entry(floor_n), "lost entry {floor_n}");
                    }
                    assert_consistent(index.last_entry().unwrap());
                    if published > 0 {
                        let n = rng.next(published as u64) as usize;
                        // The writer may have truncated meanwhile: then the entry is gone.
                        if let Ok(entry) = index.entry(n) {
                            assert_eq!(entry, offset_entry(n as i64 + 1));
                        }
                    }
                }
                reads
            })
        })
        .collect();

    // The writer: appends, syncs now and then, seals, truncates by rewrite, reactivates.
    for n in 1..=6000 {
        let entry = offset_entry(n);
        index.append(entry.offset, entry.position).unwrap();
        if n % 1500 == 0 {
            index.sync().unwrap();
        }
    }
    index.seal().unwrap();
    index.truncate_to(offset_entry(4000).offset).unwrap();
    assert_eq!(index.entries(), 3999);
    index.make_writable().unwrap();
    for n in 4000..=8000 {
        let entry = offset_entry(n);
        index.append(entry.offset, entry.position).unwrap();
    }
    index.truncate_to(offset_entry(7000).offset).unwrap();
    stop.store(true, Ordering::Release);

    for reader in readers {
        assert!(reader.join().unwrap() >= MIN_READS);
    }
    assert_eq!(index.entries(), 6999);
    index.full_check(7 * 7000).unwrap();
}

#[test]
fn time_lookups_see_whole_entries_while_one_writer_appends() {
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(OsStorage::new());
    let path = dir.path().join("00000000001099511627776.timeindex");
    let index = Arc::new(TimeIndex::create(&storage, &path, BASE, 1 << 20).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    // Entry n: timestamp 1000 + 5n, offset BASE + 2n.
    let readers: Vec<_> = (0..READERS)
        .map(|reader| {
            let index = Arc::clone(&index);
            let stop = Arc::clone(&stop);
            thread::spawn(move || {
                let mut rng = Lcg(reader as u64 + 11);
                let mut reads = 0;
                while !stop.load(Ordering::Acquire) || reads < MIN_READS {
                    reads += 1;
                    let published = index.entries() as i64;
                    let target = 1000 + rng.next(5 * published as u64 + 20) as i64;
                    let found = index.lookup(target).unwrap();
                    if found.timestamp == -1 {
                        assert_eq!(found.offset, BASE);
                        // Entry 1 (timestamp 1005) is never removed: before it, nothing.
                        assert!(target < 1005 || published == 0);
                        continue;
                    }
                    assert!(found.timestamp <= target);
                    // Entries 1..=2999 are never truncated: once published, a lookup finds them.
                    let floor_n = (target - 1000) / 5;
                    if floor_n >= 1 && floor_n <= published.min(2999) {
                        assert_eq!(found.timestamp, 1000 + 5 * floor_n, "lost entry {floor_n}");
                    }
                    let n = (found.timestamp - 1000) / 5;
                    assert_eq!((found.timestamp - 1000) % 5, 0, "torn entry {found:?}");
                    assert_eq!(found.offset, BASE + 2 * n, "torn entry {found:?}");
                }
                reads
            })
        })
        .collect();

    for n in 1..=5000i64 {
        assert!(
            index
                .maybe_append(1000 + 5 * n, BASE + 2 * n, false)
                .unwrap()
        );
    }
    index.seal().unwrap();
    index.truncate_to(BASE + 2 * 3000).unwrap();
    index.make_writable().unwrap();
    for n in 3000..=4000i64 {
        assert!(
            index
                .maybe_append(1000 + 5 * n, BASE + 2 * n, false)
                .unwrap()
        );
    }
    stop.store(true, Ordering::Release);
    for reader in readers {
        assert!(reader.join().unwrap() >= MIN_READS);
    }
    assert_eq!(index.entries(), 4000);
    index.full_check().unwrap();
}
